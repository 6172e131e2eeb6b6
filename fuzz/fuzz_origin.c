/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_origin.c: libFuzzer harness for the bytes of CORS (core/origin.c):
 * the input's first line is PLIMSOLL_CORS_ORIGINS, its second a request's
 * Origin looked up in what was parsed, its third an
 * Access-Control-Request-Headers.  Every origin the list keeps is
 * normalised already: normalising it again must give it back unchanged,
 * and it must find itself. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/origin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *origin = strchr(text, '\n');
    char *headers = NULL;
    if (origin) {
        *origin++ = '\0';
        headers = strchr(origin, '\n');
        if (headers)
            *headers++ = '\0';
    }
    static struct pl_origins list;
    struct pl_error err;
    if (pl_origins_parse(text, &list, &err) == 0) {
        for (unsigned i = 0; i < list.n; i++) {
            char again[PL_ORIGIN_MAX_BYTES + 1];
            if (pl_origin_normalise(list.origin[i], strlen(list.origin[i]), again, &err) < 0 ||
                strcmp(again, list.origin[i]) != 0 ||
                pl_origins_find(&list, list.origin[i]) != list.origin[i])
                abort();
        }
        if (origin)
            (void)pl_origins_find(&list, origin);
    }
    static const char *const allowed[] = {"authorization", "content-type", "x-grpc-web", NULL};
    if (headers)
        (void)pl_token_list_within(headers, allowed, 16);
    free(text);
    return 0;
}
