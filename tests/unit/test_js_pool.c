/*
 * Integration tests for the wasm provider's worker pool (js_pool.h),
 * against the real worker executable (PLIMSOLL_JS_WORKER, else the one in this build
 * tree).  Each group of CHECKs is one cmocka test, which fails when any of
 * its CHECKs did.  Measured figures (deadline stops, soak) are printed;
 * latency lives in bench/, never asserted here.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>

#include "../../src/core/clock.h"
#include "../../src/core/fdio.h"
#include "../../src/providers/wasm/js_pool.h"
#include "../../src/providers/wasm/js_proto.h"

static int g_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                        \
            g_failures++;                                                                          \
        }                                                                                          \
    } while (0)

static const struct pl_js_limits k_default = {
    .memory_bytes = 64ull << 20,
    .timeout_ms = 2000,
    .stdout_cap = 1 << 20,
    .stderr_cap = 1 << 20,
};

/* Run code; on infrastructure failure print it and return the error. */
static int run(struct pl_js_pool *pool, const char *code, const char *in,
               const struct pl_js_limits *lim, struct pl_js_result *res) {
    int r = pl_js_pool_run(pool, code, strlen(code), in, in ? strlen(in) : 0,
                           lim ? lim : &k_default, res);
    if (r < 0) {
        fprintf(stderr, "  run(%.40s...) failed: %s\n", code, strerror(-r));
        /* Keep the checks that follow from crashing on NULL. */
        res->out.data = calloc(1, 1);
        res->err.data = calloc(1, 1);
    }
    return r;
}

static bool contains(const struct pl_js_result *r, const char *stream, const char *needle) {
    const char *hay = strcmp(stream, "out") == 0 ? r->out.data : r->err.data;

    return hay && strstr(hay, needle) != NULL;
}

/* ---- functional ------------------------------------------------------------ */

static void test_basics(struct pl_js_pool *pool) {
    struct pl_js_result r;

    printf("# basics\n");
    CHECK(run(pool, "console.log('hello world')", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 0 && !r.timed_out && !r.out_of_memory);
    CHECK(r.out.len == 12 && strcmp(r.out.data, "hello world\n") == 0);
    CHECK(r.err.len == 0);
    pl_js_result_free(&r);

    /* The completion value of the script is not printed. */
    CHECK(run(pool, "1 + 1; 'value'", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 0 && r.out.len == 0 && r.err.len == 0);
    pl_js_result_free(&r);

    CHECK(run(pool, "console.log('a', 1, 2.5, -0, true, null, undefined, 10n)", NULL, NULL, &r) ==
          0);
    CHECK(strcmp(r.out.data, "a 1 2.5 -0 true null undefined 10n\n") == 0);
    pl_js_result_free(&r);

    CHECK(run(pool, "console.log({a: 1, b: [1, 'x'], c: {d: null}}, [], {})", NULL, NULL, &r) == 0);
    CHECK(strcmp(r.out.data, "{ a: 1, b: [ 1, 'x' ], c: { d: null } } [] {}\n") == 0);
    pl_js_result_free(&r);

    CHECK(run(pool, "console.log('%s=%d', 'n', 42); console.error('to stderr')", NULL, NULL, &r) ==
          0);
    CHECK(strcmp(r.out.data, "n=42\n") == 0 && strcmp(r.err.data, "to stderr\n") == 0);
    pl_js_result_free(&r);

    CHECK(run(pool, "let x = ;", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 1 && !r.timed_out && !r.out_of_memory);
    CHECK(strncmp(r.err.data, "Uncaught SyntaxError: ", 22) == 0);
    printf("  syntax error -> exit %d, stderr: %.*s", r.exit_code, (int)r.err.len, r.err.data);
    pl_js_result_free(&r);

    CHECK(run(pool, "function f() { throw new TypeError('bad thing'); }\nf();", NULL, NULL, &r) ==
          0);
    CHECK(r.exit_code == 1 && strncmp(r.err.data, "Uncaught TypeError: bad thing\n", 30) == 0);
    CHECK(contains(&r, "err", "at f (<snippet>"));
    pl_js_result_free(&r);

    CHECK(run(pool, "throw 42", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 1 && strcmp(r.err.data, "Uncaught 42\n") == 0);
    pl_js_result_free(&r);

    /* Jobs run after the script; unhandled rejections fail the run. */
    CHECK(run(pool, "Promise.resolve(7).then(v => console.log('job', v)); console.log('sync')",
              NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "sync\njob 7\n") == 0);
    pl_js_result_free(&r);
    CHECK(run(pool, "(async () => { await null; throw new Error('late'); })()", NULL, NULL, &r) ==
          0);
    CHECK(r.exit_code == 1 && contains(&r, "err", "Uncaught (in promise) Error: late"));
    pl_js_result_free(&r);
    CHECK(run(pool, "Promise.reject(new Error('x')).catch(() => console.log('caught'))", NULL, NULL,
              &r) == 0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "caught\n") == 0);
    pl_js_result_free(&r);

    /* Deep recursion is a RangeError, not a crash; stack printed briefly. */
    CHECK(run(pool, "function f(n) { return f(n + 1) + 1; } f(0)", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 1 && !r.trapped &&
          strncmp(r.err.data, "Uncaught InternalError: stack overflow", 38) == 0);
    CHECK(contains(&r, "err", "more frames"));
    pl_js_result_free(&r);

    /* No host access: no std/os modules, no require, no process. */
    CHECK(run(pool,
              "console.log(typeof std, typeof os, typeof require, typeof process, "
              "typeof scriptArgs, typeof print)",
              NULL, NULL, &r) == 0);
    CHECK(strcmp(r.out.data, "undefined undefined undefined undefined undefined undefined\n") == 0);
    pl_js_result_free(&r);
    CHECK(run(pool, "import('os').then(m => console.log('imported'))", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 1 && !contains(&r, "out", "imported"));
    pl_js_result_free(&r);
}

static void test_stdin(struct pl_js_pool *pool) {
    struct pl_js_result r;

    printf("# stdin\n");
    CHECK(run(pool,
              "const s = readStdin(); console.log(s.split('\\n').length, "
              "JSON.stringify(s), readStdin() === s)",
              "line one\nl\u00e9ne two\n", NULL, &r) == 0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "3 \"line one\\nl\u00e9ne two\\n\" true\n") == 0);
    pl_js_result_free(&r);
    CHECK(run(pool, "console.log(JSON.stringify(readStdin()))", NULL, NULL, &r) == 0);
    CHECK(strcmp(r.out.data, "\"\"\n") == 0);
    pl_js_result_free(&r);
}

static void test_fresh_state(struct pl_js_pool *pool1) {
    struct pl_js_result r;

    printf("# state does not survive between runs (1 worker)\n");
    CHECK(run(pool1,
              "globalThis.leak = 42; var v = 1; Object.prototype.polluted = 1;"
              "console.log(typeof leak)",
              NULL, NULL, &r) == 0);
    CHECK(strcmp(r.out.data, "number\n") == 0);
    pl_js_result_free(&r);
    CHECK(run(pool1, "console.log(typeof leak, typeof v, ({}).polluted)", NULL, NULL, &r) == 0);
    CHECK(strcmp(r.out.data, "undefined undefined undefined\n") == 0);
    pl_js_result_free(&r);
}

static void test_deadlines(struct pl_js_pool *pool) {
    static const char *const loops[] = {
        "for (;;) {}",
        "/(a+)+$/.test('a'.repeat(40) + 'b')",
        "Array(2**27).join('')",
        "const a = []; a.length = 2**31; a.indexOf(1)",
        "while (true) { try { for(;;){} } finally { continue; } }",
    };
    struct pl_js_limits lim = k_default;

    printf("# deadline (timeout_ms=300)\n");
    lim.timeout_ms = 300;
    for (size_t i = 0; i < sizeof(loops) / sizeof(loops[0]); i++) {
        struct pl_js_result r;
        uint64_t t0 = pl_now_ns();

        CHECK(run(pool, loops[i], NULL, &lim, &r) == 0);
        double ms = (double)(pl_now_ns() - t0) / 1e6;
        printf("  %-58s -> exit %d timed_out=%d in %.1f ms\n", loops[i], r.exit_code, r.timed_out,
               ms);
        CHECK(r.exit_code == 124 && r.timed_out);
        CHECK(contains(&r, "err", "plimsoll: deadline of 300 ms exceeded; the guest was stopped"));
        CHECK(ms < 300 + 1000); /* a correctness bound, not a speed claim */
        pl_js_result_free(&r);
    }
    /* The worker is fine afterwards. */
    struct pl_js_result r;
    CHECK(run(pool, "console.log('after')", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "after\n") == 0);
    pl_js_result_free(&r);
}

struct bg_run {
    struct pl_js_pool *pool;
    const char *code;
    struct pl_js_limits lim;
    struct pl_js_result res;
    int rc;
    uint64_t end_ns;
};

static void *bg_thread(void *arg) {
    struct bg_run *b = arg;

    b->rc = pl_js_pool_run(b->pool, b->code, strlen(b->code), NULL, 0, &b->lim, &b->res);
    b->end_ns = pl_now_ns();
    return NULL;
}

static void test_concurrency(struct pl_js_pool *pool) {
    struct bg_run b = {.pool = pool, .code = "for (;;) {}", .lim = k_default};
    pthread_t th;
    uint64_t worst = 0, last_end;
    int ok = 0;

    printf("# other workers keep answering while one loops (2 workers)\n");
    b.lim.timeout_ms = 1500;
    pthread_create(&th, NULL, bg_thread, &b);
    usleep(50 * 1000);
    for (int i = 0; i < 50; i++) {
        struct pl_js_result r;
        uint64_t t0 = pl_now_ns();

        if (run(pool, "console.log(2)", NULL, NULL, &r) == 0 && strcmp(r.out.data, "2\n") == 0)
            ok++;
        if (pl_now_ns() - t0 > worst)
            worst = pl_now_ns() - t0;
        pl_js_result_free(&r);
    }
    last_end = pl_now_ns();
    pthread_join(th, NULL);
    printf("  50/50 quick runs ok=%d, slowest %.2f ms, finished %.0f ms before the loop "
           "was stopped\n",
           ok, (double)worst / 1e6, ((double)b.end_ns - (double)last_end) / 1e6);
    CHECK(ok == 50);
    CHECK(last_end < b.end_ns);
    CHECK(b.rc == 0 && b.res.timed_out && b.res.exit_code == 124);
    pl_js_result_free(&b.res);
}

static void test_memory(struct pl_js_pool *pool) {
    static const char *const hogs[] = {
        "new ArrayBuffer(1 << 30)",
        "const a = []; for (let i = 0; ; i++) a.push('x'.repeat(1000) + i)",
        "let s = 'x'; for (;;) s = s + s",
        "const m = new Map(); for (let i = 0; ; i++) m.set(i, {i})",
    };
    struct pl_js_limits lim = k_default;
    struct pl_js_result r;

    printf("# memory cap 64 MiB\n");
    lim.timeout_ms = 10000;
    for (size_t i = 0; i < sizeof(hogs) / sizeof(hogs[0]); i++) {
        uint64_t t0 = pl_now_ns();

        CHECK(run(pool, hogs[i], NULL, &lim, &r) == 0);
        printf("  %-66s -> exit %d oom=%d in %.0f ms: %.*s", hogs[i], r.exit_code, r.out_of_memory,
               (double)(pl_now_ns() - t0) / 1e6,
               (int)(strchr(r.err.data, '\n') ? strchr(r.err.data, '\n') - r.err.data + 1
                                              : (long)r.err.len),
               r.err.data);
        CHECK(r.exit_code == 1 && r.out_of_memory && !r.timed_out);
        CHECK(contains(&r, "err", "out of memory"));
        pl_js_result_free(&r);
    }
    /* A caught allocation failure is not an OOM result. */
    CHECK(run(pool,
              "try { new ArrayBuffer(1 << 30) } catch (e) { console.log('caught', e.message) }",
              NULL, &lim, &r) == 0);
    CHECK(r.exit_code == 0 && !r.out_of_memory &&
          strcmp(r.out.data, "caught out of memory\n") == 0);
    pl_js_result_free(&r);

    /* Below what the engine needs to start. */
    lim.memory_bytes = 1 << 20;
    CHECK(run(pool, "console.log(1)", NULL, &lim, &r) == 0);
    CHECK(r.exit_code == 1 && r.out_of_memory && contains(&r, "err", "plimsoll: out of memory"));
    pl_js_result_free(&r);

    /* Workers are reused after OOM. */
    CHECK(run(pool, "console.log('fine')", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "fine\n") == 0);
    pl_js_result_free(&r);
}

static void test_output_caps(struct pl_js_pool *pool) {
    struct pl_js_limits lim = k_default;
    struct pl_js_result r;
    char *expect = malloc(200000);
    size_t n = 0;

    printf("# output caps\n");
    for (int i = 0; i < 10000; i++)
        n += (size_t)sprintf(expect + n, "line %d\n", i);
    lim.stdout_cap = 1000;
    lim.stderr_cap = 333;
    CHECK(run(pool,
              "for (let i = 0; i < 10000; i++) { console.log('line ' + i); "
              "console.error('line ' + i) }",
              NULL, &lim, &r) == 0);
    CHECK(r.exit_code == 0);
    CHECK(r.out.truncated && r.out.len == 1000 && memcmp(r.out.data, expect, 1000) == 0);
    CHECK(r.err.truncated && r.err.len == 333 && memcmp(r.err.data, expect, 333) == 0);
    printf("  wrote %zu bytes per stream: kept out=%zu (truncated=%d) err=%zu (truncated=%d), "
           "exact prefixes\n",
           n, r.out.len, r.out.truncated, r.err.len, r.err.truncated);
    pl_js_result_free(&r);

    /* Exactly at the cap is not truncation. */
    lim.stdout_cap = 6;
    CHECK(run(pool, "console.log('12345')", NULL, &lim, &r) == 0);
    CHECK(!r.out.truncated && r.out.len == 6);
    pl_js_result_free(&r);

    /* Flood + deadline: the kept prefix and the timeout line. */
    lim.stdout_cap = 100;
    lim.stderr_cap = 50;
    lim.timeout_ms = 200;
    CHECK(run(pool, "for (;;) console.error('flooding stderr forever')", NULL, &lim, &r) == 0);
    CHECK(r.timed_out && r.err.truncated &&
          strncmp(r.err.data, "flooding stderr forever\nflooding stderr forever\nfl", 50) == 0 &&
          strncmp(r.err.data + 50, "\nplimsoll: deadline of 200 ms exceeded", 38) == 0);
    pl_js_result_free(&r);
    free(expect);
}

static void test_worker_crash(struct pl_js_pool *pool1) {
    struct pl_js_result r;
    int pid, pid2;
    uint64_t respawns = pl_js_pool_respawns(pool1);

    printf("# worker crash (1 worker)\n");
    /* Killed while idle: replaced transparently before the next run. */
    pl_js_pool_worker_pids(pool1, &pid, 1);
    kill(pid, SIGKILL);
    usleep(20 * 1000);
    CHECK(run(pool1, "console.log('ok')", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "ok\n") == 0);
    pl_js_result_free(&r);
    pl_js_pool_worker_pids(pool1, &pid2, 1);
    CHECK(pid2 > 0 && pid2 != pid);
    printf("  idle worker %d killed -> replaced by %d, the next run was unaffected\n", pid, pid2);

    /* Killed during a run: that run is an infrastructure error. */
    struct bg_run b = {.pool = pool1, .code = "for (;;) {}", .lim = k_default};
    pthread_t th;
    b.lim.timeout_ms = 5000;
    pthread_create(&th, NULL, bg_thread, &b);
    usleep(200 * 1000);
    kill(pid2, SIGKILL);
    pthread_join(th, NULL);
    printf("  busy worker %d killed mid-run -> pl_js_pool_run returned %d (%s)\n", pid2, b.rc,
           b.rc < 0 ? strerror(-b.rc) : "no error");
    CHECK(b.rc == -EIO);
    pl_js_result_free(&b.res);
    CHECK(run(pool1, "console.log('still ok')", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 0 && strcmp(r.out.data, "still ok\n") == 0);
    pl_js_result_free(&r);
    printf("  respawns: %llu\n", (unsigned long long)(pl_js_pool_respawns(pool1) - respawns));
    CHECK(pl_js_pool_respawns(pool1) - respawns == 2);
}

static void test_worker_hardening(struct pl_js_pool *pool) {
    int pid;
    char path[64], line[256];
    int seccomp = -1, nnp = -1;

    printf("# worker hardening\n");
    pl_js_pool_worker_pids(pool, &pid, 1);
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "re");
    CHECK(f != NULL);
    while (f && fgets(line, sizeof(line), f)) {
        sscanf(line, "Seccomp: %d", &seccomp);
        sscanf(line, "NoNewPrivs: %d", &nnp);
    }
    if (f)
        fclose(f);
    /* Count the worker's open fds. */
    int nfd = 0;
    snprintf(path, sizeof(path), "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.')
            nfd++;
    if (d)
        closedir(d);
    printf("  worker %d: Seccomp=%d NoNewPrivs=%d open fds=%d\n", pid, seccomp, nnp, nfd);
    CHECK(seccomp == 2 && nnp == 1 && nfd == 4);
}

/* ---- soak ------------------------------------------------------ */

static long rss_kib(int pid) {
    char path[64], line[256];
    long kib = -1;
    FILE *f;

    if (pid)
        snprintf(path, sizeof(path), "/proc/%d/status", pid);
    else
        snprintf(path, sizeof(path), "/proc/self/status");
    f = fopen(path, "re");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int n = 0;

    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.')
            n++;
    if (d)
        closedir(d);
    return n - 1; /* the DIR itself */
}

static void test_soak(struct pl_js_pool *pool) {
    enum { N = 5000 };
    int pid;
    int bad = 0;
    long rss0, rss1, wrss0, wrss1;
    int fd0, fd1;
    uint64_t t0;

    printf("# soak: %d runs of console.log(1+1)\n", N);
    pl_js_pool_worker_pids(pool, &pid, 1);
    /* Warm up so allocator arenas settle before measuring. */
    for (int i = 0; i < 200; i++) {
        struct pl_js_result r;
        if (run(pool, "console.log(1+1)", NULL, NULL, &r) == 0)
            pl_js_result_free(&r);
    }
    rss0 = rss_kib(0);
    wrss0 = rss_kib(pid);
    fd0 = count_fds();
    t0 = pl_now_ns();
    for (int i = 0; i < N; i++) {
        struct pl_js_result r;

        if (run(pool, "console.log(1+1)", NULL, NULL, &r) != 0 || r.exit_code != 0 ||
            strcmp(r.out.data, "2\n") != 0)
            bad++;
        pl_js_result_free(&r);
    }
    double secs = (double)(pl_now_ns() - t0) / 1e9;
    rss1 = rss_kib(0);
    wrss1 = rss_kib(pid);
    fd1 = count_fds();
    printf("  %d runs in %.2f s (%.0f runs/s), failures %d\n", N, secs, N / secs, bad);
    printf("  parent RSS %ld -> %ld KiB, fds %d -> %d; worker %d RSS %ld -> %ld KiB\n", rss0, rss1,
           fd0, fd1, pid, wrss0, wrss1);
    CHECK(bad == 0);
    CHECK(fd0 == fd1);
#if defined(__SANITIZE_ADDRESS__)
    /* ASan's quarantine keeps freed memory on purpose: RSS says nothing here;
     * LeakSanitizer checks the parent at exit instead. */
    (void)rss0, (void)rss1, (void)wrss0, (void)wrss1;
#else
    CHECK(rss1 - rss0 < 1024);
    CHECK(wrss1 > 0 && wrss1 - wrss0 < 2048);
#endif
}

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

static struct pl_js_pool *g_pool, *g_pool1;

static const char *worker_path(void) {
    const char *p = getenv("PLIMSOLL_JS_WORKER");
    return p && *p ? p : PL_JS_WORKER_BUILD_PATH;
}

static int setup(void **state) {
    (void)state;
    struct pl_error err = {0};
    printf("runtime: %s\n", pl_js_quickjs_version());
    if (pl_js_pool_new_ex(2, worker_path(), &g_pool, &err) < 0 ||
        pl_js_pool_new_ex(1, worker_path(), &g_pool1, &err) < 0) {
        fprintf(stderr, "pl_js_pool_new: %s\n", err.message);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pl_js_pool_free(g_pool);
    pl_js_pool_free(g_pool1);
    pl_js_result_free(NULL);
    pl_js_pool_free(NULL);
    return 0;
}

/* ---- what the guest can reach, under the real filter ------------------------ */

/* Every host function the QuickJS guest can call (the worker links only
 * what it imports: fd_write, clock_time_get, fd_close, fd_seek,
 * fd_fdstat_get and the two broker calls, which test_broker_* cover) and
 * every host path a run takes (memory growth, out of memory, the deadline
 * timer), on one worker: none may trip the worker's seccomp filter, which
 * would kill it and make the run an infrastructure error.  Math.random is
 * seeded from the clock (gettimeofday -> clock_time_get), not random_get:
 * the guest does not import it, so the JavaScript worker's filter does not
 * allow getrandom.  (Sanitizer builds log instead of killing; the release
 * build is the check.) */
static void test_guest_reach_under_seccomp(struct pl_js_pool *pool1) {
    static const char *const snippets[] = {
        "const a = [Math.random(), Math.random(), Math.random()];"
        "console.log(a.every(x => x >= 0 && x < 1), new Set(a).size)",
        "const t = Date.now(); console.log(t > 1.6e12, typeof new Date().toISOString(),"
        " typeof new Date().toString(), new Date().getTimezoneOffset())",
        "console.error('to stderr'); console.log('to stdout')",
        "throw new Error('uncaught')",
        "let s = 'x'; for (let i = 0; i < 20; i++) s += s; console.log(s.length)",
        "const b = []; for (;;) b.push(new Array(1e5).fill(1))",
    };
    static const char *const want[] = {
        "true 3\n", "true string string 0\n", "to stdout\n", "", "1048576\n", "",
    };
    struct pl_js_limits lim = k_default;
    struct pl_js_result r;
    int pid, pid2;
    uint64_t respawns = pl_js_pool_respawns(pool1);

    printf("# guest reach under seccomp (1 worker)\n");
    pl_js_pool_worker_pids(pool1, &pid, 1);
    lim.memory_bytes = 32u << 20;
    for (size_t i = 0; i < sizeof snippets / sizeof snippets[0]; i++) {
        CHECK(run(pool1, snippets[i], NULL, &lim, &r) == 0);
        if (strcmp(r.out.data, want[i]) != 0)
            fprintf(stderr, "  snippet %zu printed \"%s\"\n", i, r.out.data);
        CHECK(strcmp(r.out.data, want[i]) == 0);
        pl_js_result_free(&r);
    }
    lim.timeout_ms = 100;
    CHECK(run(pool1, "for (;;) {}", NULL, &lim, &r) == 0);
    CHECK(r.timed_out);
    pl_js_result_free(&r);
    pl_js_pool_worker_pids(pool1, &pid2, 1);
    printf("  worker %d -> %d, respawns %llu\n", pid, pid2,
           (unsigned long long)(pl_js_pool_respawns(pool1) - respawns));
    CHECK(pid2 == pid);
    CHECK(pl_js_pool_respawns(pool1) == respawns);
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
    /* A refusal on a JavaScript pool, or once the guest has started, is
     * not a refusal: the run is an infrastructure error. */
    rc = fake_run("refuse", 0, &r);
    printf("  REFUSED on a JavaScript pool -> %d\n", rc);
    CHECK(rc == -EIO);
    rc = fake_run("refuse-after-start", PL_JS_POOL_MODULES, &r);
    printf("  REFUSED after STARTED -> %d\n", rc);
    CHECK(rc == -EIO);
    rc = fake_run("result-without-start", PL_JS_POOL_MODULES, &r);
    printf("  RESULT without STARTED on a module pool -> %d\n", rc);
    CHECK(rc == -EIO);
    /* A worker that dies with status 124 after the deadline, without its
     * timed-out frame, is not a timed-out run. */
    rc = fake_run("exit-124-after-start", PL_JS_POOL_MODULES, &r);
    printf("  exit(124) after the deadline, no frame -> %d\n", rc);
    CHECK(rc == -EIO);
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

static void test_argument_validation(struct pl_js_pool *pool) {
    /* Argument validation is an error, not a result. */
    struct pl_js_result res;
    struct pl_js_limits bad = k_default;
    bad.timeout_ms = 0;
    CHECK(pl_js_pool_run(pool, "1", 1, NULL, 0, &bad, &res) == -EINVAL);

    /* A pool that cannot start says what failed, with the errno. */
    struct pl_js_pool *none = NULL;
    struct pl_error err = {0};
    CHECK(pl_js_pool_new_ex(1, "/nonexistent/plimsoll-js-worker", &none, &err) == -ENOENT);
    CHECK(none == NULL && err.reason == PL_REASON_INTERNAL && err.errnum == ENOENT);
    CHECK(strcmp(err.message, "worker executable /nonexistent/plimsoll-js-worker: "
                              "No such file or directory") == 0);
    err = (struct pl_error){0};
    CHECK(pl_js_pool_new_ex(0, worker_path(), &none, &err) == -EINVAL);
    CHECK(err.errnum == EINVAL && strstr(err.message, "workers must be 1..256") != NULL);
    /* A worker that ends without saying HELLO (/bin/true) did not start. */
    err = (struct pl_error){0};
    CHECK(pl_js_pool_new_ex(1, "/bin/true", &none, &err) == -EPIPE);
    CHECK(strncmp(err.message, "worker /bin/true did not start: ", 32) == 0);
    CHECK(pl_js_pool_new_ex(1, "/nonexistent", &none, NULL) == -ENOENT); /* err may be NULL */
}

#define CASE(fn, pool)                                                                             \
    static void case_##fn(void **state) {                                                          \
        (void)state;                                                                               \
        int before = g_failures;                                                                   \
        fn(pool);                                                                                  \
        if (g_failures != before)                                                                  \
            fail_msg("%d check(s) failed in " #fn, g_failures - before);                           \
    }
CASE(test_argument_validation, g_pool)
CASE(test_basics, g_pool)
CASE(test_stdin, g_pool)
CASE(test_fresh_state, g_pool1)
CASE(test_deadlines, g_pool)
CASE(test_concurrency, g_pool)
CASE(test_memory, g_pool)
CASE(test_output_caps, g_pool)
CASE(test_worker_hardening, g_pool)
CASE(test_worker_crash, g_pool1)
CASE(test_soak, g_pool1)
CASE(test_broker_none, g_pool)
CASE(test_broker_echo, g_pool)
CASE(test_broker_limits, g_pool)
CASE(test_broker_deadline, g_pool1)
CASE(test_guest_reach_under_seccomp, g_pool1)
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
        cmocka_unit_test(case_test_argument_validation),
        cmocka_unit_test(case_test_basics),
        cmocka_unit_test(case_test_stdin),
        cmocka_unit_test(case_test_fresh_state),
        cmocka_unit_test(case_test_deadlines),
        cmocka_unit_test(case_test_concurrency),
        cmocka_unit_test(case_test_memory),
        cmocka_unit_test(case_test_output_caps),
        cmocka_unit_test(case_test_worker_hardening),
        cmocka_unit_test(case_test_worker_crash),
        cmocka_unit_test(case_test_broker_none),
        cmocka_unit_test(case_test_broker_echo),
        cmocka_unit_test(case_test_broker_limits),
        cmocka_unit_test(case_test_broker_deadline),
        cmocka_unit_test(case_test_guest_reach_under_seccomp),
        cmocka_unit_test(case_test_protocol_channels),
        cmocka_unit_test(case_test_status_mapping),
        cmocka_unit_test(case_test_frames_on_a_nonblocking_end),
        cmocka_unit_test(case_test_soak),
    };
    return cmocka_run_group_tests_name("js_pool", tests, setup, teardown);
}
