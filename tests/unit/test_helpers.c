/* SPDX-License-Identifier: Apache-2.0 */
/* test_helpers.c: the shared helper layer in src/core (the clock, descriptor
 * I/O, random ids, strict file reading, output capture, the error object). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/core/capture.h"
#include "../../src/core/clock.h"
#include "../../src/core/errors.h"
#include "../../src/core/fdio.h"
#include "../../src/core/fileread.h"
#include "../../src/core/ids.h"

static void test_clock(void **state) {
    (void)state;
    uint64_t a = pl_now_ns(), b = pl_now_ns();
    assert_true(b >= a);
    assert_int_equal(pl_poll_ms_until(0), -1);
    assert_int_equal(pl_poll_ms_until(1), 0);         /* long past */
    int ms = pl_poll_ms_until(pl_now_ns() + 1500000); /* 1.5 ms: rounded up */
    assert_true(ms == 2 || ms == 1);
    assert_true(pl_poll_ms_until(pl_deadline_in_ms(1000)) > 990);
    struct timespec ts = pl_timespec_of(3000000001ull);
    assert_int_equal(ts.tv_sec, 3);
    assert_int_equal(ts.tv_nsec, 1);
    uint64_t t0 = pl_now_ns();
    pl_sleep_ns(PL_MS(5));
    assert_true(pl_now_ns() - t0 >= PL_MS(5));
}

static void test_fdio_read_write(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(pl_fd_set_nonblock(sv[0]), 0);
    size_t w = 0;
    assert_int_equal(pl_fd_write_full(sv[1], "hello", 5, 0, -1, &w), 0);
    assert_int_equal(w, 5);
    char buf[8] = {0};
    assert_int_equal(pl_fd_read_full(sv[0], buf, 5, pl_deadline_in_ms(1000), -1), 0);
    assert_string_equal(buf, "hello");
    /* Nothing more comes: the deadline ends the read. */
    uint64_t t0 = pl_now_ns();
    assert_int_equal(pl_fd_read_full(sv[0], buf, 1, pl_deadline_in_ms(30), -1), -ETIMEDOUT);
    assert_true(pl_now_ns() - t0 >= PL_MS(30));
    /* A stop descriptor ends the wait. */
    int stop[2];
    assert_int_equal(pipe2(stop, O_CLOEXEC), 0);
    assert_int_equal(write(stop[1], "x", 1), 1);
    assert_int_equal(pl_fd_read_full(sv[0], buf, 1, pl_deadline_in_ms(5000), stop[0]), -ECANCELED);
    /* The peer closes: end of file before the bytes. */
    assert_int_equal(write(sv[1], "ab", 2), 2);
    close(sv[1]);
    assert_int_equal(pl_fd_read_full(sv[0], buf, 3, pl_deadline_in_ms(1000), -1), -EPIPE);
    /* Writing to a closed peer: EPIPE, never SIGPIPE. */
    w = 99;
    assert_int_equal(pl_fd_write_full(sv[0], "x", 1, 0, -1, &w), -EPIPE);
    assert_int_equal(w, 0);
    close(sv[0]);
    close(stop[0]);
    close(stop[1]);
    /* A pipe (not a socket) is written with write(2). */
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(pl_fd_write_full(p[1], "pipe", 4, 0, -1, NULL), 0);
    assert_int_equal(pl_fd_read_full(p[0], buf, 4, 0, -1), 0);
    assert_memory_equal(buf, "pipe", 4);
    close(p[0]);
    close(p[1]);
}

static void test_fdio_write_deadline(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(pl_fd_set_nonblock(sv[1]), 0);
    static char big[1 << 20];
    size_t w = 0;
    /* Nobody reads: the write fills the socket and stops at the deadline,
     * telling how much went. */
    assert_int_equal(pl_fd_write_full(sv[1], big, sizeof(big), pl_deadline_in_ms(50), -1, &w),
                     -ETIMEDOUT);
    assert_true(w > 0 && w < sizeof(big));
    close(sv[0]);
    close(sv[1]);
}

static void test_ids(void **state) {
    (void)state;
    char a[65], b[65];
    assert_int_equal(pl_random_hex(a, sizeof(a), 32), 0);
    assert_int_equal(pl_random_hex(b, sizeof(b), 32), 0);
    assert_int_equal(strlen(a), 64);
    assert_int_equal(strspn(a, "0123456789abcdef"), 64);
    assert_string_not_equal(a, b);
    assert_int_equal(pl_random_hex(a, 64, 32), -EINVAL); /* no room for the NUL */
    char h[7];
    pl_hex_encode("\x01\xab\xff", 3, h);
    assert_string_equal(h, "01abff");
}

static void test_fileread(void **state) {
    (void)state;
    char dir[] = "/tmp/plimsoll-fileread-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], fifo[128];
    snprintf(path, sizeof(path), "%s/f", dir);
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("secret", f);
    fclose(f);
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(pl_file_read(path, 6, &buf, &len), 0);
    assert_int_equal(len, 6);
    assert_string_equal(buf, "secret");
    pl_file_free(buf, len);
    assert_int_equal(pl_file_read(path, 5, &buf, &len), -EFBIG);
    assert_null(buf);
    assert_string_equal(pl_file_problem(-EFBIG), "is too large");
    /* A FIFO is refused at once (no writer: a plain open would hang). */
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(pl_file_read(fifo, 100, &buf, &len), -EINVAL);
    assert_string_equal(pl_file_problem(-EINVAL), "is not a regular file");
    assert_int_equal(pl_file_read(dir, 100, &buf, &len), -EINVAL);
    assert_int_equal(pl_file_read("/nonexistent/x", 100, &buf, &len), -ENOENT);
    unlink(fifo);
    unlink(path);
    rmdir(dir);
}

static void test_capture(void **state) {
    (void)state;
    struct pl_capture c;
    pl_capture_init(&c, 5);
    assert_int_equal(pl_capture_add(&c, "abc", 3), 0);
    assert_false(pl_capture_truncated(&c));
    assert_int_equal(pl_capture_add(&c, "defg", 4), 0);
    assert_true(pl_capture_truncated(&c));
    assert_int_equal(c.total, 7);
    struct pl_output o;
    assert_int_equal(pl_capture_finish(&c, &o), 0);
    assert_int_equal(o.len, 5);
    assert_memory_equal(o.data, "abcde", 5);
    assert_int_equal(o.data[5], '\0');
    assert_true(o.truncated);
    pl_output_clear(&o);
    assert_null(o.data);
    /* Nothing kept is an empty string, never NULL. */
    pl_capture_init(&c, 0);
    assert_int_equal(pl_capture_add(&c, "x", 1), 0);
    assert_int_equal(pl_capture_finish(&c, &o), 0);
    assert_string_equal(o.data, "");
    assert_true(o.truncated);
    pl_output_clear(&o);
    pl_capture_free(&c);
    /* A stream at a large cap holds the cap (and a NUL), not the next
     * power of two past it. */
    static char chunk[1000];
    pl_capture_init(&c, 300000);
    for (int i = 0; i < 400; i++)
        assert_int_equal(pl_capture_add(&c, chunk, sizeof(chunk)), 0);
    assert_int_equal(c.kept.len, 300000);
    assert_int_equal(c.kept.cap, 300001);
    assert_int_equal(c.total, 400000);
    pl_capture_free(&c);
}

static void test_error_object(void **state) {
    (void)state;
    struct pl_error e = {0};
    assert_int_equal(pl_error_errno(&e, PL_REASON_INTERNAL, -ENOENT, "open %s", "x"), -1);
    assert_int_equal(e.errnum, ENOENT);
    assert_string_equal(e.message, "open x: No such file or directory");
    assert_int_equal(pl_error_wrap(&e, "grant profile \"%s\": ", "items"), -1);
    assert_string_equal(e.message, "grant profile \"items\": open x: No such file or directory");
    assert_int_equal(e.reason, PL_REASON_INTERNAL);
    assert_int_equal(e.errnum, ENOENT);
    assert_int_equal(pl_error_set(&e, PL_REASON_INVALID_REQUEST, "bad"), -1);
    assert_int_equal(e.errnum, 0);
    /* A long message is cut, the context kept first. */
    char longmsg[600];
    memset(longmsg, 'm', sizeof(longmsg) - 1);
    longmsg[sizeof(longmsg) - 1] = '\0';
    pl_error_set(&e, PL_REASON_INTERNAL, "%s", longmsg);
    pl_error_wrap(&e, "ctx: ");
    assert_int_equal(strlen(e.message), sizeof(e.message) - 1);
    assert_memory_equal(e.message, "ctx: mmm", 8);
    assert_int_equal(pl_error_wrap(NULL, "x"), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clock),
        cmocka_unit_test(test_fdio_read_write),
        cmocka_unit_test(test_fdio_write_deadline),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_fileread),
        cmocka_unit_test(test_capture),
        cmocka_unit_test(test_error_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
