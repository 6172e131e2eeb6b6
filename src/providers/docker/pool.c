/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.c: docker's two warm pools, both the core's pool (core/pool.h).
 *
 *   runs      containers created and started with the run configuration
 *             at the default memory allowance, each waiting for its one
 *             run; kind 0 the snippet image, kind 1 the project image,
 *             SANDBOX_DOCKER_WARM of each
 *   sessions  session sandboxes running the interpreters callers ask for,
 *             each waiting for its one session; the kind is the mask of
 *             interpreters (1 python, 2 javascript, 3 both),
 *             SANDBOX_SESSION_POOL in all
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker_int.h"

/* ---- the runs' pool --------------------------------------------------------- */

static int run_choose(void *owner, const unsigned *waiting, unsigned total) {
    struct docker_state *s = owner;
    (void)total;
    return waiting[0] < s->set.warm ? 0 : waiting[1] < s->set.warm ? 1 : PL_POOL_FULL;
}

static int run_make(void *owner, int kind, void **ret_item) {
    struct docker_state *s = owner;
    char run_id[40] = "warm-";
    char *id = calloc(1, 72);
    if (!id || pl_random_hex(run_id + 5, sizeof(run_id) - 5, 12) < 0) {
        free(id);
        return -1;
    }
    struct pl_error e = {0};
    /* A snippet container's interpreters, a project container's steps,
     * start waiting with it. */
    if (dk_create_container(s, kind ? s->project_id : s->snippet_id, s->default_memory_mb, run_id,
                            NULL, kind ? "step" : "waiters", id, &e) < 0) {
        free(id);
        return -1;
    }
    char path[128];
    snprintf(path, sizeof(path), "/containers/%s/start", id);
    if (dk_api_expect(s, "POST", path, NULL, 204, NULL, &e) < 0) {
        dk_reap_later(s, id);
        free(id);
        return -1;
    }
    *ret_item = id;
    return 0;
}

static void run_discard(void *owner, void *item) {
    dk_reap_later(owner, item);
    free(item);
}

/* One that died (e.g. the engine restarted) is dropped, not used.  Asked
 * of the host, not the engine: the runtime still holds the container's
 * state and its cgroup has threads.  The engine's inspect carries the
 * bootstrap twice (about 57 KB to read and parse on every run's path),
 * and the host's word is the stronger one. */
static bool run_usable(void *owner, void *item) {
    struct docker_state *s = owner;
    char cg[200];
    pl_hostview_cgroup(&s->hv, item, cg, sizeof(cg));
    pid_t *threads = NULL;
    size_t n = 0;
    bool alive = pl_hostview_threads(&s->hv, cg, &threads, &n) == 0 && n > 0;
    free(threads);
    return alive && pl_hostview_runtime_state(&s->hv, item);
}

/* If the engine went away, what waits may be unusable when it comes back
 * (containerd can list a container as running whose stdin is wired to
 * nothing). */
static bool run_healthy(void *owner) {
    struct docker_state *s = owner;
    long st = 0;
    struct pl_error e = {0};
    return pl_docker_call(s->engine, "GET", "/_ping", NULL, 2000, &st, NULL, &e) == 0 && st == 200;
}

static const struct pl_pool_ops run_pool_ops = {
    .choose = run_choose,
    .make = run_make,
    .discard = run_discard,
    .usable = run_usable,
    .healthy = run_healthy,
    .hold_ms = WARM_HOLD_MS,
};

static int fit_kind(void *item, int kind, const void *want) {
    (void)item;
    return kind == *(const int *)want;
}

int dk_run_pool_start(struct docker_state *s) {
    return s->set.warm ? pl_pool_start(&s->run_pool, &run_pool_ops, s) : 0;
}

void dk_flush_warm(struct docker_state *s) {
    pl_pool_flush(&s->run_pool);
}

bool dk_take_warm(struct docker_state *s, int which, unsigned memory_mb, char ret_id[72]) {
    if (!s->set.warm || memory_mb != s->default_memory_mb)
        return false;
    char *id = pl_pool_take(&s->run_pool, fit_kind, &which);
    if (!id)
        return false;
    memcpy(ret_id, id, 72);
    free(id);
    return true;
}

void dk_warm_done(struct docker_state *s) {
    pl_pool_release(&s->run_pool);
}

/* ---- the sessions' pool ----------------------------------------------------- */

/* The mix callers asked for, weighed against what already waits: the mask
 * whose demand has the fewest waiting sandboxes per ask (both without any
 * ask yet). */
static int session_choose(void *owner, const unsigned *waiting, unsigned total) {
    struct docker_state *s = owner;
    if (total >= s->pool_n)
        return PL_POOL_FULL;
    int mask = 3;
    double best = -1;
    for (unsigned m = 1; m <= 3; m++) {
        unsigned d = atomic_load(&s->demand[m]);
        double score = d / (1.0 + waiting[m]);
        if (d && score > best) {
            best = score;
            mask = (int)m;
        }
    }
    return mask;
}

static int session_make(void *owner, int kind, void **ret_item) {
    struct docker_state *s = owner;
    char tag[17] = "pool-";
    if (pl_random_hex(tag + 5, sizeof(tag) - 5, 5) < 0)
        return -1;
    struct dsession *d = NULL;
    struct pl_error err = {0};
    const bool langs[2] = {kind & 1, (kind & 2) != 0};
    if (dk_session_create(s, tag, s->default_memory_mb, langs, &d, &err) < 0)
        return -1;
    d->mask = (unsigned)kind;
    *ret_item = d;
    return 0;
}

static void session_discard(void *owner, void *item) {
    struct dsession *d = item;
    dk_kill_container(owner, d->id);
    dk_reap_later(owner, d->id);
    dk_dsession_free(d);
}

static const struct pl_pool_ops session_pool_ops = {
    .choose = session_choose,
    .make = session_make,
    .discard = session_discard,
};

/* Every hinted interpreter running scores 2, any other sandbox 1: one that
 * lacks a hinted interpreter starts it when taken. */
static int fit_mask(void *item, int kind, const void *want) {
    (void)item;
    unsigned w = *(const unsigned *)want;
    return ((unsigned)kind & w) == w ? 2 : 1;
}

int dk_session_pool_start(struct docker_state *s) {
    return s->pool_n ? pl_pool_start(&s->session_pool, &session_pool_ops, s) : 0;
}

struct dsession *dk_pool_take(struct docker_state *s, unsigned memory_mb, unsigned want) {
    if (!s->pool_n)
        return NULL;
    if (atomic_fetch_add(&s->demand[want], 1) + 1 > 64) /* decay: recent asks weigh more */
        for (unsigned m = 1; m <= 3; m++)
            atomic_store(&s->demand[m], atomic_load(&s->demand[m]) / 2);
    if (memory_mb != s->default_memory_mb) {
        pl_pool_poke(&s->session_pool); /* the mix may have changed */
        return NULL;
    }
    return pl_pool_take(&s->session_pool, fit_mask, &want);
}

void dk_pools_stop(struct docker_state *s) {
    pl_pool_stop(&s->run_pool);
    pl_pool_stop(&s->session_pool);
}

/* ---- Describe ----------------------------------------------------------------- */

size_t dk_pools(void *state, struct pl_pool_report *ret, size_t max) {
    struct docker_state *s = state;
    size_t n = 0;
    if (s->set.warm && n < max) { /* SANDBOX_DOCKER_WARM of each image */
        ret[n] = (struct pl_pool_report){.name = "runs", .target = 2 * s->set.warm};
        pl_pool_stats(&s->run_pool, &ret[n++].stats);
    }
    if (s->pool_n && n < max) { /* SANDBOX_SESSION_POOL */
        ret[n] = (struct pl_pool_report){.name = "sessions", .target = s->pool_n};
        pl_pool_stats(&s->session_pool, &ret[n++].stats);
    }
    return n;
}
