/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc.h: one gRPC call over HTTP/2 (docs/internals/hosted.md, "gRPC"), on
 * libcurl: h2c by prior knowledge for http://, ALPN over TLS for https://
 * (TLS 1.2 or later, optional client certificate).  Unary and server-
 * streaming calls; the caller packs and unpacks the messages (protobuf-c).
 *
 * The status comes from the trailers (or a Trailers-Only answer's headers);
 * an answer that is not HTTP/2, not application/grpc, compressed, or whose
 * message is larger than the caller allows breaks the call.  Nothing here
 * logs: the bearer token travels in a header.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/buf.h"
#include "../../core/errors.h"

/* gRPC's status codes. */
enum ph_grpc_code {
    PH_GRPC_OK = 0,
    PH_GRPC_CANCELLED = 1,
    PH_GRPC_UNKNOWN = 2,
    PH_GRPC_INVALID_ARGUMENT = 3,
    PH_GRPC_DEADLINE_EXCEEDED = 4,
    PH_GRPC_NOT_FOUND = 5,
    PH_GRPC_ALREADY_EXISTS = 6,
    PH_GRPC_PERMISSION_DENIED = 7,
    PH_GRPC_RESOURCE_EXHAUSTED = 8,
    PH_GRPC_FAILED_PRECONDITION = 9,
    PH_GRPC_ABORTED = 10,
    PH_GRPC_OUT_OF_RANGE = 11,
    PH_GRPC_UNIMPLEMENTED = 12,
    PH_GRPC_INTERNAL = 13,
    PH_GRPC_UNAVAILABLE = 14,
    PH_GRPC_DATA_LOSS = 15,
    PH_GRPC_UNAUTHENTICATED = 16,
};

/* Where the service is and how to prove who calls it; the strings are the
 * caller's and must outlive every call made with it. */
struct ph_grpc_target {
    const char *url;       /* "http://host:port" (h2c) or "https://host:port" */
    const char *bearer;    /* "Authorization: Bearer"; NULL or "": none */
    const char *ca_file;   /* TLS: the CA bundle; NULL: the system's */
    const char *cert_file; /* mTLS: the client certificate (PEM); NULL: none */
    const char *key_file;  /* and its key */
};

/* One call: the caller sets what is above "filled" (msg is borrowed for
 * the call; 0 max_message is 4 MiB), ph_grpc and ph_grpc_duplex fill the
 * rest. */
struct ph_grpc_call {
    const char *method; /* "/package.Service/Method" */
    const void *msg;    /* the request message, serialised */
    size_t len;
    uint64_t timeout_ms; /* the whole call; also sent as grpc-timeout */
    size_t max_message;  /* a larger answer message breaks the call */
    /* Each answer message.  Return < 0 to break the call (its err is
     * the call's), > 0 to stop reading: the call ends there, stopped. */
    int (*on_message)(void *ud, const unsigned char *msg, size_t len, struct pl_error *err);
    void *ud;
    /* filled */
    int status;        /* grpc-status; -1 when the answer carried none */
    char message[256]; /* grpc-message, percent-decoded, control bytes dropped */
    bool stopped;      /* on_message stopped it */
};

/*
 * Make one call.  0 when the call ended with a status (any code; read
 * c->status) or was stopped; < 0 with err when the service could not be
 * reached, the deadline passed (err->errnum ETIMEDOUT), or the answer
 * broke the rules above; an on_message refusal is its err.  An HTTP status
 * other than 200 is 0 with its gRPC status.  Blocks; any thread.
 */
int ph_grpc(const struct ph_grpc_target *t, struct ph_grpc_call *c, struct pl_error *err);

/*
 * A bidirectional call (ExecSandboxInteractive), in the calling thread.
 * call.msg is the first message; answer messages reach call.on_message
 * (inside libcurl: it only takes them in).  Between transfers, and at
 * least every turn_ms, on_turn runs outside libcurl: there it may queue
 * messages (ph_grpc_duplex_send), half-close the stream
 * (ph_grpc_duplex_close), or return < 0 to cancel the call (it ends
 * stopped, without a status).  ph_grpc_duplex_wake, from any thread,
 * brings the next turn at once.  The result is ph_grpc's.
 */
struct ph_grpc_duplex {
    struct ph_grpc_call call;
    int (*on_turn)(void *ud, struct ph_grpc_duplex *d); /* ud: call.ud */
    unsigned turn_ms;                                   /* 0: 100 */
    /* the call's own */
    int wake_fd;       /* an eventfd: ph_grpc_duplex_wake */
    struct pl_buf out; /* envelopes not yet sent */
    size_t out_off;
    bool half_closed;
};
/* Set d up (its wake eventfd; wake_fd -1 when none could be made, and
 * then turns come every turn_ms only); ph_grpc_duplex_free releases it,
 * after the call returned. */
void ph_grpc_duplex_init(struct ph_grpc_duplex *d);
void ph_grpc_duplex_free(struct ph_grpc_duplex *d);
/* Run the call to its end in the calling thread (it blocks until then). */
int ph_grpc_duplex(const struct ph_grpc_target *t, struct ph_grpc_duplex *d, struct pl_error *err);
/* From on_turn: one more message, copied (< 0: out of memory, or
 * half-closed). */
int ph_grpc_duplex_send(struct ph_grpc_duplex *d, const void *msg, size_t len);
/* From on_turn: no more messages; the queued ones still go, then END_STREAM. */
void ph_grpc_duplex_close(struct ph_grpc_duplex *d);
/* Bytes queued and not yet handed to libcurl. */
size_t ph_grpc_duplex_pending(const struct ph_grpc_duplex *d);
void ph_grpc_duplex_wake(struct ph_grpc_duplex *d);

/* "NOT_FOUND" for 5, "code 42" beyond the table (a thread's own buffer,
 * valid until its next call: the caller copies it at once). */
const char *ph_grpc_code_name(int code);

/* One response header or trailer line into c (exported for its fuzz
 * harness): grpc-status, grpc-message, and the HTTP status line. */
void ph_grpc_header_line(struct ph_grpc_call *c, const char *line, size_t len, long *http_status,
                         bool *ret_grpc_type);
