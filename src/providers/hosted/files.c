/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files.c: a hosted session's file calls (docs/sessions.md, "Session
 * files"; docs/internals/hosted.md, "Session files"), the same on every
 * hosted provider that keeps sessions.  Each call is one or a few
 * processes of guest/files.py as the guest's user through the provider's
 * step op, never the service's file API: that API writes by path (as root
 * on E2B) and would follow a symlink a guest planted.  The program walks
 * the work directory one component at a time from "/" without following a
 * symlink, and says a broken rule only as an exit code, which becomes the
 * same sentence docker's reader gives.  WriteFiles' bytes travel as
 * base64 arguments, the one way into a process both services share
 * (OpenShell's exec takes stdin, envd's only through SendInput, which the
 * provider does not use): a stream too long for one command goes over
 * several, staged in /tmp, and the last checks its length and SHA-256
 * before anything is written.  What the
 * program prints is guest data (the kept interpreters run beside it):
 * bounded before it is kept, read only in its exact shape by docker's
 * parsers (docker/reports.h, fuzzed there).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/buf.h"
#include "../../core/canon.h"
#include "../../core/clock.h"
#include "../../core/ids.h"
#include "../docker/reports.h"
#include "files_py.h" /* generated: ph_guest_files[] */
#include "hosted.h"

/* One argument of base64 (under OpenShell's 32 KiB an argument, and
 * Linux's 128 KiB), and the most bytes of arguments one command carries:
 * well under ARG_MAX whatever the service runs the command with. */
#define PIECE_B64 30000u
#define PIECES_MAX 24u
#define CHUNK_BYTES ((size_t)PIECE_B64 / 4u * 3u * PIECES_MAX)

/* The same codes for WriteFiles, after "refused file path '<path>': ". */
static const struct {
    int code;
    const char *say;
} write_rules[] = {
    {65, "a symlink or a file is in the way"},
    {66, "not a regular file (a directory, FIFO, socket or device)"},
    {67, "a symlink or a file is in the way"},
    {68, "the calls' user may not write there"},
    {71, "not on the work directory's filesystem"},
    {72, "it changed while it was being opened (ask again)"},
    {74, "no space is left in the sandbox"},
};
#define STAGED_CHANGED 75 /* the staged stream was not what the daemon sent */

/* One process of guest/files.py: its stdout kept up to cap bytes (more is
 * an error, never cut), its exit code. */
static int files_exec(const struct ph_project_ops *ops, void *ud, const char *mode,
                      const json_t *ctl, const char *const *pieces, size_t npieces, size_t cap,
                      uint64_t deadline, struct pl_buf *ret_out, int *ret_code, bool *ret_timed_out,
                      struct pl_error *err) {
    char *line = json_dumps(ctl, JSON_COMPACT);
    const char **argv = calloc(6 + npieces, sizeof(*argv));
    if (!line || !argv) {
        free(line);
        free(argv);
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    size_t argc = 0;
    argv[argc++] = "python3";
    argv[argc++] = "-I";
    argv[argc++] = "-c";
    argv[argc++] = ph_guest_files;
    argv[argc++] = mode;
    argv[argc++] = line;
    for (size_t i = 0; i < npieces; i++)
        argv[argc++] = pieces[i];
    struct ph_proc_out o;
    pl_capture_init(&o.out, cap);
    pl_capture_init(&o.err, 4096);
    o.exit_code = -1;
    o.timed_out = false;
    int rc = ops->step(ud, argv, argc, deadline, &o, err);
    free(argv);
    free(line);
    if (rc == 0 && o.timed_out && ret_timed_out)
        *ret_timed_out = true;
    else if (rc == 0 && o.timed_out)
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the session's files program did not finish by the call's deadline");
    else if (rc == 0 && pl_capture_truncated(&o.out))
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the session's files program wrote more than its bound");
    if (rc == 0) {
        *ret_code = o.exit_code;
        *ret_out = o.out.kept;
        o.out.kept = (struct pl_buf){0};
    }
    pl_capture_free(&o.out);
    pl_capture_free(&o.err);
    return rc;
}

static int read_call(const struct ph_project_ops *ops, void *ud, const char *workdir,
                     const struct pl_run_request *req, uint64_t deadline, struct pl_run_result *ret,
                     struct pl_error *err) {
    json_t *ctl =
        json_pack("{s:s, s:s, s:I, s:I}", "workdir", workdir, "path", req->file.path, "offset",
                  (json_int_t)req->file.offset, "limit", (json_int_t)req->file.limit);
    if (!ctl)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    struct pl_buf out = {0};
    int code = -1;
    int rc = files_exec(ops, ud, "read", ctl, NULL, 0, (size_t)req->file.limit + 64, deadline, &out,
                        &code, NULL, err);
    json_decref(ctl);
    uint64_t size = 0;
    size_t head = 0;
    if (rc == 0 && code != 0)
        rc = pl_files_rule_broken(code, err);
    else if (rc == 0 && (pl_docker_read_report((const char *)out.data, out.len, &size, &head) < 0 ||
                         out.len - head > req->file.limit))
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the session's files reader's answer is not in its shape");
    if (rc == 0) {
        size_t n = out.len - head;
        ret->out = malloc(n ? n : 1);
        if (!ret->out) {
            rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        } else {
            memcpy(ret->out, out.data + head, n);
            ret->out_len = n;
            ret->file_size = size;
            ret->more = (uint64_t)req->file.offset + n < size;
        }
    }
    pl_buf_free(&out);
    return rc;
}

static int list_call(const struct ph_project_ops *ops, void *ud, const char *workdir,
                     const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                     uint64_t deadline, struct pl_run_result *ret, struct pl_error *err) {
    json_t *ctl = json_pack(
        "{s:s, s:s, s:I, s:I}", "workdir", workdir, "path", req->file.path ? req->file.path : "",
        "depth", (json_int_t)req->file.depth, "entries", (json_int_t)ctx->files.list_entries);
    if (!ctl)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    struct pl_buf out = {0};
    int code = -1;
    int rc = files_exec(ops, ud, "list", ctl, NULL, 0,
                        (size_t)ctx->files.list_entries * PL_FILES_LINE_MAX + 64, deadline, &out,
                        &code, NULL, err);
    json_decref(ctl);
    if (rc == 0 && code != 0)
        rc = pl_files_rule_broken(code, err);
    else if (rc == 0 &&
             pl_docker_list_report((const char *)out.data, out.len, ctx->files.list_entries,
                                   &ret->entries, &ret->truncated) < 0)
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the session's files lister's answer is not in its shape");
    pl_buf_free(&out);
    return rc;
}

/* The writer's word on a refusal: exactly the index of the file, in
 * decimal, and a newline; -1 when it is anything else. */
static long refused_index(const struct pl_buf *out, size_t nfiles) {
    if (out->len < 2 || out->len > 4 || out->data[out->len - 1] != '\n')
        return -1;
    long n = 0;
    for (size_t i = 0; i + 1 < out->len; i++) {
        char c = (char)out->data[i];
        if (c < '0' || c > '9' || (i == 0 && c == '0' && out->len > 2))
            return -1;
        n = n * 10 + (c - '0');
    }
    return (size_t)n < nfiles ? n : -1;
}

static int write_refused(int code, const struct pl_buf *out, const struct pl_file *files,
                         size_t nfiles, struct pl_error *err) {
    if (code == STAGED_CHANGED)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "files: the bytes staged in the session's sandbox changed before "
                            "they were written (something in the sandbox touched them); nothing "
                            "was written");
    long i = refused_index(out, nfiles);
    const char *path = i >= 0 ? files[i].path : NULL;
    for (size_t k = 0; path && k < sizeof(write_rules) / sizeof(write_rules[0]); k++)
        if (write_rules[k].code == code)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "refused file path '%s': %s", path,
                                write_rules[k].say);
    if (path && code >= 64 && code <= 73)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: it could not be written", path);
    return pl_error_set(err, PL_REASON_INTERNAL, "writing the files ended with exit %d", code);
}

/* The call's stream: its header's length on a line, the header, then every
 * file's bytes. */
static int write_stream(const struct pl_file *files, size_t nfiles, struct pl_buf *ret,
                        struct pl_error *err) {
    json_t *fl = json_array();
    for (size_t i = 0; fl && i < nfiles; i++)
        if (json_array_append_new(fl, json_pack("{s:s, s:I}", "path", files[i].path, "len",
                                                (json_int_t)files[i].len)) < 0) {
            json_decref(fl);
            fl = NULL;
        }
    json_t *h = fl ? json_pack("{s:o}", "files", fl) : NULL;
    char *line = h ? json_dumps(h, JSON_COMPACT) : NULL;
    json_decref(h);
    int rc = line ? pl_buf_printf(ret, "%zu\n%s", strlen(line), line) : -1;
    free(line);
    for (size_t i = 0; rc == 0 && i < nfiles; i++)
        rc = pl_buf_append(ret, files[i].content, files[i].len);
    return rc < 0 ? pl_error_set(err, PL_REASON_INTERNAL, "out of memory") : 0;
}

static int write_call(const struct ph_project_ops *ops, void *ud, const char *workdir,
                      const struct pl_file *files, size_t nfiles, uint64_t deadline,
                      struct pl_error *err) {
    struct pl_buf stream = {0};
    char sha[65], stage[25];
    if (write_stream(files, nfiles, &stream, err) < 0)
        return -1;
    if (pl_sha256_hex(stream.data, stream.len, sha) < 0 ||
        pl_random_hex(stage, sizeof(stage), 12) < 0) {
        pl_buf_free(&stream);
        return pl_error_set(err, PL_REASON_INTERNAL, "no digest or no randomness");
    }
    int rc = 0;
    for (size_t off = 0; rc == 0;) {
        size_t take = stream.len - off < CHUNK_BYTES ? stream.len - off : CHUNK_BYTES;
        bool first = off == 0, last = off + take == stream.len;
        /* This command's bytes as pieces of base64, each one argument. */
        char *b64 = pl_base64_encode(stream.data + off, take, 1);
        size_t blen = b64 ? strlen(b64) : 0, np = (blen + PIECE_B64 - 1) / PIECE_B64;
        char **pieces = calloc(np ? np : 1, sizeof(*pieces));
        json_t *ctl =
            json_pack("{s:s, s:s, s:b, s:b, s:I, s:s}", "workdir", workdir, "stage", stage, "first",
                      first, "last", last, "len", (json_int_t)stream.len, "sha256", sha);
        for (size_t i = 0; pieces && b64 && i < np; i++) {
            size_t n = blen - i * PIECE_B64 < PIECE_B64 ? blen - i * PIECE_B64 : PIECE_B64;
            if (!(pieces[i] = strndup(b64 + i * PIECE_B64, n)))
                rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        }
        if (rc == 0 && (!b64 || !pieces || !ctl))
            rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        struct pl_buf out = {0};
        int code = -1;
        if (rc == 0)
            rc = files_exec(ops, ud, "write", ctl, (const char *const *)pieces, np, 64, deadline,
                            &out, &code, NULL, err);
        if (rc == 0 && code != 0)
            rc = write_refused(code, &out, files, nfiles, err);
        pl_buf_free(&out);
        json_decref(ctl);
        for (size_t i = 0; pieces && i < np; i++)
            free(pieces[i]);
        free(pieces);
        free(b64);
        off += take;
        if (last)
            break;
    }
    pl_buf_free(&stream);
    return rc;
}

int ph_files_call(const struct ph_project_ops *ops, void *ud, const char *workdir,
                  const struct pl_run_ctx *ctx, const struct pl_run_request *req, uint64_t deadline,
                  struct pl_run_result *ret, struct pl_error *err) {
    switch (req->kind) {
    case PL_PAYLOAD_WRITE_FILES:
        return write_call(ops, ud, workdir, req->write.files, req->write.nfiles, deadline, err);
    case PL_PAYLOAD_READ_FILE: return read_call(ops, ud, workdir, req, deadline, ret, err);
    case PL_PAYLOAD_LIST_FILES: return list_call(ops, ud, workdir, ctx, req, deadline, ret, err);
    default: return pl_error_set(err, PL_REASON_INTERNAL, "not a file call");
    }
}

/* The files under base among files (absolute paths), relative to it. */
static size_t under(const char *base, const struct ph_file *files, size_t n, struct pl_file *ret,
                    bool *taken) {
    size_t blen = strlen(base), k = 0;
    for (size_t i = 0; i < n; i++)
        if (!taken[i] && strncmp(files[i].path, base, blen) == 0 && files[i].path[blen] == '/') {
            ret[k++] = (struct pl_file){.path = files[i].path + blen + 1,
                                        .content = (unsigned char *)files[i].data,
                                        .len = files[i].len};
            taken[i] = true;
        }
    return k;
}

int ph_upload(const struct ph_project_ops *ops, void *ud, const char *workdir,
              const struct ph_file *files, size_t n, uint64_t deadline, struct pl_error *err) {
    if (!ops->session || n == 0)
        return ops->upload(ud, files, n, deadline, err);
    struct pl_file *rel = calloc(n, sizeof(*rel));
    bool *taken = calloc(n, sizeof(*taken));
    int rc = rel && taken ? 0 : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    const char *bases[] = {workdir, PH_SNIPPET_DIR};
    for (size_t b = 0; rc == 0 && b < sizeof(bases) / sizeof(bases[0]); b++) {
        size_t k = under(bases[b], files, n, rel, taken);
        if (k)
            rc = write_call(ops, ud, bases[b], rel, k, deadline, err);
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!taken[i])
            rc = pl_error_set(err, PL_REASON_INTERNAL, "a session's file outside %s and %s: %s",
                              workdir, PH_SNIPPET_DIR, files[i].path);
    free(rel);
    free(taken);
    return rc;
}

int ph_collect(const struct ph_project_ops *ops, void *ud, const char *workdir,
               const struct pl_run_ctx *ctx, const struct pl_run_request *req, uint64_t deadline,
               struct pl_run_result *ret) {
    size_t cap = 0;
    json_t *ctl = pl_collect_header(ctx, req, &cap);
    if (!ctl || json_object_set_new(ctl, "workdir", json_string(workdir)) < 0) {
        json_decref(ctl);
        return -1;
    }
    uint64_t least = pl_deadline_in_ms(PL_COLLECT_MIN_MS);
    struct pl_buf out = {0};
    struct pl_error xerr = {0};
    int code = -1;
    bool timed_out = false;
    int rc = files_exec(ops, ud, "collect", ctl, NULL, 0, cap, deadline > least ? deadline : least,
                        &out, &code, &timed_out, &xerr);
    pl_collect_answer(ctx, (const char *)out.data, out.len, rc == 0 && !timed_out && code == 0,
                      rc < 0 ? xerr.message : NULL, ret);
    json_decref(ctl);
    pl_buf_free(&out);
    return 0;
}
