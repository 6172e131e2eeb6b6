/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proof.c: the startup test (docs/providers/dockercloud.md, "What the
 * startup test proves").  First the token, exchanged; then the permissions
 * a run needs, each by the cheapest documented call that needs it (no call
 * lists a token's permissions), before anything is created: read (list one
 * sandbox), network-policy read (the account's policy, which must be
 * deny-all with nothing allowed), delete (the delete of a sandbox that does
 * not exist); then one throwaway sandbox, which proves create, credential
 * and delete: created as every run's is, its seal read back, a directory
 * made and files uploaded into it, the guest's uid learned by a project of
 * one step, then the test project run through exactly a project step's
 * path, the cleanup between its steps included, egress tried from inside,
 * and the delete read back.  The daemon serves nothing unless all of it
 * holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/clock.h"
#include "../../core/ids.h"
#include "dc_int.h"

/* A probe of one permission: method on path (with extra headers), which
 * must answer ok or also_ok; a 403 names the permission. */
static int probe(struct dc_state *s, const char *method, const char *path, const char **extra,
                 long ok, long also_ok, const char *permission, struct pl_error *err) {
    json_t *j = NULL;
    long st = 0;
    if (dc_call(s, method, path, NULL, extra, &st, &j, NULL, 0, err) < 0)
        return -1;
    char text[400];
    dc_error_text(j, text, sizeof(text));
    json_decref(j);
    if (st == 403)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the token lacks the %s permission (%s %s answered 403: %s)",
                            permission, method, path, text);
    if (st != ok && st != also_ok)
        return pl_error_set(err, PL_REASON_INTERNAL, "%s %s answered %ld, not %ld: %s", method,
                            path, st, ok, text);
    return 0;
}

/* The delete permission, with nothing to delete: DeleteSandbox needs
 * sandboxesDelete (api.yaml, deleteSandbox's x-sbx-required-permissions)
 * and answers an absent sandbox with an empty message (204).  The id is
 * random, so no sandbox has it, and the etag is no sandbox's either. */
static int probe_delete(struct dc_state *s, struct pl_error *err) {
    char id[33], path[64];
    if (pl_random_hex(id, sizeof(id), 16) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
    const char *extra[] = {"If-Match: \"plimsoll-probe\"", NULL};
    return probe(s, "DELETE", path, extra, 204, 404, "sandboxesDelete", err);
}

/* The guest's uid, by a project of one step through the path every
 * project takes (hosted/proofproject.c). */
static int learn_uid(struct dc_state *s, struct dc_sandbox *sb, struct pl_error *err) {
    struct ph_proof_whoami w;
    ph_proof_whoami(&w);
    struct pl_run_ctx ctx = {.timeout_ms = 30000, .output_bytes = 4096};
    struct pl_run_result r = {0};
    int rc = dc_project(s, sb, &ctx, &w.req, pl_deadline_in_ms(ctx.timeout_ms), &r, err);
    if (rc == 0)
        rc = ph_proof_uid(&r, &s->proof.user_uid, err);
    pl_run_result_clear(&r);
    return rc;
}

/* After the delete: read back until the sandbox is gone (404). */
static int gone(struct dc_state *s, const char *uid, struct pl_error *err) {
    char path[160];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", uid);
    uint64_t until = pl_deadline_in_ms(s->set.call_timeout_ms);
    for (;;) {
        json_t *j = NULL;
        long st = 0;
        if (dc_call(s, "GET", path, NULL, NULL, &st, &j, NULL, 0, err) < 0)
            return -1;
        const char *status =
            json_string_value(json_object_get(json_object_get(j, "core"), "status"));
        bool deleting = st == 200 && status && strcmp(status, "deleting") == 0;
        json_decref(j);
        if (st == 404)
            return 0;
        if (!deleting || pl_now_ns() >= until)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the startup sandbox %s is still there after its delete (%ld)", uid,
                                st);
        pl_sleep_ns(100000000ull);
    }
}

int dc_prove(struct dc_state *s, struct pl_error *err) {
    if (dc_exchange_token(s, err) < 0)
        return -1;
    if (probe(s, "GET", "/v1/sandboxes?pageSize=1", NULL, 200, 200, "sandboxesRead", err) < 0 ||
        probe(s, "GET", "/v1/network-policies", NULL, 200, 200, "networkPoliciesRead", err) < 0 ||
        probe_delete(s, err) < 0)
        return -1;
    char guard_net[24] = "";
    if (s->set.guard.url[0])
        snprintf(guard_net, sizeof(guard_net), "%s/32", s->set.guard.ip);
    if (dc_policy_sealed(s, NULL, guard_net, s->proof.account_policy,
                         sizeof(s->proof.account_policy), err) < 0)
        return pl_error_wrap(err, "the account's policy must default to deny-all (the spec's "
                                  "`policy init deny-all`): ");
    char run_id[33];
    if (pl_random_hex(run_id, sizeof(run_id), 16) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    struct dc_sandbox sb;
    if (dc_open(s, run_id, 60000, false, &sb, err) < 0)
        return pl_error_wrap(err, "the startup sandbox: ");
    struct ph_proof_project pp;
    ph_proof_project(&pp, s->set.egress_probe);
    struct pl_run_ctx ctx = {.timeout_ms = 60000, .output_bytes = 64 * 1024};
    struct pl_run_result r = {0};
    /* A directory made through the API, then files uploaded into it. */
    char dir[sizeof(s->set.workdir) + 16];
    snprintf(dir, sizeof(dir), "%s/data/two", s->set.workdir);
    int rc = dc_mkdir(s, &sb, dir, err);
    if (rc == 0)
        rc = learn_uid(s, &sb, err);
    if (rc == 0)
        rc = dc_project(s, &sb, &ctx, &pp.req, pl_deadline_in_ms(ctx.timeout_ms), &r, err);
    unsigned as = 0;
    if (rc == 0)
        rc = ph_proof_judge(&r, s->set.workdir, "SANDBOX_DOCKERCLOUD_WORKDIR", &as, err);
    if (rc == 0 && as != s->proof.user_uid)
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the test project ran as uid %u, the step before it as uid %u", as,
                          s->proof.user_uid);
    pl_run_result_clear(&r);
    char uid[sizeof(sb.uid)];
    snprintf(uid, sizeof(uid), "%s", sb.uid);
    /* The delete's refusal is the startup's: a sandbox left behind costs
     * money until its own timeout. */
    struct pl_error del = {0};
    int drc = dc_close(s, run_id, &sb, &del);
    if (rc < 0 && drc < 0)
        return pl_error_wrap(err, "the startup sandbox %s (whose delete failed too: %.200s): ", uid,
                             del.message);
    if (rc < 0)
        return pl_error_wrap(err, "the startup sandbox %s: ", uid);
    if (drc < 0) {
        *err = del;
        return pl_error_wrap(err, "deleting the startup sandbox %s: ", uid);
    }
    s->proof.files_uploaded = 3;
    snprintf(s->proof.probe_detail, sizeof(s->proof.probe_detail), "%s", s->set.egress_probe);
    /* The delete is read back: a sandbox that outlives its run costs money. */
    return gone(s, uid, err);
}
