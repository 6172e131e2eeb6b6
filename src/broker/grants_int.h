/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grants_int.h: what the grants files share, and nothing outside them
 * includes (the public API is grants.h).
 *
 *   grants.c         the grants file: parse, validate, free and look up its
 *                    profiles; the messages and field readers below
 *   grants_routes.c  base_url, route patterns, the canonical-path rule and
 *                    route matching
 *   grants_cred.c    the credential: its fields and key files at parse time,
 *                    and its value for one run
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "grants.h"

#define KEY_FILE_PATH_MAX 4096u /* bytes in a key_file or ca_file path */

/*
 * What parsing one profile (or making its credential) needs: where messages
 * go (err may be NULL), with which reason, and the environment.  Every
 * pointer is borrowed for the parse.
 */
struct pctx {
    struct pl_error *err;
    enum pl_reason reason; /* INVALID_REQUEST while parsing, INTERNAL at run time */
    const char *name;      /* the profile's name as written */
    pl_grants_env_fn env;
    void *userdata;
};

/* ---- grants.c: messages ---- */

/* Every message is sanitized to one line of printable ASCII; the error
 * object may be NULL.  All three return -1. */

/* A message that names no profile. */
__attribute__((format(printf, 3, 4))) int gr_fail(struct pl_error *err, enum pl_reason reason,
                                                  const char *fmt, ...);
/* A message naming c's profile, with c's reason. */
__attribute__((format(printf, 2, 3))) int gr_perr(struct pctx *c, const char *fmt, ...);
/* Keep the errno behind a failure (rc, negative or not) in err (may be
 * NULL); the message is the caller's to set. */
int gr_keep_errno(struct pl_error *err, int rc);

/* ---- grants.c: field readers; each fails through gr_perr (-1), where
 * names the field's place in the message ("" at the top) ---- */

/* Refuse any key of obj not in allowed (NULL-terminated). */
int gr_check_fields(struct pctx *c, json_t *obj, const char *where, const char *const *allowed);
/* A string field of minlen..maxlen bytes, no NUL; *ret NULL when absent
 * and not required, else borrowed from obj (copy it to keep it). */
int gr_get_string(struct pctx *c, json_t *obj, const char *where, const char *key, bool required,
                  size_t minlen, size_t maxlen, const char **ret);
/* A non-negative integer field in min..max, def when absent. */
int gr_get_uint(struct pctx *c, json_t *obj, const char *where, const char *key,
                unsigned long long min, unsigned long long max, unsigned long long def,
                unsigned long long *ret);
/* Whether every byte of s is in lo..hi. */
bool gr_bytes_within(const char *s, unsigned char lo, unsigned char hi);

/* ---- grants_routes.c and grants_cred.c: each fills p's fields with
 * malloc'd copies, which pl_grants_free frees with the profile also after
 * a failure (through gr_perr) ---- */

/* The profile's base_url into p->base_url (one trailing '/' stripped). */
int gr_parse_base_url(struct pctx *c, json_t *prof, struct pl_grant_profile *p);
/* The profile's routes (1 to PL_GRANT_MAX_ROUTES) into p->routes and
 * p->nroutes. */
int gr_parse_routes(struct pctx *c, json_t *prof, struct pl_grant_profile *p);

/* The profile's credential: its kind, header and prefix, and its env
 * variable, HS256 key or key file, checked now. */
int gr_parse_credential(struct pctx *c, json_t *prof, struct pl_grant_profile *p);
