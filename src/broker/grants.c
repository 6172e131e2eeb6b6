/*
 * grants.c: parse and validate grant profiles, match request paths against
 * their routes, and make the credential a run's calls carry.
 *
 * Parsing is one pass over the jansson tree per profile, in file order; the
 * first rule broken ends the parse with a message that names the profile and
 * the field.  Every message is sanitized to one line of printable ASCII, and
 * no message is ever built from a credential's value: only from variable
 * names, paths and the file's own text.
 */
#include "grants.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/canon.h"
#include "../core/fileread.h"
#include "jwt.h"

#define DEFAULT_HEADER "Authorization"
#define DEFAULT_PREFIX "Bearer "
#define DEFAULT_TTL_S 300u
#define DEFAULT_MAX_CALLS 64u
#define DEFAULT_REQUEST_BYTES (1u << 20)
#define DEFAULT_RESPONSE_BYTES (4u << 20)
#define DEFAULT_TIMEOUT_MS 10000u
#define HEADER_NAME_MAX 64u
#define PREFIX_MAX 256u
#define ENV_NAME_MAX 128u
#define JWT_STRING_MAX 1024u /* issuer, audience */
#define KEY_ID_MAX 256u
#define KEY_FILE_PATH_MAX 4096u

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
__attribute__((format(printf, 3, 4))) static int fail(struct pl_error *err, enum pl_reason reason,
                                                      const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(err, reason, fmt, ap);
    va_end(ap);
    return -1;
}

/*
 * What parsing one profile (or making its credential) needs: where messages
 * go, with which reason, and the environment.
 */
struct pctx {
    struct pl_error *err;
    enum pl_reason reason; /* INVALID_REQUEST while parsing, INTERNAL at run time */
    const char *name;      /* the profile's name as written */
    pl_grants_env_fn env;
    void *userdata;
};

/* A message naming the profile.  Always returns -1. */
__attribute__((format(printf, 2, 3))) static int perr(struct pctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(c->err, c->reason, fmt, ap);
    va_end(ap);
    pl_error_wrap(c->err, "grant profile \"%.64s\": ", c->name);
    sanitize(c->err);
    return -1;
}

static const char *env_get(pl_grants_env_fn env, void *userdata, const char *name) {
    if (!env)
        return NULL;
    const char *v = env(name, userdata);
    return (v && *v) ? v : NULL;
}

/* Keep the errno behind a failure in err (the message says it in words). */
static int keep_errno(struct pl_error *err, int rc) {
    if (err)
        err->errnum = rc < 0 ? -rc : rc;
    return -1;
}

/* ---- paths -------------------------------------------------------------- */

/* RFC 3986 pchar, less '%' (escapes are checked apart). */
static bool is_pchar(unsigned char ch) {
    if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))
        return true;
    return ch != '\0' && strchr("-._~!$&'()*+,;=:@", ch) != NULL;
}

/* Whether a decoded escape is one a server may read as path structure. */
static bool refused_escape(unsigned v) {
    return v < 0x20 || v == 0x7f || v == '/' || v == '\\' || v == '.' || v == '%';
}

/*
 * Why one path segment (n bytes, no '/') is not canonical, or NULL when it
 * is.  Shared by request paths, route patterns and the base_url prefix.
 */
static const char *segment_problem(const char *s, size_t n) {
    if (n == 0)
        return "empty segment";
    /* The bytes as a server that decodes escapes would see them. */
    unsigned char dec[PL_GRANT_PATH_MAX];
    size_t dn = 0;
    dec[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '%') {
            if (n - i < 3)
                return "\"%\" must start a %XX escape";
            int h = pl_hex_digit(s[i + 1]), l = pl_hex_digit(s[i + 2]);
            if (h < 0 || l < 0)
                return "\"%\" must start a %XX escape";
            if (refused_escape((unsigned)(h << 4 | l)))
                return "escape decodes to '/', '\\', '.', '%' or a control byte";
            dec[dn++] = (unsigned char)(h << 4 | l);
            i += 2;
            continue;
        }
        if (!is_pchar(ch))
            return "byte outside RFC 3986 pchar";
        dec[dn++] = ch;
    }
    /* Escapes of bytes past 0x7f must be UTF-8 in its shortest form: an
     * overlong "%C0%AE" is '.' to a lenient decoder. */
    if (!pl_utf8_valid(dec, dn))
        return "escapes are not valid UTF-8 (overlong, truncated or invalid)";
    /* The name before a path parameter (';', also escaped as %3B), which
     * some servers strip: "." and "..", and a name ending in dots or
     * spaces, which some servers and file systems strip too ("admin." is
     * "admin" there). */
    size_t name = 0;
    while (name < dn && dec[name] != ';')
        name++;
    size_t dots = 0;
    while (dots < name && dec[dots] == '.')
        dots++;
    if (dots > 0 && dots <= 2 && dots == name)
        return "\".\" or \"..\" segment";
    if (name > 0 && (dec[name - 1] == '.' || dec[name - 1] == ' '))
        return "segment ends with a dot or a space";
    return NULL;
}

/*
 * Split a path into segments.  Returns the count, or -1 when the path is not
 * canonical; *ret_problem then says why.  "/" has zero segments.
 */
static int split_path(const char *path, size_t len, const char **segs, size_t *lens,
                      const char **ret_problem) {
    *ret_problem = "must start with '/'";
    if (len == 0 || path[0] != '/')
        return -1;
    *ret_problem = "longer than 4096 bytes";
    if (len > PL_GRANT_PATH_MAX)
        return -1;
    if (len == 1)
        return 0;
    size_t n = 0;
    size_t pos = 1;
    for (;;) {
        const char *slash = memchr(path + pos, '/', len - pos);
        size_t end = slash ? (size_t)(slash - path) : len;
        if (n == PL_GRANT_PATH_MAX_SEGS) {
            *ret_problem = "more than 64 segments";
            return -1;
        }
        segs[n] = path + pos;
        lens[n] = end - pos;
        n++;
        if (!slash)
            break;
        pos = end + 1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *p = segment_problem(segs[i], lens[i]);
        if (p) {
            *ret_problem = p;
            return -1;
        }
    }
    return (int)n;
}

bool pl_grant_path_canonical(const char *path) {
    if (!path)
        return false;
    const char *segs[PL_GRANT_PATH_MAX_SEGS];
    size_t lens[PL_GRANT_PATH_MAX_SEGS];
    const char *problem;
    size_t len = strnlen(path, PL_GRANT_PATH_MAX + 1);
    return split_path(path, len, segs, lens, &problem) >= 0;
}

bool pl_grant_route_allows(const struct pl_grant_profile *p, const char *method, const char *path) {
    if (!p || !method || !path)
        return false;
    const char *segs[PL_GRANT_PATH_MAX_SEGS];
    size_t lens[PL_GRANT_PATH_MAX_SEGS];
    const char *problem;
    size_t len = strnlen(path, PL_GRANT_PATH_MAX + 1);
    int ns = split_path(path, len, segs, lens, &problem);
    if (ns < 0)
        return false;
    size_t n = (size_t)ns;
    for (size_t r = 0; r < p->nroutes; r++) {
        const struct pl_route *rt = &p->routes[r];
        if (strcmp(rt->method, method) != 0)
            continue;
        if (rt->tail ? n < rt->nsegs : n != rt->nsegs)
            continue;
        bool ok = true;
        for (size_t i = 0; i < rt->nsegs && ok; i++) {
            const char *want = rt->segs[i];
            if (strcmp(want, "*") == 0)
                continue;
            ok = strlen(want) == lens[i] && memcmp(want, segs[i], lens[i]) == 0;
        }
        if (ok)
            return true;
    }
    return false;
}

/* ---- field helpers ------------------------------------------------------ */

/* Refuse any key of obj not in allowed (NULL-terminated). */
static int check_fields(struct pctx *c, json_t *obj, const char *where,
                        const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool known = false;
        for (const char *const *a = allowed; *a && !known; a++)
            known = strcmp(*a, key) == 0;
        if (!known)
            return perr(c, "%sunknown field \"%.64s\"", where, key);
    }
    return 0;
}

/*
 * A string field: NULL in *ret when absent and not required.  Length is in
 * bytes; an embedded NUL is refused.
 */
static int get_string(struct pctx *c, json_t *obj, const char *where, const char *key,
                      bool required, size_t minlen, size_t maxlen, const char **ret) {
    json_t *v = json_object_get(obj, key);
    *ret = NULL;
    if (!v) {
        if (required)
            return perr(c, "%s%s is required", where, key);
        return 0;
    }
    if (!json_is_string(v))
        return perr(c, "%s%s must be a string", where, key);
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (strlen(s) != n)
        return perr(c, "%s%s holds a NUL byte", where, key);
    if (n < minlen || n > maxlen)
        return perr(c, "%s%s must be %zu..%zu bytes", where, key, minlen, maxlen);
    *ret = s;
    return 0;
}

static int get_uint(struct pctx *c, json_t *obj, const char *where, const char *key,
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
        return perr(c, "%s%s must be an integer in %llu..%llu", where, key, min, max);
    *ret = (unsigned long long)json_integer_value(v);
    return 0;
}

static char *dup_or_null(const char *s) {
    return s ? strdup(s) : NULL;
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

/* Whether every byte of s is in lo..hi. */
static bool bytes_within(const char *s, unsigned char lo, unsigned char hi) {
    for (; *s; s++)
        if ((unsigned char)*s < lo || (unsigned char)*s > hi)
            return false;
    return true;
}

/* ---- base_url ----------------------------------------------------------- */

static int parse_base_url(struct pctx *c, json_t *prof, struct pl_grant_profile *p) {
    const char *url;
    if (get_string(c, prof, "", "base_url", true, 1, PL_GRANT_BASE_URL_MAX, &url) < 0)
        return -1;
    size_t skip;
    if (strncmp(url, "http://", 7) == 0)
        skip = 7;
    else if (strncmp(url, "https://", 8) == 0)
        skip = 8;
    else
        return perr(c, "base_url: must start with http:// or https://");
    if (strpbrk(url, "?#"))
        return perr(c, "base_url: must not have a query or fragment");
    const char *auth = url + skip;
    size_t alen = strcspn(auth, "/");
    if (memchr(auth, '@', alen))
        return perr(c, "base_url: must not have userinfo");
    if (alen == 0)
        return perr(c, "base_url: must name a host");
    size_t hlen;
    if (auth[0] == '[') {
        const char *close = memchr(auth, ']', alen);
        if (!close || close - auth < 3)
            return perr(c, "base_url: bad IPv6 literal");
        for (const char *q = auth + 1; q < close; q++)
            if (pl_hex_digit(*q) < 0 && *q != ':' && *q != '.')
                return perr(c, "base_url: bad IPv6 literal");
        hlen = (size_t)(close - auth) + 1;
    } else {
        hlen = strcspn(auth, ":/");
        if (hlen == 0)
            return perr(c, "base_url: must name a host");
        for (size_t i = 0; i < hlen; i++) {
            unsigned char ch = (unsigned char)auth[i];
            if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_' || ch == '~'))
                return perr(c, "base_url: the host has a byte outside [A-Za-z0-9._~-]");
        }
    }
    if (hlen < alen) {
        if (auth[hlen] != ':')
            return perr(c, "base_url: unexpected byte after the host");
        size_t plen = alen - hlen - 1;
        if (plen == 0 || plen > 5)
            return perr(c, "base_url: the port must be 1..65535");
        unsigned port = 0;
        for (size_t i = hlen + 1; i < alen; i++) {
            if (auth[i] < '0' || auth[i] > '9')
                return perr(c, "base_url: the port must be 1..65535");
            port = port * 10 + (unsigned)(auth[i] - '0');
        }
        if (port == 0 || port > 65535)
            return perr(c, "base_url: the port must be 1..65535");
    }
    const char *path = auth + alen;
    size_t plen = strlen(path);
    if (plen > 0 && path[plen - 1] == '/')
        plen--; /* one trailing '/' is stripped */
    if (plen == 1)
        return perr(c, "base_url: path prefix: empty segment"); /* it was "//" */
    if (plen > 0) {
        const char *segs[PL_GRANT_PATH_MAX_SEGS];
        size_t lens[PL_GRANT_PATH_MAX_SEGS];
        const char *problem;
        if (split_path(path, plen, segs, lens, &problem) < 0)
            return perr(c, "base_url: path prefix: %s", problem);
    }
    size_t keep = (size_t)(path - url) + plen;
    p->base_url = strndup(url, keep);
    if (!p->base_url)
        return perr(c, "out of memory");
    return 0;
}

/* ---- routes ------------------------------------------------------------- */

static const char *const METHODS[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", NULL};

static int parse_route(struct pctx *c, size_t idx, const char *text, struct pl_route *r) {
    r->text = strdup(text);
    if (!r->text)
        return perr(c, "out of memory");
    const char *sp = strchr(text, ' ');
    size_t mlen = sp ? (size_t)(sp - text) : strlen(text);
    bool known = false;
    for (const char *const *m = METHODS; *m && !known; m++)
        known = strlen(*m) == mlen && memcmp(*m, text, mlen) == 0;
    if (!known || !sp)
        return perr(c,
                    "routes[%zu] \"%.128s\": the method must be one of GET HEAD POST PUT PATCH "
                    "DELETE, then one space and the path",
                    idx, text);
    memcpy(r->method, text, mlen);
    r->method[mlen] = '\0';
    const char *pat = sp + 1;
    size_t len = strlen(pat);
    if (len == 0 || pat[0] != '/')
        return perr(c, "routes[%zu] \"%.128s\": the pattern must start with '/'", idx, text);
    if (len > PL_GRANT_PATH_MAX)
        return perr(c, "routes[%zu] \"%.128s\": the pattern is longer than %u bytes", idx, text,
                    PL_GRANT_PATH_MAX);
    if (len == 1)
        return 0; /* "/" */
    r->segs = calloc(PL_GRANT_PATH_MAX_SEGS, sizeof(*r->segs));
    if (!r->segs)
        return perr(c, "out of memory");
    size_t pos = 1;
    for (;;) {
        const char *slash = memchr(pat + pos, '/', len - pos);
        size_t end = slash ? (size_t)(slash - pat) : len;
        const char *seg = pat + pos;
        size_t slen = end - pos;
        if (r->tail)
            return perr(c, "routes[%zu] \"%.128s\": \"**\" may only be the last segment", idx,
                        text);
        if (slen == 2 && seg[0] == '*' && seg[1] == '*') {
            r->tail = true;
        } else {
            if (r->nsegs == PL_GRANT_PATH_MAX_SEGS)
                return perr(c, "routes[%zu] \"%.128s\": more than %u segments", idx, text,
                            PL_GRANT_PATH_MAX_SEGS);
            if (memchr(seg, '*', slen) && slen != 1)
                return perr(c, "routes[%zu] \"%.128s\": a wildcard must be a whole segment", idx,
                            text);
            if (!(slen == 1 && seg[0] == '*')) {
                const char *problem = segment_problem(seg, slen);
                if (problem)
                    return perr(c, "routes[%zu] \"%.128s\": %s", idx, text, problem);
            }
            r->segs[r->nsegs] = strndup(seg, slen);
            if (!r->segs[r->nsegs])
                return perr(c, "out of memory");
            r->nsegs++;
        }
        if (!slash)
            break;
        pos = end + 1;
    }
    return 0;
}

static int parse_routes(struct pctx *c, json_t *prof, struct pl_grant_profile *p) {
    json_t *v = json_object_get(prof, "routes");
    if (!v)
        return perr(c, "routes is required");
    if (!json_is_array(v))
        return perr(c, "routes: must be an array of strings");
    size_t n = json_array_size(v);
    if (n == 0)
        return perr(c, "routes: empty route list reaches nothing");
    if (n > PL_GRANT_MAX_ROUTES)
        return perr(c, "routes: more than %u routes", PL_GRANT_MAX_ROUTES);
    p->routes = calloc(n, sizeof(*p->routes));
    if (!p->routes)
        return perr(c, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e))
            return perr(c, "routes[%zu]: must be a string", i);
        p->nroutes = i + 1;
        if (parse_route(c, i, json_string_value(e), &p->routes[i]) < 0)
            return -1;
    }
    return 0;
}

/* ---- callers and scopes ------------------------------------------------- */

static int parse_string_list(struct pctx *c, json_t *prof, const char *key, bool required,
                             size_t maxn, bool scopes, char ***ret_v, size_t *ret_n) {
    json_t *v = json_object_get(prof, key);
    if (!v) {
        if (required)
            return perr(c, "%s is required", key);
        return 0;
    }
    if (!json_is_array(v))
        return perr(c, "%s: must be an array of strings", key);
    size_t n = json_array_size(v);
    if (n == 0 && required)
        return perr(c, "%s: must list at least one", key);
    if (n > maxn)
        return perr(c, "%s: more than %zu entries", key, maxn);
    if (n == 0)
        return 0;
    char **out = calloc(n, sizeof(*out));
    if (!out)
        return perr(c, "out of memory");
    *ret_v = out;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e))
            return perr(c, "%s[%zu]: must be a string", key, i);
        const char *s = json_string_value(e);
        size_t len = json_string_length(e);
        if (strlen(s) != len || len == 0 || len > PL_GRANT_STRING_MAX)
            return perr(c, "%s[%zu]: must be 1..%u bytes", key, i, PL_GRANT_STRING_MAX);
        if (scopes) {
            if (!bytes_within(s, 0x21, 0x7e))
                return perr(c, "%s[%zu] \"%.128s\": must be printable ASCII without spaces", key, i,
                            s);
            if (strcmp(s, "code:run") == 0 || strcmp(s, "*") == 0)
                return perr(c, "%s[%zu] \"%s\": this scope may not be granted to sandboxed code",
                            key, i, s);
        } else {
            for (const char *q = s; *q; q++) {
                unsigned char ch = (unsigned char)*q;
                if (ch <= 0x20 || ch == 0x7f)
                    return perr(c,
                                "%s[%zu] \"%.128s\": a principal has no whitespace or control "
                                "bytes",
                                key, i, s);
            }
        }
        out[i] = strdup(s);
        if (!out[i])
            return perr(c, "out of memory");
        *ret_n = i + 1;
    }
    const char *dup = find_duplicate(out, n);
    if (dup)
        return perr(c, "%s: \"%.128s\" is listed twice", key, dup);
    return 0;
}

/* ---- credential --------------------------------------------------------- */

static const char *const HOP_HEADERS[] = {
    "Host", "Content-Length", "Transfer-Encoding", "Connection",       "Upgrade",
    "TE",   "Trailer",        "Keep-Alive",        "Proxy-Connection", NULL,
};

static int parse_header_and_prefix(struct pctx *c, json_t *cred, struct pl_grant_profile *p) {
    const char *h, *pre;
    if (get_string(c, cred, "credential: ", "header", false, 1, HEADER_NAME_MAX, &h) < 0)
        return -1;
    if (h) {
        for (const char *q = h; *q; q++)
            if (!is_tchar((unsigned char)*q))
                return perr(c, "credential: header \"%.64s\" is not a valid header name", h);
        for (const char *const *x = HOP_HEADERS; *x; x++)
            if (strcasecmp(*x, h) == 0)
                return perr(c, "credential: header \"%s\" may not carry the credential", h);
    }
    if (get_string(c, cred, "credential: ", "prefix", false, 0, PREFIX_MAX, &pre) < 0)
        return -1;
    if (pre && !bytes_within(pre, 0x20, 0x7e))
        return perr(c, "credential: prefix must be printable ASCII");
    p->header = strdup(h ? h : DEFAULT_HEADER);
    p->prefix = strdup(pre ? pre : DEFAULT_PREFIX);
    if (!p->header || !p->prefix)
        return perr(c, "out of memory");
    return 0;
}

/* Why a shared token's value cannot be sent, or NULL.  Never quotes it. */
static const char *token_problem(const char *v) {
    if (!v)
        return "is unset or empty";
    if (strnlen(v, PL_GRANT_TOKEN_MAX + 1) > PL_GRANT_TOKEN_MAX)
        return "holds more than 8192 bytes";
    if (!bytes_within(v, 0x21, 0x7e))
        return "holds a space, control or non-ASCII byte";
    return NULL;
}

static int parse_shared_token(struct pctx *c, json_t *cred, struct pl_grant_profile *p) {
    static const char *const fields[] = {"kind", "env", "header", "prefix", NULL};
    if (check_fields(c, cred, "credential: ", fields) < 0)
        return -1;
    const char *name;
    if (get_string(c, cred, "credential: ", "env", true, 1, ENV_NAME_MAX, &name) < 0)
        return -1;
    if (!valid_env_name(name))
        return perr(c, "credential: env \"%.128s\" is not a variable name", name);
    const char *problem = token_problem(env_get(c->env, c->userdata, name));
    if (problem)
        return perr(c, "credential: environment variable %s %s", name, problem);
    p->kind = PL_CRED_SHARED_TOKEN;
    p->token_env = strdup(name);
    if (!p->token_env)
        return perr(c, "out of memory");
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
            perr(c, "credential: key_file %s is larger than %u bytes", path, PL_GRANT_KEY_FILE_MAX);
        else
            perr(c, "credential: key_file %s %s", path, pl_file_problem(r));
        return keep_errno(c->err, r);
    }
    BIO *bio = BIO_new_mem_buf(buf, (int)len);
    EVP_PKEY *pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
    BIO_free(bio);
    pl_file_free(buf, len);
    ERR_clear_error();
    if (!pkey)
        return perr(c, "credential: key_file %s holds no unencrypted PEM private key", path);
    p->pkey = pkey;
    int id = EVP_PKEY_get_base_id(pkey);
    if (p->alg == PL_JWT_RS256 && (id != EVP_PKEY_RSA || EVP_PKEY_get_bits(pkey) < 2048))
        return perr(c, "credential: key_file %s: RS256 needs an RSA key of at least 2048 bits",
                    path);
    if (p->alg == PL_JWT_EDDSA && id != EVP_PKEY_ED25519)
        return perr(c, "credential: key_file %s: EdDSA needs an Ed25519 key", path);
    return 0;
}

static int parse_jwt(struct pctx *c, json_t *cred, struct pl_grant_profile *p) {
    static const char *const fields[] = {"kind",   "alg",      "key_env",     "key_file",
                                         "issuer", "audience", "ttl_seconds", "key_id",
                                         "header", "prefix",   NULL};
    if (check_fields(c, cred, "credential: ", fields) < 0)
        return -1;
    p->kind = PL_CRED_JWT;
    const char *alg, *iss, *aud, *kid, *key_env, *key_file;
    if (get_string(c, cred, "credential: ", "alg", true, 1, 64, &alg) < 0)
        return -1;
    if (strcmp(alg, "HS256") == 0)
        p->alg = PL_JWT_HS256;
    else if (strcmp(alg, "RS256") == 0)
        p->alg = PL_JWT_RS256;
    else if (strcmp(alg, "EdDSA") == 0)
        p->alg = PL_JWT_EDDSA;
    else
        return perr(c, "credential: alg \"%s\" is not one of HS256 RS256 EdDSA", alg);
    if (get_string(c, cred, "credential: ", "issuer", true, 1, JWT_STRING_MAX, &iss) < 0 ||
        get_string(c, cred, "credential: ", "audience", true, 1, JWT_STRING_MAX, &aud) < 0 ||
        get_string(c, cred, "credential: ", "key_id", false, 1, KEY_ID_MAX, &kid) < 0 ||
        get_string(c, cred, "credential: ", "key_env", false, 1, ENV_NAME_MAX, &key_env) < 0 ||
        get_string(c, cred, "credential: ", "key_file", false, 1, KEY_FILE_PATH_MAX, &key_file) < 0)
        return -1;
    unsigned long long ttl;
    if (get_uint(c, cred, "credential: ", "ttl_seconds", 1, PL_GRANT_TTL_MAX, DEFAULT_TTL_S, &ttl) <
        0)
        return -1;
    p->ttl_s = (unsigned)ttl;
    p->issuer = strdup(iss);
    p->audience = strdup(aud);
    p->key_id = dup_or_null(kid);
    if (!p->issuer || !p->audience || (kid && !p->key_id))
        return perr(c, "out of memory");
    if (p->alg == PL_JWT_HS256) {
        if (key_file)
            return perr(c, "credential: HS256 takes key_env, not key_file");
        if (!key_env)
            return perr(c, "credential: HS256 needs key_env");
        if (!valid_env_name(key_env))
            return perr(c, "credential: key_env \"%.128s\" is not a variable name", key_env);
        const char *key = env_get(c->env, c->userdata, key_env);
        if (!key)
            return perr(c, "credential: environment variable %s (key_env) is unset or empty",
                        key_env);
        size_t klen = strnlen(key, PL_GRANT_HMAC_KEY_MAX + 1);
        if (klen < PL_GRANT_HMAC_KEY_MIN)
            return perr(c,
                        "credential: environment variable %s (key_env) holds fewer than %u "
                        "bytes; HS256 needs at least %u",
                        key_env, PL_GRANT_HMAC_KEY_MIN, PL_GRANT_HMAC_KEY_MIN);
        if (klen > PL_GRANT_HMAC_KEY_MAX)
            return perr(c, "credential: environment variable %s (key_env) holds more than %u bytes",
                        key_env, PL_GRANT_HMAC_KEY_MAX);
        p->hmac_key = malloc(klen);
        if (!p->hmac_key)
            return perr(c, "out of memory");
        memcpy(p->hmac_key, key, klen);
        p->hmac_key_len = klen;
        return 0;
    }
    if (key_env)
        return perr(c, "credential: %s takes key_file, not key_env", alg);
    if (!key_file)
        return perr(c, "credential: %s needs key_file", alg);
    if (key_file[0] != '/')
        return perr(c, "credential: key_file %.256s must be an absolute path", key_file);
    return load_key_file(c, key_file, p);
}

static int parse_credential(struct pctx *c, json_t *prof, struct pl_grant_profile *p) {
    json_t *cred = json_object_get(prof, "credential");
    if (!cred)
        return perr(c, "credential is required");
    if (!json_is_object(cred))
        return perr(c, "credential: must be an object");
    json_t *kind = json_object_get(cred, "kind");
    if (!kind)
        return perr(c, "credential: kind is required");
    const char *k = json_is_string(kind) ? json_string_value(kind) : "";
    int r;
    if (strcmp(k, "shared_token") == 0)
        r = parse_shared_token(c, cred, p);
    else if (strcmp(k, "jwt") == 0)
        r = parse_jwt(c, cred, p);
    else
        return perr(c, "credential: unknown credential kind \"%.64s\" (shared_token or jwt)", k);
    if (r < 0)
        return r;
    return parse_header_and_prefix(c, cred, p);
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
            return perr(c, "out of memory");
    } else if (!json_is_object(lim)) {
        return perr(c, "limits: must be an object");
    }
    unsigned long long calls, req, resp, tmo;
    int r = check_fields(c, lim, "limits: ", fields);
    if (r == 0)
        r = get_uint(c, lim, "limits: ", "max_calls", 1, PL_GRANT_MAX_CALLS_MAX, DEFAULT_MAX_CALLS,
                     &calls);
    if (r == 0)
        r = get_uint(c, lim, "limits: ", "max_request_bytes", 0, PL_GRANT_BODY_MAX,
                     DEFAULT_REQUEST_BYTES, &req);
    if (r == 0)
        r = get_uint(c, lim, "limits: ", "max_response_bytes", 0, PL_GRANT_BODY_MAX,
                     DEFAULT_RESPONSE_BYTES, &resp);
    if (r == 0)
        r = get_uint(c, lim, "limits: ", "call_timeout_ms", PL_GRANT_TIMEOUT_MIN_MS,
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
    if (get_string(c, prof, "", "ca_file", false, 1, KEY_FILE_PATH_MAX, &path) < 0)
        return -1;
    if (!path)
        return 0;
    if (strncmp(p->base_url, "https://", 8) != 0)
        return perr(c, "ca_file: only an https:// base_url uses one");
    if (path[0] != '/')
        return perr(c, "ca_file: %.256s must be an absolute path", path);
    char *pem = NULL;
    size_t len = 0;
    int r = pl_file_read(path, PL_GRANT_CA_FILE_MAX, &pem, &len);
    if (r < 0) {
        perr(c, "ca_file: %.256s %s", path, pl_file_problem(r));
        return keep_errno(c->err, r);
    }
    bool looks_pem = strstr(pem, "-----BEGIN CERTIFICATE-----") != NULL;
    pl_file_free(pem, len);
    if (!looks_pem)
        return perr(c, "ca_file: %.256s holds no PEM certificate", path);
    p->ca_file = strdup(path);
    return p->ca_file ? 0 : perr(c, "out of memory");
}

/* ---- profiles and the file ---------------------------------------------- */

static int parse_profile(struct pctx *c, json_t *prof, struct pl_grant_profile *p) {
    static const char *const fields[] = {
        "base_url",   "routes", "allowed_callers", "scopes", "allow_in_sessions",
        "credential", "limits", "ca_file",         NULL};
    if (!valid_profile_name(c->name))
        return perr(c, "the name must be 1..%u characters of [A-Za-z0-9._-]", PL_GRANT_NAME_MAX);
    p->name = strdup(c->name);
    if (!p->name)
        return perr(c, "out of memory");
    if (!json_is_object(prof))
        return perr(c, "must be an object");
    if (check_fields(c, prof, "", fields) < 0 || parse_base_url(c, prof, p) < 0 ||
        parse_routes(c, prof, p) < 0 ||
        parse_string_list(c, prof, "allowed_callers", true, PL_GRANT_MAX_CALLERS, false,
                          &p->callers, &p->ncallers) < 0 ||
        parse_string_list(c, prof, "scopes", false, PL_GRANT_MAX_SCOPES, true, &p->scopes,
                          &p->nscopes) < 0)
        return -1;
    json_t *sess = json_object_get(prof, "allow_in_sessions");
    if (sess && !json_is_boolean(sess))
        return perr(c, "allow_in_sessions: must be true or false");
    p->allow_in_sessions = sess && json_is_true(sess);
    if (parse_credential(c, prof, p) < 0 || parse_limits(c, prof, p) < 0 ||
        parse_ca_file(c, prof, p) < 0)
        return -1;
    return 0;
}

int pl_grants_parse(const char *json, size_t len, pl_grants_env_fn env, void *userdata,
                    struct pl_grants **ret_grants, struct pl_error *err) {
    const enum pl_reason bad = PL_REASON_INVALID_REQUEST;
    if (!json)
        return fail(err, bad, "grants: no text");
    if (len > PL_GRANTS_MAX_FILE)
        return fail(err, bad, "grants: larger than %u bytes", PL_GRANTS_MAX_FILE);
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return fail(err, bad, "grants: line %d column %d: %.200s", jerr.line, jerr.column,
                    jerr.text);
    struct pl_grants *g = NULL;
    int r = -1;
    if (!json_is_object(root)) {
        fail(err, bad, "grants: the top level must be an object");
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "profiles") != 0) {
            fail(err, bad, "grants: unknown top-level field \"%.64s\" (only \"profiles\")", key);
            goto out;
        }
    }
    json_t *profiles = json_object_get(root, "profiles");
    if (!profiles || !json_is_object(profiles)) {
        fail(err, bad, "grants: \"profiles\" must be an object");
        goto out;
    }
    size_t n = json_object_size(profiles);
    if (n == 0 || n > PL_GRANTS_MAX_PROFILES) {
        fail(err, bad, "grants: profiles: %zu profiles; 1..%u allowed", n, PL_GRANTS_MAX_PROFILES);
        goto out;
    }
    g = calloc(1, sizeof(*g));
    if (!g || !(g->profiles = calloc(n, sizeof(*g->profiles)))) {
        fail(err, PL_REASON_INTERNAL, "grants: out of memory");
        goto out;
    }
    json_object_foreach(profiles, key, v) {
        struct pctx c = {err, bad, key, env, userdata};
        struct pl_grant_profile *p = &g->profiles[g->n++];
        if (parse_profile(&c, v, p) < 0)
            goto out;
    }
    *ret_grants = g;
    g = NULL;
    r = 0;
out:
    pl_grants_free(g);
    json_decref(root);
    return r;
}

int pl_grants_load_file(const char *path, pl_grants_env_fn env, void *userdata,
                        struct pl_grants **ret_grants, struct pl_error *err) {
    const enum pl_reason bad = PL_REASON_INVALID_REQUEST;
    if (!path || !*path)
        return fail(err, bad, "PLIMSOLL_GRANTS_FILE: no path");
    char *buf = NULL;
    size_t len = 0;
    int r = pl_file_read(path, PL_GRANTS_MAX_FILE, &buf, &len);
    if (r < 0) {
        if (r == -EFBIG)
            fail(err, bad, "PLIMSOLL_GRANTS_FILE: %.1024s is larger than %u bytes", path,
                 PL_GRANTS_MAX_FILE);
        else
            fail(err, bad, "PLIMSOLL_GRANTS_FILE: %.1024s %s", path, pl_file_problem(r));
        return keep_errno(err, r);
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
        return fail(err, PL_REASON_INTERNAL, "grants: no profile");
    struct pctx c = {err, PL_REASON_INTERNAL, p->name, env, userdata};
    if (!pl_grant_caller_allowed(p, principal))
        return perr(&c, "the caller is not in allowed_callers");
    if (p->kind == PL_CRED_SHARED_TOKEN) {
        const char *token = env_get(env, userdata, p->token_env);
        const char *problem = token_problem(token);
        if (problem)
            return perr(&c, "credential: environment variable %s %s", p->token_env, problem);
        char *out = join_prefix(p->prefix, token);
        if (!out)
            return perr(&c, "out of memory");
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
        return perr(&c, "out of memory");
    *ret_value = out;
    return 0;
}
