/* SPDX-License-Identifier: Apache-2.0 */
/*
 * codec.c: protobuf's wire format to and from the API's JSON, walked with
 * protobuf-c's descriptors of sandbox.proto (codec.h).
 *
 * The contract uses bool, int32, uint32, string, messages, repeated
 * strings and messages, and one map<string, string>; other field types
 * are refused both ways, so a contract change that needs them fails its
 * tests here rather than passing silently (test_codec checks every field
 * of the contract has a type this file knows).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "../core/canon.h"
#include "../core/jsonscan.h"
#include "codec.h"
#include "sandbox.pb-c.h"

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

int pl_codec_method(const char *method, const ProtobufCMessageDescriptor **ret_in,
                    const ProtobufCMessageDescriptor **ret_out) {
    const ProtobufCMethodDescriptor *m = protobuf_c_service_descriptor_get_method_by_name(
        &plimsoll__v1__sandbox_service__descriptor, method);
    if (!m)
        return -1;
    *ret_in = m->input;
    *ret_out = m->output;
    return 0;
}

/* map<K, V> is a repeated message "<Name>Entry" of key = 1 and value = 2. */
static bool is_map_entry(const ProtobufCFieldDescriptor *f) {
    if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label != PROTOBUF_C_LABEL_REPEATED)
        return false;
    const ProtobufCMessageDescriptor *d = f->descriptor;
    size_t n = strlen(d->short_name);
    return n > 5 && strcmp(d->short_name + n - 5, "Entry") == 0 && d->n_fields == 2 &&
           d->fields[0].id == 1 && strcmp(d->fields[0].name, "key") == 0 && d->fields[1].id == 2 &&
           strcmp(d->fields[1].name, "value") == 0;
}

static bool scalar_known(ProtobufCType t) {
    return t == PROTOBUF_C_TYPE_BOOL || t == PROTOBUF_C_TYPE_INT32 || t == PROTOBUF_C_TYPE_UINT32 ||
           t == PROTOBUF_C_TYPE_STRING;
}

/* ---- decoding ---------------------------------------------------------- */

struct reader {
    const uint8_t *p, *end;
};

static int read_varint(struct reader *r, uint64_t *ret) {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end)
            return -1;
        uint8_t b = *r->p++;
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

static int bad(struct pl_error *err, const ProtobufCMessageDescriptor *desc, const char *what,
               uint32_t field) {
    return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                        "the binary %s is not a valid %s: %s (field %" PRIu32 ")", desc->name,
                        desc->name, what, field);
}

/*
 * The JSON path's bounds, charged while decoding and before anything is
 * built: every member's key, every value (an object or array one, a
 * string, number or literal one) is one element of PL_JSON_MAX_ELEMENTS,
 * counted as pl_json_measure counts the JSON text it becomes; every object
 * or array opens a level of PL_JSON_MAX_DEPTH.  So a binary body can make
 * no more than the JSON it stands for, whatever its shape (4 MiB of empty
 * repeated entries is refused at the 8193rd, not built whole).
 */
struct budget {
    size_t left; /* elements still allowed */
};

static int charge(struct budget *b, size_t n, struct pl_error *err) {
    if (b->left >= n) {
        b->left -= n;
        return 0;
    }
    b->left = 0;
    return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                        "body: more than %u JSON elements (PL_JSON_MAX_ELEMENTS) once decoded; "
                        "the largest legal request has 4551",
                        PL_JSON_MAX_ELEMENTS);
}

static int too_deep(struct pl_error *err) {
    return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                        "body: nested deeper than %u levels (PL_JSON_MAX_DEPTH) once decoded; no "
                        "request nests deeper than 6",
                        PL_JSON_MAX_DEPTH);
}

static int decode_into(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                       json_t *obj, unsigned level, struct budget *b, struct pl_error *err);

/* A scalar held in a varint, as JSON. */
static json_t *varint_json(ProtobufCType t, uint64_t v) {
    switch (t) {
    case PROTOBUF_C_TYPE_BOOL: return json_boolean(v != 0);
    case PROTOBUF_C_TYPE_INT32: return json_integer((int32_t)(uint32_t)v);
    case PROTOBUF_C_TYPE_UINT32: return json_integer((uint32_t)v);
    default: return NULL;
    }
}

/* What a field's value costs before it is made: its own element, and for
 * a member obj does not have yet its key (and a repeated field's array). */
static int charge_value(const ProtobufCFieldDescriptor *f, const json_t *obj, unsigned level,
                        struct budget *b, struct pl_error *err) {
    bool first = !json_object_get(obj, f->name);
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        if (first && level + 1 > PL_JSON_MAX_DEPTH)
            return too_deep(err);
        return charge(b, 1 + (first ? 2 : 0), err);
    }
    return charge(b, 1 + (first ? 1 : 0), err);
}

/* One field's value into obj (set, appended or merged by protobuf's rules). */
static int put_value(const ProtobufCMessageDescriptor *desc, const ProtobufCFieldDescriptor *f,
                     json_t *obj, json_t *v, struct pl_error *err) {
    if (!v)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory decoding %s", desc->name);
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        json_t *a = json_object_get(obj, f->name);
        if (!a) {
            a = json_array();
            if (!a || json_object_set_new(obj, f->name, a) < 0) {
                json_decref(v);
                return pl_error_set(err, PL_REASON_INTERNAL, "out of memory decoding %s",
                                    desc->name);
            }
        }
        return json_array_append_new(a, v) < 0
                   ? pl_error_set(err, PL_REASON_INTERNAL, "out of memory decoding %s", desc->name)
                   : 0;
    }
    /* proto3: a singular scalar at its default is the field unset. */
    bool is_default = json_is_false(v) || (json_is_integer(v) && json_integer_value(v) == 0) ||
                      (json_is_string(v) && json_string_length(v) == 0);
    if (is_default && f->type != PROTOBUF_C_TYPE_MESSAGE &&
        !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) {
        json_decref(v);
        json_object_del(obj, f->name);
        return 0;
    }
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) /* the oneof keeps its last member */
        for (unsigned i = 0; i < desc->n_fields; i++) {
            const ProtobufCFieldDescriptor *o = &desc->fields[i];
            if (o != f && (o->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                o->quantifier_offset == f->quantifier_offset)
                json_object_del(obj, o->name);
        }
    return json_object_set_new(obj, f->name, v) < 0
               ? pl_error_set(err, PL_REASON_INTERNAL, "out of memory decoding %s", desc->name)
               : 0;
}

/* A map entry (key = 1, value = 2) into obj's map member: a key and a
 * value each, the map object itself once. */
static int decode_map_entry(const ProtobufCMessageDescriptor *desc,
                            const ProtobufCFieldDescriptor *f, const uint8_t *p, size_t n,
                            json_t *obj, unsigned level, struct budget *b, struct pl_error *err) {
    json_t *m = json_object_get(obj, f->name);
    if (!m && (level + 1 > PL_JSON_MAX_DEPTH))
        return too_deep(err);
    if (charge(b, 2 + (m ? 0 : 2), err) < 0)
        return -1;
    /* The entry's own members are counted against a budget of their own:
     * at most its key and its value, each met once or more on the wire. */
    struct budget eb = {.left = 5};
    json_t *entry = json_object();
    if (!entry)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory decoding %s", desc->name);
    if (decode_into(f->descriptor, p, n, entry, level + 1, &eb, err) < 0) {
        json_decref(entry);
        return -1;
    }
    if (!m && json_object_set_new(obj, f->name, m = json_object()) < 0)
        m = NULL;
    const char *k = json_string_value(json_object_get(entry, "key"));
    json_t *v = json_object_get(entry, "value");
    int r = m && json_object_set_new(m, k ? k : "", v ? json_incref(v) : json_string("")) == 0
                ? 0
                : pl_error_set(err, PL_REASON_INTERNAL, "out of memory decoding %s", desc->name);
    json_decref(entry);
    return r;
}

static int decode_len_field(const ProtobufCMessageDescriptor *desc,
                            const ProtobufCFieldDescriptor *f, const uint8_t *p, size_t n,
                            json_t *obj, unsigned level, struct budget *b, struct pl_error *err) {
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        if (!pl_utf8_valid(p, n))
            return bad(err, desc, "a string that is not UTF-8", f->id);
        if (charge_value(f, obj, level, b, err) < 0)
            return -1;
        return put_value(desc, f, obj, json_stringn((const char *)p, n), err);
    }
    if (f->type == PROTOBUF_C_TYPE_BYTES) { /* proto3 JSON: standard base64 */
        if (charge_value(f, obj, level, b, err) < 0)
            return -1;
        char *b64 = pl_base64_encode(p, n, 1);
        json_t *v = b64 ? json_string(b64) : NULL;
        free(b64);
        return v ? put_value(desc, f, obj, v, err)
                 : pl_error_set(err, PL_REASON_INTERNAL, "out of memory decoding %s", desc->name);
    }
    if (f->type != PROTOBUF_C_TYPE_MESSAGE) { /* a packed run of varints */
        if (f->label != PROTOBUF_C_LABEL_REPEATED || !scalar_known(f->type))
            return bad(err, desc, "a length-delimited value for a scalar", f->id);
        struct reader r = {p, p + n};
        while (r.p < r.end) {
            uint64_t v;
            if (read_varint(&r, &v) < 0)
                return bad(err, desc, "a broken packed varint", f->id);
            if (charge_value(f, obj, level, b, err) < 0 ||
                put_value(desc, f, obj, varint_json(f->type, v), err) < 0)
                return -1;
        }
        return 0;
    }
    if (is_map_entry(f))
        return decode_map_entry(desc, f, p, n, obj, level, b, err);
    /* A message: a singular one met twice merges into the first. */
    json_t *sub = f->label == PROTOBUF_C_LABEL_REPEATED ? NULL : json_object_get(obj, f->name);
    /* Its object is a level below obj's, or two when it is in an array. */
    unsigned sub_level = level + (f->label == PROTOBUF_C_LABEL_REPEATED ? 2 : 1);
    if (sub) {
        json_incref(sub);
    } else if (sub_level > PL_JSON_MAX_DEPTH || charge_value(f, obj, level, b, err) < 0) {
        return sub_level > PL_JSON_MAX_DEPTH ? too_deep(err) : -1;
    } else if (!(sub = json_object())) {
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory decoding %s", desc->name);
    }
    if (decode_into(f->descriptor, p, n, sub, sub_level, b, err) < 0) {
        json_decref(sub);
        return -1;
    }
    return put_value(desc, f, obj, sub, err);
}

/* level: the JSON depth of obj (the request's own object is 1). */
static int decode_into(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                       json_t *obj, unsigned level, struct budget *b, struct pl_error *err) {
    if (level > PL_JSON_MAX_DEPTH)
        return too_deep(err);
    if (len == 0)
        return 0; /* no field: data may be NULL, and NULL + 0 is not C */
    struct reader r = {data, data + len};
    while (r.p < r.end) {
        uint64_t key;
        if (read_varint(&r, &key) < 0 || key >> 32)
            return bad(err, desc, "a broken field key", 0);
        uint32_t id = (uint32_t)(key >> 3);
        unsigned wire = (unsigned)(key & 7);
        if (id == 0)
            return bad(err, desc, "field number 0", 0);
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(desc, id);
        if (!f)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "field number %" PRIu32 " is not in %s (unknown fields are "
                                "refused, as unknown JSON members are)",
                                id, desc->name);
        if (wire == WIRE_VARINT) {
            uint64_t v;
            if (read_varint(&r, &v) < 0)
                return bad(err, desc, "a broken varint", id);
            if (!scalar_known(f->type) || f->type == PROTOBUF_C_TYPE_STRING)
                return bad(err, desc, "a varint for a field that is not one", id);
            if (charge_value(f, obj, level, b, err) < 0)
                return -1;
            if (put_value(desc, f, obj, varint_json(f->type, v), err) < 0)
                return -1;
        } else if (wire == WIRE_LEN) {
            uint64_t n;
            if (read_varint(&r, &n) < 0 || n > (uint64_t)(r.end - r.p))
                return bad(err, desc, "a length past the end", id);
            if (decode_len_field(desc, f, r.p, (size_t)n, obj, level, b, err) < 0)
                return -1;
            r.p += n;
        } else {
            return bad(err, desc, "a wire type the field does not take", id);
        }
    }
    return 0;
}

json_t *pl_codec_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                        struct pl_error *err) {
    struct budget b = {.left = PL_JSON_MAX_ELEMENTS - 1}; /* the request's own object */
    json_t *obj = json_object();
    if (!obj) {
        pl_error_set(err, PL_REASON_INTERNAL, "out of memory decoding %s", desc->name);
        return NULL;
    }
    if (decode_into(desc, data, len, obj, 1, &b, err) < 0) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

/* ---- encoding ---------------------------------------------------------- */

static int encode_msg(const ProtobufCMessageDescriptor *desc, const json_t *obj, struct pl_buf *out,
                      unsigned depth, struct pl_error *err);

static int unfit(struct pl_error *err, const ProtobufCMessageDescriptor *desc,
                 const ProtobufCFieldDescriptor *f) {
    return pl_error_set(err, PL_REASON_INTERNAL,
                        "the answer's %s.%s does not fit its field in the contract", desc->name,
                        f->name);
}

/* One value of field f (an element, for a repeated one). */
static int encode_one(const ProtobufCMessageDescriptor *desc, const ProtobufCFieldDescriptor *f,
                      const json_t *v, bool always, struct pl_buf *out, unsigned depth,
                      struct pl_error *err) {
    uint64_t key_varint = (uint64_t)f->id << 3 | WIRE_VARINT;
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v))
            return unfit(err, desc, f);
        if (!always && !json_is_true(v))
            return 0;
        return pl_buf_put_varint(out, key_varint) < 0 || pl_buf_put_varint(out, json_is_true(v)) < 0
                   ? -1
                   : 0;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_UINT32: {
        if (!json_is_integer(v))
            return unfit(err, desc, f);
        json_int_t i = json_integer_value(v);
        bool fits = f->type == PROTOBUF_C_TYPE_INT32 ? i >= INT32_MIN && i <= INT32_MAX
                                                     : i >= 0 && i <= (json_int_t)UINT32_MAX;
        if (!fits)
            return unfit(err, desc, f);
        if (!always && i == 0)
            return 0;
        /* A negative int32 is sign-extended to ten bytes, as protobuf does. */
        return pl_buf_put_varint(out, key_varint) < 0 ||
                       pl_buf_put_varint(out, (uint64_t)(int64_t)i) < 0
                   ? -1
                   : 0;
    }
    case PROTOBUF_C_TYPE_STRING:
        if (!json_is_string(v))
            return unfit(err, desc, f);
        if (!always && json_string_length(v) == 0)
            return 0;
        return pl_buf_put_pb_bytes(out, f->id, json_string_value(v), json_string_length(v));
    case PROTOBUF_C_TYPE_BYTES: {
        unsigned char *raw = NULL;
        size_t rawlen = 0;
        if (!json_is_string(v) || pl_base64_decode(json_string_value(v), json_string_length(v),
                                                   json_string_length(v), &raw, &rawlen) < 0)
            return unfit(err, desc, f);
        int r = !always && rawlen == 0
                    ? 0
                    : pl_buf_put_pb_bytes(out, f->id, raw ? (const char *)raw : "", rawlen);
        free(raw);
        return r;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        if (!json_is_object(v))
            return unfit(err, desc, f);
        struct pl_buf sub = {0};
        int r = encode_msg(f->descriptor, v, &sub, depth + 1, err);
        if (r == 0)
            r = pl_buf_put_pb_bytes(out, f->id, sub.data, sub.len);
        pl_buf_free(&sub);
        return r;
    }
    default: return unfit(err, desc, f);
    }
}

static int encode_field(const ProtobufCMessageDescriptor *desc, const ProtobufCFieldDescriptor *f,
                        const json_t *v, struct pl_buf *out, unsigned depth, struct pl_error *err) {
    if (json_is_null(v))
        return 0;
    if (is_map_entry(f)) {
        if (!json_is_object(v))
            return unfit(err, desc, f);
        const char *k;
        const json_t *mv;
        json_object_foreach((json_t *)v, k, mv) {
            json_t *entry = json_pack("{s:s, s:O}", "key", k, "value", mv);
            int r = entry ? encode_one(desc, f, entry, true, out, depth, err) : -1;
            json_decref(entry);
            if (r < 0)
                return -1;
        }
        return 0;
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        if (!json_is_array(v))
            return unfit(err, desc, f);
        size_t i;
        const json_t *e;
        json_array_foreach(v, i,
                           e) if (encode_one(desc, f, e, true, out, depth, err) < 0) return -1;
        return 0;
    }
    /* proto3 leaves a singular scalar at its default off the wire, but a
     * oneof member or a message is there whenever it is set. */
    bool always = (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) || f->type == PROTOBUF_C_TYPE_MESSAGE;
    return encode_one(desc, f, v, always, out, depth, err);
}

static int encode_msg(const ProtobufCMessageDescriptor *desc, const json_t *obj, struct pl_buf *out,
                      unsigned depth, struct pl_error *err) {
    if (depth > PL_CODEC_MAX_DEPTH)
        return pl_error_set(err, PL_REASON_INTERNAL, "the answer nests deeper than %d",
                            PL_CODEC_MAX_DEPTH);
    /* In field order, as protobuf's own encoders write. */
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        const json_t *v = json_object_get(obj, f->name);
        if (v && encode_field(desc, f, v, out, depth, err) < 0) {
            if (err->reason == PL_REASON_NONE)
                pl_error_set(err, PL_REASON_INTERNAL, "out of memory encoding %s", desc->name);
            return -1;
        }
    }
    /* Every member must be a field: an answer outside the contract is a bug. */
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)obj, k, v) if (
        !protobuf_c_message_descriptor_get_field_by_name(
            desc, k)) return pl_error_set(err, PL_REASON_INTERNAL,
                                          "the answer's member \"%.64s\" is not a field of %s", k,
                                          desc->name);
    return 0;
}

int pl_codec_encode(const ProtobufCMessageDescriptor *desc, const json_t *obj, struct pl_buf *out,
                    struct pl_error *err) {
    if (!json_is_object(obj))
        return pl_error_set(err, PL_REASON_INTERNAL, "the answer is not a %s", desc->name);
    return encode_msg(desc, obj, out, 0, err);
}
