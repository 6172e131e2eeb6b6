/* SPDX-License-Identifier: Apache-2.0 */
/* exit3.c - writes a line and exits with status 3 via proc_exit. */
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    puts("about to exit 3");
    exit(3);
}
