/* SPDX-License-Identifier: Apache-2.0 */
/* recurse.c - recurses to the depth given as argv[1] (default 10^7), then
 * prints "depth N ok".  Deep enough values exhaust the interpreter's call
 * stack and must trap. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static long down(long n) {
    if (n == 0)
        return 0;
    return 1 + down(n - 1) * (n & 1); /* not a tail call */
}

int main(int argc, char **argv) {
    long depth = argc > 1 ? atol(argv[1]) : 10000000L;
    long r = down(depth);
    printf("depth %ld ok (%ld)\n", depth, r);
    return 0;
}
