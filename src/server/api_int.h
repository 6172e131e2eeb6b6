/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_int.h: what the API's files share and nothing outside them sees.
 *
 * The server package (src/server/), all of it in plimsolld.  The front
 * door, which moves bytes and keeps time:
 *   http.h          the server's start, reload and stop
 *   http_int.h      what front.c and http1.c share
 *   front.c         the listener: accept, the connection caps, each
 *                   connection's opening read (TLS, HTTP/2's preface,
 *                   HTTP/1.1) and its hand-off
 *   http1.c         HTTP/1.1 on libmicrohttpd: the read and send
 *                   deadlines, requests, streaming answers
 *   h2.[ch]         HTTP/2 on libnghttp2, a thread per request
 *   tls.[ch]        TLS on the port (OpenSSL): certificate, ALPN, client
 *                   certificates as principals, SIGHUP's reload
 *
 * The API, which decides (api.h is its face to the front door):
 *   api.h           the HTTP-independent API: the head and body phases
 *   api_int.h       this header
 *   api.c           Describe, routing, the head's ladder (head_ladder[]),
 *                   the head and body phases
 *   api_answer.c    answers: JSON and text bodies, refusals with their
 *                   google.rpc.ErrorInfo, a run's result as JSON
 *   api_run.c       Run, RunInSession and RunCell: the refusal ladder,
 *                   dispatch, the run record; Explain's walk of the ladder
 *   api_sessions.c  OpenSession, CloseSession, ListSessions, GetSession,
 *                   ExtendSession and the outer messages of RunInSession,
 *                   RunCell and Explain
 *   api_grpc.c      gRPC and gRPC-Web over the Connect answers
 *   api_stream.c    RunStream and RunCellStream: output as it comes
 *   api_cors.c      browsers on another origin (PLIMSOLL_CORS_ORIGINS):
 *                   the preflight, the answers' CORS headers
 *   api_mcp.c       the MCP server at /mcp: JSON-RPC, the tools over the
 *                   service's calls, the three channels (docs/mcp.md)
 *   mcp_sessions.[ch] the MCP sessions: ids, owners, floors, bounds
 *   mcp/tools.json  the MCP tools' schemas, compiled in
 *   api_health.c    grpc.health.v1.Health (Check, Watch) and server
 *                   reflection (v1, v1alpha): the head's rung, Check on
 *                   every protocol, the live streams' messages and budgets
 *   reflect.[ch]    the health and reflection messages' wire code, and
 *                   reflection's answers from the descriptors the build
 *                   generates from proto/ (scripts/build/descriptors)
 *   codec.[ch]      Connect's binary codec: protobuf to and from the API's
 *                   JSON, on protobuf-c's descriptors
 *   sessions.[ch]   the session table: ids, owners, turns, idle and
 *                   lifetime, chained records
 *
 * The operator's console (docs/console.md), compiled in:
 *   console.[ch]         the assets and their lookup by path
 *   console/index.html   the page
 *   console/console.js   its script: every call the API's, output as text
 *   console/console.css  its style
 *   console/favicon.svg  its icon
 */
#pragma once

#include "api.h"

/* The daemon's version, as Describe and MCP's serverInfo give it. */
#define PL_VERSION "0.1.0"

/* What the per-request log line says about a call: the call's thread's,
 * its strings borrowed (static, or the request's) until the line is
 * written. */
struct call_log {
    const char *principal;
    const char *method;
    const char *grant_profile; /* the name only; never a credential */
    unsigned broker_calls, broker_refused;
    const char *outcome;
    enum pl_reason reason;
    /* The caller's own deadline (Connect-Timeout-Ms), 0 for none: it can
     * only shorten a run's timeout. */
    unsigned deadline_ms;
    const char *codec; /* "json" or "proto", once the content type is known */
    /* RunStream, RunCellStream: the answer being streamed (dispatch
     * begins it and gives the run its sink); NULL for every other call. */
    struct pl_api_stream *stream;
    /* A preflight's fate (api_cors.c): "granted" or why not; static. */
    const char *cors;
};

/* ---- api_grpc.c ---- */

/* The protocol a call speaks, from its Content-Type. */
enum api_protocol {
    API_UNKNOWN,
    API_CONNECT_JSON,
    API_CONNECT_PROTO,
    API_GRPC,
    API_GRPC_WEB,
    API_CONNECT_STREAM_JSON,  /* application/connect+json: a streaming method */
    API_CONNECT_STREAM_PROTO, /* application/connect+proto */
};
/* API_UNKNOWN for NULL or any other type; parameters after ';' are not
 * looked at. */
enum api_protocol api_protocol_of(const char *content_type);

/* The one message of a gRPC (or gRPC-Web) request body; INVALID_REQUEST
 * when the body is not exactly one uncompressed length-prefixed message.
 * *ret_msg points into body. */
int api_grpc_unwrap(const char *body, size_t len, const char **ret_msg, size_t *ret_len,
                    struct pl_error *err);

/* Connect-Timeout-Ms: 1 to 10 digits, not 0 (Connect's rule), in
 * milliseconds; 0 when past UINT_MAX (it shortens nothing).  -1 when
 * malformed. */
int api_connect_timeout(const char *v, unsigned *ret_ms);

/* grpc-timeout ("100m", "5S", 1 to 8 digits and a unit) in milliseconds,
 * rounded up; 0 when past UINT_MAX.  -1 when malformed. */
int api_grpc_timeout(const char *v, unsigned *ret_ms);

/* Rewrite a Connect answer (a binary message, a Connect error, a text
 * answer of the transport) as gRPC's or gRPC-Web's, in place (rs's old
 * body and headers freed); ctype is the request's content type, echoed
 * when it is one of the protocol's. */
void api_grpc_wrap(enum api_protocol p, const char *ctype, struct pl_api_response *rs);

/* The content type a gRPC or gRPC-Web answer carries: the request's when
 * it is one of the protocol's (ctype itself), else the protocol's +proto
 * form (a static string). */
const char *api_grpc_ctype(enum api_protocol p, const char *ctype);

/* gRPC's status of a Connect answer that is not a success (a Connect
 * error, or a text answer of the transport): the code, and malloc'd
 * grpc-message (percent-encoded) and grpc-status-details-bin values
 * (details NULL when there are none; either NULL when out of memory), the
 * caller's to free. */
void api_grpc_status_of(const struct pl_api_response *rs, unsigned *ret_code, char **ret_message,
                        char **ret_details);

/* ---- api_stream.c ---- */

/* One message in gRPC's and Connect's envelope (the flags byte, the
 * length big-endian, the bytes) appended to b: 0 or -ENOMEM. */
int api_envelope(struct pl_buf *b, unsigned char flags, const void *msg, size_t len);

/* gRPC-Web's trailers as a frame of their own (flags 0x80): grpc-status,
 * and grpc-message and grpc-status-details-bin when given. 0 or -ENOMEM. */
int api_grpcweb_trailers(struct pl_buf *b, unsigned code, const char *message, const char *details);

/* Whether a method (after SERVICE_PREFIX) is server-streaming. */
bool api_method_streams(const char *method);

/* A streaming call's answer, before dispatch; ctype is the request's
 * content type, out is copied; cors_origin, the listed origin its head
 * carries CORS's headers for (api_cors_answer), or NULL.  NULL when out of
 * memory (the call is then answered whole).  The API holds a reference
 * until api_stream_end. */
struct pl_api_stream *api_stream_new(struct pl_api *api, enum api_protocol p, const char *ctype,
                                     const struct pl_api_stream_out *out, const char *cors_origin);

/* At dispatch: the head goes out through the transport's begin, which
 * takes the transport's reference (pl_api_stream_release).  Returns the
 * sink the run's output goes to (any thread; valid while the stream
 * lives), or NULL when the transport cannot stream (the answer then comes
 * whole at the end).  s may be NULL. */
const struct pl_output_sink *api_stream_begin(struct pl_api_stream *s);

/* The call's Connect answer (a RunResponse's JSON, or an error) becomes
 * the stream's end, in the call's protocol: the output not yet taken, the
 * result message, and the end of the stream (Connect's end message,
 * gRPC's trailers, gRPC-Web's trailer frame), written over rs in place.
 * A call that never began is answered whole in the streaming protocol.
 * The API's reference to s is released. */
void api_stream_end(struct pl_api_stream *s, struct pl_api_response *rs);

/* ---- api_cors.c ---- */

/* The entry of PLIMSOLL_CORS_ORIGINS the request's Origin is, byte for
 * byte, or NULL (none listed, no Origin, another one, or more than one).  The string lives
 * as long as the configuration. */
const char *api_cors_origin(const struct pl_api *api, const struct pl_api_request *rq);

/* The head's rung for an Origin given more than once, where
 * PLIMSOLL_CORS_ORIGINS lists any: true when it refused it (INVALID_REQUEST,
 * no CORS header; api_cors_origin is NULL for such a request). */
bool api_cors_repeated(struct pl_api *api, const struct pl_api_request *rq,
                       struct pl_api_response *rs, struct call_log *lg);

/* The head's rung for a preflight (OPTIONS with
 * Access-Control-Request-Method) on a method of the service: true when it
 * answered it, 204 with the grant (listed: api_cors_origin's).  A
 * preflight it does not grant gets no answer here (false): the next rung
 * answers as to any OPTIONS; lg->method is "preflight" and lg->cors says
 * why, for the log. */
bool api_cors_preflight(struct pl_api *api, const struct pl_api_request *rq, const char *listed,
                        struct pl_api_response *rs, struct call_log *lg);

/* An answer to a listed origin (NULL: nothing done): its CORS headers,
 * Access-Control-Allow-Origin, -Expose-Headers and Vary, in rs->cors. */
void api_cors_answer(const char *listed, struct pl_api_response *rs);

/* ---- api_answer.c ---- */

/* Answers into an empty rs.  body: malloc'd, NUL-terminated; rs takes it
 * (NULL, out of memory: the status with no body).  ctype is borrowed,
 * never freed. */
void api_set_body(struct pl_api_response *rs, int status, const char *ctype, char *body);
/* text is copied, as text/plain. */
void api_set_text(struct pl_api_response *rs, int status, const char *text);
/* Takes v's reference; 500 "out of memory" when it cannot be encoded. */
void api_set_json(struct pl_api_response *rs, int status, json_t *v);

/*
 * Answer with err as a Connect error: its code, HTTP status and message,
 * and an ErrorInfo with the reason, "dispatched" and "isolation" (and
 * "ended_reason" when ended_reason is non-NULL, for SESSION_ENDED).  The
 * refusal is counted and the log line gets its outcome.  rs must be empty;
 * a reason of NONE is sent as INTERNAL.
 */
void api_refuse(struct pl_api *api, struct pl_api_response *rs, struct call_log *lg,
                const struct pl_error *err, const char *ended_reason);
/* That answer's body alone, a new reference (NULL on OOM), and its HTTP
 * status into *ret_status (may be NULL); nothing is counted (Explain's
 * ticket quotes it). */
json_t *api_error_body(const struct pl_api *api, const struct pl_error *err,
                       const char *ended_reason, int *ret_status);

/* A run's result as the RunResponse JSON (without its record): a new
 * reference, NULL when out of memory.  Output that is not UTF-8 also goes
 * as <name>_base64. */
json_t *api_result_json(const struct pl_run_result *r, enum pl_tier tier, uint32_t dur_ms);

/* A file call's answer (WriteFilesResponse, ReadFileResponse,
 * ListFilesResponse) without its record: a new reference, NULL when out
 * of memory. */
json_t *api_files_json(const struct pl_run_request *req, const struct pl_run_result *r);

/* ---- api_run.c ---- */

/*
 * Run, RunInSession, RunCell and the session's file calls share one path.
 * inner says what body is: PL_PAYLOAD_NONE a RunRequest, PL_PAYLOAD_CELL
 * the RunRequest built from a cell and its timeout, a file kind the file
 * call's message without session_id; session_id is NULL for Run.  The ladder, then the provider's
 * run on the calling thread; rs gets the result or the refusal (api_refuse), lg what the line says.
 */
void api_run_request(struct pl_api *api, const char *principal, const char *body, size_t body_len,
                     const char *session_id, enum pl_payload_kind inner, struct pl_api_response *rs,
                     struct call_log *lg);

/*
 * Explain: the same path up the refusal ladder with nothing taken (no
 * slot, no turn, no credential, no sandbox), answering every rung it met
 * in order with what it compared and, at a refusal, the exact error the
 * call would get; the caller spent one rate token first.
 */
void api_run_explain(struct pl_api *api, const char *principal, const char *body, size_t body_len,
                     const char *session_id, enum pl_payload_kind inner, struct pl_api_response *rs,
                     struct call_log *lg);

/* ---- api_sessions.c ---- */

/* The session methods, NULL-terminated: OpenSession, RunInSession,
 * RunCell, CloseSession, RunCellStream, ListSessions, GetSession,
 * ExtendSession.  api_handle_session_call answers
 * one of them (method) into rs, a refusal through api_refuse. */
extern const char *const api_session_methods[];
void api_handle_session_call(struct pl_api *api, const char *principal, const char *method,
                             const struct pl_api_request *rq, struct pl_api_response *rs,
                             struct call_log *lg);
/* Explain: its ExplainRequest (run or cell, and a session_id for the
 * session variants), one rate token spent, then api_run_explain. */
void api_handle_explain(struct pl_api *api, const char *principal, const struct pl_api_request *rq,
                        struct pl_api_response *rs, struct call_log *lg);

/* The gRPC services that answer from the daemon's own state. */
enum api_svc {
    API_SVC_NONE,
    API_SVC_HEALTH_CHECK,
    API_SVC_HEALTH_WATCH,
    API_SVC_REFLECTION, /* v1 and v1alpha */
    API_SVC_MCP,        /* /mcp (api_mcp.c) */
};

/* What the head decided, carried to the body phase. */
struct pl_api_call {
    struct call_log lg;
    const char *method;         /* "Run", "Describe" or a session method */
    size_t held;                /* body bytes held against the bytes in flight */
    enum api_protocol protocol; /* from the Content-Type (api_grpc.c) */
    const char *cors_origin;    /* a service path's listed Origin (api_cors.c), or NULL */
    enum api_svc svc;           /* health or reflection, else NONE */
    bool slot;                  /* a Watch's or reflection stream's slot is held */
    uint64_t t0;                /* when the head came */
};

/* ---- api_health.c ---- */

/*
 * The head's rung for grpc.health.v1.Health and the reflection services:
 * true when rs holds the answer (off, 405, 415, the key, a stream's slot
 * refused AT_CAPACITY); false with call->svc NONE for any other path, or
 * set for a call the ladder's rest (Check: the deadline headers and the
 * body's bytes) or the transport (a live stream, its slot held) takes on.
 */
bool api_svc_head(struct pl_api *api, const struct pl_api_request *rq, struct pl_api_call *call,
                  struct pl_api_response *rs);
/* Check's body phase, every protocol but gRPC's envelope unwrapped here
 * too: the Connect answer (application/proto or JSON) or the refusal. */
void api_svc_check(struct pl_api *api, struct pl_api_call *call, const struct pl_api_request *rq,
                   struct pl_api_response *rs);
/* Whether a refusal at the head (rs, a Connect error) of a Watch or
 * reflection stream in Connect's streaming protocol is sent as Connect's
 * end message alone (api_stream_end), as the protocol has it. */
bool api_svc_connect_end(const struct pl_api_call *call, const struct pl_api_response *rs);
/* Give back a live call's slot (pl_api_call_free). */
void api_svc_release(struct pl_api *api, struct pl_api_call *call);

/* ---- api.c ---- */

/* The principal a request's key or client certificate names, or NULL. */
const char *api_authenticate(struct pl_api *api, const struct pl_api_request *rq);

/* Count the call, and log its line (a probe that succeeded is not logged);
 * t0 when it began. */
void api_log_call(struct pl_api *api, const struct pl_api_request *rq, struct pl_api_response *rs,
                  const struct call_log *lg, uint64_t t0);

/* ---- api_mcp.c ---- */

/* The head's rung for /mcp (PLIMSOLL_MCP on): Origin and Host (403), the
 * method (405; DELETE ends the MCP session here), content type (415),
 * Accept (406), the key (401), MCP-Protocol-Version (400).  True when rs
 * holds the answer; false with call->svc API_SVC_MCP for a POST whose
 * body the ladder's last rungs (its size, the bytes in flight) admit. */
bool api_mcp_head(struct pl_api *api, const struct pl_api_request *rq, struct pl_api_call *call,
                  struct pl_api_response *rs);
/* A POST's body: one JSON-RPC message, answered into rs. */
void api_mcp_body(struct pl_api *api, struct pl_api_call *call, const struct pl_api_request *rq,
                  struct pl_api_response *rs);
/* A refusal of the generic rungs (a Connect error, a text answer) as a
 * JSON-RPC error of the same HTTP status, in place; any other answer is
 * left as it is. */
void api_mcp_wrap(struct pl_api_response *rs);
