/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jwt.h: short-lived JSON Web Tokens for grant profiles whose credential kind
 * is "jwt".
 *
 * The broker mints one token per run and adds it to each call the run makes,
 * so the API behind the broker sees who ran the code (sub), for which
 * audience, with which scopes, and for how long the token holds; the sandbox
 * never sees the token or the key.
 */
#pragma once

#include <stddef.h>
#include <time.h>

#include "../core/errors.h"
#include "grants.h"

#define PL_JWT_JTI_HEX 32u /* hex characters in "jti" (16 random bytes) */

/*
 * Mint a compact JWS (RFC 7515/7519) for principal with p's key.
 *
 * Header: {"alg":"HS256"|"RS256"|"EdDSA","typ":"JWT"[,"kid":key_id]}.
 * Claims: {"iss","aud","sub":principal,"iat":now,"nbf":now,"exp":now+ttl,
 * "jti":32 random hex characters (pl_random_hex),"scope":scopes joined by single
 * spaces}; "scope" is left out when the profile has no scopes.  Both are
 * serialized by jansson with JSON_COMPACT in that order, and every part is
 * base64url without padding.  Signature: HMAC-SHA256, RSASSA-PKCS1-v1_5 with
 * SHA-256, or Ed25519 (EVP_DigestSign).
 *
 * p->kind must be PL_CRED_JWT; now must not be negative.  Returns 0 and a
 * malloc'd token in *ret_jwt (the caller wipes and frees it), or -1 with err
 * (may be NULL) holding INTERNAL and "grant profile \"NAME\": jwt: " + what
 * failed.
 */
int pl_jwt_mint(const struct pl_grant_profile *p, const char *principal, time_t now, char **ret_jwt,
                struct pl_error *err);

/*
 * base64url without padding of len bytes of in into out, which must hold
 * pl_b64url_len(len) + 1 bytes; returns the characters written (NUL added).
 */
size_t pl_b64url_encode(const unsigned char *in, size_t len, char *out);

/* Characters base64url without padding needs for len bytes. */
size_t pl_b64url_len(size_t len);
