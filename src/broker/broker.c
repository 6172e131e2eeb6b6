/* SPDX-License-Identifier: Apache-2.0 */
/* broker.c: one run's broker: decide, forward, answer (see broker.h). */
#include "broker.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/buf.h"
#include "../core/canon.h"
#include "../core/clock.h"
#include "broker_sock.h"

#define MAX_TARGET_BYTES 8192

struct pl_broker {
    const struct pl_grant_profile *p;
    char *credential; /* header value, e.g. "Bearer ..."; wiped on free */
    uint64_t deadline_ns;
    atomic_uint calls;
    atomic_uint refused;
    struct pl_broker_sock *sock;
    unsigned refused_peers;         /* refused by the access check on sockets since closed */
    struct pl_broker_reply current; /* the socket's reply in progress */
};

/* Guest headers passed on to the API; everything else is dropped (the
 * guest cannot set Authorization, Cookie, Host or hop-by-hop headers). */
static const char *const forward_headers[] = {
    "accept",        "accept-language",   "content-type",    "if-match",
    "if-none-match", "if-modified-since", "idempotency-key", "x-request-id",
};

/* API answer headers passed back to the guest. */
static const char *const reply_headers[] = {
    "content-type",  "etag",          "location",     "retry-after",
    "last-modified", "cache-control", "x-request-id",
};

static bool listed(const char *const *list, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(list[i], name) == 0)
            return true;
    return false;
}

static void wipe_free(char *s) {
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

int pl_broker_new(const struct pl_grant_profile *p, pl_grants_env_fn env, void *env_userdata,
                  const char *principal, uint64_t deadline_ns, struct pl_broker **ret_broker,
                  struct pl_error *err) {
    struct pl_broker *b = calloc(1, sizeof(*b));
    if (!b)
        return pl_error_set(err, PL_REASON_INTERNAL, "broker: out of memory");
    if (pl_grant_credential(p, env, env_userdata, principal, time(NULL), &b->credential, err) < 0) {
        free(b);
        return pl_error_wrap(err,
                             "grant profile \"%s\": could not obtain the credential: ", p->name);
    }
    b->p = p;
    b->deadline_ns = deadline_ns;
    *ret_broker = b;
    return 0;
}

void pl_broker_unlisten(struct pl_broker *b) {
    if (!b || !b->sock)
        return;
    b->refused_peers += pl_broker_sock_refused(b->sock);
    pl_broker_sock_stop(b->sock);
    b->sock = NULL;
}

void pl_broker_free(struct pl_broker *b) {
    if (!b)
        return;
    pl_broker_unlisten(b);
    pl_broker_reply_clear(&b->current);
    wipe_free(b->credential);
    free(b);
}

unsigned pl_broker_calls(const struct pl_broker *b) {
    return b ? atomic_load(&b->calls) : 0;
}

size_t pl_broker_max_request_bytes(const struct pl_broker *b) {
    return b->p->max_request_bytes;
}

size_t pl_broker_max_response_bytes(const struct pl_broker *b) {
    return b->p->max_response_bytes;
}

unsigned pl_broker_max_calls(const struct pl_broker *b) {
    return b->p->max_calls;
}

unsigned pl_broker_refused(const struct pl_broker *b) {
    return b ? atomic_load(&b->refused) : 0;
}

void pl_broker_reply_clear(struct pl_broker_reply *r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->nheaders; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    free(r->body);
    memset(r, 0, sizeof(*r));
}

static void add_header(struct pl_broker_reply *r, const char *name, const char *value,
                       size_t value_len) {
    if (r->nheaders >= PL_BROKER_MAX_REPLY_HEADERS)
        return;
    char *n = strdup(name), *v = strndup(value, value_len);
    if (!n || !v) {
        free(n);
        free(v);
        return;
    }
    r->headers[r->nheaders].name = n;
    r->headers[r->nheaders].value = v;
    r->nheaders++;
}

/* An answer made by the broker itself: refusals and upstream failures. */
__attribute__((format(printf, 4, 5))) static void
own_reply(struct pl_broker_reply *r, int status, const char *code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pl_broker_reply_clear(r);
    r->status = status;
    json_t *o = json_pack("{s:s, s:s}", "error", code, "message", msg);
    r->body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    r->body_len = r->body ? strlen(r->body) : 0;
    add_header(r, "content-type", "application/json", 16);
    bool refusal = status < 500;
    add_header(r, "x-plimsoll-broker", refusal ? "refused" : "upstream-error", refusal ? 7 : 14);
}

static void refuse(struct pl_broker *b, struct pl_broker_reply *r, int status, const char *code,
                   const char *what) {
    atomic_fetch_add(&b->refused, 1);
    own_reply(r, status, code, "%s", what);
    r->refused = true;
}

/* The query part must be printable ASCII without spaces or '#'. */
static bool query_ok(const char *q) {
    for (; *q; q++)
        if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f || *q == '#')
            return false;
    return true;
}

/* ---- forwarding with libcurl ------------------------------------------------ */

struct transfer {
    struct pl_broker_reply *r;
    struct pl_buf body;
    size_t cap;
    bool too_large;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud) {
    struct transfer *t = ud;
    size_t n = size * nmemb;
    if (t->body.len + n > t->cap) {
        t->too_large = true;
        return 0; /* aborts the transfer */
    }
    return pl_buf_append(&t->body, data, n) < 0 ? 0 : n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud) {
    struct transfer *t = ud;
    size_t n = size * nmemb;
    if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        /* A new response (after a 100 Continue, say): forget the earlier headers. */
        struct pl_broker_reply *r = t->r;
        for (size_t i = 0; i < r->nheaders; i++) {
            free(r->headers[i].name);
            free(r->headers[i].value);
        }
        r->nheaders = 0;
        return n;
    }
    const char *colon = memchr(data, ':', n);
    if (!colon || colon == data || (size_t)(colon - data) > 64)
        return n;
    char name[65];
    size_t nl = (size_t)(colon - data);
    for (size_t i = 0; i < nl; i++)
        name[i] = (char)((data[i] >= 'A' && data[i] <= 'Z') ? data[i] + 32 : data[i]);
    name[nl] = '\0';
    if (!listed(reply_headers, sizeof(reply_headers) / sizeof(*reply_headers), name))
        return n;
    const char *v = colon + 1, *end = data + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if ((size_t)(end - v) <= 1024)
        add_header(t->r, name, v, (size_t)(end - v));
    return n;
}

static void wipe_slist(struct curl_slist *l) {
    for (struct curl_slist *i = l; i; i = i->next)
        OPENSSL_cleanse(i->data, strlen(i->data));
    curl_slist_free_all(l);
}

static void forward(struct pl_broker *b, const char *method, const char *target,
                    const struct pl_http_header *headers, size_t nheaders, const char *body,
                    size_t body_len, struct pl_broker_reply *r) {
    const struct pl_grant_profile *p = b->p;
    long timeout_ms = (long)p->call_timeout_ms;
    if (b->deadline_ns) {
        uint64_t now = pl_now_ns();
        if (now >= b->deadline_ns) {
            own_reply(r, 504, "deadline", "the run's deadline has passed");
            return;
        }
        uint64_t left_ms = (b->deadline_ns - now) / 1000000ull;
        if (left_ms < p->call_timeout_ms)
            timeout_ms = left_ms < 1 ? 1 : (long)left_ms;
    }

    struct pl_buf url = {0};
    pl_buf_printf(&url, "%s%s", p->base_url, target);
    struct curl_slist *hl = NULL, *tmp;
    bool has_ct = false;
    for (size_t i = 0; i < nheaders; i++) {
        if (!listed(forward_headers, sizeof(forward_headers) / sizeof(*forward_headers),
                    headers[i].name))
            continue;
        if (strcasecmp(headers[i].name, "content-type") == 0)
            has_ct = true;
        struct pl_buf h = {0};
        pl_buf_printf(&h, "%s: %s", headers[i].name, headers[i].value);
        tmp = h.data ? curl_slist_append(hl, h.data) : NULL;
        pl_buf_free(&h);
        if (tmp)
            hl = tmp;
    }
    if (!has_ct) {
        tmp = curl_slist_append(hl, "Content-Type:"); /* no form default from curl */
        if (tmp)
            hl = tmp;
    }
    tmp = curl_slist_append(hl, "Expect:");
    if (tmp)
        hl = tmp;
    struct pl_buf cred = {0};
    pl_buf_printf(&cred, "%s: %s", p->header, b->credential);
    tmp = cred.data ? curl_slist_append(hl, cred.data) : NULL;
    if (cred.data)
        OPENSSL_cleanse(cred.data, cred.len);
    pl_buf_free(&cred);
    CURL *c = curl_easy_init();
    if (!tmp || !c || !url.data) {
        wipe_slist(tmp ? tmp : hl);
        if (c)
            curl_easy_cleanup(c);
        pl_buf_free(&url);
        own_reply(r, 502, "broker_error", "the broker ran out of memory");
        return;
    }
    hl = tmp;

    struct transfer t = {.r = r, .cap = p->max_response_bytes};
    curl_easy_setopt(c, CURLOPT_URL, url.data);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (p->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, p->ca_file);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROXY, ""); /* never an environment proxy */
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "plimsoll-broker");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)p->max_response_bytes);
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    wipe_slist(hl);
    pl_buf_free(&url);
    atomic_fetch_add(&b->calls, 1);

    if (t.too_large || cc == CURLE_FILESIZE_EXCEEDED) {
        pl_buf_free(&t.body);
        own_reply(r, 502, "response_too_large",
                  "the API's answer is larger than the grant's max_response_bytes (%zu)",
                  p->max_response_bytes);
        return;
    }
    if (cc == CURLE_OPERATION_TIMEDOUT) {
        pl_buf_free(&t.body);
        own_reply(r, 504, "upstream_timeout", "the API did not answer within %ld ms", timeout_ms);
        return;
    }
    if (cc != CURLE_OK) {
        pl_buf_free(&t.body);
        own_reply(r, 502, "upstream_unreachable", "the API could not be reached: %s",
                  curl_easy_strerror(cc));
        return;
    }
    r->status = (int)status;
    r->body = t.body.data ? t.body.data : calloc(1, 1);
    r->body_len = t.body.len;
}

void pl_broker_handle(struct pl_broker *b, const char *method, const char *target,
                      const struct pl_http_header *headers, size_t nheaders, const char *body,
                      size_t body_len, struct pl_broker_reply *r) {
    const struct pl_grant_profile *p = b->p;
    memset(r, 0, sizeof(*r));
    char path[MAX_TARGET_BYTES + 1];
    size_t tlen = target ? strlen(target) : 0;
    if (!target || tlen > MAX_TARGET_BYTES || target[0] != '/') {
        refuse(b, r, 400, "bad_target", "the request target must be a path of at most 8192 bytes");
        return;
    }
    const char *q = strchr(target, '?');
    size_t plen = q ? (size_t)(q - target) : tlen;
    memcpy(path, target, plen);
    path[plen] = '\0';
    if (!pl_grant_path_canonical(path) || (q && !query_ok(q + 1))) {
        refuse(b, r, 400, "bad_path",
               "the path is not in canonical form (no empty, '.' or '..' segments, no encoded "
               "'/', '\\\\' or '.'); see docs/grants.md");
        return;
    }
    if (!pl_grant_route_allows(p, method, path)) {
        char what[512];
        snprintf(what, sizeof(what), "%.16s %.300s is not a route of grant profile \"%.64s\"",
                 method, path, p->name);
        refuse(b, r, 403, "route_not_allowed", what);
        return;
    }
    if (body_len > p->max_request_bytes) {
        char what[160];
        snprintf(what, sizeof(what), "the body is larger than the grant's max_request_bytes (%zu)",
                 p->max_request_bytes);
        refuse(b, r, 413, "request_too_large", what);
        return;
    }
    if ((strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) && body_len > 0) {
        refuse(b, r, 400, "body_not_allowed", "a GET or HEAD request carries no body");
        return;
    }
    if (atomic_load(&b->calls) >= p->max_calls) {
        char what[160];
        snprintf(what, sizeof(what), "this run has made the grant's max_calls (%u) calls",
                 p->max_calls);
        refuse(b, r, 429, "call_limit", what);
        return;
    }
    forward(b, method, target, headers, nheaders, body, body_len, r);
}

/* ---- the wasm guest's JSON form ---------------------------------------------- */

int pl_broker_handle_json(struct pl_broker *b, const char *req, size_t req_len, char **ret_reply,
                          size_t *ret_reply_len) {
    struct pl_broker_reply r = {0};
    json_error_t jerr;
    json_t *in = json_loadb(req, req_len, JSON_REJECT_DUPLICATES, &jerr);
    const char *method = json_string_value(json_object_get(in, "method"));
    const char *path = json_string_value(json_object_get(in, "path"));
    json_t *hdrs = json_object_get(in, "headers");
    json_t *body = json_object_get(in, "body");
    struct pl_http_header hv[32];
    size_t nh = 0;
    bool ok = json_is_object(in) && method && path && (!hdrs || json_is_object(hdrs)) &&
              (!body || json_is_string(body) || json_is_null(body));
    if (ok && hdrs) {
        const char *k;
        json_t *v;
        json_object_foreach(hdrs, k, v) {
            const char *s = json_string_value(v);
            if (!s || nh >= 32 || strpbrk(s, "\r\n") || strpbrk(k, "\r\n: ")) {
                ok = false;
                break;
            }
            hv[nh].name = (char *)k;
            hv[nh].value = (char *)s;
            nh++;
        }
    }
    /* The method must be a plain upper-case token. */
    for (const char *m = method; ok && *m; m++)
        if (*m < 'A' || *m > 'Z' || m - method > 10)
            ok = false;
    if (!ok) {
        refuse(b, &r, 400, "bad_request",
               "expected {\"method\": string, \"path\": string, \"headers\": {string: string}, "
               "\"body\": string} with at most 32 headers");
    } else {
        pl_broker_handle(b, method, path, hv, nh, json_string_value(body),
                         body ? json_string_length(body) : 0, &r);
    }
    json_decref(in);

    json_t *out = json_object(), *oh = json_object();
    if (!out || !oh) {
        json_decref(out);
        json_decref(oh);
        pl_broker_reply_clear(&r);
        return -ENOMEM;
    }
    json_object_set_new(out, "status", json_integer(r.status));
    for (size_t i = 0; i < r.nheaders; i++)
        json_object_set_new(oh, r.headers[i].name, json_string(r.headers[i].value));
    json_object_set_new(out, "headers", oh);
    json_t *bs = json_stringn(r.body ? r.body : "", r.body_len);
    if (bs) {
        json_object_set_new(out, "body", bs);
    } else {
        char *b64 = pl_base64_encode(r.body, r.body_len, 1);
        json_object_set_new(out, "body_base64", json_string(b64 ? b64 : ""));
        free(b64);
    }
    if (r.refused)
        json_object_set_new(out, "refused", json_true());
    pl_broker_reply_clear(&r);
    char *s = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    if (!s)
        return -ENOMEM;
    *ret_reply = s;
    *ret_reply_len = strlen(s);
    return 0;
}

/* ---- the docker guest's Unix socket -------------------------------------------- */

/* The socket serves one connection at a time, so one reply slot is enough. */
static void on_request(void *userdata, const struct pl_http_request *req,
                       struct pl_http_response *resp) {
    struct pl_broker *b = userdata;
    struct pl_broker_reply *r = &b->current;
    pl_broker_handle(b, req->method, req->target, req->headers, req->nheaders, req->body,
                     req->body_len, r);
    resp->status = r->status;
    resp->headers = r->headers;
    resp->nheaders = r->nheaders;
    resp->body = r->body;
    resp->body_len = r->body_len;
}

static void on_done(void *userdata, struct pl_http_response *resp) {
    struct pl_broker *b = userdata;
    (void)resp;
    pl_broker_reply_clear(&b->current);
}

int pl_broker_listen(struct pl_broker *b, const char *dir,
                     const struct pl_broker_sock_access *access, struct pl_error *err) {
    struct pl_broker_sock_opts o = {
        .dir = dir,
        .sock_name = PL_BROKER_SOCKET_NAME,
        .access = access ? *access : (struct pl_broker_sock_access){0},
        .limits = {.max_head_bytes = 16u << 10,
                   .max_headers = 64,
                   .max_body_bytes = b->p->max_request_bytes},
        .idle_timeout_ms = 5000,
        .max_connections = b->p->max_calls + 256,
        .handler = on_request,
        .done = on_done,
        .userdata = b,
    };
    if (pl_broker_sock_start(&o, &b->sock, err) < 0)
        return pl_error_wrap(err, "broker socket: ");
    return 0;
}

unsigned pl_broker_refused_peers(const struct pl_broker *b) {
    return b ? b->refused_peers + pl_broker_sock_refused(b->sock) : 0;
}
