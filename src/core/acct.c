/* SPDX-License-Identifier: Apache-2.0 */
/*
 * acct.c: the kernel's CPU and memory accounting files, read and parsed
 * (acct.h).
 */
#include "acct.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int pl_acct_read(const char *path, char *buf, size_t len) {
    if (len < 2)
        return -EINVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    for (;;) {
        ssize_t k = read(fd, buf + n, len - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = -errno;
            close(fd);
            return e;
        }
        if (k == 0)
            break;
        n += (size_t)k;
        if (n == len - 1) {
            char extra;
            ssize_t more = read(fd, &extra, 1);
            close(fd);
            buf[n] = '\0';
            return more > 0 ? -EFBIG : 0;
        }
    }
    close(fd);
    buf[n] = '\0';
    return 0;
}

/* A decimal number at *p (digits only, at most 19 of them: no overflow),
 * *p past it.  0, or -EINVAL. */
static int decimal(const char **p, uint64_t *ret) {
    const char *s = *p;
    uint64_t v = 0;
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9') {
        if (n == 19)
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[n] - '0');
        n++;
    }
    if (n == 0)
        return -EINVAL;
    *p = s + n;
    *ret = v;
    return 0;
}

int pl_acct_number(const char *text, uint64_t *ret) {
    const char *p = text;
    uint64_t v;
    if (decimal(&p, &v) < 0)
        return -EINVAL;
    if (*p == '\n')
        p++;
    if (*p != '\0')
        return -EINVAL;
    *ret = v;
    return 0;
}

/* The value of the line "key N" in a flat keyed file (cpu.stat,
 * cpuacct.stat): 0, or -EINVAL when no line has it or its value does not
 * parse. */
static int keyed(const char *text, const char *key, uint64_t *ret) {
    size_t kl = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
            const char *p = line + kl + 1;
            uint64_t v;
            if (decimal(&p, &v) < 0 || (*p != '\n' && *p != '\0'))
                return -EINVAL;
            *ret = v;
            return 0;
        }
        line = eol ? eol + 1 : NULL;
    }
    return -EINVAL;
}

int pl_acct_cpu_stat(const char *text, uint64_t *ret_user_us, uint64_t *ret_system_us) {
    uint64_t u, s;
    if (keyed(text, "user_usec", &u) < 0 || keyed(text, "system_usec", &s) < 0)
        return -EINVAL;
    *ret_user_us = u;
    *ret_system_us = s;
    return 0;
}

/* Clock ticks of hz per second as microseconds, saturating. */
static uint64_t ticks_us(uint64_t ticks, long hz) {
    uint64_t per = 1000000u / (uint64_t)hz;
    return ticks > UINT64_MAX / per ? UINT64_MAX : ticks * per;
}

int pl_acct_cpuacct_stat(const char *text, long hz, uint64_t *ret_user_us,
                         uint64_t *ret_system_us) {
    uint64_t u, s;
    if (hz <= 0 || hz > 1000000 || keyed(text, "user", &u) < 0 || keyed(text, "system", &s) < 0)
        return -EINVAL;
    *ret_user_us = ticks_us(u, hz);
    *ret_system_us = ticks_us(s, hz);
    return 0;
}

int pl_acct_proc_stat(const char *text, long hz, uint64_t *ret_user_us, uint64_t *ret_system_us) {
    if (hz <= 0 || hz > 1000000)
        return -EINVAL;
    /* "pid (comm) state ppid ...": the name may hold spaces and ')'. */
    const char *p = strrchr(text, ')');
    if (!p)
        return -EINVAL;
    p++;
    uint64_t v[2];
    for (int field = 3; field <= 15; field++) {
        if (*p != ' ')
            return -EINVAL;
        p++;
        if (field >= 14) {
            if (decimal(&p, &v[field - 14]) < 0)
                return -EINVAL;
        } else {
            while (*p && *p != ' ' && *p != '\n')
                p++;
        }
    }
    if (*p != ' ' && *p != '\n')
        return -EINVAL;
    *ret_user_us = ticks_us(v[0], hz);
    *ret_system_us = ticks_us(v[1], hz);
    return 0;
}

int pl_acct_proc_hwm(const char *text, uint64_t *ret_bytes) {
    const char *line = text;
    while (line && strncmp(line, "VmHWM:", 6) != 0) {
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    if (!line)
        return -EINVAL;
    const char *p = line + 6;
    while (*p == ' ' || *p == '\t')
        p++;
    uint64_t kb;
    if (decimal(&p, &kb) < 0 || strncmp(p, " kB", 3) != 0 || (p[3] != '\n' && p[3] != '\0'))
        return -EINVAL;
    *ret_bytes = kb > UINT64_MAX / 1024u ? UINT64_MAX : kb * 1024u;
    return 0;
}
