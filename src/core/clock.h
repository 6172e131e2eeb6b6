/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h: the daemon's one clock and one time unit.
 *
 * Every duration and deadline inside plimsoll is a uint64_t count of
 * nanoseconds on CLOCK_MONOTONIC, which never moves backwards (a run
 * record's end is its start plus such a duration; docs/records.md).  A
 * deadline of 0 means "none".  Settings and the API speak milliseconds;
 * they are converted at the edge with PL_MS.  docs/internals/clock.md.
 */
#pragma once

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds as nanoseconds. */
#define PL_MS(ms) ((uint64_t)(ms)*1000000ull)

/* Nanoseconds on CLOCK_MONOTONIC since an arbitrary point (boot). */
uint64_t pl_now_ns(void);

/* The deadline ms milliseconds from now. */
uint64_t pl_deadline_in_ms(uint64_t ms);

/*
 * What is left until deadline_ns, rounded up to whole milliseconds for
 * poll(2): 0 once it has passed, -1 (wait forever) when deadline_ns is 0,
 * at most INT32_MAX.
 */
int pl_poll_ms_until(uint64_t deadline_ns);

/*
 * deadline_ns (on CLOCK_MONOTONIC) as an absolute timespec, for
 * pthread_cond_timedwait on a condition variable whose clock attribute is
 * CLOCK_MONOTONIC (pl_cond_init_monotonic).
 */
struct timespec pl_timespec_of(uint64_t deadline_ns);

/* A condition variable whose timed waits count on CLOCK_MONOTONIC. */
int pl_cond_init_monotonic(pthread_cond_t *cond);

/* Sleep ns nanoseconds (restarted after signals). */
void pl_sleep_ns(uint64_t ns);
