/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ids.c: random identifiers and secrets (ids.h).
 */
#include "ids.h"

#include <errno.h>
#include <limits.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

int pl_random_bytes(void *buf, size_t n) {
    if (n > INT_MAX || RAND_bytes(buf, (int)n) != 1)
        return -EIO;
    return 0;
}

void pl_hex_encode(const void *bytes, size_t n, char *out) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[2 * n] = '\0';
}

int pl_random_hex(char *out, size_t out_size, size_t nbytes) {
    unsigned char b[64];
    if (nbytes > sizeof(b) || out_size < 2 * nbytes + 1)
        return -EINVAL;
    if (pl_random_bytes(b, nbytes) < 0)
        return -EIO;
    pl_hex_encode(b, nbytes, out);
    OPENSSL_cleanse(b, sizeof(b));
    return 0;
}
