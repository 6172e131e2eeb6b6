/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Integration tests for the wasm provider's worker pool (js_pool.h),
 * against the real worker executable: what a guest's run gives (output,
 * stdin, exit, fresh state), its bounds (deadline, memory, output caps),
 * workers that crash, their hardening and the guest's reach under the
 * real seccomp filter, and a soak.  The broker, the worker protocol and
 * framing are test_js_pool_protocol.c's.  Measured figures (deadline
 * stops, soak) are printed; latency lives in bench/, never asserted here.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/core/clock.h"
#include "js_pool_test.h"

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
    static const char probe[] =
        "console.log(typeof leak, typeof v, ({}).polluted, [5, 6].at(-1), typeof JSON)";
    struct pl_js_limits tiny = k_default;
    struct pl_js_result r;

    printf("# state does not survive between runs (1 worker, the engine's image)\n");
    CHECK(run(pool1,
              "globalThis.leak = 42; var v = 1; Object.prototype.polluted = 1;"
              "Array.prototype.at = () => 0; delete globalThis.JSON; console.log(typeof leak)",
              NULL, NULL, &r) == 0);
    CHECK(strcmp(r.out.data, "number\n") == 0 && r.from_image);
    pl_js_result_free(&r);
    CHECK(run(pool1, probe, NULL, NULL, &r) == 0);
    CHECK(strcmp(r.out.data, "undefined undefined undefined 6 object\n") == 0 && r.from_image);
    pl_js_result_free(&r);
    /* A cap below the image: that run makes its own engine (and is out of
     * memory at 1 MiB), and the image serves the next run again. */
    tiny.memory_bytes = 1u << 20;
    CHECK(run(pool1, "globalThis.leak = 1", NULL, &tiny, &r) == 0);
    CHECK(r.out_of_memory && !r.from_image);
    pl_js_result_free(&r);
    CHECK(run(pool1, "globalThis.leak = 1; Object.prototype.polluted = 1", NULL, NULL, &r) == 0);
    CHECK(r.exit_code == 0 && r.from_image);
    pl_js_result_free(&r);
    CHECK(run(pool1, probe, NULL, NULL, &r) == 0);
    CHECK(strcmp(r.out.data, "undefined undefined undefined 6 object\n") == 0 && r.from_image);
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

/* ---- what the guest can reach, under the real filter ------------------------ */

/* Every host function the QuickJS guest can call (the worker links only
 * what it imports: fd_write, clock_time_get, fd_close, fd_seek,
 * fd_fdstat_get and the two broker calls, which test_broker_* cover) and
 * every host path a run takes (memory growth, out of memory, the deadline
 * timer), on one worker: none may trip the worker's seccomp filter, which
 * would kill it and make the run an infrastructure error.  Math.random is
 * seeded for each run by the worker (getrandom, in its filter), not by the
 * guest, which imports no random call.  (Sanitizer builds log instead of
 * killing; the release build is the check.) */
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
CASE(test_guest_reach_under_seccomp, g_pool1)
CASE(test_soak, g_pool1)

int main(void) {
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
        cmocka_unit_test(case_test_guest_reach_under_seccomp),
        cmocka_unit_test(case_test_soak),
    };
    return cmocka_run_group_tests_name("js_pool", tests, setup, teardown);
}
