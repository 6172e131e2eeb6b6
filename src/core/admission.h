/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admission.h: the capacity check just before a run starts.
 *
 * Three limits, all shed at once (never queued):
 *   - a per-caller token bucket (SANDBOX_RATE_PER_MIN, burst
 *     SANDBOX_RATE_BURST)                                  -> RATE_LIMITED
 *   - the global in-flight cap: min(SANDBOX_MAX_CONCURRENT, total memory
 *     budget / per-run allowance)                          -> AT_CAPACITY
 *   - the caller's own in-flight cap (SANDBOX_PER_KEY_CONCURRENT)
 *                                                          -> AT_CAPACITY
 * The clock is injected so tests can drive the bucket without sleeping.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "errors.h"

/* Nanoseconds on a monotonic clock (the daemon's is pl_now_ns, clock.h). */
typedef uint64_t (*pl_clock_fn)(void *userdata);

struct pl_admission_limits {
    unsigned capacity;     /* global in-flight cap (already min'd with memory) */
    unsigned per_key;      /* one caller's in-flight cap */
    unsigned rate_per_min; /* bucket refill rate */
    unsigned burst;        /* bucket size */
};

struct pl_admission;

/* clock may be NULL for pl_now_ns.  0, -EINVAL (a zero limit) or -ENOMEM. */
int pl_admission_new(const struct pl_admission_limits *limits, pl_clock_fn clock, void *userdata,
                     struct pl_admission **ret_admission);
void pl_admission_free(struct pl_admission *adm);

/*
 * Take a slot for principal.  Returns 0 when admitted (the caller must call
 * pl_admission_release exactly once), or < 0 with err set to RATE_LIMITED,
 * AT_CAPACITY or SHUTTING_DOWN.
 */
int pl_admission_acquire(struct pl_admission *adm, const char *principal, struct pl_error *err);
void pl_admission_release(struct pl_admission *adm, const char *principal);

/* Explain's two: spend one of principal's tokens and take no slot
 * (RATE_LIMITED, SHUTTING_DOWN); and what acquire would answer now, with
 * nothing taken or spent (a token must be there, a slot free). */
int pl_admission_spend(struct pl_admission *adm, const char *principal, struct pl_error *err);
int pl_admission_peek(struct pl_admission *adm, const char *principal, struct pl_error *err);

/* Runs in flight now. */
unsigned pl_admission_in_flight(struct pl_admission *adm);

/* Refuse every later acquire with SHUTTING_DOWN. */
void pl_admission_close(struct pl_admission *adm);

/* Wait until no run is in flight or timeout_ms passes (on pl_now_ns's clock,
 * whatever clock the admission was given); returns in-flight count left. */
unsigned pl_admission_wait_idle(struct pl_admission *adm, unsigned timeout_ms);
