/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.c: Describe, routing and the two phases of a call (the head, before
 * any body byte is read; the body).  The Run path is api_run.c, the
 * session methods api_sessions.c, the answers api_answer.c.  See api.h.
 */
#include "api_int.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../broker/broker.h"
#include "codec.h"
#include "console.h"
#include "../core/buf.h"
#include "../core/canon.h"
#include "../core/clock.h"
#include "../core/ids.h"
#include "../core/jsonscan.h"
#include "../core/log.h"
#include "../core/record.h"
#include "../core/request.h"

#define SERVICE_PREFIX "/plimsoll.v1.SandboxService/"

/* ---- Describe ------------------------------------------------------------- */

static json_t *op_json(const struct pl_op_caps *c, bool with_languages) {
    json_t *o =
        json_pack("{s:b, s:s, s:i, s:b, s:b}", "supported", c->supported, "engine",
                  c->engine ? c->engine : "", "max_timeout_ms", (json_int_t)c->max_timeout_ms,
                  "grants", c->grants, "streams", c->supported && c->streams);
    if (o && with_languages) {
        json_t *langs = json_array();
        for (int i = 0; i < 4 && c->languages[i]; i++)
            json_array_append_new(langs, json_string(c->languages[i]));
        json_object_set_new(o, "languages", langs);
    }
    return o;
}

json_t *pl_api_describe(struct pl_api *api) {
    const struct pl_config *c = api->config;
    const struct pl_provider_info *in = &api->provider->info;
    struct pl_error err = {0};
    bool ready = pl_provider_ready(api->provider, &err) == 0;
    json_t *cell_langs = json_array();
    for (int i = 0; i < 4 && in->session.languages[i]; i++)
        json_array_append_new(cell_langs, json_string(in->session.languages[i]));
    json_t *d = json_pack(
        "{s:s, s:s, s:s, s:s, s:b, s:s, s:b, s:o, s:{s:o, s:o, s:o, s:o},"
        " s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b}}",
        "version", "plimsolld " PL_VERSION, "provider", pl_provider_name(api->provider),
        "isolation", pl_tier_name(in->tier), "runtime", in->runtime ? in->runtime : "", "ready",
        ready, "ready_detail", ready ? "" : err.message, "supports_sessions", in->session.supported,
        "languages", cell_langs, "operations", "snippet", op_json(&in->snippet, true), "project",
        op_json(&in->project, true), "module", op_json(&in->module, false), "session",
        op_json(&in->session, true), "limits", "memory_mb", (json_int_t)c->memory_mb,
        "total_memory_mb", (json_int_t)c->total_memory_mb, "max_concurrent",
        (json_int_t)c->max_concurrent, "effective_concurrency",
        (json_int_t)api->effective_concurrency, "per_key_concurrent",
        (json_int_t)c->per_key_concurrent, "rate_per_min", (json_int_t)c->rate_per_min,
        "rate_burst", (json_int_t)c->rate_burst, "default_timeout_ms",
        (json_int_t)c->default_timeout_ms, "output_bytes", (json_int_t)c->output_bytes,
        "max_snippet_bytes", (json_int_t)PL_SNIPPET_MAX_BYTES, "max_request_bytes",
        (json_int_t)c->max_request_bytes, "memory_budget_applies",
        pl_provider_memory_budget_applies(api->provider));
    json_t *ops = json_object_get(d, "operations"), *lim = json_object_get(d, "limits");
    if (ops)
        json_object_set_new(ops, "files", op_json(&in->files, false));
    if (ops)
        json_object_set_new(ops, "artifacts",
                            json_pack("{s:b, s:b}", "project", in->artifacts.project, "snippet",
                                      in->artifacts.snippet));
    if (ops)
        json_object_set_new(ops, "display",
                            json_pack("{s:b, s:b, s:b, s:b}", "python", in->display.python,
                                      "javascript", in->display.javascript, "matplotlib",
                                      in->display.matplotlib, "pandas", in->display.pandas));
    if (lim) {
        json_object_set_new(lim, "file_read_bytes", json_integer(c->file_read_bytes));
        json_object_set_new(lim, "file_list_entries", json_integer(c->file_list_entries));
        json_object_set_new(lim, "session_max_lifetime_s", json_integer(c->session_max_lifetime_s));
        json_object_set_new(lim, "collect_files", json_integer(c->collect_files));
        json_object_set_new(lim, "collect_bytes", json_integer(c->collect_bytes));
        json_object_set_new(lim, "display_outputs", json_integer(c->display_outputs));
        json_object_set_new(lim, "display_output_bytes", json_integer(c->display_output_bytes));
        json_object_set_new(lim, "display_bytes", json_integer(c->display_bytes));
    }
    json_t *checks = json_array();
    for (size_t i = 0; checks && i < 8 && in->checks[i]; i++)
        json_array_append_new(checks, json_string(in->checks[i]));
    if (d && checks && in->checks[0])
        json_object_set(d, "startup_checks", checks);
    json_decref(checks);
    /* The warm pools, as they are now (what Describe says at this moment,
     * not configuration). */
    struct pl_pool_report pools[PL_MAX_POOLS];
    size_t np = pl_provider_pools(api->provider, pools, PL_MAX_POOLS);
    json_t *pj = np ? json_array() : NULL;
    for (size_t i = 0; pj && i < np; i++) {
        const struct pl_pool_stats *st = &pools[i].stats;
#define U32(v) (json_int_t)((v) > UINT32_MAX ? UINT32_MAX : (v))
        json_array_append_new(pj, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "name",
                                            pools[i].name, "waiting", (json_int_t)st->waiting,
                                            "target", (json_int_t)pools[i].target, "made",
                                            U32(st->made), "taken", U32(st->taken), "missed",
                                            U32(st->missed), "make_ms", (json_int_t)st->make_ms,
                                            "refill_per_min", (json_int_t)st->refill_per_min));
#undef U32
    }
    if (d && pj)
        json_object_set(d, "pools", pj);
    json_decref(pj);
    if (d && json_object_set_new(json_object_get(d, "limits"), "min_memory_mb",
                                 json_integer((json_int_t)in->min_memory_mb)) < 0) {
        json_decref(d);
        return NULL;
    }
    return d;
}

/* ---- routing ---------------------------------------------------------------- */

/* A bearer key, when one is sent, decides; without one, the TLS client
 * certificate's principal (PLIMSOLL_TLS_CLIENT_CERTS_FILE), if any. */
const char *api_authenticate(struct pl_api *api, const struct pl_api_request *rq) {
    if (!rq->authorization)
        return rq->tls_principal;
    const char *key;
    size_t len;
    if (pl_bearer_parse(rq->authorization, &key, &len) < 0)
        return NULL;
    return pl_keys_authenticate(api->keys, key, len);
}

static void refuse_too_large(struct pl_api *api, struct pl_api_response *rs, struct call_log *lg) {
    struct pl_error err = {0};
    pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                 "request body exceeds PLIMSOLL_MAX_REQUEST_BYTES (%u bytes)",
                 api->config->max_request_bytes);
    api_refuse(api, rs, lg, &err, NULL);
}

/*
 * The request bodies in flight: every caller's together, and each
 * caller's own (principals are the keys file's strings, so a pointer
 * names one).  One lock: it is taken twice per call with a body.
 */
struct pl_key_bytes {
    struct pl_key_bytes *next;
    const char *principal;
    size_t held;
};

static pthread_mutex_t body_bytes_lock = PTHREAD_MUTEX_INITIALIZER;

static struct pl_key_bytes **key_bytes_find(struct pl_api *api, const char *principal) {
    struct pl_key_bytes **k = &api->key_bytes;
    while (*k && (*k)->principal != principal)
        k = &(*k)->next;
    return k;
}

/* Hold n bytes for principal; which bound refused it in *ret_which. */
static int hold_body_bytes(struct pl_api *api, const char *principal, size_t n,
                           const char **ret_which) {
    const struct pl_config *c = api->config;
    pthread_mutex_lock(&body_bytes_lock);
    size_t all = atomic_load(&api->body_bytes);
    struct pl_key_bytes **k = key_bytes_find(api, principal);
    size_t mine = *k ? (*k)->held : 0;
    int r = -1;
    if (n > c->request_bytes_in_flight || all > c->request_bytes_in_flight - n)
        *ret_which = "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT";
    else if (n > c->key_request_bytes_in_flight || mine > c->key_request_bytes_in_flight - n)
        *ret_which = "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT";
    else if (!*k && !(*k = calloc(1, sizeof(**k))))
        *ret_which = "memory"; /* out of it: refused like a spent budget */
    else {
        (*k)->principal = principal;
        (*k)->held += n;
        atomic_store(&api->body_bytes, all + n);
        r = 0;
    }
    pthread_mutex_unlock(&body_bytes_lock);
    return r;
}

/* Hold n bytes more for principal whatever the bounds say: an answer is
 * made by a run that already happened, so it is charged, never refused;
 * the caller's next bodies are refused at the head while it is over. */
static int charge_body_bytes(struct pl_api *api, const char *principal, size_t n) {
    pthread_mutex_lock(&body_bytes_lock);
    struct pl_key_bytes **k = key_bytes_find(api, principal);
    int r = -1;
    if (*k || (*k = calloc(1, sizeof(**k)))) {
        (*k)->principal = principal;
        (*k)->held += n;
        atomic_fetch_add(&api->body_bytes, n);
        r = 0;
    }
    pthread_mutex_unlock(&body_bytes_lock);
    return r;
}

static void release_body_bytes(struct pl_api *api, const char *principal, size_t n) {
    pthread_mutex_lock(&body_bytes_lock);
    atomic_fetch_sub(&api->body_bytes, n);
    struct pl_key_bytes **k = key_bytes_find(api, principal);
    if (*k && ((*k)->held -= n) == 0) {
        struct pl_key_bytes *gone = *k;
        *k = gone->next;
        free(gone);
    }
    pthread_mutex_unlock(&body_bytes_lock);
}

/* One request's head on its way through the head's checks. */
struct head_call {
    struct pl_api *api;
    const struct pl_api_request *rq;
    struct pl_api_response *rs;
    struct pl_api_call *call;
    struct call_log *lg;
    bool get;           /* GET or HEAD */
    const char *method; /* the path's method, under SERVICE_PREFIX */
};

/* ---- the head's rungs: each true when it answered (rs holds it) ---------- */

/* The console: public static assets, no data (PLIMSOLL_CONSOLE=off: none,
 * the path answers 404 as any other). */
static bool serve_console(struct head_call *h) {
    const struct pl_console_asset *asset =
        h->api->config->console && h->get ? pl_console_find(h->rq->path) : NULL;
    if (!asset)
        return false;
    h->lg->method = "console";
    char *body = malloc(asset->len + 1);
    if (!body) {
        api_set_text(h->rs, 500, "out of memory\n");
        return true;
    }
    memcpy(body, asset->body, asset->len + 1);
    api_set_body(h->rs, 200, asset->content_type, body);
    h->rs->body_len = asset->len;
    return true;
}

static bool serve_healthz(struct head_call *h) {
    if (strcmp(h->rq->path, "/healthz") != 0 || !h->get)
        return false;
    h->lg->method = "healthz";
    api_set_text(h->rs, 200, "ok\n");
    return true;
}

static bool serve_readyz(struct head_call *h) {
    if (strcmp(h->rq->path, "/readyz") != 0 || !h->get)
        return false;
    h->lg->method = "readyz";
    struct pl_error err = {0};
    if (atomic_load(&h->api->draining) || atomic_load(&h->api->leaving)) {
        api_set_text(h->rs, 503, "not ready: shutting down\n");
    } else if (pl_provider_ready(h->api->provider, &err) < 0) {
        struct pl_buf b = {0};
        pl_buf_printf(&b, "not ready: %s\n", err.message);
        api_set_body(h->rs, 503, "text/plain; charset=utf-8", b.data);
    } else {
        api_set_text(h->rs, 200, "ready\n");
    }
    return true;
}

/* /metrics: a key's (401 UNAUTHENTICATED without one). */
static bool serve_metrics(struct head_call *h) {
    if (strcmp(h->rq->path, "/metrics") != 0 || !h->get)
        return false;
    struct pl_api *api = h->api;
    h->lg->method = "metrics";
    h->lg->principal = api_authenticate(api, h->rq);
    if (!h->lg->principal) {
        api_set_text(h->rs, 401, "unauthenticated: send Authorization: Bearer <key>\n");
        h->lg->outcome = "refused";
        h->lg->reason = PL_REASON_UNAUTHENTICATED;
        pl_metrics_refusal(api->metrics, PL_REASON_UNAUTHENTICATED);
        return true;
    }
    struct pl_error err = {0};
    struct pl_buf b = {0};
    int ready = pl_provider_ready(api->provider, &err) == 0 && !atomic_load(&api->draining) &&
                !atomic_load(&api->leaving);
    if (pl_metrics_render(api->metrics, pl_admission_in_flight(api->admission), ready, &b) < 0) {
        pl_buf_free(&b);
        api_set_text(h->rs, 500, "out of memory\n");
        return true;
    }
    api_set_body(h->rs, 200, "text/plain; version=0.0.4; charset=utf-8", b.data);
    return true;
}

/* A typed refusal of the head, logged and counted. */
static bool refuse_head(struct head_call *h, enum pl_reason reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool refuse_head(struct head_call *h, enum pl_reason reason, const char *fmt, ...) {
    char text[sizeof(((struct pl_error *)0)->message)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    struct pl_error err = {0};
    pl_error_set(&err, reason, "%s", text);
    api_refuse(h->api, h->rs, h->lg, &err, NULL);
    return true;
}

/* An answer in HTTP's own terms, before the protocol is known to be one
 * this method speaks (no Connect or gRPC error a client could read). */
static bool refuse_http(struct head_call *h, int status, const char *text) {
    api_set_text(h->rs, status, text);
    h->lg->outcome = "refused";
    return true;
}

/* gRPC's health service and server reflection (api_health.c). */
static bool serve_grpc_services(struct head_call *h) {
    if (api_svc_head(h->api, h->rq, h->call, h->rs))
        return true;
    if (h->call->svc != API_SVC_NONE)
        h->method = h->lg->method;
    return false;
}

/* Whether the call is one of those, whose rung decided path, method,
 * content type and key. */
static bool svc_call(const struct head_call *h) {
    return h->call->svc != API_SVC_NONE;
}

/* The MCP server (api_mcp.c), where PLIMSOLL_MCP is on. */
static bool serve_mcp(struct head_call *h) {
    if (!h->api->config->mcp || strcmp(h->rq->path, "/mcp") != 0)
        return false;
    return api_mcp_head(h->api, h->rq, h->call, h->rs);
}

/* NOT_FOUND: a path outside the service. */
static bool check_service_path(struct head_call *h) {
    if (svc_call(h))
        return false;
    if (strncmp(h->rq->path, SERVICE_PREFIX, strlen(SERVICE_PREFIX)) != 0) {
        h->lg->method = "other";
        return refuse_head(h, PL_REASON_NOT_FOUND, "no route for %.128s", h->rq->path);
    }
    h->method = h->rq->path + strlen(SERVICE_PREFIX);
    return false;
}

/* NOT_FOUND: a method the service does not have (the session methods are
 * its own, even where a daemon keeps sessions off). */
static bool check_service_method(struct head_call *h) {
    if (svc_call(h))
        return false;
    static const char *const unary_and_stream[] = {"Run", "Describe", "Explain", "RunStream"};
    h->lg->method = "other";
    for (size_t i = 0; i < sizeof(unary_and_stream) / sizeof(unary_and_stream[0]); i++)
        if (strcmp(h->method, unary_and_stream[i]) == 0)
            h->lg->method = unary_and_stream[i];
    for (const char *const *m = api_session_methods; *m; m++)
        if (strcmp(h->method, *m) == 0)
            h->lg->method = *m;
    if (strcmp(h->lg->method, "other") == 0)
        return refuse_head(h, PL_REASON_NOT_FOUND, "no method %.64s in plimsoll.v1.SandboxService",
                           h->method);
    return false;
}

/* INVALID_REQUEST: Origin given more than once, where CORS is on
 * (api_cors.c); both transports alike. */
static bool check_one_origin(struct head_call *h) {
    if (svc_call(h))
        return false;
    return api_cors_repeated(h->api, h->rq, h->rs, h->lg);
}

/* A browser's preflight from a listed origin: 204 with the grant
 * (api_cors.c); any other falls through to 405 as every OPTIONS does. */
static bool answer_preflight(struct head_call *h) {
    return api_cors_preflight(h->api, h->rq, h->call->cors_origin, h->rs, h->lg);
}

/* 405: Connect, gRPC and gRPC-Web calls are POSTs. */
static bool check_post(struct head_call *h) {
    if (svc_call(h))
        return false;
    if (strcmp(h->rq->http_method, "POST") == 0)
        return false;
    h->rs->allow = "POST";
    return refuse_http(h, 405, "method not allowed: Connect unary calls use POST\n");
}

/* 415: a content type that is no protocol this daemon speaks. */
static bool check_protocol(struct head_call *h) {
    if (svc_call(h))
        return false;
    static const char *const codec_names[] = {[API_CONNECT_JSON] = "json",
                                              [API_CONNECT_PROTO] = "proto",
                                              [API_GRPC] = "grpc",
                                              [API_GRPC_WEB] = "grpc-web",
                                              [API_CONNECT_STREAM_JSON] = "connect+json",
                                              [API_CONNECT_STREAM_PROTO] = "connect+proto"};
    h->lg->codec = codec_names[h->call->protocol];
    if (h->call->protocol != API_UNKNOWN)
        return false;
    return refuse_http(h, 415,
                       "unsupported media type: send Content-Type: application/json or "
                       "application/proto (Connect; application/connect+json or +proto for "
                       "the streaming methods), application/grpc (over HTTP/2) or "
                       "application/grpc-web\n");
}

/* 415: Connect's unary types for a streaming method, or the other way. */
static bool check_protocol_fits_method(struct head_call *h) {
    if (svc_call(h))
        return false;
    enum api_protocol p = h->call->protocol;
    bool streams = api_method_streams(h->lg->method);
    bool connect_stream = p == API_CONNECT_STREAM_JSON || p == API_CONNECT_STREAM_PROTO;
    if (streams && (p == API_CONNECT_JSON || p == API_CONNECT_PROTO))
        return refuse_http(h, 415,
                           "unsupported media type: a server-streaming method takes Connect's "
                           "application/connect+json or application/connect+proto (or gRPC, "
                           "gRPC-Web)\n");
    if (!streams && connect_stream)
        return refuse_http(h, 415,
                           "unsupported media type: application/connect+json and +proto are for "
                           "the server-streaming methods (RunStream, RunCellStream); a unary call "
                           "takes application/json or application/proto\n");
    return false;
}

/* 415: gRPC is HTTP/2's (no gRPC client can read trailers over HTTP/1.1). */
static bool check_grpc_transport(struct head_call *h) {
    if (svc_call(h))
        return false;
    if (h->call->protocol != API_GRPC || h->rq->http2)
        return false;
    return refuse_http(h, 415,
                       "gRPC needs HTTP/2 (h2c, with prior knowledge); over HTTP/1.1 use "
                       "application/grpc-web or Connect\n");
}

/* UNAUTHENTICATED: no key, or one the keys file does not list. */
static bool check_key(struct head_call *h) {
    if (svc_call(h))
        return false;
    h->lg->principal = api_authenticate(h->api, h->rq);
    if (h->lg->principal)
        return false;
    return refuse_head(h, PL_REASON_UNAUTHENTICATED,
                       "send Authorization: Bearer <key> with a key listed in the keys file");
}

/* WRONG_ROUTE: a Plimsoll-Route that names another daemon (a fleet's
 * proxy sent a session's call here because its own daemon is down,
 * draining or gone).  Decided before the body is read; it names no id. */
static bool check_route(struct head_call *h) {
    const char *route = h->rq->route, *self = h->api->config->instance;
    if (svc_call(h) || !route || strcmp(route, self) == 0)
        return false;
    if (!pl_route_valid(route))
        return refuse_head(h, PL_REASON_INVALID_REQUEST,
                           "Plimsoll-Route: not a route key (1 to 63 of [A-Za-z0-9._-])");
    return refuse_head(h, PL_REASON_WRONG_ROUTE,
                       "the call is for daemon \"%s\" and this is \"%s\": that daemon was not "
                       "reached (it is down, draining or gone, and a session it held is gone "
                       "with it); nothing ran",
                       route, self);
}

/* INVALID_REQUEST: a deadline header that does not read (Connect's, or
 * gRPC's for gRPC and gRPC-Web). */
static bool check_deadline_headers(struct head_call *h) {
    const struct pl_api_request *rq = h->rq;
    if (rq->connect_timeout && api_connect_timeout(rq->connect_timeout, &h->lg->deadline_ms) < 0)
        return refuse_head(h, PL_REASON_INVALID_REQUEST,
                           "Connect-Timeout-Ms: \"%.32s\" is not 1 to 10 digits of milliseconds",
                           rq->connect_timeout);
    bool grpc = h->call->protocol == API_GRPC || h->call->protocol == API_GRPC_WEB;
    if (grpc && rq->grpc_timeout && api_grpc_timeout(rq->grpc_timeout, &h->lg->deadline_ms) < 0)
        return refuse_head(h, PL_REASON_INVALID_REQUEST,
                           "grpc-timeout: \"%.32s\" is not 1 to 8 digits and a unit (H M S m u n)",
                           rq->grpc_timeout);
    return false;
}

/* INVALID_REQUEST: a body announced (or read) over PLIMSOLL_MAX_REQUEST_BYTES. */
static bool check_body_size(struct head_call *h) {
    const struct pl_api_request *rq = h->rq;
    if (!rq->body_too_large &&
        !(rq->length_known && rq->content_length > h->api->config->max_request_bytes))
        return false;
    refuse_too_large(h->api, h->rs, h->lg);
    return true;
}

/*
 * AT_CAPACITY: the body's bytes do not fit the daemon's or the caller's
 * bytes in flight.  The last rung: it holds the bytes (call->held), so
 * every refusal before it holds nothing to give back.
 */
static bool hold_body(struct head_call *h) {
    struct pl_api *api = h->api;
    if (h->call->slot)
        return false; /* a live stream: its messages have their own bound */
    const struct pl_api_request *rq = h->rq;
    /* A body of unknown length (chunked) may grow to the largest allowed. */
    size_t want = rq->length_known ? (size_t)rq->content_length : api->config->max_request_bytes;
    /* An HTTP/2 stream's kept headers wait with its body, within the one
     * request's largest (so a key's share, at least that, always fits one). */
    size_t most = api->config->max_request_bytes;
    want = want + rq->head_bytes < most ? want + rq->head_bytes : most; /* want <= most: above */
    const char *which = NULL;
    if (want && hold_body_bytes(api, h->lg->principal, want, &which) < 0) {
        bool mine = strcmp(which, "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT") == 0;
        return refuse_head(h, PL_REASON_AT_CAPACITY,
                           "%s request bodies being read or decided are at %s (%u bytes); this "
                           "body (%zu bytes) was not read; retry after a short wait",
                           mine ? "this caller's" : "the daemon's", which,
                           mine ? api->config->key_request_bytes_in_flight
                                : api->config->request_bytes_in_flight,
                           want);
    }
    h->call->held = want;
    return false;
}

/*
 * The head's ladder: everything the request line and the headers decide,
 * before a body byte is read, in this order.  The first rung that answers
 * ends the call; nothing after it is looked at.
 */
static const struct head_rung {
    const char *name; /* for a reader: which rung, which answer */
    bool (*answers)(struct head_call *h);
} head_ladder[] = {
    {"the console's assets (GET, PLIMSOLL_CONSOLE)", serve_console},
    {"/healthz (GET)", serve_healthz},
    {"/readyz (GET)", serve_readyz},
    {"/metrics (GET, a key)", serve_metrics},
    {"gRPC's health and reflection (PLIMSOLL_HEALTH, PLIMSOLL_REFLECTION)", serve_grpc_services},
    {"/mcp (PLIMSOLL_MCP): its own head (403, 405, 415, 406, 401, 400)", serve_mcp},
    {"a path under the service (NOT_FOUND)", check_service_path},
    {"a method of the service (NOT_FOUND)", check_service_method},
    {"one Origin (INVALID_REQUEST, PLIMSOLL_CORS_ORIGINS)", check_one_origin},
    {"a preflight from a listed origin (204, PLIMSOLL_CORS_ORIGINS)", answer_preflight},
    {"POST (405)", check_post},
    {"a content type (415)", check_protocol},
    {"the method's content types (415)", check_protocol_fits_method},
    {"gRPC over HTTP/2 (415)", check_grpc_transport},
    {"a key (UNAUTHENTICATED)", check_key},
    {"the route (WRONG_ROUTE, Plimsoll-Route)", check_route},
    {"deadline headers (INVALID_REQUEST)", check_deadline_headers},
    {"PLIMSOLL_MAX_REQUEST_BYTES (INVALID_REQUEST)", check_body_size},
    {"the bytes in flight (AT_CAPACITY); holds the body's", hold_body},
};

/* True when rs holds the answer; false when the call needs its body, with
 * call->method set and the body's bytes held. */
static bool route_head(struct pl_api *api, const struct pl_api_request *rq,
                       struct pl_api_response *rs, struct pl_api_call *call) {
    struct head_call h = {
        .api = api,
        .rq = rq,
        .rs = rs,
        .call = call,
        .lg = &call->lg,
        .get = strcmp(rq->http_method, "GET") == 0 || strcmp(rq->http_method, "HEAD") == 0,
    };
    call->protocol = api_protocol_of(rq->content_type);
    if (strncmp(rq->path, SERVICE_PREFIX, strlen(SERVICE_PREFIX)) == 0)
        call->cors_origin = api_cors_origin(api, rq);
    for (size_t i = 0; i < sizeof(head_ladder) / sizeof(head_ladder[0]); i++)
        if (head_ladder[i].answers(&h))
            return true;
    call->method = h.lg->method;
    return false;
}

/* The body phase on JSON: the body is read (or was cut at the limit). */
static void route_json(struct pl_api *api, const struct pl_api_request *rq,
                       struct pl_api_response *rs, struct pl_api_call *call) {
    struct call_log *lg = &call->lg;
    struct pl_error err = {0};
    if (rq->body_too_large) {
        refuse_too_large(api, rs, lg);
        return;
    }
    if (strcmp(call->method, "Run") == 0 || strcmp(call->method, "RunStream") == 0) {
        api_run_request(api, lg->principal, rq->body, rq->body_len, NULL, PL_PAYLOAD_NONE, rs, lg);
        return;
    }
    if (strcmp(call->method, "Explain") == 0) {
        api_handle_explain(api, lg->principal, rq, rs, lg);
        return;
    }
    if (strcmp(call->method, "Describe") == 0) {
        if (pl_empty_request_decode(rq->body, rq->body_len, &err) < 0) {
            api_refuse(api, rs, lg, &err, NULL);
            return;
        }
        json_t *d = pl_api_describe(api);
        if (!d) {
            api_set_text(rs, 500, "out of memory\n");
            return;
        }
        lg->outcome = "ok";
        api_set_json(rs, 200, d);
        return;
    }
    api_handle_session_call(api, lg->principal, call->method, rq, rs, lg);
}

/*
 * The body phase.  A binary call is the JSON call it decodes to: the same
 * checks, refusals and record (whose request digest is over the canonical
 * JSON either way); its 200 answer is encoded back, and an error stays
 * Connect's JSON error body, as the protocol has it for every codec.
 */
static void route_body(struct pl_api *api, const struct pl_api_request *rq,
                       struct pl_api_response *rs, struct pl_api_call *call) {
    if (call->svc == API_SVC_MCP) {
        if (rq->body_too_large)
            refuse_too_large(api, rs, &call->lg);
        else
            api_mcp_body(api, call, rq, rs);
        return;
    }
    if (call->svc != API_SVC_NONE) {
        api_svc_check(api, call, rq, rs);
        return;
    }
    if (call->protocol == API_CONNECT_JSON || rq->body_too_large) {
        route_json(api, rq, rs, call);
        return;
    }
    struct pl_error err = {0};
    const char *msg = rq->body;
    size_t msglen = rq->body_len;
    if (call->protocol != API_CONNECT_PROTO &&
        api_grpc_unwrap(rq->body, rq->body_len, &msg, &msglen, &err) < 0) {
        api_refuse(api, rs, &call->lg, &err, NULL);
        return;
    }
    if (call->protocol == API_CONNECT_STREAM_JSON) {
        /* Connect's streaming JSON: the one message is the JSON request. */
        struct pl_api_request jrq = *rq;
        jrq.body = msg;
        jrq.body_len = msglen;
        route_json(api, &jrq, rs, call);
        return;
    }
    const ProtobufCMessageDescriptor *in, *out;
    if (pl_codec_method(call->method, &in, &out) < 0) {
        pl_error_set(&err, PL_REASON_INTERNAL, "no descriptor for %s", call->method);
        api_refuse(api, rs, &call->lg, &err, NULL);
        return;
    }
    json_t *req = pl_codec_decode(in, (const uint8_t *)msg, msglen, &err);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!body) {
        if (err.reason == PL_REASON_NONE)
            pl_error_set(&err, PL_REASON_INTERNAL, "out of memory decoding the request");
        api_refuse(api, rs, &call->lg, &err, NULL);
        return;
    }
    struct pl_api_request jrq = *rq;
    jrq.body = body;
    jrq.body_len = strlen(body);
    route_json(api, &jrq, rs, call);
    free(body);
    if (call->lg.stream)
        return; /* the stream encodes its own messages */
    if (rs->status != 200 || !rs->body || !rs->content_type ||
        strcmp(rs->content_type, "application/json") != 0)
        return;
    json_t *answer = json_loadb(rs->body, rs->body_len, JSON_ALLOW_NUL, NULL);
    struct pl_buf b = {0};
    if (!answer || pl_codec_encode(out, answer, &b, &err) < 0) {
        json_decref(answer);
        pl_buf_free(&b);
        pl_api_response_clear(rs);
        if (err.reason == PL_REASON_NONE)
            pl_error_set(&err, PL_REASON_INTERNAL, "out of memory encoding the answer");
        pl_log("error", "answer outside the contract",
               json_pack("{s:s, s:s}", "method", call->method, "error", err.message));
        api_refuse(api, rs, &call->lg, &err, NULL);
        return;
    }
    json_decref(answer);
    pl_api_response_clear(rs);
    api_set_body(rs, 200, "application/proto", b.data ? b.data : strdup(""));
    rs->body_len = b.len;
}

/* Count the call, and log it unless it was a probe that succeeded. */
void api_log_call(struct pl_api *api, const struct pl_api_request *rq, struct pl_api_response *rs,
                  const struct call_log *lg, uint64_t t0) {
    if (!rs->body)
        api_set_text(rs, 500, "internal error\n");
    bool probe = strcmp(lg->method, "healthz") == 0 || strcmp(lg->method, "readyz") == 0 ||
                 strcmp(lg->method, "console") == 0;
    bool quiet = probe || strcmp(lg->method, "health.Check") == 0;
    if (!probe) {
        enum pl_code code = lg->reason ? pl_reason_code(lg->reason) : PL_CODE_UNKNOWN;
        pl_metrics_request(api->metrics, lg->method, code,
                           rs->status == 200 || rs->status == 204 || /* 204: a preflight's grant */
                               rs->status == 202); /* 202: an MCP notification taken */
    }
    if (quiet && rs->status == 200)
        return; /* probes answer often; log them only when they fail */
    json_t *f = json_pack(
        "{s:s?, s:s, s:s, s:s, s:s, s:i, s:f}", "principal", lg->principal, "method", lg->method,
        "path_kind",
        strncmp(rq->path, SERVICE_PREFIX, strlen(SERVICE_PREFIX)) == 0 ? "rpc" : "http", "outcome",
        lg->outcome, "reason", lg->reason ? pl_reason_name(lg->reason) : "", "status",
        (json_int_t)rs->status, "duration_ms", (double)(pl_now_ns() - t0) / 1e6);
    if (f && lg->codec)
        json_object_set_new(f, "codec", json_string(lg->codec));
    if (f && lg->cors)
        json_object_set_new(f, "cors", json_string(lg->cors));
    if (f && lg->grant_profile) {
        json_object_set_new(f, "grant_profile", json_string(lg->grant_profile));
        json_object_set_new(f, "broker_calls", json_integer(lg->broker_calls));
        json_object_set_new(f, "broker_refused", json_integer(lg->broker_refused));
    }
    pl_log("info", "request", f);
}

/* Whether the answer is gRPC's (gRPC over HTTP/1.1 is refused in HTTP's
 * own terms: no gRPC client can read trailers there). */
static bool grpc_answer(const struct pl_api_call *call, const struct pl_api_request *rq) {
    return call->protocol == API_GRPC_WEB || (call->protocol == API_GRPC && rq->http2);
}

bool pl_api_begin(struct pl_api *api, const struct pl_api_request *rq,
                  struct pl_api_call **ret_call, struct pl_api_response *rs) {
    uint64_t t0 = pl_now_ns();
    memset(rs, 0, sizeof(*rs));
    *ret_call = NULL;
    struct pl_api_call *call = calloc(1, sizeof(*call));
    if (!call) {
        api_set_text(rs, 500, "out of memory\n");
        return true;
    }
    call->lg = (struct call_log){.principal = NULL, .method = "other", .outcome = "ok"};
    call->t0 = t0;
    if (route_head(api, rq, rs, call)) {
        api_log_call(api, rq, rs, &call->lg, t0);
        struct pl_api_stream *s = NULL;
        if ((api_method_streams(call->lg.method) && (call->protocol == API_CONNECT_STREAM_JSON ||
                                                     call->protocol == API_CONNECT_STREAM_PROTO)) ||
            api_svc_connect_end(call, rs))
            s = api_stream_new(api, call->protocol, rq->content_type, NULL, NULL);
        if (call->svc == API_SVC_MCP)
            api_mcp_wrap(rs);
        else if (s)
            api_stream_end(s, rs); /* Connect's end message alone */
        else if (grpc_answer(call, rq))
            api_grpc_wrap(call->protocol, rq->content_type, rs);
        /* An OPTIONS's answer is a preflight's own: the grant, or no CORS
         * header at all (whatever refused it). */
        if (strcmp(rq->http_method, "OPTIONS") != 0)
            api_cors_answer(call->cors_origin, rs);
        free(call);
        return true;
    }
    *ret_call = call;
    return false;
}

bool pl_api_call_streams(const struct pl_api_call *call) {
    return call && call->method && api_method_streams(call->method);
}

void pl_api_finish(struct pl_api *api, struct pl_api_call *call, const struct pl_api_request *rq,
                   struct pl_api_response *rs) {
    uint64_t t0 = pl_now_ns();
    memset(rs, 0, sizeof(*rs));
    struct pl_api_stream *s = NULL;
    if (pl_api_call_streams(call)) {
        s = api_stream_new(api, call->protocol, rq->content_type, rq->stream, call->cors_origin);
        if (!s) {
            api_set_text(rs, 500, "out of memory\n");
            api_log_call(api, rq, rs, &call->lg, t0);
            return;
        }
        call->lg.stream = s;
    }
    route_body(api, rq, rs, call);
    api_log_call(api, rq, rs, &call->lg, t0);
    call->lg.stream = NULL;
    if (call->svc == API_SVC_MCP)
        api_mcp_wrap(rs);
    else if (s)
        api_stream_end(s, rs);
    else if (grpc_answer(call, rq))
        api_grpc_wrap(call->protocol, rq->content_type, rs);
    api_cors_answer(call->cors_origin, rs);
}

void pl_api_call_hold_answer(struct pl_api *api, struct pl_api_call *call, size_t answer_bytes) {
    if (!call || !call->lg.principal || answer_bytes <= call->held)
        return;
    if (charge_body_bytes(api, call->lg.principal, answer_bytes - call->held) == 0)
        call->held = answer_bytes;
}

void pl_api_call_free(struct pl_api *api, struct pl_api_call *call) {
    if (!call)
        return;
    if (call->held)
        release_body_bytes(api, call->lg.principal, call->held);
    api_svc_release(api, call);
    free(call);
}

void pl_api_handle(struct pl_api *api, const struct pl_api_request *rq,
                   struct pl_api_response *rs) {
    struct pl_api_request head = *rq;
    if (!head.length_known) { /* a body given whole: its length is known */
        head.length_known = true;
        head.content_length = rq->body_len;
    }
    struct pl_api_call *call;
    if (pl_api_begin(api, &head, &call, rs))
        return;
    pl_api_finish(api, call, rq, rs);
    pl_api_call_free(api, call);
}
