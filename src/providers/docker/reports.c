/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reports.c: the readers of plimsoll's in-sandbox helpers' reports
 * (reports.h).
 */
#include "reports.h"

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

json_t *pl_docker_agent_report(const char *out, size_t len, const char *prefix) {
    size_t p = strlen(prefix);
    if (!out || len < p + 2 || memcmp(out, prefix, p) != 0 || out[len - 1] != '\n' ||
        memchr(out + p, '\n', len - p - 1))
        return NULL;
    json_t *j = json_loadb(out + p, len - p - 1, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}
