/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_wasi_runner.c - cmocka tests for the wasi_runner library's runs.
 *
 * Runs the modules built by tests/wasi/build_modules.sh (directory given
 * as argv[1]) through pl_wasi_validate()/pl_wasi_run() and checks every
 * behaviour of a run the daemon relies on: argv/stdin/stdout/stderr
 * plumbing, proc_exit and every exit status, traps (unreachable,
 * out-of-bounds, call stack exhaustion), the memory cap, output caps,
 * EFAULT on bad guest pointers, repeated runs without growth, the
 * deadline-by-SIGKILL pattern, host allocation failure under RLIMIT_AS,
 * and every WASI call, under the module worker's filter too.  What is
 * refused before a run is test_wasi_validate.c's.
 *
 * PL_TEST_REPEAT (environment) sets the number of runs in the repeated-run
 * test (default 1000); use a small value under valgrind.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/providers/wasm/common-worker/worker_seccomp.h"
#include "wasi_test.h"

/* Validate + run `name` with args and stdin; asserts the run succeeded. */
static void run(const char *name, const char *const *args, size_t nargs, const char *in,
                size_t in_len, const struct pl_wasi_limits *lim, struct pl_wasi_result *r) {
    struct blob b = load(name);
    struct pl_error err = {0};
    int rc = pl_wasi_validate(b.data, b.len, lim, &err);
    if (rc != 0)
        fail_msg("validate %s: %d %s", name, rc, err.message);
    rc = pl_wasi_run(b.data, b.len, args, nargs, in, in_len, lim, r, &err);
    if (rc != 0)
        fail_msg("run %s: %d %s", name, rc, err.message);
    free(b.data);
}

static void test_engine_version(void **state) {
    (void)state;
    assert_string_equal(pl_wasi_engine_version(),
                        "wabt interpreter 1.0.32 (WASI preview 1 subset)");
}

static void test_hello(void **state) {
    (void)state;
    struct pl_wasi_result r;
    run("hello", NULL, 0, NULL, 0, &k_limits, &r);
    assert_string_equal(r.out.data, "hello, world\n");
    assert_int_equal(r.out.len, 13);
    assert_int_equal(r.err.len, 0);
    assert_non_null(r.err.data);
    assert_int_equal(r.exit_code, 0);
    assert_false(r.trapped);
    assert_false(r.exited);
    assert_false(r.out.truncated);
    pl_wasi_result_free(&r);
    pl_wasi_result_free(&r); /* second free is harmless */
    pl_wasi_result_free(NULL);
}

static void test_args(void **state) {
    (void)state;
    const char *args[] = {"one", "two words", ""};
    struct pl_wasi_result r;
    run("args", args, 3, NULL, 0, &k_limits, &r);
    assert_string_equal(r.out.data, "argc=4\nargv[0]=module\nargv[1]=one\n"
                                    "argv[2]=two words\nargv[3]=\n");
    pl_wasi_result_free(&r);
}

static void test_echo_stdin(void **state) {
    (void)state;
    /* 300 KB of binary, including NUL bytes. */
    size_t n = 300000;
    char *in = malloc(n);
    assert_non_null(in);
    for (size_t i = 0; i < n; i++)
        in[i] = (char)(i * 7 + (i >> 8));
    struct pl_wasi_result r;
    run("echo", NULL, 0, in, n, &k_limits, &r);
    assert_int_equal(r.exit_code, 0);
    assert_int_equal(r.out.len, n);
    assert_memory_equal(r.out.data, in, n);
    assert_string_equal(r.err.data, "echoed 300000 bytes\n");
    pl_wasi_result_free(&r);
    /* No stdin at all: immediate end of file. */
    run("echo", NULL, 0, NULL, 0, &k_limits, &r);
    assert_int_equal(r.out.len, 0);
    assert_string_equal(r.err.data, "echoed 0 bytes\n");
    pl_wasi_result_free(&r);
    free(in);
}

static void test_proc_exit(void **state) {
    (void)state;
    struct pl_wasi_result r;
    run("exit3", NULL, 0, NULL, 0, &k_limits, &r);
    assert_int_equal(r.exit_code, 3);
    assert_true(r.exited);
    assert_false(r.trapped);
    assert_string_equal(r.out.data, "about to exit 3\n");
    assert_int_equal(r.err.len, 0);
    pl_wasi_result_free(&r);
}

static void test_trap_unreachable(void **state) {
    (void)state;
    struct pl_wasi_result r;
    run("trap", NULL, 0, NULL, 0, &k_limits, &r);
    assert_true(r.trapped);
    assert_int_equal(r.exit_code, 1);
    assert_string_equal(r.out.data, "before trap\n");
    assert_string_equal(r.err.data, "plimsoll: module trapped: unreachable executed\n");
    assert_string_equal(r.trap_message, "unreachable executed");
    pl_wasi_result_free(&r);
}

static void test_trap_oob_store(void **state) {
    (void)state;
    struct pl_wasi_result r;
    run("oob", NULL, 0, NULL, 0, &k_limits, &r);
    assert_true(r.trapped);
    assert_int_equal(r.exit_code, 1);
    assert_non_null(strstr(r.err.data, "plimsoll: module trapped: out of bounds memory access"));
    pl_wasi_result_free(&r);
}

static void test_trap_in_start_section(void **state) {
    (void)state;
    struct pl_wasi_result r;
    run("startsec", NULL, 0, NULL, 0, &k_limits, &r);
    assert_true(r.trapped);
    assert_string_equal(r.out.data, "in start\n");
    pl_wasi_result_free(&r);
}

static void test_memory_cap(void **state) {
    (void)state;
    struct pl_wasi_result r;
    run("grow", NULL, 0, NULL, 0, &k_limits, &r);
    print_message("      grow: %s", r.out.data);
    /* Starts at 2 pages, +16 per step: 1010 pages fit, 1026 do not. */
    assert_string_equal(r.out.data, "memory.grow returned -1 at 1010 pages (66191360 bytes)\n");
    assert_true(r.memory_bytes <= k_limits.memory_bytes);
    assert_false(r.out_of_memory); /* not observable with wabt (documented) */
    assert_int_equal(r.exit_code, 0);
    pl_wasi_result_free(&r);
    /* A smaller cap moves the failure point accordingly. */
    struct pl_wasi_limits small = k_limits;
    small.memory_bytes = 1u << 20;
    run("grow", NULL, 0, NULL, 0, &small, &r);
    assert_string_equal(r.out.data, "memory.grow returned -1 at 2 pages (131072 bytes)\n");
    pl_wasi_result_free(&r);
}

static void test_table_cap(void **state) {
    (void)state;
    struct pl_wasi_result r;
    run("tablegrow", NULL, 0, NULL, 0, &k_limits, &r);
    assert_true(r.exited);
    assert_int_equal(r.exit_code, 0); /* table.grow returned -1 */
    pl_wasi_result_free(&r);
}

/* Byte i of flood.wasm's output. */
static char flood_byte(size_t i) {
    return (char)('a' + (i % 23));
}

static void test_output_flood(void **state) {
    (void)state;
    struct pl_wasi_limits lim = k_limits;
    lim.stdout_cap = 1000003; /* deliberately not a multiple of the writes */
    struct pl_wasi_result r;
    run("flood", NULL, 0, NULL, 0, &lim, &r);
    assert_int_equal(r.exit_code, 0);
    assert_int_equal(r.out.len, lim.stdout_cap);
    assert_true(r.out.truncated);
    for (size_t i = 0; i < r.out.len; i++)
        if (r.out.data[i] != flood_byte(i))
            fail_msg("byte %zu differs", i);
    assert_int_equal(r.out.data[r.out.len], '\0');
    assert_string_equal(r.err.data, "wrote 10000000 bytes\n");
    assert_false(r.err.truncated);
    pl_wasi_result_free(&r);

    /* Zero caps: nothing kept, both flags set, the run still completes. */
    lim.stdout_cap = 0;
    lim.stderr_cap = 0;
    run("flood", NULL, 0, NULL, 0, &lim, &r);
    assert_int_equal(r.out.len, 0);
    assert_int_equal(r.err.len, 0);
    assert_true(r.out.truncated);
    assert_true(r.err.truncated);
    assert_int_equal(r.exit_code, 0);
    pl_wasi_result_free(&r);
}

static void test_trap_line_beyond_err_cap(void **state) {
    (void)state;
    struct pl_wasi_limits lim = k_limits;
    lim.stderr_cap = 0;
    struct pl_wasi_result r;
    run("trap", NULL, 0, NULL, 0, &lim, &r);
    assert_string_equal(r.err.data, "plimsoll: module trapped: unreachable executed\n");
    assert_false(r.err.truncated);
    pl_wasi_result_free(&r);
}

static void test_deep_recursion(void **state) {
    (void)state;
    struct pl_wasi_result r;
    run("stack", NULL, 0, NULL, 0, &k_limits, &r);
    assert_true(r.trapped);
    assert_string_equal(r.trap_message, "call stack exhausted");
    pl_wasi_result_free(&r);

    const char *shallow[] = {"1000"};
    run("recurse", shallow, 1, NULL, 0, &k_limits, &r);
    assert_false(r.trapped);
    assert_string_equal(r.out.data, "depth 1000 ok (1)\n");
    pl_wasi_result_free(&r);

    const char *deep[] = {"10000000"};
    run("recurse", deep, 1, NULL, 0, &k_limits, &r);
    assert_true(r.trapped);
    assert_string_equal(r.trap_message, "call stack exhausted");
    pl_wasi_result_free(&r);

    /* 4000 locals per frame: still traps, host memory stays bounded. */
    run("fatlocals", NULL, 0, NULL, 0, &k_limits, &r);
    assert_true(r.trapped);
    assert_string_equal(r.trap_message, "call stack exhausted");
    pl_wasi_result_free(&r);
}

static void test_bad_guest_pointers(void **state) {
    (void)state;
    static const uint32_t expected[] = {21, 21, 21, 28, 21, 21, 21, 21, 8, 0};
    const char *args[10];
    for (int i = 0; i < 10; i++)
        args[i] = "x";
    for (size_t c = 0; c < 10; c++) {
        struct pl_wasi_result r;
        run("badptr", args, c, "stdin", 5, &k_limits, &r);
        if (r.exit_code != expected[c])
            fail_msg("badptr case %zu: errno %u, expected %u", c, r.exit_code, expected[c]);
        assert_true(r.exited);
        assert_false(r.trapped);
        /* Only the all-valid case may have written anything. */
        assert_string_equal(r.out.data, c == 9 ? "x\n" : "");
        pl_wasi_result_free(&r);
    }
}

static void test_unknown_wasi_function(void **state) {
    (void)state;
    struct pl_wasi_result r;
    run("unknown", NULL, 0, NULL, 0, &k_limits, &r);
    assert_int_equal(r.exit_code, 52); /* ENOSYS */
    pl_wasi_result_free(&r);
}

/* Resident set size of this process in KiB (from /proc/self/statm). */
static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void test_repeated_runs_do_not_grow(void **state) {
    (void)state;
    const char *env = getenv("PL_TEST_REPEAT");
    int runs = env ? atoi(env) : 1000;
    struct blob b = load("hello");
    struct pl_error err = {0};
    /* Warm up allocator caches before the first measurement. */
    for (int i = 0; i < 20; i++) {
        struct pl_wasi_result r;
        assert_int_equal(pl_wasi_run(b.data, b.len, NULL, 0, NULL, 0, &k_limits, &r, &err), 0);
        pl_wasi_result_free(&r);
    }
    long before = rss_kib();
    for (int i = 0; i < runs; i++) {
        struct pl_wasi_result r;
        assert_int_equal(pl_wasi_validate(b.data, b.len, &k_limits, &err), 0);
        assert_int_equal(pl_wasi_run(b.data, b.len, NULL, 0, NULL, 0, &k_limits, &r, &err), 0);
        assert_int_equal(r.out.len, 13);
        pl_wasi_result_free(&r);
    }
    long after = rss_kib();
    print_message("      %d runs of hello: RSS %ld KiB -> %ld KiB (%+ld KiB)\n", runs, before,
                  after, after - before);
    free(b.data);
    if (!under_valgrind())
        assert_true(after - before < 1024);
}

/* The deployment pattern: run in a child, SIGKILL it at the deadline. */
static void test_deadline_by_kill(void **state) {
    (void)state;
    struct blob b = load("loop");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct pl_wasi_result r;
        struct pl_error err = {0};
        pl_wasi_run(b.data, b.len, NULL, 0, NULL, 0, &k_limits, &r, &err);
        _exit(0); /* never reached: the module loops forever */
    }
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, WNOHANG), 0); /* still spinning */
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    free(b.data);
}

/* A module that makes wabt's unbounded value stack grow, in a child whose
 * address space is capped: a result (host_exhausted, out_of_memory, exit
 * 1, the line on stderr), not a crash and not a refusal. */
static void test_host_oom_is_reported(void **state) {
    (void)state;
    if (under_valgrind())
        skip(); /* valgrind cannot throw std::bad_alloc */
#if defined(__SANITIZE_ADDRESS__)
    /* ASan's shadow memory makes an RLIMIT_AS cap meaningless; the release
     * build runs this test. */
    skip();
#endif
    struct blob b = load("opstack");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        cap_address_space(200);
        struct pl_wasi_result r;
        struct pl_error err = {0};
        int rc = pl_wasi_run(b.data, b.len, NULL, 0, NULL, 0, &k_limits, &r, &err);
        if (rc == PL_WASI_OK && r.host_exhausted && r.out_of_memory && r.exit_code == 1 &&
            !r.trapped &&
            strcmp(r.err.data,
                   "plimsoll: module stopped: the interpreter ran out of host memory\n") == 0)
            _exit(0);
        fprintf(stderr, "opstack: rc=%d trapped=%d exhausted=%d %s\n", rc, r.trapped,
                r.host_exhausted, err.message);
        _exit(12);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status))
        fail_msg("child died with signal %d", WTERMSIG(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    free(b.data);
}

/* ---- exit statuses ---------------------------------------------------- */

/* Every u32 a module can give proc_exit is its result, exactly; none means
 * "refused" (the worker's refusal is a frame of its own). */
static void test_exit_status_edges(void **state) {
    (void)state;
    static const char *const statuses[] = {
        "0",
        "1",
        "3",
        "124",
        "126",
        "127",
        "255",
        "256",
        "2147483647",
        "2147483648",
        "4294966296" /* -1000 */,
        "4294967295",
    };
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        const char *args[] = {statuses[i]};
        struct pl_wasi_result r;
        run("exitcode", args, 1, NULL, 0, &k_limits, &r);
        uint32_t want = (uint32_t)strtoul(statuses[i], NULL, 10);
        char line[64];
        snprintf(line, sizeof line, "exit %s\n", statuses[i]);
        if (r.exit_code != want)
            fail_msg("proc_exit(%s) gave %u", statuses[i], r.exit_code);
        assert_true(r.exited);
        assert_false(r.trapped);
        assert_false(r.host_exhausted);
        assert_string_equal(r.out.data, line);
        assert_string_equal(r.err.data, line);
        pl_wasi_result_free(&r);
    }
}

/* ---- every WASI preview 1 call ------------------------------------------ */

/* What wasicalls.c prints with stdin "in" and no arguments
 * (tests/wasi/modules/wasicalls.out, which tests/api reads too): each line
 * is the row of docs/providers/wasm-modules.md's WASI table for that call. */
static char *wasicalls_out(void) {
    static char *text;
    if (text == NULL) {
        FILE *f = fopen(PL_WASI_SOURCE_DIR "/modules/wasicalls.out", "r");
        static char buf[8192];
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        if (n == 0)
            fail_msg("cannot read %s/modules/wasicalls.out", PL_WASI_SOURCE_DIR);
        buf[n] = '\0';
        text = buf;
    }
    return text;
}

static void check_wasicalls(const struct pl_wasi_result *r) {
    assert_string_equal(r->out.data, wasicalls_out());
    assert_int_equal(r->err.len, 0);
    assert_true(r->exited);
    assert_int_equal(r->exit_code, 7);
}

static void test_every_wasi_call(void **state) {
    (void)state;
    struct pl_wasi_result r;
    run("wasicalls", NULL, 0, "in", 2, &k_limits, &r);
    check_wasicalls(&r);
    pl_wasi_result_free(&r);
}

/* Run wasicalls in a child under the module worker's seccomp filter (with
 * `flags`); returns the child's wait status.  The child exits 0 when the
 * output was exactly right, 1 when it was not. */
static int wasicalls_under_filter(unsigned flags) {
    struct blob b = load("wasicalls");
    const char *want = wasicalls_out();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct pl_wasi_result r;
        struct pl_error err = {0};
        if (pl_worker_seccomp(flags) != 0)
            _exit(2);
        int rc = pl_wasi_run(b.data, b.len, NULL, 0, "in", 2, &k_limits, &r, &err);
        _exit(rc == 0 && r.exit_code == 7 && strcmp(r.out.data, want) == 0 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    free(b.data);
    return status;
}

/* No WASI call kills the process that runs it: the module worker's filter
 * allows every system call the calls make (random_get -> getrandom,
 * clock_res_get -> clock_getres, CPU-time clocks -> clock_gettime).  In
 * sanitizer builds the filter logs instead of killing, so this is the
 * release build's check. */
static void test_every_wasi_call_under_the_worker_filter(void **state) {
    (void)state;
    int status = wasicalls_under_filter(PL_SECCOMP_WASI_CALLS);
    if (WIFSIGNALED(status))
        fail_msg("the filter killed the module's process (signal %d)", WTERMSIG(status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* The same module under the JavaScript worker's list (no WASI extras) is
 * killed: the check above can fail, and the JavaScript worker does not
 * carry getrandom or clock_getres for a guest that cannot call them. */
static void test_wasi_calls_need_the_module_filter(void **state) {
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* the filter logs instead of killing in sanitizer builds */
#endif
    int status = wasicalls_under_filter(0);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGSYS);
}

static void test_bad_arguments(void **state) {
    (void)state;
    struct blob b = load("hello");
    struct pl_wasi_result r;
    struct pl_error err = {0};
    assert_int_equal(pl_wasi_run(b.data, b.len, NULL, 0, NULL, 0, NULL, &r, &err),
                     PL_WASI_ERR_ARGS);
    assert_int_equal(pl_wasi_run(b.data, b.len, NULL, 0, NULL, 0, &k_limits, NULL, &err),
                     PL_WASI_ERR_ARGS);
    assert_int_equal(pl_wasi_run(b.data, b.len, NULL, 2, NULL, 0, &k_limits, &r, &err),
                     PL_WASI_ERR_ARGS);
    const char *with_null[] = {"a", NULL};
    assert_int_equal(pl_wasi_run(b.data, b.len, with_null, 2, NULL, 0, &k_limits, &r, &err),
                     PL_WASI_ERR_ARGS);
    free(b.data);
}

int main(int argc, char **argv) {
    modules_dir_from(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_version),
        cmocka_unit_test(test_hello),
        cmocka_unit_test(test_args),
        cmocka_unit_test(test_echo_stdin),
        cmocka_unit_test(test_proc_exit),
        cmocka_unit_test(test_trap_unreachable),
        cmocka_unit_test(test_trap_oob_store),
        cmocka_unit_test(test_trap_in_start_section),
        cmocka_unit_test(test_memory_cap),
        cmocka_unit_test(test_table_cap),
        cmocka_unit_test(test_output_flood),
        cmocka_unit_test(test_trap_line_beyond_err_cap),
        cmocka_unit_test(test_deep_recursion),
        cmocka_unit_test(test_bad_guest_pointers),
        cmocka_unit_test(test_unknown_wasi_function),
        cmocka_unit_test(test_repeated_runs_do_not_grow),
        cmocka_unit_test(test_deadline_by_kill),
        cmocka_unit_test(test_host_oom_is_reported),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_exit_status_edges),
        cmocka_unit_test(test_every_wasi_call),
        cmocka_unit_test(test_every_wasi_call_under_the_worker_filter),
        cmocka_unit_test(test_wasi_calls_need_the_module_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
