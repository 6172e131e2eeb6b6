/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_errors.c: every row of the error tables, the reasons' against the
 * shared vector file tests/vectors/reasons.json.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/errors.h"
#include "../../src/server/api.h"

/* One reason as "NAME code http dispatched=… channel \"meaning\"", so a
 * failed comparison prints both sides whole. */
static void daemon_row(enum pl_reason r, char *out, size_t n) {
    enum pl_code c = pl_reason_code(r);
    bool d = pl_reason_dispatched(r);
    snprintf(out, n, "%s %s %d dispatched=%s %s \"%s\"", pl_reason_name(r), pl_code_name(c),
             pl_code_http_status(c), d ? "true" : "false", d ? "infrastructure" : "refusal",
             pl_reason_doc(r));
}

static const char *str_or(const json_t *v, const char *missing) {
    return json_is_string(v) ? json_string_value(v) : missing;
}

static void file_row(const json_t *e, char *out, size_t n) {
    const json_t *d = json_object_get(e, "dispatched");
    const json_t *http = json_object_get(e, "http_status");
    snprintf(out, n, "%s %s %d dispatched=%s %s \"%s\"",
             str_or(json_object_get(e, "reason"), "(no reason)"),
             str_or(json_object_get(e, "code"), "(no code)"),
             json_is_integer(http) ? (int)json_integer_value(http) : -1,
             json_is_boolean(d) ? (json_is_true(d) ? "true" : "false") : "(none)",
             str_or(json_object_get(e, "channel"), "(no channel)"),
             str_or(json_object_get(e, "meaning"), "(no meaning)"));
}

/* tests/vectors/reasons.json, which tests/vectors/make_vectors.py reads out
 * of this very table and every client's suite checks its own table
 * against: the two agree entry for entry, both ways, so the file is never
 * stale and no reason is missing on either side. */
static void test_reasons_match_the_vector_file(void **state) {
    (void)state;
    const char *path = PL_SOURCE_ROOT "/tests/vectors/reasons.json";
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc)
        fail_msg("%s: %s", path, je.text);
    json_t *list = json_object_get(doc, "reasons");
    assert_true(json_is_array(list));
    char want[512], got[512];
    size_t i;
    json_t *e;
    /* the daemon's table -> the file */
    for (int r = PL_REASON_NONE + 1; r < PL_REASON__COUNT; r++) {
        assert_true(strlen(pl_reason_doc((enum pl_reason)r)) > 0);
        daemon_row((enum pl_reason)r, want, sizeof(want));
        snprintf(got, sizeof(got), "%s is not in the file (run tests/vectors/make_vectors.py)",
                 pl_reason_name((enum pl_reason)r));
        json_array_foreach(list, i, e) {
            if (strcmp(str_or(json_object_get(e, "reason"), ""),
                       pl_reason_name((enum pl_reason)r)) == 0) {
                file_row(e, got, sizeof(got));
                break;
            }
        }
        assert_string_equal(got, want);
    }
    /* the file -> the daemon's table */
    json_array_foreach(list, i, e) {
        file_row(e, got, sizeof(got));
        snprintf(want, sizeof(want), "a reason of src/core/errors.h");
        for (int r = PL_REASON_NONE + 1; r < PL_REASON__COUNT; r++)
            if (strcmp(str_or(json_object_get(e, "reason"), ""),
                       pl_reason_name((enum pl_reason)r)) == 0)
                daemon_row((enum pl_reason)r, want, sizeof(want));
        assert_string_equal(got, want);
    }
    assert_int_equal(json_array_size(list), PL_REASON__COUNT - 1); /* no reason twice */
    json_decref(doc);
}

static void test_connect_codes_round_trip(void **state) {
    (void)state;
    for (unsigned i = 0; i < PL_CODE__COUNT; i++) {
        enum pl_code back;
        assert_int_equal(pl_code_from_name(pl_code_name((enum pl_code)i), &back), 0);
        assert_int_equal(back, i);
    }
    enum pl_code c;
    assert_int_equal(pl_code_from_name("nope", &c), -1);
    /* The HTTP statuses the Connect protocol assigns. */
    assert_int_equal(pl_code_http_status(PL_CODE_CANCELED), 499);
    assert_int_equal(pl_code_http_status(PL_CODE_DEADLINE_EXCEEDED), 504);
    assert_int_equal(pl_code_http_status(PL_CODE_ALREADY_EXISTS), 409);
    assert_int_equal(pl_code_http_status(PL_CODE_DATA_LOSS), 500);
}

static void test_error_set(void **state) {
    (void)state;
    struct pl_error e = {0};
    assert_int_equal(pl_error_set(&e, PL_REASON_AT_CAPACITY, "x=%d", 3), -1);
    assert_int_equal(e.reason, PL_REASON_AT_CAPACITY);
    assert_string_equal(e.message, "x=3");
    assert_int_equal(pl_error_set(NULL, PL_REASON_AT_CAPACITY, "ignored"), -1);
}

/* A message may be put in its own new message (a prefix added). */
static void test_error_set_from_its_own_message(void **state) {
    (void)state;
    struct pl_error e = {0};
    pl_error_set(&e, PL_REASON_INTERNAL, "cannot make the directory");
    pl_error_set(&e, PL_REASON_INTERNAL, "SANDBOX_DOCKER_RUN_DIR: %s", e.message);
    assert_string_equal(e.message, "SANDBOX_DOCKER_RUN_DIR: cannot make the directory");
    pl_error_errno(&e, PL_REASON_INTERNAL, ENOENT, "again: %s", e.message);
    assert_string_equal(e.message, "again: SANDBOX_DOCKER_RUN_DIR: cannot make the directory: "
                                   "No such file or directory");
}

/* google.rpc.ErrorInfo{reason:"AT_CAPACITY", domain:"plimsoll",
 * metadata:{"dispatched":"false"}} encoded by hand from the proto wire rules. */
static void test_error_info_bytes(void **state) {
    (void)state;
    const char *k[] = {"dispatched"};
    const char *v[] = {"false"};
    unsigned char *pb = NULL;
    size_t n = 0;
    assert_int_equal(pl_error_info_encode("AT_CAPACITY", "plimsoll", k, v, 1, &pb, &n), 0);
    static const unsigned char want[] = {
        0x0a, 11,  'A', 'T', '_', 'C', 'A', 'P',  'A',  'C', 'I',  'T', 'Y', 0x12, 8,
        'p',  'l', 'i', 'm', 's', 'o', 'l', 'l',  0x1a, 19,  0x0a, 10,  'd', 'i',  's',
        'p',  'a', 't', 'c', 'h', 'e', 'd', 0x12, 5,    'f', 'a',  'l', 's', 'e'};
    assert_int_equal(n, sizeof(want));
    assert_memory_equal(pb, want, sizeof(want));
    free(pb);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reasons_match_the_vector_file),
        cmocka_unit_test(test_connect_codes_round_trip),
        cmocka_unit_test(test_error_set),
        cmocka_unit_test(test_error_set_from_its_own_message),
        cmocka_unit_test(test_error_info_bytes),
    };
    return cmocka_run_group_tests_name("errors", tests, NULL, NULL);
}
