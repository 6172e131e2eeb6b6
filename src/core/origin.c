/* SPDX-License-Identifier: Apache-2.0 */
/*
 * origin.c: PLIMSOLL_CORS_ORIGINS read strictly and normalised to the
 * form a browser sends, so that a request's Origin is matched byte for
 * byte and a look-alike (another case, port, scheme, a suffix or prefix)
 * never matches.  See origin.h.
 */
#include "origin.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define HOST_MAX_BYTES 253u

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

static char lower(char c) {
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* A dotted quad as a browser writes one: four numbers 0..255, no leading
 * zero. */
static bool canonical_ipv4(const char *h, size_t len) {
    unsigned parts = 0;
    size_t i = 0;
    while (i <= len) {
        size_t start = i;
        unsigned v = 0;
        while (i < len && is_digit(h[i])) {
            v = v * 10 + (unsigned)(h[i] - '0');
            if (v > 255)
                return false;
            i++;
        }
        size_t n = i - start;
        if (n == 0 || (n > 1 && h[start] == '0'))
            return false;
        parts++;
        if (i == len)
            break;
        if (h[i] != '.')
            return false;
        i++;
    }
    return parts == 4;
}

/* A DNS name (letters, digits, '-', dots between non-empty labels),
 * lowercased into out; or, when its last label is a number, a dotted quad
 * (a browser reads any name ending in a number as an IPv4 address and
 * rewrites it, so only the rewritten form could ever match). */
static int host_name(const char *h, size_t len, char *out, struct pl_error *err) {
    if (len == 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "no host");
    if (len > HOST_MAX_BYTES)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "a host longer than %u bytes",
                            HOST_MAX_BYTES);
    size_t label = 0, last = 0;
    for (size_t i = 0; i < len; i++) {
        char c = h[i];
        if (c == '*')
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "a wildcard; list each origin itself");
        if (c == '.') {
            if (label == 0)
                return pl_error_set(err, PL_REASON_INVALID_REQUEST, "an empty label in the host");
            label = 0;
            last = i + 1;
            out[i] = '.';
            continue;
        }
        if (!is_digit(c) && !(lower(c) >= 'a' && lower(c) <= 'z') && c != '-')
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "a host may hold letters, digits, '-' and '.' (a name in "
                                "another script in its xn-- form)");
        out[i] = lower(c);
        label++;
    }
    if (label == 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "an empty label in the host");
    bool numeric = true;
    for (size_t i = last; i < len; i++)
        numeric = numeric && is_digit(h[i]);
    if ((numeric || (len - last > 1 && h[last] == '0' && lower(h[last + 1]) == 'x')) &&
        !canonical_ipv4(h, len))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "an IPv4 address is four numbers from 0 to 255, as a browser "
                            "writes it");
    out[len] = '\0';
    return 0;
}

/* An IPv6 address between brackets, rewritten as a browser does (hex, the
 * longest run of zeros as ::). */
static int host_ipv6(const char *h, size_t len, char *out, size_t outlen, struct pl_error *err) {
    char text[64], back[INET6_ADDRSTRLEN];
    unsigned char bin[16];
    if (len >= sizeof(text))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "not an IPv6 address");
    memcpy(text, h, len);
    text[len] = '\0';
    if (inet_pton(AF_INET6, text, bin) != 1 || !inet_ntop(AF_INET6, bin, back, sizeof(back)))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "not an IPv6 address");
    if (strchr(back, '.'))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "an IPv6 address with an IPv4 part; write it in hex, as a browser "
                            "does");
    snprintf(out, outlen, "[%s]", back);
    return 0;
}

int pl_origin_normalise(const char *s, size_t len, char *out, struct pl_error *err) {
    if (len > PL_ORIGIN_MAX_BYTES)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "longer than %u bytes",
                            PL_ORIGIN_MAX_BYTES);
    if (len == 4 && strncasecmp(s, "null", 4) == 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "null is the origin of any sandboxed or local page; it names nobody");
    if (len == 1 && s[0] == '*')
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "a wildcard; list each origin itself");
    const char *sep = memchr(s, ':', len);
    size_t slen = sep ? (size_t)(sep - s) : 0;
    bool https = slen == 5 && strncasecmp(s, "https", 5) == 0;
    if (!https && !(slen == 4 && strncasecmp(s, "http", 4) == 0))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "not http:// or https://");
    if (len - slen < 3 || memcmp(sep, "://", 3) != 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "not http:// or https://");
    const char *h = sep + 3, *end = s + len;
    for (const char *p = h; p < end; p++) {
        if (*p == '/' || *p == '?' || *p == '#')
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "an origin has no path (not even /), query or fragment");
        if (*p == '@')
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "an origin has no user name or password");
    }
    /* The host, then an optional port. */
    const char *hend;
    char host[PL_ORIGIN_MAX_BYTES + 1];
    int r;
    if (h < end && *h == '[') {
        hend = memchr(h, ']', (size_t)(end - h));
        if (!hend)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "an IPv6 address without its ]");
        r = host_ipv6(h + 1, (size_t)(hend - h - 1), host, sizeof(host), err);
        hend++;
    } else {
        hend = memchr(h, ':', (size_t)(end - h));
        if (!hend)
            hend = end;
        r = host_name(h, (size_t)(hend - h), host, err);
    }
    if (r < 0)
        return r;
    unsigned port = https ? 443 : 80;
    if (hend < end) {
        if (*hend != ':' || hend + 1 == end || end - hend - 1 > 5)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "a port is ':' and a number from 1 to 65535");
        unsigned v = 0;
        for (const char *p = hend + 1; p < end; p++) {
            if (!is_digit(*p))
                return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                    "a port is ':' and a number from 1 to 65535");
            v = v * 10 + (unsigned)(*p - '0');
        }
        if (v == 0 || v > 65535)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "a port is ':' and a number from 1 to 65535");
        port = v;
    }
    bool dflt = port == (https ? 443u : 80u);
    char portpart[8] = "";
    if (!dflt)
        snprintf(portpart, sizeof(portpart), ":%u", port);
    int n = snprintf(out, PL_ORIGIN_MAX_BYTES + 1, "%s://%s%s", https ? "https" : "http", host,
                     portpart);
    if (n < 0 || (size_t)n > PL_ORIGIN_MAX_BYTES)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "longer than %u bytes",
                            PL_ORIGIN_MAX_BYTES);
    return 0;
}

static bool ows(char c) {
    return c == ' ' || c == '\t';
}

int pl_origins_parse(const char *s, struct pl_origins *ret, struct pl_error *err) {
    struct pl_origins list = {0};
    const char *p = s;
    for (unsigned i = 1;; i++) {
        const char *comma = strchr(p, ',');
        const char *e = comma ? comma : p + strlen(p);
        const char *a = p;
        while (a < e && ows(*a))
            a++;
        while (e > a && ows(e[-1]))
            e--;
        if (a == e)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "PLIMSOLL_CORS_ORIGINS: entry %u is empty", i);
        if (list.n == PL_CORS_MAX_ORIGINS)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "PLIMSOLL_CORS_ORIGINS: more than %u origins", PL_CORS_MAX_ORIGINS);
        struct pl_error why = {0};
        int shown = e - a > 64 ? 64 : (int)(e - a);
        if (pl_origin_normalise(a, (size_t)(e - a), list.origin[list.n], &why) < 0)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "PLIMSOLL_CORS_ORIGINS: entry %u (\"%.*s%s\") is no origin: %s", i,
                                shown, a, e - a > 64 ? "..." : "", why.message);
        if (pl_origins_find(&list, list.origin[list.n]))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "PLIMSOLL_CORS_ORIGINS: %s is listed twice", list.origin[list.n]);
        list.n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    *ret = list;
    return 0;
}

const char *pl_origins_find(const struct pl_origins *list, const char *origin) {
    if (!origin)
        return NULL;
    size_t len = strlen(origin);
    for (unsigned i = 0; i < list->n; i++)
        if (strlen(list->origin[i]) == len && memcmp(list->origin[i], origin, len) == 0)
            return list->origin[i];
    return NULL;
}

bool pl_token_list_within(const char *value, const char *const *allowed, unsigned max_items) {
    unsigned items = 0;
    const char *p = value;
    while (*p) {
        const char *e = p + strcspn(p, ",");
        const char *a = p, *b = e;
        while (a < b && ows(*a))
            a++;
        while (b > a && ows(b[-1]))
            b--;
        if (a < b) {
            if (++items > max_items)
                return false;
            bool known = false;
            for (const char *const *n = allowed; *n && !known; n++)
                known = strlen(*n) == (size_t)(b - a) && strncasecmp(*n, a, (size_t)(b - a)) == 0;
            if (!known)
                return false;
        }
        p = *e ? e + 1 : e;
    }
    return true;
}
