/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_docker_pump.c: dk_pump reading an exec's stream, against a fake
 * engine on a Unix socket that says the exec ended.  The engine can say so
 * before the exec's last output has come through its stream (CI lost a
 * project step's whole output that way): once it has, the pump still reads
 * until the stream ends, for EXEC_DRAIN_MS at most, and a stream the
 * engine keeps open is let go at that bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../src/core/clock.h"
#include "../../src/core/errors.h"
#include "../../src/providers/docker/docker_int.h"

/* The fake engine: every request is answered "this exec no longer runs";
 * it counts the inspects of exec "e1". */
struct engine {
    char path[108];
    int lfd;
    pthread_t th;
    int inspects;
};

static void *serve(void *arg) {
    struct engine *f = arg;
    for (;;) {
        int c = accept(f->lfd, NULL, NULL);
        if (c < 0)
            return NULL;
        char req[4096];
        size_t len = 0;
        for (;;) {
            ssize_t n = read(c, req + len, sizeof(req) - 1 - len);
            if (n <= 0)
                break;
            len += (size_t)n;
            req[len] = '\0';
            char *end = strstr(req, "\r\n\r\n");
            if (!end)
                continue;
            if (strstr(req, "GET ") == req && strstr(req, "/exec/e1/json"))
                __atomic_add_fetch(&f->inspects, 1, __ATOMIC_SEQ_CST);
            static const char body[] = "{\"ID\":\"e1\",\"Running\":false,\"ExitCode\":0}";
            char out[256];
            int m = snprintf(out, sizeof(out),
                             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             "Content-Length: %zu\r\n\r\n%s",
                             sizeof(body) - 1, body);
            if (write(c, out, (size_t)m) != m)
                break;
            size_t used = (size_t)(end + 4 - req);
            memmove(req, req + used, len - used);
            len -= used;
            req[len] = '\0';
        }
        close(c);
    }
}

static void engine_start(struct engine *f) {
    memset(f, 0, sizeof(*f));
    snprintf(f->path, sizeof(f->path), "/tmp/pl-pump-%d.sock", (int)getpid());
    unlink(f->path);
    f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, f->path, strlen(f->path) + 1);
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    assert_int_equal(listen(f->lfd, 4), 0);
    assert_int_equal(pthread_create(&f->th, NULL, serve, f), 0);
}

static void engine_stop(struct engine *f) {
    shutdown(f->lfd, SHUT_RDWR);
    close(f->lfd);
    pthread_join(f->th, NULL);
    unlink(f->path);
}

/* The exec's side of its stream: after a quiet while (past the pump's 1 s
 * poll, so it has asked the engine and heard "ended"), one stdout frame,
 * then the end of the stream unless keep_open. */
struct guest {
    int fd;
    unsigned quiet_ms;
    bool keep_open;
};

static void *guest_main(void *arg) {
    struct guest *g = arg;
    usleep(g->quiet_ms * 1000u);
    static const char frame[] = "\1\0\0\0\0\0\0\14late output\n";
    assert_int_equal(write(g->fd, frame, sizeof(frame) - 1), (ssize_t)(sizeof(frame) - 1));
    if (!g->keep_open)
        close(g->fd);
    return NULL;
}

/* Pump exec e1's stream, with a deadline 20 s away. */
static int pump(struct engine *f, bool keep_open, struct cont_pump *p, struct cont_result *res) {
    char host[128];
    snprintf(host, sizeof(host), "unix://%s", f->path);
    struct docker_state s;
    memset(&s, 0, sizeof(s));
    struct pl_error err = {0};
    assert_int_equal(pl_docker_engine_new(host, &s.engine, &err), 0);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct cont_input in = {0};
    memset(p, 0, sizeof(*p));
    memset(res, 0, sizeof(*res));
    p->exec = true;
    p->dx.out.cap = p->dx.err.cap = 4096;
    snprintf(p->exec_id, sizeof(p->exec_id), "e1");
    struct guest g = {.fd = sv[1], .quiet_ms = 1300, .keep_open = keep_open};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, guest_main, &g), 0);
    int rc = dk_pump(&s, &in, p, res, sv[0], pl_now_ns() + 20ull * 1000000000ull, &err);
    pthread_join(th, NULL);
    close(sv[0]);
    if (keep_open)
        close(sv[1]);
    pl_docker_engine_free(s.engine);
    return rc;
}

static void test_output_after_the_engine_said_ended_is_kept(void **state) {
    (void)state;
    struct engine f;
    engine_start(&f);
    struct cont_pump p;
    struct cont_result res;
    assert_int_equal(pump(&f, false, &p, &res), 0);
    /* The engine was asked, said "ended", and the output that came after
     * that answer is the exec's output. */
    assert_true(__atomic_load_n(&f.inspects, __ATOMIC_SEQ_CST) >= 1);
    assert_int_equal(p.dx.out.kept.len, 12);
    assert_memory_equal(p.dx.out.kept.data, "late output\n", 12);
    assert_false(res.timed_out);
    pl_demux_free(&p.dx);
    engine_stop(&f);
}

static void test_a_stream_kept_open_is_let_go_at_the_bound(void **state) {
    (void)state;
    struct engine f;
    engine_start(&f);
    struct cont_pump p;
    struct cont_result res;
    assert_int_equal(pump(&f, true, &p, &res), 0);
    assert_int_equal(p.dx.out.kept.len, 12);
    /* Let go at the drain's bound (EXEC_DRAIN_MS), not at the deadline,
     * which would have set timed_out. */
    assert_false(res.timed_out);
    pl_demux_free(&p.dx);
    engine_stop(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_output_after_the_engine_said_ended_is_kept),
        cmocka_unit_test(test_a_stream_kept_open_is_let_go_at_the_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
