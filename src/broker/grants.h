/* TEMPORARY interface copy; replaced by the real header on merge. */
#pragma once
#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>
typedef const char *(*pl_grants_env_fn)(const char *name, void *userdata);
enum pl_cred_kind { PL_CRED_SHARED_TOKEN, PL_CRED_JWT };
enum pl_jwt_alg { PL_JWT_HS256, PL_JWT_RS256, PL_JWT_EDDSA };
struct pl_route {
    char *text;
    char method[8];
    char **segs;
    size_t nsegs;
    bool tail;
};
struct pl_grant_profile {
    char *name;
    char *base_url;
    struct pl_route *routes;
    size_t nroutes;
    char **callers;
    size_t ncallers;
    char **scopes;
    size_t nscopes;
    bool allow_in_sessions;
    enum pl_cred_kind kind;
    char *header;
    char *prefix;
    char *token_env;
    enum pl_jwt_alg alg;
    char *issuer, *audience, *key_id;
    unsigned ttl_s;
    unsigned char *hmac_key;
    size_t hmac_key_len;
    EVP_PKEY *pkey;
    unsigned max_calls;
    size_t max_request_bytes;
    size_t max_response_bytes;
    unsigned call_timeout_ms;
};
struct pl_grants {
    struct pl_grant_profile *profiles;
    size_t n;
};
int pl_grants_parse(const char *json, size_t len, pl_grants_env_fn env, void *userdata,
                    struct pl_grants **ret_grants, char *errbuf, size_t errlen);
int pl_grants_load_file(const char *path, pl_grants_env_fn env, void *userdata,
                        struct pl_grants **ret_grants, char *errbuf, size_t errlen);
void pl_grants_free(struct pl_grants *g);
const struct pl_grant_profile *pl_grants_find(const struct pl_grants *g, const char *name);
bool pl_grant_caller_allowed(const struct pl_grant_profile *p, const char *principal);
bool pl_grant_path_canonical(const char *path);
bool pl_grant_route_allows(const struct pl_grant_profile *p, const char *method, const char *path);
int pl_grant_credential(const struct pl_grant_profile *p, pl_grants_env_fn env, void *userdata,
                        const char *principal, time_t now, char **ret_value, char *errbuf,
                        size_t errlen);
