/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.c: a session on E2B (docs/providers/e2b.md, "Sessions"): one VM
 * for the session's life, created as a run's VM is.  Each call's code runs
 * as the guest's user; after each call a root process ends everything of
 * that user and proves none is left.  An idle session is paused (E2B keeps
 * the files; every process ends) and the next call resumes it with
 * `connect` and an explicit timeout, keeping the sandboxID of the answer.
 * A VM that E2B says is gone ends its session with that reason.  Cells are
 * not offered yet: Describe lists no cell language, so a cell is refused
 * before dispatch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/clock.h"
#include "../../core/ids.h"
#include "e2b_int.h"

struct eb_session {
    char run_id[48]; /* the VM's plimsoll-run label; tracked while it lives */
    struct eb_sandbox sb;
    uint64_t opened_ns;
};

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
    if (req->kind != PL_PAYLOAD_SNIPPET && req->kind != PL_PAYLOAD_PROJECT)
        return pl_error_set(err, PL_REASON_UNSUPPORTED,
                            "an e2b session runs snippets and projects");
    if (ctx->broker)
        return pl_error_set(err, PL_REASON_INTERNAL, "e2b: a grant reached a session");
    uint64_t deadline = pl_deadline_in_ms(ctx->timeout_ms);
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "%s", ss->sb.id);
    int rc = req->kind == PL_PAYLOAD_SNIPPET ? eb_snippet(s, &ss->sb, ctx, req, deadline, ret, err)
                                             : eb_project(s, &ss->sb, ctx, req, deadline, ret, err);
    if (rc < 0)
        return judge_failure(s, ss, err);
    /* The cleanup between calls: nothing of this call reaches the next. */
    struct pl_error cerr = {0};
    if (eb_end_leftovers(s, &ss->sb, deadline, "the call", &cerr) < 0)
        snprintf(ret->session_ended, sizeof(ret->session_ended), "%.200s", cerr.message);
    return 0;
}

int eb_session_pause(void *state, void *session) {
    struct e2b_state *s = state;
    struct eb_session *ss = session;
    struct pl_error err = {0};
    return eb_pause(s, ss->sb.id, &err);
}

int eb_session_resume(void *state, void *session, struct pl_error *err) {
    struct e2b_state *s = state;
    struct eb_session *ss = session;
    uint64_t lived_s = (pl_now_ns() - ss->opened_ns) / 1000000000ull;
    uint64_t left = s->session_lifetime_s > lived_s ? s->session_lifetime_s - lived_s : 1;
    return eb_connect(s, &ss->sb, (unsigned)left + s->set.vm_slack_s, err);
}

void eb_session_close(void *state, void *session) {
    struct e2b_state *s = state;
    struct eb_session *ss = session;
    if (!ss)
        return;
    eb_close(s, ss->run_id, &ss->sb);
    free(ss);
}

/*
 * The one real session the daemon opens at startup when sessions are on:
 * a project call leaves a file and a process, the VM is paused and resumed,
 * and the next call finds the file kept and the process gone.
 */
int eb_prove_session(struct e2b_state *s, struct pl_error *err) {
    void *h = NULL;
    struct pl_session_open o = {.principal = "startup", .tag = "proof"};
    if (eb_session_open(s, &o, &h, err) < 0)
        return -1;
    struct pl_file files[] = {{.path = "kept.txt", .content = (unsigned char *)"kept\n", .len = 5}};
    const char *leave[] = {"sh", "-c", "sleep 600 > /dev/null 2>&1 &"};
    struct pl_step steps[] = {{.name = "leave", .argv = leave, .argc = 3}};
    struct pl_run_request first = {.kind = PL_PAYLOAD_PROJECT};
    first.project.files = files;
    first.project.nfiles = 1;
    first.project.steps = steps;
    first.project.nsteps = 1;
    struct pl_run_ctx ctx = {.timeout_ms = 60000, .output_bytes = 4096};
    struct pl_run_result r = {0};
    int rc = eb_session_run(s, h, &ctx, &first, &r, err);
    if (rc == 0 && (r.session_ended[0] || r.exit_code != 0))
        rc = pl_error_set(err, PL_REASON_INTERNAL, "the session's first call: %s",
                          r.session_ended[0] ? r.session_ended : "it failed");
    pl_run_result_clear(&r);
    if (rc == 0 && eb_session_pause(s, h) < 0)
        rc = pl_error_set(err, PL_REASON_INTERNAL, "the session's VM could not be paused");
    if (rc == 0)
        rc = eb_session_resume(s, h, err);
    const char *look[] = {
        "python3", "-c",
        "import os\n"
        "print(open('kept.txt').read(), end='')\n"
        "print(sum(1 for p in os.listdir('/proc') if p.isdigit() and\n"
        "          open('/proc/%s/cmdline' % p).read() == 'sleep\\x00600\\x00'))\n"};
    struct pl_step steps2[] = {{.name = "look", .argv = look, .argc = 3}};
    struct pl_run_request second = {.kind = PL_PAYLOAD_PROJECT};
    second.project.steps = steps2;
    second.project.nsteps = 1;
    if (rc == 0)
        rc = eb_session_run(s, h, &ctx, &second, &r, err);
    if (rc == 0 && (r.nsteps != 1 || !r.steps[0].out || strcmp(r.steps[0].out, "kept\n0\n") != 0))
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "after a pause and a resume the session's VM showed %.100s, not its "
                          "file alone",
                          r.nsteps && r.steps[0].out ? r.steps[0].out : "nothing");
    pl_run_result_clear(&r);
    eb_session_close(s, h);
    return rc < 0 ? pl_error_wrap(err, "the startup session: ") : 0;
}
