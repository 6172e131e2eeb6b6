/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker pool (js_pool.h) at its boundary with the worker: the broker
 * a run's guest reaches through plimsoll.request, on the real worker; the
 * protocol against a scripted worker that lies (this binary, run as
 * --fake-worker MODE); frames on the pool's non-blocking end; the WASI
 * status as the protocol's int32.  What a guest's run gives is
 * test_js_pool.c's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "../../src/core/clock.h"
#include "../../src/core/fdio.h"
#include "../../src/providers/wasm/js_proto.h"
#include "js_pool_test.h"

/* ---- the broker (plimsoll.request) ------------------------------------------ */

enum tb_mode {
    TB_ECHO,     /* {"status":200,"headers":{},"body":<the request JSON>} */
    TB_FAIL,     /* return -1 */
    TB_SLEEP,    /* sleep until deadline_ns + sleep_past_ms, then echo */
    TB_NOT_JSON, /* reply "not json" */
    TB_REFUSE,   /* {"status":403,...} */
};

struct test_broker {
    enum tb_mode mode;
    unsigned sleep_past_ms;
    unsigned calls;
    bool other_thread; /* a call ran on another thread than the test's */
    pthread_t thread;
    uint64_t deadline_ns;
    char last[512]; /* the last request, truncated */
};

static int tb_call(void *userdata, const char *req, size_t req_len, uint64_t deadline_ns,
                   char **ret_reply, size_t *ret_reply_len) {
    struct test_broker *tb = userdata;
    json_t *reply;
    char *out;

    tb->calls++;
    if (!pthread_equal(pthread_self(), tb->thread))
        tb->other_thread = true;
    tb->deadline_ns = deadline_ns;
    snprintf(tb->last, sizeof(tb->last), "%.*s", (int)req_len, req);
    if (req[req_len] != '\0')
        return -1; /* the request is NUL-terminated */
    switch (tb->mode) {
    case TB_FAIL: return -1;
    case TB_NOT_JSON:
        *ret_reply = strdup("not json");
        *ret_reply_len = strlen("not json");
        return *ret_reply ? 0 : -1;
    case TB_SLEEP: {
        struct timespec ts = pl_timespec_of(deadline_ns + PL_MS(tb->sleep_past_ms));
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        break;
    }
    default: break;
    }
    reply = json_pack("{s:i, s:{}, s:s#}", "status", tb->mode == TB_REFUSE ? 403 : 200, "headers",
                      "body", req, req_len);
    out = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
    json_decref(reply);
    if (!out)
        return -1;
    *ret_reply = out;
    *ret_reply_len = strlen(out);
    return 0;
}

static int run_broker(struct pl_js_pool *pool, const char *code, const struct pl_js_limits *lim,
                      const struct pl_js_broker *b, struct pl_js_result *res) {
    int r =
        pl_js_pool_run_broker(pool, code, strlen(code), NULL, 0, lim ? lim : &k_default, b, res);
    if (r < 0) {
        fprintf(stderr, "  run_broker(%.40s...) failed: %s\n", code, strerror(-r));
        res->out.data = calloc(1, 1);
        res->err.data = calloc(1, 1);
    }
    return r;
}

static struct pl_js_broker tb_broker(struct test_broker *tb, enum tb_mode mode) {
    memset(tb, 0, sizeof(*tb));
    tb->mode = mode;
    tb->thread = pthread_self();
    return (struct pl_js_broker){
        .call = tb_call,
        .userdata = tb,
        .max_request_bytes = 4096,
        .max_reply_bytes = 1 << 20,
    };
}

static const char k_try[] = "function t(o) { try { const r = plimsoll.request(o);"
                            " console.log('ok', JSON.stringify(r)); }"
                            " catch (e) { console.log(e.name + ': ' + e.message); } }\n";

/* Run k_try + code with broker b; return the result. */
static int run_try(struct pl_js_pool *pool, const char *code, const struct pl_js_broker *b,
                   struct pl_js_result *r) {
    char src[4096];

    snprintf(src, sizeof(src), "%s%s", k_try, code);
    return run_broker(pool, src, NULL, b, r);
}

static void test_broker_none(struct pl_js_pool *pool) {
    struct pl_js_result r;

    printf("# broker: a run without a grant\n");
    CHECK(run(pool,
              "console.log(plimsoll.hasGrant);"
              "try { plimsoll.request({path: '/x'}) } catch (e) { console.log(e.message) }",
              NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 0 &&
          strcmp(r.out.data, "false\nplimsoll.request: this run has no grant\n") == 0);
    CHECK(r.broker_calls == 0);
    pl_js_result_free(&r);
    /* The same through pl_js_pool_run_broker(NULL); uncaught, it fails the run. */
    CHECK(run_broker(pool, "plimsoll.request({path: '/x'})", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 1 && contains(&r, "err",
                                       "Uncaught Error: plimsoll.request: this run "
                                       "has no grant"));
    pl_js_result_free(&r);
}

static void test_broker_echo(struct pl_js_pool *pool) {
    struct test_broker tb;
    struct pl_js_broker b = tb_broker(&tb, TB_ECHO);
    struct pl_js_result r;

    printf("# broker: echo\n");
    CHECK(run_broker(pool,
                     "console.log(plimsoll.hasGrant);"
                     "const sent = [{path: '/items/1?x=y'},"
                     " {method: 'POST', path: '/items', headers: {'content-type': "
                     "'application/json', 'x-n': '1'}, body: JSON.stringify({a: [1, 'é']})},"
                     " {method: 'DELETE', path: '/items/1', headers: {}}];"
                     "for (const o of sent) {"
                     "  const r = plimsoll.request(o);"
                     "  const got = JSON.parse(r.body);"
                     "  const want = {method: o.method || 'GET', path: o.path,"
                     "                headers: o.headers || {}, body: o.body || ''};"
                     "  console.log(r.status, JSON.stringify(r.headers),"
                     "              JSON.stringify(got) === JSON.stringify(want));"
                     "}",
                     NULL, &b, &r) == 0);
    printf("  out: %s", r.out.data);
    CHECK(r.exit_code == 0);
    CHECK(strcmp(r.out.data, "true\n200 {} true\n200 {} true\n200 {} true\n") == 0);
    CHECK(tb.calls == 3 && r.broker_calls == 3);
    CHECK(!tb.other_thread); /* called on the thread running the snippet */
    CHECK(strcmp(tb.last, "{\"method\":\"DELETE\",\"path\":\"/items/1\",\"headers\":{},"
                          "\"body\":\"\"}") == 0);
    pl_js_result_free(&r);

    /* The exact bytes of a default request, and the deadline handed over. */
    b = tb_broker(&tb, TB_ECHO);
    uint64_t t0 = pl_now_ns();
    CHECK(run_broker(pool, "plimsoll.request({path: '/items/1?x=y'})", NULL, &b, &r) == 0);
    uint64_t t1 = pl_now_ns(), timeout_ns = PL_MS(k_default.timeout_ms);
    CHECK(r.exit_code == 0 && tb.calls == 1);
    CHECK(strcmp(tb.last, "{\"method\":\"GET\",\"path\":\"/items/1?x=y\",\"headers\":{},"
                          "\"body\":\"\"}") == 0);
    CHECK(tb.deadline_ns >= t0 + timeout_ns && tb.deadline_ns <= t1 + timeout_ns);
    pl_js_result_free(&r);

    /* A lone surrogate reaches the broker escaped: the bytes are valid UTF-8. */
    b = tb_broker(&tb, TB_ECHO);
    CHECK(run_broker(pool, "plimsoll.request({path: '/', body: '\\ud800'})", NULL, &b, &r) == 0);
    CHECK(r.exit_code == 0 && strstr(tb.last, "\"body\":\"\\ud800\"") != NULL);
    pl_js_result_free(&r);

    /* A refusal is an ordinary reply. */
    b = tb_broker(&tb, TB_REFUSE);
    CHECK(run_broker(pool, "console.log(plimsoll.request({path: '/admin'}).status)", NULL, &b,
                     &r) == 0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "403\n") == 0);
    pl_js_result_free(&r);

    /* A reply that is not JSON: the guest's JSON.parse throws. */
    b = tb_broker(&tb, TB_NOT_JSON);
    CHECK(run_try(pool, "t({path: '/'})", &b, &r) == 0);
    CHECK(r.exit_code == 0 && strncmp(r.out.data, "SyntaxError: ", 13) == 0);
    pl_js_result_free(&r);
}

static void test_broker_limits(struct pl_js_pool *pool) {
    struct test_broker tb;
    struct pl_js_broker b;
    struct pl_js_result r;

    printf("# broker: size and call limits, failures\n");
    /* A request over max_request_bytes throws in the guest; call is not called. */
    b = tb_broker(&tb, TB_ECHO);
    b.max_request_bytes = 100;
    CHECK(run_try(pool,
                  "t({path: '/', body: 'x'.repeat(40)}); t({path: '/', body: 'x'.repeat(100)});",
                  &b, &r) == 0);
    printf("  out: %s", r.out.data);
    CHECK(r.exit_code == 0 && strncmp(r.out.data, "ok ", 3) == 0);
    CHECK(contains(&r, "out",
                   "\nError: plimsoll.request: request too large (150 bytes; this grant allows "
                   "100)\n"));
    CHECK(tb.calls == 1 && r.broker_calls == 1);
    pl_js_result_free(&r);

    /* A reply over max_reply_bytes: the guest's call throws. */
    b = tb_broker(&tb, TB_ECHO);
    b.max_reply_bytes = 200;
    CHECK(run_try(pool, "t({path: '/'}); t({path: '/', body: 'y'.repeat(200)});", &b, &r) == 0);
    printf("  out: %s", r.out.data);
    CHECK(r.exit_code == 0 && strncmp(r.out.data, "ok ", 3) == 0);
    CHECK(
        contains(&r, "out", "\nError: plimsoll.request: broker reply too large for this grant\n"));
    CHECK(tb.calls == 2);
    pl_js_result_free(&r);

    /* The callback fails. */
    b = tb_broker(&tb, TB_FAIL);
    CHECK(run_try(pool, "t({path: '/'}); t({path: '/'})", &b, &r) == 0);
    CHECK(r.exit_code == 0 &&
          strcmp(r.out.data, "Error: plimsoll.request: broker unavailable\n"
                             "Error: plimsoll.request: broker unavailable\n") == 0);
    CHECK(tb.calls == 2 && r.broker_calls == 2);
    pl_js_result_free(&r);

    /* max_calls. */
    b = tb_broker(&tb, TB_ECHO);
    b.max_calls = 2;
    CHECK(run_try(pool, "t({path: '/'}); t({path: '/'}); t({path: '/'});", &b, &r) == 0);
    CHECK(contains(&r, "out", "\nError: plimsoll.request: this grant's call limit was reached\n"));
    CHECK(tb.calls == 2 && r.broker_calls == 2);
    pl_js_result_free(&r);

    /* Bad arguments: TypeError, nothing sent. */
    b = tb_broker(&tb, TB_ECHO);
    CHECK(run_try(pool,
                  "t(); t('/x'); t(null); t({}); t({path: 1}); t({path: '/', method: 1});"
                  "t({path: '/', headers: []}); t({path: '/', headers: 'a'});"
                  "t({path: '/', headers: {a: 1}}); t({path: '/', body: {}});"
                  "t({path: '/', body: null});",
                  &b, &r) == 0);
    printf("  out: %s", r.out.data);
    CHECK(r.exit_code == 0 && tb.calls == 0);
    CHECK(strcmp(r.out.data, "TypeError: plimsoll.request: options must be an object\n"
                             "TypeError: plimsoll.request: options must be an object\n"
                             "TypeError: plimsoll.request: options must be an object\n"
                             "TypeError: plimsoll.request: path must be a string\n"
                             "TypeError: plimsoll.request: path must be a string\n"
                             "TypeError: plimsoll.request: method must be a string\n"
                             "TypeError: plimsoll.request: headers must be an object\n"
                             "TypeError: plimsoll.request: headers must be an object\n"
                             "TypeError: plimsoll.request: header values must be strings\n"
                             "TypeError: plimsoll.request: body must be a string\n"
                             "TypeError: plimsoll.request: body must be a string\n") == 0);
    pl_js_result_free(&r);

    /* Argument validation of the broker itself. */
    b = tb_broker(&tb, TB_ECHO);
    b.call = NULL;
    CHECK(pl_js_pool_run_broker(pool, "1", 1, NULL, 0, &k_default, &b, &r) == -EINVAL);
    b = tb_broker(&tb, TB_ECHO);
    b.max_request_bytes = 0;
    CHECK(pl_js_pool_run_broker(pool, "1", 1, NULL, 0, &k_default, &b, &r) == -EINVAL);
    b = tb_broker(&tb, TB_ECHO);
    b.max_reply_bytes = (16u << 20) + 1;
    CHECK(pl_js_pool_run_broker(pool, "1", 1, NULL, 0, &k_default, &b, &r) == -EINVAL);
}

static void test_broker_deadline(struct pl_js_pool *pool1) {
    struct pl_js_limits lim = k_default;
    struct test_broker tb;
    struct pl_js_broker b;
    struct pl_js_result r;
    uint64_t respawns = pl_js_pool_respawns(pool1);

    printf("# broker: a callback past the deadline (timeout_ms=300, 1 worker)\n");
    lim.timeout_ms = 300;
    /* Returns 50 ms late: the guest is stopped as soon as the reply is in. */
    b = tb_broker(&tb, TB_SLEEP);
    tb.sleep_past_ms = 50;
    uint64_t t0 = pl_now_ns();
    CHECK(run_broker(pool1,
                     "console.log('before'); plimsoll.request({path: '/slow'});"
                     "console.log('after')",
                     &lim, &b, &r) == 0);
    double ms = (double)(pl_now_ns() - t0) / 1e6;
    printf("  callback 50 ms late -> exit %d timed_out=%d in %.1f ms, out %s", r.exit_code,
           r.timed_out, ms, r.out.data);
    CHECK(r.exit_code == 124 && r.timed_out && tb.calls == 1 && r.broker_calls == 1);
    CHECK(strcmp(r.out.data, "before\n") == 0); /* the output so far is kept */
    CHECK(contains(&r, "err", "plimsoll: deadline of 300 ms exceeded"));
    CHECK(ms >= 300 && ms < 300 + 200);
    pl_js_result_free(&r);
    CHECK(pl_js_pool_respawns(pool1) == respawns); /* the worker stopped itself */

    /* Returns past the pool's backstop: the worker is replaced. */
    b = tb_broker(&tb, TB_SLEEP);
    tb.sleep_past_ms = 400;
    t0 = pl_now_ns();
    CHECK(run_broker(pool1, "plimsoll.request({path: '/slower'})", &lim, &b, &r) == 0);
    ms = (double)(pl_now_ns() - t0) / 1e6;
    printf("  callback 400 ms late -> exit %d timed_out=%d in %.1f ms\n", r.exit_code, r.timed_out,
           ms);
    CHECK(r.exit_code == 124 && r.timed_out && r.broker_calls == 1);
    CHECK(ms >= 700 && ms < 700 + 500); /* ASan workers respawn slowly */
    pl_js_result_free(&r);

    /* The pool still works, with and without a broker. */
    b = tb_broker(&tb, TB_ECHO);
    CHECK(run_broker(pool1, "console.log(plimsoll.request({path: '/'}).status)", NULL, &b, &r) ==
          0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "200\n") == 0);
    pl_js_result_free(&r);
    CHECK(run(pool1, "console.log('after')", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "after\n") == 0);
    pl_js_result_free(&r);
}

/* ---- the protocol against a worker that lies ----------------------------------- */

/*
 * This test binary doubles as a scripted worker (main(): --fake-worker
 * MODE), standing for a worker whose guest got control of it or whose
 * guest's bytes look like protocol: the pool must read "refused" only
 * from a REFUSED frame on a module pool before STARTED, "timed out" only
 * from a frame or its own backstop, and never anything from an exit
 * status or from output bytes.
 */
static int fake_send(uint16_t type, const void *a, size_t alen, const void *b, size_t blen) {
    struct iovec parts[2] = {{(void *)a, alen}, {(void *)b, blen}};
    return pl_js_write_frame(3, type, parts, 2);
}

static int fake_refuse(const char *why) {
    struct pl_js_refusal ref = {0};
    return fake_send(PL_JS_MSG_REFUSED, &ref, sizeof ref, why, strlen(why));
}

static int fake_result(int32_t exit_code, const void *out, size_t out_len) {
    struct pl_js_run_resp resp = {.exit_code = exit_code, .out_len = (uint32_t)out_len};
    return fake_send(PL_JS_MSG_RESULT, &resp, sizeof resp, out, out_len);
}

static int fake_worker(const char *mode) {
    struct pl_js_hello hello = {.pid = (uint32_t)getpid()};
    if (fake_send(PL_JS_MSG_HELLO, &hello, sizeof hello, NULL, 0) < 0)
        return 1;
    for (;;) {
        struct pl_js_frame_hdr hdr;
        static char payload[1 << 16];
        if (pl_fd_read_full(3, &hdr, sizeof hdr, 0, -1) < 0 || hdr.len > sizeof payload ||
            pl_fd_read_full(3, payload, hdr.len, 0, -1) < 0)
            return 0;
        if (strcmp(mode, "refuse") == 0) {
            fake_refuse("no, thanks");
        } else if (strcmp(mode, "refuse-after-start") == 0) {
            fake_send(PL_JS_MSG_STARTED, NULL, 0, NULL, 0);
            fake_refuse("too late");
        } else if (strcmp(mode, "result-without-start") == 0) {
            fake_result(0, "", 0);
        } else if (strcmp(mode, "exit-124-after-start") == 0) {
            fake_send(PL_JS_MSG_STARTED, NULL, 0, NULL, 0);
            usleep(150 * 1000); /* past a 100 ms deadline, before the backstop */
            _exit(124);
        } else if (strcmp(mode, "frames-as-output") == 0) {
            /* Output bytes that are themselves a REFUSED frame and a RESULT
             * frame with exit status -1000. */
            static char out[256];
            struct pl_js_frame_hdr h = {.magic = PL_JS_PROTO_MAGIC,
                                        .version = PL_JS_PROTO_VERSION,
                                        .type = PL_JS_MSG_REFUSED,
                                        .len = sizeof(struct pl_js_refusal) + 2};
            struct pl_js_refusal ref = {0};
            struct pl_js_run_resp resp = {.exit_code = -1000};
            size_t n = 0;
            memcpy(out + n, &h, sizeof h), n += sizeof h;
            memcpy(out + n, &ref, sizeof ref), n += sizeof ref;
            memcpy(out + n, "no", 2), n += 2;
            h.type = PL_JS_MSG_RESULT;
            h.len = sizeof resp;
            memcpy(out + n, &h, sizeof h), n += sizeof h;
            memcpy(out + n, &resp, sizeof resp), n += sizeof resp;
            fake_send(PL_JS_MSG_STARTED, NULL, 0, NULL, 0);
            fake_result(0, out, n);
        }
    }
}

static const char *g_self; /* this test binary, for --fake-worker */

/* One run on a fresh one-worker pool of `mode` fakes. */
static int fake_run(const char *mode, unsigned flags, struct pl_js_result *r) {
    const char *args[] = {"--fake-worker", mode, NULL};
    struct pl_js_pool *pool = NULL;
    struct pl_js_limits lim = k_default;
    struct pl_error err = {0};
    int rc = pl_js_pool_new_args(1, g_self, args, flags, &pool, &err);
    CHECK(rc == 0);
    if (rc < 0) {
        fprintf(stderr, "  fake pool: %s\n", err.message);
        return rc;
    }
    lim.timeout_ms = 100;
    rc = pl_js_pool_run(pool, "x", 1, NULL, 0, &lim, r);
    pl_js_pool_free(pool);
    return rc;
}

static void test_protocol_channels(struct pl_js_pool *unused) {
    struct pl_js_result r;
    int rc;

    (void)unused;
    printf("# protocol: refusals and ends only from their own frames\n");
    rc = fake_run("refuse", PL_JS_POOL_MODULES, &r);
    CHECK(rc == 0 && r.refused && strcmp(r.err.data, "no, thanks") == 0 && r.exit_code == 0);
    pl_js_result_free(&r);
    /* Each an infrastructure error: a refusal on a JavaScript pool, or once
     * the guest has started, is not a refusal; a worker that dies with
     * status 124 after the deadline, without its timed-out frame, is not a
     * timed-out run. */
    static const struct {
        const char *mode;
        unsigned flags;
        const char *what;
    } infra[] = {
        {"refuse", 0, "REFUSED on a JavaScript pool"},
        {"refuse-after-start", PL_JS_POOL_MODULES, "REFUSED after STARTED"},
        {"result-without-start", PL_JS_POOL_MODULES, "RESULT without STARTED on a module pool"},
        {"exit-124-after-start", PL_JS_POOL_MODULES, "exit(124) after the deadline, no frame"},
    };
    for (size_t i = 0; i < sizeof infra / sizeof infra[0]; i++) {
        rc = fake_run(infra[i].mode, infra[i].flags, &r);
        printf("  %s -> %d\n", infra[i].what, rc);
        CHECK(rc == -EIO);
    }
    /* Output that looks like frames is output, byte for byte. */
    rc = fake_run("frames-as-output", PL_JS_POOL_MODULES, &r);
    CHECK(rc == 0 && !r.refused && r.exit_code == 0 && r.out.len == 16 + 8 + 2 + 16 + 24);
    pl_js_result_free(&r);
}

/* ---- framing on the pool's non-blocking end ------------------------------------- */

struct frame_reader {
    int fd;
    struct pl_js_frame_hdr hdr;
    unsigned char *payload;
    int rc;
};

/* A worker's side: a blocking socket, no deadline, a slow start. */
static void *read_one_frame(void *arg) {
    struct frame_reader *fr = arg;
    usleep(100 * 1000); /* let the writer fill the socket buffer first */
    fr->rc = pl_fd_read_full(fr->fd, &fr->hdr, sizeof fr->hdr, 0, -1);
    if (fr->rc == 0)
        fr->rc = pl_js_check_hdr(&fr->hdr, PL_JS_MSG_RUN, 64u << 20);
    if (fr->rc == 0) {
        fr->payload = malloc(fr->hdr.len ? fr->hdr.len : 1);
        fr->rc = fr->payload ? pl_fd_read_full(fr->fd, fr->payload, fr->hdr.len, 0, -1) : -ENOMEM;
    }
    return NULL;
}

/* The pool's end of a worker's socket is non-blocking, so its reads keep
 * their deadlines; a frame larger than the socket buffer is still written
 * whole (pl_js_write_frame waits for room), in order, and the reads tell a
 * deadline from a peer that went away. */
static void test_frames_on_a_nonblocking_end(struct pl_js_pool *unused) {
    (void)unused;
    int sv[2];
    printf("# frames: a non-blocking writer, a blocking reader\n");
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    CHECK(pl_fd_set_nonblock(sv[0]) == 0);

    enum { A = 3 << 20, B = 5 << 20 };
    unsigned char *a = malloc(A), *b = malloc(B);
    CHECK(a && b);
    if (!a || !b)
        return;
    for (size_t i = 0; i < A; i++)
        a[i] = (unsigned char)(i * 7);
    for (size_t i = 0; i < B; i++)
        b[i] = (unsigned char)(i * 13 + 1);
    struct frame_reader fr = {.fd = sv[1]};
    pthread_t th;
    pthread_create(&th, NULL, read_one_frame, &fr);
    struct iovec parts[2] = {{a, A}, {b, B}};
    CHECK(pl_js_write_frame(sv[0], PL_JS_MSG_RUN, parts, 2) == 0);
    pthread_join(th, NULL);
    CHECK(fr.rc == 0 && fr.hdr.len == A + B);
    CHECK(fr.payload && memcmp(fr.payload, a, A) == 0 && memcmp(fr.payload + A, b, B) == 0);
    free(fr.payload);
    free(a);
    free(b);

    /* Nothing comes: the deadline ends the wait.  Half a frame, then the
     * peer closes: the peer went away. */
    struct pl_js_frame_hdr hdr;
    uint64_t t0 = pl_now_ns();
    CHECK(pl_fd_read_full(sv[0], &hdr, sizeof hdr, pl_deadline_in_ms(50), -1) == -ETIMEDOUT);
    CHECK(pl_now_ns() - t0 >= PL_MS(50));
    CHECK(write(sv[1], "PLJS", 4) == 4);
    close(sv[1]);
    CHECK(pl_fd_read_full(sv[0], &hdr, sizeof hdr, pl_deadline_in_ms(1000), -1) == -EPIPE);
    /* Writing to a peer that went away is -EPIPE, never SIGPIPE. */
    CHECK(pl_js_write_frame(sv[0], PL_JS_MSG_HELLO, NULL, 0) == -EPIPE);
    close(sv[0]);

    /* A header is refused for any field out of place. */
    struct pl_js_frame_hdr ok = {.magic = PL_JS_PROTO_MAGIC,
                                 .version = PL_JS_PROTO_VERSION,
                                 .type = PL_JS_MSG_RESULT,
                                 .len = 10};
    CHECK(pl_js_check_hdr(&ok, PL_JS_MSG_RESULT, 10) == 0);
    CHECK(pl_js_check_hdr(&ok, PL_JS_MSG_RESULT, 9) == -EPROTO);
    CHECK(pl_js_check_hdr(&ok, PL_JS_MSG_REFUSED, 10) == -EPROTO);
    struct pl_js_frame_hdr bad = ok;
    bad.magic ^= 1;
    CHECK(pl_js_check_hdr(&bad, PL_JS_MSG_RESULT, 10) == -EPROTO);
    bad = ok;
    bad.version++;
    CHECK(pl_js_check_hdr(&bad, PL_JS_MSG_RESULT, 10) == -EPROTO);
    bad = ok;
    bad.reserved = 1;
    CHECK(pl_js_check_hdr(&bad, PL_JS_MSG_RESULT, 10) == -EPROTO);
    struct iovec five[5] = {{0}};
    CHECK(pl_js_write_frame(-1, PL_JS_MSG_RUN, five, 5) == -EINVAL);
}

/* The WASI status (u32) as the protocol's int32: one to one, nothing special. */
static void test_status_mapping(struct pl_js_pool *unused) {
    (void)unused;
    CHECK(pl_js_status_i32(0) == 0);
    CHECK(pl_js_status_i32(1) == 1);
    CHECK(pl_js_status_i32(255) == 255);
    CHECK(pl_js_status_i32(256) == 256);
    CHECK(pl_js_status_i32(2147483647u) == INT32_MAX);
    CHECK(pl_js_status_i32(2147483648u) == INT32_MIN);
    CHECK(pl_js_status_i32(4294966296u) == -1000);
    CHECK(pl_js_status_i32(4294967295u) == -1);
    for (uint64_t v = 0; v <= UINT32_MAX; v += 65521) /* a prime stride over the range */
        CHECK((uint32_t)pl_js_status_i32((uint32_t)v) == (uint32_t)v);
}

CASE(test_broker_none, g_pool)
CASE(test_broker_echo, g_pool)
CASE(test_broker_limits, g_pool)
CASE(test_broker_deadline, g_pool1)
CASE(test_protocol_channels, NULL)
CASE(test_status_mapping, NULL)
CASE(test_frames_on_a_nonblocking_end, NULL)

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--fake-worker") == 0)
        return fake_worker(argv[2]);
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return 2;
    self[n] = '\0';
    g_self = self;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(case_test_broker_none),
        cmocka_unit_test(case_test_broker_echo),
        cmocka_unit_test(case_test_broker_limits),
        cmocka_unit_test(case_test_broker_deadline),
        cmocka_unit_test(case_test_protocol_channels),
        cmocka_unit_test(case_test_status_mapping),
        cmocka_unit_test(case_test_frames_on_a_nonblocking_end),
    };
    return cmocka_run_group_tests_name("js_pool_protocol", tests, setup, teardown);
}
