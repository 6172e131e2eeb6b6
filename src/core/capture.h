/* SPDX-License-Identifier: Apache-2.0 */
/*
 * capture.h: a guest's output, kept up to a cap, the rest counted.
 *
 * Every provider reads a guest's stdout and stderr the same way: bytes are
 * kept until the stream's cap (SANDBOX_OUTPUT_BYTES), everything past it
 * is counted and dropped, and the result says whether anything was cut.
 * The kept bytes are never annotated (no "[truncated]" is written into
 * them).  A capture ends as a pl_output, the triple every result carries.
 * docs/internals/capture.md.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* What a result carries of one stream. */
struct pl_output {
    char *data; /* malloc'd, len bytes and a NUL; NULL only before it is set */
    size_t len;
    bool truncated; /* the guest wrote more than was kept */
};

/*
 * Where a streaming call's output goes as it is kept (RunStream,
 * RunCellStream; provider.h's pl_run_ctx.sink): each kept byte once, in the
 * order it was kept, with its stream (1 stdout, 2 stderr) and a project's
 * step (1-based; 0 for anything else).  Bytes past the cap are never
 * offered, so what a sink saw of a stream is exactly what the result
 * keeps of it.  write may be called from any of the provider's threads
 * and must not block on the caller.
 */
struct pl_output_sink {
    void (*write)(void *ud, unsigned step, int fd, const char *data, size_t len);
    void *ud;
    /* A cell's display output as it was kept (display.h), a well-formed
     * DisplayOutput object the sink may reference; NULL: not taken. */
    void (*display)(void *ud, json_t *output);
};

/* A stream being read. */
struct pl_capture {
    struct pl_buf kept;
    size_t cap;                        /* bytes kept at most */
    uint64_t total;                    /* bytes offered, kept or not */
    const struct pl_output_sink *sink; /* NULL unless the call streams */
    unsigned step;                     /* for the sink */
    int fd;                            /* for the sink: 1 or 2 */
};

/* An empty capture keeping at most cap bytes. */
void pl_capture_init(struct pl_capture *c, size_t cap);

/* Send what c keeps from now on to sink as well (NULL: nowhere), as
 * stream fd (1 or 2) of step. */
void pl_capture_stream(struct pl_capture *c, const struct pl_output_sink *sink, int fd,
                       unsigned step);

/* Offer len bytes: kept up to the cap (and then given to the sink),
 * counted either way.  0 or -ENOMEM. */
int pl_capture_add(struct pl_capture *c, const void *data, size_t len);

/* Whether more was offered than kept. */
bool pl_capture_truncated(const struct pl_capture *c);

/*
 * End the capture into out (its data malloc'd, an empty string when nothing
 * was kept); c is empty afterwards.  0 or -ENOMEM.
 */
int pl_capture_finish(struct pl_capture *c, struct pl_output *out);

/* Free a capture that was not finished (NULL-safe). */
void pl_capture_free(struct pl_capture *c);

/* Free an output's bytes (NULL-safe); the triple is zeroed. */
void pl_output_clear(struct pl_output *o);
