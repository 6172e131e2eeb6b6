/* test_grants.c: grant profiles (parse, validate, route matching) and the
 * credentials they make, shared tokens and JWTs checked with OpenSSL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/broker/grants.h"
#include "../../src/broker/jwt.h"

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

static const char *env_fn(const char *name, void *userdata) {
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

static void write_key(const char *path, EVP_PKEY *k, const EVP_CIPHER *enc) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(PEM_write_PrivateKey(f, k, enc, enc ? (unsigned char *)"pw" : NULL,
                                          enc ? 2 : 0, NULL, NULL),
                     1);
    fclose(f);
}

static int setup_keys(void **state) {
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

static int teardown_keys(void **state) {
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

static int parse(const char *json, struct pl_grants **g, struct pl_error *err) {
    *err = (struct pl_error){0};
    return pl_grants_parse(json, strlen(json), env_fn, NULL, g, err);
}

/* A parse that must fail with both needles in one printable line. */
static void expect_error(const char *json, const char *needle1, const char *needle2) {
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
static void expect_profile_error(const char *body, const char *complaint) {
    char json[16384];
    snprintf(json, sizeof(json), "{\"profiles\":{\"billing\":{%s}}}", body);
    expect_error(json, "grant profile \"billing\": ", complaint);
}

/* ---- a valid file ------------------------------------------------------- */

static char *valid_file(void) {
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

static struct pl_grants *load_valid(void) {
    struct pl_grants *g = NULL;
    struct pl_error e;
    int r = parse(valid_file(), &g, &e);
    if (r != 0)
        print_error("%s\n", e.message);
    assert_int_equal(r, 0);
    return g;
}

static void test_valid_file(void **state) {
    (void)state;
    struct pl_grants *g = load_valid();
    assert_int_equal(g->n, 4);
    const struct pl_grant_profile *p = pl_grants_find(g, "items-read");
    assert_non_null(p);
    assert_string_equal(p->base_url, "http://127.0.0.1:8080/api");
    assert_int_equal(p->nroutes, 5);
    assert_string_equal(p->routes[1].text, "POST /items/*/notes");
    assert_string_equal(p->routes[1].method, "POST");
    assert_int_equal(p->routes[1].nsegs, 3);
    assert_string_equal(p->routes[1].segs[1], "*");
    assert_false(p->routes[1].tail);
    assert_true(p->routes[2].tail);
    assert_int_equal(p->routes[2].nsegs, 1);
    assert_int_equal(p->kind, PL_CRED_SHARED_TOKEN);
    assert_string_equal(p->token_env, "TOK");
    assert_string_equal(p->header, "Authorization");
    assert_string_equal(p->prefix, "Bearer ");
    assert_false(p->allow_in_sessions);
    assert_int_equal(p->max_calls, 64);
    assert_int_equal(p->max_request_bytes, 1048576);
    assert_int_equal(p->max_response_bytes, 4194304);
    assert_int_equal(p->call_timeout_ms, 10000);
    assert_true(pl_grant_caller_allowed(p, "alice"));
    assert_true(pl_grant_caller_allowed(p, "bob"));
    assert_false(pl_grant_caller_allowed(p, "carol"));
    assert_false(pl_grant_caller_allowed(p, "alic"));
    assert_false(pl_grant_caller_allowed(p, NULL));

    p = pl_grants_find(g, "items-jwt");
    assert_non_null(p);
    assert_string_equal(p->base_url, "https://items.internal");
    assert_int_equal(p->kind, PL_CRED_JWT);
    assert_int_equal(p->alg, PL_JWT_HS256);
    assert_int_equal(p->hmac_key_len, strlen(HMAC_KEY));
    assert_memory_equal(p->hmac_key, HMAC_KEY, strlen(HMAC_KEY));
    assert_string_equal(p->key_id, "k1");
    assert_int_equal(p->ttl_s, 120);
    assert_string_equal(p->header, "X-Items-Auth");
    assert_string_equal(p->prefix, "");
    assert_true(p->allow_in_sessions);
    assert_int_equal(p->nscopes, 2);

    p = pl_grants_find(g, "items-rsa");
    assert_non_null(p);
    assert_string_equal(p->base_url, "http://[::1]:9000");
    assert_int_equal(p->alg, PL_JWT_RS256);
    assert_non_null(p->pkey);
    assert_null(p->key_id);
    assert_int_equal(p->ttl_s, 300);
    assert_int_equal(p->nscopes, 0);
    assert_int_equal(p->max_calls, 1);
    assert_int_equal(p->max_request_bytes, 0);
    assert_int_equal(p->max_response_bytes, 4u << 20);
    assert_int_equal(p->call_timeout_ms, 600000);

    p = pl_grants_find(g, "items-ed");
    assert_non_null(p);
    assert_string_equal(p->base_url, "http://items:80");
    assert_int_equal(p->alg, PL_JWT_EDDSA);
    assert_int_equal(p->ttl_s, 3600);

    assert_null(pl_grants_find(g, "nope"));
    assert_null(pl_grants_find(NULL, "items-read"));
    assert_null(pl_grants_find(g, NULL));
    pl_grants_free(g);
    pl_grants_free(NULL);
}

/* ---- every complaint ---------------------------------------------------- */

static void test_top_level_errors(void **state) {
    (void)state;
    expect_error("{", "grants: line 1", NULL);
    expect_error("[]", "grants: the top level must be an object", NULL);
    expect_error("{}", "grants: \"profiles\" must be an object", NULL);
    expect_error("{\"profiles\":[]}", "grants: \"profiles\" must be an object", NULL);
    expect_error("{\"profiles\":{}}", "grants: profiles: 0 profiles; 1..256 allowed", NULL);
    expect_error("{\"profiles\":{},\"extra\":1}", "unknown top-level field \"extra\"", NULL);
    expect_error("{\"profiles\":{\"a\":{},\"a\":{}}}", "duplicate", NULL);
    expect_error("{\"profiles\":{\"billing\":[]}}", "grant profile \"billing\": must be an object",
                 NULL);
    expect_error("{\"profiles\":{\"bad name!\":{}}}", "grant profile \"bad name!\": the name must",
                 NULL);
    char name[80];
    memset(name, 'n', 65);
    name[65] = '\0';
    char json[256];
    snprintf(json, sizeof(json), "{\"profiles\":{\"%s\":{}}}", name);
    expect_error(json, "the name must be 1..64", NULL);

    /* 257 profiles */
    size_t cap = 257 * 16 + 64;
    char *big = malloc(cap);
    assert_non_null(big);
    size_t o = (size_t)snprintf(big, cap, "{\"profiles\":{");
    for (int i = 0; i < 257; i++)
        o += (size_t)snprintf(big + o, cap - o, "%s\"p%d\":{}", i ? "," : "", i);
    snprintf(big + o, cap - o, "}}");
    expect_error(big, "257 profiles; 1..256 allowed", NULL);
    free(big);

    struct pl_grants *g = NULL;
    struct pl_error e = {0};
    assert_int_equal(pl_grants_parse("{}", PL_GRANTS_MAX_FILE + 1, env_fn, NULL, &g, &e), -1);
    assert_non_null(strstr(e.message, "larger than"));
}

static void test_profile_field_errors(void **state) {
    (void)state;
    static const struct {
        const char *body;
        const char *complaint;
    } cases[] = {
        {P_URL "," P_ROUTES "," P_CALLERS "," P_CRED ",\"extra\":1", "unknown field \"extra\""},
        /* base_url */
        {P_ROUTES "," P_CALLERS "," P_CRED, "base_url is required"},
        {"\"base_url\":1," P_ROUTES "," P_CALLERS "," P_CRED, "base_url must be a string"},
        {"\"base_url\":\"ftp://h\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: must start with http:// or https://"},
        {"\"base_url\":\"HTTP://h\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: must start with http:// or https://"},
        {"\"base_url\":\"http://\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: must name a host"},
        {"\"base_url\":\"http:///api\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: must name a host"},
        {"\"base_url\":\"http://:80\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: must name a host"},
        {"\"base_url\":\"http://u:p@h/\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: must not have userinfo"},
        {"\"base_url\":\"http://h/api?x=1\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: must not have a query or fragment"},
        {"\"base_url\":\"http://h#frag\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: must not have a query or fragment"},
        {"\"base_url\":\"http://h:0\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: the port must be 1..65535"},
        {"\"base_url\":\"http://h:65536\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: the port must be 1..65535"},
        {"\"base_url\":\"http://h:8x\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: the port must be 1..65535"},
        {"\"base_url\":\"http://h:\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: the port must be 1..65535"},
        {"\"base_url\":\"http://h h\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: the host has a byte outside"},
        {"\"base_url\":\"http://[zz]\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: bad IPv6 literal"},
        {"\"base_url\":\"http://[::1]x\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: unexpected byte after the host"},
        {"\"base_url\":\"http://h/a//b\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: path prefix: empty segment"},
        {"\"base_url\":\"http://h//\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: path prefix: empty segment"},
        {"\"base_url\":\"http://h/a/../b\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: path prefix: \".\" or \"..\" segment"},
        {"\"base_url\":\"http://h/a%2Fb\"," P_ROUTES "," P_CALLERS "," P_CRED,
         "base_url: path prefix: escape decodes"},
        /* routes */
        {P_URL "," P_CALLERS "," P_CRED, "routes is required"},
        {P_URL ",\"routes\":[]," P_CALLERS "," P_CRED, "routes: empty route list reaches nothing"},
        {P_URL ",\"routes\":\"GET /\"," P_CALLERS "," P_CRED, "routes: must be an array"},
        {P_URL ",\"routes\":[1]," P_CALLERS "," P_CRED, "routes[0]: must be a string"},
        {P_URL ",\"routes\":[\"FETCH /x\"]," P_CALLERS "," P_CRED,
         "routes[0] \"FETCH /x\": the method must be one of GET HEAD POST PUT PATCH DELETE"},
        {P_URL ",\"routes\":[\"GET /\",\"get /x\"]," P_CALLERS "," P_CRED,
         "routes[1] \"get /x\": the method must be one of"},
        {P_URL ",\"routes\":[\"GET\"]," P_CALLERS "," P_CRED,
         "routes[0] \"GET\": the method must be one of"},
        {P_URL ",\"routes\":[\"GET x\"]," P_CALLERS "," P_CRED,
         "routes[0] \"GET x\": the pattern must start with '/'"},
        {P_URL ",\"routes\":[\"GET  /x\"]," P_CALLERS "," P_CRED,
         "the pattern must start with '/'"},
        {P_URL ",\"routes\":[\"GET /a/**/b\"]," P_CALLERS "," P_CRED,
         "routes[0] \"GET /a/**/b\": \"**\" may only be the last segment"},
        {P_URL ",\"routes\":[\"GET /**/\"]," P_CALLERS "," P_CRED,
         "\"**\" may only be the last segment"},
        {P_URL ",\"routes\":[\"GET /a*\"]," P_CALLERS "," P_CRED,
         "routes[0] \"GET /a*\": a wildcard must be a whole segment"},
        {P_URL ",\"routes\":[\"GET /a/***\"]," P_CALLERS "," P_CRED,
         "a wildcard must be a whole segment"},
        {P_URL ",\"routes\":[\"GET /a/../b\"]," P_CALLERS "," P_CRED,
         "routes[0] \"GET /a/../b\": \".\" or \"..\" segment"},
        {P_URL ",\"routes\":[\"GET /a/./b\"]," P_CALLERS "," P_CRED, "\".\" or \"..\" segment"},
        {P_URL ",\"routes\":[\"GET /a/..;x/b\"]," P_CALLERS "," P_CRED, "\".\" or \"..\" segment"},
        {P_URL ",\"routes\":[\"GET /a/\"]," P_CALLERS "," P_CRED,
         "routes[0] \"GET /a/\": empty segment"},
        {P_URL ",\"routes\":[\"GET /a//b\"]," P_CALLERS "," P_CRED, "empty segment"},
        {P_URL ",\"routes\":[\"GET /a/%2F\"]," P_CALLERS "," P_CRED,
         "escape decodes to '/', '\\', '.', '%' or a control byte"},
        {P_URL ",\"routes\":[\"GET /a/%2e%2e\"]," P_CALLERS "," P_CRED, "escape decodes"},
        {P_URL ",\"routes\":[\"GET /a/%zz\"]," P_CALLERS "," P_CRED,
         "\"%\" must start a %XX escape"},
        {P_URL ",\"routes\":[\"GET /a/%4\"]," P_CALLERS "," P_CRED,
         "\"%\" must start a %XX escape"},
        {P_URL ",\"routes\":[\"GET /a?x=1\"]," P_CALLERS "," P_CRED,
         "routes[0] \"GET /a?x=1\": byte outside RFC 3986 pchar"},
        {P_URL ",\"routes\":[\"GET /a#f\"]," P_CALLERS "," P_CRED, "byte outside RFC 3986 pchar"},
        {P_URL ",\"routes\":[\"GET /a b\"]," P_CALLERS "," P_CRED, "byte outside RFC 3986 pchar"},
        {P_URL ",\"routes\":[\"GET /a\\\\b\"]," P_CALLERS "," P_CRED,
         "byte outside RFC 3986 pchar"},
        /* allowed_callers */
        {P_URL "," P_ROUTES "," P_CRED, "allowed_callers is required"},
        {P_URL "," P_ROUTES ",\"allowed_callers\":[]," P_CRED,
         "allowed_callers: must list at least one"},
        {P_URL "," P_ROUTES ",\"allowed_callers\":\"alice\"," P_CRED,
         "allowed_callers: must be an array of strings"},
        {P_URL "," P_ROUTES ",\"allowed_callers\":[7]," P_CRED,
         "allowed_callers[0]: must be a string"},
        {P_URL "," P_ROUTES ",\"allowed_callers\":[\"\"]," P_CRED,
         "allowed_callers[0]: must be 1..128 bytes"},
        {P_URL "," P_ROUTES ",\"allowed_callers\":[\"al ice\"]," P_CRED,
         "allowed_callers[0] \"al ice\": a principal has no whitespace"},
        {P_URL "," P_ROUTES ",\"allowed_callers\":[\"al\\tice\"]," P_CRED,
         "a principal has no whitespace"},
        {P_URL "," P_ROUTES ",\"allowed_callers\":[\"alice\",\"bob\",\"alice\"]," P_CRED,
         "allowed_callers: \"alice\" is listed twice"},
        /* scopes */
        {P_URL "," P_ROUTES "," P_CALLERS ",\"scopes\":\"a\"," P_CRED,
         "scopes: must be an array of strings"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"scopes\":[\"code:run\"]," P_CRED,
         "scopes[0] \"code:run\": this scope may not be granted"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"scopes\":[\"a\",\"*\"]," P_CRED,
         "scopes[1] \"*\": this scope may not be granted"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"scopes\":[\"a b\"]," P_CRED,
         "scopes[0] \"a b\": must be printable ASCII without spaces"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"scopes\":[\"\"]," P_CRED,
         "scopes[0]: must be 1..128 bytes"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"scopes\":[\"x\",\"x\"]," P_CRED,
         "scopes: \"x\" is listed twice"},
        /* allow_in_sessions */
        {P_URL "," P_ROUTES "," P_CALLERS ",\"allow_in_sessions\":\"yes\"," P_CRED,
         "allow_in_sessions: must be true or false"},
        /* credential */
        {P_URL "," P_ROUTES "," P_CALLERS, "credential is required"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":\"TOK\"",
         "credential: must be an object"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"env\":\"TOK\"}",
         "credential: kind is required"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"kind\":\"oauth\"}",
         "credential: unknown credential kind \"oauth\""},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"kind\":3}",
         "unknown credential kind"},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"shared_token\",\"env\":\"TOK\",\"alg\":\"HS256\"}",
         "credential: unknown field \"alg\""},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"kind\":\"shared_token\"}",
         "credential: env is required"},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"shared_token\",\"env\":\"NOPE_TOKEN\"}",
         "credential: environment variable NOPE_TOKEN is unset or empty"},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"shared_token\",\"env\":\"EMPTY\"}",
         "credential: environment variable EMPTY is unset or empty"},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"shared_token\",\"env\":\"SPACED\"}",
         "credential: environment variable SPACED holds a space"},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"shared_token\",\"env\":\"1TOK\"}",
         "credential: env \"1TOK\" is not a variable name"},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"shared_token\",\"env\":\"TOK\",\"header\":\"Host\"}",
         "credential: header \"Host\" may not carry the credential"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"kind\":\"shared_token\",\"env\":"
               "\"TOK\",\"header\":\"content-length\"}",
         "credential: header \"content-length\" may not carry the credential"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"kind\":\"shared_token\",\"env\":"
               "\"TOK\",\"header\":\"Transfer-Encoding\"}",
         "may not carry the credential"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"kind\":\"shared_token\",\"env\":"
               "\"TOK\",\"header\":\"CONNECTION\"}",
         "may not carry the credential"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"kind\":\"shared_token\",\"env\":"
               "\"TOK\",\"header\":\"X Auth\"}",
         "credential: header \"X Auth\" is not a valid header name"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"kind\":\"shared_token\",\"env\":"
               "\"TOK\",\"header\":\"X:Auth\"}",
         "is not a valid header name"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"kind\":\"shared_token\",\"env\":"
               "\"TOK\",\"header\":\"\"}",
         "credential: header must be 1..64 bytes"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"kind\":\"shared_token\",\"env\":"
               "\"TOK\",\"prefix\":\"Bearer\\r\\n\"}",
         "credential: prefix must be printable ASCII"},
        /* jwt */
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"jwt\",\"alg\":\"none\",\"issuer\":\"i\",\"audience\":"
               "\"a\"}",
         "credential: alg \"none\" is not one of HS256 RS256 EdDSA"},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"jwt\",\"issuer\":\"i\",\"audience\":\"a\"}",
         "credential: alg is required"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_HS "\"audience\":\"a\"}",
         "credential: issuer is required"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_HS "\"issuer\":\"\",\"audience\":\"a\"}",
         "credential: issuer must be 1..1024 bytes"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_HS "\"issuer\":\"i\"}",
         "credential: audience is required"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_HS "\"issuer\":\"i\",\"audience\":\"\"}",
         "credential: audience must be 1..1024 bytes"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_HS
               "\"issuer\":\"i\",\"audience\":\"a\",\"ttl_seconds\":0}",
         "credential: ttl_seconds must be an integer in 1..3600"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_HS
               "\"issuer\":\"i\",\"audience\":\"a\",\"ttl_seconds\":3601}",
         "credential: ttl_seconds must be an integer in 1..3600"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_HS
               "\"issuer\":\"i\",\"audience\":\"a\",\"ttl_seconds\":\"300\"}",
         "credential: ttl_seconds must be an integer"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_HS
               "\"issuer\":\"i\",\"audience\":\"a\",\"ttl_seconds\":30.5}",
         "credential: ttl_seconds must be an integer"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_HS
               "\"issuer\":\"i\",\"audience\":\"a\",\"key_id\":\"\"}",
         "credential: key_id must be 1..256 bytes"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_HS
               "\"issuer\":\"i\",\"audience\":\"a\",\"env\":\"TOK\"}",
         "credential: unknown field \"env\""},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"jwt\",\"alg\":\"HS256\",\"key_env\":\"SHORTKEY\","
               "\"issuer\":\"i\",\"audience\":\"a\"}",
         "credential: environment variable SHORTKEY (key_env) holds fewer than 32 bytes"},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"jwt\",\"alg\":\"HS256\",\"key_env\":\"NOKEY\","
               "\"issuer\":\"i\",\"audience\":\"a\"}",
         "credential: environment variable NOKEY (key_env) is unset or empty"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"kind\":\"jwt\",\"alg\":\"HS256\","
               "\"issuer\":\"i\",\"audience\":\"a\"}",
         "credential: HS256 needs key_env"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_HS
               "\"key_file\":\"/etc/k.pem\",\"issuer\":\"i\",\"audience\":\"a\"}",
         "credential: HS256 takes key_env, not key_file"},
        {P_URL "," P_ROUTES "," P_CALLERS ",\"credential\":{\"kind\":\"jwt\",\"alg\":\"RS256\","
               "\"issuer\":\"i\",\"audience\":\"a\"}",
         "credential: RS256 needs key_file"},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"jwt\",\"alg\":\"EdDSA\",\"key_env\":\"HKEY\","
               "\"issuer\":\"i\",\"audience\":\"a\"}",
         "credential: EdDSA takes key_file, not key_env"},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"jwt\",\"alg\":\"RS256\",\"key_file\":\"k.pem\","
               "\"issuer\":\"i\",\"audience\":\"a\"}",
         "credential: key_file k.pem must be an absolute path"},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"jwt\",\"alg\":\"RS256\",\"key_file\":"
               "\"/nonexistent/k.pem\",\"issuer\":\"i\",\"audience\":\"a\"}",
         "credential: key_file /nonexistent/k.pem cannot be opened"},
        {P_URL "," P_ROUTES "," P_CALLERS
               ",\"credential\":{\"kind\":\"jwt\",\"alg\":\"RS256\",\"key_file\":"
               "\"/dev/null\",\"issuer\":\"i\",\"audience\":\"a\"}",
         "credential: key_file /dev/null is not a regular file"},
        /* limits */
        {P_URL "," P_ROUTES "," P_CALLERS "," P_CRED ",\"limits\":[]", "limits: must be an object"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_CRED ",\"limits\":{\"max_bytes\":1}",
         "limits: unknown field \"max_bytes\""},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_CRED ",\"limits\":{\"max_calls\":0}",
         "limits: max_calls must be an integer in 1..10000"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_CRED ",\"limits\":{\"max_calls\":10001}",
         "limits: max_calls must be an integer in 1..10000"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_CRED ",\"limits\":{\"max_calls\":1.0}",
         "limits: max_calls must be an integer"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_CRED ",\"limits\":{\"max_request_bytes\":67108865}",
         "limits: max_request_bytes must be an integer in 0..67108864"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_CRED ",\"limits\":{\"max_request_bytes\":-1}",
         "limits: max_request_bytes must be an integer in 0..67108864"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_CRED
               ",\"limits\":{\"max_response_bytes\":67108865}",
         "limits: max_response_bytes must be an integer in 0..67108864"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_CRED ",\"limits\":{\"call_timeout_ms\":99}",
         "limits: call_timeout_ms must be an integer in 100..600000"},
        {P_URL "," P_ROUTES "," P_CALLERS "," P_CRED ",\"limits\":{\"call_timeout_ms\":600001}",
         "limits: call_timeout_ms must be an integer in 100..600000"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_profile_error(cases[i].body, cases[i].complaint);
}

/* Errors that need built strings: sizes, counts and key files. */
static void test_bounds_and_key_files(void **state) {
    (void)state;
    char body[12000], s[4200];

    memset(s, 'a', 2040);
    s[2040] = '\0';
    snprintf(body, sizeof(body), "\"base_url\":\"http://h/%s\"," P_ROUTES "," P_CALLERS "," P_CRED,
             s);
    expect_profile_error(body, "base_url must be 1..2048 bytes");

    memset(s, 'c', 129);
    s[129] = '\0';
    snprintf(body, sizeof(body), P_URL "," P_ROUTES ",\"allowed_callers\":[\"%s\"]," P_CRED, s);
    expect_profile_error(body, "allowed_callers[0]: must be 1..128 bytes");
    snprintf(body, sizeof(body), P_URL "," P_ROUTES "," P_CALLERS ",\"scopes\":[\"%s\"]," P_CRED,
             s);
    expect_profile_error(body, "scopes[0]: must be 1..128 bytes");

    size_t o = (size_t)snprintf(body, sizeof(body), P_URL ",\"routes\":[");
    for (int i = 0; i < 257; i++)
        o += (size_t)snprintf(body + o, sizeof(body) - o, "%s\"GET /r%d\"", i ? "," : "", i);
    snprintf(body + o, sizeof(body) - o, "]," P_CALLERS "," P_CRED);
    expect_profile_error(body, "routes: more than 256 routes");

    o = (size_t)snprintf(s, sizeof(s), "GET ");
    for (int i = 0; i < 65; i++)
        o += (size_t)snprintf(s + o, sizeof(s) - o, "/s");
    snprintf(body, sizeof(body), P_URL ",\"routes\":[\"%s\"]," P_CALLERS "," P_CRED, s);
    expect_profile_error(body, "more than 64 segments");

    struct {
        const char *alg, *file, *complaint;
    } keys[] = {
        {"RS256", ed_pem, "RS256 needs an RSA key of at least 2048 bits"},
        {"RS256", rsa1024_pem, "RS256 needs an RSA key of at least 2048 bits"},
        {"EdDSA", rsa_pem, "EdDSA needs an Ed25519 key"},
        {"RS256", enc_pem, "holds no unencrypted PEM private key"},
        {"RS256", junk_pem, "holds no unencrypted PEM private key"},
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        snprintf(body, sizeof(body),
                 P_URL "," P_ROUTES "," P_CALLERS
                       ",\"credential\":{\"kind\":\"jwt\",\"alg\":\"%s\",\"key_file\":\"%s\","
                       "\"issuer\":\"i\",\"audience\":\"a\"}",
                 keys[i].alg, keys[i].file);
        expect_profile_error(body, keys[i].complaint);
        expect_profile_error(body, keys[i].file);
    }
}

/* ---- paths and routes --------------------------------------------------- */

static void test_path_canonical(void **state) {
    (void)state;
    static const char *const good[] = {
        "/",      "/a",   "/items/1",     "/a/b/c",     "/a:b@c",        "/~x-_.y",
        "/a;b=c", "/%41", "/%c3%a9",      "/%7e",       "/.a",           "/a.b",
        "/a;b.",  "/*",   "/!$&'()*+,;=", "/%e2%82%ac", "/%F0%9F%98%80", "/a%20b",
    };
    static const char *const bad[] = {
        "",
        "a",
        "//",
        "/a/",
        "/a//b",
        "/.",
        "/..",
        "/a/./b",
        "/a/..",
        "/..;x",
        "/.;",
        "/?",
        "/a?b=1",
        "/a#f",
        "/a b",
        "/a\\b",
        "/%2F",
        "/%2f",
        "/%5C",
        "/%5c",
        "/%2E",
        "/%2e",
        "/%25",
        "/%00",
        "/%1f",
        "/%7F",
        "/%",
        "/%4",
        "/%zz",
        "/a%2",
        "/\x01",
        "/\x7f",
        "/\xc3\xa9",
        "/a\"b",
        "/<",
        "/[",
        "/a|b",
        "/`",
        "/^",
        "/{",
        /* trailing dots or spaces, which some servers strip */
        "/...",
        "/a.",
        "/admin.",
        "/admin..",
        "/a%20",
        "/a.%20",
        "/a.;x",
        "/a%20;x",
        /* dot segments carrying an encoded ';' path parameter */
        "/..%3b",
        "/..%3B",
        "/.%3bx",
        "/x/..%3Bfoo/y",
        /* overlong, truncated or invalid UTF-8 escapes */
        "/%c0%ae",
        "/%C0%AE%C0%AE",
        "/%e0%80%ae",
        "/%c0%af",
        "/%c3",
        "/%80",
        "/%ff",
        "/%ed%a0%80",
        "/%f4%90%80%80",
        "/%c3%28",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        if (!pl_grant_path_canonical(good[i]))
            print_error("should be canonical: %s\n", good[i]);
        assert_true(pl_grant_path_canonical(good[i]));
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (pl_grant_path_canonical(bad[i]))
            print_error("should not be canonical: %s\n", bad[i]);
        assert_false(pl_grant_path_canonical(bad[i]));
    }
    assert_false(pl_grant_path_canonical(NULL));

    char p[PL_GRANT_PATH_MAX + 8];
    p[0] = '/';
    memset(p + 1, 'a', PL_GRANT_PATH_MAX - 1);
    p[PL_GRANT_PATH_MAX] = '\0';
    assert_true(pl_grant_path_canonical(p));
    p[PL_GRANT_PATH_MAX] = 'a';
    p[PL_GRANT_PATH_MAX + 1] = '\0';
    assert_false(pl_grant_path_canonical(p));

    size_t o = 0;
    for (int i = 0; i < 64; i++)
        o += (size_t)snprintf(p + o, sizeof(p) - o, "/s");
    assert_true(pl_grant_path_canonical(p));
    snprintf(p + o, sizeof(p) - o, "/s");
    assert_false(pl_grant_path_canonical(p));
}

static void test_route_matching(void **state) {
    (void)state;
    struct pl_grants *g = load_valid();
    const struct pl_grant_profile *p = pl_grants_find(g, "items-read");
    // routes: GET /items/*, POST /items/*/notes, GET /reports/**, GET /, DELETE /a/b
    static const struct {
        const char *method, *path;
        bool allowed;
    } cases[] = {
        {"GET", "/items/1", true},
        {"GET", "/items/%c3%a9", true},
        {"GET", "/items/*", true},
        {"GET", "/items", false},
        {"GET", "/items/", false},
        {"GET", "/items/1/", false},
        {"GET", "/items/1/2", false},
        {"GET", "/items//1", false},
        {"GET", "/itemsx/1", false},
        {"GET", "/Items/1", false},
        {"GET", "/items/..", false},
        {"GET", "/items/.", false},
        {"GET", "/items/%2F", false},
        {"GET", "/items/%2f", false},
        {"GET", "/items/a%2Fb", false},
        {"GET", "/items/%2e%2e", false},
        {"GET", "/items/1?x=1", false},
        {"GET", "/items/1#f", false},
        {"HEAD", "/items/1", false},
        {"get", "/items/1", false},
        {"POST", "/items/1", false},
        {"POST", "/items/1/notes", true},
        {"POST", "/items/1/notes/", false},
        {"POST", "/items/1/notes/2", false},
        {"POST", "/items/1/Notes", false},
        {"POST", "/items/1/%6eotes", false},
        {"GET", "/items/1/notes", false},
        {"GET", "/reports", true},
        {"GET", "/reports/a", true},
        {"GET", "/reports/a/b/c", true},
        {"GET", "/reports/", false},
        {"GET", "/reportsx", false},
        {"GET", "/reports/../items", false},
        {"GET", "/reports/a/..;/x", false},
        {"POST", "/reports/a", false},
        {"GET", "/", true},
        {"POST", "/", false},
        {"DELETE", "/a/b", true},
        {"DELETE", "/a", false},
        {"DELETE", "/a/b/c", false},
        {"DELETE", "/a/B", false},
        {"GET", "", false},
        {"GET", "items/1", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool got = pl_grant_route_allows(p, cases[i].method, cases[i].path);
        if (got != cases[i].allowed)
            print_error("%s %s: got %d\n", cases[i].method, cases[i].path, got);
        assert_int_equal(got, cases[i].allowed);
    }
    assert_false(pl_grant_route_allows(NULL, "GET", "/items/1"));
    assert_false(pl_grant_route_allows(p, NULL, "/items/1"));
    assert_false(pl_grant_route_allows(p, "GET", NULL));

    // "/**" reaches every canonical path, "/" included.
    p = pl_grants_find(g, "items-jwt");
    assert_true(pl_grant_route_allows(p, "GET", "/"));
    assert_true(pl_grant_route_allows(p, "GET", "/a/b/c/d"));
    assert_false(pl_grant_route_allows(p, "GET", "/a/../b"));
    assert_false(pl_grant_route_allows(p, "HEAD", "/a"));
    pl_grants_free(g);
}

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

/* ---- the file ----------------------------------------------------------- */

static void test_load_file(void **state) {
    (void)state;
    char path[160];
    struct pl_error e = {0};
    const char *err = e.message;
    struct pl_grants *g = NULL;
    assert_int_equal(pl_grants_load_file("/nonexistent/grants.json", env_fn, NULL, &g, &e), -1);
    assert_non_null(strstr(err, "PLIMSOLL_GRANTS_FILE: /nonexistent/grants.json cannot be opened"));
    assert_int_equal(pl_grants_load_file(dir, env_fn, NULL, &g, &e), -1);
    assert_int_equal(strncmp(err, "PLIMSOLL_GRANTS_FILE: ", 22), 0);

    snprintf(path, sizeof(path), "%s/grants.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(valid_file(), f);
    fclose(f);
    assert_int_equal(pl_grants_load_file(path, env_fn, NULL, &g, &e), 0);
    assert_int_equal(g->n, 4);
    pl_grants_free(g);
    g = NULL;

    f = fopen(path, "w");
    fputs("{\"profiles\":{\"billing\":{\"routes\":[]}}}", f);
    fclose(f);
    assert_int_equal(pl_grants_load_file(path, env_fn, NULL, &g, &e), -1);
    assert_string_equal(err, "PLIMSOLL_GRANTS_FILE: grant profile \"billing\": base_url is "
                             "required");

    f = fopen(path, "w");
    assert_int_equal(fputc('{', f), '{');
    for (size_t i = 0; i < PL_GRANTS_MAX_FILE; i++)
        fputc(' ', f);
    fclose(f);
    assert_int_equal(pl_grants_load_file(path, env_fn, NULL, &g, &e), -1);
    assert_non_null(strstr(err, "PLIMSOLL_GRANTS_FILE: "));
    assert_non_null(strstr(err, "is larger than 1048576 bytes"));
    assert_null(g);
    unlink(path);
}

/* The error object: NULL is accepted, the reason says who is at fault, the
 * errno of a file that cannot be read is kept, and every file the grants
 * name is read strictly: a FIFO is refused at once, never waited on. */
static void test_error_object(void **state) {
    (void)state;
    struct pl_grants *g = NULL;
    assert_int_equal(pl_grants_parse("[]", 2, env_fn, NULL, &g, NULL), -1);
    assert_null(g);

    struct pl_error e = {0};
    assert_int_equal(pl_grants_load_file("/nonexistent/grants.json", env_fn, NULL, &g, &e), -1);
    assert_string_equal(e.message,
                        "PLIMSOLL_GRANTS_FILE: /nonexistent/grants.json cannot be opened");
    assert_int_equal(e.errnum, ENOENT);
    assert_int_equal(e.reason, PL_REASON_INVALID_REQUEST);

    char fifo[160], body[1024];
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    e = (struct pl_error){0};
    assert_int_equal(pl_grants_load_file(fifo, env_fn, NULL, &g, &e), -1);
    assert_non_null(strstr(e.message, "PLIMSOLL_GRANTS_FILE: "));
    assert_non_null(strstr(e.message, "is not a regular file"));
    assert_int_equal(e.errnum, EINVAL);
    snprintf(body, sizeof(body),
             P_URL "," P_ROUTES "," P_CALLERS
                   ",\"credential\":{\"kind\":\"jwt\",\"alg\":\"RS256\",\"key_file\":\"%s\","
                   "\"issuer\":\"i\",\"audience\":\"a\"}",
             fifo);
    expect_profile_error(body, "is not a regular file");
    snprintf(body, sizeof(body),
             "\"base_url\":\"https://127.0.0.1/api\"," P_ROUTES "," P_CALLERS "," P_CRED
             ",\"ca_file\":\"%s\"",
             fifo);
    expect_profile_error(body, "ca_file: ");
    expect_profile_error(body, "is not a regular file");
    unlink(fifo);

    /* A run-time failure is INTERNAL and names the profile. */
    g = load_valid();
    char *v = NULL;
    e = (struct pl_error){0};
    const struct pl_grant_profile *p = pl_grants_find(g, "items-read");
    assert_int_equal(pl_grant_credential(p, env_fn, NULL, "mallory", 1, &v, &e), -1);
    assert_int_equal(e.reason, PL_REASON_INTERNAL);
    assert_int_equal(pl_grant_credential(p, env_fn, NULL, "mallory", 1, &v, NULL), -1);
    e = (struct pl_error){0};
    assert_int_equal(pl_jwt_mint(pl_grants_find(g, "items-jwt"), "alice", -1, &v, &e), -1);
    assert_int_equal(e.reason, PL_REASON_INTERNAL);
    assert_null(v);
    pl_grants_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_file),
        cmocka_unit_test(test_top_level_errors),
        cmocka_unit_test(test_profile_field_errors),
        cmocka_unit_test(test_bounds_and_key_files),
        cmocka_unit_test(test_path_canonical),
        cmocka_unit_test(test_route_matching),
        cmocka_unit_test(test_shared_token_credential),
        cmocka_unit_test(test_token_never_in_messages),
        cmocka_unit_test(test_jwt_hs256),
        cmocka_unit_test(test_jwt_rs256),
        cmocka_unit_test(test_jwt_eddsa),
        cmocka_unit_test(test_jwt_refusals),
        cmocka_unit_test(test_b64url),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_error_object),
    };
    return cmocka_run_group_tests(tests, setup_keys, teardown_keys);
}
