/* SPDX-License-Identifier: Apache-2.0 */
/* test_record.c: run records against the vectors, and the monotonic end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/canon.h"
#include "../../src/core/record.h"

static int parse_rfc3339(const char *s, struct timespec *ts) {
    struct tm tm = {0};
    const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!rest || rest[0] != '.')
        return -1;
    ts->tv_sec = timegm(&tm);
    ts->tv_nsec = strtol(rest + 1, NULL, 10);
    return 0;
}

static void test_vectors(void **state) {
    (void)state;
    json_error_t jerr;
    json_t *v = json_load_file(PL_SOURCE_ROOT "/tests/vectors/records.json", 0, &jerr);
    if (!v)
        fail_msg("cannot load vectors: %s", jerr.text);
    size_t i;
    json_t *e;
    int valid_seen = 0, invalid_seen = 0;
    json_array_foreach(v, i, e) {
        json_t *rec = json_object_get(e, "record");
        bool valid = json_is_true(json_object_get(e, "valid"));
        assert_int_equal(pl_record_verify(rec) == 0, valid);
        if (!valid) {
            invalid_seen++;
            continue;
        }
        valid_seen++;
        char rq[65], rs[65];
        assert_int_equal(pl_canon_sha256(json_object_get(e, "request"), rq), 0);
        assert_int_equal(pl_canon_sha256(json_object_get(e, "response"), rs), 0);
        assert_string_equal(rq, json_string_value(json_object_get(rec, "request_sha256")));
        assert_string_equal(rs, json_string_value(json_object_get(rec, "response_sha256")));
        /* Rebuild it from its parts: the C builder must give the same digest. */
        struct pl_record_input in = {
            .request_sha256 = rq,
            .response_sha256 = rs,
            .provider = json_string_value(json_object_get(rec, "provider")),
            .isolation = json_string_value(json_object_get(rec, "isolation")),
            .runtime = json_string_value(json_object_get(rec, "runtime")),
            .previous_digest = json_string_value(json_object_get(rec, "previous_digest")),
            .broker_calls = (unsigned)json_integer_value(json_object_get(rec, "broker_calls")),
            .broker_refused = (unsigned)json_integer_value(json_object_get(rec, "broker_refused")),
        };
        struct timespec s, en;
        assert_int_equal(parse_rfc3339(json_string_value(json_object_get(rec, "started_at")), &s),
                         0);
        assert_int_equal(parse_rfc3339(json_string_value(json_object_get(rec, "ended_at")), &en),
                         0);
        in.started = s;
        in.elapsed_ns =
            (uint64_t)(en.tv_sec - s.tv_sec) * 1000000000ull + (uint64_t)(en.tv_nsec - s.tv_nsec);
        json_t *built = pl_record_build(&in);
        assert_non_null(built);
        assert_string_equal(json_string_value(json_object_get(built, "digest")),
                            json_string_value(json_object_get(rec, "digest")));
        assert_string_equal(json_string_value(json_object_get(built, "ended_at")),
                            json_string_value(json_object_get(rec, "ended_at")));
        json_decref(built);
    }
    assert_true(valid_seen >= 2);
    assert_true(invalid_seen >= 1);
    json_decref(v);
}

static void test_end_carries_nanoseconds(void **state) {
    (void)state;
    struct pl_record_input in = {.request_sha256 = "a",
                                 .response_sha256 = "b",
                                 .provider = "p",
                                 .isolation = "none",
                                 .runtime = ""};
    in.started.tv_sec = 1700000000;
    in.started.tv_nsec = 999999999;
    in.elapsed_ns = 1;
    json_t *r = pl_record_build(&in);
    assert_string_equal(json_string_value(json_object_get(r, "started_at")),
                        "2023-11-14T22:13:20.999999999Z");
    assert_string_equal(json_string_value(json_object_get(r, "ended_at")),
                        "2023-11-14T22:13:21.000000000Z");
    assert_string_equal(json_string_value(json_object_get(r, "previous_digest")), "");
    assert_int_equal(pl_record_verify(r), 0);
    json_object_set_new(r, "runtime", json_string("forged"));
    assert_int_equal(pl_record_verify(r), -1);
    json_decref(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_end_carries_nanoseconds),
    };
    return cmocka_run_group_tests_name("record", tests, NULL, NULL);
}
