/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.c: one call to a hosted service's HTTP API (hosted.h), on libcurl.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../core/cleanup.h"
#include "hosted.h"

struct call {
    CURL *h;
    const struct ph_request *req;
    struct ph_response *resp;
    size_t max;
    bool too_large;
    bool aborted;
};

static size_t on_body(char *p, size_t size, size_t n, void *userdata) {
    struct call *c = userdata;
    size_t len = size * n;
    long status = 0;
    curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
    /* Only a success is a stream; an error answer is kept as a body. */
    if (c->req->on_data && status >= 200 && status < 300) {
        if (c->req->on_data(c->req->userdata, (const unsigned char *)p, len) < 0) {
            c->aborted = true;
            return 0;
        }
        return len;
    }
    if (c->resp->body.len + len > c->max) {
        c->too_large = true;
        return 0;
    }
    return pl_buf_append(&c->resp->body, p, len) < 0 ? 0 : len;
}

static size_t on_header(char *p, size_t size, size_t n, void *userdata) {
    struct call *c = userdata;
    size_t len = size * n;
    const char *want = c->req->want_header;
    size_t wl = want ? strlen(want) : 0;
    if (wl && len > wl + 1 && p[wl] == ':' && strncasecmp(p, want, wl) == 0) {
        const char *v = p + wl + 1;
        size_t vl = len - wl - 1;
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        if (vl >= sizeof(c->resp->header))
            vl = sizeof(c->resp->header) - 1;
        memcpy(c->resp->header, v, vl);
        c->resp->header[vl] = '\0';
    }
    return len;
}

static void easy_cleanupp(CURL **h) {
    curl_easy_cleanup(*h);
}

static void mime_freep(curl_mime **m) {
    curl_mime_free(*m);
}

static void slist_freep(struct curl_slist **l) {
    curl_slist_free_all(*l);
}

/* Append line to *l; on failure *l is kept whole, for its cleanup. */
static int add_header(struct curl_slist **l, const char *line) {
    struct curl_slist *n = curl_slist_append(*l, line);
    if (!n)
        return -1;
    *l = n;
    return 0;
}

/* The request's body onto h; what it makes (*payload, *mime) is the
 * caller's, kept until h is done with it.  < 0: out of memory. */
static int put_body(CURL *h, const struct ph_request *req, struct curl_slist **hdrs, char **payload,
                    curl_mime **mime) {
    if (req->json) {
        if (!(*payload = json_dumps(req->json, JSON_COMPACT)))
            return -1;
        if (add_header(hdrs, "Content-Type: application/json") < 0)
            return -1;
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, *payload);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(*payload));
    } else if (req->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)req->body_len);
    } else if (req->parts) {
        if (!(*mime = curl_mime_init(h)))
            return -1;
        for (size_t i = 0; i < req->nparts; i++) {
            curl_mimepart *p = curl_mime_addpart(*mime);
            if (!p || curl_mime_name(p, req->parts[i].name) != CURLE_OK ||
                curl_mime_data(p, req->parts[i].data, req->parts[i].len) != CURLE_OK ||
                (req->parts[i].filename &&
                 curl_mime_filename(p, req->parts[i].filename) != CURLE_OK) ||
                (req->parts[i].type && curl_mime_type(p, req->parts[i].type) != CURLE_OK))
                return -1;
        }
        curl_easy_setopt(h, CURLOPT_MIMEPOST, *mime);
    } else if (strcmp(req->method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
    }
    return 0;
}

/* The call did not complete: why, into err.  Returns -1. */
static int call_failed(const struct call *c, CURLcode cc, struct pl_error *err) {
    const struct ph_request *req = c->req;
    if (c->too_large)
        return pl_error_set(err, PL_REASON_INTERNAL, "%s %s: the answer is larger than %zu bytes",
                            req->method, req->url, c->max);
    if (c->aborted)
        return pl_error_set(err, PL_REASON_INTERNAL, "%s %s: the answer's stream was refused",
                            req->method, req->url);
    return pl_error_errno(err, PL_REASON_INTERNAL,
                          cc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : ECONNREFUSED, "%s %s: %s",
                          req->method, req->url, curl_easy_strerror(cc));
}

int ph_call(const struct ph_request *req, struct ph_response *ret, struct pl_error *err) {
    memset(ret, 0, sizeof(*ret));
    struct call c = {
        .req = req, .resp = ret, .max = req->max_response ? req->max_response : 1u << 20};
    /* What the handle points to outlives it: declared first, freed last. */
    PL_AUTO_FREE char *payload = NULL;
    PL_CLEANUP(slist_freep) struct curl_slist *hdrs = NULL;
    PL_CLEANUP(mime_freep) curl_mime *mime = NULL;
    PL_CLEANUP(easy_cleanupp) CURL *h = curl_easy_init();
    if (!h)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    c.h = h;
    for (const char *const *l = req->headers; l && *l; l++)
        if (add_header(&hdrs, *l) < 0)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    /* libcurl's own "Expect: 100-continue" only costs a round trip. */
    if (add_header(&hdrs, "Expect:") < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    curl_easy_setopt(h, CURLOPT_URL, req->url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(req->timeout_ms ? req->timeout_ms : 30000));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &c);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &c);
    if (put_body(h, req, &hdrs, &payload, &mime) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    CURLcode cc = curl_easy_perform(h);
    if (cc != CURLE_OK) {
        ph_response_free(ret); /* what on_body kept of the answer */
        return call_failed(&c, cc, err);
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &ret->status);
    return 0;
}

void ph_response_free(struct ph_response *r) {
    pl_buf_free(&r->body);
    r->body = (struct pl_buf){0};
}

json_t *ph_response_json(const struct ph_response *r) {
    if (!r->body.data || r->body.len == 0)
        return NULL;
    return json_loadb(r->body.data, r->body.len, 0, NULL);
}

char *ph_urlencode(const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}
