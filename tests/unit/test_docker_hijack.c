/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_docker_hijack.c: pl_docker_hijack (attach, exec start) against a
 * fake engine on a Unix socket.  The answer's head is taken and not one
 * byte of the stream after it, however the engine splits its writes (the
 * head is read by peeking, then taking exactly up to its blank line); a
 * refusal, a head that never ends and a connection closed mid-head are
 * errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../src/core/errors.h"
#include "../../src/providers/docker/engine.h"

struct part {
    const char *p;
    size_t len;
};

struct fake {
    char path[108];
    int lfd;
    const struct part *parts;
    size_t nparts;
    unsigned gap_us; /* between parts: each one its own segment */
    int hang_up;     /* close right after the parts */
    char req[8192];
    size_t req_len;
};

/* One connection: read the request (head and Content-Length body), write
 * the parts, then wait for the client to close. */
static void *serve(void *arg) {
    struct fake *f = arg;
    int c = accept(f->lfd, NULL, NULL);
    if (c < 0)
        return NULL;
    for (;;) {
        ssize_t r = read(c, f->req + f->req_len, sizeof(f->req) - 1 - f->req_len);
        if (r <= 0)
            break;
        f->req_len += (size_t)r;
        f->req[f->req_len] = '\0';
        const char *end = strstr(f->req, "\r\n\r\n"), *cl = strstr(f->req, "Content-Length: ");
        if (end && cl && f->req_len >= (size_t)(end + 4 - f->req) + strtoul(cl + 16, NULL, 10))
            break;
    }
    for (size_t i = 0; i < f->nparts; i++) {
        if (write(c, f->parts[i].p, f->parts[i].len) != (ssize_t)f->parts[i].len)
            break;
        usleep(f->gap_us);
    }
    char b;
    while (!f->hang_up && read(c, &b, 1) > 0) {
    }
    close(c);
    return NULL;
}

static int start(struct fake *f, const struct part *parts, size_t nparts, unsigned gap_us,
                 int hang_up, pthread_t *th) {
    memset(f, 0, sizeof(*f));
    f->hang_up = hang_up;
    snprintf(f->path, sizeof(f->path), "/tmp/pl-hijack-%d.sock", (int)getpid());
    unlink(f->path);
    f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, f->path, strlen(f->path) + 1);
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    assert_int_equal(listen(f->lfd, 1), 0);
    f->parts = parts;
    f->nparts = nparts;
    f->gap_us = gap_us;
    return pthread_create(th, NULL, serve, f);
}

static void stop(struct fake *f, pthread_t th) {
    pthread_join(th, NULL);
    close(f->lfd);
    unlink(f->path);
}

/* Hijack through the fake; 0 with what the stream gave (want_len bytes
 * or until it ends) in got, or the hijack's error. */
static int hijack(struct fake *f, char *got, size_t want_len, size_t *got_len) {
    char host[128];
    struct pl_docker_engine *e = NULL;
    struct pl_error err = {0};
    snprintf(host, sizeof(host), "unix://%s", f->path);
    assert_int_equal(pl_docker_engine_new(host, &e, &err), 0);
    int fd = -1;
    int r = pl_docker_hijack(e, "/exec/x/start", "{\"Detach\":false}", &fd, &err);
    *got_len = 0;
    if (r == 0) {
        while (*got_len < want_len) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, 5000) <= 0)
                break;
            ssize_t n = read(fd, got + *got_len, want_len - *got_len);
            if (n <= 0)
                break;
            *got_len += (size_t)n;
        }
        close(fd);
    }
    pl_docker_engine_free(e);
    return r;
}

#define HEAD                                                                                       \
    "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"                 \
    "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
/* Two frames of the multiplexed stream, NULs and a "\r\n\r\n" of its own. */
static const char k_stream[] = "\1\0\0\0\0\0\0\4one\n"
                               "\2\0\0\0\0\0\0\6\r\n\r\nx\n";
#define STREAM_LEN (sizeof(k_stream) - 1)

static void expect_stream(const struct part *parts, size_t n, unsigned gap_us) {
    struct fake f;
    pthread_t th;
    char got[256];
    size_t got_len;
    assert_int_equal(start(&f, parts, n, gap_us, 0, &th), 0);
    assert_int_equal(hijack(&f, got, STREAM_LEN, &got_len), 0);
    stop(&f, th);
    assert_int_equal(got_len, STREAM_LEN);
    assert_memory_equal(got, k_stream, STREAM_LEN);
    assert_non_null(strstr(f.req, "POST /v1.41/exec/x/start HTTP/1.1\r\n"));
    assert_non_null(strstr(f.req, "Upgrade: tcp\r\n"));
}

static void test_head_and_stream_in_one_write(void **state) {
    (void)state;
    static char all[sizeof(HEAD) + STREAM_LEN];
    memcpy(all, HEAD, sizeof(HEAD) - 1);
    memcpy(all + sizeof(HEAD) - 1, k_stream, STREAM_LEN);
    const struct part p[] = {{all, sizeof(HEAD) - 1 + STREAM_LEN}};
    expect_stream(p, 1, 0);
}

static void test_head_a_byte_at_a_time(void **state) {
    (void)state;
    static struct part p[sizeof(HEAD)];
    static const char head[] = HEAD;
    size_t n = 0;
    for (size_t i = 0; i < sizeof(head) - 1; i++)
        p[n++] = (struct part){head + i, 1};
    p[n++] = (struct part){k_stream, STREAM_LEN};
    expect_stream(p, n, 2000);
}

static void test_blank_line_split_across_writes(void **state) {
    (void)state;
    static const char head[] = HEAD;
    size_t hl = sizeof(head) - 1;
    for (size_t cut = 1; cut <= 3; cut++) {
        /* "...\r\n\r" | "\n" + stream, "...\r\n" | "\r\n" + stream, ... */
        static char tail[8 + STREAM_LEN];
        memcpy(tail, head + hl - cut, cut);
        memcpy(tail + cut, k_stream, STREAM_LEN);
        const struct part p[] = {{head, hl - cut}, {tail, cut + STREAM_LEN}};
        expect_stream(p, 2, 20000);
    }
}

static void test_stream_trickles_after_the_head(void **state) {
    (void)state;
    const struct part p[] = {{HEAD, sizeof(HEAD) - 1},
                             {k_stream, 3},
                             {k_stream + 3, 9},
                             {k_stream + 12, STREAM_LEN - 12}};
    expect_stream(p, 4, 20000);
}

static void expect_refused(const struct part *parts, size_t n, int hang_up) {
    struct fake f;
    pthread_t th;
    char got[16];
    size_t got_len;
    assert_int_equal(start(&f, parts, n, 0, hang_up, &th), 0);
    assert_int_not_equal(hijack(&f, got, sizeof(got), &got_len), 0);
    stop(&f, th);
}

static void test_refusals(void **state) {
    (void)state;
    static const char not_found[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}";
    const struct part a[] = {{not_found, sizeof(not_found) - 1}};
    expect_refused(a, 1, 0);
    /* A head that never ends within the bound. */
    static char endless[9000];
    memcpy(endless, "HTTP/1.1 101 UPGRADED\r\n", 23);
    memset(endless + 23, 'x', sizeof(endless) - 23);
    const struct part b[] = {{endless, sizeof(endless)}};
    expect_refused(b, 1, 0);
    /* The connection closed in the middle of the head. */
    static const char half[] = "HTTP/1.1 101 UPGRADED\r\nConnection: Upg";
    const struct part c[] = {{half, sizeof(half) - 1}};
    expect_refused(c, 1, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_and_stream_in_one_write),
        cmocka_unit_test(test_head_a_byte_at_a_time),
        cmocka_unit_test(test_blank_line_split_across_writes),
        cmocka_unit_test(test_stream_trickles_after_the_head),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests_name("docker_hijack", tests, NULL, NULL);
}
