/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Wire protocol between the pool (js_pool.c, in the daemon) and a worker
 * process (js_worker.c), over a private AF_UNIX SOCK_STREAM socketpair.
 *
 * Every message is a 16-byte frame header followed by `len` payload bytes.
 * Both ends are the same build on the same host, so integers are in native
 * byte order; the header carries a magic and a version so a mismatched
 * worker binary is detected at the handshake.
 *
 *   worker -> pool  HELLO         payload: struct pl_js_hello (sent once, when ready)
 *   pool -> worker  RUN           payload: struct pl_js_run_req, code, stdin
 *   worker -> pool  STARTED       no payload (module workers: the guest starts now)
 *   worker -> pool  REFUSED       payload: struct pl_js_refusal, reason text
 *                                 (module workers, instead of STARTED)
 *   worker -> pool  OUTPUT        payload: struct pl_js_output, the bytes
 *                                 (only in a run with PL_JS_RUN_STREAM)
 *   worker -> pool  BROKER_REQ    payload: the guest's request (JSON bytes)
 *   pool -> worker  BROKER_REPLY  payload: struct pl_js_broker_reply, reply bytes
 *   worker -> pool  RESULT        payload: struct pl_js_run_resp, stdout, stderr
 *
 * A JavaScript run is RUN, then any number of BROKER_REQ/BROKER_REPLY
 * pairs, then RESULT.  BROKER_REQ is sent only when the RUN had
 * PL_JS_RUN_BROKER set, and is at most broker_max_request bytes; the worker
 * then blocks until the pool answers with exactly one BROKER_REPLY (at most
 * broker_max_reply bytes after the fixed part).  The pool's result reader
 * serves broker frames until it sees RESULT.
 *
 * A module run is RUN, then either REFUSED (the module failed validation
 * or instantiation: none of its code ran, and the run ends there) or
 * STARTED, sent immediately before the first guest instruction, then
 * RESULT.  "Refused" therefore has a frame of its own that only the worker
 * writes, and only before any guest code has run: after STARTED, and on a
 * JavaScript pool at all, a REFUSED frame is a protocol error.  Nothing a
 * guest produces (its exit status, its output bytes, whatever they look
 * like) is ever read as a frame type, a length or a flag.
 *
 * Live output: a RUN with PL_JS_RUN_STREAM set asks the worker to send
 * each byte its captures keep of the guest's stdout and stderr as it is
 * kept, in OUTPUT frames, in the order the guest wrote them; they may come
 * anywhere between RUN (on a module pool: STARTED) and RESULT, between
 * broker exchanges, never inside one.  An OUTPUT frame's payload is a
 * struct pl_js_output naming the stream (fd 1 or 2) and then 1 ..
 * PL_JS_MAX_OUTPUT_FRAME of the guest's bytes, which are only ever
 * payload: a longer write goes out as several frames.  A stream's OUTPUT
 * bytes together are at most its cap (stdout_cap, stderr_cap).  Every
 * byte the guest's captures kept has gone out in OUTPUT frames before
 * RESULT, so in such a run RESULT carries no stdout (out_len 0) and, of
 * stderr, only what the worker adds after the guest's bytes (its own
 * "plimsoll: ..." line, at most PL_JS_MAX_NOTE bytes): the pool builds the
 * result's streams from the OUTPUT bytes followed by RESULT's, the same
 * bytes it gave the run's sink, so the two cannot differ.  (A module
 * worker's deadline answer, written by its signal handler, could not carry
 * the guest's bytes anyway.)  An OUTPUT frame in a run without the flag,
 * before STARTED, with another fd, a non-zero reserved field, no bytes or
 * more than the bounds allow, is a protocol error.
 *
 * Nothing else is interleaved; anything out of order is a protocol error,
 * and the worker is replaced.
 */
#ifndef PLIMSOLL_JS_PROTO_H
#define PLIMSOLL_JS_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define PL_JS_PROTO_MAGIC 0x534a4c50u /* "PLJS" little-endian */
#define PL_JS_PROTO_VERSION 4

/* Hard ceilings enforced by both ends (the API caller may ask for less). */
#define PL_JS_MAX_CODE (16u << 20)                 /* script bytes */
#define PL_JS_MAX_STDIN (64u << 20)                /* stdin bytes */
#define PL_JS_MAX_STREAM (64u << 20)               /* stdout_cap / stderr_cap */
#define PL_JS_MAX_MEMORY ((uint64_t)65535 * 65536) /* just under 4 GiB */
#define PL_JS_MAX_BROKER_MSG (16u << 20)           /* one broker request or reply */
#define PL_JS_MAX_REFUSAL 1024u                    /* a REFUSED frame's reason text */
#define PL_JS_MAX_OUTPUT_FRAME (64u << 10)         /* an OUTPUT frame's guest bytes */
/* What a worker adds to a stream after the guest's bytes: at most one
 * "plimsoll: ..." line on stderr (deadline, trap, out of memory). */
#define PL_JS_MAX_NOTE 512u

enum pl_js_msg_type {
    PL_JS_MSG_HELLO = 1,
    PL_JS_MSG_RUN = 2,
    PL_JS_MSG_RESULT = 3,
    PL_JS_MSG_STARTED = 4,
    PL_JS_MSG_REFUSED = 5,
    PL_JS_MSG_OUTPUT = 6,
    PL_JS_MSG_BROKER_REQ = 16,
    PL_JS_MSG_BROKER_REPLY = 17,
};

struct pl_js_frame_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t len;      /* payload bytes that follow */
    uint32_t reserved; /* 0 */
};

struct pl_js_hello {
    uint32_t pid;
    uint32_t reserved;
};

struct pl_js_run_req {
    uint64_t memory_bytes;
    uint64_t stdout_cap;
    uint64_t stderr_cap;
    uint32_t timeout_ms;
    uint32_t code_len;
    uint32_t stdin_len;
    uint32_t flags;              /* PL_JS_RUN_* */
    uint32_t broker_max_request; /* with PL_JS_RUN_BROKER: 1..PL_JS_MAX_BROKER_MSG, else 0 */
    uint32_t broker_max_reply;   /* with PL_JS_RUN_BROKER: 1..PL_JS_MAX_BROKER_MSG, else 0 */
};

/* pl_js_run_req.flags */
#define PL_JS_RUN_BROKER (1u << 0) /* the run has a grant: the guest may send BROKER_REQ */
#define PL_JS_RUN_STREAM (1u << 1) /* send the guest's output as it is kept (OUTPUT) */
#define PL_JS_RUN_FLAGS (PL_JS_RUN_BROKER | PL_JS_RUN_STREAM) /* every flag a RUN may carry */

/* An OUTPUT frame's fixed part; 1 .. PL_JS_MAX_OUTPUT_FRAME bytes of the
 * stream follow. */
struct pl_js_output {
    uint32_t fd; /* 1 stdout, 2 stderr */
    uint32_t reserved;
};

/* pl_js_broker_reply.status: what the guest's call gets. */
enum pl_js_broker_status {
    PL_JS_BROKER_OK = 0,            /* the reply bytes follow */
    PL_JS_BROKER_FAILED = 1,        /* the callback failed: "broker unavailable" */
    PL_JS_BROKER_REPLY_TOO_BIG = 2, /* the callback's reply was over broker_max_reply */
    PL_JS_BROKER_CALL_LIMIT = 3,    /* the grant's max_calls was reached */
};

struct pl_js_broker_reply {
    uint32_t status; /* enum pl_js_broker_status; no bytes follow unless OK */
    uint32_t reserved;
};

/* pl_js_run_resp.flags */
#define PL_JS_RESP_TIMED_OUT (1u << 0)
#define PL_JS_RESP_OOM (1u << 1)
#define PL_JS_RESP_OUT_TRUNC (1u << 2)
#define PL_JS_RESP_ERR_TRUNC (1u << 3)
#define PL_JS_RESP_TRAPPED (1u << 4)
/* The worker exits after this frame (a module worker's deadline, or its
 * interpreter ran out of host memory): the pool replaces it at once. */
#define PL_JS_RESP_WORKER_ENDS (1u << 5)
/* The run started from the worker's engine image (JavaScript worker). */
#define PL_JS_RESP_FROM_IMAGE (1u << 6)

/* A REFUSED frame's fixed part; the reason text (at most PL_JS_MAX_REFUSAL
 * bytes, one line) follows. */
struct pl_js_refusal {
    uint32_t flags; /* PL_JS_RESP_WORKER_ENDS or 0 */
    uint32_t reserved;
};

struct pl_js_run_resp {
    int32_t exit_code; /* a module's u32 WASI status as two's complement (pl_js_status_i32) */
    uint32_t flags;
    uint64_t guest_ns; /* instantiate -> end, measured in the worker */
    uint32_t out_len;
    uint32_t err_len;
};

/**
 * pl_js_write_frame - send a header plus up to 4 payload pieces on fd, in
 * one sendmsg when the socket takes them.  Waits (without a deadline) for
 * room on a non-blocking socket; the peer always reads whole frames.  Uses
 * MSG_NOSIGNAL, so a dead peer yields -EPIPE rather than SIGPIPE.  Returns
 * 0 or -errno.
 *
 * Frames are read with pl_fd_read_full() (src/core/fdio.h): the pool with
 * a deadline on its non-blocking end, a worker with none on its blocking
 * end, where a read is one read(2).
 */
int pl_js_write_frame(int fd, uint16_t type, const struct iovec *parts, size_t nparts);

/*
 * pl_js_write_output - one OUTPUT frame on sock: stream (1 or 2) and the
 * first min(len, PL_JS_MAX_OUTPUT_FRAME) bytes of data; *ret_sent says
 * how many.  0 or a negative errno, as pl_js_write_frame.
 */
int pl_js_write_output(int sock, int stream, const char *data, size_t len, size_t *ret_sent);

/**
 * pl_js_check_hdr - validate magic/version/type of a received header and
 * that len does not exceed max_len.  Returns 0 or -EPROTO.
 */
int pl_js_check_hdr(const struct pl_js_frame_hdr *hdr, uint16_t want_type, uint64_t max_len);

/**
 * pl_js_status_i32 - a WASI exit status (any u32 a module gives proc_exit)
 * as the int32 the protocol and the API carry: 0 .. 2^31-1 unchanged,
 * 2^31 .. 2^32-1 as status - 2^32 (4294967295 is -1).  One-to-one, so
 * nothing is lost and no value is special.
 */
static inline int32_t pl_js_status_i32(uint32_t status) {
    return status <= (uint32_t)INT32_MAX ? (int32_t)status : -(int32_t)~status - 1;
}

#endif
