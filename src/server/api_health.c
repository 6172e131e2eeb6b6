/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_health.c: grpc.health.v1.Health (Check, Watch) and gRPC server
 * reflection (grpc.reflection.v1 and v1alpha), answered from the daemon's
 * own state.  See api.h (the live calls) and api_int.h.
 *
 * Health: "" (the server) and plimsoll.v1.SandboxService are SERVING
 * exactly when GET /readyz answers 200: not draining, and the provider's
 * readiness check holds (the provider's own cache decides how often that
 * asks anything outside, as for /readyz).  Check asks it as /readyz does,
 * once per call; Watch streams read one answer the daemon keeps for all
 * of them, asked at most once a PL_HEALTH_POLL_MS.  An unknown service
 * is NOT_FOUND for Check and SERVICE_UNKNOWN for Watch (the protocol's
 * rule).  A Watch ends cleanly (OK) at PLIMSOLL_HEALTH_WATCH_TIMEOUT_MS
 * after it opened, or after its NOT_SERVING when the daemon drains; the
 * protocol has the client watch again.
 *
 * Reflection: one answer per request, in order, as each request's
 * message is complete (reflect.c), within the stream's budgets: the
 * message's bytes, the messages, the absolute deadline, the streams at
 * once, and the answers a peer leaves unread.
 *
 * The streams (Watch, reflection) speak gRPC, gRPC-Web (its trailers a
 * 0x80 frame) or Connect's streaming protocol (application/connect+proto
 * or +json) over HTTP/2, with the same budgets.  Connect's messages have
 * gRPC's envelope (a flags byte, a big-endian length); a request's flags
 * must be 0 (no compression is negotiated, and a client never ends its
 * stream with a message); Connect-Protocol-Version, when sent, must be 1.
 * The stream ends with Connect's end message (flags 0x02, JSON: {} or
 * {"error": <the Connect error>}) at HTTP 200 where gRPC has trailers; a
 * refusal before the stream opens is that end message alone.  A
 * bidirectional stream needs HTTP/2: Connect's reflection over HTTP/1.1 is
 * answered 505 and the connection closed, as connect-go answers it.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/buf.h"
#include "../core/clock.h"
#include "../core/jsonscan.h"
#include "../core/log.h"
#include "api_int.h"
#include "reflect.h"

#define PL_HEALTH_POLL_MS 1000
/* The longest service name a health request may carry. */
#define PL_HEALTH_SERVICE_MAX 256

static const struct svc_route {
    const char *path;
    enum api_svc svc;
    const char *method; /* the log's and the metrics' name */
} routes[] = {
    {"/grpc.health.v1.Health/Check", API_SVC_HEALTH_CHECK, "health.Check"},
    {"/grpc.health.v1.Health/Watch", API_SVC_HEALTH_WATCH, "health.Watch"},
    {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", API_SVC_REFLECTION, "reflection"},
    {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", API_SVC_REFLECTION,
     "reflection"},
};

/* The services list_services names: plimsoll's, and these. */
static const char *const services_all[] = {
    "plimsoll.v1.SandboxService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
    NULL,
};
static const char *const services_no_health[] = {
    "plimsoll.v1.SandboxService",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
    NULL,
};

/* ---- readiness ------------------------------------------------------------ */

/* What /readyz would answer now. */
static enum pl_health_status status_now(struct pl_api *api) {
    if (atomic_load(&api->draining) || atomic_load(&api->leaving))
        return PL_HEALTH_NOT_SERVING;
    struct pl_error err = {0};
    return pl_provider_ready(api->provider, &err) == 0 ? PL_HEALTH_SERVING : PL_HEALTH_NOT_SERVING;
}

static pthread_mutex_t poll_lock = PTHREAD_MUTEX_INITIALIZER;

/* The Watch streams' answer: asked again when PL_HEALTH_POLL_MS has
 * passed, by one of them; the others meanwhile read the last one. */
static enum pl_health_status status_polled(struct pl_api *api, uint64_t now) {
    if (atomic_load(&api->draining) || atomic_load(&api->leaving))
        return PL_HEALTH_NOT_SERVING;
    if (pthread_mutex_trylock(&poll_lock) != 0) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        return api->health_at_ns ? (enum pl_health_status)api->health_status
                                 : PL_HEALTH_NOT_SERVING;
    }
    if (!api->health_at_ns || now - api->health_at_ns >= PL_HEALTH_POLL_MS * 1000000ull) {
        api->health_status = status_now(api);
        api->health_at_ns = now ? now : 1;
    }
    enum pl_health_status st = (enum pl_health_status)api->health_status;
    pthread_mutex_unlock(&poll_lock);
    return st;
}

/* Whether the daemon answers for service (its health's names). */
static bool service_known(const char *service) {
    return service[0] == '\0' || strcmp(service, "plimsoll.v1.SandboxService") == 0;
}

/* ---- the head ---------------------------------------------------------------- */

/* Whether the call's protocol is Connect's streaming one. */
static bool connect_streaming(enum api_protocol p) {
    return p == API_CONNECT_STREAM_JSON || p == API_CONNECT_STREAM_PROTO;
}

bool api_svc_connect_end(const struct pl_api_call *call, const struct pl_api_response *rs) {
    return (call->svc == API_SVC_HEALTH_WATCH || call->svc == API_SVC_REFLECTION) &&
           connect_streaming(call->protocol) && rs->content_type &&
           strcmp(rs->content_type, "application/json") == 0;
}

static bool refuse(struct pl_api *api, struct pl_api_response *rs, struct call_log *lg,
                   enum pl_reason reason, const char *msg) {
    struct pl_error err = {0};
    pl_error_set(&err, reason, "%s", msg);
    api_refuse(api, rs, lg, &err, NULL);
    return true;
}

/* Take one of cap slots in *n; false when all are taken. */
static bool take_slot(atomic_uint *n, unsigned cap) {
    unsigned cur = atomic_load(n);
    do {
        if (cur >= cap)
            return false;
    } while (!atomic_compare_exchange_weak(n, &cur, cur + 1));
    return true;
}

bool api_svc_head(struct pl_api *api, const struct pl_api_request *rq, struct pl_api_call *call,
                  struct pl_api_response *rs) {
    const struct svc_route *r = NULL;
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        if (strcmp(rq->path, routes[i].path) == 0)
            r = &routes[i];
    if (!r)
        return false;
    struct call_log *lg = &call->lg;
    const struct pl_config *c = api->config;
    lg->method = r->method;
    call->svc = r->svc; /* a Connect stream's refusal is its end message (api_svc_connect_end) */
    bool health = r->svc != API_SVC_REFLECTION;
    enum pl_open_auth auth = health ? c->health : c->reflection;
    if (auth == PL_AUTH_OFF)
        return refuse(api, rs, lg, PL_REASON_NOT_FOUND,
                      health ? "grpc.health.v1.Health is off (PLIMSOLL_HEALTH=off)"
                             : "server reflection is off (PLIMSOLL_REFLECTION=off)");
    if (strcmp(rq->http_method, "POST") != 0) {
        rs->allow = "POST";
        api_set_text(rs, 405, "method not allowed: gRPC calls use POST\n");
        lg->outcome = "refused";
        return true;
    }
    enum api_protocol p = call->protocol;
    if (r->svc == API_SVC_REFLECTION && connect_streaming(p) && !rq->http2) {
        /* A bidirectional stream cannot work over HTTP/1.1: connect-go's
         * answer, 505 with the connection closed, so a client that waits
         * for answers while it sends is not left hanging. */
        api_set_text(rs, 505,
                     "HTTP version not supported: a bidirectional stream needs HTTP/2 (h2c with "
                     "prior knowledge, or TLS with ALPN h2)\n");
        char *close = strdup("close");
        if (close)
            rs->headers[rs->nheaders++] = (struct pl_api_header){"Connection", close};
        lg->outcome = "refused";
        return true;
    }
    bool unary_ok = p == API_CONNECT_JSON || p == API_CONNECT_PROTO || p == API_GRPC_WEB ||
                    (p == API_GRPC && rq->http2);
    bool stream_ok = (p == API_GRPC || p == API_GRPC_WEB || connect_streaming(p)) && rq->http2;
    if (r->svc == API_SVC_HEALTH_CHECK ? !unary_ok : !stream_ok) {
        api_set_text(rs, 415,
                     r->svc == API_SVC_HEALTH_CHECK
                         ? "unsupported media type: Check takes application/grpc (over HTTP/2), "
                           "application/grpc-web, application/json or application/proto\n"
                         : "unsupported media type: this stream takes application/grpc, "
                           "application/grpc-web or Connect's application/connect+proto or "
                           "+json, over HTTP/2 (h2c or TLS)\n");
        lg->outcome = "refused";
        return true;
    }
    static const char *const codec_names[] = {[API_CONNECT_JSON] = "json",
                                              [API_CONNECT_PROTO] = "proto",
                                              [API_GRPC] = "grpc",
                                              [API_GRPC_WEB] = "grpc-web",
                                              [API_CONNECT_STREAM_JSON] = "connect+json",
                                              [API_CONNECT_STREAM_PROTO] = "connect+proto"};
    lg->codec = codec_names[p];
    bool connect = p == API_CONNECT_JSON || p == API_CONNECT_PROTO || connect_streaming(p);
    if (connect && rq->connect_version && strcmp(rq->connect_version, "1") != 0)
        return refuse(api, rs, lg, PL_REASON_INVALID_REQUEST,
                      "Connect-Protocol-Version must be \"1\" when it is sent");
    /* A key, when one is sent, is checked whatever the setting: a wrong
     * one is never taken for none. */
    lg->principal = NULL;
    if (rq->authorization || auth == PL_AUTH_KEY) {
        const char *key;
        size_t len;
        if (rq->authorization && pl_bearer_parse(rq->authorization, &key, &len) == 0)
            lg->principal = pl_keys_authenticate(api->keys, key, len);
        else if (!rq->authorization)
            lg->principal = rq->tls_principal;
        if (!lg->principal)
            return refuse(api, rs, lg, PL_REASON_UNAUTHENTICATED,
                          "send Authorization: Bearer <key> with a key listed in the keys file");
    } else {
        lg->principal = rq->tls_principal;
    }
    if (r->svc == API_SVC_HEALTH_CHECK)
        return false; /* the deadline headers and the body's bytes, as any unary call */
    if (r->svc == API_SVC_HEALTH_WATCH) {
        if (rq->conn_watches >= c->health_watch_streams_per_connection)
            return refuse(api, rs, lg, PL_REASON_AT_CAPACITY,
                          "this connection's Watch streams are at "
                          "PLIMSOLL_HEALTH_WATCH_STREAMS_PER_CONNECTION; retry after a short wait");
        if (!take_slot(&api->watch_streams, c->health_watch_streams))
            return refuse(api, rs, lg, PL_REASON_AT_CAPACITY,
                          "the daemon's Watch streams are at PLIMSOLL_HEALTH_WATCH_STREAMS; retry "
                          "after a short wait");
    } else if (!take_slot(&api->reflection_streams, c->reflection_streams)) {
        return refuse(api, rs, lg, PL_REASON_AT_CAPACITY,
                      "the daemon's reflection streams are at PLIMSOLL_REFLECTION_STREAMS; retry "
                      "after a short wait");
    }
    call->slot = true;
    return false;
}

void api_svc_release(struct pl_api *api, struct pl_api_call *call) {
    if (!call->slot)
        return;
    call->slot = false;
    atomic_fetch_sub(
        call->svc == API_SVC_HEALTH_WATCH ? &api->watch_streams : &api->reflection_streams, 1);
}

/* ---- Check ------------------------------------------------------------------- */

/* The service a JSON HealthCheckRequest names: {"service": "..."} or {}. */
static int check_json(const char *body, size_t len, char *ret, size_t cap, struct pl_error *err) {
    if (pl_json_check_bounds(body, len, err) < 0)
        return -1;
    json_error_t je;
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(v)) {
        json_decref(v);
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "a HealthCheckRequest is a JSON object");
    }
    const char *k;
    json_t *x;
    ret[0] = '\0';
    json_object_foreach(v, k, x) {
        if (strcmp(k, "service") != 0 || !json_is_string(x) || json_string_length(x) >= cap) {
            json_decref(v);
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "a HealthCheckRequest has one field, service, a string of at "
                                "most %zu bytes",
                                cap - 1);
        }
        snprintf(ret, cap, "%s", json_string_value(x));
    }
    json_decref(v);
    return 0;
}

void api_svc_check(struct pl_api *api, struct pl_api_call *call, const struct pl_api_request *rq,
                   struct pl_api_response *rs) {
    struct call_log *lg = &call->lg;
    struct pl_error err = {0};
    char service[PL_HEALTH_SERVICE_MAX];
    if (call->svc != API_SVC_HEALTH_CHECK) { /* a live call has no body phase */
        pl_error_set(&err, PL_REASON_INTERNAL, "a stream's method answered whole");
        api_refuse(api, rs, lg, &err, NULL);
        return;
    }
    if (rq->body_too_large) {
        pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                     "request body exceeds PLIMSOLL_MAX_REQUEST_BYTES (%u bytes)",
                     api->config->max_request_bytes);
        api_refuse(api, rs, lg, &err, NULL);
        return;
    }
    bool json = call->protocol == API_CONNECT_JSON;
    const char *msg = rq->body;
    size_t len = rq->body_len;
    int r;
    if (json)
        r = check_json(rq->body, rq->body_len, service, sizeof(service), &err);
    else if (call->protocol != API_CONNECT_PROTO &&
             api_grpc_unwrap(rq->body, rq->body_len, &msg, &len, &err) < 0)
        r = -1;
    else
        r = pl_health_request_decode((const uint8_t *)msg, len, service, sizeof(service), &err);
    if (r < 0) {
        api_refuse(api, rs, lg, &err, NULL);
        return;
    }
    if (!service_known(service)) {
        pl_error_set(&err, PL_REASON_NOT_FOUND,
                     "unknown service \"%.128s\": this daemon answers for \"\" and "
                     "plimsoll.v1.SandboxService",
                     service);
        api_refuse(api, rs, lg, &err, NULL);
        return;
    }
    enum pl_health_status st = status_now(api);
    lg->outcome = "ok";
    if (json) {
        api_set_json(
            rs, 200,
            json_pack("{s:s}", "status", st == PL_HEALTH_SERVING ? "SERVING" : "NOT_SERVING"));
        return;
    }
    struct pl_buf b = {0};
    if (pl_health_response_encode(st, &b) < 0) {
        pl_buf_free(&b);
        api_set_text(rs, 500, "out of memory\n");
        return;
    }
    api_set_body(rs, 200, "application/proto", b.data ? b.data : strdup(""));
    rs->body_len = b.len;
}

/* ---- the live calls -------------------------------------------------------------- */

struct pl_api_live {
    struct pl_api *api;
    struct pl_api_call *call; /* the transport's */
    uint64_t deadline_ns;
    struct pl_buf in; /* what came of the message being read */
    unsigned messages;
    bool watching; /* a Watch's request came: its status went out */
    enum pl_health_status last;
    bool connect;  /* Connect's streaming protocol, else gRPC */
    bool json;     /* application/connect+json */
    bool grpc_web; /* gRPC-Web: its trailers are a frame (0x80) */
    char service[PL_HEALTH_SERVICE_MAX];
    bool ended;
    const char *end_why; /* for the log line */
};

bool pl_api_call_live(const struct pl_api_call *call) {
    return call && call->slot;
}

bool pl_api_live_is_watch(const struct pl_api_live *l) {
    return l && l->call->svc == API_SVC_HEALTH_WATCH;
}

struct pl_api_live *pl_api_live_open(struct pl_api *api, struct pl_api_call *call,
                                     const struct pl_api_request *rq,
                                     struct pl_api_response *head) {
    struct pl_api_live *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->api = api;
    l->call = call;
    unsigned ms = call->svc == API_SVC_HEALTH_WATCH ? api->config->health_watch_timeout_ms
                                                    : api->config->reflection_timeout_ms;
    l->deadline_ns = pl_deadline_in_ms(ms);
    l->connect = connect_streaming(call->protocol);
    l->json = call->protocol == API_CONNECT_STREAM_JSON;
    l->grpc_web = call->protocol == API_GRPC_WEB;
    *head = (struct pl_api_response){
        .status = 200,
        .content_type = l->json      ? "application/connect+json"
                        : l->connect ? "application/connect+proto"
                                     : api_grpc_ctype(call->protocol, rq->content_type)};
    return l;
}

static void add_trailer(struct pl_api_response *end, const char *name, char *value) {
    if (!value || end->ntrailers >= PL_API_MAX_HEADERS) {
        free(value);
        return;
    }
    end->trailers[end->ntrailers].name = name;
    end->trailers[end->ntrailers].value = value;
    end->ntrailers++;
}

static int put_message(struct pl_buf *out, const struct pl_buf *m) {
    return api_envelope(out, 0, m->data, m->len);
}

/* Connect's end message: {} or {"error": the Connect error body of rs}. */
static int connect_end(const struct pl_api_response *rs, bool failed, struct pl_buf *out) {
    struct pl_buf m = {0};
    int r;
    if (!failed)
        r = pl_buf_append(&m, "{}", 2);
    else if (rs->body && rs->content_type && strcmp(rs->content_type, "application/json") == 0)
        r = pl_buf_printf(&m, "{\"error\":%.*s}", (int)rs->body_len, rs->body);
    else
        r = pl_buf_puts(&m, "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}");
    if (r == 0)
        r = api_envelope(out, 0x02, m.data, m.len);
    pl_buf_free(&m);
    return r;
}

/* The call ends: OK when err is NULL, else err as gRPC's status (the
 * same ErrorInfo a Connect error carries), in end's trailers, or last in
 * out as gRPC-Web's trailer frame or Connect's end message.  Returns 1. */
static int live_end(struct pl_api_live *l, const struct pl_error *err, const char *why,
                    struct pl_buf *out, struct pl_api_response *end) {
    *end = (struct pl_api_response){.status = 200};
    l->ended = true;
    l->end_why = why;
    struct pl_api_response rs = {0};
    if (err)
        api_refuse(l->api, &rs, &l->call->lg, err, NULL);
    if (l->connect) {
        /* Out of memory here: the stream ends without its end, which a
         * client reads as a broken stream. */
        connect_end(&rs, err != NULL, out);
        pl_api_response_clear(&rs);
        return 1;
    }
    unsigned code = err ? 2 : 0; /* UNKNOWN, unless the refusal says */
    char *message = NULL, *details = NULL;
    if (err)
        api_grpc_status_of(&rs, &code, &message, &details);
    pl_api_response_clear(&rs);
    if (l->grpc_web) { /* the trailers as a frame of their own, flags 0x80 */
        (void)api_grpcweb_trailers(out, code, message, details);
        free(message);
        free(details);
        return 1;
    }
    char num[16];
    snprintf(num, sizeof(num), "%u", code);
    add_trailer(end, "grpc-status", strdup(num));
    add_trailer(end, "grpc-message", message);
    add_trailer(end, "grpc-status-details-bin", details);
    return 1;
}

static int live_refuse(struct pl_api_live *l, enum pl_reason reason, const char *why,
                       struct pl_buf *out, struct pl_api_response *end, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static int live_refuse(struct pl_api_live *l, enum pl_reason reason, const char *why,
                       struct pl_buf *out, struct pl_api_response *end, const char *fmt, ...) {
    struct pl_error err = {0};
    char text[sizeof(err.message)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    pl_error_set(&err, reason, "%s", text);
    return live_end(l, &err, why, out, end);
}

static int watch_send(struct pl_api_live *l, enum pl_health_status st, struct pl_buf *out) {
    static const char *const names[] = {[PL_HEALTH_UNKNOWN] = "UNKNOWN",
                                        [PL_HEALTH_SERVING] = "SERVING",
                                        [PL_HEALTH_NOT_SERVING] = "NOT_SERVING",
                                        [PL_HEALTH_SERVICE_UNKNOWN] = "SERVICE_UNKNOWN"};
    struct pl_buf m = {0};
    int r = l->json ? pl_buf_printf(&m, "{\"status\":\"%s\"}", names[st])
                    : pl_health_response_encode(st, &m);
    if (r == 0)
        r = put_message(out, &m);
    pl_buf_free(&m);
    l->last = st;
    return r;
}

/* Watch's status for its service now (polled). */
static enum pl_health_status watch_status(struct pl_api_live *l, uint64_t now) {
    if (!service_known(l->service))
        return PL_HEALTH_SERVICE_UNKNOWN;
    return status_polled(l->api, now);
}

/* One complete request message. */
static int live_message(struct pl_api_live *l, const uint8_t *msg, size_t len, struct pl_buf *out,
                        struct pl_api_response *end) {
    struct pl_error err = {0};
    if (l->call->svc == API_SVC_HEALTH_WATCH) {
        if (l->watching)
            return live_refuse(l, PL_REASON_INVALID_REQUEST, "second request", out, end,
                               "Watch takes one HealthCheckRequest");
        int r = l->json ? check_json((const char *)msg, len, l->service, sizeof(l->service), &err)
                        : pl_health_request_decode(msg, len, l->service, sizeof(l->service), &err);
        if (r < 0)
            return live_end(l, &err, "malformed", out, end);
        l->watching = true;
        if (watch_send(l, watch_status(l, pl_now_ns()), out) < 0)
            return live_refuse(l, PL_REASON_INTERNAL, "memory", out, end, "out of memory");
        return 0;
    }
    struct pl_buf q = {0}, m = {0}, j = {0};
    const char *const *services =
        l->api->config->health == PL_AUTH_OFF ? services_no_health : services_all;
    if (l->json) { /* the JSON request as its protobuf bytes, the answer back */
        if (pl_reflect_request_from_json((const char *)msg, len, &q, &err) < 0) {
            pl_buf_free(&q);
            return live_end(l, &err, "malformed", out, end);
        }
        msg = (const uint8_t *)(q.data ? q.data : "");
        len = q.len;
    }
    int r = pl_reflect_answer(msg, len, services, &m, &err);
    pl_buf_free(&q);
    if (r < 0) {
        pl_buf_free(&m);
        return live_end(l, &err, "malformed", out, end);
    }
    if (l->json)
        r = pl_reflect_response_to_json((const uint8_t *)(m.data ? m.data : ""), m.len, &j);
    if (r == 0)
        r = put_message(out, l->json ? &j : &m);
    pl_buf_free(&m);
    pl_buf_free(&j);
    if (r < 0)
        return live_refuse(l, PL_REASON_INTERNAL, "memory", out, end, "out of memory");
    return 0;
}

int pl_api_live_feed(struct pl_api_live *l, const void *data, size_t len, size_t pending,
                     struct pl_buf *out, struct pl_api_response *end) {
    if (l->ended)
        return 1;
    const struct pl_config *c = l->api->config;
    unsigned max_bytes = l->call->svc == API_SVC_HEALTH_WATCH ? PL_HEALTH_SERVICE_MAX + 16
                                                              : c->reflection_message_bytes;
    const uint8_t *p = data;
    size_t before = out->len; /* out may be where the pending bytes wait: count what is new */
    while (len) {
        /* The prefix first, then no more of the message than it announced. */
        size_t want = 5;
        if (l->in.len >= 5) {
            const uint8_t *h = (const uint8_t *)l->in.data;
            want = 5 + ((size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4]);
        }
        size_t n = want - l->in.len < len ? want - l->in.len : len;
        if (pl_buf_append(&l->in, p, n) < 0)
            return live_refuse(l, PL_REASON_INTERNAL, "memory", out, end, "out of memory");
        p += n;
        len -= n;
        if (l->in.len == 5) {
            const uint8_t *h = (const uint8_t *)l->in.data;
            uint32_t mlen =
                (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
            if (h[0] & 1)
                return live_refuse(l, PL_REASON_INVALID_REQUEST, "compressed", out, end,
                                   "a compressed message (flags 0x%02x): no compression was "
                                   "negotiated; plimsoll takes none",
                                   h[0]);
            if (h[0] != 0)
                return live_refuse(l, PL_REASON_INVALID_REQUEST, "flags", out, end,
                                   "a request message with flags 0x%02x: a request's are 0 (its "
                                   "stream ends with the HTTP/2 stream, never with a message)",
                                   h[0]);
            if (mlen > max_bytes)
                return live_refuse(
                    l, PL_REASON_INVALID_REQUEST, "message too large", out, end,
                    "a request message of %u bytes, past %s (%u bytes); nothing of it was read",
                    mlen,
                    l->call->svc == API_SVC_HEALTH_WATCH ? "a HealthCheckRequest's largest"
                                                         : "PLIMSOLL_REFLECTION_MESSAGE_BYTES",
                    max_bytes);
        }
        if (l->in.len < 5)
            continue;
        const uint8_t *h = (const uint8_t *)l->in.data;
        size_t mlen = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4];
        if (l->in.len < 5 + mlen)
            continue;
        /* A whole message. */
        if (++l->messages > c->reflection_messages && l->call->svc == API_SVC_REFLECTION)
            return live_refuse(l, PL_REASON_INVALID_REQUEST, "too many messages", out, end,
                               "this stream sent more than PLIMSOLL_REFLECTION_MESSAGES (%u) "
                               "requests; open another",
                               c->reflection_messages);
        size_t unread = pending + (out->len - before);
        if (unread > PL_API_LIVE_PENDING_BYTES)
            return live_refuse(l, PL_REASON_INVALID_REQUEST, "answers unread", out, end,
                               "%zu bytes of this stream's answers wait to be read, past %u; a "
                               "request is answered once the ones before it were taken",
                               unread, PL_API_LIVE_PENDING_BYTES);
        int r = live_message(l, (const uint8_t *)l->in.data + 5, mlen, out, end);
        l->in.len = 0;
        if (r)
            return r;
    }
    return 0;
}

int pl_api_live_half_close(struct pl_api_live *l, struct pl_buf *out, struct pl_api_response *end) {
    if (l->ended)
        return 1;
    if (l->in.len)
        return live_refuse(l, PL_REASON_INVALID_REQUEST, "cut message", out, end,
                           "the request ended inside a message (%zu bytes of it came)", l->in.len);
    if (l->call->svc == API_SVC_REFLECTION)
        return live_end(l, NULL, "the peer closed", out, end); /* every answer is in out */
    if (!l->watching)
        return live_refuse(l, PL_REASON_INVALID_REQUEST, "no request", out, end,
                           "Watch needs its HealthCheckRequest");
    return 0; /* a Watch goes on: the request is in */
}

int pl_api_live_poll(struct pl_api_live *l, uint64_t now, struct pl_buf *out,
                     struct pl_api_response *end, uint64_t *ret_next_ns) {
    *ret_next_ns = l->deadline_ns;
    if (l->ended)
        return 1;
    if (l->watching) {
        enum pl_health_status st = watch_status(l, now);
        if (st != l->last && watch_send(l, st, out) < 0)
            return live_refuse(l, PL_REASON_INTERNAL, "memory", out, end, "out of memory");
        if (atomic_load(&l->api->draining))
            return live_end(l, NULL, "draining", out, end);
        uint64_t next = now + PL_HEALTH_POLL_MS * 1000000ull;
        if (next < *ret_next_ns)
            *ret_next_ns = next;
    }
    if (now >= l->deadline_ns) {
        if (l->call->svc == API_SVC_HEALTH_WATCH)
            return live_end(l, NULL, "PLIMSOLL_HEALTH_WATCH_TIMEOUT_MS", out, end);
        return live_end(l, NULL, "PLIMSOLL_REFLECTION_TIMEOUT_MS", out, end);
    }
    return 0;
}

void pl_api_live_free(struct pl_api_live *l) {
    if (!l)
        return;
    struct call_log *lg = &l->call->lg;
    json_t *f =
        json_pack("{s:s?, s:s, s:s, s:s, s:s, s:i, s:s, s:f}", "principal", lg->principal, "method",
                  lg->method, "path_kind", "rpc", "outcome", lg->outcome, "reason",
                  lg->reason ? pl_reason_name(lg->reason) : "", "messages", (json_int_t)l->messages,
                  "ended", l->end_why ? l->end_why : "the peer left", "duration_ms",
                  (double)(pl_now_ns() - l->call->t0) / 1e6);
    if (f && lg->codec)
        json_object_set_new(f, "codec", json_string(lg->codec));
    pl_log("info", "request", f);
    pl_metrics_request(l->api->metrics, lg->method,
                       lg->reason ? pl_reason_code(lg->reason) : PL_CODE_UNKNOWN, !lg->reason);
    pl_buf_free(&l->in);
    free(l);
}
