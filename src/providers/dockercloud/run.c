/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run.c: one run, one sandbox (docs/providers/dockercloud.md, "A run"):
 * its name recorded, then the create; its network policy read back (the
 * seal: deny-all with nothing allowed, or the run is refused before any
 * code and the sandbox deleted); its endpoint credential; the upload; the
 * snippet or each step as a process under the run's deadline; the output
 * under the caps; the delete.  Any failure after the create deletes the
 * sandbox; one the delete cannot reach is left to the reaper, which finds
 * it by its name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/clock.h"
#include "dc_int.h"

int dc_open(struct dc_state *s, const char *run_id, unsigned timeout_ms, bool grant,
            struct dc_sandbox *ret, struct pl_error *err) {
    /* Recorded before the create is sent: the reaper spares a sandbox
     * whose answer has not come back yet. */
    if (ph_track(&s->books, run_id) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "too many sandboxes in flight");
    unsigned ttl = (timeout_ms + 999) / 1000 + s->set.slack_s;
    /* A run with a grant may reach the guard's address and nothing else. */
    char allow[24] = "";
    if (grant)
        snprintf(allow, sizeof(allow), "%s/32", s->set.guard.ip);
    int rc = dc_create(s, run_id, ttl, grant ? allow : NULL, ret, err);
    snprintf(ret->allow, sizeof(ret->allow), "%s", allow);
    char why[400];
    struct pl_error seal = {0};
    if (rc == 0 && dc_policy_sealed(s, ret->uid, allow, why, sizeof(why), &seal) < 0) {
        /* Typed and not dispatched when the wall is not there; a read that
         * failed is the infrastructure's. */
        *err = seal;
        rc = -1;
    }
    if (rc == 0)
        rc = dc_credential(s, ret, err);
    if (rc < 0) {
        dc_close(s, run_id, ret, NULL);
        return -1;
    }
    return 0;
}

int dc_close(struct dc_state *s, const char *run_id, const struct dc_sandbox *sb,
             struct pl_error *err) {
    struct pl_error mine = {0};
    int rc = 0;
    if (sb->uid[0]) /* a sandbox left behind keeps its name: reaped */
        rc = dc_delete(s, sb->uid, err ? err : &mine);
    ph_untrack(&s->books, run_id);
    return rc;
}

/* Before a project of several steps, as the guest's user: the processes
 * of that user the sandbox has before any code ran (the service's own: the
 * API does not say which user its processes run as), which the cleanup
 * between steps spares (hosted/cleanup.c, ph_own_processes). */
static int own_processes(struct dc_state *s, struct dc_sandbox *sb, uint64_t deadline,
                         struct pl_error *err) {
    const char *argv[] = {"python3", "-I", "-c", ph_own_processes};
    struct dc_proc p;
    dc_proc_init(&p, sizeof(sb->keep));
    p.argv = argv;
    p.argc = sizeof(argv) / sizeof(argv[0]);
    p.cwd = "/";
    p.deadline_ns = ph_cleanup_deadline(deadline);
    int rc = dc_process(s, sb, &p, err);
    const char *out = p.out.kept.data ? (const char *)p.out.kept.data : "";
    size_t len = p.out.kept.data ? p.out.kept.len : 0;
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += out[i] == ':';
    if (rc == 0 &&
        (p.timed_out || p.exit_code != 0 || len == 0 || out[len - 1] != '\n' ||
         strspn(out, "0123456789: ") != len - 1 || len > sizeof(sb->keep) || n > DC_KEEP_MAX))
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the sandbox's own processes could not be read before the project (exit "
                          "%d, at most %d kept): %.100s",
                          p.exit_code, DC_KEEP_MAX, out);
    if (rc == 0)
        snprintf(sb->keep, sizeof(sb->keep), "%.*s", (int)(len - 1), out);
    dc_proc_free(&p);
    return rc;
}

/* Between two steps, as root: nothing a step left running reaches the
 * next one but the sandbox's own processes (hosted/cleanup.c). */
static int end_leftovers(struct dc_state *s, struct dc_sandbox *sb, uint64_t deadline,
                         const char *after, struct pl_error *err) {
    char uid[16];
    snprintf(uid, sizeof(uid), "%u", s->proof.user_uid);
    char keep[sizeof(sb->keep)];
    snprintf(keep, sizeof(keep), "%s", sb->keep);
    const char *argv[5 + DC_KEEP_MAX] = {"python3", "-I", "-c", ph_end_user_processes, uid};
    size_t argc = 5;
    char *save = NULL;
    for (char *t = strtok_r(keep, " ", &save); t && argc < 5 + DC_KEEP_MAX;
         t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    struct dc_proc p;
    dc_proc_init(&p, 4096);
    p.user = "root";
    p.argv = argv;
    p.argc = argc;
    p.cwd = "/";
    p.deadline_ns = ph_cleanup_deadline(deadline);
    int rc = dc_process(s, sb, &p, err);
    const char *out = p.out.kept.data ? (const char *)p.out.kept.data : "";
    size_t len = p.out.kept.data ? p.out.kept.len : 0;
    if (rc == 0)
        rc = ph_cleanup_verdict(p.timed_out, p.exit_code, out, len, after, NULL, 0, err);
    dc_proc_free(&p);
    return rc;
}

/* One step's process as the sandbox's user (hosted/project.c runs the
 * rest). */
struct step_ud {
    struct dc_state *s;
    struct dc_sandbox *sb;
};

static int upload(void *ud, const struct ph_file *files, size_t n, uint64_t deadline,
                  struct pl_error *err) {
    struct step_ud *u = ud;
    (void)deadline; /* each call has its own timeout */
    return dc_upload(u->s, u->sb, files, n, err);
}

static int step(void *ud, const char *const *argv, size_t argc, uint64_t deadline,
                struct ph_proc_out *o, struct pl_error *err) {
    struct step_ud *u = ud;
    struct dc_proc p;
    dc_proc_init(&p, o->out.cap);
    p.err.cap = o->err.cap;
    /* A streaming call's step: its output to the sink as it comes. */
    pl_capture_stream(&p.out, o->out.sink, 1, o->out.step);
    pl_capture_stream(&p.err, o->err.sink, 2, o->err.step);
    p.argv = argv;
    p.argc = argc;
    p.cwd = "/";
    p.deadline_ns = deadline;
    if (u->sb->guard_token[0]) {
        p.guard_url = u->s->set.guard.url;
        p.guard_token = u->sb->guard_token;
    }
    int rc = dc_process(u->s, u->sb, &p, err);
    if (rc == 0)
        ph_proc_out_take(o, &p.out, &p.err, p.exit_code, p.timed_out);
    dc_proc_free(&p);
    return rc;
}

static int between(void *ud, uint64_t deadline, const char *after, struct pl_error *err) {
    struct step_ud *u = ud;
    /* The startup test learns the uid before any project of more than one
     * step (proof.c). */
    if (!u->s->proof.user_uid)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the guest's uid is not known: what %s left running cannot be ended",
                            after);
    return end_leftovers(u->s, u->sb, deadline, after, err);
}

static const struct ph_project_ops ops = {.upload = upload, .step = step, .between = between};

int dc_project(struct dc_state *s, struct dc_sandbox *sb, const struct pl_run_ctx *ctx,
               const struct pl_run_request *req, uint64_t deadline, struct pl_run_result *ret,
               struct pl_error *err) {
    struct step_ud u = {s, sb};
    if (req->project.nsteps > 1 && own_processes(s, sb, deadline, err) < 0)
        return -1;
    return ph_project(&ops, &u, s->set.workdir, ctx, req, deadline, ret, err);
}

int dc_run(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
           struct pl_run_result *ret, struct pl_error *err) {
    struct dc_state *s = state;
    if (req->kind != PL_PAYLOAD_SNIPPET && req->kind != PL_PAYLOAD_PROJECT)
        return pl_error_set(err, PL_REASON_UNSUPPORTED,
                            "dockercloud runs snippets and projects only");
    if (ctx->broker && !s->guard)
        return pl_error_set(err, PL_REASON_UNSUPPORTED,
                            "dockercloud: a grant needs SANDBOX_DOCKERCLOUD_GUARD_URL");
    uint64_t deadline = pl_deadline_in_ms(ctx->timeout_ms);
    struct dc_sandbox sb;
    if (dc_open(s, ctx->run_id, ctx->timeout_ms, ctx->broker != NULL, &sb, err) < 0)
        return -1;
    /* The run's guard token: the sandbox's only way to its broker. */
    if (ctx->broker && ph_guard_admit(s->guard, ctx->broker, sb.guard_token, err) < 0) {
        dc_close(s, ctx->run_id, &sb, NULL);
        return -1;
    }
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "%s", sb.uid);
    struct step_ud u = {s, &sb};
    int rc = req->kind == PL_PAYLOAD_SNIPPET
                 ? ph_snippet(&ops, &u, "sandbox", ctx, req, deadline, ret, err)
                 : dc_project(s, &sb, ctx, req, deadline, ret, err);
    if (sb.guard_token[0])
        ph_guard_revoke(s->guard, sb.guard_token); /* after its last request was answered */
    explicit_bzero(sb.guard_token, sizeof(sb.guard_token));
    dc_close(s, ctx->run_id, &sb, NULL);
    explicit_bzero(sb.cred, sizeof(sb.cred));
    return rc;
}
