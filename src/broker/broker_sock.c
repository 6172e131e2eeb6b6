/*
 * broker_sock.c: the per-run broker socket.  See broker_sock.h.
 *
 * One thread, one connection at a time.  Every wait (accept, read, write,
 * the short drain after an error answer) is a poll that also watches the
 * stop eventfd, so pl_broker_sock_stop wakes the thread wherever it is,
 * except inside the handler, which it waits for.  Every connection is
 * bounded in time by the idle timeout and in bytes by the limits: the read
 * buffer never grows past max_head_bytes + max_body_bytes.
 */
#include "broker_sock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* After an error answer, read and discard what the client is still sending. */
#define LINGER_MS 1000u
#define LINGER_MAX_BYTES (4u * 1024 * 1024)
/* accept() out of fds: back off this long before trying again. */
#define ACCEPT_BACKOFF_MS 100
#define READ_CHUNK_MIN 4096u

struct pl_broker_sock {
    struct pl_http_limits limits;
    unsigned idle_ms;
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

/* What waiting on a connection can end in. */
enum { WAIT_READY = 1, WAIT_TIMEOUT = 0, WAIT_STOP = -1, WAIT_ERROR = -2 };

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int seterr(char *errbuf, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int seterr(char *errbuf, size_t errlen, int rc, const char *fmt, ...) {
    if (errbuf && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Wait for events on fd until deadline (ms, CLOCK_MONOTONIC), or for stop. */
static int wait_fd(const struct pl_broker_sock *s, int fd, short events, uint64_t deadline) {
    for (;;) {
        uint64_t now = now_ms();
        int timeout = now >= deadline ? 0 : (int)(deadline - now);
        struct pollfd p[2] = {{.fd = s->stop_fd, .events = POLLIN}, {.fd = fd, .events = events}};
        int r = poll(p, 2, timeout);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return WAIT_ERROR;
        }
        if (p[0].revents)
            return WAIT_STOP;
        if (p[1].revents & (events | POLLHUP | POLLERR))
            return WAIT_READY;
        if (r == 0 && now_ms() >= deadline)
            return WAIT_TIMEOUT;
    }
}

/* Send all of data before deadline.  Returns 0, or WAIT_TIMEOUT/STOP/ERROR. */
static int send_all(const struct pl_broker_sock *s, int fd, const char *data, size_t len,
                    uint64_t deadline) {
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, data + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return WAIT_ERROR;
        int w = wait_fd(s, fd, POLLOUT, deadline);
        if (w != WAIT_READY)
            return w == WAIT_TIMEOUT ? WAIT_ERROR : w;
    }
    return 0;
}

/* Append s as a JSON string body (quotes included) to out[cap] at *pos. */
static void json_string(char *out, size_t cap, size_t *pos, const char *str) {
    static const char hex[] = "0123456789abcdef";
    if (*pos + 1 < cap)
        out[(*pos)++] = '"';
    for (const unsigned char *p = (const unsigned char *)str; *p && *pos + 7 < cap; p++) {
        if (*p == '"' || *p == '\\') {
            out[(*pos)++] = '\\';
            out[(*pos)++] = (char)*p;
        } else if (*p < 0x20 || *p >= 0x7f) {
            memcpy(out + *pos, "\\u00", 4);
            out[*pos + 4] = hex[*p >> 4];
            out[*pos + 5] = hex[*p & 15];
            *pos += 6;
        } else {
            out[(*pos)++] = (char)*p;
        }
    }
    if (*pos + 1 < cap)
        out[(*pos)++] = '"';
    out[*pos] = '\0';
}

/* Answer status with the broker's JSON error body.  Best effort. */
static void send_error(const struct pl_broker_sock *s, int fd, int status, const char *message) {
    char body[512];
    size_t pos = 0;
    memcpy(body, "{\"error\":", 9);
    pos = 9;
    json_string(body, sizeof(body) - 16, &pos, pl_http_error_name(status));
    memcpy(body + pos, ",\"message\":", 11);
    pos += 11;
    json_string(body, sizeof(body) - 2, &pos, message ? message : pl_http_reason(status));
    body[pos++] = '}';
    body[pos] = '\0';
    struct pl_http_header ct = {.name = "Content-Type", .value = "application/json"};
    struct pl_http_response resp = {
        .status = status, .headers = &ct, .nheaders = 1, .body = body, .body_len = pos};
    char *out = NULL;
    size_t len = 0;
    if (pl_http_format_response(&resp, &out, &len) < 0)
        return;
    send_all(s, fd, out, len, now_ms() + s->idle_ms);
    free(out);
}

/*
 * After an error answer the client may still be writing (a body we refused
 * from its Content-Length); closing at once would turn our answer into
 * EPIPE/ECONNRESET on its side.  Read and drop, briefly and boundedly.
 */
static void linger_drain(const struct pl_broker_sock *s, int fd) {
    shutdown(fd, SHUT_WR);
    uint64_t deadline = now_ms() + (s->idle_ms < LINGER_MS ? s->idle_ms : LINGER_MS);
    size_t total = 0;
    char sink[16384];
    while (total < LINGER_MAX_BYTES) {
        if (wait_fd(s, fd, POLLIN, deadline) != WAIT_READY)
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
    uint64_t deadline = now_ms() + s->idle_ms;
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
        int w = wait_fd(s, fd, POLLIN, deadline);
        if (w == WAIT_TIMEOUT) {
            rc = -408;
            *ret_msg = "no complete request within the idle timeout";
            break;
        }
        if (w != WAIT_READY) {
            *ret_stopped = w == WAIT_STOP;
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
        if (send_all(s, fd, out, n, now_ms() + s->idle_ms) == WAIT_STOP)
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
        struct pollfd p[2] = {{.fd = s->stop_fd, .events = POLLIN},
                              {.fd = s->listen_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents)
            break;
        if (!(p[1].revents & POLLIN))
            continue;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                struct pollfd q = {.fd = s->stop_fd, .events = POLLIN};
                if (poll(&q, 1, ACCEPT_BACKOFF_MS) > 0)
                    break;
            }
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

/* One path component, not "." or "..". */
static bool name_ok(const char *n) {
    return n && n[0] && !strchr(n, '/') && strcmp(n, ".") != 0 && strcmp(n, "..") != 0;
}

int pl_broker_sock_start(const struct pl_broker_sock_opts *opts, struct pl_broker_sock **ret,
                         char *errbuf, size_t errlen) {
    if (!opts || !ret || !opts->handler || !opts->dir || !opts->dir[0])
        return seterr(errbuf, errlen, -EINVAL, "broker socket: dir and handler are required");
    if (!name_ok(opts->sock_name))
        return seterr(errbuf, errlen, -EINVAL,
                      "broker socket: sock_name must be one path component");
    const struct pl_http_limits *l = &opts->limits;
    if (l->max_head_bytes > PL_HTTP_CAP_MAX_HEAD_BYTES ||
        l->max_headers > PL_HTTP_CAP_MAX_HEADERS || l->max_body_bytes > PL_HTTP_CAP_MAX_BODY_BYTES)
        return seterr(errbuf, errlen, -EINVAL,
                      "broker socket: limits above the ceilings (head %u, headers %u, body %u)",
                      PL_HTTP_CAP_MAX_HEAD_BYTES, PL_HTTP_CAP_MAX_HEADERS,
                      PL_HTTP_CAP_MAX_BODY_BYTES);
    if (opts->idle_timeout_ms > PL_BROKER_MAX_IDLE_TIMEOUT_MS)
        return seterr(errbuf, errlen, -EINVAL, "broker socket: idle_timeout_ms above %u",
                      PL_BROKER_MAX_IDLE_TIMEOUT_MS);
    struct pl_broker_sock *s = calloc(1, sizeof(*s));
    if (!s)
        return seterr(errbuf, errlen, -ENOMEM, "broker socket: out of memory");
    s->listen_fd = s->stop_fd = -1;
    pl_http_limits_effective(l, &s->limits);
    s->idle_ms = opts->idle_timeout_ms ? opts->idle_timeout_ms : PL_BROKER_DEFAULT_IDLE_TIMEOUT_MS;
    s->max_conn = opts->max_connections ? opts->max_connections : PL_BROKER_DEFAULT_MAX_CONNECTIONS;
    s->handler = opts->handler;
    s->done = opts->done;
    s->userdata = opts->userdata;
    s->access = opts->access;
    int n1 = snprintf(s->dir, sizeof(s->dir), "%s", opts->dir);
    int n2 = snprintf(s->path, sizeof(s->path), "%s/%s", opts->dir, opts->sock_name);
    if (n1 < 0 || (size_t)n1 >= sizeof(s->dir) || n2 < 0 || (size_t)n2 >= sizeof(s->path)) {
        free(s);
        return seterr(errbuf, errlen, -ENAMETOOLONG,
                      "broker socket: path longer than %zu bytes: %s/%s", sizeof(s->path) - 1,
                      opts->dir, opts->sock_name);
    }
    int rc;
    bool made_dir = false, bound = false;
    if (mkdir(s->dir, 0700) < 0) {
        rc = seterr(errbuf, errlen, -errno, "broker socket: mkdir %s: %s", s->dir, strerror(errno));
        goto fail;
    }
    made_dir = true;
    /* Root's alone until the socket has its final owner and mode (below). */
    if (chmod(s->dir, 0700) < 0) {
        rc = seterr(errbuf, errlen, -errno, "broker socket: chown/chmod %s: %s", s->dir,
                    strerror(errno));
        goto fail;
    }
    s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->listen_fd < 0) {
        rc = seterr(errbuf, errlen, -errno, "broker socket: socket: %s", strerror(errno));
        goto fail;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, s->path, (size_t)n2 + 1);
    if (bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        rc = seterr(errbuf, errlen, -errno, "broker socket: bind %s: %s", s->path, strerror(errno));
        goto fail;
    }
    bound = true;
    /* The sandbox's uid alone may connect (with access set); without it,
     * anyone.  The directory is still 0700 here, so nobody connects before
     * the socket has its final owner and mode. */
    if ((s->access.set ? (chown(s->path, s->access.sock_uid, s->access.sock_gid) < 0 ||
                          chmod(s->path, 0600) < 0)
                       : chmod(s->path, 0666) < 0) ||
        listen(s->listen_fd, 64) < 0) {
        rc = seterr(errbuf, errlen, -errno, "broker socket: chmod/listen %s: %s", s->path,
                    strerror(errno));
        goto fail;
    }
    /* Now the directory: traverse-only for the sandbox's uid (nothing to
     * list, nothing to create), or open to all without access set. */
    if ((s->access.set && chown(s->dir, s->access.sock_uid, s->access.sock_gid) < 0) ||
        chmod(s->dir, s->access.set ? 0100 : 0755) < 0) {
        rc = seterr(errbuf, errlen, -errno, "broker socket: chown/chmod %s: %s", s->dir,
                    strerror(errno));
        goto fail;
    }
    s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->stop_fd < 0) {
        rc = seterr(errbuf, errlen, -errno, "broker socket: eventfd: %s", strerror(errno));
        goto fail;
    }
    /* The server thread takes no signals: the daemon's handlers run elsewhere. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&s->thread, NULL, server_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        rc = seterr(errbuf, errlen, -e, "broker socket: pthread_create: %s", strerror(e));
        goto fail;
    }
    *ret = s;
    return 0;
fail:
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (bound)
        unlink(s->path);
    if (made_dir)
        rmdir(s->dir);
    free(s);
    return rc;
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
