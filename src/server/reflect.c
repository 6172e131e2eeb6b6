/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reflect.c: gRPC's health and server-reflection messages on the wire,
 * by hand (a dozen fields), and reflection's answers from the generated
 * descriptor tables.  See reflect.h.
 *
 * The reader takes any field in any order, skips unknown ones as
 * protobuf does, keeps the last of a repeated scalar, and refuses what no
 * encoder writes: a field number 0, a group, a length past the message's
 * end, a varint longer than ten bytes, a string that is not UTF-8.
 */
#include "reflect.h"

#include <stdbool.h>
#include <string.h>

#include "../core/canon.h"

/* ---- the reader ------------------------------------------------------------ */

struct pb_field {
    unsigned number;
    unsigned wire;       /* 0 varint, 1 fixed64, 2 bytes, 5 fixed32 */
    uint64_t varint;     /* wire 0 */
    const uint8_t *data; /* wire 2 */
    size_t len;
};

static int pb_varint(const uint8_t *p, size_t len, size_t *off, uint64_t *ret) {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (*off >= len)
            return -1;
        uint8_t b = p[(*off)++];
        if (shift == 63 && b > 1)
            return -1; /* past 64 bits */
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *ret = v;
            return 0;
        }
    }
    return -1;
}

/* The next field at *off: 1, or 0 at the end, or -1 for bytes that are no
 * message. */
static int pb_next(const uint8_t *p, size_t len, size_t *off, struct pb_field *f) {
    if (*off >= len)
        return 0;
    uint64_t key;
    if (pb_varint(p, len, off, &key) < 0 || key >> 3 == 0 || key >> 3 > 536870911u)
        return -1;
    *f = (struct pb_field){.number = (unsigned)(key >> 3), .wire = (unsigned)(key & 7)};
    switch (f->wire) {
    case 0: return pb_varint(p, len, off, &f->varint) < 0 ? -1 : 1;
    case 1:
    case 5: {
        size_t n = f->wire == 1 ? 8 : 4;
        if (len - *off < n)
            return -1;
        *off += n;
        return 1;
    }
    case 2: {
        uint64_t n;
        if (pb_varint(p, len, off, &n) < 0 || n > len - *off)
            return -1;
        f->data = p + *off;
        f->len = (size_t)n;
        *off += (size_t)n;
        return 1;
    }
    default: return -1; /* groups (3, 4) and the unused 6, 7 */
    }
}

static int malformed(struct pl_error *err, const char *what) {
    return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s is not a well-formed protobuf message",
                        what);
}

/* ---- health ---------------------------------------------------------------- */

int pl_health_request_decode(const uint8_t *msg, size_t len, char *ret, size_t cap,
                             struct pl_error *err) {
    size_t off = 0;
    struct pb_field f;
    int r;
    ret[0] = '\0';
    while ((r = pb_next(msg, len, &off, &f)) > 0) {
        if (f.number != 1)
            continue;
        if (f.wire != 2)
            return malformed(err, "the HealthCheckRequest");
        if (!pl_utf8_valid(f.data, f.len))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "HealthCheckRequest.service is not UTF-8");
        if (f.len >= cap)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "HealthCheckRequest.service: %zu bytes, past the %zu a service "
                                "name may have",
                                f.len, cap - 1);
        memcpy(ret, f.data, f.len);
        ret[f.len] = '\0';
    }
    return r < 0 ? malformed(err, "the HealthCheckRequest") : 0;
}

int pl_health_response_encode(enum pl_health_status status, struct pl_buf *out) {
    if (status == PL_HEALTH_UNKNOWN)
        return pl_buf_append(out, "", 0); /* proto3: a zero is not written */
    if (pl_buf_put_varint(out, 1 << 3 | 0) < 0 || pl_buf_put_varint(out, (uint64_t)status) < 0)
        return -1;
    return 0;
}

/* ---- the tables ------------------------------------------------------------ */

const struct pl_pbsym *pl_pbsym_find(const char *name, size_t n) {
    size_t lo = 0, hi = pl_npbsyms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *s = pl_pbsyms[mid].name;
        size_t sn = strlen(s);
        int c = memcmp(s, name, sn < n ? sn : n);
        if (c == 0)
            c = sn < n ? -1 : sn > n ? 1 : 0;
        if (c == 0)
            return &pl_pbsyms[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int file_find(const uint8_t *name, size_t n) {
    for (size_t i = 0; i < pl_npbfiles; i++)
        if (strlen(pl_pbfiles[i].name) == n && memcmp(pl_pbfiles[i].name, name, n) == 0)
            return (int)i;
    return -1;
}

/* ---- reflection ------------------------------------------------------------ */

/* What one request asks. */
struct reflect_q {
    const uint8_t *host;
    size_t host_len;
    unsigned which;     /* the oneof's field number, 0 for none */
    const uint8_t *arg; /* the string (3, 4, 6, 7) or ExtensionRequest (5) */
    size_t arg_len;
};

static bool is_string_field(unsigned n) {
    return n == 1 || n == 3 || n == 4 || n == 6 || n == 7;
}

static int reflect_decode(const uint8_t *msg, size_t len, struct reflect_q *q,
                          struct pl_error *err) {
    size_t off = 0;
    struct pb_field f;
    int r;
    *q = (struct reflect_q){0};
    while ((r = pb_next(msg, len, &off, &f)) > 0) {
        if (f.number < 1 || f.number > 7 || f.number == 2)
            continue; /* unknown fields are skipped */
        if (f.wire != 2)
            return malformed(err, "the ServerReflectionRequest");
        if (is_string_field(f.number) && !pl_utf8_valid(f.data, f.len))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "ServerReflectionRequest field %u is not UTF-8", f.number);
        if (f.number == 1) {
            q->host = f.data;
            q->host_len = f.len;
        } else { /* the oneof: the last one given counts, as protobuf has it */
            q->which = f.number;
            q->arg = f.data;
            q->arg_len = f.len;
        }
    }
    return r < 0 ? malformed(err, "the ServerReflectionRequest") : 0;
}

/* ExtensionRequest{containing_type, extension_number}. */
static int extension_decode(const uint8_t *msg, size_t len, const uint8_t **ret_type,
                            size_t *ret_type_len, int32_t *ret_number, struct pl_error *err) {
    size_t off = 0;
    struct pb_field f;
    int r;
    *ret_type = (const uint8_t *)"";
    *ret_type_len = 0;
    *ret_number = 0;
    while ((r = pb_next(msg, len, &off, &f)) > 0) {
        if (f.number == 1) {
            if (f.wire != 2 || !pl_utf8_valid(f.data, f.len))
                return malformed(err, "the ExtensionRequest");
            *ret_type = f.data;
            *ret_type_len = f.len;
        } else if (f.number == 2) {
            if (f.wire != 0)
                return malformed(err, "the ExtensionRequest");
            *ret_number = (int32_t)(uint32_t)f.varint; /* int32 as protobuf truncates it */
        }
    }
    return r < 0 ? malformed(err, "the ExtensionRequest") : 0;
}

/* The request as the answer echoes it (original_request): its fields as
 * they came, re-encoded in order. */
static int put_original(struct pl_buf *b, const struct reflect_q *q) {
    struct pl_buf o = {0};
    int r = 0;
    if (q->host_len)
        r |= pl_buf_put_pb_bytes(&o, 1, q->host, q->host_len);
    if (q->which)
        r |= pl_buf_put_pb_bytes(&o, q->which, q->arg, q->arg_len);
    if (r == 0)
        r = pl_buf_put_pb_bytes(b, 2, o.data ? o.data : "", o.len);
    pl_buf_free(&o);
    return r;
}

/* error_response{code, message} (gRPC's code numbers). */
static int put_error(struct pl_buf *b, unsigned code, const char *what, const uint8_t *name,
                     size_t n) {
    struct pl_buf e = {0};
    struct pl_buf m = {0};
    int r = pl_buf_put_varint(&e, 1 << 3 | 0);
    r |= pl_buf_put_varint(&e, code);
    r |= pl_buf_printf(&m, "%s%.*s", what, (int)(n > 200 ? 200 : n), (const char *)name);
    if (r == 0)
        r = pl_buf_put_pb_bytes(&e, 2, m.data, m.len);
    if (r == 0)
        r = pl_buf_put_pb_bytes(b, 7, e.data ? e.data : "", e.len);
    pl_buf_free(&e);
    pl_buf_free(&m);
    return r;
}

/* file_descriptor_response: the file, then every file it imports. */
static int put_files(struct pl_buf *b, int file) {
    struct pl_buf fr = {0};
    const struct pl_pbfile *f = &pl_pbfiles[file];
    int r = pl_buf_put_pb_bytes(&fr, 1, f->bytes, f->len);
    for (size_t i = 0; r == 0 && i < f->ndeps; i++) {
        const struct pl_pbfile *d = &pl_pbfiles[f->deps[i]];
        r = pl_buf_put_pb_bytes(&fr, 1, d->bytes, d->len);
    }
    if (r == 0)
        r = pl_buf_put_pb_bytes(b, 4, fr.data ? fr.data : "", fr.len);
    pl_buf_free(&fr);
    return r;
}

#define GRPC_INVALID_ARGUMENT 3
#define GRPC_NOT_FOUND 5

static int answer_symbol(struct pl_buf *b, const uint8_t *name, size_t n) {
    const struct pl_pbsym *s = pl_pbsym_find((const char *)name, n);
    if (!s)
        return put_error(b, GRPC_NOT_FOUND, "symbol not found: ", name, n);
    return put_files(b, s->file);
}

static int answer_extension(struct pl_buf *b, const uint8_t *msg, size_t len,
                            struct pl_error *err) {
    const uint8_t *type;
    size_t tn;
    int32_t number;
    if (extension_decode(msg, len, &type, &tn, &number, err) < 0)
        return -2;
    const struct pl_pbsym *m = pl_pbsym_find((const char *)type, tn);
    if (!m || m->kind != PL_PBSYM_MESSAGE)
        return put_error(b, GRPC_NOT_FOUND, "message type not found: ", type, tn);
    for (size_t i = 0; i < pl_npbsyms; i++) {
        const struct pl_pbsym *x = &pl_pbsyms[i];
        if (x->kind == PL_PBSYM_EXTENSION && x->number == number && strlen(x->extendee) == tn &&
            memcmp(x->extendee, type, tn) == 0)
            return put_files(b, x->file);
    }
    return put_error(b, GRPC_NOT_FOUND, "no extension with this number extends ", type, tn);
}

static int answer_extension_numbers(struct pl_buf *b, const uint8_t *type, size_t tn) {
    const struct pl_pbsym *m = pl_pbsym_find((const char *)type, tn);
    if (!m || m->kind != PL_PBSYM_MESSAGE)
        return put_error(b, GRPC_NOT_FOUND, "message type not found: ", type, tn);
    struct pl_buf e = {0};
    int r = pl_buf_put_pb_bytes(&e, 1, type, tn);
    for (size_t i = 0; r == 0 && i < pl_npbsyms; i++) {
        const struct pl_pbsym *x = &pl_pbsyms[i];
        if (x->kind == PL_PBSYM_EXTENSION && strlen(x->extendee) == tn &&
            memcmp(x->extendee, type, tn) == 0) {
            r = pl_buf_put_varint(&e, 2 << 3 | 0);
            if (r == 0)
                r = pl_buf_put_varint(&e, (uint64_t)(int64_t)x->number);
        }
    }
    if (r == 0)
        r = pl_buf_put_pb_bytes(b, 5, e.data ? e.data : "", e.len);
    pl_buf_free(&e);
    return r;
}

static int answer_services(struct pl_buf *b, const char *const *services) {
    struct pl_buf l = {0};
    int r = 0;
    for (const char *const *s = services; r == 0 && *s; s++) {
        struct pl_buf one = {0};
        r = pl_buf_put_pb_bytes(&one, 1, *s, strlen(*s));
        if (r == 0)
            r = pl_buf_put_pb_bytes(&l, 1, one.data, one.len);
        pl_buf_free(&one);
    }
    if (r == 0)
        r = pl_buf_put_pb_bytes(b, 6, l.data ? l.data : "", l.len);
    pl_buf_free(&l);
    return r;
}

int pl_reflect_answer(const uint8_t *msg, size_t len, const char *const *services,
                      struct pl_buf *out, struct pl_error *err) {
    struct reflect_q q;
    if (reflect_decode(msg, len, &q, err) < 0)
        return -1;
    struct pl_buf b = {0};
    int r = 0;
    if (q.host_len)
        r = pl_buf_put_pb_bytes(&b, 1, q.host, q.host_len);
    if (r == 0)
        r = put_original(&b, &q);
    if (r == 0) {
        switch (q.which) {
        case 3: {
            int f = file_find(q.arg, q.arg_len);
            r = f < 0 ? put_error(&b, GRPC_NOT_FOUND, "file not found: ", q.arg, q.arg_len)
                      : put_files(&b, f);
            break;
        }
        case 4: r = answer_symbol(&b, q.arg, q.arg_len); break;
        case 5: r = answer_extension(&b, q.arg, q.arg_len, err); break;
        case 6: r = answer_extension_numbers(&b, q.arg, q.arg_len); break;
        case 7: r = answer_services(&b, services); break;
        default:
            r = put_error(&b, GRPC_INVALID_ARGUMENT, "the request asks none of the five questions",
                          (const uint8_t *)"", 0);
        }
    }
    if (r == -2) {
        pl_buf_free(&b);
        return -1;
    }
    if (r == 0)
        r = pl_buf_append(out, b.data ? b.data : "", b.len);
    pl_buf_free(&b);
    if (r < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory answering reflection");
    return 0;
}
