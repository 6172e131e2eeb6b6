/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec.c: one command in a sandbox through ExecSandbox's stream, and the
 * upload of files as a tar stream on an exec's stdin
 * (docs/providers/openshell.md, "Exec and upload").
 *
 * Every exec has two deadlines: the gateway's (timeout_seconds, which
 * ends the command with 124) and the client's own, a little later, which
 * cancels the stream: a gateway that never ends it cannot hold a run past
 * its deadline.  The stream is read until the exit event and no further.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/buf.h"
#include "../../core/cleanup.h"
#include "../../core/clock.h"
#include "../../core/ids.h"
#include "openshell.pb-c.h"
#include "join_pieces_py.h" /* generated: osh_guest_join_pieces[] */
#include "osh_int.h"

/* The client's deadline past the gateway's: its 124 has time to arrive. */
#define OSH_CLIENT_GRACE_MS 1500u

static int on_event(void *ud, const unsigned char *msg, size_t len, struct pl_error *err) {
    return osh_exec_event(ud, msg, len, err);
}

/*
 * A command within upstream's limits (OSH_EXEC_MAX_ARGS, OSH_EXEC_MAX_ARG_LEN).
 * A program longer than one argument may be (the session agent, about 43 KB) is
 * only ever python3's -c: it goes as pieces, each under the limit and cut
 * between UTF-8 characters (the field is a protobuf string), after a short
 * program that joins them and runs the whole as -c would have
 * (guest/join_pieces.py).  Any other argument over the limit is refused
 * before anything is sent.
 * *ret_argv is the command to send (argv itself when it fits); free
 * *ret_argv and *ret_store when they are not NULL.
 */
#define OSH_ARG_PIECE 30000u

/* argv[i] is the program of `python3 [-I] -c PROGRAM`. */
static bool is_python_c(const char *const *argv, size_t i) {
    if (i < 2 || strcmp(argv[i - 1], "-c") != 0)
        return false;
    size_t at = i - 2;
    if (strcmp(argv[at], "-I") == 0 && at-- == 0)
        return false;
    const char *slash = strrchr(argv[at], '/');
    return strcmp(slash ? slash + 1 : argv[at], "python3") == 0;
}

static int fit_command(const char *const *argv, size_t argc, const char ***ret_argv,
                       size_t *ret_argc, char **ret_store, struct pl_error *err) {
    *ret_argv = NULL;
    *ret_store = NULL;
    *ret_argc = argc;
    size_t longest = argc, len = 0;
    for (size_t i = 0; i < argc; i++) {
        size_t l = strlen(argv[i]);
        if (l <= OSH_EXEC_MAX_ARG_LEN)
            continue;
        if (longest != argc || !is_python_c(argv, i))
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "openshell: argument %zu of a command is %zu bytes, over the "
                                "gateway's %u",
                                i, l, OSH_EXEC_MAX_ARG_LEN);
        longest = i;
        len = l;
    }
    if (longest == argc) {
        if (argc > OSH_EXEC_MAX_ARGS)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "openshell: a command of %zu arguments, over the gateway's %u",
                                argc, OSH_EXEC_MAX_ARGS);
        *ret_argv = (const char **)argv;
        return 0;
    }
    size_t pieces = len / (OSH_ARG_PIECE - 3) + 1; /* a cut steps back 3 bytes at most */
    size_t n = argc + 1 + pieces;
    if (n > OSH_EXEC_MAX_ARGS)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "openshell: a command of %zu arguments, over the gateway's %u", n,
                            OSH_EXEC_MAX_ARGS);
    const char **out = calloc(n + 1, sizeof(*out));
    char *store = malloc(len + pieces + 24);
    if (!out || !store) {
        free(out);
        free(store);
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    size_t o = 0, used = 0, k = 0;
    for (size_t i = 0; i < longest; i++)
        out[o++] = argv[i];
    out[o++] = osh_guest_join_pieces;
    size_t count_at = o++; /* the count, once known */
    const char *src = argv[longest];
    for (size_t off = 0; off < len; k++) {
        size_t take = len - off < OSH_ARG_PIECE ? len - off : OSH_ARG_PIECE;
        /* Never before a continuation byte: each piece is whole UTF-8 (a
         * character has at most 3 of them; more is not UTF-8 anyway). */
        for (int back = 0;
             back < 3 && off + take < len && ((unsigned char)src[off + take] & 0xc0) == 0x80;
             back++)
            take--;
        memcpy(store + used, src + off, take);
        out[o++] = store + used;
        used += take;
        store[used++] = '\0';
        off += take;
    }
    char *count = store + used;
    snprintf(count, 24, "%zu", k);
    out[count_at] = count;
    for (size_t i = longest + 1; i < argc; i++)
        out[o++] = argv[i];
    *ret_argv = out;
    *ret_argc = o;
    *ret_store = store;
    return 0;
}

int osh_exec(struct osh_state *s, const struct osh_sandbox *sb, struct osh_exec *x,
             struct pl_error *err) {
    uint64_t now = pl_now_ns();
    if (now >= x->deadline_ns) {
        x->timed_out = true;
        x->exit_code = 124;
        return 0;
    }
    uint64_t left_ms = (x->deadline_ns - now + 999999) / 1000000;
    const char **argv;
    size_t argc;
    char *store;
    if (fit_command(x->argv, x->argc, &argv, &argc, &store, err) < 0)
        return -1;
    Openshell__V1__ExecSandboxRequest req = OPENSHELL__V1__EXEC_SANDBOX_REQUEST__INIT;
    req.sandbox_id = (char *)sb->id;
    req.n_command = argc;
    req.command = (char **)argv;
    if (x->workdir)
        req.workdir = (char *)x->workdir;
    req.timeout_seconds = (uint32_t)((left_ms + 999) / 1000 + (x->cancel_first ? 30 : 0));
    Openshell__V1__ExecSandboxRequest__EnvironmentEntry var =
        OPENSHELL__V1__EXEC_SANDBOX_REQUEST__ENVIRONMENT_ENTRY__INIT;
    Openshell__V1__ExecSandboxRequest__EnvironmentEntry *vars[1] = {&var};
    if (x->env_name) {
        var.key = (char *)x->env_name;
        var.value = (char *)x->env_value;
        req.n_environment = 1;
        req.environment = vars;
    }
    req.stdin.data = (uint8_t *)x->stdin_data;
    req.stdin.len = x->stdin_data ? x->stdin_len : 0;
    size_t len = protobuf_c_message_get_packed_size(&req.base);
    uint8_t *packed = malloc(len ? len : 1);
    if (packed)
        protobuf_c_message_pack(&req.base, packed);
    if (argv != (const char **)x->argv)
        free(argv);
    free(store);
    if (!packed)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    struct ph_grpc_call c = {.method = "/openshell.v1.OpenShell/ExecSandbox",
                             .msg = packed,
                             .len = len,
                             .timeout_ms = left_ms + (x->cancel_first ? 0 : OSH_CLIENT_GRACE_MS),
                             .max_message = OSH_MAX_MESSAGE,
                             .on_message = on_event,
                             .ud = x};
    struct pl_error e = {0};
    int rc = ph_grpc(&s->target, &c, &e);
    free(packed);
    if (rc == 0 && c.stopped) {
        /* The gateway's own deadline ends the command with 124. */
        x->timed_out = x->exit_code == 124 && pl_now_ns() >= x->deadline_ns;
        return 0;
    }
    if (rc < 0 && e.errnum == ETIMEDOUT && pl_now_ns() + 50000000ull >= x->deadline_ns) {
        /* The client's deadline: the stream was cancelled (libcurl's timer
         * may fire a millisecond early; a connect that timed out well
         * before the deadline is the gateway's failure, below). */
        x->timed_out = true;
        x->exit_code = 124;
        return 0;
    }
    if (rc < 0) {
        *err = e;
        ph_outage(&s->books, err);
        return -1;
    }
    if (c.status == PH_GRPC_DEADLINE_EXCEEDED && pl_now_ns() + 50000000ull >= x->deadline_ns) {
        /* The deadline we sent (grpc-timeout) ended the call at the
         * gateway before its own timeout's 124 came back (a loaded
         * gateway): the command met its deadline all the same. */
        x->timed_out = true;
        x->exit_code = 124;
        return 0;
    }
    if (c.status != PH_GRPC_OK)
        return osh_status_error(err, "ExecSandbox", &c);
    return pl_error_set(err, PL_REASON_INTERNAL,
                        "the OpenShell gateway: an exec stream ended without its exit");
}

static void archive_writep(struct archive **a) {
    if (*a)
        archive_write_free(*a);
}

/* The files as one tar stream (paths relative to /). */
static int make_tar(const struct ph_file *files, size_t n, struct pl_buf *ret,
                    struct pl_error *err) {
    PL_CLEANUP(archive_writep) struct archive *a = archive_write_new();
    if (!a)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    size_t used = 0, cap = 4096;
    for (size_t i = 0; i < n; i++)
        cap += 1536 + files[i].len; /* header, padding, the end's two blocks */
    cap += 10240;                   /* the last record's padding */
    if (!(ret->data = malloc(cap)))
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    ret->cap = cap;
    if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
        archive_write_open_memory(a, ret->data, cap, &used) != ARCHIVE_OK)
        return pl_error_set(err, PL_REASON_INTERNAL, "tar: %s", archive_error_string(a));
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        if (!e)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        archive_entry_set_pathname(e, files[i].path + 1); /* relative to / */
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)files[i].len);
        int w = archive_write_header(a, e);
        archive_entry_free(e);
        if (w != ARCHIVE_OK ||
            (files[i].len &&
             archive_write_data(a, files[i].data, files[i].len) != (la_ssize_t)files[i].len))
            return pl_error_set(err, PL_REASON_INTERNAL, "tar: %s", archive_error_string(a));
    }
    if (archive_write_close(a) != ARCHIVE_OK)
        return pl_error_set(err, PL_REASON_INTERNAL, "tar: %s", archive_error_string(a));
    ret->len = used;
    return 0;
}

/* One step of the upload: a small command, its stdin a chunk. */
static int upload_step(struct osh_state *s, const struct osh_sandbox *sb, const char *script,
                       const char *arg, const void *data, size_t len, uint64_t deadline,
                       struct pl_error *err) {
    const char *argv[] = {"/bin/sh", "-c", script, "sh", arg};
    struct osh_exec x;
    osh_exec_init(&x, 4096);
    x.argv = argv;
    x.argc = 5;
    x.workdir = "/tmp";
    x.stdin_data = data ? data : "";
    x.stdin_len = len;
    x.deadline_ns = deadline;
    int rc = osh_exec(s, sb, &x, err);
    if (rc == 0 && (x.timed_out || x.exit_code != 0))
        rc = pl_error_set(err, PL_REASON_INTERNAL, "the upload into %s failed (%s%d): %.200s",
                          sb->name, x.timed_out ? "deadline, " : "exit ", x.exit_code,
                          x.err.kept.data ? x.err.kept.data : "");
    osh_exec_free(&x);
    return rc;
}

int osh_upload(struct osh_state *s, const struct osh_sandbox *sb, const struct ph_file *files,
               size_t n, uint64_t deadline, struct pl_error *err) {
    for (size_t i = 0; i < n; i++)
        if (strncmp(files[i].path, "/tmp/", 5) != 0)
            return pl_error_set(err, PL_REASON_INTERNAL, "an upload outside /tmp: %s",
                                files[i].path);
    struct pl_buf tar = {0};
    if (make_tar(files, n, &tar, err) < 0) {
        pl_buf_free(&tar);
        return -1;
    }
    int rc;
    static const char untar[] = "exec tar -x -o -m -f - -C /";
    if (tar.len <= OSH_UPLOAD_CHUNK) {
        rc = upload_step(s, sb, untar, "", tar.data, tar.len, deadline, err);
    } else {
        /* Chunks appended to one file, then unpacked from it. */
        char hex[17], tmp[64];
        if (pl_random_hex(hex, sizeof(hex), 8) < 0) {
            pl_buf_free(&tar);
            return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
        }
        snprintf(tmp, sizeof(tmp), "/tmp/.plimsoll-upload-%s.tar", hex);
        rc = 0;
        for (size_t off = 0; rc == 0 && off < tar.len; off += OSH_UPLOAD_CHUNK) {
            size_t take = tar.len - off < OSH_UPLOAD_CHUNK ? tar.len - off : OSH_UPLOAD_CHUNK;
            rc = upload_step(s, sb, off ? "exec cat >> \"$1\"" : "umask 077; exec cat > \"$1\"",
                             tmp, tar.data + off, take, deadline, err);
        }
        if (rc == 0)
            rc = upload_step(s, sb, "tar -x -o -m -f \"$1\" -C / && exec rm -f \"$1\"", tmp, NULL,
                             0, deadline, err);
    }
    pl_buf_free(&tar);
    return rc;
}
