/* SPDX-License-Identifier: Apache-2.0 */
/* grow.c - grows linear memory 1 MiB (16 pages) at a time until
 * memory.grow fails, then reports how far it got. */
#include <stdio.h>

int main(void) {
    long last = -2;
    for (int i = 0; i < 70000; i++) {
        long r = (long)__builtin_wasm_memory_grow(0, 16);
        if (r == -1) {
            printf("memory.grow returned -1 at %lu pages (%lu bytes)\n",
                   (unsigned long)__builtin_wasm_memory_size(0),
                   (unsigned long)__builtin_wasm_memory_size(0) * 65536ul);
            return 0;
        }
        last = r;
    }
    printf("never failed, last=%ld\n", last);
    return 1;
}
