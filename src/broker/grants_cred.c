/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grants_cred.c: a grant profile's credential, the header value its run's
 * calls carry: read and checked when the grants file is parsed, made again
 * for every run.
 *
 * A shared token is only named by the file: its variable must hold a
 * sendable value at load, and is read again for every credential.  A JWT's
 * key is loaded once (an HS256 key copied from its variable, an RS256 or
 * EdDSA key read from its PEM file) and jwt.c mints a fresh token per run.
 * No message ever quotes a value.
 */
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/fileread.h"
#include "grants_int.h"
#include "jwt.h"

#define DEFAULT_HEADER "Authorization"
#define DEFAULT_PREFIX "Bearer "
#define DEFAULT_TTL_S 300u
#define HEADER_NAME_MAX 64u
#define PREFIX_MAX 256u
#define ENV_NAME_MAX 128u
#define JWT_STRING_MAX 1024u /* issuer, audience */
#define KEY_ID_MAX 256u

/* ---- helpers ------------------------------------------------------------ */

/* The variable's value, or NULL when it is unset or empty. */
static const char *env_get(pl_grants_env_fn env, void *userdata, const char *name) {
    if (!env)
        return NULL;
    const char *v = env(name, userdata);
    return (v && *v) ? v : NULL;
}

static char *dup_or_null(const char *s) {
    return s ? strdup(s) : NULL;
}

static bool valid_env_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > ENV_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_'))
            return false;
    }
    return true;
}

/* RFC 7230 tchar. */
static bool is_tchar(unsigned char ch) {
    if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))
        return true;
    return ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

/* ---- parsing ------------------------------------------------------------ */

static const char *const HOP_HEADERS[] = {
    "Host", "Content-Length", "Transfer-Encoding", "Connection",       "Upgrade",
    "TE",   "Trailer",        "Keep-Alive",        "Proxy-Connection", NULL,
};

static int parse_header_and_prefix(struct pctx *c, json_t *cred, struct pl_grant_profile *p) {
    const char *h, *pre;
    if (gr_get_string(c, cred, "credential: ", "header", false, 1, HEADER_NAME_MAX, &h) < 0)
        return -1;
    if (h) {
        for (const char *q = h; *q; q++)
            if (!is_tchar((unsigned char)*q))
                return gr_perr(c, "credential: header \"%.64s\" is not a valid header name", h);
        for (const char *const *x = HOP_HEADERS; *x; x++)
            if (strcasecmp(*x, h) == 0)
                return gr_perr(c, "credential: header \"%s\" may not carry the credential", h);
    }
    if (gr_get_string(c, cred, "credential: ", "prefix", false, 0, PREFIX_MAX, &pre) < 0)
        return -1;
    if (pre && !gr_bytes_within(pre, 0x20, 0x7e))
        return gr_perr(c, "credential: prefix must be printable ASCII");
    p->header = strdup(h ? h : DEFAULT_HEADER);
    p->prefix = strdup(pre ? pre : DEFAULT_PREFIX);
    if (!p->header || !p->prefix)
        return gr_perr(c, "out of memory");
    return 0;
}

/* Why a shared token's value cannot be sent, or NULL.  Never quotes it. */
static const char *token_problem(const char *v) {
    if (!v)
        return "is unset or empty";
    if (strnlen(v, PL_GRANT_TOKEN_MAX + 1) > PL_GRANT_TOKEN_MAX)
        return "holds more than 8192 bytes";
    if (!gr_bytes_within(v, 0x21, 0x7e))
        return "holds a space, control or non-ASCII byte";
    return NULL;
}

static int parse_shared_token(struct pctx *c, json_t *cred, struct pl_grant_profile *p) {
    static const char *const fields[] = {"kind", "env", "header", "prefix", NULL};
    if (gr_check_fields(c, cred, "credential: ", fields) < 0)
        return -1;
    const char *name;
    if (gr_get_string(c, cred, "credential: ", "env", true, 1, ENV_NAME_MAX, &name) < 0)
        return -1;
    if (!valid_env_name(name))
        return gr_perr(c, "credential: env \"%.128s\" is not a variable name", name);
    const char *problem = token_problem(env_get(c->env, c->userdata, name));
    if (problem)
        return gr_perr(c, "credential: environment variable %s %s", name, problem);
    p->kind = PL_CRED_SHARED_TOKEN;
    p->token_env = strdup(name);
    if (!p->token_env)
        return gr_perr(c, "out of memory");
    return 0;
}

/* PEM callback: never prompt; an encrypted key is refused. */
static int no_passphrase(char *buf, int size, int rwflag, void *u) {
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

static int load_key_file(struct pctx *c, const char *path, struct pl_grant_profile *p) {
    char *buf = NULL;
    size_t len = 0;
    int r = pl_file_read(path, PL_GRANT_KEY_FILE_MAX, &buf, &len);
    if (r < 0) {
        if (r == -EFBIG)
            gr_perr(c, "credential: key_file %s is larger than %u bytes", path,
                    PL_GRANT_KEY_FILE_MAX);
        else
            gr_perr(c, "credential: key_file %s %s", path, pl_file_problem(r));
        return gr_keep_errno(c->err, r);
    }
    BIO *bio = BIO_new_mem_buf(buf, (int)len);
    EVP_PKEY *pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
    BIO_free(bio);
    pl_file_free(buf, len);
    ERR_clear_error();
    if (!pkey)
        return gr_perr(c, "credential: key_file %s holds no unencrypted PEM private key", path);
    p->pkey = pkey;
    int id = EVP_PKEY_get_base_id(pkey);
    if (p->alg == PL_JWT_RS256 && (id != EVP_PKEY_RSA || EVP_PKEY_get_bits(pkey) < 2048))
        return gr_perr(c, "credential: key_file %s: RS256 needs an RSA key of at least 2048 bits",
                       path);
    if (p->alg == PL_JWT_EDDSA && id != EVP_PKEY_ED25519)
        return gr_perr(c, "credential: key_file %s: EdDSA needs an Ed25519 key", path);
    return 0;
}

static int parse_jwt(struct pctx *c, json_t *cred, struct pl_grant_profile *p) {
    static const char *const fields[] = {"kind",   "alg",      "key_env",     "key_file",
                                         "issuer", "audience", "ttl_seconds", "key_id",
                                         "header", "prefix",   NULL};
    if (gr_check_fields(c, cred, "credential: ", fields) < 0)
        return -1;
    p->kind = PL_CRED_JWT;
    const char *alg, *iss, *aud, *kid, *key_env, *key_file;
    if (gr_get_string(c, cred, "credential: ", "alg", true, 1, 64, &alg) < 0)
        return -1;
    if (strcmp(alg, "HS256") == 0)
        p->alg = PL_JWT_HS256;
    else if (strcmp(alg, "RS256") == 0)
        p->alg = PL_JWT_RS256;
    else if (strcmp(alg, "EdDSA") == 0)
        p->alg = PL_JWT_EDDSA;
    else
        return gr_perr(c, "credential: alg \"%s\" is not one of HS256 RS256 EdDSA", alg);
    if (gr_get_string(c, cred, "credential: ", "issuer", true, 1, JWT_STRING_MAX, &iss) < 0 ||
        gr_get_string(c, cred, "credential: ", "audience", true, 1, JWT_STRING_MAX, &aud) < 0 ||
        gr_get_string(c, cred, "credential: ", "key_id", false, 1, KEY_ID_MAX, &kid) < 0 ||
        gr_get_string(c, cred, "credential: ", "key_env", false, 1, ENV_NAME_MAX, &key_env) < 0 ||
        gr_get_string(c, cred, "credential: ", "key_file", false, 1, KEY_FILE_PATH_MAX, &key_file) <
            0)
        return -1;
    unsigned long long ttl;
    if (gr_get_uint(c, cred, "credential: ", "ttl_seconds", 1, PL_GRANT_TTL_MAX, DEFAULT_TTL_S,
                    &ttl) < 0)
        return -1;
    p->ttl_s = (unsigned)ttl;
    p->issuer = strdup(iss);
    p->audience = strdup(aud);
    p->key_id = dup_or_null(kid);
    if (!p->issuer || !p->audience || (kid && !p->key_id))
        return gr_perr(c, "out of memory");
    if (p->alg == PL_JWT_HS256) {
        if (key_file)
            return gr_perr(c, "credential: HS256 takes key_env, not key_file");
        if (!key_env)
            return gr_perr(c, "credential: HS256 needs key_env");
        if (!valid_env_name(key_env))
            return gr_perr(c, "credential: key_env \"%.128s\" is not a variable name", key_env);
        const char *key = env_get(c->env, c->userdata, key_env);
        if (!key)
            return gr_perr(c, "credential: environment variable %s (key_env) is unset or empty",
                           key_env);
        size_t klen = strnlen(key, PL_GRANT_HMAC_KEY_MAX + 1);
        if (klen < PL_GRANT_HMAC_KEY_MIN)
            return gr_perr(c,
                           "credential: environment variable %s (key_env) holds fewer than %u "
                           "bytes; HS256 needs at least %u",
                           key_env, PL_GRANT_HMAC_KEY_MIN, PL_GRANT_HMAC_KEY_MIN);
        if (klen > PL_GRANT_HMAC_KEY_MAX)
            return gr_perr(c,
                           "credential: environment variable %s (key_env) holds more than %u bytes",
                           key_env, PL_GRANT_HMAC_KEY_MAX);
        p->hmac_key = malloc(klen);
        if (!p->hmac_key)
            return gr_perr(c, "out of memory");
        memcpy(p->hmac_key, key, klen);
        p->hmac_key_len = klen;
        return 0;
    }
    if (key_env)
        return gr_perr(c, "credential: %s takes key_file, not key_env", alg);
    if (!key_file)
        return gr_perr(c, "credential: %s needs key_file", alg);
    if (key_file[0] != '/')
        return gr_perr(c, "credential: key_file %.256s must be an absolute path", key_file);
    return load_key_file(c, key_file, p);
}

int gr_parse_credential(struct pctx *c, json_t *prof, struct pl_grant_profile *p) {
    json_t *cred = json_object_get(prof, "credential");
    if (!cred)
        return gr_perr(c, "credential is required");
    if (!json_is_object(cred))
        return gr_perr(c, "credential: must be an object");
    json_t *kind = json_object_get(cred, "kind");
    if (!kind)
        return gr_perr(c, "credential: kind is required");
    const char *k = json_is_string(kind) ? json_string_value(kind) : "";
    int r;
    if (strcmp(k, "shared_token") == 0)
        r = parse_shared_token(c, cred, p);
    else if (strcmp(k, "jwt") == 0)
        r = parse_jwt(c, cred, p);
    else
        return gr_perr(c, "credential: unknown credential kind \"%.64s\" (shared_token or jwt)", k);
    if (r < 0)
        return r;
    return parse_header_and_prefix(c, cred, p);
}

/* ---- one run's credential ----------------------------------------------- */

/* prefix + value, malloc'd. */
static char *join_prefix(const char *prefix, const char *value) {
    size_t a = strlen(prefix), b = strlen(value);
    char *out = malloc(a + b + 1);
    if (!out)
        return NULL;
    memcpy(out, prefix, a);
    memcpy(out + a, value, b + 1);
    return out;
}

int pl_grant_credential(const struct pl_grant_profile *p, pl_grants_env_fn env, void *userdata,
                        const char *principal, time_t now, char **ret_value, struct pl_error *err) {
    if (!p || !ret_value)
        return gr_fail(err, PL_REASON_INTERNAL, "grants: no profile");
    struct pctx c = {err, PL_REASON_INTERNAL, p->name, env, userdata};
    if (!pl_grant_caller_allowed(p, principal))
        return gr_perr(&c, "the caller is not in allowed_callers");
    if (p->kind == PL_CRED_SHARED_TOKEN) {
        const char *token = env_get(env, userdata, p->token_env);
        const char *problem = token_problem(token);
        if (problem)
            return gr_perr(&c, "credential: environment variable %s %s", p->token_env, problem);
        char *out = join_prefix(p->prefix, token);
        if (!out)
            return gr_perr(&c, "out of memory");
        *ret_value = out;
        return 0;
    }
    char *jwt = NULL;
    if (pl_jwt_mint(p, principal, now, &jwt, err) < 0)
        return -1;
    char *out = join_prefix(p->prefix, jwt);
    OPENSSL_cleanse(jwt, strlen(jwt));
    free(jwt);
    if (!out)
        return gr_perr(&c, "out of memory");
    *ret_value = out;
    return 0;
}
