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
 * processes (wasi_worker.c), with the same limits.
 *
 * Startup proof (create): before the daemon serves, the provider runs
 * guests on itself and refuses to start unless
 *   1. a hello world prints exactly what it should,
 *   2. an allocation past a 16 MiB cap is refused as out of memory,
 *   3. a regex bomb (a loop that never reaches QuickJS's interrupt check)
 *      is stopped at a 100 ms deadline, after which the pool still serves;
 *   4. a hello module prints 42, a module asking for more initial memory
 *      than a 16 MiB cap is refused, a looping module is stopped at 100 ms.
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
#include "wasi_job.h"

#ifndef PL_LIBEXECDIR
#define PL_LIBEXECDIR "/usr/local/libexec/plimsoll"
#endif

#define WORKER_NAME "plimsoll-js-worker"
#define WASI_WORKER_NAME "plimsoll-wasi-worker"
#define MODULE_ENGINE "wabt 1.0.32 interpreter, WASI preview 1 subset (plimsoll-wasi-worker)"
/* Address space of a module worker beyond the memory cap: wabt's own value
 * and call stacks, the module's code, the C++ runtime. */
#define WASI_WORKER_OVERHEAD_MB 512u

/* Startup-proof modules, assembled with wat2wasm from:
 *   loop:  (module (memory (export "memory") 1) (func (export "_start") (loop (br 0))))
 *   big:   (module (memory (export "memory") 300) (func (export "_start")))
 *   hello: fd_write(1, "42\n") from _start */
static const char proof_loop[] =
    "\x00\x61\x73\x6d\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x05\x03\x01"
    "\x00\x01\x07\x13\x02\x06\x6d\x65\x6d\x6f\x72\x79\x02\x00\x06\x5f\x73\x74\x61\x72\x74"
    "\x00\x00\x0a\x09\x01\x07\x00\x03\x40\x0c\x00\x0b\x0b";
static const char proof_big[] =
    "\x00\x61\x73\x6d\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x05\x04\x01"
    "\x00\xac\x02\x07\x13\x02\x06\x6d\x65\x6d\x6f\x72\x79\x02\x00\x06\x5f\x73\x74\x61\x72"
    "\x74\x00\x00\x0a\x04\x01\x02\x00\x0b";
static const char proof_hello[] =
    "\x00\x61\x73\x6d\x01\x00\x00\x00\x01\x0c\x02\x60\x04\x7f\x7f\x7f\x7f\x01\x7f\x60\x00"
    "\x00\x02\x23\x01\x16\x77\x61\x73\x69\x5f\x73\x6e\x61\x70\x73\x68\x6f\x74\x5f\x70\x72"
    "\x65\x76\x69\x65\x77\x31\x08\x66\x64\x5f\x77\x72\x69\x74\x65\x00\x00\x03\x02\x01\x01"
    "\x05\x03\x01\x00\x01\x07\x13\x02\x06\x6d\x65\x6d\x6f\x72\x79\x02\x00\x06\x5f\x73\x74"
    "\x61\x72\x74\x00\x01\x0a\x1d\x01\x1b\x00\x41\x00\x41\x10\x36\x02\x00\x41\x04\x41\x03"
    "\x36\x02\x00\x41\x01\x41\x00\x41\x01\x41\x08\x10\x00\x1a\x0b\x0b\x09\x01\x00\x41\x10"
    "\x0b\x03\x34\x32\x0a";
#define PROOF_DEADLINE_MS 100u
#define PROOF_MARGIN_MS 1000u

struct wasm_state {
    struct pl_js_pool *pool;
    struct pl_js_pool *mpool; /* WASI modules */
    char wasi_worker[PATH_MAX];
    unsigned workers;
    unsigned max_timeout_ms;
    char engine[128];
    char worker[PATH_MAX];
};

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
        int w = snprintf(ret, len, "%.3900s/%s", dirs[i], WORKER_NAME);
        snprintf(other, sizeof(other), "%.3900s/%s", dirs[i], WASI_WORKER_NAME);
        if (w > 0 && (size_t)w < len && access(ret, X_OK) == 0 && access(other, X_OK) == 0)
            return 0;
    }
    if (set && *set)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_WASM_WORKER_DIR: %s does not hold executable %s and %s", set,
                            WORKER_NAME, WASI_WORKER_NAME);
    return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                        "SANDBOX_WASM_WORKER_DIR: %s and %s were found neither beside plimsolld "
                        "nor in %s",
                        WORKER_NAME, WASI_WORKER_NAME, PL_LIBEXECDIR);
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

/* Run a module job on the module pool. */
static int module_run(struct wasm_state *s, const uint8_t *wasm, size_t wasm_len,
                      const char *const *args, size_t nargs, const char *in, size_t in_len,
                      const struct pl_js_limits *l, struct pl_js_result *r) {
    size_t len = 0;
    char *job = pl_wasi_job_encode(args, nargs, wasm, wasm_len, &len);
    if (!job)
        return -ENOMEM;
    int rc = pl_js_pool_run(s->mpool, job, len, in ? in : "", in_len, l, r);
    free(job);
    return rc;
}

static int module_proof(struct wasm_state *s, struct pl_error *err) {
    struct pl_js_limits l = {
        .memory_bytes = 16u << 20, .timeout_ms = 5000, .stdout_cap = 4096, .stderr_cap = 4096};
    struct pl_js_result r = {0};
#define MOD(bytes) (const uint8_t *)(bytes), sizeof(bytes) - 1
    int rc = module_run(s, MOD(proof_hello), NULL, 0, NULL, 0, &l, &r);
    bool ok = rc == 0 && r.exit_code == 0 && r.out_len == 3 && memcmp(r.out, "42\n", 3) == 0;
    pl_js_result_free(&r);
    if (!ok)
        return pl_error_set(
            err, PL_REASON_INTERNAL,
            "SANDBOX_PROVIDER=wasm: startup proof: a hello module did not print 42");
    rc = module_run(s, MOD(proof_big), NULL, 0, NULL, 0, &l, &r);
    ok = rc == 0 && r.refused;
    pl_js_result_free(&r);
    if (!ok)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: a module asking for 300 pages "
                            "under a 16 MiB cap was not refused");
    l.timeout_ms = PROOF_DEADLINE_MS;
    rc = module_run(s, MOD(proof_loop), NULL, 0, NULL, 0, &l, &r);
    uint64_t ms = r.duration_ns / 1000000u;
    ok = rc == 0 && r.timed_out && ms < PROOF_DEADLINE_MS + PROOF_MARGIN_MS;
    pl_js_result_free(&r);
#undef MOD
    if (!ok)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: a looping module was not "
                            "stopped at its %u ms deadline",
                            PROOF_DEADLINE_MS);
    return 0;
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
    snprintf(s->engine, sizeof(s->engine), "%s", pl_js_quickjs_version());
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
    /* The module worker lives beside the JavaScript worker. */
    snprintf(s->wasi_worker, sizeof(s->wasi_worker), "%s", worker);
    char *slash = strrchr(s->wasi_worker, '/');
    if (slash)
        snprintf(slash + 1, sizeof(s->wasi_worker) - (size_t)(slash + 1 - s->wasi_worker), "%s",
                 WASI_WORKER_NAME);
    char as[32];
    snprintf(as, sizeof(as), "%u", config->memory_mb + WASI_WORKER_OVERHEAD_MB);
    const char *margs[] = {"--address-space-mb", as, NULL};
    r = pl_js_pool_new_args(s->workers, s->wasi_worker, margs, PL_JS_POOL_MODULES, &s->mpool, msg,
                            sizeof(msg));
    if (r < 0) {
        pl_error_set(err, PL_REASON_INTERNAL,
                     "SANDBOX_PROVIDER=wasm: cannot start the module workers: %s",
                     msg[0] ? msg : strerror(-r));
        wasm_destroy(s);
        return -1;
    }
    if (startup_proof(s, err) < 0 || module_proof(s, err) < 0) {
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
                    .grants = true},
        .module = {.supported = true, .engine = MODULE_ENGINE, .max_timeout_ms = s->max_timeout_ms},
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
        rc = pl_js_pool_run_broker(s->pool, req->snippet.code, req->snippet.code_len,
                                   req->snippet.stdin_data ? req->snippet.stdin_data : "",
                                   req->snippet.stdin_len, &l, ctx->broker ? &broker : NULL, &r);
    else if (req->kind == PL_PAYLOAD_MODULE)
        rc = module_run(s, req->module.wasm, req->module.wasm_len, req->module.args,
                        req->module.nargs, req->module.stdin_data, req->module.stdin_len, &l, &r);
    else
        return pl_error_set(err, PL_REASON_INTERNAL, "wasm: payload not dispatched here");
    if (rc < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "the %s worker failed around the run (%s)",
                            req->kind == PL_PAYLOAD_MODULE ? "module" : "JavaScript",
                            strerror(-rc));
    if (r.refused) {
        /* The module worker's REFUSED frame, which it sends only before the
         * module's first instruction: nothing of the guest ran.  No exit
         * status means this; every status is a result below. */
        pl_error_set(err, PL_REASON_INVALID_REQUEST, "module.wasm_base64: %.*s",
                     (int)(r.err_len > 400 ? 400 : r.err_len), r.err ? r.err : "");
        pl_js_result_free(&r);
        return -1;
    }
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
