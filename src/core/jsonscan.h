/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jsonscan.h: the shape of a JSON text, measured before a parser builds it.
 *
 * jansson turns every value into a heap node (an empty array costs about
 * a hundred bytes of tree for its two bytes of text), so a 14 MiB body of
 * "[],[],..." becomes hundreds of MiB before any field is looked at.  One
 * linear pass over the bytes, in constant memory, counts the elements and
 * the nesting depth first; a text past either bound is refused before
 * jansson sees it.
 *
 * The pass only measures: it does not validate.  On any valid JSON text it
 * counts exactly (the fuzz harness fuzz/fuzz_jsonscan.c checks this against
 * jansson's own tree); on an invalid one it counts something, stays inside
 * the buffer and returns, and the parser then refuses the text.
 */
#pragma once

#include <stddef.h>

#include "errors.h"

/*
 * Bounds of every request body (docs/configuration.md, "Request bounds").
 * They follow from the request language's own limits (config.h), so they
 * are constants, not settings: the largest legal request has 4,551
 * elements (RunInSession around a project with 256 files and 32 steps of 64
 * arguments, every optional field given in both spellings as null) and
 * nests 6 deep (RunInSession > run > project > steps > step > argv).
 */
#define PL_JSON_MAX_ELEMENTS 8192u
#define PL_JSON_MAX_DEPTH 8u

/* What one pass measured. */
struct pl_json_shape {
    size_t elements; /* values (objects, arrays, strings, numbers, literals) plus object keys */
    size_t depth;    /* deepest nesting of objects and arrays; 0 for a lone scalar */
};

/*
 * Measure text[0..len).  Stops early, with the counts so far, as soon as
 * elements exceeds max_elements or depth exceeds max_depth (pass SIZE_MAX
 * for no bound).  Never reads past len; needs no NUL terminator.
 */
void pl_json_measure(const char *text, size_t len, size_t max_elements, size_t max_depth,
                     struct pl_json_shape *ret_shape);

/*
 * Refuse a text past PL_JSON_MAX_ELEMENTS or PL_JSON_MAX_DEPTH: returns -1
 * with INVALID_REQUEST and a message naming the bound; 0 otherwise (valid
 * JSON or not: the parser decides that).
 */
int pl_json_check_bounds(const char *text, size_t len, struct pl_error *err);
