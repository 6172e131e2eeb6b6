/* SPDX-License-Identifier: Apache-2.0 */
/*
 * broker_sock.c: the per-run broker socket.  See broker_sock.h.
 *
 * One thread, one connection at a time.  Every wait (accept, read, write,
 * the short drain after an error answer) is a pl_fd_wait with the stop
 * eventfd as its stop descriptor, so pl_broker_sock_stop wakes the thread
 * wherever it is, except inside the handler, which it waits for.  Every
 * connection is bounded in time by the idle timeout and in bytes by the
 * limits: the read buffer never grows past max_head_bytes + max_body_bytes.
 */
#include "broker_sock.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../core/cleanup.h"
#include "../core/clock.h"
#include "../core/fdio.h"

/* After an error answer, read and discard what the client is still sending. */
#define LINGER_NS PL_MS(1000)
#define LINGER_MAX_BYTES (4u * 1024 * 1024)
/* accept() out of fds: back off this long before trying again. */
#define ACCEPT_BACKOFF_NS PL_MS(100)
#define READ_CHUNK_MIN 4096u

struct pl_broker_sock {
    struct pl_http_limits limits;
    uint64_t idle_ns; /* per connection: reading the request, writing the answer */
    unsigned max_conn;
    pl_broker_handler_fn handler;
    pl_broker_done_fn done;
    void *userdata;
    char dir[PATH_MAX];
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int listen_fd;
    int stop_fd;
    pthread_t thread;
    atomic_uint accepted;
    atomic_uint refused;
    struct pl_broker_sock_access access;
};

/* Send all of data before deadline_ns: 0, -ECANCELED (stop) or another -errno. */
static int send_all(const struct pl_broker_sock *s, int fd, const char *data, size_t len,
                    uint64_t deadline_ns) {
    return pl_fd_write_full(fd, data, len, deadline_ns, s->stop_fd, NULL);
}

/* Answer status with the broker's JSON error body.  Best effort. */
static void send_error(const struct pl_broker_sock *s, int fd, int status, const char *message) {
    char *out = NULL;
    size_t len = 0;
    if (pl_http_format_error(status, message, &out, &len) < 0)
        return;
    send_all(s, fd, out, len, pl_now_ns() + s->idle_ns);
    free(out);
}

/*
 * After an error answer the client may still be writing (a body we refused
 * from its Content-Length); closing at once would turn our answer into
 * EPIPE/ECONNRESET on its side.  Read and drop, briefly and boundedly.
 */
static void linger_drain(const struct pl_broker_sock *s, int fd) {
    shutdown(fd, SHUT_WR);
    uint64_t deadline = pl_now_ns() + (s->idle_ns < LINGER_NS ? s->idle_ns : LINGER_NS);
    size_t total = 0;
    char sink[16384];
    while (total < LINGER_MAX_BYTES) {
        if (pl_fd_wait(fd, POLLIN, deadline, s->stop_fd) < 0)
            return;
        ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
            return;
        if (n > 0)
            total += (size_t)n;
    }
}

/*
 * Read until buf holds a complete request.  Returns 1 with *req filled, a
 * negative HTTP status to answer (with *ret_msg), or 0 when the connection
 * is to be closed without an answer (peer gone, I/O error, stop).
 */
static int read_request(struct pl_broker_sock *s, int fd, struct pl_http_request *req,
                        const char **ret_msg, bool *ret_stopped) {
    size_t max = s->limits.max_head_bytes + s->limits.max_body_bytes;
    char *buf = NULL;
    size_t cap = 0, len = 0;
    bool sent_continue = false, reparse = true;
    struct pl_http_parse_info info = {0};
    uint64_t deadline = pl_now_ns() + s->idle_ns;
    int rc;
    for (;;) {
        if (reparse) {
            size_t used;
            rc = pl_http_parse_request_ex(buf, len, &s->limits, req, &used, &info);
            if (rc != 0) {
                *ret_msg = info.error;
                break;
            }
            if (info.expect_continue && info.head_complete && !sent_continue) {
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                if (send_all(s, fd, cont, sizeof(cont) - 1, deadline) < 0) {
                    rc = 0;
                    break;
                }
                sent_continue = true;
            }
        }
        if (len >= max) { /* unreachable: the parser decides before this */
            rc = -431;
            *ret_msg = "request larger than the limits";
            break;
        }
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : READ_CHUNK_MIN;
            if (info.head_complete && info.request_len > ncap)
                ncap = info.request_len;
            if (ncap > max)
                ncap = max;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                rc = -500;
                *ret_msg = "out of memory";
                break;
            }
            buf = nb;
            cap = ncap;
        }
        int w = pl_fd_wait(fd, POLLIN, deadline, s->stop_fd);
        if (w == -ETIMEDOUT) {
            rc = -408;
            *ret_msg = "no complete request within the idle timeout";
            break;
        }
        if (w < 0) {
            *ret_stopped = w == -ECANCELED;
            rc = 0;
            break;
        }
        ssize_t n = recv(fd, buf + len, cap - len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
            reparse = false;
            continue;
        }
        if (n < 0 || (n == 0 && len == 0)) {
            rc = 0;
            break;
        }
        if (n == 0) {
            rc = -400;
            *ret_msg = "connection closed before the request was complete";
            break;
        }
        /* Parse again only when it can change the answer. */
        if (info.head_complete)
            reparse = len + (size_t)n >= info.request_len;
        else
            reparse = memchr(buf + len, '\n', (size_t)n) != NULL ||
                      len + (size_t)n >= s->limits.max_head_bytes;
        len += (size_t)n;
    }
    free(buf);
    return rc;
}

static void serve(struct pl_broker_sock *s, int fd, bool *ret_stopped) {
    struct pl_http_request req = {0};
    const char *msg = NULL;
    int rc = read_request(s, fd, &req, &msg, ret_stopped);
    if (rc == 0)
        return;
    if (rc < 0) {
        send_error(s, fd, -rc, msg);
        if (rc != -408 && rc != -500)
            linger_drain(s, fd);
        return;
    }
    struct pl_http_response resp = {0};
    s->handler(s->userdata, &req, &resp);
    char *out = NULL;
    size_t len = 0;
    if (pl_http_format_response(&resp, &out, &len) < 0) {
        send_error(s, fd, 500, "the broker produced an invalid response");
    } else {
        size_t n = len;
        if (strcmp(req.method, "HEAD") == 0)
            n -= resp.body_len;
        if (send_all(s, fd, out, n, pl_now_ns() + s->idle_ns) == -ECANCELED)
            *ret_stopped = true;
        free(out);
    }
    if (s->done)
        s->done(s->userdata, &resp);
    pl_http_request_clear(&req);
    shutdown(fd, SHUT_WR);
}

static void *server_main(void *arg) {
    struct pl_broker_sock *s = arg;
    for (;;) {
        if (pl_fd_wait(s->listen_fd, POLLIN, 0, s->stop_fd) < 0)
            break; /* stopped (or the listen socket is gone) */
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if ((errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) &&
                pl_fd_wait(s->stop_fd, POLLIN, pl_now_ns() + ACCEPT_BACKOFF_NS, -1) == 0)
                break;
            continue;
        }
        if (s->access.peer_ok) {
            /* The peer is judged before a byte is read from it. */
            struct ucred cr = {0};
            socklen_t cl = sizeof(cr);
            if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
                !s->access.peer_ok(s->access.peer_userdata, fd, cr.pid, cr.uid, cr.gid)) {
                atomic_fetch_add(&s->refused, 1);
                close(fd);
                continue;
            }
        }
        unsigned n = atomic_fetch_add(&s->accepted, 1) + 1;
        bool stopped = false;
        if (n > s->max_conn) {
            send_error(s, fd, 429, "this run's broker connection limit is reached");
            shutdown(fd, SHUT_WR);
        } else {
            serve(s, fd, &stopped);
        }
        close(fd);
        if (stopped)
            break;
    }
    return NULL;
}

/* Keep the negative errno rc in err beside the message just set; returns rc. */
static int with_errno(struct pl_error *err, int rc) {
    if (err)
        err->errnum = -rc;
    return rc;
}

/* One path component, not "." or "..". */
static bool name_ok(const char *n) {
    return n && n[0] && !strchr(n, '/') && strcmp(n, ".") != 0 && strcmp(n, "..") != 0;
}

/* What pl_broker_sock_start made before a step failed, undone when it
 * returns early (s is NULL once the socket is handed to the caller). */
struct start_undo {
    struct pl_broker_sock *s;
    bool made_dir, bound;
};

static void start_undo_end(struct start_undo *u) {
    struct pl_broker_sock *s = u->s;
    if (!s)
        return;
    int saved = errno;
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (u->bound)
        unlink(s->path);
    if (u->made_dir)
        rmdir(s->dir);
    free(s);
    errno = saved;
}

/* A start step that failed with errnum (positive) on path (or none): err
 * says which; -errnum. */
static int start_failed(struct pl_error *err, int errnum, const char *step, const char *path) {
    pl_error_errno(err, PL_REASON_INTERNAL, errnum, "broker socket: %s%s%s", step, path ? " " : "",
                   path ? path : "");
    return -errnum;
}

int pl_broker_sock_start(const struct pl_broker_sock_opts *opts, struct pl_broker_sock **ret,
                         struct pl_error *err) {
    const enum pl_reason internal = PL_REASON_INTERNAL;
    if (!opts || !ret || !opts->handler || !opts->dir || !opts->dir[0]) {
        pl_error_set(err, internal, "broker socket: dir and handler are required");
        return with_errno(err, -EINVAL);
    }
    if (!name_ok(opts->sock_name)) {
        pl_error_set(err, internal, "broker socket: sock_name must be one path component");
        return with_errno(err, -EINVAL);
    }
    const struct pl_http_limits *l = &opts->limits;
    if (l->max_head_bytes > PL_HTTP_CAP_MAX_HEAD_BYTES ||
        l->max_headers > PL_HTTP_CAP_MAX_HEADERS ||
        l->max_body_bytes > PL_HTTP_CAP_MAX_BODY_BYTES) {
        pl_error_set(err, internal,
                     "broker socket: limits above the ceilings (head %u, headers %u, body %u)",
                     PL_HTTP_CAP_MAX_HEAD_BYTES, PL_HTTP_CAP_MAX_HEADERS,
                     PL_HTTP_CAP_MAX_BODY_BYTES);
        return with_errno(err, -EINVAL);
    }
    if (opts->idle_timeout_ms > PL_BROKER_MAX_IDLE_TIMEOUT_MS) {
        pl_error_set(err, internal, "broker socket: idle_timeout_ms above %u",
                     PL_BROKER_MAX_IDLE_TIMEOUT_MS);
        return with_errno(err, -EINVAL);
    }
    struct pl_broker_sock *s = calloc(1, sizeof(*s));
    if (!s) {
        pl_error_set(err, internal, "broker socket: out of memory");
        return with_errno(err, -ENOMEM);
    }
    s->listen_fd = s->stop_fd = -1;
    pl_http_limits_effective(l, &s->limits);
    s->idle_ns =
        PL_MS(opts->idle_timeout_ms ? opts->idle_timeout_ms : PL_BROKER_DEFAULT_IDLE_TIMEOUT_MS);
    s->max_conn = opts->max_connections ? opts->max_connections : PL_BROKER_DEFAULT_MAX_CONNECTIONS;
    s->handler = opts->handler;
    s->done = opts->done;
    s->userdata = opts->userdata;
    s->access = opts->access;
    int n1 = snprintf(s->dir, sizeof(s->dir), "%s", opts->dir);
    int n2 = snprintf(s->path, sizeof(s->path), "%s/%s", opts->dir, opts->sock_name);
    if (n1 < 0 || (size_t)n1 >= sizeof(s->dir) || n2 < 0 || (size_t)n2 >= sizeof(s->path)) {
        pl_error_set(err, internal, "broker socket: path longer than %zu bytes: %s/%s",
                     sizeof(s->path) - 1, opts->dir, opts->sock_name);
        free(s);
        return with_errno(err, -ENAMETOOLONG);
    }
    PL_GUARD(start_undo_end) struct start_undo undo = {.s = s};
    if (mkdir(s->dir, 0700) < 0)
        return start_failed(err, errno, "mkdir", s->dir);
    undo.made_dir = true;
    /* Root's alone until the socket has its final owner and mode (below). */
    if (chmod(s->dir, 0700) < 0)
        return start_failed(err, errno, "chown/chmod", s->dir);
    s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->listen_fd < 0)
        return start_failed(err, errno, "socket", NULL);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, s->path, (size_t)n2 + 1);
    if (bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return start_failed(err, errno, "bind", s->path);
    undo.bound = true;
    /* The sandbox's uid alone may connect (with access set); without it,
     * anyone.  The directory is still 0700 here, so nobody connects before
     * the socket has its final owner and mode. */
    if ((s->access.set ? (chown(s->path, s->access.sock_uid, s->access.sock_gid) < 0 ||
                          chmod(s->path, 0600) < 0)
                       : chmod(s->path, 0666) < 0) ||
        listen(s->listen_fd, 64) < 0)
        return start_failed(err, errno, "chmod/listen", s->path);
    /* Now the directory: traverse-only for the sandbox's uid (nothing to
     * list, nothing to create), or open to all without access set. */
    if ((s->access.set && chown(s->dir, s->access.sock_uid, s->access.sock_gid) < 0) ||
        chmod(s->dir, s->access.set ? 0100 : 0755) < 0)
        return start_failed(err, errno, "chown/chmod", s->dir);
    s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->stop_fd < 0)
        return start_failed(err, errno, "eventfd", NULL);
    /* The server thread takes no signals: the daemon's handlers run elsewhere. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&s->thread, NULL, server_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0)
        return start_failed(err, e, "pthread_create", NULL);
    *ret = PL_TAKE_PTR(undo.s);
    return 0;
}

void pl_broker_sock_stop(struct pl_broker_sock *s) {
    if (!s)
        return;
    uint64_t one = 1;
    while (write(s->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
    pthread_join(s->thread, NULL);
    close(s->stop_fd);
    close(s->listen_fd);
    unlink(s->path);
    rmdir(s->dir);
    free(s);
}

const char *pl_broker_sock_path(const struct pl_broker_sock *s) {
    return s ? s->path : NULL;
}

unsigned pl_broker_sock_connections(const struct pl_broker_sock *s) {
    return s ? atomic_load(&s->accepted) : 0;
}

unsigned pl_broker_sock_refused(const struct pl_broker_sock *s) {
    return s ? atomic_load(&s->refused) : 0;
}
