/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exitcode: prints "exit N" on stdout and stderr, then calls proc_exit(N)
 * with N = argv[1], any unsigned 32-bit decimal (0 .. 4294967295).  A bad
 * argument exits 2 through main's return.
 */
#include <stdint.h>
#include <stdio.h>
#include <wasi/api.h>

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    uint64_t n = 0;
    for (const char *p = argv[1]; *p; p++) {
        if (*p < '0' || *p > '9' || n > UINT32_MAX)
            return 2;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    if (n > UINT32_MAX)
        return 2;
    printf("exit %llu\n", (unsigned long long)n);
    fprintf(stderr, "exit %llu\n", (unsigned long long)n);
    fflush(stdout);
    __wasi_proc_exit((uint32_t)n);
}
