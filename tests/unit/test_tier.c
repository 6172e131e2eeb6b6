/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_tier.c: the isolation tiers' names and order, the contract every
 * answer and every floor is judged by (none < process < container <
 * kernel < vm): each name parses to its tier and back, nothing else
 * parses, and a tier out of range is named "none", never a stronger one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../src/core/tier.h"

static const char *const order[] = {"none", "process", "container", "kernel", "vm"};

static void test_each_name_parses_to_its_place(void **state) {
    (void)state;
    assert_int_equal(sizeof(order) / sizeof(order[0]), PL_TIER__COUNT);
    for (unsigned i = 0; i < PL_TIER__COUNT; i++) {
        enum pl_tier t = PL_TIER__COUNT;
        assert_int_equal(pl_tier_parse(order[i], &t), 0);
        assert_int_equal(t, i); /* the order is the contract */
        assert_string_equal(pl_tier_name(t), order[i]);
    }
    assert_true(PL_TIER_NONE < PL_TIER_PROCESS && PL_TIER_PROCESS < PL_TIER_CONTAINER &&
                PL_TIER_CONTAINER < PL_TIER_KERNEL && PL_TIER_KERNEL < PL_TIER_VM);
}

static void test_nothing_else_parses(void **state) {
    (void)state;
    static const char *const bad[] = {"",     "VM",  "Kernel", "vm ",    " vm",   "microvm", "proc",
                                      "kern", "vmm", "none\n", "gvisor", "runsc", "-1",      "4"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        enum pl_tier t = PL_TIER_KERNEL;
        assert_int_equal(pl_tier_parse(bad[i], &t), -1);
        assert_int_equal(t, PL_TIER_KERNEL); /* left as it was */
    }
    enum pl_tier t = PL_TIER_VM;
    assert_int_equal(pl_tier_parse(NULL, &t), -1);
    assert_int_equal(t, PL_TIER_VM);
}

static void test_out_of_range_is_named_none(void **state) {
    (void)state;
    assert_string_equal(pl_tier_name(PL_TIER__COUNT), "none");
    assert_string_equal(pl_tier_name((enum pl_tier) - 1), "none");
    assert_string_equal(pl_tier_name((enum pl_tier)1000), "none");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_name_parses_to_its_place),
        cmocka_unit_test(test_nothing_else_parses),
        cmocka_unit_test(test_out_of_range_is_named_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
