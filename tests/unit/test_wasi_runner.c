/*
 * test_wasi_runner.c - cmocka tests for the wasi_runner library.
 *
 * Runs the modules built by tests/build_modules.sh (directory given as
 * argv[1]) through pl_wasi_validate()/pl_wasi_run() and checks every
 * behaviour the daemon relies on: argv/stdin/stdout/stderr plumbing,
 * proc_exit, traps (unreachable, out-of-bounds, call stack exhaustion),
 * the memory cap, output caps, refused modules, EFAULT on bad guest
 * pointers, repeated runs without growth, the deadline-by-SIGKILL pattern
 * and host allocation failure under RLIMIT_AS.
 *
 * PL_TEST_REPEAT (environment) sets the number of runs in the repeated-run
 * test (default 1000); use a small value under valgrind.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../src/core/fileread.h"
#include "../../src/providers/wasm/wasi_runner.h"
#include "../../src/providers/wasm/worker_seccomp.h"

static const char *g_modules_dir = PL_WASI_MODULES_DIR;

/* True when running under valgrind (its preload library is in LD_PRELOAD):
 * RSS figures are then meaningless, and valgrind aborts instead of
 * throwing std::bad_alloc. */
static bool under_valgrind(void) {
    const char *p = getenv("LD_PRELOAD");
    return p != NULL && strstr(p, "vgpreload") != NULL;
}

static const struct pl_wasi_limits k_limits = {
    .memory_bytes = 64u << 20,
    .stdout_cap = 1u << 20,
    .stderr_cap = 64u << 10,
};

/* The test modules are tens of KiB; pl_file_read() allocates the bound. */
#define MAX_MODULE_BYTES (1u << 20)

/* A module's bytes, loaded from g_modules_dir. */
struct blob {
    uint8_t *data;
    size_t len;
};

static struct blob load(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.wasm", g_modules_dir, name);
    char *data;
    struct blob b = {NULL, 0};
    int rc = pl_file_read(path, MAX_MODULE_BYTES, &data, &b.len);
    if (rc < 0)
        fail_msg("%s %s", path, pl_file_problem(rc));
    b.data = (uint8_t *)data;
    return b;
}

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

/* Validate `name`; expects refusal with `reason` in the message. */
static void expect_refused(const char *name, const char *reason) {
    struct blob b = load(name);
    struct pl_error err = {0};
    int rc = pl_wasi_validate(b.data, b.len, &k_limits, &err);
    assert_int_equal(rc, PL_WASI_ERR_MODULE);
    if (strstr(err.message, reason) == NULL)
        fail_msg("%s: reason \"%s\" does not contain \"%s\"", name, err.message, reason);
    assert_null(strchr(err.message, '\n'));
    assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
    /* pl_wasi_run refuses the same module the same way. */
    struct pl_wasi_result r;
    struct pl_error err2 = {0};
    rc = pl_wasi_run(b.data, b.len, NULL, 0, NULL, 0, &k_limits, &r, &err2);
    assert_int_equal(rc, PL_WASI_ERR_MODULE);
    assert_string_equal(err.message, err2.message);
    assert_null(r.out.data);
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

static void test_refused_modules(void **state) {
    (void)state;
    expect_refused("envfoo", "import env.foo is not allowed");
    expect_refused("garbage", "invalid module: bad magic value");
    expect_refused("badsig", "wasi_snapshot_preview1.fd_write has the wrong signature");
    expect_refused("bigmem", "initial memory of 2000 pages");
    expect_refused("nomem", "does not export a memory named \"memory\"");
    expect_refused("nostart", "does not export a \"_start\" function");
    expect_refused("manylocals", "10001 params and locals");
}

static void test_validate_edge_inputs(void **state) {
    (void)state;
    struct pl_error err = {0};
    static const uint8_t header_only[] = {0, 'a', 's', 'm', 1, 0, 0, 0};
    assert_int_equal(pl_wasi_validate(NULL, 0, &k_limits, &err), PL_WASI_ERR_MODULE);
    assert_int_equal(pl_wasi_validate(NULL, 5, &k_limits, &err), PL_WASI_ERR_ARGS);
    assert_int_equal(pl_wasi_validate(header_only, 8, NULL, &err), PL_WASI_ERR_ARGS);
    /* An empty module is valid wasm but has no _start. */
    assert_int_equal(pl_wasi_validate(header_only, 8, &k_limits, &err), PL_WASI_ERR_MODULE);
    assert_non_null(strstr(err.message, "_start"));
    assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
    /* err may be NULL. */
    assert_int_equal(pl_wasi_validate(header_only, 8, &k_limits, NULL), PL_WASI_ERR_MODULE);
    /* A DataCount section claiming ~25 million segments with no data
     * section: refused before the parser reserves memory for them (found
     * by fuzz_wasi_validate as a multi-gigabyte allocation). */
    static const uint8_t huge_data_count[] = {
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01, 0x60, 0x00, 0x00, 0x0c,
        0x0c, 0xff, 0xff, 0x84, 0x0c, 0x0c, 0x0c, 0x0c, 0x03, 0x02, 0x01, 0x00, 0x05, 0x04, 0x01,
        0x00, 0xac, 0x02, 0x07, 0x06, 0x13, 0x02, 0x6d, 0x65, 0x6d, 0x6f, 0x72, 0x79, 0x02, 0x00,
        0x06, 0x5f, 0x73, 0x74, 0x61, 0x72, 0x74, 0x00, 0x60, 0x00, 0x00, 0x03, 0x02, 0x01, 0x00,
        0x05, 0x04, 0x01, 0x00, 0x00, 0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b};
    assert_int_equal(pl_wasi_validate(huge_data_count, sizeof huge_data_count, &k_limits, &err),
                     PL_WASI_ERR_MODULE);
    assert_non_null(strstr(err.message, "data count"));
    /* Every truncation of a real module is refused, never accepted. */
    struct blob b = load("hello");
    for (size_t n = 0; n < b.len; n += 97)
        assert_int_not_equal(pl_wasi_validate(b.data, n, &k_limits, &err), 0);
    free(b.data);
}

static void test_instantiation_failure(void **state) {
    (void)state;
    struct blob b = load("dataoob");
    struct pl_error err = {0};
    struct pl_wasi_result r;
    assert_int_equal(pl_wasi_validate(b.data, b.len, &k_limits, &err), 0);
    int rc = pl_wasi_run(b.data, b.len, NULL, 0, NULL, 0, &k_limits, &r, &err);
    assert_int_equal(rc, PL_WASI_ERR_INSTANTIATE);
    assert_non_null(strstr(err.message, "instantiation failed"));
    assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
    assert_null(r.out.data);
    free(b.data);
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
        struct rlimit rl;
        long vm_kib = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (f == NULL || fscanf(f, "%ld", &vm_kib) != 1)
            _exit(10);
        fclose(f);
        vm_kib *= sysconf(_SC_PAGESIZE) / 1024;
        rl.rlim_cur = rl.rlim_max = (rlim_t)(vm_kib + 200 * 1024) * 1024;
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(11);
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

/* ---- module bounds -------------------------------------------------------- */

/* A growable byte buffer for building modules. */
struct wbuf {
    uint8_t *p;
    size_t len, cap;
};

static void wb_put(struct wbuf *b, const void *d, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        assert_non_null(b->p);
        b->cap = cap;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void wb_byte(struct wbuf *b, uint8_t v) {
    wb_put(b, &v, 1);
}

static void wb_uleb(struct wbuf *b, uint64_t v) {
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        wb_byte(b, (uint8_t)(byte | (v ? 0x80 : 0)));
    } while (v);
}

static void wb_name(struct wbuf *b, const char *s) {
    wb_uleb(b, strlen(s));
    wb_put(b, s, strlen(s));
}

/* Append section `id` with `body` to m, and empty body. */
static void wb_section(struct wbuf *m, uint8_t id, struct wbuf *body) {
    wb_byte(m, id);
    wb_uleb(m, body->len);
    wb_put(m, body->p, body->len);
    body->len = 0;
}

/* A valid module with "memory", "_start" and the counts asked for; each
 * zero count takes its default.  tests/wasi/wasmgen.py builds the same. */
struct modspec {
    uint32_t types;         /* function types in all (default 2) */
    uint32_t imports;       /* wasi_snapshot_preview1.proc_exit imports */
    uint32_t funcs;         /* defined functions (default 1: _start) */
    uint32_t tables;        /* tables, each of table_initial elements */
    uint32_t table_initial; /* elements per table */
    uint32_t globals;       /* i32 globals */
    uint32_t exports;       /* exports in all (default 2: memory, _start) */
    uint32_t empty_elems;   /* empty passive element segments */
    uint32_t elems[2];      /* items in up to two more passive segments */
    uint32_t datas;         /* empty passive data segments */
    bool data_count;        /* a DataCount section saying `datas` */
    uint32_t locals;        /* i32 locals of _start */
    bool split_locals;      /* one declaration per local instead of one in all */
};

static struct blob build_module(const struct modspec *s) {
    struct wbuf m = {0}, b = {0};
    uint32_t types = s->types ? s->types : 2, funcs = s->funcs ? s->funcs : 1;
    uint32_t exports = s->exports ? s->exports : 2;
    static const uint8_t magic[] = {0, 'a', 's', 'm', 1, 0, 0, 0};
    wb_put(&m, magic, sizeof magic);
    /* 1 type: () -> () and (i32) -> (), then copies of the first. */
    wb_uleb(&b, types);
    for (uint32_t i = 0; i < types; i++)
        wb_put(&b, i == 1 ? "\x60\x01\x7f\x00" : "\x60\x00\x00", i == 1 ? 4 : 3);
    wb_section(&m, 1, &b);
    if (s->imports) { /* 2 import */
        wb_uleb(&b, s->imports);
        for (uint32_t i = 0; i < s->imports; i++) {
            wb_name(&b, "wasi_snapshot_preview1");
            wb_name(&b, "proc_exit");
            wb_put(&b, "\x00\x01", 2);
        }
        wb_section(&m, 2, &b);
    }
    wb_uleb(&b, funcs); /* 3 function */
    for (uint32_t i = 0; i < funcs; i++)
        wb_byte(&b, 0);
    wb_section(&m, 3, &b);
    if (s->tables) { /* 4 table */
        wb_uleb(&b, s->tables);
        for (uint32_t i = 0; i < s->tables; i++) {
            wb_put(&b, "\x70\x00", 2);
            wb_uleb(&b, s->table_initial);
        }
        wb_section(&m, 4, &b);
    }
    wb_put(&b, "\x01\x00\x01", 3); /* 5 memory: one, of one page */
    wb_section(&m, 5, &b);
    if (s->globals) { /* 6 global */
        wb_uleb(&b, s->globals);
        for (uint32_t i = 0; i < s->globals; i++)
            wb_put(&b, "\x7f\x00\x41\x00\x0b", 5);
        wb_section(&m, 6, &b);
    }
    wb_uleb(&b, exports); /* 7 export */
    wb_name(&b, "memory");
    wb_put(&b, "\x02\x00", 2);
    wb_name(&b, "_start");
    wb_byte(&b, 0);
    wb_uleb(&b, s->imports);
    for (uint32_t i = 2; i < exports; i++) {
        char name[16];
        snprintf(name, sizeof name, "e%u", i);
        wb_name(&b, name);
        wb_byte(&b, 0);
        wb_uleb(&b, s->imports);
    }
    wb_section(&m, 7, &b);
    uint32_t nelem = s->empty_elems + (s->elems[0] > 0) + (s->elems[1] > 0);
    if (nelem) { /* 9 element: passive, funcref, items = _start */
        wb_uleb(&b, nelem);
        for (uint32_t i = 0; i < s->empty_elems; i++)
            wb_put(&b, "\x01\x00\x00", 3);
        for (int k = 0; k < 2; k++) {
            if (!s->elems[k])
                continue;
            wb_put(&b, "\x01\x00", 2);
            wb_uleb(&b, s->elems[k]);
            for (uint32_t i = 0; i < s->elems[k]; i++)
                wb_uleb(&b, s->imports);
        }
        wb_section(&m, 9, &b);
    }
    if (s->data_count) { /* 12 DataCount */
        wb_uleb(&b, s->datas);
        wb_section(&m, 12, &b);
    }
    wb_uleb(&b, funcs); /* 10 code: empty bodies, _start's with its locals */
    struct wbuf body = {0};
    if (s->locals && s->split_locals) {
        wb_uleb(&body, s->locals);
        for (uint32_t i = 0; i < s->locals; i++)
            wb_put(&body, "\x01\x7f", 2);
    } else if (s->locals) {
        wb_byte(&body, 1);
        wb_uleb(&body, s->locals);
        wb_byte(&body, 0x7f);
    } else {
        wb_byte(&body, 0);
    }
    wb_byte(&body, 0x0b);
    wb_uleb(&b, body.len);
    wb_put(&b, body.p, body.len);
    free(body.p);
    for (uint32_t i = 1; i < funcs; i++)
        wb_put(&b, "\x02\x00\x0b", 3);
    wb_section(&m, 10, &b);
    if (s->datas) { /* 11 data: passive, empty */
        wb_uleb(&b, s->datas);
        for (uint32_t i = 0; i < s->datas; i++)
            wb_put(&b, "\x01\x00", 2);
        wb_section(&m, 11, &b);
    }
    free(b.p);
    return (struct blob){m.p, m.len};
}

struct bound_case {
    const char *name;
    struct modspec at, past;
    const char *why; /* in the refusal of `past` */
};

static const struct bound_case k_bounds[] = {
    {"PL_WASI_MAX_TYPES",
     {.types = PL_WASI_MAX_TYPES},
     {.types = PL_WASI_MAX_TYPES + 1},
     "module has 100001 function types; at most 100000 are allowed"},
    {"PL_WASI_MAX_FUNCS",
     {.funcs = PL_WASI_MAX_FUNCS},
     {.funcs = PL_WASI_MAX_FUNCS + 1},
     "module has 100001 functions (imported and defined); at most 100000"},
    {"PL_WASI_MAX_FUNCS (imported count)",
     {.imports = 1, .funcs = PL_WASI_MAX_FUNCS - 1},
     {.imports = 1, .funcs = PL_WASI_MAX_FUNCS},
     "module has 100001 functions (imported and defined)"},
    {"PL_WASI_MAX_IMPORTS",
     {.imports = PL_WASI_MAX_IMPORTS},
     {.imports = PL_WASI_MAX_IMPORTS + 1},
     "module has 1001 imports; at most 1000"},
    {"PL_WASI_MAX_EXPORTS",
     {.exports = PL_WASI_MAX_EXPORTS},
     {.exports = PL_WASI_MAX_EXPORTS + 1},
     "module has 10001 exports; at most 10000"},
    {"PL_WASI_MAX_GLOBALS",
     {.globals = PL_WASI_MAX_GLOBALS},
     {.globals = PL_WASI_MAX_GLOBALS + 1},
     "module has 10001 globals; at most 10000"},
    {"PL_WASI_MAX_TABLES",
     {.tables = PL_WASI_MAX_TABLES},
     {.tables = PL_WASI_MAX_TABLES + 1},
     "module has 17 tables; at most 16"},
    {"PL_WASI_MAX_TABLE_ELEMS",
     {.tables = 1, .table_initial = PL_WASI_MAX_TABLE_ELEMS},
     {.tables = 1, .table_initial = PL_WASI_MAX_TABLE_ELEMS + 1},
     "table of 262145 initial elements exceeds the cap of 262144"},
    {"PL_WASI_MAX_ELEM_SEGMENTS",
     {.empty_elems = PL_WASI_MAX_ELEM_SEGMENTS},
     {.empty_elems = PL_WASI_MAX_ELEM_SEGMENTS + 1},
     "module has 10001 element segments; at most 10000"},
    {"PL_WASI_MAX_ELEMS",
     {.elems = {PL_WASI_MAX_ELEMS / 2, PL_WASI_MAX_ELEMS / 2}},
     {.elems = {PL_WASI_MAX_ELEMS / 2, PL_WASI_MAX_ELEMS / 2 + 1}},
     "module has 1048577 elements (in all element segments); at most 1048576"},
    {"PL_WASI_MAX_DATA_SEGMENTS",
     {.datas = PL_WASI_MAX_DATA_SEGMENTS},
     {.datas = PL_WASI_MAX_DATA_SEGMENTS + 1},
     "module has 10001 data segments; at most 10000"},
    {"PL_WASI_MAX_DATA_SEGMENTS (DataCount)",
     {.datas = PL_WASI_MAX_DATA_SEGMENTS, .data_count = true},
     {.datas = PL_WASI_MAX_DATA_SEGMENTS + 1, .data_count = true},
     "module has 10001 data segments (DataCount section)"},
    {"PL_WASI_MAX_FUNC_LOCALS",
     {.locals = PL_WASI_MAX_FUNC_LOCALS},
     {.locals = PL_WASI_MAX_FUNC_LOCALS + 1},
     "function 0 has 4097 params and locals (at most 4096 allowed)"},
    {"PL_WASI_MAX_FUNC_LOCALS (one declaration each)",
     {.locals = PL_WASI_MAX_FUNC_LOCALS, .split_locals = true},
     {.locals = PL_WASI_MAX_FUNC_LOCALS + 1, .split_locals = true},
     "function 0 has 4097 params and locals (at most 4096 allowed)"},
};

/* Each bound: a module at it passes validation and runs; one past it is
 * refused, with the bound in the reason. */
static void test_module_bounds_at_and_past(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_bounds / sizeof k_bounds[0]; i++) {
        const struct bound_case *c = &k_bounds[i];
        struct pl_error err = {0};
        struct blob at = build_module(&c->at), past = build_module(&c->past);
        int rc = pl_wasi_validate(at.data, at.len, &k_limits, &err);
        if (rc != PL_WASI_OK)
            fail_msg("%s: the module at the bound was refused: %s", c->name, err.message);
        struct pl_wasi_result r;
        rc = pl_wasi_run(at.data, at.len, NULL, 0, NULL, 0, &k_limits, &r, &err);
        if (rc != PL_WASI_OK || r.exit_code != 0 || r.trapped)
            fail_msg("%s: the module at the bound did not run: %d %s", c->name, rc, err.message);
        pl_wasi_result_free(&r);
        rc = pl_wasi_validate(past.data, past.len, &k_limits, &err);
        if (rc != PL_WASI_ERR_MODULE || strstr(err.message, c->why) == NULL)
            fail_msg("%s: one past the bound: %d \"%s\"", c->name, rc, err.message);
        free(at.data);
        free(past.data);
    }
}

/* Far past the bounds, in a child whose address space is only 64 MiB above
 * what it uses: refused by the counting pass, never an allocation failure
 * (before the bounds, wabt reserved about 1 GB for two million functions). */
static void test_module_bounds_checked_before_allocation(void **state) {
    (void)state;
    if (under_valgrind())
        skip();
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* ASan's shadow memory makes an RLIMIT_AS cap meaningless */
#endif
    /* The last: one function of 3.9M local declarations (117 MB in the
     * interpreter's reader without the bound). */
    static const struct modspec huge[] = {
        {.funcs = 2000000},   {.types = 2500000},
        {.globals = 1500000}, {.empty_elems = 2500000},
        {.elems = {7000000}}, {.datas = 3500000},
        {.exports = 700000},  {.locals = 3900000, .split_locals = true},
    };
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        struct blob b = build_module(&huge[i]);
        assert_true(b.len <= (8u << 20)); /* the API's module size limit */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            long vm_kib = 0;
            FILE *f = fopen("/proc/self/statm", "r");
            if (f == NULL || fscanf(f, "%ld", &vm_kib) != 1)
                _exit(10);
            fclose(f);
            vm_kib *= sysconf(_SC_PAGESIZE) / 1024;
            struct rlimit rl;
            rl.rlim_cur = rl.rlim_max = (rlim_t)(vm_kib + 64 * 1024) * 1024;
            if (setrlimit(RLIMIT_AS, &rl) != 0)
                _exit(11);
            struct pl_error err = {0};
            int rc = pl_wasi_validate(b.data, b.len, &k_limits, &err);
            _exit(rc == PL_WASI_ERR_MODULE && strstr(err.message, "at most") != NULL ? 0
                  : rc == PL_WASI_ERR_HOST                                           ? 12
                                                                                     : 13);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("module %zu (%zu bytes): child status %d", i, b.len, status);
        free(b.data);
    }
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
    if (argc > 1)
        g_modules_dir = argv[1];
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
        cmocka_unit_test(test_refused_modules),
        cmocka_unit_test(test_validate_edge_inputs),
        cmocka_unit_test(test_instantiation_failure),
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
        cmocka_unit_test(test_module_bounds_at_and_past),
        cmocka_unit_test(test_module_bounds_checked_before_allocation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
