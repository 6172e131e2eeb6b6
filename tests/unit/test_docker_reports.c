/* SPDX-License-Identifier: Apache-2.0 */
/* test_docker_reports.c: the readers of the docker provider's in-sandbox
 * helpers' reports (src/providers/docker/reports.h): a report is read only
 * when it has exactly its shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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
    json_t *j = pl_docker_agent_report(good, strlen(good));
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "pid")), 7);
    json_decref(j);
    static const char *const bad[] = {
        "",
        "{\"pid\": 7}",                 /* no end of line */
        "{\"pid\": 7}\n{\"pid\": 8}\n", /* a second line */
        "x{\"pid\": 7}\n",              /* bytes before */
        "{\"pid\": 7}\nx",              /* bytes after */
        "[7]\n",                        /* not an object */
        "{\"pid\": 7, \"pid\": 8}\n",   /* a member twice */
        "ready\n{\"pid\": 7}\n",        /* a line before */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if ((j = pl_docker_agent_report(bad[i], strlen(bad[i]))))
            fail_msg("case %zu accepted", i);
    assert_null(pl_docker_agent_report(NULL, 0));
}

/* Feed s in pieces of `step` bytes and read the report. */
static json_t *last_of(const char *s, size_t len, size_t step) {
    static struct pl_last_line l;
    memset(&l, 0, sizeof(l));
    for (size_t at = 0; at < len; at += step)
        pl_last_line_feed(&l, s + at, len - at < step ? len - at : step);
    return pl_last_line_report(&l);
}

static void test_runner_word(void **state) {
    (void)state;
    long pids[4];
    unsigned long long starts[4];
    const char *ok = "12 345 13 346\n";
    assert_int_equal(pl_docker_runner_word(ok, strlen(ok), pids, starts, 4), 2);
    assert_int_equal(pids[0], 12);
    assert_int_equal(starts[0], 345);
    assert_int_equal(pids[1], 13);
    assert_int_equal(starts[1], 346);
    assert_int_equal(pl_docker_runner_word("7 0\n", 4, pids, starts, 4), 1);
    /* More pairs than room, and every other shape, are refused. */
    const char *five = "2 1 3 1 4 1 5 1 6 1\n";
    assert_int_equal(pl_docker_runner_word(five, strlen(five), pids, starts, 4), -1);
    const char *bad[] = {"",
                         "\n",
                         "12 345",
                         "12 345\n\n",
                         "12 345 \n",
                         " 12 345\n",
                         "12  345\n",
                         "12\n",
                         "12 345 13\n",
                         "1 345\n",
                         "0 345\n",
                         "-12 345\n",
                         "+12 345\n",
                         "012 345\n",
                         "12 0345\n",
                         "12 345x\n",
                         "12\t345\n",
                         "12 345\r\n",
                         "99999999999999999999999 1\n",
                         "12 99999999999999999999999\n",
                         "9223372036854775808 1\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(pl_docker_runner_word(bad[i], strlen(bad[i]), pids, starts, 4), -1);
    /* A NUL inside is not a digit. */
    assert_int_equal(pl_docker_runner_word("12 3\0\n", 6, pids, starts, 4), -1);
}

static void test_last_line(void **state) {
    (void)state;
    /* What another process wrote before the launcher's newline is dropped,
     * a torn line included; the last line is the report. */
    const char *s = "{\"pid\": 1, \"challenge\": \"forged\"}\nhalf a li\n{\"pid\": 7}\n";
    for (size_t step = 1; step <= strlen(s); step++) {
        json_t *j = last_of(s, strlen(s), step);
        assert_non_null(j);
        assert_int_equal(json_integer_value(json_object_get(j, "pid")), 7);
        json_decref(j);
    }
    static const char *const bad[] = {
        "",
        "{\"pid\": 7}",                /* no end of line */
        "{\"pid\": 7}\nx",             /* bytes after the last newline */
        "{\"pid\": 7}\n\n",            /* an empty last line */
        "{\"pid\": 7}\n[7]\n",         /* not an object */
        "{\"pid\": 7, \"pid\": 8}\n",  /* a member twice */
        "{\"pid\": 7} {\"pid\": 8}\n", /* two values */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *j = last_of(bad[i], strlen(bad[i]), 3);
        if (j)
            fail_msg("case %zu accepted", i);
    }
    /* A line longer than the bound, before the report or as it, in bounded
     * memory: the one before is dropped, the last one is never cut to fit. */
    size_t big = 3 * PL_LAST_LINE_MAX;
    char *b = malloc(big + 64);
    assert_non_null(b);
    memset(b, 'x', big);
    strcpy(b + big, "\n{\"pid\": 9}\n");
    json_t *j = last_of(b, strlen(b), 1000);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "pid")), 9);
    json_decref(j);
    b[0] = '{';
    memcpy(b + 1, "\"a\": \"", 6);
    strcpy(b + big, "\"}\n");
    assert_null(last_of(b, strlen(b), 1000));
    /* At the bound exactly, the line is whole. */
    size_t k = PL_LAST_LINE_MAX - 2;
    memset(b, ' ', PL_LAST_LINE_MAX);
    b[0] = '{';
    b[k + 1] = '}';
    b[k + 2] = '\n';
    j = last_of(b, k + 3, 7);
    assert_non_null(j);
    json_decref(j);
    free(b);
}

static void test_read_report(void **state) {
    (void)state;
    uint64_t size = 0;
    size_t head = 0;
    const char ok[] = "PLIMSOLL {\"size\":11}\nhello";
    assert_int_equal(pl_docker_read_report(ok, sizeof(ok) - 1, &size, &head), 0);
    assert_int_equal(size, 11);
    assert_string_equal(ok + head, "hello");
    const char *bad[] = {"PLIMSOLL {\"size\":-1}\n",
                         "PLIMSOLL {\"size\":4294967296}\n",
                         "PLIMSOLL {\"size\":1,\"x\":2}\n",
                         "PLIMSOLL {\"size\":1.5}\n",
                         "PLIMSOLL {\"size\":\"1\"}\n",
                         "PLIMSOLL {\"size\":1}",
                         "PLIMSOL {\"size\":1}\n",
                         "x\nPLIMSOLL {\"size\":1}\n",
                         ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(pl_docker_read_report(bad[i], strlen(bad[i]), &size, &head), -1);
}

static int list(const char *out, size_t most, json_t **entries, bool *truncated) {
    return pl_docker_list_report(out, strlen(out), most, entries, truncated);
}

static void test_list_report(void **state) {
    (void)state;
    json_t *e = NULL;
    bool t = true;
    /* "a", "a/b", and the bytes ff 2e 78 (not UTF-8) */
    const char *ok = "{\"p\":\"YQ==\",\"t\":\"directory\",\"s\":0,\"m\":493,\"mt\":0}\n"
                     "{\"p\":\"YS9i\",\"t\":\"file\",\"s\":5000000000,\"m\":420,"
                     "\"mt\":1700000000123456789}\n"
                     "{\"p\":\"/y54\",\"t\":\"fifo\",\"s\":0,\"m\":0,\"mt\":1}\n"
                     "PLIMSOLL {\"truncated\":false}\n";
    assert_int_equal(list(ok, 3, &e, &t), 0);
    assert_false(t);
    assert_int_equal(json_array_size(e), 3);
    json_t *b = json_array_get(e, 1);
    assert_string_equal(json_string_value(json_object_get(b, "path")), "a/b");
    assert_int_equal(json_integer_value(json_object_get(b, "size")), 4294967295);
    assert_string_equal(json_string_value(json_object_get(b, "modified_at")),
                        "2023-11-14T22:13:20.123456789Z");
    json_t *odd = json_array_get(e, 2);
    assert_string_equal(json_string_value(json_object_get(odd, "path")), "\xef\xbf\xbd.x");
    assert_string_equal(json_string_value(json_object_get(odd, "path_base64")), "/y54");
    json_decref(e);
    assert_int_equal(list(ok, 2, &e, &t), -1); /* more than most */
    assert_null(e);
    assert_int_equal(list("PLIMSOLL {\"truncated\":true}\n", 0, &e, &t), 0);
    assert_true(t);
    assert_int_equal(json_array_size(e), 0);
    json_decref(e);
    /* "..", "/etc", "a//b", ".", "" and NUL, a wrong type, a mode past
     * 07777, a member more or less, torn, bytes after the end */
    const char *bad[] = {
        "{\"p\":\"Li4=\",\"t\":\"file\",\"s\":0,\"m\":0,\"mt\":0}\nPLIMSOLL "
        "{\"truncated\":false}\n",
        "{\"p\":\"L2V0Yw==\",\"t\":\"file\",\"s\":0,\"m\":0,\"mt\":0}\nPLIMSOLL "
        "{\"truncated\":false}\n",
        "{\"p\":\"YS8vYg==\",\"t\":\"file\",\"s\":0,\"m\":0,\"mt\":0}\nPLIMSOLL "
        "{\"truncated\":false}\n",
        "{\"p\":\"Lg==\",\"t\":\"file\",\"s\":0,\"m\":0,\"mt\":0}\nPLIMSOLL "
        "{\"truncated\":false}\n",
        "{\"p\":\"\",\"t\":\"file\",\"s\":0,\"m\":0,\"mt\":0}\nPLIMSOLL "
        "{\"truncated\":false}\n",
        "{\"p\":\"YQBi\",\"t\":\"file\",\"s\":0,\"m\":0,\"mt\":0}\nPLIMSOLL "
        "{\"truncated\":false}\n",
        "{\"p\":\"YQ==\",\"t\":\"door\",\"s\":0,\"m\":0,\"mt\":0}\nPLIMSOLL "
        "{\"truncated\":false}\n",
        "{\"p\":\"YQ==\",\"t\":\"file\",\"s\":0,\"m\":4096,\"mt\":0}\nPLIMSOLL "
        "{\"truncated\":false}\n",
        "{\"p\":\"YQ==\",\"t\":\"file\",\"s\":0,\"m\":0}\nPLIMSOLL {\"truncated\":false}\n",
        "{\"p\":\"YQ==\",\"t\":\"file\",\"s\":0,\"m\":0,\"mt\":0,\"x\":1}\nPLIMSOLL "
        "{\"truncated\":false}\n",
        "{\"p\":\"YQ==\",\"t\":\"file\",\"s\":-1,\"m\":0,\"mt\":0}\nPLIMSOLL "
        "{\"truncated\":false}\n",
        "{\"p\":\"YQ==\",\"t\":\"file\",\"s\":0,\"m\":0,\"mt\":0}\nPLIMSOLL "
        "{\"truncated\":false}",
        "PLIMSOLL {\"truncated\":false}\nmore\n",
        "PLIMSOLL {\"truncated\":0}\n",
        "",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(list(bad[i], 8, &e, &t), -1);
        assert_null(e);
    }
}

static int collect(const char *out, size_t len, unsigned files, unsigned bytes, bool partial,
                   struct pl_artifact **a, size_t *n, bool *truncated) {
    struct pl_collect_ctx b = {.files = files, .bytes = bytes};
    return pl_docker_collect_report(out, len, &b, partial, a, n, truncated);
}

static void test_collect_report(void **state) {
    (void)state;
    struct pl_artifact *a = NULL;
    size_t n = 9;
    bool t = true;
    /* "a.txt" (3 of 3 bytes, one of them NUL), "d/b" (2 of 10), and the
     * bytes ff 2e 78 (0 of 7: the budget ran out) */
    static const char ok[] = "{\"p\":\"YS50eHQ=\",\"s\":3,\"n\":3}\nx\0y"
                             "{\"p\":\"ZC9i\",\"s\":10,\"n\":2}\n\n\n"
                             "{\"p\":\"/y54\",\"s\":7,\"n\":0}\n"
                             "PLIMSOLL {\"truncated\":false}\n";
    size_t len = sizeof(ok) - 1;
    assert_int_equal(collect(ok, len, 3, 5, false, &a, &n, &t), 0);
    assert_false(t);
    assert_int_equal(n, 3);
    assert_int_equal(a[0].path_len, 5);
    assert_memory_equal(a[0].path, "a.txt", 5);
    assert_int_equal(a[0].len, 3);
    assert_memory_equal(a[0].data, "x\0y", 3);
    assert_false(a[0].truncated);
    assert_memory_equal(a[1].data, "\n\n", 2);
    assert_int_equal(a[1].size, 10);
    assert_true(a[1].truncated);
    assert_memory_equal(a[2].path, "\xff.x", 3);
    assert_null(a[2].data);
    assert_true(a[2].truncated);
    pl_artifacts_free(a, n);
    /* More files than allowed, more bytes than the budget. */
    assert_int_equal(collect(ok, len, 2, 5, false, &a, &n, &t), -1);
    assert_null(a);
    assert_int_equal(collect(ok, len, 3, 4, false, &a, &n, &t), -1);
    /* Torn: refused whole, or (partial) what came whole, said truncated. */
    assert_int_equal(collect(ok, len - 5, 3, 5, false, &a, &n, &t), -1);
    t = false;
    assert_int_equal(collect(ok, 40, 3, 5, true, &a, &n, &t), 0);
    assert_true(t);
    assert_int_equal(n, 1);
    pl_artifacts_free(a, n);
    /* "..", "/etc", n past s, n past the bytes there, a member more or
     * less, bytes after the end, a line without its end */
    const char *bad[] = {
        "{\"p\":\"Li4=\",\"s\":0,\"n\":0}\nPLIMSOLL {\"truncated\":false}\n",
        "{\"p\":\"L2V0Yw==\",\"s\":0,\"n\":0}\nPLIMSOLL {\"truncated\":false}\n",
        "{\"p\":\"YQ==\",\"s\":1,\"n\":2}\nxxPLIMSOLL {\"truncated\":false}\n",
        "{\"p\":\"YQ==\",\"s\":90,\"n\":90}\nxx",
        "{\"p\":\"YQ==\",\"s\":0}\nPLIMSOLL {\"truncated\":false}\n",
        "{\"p\":\"YQ==\",\"s\":0,\"n\":0,\"m\":0}\nPLIMSOLL {\"truncated\":false}\n",
        "PLIMSOLL {\"truncated\":false}\nmore",
        "PLIMSOLL {\"truncated\":false}",
        "",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(collect(bad[i], strlen(bad[i]), 8, 64, false, &a, &n, &t), -1);
        assert_null(a);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files_report_accepted), cmocka_unit_test(test_files_report_refused),
        cmocka_unit_test(test_agent_report),          cmocka_unit_test(test_last_line),
        cmocka_unit_test(test_runner_word),           cmocka_unit_test(test_read_report),
        cmocka_unit_test(test_list_report),           cmocka_unit_test(test_collect_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
