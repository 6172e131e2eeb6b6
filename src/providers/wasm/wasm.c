/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wasm.c: the wasm provider, the process tier ("P").
 *
 * JavaScript snippets run on QuickJS compiled to WebAssembly and translated
 * to C by wasm2c, inside a pool of worker processes (js_pool.h);
 * docs/providers/wasm.md has the design.  The wall is the WebAssembly
 * sandbox plus what the worker process is allowed to do (seccomp, no fds,
 * no privileges): enough for the edit-run-debug loop, too weak for hostile
 * code, which is why the tier is "process".
 *
 * WASI modules run on wabt's interpreter in a second pool of worker
 * processes (module_pool.c), with the same limits.  Before the daemon
 * serves, create proves each limit on the provider itself (proof.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../broker/broker.h"
#include "../provider.h"
#include "js_pool.h"
#include "wasm_int.h"

#ifndef PL_LIBEXECDIR
#define PL_LIBEXECDIR "/usr/local/libexec/plimsoll"
#endif

#define MODULE_ENGINE "wabt 1.0.32 interpreter, WASI preview 1 subset (plimsoll-wasi-worker)"

/* The workers' directory: SANDBOX_WASM_WORKER_DIR, else plimsolld's own,
 * else libexecdir.  Both worker executables must be there. */
static int find_worker(const struct pl_config *config, char *ret, size_t len,
                       struct pl_error *err) {
    const char *set =
        config->lookup ? config->lookup("SANDBOX_WASM_WORKER_DIR", config->lookup_userdata) : NULL;
    char dirs[2][PATH_MAX] = {"", ""};
    if (set && *set) {
        snprintf(dirs[0], sizeof(dirs[0]), "%.4000s", set);
    } else {
        ssize_t n = readlink("/proc/self/exe", dirs[0], sizeof(dirs[0]) - 1);
        if (n > 0) {
            dirs[0][n] = '\0';
            char *slash = strrchr(dirs[0], '/');
            if (slash)
                *slash = '\0';
        }
        snprintf(dirs[1], sizeof(dirs[1]), "%s", PL_LIBEXECDIR);
    }
    for (int i = 0; i < 2 && dirs[i][0]; i++) {
        char other[PATH_MAX];
        int w = snprintf(ret, len, "%.3900s/%s", dirs[i], WASM_JS_WORKER);
        snprintf(other, sizeof(other), "%.3900s/%s", dirs[i], WASM_WASI_WORKER);
        if (w > 0 && (size_t)w < len && access(ret, X_OK) == 0 && access(other, X_OK) == 0)
            return 0;
    }
    if (set && *set)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_WASM_WORKER_DIR: %s does not hold executable %s and %s", set,
                            WASM_JS_WORKER, WASM_WASI_WORKER);
    return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                        "SANDBOX_WASM_WORKER_DIR: %s and %s were found neither beside plimsolld "
                        "nor in %s",
                        WASM_JS_WORKER, WASM_WASI_WORKER, PL_LIBEXECDIR);
}

static void wasm_destroy(void *state) {
    struct wasm_state *s = state;
    if (!s)
        return;
    pl_js_pool_free(s->pool);
    pl_js_pool_free(s->mpool);
    free(s);
}

static int wasm_create(const struct pl_config *config, void **ret_state, struct pl_error *err) {
    char worker[PATH_MAX];
    if (find_worker(config, worker, sizeof(worker), err) < 0)
        return -1;
    struct wasm_state *s = calloc(1, sizeof(*s));
    if (!s)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    /* One worker per run slot: admission never lets more runs in. */
    s->workers = pl_config_effective_concurrency(config, true);
    s->max_timeout_ms = config->max_timeout_ms;
    s->engine = pl_js_quickjs_version();
    memcpy(s->worker, worker, sizeof(s->worker));
    if (pl_js_pool_new_ex(s->workers, worker, &s->pool, err) < 0) {
        unsigned n = s->workers;
        free(s);
        return pl_error_wrap(err, "SANDBOX_PROVIDER=wasm: cannot start %u workers: ", n);
    }
    if (wasm_module_pool_new(s, config, err) < 0 || wasm_startup_proof(s, err) < 0) {
        wasm_destroy(s);
        return -1;
    }
    *ret_state = s;
    return 0;
}

static void wasm_info(void *state, struct pl_provider_info *ret) {
    struct wasm_state *s = state;
    *ret = (struct pl_provider_info){
        .tier = PL_TIER_PROCESS,
        .runtime = "wasm2c",
        .min_memory_mb = 1, /* any cap: below what a run needs, the run is out of memory */
        .snippet = {.supported = true,
                    .engine = s->engine,
                    .max_timeout_ms = s->max_timeout_ms,
                    .languages = {"javascript", NULL},
                    .grants = true,
                    .streams = true},
        .module = {.supported = true,
                   .engine = MODULE_ENGINE,
                   .max_timeout_ms = s->max_timeout_ms,
                   .streams = true},
        /* proof.c's steps, each of which the daemon refuses to start without. */
        .checks = {"a JavaScript hello world printed exactly what it should in a worker process",
                   "an allocation past a 16 MiB cap was refused as out of memory",
                   "a regular expression that never reaches QuickJS's interrupt check was "
                   "stopped at a 100 ms deadline, and the pool served the next snippet",
                   "a WASI module printed 42; one asking for more initial memory than a 16 MiB "
                   "cap was refused; a looping module was stopped at 100 ms",
                   NULL},
    };
}

/* Cheap: a worker that dies is respawned from this file, so it must stay. */
static int wasm_ready(void *state, struct pl_error *err) {
    struct wasm_state *s = state;
    if (access(s->worker, X_OK) != 0 || access(s->wasi_worker, X_OK) != 0)
        return pl_error_set(err, PL_REASON_NOT_READY,
                            "a worker executable (%s) is gone; workers could not be respawned",
                            access(s->worker, X_OK) != 0 ? s->worker : s->wasi_worker);
    return 0;
}

static size_t envelope(size_t body) {
    const size_t frame_max = 16u << 20;
    return body > (frame_max - (64u << 10)) / 6 ? frame_max : body * 6 + (64u << 10);
}

/* plimsoll.request() in a snippet: the pool hands the guest's JSON here. */
static int broker_call(void *userdata, const char *req, size_t req_len, uint64_t deadline_ns,
                       char **ret_reply, size_t *ret_reply_len) {
    (void)deadline_ns; /* the broker was made with the same run deadline */
    return pl_broker_handle_json(userdata, req, req_len, ret_reply, ret_reply_len);
}

static int wasm_run(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                    struct pl_run_result *ret, struct pl_error *err) {
    struct wasm_state *s = state;
    struct pl_js_limits l = {.memory_bytes = (uint64_t)ctx->memory_mb << 20,
                             .timeout_ms = ctx->timeout_ms,
                             .stdout_cap = ctx->output_bytes,
                             .stderr_cap = ctx->output_bytes};
    struct pl_js_result r = {0};
    int rc;
    /* The JSON envelope can make a body up to six times longer (\u00XX
     * escapes); the pool's frames stop at 16 MiB.  The broker's own
     * checks on the decoded body are the exact ones. */
    struct pl_js_broker broker = {.call = broker_call, .userdata = ctx->broker};
    if (ctx->broker) {
        broker.max_request_bytes = envelope(pl_broker_max_request_bytes(ctx->broker));
        broker.max_reply_bytes = envelope(pl_broker_max_response_bytes(ctx->broker));
        broker.max_calls = pl_broker_max_calls(ctx->broker) + 256; /* refusals included */
    }
    if (req->kind == PL_PAYLOAD_SNIPPET)
        rc = pl_js_pool_run_stream(s->pool, req->snippet.code, req->snippet.code_len,
                                   req->snippet.stdin_data ? req->snippet.stdin_data : "",
                                   req->snippet.stdin_len, &l, ctx->broker ? &broker : NULL,
                                   ctx->sink, &r);
    else if (req->kind == PL_PAYLOAD_MODULE)
        rc = wasm_module_run(s, req->module.wasm, req->module.wasm_len, req->module.args,
                             req->module.nargs, req->module.stdin_data, req->module.stdin_len, &l,
                             ctx->sink, &r);
    else
        return pl_error_set(err, PL_REASON_INTERNAL, "wasm: payload not dispatched here");
    if (rc < 0)
        return pl_error_errno(err, PL_REASON_INTERNAL, rc, "the %s worker failed around the run",
                              req->kind == PL_PAYLOAD_MODULE ? "module" : "JavaScript");
    if (r.refused) {
        /* The module worker's REFUSED frame, which it sends only before the
         * module's first instruction: nothing of the guest ran.  No exit
         * status means this; every status is a result below. */
        pl_error_set(err, PL_REASON_INVALID_REQUEST, "module.wasm_base64: %.*s",
                     (int)(r.err.len > 400 ? 400 : r.err.len), r.err.data ? r.err.data : "");
        pl_js_result_free(&r);
        return -1;
    }
    ret->exit_code = r.exit_code;
    ret->out = r.out.data;
    ret->out_len = r.out.len;
    ret->out_truncated = r.out.truncated;
    ret->err = r.err.data;
    ret->err_len = r.err.len;
    ret->err_truncated = r.err.truncated;
    r.out.data = r.err.data = NULL;
    ret->timed_out = r.timed_out;
    ret->out_of_memory = r.out_of_memory;
    /* What the worker process spent on the run (js_pool.h), its peak
     * resident set the run's when the pool could reset it. */
    if (r.usage_read)
        ret->usage = (struct pl_usage){.present = true,
                                       .cpu_user_us = r.cpu_user_us,
                                       .cpu_system_us = r.cpu_system_us,
                                       .memory_peak_bytes = r.maxrss_bytes,
                                       .wall_us = r.duration_ns / 1000u,
                                       .source = "worker"};
    else
        snprintf(ret->usage_absent, sizeof(ret->usage_absent),
                 "the worker process's accounting could not be read around the run");
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "wasm-%.12s", ctx->run_id);
    if (r.timed_out) {
        ret->outcome = PL_OUTCOME_TIMED_OUT;
        snprintf(ret->detail, sizeof(ret->detail), "the deadline of %u ms ended the run",
                 ctx->timeout_ms);
    } else {
        ret->outcome = PL_OUTCOME_COMPLETED;
        if (r.out_of_memory && req->kind == PL_PAYLOAD_MODULE)
            snprintf(ret->detail, sizeof(ret->detail),
                     "out of memory: the interpreter ran out of host memory for the module");
        else if (r.out_of_memory)
            snprintf(ret->detail, sizeof(ret->detail),
                     "out of memory: the run's memory cap is %u MiB", ctx->memory_mb);
        else if (r.trapped)
            snprintf(ret->detail, sizeof(ret->detail), "%s trapped",
                     req->kind == PL_PAYLOAD_MODULE ? "the module" : "the engine");
    }
    pl_js_result_free(&r);
    return 0;
}

const struct pl_provider_ops pl_wasm_ops = {
    .name = "wasm",
    .max_tier = PL_TIER_PROCESS,
    .memory_budget_applies = true,
    .create = wasm_create,
    .destroy = wasm_destroy,
    .info = wasm_info,
    .ready = wasm_ready,
    .run = wasm_run,
};
