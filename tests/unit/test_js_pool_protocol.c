/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker pool (js_pool.h) at its boundary with the worker: the broker
 * a run's guest reaches through plimsoll.request, on the real worker; the
 * protocol against a scripted worker that lies (this binary, run as
 * --fake-worker MODE); live output (OUTPUT frames) from both real workers
 * and from a lying one; frames on the pool's non-blocking end; the WASI
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
#include "../../src/providers/wasm/protocol/js_proto.h"
#include "../../src/providers/wasm/protocol/wasi_job.h"
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

/* Bytes 'a'..'z' over and over, for OUTPUT and RESULT payloads. */
static const char *fake_bytes(size_t n) {
    static char buf[PL_JS_MAX_OUTPUT_FRAME + 2];
    if (n > sizeof buf)
        _exit(3);
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)('a' + i % 26);
    return buf;
}

static int fake_output(uint32_t fd, uint32_t reserved, size_t n) {
    struct pl_js_output o = {.fd = fd, .reserved = reserved};
    return fake_send(PL_JS_MSG_OUTPUT, &o, sizeof o, fake_bytes(n), n);
}

/*
 * A "script:" mode: the answer to each RUN, as comma-separated steps.
 *   s        STARTED
 *   oF=N     OUTPUT of N bytes on fd F        rF=N  the same, reserved = 1
 *   h=N      an OUTPUT frame of N payload bytes, all zero (N < its fixed part)
 *   frames   OUTPUT on fd 1 whose bytes are a RESULT frame, exit status -1000
 *   w=MS     sleep MS milliseconds
 *   R        RESULT: exit status = the RUN's flags, no bytes
 *   Ro=N     RESULT with N bytes of stdout;   Re=N  with N bytes of stderr
 */
static void fake_script(const char *script, uint32_t run_flags) {
    char steps[512];
    snprintf(steps, sizeof steps, "%s", script);
    char *save = NULL;
    for (char *t = strtok_r(steps, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const char *eq = strchr(t, '=');
        size_t n = eq ? strtoul(eq + 1, NULL, 10) : 0;
        struct pl_js_run_resp resp = {.exit_code = (int32_t)run_flags};
        if (strcmp(t, "s") == 0) {
            fake_send(PL_JS_MSG_STARTED, NULL, 0, NULL, 0);
        } else if (t[0] == 'o' || t[0] == 'r') {
            fake_output((uint32_t)(t[1] - '0'), t[0] == 'r', n);
        } else if (t[0] == 'h') {
            static const char zero[8];
            fake_send(PL_JS_MSG_OUTPUT, zero, n, NULL, 0);
        } else if (strcmp(t, "frames") == 0) {
            struct {
                struct pl_js_frame_hdr h;
                struct pl_js_run_resp resp;
            } f = {.h = {.magic = PL_JS_PROTO_MAGIC,
                         .version = PL_JS_PROTO_VERSION,
                         .type = PL_JS_MSG_RESULT,
                         .len = sizeof f.resp},
                   .resp = {.exit_code = -1000}};
            struct pl_js_output o = {.fd = 1};
            fake_send(PL_JS_MSG_OUTPUT, &o, sizeof o, &f, sizeof f);
        } else if (t[0] == 'w') {
            usleep((useconds_t)n * 1000);
        } else if (strcmp(t, "R") == 0) {
            fake_send(PL_JS_MSG_RESULT, &resp, sizeof resp, NULL, 0);
        } else if (t[0] == 'R') {
            *(t[1] == 'o' ? &resp.out_len : &resp.err_len) = (uint32_t)n;
            fake_send(PL_JS_MSG_RESULT, &resp, sizeof resp, fake_bytes(n), n);
        }
    }
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
        struct pl_js_run_req req = {0};
        memcpy(&req, payload, hdr.len < sizeof req ? hdr.len : sizeof req);
        if (strncmp(mode, "script:", 7) == 0) {
            fake_script(mode + 7, req.flags);
        } else if (strcmp(mode, "refuse") == 0) {
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

/* One run on a fresh one-worker pool of `mode` fakes, with limits lim
 * (NULL: the defaults with a 100 ms deadline), streaming to sink (NULL:
 * not streaming). */
static int fake_run_stream(const char *mode, unsigned flags, const struct pl_js_limits *lim,
                           const struct pl_output_sink *sink, struct pl_js_result *r) {
    const char *args[] = {"--fake-worker", mode, NULL};
    struct pl_js_pool *pool = NULL;
    struct pl_js_limits dflt = k_default;
    struct pl_error err = {0};
    int rc = pl_js_pool_new_args(1, g_self, args, flags, &pool, &err);
    CHECK(rc == 0);
    if (rc < 0) {
        fprintf(stderr, "  fake pool: %s\n", err.message);
        return rc;
    }
    dflt.timeout_ms = 100;
    rc = pl_js_pool_run_stream(pool, "x", 1, NULL, 0, lim ? lim : &dflt, NULL, sink, r);
    pl_js_pool_free(pool);
    return rc;
}

static int fake_run(const char *mode, unsigned flags, struct pl_js_result *r) {
    return fake_run_stream(mode, flags, NULL, NULL, r);
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

/* ---- live output (pl_js_pool_run_stream) ----------------------------------------- */

#define TS_MAX_CHUNKS 512

/* One call of the sink, as it came. */
struct ts_chunk {
    int fd;
    size_t len;
    uint64_t at_ns; /* CLOCK_MONOTONIC */
    int64_t at_ms;  /* CLOCK_REALTIME, as the guest's Date.now() */
    char head[48];  /* the bytes, NUL-terminated, cut */
};

/* A sink that keeps everything it is given and when. */
struct test_sink {
    struct pl_output_sink sink;
    char *got[2]; /* stdout, stderr: every byte, joined */
    size_t len[2];
    struct ts_chunk chunk[TS_MAX_CHUNKS];
    size_t n;         /* calls, counted past TS_MAX_CHUNKS too */
    size_t max_chunk; /* the longest call */
    bool bad;         /* a step other than 0, an fd other than 1 or 2, no bytes, another thread */
    pthread_t thread;
    unsigned delay_us; /* each call takes this long: the worker's writes then wait */
};

static void ts_write(void *ud, unsigned step, int fd, const char *data, size_t len) {
    struct test_sink *ts = ud;
    struct timespec rt;
    if (step != 0 || (fd != 1 && fd != 2) || len == 0 ||
        !pthread_equal(pthread_self(), ts->thread)) {
        ts->bad = true;
        return;
    }
    clock_gettime(CLOCK_REALTIME, &rt);
    char *p = realloc(ts->got[fd - 1], ts->len[fd - 1] + len + 1);
    if (!p) {
        ts->bad = true;
        return;
    }
    memcpy(p + ts->len[fd - 1], data, len);
    ts->len[fd - 1] += len;
    p[ts->len[fd - 1]] = '\0';
    ts->got[fd - 1] = p;
    if (ts->n < TS_MAX_CHUNKS) {
        struct ts_chunk *c = &ts->chunk[ts->n];
        c->fd = fd;
        c->len = len;
        c->at_ns = pl_now_ns();
        c->at_ms = (int64_t)rt.tv_sec * 1000 + rt.tv_nsec / 1000000;
        snprintf(c->head, sizeof c->head, "%.*s", (int)(len < sizeof c->head ? len : 47), data);
    }
    ts->n++;
    if (len > ts->max_chunk)
        ts->max_chunk = len;
    if (ts->delay_us)
        usleep(ts->delay_us);
}

static void ts_init(struct test_sink *ts) {
    memset(ts, 0, sizeof(*ts));
    ts->sink = (struct pl_output_sink){.write = ts_write, .ud = ts};
    ts->thread = pthread_self();
}

static void ts_free(struct test_sink *ts) {
    free(ts->got[0]);
    free(ts->got[1]);
    memset(ts, 0, sizeof(*ts));
}

/* What the sink got of each stream is byte for byte what r keeps. */
static bool ts_matches(const struct test_sink *ts, const struct pl_js_result *r) {
    return !ts->bad && ts->len[0] == r->out.len && ts->len[1] == r->err.len &&
           (r->out.len == 0 || memcmp(ts->got[0], r->out.data, r->out.len) == 0) &&
           (r->err.len == 0 || memcmp(ts->got[1], r->err.data, r->err.len) == 0);
}

/* Whether chunk i is stream fd with exactly the bytes s. */
static bool ts_chunk_is(const struct test_sink *ts, size_t i, int fd, const char *s) {
    return i < ts->n && i < TS_MAX_CHUNKS && ts->chunk[i].fd == fd &&
           ts->chunk[i].len == strlen(s) && strcmp(ts->chunk[i].head, s) == 0;
}

static int run_stream(struct pl_js_pool *pool, const char *code, const struct pl_js_limits *lim,
                      const struct pl_js_broker *b, struct test_sink *ts,
                      struct pl_js_result *res) {
    int r = pl_js_pool_run_stream(pool, code, strlen(code), NULL, 0, lim ? lim : &k_default, b,
                                  ts ? &ts->sink : NULL, res);
    if (r < 0) {
        fprintf(stderr, "  run_stream(%.40s...) failed: %s\n", code, strerror(-r));
        res->out.data = calloc(1, 1);
        res->err.data = calloc(1, 1);
    }
    return r;
}

static void test_live_snippets(struct pl_js_pool *pool) {
    struct pl_js_limits lim = k_default;
    struct test_sink ts;
    struct pl_js_result r;
    uint64_t respawns = pl_js_pool_respawns(pool);

    printf("# live output: a snippet's lines, one chunk each, in order\n");
    ts_init(&ts);
    CHECK(run_stream(pool,
                     "console.log('one'); console.log('two', 2); console.error('three');"
                     "console.log('four')",
                     NULL, NULL, &ts, &r) == 0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "one\ntwo 2\nfour\n") == 0 &&
          strcmp(r.err.data, "three\n") == 0);
    CHECK(ts.n == 4 && ts_chunk_is(&ts, 0, 1, "one\n") && ts_chunk_is(&ts, 1, 1, "two 2\n") &&
          ts_chunk_is(&ts, 2, 2, "three\n") && ts_chunk_is(&ts, 3, 1, "four\n"));
    CHECK(ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);

    /* An uncaught error's report is the guest's stderr, streamed like the rest. */
    ts_init(&ts);
    CHECK(run_stream(pool, "console.log('before'); throw new Error('boom')", NULL, NULL, &ts, &r) ==
          0);
    CHECK(r.exit_code == 1 && contains(&r, "err", "Uncaught Error: boom"));
    CHECK(ts_chunk_is(&ts, 0, 1, "before\n") && ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);

    printf("# live output: past the caps, exactly the caps are streamed\n");
    lim.stdout_cap = 1000;
    lim.stderr_cap = 100;
    ts_init(&ts);
    CHECK(run_stream(pool,
                     "for (let i = 0; i < 5; i++) console.log(String(i).repeat(299));"
                     "console.error('e'.repeat(149)); console.error('more')",
                     &lim, NULL, &ts, &r) == 0);
    printf("  %zu chunks; out %zu bytes (truncated %d), err %zu (truncated %d)\n", ts.n, r.out.len,
           r.out.truncated, r.err.len, r.err.truncated);
    CHECK(r.exit_code == 0 && r.out.len == 1000 && r.out.truncated && r.err.len == 100 &&
          r.err.truncated);
    CHECK(ts.len[0] == 1000 && ts.len[1] == 100 && ts_matches(&ts, &r));
    CHECK(ts.n == 5); /* 300, 300, 300, 100 of stdout; 100 of stderr; nothing after */
    pl_js_result_free(&r);
    ts_free(&ts);

    /* A write over PL_JS_MAX_OUTPUT_FRAME arrives in frames of at most it:
     * 65535 + "\n" is one frame, 65536 + "\n" two. */
    printf("# live output: one write, at and past PL_JS_MAX_OUTPUT_FRAME\n");
    ts_init(&ts);
    CHECK(run_stream(pool, "console.log('y'.repeat(65535))", NULL, NULL, &ts, &r) == 0);
    CHECK(r.out.len == 65536 && ts.n == 1 && ts.max_chunk == 65536 && ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);
    ts_init(&ts);
    CHECK(run_stream(pool, "console.log('y'.repeat(65536))", NULL, NULL, &ts, &r) == 0);
    CHECK(r.out.len == 65537 && ts.n == 2 && ts.chunk[0].len == 65536 && ts.chunk[1].len == 1 &&
          ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);
    ts_init(&ts);
    CHECK(run_stream(pool, "console.log('z'.repeat(300000))", NULL, NULL, &ts, &r) == 0);
    printf("  300001 bytes in one write -> %zu chunks, the longest %zu\n", ts.n, ts.max_chunk);
    CHECK(r.out.len == 300001 && ts.n == 5 && ts.max_chunk == PL_JS_MAX_OUTPUT_FRAME &&
          ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);

    /* Without a sink nothing is streamed: an OUTPUT frame would have been
     * a protocol error (-EIO, the worker replaced). */
    printf("# live output: a run without a sink\n");
    CHECK(run_stream(pool, "console.log('quiet'); console.error('still')", NULL, NULL, NULL, &r) ==
          0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "quiet\n") == 0 &&
          strcmp(r.err.data, "still\n") == 0);
    pl_js_result_free(&r);
    CHECK(pl_js_pool_respawns(pool) == respawns);

    /* A sink without a write function is a caller's mistake. */
    struct pl_output_sink no_write = {0};
    CHECK(pl_js_pool_run_stream(pool, "1", 1, NULL, 0, &k_default, NULL, &no_write, &r) == -EINVAL);
}

/* The first line reaches the sink while the guest is still running: before
 * it writes its second line 300 ms later (the guest's own clock says when
 * it wrote it), and before the run returns.  Only the order is asserted. */
static void test_live_as_it_happens(struct pl_js_pool *pool) {
    struct test_sink ts;
    struct pl_js_result r;

    printf("# live output: as it happens\n");
    ts_init(&ts);
    CHECK(run_stream(pool,
                     "console.log('first'); const t0 = Date.now();"
                     "while (Date.now() - t0 < 300) {}"
                     "const t1 = Date.now(); console.log('second', t1)",
                     NULL, NULL, &ts, &r) == 0);
    uint64_t returned = pl_now_ns();
    long long second_at = -1;
    CHECK(ts.n == 2 && ts_chunk_is(&ts, 0, 1, "first\n"));
    CHECK(ts.n == 2 && sscanf(ts.chunk[1].head, "second %lld", &second_at) == 1);
    printf("  'first' reached the sink at %lld ms; the guest wrote 'second' at %lld ms\n",
           (long long)ts.chunk[0].at_ms, second_at);
    CHECK(ts.chunk[0].at_ms <= second_at);        /* before the guest wrote the second */
    CHECK(ts.chunk[0].at_ns < ts.chunk[1].at_ns); /* each as it came */
    CHECK(ts.chunk[1].at_ns <= returned);         /* both before the run returned */
    CHECK(ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);
}

/* A run stopped at its deadline keeps what was streamed; plimsoll's line
 * (the worker's, or the pool's when its backstop killed the worker) is
 * streamed too. */
static void test_live_deadlines(struct pl_js_pool *pool1) {
    struct pl_js_limits lim = k_default;
    struct test_sink ts;
    struct test_broker tb;
    struct pl_js_broker b;
    struct pl_js_result r;

    printf("# live output: deadlines (timeout_ms=300)\n");
    lim.timeout_ms = 300;
    ts_init(&ts);
    CHECK(run_stream(pool1, "console.log('out'); console.error('err'); for (;;) {}", &lim, NULL,
                     &ts, &r) == 0);
    CHECK(r.exit_code == 124 && r.timed_out && strcmp(r.out.data, "out\n") == 0);
    CHECK(strcmp(r.err.data,
                 "err\nplimsoll: deadline of 300 ms exceeded; the guest was stopped\n") == 0);
    CHECK(ts.n == 3 && ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);

    /* Writing flat out to a slow sink when the deadline comes: it is taken
     * once the frame being written is whole. */
    lim.stdout_cap = PL_JS_MAX_STREAM;
    for (int i = 0; i < 5; i++) {
        ts_init(&ts);
        ts.delay_us = 100;
        CHECK(run_stream(pool1, "for (;;) console.log('f'.repeat(4095))", &lim, NULL, &ts, &r) ==
              0);
        if (i == 0)
            printf("  writing flat out: %zu bytes streamed in 300 ms\n", ts.len[0]);
        CHECK(r.exit_code == 124 && r.timed_out && r.out.len > 0 && ts_matches(&ts, &r));
        pl_js_result_free(&r);
        ts_free(&ts);
    }
    lim.stdout_cap = k_default.stdout_cap;

    /* The broker callback returns past the backstop: the pool kills the
     * worker and writes the line itself. */
    uint64_t respawns = pl_js_pool_respawns(pool1);
    b = tb_broker(&tb, TB_SLEEP);
    tb.sleep_past_ms = 400;
    ts_init(&ts);
    CHECK(run_stream(pool1,
                     "console.log('before'); console.error('partial');"
                     "plimsoll.request({path: '/slower'})",
                     &lim, &b, &ts, &r) == 0);
    printf("  backstop -> exit %d, out %s", r.exit_code, r.out.data);
    CHECK(r.exit_code == 124 && r.timed_out && strcmp(r.out.data, "before\n") == 0);
    CHECK(strcmp(r.err.data,
                 "partial\nplimsoll: deadline of 300 ms exceeded; the guest was stopped\n") == 0);
    CHECK(ts_matches(&ts, &r));
    CHECK(pl_js_pool_respawns(pool1) == respawns + 1);
    pl_js_result_free(&r);
    ts_free(&ts);
}

/* ---- live output from WASI modules ---- */

/* A module's bytes, grown as it is built. */
struct wbuf {
    uint8_t b[1 << 17];
    size_t n;
};

static void wb_put(struct wbuf *w, const void *p, size_t n) {
    if (w->n + n > sizeof w->b)
        abort();
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void wb_byte(struct wbuf *w, uint8_t v) {
    wb_put(w, &v, 1);
}

static void wb_uleb(struct wbuf *w, uint32_t v) {
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        wb_byte(w, (uint8_t)(b | (v ? 0x80 : 0)));
    } while (v);
}

static void wb_i32(struct wbuf *w, int32_t v) { /* i32.const v */
    bool more = true;
    wb_byte(w, 0x41);
    while (more) {
        uint8_t b = v & 0x7f;
        v >>= 7; /* arithmetic on the targets this builds for */
        more = !((v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40)));
        wb_byte(w, (uint8_t)(b | (more ? 0x80 : 0)));
    }
}

static void wb_section(struct wbuf *w, uint8_t id, const struct wbuf *body) {
    wb_byte(w, id);
    wb_uleb(w, (uint32_t)body->n);
    wb_put(w, body->b, body->n);
}

static void wb_name(struct wbuf *w, const char *s) {
    wb_uleb(w, (uint32_t)strlen(s));
    wb_put(w, s, strlen(s));
}

/* After the writes: return, trap, loop forever; or make them forever. */
enum mod_end { MOD_RETURN, MOD_TRAP, MOD_LOOP, MOD_REPEAT };

struct mod_write {
    int fd;
    const char *data;
    size_t len; /* 0: strlen(data) */
};

/* A WASI command whose _start makes each write with fd_write, then
 * returns, traps (unreachable) or loops forever (tests/wasi/wasmgen.py's
 * writer(), with more writes). */
static struct wbuf *module_writer(const struct mod_write *wr, size_t n, enum mod_end end) {
    static struct wbuf m, code, body, data, sec;
    const uint32_t base = 16; /* 0..7: the iovec, 8..11: nwritten */
    static const uint8_t loop_begin[] = {0x03, 0x40}, loop_again[] = {0x0c, 0x00, 0x0b};
    memset(&code, 0, sizeof code);
    memset(&data, 0, sizeof data);
    if (end == MOD_REPEAT)
        wb_put(&code, loop_begin, sizeof loop_begin);
    for (size_t i = 0; i < n; i++) {
        size_t len = wr[i].len ? wr[i].len : strlen(wr[i].data);
        int32_t off = (int32_t)(base + data.n);
        wb_put(&data, wr[i].data, len);
        static const uint8_t store[] = {0x36, 0x02, 0x00};
        wb_i32(&code, 0), wb_i32(&code, off), wb_put(&code, store, 3);
        wb_i32(&code, 4), wb_i32(&code, (int32_t)len), wb_put(&code, store, 3);
        wb_i32(&code, wr[i].fd), wb_i32(&code, 0), wb_i32(&code, 1), wb_i32(&code, 8);
        static const uint8_t call_drop[] = {0x10, 0x00, 0x1a};
        wb_put(&code, call_drop, 3);
    }
    static const uint8_t trap[] = {0x00}, loop[] = {0x03, 0x40, 0x0c, 0x00, 0x0b};
    if (end == MOD_TRAP)
        wb_put(&code, trap, sizeof trap);
    else if (end == MOD_LOOP)
        wb_put(&code, loop, sizeof loop);
    else if (end == MOD_REPEAT)
        wb_put(&code, loop_again, sizeof loop_again);
    memset(&body, 0, sizeof body);
    wb_byte(&body, 0x00); /* no locals */
    wb_put(&body, code.b, code.n);
    wb_byte(&body, 0x0b);

    memset(&m, 0, sizeof m);
    wb_put(&m, "\0asm\1\0\0\0", 8);
    static const uint8_t types[] = {0x02, 0x60, 0x04, 0x7f, 0x7f, 0x7f,
                                    0x7f, 0x01, 0x7f, 0x60, 0x00, 0x00};
    memset(&sec, 0, sizeof sec);
    wb_put(&sec, types, sizeof types);
    wb_section(&m, 1, &sec);
    memset(&sec, 0, sizeof sec);
    wb_uleb(&sec, 1), wb_name(&sec, "wasi_snapshot_preview1"), wb_name(&sec, "fd_write");
    wb_byte(&sec, 0x00), wb_byte(&sec, 0x00);
    wb_section(&m, 2, &sec);
    memset(&sec, 0, sizeof sec);
    wb_uleb(&sec, 1), wb_byte(&sec, 0x01);
    wb_section(&m, 3, &sec);
    memset(&sec, 0, sizeof sec);
    wb_byte(&sec, 0x01), wb_byte(&sec, 0x00), wb_byte(&sec, 0x02); /* one memory, 2 pages */
    wb_section(&m, 5, &sec);
    memset(&sec, 0, sizeof sec);
    wb_uleb(&sec, 2), wb_name(&sec, "memory"), wb_byte(&sec, 0x02), wb_byte(&sec, 0x00);
    wb_name(&sec, "_start"), wb_byte(&sec, 0x00), wb_byte(&sec, 0x01);
    wb_section(&m, 7, &sec);
    memset(&sec, 0, sizeof sec);
    wb_uleb(&sec, 1), wb_uleb(&sec, (uint32_t)body.n), wb_put(&sec, body.b, body.n);
    wb_section(&m, 10, &sec);
    memset(&sec, 0, sizeof sec);
    wb_uleb(&sec, 1), wb_byte(&sec, 0x00), wb_i32(&sec, (int32_t)base), wb_byte(&sec, 0x0b);
    wb_uleb(&sec, (uint32_t)data.n), wb_put(&sec, data.b, data.n);
    wb_section(&m, 11, &sec);
    return &m;
}

/* Run module m on pool, streaming to ts (NULL: not streaming). */
static int run_module(struct pl_js_pool *pool, const struct wbuf *m, const struct pl_js_limits *lim,
                      struct test_sink *ts, struct pl_js_result *r) {
    size_t len = 0;
    char *job = pl_wasi_job_encode(NULL, 0, m->b, m->n, &len);
    if (!job)
        return -ENOMEM;
    int rc = pl_js_pool_run_stream(pool, job, len, "", 0, lim ? lim : &k_default, NULL,
                                   ts ? &ts->sink : NULL, r);
    free(job);
    if (rc < 0) {
        fprintf(stderr, "  run_module failed: %s\n", strerror(-rc));
        r->out.data = calloc(1, 1);
        r->err.data = calloc(1, 1);
    }
    return rc;
}

static void test_live_modules(struct pl_js_pool *unused) {
    (void)unused;
    /* plimsoll-wasi-worker is built beside plimsoll-js-worker. */
    char path[4096];
    snprintf(path, sizeof path, "%s", worker_path());
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "%s",
             "plimsoll-wasi-worker");
    struct pl_js_pool *mpool = NULL;
    struct pl_error err = {0};
    int rc = pl_js_pool_new_args(1, path, NULL, PL_JS_POOL_MODULES, &mpool, &err);
    CHECK(rc == 0);
    if (rc < 0) {
        fprintf(stderr, "  module pool (%s): %s\n", path, err.message);
        return;
    }
    struct pl_js_limits lim = k_default;
    struct test_sink ts;
    struct pl_js_result r;
    const struct mod_write three[] = {{1, "hello\n", 0}, {2, "oops\n", 0}, {1, "world\n", 0}};

    printf("# live output: a module's writes, one chunk each, in order\n");
    ts_init(&ts);
    CHECK(run_module(mpool, module_writer(three, 3, MOD_RETURN), NULL, &ts, &r) == 0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "hello\nworld\n") == 0 &&
          strcmp(r.err.data, "oops\n") == 0);
    CHECK(ts.n == 3 && ts_chunk_is(&ts, 0, 1, "hello\n") && ts_chunk_is(&ts, 1, 2, "oops\n") &&
          ts_chunk_is(&ts, 2, 1, "world\n"));
    CHECK(ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);

    /* The runner's line after a trap comes with RESULT, and is streamed. */
    ts_init(&ts);
    CHECK(run_module(mpool, module_writer(three, 3, MOD_TRAP), NULL, &ts, &r) == 0);
    printf("  trap -> exit %d, err %s", r.exit_code, r.err.data);
    CHECK(r.exit_code == 1 && r.trapped &&
          strncmp(r.err.data, "oops\nplimsoll: module trapped", 29) == 0);
    CHECK(ts.n == 4 && ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);

    /* Past the cap: exactly the cap. */
    static char big[3000];
    memset(big, 'm', sizeof big);
    const struct mod_write over[] = {{1, big, sizeof big}, {2, big, 10}};
    lim.stdout_cap = 1000;
    lim.stderr_cap = 5;
    ts_init(&ts);
    CHECK(run_module(mpool, module_writer(over, 2, MOD_RETURN), &lim, &ts, &r) == 0);
    CHECK(r.exit_code == 0 && r.out.len == 1000 && r.out.truncated && r.err.len == 5 &&
          r.err.truncated);
    CHECK(ts.len[0] == 1000 && ts.len[1] == 5 && ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);

    /* At the deadline the worker's handler answers without the guest's
     * bytes; streamed, they are kept all the same, and its line starts a
     * line of its own. */
    lim = k_default;
    lim.timeout_ms = 200;
    const struct mod_write tick[] = {{1, "tick\n", 0}, {2, "tock\n", 0}};
    ts_init(&ts);
    CHECK(run_module(mpool, module_writer(tick, 2, MOD_LOOP), &lim, &ts, &r) == 0);
    CHECK(r.exit_code == 124 && r.timed_out && strcmp(r.out.data, "tick\n") == 0);
    CHECK(strcmp(r.err.data,
                 "tock\nplimsoll: deadline of 200 ms exceeded; the guest was stopped\n") == 0);
    CHECK(ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);
    const struct mod_write midline[] = {{2, "tock\n", 0}, {2, "ti", 0}};
    ts_init(&ts);
    CHECK(run_module(mpool, module_writer(midline, 2, MOD_LOOP), &lim, &ts, &r) == 0);
    CHECK(r.exit_code == 124 && r.timed_out && r.out.len == 0);
    CHECK(strcmp(r.err.data,
                 "tock\nti\nplimsoll: deadline of 200 ms exceeded; the guest was stopped\n") == 0);
    CHECK(ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);

    /* Writing flat out, to a sink slower than the module (the worker waits
     * in its writes, the socket full), when the deadline comes: the
     * worker's handler waits for the frame being written to be whole (else
     * its RESULT would land inside it, a protocol error); the run is a
     * timeout, not -EIO. */
    static char block[60 << 10]; /* a frame the socket takes in pieces */
    memset(block, 'f', sizeof block);
    const struct mod_write flood[] = {{1, block, sizeof block}};
    lim.stdout_cap = PL_JS_MAX_STREAM;
    for (int i = 0; i < 5; i++) {
        ts_init(&ts);
        ts.delay_us = 1000;
        CHECK(run_module(mpool, module_writer(flood, 1, MOD_REPEAT), &lim, &ts, &r) == 0);
        if (i == 0)
            printf("  writing flat out: %zu bytes streamed in 200 ms\n", ts.len[0]);
        CHECK(r.exit_code == 124 && r.timed_out && r.out.len > 0 && ts_matches(&ts, &r));
        pl_js_result_free(&r);
        ts_free(&ts);
    }

    /* Not streaming: the whole output in RESULT, as before. */
    CHECK(run_module(mpool, module_writer(three, 3, MOD_RETURN), NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "hello\nworld\n") == 0 &&
          strcmp(r.err.data, "oops\n") == 0);
    pl_js_result_free(&r);
    pl_js_pool_free(mpool);
}

/* A worker that lies with OUTPUT frames: each bound at its edge. */
static void test_live_hostile(struct pl_js_pool *unused) {
    (void)unused;
    enum { NS = 0, ST = 1 };
    static const struct {
        const char *mode;
        unsigned flags;
        int stream;
        size_t out_cap, err_cap; /* 0: the defaults (1 MiB) */
        int want;
        const char *what;
    } cases[] = {
        {"script:o1=65536,R", 0, ST, 0, 0, 0, "OUTPUT of PL_JS_MAX_OUTPUT_FRAME bytes"},
        {"script:o1=65537,R", 0, ST, 0, 0, -EIO, "OUTPUT of PL_JS_MAX_OUTPUT_FRAME + 1"},
        {"script:o1=1,R", 0, ST, 0, 0, 0, "OUTPUT of one byte"},
        {"script:o1=0,R", 0, ST, 0, 0, -EIO, "OUTPUT of no bytes"},
        {"script:h=7,R", 0, ST, 0, 0, -EIO, "OUTPUT shorter than its fixed part"},
        {"script:o1=60,o2=100,o1=40,R", 0, ST, 100, 100, 0, "OUTPUT up to each stream's cap"},
        {"script:o1=60,o1=41,R", 0, ST, 100, 100, -EIO, "stdout's OUTPUT past its cap"},
        {"script:o2=101,R", 0, ST, 100, 100, -EIO, "stderr's OUTPUT past its cap"},
        {"script:o0=1,R", 0, ST, 0, 0, -EIO, "OUTPUT on fd 0"},
        {"script:o3=1,R", 0, ST, 0, 0, -EIO, "OUTPUT on fd 3"},
        {"script:r1=1,R", 0, ST, 0, 0, -EIO, "OUTPUT with reserved set"},
        {"script:R", 0, NS, 0, 0, 0, "no OUTPUT in a run that does not stream"},
        {"script:o1=1,R", 0, NS, 0, 0, -EIO, "OUTPUT in a run that does not stream"},
        {"script:s,o1=3,o2=4,R", PL_JS_POOL_MODULES, ST, 0, 0, 0, "OUTPUT after STARTED"},
        {"script:o1=1,s,R", PL_JS_POOL_MODULES, ST, 0, 0, -EIO, "OUTPUT before STARTED"},
        {"script:o2=100,Re=512", 0, ST, 100, 100, 0, "streamed RESULT: PL_JS_MAX_NOTE of stderr"},
        {"script:Re=513", 0, ST, 100, 100, -EIO, "streamed RESULT: PL_JS_MAX_NOTE + 1"},
        {"script:Ro=1", 0, ST, 0, 0, -EIO, "streamed RESULT with stdout"},
        {"script:frames,R", 0, ST, 0, 0, 0, "OUTPUT bytes that are a frame"},
    };

    printf("# live output: OUTPUT frames from a worker that lies\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct pl_js_limits lim = k_default;
        struct test_sink ts;
        struct pl_js_result r;
        lim.timeout_ms = 100;
        if (cases[i].out_cap)
            lim.stdout_cap = cases[i].out_cap;
        if (cases[i].err_cap)
            lim.stderr_cap = cases[i].err_cap;
        ts_init(&ts);
        int rc = fake_run_stream(cases[i].mode, cases[i].flags, &lim,
                                 cases[i].stream ? &ts.sink : NULL, &r);
        printf("  %-48s -> %d\n", cases[i].what, rc);
        CHECK(rc == cases[i].want);
        if (rc == 0) {
            /* The fake answers with the RUN's flags as the exit status. */
            CHECK(r.exit_code == (cases[i].stream ? (int)PL_JS_RUN_STREAM : 0));
            CHECK(cases[i].stream ? ts_matches(&ts, &r) : ts.n == 0);
            pl_js_result_free(&r);
        }
        ts_free(&ts);
    }
    /* The frame-looking bytes were output, byte for byte. */
    struct test_sink ts;
    struct pl_js_result r;
    ts_init(&ts);
    CHECK(fake_run_stream("script:frames,R", 0, NULL, &ts.sink, &r) == 0);
    CHECK(r.out.len == sizeof(struct pl_js_frame_hdr) + sizeof(struct pl_js_run_resp) &&
          r.exit_code == (int)PL_JS_RUN_STREAM && ts.n == 1 && ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);

    /* The worker goes quiet past the backstop: what was streamed is kept,
     * the pool's line follows stderr's partial line on a line of its own. */
    ts_init(&ts);
    CHECK(fake_run_stream("script:o1=5,o2=3,w=600", 0, NULL, &ts.sink, &r) == 0);
    CHECK(r.timed_out && r.exit_code == 124 && strcmp(r.out.data, "abcde") == 0);
    CHECK(strcmp(r.err.data,
                 "abc\nplimsoll: deadline of 100 ms exceeded; the guest was stopped\n") == 0);
    CHECK(ts_matches(&ts, &r));
    pl_js_result_free(&r);
    ts_free(&ts);
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
CASE(test_live_snippets, g_pool)
CASE(test_live_as_it_happens, g_pool)
CASE(test_live_deadlines, g_pool1)
CASE(test_live_modules, NULL)
CASE(test_live_hostile, NULL)
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
        cmocka_unit_test(case_test_live_snippets),
        cmocka_unit_test(case_test_live_as_it_happens),
        cmocka_unit_test(case_test_live_deadlines),
        cmocka_unit_test(case_test_live_modules),
        cmocka_unit_test(case_test_live_hostile),
        cmocka_unit_test(case_test_frames_on_a_nonblocking_end),
    };
    return cmocka_run_group_tests_name("js_pool_protocol", tests, setup, teardown);
}
