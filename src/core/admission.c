/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admission.c: in-flight counting and per-caller token buckets.
 *
 * One mutex guards everything; the work under it is a hash lookup and a few
 * additions, far below the cost of any run.  Callers are bounded by the
 * keys file, so the per-caller table never grows past the number of
 * principals that ever authenticated.
 */
#include "admission.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

#define BUCKETS 256u

struct caller {
    struct caller *next;
    unsigned in_flight;
    double tokens;
    uint64_t refilled_ns;
    char principal[];
};

struct pl_admission {
    struct pl_admission_limits limits;
    pl_clock_fn clock;
    void *clock_ud;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    unsigned in_flight;
    bool closed;
    struct caller *table[BUCKETS];
};

/* The default clock: the daemon's (clock.h). */
static uint64_t monotonic_ns(void *ud) {
    (void)ud;
    return pl_now_ns();
}

static unsigned hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % BUCKETS;
}

int pl_admission_new(const struct pl_admission_limits *limits, pl_clock_fn clock, void *ud,
                     struct pl_admission **ret_admission) {
    if (!limits || limits->capacity == 0 || limits->per_key == 0 || limits->rate_per_min == 0 ||
        limits->burst == 0)
        return -EINVAL;
    struct pl_admission *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->limits = *limits;
    a->clock = clock ? clock : monotonic_ns;
    a->clock_ud = ud;
    int r = pl_cond_init_monotonic(&a->idle);
    if (r < 0) {
        free(a);
        return r;
    }
    pthread_mutex_init(&a->lock, NULL);
    *ret_admission = a;
    return 0;
}

void pl_admission_free(struct pl_admission *a) {
    if (!a)
        return;
    for (unsigned i = 0; i < BUCKETS; i++) {
        struct caller *c = a->table[i];
        while (c) {
            struct caller *n = c->next;
            free(c);
            c = n;
        }
    }
    pthread_cond_destroy(&a->idle);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

/* Find or create; called with the lock held.  NULL only on OOM. */
static struct caller *caller_get(struct pl_admission *a, const char *principal, uint64_t now) {
    unsigned h = hash(principal);
    for (struct caller *c = a->table[h]; c; c = c->next)
        if (strcmp(c->principal, principal) == 0)
            return c;
    size_t n = strlen(principal);
    struct caller *c = calloc(1, sizeof(*c) + n + 1);
    if (!c)
        return NULL;
    memcpy(c->principal, principal, n + 1);
    c->tokens = a->limits.burst;
    c->refilled_ns = now;
    c->next = a->table[h];
    a->table[h] = c;
    return c;
}

enum admit_mode { ADMIT_TAKE, ADMIT_SPEND, ADMIT_PEEK };

/* Acquire's checks in its order: TAKE spends a token and takes a slot,
 * SPEND spends a token only, PEEK changes nothing (a token must be there).
 * Called with the lock held. */
static int admit_locked(struct pl_admission *a, const char *principal, enum admit_mode mode,
                        uint64_t now, struct pl_error *err) {
    if (a->closed)
        return pl_error_set(err, PL_REASON_SHUTTING_DOWN, "the daemon is shutting down");
    struct caller *c = caller_get(a, principal, now);
    if (!c)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    if (now > c->refilled_ns) {
        c->tokens += (double)(now - c->refilled_ns) * a->limits.rate_per_min / 60e9;
        if (c->tokens > a->limits.burst)
            c->tokens = a->limits.burst;
    }
    c->refilled_ns = now;
    if (c->tokens < 1.0)
        return pl_error_set(err, PL_REASON_RATE_LIMITED,
                            "rate limit of %u runs per minute (burst %u) reached for this caller",
                            a->limits.rate_per_min, a->limits.burst);
    if (mode == ADMIT_SPEND) {
        c->tokens -= 1.0;
        return 0;
    }
    if (mode == ADMIT_TAKE)
        c->tokens -= 1.0;
    if (a->in_flight >= a->limits.capacity)
        return pl_error_set(err, PL_REASON_AT_CAPACITY, "all %u run slots are busy",
                            a->limits.capacity);
    if (c->in_flight >= a->limits.per_key)
        return pl_error_set(err, PL_REASON_AT_CAPACITY,
                            "this caller already has %u runs in progress (its cap)",
                            a->limits.per_key);
    if (mode == ADMIT_TAKE) {
        a->in_flight++;
        c->in_flight++;
    }
    return 0;
}

static int admit(struct pl_admission *a, const char *principal, enum admit_mode mode,
                 struct pl_error *err) {
    uint64_t now = a->clock(a->clock_ud);
    pthread_mutex_lock(&a->lock);
    int r = admit_locked(a, principal, mode, now, err);
    pthread_mutex_unlock(&a->lock);
    return r;
}

int pl_admission_acquire(struct pl_admission *a, const char *principal, struct pl_error *err) {
    return admit(a, principal, ADMIT_TAKE, err);
}

int pl_admission_spend(struct pl_admission *a, const char *principal, struct pl_error *err) {
    return admit(a, principal, ADMIT_SPEND, err);
}

int pl_admission_peek(struct pl_admission *a, const char *principal, struct pl_error *err) {
    return admit(a, principal, ADMIT_PEEK, err);
}

void pl_admission_release(struct pl_admission *a, const char *principal) {
    pthread_mutex_lock(&a->lock);
    struct caller *c = caller_get(a, principal, a->clock(a->clock_ud));
    if (c && c->in_flight > 0)
        c->in_flight--;
    if (a->in_flight > 0)
        a->in_flight--;
    if (a->in_flight == 0)
        pthread_cond_broadcast(&a->idle);
    pthread_mutex_unlock(&a->lock);
}

unsigned pl_admission_in_flight(struct pl_admission *a) {
    pthread_mutex_lock(&a->lock);
    unsigned n = a->in_flight;
    pthread_mutex_unlock(&a->lock);
    return n;
}

void pl_admission_close(struct pl_admission *a) {
    pthread_mutex_lock(&a->lock);
    a->closed = true;
    pthread_mutex_unlock(&a->lock);
}

unsigned pl_admission_wait_idle(struct pl_admission *a, unsigned timeout_ms) {
    struct timespec deadline = pl_timespec_of(pl_deadline_in_ms(timeout_ms));
    pthread_mutex_lock(&a->lock);
    while (a->in_flight > 0) {
        if (pthread_cond_timedwait(&a->idle, &a->lock, &deadline) == ETIMEDOUT)
            break;
    }
    unsigned n = a->in_flight;
    pthread_mutex_unlock(&a->lock);
    return n;
}
