/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files.c: a session's file calls (docs/sessions.md, "Session files").
 *
 * WriteFiles goes through the bootstrap's files mode, as a project call's
 * files do; ReadFile and ListFiles through its read and list modes.  Each
 * is one exec as the calls' user, so a path reaches nothing guest code
 * could not: the reader walks /work a component at a time without
 * following a symlink, opens nothing but a regular file (ReadFile) on the
 * work directory's filesystem, and says only the rule a path broke, as an
 * exit code the daemon turns into its own sentence.  What the reader
 * writes is guest data (the session's kept interpreters run beside it):
 * bounded before it is kept and read only in its exact shape (reports.c).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/cleanup.h"
#include "../../core/clock.h"
#include "../../core/log.h"
#include "docker_int.h"
#include "reports.h"
#include "bootstrap.h" /* generated: pl_docker_bootstrap[] */

/* The most a listing's line takes: a 4096-byte path in base64 and the rest. */
#define LIST_LINE_MAX 5800u

/* The reader's exit codes (bootstrap.py FILE_RULES) and what each says. */
static const struct {
    int code;
    enum pl_reason reason;
    const char *say;
} rules[] = {
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

/* One exec of the bootstrap in mode h in container id, its stdout kept up
 * to cap bytes; *ret_timed_out when it did not finish within timeout_ms
 * (what it wrote by then is in *ret_out). */
static int reader_exec(struct docker_state *s, const char *id, json_t *h, size_t cap,
                       unsigned timeout_ms, struct pl_buf *ret_out, int *ret_code,
                       bool *ret_timed_out, struct pl_error *err) {
    PL_AUTO_FREE char *line = json_dumps(h, JSON_COMPACT);
    PL_CLEANUP(pl_buf_free) struct pl_buf hdr = {0};
    if (!line || pl_buf_printf(&hdr, "%zu\n%s", strlen(line), line) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    struct cont_input in = {
        .timeout_ms = timeout_ms, .parts = {hdr.data}, .part_len = {hdr.len}, .nparts = 1};
    PL_CLEANUP(dk_cont_pump_clear) struct cont_pump p = {0};
    struct cont_result res = {0};
    p.dx.out.cap = cap;
    p.dx.err.cap = 4096;
    char user[32];
    dk_run_user(s, user);
    if (dk_exec_in(s, id, user,
                   json_pack("[s, s, s, s]", "python3", "-I", "-c", pl_docker_bootstrap), NULL, &in,
                   &p, &res, err) < 0)
        return -1;
    if (p.dx.out.total > cap)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the sandbox's files reader wrote more than its bound");
    *ret_timed_out = res.timed_out;
    *ret_code = res.exit_code;
    *ret_out = PL_TAKE_STRUCT(p.dx.out.kept);
    return 0;
}

/* A reader's exit code other than 0 as the call's refusal. */
static int rule_broken(int code, struct pl_error *err) {
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
        if (rules[i].code == code)
            return pl_error_set(err, rules[i].reason, "%s", rules[i].say);
    return pl_error_set(err, PL_REASON_INTERNAL, "the session's files reader ended with exit %d",
                        code);
}

static unsigned left_ms(uint64_t deadline) {
    uint64_t now = pl_now_ns();
    return now < deadline ? (unsigned)((deadline - now) / 1000000ull) + 1 : 1;
}

int dk_session_file_call(struct docker_state *s, struct dsession *d, const struct pl_run_ctx *ctx,
                         const struct pl_run_request *req, struct pl_run_result *ret,
                         struct pl_error *err) {
    uint64_t deadline = pl_deadline_in_ms(ctx->timeout_ms);
    if (req->kind == PL_PAYLOAD_WRITE_FILES) {
        /* The disk budget as the last cleanup measured it: a write that
         * would reach it is refused before anything is written (the
         * cleanup after the call measures again, and ends a session past
         * it, as after any call). */
        uint64_t budget = (uint64_t)s->session_disk_mb << 20;
        uint64_t used = atomic_load(&d->seen_disk);
        if (used + req->write.bytes + (64u << 10) > budget)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "files: %zu bytes would pass the session's disk budget "
                                "(SANDBOX_SESSION_DISK_MB=%u, /work and /tmp together; %llu "
                                "bytes in use at the last cleanup)",
                                req->write.bytes, s->session_disk_mb, (unsigned long long)used);
        char failed[200];
        bool timed_out = false;
        if (dk_session_write(s, d, req->write.files, req->write.nfiles, deadline, failed,
                             sizeof(failed), &timed_out, err) < 0)
            return -1;
        if (timed_out)
            return pl_error_set(err, PL_REASON_INTERNAL, "the files were not written within %u ms",
                                ctx->timeout_ms);
        if (failed[0])
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s", failed);
        return 0;
    }
    bool read = req->kind == PL_PAYLOAD_READ_FILE;
    PL_AUTO_JSON json_t *h =
        read ? json_pack("{s:s, s:s, s:I, s:I}", "kind", "read", "path", req->file.path, "offset",
                         (json_int_t)req->file.offset, "limit", (json_int_t)req->file.limit)
             : json_pack("{s:s, s:s, s:I, s:I}", "kind", "list", "path", req->file.path, "depth",
                         (json_int_t)req->file.depth, "entries",
                         (json_int_t)ctx->files.list_entries);
    size_t cap =
        read ? (size_t)req->file.limit + 64 : (size_t)ctx->files.list_entries * LIST_LINE_MAX + 64;
    PL_CLEANUP(pl_buf_free) struct pl_buf out = {0};
    int code = -1;
    if (!h)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    bool timed_out = false;
    if (reader_exec(s, d->id, h, cap, left_ms(deadline), &out, &code, &timed_out, err) < 0)
        return -1;
    if (timed_out)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the session's files reader did not finish within %u ms",
                            ctx->timeout_ms);
    if (code != 0)
        return rule_broken(code, err);
    if (read) {
        uint64_t size = 0;
        size_t head = 0;
        if (pl_docker_read_report(out.data, out.len, &size, &head) < 0 ||
            out.len - head > req->file.limit)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the session's files reader's answer is not in its shape");
        size_t n = out.len - head;
        ret->out = malloc(n ? n : 1);
        if (!ret->out)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        memcpy(ret->out, out.data + head, n);
        ret->out_len = n;
        ret->file_size = size;
        ret->more = (uint64_t)req->file.offset + n < size;
        return 0;
    }
    if (pl_docker_list_report(out.data, out.len, ctx->files.list_entries, &ret->entries,
                              &ret->truncated) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the session's files lister's answer is not in its shape");
    return 0;
}

/* The collection could not finish: what came whole stands, the rest is
 * said to be left out, and the log says why (the run's answer stands). */
static void collect_cut(const struct pl_run_ctx *ctx, const char *why) {
    pl_log("warn", "docker: a run's artifacts were cut short",
           json_pack("{s:s, s:s}", "run_id", ctx->run_id, "why", why));
}

int dk_collect(struct docker_state *s, const char *id, const struct pl_run_ctx *ctx,
               const struct pl_run_request *req, uint64_t deadline, struct pl_run_result *ret) {
    json_t *globs = json_array();
    for (size_t i = 0; globs && i < req->ncollect; i++)
        json_array_append_new(globs, json_string(req->collect[i]));
    PL_AUTO_JSON json_t *h =
        globs ? json_pack("{s:s, s:o, s:I, s:I, s:I}", "kind", "collect", "globs", globs, "files",
                          (json_int_t)ctx->collect.files, "bytes", (json_int_t)ctx->collect.bytes,
                          "visits", (json_int_t)DK_COLLECT_VISITS)
              : NULL;
    ret->collected = true;
    ret->artifacts_truncated = true; /* until the reader's whole answer says otherwise */
    if (!h)
        return -1;
    size_t cap =
        (size_t)ctx->collect.bytes + (size_t)ctx->collect.files * PL_DOCKER_COLLECT_LINE_MAX + 64;
    unsigned ms = left_ms(deadline);
    PL_CLEANUP(pl_buf_free) struct pl_buf out = {0};
    int code = -1;
    bool timed_out = false;
    struct pl_error xerr = {0};
    if (reader_exec(s, id, h, cap, ms < DK_COLLECT_MIN_MS ? DK_COLLECT_MIN_MS : ms, &out, &code,
                    &timed_out, &xerr) < 0) {
        collect_cut(ctx, xerr.message);
        return 0;
    }
    bool whole = !timed_out && code == 0;
    if (pl_docker_collect_report(out.data, out.len, &ctx->collect, !whole, &ret->artifacts,
                                 &ret->nartifacts, &ret->artifacts_truncated) < 0) {
        collect_cut(ctx, "the reader's answer is not in its shape");
        return 0;
    }
    if (!whole)
        collect_cut(ctx, timed_out ? "the reader did not finish in time" : "the reader failed");
    return 0;
}
