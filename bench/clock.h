/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h: what bench.c and engine.c share: the monotonic clock in
 * microseconds and the comparison that sorts a series for its percentiles.
 */
#pragma once
#include <time.h>

static inline double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
