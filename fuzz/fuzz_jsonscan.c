/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_jsonscan.c: libFuzzer harness for the JSON shape pass, the first code
 * that reads a request body.  Besides memory safety (ASan, UBSan) it checks
 * the pass against jansson: on every text jansson accepts, the counts equal
 * those of jansson's own tree, and a bounded pass agrees with an unbounded
 * one up to where it stops. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../src/core/jsonscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Elements and depth of a jansson tree, counted as jsonscan.h defines them. */
static void tree_shape(const json_t *v, size_t *elements, size_t *depth) {
    *elements += 1;
    *depth = 0;
    size_t d = 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach((json_t *)v, k, c) {
            (void)k;
            *elements += 1; /* the key */
            tree_shape(c, elements, &d);
            if (d + 1 > *depth)
                *depth = d + 1;
        }
        if (*depth == 0)
            *depth = 1;
    } else if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c) {
            tree_shape(c, elements, &d);
            if (d + 1 > *depth)
                *depth = d + 1;
        }
        if (*depth == 0)
            *depth = 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    struct pl_json_shape all, bounded;
    pl_json_measure(text, size, SIZE_MAX, SIZE_MAX, &all);
    pl_json_measure(text, size, 16, 4, &bounded);
    if (bounded.elements > all.elements || bounded.depth > all.depth)
        abort(); /* a prefix never counts more than the whole */
    if (all.elements <= 16 && all.depth <= 4 &&
        (bounded.elements != all.elements || bounded.depth != all.depth))
        abort(); /* within the bounds the pass never stops early */
    if ((bounded.elements > 16 || bounded.depth > 4) != (all.elements > 16 || all.depth > 4))
        abort(); /* and past them it always notices */

    json_error_t jerr;
    json_t *root =
        json_loadb(text, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (root) {
        size_t elements = 0, depth = 0;
        tree_shape(root, &elements, &depth);
        if (elements != all.elements || depth != all.depth)
            abort(); /* the pass counts exactly what the parser builds */
        json_decref(root);
    }
    struct pl_error err;
    pl_json_check_bounds(text, size, &err);
    return 0;
}
