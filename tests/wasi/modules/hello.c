/* SPDX-License-Identifier: Apache-2.0 */
/* hello.c - the smallest useful WASI command: one line on stdout. */
#include <stdio.h>

int main(void) {
    puts("hello, world");
    return 0;
}
