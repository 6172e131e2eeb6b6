/* SPDX-License-Identifier: Apache-2.0 */
/*
 * guard.c: the guard (guard.h): a TCP listener, one thread per connection
 * up to a cap, one request per connection, a token table of the runs in
 * progress.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../core/canon.h"
#include "../../core/cleanup.h"
#include "../../core/clock.h"
#include "../../core/fdio.h"
#include "../../core/ids.h"
#include "guard.h"

#define GUARD_MAX_RUNS 1024

struct admitted {
    char digest[65]; /* SHA-256 of the token: the table never holds a token */
    struct pl_broker *broker;
    unsigned inflight;
    bool used;
    /* A run's requests reach its broker one at a time, as through docker's
     * socket (the broker's call limit is checked, then counted). */
    pthread_mutex_t serial;
};

/* One source address's connections in progress. */
struct peer {
    struct peer *next;
    struct in_addr addr;
    unsigned n;
};

struct ph_guard {
    int listen_fd, stop_fd;
    unsigned port, max_connections, max_per_address, idle_timeout_ms, head_timeout_ms;
    struct peer *peers; /* lock */
    pthread_t acceptor;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned active; /* connection threads alive */
    unsigned refused;
    struct admitted runs[GUARD_MAX_RUNS];
};

struct conn {
    struct ph_guard *g;
    int fd;
    struct in_addr addr;
};

/* Count a connection from addr against its cap (lock held); false: full. */
static bool peer_take(struct ph_guard *g, struct in_addr addr) {
    struct peer *p = g->peers;
    while (p && p->addr.s_addr != addr.s_addr)
        p = p->next;
    if (p && p->n >= g->max_per_address)
        return false;
    if (!p) {
        if (!(p = calloc(1, sizeof(*p))))
            return false;
        p->addr = addr;
        p->next = g->peers;
        g->peers = p;
    }
    p->n++;
    return true;
}

static void peer_give_back(struct ph_guard *g, struct in_addr addr) {
    for (struct peer **pp = &g->peers; *pp; pp = &(*pp)->next) {
        if ((*pp)->addr.s_addr != addr.s_addr)
            continue;
        if (--(*pp)->n == 0) {
            struct peer *gone = *pp;
            *pp = gone->next;
            free(gone);
        }
        return;
    }
}

/* Whether token is an admitted run's (counted as refused when not), in
 * constant time per entry, nothing taken: the head's early check. */
static bool known(struct ph_guard *g, const char *token) {
    char digest[65];
    bool valid = strlen(token) == PH_GUARD_TOKEN_LEN &&
                 pl_sha256_hex(token, PH_GUARD_TOKEN_LEN, digest) == 0;
    bool found = false;
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; valid && i < GUARD_MAX_RUNS; i++)
        if (g->runs[i].used && CRYPTO_memcmp(g->runs[i].digest, digest, 64) == 0)
            found = true;
    if (!found)
        g->refused++;
    pthread_mutex_unlock(&g->lock);
    return found;
}

/* The guard header's value in a head (buf[0..len), its blank line
 * included) into token; "" when there is none or it is no token.  Only
 * for the early check: the request is parsed strictly afterwards, and
 * that parse's header decides. */
static void head_token(const char *buf, size_t len, char token[PH_GUARD_TOKEN_LEN + 1]) {
    static const char name[] = PH_GUARD_HEADER ":";
    const size_t nlen = sizeof(name) - 1;
    const char *end = buf + len;
    token[0] = '\0';
    const char *line = memchr(buf, '\n', len); /* past the request line */
    while (line && ++line < end) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            return;
        if ((size_t)(eol - line) > nlen && strncasecmp(line, name, nlen) == 0) {
            const char *v = line + nlen, *ve = eol;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if (ve - v == PH_GUARD_TOKEN_LEN) {
                memcpy(token, v, PH_GUARD_TOKEN_LEN);
                token[PH_GUARD_TOKEN_LEN] = '\0';
            }
            return;
        }
        line = eol;
    }
}

/* The admitted run whose token this is, its inflight count taken; NULL
 * when none.  Every entry is compared, in constant time each. */
static struct admitted *take(struct ph_guard *g, const char *token) {
    char digest[65];
    if (!token || strlen(token) != PH_GUARD_TOKEN_LEN ||
        pl_sha256_hex(token, PH_GUARD_TOKEN_LEN, digest) < 0)
        return NULL;
    struct admitted *found = NULL;
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < GUARD_MAX_RUNS; i++) {
        struct admitted *a = &g->runs[i];
        if (a->used && CRYPTO_memcmp(a->digest, digest, 64) == 0)
            found = a;
    }
    if (found)
        found->inflight++;
    else
        g->refused++;
    pthread_mutex_unlock(&g->lock);
    return found;
}

static void give_back(struct ph_guard *g, struct admitted *a) {
    pthread_mutex_lock(&g->lock);
    a->inflight--;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static void answer(struct ph_guard *g, int fd, int status, const struct pl_http_header *headers,
                   size_t nheaders, const char *body, size_t body_len) {
    struct pl_http_response r = {.status = status,
                                 .headers = (struct pl_http_header *)headers,
                                 .nheaders = nheaders,
                                 .body = body,
                                 .body_len = body_len};
    char *out = NULL;
    size_t len = 0;
    if (pl_http_format_response(&r, &out, &len) == 0)
        (void)pl_fd_write_full(fd, out, len, pl_deadline_in_ms(g->idle_timeout_ms), g->stop_fd,
                               NULL);
    free(out);
}

static void answer_error(struct ph_guard *g, int fd, int status, const char *message) {
    char body[256];
    int n = snprintf(body, sizeof(body), "{\"error\":\"%s\",\"message\":\"%s\"}",
                     pl_http_error_name(status), message);
    struct pl_http_header h[] = {{"content-type", "application/json"},
                                 {"x-plimsoll-guard", "refused"}};
    answer(g, fd, status, h, 2, body, (size_t)n);
}

/*
 * Read one whole request.  Its head must be in by the head deadline, and
 * carry the token of a run in progress (-401 otherwise, before a body
 * byte is read); the whole request by the idle deadline.  Both are
 * absolute, from the connection's start.
 */
static int read_request(struct ph_guard *g, int fd, struct pl_http_request *req) {
    size_t cap = PL_HTTP_CAP_MAX_HEAD_BYTES, len = 0;
    struct pl_http_limits lim = {0};
    pl_http_limits_effective(NULL, &lim);
    char *buf = NULL;
    uint64_t deadline = pl_deadline_in_ms(g->idle_timeout_ms);
    uint64_t head_deadline = pl_deadline_in_ms(g->head_timeout_ms);
    bool head_in = false;
    int rc = 0;
    for (;;) {
        size_t consumed = 0;
        rc = len ? pl_http_parse_request(buf, len, &lim, req, &consumed) : 0;
        if (rc != 0)
            break;
        const char *blank = buf && len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
        if (blank && !head_in) {
            head_in = true;
            char token[PH_GUARD_TOKEN_LEN + 1];
            head_token(buf, (size_t)(blank - buf) + 4, token);
            if (!known(g, token)) {
                rc = -401;
                break;
            }
        }
        size_t want = len + 16384;
        if (want > lim.max_head_bytes + lim.max_body_bytes + 16384 || want > cap + (1u << 20)) {
            rc = -413;
            break;
        }
        char *nb = realloc(buf, want);
        if (!nb) {
            rc = -500;
            break;
        }
        buf = nb;
        int w = pl_fd_wait(fd, POLLIN, head_in ? deadline : head_deadline, g->stop_fd);
        if (w < 0) {
            rc = w == -ETIMEDOUT ? -408 : -499;
            break;
        }
        ssize_t n = read(fd, buf + len, want - len);
        if (n <= 0) {
            rc = n == 0 ? -499 : (errno == EINTR || errno == EAGAIN ? 0 : -499);
            if (rc == 0)
                continue;
            break;
        }
        len += (size_t)n;
    }
    free(buf);
    return rc;
}

static void serve(struct ph_guard *g, int fd) {
    struct pl_http_request req = {0};
    int rc = read_request(g, fd, &req);
    if (rc == -499)
        return; /* the peer left, or the guard is stopping */
    if (rc == -401) {
        answer_error(g, fd, 401, "no run in progress holds this guard token");
        return;
    }
    if (rc < 0) {
        answer_error(g, fd, -rc, "the request was refused before it was read whole");
        return;
    }
    struct admitted *a = take(g, pl_http_header_get(&req, PH_GUARD_HEADER));
    if (!a) {
        answer_error(g, fd, 401, "no run in progress holds this guard token");
        pl_http_request_clear(&req);
        return;
    }
    /* The token is the guard's, never the API's: it does not travel on. */
    struct pl_http_header *fwd = calloc(req.nheaders ? req.nheaders : 1, sizeof(*fwd));
    size_t nfwd = 0;
    for (size_t i = 0; fwd && i < req.nheaders; i++)
        if (strcmp(req.headers[i].name, PH_GUARD_HEADER) != 0)
            fwd[nfwd++] = req.headers[i];
    struct pl_broker_reply reply = {0};
    if (fwd) {
        pthread_mutex_lock(&a->serial);
        pl_broker_handle(a->broker, req.method, req.target, fwd, nfwd, req.body, req.body_len,
                         &reply);
        pthread_mutex_unlock(&a->serial);
        answer(g, fd, reply.status, reply.headers, reply.nheaders, reply.body, reply.body_len);
        pl_broker_reply_clear(&reply);
    } else {
        answer_error(g, fd, 500, "out of memory");
    }
    free(fwd);
    give_back(g, a);
    pl_http_request_clear(&req);
}

static void *conn_main(void *arg) {
    struct conn *c = arg;
    struct ph_guard *g = c->g;
    serve(g, c->fd);
    close(c->fd);
    pthread_mutex_lock(&g->lock);
    peer_give_back(g, c->addr);
    free(c);
    g->active--;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

static void *accept_main(void *arg) {
    struct ph_guard *g = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = g->listen_fd, .events = POLLIN},
                              {.fd = g->stop_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        struct sockaddr_in sa;
        socklen_t sl = sizeof(sa);
        int fd = accept4(g->listen_fd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        /* Both caps are taken before a thread or a byte is spent on it:
         * one address's silent connections cannot fill the guard for
         * every other VM's grant calls. */
        pthread_mutex_lock(&g->lock);
        bool room = g->active < g->max_connections;
        bool mine = room && peer_take(g, sa.sin_addr);
        if (mine)
            g->active++;
        pthread_mutex_unlock(&g->lock);
        if (!mine) {
            answer_error(g, fd, 503,
                         room ? "this address is at the guard's per-address connection cap"
                              : "the guard is at its connection cap");
            close(fd);
            continue;
        }
        struct conn *c = malloc(sizeof(*c));
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (!c || (c->g = g, c->fd = fd, c->addr = sa.sin_addr,
                   pthread_create(&t, &attr, conn_main, c) != 0)) {
            free(c);
            close(fd);
            pthread_mutex_lock(&g->lock);
            peer_give_back(g, sa.sin_addr);
            g->active--;
            pthread_mutex_unlock(&g->lock);
        }
        pthread_attr_destroy(&attr);
    }
    return NULL;
}

/* Close and free what start made (no thread may be running). */
static void guard_free(struct ph_guard *g) {
    if (g->listen_fd >= 0)
        close(g->listen_fd);
    if (g->stop_fd >= 0)
        close(g->stop_fd);
    for (size_t i = 0; i < GUARD_MAX_RUNS; i++)
        pthread_mutex_destroy(&g->runs[i].serial);
    while (g->peers) {
        struct peer *p = g->peers;
        g->peers = p->next;
        free(p);
    }
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

static void guard_freep(struct ph_guard **g) {
    if (*g)
        guard_free(*g);
}

int ph_guard_start(const struct ph_guard_opts *o, struct ph_guard **ret, struct pl_error *err) {
    PL_CLEANUP(guard_freep) struct ph_guard *g = calloc(1, sizeof(*g));
    if (!g)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    g->listen_fd = g->stop_fd = -1;
    g->max_connections = o->max_connections ? o->max_connections : 64;
    g->max_per_address = o->max_per_address ? o->max_per_address : g->max_connections / 4;
    if (g->max_per_address == 0)
        g->max_per_address = 1;
    g->idle_timeout_ms = o->idle_timeout_ms ? o->idle_timeout_ms : 5000;
    g->head_timeout_ms = o->head_timeout_ms ? o->head_timeout_ms : 2000;
    if (g->head_timeout_ms > g->idle_timeout_ms)
        g->head_timeout_ms = g->idle_timeout_ms;
    pthread_mutex_init(&g->lock, NULL);
    pl_cond_init_monotonic(&g->cond);
    for (size_t i = 0; i < GUARD_MAX_RUNS; i++)
        pthread_mutex_init(&g->runs[i].serial, NULL);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->host, &sa.sin_addr) != 1)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "the guard's address %.64s is not IPv4",
                            o->host);
    int one = 1;
    socklen_t sl = sizeof(sa);
    if ((g->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        setsockopt(g->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(g->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(g->listen_fd, 128) < 0 || getsockname(g->listen_fd, (struct sockaddr *)&sa, &sl) < 0)
        return pl_error_errno(err, PL_REASON_INTERNAL, errno, "the guard cannot listen on %s:%u",
                              o->host, o->port);
    g->port = ntohs(sa.sin_port);
    if ((g->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0 ||
        pthread_create(&g->acceptor, NULL, accept_main, g) != 0)
        return pl_error_errno(err, PL_REASON_INTERNAL, errno, "the guard cannot start");
    *ret = PL_TAKE_PTR(g);
    return 0;
}

void ph_guard_stop(struct ph_guard *g) {
    if (!g)
        return;
    uint64_t one = 1;
    (void)!write(g->stop_fd, &one, sizeof(one));
    pthread_join(g->acceptor, NULL);
    pthread_mutex_lock(&g->lock);
    while (g->active > 0)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
    guard_free(g);
}

unsigned ph_guard_port(const struct ph_guard *g) {
    return g->port;
}

int ph_guard_admit(struct ph_guard *g, struct pl_broker *b, char *token, struct pl_error *err) {
    if (pl_random_hex(token, PH_GUARD_TOKEN_LEN + 1, PH_GUARD_TOKEN_LEN / 2) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    char digest[65];
    if (pl_sha256_hex(token, PH_GUARD_TOKEN_LEN, digest) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    int rc =
        pl_error_set(err, PL_REASON_INTERNAL, "the guard admits %d runs at most", GUARD_MAX_RUNS);
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < GUARD_MAX_RUNS; i++) {
        struct admitted *a = &g->runs[i];
        if (!a->used && a->inflight == 0) {
            memcpy(a->digest, digest, sizeof(digest));
            a->broker = b;
            a->used = true;
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&g->lock);
    if (rc == 0 && err)
        *err = (struct pl_error){0};
    return rc;
}

void ph_guard_revoke(struct ph_guard *g, const char *token) {
    char digest[65];
    if (!token || strlen(token) != PH_GUARD_TOKEN_LEN ||
        pl_sha256_hex(token, PH_GUARD_TOKEN_LEN, digest) < 0)
        return;
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < GUARD_MAX_RUNS; i++) {
        struct admitted *a = &g->runs[i];
        if (a->used && CRYPTO_memcmp(a->digest, digest, 64) == 0) {
            a->used = false; /* unknown from now on */
            while (a->inflight > 0)
                pthread_cond_wait(&g->cond, &g->lock);
            a->broker = NULL;
        }
    }
    pthread_mutex_unlock(&g->lock);
}

unsigned ph_guard_refused(const struct ph_guard *g) {
    return g->refused;
}
