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
 *
 * Connect's JSON codec rides on the same code: a JSON request becomes its
 * protobuf bytes (a table of the fields), and the answer's bytes become
 * JSON, so both codecs share one reader and one set of answers.
 */
#include "reflect.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../core/canon.h"
#include "../core/jsonscan.h"

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
    /* At most 200 bytes of the name, cut before a character, not inside
     * one: the message is a proto string (UTF-8), and Connect's JSON form
     * of it must stay readable. */
    if (n > 200) {
        n = 200;
        while (n > 0 && (name[n] & 0xc0) == 0x80)
            n--;
    }
    r |= pl_buf_printf(&m, "%s%.*s", what, (int)n, (const char *)name);
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

/* ---- Connect's JSON ------------------------------------------------------------ */

enum jkind { J_STRING, J_BYTES, J_INT32, J_MESSAGE };

struct jmsg;
struct jfield {
    unsigned number;
    const char *json, *proto; /* lowerCamelCase, and the proto name */
    enum jkind kind;
    bool repeated;
    const struct jmsg *msg; /* J_MESSAGE's */
};
struct jmsg {
    const struct jfield *fields;
    size_t n;
};

#define JMSG(a)                                                                                    \
    { a, sizeof(a) / sizeof(a[0]) }

static const struct jfield extension_request_f[] = {
    {1, "containingType", "containing_type", J_STRING, false, NULL},
    {2, "extensionNumber", "extension_number", J_INT32, false, NULL},
};
static const struct jmsg extension_request_m = JMSG(extension_request_f);

static const struct jfield request_f[] = {
    {1, "host", "host", J_STRING, false, NULL},
    {3, "fileByFilename", "file_by_filename", J_STRING, false, NULL},
    {4, "fileContainingSymbol", "file_containing_symbol", J_STRING, false, NULL},
    {5, "fileContainingExtension", "file_containing_extension", J_MESSAGE, false,
     &extension_request_m},
    {6, "allExtensionNumbersOfType", "all_extension_numbers_of_type", J_STRING, false, NULL},
    {7, "listServices", "list_services", J_STRING, false, NULL},
};
static const struct jmsg request_m = JMSG(request_f);

static const struct jfield file_response_f[] = {
    {1, "fileDescriptorProto", "file_descriptor_proto", J_BYTES, true, NULL},
};
static const struct jfield extension_numbers_f[] = {
    {1, "baseTypeName", "base_type_name", J_STRING, false, NULL},
    {2, "extensionNumber", "extension_number", J_INT32, true, NULL},
};
static const struct jfield service_f[] = {
    {1, "name", "name", J_STRING, false, NULL},
};
static const struct jmsg service_m = JMSG(service_f);
static const struct jfield services_f[] = {
    {1, "service", "service", J_MESSAGE, true, &service_m},
};
static const struct jfield error_f[] = {
    {1, "errorCode", "error_code", J_INT32, false, NULL},
    {2, "errorMessage", "error_message", J_STRING, false, NULL},
};
static const struct jmsg file_response_m = JMSG(file_response_f);
static const struct jmsg extension_numbers_m = JMSG(extension_numbers_f);
static const struct jmsg services_m = JMSG(services_f);
static const struct jmsg error_m = JMSG(error_f);

static const struct jfield response_f[] = {
    {1, "validHost", "valid_host", J_STRING, false, NULL},
    {2, "originalRequest", "original_request", J_MESSAGE, false, &request_m},
    {4, "fileDescriptorResponse", "file_descriptor_response", J_MESSAGE, false, &file_response_m},
    {5, "allExtensionNumbersResponse", "all_extension_numbers_response", J_MESSAGE, false,
     &extension_numbers_m},
    {6, "listServicesResponse", "list_services_response", J_MESSAGE, false, &services_m},
    {7, "errorResponse", "error_response", J_MESSAGE, false, &error_m},
};
static const struct jmsg response_m = JMSG(response_f);

/* JSON to protobuf: one object of m's fields, encoded into out. */
static int json_to_pb(const struct jmsg *m, json_t *obj, struct pl_buf *out, struct pl_error *err) {
    if (!json_is_object(obj))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "a ServerReflectionRequest (or its ExtensionRequest) is a JSON object");
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        const struct jfield *f = NULL;
        for (size_t i = 0; i < m->n; i++)
            if (strcmp(k, m->fields[i].json) == 0 || strcmp(k, m->fields[i].proto) == 0)
                f = &m->fields[i];
        if (!f)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "unknown field \"%.64s\" in a ServerReflectionRequest", k);
        if (json_is_null(v))
            continue; /* proto3's JSON: null is the field's default */
        int r = 0;
        if (f->kind == J_STRING) {
            if (!json_is_string(v))
                return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s is a string", f->json);
            r = pl_buf_put_pb_bytes(out, f->number, json_string_value(v), json_string_length(v));
        } else if (f->kind == J_INT32) {
            json_int_t n = 0;
            const char *sv = json_string_value(v);
            char *end = NULL;
            if (json_is_integer(v))
                n = json_integer_value(v);
            else if (sv && sv[0] && strlen(sv) <= 11)
                n = strtoll(sv, &end, 10); /* proto3's JSON takes an int32 as a string too */
            if ((!json_is_integer(v) && (!end || *end)) || n < INT32_MIN || n > INT32_MAX)
                return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s is an int32", f->json);
            r = pl_buf_put_varint(out, (uint64_t)f->number << 3 | 0);
            if (r == 0)
                r = pl_buf_put_varint(out, (uint64_t)(int64_t)n);
        } else { /* J_MESSAGE: a request has no bytes field */
            struct pl_buf sub = {0};
            if (json_to_pb(f->msg, v, &sub, err) < 0) {
                pl_buf_free(&sub);
                return -1;
            }
            r = pl_buf_put_pb_bytes(out, f->number, sub.data ? sub.data : "", sub.len);
            pl_buf_free(&sub);
        }
        if (r < 0)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    return 0;
}

int pl_reflect_request_from_json(const char *json, size_t len, struct pl_buf *out,
                                 struct pl_error *err) {
    if (pl_json_check_bounds(json, len, err) < 0)
        return -1;
    json_error_t je;
    json_t *v = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!v)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "a ServerReflectionRequest is not JSON: %s", je.text);
    int r = json_to_pb(&request_m, v, out, err);
    json_decref(v);
    return r;
}

/* Protobuf to JSON: the message's fields of m, into a new object (NULL
 * when out of memory or the bytes are no message). */
static json_t *pb_to_json(const struct jmsg *m, const uint8_t *p, size_t len) {
    json_t *o = json_object();
    size_t off = 0;
    struct pb_field f;
    int r = 0;
    while (o && (r = pb_next(p, len, &off, &f)) > 0) {
        const struct jfield *d = NULL;
        for (size_t i = 0; i < m->n; i++)
            if (m->fields[i].number == f.number)
                d = &m->fields[i];
        if (!d)
            continue;
        json_t *v = NULL;
        if (d->kind == J_INT32 && f.wire == 0) {
            v = json_integer((int32_t)(uint32_t)f.varint);
        } else if (d->kind == J_STRING && f.wire == 2) {
            v = json_stringn((const char *)f.data, f.len);
        } else if (d->kind == J_BYTES && f.wire == 2) {
            char *b64 = pl_base64_encode(f.data, f.len, 1);
            v = b64 ? json_string(b64) : NULL;
            free(b64);
        } else if (d->kind == J_MESSAGE && f.wire == 2) {
            v = pb_to_json(d->msg, f.data, f.len);
        }
        if (!v) {
            json_decref(o);
            return NULL;
        }
        if (d->repeated) {
            json_t *a = json_object_get(o, d->json);
            if (!a && json_object_set_new(o, d->json, a = json_array()) < 0)
                a = NULL;
            if (!a || json_array_append_new(a, v) < 0) {
                json_decref(o);
                return NULL;
            }
        } else if (json_object_set_new(o, d->json, v) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    if (o && r < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int pl_reflect_response_to_json(const uint8_t *msg, size_t len, struct pl_buf *out) {
    json_t *o = pb_to_json(&response_m, msg, len);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    int r = text ? pl_buf_append(out, text, strlen(text)) : -1;
    free(text);
    return r;
}
