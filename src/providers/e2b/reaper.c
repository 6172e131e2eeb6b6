/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reaper.c: VMs nobody tracks.  A create whose answer was lost, a delete
 * that failed, a daemon that died mid-run: each leaves a VM that costs
 * money until its TTL.  Every VM carries this instance's label, so the
 * reaper lists them (GET /v2/sandboxes filtered by metadata) and deletes
 * those no run holds, at startup and then periodically.  VMs of other
 * instances (another label value) are never touched.
 */
#include <stdio.h>
#include <string.h>

#include "../../core/clock.h"
#include "../../core/log.h"
#include "e2b_int.h"

int eb_reap_once(struct e2b_state *s, struct pl_error *err) {
    json_t *list = NULL;
    if (eb_list_ours(s, &list, err) < 0)
        return pl_error_wrap(err, "listing this instance's VMs: ");
    size_t i;
    json_t *sb;
    int deleted = 0;
    json_array_foreach(list, i, sb) {
        const char *id = json_string_value(json_object_get(sb, "sandboxID"));
        json_t *md = json_object_get(sb, "metadata");
        const char *inst = json_string_value(json_object_get(md, EB_LABEL_INSTANCE));
        const char *run = json_string_value(json_object_get(md, EB_LABEL_RUN));
        /* The filter is the server's; the label is checked again here. */
        if (!id || !inst || strcmp(inst, s->set.instance) != 0)
            continue;
        if (run && eb_tracked(s, run))
            continue;
        struct pl_error e = {0};
        if (eb_delete(s, id, &e) == 0) {
            deleted++;
            pl_log("info", "reaped an untracked VM",
                   json_pack("{s:s, s:s}", "sandbox", id, "run", run ? run : ""));
        }
    }
    json_decref(list);
    return deleted;
}

static void *reaper_main(void *arg) {
    struct e2b_state *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->reaper_stop) {
        /* Sooner while E2B looks down: readiness waits on this pass. */
        uint64_t wait_s = s->outage[0] ? 5 : s->set.reap_interval_s;
        struct timespec until = pl_timespec_of(pl_deadline_in_ms(wait_s * 1000));
        int rc = 0;
        while (!s->reaper_stop && rc == 0)
            rc = pthread_cond_timedwait(&s->cond, &s->lock, &until);
        if (s->reaper_stop)
            break;
        pthread_mutex_unlock(&s->lock);
        struct pl_error err = {0};
        if (eb_reap_once(s, &err) < 0)
            pl_log("warn", "the VM reaper's pass failed", json_pack("{s:s}", "error", err.message));
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int eb_reaper_start(struct e2b_state *s, struct pl_error *err) {
    if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "cannot start the VM reaper");
    s->reaper_started = true;
    return 0;
}

void eb_reaper_stop(struct e2b_state *s) {
    if (!s->reaper_started)
        return;
    pthread_mutex_lock(&s->lock);
    s->reaper_stop = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->reaper, NULL);
    s->reaper_started = false;
}
