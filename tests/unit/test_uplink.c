/* SPDX-License-Identifier: Apache-2.0 */
/* test_uplink.c: the daemon's side of a session's cell uplink
 * (src/providers/docker/uplink.c, dk_uplink_cell) against an interpreter
 * played by the test over a socketpair: the framing both ways, the output
 * caps, and what a hostile or broken interpreter gets (the interpreter runs
 * the guest's code: every byte it sends is the guest's). */
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
#include <unistd.h>

#include "../../src/providers/docker/docker_int.h"

static void frame(struct pl_buf *b, char type, const void *data, uint32_t n) {
    unsigned char h[5] = {(unsigned char)type, (unsigned char)(n >> 24), (unsigned char)(n >> 16),
                          (unsigned char)(n >> 8), (unsigned char)n};
    pl_buf_append(b, h, 5);
    if (n)
        pl_buf_append(b, data, n);
}

/* The interpreter's side: read the cell's frame, then answer with script. */
struct peer {
    int fd;
    struct pl_buf script; /* what to send once the cell arrived */
    bool close_after;     /* close the connection after the script */
    bool hang;            /* send nothing, keep the connection */
    char got_type;
    char got_code[256];
    uint32_t got_len;
};

static void read_n(int fd, void *buf, size_t n) {
    unsigned char *p = buf;
    while (n) {
        ssize_t k = read(fd, p, n);
        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
    }
}

static void *peer_main(void *arg) {
    struct peer *p = arg;
    unsigned char h[5];
    read_n(p->fd, h, 5);
    p->got_type = (char)h[0];
    p->got_len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
    if (p->got_len < sizeof(p->got_code))
        read_n(p->fd, p->got_code, p->got_len);
    if (p->hang)
        return NULL;
    (void)pl_fd_write_full(p->fd, p->script.data, p->script.len, 0, -1,
                           NULL); /* the daemon may stop reading */
    if (p->close_after)
        shutdown(p->fd, SHUT_RDWR);
    return NULL;
}

struct call {
    enum uplink_end end;
    int status;
    struct pl_demux dx;
    struct pl_displays disp;
    struct dsession d;
};

/* The display bounds of the next run_cell. */
static struct pl_display_bounds bounds_now = {.outputs = 32, .output_bytes = 4096, .bytes = 8192};

/* One cell with the peer playing script; out/err caps cap. */
static void run_cell(struct peer *p, const char *code, size_t cap, unsigned timeout_ms,
                     struct call *c) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(pl_fd_set_nonblock(sv[0]), 0);
    memset(c, 0, sizeof(*c));
    c->d.in[LANG_PY].fd = sv[0];
    c->d.in[LANG_JS].fd = -1;
    c->d.lfd = -1;
    pl_capture_init(&c->dx.out, cap);
    pl_capture_init(&c->dx.err, cap);
    pl_displays_init(&c->disp, bounds_now, NULL);
    p->fd = sv[1];
    pthread_t t;
    pthread_create(&t, NULL, peer_main, p);
    c->status = -1;
    c->end = dk_uplink_cell(&c->d, LANG_PY, code, strlen(code), pl_deadline_in_ms(timeout_ms),
                            &c->dx, &c->disp, &c->status);
    if (p->hang)
        shutdown(sv[1], SHUT_RDWR); /* let the peer go */
    pthread_join(t, NULL);
    close(sv[1]);
    dk_uplink_drop(&c->d, LANG_PY);
    pl_buf_free(&p->script);
}

static void call_free(struct call *c) {
    pl_demux_free(&c->dx);
    pl_displays_free(&c->disp);
}

static void test_a_cell_and_its_output(void **state) {
    (void)state;
    struct peer p = {0};
    frame(&p.script, 'O', "hello ", 6);
    frame(&p.script, 'E', "warn\n", 5);
    frame(&p.script, 'O', "world\n", 6);
    frame(&p.script, 'X', "0", 1);
    struct call c;
    run_cell(&p, "print('hello world')", 1024, 5000, &c);
    assert_int_equal(c.end, UPLINK_RAN);
    assert_int_equal(c.status, 0);
    assert_int_equal(p.got_type, 'C');
    assert_int_equal(p.got_len, 20);
    assert_memory_equal(p.got_code, "print('hello world')", 20);
    assert_int_equal(c.dx.out.kept.len, 12);
    assert_memory_equal(c.dx.out.kept.data, "hello world\n", 12);
    assert_int_equal(c.dx.err.kept.len, 5);
    call_free(&c);

    p = (struct peer){0};
    frame(&p.script, 'X', "1", 1);
    run_cell(&p, "raise", 1024, 5000, &c);
    assert_int_equal(c.end, UPLINK_RAN);
    assert_int_equal(c.status, 1); /* raised */
    call_free(&c);
    /* an empty cell is one frame of length 0 */
    p = (struct peer){0};
    frame(&p.script, 'X', "0", 1);
    run_cell(&p, "", 1024, 5000, &c);
    assert_int_equal(c.end, UPLINK_RAN);
    assert_int_equal(p.got_len, 0);
    call_free(&c);
}

static void test_output_beyond_the_cap_is_counted_not_kept(void **state) {
    (void)state;
    struct peer p = {0};
    char big[10000];
    memset(big, 'y', sizeof(big));
    frame(&p.script, 'O', big, sizeof(big));
    frame(&p.script, 'O', big, 10);
    frame(&p.script, 'X', "0", 1);
    struct call c;
    run_cell(&p, "x", 100, 5000, &c);
    assert_int_equal(c.end, UPLINK_RAN);
    assert_int_equal(c.dx.out.kept.len, 100);
    assert_int_equal(c.dx.out.total, 10010);
    assert_true(pl_capture_truncated(&c.dx.out));
    call_free(&c);
}

static void test_hostile_frames_lose_the_channel(void **state) {
    (void)state;
    static const struct {
        const char *what;
        char type;
        uint32_t len;
    } cases[] = {
        {"an unknown type", 'Q', 1},
        {"a code frame back", 'C', 1},
        {"a frame over the largest", 'O', UPLINK_MAX_FRAME + 1},
        {"a status longer than 8 bytes", 'X', 9},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct peer p = {0};
        unsigned char h[5] = {(unsigned char)cases[i].type, (unsigned char)(cases[i].len >> 24),
                              (unsigned char)(cases[i].len >> 16),
                              (unsigned char)(cases[i].len >> 8), (unsigned char)cases[i].len};
        pl_buf_append(&p.script, h, 5);
        pl_buf_append(&p.script, "123456789", 9);
        p.close_after = true;
        struct call c;
        run_cell(&p, "x", 1024, 5000, &c);
        if (c.end != UPLINK_ENDED)
            fail_msg("%s: got %d, not UPLINK_ENDED", cases[i].what, c.end);
        assert_int_equal(c.status, -1); /* no status was made up */
        call_free(&c);
    }
}

static void test_an_interpreter_that_dies_mid_cell(void **state) {
    (void)state;
    struct peer p = {0};
    frame(&p.script, 'O', "partial", 7);
    p.close_after = true; /* no X: the interpreter died */
    struct call c;
    run_cell(&p, "os._exit(0)", 1024, 5000, &c);
    assert_int_equal(c.end, UPLINK_ENDED);
    assert_int_equal(c.dx.out.kept.len, 7); /* what it wrote is kept */
    call_free(&c);
    /* a torn frame: a header promising more than comes */
    p = (struct peer){0};
    unsigned char h[5] = {'O', 0, 0, 0, 100};
    pl_buf_append(&p.script, h, 5);
    pl_buf_append(&p.script, "short", 5);
    p.close_after = true;
    run_cell(&p, "x", 1024, 5000, &c);
    assert_int_equal(c.end, UPLINK_ENDED);
    call_free(&c);
}

static void test_a_silent_interpreter_times_out(void **state) {
    (void)state;
    struct peer p = {.hang = true};
    struct call c;
    run_cell(&p, "while True: pass", 1024, 300, &c);
    assert_int_equal(c.end, UPLINK_TIMED_OUT);
    call_free(&c);
}

static void test_a_closed_uplink_is_unusable_before_anything_is_sent(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(pl_fd_set_nonblock(sv[0]), 0);
    close(sv[1]); /* the interpreter is gone */
    struct dsession d = {0};
    d.in[LANG_PY].fd = sv[0];
    d.in[LANG_JS].fd = -1;
    d.lfd = -1;
    struct pl_demux dx = {0};
    int status = -1;
    assert_int_equal(
        dk_uplink_cell(&d, LANG_PY, "x", 1, pl_deadline_in_ms(1000), &dx, NULL, &status),
        UPLINK_UNUSABLE);                   /* the caller then runs the cell another way */
    assert_int_equal(d.in[LANG_PY].fd, -1); /* and the uplink is dropped */
    pl_demux_free(&dx);
}

static void test_output_between_cells_is_not_the_next_cells(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(pl_fd_set_nonblock(sv[0]), 0);
    /* something the interpreter wrote after the last cell ended */
    struct pl_buf stale = {0};
    frame(&stale, 'O', "late output\n", 12);
    assert_int_equal(write(sv[1], stale.data, stale.len), (ssize_t)stale.len);
    pl_buf_free(&stale);
    struct peer p = {0};
    frame(&p.script, 'O', "mine\n", 5);
    frame(&p.script, 'X', "0", 1);
    p.fd = sv[1];
    pthread_t t;
    pthread_create(&t, NULL, peer_main, &p);
    struct dsession d = {0};
    d.in[LANG_PY].fd = sv[0];
    d.in[LANG_JS].fd = -1;
    d.lfd = -1;
    struct pl_demux dx = {0};
    pl_capture_init(&dx.out, 1024);
    pl_capture_init(&dx.err, 1024);
    int status = -1;
    assert_int_equal(
        dk_uplink_cell(&d, LANG_PY, "x", 1, pl_deadline_in_ms(5000), &dx, NULL, &status),
        UPLINK_RAN);
    pthread_join(t, NULL);
    assert_int_equal(dx.out.kept.len, 5);
    assert_memory_equal(dx.out.kept.data, "mine\n", 5);
    pl_buf_free(&p.script);
    pl_demux_free(&dx);
    dk_uplink_drop(&d, LANG_PY);
    close(sv[1]);
}

static void dframe(struct pl_buf *b, const char *json) {
    frame(b, 'D', json, (uint32_t)strlen(json));
}

/* Display frames: the well-formed ones kept in order, every other one
 * dropped and counted, the channel kept. */
static void test_display_frames_are_checked_and_bounded(void **state) {
    (void)state;
    struct peer p = {0};
    frame(&p.script, 'O', "a", 1);
    dframe(&p.script, "{\"kind\":\"display\",\"data\":{\"text/plain\":\"x\","
                      "\"image/png\":\"iVBORw0KGgo=\"}}");
    dframe(&p.script, "{\"kind\":\"display\",\"data\":"); /* cut */
    dframe(&p.script, "{\"kind\":\"display\",\"data\":{\"image/png\":\"abc\"}}");
    dframe(&p.script, "{\"kind\":\"display\",\"data\":{\"image/png\":\"iVBO RK==\"}}");
    dframe(&p.script, "{\"kind\":\"display\",\"data\":{\"Text/Plain\":\"x\"}}");
    dframe(&p.script, "{\"kind\":\"display\",\"data\":{\"text\":\"x\"}}");
    dframe(&p.script, "{\"kind\":\"shown\",\"data\":{\"text/plain\":\"x\"}}");
    dframe(&p.script, "{\"kind\":\"display\",\"data\":{}}");
    dframe(&p.script, "{\"kind\":\"display\",\"data\":{\"text/plain\":1}}");
    dframe(&p.script, "{\"kind\":\"display\",\"data\":{\"text/plain\":\"a\\u0000b\"}}");
    dframe(&p.script, "{\"kind\":\"display\",\"data\":{\"text/plain\":\"x\"},\"more\":1}");
    dframe(&p.script, "{\"kind\":\"display\",\"kind\":\"result\",\"data\":{\"text/plain\":\"x\"}}");
    dframe(&p.script, "{\"kind\":\"display\",\"data\":{\"text/plain\":\"x\"}} [");
    char big[5000];
    memset(big, ' ', sizeof(big));
    frame(&p.script, 'D', big, sizeof(big)); /* over output_bytes: read, dropped */
    dframe(&p.script, "{\"kind\":\"result\",\"data\":{\"text/html\":\"<b>\\u00e9</b>\","
                      "\"application/vnd.x+json\":\"{}\",\"application/octet-stream\":\"\"}}");
    frame(&p.script, 'O', "b", 1);
    frame(&p.script, 'X', "0", 1);
    struct call c;
    run_cell(&p, "x", 1024, 5000, &c);
    assert_int_equal(c.end, UPLINK_RAN);
    assert_int_equal(c.status, 0);
    assert_int_equal(c.dx.out.kept.len, 2);
    json_t *outs = NULL;
    unsigned dropped = 0;
    pl_displays_finish(&c.disp, &outs, &dropped);
    assert_int_equal(json_array_size(outs), 2);
    assert_int_equal(dropped, 13);
    assert_string_equal(json_string_value(json_object_get(json_array_get(outs, 0), "kind")),
                        "display");
    json_t *d1 = json_object_get(json_array_get(outs, 1), "data");
    assert_string_equal(json_string_value(json_object_get(d1, "text/html")), "<b>\xc3\xa9</b>");
    json_decref(outs);
    call_free(&c);
}

/* The count and the byte budget: past either, a well-formed output is
 * dropped too; a bundle the budget gave back (malformed) frees its bytes. */
static void test_display_budgets(void **state) {
    (void)state;
    const char *ok = "{\"kind\":\"display\",\"data\":{\"text/plain\":\"0123456789\"}}";
    size_t n = strlen(ok);
    struct peer p = {0};
    for (int i = 0; i < 3; i++)
        dframe(&p.script, ok);
    frame(&p.script, 'X', "0", 1);
    bounds_now = (struct pl_display_bounds){.outputs = 2, .output_bytes = 4096, .bytes = 8192};
    struct call c;
    run_cell(&p, "x", 1024, 5000, &c);
    assert_int_equal(c.end, UPLINK_RAN);
    assert_int_equal(json_array_size(c.disp.list), 2);
    assert_int_equal(c.disp.dropped, 1);
    call_free(&c);

    struct peer q = {0};
    dframe(&q.script, ok);
    dframe(&q.script, "{\"kind\":\"display\",\"data\":{\"text/plain\":\"01234567\"");
    dframe(&q.script, ok);
    dframe(&q.script, ok);
    frame(&q.script, 'X', "0", 1);
    bounds_now = (struct pl_display_bounds){
        .outputs = 32, .output_bytes = 4096, .bytes = (unsigned)(2 * n + n / 2)};
    run_cell(&q, "x", 1024, 5000, &c);
    assert_int_equal(c.end, UPLINK_RAN);
    assert_int_equal(json_array_size(c.disp.list), 2);
    assert_int_equal(c.disp.dropped, 2);
    assert_int_equal(c.disp.used, 2 * n);
    call_free(&c);
    bounds_now = (struct pl_display_bounds){.outputs = 32, .output_bytes = 4096, .bytes = 8192};
}

/* A display frame the interpreter does not finish loses the channel, as
 * any cut frame, and keeps nothing of it. */
static void test_a_cut_display_frame(void **state) {
    (void)state;
    struct peer p = {.close_after = true};
    unsigned char h[5] = {'D', 0, 0, 1, 0};
    pl_buf_append(&p.script, h, 5);
    pl_buf_append(&p.script, "{\"kind\"", 7);
    struct call c;
    run_cell(&p, "x", 1024, 5000, &c);
    assert_int_equal(c.end, UPLINK_ENDED);
    assert_null(c.disp.list);
    assert_int_equal(c.disp.dropped, 1);
    assert_int_equal(c.disp.used, 0);
    call_free(&c);
}

static void test_mime_text_or_base64(void **state) {
    (void)state;
    assert_true(pl_display_mime_is_text("text/plain"));
    assert_true(pl_display_mime_is_text("text/html"));
    assert_true(pl_display_mime_is_text("application/json"));
    assert_true(pl_display_mime_is_text("application/vnd.plotly.v1+json"));
    assert_true(pl_display_mime_is_text("image/svg+xml"));
    assert_false(pl_display_mime_is_text("image/png"));
    assert_false(pl_display_mime_is_text("application/pdf"));
    assert_false(pl_display_mime_is_text("application/jsonx"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_cell_and_its_output),
        cmocka_unit_test(test_output_beyond_the_cap_is_counted_not_kept),
        cmocka_unit_test(test_hostile_frames_lose_the_channel),
        cmocka_unit_test(test_an_interpreter_that_dies_mid_cell),
        cmocka_unit_test(test_a_silent_interpreter_times_out),
        cmocka_unit_test(test_a_closed_uplink_is_unusable_before_anything_is_sent),
        cmocka_unit_test(test_output_between_cells_is_not_the_next_cells),
        cmocka_unit_test(test_display_frames_are_checked_and_bounded),
        cmocka_unit_test(test_display_budgets),
        cmocka_unit_test(test_a_cut_display_frame),
        cmocka_unit_test(test_mime_text_or_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
