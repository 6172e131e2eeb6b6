/* SPDX-License-Identifier: Apache-2.0 */
/*
 * books.h: what a hosted provider keeps about its remote sandboxes
 * (docs/internals/hosted.md, "Books"): the runs holding one right now (the
 * reaper spares them), the last failure of the service (readiness reads it
 * and calls nothing), and the reaper's thread, which deletes sandboxes
 * carrying this instance's mark that no run holds.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../core/errors.h"

#define PH_MAX_TRACKED 1024

/* lock guards the tracked runs, the outage and reaper_stop; the reaper's
 * other fields are set by ph_reaper_start before its thread runs.  Tracking
 * and the outage are safe from any thread; start, stop and destroy belong
 * to the provider's create and destroy. */
struct ph_books {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    const char *service; /* "E2B's API", for messages */
    char tracked[PH_MAX_TRACKED][64];
    size_t ntracked;
    char outage[256];
    /* the reaper */
    pthread_t reaper;
    bool reaper_started, reaper_stop;
    unsigned interval_s;
    int (*reap_once)(void *ud, struct pl_error *err); /* deleted count, or < 0 */
    void *ud;
};

/* Set b up; service (borrowed, static) names the service in messages. */
void ph_books_init(struct ph_books *b, const char *service);
/* Stops the reaper first (if it started), then frees the lock; b must have
 * been initialised (b itself may not be NULL). */
void ph_books_destroy(struct ph_books *b);

/* Runs whose sandboxes the reaper spares, by run id (copied, 63 bytes at
 * most), from before the create is sent until the delete.  ph_track is -1
 * (no err) when PH_MAX_TRACKED are tracked; ph_untrack ignores an unknown
 * id. */
int ph_track(struct ph_books *b, const char *run_id);
void ph_untrack(struct ph_books *b, const char *run_id);
bool ph_tracked(struct ph_books *b, const char *run_id);

/* The service's last failure (its message copied; NULL: it answered). */
void ph_outage(struct ph_books *b, const struct pl_error *why);
/* NOT_READY with the last failure, or 0. */
int ph_books_ready(struct ph_books *b, struct pl_error *err);

/* A pass of reap_once every interval_s (every 5 s while the service looks
 * down, so readiness comes back soon), on a thread of its own, ud
 * borrowed until ph_reaper_stop; a failed pass is logged.  INTERNAL when
 * the thread cannot start.  ph_reaper_stop wakes and joins it (no-op when
 * it never started). */
int ph_reaper_start(struct ph_books *b, unsigned interval_s,
                    int (*reap_once)(void *ud, struct pl_error *err), void *ud,
                    struct pl_error *err);
void ph_reaper_stop(struct ph_books *b);
