/* SPDX-License-Identifier: Apache-2.0 */
/*
 * container.c: one container, from create to delete.  The Engine API calls
 * plimsoll makes for a container, the attach and exec streams read against
 * a deadline, the end of a container (from the host first: hostview.h),
 * the reaper that deletes after the answer, the peer gate of the sockets a
 * sandbox connects to, and the run directories on the host.  Under both
 * run.c and session.c: a payload's stdin for the bootstrap
 * (dk_cont_prepare) and its answer from what came back (dk_cont_finish).
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

/*
 * Kill every process of container id from the host, through its cgroup:
 * whatever state the guest put them in (stopped, traced, a main thread that
 * exited alone, every catchable signal ignored), a SIGKILL from the host
 * ends them.  *ret_n counts the processes signalled.
 */
static int host_kill(struct docker_state *s, const char *id, unsigned *ret_n) {
    char cg[200];
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    return pl_hostview_kill_all(&s->hv, cg, 5000, false, ret_n);
}

/*
 * After a container ended: prove from the host that nothing of it lives.
 * 0 when its cgroup is empty or gone; 1 when processes were still there
 * (they are killed); < 0 when they could not be killed.
 */
int dk_host_prove_gone(struct docker_state *s, const char *id) {
    char cg[200];
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    if (pl_hostview_wait_empty(&s->hv, cg, 1000) == 0)
        return 0;
    unsigned n = 0;
    int r = pl_hostview_kill_all(&s->hv, cg, 5000, false, &n);
    fprintf(stderr,
            "plimsolld: docker: container %.12s ended but %u of its processes were still running "
            "on the host; %s\n",
            id, n, r == 0 ? "killed" : "they could not all be killed");
    return r == 0 ? 1 : r;
}

/* End a container at its deadline: from the host first, then the engine. */
int dk_end_container(struct docker_state *s, const char *id) {
    unsigned n = 0;
    int hr = host_kill(s, id, &n);
    int er = dk_kill_container(s, id);
    return hr == 0 || er == 0 ? 0 : -1;
}

void dk_peer_gate_init(struct peer_gate *g, struct docker_state *s) {
    memset(g, 0, sizeof(*g));
    g->s = s;
    pthread_mutex_init(&g->lock, NULL);
}

void dk_peer_gate_open(struct peer_gate *g, const char *container_id) {
    pthread_mutex_lock(&g->lock);
    pl_hostview_cgroup(&g->s->hv, container_id, g->cgroup, sizeof(g->cgroup));
    pthread_mutex_unlock(&g->lock);
}

void dk_peer_gate_destroy(struct peer_gate *g) {
    pthread_mutex_destroy(&g->lock);
}

bool dk_peer_gate_check(void *ud, int fd, pid_t pid, uid_t uid, gid_t gid) {
    (void)fd;
    (void)gid;
    struct peer_gate *g = ud;
    char want[200], got[256];
    pthread_mutex_lock(&g->lock);
    memcpy(want, g->cgroup, sizeof(want));
    pthread_mutex_unlock(&g->lock);
    if (!want[0] || pid <= 0)
        return false;
    if (!g->s->hv.runsc && uid != (uid_t)g->s->set.uid)
        return false;
    return pl_hostview_cgroup_of_pid(&g->s->hv, pid, got, sizeof(got)) == 0 &&
           strcmp(got, want) == 0;
}

struct pl_broker_sock_access dk_sandbox_access(struct docker_state *s, struct peer_gate *g) {
    return (struct pl_broker_sock_access){.set = true,
                                          .sock_uid = (uid_t)s->set.uid,
                                          .sock_gid = (gid_t)(s->set.uid + GID_RUN),
                                          .peer_ok = g ? dk_peer_gate_check : NULL,
                                          .peer_userdata = g};
}

int dk_remove_container(struct docker_state *s, const char *id) {
    char path[160];
    /* Nothing of it may outlive the deletion: once the engine forgets a
     * container, its cgroup goes and a survivor would be nobody's. */
    unsigned killed = 0;
    if (host_kill(s, id, &killed) < 0)
        return -1;
    snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
    long st = 0;
    struct pl_error e = {0};
    if (pl_docker_call(s->engine, "DELETE", path, NULL, API_TIMEOUT_MS, &st, NULL, &e) < 0)
        return -1;
    if (st != 204 && st != 404)
        return -1;
    if (pl_hostview_runtime_state(&s->hv, id)) {
        fprintf(stderr, "plimsolld: docker: the runtime still kept state for %.12s; removed\n", id);
        pl_hostview_remove_runtime_state(&s->hv, id);
    }
    return 0;
}

/* A deletion the engine refuses is tried again, with a growing pause (the
 * engine may be restarting, or runsc still stopping the sandbox), at most
 * ATTEMPTS times in all. */
int dk_remove_container_patiently(struct docker_state *s, const char *id, int attempts) {
    long backoff_ms = 200;
    for (int attempt = 1;; attempt++) {
        if (dk_remove_container(s, id) == 0)
            return 0;
        if (attempt >= attempts)
            return -1;
        struct timespec ts = {backoff_ms / 1000, (backoff_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        backoff_ms = backoff_ms * 2 > 5000 ? 5000 : backoff_ms * 2;
    }
}

void *dk_reaper_main(void *arg) {
    struct docker_state *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->reap_head && !s->reaper_stop)
            pthread_cond_wait(&s->cond, &s->lock);
        struct reap_item *it = s->reap_head;
        if (!it)
            break; /* stopping, and nothing left */
        s->reap_head = it->next;
        pthread_mutex_unlock(&s->lock);
        /* About half a minute in all; a container still left is deleted
         * at this instance's next start. */
        dk_remove_container_patiently(s, it->id, 11);
        free(it);
        pthread_mutex_lock(&s->lock);
        s->reap_pending--;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Sandboxes that may wait for the reaper at once: past that a caller
 * deletes its own (calls that outpace deletions are slowed, never let pile
 * containers up on the engine). */
#define REAP_BACKLOG 4

void dk_reap_later(struct docker_state *s, const char *id) {
    pthread_mutex_lock(&s->lock);
    bool full = s->reap_pending >= REAP_BACKLOG;
    pthread_mutex_unlock(&s->lock);
    if (full && dk_remove_container(s, id) == 0)
        return;
    struct reap_item *it = calloc(1, sizeof(*it));
    if (!it || !s->reaper_started) {
        free(it);
        dk_remove_container(s, id);
        return;
    }
    snprintf(it->id, sizeof(it->id), "%s", id);
    pthread_mutex_lock(&s->lock);
    it->next = s->reap_head;
    s->reap_head = it;
    s->reap_pending++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static int remove_listed(const char *id, void *ud) {
    return dk_remove_container(ud, id);
}

/* Delete every container labelled with this instance (startup). */
int dk_delete_untracked(struct docker_state *s, unsigned *ret_n, struct pl_error *err) {
    char filter[256], path[512];
    snprintf(filter, sizeof(filter), "{\"label\":[\"%s=%s\"]}", LABEL_INSTANCE, s->set.instance);
    char *enc = pl_docker_urlencode(filter);
    snprintf(path, sizeof(path), "/containers/json?all=1&filters=%s", enc ? enc : "");
    free(enc);
    long st = 0;
    json_t *list = NULL;
    if (pl_docker_call(s->engine, "GET", path, NULL, API_TIMEOUT_MS, &st, &list, err) < 0)
        return -1;
    unsigned n = pl_docker_list_ids(list, remove_listed, s);
    json_decref(list);
    *ret_n = n;
    return 0;
}

int dk_api_expect(struct docker_state *s, const char *method, const char *path, const json_t *body,
                  long want, json_t **ret, struct pl_error *err) {
    long st = 0;
    json_t *j = NULL;
    if (pl_docker_call(s->engine, method, path, body, API_TIMEOUT_MS, &st, &j, err) < 0)
        return -1;
    if (st != want) {
        pl_error_set(err, PL_REASON_INTERNAL, "docker: %s %s answered %ld: %.200s", method, path,
                     st, pl_docker_message(j));
        json_decref(j);
        return -1;
    }
    if (ret)
        *ret = j;
    else
        json_decref(j);
    return 0;
}

int dk_kill_container(struct docker_state *s, const char *id) {
    char path[128];
    snprintf(path, sizeof(path), "/containers/%s/kill", id);
    long st = 0;
    struct pl_error e = {0};
    if (pl_docker_call(s->engine, "POST", path, NULL, API_TIMEOUT_MS, &st, NULL, &e) < 0)
        return -1;
    return st == 204 || st == 409 ? 0 : -1; /* 409: not running any more */
}

/* Whether exec eid no longer runs (or its container is gone). */
static bool exec_ended(struct docker_state *s, const char *eid) {
    char path[160];
    snprintf(path, sizeof(path), "/exec/%s/json", eid);
    long st = 0;
    json_t *ins = NULL;
    struct pl_error e = {0};
    if (pl_docker_call(s->engine, "GET", path, NULL, 5000, &st, &ins, &e) < 0) {
        json_decref(ins);
        return false; /* the engine is away: the deadline decides */
    }
    bool ended = st == 404 || (st == 200 && !json_is_true(json_object_get(ins, "Running")));
    json_decref(ins);
    return ended;
}

/* Write in's parts on from *part, *off as far as the stream takes them;
 * once all are written (or the guest stopped reading) stdin closes. */
static void send_parts(const struct cont_input *in, int fd, int *part, size_t *off, bool *wr_open) {
    while (*part < in->nparts) {
        size_t left = in->part_len[*part] - *off;
        if (left == 0) {
            (*part)++;
            *off = 0;
            continue;
        }
        ssize_t w = send(fd, in->parts[*part] + *off, left, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            *part = in->nparts; /* the guest stopped reading: drop the rest */
            break;
        }
        *off += (size_t)w;
    }
    if (*part >= in->nparts) {
        if (!in->keep_stdin)
            shutdown(fd, SHUT_WR); /* StdinOnce: the container's stdin closes */
        *wr_open = false;
    }
}

/* Pump stdin out and output in until the stream ends; kill at the deadline. */
int dk_pump(struct docker_state *s, const struct cont_input *in, struct cont_pump *p,
            struct cont_result *res, int fd, uint64_t deadline_ns, struct pl_error *err) {
    int part = 0;
    size_t off = 0;
    bool wr_open = true;
    uint64_t hard_end = 0;  /* after a kill: how long we still read */
    uint64_t drain_end = 0; /* after the engine said an exec ended */
    unsigned char buf[65536];
    if (in->nparts == 0) {
        shutdown(fd, SHUT_WR);
        wr_open = false;
    }
    for (;;) {
        uint64_t now = pl_now_ns();
        if (!res->timed_out && now >= deadline_ns) {
            res->timed_out = true;
            if (p->exec)
                return 0;
            dk_usage_end(s, p->id, in->usage); /* what it cost until now */
            if (dk_end_container(s, p->id) < 0)
                return pl_error_set(err, PL_REASON_INTERNAL,
                                    "docker: cannot kill container at its deadline");
            hard_end = pl_now_ns() + (uint64_t)KILL_GRACE_MS * 1000000ull;
        }
        if (hard_end && now >= hard_end)
            return 0; /* killed; the stream did not end: stop reading */
        if (drain_end && now >= drain_end)
            return 0; /* ended, and the stream stayed open: stop reading */
        uint64_t until = hard_end ? hard_end : drain_end ? drain_end : deadline_ns;
        int wait_ms = until > now ? (int)((until - now) / 1000000ull) + 1 : 0;
        /* An exec's stream may outlive its process: under runsc the engine
         * keeps it open when the sandbox dies under it.  A quiet exec is
         * asked about once a second. */
        if (p->exec_id[0] && wait_ms > 1000)
            wait_ms = 1000;
        struct pollfd pfd = {.fd = fd, .events = POLLIN | (wr_open ? POLLOUT : 0)};
        int pr = poll(&pfd, 1, wait_ms);
        if (pr < 0 && errno != EINTR)
            return pl_error_set(err, PL_REASON_INTERNAL, "poll: %s", strerror(errno));
        /* Ended: what it wrote may still be on its way through the engine
         * (a step's whole output can be), so read on until the stream
         * ends, for EXEC_DRAIN_MS at most. */
        if (pr == 0 && p->exec_id[0] && !drain_end && exec_ended(s, p->exec_id)) {
            drain_end = pl_now_ns() + (uint64_t)EXEC_DRAIN_MS * 1000000ull;
            continue;
        }
        if (pr <= 0)
            continue;
        if (wr_open && (pfd.revents & (POLLOUT | POLLERR | POLLHUP)))
            send_parts(in, fd, &part, &off, &wr_open);
        if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = recv(fd, buf, sizeof(buf), 0);
            if (n == 0)
                return 0; /* the stream ended: the container exited */
            if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                    continue;
                if (res->timed_out)
                    return 0;
                return pl_error_set(err, PL_REASON_INTERNAL, "docker attach stream: %s",
                                    strerror(errno));
            }
            if (pl_demux_feed(&p->dx, buf, (size_t)n) < 0)
                return pl_error_set(err, PL_REASON_INTERNAL,
                                    "docker attach stream: malformed frame");
            int status;
            if (pl_demux_ended(&p->dx, &status))
                return 0; /* the run's end marker, on both streams */
            if (p->step && p->dx.m[0].done && p->dx.m[1].done)
                return 0; /* a step's markers, whatever they say (the caller judges) */
            if (p->until_line && part >= in->nparts && p->dx.out.kept.len &&
                memchr(p->dx.out.kept.data, '\n', p->dx.out.kept.len))
                return 0;
        }
    }
}

/* Create a container with the run configuration; its ID into ret_id.
 * waiters: what its bootstrap starts waiting (dk_container_config). */
int dk_create_container(struct docker_state *s, const char *image_id, unsigned memory_mb,
                        const char *run_id, const char *socket_dir, const char *waiters,
                        char ret_id[72], struct pl_error *err) {
    char path[256];
    json_t *cfg = dk_container_config(s, image_id, memory_mb, run_id, socket_dir, waiters);
    if (!cfg)
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory");
    snprintf(path, sizeof(path), "/containers/create?name=plimsoll-%.24s", run_id);
    json_t *created = NULL;
    int rc = dk_api_expect(s, "POST", path, cfg, 201, &created, err);
    json_decref(cfg);
    if (rc < 0)
        return -1;
    if (pl_docker_created_id(created, ret_id) < 0) {
        json_decref(created);
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: create answered without an Id");
    }
    json_decref(created);
    return 0;
}

static bool in_list(long v, const long *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (list[i] == v)
            return true;
    return false;
}

/*
 * End every process of container id but its PID 1 (init_host_pid, runc)
 * and the ones in keep (runc: host pids; runsc: gVisor pids), from the
 * host, then check that only those remain.  dead (runsc only) names pids the
 * cleanup found dead but not yet reaped, which gVisor still lists (under
 * runc a dead process has left its cgroup).  Under runc the processes are
 * read from the container's cgroup; under runsc from `runsc ps` and ended
 * with `runsc kill`.  *ret_killed counts what was ended.  0 when only the
 * spared remain; < 0 with err when something could not be ended or read.
 */
int dk_host_sweep(struct docker_state *s, const char *id, pid_t init_host_pid, const long *keep,
                  size_t nkeep, const long *dead, size_t ndead, unsigned *ret_killed,
                  struct pl_error *err) {
    char cg[200];
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    unsigned killed = 0;
    long ended[256]; /* runsc: pids a SIGKILL from the host went to */
    size_t nended = 0;
    uint64_t deadline = pl_now_ns() + 5000000000ull;
    for (;;) {
        size_t others = 0;
        if (!s->hv.runsc) {
            pid_t *procs = NULL;
            size_t n = 0;
            int r = pl_hostview_procs(&s->hv, cg, &procs, &n);
            if (r < 0 && r != -ENOENT)
                return pl_error_set(err, PL_REASON_INTERNAL,
                                    "the sandbox's cgroup could not be read: %s", strerror(-r));
            for (size_t i = 0; i < n; i++) {
                if (procs[i] == init_host_pid || in_list(procs[i], keep, nkeep))
                    continue;
                others++;
                if (kill(procs[i], SIGKILL) == 0)
                    killed++;
            }
            free(procs);
        } else {
            long *pids = NULL;
            size_t n = 0;
            /* gVisor lets a guest stop its PID 1 (Linux does not), and a
             * stopped PID 1 reaps nobody: what was killed would stay
             * listed.  Continue it from the host before looking again. */
            if (killed)
                pl_hostview_runsc_signal(&s->hv, id, 1, "CONT");
            if (pl_hostview_runsc_ps(&s->hv, id, &pids, &n, err) < 0)
                return -1;
            for (size_t i = 0; i < n; i++) {
                if (pids[i] == 1 || in_list(pids[i], keep, nkeep))
                    continue;
                /* A zombie a kept interpreter has not reaped yet: listed by
                 * gVisor (which cannot tell it from the living), dead by the
                 * cleanup's reading of its threads, or dead because the host
                 * itself sent it a SIGKILL, which nothing survives. */
                if (in_list(pids[i], dead, ndead) || in_list(pids[i], ended, nended))
                    continue;
                others++;
                if (pl_hostview_runsc_signal(&s->hv, id, pids[i], "KILL") == 0) {
                    killed++;
                    if (nended < sizeof(ended) / sizeof(ended[0]))
                        ended[nended++] = pids[i];
                }
            }
            free(pids);
        }
        if (others == 0)
            break;
        if (pl_now_ns() >= deadline)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "%zu processes of the sandbox could not be ended", others);
        usleep(5000);
    }
    if (ret_killed)
        *ret_killed = killed;
    return 0;
}

static int mkdir_p(const char *path, mode_t mode) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, mode) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    return mkdir(tmp, mode) < 0 && errno != EEXIST ? -1 : 0;
}

/*
 * SANDBOX_DOCKER_RUN_DIR/<instance>: root's, traverse-only for others (each
 * run's or session's directory below it is its sandbox uid's alone).
 */
int dk_make_instance_dir(struct docker_state *s, struct pl_error *err) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%.2000s/%s", s->set.run_dir, s->set.instance);
    if (mkdir_p(dir, 0711) < 0 || chmod(dir, 0711) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
    return 0;
}

/* Remove path: a directory of plimsoll's making (sockets, a "call"
 * subdirectory), depth-limited; symlinks are unlinked, never followed. */
static void remove_tree(const char *path, int depth) {
    DIR *dir = opendir(path);
    if (dir) {
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char sub[PATH_MAX];
            snprintf(sub, sizeof(sub), "%.3800s/%.255s", path, e->d_name);
            struct stat st;
            if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode) && depth > 0)
                remove_tree(sub, depth - 1);
            else
                unlink(sub);
        }
        closedir(dir);
    }
    rmdir(path);
}

/* A daemon killed with SIGKILL leaves its per-run and per-session
 * directories (broker sockets) behind: remove this instance's, and only
 * those (run-*, session-*, canary-*). */
void dk_delete_stale_dirs(struct docker_state *s) {
    char base[PATH_MAX];
    snprintf(base, sizeof(base), "%.2000s/%s", s->set.run_dir, s->set.instance);
    DIR *dir = opendir(base);
    if (!dir)
        return;
    struct dirent *e;
    unsigned n = 0;
    while ((e = readdir(dir))) {
        if (strncmp(e->d_name, "run-", 4) != 0 && strncmp(e->d_name, "session-", 8) != 0 &&
            strncmp(e->d_name, "canary-", 7) != 0)
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%.3800s/%.255s", base, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            remove_tree(path, 2);
            n++;
        }
    }
    closedir(dir);
    if (n)
        fprintf(stderr, "plimsolld: docker: removed %u directories left by instance %s\n", n,
                s->set.instance);
}

/*
 * Create an exec in container_id as user in /work (stdin attached when
 * attach_stdin), with env plus the runtime's exec filter (runsc), and
 * start it: *ret_fd is its hijacked stream, ret_eid its id.  Takes cmd's
 * and env's references.
 */
int dk_exec_start(struct docker_state *s, const char *container_id, const char *user, json_t *cmd,
                  json_t *env, bool attach_stdin, int *ret_fd, char ret_eid[80],
                  struct pl_error *err) {
    char path[160];
    json_t *cfg = json_pack("{s:b, s:b, s:b, s:b, s:o, s:s, s:s}", "AttachStdin", attach_stdin,
                            "AttachStdout", 1, "AttachStderr", 1, "Tty", 0, "Cmd", cmd,
                            "WorkingDir", "/work", "User", user);
    if (s->set.exec_filter_env) {
        if (!env)
            env = json_array();
        json_array_append_new(env, json_string(s->set.exec_filter_env));
    }
    if (cfg && env)
        json_object_set_new(cfg, "Env", env);
    else
        json_decref(env);
    if (!cfg)
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory");
    snprintf(path, sizeof(path), "/containers/%s/exec", container_id);
    json_t *created = NULL;
    int rc = dk_api_expect(s, "POST", path, cfg, 201, &created, err);
    json_decref(cfg);
    if (rc < 0)
        return -1;
    snprintf(ret_eid, 80, "%s", json_string_value(json_object_get(created, "Id")) ?: "");
    json_decref(created);
    snprintf(path, sizeof(path), "/exec/%s/start", ret_eid);
    return pl_docker_hijack(s->engine, path, "{\"Detach\":false,\"Tty\":false}", ret_fd, err);
}

/*
 * One exec in container_id, as user in /work: stdin from in's parts,
 * output into p->dx, bounded by in->timeout_ms.  res->exit_code is the
 * exec's exit code (-1 when it timed out or the code is unknown).
 */
int dk_exec_in(struct docker_state *s, const char *container_id, const char *user, json_t *cmd,
               json_t *env, const struct cont_input *in, struct cont_pump *p,
               struct cont_result *res, struct pl_error *err) {
    char path[160], eid[80];
    res->exit_code = -1;
    int fd = -1;
    if (dk_exec_start(s, container_id, user, cmd, env, in->nparts > 0, &fd, eid, err) < 0)
        return -1;
    uint64_t t0 = pl_now_ns();
    p->exec = true;
    snprintf(p->id, sizeof(p->id), "%s", container_id);
    snprintf(p->exec_id, sizeof(p->exec_id), "%s", eid);
    if (pl_fd_set_nonblock(fd) < 0 ||
        dk_pump(s, in, p, res, fd, t0 + (uint64_t)in->timeout_ms * 1000000ull, err) < 0) {
        close(fd);
        if (!err->message[0])
            pl_error_set(err, PL_REASON_INTERNAL, "docker exec: %s", strerror(errno));
        return -1;
    }
    close(fd);
    if (res->timed_out)
        return 0;
    /* The stream ends as the process does; the engine may record its exit
     * a moment later. */
    snprintf(path, sizeof(path), "/exec/%s/json", eid);
    for (int i = 0; i < 100; i++) {
        json_t *ins = NULL;
        long st = 0;
        if (pl_docker_call(s->engine, "GET", path, NULL, API_TIMEOUT_MS, &st, &ins, err) < 0)
            return -1;
        if (st == 404) {
            /* The exec went with its container (the guest ended the
             * sandbox): no exit code; the caller decides. */
            json_decref(ins);
            return 0;
        }
        if (st != 200) {
            pl_error_set(err, PL_REASON_INTERNAL, "docker: GET %s answered %ld: %.200s", path, st,
                         pl_docker_message(ins));
            json_decref(ins);
            return -1;
        }
        res->exit_code = pl_docker_exec_exit(ins);
        bool running = json_is_true(json_object_get(ins, "Running"));
        json_decref(ins);
        if (!running)
            break;
        usleep(10000);
    }
    return 0;
}

/* ---- a payload's run: its stdin and its answer (run.c, session.c) ------------ */

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

void dk_cont_pump_clear(struct cont_pump *p) {
    pl_demux_free(&p->dx);
}

void dk_cont_result_clear(struct cont_result *res) {
    dk_free_steps(res->steps, res->nsteps);
    res->steps = NULL;
    res->nsteps = 0;
}

/* A snippet's header; its code and the guest's stdin are parts 1 and 2. */
static json_t *snippet_header(const struct pl_run_request *req, struct cont_input *in) {
    in->parts[1] = req->snippet.code;
    in->part_len[1] = req->snippet.code_len;
    in->parts[2] = req->snippet.stdin_data;
    in->part_len[2] = req->snippet.stdin_len;
    return json_pack("{s:s, s:s, s:I}", "kind", "snippet", "language", req->snippet.language,
                     "code_len", (json_int_t)req->snippet.code_len);
}

/* A module's header; its wasm and the guest's stdin are parts 1 and 2. */
static json_t *module_header(const struct pl_run_request *req, struct cont_input *in) {
    json_t *args = json_array();
    for (size_t i = 0; i < req->module.nargs; i++)
        json_array_append_new(args, json_string(req->module.args[i]));
    in->parts[1] = (const char *)req->module.wasm;
    in->part_len[1] = req->module.wasm_len;
    in->parts[2] = req->module.stdin_data;
    in->part_len[2] = req->module.stdin_len;
    return json_pack("{s:s, s:I, s:o}", "kind", "module", "wasm_len",
                     (json_int_t)req->module.wasm_len, "args", args);
}

/* A project's header; its files, in *files, are part 1.  The bootstrap's
 * stdout carries one short report line; the steps' output (on the attach
 * stream after it, or a session's execs' own streams) is kept at ctx's cap
 * and goes to its sink. */
static json_t *project_header(const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                              struct cont_input *in, struct cont_pump *p, struct pl_buf *files) {
    json_t *fl = json_array();
    for (size_t i = 0; i < req->project.nfiles; i++) {
        json_array_append_new(fl, json_pack("{s:s, s:I}", "path", req->project.files[i].path, "len",
                                            (json_int_t)req->project.files[i].len));
        pl_buf_append(files, req->project.files[i].content, req->project.files[i].len);
    }
    json_t *h = json_pack("{s:s, s:o}", "kind", "project", "files", fl);
    /* In the run's own container the bootstrap runs the steps: they come
     * on its stdin after the files, each with this token. */
    if (in->own_container) {
        if (pl_random_hex(in->step_token, sizeof(in->step_token), 16) < 0) {
            json_decref(h);
            return NULL; /* the run is refused as INTERNAL */
        }
        json_object_set_new(h, "token", json_string(in->step_token));
        in->keep_stdin = true;
    }
    in->parts[1] = files->data;
    in->part_len[1] = files->len;
    in->nparts = 2;
    p->dx.out.cap = 64u << 10;
    p->dx.err.cap = 64u << 10;
    in->project = req;
    in->output_bytes = ctx->output_bytes;
    in->sink = ctx->sink;
    return h;
}

/* The bootstrap ends both streams with a marker holding a fresh nonce
 * (into header h) once nothing of the guest lives ("The run's end"). */
static int expect_end(json_t *h, struct pl_demux *dx, struct pl_error *err) {
    char nonce[33], mark[PL_DEMUX_MARK_MAX];
    if (!h || pl_random_hex(nonce, sizeof(nonce), 16) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: no randomness for the run");
    json_object_set_new(h, "end", json_string(nonce));
    int ml = snprintf(mark, sizeof(mark), END_MARK_PREFIX "%s ", nonce);
    pl_demux_expect_end(dx, mark, (size_t)ml);
    return 0;
}

/*
 * Set in and p up for a snippet, module or project: the image, the bytes
 * for the bootstrap's stdin (the header in *hdr, a project's files in
 * *files, which in's parts point into) and the output caps.
 */
int dk_cont_prepare(struct docker_state *s, const struct pl_run_ctx *ctx,
                    const struct pl_run_request *req, struct cont_input *in, struct cont_pump *p,
                    struct pl_buf *hdr, struct pl_buf *files, struct pl_error *err) {
    PL_AUTO_JSON json_t *h = NULL;
    switch (req->kind) {
    case PL_PAYLOAD_SNIPPET:
        in->image_id = s->snippet_id;
        h = snippet_header(req, in);
        break;
    case PL_PAYLOAD_MODULE:
        in->image_id = s->snippet_id;
        h = module_header(req, in);
        break;
    case PL_PAYLOAD_PROJECT:
        in->image_id = s->project_id;
        h = project_header(ctx, req, in, p, files);
        break;
    default: return pl_error_set(err, PL_REASON_INTERNAL, "docker: payload not dispatched here");
    }
    /* Never in a session's exec: the session's other processes live on. */
    if (req->kind != PL_PAYLOAD_PROJECT && in->own_container && expect_end(h, &p->dx, err) < 0)
        return -1;
    /* A snippet's collect globs: its bootstrap stays once it wrote the end
     * marker (nothing of the guest lives then), so the reader can run
     * before the container ends (dk_run_container). */
    if (req->kind == PL_PAYLOAD_SNIPPET && in->own_container && req->ncollect)
        json_object_set_new(h, "hold", json_true());
    if (req->kind != PL_PAYLOAD_PROJECT) {
        /* Snippets and modules: header, the code, then the guest's stdin;
         * the guest's own output is the container's. */
        in->nparts = 3;
        p->dx.out.cap = p->dx.err.cap = ctx->output_bytes;
        pl_capture_stream(&p->dx.out, ctx->sink, 1, 0);
        pl_capture_stream(&p->dx.err, ctx->sink, 2, 0);
    }
    PL_AUTO_FREE char *line = h ? json_dumps(h, JSON_COMPACT) : NULL;
    if (line)
        pl_buf_printf(hdr, "%zu\n%s", strlen(line), line);
    in->parts[0] = hdr->data;
    in->part_len[0] = hdr->len;
    return hdr->data ? 0 : pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory");
}

/*
 * A project's outcome.  The files report (one line, written before any
 * guest code existed; setup_report) says whether the steps could start;
 * the steps themselves came from the engine (dk_project_steps).  A missing,
 * torn, oversized or unreadable report is protocol_error, never skipped.
 */
static void project_outcome(const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                            struct cont_result *res, const char *setup_failed, bool setup_ok,
                            const char *setup_problem, struct pl_run_result *ret) {
    ret->steps = res->steps;
    ret->nsteps = res->nsteps;
    res->steps = NULL;
    res->nsteps = 0;
    int last = ret->nsteps ? ret->steps[ret->nsteps - 1].exit_code : 0;
    ret->exit_code = last;
    if (setup_failed) {
        ret->outcome = PL_OUTCOME_SETUP_FAILED;
        snprintf(ret->detail, sizeof(ret->detail), "writing the project's files failed: %.200s",
                 setup_failed);
    } else if (res->timed_out) {
        ret->outcome = PL_OUTCOME_TIMED_OUT;
        ret->exit_code = 124;
        snprintf(ret->detail, sizeof(ret->detail),
                 "the deadline of %u ms ended the run %s step %zu of %zu", ctx->timeout_ms,
                 setup_ok ? "during" : "before", ret->nsteps + 1, req->project.nsteps);
    } else if (!setup_ok) {
        ret->outcome = PL_OUTCOME_PROTOCOL_ERROR;
        snprintf(ret->detail, sizeof(ret->detail), "%.250s", setup_problem);
        if (res->oom)
            ret->exit_code = 137;
    } else if (res->step_error[0]) {
        ret->outcome = PL_OUTCOME_PROTOCOL_ERROR;
        snprintf(ret->detail, sizeof(ret->detail), "%.250s", res->step_error);
        if (res->oom)
            ret->exit_code = 137;
    } else {
        pl_run_result_steps_completed(ret);
    }
}

/* The bootstrap's files report (reports.h). */
static json_t *setup_report(const struct cont_pump *p, const struct cont_result *res, char *why,
                            size_t len) {
    return pl_docker_files_report(p->dx.out.kept.data, p->dx.out.kept.len, p->dx.out.total,
                                  p->dx.out.cap, res->exit_code, why, len);
}

/* A project's answer: its outcome, no stdout, the bootstrap's stderr. */
static int project_finish(const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                          struct cont_pump *p, struct cont_result *res, struct pl_run_result *ret,
                          struct pl_error *err) {
    if (res->files_done) {
        /* A session's call: the files exec's exit code said it. */
        project_outcome(ctx, req, res, res->files_failed[0] ? res->files_failed : NULL,
                        !res->files_failed[0], NULL, ret);
    } else {
        char why[160];
        PL_AUTO_JSON json_t *rep = setup_report(p, res, why, sizeof(why));
        project_outcome(ctx, req, res, json_string_value(json_object_get(rep, "setup_failed")),
                        json_is_string(json_object_get(rep, "setup")), why, ret);
    }
    ret->out = calloc(1, 1);
    ret->err = dk_take(&p->dx.err, &ret->err_len, NULL);
    if (ret->err_len > ctx->output_bytes) {
        ret->err_len = ctx->output_bytes;
        ret->err_truncated = true;
    }
    if (!ret->out || !ret->err) {
        pl_demux_free(&p->dx);
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    return 0;
}

/* Fill the result of a finished snippet, module or project from p and res. */
int dk_cont_finish(const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                   struct cont_pump *p, struct cont_result *res, struct pl_run_result *ret,
                   struct pl_error *err) {
    ret->timed_out = res->timed_out;
    ret->out_of_memory = res->oom;
    if (req->kind == PL_PAYLOAD_PROJECT) {
        if (project_finish(ctx, req, p, res, ret, err) < 0)
            return -1;
    } else {
        ret->exit_code = res->timed_out ? 124 : res->exit_code;
        ret->out = dk_take(&p->dx.out, &ret->out_len, &ret->out_truncated);
        ret->err = dk_take(&p->dx.err, &ret->err_len, &ret->err_truncated);
        ret->outcome = res->timed_out ? PL_OUTCOME_TIMED_OUT : PL_OUTCOME_COMPLETED;
        if (res->timed_out)
            snprintf(ret->detail, sizeof(ret->detail),
                     "the deadline of %u ms ended the run; the container was killed",
                     ctx->timeout_ms);
        else if (res->oom)
            snprintf(ret->detail, sizeof(ret->detail),
                     "out of memory: the container's limit is %u MiB; the kernel killed the "
                     "guest (exit %d)",
                     ctx->memory_mb, res->exit_code);
    }
    pl_demux_free(&p->dx);
    return 0;
}
