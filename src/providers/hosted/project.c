/* SPDX-License-Identifier: Apache-2.0 */
/*
 * project.c: a snippet and a project in a hosted sandbox, the same on
 * every hosted provider (docs/internals/hosted.md, "A project's steps").
 * A project's files go under the work directory, then each step's argv
 * exactly, in the work directory, through a shell that makes the
 * directory (a project may have no files) and execs, so a program that
 * does not exist exits 127 with the shell's message; the output under the
 * caps; the cleanup between steps; the first step that fails, or the
 * deadline, ends the project.  A snippet is its code and stdin uploaded,
 * then one step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/clock.h"
#include "hosted.h"

char *ph_take_output(struct pl_capture *c, size_t *ret_len, bool *ret_truncated) {
    struct pl_output o = {0};
    (void)pl_capture_finish(c, &o);
    *ret_len = o.data ? o.len : 0;
    *ret_truncated = o.truncated;
    return o.data;
}

void ph_proc_out_take(struct ph_proc_out *o, struct pl_capture *out, struct pl_capture *err,
                      int exit_code, bool timed_out) {
    struct pl_capture t = o->out;
    o->out = *out;
    *out = t;
    t = o->err;
    o->err = *err;
    *err = t;
    o->exit_code = exit_code;
    o->timed_out = timed_out;
}

static int project_steps(const struct ph_project_ops *ops, void *ud, const char *workdir,
                         const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                         uint64_t deadline, struct pl_run_result *ret, struct pl_error *err) {
    ret->steps = calloc(req->project.nsteps ? req->project.nsteps : 1, sizeof(*ret->steps));
    if (!ret->steps)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    int rc = 0;
    bool timed_out = false;
    for (size_t i = 0; i < req->project.nsteps && rc == 0; i++) {
        const struct pl_step *step = &req->project.steps[i];
        struct pl_step_result *sr = &ret->steps[ret->nsteps];
        const char **argv = calloc(step->argc + 4, sizeof(*argv));
        if (!argv) {
            rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
            break;
        }
        argv[0] = "/bin/sh";
        argv[1] = "-c";
        argv[2] = "mkdir -p \"$0\" && cd \"$0\" && exec \"$@\"";
        argv[3] = workdir;
        memcpy(argv + 4, step->argv, step->argc * sizeof(*argv));
        struct ph_proc_out o;
        pl_capture_init(&o.out, ctx->output_bytes);
        pl_capture_init(&o.err, ctx->output_bytes);
        pl_capture_stream(&o.out, ctx->sink, 1, (unsigned)i + 1);
        pl_capture_stream(&o.err, ctx->sink, 2, (unsigned)i + 1);
        o.exit_code = -1;
        o.timed_out = false;
        uint64_t t0 = pl_now_ns();
        rc = ops->step(ud, argv, step->argc + 4, deadline, &o, err);
        free(argv);
        if (rc == 0) {
            sr->name = strdup(step->name);
            sr->timed_out = o.timed_out;
            sr->exit_code = o.timed_out ? 124 : o.exit_code;
            sr->out = ph_take_output(&o.out, &sr->out_len, &sr->out_truncated);
            sr->err = ph_take_output(&o.err, &sr->err_len, &sr->err_truncated);
            sr->duration_ms = (uint32_t)((pl_now_ns() - t0) / 1000000);
            ret->nsteps++;
            if (!sr->name || !sr->out || !sr->err)
                rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
            timed_out = o.timed_out;
        }
        pl_capture_free(&o.out);
        pl_capture_free(&o.err);
        if (rc < 0 || timed_out || sr->exit_code != 0)
            break;
        if (i + 1 < req->project.nsteps && ops->between) {
            char after[64];
            snprintf(after, sizeof(after), "step %zu", i + 1);
            rc = ops->between(ud, deadline, after, err);
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

int ph_files_refused(const struct ph_project_ops *ops, const char *what, struct pl_run_result *ret,
                     struct pl_error *err) {
    if (!ops->session || err->reason != PL_REASON_INVALID_REQUEST)
        return -1;
    ret->exit_code = 1;
    ret->outcome = PL_OUTCOME_COMPLETED;
    snprintf(ret->detail, sizeof(ret->detail), "the %s's files could not be written: %.180s", what,
             err->message);
    ret->out = calloc(1, 1);
    ret->err = calloc(1, 1);
    return ret->out && ret->err ? 0 : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
}

int ph_project(const struct ph_project_ops *ops, void *ud, const char *workdir,
               const struct pl_run_ctx *ctx, const struct pl_run_request *req, uint64_t deadline,
               struct pl_run_result *ret, struct pl_error *err) {
    size_t nf = req->project.nfiles;
    struct ph_file *files = calloc(nf ? nf : 1, sizeof(*files));
    if (!files)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < nf && rc == 0; i++) {
        size_t len = strlen(workdir) + 1 + strlen(req->project.files[i].path) + 1;
        char *path = malloc(len);
        if (!path) {
            rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
            break;
        }
        snprintf(path, len, "%s/%s", workdir, req->project.files[i].path);
        files[i] = (struct ph_file){path, req->project.files[i].content, req->project.files[i].len};
    }
    if (rc == 0)
        rc = ph_upload(ops, ud, workdir, files, nf, deadline, err);
    for (size_t i = 0; i < nf; i++)
        free((char *)files[i].path);
    free(files);
    if (rc < 0 && ops->session && err->reason == PL_REASON_INVALID_REQUEST) {
        /* A path the session's writer refused (an earlier call left a
         * symlink or a file in the way): the project's setup failed, as on
         * docker, and no step ran. */
        ret->outcome = PL_OUTCOME_SETUP_FAILED;
        snprintf(ret->detail, sizeof(ret->detail), "writing the project's files failed: %.200s",
                 err->message);
        ret->out = calloc(1, 1);
        ret->err = calloc(1, 1);
        return ret->out && ret->err ? 0 : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    if (rc < 0 || project_steps(ops, ud, workdir, ctx, req, deadline, ret, err) < 0)
        return -1;
    /* Its collect globs, before the sandbox goes (or the session's cleanup
     * runs): a failed step's files come too, a deadline's end brings none. */
    if (req->ncollect && !ret->timed_out &&
        ph_collect(ops, ud, workdir, ctx, req, deadline, ret) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    return 0;
}

int ph_snippet(const struct ph_project_ops *ops, void *ud, const char *where,
               const struct pl_run_ctx *ctx, const struct pl_run_request *req, uint64_t deadline,
               struct pl_run_result *ret, struct pl_error *err) {
    bool py = strcmp(req->snippet.language, "python") == 0;
    const char *main_path = py ? PH_SNIPPET_DIR "/main.py" : PH_SNIPPET_DIR "/main.js";
    struct ph_file files[] = {
        {main_path, req->snippet.code, req->snippet.code_len},
        {PH_SNIPPET_DIR "/stdin", req->snippet.stdin_data ? req->snippet.stdin_data : "",
         req->snippet.stdin_len},
    };
    if (ph_upload(ops, ud, PH_SNIPPET_DIR, files, 2, deadline, err) < 0)
        return ph_files_refused(ops, "snippet", ret, err);
    const char *argv[] = {"/bin/sh",
                          "-c",
                          "cd \"$3\" && exec \"$0\" \"$1\" < \"$2\"",
                          py ? "python3" : "node",
                          main_path,
                          PH_SNIPPET_DIR "/stdin",
                          PH_SNIPPET_DIR};
    struct ph_proc_out o;
    pl_capture_init(&o.out, ctx->output_bytes);
    pl_capture_init(&o.err, ctx->output_bytes);
    pl_capture_stream(&o.out, ctx->sink, 1, 0);
    pl_capture_stream(&o.err, ctx->sink, 2, 0);
    o.exit_code = -1;
    o.timed_out = false;
    int rc = ops->step(ud, argv, 7, deadline, &o, err);
    if (rc == 0) {
        ret->timed_out = o.timed_out;
        ret->exit_code = o.timed_out ? 124 : o.exit_code;
        ret->out = ph_take_output(&o.out, &ret->out_len, &ret->out_truncated);
        ret->err = ph_take_output(&o.err, &ret->err_len, &ret->err_truncated);
        ret->outcome = o.timed_out ? PL_OUTCOME_TIMED_OUT : PL_OUTCOME_COMPLETED;
        if (o.timed_out)
            snprintf(ret->detail, sizeof(ret->detail),
                     "the deadline of %u ms ended the run; the %s was deleted", ctx->timeout_ms,
                     where);
        if (!ret->out || !ret->err)
            rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    pl_capture_free(&o.out);
    pl_capture_free(&o.err);
    return rc;
}
