/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reports.c: the readers of plimsoll's in-sandbox helpers' reports
 * (reports.h).
 */
#include "reports.h"
#include <limits.h>

#include <stdio.h>
#include <string.h>

json_t *pl_docker_files_report(const char *out, size_t len, uint64_t total, size_t cap,
                               int exit_code, char *why, size_t wlen) {
    why[0] = '\0';
    if (total > cap || len > cap) {
        snprintf(why, wlen, "the sandbox's files report was oversized");
        return NULL;
    }
    const char *eol = len ? memchr(out, '\n', len) : NULL;
    if (!eol) {
        if (len)
            snprintf(why, wlen, "the sandbox's files report was torn (no end of line)");
        else
            snprintf(why, wlen, "the sandbox ended before it reported its files (exit %d)",
                     exit_code);
        return NULL;
    }
    if ((size_t)(eol - out) + 1 != len) {
        snprintf(why, wlen, "the sandbox's files report had bytes after it");
        return NULL;
    }
    size_t n = (size_t)(eol - out);
    json_t *j = n > 9 && memcmp(out, "PLIMSOLL ", 9) == 0
                    ? json_loadb(out + 9, n - 9, JSON_REJECT_DUPLICATES, NULL)
                    : NULL;
    if (!json_is_object(j) || !(json_is_string(json_object_get(j, "setup")) ||
                                json_is_string(json_object_get(j, "setup_failed")))) {
        json_decref(j);
        snprintf(why, wlen, "the sandbox's files report was unreadable");
        return NULL;
    }
    return j;
}

json_t *pl_docker_agent_report(const char *out, size_t len) {
    if (!out || len < 2 || out[len - 1] != '\n' || memchr(out, '\n', len - 1))
        return NULL;
    json_t *j = json_loadb(out, len - 1, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

void pl_last_line_feed(struct pl_last_line *l, const char *data, size_t len) {
    while (len > 0) {
        const char *eol = memchr(data, '\n', len);
        size_t n = eol ? (size_t)(eol - data) : len;
        if (!l->cur_over && n <= PL_LAST_LINE_MAX - l->cur_len) {
            memcpy(l->cur + l->cur_len, data, n);
            l->cur_len += n;
        } else {
            l->cur_over = true;
        }
        if (!eol)
            return;
        memcpy(l->line, l->cur, l->cur_len);
        l->line_len = l->cur_len;
        l->line_over = l->cur_over;
        l->have = true;
        l->cur_len = 0;
        l->cur_over = false;
        data += n + 1;
        len -= n + 1;
    }
}

json_t *pl_last_line_report(const struct pl_last_line *l) {
    if (!l->have || l->line_over || l->cur_len > 0 || l->cur_over || l->line_len == 0)
        return NULL;
    json_t *j = json_loadb(l->line, l->line_len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* A decimal number at *p (digits only, no leading zero, before end), into
 * *v: false when there is none or it overflows. */
static bool read_decimal(const char **p, const char *end, unsigned long long *v) {
    const char *q = *p;
    unsigned long long x = 0;
    if (q == end || *q < '0' || *q > '9' ||
        (*q == '0' && q + 1 < end && q[1] >= '0' && q[1] <= '9'))
        return false; /* none, or a leading zero */
    for (; q < end && *q >= '0' && *q <= '9'; q++) {
        if (x > (ULLONG_MAX - 9) / 10)
            return false;
        x = x * 10 + (unsigned)(*q - '0');
    }
    *p = q;
    *v = x;
    return true;
}

int pl_docker_runner_word(const char *word, size_t len, long *pids, unsigned long long *starts,
                          size_t max) {
    if (len == 0 || word[len - 1] != '\n' || memchr(word, '\n', len - 1))
        return -1;
    const char *p = word, *end = word + len - 1;
    size_t n = 0;
    while (p < end) {
        unsigned long long pid = 0, start = 0;
        if (n == max || !read_decimal(&p, end, &pid) || p == end || *p++ != ' ' ||
            !read_decimal(&p, end, &start) || pid < 2 || pid > LONG_MAX)
            return -1;
        if (p < end && (*p++ != ' ' || p == end))
            return -1; /* not one space between pairs, or one after the last */
        pids[n] = (long)pid;
        starts[n++] = start;
    }
    return n > 0 ? (int)n : -1;
}
