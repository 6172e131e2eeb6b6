/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_lib_stream.c: libplimsoll's reader of a RunStream answer
 * (src/lib/stream.c), the envelopes a daemon, or whatever answers in its
 * place, streams back.  The first byte chooses the project's steps (0-3),
 * an output function that stops at some chunk, and how the rest is cut:
 * the body is read twice, whole and in pieces, and both readings must end
 * the same way with the same chunks delivered.  Whatever the bytes, a
 * broken stream stays broken, no message is held past its bound, and a
 * result comes only from a stream that ended.
 *
 *   build-fuzz/fuzz/fuzz_lib_stream fuzz/corpus/lib_stream
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/lib/lib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct tally {
    uint64_t hash; /* FNV-1a over each chunk's step and bytes */
    int chunks, stop_at;
};

static void mix(uint64_t *h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ b[i]) * 1099511628211ull;
}

static int on_output(void *ud, const struct plimsoll_output *ch) {
    struct tally *t = ud;
    if ((ch->stdout_len && !ch->stdout_data) || (ch->stderr_len && !ch->stderr_data) ||
        (ch->stdout_len && ch->stdout_data[ch->stdout_len] != '\0') ||
        (ch->stderr_len && ch->stderr_data[ch->stderr_len] != '\0') ||
        (!ch->stdout_len && !ch->stderr_len && !ch->display) ||
        (ch->display && (ch->stdout_len || ch->stderr_len)) || ch->step > 3)
        abort(); /* only chunks with bytes, NUL-terminated, of a step that exists, or a
                    display output alone */
    if (ch->display) {
        char *d = json_dumps(ch->display, JSON_COMPACT | JSON_SORT_KEYS);
        if (!d)
            abort();
        mix(&t->hash, d, strlen(d));
        free(d);
    }
    mix(&t->hash, &ch->step, sizeof(ch->step));
    mix(&t->hash, ch->stdout_data ? ch->stdout_data : "", ch->stdout_len);
    mix(&t->hash, "|", 1);
    mix(&t->hash, ch->stderr_data ? ch->stderr_data : "", ch->stderr_len);
    t->chunks++;
    return t->stop_at && t->chunks >= t->stop_at;
}

/* Read body in pieces of `piece` bytes (0: whole); its outcome. */
static int read_stream(const uint8_t *body, size_t len, unsigned nsteps, size_t piece,
                       struct tally *t, struct plimsoll_error *err) {
    struct plc_stream s;
    if (plc_stream_init(&s, "RunStream", 1 << 20, nsteps, on_output, t) < 0)
        return -2;
    bool failed = false;
    for (size_t off = 0; off < len;) {
        size_t n = piece && piece < len - off ? piece : len - off;
        int r = plc_stream_feed(&s, body + off, n);
        if (failed && r == 0)
            abort(); /* a broken stream never mends */
        failed = failed || r < 0;
        if (s.msg.len > PLIMSOLL_MAX_STREAM_MESSAGE || s.body > s.max_body)
            abort(); /* nothing held past its bound */
        off += n;
    }
    json_t *res = NULL;
    int r = plc_stream_finish(&s, &res, err);
    if (r == 0 && (failed || !s.ended || !json_is_object(res) || s.error))
        abort(); /* a result only from a whole stream that ended well */
    if (r < 0 && res)
        abort();
    json_decref(res);
    plc_stream_free(&s);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    unsigned nsteps = data[0] & 3;
    int stop_at = (data[0] >> 2) & 3;
    size_t piece = (size_t)(data[0] >> 4) + 1;
    data++, size--;
    struct tally whole = {.hash = 14695981039346656037ull, .stop_at = stop_at};
    struct tally cut = whole;
    struct plimsoll_error e1, e2;
    int a = read_stream(data, size, nsteps, 0, &whole, &e1);
    int b = read_stream(data, size, nsteps, piece, &cut, &e2);
    if (a == -2 || b == -2)
        return 0;
    /* Cut anywhere, the same chunks and the same end. */
    if (a != b || whole.chunks != cut.chunks || whole.hash != cut.hash ||
        (a < 0 && (e1.kind != e2.kind || strcmp(e1.code, e2.code) != 0)))
        abort();
    return 0;
}
