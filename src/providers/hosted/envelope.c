/* SPDX-License-Identifier: Apache-2.0 */
/*
 * envelope.c: the envelopes of Connect streaming and gRPC (hosted.h).
 */
#include <stdlib.h>
#include <string.h>

#include "hosted.h"

void ph_envelopes_init(struct ph_envelopes *e, size_t max,
                       int (*on_message)(void *, unsigned, const unsigned char *, size_t),
                       void *userdata) {
    *e = (struct ph_envelopes){.max = max, .on_message = on_message, .userdata = userdata};
}

int ph_envelopes_feed(struct ph_envelopes *e, const unsigned char *data, size_t len) {
    while (len > 0 && !e->broken) {
        if (e->hdr_len < 5) {
            size_t take = 5 - e->hdr_len < len ? 5 - e->hdr_len : len;
            memcpy(e->hdr + e->hdr_len, data, take);
            e->hdr_len += take;
            data += take;
            len -= take;
            if (e->hdr_len < 5)
                break;
            e->msg_need = (size_t)e->hdr[1] << 24 | (size_t)e->hdr[2] << 16 |
                          (size_t)e->hdr[3] << 8 | e->hdr[4];
            if (e->msg_need > e->max) {
                e->broken = true;
                break;
            }
            e->msg_len = 0;
            free(e->msg);
            e->msg = malloc(e->msg_need + 1);
            if (!e->msg) {
                e->broken = true;
                break;
            }
        }
        size_t take = e->msg_need - e->msg_len < len ? e->msg_need - e->msg_len : len;
        memcpy(e->msg + e->msg_len, data, take);
        e->msg_len += take;
        data += take;
        len -= take;
        if (e->msg_len == e->msg_need) {
            e->msg[e->msg_len] = '\0';
            e->hdr_len = 0;
            if (e->on_message(e->userdata, e->hdr[0], e->msg, e->msg_len) < 0)
                e->broken = true;
            free(e->msg);
            e->msg = NULL;
        }
    }
    return e->broken ? -1 : 0;
}

bool ph_envelopes_idle(const struct ph_envelopes *e) {
    return !e->broken && e->hdr_len == 0;
}

void ph_envelopes_free(struct ph_envelopes *e) {
    free(e->msg);
    e->msg = NULL;
}

int ph_envelope_append(struct pl_buf *b, unsigned flags, const void *msg, size_t len) {
    unsigned char h[5] = {(unsigned char)flags, (unsigned char)(len >> 24),
                          (unsigned char)(len >> 16), (unsigned char)(len >> 8),
                          (unsigned char)len};
    if (len > 0xffffffffu || pl_buf_append(b, h, 5) < 0)
        return -1;
    return len ? pl_buf_append(b, msg, len) : 0;
}
