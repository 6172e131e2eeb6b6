/* SPDX-License-Identifier: Apache-2.0 */
/*
 * books.c: tracked runs, the last outage and the reaper's thread of a
 * hosted provider (books.h).
 */
#include "books.h"

#include <stdio.h>
#include <string.h>

#include "../../core/clock.h"
#include "../../core/log.h"

void ph_books_init(struct ph_books *b, const char *service) {
    memset(b, 0, sizeof(*b));
    pthread_mutex_init(&b->lock, NULL);
    pl_cond_init_monotonic(&b->cond);
    b->service = service;
}

void ph_books_destroy(struct ph_books *b) {
    ph_reaper_stop(b);
    pthread_cond_destroy(&b->cond);
    pthread_mutex_destroy(&b->lock);
}

int ph_track(struct ph_books *b, const char *run_id) {
    int rc = -1;
    pthread_mutex_lock(&b->lock);
    if (b->ntracked < PH_MAX_TRACKED) {
        snprintf(b->tracked[b->ntracked++], sizeof(b->tracked[0]), "%s", run_id);
        rc = 0;
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

void ph_untrack(struct ph_books *b, const char *run_id) {
    pthread_mutex_lock(&b->lock);
    for (size_t i = 0; i < b->ntracked; i++)
        if (strcmp(b->tracked[i], run_id) == 0) {
            memmove(b->tracked[i], b->tracked[b->ntracked - 1], sizeof(b->tracked[0]));
            b->ntracked--;
            break;
        }
    pthread_mutex_unlock(&b->lock);
}

bool ph_tracked(struct ph_books *b, const char *run_id) {
    bool found = false;
    pthread_mutex_lock(&b->lock);
    for (size_t i = 0; i < b->ntracked && !found; i++)
        found = strcmp(b->tracked[i], run_id) == 0;
    pthread_mutex_unlock(&b->lock);
    return found;
}

void ph_outage(struct ph_books *b, const struct pl_error *why) {
    pthread_mutex_lock(&b->lock);
    if (why)
        snprintf(b->outage, sizeof(b->outage), "%.255s", why->message);
    else
        b->outage[0] = '\0';
    pthread_mutex_unlock(&b->lock);
}

int ph_books_ready(struct ph_books *b, struct pl_error *err) {
    int rc = 0;
    pthread_mutex_lock(&b->lock);
    if (b->outage[0])
        rc = pl_error_set(err, PL_REASON_NOT_READY, "the last call to %s failed: %s", b->service,
                          b->outage);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

static void *reaper_main(void *arg) {
    struct ph_books *b = arg;
    pthread_mutex_lock(&b->lock);
    while (!b->reaper_stop) {
        uint64_t wait_s = b->outage[0] ? 5 : b->interval_s;
        struct timespec until = pl_timespec_of(pl_deadline_in_ms(wait_s * 1000));
        int rc = 0;
        while (!b->reaper_stop && rc == 0)
            rc = pthread_cond_timedwait(&b->cond, &b->lock, &until);
        if (b->reaper_stop)
            break;
        pthread_mutex_unlock(&b->lock);
        struct pl_error err = {0};
        if (b->reap_once(b->ud, &err) < 0)
            pl_log("warn", "the reaper's pass failed",
                   json_pack("{s:s, s:s}", "service", b->service, "error", err.message));
        pthread_mutex_lock(&b->lock);
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

int ph_reaper_start(struct ph_books *b, unsigned interval_s,
                    int (*reap_once)(void *ud, struct pl_error *err), void *ud,
                    struct pl_error *err) {
    b->interval_s = interval_s;
    b->reap_once = reap_once;
    b->ud = ud;
    if (pthread_create(&b->reaper, NULL, reaper_main, b) != 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "cannot start the reaper");
    b->reaper_started = true;
    return 0;
}

void ph_reaper_stop(struct ph_books *b) {
    if (!b->reaper_started)
        return;
    pthread_mutex_lock(&b->lock);
    b->reaper_stop = true;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
    pthread_join(b->reaper, NULL);
    b->reaper_started = false;
}
