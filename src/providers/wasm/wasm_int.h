/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wasm_int.h: what the wasm provider's daemon-side files share, and
 * nothing outside src/providers/wasm/ includes.
 *
 * Each file runs in one place, and its folder says which: this folder's
 * own files in plimsolld, protocol/ in plimsolld and the workers,
 * *-worker/ in a worker process only, guest/ inside the wasm sandbox only.
 *
 * plimsolld (this header is theirs):
 *   wasm.c            the provider's ops (create, destroy, info, ready, run)
 *   wasm_int.h        this header
 *   proof.c           the startup proof create runs before the daemon serves
 *   module_pool.c     the module worker pool: starting it, one module run
 *   js_pool.h         the worker pool's API (also tools/, bench/, tests/)
 *   js_pool.c         the worker pool's processes
 *   js_pool_run.c     one run on the pool, over the protocol
 *
 * plimsolld and the workers:
 *   protocol/js_proto.[ch]  the frames between the pool and either worker
 *   protocol/wasi_job.[ch]  a module run in a RUN frame (plimsolld,
 *                           wasi-worker)
 *
 * plimsoll-js-worker:
 *   js-worker/js_worker.c       main, the engine's image, the serving loop,
 *                               the broker
 *   js-worker/wasi_host.[ch]    the JavaScript guest's WASI imports, its
 *                               captures
 *   js-worker/wasm_rt_host.[ch] the wasm2c runtime
 *
 * plimsoll-wasi-worker (the module runner, its three .cc files, is also
 * the wasi_runner library the unit tests and the fuzzer link):
 *   wasi-worker/wasi_worker.c       main, REFUSED or STARTED, the deadline's
 *                                   answer
 *   wasi-worker/wasi_runner.{h,cc}  the module runner's C API: a run from
 *                                   bytes to result
 *   wasi-worker/wasi_validate.cc    whether a module may run: its bounds,
 *                                   wabt's validator, plimsoll's rules
 *   wasi-worker/wasi_calls.cc       the WASI preview 1 calls a module can
 *                                   make
 *   wasi-worker/wasi_runner_int.hh  what the three C++ files share
 *
 * Both workers:
 *   common-worker/worker_seccomp.[ch]  the workers' system-call filter
 *
 * Inside the wasm sandbox (guest/, built by scripts/build/quickjs-wasm):
 *   guest/qjs_guest.c     the shim compiled with QuickJS
 *   guest/guest_abi.h     the guest's exports and imports (js_worker.c
 *                         includes it)
 *   guest/builtins.js     the built-ins QuickJS lacks (embedded by
 *                         scripts/build/embed)
 *   guest/format.js       console's value formatter (embedded by
 *                         scripts/build/embed)
 *   guest/pthread_shim.h  no-op pthreads for QuickJS's <pthread.h>
 * and, sent as a caller's are (proof.c; not part of the engine):
 *   guest/proof_hello.js  the startup proof's snippets: hello world,
 *   guest/proof_alloc.js  an allocation over its cap, a regex bomb, a
 *   guest/proof_regex.js  run after the deadline's
 *   guest/proof_again.js
 *   guest/proof_hello.wat the startup proof's modules (assembled by
 *   guest/proof_big.wat   wat2wasm): hello, too much memory, a loop
 *   guest/proof_loop.wat
 *
 * The files outside this folder's own have headers of their own and never
 * see this one.
 */
#pragma once

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../core/errors.h"
#include "js_pool.h"

struct pl_config;

/* ---- the provider (wasm.c, proof.c, module_pool.c) ------------------------ */

/* The worker executables, side by side in one directory. */
#define WASM_JS_WORKER "plimsoll-js-worker"
#define WASM_WASI_WORKER "plimsoll-wasi-worker"

/* The provider's state, made by create; set then, and read-only after
 * (each pool locks itself). */
struct wasm_state {
    struct pl_js_pool *pool;  /* JavaScript snippets (plimsoll-js-worker) */
    struct pl_js_pool *mpool; /* WASI modules (plimsoll-wasi-worker) */
    char wasi_worker[PATH_MAX];
    unsigned workers;
    unsigned max_timeout_ms;
    const char *engine; /* pl_js_quickjs_version(): static, whole */
    char worker[PATH_MAX];
};

/*
 * Run guests on the two pools and refuse to start unless each limit holds
 * (proof.c has the list).  0, or -1 with err filled (INTERNAL, naming what
 * did not hold).  Both pools must be running.
 */
int wasm_startup_proof(struct wasm_state *s, struct pl_error *err);

/*
 * Start s->mpool: s->workers module workers, found beside s->worker (its
 * path into s->wasi_worker), each with its address space capped at the
 * memory cap plus the interpreter's overhead.  0, or -1 with err filled;
 * the pool is the state's, freed with it (pl_js_pool_free).
 */
int wasm_module_pool_new(struct wasm_state *s, const struct pl_config *config,
                         struct pl_error *err);

/*
 * Run one WASI module on s->mpool (args and stdin may be NULL when their
 * counts are 0), its output also to sink as it comes (NULL: none).  As
 * pl_js_pool_run_stream(): 0 with *r filled (r->refused when the worker
 * refused the module; the caller frees it, pl_js_result_free), or -errno
 * (-ENOMEM when the job cannot be encoded; no error object).  Everything it
 * takes is borrowed for the call.  Any thread: a run waits for a worker.
 */
int wasm_module_run(struct wasm_state *s, const uint8_t *wasm, size_t wasm_len,
                    const char *const *args, size_t nargs, const char *in, size_t in_len,
                    const struct pl_js_limits *l, const struct pl_output_sink *sink,
                    struct pl_js_result *r);

/* ---- the pool's insides (js_pool.c, js_pool_run.c) ------------------------ */

/* One worker slot: its holder's (pl_js_pool_acquire) while busy, which
 * alone may stop, check or restart it. */
struct pl_js_worker {
    pid_t pid; /* 0: none */
    int fd;    /* -1: none */
    bool busy;
};

/* The pool: lock guards the slots' busy flags and respawns; cond wakes a
 * taker when a worker is given back.  The rest is set when it starts. */
struct pl_js_pool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned n;
    struct pl_js_worker *w;
    char *worker_path;
    char *argv[8];  /* worker_path, extra arguments, NULL */
    unsigned flags; /* PL_JS_POOL_* */
    uint64_t respawns;
};

/* Kill (SIGKILL) and reap a worker, close its socket; the slot is empty
 * after.  Safe on an empty slot. */
void pl_js_worker_stop(struct pl_js_worker *w);

/* True if an idle worker has died or sent something unexpected (or the
 * slot is empty); it does not block. */
bool pl_js_worker_stale(const struct pl_js_worker *w);

/* Replace the worker in slot w (counted in respawns), waiting for the new
 * one's HELLO.  0 or -errno; a failure leaves the slot empty, and the next
 * run retries. */
int pl_js_worker_restart(struct pl_js_pool *pool, struct pl_js_worker *w);

/* Take a free worker, waiting (without a bound) until one is; give it
 * back, which wakes one waiting taker.  Never NULL: the pool has at least
 * one slot. */
struct pl_js_worker *pl_js_pool_acquire(struct pl_js_pool *pool);
void pl_js_pool_release(struct pl_js_pool *pool, struct pl_js_worker *w);
