/* SPDX-License-Identifier: Apache-2.0 */
/* buf.c: the growable buffer of buf.h. */
#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(struct pl_buf *b, size_t extra) {
    if (extra > ((size_t)-1) / 2 - b->len)
        return -1;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < need)
        ncap *= 2;
    char *nd = realloc(b->data, ncap);
    if (!nd)
        return -1;
    b->data = nd;
    b->cap = ncap;
    return 0;
}

int pl_buf_append(struct pl_buf *b, const void *data, size_t len) {
    if (reserve(b, len) < 0)
        return -1;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

int pl_buf_puts(struct pl_buf *b, const char *s) {
    return pl_buf_append(b, s, strlen(s));
}

int pl_buf_printf(struct pl_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n) < 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void pl_buf_free(struct pl_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int pl_buf_put_varint(struct pl_buf *b, uint64_t v) {
    unsigned char tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return pl_buf_append(b, tmp, n);
}

int pl_buf_put_pb_bytes(struct pl_buf *b, unsigned field, const void *data, size_t len) {
    if (pl_buf_put_varint(b, (uint64_t)field << 3 | 2) < 0 || pl_buf_put_varint(b, len) < 0)
        return -1;
    return pl_buf_append(b, data, len);
}
