/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.c: libplimsoll's client and its transport.
 *
 * One libcurl easy handle per client, so keep-alive connections are
 * reused.  A call is one POST an attempt, each read no further than the
 * client's cap and decoded before its deadline, however slowly the answer
 * comes; what the policy allows (AT_CAPACITY, RATE_LIMITED) is tried again
 * after a jittered backoff.  What an answer means is answer.c's, the calls
 * themselves are calls.c's.  A streaming call (RunStream, RunCellStream)
 * is the same POST with one envelope for a body; a 200 stream's bytes go
 * to stream.c as libcurl hands them over, any other answer is read whole,
 * and it is tried again only while no chunk was given to the caller.
 * plimsoll_http_request is one exchange outside the Connect API (the
 * daemon's /mcp): the same transport, key, timeout and cap, the answer
 * handed back as it came, never tried again.
 */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../core/buf.h"
#include "../core/cleanup.h"
#include "../core/clock.h"
#include "../core/ids.h"
#include "lib.h"

#define SERVICE "/plimsoll.v1.SandboxService/"

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
    /* What a bearer token may hold; nothing of the key goes in the message. */
    for (const char *k = o->api_key; k && *k; k++)
        if ((unsigned char)*k < 0x21 || (unsigned char)*k > 0x7e) {
            plc_fail(err, PLIMSOLL_E_USAGE, "%s",
                     *k == '\r' || *k == '\n'
                         ? "the API key may not contain a line break"
                         : "the API key may hold only visible ASCII (no space, no control "
                           "character)");
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

/* The longest key file line read; a key is 40-odd bytes. */
#define KEY_FILE_MAX 4096

static bool is_space(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\f' || ch == '\v';
}

/* s trimmed of surrounding whitespace, as a new string (NULL: no memory). */
static char *trimmed(const char *s, size_t n) {
    while (n && is_space(*s))
        s++, n--;
    while (n && is_space(s[n - 1]))
        n--;
    return strndup(s, n);
}

/* A key's cleanup: wiped, then freed. */
static void wipe_freep(char **s) {
    if (*s) {
        OPENSSL_cleanse(*s, strlen(*s));
        free(*s);
    }
}

/* The first line of the key file at path, trimmed, in *ret. */
static int read_key_file(const char *path, char **ret, struct plimsoll_error *err) {
    FILE *f = fopen(path, "re");
    char line[KEY_FILE_MAX];
    size_t n = 0;
    int e = 0;
    if (f) {
        n = fread(line, 1, sizeof(line), f);
        e = ferror(f) ? (errno ? errno : EIO) : 0;
        fclose(f);
    } else {
        e = errno;
    }
    if (e) {
        plc_fail(err, PLIMSOLL_E_USAGE, "cannot read the key file %s: %s", path, strerror(e));
        return -1;
    }
    size_t len = 0;
    while (len < n && line[len] != '\n')
        len++;
    *ret = trimmed(line, len);
    OPENSSL_cleanse(line, sizeof(line));
    if (!*ret) {
        plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
        return -1;
    }
    if (!**ret) {
        free(*ret);
        *ret = NULL;
        plc_fail(err, PLIMSOLL_E_USAGE, "the key file %s holds no key on its first line", path);
        return -1;
    }
    return 0;
}

/* The key the environment names, trimmed, in *ret (NULL: none named). */
static int env_key(char **ret, struct plimsoll_error *err) {
    const char *k = getenv("PLIMSOLL_KEY");
    *ret = NULL;
    if (k && *k) {
        *ret = trimmed(k, strlen(k));
        if (!*ret) {
            plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
            return -1;
        }
        if (**ret)
            return 0;
        free(*ret);
        *ret = NULL; /* blank: as if unset */
    }
    const char *path = getenv("PLIMSOLL_KEY_FILE");
    if (!path || !*path)
        return 0;
    return read_key_file(path, ret, err);
}

plimsoll_client *plimsoll_client_from_env(const struct plimsoll_options *opts,
                                          struct plimsoll_error *err) {
    struct plimsoll_options o = opts ? *opts : (struct plimsoll_options){0};
    PL_CLEANUP(wipe_freep) char *key = NULL;
    PL_AUTO_FREE char *url = NULL;
    const char *u = getenv("PLIMSOLL_URL");
    if ((!o.url || !*o.url) && u && *u) {
        if (!(url = trimmed(u, strlen(u)))) {
            plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
            return NULL;
        }
        o.url = url;
    }
    if (!o.api_key || !*o.api_key) {
        if (env_key(&key, err) < 0)
            return NULL;
        o.api_key = key;
    }
    return plimsoll_client_new(&o, err);
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

/* The transport's failure: the timeout, or the daemon out of reach; -1. */
static int transport_fail(plimsoll_client *c, const char *method, CURLcode rc,
                          struct plimsoll_error *err) {
    if (rc == CURLE_OPERATION_TIMEDOUT)
        return deadline_fail(err, method, c->timeout_ms, curl_easy_strerror(rc));
    plc_fail(err, PLIMSOLL_E_INFRASTRUCTURE, "cannot reach the daemon at %s: %s",
             c->unix_path ? c->unix_path : c->base, curl_easy_strerror(rc));
    if (err) {
        snprintf(err->code, sizeof(err->code), "unavailable");
        err->dispatched = true; /* it may have run: never assume otherwise */
    }
    return -1;
}

bool plc_route_ok(const char *route) {
    size_t n = route ? strlen(route) : 0;
    return n >= 1 && n <= PLC_ROUTE_MAX &&
           strspn(route, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

/* One POST of body (len bytes) with the body of the answer to write(ud):
 * the status and Content-Type (*ret_ctype, malloc'd or NULL), and what
 * curl_easy_perform gave; *unsent when it could not even be sent (out of
 * memory).  A stream's call says so in its Content-Type and Accept; a
 * session's call names its route (NULL or "": none). */
static CURLcode exchange(plimsoll_client *c, const char *method, bool stream, const char *route,
                         const char *body, size_t len, curl_write_callback write, void *ud,
                         long *status, char **ret_ctype, bool *unsent) {
    struct pl_buf url = {0};
    *status = 0;
    *ret_ctype = NULL;
    *unsent = true;
    if (pl_buf_printf(&url, "%s" SERVICE "%s", c->base, method) < 0)
        return CURLE_OUT_OF_MEMORY;
    CURL *h = c->curl;
    curl_easy_reset(h);
    struct curl_slist *hd = NULL, *t;
    /* The callers checked the route (plc_route_ok): no line break gets in. */
    char route_line[sizeof("Plimsoll-Route: ") + PLC_ROUTE_MAX];
    snprintf(route_line, sizeof(route_line), "Plimsoll-Route: %s", route ? route : "");
    const char *lines[] = {
        stream ? "Content-Type: " PLC_STREAM_MEDIA_TYPE : "Content-Type: application/json",
        stream ? "Accept: " PLC_STREAM_MEDIA_TYPE : NULL, "Connect-Protocol-Version: 1", c->auth,
        route && *route ? route_line : NULL};
    CURLcode rc = CURLE_OK;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]) && rc == CURLE_OK; i++) {
        if (!lines[i])
            continue;
        if (!(t = curl_slist_append(hd, lines[i])))
            rc = CURLE_OUT_OF_MEMORY;
        else
            hd = t;
    }
    if (rc == CURLE_OK) {
        *unsent = false;
        if (c->unix_path)
            curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
        curl_easy_setopt(h, CURLOPT_URL, url.data);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, ud);
        /* A declared length past the cap fails before the body is read. */
        curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)c->max_answer);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                         c->timeout_ms < 10000 ? c->timeout_ms : 10000);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
        char *ct = NULL;
        curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
        *ret_ctype = ct ? strdup(ct) : NULL;
    }
    curl_slist_free_all(hd);
    pl_buf_free(&url);
    return rc;
}

/* One POST: the status, Content-Type (*ret_ctype, malloc'd or NULL) and at
 * most c->max_answer bytes of body; -1 with *err on a transport failure,
 * the timeout, or a body past the cap. */
static int post(plimsoll_client *c, const char *method, const char *route, const char *body,
                long *status, char **ret_ctype, struct pl_buf *answer, struct plimsoll_error *err) {
    struct sink sink = {.b = answer, .max = c->max_answer};
    bool unsent;
    CURLcode rc = exchange(c, method, false, route, body, strlen(body), on_data, &sink, status,
                           ret_ctype, &unsent);
    if (rc == CURLE_OK)
        return 0;
    free(*ret_ctype);
    *ret_ctype = NULL;
    if (unsent)
        return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    if (rc == CURLE_FILESIZE_EXCEEDED || (rc == CURLE_WRITE_ERROR && sink.over))
        return plc_protocol_fail(err, method, *status,
                                 "it is longer than the client's max_answer_bytes (%zu)",
                                 c->max_answer);
    return transport_fail(c, method, rc, err);
}

/* ---- attempts and retries ------------------------------------------------- */

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
static int attempt(plimsoll_client *c, const char *method, const char *route, const char *body,
                   json_t **ret, struct plimsoll_error *err) {
    uint64_t deadline = pl_deadline_in_ms((uint64_t)c->timeout_ms);
    struct pl_buf answer = {0};
    long status = 0;
    char *ctype = NULL;
    int r = post(c, method, route, body, &status, &ctype, &answer, err);
    if (r == 0 && status != 200) {
        plc_refusal(c, method, status, &answer, err);
        if (pl_now_ns() > deadline)
            deadline_fail(err, method, c->timeout_ms, "still decoding the error");
        r = -1;
    } else if (r == 0 && !plc_media_type_is_json(ctype)) {
        r = plc_protocol_fail(err, method, status,
                              "its Content-Type is \"%s\", not application/json",
                              ctype ? ctype : "(none)");
    } else if (r == 0) {
        char why[256];
        json_t *j = plc_parse_result(&answer, method, why, sizeof(why));
        if (pl_now_ns() > deadline) {
            json_decref(j);
            r = deadline_fail(err, method, c->timeout_ms, "still decoding the answer");
        } else if (!j) {
            r = plc_protocol_fail(err, method, status, "%s", why);
        } else {
            *ret = j;
        }
    }
    free(ctype);
    pl_buf_free(&answer);
    return r;
}

/* POST msg, retrying what the policy allows; *ret is the parsed 200 answer. */
int plc_call(plimsoll_client *c, const char *method, const json_t *msg, const char *route,
             json_t **ret, struct plimsoll_error *err) {
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
        r = attempt(c, method, route, body, ret, err);
        if (r == 0 || !plimsoll_errkind_retryable(err->kind))
            break;
    }
    free(body);
    return r;
}

/* ---- server streams (stream.c reads them) --------------------------------- */

/* Where a stream's answer goes: a 200 of application/connect+json to the
 * stream as it comes, anything else whole (at most the cap) to body. */
struct stream_sink {
    CURL *h;
    struct plc_stream *st;
    struct sink whole;
    bool decided, streaming;
};

static size_t on_stream_data(char *ptr, size_t size, size_t nmemb, void *ud) {
    struct stream_sink *s = ud;
    if (!s->decided) {
        long status = 0;
        char *ct = NULL;
        curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(s->h, CURLINFO_CONTENT_TYPE, &ct);
        s->decided = true;
        s->streaming = status == 200 && plc_media_type_is(ct, PLC_STREAM_MEDIA_TYPE);
    }
    if (!s->streaming)
        return on_data(ptr, size, nmemb, &s->whole);
    return plc_stream_feed(s->st, ptr, size * nmemb) < 0 ? 0 : size * nmemb;
}

/* One streaming exchange under one deadline: *ret the checked result. */
static int stream_attempt(plimsoll_client *c, const char *method, const char *route,
                          const struct pl_buf *body, struct plc_stream *st, json_t **ret,
                          struct plimsoll_error *err) {
    uint64_t deadline = pl_deadline_in_ms((uint64_t)c->timeout_ms);
    struct pl_buf answer = {0};
    struct stream_sink sink = {
        .h = c->curl, .st = st, .whole = {.b = &answer, .max = c->max_answer}};
    long status = 0;
    char *ctype = NULL;
    bool unsent;
    CURLcode rc = exchange(c, method, true, route, body->data, body->len, on_stream_data, &sink,
                           &status, &ctype, &unsent);
    bool streaming = sink.streaming || (!sink.decided && status == 200 &&
                                        plc_media_type_is(ctype, PLC_STREAM_MEDIA_TYPE));
    int r;
    if (unsent)
        r = plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    else if (rc == CURLE_FILESIZE_EXCEEDED || (rc == CURLE_WRITE_ERROR && sink.whole.over))
        r = plc_protocol_fail(err, method, status,
                              "it is longer than the client's max_answer_bytes (%zu)",
                              c->max_answer);
    else if (rc == CURLE_WRITE_ERROR && (st->broken || st->canceled))
        r = plc_stream_finish(st, ret, err); /* the stream's own error */
    else if (rc != CURLE_OK)
        r = transport_fail(c, method, rc, err);
    else if (status != 200)
        r = plc_refusal(c, method, status, &answer, err);
    else if (!streaming)
        r = plc_protocol_fail(err, method, status,
                              "its Content-Type is \"%s\", not " PLC_STREAM_MEDIA_TYPE,
                              ctype ? ctype : "(none)");
    else
        r = plc_stream_finish(st, ret, err);
    if (r == 0 && pl_now_ns() > deadline) {
        json_decref(*ret);
        *ret = NULL;
        r = deadline_fail(err, method, c->timeout_ms, "still decoding the stream");
    } else if (r < 0 && status != 200 && !unsent && rc == CURLE_OK && pl_now_ns() > deadline) {
        deadline_fail(err, method, c->timeout_ms, "still decoding the error");
    }
    free(ctype);
    pl_buf_free(&answer);
    return r;
}

int plc_call_stream(plimsoll_client *c, const char *method, const json_t *msg, const char *route,
                    unsigned nsteps, plimsoll_output_fn on_output, void *userdata, json_t **ret,
                    struct plimsoll_error *err) {
    if (!c)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no client");
    char *json = json_dumps(msg, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!json)
        return plc_fail(err, PLIMSOLL_E_USAGE, "the request cannot be encoded as JSON");
    /* The request is one envelope: flags 0, its length, the JSON. */
    size_t n = strlen(json);
    unsigned char hdr[5] = {0, (unsigned char)(n >> 24), (unsigned char)(n >> 16),
                            (unsigned char)(n >> 8), (unsigned char)n};
    struct pl_buf body = {0};
    int bad = n > 0xffffffffu || pl_buf_append(&body, hdr, sizeof(hdr)) < 0 ||
              pl_buf_append(&body, json, n) < 0;
    free(json);
    if (bad) {
        pl_buf_free(&body);
        return plc_fail(err, PLIMSOLL_E_USAGE, "the request cannot be sent (too large)");
    }
    int attempts = c->retry.max_attempts > 1 ? c->retry.max_attempts : 1;
    struct plimsoll_error local;
    if (!err)
        err = &local;
    int r = -1;
    for (int i = 0; i < attempts; i++) {
        if (i > 0)
            backoff(&c->retry, i - 1);
        struct plc_stream st;
        if (plc_stream_init(&st, method, c->max_answer, nsteps, on_output, userdata) < 0) {
            r = plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
            break;
        }
        r = stream_attempt(c, method, route, &body, &st, ret, err);
        /* Never again once the caller saw output: it would see it twice. */
        bool gave = st.chunks > 0;
        plc_stream_free(&st);
        if (r == 0 || gave || !plimsoll_errkind_retryable(err->kind))
            break;
    }
    pl_buf_free(&body);
    return r;
}

/* ---- one raw exchange (plimsoll_http_request) ----------------------------- */

/* The longest value of the answer header a caller asks for; a session id
 * or a token is a few dozen bytes. */
#define ANSWER_HEADER_MAX 8192

/* Where plimsoll_http_request's answer headers go: the one asked for. */
struct header_sink {
    const char *name; /* NULL: none asked for */
    size_t name_len;
    char *value; /* malloc'd, the first one of the final answer */
    bool over, oom;
};

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud) {
    struct header_sink *s = ud;
    size_t n = size * nmemb;
    if (!s->name)
        return n;
    /* A status line starts an answer's headers: an interim answer's
     * (100 Continue) count for nothing. */
    if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) {
        free(s->value);
        s->value = NULL;
        s->over = false;
        return n;
    }
    if (s->value || n <= s->name_len || ptr[s->name_len] != ':' ||
        strncasecmp(ptr, s->name, s->name_len) != 0)
        return n;
    const char *v = ptr + s->name_len + 1;
    size_t len = n - s->name_len - 1;
    while (len && (*v == ' ' || *v == '\t'))
        v++, len--;
    while (len && is_space(v[len - 1]))
        len--;
    if (len > ANSWER_HEADER_MAX) {
        s->over = true;
        return n;
    }
    if (!(s->value = strndup(v, len)))
        s->oom = true;
    return n;
}

/* A request line the caller gives: "Name: value", a token for a name and
 * no control character but a tab. */
static bool header_line_ok(const char *h) {
    const char *colon = strchr(h, ':');
    if (!colon || colon == h)
        return false;
    for (const char *p = h; p < colon; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f ||
            strchr("()<>@,;\\\"/[]?={}", *p))
            return false;
    for (const char *p = colon + 1; *p; p++)
        if (((unsigned char)*p < 0x20 && *p != '\t') || (unsigned char)*p == 0x7f)
            return false;
    return true;
}

/* A path from the daemon's root: '/' then visible ASCII. */
static bool path_ok(const char *p) {
    if (!p || p[0] != '/')
        return false;
    for (; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            return false;
    return true;
}

void plimsoll_http_answer_free(struct plimsoll_http_answer *a) {
    if (!a)
        return;
    free(a->content_type);
    free(a->header);
    free(a->body);
    *a = (struct plimsoll_http_answer){0};
}

int plimsoll_http_request(plimsoll_client *c, const struct plimsoll_http_request *req,
                          struct plimsoll_http_answer *ret, struct plimsoll_error *err) {
    if (ret)
        *ret = (struct plimsoll_http_answer){0};
    if (!c || !req || !ret)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no client, request or answer");
    const char *method = req->method ? req->method : "POST";
    bool post = strcmp(method, "POST") == 0;
    if (!post && strcmp(method, "DELETE") != 0)
        return plc_fail(err, PLIMSOLL_E_USAGE, "the method must be POST or DELETE");
    if (!path_ok(req->path))
        return plc_fail(err, PLIMSOLL_E_USAGE,
                        "the path must begin with '/' and hold only visible ASCII");
    if (req->timeout_ms < 0)
        return plc_fail(err, PLIMSOLL_E_USAGE, "the timeout may not be negative");
    if (!post && req->body_len)
        return plc_fail(err, PLIMSOLL_E_USAGE, "a DELETE has no body");
    if (req->body_len && !req->body)
        return plc_fail(err, PLIMSOLL_E_USAGE, "a body of %zu bytes at NULL", req->body_len);
    if (req->answer_header && (!*req->answer_header || strchr(req->answer_header, ':')))
        return plc_fail(err, PLIMSOLL_E_USAGE, "the answer header is named without its colon");
    for (const char *const *h = req->headers; h && *h; h++)
        if (!header_line_ok(*h))
            return plc_fail(err, PLIMSOLL_E_USAGE,
                            "a request header must be \"Name: value\" on one line");
    long timeout_ms = req->timeout_ms ? req->timeout_ms : c->timeout_ms;
    PL_CLEANUP(pl_buf_free) struct pl_buf url = {0};
    struct pl_buf answer = {0};
    struct curl_slist *hd = NULL, *t;
    bool oom = pl_buf_printf(&url, "%s%s", c->base, req->path) < 0;
    /* No Expect: 100-continue: a body waits for no interim answer. */
    const char *fixed[] = {"Expect:", c->auth};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]) && !oom; i++)
        if (fixed[i] && !(t = curl_slist_append(hd, fixed[i])))
            oom = true;
        else if (fixed[i])
            hd = t;
    for (const char *const *h = req->headers; h && *h && !oom; h++)
        if (!(t = curl_slist_append(hd, *h)))
            oom = true;
        else
            hd = t;
    if (oom) {
        curl_slist_free_all(hd);
        return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    }
    struct sink sink = {.b = &answer, .max = c->max_answer};
    struct header_sink hs = {.name = req->answer_header,
                             .name_len = req->answer_header ? strlen(req->answer_header) : 0};
    CURL *h = c->curl;
    curl_easy_reset(h);
    if (c->unix_path)
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
    curl_easy_setopt(h, CURLOPT_URL, url.data);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    if (post) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body_len ? (const char *)req->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    } else {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &hs);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)c->max_answer);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 10000 ? timeout_ms : 10000);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    char *ct = NULL;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
    curl_slist_free_all(hd);
    int r = 0;
    if (rc == CURLE_FILESIZE_EXCEEDED || (rc == CURLE_WRITE_ERROR && sink.over))
        r = plc_protocol_fail(err, req->path, status,
                              "it is longer than the client's max_answer_bytes (%zu)",
                              c->max_answer);
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        r = deadline_fail(err, req->path, timeout_ms, curl_easy_strerror(rc));
    else if (rc != CURLE_OK)
        r = transport_fail(c, req->path, rc, err);
    else if (hs.over)
        r = plc_protocol_fail(err, req->path, status, "its %s header is longer than %d bytes",
                              req->answer_header, ANSWER_HEADER_MAX);
    else if (hs.oom || pl_buf_append(&answer, "", 0) < 0 ||
             (ct && !(ret->content_type = strdup(ct))))
        r = plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    if (r < 0) {
        free(hs.value);
        free(ret->content_type);
        pl_buf_free(&answer);
        *ret = (struct plimsoll_http_answer){0};
        if (err)
            err->http_status = (int)status;
        return -1;
    }
    ret->status = status;
    ret->header = hs.value;
    ret->body = answer.data;
    ret->body_len = answer.len;
    return 0;
}
