/* SPDX-License-Identifier: Apache-2.0 */
/*
 * broker_http.h: the strict HTTP/1.1 request parser and response writer of
 * the broker's guest-facing socket.
 *
 * The bytes come from code running in a sandbox, so the parser accepts a
 * deliberately small subset of RFC 9112: CRLF line ends only, origin-form
 * targets only, no obs-fold, no Transfer-Encoding, Content-Length framing
 * only, and every size bounded by struct pl_http_limits.  It is libc-only
 * (no allocation until a request is complete and valid) so the fuzz harness
 * links it directly.  See broker_sock.h for the server that uses it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Defaults used for a limits field left at 0. */
#define PL_HTTP_DEFAULT_MAX_HEAD_BYTES (16u * 1024)
#define PL_HTTP_DEFAULT_MAX_HEADERS 64u
#define PL_HTTP_DEFAULT_MAX_BODY_BYTES (1024u * 1024)
/* Ceilings: the parser clamps to them, pl_broker_sock_start refuses above them. */
#define PL_HTTP_CAP_MAX_HEAD_BYTES (1024u * 1024)
#define PL_HTTP_CAP_MAX_HEADERS 1024u
#define PL_HTTP_CAP_MAX_BODY_BYTES (256u * 1024 * 1024)

struct pl_http_limits {
    size_t max_head_bytes; /* request line + headers + blank line, default 16 KiB */
    size_t max_headers;    /* default 64 */
    size_t max_body_bytes; /* default 1 MiB; set per profile by the caller */
};

struct pl_http_header {
    char *name;  /* lower-cased RFC 9110 token */
    char *value; /* surrounding SP/HTAB trimmed; printable ASCII, SP and HTAB only */
};

struct pl_http_request {
    char method[16];   /* as sent; A-Z only, 1..15 chars */
    char *target;      /* origin-form, as sent (not decoded, not normalised); 0x21-0x7e only */
    int version_minor; /* 0 or 1 */
    struct pl_http_header *headers;
    size_t nheaders;
    char *body; /* NUL-terminated for convenience; never NULL after a successful parse */
    size_t body_len;
    char *arena; /* internal: backing store of target and headers */
};

/* What pl_http_parse_request_ex reports beside the return value. */
struct pl_http_parse_info {
    bool head_complete;   /* the blank line was seen (on 0: only the body is missing) */
    bool expect_continue; /* "Expect: 100-continue" was sent */
    size_t request_len;   /* when head_complete: bytes of head + body the request needs */
    const char *error;    /* on < 0: a static, human-readable reason */
};

/*
 * Parse one request from buf[0..len).  Returns 1 when complete
 * (*ret_consumed = bytes used, *ret_req filled and owning its memory), 0 when
 * more bytes are needed, or a negative HTTP status: -400 malformed, -413
 * Content-Length over max_body_bytes (decided before the body is read), -431
 * head over max_head_bytes or more than max_headers headers, -411 POST, PUT
 * or PATCH without Content-Length, -501 any Transfer-Encoding, -505 a version
 * other than HTTP/1.0 and 1.1, -500 out of memory.  Lines are checked in
 * order as they arrive, so a prefix of the input never yields a different
 * answer than the whole input, only 0.  lim may be NULL (all defaults); a 0
 * field means its default and values over the PL_HTTP_CAP_* ceilings are
 * clamped.  Header count and sizes are checked before any allocation.
 */
int pl_http_parse_request(const char *buf, size_t len, const struct pl_http_limits *lim,
                          struct pl_http_request *ret_req, size_t *ret_consumed);

/* pl_http_parse_request, also filling *ret_info (may be NULL) on every return. */
int pl_http_parse_request_ex(const char *buf, size_t len, const struct pl_http_limits *lim,
                             struct pl_http_request *ret_req, size_t *ret_consumed,
                             struct pl_http_parse_info *ret_info);

/* The limits in effect for lim (NULL, 0 fields -> defaults; clamped to the ceilings). */
void pl_http_limits_effective(const struct pl_http_limits *lim, struct pl_http_limits *ret);

/* Free what a successful parse allocated and zero *req.  NULL-safe; idempotent. */
void pl_http_request_clear(struct pl_http_request *req);

/*
 * The value of the first header named lower_name (compared exactly, so pass
 * it lower-case), or NULL.  Repeated headers other than Content-Length are
 * kept in order in req->headers; this returns only the first.
 */
const char *pl_http_header_get(const struct pl_http_request *req, const char *lower_name);

struct pl_http_response {
    int status;                     /* 200..599 */
    struct pl_http_header *headers; /* extra headers, caller-owned */
    size_t nheaders;
    const char *body; /* may be NULL when body_len is 0 */
    size_t body_len;
};

/*
 * Serialize resp: "HTTP/1.1 <status> <reason>\r\n", the extra headers, then
 * "Content-Length: n" (left out for 204), "Connection: close", a blank line
 * and the body.  An extra header is skipped when its name is NULL, empty or
 * not a token, when its value is NULL or holds CR, LF or another control
 * character other than HTAB, and when it is Content-Length, Connection or
 * Transfer-Encoding (the writer owns framing).  Returns 0 with *ret_out
 * malloc'd (NUL-terminated, *ret_len bytes before the NUL), -EINVAL for a
 * status outside 200..599 or a body on a 204, -ENOMEM.
 */
int pl_http_format_response(const struct pl_http_response *resp, char **ret_out, size_t *ret_len);

/*
 * An error answer with the broker's JSON body
 * {"error": pl_http_error_name(status), "message": message (NULL: the
 * reason phrase)}: pl_http_format_response's result.
 */
int pl_http_format_error(int status, const char *message, char **ret_out, size_t *ret_len);

/* The reason phrase of status ("OK", "Not Found"); "Unknown" for codes not in the table. */
const char *pl_http_reason(int status);

/*
 * The error word the broker's JSON error bodies use for status
 * ("bad_request", "payload_too_large", ...); "error" when unknown.
 */
const char *pl_http_error_name(int status);
