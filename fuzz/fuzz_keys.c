/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_keys.c: libFuzzer harness for the keys file and Authorization header. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct pl_keys *keys = NULL;
    struct pl_error err;
    if (pl_keys_parse((const char *)data, size, &keys, &err) == 0) {
        pl_keys_authenticate(keys, (const char *)data, size);
        pl_keys_free(keys);
    }
    char *h = malloc(size + 1);
    if (!h)
        return 0;
    memcpy(h, data, size);
    h[size] = '\0';
    const char *k;
    size_t n;
    pl_bearer_parse(h, &k, &n);
    free(h);
    return 0;
}
