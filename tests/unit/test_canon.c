/* SPDX-License-Identifier: Apache-2.0 */
/* test_canon.c: the canonical form and hashes against the vectors that an
 * independent implementation (tests/vectors/make_vectors.py) produced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/canon.h"

static void test_vectors(void **state) {
    (void)state;
    json_error_t jerr;
    json_t *v =
        json_load_file(PL_SOURCE_ROOT "/tests/vectors/canonical.json", JSON_ALLOW_NUL, &jerr);
    if (!v)
        fail_msg("cannot load vectors: %s", jerr.text);
    assert_true(json_array_size(v) >= 8);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        struct pl_buf b = {0};
        assert_int_equal(pl_canon_dump(json_object_get(e, "input"), &b), 0);
        const char *want = json_string_value(json_object_get(e, "canonical"));
        size_t wlen = json_string_length(json_object_get(e, "canonical"));
        if (b.len != wlen || memcmp(b.data, want, wlen) != 0)
            fail_msg("vector \"%s\": got %s", json_string_value(json_object_get(e, "name")),
                     b.data);
        char hex[65];
        assert_int_equal(pl_sha256_hex(b.data, b.len, hex), 0);
        assert_string_equal(hex, json_string_value(json_object_get(e, "sha256")));
        pl_buf_free(&b);
    }
    json_decref(v);
}

static void test_real_refused(void **state) {
    (void)state;
    json_t *v = json_pack("{s:f}", "x", 1.5);
    struct pl_buf b = {0};
    assert_int_equal(pl_canon_dump(v, &b), -1);
    pl_buf_free(&b);
    json_decref(v);
}

static void test_base64(void **state) {
    (void)state;
    /* RFC 4648 section 10 vectors. */
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *padded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    const char *raw[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char *p = pl_base64_encode(in[i], strlen(in[i]), 1);
        char *r = pl_base64_encode(in[i], strlen(in[i]), 0);
        assert_string_equal(p, padded[i]);
        assert_string_equal(r, raw[i]);
        unsigned char *d = NULL;
        size_t n = 0;
        assert_int_equal(pl_base64_decode(p, strlen(p), 100, &d, &n), 0);
        assert_int_equal(n, strlen(in[i]));
        assert_memory_equal(d, in[i], n);
        free(d);
        assert_int_equal(pl_base64_decode(r, strlen(r), 100, &d, &n), 0);
        assert_int_equal(n, strlen(in[i]));
        free(d);
        free(p);
        free(r);
    }
    unsigned char *d = NULL;
    size_t n = 0;
    assert_int_equal(pl_base64_decode("Z", 1, 100, &d, &n), -1);
    assert_int_equal(pl_base64_decode("Zm9v!", 5, 100, &d, &n), -1);
    /* URL-safe alphabet is accepted, as proto3 JSON requires for bytes. */
    assert_int_equal(pl_base64_decode("-_-_", 4, 100, &d, &n), 0);
    assert_int_equal(n, 3);
    free(d);
    /* The size bound is checked before decoding. */
    assert_int_equal(pl_base64_decode("Zm9vYmFy", 8, 5, &d, &n), -2);
    assert_int_equal(pl_base64_decode("Zm9vYmFy", 8, 6, &d, &n), 0);
    free(d);
}

static void test_utf8_lossy(void **state) {
    (void)state;
    size_t n = 0;
    char *l = pl_utf8_lossy((const unsigned char *)"a\xff\0b\xc3\xa9", 6, &n);
    assert_int_equal(n, 12); /* a, U+FFFD, NUL, b, two U+FFFD */
    assert_memory_equal(l, "a\xef\xbf\xbd\0b\xef\xbf\xbd\xef\xbf\xbd", 12);
    free(l);
    l = pl_utf8_lossy((const unsigned char *)"", 0, &n);
    assert_int_equal(n, 0);
    assert_string_equal(l, "");
    free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_real_refused),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_utf8_lossy),
    };
    return cmocka_run_group_tests_name("canon", tests, NULL, NULL);
}
