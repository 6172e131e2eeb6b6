/* SPDX-License-Identifier: Apache-2.0 */
/* test_admission.c: admission arithmetic and the token bucket, on an
 * injected clock (no sleeping, no timing assertions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../src/core/admission.h"

static uint64_t fake_now;
static uint64_t fake_clock(void *ud) {
    (void)ud;
    return fake_now;
}

static struct pl_admission *make(unsigned cap, unsigned per_key, unsigned rate, unsigned burst) {
    struct pl_admission_limits l = {cap, per_key, rate, burst};
    struct pl_admission *a = NULL;
    assert_int_equal(pl_admission_new(&l, fake_clock, NULL, &a), 0);
    return a;
}

static void test_global_cap(void **state) {
    (void)state;
    fake_now = 1;
    struct pl_admission *a = make(3, 3, 1000, 1000);
    struct pl_error e = {0};
    assert_int_equal(pl_admission_acquire(a, "a", &e), 0);
    assert_int_equal(pl_admission_acquire(a, "b", &e), 0);
    assert_int_equal(pl_admission_acquire(a, "c", &e), 0);
    assert_int_equal(pl_admission_in_flight(a), 3);
    assert_int_equal(pl_admission_acquire(a, "d", &e), -1);
    assert_int_equal(e.reason, PL_REASON_AT_CAPACITY);
    pl_admission_release(a, "b");
    assert_int_equal(pl_admission_acquire(a, "d", &e), 0);
    pl_admission_free(a);
}

static void test_per_key_cap(void **state) {
    (void)state;
    fake_now = 1;
    struct pl_admission *a = make(8, 2, 1000, 1000);
    struct pl_error e = {0};
    assert_int_equal(pl_admission_acquire(a, "a", &e), 0);
    assert_int_equal(pl_admission_acquire(a, "a", &e), 0);
    assert_int_equal(pl_admission_acquire(a, "a", &e), -1);
    assert_int_equal(e.reason, PL_REASON_AT_CAPACITY);
    /* Another caller still gets a slot: one busy caller cannot take them all. */
    assert_int_equal(pl_admission_acquire(a, "b", &e), 0);
    pl_admission_release(a, "a");
    assert_int_equal(pl_admission_acquire(a, "a", &e), 0);
    pl_admission_free(a);
}

static void test_token_bucket(void **state) {
    (void)state;
    fake_now = 1000;
    /* 60 a minute = one a second, burst 3. */
    struct pl_admission *a = make(100, 100, 60, 3);
    struct pl_error e = {0};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pl_admission_acquire(a, "a", &e), 0);
        pl_admission_release(a, "a");
    }
    assert_int_equal(pl_admission_acquire(a, "a", &e), -1);
    assert_int_equal(e.reason, PL_REASON_RATE_LIMITED);
    /* Another caller has its own bucket. */
    assert_int_equal(pl_admission_acquire(a, "b", &e), 0);
    pl_admission_release(a, "b");
    /* 999 ms later: still less than one token. */
    fake_now += 999000000ull;
    assert_int_equal(pl_admission_acquire(a, "a", &e), -1);
    /* 1 ms more (the refused attempt spent nothing): one token. */
    fake_now += 1000000ull;
    assert_int_equal(pl_admission_acquire(a, "a", &e), 0);
    pl_admission_release(a, "a");
    assert_int_equal(pl_admission_acquire(a, "a", &e), -1);
    /* An hour idle refills only up to the burst. */
    fake_now += 3600ull * 1000000000ull;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pl_admission_acquire(a, "a", &e), 0);
        pl_admission_release(a, "a");
    }
    assert_int_equal(pl_admission_acquire(a, "a", &e), -1);
    pl_admission_free(a);
}

static void test_rate_checked_before_capacity(void **state) {
    (void)state;
    fake_now = 1;
    struct pl_admission *a = make(1, 1, 60, 1);
    struct pl_error e = {0};
    assert_int_equal(pl_admission_acquire(a, "a", &e), 0);
    assert_int_equal(pl_admission_acquire(a, "a", &e), -1);
    assert_int_equal(e.reason, PL_REASON_RATE_LIMITED);
    pl_admission_free(a);
}

static void test_close(void **state) {
    (void)state;
    fake_now = 1;
    struct pl_admission *a = make(2, 2, 60, 10);
    struct pl_error e = {0};
    assert_int_equal(pl_admission_acquire(a, "a", &e), 0);
    pl_admission_close(a);
    assert_int_equal(pl_admission_acquire(a, "a", &e), -1);
    assert_int_equal(e.reason, PL_REASON_SHUTTING_DOWN);
    assert_int_equal(pl_admission_wait_idle(a, 10), 1);
    pl_admission_release(a, "a");
    assert_int_equal(pl_admission_wait_idle(a, 10), 0);
    pl_admission_free(a);
}

static void test_bad_limits(void **state) {
    (void)state;
    struct pl_admission_limits l = {0, 1, 1, 1};
    struct pl_admission *a = NULL;
    assert_true(pl_admission_new(&l, NULL, NULL, &a) < 0);
}

/* Explain's: spend takes a token and no slot; peek changes nothing and
 * answers what acquire would (a token must be left, a slot free). */
static void test_spend_and_peek(void **state) {
    (void)state;
    fake_now = 1000;
    struct pl_admission *a = make(1, 1, 60, 2);
    struct pl_error e = {0};
    assert_int_equal(pl_admission_peek(a, "a", &e), 0);
    assert_int_equal(pl_admission_spend(a, "a", &e), 0); /* one token left */
    assert_int_equal(pl_admission_in_flight(a), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(pl_admission_peek(a, "a", &e), 0); /* peeking spends nothing */
    assert_int_equal(pl_admission_acquire(a, "a", &e), 0);  /* the last token, the one slot */
    assert_int_equal(pl_admission_peek(a, "b", &e), -1);
    assert_int_equal(e.reason, PL_REASON_AT_CAPACITY); /* b has tokens, no slot is free */
    assert_int_equal(pl_admission_peek(a, "a", &e), -1);
    assert_int_equal(e.reason, PL_REASON_RATE_LIMITED); /* a has none: rate first */
    assert_int_equal(pl_admission_spend(a, "a", &e), -1);
    assert_int_equal(e.reason, PL_REASON_RATE_LIMITED);
    pl_admission_release(a, "a");
    fake_now += 1000000000ull; /* a second: one token back */
    assert_int_equal(pl_admission_peek(a, "a", &e), 0);
    pl_admission_close(a);
    assert_int_equal(pl_admission_spend(a, "a", &e), -1);
    assert_int_equal(e.reason, PL_REASON_SHUTTING_DOWN);
    pl_admission_free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_global_cap),     cmocka_unit_test(test_per_key_cap),
        cmocka_unit_test(test_token_bucket),   cmocka_unit_test(test_rate_checked_before_capacity),
        cmocka_unit_test(test_close),          cmocka_unit_test(test_bad_limits),
        cmocka_unit_test(test_spend_and_peek),
    };
    return cmocka_run_group_tests_name("admission", tests, NULL, NULL);
}
