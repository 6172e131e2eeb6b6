/* SPDX-License-Identifier: Apache-2.0 */
/*
 * container.c: one container, from create to delete.  The Engine API calls
 * plimsoll makes for a container, the attach and exec streams read against
 * a deadline, the end of a container (from the host first: hostview.h),
 * the reaper that deletes after the answer, the peer gate of the sockets a
 * sandbox connects to, and the run directories on the host.
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

#include "docker_int.h"

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

/* Pump stdin out and output in until the stream ends; kill at the deadline. */
int dk_pump(struct docker_state *s, struct cont_run *r, int fd, uint64_t deadline_ns,
            struct pl_error *err) {
    int part = 0;
    size_t off = 0;
    bool wr_open = true;
    uint64_t hard_end = 0;  /* after a kill: how long we still read */
    uint64_t drain_end = 0; /* after the engine said an exec ended */
    unsigned char buf[65536];
    if (r->nparts == 0) {
        shutdown(fd, SHUT_WR);
        wr_open = false;
    }
    for (;;) {
        uint64_t now = pl_now_ns();
        if (!r->timed_out && now >= deadline_ns) {
            r->timed_out = true;
            if (r->exec)
                return 0;
            if (dk_end_container(s, r->id) < 0)
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
        if (r->exec_id[0] && wait_ms > 1000)
            wait_ms = 1000;
        struct pollfd p = {.fd = fd, .events = POLLIN | (wr_open ? POLLOUT : 0)};
        int pr = poll(&p, 1, wait_ms);
        if (pr < 0 && errno != EINTR)
            return pl_error_set(err, PL_REASON_INTERNAL, "poll: %s", strerror(errno));
        /* Ended: what it wrote may still be on its way through the engine
         * (a step's whole output can be), so read on until the stream
         * ends, for EXEC_DRAIN_MS at most. */
        if (pr == 0 && r->exec_id[0] && !drain_end && exec_ended(s, r->exec_id)) {
            drain_end = pl_now_ns() + (uint64_t)EXEC_DRAIN_MS * 1000000ull;
            continue;
        }
        if (pr <= 0)
            continue;
        if (wr_open && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
            while (part < r->nparts) {
                size_t left = r->part_len[part] - off;
                if (left == 0) {
                    part++;
                    off = 0;
                    continue;
                }
                ssize_t w = send(fd, r->parts[part] + off, left, MSG_NOSIGNAL);
                if (w < 0) {
                    if (errno == EAGAIN || errno == EINTR)
                        break;
                    part = r->nparts; /* the guest stopped reading: drop the rest */
                    break;
                }
                off += (size_t)w;
            }
            if (part >= r->nparts) {
                shutdown(fd, SHUT_WR); /* StdinOnce: the container's stdin closes */
                wr_open = false;
            }
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = recv(fd, buf, sizeof(buf), 0);
            if (n == 0)
                return 0; /* the stream ended: the container exited */
            if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                    continue;
                if (r->timed_out)
                    return 0;
                return pl_error_set(err, PL_REASON_INTERNAL, "docker attach stream: %s",
                                    strerror(errno));
            }
            if (pl_demux_feed(&r->dx, buf, (size_t)n) < 0)
                return pl_error_set(err, PL_REASON_INTERNAL,
                                    "docker attach stream: malformed frame");
            int status;
            if (pl_demux_ended(&r->dx, &status))
                return 0; /* the run's end marker, on both streams */
            if (r->until_line && part >= r->nparts && r->dx.out.kept.len &&
                memchr(r->dx.out.kept.data, '\n', r->dx.out.kept.len))
                return 0;
        }
    }
}

/* Create a container with the run configuration; its ID into ret_id.
 * waiters: its bootstrap starts the interpreters waiting (a warm snippet
 * container's). */
int dk_create_container(struct docker_state *s, const char *image_id, unsigned memory_mb,
                        const char *run_id, const char *socket_dir, bool waiters, char ret_id[72],
                        struct pl_error *err) {
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
 * One exec in the session's container, as uid 65534 in /work: stdin from
 * r's parts, output into r->dx, bounded by r->timeout_ms.  *ret_exit is the
 * exec's exit code (-1 when it timed out or the code is unknown).
 */
int dk_exec_in(struct docker_state *s, const char *container_id, const char *user, json_t *cmd,
               json_t *env, struct cont_run *r, int *ret_exit, struct pl_error *err) {
    char path[160], eid[80];
    *ret_exit = -1;
    int fd = -1;
    if (dk_exec_start(s, container_id, user, cmd, env, r->nparts > 0, &fd, eid, err) < 0)
        return -1;
    uint64_t t0 = pl_now_ns();
    r->exec = true;
    snprintf(r->id, sizeof(r->id), "%s", container_id);
    snprintf(r->exec_id, sizeof(r->exec_id), "%s", eid);
    if (pl_fd_set_nonblock(fd) < 0 ||
        dk_pump(s, r, fd, t0 + (uint64_t)r->timeout_ms * 1000000ull, err) < 0) {
        close(fd);
        if (!err->message[0])
            pl_error_set(err, PL_REASON_INTERNAL, "docker exec: %s", strerror(errno));
        return -1;
    }
    close(fd);
    if (r->timed_out)
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
        *ret_exit = pl_docker_exec_exit(ins);
        bool running = json_is_true(json_object_get(ins, "Running"));
        json_decref(ins);
        if (!running)
            break;
        usleep(10000);
    }
    return 0;
}
