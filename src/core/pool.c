/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.c: the warm pool.  See pool.h.
 */
#include "pool.h"

#include <errno.h>
#include <string.h>

#include "clock.h"

/* Wait on the pool's condition for at most ms (the lock held). */
static int wait_ms(struct pl_pool *p, unsigned ms) {
    struct timespec ts = pl_timespec_of(pl_deadline_in_ms(ms));
    return pthread_cond_timedwait(&p->cond, &p->lock, &ts);
}

static void *filler_main(void *arg) {
    struct pl_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        unsigned waiting[PL_POOL_KINDS] = {0};
        for (unsigned i = 0; i < p->n; i++)
            waiting[p->kinds[i]]++;
        int kind = p->n >= PL_POOL_MAX ? PL_POOL_FULL : p->ops->choose(p->owner, waiting, p->n);
        if (kind == PL_POOL_FULL || kind < 0 || kind >= PL_POOL_KINDS) {
            if (!p->ops->healthy) {
                pthread_cond_wait(&p->cond, &p->lock);
                continue;
            }
            /* Full: look once a second whether what waits is still sound. */
            if (wait_ms(p, 1000) == ETIMEDOUT && !p->stop) {
                pthread_mutex_unlock(&p->lock);
                if (!p->ops->healthy(p->owner))
                    pl_pool_flush(p);
                pthread_mutex_lock(&p->lock);
            }
            continue;
        }
        if (p->hold_until > pl_now_ns()) { /* a taker's work goes first */
            struct timespec ts = pl_timespec_of(p->hold_until);
            pthread_cond_timedwait(&p->cond, &p->lock, &ts);
            continue;
        }
        pthread_mutex_unlock(&p->lock);
        void *item = NULL;
        uint64_t t0 = pl_now_ns();
        int r = p->ops->make(p->owner, kind, &item);
        uint64_t took = pl_now_ns() - t0;
        pthread_mutex_lock(&p->lock);
        if (r == 0) /* a moving average over about the last eight */
            p->make_ns = p->make_ns ? p->make_ns - p->make_ns / 8 + took / 8 : took;
        if (r < 0) {
            wait_ms(p, 1000); /* the owner's engine may be away: again in a second */
            continue;
        }
        unsigned again[PL_POOL_KINDS] = {0};
        for (unsigned i = 0; i < p->n; i++)
            again[p->kinds[i]]++;
        /* Still wanted?  A take or a flush may have changed the answer, but
         * only a stop or a full pool makes the new item surplus. */
        if (p->stop || p->n >= PL_POOL_MAX || p->ops->choose(p->owner, again, p->n) < 0) {
            pthread_mutex_unlock(&p->lock);
            p->ops->discard(p->owner, item);
            pthread_mutex_lock(&p->lock);
            continue;
        }
        p->items[p->n] = item;
        p->kinds[p->n] = kind;
        p->n++;
        p->made++;
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int pl_pool_start(struct pl_pool *p, const struct pl_pool_ops *ops, void *owner) {
    memset(p, 0, sizeof(*p));
    p->ops = ops;
    p->owner = owner;
    pthread_mutex_init(&p->lock, NULL);
    pl_cond_init_monotonic(&p->cond);
    int r = pthread_create(&p->filler, NULL, filler_main, p);
    if (r != 0) {
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        p->ops = NULL;
        return -r;
    }
    p->started = true;
    return 0;
}

void *pl_pool_take(struct pl_pool *p, int (*fit)(void *item, int kind, const void *want),
                   const void *want) {
    if (!p->started)
        return NULL;
    /* At most as many tries as items waited at first: the filler's new
     * ones are for the next taker, not a loop that never ends. */
    for (unsigned tries = 0, most = PL_POOL_MAX; tries < most; tries++) {
        void *item = NULL;
        pthread_mutex_lock(&p->lock);
        if (tries == 0)
            most = p->n;
        int best = 0;
        unsigned pick = 0;
        for (unsigned i = 0; i < p->n; i++) {
            int score = fit(p->items[i], p->kinds[i], want);
            if (score > best) {
                best = score;
                pick = i;
            }
        }
        if (best > 0) {
            item = p->items[pick];
            p->n--;
            p->items[pick] = p->items[p->n];
            p->kinds[pick] = p->kinds[p->n];
            if (p->ops->hold_ms)
                p->hold_until = pl_deadline_in_ms(p->ops->hold_ms);
        } else if (tries == 0) {
            p->missed++;
        }
        pthread_cond_broadcast(&p->cond); /* the filler makes another */
        pthread_mutex_unlock(&p->lock);
        if (!item)
            return NULL;
        if (!p->ops->usable || p->ops->usable(p->owner, item)) {
            pthread_mutex_lock(&p->lock);
            p->taken++;
            pthread_mutex_unlock(&p->lock);
            return item;
        }
        p->ops->discard(p->owner, item); /* e.g. a container the engine lost */
    }
    return NULL;
}

void pl_pool_flush(struct pl_pool *p) {
    if (!p->started)
        return;
    void *items[PL_POOL_MAX];
    pthread_mutex_lock(&p->lock);
    unsigned n = p->n;
    memcpy(items, p->items, n * sizeof(items[0]));
    p->n = 0;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < n; i++)
        p->ops->discard(p->owner, items[i]);
}

void pl_pool_release(struct pl_pool *p) {
    if (!p->started)
        return;
    pthread_mutex_lock(&p->lock);
    p->hold_until = 0;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void pl_pool_poke(struct pl_pool *p) {
    if (!p->started)
        return;
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void pl_pool_stop(struct pl_pool *p) {
    if (!p->started)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->filler, NULL);
    for (unsigned i = 0; i < p->n; i++)
        p->ops->discard(p->owner, p->items[i]);
    p->n = 0;
    p->started = false;
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
}

void pl_pool_stats(struct pl_pool *p, struct pl_pool_stats *ret) {
    *ret = (struct pl_pool_stats){0};
    if (!p->started)
        return;
    pthread_mutex_lock(&p->lock);
    ret->waiting = p->n;
    ret->made = p->made;
    ret->taken = p->taken;
    ret->missed = p->missed;
    uint64_t ns = p->make_ns;
    pthread_mutex_unlock(&p->lock);
    if (ns) {
        uint64_t ms = (ns + 999999) / 1000000;
        ret->make_ms = ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
        uint64_t per_min = 60000000000ull / ns;
        ret->refill_per_min = per_min > UINT32_MAX ? UINT32_MAX : (uint32_t)per_min;
    }
}
