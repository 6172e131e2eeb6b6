/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reports.c: the readers of plimsoll's in-sandbox helpers' reports
 * (reports.h).
 */
#include "reports.h"
#include <limits.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/canon.h"
#include "../../core/log.h"
#include "../../core/record.h"

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

/* ---- the file calls' readers ---------------------------------------------- */

#define FILE_REPORT_MAX_SIZE 0xffffffffull
#define LIST_MAX_PATH 4096u

/* A JSON object of exactly n members, all named in keys, from one line. */
static json_t *line_object(const char *p, size_t n, const char *const *keys, size_t nkeys) {
    json_t *o = json_loadb(p, n, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(o) || json_object_size(o) != nkeys) {
        json_decref(o);
        return NULL;
    }
    for (size_t i = 0; i < nkeys; i++)
        if (!json_object_get(o, keys[i])) {
            json_decref(o);
            return NULL;
        }
    return o;
}

/* A whole number from 0 to max. */
static bool whole(const json_t *v, uint64_t max, uint64_t *ret) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
        return false;
    *ret = (uint64_t)json_integer_value(v);
    return true;
}

int pl_docker_read_report(const char *out, size_t len, uint64_t *ret_size, size_t *ret_head) {
    static const char tag[] = "PLIMSOLL ";
    const char *nl = out ? memchr(out, '\n', len < 64 ? len : 64) : NULL;
    if (!nl || len < sizeof(tag) || memcmp(out, tag, sizeof(tag) - 1) != 0)
        return -1;
    const char *j = out + sizeof(tag) - 1;
    static const char *const keys[] = {"size"};
    json_t *o = line_object(j, (size_t)(nl - j), keys, 1);
    uint64_t size = 0;
    bool ok = o && whole(json_object_get(o, "size"), FILE_REPORT_MAX_SIZE, &size);
    json_decref(o);
    if (!ok)
        return -1;
    *ret_size = size;
    *ret_head = (size_t)(nl - out) + 1;
    return 0;
}

/* A listed path: relative, at most LIST_MAX_PATH bytes, no NUL, no empty,
 * "." or ".." segment. */
static bool list_path_ok(const unsigned char *p, size_t n) {
    if (n == 0 || n > LIST_MAX_PATH || p[0] == '/' || memchr(p, '\0', n))
        return false;
    size_t seg = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/')
            continue;
        size_t l = i - seg;
        if (l == 0 || (l == 1 && p[seg] == '.') || (l == 2 && p[seg] == '.' && p[seg + 1] == '.'))
            return false;
        seg = i + 1;
    }
    return true;
}

/* A FileEntry of one lister line's object; NULL when it is not one. */
static json_t *entry_of(const json_t *o) {
    static const char *const types[] = {"file",   "directory", "symlink", "fifo",
                                        "socket", "device",    "other"};
    const char *b64 = json_string_value(json_object_get(o, "p"));
    const char *t = json_string_value(json_object_get(o, "t"));
    uint64_t size = 0, mode = 0, mt = 0;
    if (!b64 || !t || !whole(json_object_get(o, "s"), INT64_MAX, &size) ||
        !whole(json_object_get(o, "m"), 07777, &mode) ||
        !whole(json_object_get(o, "mt"), INT64_MAX, &mt))
        return NULL;
    const char *type = NULL;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcmp(t, types[i]) == 0)
            type = types[i];
    unsigned char *path = NULL;
    size_t plen = 0;
    if (!type ||
        pl_base64_decode(b64, json_string_length(json_object_get(o, "p")), LIST_MAX_PATH, &path,
                         &plen) < 0 ||
        !list_path_ok(path, plen)) {
        free(path);
        return NULL;
    }
    char when[40] = "";
    struct timespec ts = {.tv_sec = (time_t)(mt / 1000000000ull),
                          .tv_nsec = (long)(mt % 1000000000ull)};
    if (pl_rfc3339(ts, when) < 0)
        when[0] = '\0';
    json_t *e = json_pack("{s:s, s:I, s:I, s:s}", "type", type, "size",
                          (json_int_t)(size > 0xffffffffull ? 0xffffffffull : size), "mode",
                          (json_int_t)mode, "modified_at", when);
    if (e && pl_utf8_valid(path, plen)) {
        json_object_set_new(e, "path", json_stringn((const char *)path, plen));
    } else if (e) {
        /* Not UTF-8: a lossy copy, and the exact bytes. */
        size_t k = 0;
        char *lossy = pl_utf8_lossy(path, plen, &k);
        char *exact = pl_base64_encode(path, plen, 1);
        if (!lossy || !exact) {
            json_decref(e);
            e = NULL;
        } else {
            json_object_set_new(e, "path", json_stringn(lossy, k));
            json_object_set_new(e, "path_base64", json_string(exact));
        }
        free(lossy);
        free(exact);
    }
    free(path);
    return e;
}

int pl_docker_list_report(const char *out, size_t len, size_t most, json_t **ret_entries,
                          bool *ret_truncated) {
    static const char tag[] = "PLIMSOLL ";
    static const char *const entry_keys[] = {"p", "t", "s", "m", "mt"};
    static const char *const end_keys[] = {"truncated"};
    *ret_entries = NULL;
    json_t *entries = json_array();
    size_t at = 0;
    while (entries && out && at < len) {
        const char *line = out + at;
        const char *nl = memchr(line, '\n', len - at);
        if (!nl)
            break; /* torn */
        size_t n = (size_t)(nl - line);
        at += n + 1;
        if (n >= sizeof(tag) - 1 && memcmp(line, tag, sizeof(tag) - 1) == 0) {
            json_t *o = line_object(line + sizeof(tag) - 1, n - (sizeof(tag) - 1), end_keys, 1);
            json_t *t = json_object_get(o, "truncated");
            bool ok = json_is_boolean(t) && at == len;
            *ret_truncated = json_is_true(t);
            json_decref(o);
            if (!ok)
                break;
            *ret_entries = entries;
            return 0;
        }
        json_t *o = json_array_size(entries) < most ? line_object(line, n, entry_keys, 5) : NULL;
        json_t *e = o ? entry_of(o) : NULL;
        json_decref(o);
        if (!e)
            break;
        json_array_append_new(entries, e);
    }
    json_decref(entries);
    return -1;
}

int pl_docker_collect_report(const char *out, size_t len, const struct pl_collect_ctx *bounds,
                             bool partial, struct pl_artifact **ret, size_t *ret_n,
                             bool *ret_truncated) {
    static const char tag[] = "PLIMSOLL ";
    static const char *const entry_keys[] = {"p", "s", "n"};
    static const char *const end_keys[] = {"truncated"};
    struct pl_artifact *list = calloc(bounds->files ? bounds->files : 1, sizeof(*list));
    size_t n = 0, at = 0, bytes = 0;
    *ret = NULL;
    *ret_n = 0;
    while (list && out && at < len) {
        const char *line = out + at;
        size_t room = len - at < PL_FILES_LINE_MAX ? len - at : PL_FILES_LINE_MAX;
        const char *nl = memchr(line, '\n', room);
        if (!nl)
            break; /* torn, or a line past its bound */
        size_t ln = (size_t)(nl - line);
        if (ln >= sizeof(tag) - 1 && memcmp(line, tag, sizeof(tag) - 1) == 0) {
            json_t *o = line_object(line + sizeof(tag) - 1, ln - (sizeof(tag) - 1), end_keys, 1);
            json_t *t = json_object_get(o, "truncated");
            bool ok = json_is_boolean(t) && at + ln + 1 == len;
            bool truncated = json_is_true(t);
            json_decref(o);
            if (!ok)
                break;
            *ret_truncated = truncated;
            *ret = list;
            *ret_n = n;
            return 0;
        }
        if (n >= bounds->files)
            break; /* a file more than allowed */
        json_t *o = line_object(line, ln, entry_keys, 3);
        const char *b64 = json_string_value(json_object_get(o, "p"));
        uint64_t size = 0, got = 0;
        struct pl_artifact *a = &list[n];
        bool ok = b64 && whole(json_object_get(o, "s"), INT64_MAX, &size) &&
                  whole(json_object_get(o, "n"), bounds->bytes - bytes, &got) && got <= size &&
                  got <= len - at - ln - 1 &&
                  pl_base64_decode(b64, json_string_length(json_object_get(o, "p")), LIST_MAX_PATH,
                                   (unsigned char **)&a->path, &a->path_len) == 0 &&
                  list_path_ok((const unsigned char *)a->path, a->path_len);
        json_decref(o);
        if (!ok) {
            free(a->path);
            a->path = NULL;
            break;
        }
        at += ln + 1;
        a->size = size;
        a->len = (size_t)got;
        a->truncated = got < size;
        a->data = got ? malloc(a->len) : NULL;
        n++;
        if (got && !a->data) {
            pl_artifacts_free(list, n);
            return -1;
        }
        if (got)
            memcpy(a->data, out + at, a->len);
        at += a->len;
        bytes += a->len;
    }
    if (list && partial) {
        /* The reader did not finish: what came whole stands, and the rest
         * is said to be left out. */
        *ret_truncated = true;
        *ret = list;
        *ret_n = n;
        return 0;
    }
    pl_artifacts_free(list, n);
    return -1;
}

/* The readers' exit codes (workfiles.py's FILE_RULES) and what each says. */
static const struct {
    int code;
    enum pl_reason reason;
    const char *say;
} file_rules[] = {
    {64, PL_REASON_NOT_FOUND, "path: nothing of that name in the work directory"},
    {65, PL_REASON_INVALID_REQUEST,
     "path: a symlink is on the way or at the end; the file calls follow none"},
    {66, PL_REASON_INVALID_REQUEST,
     "path: not a regular file (a directory, FIFO, socket or device); ReadFile reads regular "
     "files only"},
    {67, PL_REASON_INVALID_REQUEST, "path: not a directory, or a file is on the way"},
    {68, PL_REASON_INVALID_REQUEST, "path: the calls' user may not read it"},
    {69, PL_REASON_INVALID_REQUEST,
     "path: the file is larger than 4294967295 bytes, the most ReadFile reads"},
    {71, PL_REASON_INVALID_REQUEST, "path: not on the work directory's filesystem"},
    {72, PL_REASON_INVALID_REQUEST,
     "path: it changed while it was being opened; nothing was read (ask again)"},
    {73, PL_REASON_INVALID_REQUEST, "path: it could not be read"},
};

int pl_files_rule_broken(int code, struct pl_error *err) {
    for (size_t i = 0; i < sizeof(file_rules) / sizeof(file_rules[0]); i++)
        if (file_rules[i].code == code)
            return pl_error_set(err, file_rules[i].reason, "%s", file_rules[i].say);
    return pl_error_set(err, PL_REASON_INTERNAL, "the session's files reader ended with exit %d",
                        code);
}

json_t *pl_collect_header(const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                          size_t *ret_cap) {
    json_t *globs = json_array();
    for (size_t i = 0; globs && i < req->ncollect; i++)
        json_array_append_new(globs, json_string(req->collect[i]));
    *ret_cap = (size_t)ctx->collect.bytes + (size_t)ctx->collect.files * PL_FILES_LINE_MAX + 64;
    return globs
               ? json_pack("{s:s, s:o, s:I, s:I, s:I}", "kind", "collect", "globs", globs, "files",
                           (json_int_t)ctx->collect.files, "bytes", (json_int_t)ctx->collect.bytes,
                           "visits", (json_int_t)PL_COLLECT_VISITS)
               : NULL;
}

void pl_collect_answer(const struct pl_run_ctx *ctx, const char *out, size_t len, bool finished,
                       const char *failed, struct pl_run_result *ret) {
    ret->collected = true;
    ret->artifacts_truncated = true; /* until the reader's whole answer says otherwise */
    const char *why = failed;
    if (!why && pl_docker_collect_report(out, len, &ctx->collect, !finished, &ret->artifacts,
                                         &ret->nartifacts, &ret->artifacts_truncated) < 0)
        why = "the reader's answer is not in its shape";
    else if (!why && !finished)
        why = "the reader did not finish, or failed";
    if (why)
        pl_log("warn", "a run's artifacts were cut short",
               json_pack("{s:s, s:s}", "run_id", ctx->run_id, "why", why));
}
