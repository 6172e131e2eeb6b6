/* SPDX-License-Identifier: Apache-2.0 */
/* flood.c - writes 10,000,000 bytes to stdout: a repeating, position
 * dependent pattern so a test can check that the kept bytes are an exact
 * prefix.  Then one line on stderr. */
#include <stdio.h>
#include <unistd.h>

int main(void) {
    static char buf[10000];
    long pos = 0;
    for (int chunk = 0; chunk < 1000; chunk++) {
        for (int i = 0; i < (int)sizeof buf; i++, pos++)
            buf[i] = (char)('a' + (pos % 23));
        if (write(1, buf, sizeof buf) != (ssize_t)sizeof buf)
            return 2;
    }
    fprintf(stderr, "wrote %ld bytes\n", pos);
    return 0;
}
