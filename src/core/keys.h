/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keys.h: callers and their API keys.
 *
 * PLIMSOLL_KEYS_FILE holds one "<principal> <sha256-hex-of-key>" per line,
 * with '#' comments and blank lines allowed.  The daemon keeps only the
 * digests, so a leaked keys file does not leak a key.  A principal may have
 * several keys (rotation); a digest may appear only once.
 */
#pragma once

#include <stddef.h>

#include "errors.h"

#define PL_PRINCIPAL_MAX 128u      /* bytes in a principal */
#define PL_KEYS_MAX_ENTRIES 10000u /* lines with a key */
#define PL_KEYS_MAX_FILE (1u << 20)
#define PL_KEY_MAX_BYTES 512u /* a presented key */

struct pl_keys;

/* Parse a keys file's text.  err names the line at fault. */
int pl_keys_parse(const char *text, size_t len, struct pl_keys **ret_keys, struct pl_error *err);

/*
 * Read (pl_file_read: a regular file of at most PL_KEYS_MAX_FILE bytes,
 * wiped after parsing) and parse a keys file.  Every message names
 * PLIMSOLL_KEYS_FILE; when the file cannot be read, err->errnum says why.
 */
int pl_keys_load(const char *path, struct pl_keys **ret_keys, struct pl_error *err);

void pl_keys_free(struct pl_keys *keys);

/* Number of keys held. */
size_t pl_keys_count(const struct pl_keys *keys);

/*
 * Authenticate a presented key.  Returns the principal (owned by keys) or
 * NULL.  The comparison runs over every entry in constant time per entry.
 */
const char *pl_keys_authenticate(const struct pl_keys *keys, const char *key, size_t key_len);

/*
 * Extract the key from an Authorization header value ("Bearer <key>",
 * scheme case-insensitive).  Returns < 0 when absent or malformed.
 */
int pl_bearer_parse(const char *header, const char **ret_key, size_t *ret_len);

/* Whether s is an acceptable principal name: [A-Za-z0-9._:@-]{1,128}. */
int pl_principal_valid(const char *s, size_t len);
