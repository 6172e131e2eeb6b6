/* SPDX-License-Identifier: Apache-2.0 */
/*
 * capture.c: a guest's output, kept up to a cap (capture.h).
 */
#include "capture.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void pl_capture_init(struct pl_capture *c, size_t cap) {
    memset(c, 0, sizeof(*c));
    c->cap = cap;
}

/* Room for len more bytes and the NUL, growing geometrically but never
 * past the cap: a stream near a large cap holds the cap, not twice it. */
static int reserve(struct pl_capture *c, size_t len) {
    size_t need = c->kept.len + len + 1;
    if (need <= c->kept.cap)
        return 0;
    size_t ncap = c->kept.cap ? c->kept.cap : 256;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    if (c->cap < SIZE_MAX && ncap > c->cap + 1)
        ncap = c->cap + 1; /* need <= cap + 1: only kept bytes are stored */
    char *nd = realloc(c->kept.data, ncap);
    if (!nd)
        return -ENOMEM;
    c->kept.data = nd;
    c->kept.cap = ncap;
    return 0;
}

void pl_capture_stream(struct pl_capture *c, const struct pl_output_sink *sink, int fd,
                       unsigned step) {
    c->sink = sink && sink->write ? sink : NULL;
    c->fd = fd;
    c->step = step;
}

int pl_capture_add(struct pl_capture *c, const void *data, size_t len) {
    size_t room = c->kept.len < c->cap ? c->cap - c->kept.len : 0;
    size_t keep = len < room ? len : room;
    c->total += len;
    if (keep && (reserve(c, keep) < 0 || pl_buf_append(&c->kept, data, keep) < 0))
        return -ENOMEM;
    if (keep && c->sink)
        c->sink->write(c->sink->ud, c->step, c->fd, data, keep);
    return 0;
}

bool pl_capture_truncated(const struct pl_capture *c) {
    return c->total > c->kept.len;
}

int pl_capture_finish(struct pl_capture *c, struct pl_output *out) {
    out->truncated = pl_capture_truncated(c);
    out->len = c->kept.len;
    out->data = c->kept.data ? c->kept.data : calloc(1, 1);
    c->kept.data = NULL;
    c->kept.len = c->kept.cap = 0;
    c->total = 0;
    c->sink = NULL;
    return out->data ? 0 : -ENOMEM;
}

void pl_capture_free(struct pl_capture *c) {
    if (c)
        pl_buf_free(&c->kept);
}

void pl_output_clear(struct pl_output *o) {
    if (o) {
        free(o->data);
        *o = (struct pl_output){0};
    }
}
