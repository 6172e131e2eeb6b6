/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reaper.c: sandboxes nobody holds.  OpenShell sandboxes never expire, so
 * every one plimsoll makes carries its labels: made by plimsoll, which
 * instance, which run, and its run's deadline.  This instance's sandboxes
 * that no run holds are deleted at once; another instance's only once
 * their declared deadline plus OSH_FOREIGN_GRACE_S has passed (that
 * instance may still be using it until then).  A sandbox without the
 * labels is never touched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/log.h"
#include "osh_int.h"

int osh_reap_once(void *state, struct pl_error *err) {
    struct osh_state *s = state;
    struct osh_listed *l = NULL;
    size_t n = 0;
    if (osh_list_managed(s, &l, &n, err) < 0)
        return pl_error_wrap(err, "listing plimsoll's sandboxes: ");
    uint64_t now = (uint64_t)time(NULL);
    int deleted = 0;
    for (size_t i = 0; i < n; i++) {
        bool ours = strcmp(l[i].instance, s->set.instance) == 0;
        if (ours && ph_tracked(&s->books, l[i].run))
            continue;
        if (!ours && l[i].deadline_s + OSH_FOREIGN_GRACE_S > now)
            continue;
        struct pl_error e = {0};
        if (osh_delete(s, l[i].name, &e) == 0) {
            deleted++;
            pl_log("info",
                   ours ? "reaped an untracked sandbox"
                        : "reaped another instance's "
                          "sandbox past its lifetime",
                   json_pack("{s:s, s:s}", "sandbox", l[i].name, "instance", l[i].instance));
        }
    }
    free(l);
    return deleted;
}
