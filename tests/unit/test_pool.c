/* SPDX-License-Identifier: Apache-2.0 */
/* test_pool.c: the core warm pool (src/core/pool.c) with an owner that
 * makes numbered items and counts what it made and dropped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/clock.h"
#include "../../src/core/pool.h"

struct owner {
    unsigned per_kind[2]; /* how many of kind 0 and 1 to keep */
    atomic_int made, discarded, failures_left;
    atomic_bool unusable; /* every item fails the take-time check */
    atomic_bool sick;     /* healthy() says no */
    atomic_int health_checks;
    atomic_int next;
};

struct item {
    int n, kind;
};

static int choose(void *o, const unsigned *waiting, unsigned total) {
    struct owner *w = o;
    (void)total;
    return waiting[0] < w->per_kind[0] ? 0 : waiting[1] < w->per_kind[1] ? 1 : PL_POOL_FULL;
}

static int make(void *o, int kind, void **ret) {
    struct owner *w = o;
    if (atomic_load(&w->failures_left) > 0) {
        atomic_fetch_sub(&w->failures_left, 1);
        return -1;
    }
    struct item *it = malloc(sizeof(*it));
    it->n = atomic_fetch_add(&w->next, 1);
    it->kind = kind;
    atomic_fetch_add(&w->made, 1);
    *ret = it;
    return 0;
}

static void discard(void *o, void *item) {
    struct owner *w = o;
    atomic_fetch_add(&w->discarded, 1);
    free(item);
}

static bool usable(void *o, void *item) {
    (void)item;
    return !atomic_load(&((struct owner *)o)->unusable);
}

static bool healthy(void *o) {
    struct owner *w = o;
    atomic_fetch_add(&w->health_checks, 1);
    return !atomic_load(&w->sick);
}

static const struct pl_pool_ops ops = {
    .choose = choose, .make = make, .discard = discard, .usable = usable, .healthy = healthy};

static int fit_kind(void *item, int kind, const void *want) {
    (void)item;
    return kind == *(const int *)want;
}

static unsigned waiting(struct pl_pool *p) {
    pthread_mutex_lock(&p->lock);
    unsigned n = p->n;
    pthread_mutex_unlock(&p->lock);
    return n;
}

/* Wait (at most 5 s) until the pool holds n items. */
static void wait_for(struct pl_pool *p, unsigned n) {
    uint64_t until = pl_deadline_in_ms(5000);
    while (waiting(p) != n && pl_now_ns() < until)
        pl_sleep_ns(PL_MS(2));
    assert_int_equal(waiting(p), n);
}

static void test_fills_each_kind_and_takes_by_fit(void **state) {
    (void)state;
    struct owner w = {.per_kind = {2, 1}};
    struct pl_pool p;
    assert_int_equal(pl_pool_start(&p, &ops, &w), 0);
    wait_for(&p, 3);
    int want = 1;
    struct item *it = pl_pool_take(&p, fit_kind, &want);
    assert_non_null(it);
    assert_int_equal(it->kind, 1);
    free(it);
    wait_for(&p, 3); /* the filler made a replacement */
    assert_int_equal(atomic_load(&w.made), 4);
    want = 5; /* no such kind: nothing fits */
    assert_null(pl_pool_take(&p, fit_kind, &want));
    pl_pool_stop(&p);
    assert_int_equal(atomic_load(&w.discarded), 3); /* the waiting ones */
}

/* What Describe reports of a pool: waiting, made, taken (usable ones
 * only), missed, and a make time once one was made. */
static void test_stats(void **state) {
    (void)state;
    struct pl_pool never = {0};
    struct pl_pool_stats st;
    pl_pool_stats(&never, &st);
    assert_int_equal(st.made + st.taken + st.missed + st.waiting, 0);
    struct owner w = {.per_kind = {2, 0}};
    struct pl_pool p;
    assert_int_equal(pl_pool_start(&p, &ops, &w), 0);
    wait_for(&p, 2);
    int want = 0;
    free(pl_pool_take(&p, fit_kind, &want));
    wait_for(&p, 2);
    want = 1; /* nothing of that kind: one miss */
    assert_null(pl_pool_take(&p, fit_kind, &want));
    atomic_store(&w.unusable, true);
    want = 0; /* found unusable: dropped, not taken */
    assert_null(pl_pool_take(&p, fit_kind, &want));
    pl_pool_stats(&p, &st);
    assert_int_equal(st.taken, 1);
    assert_int_equal(st.missed, 1);
    assert_true(st.made >= 3);
    assert_true(st.make_ms >= 1); /* rounded up: never 0 once made */
    assert_true(st.refill_per_min > 0);
    pl_pool_stop(&p);
}

static void test_unusable_items_are_dropped_at_take(void **state) {
    (void)state;
    struct owner w = {.per_kind = {2, 0}};
    struct pl_pool p;
    assert_int_equal(pl_pool_start(&p, &ops, &w), 0);
    wait_for(&p, 2);
    atomic_store(&w.unusable, true);
    int want = 0;
    assert_null(pl_pool_take(&p, fit_kind, &want)); /* both tried, both dropped */
    assert_true(atomic_load(&w.discarded) >= 2);
    pl_pool_stop(&p);
    assert_int_equal(atomic_load(&w.made), atomic_load(&w.discarded));
}

static void test_make_failures_are_retried(void **state) {
    (void)state;
    struct owner w = {.per_kind = {1, 0}, .failures_left = 1};
    struct pl_pool p;
    assert_int_equal(pl_pool_start(&p, &ops, &w), 0);
    wait_for(&p, 1); /* after a second's pause */
    assert_int_equal(atomic_load(&w.failures_left), 0);
    pl_pool_stop(&p);
}

static void test_unhealthy_pool_is_flushed_and_refilled(void **state) {
    (void)state;
    struct owner w = {.per_kind = {2, 0}};
    struct pl_pool p;
    assert_int_equal(pl_pool_start(&p, &ops, &w), 0);
    wait_for(&p, 2);
    atomic_store(&w.sick, true);
    uint64_t until = pl_deadline_in_ms(5000);
    while (atomic_load(&w.discarded) < 2 && pl_now_ns() < until)
        pl_sleep_ns(PL_MS(10));
    atomic_store(&w.sick, false);
    assert_true(atomic_load(&w.discarded) >= 2);
    assert_true(atomic_load(&w.health_checks) >= 1);
    wait_for(&p, 2);
    pl_pool_stop(&p);
    assert_int_equal(atomic_load(&w.made), atomic_load(&w.discarded));
}

/* A take holds the refill back until the taker releases it, or until
 * hold_ms has passed. */
static void test_a_take_holds_the_refill(void **state) {
    (void)state;
    struct pl_pool_ops held = ops;
    held.hold_ms = 60000; /* longer than the test: only the release ends it */
    struct owner w = {.per_kind = {1, 0}};
    struct pl_pool p;
    assert_int_equal(pl_pool_start(&p, &held, &w), 0);
    wait_for(&p, 1); /* the first fill is not held */
    int want = 0;
    free(pl_pool_take(&p, fit_kind, &want));
    pl_pool_poke(&p); /* a wake-up is not a release */
    pl_sleep_ns(PL_MS(300));
    assert_int_equal(atomic_load(&w.made), 1);
    assert_int_equal(waiting(&p), 0);
    pl_pool_release(&p);
    wait_for(&p, 1);
    assert_int_equal(atomic_load(&w.made), 2);
    pl_pool_stop(&p);

    held.hold_ms = 50; /* no release: the hold ends by itself */
    struct owner w2 = {.per_kind = {1, 0}};
    assert_int_equal(pl_pool_start(&p, &held, &w2), 0);
    wait_for(&p, 1);
    free(pl_pool_take(&p, fit_kind, &want));
    wait_for(&p, 1);
    assert_int_equal(atomic_load(&w2.made), 2);
    pl_pool_stop(&p);
    pl_pool_release(&p); /* a stopped pool: nothing to do */
}

static void test_flush_and_stop(void **state) {
    (void)state;
    struct pl_pool never = {0};
    pl_pool_flush(&never); /* a pool that never started: nothing to do */
    pl_pool_stop(&never);
    int want = 0;
    assert_null(pl_pool_take(&never, fit_kind, &want));

    struct owner w = {.per_kind = {3, 0}};
    struct pl_pool p;
    assert_int_equal(pl_pool_start(&p, &ops, &w), 0);
    wait_for(&p, 3);
    pl_pool_flush(&p);
    wait_for(&p, 3);
    pl_pool_stop(&p);
    assert_int_equal(atomic_load(&w.made), 6);
    assert_int_equal(atomic_load(&w.discarded), 6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fills_each_kind_and_takes_by_fit),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_unusable_items_are_dropped_at_take),
        cmocka_unit_test(test_make_failures_are_retried),
        cmocka_unit_test(test_unhealthy_pool_is_flushed_and_refilled),
        cmocka_unit_test(test_a_take_holds_the_refill),
        cmocka_unit_test(test_flush_and_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
