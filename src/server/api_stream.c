/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_stream.c: RunStream and RunCellStream, output as it comes.
 *
 * A streaming call climbs the same ladder as Run.  At dispatch its head
 * goes out (the transport's begin), and the run's captures give every byte
 * they keep to this file's sink (capture.h).  The bytes wait here, merged
 * into one pending chunk per step until the transport takes them
 * (pl_api_stream_take), so what waits is never more than what the result
 * keeps: a guest writing one byte at a time to a caller who reads slowly
 * costs the kept bytes, not a message each.  A chunk holds at most
 * PL_STREAM_CHUNK_BYTES of both streams together.
 *
 * The messages are RunStreamResponse: OutputChunk{stdout, stderr, step}
 * while the guest runs, then RunResponse (the answer Run would give, with
 * its record), each in the protocol's envelope (a flags byte and a
 * big-endian length).  The end is Connect's end-of-stream message (flags
 * 0x02, JSON: {} or {"error": <the Connect error body>}), gRPC's trailers,
 * or gRPC-Web's trailer frame (0x80).  A refusal before dispatch has no
 * message: Connect's end message alone (HTTP 200), or gRPC's
 * trailers-only answer.
 *
 * The stream is the API's and the transport's: each holds a reference
 * until it is done (the API at the end of the call, the transport when
 * everything is sent or the caller left).  A caller who left loses the
 * output from then on; the run goes on to its end, as a unary one does.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/buf.h"
#include "../core/canon.h"
#include "../core/log.h"
#include "api_int.h"
#include "codec.h"
#include "sandbox.pb-c.h"

/* The most output one OutputChunk carries (both streams together). */
#define PL_STREAM_CHUNK_BYTES 65536u

struct pending {
    struct pending *next;
    unsigned step;
    struct pl_buf out, err;
    json_t *display; /* a cell's display output: then out and err are empty */
};

struct pl_api_stream {
    struct pl_api *api;
    pthread_mutex_t lock; /* everything below */
    unsigned refs;
    enum api_protocol protocol;
    const char *ctype;       /* the head's */
    const char *cors_origin; /* the head's CORS (api_cors_answer), or NULL */
    struct pl_api_stream_out out;
    struct pl_output_sink sink;
    struct pending *head, *tail; /* output not yet taken, in order */
    bool begun;                  /* the head went out */
    bool gone;                   /* the transport let go: output is dropped */
    bool lost;                   /* a chunk could not be kept (out of memory) */
};

bool api_method_streams(const char *method) {
    return strcmp(method, "RunStream") == 0 || strcmp(method, "RunCellStream") == 0;
}

static bool json_coded(enum api_protocol p) {
    return p == API_CONNECT_STREAM_JSON;
}

static void pending_free(struct pending *p) {
    while (p) {
        struct pending *next = p->next;
        pl_buf_free(&p->out);
        pl_buf_free(&p->err);
        json_decref(p->display);
        free(p);
        p = next;
    }
}

static void release(struct pl_api_stream *s) {
    pthread_mutex_lock(&s->lock);
    bool last = --s->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (!last)
        return;
    pending_free(s->head);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

void pl_api_stream_release(struct pl_api_stream *s) {
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->gone = true;
    pending_free(s->head);
    s->head = s->tail = NULL;
    pthread_mutex_unlock(&s->lock);
    release(s);
}

/* ---- the run's output ------------------------------------------------------ */

/* Keep len bytes of stream fd of step; s->lock held.  Returns whether the
 * pending list was empty before (the transport is told then only). */
static bool keep(struct pl_api_stream *s, unsigned step, int fd, const char *data, size_t len) {
    bool was_empty = s->head == NULL;
    while (len > 0) {
        struct pending *t = s->tail;
        size_t room = t && t->step == step && !t->display
                          ? PL_STREAM_CHUNK_BYTES - t->out.len - t->err.len
                          : 0;
        if (room == 0) {
            t = calloc(1, sizeof(*t));
            if (!t) {
                s->lost = true;
                return was_empty;
            }
            t->step = step;
            if (s->tail)
                s->tail->next = t;
            else
                s->head = t;
            s->tail = t;
            room = PL_STREAM_CHUNK_BYTES;
        }
        size_t n = len < room ? len : room;
        if (pl_buf_append(fd == 2 ? &t->err : &t->out, data, n) < 0) {
            s->lost = true;
            return was_empty;
        }
        data += n;
        len -= n;
    }
    return was_empty;
}

static void sink_write(void *ud, unsigned step, int fd, const char *data, size_t len) {
    struct pl_api_stream *s = ud;
    pthread_mutex_lock(&s->lock);
    bool tell = false;
    if (!s->gone && len > 0)
        tell = keep(s, step, fd, data, len) && s->begun;
    pthread_mutex_unlock(&s->lock);
    /* Told outside the lock: the transport's notify takes its own. The
     * API's reference keeps s and the transport's hooks alive here. */
    if (tell)
        s->out.notify(s->out.ud);
}

/* A cell's display output: a chunk of its own, after the output before
 * it.  What waits is bounded as the result's outputs are (display.h). */
static void sink_display(void *ud, json_t *output) {
    struct pl_api_stream *s = ud;
    pthread_mutex_lock(&s->lock);
    bool tell = false;
    struct pending *t = s->gone ? NULL : calloc(1, sizeof(*t));
    if (t) {
        t->display = json_incref(output);
        tell = s->head == NULL && s->begun;
        if (s->tail)
            s->tail->next = t;
        else
            s->head = t;
        s->tail = t;
    } else if (!s->gone) {
        s->lost = true;
    }
    pthread_mutex_unlock(&s->lock);
    if (tell)
        s->out.notify(s->out.ud);
}

/* ---- messages ---------------------------------------------------------------- */

int api_envelope(struct pl_buf *b, unsigned char flags, const void *msg, size_t len) {
    unsigned char pre[5] = {flags, (unsigned char)(len >> 24), (unsigned char)(len >> 16),
                            (unsigned char)(len >> 8), (unsigned char)len};
    if (pl_buf_append(b, pre, 5) < 0)
        return -ENOMEM;
    return len ? pl_buf_append(b, msg, len) : 0;
}

int api_grpcweb_trailers(struct pl_buf *b, unsigned code, const char *message,
                         const char *details) {
    struct pl_buf t = {0};
    int r = pl_buf_printf(&t, "grpc-status:%u\r\n", code);
    if (r == 0 && message && message[0])
        r = pl_buf_printf(&t, "grpc-message:%s\r\n", message);
    if (r == 0 && details)
        r = pl_buf_printf(&t, "grpc-status-details-bin:%s\r\n", details);
    if (r == 0)
        r = api_envelope(b, 0x80, t.data ? t.data : "", t.len);
    pl_buf_free(&t);
    return r < 0 ? -ENOMEM : 0;
}

/* One OutputChunk as RunStreamResponse{output}, enveloped. */
static int encode_chunk(enum api_protocol p, const struct pending *c, struct pl_buf *b) {
    struct pl_buf m = {0};
    int r = 0;
    if (c->display && json_coded(p)) {
        char *j = json_dumps(c->display, JSON_COMPACT);
        static const char head[] = "{\"output\":{\"display\":";
        r = j && pl_buf_append(&m, head, sizeof(head) - 1) == 0 &&
                    pl_buf_append(&m, j, strlen(j)) == 0 && pl_buf_append(&m, "}}", 2) == 0
                ? 0
                : -1;
        free(j);
    } else if (c->display) {
        struct pl_error err = {0};
        struct pl_buf in = {0};
        json_t *chunk = json_pack("{s:O}", "display", c->display);
        r = chunk && pl_codec_encode(&plimsoll__v1__output_chunk__descriptor, chunk, &in, &err) == 0
                ? pl_buf_put_pb_bytes(&m, 1, in.data ? in.data : "", in.len)
                : -1;
        json_decref(chunk);
        pl_buf_free(&in);
    } else if (json_coded(p)) {
        /* {"output":{"stdout":"<base64>","stderr":"<base64>","step":N}},
         * proto3 JSON: empty fields and a step of 0 left out. */
        static const char *const names[] = {"stdout", "stderr"};
        const struct pl_buf *parts[] = {&c->out, &c->err};
        const char *sep = "";
        r = pl_buf_printf(&m, "{\"output\":{");
        for (int i = 0; i < 2 && r == 0; i++) {
            if (!parts[i]->len)
                continue;
            char *b64 = pl_base64_encode(parts[i]->data, parts[i]->len, 1);
            r = b64 ? pl_buf_printf(&m, "%s\"%s\":\"%s\"", sep, names[i], b64) : -1;
            free(b64);
            sep = ",";
        }
        if (r == 0 && c->step)
            r = pl_buf_printf(&m, "%s\"step\":%u", sep, c->step);
        if (r == 0)
            r = pl_buf_append(&m, "}}", 2);
    } else {
        struct pl_buf in = {0};
        if (c->out.len)
            r = pl_buf_put_pb_bytes(&in, 1, c->out.data, c->out.len);
        if (r == 0 && c->err.len)
            r = pl_buf_put_pb_bytes(&in, 2, c->err.data, c->err.len);
        if (r == 0 && c->step)
            r = pl_buf_put_varint(&in, 3 << 3 | 0) < 0 || pl_buf_put_varint(&in, c->step) < 0
                    ? -ENOMEM
                    : 0;
        if (r == 0)
            r = pl_buf_put_pb_bytes(&m, 1, in.data ? in.data : "", in.len);
        pl_buf_free(&in);
    }
    if (r == 0)
        r = api_envelope(b, 0, m.data ? m.data : "", m.len);
    pl_buf_free(&m);
    return r < 0 ? -ENOMEM : 0;
}

/* Encode a list of chunks into b; the list is freed. */
static int encode_list(enum api_protocol p, struct pending *list, struct pl_buf *b) {
    int r = 0;
    for (struct pending *c = list; c && r == 0; c = c->next)
        r = encode_chunk(p, c, b);
    pending_free(list);
    return r;
}

int pl_api_stream_take(struct pl_api_stream *s, struct pl_buf *out) {
    pthread_mutex_lock(&s->lock);
    struct pending *list = s->head;
    s->head = s->tail = NULL;
    pthread_mutex_unlock(&s->lock);
    return encode_list(s->protocol, list, out);
}

/* ---- the call ------------------------------------------------------------------ */

struct pl_api_stream *api_stream_new(struct pl_api *api, enum api_protocol p, const char *ctype,
                                     const struct pl_api_stream_out *out, const char *cors_origin) {
    struct pl_api_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->api = api;
    pthread_mutex_init(&s->lock, NULL);
    s->refs = 1;
    s->protocol = p;
    s->ctype = p == API_CONNECT_STREAM_JSON    ? "application/connect+json"
               : p == API_CONNECT_STREAM_PROTO ? "application/connect+proto"
                                               : api_grpc_ctype(p, ctype);
    if (out)
        s->out = *out;
    s->cors_origin = cors_origin;
    s->sink = (struct pl_output_sink){.write = sink_write, .ud = s, .display = sink_display};
    return s;
}

const struct pl_output_sink *api_stream_begin(struct pl_api_stream *s) {
    if (!s || !s->out.begin)
        return NULL;
    struct pl_api_response head = {.status = 200, .content_type = s->ctype};
    api_cors_answer(s->cors_origin, &head);
    pthread_mutex_lock(&s->lock);
    s->refs++; /* the transport's, once it takes the head */
    pthread_mutex_unlock(&s->lock);
    if (s->out.begin(s->out.ud, s, &head) < 0) {
        release(s);
        return NULL;
    }
    pthread_mutex_lock(&s->lock);
    s->begun = true;
    pthread_mutex_unlock(&s->lock);
    return &s->sink;
}

/* The result message: RunStreamResponse{result: RunResponse}. */
static int encode_result(enum api_protocol p, const struct pl_api_response *rs, struct pl_buf *b) {
    struct pl_buf m = {0};
    int r;
    if (json_coded(p)) {
        r = pl_buf_append(&m, "{\"result\":", 10);
        if (r == 0)
            r = pl_buf_append(&m, rs->body, rs->body_len);
        if (r == 0)
            r = pl_buf_append(&m, "}", 1);
    } else {
        const ProtobufCMessageDescriptor *in, *out;
        struct pl_error err = {0};
        struct pl_buf res = {0};
        json_t *answer = json_loadb(rs->body, rs->body_len, JSON_ALLOW_NUL, NULL);
        r = answer && pl_codec_method("Run", &in, &out) == 0 &&
                    pl_codec_encode(out, answer, &res, &err) == 0
                ? 0
                : -1;
        json_decref(answer);
        if (r == 0)
            r = pl_buf_put_pb_bytes(&m, 2, res.data ? res.data : "", res.len);
        if (r < 0 && err.reason != PL_REASON_NONE)
            pl_log("error", "answer outside the contract",
                   json_pack("{s:s, s:s}", "method", "RunStream", "error", err.message));
        pl_buf_free(&res);
    }
    if (r == 0)
        r = api_envelope(b, 0, m.data ? m.data : "", m.len);
    pl_buf_free(&m);
    return r < 0 ? -1 : 0;
}

static void set_trailer(struct pl_api_response *rs, const char *name, char *value) {
    if (!value || rs->ntrailers >= PL_API_MAX_HEADERS) {
        free(value);
        return;
    }
    rs->trailers[rs->ntrailers].name = name;
    rs->trailers[rs->ntrailers].value = value;
    rs->ntrailers++;
}

/*
 * The end of the stream after its messages: Connect's end message,
 * gRPC's trailers or gRPC-Web's trailer frame, for the status of the
 * Connect answer rs (a success when ok).
 */
static int encode_end(enum api_protocol p, const struct pl_api_response *rs, bool ok,
                      struct pl_buf *b, struct pl_api_response *out) {
    if (p == API_CONNECT_STREAM_JSON || p == API_CONNECT_STREAM_PROTO) {
        struct pl_buf m = {0};
        int r = 0;
        if (ok) {
            r = pl_buf_append(&m, "{}", 2);
        } else if (rs->content_type && strcmp(rs->content_type, "application/json") == 0) {
            r = pl_buf_append(&m, "{\"error\":", 9);
            if (r == 0)
                r = pl_buf_append(&m, rs->body, rs->body_len);
            if (r == 0)
                r = pl_buf_append(&m, "}", 1);
        } else {
            /* A text answer of the transport: its code by HTTP's status. */
            unsigned code;
            char *message, *details;
            api_grpc_status_of(rs, &code, &message, &details);
            enum pl_code c = code ? (enum pl_code)(code - 1) : PL_CODE_UNKNOWN;
            json_t *e = json_pack("{s:{s:s, s:s}}", "error", "code", pl_code_name(c), "message",
                                  rs->body ? rs->body : "");
            char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
            r = text ? pl_buf_append(&m, text, strlen(text)) : -1;
            free(text);
            json_decref(e);
            free(message);
            free(details);
        }
        if (r == 0)
            r = api_envelope(b, 0x02, m.data ? m.data : "", m.len);
        pl_buf_free(&m);
        return r < 0 ? -1 : 0;
    }
    unsigned code = 0;
    char *message = NULL, *details = NULL;
    if (!ok)
        api_grpc_status_of(rs, &code, &message, &details);
    if (p == API_GRPC) {
        char num[16];
        snprintf(num, sizeof(num), "%u", code);
        set_trailer(out, "grpc-status", strdup(num));
        set_trailer(out, "grpc-message", message);
        set_trailer(out, "grpc-status-details-bin", details);
        return 0;
    }
    /* gRPC-Web: the trailers as a frame of their own, flags 0x80. */
    int r = api_grpcweb_trailers(b, code, message, details);
    free(message);
    free(details);
    return r < 0 ? -1 : 0;
}

void api_stream_end(struct pl_api_stream *s, struct pl_api_response *rs) {
    pthread_mutex_lock(&s->lock);
    bool begun = s->begun, lost = s->lost;
    struct pending *list = s->head;
    s->head = s->tail = NULL;
    enum api_protocol p = s->protocol;
    const char *ctype = s->ctype;
    pthread_mutex_unlock(&s->lock);
    bool ok =
        rs->status == 200 && rs->content_type && strcmp(rs->content_type, "application/json") == 0;
    if (!begun && !ok && (p == API_GRPC || p == API_GRPC_WEB)) {
        /* A refusal before any message: gRPC's trailers-only answer. */
        pending_free(list);
        api_grpc_wrap(p, ctype, rs);
        release(s);
        return;
    }
    struct pl_api_response out = {.status = 200, .content_type = ctype, .streamed = begun};
    struct pl_buf b = {0};
    int r = encode_list(p, list, &b);
    if (r == 0 && ok)
        r = encode_result(p, rs, &b);
    if (r == 0 && ok && lost) {
        /* The result is whole; the chunks before it were not. */
        struct pl_error err = {0};
        pl_error_set(&err, PL_REASON_INTERNAL,
                     "output chunks were lost (out of memory); the result message holds the "
                     "whole output");
        pl_api_response_clear(rs);
        int status = 0;
        json_t *e = api_error_body(s->api, &err, NULL, &status);
        rs->status = status;
        rs->content_type = "application/json";
        rs->body = e ? json_dumps(e, JSON_COMPACT) : NULL;
        rs->body_len = rs->body ? strlen(rs->body) : 0;
        json_decref(e);
        ok = false;
    }
    if (r == 0)
        r = encode_end(p, rs, ok, &b, &out);
    pl_api_response_clear(rs);
    if (r < 0) {
        /* Out of memory at the very end: the stream ends without its end,
         * which every client reads as a broken stream. */
        pl_buf_free(&b);
        for (unsigned i = 0; i < out.ntrailers; i++)
            free(out.trailers[i].value);
        out.ntrailers = 0;
    }
    out.body = b.data ? b.data : strdup("");
    out.body_len = b.len;
    *rs = out;
    release(s);
}
