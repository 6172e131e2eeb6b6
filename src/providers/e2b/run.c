/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run.c: one run, one VM (docs/providers/e2b.md, "A run"): create it with
 * this instance's label, upload, run the snippet or each step over envd's
 * process stream under the run's deadline, collect the output under the
 * caps, delete it.  Any failure after the create deletes the VM; one the
 * delete cannot reach is left to the reaper, which finds it by its label.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/clock.h"
#include "e2b_int.h"

int eb_open(struct e2b_state *s, const char *run_id, unsigned timeout_ms, const char *allow_out,
            struct eb_sandbox *ret, struct pl_error *err) {
    /* Tracked before the create is sent: the reaper spares a VM whose
     * answer has not come back yet. */
    if (ph_track(&s->books, run_id) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "too many VMs in flight");
    unsigned ttl = (timeout_ms + 999) / 1000 + s->set.vm_slack_s;
    if (eb_create(s, run_id, ttl, allow_out, ret, err) < 0) {
        ph_untrack(&s->books, run_id);
        return -1;
    }
    /* Every VM's own detail, not only the startup VM's: the network is set
     * by each create (a run with a grant sends another allowOut). */
    if (eb_check_network(s, ret->id, allow_out, err) < 0) {
        eb_close(s, run_id, ret);
        return -1;
    }
    return 0;
}

void eb_close(struct e2b_state *s, const char *run_id, const struct eb_sandbox *sb) {
    struct pl_error err = {0};
    if (sb->id[0])
        (void)eb_delete(s, sb->id, &err); /* a VM left behind keeps its label: reaped */
    ph_untrack(&s->books, run_id);
}

int eb_cleanup(struct e2b_state *s, const struct eb_sandbox *sb, uint64_t deadline,
               const char *after, char *ret_alive, size_t alive_size, struct pl_error *err) {
    char uid[16];
    snprintf(uid, sizeof(uid), "%u", s->user_uid);
    /* UID and up to EB_MAX_KEEP kept processes, "pid:start" each. */
    char keep[sizeof(sb->keep)];
    snprintf(keep, sizeof(keep), "%s", sb->keep);
    const char *argv[5 + EB_MAX_KEEP] = {"python3", "-I", "-c", ph_end_user_processes, uid};
    size_t argc = 5;
    char *save = NULL;
    for (char *t = strtok_r(keep, " ", &save); t && argc < 5 + EB_MAX_KEEP;
         t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    struct eb_proc p;
    eb_proc_init(&p, 4096);
    p.user = "root";
    p.argv = argv;
    p.argc = argc;
    p.cwd = "/";
    p.deadline_ns = ph_cleanup_deadline(deadline);
    int rc = eb_process(s, sb, &p, err);
    const char *out = p.out.kept.data ? (const char *)p.out.kept.data : "";
    size_t len = p.out.kept.data ? p.out.kept.len : 0;
    if (rc == 0)
        rc = ph_cleanup_verdict(p.timed_out, p.exit_code, out, len, after, ret_alive, alive_size,
                                err);
    eb_proc_free(&p);
    return rc;
}

int eb_end_leftovers(struct e2b_state *s, const struct eb_sandbox *sb, uint64_t deadline,
                     const char *after, struct pl_error *err) {
    return eb_cleanup(s, sb, deadline, after, NULL, 0, err);
}

/* One step's process as the guest's user (hosted/project.c runs the rest). */
#define step_ud eb_step

static int upload(void *ud, const struct ph_file *files, size_t n, uint64_t deadline,
                  struct pl_error *err) {
    struct step_ud *u = ud;
    (void)deadline; /* each call has its own timeout */
    return eb_upload(u->s, u->sb, "user", files, n, err);
}

static int step(void *ud, const char *const *argv, size_t argc, uint64_t deadline,
                struct ph_proc_out *o, struct pl_error *err) {
    struct step_ud *u = ud;
    struct eb_proc p;
    eb_proc_init(&p, o->out.cap);
    p.err.cap = o->err.cap; /* a cell's framed stderr has a bound of its own */
    /* A streaming call's step: its output to the sink as it comes. */
    pl_capture_stream(&p.out, o->out.sink, 1, o->out.step);
    pl_capture_stream(&p.err, o->err.sink, 2, o->err.step);
    p.user = "user";
    p.argv = argv;
    p.argc = argc;
    p.cwd = "/";
    p.deadline_ns = deadline;
    int rc = eb_process(u->s, u->sb, &p, err);
    if (rc == 0)
        ph_proc_out_take(o, &p.out, &p.err, p.exit_code, p.timed_out);
    eb_proc_free(&p);
    return rc;
}

static int between(void *ud, uint64_t deadline, const char *after, struct pl_error *err) {
    struct step_ud *u = ud;
    /* The startup test learns the uid before any project of more than one
     * step (proof.c). */
    if (!u->s->user_uid)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the guest's uid is not known: what %s left running cannot be ended",
                            after);
    return eb_end_leftovers(u->s, u->sb, deadline, after, err);
}

const struct ph_project_ops eb_ops = {.upload = upload, .step = step, .between = between};
const struct ph_project_ops eb_session_ops = {
    .upload = upload, .step = step, .between = between, .session = true};

int eb_project(struct e2b_state *s, const struct eb_sandbox *sb, const struct pl_run_ctx *ctx,
               const struct pl_run_request *req, uint64_t deadline, struct pl_run_result *ret,
               struct pl_error *err) {
    struct step_ud u = {s, sb};
    return ph_project(&eb_ops, &u, s->set.workdir, ctx, req, deadline, ret, err);
}

int eb_snippet(struct e2b_state *s, const struct eb_sandbox *sb, const struct pl_run_ctx *ctx,
               const struct pl_run_request *req, uint64_t deadline, struct pl_run_result *ret,
               struct pl_error *err) {
    struct step_ud u = {s, sb};
    return ph_snippet(&eb_ops, &u, "VM", ctx, req, deadline, ret, err);
}

/* What a run or a call cost, from E2B's metrics of its VM (usage.c). */
void eb_usage(struct e2b_state *s, const char *id, long long start_s, uint64_t start_ns,
              uint64_t deadline, struct pl_run_result *ret) {
    uint64_t now = pl_now_ns();
    uint64_t wall_us = (now - start_ns) / 1000u;
    if (now + PL_MS(100) >= deadline) {
        snprintf(ret->usage_absent, sizeof(ret->usage_absent),
                 "the run's deadline left no time to ask e2b for the VM's metrics");
        return;
    }
    uint64_t left_ms = (deadline - now) / 1000000u;
    unsigned timeout_ms = left_ms < EB_USAGE_TIMEOUT_MS ? (unsigned)left_ms : EB_USAGE_TIMEOUT_MS;
    json_t *a = NULL;
    struct pl_error err = {0};
    long long end_s = (long long)time(NULL) + 1;
    if (eb_sandbox_metrics(s, id, start_s, end_s, timeout_ms, &a, &err) < 0) {
        snprintf(ret->usage_absent, sizeof(ret->usage_absent), "%.120s", err.message);
        return;
    }
    struct pl_usage u;
    if (eb_usage_of(a, start_s, end_s, &u, ret->usage_absent, sizeof(ret->usage_absent)) == 0) {
        u.wall_us = wall_us;
        ret->usage = u;
    }
    json_decref(a);
}

int eb_run(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
           struct pl_run_result *ret, struct pl_error *err) {
    struct e2b_state *s = state;
    if (req->kind != PL_PAYLOAD_SNIPPET && req->kind != PL_PAYLOAD_PROJECT)
        return pl_error_set(err, PL_REASON_UNSUPPORTED, "e2b runs snippets and projects only");
    if (ctx->broker && !s->guard)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "e2b: a grant reached a provider without E2B_GUARD_URL");
    uint64_t deadline = pl_deadline_in_ms(ctx->timeout_ms);
    struct eb_sandbox sb;
    if (eb_open(s, ctx->run_id, ctx->timeout_ms, ctx->broker ? s->set.guard_ip : NULL, &sb, err) <
        0)
        return -1;
    /* The run's guard token: the VM's only way to its broker. */
    if (ctx->broker && ph_guard_admit(s->guard, ctx->broker, sb.guard_token, err) < 0) {
        eb_close(s, ctx->run_id, &sb);
        return -1;
    }
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "%s", sb.id);
    long long start_s = (long long)time(NULL);
    uint64_t start_ns = pl_now_ns();
    int rc = req->kind == PL_PAYLOAD_SNIPPET ? eb_snippet(s, &sb, ctx, req, deadline, ret, err)
                                             : eb_project(s, &sb, ctx, req, deadline, ret, err);
    /* What it cost, as E2B measured the VM, before the VM goes. */
    if (rc == 0)
        eb_usage(s, sb.id, start_s, start_ns, deadline, ret);
    if (sb.guard_token[0])
        ph_guard_revoke(s->guard, sb.guard_token); /* after its last request was answered */
    explicit_bzero(sb.guard_token, sizeof(sb.guard_token));
    eb_close(s, ctx->run_id, &sb);
    if (rc < 0)
        pl_error_wrap(err, "e2b sandbox %s: ", sb.id);
    return rc;
}
