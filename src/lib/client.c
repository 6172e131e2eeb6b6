/*
 * client.c: libplimsoll's calls, errors, retries and sessions.
 *
 * One libcurl easy handle per client, so keep-alive connections are
 * reused.  Every answer is sorted into the three channels of
 * docs/clients.md: a 200 is a result (checked: floor, then record), a
 * Connect error with a known reason a typed refusal, anything else
 * infrastructure.
 */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/buf.h"
#include "../core/canon.h"
#include "../core/tier.h"
#include "lib.h"

#define MAX_ANSWER (256u << 20)
#define SERVICE "/plimsoll.v1.SandboxService/"

struct plimsoll_client {
    CURL *curl;
    char *base;      /* "http://host:port" without a trailing slash */
    char *unix_path; /* NULL for TCP */
    char *auth;      /* "Authorization: Bearer …" or NULL */
    long timeout_ms;
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

/* ---- one HTTP exchange ---------------------------------------------------- */

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud) {
    struct pl_buf *b = ud;
    size_t n = size * nmemb;
    if (b->len + n > MAX_ANSWER || pl_buf_append(b, ptr, n) < 0)
        return 0;
    return n;
}

static int post(plimsoll_client *c, const char *method, const char *body, long *status,
                struct pl_buf *answer, struct plimsoll_error *err) {
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
    if (c->unix_path)
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
    curl_easy_setopt(h, CURLOPT_URL, url.data);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms < 10000 ? c->timeout_ms : 10000);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hd);
    pl_buf_free(&url);
    if (rc != CURLE_OK) {
        plc_fail(err, PLIMSOLL_E_INFRASTRUCTURE, "cannot reach the daemon at %s: %s",
                 c->unix_path ? c->unix_path : c->base, curl_easy_strerror(rc));
        if (err)
            err->dispatched = true; /* it may have run: never assume otherwise */
        return -1;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    return 0;
}

/* A non-200 answer into *err; always -1. */
static int refusal(long status, const struct pl_buf *answer, struct plimsoll_error *err) {
    json_t *j = answer->len ? json_loadb(answer->data, answer->len, 0, NULL) : NULL;
    const char *code = json_string_value(json_object_get(j, "code"));
    if (!code) {
        plc_fail(err, PLIMSOLL_E_INFRASTRUCTURE, "HTTP %ld from the daemon, not a Connect error",
                 status);
        if (err) {
            err->http_status = (int)status;
            err->dispatched = true;
        }
        json_decref(j);
        return -1;
    }
    json_t *dbg = json_object_get(json_array_get(json_object_get(j, "details"), 0), "debug");
    json_t *meta = json_object_get(dbg, "metadata");
    const char *reason = json_string_value(json_object_get(dbg, "reason"));
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
        const char *why = json_string_value(json_object_get(meta, "ended_reason"));
        snprintf(err->isolation, sizeof(err->isolation), "%s", iso ? iso : "");
        if (kind == PLIMSOLL_E_SESSION_ENDED) {
            if (!why && msg && strncmp(msg, "the session has ended: ", 23) == 0)
                why = msg + 23;
            snprintf(err->ended_reason, sizeof(err->ended_reason), "%s", why ? why : "");
        }
    }
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
    if (RAND_bytes((unsigned char *)&rnd, sizeof(rnd)) != 1)
        rnd = (unsigned int)time(NULL);
    long ms = d / 2 + (long)(rnd % (unsigned long)(d / 2 + 1));
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
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
        struct pl_buf answer = {0};
        long status = 0;
        if (post(c, method, body, &status, &answer, err) < 0) {
            pl_buf_free(&answer);
            break;
        }
        if (status == 200) {
            json_t *j = json_loadb(answer.data ? answer.data : "", answer.len, 0, NULL);
            pl_buf_free(&answer);
            if (!json_is_object(j)) {
                json_decref(j);
                plc_fail(err, PLIMSOLL_E_INFRASTRUCTURE, "the daemon's answer is not JSON");
                err->http_status = 200;
                err->dispatched = true;
                break;
            }
            *ret = j;
            r = 0;
            break;
        }
        refusal(status, &answer, err);
        pl_buf_free(&answer);
        if (!plimsoll_errkind_retryable(err->kind))
            break;
    }
    free(body);
    return r;
}

static int tier_rank(const char *s) {
    enum pl_tier t;
    return s && pl_tier_parse(s, &t) == 0 ? (int)t : -1;
}

/* The checks of a 200 answer to a run: the floor first, then the record. */
static int check_answer(plimsoll_client *c, const json_t *sent, const json_t *answer,
                        const char *floor, const char *previous, struct plimsoll_error *err) {
    if (floor && *floor) {
        const char *iso = json_string_value(json_object_get(answer, "isolation"));
        const char *riso =
            json_string_value(json_object_get(json_object_get(answer, "record"), "isolation"));
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
    const char *id = json_string_value(json_object_get(answer, "session_id"));
    if (!id_ok(id)) {
        json_decref(answer);
        plc_fail(err, PLIMSOLL_E_INFRASTRUCTURE, "the daemon's OpenSession answer has no id");
        if (err)
            err->dispatched = true;
        return -1;
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
