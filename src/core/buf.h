/* SPDX-License-Identifier: Apache-2.0 */
/*
 * buf.h: a growable byte buffer, NUL-terminated for convenience.
 */
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct pl_buf {
    char *data;
    size_t len;
    size_t cap;
};

/* Append; returns < 0 on allocation failure (the buffer stays valid). */
int pl_buf_append(struct pl_buf *b, const void *data, size_t len);
int pl_buf_puts(struct pl_buf *b, const char *s);
int pl_buf_printf(struct pl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pl_buf_free(struct pl_buf *b);

/* protobuf's wire format, for the few messages written by hand (gRPC's
 * status, google.rpc.ErrorInfo, the binary codec): a varint, and a
 * length-delimited field (key, length, bytes).  < 0 on allocation failure. */
int pl_buf_put_varint(struct pl_buf *b, uint64_t v);
int pl_buf_put_pb_bytes(struct pl_buf *b, unsigned field, const void *data, size_t len);
