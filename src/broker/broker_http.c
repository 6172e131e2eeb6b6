/* SPDX-License-Identifier: Apache-2.0 */
/*
 * broker_http.c: the broker's strict HTTP/1.1 parser and response writer.
 *
 * Parsing runs in two passes over the caller's bytes.  The first validates
 * line by line, in order, and only counts: header count, string bytes,
 * Content-Length.  It allocates nothing, so a partial or hostile request
 * costs no memory and every limit is enforced before any copy.  When the
 * head and the whole body are present the second pass copies target and
 * headers into one arena and the body into its own buffer.  See
 * broker_http.h for the accepted subset.
 */
#include "broker_http.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the validating pass learns about a request. */
struct scan {
    size_t method_len;
    size_t target_off, target_len;
    int version_minor;
    size_t headers_off; /* first byte after the request line's CRLF */
    size_t head_len;    /* bytes through the blank line's CRLF */
    size_t nheaders;
    size_t arena_bytes; /* target, names and values, each with its NUL */
    bool has_length;
    uint64_t content_length;
    bool expect_continue;
};

void pl_http_limits_effective(const struct pl_http_limits *lim, struct pl_http_limits *ret) {
    struct pl_http_limits l = {0};
    if (lim)
        l = *lim;
    if (l.max_head_bytes == 0)
        l.max_head_bytes = PL_HTTP_DEFAULT_MAX_HEAD_BYTES;
    if (l.max_headers == 0)
        l.max_headers = PL_HTTP_DEFAULT_MAX_HEADERS;
    if (l.max_body_bytes == 0)
        l.max_body_bytes = PL_HTTP_DEFAULT_MAX_BODY_BYTES;
    if (l.max_head_bytes > PL_HTTP_CAP_MAX_HEAD_BYTES)
        l.max_head_bytes = PL_HTTP_CAP_MAX_HEAD_BYTES;
    if (l.max_headers > PL_HTTP_CAP_MAX_HEADERS)
        l.max_headers = PL_HTTP_CAP_MAX_HEADERS;
    if (l.max_body_bytes > PL_HTTP_CAP_MAX_BODY_BYTES)
        l.max_body_bytes = PL_HTTP_CAP_MAX_BODY_BYTES;
    *ret = l;
}

/* RFC 9110 tchar. */
static bool is_tchar(unsigned char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Field-value bytes this parser accepts: VCHAR, SP, HTAB (no obs-text). */
static bool is_value_char(unsigned char c) {
    return (c >= 0x21 && c <= 0x7e) || c == ' ' || c == '\t';
}

static char lower(char c) {
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Case-insensitive compare of buf[0..n) with the lower-case NUL-terminated word. */
static bool name_is(const char *buf, size_t n, const char *word) {
    size_t wl = strlen(word);
    if (n != wl)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(buf[i]) != word[i])
            return false;
    return true;
}

static int fail(struct pl_http_parse_info *info, int status, const char *why) {
    info->error = why;
    return status;
}

/*
 * Find the line starting at pos.  Returns 1 with *ret_eol at its CR, 0 when
 * the line is not complete yet, -431 when it cannot end within max_head
 * bytes of the start of the request, -400 on a bare LF.
 */
static int next_line(const char *buf, size_t len, size_t pos, size_t max_head, size_t *ret_eol,
                     struct pl_http_parse_info *info) {
    size_t limit = len < max_head ? len : max_head;
    const char *nl = pos < limit ? memchr(buf + pos, '\n', limit - pos) : NULL;
    if (!nl) {
        if (len >= max_head)
            return fail(info, -431, "request head larger than the limit");
        return 0;
    }
    size_t i = (size_t)(nl - buf);
    if (i == pos || buf[i - 1] != '\r')
        return fail(info, -400, "line ends in a bare LF (CRLF required)");
    *ret_eol = i - 1;
    return 1;
}

/* Request line: METHOD SP origin-form SP HTTP/1.x, in buf[pos..eol). */
static int scan_request_line(const char *buf, size_t eol, struct scan *sc,
                             struct pl_http_parse_info *info) {
    size_t p = 0;
    while (p < eol && buf[p] >= 'A' && buf[p] <= 'Z')
        p++;
    if (p == 0 || p >= sizeof(((struct pl_http_request *)0)->method))
        return fail(info, -400, "method must be 1-15 characters A-Z");
    if (p >= eol || buf[p] != ' ')
        return fail(info, -400, "method must be 1-15 characters A-Z followed by one space");
    sc->method_len = p;
    size_t t = ++p;
    while (p < eol && buf[p] != ' ') {
        unsigned char c = (unsigned char)buf[p];
        if (c < 0x21 || c > 0x7e)
            return fail(info, -400, "request target must be printable ASCII");
        p++;
    }
    if (p == t || p >= eol)
        return fail(info, -400, "request line must be METHOD SP target SP HTTP-version");
    if (buf[t] != '/')
        return fail(info, -400, "request target must be origin-form (start with '/')");
    if (p - t >= 2 && buf[t + 1] == '/')
        return fail(info, -400, "request target must not start with '//'");
    sc->target_off = t;
    sc->target_len = p - t;
    size_t v = p + 1;
    if (eol - v != 8 || memcmp(buf + v, "HTTP/", 5) != 0 || buf[v + 5] < '0' || buf[v + 5] > '9' ||
        buf[v + 6] != '.' || buf[v + 7] < '0' || buf[v + 7] > '9')
        return fail(info, -400, "request line must end in HTTP/1.0 or HTTP/1.1");
    if (buf[v + 5] != '1' || (buf[v + 7] != '0' && buf[v + 7] != '1'))
        return fail(info, -505, "only HTTP/1.0 and HTTP/1.1 are supported");
    sc->version_minor = buf[v + 7] - '0';
    sc->arena_bytes = sc->target_len + 1;
    return 0;
}

/* Split a header line buf[pos..eol) into name [pos..*ret_colon) and trimmed value. */
static void split_header(const char *buf, size_t pos, size_t eol, size_t *ret_colon,
                         size_t *ret_vstart, size_t *ret_vend) {
    const char *c = memchr(buf + pos, ':', eol - pos);
    size_t colon = c ? (size_t)(c - buf) : eol;
    size_t vs = colon < eol ? colon + 1 : eol, ve = eol;
    while (vs < ve && (buf[vs] == ' ' || buf[vs] == '\t'))
        vs++;
    while (ve > vs && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'))
        ve--;
    *ret_colon = colon;
    *ret_vstart = vs;
    *ret_vend = ve;
}

static int scan_header(const char *buf, size_t pos, size_t eol, const struct pl_http_limits *l,
                       struct scan *sc, struct pl_http_parse_info *info) {
    if (sc->nheaders >= l->max_headers)
        return fail(info, -431, "too many header fields");
    if (buf[pos] == ' ' || buf[pos] == '\t')
        return fail(info, -400, "obsolete line folding is not accepted");
    size_t colon, vs, ve;
    split_header(buf, pos, eol, &colon, &vs, &ve);
    if (colon == eol)
        return fail(info, -400, "header line without ':'");
    if (colon == pos)
        return fail(info, -400, "empty header name");
    for (size_t i = pos; i < colon; i++)
        if (!is_tchar((unsigned char)buf[i]))
            return fail(info, -400, "header name must be a token (no space before ':')");
    for (size_t i = vs; i < ve; i++)
        if (!is_value_char((unsigned char)buf[i]))
            return fail(info, -400, "header value holds a control or non-ASCII byte");
    const char *name = buf + pos;
    size_t nlen = colon - pos;
    if (name_is(name, nlen, "transfer-encoding"))
        return fail(info, -501, "Transfer-Encoding is not supported; send Content-Length");
    if (name_is(name, nlen, "content-length")) {
        if (sc->has_length)
            return fail(info, -400, "more than one Content-Length");
        if (vs == ve)
            return fail(info, -400, "Content-Length must be digits");
        uint64_t n = 0;
        for (size_t i = vs; i < ve; i++) {
            if (buf[i] < '0' || buf[i] > '9')
                return fail(info, -400, "Content-Length must be digits");
            unsigned d = (unsigned)(buf[i] - '0');
            if (n > (UINT64_MAX - d) / 10)
                return fail(info, -400, "Content-Length overflows");
            n = n * 10 + d;
        }
        if (n > l->max_body_bytes)
            return fail(info, -413, "request body larger than the limit");
        sc->has_length = true;
        sc->content_length = n;
    } else if (name_is(name, nlen, "expect") && ve - vs == 12 &&
               name_is(buf + vs, ve - vs, "100-continue")) {
        sc->expect_continue = true;
    }
    sc->nheaders++;
    sc->arena_bytes += nlen + 1 + (ve - vs) + 1;
    return 0;
}

/* The validating pass.  Returns 1 when the head is complete, 0, or < 0. */
static int scan_head(const char *buf, size_t len, const struct pl_http_limits *l, struct scan *sc,
                     struct pl_http_parse_info *info) {
    size_t eol;
    int r = next_line(buf, len, 0, l->max_head_bytes, &eol, info);
    if (r <= 0)
        return r;
    if (eol == 0)
        return fail(info, -400, "empty line before the request line");
    r = scan_request_line(buf, eol, sc, info);
    if (r < 0)
        return r;
    size_t pos = eol + 2;
    sc->headers_off = pos;
    for (;;) {
        r = next_line(buf, len, pos, l->max_head_bytes, &eol, info);
        if (r <= 0)
            return r;
        if (eol == pos)
            break;
        r = scan_header(buf, pos, eol, l, sc, info);
        if (r < 0)
            return r;
        pos = eol + 2;
    }
    sc->head_len = eol + 2;
    info->head_complete = true;
    info->expect_continue = sc->expect_continue;
    info->request_len = sc->head_len + (size_t)sc->content_length;
    const char *m = buf;
    size_t ml = sc->method_len;
    if (!sc->has_length &&
        ((ml == 4 && memcmp(m, "POST", 4) == 0) || (ml == 3 && memcmp(m, "PUT", 3) == 0) ||
         (ml == 5 && memcmp(m, "PATCH", 5) == 0)))
        return fail(info, -411, "POST, PUT and PATCH need a Content-Length");
    return 1;
}

/* The copying pass, over a head scan_head accepted. */
static int fill(const char *buf, const struct scan *sc, struct pl_http_request *req) {
    memset(req, 0, sizeof(*req));
    req->arena = malloc(sc->arena_bytes);
    req->body = malloc((size_t)sc->content_length + 1);
    if (sc->nheaders)
        req->headers = calloc(sc->nheaders, sizeof(*req->headers));
    if (!req->arena || !req->body || (sc->nheaders && !req->headers)) {
        pl_http_request_clear(req);
        return -500;
    }
    memcpy(req->method, buf, sc->method_len);
    req->method[sc->method_len] = '\0';
    req->version_minor = sc->version_minor;
    char *a = req->arena;
    memcpy(a, buf + sc->target_off, sc->target_len);
    a[sc->target_len] = '\0';
    req->target = a;
    a += sc->target_len + 1;
    size_t pos = sc->headers_off;
    for (size_t h = 0; h < sc->nheaders; h++) {
        size_t eol = (size_t)((const char *)memchr(buf + pos, '\n', sc->head_len - pos) - buf) - 1;
        size_t colon, vs, ve;
        split_header(buf, pos, eol, &colon, &vs, &ve);
        req->headers[h].name = a;
        for (size_t i = pos; i < colon; i++)
            *a++ = lower(buf[i]);
        *a++ = '\0';
        req->headers[h].value = a;
        memcpy(a, buf + vs, ve - vs);
        a += ve - vs;
        *a++ = '\0';
        pos = eol + 2;
    }
    req->nheaders = sc->nheaders;
    req->body_len = (size_t)sc->content_length;
    if (req->body_len)
        memcpy(req->body, buf + sc->head_len, req->body_len);
    req->body[req->body_len] = '\0';
    return 0;
}

int pl_http_parse_request_ex(const char *buf, size_t len, const struct pl_http_limits *lim,
                             struct pl_http_request *ret_req, size_t *ret_consumed,
                             struct pl_http_parse_info *ret_info) {
    struct pl_http_parse_info scratch;
    struct pl_http_parse_info *info = ret_info ? ret_info : &scratch;
    memset(info, 0, sizeof(*info));
    if (!buf && len)
        return fail(info, -400, "no input");
    struct pl_http_limits l;
    pl_http_limits_effective(lim, &l);
    struct scan sc = {0};
    int r = scan_head(buf, len, &l, &sc, info);
    if (r <= 0)
        return r;
    if (len - sc.head_len < sc.content_length)
        return 0;
    struct pl_http_request req;
    if (fill(buf, &sc, &req) < 0)
        return fail(info, -500, "out of memory");
    *ret_req = req;
    *ret_consumed = sc.head_len + (size_t)sc.content_length;
    return 1;
}

int pl_http_parse_request(const char *buf, size_t len, const struct pl_http_limits *lim,
                          struct pl_http_request *ret_req, size_t *ret_consumed) {
    return pl_http_parse_request_ex(buf, len, lim, ret_req, ret_consumed, NULL);
}

void pl_http_request_clear(struct pl_http_request *req) {
    if (!req)
        return;
    free(req->arena);
    free(req->headers);
    free(req->body);
    memset(req, 0, sizeof(*req));
}

const char *pl_http_header_get(const struct pl_http_request *req, const char *lower_name) {
    if (!req || !lower_name)
        return NULL;
    for (size_t i = 0; i < req->nheaders; i++)
        if (strcmp(req->headers[i].name, lower_name) == 0)
            return req->headers[i].value;
    return NULL;
}

/* ---- responses ---------------------------------------------------------- */

#define PL_HTTP_STATUS_MAP(X)                                                                      \
    X(200, "OK", "ok")                                                                             \
    X(201, "Created", "created")                                                                   \
    X(202, "Accepted", "accepted")                                                                 \
    X(204, "No Content", "no_content")                                                             \
    X(301, "Moved Permanently", "moved_permanently")                                               \
    X(302, "Found", "found")                                                                       \
    X(304, "Not Modified", "not_modified")                                                         \
    X(400, "Bad Request", "bad_request")                                                           \
    X(401, "Unauthorized", "unauthorized")                                                         \
    X(403, "Forbidden", "forbidden")                                                               \
    X(404, "Not Found", "not_found")                                                               \
    X(405, "Method Not Allowed", "method_not_allowed")                                             \
    X(408, "Request Timeout", "request_timeout")                                                   \
    X(409, "Conflict", "conflict")                                                                 \
    X(411, "Length Required", "length_required")                                                   \
    X(413, "Content Too Large", "payload_too_large")                                               \
    X(415, "Unsupported Media Type", "unsupported_media_type")                                     \
    X(422, "Unprocessable Content", "unprocessable_content")                                       \
    X(429, "Too Many Requests", "too_many_requests")                                               \
    X(431, "Request Header Fields Too Large", "headers_too_large")                                 \
    X(500, "Internal Server Error", "internal")                                                    \
    X(501, "Not Implemented", "not_implemented")                                                   \
    X(502, "Bad Gateway", "bad_gateway")                                                           \
    X(503, "Service Unavailable", "unavailable")                                                   \
    X(504, "Gateway Timeout", "gateway_timeout")                                                   \
    X(505, "HTTP Version Not Supported", "http_version_not_supported")

const char *pl_http_reason(int status) {
    switch (status) {
#define X(code, reason, name)                                                                      \
    case code: return reason;
        PL_HTTP_STATUS_MAP(X)
#undef X
    default: return "Unknown";
    }
}

const char *pl_http_error_name(int status) {
    switch (status) {
#define X(code, reason, name)                                                                      \
    case code: return name;
        PL_HTTP_STATUS_MAP(X)
#undef X
    default: return "error";
    }
}

static bool header_writable(const struct pl_http_header *h) {
    if (!h->name || !h->value || h->name[0] == '\0')
        return false;
    for (const char *p = h->name; *p; p++)
        if (!is_tchar((unsigned char)*p))
            return false;
    for (const char *p = h->value; *p; p++)
        if (!is_value_char((unsigned char)*p) && (unsigned char)*p < 0x80)
            return false;
    size_t n = strlen(h->name);
    return !name_is(h->name, n, "content-length") && !name_is(h->name, n, "connection") &&
           !name_is(h->name, n, "transfer-encoding");
}

/* A bounded append into out[cap]; the sizes were computed beforehand. */
static void put(char *out, size_t *pos, const char *s, size_t n) {
    memcpy(out + *pos, s, n);
    *pos += n;
}

int pl_http_format_response(const struct pl_http_response *resp, char **ret_out, size_t *ret_len) {
    if (!resp || resp->status < 200 || resp->status > 599 || (resp->body_len && !resp->body) ||
        (resp->nheaders && !resp->headers))
        return -EINVAL;
    bool no_length = resp->status == 204;
    if (no_length && resp->body_len)
        return -EINVAL;
    char line[128];
    int n = snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", resp->status,
                     pl_http_reason(resp->status));
    char clen[64];
    int cn = snprintf(clen, sizeof(clen), "Content-Length: %zu\r\n", resp->body_len);
    if (n < 0 || (size_t)n >= sizeof(line) || cn < 0 || (size_t)cn >= sizeof(clen))
        return -EINVAL;
    static const char tail[] = "Connection: close\r\n\r\n";
    size_t total = (size_t)n + (no_length ? 0 : (size_t)cn) + sizeof(tail) - 1;
    for (size_t i = 0; i < resp->nheaders; i++) {
        const struct pl_http_header *h = &resp->headers[i];
        if (!header_writable(h))
            continue;
        size_t add = strlen(h->name) + 2 + strlen(h->value) + 2;
        if (add > SIZE_MAX / 2 - total)
            return -ENOMEM;
        total += add;
    }
    if (resp->body_len > SIZE_MAX / 2 - total)
        return -ENOMEM;
    total += resp->body_len;
    char *out = malloc(total + 1);
    if (!out)
        return -ENOMEM;
    size_t pos = 0;
    put(out, &pos, line, (size_t)n);
    for (size_t i = 0; i < resp->nheaders; i++) {
        const struct pl_http_header *h = &resp->headers[i];
        if (!header_writable(h))
            continue;
        put(out, &pos, h->name, strlen(h->name));
        put(out, &pos, ": ", 2);
        put(out, &pos, h->value, strlen(h->value));
        put(out, &pos, "\r\n", 2);
    }
    if (!no_length)
        put(out, &pos, clen, (size_t)cn);
    put(out, &pos, tail, sizeof(tail) - 1);
    if (resp->body_len)
        put(out, &pos, resp->body, resp->body_len);
    out[pos] = '\0';
    *ret_out = out;
    *ret_len = pos;
    return 0;
}

/* Append s as a JSON string body (quotes included) to out[cap] at *pos. */
static void error_json_string(char *out, size_t cap, size_t *pos, const char *str) {
    static const char hex[] = "0123456789abcdef";
    if (*pos + 1 < cap)
        out[(*pos)++] = '"';
    for (const unsigned char *p = (const unsigned char *)str; *p && *pos + 7 < cap; p++) {
        if (*p == '"' || *p == '\\') {
            out[(*pos)++] = '\\';
            out[(*pos)++] = (char)*p;
        } else if (*p < 0x20 || *p >= 0x7f) {
            memcpy(out + *pos, "\\u00", 4);
            out[*pos + 4] = hex[*p >> 4];
            out[*pos + 5] = hex[*p & 15];
            *pos += 6;
        } else {
            out[(*pos)++] = (char)*p;
        }
    }
    if (*pos + 1 < cap)
        out[(*pos)++] = '"';
    out[*pos] = '\0';
}

int pl_http_format_error(int status, const char *message, char **ret_out, size_t *ret_len) {
    char body[512];
    size_t pos = 0;
    memcpy(body, "{\"error\":", 9);
    pos = 9;
    error_json_string(body, sizeof(body) - 16, &pos, pl_http_error_name(status));
    memcpy(body + pos, ",\"message\":", 11);
    pos += 11;
    error_json_string(body, sizeof(body) - 2, &pos, message ? message : pl_http_reason(status));
    body[pos++] = '}';
    body[pos] = '\0';
    struct pl_http_header ct = {.name = "Content-Type", .value = "application/json"};
    struct pl_http_response resp = {
        .status = status, .headers = &ct, .nheaders = 1, .body = body, .body_len = pos};
    return pl_http_format_response(&resp, ret_out, ret_len);
}
