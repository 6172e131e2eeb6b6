/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.c: a session on OpenShell (docs/providers/openshell.md,
 * "Sessions"): one gateway sandbox for the session's life, made and read
 * back as a run's is, whose main process does nothing.  Before every call
 * the whole sandbox is read back from the gateway (osh_readback); a
 * sandbox that changed, is gone or left READY ends the session.  After
 * every call's answer the cleanup ends what the call left running but the
 * sandbox's own processes and the kept interpreters (hosted/cells.c), on a
 * thread of its own: the caller does not wait for it, the next call (and
 * the idle stop, the resume and the close) does, and one that failed
 * refuses the next call SESSION_ENDED with its reason.  An idle
 * session is stopped: every process of the guest's ends, interpreters
 * included, the files stay, and the session gives back its admission slot
 * (Describe's idle_frees_slot); the next call reads the sandbox back and
 * its first cell says interpreter_started.
 */
#include <pthread.h>
#include <stdbool.h>
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
    /* The cleanup after the last call's answer, while cleaner_running;
     * verdict: why it failed (the session then ends), "" while it did not. */
    pthread_t cleaner;
    bool cleaner_running;
    struct osh_state *s;
    uint64_t clean_by; /* the call's deadline, for the cleanup's own */
    char verdict[256];
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

static void *cleaner_main(void *arg) {
    struct osh_session *ss = arg;
    struct pl_error err = {0};
    if (session_cleanup(ss->s, ss, ss->clean_by, "the call", &err) < 0)
        snprintf(ss->verdict, sizeof(ss->verdict), "the cleanup between calls failed: %.200s",
                 err.message);
    return NULL;
}

/* The last call's cleanup, waited for: nothing of the session's outlives
 * this but the sandbox. */
static void cleaner_join(struct osh_session *ss) {
    if (ss->cleaner_running) {
        pthread_join(ss->cleaner, NULL);
        ss->cleaner_running = false;
    }
}

static void cleaner_start(struct osh_state *s, struct osh_session *ss, uint64_t deadline) {
    ss->s = s;
    ss->clean_by = deadline;
    if (pthread_create(&ss->cleaner, NULL, cleaner_main, ss) == 0)
        ss->cleaner_running = true;
    else
        snprintf(ss->verdict, sizeof(ss->verdict), "the cleanup between calls could not start");
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
    cleaner_join(ss); /* the previous call's cleanup: this call waits for it */
    if (req->kind != PL_PAYLOAD_SNIPPET && req->kind != PL_PAYLOAD_PROJECT &&
        req->kind != PL_PAYLOAD_CELL && !pl_payload_is_files(req->kind))
        return pl_error_set(err, PL_REASON_UNSUPPORTED,
                            "an openshell session runs snippets, projects, cells and file calls");
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
    /* The sandbox's own state first (a main process that ended also fails
     * the cleanup, and is the reason worth telling), then the cleanup's. */
    if (ss->verdict[0])
        return pl_error_set(err, PL_REASON_SESSION_ENDED, "%s", ss->verdict);
    if (osh_call(s, &ss->sb, &ss->cells, ctx, req, deadline, ret, err) < 0)
        return pl_payload_is_files(req->kind) && err->reason != PL_REASON_INTERNAL
                   ? -1 /* a path that broke a rule: the sandbox is as it was */
                   : judge_failure(s, ss, err);
    /* The cleanup between calls, after the answer: nothing of this call
     * reaches the next but the kept interpreters; one that cannot be
     * proved refuses the next call, and the session ends. */
    cleaner_start(s, ss, deadline);
    return 0;
}

/* The idle stop: OpenShell's API (the revision read) has no way to stop a
 * sandbox and keep it, so plimsoll stops what runs in it: every process of
 * the guest's ends, interpreters included, and the files stay. */
int osh_session_pause(void *state, void *session) {
    struct osh_state *s = state;
    struct osh_session *ss = session;
    struct pl_error err = {0};
    cleaner_join(ss);
    if (ss->verdict[0])
        return -1; /* the last cleanup failed: the session ends now */
    ph_cells_drop(&ss->cells);
    return session_cleanup(s, ss, pl_deadline_in_ms(15000), "the session before its stop", &err);
}

/* Taken up again: the read-back before the call says whether it is as it
 * was; nothing else to do (the stop already waited for the cleanup). */
int osh_session_resume(void *state, void *session, struct pl_error *err) {
    (void)state, (void)err;
    cleaner_join(session);
    return 0;
}

void osh_session_status(void *state, void *session, struct pl_session_status *ret) {
    (void)state;
    struct osh_session *ss = session;
    ph_cells_status(&ss->cells, ret);
}

void osh_session_close(void *state, void *session) {
    struct osh_state *s = state;
    struct osh_session *ss = session;
    if (!ss)
        return;
    cleaner_join(ss);
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
                            sizeof(s->cell_note), &s->cell_display, err);
}
