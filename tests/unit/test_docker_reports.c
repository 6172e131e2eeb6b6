/* SPDX-License-Identifier: Apache-2.0 */
/* test_docker_reports.c: the readers of the docker provider's in-sandbox
 * helpers' reports (src/providers/docker/reports.h): a report is read only
 * when it has exactly its shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../src/providers/docker/reports.h"

static json_t *files(const char *out, size_t cap, char *why) {
    return pl_docker_files_report(out, strlen(out), strlen(out), cap, 137, why, 160);
}

static void test_files_report_accepted(void **state) {
    (void)state;
    char why[160];
    json_t *j = files("PLIMSOLL {\"setup\":\"ok\"}\n", 4096, why);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "setup")), "ok");
    assert_string_equal(why, "");
    json_decref(j);
    j = files("PLIMSOLL {\"setup_failed\":\"a: refused\"}\n", 4096, why);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "setup_failed")), "a: refused");
    json_decref(j);
}

static void test_files_report_refused(void **state) {
    (void)state;
    char why[160];
    static const struct {
        const char *out;
        const char *why;
    } cases[] = {
        {"", "ended before it reported its files (exit 137)"},
        {"PLIMSOLL {\"setup\":\"ok\"}", "torn"},
        {"PLIMSOLL {\"setup\":\"ok\"}\nPLIMSOLL {\"step\":0,\"exit_code\":0}\n", "bytes after"},
        {"PLIMSOLL {\"setup\":\"ok\"}\nx", "bytes after"},
        {"PLIMSOLL {\"step\":0}\n", "unreadable"},
        {"PLIMSOLL {\"setup\":1}\n", "unreadable"},
        {"PLIMSOLL [\"setup\"]\n", "unreadable"},
        {"{\"setup\":\"ok\"}\n", "unreadable"},
        {"PLIMSOLL {\"setup\":\"ok\",\"setup\":\"ok\"}\n", "unreadable"},
        {"PLIMSOLL {\"setup\":\"ok\"\n", "unreadable"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = files(cases[i].out, 4096, why);
        if (j)
            fail_msg("case %zu accepted: %s", i, cases[i].out);
        if (!strstr(why, cases[i].why))
            fail_msg("case %zu: \"%s\" does not say \"%s\"", i, why, cases[i].why);
    }
    /* Past the cap, however well formed the kept part is. */
    const char *ok = "PLIMSOLL {\"setup\":\"ok\"}\n";
    assert_null(pl_docker_files_report(ok, strlen(ok), 1u << 20, 65536, 0, why, sizeof(why)));
    assert_non_null(strstr(why, "oversized"));
}

static void test_agent_report(void **state) {
    (void)state;
    const char *good = "{\"pid\": 7, \"start\": 99}\n";
    json_t *j = pl_docker_agent_report(good, strlen(good), "");
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "pid")), 7);
    json_decref(j);
    const char *launch = "ready\n{\"pid\": 7, \"start\": 99}\n";
    j = pl_docker_agent_report(launch, strlen(launch), "ready\n");
    assert_non_null(j);
    json_decref(j);
    static const char *const bad[] = {
        "",
        "{\"pid\": 7}",                 /* no end of line */
        "{\"pid\": 7}\n{\"pid\": 8}\n", /* a second line */
        "x{\"pid\": 7}\n",              /* bytes before */
        "{\"pid\": 7}\nx",              /* bytes after */
        "[7]\n",                        /* not an object */
        "{\"pid\": 7, \"pid\": 8}\n",   /* a member twice */
        "ready\n{\"pid\": 7}\n",        /* an unexpected prefix */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if ((j = pl_docker_agent_report(bad[i], strlen(bad[i]), "")))
            fail_msg("case %zu accepted", i);
    assert_null(pl_docker_agent_report(good, strlen(good), "ready\n"));
    assert_null(pl_docker_agent_report(NULL, 0, ""));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files_report_accepted),
        cmocka_unit_test(test_files_report_refused),
        cmocka_unit_test(test_agent_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
