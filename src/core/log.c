/* SPDX-License-Identifier: Apache-2.0 */
/* log.c: one JSON line per event, written with a single write(2). */
#include "log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "record.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void pl_log(const char *level, const char *msg, json_t *fields) {
    json_t *line = json_object();
    if (!line) {
        json_decref(fields);
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char ts[40];
    if (pl_rfc3339(now, ts) == 0)
        json_object_set_new(line, "ts", json_string(ts));
    json_object_set_new(line, "level", json_string(level));
    json_object_set_new(line, "msg", json_string(msg));
    if (fields)
        json_object_update(line, fields);
    json_decref(fields);
    char *s = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(6));
    json_decref(line);
    if (!s)
        return;
    size_t n = strlen(s);
    s[n] = '\n'; /* replace the NUL: written with its length below */
    pthread_mutex_lock(&log_lock);
    size_t off = 0;
    while (off < n + 1) {
        ssize_t w = write(STDERR_FILENO, s + off, n + 1 - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    pthread_mutex_unlock(&log_lock);
    free(s);
}
