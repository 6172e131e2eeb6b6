/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.h: a warm pool.  Things that are slow to make (a started container,
 * a session's sandbox with its interpreters up) are made ahead by one
 * filler thread and each handed to exactly one taker.
 *
 * Items have a kind (a small number the owner gives meaning to: an image,
 * a set of interpreters).  The owner says which kind to make next, or that
 * the pool is full (choose); the pool makes it (make) outside its lock,
 * keeps it, and on a take gives the best fitting one (fit).  An item that
 * is no longer usable when taken is dropped and the next one tried.  While
 * full, the pool asks every second whether what it holds is still sound
 * (healthy; optional) and drops everything when it is not.  On stop the
 * filler is joined and every waiting item dropped.  docs/internals/pool.md.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define PL_POOL_MAX 128 /* items at most, all kinds together */
#define PL_POOL_FULL (-1)

struct pl_pool_ops {
    /*
     * The kind to make next, given how many of each kind wait
     * (waiting[kind], kinds below PL_POOL_KINDS) and in all; PL_POOL_FULL
     * when nothing is to be made.  Called with the pool's lock held: it
     * must not call into the pool.
     */
    int (*choose)(void *owner, const unsigned *waiting, unsigned total);
    /* Make one item of kind: 0 and *ret_item, or < 0 (retried a second later). */
    int (*make)(void *owner, int kind, void **ret_item);
    /* Drop an item nobody will use. */
    void (*discard)(void *owner, void *item);
    /* Optional: whether a waiting item can still be used (called at take). */
    bool (*usable)(void *owner, void *item);
    /* Optional: while full, once a second: whether what waits is still sound. */
    bool (*healthy)(void *owner);
    /*
     * After a take, the refill waits this long (0: not at all) or until
     * the taker calls pl_pool_release, whichever is first: making an item
     * (a sandbox's start) competes with the taken one's work for the same
     * cores, and the taker wants its answer first.
     */
    unsigned hold_ms;
};

#define PL_POOL_KINDS 8

struct pl_pool {
    const struct pl_pool_ops *ops;
    void *owner;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    void *items[PL_POOL_MAX];
    int kinds[PL_POOL_MAX];
    unsigned n;
    bool stop;
    bool started;
    pthread_t filler;
    /* What it did (the lock): pl_pool_stats. */
    uint64_t made, taken, missed;
    uint64_t hold_until; /* no making before this (monotonic ns; the lock) */
    uint64_t make_ns;    /* the recent time to make one (a moving average), 0 before any */
};

/* What a pool did since it started, for Describe. */
struct pl_pool_stats {
    unsigned waiting;        /* items waiting now */
    uint64_t made;           /* items made and kept */
    uint64_t taken;          /* items handed to a taker */
    uint64_t missed;         /* takes that found nothing fitting (the taker made its own) */
    uint32_t make_ms;        /* recent time to make one item, 0 when none was made yet */
    uint32_t refill_per_min; /* items a minute the one filler makes at that pace */
};

/* Its figures now (zero for a pool that never started). */
void pl_pool_stats(struct pl_pool *p, struct pl_pool_stats *ret);

/* Set up and start the filler thread.  0, or -errno (nothing started). */
int pl_pool_start(struct pl_pool *p, const struct pl_pool_ops *ops, void *owner);

/*
 * Take the waiting item that fits best: fit(item, kind, want) scores it,
 * 0 not at all, higher better; the first of the highest score is taken.
 * NULL when none fits.  The filler is woken to make a replacement.  An
 * item the owner finds unusable is dropped and the next tried, at most as
 * many times as items waited.
 */
void *pl_pool_take(struct pl_pool *p, int (*fit)(void *item, int kind, const void *want),
                   const void *want);

/* Drop every waiting item (the owner found them unusable, e.g. its engine
 * restarted); the filler makes new ones. */
void pl_pool_flush(struct pl_pool *p);

/* The taker's work is done: the refill held back by its take
 * (pl_pool_ops.hold_ms) may start now. */
void pl_pool_release(struct pl_pool *p);

/* Wake the filler: what choose would answer may have changed. */
void pl_pool_poke(struct pl_pool *p);

/* Stop the filler, join it, drop every waiting item.  Safe on a pool that
 * never started (zeroed). */
void pl_pool_stop(struct pl_pool *p);
