/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grants_test_util.h: what the grants tests share (test_grants.c,
 * test_grant_routes.c, test_grant_creds.c): the environment the profiles
 * read, the PEM keys written to a temporary folder once per executable
 * (setup_keys and teardown_keys, the group's fixtures), a valid grants file
 * of four profiles, and the checks on a file that must be refused.
 *
 * Include it after cmocka.h.
 */
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/broker/grants.h"

/* A value no message may ever hold. */
#define TOKEN_VALUE "tok-XYZZY-9f8e7d6c5b4a-plugh"
#define HMAC_KEY "0123456789abcdef0123456789abcdef-hs256-key"

static const char *const ENV[][2] = {
    {"TOK", TOKEN_VALUE},
    {"HKEY", HMAC_KEY},
    {"SHORTKEY", "XYZZY-short"},
    {"EMPTY", ""},
    {"SPACED", "XYZZY secret with space"},
};

static inline const char *env_fn(const char *name, void *userdata) {
    (void)userdata;
    for (size_t i = 0; i < sizeof(ENV) / sizeof(ENV[0]); i++)
        if (strcmp(ENV[i][0], name) == 0)
            return ENV[i][1];
    return NULL;
}

/* ---- keys written to a temporary folder once ---------------------------- */

static char dir[64];
static char rsa_pem[128], rsa1024_pem[128], ed_pem[128], enc_pem[128], junk_pem[128];
static EVP_PKEY *rsa_key, *ed_key;

static inline void write_key(const char *path, EVP_PKEY *k, const EVP_CIPHER *enc) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(PEM_write_PrivateKey(f, k, enc, enc ? (unsigned char *)"pw" : NULL,
                                          enc ? 2 : 0, NULL, NULL),
                     1);
    fclose(f);
}

static inline int setup_keys(void **state) {
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/pl-grants-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(rsa_pem, sizeof(rsa_pem), "%s/rsa.pem", dir);
    snprintf(rsa1024_pem, sizeof(rsa1024_pem), "%s/rsa1024.pem", dir);
    snprintf(ed_pem, sizeof(ed_pem), "%s/ed.pem", dir);
    snprintf(enc_pem, sizeof(enc_pem), "%s/enc.pem", dir);
    snprintf(junk_pem, sizeof(junk_pem), "%s/junk.pem", dir);
    rsa_key = EVP_RSA_gen(2048);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
    if (!rsa_key || !ctx || EVP_PKEY_keygen_init(ctx) != 1 || EVP_PKEY_keygen(ctx, &ed_key) != 1)
        return -1;
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY *small = EVP_RSA_gen(1024);
    if (!small)
        return -1;
    write_key(rsa_pem, rsa_key, NULL);
    write_key(ed_pem, ed_key, NULL);
    write_key(rsa1024_pem, small, NULL);
    write_key(enc_pem, rsa_key, EVP_aes_128_cbc());
    EVP_PKEY_free(small);
    FILE *f = fopen(junk_pem, "w");
    if (!f)
        return -1;
    fputs("-----BEGIN PRIVATE KEY-----\nnot base64 at all\n-----END PRIVATE KEY-----\n", f);
    fclose(f);
    return 0;
}

static inline int teardown_keys(void **state) {
    (void)state;
    unlink(rsa_pem);
    unlink(rsa1024_pem);
    unlink(ed_pem);
    unlink(enc_pem);
    unlink(junk_pem);
    rmdir(dir);
    EVP_PKEY_free(rsa_key);
    EVP_PKEY_free(ed_key);
    return 0;
}

/* ---- helpers ------------------------------------------------------------ */

static inline int parse(const char *json, struct pl_grants **g, struct pl_error *err) {
    *err = (struct pl_error){0};
    return pl_grants_parse(json, strlen(json), env_fn, NULL, g, err);
}

/* A parse that must fail with both needles in one printable line. */
static inline void expect_error(const char *json, const char *needle1, const char *needle2) {
    struct pl_grants *g = NULL;
    struct pl_error e;
    int r = parse(json, &g, &e);
    const char *err = e.message;
    if (r == 0 || !strstr(err, needle1) || (needle2 && !strstr(err, needle2)))
        print_error("json: %s\nmessage: %s\nwanted: %s / %s\n", json, err, needle1,
                    needle2 ? needle2 : "");
    assert_int_equal(r, -1);
    assert_null(g);
    assert_non_null(strstr(err, needle1));
    if (needle2)
        assert_non_null(strstr(err, needle2));
    assert_null(strstr(err, TOKEN_VALUE));
    assert_null(strstr(err, "XYZZY"));
    assert_null(strchr(err, '\n'));
    assert_int_equal(e.reason, PL_REASON_INVALID_REQUEST);
}

#define P_URL "\"base_url\":\"http://127.0.0.1:8080/api\""
#define P_ROUTES "\"routes\":[\"GET /items/*\"]"
#define P_CALLERS "\"allowed_callers\":[\"alice\"]"
#define P_CRED "\"credential\":{\"kind\":\"shared_token\",\"env\":\"TOK\"}"
#define P_HS "\"credential\":{\"kind\":\"jwt\",\"alg\":\"HS256\",\"key_env\":\"HKEY\","

/* One profile "billing" with the body given. */
static inline void expect_profile_error(const char *body, const char *complaint) {
    char json[16384];
    snprintf(json, sizeof(json), "{\"profiles\":{\"billing\":{%s}}}", body);
    expect_error(json, "grant profile \"billing\": ", complaint);
}

/* ---- a valid file ------------------------------------------------------- */

static inline char *valid_file(void) {
    static char json[8192];
    snprintf(json, sizeof(json),
             "{\"profiles\": {\n"
             " \"items-read\": {\"base_url\": \"http://127.0.0.1:8080/api/\",\n"
             "  \"routes\": [\"GET /items/*\", \"POST /items/*/notes\", \"GET /reports/**\","
             "   \"GET /\", \"DELETE /a/b\"],\n"
             "  \"allowed_callers\": [\"alice\", \"bob\"],\n"
             "  \"scopes\": [\"items:read\"],\n"
             "  \"allow_in_sessions\": false,\n"
             "  \"credential\": {\"kind\": \"shared_token\", \"env\": \"TOK\", \"header\": "
             "\"Authorization\", \"prefix\": \"Bearer \"},\n"
             "  \"limits\": {\"max_calls\": 64, \"max_request_bytes\": 1048576, "
             "\"max_response_bytes\": 4194304, \"call_timeout_ms\": 10000}},\n"
             " \"items-jwt\": {\"base_url\": \"https://items.internal\",\n"
             "  \"routes\": [\"GET /**\"], \"allowed_callers\": [\"alice\"],\n"
             "  \"scopes\": [\"items:read\", \"items:write\"], \"allow_in_sessions\": true,\n"
             "  \"credential\": {\"kind\": \"jwt\", \"alg\": \"HS256\", \"key_env\": \"HKEY\", "
             "\"issuer\": \"plimsoll\", \"audience\": \"items-api\", \"ttl_seconds\": 120, "
             "\"key_id\": \"k1\", \"header\": \"X-Items-Auth\", \"prefix\": \"\"}},\n"
             " \"items-rsa\": {\"base_url\": \"http://[::1]:9000\",\n"
             "  \"routes\": [\"PUT /x/*\"], \"allowed_callers\": [\"svc@example\"],\n"
             "  \"credential\": {\"kind\": \"jwt\", \"alg\": \"RS256\", \"key_file\": \"%s\", "
             "\"issuer\": \"plimsoll\", \"audience\": \"rsa-api\"},\n"
             "  \"limits\": {\"max_calls\": 1, \"max_request_bytes\": 0, "
             "\"call_timeout_ms\": 600000}},\n"
             " \"items-ed\": {\"base_url\": \"http://items:80/\",\n"
             "  \"routes\": [\"PATCH /y\"], \"allowed_callers\": [\"carol\"],\n"
             "  \"credential\": {\"kind\": \"jwt\", \"alg\": \"EdDSA\", \"key_file\": \"%s\", "
             "\"issuer\": \"plimsoll\", \"audience\": \"ed-api\", \"ttl_seconds\": 3600}}\n"
             "}}\n",
             rsa_pem, ed_pem);
    return json;
}

static inline struct pl_grants *load_valid(void) {
    struct pl_grants *g = NULL;
    struct pl_error e;
    int r = parse(valid_file(), &g, &e);
    if (r != 0)
        print_error("%s\n", e.message);
    assert_int_equal(r, 0);
    return g;
}
