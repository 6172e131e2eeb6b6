/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grants.c: parse and validate a grants file, look its profiles up, and
 * free them.
 *
 * Parsing is one pass over the jansson tree per profile, in file order; the
 * first rule broken ends the parse with a message that names the profile and
 * the field.  Every message is sanitized to one line of printable ASCII, and
 * no message is ever built from a credential's value: only from variable
 * names, paths and the file's own text.  The messages and the field readers
 * live here and serve the other grants files too (grants_int.h): base_url
 * and routes are read by grants_routes.c, the credential by grants_cred.c.
 */
#include "grants.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../core/fileread.h"
#include "grants_int.h"

#define DEFAULT_MAX_CALLS 64u
#define DEFAULT_REQUEST_BYTES (1u << 20)
#define DEFAULT_RESPONSE_BYTES (4u << 20)
#define DEFAULT_TIMEOUT_MS 10000u

/* ---- messages ----------------------------------------------------------- */

/* Make a message one line of printable ASCII, whatever bytes went into it. */
static void sanitize(struct pl_error *err) {
    if (!err)
        return;
    for (char *s = err->message; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch >= 0x7f)
            *s = '?';
    }
}

__attribute__((format(printf, 3, 0))) static int vfail(struct pl_error *err, enum pl_reason reason,
                                                       const char *fmt, va_list ap) {
    if (!err)
        return -1;
    char msg[sizeof(err->message)];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    pl_error_set(err, reason, "%s", msg);
    sanitize(err);
    return -1;
}

/* A message that names no profile.  Always returns -1. */
int gr_fail(struct pl_error *err, enum pl_reason reason, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(err, reason, fmt, ap);
    va_end(ap);
    return -1;
}

/* A message naming the profile.  Always returns -1. */
int gr_perr(struct pctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(c->err, c->reason, fmt, ap);
    va_end(ap);
    pl_error_wrap(c->err, "grant profile \"%.64s\": ", c->name);
    sanitize(c->err);
    return -1;
}

/* Keep the errno behind a failure in err (the message says it in words). */
int gr_keep_errno(struct pl_error *err, int rc) {
    if (err)
        err->errnum = rc < 0 ? -rc : rc;
    return -1;
}

/* ---- field helpers ------------------------------------------------------ */

/* Refuse any key of obj not in allowed (NULL-terminated). */
int gr_check_fields(struct pctx *c, json_t *obj, const char *where, const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool known = false;
        for (const char *const *a = allowed; *a && !known; a++)
            known = strcmp(*a, key) == 0;
        if (!known)
            return gr_perr(c, "%sunknown field \"%.64s\"", where, key);
    }
    return 0;
}

/*
 * A string field: NULL in *ret when absent and not required.  Length is in
 * bytes; an embedded NUL is refused.
 */
int gr_get_string(struct pctx *c, json_t *obj, const char *where, const char *key, bool required,
                  size_t minlen, size_t maxlen, const char **ret) {
    json_t *v = json_object_get(obj, key);
    *ret = NULL;
    if (!v) {
        if (required)
            return gr_perr(c, "%s%s is required", where, key);
        return 0;
    }
    if (!json_is_string(v))
        return gr_perr(c, "%s%s must be a string", where, key);
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (strlen(s) != n)
        return gr_perr(c, "%s%s holds a NUL byte", where, key);
    if (n < minlen || n > maxlen)
        return gr_perr(c, "%s%s must be %zu..%zu bytes", where, key, minlen, maxlen);
    *ret = s;
    return 0;
}

int gr_get_uint(struct pctx *c, json_t *obj, const char *where, const char *key,
                unsigned long long min, unsigned long long max, unsigned long long def,
                unsigned long long *ret) {
    json_t *v = json_object_get(obj, key);
    if (!v) {
        *ret = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (unsigned long long)json_integer_value(v) < min ||
        (unsigned long long)json_integer_value(v) > max)
        return gr_perr(c, "%s%s must be an integer in %llu..%llu", where, key, min, max);
    *ret = (unsigned long long)json_integer_value(v);
    return 0;
}

static int cmp_strp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The first string listed twice in v[0..n), or NULL. */
static const char *find_duplicate(char **v, size_t n) {
    if (n < 2)
        return NULL;
    char **sorted = malloc(n * sizeof(*sorted));
    if (!sorted)
        return NULL;
    memcpy(sorted, v, n * sizeof(*sorted));
    qsort(sorted, n, sizeof(*sorted), cmp_strp);
    const char *dup = NULL;
    for (size_t i = 1; i < n && !dup; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            dup = sorted[i];
    free(sorted);
    return dup;
}

static bool valid_profile_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > PL_GRANT_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

/* Whether every byte of s is in lo..hi. */
bool gr_bytes_within(const char *s, unsigned char lo, unsigned char hi) {
    for (; *s; s++)
        if ((unsigned char)*s < lo || (unsigned char)*s > hi)
            return false;
    return true;
}

/* ---- callers and scopes ------------------------------------------------- */

static int parse_string_list(struct pctx *c, json_t *prof, const char *key, bool required,
                             size_t maxn, bool scopes, char ***ret_v, size_t *ret_n) {
    json_t *v = json_object_get(prof, key);
    if (!v) {
        if (required)
            return gr_perr(c, "%s is required", key);
        return 0;
    }
    if (!json_is_array(v))
        return gr_perr(c, "%s: must be an array of strings", key);
    size_t n = json_array_size(v);
    if (n == 0 && required)
        return gr_perr(c, "%s: must list at least one", key);
    if (n > maxn)
        return gr_perr(c, "%s: more than %zu entries", key, maxn);
    if (n == 0)
        return 0;
    char **out = calloc(n, sizeof(*out));
    if (!out)
        return gr_perr(c, "out of memory");
    *ret_v = out;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e))
            return gr_perr(c, "%s[%zu]: must be a string", key, i);
        const char *s = json_string_value(e);
        size_t len = json_string_length(e);
        if (strlen(s) != len || len == 0 || len > PL_GRANT_STRING_MAX)
            return gr_perr(c, "%s[%zu]: must be 1..%u bytes", key, i, PL_GRANT_STRING_MAX);
        if (scopes) {
            if (!gr_bytes_within(s, 0x21, 0x7e))
                return gr_perr(c, "%s[%zu] \"%.128s\": must be printable ASCII without spaces", key,
                               i, s);
            if (strcmp(s, "code:run") == 0 || strcmp(s, "*") == 0)
                return gr_perr(c, "%s[%zu] \"%s\": this scope may not be granted to sandboxed code",
                               key, i, s);
        } else {
            for (const char *q = s; *q; q++) {
                unsigned char ch = (unsigned char)*q;
                if (ch <= 0x20 || ch == 0x7f)
                    return gr_perr(c,
                                   "%s[%zu] \"%.128s\": a principal has no whitespace or control "
                                   "bytes",
                                   key, i, s);
            }
        }
        out[i] = strdup(s);
        if (!out[i])
            return gr_perr(c, "out of memory");
        *ret_n = i + 1;
    }
    const char *dup = find_duplicate(out, n);
    if (dup)
        return gr_perr(c, "%s: \"%.128s\" is listed twice", key, dup);
    return 0;
}

/* ---- limits ------------------------------------------------------------- */

static int parse_limits(struct pctx *c, json_t *prof, struct pl_grant_profile *p) {
    static const char *const fields[] = {"max_calls", "max_request_bytes", "max_response_bytes",
                                         "call_timeout_ms", NULL};
    json_t *lim = json_object_get(prof, "limits");
    json_t *empty = NULL;
    if (!lim) {
        lim = empty = json_object();
        if (!lim)
            return gr_perr(c, "out of memory");
    } else if (!json_is_object(lim)) {
        return gr_perr(c, "limits: must be an object");
    }
    unsigned long long calls, req, resp, tmo;
    int r = gr_check_fields(c, lim, "limits: ", fields);
    if (r == 0)
        r = gr_get_uint(c, lim, "limits: ", "max_calls", 1, PL_GRANT_MAX_CALLS_MAX,
                        DEFAULT_MAX_CALLS, &calls);
    if (r == 0)
        r = gr_get_uint(c, lim, "limits: ", "max_request_bytes", 0, PL_GRANT_BODY_MAX,
                        DEFAULT_REQUEST_BYTES, &req);
    if (r == 0)
        r = gr_get_uint(c, lim, "limits: ", "max_response_bytes", 0, PL_GRANT_BODY_MAX,
                        DEFAULT_RESPONSE_BYTES, &resp);
    if (r == 0)
        r = gr_get_uint(c, lim, "limits: ", "call_timeout_ms", PL_GRANT_TIMEOUT_MIN_MS,
                        PL_GRANT_TIMEOUT_MAX_MS, DEFAULT_TIMEOUT_MS, &tmo);
    json_decref(empty);
    if (r < 0)
        return r;
    p->max_calls = (unsigned)calls;
    p->max_request_bytes = (size_t)req;
    p->max_response_bytes = (size_t)resp;
    p->call_timeout_ms = (unsigned)tmo;
    return 0;
}

/* ---- ca_file -------------------------------------------------------------- */

/* Optional: the CA bundle (PEM) that verifies the API's certificate, for an
 * API behind a private CA.  Read once here so a missing or unreadable file
 * is a startup error, not a failure of every call. */
static int parse_ca_file(struct pctx *c, json_t *prof, struct pl_grant_profile *p) {
    const char *path;
    if (gr_get_string(c, prof, "", "ca_file", false, 1, KEY_FILE_PATH_MAX, &path) < 0)
        return -1;
    if (!path)
        return 0;
    if (strncmp(p->base_url, "https://", 8) != 0)
        return gr_perr(c, "ca_file: only an https:// base_url uses one");
    if (path[0] != '/')
        return gr_perr(c, "ca_file: %.256s must be an absolute path", path);
    char *pem = NULL;
    size_t len = 0;
    int r = pl_file_read(path, PL_GRANT_CA_FILE_MAX, &pem, &len);
    if (r < 0) {
        gr_perr(c, "ca_file: %.256s %s", path, pl_file_problem(r));
        return gr_keep_errno(c->err, r);
    }
    bool looks_pem = strstr(pem, "-----BEGIN CERTIFICATE-----") != NULL;
    pl_file_free(pem, len);
    if (!looks_pem)
        return gr_perr(c, "ca_file: %.256s holds no PEM certificate", path);
    p->ca_file = strdup(path);
    return p->ca_file ? 0 : gr_perr(c, "out of memory");
}

/* ---- profiles and the file ---------------------------------------------- */

static int parse_profile(struct pctx *c, json_t *prof, struct pl_grant_profile *p) {
    static const char *const fields[] = {
        "base_url",   "routes", "allowed_callers", "scopes", "allow_in_sessions",
        "credential", "limits", "ca_file",         NULL};
    if (!valid_profile_name(c->name))
        return gr_perr(c, "the name must be 1..%u characters of [A-Za-z0-9._-]", PL_GRANT_NAME_MAX);
    p->name = strdup(c->name);
    if (!p->name)
        return gr_perr(c, "out of memory");
    if (!json_is_object(prof))
        return gr_perr(c, "must be an object");
    if (gr_check_fields(c, prof, "", fields) < 0 || gr_parse_base_url(c, prof, p) < 0 ||
        gr_parse_routes(c, prof, p) < 0 ||
        parse_string_list(c, prof, "allowed_callers", true, PL_GRANT_MAX_CALLERS, false,
                          &p->callers, &p->ncallers) < 0 ||
        parse_string_list(c, prof, "scopes", false, PL_GRANT_MAX_SCOPES, true, &p->scopes,
                          &p->nscopes) < 0)
        return -1;
    json_t *sess = json_object_get(prof, "allow_in_sessions");
    if (sess && !json_is_boolean(sess))
        return gr_perr(c, "allow_in_sessions: must be true or false");
    p->allow_in_sessions = sess && json_is_true(sess);
    if (gr_parse_credential(c, prof, p) < 0 || parse_limits(c, prof, p) < 0 ||
        parse_ca_file(c, prof, p) < 0)
        return -1;
    return 0;
}

PL_DEFINE_FREEP(struct pl_grants, pl_grants_free)

int pl_grants_parse(const char *json, size_t len, pl_grants_env_fn env, void *userdata,
                    struct pl_grants **ret_grants, struct pl_error *err) {
    const enum pl_reason bad = PL_REASON_INVALID_REQUEST;
    if (!json)
        return gr_fail(err, bad, "grants: no text");
    if (len > PL_GRANTS_MAX_FILE)
        return gr_fail(err, bad, "grants: larger than %u bytes", PL_GRANTS_MAX_FILE);
    json_error_t jerr;
    PL_AUTO_JSON json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return gr_fail(err, bad, "grants: line %d column %d: %.200s", jerr.line, jerr.column,
                       jerr.text);
    if (!json_is_object(root))
        return gr_fail(err, bad, "grants: the top level must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "profiles") != 0)
            return gr_fail(err, bad,
                           "grants: unknown top-level field \"%.64s\" (only \"profiles\")", key);
    }
    json_t *profiles = json_object_get(root, "profiles");
    if (!profiles || !json_is_object(profiles))
        return gr_fail(err, bad, "grants: \"profiles\" must be an object");
    size_t n = json_object_size(profiles);
    if (n == 0 || n > PL_GRANTS_MAX_PROFILES)
        return gr_fail(err, bad, "grants: profiles: %zu profiles; 1..%u allowed", n,
                       PL_GRANTS_MAX_PROFILES);
    PL_CLEANUP(pl_grants_freep) struct pl_grants *g = calloc(1, sizeof(*g));
    if (!g || !(g->profiles = calloc(n, sizeof(*g->profiles))))
        return gr_fail(err, PL_REASON_INTERNAL, "grants: out of memory");
    json_object_foreach(profiles, key, v) {
        struct pctx c = {err, bad, key, env, userdata};
        struct pl_grant_profile *p = &g->profiles[g->n++];
        if (parse_profile(&c, v, p) < 0)
            return -1;
    }
    *ret_grants = PL_TAKE_PTR(g);
    return 0;
}

int pl_grants_load_file(const char *path, pl_grants_env_fn env, void *userdata,
                        struct pl_grants **ret_grants, struct pl_error *err) {
    const enum pl_reason bad = PL_REASON_INVALID_REQUEST;
    if (!path || !*path)
        return gr_fail(err, bad, "PLIMSOLL_GRANTS_FILE: no path");
    char *buf = NULL;
    size_t len = 0;
    int r = pl_file_read(path, PL_GRANTS_MAX_FILE, &buf, &len);
    if (r < 0) {
        if (r == -EFBIG)
            gr_fail(err, bad, "PLIMSOLL_GRANTS_FILE: %.1024s is larger than %u bytes", path,
                    PL_GRANTS_MAX_FILE);
        else
            gr_fail(err, bad, "PLIMSOLL_GRANTS_FILE: %.1024s %s", path, pl_file_problem(r));
        return gr_keep_errno(err, r);
    }
    r = pl_grants_parse(buf, len, env, userdata, ret_grants, err);
    pl_file_free(buf, len);
    if (r < 0)
        return pl_error_wrap(err, "PLIMSOLL_GRANTS_FILE: ");
    return 0;
}

static void free_strv(char **v, size_t n) {
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void pl_grants_free(struct pl_grants *g) {
    if (!g)
        return;
    for (size_t i = 0; g->profiles && i < g->n; i++) {
        struct pl_grant_profile *p = &g->profiles[i];
        free(p->name);
        free(p->base_url);
        free(p->ca_file);
        for (size_t r = 0; p->routes && r < p->nroutes; r++) {
            free(p->routes[r].text);
            free_strv(p->routes[r].segs, p->routes[r].nsegs);
        }
        free(p->routes);
        free_strv(p->callers, p->ncallers);
        free_strv(p->scopes, p->nscopes);
        free(p->header);
        free(p->prefix);
        free(p->token_env);
        free(p->issuer);
        free(p->audience);
        free(p->key_id);
        if (p->hmac_key)
            OPENSSL_cleanse(p->hmac_key, p->hmac_key_len);
        free(p->hmac_key);
        EVP_PKEY_free(p->pkey);
    }
    free(g->profiles);
    free(g);
}

const struct pl_grant_profile *pl_grants_find(const struct pl_grants *g, const char *name) {
    if (!g || !name)
        return NULL;
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->profiles[i].name, name) == 0)
            return &g->profiles[i];
    return NULL;
}

bool pl_grant_caller_allowed(const struct pl_grant_profile *p, const char *principal) {
    if (!p || !principal)
        return false;
    for (size_t i = 0; i < p->ncallers; i++)
        if (strcmp(p->callers[i], principal) == 0)
            return true;
    return false;
}
