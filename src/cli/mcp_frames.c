/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mcp_frames.c: the two framings `plimsoll mcp` reads (cli.h): MCP's
 * stdio lines from the client, and a text/event-stream answer from the
 * daemon.  Pure functions of the bytes, so fuzz_mcp_relay reaches them
 * without a relay, a daemon or a terminal.
 */
#include <string.h>

#include "cli.h"

/* The line's end: its bytes handed over, or the line dropped. */
static void line_end(struct mcp_lines *l, const struct mcp_line_sink *sink) {
    if (!l->skipping) {
        if (l->line.len && l->line.data[l->line.len - 1] == '\r')
            l->line.len--;
        sink->line(sink->ud, &l->line); /* the sink takes the buffer, or leaves it */
    }
    pl_buf_free(&l->line);
    l->skipping = false;
}

void mcp_lines_feed(struct mcp_lines *l, const char *p, size_t n,
                    const struct mcp_line_sink *sink) {
    const char *end = p + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t k = (size_t)((nl ? nl : end) - p);
        if (!l->skipping && k > l->max - l->line.len) {
            pl_buf_free(&l->line);
            l->skipping = true;
            sink->refused(sink->ud, false);
        }
        if (!l->skipping && pl_buf_append(&l->line, p, k) < 0) {
            pl_buf_free(&l->line);
            l->skipping = true;
            sink->refused(sink->ud, true);
        }
        if (!nl)
            return;
        line_end(l, sink);
        p = nl + 1;
    }
}

void mcp_lines_end(struct mcp_lines *l, const struct mcp_line_sink *sink) {
    if (!l->skipping && l->line.len)
        line_end(l, sink); /* a last line without its newline */
    pl_buf_free(&l->line);
    l->skipping = false;
}

size_t mcp_sse_events(const char *p, size_t len,
                      size_t (*event)(void *ud, const struct pl_buf *data), void *ud,
                      bool *ret_oom) {
    struct pl_buf data = {0};
    size_t taken = 0;
    bool have = false, oom = false;
    *ret_oom = false;
    const char *end = p + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        if (n && p[n - 1] == '\r')
            n--;
        if (n == 0) { /* a blank line ends an event */
            if (have && !oom)
                taken += event(ud, &data);
            *ret_oom = *ret_oom || oom;
            data.len = 0;
            have = oom = false;
        } else if (n >= 5 && memcmp(p, "data:", 5) == 0) {
            const char *d = p + 5 + (n > 5 && p[5] == ' ');
            if ((have && pl_buf_append(&data, "\n", 1) < 0) ||
                pl_buf_append(&data, d, (size_t)(p + n - d)) < 0)
                oom = true;
            have = true;
        }
        p = nl ? nl + 1 : end;
    }
    if (have && !oom) /* the body's end ends the last event */
        taken += event(ud, &data);
    *ret_oom = *ret_oom || oom;
    pl_buf_free(&data);
    return taken;
}
