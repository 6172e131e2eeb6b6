/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wasi_worker.c: plimsoll-wasi-worker, the process that runs WASI
 * modules for the wasm provider (wabt's interpreter, wasi_runner.h).
 *
 * It speaks the JS workers' protocol (js_proto.h) with the same pool
 * (js_pool.h), so a module run is queued, bounded and respawned exactly
 * like a snippet.  The RUN frame's "code" is a module job (pl_wasi_job_*);
 * its "stdin" is the guest's stdin.
 *
 * A run answers exactly one of two ways, each with its own frame type
 * (js_proto.h): REFUSED, when the module fails validation or
 * instantiation, before any of its code has run; or STARTED, sent right
 * before its first instruction, then RESULT.  The module's exit status is
 * only ever a field of RESULT, so no status it can choose means "refused".
 *
 * The interpreter cannot be interrupted from inside, so the deadline is the
 * process itself: an interval timer whose handler writes a prepared
 * timed-out RESULT and ends the worker, which the pool then replaces (the
 * guest's output so far is lost).  Its address space is capped (RLIMIT_AS,
 * --address-space-mb), because wabt does not bound its own value stack;
 * when the interpreter runs out of host memory the run is answered as out
 * of memory and the worker ends after the answer.
 *
 * Live output: when the RUN carries PL_JS_RUN_STREAM the runner's captures
 * hand what they keep to stream_output(), which sends it at once as OUTPUT
 * frames, and RESULT then carries only the runner's own line.  The
 * deadline handler must not write its RESULT into the middle of such a
 * frame: while one is being written it only marks the deadline, and the
 * writer takes it as soon as the frame is whole (the pool reads while the
 * guest runs; if it stopped, its backstop ends this worker).  With
 * streaming, the guest's output up to the deadline is no longer lost: the
 * pool has it.
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

#include "wasi_runner.h"
#include "../../../core/fdio.h"
#include "../protocol/js_proto.h"
#include "../protocol/wasi_job.h"
#include "../common-worker/worker_seccomp.h"

#define WORKER_SOCKET_FD 3

/* The timed-out RESULT the deadline handler writes: built before the guest
 * starts, so the handler only calls write() and _exit().  [1] starts its
 * line with a newline, for a streaming run whose stderr so far ends
 * mid-line (the line goes after the guest's bytes, on a line of its own). */
static struct {
    struct pl_js_frame_hdr hdr;
    struct pl_js_run_resp resp;
    char note[128];
} g_deadline_frame[2];
static size_t g_deadline_len[2];

/* The bytes streamed of stderr so far end mid-line. */
static volatile sig_atomic_t g_err_midline;

static void prepare_deadline_frame(uint32_t timeout_ms) {
    for (int i = 0; i < 2; i++) {
        int n = snprintf(g_deadline_frame[i].note, sizeof(g_deadline_frame[i].note),
                         "%splimsoll: deadline of %u ms exceeded; the guest was stopped\n",
                         i ? "\n" : "", timeout_ms);
        g_deadline_frame[i].resp = (struct pl_js_run_resp){
            .exit_code = 124,
            .flags = PL_JS_RESP_TIMED_OUT | PL_JS_RESP_WORKER_ENDS,
            .err_len = (uint32_t)n,
        };
        g_deadline_frame[i].hdr = (struct pl_js_frame_hdr){
            .magic = PL_JS_PROTO_MAGIC,
            .version = PL_JS_PROTO_VERSION,
            .type = PL_JS_MSG_RESULT,
            .len = (uint32_t)(sizeof(g_deadline_frame[i].resp) + (size_t)n),
        };
        g_deadline_len[i] =
            sizeof(g_deadline_frame[i].hdr) + sizeof(g_deadline_frame[i].resp) + (size_t)n;
    }
    g_err_midline = 0;
}

/* An OUTPUT frame is being written; the deadline came meanwhile. */
static volatile sig_atomic_t g_in_frame, g_deadline_pending;

/* The timer only runs while the guest does (armed after STARTED, disarmed
 * before RESULT is written), and an OUTPUT frame being written defers it,
 * so this frame never interleaves with another. */
static void on_deadline(int sig) {
    int i = g_err_midline ? 1 : 0;
    const char *p = (const char *)&g_deadline_frame[i];
    size_t left = g_deadline_len[i];

    (void)sig;
    if (g_in_frame) {
        g_deadline_pending = 1; /* stream_output() comes back here */
        return;
    }
    while (left > 0) {
        ssize_t n = write(WORKER_SOCKET_FD, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        p += n;
        left -= (size_t)n;
    }
    _exit(124); /* the pool replaces this worker */
}

/* The sink of a streaming run's captures (pl_wasi_limits.sink). */
struct live_output {
    int fd;         /* the socket to the pool */
    size_t sent[2]; /* bytes sent of stdout, stderr */
};

/* Send data as OUTPUT frames of at most PL_JS_MAX_OUTPUT_FRAME bytes, from
 * inside the guest's fd_write.  The socket gone or out of step: the worker
 * ends (the pool reports an infrastructure error). */
static void stream_output(void *ud, unsigned step, int fd, const char *data, size_t len) {
    struct live_output *lo = ud;

    (void)step;
    while (len > 0) {
        size_t n;
        g_in_frame = 1;
        int r = pl_js_write_output(lo->fd, fd, data, len, &n);
        if (r == 0 && fd == 2)
            g_err_midline = data[n - 1] != '\n';
        g_in_frame = 0;
        if (g_deadline_pending)
            on_deadline(SIGALRM); /* the frame is whole: answer, and end */
        if (r < 0) {
            fprintf(stderr, "plimsoll-wasi-worker[%d]: output: %s\n", (int)getpid(), strerror(-r));
            _exit(1);
        }
        lo->sent[fd - 1] += n;
        data += n;
        len -= n;
    }
}

static int arm_timer(uint32_t ms) {
    struct itimerval it = {.it_value = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000}};
    return setitimer(ITIMER_REAL, &it, NULL);
}

/* The start hook (pl_wasi_run_hooked): the module passed every check and
 * was instantiated; tell the pool, then start the guest's clock. */
struct start_ctx {
    int fd;
    uint32_t timeout_ms;
    bool started;
};

static int on_start(void *userdata) {
    struct start_ctx *s = userdata;

    if (pl_js_write_frame(s->fd, PL_JS_MSG_STARTED, NULL, 0) < 0)
        return -1;
    s->started = true;
    prepare_deadline_frame(s->timeout_ms);
    arm_timer(s->timeout_ms ? s->timeout_ms : 1);
    return 0;
}

static int send_hello(int fd) {
    struct pl_js_hello h = {.pid = (uint32_t)getpid()};
    struct iovec v = {&h, sizeof(h)};
    return pl_js_write_frame(fd, PL_JS_MSG_HELLO, &v, 1);
}

/* The module was refused before any of its code ran: err's one line
 * (shorter than PL_JS_MAX_REFUSAL) is the reason. */
_Static_assert(sizeof(((struct pl_error *)0)->message) <= PL_JS_MAX_REFUSAL,
               "a refusal's reason fits its frame");
static int refuse(int fd, uint32_t flags, const struct pl_error *err) {
    struct pl_js_refusal ref = {.flags = flags};
    size_t n = strnlen(err->message, sizeof(err->message));
    struct iovec parts[2] = {{&ref, sizeof(ref)}, {(void *)err->message, n}};
    return pl_js_write_frame(fd, PL_JS_MSG_REFUSED, parts, 2);
}

/* RESULT, leaving out of each stream the bytes already sent as OUTPUT. */
static int reply(int fd, int32_t exit_code, uint32_t flags, const struct pl_output *out,
                 const struct pl_output *err, const struct live_output *live) {
    size_t so = live->sent[0], se = live->sent[1];
    if (so > out->len || se > err->len)
        return -EPROTO; /* cannot happen: a capture streams only what it keeps */
    struct pl_js_run_resp resp = {.exit_code = exit_code,
                                  .flags = flags,
                                  .out_len = (uint32_t)(out->len - so),
                                  .err_len = (uint32_t)(err->len - se)};
    struct iovec parts[3] = {{&resp, sizeof(resp)},
                             {out->data ? out->data + so : NULL, out->len - so},
                             {err->data ? err->data + se : NULL, err->len - se}};
    return pl_js_write_frame(fd, PL_JS_MSG_RESULT, parts, 3);
}

/* One RUN frame.  Returns 1 when the pool closed the socket, 2 when this
 * worker must end after its answer. */
static int serve_one(int fd) {
    struct pl_js_frame_hdr hdr;
    struct pl_js_run_req req;
    int r = pl_fd_read_full(fd, &hdr, sizeof(hdr), 0, -1);
    if (r == -EPIPE)
        return 1;
    if (r < 0)
        return r;
    if (pl_js_check_hdr(&hdr, PL_JS_MSG_RUN,
                        sizeof(req) + (uint64_t)PL_JS_MAX_CODE + PL_JS_MAX_STDIN) < 0 ||
        hdr.len < sizeof(req))
        return -EPROTO;
    if ((r = pl_fd_read_full(fd, &req, sizeof(req), 0, -1)) < 0)
        return r;
    size_t rest = hdr.len - sizeof(req);
    if ((uint64_t)req.code_len + req.stdin_len != rest || req.stdout_cap > PL_JS_MAX_STREAM ||
        req.stderr_cap > PL_JS_MAX_STREAM || (req.flags & ~PL_JS_RUN_FLAGS) != 0)
        return -EPROTO;
    char *payload = malloc(rest + 1);
    if (!payload)
        return -ENOMEM;
    if ((r = pl_fd_read_full(fd, payload, rest, 0, -1)) < 0) {
        free(payload);
        return r;
    }
    struct pl_wasi_job job;
    if (pl_wasi_job_decode(payload, req.code_len, &job) < 0) {
        free(payload);
        return -EPROTO;
    }
    struct live_output live = {.fd = fd};
    const struct pl_output_sink live_sink = {.write = stream_output, .ud = &live};
    struct pl_wasi_limits lim = {.memory_bytes = req.memory_bytes,
                                 .stdout_cap = req.stdout_cap,
                                 .stderr_cap = req.stderr_cap,
                                 .sink = req.flags & PL_JS_RUN_STREAM ? &live_sink : NULL};
    struct pl_error err = {0};
    struct pl_wasi_result res = {0};
    struct start_ctx start = {.fd = fd, .timeout_ms = req.timeout_ms};
    int rc = pl_wasi_run_hooked(job.wasm, job.wasm_len, (const char *const *)job.args, job.nargs,
                                payload + req.code_len, req.stdin_len, &lim, on_start, &start, &res,
                                &err);
    arm_timer(0);
    pl_wasi_job_free(&job);
    free(payload);
    if (!start.started) {
        /* Validation or instantiation said no, or the host ran out of
         * memory loading the module (then wabt skipped its cleanup, and
         * this process ends after the answer). */
        if (rc == PL_WASI_ERR_HOST) {
            r = refuse(fd, PL_JS_RESP_WORKER_ENDS, &err);
            return r < 0 ? r : 2;
        }
        return refuse(fd, 0, &err);
    }
    if (rc != PL_WASI_OK) {
        /* The guest started but no result could be collected: end without
         * an answer, which the pool reports as an infrastructure error. */
        fprintf(stderr, "plimsoll-wasi-worker[%d]: %s\n", (int)getpid(), err.message);
        return 2;
    }
    uint32_t flags = (res.trapped ? PL_JS_RESP_TRAPPED : 0) |
                     (res.out_of_memory ? PL_JS_RESP_OOM : 0) |
                     (res.host_exhausted ? PL_JS_RESP_WORKER_ENDS : 0) |
                     (res.out.truncated ? PL_JS_RESP_OUT_TRUNC : 0) |
                     (res.err.truncated ? PL_JS_RESP_ERR_TRUNC : 0);
    r = reply(fd, pl_js_status_i32(res.exit_code), flags, &res.out, &res.err, &live);
    bool ends = res.host_exhausted;
    pl_wasi_result_free(&res);
    return r < 0 ? r : ends ? 2 : 0;
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
        if (r == 1 || r == 2)
            return 0;
        if (r < 0) {
            fprintf(stderr, "plimsoll-wasi-worker[%d]: %s\n", (int)getpid(), strerror(-r));
            return 1;
        }
    }
}
