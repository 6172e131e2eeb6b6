/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jsonscan.c: count a JSON text's elements and depth in one pass (see
 * jsonscan.h).
 *
 * A valid JSON text is a sequence of tokens: strings, numbers, the three
 * literals, and the structural characters.  Every string is one element (a
 * key or a value), every number or literal one value, every '{' or '[' one
 * value that opens a level.  So counting tokens, skipping string contents
 * with their escapes, counts exactly what jansson will build, without a
 * stack: depth is a counter.
 */
#include "jsonscan.h"

#include <stdbool.h>

static bool ends_scalar(unsigned char c) {
    switch (c) {
    case ' ':
    case '\t':
    case '\n':
    case '\r':
    case ',':
    case ':':
    case '[':
    case ']':
    case '{':
    case '}':
    case '"': return true;
    default: return false;
    }
}

void pl_json_measure(const char *text, size_t len, size_t max_elements, size_t max_depth,
                     struct pl_json_shape *ret_shape) {
    const unsigned char *t = (const unsigned char *)text;
    size_t elements = 0, depth = 0, deepest = 0;
    size_t i = 0;
    while (i < len && elements <= max_elements && deepest <= max_depth) {
        unsigned char c = t[i++];
        switch (c) {
        case ' ':
        case '\t':
        case '\n':
        case '\r':
        case ',':
        case ':': break;
        case '{':
        case '[':
            elements++;
            if (++depth > deepest)
                deepest = depth;
            break;
        case '}':
        case ']':
            if (depth > 0)
                depth--;
            break;
        case '"':
            elements++;
            while (i < len) {
                unsigned char s = t[i++];
                if (s == '"')
                    break;
                if (s == '\\')
                    i++; /* the escaped byte; a "\u" escape's hex digits are plain bytes */
            }
            break;
        default: /* a number, a literal, or bytes the parser will refuse */
            elements++;
            while (i < len && !ends_scalar(t[i]))
                i++;
            break;
        }
    }
    ret_shape->elements = elements;
    ret_shape->depth = deepest;
}

int pl_json_check_bounds(const char *text, size_t len, struct pl_error *err) {
    struct pl_json_shape s;
    pl_json_measure(text, len, PL_JSON_MAX_ELEMENTS, PL_JSON_MAX_DEPTH, &s);
    if (s.depth > PL_JSON_MAX_DEPTH)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "body: JSON nested deeper than %u levels (PL_JSON_MAX_DEPTH); no "
                            "request nests deeper than 6",
                            PL_JSON_MAX_DEPTH);
    if (s.elements > PL_JSON_MAX_ELEMENTS)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "body: more than %u JSON elements (PL_JSON_MAX_ELEMENTS); the largest "
                            "legal request has 4551",
                            PL_JSON_MAX_ELEMENTS);
    return 0;
}
