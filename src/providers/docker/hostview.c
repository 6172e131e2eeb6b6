/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hostview.c: the host's own view of a container (hostview.h).
 */
#include "hostview.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "../../core/acct.h"
#include "../../core/buf.h"
#include "../../core/clock.h"

extern char **environ;

/* Read a small /proc or /sys file whole; -errno. */
static int read_text(const char *path, struct pl_buf *b, size_t max) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char chunk[4096];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = -errno;
            close(fd);
            return e;
        }
        if (n == 0)
            break;
        if (b->len + (size_t)n > max || pl_buf_append(b, chunk, (size_t)n) < 0) {
            close(fd);
            return -EFBIG;
        }
    }
    close(fd);
    if (pl_buf_append(b, "", 0) < 0)
        return -ENOMEM;
    return 0;
}

/* Unescape mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s) {
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

int pl_hostview_init(struct pl_hostview *hv, const char *instance, bool runsc,
                     const char *runtime_path, struct pl_error *err) {
    memset(hv, 0, sizeof(*hv));
    hv->runsc = runsc;
    snprintf(hv->runtime_path, sizeof(hv->runtime_path), "%s", runtime_path ? runtime_path : "");
    snprintf(hv->parent, sizeof(hv->parent), "/plimsoll-%.100s", instance);
    struct pl_buf mi = {0};
    if (read_text("/proc/self/mountinfo", &mi, 4u << 20) < 0) {
        pl_buf_free(&mi);
        return pl_error_set(err, PL_REASON_INTERNAL, "cannot read /proc/self/mountinfo");
    }
    char v2_root[256] = "";
    char *save = NULL;
    for (char *line = strtok_r(mi.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        /* id parent major:minor root mountpoint options [optional...] - fstype source super */
        char *f[32] = {0};
        int nf = 0;
        char *fs = NULL;
        for (char *t = strtok_r(line, " ", &fs); t && nf < 32; t = strtok_r(NULL, " ", &fs))
            f[nf++] = t;
        int dash = -1;
        for (int i = 6; i < nf; i++)
            if (strcmp(f[i], "-") == 0) {
                dash = i;
                break;
            }
        if (dash < 0 || dash + 3 >= nf)
            continue;
        const char *fstype = f[dash + 1], *super = f[dash + 3];
        if (strcmp(fstype, "cgroup") == 0 && strcmp(f[3], "/") == 0) {
            bool pids = false, memory = false, cpuacct = false;
            char opts[512];
            snprintf(opts, sizeof(opts), "%s", super);
            char *os = NULL;
            for (char *o = strtok_r(opts, ",", &os); o; o = strtok_r(NULL, ",", &os)) {
                pids = pids || strcmp(o, "pids") == 0;
                memory = memory || strcmp(o, "memory") == 0;
                cpuacct = cpuacct || strcmp(o, "cpuacct") == 0;
            }
            if ((pids && !hv->cg_root[0]) || (memory && !hv->mem_root[0]) ||
                (cpuacct && !hv->cpu_root[0]))
                unescape(f[4]);
            if (pids && !hv->cg_root[0])
                snprintf(hv->cg_root, sizeof(hv->cg_root), "%s", f[4]);
            if (memory && !hv->mem_root[0])
                snprintf(hv->mem_root, sizeof(hv->mem_root), "%s", f[4]);
            if (cpuacct && !hv->cpu_root[0])
                snprintf(hv->cpu_root, sizeof(hv->cpu_root), "%s", f[4]);
        } else if (strcmp(fstype, "cgroup2") == 0 && !v2_root[0] && strcmp(f[3], "/") == 0) {
            unescape(f[4]);
            snprintf(v2_root, sizeof(v2_root), "%s", f[4]);
        }
    }
    pl_buf_free(&mi);
    if (!hv->cg_root[0] && v2_root[0]) {
        hv->v2 = true;
        snprintf(hv->cg_root, sizeof(hv->cg_root), "%s", v2_root);
        snprintf(hv->mem_root, sizeof(hv->mem_root), "%s", v2_root);
        snprintf(hv->cpu_root, sizeof(hv->cpu_root), "%s", v2_root);
    }
    if (!hv->cg_root[0])
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=docker: no cgroup hierarchy with the pids "
                            "controller (v1) or cgroup2 is mounted: the host-side proof that a "
                            "run left nothing needs one");
    return 0;
}

void pl_hostview_cgroup(const struct pl_hostview *hv, const char *id, char *buf, size_t len) {
    snprintf(buf, len, "%s/%.80s", hv->parent, id);
}

int pl_hostview_cgroup_of_pid(const struct pl_hostview *hv, pid_t pid, char *buf, size_t len) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    struct pl_buf b = {0};
    int r = read_text(path, &b, 64u << 10);
    if (r < 0) {
        pl_buf_free(&b);
        return r == -ENOENT ? -ESRCH : r;
    }
    /* Lines "hierarchy-id:controllers:path"; v2's is "0::path". */
    int found = -ENOENT;
    char *save = NULL;
    for (char *line = strtok_r(b.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1, *p = c2 + 1;
        bool match = false;
        if (hv->v2) {
            match = strcmp(line, "0") == 0 && *ctrls == '\0';
        } else {
            char cs[256];
            snprintf(cs, sizeof(cs), "%s", ctrls);
            char *cs_save = NULL;
            for (char *c = strtok_r(cs, ",", &cs_save); c; c = strtok_r(NULL, ",", &cs_save))
                if (strcmp(c, "pids") == 0)
                    match = true;
        }
        if (match) {
            snprintf(buf, len, "%s", p);
            found = 0;
            break;
        }
    }
    pl_buf_free(&b);
    return found;
}

static int read_ids(const char *path, pid_t **ret, size_t *ret_n) {
    *ret = NULL;
    *ret_n = 0;
    struct pl_buf b = {0};
    int r = read_text(path, &b, 16u << 20);
    if (r < 0) {
        pl_buf_free(&b);
        return r;
    }
    size_t n = 0, cap = 0;
    pid_t *v = NULL;
    for (char *p = b.data; p && *p;) {
        char *end = NULL;
        long x = strtol(p, &end, 10);
        if (end == p)
            break;
        if (x > 0) {
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 64;
                pid_t *nv = realloc(v, nc * sizeof(*nv));
                if (!nv) {
                    free(v);
                    pl_buf_free(&b);
                    return -ENOMEM;
                }
                v = nv;
                cap = nc;
            }
            v[n++] = (pid_t)x;
        }
        p = end;
        while (*p == '\n' || *p == ' ')
            p++;
    }
    pl_buf_free(&b);
    *ret = v;
    *ret_n = n;
    return 0;
}

/* The threads of cgroup rel, or (v2 without threaded mode) its processes:
 * *ret_whole says so. */
static int cgroup_ids(const struct pl_hostview *hv, const char *rel, pid_t **ret, size_t *ret_n,
                      bool *ret_whole) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s%s/%s", hv->cg_root, rel, hv->v2 ? "cgroup.threads" : "tasks");
    *ret_whole = false;
    int r = read_ids(path, ret, ret_n);
    if (r == -EOPNOTSUPP && hv->v2) { /* a domain cgroup without threaded mode */
        snprintf(path, sizeof(path), "%s%s/cgroup.procs", hv->cg_root, rel);
        *ret_whole = true;
        r = read_ids(path, ret, ret_n);
    }
    return r;
}

int pl_hostview_threads(const struct pl_hostview *hv, const char *rel, pid_t **ret, size_t *ret_n) {
    bool whole;
    return cgroup_ids(hv, rel, ret, ret_n, &whole);
}

/* Whether thread tid of thread group leader has begun to exit (the
 * kernel's PF_EXITING, in /proc/<leader>/task/<tid>/stat's flags) or is
 * gone: it can never run a user instruction again. */
static bool thread_exiting(pid_t leader, pid_t tid) {
    char path[96];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)leader, (int)tid);
    struct pl_buf b = {0};
    int r = read_text(path, &b, 4096);
    if (r < 0) {
        pl_buf_free(&b);
        return r == -ENOENT || r == -ESRCH;
    }
    /* After the name's last ')': state ppid pgrp session tty_nr tpgid flags. */
    const char *p = b.data ? strrchr(b.data, ')') : NULL;
    unsigned long flags = 0;
    bool read = p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) == 1;
    pl_buf_free(&b);
    return read && (flags & 0x4ul) != 0; /* PF_EXITING */
}

/* Whether every thread of process pid has begun to exit (or is gone). */
static bool group_exiting(pid_t pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT || errno == ESRCH;
    bool all = true;
    struct dirent *e;
    while (all && (e = readdir(d)))
        if (e->d_name[0] != '.')
            all = thread_exiting(pid, (pid_t)strtol(e->d_name, NULL, 10));
    closedir(d);
    return all;
}

/* The thread group of thread tid, from /proc/<tid>/status; -1 when gone. */
static pid_t tgid_of(pid_t tid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
    struct pl_buf b = {0};
    pid_t tgid = -1;
    if (read_text(path, &b, 64u << 10) == 0) {
        const char *t = strstr(b.data, "\nTgid:");
        if (t)
            tgid = (pid_t)strtol(t + 6, NULL, 10);
    }
    pl_buf_free(&b);
    return tgid;
}

int pl_hostview_procs(const struct pl_hostview *hv, const char *rel, pid_t **ret, size_t *ret_n) {
    pid_t *t = NULL;
    size_t n = 0;
    int r = pl_hostview_threads(hv, rel, &t, &n);
    if (r < 0)
        return r;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        pid_t g = tgid_of(t[i]);
        if (g <= 0)
            continue; /* ended between the two reads */
        bool seen = false;
        for (size_t j = 0; j < k && !seen; j++)
            seen = t[j] == g;
        if (!seen)
            t[k++] = g;
    }
    *ret = t;
    *ret_n = k;
    return 0;
}

/* What a kill that timed out left: how many, and one of them by name and
 * state (a thread in D state is what a SIGKILL cannot end at once). */
static void log_survivor(const char *rel, size_t living, pid_t tid, unsigned timeout_ms) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
    struct pl_buf b = {0};
    char comm[32] = "?", state = '?';
    if (read_text(path, &b, 4096) == 0 && b.data) {
        const char *open = strchr(b.data, '(');
        const char *close = strrchr(b.data, ')');
        if (open && close && close > open) {
            snprintf(comm, sizeof(comm), "%.*s", (int)(close - open - 1), open + 1);
            if (close[1] == ' ' && close[2])
                state = close[2];
        }
    }
    pl_buf_free(&b);
    fprintf(stderr,
            "plimsolld: docker: cgroup %s: %zu processes not exiting %u ms after SIGKILL, "
            "among them %d (%s, state %c)\n",
            rel, living, timeout_ms, (int)tid, comm, state);
}

int pl_hostview_kill_all(const struct pl_hostview *hv, const char *rel, unsigned timeout_ms,
                         bool exiting_is_gone, unsigned *ret_killed) {
    unsigned killed = 0;
    uint64_t nap = 250000; /* ns */
    uint64_t deadline = pl_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        pid_t *t = NULL;
        size_t n = 0;
        bool whole = false;
        int r = cgroup_ids(hv, rel, &t, &n, &whole);
        if (r == -ENOENT) {
            r = 0;
            n = 0;
        }
        if (r < 0) {
            if (ret_killed)
                *ret_killed = killed;
            return r;
        }
        /* kill() with any thread's id signals its whole thread group, so a
         * process whose main thread already exited dies too.  A SIGKILL is
         * delivered to a stopped or traced process as well.  One that has
         * begun to exit needs none (and, exiting_is_gone, counts as gone). */
        size_t living = 0;
        pid_t survivor = 0;
        for (size_t i = 0; i < n; i++) {
            if (exiting_is_gone && (whole ? group_exiting(t[i]) : thread_exiting(t[i], t[i])))
                continue;
            living++;
            survivor = t[i];
            if (kill(t[i], SIGKILL) == 0)
                killed++;
        }
        free(t);
        if (living == 0) {
            if (ret_killed)
                *ret_killed = killed;
            return 0;
        }
        if (pl_now_ns() >= deadline) {
            log_survivor(rel, living, survivor, timeout_ms);
            if (ret_killed)
                *ret_killed = killed;
            return -ETIMEDOUT;
        }
        /* A SIGKILLed process begins to exit at once and leaves its cgroup
         * within a millisecond or two (a gVisor sandbox's memory takes the
         * kernel tens of milliseconds): look again soon, then every 5 ms. */
        pl_sleep_ns(nap);
        if (nap < PL_MS(5))
            nap *= 2;
    }
}

long long pl_hostview_oom_kills(const struct pl_hostview *hv, const char *rel) {
    if (!hv->mem_root[0])
        return -ENOENT;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s%s/%s", hv->mem_root, rel,
             hv->v2 ? "memory.events" : "memory.oom_control");
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char line[128];
    long long n = -ENODATA;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "oom_kill ", 9) == 0) {
            char *end = NULL;
            errno = 0;
            long long v = strtoll(line + 9, &end, 10);
            if (errno == 0 && end != line + 9 && v >= 0)
                n = v;
            break;
        }
    fclose(f);
    return n;
}

/* cgroup rel's CPU time: v1 cpuacct's nanosecond counters, else its
 * ticks; v2 cpu.stat. */
static int cgroup_cpu(const struct pl_hostview *hv, const char *rel, uint64_t *user_us,
                      uint64_t *system_us) {
    if (!hv->cpu_root[0])
        return -ENOENT;
    char path[PATH_MAX], text[PL_ACCT_TEXT_MAX];
    int r;
    if (hv->v2) {
        snprintf(path, sizeof(path), "%s%s/cpu.stat", hv->cpu_root, rel);
        r = pl_acct_read(path, text, sizeof(text));
        return r < 0 ? r : pl_acct_cpu_stat(text, user_us, system_us);
    }
    uint64_t u_ns, s_ns;
    snprintf(path, sizeof(path), "%s%s/cpuacct.usage_user", hv->cpu_root, rel);
    r = pl_acct_read(path, text, sizeof(text));
    if (r == 0 && pl_acct_number(text, &u_ns) == 0) {
        snprintf(path, sizeof(path), "%s%s/cpuacct.usage_sys", hv->cpu_root, rel);
        r = pl_acct_read(path, text, sizeof(text));
        if (r == 0 && pl_acct_number(text, &s_ns) == 0) {
            *user_us = u_ns / 1000u;
            *system_us = s_ns / 1000u;
            return 0;
        }
    }
    if (r == -ENOENT) {
        /* Gone, or a kernel without the split counters: cpuacct.stat. */
        snprintf(path, sizeof(path), "%s%s", hv->cpu_root, rel);
        struct stat st;
        if (stat(path, &st) < 0)
            return -ENOENT;
    }
    snprintf(path, sizeof(path), "%s%s/cpuacct.stat", hv->cpu_root, rel);
    r = pl_acct_read(path, text, sizeof(text));
    return r < 0 ? r : pl_acct_cpuacct_stat(text, sysconf(_SC_CLK_TCK), user_us, system_us);
}

int pl_hostview_usage(const struct pl_hostview *hv, const char *rel, int peak_fd,
                      struct pl_hostview_usage *ret) {
    memset(ret, 0, sizeof(*ret));
    int r = cgroup_cpu(hv, rel, &ret->user_us, &ret->system_us);
    if (r < 0)
        return r;
    char text[PL_ACCT_TEXT_MAX];
    uint64_t peak = 0;
    if (peak_fd >= 0) {
        ssize_t n = pread(peak_fd, text, sizeof(text) - 1, 0);
        if (n > 0) {
            text[n] = '\0';
            if (pl_acct_number(text, &peak) == 0)
                ret->peak_bytes = peak;
        }
        return 0;
    }
    if (!hv->mem_root[0])
        return 0;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s%s/%s", hv->mem_root, rel,
             hv->v2 ? "memory.peak" : "memory.max_usage_in_bytes");
    if (pl_acct_read(path, text, sizeof(text)) == 0 && pl_acct_number(text, &peak) == 0)
        ret->peak_bytes = peak;
    return 0;
}

int pl_hostview_peak_reset(const struct pl_hostview *hv, const char *rel, int *ret_fd) {
    *ret_fd = -1;
    if (!hv->mem_root[0])
        return -ENOENT;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s%s/%s", hv->mem_root, rel,
             hv->v2 ? "memory.peak" : "memory.max_usage_in_bytes");
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* v1 takes "0"; v2 any non-empty text (this fd's own peak). */
    ssize_t n;
    do
        n = write(fd, "0\n", 2);
    while (n < 0 && errno == EINTR);
    if (n != 2) {
        int e = n < 0 ? -errno : -EIO;
        close(fd);
        return e;
    }
    if (hv->v2)
        *ret_fd = fd;
    else
        close(fd);
    return 0;
}

int pl_hostview_wait_empty(const struct pl_hostview *hv, const char *rel, unsigned timeout_ms) {
    uint64_t deadline = pl_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        pid_t *t = NULL;
        size_t n = 0;
        int r = pl_hostview_threads(hv, rel, &t, &n);
        free(t);
        if (r == -ENOENT || (r == 0 && n == 0))
            return 0;
        if (pl_now_ns() >= deadline)
            return r < 0 ? r : -ETIMEDOUT;
        pl_sleep_ns(PL_MS(5));
    }
}

static void runtime_state_path(const struct pl_hostview *hv, const char *id, char *buf,
                               size_t len) {
    if (hv->runsc)
        snprintf(buf, len, "%s/%.80s_sandbox:%.80s.state", hv->runtime_root, id, id);
    else
        snprintf(buf, len, "%s/%.80s", hv->runtime_root, id);
}

int pl_hostview_find_runtime_root(struct pl_hostview *hv, const char *id, struct pl_error *err) {
    static const char *const roots[] = {
        "/run/docker/runtime-runc/moby",  "/var/run/docker/runtime-runc/moby",
        "/run/docker/runtime-runsc/moby", "/var/run/docker/runtime-runsc/moby",
        "/run/containerd/runc/moby",      "/run/containerd/runsc/moby",
    };
    for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
        snprintf(hv->runtime_root, sizeof(hv->runtime_root), "%s", roots[i]);
        char p[PATH_MAX];
        runtime_state_path(hv, id, p, sizeof(p));
        struct stat st;
        if (lstat(p, &st) == 0)
            return 0;
    }
    hv->runtime_root[0] = '\0';
    return pl_error_set(err, PL_REASON_INTERNAL,
                        "SANDBOX_PROVIDER=docker: cannot find where the runtime keeps the state "
                        "of a running container (looked under /run/docker/runtime-runc/moby and "
                        "the other usual places): the host-side proof needs it");
}

bool pl_hostview_runtime_state(const struct pl_hostview *hv, const char *id) {
    if (!hv->runtime_root[0])
        return false;
    char p[PATH_MAX];
    runtime_state_path(hv, id, p, sizeof(p));
    struct stat st;
    return lstat(p, &st) == 0;
}

static void remove_flat_dir(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char sub[PATH_MAX];
            snprintf(sub, sizeof(sub), "%.3800s/%.255s", path, e->d_name);
            unlink(sub);
        }
        closedir(d);
    }
    rmdir(path);
}

void pl_hostview_remove_runtime_state(const struct pl_hostview *hv, const char *id) {
    if (!hv->runtime_root[0])
        return;
    char p[PATH_MAX];
    runtime_state_path(hv, id, p, sizeof(p));
    if (hv->runsc) {
        unlink(p);
        snprintf(p, sizeof(p), "%s/%.80s_sandbox:%.80s.lock", hv->runtime_root, id, id);
        unlink(p);
    } else {
        remove_flat_dir(p);
    }
}

void pl_hostview_remove_cgroup(const struct pl_hostview *hv, const char *rel) {
    char path[PATH_MAX];
    if (hv->v2) {
        snprintf(path, sizeof(path), "%s%s", hv->cg_root, rel);
        rmdir(path);
        return;
    }
    /* v1: the runtime made the cgroup in every hierarchy, side by side. */
    char base[256];
    snprintf(base, sizeof(base), "%s", hv->cg_root);
    char *slash = strrchr(base, '/');
    if (!slash || slash == base)
        return;
    *slash = '\0';
    DIR *d = opendir(base);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%.200s/%.100s%s", base, e->d_name, rel);
        rmdir(path);
    }
    closedir(d);
}

static bool hex_id(const char *s, size_t n) {
    if (n != 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

struct idset {
    char (*ids)[65];
    size_t n, cap;
};

static void idset_add(struct idset *s, const char *id) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->ids[i], id) == 0)
            return;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        char(*nv)[65] = realloc(s->ids, nc * sizeof(*nv));
        if (!nv)
            return;
        s->ids = nv;
        s->cap = nc;
    }
    memcpy(s->ids[s->n], id, 64);
    s->ids[s->n][64] = '\0';
    s->n++;
}

/* Whether runc's state for id names a cgroup under the instance's parent. */
static bool runc_state_ours(const struct pl_hostview *hv, const char *root, const char *id) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s/state.json", root, id);
    json_t *j = json_load_file(p, 0, NULL);
    bool ours = false;
    const char *cp = json_string_value(
        json_object_get(json_object_get(json_object_get(j, "config"), "cgroups"), "path"));
    size_t pl = strlen(hv->parent);
    if (cp && strncmp(cp, hv->parent, pl) == 0 && cp[pl] == '/')
        ours = true;
    json_decref(j);
    return ours;
}

unsigned pl_hostview_leftovers(const struct pl_hostview *hv, void (*fn)(const char *id, void *ud),
                               void *ud) {
    struct idset s = {0};
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s%s", hv->cg_root, hv->parent);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (hex_id(e->d_name, strlen(e->d_name)))
                idset_add(&s, e->d_name);
        closedir(d);
    }
    if (hv->runtime_root[0] && !hv->runsc && (d = opendir(hv->runtime_root))) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (hex_id(e->d_name, strlen(e->d_name)) &&
                runc_state_ours(hv, hv->runtime_root, e->d_name))
                idset_add(&s, e->d_name);
        closedir(d);
    }
    for (size_t i = 0; i < s.n; i++)
        fn(s.ids[i], ud);
    free(s.ids);
    return (unsigned)s.n;
}

int pl_hostview_runsc_ps(const struct pl_hostview *hv, const char *id, long **ret, size_t *ret_n,
                         struct pl_error *err) {
    *ret = NULL;
    *ret_n = 0;
    if (!hv->runsc || !hv->runtime_root[0])
        return pl_error_set(err, PL_REASON_INTERNAL, "runsc ps: not a runsc sandbox");
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "runsc ps: pipe: %s", strerror(errno));
    char root_arg[300], cid[81];
    snprintf(root_arg, sizeof(root_arg), "--root=%s", hv->runtime_root);
    snprintf(cid, sizeof(cid), "%s", id);
    char *argv[] = {(char *)hv->runtime_path, root_arg, (char *)"ps", (char *)"--format",
                    (char *)"json",           cid,      NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3); /* nothing of the daemon's */
    pid_t child = -1;
    int r = posix_spawn(&child, hv->runtime_path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    if (r != 0) {
        close(pfd[0]);
        return pl_error_set(err, PL_REASON_INTERNAL, "runsc ps: %s", strerror(r));
    }
    struct pl_buf out = {0};
    uint64_t deadline = pl_now_ns() + 5000000000ull;
    bool over = false;
    for (;;) {
        uint64_t now = pl_now_ns();
        if (now >= deadline) {
            over = true;
            break;
        }
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        int pr = poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        char chunk[4096];
        ssize_t n = read(pfd[0], chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (out.len + (size_t)n > (1u << 20) || pl_buf_append(&out, chunk, (size_t)n) < 0) {
            over = true;
            break;
        }
    }
    close(pfd[0]);
    if (over)
        kill(child, SIGKILL);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    if (over || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        pl_buf_free(&out);
        return pl_error_set(err, PL_REASON_INTERNAL, "runsc ps %.12s: %s", id,
                            over ? "no answer within 5 s" : "failed");
    }
    json_t *j = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
    pl_buf_free(&out);
    if (!json_is_array(j)) {
        json_decref(j);
        return pl_error_set(err, PL_REASON_INTERNAL, "runsc ps %.12s: not a JSON list", id);
    }
    size_t n = json_array_size(j);
    long *v = calloc(n ? n : 1, sizeof(*v));
    if (!v) {
        json_decref(j);
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(j, i);
        if (!json_is_integer(e)) {
            free(v);
            json_decref(j);
            return pl_error_set(err, PL_REASON_INTERNAL, "runsc ps %.12s: not a list of pids", id);
        }
        v[i] = (long)json_integer_value(e);
    }
    json_decref(j);
    *ret = v;
    *ret_n = n;
    return 0;
}

int pl_hostview_runsc_signal(const struct pl_hostview *hv, const char *id, long pid,
                             const char *sig) {
    if (!hv->runsc || !hv->runtime_root[0])
        return -1;
    char root_arg[300], cid[81], pid_arg[32];
    snprintf(root_arg, sizeof(root_arg), "--root=%s", hv->runtime_root);
    snprintf(cid, sizeof(cid), "%s", id);
    snprintf(pid_arg, sizeof(pid_arg), "--pid=%ld", pid);
    char *argv[] = {
        (char *)hv->runtime_path, root_arg, (char *)"kill", pid_arg, cid, (char *)sig, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    pid_t child = -1;
    int r = posix_spawn(&child, hv->runtime_path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0)
        return -1;
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

long pl_hostview_ns_pid(pid_t pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    struct pl_buf b = {0};
    long last = -1;
    if (read_text(path, &b, 64u << 10) == 0) {
        const char *t = strstr(b.data, "\nNSpid:");
        if (t) {
            t += 7;
            for (;;) {
                char *end = NULL;
                long v = strtol(t, &end, 10);
                if (end == t)
                    break;
                last = v;
                t = end;
                while (*t == ' ' || *t == '\t')
                    t++;
                if (*t == '\n' || !*t)
                    break;
            }
        }
    }
    pl_buf_free(&b);
    return last;
}

long pl_hostview_gid(pid_t pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    struct pl_buf b = {0};
    long gid = -1;
    if (read_text(path, &b, 64u << 10) == 0) {
        const char *t = strstr(b.data, "\nGid:");
        if (t)
            gid = strtol(t + 5, NULL, 10);
    }
    pl_buf_free(&b);
    return gid;
}

unsigned long long pl_hostview_start_time(pid_t pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    struct pl_buf b = {0};
    unsigned long long start = 0;
    if (read_text(path, &b, 64u << 10) == 0) {
        const char *rp = strrchr(b.data, ')');
        /* After ") " come fields 3, 4, ...: the start time is field 22. */
        int field = 2;
        for (const char *p = rp ? rp + 1 : NULL; p && *p; p++) {
            if (*p == ' ') {
                field++;
                if (field == 22) {
                    start = strtoull(p + 1, NULL, 10);
                    break;
                }
            }
        }
    }
    pl_buf_free(&b);
    return start;
}
