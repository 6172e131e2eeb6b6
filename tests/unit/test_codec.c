/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_codec.c: Connect's binary codec (src/server/codec.c) against
 * protobuf-c's own packer and unpacker of the same contract, the rules it
 * keeps (last scalar wins, messages merge, a oneof keeps its last member,
 * int32's ten-byte negatives, maps), and the bytes it refuses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"
#include "../../src/core/jsonscan.h"
#include "sandbox.pb-c.h"

static json_t *decode_ok(const ProtobufCMessageDescriptor *d, const void *p, size_t n) {
    struct pl_error err = {0};
    json_t *j = pl_codec_decode(d, p, n, &err);
    if (!j)
        fail_msg("decode: %s", err.message);
    return j;
}

static void decode_refused(const ProtobufCMessageDescriptor *d, const void *p, size_t n,
                           const char *says) {
    struct pl_error err = {0};
    json_t *j = pl_codec_decode(d, p, n, &err);
    assert_null(j);
    assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
    if (!strstr(err.message, says))
        fail_msg("\"%s\" does not say \"%s\"", err.message, says);
}

static void assert_json(const json_t *got, const char *want_text) {
    json_t *want = json_loads(want_text, 0, NULL);
    assert_non_null(want);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
        fail_msg("got %s, want %s", g, want_text);
    }
    json_decref(want);
}

/* Every field reachable from the service has a type codec.c knows. */
static void check_fields(const ProtobufCMessageDescriptor *d, unsigned depth) {
    assert_true(depth < PL_CODEC_MAX_DEPTH);
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        switch (f->type) {
        case PROTOBUF_C_TYPE_BOOL:
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_STRING:
        case PROTOBUF_C_TYPE_BYTES: break;
        case PROTOBUF_C_TYPE_MESSAGE: check_fields(f->descriptor, depth + 1); break;
        default: fail_msg("%s.%s: a field type the codec does not know", d->name, f->name);
        }
    }
}

static void test_every_field_of_the_contract_has_a_known_type(void **state) {
    (void)state;
    const ProtobufCServiceDescriptor *s = &plimsoll__v1__sandbox_service__descriptor;
    assert_true(s->n_methods >= 7);
    for (unsigned i = 0; i < s->n_methods; i++) {
        const ProtobufCMessageDescriptor *in, *out;
        assert_int_equal(pl_codec_method(s->methods[i].name, &in, &out), 0);
        check_fields(in, 0);
        check_fields(out, 0);
    }
    const ProtobufCMessageDescriptor *in, *out;
    assert_int_equal(pl_codec_method("Nope", &in, &out), -1);
}

/* protobuf-c packs a RunRequest; the codec reads what it packed. */
static void test_decodes_what_protobuf_c_packs(void **state) {
    (void)state;
    Plimsoll__V1__Snippet sn = PLIMSOLL__V1__SNIPPET__INIT;
    sn.language = "javascript";
    sn.code = "console.log('\xc3\xa9')";
    Plimsoll__V1__RunRequest rq = PLIMSOLL__V1__RUN_REQUEST__INIT;
    rq.minimum_isolation = "process";
    rq.timeout_ms = 4294967295u;
    rq.payload_case = PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_SNIPPET;
    rq.snippet = &sn;
    uint8_t buf[256];
    size_t n = protobuf_c_message_pack(&rq.base, buf);
    json_t *j = decode_ok(&plimsoll__v1__run_request__descriptor, buf, n);
    assert_json(j,
                "{\"minimum_isolation\":\"process\",\"timeout_ms\":4294967295,"
                "\"snippet\":{\"language\":\"javascript\",\"code\":\"console.log('\xc3\xa9')\"}}");
    json_decref(j);

    /* An empty message is {} (Describe's request, a body of no bytes). */
    j = decode_ok(&plimsoll__v1__describe_request__descriptor, "", 0);
    assert_json(j, "{}");
    json_decref(j);
}

/* The codec encodes an answer; protobuf-c reads what it wrote. */
static void test_encodes_what_protobuf_c_reads(void **state) {
    (void)state;
    json_t *a = json_loads(
        "{\"exit_code\":-1,\"stdout\":\"hi\\n\",\"stdout_truncated\":true,\"duration_ms\":0,"
        "\"isolation\":\"process\",\"timed_out\":false,\"steps\":[{\"name\":\"a\",\"exit_code\":2},"
        "{\"name\":\"b\"}],\"record\":{\"version\":1,\"digest\":\"d\"},\"detail\":\"\"}",
        0, NULL);
    struct pl_buf b = {0};
    struct pl_error err = {0};
    assert_int_equal(pl_codec_encode(&plimsoll__v1__run_response__descriptor, a, &b, &err), 0);
    Plimsoll__V1__RunResponse *r =
        plimsoll__v1__run_response__unpack(NULL, b.len, (const uint8_t *)b.data);
    assert_non_null(r);
    assert_int_equal(r->exit_code, -1);
    assert_string_equal(r->stdout, "hi\n");
    assert_true(r->stdout_truncated);
    assert_string_equal(r->isolation, "process");
    assert_int_equal(r->n_steps, 2);
    assert_string_equal(r->steps[0]->name, "a");
    assert_int_equal(r->steps[0]->exit_code, 2);
    assert_string_equal(r->steps[1]->name, "b");
    assert_non_null(r->record);
    assert_int_equal(r->record->version, 1);
    assert_string_equal(r->record->digest, "d");
    plimsoll__v1__run_response__free_unpacked(r, NULL);

    /* And back: the same answer, defaults left out as proto3 JSON does. */
    json_t *j = decode_ok(&plimsoll__v1__run_response__descriptor, b.data, b.len);
    assert_json(j, "{\"exit_code\":-1,\"stdout\":\"hi\\n\",\"stdout_truncated\":true,"
                   "\"isolation\":\"process\",\"steps\":[{\"name\":\"a\",\"exit_code\":2},"
                   "{\"name\":\"b\"}],\"record\":{\"version\":1,\"digest\":\"d\"}}");
    json_decref(j);
    json_decref(a);
    pl_buf_free(&b);
}

static void test_maps_both_ways(void **state) {
    (void)state;
    json_t *a = json_loads("{\"code\":\"failed_precondition\",\"metadata\":"
                           "{\"dispatched\":\"false\",\"isolation\":\"process\"},"
                           "\"http_status\":412}",
                           0, NULL);
    struct pl_buf b = {0};
    struct pl_error err = {0};
    assert_int_equal(pl_codec_encode(&plimsoll__v1__explain_refusal__descriptor, a, &b, &err), 0);
    Plimsoll__V1__ExplainRefusal *r =
        plimsoll__v1__explain_refusal__unpack(NULL, b.len, (const uint8_t *)b.data);
    assert_non_null(r);
    assert_int_equal(r->n_metadata, 2);
    assert_string_equal(r->metadata[0]->key, "dispatched");
    assert_string_equal(r->metadata[1]->value, "process");
    plimsoll__v1__explain_refusal__free_unpacked(r, NULL);
    json_t *j = decode_ok(&plimsoll__v1__explain_refusal__descriptor, b.data, b.len);
    assert_true(json_equal(j, a));
    json_decref(j);
    json_decref(a);
    pl_buf_free(&b);
}

/* protobuf's merge rules, and a oneof's last member. */
static void test_protobuf_s_rules_for_fields_met_twice(void **state) {
    (void)state;
    /* timeout_ms 5 then 7; snippet{language} then snippet{code}. */
    const uint8_t twice[] = {0x18, 5, 0x18, 7, 0x52, 3, 0x0a, 1, 'j', 0x52, 3, 0x12, 1, 'x'};
    json_t *j = decode_ok(&plimsoll__v1__run_request__descriptor, twice, sizeof(twice));
    assert_json(j, "{\"timeout_ms\":7,\"snippet\":{\"language\":\"j\",\"code\":\"x\"}}");
    json_decref(j);
    /* A scalar set, then set to its default: unset, as proto3 has it. */
    const uint8_t back_to_zero[] = {0x18, 5, 0x0a, 1, 'p', 0x18, 0, 0x0a, 0};
    j = decode_ok(&plimsoll__v1__run_request__descriptor, back_to_zero, sizeof(back_to_zero));
    assert_json(j, "{}");
    json_decref(j);
    /* module, then snippet: the oneof keeps the snippet alone. */
    const uint8_t oneof[] = {0x62, 0, 0x52, 0};
    j = decode_ok(&plimsoll__v1__run_request__descriptor, oneof, sizeof(oneof));
    assert_json(j, "{\"snippet\":{}}");
    json_decref(j);
    /* Repeated strings append; packed is for numbers only. */
    const uint8_t argv[] = {0x12, 1, 'a', 0x12, 0, 0x12, 1, 'c'};
    j = decode_ok(&plimsoll__v1__step__descriptor, argv, sizeof(argv));
    assert_json(j, "{\"argv\":[\"a\",\"\",\"c\"]}");
    json_decref(j);
    /* A negative int32 in ten bytes, and one truncated to 32 bits. */
    const uint8_t neg[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    j = decode_ok(&plimsoll__v1__run_response__descriptor, neg, sizeof(neg));
    assert_json(j, "{\"exit_code\":-1}");
    json_decref(j);
}

static void test_bytes_it_refuses(void **state) {
    (void)state;
    const ProtobufCMessageDescriptor *rr = &plimsoll__v1__run_request__descriptor;
    const uint8_t unknown[] = {0xa8, 0x06, 1}; /* field 101 */
    decode_refused(rr, unknown, sizeof(unknown),
                   "field number 101 is not in plimsoll.v1.RunRequest");
    const uint8_t unknown_inner[] = {0x52, 2, 0x48, 1}; /* snippet.9 */
    decode_refused(rr, unknown_inner, sizeof(unknown_inner), "not in plimsoll.v1.Snippet");
    const uint8_t wire_str_as_varint[] = {0x08, 1}; /* minimum_isolation as a varint */
    decode_refused(rr, wire_str_as_varint, sizeof(wire_str_as_varint), "a varint for a field");
    const uint8_t wire_i64[] = {0x19, 1, 2, 3, 4, 5, 6, 7, 8};
    decode_refused(rr, wire_i64, sizeof(wire_i64), "a wire type");
    const uint8_t group[] = {0x0b, 0x0c};
    decode_refused(rr, group, sizeof(group), "a wire type");
    const uint8_t not_utf8[] = {0x0a, 2, 0xc3, 0x28};
    decode_refused(rr, not_utf8, sizeof(not_utf8), "not UTF-8");
    const uint8_t past_end[] = {0x0a, 5, 'a'};
    decode_refused(rr, past_end, sizeof(past_end), "a length past the end");
    const uint8_t huge_len[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f};
    decode_refused(rr, huge_len, sizeof(huge_len), "a length past the end");
    const uint8_t cut_varint[] = {0x18, 0x80};
    decode_refused(rr, cut_varint, sizeof(cut_varint), "a broken varint");
    const uint8_t long_varint[] = {0x18, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    decode_refused(rr, long_varint, sizeof(long_varint), "a broken varint");
    const uint8_t over_64[] = {0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    decode_refused(rr, over_64, sizeof(over_64), "a broken varint");
    const uint8_t field_zero[] = {0x02, 0};
    decode_refused(rr, field_zero, sizeof(field_zero), "field number 0");
    const uint8_t key_past_32[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    decode_refused(rr, key_past_32, sizeof(key_past_32), "a broken field key");
    const uint8_t len_for_bool[] = {0x0a, 0}; /* OperationSupport.supported (a bool) as bytes */
    decode_refused(&plimsoll__v1__operation_support__descriptor, len_for_bool, sizeof(len_for_bool),
                   "length-delimited value for a scalar");
}

/* A project body (RunRequest.project = 11) of n copies of one Project
 * field entry (its bytes in entry), whose length fits two varint bytes. */
static uint8_t *project_of(const uint8_t *entry, size_t elen, size_t n, size_t *ret_len) {
    size_t inner = elen * n;
    uint8_t *p = malloc(inner + 8);
    assert_non_null(p);
    size_t o = 0;
    p[o++] = 0x5a; /* field 11, length-delimited */
    size_t v = inner;
    do {
        p[o++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    for (size_t i = 0; i < n; i++, o += elen)
        memcpy(p + o, entry, elen);
    *ret_len = o;
    return p;
}

/* The decoder counts what it builds as pl_json_measure counts the JSON
 * text it becomes: a body exactly at PL_JSON_MAX_ELEMENTS decodes, one
 * element more is refused while decoding (before it is built), and so is
 * a 4 MiB body of empty repeated entries, which would otherwise build a
 * tree of two million objects. */
static void test_the_json_bounds_hold_while_decoding(void **state) {
    (void)state;
    const ProtobufCMessageDescriptor *rr = &plimsoll__v1__run_request__descriptor;
    const uint8_t empty_file[] = {0x0a, 0x00}; /* Project.files: {} */
    /* {"project":{"files":[{}, ...]}}: 1 + 2 ("project" and its object) +
     * 2 ("files" and its array) + one per entry. */
    size_t fits = PL_JSON_MAX_ELEMENTS - 5, len;
    uint8_t *body = project_of(empty_file, sizeof(empty_file), fits, &len);
    json_t *j = decode_ok(rr, body, len);
    char *text = json_dumps(j, JSON_COMPACT);
    struct pl_json_shape shape;
    pl_json_measure(text, strlen(text), SIZE_MAX, SIZE_MAX, &shape);
    assert_int_equal(shape.elements, PL_JSON_MAX_ELEMENTS);
    free(text);
    json_decref(j);
    free(body);
    body = project_of(empty_file, sizeof(empty_file), fits + 1, &len);
    decode_refused(rr, body, len, "PL_JSON_MAX_ELEMENTS");
    free(body);
    body = project_of(empty_file, sizeof(empty_file), (4u << 20) / 2, &len);
    decode_refused(rr, body, len, "PL_JSON_MAX_ELEMENTS");
    free(body);

    /* Many small strings: Step.argv entries of one byte each, in steps. */
    const uint8_t step_args[] = {0x12, 0x06, 0x12, 0x01, 'a', 0x12, 0x01, 'b'};
    body = project_of(step_args, sizeof(step_args), 1u << 16, &len);
    decode_refused(rr, body, len, "PL_JSON_MAX_ELEMENTS");
    free(body);

    /* Map entries (no request has a map; ExplainRefusal.metadata does):
     * a key and a value each, "metadata" and its object once. */
    const uint8_t entry[] = {0x2a, 0x06, 0x0a, 0x01, 'k', 0x12, 0x01, 'v'};
    uint8_t *many = malloc(sizeof(entry) * 5000);
    assert_non_null(many);
    for (size_t i = 0; i < 5000; i++)
        memcpy(many + i * sizeof(entry), entry, sizeof(entry));
    decode_refused(&plimsoll__v1__explain_refusal__descriptor, many, sizeof(entry) * 4095,
                   "PL_JSON_MAX_ELEMENTS");
    j = decode_ok(&plimsoll__v1__explain_refusal__descriptor, many, sizeof(entry) * 4094);
    assert_json(j, "{\"metadata\":{\"k\":\"v\"}}");
    json_decref(j);
    free(many);

    /* The depth bound is checked as the elements are, but no message of
     * the contract nests in itself, so no binary body reaches it: the
     * deepest request is 5 levels (RunInSession's run.project.files[]). */
}

/* bytes (OutputChunk's) are base64 in JSON, as proto3 has them; any byte
 * goes, an empty one is unset; a string that is not base64 is no answer. */
static void test_bytes_fields_both_ways(void **state) {
    (void)state;
    const ProtobufCMessageDescriptor *oc = &plimsoll__v1__output_chunk__descriptor;
    const uint8_t raw[] = {0x0a, 3, 0xff, 0x00, 'a', 0x12, 0, 0x18, 2};
    json_t *j = decode_ok(oc, raw, sizeof(raw));
    assert_json(j, "{\"stdout\":\"/wBh\",\"step\":2}");
    struct pl_buf b = {0};
    struct pl_error err = {0};
    assert_int_equal(pl_codec_encode(oc, j, &b, &err), 0);
    const uint8_t want[] = {0x0a, 3, 0xff, 0x00, 'a', 0x18, 2};
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));
    pl_buf_free(&b);
    json_decref(j);
    json_t *bad = json_pack("{s:s}", "stdout", "not base64!");
    assert_int_equal(pl_codec_encode(oc, bad, &b, &err), -1);
    assert_int_equal(err.reason, PL_REASON_INTERNAL);
    pl_buf_free(&b);
    json_decref(bad);
}

static void test_answers_outside_the_contract_are_errors(void **state) {
    (void)state;
    const char *bad[] = {
        "{\"exit_code\":1,\"surprise\":true}",  /* not a field */
        "{\"exit_code\":\"1\"}",                /* a string for int32 */
        "{\"exit_code\":2147483648}",           /* past int32 */
        "{\"duration_ms\":-1}",                 /* uint32 below 0 */
        "{\"duration_ms\":4294967296}",         /* past uint32 */
        "{\"timed_out\":1}",                    /* a number for bool */
        "{\"steps\":{}}",                       /* an object for repeated */
        "{\"steps\":[1]}",                      /* a number for a message */
        "{\"record\":{\"version\":1,\"x\":2}}", /* deep: not a field */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *a = json_loads(bad[i], 0, NULL);
        assert_non_null(a);
        struct pl_buf b = {0};
        struct pl_error err = {0};
        if (pl_codec_encode(&plimsoll__v1__run_response__descriptor, a, &b, &err) == 0)
            fail_msg("encoded %s", bad[i]);
        assert_int_equal(err.reason, PL_REASON_INTERNAL);
        json_decref(a);
        pl_buf_free(&b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_field_of_the_contract_has_a_known_type),
        cmocka_unit_test(test_decodes_what_protobuf_c_packs),
        cmocka_unit_test(test_encodes_what_protobuf_c_reads),
        cmocka_unit_test(test_maps_both_ways),
        cmocka_unit_test(test_bytes_fields_both_ways),
        cmocka_unit_test(test_protobuf_s_rules_for_fields_met_twice),
        cmocka_unit_test(test_bytes_it_refuses),
        cmocka_unit_test(test_the_json_bounds_hold_while_decoding),
        cmocka_unit_test(test_answers_outside_the_contract_are_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
