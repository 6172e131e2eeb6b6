/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run.c: a run.  A snippet or module is the container's own process; a
 * project's files are written by the bootstrap, then each step is an
 * engine exec (docs/providers/docker.md, "A project").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../core/cleanup.h"
#include "docker_int.h"
#include "reports.h"
#include "bootstrap.h" /* generated: pl_docker_bootstrap[] */

/* The first "PLIMSOLL {...}" line of the bootstrap's stdout. */
json_t *dk_report_line(const struct pl_buf *out) {
    const char *p = out->data;
    size_t n = out->len;
    while (p && n >= 9) {
        const char *eol = memchr(p, '\n', n);
        size_t len = eol ? (size_t)(eol - p) : n;
        if (len > 9 && memcmp(p, "PLIMSOLL ", 9) == 0)
            return json_loadb(p + 9, len - 9, 0, NULL);
        if (!eol)
            break;
        n -= len + 1;
        p = eol + 1;
    }
    return NULL;
}

char *dk_take(struct pl_capture *c, size_t *ret_len, bool *ret_truncated) {
    struct pl_output o = {0};
    (void)pl_capture_finish(c, &o); /* o.data is NULL when out of memory */
    *ret_len = o.data ? o.len : 0;
    if (ret_truncated)
        *ret_truncated = o.truncated;
    return o.data;
}

void dk_free_steps(struct pl_step_result *st, size_t n) {
    for (size_t i = 0; st && i < n; i++) {
        free(st[i].name);
        free(st[i].out);
        free(st[i].err);
    }
    free(st);
}

void dk_cont_run_clear(struct cont_run *r) {
    pl_demux_free(&r->dx);
    dk_free_steps(r->steps, r->nsteps);
    r->steps = NULL;
    r->nsteps = 0;
}

/*
 * An exec of argv, exactly: sh "exec "$@"" under runc; under runsc the
 * bootstrap's exec mode, which first installs the seccomp filter gVisor
 * does not give an exec.  A program that does not exist exits 127 with a
 * message on stderr.
 */
json_t *dk_step_cmd(struct docker_state *s, const char *const *argv, size_t argc) {
    json_t *cmd = s->set.exec_filter_env
                      ? json_pack("[s, s, s, s]", "python3", "-c", pl_docker_bootstrap, "exec")
                      : json_pack("[s, s, s, s]", "/bin/sh", "-c", "exec \"$@\"", "plimsoll");
    for (size_t k = 0; cmd && k < argc; k++)
        json_array_append_new(cmd, json_string(argv[k]));
    return cmd;
}

/*
 * A project's steps, each one engine exec in container r->id as the
 * sandbox's user, in /work, in order, stopping at the first that fails.
 * Exit codes and output come from the engine (the exec's own stream and
 * inspect), a channel no process in the sandbox can open or write.  After
 * each step, everything it left running is ended from the host, so nothing
 * of one step can reach the next step's streams.  Engine failures are
 * infrastructure (< 0); a sandbox that ended under the steps (the guest's
 * doing, e.g. memory) is r->step_error.
 */
int dk_project_steps(struct docker_state *s, struct cont_run *r, uint64_t deadline,
                     pid_t init_host_pid, const long *keep, size_t nkeep, struct pl_error *err) {
    const struct pl_run_request *req = r->project;
    r->steps = calloc(req->project.nsteps ? req->project.nsteps : 1, sizeof(*r->steps));
    if (!r->steps)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    char user[32];
    dk_run_user(s, user);
    for (size_t i = 0; i < req->project.nsteps; i++) {
        uint64_t now = pl_now_ns();
        if (now >= deadline) {
            r->timed_out = true;
            return 0;
        }
        PL_CLEANUP(dk_cont_run_clear)
        struct cont_run e = {.timeout_ms = (unsigned)((deadline - now) / 1000000ull) + 1};
        e.dx.out.cap = e.dx.err.cap = r->output_bytes;
        pl_capture_stream(&e.dx.out, r->sink, 1, (unsigned)i + 1);
        pl_capture_stream(&e.dx.err, r->sink, 2, (unsigned)i + 1);
        json_t *cmd = dk_step_cmd(s, (const char *const *)req->project.steps[i].argv,
                                  req->project.steps[i].argc);
        int code = -1;
        struct pl_error xerr = {0};
        int rc = dk_exec_in(s, r->id, user, cmd, r->step_env ? json_pack("[s]", r->step_env) : NULL,
                            &e, &code, &xerr);
        uint32_t ms = (uint32_t)((pl_now_ns() - now) / 1000000ull);
        if (rc == 0 && code < 0 && !e.timed_out) {
            /* The stream ended with no exit code: the sandbox may be gone. */
            rc = -1;
            pl_error_set(&xerr, PL_REASON_INTERNAL, "the engine gave no exit code for step %zu",
                         i + 1);
        }
        if (rc < 0) {
            /* Did the sandbox end under the step (the guest's doing), or did
             * the engine fail us? */
            char path[160];
            PL_AUTO_JSON json_t *ins = NULL;
            snprintf(path, sizeof(path), "/containers/%s/json", r->id);
            if (dk_api_expect(s, "GET", path, NULL, 200, &ins, err) < 0)
                return -1;
            bool running = pl_docker_state_flag(ins, "Running");
            r->oom = pl_docker_state_flag(ins, "OOMKilled");
            if (running) {
                *err = xerr;
                return -1;
            }
            snprintf(r->step_error, sizeof(r->step_error), "the sandbox ended %s step %zu (%s)%s",
                     e.exec_id[0] ? "during" : "before", i + 1, req->project.steps[i].name,
                     r->oom ? ": out of memory" : "");
            return 0;
        }
        if (e.timed_out) {
            r->timed_out = true;
            return 0;
        }
        struct pl_step_result *st = &r->steps[r->nsteps];
        st->name = strdup(req->project.steps[i].name);
        st->exit_code = code;
        st->duration_ms = ms;
        st->out = dk_take(&e.dx.out, &st->out_len, &st->out_truncated);
        st->err = dk_take(&e.dx.err, &st->err_len, &st->err_truncated);
        r->nsteps++;
        if (!st->name || !st->out || !st->err)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        if (code < 0) {
            snprintf(r->step_error, sizeof(r->step_error),
                     "the engine gave no exit code for step %zu (%s)", i + 1,
                     req->project.steps[i].name);
            return 0;
        }
        if (dk_host_sweep(s, r->id, init_host_pid, keep, nkeep, NULL, 0, NULL, err) < 0) {
            /* Under gVisor a step can kill the sandbox's PID 1 (Linux
             * ignores it): then the sandbox is over, and that is the
             * guest's doing, not the infrastructure's. */
            char path[160];
            snprintf(path, sizeof(path), "/containers/%s/json", r->id);
            /* A sandbox whose PID 1 was just killed can fail `runsc ps`
             * a moment before the engine marks it exited: give the state
             * up to 2 s to settle before calling it the infrastructure's. */
            bool running = true;
            for (int tries = 0; tries < 20 && running; tries++) {
                PL_AUTO_JSON json_t *ins = NULL;
                struct pl_error ierr = {0};
                if (dk_api_expect(s, "GET", path, NULL, 200, &ins, &ierr) == 0)
                    running = pl_docker_state_flag(ins, "Running");
                if (running)
                    usleep(100000);
            }
            if (running)
                return -1;
            if (i + 1 < req->project.nsteps && code == 0)
                snprintf(r->step_error, sizeof(r->step_error),
                         "the sandbox ended after step %zu (%s); step %zu could not run", i + 1,
                         req->project.steps[i].name, i + 2);
            return 0;
        }
        if (code != 0)
            break;
    }
    return 0;
}

/*
 * The run's end without the engine (docs/providers/docker.md, "The run's
 * end"): both streams ended with the marker only the bootstrap knows, which
 * it writes after the guest's main process ended and it reaped every other
 * process of the sandbox.  The host then kills whatever is in the
 * container's cgroup (the waiting bootstrap, under runsc the sandbox) and
 * sees every thread of it gone or exiting, so nothing of the run can run
 * an instruction when the answer goes (the kernel frees a gVisor sandbox's
 * memory in tens of milliseconds: after the answer).  A
 * status of 137 (a SIGKILL: the OOM killer's or anyone's) or an OOM kill
 * in the cgroup's own count (oom_kills, as the caller read it: not 0 also
 * when it could not be read) leaves the verdict to the engine: 0, and the
 * caller waits for the engine's exit code.  1 when the run ended here
 * (r->exit_code set); < 0 when the host could not empty the cgroup.
 */
static int fast_end(struct docker_state *s, struct cont_run *r, const char *cg,
                    long long oom_kills) {
    int status = 0;
    if (!pl_demux_ended(&r->dx, &status) || status == 128 + SIGKILL || oom_kills != 0)
        return 0;
    /* Threads not yet exiting 5 s after the kill (a host under load, a
     * thread in D state) get the host's proof's own wait for an empty
     * cgroup, and a second kill, before the result is refused. */
    if (pl_hostview_kill_all(&s->hv, cg, 5000, true, NULL) < 0 && dk_host_prove_gone(s, r->id) < 0)
        return -1;
    r->exit_code = status; /* r->oom is false: the count was 0 */
    return 1;
}

/* Whichever way dk_run_container leaves, the container it made goes to the
 * reaper, after the attach stream is closed. */
struct reap_guard {
    struct docker_state *s;
    const char *id;
};

static void reap_guard_end(struct reap_guard *g) {
    if (g->id)
        dk_reap_later(g->s, g->id);
}

/* A project's steps, once the bootstrap reported its files written; then
 * the container ends. */
static int run_project_steps(struct docker_state *s, struct cont_run *r, uint64_t deadline,
                             struct pl_error *err) {
    PL_AUTO_JSON json_t *rep = r->timed_out ? NULL : dk_report_line(&r->dx.out.kept);
    if (json_object_get(rep, "setup") && !json_object_get(rep, "setup_failed")) {
        PL_AUTO_JSON json_t *ins = NULL;
        char path[256];
        snprintf(path, sizeof(path), "/containers/%s/json", r->id);
        if (dk_api_expect(s, "GET", path, NULL, 200, &ins, err) < 0)
            return -1;
        pid_t init_pid =
            (pid_t)json_integer_value(json_object_get(json_object_get(ins, "State"), "Pid"));
        if (dk_project_steps(s, r, deadline, init_pid, NULL, 0, err) < 0)
            return -1;
    }
    if (dk_end_container(s, r->id) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: cannot end the project's container");
    return 0;
}

/* The engine's exit code for r's container.  The guest may close its
 * output and keep running: the wait is bounded by the deadline too, and a
 * guest still running then is killed. */
static int wait_exit(struct docker_state *s, struct cont_run *r, uint64_t deadline,
                     struct pl_error *err) {
    char path[256];
    snprintf(path, sizeof(path), "/containers/%s/wait?condition=not-running", r->id);
    PL_AUTO_JSON json_t *w = NULL;
    uint64_t now = pl_now_ns();
    if (!r->timed_out && now < deadline) {
        long st = 0;
        long wait_ms = (long)((deadline - now) / 1000000ull) + 1;
        struct pl_error werr = {0};
        if (pl_docker_call(s->engine, "POST", path, NULL, wait_ms, &st, &w, &werr) == 0 &&
            st == 200) {
            r->exit_code = pl_docker_wait_code(w);
            return 0;
        }
        json_decref(PL_TAKE_PTR(w));
        /* Not exited by the deadline (or the call failed): kill, then wait. */
        if (dk_end_container(s, r->id) == 0)
            r->timed_out = pl_now_ns() >= deadline;
    }
    if (dk_api_expect(s, "POST", path, NULL, 200, &w, err) < 0)
        return -1;
    r->exit_code = pl_docker_wait_code(w);
    return 0;
}

int dk_run_container(struct docker_state *s, struct cont_run *r, struct pl_error *err) {
    char path[256];
    if (r->warm_id[0]) {
        /* A warm container: created and started already, its bootstrap
         * blocked on stdin.  The run begins when we attach. */
        memcpy(r->id, r->warm_id, sizeof(r->id));
    } else if (dk_create_container(s, r->image_id, r->memory_mb, r->run_id, r->socket_dir, false,
                                   r->id, err) < 0) {
        return -1;
    }
    PL_GUARD(reap_guard_end) struct reap_guard reap = {s, r->id};
    if (r->gate)
        dk_peer_gate_open(r->gate, r->id);

    PL_AUTO_CLOSE int fd = -1;
    long long oom_kills = -ENOENT; /* the cgroup's count, once read */
    if (pl_docker_attach(s->engine, r->id, &fd, err) < 0)
        return -1;
    uint64_t t0 = pl_now_ns();
    uint64_t deadline = t0 + (uint64_t)r->timeout_ms * 1000000ull;
    if (!r->warm_id[0]) {
        snprintf(path, sizeof(path), "/containers/%s/start", r->id);
        if (dk_api_expect(s, "POST", path, NULL, 204, NULL, err) < 0)
            return -1;
    }
    if (pl_fd_set_nonblock(fd) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "fcntl: %s", strerror(errno));
    r->until_line = r->project != NULL;
    if (dk_pump(s, r, fd, deadline, err) < 0)
        return -1;
    close(PL_TAKE_FD(fd));
    if (!r->timed_out && !r->project) {
        /* The cgroup's OOM count, read now: the runtime removes the cgroup
         * with the container, and the engine's own flag can miss a kill
         * (its OOM event may come after the exit: containerd#8180). */
        char cg[200];
        pl_hostview_cgroup(&s->hv, r->id, cg, sizeof(cg));
        oom_kills = pl_hostview_oom_kills(&s->hv, cg);
        r->oom = oom_kills > 0;
        int fast = fast_end(s, r, cg, oom_kills);
        if (fast > 0)
            return 0;
        if (fast < 0)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the run's processes could not all be killed on the host; its "
                                "result cannot be trusted");
    }
    if (pl_demux_flush(&r->dx) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    /* The files are written and the report is in (or the bootstrap
     * failed): the steps, then the container ends. */
    if (r->project && run_project_steps(s, r, deadline, err) < 0)
        return -1;
    if (wait_exit(s, r, deadline, err) < 0)
        return -1;
    snprintf(path, sizeof(path), "/containers/%s/json", r->id);
    /* When the host could not read the count (under runsc the cgroup is
     * gone with the sandbox by the streams' end), the engine's flag is the
     * word, and its OOM event can come after the exit (containerd#8180);
     * it sets the flag when it comes, so a SIGKILLed end (not the
     * deadline's kill) asks again, for OOM_LATE_MS at most.  A count read
     * says it all: the kernel counts the kill before its victim can die. */
    for (int tries = 0;; tries++) {
        PL_AUTO_JSON json_t *ins = NULL;
        if (dk_api_expect(s, "GET", path, NULL, 200, &ins, err) < 0)
            return -1;
        r->oom = r->oom || pl_docker_state_flag(ins, "OOMKilled");
        if (r->oom || r->project || r->timed_out || oom_kills >= 0 ||
            r->exit_code != 128 + SIGKILL || tries >= OOM_LATE_MS / OOM_LATE_STEP_MS)
            break;
        usleep(OOM_LATE_STEP_MS * 1000);
    }
    /* The engine's word is not the end: the host proves nothing of the run
     * lives, and an end nobody's process gives (the engine's -1 when a
     * guest made its PID 1 unkillable to the runtime) is infrastructure. */
    int gone = dk_host_prove_gone(s, r->id);
    if (gone != 0)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the run's container ended while its processes still ran on the "
                            "host (they %s); its result cannot be trusted",
                            gone > 0 ? "were killed" : "could not all be killed");
    if (!r->project && (r->exit_code < 0 || r->exit_code > 255))
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the engine reported exit code %d, which no process can return; "
                            "the run's end cannot be trusted",
                            r->exit_code);
    return 0;
}

/*
 * A project's outcome.  The files report (one line, written before any
 * guest code existed; setup_report) says whether the steps could start;
 * the steps themselves came from the engine (dk_project_steps).  A missing,
 * torn, oversized or unreadable report is protocol_error, never skipped.
 */
static void project_outcome(const struct pl_run_request *req, struct cont_run *r,
                            const char *setup_failed, bool setup_ok, const char *setup_problem,
                            struct pl_run_result *ret) {
    ret->steps = r->steps;
    ret->nsteps = r->nsteps;
    r->steps = NULL;
    r->nsteps = 0;
    int last = ret->nsteps ? ret->steps[ret->nsteps - 1].exit_code : 0;
    ret->exit_code = last;
    if (setup_failed) {
        ret->outcome = PL_OUTCOME_SETUP_FAILED;
        snprintf(ret->detail, sizeof(ret->detail), "writing the project's files failed: %.200s",
                 setup_failed);
    } else if (r->timed_out) {
        ret->outcome = PL_OUTCOME_TIMED_OUT;
        ret->exit_code = 124;
        snprintf(ret->detail, sizeof(ret->detail),
                 "the deadline of %u ms ended the run %s step %zu of %zu", r->timeout_ms,
                 setup_ok ? "during" : "before", ret->nsteps + 1, req->project.nsteps);
    } else if (!setup_ok) {
        ret->outcome = PL_OUTCOME_PROTOCOL_ERROR;
        snprintf(ret->detail, sizeof(ret->detail), "%.250s", setup_problem);
        if (r->oom)
            ret->exit_code = 137;
    } else if (r->step_error[0]) {
        ret->outcome = PL_OUTCOME_PROTOCOL_ERROR;
        snprintf(ret->detail, sizeof(ret->detail), "%.250s", r->step_error);
        if (r->oom)
            ret->exit_code = 137;
    } else {
        pl_run_result_steps_completed(ret);
    }
}

/* The bootstrap's files report (reports.h). */
static json_t *setup_report(const struct cont_run *r, char *why, size_t len) {
    return pl_docker_files_report(r->dx.out.kept.data, r->dx.out.kept.len, r->dx.out.total,
                                  r->dx.out.cap, r->exit_code, why, len);
}

/*
 * Set r up for a snippet, module or project: the image, the bytes for the
 * bootstrap's stdin (the header in *hdr, a project's files in *files, which
 * r's parts point into) and the output caps.
 */
int dk_prepare_run(struct docker_state *s, const struct pl_run_ctx *ctx,
                   const struct pl_run_request *req, struct cont_run *r, struct pl_buf *hdr,
                   struct pl_buf *files, struct pl_error *err) {
    json_t *h = NULL;
    switch (req->kind) {
    case PL_PAYLOAD_SNIPPET:
        r->image_id = s->snippet_id;
        h = json_pack("{s:s, s:s, s:I}", "kind", "snippet", "language", req->snippet.language,
                      "code_len", (json_int_t)req->snippet.code_len);
        r->parts[1] = req->snippet.code;
        r->part_len[1] = req->snippet.code_len;
        r->parts[2] = req->snippet.stdin_data;
        r->part_len[2] = req->snippet.stdin_len;
        break;
    case PL_PAYLOAD_MODULE: {
        r->image_id = s->snippet_id;
        json_t *args = json_array();
        for (size_t i = 0; i < req->module.nargs; i++)
            json_array_append_new(args, json_string(req->module.args[i]));
        h = json_pack("{s:s, s:I, s:o}", "kind", "module", "wasm_len",
                      (json_int_t)req->module.wasm_len, "args", args);
        r->parts[1] = (const char *)req->module.wasm;
        r->part_len[1] = req->module.wasm_len;
        r->parts[2] = req->module.stdin_data;
        r->part_len[2] = req->module.stdin_len;
        break;
    }
    case PL_PAYLOAD_PROJECT: {
        r->image_id = s->project_id;
        json_t *fl = json_array();
        for (size_t i = 0; i < req->project.nfiles; i++) {
            json_array_append_new(fl, json_pack("{s:s, s:I}", "path", req->project.files[i].path,
                                                "len", (json_int_t)req->project.files[i].len));
            pl_buf_append(files, req->project.files[i].content, req->project.files[i].len);
        }
        h = json_pack("{s:s, s:o}", "kind", "project", "files", fl);
        r->parts[1] = files->data;
        r->part_len[1] = files->len;
        r->nparts = 2;
        /* The bootstrap's stdout carries one short report line; the steps'
         * output comes from their own execs. */
        r->dx.out.cap = 64u << 10;
        r->dx.err.cap = 64u << 10;
        r->project = req;
        r->output_bytes = ctx->output_bytes;
        r->sink = ctx->sink;
        break;
    }
    default: return pl_error_set(err, PL_REASON_INTERNAL, "docker: payload not dispatched here");
    }
    if (req->kind != PL_PAYLOAD_PROJECT && r->own_container) {
        /* The bootstrap ends both streams with a marker holding this nonce
         * once nothing of the guest lives ("The run's end").  Never in a
         * session's exec: the session's other processes live on. */
        char nonce[33], mark[PL_DEMUX_MARK_MAX];
        if (!h || pl_random_hex(nonce, sizeof(nonce), 16) < 0) {
            json_decref(h);
            return pl_error_set(err, PL_REASON_INTERNAL, "docker: no randomness for the run");
        }
        json_object_set_new(h, "end", json_string(nonce));
        int ml = snprintf(mark, sizeof(mark), END_MARK_PREFIX "%s ", nonce);
        pl_demux_expect_end(&r->dx, mark, (size_t)ml);
    }
    if (req->kind != PL_PAYLOAD_PROJECT) {
        /* Snippets and modules: header, the code, then the guest's stdin;
         * the guest's own output is the container's. */
        r->nparts = 3;
        r->dx.out.cap = r->dx.err.cap = ctx->output_bytes;
        pl_capture_stream(&r->dx.out, ctx->sink, 1, 0);
        pl_capture_stream(&r->dx.err, ctx->sink, 2, 0);
    }
    char *line = h ? json_dumps(h, JSON_COMPACT) : NULL;
    json_decref(h);
    if (line)
        pl_buf_printf(hdr, "%zu\n%s", strlen(line), line);
    free(line);
    r->parts[0] = hdr->data;
    r->part_len[0] = hdr->len;
    return hdr->data ? 0 : pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory");
}

/* Fill the result of a finished snippet, module or project from r. */
int dk_finish_run(const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                  struct cont_run *r, struct pl_run_result *ret, struct pl_error *err) {
    ret->timed_out = r->timed_out;
    ret->out_of_memory = r->oom;
    if (req->kind == PL_PAYLOAD_PROJECT) {
        if (r->files_done) {
            /* A session's call: the files exec's exit code said it. */
            project_outcome(req, r, r->files_failed[0] ? r->files_failed : NULL,
                            !r->files_failed[0], NULL, ret);
        } else {
            char why[160];
            json_t *rep = setup_report(r, why, sizeof(why));
            project_outcome(req, r, json_string_value(json_object_get(rep, "setup_failed")),
                            json_is_string(json_object_get(rep, "setup")), why, ret);
            json_decref(rep);
        }
        ret->out = calloc(1, 1);
        ret->err = dk_take(&r->dx.err, &ret->err_len, NULL);
        if (ret->err_len > ctx->output_bytes) {
            ret->err_len = ctx->output_bytes;
            ret->err_truncated = true;
        }
        if (!ret->out || !ret->err) {
            pl_demux_free(&r->dx);
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        }
    } else {
        ret->exit_code = r->timed_out ? 124 : r->exit_code;
        ret->out = dk_take(&r->dx.out, &ret->out_len, &ret->out_truncated);
        ret->err = dk_take(&r->dx.err, &ret->err_len, &ret->err_truncated);
        ret->outcome = r->timed_out ? PL_OUTCOME_TIMED_OUT : PL_OUTCOME_COMPLETED;
        if (r->timed_out)
            snprintf(ret->detail, sizeof(ret->detail),
                     "the deadline of %u ms ended the run; the container was killed",
                     ctx->timeout_ms);
        else if (r->oom)
            snprintf(ret->detail, sizeof(ret->detail),
                     "out of memory: the container's limit is %u MiB; the kernel killed the "
                     "guest (exit %d)",
                     ctx->memory_mb, r->exit_code);
    }
    pl_demux_free(&r->dx);
    return 0;
}

/* A grant's broker listening for one run, and the gate it asks: the broker
 * stops listening before the gate, which lives on the run's stack, goes. */
struct run_listener {
    struct pl_broker *broker;
    struct peer_gate gate;
};

static void run_listener_end(struct run_listener *l) {
    pl_broker_unlisten(l->broker);
    dk_peer_gate_destroy(&l->gate);
}

int dk_run(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
           struct pl_run_result *ret, struct pl_error *err) {
    struct docker_state *s = state;
    PL_CLEANUP(dk_cont_run_clear)
    struct cont_run r = {.memory_mb = ctx->memory_mb,
                         .run_id = ctx->run_id,
                         .timeout_ms = ctx->timeout_ms,
                         .own_container = true};
    PL_CLEANUP(pl_buf_free) struct pl_buf hdr = {0};
    PL_CLEANUP(pl_buf_free) struct pl_buf files = {0};
    if (dk_prepare_run(s, ctx, req, &r, &hdr, &files, err) < 0)
        return -1;
    /* A grant's broker listens in a directory of its own, bind-mounted at
     * /run/plimsoll; a warm container has no such mount, so grant runs
     * start cold.  Only this run's container may connect (peer_gate). */
    char broker_dir[PATH_MAX];
    PL_CLEANUP(run_listener_end) struct run_listener listener = {.broker = ctx->broker};
    dk_peer_gate_init(&listener.gate, s);
    if (ctx->broker) {
        snprintf(broker_dir, sizeof(broker_dir), "%.2000s/%s/run-%s", s->set.run_dir,
                 s->set.instance, ctx->run_id);
        struct pl_broker_sock_access acc = dk_sandbox_access(s, &listener.gate);
        if (dk_make_instance_dir(s, err) < 0 ||
            pl_broker_listen(ctx->broker, broker_dir, &acc, err) < 0)
            return -1;
        r.socket_dir = broker_dir;
        r.gate = &listener.gate;
    } else {
        dk_take_warm(s, req->kind == PL_PAYLOAD_PROJECT ? 1 : 0, ctx->memory_mb, r.warm_id);
    }
    int rc = dk_run_container(s, &r, err);
    if (!ctx->broker)
        dk_warm_done(s); /* the refill a take held back may start */
    if (rc < 0) {
        dk_invalidate_ready(s);
        return -1;
    }
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "plimsoll-%.24s", ctx->run_id);
    return dk_finish_run(ctx, req, &r, ret, err);
}
