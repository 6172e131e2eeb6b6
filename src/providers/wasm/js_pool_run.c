/* SPDX-License-Identifier: Apache-2.0 */
/*
 * js_pool_run.c: one run on the worker pool (js_pool.h), in the daemon.
 *
 * A run takes a free worker, sends one RUN frame and reads the answer
 * (js_proto.h).  The worker enforces the deadline itself; the pool only
 * adds a backstop: if no result arrives by deadline + 250 ms it SIGKILLs
 * the worker, reports a timeout and starts a replacement.  A worker that
 * dies or misbehaves during a run is replaced and the run reported as an
 * infrastructure error (never as guest output).
 *
 * A run with a broker (pl_js_pool_run_broker()) may see BROKER_REQ frames
 * before its RESULT: read_result() calls the broker callback for each, on
 * this thread, with the run's deadline, and answers with BROKER_REPLY.
 * The backstop covers the whole exchange.
 *
 * A streaming run (pl_js_pool_run_stream() with a sink) asks the worker
 * for OUTPUT frames: read_result() checks each against its bounds and
 * keeps its bytes in the run's own captures (struct live), which hand
 * them to the sink on this thread as they come.  The result's streams are
 * those captures, finished after RESULT's own bytes (the worker's
 * "plimsoll: ..." line) or the backstop's line were added through them,
 * so the sink has seen exactly what the result keeps.
 *
 * A module pool (PL_JS_POOL_MODULES) first waits for the worker's STARTED
 * or REFUSED frame (await_start()): a refusal is a result flagged
 * `refused`, carried by that frame type alone, and it is accepted only
 * before the guest has started.  The guest's deadline starts at STARTED.
 * Nothing else about a worker is read as a signal: its exit status is
 * never looked at, and a worker that ends without its frame is an
 * infrastructure error.
 *
 * What a run cost (js_pool.h, "usage") is the kernel's accounting of the
 * worker, read here around the run (mark_begin, mark_end), never asked of
 * the worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/acct.h"
#include "../../core/clock.h"
#include "../../core/fdio.h"
#include "js_pool.h"
#include "protocol/js_proto.h"
#include "wasm_int.h"

#define PL_JS_MAX_TIMEOUT_MS 3600000u
/* Extra time the pool grants beyond the deadline before it kills. */
#define PL_JS_BACKSTOP_NS PL_MS(250)
/* How long a module worker may take to validate and instantiate a module
 * (bounded by the module bounds in wasi_runner.h; well under a second). */
#define PL_JS_CHECK_TIMEOUT_NS PL_MS(10000)
/* Smallest accepted memory cap (one wasm page; below what QuickJS needs,
 * which then yields an out-of-memory result rather than an error). */
#define PL_WASM_MIN_MEMORY 65536u

void pl_js_result_free(struct pl_js_result *r) {
    if (!r)
        return;
    pl_output_clear(&r->out);
    pl_output_clear(&r->err);
    memset(r, 0, sizeof(*r));
}

/* A streaming run's output as the pool receives it.  on is false for every
 * other run, and then nothing else here is used. */
struct live {
    bool on;
    struct pl_capture cap[2]; /* stdout, stderr; stderr's cap leaves room for the note */
    size_t limit[2];          /* the guest's bytes at most: stdout_cap, stderr_cap */
    char *frame;              /* one OUTPUT frame's payload */
};

static int live_init(struct live *lv, const struct pl_output_sink *sink,
                     const struct pl_js_limits *l) {
    memset(lv, 0, sizeof(*lv));
    if (!sink)
        return 0;
    lv->frame = malloc(sizeof(struct pl_js_output) + PL_JS_MAX_OUTPUT_FRAME);
    if (!lv->frame)
        return -ENOMEM;
    lv->on = true;
    lv->limit[0] = l->stdout_cap;
    lv->limit[1] = l->stderr_cap;
    pl_capture_init(&lv->cap[0], l->stdout_cap);
    pl_capture_init(&lv->cap[1], l->stderr_cap + PL_JS_MAX_NOTE);
    pl_capture_stream(&lv->cap[0], sink, 1, 0);
    pl_capture_stream(&lv->cap[1], sink, 2, 0);
    return 0;
}

static void live_free(struct live *lv) {
    pl_capture_free(&lv->cap[0]);
    pl_capture_free(&lv->cap[1]);
    free(lv->frame);
    memset(lv, 0, sizeof(*lv));
}

/* End a streaming run's captures into res, with RESULT's truncation flags. */
static int live_finish(struct live *lv, bool out_truncated, bool err_truncated,
                       struct pl_js_result *res) {
    if (pl_capture_finish(&lv->cap[0], &res->out) < 0 ||
        pl_capture_finish(&lv->cap[1], &res->err) < 0)
        return -ENOMEM;
    res->out.truncated = out_truncated;
    res->err.truncated = err_truncated;
    return 0;
}

/* One OUTPUT frame whose header is hdr: check it, read it, keep its bytes
 * (which gives them to the sink).  < 0: protocol/IO error. */
static int take_output(struct pl_js_worker *w, const struct pl_js_frame_hdr *hdr, struct live *lv,
                       uint64_t deadline) {
    struct pl_js_output o;
    struct pl_capture *c;
    size_t n;
    int r;

    if (!lv->on ||
        pl_js_check_hdr(hdr, PL_JS_MSG_OUTPUT, sizeof(o) + (uint64_t)PL_JS_MAX_OUTPUT_FRAME) < 0 ||
        hdr->len <= sizeof(o))
        return -EPROTO;
    r = pl_fd_read_full(w->fd, lv->frame, hdr->len, deadline, -1);
    if (r < 0)
        return r;
    memcpy(&o, lv->frame, sizeof(o));
    n = hdr->len - sizeof(o);
    if ((o.fd != 1 && o.fd != 2) || o.reserved != 0)
        return -EPROTO;
    c = &lv->cap[o.fd - 1];
    if (n > lv->limit[o.fd - 1] - c->kept.len) /* kept.len <= limit: checked before */
        return -EPROTO;
    return pl_capture_add(c, lv->frame + sizeof(o), n); /* kept whole: there is room */
}

/* Read len bytes of a stream into *o (NUL-terminated). */
static int read_output(struct pl_js_worker *w, struct pl_output *o, size_t len, bool truncated,
                       uint64_t deadline) {
    o->data = malloc(len + 1);
    if (!o->data)
        return -ENOMEM;
    int r = pl_fd_read_full(w->fd, o->data, len, deadline, -1);
    if (r < 0)
        return r;
    o->data[len] = '\0';
    o->len = len;
    o->truncated = truncated;
    return 0;
}

static int validate(const char *code, size_t code_len, const char *stdin_data, size_t stdin_len,
                    const struct pl_js_limits *l, const struct pl_js_broker *b,
                    const struct pl_output_sink *sink) {
    if ((!code && code_len) || (!stdin_data && stdin_len) || !l || (sink && !sink->write))
        return -EINVAL;
    if (b &&
        (!b->call || b->max_request_bytes == 0 || b->max_request_bytes > PL_JS_MAX_BROKER_MSG ||
         b->max_reply_bytes == 0 || b->max_reply_bytes > PL_JS_MAX_BROKER_MSG))
        return -EINVAL;
    if (code_len > PL_JS_MAX_CODE || stdin_len > PL_JS_MAX_STDIN)
        return -E2BIG;
    if (l->memory_bytes < PL_WASM_MIN_MEMORY || l->memory_bytes > PL_JS_MAX_MEMORY ||
        l->timeout_ms == 0 || l->timeout_ms > PL_JS_MAX_TIMEOUT_MS ||
        l->stdout_cap > PL_JS_MAX_STREAM || l->stderr_cap > PL_JS_MAX_STREAM)
        return -EINVAL;
    return 0;
}

/* Fill r as a deadline stop detected by the pool (worker killed).  A
 * streaming run keeps what was streamed, and streams the line too. */
static int backstop_result(const struct pl_js_limits *l, struct live *lv, struct pl_js_result *r) {
    char line[128];
    int n =
        snprintf(line, sizeof(line),
                 "plimsoll: deadline of %u ms exceeded; the guest was stopped\n", l->timeout_ms);

    r->exit_code = 124;
    r->timed_out = true;
    if (lv->on) {
        const struct pl_buf *err = &lv->cap[1].kept;
        int e = 0;
        /* On a line of its own, as the worker writes it. */
        if (err->len > 0 && err->data[err->len - 1] != '\n')
            e = pl_capture_add(&lv->cap[1], "\n", 1);
        if (e == 0)
            e = pl_capture_add(&lv->cap[1], line, (size_t)n);
        if (e == 0)
            e = live_finish(lv, false, false, r);
        if (e < 0)
            pl_js_result_free(r);
        return e;
    }
    r->out.data = calloc(1, 1);
    r->err.data = strdup(line);
    if (!r->out.data || !r->err.data) {
        pl_js_result_free(r);
        return -ENOMEM;
    }
    r->err.len = (size_t)n;
    return 0;
}

/* A worker's CPU counters when its run was sent (js_pool.h, "usage"). */
struct worker_mark {
    bool ok;
    bool reset; /* its peak resident set was reset then */
    uint64_t user_us, system_us;
};

/* Read worker w's CPU counters, then reset its peak resident set to what
 * it holds now ("5" to clear_refs, Linux 4.0 and later; the worker is not
 * dumpable, so only root may). */
static void mark_begin(const struct pl_js_worker *w, struct worker_mark *m) {
    char path[64], text[PL_ACCT_TEXT_MAX];
    memset(m, 0, sizeof(*m));
    if (w->pid <= 0)
        return;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)w->pid);
    if (pl_acct_read(path, text, sizeof(text)) < 0 ||
        pl_acct_proc_stat(text, sysconf(_SC_CLK_TCK), &m->user_us, &m->system_us) < 0)
        return;
    m->ok = true;
    snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)w->pid);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        m->reset = write(fd, "5", 1) == 1;
        close(fd);
    }
}

/* The run's cost against m into r, read while the worker still lives. */
static void mark_end(const struct pl_js_worker *w, const struct worker_mark *m,
                     struct pl_js_result *r) {
    char path[64], text[PL_ACCT_TEXT_MAX];
    uint64_t u, s, hwm;
    if (!m->ok || w->pid <= 0)
        return;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)w->pid);
    if (pl_acct_read(path, text, sizeof(text)) < 0 ||
        pl_acct_proc_stat(text, sysconf(_SC_CLK_TCK), &u, &s) < 0)
        return;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)w->pid);
    if (pl_acct_read(path, text, sizeof(text)) < 0 || pl_acct_proc_hwm(text, &hwm) < 0)
        return;
    r->usage_read = true;
    r->cpu_user_us = u > m->user_us ? u - m->user_us : 0;
    r->cpu_system_us = s > m->system_us ? s - m->system_us : 0;
    r->maxrss_bytes = hwm;
    r->maxrss_reset = m->reset;
}

/* Send the request, transparently replacing a worker that was found dead
 * before it received the run (the guest cannot have started).  *m is the
 * worker's reading just before the run went. */
static int send_run(struct pl_js_pool *pool, struct pl_js_worker *w, const char *code,
                    size_t code_len, const char *stdin_data, size_t stdin_len,
                    const struct pl_js_limits *l, const struct pl_js_broker *b, bool stream,
                    struct worker_mark *m) {
    struct pl_js_run_req req = {
        .memory_bytes = l->memory_bytes,
        .stdout_cap = l->stdout_cap,
        .stderr_cap = l->stderr_cap,
        .timeout_ms = l->timeout_ms,
        .code_len = (uint32_t)code_len,
        .stdin_len = (uint32_t)stdin_len,
        .flags = (b ? PL_JS_RUN_BROKER : 0) | (stream ? PL_JS_RUN_STREAM : 0),
        .broker_max_request = b ? (uint32_t)b->max_request_bytes : 0,
        .broker_max_reply = b ? (uint32_t)b->max_reply_bytes : 0,
    };
    struct iovec parts[3] = {
        {&req, sizeof(req)},
        {(void *)code, code_len},
        {(void *)stdin_data, stdin_len},
    };
    int r;

    for (int attempt = 0;; attempt++) {
        if (pl_js_worker_stale(w)) {
            r = pl_js_worker_restart(pool, w);
            if (r < 0)
                return r;
        }
        mark_begin(w, m);
        r = pl_js_write_frame(w->fd, PL_JS_MSG_RUN, parts, 3);
        if (r == 0)
            return 0;
        pl_js_worker_stop(w);
        if (attempt >= 1)
            return -EIO;
    }
}

/* Serve one BROKER_REQ whose header is hdr: read the request, call the
 * broker (or refuse past max_calls), send the BROKER_REPLY.  read_deadline
 * bounds reading the payload; run_deadline is the callback's.  < 0:
 * protocol/IO error. */
static int serve_broker(struct pl_js_worker *w, const struct pl_js_frame_hdr *hdr,
                        const struct pl_js_broker *b, uint64_t run_deadline, uint64_t read_deadline,
                        struct pl_js_result *res) {
    struct pl_js_broker_reply rep = {.status = PL_JS_BROKER_OK};
    struct iovec parts[2];
    char *req, *reply = NULL;
    size_t reply_len = 0;
    int r;

    if (!b || pl_js_check_hdr(hdr, PL_JS_MSG_BROKER_REQ, b->max_request_bytes) < 0)
        return -EPROTO;
    req = malloc((size_t)hdr->len + 1);
    if (!req)
        return -ENOMEM;
    r = pl_fd_read_full(w->fd, req, hdr->len, read_deadline, -1);
    if (r < 0) {
        free(req);
        return r;
    }
    req[hdr->len] = '\0';
    if (b->max_calls && res->broker_calls >= b->max_calls) {
        rep.status = PL_JS_BROKER_CALL_LIMIT;
    } else {
        res->broker_calls++;
        r = b->call(b->userdata, req, hdr->len, run_deadline, &reply, &reply_len);
        if (r < 0 || !reply)
            rep.status = PL_JS_BROKER_FAILED;
        else if (reply_len > b->max_reply_bytes)
            rep.status = PL_JS_BROKER_REPLY_TOO_BIG;
    }
    free(req);
    parts[0] = (struct iovec){&rep, sizeof(rep)};
    parts[1] = (struct iovec){reply, rep.status == PL_JS_BROKER_OK ? reply_len : 0};
    r = pl_js_write_frame(w->fd, PL_JS_MSG_BROKER_REPLY, parts, 2);
    free(reply);
    return r;
}

/* Module pools: read the worker's first answer to RUN, which must come by
 * `deadline`.  Returns 0 when the guest STARTED, 1 when the module was
 * REFUSED (res filled: refused, the reason in err, *ret_flags), < 0 on a
 * protocol/IO error or -ETIMEDOUT. */
static int await_start(struct pl_js_worker *w, uint64_t deadline, struct pl_js_result *res,
                       uint32_t *ret_flags) {
    struct pl_js_frame_hdr hdr;
    struct pl_js_refusal ref;
    int r = pl_fd_read_full(w->fd, &hdr, sizeof(hdr), deadline, -1);

    if (r < 0)
        return r;
    if (hdr.type == PL_JS_MSG_STARTED)
        return pl_js_check_hdr(&hdr, PL_JS_MSG_STARTED, 0);
    if (pl_js_check_hdr(&hdr, PL_JS_MSG_REFUSED, sizeof(ref) + PL_JS_MAX_REFUSAL) < 0 ||
        hdr.len < sizeof(ref))
        return -EPROTO;
    r = pl_fd_read_full(w->fd, &ref, sizeof(ref), deadline, -1);
    if (r < 0)
        return r;
    if ((ref.flags & ~PL_JS_RESP_WORKER_ENDS) != 0 || ref.reserved != 0)
        return -EPROTO;
    res->out.data = calloc(1, 1);
    if (!res->out.data)
        return -ENOMEM;
    r = read_output(w, &res->err, hdr.len - sizeof(ref), false, deadline);
    if (r < 0)
        return r;
    res->refused = true;
    *ret_flags = ref.flags;
    return 1;
}

/* Read the RESULT frame into *res, serving broker requests and taking
 * OUTPUT frames before it.  *ret_flags gets the frame's PL_JS_RESP_*
 * flags.  < 0: protocol/IO error or -ETIMEDOUT. */
static int read_result(struct pl_js_worker *w, const struct pl_js_limits *l,
                       const struct pl_js_broker *b, struct live *lv, uint64_t run_deadline,
                       uint64_t deadline, struct pl_js_result *res, uint32_t *ret_flags) {
    struct pl_js_frame_hdr hdr;
    struct pl_js_run_resp resp;
    /* A streaming run's RESULT has only the worker's own line (js_proto.h). */
    uint64_t max_out = lv->on ? 0 : l->stdout_cap;
    uint64_t max_err = lv->on ? PL_JS_MAX_NOTE : (uint64_t)l->stderr_cap + PL_JS_MAX_NOTE;
    int r;

    for (;;) {
        r = pl_fd_read_full(w->fd, &hdr, sizeof(hdr), deadline, -1);
        if (r < 0)
            return r;
        if (hdr.type == PL_JS_MSG_BROKER_REQ)
            r = serve_broker(w, &hdr, b, run_deadline, deadline + PL_MS(1000), res);
        else if (hdr.type == PL_JS_MSG_OUTPUT)
            r = take_output(w, &hdr, lv, deadline);
        else
            break;
        if (r < 0)
            return r;
    }
    if (pl_js_check_hdr(&hdr, PL_JS_MSG_RESULT, sizeof(resp) + max_out + max_err) < 0 ||
        hdr.len < sizeof(resp))
        return -EPROTO;
    /* The rest was written in one go right after the header. */
    deadline += PL_JS_BACKSTOP_NS + PL_MS(1000);
    r = pl_fd_read_full(w->fd, &resp, sizeof(resp), deadline, -1);
    if (r < 0)
        return r;
    if (resp.out_len > max_out || resp.err_len > max_err ||
        (uint64_t)resp.out_len + resp.err_len != hdr.len - sizeof(resp))
        return -EPROTO;
    if (lv->on) {
        struct pl_output note = {0};
        r = read_output(w, &note, resp.err_len, false, deadline);
        if (r == 0)
            r = pl_capture_add(&lv->cap[1], note.data, note.len);
        pl_output_clear(&note);
        if (r == 0)
            r = live_finish(lv, resp.flags & PL_JS_RESP_OUT_TRUNC,
                            resp.flags & PL_JS_RESP_ERR_TRUNC, res);
    } else {
        r = read_output(w, &res->out, resp.out_len, resp.flags & PL_JS_RESP_OUT_TRUNC, deadline);
        if (r == 0)
            r = read_output(w, &res->err, resp.err_len, resp.flags & PL_JS_RESP_ERR_TRUNC,
                            deadline);
    }
    if (r < 0)
        return r;
    res->exit_code = resp.exit_code;
    res->timed_out = resp.flags & PL_JS_RESP_TIMED_OUT;
    res->out_of_memory = resp.flags & PL_JS_RESP_OOM;
    res->trapped = resp.flags & PL_JS_RESP_TRAPPED;
    res->from_image = resp.flags & PL_JS_RESP_FROM_IMAGE;
    res->guest_ns = resp.guest_ns;
    *ret_flags = resp.flags;
    return 0;
}

/* Everything after RUN was sent: STARTED or REFUSED on a module pool,
 * then broker requests, output and RESULT.  Returns 0 (a refusal
 * included: then res->refused), -ETIMEDOUT when the guest's backstop
 * passed, or < 0. */
static int exchange(struct pl_js_pool *pool, struct pl_js_worker *w, const struct pl_js_limits *l,
                    const struct pl_js_broker *b, struct live *lv, struct pl_js_result *res,
                    uint32_t *ret_flags) {
    uint64_t run_deadline;

    if (pool->flags & PL_JS_POOL_MODULES) {
        int r = await_start(w, pl_now_ns() + PL_JS_CHECK_TIMEOUT_NS, res, ret_flags);
        if (r == 1)
            return 0;
        if (r < 0)
            return r == -ETIMEDOUT ? -EIO : r; /* nothing ran: not the guest's deadline */
    }
    run_deadline = pl_deadline_in_ms(l->timeout_ms);
    return read_result(w, l, b, lv, run_deadline, run_deadline + PL_JS_BACKSTOP_NS, res, ret_flags);
}

int pl_js_pool_run(struct pl_js_pool *pool, const char *code, size_t code_len,
                   const char *stdin_data, size_t stdin_len, const struct pl_js_limits *limits,
                   struct pl_js_result *ret_result) {
    return pl_js_pool_run_broker(pool, code, code_len, stdin_data, stdin_len, limits, NULL,
                                 ret_result);
}

int pl_js_pool_run_broker(struct pl_js_pool *pool, const char *code, size_t code_len,
                          const char *stdin_data, size_t stdin_len,
                          const struct pl_js_limits *limits, const struct pl_js_broker *broker,
                          struct pl_js_result *ret_result) {
    return pl_js_pool_run_stream(pool, code, code_len, stdin_data, stdin_len, limits, broker, NULL,
                                 ret_result);
}

int pl_js_pool_run_stream(struct pl_js_pool *pool, const char *code, size_t code_len,
                          const char *stdin_data, size_t stdin_len,
                          const struct pl_js_limits *limits, const struct pl_js_broker *broker,
                          const struct pl_output_sink *sink, struct pl_js_result *ret_result) {
    struct pl_js_worker *w;
    struct live lv;
    struct worker_mark mark;
    struct pl_js_result cost = {0}; /* the worker's reading at the run's end */
    uint64_t t0;
    uint32_t flags = 0;
    unsigned calls = 0;
    int r;

    if (!pool || !ret_result)
        return -EINVAL;
    memset(ret_result, 0, sizeof(*ret_result));
    r = validate(code, code_len, stdin_data, stdin_len, limits, broker, sink);
    if (r < 0)
        return r;
    r = live_init(&lv, sink, limits);
    if (r < 0)
        return r;

    w = pl_js_pool_acquire(pool);
    t0 = pl_now_ns();
    r = send_run(pool, w, code, code_len, stdin_data, stdin_len, limits, broker, lv.on, &mark);
    if (r == 0) {
        r = exchange(pool, w, limits, broker, &lv, ret_result, &flags);
        calls = ret_result->broker_calls; /* kept when the result is replaced */
        if (r == 0 || r == -ETIMEDOUT)
            mark_end(w, &mark, &cost); /* before a restart ends the worker */
        if (r == -ETIMEDOUT) {
            /* Backstop: the worker missed its own deadline. */
            pl_js_result_free(ret_result);
            r = backstop_result(limits, &lv, ret_result);
            pl_js_worker_restart(pool, w); /* a failure is retried on next use */
        } else if (r < 0) {
            /* A protocol or I/O error, or the worker ended without its
             * frame: never the guest's answer. */
            pl_js_result_free(ret_result);
            pl_js_worker_restart(pool, w);
            if (r != -ENOMEM)
                r = -EIO;
        } else if (flags & PL_JS_RESP_WORKER_ENDS) {
            pl_js_worker_restart(pool, w); /* it exits after this answer */
        }
    }
    if (r == 0) {
        ret_result->duration_ns = pl_now_ns() - t0;
        ret_result->broker_calls = calls;
        ret_result->usage_read = cost.usage_read;
        ret_result->cpu_user_us = cost.cpu_user_us;
        ret_result->cpu_system_us = cost.cpu_system_us;
        ret_result->maxrss_bytes = cost.maxrss_bytes;
        ret_result->maxrss_reset = cost.maxrss_reset;
    }
    pl_js_pool_release(pool, w);
    live_free(&lv);
    return r;
}
