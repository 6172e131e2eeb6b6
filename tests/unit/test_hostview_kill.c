/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_hostview_kill.c: pl_hostview_kill_all against a real cgroup of this
 * host (root only: it makes a cgroup under the pids hierarchy).  With
 * exiting_is_gone it returns once every thread of the cgroup has begun to
 * exit, and only after killing them: a process of two threads, moved into
 * the cgroup, is dead (a zombie, our child) when it returns.  Without, it
 * returns with the cgroup empty.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/providers/docker/hostview.h"

static void *sleeper(void *arg) {
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

/* A child that waits on fd until told, then starts a second thread and
 * says so on ready. */
static pid_t two_threads(int go, int ready) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char c;
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves nothing */
        if (read(go, &c, 1) != 1)
            _exit(1);
        pthread_t t;
        if (pthread_create(&t, NULL, sleeper, NULL) != 0)
            _exit(1);
        if (write(ready, "r", 1) != 1)
            _exit(1);
        sleeper(NULL);
    }
    return pid;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

/* Whether every thread of pid has PF_EXITING in its flags (or is gone). */
static bool all_exiting(pid_t pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return true;
    bool all = true;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            char stat[320];
            snprintf(stat, sizeof(stat), "/proc/%d/task/%s/stat", (int)pid, e->d_name);
            FILE *f = fopen(stat, "re");
            char line[1024] = "";
            if (!f)
                continue;
            if (!fgets(line, sizeof(line), f))
                line[0] = 0;
            fclose(f);
            const char *p = strrchr(line, ')');
            unsigned long flags = 0;
            assert_non_null(p);
            assert_int_equal(sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags), 1);
            all = all && (flags & 0x4ul);
        }
    closedir(d);
    return all;
}

static void kill_a_cgroup(void **state) {
    (void)state;
    if (geteuid() != 0) {
        print_message("not root: no cgroup can be made here\n");
        skip();
    }
    struct pl_hostview hv;
    struct pl_error err = {0};
    char instance[40];
    snprintf(instance, sizeof(instance), "unit-%d", (int)getpid());
    assert_int_equal(pl_hostview_init(&hv, instance, false, NULL, &err), 0);
    for (int round = 0; round < 2; round++) {
        bool exiting_is_gone = round == 0;
        char rel[200], dir[600], procs[700];
        snprintf(rel, sizeof(rel), "%s/c%d", hv.parent, round);
        snprintf(dir, sizeof(dir), "%s%s", hv.cg_root, hv.parent);
        assert_true(mkdir(dir, 0755) == 0 || errno == EEXIST);
        snprintf(dir, sizeof(dir), "%s%s", hv.cg_root, rel);
        assert_int_equal(mkdir(dir, 0755), 0);
        int go[2], ready[2];
        assert_int_equal(pipe(go), 0);
        assert_int_equal(pipe(ready), 0);
        pid_t pid = two_threads(go[0], ready[1]);
        char text[32];
        snprintf(text, sizeof(text), "%d\n", (int)pid);
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
        write_file(procs, text);
        char c;
        assert_int_equal(write(go[1], "g", 1), 1);
        assert_int_equal(read(ready[0], &c, 1), 1);

        pid_t *t = NULL;
        size_t n = 0;
        assert_int_equal(pl_hostview_threads(&hv, rel, &t, &n), 0);
        free(t);
        assert_int_equal(n, 2);
        assert_false(all_exiting(pid));

        unsigned killed = 0;
        assert_int_equal(pl_hostview_kill_all(&hv, rel, 5000, exiting_is_gone, &killed), 0);
        assert_true(killed >= 1);
        /* Our child: dead, not reaped yet (every thread has begun to exit). */
        assert_true(all_exiting(pid));
        if (!exiting_is_gone) {
            assert_int_equal(pl_hostview_threads(&hv, rel, &t, &n), 0);
            free(t);
            assert_int_equal(n, 0);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        /* Nothing left: nothing killed. */
        assert_int_equal(pl_hostview_kill_all(&hv, rel, 5000, exiting_is_gone, &killed), 0);
        assert_int_equal(killed, 0);
        for (int i = 0; i < 2; i++) {
            close(go[i]);
            close(ready[i]);
        }
        assert_int_equal(rmdir(dir), 0);
    }
    char parent[600];
    snprintf(parent, sizeof(parent), "%s%s", hv.cg_root, hv.parent);
    assert_int_equal(rmdir(parent), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kill_a_cgroup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
