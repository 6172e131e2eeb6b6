/* SPDX-License-Identifier: Apache-2.0 */
/*
 * canon.h: the canonical JSON form that run records hash, and the hashing
 * and encoding helpers around it.
 *
 * The canonical form is RFC 8785 (JSON Canonicalization Scheme) restricted
 * to the values plimsoll's messages use: objects (keys sorted; every key in
 * the API is ASCII, where byte order and RFC 8785's UTF-16 order agree),
 * arrays, strings, integers, true, false and null.  A real number is
 * refused.  docs/records.md states the rules for client authors.
 */
#pragma once

#include <stdbool.h>

#include <jansson.h>
#include <stddef.h>

#include "buf.h"

/* Append the canonical form of v to out; < 0 on a real number or OOM. */
int pl_canon_dump(const json_t *v, struct pl_buf *out);

/* SHA-256 of bytes as 64 lowercase hex digits (ret_hex: 65 bytes). */
int pl_sha256_hex(const void *data, size_t len, char ret_hex[65]);

/* SHA-256 of the canonical form of v. */
int pl_canon_sha256(const json_t *v, char ret_hex[65]);

/* The value of one hexadecimal digit (either case), or -1. */
int pl_hex_digit(char c);

/*
 * Whether s (n bytes) is UTF-8 in its strict form: shortest encodings only,
 * no surrogates, nothing past U+10FFFF.
 */
bool pl_utf8_valid(const unsigned char *s, size_t n);

/* s (n bytes) as text: each byte outside ASCII a U+FFFD, the rest as it
 * is; malloc'd, *ret_len its length (NULL when out of memory).  What the
 * API gives beside the exact bytes when they are not UTF-8. */
char *pl_utf8_lossy(const unsigned char *s, size_t n, size_t *ret_len);

/* Standard base64 with padding; returns a malloc'd NUL-terminated string. */
char *pl_base64_encode(const void *data, size_t len, int pad);

/*
 * Decode standard base64 (padding optional; URL-safe alphabet also taken,
 * as proto3 JSON requires for bytes).  Returns < 0 on malformed input or
 * when the decoded size would exceed max.  *ret_data is malloc'd.
 */
int pl_base64_decode(const char *s, size_t len, size_t max, unsigned char **ret_data,
                     size_t *ret_len);
