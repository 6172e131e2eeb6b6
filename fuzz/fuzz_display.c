/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_display.c: a cell's display outputs as the daemon reads them
 * (src/core/display.c): a hosted cell's framed stderr (pl_frames_in), fed
 * in pieces whose size the input picks, and one bundle's parse.  The first
 * byte picks the bounds and the piece size; the rest is what vmcell (or a
 * guest in its place) wrote.  Whatever the bytes: stderr keeps no more
 * than its cap and counts what it kept, the outputs stay within their
 * bounds, nothing admitted is left hanging, and every kept output parses
 * again as it is.
 *
 *   build-fuzz/fuzz/fuzz_display fuzz/corpus/display
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/display.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t PIECES[4] = {1, 7, 512, 65536};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    uint8_t pick = data[0];
    data++;
    size--;
    json_t *whole = pl_display_parse((const char *)data, size);
    json_decref(whole);

    struct pl_display_bounds b = {.outputs = 1u + (pick & 3u),
                                  .output_bytes = 32u << ((pick >> 2) & 3u),
                                  .bytes = 64u << ((pick >> 4) & 1u)};
    size_t cap = (pick & 0x20) ? 16 : 4096;
    struct pl_capture err;
    pl_capture_init(&err, cap);
    struct pl_displays disp;
    pl_displays_init(&disp, b, NULL);
    struct pl_frames_in f = {.err = &err, .disp = &disp};
    size_t piece = PIECES[pick >> 6];
    for (size_t off = 0; off < size; off += piece) {
        size_t n = size - off < piece ? size - off : piece;
        if (pl_frames_in_feed(&f, data + off, n) < 0)
            abort();
    }
    pl_frames_in_end(&f);
    if (f.buf || disp.admitted || err.kept.len > cap || err.total < err.kept.len ||
        disp.used > b.bytes)
        abort();
    json_t *outs = NULL;
    unsigned dropped = 0;
    pl_displays_finish(&disp, &outs, &dropped);
    if (json_array_size(outs) > b.outputs)
        abort();
    if (!pl_display_list_reparses(outs))
        abort();
    json_decref(outs);
    pl_capture_free(&err);
    return 0;
}
