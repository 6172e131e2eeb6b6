/*
 * wasm.c: the wasm provider, the process tier ("P").
 *
 * JavaScript snippets run on QuickJS compiled to WebAssembly and translated
 * to C by wasm2c, inside a pool of worker processes (engine/js_engine.h);
 * docs/providers/wasm.md has the design.  The wall is the WebAssembly
 * sandbox plus what the worker process is allowed to do (seccomp, no fds,
 * no privileges): enough for the edit-run-debug loop, too weak for hostile
 * code, which is why the tier is "process".
 *
 * Startup proof (create): before the daemon serves, the provider runs three
 * guests on itself and refuses to start unless
 *   1. a hello world prints exactly what it should,
 *   2. an allocation past a 16 MiB cap is refused as out of memory,
 *   3. a regex bomb (a loop that never reaches QuickJS's interrupt check)
 *      is stopped at a 100 ms deadline, after which the pool still serves.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../provider.h"
#include "engine/js_engine.h"

#ifndef PL_LIBEXECDIR
#define PL_LIBEXECDIR "/usr/local/libexec/plimsoll"
#endif

#define WORKER_NAME "plimsoll-js-worker"
#define PROOF_DEADLINE_MS 100u
#define PROOF_MARGIN_MS 1000u

struct wasm_state {
    struct pl_js_pool *pool;
    unsigned workers;
    unsigned max_timeout_ms;
    char engine[128];
    char worker[PATH_MAX];
};

/* The worker: SANDBOX_WASM_WORKER, else beside plimsolld, else libexecdir. */
static int find_worker(const struct pl_config *config, char *ret, size_t len,
                       struct pl_error *err) {
    const char *set =
        config->lookup ? config->lookup("SANDBOX_WASM_WORKER", config->lookup_userdata) : NULL;
    if (set && *set) {
        if (access(set, X_OK) != 0)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "SANDBOX_WASM_WORKER: %s is not an executable file", set);
        snprintf(ret, len, "%s", set);
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            int w = snprintf(ret, len, "%.3900s/%s", self, WORKER_NAME);
            if (w > 0 && (size_t)w < len && access(ret, X_OK) == 0)
                return 0;
        }
    }
    snprintf(ret, len, "%s/%s", PL_LIBEXECDIR, WORKER_NAME);
    if (access(ret, X_OK) == 0)
        return 0;
    return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                        "SANDBOX_WASM_WORKER: %s was found neither beside plimsolld nor in %s",
                        WORKER_NAME, PL_LIBEXECDIR);
}

static int proof_run(struct wasm_state *s, const char *code, uint64_t memory, unsigned timeout,
                     struct pl_js_result *r, struct pl_error *err) {
    struct pl_js_limits l = {
        .memory_bytes = memory, .timeout_ms = timeout, .stdout_cap = 4096, .stderr_cap = 4096};
    int rc = pl_js_pool_run(s->pool, code, strlen(code), "", 0, &l, r);
    if (rc < 0)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: the worker failed (%s)",
                            strerror(-rc));
    return 0;
}

static int startup_proof(struct wasm_state *s, struct pl_error *err) {
    struct pl_js_result r = {0};

    if (proof_run(s, "console.log(6 * 7)", 64u << 20, 5000, &r, err) < 0)
        return -1;
    bool ok = r.exit_code == 0 && r.out_len == 3 && memcmp(r.out, "42\n", 3) == 0;
    pl_js_result_free(&r);
    if (!ok)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: hello world did not print 42");

    if (proof_run(s, "const b = new ArrayBuffer(64 * 1024 * 1024); console.log(b.byteLength)",
                  16u << 20, 5000, &r, err) < 0)
        return -1;
    ok = r.out_of_memory && r.exit_code != 0 && r.out_len == 0;
    pl_js_result_free(&r);
    if (!ok)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: a 64 MiB allocation under a "
                            "16 MiB cap was not refused");

    if (proof_run(s, "/(a+)+$/.test('a'.repeat(40) + 'b'); console.log('escaped')", 64u << 20,
                  PROOF_DEADLINE_MS, &r, err) < 0)
        return -1;
    uint64_t ms = r.duration_ns / 1000000u;
    ok = r.timed_out && r.exit_code == 124 && r.out_len == 0 &&
         ms < PROOF_DEADLINE_MS + PROOF_MARGIN_MS;
    pl_js_result_free(&r);
    if (!ok)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: a regex bomb was not stopped "
                            "at its %u ms deadline (took %llu ms)",
                            PROOF_DEADLINE_MS, (unsigned long long)ms);

    /* The pool still answers after a guest was abandoned. */
    if (proof_run(s, "console.log('again')", 64u << 20, 5000, &r, err) < 0)
        return -1;
    ok = r.exit_code == 0 && r.out_len == 6;
    pl_js_result_free(&r);
    if (!ok)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: no answer after a deadline");
    return 0;
}

static void wasm_destroy(void *state) {
    struct wasm_state *s = state;
    if (!s)
        return;
    pl_js_pool_free(s->pool);
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
    snprintf(s->engine, sizeof(s->engine), "%s", pl_js_engine_version());
    memcpy(s->worker, worker, sizeof(s->worker));
    char msg[256] = "";
    int r = pl_js_pool_new_ex(s->workers, worker, &s->pool, msg, sizeof(msg));
    if (r < 0) {
        unsigned n = s->workers;
        free(s);
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: cannot start %u workers: %s", n,
                            msg[0] ? msg : strerror(-r));
    }
    if (startup_proof(s, err) < 0) {
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
        .snippet = {.supported = true,
                    .engine = s->engine,
                    .max_timeout_ms = s->max_timeout_ms,
                    .languages = {"javascript", NULL},
                    .grants = false},
    };
}

/* Cheap: a worker that dies is respawned from this file, so it must stay. */
static int wasm_ready(void *state, struct pl_error *err) {
    struct wasm_state *s = state;
    if (access(s->worker, X_OK) != 0)
        return pl_error_set(err, PL_REASON_NOT_READY,
                            "the JavaScript worker %s is gone; workers could not be respawned",
                            s->worker);
    return 0;
}

static int wasm_run(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                    struct pl_run_result *ret, struct pl_error *err) {
    struct wasm_state *s = state;
    if (req->kind != PL_PAYLOAD_SNIPPET)
        return pl_error_set(err, PL_REASON_INTERNAL, "wasm: payload not dispatched here");
    struct pl_js_limits l = {.memory_bytes = (uint64_t)ctx->memory_mb << 20,
                             .timeout_ms = ctx->timeout_ms,
                             .stdout_cap = ctx->output_bytes,
                             .stderr_cap = ctx->output_bytes};
    struct pl_js_result r = {0};
    int rc = pl_js_pool_run(s->pool, req->snippet.code, req->snippet.code_len,
                            req->snippet.stdin_data ? req->snippet.stdin_data : "",
                            req->snippet.stdin_len, &l, &r);
    if (rc < 0)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the JavaScript worker failed around the run (%s)", strerror(-rc));
    ret->exit_code = r.exit_code;
    ret->out = r.out;
    ret->out_len = r.out_len;
    ret->out_truncated = r.out_truncated;
    ret->err = r.err;
    ret->err_len = r.err_len;
    ret->err_truncated = r.err_truncated;
    r.out = r.err = NULL;
    ret->timed_out = r.timed_out;
    ret->out_of_memory = r.out_of_memory;
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "wasm-%.12s", ctx->run_id);
    if (r.timed_out) {
        ret->outcome = PL_OUTCOME_TIMED_OUT;
        snprintf(ret->detail, sizeof(ret->detail), "the deadline of %u ms ended the run",
                 ctx->timeout_ms);
    } else {
        ret->outcome = PL_OUTCOME_COMPLETED;
        if (r.out_of_memory)
            snprintf(ret->detail, sizeof(ret->detail),
                     "out of memory: the run's memory cap is %u MiB", ctx->memory_mb);
        else if (r.trapped)
            snprintf(ret->detail, sizeof(ret->detail), "the engine trapped");
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
