/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.c: sessions (docs/sessions.md): one sandbox for many calls, the
 * calls and cells, the cleanup between calls inside and from the host.
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
#include "bootstrap.h"     /* generated: pl_docker_bootstrap[] */
#include "session_agent.h" /* generated: pl_docker_session_agent[] */
#include "session_main.h"  /* generated: pl_docker_session_main[] */

/* "python", "javascript": a session's languages by index. */
const char *const dk_lang_name[2] = {"python", "javascript"};

static int lang_index(const char *name) {
    return strcmp(name, "python") == 0 ? LANG_PY : LANG_JS;
}

json_t *dk_agent_cmd(const char *mode, const char *arg) {
    json_t *c = json_pack("[s, s, s, s, s]", "python3", "-I", "-c", pl_docker_session_agent, mode);
    if (c && arg)
        json_array_append_new(c, json_string(arg));
    return c;
}

/*
 * Run a trusted agent mode and take its report: exit 0 and exactly one JSON
 * line, nothing before or after.  Other processes of the sandbox's uid may
 * be able to add bytes to the exec's output (under gVisor even after the
 * agent made itself non-dumpable; see docs/sessions.md); added bytes make
 * the report unreadable, never a different report.
 */
static int agent_json(struct docker_state *s, struct dsession *d, json_t *cmd, unsigned gid_off,
                      json_t **ret, struct pl_error *err) {
    struct cont_input in = {.timeout_ms = 20000};
    PL_CLEANUP(dk_cont_pump_clear) struct cont_pump p = {0};
    struct cont_result res = {0};
    p.dx.out.cap = 1u << 20;
    p.dx.err.cap = 64u << 10;
    char mode[16];
    snprintf(mode, sizeof(mode), "%s", json_string_value(json_array_get(cmd, 3)) ?: "?");
    /* A trusted mode runs with a group of its own: no guest process may
     * open its descriptors or memory (it still may signal it: same uid). */
    char user[32];
    dk_user_spec(&s->set, gid_off, user);
    int rc = dk_exec_in(s, d->id, user, cmd, NULL, &in, &p, &res, err);
    json_t *j = NULL;
    if (rc == 0 && res.exit_code == 0 && !res.timed_out)
        j = pl_docker_agent_report(p.dx.out.kept.data, p.dx.out.kept.len);
    if (rc == 0 && !j)
        pl_error_set(err, PL_REASON_INTERNAL,
                     "session agent %s: no well-formed report (exit %d%s): %.200s", mode,
                     res.exit_code, res.timed_out ? ", timed out" : "",
                     p.dx.err.kept.data ? p.dx.err.kept.data : "");
    if (!j)
        return -1;
    *ret = j;
    return 0;
}

/*
 * The session's step runner (docs/sessions.md, "A waiting runner").  The
 * cleanup after a project call starts the next call's (a project call
 * that finds none waiting starts its own).  It connects to the steps'
 * socket, which is then closed, and says its pid and start time on that
 * connection, its only way to the daemon: when it connects, the calls'
 * group holds no other process (the cleanup has just proved so, or the
 * call has run nothing yet), and the kept interpreters' group cannot
 * connect.  It waits, spared by the cleanups between calls by its pid and
 * start time, until a project call takes it; that call ends it.
 */
#define RUNNER_START_MS 30000 /* the cleanup's wait for a runner to connect and say its pid */
#define RUNNER_WORD_MAX 256   /* "PID START" for it and each waiter, "\n" */

static void runner_drop(struct dsession *d) {
    dk_runner_end(&d->runner.r);
    d->runner.up = false;
    d->runner.nw = 0;
}

static void runner_dropp(struct dsession **d) {
    runner_drop(*d);
}

/* Start a runner's exec and the socket it connects to (*lfd). */
static int runner_begin(struct docker_state *s, struct dsession *d, int *lfd,
                        struct pl_error *err) {
    runner_drop(d);
    *lfd = dk_steps_listen(d, err);
    if (*lfd < 0)
        return -1;
    if (dk_runner_start(s, d->id, "/run/plimsoll/" STEPS_SOCK_NAME, d->runner.want, &d->runner.r,
                        err) < 0) {
        dk_steps_unlisten(d, *lfd);
        *lfd = -1;
        return -1;
    }
    return 0;
}

/* The runner's connection (lfd is closed) and its word, by the deadline:
 * 0 once it waits (d->runner.up); -1 with err, or with *timed_out. */
static int runner_finish(struct docker_state *s, struct dsession *d, int lfd, uint64_t deadline,
                         bool *timed_out, struct pl_error *err) {
    struct dk_runner *r = &d->runner.r;
    r->cmd_fd = dk_steps_accept(d, lfd, deadline, timed_out, err);
    char word[RUNNER_WORD_MAX];
    size_t n = 0;
    while (r->cmd_fd >= 0 && (n == 0 || word[n - 1] != '\n')) {
        int w = pl_fd_wait(r->cmd_fd, POLLIN, deadline, -1);
        if (w == -ETIMEDOUT) {
            *timed_out = true;
            break;
        }
        ssize_t k = w < 0 ? -1 : read(r->cmd_fd, word + n, sizeof(word) - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0 || (n += (size_t)k) == sizeof(word)) {
            pl_error_set(err, PL_REASON_INTERNAL, "the step runner did not say its pid");
            break;
        }
    }
    /* "PID START" for the runner, then for each of its waiters. */
    long pids[1 + DK_STEP_WAITERS];
    unsigned long long starts[1 + DK_STEP_WAITERS];
    int np = r->cmd_fd >= 0 && n > 0
                 ? pl_docker_runner_word(word, n, pids, starts, 1 + DK_STEP_WAITERS)
                 : -1;
    if (np > 0) {
        d->runner.pid = pids[0];
        d->runner.start = starts[0];
        d->runner.host_pid = dk_host_pid_of(s, d, pids[0], starts[0]);
        d->runner.nw = 0;
        for (int k = 1; k < np; k++) {
            /* A waiter that ended already is not spared. */
            long host = dk_host_pid_of(s, d, pids[k], starts[k]);
            if (host > 0)
                d->runner.w[d->runner.nw++] = (typeof(d->runner.w[0])){pids[k], starts[k], host};
        }
        if (d->runner.host_pid > 0) {
            d->runner.up = true;
            return 0;
        }
        pl_error_set(err, PL_REASON_INTERNAL, "the host does not see the step runner");
    } else if (r->cmd_fd >= 0 && !*timed_out && !err->message[0]) {
        pl_error_set(err, PL_REASON_INTERNAL, "the step runner's word is malformed");
    }
    runner_drop(d);
    return -1;
}

/* Whether the waiting runner can take a call: still the process that
 * started (runc: the host's start time), its socket silent (it says
 * nothing more until it ran a step, and a runner that ended shows EOF). */
static bool runner_waiting(struct docker_state *s, struct dsession *d) {
    if (!d->runner.up)
        return false;
    struct pollfd p = {.fd = d->runner.r.cmd_fd, .events = POLLIN};
    if (poll(&p, 1, 0) != 0)
        return false;
    return s->hv.runsc || pl_hostview_start_time((pid_t)d->runner.host_pid) == d->runner.start;
}

/* Whether the cleanup's "alive" ([[pid, start], ...]) lists pid. */
static bool listed_alive(const json_t *alive, long pid) {
    size_t k;
    json_t *e;
    json_array_foreach(alive, k, e) {
        if (json_integer_value(json_array_get(e, 0)) == pid)
            return true;
    }
    return false;
}

/* The cleanup between calls: every process but PID 1, the kept
 * interpreters and a waiting runner with its waiters ends; the verdict
 * decides whether the session goes on.  Then, in a session that ran a
 * project call, the next call's runner starts when none waits. */
static void *cleaner_main(void *arg) {
    struct dsession *d = arg;
    struct docker_state *s = d->s;
    json_t *keep = json_array();
    for (int i = 0; i < 2; i++)
        if (d->in[i].up)
            json_array_append_new(
                keep, json_pack("[I, I]", (json_int_t)d->in[i].pid, (json_int_t)d->in[i].start));
    if (d->runner.up)
        json_array_append_new(
            keep, json_pack("[I, I]", (json_int_t)d->runner.pid, (json_int_t)d->runner.start));
    for (size_t k = 0; d->runner.up && k < d->runner.nw; k++)
        if (d->runner.w[k].pid > 0)
            json_array_append_new(keep, json_pack("[I, I]", (json_int_t)d->runner.w[k].pid,
                                                  (json_int_t)d->runner.w[k].start));
    char ipc[24];
    snprintf(ipc, sizeof(ipc), "%ld", d->ipc_last);
    char *keep_s = json_dumps(keep, JSON_COMPACT);
    json_decref(keep);
    json_t *cmd = keep_s ? json_pack("[s, s, s, s, s, s, s]", "python3", "-I", "-c",
                                     pl_docker_session_agent, "cleanup", keep_s, ipc)
                         : NULL;
    json_t *j = NULL;
    struct pl_error err = {0};
    bool running = false, paused = false;
    char fp[65];
    long dead[256];
    size_t ndead = 0;
    if (!keep_s || !cmd || agent_json(s, d, cmd, GID_CLEAN, &j, &err) < 0) {
        /* A sandbox whose main process just ended refuses execs while the
         * engine is still tearing it down: give that a moment to show. */
        bool gone = false;
        for (int i = 0; i < 20 && !gone; i++) {
            struct pl_error serr = {0};
            gone = dk_session_state(s, d->id, fp, &running, &paused, &serr) < 0 || !running;
            if (!gone)
                usleep(100000);
        }
        if (gone)
            snprintf(d->verdict, sizeof(d->verdict), "the sandbox's main process ended");
        else
            snprintf(d->verdict, sizeof(d->verdict),
                     "the cleanup between calls could not run: %.200s", err.message);
    } else if (!json_is_true(json_object_get(j, "clean"))) {
        snprintf(d->verdict, sizeof(d->verdict),
                 "the cleanup between calls could not prove the sandbox clean");
    } else {
        json_t *alive = json_object_get(j, "alive");
        for (int i = 0; i < 2; i++) {
            bool still = listed_alive(alive, d->in[i].pid);
            if (d->in[i].up && !still)
                dk_uplink_drop(d, i);
            d->in[i].up = d->in[i].up && still;
        }
        if (!listed_alive(alive, d->runner.pid))
            runner_drop(d);
        for (size_t k = 0; k < d->runner.nw; k++)
            if (!listed_alive(alive, d->runner.w[k].pid))
                d->runner.w[k].pid = 0; /* gone: spared no more */
        if (json_is_integer(json_object_get(j, "ipc_last")))
            d->ipc_last = (long)json_integer_value(json_object_get(j, "ipc_last"));
        json_t *dl = json_object_get(j, "dead");
        for (size_t k = 0; k < json_array_size(dl) && ndead < sizeof(dead) / sizeof(dead[0]); k++)
            if (json_is_integer(json_array_get(dl, k)))
                dead[ndead++] = (long)json_integer_value(json_array_get(dl, k));
        /* /work and /tmp both persist from call to call: both count. */
        json_int_t used = json_integer_value(json_object_get(j, "work_used")) +
                          json_integer_value(json_object_get(j, "tmp_used"));
        json_int_t budget = (json_int_t)s->session_disk_mb << 20;
        atomic_store(&d->seen_disk, used > 0 ? (uint64_t)used : 0);
        if (used >= budget - (json_int_t)(64u << 10))
            snprintf(d->verdict, sizeof(d->verdict),
                     "the session's files reached its budget (SANDBOX_SESSION_DISK_MB, /work and "
                     "/tmp together)");
    }
    free(keep_s); /* cmd went to agent_json */
    json_decref(j);
    if (d->verdict[0])
        return NULL;
    /* The host's word, not the sandbox's: under runc the container's
     * cgroup, under runsc gVisor's own process list, must hold nothing but
     * PID 1 and the kept interpreters (the host's pids, their start times
     * checked); anything else is ended from the host, and a sandbox where
     * that fails ends. */
    long keep_host[DK_SESSION_SPARED];
    size_t nkeep = 0;
    for (int i = 0; i < 2; i++) {
        if (!d->in[i].up)
            continue;
        if (!s->hv.runsc && pl_hostview_start_time((pid_t)d->in[i].host_pid) != d->in[i].start) {
            d->in[i].up = false; /* gone, or its pid is someone else's now */
            dk_uplink_drop(d, i);
            continue;
        }
        keep_host[nkeep++] = d->in[i].host_pid;
    }
    if (d->runner.up && !s->hv.runsc &&
        pl_hostview_start_time((pid_t)d->runner.host_pid) != d->runner.start)
        runner_drop(d);
    if (d->runner.up)
        keep_host[nkeep++] = d->runner.host_pid;
    for (size_t k = 0; d->runner.up && k < d->runner.nw; k++) {
        if (d->runner.w[k].pid > 0 && !s->hv.runsc &&
            pl_hostview_start_time((pid_t)d->runner.w[k].host_pid) != d->runner.w[k].start)
            d->runner.w[k].pid = 0;
        if (d->runner.w[k].pid > 0)
            keep_host[nkeep++] = d->runner.w[k].host_pid;
    }
    unsigned killed = 0;
    struct pl_error herr = {0};
    if (dk_host_sweep(s, d->id, d->init_pid, keep_host, nkeep, dead, ndead, &killed, &herr) < 0) {
        snprintf(d->verdict, sizeof(d->verdict),
                 "the host could not prove the sandbox clean between calls: %.180s", herr.message);
        return NULL;
    }
    dk_session_seen(d);
    /* Clean: the next project call's runner starts now, when none waits.
     * One that does not come up is no verdict: the call starts its own. */
    int lfd = -1;
    bool late = false;
    struct pl_error rerr = {0};
    if (d->runner.wanted && !d->runner.up && runner_begin(s, d, &lfd, &rerr) == 0)
        runner_finish(s, d, lfd, pl_now_ns() + RUNNER_START_MS * 1000000ull, &late, &rerr);
    return NULL;
}

void dk_cleaner_join(struct dsession *d) {
    if (d->cleaner_running) {
        pthread_join(d->cleaner, NULL);
        d->cleaner_running = false;
    }
}

static void cleaner_start(struct dsession *d) {
    if (pthread_create(&d->cleaner, NULL, cleaner_main, d) == 0)
        d->cleaner_running = true;
    else
        snprintf(d->verdict, sizeof(d->verdict), "the cleanup between calls could not start");
}

/* Forget a session's sandbox (its container is the reaper's by now). */
void dk_dsession_free(struct dsession *d) {
    runner_drop(d);
    dk_uplink_close(d);
    rmdir(d->dir);
    dk_peer_gate_destroy(&d->gate);
    free(d);
}

static void dsession_freep(struct dsession **d) {
    if (*d)
        dk_dsession_free(*d);
}

/* Create and start one session sandbox; start the interpreters in langs.
 * On a failure the sandbox goes to the reaper (the guard, released first)
 * before the session is freed. */
int dk_session_create(struct docker_state *s, const char *tag, unsigned memory_mb,
                      const bool langs[2], struct dsession **ret, struct pl_error *err) {
    PL_CLEANUP(dsession_freep) struct dsession *d = calloc(1, sizeof(*d));
    if (!d)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    d->s = s;
    d->lfd = d->in[0].fd = d->in[1].fd = d->runner.r.fd = d->runner.r.cmd_fd = -1;
    dk_peer_gate_init(&d->gate, s);
    snprintf(d->tag, sizeof(d->tag), "%s", tag);
    char run_id[40];
    snprintf(run_id, sizeof(run_id), "session-%s", d->tag);
    snprintf(d->dir, sizeof(d->dir), "%.2000s/%s/%s", s->set.run_dir, s->set.instance, run_id);
    /* The session's directory: the sandbox uid's, traverse only; root
     * creates the sockets in it (docs/security.md). */
    if (dk_make_instance_dir(s, err) < 0 || mkdir(d->dir, 0700) < 0 ||
        chown(d->dir, (uid_t)s->set.uid, (gid_t)(s->set.uid + GID_RUN)) < 0 ||
        chmod(d->dir, 0100) < 0) {
        if (!err->message[0])
            pl_error_set(err, PL_REASON_INTERNAL, "cannot create %s: %s", d->dir, strerror(errno));
        return -1;
    }
    PL_AUTO_JSON json_t *cfg =
        dk_container_config(s, s->project_id, memory_mb, run_id, d->dir, NULL);
    if (!cfg)
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory");
    /* A run's walls; the main process (session_main.py) runs no guest
     * code; the work directory is the session's disk budget. */
    json_object_set_new(cfg, "Cmd",
                        json_pack("[s, s, s, s]", "python3", "-I", "-c", pl_docker_session_main));
    json_object_set_new(cfg, "AttachStdin", json_false());
    json_object_set_new(cfg, "OpenStdin", json_false());
    json_object_set_new(cfg, "StdinOnce", json_false());
    json_object_set_new(cfg, "AttachStdout", json_false());
    json_object_set_new(cfg, "AttachStderr", json_false());
    json_object_set_new(json_object_get(json_object_get(cfg, "HostConfig"), "Tmpfs"), "/work",
                        dk_tmpfs_opts(&s->set, s->session_disk_mb));
    char path[256];
    snprintf(path, sizeof(path), "/containers/create?name=plimsoll-%s", run_id);
    PL_AUTO_JSON json_t *created = NULL;
    int rc = dk_api_expect(s, "POST", path, cfg, 201, &created, err);
    if (rc < 0 || pl_docker_created_id(created, d->id) < 0)
        return rc < 0 ? -1 : pl_error_set(err, PL_REASON_INTERNAL, "docker: create gave no Id");
    PL_GUARD(dk_reap_guard_end) struct dk_reap_guard reap = {s, d->id};
    dk_peer_gate_open(&d->gate, d->id);
    bool running = false, paused = false;
    snprintf(path, sizeof(path), "/containers/%s/start", d->id);
    if (dk_api_expect(s, "POST", path, NULL, 204, NULL, err) < 0 ||
        dk_session_state(s, d->id, d->fp, &running, &paused, err) < 0)
        return -1;
    if (!running)
        return pl_error_set(err, PL_REASON_INTERNAL, "the session's sandbox did not stay up");
    PL_AUTO_JSON json_t *ins = NULL;
    snprintf(path, sizeof(path), "/containers/%s/json", d->id);
    if (dk_api_expect(s, "GET", path, NULL, 200, &ins, err) < 0)
        return -1;
    d->init_pid = (pid_t)json_integer_value(json_object_get(json_object_get(ins, "State"), "Pid"));
    dk_uplink_listen(d);
    for (int lang = 0; lang < 2; lang++)
        if (langs[lang] && dk_launch(s, d, lang, err) < 0)
            return -1;
    reap.id = NULL;
    *ret = PL_TAKE_PTR(d);
    return 0;
}

int dk_session_open(void *state, const struct pl_session_open *o, void **ret_session,
                    struct pl_error *err) {
    struct docker_state *s = state;
    /* The hint starts those interpreters now, so the first cell answers at once. */
    bool langs[2] = {false, false};
    for (size_t i = 0; o->languages && o->languages[i]; i++)
        langs[lang_index(o->languages[i])] = true;
    unsigned want = (langs[0] ? 1u : 0u) | (langs[1] ? 2u : 0u);
    struct dsession *d = dk_pool_take(s, o->memory_mb, want ? want : 3);
    if (d) {
        /* A waiting sandbox that lacks a hinted interpreter starts it now. */
        d->pooled = true;
        for (int lang = 0; lang < 2; lang++)
            if (langs[lang] && !d->in[lang].up && dk_launch(s, d, lang, err) < 0) {
                dk_session_close(s, d);
                return -1;
            }
        *ret_session = d;
        return 0;
    }
    if (dk_session_create(s, o->tag, o->memory_mb, langs, &d, err) < 0)
        return -1;
    *ret_session = d;
    return 0;
}

void dk_session_seen(struct dsession *d) {
    unsigned v = atomic_load(&d->seen_interp) & 0xcu;
    for (int i = 0; i < 2; i++)
        if (d->in[i].up)
            v |= (1u | 4u) << i;
    atomic_store(&d->seen_interp, v);
}

void dk_session_status(void *state, void *session, struct pl_session_status *ret) {
    struct docker_state *s = state;
    struct dsession *d = session;
    ret->disk_used_bytes = atomic_load(&d->seen_disk);
    ret->disk_budget_bytes = (uint64_t)s->session_disk_mb << 20;
    unsigned v = atomic_load(&d->seen_interp);
    for (int i = 0; i < 2; i++)
        if (v & (4u << i)) {
            ret->interpreters[ret->ninterpreters].language = dk_lang_name[i];
            ret->interpreters[ret->ninterpreters++].alive = (v & (1u << i)) != 0;
        }
}

void dk_session_close(void *state, void *session) {
    struct docker_state *s = state;
    struct dsession *d = session;
    dk_cleaner_join(d);
    dk_kill_container(s, d->id);
    dk_reap_later(s, d->id);
    dk_dsession_free(d);
}

int dk_session_pause(void *state, void *session) {
    struct docker_state *s = state;
    struct dsession *d = session;
    dk_cleaner_join(d);
    char path[160];
    struct pl_error err = {0};
    snprintf(path, sizeof(path), "/containers/%s/pause", d->id);
    return dk_api_expect(s, "POST", path, NULL, 204, NULL, &err);
}

/*
 * The engine answers an unpause before its own state says so: it marks the
 * container unpaused when containerd's event comes back, and an exec in
 * between is refused 409 ("is paused").  So a resume returns once the
 * engine's state agrees, or fails after
 * PL_DOCKER_RESUME_SETTLE_MS.
 */
#define PL_DOCKER_RESUME_SETTLE_MS 2000

int dk_session_resume(void *state, void *session, struct pl_error *err) {
    struct docker_state *s = state;
    struct dsession *d = session;
    char path[160], fp[65];
    snprintf(path, sizeof(path), "/containers/%s/unpause", d->id);
    if (dk_api_expect(s, "POST", path, NULL, 204, NULL, err) < 0)
        return -1;
    uint64_t until = pl_deadline_in_ms(PL_DOCKER_RESUME_SETTLE_MS);
    for (;;) {
        bool running = false, paused = true;
        if (dk_session_state(s, d->id, fp, &running, &paused, err) < 0)
            return -1;
        if (!paused)
            return 0;
        if (pl_now_ns() >= until)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "docker: the sandbox was still paused %d ms after its unpause",
                                PL_DOCKER_RESUME_SETTLE_MS);
        pl_sleep_ns(PL_MS(5));
    }
}

/*
 * A session call's files, written into /work by the bootstrap's files mode
 * in one exec as the calls' user (never through a symlink an earlier call
 * left).  0 with ret_failed "" when written, or why not; *ret_timed_out at
 * the deadline; < 0 when the engine failed.  The verdict is the exec's exit
 * code, read from the engine.
 */
int dk_session_write(struct docker_state *s, struct dsession *d, const struct pl_file *files,
                     size_t nfiles, uint64_t deadline, char *ret_failed, size_t flen,
                     bool *ret_timed_out, struct pl_error *err) {
    ret_failed[0] = '\0';
    *ret_timed_out = false;
    if (nfiles == 0)
        return 0;
    PL_CLEANUP(pl_buf_free) struct pl_buf hdr = {0};
    PL_CLEANUP(pl_buf_free) struct pl_buf body = {0};
    json_t *fl = json_array();
    for (size_t i = 0; i < nfiles; i++) {
        json_array_append_new(
            fl, json_pack("{s:s, s:I}", "path", files[i].path, "len", (json_int_t)files[i].len));
        pl_buf_append(&body, files[i].content, files[i].len);
    }
    PL_AUTO_JSON json_t *h = json_pack("{s:s, s:o}", "kind", "files", "files", fl);
    PL_AUTO_FREE char *line = h ? json_dumps(h, JSON_COMPACT) : NULL;
    if (line)
        pl_buf_printf(&hdr, "%zu\n%s", strlen(line), line);
    uint64_t now = pl_now_ns();
    struct cont_input in = {.timeout_ms =
                                now < deadline ? (unsigned)((deadline - now) / 1000000ull) + 1 : 1,
                            .parts = {hdr.data, body.data},
                            .part_len = {hdr.len, body.len},
                            .nparts = 2};
    PL_CLEANUP(dk_cont_pump_clear) struct cont_pump p = {0};
    struct cont_result res = {0};
    p.dx.out.cap = p.dx.err.cap = 4096;
    char user[32];
    dk_run_user(s, user);
    int rc = hdr.data
                 ? dk_exec_in(s, d->id, user,
                              json_pack("[s, s, s, s]", "python3", "-I", "-c", pl_docker_bootstrap),
                              NULL, &in, &p, &res, err)
                 : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    const struct pl_buf *why = &p.dx.err.kept;
    if (rc == 0) {
        *ret_timed_out = res.timed_out;
        if (!res.timed_out && res.exit_code == 3)
            snprintf(ret_failed, flen, "%.*s",
                     (int)(why->len && why->data[why->len - 1] == '\n' ? why->len - 1 : why->len),
                     why->data ? why->data : "");
        else if (!res.timed_out && res.exit_code != 0)
            snprintf(ret_failed, flen, "writing the files ended with exit %d", res.exit_code);
    }
    return rc;
}

/*
 * A cell: its files first (an exec, when it has any), then its code to the
 * kept interpreter over the uplink, started for it when none runs.  An
 * uplink that is gone before anything was sent (the interpreter ended
 * between calls) gets a fresh interpreter, once.
 */
static int session_cell(struct docker_state *s, struct dsession *d, const struct pl_run_ctx *ctx,
                        const struct pl_run_request *req, struct pl_run_result *ret,
                        struct pl_error *err) {
    int lang = lang_index(req->cell.language);
    uint64_t deadline = pl_now_ns() + (uint64_t)ctx->timeout_ms * 1000000ull;
    char failed[200];
    bool timed_out = false;
    if (dk_session_write(s, d, req->cell.files, req->cell.nfiles, deadline, failed, sizeof(failed),
                         &timed_out, err) < 0)
        return -1;
    if (timed_out || failed[0]) {
        ret->timed_out = timed_out;
        ret->exit_code = timed_out ? 124 : 1;
        ret->outcome = timed_out ? PL_OUTCOME_TIMED_OUT : PL_OUTCOME_COMPLETED;
        snprintf(ret->detail, sizeof(ret->detail),
                 timed_out ? "the deadline ended the cell while its files were written"
                           : "the cell's files could not be written: %.180s",
                 failed);
        ret->out = calloc(1, 1);
        ret->err = calloc(1, 1);
        return ret->out && ret->err ? 0 : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    PL_CLEANUP(pl_demux_free) struct pl_demux dx = {0};
    PL_CLEANUP(pl_displays_free) struct pl_displays disp = {0};
    pl_displays_init(&disp, ctx->display, ctx->sink);
    int status = 1;
    enum uplink_end e = UPLINK_UNUSABLE;
    for (int attempt = 0; attempt < 2 && e == UPLINK_UNUSABLE; attempt++) {
        if (!d->in[lang].up && dk_launch(s, d, lang, err) < 0)
            return -1;
        /* Started for this cell, or at open for a hint, or by the pool: the
         * cell begins where nothing defined earlier exists. */
        if (d->in[lang].fresh)
            ret->interpreter_started = true;
        d->in[lang].fresh = false;
        pl_demux_free(&dx);
        memset(&dx, 0, sizeof(dx));
        dx.out.cap = dx.err.cap = ctx->output_bytes;
        pl_capture_stream(&dx.out, ctx->sink, 1, 0);
        pl_capture_stream(&dx.err, ctx->sink, 2, 0);
        e = dk_uplink_cell(d, lang, req->cell.code, req->cell.code_len, deadline, &dx, &disp,
                           &status);
        if (e == UPLINK_UNUSABLE)
            d->in[lang].up = false; /* it ended between calls: a fresh one */
    }
    if (e == UPLINK_UNUSABLE)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the %s interpreter's cell channel failed twice", dk_lang_name[lang]);
    ret->cell_uplink = true;
    ret->timed_out = e == UPLINK_TIMED_OUT;
    if (e == UPLINK_TIMED_OUT || e == UPLINK_ENDED) {
        /* The interpreter is no longer kept: the cleanup after this call
         * ends it, and the next cell starts a fresh one. */
        dk_uplink_drop(d, lang);
        d->in[lang].up = false;
    }
    if (e == UPLINK_TIMED_OUT) {
        ret->exit_code = 124;
        ret->outcome = PL_OUTCOME_TIMED_OUT;
        snprintf(ret->detail, sizeof(ret->detail),
                 "the deadline of %u ms ended the cell and its interpreter", ctx->timeout_ms);
    } else if (e == UPLINK_ENDED) {
        ret->exit_code = 1;
        ret->outcome = PL_OUTCOME_COMPLETED;
        snprintf(ret->detail, sizeof(ret->detail), "the %s interpreter ended during the cell",
                 dk_lang_name[lang]);
    } else {
        ret->exit_code = status == 0 ? 0 : 1;
        ret->outcome = PL_OUTCOME_COMPLETED;
    }
    ret->out = dk_take(&dx.out, &ret->out_len, &ret->out_truncated);
    ret->err = dk_take(&dx.err, &ret->err_len, &ret->err_truncated);
    pl_displays_finish(&disp, &ret->outputs, &ret->outputs_dropped);
    return ret->out && ret->err ? 0 : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
}

/* A project in a session: its files (an exec), then its steps, sparing the
 * kept interpreters between steps, from one exec of the step runner
 * (dk_session_steps), the one waiting when there is one; with none
 * waiting, under runc one step is an exec of its own (dk_project_steps).
 * The call ends the runner it used (docs/sessions.md, "A project call"). */
static int session_project(struct docker_state *s, struct dsession *d, const struct pl_run_ctx *ctx,
                           const struct pl_run_request *req, struct cont_input *in,
                           struct cont_result *res, struct pl_error *err) {
    uint64_t deadline = pl_now_ns() + (uint64_t)ctx->timeout_ms * 1000000ull;
    bool timed_out = false;
    bool waiting = runner_waiting(s, d);
    PL_GUARD(runner_dropp) struct dsession *used = d;
    if (!waiting)
        runner_drop(d);
    d->runner.wanted = true; /* from now on each cleanup starts one */
    /* The next runner's python3 steps' waiters: as many as a project call
     * of this session had python3 steps at most (agents repeat their
     * calls), DK_STEP_WAITERS at most. */
    unsigned pys = 0;
    for (size_t i = 0; i < req->project.nsteps; i++)
        pys +=
            req->project.steps[i].argc > 0 && strcmp(req->project.steps[i].argv[0], "python3") == 0;
    pys = pys < DK_STEP_WAITERS ? pys : DK_STEP_WAITERS;
    d->runner.want = pys > d->runner.want ? pys : d->runner.want;
    /* With none waiting, a runner for all the steps, started first so that
     * its start overlaps the files' exec.  Under runc one step costs less
     * as an exec of its own (the runner's Python start is more than an
     * exec's price there); under runsc an exec and the host's look at what
     * it left cost more than the runner's start. */
    bool one_exec = waiting || s->hv.runsc || req->project.nsteps > 1;
    int lfd = -1;
    if (one_exec && !waiting && runner_begin(s, d, &lfd, err) < 0)
        return -1;
    int frc = dk_session_write(s, d, req->project.files, req->project.nfiles, deadline,
                               res->files_failed, sizeof(res->files_failed), &timed_out, err);
    if (lfd >= 0) {
        if (frc < 0) {
            dk_steps_unlisten(d, lfd);
            return -1;
        }
        if (runner_finish(s, d, lfd, deadline, &timed_out, err) < 0 && !timed_out)
            return -1;
    }
    if (frc < 0)
        return -1;
    res->files_done = true;
    res->timed_out = timed_out;
    if (timed_out || res->files_failed[0])
        return 0;
    long keep[2];
    size_t nkeep = 0;
    PL_AUTO_JSON json_t *kept = json_array();
    for (int i = 0; i < 2; i++)
        if (d->in[i].up) {
            keep[nkeep++] = d->in[i].host_pid;
            json_array_append_new(
                kept, json_pack("[I, I]", (json_int_t)d->in[i].pid, (json_int_t)d->in[i].start));
        }
    if (ctx->broker)
        in->step_env = "PLIMSOLL_BROKER_SOCKET=/run/plimsoll/call/" PL_BROKER_SOCKET_NAME;
    if (!kept || json_array_size(kept) != nkeep)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    /* Under runsc the proof between steps is the runner's own, inside
     * gVisor's kernel, as a project's bootstrap's is; the host's look (its
     * process list) comes after the call, with the cleanup. */
    if (one_exec) {
        /* What the host's sweeps between steps spare (runc), each while its
         * start time holds: the kept interpreters, the runner, its waiters. */
        long spare[DK_SESSION_SPARED];
        unsigned long long spare_start[DK_SESSION_SPARED];
        size_t nspare = 0;
        for (int i = 0; i < 2; i++)
            if (d->in[i].up) {
                spare[nspare] = d->in[i].host_pid;
                spare_start[nspare++] = d->in[i].start;
            }
        spare[nspare] = d->runner.host_pid;
        spare_start[nspare++] = d->runner.start;
        for (size_t k = 0; k < d->runner.nw; k++)
            if (d->runner.w[k].pid > 0) {
                spare[nspare] = d->runner.w[k].host_pid;
                spare_start[nspare++] = d->runner.w[k].start;
            }
        return dk_session_steps(s, in, &d->runner.r, s->hv.runsc ? 0 : d->init_pid, kept, spare,
                                spare_start, nspare, res, deadline, err);
    }
    return dk_project_steps(s, in, d->id, res, deadline, d->init_pid, keep, nkeep, err);
}

int dk_session_run(void *state, void *session, const struct pl_run_ctx *ctx,
                   const struct pl_run_request *req, struct pl_run_result *ret,
                   struct pl_error *err) {
    struct docker_state *s = state;
    struct dsession *d = session;
    dk_cleaner_join(d); /* the previous call's cleanup: this call waits for it */
    uint64_t deadline = pl_deadline_in_ms(ctx->timeout_ms);
    char fp[65];
    bool running = false, paused = false;
    /* The sandbox's own state first: a main process that ended also makes
     * the cleanup fail, and the first is the reason worth telling. */
    if (dk_session_state(s, d->id, fp, &running, &paused, err) < 0)
        return pl_error_set(err, PL_REASON_SESSION_ENDED, "the sandbox is gone");
    if (!running)
        return pl_error_set(err, PL_REASON_SESSION_ENDED, "the sandbox's main process ended");
    if (d->verdict[0])
        return pl_error_set(err, PL_REASON_SESSION_ENDED, "%s", d->verdict);
    if (strcmp(fp, d->fp) != 0)
        return pl_error_set(err, PL_REASON_SESSION_ENDED,
                            "the sandbox's security settings changed since the session opened");
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "plimsoll-session-%s", d->tag);
    int rc;
    if (pl_payload_is_files(req->kind)) {
        /* No guest code runs: only a write needs the cleanup after (it
         * measures the files; the refusals end no session). */
        rc = dk_session_file_call(s, d, ctx, req, ret, err);
        if (req->kind == PL_PAYLOAD_WRITE_FILES)
            cleaner_start(d);
        return rc;
    }
    /* What the call costs: the sandbox's cgroup over the call (usage.c). */
    PL_CLEANUP(dk_usage_clear) struct dk_usage usage = {0};
    dk_usage_begin(s, d->id, false, &usage);
    char call_dir[PATH_MAX];
    if (ctx->broker) {
        /* The grant of the call in progress, for anything in the sandbox. */
        snprintf(call_dir, sizeof(call_dir), "%.3000s/call", d->dir);
        struct pl_broker_sock_access acc = dk_sandbox_access(s, &d->gate);
        if (pl_broker_listen(ctx->broker, call_dir, &acc, err) < 0) {
            cleaner_start(d);
            snprintf(ret->session_ended, sizeof(ret->session_ended), "%.200s", err->message);
            return -1;
        }
    }
    if (req->kind == PL_PAYLOAD_CELL) {
        rc = session_cell(s, d, ctx, req, ret, err);
    } else {
        struct cont_input in = {.timeout_ms = ctx->timeout_ms, .usage = &usage};
        PL_CLEANUP(dk_cont_pump_clear) struct cont_pump p = {0};
        PL_CLEANUP(dk_cont_result_clear) struct cont_result res = {0};
        PL_CLEANUP(pl_buf_free) struct pl_buf hdr = {0};
        PL_CLEANUP(pl_buf_free) struct pl_buf files = {0};
        rc = dk_cont_prepare(s, ctx, req, &in, &p, &hdr, &files, err);
        if (rc == 0 && req->kind == PL_PAYLOAD_PROJECT) {
            rc = session_project(s, d, ctx, req, &in, &res, err);
        } else if (rc == 0) {
            json_t *env = ctx->broker ? json_pack("[s]", "PLIMSOLL_BROKER_SOCKET=/run/plimsoll/"
                                                         "call/" PL_BROKER_SOCKET_NAME)
                                      : NULL;
            char user[32];
            dk_run_user(s, user);
            rc = dk_exec_in(s, d->id, user,
                            json_pack("[s, s, s, s]", "python3", "-I", "-c", pl_docker_bootstrap),
                            env, &in, &p, &res, err);
            res.exit_code = res.exit_code < 0 ? 137 : res.exit_code;
        }
        dk_usage_end(s, d->id, &usage); /* before the collection's reader */
        if (rc == 0)
            rc = dk_cont_finish(ctx, req, &p, &res, ret, err);
        /* Its collect globs, before the cleanup: the kept interpreters
         * (and what a snippet left running) live on, so the reader trusts
         * nothing it did not open itself (docs/api.md, "Artifacts"). */
        if (rc == 0 && req->ncollect && !ret->timed_out &&
            (!ret->outcome || strcmp(ret->outcome, PL_OUTCOME_SETUP_FAILED) != 0))
            rc = dk_collect(s, d->id, ctx, req, deadline, ret);
    }
    dk_usage_end(s, d->id, &usage);
    dk_usage_result(&usage, ret);
    pl_broker_unlisten(ctx->broker);
    /* Whatever the call left running ends now, after the answer. */
    cleaner_start(d);
    if (rc < 0)
        snprintf(ret->session_ended, sizeof(ret->session_ended), "%.200s", err->message);
    return rc;
}
