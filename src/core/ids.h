/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ids.h: random identifiers and secrets.
 *
 * Every random value plimsoll makes (run ids, session ids and tags, uplink
 * tokens, JWT ids, sandbox names) comes from OpenSSL's RAND_bytes, written
 * as lowercase hex.  docs/internals/ids.md.
 */
#pragma once

#include <stddef.h>

/* n random bytes into buf: 0, or -EIO when the generator failed. */
int pl_random_bytes(void *buf, size_t n);

/*
 * nbytes random bytes as 2 * nbytes lowercase hex digits and a NUL, into
 * out (size out_size, at least 2 * nbytes + 1).  0, -EINVAL (too small) or
 * -EIO.
 */
int pl_random_hex(char *out, size_t out_size, size_t nbytes);

/* bytes as lowercase hex into out (at least 2 * n + 1 bytes), NUL-terminated. */
void pl_hex_encode(const void *bytes, size_t n, char *out);
