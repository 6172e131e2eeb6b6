/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_osh_relay.c: the frames of the OpenShell relay as the daemon reads
 * them (openshell/relay_frame.c).  Every byte on that stream is the
 * guest's: the relay runs as its user.  The first input byte picks how the
 * rest arrives (in pieces of 1-255 bytes, or whole); the frames read must
 * be the same either way, each of a known type, no longer than
 * OSH_RELAY_FRAME_MAX, with bytes only on R and D; once broken, the reader
 * stays broken.
 *
 *   build-fuzz/fuzz/fuzz_osh_relay fuzz/corpus/osh_relay
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/openshell/osh_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    uint64_t hash; /* FNV-1a over every frame read */
    size_t frames;
    size_t refuse_at; /* on_frame refuses this frame (0: none) */
};

static int on_frame(void *ud, unsigned type, uint32_t id, const unsigned char *p, size_t n) {
    struct seen *s = ud;
    if (n > OSH_RELAY_FRAME_MAX)
        abort();
    if (type != OSH_RELAY_READY && type != OSH_RELAY_OPEN && type != OSH_RELAY_DATA &&
        type != OSH_RELAY_CLOSE)
        abort();
    if ((type == OSH_RELAY_OPEN || type == OSH_RELAY_CLOSE) && n)
        abort();
    uint64_t h = s->hash ? s->hash : 1469598103934665603ull;
    unsigned char head[9] = {(unsigned char)type, (unsigned char)(id >> 24),
                             (unsigned char)(id >> 16), (unsigned char)(id >> 8),
                             (unsigned char)id};
    for (size_t i = 0; i < sizeof(head); i++)
        h = (h ^ head[i]) * 1099511628211ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    s->hash = h;
    s->frames++;
    return s->refuse_at && s->frames == s->refuse_at ? -1 : 0;
}

static struct osh_relay_rx rx_a, rx_b; /* 64 KiB each: not on the stack */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2)
        return 0;
    size_t piece = data[0];
    size_t refuse_at = data[1] & 0x07;
    data += 2, size -= 2;
    struct seen whole = {.refuse_at = refuse_at}, pieces = {.refuse_at = refuse_at};
    osh_relay_rx_init(&rx_a);
    osh_relay_rx_init(&rx_b);
    int rc_whole = osh_relay_rx_feed(&rx_a, data, size, on_frame, &whole);
    int rc_pieces = 0;
    for (size_t off = 0; off < size && rc_pieces == 0;) {
        size_t n = piece ? piece : size;
        n = n < size - off ? n : size - off;
        rc_pieces = osh_relay_rx_feed(&rx_b, data + off, n, on_frame, &pieces);
        off += n;
    }
    if (rc_whole != rc_pieces || whole.frames != pieces.frames || whole.hash != pieces.hash)
        abort();
    if (rc_whole < 0 &&
        (osh_relay_rx_feed(&rx_a, (const uint8_t *)"C\0\0\0\1\0\0\0\0", 9, on_frame, &whole) >= 0 ||
         whole.frames != pieces.frames))
        abort(); /* broken stays broken */
    return 0;
}
