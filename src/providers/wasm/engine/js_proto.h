/*
 * Wire protocol between the pool (js_engine.c, in the daemon) and a worker
 * process (js_worker.c), over a private AF_UNIX SOCK_STREAM socketpair.
 *
 * Every message is a 16-byte frame header followed by `len` payload bytes.
 * Both ends are the same build on the same host, so integers are in native
 * byte order; the header carries a magic and a version so a mismatched
 * worker binary is detected at the handshake.
 *
 *   worker -> pool  HELLO   payload: struct pl_js_hello (sent once, when ready)
 *   pool -> worker  RUN     payload: struct pl_js_run_req, code, stdin
 *   worker -> pool  RESULT  payload: struct pl_js_run_resp, stdout, stderr
 *
 * Reserved for the HTTP broker (not implemented): while a RUN is in
 * progress the worker may send BROKER_REQ frames and block until the pool
 * answers with BROKER_REPLY; the pool's result reader must then loop until
 * it sees RESULT.  Nothing else may be interleaved.
 */
#ifndef PLIMSOLL_JS_PROTO_H
#define PLIMSOLL_JS_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define PL_JS_PROTO_MAGIC 0x534a4c50u /* "PLJS" little-endian */
#define PL_JS_PROTO_VERSION 1

/* Hard ceilings enforced by both ends (the API caller may ask for less). */
#define PL_JS_MAX_CODE (16u << 20)                 /* script bytes */
#define PL_JS_MAX_STDIN (64u << 20)                /* stdin bytes */
#define PL_JS_MAX_STREAM (64u << 20)               /* stdout_cap / stderr_cap */
#define PL_JS_MAX_MEMORY ((uint64_t)65535 * 65536) /* just under 4 GiB */

enum pl_js_msg_type {
    PL_JS_MSG_HELLO = 1,
    PL_JS_MSG_RUN = 2,
    PL_JS_MSG_RESULT = 3,
    PL_JS_MSG_BROKER_REQ = 16,   /* reserved */
    PL_JS_MSG_BROKER_REPLY = 17, /* reserved */
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
    uint32_t flags; /* 0 */
};

/* pl_js_run_resp.flags */
#define PL_JS_RESP_TIMED_OUT (1u << 0)
#define PL_JS_RESP_OOM (1u << 1)
#define PL_JS_RESP_OUT_TRUNC (1u << 2)
#define PL_JS_RESP_ERR_TRUNC (1u << 3)
#define PL_JS_RESP_TRAPPED (1u << 4)

struct pl_js_run_resp {
    int32_t exit_code;
    uint32_t flags;
    uint64_t guest_ns; /* instantiate -> end, measured in the worker */
    uint32_t out_len;
    uint32_t err_len;
};

/**
 * pl_js_write_frame - send a header plus up to 4 payload pieces on fd.
 * Blocks (the peer always reads whole frames).  Uses MSG_NOSIGNAL, so a
 * dead peer yields -EPIPE rather than SIGPIPE.  Returns 0 or -errno.
 */
int pl_js_write_frame(int fd, uint16_t type, const struct iovec *parts, size_t nparts);

/**
 * pl_js_read_full - read exactly len bytes from fd.  If deadline_ns is not
 * 0 (CLOCK_MONOTONIC), gives up with -ETIMEDOUT when it passes.  Returns 0,
 * -EPIPE on EOF, or -errno.
 */
int pl_js_read_full(int fd, void *buf, size_t len, uint64_t deadline_ns);

/**
 * pl_js_check_hdr - validate magic/version/type of a received header and
 * that len does not exceed max_len.  Returns 0 or -EPROTO.
 */
int pl_js_check_hdr(const struct pl_js_frame_hdr *hdr, uint16_t want_type, uint64_t max_len);

/** pl_js_now_ns - CLOCK_MONOTONIC in nanoseconds. */
uint64_t pl_js_now_ns(void);

#endif
