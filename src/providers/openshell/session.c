/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.c: a session on OpenShell (docs/providers/openshell.md,
 * "Sessions"): one gateway sandbox for the session's life, made and read
 * back as a run's is, whose main process does nothing.  Before every call
 * the whole sandbox is read back from the gateway (osh_readback); a
 * sandbox that changed, is gone or left READY ends the session.  After
 * every call the cleanup ends what the call left running but the sandbox's
 * own processes and the kept interpreters (hosted/cells.c).  An idle
 * session is stopped: every process of the guest's ends, interpreters
 * included, the files stay, and the session gives back its admission slot
 * (Describe's idle_frees_slot); the next call reads the sandbox back and
 * its first cell says interpreter_started.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/clock.h"
#include "../../core/ids.h"
#include "osh_int.h"

struct osh_session {
    char run_id[48]; /* tracked while the sandbox lives */
    struct osh_sandbox sb;
    struct ph_cells cells;
};

/* The cleanup after a call (or for the idle stop): the kept interpreters
 * that did not survive it are kept no longer. */
static int session_cleanup(struct osh_state *s, struct osh_session *ss, uint64_t deadline,
                           const char *after, struct pl_error *err) {
    char keep[OSH_KEEP_BYTES], alive[OSH_KEEP_BYTES + 8];
    ph_cells_keep(&ss->cells, keep, sizeof(keep));
    if (osh_cleanup(s, &ss->sb, keep, deadline, after, alive, sizeof(alive), err) < 0)
        return -1;
    ph_cells_survive(&ss->cells, alive);
    return 0;
}

int osh_session_open(void *state, const struct pl_session_open *o, void **ret_session,
                     struct pl_error *err) {
    (void)o;
    struct osh_state *s = state;
    struct osh_session *ss = calloc(1, sizeof(*ss));
    if (!ss)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    char hex[25];
    if (pl_random_hex(hex, sizeof(hex), 12) < 0) {
        free(ss);
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    }
    snprintf(ss->run_id, sizeof(ss->run_id), "session-%s", hex);
    /* Its declared lifetime is the session's (the reaper's bound). */
    if (osh_open(s, ss->run_id, s->session_lifetime_s * 1000u, &ss->sb, err) < 0) {
        free(ss);
        return pl_error_wrap(err, "opening a session's sandbox: ");
    }
    *ret_session = ss;
    return 0;
}

/* After a failed call: a sandbox the gateway no longer has ends the
 * session with that reason; anything else is the call's failure. */
static int judge_failure(struct osh_state *s, struct osh_session *ss, struct pl_error *err) {
    struct pl_error probe = {0};
    if (osh_gone(s, ss->sb.name, &probe) == 0)
        return pl_error_set(err, PL_REASON_SESSION_ENDED,
                            "the gateway no longer has the session's sandbox %s (NOT_FOUND) "
                            "after: %.300s",
                            ss->sb.name, err->message);
    return -1;
}

int osh_session_run(void *state, void *session, const struct pl_run_ctx *ctx,
                    const struct pl_run_request *req, struct pl_run_result *ret,
                    struct pl_error *err) {
    struct osh_state *s = state;
    struct osh_session *ss = session;
    if (req->kind != PL_PAYLOAD_SNIPPET && req->kind != PL_PAYLOAD_PROJECT &&
        req->kind != PL_PAYLOAD_CELL)
        return pl_error_set(err, PL_REASON_UNSUPPORTED,
                            "an openshell session runs snippets, projects and cells");
    if (ctx->broker)
        return pl_error_set(err, PL_REASON_INTERNAL, "openshell: a grant reached a session");
    uint64_t deadline = pl_deadline_in_ms(ctx->timeout_ms);
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "%s", ss->sb.name);
    /* The whole sandbox, read back before the call: one that is not as
     * it was asked for ends the session, and nothing runs. */
    struct pl_error rb = {0};
    if (osh_readback(s, &ss->sb, &rb) < 0) {
        if (rb.reason == PL_REASON_NOT_READY)
            return pl_error_set(err, PL_REASON_SESSION_ENDED, "%s", rb.message);
        *err = rb;
        return judge_failure(s, ss, err);
    }
    if (osh_call(s, &ss->sb, &ss->cells, ctx, req, deadline, ret, err) < 0)
        return judge_failure(s, ss, err);
    /* The cleanup between calls: nothing of this call reaches the next but
     * the kept interpreters; one that cannot be proved ends the session. */
    struct pl_error cerr = {0};
    if (session_cleanup(s, ss, deadline, "the call", &cerr) < 0)
        snprintf(ret->session_ended, sizeof(ret->session_ended), "%.200s", cerr.message);
    return 0;
}

/* The idle stop: OpenShell's API (the revision read) has no way to stop a
 * sandbox and keep it, so plimsoll stops what runs in it: every process of
 * the guest's ends, interpreters included, and the files stay. */
int osh_session_pause(void *state, void *session) {
    struct osh_state *s = state;
    struct osh_session *ss = session;
    struct pl_error err = {0};
    ph_cells_drop(&ss->cells);
    return session_cleanup(s, ss, pl_deadline_in_ms(15000), "the session before its stop", &err);
}

/* Taken up again: the read-back before the call says whether it is as it
 * was; nothing else to do. */
int osh_session_resume(void *state, void *session, struct pl_error *err) {
    (void)state, (void)session, (void)err;
    return 0;
}

void osh_session_close(void *state, void *session) {
    struct osh_state *s = state;
    struct osh_session *ss = session;
    if (!ss)
        return;
    osh_close(s, &ss->sb);
    free(ss);
}

static const struct ph_session_ops session_ops = {.open = osh_session_open,
                                                  .run = osh_session_run,
                                                  .pause = osh_session_pause,
                                                  .resume = osh_session_resume,
                                                  .close = osh_session_close,
                                                  .paused = "stopped"};

int osh_prove_session(struct osh_state *s, struct pl_error *err) {
    return ph_prove_session(&session_ops, s, "sandbox", s->cell_langs, s->cell_note,
                            sizeof(s->cell_note), err);
}
