/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grants.h: grant profiles, the operator's list of API routes a run may call.
 *
 * PLIMSOLL_GRANTS_FILE names a JSON file of profiles.  A run may name one; the
 * broker then lets the sandboxed code call exactly the listed HTTP routes of
 * one API and adds a credential that the sandbox never sees.  This file holds
 * the parser and validator, the route matcher and the credential maker; the
 * broker itself lives elsewhere.
 *
 * The file format and its rules follow in line comments, because route
 * patterns contain the block-comment opener.
 */

// The file:
//
//   {
//     "profiles": {
//       "items-read": {
//         "base_url": "http://127.0.0.1:8080/api",
//         "routes": ["GET /items/*", "POST /items/*/notes", "GET /reports/**"],
//         "allowed_callers": ["alice", "bob"],
//         "scopes": ["items:read"],
//         "allow_in_sessions": false,
//         "credential": {"kind": "shared_token", "env": "ITEMS_TOKEN",
//                        "header": "Authorization", "prefix": "Bearer "},
//         "limits": {"max_calls": 64, "max_request_bytes": 1048576,
//                    "max_response_bytes": 4194304, "call_timeout_ms": 10000}
//       },
//       "items-jwt": { ..., "credential": {"kind": "jwt", "alg": "HS256",
//                    "key_env": "ITEMS_JWT_KEY", "issuer": "plimsoll",
//                    "audience": "items-api", "ttl_seconds": 300, "key_id": "k1"} },
//       "items-rsa": { ..., "credential": {"kind": "jwt", "alg": "RS256",
//                    "key_file": "/etc/plimsoll/items.pem", "issuer": "...",
//                    "audience": "...", "ttl_seconds": 300} }
//     }
//   }
//
// Rules.  Each violation is a parse error; where a profile is at fault the
// message reads `grant profile "NAME": FIELD: complaint`.
//
//   - The file is at most 1 MiB of JSON, duplicate object keys are refused,
//     and unknown fields are refused at every level.
//   - The top level is an object with only "profiles": an object of 1..256
//     profiles whose names match [A-Za-z0-9._-]{1,64}.
//   - base_url (required): "http://" or "https://" (lower case), a host
//     (a name of [A-Za-z0-9._~-] or a bracketed IPv6 literal), an optional
//     port 1..65535, an optional path prefix that follows the request path
//     rules below; no userinfo, query or fragment; at most 2048 bytes.  One
//     trailing '/' is stripped.
//   - routes (required): 1..256 strings "METHOD /pattern", one space between.
//     METHOD is one of GET HEAD POST PUT PATCH DELETE.  The pattern follows
//     the request path rules, except that a segment may be "*" (exactly one
//     segment) and the last segment may be "**" (zero or more segments).
//     "**" anywhere but last is an error, and so is a '*' inside a longer
//     segment ("a*"): wildcards are whole segments.  "/" alone reaches only
//     the path "/"; "/**" reaches every path.  An empty list reaches nothing
//     and is an error.
//   - allowed_callers (required): 1..1024 principals, each 1..128 bytes with
//     no whitespace or control bytes; duplicates refused.
//   - scopes (optional, default []): 0..256 strings of 1..128 printable ASCII
//     bytes without spaces; duplicates refused; "code:run" and "*" refused.
//   - allow_in_sessions (optional): boolean, default false.
//   - credential (required): an object whose "kind" is "shared_token" or
//     "jwt".  Both kinds take:
//       header  request header the credential goes in, default
//               "Authorization"; an RFC 7230 token of at most 64 bytes, not
//               Host, Content-Length, Transfer-Encoding, Connection, Upgrade,
//               TE, Trailer, Keep-Alive or Proxy-Connection (any case).
//       prefix  put before the value, default "Bearer "; 0..256 printable
//               ASCII bytes (space included).
//     shared_token takes "env": the name ([A-Za-z_][A-Za-z0-9_]{0,127}) of a
//     daemon environment variable that must be set and non-empty at load,
//     hold 1..8192 printable ASCII bytes without spaces; it is read again for
//     every credential.  The value never appears in any message.
//     jwt takes "alg" (HS256, RS256 or EdDSA), "issuer" and "audience"
//     (1..1024 bytes each), "ttl_seconds" (1..3600, default 300) and an
//     optional "key_id" (1..256 bytes, sent as the header's "kid").  HS256
//     takes "key_env", a variable holding at least 32 (at most 4096) bytes of
//     key, and no "key_file"; RS256 and EdDSA take "key_file", an absolute
//     path to an unencrypted PEM private key of at most 64 KiB (RSA of at
//     least 2048 bits for RS256, Ed25519 for EdDSA), and no "key_env".
//   - limits (optional): max_calls 1..10000 (default 64) per run,
//     max_request_bytes 0..64 MiB (default 1 MiB) of request body,
//     max_response_bytes 0..64 MiB (default 4 MiB) of response body,
//     call_timeout_ms 100..600000 (default 10000).  Integers only.
//
// Request paths.  A path is canonical when it starts with '/', is at most
// 4096 bytes and 64 segments, has no '?' or '#', no empty segment ("//" or a
// trailing '/', except the path "/" itself), no "." or ".." segment (nor one
// that is "." or ".." before a ';' or its escape %3B, which some servers strip
// as a path parameter), no segment whose name (before a ';') ends in a dot or
// a space (literal or %20: some servers strip them), and every byte is an
// RFC 3986 pchar (unreserved, sub-delims, ':' '@') or a %XX escape with two
// hex digits of either case.  An escape may
// not decode to '/', '\\', '.', '%', a control byte (0x00-0x1f) or DEL (0x7f):
// %2F %5C %2E %25 %00-%1F %7F are refused in either case, because a server
// that decodes them would see a different path than the one matched.
// Escapes of 0x80-0xff are allowed when the segment they are in decodes to
// UTF-8 in its shortest form (an overlong %C0%AE is '.' to a lenient
// decoder).  Matching is byte-exact on the
// path as sent: "/items/%41" does not match a literal "A", and "%c3%a9" does
// not match "%C3%A9" (which fails closed, since routes only allow).

#pragma once

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "../core/errors.h"

#define PL_GRANTS_MAX_FILE (1u << 20)     /* bytes in PLIMSOLL_GRANTS_FILE */
#define PL_GRANTS_MAX_PROFILES 256u       /* profiles in one file */
#define PL_GRANT_NAME_MAX 64u             /* bytes in a profile name */
#define PL_GRANT_BASE_URL_MAX 2048u       /* bytes in base_url */
#define PL_GRANT_MAX_ROUTES 256u          /* routes per profile */
#define PL_GRANT_MAX_CALLERS 1024u        /* allowed_callers per profile */
#define PL_GRANT_MAX_SCOPES 256u          /* scopes per profile */
#define PL_GRANT_STRING_MAX 128u          /* bytes in a principal or a scope */
#define PL_GRANT_PATH_MAX 4096u           /* bytes in a request path */
#define PL_GRANT_PATH_MAX_SEGS 64u        /* segments in a request path */
#define PL_GRANT_TOKEN_MAX 8192u          /* bytes in a shared token */
#define PL_GRANT_HMAC_KEY_MIN 32u         /* bytes in an HS256 key */
#define PL_GRANT_HMAC_KEY_MAX 4096u       /* bytes in an HS256 key */
#define PL_GRANT_KEY_FILE_MAX (64u << 10) /* bytes in a PEM key file */
#define PL_GRANT_CA_FILE_MAX (1u << 20)   /* bytes in a ca_file */
#define PL_GRANT_TTL_MAX 3600u            /* jwt ttl_seconds */
#define PL_GRANT_BODY_MAX (64u << 20)     /* max_request/response_bytes */
#define PL_GRANT_MAX_CALLS_MAX 10000u     /* limits.max_calls */
#define PL_GRANT_TIMEOUT_MIN_MS 100u      /* limits.call_timeout_ms */
#define PL_GRANT_TIMEOUT_MAX_MS 600000u   /* limits.call_timeout_ms */

/* Same shape as pl_env_lookup_fn in src/core/config.h: NULL when unset. */
typedef const char *(*pl_grants_env_fn)(const char *name, void *userdata);

enum pl_cred_kind { PL_CRED_SHARED_TOKEN, PL_CRED_JWT };
enum pl_jwt_alg { PL_JWT_HS256, PL_JWT_RS256, PL_JWT_EDDSA };

// One route, e.g. "GET /items/*/notes".
struct pl_route {
    char *text;     /* the route as written, for messages */
    char method[8]; /* "GET" .. "DELETE" */
    char **segs;    /* literal segment, or "*" */
    size_t nsegs;   /* segments before a final "**" */
    bool tail;      /* pattern ended in "**" */
};

struct pl_grant_profile {
    char *name;
    char *base_url; /* scheme://host[:port][/prefix], no trailing slash */
    struct pl_route *routes;
    size_t nroutes;
    char **callers;
    size_t ncallers;
    char **scopes;
    size_t nscopes;
    bool allow_in_sessions;
    enum pl_cred_kind kind;
    char *header;        /* request header the credential goes in; default "Authorization" */
    char *prefix;        /* value prefix; default "Bearer " */
    char *token_env;     /* shared_token: the daemon env var holding the token */
    enum pl_jwt_alg alg; /* jwt */
    char *issuer, *audience, *key_id; /* key_id may be NULL */
    unsigned ttl_s;                   /* jwt */
    unsigned char *hmac_key;          /* HS256 (wiped on free) */
    size_t hmac_key_len;              /* HS256 */
    EVP_PKEY *pkey;                   /* RS256 / EdDSA private key */
    unsigned max_calls;               /* per run; default 64, 1..10000 */
    size_t max_request_bytes;         /* body bytes; default 1 MiB, max 64 MiB */
    size_t max_response_bytes;        /* default 4 MiB, max 64 MiB */
    unsigned call_timeout_ms;         /* default 10000, 100..600000 */
    char *ca_file; /* PEM CA bundle that verifies an https API; NULL: the system's */
};

/*
 * Parsed grants never change, so the const functions below (lookup, matching,
 * credentials) may run on many threads at once.
 */
struct pl_grants {
    struct pl_grant_profile *profiles; /* in file order */
    size_t n;
};

/*
 * Parse and validate a grants file's text (rules above).  env is asked for
 * shared_token "env" variables (presence and shape only; the value is read
 * again by pl_grant_credential) and for HS256 "key_env" (copied into the
 * profile).  Returns 0 and sets *ret_grants, or -1 with err (may be NULL)
 * holding INVALID_REQUEST (INTERNAL when out of memory) and one printable
 * line; a profile's error names the profile.
 */
int pl_grants_parse(const char *json, size_t len, pl_grants_env_fn env, void *userdata,
                    struct pl_grants **ret_grants, struct pl_error *err);

/*
 * Read a grants file (pl_file_read: a regular file of at most
 * PL_GRANTS_MAX_FILE bytes) and parse it.  Every message starts with
 * "PLIMSOLL_GRANTS_FILE: "; when the file cannot be read, err->errnum holds
 * the reason.  The key_file and ca_file a profile names are read the same
 * way.
 */
int pl_grants_load_file(const char *path, pl_grants_env_fn env, void *userdata,
                        struct pl_grants **ret_grants, struct pl_error *err);

/* Free grants (NULL-safe), wiping key material with OPENSSL_cleanse. */
void pl_grants_free(struct pl_grants *g);

/* The profile called name, or NULL (also when g or name is NULL). */
const struct pl_grant_profile *pl_grants_find(const struct pl_grants *g, const char *name);

/* Whether principal is listed in p's allowed_callers (byte-exact). */
bool pl_grant_caller_allowed(const struct pl_grant_profile *p, const char *principal);

/*
 * Whether path is a canonical request path (rules above).  The broker splits
 * the query off the request target first and refuses a request whose path
 * is not canonical.
 */
bool pl_grant_path_canonical(const char *path);

/*
 * Whether some route of p has exactly this (upper-case) method and a pattern
 * that matches path.  path is the request path without its query; a path that
 * is not canonical (one with '?' included) never matches.  Literal segments
 * compare byte-exact, "*" matches exactly one segment and a final "**" zero or
 * more remaining segments.
 */
bool pl_grant_route_allows(const struct pl_grant_profile *p, const char *method, const char *path);

/*
 * The credential header value for one run: for shared_token, prefix + the env
 * variable's current value; for jwt, prefix + a freshly minted JWT (see
 * jwt.h) whose "sub" is principal.  principal must be in allowed_callers.
 * *ret_value is malloc'd; the caller wipes it (OPENSSL_cleanse) and frees it.
 * now is the wall clock.  Returns 0, or -1 with err (may be NULL) holding
 * INTERNAL and a message that names the profile and never the credential.
 */
int pl_grant_credential(const struct pl_grant_profile *p, pl_grants_env_fn env, void *userdata,
                        const char *principal, time_t now, char **ret_value, struct pl_error *err);
