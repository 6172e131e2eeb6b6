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
#include <time.h>
#include <unistd.h>

#include "broker/grants.h"
#include "core/admission.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/metrics.h"
#include "providers/provider.h"
#include "server/api.h"
#include "server/http.h"
#include "server/mcp_sessions.h"

static const char *env_lookup(const char *name, void *ud) {
    (void)ud;
    return secure_getenv(name);
}

static void startup_refused(const struct pl_error *err) {
    pl_log("error", "startup refused", json_pack("{s:s}", "error", err->message));
    fprintf(stderr, "plimsolld: %s\n", err->message);
}

/* Everything the daemon holds; daemon_clear releases it (the HTTP server
 * is stopped by daemon_serve, the one path that starts serving). */
struct daemon {
    struct pl_config config;
    struct pl_keys *keys;
    struct pl_grants *grants;
    struct pl_provider *provider;
    struct pl_admission *admission;
    struct pl_metrics *metrics;
    struct pl_sessions *sessions;
    struct pl_mcp_sessions *mcp_sessions;
    struct pl_http *http;
    struct pl_api api;
};

static void daemon_clear(struct daemon *d) {
    pl_sessions_free(d->sessions);
    pl_mcp_sessions_free(d->mcp_sessions);
    pl_provider_stop(d->provider);
    pl_admission_free(d->admission);
    pl_metrics_free(d->metrics);
    pl_keys_free(d->keys);
    pl_grants_free(d->grants);
}

/* Steps 1 to 4 above, up to the listening socket; -1 with err naming why
 * the daemon cannot start. */
static int daemon_start(struct daemon *d, struct pl_error *err) {
    struct pl_config *config = &d->config;
    if (pl_config_load(config, env_lookup, NULL, err) < 0)
        return -1;
    if (pl_keys_load(config->keys_file, &d->keys, err) < 0)
        return -1;
    if (pl_keys_count(d->keys) == 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "PLIMSOLL_KEYS_FILE: %s lists no key; nobody could call this daemon",
                            config->keys_file);
    if (config->grants_file[0] &&
        pl_grants_load_file(config->grants_file, env_lookup, NULL, &d->grants, err) < 0)
        return -1;
    if (pl_provider_start(config, &d->provider, err) < 0)
        return -1;

    unsigned capacity =
        pl_config_effective_concurrency(config, pl_provider_memory_budget_applies(d->provider));
    unsigned per_key =
        config->per_key_concurrent < capacity ? config->per_key_concurrent : capacity;
    struct pl_admission_limits limits = {.capacity = capacity,
                                         .per_key = per_key,
                                         .rate_per_min = config->rate_per_min,
                                         .burst = config->rate_burst};
    d->metrics = pl_metrics_new();
    if (pl_admission_new(&limits, NULL, NULL, &d->admission) < 0 || !d->metrics)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    pl_metrics_set_provider(d->metrics, pl_provider_name(d->provider));

    struct pl_api *api = &d->api;
    api->config = config;
    api->keys = d->keys;
    api->grants = d->grants;
    api->env = env_lookup;
    api->provider = d->provider;
    api->admission = d->admission;
    api->metrics = d->metrics;
    api->effective_concurrency = capacity;
    atomic_init(&api->draining, false);
    atomic_init(&api->leaving, false);
    if (config->session_pool > 0 && config->max_sessions == 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_SESSION_POOL: needs SANDBOX_MAX_SESSIONS (sessions are off)");
    if (config->max_sessions > 0) {
        if (!pl_provider_keeps_sessions(d->provider))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "SANDBOX_MAX_SESSIONS: provider \"%s\" keeps no sessions",
                                pl_provider_name(d->provider));
        struct pl_sessions_limits sl = {.max_sessions = config->max_sessions,
                                        .lifetime_s = config->session_lifetime_s,
                                        .max_lifetime_s = config->session_max_lifetime_s,
                                        .idle_s = config->session_idle_s,
                                        .memory_mb = config->memory_mb};
        if (pl_sessions_new(&sl, d->provider, d->admission, &d->sessions, err) < 0)
            return -1;
        api->sessions = d->sessions;
    }
    d->mcp_sessions = pl_mcp_sessions_new(config);
    if (!d->mcp_sessions)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory for the MCP sessions");
    api->mcp_sessions = d->mcp_sessions;
    return pl_http_start(api, &d->http, err);
}

/* Step 5: serve until SIGTERM or SIGINT (SIGHUP reads TLS's files again),
 * then drain and stop.  The exit status: 0, or 1 when runs were abandoned. */
static int daemon_serve(struct daemon *d, const sigset_t *set) {
    json_t *describe = pl_api_describe(&d->api);
    pl_log("info", "describe",
           json_pack("{s:o, s:s}", "describe", describe, "listen", pl_http_address(d->http)));
    pl_log("info", "listening", json_pack("{s:s}", "address", pl_http_address(d->http)));

    int sig = 0;
    while (sigwait(set, &sig) == 0 && sig == SIGHUP) {
        /* TLS's files again; the connections open keep theirs. */
        struct pl_error rerr = {0};
        if (pl_http_reload(d->http, &rerr) < 0)
            pl_log("error", "reload failed",
                   json_pack("{s:s, s:s}", "error", rerr.message, "kept",
                             "the TLS files read before"));
        else
            pl_log("info", "reloaded",
                   json_pack("{s:s}", "what", "TLS certificate, key and client certificates"));
    }
    const char *signame = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    if (d->config.drain_notice_ms) {
        /* Not ready first, still serving: a fleet's proxy sees /readyz
         * fail and sends new work elsewhere.  A second signal cuts it. */
        atomic_store(&d->api.leaving, true);
        pl_log("info", "leaving",
               json_pack("{s:s, s:i, s:i}", "signal", signame, "notice_ms",
                         (json_int_t)d->config.drain_notice_ms, "in_flight",
                         (json_int_t)pl_admission_in_flight(d->admission)));
        uint64_t until = pl_now_ns() + (uint64_t)d->config.drain_notice_ms * 1000000ull;
        for (uint64_t now = pl_now_ns(); now < until; now = pl_now_ns()) {
            struct timespec ts = {.tv_sec = (time_t)((until - now) / 1000000000ull),
                                  .tv_nsec = (long)((until - now) % 1000000000ull)};
            int got = sigtimedwait(set, NULL, &ts);
            if (got == SIGTERM || got == SIGINT)
                break;
        }
    }
    pl_log("info", "draining",
           json_pack("{s:s, s:i}", "signal", signame, "in_flight",
                     (json_int_t)pl_admission_in_flight(d->admission)));
    atomic_store(&d->api.draining, true);
    pl_admission_close(d->admission);
    pl_http_quiesce(d->http);
    /* Sessions end (each after its call in progress), giving back their
     * slots; then runs (their deadlines bound this), then the answers' bytes. */
    pl_sessions_shutdown(d->sessions);
    unsigned left = pl_admission_wait_idle(d->admission, d->config.drain_timeout_ms);
    left += pl_http_wait_idle(d->http, left ? 0 : 5000);
    pl_http_stop(d->http);
    pl_log("info", "stopped", json_pack("{s:i}", "abandoned_runs", (json_int_t)left));
    return left ? 1 : 0;
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

    PL_CLEANUP(daemon_clear) struct daemon d = {0};
    struct pl_error err = {0};
    if (daemon_start(&d, &err) < 0) {
        startup_refused(&err);
        return 2;
    }
    return daemon_serve(&d, &set);
}
