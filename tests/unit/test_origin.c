/* SPDX-License-Identifier: Apache-2.0 */
/* test_origin.c: PLIMSOLL_CORS_ORIGINS normalised as a browser writes an
 * origin, each refusal by its cause, the exact lookup, and a header's
 * list of names against a set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "../../src/core/config.h"
#include "../../src/core/origin.h"

static void normalises_to(const char *in, const char *want) {
    char out[PL_ORIGIN_MAX_BYTES + 1];
    struct pl_error err = {0};
    if (pl_origin_normalise(in, strlen(in), out, &err) < 0)
        fail_msg("\"%s\" refused: %s", in, err.message);
    assert_string_equal(out, want);
}

static void refused_for(const char *in, const char *why) {
    char out[PL_ORIGIN_MAX_BYTES + 1];
    struct pl_error err = {0};
    assert_int_equal(pl_origin_normalise(in, strlen(in), out, &err), -1);
    if (!strstr(err.message, why))
        fail_msg("\"%s\": \"%s\" does not say \"%s\"", in, err.message, why);
}

static void test_normalised(void **state) {
    (void)state;
    normalises_to("http://127.0.0.2:8000", "http://127.0.0.2:8000");
    normalises_to("HTTPS://App.Example.COM", "https://app.example.com");
    normalises_to("http://localhost:80", "http://localhost");
    normalises_to("https://example.com:443", "https://example.com");
    normalises_to("https://example.com:80", "https://example.com:80");
    normalises_to("http://example.com:00080", "http://example.com");
    normalises_to("http://[0:0:0:0:0:0:0:1]:3000", "http://[::1]:3000");
    normalises_to("http://[2001:DB8::1]", "http://[2001:db8::1]");
    normalises_to("http://xn--bcher-kva.example", "http://xn--bcher-kva.example");
}

static void test_refused(void **state) {
    (void)state;
    refused_for("http://example.com/", "no path");
    refused_for("http://example.com/app", "no path");
    refused_for("http://example.com?x", "no path");
    refused_for("http://user@example.com", "no user name");
    refused_for("*", "wildcard");
    refused_for("https://*.example.com", "wildcard");
    refused_for("null", "null");
    refused_for("NULL", "null");
    refused_for("ftp://example.com", "not http");
    refused_for("example.com", "not http");
    refused_for("http:/example.com", "not http");
    refused_for("http://", "no host");
    refused_for("http://:8000", "no host");
    refused_for("http://a..b", "empty label");
    refused_for("http://example.com.", "empty label");
    refused_for("http://exa mple.com", "letters, digits");
    refused_for("http://b\xc3\xbc"
                "cher.example",
                "letters, digits");
    refused_for("http://example.com:", "a port");
    refused_for("http://example.com:0", "a port");
    refused_for("http://example.com:65536", "a port");
    refused_for("http://example.com:123456", "a port");
    refused_for("http://example.com:8a", "a port");
    refused_for("http://127.1", "IPv4");
    refused_for("http://127.0.0.01", "IPv4");
    refused_for("http://256.0.0.1", "IPv4");
    refused_for("http://0x7f.0.0.1", "IPv4");
    refused_for("http://[::1", "without its ]");
    refused_for("http://[nope]", "not an IPv6");
    refused_for("http://[::ffff:1.2.3.4]", "IPv4 part");
    /* The longest allowed, and one byte past it. */
    char name[PL_ORIGIN_MAX_BYTES + 2];
    memset(name, 'a', sizeof(name));
    memcpy(name, "http://", 7);
    for (size_t i = 7 + 60; i < PL_ORIGIN_MAX_BYTES; i += 61)
        name[i] = '.';
    name[PL_ORIGIN_MAX_BYTES - 1] = 'a';
    name[PL_ORIGIN_MAX_BYTES] = '\0';
    char out[PL_ORIGIN_MAX_BYTES + 1];
    struct pl_error err = {0};
    assert_int_equal(pl_origin_normalise(name, PL_ORIGIN_MAX_BYTES, out, &err), 0);
    name[PL_ORIGIN_MAX_BYTES] = 'a';
    name[PL_ORIGIN_MAX_BYTES + 1] = '\0';
    refused_for(name, "longer than 256 bytes");
}

static void test_list(void **state) {
    (void)state;
    struct pl_origins list;
    struct pl_error err = {0};
    assert_int_equal(
        pl_origins_parse(" http://127.0.0.2:8000 ,\tHTTPS://App.Example.com", &list, &err), 0);
    assert_int_equal(list.n, 2);
    assert_string_equal(list.origin[0], "http://127.0.0.2:8000");
    assert_string_equal(list.origin[1], "https://app.example.com");
    /* Exact, byte for byte: no look-alike is the listed origin. */
    assert_non_null(pl_origins_find(&list, "http://127.0.0.2:8000"));
    assert_non_null(pl_origins_find(&list, "https://app.example.com"));
    const char *lookalikes[] = {"http://127.0.0.2:800",
                                "http://127.0.0.2:80000",
                                "http://127.0.0.2",
                                "https://127.0.0.2:8000",
                                "http://127.0.0.2:8000/",
                                "https://App.Example.com",
                                "https://app.example.com.",
                                "https://app.example.co",
                                "https://app.example.com.evil.example",
                                "https://evilapp.example.com",
                                "null",
                                "",
                                NULL};
    for (const char **l = lookalikes; *l; l++)
        if (pl_origins_find(&list, *l))
            fail_msg("%s matched", *l);
    assert_null(pl_origins_find(&list, NULL));

    struct pl_origins untouched = {.n = 7};
    const char *bad[] = {"http://a,",           ",http://a",
                         "http://a,,http://b",  "http://a, http://A:80",
                         "http://a, http://b/", NULL};
    const char *why[] = {"entry 2 is empty", "entry 1 is empty", "entry 2 is empty",
                         "http://a is listed twice", "entry 2 (\"http://b/\") is no origin"};
    for (size_t i = 0; bad[i]; i++) {
        memset(&err, 0, sizeof(err));
        assert_int_equal(pl_origins_parse(bad[i], &untouched, &err), -1);
        if (strncmp(err.message, "PLIMSOLL_CORS_ORIGINS: ", 23) != 0 ||
            !strstr(err.message, why[i]))
            fail_msg("\"%s\": %s", bad[i], err.message);
        assert_int_equal(untouched.n, 7);
    }

    /* PL_CORS_MAX_ORIGINS, and one more. */
    char many[PL_CORS_MAX_ORIGINS * 32 + 64] = "";
    size_t off = 0;
    for (unsigned i = 0; i < PL_CORS_MAX_ORIGINS; i++)
        off += (size_t)snprintf(many + off, sizeof(many) - off, "%shttp://h%u", i ? "," : "", i);
    assert_int_equal(pl_origins_parse(many, &list, &err), 0);
    assert_int_equal(list.n, PL_CORS_MAX_ORIGINS);
    snprintf(many + off, sizeof(many) - off, ",http://one-more");
    assert_int_equal(pl_origins_parse(many, &list, &err), -1);
    assert_non_null(strstr(err.message, "more than 32 origins"));
}

/* The settings' lookup: the keys file, and PLIMSOLL_CORS_ORIGINS as *ud. */
static const char *lookup(const char *name, void *ud) {
    if (strcmp(name, "PLIMSOLL_KEYS_FILE") == 0)
        return "/dev/null";
    if (strcmp(name, "PLIMSOLL_CORS_ORIGINS") == 0)
        return *(const char **)ud;
    return NULL;
}

static void test_config(void **state) {
    (void)state;
    /* Through the settings: unset or empty is no CORS; a bad entry names
     * the setting. */
    struct {
        const char *value;
        int r;
        unsigned n;
    } cases[] = {{NULL, 0, 0},
                 {"", 0, 0},
                 {"http://127.0.0.2:8000", 0, 1},
                 {"http://127.0.0.2:8000/", -1, 0}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct pl_config c;
        struct pl_error err = {0};
        const char *set = cases[i].value;
        assert_int_equal(pl_config_load(&c, lookup, &set, &err), cases[i].r);
        if (cases[i].r == 0)
            assert_int_equal(c.cors_origins.n, cases[i].n);
        else
            assert_non_null(strstr(err.message, "PLIMSOLL_CORS_ORIGINS: entry 1"));
    }
}

static void test_token_list(void **state) {
    (void)state;
    const char *const allowed[] = {"authorization", "content-type", "x-grpc-web", NULL};
    assert_true(pl_token_list_within("", allowed, 4));
    assert_true(pl_token_list_within("content-type", allowed, 4));
    assert_true(pl_token_list_within("authorization,content-type", allowed, 4));
    assert_true(pl_token_list_within(" Authorization ,\tContent-Type, ,X-Grpc-Web", allowed, 4));
    assert_true(pl_token_list_within(",,", allowed, 4));
    assert_false(pl_token_list_within("authorization,cookie", allowed, 4));
    assert_false(pl_token_list_within("content-typ", allowed, 4));
    assert_false(pl_token_list_within("content-types", allowed, 4));
    assert_false(pl_token_list_within("content type", allowed, 4));
    /* max_items, and one more. */
    assert_true(pl_token_list_within("x-grpc-web,x-grpc-web,x-grpc-web,x-grpc-web", allowed, 4));
    assert_false(
        pl_token_list_within("x-grpc-web,x-grpc-web,x-grpc-web,x-grpc-web,x-grpc-web", allowed, 4));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalised), cmocka_unit_test(test_refused),
        cmocka_unit_test(test_list),       cmocka_unit_test(test_config),
        cmocka_unit_test(test_token_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
