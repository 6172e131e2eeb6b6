/* SPDX-License-Identifier: Apache-2.0 */
/* test_keys.c: the keys file and bearer authentication. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/core/canon.h"
#include "../../src/core/keys.h"

static int parse(const char *text, struct pl_keys **k, struct pl_error *err) {
    return pl_keys_parse(text, strlen(text), k, err);
}

static void test_parse_and_authenticate(void **state) {
    (void)state;
    char h1[65], h2[65], line[512];
    pl_sha256_hex("key-one", 7, h1);
    pl_sha256_hex("key-two", 7, h2);
    snprintf(line, sizeof(line), "# callers\n\nalice %s\r\n  bob\t%s  \n# end\n", h1, h2);
    struct pl_keys *k = NULL;
    struct pl_error err = {0};
    assert_int_equal(parse(line, &k, &err), 0);
    assert_int_equal(pl_keys_count(k), 2);
    assert_string_equal(pl_keys_authenticate(k, "key-one", 7), "alice");
    assert_string_equal(pl_keys_authenticate(k, "key-two", 7), "bob");
    assert_null(pl_keys_authenticate(k, "key-three", 9));
    assert_null(pl_keys_authenticate(k, "key-on", 6));
    assert_null(pl_keys_authenticate(k, "", 0));
    pl_keys_free(k);
}

static void test_uppercase_hex_and_rotation(void **state) {
    (void)state;
    char h1[65], h2[65], line[512];
    pl_sha256_hex("a", 1, h1);
    pl_sha256_hex("b", 1, h2);
    for (char *p = h1; *p; p++)
        if (*p >= 'a' && *p <= 'f')
            *p = (char)(*p - 32);
    snprintf(line, sizeof(line), "svc %s\nsvc %s\n", h1, h2);
    struct pl_keys *k = NULL;
    struct pl_error err = {0};
    assert_int_equal(parse(line, &k, &err), 0);
    assert_string_equal(pl_keys_authenticate(k, "a", 1), "svc");
    assert_string_equal(pl_keys_authenticate(k, "b", 1), "svc");
    pl_keys_free(k);
}

static void test_bad_lines(void **state) {
    (void)state;
    char h[65], dup[512];
    pl_sha256_hex("x", 1, h);
    const char *bad[] = {
        "alice\n",
        "alice 1234\n",
        "al ice 0000000000000000000000000000000000000000000000000000000000000000\n",
        "alice 000000000000000000000000000000000000000000000000000000000000000g\n",
        "ali/ce 0000000000000000000000000000000000000000000000000000000000000000\n",
        "alice 0000000000000000000000000000000000000000000000000000000000000000 extra\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct pl_keys *k = NULL;
        struct pl_error err = {0};
        assert_int_equal(parse(bad[i], &k, &err), -1);
        assert_non_null(strstr(err.message, "PLIMSOLL_KEYS_FILE: line 1"));
    }
    snprintf(dup, sizeof(dup), "a %s\nb %s\n", h, h);
    struct pl_keys *k = NULL;
    struct pl_error err = {0};
    assert_int_equal(parse(dup, &k, &err), -1);
    assert_non_null(strstr(err.message, "line 2"));
}

static void test_principal_length_edge(void **state) {
    (void)state;
    char p[130];
    memset(p, 'p', 128);
    assert_true(pl_principal_valid(p, 128));
    assert_false(pl_principal_valid(p, 129));
    assert_false(pl_principal_valid(p, 0));
}

static void test_bearer(void **state) {
    (void)state;
    const char *k;
    size_t n;
    assert_int_equal(pl_bearer_parse("Bearer abc", &k, &n), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(k, "abc", 3);
    assert_int_equal(pl_bearer_parse("bearer   abc  ", &k, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(pl_bearer_parse("Basic abc", &k, &n), -1);
    assert_int_equal(pl_bearer_parse("Bearer", &k, &n), -1);
    assert_int_equal(pl_bearer_parse("Bearer ", &k, &n), -1);
    assert_int_equal(pl_bearer_parse("Bearerabc", &k, &n), -1);
    assert_int_equal(pl_bearer_parse("Bearer a b", &k, &n), -1);
    assert_int_equal(pl_bearer_parse(NULL, &k, &n), -1);
    char big[PL_KEY_MAX_BYTES + 16] = "Bearer ";
    memset(big + 7, 'k', PL_KEY_MAX_BYTES);
    big[7 + PL_KEY_MAX_BYTES] = '\0';
    assert_int_equal(pl_bearer_parse(big, &k, &n), 0);
    big[7 + PL_KEY_MAX_BYTES] = 'k';
    big[8 + PL_KEY_MAX_BYTES] = '\0';
    assert_int_equal(pl_bearer_parse(big, &k, &n), -1);
}

static void test_load_missing_file(void **state) {
    (void)state;
    struct pl_keys *k = NULL;
    struct pl_error err = {0};
    assert_int_equal(pl_keys_load("/nonexistent/keys", &k, &err), -1);
    assert_string_equal(err.message, "PLIMSOLL_KEYS_FILE: cannot open /nonexistent/keys");
    assert_int_equal(err.errnum, ENOENT);
}

/* The keys file is read strictly (pl_file_read): a FIFO is refused at once
 * instead of hanging startup, so is a directory or a device; a file past
 * PL_KEYS_MAX_FILE is refused; a regular file loads. */
static void test_load_regular_files_only(void **state) {
    (void)state;
    char dir[] = "/tmp/pl-keys-XXXXXX", path[64], line[128], h[65];
    assert_non_null(mkdtemp(dir));
    struct pl_keys *k = NULL;
    struct pl_error err = {0};

    snprintf(path, sizeof(path), "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(pl_keys_load(path, &k, &err), -1);
    assert_null(k);
    snprintf(line, sizeof(line), "PLIMSOLL_KEYS_FILE: %s is not a regular file", path);
    assert_string_equal(err.message, line);
    assert_int_equal(err.errnum, EINVAL);
    unlink(path);

    err = (struct pl_error){0};
    assert_int_equal(pl_keys_load(dir, &k, &err), -1);
    assert_non_null(strstr(err.message, "is not a regular file"));
    err = (struct pl_error){0};
    assert_int_equal(pl_keys_load("/dev/null", &k, &err), -1);
    assert_string_equal(err.message, "PLIMSOLL_KEYS_FILE: /dev/null is not a regular file");

    snprintf(path, sizeof(path), "%s/keys", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    pl_sha256_hex("k", 1, h);
    fprintf(f, "alice %s\n", h);
    fclose(f);
    assert_int_equal(pl_keys_load(path, &k, &err), 0);
    assert_string_equal(pl_keys_authenticate(k, "k", 1), "alice");
    pl_keys_free(k);
    k = NULL;

    assert_int_equal(truncate(path, PL_KEYS_MAX_FILE + 1), 0);
    err = (struct pl_error){0};
    assert_int_equal(pl_keys_load(path, &k, &err), -1);
    assert_null(k);
    snprintf(line, sizeof(line), "PLIMSOLL_KEYS_FILE: larger than %u bytes", PL_KEYS_MAX_FILE);
    assert_string_equal(err.message, line);
    unlink(path);
    assert_int_equal(rmdir(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_authenticate),
        cmocka_unit_test(test_uppercase_hex_and_rotation),
        cmocka_unit_test(test_bad_lines),
        cmocka_unit_test(test_principal_length_edge),
        cmocka_unit_test(test_bearer),
        cmocka_unit_test(test_load_missing_file),
        cmocka_unit_test(test_load_regular_files_only),
    };
    return cmocka_run_group_tests_name("keys", tests, NULL, NULL);
}
