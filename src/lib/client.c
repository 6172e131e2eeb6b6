/*
 * client.c: libplimsoll's calls, errors, retries and sessions.
 *
 * One libcurl easy handle per client, so keep-alive connections are
 * reused.  Every answer is sorted into the three channels of
 * docs/clients.md: a 200 is a result (checked: floor, then record), a
 * Connect error with a known reason a typed refusal, anything else
 * infrastructure.  Before that, an answer must be one the protocol allows
 * ("What a client reads"): read no further than the client's cap, decoded
 * before its deadline, JSON within the depth, number and type rules below;
 * else PLIMSOLL_E_PROTOCOL.
 */
#include <curl/curl.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../core/buf.h"
#include "../core/canon.h"
#include "../core/clock.h"
#include "../core/ids.h"
#include "../core/tier.h"
#include "lib.h"

#define SERVICE "/plimsoll.v1.SandboxService/"

struct plimsoll_client {
    CURL *curl;
    char *base;      /* "http://host:port" without a trailing slash */
    char *unix_path; /* NULL for TCP */
    char *auth;      /* "Authorization: Bearer …" or NULL */
    long timeout_ms;
    size_t max_answer;
    struct plimsoll_retry retry;
    bool skip_checks;
};

struct plimsoll_session {
    plimsoll_client *c;
    char id[65];
    char *floor;
    plimsoll_chain *chain;
};

/* ---- kinds ---------------------------------------------------------------- */

static const struct {
    enum plimsoll_errkind kind;
    const char *name;
} kinds[] = {
    {PLIMSOLL_OK, "OK"},
    {PLIMSOLL_E_INVALID_REQUEST, "INVALID_REQUEST"},
    {PLIMSOLL_E_UNAUTHENTICATED, "UNAUTHENTICATED"},
    {PLIMSOLL_E_DISABLED, "DISABLED"},
    {PLIMSOLL_E_INSUFFICIENT_ISOLATION, "INSUFFICIENT_ISOLATION"},
    {PLIMSOLL_E_UNSUPPORTED, "UNSUPPORTED"},
    {PLIMSOLL_E_CALLER_NOT_ALLOWED, "CALLER_NOT_ALLOWED"},
    {PLIMSOLL_E_NOT_READY, "NOT_READY"},
    {PLIMSOLL_E_SHUTTING_DOWN, "SHUTTING_DOWN"},
    {PLIMSOLL_E_RATE_LIMITED, "RATE_LIMITED"},
    {PLIMSOLL_E_AT_CAPACITY, "AT_CAPACITY"},
    {PLIMSOLL_E_SESSION_ENDED, "SESSION_ENDED"},
    {PLIMSOLL_E_NOT_FOUND, "NOT_FOUND"},
    {PLIMSOLL_E_REFUSED, "REFUSED"},
    {PLIMSOLL_E_INFRASTRUCTURE, "INFRASTRUCTURE"},
    {PLIMSOLL_E_ISOLATION_EVIDENCE_MISMATCH, "ISOLATION_EVIDENCE_MISMATCH"},
    {PLIMSOLL_E_CHAIN, "CHAIN"},
    {PLIMSOLL_E_USAGE, "USAGE"},
    {PLIMSOLL_E_PROTOCOL, "PROTOCOL"},
};

const char *plimsoll_errkind_name(enum plimsoll_errkind kind) {
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (kinds[i].kind == kind)
            return kinds[i].name;
    return "UNKNOWN";
}

bool plimsoll_errkind_retryable(enum plimsoll_errkind kind) {
    return kind == PLIMSOLL_E_AT_CAPACITY || kind == PLIMSOLL_E_RATE_LIMITED;
}

static enum plimsoll_errkind kind_of_reason(const char *reason) {
    if (!reason)
        return PLIMSOLL_E_REFUSED;
    for (size_t i = 1; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (kinds[i].kind <= PLIMSOLL_E_NOT_FOUND && strcmp(kinds[i].name, reason) == 0)
            return kinds[i].kind;
    return PLIMSOLL_E_REFUSED;
}

/* ---- the client ----------------------------------------------------------- */

plimsoll_client *plimsoll_client_new(const struct plimsoll_options *o, struct plimsoll_error *err) {
    static const struct plimsoll_options none = {0};
    if (!o)
        o = &none;
    const char *url = o->url && *o->url ? o->url : "http://127.0.0.1:7475";
    if (o->timeout_ms < 0 || o->retry.max_attempts < 0 || o->retry.base_ms < 0 ||
        o->retry.cap_ms < 0) {
        plc_fail(err, PLIMSOLL_E_USAGE, "timeouts and retry settings may not be negative");
        return NULL;
    }
    if (strncmp(url, "unix:", 5) != 0 && strncmp(url, "http://", 7) != 0 &&
        strncmp(url, "https://", 8) != 0) {
        plc_fail(err, PLIMSOLL_E_USAGE, "the URL must be http://, https:// or unix:/path");
        return NULL;
    }
    if (o->api_key && strpbrk(o->api_key, "\r\n")) {
        plc_fail(err, PLIMSOLL_E_USAGE, "the API key may not contain a line break");
        return NULL;
    }
    plimsoll_client *c = calloc(1, sizeof(*c));
    if (!c) {
        plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
        return NULL;
    }
    /* Reference-counted and thread-safe in the libcurl this builds with. */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (strncmp(url, "unix:", 5) == 0) {
        c->unix_path = strdup(url + 5);
        c->base = strdup("http://localhost");
    } else {
        size_t n = strlen(url);
        while (n && url[n - 1] == '/')
            n--;
        c->base = strndup(url, n);
    }
    if (o->api_key) {
        size_t n = strlen(o->api_key) + 32;
        c->auth = malloc(n);
        if (c->auth)
            snprintf(c->auth, n, "Authorization: Bearer %s", o->api_key);
    }
    c->timeout_ms = o->timeout_ms ? o->timeout_ms : 120000;
    c->max_answer = o->max_answer_bytes ? o->max_answer_bytes : PLIMSOLL_DEFAULT_MAX_ANSWER_BYTES;
    c->retry = o->retry;
    if (!c->retry.base_ms)
        c->retry.base_ms = 100;
    if (!c->retry.cap_ms)
        c->retry.cap_ms = 2000;
    c->skip_checks = o->skip_record_checks;
    c->curl = curl_easy_init();
    if (!c->base || !c->curl || (o->url && strncmp(url, "unix:", 5) == 0 && !c->unix_path) ||
        (o->api_key && !c->auth)) {
        plimsoll_client_free(c);
        plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
        return NULL;
    }
    return c;
}

void plimsoll_client_free(plimsoll_client *c) {
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    if (c->auth) {
        OPENSSL_cleanse(c->auth, strlen(c->auth));
        free(c->auth);
    }
    free(c->base);
    free(c->unix_path);
    free(c);
    curl_global_cleanup();
}

/* ---- what an answer may be (docs/clients.md) ------------------------------ */

/* A protocol error: infrastructure (dispatched), code "unknown"; -1. */
static int protocol_fail(struct plimsoll_error *err, const char *method, long status,
                         const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int protocol_fail(struct plimsoll_error *err, const char *method, long status,
                         const char *fmt, ...) {
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    plc_fail(err, PLIMSOLL_E_PROTOCOL,
             "%s: HTTP %ld with an answer that breaks the protocol: %s; the code may have run",
             method, status, why);
    if (err) {
        snprintf(err->code, sizeof(err->code), "unknown");
        err->dispatched = true;
        err->http_status = (int)status;
    }
    return -1;
}

/* The timeout error: infrastructure, code "deadline_exceeded", dispatched; -1. */
static int deadline_fail(struct plimsoll_error *err, const char *method, long timeout_ms,
                         const char *what) {
    plc_fail(err, PLIMSOLL_E_INFRASTRUCTURE,
             "%s: no whole answer within %ld ms (%s); the code may have run", method, timeout_ms,
             what);
    if (err) {
        snprintf(err->code, sizeof(err->code), "deadline_exceeded");
        err->dispatched = true;
    }
    return -1;
}

enum kind { K_STRING, K_BOOL, K_INT32, K_UINT32, K_MESSAGE, K_ANY };

/* A known member of a message: its type, repeated or not; rows end at NULL. */
struct field {
    const char *name;
    enum kind kind;
    bool repeated;
    const struct field *sub;
};

static const struct field step_result_shape[] = {
    {"name", K_STRING, false, NULL},
    {"exit_code", K_INT32, false, NULL},
    {"stdout", K_STRING, false, NULL},
    {"stderr", K_STRING, false, NULL},
    {"stdout_truncated", K_BOOL, false, NULL},
    {"stderr_truncated", K_BOOL, false, NULL},
    {"duration_ms", K_UINT32, false, NULL},
    {"timed_out", K_BOOL, false, NULL},
    {"stdout_base64", K_STRING, false, NULL},
    {"stderr_base64", K_STRING, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field run_record_shape[] = {
    {"version", K_INT32, false, NULL},
    {"request_sha256", K_STRING, false, NULL},
    {"response_sha256", K_STRING, false, NULL},
    {"provider", K_STRING, false, NULL},
    {"isolation", K_STRING, false, NULL},
    {"runtime", K_STRING, false, NULL},
    {"started_at", K_STRING, false, NULL},
    {"ended_at", K_STRING, false, NULL},
    {"previous_digest", K_STRING, false, NULL},
    {"digest", K_STRING, false, NULL},
    {"broker_calls", K_UINT32, false, NULL},
    {"broker_refused", K_UINT32, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field run_response_shape[] = {
    {"exit_code", K_INT32, false, NULL},
    {"stdout", K_STRING, false, NULL},
    {"stderr", K_STRING, false, NULL},
    {"stdout_truncated", K_BOOL, false, NULL},
    {"stderr_truncated", K_BOOL, false, NULL},
    {"duration_ms", K_UINT32, false, NULL},
    {"sandbox_name", K_STRING, false, NULL},
    {"isolation", K_STRING, false, NULL},
    {"timed_out", K_BOOL, false, NULL},
    {"out_of_memory", K_BOOL, false, NULL},
    {"outcome", K_STRING, false, NULL},
    {"detail", K_STRING, false, NULL},
    {"steps", K_MESSAGE, true, step_result_shape},
    {"record", K_MESSAGE, false, run_record_shape},
    {"stdout_base64", K_STRING, false, NULL},
    {"stderr_base64", K_STRING, false, NULL},
    {"interpreter_started", K_BOOL, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field operation_shape[] = {
    {"supported", K_BOOL, false, NULL},        {"engine", K_STRING, false, NULL},
    {"max_timeout_ms", K_UINT32, false, NULL}, {"languages", K_STRING, true, NULL},
    {"grants", K_BOOL, false, NULL},           {NULL, K_ANY, false, NULL},
};
static const struct field operations_shape[] = {
    {"snippet", K_MESSAGE, false, operation_shape},
    {"project", K_MESSAGE, false, operation_shape},
    {"module", K_MESSAGE, false, operation_shape},
    {"session", K_MESSAGE, false, operation_shape},
    {NULL, K_ANY, false, NULL},
};
static const struct field limits_shape[] = {
    {"memory_mb", K_UINT32, false, NULL},
    {"total_memory_mb", K_UINT32, false, NULL},
    {"max_concurrent", K_UINT32, false, NULL},
    {"effective_concurrency", K_UINT32, false, NULL},
    {"per_key_concurrent", K_UINT32, false, NULL},
    {"rate_per_min", K_UINT32, false, NULL},
    {"rate_burst", K_UINT32, false, NULL},
    {"default_timeout_ms", K_UINT32, false, NULL},
    {"output_bytes", K_UINT32, false, NULL},
    {"max_snippet_bytes", K_UINT32, false, NULL},
    {"max_request_bytes", K_UINT32, false, NULL},
    {"memory_budget_applies", K_BOOL, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field describe_shape[] = {
    {"version", K_STRING, false, NULL},
    {"provider", K_STRING, false, NULL},
    {"isolation", K_STRING, false, NULL},
    {"runtime", K_STRING, false, NULL},
    {"ready", K_BOOL, false, NULL},
    {"ready_detail", K_STRING, false, NULL},
    {"supports_sessions", K_BOOL, false, NULL},
    {"languages", K_STRING, true, NULL},
    {"operations", K_MESSAGE, false, operations_shape},
    {"limits", K_MESSAGE, false, limits_shape},
    {NULL, K_ANY, false, NULL},
};
static const struct field open_session_shape[] = {
    {"session_id", K_STRING, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field empty_shape[] = {{NULL, K_ANY, false, NULL}};
/* What of a Connect error is checked; its details are read leniently. */
static const struct field connect_error_shape[] = {
    {"code", K_STRING, false, NULL},
    {"message", K_STRING, false, NULL},
    {"details", K_ANY, true, NULL},
    {NULL, K_ANY, false, NULL},
};

/* The 200 answer of each method. */
static const struct {
    const char *method;
    const struct field *shape;
} responses[] = {
    {"Describe", describe_shape},         {"Run", run_response_shape},
    {"RunInSession", run_response_shape}, {"RunCell", run_response_shape},
    {"OpenSession", open_session_shape},  {"CloseSession", empty_shape},
};

static const struct field *response_shape(const char *method) {
    for (size_t i = 0; i < sizeof(responses) / sizeof(responses[0]); i++)
        if (strcmp(responses[i].method, method) == 0)
            return responses[i].shape;
    return empty_shape;
}

/* Depth and numbers, everywhere in v (at depth `depth`); < 0 with why. */
static int check_tree(const json_t *v, int depth, char *why, size_t n) {
    switch (json_typeof(v)) {
    case JSON_REAL: snprintf(why, n, "a number that is not an integer"); return -1;
    case JSON_INTEGER: {
        json_int_t x = json_integer_value(v);
        if (x > PLIMSOLL_MAX_ANSWER_INTEGER || x < -PLIMSOLL_MAX_ANSWER_INTEGER) {
            snprintf(why, n, "the integer %" JSON_INTEGER_FORMAT " is past 2^53-1", x);
            return -1;
        }
        return 0;
    }
    case JSON_OBJECT:
    case JSON_ARRAY: break;
    default: return 0;
    }
    if (depth > PLIMSOLL_MAX_ANSWER_DEPTH) {
        snprintf(why, n, "nested deeper than %d", PLIMSOLL_MAX_ANSWER_DEPTH);
        return -1;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (check_tree(e, depth + 1, why, n) < 0)
                return -1;
        }
        return 0;
    }
    const char *k;
    json_t *e;
    json_object_foreach((json_t *)v, k, e) {
        if (check_tree(e, depth + 1, why, n) < 0)
            return -1;
    }
    return 0;
}

static int check_shape(const json_t *v, const struct field *shape, const char *where, char *why,
                       size_t n);

static int check_scalar(const json_t *v, const struct field *f, const char *where, char *why,
                        size_t n) {
    bool ok = false;
    json_int_t x = json_integer_value(v);
    switch (f->kind) {
    case K_ANY: return 0;
    case K_MESSAGE: return check_shape(v, f->sub, where, why, n);
    case K_STRING: ok = json_is_string(v); break;
    case K_BOOL: ok = json_is_boolean(v); break;
    case K_INT32: ok = json_is_integer(v) && x >= INT32_MIN && x <= INT32_MAX; break;
    case K_UINT32: ok = json_is_integer(v) && x >= 0 && x <= (json_int_t)UINT32_MAX; break;
    }
    if (!ok) {
        static const char *const names[] = {"a string", "a bool", "an int32", "a uint32"};
        snprintf(why, n, "%s is not %s", where, names[f->kind]);
        return -1;
    }
    return 0;
}

/* v is an object whose known members have their types (null is the
 * default, as proto3 JSON says); < 0 with why. */
static int check_shape(const json_t *v, const struct field *shape, const char *where, char *why,
                       size_t n) {
    if (!json_is_object(v)) {
        snprintf(why, n, "%s is not an object", where);
        return -1;
    }
    for (const struct field *f = shape; f->name; f++) {
        const json_t *x = json_object_get(v, f->name);
        if (!x || json_is_null(x))
            continue;
        char at[96];
        snprintf(at, sizeof(at), "%s.%s", where, f->name);
        if (!f->repeated) {
            if (check_scalar(x, f, at, why, n) < 0)
                return -1;
            continue;
        }
        if (!json_is_array(x)) {
            snprintf(why, n, "%s is not an array", at);
            return -1;
        }
        size_t i;
        json_t *e;
        json_array_foreach(x, i, e) {
            char ati[128];
            snprintf(ati, sizeof(ati), "%s[%zu]", at, i);
            if (json_is_null(e)) {
                snprintf(why, n, "%s is null", ati);
                return -1;
            }
            if (check_scalar(e, f, ati, why, n) < 0)
                return -1;
        }
    }
    return 0;
}

/* The JSON object of an answer's body, its known members of their types
 * (shape), or NULL with why.  NULs in strings are kept: they are valid. */
static json_t *parse_answer(const struct pl_buf *b, const struct field *shape, const char *what,
                            char *why, size_t n) {
    json_error_t je;
    json_t *j =
        json_loadb(b->data ? b->data : "", b->len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!j) {
        snprintf(why, n, "not JSON (%s)", je.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        snprintf(why, n, "the answer is not a JSON object");
    } else if (check_tree(j, 1, why, n) == 0 && check_shape(j, shape, what, why, n) == 0) {
        return j;
    }
    json_decref(j);
    return NULL;
}

static void trim(const char **s, size_t *n) {
    while (*n && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

/* A Content-Type of application/json (any case), with a charset, if any,
 * of UTF-8 (quoted or not); other parameters are ignored. */
static bool media_type_is_json(const char *ct) {
    if (!ct)
        return false;
    const char *semi = strchr(ct, ';');
    const char *p = ct;
    size_t n = semi ? (size_t)(semi - ct) : strlen(ct);
    trim(&p, &n);
    if (n != 16 || strncasecmp(p, "application/json", 16) != 0)
        return false;
    while (semi) {
        p = semi + 1;
        semi = strchr(p, ';');
        n = semi ? (size_t)(semi - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        const char *name = p;
        size_t nn = eq ? (size_t)(eq - p) : n;
        trim(&name, &nn);
        if (nn != 7 || strncasecmp(name, "charset", 7) != 0)
            continue;
        const char *val = eq ? eq + 1 : p + n;
        size_t vn = (size_t)(p + n - val);
        trim(&val, &vn);
        if (vn >= 2 && val[0] == '"' && val[vn - 1] == '"') {
            val++;
            vn -= 2;
        }
        if (vn != 5 || strncasecmp(val, "utf-8", 5) != 0)
            return false;
    }
    return true;
}

/* ---- one HTTP exchange ---------------------------------------------------- */

struct sink {
    struct pl_buf *b;
    size_t max;
    bool over;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud) {
    struct sink *s = ud;
    size_t n = size * nmemb;
    if (n > s->max - s->b->len) {
        s->over = true; /* read no further: curl ends the transfer */
        return 0;
    }
    if (pl_buf_append(s->b, ptr, n) < 0)
        return 0;
    return n;
}

/* One POST: the status, Content-Type (*ret_ctype, malloc'd or NULL) and at
 * most c->max_answer bytes of body; -1 with *err on a transport failure,
 * the timeout, or a body past the cap. */
static int post(plimsoll_client *c, const char *method, const char *body, long *status,
                char **ret_ctype, struct pl_buf *answer, struct plimsoll_error *err) {
    struct pl_buf url = {0};
    if (pl_buf_printf(&url, "%s" SERVICE "%s", c->base, method) < 0)
        return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    CURL *h = c->curl;
    curl_easy_reset(h);
    struct curl_slist *hd = NULL, *t;
    const char *lines[] = {"Content-Type: application/json", "Connect-Protocol-Version: 1",
                           c->auth};
    for (size_t i = 0; i < 3; i++) {
        if (!lines[i])
            continue;
        if (!(t = curl_slist_append(hd, lines[i]))) {
            curl_slist_free_all(hd);
            pl_buf_free(&url);
            return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
        }
        hd = t;
    }
    struct sink sink = {.b = answer, .max = c->max_answer};
    if (c->unix_path)
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
    curl_easy_setopt(h, CURLOPT_URL, url.data);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    /* A declared length past the cap fails before the body is read. */
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)c->max_answer);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms < 10000 ? c->timeout_ms : 10000);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hd);
    pl_buf_free(&url);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    if (rc == CURLE_FILESIZE_EXCEEDED || (rc == CURLE_WRITE_ERROR && sink.over))
        return protocol_fail(err, method, *status,
                             "it is longer than the client's max_answer_bytes (%zu)",
                             c->max_answer);
    if (rc == CURLE_OPERATION_TIMEDOUT)
        return deadline_fail(err, method, c->timeout_ms, curl_easy_strerror(rc));
    if (rc != CURLE_OK) {
        plc_fail(err, PLIMSOLL_E_INFRASTRUCTURE, "cannot reach the daemon at %s: %s",
                 c->unix_path ? c->unix_path : c->base, curl_easy_strerror(rc));
        if (err) {
            snprintf(err->code, sizeof(err->code), "unavailable");
            err->dispatched = true; /* it may have run: never assume otherwise */
        }
        return -1;
    }
    char *ct = NULL;
    curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
    *ret_ctype = ct ? strdup(ct) : NULL;
    return 0;
}

/* ---- google.rpc.ErrorInfo, binary ----------------------------------------- */

static bool varint(const unsigned char **p, const unsigned char *end, uint64_t *ret) {
    uint64_t x = 0;
    for (unsigned s = 0; s < 64 && *p < end; s += 7) {
        unsigned char b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) {
            *ret = x;
            return true;
        }
    }
    return false;
}

/* The next length-delimited field of [*p, end) (other wire types skipped):
 * 1 with its number and bytes, 0 at the end, -1 on malformed input. */
static int next_field(const unsigned char **p, const unsigned char *end, uint64_t *num,
                      const unsigned char **val, size_t *len) {
    while (*p < end) {
        uint64_t key, n;
        if (!varint(p, end, &key))
            return -1;
        switch (key & 7) {
        case 0:
            if (!varint(p, end, &n))
                return -1;
            break;
        case 1:
        case 5: {
            size_t w = (key & 7) == 1 ? 8 : 4;
            if ((size_t)(end - *p) < w)
                return -1;
            *p += w;
            break;
        }
        case 2:
            if (!varint(p, end, &n) || n > (uint64_t)(end - *p))
                return -1;
            *num = key >> 3;
            *val = *p;
            *len = (size_t)n;
            *p += n;
            return 1;
        default: return -1;
        }
    }
    return 0;
}

/* details[0].value as {"reason", "metadata"} (what debug holds), or NULL. */
static json_t *decode_error_info(const char *b64, size_t max) {
    unsigned char *raw = NULL;
    size_t rawlen = 0;
    if (pl_base64_decode(b64, strlen(b64), max, &raw, &rawlen) < 0)
        return NULL;
    json_t *info = json_pack("{s:s, s:{}}", "reason", "", "metadata");
    const unsigned char *p = raw, *end = raw + rawlen, *v;
    size_t len;
    uint64_t num;
    int r = 0;
    while (info && (r = next_field(&p, end, &num, &v, &len)) == 1) {
        if (num == 1) {
            json_object_set_new(info, "reason", json_stringn((const char *)v, len));
        } else if (num == 3) {
            const unsigned char *q = v, *qend = v + len, *kv;
            size_t kvlen;
            uint64_t kn;
            json_t *key = NULL, *val = NULL;
            int e;
            while ((e = next_field(&q, qend, &kn, &kv, &kvlen)) == 1) {
                json_t **slot = kn == 1 ? &key : kn == 2 ? &val : NULL;
                if (slot) {
                    json_decref(*slot);
                    *slot = json_stringn((const char *)kv, kvlen);
                }
            }
            const char *k = json_string_value(key);
            if (e == 0 && k && strlen(k) == json_string_length(key))
                json_object_set_new(json_object_get(info, "metadata"), k,
                                    val ? json_incref(val) : json_string(""));
            json_decref(key);
            json_decref(val);
            if (e < 0)
                r = -1;
        }
        if (r < 0)
            break;
    }
    free(raw);
    if (r < 0 || !json_is_string(json_object_get(info, "reason"))) {
        json_decref(info);
        return NULL;
    }
    return info;
}

/* A non-200 answer into *err: a refusal, infrastructure, or a protocol
 * error when it is not a Connect error; always -1. */
static int refusal(plimsoll_client *c, const char *method, long status, const struct pl_buf *answer,
                   struct plimsoll_error *err) {
    char why[256];
    json_t *j = parse_answer(answer, connect_error_shape, "the error", why, sizeof(why));
    const char *code = json_string_value(json_object_get(j, "code"));
    if (!j || !code || !*code) {
        json_decref(j);
        return protocol_fail(err, method, status, "not a Connect error (%s)",
                             j ? "it has no code" : why);
    }
    json_t *d0 = json_array_get(json_object_get(j, "details"), 0);
    json_t *dbg = json_object_get(d0, "debug"), *info = NULL;
    if (!json_is_string(json_object_get(dbg, "reason")) &&
        json_is_string(json_object_get(d0, "value")))
        dbg = info =
            decode_error_info(json_string_value(json_object_get(d0, "value")), c->max_answer);
    json_t *meta = json_object_get(dbg, "metadata");
    const char *reason = json_string_value(json_object_get(dbg, "reason"));
    if (reason && !*reason)
        reason = NULL;
    const char *dispatched = json_string_value(json_object_get(meta, "dispatched"));
    enum plimsoll_errkind kind;
    if ((reason && strcmp(reason, "INTERNAL") == 0) || (!reason && strcmp(code, "internal") == 0))
        kind = PLIMSOLL_E_INFRASTRUCTURE;
    else
        kind = kind_of_reason(reason);
    const char *msg = json_string_value(json_object_get(j, "message"));
    plc_fail(err, kind, "%s", msg ? msg : "");
    if (err) {
        snprintf(err->reason, sizeof(err->reason), "%s", reason ? reason : "");
        snprintf(err->code, sizeof(err->code), "%s", code);
        err->http_status = (int)status;
        /* Without the metadata, only a refusal the daemon names says nothing ran. */
        err->dispatched =
            dispatched ? strcmp(dispatched, "false") != 0 : kind == PLIMSOLL_E_INFRASTRUCTURE;
        const char *iso = json_string_value(json_object_get(meta, "isolation"));
        const char *why_ended = json_string_value(json_object_get(meta, "ended_reason"));
        snprintf(err->isolation, sizeof(err->isolation), "%s", iso ? iso : "");
        if (kind == PLIMSOLL_E_SESSION_ENDED) {
            if (!why_ended && msg && strncmp(msg, "the session has ended: ", 23) == 0)
                why_ended = msg + 23;
            snprintf(err->ended_reason, sizeof(err->ended_reason), "%s",
                     why_ended ? why_ended : "");
        }
    }
    json_decref(info);
    json_decref(j);
    return -1;
}

/* Sleep before retry n: uniform in [d/2, d], d = min(cap, base * 2^n). */
static void backoff(const struct plimsoll_retry *r, int n) {
    long d = r->base_ms;
    for (int i = 0; i < n && d < r->cap_ms; i++)
        d *= 2;
    if (d > r->cap_ms)
        d = r->cap_ms;
    unsigned int rnd = 0;
    if (pl_random_bytes(&rnd, sizeof(rnd)) < 0)
        rnd = (unsigned int)time(NULL);
    long ms = d / 2 + (long)(rnd % (unsigned long)(d / 2 + 1));
    pl_sleep_ns(PL_MS(ms));
}

/* One exchange and its decoding under one deadline: *ret is the 200
 * answer, an object whose known members have their types. */
static int attempt(plimsoll_client *c, const char *method, const char *body, json_t **ret,
                   struct plimsoll_error *err) {
    uint64_t deadline = pl_deadline_in_ms((uint64_t)c->timeout_ms);
    struct pl_buf answer = {0};
    long status = 0;
    char *ctype = NULL;
    int r = post(c, method, body, &status, &ctype, &answer, err);
    if (r == 0 && status != 200) {
        refusal(c, method, status, &answer, err);
        if (pl_now_ns() > deadline)
            deadline_fail(err, method, c->timeout_ms, "still decoding the error");
        r = -1;
    } else if (r == 0 && !media_type_is_json(ctype)) {
        r = protocol_fail(err, method, status, "its Content-Type is \"%s\", not application/json",
                          ctype ? ctype : "(none)");
    } else if (r == 0) {
        char why[256];
        json_t *j = parse_answer(&answer, response_shape(method), method, why, sizeof(why));
        if (pl_now_ns() > deadline) {
            json_decref(j);
            r = deadline_fail(err, method, c->timeout_ms, "still decoding the answer");
        } else if (!j) {
            r = protocol_fail(err, method, status, "%s", why);
        } else {
            *ret = j;
        }
    }
    free(ctype);
    pl_buf_free(&answer);
    return r;
}

/* POST msg, retrying what the policy allows; *ret is the parsed 200 answer. */
static int call(plimsoll_client *c, const char *method, const json_t *msg, json_t **ret,
                struct plimsoll_error *err) {
    if (!c)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no client");
    char *body = json_dumps(msg, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!body)
        return plc_fail(err, PLIMSOLL_E_USAGE, "the request cannot be encoded as JSON");
    int attempts = c->retry.max_attempts > 1 ? c->retry.max_attempts : 1;
    struct plimsoll_error local;
    if (!err)
        err = &local;
    int r = -1;
    for (int n = 0; n < attempts; n++) {
        if (n > 0)
            backoff(&c->retry, n - 1);
        r = attempt(c, method, body, ret, err);
        if (r == 0 || !plimsoll_errkind_retryable(err->kind))
            break;
    }
    free(body);
    return r;
}

/* A string member holding no NUL, or NULL: "vm\\u0000" is no tier. */
static const char *exact_string(const json_t *v) {
    const char *s = json_string_value(v);
    return s && strlen(s) == json_string_length(v) ? s : NULL;
}

static int tier_rank(const char *s) {
    enum pl_tier t;
    return s && pl_tier_parse(s, &t) == 0 ? (int)t : -1;
}

/* The checks of a 200 answer to a run: the floor first, then the record. */
static int check_answer(plimsoll_client *c, const json_t *sent, const json_t *answer,
                        const char *floor, const char *previous, struct plimsoll_error *err) {
    if (floor && *floor) {
        const char *iso = exact_string(json_object_get(answer, "isolation"));
        const char *riso =
            exact_string(json_object_get(json_object_get(answer, "record"), "isolation"));
        int want = tier_rank(floor);
        if (tier_rank(iso) < want || tier_rank(riso) < want) {
            plc_fail(err, PLIMSOLL_E_ISOLATION_EVIDENCE_MISMATCH,
                     "asked for at least %s, the answer says %s (record: %s); the code may "
                     "have run",
                     floor, iso ? iso : "(missing)", riso ? riso : "(missing)");
            if (err) {
                snprintf(err->code, sizeof(err->code), "data_loss");
                snprintf(err->isolation, sizeof(err->isolation), "%s", iso ? iso : "");
                err->dispatched = true;
            }
            return -1;
        }
    }
    if (c->skip_checks)
        return 0;
    return plimsoll_check_record(sent, answer, NULL, previous, err);
}

static int run_call(plimsoll_client *c, const char *method, const json_t *msg, const json_t *sent,
                    const char *floor, plimsoll_chain *chain, json_t **ret,
                    struct plimsoll_error *err) {
    json_t *answer = NULL;
    if (!ret)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no place for the answer");
    if (call(c, method, msg, &answer, err) < 0)
        return -1;
    if (check_answer(c, sent, answer, floor, chain ? plimsoll_chain_head(chain) : NULL, err) < 0 ||
        (chain && plimsoll_chain_append(chain, sent, answer, err) < 0)) {
        json_decref(answer);
        return -1;
    }
    *ret = answer;
    return 0;
}

/* ---- the calls ------------------------------------------------------------ */

int plimsoll_describe(plimsoll_client *c, json_t **ret, struct plimsoll_error *err) {
    json_t *msg = json_object();
    int r = msg ? call(c, "Describe", msg, ret, err) : plc_fail(err, PLIMSOLL_E_USAGE, "oom");
    json_decref(msg);
    return r;
}

int plimsoll_run(plimsoll_client *c, const json_t *request, json_t **ret,
                 struct plimsoll_error *err) {
    if (!json_is_object(request))
        return plc_fail(err, PLIMSOLL_E_USAGE, "a RunRequest is a JSON object");
    const char *floor = json_string_value(json_object_get(request, "minimum_isolation"));
    return run_call(c, "Run", request, request, floor, NULL, ret, err);
}

/* Add the run options to req (a new reference, stolen); NULL on OOM. */
static json_t *with_options(json_t *req, const struct plimsoll_run_options *ro) {
    if (!req || !ro)
        return req;
    int bad = 0;
    if (ro->minimum_isolation)
        bad |= json_object_set_new(req, "minimum_isolation", json_string(ro->minimum_isolation));
    if (ro->grant_profile)
        bad |= json_object_set_new(req, "grant_profile", json_string(ro->grant_profile));
    if (ro->timeout_ms)
        bad |= json_object_set_new(req, "timeout_ms", json_integer(ro->timeout_ms));
    if (ro->memory_mb)
        bad |= json_object_set_new(req, "memory_mb", json_integer(ro->memory_mb));
    if (bad) {
        json_decref(req);
        return NULL;
    }
    return req;
}

static int run_built(plimsoll_client *c, json_t *req, json_t **ret, struct plimsoll_error *err) {
    if (!req)
        return plc_fail(err, PLIMSOLL_E_USAGE,
                        "the request cannot be built (text must be valid UTF-8)");
    int r = plimsoll_run(c, req, ret, err);
    json_decref(req);
    return r;
}

int plimsoll_run_snippet(plimsoll_client *c, const char *language, const char *code,
                         const struct plimsoll_run_options *ro, json_t **ret,
                         struct plimsoll_error *err) {
    if (!language || !code)
        return plc_fail(err, PLIMSOLL_E_USAGE, "a snippet needs a language and code");
    json_t *sn = json_pack("{s:s, s:s}", "language", language, "code", code);
    if (sn && ro && ro->stdin_data &&
        json_object_set_new(sn, "stdin", json_string(ro->stdin_data)) < 0) {
        json_decref(sn);
        sn = NULL;
    }
    return run_built(c, with_options(sn ? json_pack("{s:o}", "snippet", sn) : NULL, ro), ret, err);
}

int plimsoll_run_project(plimsoll_client *c, const json_t *files, const json_t *steps,
                         const struct plimsoll_run_options *ro, json_t **ret,
                         struct plimsoll_error *err) {
    if (!json_is_array(steps) || (files && !json_is_array(files)))
        return plc_fail(err, PLIMSOLL_E_USAGE, "a project has an array of steps (and of files)");
    json_t *p = json_pack("{s:O}", "steps", (json_t *)steps);
    if (p && files && json_object_set(p, "files", (json_t *)files) < 0) {
        json_decref(p);
        p = NULL;
    }
    return run_built(c, with_options(p ? json_pack("{s:o}", "project", p) : NULL, ro), ret, err);
}

int plimsoll_run_module(plimsoll_client *c, const void *wasm, size_t len, const char *const *args,
                        size_t nargs, const struct plimsoll_run_options *ro, json_t **ret,
                        struct plimsoll_error *err) {
    if (!wasm || !len)
        return plc_fail(err, PLIMSOLL_E_USAGE, "a module needs its bytes");
    char *b64 = pl_base64_encode(wasm, len, 1);
    json_t *m = b64 ? json_pack("{s:s}", "wasm_base64", b64) : NULL;
    free(b64);
    if (m && nargs) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < nargs; i++)
            if (json_array_append_new(a, json_string(args[i])) < 0) {
                json_decref(a);
                a = NULL;
            }
        if (!a || json_object_set_new(m, "args", a) < 0) {
            json_decref(m);
            m = NULL;
        }
    }
    if (m && ro && ro->stdin_data &&
        json_object_set_new(m, "stdin", json_string(ro->stdin_data)) < 0) {
        json_decref(m);
        m = NULL;
    }
    return run_built(c, with_options(m ? json_pack("{s:o}", "module", m) : NULL, ro), ret, err);
}

/* ---- sessions ------------------------------------------------------------- */

static bool id_ok(const char *id) {
    return id && strlen(id) == 64 && strspn(id, "0123456789abcdef") == 64;
}

int plimsoll_open_session(plimsoll_client *c, const char *const *languages, char ret_id[65],
                          struct plimsoll_error *err) {
    json_t *msg = json_object();
    if (msg && languages) {
        json_t *a = json_array();
        for (size_t i = 0; a && languages[i]; i++)
            json_array_append_new(a, json_string(languages[i]));
        json_object_set_new(msg, "languages", a);
    }
    if (!msg)
        return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    json_t *answer = NULL;
    int r = call(c, "OpenSession", msg, &answer, err);
    json_decref(msg);
    if (r < 0)
        return -1;
    const char *id = exact_string(json_object_get(answer, "session_id"));
    if (!id_ok(id)) {
        json_decref(answer);
        return protocol_fail(err, "OpenSession", 200, "the answer names no session");
    }
    memcpy(ret_id, id, 65);
    json_decref(answer);
    return 0;
}

static int in_session(plimsoll_client *c, const char *id, const json_t *run, const char *floor,
                      plimsoll_chain *chain, json_t **ret, struct plimsoll_error *err) {
    if (!id_ok(id) || !json_is_object(run))
        return plc_fail(err, PLIMSOLL_E_USAGE, "a session id and a RunRequest object");
    /* A session's floor goes with every run that sets none, so the daemon
     * refuses below it before anything runs. */
    const char *f = json_string_value(json_object_get(run, "minimum_isolation"));
    json_t *sent = json_copy((json_t *)run);
    if (sent && !(f && *f) && floor && *floor &&
        json_object_set_new(sent, "minimum_isolation", json_string(floor)) < 0) {
        json_decref(sent);
        sent = NULL;
    }
    json_t *msg = sent ? json_pack("{s:s, s:O}", "session_id", id, "run", sent) : NULL;
    if (!msg) {
        json_decref(sent);
        return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    }
    int r = run_call(c, "RunInSession", msg, sent, f && *f ? f : floor, chain, ret, err);
    json_decref(msg);
    json_decref(sent);
    return r;
}

static int cell_call(plimsoll_client *c, const char *id, const json_t *cell, unsigned timeout_ms,
                     const char *floor, plimsoll_chain *chain, json_t **ret,
                     struct plimsoll_error *err) {
    if (!id_ok(id) || !json_is_object(cell))
        return plc_fail(err, PLIMSOLL_E_USAGE, "a session id and a Cell object");
    json_t *sent = json_pack("{s:O}", "cell", (json_t *)cell);
    if (sent && timeout_ms)
        json_object_set_new(sent, "timeout_ms", json_integer(timeout_ms));
    json_t *msg = sent ? json_copy(sent) : NULL;
    if (!msg || json_object_set_new(msg, "session_id", json_string(id)) < 0) {
        json_decref(sent);
        json_decref(msg);
        return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    }
    int r = run_call(c, "RunCell", msg, sent, floor, chain, ret, err);
    json_decref(msg);
    json_decref(sent);
    return r;
}

int plimsoll_run_in_session(plimsoll_client *c, const char *session_id, const json_t *run,
                            json_t **ret, struct plimsoll_error *err) {
    return in_session(c, session_id, run, NULL, NULL, ret, err);
}

int plimsoll_run_cell(plimsoll_client *c, const char *session_id, const json_t *cell,
                      unsigned timeout_ms, json_t **ret, struct plimsoll_error *err) {
    return cell_call(c, session_id, cell, timeout_ms, NULL, NULL, ret, err);
}

int plimsoll_close_session(plimsoll_client *c, const char *session_id, struct plimsoll_error *err) {
    if (!id_ok(session_id))
        return plc_fail(err, PLIMSOLL_E_USAGE, "a session id is 64 lowercase hex digits");
    json_t *msg = json_pack("{s:s}", "session_id", session_id);
    json_t *answer = NULL;
    int r = msg ? call(c, "CloseSession", msg, &answer, err)
                : plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    json_decref(msg);
    json_decref(answer);
    return r;
}

plimsoll_session *plimsoll_session_open(plimsoll_client *c, const char *const *languages,
                                        const char *floor, struct plimsoll_error *err) {
    if (floor && tier_rank(floor) < 0) {
        plc_fail(err, PLIMSOLL_E_USAGE, "the floor is none, process, container, kernel or vm");
        return NULL;
    }
    plimsoll_session *s = calloc(1, sizeof(*s));
    if (!s || !(s->chain = plimsoll_chain_new("")) || (floor && !(s->floor = strdup(floor)))) {
        plimsoll_session_free(s);
        plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
        return NULL;
    }
    s->c = c;
    if (plimsoll_open_session(c, languages, s->id, err) < 0) {
        plimsoll_session_free(s);
        return NULL;
    }
    return s;
}

const char *plimsoll_session_id(const plimsoll_session *s) {
    return s ? s->id : "";
}

int plimsoll_session_run(plimsoll_session *s, const json_t *run, json_t **ret,
                         struct plimsoll_error *err) {
    if (!s)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no session");
    return in_session(s->c, s->id, run, s->floor, s->chain, ret, err);
}

int plimsoll_session_cell(plimsoll_session *s, const char *language, const char *code,
                          const json_t *files, unsigned timeout_ms, json_t **ret,
                          struct plimsoll_error *err) {
    if (!s || !language || !code)
        return plc_fail(err, PLIMSOLL_E_USAGE, "a session, a language and code");
    json_t *cell = json_pack("{s:s, s:s}", "language", language, "code", code);
    if (cell && files && json_object_set(cell, "files", (json_t *)files) < 0) {
        json_decref(cell);
        cell = NULL;
    }
    if (!cell)
        return plc_fail(err, PLIMSOLL_E_USAGE, "the cell cannot be built (valid UTF-8 text)");
    int r = cell_call(s->c, s->id, cell, timeout_ms, s->floor, s->chain, ret, err);
    json_decref(cell);
    return r;
}

int plimsoll_session_close(plimsoll_session *s, struct plimsoll_error *err) {
    if (!s)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no session");
    return plimsoll_close_session(s->c, s->id, err);
}

const plimsoll_chain *plimsoll_session_chain(const plimsoll_session *s) {
    return s ? s->chain : NULL;
}

void plimsoll_session_free(plimsoll_session *s) {
    if (!s)
        return;
    plimsoll_chain_free(s->chain);
    free(s->floor);
    OPENSSL_cleanse(s->id, sizeof(s->id));
    free(s);
}
