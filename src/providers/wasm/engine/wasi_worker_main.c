/*
 * wasi_worker_main.c: plimsoll-wasi-worker, the process that runs WASI
 * modules for the wasm provider (wabt's interpreter, wasi/wasi_runner.h).
 *
 * It speaks the JS workers' protocol (js_proto.h) with the same pool
 * (js_engine.h), so a module run is queued, bounded and respawned exactly
 * like a snippet.  The RUN frame's "code" is a module job (pl_wasi_job_*);
 * its "stdin" is the guest's stdin.
 *
 * The interpreter cannot be interrupted from inside, so the deadline is the
 * process itself: an interval timer whose signal ends the worker, which the
 * pool reports as a deadline stop and replaces.  Its address space is
 * capped (RLIMIT_AS, --address-space-mb), because wabt does not bound its
 * own value stack; a host allocation failure also ends the worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "../wasi/wasi_runner.h"
#include "js_proto.h"
#include "wasi_job.h"
#include "worker_seccomp.h"

#define WORKER_SOCKET_FD 3

static void on_deadline(int sig) {
    (void)sig;
    _exit(124); /* the pool reports the deadline and starts a new worker */
}

static int arm_timer(uint32_t ms) {
    struct itimerval it = {.it_value = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000}};
    return setitimer(ITIMER_REAL, &it, NULL);
}

static int send_hello(int fd) {
    struct pl_js_hello h = {.pid = (uint32_t)getpid()};
    struct iovec v = {&h, sizeof(h)};
    return pl_js_write_frame(fd, PL_JS_MSG_HELLO, &v, 1);
}

static int reply(int fd, int exit_code, uint32_t flags, const char *out, size_t out_len,
                 const char *err, size_t err_len) {
    struct pl_js_run_resp resp = {.exit_code = exit_code,
                                  .flags = flags,
                                  .out_len = (uint32_t)out_len,
                                  .err_len = (uint32_t)err_len};
    struct iovec parts[3] = {{&resp, sizeof(resp)}, {(void *)out, out_len}, {(void *)err, err_len}};
    return pl_js_write_frame(fd, PL_JS_MSG_RESULT, parts, 3);
}

/* One RUN frame.  Returns 1 when the pool closed the socket. */
static int serve_one(int fd) {
    struct pl_js_frame_hdr hdr;
    struct pl_js_run_req req;
    int r = pl_js_read_full(fd, &hdr, sizeof(hdr), 0);
    if (r == -EPIPE)
        return 1;
    if (r < 0)
        return r;
    if (pl_js_check_hdr(&hdr, PL_JS_MSG_RUN,
                        sizeof(req) + (uint64_t)PL_JS_MAX_CODE + PL_JS_MAX_STDIN) < 0 ||
        hdr.len < sizeof(req))
        return -EPROTO;
    if ((r = pl_js_read_full(fd, &req, sizeof(req), 0)) < 0)
        return r;
    size_t rest = hdr.len - sizeof(req);
    if ((uint64_t)req.code_len + req.stdin_len != rest || req.stdout_cap > PL_JS_MAX_STREAM ||
        req.stderr_cap > PL_JS_MAX_STREAM)
        return -EPROTO;
    char *payload = malloc(rest + 1);
    if (!payload)
        return -ENOMEM;
    if ((r = pl_js_read_full(fd, payload, rest, 0)) < 0) {
        free(payload);
        return r;
    }
    struct pl_wasi_job job;
    if (pl_wasi_job_decode(payload, req.code_len, &job) < 0) {
        free(payload);
        return -EPROTO;
    }
    struct pl_wasi_limits lim = {.memory_bytes = req.memory_bytes,
                                 .stdout_cap = req.stdout_cap,
                                 .stderr_cap = req.stderr_cap};
    char msg[512] = "";
    if (pl_wasi_validate(job.wasm, job.wasm_len, &lim, msg, sizeof(msg)) != PL_WASI_OK) {
        r = reply(fd, PL_WASI_JOB_REFUSED, 0, "", 0, msg, strlen(msg));
        pl_wasi_job_free(&job);
        free(payload);
        return r;
    }
    struct pl_wasi_result res = {0};
    arm_timer(req.timeout_ms);
    int rc = pl_wasi_run(job.wasm, job.wasm_len, (const char *const *)job.args, job.nargs,
                         payload + req.code_len, req.stdin_len, &lim, &res, msg, sizeof(msg));
    arm_timer(0);
    pl_wasi_job_free(&job);
    free(payload);
    if (rc == PL_WASI_ERR_HOST) {
        fprintf(stderr, "plimsoll-wasi-worker: host allocation failed: %s\n", msg);
        _exit(3); /* wabt skipped its cleanup: this process is done */
    }
    if (rc != PL_WASI_OK)
        return reply(fd, PL_WASI_JOB_REFUSED, 0, "", 0, msg, strlen(msg));
    uint32_t flags = (res.trapped ? PL_JS_RESP_TRAPPED : 0) |
                     (res.out_truncated ? PL_JS_RESP_OUT_TRUNC : 0) |
                     (res.err_truncated ? PL_JS_RESP_ERR_TRUNC : 0);
    r = reply(fd, res.exit_code, flags, res.out, res.out_len, res.err, res.err_len);
    pl_wasi_result_free(&res);
    return r;
}

int main(int argc, char **argv) {
    unsigned long as_mb = 0;
    bool seccomp = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-seccomp") == 0) {
            seccomp = false;
        } else if (strcmp(argv[i], "--address-space-mb") == 0 && i + 1 < argc) {
            as_mb = strtoul(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "usage: plimsoll-wasi-worker [--address-space-mb N] [--no-seccomp]\n"
                            "(started by the plimsoll pool with its socket on fd 3)\n");
            return 2;
        }
    }
    struct stat st;
    if (fstat(WORKER_SOCKET_FD, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        fprintf(stderr, "plimsoll-wasi-worker: fd 3 is not a socket\n");
        return 2;
    }
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer reserves terabytes of shadow address space: the
     * address-space cap is a release-build guard only. */
    (void)as_mb;
#else
    if (as_mb) {
        struct rlimit as = {as_mb << 20, as_mb << 20};
        if (setrlimit(RLIMIT_AS, &as) != 0)
            return 2;
    }
#endif
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return 2;
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, on_deadline);
    int r;
    if (seccomp && (r = pl_worker_seccomp(PL_SECCOMP_WASI_CALLS)) < 0) {
        fprintf(stderr, "plimsoll-wasi-worker: seccomp: %s\n", strerror(-r));
        return 2;
    }
    if (send_hello(WORKER_SOCKET_FD) < 0)
        return 1;
    for (;;) {
        r = serve_one(WORKER_SOCKET_FD);
        if (r == 1)
            return 0;
        if (r < 0) {
            fprintf(stderr, "plimsoll-wasi-worker[%d]: %s\n", (int)getpid(), strerror(-r));
            return 1;
        }
    }
}
