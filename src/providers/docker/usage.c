/* SPDX-License-Identifier: Apache-2.0 */
/*
 * usage.c: what a run, a step or a session call cost, read from the
 * container's cgroup on the host (docs/api.md, "Usage").
 *
 * A reading is the cgroup's CPU counters and its memory peak.  A container
 * started for the run counts from zero (its cgroup is made at its start);
 * a warm container, a step and a session call count from a reading taken
 * when they begin, with the peak reset there when the kernel allows
 * (hostview.h): then the peak is the most the cgroup held during what was
 * measured, else since the container started.  A step's reset would hide
 * the run's own peak from before it, so the peak read just before each
 * reset is kept and the run's peak is the largest of them.  Under runsc the
 * cgroup holds gVisor's Sentry and Gofer, so their CPU and memory count.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "docker_int.h"

static const char *source_of(const struct docker_state *s) {
    return s->hv.runsc ? "gvisor" : "cgroup";
}

static void peak_close(struct dk_usage *u) {
    if (u->peak_open)
        close(u->peak_fd);
    u->peak_open = false;
}

void dk_usage_clear(struct dk_usage *u) {
    peak_close(u);
}

/* Begin measuring at a reading of cgroup cg taken now (the peak read just
 * before its reset is kept in *fold, which may be NULL). */
static void begin_now(struct docker_state *s, const char *cg, struct dk_usage *u, uint64_t *fold) {
    struct pl_hostview_usage now;
    if (pl_hostview_usage(&s->hv, cg, -1, &now) < 0) {
        snprintf(u->absent, sizeof(u->absent),
                 "the sandbox's cgroup could not be read when the run began");
        return;
    }
    if (fold && now.peak_bytes > *fold)
        *fold = now.peak_bytes;
    u->user_us = now.user_us;
    u->system_us = now.system_us;
    u->peak_seen = 0;
    u->peak_from_start = pl_hostview_peak_reset(&s->hv, cg, &u->peak_fd) == 0;
    u->peak_open = u->peak_fd >= 0;
    if (!u->peak_from_start)
        u->peak_seen = now.peak_bytes; /* since the container started */
    u->started = true;
}

void dk_usage_begin(struct docker_state *s, const char *id, bool fresh, struct dk_usage *u) {
    memset(u, 0, sizeof(*u));
    u->t0_ns = pl_now_ns();
    if (fresh) {
        /* Not started yet: its cgroup is made at its start, from zero. */
        u->started = true;
        u->peak_from_start = true;
        return;
    }
    char cg[200];
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    begin_now(s, cg, u, NULL);
}

/* A reading of cg against u's start into ret; with_memory: the peak too
 * (0 when unknown).  0, or -1 with u->absent set. */
static int reading(struct docker_state *s, const char *cg, struct dk_usage *u, bool with_memory,
                   struct pl_usage *ret) {
    struct pl_hostview_usage now;
    int r = pl_hostview_usage(&s->hv, cg, u->peak_open ? u->peak_fd : -1, &now);
    if (r < 0) {
        snprintf(u->absent, sizeof(u->absent),
                 r == -ENOENT ? "the sandbox's cgroup was gone before its usage could be read"
                              : "the sandbox's cgroup could not be read");
        return -1;
    }
    *ret = (struct pl_usage){
        .present = true,
        .cpu_user_us = now.user_us > u->user_us ? now.user_us - u->user_us : 0,
        .cpu_system_us = now.system_us > u->system_us ? now.system_us - u->system_us : 0,
        .wall_us = (pl_now_ns() - u->t0_ns) / 1000u,
        .source = source_of(s),
    };
    if (with_memory && now.peak_bytes)
        ret->memory_peak_bytes = now.peak_bytes > u->peak_seen ? now.peak_bytes : u->peak_seen;
    return 0;
}

void dk_usage_end(struct docker_state *s, const char *id, struct dk_usage *u) {
    if (!u || !u->started || u->taken)
        return;
    char cg[200];
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    u->taken = true;
    if (reading(s, cg, u, true, &u->final) < 0)
        u->final.present = false;
    peak_close(u);
}

void dk_usage_step_begin(struct docker_state *s, const char *id, struct dk_usage *run,
                         struct dk_usage *step) {
    memset(step, 0, sizeof(*step));
    step->t0_ns = pl_now_ns();
    if (run && run->taken)
        return;
    char cg[200];
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    /* v1's reset is the cgroup's own: the run's peak so far is read
     * first.  v2's is the step's descriptor's alone. */
    uint64_t before = 0;
    begin_now(s, cg, step, &before);
    if (run && !s->hv.v2 && before > run->peak_seen)
        run->peak_seen = before;
}

void dk_usage_step_end(struct docker_state *s, const char *id, struct dk_usage *run,
                       struct dk_usage *step, uint32_t duration_ms, struct pl_usage *ret) {
    memset(ret, 0, sizeof(*ret));
    if (!step->started) {
        peak_close(step);
        return;
    }
    char cg[200];
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    /* A step's peak only when it was reset at the step's start: else it is
     * the container's, which is no step's. */
    if (reading(s, cg, step, step->peak_from_start, ret) == 0) {
        ret->wall_us = (uint64_t)duration_ms * 1000u;
        if (run && !s->hv.v2 && ret->memory_peak_bytes > run->peak_seen)
            run->peak_seen = ret->memory_peak_bytes;
    }
    peak_close(step);
}

void dk_usage_result(const struct dk_usage *u, struct pl_run_result *ret) {
    if (u->taken && u->final.present) {
        ret->usage = u->final;
        return;
    }
    snprintf(ret->usage_absent, sizeof(ret->usage_absent), "%s",
             u->absent[0] ? u->absent : "the sandbox's usage was not read");
}
