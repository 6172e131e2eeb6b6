/* SPDX-License-Identifier: Apache-2.0 */
/*
 * front.c: the front door.  Every connection is accepted here, charged to
 * the caps (PLIMSOLL_MAX_CONNECTIONS, PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS),
 * and its first bytes read, by the read deadline, to tell HTTP/2's
 * preface, a TLS handshake and HTTP/1.1 apart; then it goes to h2.c or to
 * http1.c.  See http.h and http_int.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/fdio.h"
#include "../core/log.h"
#include "h2.h"
#include "http_int.h"
#include "tls.h"

/* A TCP address's connections in the front (sniffing or HTTP/2). */
struct peer {
    struct peer *next;
    struct sockaddr_storage addr; /* the port zeroed */
    unsigned n;
};

static int bind_tcp(const struct pl_listen *l, int *ret_fd, char *addr, size_t addrlen,
                    struct pl_error *err) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", l->port);
    int gai = getaddrinfo(l->host, port, &hints, &res);
    if (gai != 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "PLIMSOLL_LISTEN: cannot resolve %s: %s",
                            l->host, gai_strerror(gai));
    int fd = -1;
    int saved = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 256) == 0)
            break;
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "PLIMSOLL_LISTEN: cannot bind %s:%u: %s",
                            l->host, l->port, strerror(saved));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port_n = l->port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
            port_n = ntohs(in->sin_port);
            snprintf(addr, addrlen, "%s:%u", host, port_n);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
            port_n = ntohs(in6->sin6_port);
            snprintf(addr, addrlen, "[%s]:%u", host, port_n);
        }
    }
    *ret_fd = fd;
    return 0;
}

static int bind_unix(const struct pl_listen *l, int *ret_fd, struct pl_error *err) {
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, l->path, strlen(l->path) + 1);
    struct stat st;
    if (lstat(l->path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "PLIMSOLL_LISTEN: %s exists and is not a socket", l->path);
        unlink(l->path); /* a stale socket of an earlier run */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "socket: %s", strerror(errno));
    mode_t old = umask(0117); /* srw-rw---- */
    int r = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
    int saved = errno;
    umask(old);
    if (r < 0 || listen(fd, 256) < 0) {
        if (r == 0)
            saved = errno;
        close(fd);
        return pl_error_set(err, PL_REASON_INTERNAL, "PLIMSOLL_LISTEN: cannot bind %s: %s", l->path,
                            strerror(saved));
    }
    *ret_fd = fd;
    return 0;
}

/* ---- the front: accept, then HTTP/2 or HTTP/1.1 -------------------------- */

static const char H2_PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* The peer's entry (NULL for a Unix-socket peer, which has no cap), with
 * h->lock held; add creates it. */
static struct peer *peer_of(struct pl_http *h, const struct sockaddr_storage *ss, bool add) {
    if (ss->ss_family != AF_INET && ss->ss_family != AF_INET6)
        return NULL;
    struct sockaddr_storage key = *ss;
    if (key.ss_family == AF_INET)
        ((struct sockaddr_in *)&key)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&key)->sin6_port = 0;
    for (struct peer *p = h->peers; p; p = p->next)
        if (memcmp(&p->addr, &key, sizeof(key)) == 0)
            return p;
    struct peer *p = add ? calloc(1, sizeof(*p)) : NULL;
    if (p) {
        p->addr = key;
        p->next = h->peers;
        h->peers = p;
    }
    return p;
}

void pl_front_peer_release(struct pl_http *h, const struct sockaddr_storage *ss) {
    pthread_mutex_lock(&h->lock);
    struct peer *p = peer_of(h, ss, false);
    if (p && --p->n == 0) {
        struct peer **pp = &h->peers;
        while (*pp != p)
            pp = &(*pp)->next;
        *pp = p->next;
        free(p);
    }
    pthread_mutex_unlock(&h->lock);
}

struct sniff {
    struct pl_http *h;
    int fd;
    struct sockaddr_storage addr;
    socklen_t addrlen;
};

enum opening { GONE = -1, HTTP1 = 0, HTTP2 = 1, TLS = 2 };

/* What the first bytes are: HTTP/2's preface, a TLS record (when TLS is
 * on), else HTTP/1.1; GONE when the peer sent nothing by the deadline. */
static enum opening opening_of(struct pl_http *h, int fd, uint64_t deadline) {
    char buf[sizeof(H2_PREFACE) - 1];
    for (;;) {
        uint64_t now = pl_now_ns();
        if (now >= deadline)
            return GONE;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return GONE;
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return GONE;
        if (n < 0)
            continue;
        if (h->tls && buf[0] == 0x16) /* a handshake record */
            return TLS;
        if (memcmp(buf, H2_PREFACE, (size_t)n) != 0)
            return HTTP1;
        if ((size_t)n == sizeof(buf))
            return HTTP2;
        /* a prefix of the preface so far: wait for the rest */
        struct timespec pause = {.tv_nsec = 1000000};
        nanosleep(&pause, NULL);
    }
}

static bool loopback(const struct sockaddr_storage *ss) {
    if (ss->ss_family == AF_UNIX)
        return true; /* a local process the socket's mode admits */
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

/* Write all of buf to TLS by the absolute deadline, waiting in poll (the
 * socket is non-blocking). */
static int tls_write_all(SSL *ssl, int fd, const char *buf, size_t len, uint64_t deadline) {
    size_t off = 0;
    while (off < len) {
        int w = SSL_write(ssl, buf + off, (int)(len - off));
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        int e = SSL_get_error(ssl, w);
        uint64_t now = pl_now_ns();
        struct pollfd pw = {.fd = fd, .events = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN};
        if ((e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) || now >= deadline ||
            poll(&pw, 1, (int)((deadline - now) / 1000000ull) + 1) < 0)
            return -1;
    }
    return 0;
}

/*
 * HTTP/1.1 over TLS: MHD speaks plain HTTP, so this thread carries the
 * bytes between the TLS connection and one end of a socket pair whose
 * other end MHD serves (with the peer's address, so MHD's per-address cap
 * holds).  It ends when either side does: MHD's deadlines and idle timeout
 * close its end.
 */
static void pump(struct pl_http *h, SSL *ssl, int fd, const struct sniff *sn,
                 const char *fingerprint) {
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
        pl_front_peer_release(h, &sn->addr);
        return;
    }
    pl_http1_add(h, sp[1], &sn->addr, sn->addrlen, fingerprint);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    char buf[16384];
    for (;;) {
        bool buffered = SSL_pending(ssl) > 0;
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = sp[0], .events = POLLIN}};
        if (poll(p, 2, buffered ? 0 : -1) < 0 && errno != EINTR)
            break;
        if (buffered || p[0].revents) {
            int n = SSL_read(ssl, buf, sizeof(buf));
            if (n <= 0) {
                int e = SSL_get_error(ssl, n);
                if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                    break;
            } else if (pl_fd_write_full(sp[0], buf, (size_t)n,
                                        pl_now_ns() + CONNECTION_IDLE_TIMEOUT_S * 1000000000ull, -1,
                                        NULL) < 0) {
                break;
            }
        }
        if (p[1].revents) {
            ssize_t n = read(sp[0], buf, sizeof(buf));
            /* Each piece of an answer by the send deadline: a peer that
             * takes it slowly cannot keep this thread after MHD let go. */
            if (n <= 0 ||
                tls_write_all(ssl, fd, buf, (size_t)n, pl_now_ns() + pl_http_send_ns(h)) < 0)
                break;
        }
    }
    SSL_shutdown(ssl);
    close(sp[0]);
}

static void *sniff_main(void *arg) {
    struct sniff *sn = arg;
    struct pl_http *h = sn->h;
    uint64_t deadline =
        pl_now_ns() + (uint64_t)h->api->config->request_read_timeout_ms * 1000000ull;
    enum opening which = opening_of(h, sn->fd, deadline);
    if (which != TLS && which != GONE && h->tls && !loopback(&sn->addr))
        which = GONE; /* with TLS on, plain HTTP is for loopback peers alone */
    bool h2 = which == HTTP2;
    SSL *ssl = NULL;
    char fingerprint[65] = "";
    if (which == TLS && !(ssl = pl_tls_accept(h->tls, sn->fd, deadline, &h2, fingerprint)))
        which = GONE;
    pthread_mutex_lock(&h->lock);
    h->sniffing--;
    pthread_cond_broadcast(&h->sniffed);
    pthread_mutex_unlock(&h->lock);
    if (which != GONE && h2) {
        pl_h2_serve(h->h2, sn->fd, ssl, fingerprint);
        pl_front_peer_release(h, &sn->addr);
        free(sn);
        return NULL;
    }
    if (which == HTTP1) {
        pl_http1_add(h, sn->fd, &sn->addr, sn->addrlen,
                     NULL); /* its count goes back when MHD ends it */
    } else {
        if (ssl)
            pump(h, ssl, sn->fd, sn, fingerprint); /* the same, by the socket pair */
        else
            pl_front_peer_release(h, &sn->addr);
        SSL_free(ssl);
        close(sn->fd);
    }
    free(sn);
    return NULL;
}

/* Accept until quiesced.  A connection past PLIMSOLL_MAX_CONNECTIONS (all
 * of them, both protocols) or past PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS
 * (its address's, in the front: MHD keeps the count of its own) is closed
 * as it is accepted. */
static void *acceptor_main(void *arg) {
    struct pl_http *h = arg;
    const struct pl_config *cfg = h->api->config;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (;;) {
        struct pollfd p[2] = {{.fd = h->listen_fd, .events = POLLIN},
                              {.fd = h->stop_fd[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        struct sniff *sn = calloc(1, sizeof(*sn));
        if (!sn)
            continue;
        sn->h = h;
        sn->addrlen = sizeof(sn->addr);
        sn->fd = accept4(h->listen_fd, (struct sockaddr *)&sn->addr, &sn->addrlen, SOCK_CLOEXEC);
        if (sn->fd < 0) {
            free(sn);
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
                struct timespec pause = {.tv_nsec = 10 * 1000 * 1000};
                nanosleep(&pause, NULL); /* out of descriptors: let some close */
            }
            continue;
        }
        unsigned mine = pl_http1_connections(h);
        pthread_mutex_lock(&h->lock);
        unsigned all = mine + h->sniffing + pl_h2_connections(h->h2);
        struct peer *pe = peer_of(h, &sn->addr, true);
        bool over = all >= cfg->max_connections ||
                    (pe && pe->n >= cfg->max_connections_per_address) ||
                    (!pe && (sn->addr.ss_family == AF_INET || sn->addr.ss_family == AF_INET6));
        if (!over) {
            if (pe)
                pe->n++;
            h->sniffing++;
        } else if (pe && pe->n == 0) { /* an entry made for nothing */
            pe->n = 1;
            pthread_mutex_unlock(&h->lock);
            pl_front_peer_release(h, &sn->addr);
            pthread_mutex_lock(&h->lock);
        }
        pthread_mutex_unlock(&h->lock);
        if (over) {
            close(sn->fd);
            free(sn);
            continue;
        }
        pthread_t t;
        if (pthread_create(&t, &attr, sniff_main, sn) != 0) {
            pthread_mutex_lock(&h->lock);
            h->sniffing--;
            pthread_cond_broadcast(&h->sniffed);
            pthread_mutex_unlock(&h->lock);
            pl_front_peer_release(h, &sn->addr);
            close(sn->fd);
            free(sn);
        }
    }
    pthread_attr_destroy(&attr);
    return NULL;
}

static void http_free(struct pl_http *h) {
    while (h->peers) {
        struct peer *p = h->peers;
        h->peers = p->next;
        free(p);
    }
    pthread_cond_destroy(&h->sniffed);
    pthread_cond_destroy(&h->wake);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

/*
 * A freed request body must go back to the system, or the bytes-in-flight
 * bound does not bound memory: glibc raises its mmap threshold to the size
 * of each large block freed, after which 14 MiB bodies come from per-thread
 * arenas that keep them (measured: a body-refusing load peaked at 154 MiB
 * with 64 MiB in flight, 63 MiB with the threshold fixed).  Fixing it turns
 * the adjustment off: every block from 1 MiB up is its own mapping.
 */
#define LARGE_BLOCK_BYTES (1 << 20)

int pl_http_start(struct pl_api *api, struct pl_http **ret_http, struct pl_error *err) {
    mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES);
    struct pl_http *h = calloc(1, sizeof(*h));
    if (!h)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    h->api = api;
    h->listen_fd = -1;
    h->stop_fd[0] = h->stop_fd[1] = -1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->wake, &ca);
    pthread_cond_init(&h->sniffed, NULL);
    pthread_condattr_destroy(&ca);
    const struct pl_config *cfg = api->config;
    const struct pl_listen *l = &cfg->listen;
    int r;
    if (l->kind == PL_LISTEN_UNIX) {
        r = bind_unix(l, &h->listen_fd, err);
        snprintf(h->address, sizeof(h->address), "unix:%s", l->path);
        memcpy(h->unix_path, l->path, strlen(l->path) + 1);
    } else {
        r = bind_tcp(l, &h->listen_fd, h->address, sizeof(h->address), err);
    }
    if (r < 0) {
        http_free(h);
        return -1;
    }
    if (pl_http1_start(h, err) < 0) {
        close(h->listen_fd);
        h->listen_fd = -1;
        pl_http_stop(h);
        return -1;
    }
    if (cfg->tls_cert_file[0] && pl_tls_new(cfg, &h->tls, err) < 0) {
        close(h->listen_fd);
        h->listen_fd = -1;
        pl_http_stop(h);
        return -1;
    }
    if (!h->tls && l->kind != PL_LISTEN_UNIX && strncmp(h->address, "127.", 4) != 0 &&
        strncmp(h->address, "[::1]", 5) != 0)
        pl_log("warning", "plain HTTP",
               json_pack("{s:s, s:s}", "address", h->address, "detail",
                         "bound beyond loopback without TLS: bearer keys cross the network in "
                         "the clear; set PLIMSOLL_TLS_CERT_FILE and PLIMSOLL_TLS_KEY_FILE"));
    h->h2 = pl_h2_new(api, &h->in_progress, h->tls);
    if (!h->h2 || pipe2(h->stop_fd, O_CLOEXEC) < 0 ||
        pthread_create(&h->acceptor, NULL, acceptor_main, h) != 0) {
        close(h->listen_fd);
        h->listen_fd = -1;
        pl_http_stop(h);
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "PLIMSOLL_LISTEN: the HTTP server did not "
                            "start");
    }
    h->acceptor_started = true;
    *ret_http = h;
    return 0;
}

int pl_http_reload(struct pl_http *h, struct pl_error *err) {
    if (!h->tls)
        return 0;
    return pl_tls_reload(h->tls, err);
}

const char *pl_http_address(const struct pl_http *h) {
    return h->address;
}

void pl_http_quiesce(struct pl_http *h) {
    if (h && h->acceptor_started) {
        if (write(h->stop_fd[1], "q", 1) < 0) {
            /* a pipe with room for a byte: cannot fail */
        }
        pthread_join(h->acceptor, NULL);
        h->acceptor_started = false;
        close(h->listen_fd);
        h->listen_fd = -1;
    }
}

unsigned pl_http_wait_idle(struct pl_http *h, unsigned timeout_ms) {
    struct timespec tick = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
    for (unsigned waited = 0;; waited += 10) {
        unsigned n = atomic_load(&h->in_progress);
        if (n == 0 || waited >= timeout_ms)
            return n;
        nanosleep(&tick, NULL);
    }
}

void pl_http_stop(struct pl_http *h) {
    if (!h)
        return;
    pl_http_quiesce(h);
    /* The connections whose first bytes are awaited end at their deadline
     * or sooner; none is left after that. */
    pthread_mutex_lock(&h->lock);
    while (h->sniffing)
        pthread_cond_wait(&h->sniffed, &h->lock);
    pthread_mutex_unlock(&h->lock);
    pl_h2_stop(h->h2);
    h->h2 = NULL;
    pl_http1_stop(h);
    pl_tls_free(h->tls);
    if (h->listen_fd >= 0)
        close(h->listen_fd);
    for (int i = 0; i < 2; i++)
        if (h->stop_fd[i] >= 0)
            close(h->stop_fd[i]);
    if (h->unix_path[0])
        unlink(h->unix_path);
    http_free(h);
}
