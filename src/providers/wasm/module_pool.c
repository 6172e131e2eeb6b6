/* SPDX-License-Identifier: Apache-2.0 */
/*
 * module_pool.c: the wasm provider's second pool, which runs WASI modules.
 *
 * The pool is the JavaScript workers' (js_pool.h) with PL_JS_POOL_MODULES:
 * its workers are plimsoll-wasi-worker (wasi_worker.c), found beside
 * plimsoll-js-worker, each run begins with the worker's STARTED or
 * REFUSED frame, and the RUN frame's code bytes are a module job
 * (wasi_job.h).  wabt does not bound its own value stack, so each worker's
 * address space is capped at the run's memory cap plus the interpreter's
 * overhead (docs/providers/wasm-modules.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../provider.h"
#include "protocol/wasi_job.h"
#include "wasm_int.h"

/* Address space of a module worker beyond the memory cap: wabt's own value
 * and call stacks, the module's code, the C++ runtime. */
#define WASI_WORKER_OVERHEAD_MB 512u

int wasm_module_pool_new(struct wasm_state *s, const struct pl_config *config,
                         struct pl_error *err) {
    /* The module worker lives beside the JavaScript worker. */
    snprintf(s->wasi_worker, sizeof(s->wasi_worker), "%s", s->worker);
    char *slash = strrchr(s->wasi_worker, '/');
    if (slash)
        snprintf(slash + 1, sizeof(s->wasi_worker) - (size_t)(slash + 1 - s->wasi_worker), "%s",
                 WASM_WASI_WORKER);
    char as[32];
    snprintf(as, sizeof(as), "%u", config->memory_mb + WASI_WORKER_OVERHEAD_MB);
    const char *margs[] = {"--address-space-mb", as, NULL};
    if (pl_js_pool_new_args(s->workers, s->wasi_worker, margs, PL_JS_POOL_MODULES, &s->mpool, err) <
        0)
        return pl_error_wrap(err, "SANDBOX_PROVIDER=wasm: cannot start the module workers: ");
    return 0;
}

int wasm_module_run(struct wasm_state *s, const uint8_t *wasm, size_t wasm_len,
                    const char *const *args, size_t nargs, const char *in, size_t in_len,
                    const struct pl_js_limits *l, const struct pl_output_sink *sink,
                    struct pl_js_result *r) {
    size_t len = 0;
    char *job = pl_wasi_job_encode(args, nargs, wasm, wasm_len, &len);
    if (!job)
        return -ENOMEM;
    int rc = pl_js_pool_run_stream(s->mpool, job, len, in ? in : "", in_len, l, NULL, sink, r);
    free(job);
    return rc;
}
