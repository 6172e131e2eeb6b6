/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reports.h: the readers of what plimsoll's own helpers inside a sandbox
 * report (the bootstrap's files report, the session agent's launch and
 * cleanup reports), apart from the calls that fetch them, so unit tests and
 * the fuzzer (fuzz/fuzz_engine.c) reach them.  Internal to the docker
 * provider.
 *
 * A helper reports before any guest code can reach its output (the
 * bootstrap before the first step; the cleanup with a group of their own,
 * docs/sessions.md), so a report is trusted for what it says only when it
 * has exactly its shape: anything added, cut or garbled is refused, never
 * read around.  The launcher is the exception: under a runsc whose /proc
 * is open to the sandbox uid, another process may have written to its
 * stdout before the launcher stopped it, so only its last line counts
 * (pl_last_line).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../provider.h"

/*
 * The bootstrap's files report: out holds the container's stdout as kept
 * (len bytes; total were written, cap was the limit).  It must be exactly
 * one line "PLIMSOLL {...}\n" whose object has a string "setup" or
 * "setup_failed".  Returns the object, or NULL with why (a sentence, at
 * most wlen bytes) saying what was wrong: oversized, torn, trailing bytes,
 * unreadable, or empty (exit_code then says how the sandbox ended).
 */
json_t *pl_docker_files_report(const char *out, size_t len, uint64_t total, size_t cap,
                               int exit_code, char *why, size_t wlen);

/*
 * The cleanup's report: out (len bytes) must be exactly one line holding
 * one JSON object, nothing after it.  Returns the object, or NULL.
 */
json_t *pl_docker_agent_report(const char *out, size_t len);

/*
 * A session's step runner's word on its socket (docs/sessions.md, "A
 * waiting runner"): "PID START" for itself, then for each of its waiters,
 * one space between numbers, decimal digits only (no leading zero), "\n"
 * last and nothing
 * after (len bytes).  Into pids and starts, at most max pairs; returns how
 * many, or -1 when it is anything else (every pid must be above 1).
 */
int pl_docker_runner_word(const char *word, size_t len, long *pids, unsigned long long *starts,
                          size_t max);

/*
 * The last line of a stream fed in pieces, in bounded memory: the line in
 * progress and the last whole one, each at most PL_LAST_LINE_MAX bytes (a
 * longer line is remembered as too long, never cut).  Zero-initialise.
 */
#define PL_LAST_LINE_MAX 4096

struct pl_last_line {
    char cur[PL_LAST_LINE_MAX]; /* the line in progress */
    size_t cur_len;
    bool cur_over;               /* it is longer than PL_LAST_LINE_MAX */
    char line[PL_LAST_LINE_MAX]; /* the last whole line, without its newline */
    size_t line_len;
    bool line_over;
    bool have; /* a whole line came */
};

void pl_last_line_feed(struct pl_last_line *l, const char *data, size_t len);

/* The stream's last line as one JSON object: the stream ended with a
 * newline and that line, within its bound, holds exactly one object.
 * Returns the object, or NULL. */
json_t *pl_last_line_report(const struct pl_last_line *l);

/*
 * ReadFile's reader (the bootstrap's "read", docs/sessions.md): out (len
 * bytes) must begin with exactly "PLIMSOLL {"size":N}\n", N a whole number
 * of at most 4294967295; the bytes read follow.  0 with the size and where
 * the bytes begin, or -1.  The reader runs beside the session's kept
 * interpreters: what it says is guest data, bounded and never trusted past
 * its shape.
 */
int pl_docker_read_report(const char *out, size_t len, uint64_t *ret_size, size_t *ret_head);

/*
 * ListFiles' lister (the bootstrap's "list"): one line an entry, each a
 * JSON object of exactly {"p": base64 of the path's bytes, "t": a type,
 * "s": size, "m": mode bits, "mt": modification ns}, then exactly
 * "PLIMSOLL {"truncated":B}\n" and nothing after.  A path must be
 * relative, at most 4096 bytes, without NUL, empty, "." or ".." segments.
 * 0 with *ret_entries (a new array of FileEntry: path, and path_base64
 * when the path is not UTF-8; type; size, capped at 4294967295; mode;
 * modified_at) and *ret_truncated, or -1 (more than most entries too).
 */
int pl_docker_list_report(const char *out, size_t len, size_t most, json_t **ret_entries,
                          bool *ret_truncated);

/* The longest line of a listing or a collect report but the end's (a
 * 4096-byte path in base64 and the rest): the readers' stdout is bounded
 * by it, per entry. */
#define PL_FILES_LINE_MAX 5800u
/* The most entries one collect walk looks at, and the least time it has
 * (the run's time left when more). */
#define PL_COLLECT_VISITS 100000u
#define PL_COLLECT_MIN_MS 2000u

/*
 * A file reader's exit code other than 0 (workfiles.py's FILE_RULES, in
 * docker's bootstrap and the hosted files.py) as the call's refusal: the
 * daemon's own sentence, NOT_FOUND or INVALID_REQUEST; INTERNAL for a code
 * that is no rule.  Always -1.
 */
int pl_files_rule_broken(int code, struct pl_error *err);

/*
 * The collect reader's header ({"kind": "collect", "globs", "files",
 * "bytes", "visits"}) for req's globs under ctx's bounds, and in *ret_cap
 * the most its answer may hold.  NULL when out of memory.
 */
json_t *pl_collect_header(const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                          size_t *ret_cap);

/*
 * A project's collect globs' reader (the bootstrap's "collect",
 * docs/api.md "Artifacts"): out (len bytes) holds, per file matched, one
 * line of a JSON object of exactly {"p": base64 of the path's bytes, "s":
 * its size, "n": how many of its bytes follow}, then exactly those n
 * bytes; then exactly "PLIMSOLL {"truncated":B}\n" and nothing after.  At
 * most bounds->files files, and bytes->bytes bytes in all; n at most s; a
 * path as ListFiles' (relative, at most 4096 bytes, no NUL, empty, "." or
 * ".." segment).  partial: the reader did not finish (its deadline), so
 * the whole entries before the first torn or missing one stand, and
 * *ret_truncated is set.  0 with *ret (n entries, the caller's:
 * pl_artifacts_free) and *ret_truncated, or -1.
 */
int pl_docker_collect_report(const char *out, size_t len, const struct pl_collect_ctx *bounds,
                             bool partial, struct pl_artifact **ret, size_t *ret_n,
                             bool *ret_truncated);

/*
 * What the collect reader said, into ret's artifacts: out (len bytes) in
 * pl_docker_collect_report's shape, whole when finished (the reader exited
 * 0 in time), else what came whole of it; failed, when set, why it could
 * not run at all.  What keeps the collection from finishing leaves what
 * came whole, artifacts_truncated, and a line in the log saying why: the
 * run's answer stands.  ret->collected is set.
 */
void pl_collect_answer(const struct pl_run_ctx *ctx, const char *out, size_t len, bool finished,
                       const char *failed, struct pl_run_result *ret);
