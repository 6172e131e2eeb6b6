/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_mcp_relay.c: libFuzzer harness for what `plimsoll mcp` reads
 * (src/cli/mcp_frames.c): stdin's newline-delimited lines, the input's
 * first two bytes picking the line bound and where the rest is cut into
 * pieces; and the same bytes as the daemon's event-stream answer.  The
 * lines and refusals must not depend on the cuts, every line is within
 * the bound with no line feed in it, and no event's data is longer than
 * the body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What a reading gave: each line's length and a digest of its bytes, and
 * each refusal, in order. */
struct seen {
    uint64_t sig;
    size_t lines, refused, max;
};

static void mix(struct seen *s, uint64_t v) {
    s->sig = (s->sig ^ v) * 1099511628211ull;
}

static void on_line(void *ud, struct pl_buf *line) {
    struct seen *s = ud;
    if (line->len > s->max || (line->len && memchr(line->data, '\n', line->len)))
        abort();
    mix(s, line->len);
    for (size_t i = 0; i < line->len; i++)
        mix(s, (unsigned char)line->data[i]);
    s->lines++;
    if (s->lines & 1) { /* take every other buffer, as a relay keeps its messages */
        pl_buf_free(line);
        *line = (struct pl_buf){0};
    }
}

static void on_refused(void *ud, bool oom) {
    struct seen *s = ud;
    mix(s, oom ? 0xfeu : 0xffu);
    s->refused++;
}

static struct seen read_all(const uint8_t *p, size_t n, size_t max, size_t cut) {
    struct seen s = {.sig = 14695981039346656037ull, .max = max};
    struct mcp_lines l = {.max = max};
    const struct mcp_line_sink sink = {on_line, on_refused, &s};
    for (size_t at = 0; at < n;) {
        size_t k = cut && n - at > cut ? cut : n - at;
        mcp_lines_feed(&l, (const char *)p + at, k, &sink);
        at += k;
    }
    mcp_lines_end(&l, &sink);
    if (l.line.data || l.line.len || l.skipping)
        abort(); /* the reader is empty again */
    return s;
}

static size_t body_len;
static size_t on_event(void *ud, const struct pl_buf *data) {
    (void)ud;
    if (data->len > body_len)
        abort();
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2)
        return 0;
    size_t max = 1 + data[0] % 64, cut = data[1] % 17;
    data += 2;
    size -= 2;
    struct seen whole = read_all(data, size, max, 0), pieces = read_all(data, size, max, cut);
    if (whole.sig != pieces.sig || whole.lines != pieces.lines || whole.refused != pieces.refused)
        abort(); /* the cuts changed what was read */
    bool oom;
    body_len = size;
    size_t events = mcp_sse_events((const char *)data, size, on_event, NULL, &oom);
    if (events > size + 1)
        abort();
    return 0;
}
