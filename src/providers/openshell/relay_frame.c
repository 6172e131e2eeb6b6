/* SPDX-License-Identifier: Apache-2.0 */
/*
 * relay_frame.c: the relay's frames as the daemon reads them (relay.c,
 * guest/relay.py say what they carry).  Apart so its fuzz harness,
 * fuzz/fuzz_osh_relay.c, links it alone: every byte here is the guest's.
 */
#include <string.h>

#include "osh_int.h"

void osh_relay_rx_init(struct osh_relay_rx *rx) {
    memset(rx, 0, sizeof(*rx));
}

int osh_relay_rx_feed(struct osh_relay_rx *rx, const unsigned char *data, size_t len,
                      int (*on_frame)(void *ud, unsigned type, uint32_t id, const unsigned char *p,
                                      size_t n),
                      void *ud) {
    if (rx->broken)
        return -1;
    while (len) {
        if (rx->hdr_len < OSH_RELAY_HDR) {
            size_t take = OSH_RELAY_HDR - rx->hdr_len;
            take = take < len ? take : len;
            memcpy(rx->hdr + rx->hdr_len, data, take);
            rx->hdr_len += take;
            data += take;
            len -= take;
            if (rx->hdr_len < OSH_RELAY_HDR)
                return 0;
            rx->type = rx->hdr[0];
            rx->id = (uint32_t)rx->hdr[1] << 24 | (uint32_t)rx->hdr[2] << 16 |
                     (uint32_t)rx->hdr[3] << 8 | rx->hdr[4];
            rx->need = (size_t)rx->hdr[5] << 24 | (size_t)rx->hdr[6] << 16 |
                       (size_t)rx->hdr[7] << 8 | rx->hdr[8];
            rx->have = 0;
            bool known = rx->type == OSH_RELAY_READY || rx->type == OSH_RELAY_OPEN ||
                         rx->type == OSH_RELAY_DATA || rx->type == OSH_RELAY_CLOSE;
            if (!known || rx->need > OSH_RELAY_FRAME_MAX ||
                (rx->type != OSH_RELAY_DATA && rx->type != OSH_RELAY_READY && rx->need)) {
                rx->broken = true;
                return -1;
            }
        }
        size_t take = rx->need - rx->have;
        take = take < len ? take : len;
        memcpy(rx->payload + rx->have, data, take);
        rx->have += take;
        data += take;
        len -= take;
        if (rx->have < rx->need)
            return 0;
        rx->hdr_len = 0;
        if (on_frame(ud, rx->type, rx->id, rx->payload, rx->need) < 0) {
            rx->broken = true;
            return -1;
        }
    }
    return 0;
}
