/* SPDX-License-Identifier: Apache-2.0 */
/* test_grant_creds.c: the credentials grant profiles make: shared tokens,
 * and JWTs (HS256, RS256, EdDSA) taken apart and checked with OpenSSL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/broker/grants.h"
#include "../../src/broker/jwt.h"
#include "grants_test_util.h"

/* ---- credentials -------------------------------------------------------- */

static size_t b64url_decode(const char *s, size_t n, unsigned char *out) {
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        const char *A = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        const char *q = strchr(A, s[i]);
        assert_non_null(q);
        acc = acc << 6 | (uint32_t)(q - A);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    return o;
}

struct jwt_parts {
    json_t *header, *claims;
    unsigned char sig[1024];
    size_t siglen;
    char input[4096];
    size_t inputlen;
};

static void split_jwt(const char *jwt, struct jwt_parts *parts) {
    const char *d1 = strchr(jwt, '.');
    assert_non_null(d1);
    const char *d2 = strchr(d1 + 1, '.');
    assert_non_null(d2);
    assert_null(strchr(d2 + 1, '.'));
    assert_null(strchr(jwt, '='));
    unsigned char buf[4096];
    size_t n = b64url_decode(jwt, (size_t)(d1 - jwt), buf);
    parts->header = json_loadb((const char *)buf, n, 0, NULL);
    assert_non_null(parts->header);
    n = b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), buf);
    parts->claims = json_loadb((const char *)buf, n, 0, NULL);
    assert_non_null(parts->claims);
    buf[n] = '\0';
    assert_null(strstr((const char *)buf, "\": ")); /* compact */
    assert_null(strstr((const char *)buf, ", \""));
    parts->siglen = b64url_decode(d2 + 1, strlen(d2 + 1), parts->sig);
    parts->inputlen = (size_t)(d2 - jwt);
    assert_true(parts->inputlen < sizeof(parts->input));
    memcpy(parts->input, jwt, parts->inputlen);
}

static void check_claims(json_t *claims, const char *sub, const char *iss, const char *aud,
                         long long now, long long ttl, const char *scope) {
    assert_string_equal(json_string_value(json_object_get(claims, "sub")), sub);
    assert_string_equal(json_string_value(json_object_get(claims, "iss")), iss);
    assert_string_equal(json_string_value(json_object_get(claims, "aud")), aud);
    assert_int_equal(json_integer_value(json_object_get(claims, "iat")), now);
    assert_int_equal(json_integer_value(json_object_get(claims, "nbf")), now);
    assert_int_equal(json_integer_value(json_object_get(claims, "exp")), now + ttl);
    const char *jti = json_string_value(json_object_get(claims, "jti"));
    assert_non_null(jti);
    assert_int_equal(strlen(jti), 32);
    assert_int_equal(strspn(jti, "0123456789abcdef"), 32);
    json_t *sc = json_object_get(claims, "scope");
    if (scope)
        assert_string_equal(json_string_value(sc), scope);
    else
        assert_null(sc);
    assert_int_equal(json_object_size(claims), scope ? 8 : 7);
}

static void test_shared_token_credential(void **state) {
    (void)state;
    struct pl_grants *g = load_valid();
    const struct pl_grant_profile *p = pl_grants_find(g, "items-read");
    char *v = NULL;
    struct pl_error e = {0};
    const char *err = e.message;
    assert_int_equal(pl_grant_credential(p, env_fn, NULL, "alice", 1000, &v, &e), 0);
    assert_string_equal(v, "Bearer " TOKEN_VALUE);
    free(v);
    v = NULL;
    /* not an allowed caller */
    assert_int_equal(pl_grant_credential(p, env_fn, NULL, "mallory", 1000, &v, &e), -1);
    assert_null(v);
    assert_non_null(strstr(err, "grant profile \"items-read\": "));
    assert_non_null(strstr(err, "not in allowed_callers"));
    pl_grants_free(g);
}

/* The token's variable vanishes, or turns bad, after the file was loaded. */
static const char *later_env(const char *name, void *userdata) {
    (void)name;
    return userdata;
}

static void test_token_never_in_messages(void **state) {
    (void)state;
    struct pl_grants *g = load_valid();
    const struct pl_grant_profile *p = pl_grants_find(g, "items-read");
    char *v = NULL;
    struct pl_error e = {0};
    const char *err = e.message;
    assert_int_equal(pl_grant_credential(p, later_env, NULL, "alice", 1, &v, &e), -1);
    assert_non_null(strstr(err, "environment variable TOK is unset or empty"));
    assert_int_equal(
        pl_grant_credential(p, later_env, TOKEN_VALUE "\r\nX-Evil: 1", "alice", 1, &v, &e), -1);
    assert_non_null(strstr(err, "grant profile \"items-read\": "));
    assert_non_null(strstr(err, "TOK holds a space, control or non-ASCII byte"));
    assert_null(strstr(err, TOKEN_VALUE));
    assert_null(v);
    pl_grants_free(g);

    /* A file that is wrong elsewhere never quotes the token either. */
    expect_profile_error(P_URL "," P_ROUTES "," P_CALLERS "," P_CRED ",\"limits\":{\"x\":1}",
                         "limits: unknown field");
}

static void verify_signature(const struct pl_grant_profile *p, EVP_PKEY *pub,
                             const struct jwt_parts *parts) {
    if (!pub) {
        unsigned char mac[32];
        unsigned int maclen = 0;
        assert_non_null(HMAC(EVP_sha256(), HMAC_KEY, (int)strlen(HMAC_KEY),
                             (const unsigned char *)parts->input, parts->inputlen, mac, &maclen));
        assert_int_equal(maclen, 32);
        assert_int_equal(parts->siglen, 32);
        assert_memory_equal(mac, parts->sig, 32);
        return;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    assert_non_null(ctx);
    assert_int_equal(
        EVP_DigestVerifyInit(ctx, NULL, p->alg == PL_JWT_RS256 ? EVP_sha256() : NULL, NULL, pub),
        1);
    assert_int_equal(EVP_DigestVerify(ctx, parts->sig, parts->siglen,
                                      (const unsigned char *)parts->input, parts->inputlen),
                     1);
    /* one flipped byte of the signed text fails */
    char tampered[4096];
    memcpy(tampered, parts->input, parts->inputlen);
    tampered[parts->inputlen - 1] ^= 1;
    EVP_MD_CTX_reset(ctx);
    assert_int_equal(
        EVP_DigestVerifyInit(ctx, NULL, p->alg == PL_JWT_RS256 ? EVP_sha256() : NULL, NULL, pub),
        1);
    assert_int_not_equal(EVP_DigestVerify(ctx, parts->sig, parts->siglen,
                                          (const unsigned char *)tampered, parts->inputlen),
                         1);
    EVP_MD_CTX_free(ctx);
}

static void mint_and_check(const char *profile, const char *principal, EVP_PKEY *pub,
                           const char *alg, const char *kid, const char *aud, long long ttl,
                           const char *scope, const char *prefix) {
    struct pl_grants *g = load_valid();
    const struct pl_grant_profile *p = pl_grants_find(g, profile);
    assert_non_null(p);
    const time_t now = 1700000000;
    char *v1 = NULL, *v2 = NULL;
    struct pl_error e = {0};
    const char *err = e.message;
    int r = pl_grant_credential(p, env_fn, NULL, principal, now, &v1, &e);
    if (r != 0)
        print_error("%s\n", err);
    assert_int_equal(r, 0);
    assert_int_equal(pl_grant_credential(p, env_fn, NULL, principal, now, &v2, &e), 0);
    assert_int_equal(strncmp(v1, prefix, strlen(prefix)), 0);

    struct jwt_parts a = {0}, b = {0};
    split_jwt(v1 + strlen(prefix), &a);
    split_jwt(v2 + strlen(prefix), &b);
    assert_string_equal(json_string_value(json_object_get(a.header, "alg")), alg);
    assert_string_equal(json_string_value(json_object_get(a.header, "typ")), "JWT");
    if (kid)
        assert_string_equal(json_string_value(json_object_get(a.header, "kid")), kid);
    else
        assert_null(json_object_get(a.header, "kid"));
    check_claims(a.claims, principal, "plimsoll", aud, now, ttl, scope);
    check_claims(b.claims, principal, "plimsoll", aud, now, ttl, scope);
    assert_string_not_equal(json_string_value(json_object_get(a.claims, "jti")),
                            json_string_value(json_object_get(b.claims, "jti")));
    verify_signature(p, pub, &a);
    verify_signature(p, pub, &b);

    json_decref(a.header);
    json_decref(a.claims);
    json_decref(b.header);
    json_decref(b.claims);
    free(v1);
    free(v2);
    pl_grants_free(g);
}

static void test_jwt_hs256(void **state) {
    (void)state;
    mint_and_check("items-jwt", "alice", NULL, "HS256", "k1", "items-api", 120,
                   "items:read items:write", "");
}

static void test_jwt_rs256(void **state) {
    (void)state;
    mint_and_check("items-rsa", "svc@example", rsa_key, "RS256", NULL, "rsa-api", 300, NULL,
                   "Bearer ");
}

static void test_jwt_eddsa(void **state) {
    (void)state;
    mint_and_check("items-ed", "carol", ed_key, "EdDSA", NULL, "ed-api", 3600, NULL, "Bearer ");
}

static void test_jwt_refusals(void **state) {
    (void)state;
    struct pl_grants *g = load_valid();
    char *v = NULL;
    struct pl_error e = {0};
    const char *err = e.message;
    const struct pl_grant_profile *p = pl_grants_find(g, "items-jwt");
    assert_int_equal(pl_jwt_mint(p, "alice", -1, &v, &e), -1);
    assert_non_null(strstr(err, "grant profile \"items-jwt\": jwt: the clock is out of range"));
    assert_int_equal(pl_jwt_mint(p, "", 1, &v, &e), -1);
    assert_int_equal(pl_jwt_mint(p, "\xff", 1, &v, &e), -1);
    assert_non_null(strstr(err, "not valid UTF-8"));
    assert_int_equal(pl_jwt_mint(pl_grants_find(g, "items-read"), "alice", 1, &v, &e), -1);
    assert_non_null(strstr(err, "not a JWT"));
    assert_null(v);
    assert_null(strstr(err, HMAC_KEY));
    pl_grants_free(g);
}

static void test_b64url(void **state) {
    (void)state;
    char out[16];
    assert_int_equal(pl_b64url_encode((const unsigned char *)"", 0, out), 0);
    assert_string_equal(out, "");
    pl_b64url_encode((const unsigned char *)"f", 1, out);
    assert_string_equal(out, "Zg");
    pl_b64url_encode((const unsigned char *)"fo", 2, out);
    assert_string_equal(out, "Zm8");
    pl_b64url_encode((const unsigned char *)"foo", 3, out);
    assert_string_equal(out, "Zm9v");
    pl_b64url_encode((const unsigned char *)"\xfb\xff\xfe", 3, out);
    assert_string_equal(out, "-__-");
    assert_int_equal(pl_b64url_len(4), 6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_token_credential),
        cmocka_unit_test(test_token_never_in_messages),
        cmocka_unit_test(test_jwt_hs256),
        cmocka_unit_test(test_jwt_rs256),
        cmocka_unit_test(test_jwt_eddsa),
        cmocka_unit_test(test_jwt_refusals),
        cmocka_unit_test(test_b64url),
    };
    return cmocka_run_group_tests(tests, setup_keys, teardown_keys);
}
