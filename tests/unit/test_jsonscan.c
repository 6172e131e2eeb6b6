/* SPDX-License-Identifier: Apache-2.0 */
/* test_jsonscan.c: the JSON shape pass (elements, depth) and its bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/buf.h"
#include "../../src/core/config.h"
#include "../../src/core/jsonscan.h"
#include "../../src/core/request.h"

static struct pl_json_shape measure(const char *s) {
    struct pl_json_shape sh;
    pl_json_measure(s, strlen(s), SIZE_MAX, SIZE_MAX, &sh);
    return sh;
}

#define assert_shape(text, want_elements, want_depth)                                              \
    do {                                                                                           \
        struct pl_json_shape sh_ = measure(text);                                                  \
        assert_int_equal(sh_.elements, want_elements);                                             \
        assert_int_equal(sh_.depth, want_depth);                                                   \
    } while (0)

static void test_counts(void **state) {
    (void)state;
    assert_shape("", 0, 0);
    assert_shape("  \n", 0, 0);
    assert_shape("1", 1, 0);
    assert_shape("\"a\"", 1, 0);
    assert_shape("[]", 1, 1);
    assert_shape("{}", 1, 1);
    assert_shape("[1, -2.5e+3, true, false, null]", 6, 1);
    /* object, key a, array, 1, 2, object, key b, null */
    assert_shape("{\"a\":[1,2,{\"b\":null}]}", 8, 3);
    /* Brackets, quotes and backslashes inside strings are text. */
    assert_shape("[\"a\\\"]\", \"\\\\\", \"[{\", \"\\u005b\"]", 5, 1);
    assert_shape("{\"[[[\":\"]]]\"}", 3, 1);
    /* Depth is the deepest level, not the last. */
    assert_shape("[[[]],[]]", 4, 3);
}

static void test_never_reads_past_the_end(void **state) {
    (void)state;
    /* Each is cut in a place that ends a token early; run under ASan. */
    static const char *const cut[] = {"\"abc\\", "\"abc", "[1,",           "[\"",
                                      "tru",     "\\",    "{\"a\":\"\\u00"};
    for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
        size_t n = strlen(cut[i]);
        char *exact = malloc(n); /* no NUL after the text */
        memcpy(exact, cut[i], n);
        struct pl_json_shape sh;
        pl_json_measure(exact, n, SIZE_MAX, SIZE_MAX, &sh);
        free(exact);
    }
}

/* n levels of arrays around a 0. */
static char *nested(size_t n) {
    char *s = malloc(2 * n + 2);
    memset(s, '[', n);
    s[n] = '0';
    memset(s + n + 1, ']', n);
    s[2 * n + 1] = '\0';
    return s;
}

/* An array of n zeros: n + 1 elements. */
static char *zeros(size_t n) {
    struct pl_buf b = {0};
    pl_buf_puts(&b, "[");
    for (size_t i = 0; i < n; i++)
        pl_buf_puts(&b, i ? ",0" : "0");
    pl_buf_puts(&b, "]");
    return b.data;
}

static void test_depth_edge(void **state) {
    (void)state;
    struct pl_error err = {0};
    char *at = nested(PL_JSON_MAX_DEPTH);
    assert_int_equal(pl_json_check_bounds(at, strlen(at), &err), 0);
    char *past = nested(PL_JSON_MAX_DEPTH + 1);
    assert_int_equal(pl_json_check_bounds(past, strlen(past), &err), -1);
    assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
    assert_non_null(strstr(err.message, "PL_JSON_MAX_DEPTH"));
    /* The pass stops at the first level past the bound. */
    char *deep = nested(100000);
    struct pl_json_shape sh;
    pl_json_measure(deep, strlen(deep), SIZE_MAX, PL_JSON_MAX_DEPTH, &sh);
    assert_int_equal(sh.depth, PL_JSON_MAX_DEPTH + 1);
    free(at);
    free(past);
    free(deep);
}

static void test_element_edge(void **state) {
    (void)state;
    struct pl_error err = {0};
    char *at = zeros(PL_JSON_MAX_ELEMENTS - 1);
    assert_int_equal(measure(at).elements, PL_JSON_MAX_ELEMENTS);
    assert_int_equal(pl_json_check_bounds(at, strlen(at), &err), 0);
    char *past = zeros(PL_JSON_MAX_ELEMENTS);
    assert_int_equal(pl_json_check_bounds(past, strlen(past), &err), -1);
    assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
    assert_non_null(strstr(err.message, "PL_JSON_MAX_ELEMENTS"));
    free(at);
    free(past);
}

/*
 * The largest legal request, by element count: RunInSession (session id in
 * both spellings) around a project with the most files and steps, every
 * optional field present, in both spellings where it has two, as null.
 * The bounds' comment in jsonscan.h quotes its counts.
 */
static void largest(struct pl_buf *b, bool in_session) {
    if (in_session)
        pl_buf_puts(b, "{\"session_id\":\"s\",\"sessionId\":\"s\",\"run\":");
    pl_buf_puts(b, "{\"minimum_isolation\":null,\"minimumIsolation\":null,\"grant_profile\":null,"
                   "\"grantProfile\":null,\"timeout_ms\":null,\"timeoutMs\":null,"
                   "\"memory_mb\":null,\"memoryMb\":null,\"snippet\":null,\"module\":null,"
                   "\"cell\":null,\"grant\":null,\"grants\":null,\"project\":{\"files\":[");
    for (unsigned i = 0; i < PL_PROJECT_MAX_FILES; i++)
        pl_buf_printf(b,
                      "%s{\"path\":\"f%u\",\"content\":\"x\",\"content_base64\":null,"
                      "\"contentBase64\":null}",
                      i ? "," : "", i);
    pl_buf_puts(b, "],\"steps\":[");
    for (unsigned i = 0; i < PL_PROJECT_MAX_STEPS; i++) {
        pl_buf_printf(b, "%s{\"name\":\"s%u\",\"argv\":[", i ? "," : "", i);
        for (unsigned a = 0; a < PL_ARGV_MAX; a++)
            pl_buf_puts(b, a ? ",\"a\"" : "\"a\"");
        pl_buf_puts(b, "]}");
    }
    pl_buf_puts(b, "]}}");
    if (in_session)
        pl_buf_puts(b, "}");
}

static void test_largest_legal_request_fits(void **state) {
    (void)state;
    struct pl_buf b = {0};
    largest(&b, true);
    struct pl_json_shape sh = measure(b.data);
    assert_int_equal(sh.elements, 4551);
    assert_int_equal(sh.depth, 6);
    assert_true(sh.elements <= PL_JSON_MAX_ELEMENTS && sh.depth <= PL_JSON_MAX_DEPTH);
    pl_buf_free(&b);
    /* The same request as a plain Run decodes: it is legal. */
    largest(&b, false);
    struct pl_request_limits lim = {.max_timeout_ms = 60000, .memory_mb = 256};
    struct pl_run_request req;
    struct pl_error err = {0};
    if (pl_run_request_decode(b.data, b.len, &lim, &req, &err) != 0)
        fail_msg("%s", err.message);
    assert_int_equal(req.project.nfiles, PL_PROJECT_MAX_FILES);
    assert_int_equal(req.project.nsteps, PL_PROJECT_MAX_STEPS);
    pl_run_request_clear(&req);
    pl_buf_free(&b);
}

/* The decoder measures first: a deep or wide body never reaches jansson. */
static void test_decoder_refuses_by_shape(void **state) {
    (void)state;
    struct pl_request_limits lim = {.max_timeout_ms = 60000, .memory_mb = 256};
    struct pl_run_request req;
    struct pl_error err = {0};
    /* Nine levels, and not even valid JSON: the shape is refused first. */
    const char *deep = "{\"project\":{\"files\":[[[[[[[";
    assert_int_equal(pl_run_request_decode(deep, strlen(deep), &lim, &req, &err), -1);
    assert_non_null(strstr(err.message, "PL_JSON_MAX_DEPTH"));
    char *wide = zeros(100000);
    assert_int_equal(pl_run_request_decode(wide, strlen(wide), &lim, &req, &err), -1);
    assert_non_null(strstr(err.message, "PL_JSON_MAX_ELEMENTS"));
    assert_int_equal(pl_empty_request_decode(wide, strlen(wide), &err), -1);
    assert_non_null(strstr(err.message, "PL_JSON_MAX_ELEMENTS"));
    free(wide);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_never_reads_past_the_end),
        cmocka_unit_test(test_depth_edge),
        cmocka_unit_test(test_element_edge),
        cmocka_unit_test(test_largest_legal_request_fits),
        cmocka_unit_test(test_decoder_refuses_by_shape),
    };
    return cmocka_run_group_tests_name("jsonscan", tests, NULL, NULL);
}
