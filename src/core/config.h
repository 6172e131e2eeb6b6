/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h: the daemon's settings, read once at startup from the
 * environment, validated, and frozen.  docs/configuration.md lists every
 * setting with its meaning, default and bounds; this file is the code of
 * that page.
 *
 * Loading never reads the environment itself: the caller passes a lookup function,
 * so tests (and the fuzz harness) feed settings without touching the
 * process environment.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "origin.h"
#include "tier.h"

/* Hard limits of the request language (not settings: part of the API). */
#define PL_SNIPPET_MAX_BYTES (256u * 1024u)  /* snippet.code */
#define PL_STDIN_MAX_BYTES (1024u * 1024u)   /* snippet/module stdin */
#define PL_PROJECT_MAX_FILES 256u            /* project.files */
#define PL_PROJECT_MAX_FILE_BYTES (4u << 20) /* all files' decoded bytes */
#define PL_PATH_MAX_BYTES 256u               /* one file path */
#define PL_PROJECT_MAX_STEPS 32u             /* project.steps */
#define PL_ARGV_MAX 64u                      /* argv / args entries */
#define PL_ARG_MAX_BYTES 4096u               /* one argv entry */
#define PL_NAME_MAX_BYTES 128u               /* step name, profile name */
#define PL_MODULE_MAX_BYTES (8u << 20)       /* decoded module.wasm */
#define PL_FILES_MAX_DEPTH 16u               /* ListFiles.depth */
#define PL_COLLECT_MAX_GLOBS 16u             /* project.collect, snippet.collect */

enum pl_listen_kind { PL_LISTEN_TCP, PL_LISTEN_UNIX };

struct pl_listen {
    enum pl_listen_kind kind;
    char host[128]; /* TCP: literal address or "localhost" */
    unsigned port;  /* TCP: 0 picks a free port */
    char path[108]; /* UNIX: socket path */
};

/* Who may call a service that answers from the daemon's own state
 * (PLIMSOLL_HEALTH, PLIMSOLL_REFLECTION): anyone, a key's holder, nobody. */
enum pl_open_auth { PL_AUTH_OPEN, PL_AUTH_KEY, PL_AUTH_OFF };

struct pl_config {
    char provider[32];          /* SANDBOX_PROVIDER; "disabled" when unset */
    enum pl_tier min_isolation; /* SANDBOX_MIN_ISOLATION */

    unsigned max_concurrent;     /* SANDBOX_MAX_CONCURRENT */
    unsigned memory_mb;          /* SANDBOX_MEMORY_MB: per-run allowance */
    unsigned total_memory_mb;    /* SANDBOX_TOTAL_MEMORY_MB; 0 = no budget */
    unsigned per_key_concurrent; /* SANDBOX_PER_KEY_CONCURRENT */
    unsigned rate_per_min;       /* SANDBOX_RATE_PER_MIN */
    unsigned rate_burst;         /* SANDBOX_RATE_BURST */

    unsigned default_timeout_ms; /* SANDBOX_TIMEOUT_MS */
    unsigned max_timeout_ms;     /* SANDBOX_MAX_TIMEOUT_MS */
    unsigned output_bytes;       /* SANDBOX_OUTPUT_BYTES, per stream */

    struct pl_listen listen;          /* PLIMSOLL_LISTEN */
    char keys_file[4096];             /* PLIMSOLL_KEYS_FILE */
    char grants_file[4096];           /* PLIMSOLL_GRANTS_FILE; "" when none */
    char tls_cert_file[4096];         /* PLIMSOLL_TLS_CERT_FILE; "" = plain HTTP */
    char tls_key_file[4096];          /* PLIMSOLL_TLS_KEY_FILE */
    char tls_client_certs_file[4096]; /* PLIMSOLL_TLS_CLIENT_CERTS_FILE; "" = none asked */
    unsigned max_request_bytes;       /* PLIMSOLL_MAX_REQUEST_BYTES: one body */
    unsigned request_bytes_in_flight; /* PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT: every body held */
    unsigned key_request_bytes_in_flight; /* PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT: one key's */
    unsigned
        request_read_timeout_ms;     /* PLIMSOLL_REQUEST_READ_TIMEOUT_MS: head and body, absolute */
    unsigned answer_send_timeout_ms; /* PLIMSOLL_ANSWER_SEND_TIMEOUT_MS: an answer's, absolute */
    unsigned max_connections;        /* PLIMSOLL_MAX_CONNECTIONS */
    unsigned max_connections_per_address; /* PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS */
    unsigned drain_timeout_ms;            /* PLIMSOLL_DRAIN_TIMEOUT_MS */
    unsigned drain_notice_ms; /* PLIMSOLL_DRAIN_NOTICE_MS: not ready, still serving, first */
    /* PLIMSOLL_INSTANCE: this daemon's name in a fleet, its sessions' route
     * ([A-Za-z0-9._-], 1..63; the host's name by default). */
    char instance[64];
    bool console;                   /* PLIMSOLL_CONSOLE: the page at / (on) */
    struct pl_origins cors_origins; /* PLIMSOLL_CORS_ORIGINS; none: no CORS */
    enum pl_open_auth health;       /* PLIMSOLL_HEALTH: grpc.health.v1.Health (open) */
    enum pl_open_auth reflection;   /* PLIMSOLL_REFLECTION: server reflection (key) */
    unsigned health_watch_streams;  /* PLIMSOLL_HEALTH_WATCH_STREAMS: all at once */
    unsigned health_watch_streams_per_connection; /* ..._PER_CONNECTION */
    unsigned health_watch_timeout_ms;  /* PLIMSOLL_HEALTH_WATCH_TIMEOUT_MS: a Watch's, absolute */
    unsigned reflection_streams;       /* PLIMSOLL_REFLECTION_STREAMS: all at once */
    unsigned reflection_message_bytes; /* PLIMSOLL_REFLECTION_MESSAGE_BYTES: one request */
    unsigned reflection_messages;      /* PLIMSOLL_REFLECTION_MESSAGES: one stream's requests */
    unsigned reflection_timeout_ms;    /* PLIMSOLL_REFLECTION_TIMEOUT_MS: a stream's, absolute */
    /* The MCP server at /mcp (docs/mcp.md). */
    bool mcp;                       /* PLIMSOLL_MCP (on) */
    enum pl_tier mcp_min_isolation; /* PLIMSOLL_MCP_MINIMUM_ISOLATION: every MCP session's floor */
    unsigned mcp_sessions;          /* PLIMSOLL_MCP_SESSIONS: held at once */
    unsigned mcp_sessions_per_key;  /* PLIMSOLL_MCP_SESSIONS_PER_KEY: one caller's */
    unsigned mcp_session_idle_ms;   /* PLIMSOLL_MCP_SESSION_IDLE_MS: ended past it unused */
    unsigned mcp_session_lifetime_ms; /* PLIMSOLL_MCP_SESSION_LIFETIME_MS: from open, absolute */
    unsigned mcp_calls_per_session;   /* PLIMSOLL_MCP_CALLS_PER_SESSION: tools/call at once */
    unsigned mcp_output_bytes;        /* PLIMSOLL_MCP_OUTPUT_BYTES: each text a tool gives back */

    unsigned max_sessions;       /* SANDBOX_MAX_SESSIONS; 0 = sessions off */
    unsigned session_disk_mb;    /* SANDBOX_SESSION_DISK_MB: the work directory's size */
    unsigned session_lifetime_s; /* SANDBOX_SESSION_LIFETIME, seconds */
    unsigned session_idle_s;     /* SANDBOX_SESSION_IDLE, seconds: paused past it */
    /* SANDBOX_SESSION_MAX_LIFETIME, seconds from open: the most ExtendSession
     * may give (default 86400, or SANDBOX_SESSION_LIFETIME when higher) */
    unsigned session_max_lifetime_s;
    unsigned file_read_bytes;      /* SANDBOX_FILE_READ_BYTES: one ReadFile's most */
    unsigned file_list_entries;    /* SANDBOX_FILE_LIST_ENTRIES: one ListFiles' most */
    unsigned collect_files;        /* SANDBOX_COLLECT_FILES: one run's most artifacts */
    unsigned collect_bytes;        /* SANDBOX_COLLECT_BYTES: their bytes in all */
    unsigned display_outputs;      /* SANDBOX_DISPLAY_OUTPUTS: one cell's most outputs */
    unsigned display_output_bytes; /* SANDBOX_DISPLAY_OUTPUT_BYTES: one output's most */
    unsigned display_bytes;        /* SANDBOX_DISPLAY_BYTES: one cell's outputs in all */
    unsigned session_pool;         /* SANDBOX_SESSION_POOL: waiting session sandboxes */

    /* The lookup the settings came from, for a provider's own settings. */
    const char *(*lookup)(const char *name, void *userdata);
    void *lookup_userdata;
};

/* Returns the value of a setting, or NULL when it is unset. */
typedef const char *(*pl_env_lookup_fn)(const char *name, void *userdata);

/*
 * Read and validate every setting.  On failure returns < 0 and err's
 * message starts with the name of the setting at fault.  Provider-specific
 * checks (the tier against SANDBOX_MIN_ISOLATION) happen in the registry.
 */
/* A route key (PLIMSOLL_INSTANCE, a Plimsoll-Route header): 1 to 63 of
 * [A-Za-z0-9._-]. */
bool pl_route_valid(const char *s);

int pl_config_load(struct pl_config *ret_config, pl_env_lookup_fn lookup, void *userdata,
                   struct pl_error *err);

/*
 * Runs that may be in progress at once: the run-count cap, or the number of
 * per-run allowances that fit in the total budget, whichever is smaller.
 * When memory_budget_applies is false (the provider's sandboxes live on other
 * machines) only the count applies.
 */
unsigned pl_config_effective_concurrency(const struct pl_config *config,
                                         bool memory_budget_applies);

/* Parse PLIMSOLL_LISTEN's syntax; returns < 0 on malformed input. */
int pl_listen_parse(const char *s, struct pl_listen *ret_listen);

/* Settings later issues own; refused at startup while unsupported. */
extern const char *const pl_config_reserved_settings[];
