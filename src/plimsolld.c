/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plimsolld.c: the daemon's main, an ordered recipe of checked steps.
 *
 *   1. settings (environment, read once)     -> exit 2 naming the setting
 *   2. callers (PLIMSOLL_KEYS_FILE)          -> exit 2
 *      grant profiles (PLIMSOLL_GRANTS_FILE) -> exit 2 naming the profile
 *   3. the provider and its startup proof    -> exit 2
 *   4. admission, the API, one Describe line in the log
 *   5. serve until SIGTERM/SIGINT, then drain in-flight runs and exit 0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/grants.h"
#include "core/admission.h"
#include "core/config.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/metrics.h"
#include "providers/provider.h"
#include "server/api.h"
#include "server/http.h"

static const char *env_lookup(const char *name, void *ud) {
    (void)ud;
    return secure_getenv(name);
}

static void startup_refused(const struct pl_error *err) {
    pl_log("error", "startup refused", json_pack("{s:s}", "error", err->message));
    fprintf(stderr, "plimsolld: %s\n", err->message);
}

int main(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "--version") == 0)) {
        puts("plimsolld 0.1.0");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: plimsolld   (configured by environment; see "
                        "docs/configuration.md)\n");
        return 2;
    }

    /* Signals are taken synchronously by this thread; every thread the
     * server starts inherits the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct pl_error err = {0};
    struct pl_config config;
    struct pl_keys *keys = NULL;
    struct pl_grants *grants = NULL;
    struct pl_provider *provider = NULL;
    struct pl_admission *admission = NULL;
    struct pl_metrics *metrics = NULL;
    struct pl_http *http = NULL;
    struct pl_sessions *sessions = NULL;
    int status = 2;

    if (pl_config_load(&config, env_lookup, NULL, &err) < 0)
        goto refused;
    if (pl_keys_load(config.keys_file, &keys, &err) < 0)
        goto refused;
    if (pl_keys_count(keys) == 0) {
        pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                     "PLIMSOLL_KEYS_FILE: %s lists no key; nobody could call this daemon",
                     config.keys_file);
        goto refused;
    }
    if (config.grants_file[0] &&
        pl_grants_load_file(config.grants_file, env_lookup, NULL, &grants, &err) < 0)
        goto refused;
    if (pl_provider_start(&config, &provider, &err) < 0)
        goto refused;

    unsigned capacity =
        pl_config_effective_concurrency(&config, pl_provider_memory_budget_applies(provider));
    unsigned per_key = config.per_key_concurrent < capacity ? config.per_key_concurrent : capacity;
    struct pl_admission_limits limits = {.capacity = capacity,
                                         .per_key = per_key,
                                         .rate_per_min = config.rate_per_min,
                                         .burst = config.rate_burst};
    metrics = pl_metrics_new();
    if (pl_admission_new(&limits, NULL, NULL, &admission) < 0 || !metrics) {
        pl_error_set(&err, PL_REASON_INTERNAL, "out of memory");
        goto refused;
    }

    struct pl_api api = {.config = &config,
                         .keys = keys,
                         .grants = grants,
                         .env = env_lookup,
                         .provider = provider,
                         .admission = admission,
                         .metrics = metrics,
                         .effective_concurrency = capacity};
    atomic_init(&api.draining, false);
    if (config.session_pool > 0 && config.max_sessions == 0) {
        pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                     "SANDBOX_SESSION_POOL: needs SANDBOX_MAX_SESSIONS (sessions are off)");
        goto refused;
    }
    if (config.max_sessions > 0) {
        if (!pl_provider_keeps_sessions(provider)) {
            pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                         "SANDBOX_MAX_SESSIONS: provider \"%s\" keeps no sessions",
                         pl_provider_name(provider));
            goto refused;
        }
        struct pl_sessions_limits sl = {.max_sessions = config.max_sessions,
                                        .lifetime_s = config.session_lifetime_s,
                                        .idle_s = config.session_idle_s,
                                        .memory_mb = config.memory_mb};
        if (pl_sessions_new(&sl, provider, admission, &sessions, &err) < 0)
            goto refused;
        api.sessions = sessions;
    }

    if (pl_http_start(&api, &http, &err) < 0)
        goto refused;

    json_t *describe = pl_api_describe(&api);
    pl_log("info", "describe",
           json_pack("{s:o, s:s}", "describe", describe, "listen", pl_http_address(http)));
    pl_log("info", "listening", json_pack("{s:s}", "address", pl_http_address(http)));

    int sig = 0;
    while (sigwait(&set, &sig) == 0 && sig == SIGHUP) {
        /* TLS's files again; the connections open keep theirs. */
        struct pl_error rerr = {0};
        if (pl_http_reload(http, &rerr) < 0)
            pl_log("error", "reload failed",
                   json_pack("{s:s, s:s}", "error", rerr.message, "kept",
                             "the TLS files read before"));
        else
            pl_log("info", "reloaded",
                   json_pack("{s:s}", "what", "TLS certificate, key and client certificates"));
    }
    pl_log("info", "draining",
           json_pack("{s:s, s:i}", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT", "in_flight",
                     (json_int_t)pl_admission_in_flight(admission)));
    atomic_store(&api.draining, true);
    pl_admission_close(admission);
    pl_http_quiesce(http);
    /* Sessions end (each after its call in progress), giving back their
     * slots; then runs (their deadlines bound this), then the answers' bytes. */
    pl_sessions_shutdown(sessions);
    unsigned left = pl_admission_wait_idle(admission, config.drain_timeout_ms);
    left += pl_http_wait_idle(http, left ? 0 : 5000);
    pl_http_stop(http);
    pl_log("info", "stopped", json_pack("{s:i}", "abandoned_runs", (json_int_t)left));
    status = left ? 1 : 0;
    goto out;

refused:
    startup_refused(&err);
out:
    pl_sessions_free(sessions);
    pl_provider_stop(provider);
    pl_admission_free(admission);
    pl_metrics_free(metrics);
    pl_keys_free(keys);
    pl_grants_free(grants);
    return status;
}
