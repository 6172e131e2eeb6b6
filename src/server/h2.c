/* SPDX-License-Identifier: Apache-2.0 */
/*
 * h2.c: HTTP/2 connections on libnghttp2's server session.  See h2.h.
 *
 * The connection's thread owns its session: it reads, writes, submits
 * answers and resets streams past their read deadline.  A request whose
 * body is in goes to a thread of its own, which calls pl_api_finish and
 * puts the answer on the connection's list of answers, waking the
 * connection's thread through an eventfd.  A stream the peer resets while
 * its run goes on stays until the run's answer comes back, then is freed
 * unsent (nothing cancels a run; the admission slot comes back at its end).
 *
 * A streaming call (RunStream, RunCellStream) gets its head submitted when
 * its run begins (the API's begin hook, on the worker, queues it for the
 * connection's thread), and a data source that takes the stream's bytes
 * as they come (pl_api_stream_take) and is deferred while there are none;
 * each notify from the run resumes it, and the call's end brings the rest
 * and the trailers.
 */
#include "h2.h"

#include <errno.h>
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "../core/buf.h"
#include "../core/clock.h"
#include "../core/log.h"

enum stream_state { READING_HEAD, READING_BODY, RUNNING, ANSWERING, LIVE };

struct stream {
    struct stream *prev, *next; /* the connection's streams */
    struct stream *done_next;   /* the list of answers to send */
    struct stream *job_next;    /* the workers' queue */
    struct h2conn *c;
    int32_t id;
    enum stream_state state;
    uint64_t since_ns;   /* when the stream opened: the read deadline */
    uint64_t answer_ns;  /* when its answer was ready: the send deadline */
    bool send_cut;       /* reset at the send deadline */
    size_t header_bytes; /* the header block's, as HPACK's size counts it */
    size_t kept_bytes;   /* the values kept of it (the wanted headers) */
    char *method, *path, *ctype, *auth, *connect_timeout, *grpc_timeout, *length;
    char *origin, *cors_method, *cors_headers;      /* CORS's (api_cors.c) */
    bool origin_repeated;                           /* Origin came again (the API refuses it) */
    char *connect_version;                          /* Connect-Protocol-Version */
    char *authority, *host, *accept;                /* :authority, host, accept */
    char *mcp_session_id, *mcp_version, *mcp_floor; /* /mcp's (api_mcp.c) */
    char *route;                                    /* Plimsoll-Route */
    struct pl_api_call *call;
    struct pl_buf body;
    bool too_large;
    bool counted; /* in in_progress */
    bool closed;  /* nghttp2 closed it while its run went on */
    struct pl_api_response rs;
    size_t sent;

    /* A streaming call (the connection's thread, except `poked` and the
     * begin fields, which c->lock guards). */
    struct pl_api_stream_out hooks;
    struct stream *poke_next; /* on c->poked */
    bool poked;
    bool begin_pending; /* the run began: its head is to be submitted */
    int head_status;
    const char *head_ctype;
    struct pl_api_fixed_header head_cors[PL_API_MAX_CORS_HEADERS];
    unsigned head_ncors;
    struct pl_api_stream *as; /* once begun; NULL once the peer reset it */
    bool streaming;           /* its head is submitted */
    bool deferred;            /* nghttp2 waits for its bytes */
    bool final_in;            /* the call's end (rs) is here */
    bool final_taken;
    struct pl_buf sbuf; /* taken, not yet given to nghttp2 */
    size_t soff;

    /* A live call (health's Watch, reflection: api.h), on the
     * connection's thread alone: its answers in sbuf as they are made. */
    struct pl_api_live *live;
    uint64_t live_next_ns; /* when to poll it */
    bool live_ended;       /* rs holds its trailers */
};

struct h2conn {
    struct h2conn *prev, *next; /* the server's connections */
    struct pl_h2 *h2;
    int fd, evfd;
    SSL *ssl;             /* over TLS, else NULL (h2c) */
    char fingerprint[65]; /* the client certificate's (tls.h), or "" */
    nghttp2_session *s;
    struct stream *streams;
    uint64_t idle_since_ns; /* no stream open since then */
    pthread_mutex_t lock;   /* done, poked, workers */
    pthread_cond_t idle;
    struct stream *done;
    struct stream *poked; /* streaming calls with a head or bytes to send */
    unsigned workers;
    unsigned watches; /* live Watch streams (the connection's thread's) */
    /* Streams freed whose answers are not yet written (nghttp2 closes a
     * stream as it serializes its last frame, before flush writes it):
     * they leave in_progress once the bytes are on the socket, so a
     * drain that waits for in_progress never shuts a socket under an
     * answer.  The connection's thread's. */
    unsigned unwritten;
};

struct pl_h2 {
    struct pl_api *api;
    struct pl_tls *tls; /* NULL: plain HTTP only */
    atomic_uint *in_progress;
    pthread_mutex_t lock; /* conns, n, stopping */
    pthread_cond_t gone;
    struct h2conn *conns;
    unsigned n;
    bool stopping;

    /* The workers: threads kept for the next request (a thread made and
     * ended per request cost a third of a refusal's time), as many as
     * requests run at once, PL_H2_KEEP_WORKERS of them kept when idle. */
    pthread_mutex_t plock; /* queue, tail, idle, threads, pool_stop */
    pthread_cond_t work, ended;
    struct stream *queue, *tail;
    unsigned idle, threads;
    bool pool_stop;
};

/* Workers kept idle, and how long one more waits before it ends. */
#define PL_H2_KEEP_WORKERS 8
#define PL_H2_WORKER_IDLE_S 10

struct pl_h2 *pl_h2_new(struct pl_api *api, atomic_uint *in_progress, struct pl_tls *tls) {
    struct pl_h2 *h2 = calloc(1, sizeof(*h2));
    if (!h2)
        return NULL;
    h2->api = api;
    h2->tls = tls;
    h2->in_progress = in_progress;
    pthread_mutex_init(&h2->lock, NULL);
    pthread_cond_init(&h2->gone, NULL);
    pthread_mutex_init(&h2->plock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h2->work, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&h2->ended, NULL);
    return h2;
}

unsigned pl_h2_connections(struct pl_h2 *h2) {
    pthread_mutex_lock(&h2->lock);
    unsigned n = h2->n;
    pthread_mutex_unlock(&h2->lock);
    return n;
}

/* ---- streams ------------------------------------------------------------ */

static void stream_free(struct stream *st) {
    struct h2conn *c = st->c;
    if (st->prev)
        st->prev->next = st->next;
    else if (c->streams == st)
        c->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    if (!c->streams)
        c->idle_since_ns = pl_now_ns();
    if (st->live && pl_api_live_is_watch(st->live))
        c->watches--;
    pl_api_live_free(st->live);
    pl_api_call_free(c->h2->api, st->call);
    pl_api_stream_release(st->as);
    pl_buf_free(&st->sbuf);
    if (st->counted)
        c->unwritten++;
    pl_buf_free(&st->body);
    pl_api_response_clear(&st->rs);
    free(st->method);
    free(st->path);
    free(st->ctype);
    free(st->auth);
    free(st->connect_timeout);
    free(st->grpc_timeout);
    free(st->length);
    free(st->origin);
    free(st->cors_method);
    free(st->cors_headers);
    free(st->connect_version);
    free(st->authority);
    free(st->host);
    free(st->accept);
    free(st->mcp_session_id);
    free(st->mcp_version);
    free(st->mcp_floor);
    free(st->route);
    free(st);
}

/* The body's end: EOF, and the answer's trailers when it has any. */
static void end_body(nghttp2_session *s, struct stream *st, uint32_t *flags) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (!st->rs.ntrailers)
        return;
    nghttp2_nv tr[PL_API_MAX_HEADERS];
    for (unsigned i = 0; i < st->rs.ntrailers; i++)
        tr[i] = (nghttp2_nv){(uint8_t *)st->rs.trailers[i].name,
                             (uint8_t *)st->rs.trailers[i].value, strlen(st->rs.trailers[i].name),
                             strlen(st->rs.trailers[i].value), NGHTTP2_NV_FLAG_NONE};
    if (nghttp2_submit_trailer(s, st->id, tr, st->rs.ntrailers) == 0)
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
}

static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *user) {
    (void)id;
    (void)user;
    struct stream *st = src->ptr;
    size_t left = st->rs.body_len - st->sent;
    size_t n = left < len ? left : len;
    if (n)
        memcpy(buf, st->rs.body + st->sent, n);
    st->sent += n;
    if (st->sent == st->rs.body_len)
        end_body(s, st, flags);
    return (ssize_t)n;
}

/* A streaming answer's next bytes: what was taken, else what the stream
 * has now, else (once the call ended) the rest it returned; deferred while
 * the run has given nothing new. */
static ssize_t stream_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                           uint32_t *flags, nghttp2_data_source *src, void *user) {
    (void)id;
    (void)user;
    struct stream *st = src->ptr;
    if (st->soff == st->sbuf.len) {
        st->soff = st->sbuf.len = 0;
        if (!st->final_in) {
            if (st->as && pl_api_stream_take(st->as, &st->sbuf) < 0)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        } else if (!st->final_taken) {
            st->final_taken = true;
            if (st->rs.body_len && pl_buf_append(&st->sbuf, st->rs.body, st->rs.body_len) < 0)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
    }
    size_t n = st->sbuf.len - st->soff < len ? st->sbuf.len - st->soff : len;
    if (n) {
        memcpy(buf, st->sbuf.data + st->soff, n);
        st->soff += n;
        return (ssize_t)n;
    }
    if (!st->final_taken) {
        st->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    end_body(s, st, flags);
    return 0;
}

/* A live call's answers as they are made; deferred while there are none,
 * the trailers once it ended and everything went. */
static ssize_t live_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *user) {
    (void)id;
    (void)user;
    struct stream *st = src->ptr;
    size_t n = st->sbuf.len - st->soff < len ? st->sbuf.len - st->soff : len;
    if (n) {
        memcpy(buf, st->sbuf.data + st->soff, n);
        st->soff += n;
        if (st->soff == st->sbuf.len)
            st->soff = st->sbuf.len = 0;
        return (ssize_t)n;
    }
    if (!st->live_ended) {
        st->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    end_body(s, st, flags);
    return 0;
}

#define NV(n, v)                                                                                   \
    { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE }

/* The answer's head (rs's status, content type, Allow and headers) with
 * the body from prd (none when NULL). */
static void submit_head(struct stream *st, const struct pl_api_response *rs,
                        nghttp2_data_provider *prd) {
    char status[8];
    snprintf(status, sizeof(status), "%d", rs->status ? rs->status : 500);
    const char *route = st->c->h2->api->config->instance;
    nghttp2_nv nva[9 + PL_API_MAX_HEADERS + PL_API_MAX_CORS_HEADERS] = {
        NV(":status", status),
        NV("content-type", rs->content_type ? rs->content_type : "text/plain"),
        NV("x-content-type-options", "nosniff"),
        NV("content-security-policy",
           "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
           "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
        NV("x-frame-options", "DENY"),
        NV("referrer-policy", "no-referrer"),
        NV("cache-control", "no-store"),
        NV("plimsoll-route", route), /* which daemon of a fleet answered */
    };
    size_t n = 8;
    if (rs->allow)
        nva[n++] = (nghttp2_nv)NV("allow", rs->allow);
    for (unsigned i = 0; i < rs->nheaders; i++)
        nva[n++] = (nghttp2_nv){(uint8_t *)rs->headers[i].name, (uint8_t *)rs->headers[i].value,
                                strlen(rs->headers[i].name), strlen(rs->headers[i].value),
                                NGHTTP2_NV_FLAG_NONE};
    for (unsigned i = 0; i < rs->ncors; i++)
        nva[n++] =
            (nghttp2_nv){(uint8_t *)rs->cors[i].name, (uint8_t *)rs->cors[i].value,
                         strlen(rs->cors[i].name), strlen(rs->cors[i].value), NGHTTP2_NV_FLAG_NONE};
    if (nghttp2_submit_response(st->c->s, st->id, nva, n, prd) != 0)
        nghttp2_submit_rst_stream(st->c->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
}

static void submit_answer(struct stream *st) {
    struct pl_api_response *rs = &st->rs;
    if (!rs->body)
        rs->body = strdup("");
    st->state = ANSWERING;
    st->answer_ns = pl_now_ns();
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = body_read};
    bool body = rs->body_len > 0 || rs->ntrailers > 0;
    submit_head(st, rs, body ? &prd : NULL);
}

/* A streaming call's run began: its head goes out now, its body as the
 * run gives it (stream_read). */
static void submit_stream_head(struct stream *st) {
    struct pl_api_response head = {.status = st->head_status, .content_type = st->head_ctype};
    memcpy(head.cors, st->head_cors, sizeof(head.cors));
    head.ncors = st->head_ncors;
    st->streaming = true;
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = stream_read};
    submit_head(st, &head, &prd);
}

/* Queue st for the connection's thread (c->lock held) and wake it. */
static void poke(struct h2conn *c, struct stream *st) {
    if (!st->poked) {
        st->poked = true;
        st->poke_next = c->poked;
        c->poked = st;
    }
    uint64_t one = 1;
    if (write(c->evfd, &one, sizeof(one)) < 0) {
        /* an eventfd's counter cannot overflow here; nothing to do */
    }
}

/* The API's hooks, on the call's worker (begin) or the run's threads. */
static int hook_begin(void *ud, struct pl_api_stream *s, const struct pl_api_response *head) {
    struct stream *st = ud;
    pthread_mutex_lock(&st->c->lock);
    st->as = s;
    st->head_status = head->status;
    st->head_ctype = head->content_type;
    memcpy(st->head_cors, head->cors, sizeof(st->head_cors));
    st->head_ncors = head->ncors;
    st->begin_pending = true;
    poke(st->c, st);
    pthread_mutex_unlock(&st->c->lock);
    return 0;
}

static void hook_notify(void *ud) {
    struct stream *st = ud;
    pthread_mutex_lock(&st->c->lock);
    poke(st->c, st);
    pthread_mutex_unlock(&st->c->lock);
}

/* The request as the API takes it. */
static void request_of(const struct stream *st, struct pl_api_request *rq) {
    *rq = (struct pl_api_request){
        .http_method = st->method ? st->method : "",
        .path = st->path ? st->path : "",
        .content_type = st->ctype,
        .authorization = st->auth,
        .connect_timeout = st->connect_timeout,
        .grpc_timeout = st->grpc_timeout,
        .origin = st->origin,
        .cors_method = st->cors_method,
        .cors_headers = st->cors_headers,
        .origin_repeated = st->origin_repeated,
        .connect_version = st->connect_version,
        .host = st->authority ? st->authority : st->host,
        .accept = st->accept,
        .mcp_session_id = st->mcp_session_id,
        .mcp_protocol_version = st->mcp_version,
        .mcp_floor = st->mcp_floor,
        .route = st->route,
        .http2 = true,
        .head_bytes = st->kept_bytes,
        .conn_watches = st->c->watches,
        /* The current file's say, every request: a certificate removed
         * and reloaded is nobody on a connection already open too. */
        .tls_principal = pl_tls_principal(st->c->h2->tls, st->c->fingerprint),
    };
    if (st->length) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(st->length, &end, 10);
        if (errno == 0 && end != st->length && *end == '\0' && st->length[0] != '-') {
            rq->length_known = true;
            rq->content_length = v;
        }
    }
}

static void run_one(struct stream *st) {
    struct h2conn *c = st->c;
    struct pl_api_request rq;
    request_of(st, &rq);
    rq.body = st->body.data ? st->body.data : "";
    rq.body_len = st->body.len;
    rq.body_too_large = st->too_large;
    st->hooks = (struct pl_api_stream_out){.begin = hook_begin, .notify = hook_notify, .ud = st};
    rq.stream = &st->hooks;
    struct pl_api_response rs;
    pl_api_finish(c->h2->api, st->call, &rq, &rs);
    /* The answer waits for its reader now, charged to the caller's bytes
     * in place of the body, which nothing needs any more. */
    pl_api_call_hold_answer(c->h2->api, st->call, rs.body_len);
    pl_buf_free(&st->body);
    uint64_t one = 1;
    pthread_mutex_lock(&c->lock);
    st->rs = rs;
    st->done_next = c->done;
    c->done = st;
    c->workers--;
    pthread_cond_broadcast(&c->idle);
    if (write(c->evfd, &one, sizeof(one)) < 0) {
        /* an eventfd's counter cannot overflow here; nothing to do */
    }
    pthread_mutex_unlock(&c->lock);
}

static void *worker_main(void *arg) {
    struct pl_h2 *h2 = arg;
    pthread_mutex_lock(&h2->plock);
    for (;;) {
        if (!h2->queue) {
            if (h2->pool_stop)
                break;
            h2->idle++;
            struct timespec until =
                pl_timespec_of(pl_now_ns() + PL_H2_WORKER_IDLE_S * 1000000000ull);
            int r = pthread_cond_timedwait(&h2->work, &h2->plock, &until);
            h2->idle--;
            if (r != 0 && !h2->queue && h2->threads > PL_H2_KEEP_WORKERS)
                break;
            continue;
        }
        struct stream *st = h2->queue;
        h2->queue = st->job_next;
        if (!h2->queue)
            h2->tail = NULL;
        pthread_mutex_unlock(&h2->plock);
        run_one(st);
        pthread_mutex_lock(&h2->plock);
    }
    h2->threads--;
    pthread_cond_broadcast(&h2->ended);
    pthread_mutex_unlock(&h2->plock);
    return NULL;
}

/* Queue st for a worker, making one when none is idle. */
static int dispatch(struct pl_h2 *h2, struct stream *st) {
    pthread_mutex_lock(&h2->plock);
    st->job_next = NULL;
    if (h2->tail)
        h2->tail->job_next = st;
    else
        h2->queue = st;
    h2->tail = st;
    int r = 0;
    if (h2->idle == 0) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t t;
        if (pthread_create(&t, &attr, worker_main, h2) == 0)
            h2->threads++;
        else if (h2->threads == 0)
            r = -1; /* no worker at all: take it back */
        pthread_attr_destroy(&attr);
    }
    if (r < 0) {
        h2->queue = h2->tail = NULL;
    } else {
        pthread_cond_signal(&h2->work);
    }
    pthread_mutex_unlock(&h2->plock);
    return r;
}

/* ---- live calls ------------------------------------------------------------ */

/* What the live call returned: on 1 its trailers are rs's and the
 * answer ends once its bytes went; bytes or the end resume the data. */
static void live_after(struct stream *st, int r) {
    if (r == 1)
        st->live_ended = true;
    if (st->deferred && (r == 1 || st->sbuf.len > st->soff)) {
        st->deferred = false;
        nghttp2_session_resume_data(st->c->s, st->id);
    }
}

static void live_open(struct stream *st, const struct pl_api_request *rq) {
    struct h2conn *c = st->c;
    struct pl_api_response head;
    st->live = pl_api_live_open(c->h2->api, st->call, rq, &head);
    if (!st->live) {
        nghttp2_submit_rst_stream(c->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    st->state = LIVE;
    if (pl_api_live_is_watch(st->live)) {
        /* In progress: the drain waits for its NOT_SERVING and its end,
         * which the next poll brings. */
        c->watches++;
    } else {
        /* Not a request in progress: it ends at its deadline. */
        atomic_fetch_sub(c->h2->in_progress, 1);
        st->counted = false;
    }
    st->live_next_ns = 0;
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = live_read};
    submit_head(st, &head, &prd);
}

/* The request's bytes, on a live call. */
static void live_data(struct stream *st, const uint8_t *data, size_t len) {
    if (st->live_ended)
        return; /* what comes after its end is read and dropped */
    int r = pl_api_live_feed(st->live, data, len, st->sbuf.len - st->soff, &st->sbuf, &st->rs);
    live_after(st, r);
}

static void live_half_close(struct stream *st) {
    if (st->live_ended)
        return;
    live_after(st, pl_api_live_half_close(st->live, &st->sbuf, &st->rs));
}

static void head_in(struct stream *st) {
    struct h2conn *c = st->c;
    struct pl_api_request rq;
    request_of(st, &rq);
    if (rq.path[0] != '/') {
        rq.path = "/"; /* a stream without :path is nobody's route */
    }
    atomic_fetch_add(c->h2->in_progress, 1);
    st->counted = true;
    if (pl_api_begin(c->h2->api, &rq, &st->call, &st->rs)) {
        submit_answer(st); /* the rest of its body, if any, is dropped */
        return;
    }
    if (pl_api_call_live(st->call))
        live_open(st, &rq);
    else
        st->state = READING_BODY;
}

static void body_in(struct stream *st) {
    struct h2conn *c = st->c;
    if (st->state != READING_BODY)
        return;
    st->state = RUNNING;
    pthread_mutex_lock(&c->lock);
    c->workers++;
    pthread_mutex_unlock(&c->lock);
    if (dispatch(c->h2, st) < 0) {
        pthread_mutex_lock(&c->lock);
        c->workers--;
        pthread_mutex_unlock(&c->lock);
        pl_api_response_clear(&st->rs);
        st->rs.status = 503;
        st->rs.content_type = "text/plain; charset=utf-8";
        st->rs.body = strdup("no thread for the request; retry\n");
        st->rs.body_len = st->rs.body ? strlen(st->rs.body) : 0;
        submit_answer(st);
    }
}

/* ---- nghttp2's callbacks ------------------------------------------------------ */

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *user) {
    struct h2conn *c = user;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct stream *st = calloc(1, sizeof(*st));
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    st->c = c;
    st->id = f->hd.stream_id;
    st->since_ns = pl_now_ns();
    st->next = c->streams;
    if (c->streams)
        c->streams->prev = st;
    c->streams = st;
    nghttp2_session_set_stream_user_data(s, st->id, st);
    return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user) {
    (void)flags;
    (void)user;
    struct stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!st || st->state != READING_HEAD)
        return 0; /* trailers of a request: nothing in them is read */
    st->header_bytes += namelen + valuelen + 32;
    if (st->header_bytes > PL_H2_MAX_HEADER_BYTES)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
    static const struct {
        const char *name;
        size_t off;
    } wanted[] = {
        {":method", offsetof(struct stream, method)},
        {":path", offsetof(struct stream, path)},
        {"content-type", offsetof(struct stream, ctype)},
        {"authorization", offsetof(struct stream, auth)},
        {"connect-timeout-ms", offsetof(struct stream, connect_timeout)},
        {"grpc-timeout", offsetof(struct stream, grpc_timeout)},
        {"content-length", offsetof(struct stream, length)},
        {"origin", offsetof(struct stream, origin)},
        {"access-control-request-method", offsetof(struct stream, cors_method)},
        {"access-control-request-headers", offsetof(struct stream, cors_headers)},
        {"connect-protocol-version", offsetof(struct stream, connect_version)},
        {":authority", offsetof(struct stream, authority)},
        {"host", offsetof(struct stream, host)},
        {"accept", offsetof(struct stream, accept)},
        {"mcp-session-id", offsetof(struct stream, mcp_session_id)},
        {"mcp-protocol-version", offsetof(struct stream, mcp_version)},
        {"plimsoll-minimum-isolation", offsetof(struct stream, mcp_floor)},
        {"plimsoll-route", offsetof(struct stream, route)},
    };
    for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
        if (strlen(wanted[i].name) != namelen || memcmp(wanted[i].name, name, namelen) != 0)
            continue;
        char **slot = (char **)((char *)st + wanted[i].off);
        if (*slot && slot == &st->origin) {
            st->origin_repeated = true; /* the API refuses it, as over HTTP/1.1 */
            return 0;
        }
        if (*slot)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* a header given twice */
        *slot = strndup((const char *)value, valuelen);
        if (!*slot)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        st->kept_bytes += valuelen + 1;
        if (i == 1) /* the path without its query, as HTTP/1.1's */
            (*slot)[strcspn(*slot, "?")] = '\0';
        return 0;
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *user) {
    (void)user;
    if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
        return 0;
    struct stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!st)
        return 0;
    if (f->hd.type == NGHTTP2_HEADERS && st->state == READING_HEAD)
        head_in(st);
    if (f->hd.flags & NGHTTP2_FLAG_END_STREAM) {
        if (st->state == LIVE)
            live_half_close(st);
        else
            body_in(st);
    }
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user) {
    (void)flags;
    struct h2conn *c = user;
    struct stream *st = nghttp2_session_get_stream_user_data(s, id);
    if (st && st->state == LIVE) {
        live_data(st, data, len);
        return 0;
    }
    if (!st || st->state != READING_BODY || st->too_large)
        return 0;
    if (st->body.len + len > c->h2->api->config->max_request_bytes) {
        st->too_large = true; /* read on to its end, held no more */
        pl_buf_free(&st->body);
        return 0;
    }
    return pl_buf_append(&st->body, data, len) < 0 ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *user) {
    (void)code;
    (void)user;
    struct stream *st = nghttp2_session_get_stream_user_data(s, id);
    if (!st)
        return 0;
    nghttp2_session_set_stream_user_data(s, id, NULL);
    if (st->state == RUNNING) {
        st->closed = true; /* freed when its answer comes back */
        /* A streaming call's output is dropped from now on. */
        pl_api_stream_release(st->as);
        st->as = NULL;
    } else {
        stream_free(st);
    }
    return 0;
}

/* ---- the connection's loop ------------------------------------------------ */

/* Write all of p, over TLS or not, by the absolute deadline (a peer that
 * takes its bytes slowly cannot keep the thread past it); -1 past it or
 * when the connection ended. */
static int write_all(struct h2conn *c, const uint8_t *p, size_t len, uint64_t deadline) {
    size_t off = 0;
    while (off < len) {
        short want = POLLOUT;
        if (!c->ssl) {
            ssize_t w = send(c->fd, p + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0) {
                off += (size_t)w;
                continue;
            }
            if (w == 0 || (errno != EAGAIN && errno != EINTR))
                return -1;
        } else {
            int w = SSL_write(c->ssl, p + off, (int)(len - off));
            if (w > 0) {
                off += (size_t)w;
                continue;
            }
            int e = SSL_get_error(c->ssl, w);
            if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ)
                return -1;
            want = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
        }
        uint64_t now = pl_now_ns();
        if (now >= deadline)
            return -1;
        struct pollfd pw = {.fd = c->fd, .events = want};
        if (poll(&pw, 1, (int)((deadline - now) / 1000000ull) + 1) < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

/* Read what there is: > 0 bytes, 0 none yet, -1 the connection ended. */
static ssize_t read_some(struct h2conn *c, uint8_t *buf, size_t len) {
    if (!c->ssl) {
        ssize_t got = recv(c->fd, buf, len, MSG_DONTWAIT);
        if (got > 0)
            return got;
        return got < 0 && (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    }
    int got = SSL_read(c->ssl, buf, (int)len);
    if (got > 0)
        return got;
    int e = SSL_get_error(c->ssl, got);
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? 0 : -1;
}

/* The streams whose answers are written leave in_progress. */
static void written(struct h2conn *c) {
    if (c->unwritten)
        atomic_fetch_sub(c->h2->in_progress, c->unwritten);
    c->unwritten = 0;
}

/* Everything the session has to send, gathered and written at once (one
 * segment for an answer's HEADERS, DATA and trailers, not three). */
static int flush(struct h2conn *c) {
    uint8_t out[65536];
    size_t len = 0;
    uint64_t deadline =
        pl_now_ns() + (uint64_t)c->h2->api->config->answer_send_timeout_ms * 1000000ull;
    for (;;) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(c->s, &p);
        if (n < 0)
            return -1;
        if (n == 0 || len + (size_t)n > sizeof(out)) {
            if (write_all(c, out, len, deadline) < 0)
                return -1;
            len = 0;
        }
        if (n == 0) {
            written(c);
            return 0;
        }
        if ((size_t)n > sizeof(out)) {
            if (write_all(c, p, (size_t)n, deadline) < 0)
                return -1;
            continue;
        }
        memcpy(out + len, p, (size_t)n);
        len += (size_t)n;
    }
}

/* Answers whose runs ended: sent, or freed when the peer reset them. */
static void take_answers(struct h2conn *c) {
    uint64_t v;
    if (read(c->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        return;
    pthread_mutex_lock(&c->lock);
    struct stream *done = c->done, *poked = c->poked;
    c->done = NULL;
    c->poked = NULL;
    for (struct stream *st = poked; st; st = st->poke_next)
        st->poked = false;
    pthread_mutex_unlock(&c->lock);
    /* Heads and bytes of streaming calls first: a call that began and
     * ended since the last look has its head submitted before its end. */
    for (struct stream *st = poked; st; st = st->poke_next) {
        if (st->closed)
            continue;
        if (st->begin_pending && !st->streaming) {
            submit_stream_head(st);
        } else if (st->streaming && st->deferred) {
            st->deferred = false;
            nghttp2_session_resume_data(c->s, st->id);
        }
    }
    while (done) {
        struct stream *st = done;
        done = st->done_next;
        if (st->closed) {
            stream_free(st);
        } else if (st->streaming) {
            st->state = ANSWERING;
            st->answer_ns = pl_now_ns();
            st->final_in = true;
            if (st->deferred) {
                st->deferred = false;
                nghttp2_session_resume_data(c->s, st->id);
            }
        } else {
            submit_answer(st);
        }
    }
}

/*
 * Every deadline here is absolute, and no inbound byte (a PING, SETTINGS,
 * WINDOW_UPDATE, a trickle of DATA) moves one: a stream still reading its
 * request past PLIMSOLL_REQUEST_READ_TIMEOUT_MS from its opening, or
 * still answering past PLIMSOLL_ANSWER_SEND_TIMEOUT_MS from its answer's
 * being ready (a streaming call's: from its end), is reset and freed; a
 * connection with no stream for the read deadline is closed.  A running
 * stream has the run's own deadline.  Returns the ms to the next
 * deadline (1 when it reset a stream: the reset goes out, its stream is
 * freed, and the idle clock may start), -1 for none, 0 to close.
 */
static int deadlines(struct h2conn *c) {
    uint64_t now = pl_now_ns();
    const struct pl_config *cfg = c->h2->api->config;
    uint64_t read_limit = (uint64_t)cfg->request_read_timeout_ms * 1000000ull;
    uint64_t send_limit = (uint64_t)cfg->answer_send_timeout_ms * 1000000ull;
    uint64_t next = UINT64_MAX;
    bool reset = false;
    for (struct stream *st = c->streams; st; st = st->next) {
        uint64_t due;
        if (st->state == LIVE) {
            if (!st->live_ended && now >= st->live_next_ns)
                live_after(st,
                           pl_api_live_poll(st->live, now, &st->sbuf, &st->rs, &st->live_next_ns));
            if (st->live_ended) {
                /* Its answers and trailers go out; a peer that takes
                 * nothing is cut at the send deadline, as any answer. */
                if (!st->answer_ns)
                    st->answer_ns = now;
                due = st->answer_ns + send_limit;
                if (st->send_cut)
                    continue;
            } else {
                due = st->live_next_ns;
                if (due < next)
                    next = due;
                continue;
            }
        } else if (st->state == READING_HEAD || st->state == READING_BODY)
            due = st->since_ns + read_limit;
        else if (st->state == ANSWERING && !st->send_cut)
            due = st->answer_ns + send_limit;
        else
            continue;
        if (now >= due) {
            nghttp2_submit_rst_stream(c->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
            if (st->state == ANSWERING || st->state == LIVE)
                st->send_cut = true; /* reset once; its close frees it */
            else
                st->since_ns = now;
            reset = true;
            continue;
        }
        if (due < next)
            next = due;
    }
    if (!c->streams) {
        if (now - c->idle_since_ns >= read_limit)
            return 0;
        next = c->idle_since_ns + read_limit;
    }
    if (reset)
        return 1; /* round again once the resets are sent and the streams freed */
    if (next == UINT64_MAX)
        return -1;
    return (int)((next - now) / 1000000ull + 1);
}

/*
 * An answer ended (END_STREAM sent) before the request did: the stream is
 * reset with NO_ERROR (RFC 9113, section 8.1), so a peer that never ends
 * its request cannot keep the stream, or what it holds, open.
 */
static int on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *user) {
    (void)user;
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        nghttp2_session_get_stream_remote_close(s, f->hd.stream_id) == 0)
        nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
    return 0;
}

static void serve(struct h2conn *c) {
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    int r = nghttp2_session_server_new(&c->s, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (r != 0)
        return;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, PL_H2_MAX_STREAMS},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, PL_H2_MAX_HEADER_BYTES},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
    };
    nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0]));
    nghttp2_session_set_local_window_size(c->s, NGHTTP2_FLAG_NONE, 0, 16 << 20);
    uint8_t buf[16384];
    for (;;) {
        int wait = deadlines(c);
        if (wait == 0) { /* idle past the read deadline */
            nghttp2_session_terminate_session(c->s, NGHTTP2_NO_ERROR);
            flush(c);
            break;
        }
        if (flush(c) < 0)
            break;
        if (!nghttp2_session_want_read(c->s) && !nghttp2_session_want_write(c->s))
            break;
        struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = c->evfd, .events = POLLIN}};
        bool buffered = c->ssl && SSL_pending(c->ssl) > 0; /* decrypted, not yet read */
        int n = poll(p, 2, buffered ? 0 : wait);
        if (n < 0 && errno != EINTR)
            break;
        if (p[1].revents & POLLIN)
            take_answers(c);
        if (buffered || (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t got = read_some(c, buf, sizeof(buf));
            if (got < 0)
                break;
            if (got > 0 && nghttp2_session_mem_recv(c->s, buf, (size_t)got) < 0)
                break;
        }
    }
}

void pl_h2_serve(struct pl_h2 *h2, int fd, SSL *ssl, const char *fingerprint) {
    struct h2conn *c = calloc(1, sizeof(*c));
    if (!c) {
        SSL_free(ssl);
        close(fd);
        return;
    }
    c->h2 = h2;
    c->fd = fd;
    c->ssl = ssl;
    snprintf(c->fingerprint, sizeof(c->fingerprint), "%s", fingerprint ? fingerprint : "");
    if (ssl) /* TLS reads and writes wait in poll, never in the socket */
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    c->idle_since_ns = pl_now_ns();
    c->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->idle, NULL);
    int one = 1; /* each flush is a whole answer: no reason to hold it back */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    pthread_mutex_lock(&h2->lock);
    bool stopping = h2->stopping;
    if (!stopping) {
        c->next = h2->conns;
        if (h2->conns)
            h2->conns->prev = c;
        h2->conns = c;
        h2->n++;
    }
    pthread_mutex_unlock(&h2->lock);
    if (!stopping && c->evfd >= 0)
        serve(c);
    /* The session is over: shut the socket (a peer still sending gets its
     * end) and wait for the runs still going, then free their streams. */
    if (c->ssl)
        SSL_shutdown(c->ssl); /* close_notify, best effort */
    shutdown(fd, SHUT_RDWR);
    pthread_mutex_lock(&c->lock);
    while (c->workers)
        pthread_cond_wait(&c->idle, &c->lock);
    pthread_mutex_unlock(&c->lock);
    if (c->evfd >= 0)
        take_answers(c);
    for (struct stream *st = c->streams; st; st = c->streams)
        stream_free(st);
    written(c); /* or never will be: the connection is over */
    nghttp2_session_del(c->s);
    SSL_free(c->ssl);
    close(fd);
    if (c->evfd >= 0)
        close(c->evfd);
    pthread_mutex_lock(&h2->lock);
    if (!stopping) {
        if (c->prev)
            c->prev->next = c->next;
        else
            h2->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        h2->n--;
        pthread_cond_broadcast(&h2->gone);
    }
    pthread_mutex_unlock(&h2->lock);
    pthread_cond_destroy(&c->idle);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void pl_h2_stop(struct pl_h2 *h2) {
    if (!h2)
        return;
    pthread_mutex_lock(&h2->lock);
    h2->stopping = true;
    for (struct h2conn *c = h2->conns; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    while (h2->n)
        pthread_cond_wait(&h2->gone, &h2->lock);
    pthread_mutex_unlock(&h2->lock);
    pthread_mutex_lock(&h2->plock);
    h2->pool_stop = true;
    pthread_cond_broadcast(&h2->work);
    while (h2->threads)
        pthread_cond_wait(&h2->ended, &h2->plock);
    pthread_mutex_unlock(&h2->plock);
    pthread_cond_destroy(&h2->work);
    pthread_cond_destroy(&h2->ended);
    pthread_mutex_destroy(&h2->plock);
    pthread_cond_destroy(&h2->gone);
    pthread_mutex_destroy(&h2->lock);
    free(h2);
}
