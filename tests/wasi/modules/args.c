/* SPDX-License-Identifier: Apache-2.0 */
/* args.c - prints argc and then each argv entry on its own line. */
#include <stdio.h>

int main(int argc, char **argv) {
    printf("argc=%d\n", argc);
    for (int i = 0; i < argc; i++)
        printf("argv[%d]=%s\n", i, argv[i]);
    return 0;
}
