/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request.h: the Run request as the daemon understands it, and its decoder.
 *
 * Decoding is two passes over caller bytes:
 *   1. normalize: parse JSON, map proto3 JSON names (snake_case or
 *      lowerCamelCase) onto the proto field names, check every value's type,
 *      refuse unknown fields, drop nulls.  The result is the canonical
 *      request tree that run records hash (docs/records.md).
 *   2. validate: the rules and bounds of the API (one payload, sizes,
 *      counts, tiers, timeouts), filling struct pl_run_request.
 * Every failure is INVALID_REQUEST with a message naming the field.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "errors.h"
#include "tier.h"

enum pl_payload_kind {
    PL_PAYLOAD_NONE = 0,
    PL_PAYLOAD_SNIPPET,
    PL_PAYLOAD_PROJECT,
    PL_PAYLOAD_MODULE,
    PL_PAYLOAD_CELL,
    /* A session's file calls (WriteFiles, ReadFile, ListFiles): no guest
     * code runs. */
    PL_PAYLOAD_WRITE_FILES,
    PL_PAYLOAD_READ_FILE,
    PL_PAYLOAD_LIST_FILES,
};

/* Whether kind is one of the file calls. */
static inline bool pl_payload_is_files(enum pl_payload_kind kind) {
    return kind == PL_PAYLOAD_WRITE_FILES || kind == PL_PAYLOAD_READ_FILE ||
           kind == PL_PAYLOAD_LIST_FILES;
}

/* "snippet", "project", "module", "cell". */
const char *pl_payload_name(enum pl_payload_kind kind);

struct pl_file {
    const char *path;       /* borrowed from the canonical tree */
    unsigned char *content; /* owned, decoded */
    size_t len;
};

struct pl_step {
    const char *name;  /* borrowed; never NULL ("step-N" when unnamed) */
    char *name_owned;  /* set when the name was generated */
    const char **argv; /* owned array of borrowed strings, argc entries */
    size_t argc;
};

/* Limits the decoder enforces that come from settings. */
struct pl_request_limits {
    unsigned max_timeout_ms; /* SANDBOX_MAX_TIMEOUT_MS */
    unsigned memory_mb;      /* SANDBOX_MEMORY_MB: a per-run value may only be smaller */
    bool allow_cell;         /* RunCell: the payload is a cell (refused everywhere else) */
};

struct pl_run_request {
    json_t *canonical; /* owned: the normalized request tree */

    bool has_floor;
    enum pl_tier floor;
    const char *grant_profile; /* borrowed; NULL when absent */
    unsigned timeout_ms;       /* 0 when absent: the daemon's default applies */
    unsigned memory_mb;        /* 0 when absent: the allowance applies */

    enum pl_payload_kind kind;
    /* The payload's collect globs (project.collect, snippet.collect): an
     * owned array of borrowed strings; none when ncollect is 0. */
    const char **collect;
    size_t ncollect;
    struct {
        const char *language; /* "javascript" | "python" */
        const char *code;
        size_t code_len;
        const char *stdin_data;
        size_t stdin_len;
    } snippet;
    struct {
        struct pl_file *files;
        size_t nfiles;
        struct pl_step *steps;
        size_t nsteps;
    } project;
    struct {
        unsigned char *wasm;
        size_t wasm_len;
        const char **args;
        size_t nargs;
        const char *stdin_data;
        size_t stdin_len;
    } module;
    struct {
        const char *language;
        const char *code;
        size_t code_len;
        struct pl_file *files;
        size_t nfiles;
    } cell;
    struct {
        struct pl_file *files; /* WriteFiles */
        size_t nfiles;
        size_t bytes; /* all their bytes */
    } write;
    struct {
        const char *path; /* ReadFile: a file; ListFiles: a directory, "" the work directory */
        unsigned offset;  /* ReadFile */
        unsigned limit;   /* ReadFile: resolved, 1..read_bytes */
        unsigned depth;   /* ListFiles: resolved, 1..PL_FILES_MAX_DEPTH */
    } file;
};

/* The bounds of the file calls that are settings. */
struct pl_files_limits {
    unsigned read_bytes; /* SANDBOX_FILE_READ_BYTES: ReadFile's most, and its default */
};

/*
 * A session's file call: its message without session_id (WriteFiles'
 * files; ReadFile's path, offset, limit; ListFiles' path, depth), decoded
 * into a request of kind, whose canonical tree is what the record's
 * request digest covers.  INVALID_REQUEST names the field and the bound.
 */
int pl_files_request_decode(enum pl_payload_kind kind, const char *body, size_t len,
                            const struct pl_files_limits *limits, struct pl_run_request *ret,
                            struct pl_error *err);

/*
 * Decode a RunRequest body.  On success *ret is filled and must be released
 * with pl_run_request_clear.  On failure nothing needs releasing.
 */
int pl_run_request_decode(const char *body, size_t len, const struct pl_request_limits *limits,
                          struct pl_run_request *ret, struct pl_error *err);
void pl_run_request_clear(struct pl_run_request *req);

/*
 * Decode a body that must be an empty message ({}), such as DescribeRequest.
 * An empty body counts as {}.
 */
int pl_empty_request_decode(const char *body, size_t len, struct pl_error *err);
