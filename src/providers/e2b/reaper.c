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

#include "../../core/log.h"
#include "e2b_int.h"

int eb_reap_once(void *state, struct pl_error *err) {
    struct e2b_state *s = state;
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
        if (run && ph_tracked(&s->books, run))
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
