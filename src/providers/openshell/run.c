/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run.c: one run, one sandbox (docs/providers/openshell.md, "A run"): its
 * run recorded, then the create with its labels (its lifetime among them);
 * READY awaited and the whole sandbox read back (nothing runs in one that
 * differs from what was asked); the upload; the snippet or each step as
 * one exec under the run's deadline, with the cleanup between steps; the
 * output under the caps; the delete.  A sandbox the delete cannot reach is
 * left to the reaper, which finds it by its labels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/clock.h"
#include "../../core/ids.h"
#include "osh_int.h"

/* What the cleanup must spare: the sandbox's own processes, read before
 * any code ran in it. */
static int read_baseline(struct osh_state *s, struct osh_sandbox *sb, struct pl_error *err) {
    const char *argv[] = {"python3", "-I", "-c", ph_own_processes};
    char out[1024];
    int code = 0;
    if (osh_command(s, sb, argv, sizeof(argv) / sizeof(argv[0]), 15000, out, sizeof(out), &code,
                    err) < 0)
        return -1;
    if (code != 0)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "listing the sandbox's own processes exited %d", code);
    sb->nbaseline = 0;
    for (char *save = NULL, *tok = strtok_r(out, " \n", &save); tok;
         tok = strtok_r(NULL, " \n", &save)) {
        if (strspn(tok, "0123456789:") != strlen(tok) || !strchr(tok, ':') ||
            strlen(tok) >= sizeof(sb->baseline[0]))
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the sandbox's own processes read as %.60s", tok);
        if (sb->nbaseline == OSH_MAX_BASELINE)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the sandbox runs more than %d processes of the guest's user "
                                "before any code ran",
                                OSH_MAX_BASELINE);
        snprintf(sb->baseline[sb->nbaseline++], sizeof(sb->baseline[0]), "%s", tok);
    }
    return 0;
}

int osh_open(struct osh_state *s, const char *run_id, unsigned timeout_ms, struct osh_sandbox *ret,
             struct pl_error *err) {
    memset(ret, 0, sizeof(*ret));
    char hex[17];
    if (pl_random_hex(hex, sizeof(hex), 8) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    snprintf(ret->name, sizeof(ret->name), "pl-%s", hex);
    snprintf(ret->run_id, sizeof(ret->run_id), "%s", run_id);
    /* Its declared lifetime: OpenShell sandboxes never expire. */
    ret->deadline_s = (uint64_t)time(NULL) + (timeout_ms + 999) / 1000;
    /* Recorded before the create is sent: the reaper spares it. */
    if (ph_track(&s->books, run_id) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "too many sandboxes in flight");
    /* made READY within the run's time, and within 2 minutes for a session */
    if (osh_create(s, ret, pl_deadline_in_ms(timeout_ms < 120000 ? timeout_ms : 120000), err) < 0 ||
        read_baseline(s, ret, err) < 0) {
        osh_close(s, ret);
        return -1;
    }
    return 0;
}

void osh_close(struct osh_state *s, const struct osh_sandbox *sb) {
    struct pl_error err = {0};
    (void)osh_delete(s, sb->name, &err); /* one left behind keeps its labels: reaped */
    ph_untrack(&s->books, sb->run_id);
}

int osh_command(struct osh_state *s, const struct osh_sandbox *sb, const char *const *argv,
                size_t argc, unsigned timeout_ms, char *out, size_t out_size, int *ret_exit,
                struct pl_error *err) {
    return osh_command_cancel(s, sb, argv, argc, timeout_ms, false, out, out_size, ret_exit, err);
}

int osh_command_cancel(struct osh_state *s, const struct osh_sandbox *sb, const char *const *argv,
                       size_t argc, unsigned timeout_ms, bool cancel_first, char *out,
                       size_t out_size, int *ret_exit, struct pl_error *err) {
    struct osh_exec x;
    osh_exec_init(&x, out_size ? out_size - 1 : 0);
    x.cancel_first = cancel_first;
    x.argv = argv;
    x.argc = argc;
    x.workdir = "/tmp";
    x.deadline_ns = pl_deadline_in_ms(timeout_ms);
    int rc = osh_exec(s, sb, &x, err);
    if (rc == 0) {
        *ret_exit = x.timed_out ? 124 : x.exit_code;
        size_t n = x.out.kept.data ? x.out.kept.len : 0;
        if (out_size) {
            memcpy(out, n ? x.out.kept.data : "", n);
            out[n] = '\0';
        }
    }
    osh_exec_free(&x);
    return rc;
}

struct step_ud {
    struct osh_state *s;
    const struct osh_sandbox *sb;
    struct osh_relay *relay; /* a run with a grant: its relay */
    struct ph_cells *cells;  /* a session's kept interpreters */
};

static int upload(void *ud, const struct ph_file *files, size_t n, uint64_t deadline,
                  struct pl_error *err) {
    struct step_ud *u = ud;
    return osh_upload(u->s, u->sb, files, n, deadline, err);
}

static int step(void *ud, const char *const *argv, size_t argc, uint64_t deadline,
                struct ph_proc_out *o, struct pl_error *err) {
    struct step_ud *u = ud;
    struct osh_exec x;
    osh_exec_init(&x, o->out.cap);
    x.err.cap = o->err.cap; /* a cell's framed stderr has a bound of its own */
    /* A streaming call's step: its output to the sink as it comes. */
    pl_capture_stream(&x.out, o->out.sink, 1, o->out.step);
    pl_capture_stream(&x.err, o->err.sink, 2, o->err.step);
    x.argv = argv;
    x.argc = argc;
    x.workdir = "/tmp";
    x.deadline_ns = deadline;
    if (u->relay) {
        x.env_name = "PLIMSOLL_BROKER_SOCKET";
        x.env_value = OSH_RELAY_SOCKET;
    }
    int rc = osh_exec(u->s, u->sb, &x, err);
    if (rc == 0)
        ph_proc_out_take(o, &x.out, &x.err, x.exit_code, x.timed_out);
    osh_exec_free(&x);
    return rc;
}

/* The cleanup: every process of the guest's user ends but the sandbox's
 * own (its baseline) and the kept ones (keep: "PID:START ..."), and none is
 * left.  An exec runs as the guest's own user here (ExecSandbox has no
 * user), so the cleanup spares itself and its ancestors too
 * (hosted/cleanup.c, "self"). */
int osh_cleanup(struct osh_state *s, const struct osh_sandbox *sb, const char *keep,
                uint64_t deadline, const char *after, char *ret_alive, size_t alive_size,
                struct pl_error *err) {
    const char *argv[5 + OSH_MAX_BASELINE + OSH_MAX_KEEP] = {"python3", "-I", "-c",
                                                             ph_end_user_processes, "self"};
    size_t argc = 5;
    for (size_t i = 0; i < sb->nbaseline; i++)
        argv[argc++] = sb->baseline[i];
    char tokens[OSH_KEEP_BYTES];
    snprintf(tokens, sizeof(tokens), "%s", keep ? keep : "");
    char *save = NULL;
    for (char *t = strtok_r(tokens, " ", &save); t && argc < sizeof(argv) / sizeof(argv[0]);
         t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    unsigned ms = (unsigned)((ph_cleanup_deadline(deadline) - pl_now_ns()) / 1000000ull);
    char out[1024];
    int code = 0;
    if (osh_command(s, sb, argv, argc, ms, out, sizeof(out), &code, err) < 0)
        return -1;
    return ph_cleanup_verdict(false, code, out, strlen(out), after, ret_alive, alive_size, err);
}

/* Between two steps: nothing a step left running reaches the next one but
 * the run's relay (the guest may have ended it) and a session's kept
 * interpreters. */
static int between(void *ud, uint64_t deadline, const char *after, struct pl_error *err) {
    struct step_ud *u = ud;
    char keep[OSH_KEEP_BYTES] = "";
    if (u->cells)
        ph_cells_keep(u->cells, keep, sizeof(keep));
    if (u->relay) {
        char relay[OSH_RELAY_KEEP][32];
        size_t n = osh_relay_keep(u->relay, relay, OSH_RELAY_KEEP);
        for (size_t i = 0, off = strlen(keep); i < n && off < sizeof(keep); i++)
            off +=
                (size_t)snprintf(keep + off, sizeof(keep) - off, "%s%s", off ? " " : "", relay[i]);
    }
    return osh_cleanup(u->s, u->sb, keep, deadline, after, NULL, 0, err);
}

static const struct ph_project_ops ops = {.upload = upload, .step = step, .between = between};
/* A session's: its files through the writer (hosted.h, ph_upload). */
static const struct ph_project_ops session_ops = {
    .upload = upload, .step = step, .between = between, .session = true};

int osh_call(struct osh_state *s, const struct osh_sandbox *sb, struct ph_cells *cells,
             const struct pl_run_ctx *ctx, const struct pl_run_request *req, uint64_t deadline,
             struct pl_run_result *ret, struct pl_error *err) {
    struct step_ud u = {s, sb, NULL, cells};
    if (pl_payload_is_files(req->kind))
        return ph_files_call(&session_ops, &u, s->set.workdir, ctx, req, deadline, ret, err);
    if (req->kind == PL_PAYLOAD_CELL)
        return ph_cell(&session_ops, &u, cells, s->set.workdir, ctx, req, deadline, ret, err);
    if (req->kind == PL_PAYLOAD_SNIPPET)
        return ph_snippet(&session_ops, &u, "sandbox", ctx, req, deadline, ret, err);
    return ph_project(&session_ops, &u, s->set.workdir, ctx, req, deadline, ret, err);
}

int osh_run(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
            struct pl_run_result *ret, struct pl_error *err) {
    struct osh_state *s = state;
    if (req->kind != PL_PAYLOAD_SNIPPET && req->kind != PL_PAYLOAD_PROJECT)
        return pl_error_set(err, PL_REASON_UNSUPPORTED,
                            "openshell runs snippets and projects only");
    uint64_t deadline = pl_deadline_in_ms(ctx->timeout_ms);
    struct osh_sandbox sb;
    if (osh_open(s, ctx->run_id, ctx->timeout_ms, &sb, err) < 0)
        return -1;
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "%s", sb.name);
    struct step_ud u = {s, &sb, NULL, NULL};
    int rc = -1;
    if (!ctx->broker || osh_relay_start(s, &sb, ctx->broker, deadline, &u.relay, err) == 0)
        rc = req->kind == PL_PAYLOAD_SNIPPET
                 ? ph_snippet(&ops, &u, "sandbox", ctx, req, deadline, ret, err)
                 : ph_project(&ops, &u, s->set.workdir, ctx, req, deadline, ret, err);
    osh_relay_stop(u.relay);
    osh_close(s, &sb);
    return rc;
}
