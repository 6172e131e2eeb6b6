/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_acct.c: the readers of the kernel's accounting files (acct.h): each
 * parser on the text the kernel writes and on what it must refuse, then
 * this process's own /proc files; and, as root, a cgroup of this host
 * (hostview.h's pl_hostview_usage and pl_hostview_peak_reset): a child
 * that burns CPU and touches memory in it is counted, and a reset peak
 * starts again from what the cgroup holds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/core/acct.h"
#include "../../src/providers/docker/hostview.h"

static void numbers(void **state) {
    (void)state;
    uint64_t v = 1;
    assert_int_equal(pl_acct_number("80486400\n", &v), 0);
    assert_int_equal(v, 80486400);
    assert_int_equal(pl_acct_number("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(pl_acct_number("18446744073709551615\n", &v), -EINVAL); /* 20 digits */
    assert_int_equal(pl_acct_number("9999999999999999999\n", &v), 0);
    assert_int_equal(pl_acct_number("", &v), -EINVAL);
    assert_int_equal(pl_acct_number("\n", &v), -EINVAL);
    assert_int_equal(pl_acct_number("max\n", &v), -EINVAL);
    assert_int_equal(pl_acct_number("-1\n", &v), -EINVAL);
    assert_int_equal(pl_acct_number("12 34\n", &v), -EINVAL);
    assert_int_equal(pl_acct_number("12\n\n", &v), -EINVAL);
}

static void cpu_stat_v2(void **state) {
    (void)state;
    uint64_t u = 0, s = 0;
    const char *text = "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n"
                       "core_sched.force_idle_usec 0\nnr_periods 0\nnr_throttled 0\n"
                       "throttled_usec 0\n";
    assert_int_equal(pl_acct_cpu_stat(text, &u, &s), 0);
    assert_int_equal(u, 1000000);
    assert_int_equal(s, 234567);
    /* The last line without its newline. */
    assert_int_equal(pl_acct_cpu_stat("user_usec 5\nsystem_usec 6", &u, &s), 0);
    assert_int_equal(u + s, 11);
    /* A key's prefix is not the key; a missing key or value is refused. */
    assert_int_equal(pl_acct_cpu_stat("user_usecs 5\nsystem_usec 6\n", &u, &s), -EINVAL);
    assert_int_equal(pl_acct_cpu_stat("usage_usec 5\nsystem_usec 6\n", &u, &s), -EINVAL);
    assert_int_equal(pl_acct_cpu_stat("user_usec \nsystem_usec 6\n", &u, &s), -EINVAL);
    assert_int_equal(pl_acct_cpu_stat("user_usec 5x\nsystem_usec 6\n", &u, &s), -EINVAL);
    assert_int_equal(pl_acct_cpu_stat("", &u, &s), -EINVAL);
}

static void cpuacct_stat_v1(void **state) {
    (void)state;
    uint64_t u = 0, s = 0;
    assert_int_equal(pl_acct_cpuacct_stat("user 25\nsystem 30\n", 100, &u, &s), 0);
    assert_int_equal(u, 250000);
    assert_int_equal(s, 300000);
    assert_int_equal(pl_acct_cpuacct_stat("user 25\nsystem 30\n", 250, &u, &s), 0);
    assert_int_equal(u, 100000);
    assert_int_equal(pl_acct_cpuacct_stat("user 25\n", 100, &u, &s), -EINVAL);
    assert_int_equal(pl_acct_cpuacct_stat("user 25\nsystem 30\n", 0, &u, &s), -EINVAL);
    /* Ticks past what microseconds hold saturate. */
    assert_int_equal(pl_acct_cpuacct_stat("user 9999999999999999999\nsystem 0\n", 100, &u, &s), 0);
    assert_true(u == UINT64_MAX);
}

static void proc_stat(void **state) {
    (void)state;
    uint64_t u = 0, s = 0;
    /* A name with spaces and ')' (the process chose it): counted from the
     * last ')'.  Fields 14 and 15 are 31 and 7. */
    const char *text = "4242 (a) b) (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 31 7 0 0 20 0 1 0 "
                       "123 4096 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n";
    assert_int_equal(pl_acct_proc_stat(text, 100, &u, &s), 0);
    assert_int_equal(u, 310000);
    assert_int_equal(s, 70000);
    assert_int_equal(pl_acct_proc_stat("4242 (x) S 1 2 3\n", 100, &u, &s), -EINVAL);
    assert_int_equal(pl_acct_proc_stat("4242 x S 1 2 3 4 5 6 7 8 9 10 11 12 13\n", 100, &u, &s),
                     -EINVAL);
    assert_int_equal(pl_acct_proc_stat("1 (x) S 1 1 1 0 -1 0 0 0 0 0 a 7 0\n", 100, &u, &s),
                     -EINVAL);
    /* This process: its own counters read. */
    char buf[PL_ACCT_TEXT_MAX];
    assert_int_equal(pl_acct_read("/proc/self/stat", buf, sizeof(buf)), 0);
    assert_int_equal(pl_acct_proc_stat(buf, sysconf(_SC_CLK_TCK), &u, &s), 0);
}

static void proc_hwm(void **state) {
    (void)state;
    uint64_t b = 0;
    assert_int_equal(pl_acct_proc_hwm("Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    6300 kB\n"
                                      "VmRSS:\t 6000 kB\n",
                                      &b),
                     0);
    assert_int_equal(b, 6300u * 1024u);
    assert_int_equal(pl_acct_proc_hwm("Name:\tx\nVmRSS:\t 6000 kB\n", &b), -EINVAL);
    assert_int_equal(pl_acct_proc_hwm("VmHWM:\t 6000 MB\n", &b), -EINVAL);
    assert_int_equal(pl_acct_proc_hwm("VmHWM:\t kB\n", &b), -EINVAL);
    /* This process: its peak holds what it touched. */
    size_t len = 32u << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 1, len);
    char buf[PL_ACCT_TEXT_MAX];
    assert_int_equal(pl_acct_read("/proc/self/status", buf, sizeof(buf)), 0);
    assert_int_equal(pl_acct_proc_hwm(buf, &b), 0);
    assert_true(b >= len);
    munmap(p, len);
}

static void reads(void **state) {
    (void)state;
    char buf[16];
    assert_int_equal(pl_acct_read("/nonexistent/plimsoll", buf, sizeof(buf)), -ENOENT);
    /* Longer than the buffer: refused, not cut. */
    assert_int_equal(pl_acct_read("/proc/self/status", buf, sizeof(buf)), -EFBIG);
}

/* A child that burns about 300 ms of CPU and touches 48 MiB, then waits. */
static pid_t burner(int go, int done) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char c;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (read(go, &c, 1) != 1)
            _exit(1);
        struct timespec t0, t;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
        volatile unsigned long x = 0;
        do {
            for (int i = 0; i < 100000; i++)
                x += (unsigned long)i;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 300000000L);
        size_t len = 48u << 20;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            _exit(1);
        memset(p, 1, len);
        munmap(p, len);
        if (write(done, "d", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    return pid;
}

static void join(const char *dir, pid_t pid) {
    char path[1300], text[32];
    snprintf(path, sizeof(path), "%.1200s/cgroup.procs", dir);
    snprintf(text, sizeof(text), "%d\n", (int)pid);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void a_cgroup(void **state) {
    (void)state;
    if (geteuid() != 0) {
        print_message("not root: no cgroup can be made here\n");
        skip();
    }
    struct pl_hostview hv;
    struct pl_error err = {0};
    char instance[40];
    snprintf(instance, sizeof(instance), "unit-acct-%d", (int)getpid());
    assert_int_equal(pl_hostview_init(&hv, instance, false, NULL, &err), 0);
    assert_true(hv.cpu_root[0] && hv.mem_root[0]);
    char rel[200];
    snprintf(rel, sizeof(rel), "%s/c", hv.parent);
    /* v1: the cgroup in the cpuacct and memory hierarchies; v2: once. */
    const char *roots[2] = {hv.cpu_root, hv.mem_root};
    int nroots = hv.v2 ? 1 : 2;
    char dirs[2][800];
    for (int i = 0; i < nroots; i++) {
        char parent[600];
        snprintf(parent, sizeof(parent), "%s%s", roots[i], hv.parent);
        assert_true(mkdir(parent, 0755) == 0 || errno == EEXIST);
        snprintf(dirs[i], sizeof(dirs[i]), "%s%s", roots[i], rel);
        assert_int_equal(mkdir(dirs[i], 0755), 0);
    }
    struct pl_hostview_usage u0, u1, u2;
    assert_int_equal(pl_hostview_usage(&hv, rel, -1, &u0), 0);
    assert_true(u0.user_us + u0.system_us == 0);

    int go[2], done[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(done), 0);
    pid_t pid = burner(go[0], done[1]);
    for (int i = 0; i < nroots; i++)
        join(dirs[i], pid);
    char c;
    assert_int_equal(write(go[1], "g", 1), 1);
    assert_int_equal(read(done[0], &c, 1), 1);

    assert_int_equal(pl_hostview_usage(&hv, rel, -1, &u1), 0);
    print_message("cgroup: user %llu us, system %llu us, peak %llu bytes\n",
                  (unsigned long long)u1.user_us, (unsigned long long)u1.system_us,
                  (unsigned long long)u1.peak_bytes);
    /* 300 ms of the child's CPU, counted in 10 ms ticks at worst. */
    assert_true(u1.user_us + u1.system_us >= 280000);
    assert_true(u1.peak_bytes >= 48u << 20);

    /* The peak reset: from what the cgroup holds now (the 48 MiB are
     * unmapped), well under the old peak. */
    int fd = -1;
    int r = pl_hostview_peak_reset(&hv, rel, &fd);
    if (!hv.v2)
        assert_int_equal(r, 0);
    if (r == 0) {
        assert_int_equal(pl_hostview_usage(&hv, rel, fd, &u2), 0);
        assert_true(u2.peak_bytes < u1.peak_bytes - (32u << 20));
        /* The CPU counters are not reset. */
        assert_true(u2.user_us + u2.system_us >= u1.user_us + u1.system_us);
    } else {
        print_message("memory.peak cannot be reset on this kernel (%d)\n", r);
    }
    if (fd >= 0)
        close(fd);

    kill(pid, SIGKILL);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    for (int i = 0; i < 2; i++) {
        close(go[i]);
        close(done[i]);
    }
    for (int i = 0; i < nroots; i++) {
        /* The cgroup empties once the killed child is reaped. */
        for (int tries = 0; rmdir(dirs[i]) != 0 && tries < 200; tries++)
            usleep(10000);
        char parent[600];
        snprintf(parent, sizeof(parent), "%s%s", roots[i], hv.parent);
        assert_int_equal(rmdir(parent), 0);
    }
    /* Gone: -ENOENT. */
    assert_int_equal(pl_hostview_usage(&hv, rel, -1, &u2), -ENOENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(numbers),         cmocka_unit_test(cpu_stat_v2),
        cmocka_unit_test(cpuacct_stat_v1), cmocka_unit_test(proc_stat),
        cmocka_unit_test(proc_hwm),        cmocka_unit_test(reads),
        cmocka_unit_test(a_cgroup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
