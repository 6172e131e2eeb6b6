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

void dk_uplink_listen(struct dsession *d) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char path[PATH_MAX];
    uplink_path(d, path, sizeof(path));
    if (strlen(path) >= sizeof(sa.sun_path))
        return;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return;
    unlink(path);
    /* The sandbox's uid alone may connect (and the gate checks the peer). */
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        chown(path, (uid_t)d->s->set.uid, (gid_t)(d->s->set.uid + GID_RUN)) < 0 ||
        chmod(path, 0600) < 0 || listen(fd, 64) < 0) {
        close(fd);
        unlink(path);
        return;
    }
    d->lfd = fd;
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
 * After a launch: take the connection the launcher greeted with.  Every
 * connection waiting on the cell socket is judged: its peer must pass the
 * session's gate (the sandbox's cgroup) and, under runc where the peer is
 * the connecting process itself, run with the launched language's group
 * (only the launcher has it now: it ended every other process of it);
 * then its greeting must be "LANG TOKEN" with this launch's token,
 * compared in constant time.  Exactly one may match; anything else is
 * closed.  Two matches would mean the token leaked: the session ends.
 */
static int uplink_accept(struct dsession *d, int lang, const char *token, struct pl_error *err) {
    dk_uplink_drop(d, lang);
    if (d->lfd < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "the session's cell socket is not open");
    char want[128];
    int wn = snprintf(want, sizeof(want), "%s %s", dk_lang_name[lang], token);
    uint64_t deadline = pl_now_ns() + 2000000000ull;
    int found = -1;
    unsigned good = 0;
    gid_t lang_gid = (gid_t)(d->s->set.uid + (lang == LANG_PY ? GID_PY : GID_JS));
    for (;;) {
        int fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                break;
            if (good > 0 || pl_fd_wait(d->lfd, POLLIN, deadline, -1) < 0)
                break;
            continue;
        }
        struct ucred cr = {0};
        socklen_t cl = sizeof(cr);
        bool peer = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 &&
                    dk_peer_gate_check(&d->gate, fd, cr.pid, cr.uid, cr.gid) &&
                    (d->s->hv.runsc || cr.gid == lang_gid);
        unsigned char h[5];
        char got[128];
        uint32_t n = 0;
        uint64_t greet_by = pl_now_ns() + 500000000ull;
        if (peer && pl_fd_read_full(fd, h, 5, greet_by, -1) == 0 && h[0] == 'H' &&
            (n = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4]) ==
                (uint32_t)wn &&
            pl_fd_read_full(fd, got, n, greet_by, -1) == 0) {
            unsigned char diff = 0;
            for (uint32_t i = 0; i < n; i++)
                diff |= (unsigned char)(got[i] ^ want[i]);
            if (diff == 0) {
                good++;
                if (found < 0) {
                    found = fd;
                    continue;
                }
            }
        }
        close(fd); /* not the launcher: an impostor, or a second claim */
    }
    if (good == 1) {
        d->in[lang].fd = found;
        return 0;
    }
    if (found >= 0)
        close(found);
    return pl_error_set(err, PL_REASON_INTERNAL,
                        good ? "the %s interpreter's cell channel was claimed twice"
                             : "the %s interpreter's launcher did not greet the cell socket",
                        dk_lang_name[lang]);
}

/*
 * The launcher's exchange, one exec as the language's group: it says
 * "ready" once it has ended every other process of that group; only then
 * does the token go to its stdin (the exec's own stream, which nothing in
 * the sandbox can read: the launcher's group is alone and others are
 * refused its /proc).  It greets the cell socket, starts the interpreter
 * and reports one JSON line; while it waits for the end of its stdin, the
 * daemon takes the greeting (uplink_accept: its peer is the launcher,
 * alive); then the daemon closes the stream and the launcher exits 0.
 */
static int launch_exchange(struct docker_state *s, struct dsession *d, int lang, const char *token,
                           json_t **ret, struct pl_error *err) {
    char user[32], eid[80], path[160];
    dk_user_spec(&s->set, lang == LANG_PY ? GID_PY : GID_JS, user);
    int fd = -1;
    if (dk_exec_start(s, d->id, user, dk_agent_cmd("launch", dk_lang_name[lang]), NULL, true, &fd,
                      eid, err) < 0)
        return -1;
    struct pl_demux dx = {.out = {.cap = 64u << 10}, .err = {.cap = 64u << 10}};
    uint64_t deadline = pl_now_ns() + 30000000000ull;
    bool sent = false, accepted = false;
    json_t *j = NULL;
    unsigned char buf[4096];
    int rc = pl_fd_set_nonblock(fd);
    while (rc == 0) {
        int w = pl_fd_wait(fd, POLLIN, deadline, -1);
        if (w < 0) {
            rc = pl_error_set(err, PL_REASON_INTERNAL, "the %s launcher did not finish in 30 s",
                              dk_lang_name[lang]);
            break;
        }
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            break;
        if (pl_demux_feed(&dx, buf, (size_t)n) < 0) {
            rc = pl_error_set(err, PL_REASON_INTERNAL, "docker exec stream: malformed frame");
            break;
        }
        const char *o = dx.out.kept.data;
        size_t len = dx.out.kept.len;
        if (!sent && len >= 6) {
            if (memcmp(o, "ready\n", 6) != 0)
                break; /* not the launcher's first word: judged below */
            char line[80];
            int ln = snprintf(line, sizeof(line), "%s\n", token);
            size_t wrote = 0;
            if (pl_fd_write_full(fd, line, (size_t)ln, deadline, -1, &wrote) < 0) {
                rc = pl_error_set(err, PL_REASON_INTERNAL, "the %s launcher took no token",
                                  dk_lang_name[lang]);
                break;
            }
            sent = true;
        }
        if (sent && !accepted && len > 7 && o[len - 1] == '\n') {
            /* The report: exactly one line after "ready". */
            j = pl_docker_agent_report(o, len, "ready\n");
            if (!j)
                break;
            accepted = true;
            if (json_is_integer(json_object_get(j, "pid")) &&
                uplink_accept(d, lang, token, err) < 0)
                rc = -1;
            shutdown(fd, SHUT_WR); /* the launcher may go */
        }
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
    /* Nothing may follow the report, even after the greeting was taken. */
    json_t *whole = pl_docker_agent_report(dx.out.kept.data, dx.out.kept.len, "ready\n");
    bool intact = whole != NULL;
    json_decref(whole);
    if (rc == 0 && (!accepted || !j || !intact || (code != 0 && code != 1)))
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the %s launcher gave no well-formed report (exit %d): %.200s",
                          dk_lang_name[lang], code, dx.err.kept.data ? dx.err.kept.data : "");
    pl_demux_free(&dx);
    if (rc < 0) {
        dk_uplink_drop(d, lang);
        json_decref(j);
        return -1;
    }
    *ret = j;
    return 0;
}

/*
 * The host's pid of the sandbox's process `pid` that started at `start`
 * (runc: the pid namespace's pid read from the host, in the container's
 * cgroup; runsc: gVisor's pids are all the host can name, so pid itself).
 * -1 when no such process is there.
 */
static long host_pid_of(struct docker_state *s, struct dsession *d, long pid,
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
    char token[49];
    if (pl_random_hex(token, sizeof(token), 24) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness for the uplink token");
    dk_uplink_drop(d, lang);
    d->in[lang].up = false;
    /* Connections waiting from before this launch are nobody's: close them. */
    for (int fd; d->lfd >= 0 && (fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0;)
        close(fd);
    int rc = launch_exchange(s, d, lang, token, &j, err);
    if (rc < 0) {
        OPENSSL_cleanse(token, sizeof(token));
        return -1;
    }
    json_t *pid = json_object_get(j, "pid"), *start = json_object_get(j, "start");
    if (!json_is_integer(pid) || !json_is_integer(start)) {
        pl_error_set(err, PL_REASON_INTERNAL, "the %s interpreter did not start: %.200s",
                     dk_lang_name[lang], json_string_value(json_object_get(j, "error")) ?: "?");
        json_decref(j);
        OPENSSL_cleanse(token, sizeof(token));
        dk_uplink_drop(d, lang);
        return -1;
    }
    d->in[lang].pid = (long)json_integer_value(pid);
    d->in[lang].start = (unsigned long long)json_integer_value(start);
    json_decref(j);
    OPENSSL_cleanse(token, sizeof(token));
    d->in[lang].host_pid = host_pid_of(s, d, d->in[lang].pid, d->in[lang].start);
    if (d->in[lang].host_pid < 0) {
        dk_uplink_drop(d, lang);
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the host does not see the %s interpreter the launcher reported",
                            dk_lang_name[lang]);
    }
    d->in[lang].up = true;
    d->in[lang].fresh = true;
    return 0;
}
