/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run.c: a run.  A snippet or module is the container's own process; a
 * project's files are written by the bootstrap, which then runs each step
 * the daemon sends it on the attach stream (in a session's container each
 * step is an engine exec) (docs/providers/docker.md, "A project").
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
#include "bootstrap.h"     /* generated: pl_docker_bootstrap[] */
#include "session_steps.h" /* generated: pl_docker_session_steps[] */

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

/*
 * An exec of argv, exactly: sh "exec "$@"" under runc; under runsc the
 * bootstrap's exec mode, which first installs the seccomp filter gVisor
 * does not give an exec.  A program that does not exist exits 127 with a
 * message on stderr.
 */
json_t *dk_step_cmd(struct docker_state *s, const char *const *argv, size_t argc) {
    json_t *cmd =
        s->set.exec_filter_env
            ? json_pack("[s, s, s, s, s]", "python3", "-I", "-c", pl_docker_bootstrap, "exec")
            : json_pack("[s, s, s, s]", "/bin/sh", "-c", "exec \"$@\"", "plimsoll");
    for (size_t k = 0; cmd && k < argc; k++)
        json_array_append_new(cmd, json_string(argv[k]));
    return cmd;
}

/* What a project's steps share, step to step (dk_project_steps). */
struct steps_run {
    struct docker_state *s;
    const struct cont_input *in;
    const char *id; /* the container the steps run in */
    struct cont_result *res;
    uint64_t deadline;
    pid_t init_host_pid;
    const long *keep;
    size_t nkeep;
    char user[32];
};

/* Step i's exec failed, or gave no exit code: did the sandbox end under
 * the step (the guest's doing: res->step_error, 0), or did the engine
 * fail us (xerr, < 0)? */
static int step_lost(struct steps_run *t, size_t i, const struct cont_pump *e,
                     const struct pl_error *xerr, struct pl_error *err) {
    const struct pl_run_request *req = t->in->project;
    char path[160];
    PL_AUTO_JSON json_t *ins = NULL;
    snprintf(path, sizeof(path), "/containers/%s/json", t->id);
    if (dk_api_expect(t->s, "GET", path, NULL, 200, &ins, err) < 0)
        return -1;
    bool running = pl_docker_state_flag(ins, "Running");
    t->res->oom = pl_docker_state_flag(ins, "OOMKilled");
    if (running) {
        *err = *xerr;
        return -1;
    }
    snprintf(t->res->step_error, sizeof(t->res->step_error), "the sandbox ended %s step %zu (%s)%s",
             e->exec_id[0] ? "during" : "before", i + 1, req->project.steps[i].name,
             t->res->oom ? ": out of memory" : "");
    return 0;
}

/* The host could not end what step i left running.  Under gVisor a step
 * can kill the sandbox's PID 1 (Linux ignores it): then the sandbox is
 * over, and that is the guest's doing (0), not the infrastructure's (< 0,
 * the sweep's err). */
static int step_unswept(struct steps_run *t, size_t i, int code) {
    const struct pl_run_request *req = t->in->project;
    char path[160];
    snprintf(path, sizeof(path), "/containers/%s/json", t->id);
    /* A sandbox whose PID 1 was just killed can fail `runsc ps` a moment
     * before the engine marks it exited: give the state up to 2 s to
     * settle before calling it the infrastructure's. */
    bool running = true;
    for (int tries = 0; tries < 20 && running; tries++) {
        PL_AUTO_JSON json_t *ins = NULL;
        struct pl_error ierr = {0};
        if (dk_api_expect(t->s, "GET", path, NULL, 200, &ins, &ierr) == 0)
            running = pl_docker_state_flag(ins, "Running");
        if (running)
            usleep(100000);
    }
    if (running)
        return -1;
    if (i + 1 < req->project.nsteps && code == 0)
        snprintf(t->res->step_error, sizeof(t->res->step_error),
                 "the sandbox ended after step %zu (%s); step %zu could not run", i + 1,
                 req->project.steps[i].name, i + 2);
    return 0;
}

/* Step i's result, its output taken from e's captures. */
static int keep_step(struct steps_run *t, size_t i, int code, uint32_t ms, struct cont_pump *e,
                     struct pl_error *err) {
    struct pl_step_result *st = &t->res->steps[t->res->nsteps];
    st->name = strdup(t->in->project->project.steps[i].name);
    st->exit_code = code;
    st->duration_ms = ms;
    st->out = dk_take(&e->dx.out, &st->out_len, &st->out_truncated);
    st->err = dk_take(&e->dx.err, &st->err_len, &st->err_truncated);
    t->res->nsteps++;
    if (!st->name || !st->out || !st->err)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    return 0;
}

/* Step i: 1 when the next may run, 0 when the steps stop (t->res says
 * why), < 0 on an infrastructure failure. */
static int project_step(struct steps_run *t, size_t i, struct pl_error *err) {
    const struct pl_run_request *req = t->in->project;
    struct cont_result *res = t->res;
    uint64_t now = pl_now_ns();
    if (now >= t->deadline) {
        res->timed_out = true;
        return 0;
    }
    struct cont_input ein = {.timeout_ms = (unsigned)((t->deadline - now) / 1000000ull) + 1};
    PL_CLEANUP(dk_cont_pump_clear) struct cont_pump e = {0};
    struct cont_result eres = {0};
    e.dx.out.cap = e.dx.err.cap = t->in->output_bytes;
    pl_capture_stream(&e.dx.out, t->in->sink, 1, (unsigned)i + 1);
    pl_capture_stream(&e.dx.err, t->in->sink, 2, (unsigned)i + 1);
    json_t *cmd = dk_step_cmd(t->s, (const char *const *)req->project.steps[i].argv,
                              req->project.steps[i].argc);
    struct pl_error xerr = {0};
    json_t *env = t->in->step_env ? json_pack("[s]", t->in->step_env) : NULL;
    PL_CLEANUP(dk_usage_clear) struct dk_usage su = {0};
    if (t->in->usage)
        dk_usage_step_begin(t->s, t->id, t->in->usage, &su);
    int rc = dk_exec_in(t->s, t->id, t->user, cmd, env, &ein, &e, &eres, &xerr);
    int code = eres.exit_code;
    uint32_t ms = (uint32_t)((pl_now_ns() - now) / 1000000ull);
    if (rc == 0 && code < 0 && !eres.timed_out) {
        /* The stream ended with no exit code: the sandbox may be gone. */
        rc = -1;
        pl_error_set(&xerr, PL_REASON_INTERNAL, "the engine gave no exit code for step %zu", i + 1);
    }
    if (rc < 0)
        return step_lost(t, i, &e, &xerr, err);
    if (eres.timed_out) {
        res->timed_out = true;
        return 0;
    }
    if (keep_step(t, i, code, ms, &e, err) < 0)
        return -1;
    if (t->in->usage)
        dk_usage_step_end(t->s, t->id, t->in->usage, &su, ms, &res->steps[res->nsteps - 1].usage);
    if (code < 0) {
        snprintf(res->step_error, sizeof(res->step_error),
                 "the engine gave no exit code for step %zu (%s)", i + 1,
                 req->project.steps[i].name);
        return 0;
    }
    if (dk_host_sweep(t->s, t->id, t->init_host_pid, t->keep, t->nkeep, NULL, 0, NULL, err) < 0)
        return step_unswept(t, i, code);
    return code == 0 ? 1 : 0;
}

/*
 * A project's steps (in->project), each one engine exec in container id
 * as the sandbox's user, in /work, in order, stopping at the first that
 * fails.  Exit codes and output come from the engine (the exec's own
 * stream and inspect), a channel no process in the sandbox can open or
 * write.  After each step, everything it left running is ended from the
 * host, so nothing of one step can reach the next step's streams.  Engine
 * failures are infrastructure (< 0); a sandbox that ended under the steps
 * (the guest's doing, e.g. memory) is res->step_error.
 */
int dk_project_steps(struct docker_state *s, const struct cont_input *in, const char *id,
                     struct cont_result *res, uint64_t deadline, pid_t init_host_pid,
                     const long *keep, size_t nkeep, struct pl_error *err) {
    const struct pl_run_request *req = in->project;
    res->steps = calloc(req->project.nsteps ? req->project.nsteps : 1, sizeof(*res->steps));
    if (!res->steps)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    struct steps_run t = {.s = s,
                          .in = in,
                          .id = id,
                          .res = res,
                          .deadline = deadline,
                          .init_host_pid = init_host_pid,
                          .keep = keep,
                          .nkeep = nkeep};
    dk_run_user(s, t.user);
    for (size_t i = 0; i < req->project.nsteps; i++) {
        int rc = project_step(&t, i, err);
        if (rc <= 0)
            return rc;
    }
    return 0;
}

/*
 * The run's end without the engine (docs/providers/docker.md, "The run's
 * end"): both streams ended with the marker only the bootstrap knows, which
 * it writes after the guest's main process ended and it reaped every other
 * process of the sandbox (a project: its last step's markers came, or its
 * steps stopped).  The host then kills whatever is in the container's
 * cgroup (the waiting bootstrap, under runsc the sandbox) and sees every
 * thread of it gone or exiting, so nothing of the run can run an
 * instruction when the answer goes (the kernel frees a gVisor sandbox's
 * memory in tens of milliseconds: after the answer).  A status of 137 (a
 * SIGKILL: the OOM killer's or anyone's) or an OOM kill in the cgroup's
 * own count (oom_kills, as the caller read it: not 0 also when it could
 * not be read) leaves the verdict to the engine: 0, and the caller waits
 * for the engine's exit code.  1 when the run ended here (a snippet's
 * res->exit_code set); < 0 when the host could not empty the cgroup.
 */
static int fast_end(struct docker_state *s, const struct cont_input *in, struct cont_pump *p,
                    struct cont_result *res, const char *cg, long long oom_kills) {
    int status = 0;
    if (oom_kills != 0 ||
        (!in->project && (!pl_demux_ended(&p->dx, &status) || status == 128 + SIGKILL)))
        return 0;
    /* Threads not yet exiting 5 s after the kill (a host under load, a
     * thread in D state) get the host's proof's own wait for an empty
     * cgroup, and a second kill, before the result is refused. */
    if (pl_hostview_kill_all(&s->hv, cg, 5000, true, NULL) < 0 && dk_host_prove_gone(s, p->id) < 0)
        return -1;
    if (!in->project)
        res->exit_code = status; /* res->oom is false: the count was 0 */
    return 1;
}

/* ---- a project's steps in its own container ---------------------------------
 *
 * The bootstrap (PID 1) wrote the files and reported; the attach stream
 * stays open.  Each step is one command on its stdin (the project's token,
 * the argv, a fresh nonce); the bootstrap starts it, and when it ended,
 * kills and reaps every other process of the sandbox before it writes the
 * step's end marker (the nonce and the exit status) to both streams.  What
 * comes before the markers is the step's output.  The nonce is sent only
 * once nothing of the guest lives (the previous step's marker came, and
 * under runc the host saw the container's cgroup hold PID 1 alone), and
 * lives on only in PID 1's memory, which no guest process can read: a
 * guest cannot end its step's streams early or write another step's exit
 * status.  docs/providers/docker.md, "A project". */

struct attached {
    struct docker_state *s;
    const struct cont_input *in;
    struct cont_pump *p; /* the files' pump (a session's: the runner's exec): the framing */
    struct cont_result *res;
    int fd;
    uint64_t deadline;
    pid_t init_host_pid; /* runc: PID 1 on the host (0 under runsc) */
    /* A session's call: the runner is an exec beside the kept interpreters. */
    bool session;
    long *keep; /* the host pids the sweeps spare: waiters */
    size_t nkeep;
    /* What the sweeps spare while their start times hold (runc): a run's
     * steps' waiters, PID 1's; a session's kept interpreters, runner and
     * its waiters.  keep points here. */
    long waiters[DK_SESSION_SPARED];
    unsigned long long waiter_start[DK_SESSION_SPARED];
    struct pl_buf *preamble; /* sent before the first step's command, or NULL */
    int cmd_fd; /* a session's under runsc: the runner's socket, the commands' way (else -1) */
};

/* Step i's command for the bootstrap's stdin, and the marker that ends it. */
static int step_command(const struct attached *a, size_t i, struct pl_buf *cmd, char *mark,
                        size_t mark_size, struct pl_error *err) {
    const struct pl_step *step = &a->in->project->project.steps[i];
    char nonce[33];
    if (pl_random_hex(nonce, sizeof(nonce), 16) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: no randomness for the step");
    PL_AUTO_JSON json_t *argv = json_array();
    for (size_t k = 0; argv && k < step->argc; k++)
        json_array_append_new(argv, json_string(step->argv[k]));
    PL_AUTO_JSON json_t *c =
        json_pack("{s:s, s:O, s:s}", "token", a->in->step_token, "argv", argv, "end", nonce);
    if (c && a->in->step_env)
        json_object_set_new(c, "env", json_string(a->in->step_env));
    PL_AUTO_FREE char *line = c ? json_dumps(c, JSON_COMPACT) : NULL;
    if (!line || pl_buf_printf(cmd, "%zu\n%s", strlen(line), line) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    snprintf(mark, mark_size, END_MARK_PREFIX "%s ", nonce);
    return 0;
}

/* The stream ended, or its markers were not the step's: the sandbox ended
 * under the step (its PID 1 exits only when its stdin ends or a command
 * lacks the token, a guest's doing) or the markers were broken. */
static void step_broken(struct attached *a, size_t i, const struct cont_pump *e) {
    const struct pl_run_request *req = a->in->project;
    if (a->session && !(e->dx.m[0].done && e->dx.m[1].done)) {
        /* The runner is an exec: it may have ended alone (a process of the
         * call's uid can kill it), or with the sandbox. */
        char path[160];
        PL_AUTO_JSON json_t *ins = NULL;
        struct pl_error ierr = {0};
        snprintf(path, sizeof(path), "/containers/%s/json", a->p->id);
        bool running = dk_api_expect(a->s, "GET", path, NULL, 200, &ins, &ierr) < 0 ||
                       pl_docker_state_flag(ins, "Running");
        a->res->oom = !running && pl_docker_state_flag(ins, "OOMKilled");
        snprintf(a->res->step_error, sizeof(a->res->step_error), "%s during step %zu (%s)%s",
                 running ? "the session's step runner ended" : "the sandbox ended", i + 1,
                 req->project.steps[i].name, a->res->oom ? ": out of memory" : "");
        return;
    }
    if (e->dx.m[0].done && e->dx.m[1].done)
        snprintf(a->res->step_error, sizeof(a->res->step_error),
                 "step %zu (%s) ended with a broken end marker, or output after it", i + 1,
                 req->project.steps[i].name);
    else
        snprintf(a->res->step_error, sizeof(a->res->step_error),
                 "the sandbox ended during step %zu (%s)", i + 1, req->project.steps[i].name);
}

/* PID 1's host pid: the process whose pid in the container is 1, before
 * any step ran (runc), and the steps' waiters beside it (a pooled
 * container's, bootstrap.py), which the sweeps between steps spare while
 * their start times hold; 0 under runsc, whose cgroup holds gVisor's own. */
static int bootstrap_host_pid(struct attached *a, struct pl_error *err) {
    a->init_host_pid = 0;
    if (a->s->hv.runsc)
        return 0;
    char cg[200];
    pl_hostview_cgroup(&a->s->hv, a->p->id, cg, sizeof(cg));
    pid_t *procs = NULL;
    size_t n = 0;
    int r = pl_hostview_procs(&a->s->hv, cg, &procs, &n);
    for (size_t i = 0; r == 0 && n <= DK_STEP_WAITERS + 1 && i < n; i++) {
        if (pl_hostview_ns_pid(procs[i]) == 1) {
            a->init_host_pid = procs[i];
        } else if (a->nkeep < DK_STEP_WAITERS) {
            a->waiter_start[a->nkeep] = pl_hostview_start_time(procs[i]);
            a->waiters[a->nkeep++] = procs[i];
        }
    }
    a->keep = a->waiters;
    free(procs);
    if (a->init_host_pid <= 0)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the project's container holds %zu processes before its first step, "
                            "not its bootstrap (and the steps' waiters)",
                            r == 0 ? n : 0);
    return 0;
}

/* What the sweeps spare that is no longer the process started (one that
 * ended, its pid since reused) is spared no more. */
static void waiters_still(struct attached *a) {
    for (size_t k = 0; k < a->nkeep; k++)
        if (a->waiters[k] > 0 && pl_hostview_start_time((pid_t)a->waiters[k]) != a->waiter_start[k])
            a->waiters[k] = -1;
}

/* Step i over the attach stream: 1 when the next may run, 0 when the steps
 * stop (a->res says why), < 0 on an infrastructure failure. */
static int attached_step(struct attached *a, size_t i, struct steps_run *t, struct pl_error *err) {
    struct cont_result *res = a->res;
    uint64_t now = pl_now_ns();
    if (now >= a->deadline) {
        res->timed_out = true;
        return 0;
    }
    PL_CLEANUP(pl_buf_free) struct pl_buf cmd = {0};
    char mark[PL_DEMUX_MARK_MAX];
    if (step_command(a, i, &cmd, mark, sizeof(mark), err) < 0)
        return -1;
    struct cont_input sin = {.parts = {cmd.data},
                             .part_len = {cmd.len},
                             .nparts = 1,
                             .keep_stdin = true,
                             .usage = a->in->usage};
    /* The step's cost: from before its command goes (dk_usage_step_*). */
    PL_CLEANUP(dk_usage_clear) struct dk_usage su = {0};
    if (a->in->usage)
        dk_usage_step_begin(a->s, a->p->id, a->in->usage, &su);
    if (i == 0 && a->preamble) {
        sin.parts[0] = a->preamble->data;
        sin.part_len[0] = a->preamble->len;
        sin.parts[1] = cmd.data;
        sin.part_len[1] = cmd.len;
        sin.nparts = 2;
    }
    if (a->cmd_fd >= 0) {
        /* The command goes on the runner's socket; the exec's stream only
         * brings the output (its stdin is nobody's). */
        for (int k = 0; k < sin.nparts; k++) {
            int w =
                pl_fd_write_full(a->cmd_fd, sin.parts[k], sin.part_len[k], a->deadline, -1, NULL);
            if (w == -ETIMEDOUT) {
                res->timed_out = true;
                return 0;
            }
            if (w < 0) {
                step_broken(a, i, a->p);
                return 0;
            }
        }
        sin.nparts = 0;
    }
    PL_CLEANUP(dk_cont_pump_clear) struct cont_pump e = {.step = true, .exec = a->p->exec};
    memcpy(e.id, a->p->id, sizeof(e.id));
    memcpy(e.exec_id, a->p->exec_id, sizeof(e.exec_id));
    pl_demux_carry(&e.dx, &a->p->dx);
    e.dx.out.cap = e.dx.err.cap = a->in->output_bytes;
    pl_capture_stream(&e.dx.out, a->in->sink, 1, (unsigned)i + 1);
    pl_capture_stream(&e.dx.err, a->in->sink, 2, (unsigned)i + 1);
    pl_demux_expect_end(&e.dx, mark, strlen(mark));
    struct cont_result eres = {.exit_code = -1};
    if (dk_pump(a->s, &sin, &e, &eres, a->fd, a->deadline, err) < 0)
        return -1;
    pl_demux_carry(&a->p->dx, &e.dx);
    uint32_t ms = (uint32_t)((pl_now_ns() - now) / 1000000ull);
    if (eres.timed_out) {
        res->timed_out = true; /* the pump killed the container */
        return 0;
    }
    int code;
    if (!pl_demux_ended(&e.dx, &code)) {
        step_broken(a, i, &e);
        return 0;
    }
    if (keep_step(t, i, code, ms, &e, err) < 0)
        return -1;
    if (a->in->usage)
        dk_usage_step_end(a->s, a->p->id, a->in->usage, &su, ms,
                          &res->steps[res->nsteps - 1].usage);
    /* Under runc the host checks the bootstrap's word: the container's
     * cgroup holds PID 1 alone (a session's: PID 1, the runner and the
     * kept interpreters).  Anything else outlived the sandbox's own
     * cleanup, which no guest should be able to do: the run is not
     * trusted.  In a session a kept interpreter's own thread may have
     * started a process since the runner's cleanup: what the host ends
     * there is not an error, as between calls. */
    if (a->init_host_pid > 0) {
        unsigned killed = 0;
        waiters_still(a);
        if (dk_host_sweep(a->s, a->p->id, a->init_host_pid, a->keep, a->nkeep, NULL, 0, &killed,
                          err) < 0)
            return -1;
        if (killed && !a->session)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "%u process%s of step %zu outlived the sandbox's own cleanup "
                                "and were killed from the host; the run's result cannot be "
                                "trusted",
                                killed, killed == 1 ? "" : "es", i + 1);
    }
    return code == 0 ? 1 : 0;
}

/* The steps of a project in its own container, over the attach stream fd. */
static int attached_steps(struct docker_state *s, const struct cont_input *in, struct cont_pump *p,
                          struct cont_result *res, int fd, uint64_t deadline,
                          struct pl_error *err) {
    const struct pl_run_request *req = in->project;
    res->steps = calloc(req->project.nsteps ? req->project.nsteps : 1, sizeof(*res->steps));
    if (!res->steps)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    struct attached a = {
        .s = s, .in = in, .p = p, .res = res, .fd = fd, .deadline = deadline, .cmd_fd = -1};
    struct steps_run t = {.s = s, .in = in, .id = p->id, .res = res, .deadline = deadline};
    if (bootstrap_host_pid(&a, err) < 0)
        return -1;
    for (size_t i = 0; i < req->project.nsteps; i++) {
        int rc = attached_step(&a, i, &t, err);
        if (rc <= 0)
            return rc;
    }
    return 0;
}

/* A project in its own container: its steps, once the bootstrap reported
 * its files written. */
static int attached_project(struct docker_state *s, const struct cont_input *in,
                            struct cont_pump *p, struct cont_result *res, int fd, uint64_t deadline,
                            struct pl_error *err) {
    PL_AUTO_JSON json_t *rep = res->timed_out ? NULL : dk_report_line(&p->dx.out.kept);
    if (!json_object_get(rep, "setup") || json_object_get(rep, "setup_failed"))
        return 0;
    int rc = attached_steps(s, in, p, res, fd, deadline, err);
    /* What the steps cost, before the collection's own reader runs. */
    if (rc == 0)
        dk_usage_end(s, p->id, in->usage);
    /* Its collect globs: nothing of the guest lives now (the last step's
     * end ended everything else), so nothing races the reader. */
    if (rc == 0 && in->collect_ret && !res->timed_out)
        rc = dk_collect(s, p->id, in->collect_ctx, in->collect_req, deadline, in->collect_ret);
    return rc;
}

/* A session's step runner, started (connecting to sock, nothing sent yet)
 * and ended (its commands' socket closed: it exits); session.c takes its
 * connection, dk_session_steps runs the steps. */
int dk_runner_start(struct docker_state *s, const char *id, const char *sock, unsigned waiters,
                    struct dk_runner *r, struct pl_error *err) {
    char user[32];
    dk_run_user(s, user);
    r->fd = -1;
    r->cmd_fd = -1;
    r->p = (struct cont_pump){.exec = true};
    char nw[16];
    snprintf(nw, sizeof(nw), "%u", waiters);
    json_t *cmd =
        json_pack("[s, s, s, s, s, s]", "python3", "-I", "-c", pl_docker_session_steps, sock, nw);
    if (dk_exec_start(s, id, user, cmd, NULL, true, &r->fd, r->p.exec_id, err) < 0)
        return -1;
    snprintf(r->p.id, sizeof(r->p.id), "%s", id);
    if (pl_fd_set_nonblock(r->fd) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "fcntl: %s", strerror(errno));
    return 0;
}

void dk_runner_end(struct dk_runner *r) {
    if (r->cmd_fd >= 0)
        close(r->cmd_fd); /* the runner's commands end: it exits */
    r->cmd_fd = -1;
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    dk_cont_pump_clear(&r->p);
}

/*
 * A session's project steps (docs/sessions.md, "A project call"): one exec
 * of the step runner (guest/session_steps.py), as the calls' group, for all
 * of them.  It takes each step on its socket as a project's bootstrap does
 * (a python3 step by one of its waiters when one is ready and intact), and
 * ends every process but PID 1, itself, its unused waiters and the kept
 * interpreters (keep: [[pid, start], ...] in the sandbox) before each
 * step's end marker; under runc the host then sees the container's cgroup
 * hold only PID 1 (init_host_pid) and spare's processes, each while its
 * start time holds, before the next step is sent.  The runner's socket is
 * open to no other process: it is not dumpable, and gVisor does not reopen
 * a socket through /proc.
 */
int dk_session_steps(struct docker_state *s, const struct cont_input *in, struct dk_runner *r,
                     pid_t init_host_pid, const json_t *keep, const long *spare,
                     const unsigned long long *spare_start, size_t nspare, struct cont_result *res,
                     uint64_t deadline, struct pl_error *err) {
    const struct pl_run_request *req = in->project;
    res->steps = calloc(req->project.nsteps ? req->project.nsteps : 1, sizeof(*res->steps));
    if (!res->steps)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    struct cont_input sin = *in;
    if (pl_random_hex(sin.step_token, sizeof(sin.step_token), 16) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: no randomness for the steps");
    PL_AUTO_JSON json_t *h = json_pack("{s:s, s:O}", "token", sin.step_token, "keep", keep);
    PL_AUTO_FREE char *hs = h ? json_dumps(h, JSON_COMPACT) : NULL;
    PL_CLEANUP(pl_buf_free) struct pl_buf pre = {0};
    if (!hs || pl_buf_printf(&pre, "%zu\n%s", strlen(hs), hs) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    struct attached a = {.s = s,
                         .in = &sin,
                         .p = &r->p,
                         .res = res,
                         .fd = r->fd,
                         .deadline = deadline,
                         .init_host_pid = init_host_pid,
                         .session = true,
                         .nkeep = nspare < DK_SESSION_SPARED ? nspare : DK_SESSION_SPARED,
                         .preamble = &pre,
                         .cmd_fd = r->cmd_fd};
    for (size_t k = 0; k < a.nkeep; k++) {
        a.waiters[k] = spare[k];
        a.waiter_start[k] = spare_start[k];
    }
    a.keep = a.waiters;
    struct steps_run t = {.s = s, .in = &sin, .id = r->p.id, .res = res, .deadline = deadline};
    for (size_t i = 0; i < req->project.nsteps; i++) {
        int rc = attached_step(&a, i, &t, err);
        if (rc <= 0)
            return rc;
    }
    return 0;
}

/* The engine's exit code for p's container.  The guest may close its
 * output and keep running: the wait is bounded by the deadline too, and a
 * guest still running then is killed. */
static int wait_exit(struct docker_state *s, const struct cont_pump *p, struct cont_result *res,
                     uint64_t deadline, struct pl_error *err) {
    char path[256];
    snprintf(path, sizeof(path), "/containers/%s/wait?condition=not-running", p->id);
    PL_AUTO_JSON json_t *w = NULL;
    uint64_t now = pl_now_ns();
    if (!res->timed_out && now < deadline) {
        long st = 0;
        long wait_ms = (long)((deadline - now) / 1000000ull) + 1;
        struct pl_error werr = {0};
        if (pl_docker_call(s->engine, "POST", path, NULL, wait_ms, &st, &w, &werr) == 0 &&
            st == 200) {
            res->exit_code = pl_docker_wait_code(w);
            return 0;
        }
        json_decref(PL_TAKE_PTR(w));
        /* Not exited by the deadline (or the call failed): kill, then wait. */
        if (dk_end_container(s, p->id) == 0)
            res->timed_out = pl_now_ns() >= deadline;
    }
    if (dk_api_expect(s, "POST", path, NULL, 200, &w, err) < 0)
        return -1;
    res->exit_code = pl_docker_wait_code(w);
    return 0;
}

/*
 * After the engine's exit code: its OOM verdict, then the host's proof
 * that nothing of the run lives.  oom_kills is the cgroup's count as the
 * run read it (< 0: unread).
 */
static int settle_end(struct docker_state *s, const struct cont_input *in,
                      const struct cont_pump *p, struct cont_result *res, long long oom_kills,
                      struct pl_error *err) {
    char path[256];
    snprintf(path, sizeof(path), "/containers/%s/json", p->id);
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
        res->oom = res->oom || pl_docker_state_flag(ins, "OOMKilled");
        if (res->oom || in->project || res->timed_out || oom_kills >= 0 ||
            res->exit_code != 128 + SIGKILL || tries >= OOM_LATE_MS / OOM_LATE_STEP_MS)
            break;
        usleep(OOM_LATE_STEP_MS * 1000);
    }
    /* The engine's word is not the end: the host proves nothing of the run
     * lives, and an end nobody's process gives (the engine's -1 when a
     * guest made its PID 1 unkillable to the runtime) is infrastructure. */
    int gone = dk_host_prove_gone(s, p->id);
    if (gone != 0)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the run's container ended while its processes still ran on the "
                            "host (they %s); its result cannot be trusted",
                            gone > 0 ? "were killed" : "could not all be killed");
    if (!in->project && (res->exit_code < 0 || res->exit_code > 255))
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the engine reported exit code %d, which no process can return; "
                            "the run's end cannot be trusted",
                            res->exit_code);
    return 0;
}

/*
 * A run in a container of its own (a warm one when in->warm_id names it):
 * attach, start, pump in's parts in and the output into p->dx, then the
 * end, from the host first.  The container goes to the reaper.
 */
int dk_run_container(struct docker_state *s, const struct cont_input *in, struct cont_pump *p,
                     struct cont_result *res, struct pl_error *err) {
    char path[256];
    if (in->warm_id[0]) {
        /* A warm container: created and started already, its bootstrap
         * blocked on stdin.  The run begins when we attach. */
        memcpy(p->id, in->warm_id, sizeof(p->id));
    } else if (dk_create_container(s, in->image_id, in->memory_mb, in->run_id, in->socket_dir, NULL,
                                   p->id, err) < 0) {
        return -1;
    }
    /* Whichever way this leaves, the container goes to the reaper, after
     * the attach stream (declared below) is closed. */
    PL_GUARD(dk_reap_guard_end) struct dk_reap_guard reap = {s, p->id};
    if (in->gate)
        dk_peer_gate_open(in->gate, p->id);

    PL_AUTO_CLOSE int fd = -1;
    long long oom_kills = -ENOENT; /* the cgroup's count, once read */
    if (pl_docker_attach(s->engine, p->id, &fd, err) < 0)
        return -1;
    uint64_t t0 = pl_now_ns();
    uint64_t deadline = t0 + (uint64_t)in->timeout_ms * 1000000ull;
    /* Its cost: a warm container's from now (its cgroup holds what it did
     * while it waited), a fresh one's from its start. */
    if (in->usage)
        dk_usage_begin(s, p->id, !in->warm_id[0], in->usage);
    if (!in->warm_id[0]) {
        snprintf(path, sizeof(path), "/containers/%s/start", p->id);
        if (dk_api_expect(s, "POST", path, NULL, 204, NULL, err) < 0)
            return -1;
    }
    if (pl_fd_set_nonblock(fd) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "fcntl: %s", strerror(errno));
    p->until_line = in->project != NULL;
    if (dk_pump(s, in, p, res, fd, deadline, err) < 0)
        return -1;
    if (in->project) {
        /* The files are written and the report is in (or the bootstrap
         * failed): the steps on this stream, which stays open until the
         * host has ended them all (its end ends the bootstrap). */
        if (pl_demux_flush(&p->dx) < 0)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        if (attached_project(s, in, p, res, fd, deadline, err) < 0)
            return -1;
    } else {
        /* The guest ended (or the deadline's reading was taken): its cost,
         * before the collection's reader or the end. */
        dk_usage_end(s, p->id, in->usage);
        close(PL_TAKE_FD(fd));
        /* A snippet's collect globs: its bootstrap wrote the end marker once
         * nothing of the guest lived, and stays (the header's "hold"). */
        int status = 0;
        if (in->collect_ret && !res->timed_out && pl_demux_ended(&p->dx, &status) &&
            status != 128 + SIGKILL &&
            dk_collect(s, p->id, in->collect_ctx, in->collect_req, deadline, in->collect_ret) < 0)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    dk_usage_end(s, p->id, in->usage); /* a project whose steps did not run */
    if (!res->timed_out) {
        /* The cgroup's OOM count, read now: the runtime removes the cgroup
         * with the container, and the engine's own flag can miss a kill
         * (its OOM event may come after the exit: containerd#8180). */
        char cg[200];
        pl_hostview_cgroup(&s->hv, p->id, cg, sizeof(cg));
        oom_kills = pl_hostview_oom_kills(&s->hv, cg);
        res->oom = oom_kills > 0;
        int fast = fast_end(s, in, p, res, cg, oom_kills);
        if (fast > 0)
            return 0;
        if (fast < 0)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the run's processes could not all be killed on the host; its "
                                "result cannot be trusted");
    }
    if (fd >= 0)
        close(PL_TAKE_FD(fd));
    if (pl_demux_flush(&p->dx) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    /* A snippet's bootstrap asked to hold ends only when it is ended; its
     * end marker, when it came, has the guest's status. */
    int held = -1;
    if (in->collect_ret && !in->project) {
        if (!pl_demux_ended(&p->dx, &held))
            held = -1;
        (void)dk_end_container(s, p->id);
    }
    if (wait_exit(s, p, res, deadline, err) < 0)
        return -1;
    if (held >= 0)
        res->exit_code = held;
    return settle_end(s, in, p, res, oom_kills, err);
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
    struct cont_input in = {.memory_mb = ctx->memory_mb,
                            .run_id = ctx->run_id,
                            .timeout_ms = ctx->timeout_ms,
                            .own_container = true};
    PL_CLEANUP(dk_cont_pump_clear) struct cont_pump p = {0};
    PL_CLEANUP(dk_cont_result_clear) struct cont_result res = {0};
    PL_CLEANUP(pl_buf_free) struct pl_buf hdr = {0};
    PL_CLEANUP(pl_buf_free) struct pl_buf files = {0};
    PL_CLEANUP(dk_usage_clear) struct dk_usage usage = {0};
    in.usage = &usage;
    if (dk_cont_prepare(s, ctx, req, &in, &p, &hdr, &files, err) < 0)
        return -1;
    if (req->ncollect) {
        in.collect_ctx = ctx;
        in.collect_req = req;
        in.collect_ret = ret;
    }
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
        in.socket_dir = broker_dir;
        in.gate = &listener.gate;
    } else {
        dk_take_warm(s, req->kind == PL_PAYLOAD_PROJECT ? 1 : 0, ctx->memory_mb, in.warm_id);
    }
    int rc = dk_run_container(s, &in, &p, &res, err);
    if (!ctx->broker)
        dk_warm_done(s); /* the refill a take held back may start */
    if (rc < 0) {
        dk_invalidate_ready(s);
        return -1;
    }
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "plimsoll-%.24s", ctx->run_id);
    dk_usage_result(&usage, ret);
    return dk_cont_finish(ctx, req, &p, &res, ret, err);
}
