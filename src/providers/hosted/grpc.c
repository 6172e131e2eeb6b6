/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc.c: one gRPC call over HTTP/2 on libcurl (grpc.h).
 */
#include "grpc.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../core/buf.h"
#include "hosted.h"

static const char *const code_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *ph_grpc_code_name(int code) {
    static _Thread_local char other[24];
    if (code >= 0 && (size_t)code < sizeof(code_names) / sizeof(code_names[0]))
        return code_names[code];
    snprintf(other, sizeof(other), "code %d", code);
    return other;
}

struct call {
    CURL *h;
    struct ph_grpc_call *c;
    struct ph_envelopes env;
    long http_status;
    bool grpc_type;
    bool broken; /* the answer broke the rules; why says how */
    char why[160];
    struct pl_error msg_err; /* on_message's refusal */
    bool msg_failed;
};

static int hexval(int ch) {
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* grpc-message is percent-encoded UTF-8: decode it, drop control bytes. */
static void decode_message(char *dst, size_t size, const char *v, size_t vl) {
    size_t o = 0;
    for (size_t i = 0; i < vl && o + 1 < size; i++) {
        int ch = (unsigned char)v[i];
        if (ch == '%' && i + 2 < vl && hexval(v[i + 1]) >= 0 && hexval(v[i + 2]) >= 0) {
            ch = hexval(v[i + 1]) << 4 | hexval(v[i + 2]);
            i += 2;
        }
        if (ch < 0x20 || ch == 0x7f)
            continue;
        dst[o++] = (char)ch;
    }
    dst[o] = '\0';
}

void ph_grpc_header_line(struct ph_grpc_call *c, const char *line, size_t len, long *http_status,
                         bool *ret_grpc_type) {
    while (len && (line[len - 1] == '\r' || line[len - 1] == '\n'))
        len--;
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        /* a status line: "HTTP/2 200" */
        const char *sp = memchr(line, ' ', len), *end = line + len;
        long st = 0;
        int n = 0;
        for (const char *p = sp ? sp + 1 : end; p < end && *p >= '0' && *p <= '9' && n < 4;
             p++, n++)
            st = st * 10 + (*p - '0');
        *http_status = n == 3 ? st : 0; /* exactly three digits, or no status */
        return;
    }
    const char *colon = memchr(line, ':', len);
    if (!colon)
        return;
    size_t nl = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vl = len - nl - 1;
    while (vl && (*v == ' ' || *v == '\t'))
        v++, vl--;
    while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        vl--;
    if (nl == 11 && strncasecmp(line, "grpc-status", nl) == 0) {
        int st = 0;
        size_t i = 0;
        for (; i < vl && v[i] >= '0' && v[i] <= '9' && st < 1000; i++)
            st = st * 10 + (v[i] - '0');
        c->status = (i == vl && vl > 0 && st < 1000) ? st : PH_GRPC_UNKNOWN;
    } else if (nl == 12 && strncasecmp(line, "grpc-message", nl) == 0) {
        decode_message(c->message, sizeof(c->message), v, vl);
    } else if (nl == 12 && strncasecmp(line, "content-type", nl) == 0) {
        /* application/grpc, optionally +proto or ;params */
        *ret_grpc_type = vl >= 16 && strncasecmp(v, "application/grpc", 16) == 0 &&
                         (vl == 16 || v[16] == '+' || v[16] == ';');
    }
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    struct call *k = ud;
    ph_grpc_header_line(k->c, p, size * n, &k->http_status, &k->grpc_type);
    return size * n;
}

static int on_envelope(void *ud, unsigned flags, const unsigned char *msg, size_t len) {
    struct call *k = ud;
    if (flags & PH_FLAG_COMPRESSED) {
        k->broken = true;
        snprintf(k->why, sizeof(k->why), "a compressed message (none was offered)");
        return -1;
    }
    int rc = k->c->on_message ? k->c->on_message(k->c->ud, msg, len, &k->msg_err) : 0;
    if (rc < 0) {
        k->msg_failed = true;
        return -1;
    }
    if (rc > 0) {
        k->c->stopped = true;
        return -1;
    }
    return 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    struct call *k = ud;
    size_t len = size * n;
    if (k->http_status != 200 || !k->grpc_type) {
        /* not a gRPC answer: its body is not ours to read */
        return len;
    }
    if (ph_envelopes_feed(&k->env, (const unsigned char *)p, len) < 0) {
        if (!k->broken && !k->msg_failed && !k->c->stopped) {
            k->broken = true;
            snprintf(k->why, sizeof(k->why), "a message larger than %zu bytes", k->c->max_message);
        }
        return 0;
    }
    return len;
}

/* gRPC's mapping of an HTTP status with no grpc-status. */
static int http_to_grpc(long st) {
    switch (st) {
    case 400: return PH_GRPC_INTERNAL;
    case 401: return PH_GRPC_UNAUTHENTICATED;
    case 403: return PH_GRPC_PERMISSION_DENIED;
    case 404: return PH_GRPC_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504: return PH_GRPC_UNAVAILABLE;
    default: return PH_GRPC_UNKNOWN;
    }
}

int ph_grpc(const struct ph_grpc_target *t, struct ph_grpc_call *c, struct pl_error *err) {
    c->status = -1;
    c->message[0] = '\0';
    c->stopped = false;
    struct call k = {.c = c};
    ph_envelopes_init(&k.env, c->max_message ? c->max_message : (4u << 20), on_envelope, &k);
    struct pl_buf body = {0};
    struct curl_slist *hdrs = NULL;
    char url[1024], line[4200];
    int rc = -1;
    CURL *h = curl_easy_init();
    if (!h || ph_envelope_append(&body, 0, c->msg, c->len) < 0)
        goto oom;
    k.h = h;
    uint64_t timeout = c->timeout_ms ? c->timeout_ms : 30000;
    if ((size_t)snprintf(url, sizeof(url), "%s%s", t->url, c->method) >= sizeof(url)) {
        pl_error_set(err, PL_REASON_INTERNAL, "%s: the URL is too long", c->method);
        goto out;
    }
    const char *fixed[] = {"Content-Type: application/grpc", "TE: trailers",
                           "Expect:", "User-Agent: plimsoll-grpc", "Accept:"};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (!(hdrs = curl_slist_append(hdrs, fixed[i])))
            goto oom;
    /* grpc-timeout: at most 8 digits, in milliseconds */
    snprintf(line, sizeof(line), "grpc-timeout: %llum",
             (unsigned long long)(timeout > 99999999 ? 99999999 : timeout));
    if (!(hdrs = curl_slist_append(hdrs, line)))
        goto oom;
    if (t->bearer && t->bearer[0]) {
        if ((size_t)snprintf(line, sizeof(line), "Authorization: Bearer %s", t->bearer) >=
            sizeof(line)) {
            pl_error_set(err, PL_REASON_INTERNAL, "%s: the bearer token is too long", c->method);
            goto out;
        }
        struct curl_slist *nh = curl_slist_append(hdrs, line);
        explicit_bzero(line, sizeof(line));
        if (!nh)
            goto oom;
        hdrs = nh;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (t->ca_file && t->ca_file[0])
        curl_easy_setopt(h, CURLOPT_CAINFO, t->ca_file);
    if (t->cert_file && t->cert_file[0]) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, t->cert_file);
        curl_easy_setopt(h, CURLOPT_SSLKEY, t->key_file);
    }
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout < 10000 ? timeout : 10000));
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body.len);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &k);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &k);
    CURLcode cc = curl_easy_perform(h);
    if (c->stopped) {
        rc = 0;
        goto out;
    }
    if (k.msg_failed) {
        *err = k.msg_err;
        goto out;
    }
    if (k.broken) {
        pl_error_set(err, PL_REASON_INTERNAL, "%s: the answer broke gRPC's rules: %s", c->method,
                     k.why);
        goto out;
    }
    if (cc != CURLE_OK) {
        pl_error_errno(err, PL_REASON_INTERNAL,
                       cc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : ECONNREFUSED, "%s %s: %s",
                       c->method, t->url, curl_easy_strerror(cc));
        goto out;
    }
    long version = 0;
    curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &version);
    if (version != CURL_HTTP_VERSION_2_0) {
        pl_error_set(err, PL_REASON_INTERNAL, "%s: the answer is not HTTP/2", c->method);
        goto out;
    }
    if (k.http_status != 200) {
        if (c->status < 0)
            c->status = http_to_grpc(k.http_status);
        if (!c->message[0])
            snprintf(c->message, sizeof(c->message), "HTTP status %ld", k.http_status);
        rc = 0;
        goto out;
    }
    if (!k.grpc_type) {
        pl_error_set(err, PL_REASON_INTERNAL, "%s: the answer is not application/grpc", c->method);
        goto out;
    }
    if (c->status < 0) {
        pl_error_set(err, PL_REASON_INTERNAL, "%s: the answer ended without a grpc-status",
                     c->method);
        goto out;
    }
    if (c->status == PH_GRPC_OK && !ph_envelopes_idle(&k.env)) {
        pl_error_set(err, PL_REASON_INTERNAL, "%s: the answer ended inside a message", c->method);
        goto out;
    }
    rc = 0;
    goto out;
oom:
    pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
out:
    if (h)
        curl_easy_cleanup(h);
    for (struct curl_slist *l = hdrs; l; l = l->next) /* the bearer's line among them */
        explicit_bzero(l->data, strlen(l->data));
    curl_slist_free_all(hdrs);
    pl_buf_free(&body);
    ph_envelopes_free(&k.env);
    return rc;
}
