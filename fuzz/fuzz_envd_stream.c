/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_envd_stream.c: the daemon's reader of envd's process stream
 * (src/providers/e2b/events.c over src/providers/hosted/envelope.c).  The
 * input is what a hostile VM, or a broken proxy in front of it, answers a
 * process start with, cut into two deliveries at a point the first byte
 * chooses.  Whatever the bytes, the reader keeps no more than its caps,
 * counts at least what it kept, and once broken stays broken.
 *
 *   build-fuzz/fuzz/fuzz_envd_stream fuzz/corpus/envd_stream
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/e2b/e2b_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    size_t cap = data[0] & 0x0f ? (size_t)(data[0] & 0x0f) * 7 : 4096;
    size_t cut = size > 1 ? (size_t)data[0] % size : 0;
    data++, size--;
    if (cut > size)
        cut = size;
    struct eb_proc p;
    eb_proc_init(&p, cap);
    struct eb_stream st;
    eb_stream_init(&st, &p);
    int a = eb_stream_feed(&st, data, cut);
    int b = eb_stream_feed(&st, data + cut, size - cut);
    if (a < 0 && b == 0)
        abort(); /* a broken stream never mends */
    if (p.out.kept.len > cap || p.err.kept.len > cap || p.out.total < p.out.kept.len ||
        p.err.total < p.err.kept.len)
        abort();
    if (st.env.msg && ph_envelopes_idle(&st.env))
        abort(); /* no message held between messages */
    eb_stream_free(&st);
    eb_proc_free(&p);
    return 0;
}
