/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.h: the HTTP-independent API layer.
 *
 * The HTTP server (front.c, http1.c, h2.c) hands over a parsed request and sends back the
 * response this layer fills; everything plimsoll decides about a call
 * (authentication, routing, the refusal order, admission, dispatch, the
 * run record, metrics and the per-request log line) happens here.
 *
 * A call is decided in two phases: the head (pl_api_begin), before the
 * server reads a body byte, and the body (pl_api_finish).
 *
 * The refusal order for Run, each decided before dispatch:
 *   (head) NOT_FOUND -> 405 -> 415 -> UNAUTHENTICATED -> INVALID_REQUEST
 *   (a body over PLIMSOLL_MAX_REQUEST_BYTES) -> AT_CAPACITY (the bodies in
 *   flight, all and the caller's); (body) INVALID_REQUEST (including an unknown grant_profile)
 *   -> DISABLED -> INSUFFICIENT_ISOLATION -> UNSUPPORTED (including a grant
 *   on a kind the provider cannot broker) -> CALLER_NOT_ALLOWED -> NOT_READY
 *   -> (SHUTTING_DOWN | RATE_LIMITED | AT_CAPACITY) -> the grant's
 *   credential is obtained -> dispatch.
 */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../broker/grants.h"
#include "../core/admission.h"
#include "../core/buf.h"
#include "../core/config.h"
#include "../core/keys.h"
#include "../core/metrics.h"
#include "../providers/provider.h"
#include "sessions.h"

struct pl_key_bytes;    /* api.c */
struct pl_api_stream;   /* api_stream.c */
struct pl_mcp_sessions; /* mcp_sessions.h */
struct pl_api_response;

/*
 * What a transport offers a call that may stream (RunStream,
 * RunCellStream; pl_api_call_streams).  When the call is dispatched the
 * API calls begin, once, on the call's thread, with the answer's head
 * (status 200, content type, headers): the transport sends the head and
 * from then on takes the body's bytes with pl_api_stream_take whenever
 * notify is called (from any thread; it must not block), until
 * pl_api_finish returns the rest of the body (rs->streamed) to send after
 * everything taken.  A call refused before dispatch never begins: its
 * answer comes whole from pl_api_finish.
 */
struct pl_api_stream_out {
    int (*begin)(void *ud, struct pl_api_stream *s, const struct pl_api_response *head);
    void (*notify)(void *ud);
    void *ud;
};

struct pl_api {
    const struct pl_config *config;
    struct pl_keys *keys;
    const struct pl_grants *grants; /* NULL when PLIMSOLL_GRANTS_FILE is unset */
    pl_grants_env_fn env;           /* where shared tokens and HS256 keys are read */
    void *env_userdata;
    struct pl_provider *provider;
    struct pl_admission *admission;
    struct pl_metrics *metrics;
    struct pl_sessions *sessions;         /* NULL when sessions are off */
    struct pl_mcp_sessions *mcp_sessions; /* /mcp's (api_mcp.c) */
    unsigned effective_concurrency;
    atomic_bool draining;
    /* PLIMSOLL_DRAIN_NOTICE_MS after SIGTERM: /readyz and gRPC health say
     * not ready while calls are still served, so that a fleet's proxy
     * stops sending new work before the drain refuses it. */
    atomic_bool leaving;
    atomic_size_t body_bytes;       /* request bodies held now, every caller's */
    struct pl_key_bytes *key_bytes; /* each caller's share of them; NULL when none */
    atomic_uint watch_streams;      /* grpc.health.v1.Health/Watch streams open */
    atomic_uint reflection_streams; /* server reflection streams open */
    /* Readiness as Watch streams read it (api_health.c): polled at most
     * once a PL_HEALTH_POLL_MS for all of them. */
    uint64_t health_at_ns;
    int health_status;
};

struct pl_api_request {
    const char *http_method;          /* "GET", "POST", ... */
    const char *path;                 /* URL path, no query */
    const char *content_type;         /* may be NULL */
    const char *authorization;        /* may be NULL */
    const char *connect_timeout;      /* Connect-Timeout-Ms, may be NULL */
    const char *grpc_timeout;         /* grpc-timeout, may be NULL */
    const char *origin;               /* Origin, may be NULL (api_cors.c) */
    const char *cors_method;          /* Access-Control-Request-Method, may be NULL */
    const char *cors_headers;         /* Access-Control-Request-Headers, may be NULL */
    bool origin_repeated;             /* Origin came more than once (api_cors.c refuses it) */
    const char *connect_version;      /* Connect-Protocol-Version, may be NULL */
    const char *host;                 /* Host (HTTP/2: :authority), may be NULL */
    const char *accept;               /* Accept, may be NULL */
    const char *mcp_session_id;       /* Mcp-Session-Id, may be NULL (api_mcp.c) */
    const char *mcp_protocol_version; /* MCP-Protocol-Version, may be NULL */
    const char *mcp_floor;            /* Plimsoll-Minimum-Isolation, may be NULL */
    const char *route;                /* Plimsoll-Route, may be NULL (a fleet's, docs/deploy.md) */
    bool http2;                       /* over HTTP/2 (gRPC needs it) */
    const char *tls_principal;        /* the TLS client certificate's, or NULL */
    bool length_known;                /* the head announced the body's length (Content-Length) */
    uint64_t content_length;          /* that length; a chunked body's is unknown until read */
    size_t head_bytes; /* what the transport keeps of the head while the body is read (HTTP/2's
                          stream: its headers' values), held with the body's bytes */
    const char *body;  /* the body phase only */
    size_t body_len;
    bool body_too_large;                    /* the server stopped reading at the limit */
    const struct pl_api_stream_out *stream; /* NULL: the transport cannot stream */
    unsigned conn_watches;                  /* Watch streams open on this connection (HTTP/2's) */
};

/* A header of an answer beyond its content type: gRPC's status. */
struct pl_api_header {
    const char *name; /* static */
    char *value;      /* malloc'd */
};
#define PL_API_MAX_HEADERS 3

/* A header whose name and value outlive the answer (static, or the
 * configuration's): CORS's (api_cors.c), never freed. */
struct pl_api_fixed_header {
    const char *name;
    const char *value;
};
#define PL_API_MAX_CORS_HEADERS 5

struct pl_api_response {
    int status;
    const char *content_type;
    char *body; /* malloc'd */
    size_t body_len;
    const char *allow;                                /* Allow header for 405, else NULL */
    struct pl_api_header headers[PL_API_MAX_HEADERS]; /* with the answer's head */
    unsigned nheaders;
    struct pl_api_header trailers[PL_API_MAX_HEADERS]; /* after its body (HTTP/2) */
    unsigned ntrailers;
    /* CORS's headers, on an answer to a listed origin (PLIMSOLL_CORS_ORIGINS)
     * and on a streaming answer's head too. */
    struct pl_api_fixed_header cors[PL_API_MAX_CORS_HEADERS];
    unsigned ncors;
    /* The head went out through pl_api_stream_out.begin: body is the rest
     * (after every byte pl_api_stream_take gave), status and content type
     * are the head's again. */
    bool streamed;
};

/* What the head phase decided about a call that needs its body. */
struct pl_api_call;

/*
 * The head phase, before any body byte is read: route (404), method (405),
 * content type (415), authentication (401), the announced length against
 * PLIMSOLL_MAX_REQUEST_BYTES (400 INVALID_REQUEST), then the body's bytes
 * held against PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT and the caller's against
 * PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT (429 AT_CAPACITY).
 * rq's body fields are not looked at.
 *
 * Returns true when ret holds the answer (send it and read no body); the
 * call is logged and counted.  Returns false when the call needs its body:
 * *ret_call then holds what the head decided, to pass to pl_api_finish once
 * the body is read and to pl_api_call_free after the answer is sent.
 */
bool pl_api_begin(struct pl_api *api, const struct pl_api_request *rq,
                  struct pl_api_call **ret_call, struct pl_api_response *ret);

/* The body phase: rq carries the body (or body_too_large).  Always fills
 * ret; logs and counts the call. */
void pl_api_finish(struct pl_api *api, struct pl_api_call *call, const struct pl_api_request *rq,
                   struct pl_api_response *ret);

/* Whether the call may stream its answer (a server-streaming method): its
 * transport then runs pl_api_finish where the answer can be sent while it
 * runs, and sets pl_api_request.stream. */
bool pl_api_call_streams(const struct pl_api_call *call);

/* The bytes of a streaming answer ready now, appended to out (nothing
 * when none); never blocks.  0 or -ENOMEM. */
int pl_api_stream_take(struct pl_api_stream *s, struct pl_buf *out);

/* The transport is done with s: everything sent, or the caller left
 * (output from then on is dropped; the run goes on to its end). */
void pl_api_stream_release(struct pl_api_stream *s);

/* The call's answer is made and waits to be sent: the bytes it holds
 * against PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT and the caller's share
 * become the answer's size when that is larger (the body's are no longer
 * needed).  Charged past the bounds if need be (the run happened): the
 * caller's next bodies are then refused AT_CAPACITY at the head until its
 * answers are sent or reset (PLIMSOLL_ANSWER_SEND_TIMEOUT_MS).  NULL-safe. */
void pl_api_call_hold_answer(struct pl_api *api, struct pl_api_call *call, size_t answer_bytes);

/*
 * A live call: gRPC's health Watch and server reflection, answered from
 * the daemon's own state message by message as the request's arrive, on
 * the connection's thread (no worker; nothing blocks).  The head phase
 * decided it (pl_api_begin returned false) and took its stream's slot;
 * the transport then opens it, sends the head it gives, feeds it the
 * request's DATA as it comes, polls it by the time it asks, and sends
 * out's bytes as the peer takes them.  When a call returns 1 the call has
 * ended: end's trailers (gRPC's; gRPC-Web's and Connect's end is the last
 * of out) follow what out holds.  Each holds what the peer
 * sent of one message at most (PLIMSOLL_REFLECTION_MESSAGE_BYTES), and a
 * peer that leaves more than PL_API_LIVE_PENDING_BYTES of answers untaken
 * when it sends the next request is ended.
 */
#define PL_API_LIVE_PENDING_BYTES (1u << 20)
struct pl_api_live;
bool pl_api_call_live(const struct pl_api_call *call);
/* NULL when out of memory (the transport resets the stream).  head gets
 * the answer's head (status, content type). */
struct pl_api_live *pl_api_live_open(struct pl_api *api, struct pl_api_call *call,
                                     const struct pl_api_request *rq, struct pl_api_response *head);
/* Request bytes; pending: the answer bytes still waiting for the peer
 * when the call is made (out may hold them: only what the call adds to it
 * counts on top).
 * 0 to go on, 1 ended (end's trailers filled). */
int pl_api_live_feed(struct pl_api_live *l, const void *data, size_t len, size_t pending,
                     struct pl_buf *out, struct pl_api_response *end);
/* The peer ended its side (END_STREAM).  0 or 1, as feed. */
int pl_api_live_half_close(struct pl_api_live *l, struct pl_buf *out, struct pl_api_response *end);
/* The time has come (or any time): a Watch's change, the deadline.  0 or
 * 1, as feed; *ret_next_ns the monotonic time to poll again. */
int pl_api_live_poll(struct pl_api_live *l, uint64_t now_ns, struct pl_buf *out,
                     struct pl_api_response *end, uint64_t *ret_next_ns);
/* Whether l is a Watch (the transport counts those per connection). */
bool pl_api_live_is_watch(const struct pl_api_live *l);
/* The stream is gone: logged, freed.  The call stays the transport's
 * (pl_api_call_free gives back its slot).  NULL-safe. */
void pl_api_live_free(struct pl_api_live *l);

/* Give back the call's body bytes and free it.  NULL-safe. */
void pl_api_call_free(struct pl_api *api, struct pl_api_call *call);

/*
 * Both phases at once, for a request whose body is already at hand (its
 * length counts as announced unless rq says otherwise).  Always fills ret
 * (status 500 on internal failure).
 */
void pl_api_handle(struct pl_api *api, const struct pl_api_request *rq,
                   struct pl_api_response *ret);

void pl_api_response_clear(struct pl_api_response *rs);

/* The Describe answer (also logged once at startup). */
json_t *pl_api_describe(struct pl_api *api);

/* Encode google.rpc.ErrorInfo as protobuf bytes (exposed for tests). */
int pl_error_info_encode(const char *reason, const char *domain, const char *const *meta_keys,
                         const char *const *meta_values, size_t nmeta, unsigned char **ret,
                         size_t *ret_len);
