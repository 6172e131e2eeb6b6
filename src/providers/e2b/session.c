/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.c: a session on E2B (docs/providers/e2b.md, "Sessions"): one VM
 * for the session's life, created as a run's VM is.  Each call's code runs
 * as the guest's user; after each call a root process ends everything of
 * that user and proves none is left, on its own thread once the answer has
 * gone back (the next call waits for it; one that failed ends the session
 * at that call, SESSION_ENDED with why).  An idle session is paused (E2B keeps
 * the files; every process ends) and the next call resumes it with
 * `connect` and an explicit timeout, keeping the sandboxID of the answer.
 * A VM that E2B says is gone ends its session with that reason.  The file
 * calls (WriteFiles, ReadFile, ListFiles) are hosted/files.c's, each a
 * process as the guest's user like any call's, with the same cleanup after.
 *
 * Cells (docs/providers/e2b.md, "Cells"): a Python or Node interpreter kept
 * in the VM between calls, the docker session agent's own servers, started
 * detached by `vmlaunch` with a relay on an abstract socket; each cell is
 * one envd process (`vmcell`) that hands the code over and relays the
 * output.  The daemon keeps an interpreter only while its pid and start
 * time, and its relay's, survive the root cleanup after each call; a pause
 * ends them all, so the next cell says interpreter_started.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/clock.h"
#include "../../core/ids.h"
#include "e2b_int.h"

struct eb_session {
    struct e2b_state *s;
    char run_id[48]; /* the VM's plimsoll-run label; tracked while it lives */
    struct eb_sandbox sb;
    uint64_t opened_ns;
    struct ph_cells cells;
    /* The cleanup after a call runs on its own thread once the answer has
     * gone back; the next call, a pause, a resume and the close wait for
     * it.  Only that thread touches sb.keep and cells while it runs. */
    pthread_t cleaner;
    bool cleaner_running;
    uint64_t clean_deadline; /* the call's deadline (the cleanup has more) */
    char verdict[256];       /* non-empty: the cleanup failed, the session ends */
};

/* The cleanup after a call (or before a pause): everything of the user
 * ends but the kept interpreters; one whose interpreter or relay did not
 * survive is no longer kept. */
static int session_cleanup(struct e2b_state *s, struct eb_session *ss, uint64_t deadline,
                           const char *after, struct pl_error *err) {
    ph_cells_keep(&ss->cells, ss->sb.keep, sizeof(ss->sb.keep));
    char alive[sizeof(ss->sb.keep) + 8];
    if (eb_cleanup(s, &ss->sb, deadline, after, alive, sizeof(alive), err) < 0)
        return -1;
    ph_cells_survive(&ss->cells, alive);
    ph_cells_keep(&ss->cells, ss->sb.keep, sizeof(ss->sb.keep));
    return 0;
}

static void *cleaner_main(void *arg) {
    struct eb_session *ss = arg;
    struct pl_error err = {0};
    if (session_cleanup(ss->s, ss, ss->clean_deadline, "the call", &err) < 0)
        snprintf(ss->verdict, sizeof(ss->verdict), "the cleanup after the last call failed: %.200s",
                 err.message);
    return NULL;
}

/* The previous call's cleanup: whoever comes next waits for it. */
static void cleaner_join(struct eb_session *ss) {
    if (ss->cleaner_running) {
        pthread_join(ss->cleaner, NULL);
        ss->cleaner_running = false;
    }
}

static void cleaner_start(struct eb_session *ss, uint64_t deadline) {
    ss->clean_deadline = deadline;
    if (pthread_create(&ss->cleaner, NULL, cleaner_main, ss) == 0)
        ss->cleaner_running = true;
    else
        snprintf(ss->verdict, sizeof(ss->verdict), "the cleanup between calls could not start");
}

int eb_session_open(void *state, const struct pl_session_open *o, void **ret_session,
                    struct pl_error *err) {
    (void)o;
    struct e2b_state *s = state;
    struct eb_session *ss = calloc(1, sizeof(*ss));
    if (!ss)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    char hex[25];
    if (pl_random_hex(hex, sizeof(hex), 12) < 0) {
        free(ss);
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    }
    ss->s = s;
    snprintf(ss->run_id, sizeof(ss->run_id), "session-%s", hex);
    if (eb_open(s, ss->run_id, s->session_lifetime_s * 1000u, NULL, &ss->sb, err) < 0) {
        free(ss);
        return pl_error_wrap(err, "opening a session's VM: ");
    }
    ss->opened_ns = pl_now_ns();
    *ret_session = ss;
    return 0;
}

/* After a failed call: a VM that E2B says is gone ends the session. */
static int judge_failure(struct e2b_state *s, struct eb_session *ss, struct pl_error *err) {
    json_t *d = NULL;
    long st = 0;
    struct pl_error probe = {0};
    if (eb_get(s, ss->sb.id, &d, &st, &probe) < 0 && st == 404)
        return pl_error_set(err, PL_REASON_SESSION_ENDED,
                            "E2B says the session's VM %s is gone (404) after: %.300s", ss->sb.id,
                            err->message);
    json_decref(d);
    return -1;
}

int eb_session_run(void *state, void *session, const struct pl_run_ctx *ctx,
                   const struct pl_run_request *req, struct pl_run_result *ret,
                   struct pl_error *err) {
    struct e2b_state *s = state;
    struct eb_session *ss = session;
    cleaner_join(ss); /* the previous call's cleanup: this call waits for it */
    if (ss->verdict[0]) {
        /* A VM that is gone also fails the cleanup: that is the reason
         * worth telling, when E2B says so. */
        pl_error_set(err, PL_REASON_SESSION_ENDED, "%s", ss->verdict);
        return judge_failure(s, ss, err);
    }
    if (req->kind != PL_PAYLOAD_SNIPPET && req->kind != PL_PAYLOAD_PROJECT &&
        req->kind != PL_PAYLOAD_CELL && !pl_payload_is_files(req->kind))
        return pl_error_set(err, PL_REASON_UNSUPPORTED,
                            "an e2b session runs snippets, projects, cells and file calls");
    if (ctx->broker)
        return pl_error_set(err, PL_REASON_INTERNAL, "e2b: a grant reached a session");
    uint64_t deadline = pl_deadline_in_ms(ctx->timeout_ms);
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "%s", ss->sb.id);
    ph_cells_keep(&ss->cells, ss->sb.keep, sizeof(ss->sb.keep));
    struct eb_step u = {s, &ss->sb};
    long long start_s = (long long)time(NULL);
    uint64_t start_ns = pl_now_ns();
    int rc;
    if (pl_payload_is_files(req->kind))
        rc = ph_files_call(&eb_ops, &u, s->set.workdir, ctx, req, deadline, ret, err);
    else if (req->kind == PL_PAYLOAD_CELL)
        rc = ph_cell(&eb_session_ops, &u, &ss->cells, s->set.workdir, ctx, req, deadline, ret, err);
    else if (req->kind == PL_PAYLOAD_SNIPPET)
        rc = ph_snippet(&eb_session_ops, &u, "VM", ctx, req, deadline, ret, err);
    else
        rc = ph_project(&eb_session_ops, &u, s->set.workdir, ctx, req, deadline, ret, err);
    if (rc < 0 && pl_payload_is_files(req->kind) && err->reason != PL_REASON_INTERNAL)
        return -1; /* a path that broke a rule: the VM is as it was */
    if (rc < 0)
        return judge_failure(s, ss, err);
    if (!pl_payload_is_files(req->kind))
        eb_usage(s, ss->sb.id, start_s, start_ns, deadline, ret);
    /* The cleanup between calls, after the answer has gone back: nothing
     * of this call reaches the next but the kept interpreters. */
    cleaner_start(ss, deadline);
    return 0;
}

int eb_session_pause(void *state, void *session) {
    struct e2b_state *s = state;
    struct eb_session *ss = session;
    struct pl_error err = {0};
    cleaner_join(ss);
    /* A pause ends the interpreters (the spec's rule, whatever E2B's
     * snapshot would keep): they are ended here, and none is kept after.
     * A session whose last cleanup failed is paused all the same (its next
     * call is refused with the verdict). */
    ph_cells_drop(&ss->cells);
    if (!ss->verdict[0])
        (void)session_cleanup(s, ss, pl_deadline_in_ms(10000), "the session before its pause",
                              &err);
    err = (struct pl_error){0};
    return eb_pause(s, ss->sb.id, &err);
}

int eb_session_resume(void *state, void *session, struct pl_error *err) {
    struct e2b_state *s = state;
    struct eb_session *ss = session;
    cleaner_join(ss); /* joined by the pause already: no thread outlives it */
    if (ss->verdict[0])
        return 0; /* not resumed: the call that follows is refused with it */
    uint64_t lived_s = (pl_now_ns() - ss->opened_ns) / 1000000000ull;
    uint64_t left = s->session_lifetime_s > lived_s ? s->session_lifetime_s - lived_s : 1;
    if (eb_connect(s, &ss->sb, (unsigned)left + s->set.vm_slack_s, err) < 0)
        return -1;
    /* A resumed VM (perhaps under a new id) is read back as a new one is. */
    if (eb_check_network(s, ss->sb.id, NULL, err) < 0) {
        struct pl_error ignored = {0};
        (void)eb_delete(s, ss->sb.id, &ignored);
        return pl_error_wrap(err, "resuming the session's VM: ");
    }
    return 0;
}

void eb_session_status(void *state, void *session, struct pl_session_status *ret) {
    (void)state;
    struct eb_session *ss = session;
    ph_cells_status(&ss->cells, ret);
}

void eb_session_close(void *state, void *session) {
    struct e2b_state *s = state;
    struct eb_session *ss = session;
    if (!ss)
        return;
    cleaner_join(ss);
    eb_close(s, ss->run_id, &ss->sb);
    free(ss);
}

/* The startup session's close: no call follows its last one, so the
 * verdict of that call's cleanup is read here. */
static void proof_close(void *state, void *session) {
    struct e2b_state *s = state;
    struct eb_session *ss = session;
    if (ss) {
        cleaner_join(ss);
        snprintf(s->proof_verdict, sizeof(s->proof_verdict), "%s", ss->verdict);
    }
    eb_session_close(state, session);
}

static const struct ph_session_ops session_ops = {.open = eb_session_open,
                                                  .run = eb_session_run,
                                                  .pause = eb_session_pause,
                                                  .resume = eb_session_resume,
                                                  .close = eb_session_close,
                                                  .paused = "paused"};

/* The one real session the daemon opens at startup when sessions are on
 * (hosted/cells.c): python3 runs the cleanup too, so Python cells must
 * work; JavaScript is offered only when its cells worked. */
int eb_prove_session(struct e2b_state *s, struct pl_error *err) {
    struct ph_session_ops ops = session_ops;
    ops.close = proof_close;
    s->proof_verdict[0] = '\0';
    if (ph_prove_session(&ops, s, "VM", s->cell_langs, s->cell_note, sizeof(s->cell_note),
                         &s->cell_display, err) < 0)
        return -1;
    if (s->proof_verdict[0])
        return pl_error_set(err, PL_REASON_INTERNAL, "the startup session's last call: %s",
                            s->proof_verdict);
    return 0;
}
