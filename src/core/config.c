/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.c: read, validate and freeze the daemon's settings.
 *
 * Every integer setting is one row of INT_SETTINGS (name, field, default,
 * bounds), so the bounds that docs/configuration.md promises are the ones
 * the code enforces.  Cross-setting rules (the memory pair, the per-key cap
 * against the global cap, timeouts) follow the table.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* X(NAME, field, default, min, max); default 0 with min > 0 means "derived". */
#define INT_SETTINGS(X)                                                                            \
    X(SANDBOX_MAX_CONCURRENT, max_concurrent, 8, 1, 4096)                                          \
    X(SANDBOX_RATE_PER_MIN, rate_per_min, 600, 1, 1000000)                                         \
    X(SANDBOX_TIMEOUT_MS, default_timeout_ms, 10000, 10, 3600000)                                  \
    X(SANDBOX_MAX_TIMEOUT_MS, max_timeout_ms, 60000, 10, 3600000)                                  \
    X(SANDBOX_OUTPUT_BYTES, output_bytes, 1048576, 1024, 67108864)                                 \
    X(PLIMSOLL_MAX_REQUEST_BYTES, max_request_bytes, 14680064, 65536, 268435456)                   \
    X(PLIMSOLL_REQUEST_READ_TIMEOUT_MS, request_read_timeout_ms, 30000, 100, 3600000)              \
    X(PLIMSOLL_ANSWER_SEND_TIMEOUT_MS, answer_send_timeout_ms, 30000, 100, 3600000)                \
    X(PLIMSOLL_MAX_CONNECTIONS, max_connections, 256, 4, 65536)                                    \
    X(SANDBOX_MAX_SESSIONS, max_sessions, 0, 0, 1024)                                              \
    X(SANDBOX_SESSION_DISK_MB, session_disk_mb, 64, 1, 65536)                                      \
    X(SANDBOX_SESSION_LIFETIME, session_lifetime_s, 3600, 5, 604800)                               \
    X(SANDBOX_SESSION_IDLE, session_idle_s, 300, 1, 604800)                                        \
    X(SANDBOX_SESSION_POOL, session_pool, 0, 0, 64)                                                \
    X(SANDBOX_FILE_READ_BYTES, file_read_bytes, 4194304, 1024, 67108864)                           \
    X(SANDBOX_FILE_LIST_ENTRIES, file_list_entries, 1000, 1, 100000)                               \
    X(SANDBOX_COLLECT_FILES, collect_files, 64, 1, 1000)                                           \
    X(SANDBOX_COLLECT_BYTES, collect_bytes, 1048576, 1024, 67108864)                               \
    X(SANDBOX_DISPLAY_OUTPUTS, display_outputs, 32, 1, 1000)                                       \
    X(SANDBOX_DISPLAY_OUTPUT_BYTES, display_output_bytes, 4194304, 1024, 67108864)                 \
    X(SANDBOX_DISPLAY_BYTES, display_bytes, 8388608, 1024, 268435456)                              \
    X(PLIMSOLL_HEALTH_WATCH_STREAMS, health_watch_streams, 64, 1, 65536)                           \
    X(PLIMSOLL_HEALTH_WATCH_STREAMS_PER_CONNECTION, health_watch_streams_per_connection, 4, 1,     \
      100)                                                                                         \
    X(PLIMSOLL_HEALTH_WATCH_TIMEOUT_MS, health_watch_timeout_ms, 600000, 1000, 86400000)           \
    X(PLIMSOLL_REFLECTION_STREAMS, reflection_streams, 16, 1, 4096)                                \
    X(PLIMSOLL_REFLECTION_MESSAGE_BYTES, reflection_message_bytes, 4096, 64, 1048576)              \
    X(PLIMSOLL_REFLECTION_MESSAGES, reflection_messages, 128, 1, 65536)                            \
    X(PLIMSOLL_REFLECTION_TIMEOUT_MS, reflection_timeout_ms, 60000, 100, 3600000)                  \
    X(PLIMSOLL_MCP_SESSIONS, mcp_sessions, 1024, 1, 65536)                                         \
    X(PLIMSOLL_MCP_SESSIONS_PER_KEY, mcp_sessions_per_key, 64, 1, 65536)                           \
    X(PLIMSOLL_MCP_SESSION_IDLE_MS, mcp_session_idle_ms, 3600000, 1000, 604800000)                 \
    X(PLIMSOLL_MCP_SESSION_LIFETIME_MS, mcp_session_lifetime_ms, 86400000, 1000, 2592000000u)      \
    X(PLIMSOLL_MCP_CALLS_PER_SESSION, mcp_calls_per_session, 4, 1, 256)                            \
    X(PLIMSOLL_MCP_OUTPUT_BYTES, mcp_output_bytes, 65536, 1024, 67108864)

/* Derived or paired integer settings, bounds only. */
#define MEMORY_MB_MIN 16u
#define MEMORY_MB_MAX 1048576u
#define MEMORY_MB_DEFAULT 256u
#define DRAIN_MAX_MS 3600000u
#define DRAIN_NOTICE_MAX_MS 300000u
#define SESSION_MAX_LIFETIME_DEFAULT 86400u
#define SESSION_MAX_LIFETIME_MAX 604800u
#define IN_FLIGHT_DEFAULT (64u << 20)
#define IN_FLIGHT_MAX 4294967295ul

const char *const pl_config_reserved_settings[] = {
    NULL,
};

static int parse_uint(const char *name, const char *s, unsigned long min, unsigned long max,
                      unsigned *ret, struct pl_error *err) {
    if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ')
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: \"%.64s\" is not a whole number",
                            name, s);
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: \"%.64s\" is not a whole number",
                            name, s);
    if (v < min || v > max)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: %llu is out of bounds (%lu..%lu)",
                            name, v, min, max);
    *ret = (unsigned)v;
    return 0;
}

/* A lookup that treats an empty value like an unset one. */
static const char *get(pl_env_lookup_fn lookup, void *ud, const char *name) {
    const char *v = lookup(name, ud);
    return (v && *v) ? v : NULL;
}

/* A route key: [A-Za-z0-9._-], 1..63 bytes (pl_route_valid). */
bool pl_route_valid(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
            return false;
    return true;
}

/* PLIMSOLL_INSTANCE, or the host's name: the route key of this daemon's
 * sessions.  A host name that is no route key is refused, naming the
 * setting that fixes it. */
static int parse_instance(pl_env_lookup_fn lookup, void *ud, struct pl_config *c,
                          struct pl_error *err) {
    const char *v = get(lookup, ud, "PLIMSOLL_INSTANCE");
    char host[256] = "";
    if (!v) {
        if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
            snprintf(host, sizeof(host), "plimsolld");
        v = host;
    }
    if (!pl_route_valid(v))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "PLIMSOLL_INSTANCE: \"%.64s\"%s must be 1 to 63 of [A-Za-z0-9._-]", v,
                            v == host ? " (the host's name)" : "");
    snprintf(c->instance, sizeof(c->instance), "%s", v);
    return 0;
}

/* A setting that is on (the default) or off. */
static int parse_on_off(pl_env_lookup_fn lookup, void *ud, const char *name, bool *ret,
                        struct pl_error *err) {
    const char *v = get(lookup, ud, name);
    *ret = !v || strcmp(v, "on") == 0;
    if (v && strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: \"%.32s\" is neither on nor off",
                            name, v);
    return 0;
}

int pl_listen_parse(const char *s, struct pl_listen *ret_listen) {
    struct pl_listen l = {0};
    if (!s || !*s)
        return -1;
    if (strncmp(s, "unix:", 5) == 0) {
        const char *path = s + 5;
        size_t n = strlen(path);
        if (n == 0 || n >= sizeof(l.path) || path[0] != '/')
            return -1;
        l.kind = PL_LISTEN_UNIX;
        memcpy(l.path, path, n + 1);
        *ret_listen = l;
        return 0;
    }
    l.kind = PL_LISTEN_TCP;
    const char *colon;
    const char *host = s;
    size_t hostlen;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return -1;
        host = s + 1;
        hostlen = (size_t)(close - host);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return -1;
        hostlen = (size_t)(colon - s);
        if (memchr(s, ':', hostlen))
            return -1; /* bare IPv6 needs brackets */
    }
    if (hostlen == 0 || hostlen >= sizeof(l.host))
        return -1;
    memcpy(l.host, host, hostlen);
    l.host[hostlen] = '\0';
    const char *port = colon + 1;
    if (*port == '\0' || strlen(port) > 5)
        return -1;
    unsigned v = 0;
    for (const char *p = port; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (unsigned)(*p - '0');
    }
    if (v > 65535)
        return -1;
    l.port = v;
    *ret_listen = l;
    return 0;
}

int pl_config_load(struct pl_config *ret_config, pl_env_lookup_fn lookup, void *ud,
                   struct pl_error *err) {
    struct pl_config c = {0};
    const char *v;

    for (const char *const *r = pl_config_reserved_settings; *r; r++) {
        if (get(lookup, ud, *r))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "%s: not supported by this build of plimsolld; unset it", *r);
    }

    v = get(lookup, ud, "SANDBOX_PROVIDER");
    if (!v)
        v = "disabled";
    if (strlen(v) >= sizeof(c.provider))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_PROVIDER: unknown provider \"%.32s...\"", v);
    memcpy(c.provider, v, strlen(v) + 1);

    c.min_isolation = PL_TIER_NONE;
    v = get(lookup, ud, "SANDBOX_MIN_ISOLATION");
    if (v && pl_tier_parse(v, &c.min_isolation) < 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_MIN_ISOLATION: \"%.64s\" is not a tier "
                            "(none, process, container, kernel, vm)",
                            v);

#define PL_X(NAME, field, def, min, max)                                                           \
    c.field = def;                                                                                 \
    v = get(lookup, ud, #NAME);                                                                    \
    if (v && parse_uint(#NAME, v, min, max, &c.field, err) < 0)                                    \
        return -1;
    INT_SETTINGS(PL_X)
#undef PL_X

    /* The memory pair: set together or not at all. */
    const char *mem = get(lookup, ud, "SANDBOX_MEMORY_MB");
    const char *total = get(lookup, ud, "SANDBOX_TOTAL_MEMORY_MB");
    if (mem && !total)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_MEMORY_MB: set together with SANDBOX_TOTAL_MEMORY_MB, "
                            "or neither");
    if (total && !mem)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_TOTAL_MEMORY_MB: set together with SANDBOX_MEMORY_MB, "
                            "or neither");
    c.memory_mb = MEMORY_MB_DEFAULT;
    c.total_memory_mb = 0;
    if (mem) {
        if (parse_uint("SANDBOX_MEMORY_MB", mem, MEMORY_MB_MIN, MEMORY_MB_MAX, &c.memory_mb, err) <
            0)
            return -1;
        if (parse_uint("SANDBOX_TOTAL_MEMORY_MB", total, MEMORY_MB_MIN, MEMORY_MB_MAX,
                       &c.total_memory_mb, err) < 0)
            return -1;
        if (c.memory_mb > c.total_memory_mb)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "SANDBOX_MEMORY_MB: a run's %u MB exceeds the whole budget "
                                "SANDBOX_TOTAL_MEMORY_MB=%u; no run could ever be admitted",
                                c.memory_mb, c.total_memory_mb);
    }

    c.per_key_concurrent = c.max_concurrent / 2 ? c.max_concurrent / 2 : 1;
    v = get(lookup, ud, "SANDBOX_PER_KEY_CONCURRENT");
    if (v && parse_uint("SANDBOX_PER_KEY_CONCURRENT", v, 1, c.max_concurrent, &c.per_key_concurrent,
                        err) < 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_PER_KEY_CONCURRENT: \"%.64s\" must be a whole number "
                            "from 1 to SANDBOX_MAX_CONCURRENT (%u)",
                            v, c.max_concurrent);

    c.rate_burst = c.rate_per_min / 10 ? c.rate_per_min / 10 : 1;
    v = get(lookup, ud, "SANDBOX_RATE_BURST");
    if (v && parse_uint("SANDBOX_RATE_BURST", v, 1, 1000000, &c.rate_burst, err) < 0)
        return -1;

    c.session_max_lifetime_s = c.session_lifetime_s > SESSION_MAX_LIFETIME_DEFAULT
                                   ? c.session_lifetime_s
                                   : SESSION_MAX_LIFETIME_DEFAULT;
    v = get(lookup, ud, "SANDBOX_SESSION_MAX_LIFETIME");
    if (v && parse_uint("SANDBOX_SESSION_MAX_LIFETIME", v, c.session_lifetime_s,
                        SESSION_MAX_LIFETIME_MAX, &c.session_max_lifetime_s, err) < 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_SESSION_MAX_LIFETIME: \"%.64s\" must be a whole number "
                            "of seconds from SANDBOX_SESSION_LIFETIME (%u) to %u",
                            v, c.session_lifetime_s, SESSION_MAX_LIFETIME_MAX);

    if (c.default_timeout_ms > c.max_timeout_ms)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_TIMEOUT_MS: the default %u ms exceeds "
                            "SANDBOX_MAX_TIMEOUT_MS=%u",
                            c.default_timeout_ms, c.max_timeout_ms);

    /* The bodies held at once: at least one of the largest. */
    c.request_bytes_in_flight =
        c.max_request_bytes > IN_FLIGHT_DEFAULT ? c.max_request_bytes : IN_FLIGHT_DEFAULT;
    v = get(lookup, ud, "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT");
    if (v && parse_uint("PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT", v, 65536, IN_FLIGHT_MAX,
                        &c.request_bytes_in_flight, err) < 0)
        return -1;
    if (c.request_bytes_in_flight < c.max_request_bytes)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT: %u bytes is less than one "
                            "body of PLIMSOLL_MAX_REQUEST_BYTES=%u; the largest request could "
                            "never be read",
                            c.request_bytes_in_flight, c.max_request_bytes);

    /* One caller's share of them: half, at least one largest body. */
    c.key_request_bytes_in_flight = c.request_bytes_in_flight / 2 > c.max_request_bytes
                                        ? c.request_bytes_in_flight / 2
                                        : c.max_request_bytes;
    v = get(lookup, ud, "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT");
    if (v && parse_uint("PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT", v, c.max_request_bytes,
                        c.request_bytes_in_flight, &c.key_request_bytes_in_flight, err) < 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT: \"%.64s\" must be a whole "
                            "number from PLIMSOLL_MAX_REQUEST_BYTES (%u) to "
                            "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT (%u)",
                            v, c.max_request_bytes, c.request_bytes_in_flight);

    /* One address's share of the connections: a quarter by default, so one
     * address alone never holds them all. */
    c.max_connections_per_address = c.max_connections / 4 ? c.max_connections / 4 : 1;
    v = get(lookup, ud, "PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS");
    if (v && parse_uint("PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS", v, 1, c.max_connections,
                        &c.max_connections_per_address, err) < 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS: \"%.64s\" must be a whole "
                            "number from 1 to PLIMSOLL_MAX_CONNECTIONS (%u)",
                            v, c.max_connections);

    c.drain_timeout_ms = c.max_timeout_ms + 5000;
    v = get(lookup, ud, "PLIMSOLL_DRAIN_TIMEOUT_MS");
    if (v &&
        parse_uint("PLIMSOLL_DRAIN_TIMEOUT_MS", v, 0, DRAIN_MAX_MS, &c.drain_timeout_ms, err) < 0)
        return -1;

    v = get(lookup, ud, "PLIMSOLL_DRAIN_NOTICE_MS");
    if (v && parse_uint("PLIMSOLL_DRAIN_NOTICE_MS", v, 0, DRAIN_NOTICE_MAX_MS, &c.drain_notice_ms,
                        err) < 0)
        return -1;
    if (parse_instance(lookup, ud, &c, err) < 0)
        return -1;

    if (parse_on_off(lookup, ud, "PLIMSOLL_CONSOLE", &c.console, err) < 0 ||
        parse_on_off(lookup, ud, "PLIMSOLL_MCP", &c.mcp, err) < 0)
        return -1;
    c.mcp_min_isolation = PL_TIER_NONE;
    v = get(lookup, ud, "PLIMSOLL_MCP_MINIMUM_ISOLATION");
    if (v && pl_tier_parse(v, &c.mcp_min_isolation) < 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "PLIMSOLL_MCP_MINIMUM_ISOLATION: \"%.64s\" is not a tier "
                            "(none, process, container, kernel, vm)",
                            v);

    v = get(lookup, ud, "PLIMSOLL_CORS_ORIGINS");
    if (v && pl_origins_parse(v, &c.cors_origins, err) < 0)
        return -1;
    /* Who may ask gRPC's health service and server reflection. */
    static const struct {
        const char *name;
        enum pl_open_auth dflt;
        size_t off;
    } auths[] = {
        {"PLIMSOLL_HEALTH", PL_AUTH_OPEN, offsetof(struct pl_config, health)},
        {"PLIMSOLL_REFLECTION", PL_AUTH_KEY, offsetof(struct pl_config, reflection)},
    };
    for (size_t i = 0; i < sizeof(auths) / sizeof(auths[0]); i++) {
        enum pl_open_auth *slot = (enum pl_open_auth *)((char *)&c + auths[i].off);
        *slot = auths[i].dflt;
        v = get(lookup, ud, auths[i].name);
        if (!v)
            continue;
        if (strcmp(v, "open") == 0)
            *slot = PL_AUTH_OPEN;
        else if (strcmp(v, "key") == 0)
            *slot = PL_AUTH_KEY;
        else if (strcmp(v, "off") == 0)
            *slot = PL_AUTH_OFF;
        else
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "%s: \"%.32s\" is none of open, key, off", auths[i].name, v);
    }

    v = get(lookup, ud, "PLIMSOLL_LISTEN");
    if (!v)
        v = "127.0.0.1:7475";
    if (pl_listen_parse(v, &c.listen) < 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "PLIMSOLL_LISTEN: \"%.128s\" is neither host:port nor unix:/path", v);

    v = get(lookup, ud, "PLIMSOLL_KEYS_FILE");
    if (!v)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "PLIMSOLL_KEYS_FILE: required; create one with `plimsoll keygen "
                            "PRINCIPAL`");
    if (strlen(v) >= sizeof(c.keys_file))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "PLIMSOLL_KEYS_FILE: path too long");
    memcpy(c.keys_file, v, strlen(v) + 1);

    v = get(lookup, ud, "PLIMSOLL_GRANTS_FILE");
    if (v && strlen(v) >= sizeof(c.grants_file))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "PLIMSOLL_GRANTS_FILE: path too long");
    if (v)
        memcpy(c.grants_file, v, strlen(v) + 1);

    static const struct {
        const char *name;
        size_t off;
    } paths[] = {
        {"PLIMSOLL_TLS_CERT_FILE", offsetof(struct pl_config, tls_cert_file)},
        {"PLIMSOLL_TLS_KEY_FILE", offsetof(struct pl_config, tls_key_file)},
        {"PLIMSOLL_TLS_CLIENT_CERTS_FILE", offsetof(struct pl_config, tls_client_certs_file)},
    };
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        v = get(lookup, ud, paths[i].name);
        if (!v)
            continue;
        if (!v[0] || strlen(v) >= sizeof(c.tls_cert_file))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: empty or too long a path",
                                paths[i].name);
        memcpy((char *)&c + paths[i].off, v, strlen(v) + 1);
    }
    if (!c.tls_cert_file[0] != !c.tls_key_file[0])
        return pl_error_set(
            err, PL_REASON_INVALID_REQUEST,
            "PLIMSOLL_TLS_CERT_FILE and PLIMSOLL_TLS_KEY_FILE: set both or neither");
    if (c.tls_client_certs_file[0] && !c.tls_cert_file[0])
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "PLIMSOLL_TLS_CLIENT_CERTS_FILE: needs PLIMSOLL_TLS_CERT_FILE and "
                            "PLIMSOLL_TLS_KEY_FILE (client certificates come with TLS)");

    c.lookup = lookup;
    c.lookup_userdata = ud;
    *ret_config = c;
    return 0;
}

unsigned pl_config_effective_concurrency(const struct pl_config *c, bool memory_budget_applies) {
    unsigned n = c->max_concurrent;
    if (memory_budget_applies && c->total_memory_mb > 0 && c->memory_mb > 0) {
        unsigned fit = c->total_memory_mb / c->memory_mb;
        if (fit < n)
            n = fit;
    }
    return n;
}
