/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_demux_end.c: the run's end marker in the engine's output stream
 * (pl_demux_expect_end): taken out of the output only when whole, on both
 * streams, with nothing after it and one status; bytes that only begin it
 * are held back until they cannot, then kept as output; the wrong nonce is
 * output like any other bytes.  A project's steps read one stream with a
 * demultiplexer each (pl_demux_carry): the frame being read goes on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../src/providers/docker/engine.h"

static const char MARK[] = "\x1eplimsoll-end 0123456789abcdef ";

/* Feed bytes as one frame of stream 1 (stdout) or 2, in pieces of step. */
static void feed(struct pl_demux *d, int stream, const char *s, size_t len, size_t step) {
    for (size_t off = 0; off < len; off += step) {
        size_t c = len - off < step ? len - off : step;
        unsigned char h[8] = {(unsigned char)stream, 0, 0, 0, 0, 0, 0, (unsigned char)c};
        assert_int_equal(pl_demux_feed(d, h, 8), 0);
        assert_int_equal(pl_demux_feed(d, (const unsigned char *)s + off, c), 0);
    }
}

static void feeds(struct pl_demux *d, int stream, const char *s, size_t step) {
    feed(d, stream, s, strlen(s), step);
}

static void start(struct pl_demux *d) {
    memset(d, 0, sizeof(*d));
    d->out.cap = d->err.cap = 1 << 16;
    pl_demux_expect_end(d, MARK, strlen(MARK));
}

static void assert_out(const struct pl_demux *d, const char *want) {
    assert_int_equal(d->out.kept.len, strlen(want));
    assert_memory_equal(d->out.kept.data, want, strlen(want));
    assert_int_equal(d->out.total, strlen(want));
}

static void test_the_marker_ends_both_streams_in_any_pieces(void **state) {
    (void)state;
    static const size_t steps[] = {1, 2, 3, 7, 100};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        struct pl_demux d;
        start(&d);
        feeds(&d, 1, "hello\n", steps[i]);
        int status = -1;
        assert_false(pl_demux_ended(&d, &status));
        feeds(&d, 1, "\x1eplimsoll-end 0123456789abcdef 003\n", steps[i]);
        assert_false(pl_demux_ended(&d, &status)); /* stderr's is still to come */
        feeds(&d, 2, "oops\n\x1eplimsoll-end 0123456789abcdef 003\n", steps[i]);
        assert_true(pl_demux_ended(&d, &status));
        assert_int_equal(status, 3);
        assert_out(&d, "hello\n");
        assert_int_equal(d.err.kept.len, 5);
        pl_demux_free(&d);
    }
}

static void test_a_guess_or_a_beginning_is_output(void **state) {
    (void)state;
    struct pl_demux d;
    start(&d);
    /* The guest writes the marker's prefix with another nonce, then what
     * could be the start of the real one, then the real one. */
    const char *guest = "a\x1eplimsoll-end ffffffffffffffff 000\nb\x1eplimsoll-end 0123";
    feeds(&d, 1, guest, 1);
    feeds(&d, 1, "\x1eplimsoll-end 0123456789abcdef 000\n", 5);
    feeds(&d, 2, "\x1eplimsoll-end 0123456789abcdef 000\n", 64);
    int status = -1;
    assert_true(pl_demux_ended(&d, &status));
    assert_int_equal(status, 0);
    assert_out(&d, guest);
    pl_demux_free(&d);
}

static void test_held_bytes_are_output_when_the_stream_ends(void **state) {
    (void)state;
    struct pl_demux d;
    start(&d);
    feeds(&d, 1, "x\x1eplimsoll-end 0123456789abcdef 12", 4);
    assert_out(&d, "x"); /* the rest could still be the marker */
    assert_int_equal(pl_demux_flush(&d), 0);
    assert_out(&d, "x\x1eplimsoll-end 0123456789abcdef 12");
    int status = -1;
    assert_false(pl_demux_ended(&d, &status));
    pl_demux_free(&d);
}

static void test_what_is_not_an_end(void **state) {
    (void)state;
    int status = -1;
    struct pl_demux d;
    /* bytes after the marker: kept, and no end */
    start(&d);
    feeds(&d, 1, "\x1eplimsoll-end 0123456789abcdef 000\nmore", 3);
    feeds(&d, 2, "\x1eplimsoll-end 0123456789abcdef 000\n", 3);
    assert_false(pl_demux_ended(&d, &status));
    assert_out(&d, "more");
    pl_demux_free(&d);
    /* two statuses */
    start(&d);
    feeds(&d, 1, "\x1eplimsoll-end 0123456789abcdef 000\n", 3);
    feeds(&d, 2, "\x1eplimsoll-end 0123456789abcdef 001\n", 3);
    assert_false(pl_demux_ended(&d, &status));
    pl_demux_free(&d);
    /* a status that is not three digits and a newline, or past 255 */
    static const char *bad[] = {"\x1eplimsoll-end 0123456789abcdef 0a0\n",
                                "\x1eplimsoll-end 0123456789abcdef 000 ",
                                "\x1eplimsoll-end 0123456789abcdef 256\n"};
    for (size_t i = 0; i < 3; i++) {
        start(&d);
        feeds(&d, 1, bad[i], 2);
        feeds(&d, 2, "\x1eplimsoll-end 0123456789abcdef 000\n", 3);
        assert_true(d.m[0].bad);
        assert_false(pl_demux_ended(&d, &status));
        pl_demux_free(&d);
    }
    /* no marker looked for: the same bytes are plain output */
    memset(&d, 0, sizeof(d));
    d.out.cap = 1 << 16;
    feeds(&d, 1, "\x1eplimsoll-end 0123456789abcdef 000\n", 3);
    assert_false(pl_demux_ended(&d, &status));
    assert_out(&d, "\x1eplimsoll-end 0123456789abcdef 000\n");
    pl_demux_free(&d);
}

static void test_the_cap_counts_the_guest_only(void **state) {
    (void)state;
    struct pl_demux d;
    start(&d);
    d.out.cap = 4;
    feeds(&d, 1, "abcd\x1eplimsoll-end 0123456789abcdef 000\n", 7);
    feeds(&d, 2, "\x1eplimsoll-end 0123456789abcdef 000\n", 7);
    int status = -1;
    assert_true(pl_demux_ended(&d, &status));
    assert_out(&d, "abcd"); /* exactly the cap: nothing counted past it */
    pl_demux_free(&d);
}

/* Step 1's pump stops with part of the next frame's header read; step 2's
 * demultiplexer takes over there, with its own captures and nonce. */
static void test_the_next_step_takes_over_the_frame(void **state) {
    (void)state;
    struct pl_demux one;
    start(&one);
    feeds(&one, 1, "out1\x1eplimsoll-end 0123456789abcdef 007\n", 64);
    feeds(&one, 2, "\x1eplimsoll-end 0123456789abcdef 007\n", 64);
    static const char rest[] = "out2\x1eplimsoll-end fedcba9876543210 000\n";
    unsigned char h[8] = {1, 0, 0, 0, 0, 0, 0, (unsigned char)strlen(rest)};
    assert_int_equal(pl_demux_feed(&one, h, 3), 0);
    int status = -1;
    assert_true(pl_demux_ended(&one, &status));
    assert_int_equal(status, 7);
    assert_out(&one, "out1");

    struct pl_demux two;
    memset(&two, 0, sizeof(two));
    two.out.cap = two.err.cap = 1 << 16;
    pl_demux_carry(&two, &one);
    static const char mark2[] = "\x1eplimsoll-end fedcba9876543210 ";
    pl_demux_expect_end(&two, mark2, strlen(mark2));
    assert_int_equal(pl_demux_feed(&two, h + 3, 5), 0);
    assert_int_equal(pl_demux_feed(&two, (const unsigned char *)rest, strlen(rest)), 0);
    feeds(&two, 2, "\x1eplimsoll-end fedcba9876543210 000\n", 3);
    assert_true(pl_demux_ended(&two, &status));
    assert_int_equal(status, 0);
    assert_out(&two, "out2");
    pl_demux_free(&one);
    pl_demux_free(&two);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_marker_ends_both_streams_in_any_pieces),
        cmocka_unit_test(test_a_guess_or_a_beginning_is_output),
        cmocka_unit_test(test_held_bytes_are_output_when_the_stream_ends),
        cmocka_unit_test(test_what_is_not_an_end),
        cmocka_unit_test(test_the_cap_counts_the_guest_only),
        cmocka_unit_test(test_the_next_step_takes_over_the_frame),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
