/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.c: libmicrohttpd glue.  See http.h.
 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
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

#include "../core/buf.h"
#include "../core/clock.h"
#include "../core/fdio.h"
#include "../core/log.h"
#include "h2.h"
#include "tls.h"

/*
 * MHD's own timeout is idle-based: a byte every so often keeps a
 * connection forever.  This is for a connection that sent nothing at all,
 * and for an answer the client reads slowly; the absolute deadline on
 * reading a request is PLIMSOLL_REQUEST_READ_TIMEOUT_MS (the watchdog).
 */
#define CONNECTION_IDLE_TIMEOUT_S 120

/* One open connection, for the read deadline. */
struct conn {
    struct conn *prev, *next;
    char fingerprint[65]; /* its TLS client certificate's (tls.h), or "" */
    int fd;
    uint64_t since_ns;    /* when reading its current request began */
    bool reading;         /* its head or body is being read: the deadline runs */
    uint64_t send_due_ns; /* its answer is being sent and must be by then; 0: none */
    bool cut;             /* the watchdog shut it down */
};

struct pl_http {
    struct pl_api *api;
    atomic_uint in_progress; /* requests read but whose answer is not yet sent */
    struct MHD_Daemon *daemon;
    int listen_fd;
    char address[160];
    char unix_path[108];

    /* The read deadline: every open connection, and the thread that cuts
     * the ones still reading past it. */
    pthread_mutex_t lock; /* conns and every conn's fields, stopping */
    pthread_cond_t wake;
    pthread_cond_t sniffed; /* a sniffing connection was handed on */
    struct conn *conns;
    bool stopping;
    bool watchdog_started;
    pthread_t watchdog;

    /* The front: every connection is accepted here, and the ones that open
     * with HTTP/2's preface go to h2.c; the others to MHD. */
    struct pl_h2 *h2;
    struct pl_tls *tls; /* NULL: plain HTTP */
    int stop_fd[2];     /* the acceptor's wake-up at quiesce */
    bool acceptor_started;
    pthread_t acceptor;
    unsigned sniffing;  /* connections whose first bytes are awaited (lock) */
    struct peer *peers; /* per-address counts of sniffing and HTTP/2 (lock) */
};

/* A TCP address's connections in the front (sniffing or HTTP/2). */
struct peer {
    struct peer *next;
    struct sockaddr_storage addr; /* the port zeroed */
    unsigned n;
};

struct call_ctx {
    struct pl_api_call *call; /* what the head decided; NULL when answered at the head */
    struct pl_buf body;
    bool too_large;
    /* Answered at the head, the answer waiting while a small body is read
     * and dropped (PL_HTTP_DRAIN_BYTES). */
    bool draining;
    struct pl_api_response early;
};

/*
 * A body of at most this many bytes is read and dropped after a refusal at
 * the head, and the answer sent then, on a connection kept alive: closing
 * with a body unread resets the connection, and a caller still writing its
 * body would see that reset (EPIPE) instead of the refusal.  A body
 * announced larger is never read: the answer goes at once and the
 * connection closes.  A chunked body is read to its end whatever its size
 * (libmicrohttpd cannot answer in the middle of one), as a too-large body
 * of a call is; the read deadline (PLIMSOLL_REQUEST_READ_TIMEOUT_MS) bounds
 * both.
 */
#define PL_HTTP_DRAIN_BYTES 16384

/* ---- the read deadline ---------------------------------------------------- */

/*
 * MHD calls this from its accepting thread when a connection opens, and
 * before it closes the fd when the connection ends: a conn is in the list
 * exactly while its fd is open, so the watchdog never shuts down an fd
 * that was closed and reused.
 */
/*
 * The client certificates of TLS connections being handed to MHD (over a
 * socket pair, pump() below), by MHD's end of the pair: its descriptor and
 * its socket's inode, so a descriptor number closed and reused can never
 * take another connection's certificate.  Each is taken once, when MHD
 * starts the connection, and lives in that connection's struct conn
 * after; each request asks the current file whose it is (tls.h).
 */
struct handing {
    struct handing *next;
    int fd;
    ino_t ino;
    char fingerprint[65];
};
static pthread_mutex_t handing_lock = PTHREAD_MUTEX_INITIALIZER;
static struct handing *handings;

static void take_fingerprint(int fd, char fingerprint[65]) {
    fingerprint[0] = '\0';
    struct stat st;
    if (fstat(fd, &st) < 0)
        return;
    pthread_mutex_lock(&handing_lock);
    for (struct handing **p = &handings; *p; p = &(*p)->next)
        if ((*p)->fd == fd) {
            struct handing *gone = *p;
            if (gone->ino == st.st_ino)
                memcpy(fingerprint, gone->fingerprint, 65);
            *p = gone->next;
            free(gone);
            break;
        }
    pthread_mutex_unlock(&handing_lock);
}

static void peer_release(struct pl_http *h, const struct sockaddr_storage *ss);

/* An HTTP/1.1 connection MHD ends gives its address's count back: the
 * acceptor counted it when it took it (the per-address cap is one count
 * for every protocol). */
static void release_mhd_peer(struct pl_http *h, struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ai || !ai->client_addr)
        return;
    struct sockaddr_storage ss = {0};
    size_t n = ai->client_addr->sa_family == AF_INET    ? sizeof(struct sockaddr_in)
               : ai->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                        : 0;
    if (!n)
        return;
    memcpy(&ss, ai->client_addr, n);
    peer_release(h, &ss);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    struct pl_http *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct conn *k = ci ? calloc(1, sizeof(*k)) : NULL;
        if (!k) {
            /* Untracked, it would have no deadline: end it at once. */
            if (ci)
                shutdown(ci->connect_fd, SHUT_RDWR);
            release_mhd_peer(h, c);
            *socket_context = NULL;
            return;
        }
        k->fd = ci->connect_fd;
        take_fingerprint(k->fd, k->fingerprint);
        k->since_ns = pl_now_ns();
        k->reading = true;
        pthread_mutex_lock(&h->lock);
        k->next = h->conns;
        if (h->conns)
            h->conns->prev = k;
        h->conns = k;
        pthread_mutex_unlock(&h->lock);
        *socket_context = k;
        return;
    }
    struct conn *k = *socket_context;
    if (!k)
        return;
    release_mhd_peer(h, c);
    pthread_mutex_lock(&h->lock);
    if (k->prev)
        k->prev->next = k->next;
    else
        h->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    pthread_mutex_unlock(&h->lock);
    free(k);
    *socket_context = NULL;
}

static struct conn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* The request is read (or answered from its head): its clock stops.
 * Returns false when the watchdog cut the connection first. */
static bool clock_stop(struct pl_http *h, struct MHD_Connection *c) {
    struct conn *k = conn_of(c);
    if (!k)
        return false;
    pthread_mutex_lock(&h->lock);
    bool alive = !k->cut;
    k->reading = false;
    pthread_mutex_unlock(&h->lock);
    return alive;
}

/* The answer is sent: the clock runs again for the next request. */
static void clock_restart(struct pl_http *h, struct MHD_Connection *c) {
    struct conn *k = conn_of(c);
    if (!k)
        return;
    pthread_mutex_lock(&h->lock);
    k->reading = true;
    k->since_ns = pl_now_ns();
    k->send_due_ns = 0;
    pthread_mutex_unlock(&h->lock);
}

/* An answer is queued: it must be sent within within_ns, an absolute
 * deadline no byte either way moves (past it the watchdog ends the
 * connection and the answer is freed). */
static void send_clock(struct pl_http *h, struct MHD_Connection *c, uint64_t within_ns) {
    struct conn *k = conn_of(c);
    if (!k)
        return;
    pthread_mutex_lock(&h->lock);
    k->send_due_ns = pl_now_ns() + within_ns;
    pthread_mutex_unlock(&h->lock);
}

static uint64_t send_ns(const struct pl_http *h) {
    return (uint64_t)h->api->config->answer_send_timeout_ms * 1000000ull;
}

/*
 * Shut down every connection still reading its request past the read
 * deadline, or still sending an answer past its send deadline.
 * shutdown() wakes the connection's thread, which finds the end of its
 * input and closes; a run in progress is never touched (its connection is
 * neither reading nor sending).  Logged at most once a second, with the
 * count.
 */
static void *watchdog_main(void *arg) {
    struct pl_http *h = arg;
    uint64_t deadline = (uint64_t)h->api->config->request_read_timeout_ms * 1000000ull;
    uint64_t tick = (deadline < send_ns(h) ? deadline : send_ns(h)) / 10;
    if (tick < 10000000ull)
        tick = 10000000ull;
    if (tick > 250000000ull)
        tick = 250000000ull;
    unsigned long pending = 0, pending_send = 0;
    uint64_t last_log = 0;
    pthread_mutex_lock(&h->lock);
    while (!h->stopping) {
        uint64_t now = pl_now_ns();
        for (struct conn *k = h->conns; k; k = k->next) {
            if (k->cut)
                continue;
            bool late_read = k->reading && now - k->since_ns >= deadline;
            bool late_send = k->send_due_ns && now >= k->send_due_ns;
            if (late_read || late_send) {
                shutdown(k->fd, SHUT_RDWR);
                k->cut = true;
                if (late_read)
                    pending++;
                else
                    pending_send++;
            }
        }
        if ((pending || pending_send) && now - last_log >= 1000000000ull) {
            unsigned long n = pending, ns = pending_send;
            pending = pending_send = 0;
            last_log = now;
            pthread_mutex_unlock(&h->lock);
            if (n)
                pl_log("info", "read deadline",
                       json_pack("{s:i, s:i}", "connections_cut", (json_int_t)n,
                                 "request_read_timeout_ms",
                                 (json_int_t)h->api->config->request_read_timeout_ms));
            if (ns)
                pl_log("info", "send deadline",
                       json_pack("{s:i, s:i}", "connections_cut", (json_int_t)ns,
                                 "answer_send_timeout_ms",
                                 (json_int_t)h->api->config->answer_send_timeout_ms));
            pthread_mutex_lock(&h->lock);
        }
        struct timespec until = pl_timespec_of(pl_now_ns() + tick);
        pthread_cond_timedwait(&h->wake, &h->lock, &until);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

/*
 * libmicrohttpd's own messages (a connection refused at a cap, a peer that
 * went away) become JSON log lines, at most one a second with the count of
 * the others: a caller who opens connections by the thousand must not
 * write the daemon's log by the thousand.
 */
static pthread_mutex_t mhd_log_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    static uint64_t last_ns;
    static unsigned long folded;
    char text[256];
    vsnprintf(text, sizeof(text), fmt, ap);
    size_t n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == ' '))
        text[--n] = '\0';
    uint64_t now = pl_now_ns();
    pthread_mutex_lock(&mhd_log_lock);
    if (last_ns && now - last_ns < 1000000000ull) {
        folded++;
        pthread_mutex_unlock(&mhd_log_lock);
        return;
    }
    unsigned long before = folded;
    folded = 0;
    last_ns = now;
    pthread_mutex_unlock(&mhd_log_lock);
    pl_log("info", "http",
           json_pack("{s:s, s:i}", "detail", text, "folded_before", (json_int_t)before));
}

/* ---- requests ------------------------------------------------------------- */

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
    (void)toe;
    struct pl_http *h = cls;
    struct call_ctx *ctx = *con_cls;
    if (ctx) {
        atomic_fetch_sub(&h->in_progress, 1);
        pl_api_call_free(h->api, ctx->call);
        pl_buf_free(&ctx->body);
        pl_api_response_clear(&ctx->early); /* cut while draining */
        free(ctx);
        *con_cls = NULL;
    }
    clock_restart(h, c);
}

/* Every answer's head: its content type, the security headers, Allow and
 * the API's own headers. */
static void add_headers(struct MHD_Response *r, const struct pl_api_response *rs) {
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, rs->content_type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    /* Every answer: no script, style or connection but the daemon's own,
     * never framed (the console's page, and any JSON opened as a page). */
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'self'; style-src 'self'; "
                            "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                            "form-action 'none'; frame-ancestors 'none'");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (rs->allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, rs->allow);
    for (unsigned i = 0; i < rs->nheaders; i++)
        MHD_add_response_header(r, rs->headers[i].name, rs->headers[i].value);
}

static enum MHD_Result send_response(struct MHD_Connection *c, struct pl_api_response *rs,
                                     bool close_after) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(rs->body_len, rs->body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        pl_api_response_clear(rs);
        return MHD_NO;
    }
    rs->body = NULL; /* owned by MHD now */
    add_headers(r, rs);
    if (close_after)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)rs->status, r);
    MHD_destroy_response(r);
    pl_api_response_clear(rs); /* the headers' values, copied by MHD */
    return ret;
}

/* ---- streaming answers ------------------------------------------------------ */

/*
 * A streaming call (RunStream, RunCellStream) over HTTP/1.1 runs on a
 * thread of its own while the connection's thread sends what it streams
 * (chunked).  The call's thread counts in in_progress until it ends, so a
 * caller who leaves mid-run never lets the daemon stop under its run.
 * Each side holds a reference; the last frees.
 */
struct h1_stream {
    struct pl_http *h;
    pthread_mutex_t lock; /* all below */
    pthread_cond_t cond;
    unsigned refs;
    struct pl_api_call *call;
    struct pl_buf body;
    char *strs[6]; /* the head's strings the request points into */
    struct pl_api_request rq;
    struct pl_api_stream_out hooks;
    struct pl_api_stream *as; /* once begun */
    struct pl_api_response head;
    bool begun, done, poked, final_taken;
    struct pl_api_response final;
    struct pl_buf out; /* taken, not yet given to MHD */
    size_t off;
};

static void h1s_release(struct h1_stream *hs) {
    pthread_mutex_lock(&hs->lock);
    bool last = --hs->refs == 0;
    pthread_mutex_unlock(&hs->lock);
    if (!last)
        return;
    pl_api_response_clear(&hs->final);
    pl_buf_free(&hs->out);
    for (size_t i = 0; i < sizeof(hs->strs) / sizeof(hs->strs[0]); i++)
        free(hs->strs[i]);
    pthread_cond_destroy(&hs->cond);
    pthread_mutex_destroy(&hs->lock);
    free(hs);
}

static int h1s_begin(void *ud, struct pl_api_stream *s, const struct pl_api_response *head) {
    struct h1_stream *hs = ud;
    pthread_mutex_lock(&hs->lock);
    hs->as = s;
    hs->head.status = head->status;
    hs->head.content_type = head->content_type;
    hs->begun = true;
    pthread_cond_broadcast(&hs->cond);
    pthread_mutex_unlock(&hs->lock);
    return 0;
}

static void h1s_notify(void *ud) {
    struct h1_stream *hs = ud;
    pthread_mutex_lock(&hs->lock);
    hs->poked = true;
    pthread_cond_broadcast(&hs->cond);
    pthread_mutex_unlock(&hs->lock);
}

static void *h1s_main(void *arg) {
    struct h1_stream *hs = arg;
    struct pl_http *h = hs->h;
    struct pl_api_response rs;
    pl_api_finish(h->api, hs->call, &hs->rq, &rs);
    pl_api_call_free(h->api, hs->call);
    hs->call = NULL;
    pl_buf_free(&hs->body);
    pthread_mutex_lock(&hs->lock);
    hs->final = rs;
    hs->done = true;
    pthread_cond_broadcast(&hs->cond);
    pthread_mutex_unlock(&hs->lock);
    atomic_fetch_sub(&h->in_progress, 1);
    h1s_release(hs);
    return NULL;
}

/* MHD asks for the answer's next bytes (on the connection's thread, which
 * may wait here): what was taken, else what the stream has, else the rest
 * the call returned at its end, then the end. */
static ssize_t h1s_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    struct h1_stream *hs = cls;
    for (;;) {
        pthread_mutex_lock(&hs->lock);
        if (hs->off < hs->out.len) {
            size_t n = hs->out.len - hs->off < max ? hs->out.len - hs->off : max;
            memcpy(buf, hs->out.data + hs->off, n);
            hs->off += n;
            if (hs->off == hs->out.len)
                hs->off = hs->out.len = 0;
            pthread_mutex_unlock(&hs->lock);
            return (ssize_t)n;
        }
        if (hs->done) {
            /* Everything the stream held went into the final bytes. */
            bool end = hs->final_taken;
            if (!end && hs->final.body_len &&
                pl_buf_append(&hs->out, hs->final.body, hs->final.body_len) < 0) {
                pthread_mutex_unlock(&hs->lock);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            hs->final_taken = true;
            pthread_mutex_unlock(&hs->lock);
            if (end)
                return MHD_CONTENT_READER_END_OF_STREAM;
            continue;
        }
        hs->poked = false;
        pthread_mutex_unlock(&hs->lock);
        struct pl_buf got = {0};
        if (pl_api_stream_take(hs->as, &got) < 0) {
            pl_buf_free(&got);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        pthread_mutex_lock(&hs->lock);
        if (got.len && pl_buf_append(&hs->out, got.data, got.len) < 0) {
            pthread_mutex_unlock(&hs->lock);
            pl_buf_free(&got);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        while (!got.len && !hs->poked && !hs->done)
            pthread_cond_wait(&hs->cond, &hs->lock);
        pthread_mutex_unlock(&hs->lock);
        pl_buf_free(&got);
    }
}

/* The answer is over (sent, or the connection closed): the stream is let
 * go; output from then on is dropped and the run goes on. */
static void h1s_done(void *cls) {
    struct h1_stream *hs = cls;
    pl_api_stream_release(hs->as);
    h1s_release(hs);
}

/*
 * The body is in and the call streams: it runs on a thread of its own.
 * The connection's thread waits for its head (or its whole answer, when it
 * is refused before dispatch) and sends it; the body then comes as the run
 * gives it.
 */
static enum MHD_Result stream_call(struct pl_http *h, struct MHD_Connection *c,
                                   struct call_ctx *ctx, const struct pl_api_request *head) {
    struct h1_stream *hs = calloc(1, sizeof(*hs));
    if (!hs)
        return MHD_NO;
    hs->h = h;
    pthread_mutex_init(&hs->lock, NULL);
    pthread_cond_init(&hs->cond, NULL);
    hs->refs = 2;
    hs->rq = *head;
    const char **fields[] = {&hs->rq.http_method,     &hs->rq.path,
                             &hs->rq.content_type,    &hs->rq.authorization,
                             &hs->rq.connect_timeout, &hs->rq.grpc_timeout};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (*fields[i] && !(hs->strs[i] = strdup(*fields[i]))) {
            hs->refs = 1;
            h1s_release(hs);
            return MHD_NO;
        }
        *fields[i] = hs->strs[i];
    }
    hs->call = ctx->call;
    ctx->call = NULL;
    hs->body = ctx->body;
    ctx->body = (struct pl_buf){0};
    hs->rq.body = hs->body.data ? hs->body.data : "";
    hs->rq.body_len = hs->body.len;
    hs->rq.body_too_large = ctx->too_large;
    hs->hooks = (struct pl_api_stream_out){.begin = h1s_begin, .notify = h1s_notify, .ud = hs};
    hs->rq.stream = &hs->hooks;
    atomic_fetch_add(&h->in_progress, 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int r = pthread_create(&t, &attr, h1s_main, hs);
    pthread_attr_destroy(&attr);
    if (r != 0) {
        /* No thread: the call runs here and answers whole. */
        atomic_fetch_sub(&h->in_progress, 1);
        hs->rq.stream = NULL;
        struct pl_api_response rs;
        pl_api_finish(h->api, hs->call, &hs->rq, &rs);
        pl_api_call_free(h->api, hs->call);
        pl_buf_free(&hs->body);
        send_clock(h, c, send_ns(h));
        enum MHD_Result ret = send_response(c, &rs, false);
        hs->refs = 1;
        h1s_release(hs);
        return ret;
    }
    pthread_mutex_lock(&hs->lock);
    while (!hs->begun && !hs->done)
        pthread_cond_wait(&hs->cond, &hs->lock);
    bool begun = hs->begun;
    struct pl_api_response whole = {0};
    if (!begun) {
        whole = hs->final;
        hs->final = (struct pl_api_response){0};
    }
    struct pl_api_response head_rs = hs->head;
    pthread_mutex_unlock(&hs->lock);
    if (!begun) {
        /* Its content type may be the request's own string (gRPC-Web
         * echoes it), which hs holds: sent before hs is let go. */
        send_clock(h, c, send_ns(h));
        enum MHD_Result ret = send_response(c, &whole, false);
        h1s_release(hs);
        return ret;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, h1s_read, hs, h1s_done);
    if (!resp) {
        h1s_done(hs);
        return MHD_NO;
    }
    add_headers(resp, &head_rs);
    /* A streaming answer is sent while its run goes on: the run may take
     * until the daemon's drain bound (its longest), then the send bound. */
    send_clock(h, c, (uint64_t)h->api->config->drain_timeout_ms * 1000000ull + send_ns(h));
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)head_rs.status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/*
 * The head's request: method, path, the headers the API reads, and
 * what it says about the body.  Transfer-Encoding wins over Content-Length
 * (RFC 9112 6.3), so a chunked body's length is unknown, whatever else the
 * head claims; with neither header there is no body.
 */
static void fill_head(struct pl_http *h, struct MHD_Connection *c, const char *url,
                      const char *method, struct pl_api_request *rq) {
    rq->http_method = method;
    rq->path = url;
    rq->content_type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    rq->authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    rq->connect_timeout = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Connect-Timeout-Ms");
    rq->grpc_timeout = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "grpc-timeout");
    struct conn *k = conn_of(c);
    rq->tls_principal = k ? pl_tls_principal(h->tls, k->fingerprint) : NULL;
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    rq->length_known = true;
    rq->content_length = 0;
    if (te) {
        rq->length_known = false;
    } else if (cl) {
        errno = 0;
        char *end = NULL;
        unsigned long long n = strtoull(cl, &end, 10);
        if (errno != 0 || end == cl || *end != '\0' || cl[0] == '-')
            rq->length_known = false; /* MHD refuses these first; never trust one */
        else
            rq->content_length = n;
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    (void)version;
    struct pl_http *h = cls;
    struct call_ctx *ctx = *con_cls;
    size_t limit = h->api->config->max_request_bytes;

    if (!ctx) {
        /* The head is in; no body byte has been handed over yet. */
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
            return MHD_NO;
        *con_cls = ctx;
        atomic_fetch_add(&h->in_progress, 1);
        struct pl_api_request rq = {0};
        fill_head(h, c, url, method, &rq);
        struct pl_api_response rs;
        if (pl_api_begin(h->api, &rq, &ctx->call, &rs)) {
            if (!rq.length_known ||
                (rq.content_length > 0 && rq.content_length <= PL_HTTP_DRAIN_BYTES)) {
                ctx->draining = true;
                ctx->early = rs;
                return MHD_YES;
            }
            /* A body it announced is never read, so the connection closes
             * after the answer. */
            clock_stop(h, c);
            send_clock(h, c, send_ns(h));
            return send_response(c, &rs, !rq.length_known || rq.content_length > 0);
        }
        /* What the head held against the bytes in flight, in one
         * allocation (pages are touched only as bytes arrive): the
         * announced length, or for a chunked body the largest. */
        size_t want = rq.length_known ? (size_t)rq.content_length : limit;
        if (want > 0) {
            ctx->body.data = malloc(want + 1);
            if (!ctx->body.data)
                return MHD_NO;
            ctx->body.cap = want + 1;
        }
        return MHD_YES;
    }
    if (ctx->draining) {
        if (*upload_data_size) {
            *upload_data_size = 0;
            return MHD_YES;
        }
        if (!clock_stop(h, c))
            return MHD_NO;
        ctx->draining = false;
        send_clock(h, c, send_ns(h));
        return send_response(c, &ctx->early, false);
    }
    if (*upload_data_size) {
        if (!ctx->too_large) {
            if (ctx->body.len + *upload_data_size > limit) {
                ctx->too_large = true;
                pl_buf_free(&ctx->body);
            } else if (pl_buf_append(&ctx->body, upload_data, *upload_data_size) < 0) {
                return MHD_NO;
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    /* The whole request is read: from here on no deadline cuts it. */
    if (!clock_stop(h, c))
        return MHD_NO; /* cut at its deadline a moment ago: nothing is run */
    struct pl_api_request rq = {0};
    fill_head(h, c, url, method, &rq);
    rq.body = ctx->body.data ? ctx->body.data : "";
    rq.body_len = ctx->body.len;
    rq.body_too_large = ctx->too_large;
    if (pl_api_call_streams(ctx->call))
        return stream_call(h, c, ctx, &rq);
    struct pl_api_response rs;
    pl_api_finish(h->api, ctx->call, &rq, &rs);
    /* The answer waits for its reader now, charged to the caller's bytes
     * in place of the body, which nothing needs any more. */
    pl_api_call_hold_answer(h->api, ctx->call, rs.body_len);
    pl_buf_free(&ctx->body);
    send_clock(h, c, send_ns(h));
    return send_response(c, &rs, false);
}

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

static void peer_release(struct pl_http *h, const struct sockaddr_storage *ss) {
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

/* Hand an HTTP/1.1 connection to MHD (which closes fd in any case). */
static void to_mhd(struct pl_http *h, int fd, const struct sniff *sn, const char *fingerprint) {
    struct handing *hd = fingerprint && fingerprint[0] ? calloc(1, sizeof(*hd)) : NULL;
    struct stat st;
    if (hd && fstat(fd, &st) == 0) {
        hd->fd = fd;
        hd->ino = st.st_ino;
        memcpy(hd->fingerprint, fingerprint, 65);
        pthread_mutex_lock(&handing_lock);
        hd->next = handings;
        handings = hd;
        pthread_mutex_unlock(&handing_lock);
    } else {
        free(hd); /* no certificate, or none can be recorded: the bearer key decides */
    }
    /* MHD tells the start from the connection's own thread, maybe after
     * this returns.  An entry whose connection never started (refused at
     * a cap) goes when its descriptor number is next started.  A
     * connection MHD took gives its address's count back when it ends;
     * one it refused, now. */
    if (MHD_add_connection(h->daemon, fd, (const struct sockaddr *)&sn->addr, sn->addrlen) !=
        MHD_YES)
        peer_release(h, &sn->addr);
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
        peer_release(h, &sn->addr);
        return;
    }
    to_mhd(h, sp[1], sn, fingerprint);
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
            if (n <= 0 || tls_write_all(ssl, fd, buf, (size_t)n, pl_now_ns() + send_ns(h)) < 0)
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
        peer_release(h, &sn->addr);
        free(sn);
        return NULL;
    }
    if (which == HTTP1) {
        to_mhd(h, sn->fd, sn, NULL); /* its count goes back when MHD ends it */
    } else {
        if (ssl)
            pump(h, ssl, sn->fd, sn, fingerprint); /* the same, by the socket pair */
        else
            peer_release(h, &sn->addr);
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
        const union MHD_DaemonInfo *di =
            MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        unsigned mine = di ? di->num_connections : 0;
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
            peer_release(h, &sn->addr);
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
            peer_release(h, &sn->addr);
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
    if (pthread_create(&h->watchdog, NULL, watchdog_main, h) != 0) {
        close(h->listen_fd);
        http_free(h);
        return pl_error_set(err, PL_REASON_INTERNAL, "cannot start the read-deadline thread");
    }
    h->watchdog_started = true;
    /* The per-address cap applies to TCP peers; MHD leaves Unix-socket
     * peers (local processes the socket's mode admits) out of it. */
    h->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
            MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
        0, NULL, NULL, on_request, h, MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->max_connections_per_address,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_IDLE_TIMEOUT_S,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_NOTIFY_COMPLETED, completed, h,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
    if (h->daemon && cfg->tls_cert_file[0] && pl_tls_new(cfg, &h->tls, err) < 0) {
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
    h->h2 = h->daemon ? pl_h2_new(api, &h->in_progress, h->tls) : NULL;
    if (!h->daemon || !h->h2 || pipe2(h->stop_fd, O_CLOEXEC) < 0 ||
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
    if (h->watchdog_started) {
        pthread_mutex_lock(&h->lock);
        h->stopping = true;
        pthread_cond_signal(&h->wake);
        pthread_mutex_unlock(&h->lock);
        pthread_join(h->watchdog, NULL);
    }
    if (h->daemon)
        MHD_stop_daemon(h->daemon);
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
