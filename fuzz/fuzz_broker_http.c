/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_broker_http.c: libFuzzer harness for the broker's HTTP parser and
 * response writer.  The first two bytes pick small limits (so the limit
 * paths are reached often); the rest is the request.  Besides memory
 * safety it checks the parser's invariants, that a prefix never gets a
 * different answer than the whole input, and that a response built from
 * the parsed (hostile) data has a clean head.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/broker/broker_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static void check_request(const struct pl_http_request *req, const struct pl_http_limits *lim,
                          size_t used, size_t len) {
    if (used > len || req->body_len > lim->max_body_bytes || req->nheaders > lim->max_headers)
        abort();
    size_t ml = strlen(req->method);
    if (ml < 1 || ml > 15)
        abort();
    for (size_t i = 0; i < ml; i++)
        if (req->method[i] < 'A' || req->method[i] > 'Z')
            abort();
    if (req->target[0] != '/' || req->target[1] == '/')
        abort();
    for (const char *p = req->target; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
            abort();
    if (req->version_minor != 0 && req->version_minor != 1)
        abort();
    if (!req->body || req->body[req->body_len] != '\0')
        abort();
    size_t ncl = 0;
    for (size_t i = 0; i < req->nheaders; i++) {
        const char *n = req->headers[i].name, *v = req->headers[i].value;
        if (!n[0])
            abort();
        for (const char *p = n; *p; p++)
            if (!tchar((unsigned char)*p))
                abort();
        size_t vl = strlen(v);
        if (vl && (v[0] == ' ' || v[0] == '\t' || v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            abort();
        for (const char *p = v; *p; p++)
            if (*p == '\r' || *p == '\n' || (unsigned char)*p >= 0x7f)
                abort();
        if (strcmp(n, "transfer-encoding") == 0)
            abort();
        if (strcmp(n, "content-length") == 0)
            ncl++;
    }
    if (ncl > 1 || (ncl == 0 && req->body_len != 0))
        abort();
    if (pl_http_header_get(req, "content-length") == NULL && req->body_len)
        abort();
}

/* The head of a formatted response: CRLF line ends only, one blank line. */
static void check_response(const char *out, size_t len, size_t body_len) {
    if (len < body_len + 4)
        abort();
    size_t head = len - body_len;
    if (memcmp(out + head - 4, "\r\n\r\n", 4) != 0 || memcmp(out, "HTTP/1.1 ", 9) != 0)
        abort();
    for (size_t i = 0; i < head; i++) {
        if (out[i] == '\0')
            abort();
        if (out[i] == '\r' && out[i + 1] != '\n')
            abort();
        if (out[i] == '\n' && (i == 0 || out[i - 1] != '\r'))
            abort();
        if (i + 4 < head && memcmp(out + i, "\r\n\r\n", 4) == 0)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2)
        return 0;
    struct pl_http_limits lim = {
        .max_head_bytes = 16 + (size_t)data[0] * 4, /* 16..1036 */
        .max_headers = 1 + (data[1] & 7),
        .max_body_bytes = 1 + (size_t)(data[1] >> 3) * 8,
    };
    const char *buf = (const char *)data + 2;
    size_t len = size - 2;

    struct pl_http_request req;
    size_t used = 0;
    struct pl_http_parse_info info;
    int r = pl_http_parse_request_ex(buf, len, &lim, &req, &used, &info);
    if (r != 0 && r != 1 && r != -400 && r != -411 && r != -413 && r != -431 && r != -501 &&
        r != -505)
        abort();
    if (r < 0 && !info.error)
        abort();
    if (r == 0 && info.head_complete && info.request_len <= len)
        abort();

    /* A prefix gives 0 or the same answer. */
    size_t cut = len ? (size_t)data[0] * 257 % (len + 1) : 0;
    struct pl_http_request preq;
    size_t pused = 0;
    int pr = pl_http_parse_request(buf, cut, &lim, &preq, &pused);
    if (pr != 0 && pr != r)
        abort();
    if (pr == 1) {
        if (pused != used)
            abort();
        pl_http_request_clear(&preq);
    }
    if (r != 1)
        return 0;
    check_request(&req, &lim, used, len);

    /* Answer with the request's own hostile data. */
    struct pl_http_response resp = {
        .status = 200 + (int)(data[1] % 100) * 4,
        .headers = req.headers,
        .nheaders = req.nheaders,
        .body = req.body,
        .body_len = req.body_len,
    };
    if (resp.status == 204)
        resp.body_len = 0;
    char *out = NULL;
    size_t olen = 0;
    if (pl_http_format_response(&resp, &out, &olen) == 0) {
        check_response(out, olen, resp.body_len);
        free(out);
    }
    /* A header value with an injected line end is dropped. */
    struct pl_http_header evil = {.name = req.method, .value = req.target};
    char bad[] = "a\r\nb";
    if (req.nheaders)
        evil.value = bad;
    struct pl_http_response r2 = {.status = 400, .headers = &evil, .nheaders = 1};
    if (pl_http_format_response(&r2, &out, &olen) == 0) {
        check_response(out, olen, 0);
        if (req.nheaders && memmem(out, olen, "a\r\nb", 4))
            abort();
        free(out);
    }
    pl_http_request_clear(&req);
    return 0;
}
