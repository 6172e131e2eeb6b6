/* SPDX-License-Identifier: Apache-2.0 */
/*
 * docker.c: the docker provider.  Hardened containers through the local
 * Docker Engine, on runc (paints "container") or on verified gVisor runsc
 * (paints "kernel"); docs/providers/docker.md is the reference.  This file
 * says what the provider is: its ops table, the startup (create: the
 * proof's order), destroy, what it proved (info) and readiness.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../core/cleanup.h"
#include "../../core/log.h"
#include "docker_int.h"
#include "../settings.h"

/* While calls come, re-check readiness each READY_KEEP_EVERY_MS so that a
 * call finds it standing (docker_ready); idle, ask the engine nothing. */
static void *ready_keeper_main(void *arg) {
    struct docker_state *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->keeper_stop) {
        struct timespec ts = pl_timespec_of(pl_deadline_in_ms(READY_KEEP_EVERY_MS));
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
        uint64_t now = pl_now_ns();
        bool wanted = s->asked_at_ns && now - s->asked_at_ns < READY_KEEP_NS;
        if (s->keeper_stop || !wanted)
            continue;
        pthread_mutex_unlock(&s->lock);
        struct pl_error e = {0};
        (void)dk_ready_refresh(s, &e); /* a failure stands as not ready until the next */
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static void docker_destroy(void *state) {
    struct docker_state *s = state;
    if (!s)
        return;
    dk_pools_stop(s);
    if (s->keeper_started) {
        pthread_mutex_lock(&s->lock);
        s->keeper_stop = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->keeper, NULL);
    }
    if (s->reaper_started) {
        pthread_mutex_lock(&s->lock);
        s->reaper_stop = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->reaper, NULL); /* it drains the queue before it stops */
    }
    pl_docker_engine_free(s->engine);
    free(s->set.seccomp);
    free(s->set.exec_filter_env);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static void docker_statep(struct docker_state **s) {
    docker_destroy(*s);
}

/* The least memory_mb a sandbox starts with.  runc: the engine's own floor.
 * runsc: gVisor's sandbox needs about 15 MiB to boot (6 starts in 10 fail at
 * 15, every one at 14); twice that, so a loaded host still starts it. */
static unsigned min_memory_mb(const char *runtime) {
    return strcmp(runtime, "runsc") == 0 ? 32 : 6;
}

/* The least SANDBOX_MEMORY_MB: the startup proof runs an exec beside a
 * sandbox's first process.  Under runsc that exec failed (exit -1) at 32 MiB
 * and passed at 40; twice 32.  Under runc the settings' own floor, 16, passes. */
static unsigned min_allowance_mb(const char *runtime) {
    return strcmp(runtime, "runsc") == 0 ? 64 : 0;
}

/* The engine, its runtime and the two images, as the settings name them;
 * the reaper and the ready keeper started.  *ret_info: the engine's /info. */
static int start_engine(const struct pl_config *config, struct docker_state *s, json_t **ret_info,
                        struct pl_error *err) {
    if (dk_load_settings(config, &s->set, err) < 0)
        return -1;
    /* A setting the runtime cannot honour: refused before the engine is asked. */
    if (config->memory_mb < min_allowance_mb(s->set.runtime))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_MEMORY_MB: %u is below %u, the least allowance under %s "
                            "(docs/providers/docker.md)",
                            config->memory_mb, min_allowance_mb(s->set.runtime), s->set.runtime);
    if (pl_docker_engine_new(pl_setting(config, "DOCKER_HOST"), &s->engine, err) < 0)
        return -1;
    long st = 0;
    if (pl_docker_call(s->engine, "GET", "/_ping", NULL, 5000, &st, NULL, err) < 0 || st != 200)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=docker: the engine at %s does not answer /_ping",
                            pl_docker_engine_socket(s->engine));
    if (dk_check_runtime(s, s->runtime_path, sizeof(s->runtime_path), ret_info, err) < 0)
        return -1;
    if (dk_inspect_image(s, "SANDBOX_DOCKER_SNIPPET_IMAGE", s->set.snippet_image, s->snippet_id,
                         sizeof(s->snippet_id), err) < 0 ||
        dk_inspect_image(s, "SANDBOX_DOCKER_PROJECT_IMAGE", s->set.project_image, s->project_id,
                         sizeof(s->project_id), err) < 0)
        return -1;
    char *hv = NULL;
    size_t hvlen = 0;
    if (pl_file_read("/proc/version", sizeof(s->host_version) - 1, &hv, &hvlen) == 0) {
        snprintf(s->host_version, sizeof(s->host_version), "%s", hv);
        pl_file_free(hv, hvlen);
    }
    if (pthread_create(&s->reaper, NULL, dk_reaper_main, s) == 0)
        s->reaper_started = true;
    if (pthread_create(&s->keeper, NULL, ready_keeper_main, s) == 0)
        s->keeper_started = true;
    return 0;
}

/* The host's view of the runtime found and proved on a first container;
 * what an earlier life of this instance left, killed and removed. */
static int prove_host(struct docker_state *s, struct pl_error *err) {
    if (dk_check_uid_unused(&s->set, err) < 0 ||
        pl_hostview_init(&s->hv, s->set.instance, strcmp(s->set.runtime, "runsc") == 0,
                         s->runtime_path, err) < 0)
        return -1;
    if (dk_hostview_discover(s, err) < 0) {
        char why[sizeof(err->message)];
        snprintf(why, sizeof(why), "%s", err->message);
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=docker: startup proof: the first container under %s "
                            "failed: %.400s",
                            s->set.runtime, why);
    }
    unsigned removed = pl_hostview_leftovers(&s->hv, dk_remove_leftover, s);
    if (removed)
        fprintf(stderr,
                "plimsolld: docker: killed and removed %u containers of instance %s found in the "
                "cgroup tree or the runtime's state\n",
                removed, s->set.instance);
    removed = 0;
    if (dk_delete_untracked(s, &removed, err) < 0)
        return -1;
    dk_delete_stale_dirs(s);
    if (removed)
        fprintf(stderr, "plimsolld: docker: deleted %u containers left by instance %s\n", removed,
                s->set.instance);
    return 0;
}

/* What the proof showed, in the proof's order, once every step passed. */
static void write_checks(struct docker_state *s, const json_t *info) {
    bool runsc = strcmp(s->set.runtime, "runsc") == 0;
    snprintf(s->checks[0], sizeof(s->checks[0]),
             "the engine is local (%.80s, docker %.16s) and lists the runtime %.8s (%.100s)",
             pl_docker_engine_socket(s->engine), pl_docker_server_version(info), s->set.runtime,
             s->runtime_path);
    snprintf(s->checks[1], sizeof(s->checks[1]),
             "a first container's processes were in the cgroup plimsoll asked for, its runtime "
             "state was found%s, and an exec in it ran under seccomp; what an earlier life left "
             "was killed and removed",
             runsc ? " (runsc ps listed it)" : "");
    snprintf(s->checks[2], sizeof(s->checks[2]),
             "a canary in each image (%.60s, %.60s), created as a run is, ran as uid %u with no "
             "capabilities under seccomp: / read-only, writes landed only in /tmp and /work, "
             "neither executes, the run's socket answered through its peer check, python3 and "
             "node started",
             s->set.snippet_image, s->set.project_image, s->set.uid);
    snprintf(s->checks[3], sizeof(s->checks[3]), "%s",
             runsc ? "under runsc each canary read a /proc/version that is not the host's: "
                     "gVisor's kernel answers the guest, so the mark is kernel"
                   : "under runc each canary read the host's /proc/version: the host's kernel "
                     "answers the guest, so the mark is container");
}

/* Each image's probe beside the canary: python3 and node run in them;
 * with sessions asked for, what the session image (the project image)
 * imports for the cells' display kinds; the tier and the descriptions
 * Describe gives. */
static int prove_images(struct docker_state *s, const json_t *info, bool sessions,
                        struct pl_error *err) {
    PL_AUTO_JSON json_t *langs = json_object();
    PL_CLEANUP(dk_canary_stop) struct canary can = {0};
    if (dk_canary_start(s, &can, err) < 0)
        return -1;
    if (dk_probe_image(s, s->set.snippet_image, s->snippet_id, false, &can, langs, err) < 0 ||
        dk_probe_image(s, s->set.project_image, s->project_id, sessions, &can, langs, err) < 0)
        return -1;
    if (!json_object_get(langs, "python") || !json_object_get(langs, "javascript"))
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=docker: the images must run python3 and node; the "
                            "probe found %zu of them",
                            json_object_size(langs));
    s->tier = strcmp(s->set.runtime, "runsc") == 0 ? PL_TIER_KERNEL : PL_TIER_CONTAINER;
    snprintf(s->engine_desc, sizeof(s->engine_desc),
             "docker %.16s, %.8s, seccomp %.40s; %.64s (%.19s); %.32s",
             pl_docker_server_version(info), s->set.runtime, s->set.seccomp_name,
             s->set.snippet_image, s->snippet_id,
             json_string_value(json_object_get(langs, "python")));
    /* langs' values read "Python 3.11.2" and "node v18.20.4". */
    snprintf(s->project_desc, sizeof(s->project_desc), "docker %.8s; %.64s (%.19s); %.32s",
             s->set.runtime, s->set.project_image, s->project_id,
             json_string_value(json_object_get(langs, "javascript")));
    write_checks(s, info);
    if (sessions)
        snprintf(s->checks[4], sizeof(s->checks[4]),
                 "in the session image (%.64s) python3, as the sandbox user, %s matplotlib with "
                 "the Agg backend and matplotlib.pyplot and %s pandas",
                 s->set.project_image,
                 s->image_display.matplotlib ? "imported" : "could not import",
                 s->image_display.pandas ? "imported" : "could not import");
    return 0;
}

/* One real session proved, its languages kept; the sessions' pool. */
static int start_sessions(struct docker_state *s, unsigned memory_mb, struct pl_error *err) {
    PL_AUTO_JSON json_t *cell_langs = json_array();
    int pr = dk_session_proof(s, memory_mb, cell_langs, err);
    size_t k;
    json_t *e;
    json_array_foreach(cell_langs, k, e) {
        if (k < 2)
            s->session_langs[k] =
                strcmp(json_string_value(e), "python") == 0 ? "python" : "javascript";
    }
    if (pr < 0)
        return -1;
    snprintf(s->checks[5], sizeof(s->checks[5]),
             "one real session: a call's processes were ended before the next call and its file "
             "outlived a pause and a resume; cells kept a value in %s%s%s and began in a fresh "
             "interpreter",
             s->session_langs[0] ? s->session_langs[0] : "no language",
             s->session_langs[1] ? " and " : "", s->session_langs[1] ? s->session_langs[1] : "");
    s->sessions_on = true;
    if (dk_session_pool_start(s) < 0)
        pl_log("warn", "docker: the sessions' warm pool could not start; sessions open cold", NULL);
    return 0;
}

static int docker_create(const struct pl_config *config, void **ret_state, struct pl_error *err) {
    PL_CLEANUP(docker_statep) struct docker_state *s = calloc(1, sizeof(*s));
    if (!s)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    pthread_mutex_init(&s->lock, NULL);
    pl_cond_init_monotonic(&s->cond);
    s->max_timeout_ms = config->max_timeout_ms;
    s->default_memory_mb = config->memory_mb;
    s->session_disk_mb = config->session_disk_mb;
    s->pool_n = config->session_pool;
    PL_AUTO_JSON json_t *info = NULL;
    if (start_engine(config, s, &info, err) < 0 || prove_host(s, err) < 0 ||
        prove_images(s, info, config->max_sessions > 0, err) < 0)
        return -1;
    if (config->max_sessions > 0 && start_sessions(s, config->memory_mb, err) < 0)
        return -1;
    s->ready_at_ns = pl_now_ns();
    if (dk_run_pool_start(s) < 0)
        pl_log("warn", "docker: the warm pool could not start; runs start cold", NULL);
    *ret_state = PL_TAKE_PTR(s);
    return 0;
}

static void docker_info(void *state, struct pl_provider_info *ret) {
    struct docker_state *s = state;
    *ret = (struct pl_provider_info){
        .tier = s->tier,
        .runtime = s->set.runtime,
        .min_memory_mb = min_memory_mb(s->set.runtime),
        .snippet = {.supported = true,
                    .engine = s->engine_desc,
                    .max_timeout_ms = s->max_timeout_ms,
                    .languages = {"python", "javascript", NULL},
                    .grants = true,
                    .streams = true},
        .project = {.supported = true,
                    .engine = s->project_desc,
                    .max_timeout_ms = s->max_timeout_ms,
                    .languages = {"python", "javascript", NULL},
                    .grants = true,
                    .streams = true},
        .module = {.supported = true,
                   .engine = "node WASI preview1 (node:wasi) in the snippet image",
                   .max_timeout_ms = s->max_timeout_ms,
                   .streams = true},
        .session = {.supported = s->sessions_on,
                    .engine = s->sessions_on ? s->project_desc : "",
                    .max_timeout_ms = s->max_timeout_ms,
                    .languages = {s->session_langs[0], s->session_langs[1], NULL},
                    .grants = s->sessions_on,
                    .streams = s->sessions_on},
        .files = {.supported = s->sessions_on,
                  .engine = s->sessions_on ? "plimsoll's files reader in the session's sandbox, "
                                             "as the calls' user"
                                           : "",
                  .max_timeout_ms = s->max_timeout_ms},
        .artifacts = {.project = true, .snippet = true},
    };
    /* Display kinds follow the cells the proof ran and what the session
     * image imported; with sessions off there are none. */
    bool py = false, js = false;
    for (size_t i = 0; s->sessions_on && s->session_langs[i]; i++) {
        py = py || strcmp(s->session_langs[i], "python") == 0;
        js = js || strcmp(s->session_langs[i], "javascript") == 0;
    }
    ret->display.python = py;
    ret->display.javascript = js;
    ret->display.matplotlib = py && s->image_display.matplotlib;
    ret->display.pandas = py && s->image_display.pandas;
    size_t n = 0;
    for (size_t i = 0; i < sizeof(s->checks) / sizeof(s->checks[0]); i++)
        if (s->checks[i][0])
            ret->checks[n++] = s->checks[i];
}

/* Cheap: the engine answers, the runtime is still registered at the same
 * path, both tags still name the inspected images.  Stands for
 * READY_CACHE_NS, kept standing by the keeper while calls come. */
static int docker_ready(void *state, struct pl_error *err) {
    struct docker_state *s = state;
    uint64_t now = pl_now_ns();
    pthread_mutex_lock(&s->lock);
    bool fresh = s->ready_at_ns && now - s->ready_at_ns < READY_CACHE_NS;
    s->asked_at_ns = now;
    pthread_mutex_unlock(&s->lock);
    return fresh ? 0 : dk_ready_refresh(s, err);
}

int dk_ready_refresh(struct docker_state *s, struct pl_error *err) {
    uint64_t now = pl_now_ns();
    long st = 0;
    if (pl_docker_call(s->engine, "GET", "/_ping", NULL, 2000, &st, NULL, err) < 0 || st != 200) {
        dk_flush_warm(s);
        return pl_error_set(err, PL_REASON_NOT_READY, "the docker engine does not answer");
    }
    char path[256], id[80];
    if (dk_check_runtime(s, path, sizeof(path), NULL, err) < 0 ||
        strcmp(path, s->runtime_path) != 0)
        return pl_error_set(err, PL_REASON_NOT_READY,
                            "the runtime %s is no longer registered as at startup", s->set.runtime);
    if (dk_inspect_image(s, "SANDBOX_DOCKER_SNIPPET_IMAGE", s->set.snippet_image, id, sizeof(id),
                         err) < 0 ||
        strcmp(id, s->snippet_id) != 0 ||
        dk_inspect_image(s, "SANDBOX_DOCKER_PROJECT_IMAGE", s->set.project_image, id, sizeof(id),
                         err) < 0 ||
        strcmp(id, s->project_id) != 0)
        return pl_error_set(err, PL_REASON_NOT_READY,
                            "an image tag no longer names the image inspected at startup");
    pthread_mutex_lock(&s->lock);
    s->ready_at_ns = now;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

void dk_invalidate_ready(struct docker_state *s) {
    pthread_mutex_lock(&s->lock);
    s->ready_at_ns = 0;
    pthread_mutex_unlock(&s->lock);
    dk_flush_warm(s);
}

const struct pl_provider_ops pl_docker_ops = {
    .name = "docker",
    .max_tier = PL_TIER_KERNEL,
    .memory_budget_applies = true,
    .create = docker_create,
    .destroy = docker_destroy,
    .info = docker_info,
    .ready = docker_ready,
    .run = dk_run,
    .session_open = dk_session_open,
    .session_run = dk_session_run,
    .session_pause = dk_session_pause,
    .session_resume = dk_session_resume,
    .session_close = dk_session_close,
    .session_status = dk_session_status,
    .pools = dk_pools,
};
