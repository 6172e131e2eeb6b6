/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grants_routes.c: where a grant profile's calls may go: its base_url, its
 * route patterns, and the canonical-path rule both they and every request
 * path must follow (grants.h states the rules).
 *
 * One rule serves all three: a path is split at '/' and each segment is
 * checked as a server that decodes escapes would read it, so a path that
 * passes here means the same to the API as to the matcher.  Matching is then
 * byte-exact, segment by segment; nothing is decoded or normalised.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../core/canon.h"
#include "grants_int.h"

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

/* ---- base_url ----------------------------------------------------------- */

int gr_parse_base_url(struct pctx *c, json_t *prof, struct pl_grant_profile *p) {
    const char *url;
    if (gr_get_string(c, prof, "", "base_url", true, 1, PL_GRANT_BASE_URL_MAX, &url) < 0)
        return -1;
    size_t skip;
    if (strncmp(url, "http://", 7) == 0)
        skip = 7;
    else if (strncmp(url, "https://", 8) == 0)
        skip = 8;
    else
        return gr_perr(c, "base_url: must start with http:// or https://");
    if (strpbrk(url, "?#"))
        return gr_perr(c, "base_url: must not have a query or fragment");
    const char *auth = url + skip;
    size_t alen = strcspn(auth, "/");
    if (memchr(auth, '@', alen))
        return gr_perr(c, "base_url: must not have userinfo");
    if (alen == 0)
        return gr_perr(c, "base_url: must name a host");
    size_t hlen;
    if (auth[0] == '[') {
        const char *close = memchr(auth, ']', alen);
        if (!close || close - auth < 3)
            return gr_perr(c, "base_url: bad IPv6 literal");
        for (const char *q = auth + 1; q < close; q++)
            if (pl_hex_digit(*q) < 0 && *q != ':' && *q != '.')
                return gr_perr(c, "base_url: bad IPv6 literal");
        hlen = (size_t)(close - auth) + 1;
    } else {
        hlen = strcspn(auth, ":/");
        if (hlen == 0)
            return gr_perr(c, "base_url: must name a host");
        for (size_t i = 0; i < hlen; i++) {
            unsigned char ch = (unsigned char)auth[i];
            if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_' || ch == '~'))
                return gr_perr(c, "base_url: the host has a byte outside [A-Za-z0-9._~-]");
        }
    }
    if (hlen < alen) {
        if (auth[hlen] != ':')
            return gr_perr(c, "base_url: unexpected byte after the host");
        size_t plen = alen - hlen - 1;
        if (plen == 0 || plen > 5)
            return gr_perr(c, "base_url: the port must be 1..65535");
        unsigned port = 0;
        for (size_t i = hlen + 1; i < alen; i++) {
            if (auth[i] < '0' || auth[i] > '9')
                return gr_perr(c, "base_url: the port must be 1..65535");
            port = port * 10 + (unsigned)(auth[i] - '0');
        }
        if (port == 0 || port > 65535)
            return gr_perr(c, "base_url: the port must be 1..65535");
    }
    const char *path = auth + alen;
    size_t plen = strlen(path);
    if (plen > 0 && path[plen - 1] == '/')
        plen--; /* one trailing '/' is stripped */
    if (plen == 1)
        return gr_perr(c, "base_url: path prefix: empty segment"); /* it was "//" */
    if (plen > 0) {
        const char *segs[PL_GRANT_PATH_MAX_SEGS];
        size_t lens[PL_GRANT_PATH_MAX_SEGS];
        const char *problem;
        if (split_path(path, plen, segs, lens, &problem) < 0)
            return gr_perr(c, "base_url: path prefix: %s", problem);
    }
    size_t keep = (size_t)(path - url) + plen;
    p->base_url = strndup(url, keep);
    if (!p->base_url)
        return gr_perr(c, "out of memory");
    return 0;
}

/* ---- routes ------------------------------------------------------------- */

static const char *const METHODS[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", NULL};

static int parse_route(struct pctx *c, size_t idx, const char *text, struct pl_route *r) {
    r->text = strdup(text);
    if (!r->text)
        return gr_perr(c, "out of memory");
    const char *sp = strchr(text, ' ');
    size_t mlen = sp ? (size_t)(sp - text) : strlen(text);
    bool known = false;
    for (const char *const *m = METHODS; *m && !known; m++)
        known = strlen(*m) == mlen && memcmp(*m, text, mlen) == 0;
    if (!known || !sp)
        return gr_perr(c,
                       "routes[%zu] \"%.128s\": the method must be one of GET HEAD POST PUT PATCH "
                       "DELETE, then one space and the path",
                       idx, text);
    memcpy(r->method, text, mlen);
    r->method[mlen] = '\0';
    const char *pat = sp + 1;
    size_t len = strlen(pat);
    if (len == 0 || pat[0] != '/')
        return gr_perr(c, "routes[%zu] \"%.128s\": the pattern must start with '/'", idx, text);
    if (len > PL_GRANT_PATH_MAX)
        return gr_perr(c, "routes[%zu] \"%.128s\": the pattern is longer than %u bytes", idx, text,
                       PL_GRANT_PATH_MAX);
    if (len == 1)
        return 0; /* "/" */
    r->segs = calloc(PL_GRANT_PATH_MAX_SEGS, sizeof(*r->segs));
    if (!r->segs)
        return gr_perr(c, "out of memory");
    size_t pos = 1;
    for (;;) {
        const char *slash = memchr(pat + pos, '/', len - pos);
        size_t end = slash ? (size_t)(slash - pat) : len;
        const char *seg = pat + pos;
        size_t slen = end - pos;
        if (r->tail)
            return gr_perr(c, "routes[%zu] \"%.128s\": \"**\" may only be the last segment", idx,
                           text);
        if (slen == 2 && seg[0] == '*' && seg[1] == '*') {
            r->tail = true;
        } else {
            if (r->nsegs == PL_GRANT_PATH_MAX_SEGS)
                return gr_perr(c, "routes[%zu] \"%.128s\": more than %u segments", idx, text,
                               PL_GRANT_PATH_MAX_SEGS);
            if (memchr(seg, '*', slen) && slen != 1)
                return gr_perr(c, "routes[%zu] \"%.128s\": a wildcard must be a whole segment", idx,
                               text);
            if (!(slen == 1 && seg[0] == '*')) {
                const char *problem = segment_problem(seg, slen);
                if (problem)
                    return gr_perr(c, "routes[%zu] \"%.128s\": %s", idx, text, problem);
            }
            r->segs[r->nsegs] = strndup(seg, slen);
            if (!r->segs[r->nsegs])
                return gr_perr(c, "out of memory");
            r->nsegs++;
        }
        if (!slash)
            break;
        pos = end + 1;
    }
    return 0;
}

int gr_parse_routes(struct pctx *c, json_t *prof, struct pl_grant_profile *p) {
    json_t *v = json_object_get(prof, "routes");
    if (!v)
        return gr_perr(c, "routes is required");
    if (!json_is_array(v))
        return gr_perr(c, "routes: must be an array of strings");
    size_t n = json_array_size(v);
    if (n == 0)
        return gr_perr(c, "routes: empty route list reaches nothing");
    if (n > PL_GRANT_MAX_ROUTES)
        return gr_perr(c, "routes: more than %u routes", PL_GRANT_MAX_ROUTES);
    p->routes = calloc(n, sizeof(*p->routes));
    if (!p->routes)
        return gr_perr(c, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e))
            return gr_perr(c, "routes[%zu]: must be a string", i);
        p->nroutes = i + 1;
        if (parse_route(c, i, json_string_value(e), &p->routes[i]) < 0)
            return -1;
    }
    return 0;
}
