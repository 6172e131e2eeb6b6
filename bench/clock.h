/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h: what bench.c and engine.c share: the monotonic clock in
 * microseconds, and a series' figures as the JSON fields both print.
 */
#pragma once
#include <stdio.h>
#include <stdlib.h>
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

/* Sort the series t (n > 0, microseconds) and print its figures as JSON
 * fields, without braces: n, p50_us, p95_us, p99_us, mean_us, min_us. */
static inline void print_series(double *t, int n) {
    double sum = 0;
    qsort(t, (size_t)n, sizeof(*t), cmp_double);
    for (int i = 0; i < n; i++)
        sum += t[i];
    printf("\"n\":%d,\"p50_us\":%.1f,\"p95_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f,"
           "\"min_us\":%.1f",
           n, t[n / 2], t[(int)(n * 0.95)], t[(int)(n * 0.99)], sum / n, t[0]);
}
