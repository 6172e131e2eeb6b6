/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plimsoll.c: the command-line client.
 *
 *   plimsoll describe
 *   plimsoll run [-l LANG] [--floor TIER] [--timeout MS] [--json] [--usage]
 *                (CODE | -f FILE | -)
 *   plimsoll explain (the same flags as run): the checks the run would
 *                    meet, nothing run; exit 0 when it would be dispatched,
 *                    3 when it would be refused
 *   plimsoll keygen [--key-out FILE] PRINCIPAL
 *   plimsoll session open [-l LANG]...   prints the new session's id
 *   plimsoll session ls [--json]         the caller's sessions, one a line
 *   plimsoll session get ID              its SessionInfo (JSON)
 *   plimsoll session extend ID SECONDS   it ends SECONDS from now instead
 *   plimsoll session close ID
 *   plimsoll cell ID [-l LANG] [--timeout MS] [--json] [--usage] [--outputs DIR]
 *                (CODE | -f FILE | -)
 *                    a cell in session ID (RunCellStream, its output as it
 *                    comes); --outputs DIR writes each display output's
 *                    data to DIR/NNN-KIND.EXT (below)
 *   plimsoll files ls ID [PATH] [--depth N] [--json]   a session's files
 *   plimsoll files get ID PATH [-o FILE]  the file's bytes, to stdout or FILE
 *   plimsoll files put ID LOCAL PATH      a file LOCAL (at most 4 MiB) as PATH;
 *                    a directory LOCAL as PATH/<its name>/..., as cp -r
 *                    does, in as many WriteFiles calls (256 files, 4 MiB
 *                    each) as it needs; a symlink in it is refused
 *   plimsoll mcp [--minimum-isolation TIER] [--max-message-bytes N]
 *                    an MCP server on stdin and stdout (newline-delimited
 *                    JSON-RPC, MCP's stdio transport) relayed to the
 *                    daemon's /mcp (mcp.c); TIER is the MCP session's
 *                    floor; a line past N bytes (default 4194304) is
 *                    answered with an error and skipped; exit 0 at the end
 *                    of stdin or at SIGTERM/SIGINT, 2 for a bad option
 *
 * The daemon is PLIMSOLL_URL (http://host:port or unix:/path; default
 * http://127.0.0.1:7475); the key is PLIMSOLL_KEY, or the first line of the
 * file PLIMSOLL_KEY_FILE, trimmed (libplimsoll's plimsoll_client_from_env:
 * a key file it cannot read is a usage error, exit 2, naming the file);
 * PLIMSOLL_MAX_ANSWER_BYTES caps one answer's body
 * (default 268435456, libplimsoll's).  The run's stdout and stderr are
 * written byte for byte, NULs included, as the guest writes them: run
 * uses RunStream and writes each chunk to stdout or stderr as it comes
 * (flushed), then what it says about the result; with --json it prints
 * the whole answer once, at the end.  A daemon without RunStream (404)
 * gets the unary Run, and its output comes at the end.  --usage adds a
 * stderr line with what the run cost (docs/api.md, "Usage"), or why it
 * was not measured, before the exit code's line.  cell is run for a
 * session's cell, and says on stderr how many display outputs came (and
 * were left out).
 *
 * cell --outputs DIR: DIR is made if missing and opened before anything
 * is sent, refused when it is a symlink (or not a directory); once the
 * result checks, each MIME type of display output N (from 1) becomes the
 * file NNN-KIND.EXT in it (001-display.png, 002-result.html; the
 * extension from the type by a fixed table, .txt or .bin for a type it
 * does not know, "-2" before it for a second type of one extension in one
 * output), holding the data's exact bytes (base64 decoded for a binary
 * type).  No name comes from the guest; each file is created relative to
 * DIR's descriptor with O_EXCL and O_NOFOLLOW, so a file already there is
 * never overwritten (nor a symlink followed): exit 2, naming it, the
 * files before it written.
 *
 * Exit status, for shell scripts to branch on:
 *   0  the code ran and exited 0
 *   1  the code ran and exited non-zero (a result, not an error)
 *   2  usage error
 *   3  refused before anything ran (a typed refusal; reason on stderr)
 *   4  infrastructure: the daemon could not be reached, or failed around
 *      the run (Connect "internal" and transport errors), the timeout, or
 *      an answer the protocol does not allow (docs/clients.md)
 *   5  isolation evidence mismatch: the answer's tier is below the floor
 *      asked for (the code may have run; never retry automatically)
 *   6  the run record does not check against what was sent and received
 *
 * It is a libplimsoll program (include/plimsoll.h): the library sorts the
 * answers into these channels and checks every record.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../include/plimsoll.h"
#include "../core/buf.h"
#include "../core/canon.h"
#include "../core/ids.h"
#include "../core/tier.h"
#include "cli.h"

#define MAX_INPUT_FILE (64u << 20)

static void usage(void) {
    fputs("usage:\n"
          "  plimsoll describe\n"
          "  plimsoll run [-l javascript|python] [--floor TIER] [--timeout MS] [--json]\n"
          "               [--usage] (CODE | -f FILE | -)\n"
          "  plimsoll explain (the same flags as run)\n"
          "  plimsoll keygen [--key-out FILE] PRINCIPAL\n"
          "  plimsoll session open [-l javascript|python]... | ls [--json] | get ID |\n"
          "                   extend ID SECONDS | close ID\n"
          "  plimsoll cell ID [-l javascript|python] [--timeout MS] [--json] [--usage]\n"
          "                [--outputs DIR] (CODE | -f FILE | -)  (DIR/NNN-KIND.EXT: each\n"
          "                display output's data; a symlink DIR or a file there refused)\n"
          "  plimsoll files ls ID [PATH] [--depth N] [--json] | get ID PATH [-o FILE] |\n"
          "                 put ID LOCAL PATH  (a file as PATH; a directory, recursively,\n"
          "                 as PATH/<its name>/..., PATH . the work directory, in calls\n"
          "                 of at most 256 files and 4 MiB; a symlink in it is refused)\n"
          "  plimsoll mcp [--minimum-isolation TIER] [--max-message-bytes N]  (an MCP\n"
          "               server on stdin/stdout, relayed to the daemon's /mcp)\n"
          "environment: PLIMSOLL_URL, PLIMSOLL_KEY or PLIMSOLL_KEY_FILE,\n"
          "             PLIMSOLL_MAX_ANSWER_BYTES (default 268435456)\n"
          "exit: 0 ran ok, 1 ran non-zero, 2 usage, 3 refused, 4 infrastructure,\n"
          "      5 isolation evidence mismatch, 6 run record does not check\n",
          stderr);
}

static int read_all(FILE *f, struct pl_buf *out) {
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (out->len + n > MAX_INPUT_FILE || pl_buf_append(out, chunk, n) < 0)
            return -1;
    }
    return ferror(f) ? -1 : 0;
}

plimsoll_client *cli_client_from_env(void) {
    size_t max_answer = 0;
    const char *m = getenv("PLIMSOLL_MAX_ANSWER_BYTES");
    if (m && *m) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(m, &end, 10);
        if (errno || *end || v == 0 || v > SIZE_MAX || m[0] == '-') {
            fprintf(stderr, "plimsoll: PLIMSOLL_MAX_ANSWER_BYTES takes a number of bytes\n");
            return NULL;
        }
        max_answer = (size_t)v;
    }
    struct plimsoll_error err;
    plimsoll_client *c =
        plimsoll_client_from_env(&(struct plimsoll_options){.max_answer_bytes = max_answer}, &err);
    if (!c)
        fprintf(stderr, "plimsoll: %s\n", err.message);
    return c;
}

/* Report a failed call; returns the exit status it maps to. */
static int report_error(const struct plimsoll_error *err) {
    switch (err->kind) {
    case PLIMSOLL_E_ISOLATION_EVIDENCE_MISMATCH:
        fprintf(stderr, "plimsoll: isolation evidence mismatch: %s\n", err->message);
        return EXIT_MISMATCH;
    case PLIMSOLL_E_CHAIN:
        fprintf(stderr, "plimsoll: the run record does not check (%s): %s\n", err->broken,
                err->message);
        return EXIT_RECORD;
    case PLIMSOLL_E_USAGE: fprintf(stderr, "plimsoll: %s\n", err->message); return EXIT_USAGE;
    case PLIMSOLL_E_PROTOCOL: fprintf(stderr, "plimsoll: %s\n", err->message); return EXIT_INFRA;
    case PLIMSOLL_E_INFRASTRUCTURE:
        if (err->reason[0])
            fprintf(stderr, "plimsoll: error: %s (%s): %s\n", err->reason, err->code, err->message);
        else
            fprintf(stderr, "plimsoll: %s\n", err->message);
        return EXIT_INFRA;
    default:
        fprintf(stderr, "plimsoll: refused: %s (%s): %s\n", err->reason[0] ? err->reason : "?",
                err->code, err->message);
        return err->dispatched ? EXIT_INFRA : EXIT_REFUSED;
    }
}

static int cmd_describe(int argc, char **argv) {
    (void)argv;
    if (argc != 1) {
        usage();
        return EXIT_USAGE;
    }
    plimsoll_client *c = cli_client_from_env();
    if (!c)
        return EXIT_USAGE;
    json_t *j = NULL;
    struct plimsoll_error err;
    int ex;
    if (plimsoll_describe(c, &j, &err) < 0) {
        ex = report_error(&err);
    } else {
        char *s = json_dumps(j, JSON_INDENT(2));
        if (s)
            puts(s);
        free(s);
        ex = s ? EXIT_RAN_OK : EXIT_INFRA;
    }
    json_decref(j);
    plimsoll_client_free(c);
    return ex;
}

/* Explain's ticket, one line a check: its mark, name and what it
 * compared; at a refusal, the reason, code and message the run would get. */
static int print_ticket(const json_t *j) {
    json_t *checks = json_object_get(j, "checks"), *ch;
    size_t i;
    json_array_foreach(checks, i, ch) {
        bool ok = json_is_true(json_object_get(ch, "passed"));
        printf("%s %-16s %s\n", ok ? "pass  " : "REFUSE",
               json_string_value(json_object_get(ch, "check")),
               json_string_value(json_object_get(ch, "value")));
        json_t *r = json_object_get(ch, "refusal");
        if (r)
            printf("       %s (%s): %s\n", json_string_value(json_object_get(r, "reason")),
                   json_string_value(json_object_get(r, "code")),
                   json_string_value(json_object_get(r, "message")));
    }
    bool go = json_is_true(json_object_get(j, "dispatch"));
    printf("%s\n", go ? "would be dispatched" : "would be refused; nothing would run");
    return go ? EXIT_RAN_OK : EXIT_REFUSED;
}

/* What run's output function has written. */
struct live {
    bool wrote; /* any output chunk: the result's output is on the terminal already */
};

/* Each chunk of the guest's output as it comes, flushed, NULs included; a
 * cell's display outputs (chunks of their own) are the result's, which
 * cell writes at the end. */
static int write_chunk(void *ud, const struct plimsoll_output *ch) {
    struct live *l = ud;
    if (ch->display)
        return 0;
    l->wrote = true;
    if (ch->stdout_len) {
        fwrite(ch->stdout_data, 1, ch->stdout_len, stdout);
        fflush(stdout);
    }
    if (ch->stderr_len) {
        fwrite(ch->stderr_data, 1, ch->stderr_len, stderr);
        fflush(stderr);
    }
    return 0;
}

/* Run req with live output (RunStream); a daemon without it answers 404
 * before anything runs, and gets the unary Run.  l->wrote: whether any
 * output was written. */
static int run_live(plimsoll_client *c, const json_t *req, struct live *l, json_t **ret,
                    struct plimsoll_error *err) {
    if (plimsoll_run_stream(c, req, write_chunk, l, ret, err) == 0)
        return 0;
    if (l->wrote || err->http_status != 404)
        return -1;
    return plimsoll_run(c, req, ret, err);
}

/* The code of run and cell: the file (- for stdin) or the argument, into
 * src; -1 after saying why. */
static int read_code(const char *file, const char *code, struct pl_buf *src) {
    if (!file) {
        pl_buf_puts(src, code);
        return 0;
    }
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "re");
    int r = f && read_all(f, src) == 0 ? 0 : -1;
    if (r < 0) {
        fprintf(stderr, "plimsoll: cannot read %s\n", file);
        pl_buf_free(src);
    }
    if (f && f != stdin)
        fclose(f);
    return r;
}

/* The result's stdout and stderr, unless the stream wrote them already:
 * streamed chunks are the result's output (libplimsoll checks it),
 * written once, as they came. */
static void write_result_output(const json_t *j, const struct live *l) {
    json_t *o = json_object_get(j, "stdout"), *e = json_object_get(j, "stderr");
    if (!l->wrote && json_string_value(o))
        fwrite(json_string_value(o), 1, json_string_length(o), stdout);
    if (!l->wrote && json_string_value(e))
        fwrite(json_string_value(e), 1, json_string_length(e), stderr);
    fflush(stdout);
}

/* --usage's line: what the run cost, or why it was not measured. */
static void print_usage(const json_t *j) {
    struct plimsoll_usage u;
    if (!plimsoll_usage_of(j, &u)) {
        const char *why = plimsoll_usage_absent(j);
        fprintf(stderr, "plimsoll: usage: not measured (%s)\n",
                why ? why : "the daemon says nothing of it");
        return;
    }
    char peak[48] = "";
    if (u.memory_peak_kib)
        snprintf(peak, sizeof(peak), ", %u KiB peak", u.memory_peak_kib);
    fprintf(stderr, "plimsoll: usage: %u ms user, %u ms system%s, %u ms wall (%s)\n", u.cpu_user_ms,
            u.cpu_system_ms, peak, u.wall_ms, u.source);
}

/* The last line of a run that did not exit 0: its exit code and tier. */
static void print_exit(const json_t *j) {
    const char *iso = json_string_value(json_object_get(j, "isolation"));
    int exit_code = (int)json_integer_value(json_object_get(j, "exit_code"));
    bool timed_out = json_is_true(json_object_get(j, "timed_out"));
    if (exit_code != 0 || timed_out)
        fprintf(stderr, "plimsoll: exit code %d (isolation: %s%s%s)\n", exit_code, iso ? iso : "?",
                timed_out ? ", timed out" : "",
                json_is_true(json_object_get(j, "out_of_memory")) ? ", out of memory" : "");
}

/* The options `run`, `explain` and `cell` share, and where the code
 * comes from. */
struct code_opts {
    const char *lang, *file, *code;
    long timeout;
    bool as_json, show_usage;
};

/* argv[*i] when it is one of the shared options (consuming its value):
 * 1; EXIT_USAGE's negation for a bad value; 0 when it is not one. */
static int code_opt(struct code_opts *o, int argc, char **argv, int *i, bool usage_ok) {
    const char *a = argv[*i];
    if ((strcmp(a, "-l") == 0 || strcmp(a, "--language") == 0) && *i + 1 < argc) {
        o->lang = argv[++*i];
    } else if (strcmp(a, "--usage") == 0 && usage_ok) {
        o->show_usage = true;
    } else if (strcmp(a, "--timeout") == 0 && *i + 1 < argc) {
        char *end = NULL;
        errno = 0;
        o->timeout = strtol(argv[++*i], &end, 10);
        if (errno || *end || o->timeout <= 0 || o->timeout > 0x7fffffffL) {
            fprintf(stderr, "plimsoll: --timeout takes milliseconds\n");
            return -EXIT_USAGE;
        }
    } else if (strcmp(a, "--json") == 0) {
        o->as_json = true;
    } else if (strcmp(a, "-f") == 0 && *i + 1 < argc) {
        o->file = argv[++*i];
    } else if (strcmp(a, "-") == 0) {
        o->file = "-";
    } else if (a[0] == '-' && a[1] == '-' && a[2] == '\0' && *i + 1 < argc) {
        o->code = argv[++*i];
    } else {
        return 0;
    }
    return 1;
}

static int cmd_run(int argc, char **argv) {
    bool explain = strcmp(argv[0], "explain") == 0;
    const char *floor = NULL;
    struct code_opts o = {.lang = "javascript"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int k = code_opt(&o, argc, argv, &i, !explain);
        if (k < 0)
            return -k;
        if (k > 0)
            continue;
        if (strcmp(a, "--floor") == 0 && i + 1 < argc) {
            floor = argv[++i];
        } else if (a[0] != '-' && !o.code) {
            o.code = a;
        } else {
            usage();
            return EXIT_USAGE;
        }
    }
    enum pl_tier floor_tier = PL_TIER_NONE;
    if (floor && pl_tier_parse(floor, &floor_tier) < 0) {
        fprintf(stderr, "plimsoll: --floor takes none, process, container, kernel or vm\n");
        return EXIT_USAGE;
    }
    if (!!o.code + !!o.file != 1 || (o.show_usage && o.as_json)) {
        usage();
        return EXIT_USAGE;
    }
    struct pl_buf src = {0};
    if (read_code(o.file, o.code, &src) < 0)
        return EXIT_USAGE;
    json_t *req = json_pack("{s:{s:s, s:s%}}", "snippet", "language", o.lang, "code",
                            src.data ? src.data : "", src.len);
    pl_buf_free(&src);
    if (!req) {
        fprintf(stderr, "plimsoll: the code is not valid UTF-8\n");
        return EXIT_USAGE;
    }
    if (floor)
        json_object_set_new(req, "minimum_isolation", json_string(floor));
    if (o.timeout)
        json_object_set_new(req, "timeout_ms", json_integer(o.timeout));
    plimsoll_client *c = cli_client_from_env();
    json_t *j = NULL;
    struct plimsoll_error err;
    struct live live = {0};
    int ex;
    if (!c) {
        ex = EXIT_USAGE;
    } else if (explain) {
        json_t *er = json_pack("{s:O}", "run", req);
        if (!er || plimsoll_explain(c, er, &j, &err) < 0)
            ex = er ? report_error(&err) : EXIT_INFRA;
        else if (o.as_json) {
            char *s = json_dumps(j, JSON_INDENT(2));
            if (s)
                puts(s);
            free(s);
            ex = json_is_true(json_object_get(j, "dispatch")) ? EXIT_RAN_OK : EXIT_REFUSED;
        } else {
            ex = print_ticket(j);
        }
        json_decref(er);
    } else if ((o.as_json ? plimsoll_run(c, req, &j, &err) : run_live(c, req, &live, &j, &err)) <
               0) {
        ex = report_error(&err);
    } else {
        int exit_code = (int)json_integer_value(json_object_get(j, "exit_code"));
        if (o.as_json) {
            char *s = json_dumps(j, JSON_INDENT(2));
            if (s)
                puts(s);
            free(s);
        } else {
            write_result_output(j, &live);
            if (o.show_usage)
                print_usage(j);
            print_exit(j);
        }
        ex = exit_code == 0 ? EXIT_RAN_OK : EXIT_RAN_NONZERO;
    }
    json_decref(j);
    json_decref(req);
    plimsoll_client_free(c);
    return ex;
}

static int print_json(const json_t *j) {
    char *s = json_dumps(j, JSON_INDENT(2));
    if (s)
        puts(s);
    free(s);
    return s ? EXIT_RAN_OK : EXIT_INFRA;
}

/* A SessionInfo's instant, to the second ("-" for none). */
static const char *when(const json_t *info, const char *name, char buf[24]) {
    const char *t = json_string_value(json_object_get(info, name));
    if (!t || strlen(t) < 19)
        return "-";
    snprintf(buf, 24, "%.10s %.8sZ", t, t + 11);
    return buf;
}

static int session_ls(plimsoll_client *c, bool as_json, struct plimsoll_error *err) {
    json_t *j = NULL;
    if (plimsoll_list_sessions(c, &j, err) < 0)
        return report_error(err);
    if (as_json) {
        int ex = print_json(j);
        json_decref(j);
        return ex;
    }
    json_t *list = json_object_get(j, "sessions"), *info;
    size_t i;
    printf("%-64s  %-6s  %5s  %-20s  %s\n", "SESSION", "STATE", "CALLS", "ENDS", "LANGUAGES");
    json_array_foreach(list, i, info) {
        char a[24], b[24];
        const char *state = json_string_value(json_object_get(info, "state"));
        bool ended = state && strcmp(state, "ended") == 0;
        struct pl_buf langs = {0};
        json_t *l;
        size_t k;
        json_array_foreach(json_object_get(info, "languages"), k, l) {
            if (k)
                pl_buf_puts(&langs, ",");
            pl_buf_puts(&langs, json_string_value(l) ? json_string_value(l) : "?");
        }
        printf("%-64s  %-6s  %5lld  %-20s  %s\n",
               json_string_value(json_object_get(info, "session_id")), state ? state : "?",
               (long long)json_integer_value(json_object_get(info, "calls")),
               ended ? when(info, "ended_at", a) : when(info, "lifetime_deadline", b),
               langs.len ? langs.data : "-");
        pl_buf_free(&langs);
    }
    json_decref(j);
    return EXIT_RAN_OK;
}

static int cmd_session(int argc, char **argv) {
    const char *sub = argc > 1 ? argv[1] : "";
    const char *langs[5] = {0};
    size_t nlangs = 0;
    bool as_json = false;
    const char *pos[2] = {0};
    size_t npos = 0;
    for (int i = 2; i < argc; i++) {
        if ((strcmp(argv[i], "-l") == 0 || strcmp(argv[i], "--language") == 0) && i + 1 < argc &&
            nlangs < 4)
            langs[nlangs++] = argv[++i];
        else if (strcmp(argv[i], "--json") == 0)
            as_json = true;
        else if (argv[i][0] != '-' && npos < 2)
            pos[npos++] = argv[i];
        else {
            usage();
            return EXIT_USAGE;
        }
    }
    bool open = strcmp(sub, "open") == 0, ls = strcmp(sub, "ls") == 0;
    bool get = strcmp(sub, "get") == 0, extend = strcmp(sub, "extend") == 0;
    bool close = strcmp(sub, "close") == 0;
    size_t want = open || ls ? 0 : extend ? 2 : 1;
    if (!(open || ls || get || extend || close) || npos != want || (nlangs && !open) ||
        (as_json && !ls)) {
        usage();
        return EXIT_USAGE;
    }
    unsigned long secs = 0;
    if (extend) {
        char *end = NULL;
        errno = 0;
        secs = strtoul(pos[1], &end, 10);
        if (errno || *end || !secs || secs > UINT32_MAX || pos[1][0] == '-') {
            fprintf(stderr, "plimsoll: session extend takes a whole number of seconds\n");
            return EXIT_USAGE;
        }
    }
    plimsoll_client *c = cli_client_from_env();
    if (!c)
        return EXIT_USAGE;
    struct plimsoll_error err;
    json_t *j = NULL;
    char id[65];
    int ex = EXIT_RAN_OK;
    if (open) {
        if (plimsoll_open_session(c, nlangs ? langs : NULL, id, &err) < 0)
            ex = report_error(&err);
        else
            puts(id);
    } else if (ls) {
        ex = session_ls(c, as_json, &err);
    } else if (get) {
        ex = plimsoll_get_session(c, pos[0], &j, &err) < 0 ? report_error(&err) : print_json(j);
    } else if (extend) {
        if (plimsoll_extend_session(c, pos[0], (unsigned)secs, &j, &err) < 0) {
            ex = report_error(&err);
        } else {
            printf("%s\n", json_string_value(json_object_get(j, "lifetime_deadline")));
        }
    } else if (plimsoll_close_session(c, pos[0], &err) < 0) {
        ex = report_error(&err);
    }
    json_decref(j);
    plimsoll_client_free(c);
    return ex;
}

/* ---- cell, and its display outputs as files --------------------------------- */

/* A MIME type's file extension: a fixed table, then the type's family;
 * never anything of the type's own text (which is the guest's). */
static const char *mime_extension(const char *mime) {
    static const struct {
        const char *mime, *ext;
    } table[] = {
        {"image/png", "png"},
        {"image/jpeg", "jpg"},
        {"image/gif", "gif"},
        {"image/webp", "webp"},
        {"image/bmp", "bmp"},
        {"image/svg+xml", "svg"},
        {"text/html", "html"},
        {"text/plain", "txt"},
        {"text/markdown", "md"},
        {"text/latex", "tex"},
        {"text/csv", "csv"},
        {"application/json", "json"},
        {"application/javascript", "js"},
        {"application/pdf", "pdf"},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(mime, table[i].mime) == 0)
            return table[i].ext;
    size_t n = strlen(mime);
    if (n > 5 && strcmp(mime + n - 5, "+json") == 0)
        return "json";
    if (n > 4 && strcmp(mime + n - 4, "+xml") == 0)
        return "xml";
    return plimsoll_mime_is_text(mime) ? "txt" : "bin";
}

/* --outputs DIR, before anything is sent: made if missing, then opened
 * without following a symlink; its descriptor, or -1 after saying why. */
static int outputs_dir_open(const char *dir) {
    if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
        fprintf(stderr, "plimsoll: --outputs %s: %s\n", dir, strerror(errno));
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        struct stat st;
        if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
            fprintf(stderr, "plimsoll: --outputs %s is a symlink; refused (nothing was sent)\n",
                    dir);
        else
            fprintf(stderr, "plimsoll: --outputs %s: %s (nothing was sent)\n", dir,
                    strerror(errno));
    }
    return fd;
}

/* One new file name in dirfd holding data: created with O_EXCL and
 * O_NOFOLLOW, so nothing there is overwritten or followed; -1 after
 * saying why. */
static int write_new_file(int dirfd, const char *dir, const char *name, const unsigned char *data,
                          size_t len) {
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        if (errno == EEXIST)
            fprintf(stderr, "plimsoll: %s/%s exists; not overwritten\n", dir, name);
        else
            fprintf(stderr, "plimsoll: %s/%s: %s\n", dir, name, strerror(errno));
        return -1;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            fprintf(stderr, "plimsoll: %s/%s: %s\n", dir, name, strerror(errno));
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    if (close(fd) < 0) {
        fprintf(stderr, "plimsoll: %s/%s: %s\n", dir, name, strerror(errno));
        return -1;
    }
    return 0;
}

/* Each MIME type of each display output of j as DIR/NNN-KIND.EXT; the
 * count of files written, or -1 after saying why (the files before it
 * stay). */
static int save_outputs(const json_t *j, int dirfd, const char *dir) {
    int written = 0;
    size_t n = plimsoll_outputs_count(j);
    for (size_t i = 0; i < n; i++) {
        const json_t *d = plimsoll_output_at(j, i);
        const char *kind = plimsoll_display_kind(d);
        /* libplimsoll accepted only these two; the name is ours either way */
        kind = kind && strcmp(kind, "result") == 0 ? "result" : "display";
        size_t ntypes = plimsoll_display_types(d);
        for (size_t t = 0; t < ntypes; t++) {
            const char *mime = plimsoll_display_type(d, t);
            const char *ext = mime_extension(mime);
            unsigned same = 1; /* this extension's place among the bundle's */
            for (size_t u = 0; u < t; u++)
                same += strcmp(mime_extension(plimsoll_display_type(d, u)), ext) == 0;
            char name[64];
            if (same == 1)
                snprintf(name, sizeof(name), "%03zu-%s.%s", i + 1, kind, ext);
            else
                snprintf(name, sizeof(name), "%03zu-%s-%u.%s", i + 1, kind, same, ext);
            unsigned char *data = NULL;
            size_t len = 0;
            struct plimsoll_error err;
            if (plimsoll_display_bytes(d, mime, &data, &len, &err) < 0) {
                fprintf(stderr, "plimsoll: %s\n", err.message);
                return -1;
            }
            int r = write_new_file(dirfd, dir, name, data, len);
            free(data);
            if (r < 0)
                return -1;
            written++;
        }
    }
    return written;
}

/* What cell writes on stderr at the end, before the usage and exit lines:
 * the display outputs that came, where they went (files < 0: writing them
 * stopped, and said why), those left out. */
static void print_outputs(const json_t *j, const char *dir, int files) {
    size_t n = plimsoll_outputs_count(j);
    unsigned dropped = plimsoll_outputs_dropped(j);
    if (n && dir && files < 0)
        fprintf(stderr, "plimsoll: %zu display output%s: not all written to %s\n", n,
                n == 1 ? "" : "s", dir);
    else if (n && dir)
        fprintf(stderr, "plimsoll: %zu display output%s: %d file%s in %s\n", n, n == 1 ? "" : "s",
                files, files == 1 ? "" : "s", dir);
    else if (n)
        fprintf(stderr, "plimsoll: %zu display output%s (--outputs DIR writes them)\n", n,
                n == 1 ? "" : "s");
    if (dropped)
        fprintf(stderr, "plimsoll: %u display output%s left out (the daemon's display bounds)\n",
                dropped, dropped == 1 ? "" : "s");
}

/* Run a cell with live output (RunCellStream); a daemon without it gets
 * the unary RunCell, as run_live does. */
static int cell_live(plimsoll_client *c, const char *id, const json_t *cell, unsigned timeout,
                     struct live *l, json_t **ret, struct plimsoll_error *err) {
    if (plimsoll_run_cell_stream(c, id, cell, timeout, write_chunk, l, ret, err) == 0)
        return 0;
    if (l->wrote || err->http_status != 404)
        return -1;
    return plimsoll_run_cell(c, id, cell, timeout, ret, err);
}

static int cmd_cell(int argc, char **argv) {
    const char *id = NULL, *dir = NULL;
    struct code_opts o = {.lang = "javascript"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int k = code_opt(&o, argc, argv, &i, true);
        if (k < 0)
            return -k;
        if (k > 0)
            continue;
        if (strcmp(a, "--outputs") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (a[0] != '-' && !id) {
            id = a;
        } else if (a[0] != '-' && !o.code) {
            o.code = a;
        } else {
            usage();
            return EXIT_USAGE;
        }
    }
    if (!id || !!o.code + !!o.file != 1 || (o.show_usage && o.as_json) || (dir && !*dir)) {
        usage();
        return EXIT_USAGE;
    }
    struct pl_buf src = {0};
    if (read_code(o.file, o.code, &src) < 0)
        return EXIT_USAGE;
    json_t *cell =
        json_pack("{s:s, s:s%}", "language", o.lang, "code", src.data ? src.data : "", src.len);
    pl_buf_free(&src);
    if (!cell) {
        fprintf(stderr, "plimsoll: the code is not valid UTF-8\n");
        return EXIT_USAGE;
    }
    int dirfd = dir ? outputs_dir_open(dir) : -1;
    plimsoll_client *c = dir && dirfd < 0 ? NULL : cli_client_from_env();
    json_t *j = NULL;
    struct plimsoll_error err;
    struct live live = {0};
    int ex;
    if (!c) {
        ex = EXIT_USAGE;
    } else if ((o.as_json ? plimsoll_run_cell(c, id, cell, (unsigned)o.timeout, &j, &err)
                          : cell_live(c, id, cell, (unsigned)o.timeout, &live, &j, &err)) < 0) {
        ex = report_error(&err);
    } else {
        int exit_code = (int)json_integer_value(json_object_get(j, "exit_code"));
        ex = exit_code == 0 ? EXIT_RAN_OK : EXIT_RAN_NONZERO;
        int files = dir ? save_outputs(j, dirfd, dir) : 0;
        if (o.as_json) {
            if (print_json(j) != EXIT_RAN_OK)
                ex = EXIT_INFRA;
        } else {
            write_result_output(j, &live);
            print_outputs(j, dir, files);
            if (o.show_usage)
                print_usage(j);
            print_exit(j);
        }
        if (files < 0)
            ex = EXIT_USAGE;
    }
    if (dirfd >= 0)
        close(dirfd);
    json_decref(j);
    json_decref(cell);
    plimsoll_client_free(c);
    return ex;
}

/* The bytes of a ReadFileResponse: content_base64's when given, else
 * content's; 0, or -1 when they do not decode. */
static int read_bytes(const json_t *r, unsigned char **ret, size_t *ret_len) {
    json_t *b = json_object_get(r, "content_base64");
    if (b)
        return pl_base64_decode(json_string_value(b), json_string_length(b), (size_t)1 << 30, ret,
                                ret_len) < 0
                   ? -1
                   : 0;
    json_t *t = json_object_get(r, "content");
    *ret_len = json_string_length(t);
    *ret = malloc(*ret_len ? *ret_len : 1);
    if (!*ret)
        return -1;
    memcpy(*ret, json_string_value(t) ? json_string_value(t) : "", *ret_len);
    return 0;
}

/* files get: ReadFile page after page (each as long as the daemon allows)
 * until nothing more remains, written as they come. */
static int files_get(plimsoll_client *c, const char *id, const char *path, const char *out_path,
                     struct plimsoll_error *err) {
    FILE *out = out_path ? fopen(out_path, "wbe") : stdout;
    if (!out) {
        fprintf(stderr, "plimsoll: cannot write %s: %s\n", out_path, strerror(errno));
        return EXIT_USAGE;
    }
    int ex = EXIT_RAN_OK;
    uint64_t offset = 0;
    for (bool more = true; more && ex == EXIT_RAN_OK;) {
        json_t *r = NULL;
        if (offset > UINT32_MAX) {
            fprintf(stderr, "plimsoll: the file goes past 4 GiB, the most ReadFile reaches\n");
            ex = EXIT_INFRA;
            break;
        }
        if (plimsoll_read_file(c, id, path, (unsigned)offset, 0, &r, err) < 0) {
            ex = report_error(err);
            break;
        }
        unsigned char *data = NULL;
        size_t n = 0;
        more = json_is_true(json_object_get(r, "more"));
        if (read_bytes(r, &data, &n) < 0 ||
            (size_t)json_integer_value(json_object_get(r, "length")) != n || (more && n == 0)) {
            fprintf(stderr, "plimsoll: the daemon's answer does not add up\n");
            ex = EXIT_INFRA;
        } else if (fwrite(data, 1, n, out) != n) {
            ex = EXIT_INFRA;
        }
        offset += n;
        free(data);
        json_decref(r);
    }
    if (out != stdout && fclose(out) != 0 && ex == EXIT_RAN_OK)
        ex = EXIT_INFRA;
    return ex;
}

/* WriteFiles' bounds (docs/sessions.md, "Session files"): one call's
 * files and bytes, one path's length; and the most files a directory put
 * sends in all. */
#define PUT_CALL_FILES 256u
#define PUT_CALL_BYTES (4u << 20)
#define PUT_PATH_BYTES 256u
#define PUT_MAX_FILES 65536u
#define PUT_MAX_DEPTH 64

/* One local file of a directory put and its path in the session. */
struct put_file {
    char *local;
    char *remote;
    size_t size;
};

struct put_plan {
    struct put_file *v;
    size_t n, cap;
};

static void put_plan_free(struct put_plan *p) {
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].local);
        free(p->v[i].remote);
    }
    free(p->v);
}

static char *join_path(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    s[la] = '/';
    memcpy(s + la + 1, b, lb + 1);
    return s;
}

static int by_bytes(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Walk the local directory dir, whose files go under remote, into plan:
 * names in byte order, regular files only; a symlink, a special file, a
 * name that is not UTF-8, a path past PUT_PATH_BYTES or a file past
 * PUT_CALL_BYTES is a usage error naming it, before anything is sent. */
static int put_walk(const char *dir, const char *remote, int depth, struct put_plan *plan) {
    if (depth > PUT_MAX_DEPTH) {
        fprintf(stderr, "plimsoll: %s is more than %d directories deep\n", dir, PUT_MAX_DEPTH);
        return -1;
    }
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, by_bytes);
    if (n < 0) {
        fprintf(stderr, "plimsoll: cannot read the directory %s: %s\n", dir, strerror(errno));
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        if (rc < 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        char *local = join_path(dir, name);
        char *rem = remote[0] ? join_path(remote, name) : strdup(name);
        struct stat st;
        if (!local || !rem) {
            fprintf(stderr, "plimsoll: out of memory\n");
            rc = -1;
        } else if (lstat(local, &st) < 0) {
            fprintf(stderr, "plimsoll: %s: %s\n", local, strerror(errno));
            rc = -1;
        } else if (S_ISLNK(st.st_mode)) {
            fprintf(stderr,
                    "plimsoll: %s is a symlink; files put does not follow symlinks: "
                    "nothing was sent\n",
                    local);
            rc = -1;
        } else if (!pl_utf8_valid((const unsigned char *)name, strlen(name))) {
            fprintf(stderr, "plimsoll: %s: its name is not UTF-8; nothing was sent\n", local);
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            rc = put_walk(local, rem, depth + 1, plan);
        } else if (!S_ISREG(st.st_mode)) {
            fprintf(stderr, "plimsoll: %s is not a regular file or a directory; nothing was sent\n",
                    local);
            rc = -1;
        } else if (strlen(rem) > PUT_PATH_BYTES) {
            fprintf(stderr,
                    "plimsoll: %s: its path in the session, %s, is past %u bytes; nothing "
                    "was sent\n",
                    local, rem, PUT_PATH_BYTES);
            rc = -1;
        } else if ((uint64_t)st.st_size > PUT_CALL_BYTES) {
            fprintf(stderr,
                    "plimsoll: %s is %lld bytes, past the 4 MiB one WriteFiles call takes; "
                    "nothing was sent\n",
                    local, (long long)st.st_size);
            rc = -1;
        } else if (plan->n == PUT_MAX_FILES) {
            fprintf(stderr, "plimsoll: %s holds more than %u files; nothing was sent\n", dir,
                    PUT_MAX_FILES);
            rc = -1;
        } else {
            if (plan->n == plan->cap) {
                size_t cap = plan->cap ? plan->cap * 2 : 64;
                struct put_file *v = realloc(plan->v, cap * sizeof *v);
                if (!v) {
                    fprintf(stderr, "plimsoll: out of memory\n");
                    rc = -1;
                    goto next;
                }
                plan->v = v;
                plan->cap = cap;
            }
            plan->v[plan->n++] = (struct put_file){local, rem, (size_t)st.st_size};
            local = rem = NULL;
        }
    next:
        free(local);
        free(rem);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* A walked file's bytes, base64: opened without following a symlink, and
 * still the regular file of the size the walk saw. */
static char *put_read(const struct put_file *f) {
    int fd = open(f->local, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != f->size) {
        fprintf(stderr, "plimsoll: %s changed while it was put (or cannot be read)\n", f->local);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    FILE *in = fdopen(fd, "rb");
    struct pl_buf src = {0};
    char *b64 = NULL;
    if (!in) {
        close(fd);
    } else {
        if (read_all(in, &src) == 0 && src.len == f->size)
            b64 = pl_base64_encode(src.data ? src.data : "", src.len, 1);
        else
            fprintf(stderr, "plimsoll: %s changed while it was put\n", f->local);
        fclose(in);
    }
    pl_buf_free(&src);
    return b64;
}

/* files put of a directory: walk it all first (refusing what put_walk
 * refuses), then WriteFiles calls of at most PUT_CALL_FILES files and
 * PUT_CALL_BYTES bytes each, in the walk's order. */
static int files_put_dir(plimsoll_client *c, const char *id, const char *local, const char *path,
                         struct plimsoll_error *err) {
    char *abs = realpath(local, NULL);
    const char *base = abs ? strrchr(abs, '/') : NULL;
    if (!base || !base[1]) {
        fprintf(stderr, "plimsoll: %s has no name to put it by\n", local);
        free(abs);
        return EXIT_USAGE;
    }
    char *top = strcmp(path, ".") == 0 ? strdup(base + 1) : join_path(path, base + 1);
    free(abs);
    struct put_plan plan = {0};
    if (!top || put_walk(local, top, 1, &plan) < 0) {
        free(top);
        put_plan_free(&plan);
        return EXIT_USAGE;
    }
    free(top);
    if (plan.n == 0)
        fprintf(stderr,
                "plimsoll: %s holds no regular file; nothing was sent (WriteFiles makes "
                "no empty directory)\n",
                local);
    int ex = EXIT_RAN_OK;
    size_t sent = 0;
    while (sent < plan.n && ex == EXIT_RAN_OK) {
        json_t *files = json_array();
        size_t bytes = 0, i = sent;
        for (; files && i < plan.n && i - sent < PUT_CALL_FILES; i++) {
            if (i > sent && bytes + plan.v[i].size > PUT_CALL_BYTES)
                break;
            char *b64 = put_read(&plan.v[i]);
            if (!b64 ||
                json_array_append_new(files, json_pack("{s:s, s:s}", "path", plan.v[i].remote,
                                                       "content_base64", b64)) < 0) {
                free(b64);
                ex = EXIT_USAGE;
                break;
            }
            free(b64);
            bytes += plan.v[i].size;
        }
        json_t *r = NULL;
        if (!files)
            ex = EXIT_USAGE;
        else if (ex == EXIT_RAN_OK && plimsoll_write_files(c, id, files, &r, err) < 0)
            ex = report_error(err);
        json_decref(files);
        json_decref(r);
        if (ex == EXIT_RAN_OK)
            sent = i;
    }
    if (ex != EXIT_RAN_OK && sent)
        fprintf(stderr, "plimsoll: %zu of the %zu files were written before that\n", sent, plan.n);
    put_plan_free(&plan);
    return ex;
}

static int files_put(plimsoll_client *c, const char *id, const char *local, const char *path,
                     struct plimsoll_error *err) {
    struct stat st;
    if (stat(local, &st) == 0 && S_ISDIR(st.st_mode))
        return files_put_dir(c, id, local, path, err);
    FILE *f = fopen(local, "rbe");
    struct pl_buf src = {0};
    if (!f || read_all(f, &src) < 0 || src.len > (4u << 20)) {
        fprintf(stderr, "plimsoll: cannot read %s, or it is larger than WriteFiles' 4 MiB\n",
                local);
        if (f)
            fclose(f);
        pl_buf_free(&src);
        return EXIT_USAGE;
    }
    fclose(f);
    char *b64 = pl_base64_encode(src.data ? src.data : "", src.len, 1);
    pl_buf_free(&src);
    json_t *files = b64 ? json_pack("[{s:s, s:s}]", "path", path, "content_base64", b64) : NULL;
    free(b64);
    json_t *r = NULL;
    int ex = !files                                            ? EXIT_USAGE
             : plimsoll_write_files(c, id, files, &r, err) < 0 ? report_error(err)
                                                               : EXIT_RAN_OK;
    json_decref(files);
    json_decref(r);
    return ex;
}

static int files_ls(plimsoll_client *c, const char *id, const char *path, unsigned depth,
                    bool as_json, struct plimsoll_error *err) {
    json_t *r = NULL;
    if (plimsoll_list_files(c, id, path, depth, &r, err) < 0)
        return report_error(err);
    if (as_json) {
        int ex = print_json(r);
        json_decref(r);
        return ex;
    }
    json_t *e;
    size_t i;
    json_array_foreach(json_object_get(r, "entries"), i, e) {
        printf("%-9s %10lld %04llo  %s\n", json_string_value(json_object_get(e, "type")),
               (long long)json_integer_value(json_object_get(e, "size")),
               (unsigned long long)json_integer_value(json_object_get(e, "mode")),
               json_string_value(json_object_get(e, "path")));
    }
    if (json_is_true(json_object_get(r, "truncated")))
        fprintf(stderr, "plimsoll: more entries than the daemon lists at once "
                        "(SANDBOX_FILE_LIST_ENTRIES); list a deeper path\n");
    json_decref(r);
    return EXIT_RAN_OK;
}

static int cmd_files(int argc, char **argv) {
    const char *sub = argc > 1 ? argv[1] : "";
    const char *pos[3] = {0}, *out = NULL;
    size_t npos = 0;
    long depth = 0;
    bool as_json = false;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--depth") == 0 && i + 1 < argc) {
            char *end = NULL;
            errno = 0;
            depth = strtol(argv[++i], &end, 10);
            if (errno || *end || depth < 1 || depth > 16) {
                fprintf(stderr, "plimsoll: --depth takes 1 to 16\n");
                return EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (argv[i][0] != '-' && npos < 3) {
            pos[npos++] = argv[i];
        } else {
            usage();
            return EXIT_USAGE;
        }
    }
    bool ls = strcmp(sub, "ls") == 0, get = strcmp(sub, "get") == 0, put = strcmp(sub, "put") == 0;
    if (!(ls || get || put) || (ls && (npos < 1 || npos > 2 || out)) ||
        (get && (npos != 2 || depth || as_json)) ||
        (put && (npos != 3 || depth || as_json || out))) {
        usage();
        return EXIT_USAGE;
    }
    plimsoll_client *c = cli_client_from_env();
    if (!c)
        return EXIT_USAGE;
    struct plimsoll_error err;
    int ex = ls    ? files_ls(c, pos[0], pos[1], (unsigned)depth, as_json, &err)
             : get ? files_get(c, pos[0], pos[1], out, &err)
                   : files_put(c, pos[0], pos[1], pos[2], &err);
    plimsoll_client_free(c);
    return ex;
}

static int cmd_keygen(int argc, char **argv) {
    const char *out = NULL, *principal = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--key-out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (argv[i][0] != '-' && !principal)
            principal = argv[i];
        else {
            usage();
            return EXIT_USAGE;
        }
    }
    if (!principal) {
        usage();
        return EXIT_USAGE;
    }
    size_t plen = strlen(principal);
    for (size_t i = 0; i < plen; i++) {
        char ch = principal[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              strchr("._:@-", ch))) {
            fprintf(stderr, "plimsoll: a principal is 1-128 characters of [A-Za-z0-9._:@-]\n");
            return EXIT_USAGE;
        }
    }
    if (plen == 0 || plen > 128) {
        fprintf(stderr, "plimsoll: a principal is 1-128 characters of [A-Za-z0-9._:@-]\n");
        return EXIT_USAGE;
    }
    unsigned char rnd[32];
    if (pl_random_bytes(rnd, sizeof(rnd)) < 0) {
        fprintf(stderr, "plimsoll: no randomness available\n");
        return EXIT_INFRA;
    }
    char *b64 = pl_base64_encode(rnd, sizeof(rnd), 0);
    OPENSSL_cleanse(rnd, sizeof(rnd));
    if (!b64)
        return EXIT_INFRA;
    for (char *p = b64; *p; p++) /* URL-safe alphabet: the key travels in headers */
        *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    char key[64];
    snprintf(key, sizeof(key), "plk_%s", b64);
    OPENSSL_cleanse(b64, strlen(b64));
    free(b64);
    char hex[65];
    pl_sha256_hex(key, strlen(key), hex);
    int ex = EXIT_RAN_OK;
    if (out) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 || dprintf(fd, "%s\n", key) < 0) {
            fprintf(stderr, "plimsoll: cannot write %s: %s\n", out, strerror(errno));
            ex = EXIT_USAGE;
        }
        if (fd >= 0)
            close(fd);
        if (ex == EXIT_RAN_OK)
            printf("%s %s\n", principal, hex);
    } else {
        printf("%s\n%s %s\n", key, principal, hex);
    }
    OPENSSL_cleanse(key, sizeof(key));
    return ex;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage();
        return EXIT_USAGE;
    }
    int r;
    if (strcmp(argv[1], "describe") == 0)
        r = cmd_describe(argc - 1, argv + 1);
    else if (strcmp(argv[1], "run") == 0 || strcmp(argv[1], "explain") == 0)
        r = cmd_run(argc - 1, argv + 1);
    else if (strcmp(argv[1], "keygen") == 0)
        r = cmd_keygen(argc - 1, argv + 1);
    else if (strcmp(argv[1], "session") == 0)
        r = cmd_session(argc - 1, argv + 1);
    else if (strcmp(argv[1], "files") == 0)
        r = cmd_files(argc - 1, argv + 1);
    else if (strcmp(argv[1], "cell") == 0)
        r = cmd_cell(argc - 1, argv + 1);
    else if (strcmp(argv[1], "mcp") == 0)
        r = cmd_mcp(argc - 1, argv + 1);
    else if (strcmp(argv[1], "--version") == 0) {
        puts("plimsoll 0.1.0");
        r = 0;
    } else {
        usage();
        r = EXIT_USAGE;
    }
    return r;
}
