/* SPDX-License-Identifier: Apache-2.0 */
/* test_grant_routes.c: the canonical-path rule request paths follow, and
 * matching them against a profile's route patterns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../../src/broker/grants.h"
#include "grants_test_util.h"

/* ---- paths and routes --------------------------------------------------- */

static void test_path_canonical(void **state) {
    (void)state;
    static const char *const good[] = {
        "/",      "/a",   "/items/1",     "/a/b/c",     "/a:b@c",        "/~x-_.y",
        "/a;b=c", "/%41", "/%c3%a9",      "/%7e",       "/.a",           "/a.b",
        "/a;b.",  "/*",   "/!$&'()*+,;=", "/%e2%82%ac", "/%F0%9F%98%80", "/a%20b",
    };
    static const char *const bad[] = {
        "",
        "a",
        "//",
        "/a/",
        "/a//b",
        "/.",
        "/..",
        "/a/./b",
        "/a/..",
        "/..;x",
        "/.;",
        "/?",
        "/a?b=1",
        "/a#f",
        "/a b",
        "/a\\b",
        "/%2F",
        "/%2f",
        "/%5C",
        "/%5c",
        "/%2E",
        "/%2e",
        "/%25",
        "/%00",
        "/%1f",
        "/%7F",
        "/%",
        "/%4",
        "/%zz",
        "/a%2",
        "/\x01",
        "/\x7f",
        "/\xc3\xa9",
        "/a\"b",
        "/<",
        "/[",
        "/a|b",
        "/`",
        "/^",
        "/{",
        /* trailing dots or spaces, which some servers strip */
        "/...",
        "/a.",
        "/admin.",
        "/admin..",
        "/a%20",
        "/a.%20",
        "/a.;x",
        "/a%20;x",
        /* dot segments carrying an encoded ';' path parameter */
        "/..%3b",
        "/..%3B",
        "/.%3bx",
        "/x/..%3Bfoo/y",
        /* overlong, truncated or invalid UTF-8 escapes */
        "/%c0%ae",
        "/%C0%AE%C0%AE",
        "/%e0%80%ae",
        "/%c0%af",
        "/%c3",
        "/%80",
        "/%ff",
        "/%ed%a0%80",
        "/%f4%90%80%80",
        "/%c3%28",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        if (!pl_grant_path_canonical(good[i]))
            print_error("should be canonical: %s\n", good[i]);
        assert_true(pl_grant_path_canonical(good[i]));
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (pl_grant_path_canonical(bad[i]))
            print_error("should not be canonical: %s\n", bad[i]);
        assert_false(pl_grant_path_canonical(bad[i]));
    }
    assert_false(pl_grant_path_canonical(NULL));

    char p[PL_GRANT_PATH_MAX + 8];
    p[0] = '/';
    memset(p + 1, 'a', PL_GRANT_PATH_MAX - 1);
    p[PL_GRANT_PATH_MAX] = '\0';
    assert_true(pl_grant_path_canonical(p));
    p[PL_GRANT_PATH_MAX] = 'a';
    p[PL_GRANT_PATH_MAX + 1] = '\0';
    assert_false(pl_grant_path_canonical(p));

    size_t o = 0;
    for (int i = 0; i < 64; i++)
        o += (size_t)snprintf(p + o, sizeof(p) - o, "/s");
    assert_true(pl_grant_path_canonical(p));
    snprintf(p + o, sizeof(p) - o, "/s");
    assert_false(pl_grant_path_canonical(p));
}

static void test_route_matching(void **state) {
    (void)state;
    struct pl_grants *g = load_valid();
    const struct pl_grant_profile *p = pl_grants_find(g, "items-read");
    // routes: GET /items/*, POST /items/*/notes, GET /reports/**, GET /, DELETE /a/b
    static const struct {
        const char *method, *path;
        bool allowed;
    } cases[] = {
        {"GET", "/items/1", true},
        {"GET", "/items/%c3%a9", true},
        {"GET", "/items/*", true},
        {"GET", "/items", false},
        {"GET", "/items/", false},
        {"GET", "/items/1/", false},
        {"GET", "/items/1/2", false},
        {"GET", "/items//1", false},
        {"GET", "/itemsx/1", false},
        {"GET", "/Items/1", false},
        {"GET", "/items/..", false},
        {"GET", "/items/.", false},
        {"GET", "/items/%2F", false},
        {"GET", "/items/%2f", false},
        {"GET", "/items/a%2Fb", false},
        {"GET", "/items/%2e%2e", false},
        {"GET", "/items/1?x=1", false},
        {"GET", "/items/1#f", false},
        {"HEAD", "/items/1", false},
        {"get", "/items/1", false},
        {"POST", "/items/1", false},
        {"POST", "/items/1/notes", true},
        {"POST", "/items/1/notes/", false},
        {"POST", "/items/1/notes/2", false},
        {"POST", "/items/1/Notes", false},
        {"POST", "/items/1/%6eotes", false},
        {"GET", "/items/1/notes", false},
        {"GET", "/reports", true},
        {"GET", "/reports/a", true},
        {"GET", "/reports/a/b/c", true},
        {"GET", "/reports/", false},
        {"GET", "/reportsx", false},
        {"GET", "/reports/../items", false},
        {"GET", "/reports/a/..;/x", false},
        {"POST", "/reports/a", false},
        {"GET", "/", true},
        {"POST", "/", false},
        {"DELETE", "/a/b", true},
        {"DELETE", "/a", false},
        {"DELETE", "/a/b/c", false},
        {"DELETE", "/a/B", false},
        {"GET", "", false},
        {"GET", "items/1", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool got = pl_grant_route_allows(p, cases[i].method, cases[i].path);
        if (got != cases[i].allowed)
            print_error("%s %s: got %d\n", cases[i].method, cases[i].path, got);
        assert_int_equal(got, cases[i].allowed);
    }
    assert_false(pl_grant_route_allows(NULL, "GET", "/items/1"));
    assert_false(pl_grant_route_allows(p, NULL, "/items/1"));
    assert_false(pl_grant_route_allows(p, "GET", NULL));

    // "/**" reaches every canonical path, "/" included.
    p = pl_grants_find(g, "items-jwt");
    assert_true(pl_grant_route_allows(p, "GET", "/"));
    assert_true(pl_grant_route_allows(p, "GET", "/a/b/c/d"));
    assert_false(pl_grant_route_allows(p, "GET", "/a/../b"));
    assert_false(pl_grant_route_allows(p, "HEAD", "/a"));
    pl_grants_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_canonical),
        cmocka_unit_test(test_route_matching),
    };
    return cmocka_run_group_tests(tests, setup_keys, teardown_keys);
}
