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
#include "docker_int.h"
#include "reports.h"
#include "bootstrap.h" /* generated: pl_docker_bootstrap[] */

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
    size_t cap = read ? (size_t)req->file.limit + 64
                      : (size_t)ctx->files.list_entries * PL_FILES_LINE_MAX + 64;
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
        return pl_files_rule_broken(code, err);
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

int dk_collect(struct docker_state *s, const char *id, const struct pl_run_ctx *ctx,
               const struct pl_run_request *req, uint64_t deadline, struct pl_run_result *ret) {
    size_t cap = 0;
    PL_AUTO_JSON json_t *h = pl_collect_header(ctx, req, &cap);
    if (!h)
        return -1;
    unsigned ms = left_ms(deadline);
    PL_CLEANUP(pl_buf_free) struct pl_buf out = {0};
    int code = -1;
    bool timed_out = false;
    struct pl_error xerr = {0};
    int rc = reader_exec(s, id, h, cap, ms < PL_COLLECT_MIN_MS ? PL_COLLECT_MIN_MS : ms, &out,
                         &code, &timed_out, &xerr);
    pl_collect_answer(ctx, out.data, out.len, rc == 0 && !timed_out && code == 0,
                      rc < 0 ? xerr.message : NULL, ret);
    return 0;
}
