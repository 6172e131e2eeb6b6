/* SPDX-License-Identifier: Apache-2.0 */
/* echo.c - copies stdin to stdout until end of input, then reports the
 * byte count on stderr. */
#include <stdio.h>
#include <unistd.h>

int main(void) {
    char buf[4096];
    long total = 0;
    ssize_t n;
    while ((n = read(0, buf, sizeof buf)) > 0) {
        if (write(1, buf, (size_t)n) != n)
            return 2;
        total += n;
    }
    fprintf(stderr, "echoed %ld bytes\n", total);
    return n < 0 ? 1 : 0;
}
