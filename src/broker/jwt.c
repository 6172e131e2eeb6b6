/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jwt.c: mint the compact JWS a "jwt" grant profile sends.
 *
 * Only minting lives here: plimsoll never verifies a token (the API behind
 * the broker does), so there is no parser to get wrong.  The header and the
 * claims come from jansson, so every string is escaped by the same code the
 * rest of the daemon uses; the signature comes from OpenSSL.
 */
#include "jwt.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../core/ids.h"

/* 9999-12-31T23:59:59Z: later clocks are refused rather than overflowed. */
#define JWT_MAX_TIME 253402300799LL

/* INTERNAL, "grant profile \"NAME\": jwt: " and what failed, one printable line.  -1. */
static int jwt_fail(struct pl_error *err, const struct pl_grant_profile *p, const char *what) {
    if (!err)
        return -1;
    pl_error_set(err, PL_REASON_INTERNAL, "%s", what);
    pl_error_wrap(err, "grant profile \"%.64s\": jwt: ", p && p->name ? p->name : "?");
    for (char *s = err->message; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            *s = '?';
    return -1;
}

size_t pl_b64url_len(size_t len) {
    return len / 3 * 4 + (len % 3 ? len % 3 + 1 : 0);
}

size_t pl_b64url_encode(const unsigned char *in, size_t len, char *out) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0, i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = A[v >> 18 & 63];
        out[o++] = A[v >> 12 & 63];
        out[o++] = A[v >> 6 & 63];
        out[o++] = A[v & 63];
    }
    if (len - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = A[v >> 18 & 63];
        out[o++] = A[v >> 12 & 63];
    } else if (len - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = A[v >> 18 & 63];
        out[o++] = A[v >> 12 & 63];
        out[o++] = A[v >> 6 & 63];
    }
    out[o] = '\0';
    return o;
}

static const char *alg_name(enum pl_jwt_alg alg) {
    switch (alg) {
    case PL_JWT_HS256: return "HS256";
    case PL_JWT_RS256: return "RS256";
    case PL_JWT_EDDSA: return "EdDSA";
    }
    return NULL;
}

/* Scopes joined by single spaces (malloc'd), or NULL when out of memory. */
static char *join_scopes(const struct pl_grant_profile *p) {
    size_t total = 1;
    for (size_t i = 0; i < p->nscopes; i++)
        total += strlen(p->scopes[i]) + 1;
    char *s = malloc(total);
    if (!s)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < p->nscopes; i++) {
        size_t n = strlen(p->scopes[i]);
        if (i > 0)
            s[o++] = ' ';
        memcpy(s + o, p->scopes[i], n);
        o += n;
    }
    s[o] = '\0';
    return s;
}

/* Set key to a new string (taking v); false when v is NULL (bad UTF-8) or on failure. */
static bool set_new(json_t *obj, const char *key, json_t *v) {
    return v && json_object_set_new(obj, key, v) == 0;
}

/* The header and claims as compact JSON (malloc'd), or NULL. */
static char *header_json(const struct pl_grant_profile *p) {
    PL_AUTO_JSON json_t *h = json_object();
    if (h && set_new(h, "alg", json_string(alg_name(p->alg))) &&
        set_new(h, "typ", json_string("JWT")) &&
        (!p->key_id || set_new(h, "kid", json_string(p->key_id))))
        return json_dumps(h, JSON_COMPACT);
    return NULL;
}

static char *claims_json(const struct pl_grant_profile *p, const char *principal, time_t now,
                         const char *jti, const char **ret_problem) {
    PL_AUTO_JSON json_t *c = json_object();
    PL_AUTO_FREE char *scope = join_scopes(p);
    *ret_problem = "out of memory";
    if (!c || !scope)
        return NULL;
    if (!set_new(c, "iss", json_string(p->issuer)) || !set_new(c, "aud", json_string(p->audience)))
        return NULL;
    if (!set_new(c, "sub", json_string(principal))) {
        *ret_problem = "the principal is not valid UTF-8";
        return NULL;
    }
    if (!set_new(c, "iat", json_integer((json_int_t)now)) ||
        !set_new(c, "nbf", json_integer((json_int_t)now)) ||
        !set_new(c, "exp", json_integer((json_int_t)now + (json_int_t)p->ttl_s)) ||
        !set_new(c, "jti", json_string(jti)))
        return NULL;
    if (p->nscopes > 0 && !set_new(c, "scope", json_string(scope)))
        return NULL;
    return json_dumps(c, JSON_COMPACT);
}

/* base64url of a NUL-terminated string, malloc'd. */
static char *b64_str(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(pl_b64url_len(n) + 1);
    if (out)
        pl_b64url_encode((const unsigned char *)s, n, out);
    return out;
}

static void md_ctx_freep(EVP_MD_CTX **ctx) {
    EVP_MD_CTX_free(*ctx);
}

/* A signature: wiped before it is freed. */
struct sig {
    unsigned char *data;
    size_t len;
};

static void sig_clear(struct sig *g) {
    if (g->data) {
        OPENSSL_cleanse(g->data, g->len);
        free(g->data);
    }
}

/* Sign input with p's key; *ret_sig is malloc'd.  Returns < 0 on failure. */
static int sign(const struct pl_grant_profile *p, const char *input, size_t len,
                unsigned char **ret_sig, size_t *ret_len) {
    if (p->alg == PL_JWT_HS256) {
        if (!p->hmac_key || p->hmac_key_len == 0)
            return -1;
        unsigned char *sig = malloc(EVP_MAX_MD_SIZE);
        unsigned int n = 0;
        if (!sig)
            return -1;
        if (!HMAC(EVP_sha256(), p->hmac_key, (int)p->hmac_key_len, (const unsigned char *)input,
                  len, sig, &n)) {
            free(sig);
            return -1;
        }
        *ret_sig = sig;
        *ret_len = n;
        return 0;
    }
    if (!p->pkey)
        return -1;
    PL_CLEANUP(md_ctx_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    PL_AUTO_FREE unsigned char *sig = NULL;
    size_t n = 0;
    const EVP_MD *md = p->alg == PL_JWT_RS256 ? EVP_sha256() : NULL; /* Ed25519 hashes itself */
    if (!ctx || EVP_DigestSignInit(ctx, NULL, md, NULL, p->pkey) != 1 ||
        EVP_DigestSign(ctx, NULL, &n, (const unsigned char *)input, len) != 1 || n == 0 ||
        !(sig = malloc(n)) || EVP_DigestSign(ctx, sig, &n, (const unsigned char *)input, len) != 1)
        return -1;
    *ret_sig = PL_TAKE_PTR(sig);
    *ret_len = n;
    return 0;
}

int pl_jwt_mint(const struct pl_grant_profile *p, const char *principal, time_t now, char **ret_jwt,
                struct pl_error *err) {
    if (!p || p->kind != PL_CRED_JWT || !alg_name(p->alg) || !p->issuer || !p->audience)
        return jwt_fail(err, p, "the profile's credential is not a JWT");
    if (!principal || !*principal)
        return jwt_fail(err, p, "no principal");
    if (now < 0 || (long long)now > JWT_MAX_TIME)
        return jwt_fail(err, p, "the clock is out of range");

    char jti[PL_JWT_JTI_HEX + 1];
    if (pl_random_hex(jti, sizeof(jti), PL_JWT_JTI_HEX / 2) < 0) {
        ERR_clear_error();
        return jwt_fail(err, p, "no random bytes for jti");
    }

    const char *problem = "out of memory";
    PL_AUTO_FREE char *hj = header_json(p);
    PL_AUTO_FREE char *cj = claims_json(p, principal, now, jti, &problem);
    PL_AUTO_FREE char *hb = hj ? b64_str(hj) : NULL;
    PL_AUTO_FREE char *cb = cj ? b64_str(cj) : NULL;
    if (!hb || !cb)
        return jwt_fail(err, p, problem);
    size_t hl = strlen(hb), cl = strlen(cb);
    PL_AUTO_FREE char *input = malloc(hl + 1 + cl + 1);
    if (!input)
        return jwt_fail(err, p, "out of memory");
    memcpy(input, hb, hl);
    input[hl] = '.';
    memcpy(input + hl + 1, cb, cl + 1);
    PL_CLEANUP(sig_clear) struct sig sig = {0};
    if (sign(p, input, hl + 1 + cl, &sig.data, &sig.len) < 0) {
        ERR_clear_error();
        return jwt_fail(err, p, "signing failed");
    }
    size_t il = hl + 1 + cl;
    char *out = malloc(il + 1 + pl_b64url_len(sig.len) + 1);
    if (!out)
        return jwt_fail(err, p, "out of memory");
    memcpy(out, input, il);
    out[il] = '.';
    pl_b64url_encode(sig.data, sig.len, out + il + 1);
    *ret_jwt = out;
    return 0;
}
