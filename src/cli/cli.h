/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.h: what the command-line client's files share.
 *
 * The CLI (src/cli/), a libplimsoll program:
 *   cli.h       this header
 *   plimsoll.c  main, the usage text and every subcommand but mcp
 *   mcp.c       plimsoll mcp: MCP's stdio transport relayed to the
 *               daemon's /mcp
 *   mcp_frames.c  the framings plimsoll mcp reads: stdin's lines, an
 *               event-stream answer (fuzz_mcp_relay)
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "../core/buf.h"

/* The exit statuses every subcommand shares (plimsoll.c's comment says
 * what each means to a shell script). */
enum {
    EXIT_RAN_OK = 0,
    EXIT_RAN_NONZERO = 1,
    EXIT_USAGE = 2,
    EXIT_REFUSED = 3,
    EXIT_INFRA = 4,
    EXIT_MISMATCH = 5,
    EXIT_RECORD = 6,
};

/* `plimsoll mcp [--minimum-isolation TIER] [--max-message-bytes N]`, argv[0]
 * being "mcp": relays newline-delimited JSON-RPC between stdin/stdout and
 * the daemon's /mcp until stdin ends or SIGTERM/SIGINT; 0 then, EXIT_USAGE
 * for a bad option or setting (nothing read). */
int cmd_mcp(int argc, char **argv);

/* A client of the daemon from the environment (PLIMSOLL_URL, the key,
 * PLIMSOLL_MAX_ANSWER_BYTES), each subcommand's; NULL with a line on
 * stderr when a setting is wrong. */
struct plimsoll_client;
struct plimsoll_client *cli_client_from_env(void);

/* ---- mcp_frames.c ---- */

/* MCP's stdio framing: newline-delimited messages of at most max bytes
 * (the newline, and a CR before it, not counted in). */
struct mcp_lines {
    struct pl_buf line; /* the line so far */
    size_t max;
    bool skipping; /* inside a line past max: its rest is read into nothing */
};
struct mcp_line_sink {
    /* A whole line without its line break: take line's buffer (set it to
     * {0}) or leave it to be freed. */
    void (*line)(void *ud, struct pl_buf *line);
    /* A line refused: past max (oom false) or out of memory; its rest is
     * skipped, and the next line is read as usual. */
    void (*refused)(void *ud, bool oom);
    void *ud;
};
/* Feed n bytes of the stream, in any pieces: the same lines and refusals
 * come, in the same order, however the bytes are cut. */
void mcp_lines_feed(struct mcp_lines *l, const char *p, size_t n, const struct mcp_line_sink *sink);
/* The stream ended: a last line without its newline is a line; l is
 * empty again. */
void mcp_lines_end(struct mcp_lines *l, const struct mcp_line_sink *sink);

/* A text/event-stream body: event is called with each event's data (its
 * data lines joined with line breaks; other fields and comments carry
 * nothing); the sum of what it returned.  *ret_oom when an event was
 * dropped for want of memory. */
size_t mcp_sse_events(const char *p, size_t len,
                      size_t (*event)(void *ud, const struct pl_buf *data), void *ud,
                      bool *ret_oom);
