/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hostview.h: what the host itself sees of a container, independent of what
 * the engine reports and of anything inside the sandbox.
 *
 * A guest can lie from the inside (names, /proc states, reports) and can
 * confuse the engine (a PID 1 whose main thread exited alone reads as a
 * zombie: the runtime then calls the container stopped while its other
 * threads and children run on).  The host's kernel cannot be lied to: every
 * process of a container lives in the container's cgroup until it is dead,
 * and the runtime keeps a state entry per container until its task is gone.
 * This module reads those two and kills what it finds; the provider uses it
 * after every run, at every session end, between session calls and at
 * startup (docs/providers/docker.md, "What the host proves").  It also
 * reads what a container used, from the same cgroup's CPU and memory
 * accounting (usage.c; docs/api.md, "Usage").
 *
 * Every container is created under a cgroup parent of this daemon instance
 * (cgroupfs driver: "/plimsoll-<instance>"), so the instance's containers,
 * including any the engine forgot, are the children of one directory.
 *
 * Only the cgroupfs driver is supported; cgroup v1 (the pids controller's
 * hierarchy, and the cpuacct and memory ones for usage) and v2 (the unified
 * hierarchy) are both read.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../core/errors.h"

struct pl_hostview {
    char cg_root[256];      /* v1: the pids hierarchy's mount; v2: the unified mount */
    char mem_root[256];     /* v1: the memory hierarchy's mount; v2: the unified mount */
    char cpu_root[256];     /* v1: the cpuacct hierarchy's mount; v2: the unified mount */
    bool v2;                /* cgroup v2 */
    char parent[128];       /* the instance's cgroup parent, "/plimsoll-<instance>" */
    char runtime_root[256]; /* where the runtime keeps its per-container state */
    bool runsc;             /* the runtime is gVisor's runsc */
    char runtime_path[256]; /* the runtime's binary (runsc ps) */
};

/*
 * Find the cgroup mount (v1 pids hierarchy, else v2) and set the instance's
 * parent.  runtime_root is found later, from a live container
 * (pl_hostview_find_runtime_root).
 */
int pl_hostview_init(struct pl_hostview *hv, const char *instance, bool runsc,
                     const char *runtime_path, struct pl_error *err);

/* The cgroup path of container id (under the instance's parent), into buf. */
void pl_hostview_cgroup(const struct pl_hostview *hv, const char *id, char *buf, size_t len);

/*
 * The cgroup path (relative to the hierarchy's root) of host process pid,
 * for the hierarchy hv reads.  0, or -errno (-ESRCH: no such process).
 */
int pl_hostview_cgroup_of_pid(const struct pl_hostview *hv, pid_t pid, char *buf, size_t len);

/*
 * Every thread id in cgroup rel (a thread of a process whose main thread
 * already exited is listed too).  *ret is malloc'd (NULL when empty).
 * Returns 0; -ENOENT when the cgroup does not exist (nothing is in it);
 * another -errno when it could not be read.
 */
int pl_hostview_threads(const struct pl_hostview *hv, const char *rel, pid_t **ret, size_t *ret_n);

/*
 * The processes (thread-group ids, each once) of cgroup rel, read from its
 * threads: a process counts while any of its threads lives.  As
 * pl_hostview_threads.
 */
int pl_hostview_procs(const struct pl_hostview *hv, const char *rel, pid_t **ret, size_t *ret_n);

/*
 * SIGKILL every process in cgroup rel, again until the cgroup is empty or
 * gone, for at most timeout_ms.  exiting_is_gone: until every thread left
 * in it has begun to exit (the kernel's PF_EXITING: none can run a user
 * instruction again; the kernel may still be freeing its memory).
 * *ret_killed counts the signals sent (0: nothing lived).  Returns 0 when
 * the cgroup is empty or gone at the end (or all of it exiting), -ETIMEDOUT
 * when something still lives, another -errno when the cgroup could not be
 * read.
 */
int pl_hostview_kill_all(const struct pl_hostview *hv, const char *rel, unsigned timeout_ms,
                         bool exiting_is_gone, unsigned *ret_killed);

/*
 * How many processes of cgroup rel the kernel's OOM killer has killed
 * (v1: memory.oom_control's oom_kill; v2: memory.events'), read on the
 * host; < 0 (-errno) when it cannot be read.
 */
long long pl_hostview_oom_kills(const struct pl_hostview *hv, const char *rel);

/* What a cgroup used, as the host's kernel counts it. */
struct pl_hostview_usage {
    uint64_t user_us, system_us; /* CPU since the cgroup was made */
    uint64_t peak_bytes;         /* memory's peak since it was made or reset; 0: unknown */
};

/*
 * Read cgroup rel's CPU time (v1: cpuacct.usage_user and usage_sys, else
 * cpuacct.stat; v2: cpu.stat) and memory peak (v1:
 * memory.max_usage_in_bytes; v2: memory.peak, through peak_fd when a reset
 * opened one, else opened now).  0, or -errno (-ENOENT: the cgroup is
 * gone); a peak that cannot be read leaves peak_bytes 0.
 */
int pl_hostview_usage(const struct pl_hostview *hv, const char *rel, int peak_fd,
                      struct pl_hostview_usage *ret);

/*
 * Reset cgroup rel's memory peak to what it holds now.  v1: 0 written to
 * memory.max_usage_in_bytes (the cgroup's own peak: one reader at a time);
 * v2 (Linux 6.12 and later): a write to memory.peak, which holds only for
 * reads through the same descriptor, *ret_fd (the caller closes it; -1 on
 * v1).  0, or -errno when the kernel does not allow it (the peak then
 * counts from the cgroup's start).
 */
int pl_hostview_peak_reset(const struct pl_hostview *hv, const char *rel, int *ret_fd);

/*
 * Wait up to timeout_ms for cgroup rel to be empty or gone (the runtime
 * removes it right after the task ends).  0 when it is; -ETIMEDOUT when a
 * process is still in it.
 */
int pl_hostview_wait_empty(const struct pl_hostview *hv, const char *rel, unsigned timeout_ms);

/*
 * With a container id that is running now, find which directory the runtime
 * keeps its state in (runc: <root>/<id>/state.json; runsc:
 * <root>/<id>_sandbox:<id>.state).  Sets hv->runtime_root.
 */
int pl_hostview_find_runtime_root(struct pl_hostview *hv, const char *id, struct pl_error *err);

/* Whether the runtime still holds state for container id (its task lives). */
bool pl_hostview_runtime_state(const struct pl_hostview *hv, const char *id);

/*
 * Remove the runtime's state for container id, after its processes are
 * dead (what a runtime leaves when the engine forgot the container).
 */
void pl_hostview_remove_runtime_state(const struct pl_hostview *hv, const char *id);

/* Remove cgroup rel's directories (every v1 hierarchy, or v2's), once empty. */
void pl_hostview_remove_cgroup(const struct pl_hostview *hv, const char *rel);

/*
 * The ids of containers under the instance's cgroup parent and of runtime
 * state entries whose cgroup lies under it, each once: what this instance
 * may have left, whether or not the engine still lists it.  Calls fn for
 * each; returns how many were found.
 */
unsigned pl_hostview_leftovers(const struct pl_hostview *hv, void (*fn)(const char *id, void *ud),
                               void *ud);

/*
 * runsc only: the sandbox's own process list (gVisor's pids), asked of
 * runsc on the host (`runsc ps`), never of anything inside.  *ret is
 * malloc'd.  0, or < 0 with err.
 */
int pl_hostview_runsc_ps(const struct pl_hostview *hv, const char *id, long **ret, size_t *ret_n,
                         struct pl_error *err);

/*
 * runsc only: send signal `sig` ("KILL", "CONT") to gVisor pid `pid` of
 * sandbox id (`runsc kill --pid`).  0 or -1.
 */
int pl_hostview_runsc_signal(const struct pl_hostview *hv, const char *id, long pid,
                             const char *sig);

/*
 * The container's pid namespace's pid of host process pid (the last NSpid
 * field), or -1.  runc only: under runsc the guest's processes are not host
 * processes.
 */
long pl_hostview_ns_pid(pid_t pid);

/* The real group id of host process pid (the Gid line of its status), or -1. */
long pl_hostview_gid(pid_t pid);

/* Field 22 of /proc/<pid>/stat (start time in clock ticks), or 0. */
unsigned long long pl_hostview_start_time(pid_t pid);
