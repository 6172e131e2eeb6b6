/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reaper.c: sandboxes nobody tracks.  A create whose answer was lost, a
 * delete that failed, a daemon that died mid-run: each leaves a sandbox
 * that costs money until its timeout.  Every sandbox's display name starts
 * with this instance's prefix (recorded before the create is sent), so the
 * reaper lists them and deletes those no run holds, at startup and then
 * periodically.  Sandboxes of other instances (another prefix) are never
 * touched.
 */
#include <stdio.h>
#include <string.h>

#include "../../core/log.h"
#include "dc_int.h"

int dc_reap_once(void *state, struct pl_error *err) {
    struct dc_state *s = state;
    json_t *list = NULL;
    if (dc_list_ours(s, &list, err) < 0)
        return pl_error_wrap(err, "listing this instance's sandboxes: ");
    size_t i, plen = strlen(s->set.prefix);
    json_t *sb;
    int deleted = 0;
    json_array_foreach(list, i, sb) {
        const char *uid = json_string_value(json_object_get(sb, "uid"));
        const char *dn = json_string_value(json_object_get(sb, "displayName"));
        if (!uid || !dn || strncmp(dn, s->set.prefix, plen) != 0 ||
            strspn(uid, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") !=
                strlen(uid))
            continue;
        if (ph_tracked(&s->books, dn + plen))
            continue;
        struct pl_error e = {0};
        if (dc_delete(s, uid, &e) == 0) {
            deleted++;
            pl_log("info", "reaped an untracked sandbox",
                   json_pack("{s:s, s:s}", "sandbox", uid, "name", dn));
        }
    }
    json_decref(list);
    return deleted;
}
