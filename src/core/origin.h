/* SPDX-License-Identifier: Apache-2.0 */
/*
 * origin.h: the bytes of cross-origin browser use (CORS), read strictly:
 * PLIMSOLL_CORS_ORIGINS, the operator's list of web origins, normalised
 * once at startup to the form a browser sends in its Origin header; a
 * request's Origin looked up in it byte for byte; and a header's
 * comma-separated list of names (Access-Control-Request-Headers) checked
 * against a fixed set.  What the daemon decides with them is the API's
 * (src/server/api_cors.c); docs/api.md, "Browsers on another origin".
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "errors.h"

/* The most origins PLIMSOLL_CORS_ORIGINS lists, and the longest one. */
#define PL_CORS_MAX_ORIGINS 32u
#define PL_ORIGIN_MAX_BYTES 256u

struct pl_origins {
    unsigned n;
    /* Each as a browser serialises it: scheme://host[:port], lowercase,
     * without the scheme's default port. */
    char origin[PL_CORS_MAX_ORIGINS][PL_ORIGIN_MAX_BYTES + 1];
};

/*
 * One origin, len bytes of s (no NUL needed), into out (at least
 * PL_ORIGIN_MAX_BYTES + 1 bytes): "http" or "https", "://", a host (a DNS
 * name of letters, digits, '-' and '.'; a dotted-quad IPv4 address; an
 * IPv6 address in brackets), an optional port from 1 to 65535, and
 * nothing after it.  Scheme and host are lowercased and the scheme's
 * default port (80, 443) dropped, as browsers write an origin.  A path
 * (even "/"), a query, user information, a wildcard, "null" and anything
 * longer than PL_ORIGIN_MAX_BYTES are refused: < 0 with err saying why.
 */
int pl_origin_normalise(const char *s, size_t len, char *out, struct pl_error *err);

/*
 * PLIMSOLL_CORS_ORIGINS: origins separated by commas (spaces and tabs
 * around each ignored), each normalised; an empty entry, one listed twice
 * (once normalised) or more than PL_CORS_MAX_ORIGINS are refused.  err's
 * message starts with the setting's name.  *ret is written only on
 * success.
 */
int pl_origins_parse(const char *s, struct pl_origins *ret, struct pl_error *err);

/* The listed origin exactly equal to origin (a request's Origin header,
 * compared byte for byte: no case folding, no default port), or NULL. */
const char *pl_origins_find(const struct pl_origins *list, const char *origin);

/* Whether a header's value is a comma-separated list (spaces and tabs
 * around each element, empty elements ignored, as RFC 9110 section 5.6.1
 * has it) of at most max_items names, each one of allowed (NULL-ended),
 * compared ASCII case-insensitively.  An empty list is within. */
bool pl_token_list_within(const char *value, const char *const *allowed, unsigned max_items);
