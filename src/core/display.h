/* SPDX-License-Identifier: Apache-2.0 */
/*
 * display.h: a cell's display outputs (docs/sessions.md, "Display
 * outputs"), as the guest's interpreter sends them: one MIME bundle a
 * message, {"kind": "display" | "result", "data": {TYPE: STRING, ...}}.
 * Every byte of it is the guest's.  A bundle is charged to the cell's
 * bounds before its bytes are read, parsed whole or dropped, and a dropped
 * one is counted, never cut: what the answer carries is always well
 * formed.
 */
#ifndef PLIMSOLL_CORE_DISPLAY_H
#define PLIMSOLL_CORE_DISPLAY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture.h"

/* A bundle holds at most this many MIME types, each named in at most
 * PL_DISPLAY_MIME_MAX bytes. */
#define PL_DISPLAY_TYPES_MAX 16u
#define PL_DISPLAY_MIME_MAX 127u

/* One cell's bounds: SANDBOX_DISPLAY_OUTPUTS, SANDBOX_DISPLAY_OUTPUT_BYTES
 * (one bundle as sent), SANDBOX_DISPLAY_BYTES (all the kept bundles). */
struct pl_display_bounds {
    unsigned outputs;
    unsigned output_bytes;
    unsigned bytes;
};

/* One cell's outputs as they come. */
struct pl_displays {
    struct pl_display_bounds b;
    json_t *list;     /* kept outputs, in order; NULL until the first */
    size_t used;      /* bytes charged: the kept bundles' and the one admitted */
    size_t admitted;  /* the admitted bundle's size, until pl_displays_take */
    unsigned dropped; /* outputs left out */
    const struct pl_output_sink *sink;
};

void pl_displays_init(struct pl_displays *d, struct pl_display_bounds b,
                      const struct pl_output_sink *sink);

/*
 * A bundle of n bytes is coming: true when the bounds let it in (its bytes
 * are charged now; read them, then give them to pl_displays_take); false
 * when it is dropped (counted; read and discard its bytes).
 */
bool pl_displays_admit(struct pl_displays *d, size_t n);

/* The admitted bundle's bytes: kept when well formed (and given to the
 * sink), otherwise dropped and its charge given back. */
void pl_displays_take(struct pl_displays *d, const char *data, size_t n);

/* The admitted bundle will not come whole (its channel failed, or no
 * memory): dropped, its charge given back. */
void pl_displays_cancel(struct pl_displays *d);

/* Hand the kept outputs to *outputs (NULL when none came) and the count of
 * dropped ones to *dropped; d is empty afterwards. */
void pl_displays_finish(struct pl_displays *d, json_t **outputs, unsigned *dropped);

/* Free what d keeps (NULL-safe). */
void pl_displays_free(struct pl_displays *d);

/*
 * A hosted cell's stderr as session_agent.py's vmcell writes it: frames of
 * a type byte and a 4-byte big-endian length, "E" the interpreter's stderr
 * bytes, "D" a display output.  Fed as it comes, in pieces of any size:
 * "E" bytes go to err (and its sink), "D" frames to disp under its bounds
 * (a frame they do not admit is skipped as it comes).  Bytes that are not
 * that framing (vmcell's own traceback, or a guest writing into the
 * stream) end the framing: they and everything after go to err as they
 * are.
 */
struct pl_frames_in {
    struct pl_capture *err;
    struct pl_displays *disp;
    unsigned char head[5];
    size_t hlen;   /* header bytes so far */
    uint32_t left; /* the current frame's bytes still to come */
    char *buf;     /* an admitted "D" frame's bytes, n in all */
    uint32_t n, got;
    bool raw; /* the framing ended */
};

/* 0, or -ENOMEM (err's). */
int pl_frames_in_feed(struct pl_frames_in *f, const void *data, size_t len);

/* The stream ended: a frame it cut is dropped (a "D" frame counted). */
void pl_frames_in_end(struct pl_frames_in *f);

/* One bundle's bytes parsed and checked (the shape above, at most
 * PL_DISPLAY_TYPES_MAX types, each a type/subtype token, text types valid
 * UTF-8 without NUL, every other type strict base64): the DisplayOutput
 * object, or NULL. */
json_t *pl_display_parse(const char *data, size_t n);

/* Whether every member of list is a DisplayOutput pl_display_parse keeps
 * as it is once written out again (the fuzzers' check of what a cell
 * kept). */
bool pl_display_list_reparses(const json_t *list);

/* Whether a MIME type's data is text (text/ *, application/json,
 * application/javascript, image/svg+xml, *+json, *+xml) rather than
 * base64. */
bool pl_display_mime_is_text(const char *mime);

#endif
