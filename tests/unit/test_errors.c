/* SPDX-License-Identifier: Apache-2.0 */
/* test_errors.c: every row of the error tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/errors.h"
#include "../../src/server/api.h"

/* The contract of issue #2, row by row: reason -> Connect code -> HTTP. */
static const struct {
    enum pl_reason reason;
    const char *name;
    const char *code;
    int http;
    bool dispatched;
} expected[] = {
    {PL_REASON_INVALID_REQUEST, "INVALID_REQUEST", "invalid_argument", 400, false},
    {PL_REASON_UNAUTHENTICATED, "UNAUTHENTICATED", "unauthenticated", 401, false},
    {PL_REASON_DISABLED, "DISABLED", "failed_precondition", 400, false},
    {PL_REASON_INSUFFICIENT_ISOLATION, "INSUFFICIENT_ISOLATION", "failed_precondition", 400, false},
    {PL_REASON_UNSUPPORTED, "UNSUPPORTED", "unimplemented", 501, false},
    {PL_REASON_CALLER_NOT_ALLOWED, "CALLER_NOT_ALLOWED", "permission_denied", 403, false},
    {PL_REASON_NOT_READY, "NOT_READY", "unavailable", 503, false},
    {PL_REASON_SHUTTING_DOWN, "SHUTTING_DOWN", "unavailable", 503, false},
    {PL_REASON_RATE_LIMITED, "RATE_LIMITED", "resource_exhausted", 429, false},
    {PL_REASON_AT_CAPACITY, "AT_CAPACITY", "resource_exhausted", 429, false},
    {PL_REASON_SESSION_ENDED, "SESSION_ENDED", "failed_precondition", 400, false},
    {PL_REASON_NOT_FOUND, "NOT_FOUND", "not_found", 404, false},
    {PL_REASON_INTERNAL, "INTERNAL", "internal", 500, true},
};

static void test_every_reason_row(void **state) {
    (void)state;
    size_t n = sizeof(expected) / sizeof(expected[0]);
    assert_int_equal(n, PL_REASON__COUNT - 1); /* a new reason needs a row here */
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(pl_reason_name(expected[i].reason), expected[i].name);
        enum pl_code c = pl_reason_code(expected[i].reason);
        assert_string_equal(pl_code_name(c), expected[i].code);
        assert_int_equal(pl_code_http_status(c), expected[i].http);
        assert_int_equal(pl_reason_dispatched(expected[i].reason), expected[i].dispatched);
        assert_true(strlen(pl_reason_doc(expected[i].reason)) > 0);
    }
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
        cmocka_unit_test(test_every_reason_row),
        cmocka_unit_test(test_connect_codes_round_trip),
        cmocka_unit_test(test_error_set),
        cmocka_unit_test(test_error_info_bytes),
    };
    return cmocka_run_group_tests_name("errors", tests, NULL, NULL);
}
