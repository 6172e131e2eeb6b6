/* SPDX-License-Identifier: Apache-2.0 */
/*
 * js_worker.c: plimsoll-js-worker, the process that runs one
 * QuickJS-in-wasm guest at a time for the worker pool in the daemon
 * (js_pool.h), talking over the socket on fd 3 (js_proto.h).
 *
 * Why a process: wasm2c's runtime keeps the trap target and the call-depth
 * counter in process-global variables, and the only reliable way to stop
 * a guest at its deadline (regex backtracking, huge joins and other long
 * native loops never reach QuickJS's interrupt handler) is a timer signal
 * that siglongjmps out of guest code and throws the instance away.  Both
 * are only safe with exactly one guest per process.  A worker that dies
 * for any reason is simply replaced by the pool.
 *
 * Life cycle: main() hardens the process (no_new_privs, no core dumps),
 * blocks signals, and starts the serving thread with a 16 MiB stack (the
 * generated code's largest frame is 448 bytes, times
 * WASM_RT_MAX_CALL_STACK_DEPTH=20000 is ~9 MB).  That thread initialises
 * the module, installs a seccomp filter, sends HELLO, and then serves RUN
 * requests until the socket closes.
 *
 * The engine's image: before HELLO the worker makes one instance, lets
 * the guest's plg_init() make QuickJS's runtime and context with every
 * global (intrinsics, console, the built-ins of guest/builtins.js, the
 * formatter), and keeps a copy of the linear memory and the stack
 * pointer.  Per run: the instance
 * as the image left it (its memory capped at the request's memory_bytes,
 * Math.random seeded from getrandom), ITIMER_REAL armed to the deadline
 * around all guest code, SIGALRM -> siglongjmp back here (deferred while
 * inside a host import), call-depth counter reset; after the answer, the
 * image is copied back over everything the run could have written and
 * the rest scrubbed, so no state of one run reaches the next.  A run whose
 * cap is below the image makes a fresh instance instead (all-zero memory,
 * data segments, plg_init), freed (scrubbed) on every path.
 *
 * Broker calls: when the RUN carries PL_JS_RUN_BROKER, the guest's
 * plimsoll.broker_call import sends the request to the pool as a
 * BROKER_REQ frame on the same socket and blocks reading the BROKER_REPLY
 * (the pool runs the daemon's callback, bounded by the run's deadline).
 * The wait is a host import, so a deadline that fires meanwhile is
 * deferred and taken right after the reply has been read, which keeps the
 * protocol in step.  Without a grant the call fails here and nothing is
 * sent.  Any protocol error ends the worker (the pool replaces it).
 *
 * Live output: when the RUN carries PL_JS_RUN_STREAM, each stream's
 * capture hands what it keeps to stream_output(), which sends it at once
 * as OUTPUT frames; RESULT then carries only plimsoll's own line.  The
 * frames are written inside fd_write, a host import, so a deadline that
 * fires meanwhile is taken right after the frame is whole; the pool reads
 * while the guest runs, so a write only waits for it, and a pool that
 * stopped reading kills the worker at its backstop.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "../../../core/clock.h"
#include "../../../core/fdio.h"
#include "../guest/guest_abi.h"
#include "../protocol/js_proto.h"
#include "qjs_wasm.h"
#include "wasi_host.h"
#include "wasm_rt_host.h"
#include "../common-worker/worker_seccomp.h"

#define WORKER_SOCKET_FD 3
#define WORKER_STACK_SIZE (16u << 20)
#define WORKER_GUARD_SIZE (64u << 10)

static volatile sig_atomic_t g_deadline_armed; /* a guest call is running */
static volatile sig_atomic_t g_deadline_hit;   /* the timer fired */
static volatile sig_atomic_t g_in_host;        /* inside a WASI import */
static bool g_use_seccomp = true;

/* ---- deadline -------------------------------------------------------------- */

static void deadline_jump(void) {
    g_deadline_armed = 0;
    if (pl_wasm_jump_armed) {
        pl_wasm_jump_armed = false;
        siglongjmp(pl_wasm_jump, PL_WASM_JUMP_DEADLINE);
    }
}

static void on_sigalrm(int sig) {
    int saved_errno = errno;

    (void)sig;
    if (g_deadline_armed) {
        g_deadline_hit = 1;
        /* Never jump out of host code: it finishes its (bounded) work
         * and jumps in pl_wasi_host_leave(). Guest code only touches
         * linear memory, so abandoning it mid-instruction is safe. */
        if (!g_in_host)
            deadline_jump();
    }
    errno = saved_errno;
}

void pl_wasi_host_enter(void) {
    g_in_host = 1;
}

void pl_wasi_host_leave(void) {
    g_in_host = 0;
    if (g_deadline_hit && g_deadline_armed)
        deadline_jump();
}

static void set_timer_ms(uint32_t ms) {
    struct itimerval it = {0};

    it.it_value.tv_sec = ms / 1000;
    it.it_value.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    setitimer(ITIMER_REAL, &it, NULL);
}

static void arm_deadline(uint32_t ms) {
    g_deadline_hit = 0;
    g_in_host = 0;
    g_deadline_armed = 1;
    set_timer_ms(ms ? ms : 1);
}

static void disarm_deadline(void) {
    g_deadline_armed = 0;
    set_timer_ms(0);
}

/* ---- buffers --------------------------------------------------------------- */

/* Buffers reused across runs.  Only g_reply and the output captures
 * (wasi_host.c) grow during a run, inside a host import, where the
 * deadline cannot interrupt realloc. */
struct reusable_buf {
    char *p;
    size_t cap;
};

static struct reusable_buf g_payload, g_reply;

static int buf_reserve(struct reusable_buf *b, size_t need) {
    char *n;

    if (need <= b->cap)
        return 0;
    n = realloc(b->p, need);
    if (!n)
        return -ENOMEM;
    b->p = n;
    b->cap = need;
    return 0;
}

/* ---- the broker import (module "plimsoll") ------------------------------------- */

/* The socket to the pool is out of step or gone: the run cannot go on. */
__attribute__((noreturn)) static void pool_fatal(int err) {
    fprintf(stderr, "plimsoll-js-worker[%d]: exchange with the pool: %s\n", (int)getpid(),
            strerror(-err));
    _exit(1);
}

/* Guest bytes [addr, addr + len), or NULL if outside linear memory. */
static uint8_t *broker_guest_ptr(pl_broker_host_t *b, uint32_t addr, uint32_t len) {
    wasm_rt_memory_t *m = b->memory;

    if (!m || !m->data || (uint64_t)addr + len > m->size)
        return NULL;
    return m->data + addr;
}

/* Send one request, read its reply into g_reply.  Returns the reply length
 * or a PLG_BROKER_E* code; a broken socket ends the worker. */
static int32_t broker_exchange(pl_broker_host_t *b, const uint8_t *req, uint32_t req_len) {
    struct iovec iov = {(void *)req, req_len};
    struct pl_js_frame_hdr hdr;
    struct pl_js_broker_reply rep;
    size_t len;
    int r;

    r = pl_js_write_frame(b->fd, PL_JS_MSG_BROKER_REQ, &iov, 1);
    if (r == 0)
        r = pl_fd_read_full(b->fd, &hdr, sizeof(hdr), 0, -1);
    if (r == 0)
        r = pl_js_check_hdr(&hdr, PL_JS_MSG_BROKER_REPLY, sizeof(rep) + (uint64_t)b->max_reply);
    if (r == 0 && hdr.len < sizeof(rep))
        r = -EPROTO;
    if (r == 0)
        r = pl_fd_read_full(b->fd, &rep, sizeof(rep), 0, -1);
    if (r < 0)
        pool_fatal(r);
    len = hdr.len - sizeof(rep);
    if (rep.status != PL_JS_BROKER_OK && len != 0)
        pool_fatal(-EPROTO);
    if (buf_reserve(&g_reply, len + 1) < 0)
        pool_fatal(-ENOMEM); /* the unread bytes leave the socket out of step */
    r = pl_fd_read_full(b->fd, g_reply.p, len, 0, -1);
    if (r < 0)
        pool_fatal(r);
    switch (rep.status) {
    case PL_JS_BROKER_OK:
        b->has_reply = true;
        b->reply_len = len;
        return (int32_t)len; /* <= PL_JS_MAX_BROKER_MSG */
    case PL_JS_BROKER_REPLY_TOO_BIG: return PLG_BROKER_EREPLYBIG;
    case PL_JS_BROKER_CALL_LIMIT: return PLG_BROKER_ECALLLIMIT;
    case PL_JS_BROKER_FAILED: return PLG_BROKER_EUNAVAIL;
    default: pool_fatal(-EPROTO);
    }
}

u32 Z_plimsollZ_broker_call(pl_broker_host_t *b, u32 req_ptr, u32 req_len) {
    const uint8_t *req;
    int32_t r;

    pl_wasi_host_enter();
    b->has_reply = false;
    req = broker_guest_ptr(b, req_ptr, req_len);
    if (b->max_request == 0)
        r = PLG_BROKER_ENOGRANT;
    else if (req_len > b->max_request)
        r = PLG_BROKER_ETOOBIG;
    else if (!req)
        r = PLG_BROKER_EFAULT;
    else
        r = broker_exchange(b, req, req_len);
    pl_wasi_host_leave(); /* takes a deadline that fired during the wait */
    return (u32)r;
}

u32 Z_plimsollZ_broker_reply(pl_broker_host_t *b, u32 dst_ptr, u32 cap) {
    uint8_t *dst;
    int32_t r;

    pl_wasi_host_enter();
    dst = broker_guest_ptr(b, dst_ptr, cap);
    if (!b->has_reply)
        r = PLG_BROKER_ENOREPLY;
    else if (!dst || cap < b->reply_len)
        r = PLG_BROKER_EFAULT;
    else {
        memcpy(dst, g_reply.p, b->reply_len);
        r = (int32_t)b->reply_len;
        b->has_reply = false;
    }
    pl_wasi_host_leave();
    return (u32)r;
}

/* ---- live output (PL_JS_RUN_STREAM) ---------------------------------------- */

/* The sink a streaming run's captures give their kept bytes to. */
struct live_output {
    int fd;         /* the worker's socket to the pool */
    size_t sent[2]; /* bytes sent of stdout, stderr */
};

/* Send data as OUTPUT frames of at most PL_JS_MAX_OUTPUT_FRAME bytes.
 * Called from fd_write, inside the host import; a broken socket ends the
 * worker (pool_fatal), as it does in a broker exchange. */
static void stream_output(void *ud, unsigned step, int fd, const char *data, size_t len) {
    struct live_output *lo = ud;

    (void)step;
    while (len > 0) {
        size_t n;
        int r = pl_js_write_output(lo->fd, fd, data, len, &n);
        if (r < 0)
            pool_fatal(r);
        lo->sent[fd - 1] += n;
        data += n;
        len -= n;
    }
}

/* ---- one run ------------------------------------------------------------- */

struct run_result {
    int32_t exit_code;
    uint32_t flags;
    uint64_t guest_ns;
    char note[160]; /* plimsoll's own line appended after the guest's stderr */
};

/* Copy len bytes into guest memory at addr (allocated by plg_alloc). */
static int copy_in(Z_qjs_instance_t *inst, uint32_t addr, const char *src, uint32_t len) {
    wasm_rt_memory_t *m = &inst->w2c_memory;

    if (!m->data || (uint64_t)addr + len + 1 > m->size)
        return -1;
    if (len)
        memcpy(m->data + addr, src, len);
    return 0;
}

/* The instance lives in static storage so sigsetjmp/siglongjmp cannot
 * clobber it, and so its address is stable for the WASI context. */
static Z_qjs_instance_t g_inst;

/*
 * The engine's image: the linear memory and the one mutable global (the
 * shadow stack pointer) as plg_init() leaves them, made once when the
 * worker starts.  While g_inst_live, g_inst is an instance made from the
 * image; between runs its memory equals the image (image_restore() copies
 * it back after every run, after the answer), so each plg_run() is the
 * first in its copy.  A run whose memory cap is below the image
 * makes, instead, a fresh instance of its own at its cap.
 */
static struct {
    struct pl_wasm_image mem; /* mem.data NULL: no image, every run makes its own engine */
    uint32_t module_max;      /* the module's own maximum, in pages */
    uint32_t stack_pointer;
} g_image;
static bool g_inst_live;

/* Math.random's seed for one run. */
static uint64_t run_seed(void) {
    uint64_t seed = 0;

    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
        seed = pl_now_ns() ^ ((uint64_t)getpid() << 32);
    return seed;
}

/* Make (or make again) g_inst from the image, or make the image itself.
 * Runs no caller code.  Returns 0 with g_inst_live, or -1. */
static int image_instance(void) {
    /* The instance's import pointers are only read inside guest calls;
     * each run sets them to its own before it calls in. */
    static pl_broker_host_t no_broker = {.fd = -1};
    pl_wasi_t wasi;
    volatile int32_t status = -1;

    if (g_inst_live)
        return 0;
    memset(&g_inst, 0, sizeof(g_inst));
    pl_wasi_init(&wasi, &g_inst.w2c_memory, 4096, 4096);
    no_broker.memory = &g_inst.w2c_memory;
    pl_wasm_rt_set_memory_cap(65535);
    wasm_rt_call_stack_depth = 0;
    if (sigsetjmp(pl_wasm_jump, 1) == 0) {
        pl_wasm_jump_armed = true;
        Z_qjs_instantiate(&g_inst, &no_broker, &wasi);
        if (g_image.mem.data) {
            status = pl_wasm_rt_memory_restore(&g_inst.w2c_memory, &g_image.mem);
            g_inst.w2c___stack_pointer = g_image.stack_pointer;
        } else {
            Z_qjsZ__initialize(&g_inst);
            status = (int32_t)Z_qjsZ_plg_init(&g_inst);
        }
        pl_wasm_jump_armed = false;
    } else {
        pl_wasm_jump_armed = false;
        pl_wasm_rt_reset_after_jump();
    }
    pl_wasi_release(&wasi);
    if (status == 0 && !g_image.mem.data) {
        status = pl_wasm_image_take(&g_image.mem, &g_inst.w2c_memory);
        g_image.module_max = g_inst.w2c_memory.max_pages;
        g_image.stack_pointer = g_inst.w2c___stack_pointer;
    }
    if (status != 0) {
        Z_qjs_free(&g_inst);
        return -1;
    }
    g_inst_live = true;
    return 0;
}

/* After the answer: the instance back to the image for the next run. */
static void image_restore(void) {
    if (!g_image.mem.data)
        return;
    if (g_inst_live) {
        if (pl_wasm_rt_memory_restore(&g_inst.w2c_memory, &g_image.mem) == 0) {
            g_inst.w2c___stack_pointer = g_image.stack_pointer;
            return;
        }
        Z_qjs_free(&g_inst);
        g_inst_live = false;
    }
    if (image_instance() < 0) {
        fprintf(stderr, "plimsoll-js-worker[%d]: cannot restore the engine's image\n",
                (int)getpid());
        _exit(1); /* the pool makes another worker */
    }
}

static void run_one(const struct pl_js_run_req *req, const char *code, const char *in,
                    pl_wasi_t *wasi, pl_broker_host_t *broker, struct run_result *res) {
    volatile int32_t status = -1;
    volatile int jump;
    uint64_t t0 = pl_now_ns();
    uint64_t pages = req->memory_bytes / PL_WASM_PAGE_SIZE;
    uint32_t cap = pages > 65535 ? 65535 : (uint32_t)(pages ? pages : 1);
    bool from_image = g_inst_live && cap >= g_image.mem.pages;

    memset(res, 0, sizeof(*res));
    if (g_inst_live && !from_image) {
        Z_qjs_free(&g_inst); /* image_restore() makes it again */
        g_inst_live = false;
    }
    wasm_rt_call_stack_depth = 0;

    jump = sigsetjmp(pl_wasm_jump, 1);
    if (jump == 0) {
        uint32_t code_ptr, stdin_ptr;

        pl_wasm_jump_armed = true;
        if (from_image) {
            g_inst.Z_plimsoll_instance = broker;
            g_inst.Z_wasi_snapshot_preview1_instance = wasi;
            pl_wasm_rt_memory_set_max(&g_inst.w2c_memory, cap, g_image.module_max);
            arm_deadline(req->timeout_ms);
            status = PLG_RUN_OK;
        } else {
            memset(&g_inst, 0, sizeof(g_inst));
            pl_wasm_rt_set_memory_cap(cap);
            Z_qjs_instantiate(&g_inst, broker, wasi);
            arm_deadline(req->timeout_ms);
            Z_qjsZ__initialize(&g_inst);
            status = (int32_t)Z_qjsZ_plg_init(&g_inst);
        }
        code_ptr = status == PLG_RUN_OK ? Z_qjsZ_plg_alloc(&g_inst, req->code_len) : 0;
        stdin_ptr = code_ptr ? Z_qjsZ_plg_alloc(&g_inst, req->stdin_len) : 0;
        if (status != PLG_RUN_OK)
            ; /* plg_init said why */
        else if (!code_ptr || !stdin_ptr || copy_in(&g_inst, code_ptr, code, req->code_len) < 0 ||
                 copy_in(&g_inst, stdin_ptr, in, req->stdin_len) < 0)
            status = -2; /* inputs do not fit */
        else
            status = (int32_t)Z_qjsZ_plg_run(&g_inst, code_ptr, req->code_len, stdin_ptr,
                                             req->stdin_len, broker->max_request, run_seed());
        disarm_deadline();
        pl_wasm_jump_armed = false;
    } else {
        disarm_deadline();
        pl_wasm_jump_armed = false;
        pl_wasm_rt_reset_after_jump();
    }
    if (from_image)
        res->flags |= PL_JS_RESP_FROM_IMAGE;
    else
        Z_qjs_free(&g_inst);
    res->guest_ns = pl_now_ns() - t0;

    if (jump == PL_WASM_JUMP_DEADLINE) {
        res->exit_code = 124;
        res->flags |= PL_JS_RESP_TIMED_OUT;
        snprintf(res->note, sizeof(res->note),
                 "plimsoll: deadline of %u ms exceeded; the guest was stopped\n", req->timeout_ms);
    } else if (jump != 0 && pl_wasm_rt_memory_failed()) {
        res->exit_code = 1;
        res->flags |= PL_JS_RESP_OOM;
        snprintf(res->note, sizeof(res->note),
                 "plimsoll: out of memory: the memory limit of %llu bytes is below "
                 "what the engine needs to start\n",
                 (unsigned long long)req->memory_bytes);
    } else if (jump != 0) {
        res->exit_code = 1;
        res->flags |= PL_JS_RESP_TRAPPED;
        snprintf(res->note, sizeof(res->note),
                 "plimsoll: the engine trapped (%s); the guest was stopped\n",
                 wasm_rt_strerror((wasm_rt_trap_t)jump));
    } else if (status == -2) {
        res->exit_code = 1;
        res->flags |= PL_JS_RESP_OOM;
        snprintf(res->note, sizeof(res->note),
                 "plimsoll: out of memory: the script and stdin do not fit in the "
                 "memory limit\n");
    } else if (status == PLG_RUN_OK) {
        res->exit_code = 0;
    } else if (status == PLG_RUN_OOM) {
        res->exit_code = 1;
        res->flags |= PL_JS_RESP_OOM;
    } else {
        res->exit_code = 1;
    }
    /* Start plimsoll's line on a line of its own. */
    const struct pl_buf *err = &wasi->out[1].kept;
    if (res->note[0] && err->len > 0 && err->data[err->len - 1] != '\n') {
        memmove(res->note + 1, res->note, sizeof(res->note) - 1);
        res->note[0] = '\n';
        res->note[sizeof(res->note) - 1] = '\0';
    }
    if (pl_capture_truncated(&wasi->out[0]))
        res->flags |= PL_JS_RESP_OUT_TRUNC;
    if (pl_capture_truncated(&wasi->out[1]))
        res->flags |= PL_JS_RESP_ERR_TRUNC;
}

/* ---- serving loop -------------------------------------------------------- */

static int send_hello(int fd) {
    struct pl_js_hello hello = {.pid = (uint32_t)getpid()};
    struct iovec iov = {&hello, sizeof(hello)};

    return pl_js_write_frame(fd, PL_JS_MSG_HELLO, &iov, 1);
}

/* Serve one request.  Returns 0 to continue, 1 on clean EOF, < 0 on error. */
static int serve_one(int fd) {
    struct pl_js_frame_hdr hdr;
    struct pl_js_run_req req;
    struct pl_js_run_resp resp;
    struct run_result res;
    pl_broker_host_t broker;
    pl_wasi_t wasi;
    struct live_output live = {.fd = fd};
    const struct pl_output_sink live_sink = {.write = stream_output, .ud = &live};
    bool has_broker;
    size_t rest;
    int r;

    r = pl_fd_read_full(fd, &hdr, sizeof(hdr), 0, -1);
    if (r == -EPIPE)
        return 1;
    if (r < 0)
        return r;
    r = pl_js_check_hdr(&hdr, PL_JS_MSG_RUN,
                        sizeof(req) + (uint64_t)PL_JS_MAX_CODE + PL_JS_MAX_STDIN);
    if (r < 0 || hdr.len < sizeof(req))
        return -EPROTO;
    r = pl_fd_read_full(fd, &req, sizeof(req), 0, -1);
    if (r < 0)
        return r;
    rest = hdr.len - sizeof(req);
    if (req.code_len > PL_JS_MAX_CODE || req.stdin_len > PL_JS_MAX_STDIN ||
        (uint64_t)req.code_len + req.stdin_len != rest || req.stdout_cap > PL_JS_MAX_STREAM ||
        req.stderr_cap > PL_JS_MAX_STREAM)
        return -EPROTO;
    has_broker = req.flags & PL_JS_RUN_BROKER;
    if ((req.flags & ~PL_JS_RUN_FLAGS) != 0 ||
        (has_broker
             ? req.broker_max_request == 0 || req.broker_max_request > PL_JS_MAX_BROKER_MSG ||
                   req.broker_max_reply == 0 || req.broker_max_reply > PL_JS_MAX_BROKER_MSG
             : req.broker_max_request != 0 || req.broker_max_reply != 0))
        return -EPROTO;
    if (buf_reserve(&g_payload, rest + 1) < 0)
        return -ENOMEM;
    r = pl_fd_read_full(fd, g_payload.p, rest, 0, -1);
    if (r < 0)
        return r;

    pl_wasi_init(&wasi, &g_inst.w2c_memory, req.stdout_cap, req.stderr_cap);
    if (req.flags & PL_JS_RUN_STREAM) {
        pl_capture_stream(&wasi.out[0], &live_sink, 1, 0);
        pl_capture_stream(&wasi.out[1], &live_sink, 2, 0);
    }
    broker = (pl_broker_host_t){
        .memory = &g_inst.w2c_memory,
        .fd = fd,
        .max_request = req.broker_max_request,
        .max_reply = req.broker_max_reply,
    };
    run_one(&req, g_payload.p, g_payload.p + req.code_len, &wasi, &broker, &res);

    /* What the pool has not had yet: everything, or (streaming) only the
     * note, every kept byte having gone out as it was kept. */
    const struct pl_buf *out = &wasi.out[0].kept, *err = &wasi.out[1].kept;
    size_t out_skip = live.sent[0], err_skip = live.sent[1];
    if (out_skip > out->len || err_skip > err->len) {
        pl_wasi_release(&wasi);
        return -EPROTO; /* cannot happen: a capture streams only what it keeps */
    }
    resp = (struct pl_js_run_resp){
        .exit_code = res.exit_code,
        .flags = res.flags,
        .guest_ns = res.guest_ns,
        .out_len = (uint32_t)(out->len - out_skip),
        .err_len = (uint32_t)(err->len - err_skip + strlen(res.note)),
    };
    struct iovec parts[4] = {
        {&resp, sizeof(resp)},
        {out->data ? out->data + out_skip : NULL, out->len - out_skip},
        {err->data ? err->data + err_skip : NULL, err->len - err_skip},
        {res.note, strlen(res.note)},
    };
    r = pl_js_write_frame(fd, PL_JS_MSG_RESULT, parts, 4);
    pl_wasi_release(&wasi);
    image_restore(); /* after the answer: not on the run's path */
    return r;
}

static void *serve_thread(void *arg) {
    int fd = WORKER_SOCKET_FD;
    struct sigaction sa;
    sigset_t set;
    int r;

    (void)arg;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigalrm;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGALRM, &sa, NULL) != 0)
        _exit(2);
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);

    wasm_rt_init();
    Z_qjs_init_module();

    if (g_use_seccomp && (r = pl_worker_seccomp(0)) < 0) {
        fprintf(stderr, "plimsoll-js-worker: seccomp: %s\n", strerror(-r));
        _exit(2);
    }
    /* The image is made under the filter too: plg_init is plimsoll's own
     * code, but nothing it does needs more.  Without it (cannot happen
     * but for memory), every run makes its own engine. */
    if (image_instance() < 0)
        fprintf(stderr, "plimsoll-js-worker[%d]: no engine image; each run makes its engine\n",
                (int)getpid());
    if (send_hello(fd) < 0)
        _exit(1);
    for (;;) {
        r = serve_one(fd);
        if (r == 1)
            _exit(0);
        if (r < 0) {
            fprintf(stderr, "plimsoll-js-worker[%d]: %s\n", (int)getpid(), strerror(-r));
            _exit(1);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    struct rlimit no_core = {0, 0};
    pthread_attr_t attr;
    pthread_t th;
    sigset_t all;
    struct stat st;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-seccomp") == 0) {
            g_use_seccomp = false;
        } else {
            fprintf(stderr, "usage: plimsoll-js-worker [--no-seccomp]\n"
                            "(started by the plimsoll JS pool with its socket on fd 3)\n");
            return 2;
        }
    }
    if (fstat(WORKER_SOCKET_FD, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        fprintf(stderr, "plimsoll-js-worker: fd 3 is not a socket; "
                        "this program is started by the plimsoll JS pool\n");
        return 2;
    }
    /* Belt and braces: the pool already asks for these at spawn. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return 2;
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no ptrace by peers, no core */
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGPIPE, SIG_IGN);

    /* One malloc arena: the serving thread then uses the brk heap like a
     * single-threaded program (non-main arenas probe /proc when trimmed). */
    mallopt(M_ARENA_MAX, 1);

    /* Only the serving thread takes signals (SIGALRM). */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);

    if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, WORKER_STACK_SIZE) != 0 ||
        pthread_attr_setguardsize(&attr, WORKER_GUARD_SIZE) != 0 ||
        pthread_create(&th, &attr, serve_thread, NULL) != 0) {
        fprintf(stderr, "plimsoll-js-worker: cannot start the serving thread\n");
        return 2;
    }
    pthread_attr_destroy(&attr);
    pthread_join(th, NULL); /* serve_thread always _exit()s */
    return 1;
}
