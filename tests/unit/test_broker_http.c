/* SPDX-License-Identifier: Apache-2.0 */
/* test_broker_http.c: the broker's HTTP parser, response writer and Unix-socket server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/broker/broker_http.h"
#include "../../src/broker/broker_sock.h"
#include "../../src/core/clock.h"

/* ---- parser ------------------------------------------------------------- */

static int parse_lim(const char *text, const struct pl_http_limits *lim,
                     struct pl_http_request *req, size_t *used) {
    return pl_http_parse_request(text, strlen(text), lim, req, used);
}

static int parse(const char *text) {
    struct pl_http_request req;
    size_t used;
    int r = parse_lim(text, NULL, &req, &used);
    if (r == 1)
        pl_http_request_clear(&req);
    return r;
}

static const char VALID[] = "POST /v1/chat?model=x&n=1 HTTP/1.1\r\n"
                            "Host: localhost\r\n"
                            "Content-Type:application/json \r\n"
                            "X-Empty:\r\n"
                            "X-Mixed-CASE:  a  b\t\r\n"
                            "Content-Length: 11\r\n"
                            "\r\n"
                            "{\"a\":\"b c\"}";

static void test_parse_valid(void **state) {
    (void)state;
    struct pl_http_request req;
    size_t used = 0;
    assert_int_equal(parse_lim(VALID, NULL, &req, &used), 1);
    assert_int_equal(used, strlen(VALID));
    assert_string_equal(req.method, "POST");
    assert_string_equal(req.target, "/v1/chat?model=x&n=1");
    assert_int_equal(req.version_minor, 1);
    assert_int_equal(req.nheaders, 5);
    assert_string_equal(req.headers[0].name, "host");
    assert_string_equal(pl_http_header_get(&req, "content-type"), "application/json");
    assert_string_equal(pl_http_header_get(&req, "x-empty"), "");
    assert_string_equal(pl_http_header_get(&req, "x-mixed-case"), "a  b");
    assert_null(pl_http_header_get(&req, "X-Mixed-CASE"));
    assert_null(pl_http_header_get(&req, "absent"));
    assert_int_equal(req.body_len, 11);
    assert_string_equal(req.body, "{\"a\":\"b c\"}");
    pl_http_request_clear(&req);
    pl_http_request_clear(&req); /* idempotent */
    pl_http_request_clear(NULL);

    assert_int_equal(parse_lim("GET / HTTP/1.0\r\n\r\n", NULL, &req, &used), 1);
    assert_int_equal(req.version_minor, 0);
    assert_int_equal(req.nheaders, 0);
    assert_non_null(req.body);
    assert_int_equal(req.body_len, 0);
    assert_string_equal(req.body, "");
    pl_http_request_clear(&req);
}

static void test_parse_every_split(void **state) {
    (void)state;
    size_t n = strlen(VALID);
    for (size_t k = 0; k < n; k++) {
        struct pl_http_request req;
        size_t used = 12345;
        assert_int_equal(pl_http_parse_request(VALID, k, NULL, &req, &used), 0);
        assert_int_equal(used, 12345); /* untouched unless complete */
    }
    /* A copy without a NUL after it: the parser never reads past len. */
    char *exact = malloc(n);
    assert_non_null(exact);
    memcpy(exact, VALID, n);
    struct pl_http_request req;
    size_t used;
    assert_int_equal(pl_http_parse_request(exact, n, NULL, &req, &used), 1);
    assert_int_equal(used, n);
    pl_http_request_clear(&req);
    free(exact);
    assert_int_equal(pl_http_parse_request(NULL, 0, NULL, &req, &used), 0);
}

static void test_parse_pipelined(void **state) {
    (void)state;
    const char *two = "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
    struct pl_http_request req;
    size_t used;
    assert_int_equal(parse_lim(two, NULL, &req, &used), 1);
    assert_int_equal(used, strlen("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert_true(used < strlen(two));
    assert_string_equal(req.target, "/a");
    pl_http_request_clear(&req);
    assert_int_equal(parse_lim(two + used, NULL, &req, &used), 1);
    assert_string_equal(req.target, "/b");
    pl_http_request_clear(&req);

    const char *body = "PUT /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET";
    assert_int_equal(parse_lim(body, NULL, &req, &used), 1);
    assert_int_equal(used, strlen(body) - 3);
    assert_string_equal(req.body, "abc");
    pl_http_request_clear(&req);
}

static void test_parse_request_line_errors(void **state) {
    (void)state;
    /* 400: malformed */
    const char *bad[] = {
        "get / HTTP/1.1\r\n\r\n",
        "G3T / HTTP/1.1\r\n\r\n",
        "ABCDEFGHIJKLMNOP / HTTP/1.1\r\n\r\n", /* 16 letters */
        " GET / HTTP/1.1\r\n\r\n",
        "GET  / HTTP/1.1\r\n\r\n",
        "GET /  HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1 \r\n\r\n",
        "GET /\r\n\r\n",
        "GET\r\n\r\n",
        "\r\nGET / HTTP/1.1\r\n\r\n",
        "GET http://example.com/ HTTP/1.1\r\n\r\n",
        "CONNECT example.com:443 HTTP/1.1\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\n\r\n",
        "GET //evil.example/x HTTP/1.1\r\n\r\n",
        "GET /a\tb HTTP/1.1\r\n\r\n",
        "GET /\x7f HTTP/1.1\r\n\r\n",
        "GET /\xc3\xa9 HTTP/1.1\r\n\r\n",
        "GET / http/1.1\r\n\r\n",
        "GET / HTTP/1.10\r\n\r\n",
        "GET / HTTP/1\r\n\r\n",
        "GET / HTTP/a.1\r\n\r\n",
        "GET / HTTP/1.1\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\n\r\n",
        "GET / HTTP/1.1\r\n\n",
        "GET / HTTP/1.1\r\r\n\r\n",
        "\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (parse(bad[i]) != -400)
            fail_msg("case %zu: %d", i, parse(bad[i]));
    }
    /* 505: well-formed but not 1.0/1.1 */
    assert_int_equal(parse("GET / HTTP/2.0\r\n\r\n"), -505);
    assert_int_equal(parse("GET / HTTP/1.2\r\n\r\n"), -505);
    assert_int_equal(parse("GET / HTTP/0.9\r\n\r\n"), -505);
    /* 15 letters is the longest method */
    assert_int_equal(parse("ABCDEFGHIJKLMNO / HTTP/1.1\r\n\r\n"), 1);
    assert_int_equal(parse("GET /%41?a=/b:c@d HTTP/1.1\r\n\r\n"), 1);
}

static void test_parse_header_errors(void **state) {
    (void)state;
    const char *bad[] = {
        "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
        "GET / HTTP/1.1\r\nHost x\r\n\r\n",
        "GET / HTTP/1.1\r\n: x\r\n\r\n",
        "GET / HTTP/1.1\r\nX(y): x\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",  /* obs-fold */
        "GET / HTTP/1.1\r\nA: b\r\n\tc\r\n\r\n", /* obs-fold */
        "GET / HTTP/1.1\r\n Host: x\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n",
        "GET / HTTP/1.1\r\nA: \xff\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1\r\ncontent-length: 1\r\n\r\nx",
        "GET / HTTP/1.1\r\nContent-Length: +1\r\n\r\nx",
        "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1 1\r\n\r\nx",
        "GET / HTTP/1.1\r\nContent-Length: 1,1\r\n\r\nx",
        "GET / HTTP/1.1\r\nContent-Length: 0x1\r\n\r\nx",
        "GET / HTTP/1.1\r\nContent-Length:\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (parse(bad[i]) != -400)
            fail_msg("case %zu: %d", i, parse(bad[i]));
    }
    /* The NUL byte inside a value (strlen cannot be used here). */
    static const char nul[] = "GET / HTTP/1.1\r\nA: b\0c\r\n\r\n";
    struct pl_http_request req;
    size_t used;
    assert_int_equal(pl_http_parse_request(nul, sizeof(nul) - 1, NULL, &req, &used), -400);

    assert_int_equal(parse("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), -501);
    assert_int_equal(parse("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: "
                           "identity\r\n\r\nabc"),
                     -501);
    assert_int_equal(parse("GET / HTTP/1.1\r\ntransfer-encoding:\r\n\r\n"), -501);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: x\r\n\r\nabc"), -411);
    assert_int_equal(parse("PUT / HTTP/1.1\r\n\r\n"), -411);
    assert_int_equal(parse("PATCH / HTTP/1.1\r\n\r\n"), -411);
    assert_int_equal(parse("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), 1);
    assert_int_equal(parse("GET / HTTP/1.1\r\nContent-Length: 007\r\n\r\nabcdefg"), 1);
    /* Every token character is allowed in a name. */
    assert_int_equal(parse("GET / HTTP/1.1\r\n!#$%&'*+-.^_`|~09azAZ: v\r\n\r\n"), 1);
}

static void test_parse_limits(void **state) {
    (void)state;
    struct pl_http_limits lim = {.max_head_bytes = 64, .max_headers = 2, .max_body_bytes = 10};
    struct pl_http_request req;
    size_t used;
    /* 413 from Content-Length alone, before any body byte arrives. */
    assert_int_equal(parse_lim("POST / HTTP/1.1\r\nContent-Length: 11\r\n", &lim, &req, &used),
                     -413);
    assert_int_equal(
        parse_lim("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789", &lim, &req, &used), 1);
    pl_http_request_clear(&req);
    /* 431: too many headers, decided at the third header line. */
    assert_int_equal(parse_lim("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n", &lim, &req, &used),
                     -431);
    assert_int_equal(parse_lim("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\n", &lim, &req, &used), 1);
    pl_http_request_clear(&req);
    /* 431: head longer than 64 bytes, complete or not. */
    char big[200];
    snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nA: %0*d\r\n\r\n", 60, 0);
    assert_int_equal(parse_lim(big, &lim, &req, &used), -431);
    assert_int_equal(pl_http_parse_request(big, 64, &lim, &req, &used), -431);
    assert_int_equal(pl_http_parse_request(big, 63, &lim, &req, &used), 0);
    /* exactly 64 bytes of head is accepted */
    char edge[100];
    snprintf(edge, sizeof(edge), "GET / HTTP/1.1\r\nA: %0*d\r\n\r\n", 64 - 23, 0);
    assert_int_equal(strlen(edge), 64);
    assert_int_equal(parse_lim(edge, &lim, &req, &used), 1);
    pl_http_request_clear(&req);
    /* A long request line without any LF. */
    char line[300];
    memset(line, 'A', sizeof(line) - 1);
    line[sizeof(line) - 1] = '\0';
    assert_int_equal(parse_lim(line, &lim, &req, &used), -431); /* no line end in 64 bytes */
    memcpy(line, "GET /", 5);
    assert_int_equal(parse_lim(line, &lim, &req, &used), -431);

    struct pl_http_limits eff;
    pl_http_limits_effective(NULL, &eff);
    assert_int_equal(eff.max_head_bytes, 16384);
    assert_int_equal(eff.max_headers, 64);
    assert_int_equal(eff.max_body_bytes, 1024 * 1024);
    struct pl_http_limits huge = {SIZE_MAX, SIZE_MAX, SIZE_MAX};
    pl_http_limits_effective(&huge, &eff);
    assert_int_equal(eff.max_body_bytes, PL_HTTP_CAP_MAX_BODY_BYTES);
}

/* An error seen in a prefix is the answer for the whole input, too. */
static void test_parse_prefix_consistency(void **state) {
    (void)state;
    const char *inputs[] = {
        "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n01234567890",
        "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nA b\r\n\r\n",
        "GET / HTTP/2.0\r\nA: b\r\n\r\n",
        "GET / HTTP/1.1\r\nX: y\n\r\n",
    };
    struct pl_http_limits lim = {.max_head_bytes = 100, .max_headers = 2, .max_body_bytes = 10};
    for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
        struct pl_http_request req;
        size_t used, n = strlen(inputs[i]);
        int whole = pl_http_parse_request(inputs[i], n, &lim, &req, &used);
        assert_true(whole < 0);
        for (size_t k = 0; k <= n; k++) {
            int r = pl_http_parse_request(inputs[i], k, &lim, &req, &used);
            assert_true(r == 0 || r == whole);
        }
    }
}

static void test_parse_info(void **state) {
    (void)state;
    const char *h = "POST /u HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 5\r\n\r\n";
    struct pl_http_request req;
    size_t used;
    struct pl_http_parse_info info;
    assert_int_equal(pl_http_parse_request_ex(h, strlen(h), NULL, &req, &used, &info), 0);
    assert_true(info.head_complete);
    assert_true(info.expect_continue);
    assert_int_equal(info.request_len, strlen(h) + 5);
    assert_int_equal(pl_http_parse_request_ex(h, 10, NULL, &req, &used, &info), 0);
    assert_false(info.head_complete);
    assert_int_equal(pl_http_parse_request_ex("GET / HTTP/1.1\n", 15, NULL, &req, &used, &info),
                     -400);
    assert_non_null(info.error);
    assert_non_null(strstr(info.error, "LF"));
}

/* ---- responses ---------------------------------------------------------- */

static void test_format_response(void **state) {
    (void)state;
    struct pl_http_header hs[] = {
        {"Content-Type", "application/json"},
        {"X-Evil", "a\r\nSet-Cookie: x=1"},
        {"X-Evil2", "a\nb"},
        {"X-Bad\r\nName", "v"},
        {"X Space", "v"},
        {"", "v"},
        {NULL, "v"},
        {"X-Null", NULL},
        {"Content-Length", "999"},
        {"connection", "keep-alive"},
        {"Transfer-Encoding", "chunked"},
        {"X-Tab", "a\tb"},
    };
    struct pl_http_response resp = {
        .status = 404, .headers = hs, .nheaders = 12, .body = "nope", .body_len = 4};
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(pl_http_format_response(&resp, &out, &len), 0);
    assert_int_equal(len, strlen(out));
    assert_string_equal(out, "HTTP/1.1 404 Not Found\r\n"
                             "Content-Type: application/json\r\n"
                             "X-Tab: a\tb\r\n"
                             "Content-Length: 4\r\n"
                             "Connection: close\r\n"
                             "\r\n"
                             "nope");
    free(out);

    struct pl_http_response empty = {.status = 200};
    assert_int_equal(pl_http_format_response(&empty, &out, &len), 0);
    assert_string_equal(out, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    free(out);
    struct pl_http_response nc = {.status = 204};
    assert_int_equal(pl_http_format_response(&nc, &out, &len), 0);
    assert_string_equal(out, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
    free(out);
    struct pl_http_response odd = {.status = 299};
    assert_int_equal(pl_http_format_response(&odd, &out, &len), 0);
    assert_non_null(strstr(out, "HTTP/1.1 299 Unknown\r\n"));
    free(out);

    /* Binary bodies keep their NULs. */
    struct pl_http_response bin = {.status = 200, .body = "a\0b", .body_len = 3};
    assert_int_equal(pl_http_format_response(&bin, &out, &len), 0);
    assert_memory_equal(out + len - 3, "a\0b", 3);
    free(out);

    out = NULL;
    struct pl_http_response bad1 = {.status = 100};
    struct pl_http_response bad2 = {.status = 600};
    struct pl_http_response bad3 = {.status = 204, .body = "x", .body_len = 1};
    struct pl_http_response bad4 = {.status = 200, .body = NULL, .body_len = 1};
    assert_int_equal(pl_http_format_response(&bad1, &out, &len), -EINVAL);
    assert_int_equal(pl_http_format_response(&bad2, &out, &len), -EINVAL);
    assert_int_equal(pl_http_format_response(&bad3, &out, &len), -EINVAL);
    assert_int_equal(pl_http_format_response(&bad4, &out, &len), -EINVAL);
    assert_null(out);
    assert_string_equal(pl_http_reason(413), "Content Too Large");
    assert_string_equal(pl_http_error_name(413), "payload_too_large");
    assert_string_equal(pl_http_error_name(400), "bad_request");
    assert_string_equal(pl_http_error_name(431), "headers_too_large");
}

/* ---- the socket server --------------------------------------------------- */

struct echo {
    unsigned calls;
    unsigned sleep_ms; /* make the handler slow */
    unsigned done_calls;
};

static void echo_handler(void *userdata, const struct pl_http_request *req,
                         struct pl_http_response *resp) {
    struct echo *e = userdata;
    e->calls++;
    if (e->sleep_ms)
        usleep(e->sleep_ms * 1000u);
    size_t cap = strlen(req->method) + strlen(req->target) + req->body_len + 8;
    char *body = malloc(cap);
    int n = snprintf(body, cap, "%s %s ", req->method, req->target);
    memcpy(body + n, req->body, req->body_len);
    struct pl_http_header *h = calloc(2, sizeof(*h));
    h[0].name = strdup("Content-Type");
    h[0].value = strdup("text/plain");
    h[1].name = strdup("X-Injected");
    h[1].value = strdup("a\r\nX-Evil: 1");
    resp->status = 200;
    resp->headers = h;
    resp->nheaders = 2;
    resp->body = body;
    resp->body_len = (size_t)n + req->body_len;
}

static void echo_done(void *userdata, struct pl_http_response *resp) {
    struct echo *e = userdata;
    e->done_calls++;
    for (size_t i = 0; i < resp->nheaders; i++) {
        free(resp->headers[i].name);
        free(resp->headers[i].value);
    }
    free(resp->headers);
    free((char *)resp->body);
}

struct server {
    char parent[64];
    char dir[96];
    struct pl_broker_sock *sock;
    struct echo echo;
};

static void server_start(struct server *sv, unsigned idle_ms, unsigned max_conn) {
    memset(sv, 0, sizeof(*sv));
    snprintf(sv->parent, sizeof(sv->parent), "/tmp/pl-broker-test.XXXXXX");
    assert_non_null(mkdtemp(sv->parent));
    snprintf(sv->dir, sizeof(sv->dir), "%s/run", sv->parent);
    struct pl_broker_sock_opts o = {
        .dir = sv->dir,
        .sock_name = "broker.sock",
        .limits = {.max_body_bytes = 4096},
        .idle_timeout_ms = idle_ms,
        .max_connections = max_conn,
        .handler = echo_handler,
        .done = echo_done,
        .userdata = &sv->echo,
    };
    struct pl_error err = {0};
    int r = pl_broker_sock_start(&o, &sv->sock, &err);
    if (r < 0)
        fail_msg("start: %s", err.message);
}

static void server_stop(struct server *sv) {
    pl_broker_sock_stop(sv->sock);
    struct stat st;
    assert_int_equal(stat(sv->dir, &st), -1);
    assert_int_equal(rmdir(sv->parent), 0);
}

static int connect_to(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static uint64_t ms_now(void) {
    return pl_now_ns() / PL_MS(1);
}

/* Read until EOF (or 5 s); returns the bytes read, NUL-terminated in out. */
static size_t read_all(int fd, char *out, size_t cap) {
    size_t len = 0;
    uint64_t end = ms_now() + 5000;
    while (len + 1 < cap && ms_now() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(fd, out + len, cap - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    out[len] = '\0';
    return len;
}

static void send_str(int fd, const char *s) {
    assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

static void test_sock_echo(void **state) {
    (void)state;
    struct server sv;
    server_start(&sv, 2000, 0);
    const char *path = pl_broker_sock_path(sv.sock);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0666);
    assert_int_equal(stat(sv.dir, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);

    int fd = connect_to(path);
    send_str(fd, "POST /v1/x?y=1 HTTP/1.1\r\nHost: b\r\nContent-Length: 5\r\n\r\nhello");
    char buf[4096];
    read_all(fd, buf, sizeof(buf));
    close(fd);
    assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(buf, "Content-Type: text/plain\r\n"));
    assert_null(strstr(buf, "X-Evil"));
    assert_null(strstr(buf, "X-Injected"));
    assert_non_null(strstr(buf, "Connection: close\r\n"));
    assert_non_null(strstr(buf, "\r\n\r\nPOST /v1/x?y=1 hello"));

    /* A HEAD answer has no body. */
    fd = connect_to(path);
    send_str(fd, "HEAD /h HTTP/1.1\r\n\r\n");
    read_all(fd, buf, sizeof(buf));
    close(fd);
    assert_non_null(strstr(buf, "Content-Length: 8\r\n"));
    assert_non_null(strstr(buf, "\r\n\r\n"));
    assert_string_equal(strstr(buf, "\r\n\r\n"), "\r\n\r\n");

    /* Expect: 100-continue gets its interim answer before the body is sent. */
    fd = connect_to(path);
    send_str(fd, "PUT /c HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
    char cont[64] = "";
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 2000), 1);
    ssize_t n = read(fd, cont, sizeof(cont) - 1);
    assert_true(n > 0);
    assert_string_equal(cont, "HTTP/1.1 100 Continue\r\n\r\n");
    send_str(fd, "ok");
    read_all(fd, buf, sizeof(buf));
    close(fd);
    assert_non_null(strstr(buf, "\r\n\r\nPUT /c ok"));

    assert_int_equal(sv.echo.calls, 3);
    assert_int_equal(sv.echo.done_calls, 3);
    assert_int_equal(pl_broker_sock_connections(sv.sock), 3);
    server_stop(&sv);
    assert_int_equal(stat(path, &st), -1);
}

static void test_sock_errors(void **state) {
    (void)state;
    struct server sv;
    server_start(&sv, 2000, 0);
    const char *path = pl_broker_sock_path(sv.sock);
    struct {
        const char *req;
        const char *want;
    } cases[] = {
        {"GET / HTTP/1.1\nHost: x\n\n", "HTTP/1.1 400 Bad Request\r\n"},
        {"POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n", "\"error\":\"payload_too_large\""},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.1 501 "},
        {"POST / HTTP/1.1\r\n\r\n", "\"error\":\"length_required\""},
        {"GET / HTTP/2.0\r\n\r\n", "HTTP/1.1 505 "},
        {"GET http://x/ HTTP/1.1\r\n\r\n", "{\"error\":\"bad_request\",\"message\":\"request "
                                           "target must be origin-form (start with '/')\"}"},
    };
    char buf[4096];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int fd = connect_to(path);
        send_str(fd, cases[i].req);
        read_all(fd, buf, sizeof(buf));
        close(fd);
        if (!strstr(buf, cases[i].want))
            fail_msg("case %zu: %s", i, buf);
        assert_non_null(strstr(buf, "Content-Type: application/json\r\n"));
    }
    /* The 413 is sent while the client is still writing its body: it can read it. */
    int fd = connect_to(path);
    send_str(fd, "POST / HTTP/1.1\r\nContent-Length: 100000\r\n\r\n");
    char chunk[8192];
    memset(chunk, 'x', sizeof(chunk));
    for (int i = 0; i < 4; i++)
        (void)send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL);
    read_all(fd, buf, sizeof(buf));
    close(fd);
    assert_non_null(strstr(buf, "HTTP/1.1 413 "));

    /* Half a request then silence: 408 and closed after the idle timeout. */
    server_stop(&sv);
    server_start(&sv, 300, 0);
    path = pl_broker_sock_path(sv.sock);
    fd = connect_to(path);
    send_str(fd, "GET /slow HTTP/1.1\r\nHost:");
    uint64_t t0 = ms_now();
    read_all(fd, buf, sizeof(buf));
    uint64_t took = ms_now() - t0;
    close(fd);
    assert_non_null(strstr(buf, "HTTP/1.1 408 "));
    assert_true(took >= 250 && took < 2000);
    /* A client that connects and sends nothing at all is timed out too. */
    fd = connect_to(path);
    read_all(fd, buf, sizeof(buf));
    close(fd);
    assert_non_null(strstr(buf, "HTTP/1.1 408 "));
    assert_int_equal(sv.echo.calls, 0);
    server_stop(&sv);
}

static void test_sock_max_connections(void **state) {
    (void)state;
    struct server sv;
    server_start(&sv, 2000, 2);
    const char *path = pl_broker_sock_path(sv.sock);
    char buf[4096];
    for (int i = 0; i < 2; i++) {
        int fd = connect_to(path);
        send_str(fd, "GET /ok HTTP/1.1\r\n\r\n");
        read_all(fd, buf, sizeof(buf));
        close(fd);
        assert_non_null(strstr(buf, "HTTP/1.1 200 OK"));
    }
    for (int i = 0; i < 3; i++) {
        int fd = connect_to(path);
        read_all(fd, buf, sizeof(buf)); /* answered without a request being read */
        close(fd);
        assert_non_null(strstr(buf, "HTTP/1.1 429 Too Many Requests\r\n"));
        assert_non_null(strstr(buf, "\"error\":\"too_many_requests\""));
    }
    assert_int_equal(sv.echo.calls, 2);
    assert_int_equal(pl_broker_sock_connections(sv.sock), 5);
    server_stop(&sv);
}

static void test_sock_stop_while_connected(void **state) {
    (void)state;
    struct server sv;
    server_start(&sv, 60000, 0);
    int fd = connect_to(pl_broker_sock_path(sv.sock));
    send_str(fd, "GET / HTTP/1.1\r\n");
    usleep(100 * 1000); /* the server thread is now waiting for the rest */
    uint64_t t0 = ms_now();
    server_stop(&sv);
    assert_true(ms_now() - t0 < 200);
    char buf[64];
    read_all(fd, buf, sizeof(buf));
    close(fd);

    /* A slow handler is waited for, not interrupted. */
    server_start(&sv, 60000, 0);
    sv.echo.sleep_ms = 300;
    fd = connect_to(pl_broker_sock_path(sv.sock));
    send_str(fd, "GET /slow HTTP/1.1\r\n\r\n");
    usleep(100 * 1000);
    t0 = ms_now();
    server_stop(&sv);
    assert_true(ms_now() - t0 < 1000);
    assert_int_equal(sv.echo.calls, 1);
    assert_int_equal(sv.echo.done_calls, 1);
    close(fd);
}

static void test_sock_start_errors(void **state) {
    (void)state;
    char parent[] = "/tmp/pl-broker-test.XXXXXX";
    assert_non_null(mkdtemp(parent));
    struct pl_error err = {0};
    struct pl_broker_sock *s = NULL;
    struct pl_broker_sock_opts o = {
        .dir = parent, .sock_name = "broker.sock", .handler = echo_handler};
    assert_int_equal(pl_broker_sock_start(&o, &s, &err), -EEXIST);
    char want[256];
    snprintf(want, sizeof(want), "broker socket: mkdir %s: %s", parent, strerror(EEXIST));
    assert_string_equal(err.message, want);
    assert_int_equal(err.errnum, EEXIST);
    assert_int_equal(err.reason, PL_REASON_INTERNAL);
    char missing[128];
    snprintf(missing, sizeof(missing), "%s/no/such", parent);
    o.dir = missing;
    assert_int_equal(pl_broker_sock_start(&o, &s, &err), -ENOENT);
    assert_int_equal(err.errnum, ENOENT);
    char dir[128];
    snprintf(dir, sizeof(dir), "%s/run", parent);
    o.dir = dir;
    o.sock_name = "../x";
    assert_int_equal(pl_broker_sock_start(&o, &s, &err), -EINVAL);
    assert_string_equal(err.message, "broker socket: sock_name must be one path component");
    assert_int_equal(err.errnum, EINVAL);
    o.sock_name = "broker.sock";
    o.limits.max_body_bytes = (size_t)PL_HTTP_CAP_MAX_BODY_BYTES + 1;
    assert_int_equal(pl_broker_sock_start(&o, &s, &err), -EINVAL);
    o.limits.max_body_bytes = 0;
    o.handler = NULL;
    assert_int_equal(pl_broker_sock_start(&o, &s, NULL), -EINVAL); /* err may be NULL */
    o.handler = echo_handler;
    char longdir[200];
    memset(longdir, 'd', sizeof(longdir) - 1);
    longdir[sizeof(longdir) - 1] = '\0';
    o.sock_name = longdir;
    assert_int_equal(pl_broker_sock_start(&o, &s, &err), -ENAMETOOLONG);
    assert_null(s);
    struct stat st;
    assert_int_equal(stat(dir, &st), -1); /* nothing left behind */
    pl_broker_sock_stop(NULL);
    assert_int_equal(rmdir(parent), 0);
}

/* A socket that cannot start says why in the error: the errno kept, the
 * step and the path in the message. */
static void test_sock_start_failure_says_why(void **state) {
    (void)state;
    char parent[] = "/tmp/pl-broker-test.XXXXXX";
    assert_non_null(mkdtemp(parent));
    char want[256];
    struct pl_broker_sock *s = NULL;
    struct pl_broker_sock_opts o = {
        .dir = parent, .sock_name = "broker.sock", .handler = echo_handler};
    struct pl_error err = {0};
    assert_int_equal(pl_broker_sock_start(&o, &s, &err), -EEXIST); /* the directory exists */
    snprintf(want, sizeof(want), "broker socket: mkdir %s: %s", parent, strerror(EEXIST));
    assert_string_equal(err.message, want);
    assert_int_equal(err.errnum, EEXIST);
    assert_int_equal(err.reason, PL_REASON_INTERNAL);
    assert_null(s);
    assert_int_equal(pl_broker_sock_start(&o, &s, NULL), -EEXIST); /* err may be NULL */
    char dir[128];
    snprintf(dir, sizeof(dir), "%s/run", parent);
    o.dir = dir;
    assert_int_equal(pl_broker_sock_start(&o, &s, NULL), 0);
    assert_non_null(s);
    pl_broker_sock_stop(s);
    assert_int_equal(rmdir(parent), 0);
}

/* Python's standard library, as a guest would use it, talks to the server. */
static void test_sock_python_client(void **state) {
    (void)state;
    if (system("python3 -c pass >/dev/null 2>&1") != 0)
        skip();
    struct server sv;
    server_start(&sv, 5000, 0);
    static const char code[] = "import http.client, socket, sys\n"
                               "class C(http.client.HTTPConnection):\n"
                               "    def __init__(self, path):\n"
                               "        super().__init__('localhost', timeout=5)\n"
                               "        self.unix_path = path\n"
                               "    def connect(self):\n"
                               "        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                               "        s.settimeout(5)\n"
                               "        s.connect(self.unix_path)\n"
                               "        self.sock = s\n"
                               "c = C(sys.argv[1])\n"
                               "c.request('POST', '/v1/echo?q=1', body=b'{\"hi\":1}',\n"
                               "          headers={'Content-Type': 'application/json'})\n"
                               "r = c.getresponse()\n"
                               "print(r.status, r.getheader('Content-Type'), r.read().decode())\n"
                               "c.close()\n"
                               "c = C(sys.argv[1])\n"
                               "c.request('GET', '/x', headers={'Transfer-Encoding': 'chunked'})\n"
                               "r = c.getresponse()\n"
                               "print(r.status, r.read().decode())\n";
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "python3 -c \"$PL_PY\" '%s'", pl_broker_sock_path(sv.sock));
    assert_int_equal(setenv("PL_PY", code, 1), 0);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char out[2048];
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    unsetenv("PL_PY");
    server_stop(&sv);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "200 text/plain POST /v1/echo?q=1 {\"hi\":1}\n"));
    assert_non_null(strstr(out, "501 {\"error\":\"not_implemented\""));
}

/* Node's http module with socketPath: req.end(body) sends Content-Length, write() chunks. */
static void test_sock_node_client(void **state) {
    (void)state;
    if (system("node -e 0 >/dev/null 2>&1") != 0)
        skip();
    struct server sv;
    server_start(&sv, 5000, 0);
    static const char code[] =
        "const http = require('http');\n"
        "function call(write, cb) {\n"
        "  const r = http.request({socketPath: process.argv[1], method: 'POST', path: '/n?x=1',\n"
        "    headers: {'Content-Type': 'text/plain'}}, (res) => {\n"
        "    let d = ''; res.on('data', (c) => d += c);\n"
        "    res.on('end', () => { console.log(res.statusCode + ' ' + d); cb(); });\n"
        "  });\n"
        "  r.on('error', (e) => { console.log('error ' + e.message); cb(); });\n"
        "  if (write) { r.write('ab'); r.end('cd'); } else { r.end('abcd'); }\n"
        "}\n"
        "call(false, () => call(true, () => {}));\n";
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "node -e \"$PL_JS\" '%s'", pl_broker_sock_path(sv.sock));
    assert_int_equal(setenv("PL_JS", code, 1), 0);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char out[2048];
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    unsetenv("PL_JS");
    server_stop(&sv);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "200 POST /n?x=1 abcd\n"));
    assert_non_null(strstr(out, "501 {\"error\":\"not_implemented\""));
}

/* curl --unix-socket, waiting for the interim 100 before sending its body. */
static void test_sock_curl_client(void **state) {
    (void)state;
    if (system("curl --version >/dev/null 2>&1") != 0)
        skip();
    struct server sv;
    server_start(&sv, 5000, 0);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "curl -sS --max-time 5 --expect100-timeout 4 --unix-socket '%s' "
             "-H 'Expect: 100-continue' --data-binary hello -w ' %%{http_code}' "
             "http://localhost/c?x=1",
             pl_broker_sock_path(sv.sock));
    uint64_t t0 = ms_now();
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char out[1024];
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    server_stop(&sv);
    assert_int_equal(st, 0);
    assert_string_equal(out, "POST /c?x=1 hello 200");
    assert_true(ms_now() - t0 < 3000); /* the 100 came: curl did not wait out its 4 s */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_valid),
        cmocka_unit_test(test_parse_every_split),
        cmocka_unit_test(test_parse_pipelined),
        cmocka_unit_test(test_parse_request_line_errors),
        cmocka_unit_test(test_parse_header_errors),
        cmocka_unit_test(test_parse_limits),
        cmocka_unit_test(test_parse_prefix_consistency),
        cmocka_unit_test(test_parse_info),
        cmocka_unit_test(test_format_response),
        cmocka_unit_test(test_sock_echo),
        cmocka_unit_test(test_sock_errors),
        cmocka_unit_test(test_sock_max_connections),
        cmocka_unit_test(test_sock_stop_while_connected),
        cmocka_unit_test(test_sock_start_errors),
        cmocka_unit_test(test_sock_start_failure_says_why),
        cmocka_unit_test(test_sock_python_client),
        cmocka_unit_test(test_sock_node_client),
        cmocka_unit_test(test_sock_curl_client),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
