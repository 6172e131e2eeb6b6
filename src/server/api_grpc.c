/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_grpc.c: gRPC and gRPC-Web over the API's Connect answers.
 *
 * A gRPC call is the Connect binary call inside an envelope: its one
 * message is unwrapped and decided exactly as application/proto, and the
 * Connect answer is rewritten afterwards.  A success becomes the enveloped
 * message and grpc-status 0 (as HTTP/2 trailers, or for gRPC-Web as the
 * trailer frame in the body).  An error becomes a trailers-only answer:
 * HTTP 200 with grpc-status, grpc-message (percent-encoded) and
 * grpc-status-details-bin, a google.rpc.Status whose details carry the
 * same google.rpc.ErrorInfo as Connect's error body.
 */
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/buf.h"
#include "../core/canon.h"
#include "api_int.h"

static bool media_type_is(const char *ct, const char *want) {
    size_t n = strlen(want);
    if (!ct || strncasecmp(ct, want, n) != 0)
        return false;
    return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

enum api_protocol api_protocol_of(const char *ct) {
    if (media_type_is(ct, "application/json"))
        return API_CONNECT_JSON;
    if (media_type_is(ct, "application/proto"))
        return API_CONNECT_PROTO;
    if (media_type_is(ct, "application/grpc") || media_type_is(ct, "application/grpc+proto"))
        return API_GRPC;
    if (media_type_is(ct, "application/grpc-web") ||
        media_type_is(ct, "application/grpc-web+proto"))
        return API_GRPC_WEB;
    if (media_type_is(ct, "application/connect+json"))
        return API_CONNECT_STREAM_JSON;
    if (media_type_is(ct, "application/connect+proto"))
        return API_CONNECT_STREAM_PROTO;
    return API_UNKNOWN;
}

/* ---- the request's envelope ------------------------------------------- */

int api_grpc_unwrap(const char *body, size_t len, const char **ret_msg, size_t *ret_len,
                    struct pl_error *err) {
    const unsigned char *p = (const unsigned char *)body;
    if (len < 5)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "a gRPC request is one length-prefixed message; %zu bytes is none",
                            len);
    if (p[0] & 1)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "a compressed gRPC message: plimsoll takes none (it sends no "
                            "grpc-accept-encoding)");
    if (p[0] != 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "a gRPC message with flags 0x%02x: only 0 is a request's", p[0]);
    uint32_t n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    if ((size_t)n != len - 5)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "a gRPC request is exactly one message: its prefix says %u bytes, "
                            "%zu follow",
                            n, len - 5);
    *ret_msg = body + 5;
    *ret_len = n;
    return 0;
}

/* ---- the caller's deadline ------------------------------------------------ */

int api_connect_timeout(const char *v, unsigned *ret_ms) {
    uint64_t ms = 0;
    size_t n = 0;
    for (; v[n]; n++) {
        if (n == 10 || v[n] < '0' || v[n] > '9')
            return -1;
        ms = ms * 10 + (uint64_t)(v[n] - '0');
    }
    if (n == 0 || ms == 0)
        return -1;
    *ret_ms = ms > UINT_MAX ? 0 : (unsigned)ms;
    return 0;
}

int api_grpc_timeout(const char *v, unsigned *ret_ms) {
    size_t n = strlen(v);
    if (n < 2 || n > 9)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    uint64_t ms;
    switch (v[n - 1]) {
    case 'H': ms = x * 3600000u; break;
    case 'M': ms = x * 60000u; break;
    case 'S': ms = x * 1000u; break;
    case 'm': ms = x; break;
    case 'u': ms = (x + 999) / 1000; break;
    case 'n': ms = (x + 999999) / 1000000; break;
    default: return -1;
    }
    if (ms == 0)
        ms = 1; /* a deadline shorter than a millisecond is the shortest there is */
    *ret_ms = ms > UINT_MAX ? 0 : (unsigned)ms;
    return 0;
}

/* ---- the answer ---------------------------------------------------------- */

/* google.rpc.Status{code, message, details: [Any(ErrorInfo)]}, base64. */
static char *status_details(unsigned code, const char *message, const json_t *details) {
    struct pl_buf b = {0};
    int r = 0;
    if (code)
        r = pl_buf_put_varint(&b, 1 << 3 | 0) < 0 || pl_buf_put_varint(&b, code) < 0 ? -1 : 0;
    if (r == 0 && message[0])
        r = pl_buf_put_pb_bytes(&b, 2, message, strlen(message));
    size_t i;
    const json_t *d;
    json_array_foreach(details, i, d) {
        const char *type = json_string_value(json_object_get(d, "type"));
        const char *value = json_string_value(json_object_get(d, "value"));
        unsigned char *raw = NULL;
        size_t rawlen = 0;
        if (r < 0 || !type || !value ||
            pl_base64_decode(value, strlen(value), 1 << 16, &raw, &rawlen) < 0) {
            r = -1;
            break;
        }
        struct pl_buf any = {0};
        char url[128];
        snprintf(url, sizeof(url), "type.googleapis.com/%s", type);
        r = pl_buf_put_pb_bytes(&any, 1, url, strlen(url));
        if (r == 0)
            r = pl_buf_put_pb_bytes(&any, 2, raw, rawlen);
        if (r == 0)
            r = pl_buf_put_pb_bytes(&b, 3, any.data ? any.data : "", any.len);
        pl_buf_free(&any);
        free(raw);
    }
    char *out = r == 0 ? pl_base64_encode(b.data ? b.data : "", b.len, 0) : NULL;
    pl_buf_free(&b);
    return out;
}

/* grpc-message: percent-encoded outside printable ASCII (and '%'). */
static char *percent_encode(const char *s) {
    struct pl_buf b = {0};
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%')
            pl_buf_append(&b, p, 1);
        else
            pl_buf_printf(&b, "%%%02X", *p);
    }
    return b.data ? b.data : strdup("");
}

static void add_header(struct pl_api_header *h, unsigned *n, const char *name, char *value) {
    if (!value || *n >= PL_API_MAX_HEADERS) {
        free(value);
        return;
    }
    h[*n].name = name;
    h[*n].value = value;
    (*n)++;
}

static char *dup_uint(unsigned v) {
    char tmp[16];
    snprintf(tmp, sizeof(tmp), "%u", v);
    return strdup(tmp);
}

/* gRPC's code for an answer that never was a Connect error (a text 405,
 * 415 or 500 of the transport), from its HTTP status as gRPC maps them. */
static unsigned code_of_http(int status) {
    switch (status) {
    case 400: return 13; /* INTERNAL */
    case 401: return 16;
    case 403: return 7;
    case 404: return 12; /* UNIMPLEMENTED */
    case 429:
    case 502:
    case 503:
    case 504: return 14; /* UNAVAILABLE */
    default: return 2;   /* UNKNOWN */
    }
}

const char *api_grpc_ctype(enum api_protocol p, const char *ctype) {
    if (ctype && api_protocol_of(ctype) == p)
        return ctype; /* the form the caller sent, as gRPC asks */
    return p == API_GRPC_WEB ? "application/grpc-web+proto" : "application/grpc+proto";
}

void api_grpc_status_of(const struct pl_api_response *rs, unsigned *ret_code, char **ret_message,
                        char **ret_details) {
    *ret_details = NULL;
    if (rs->content_type && strcmp(rs->content_type, "application/json") == 0) {
        json_t *e = json_loadb(rs->body ? rs->body : "", rs->body_len, 0, NULL);
        enum pl_code c;
        const char *name = json_string_value(json_object_get(e, "code"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        *ret_code = name && pl_code_from_name(name, &c) == 0 ? (unsigned)c + 1 : 2;
        *ret_message = percent_encode(msg ? msg : "");
        *ret_details = status_details(*ret_code, msg ? msg : "", json_object_get(e, "details"));
        json_decref(e);
        return;
    }
    *ret_code = code_of_http(rs->status);
    char text[256];
    snprintf(text, sizeof(text), "%.*s", (int)(rs->body_len < 255 ? rs->body_len : 255),
             rs->body ? rs->body : "");
    text[strcspn(text, "\n")] = '\0';
    *ret_message = percent_encode(text);
}

void api_grpc_wrap(enum api_protocol p, const char *ctype, struct pl_api_response *rs) {
    struct pl_api_response out = {.status = 200, .content_type = api_grpc_ctype(p, ctype)};
    unsigned code = 0;
    char *message = NULL, *details = NULL;
    if (rs->status == 200 && rs->content_type &&
        strcmp(rs->content_type, "application/proto") == 0) {
        struct pl_buf b = {0};
        unsigned char pre[5] = {0, (unsigned char)(rs->body_len >> 24),
                                (unsigned char)(rs->body_len >> 16),
                                (unsigned char)(rs->body_len >> 8), (unsigned char)rs->body_len};
        int r = pl_buf_append(&b, pre, 5);
        if (r == 0 && rs->body_len)
            r = pl_buf_append(&b, rs->body, rs->body_len);
        if (r == 0 && p == API_GRPC_WEB) {
            static const char trailer[] = "grpc-status:0\r\n";
            unsigned char tp[5] = {0x80, 0, 0, 0, sizeof(trailer) - 1};
            r = pl_buf_append(&b, tp, 5);
            if (r == 0)
                r = pl_buf_append(&b, trailer, sizeof(trailer) - 1);
        }
        if (r == 0) {
            out.body = b.data;
            out.body_len = b.len;
            if (p == API_GRPC)
                add_header(out.trailers, &out.ntrailers, "grpc-status", strdup("0"));
            pl_api_response_clear(rs);
            *rs = out;
            return;
        }
        pl_buf_free(&b);
        code = 13;
        message = strdup("out of memory");
    } else {
        api_grpc_status_of(rs, &code, &message, &details);
    }
    /* Trailers-only: the status in the answer's one block of headers. */
    add_header(out.headers, &out.nheaders, "grpc-status", dup_uint(code));
    add_header(out.headers, &out.nheaders, "grpc-message", message);
    add_header(out.headers, &out.nheaders, "grpc-status-details-bin", details);
    out.body = strdup("");
    pl_api_response_clear(rs);
    *rs = out;
}
