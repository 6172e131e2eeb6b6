/* SPDX-License-Identifier: Apache-2.0 */
/*
 * settings.c: the e2b provider's settings (docs/providers/e2b.md).  Only
 * their shape is checked here: preflight proves nothing about E2B itself.
 */
#include <stdio.h>
#include <string.h>

#include "../settings.h"
#include "e2b_int.h"

/* scheme://host[:port] with nothing after it; plain http only to this
 * machine (the API key travels in a header). */
static int parse_api_url(struct eb_settings *s, struct pl_error *err) {
    const char *u = s->api_url, *host;
    size_t n = strlen(u);
    while (n && u[n - 1] == '/')
        s->api_url[--n] = '\0';
    if (strncmp(u, "https://", 8) == 0) {
        snprintf(s->scheme, sizeof(s->scheme), "https");
        host = u + 8;
    } else if (strncmp(u, "http://", 7) == 0) {
        snprintf(s->scheme, sizeof(s->scheme), "http");
        host = u + 7;
    } else {
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_E2B_API_URL: \"%.64s\" must start with https://", u);
    }
    size_t hl = strcspn(host, ":/?#");
    if (hl == 0 || (host[hl] && host[hl] != ':'))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_E2B_API_URL: \"%.64s\" must be scheme://host[:port] and "
                            "nothing more",
                            u);
    for (size_t i = 0; i < hl; i++) {
        char c = host[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-'))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "SANDBOX_E2B_API_URL: the host must be a DNS name or an IPv4 "
                                "address");
    }
    const char *port = host + hl;
    if (*port == ':') {
        size_t pl = strlen(port + 1);
        if (pl == 0 || pl > 5 || strspn(port + 1, "0123456789") != pl)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "SANDBOX_E2B_API_URL: the port must be a number");
        snprintf(s->port_suffix, sizeof(s->port_suffix), "%s", port);
    }
    bool loopback = (hl == 9 && strncmp(host, "localhost", 9) == 0) ||
                    (hl >= 4 && strncmp(host, "127.", 4) == 0);
    if (strcmp(s->scheme, "http") == 0 && !loopback)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_E2B_API_URL: plain http is allowed only to this machine "
                            "(127.0.0.0/8 or localhost); the API key travels in a header");
    return 0;
}

static int check_name(const char *name, const char *v, struct pl_error *err) {
    if (!*v ||
        strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(v))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: use [A-Za-z0-9._-]", name);
    return 0;
}

/* host:port[,host:port...], each an IPv4 address or a DNS name. */
static int check_probe(const char *v, struct pl_error *err) {
    const char *p = v;
    do {
        size_t len = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        size_t pl = colon ? len - (size_t)(colon - p) - 1 : 0;
        if (!colon || colon == p || pl == 0 || pl > 5 || strspn(colon + 1, "0123456789") < pl ||
            strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
                (size_t)(colon - p))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "SANDBOX_E2B_EGRESS_PROBE: \"%.64s\" must be host:port[,...]", v);
        p += len;
    } while (*p++ == ',');
    return 0;
}

/* E2B_GUARD_URL: http://IPv4:port and nothing more (a VM's allowOut is an
 * address, so the guard's must be one). */
static int parse_guard(const struct pl_config *c, struct eb_settings *s, struct pl_error *err) {
    const char *u = pl_setting(c, "E2B_GUARD_URL");
    if (!u)
        return 0;
    unsigned a, b, cc, d, port;
    char tail;
    if (strlen(u) >= sizeof(s->guard_url) ||
        sscanf(u, "http://%u.%u.%u.%u:%u%c", &a, &b, &cc, &d, &port, &tail) != 5 || a > 255 ||
        b > 255 || cc > 255 || d > 255 || port == 0 || port > 65535 ||
        strspn(u + 7, "0123456789.:") != strlen(u + 7))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "E2B_GUARD_URL: \"%.64s\" must be http://IPv4:port, the address a "
                            "VM dials (its only allowed egress)",
                            u);
    snprintf(s->guard_url, sizeof(s->guard_url), "%s", u);
    snprintf(s->guard_ip, sizeof(s->guard_ip), "%u.%u.%u.%u", a, b, cc, d);
    s->guard_port = port;
    return pl_setting_copy(c, "SANDBOX_E2B_GUARD_LISTEN", "0.0.0.0", s->guard_listen,
                           sizeof(s->guard_listen), err);
}

int eb_load_settings(const struct pl_config *c, struct eb_settings *s, struct pl_error *err) {
    memset(s, 0, sizeof(*s));
    const char *key = pl_setting(c, "E2B_API_KEY");
    if (!key)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "E2B_API_KEY: required with SANDBOX_PROVIDER=e2b");
    if (strlen(key) >= sizeof(s->api_key) || strpbrk(key, "\r\n"))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "E2B_API_KEY: longer than %zu bytes or holds a line break",
                            sizeof(s->api_key) - 1);
    memcpy(s->api_key, key, strlen(key) + 1);
    if (!pl_setting(c, "SANDBOX_E2B_TEMPLATE"))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_E2B_TEMPLATE: required with SANDBOX_PROVIDER=e2b (the "
                            "template that carries every tool a run needs)");
    if (pl_setting_copy(c, "SANDBOX_E2B_TEMPLATE", "", s->template_id, sizeof(s->template_id),
                        err) < 0 ||
        check_name("SANDBOX_E2B_TEMPLATE", s->template_id, err) < 0 ||
        pl_setting_copy(c, "SANDBOX_E2B_API_URL", "https://api.e2b.app", s->api_url,
                        sizeof(s->api_url), err) < 0 ||
        parse_api_url(s, err) < 0 ||
        pl_setting_copy(c, "SANDBOX_E2B_INSTANCE", "default", s->instance, sizeof(s->instance),
                        err) < 0 ||
        check_name("SANDBOX_E2B_INSTANCE", s->instance, err) < 0 ||
        pl_setting_uint(c, "SANDBOX_E2B_CPU_COUNT", 2, 1, 64, &s->cpu_count, err) < 0 ||
        pl_setting_uint(c, "SANDBOX_E2B_MEMORY_MB", 512, 128, 65536, &s->memory_mb, err) < 0 ||
        pl_setting_copy(c, "SANDBOX_E2B_WORKDIR", "/home/user/project", s->workdir,
                        sizeof(s->workdir), err) < 0 ||
        pl_setting_copy(c, "SANDBOX_E2B_EGRESS_PROBE", "1.1.1.1:443,8.8.8.8:53", s->egress_probe,
                        sizeof(s->egress_probe), err) < 0 ||
        check_probe(s->egress_probe, err) < 0 ||
        pl_setting_uint(c, "SANDBOX_E2B_CALL_TIMEOUT_MS", 30000, 1000, 300000, &s->call_timeout_ms,
                        err) < 0 ||
        pl_setting_uint(c, "SANDBOX_E2B_REAP_INTERVAL_S", 60, 5, 3600, &s->reap_interval_s, err) <
            0 ||
        pl_setting_uint(c, "SANDBOX_E2B_VM_SLACK_S", 30, 5, 3600, &s->vm_slack_s, err) < 0 ||
        parse_guard(c, s, err) < 0)
        return -1;
    if (s->workdir[0] != '/' || strstr(s->workdir, "..") ||
        strspn(s->workdir, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") !=
            strlen(s->workdir))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_E2B_WORKDIR: an absolute path of [A-Za-z0-9._-/], no \"..\"");
    return 0;
}
