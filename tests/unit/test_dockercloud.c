/* SPDX-License-Identifier: Apache-2.0 */
/* test_dockercloud.c: the dockercloud provider's settings, every rule at
 * its edge (src/providers/dockercloud/settings.c over hosted/hsettings.c),
 * and the shared cleanup's report reader (hosted/cleanup.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/providers/dockercloud/dc_int.h"
#include "settings_test.h"

/* The four required settings, after up to two more that come first (so
 * they override a required one; names may be NULL). */
static int load2(const char *n1, const char *v1, const char *n2, const char *v2,
                 struct dc_settings *s, struct pl_error *err) {
    const char *names[] = {"SANDBOX_DOCKERCLOUD_ACCOUNT", "SANDBOX_DOCKERCLOUD_TOKEN",
                           "SANDBOX_DOCKERCLOUD_AUTH_URL", "SANDBOX_DOCKERCLOUD_IMAGE"};
    const char *values[] = {"acct", "tok", "https://auth.invalid/v2/auth/token", "ns/img:1"};
    struct env e = {{NULL}, {NULL}};
    int n = 0;
    if (n1) {
        e.name[n] = n1;
        e.value[n++] = v1;
    }
    if (n2) {
        e.name[n] = n2;
        e.value[n++] = v2;
    }
    for (int i = 0; i < 4; i++) {
        e.name[n] = names[i];
        e.value[n++] = values[i];
    }
    struct pl_config c = {.lookup = lookup, .lookup_userdata = &e};
    return dc_load_settings(&c, s, err);
}

static int load(const char *name, const char *value, struct dc_settings *s, struct pl_error *err) {
    return load2(name, value, NULL, NULL, s, err);
}

static void refused(const char *name, const char *value, const char *phrase) {
    struct dc_settings s;
    struct pl_error err = {0};
    assert_int_equal(load(name, value, &s, &err), -1);
    if (!strstr(err.message, phrase))
        fail_msg("%s=%s: \"%s\" lacks \"%s\"", name, value, err.message, phrase);
    assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
}

static void accepted(const char *name, const char *value) {
    struct dc_settings s;
    struct pl_error err = {0};
    if (load(name, value, &s, &err) != 0)
        fail_msg("%s=%s refused: %s", name, value, err.message);
}

static void test_defaults(void **state) {
    (void)state;
    struct dc_settings s;
    struct pl_error err = {0};
    assert_int_equal(load(NULL, NULL, &s, &err), 0);
    assert_string_equal(s.api_url, "https://connect.docker.com/sandboxes");
    assert_string_equal(s.auth_url, "https://auth.invalid/v2/auth/token");
    assert_string_equal(s.instance, "default");
    assert_string_equal(s.prefix, "pl-default-");
    assert_int_equal(s.cpus, 2);
    assert_int_equal(s.memory_mib, 4096);
    assert_string_equal(s.workdir, "/tmp/plimsoll/project");
    assert_int_equal(s.poll_ms, 50);
    assert_string_equal(s.guard.url, "");
}

static void test_required(void **state) {
    (void)state;
    const char *names[] = {"SANDBOX_DOCKERCLOUD_ACCOUNT", "SANDBOX_DOCKERCLOUD_TOKEN",
                           "SANDBOX_DOCKERCLOUD_AUTH_URL", "SANDBOX_DOCKERCLOUD_IMAGE"};
    for (size_t i = 0; i < 4; i++) {
        struct dc_settings s;
        struct pl_error err = {0};
        /* An empty value is an unset one. */
        assert_int_equal(load(names[i], "", &s, &err), -1);
        assert_non_null(strstr(err.message, names[i]));
        assert_non_null(strstr(err.message, "required"));
    }
    /* A secret that could split a header is refused, and never echoed. */
    struct dc_settings s;
    struct pl_error err = {0};
    assert_int_equal(load("SANDBOX_DOCKERCLOUD_TOKEN", "tok\r\nX-Evil: 1", &s, &err), -1);
    assert_null(strstr(err.message, "X-Evil"));
}

static void test_urls(void **state) {
    (void)state;
    accepted("SANDBOX_DOCKERCLOUD_API_URL", "http://127.0.0.1:8080");
    accepted("SANDBOX_DOCKERCLOUD_API_URL", "https://api.example.com/sandboxes/");
    accepted("SANDBOX_DOCKERCLOUD_API_URL", "http://localhost:1/x");
    refused("SANDBOX_DOCKERCLOUD_API_URL", "http://example.com/sandboxes",
            "plain http is allowed only to this machine");
    refused("SANDBOX_DOCKERCLOUD_API_URL", "ftp://example.com", "must start with https://");
    refused("SANDBOX_DOCKERCLOUD_API_URL", "https://a.example/x?y=1", "nothing more");
    refused("SANDBOX_DOCKERCLOUD_API_URL", "https://a.example/../x", "nothing more");
    refused("SANDBOX_DOCKERCLOUD_API_URL", "https://a_b.example", "DNS name");
    refused("SANDBOX_DOCKERCLOUD_API_URL", "https://a.example:123456", "port");
    refused("SANDBOX_DOCKERCLOUD_AUTH_URL", "http://10.0.0.1/token", "plain http");
    struct dc_settings s;
    struct pl_error err = {0};
    assert_int_equal(load("SANDBOX_DOCKERCLOUD_API_URL", "https://a.example/p///", &s, &err), 0);
    assert_string_equal(s.api_url, "https://a.example/p");
}

static void test_sizes_and_bounds(void **state) {
    (void)state;
    struct dc_settings s;
    struct pl_error err = {0};
    const unsigned pairs[][2] = {{1, 2048}, {2, 4096}, {4, 8192}, {8, 16384}, {16, 32768}};
    for (size_t i = 0; i < 5; i++) {
        char c[8], m[8];
        snprintf(c, sizeof(c), "%u", pairs[i][0]);
        snprintf(m, sizeof(m), "%u", pairs[i][1]);
        assert_int_equal(
            load2("SANDBOX_DOCKERCLOUD_CPUS", c, "SANDBOX_DOCKERCLOUD_MEMORY_MIB", m, &s, &err), 0);
    }
    assert_int_equal(
        load2("SANDBOX_DOCKERCLOUD_CPUS", "4", "SANDBOX_DOCKERCLOUD_MEMORY_MIB", "4096", &s, &err),
        -1);
    assert_non_null(strstr(err.message, "not a documented size"));
    refused("SANDBOX_DOCKERCLOUD_CPUS", "17", "whole number from");
    refused("SANDBOX_DOCKERCLOUD_MEMORY_MIB", "2047", "whole number from");
    accepted("SANDBOX_DOCKERCLOUD_POLL_MS", "10");
    accepted("SANDBOX_DOCKERCLOUD_POLL_MS", "2000");
    refused("SANDBOX_DOCKERCLOUD_POLL_MS", "9", "whole number from");
    refused("SANDBOX_DOCKERCLOUD_POLL_MS", "2001", "whole number from");
    refused("SANDBOX_DOCKERCLOUD_SLACK_S", "4", "whole number from");
    refused("SANDBOX_DOCKERCLOUD_CALL_TIMEOUT_MS", "999", "whole number from");
    refused("SANDBOX_DOCKERCLOUD_REAP_INTERVAL_S", "3601", "whole number from");
}

static void test_names_and_paths(void **state) {
    (void)state;
    accepted("SANDBOX_DOCKERCLOUD_INSTANCE", "abcdefghijklmnopqrstuvwx"); /* 24 */
    refused("SANDBOX_DOCKERCLOUD_INSTANCE", "abcdefghijklmnopqrstuvwxy", "too long");
    refused("SANDBOX_DOCKERCLOUD_INSTANCE", "a.b", "[A-Za-z0-9_-]");
    refused("SANDBOX_DOCKERCLOUD_INSTANCE", "a b", "[A-Za-z0-9._-]");
    refused("SANDBOX_DOCKERCLOUD_IMAGE", "img name", "image reference");
    refused("SANDBOX_DOCKERCLOUD_WORKDIR", "relative", "absolute path");
    refused("SANDBOX_DOCKERCLOUD_WORKDIR", "/tmp/../etc", "no \"..\"");
    refused("SANDBOX_DOCKERCLOUD_EGRESS_PROBE", "1.1.1.1", "host:port");
    refused("SANDBOX_DOCKERCLOUD_EGRESS_PROBE", "1.1.1.1:443,", "host:port");
    accepted("SANDBOX_DOCKERCLOUD_EGRESS_PROBE", "1.1.1.1:443,example.com:80");
}

static void test_cleanup_report(void **state) {
    (void)state;
    char alive[64];
    assert_true(ph_cleanup_clean("clean\nalive\n", 12, alive, sizeof(alive)));
    assert_string_equal(alive, "");
    assert_true(ph_cleanup_clean("clean\nalive 12:34 56:78\n", 24, alive, sizeof(alive)));
    assert_string_equal(alive, " 12:34 56:78");
    assert_false(ph_cleanup_clean("left [3]\nalive\n", 15, NULL, 0));
    assert_false(ph_cleanup_clean("clean\nalive", 11, NULL, 0));
    assert_false(ph_cleanup_clean("clean\nalive\nextra\n", 18, NULL, 0));
    assert_false(ph_cleanup_clean("", 0, NULL, 0));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_required),
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_sizes_and_bounds),
        cmocka_unit_test(test_names_and_paths),
        cmocka_unit_test(test_cleanup_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
