/* SPDX-License-Identifier: Apache-2.0 */
/*
 * js_pool.h: the wasm provider's worker pool.  It runs untrusted
 * JavaScript snippets in QuickJS compiled to WebAssembly (wasm32-wasi,
 * translated to C by wasm2c) inside a pool of prefork'd, sandboxed worker
 * processes (plimsoll-js-worker); a second pool of the same kind runs WASI
 * modules (plimsoll-wasi-worker, PL_JS_POOL_MODULES).
 *
 * Each run gets a brand-new wasm instance (nothing survives between runs),
 * a linear-memory cap, a wall-clock deadline enforced inside the worker by
 * a timer (and by the pool with SIGKILL as a backstop), and capped stdout
 * and stderr, which a run can also have as the guest writes them
 * (pl_js_pool_run_stream()).  The guest can only compute, print
 * (console.*), read the stdin text it was given (readStdin()) and read the
 * clock, and, in a run given a broker (pl_js_pool_run_broker()), make HTTP
 * requests through it with plimsoll.request().
 *
 * docs/providers/wasm.md has the design and measured figures.
 */
#ifndef PLIMSOLL_JS_POOL_H
#define PLIMSOLL_JS_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/capture.h"
#include "../../core/errors.h"

/* Per-run limits.  All fields are required. */
struct pl_js_limits {
    uint64_t memory_bytes; /* wasm linear memory cap (rounded down to 64 KiB);
                              ~2 MiB is the practical minimum, max 4 GiB - 64 KiB */
    uint32_t timeout_ms;   /* wall-clock deadline for the guest, 1..3600000 */
    size_t stdout_cap;     /* bytes of stdout kept, <= 64 MiB */
    size_t stderr_cap;     /* bytes of guest stderr kept, <= 64 MiB */
};

struct pl_js_result {
    int exit_code; /* 0 ok, 1 uncaught exception (or OOM, or engine
                      trap), 124 deadline */
    bool timed_out;
    bool out_of_memory;
    /* stdout: at most stdout_cap bytes, an exact prefix (truncated: the
     * guest wrote more).  data is NUL-terminated; len excludes the NUL. */
    struct pl_output out;
    /* stderr: the guest's prefix (at most stderr_cap bytes), then possibly
     * one "plimsoll: ..." line (deadline, trap, OOM at start). */
    struct pl_output err;
    uint64_t duration_ns;  /* pool-side wall time of the run, from dispatch to
                              a worker until the result (excludes queueing) */
    bool trapped;          /* the engine hit a WebAssembly trap (e.g. call
                              stack exhausted); exit_code is 1 */
    uint64_t guest_ns;     /* worker-side time: instantiate .. end of guest */
    unsigned broker_calls; /* times the run's broker callback was called */
    /* Module pools only: the worker refused the module before any of its
     * code ran (its own REFUSED frame; no exit status means this).  err
     * holds the one-line reason; exit_code and the flags are 0. */
    bool refused;
    /* JavaScript pools: the run started from the worker's engine image
     * (false: its cap was below the image, it made its own engine). */
    bool from_image;
    /* What the run cost the worker process, as the daemon read the
     * kernel's accounting of it (/proc/<pid>/stat and status) just before
     * the run was sent and once its answer came: CPU time, in clock ticks'
     * steps, and the worker's peak resident set.  The peak is the run's
     * when the daemon could reset it before the run (maxrss_reset: it may
     * when it runs as root), else the worker's since it started.
     * usage_read is false when either reading failed. */
    bool usage_read;
    uint64_t cpu_user_us, cpu_system_us;
    uint64_t maxrss_bytes;
    bool maxrss_reset;
};

/**
 * pl_js_broker_fn - a run's HTTP broker, called on the pool thread running
 * the snippet, once per guest call, with the guest's request as JSON bytes
 * (exactly what the guest's JSON.stringify produced:
 * {"method":"GET","path":"/x","headers":{..},"body":""}, UTF-8, NUL-terminated
 * at req[req_len] for convenience).  Must set *ret_reply to malloc'd JSON bytes
 * (the pool frees them) and return 0; returning < 0 makes the guest's call
 * throw "broker unavailable".  It must return before deadline_ns
 * (CLOCK_MONOTONIC ns) — the callback bounds its own upstream call by it.  A
 * callback that overruns delays the end of the run (the guest is stopped
 * when the reply has been delivered, or the worker is killed once the
 * pool's 250 ms backstop has passed).
 */
typedef int (*pl_js_broker_fn)(void *userdata, const char *req, size_t req_len,
                               uint64_t deadline_ns, char **ret_reply, size_t *ret_reply_len);

/* A run's broker.  The pool only borrows it for the run. */
struct pl_js_broker {
    pl_js_broker_fn call;
    void *userdata;
    size_t max_request_bytes; /* 1..16 MiB; a larger guest request throws in the guest,
                                 never reaches call */
    size_t max_reply_bytes;   /* 1..16 MiB; a larger reply from call is replaced by an error
                                 (the guest's call throws "broker reply too large") */
    unsigned max_calls;       /* calls per run, 0 = no limit; past it the guest's call throws
                                 "call limit was reached" and call is not called */
};

struct pl_js_pool;

/**
 * pl_js_pool_new - start a pool of `workers` worker processes (1..256).
 *
 * The worker executable is the path compiled in as
 * PL_JS_WORKER_DEFAULT_PATH (see pl_js_pool_new_ex() to pass one
 * explicitly; the daemon always does).  Waits until every worker has reported ready.
 * On failure returns -errno and fills err (which may be NULL): what failed
 * and the errno behind it, reason INTERNAL.
 */
int pl_js_pool_new(unsigned workers, struct pl_js_pool **ret_pool, struct pl_error *err);

/**
 * pl_js_pool_new_ex - as pl_js_pool_new(), with an explicit worker path
 * (NULL means the same default as pl_js_pool_new()).
 */
int pl_js_pool_new_ex(unsigned workers, const char *worker_path, struct pl_js_pool **ret_pool,
                      struct pl_error *err);

/* pl_js_pool_new_args() flags.  PL_JS_POOL_MODULES: the workers run WASI
 * modules, and every run begins with STARTED or REFUSED. */
#define PL_JS_POOL_MODULES (1u << 0)

/**
 * pl_js_pool_new_args - as pl_js_pool_new_ex(), passing up to six extra
 * arguments (NULL-terminated array, may be NULL) to every worker it starts,
 * and `flags` (PL_JS_POOL_*).  The wasm provider's module pool uses it to
 * start plimsoll-wasi-worker with its address-space cap.
 *
 * In a module pool the guest's deadline and the backstop start when the
 * worker reports STARTED (validation is not the guest's time); the wait for
 * STARTED or REFUSED is bounded separately (10 s).  A REFUSED frame gives
 * a result with `refused` set; one on a JavaScript pool, or after STARTED,
 * is a protocol error (-EIO).
 */
int pl_js_pool_new_args(unsigned workers, const char *worker_path, const char *const *args,
                        unsigned flags, struct pl_js_pool **ret_pool, struct pl_error *err);

/**
 * pl_js_pool_run - run `code` as a global script named "<snippet>" with
 * `stdin_data` available through readStdin().
 *
 * Thread-safe: blocks until a worker is free, then until the run ends (at
 * most limits->timeout_ms plus a 250 ms backstop, plus worker respawn
 * time if the worker had to be replaced).  On success (return 0) fills
 * *ret_result, which the caller releases with pl_js_result_free().
 * Guest failures (exceptions, OOM, deadline, traps) are results, not
 * errors.  Returns < 0 only for infrastructure failures: -EINVAL (bad
 * arguments or limits), -E2BIG (code or stdin over the protocol maximum),
 * -ENOMEM, -EIO (the worker died during the run, e.g. it was killed; it has
 * been replaced), or the error from respawning a worker.
 */
int pl_js_pool_run(struct pl_js_pool *pool, const char *code, size_t code_len,
                   const char *stdin_data, size_t stdin_len, const struct pl_js_limits *limits,
                   struct pl_js_result *ret_result);

/**
 * pl_js_pool_run_broker - as pl_js_pool_run(), with a broker for this run
 * (NULL = none: plimsoll.hasGrant is false and the guest's
 * plimsoll.request() throws "this run has no grant").  -EINVAL also when
 * broker->call is NULL or a size limit is 0 or over 16 MiB.  The callback's
 * failures are the guest's (its call throws), never this function's.
 */
int pl_js_pool_run_broker(struct pl_js_pool *pool, const char *code, size_t code_len,
                          const char *stdin_data, size_t stdin_len,
                          const struct pl_js_limits *limits, const struct pl_js_broker *broker,
                          struct pl_js_result *ret_result);

/**
 * pl_js_pool_run_stream - as pl_js_pool_run_broker(), and with a sink
 * (NULL = none; else sink->write is required, -EINVAL without it) the run
 * streams: every byte the result keeps of the guest's stdout (fd 1) and
 * stderr (fd 2) is given to sink->write(ud, 0, fd, data, len) as the
 * worker reports it, while the guest runs, on the calling thread, in order
 * per stream; a guest write may arrive in several calls (each at most 64
 * KiB).  Per stream, what the sink got, joined, is byte for byte the
 * result's out and err: the pool's own "plimsoll: ..." line, and the
 * worker's, included; nothing past a cap.  When the run ends in an error
 * (< 0) the sink may already have had some of the guest's bytes.  sink is
 * borrowed for the call; write must not block (the deadline backstop is
 * not checked while it runs).  Works on both kinds of pool.
 */
int pl_js_pool_run_stream(struct pl_js_pool *pool, const char *code, size_t code_len,
                          const char *stdin_data, size_t stdin_len,
                          const struct pl_js_limits *limits, const struct pl_js_broker *broker,
                          const struct pl_output_sink *sink, struct pl_js_result *ret_result);

/**
 * pl_js_result_free - free the buffers of a result filled by
 * pl_js_pool_run() and zero it.  NULL-safe.
 */
void pl_js_result_free(struct pl_js_result *r);

/**
 * pl_js_pool_free - stop and reap all workers and free the pool.
 * NULL-safe.  No pl_js_pool_run() may be in progress or start afterwards.
 */
void pl_js_pool_free(struct pl_js_pool *pool);

/**
 * pl_js_pool_worker_pids - copy up to max worker pids into pids (0 for a
 * slot with no live worker).  Returns the number of slots.  For tests and
 * diagnostics.
 */
unsigned pl_js_pool_worker_pids(struct pl_js_pool *pool, int *pids, unsigned max);

/**
 * pl_js_pool_respawns - number of workers replaced since the pool was
 * created (crashes, deadline backstop kills, stale workers).
 */
uint64_t pl_js_pool_respawns(struct pl_js_pool *pool);

/**
 * pl_js_quickjs_version - static description of the JavaScript runtime the
 * workers run (the API's snippet engine), e.g.
 * "QuickJS 2021-03-27 (wasm32-wasi, wasm2c) with the ES2023 built-ins it
 * lacks added by plimsoll; not: ..." (guest/builtins.js).
 */
const char *pl_js_quickjs_version(void);

#endif
