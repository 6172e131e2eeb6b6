/* SPDX-License-Identifier: Apache-2.0 */
/* test_grants.c: the grants file: a valid file read in full, every
 * complaint about a bad one, the file on disk and the error object. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/broker/grants.h"
#include "../../src/broker/jwt.h"
#include "grants_test_util.h"

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
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_error_object),
    };
    return cmocka_run_group_tests(tests, setup_keys, teardown_keys);
}
