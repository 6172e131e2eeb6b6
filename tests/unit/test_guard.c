/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_guard.c: the hosted providers' guard (src/providers/hosted/guard.c)
 * over real loopback sockets, as a stranger who reaches it would use it:
 * one address holding silent connections, a head with a wrong token that
 * announces a body it never sends, a connection that sends nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/providers/hosted/guard.h"

static struct ph_guard *start(unsigned head_ms, unsigned idle_ms) {
    struct ph_guard_opts o = {
        .host = "127.0.0.1", .head_timeout_ms = head_ms, .idle_timeout_ms = idle_ms};
    struct ph_guard *g = NULL;
    struct pl_error err = {0};
    if (ph_guard_start(&o, &g, &err) < 0)
        fail_msg("guard: %s", err.message);
    return g;
}

/* A connection to the guard from source address src (127.0.0.0/8). */
static int dial(struct ph_guard *g, const char *src) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in me = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &me.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)ph_guard_port(g))};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
    return fd;
}

/* The status of the answer on fd within 10 s; 0 when none came. */
static int status_of(int fd) {
    char buf[512];
    size_t len = 0;
    while (len < sizeof(buf) - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10000) <= 0)
            break;
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    int status = 0;
    return sscanf(buf, "HTTP/1.1 %d", &status) == 1 ? status : 0;
}

static void send_text(int fd, const char *s) {
    assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

#define WRONG_TOKEN "0000000000000000000000000000000000000000000000000000000000000000"

/* 64 silent connections from one address (the guard's whole cap): a
 * quarter are taken, the rest refused 503 at once, and another address's
 * request is still read and answered (401 here: its token is nobody's). */
static void test_one_address_cannot_fill_the_guard(void **state) {
    (void)state;
    struct ph_guard *g = start(5000, 5000);
    int held[64], refused = 0;
    for (int i = 0; i < 64; i++)
        held[i] = dial(g, "127.0.0.2");
    for (int i = 16; i < 64; i++)
        if (status_of(held[i]) == 503)
            refused++;
    assert_int_equal(refused, 48);
    int other = dial(g, "127.0.0.3");
    send_text(other,
              "GET /items/1 HTTP/1.1\r\nHost: guard\r\nx-plimsoll-guard: " WRONG_TOKEN "\r\n\r\n");
    assert_int_equal(status_of(other), 401);
    close(other);
    for (int i = 0; i < 64; i++)
        close(held[i]);
    ph_guard_stop(g);
}

/* A head whose token is nobody's is answered 401 from the head: the body
 * it announces is never waited for (it would be 408 at the deadline). */
static void test_the_token_is_checked_before_the_body(void **state) {
    (void)state;
    struct ph_guard *g = start(2000, 60000);
    int fd = dial(g, "127.0.0.4");
    send_text(fd, "POST /items HTTP/1.1\r\nHost: guard\r\nContent-Length: 1000\r\n"
                  "x-plimsoll-guard: " WRONG_TOKEN "\r\n\r\n");
    assert_int_equal(status_of(fd), 401);
    close(fd);
    fd = dial(g, "127.0.0.4"); /* no token at all: the same */
    send_text(fd, "POST /items HTTP/1.1\r\nHost: guard\r\nContent-Length: 1000\r\n\r\n");
    assert_int_equal(status_of(fd), 401);
    close(fd);
    assert_int_equal(ph_guard_refused(g), 2);
    ph_guard_stop(g);
}

/* A connection that sends nothing, or half a head, is answered 408 at the
 * head deadline, well before the whole request's. */
static void test_the_head_has_its_own_deadline(void **state) {
    (void)state;
    struct ph_guard *g = start(300, 60000);
    int quiet = dial(g, "127.0.0.5"), half = dial(g, "127.0.0.5");
    send_text(half, "GET /items/1 HTTP/1.1\r\nHost: gu");
    assert_int_equal(status_of(quiet), 408);
    assert_int_equal(status_of(half), 408);
    close(quiet);
    close(half);
    ph_guard_stop(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_address_cannot_fill_the_guard),
        cmocka_unit_test(test_the_token_is_checked_before_the_body),
        cmocka_unit_test(test_the_head_has_its_own_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
