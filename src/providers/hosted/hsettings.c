/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hsettings.c: the settings every hosted provider has in some form
 * (docs/internals/hosted.md, "Settings"): a service's URL, a secret, a name,
 * a work directory, the egress probe's targets and the guard's URL.  Each
 * message starts with the setting's name; a secret's value is never in
 * one.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../settings.h"
#include "hosted.h"

#define ALNUM "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

int ph_setting_url(const struct pl_config *c, const char *name, const char *def, bool allow_path,
                   char *dst, size_t len, struct pl_error *err) {
    if (pl_setting_copy(c, name, def, dst, len, err) < 0)
        return -1;
    size_t n = strlen(dst);
    while (n && dst[n - 1] == '/')
        dst[--n] = '\0';
    const char *host;
    bool https = strncmp(dst, "https://", 8) == 0;
    if (https)
        host = dst + 8;
    else if (strncmp(dst, "http://", 7) == 0)
        host = dst + 7;
    else
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "%s: \"%.64s\" must start with https://", name, dst);
    size_t hl = strcspn(host, ":/?#");
    if (hl == 0 || strspn(host, ALNUM ".-") < hl)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "%s: the host must be a DNS name or an IPv4 address", name);
    const char *rest = host + hl;
    if (*rest == ':') {
        size_t pl = strspn(rest + 1, "0123456789");
        if (pl == 0 || pl > 5)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: the port must be a number",
                                name);
        rest += 1 + pl;
    }
    if (*rest && (!allow_path || *rest != '/' || strspn(rest, ALNUM "/._~-") != strlen(rest) ||
                  strstr(rest, "..")))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            allow_path ? "%s: \"%.64s\" must be scheme://host[:port][/path] and "
                                         "nothing more"
                                       : "%s: \"%.64s\" must be scheme://host[:port] and nothing "
                                         "more",
                            name, dst);
    bool loopback = (hl == 9 && strncmp(host, "localhost", 9) == 0) ||
                    (hl >= 4 && strncmp(host, "127.", 4) == 0);
    if (!https && !loopback)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "%s: plain http is allowed only to this machine (127.0.0.0/8 or "
                            "localhost); a credential travels in a header",
                            name);
    return 0;
}

int ph_setting_secret(const struct pl_config *c, const char *name, const char *why, char *dst,
                      size_t len, struct pl_error *err) {
    const char *v = pl_setting(c, name);
    if (!v)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: required %s", name, why);
    if (strlen(v) >= len || strpbrk(v, "\r\n"))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "%s: longer than %zu bytes or holds a line break", name, len - 1);
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

int ph_setting_name(const struct pl_config *c, const char *name, const char *def, char *dst,
                    size_t len, struct pl_error *err) {
    if (pl_setting_copy(c, name, def, dst, len, err) < 0)
        return -1;
    if (!*dst || strspn(dst, ALNUM "._-") != strlen(dst))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: use [A-Za-z0-9._-]", name);
    return 0;
}

int ph_setting_workdir(const struct pl_config *c, const char *name, const char *def, char *dst,
                       size_t len, struct pl_error *err) {
    if (pl_setting_copy(c, name, def, dst, len, err) < 0)
        return -1;
    if (dst[0] != '/' || strstr(dst, "..") || strspn(dst, ALNUM "._-/") != strlen(dst))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "%s: an absolute path of [A-Za-z0-9._-/], no \"..\"", name);
    return 0;
}

int ph_setting_probe(const struct pl_config *c, const char *name, const char *def, char *dst,
                     size_t len, struct pl_error *err) {
    if (pl_setting_copy(c, name, def, dst, len, err) < 0)
        return -1;
    const char *p = dst;
    do {
        size_t n = strcspn(p, ",");
        const char *colon = memchr(p, ':', n);
        size_t pl = colon ? n - (size_t)(colon - p) - 1 : 0;
        if (!colon || colon == p || pl == 0 || pl > 5 || strspn(colon + 1, "0123456789") < pl ||
            strspn(p, ALNUM ".-") != (size_t)(colon - p))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "%s: \"%.64s\" must be host:port[,host:port...]", name, dst);
        p += n;
    } while (*p++ == ',');
    return 0;
}

int ph_setting_guard(const struct pl_config *c, const char *url_name, const char *listen_name,
                     struct ph_guard_setting *g, struct pl_error *err) {
    memset(g, 0, sizeof(*g));
    const char *u = pl_setting(c, url_name);
    if (!u)
        return 0;
    unsigned a, b, cc, d, port;
    char tail;
    if (strlen(u) >= sizeof(g->url) ||
        sscanf(u, "http://%u.%u.%u.%u:%u%c", &a, &b, &cc, &d, &port, &tail) != 5 || a > 255 ||
        b > 255 || cc > 255 || d > 255 || port == 0 || port > 65535 ||
        strspn(u + 7, "0123456789.:") != strlen(u + 7))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "%s: \"%.64s\" must be http://IPv4:port, the address a VM dials "
                            "(its only allowed egress)",
                            url_name, u);
    snprintf(g->url, sizeof(g->url), "%s", u);
    snprintf(g->ip, sizeof(g->ip), "%u.%u.%u.%u", a, b, cc, d);
    g->port = port;
    return pl_setting_copy(c, listen_name, "0.0.0.0", g->listen, sizeof(g->listen), err);
}
