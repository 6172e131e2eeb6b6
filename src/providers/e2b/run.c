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

#include "../../core/clock.h"
#include "e2b_int.h"

#define EB_SNIPPET_DIR "/tmp/plimsoll"

int eb_open(struct e2b_state *s, const char *run_id, unsigned timeout_ms, const char *allow_out,
            struct eb_sandbox *ret, struct pl_error *err) {
    /* Tracked before the create is sent: the reaper spares a VM whose
     * answer has not come back yet. */
    if (eb_track(s, run_id) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "too many VMs in flight");
    unsigned ttl = (timeout_ms + 999) / 1000 + s->set.vm_slack_s;
    if (eb_create(s, run_id, ttl, allow_out, ret, err) < 0) {
        eb_untrack(s, run_id);
        return -1;
    }
    return 0;
}

void eb_close(struct e2b_state *s, const char *run_id, const struct eb_sandbox *sb) {
    struct pl_error err = {0};
    if (sb->id[0])
        (void)eb_delete(s, sb->id, &err); /* a VM left behind keeps its label: reaped */
    eb_untrack(s, run_id);
}

/* The output of a capture, owned by the result. */
static char *take(struct pl_capture *c, size_t *ret_len, bool *ret_truncated) {
    struct pl_output o = {0};
    (void)pl_capture_finish(c, &o);
    *ret_len = o.data ? o.len : 0;
    *ret_truncated = o.truncated;
    return o.data;
}

int eb_snippet(struct e2b_state *s, const struct eb_sandbox *sb, const struct pl_run_ctx *ctx,
               const struct pl_run_request *req, uint64_t deadline, struct pl_run_result *ret,
               struct pl_error *err) {
    bool py = strcmp(req->snippet.language, "python") == 0;
    const char *main_path = py ? EB_SNIPPET_DIR "/main.py" : EB_SNIPPET_DIR "/main.js";
    struct eb_file files[] = {
        {main_path, req->snippet.code, req->snippet.code_len},
        {EB_SNIPPET_DIR "/stdin", req->snippet.stdin_data ? req->snippet.stdin_data : "",
         req->snippet.stdin_len},
    };
    if (eb_upload(s, sb, "user", files, 2, err) < 0)
        return -1;
    const char *argv[] = {"/bin/sh",
                          "-c",
                          "exec \"$0\" \"$1\" < \"$2\"",
                          py ? "python3" : "node",
                          main_path,
                          EB_SNIPPET_DIR "/stdin"};
    struct eb_proc p;
    eb_proc_init(&p, ctx->output_bytes);
    p.user = "user";
    p.argv = argv;
    p.argc = 6;
    p.cwd = EB_SNIPPET_DIR;
    p.deadline_ns = deadline;
    int rc = eb_process(s, sb, &p, err);
    if (rc == 0) {
        ret->timed_out = p.timed_out;
        ret->exit_code = p.timed_out ? 124 : p.exit_code;
        ret->out = take(&p.out, &ret->out_len, &ret->out_truncated);
        ret->err = take(&p.err, &ret->err_len, &ret->err_truncated);
        ret->outcome = p.timed_out ? PL_OUTCOME_TIMED_OUT : PL_OUTCOME_COMPLETED;
        if (p.timed_out)
            snprintf(ret->detail, sizeof(ret->detail),
                     "the deadline of %u ms ended the run; the VM was deleted", ctx->timeout_ms);
        if (!ret->out || !ret->err)
            rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    eb_proc_free(&p);
    return rc;
}

/*
 * Between two steps, as root: end every process of the guest's user (by
 * the real uid in /proc/PID/status, which a process cannot hide by making
 * itself non-dumpable), and prove none is left; as on docker, a step never
 * finds what an earlier one left running.
 */
static const char end_user_processes[] =
    "import os, signal, sys, time\n"
    "uid = sys.argv[1]\n"
    "def theirs():\n"
    "    out = []\n"
    "    for p in os.listdir('/proc'):\n"
    "        try:\n"
    "            with open('/proc/%s/status' % p) as f:\n"
    "                if any(l.split()[1:2] == [uid] for l in f if l.startswith('Uid:')):\n"
    "                    out.append(int(p))\n"
    "        except (OSError, ValueError):\n"
    "            pass\n"
    "    return out\n"
    "for _ in range(100):\n"
    "    left = theirs()\n"
    "    if not left:\n"
    "        print('clean')\n"
    "        break\n"
    "    for p in left:\n"
    "        try:\n"
    "            os.kill(p, signal.SIGKILL)\n"
    "        except OSError:\n"
    "            pass\n"
    "    time.sleep(0.01)\n"
    "else:\n"
    "    print('left', theirs())\n";

int eb_end_leftovers(struct e2b_state *s, const struct eb_sandbox *sb, uint64_t deadline,
                     const char *after, struct pl_error *err) {
    char uid[16];
    snprintf(uid, sizeof(uid), "%u", s->user_uid);
    const char *argv[] = {"python3", "-c", end_user_processes, uid};
    struct eb_proc p;
    eb_proc_init(&p, 4096);
    p.user = "root";
    p.argv = argv;
    p.argc = 4;
    p.cwd = "/";
    /* The run's deadline, or a short one of its own past it. */
    uint64_t now = pl_now_ns();
    p.deadline_ns = deadline > now + 2000000000ull ? deadline : now + 2000000000ull;
    int rc = eb_process(s, sb, &p, err);
    if (rc == 0 && (p.timed_out || p.exit_code != 0 || p.out.kept.len != 6 ||
                    memcmp(p.out.kept.data, "clean\n", 6) != 0))
        rc =
            pl_error_set(err, PL_REASON_INTERNAL, "what %s left running could not be ended: %.100s",
                         after, p.out.kept.data ? p.out.kept.data : "");
    eb_proc_free(&p);
    return rc;
}

int eb_project(struct e2b_state *s, const struct eb_sandbox *sb, const struct pl_run_ctx *ctx,
               const struct pl_run_request *req, uint64_t deadline, struct pl_run_result *ret,
               struct pl_error *err) {
    size_t nf = req->project.nfiles;
    struct eb_file *files = calloc(nf ? nf : 1, sizeof(*files));
    char(*paths)[PL_PATH_MAX_BYTES + 300] = calloc(nf ? nf : 1, sizeof(*paths));
    ret->steps = calloc(req->project.nsteps ? req->project.nsteps : 1, sizeof(*ret->steps));
    if (!files || !paths || !ret->steps) {
        free(files);
        free(paths);
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    for (size_t i = 0; i < nf; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/%s", s->set.workdir, req->project.files[i].path);
        files[i] =
            (struct eb_file){paths[i], req->project.files[i].content, req->project.files[i].len};
    }
    int rc = eb_upload(s, sb, "user", files, nf, err);
    free(files);
    free(paths);
    if (rc < 0)
        return -1;
    bool timed_out = false;
    for (size_t i = 0; i < req->project.nsteps && rc == 0; i++) {
        const struct pl_step *step = &req->project.steps[i];
        struct pl_step_result *sr = &ret->steps[ret->nsteps];
        struct eb_proc p;
        eb_proc_init(&p, ctx->output_bytes);
        /* argv exactly, in the project directory, through a shell that
         * makes the directory (a project may have no files) and execs: a
         * program that does not exist exits 127 with the shell's message
         * on stderr, a result as on docker, not a failure of envd's. */
        const char **argv = calloc(step->argc + 4, sizeof(*argv));
        if (!argv) {
            eb_proc_free(&p);
            rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
            break;
        }
        argv[0] = "/bin/sh";
        argv[1] = "-c";
        argv[2] = "mkdir -p \"$0\" && cd \"$0\" && exec \"$@\"";
        argv[3] = s->set.workdir;
        memcpy(argv + 4, step->argv, step->argc * sizeof(*argv));
        p.user = "user";
        p.argv = argv;
        p.argc = step->argc + 4;
        p.cwd = "/";
        p.deadline_ns = deadline;
        uint64_t t0 = pl_now_ns();
        rc = eb_process(s, sb, &p, err);
        free(argv);
        if (rc == 0) {
            sr->name = strdup(step->name);
            sr->timed_out = p.timed_out;
            sr->exit_code = p.timed_out ? 124 : p.exit_code;
            sr->out = take(&p.out, &sr->out_len, &sr->out_truncated);
            sr->err = take(&p.err, &sr->err_len, &sr->err_truncated);
            sr->duration_ms = (uint32_t)((pl_now_ns() - t0) / 1000000);
            ret->nsteps++;
            if (!sr->name || !sr->out || !sr->err)
                rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
            timed_out = p.timed_out;
        }
        eb_proc_free(&p);
        if (rc < 0 || timed_out || sr->exit_code != 0)
            break;
        /* (The proof's first step learns the uid; it ends nothing before.) */
        if (i + 1 < req->project.nsteps && s->user_uid) {
            char after[64];
            snprintf(after, sizeof(after), "step %zu", i + 1);
            rc = eb_end_leftovers(s, sb, deadline, after, err);
        }
    }
    if (rc < 0)
        return -1;
    ret->timed_out = timed_out;
    if (timed_out) {
        ret->outcome = PL_OUTCOME_TIMED_OUT;
        ret->exit_code = 124;
        snprintf(ret->detail, sizeof(ret->detail),
                 "the deadline of %u ms ended the run during step %zu of %zu", ctx->timeout_ms,
                 ret->nsteps, req->project.nsteps);
    } else {
        pl_run_result_steps_completed(ret);
    }
    ret->out = calloc(1, 1);
    ret->err = calloc(1, 1);
    if (!ret->out || !ret->err)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    return 0;
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
    int rc = req->kind == PL_PAYLOAD_SNIPPET ? eb_snippet(s, &sb, ctx, req, deadline, ret, err)
                                             : eb_project(s, &sb, ctx, req, deadline, ret, err);
    if (sb.guard_token[0])
        ph_guard_revoke(s->guard, sb.guard_token); /* after its last request was answered */
    explicit_bzero(sb.guard_token, sizeof(sb.guard_token));
    eb_close(s, ctx->run_id, &sb);
    if (rc < 0)
        pl_error_wrap(err, "e2b sandbox %s: ", sb.id);
    return rc;
}
