/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http1.c: HTTP/1.1 on libmicrohttpd, for the connections the front door
 * (front.c) hands over: the read and send deadlines, requests, streaming
 * answers.  See http.h and http_int.h.
 */
#include <errno.h>
#include <netinet/in.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/buf.h"
#include "../core/clock.h"
#include "../core/fdio.h"
#include "../core/log.h"
#include "http_int.h"
#include "tls.h"

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
    pl_front_peer_release(h, &ss);
}

/*
 * MHD calls this from its accepting thread when a connection opens, and
 * before it closes the fd when the connection ends: a conn is in the list
 * exactly while its fd is open, so the watchdog never shuts down an fd
 * that was closed and reused.
 */
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
    uint64_t tick = (deadline < pl_http_send_ns(h) ? deadline : pl_http_send_ns(h)) / 10;
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
static void add_headers(const struct pl_http *h, struct MHD_Response *r,
                        const struct pl_api_response *rs) {
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, rs->content_type);
    /* Which daemon of a fleet answered (PLIMSOLL_INSTANCE, not a secret). */
    MHD_add_response_header(r, "Plimsoll-Route", h->api->config->instance);
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
    for (unsigned i = 0; i < rs->ncors; i++)
        MHD_add_response_header(r, rs->cors[i].name, rs->cors[i].value);
}

static enum MHD_Result send_response(const struct pl_http *h, struct MHD_Connection *c,
                                     struct pl_api_response *rs, bool close_after) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(rs->body_len, rs->body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        pl_api_response_clear(rs);
        return MHD_NO;
    }
    rs->body = NULL; /* owned by MHD now */
    add_headers(h, r, rs);
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
    memcpy(hs->head.cors, head->cors, sizeof(head->cors));
    hs->head.ncors = head->ncors;
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
    /* CORS was decided at the head (the call holds it): nothing here reads
     * these again, and MHD's copies do not outlive the connection's turn. */
    hs->rq.origin = hs->rq.cors_method = hs->rq.cors_headers = NULL;
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
        send_clock(h, c, pl_http_send_ns(h));
        enum MHD_Result ret = send_response(h, c, &rs, false);
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
        send_clock(h, c, pl_http_send_ns(h));
        enum MHD_Result ret = send_response(h, c, &whole, false);
        h1s_release(hs);
        return ret;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, h1s_read, hs, h1s_done);
    if (!resp) {
        h1s_done(hs);
        return MHD_NO;
    }
    add_headers(h, resp, &head_rs);
    /* A streaming answer is sent while its run goes on: the run may take
     * until the daemon's drain bound (its longest), then the send bound. */
    send_clock(h, c, (uint64_t)h->api->config->drain_timeout_ms * 1000000ull + pl_http_send_ns(h));
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)head_rs.status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* MHD_get_connection_values's iterator: the Origin headers, counted. */
static enum MHD_Result count_origin(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value) {
    (void)kind;
    (void)value;
    if (strcasecmp(key, "Origin") == 0)
        (*(unsigned *)cls)++;
    return MHD_YES;
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
    rq->origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    rq->cors_method =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Method");
    rq->cors_headers =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    unsigned origins = 0; /* MHD's lookup gives the first of several */
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_origin, &origins);
    rq->origin_repeated = origins > 1;
    rq->connect_version =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Connect-Protocol-Version");
    rq->host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    rq->accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
    rq->mcp_session_id = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Mcp-Session-Id");
    rq->mcp_protocol_version =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "MCP-Protocol-Version");
    rq->mcp_floor = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Plimsoll-Minimum-Isolation");
    rq->route = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Plimsoll-Route");
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
            send_clock(h, c, pl_http_send_ns(h));
            return send_response(h, c, &rs, !rq.length_known || rq.content_length > 0);
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
        send_clock(h, c, pl_http_send_ns(h));
        return send_response(h, c, &ctx->early, false);
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
    send_clock(h, c, pl_http_send_ns(h));
    return send_response(h, c, &rs, false);
}

void pl_http1_add(struct pl_http *h, int fd, const struct sockaddr_storage *addr, socklen_t addrlen,
                  const char *fingerprint) {
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
    if (MHD_add_connection(h->daemon, fd, (const struct sockaddr *)addr, addrlen) != MHD_YES)
        pl_front_peer_release(h, addr);
}

unsigned pl_http1_connections(struct pl_http *h) {
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return di ? di->num_connections : 0;
}

int pl_http1_start(struct pl_http *h, struct pl_error *err) {
    const struct pl_config *cfg = h->api->config;
    if (pthread_create(&h->watchdog, NULL, watchdog_main, h) != 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "cannot start the read-deadline thread");
    h->watchdog_started = true;
    /* The per-address cap applies to TCP peers; MHD leaves Unix-socket
     * peers (local processes the socket's mode admits) out of it.  The
     * logger comes first, or MHD logs a warning about it to stderr before
     * it is in place. */
    h->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
            MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
        0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->max_connections_per_address,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_IDLE_TIMEOUT_S,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_NOTIFY_COMPLETED, completed, h,
        MHD_OPTION_END);
    if (!h->daemon)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "PLIMSOLL_LISTEN: the HTTP server did not start");
    return 0;
}

void pl_http1_stop(struct pl_http *h) {
    if (h->watchdog_started) {
        pthread_mutex_lock(&h->lock);
        h->stopping = true;
        pthread_cond_signal(&h->wake);
        pthread_mutex_unlock(&h->lock);
        pthread_join(h->watchdog, NULL);
        h->watchdog_started = false;
    }
    if (h->daemon)
        MHD_stop_daemon(h->daemon);
    h->daemon = NULL;
}
