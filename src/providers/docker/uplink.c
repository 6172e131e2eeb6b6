/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uplink.c: a session's cell channel (docs/sessions.md, "The uplink"):
 * the launch of a kept interpreter, the greeting taken only from its
 * launcher, and a cell's frames.
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
#include <openssl/crypto.h>

#include "reports.h"

static void uplink_path(const struct dsession *d, char *buf, size_t len) {
    snprintf(buf, len, "%.4000s/" UPLINK_NAME, d->dir);
}

/* A listening socket at path, owned by uid:gid with mode, listening only
 * once those are set (a connect before is refused): its fd, or -1 with
 * errno. */
static int listen_at(const char *path, uid_t uid, gid_t gid, mode_t mode, int backlog) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chown(path, uid, gid) < 0 ||
        chmod(path, mode) < 0 || listen(fd, backlog) < 0) {
        int e = errno;
        close(fd);
        unlink(path);
        errno = e;
        return -1;
    }
    return fd;
}

void dk_uplink_listen(struct dsession *d) {
    char path[PATH_MAX];
    uplink_path(d, path, sizeof(path));
    /* The sandbox's uid alone may connect (and the gate checks the peer). */
    d->lfd = listen_at(path, (uid_t)d->s->set.uid, (gid_t)(d->s->set.uid + GID_RUN), 0600, 64);
}

void dk_uplink_close(struct dsession *d) {
    for (int i = 0; i < 2; i++)
        dk_uplink_drop(d, i);
    if (d->lfd >= 0) {
        char path[PATH_MAX];
        uplink_path(d, path, sizeof(path));
        close(d->lfd);
        unlink(path);
    }
    d->lfd = -1;
}

/*
 * A session's step runner (docs/sessions.md, "A project call"): its
 * commands come on dir/steps.sock (/run/plimsoll/steps.sock inside),
 * listened on for that runner alone, until it connected.  The
 * socket is root's with group GID_RUN and mode 0660, so the sandbox's own
 * kernel lets only the calls' group connect (the kept interpreters' groups
 * are "other"), and it is listening only once its owner and mode are set.
 */
static void steps_path(const struct dsession *d, char *buf, size_t len) {
    snprintf(buf, len, "%.4000s/" STEPS_SOCK_NAME, d->dir);
}

int dk_steps_listen(const struct dsession *d, struct pl_error *err) {
    char path[PATH_MAX];
    steps_path(d, path, sizeof(path));
    int fd = listen_at(path, 0, (gid_t)(d->s->set.uid + GID_RUN), 0660, 4);
    if (fd < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "the steps' socket %s: %s", path,
                            strerror(errno));
    return fd;
}

void dk_steps_unlisten(const struct dsession *d, int lfd) {
    char path[PATH_MAX];
    steps_path(d, path, sizeof(path));
    close(lfd);
    unlink(path);
}

int dk_steps_accept(struct dsession *d, int lfd, uint64_t deadline, bool *timed_out,
                    struct pl_error *err) {
    int fd = -1;
    while (fd < 0) {
        int w = pl_fd_wait(lfd, POLLIN, deadline, -1);
        if (w == -ETIMEDOUT) {
            *timed_out = true;
            break;
        }
        if (w < 0) {
            pl_error_set(err, PL_REASON_INTERNAL, "the steps' socket: %s", strerror(-w));
            break;
        }
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN))
            continue;
        if (fd < 0) {
            pl_error_set(err, PL_REASON_INTERNAL, "the steps' socket: accept: %s", strerror(errno));
            break;
        }
        struct ucred cr = {0};
        socklen_t cl = sizeof(cr);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 ||
            !dk_peer_gate_check(&d->gate, fd, cr.pid, cr.uid, cr.gid) ||
            (!d->s->hv.runsc && cr.gid != (gid_t)(d->s->set.uid + GID_RUN))) {
            close(fd);
            fd = -1;
        }
    }
    /* One connection, the runner's: nothing else may connect after it. */
    dk_steps_unlisten(d, lfd);
    return fd;
}

/*
 * A launch's connections (docs/sessions.md, "The uplink"): each one waiting
 * on the cell socket while the launcher runs is judged as it comes.  Its
 * peer must pass the session's gate (the sandbox's cgroup) and, under runc
 * where the peer is the connecting process itself, run with the launched
 * language's group; then it is sent a fresh challenge and kept.  At most
 * LAUNCH_CANDIDATES are kept, the oldest closed first: the launcher
 * connects after it stopped every other process, so its connection is the
 * newest.  The one whose challenge ends the launcher's report is the
 * uplink; the others are closed.
 */
#define LAUNCH_CANDIDATES 8
#define CHALLENGE_HEX 48

struct candidate {
    int fd;
    char challenge[CHALLENGE_HEX + 1];
};

struct candidates {
    struct candidate c[LAUNCH_CANDIDATES];
    size_t n;
};

static void candidates_close(struct candidates *cs, int keep) {
    for (size_t i = 0; i < cs->n; i++) {
        if (cs->c[i].fd != keep)
            close(cs->c[i].fd);
        OPENSSL_cleanse(cs->c[i].challenge, sizeof(cs->c[i].challenge));
    }
    cs->n = 0;
}

static bool candidate_peer(struct dsession *d, int lang, int fd) {
    struct ucred cr = {0};
    socklen_t cl = sizeof(cr);
    gid_t lang_gid = (gid_t)(d->s->set.uid + (lang == LANG_PY ? GID_PY : GID_JS));
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 &&
           dk_peer_gate_check(&d->gate, fd, cr.pid, cr.uid, cr.gid) &&
           (d->s->hv.runsc || cr.gid == lang_gid);
}

static void candidates_take(struct dsession *d, int lang, struct candidates *cs) {
    for (;;) {
        int fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return;
        }
        unsigned char msg[5 + CHALLENGE_HEX] = {'H', 0, 0, 0, CHALLENGE_HEX};
        char ch[CHALLENGE_HEX + 1];
        if (!candidate_peer(d, lang, fd) || pl_random_hex(ch, sizeof(ch), CHALLENGE_HEX / 2) < 0) {
            close(fd);
            continue;
        }
        memcpy(msg + 5, ch, CHALLENGE_HEX);
        bool sent = send(fd, msg, sizeof(msg), MSG_NOSIGNAL) == (ssize_t)sizeof(msg);
        OPENSSL_cleanse(msg, sizeof(msg));
        if (!sent) {
            close(fd);
            OPENSSL_cleanse(ch, sizeof(ch));
            continue;
        }
        if (cs->n == LAUNCH_CANDIDATES) {
            close(cs->c[0].fd);
            memmove(cs->c, cs->c + 1, sizeof(cs->c[0]) * (LAUNCH_CANDIDATES - 1));
            cs->n--;
        }
        cs->c[cs->n].fd = fd;
        memcpy(cs->c[cs->n].challenge, ch, sizeof(ch));
        OPENSSL_cleanse(ch, sizeof(ch));
        cs->n++;
    }
}

/* The connection whose challenge is `got`, compared in constant time with
 * every one; -1 unless exactly one matches. */
static int candidates_match(const struct candidates *cs, const char *got) {
    if (!got || strlen(got) != CHALLENGE_HEX)
        return -1;
    int found = -1;
    unsigned hits = 0;
    for (size_t i = 0; i < cs->n; i++)
        if (CRYPTO_memcmp(cs->c[i].challenge, got, CHALLENGE_HEX) == 0) {
            hits++;
            found = cs->c[i].fd;
        }
    return hits == 1 ? found : -1;
}

/*
 * The launcher's exchange, one exec as the language's group with no stdin:
 * while it runs, the connections it and anything else make to the cell
 * socket are judged and sent challenges (candidates_take); its stdout is
 * read to its end, keeping only the last line (its report: a process of the
 * sandbox uid may have written before it, never after), and it must exit 0
 * with a report or 1 with an error.
 */
static int launch_exchange(struct docker_state *s, struct dsession *d, int lang, json_t **ret,
                           struct pl_error *err) {
    char user[32], eid[80], path[160];
    dk_user_spec(&s->set, lang == LANG_PY ? GID_PY : GID_JS, user);
    int fd = -1;
    if (dk_exec_start(s, d->id, user, dk_agent_cmd("launch", dk_lang_name[lang]), NULL, false, &fd,
                      eid, err) < 0)
        return -1;
    struct pl_demux dx = {.out = {.cap = 64u << 10}, .err = {.cap = 64u << 10}};
    struct pl_last_line last = {.have = false};
    struct candidates cs = {.n = 0};
    uint64_t deadline = pl_now_ns() + 30000000000ull;
    unsigned char buf[4096];
    int rc = pl_fd_set_nonblock(fd) == 0
                 ? 0
                 : pl_error_set(err, PL_REASON_INTERNAL, "the %s launcher's stream: %s",
                                dk_lang_name[lang], strerror(errno));
    bool ended = false;
    while (rc == 0 && !ended) {
        uint64_t now = pl_now_ns();
        if (now >= deadline) {
            rc = pl_error_set(err, PL_REASON_INTERNAL, "the %s launcher did not finish in 30 s",
                              dk_lang_name[lang]);
            break;
        }
        struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = d->lfd, .events = POLLIN}};
        int left_ms = (int)((deadline - now) / 1000000u) + 1;
        if (poll(pf, d->lfd >= 0 ? 2 : 1, left_ms) < 0 && errno != EINTR)
            rc = pl_error_set(err, PL_REASON_INTERNAL, "poll: %s", strerror(errno));
        if (d->lfd >= 0 && pf[1].revents)
            candidates_take(d, lang, &cs);
        if (rc < 0 || !pf[0].revents)
            continue;
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0) {
            ended = true;
            break;
        }
        if (pl_demux_feed(&dx, buf, (size_t)n) < 0) {
            rc = pl_error_set(err, PL_REASON_INTERNAL, "docker exec stream: malformed frame");
            break;
        }
        pl_last_line_feed(&last, dx.out.kept.data, dx.out.kept.len);
        dx.out.kept.len = 0;
    }
    close(fd);
    int code = -1;
    snprintf(path, sizeof(path), "/exec/%s/json", eid);
    for (int k = 0; rc == 0 && k < 100; k++) {
        json_t *ins = NULL;
        if (dk_api_expect(s, "GET", path, NULL, 200, &ins, err) < 0) {
            rc = -1;
            break;
        }
        code = pl_docker_exec_exit(ins);
        bool running = json_is_true(json_object_get(ins, "Running"));
        json_decref(ins);
        if (!running)
            break;
        usleep(10000);
    }
    json_t *j = rc == 0 ? pl_last_line_report(&last) : NULL;
    const char *why = json_string_value(json_object_get(j, "error"));
    int up = -1;
    if (rc == 0 && j && code == 1 && why)
        rc = pl_error_set(err, PL_REASON_INTERNAL, "the %s interpreter did not start: %.200s",
                          dk_lang_name[lang], why);
    else if (rc == 0 && (!j || code != 0 || why))
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the %s launcher gave no well-formed report (exit %d): %.200s",
                          dk_lang_name[lang], code, dx.err.kept.data ? dx.err.kept.data : "");
    else if (rc == 0 &&
             (up = candidates_match(&cs, json_string_value(json_object_get(j, "challenge")))) < 0)
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the %s launcher's report names no connection to the cell socket",
                          dk_lang_name[lang]);
    candidates_close(&cs, up);
    pl_demux_free(&dx);
    if (rc < 0) {
        json_decref(j);
        return -1;
    }
    d->in[lang].fd = up;
    *ret = j;
    return 0;
}

/*
 * The host's pid of the sandbox's process `pid` that started at `start`
 * (runc: the pid namespace's pid read from the host, in the container's
 * cgroup; runsc: gVisor's pids are all the host can name, so pid itself).
 * -1 when no such process is there.
 */
long dk_host_pid_of(struct docker_state *s, const struct dsession *d, long pid,
                    unsigned long long start) {
    if (s->hv.runsc)
        return pid;
    char cg[200];
    pl_hostview_cgroup(&s->hv, d->id, cg, sizeof(cg));
    pid_t *procs = NULL;
    size_t n = 0;
    long found = -1;
    if (pl_hostview_procs(&s->hv, cg, &procs, &n) == 0)
        for (size_t i = 0; i < n && found < 0; i++)
            if (pl_hostview_ns_pid(procs[i]) == pid && pl_hostview_start_time(procs[i]) == start)
                found = procs[i];
    free(procs);
    return found;
}

/* Start a language's interpreter.  Its pid and start time come from the
 * launcher, which runs no guest code; its uplink is the connection the
 * launcher greeted with (docs/sessions.md). */
int dk_launch(struct docker_state *s, struct dsession *d, int lang, struct pl_error *err) {
    json_t *j = NULL;
    dk_uplink_drop(d, lang);
    d->in[lang].up = false;
    if (d->lfd < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "the session's cell socket is not open");
    /* Connections waiting from before this launch are nobody's: close them. */
    for (int fd; (fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0;)
        close(fd);
    if (launch_exchange(s, d, lang, &j, err) < 0)
        return -1;
    json_t *pid = json_object_get(j, "pid"), *start = json_object_get(j, "start");
    if (!json_is_integer(pid) || !json_is_integer(start)) {
        pl_error_set(err, PL_REASON_INTERNAL, "the %s launcher reported no interpreter",
                     dk_lang_name[lang]);
        json_decref(j);
        dk_uplink_drop(d, lang);
        return -1;
    }
    d->in[lang].pid = (long)json_integer_value(pid);
    d->in[lang].start = (unsigned long long)json_integer_value(start);
    json_decref(j);
    d->in[lang].host_pid = dk_host_pid_of(s, d, d->in[lang].pid, d->in[lang].start);
    if (d->in[lang].host_pid < 0) {
        dk_uplink_drop(d, lang);
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the host does not see the %s interpreter the launcher reported",
                            dk_lang_name[lang]);
    }
    d->in[lang].up = true;
    dk_session_seen(d);
    d->in[lang].fresh = true;
    return 0;
}
