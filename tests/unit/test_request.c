/* SPDX-License-Identifier: Apache-2.0 */
/* test_request.c: the Run request decoder, each bound at its edge. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/buf.h"
#include "../../src/core/canon.h"
#include "../../src/core/config.h"
#include "../../src/core/request.h"

static const struct pl_request_limits limits = {.max_timeout_ms = 60000, .memory_mb = 256};

static int decode(const char *body, struct pl_run_request *r, struct pl_error *e) {
    memset(e, 0, sizeof(*e));
    return pl_run_request_decode(body, strlen(body), &limits, r, e);
}

static void expect_invalid(const char *body, const char *fragment) {
    struct pl_run_request r;
    struct pl_error e;
    if (decode(body, &r, &e) == 0) {
        pl_run_request_clear(&r);
        fail_msg("accepted: %.200s", body);
    }
    assert_int_equal(e.reason, PL_REASON_INVALID_REQUEST);
    if (!strstr(e.message, fragment))
        fail_msg("message \"%s\" lacks \"%s\"", e.message, fragment);
}

static void test_snippet(void **state) {
    (void)state;
    struct pl_run_request r;
    struct pl_error e;
    assert_int_equal(decode("{\"snippet\":{\"language\":\"javascript\",\"code\":\"1\","
                            "\"stdin\":\"in\"},\"minimum_isolation\":\"process\","
                            "\"timeout_ms\":500}",
                            &r, &e),
                     0);
    assert_int_equal(r.kind, PL_PAYLOAD_SNIPPET);
    assert_string_equal(r.snippet.language, "javascript");
    assert_int_equal(r.snippet.code_len, 1);
    assert_int_equal(r.snippet.stdin_len, 2);
    assert_true(r.has_floor);
    assert_int_equal(r.floor, PL_TIER_PROCESS);
    assert_int_equal(r.timeout_ms, 500);
    pl_run_request_clear(&r);
}

static void test_camel_case_and_canonical(void **state) {
    (void)state;
    struct pl_run_request a, b;
    struct pl_error e;
    assert_int_equal(decode("{\"minimumIsolation\":\"kernel\",\"timeoutMs\":\"250\","
                            "\"snippet\":{\"code\":\"x\",\"language\":\"python\"}}",
                            &a, &e),
                     0);
    assert_int_equal(decode("{\"snippet\":{\"language\":\"python\",\"code\":\"x\"},"
                            "\"timeout_ms\":250,\"minimum_isolation\":\"kernel\","
                            "\"grant_profile\":null}",
                            &b, &e),
                     0);
    struct pl_buf ca = {0}, cb = {0};
    assert_int_equal(pl_canon_dump(a.canonical, &ca), 0);
    assert_int_equal(pl_canon_dump(b.canonical, &cb), 0);
    assert_string_equal(ca.data, cb.data);
    assert_string_equal(ca.data, "{\"minimum_isolation\":\"kernel\",\"snippet\":{\"code\":\"x\","
                                 "\"language\":\"python\"},\"timeout_ms\":250}");
    pl_buf_free(&ca);
    pl_buf_free(&cb);
    pl_run_request_clear(&a);
    pl_run_request_clear(&b);
}

static void test_payload_count(void **state) {
    (void)state;
    expect_invalid("{}", "exactly one");
    expect_invalid("{\"snippet\":{\"language\":\"python\",\"code\":\"1\"},"
                   "\"module\":{\"wasm_base64\":\"AGFzbQEAAAA=\"}}",
                   "exactly one");
    expect_invalid("{\"cell\":{\"language\":\"python\",\"code\":\"1\"}}", "session");
}

static void test_snippet_size_edge(void **state) {
    (void)state;
    size_t n = PL_SNIPPET_MAX_BYTES;
    char *code = malloc(n + 2);
    memset(code, 'x', n + 1);
    code[n] = '\0';
    struct pl_buf b = {0};
    pl_buf_printf(&b, "{\"snippet\":{\"language\":\"javascript\",\"code\":\"%s\"}}", code);
    struct pl_run_request r;
    struct pl_error e;
    assert_int_equal(decode(b.data, &r, &e), 0); /* exactly 256 KiB: accepted */
    pl_run_request_clear(&r);
    pl_buf_free(&b);
    code[n] = 'x';
    code[n + 1] = '\0';
    pl_buf_printf(&b, "{\"snippet\":{\"language\":\"javascript\",\"code\":\"%s\"}}", code);
    expect_invalid(b.data, "exceeds the limit of 262144 bytes");
    pl_buf_free(&b);
    free(code);
}

static void test_field_errors(void **state) {
    (void)state;
    expect_invalid("not json", "not valid JSON");
    expect_invalid("[]", "must be a JSON object");
    expect_invalid("{\"snippet\":{\"language\":\"ruby\",\"code\":\"1\"}}", "snippet.language");
    expect_invalid("{\"snippet\":{\"language\":\"python\"}}", "snippet.code: required");
    expect_invalid("{\"snippet\":{\"language\":\"python\",\"code\":1}}", "snippet.code: must be");
    expect_invalid("{\"snippet\":{\"language\":\"python\",\"code\":\"1\",\"extra\":1}}",
                   "snippet.extra: unknown field");
    expect_invalid("{\"bogus\":1,\"snippet\":{\"language\":\"python\",\"code\":\"1\"}}",
                   "bogus: unknown field");
    expect_invalid("{\"minimum_isolation\":\"hard\",\"snippet\":{\"language\":\"python\","
                   "\"code\":\"1\"}}",
                   "minimum_isolation");
    expect_invalid("{\"timeout_ms\":60001,\"snippet\":{\"language\":\"python\",\"code\":\"1\"}}",
                   "timeout_ms");
    expect_invalid("{\"timeout_ms\":-1,\"snippet\":{\"language\":\"python\",\"code\":\"1\"}}",
                   "timeout_ms");
    expect_invalid("{\"timeout_ms\":1.5,\"snippet\":{\"language\":\"python\",\"code\":\"1\"}}",
                   "timeout_ms");
    expect_invalid("{\"memory_mb\":257,\"snippet\":{\"language\":\"python\",\"code\":\"1\"}}",
                   "memory_mb");
    expect_invalid("{\"timeout_ms\":1,\"timeoutMs\":2,\"snippet\":{\"language\":\"python\","
                   "\"code\":\"1\"}}",
                   "given twice");
    expect_invalid("{\"snippet\":{\"language\":\"python\",\"code\":\"1\"},"
                   "\"snippet\":{\"language\":\"python\",\"code\":\"2\"}}",
                   "not valid JSON");
    expect_invalid("{\"grant\":{\"routes\":[]},\"snippet\":{\"language\":\"python\","
                   "\"code\":\"1\"}}",
                   "sent in full");
}

static void test_timeout_edge(void **state) {
    (void)state;
    struct pl_run_request r;
    struct pl_error e;
    assert_int_equal(decode("{\"timeout_ms\":60000,\"snippet\":{\"language\":\"python\","
                            "\"code\":\"1\"}}",
                            &r, &e),
                     0);
    pl_run_request_clear(&r);
}

static void test_project(void **state) {
    (void)state;
    struct pl_run_request r;
    struct pl_error e;
    assert_int_equal(
        decode("{\"project\":{\"files\":[{\"path\":\"src/a.py\",\"content\":\"print(1)\"},"
               "{\"path\":\"b.bin\",\"content_base64\":\"AAEC\"}],"
               "\"steps\":[{\"name\":\"run\",\"argv\":[\"python3\",\"src/a.py\"]},"
               "{\"argv\":[\"true\"]}]}}",
               &r, &e),
        0);
    assert_int_equal(r.kind, PL_PAYLOAD_PROJECT);
    assert_int_equal(r.project.nfiles, 2);
    assert_int_equal(r.project.files[1].len, 3);
    assert_int_equal(r.project.files[1].content[2], 2);
    assert_int_equal(r.project.nsteps, 2);
    assert_string_equal(r.project.steps[1].name, "step-2");
    assert_int_equal(r.project.steps[0].argc, 2);
    pl_run_request_clear(&r);

    expect_invalid("{\"project\":{\"steps\":[]}}", "project.steps");
    expect_invalid("{\"project\":{\"steps\":[{\"argv\":[]}]}}", "argv: needs at least 1");
    const char *bad_paths[] = {"/etc/passwd", "../x", "a/../../x", "a//b", "a/", ".", "a/./b", ""};
    for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
        struct pl_buf b = {0};
        pl_buf_printf(&b,
                      "{\"project\":{\"files\":[{\"path\":\"%s\",\"content\":\"\"}],"
                      "\"steps\":[{\"argv\":[\"true\"]}]}}",
                      bad_paths[i]);
        expect_invalid(b.data, "files[0].path");
        pl_buf_free(&b);
    }
    expect_invalid("{\"project\":{\"files\":[{\"path\":\"a\",\"content\":\"\"},"
                   "{\"path\":\"a\",\"content\":\"\"}],\"steps\":[{\"argv\":[\"true\"]}]}}",
                   "duplicate");
    expect_invalid("{\"project\":{\"files\":[{\"path\":\"a\",\"content\":\"x\","
                   "\"content_base64\":\"eA==\"}],\"steps\":[{\"argv\":[\"true\"]}]}}",
                   "not both");
}

static void test_project_count_edges(void **state) {
    (void)state;
    struct pl_buf b = {0};
    pl_buf_puts(&b, "{\"project\":{\"steps\":[");
    for (unsigned i = 0; i < PL_PROJECT_MAX_STEPS; i++)
        pl_buf_printf(&b, "%s{\"argv\":[\"true\"]}", i ? "," : "");
    pl_buf_puts(&b, "]}}");
    struct pl_run_request r;
    struct pl_error e;
    assert_int_equal(decode(b.data, &r, &e), 0);
    pl_run_request_clear(&r);
    b.len -= 3;
    pl_buf_puts(&b, ",{\"argv\":[\"true\"]}]}}");
    expect_invalid(b.data, "project.steps");
    pl_buf_free(&b);

    pl_buf_puts(&b, "{\"project\":{\"steps\":[{\"argv\":[\"true\"]}],\"files\":[");
    for (unsigned i = 0; i <= PL_PROJECT_MAX_FILES; i++)
        pl_buf_printf(&b, "%s{\"path\":\"f%u\",\"content\":\"\"}", i ? "," : "", i);
    pl_buf_puts(&b, "]}}");
    expect_invalid(b.data, "more than 256 files");
    pl_buf_free(&b);
}

static void test_module(void **state) {
    (void)state;
    struct pl_run_request r;
    struct pl_error e;
    assert_int_equal(decode("{\"module\":{\"wasm_base64\":\"AGFzbQEAAAA=\",\"args\":[\"a\"],"
                            "\"stdin\":\"x\"}}",
                            &r, &e),
                     0);
    assert_int_equal(r.module.wasm_len, 8);
    assert_int_equal(r.module.nargs, 1);
    pl_run_request_clear(&r);
    expect_invalid("{\"module\":{\"wasm_base64\":\"aGVsbG8gd29ybGQ=\"}}", "not a WebAssembly");
    expect_invalid("{\"module\":{\"wasm_base64\":\"***\"}}", "not base64");
    expect_invalid("{\"module\":{}}", "module.wasm_base64: required");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snippet),       cmocka_unit_test(test_camel_case_and_canonical),
        cmocka_unit_test(test_payload_count), cmocka_unit_test(test_snippet_size_edge),
        cmocka_unit_test(test_field_errors),  cmocka_unit_test(test_timeout_edge),
        cmocka_unit_test(test_project),       cmocka_unit_test(test_project_count_edges),
        cmocka_unit_test(test_module),
    };
    return cmocka_run_group_tests_name("request", tests, NULL, NULL);
}
