/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.c: the daemon's one clock (clock.h).
 */
#include "clock.h"

#include <errno.h>

uint64_t pl_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t pl_deadline_in_ms(uint64_t ms) {
    return pl_now_ns() + PL_MS(ms);
}

int pl_poll_ms_until(uint64_t deadline_ns) {
    if (deadline_ns == 0)
        return -1;
    uint64_t now = pl_now_ns();
    if (now >= deadline_ns)
        return 0;
    uint64_t ms = (deadline_ns - now + 999999ull) / 1000000ull;
    return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

struct timespec pl_timespec_of(uint64_t deadline_ns) {
    return (struct timespec){.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                             .tv_nsec = (long)(deadline_ns % 1000000000ull)};
}

int pl_cond_init_monotonic(pthread_cond_t *cond) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int r = pthread_cond_init(cond, &ca);
    pthread_condattr_destroy(&ca);
    return r == 0 ? 0 : -r;
}

void pl_sleep_ns(uint64_t ns) {
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}
