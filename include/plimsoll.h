/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plimsoll.h: libplimsoll, the C client of plimsolld.
 *
 * A client sends Connect unary calls (JSON over HTTP/1.1, or a Unix
 * socket), and server-streaming ones for live output (RunStream,
 * RunCellStream), and checks what the daemon says instead of trusting it:
 *
 *   - a refusal becomes a typed error (enum plimsoll_errkind) that says
 *     whether anything was dispatched;
 *   - a guest's non-zero exit is a result, never an error;
 *   - with a floor set, an answer whose isolation is below it is
 *     PLIMSOLL_E_ISOLATION_EVIDENCE_MISMATCH (never retried);
 *   - every run record is checked against what was sent and what came
 *     back, and a session's records must form an unbroken chain
 *     (PLIMSOLL_E_CHAIN).
 *
 * The contract shared by the four official clients is docs/clients.md.
 * Messages are jansson values with the proto field names
 * (proto/plimsoll/v1/sandbox.proto); answers are returned as new
 * references the caller json_decref()s.
 *
 * An answer's strings may hold NUL characters (a guest's output can):
 * read their bytes with json_string_value() and json_string_length(),
 * never as C strings (fwrite(s, 1, json_string_length(v), f), not
 * fputs).  What the library reads is bounded: at most max_answer_bytes
 * of body, JSON nested at most PLIMSOLL_MAX_ANSWER_DEPTH deep, integers
 * of at most PLIMSOLL_MAX_ANSWER_INTEGER, the known members of their
 * types; any other answer is PLIMSOLL_E_PROTOCOL.
 *
 * Functions returning int give 0 on success and -1 on failure, with *err
 * filled when err is not NULL.  A client is not thread-safe: use one per
 * thread (they are cheap).
 *
 *   plimsoll_client *c = plimsoll_client_new(&(struct plimsoll_options){
 *       .url = "http://127.0.0.1:7475", .api_key = key}, &err);
 *   json_t *res = NULL;
 *   if (plimsoll_run_snippet(c, "javascript", "console.log(6*7)", NULL, &res, &err) == 0)
 *       printf("%s", json_string_value(json_object_get(res, "stdout")));
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLIMSOLL_API __attribute__((visibility("default")))

/* The default cap on one answer's body, the same in every official client. */
#define PLIMSOLL_DEFAULT_MAX_ANSWER_BYTES ((size_t)256 << 20)
/* Objects and arrays nested in an answer, the answer itself counting 1. */
#define PLIMSOLL_MAX_ANSWER_DEPTH 64
/* The largest magnitude of a number in an answer: 2^53 - 1. */
#define PLIMSOLL_MAX_ANSWER_INTEGER 9007199254740991LL
/* The longest message (envelope) of a stream the client reads, the result
 * included; a longer one is refused from its header.  Each step's stdout
 * and stderr, joined, are bounded by it too (a result could not hold more). */
#define PLIMSOLL_MAX_STREAM_MESSAGE ((size_t)16 << 20)

enum plimsoll_errkind {
    PLIMSOLL_OK = 0,
    /* typed refusals: nothing ran (dispatched false) */
    PLIMSOLL_E_INVALID_REQUEST,
    PLIMSOLL_E_UNAUTHENTICATED,
    PLIMSOLL_E_DISABLED,
    PLIMSOLL_E_INSUFFICIENT_ISOLATION,
    PLIMSOLL_E_UNSUPPORTED,
    PLIMSOLL_E_CALLER_NOT_ALLOWED,
    PLIMSOLL_E_NOT_READY,
    PLIMSOLL_E_SHUTTING_DOWN,
    PLIMSOLL_E_RATE_LIMITED,
    PLIMSOLL_E_AT_CAPACITY,
    PLIMSOLL_E_SESSION_ENDED,
    PLIMSOLL_E_NOT_FOUND,
    PLIMSOLL_E_REFUSED, /* a reason this library does not know */
    /* INTERNAL from the daemon, a transport failure, the timeout (code
     * "deadline_exceeded"); see also PLIMSOLL_E_PROTOCOL */
    PLIMSOLL_E_INFRASTRUCTURE,
    /* the answer's isolation is below the floor the request set */
    PLIMSOLL_E_ISOLATION_EVIDENCE_MISMATCH,
    /* a record does not check, or does not follow the previous one */
    PLIMSOLL_E_CHAIN,
    /* the caller's own arguments are wrong; nothing was sent */
    PLIMSOLL_E_USAGE,
    /* infrastructure too (dispatched: the code may have run), code
     * "unknown": an answer the protocol does not allow.  Longer than
     * max_answer_bytes, a 200 that is not application/json, not JSON in
     * UTF-8 or not an object, nested past PLIMSOLL_MAX_ANSWER_DEPTH, a
     * member twice, a number that is not an integer of at most
     * PLIMSOLL_MAX_ANSWER_INTEGER, a known member of the wrong type, an
     * error answer that is not a Connect error (docs/clients.md) */
    PLIMSOLL_E_PROTOCOL,
    /* a typed refusal too (nothing ran), added after the others so that
     * their values stay: the call named another daemon's route (a
     * session's, sent as Plimsoll-Route), so the session's daemon was not
     * reached; behind a proxy, that daemon is gone or draining */
    PLIMSOLL_E_WRONG_ROUTE,
};

struct plimsoll_error {
    enum plimsoll_errkind kind;
    char reason[40]; /* "AT_CAPACITY"; "" for client-side kinds */
    char code[32];   /* Connect code; "data_loss" for a mismatch */
    char message[512];
    bool dispatched;        /* false: nothing ran; true: the code may have run */
    int http_status;        /* 0 when there was no HTTP answer */
    char isolation[16];     /* ErrorInfo metadata "isolation": the daemon's tier */
    char ended_reason[256]; /* PLIMSOLL_E_SESSION_ENDED: why it ended */
    char broken[24];        /* PLIMSOLL_E_CHAIN: the check that failed */
    long index;             /* PLIMSOLL_E_CHAIN in plimsoll_verify_chain: the entry */
};

struct plimsoll_retry {
    int max_attempts; /* attempts in all; 0 or 1: no retry */
    long base_ms;     /* 0: 100 */
    long cap_ms;      /* 0: 2000 */
};

struct plimsoll_options {
    const char *url;     /* http://host:port or unix:/path; NULL: http://127.0.0.1:7475 */
    const char *api_key; /* bearer key; NULL: none */
    /* the whole HTTP exchange, reading and decoding the answer included,
     * however slowly it comes; 0: 120000 */
    long timeout_ms;
    struct plimsoll_retry retry; /* AT_CAPACITY and RATE_LIMITED only */
    bool skip_record_checks;     /* not recommended */
    size_t max_answer_bytes;     /* one answer's body; 0: PLIMSOLL_DEFAULT_MAX_ANSWER_BYTES */
};

/* Options of one run; every field may be left zero. */
struct plimsoll_run_options {
    const char *minimum_isolation; /* none process container kernel vm */
    const char *grant_profile;
    unsigned timeout_ms;
    unsigned memory_mb;
    const char *stdin_data; /* snippets and modules */
};

typedef struct plimsoll_client plimsoll_client;
typedef struct plimsoll_session plimsoll_session;
typedef struct plimsoll_chain plimsoll_chain;

/* "INVALID_REQUEST", …, "ISOLATION_EVIDENCE_MISMATCH", "CHAIN", "USAGE", "PROTOCOL",
 * "WRONG_ROUTE". */
PLIMSOLL_API const char *plimsoll_errkind_name(enum plimsoll_errkind kind);
/* Whether the library's retry policy may retry this kind. */
PLIMSOLL_API bool plimsoll_errkind_retryable(enum plimsoll_errkind kind);

PLIMSOLL_API plimsoll_client *plimsoll_client_new(const struct plimsoll_options *opts,
                                                  struct plimsoll_error *err);
/* plimsoll_client_new, with what opts leaves NULL or empty taken from the
 * environment: the URL from PLIMSOLL_URL; the key from PLIMSOLL_KEY, or
 * else the first line of the file PLIMSOLL_KEY_FILE names, trimmed of
 * surrounding whitespace.  A key file that cannot be read is
 * PLIMSOLL_E_USAGE naming the path and the reason; no message holds a key.
 * opts may be NULL. */
PLIMSOLL_API plimsoll_client *plimsoll_client_from_env(const struct plimsoll_options *opts,
                                                       struct plimsoll_error *err);
PLIMSOLL_API void plimsoll_client_free(plimsoll_client *c);

/* ---- calls ---------------------------------------------------------------- */

PLIMSOLL_API int plimsoll_describe(plimsoll_client *c, json_t **ret, struct plimsoll_error *err);
/* Run a RunRequest (borrowed).  *ret: the RunResponse with its checked record. */
PLIMSOLL_API int plimsoll_run(plimsoll_client *c, const json_t *request, json_t **ret,
                              struct plimsoll_error *err);
/* Explain an ExplainRequest (borrowed: {"run": RunRequest} or with
 * "session_id", or {"session_id", "cell"}): the checks the call would meet,
 * in order, and whether it would be dispatched; nothing runs.  *ret: the
 * ExplainResponse. */
PLIMSOLL_API int plimsoll_explain(plimsoll_client *c, const json_t *request, json_t **ret,
                                  struct plimsoll_error *err);
PLIMSOLL_API int plimsoll_run_snippet(plimsoll_client *c, const char *language, const char *code,
                                      const struct plimsoll_run_options *ro, json_t **ret,
                                      struct plimsoll_error *err);
/* plimsoll_run_snippet with collect: a JSON array of globs (borrowed; NULL
 * or empty names none) relative to the work directory, whose regular files
 * come back in *ret's "artifacts" once the guest ended (docs/api.md,
 * "Artifacts"; Describe's operations.artifacts.snippet says where).  In a
 * session, put "collect" in the snippet of plimsoll_session_run's run. */
PLIMSOLL_API int plimsoll_run_snippet_collect(plimsoll_client *c, const char *language,
                                              const char *code, const json_t *collect,
                                              const struct plimsoll_run_options *ro, json_t **ret,
                                              struct plimsoll_error *err);
/* files: [{path, content | content_base64}]; steps: [{name, argv}] (borrowed). */
PLIMSOLL_API int plimsoll_run_project(plimsoll_client *c, const json_t *files, const json_t *steps,
                                      const struct plimsoll_run_options *ro, json_t **ret,
                                      struct plimsoll_error *err);
/* plimsoll_run_project with collect: a JSON array of globs (borrowed; NULL
 * or empty names none) relative to the work directory, whose regular files
 * come back in *ret's "artifacts" (docs/api.md, "Artifacts").  In a
 * session, put "collect" in the project of plimsoll_session_run's run. */
PLIMSOLL_API int plimsoll_run_project_collect(plimsoll_client *c, const json_t *files,
                                              const json_t *steps, const json_t *collect,
                                              const struct plimsoll_run_options *ro, json_t **ret,
                                              struct plimsoll_error *err);
/*
 * Save one artifact of a RunResponse (an object of its "artifacts",
 * borrowed) below the local directory dir, which must exist: its exact
 * bytes (content_base64 when present, else content) at its exact path
 * (path_base64 when present, else path), making the directories between.
 * Each name is opened relative to its parent's descriptor without
 * following a symlink, so nothing is written outside dir: a path that is
 * empty or absolute, has an empty, "." or ".." segment, or meets a
 * symlink that exists below dir (its last name included) is
 * PLIMSOLL_E_USAGE and nothing is written.  An existing file is replaced;
 * a truncated artifact is saved with the bytes that came.
 */
PLIMSOLL_API int plimsoll_artifact_save(const json_t *artifact, const char *dir,
                                        struct plimsoll_error *err);
/* Save every artifact of result (a RunResponse, borrowed) below dir as
 * plimsoll_artifact_save does, every path checked before any file is
 * written.  Returns how many were saved (0 when it has none), or -1. */
PLIMSOLL_API int plimsoll_save_artifacts(const json_t *result, const char *dir,
                                         struct plimsoll_error *err);
PLIMSOLL_API int plimsoll_run_module(plimsoll_client *c, const void *wasm, size_t len,
                                     const char *const *args, size_t nargs,
                                     const struct plimsoll_run_options *ro, json_t **ret,
                                     struct plimsoll_error *err);

/* ---- live output (RunStream, RunCellStream) ------------------------------ */

/*
 * A streaming call gives the guest's output as it is written, one chunk at
 * a time, to an output function, then returns the result as the unary
 * call does, checked the same way (floor, record, chain).  The answer is a
 * Connect server stream (application/connect+json): output messages, the
 * result, the end of the stream.  A refusal is the error the unary call
 * gets (http_status 200 when it came as the end of a stream); nothing was
 * given to the output function then.
 *
 * Each chunk is delivered as soon as its message is whole.  Joined in
 * order, a stream's chunks must be the result's stdout and stderr byte for
 * byte (a project's: its step's), else the call fails with
 * PLIMSOLL_E_PROTOCOL, as it does when the stream does not frame, has
 * flags other than a message's (0) and the end's (2), a message past
 * PLIMSOLL_MAX_STREAM_MESSAGE, a message after the result or anything
 * after the end, ends inside a message, or ends without its end or
 * without a result or an error.  The whole body is bounded by
 * max_answer_bytes, the call by timeout_ms.  The client holds one message
 * at a time and the result, never the output already delivered.  A kind
 * that does not stream (Describe: operations.*.streams) sends only the
 * result.  A daemon without these methods answers 404 (nothing ran);
 * plimsoll_run then gives the same result without live output.
 *
 * AT_CAPACITY and RATE_LIMITED are retried as for unary calls; a stream
 * that gave any chunk is never tried again.
 */

/* One chunk of output: either part may be empty (and is then NULL, 0).
 * The bytes are the guest's as written, NULs included, each part
 * followed by a NUL not counted in its length; they are the library's
 * until the output function returns.  A multi-byte character may be
 * split between chunks.
 *
 * A cell's display output (docs/sessions.md, "Display outputs") comes as
 * a chunk of its own, in the order the cell produced it among its output:
 * display is then the DisplayOutput ({"kind", "data"}, read with the
 * plimsoll_display_* functions below; the library's until the output
 * function returns) and both parts are empty; in every other chunk it is
 * NULL.  In order, the display chunks must be the result's "outputs", else
 * the call fails with PLIMSOLL_E_PROTOCOL. */
struct plimsoll_output {
    const char *stdout_data;
    size_t stdout_len;
    const char *stderr_data;
    size_t stderr_len;
    unsigned step;         /* a project's step, from 1; 0 for a snippet, module or cell */
    const json_t *display; /* since PLIMSOLL_0.6 */
};

/* Called with each chunk as it comes, on the calling thread, from inside
 * the streaming call (so it must not use the same client).  Non-zero
 * stops the call: it then fails with
 * PLIMSOLL_E_INFRASTRUCTURE, code "canceled", dispatched (the code may
 * have run, and may still be running until the daemon notices). */
typedef int (*plimsoll_output_fn)(void *userdata, const struct plimsoll_output *chunk);

/* Run a RunRequest (borrowed) with RunStream: each chunk to on_output
 * (may be NULL), then *ret as plimsoll_run gives it. */
PLIMSOLL_API int plimsoll_run_stream(plimsoll_client *c, const json_t *request,
                                     plimsoll_output_fn on_output, void *userdata, json_t **ret,
                                     struct plimsoll_error *err);
/* plimsoll_run_cell with RunCellStream (no chain kept). */
PLIMSOLL_API int plimsoll_run_cell_stream(plimsoll_client *c, const char *session_id,
                                          const json_t *cell, unsigned timeout_ms,
                                          plimsoll_output_fn on_output, void *userdata,
                                          json_t **ret, struct plimsoll_error *err);

/* ---- a cell's display outputs and a run's usage (PLIMSOLL_0.6) ----------- */

/*
 * A RunResponse (a cell's) lists the display outputs the cell produced, in
 * order (docs/sessions.md, "Display outputs"): each a MIME bundle whose
 * kind is "display" (display(), a figure left open) or "result" (the
 * cell's last expression), its data text for the text types
 * (plimsoll_mime_is_text) and base64 for every other.  The library has
 * checked both when it accepted the answer (PLIMSOLL_E_PROTOCOL
 * otherwise).  These read them without knowing their JSON; what they
 * return that is not malloc'd is borrowed from the answer and lives as
 * long as it does.
 */

/* How many display outputs result (a RunResponse) holds; 0 when none. */
PLIMSOLL_API size_t plimsoll_outputs_count(const json_t *result);
/* Display output i of result, or NULL past the last. */
PLIMSOLL_API const json_t *plimsoll_output_at(const json_t *result, size_t i);
/* How many outputs the daemon left out of result (past its bounds, or not
 * well formed); 0 when none. */
PLIMSOLL_API unsigned plimsoll_outputs_dropped(const json_t *result);
/* A display output's kind, "display" or "result"; NULL for no output. */
PLIMSOLL_API const char *plimsoll_display_kind(const json_t *display);
/* How many MIME types a display output's bundle holds, and the j-th of
 * them in the order the daemon sent them (NULL past the last). */
PLIMSOLL_API size_t plimsoll_display_types(const json_t *display);
PLIMSOLL_API const char *plimsoll_display_type(const json_t *display, size_t j);
/* Whether a display output carries mime's data as text: text/(any),
 * application/json, application/javascript, image/svg+xml, (any)+json and
 * (any)+xml; every other type comes as base64. */
PLIMSOLL_API bool plimsoll_mime_is_text(const char *mime);
/* The exact bytes of mime's data in a display output: base64 decoded for
 * a binary type, the text's UTF-8 for a text type.  *ret is malloc'd (the
 * caller free()s it) and NUL-terminated past *ret_len.  A bundle without
 * that type is PLIMSOLL_E_USAGE. */
PLIMSOLL_API int plimsoll_display_bytes(const json_t *display, const char *mime,
                                        unsigned char **ret, size_t *ret_len,
                                        struct plimsoll_error *err);

/* What a run, or one of a project's steps, cost as the provider measured
 * it (docs/api.md, "Usage"); each figure saturates at 4294967295. */
struct plimsoll_usage {
    unsigned cpu_user_ms;
    unsigned cpu_system_ms;
    unsigned memory_peak_kib; /* the most memory in use at once; 0: not measured */
    unsigned wall_ms;
    /* what the figures cover: "cgroup" (the sandbox's cgroup), "gvisor"
     * (the same with gVisor's own Sentry and Gofer), "worker" (the wasm
     * worker process), "service" (the hosted service's metrics); borrowed */
    const char *source;
};

/* The usage of result (a RunResponse) or of one of its "steps": true with
 * *ret filled when the answer has one; false with *ret zeroed (source "")
 * when it has none. */
PLIMSOLL_API bool plimsoll_usage_of(const json_t *result_or_step, struct plimsoll_usage *ret);
/* Why result has no usage (its usage_absent), or NULL when it says
 * nothing of it (it has a usage, or comes from an older daemon). */
PLIMSOLL_API const char *plimsoll_usage_absent(const json_t *result);

/* ---- one raw exchange with the daemon (PLIMSOLL_0.7) --------------------- */

/*
 * One HTTP request to a path of the daemon outside the Connect API (its
 * MCP endpoint /mcp, say), over the client's transport: its URL or Unix
 * socket, its key (sent as "Authorization: Bearer"), its timeout and its
 * max_answer_bytes.  Nothing of the answer is interpreted: every status is
 * a success here, for the caller to read.  One attempt, never retried;
 * no redirect is followed.  Like every call, not to be made on one client
 * from two threads at once.
 */
struct plimsoll_http_request {
    const char *method; /* "POST" or "DELETE"; NULL: POST */
    const char *path;   /* from the daemon's root: '/' then visible ASCII ("/mcp") */
    /* more request lines, "Name: value" each (a token, a colon, no line
     * break), NULL-terminated; may be NULL.  Content-Type is the caller's
     * to give. */
    const char *const *headers;
    const void *body; /* POST's body, body_len bytes, sent as they are; a DELETE has none */
    size_t body_len;
    /* the name of one answer header to give back (without its colon, any
     * case; "Mcp-Session-Id"), or NULL */
    const char *answer_header;
    long timeout_ms; /* the whole exchange; 0: the client's timeout_ms */
};

/* The answer, as it came; plimsoll_http_answer_free releases it. */
struct plimsoll_http_answer {
    long status;
    char *content_type; /* the Content-Type, as sent; NULL when there was none */
    /* answer_header's value (the first of the final answer), trimmed; NULL
     * when it was not asked for or not sent */
    char *header;
    char *body; /* the body's bytes (at most max_answer_bytes), NUL-terminated past body_len */
    size_t body_len;
};

/* Send req (borrowed) and fill *ret (when the call returns 0; zeroed
 * otherwise).  -1 with *err: PLIMSOLL_E_USAGE for a request it cannot
 * send (a method other than POST or DELETE, a bad path or header line, a
 * DELETE with a body); PLIMSOLL_E_INFRASTRUCTURE with code "unavailable"
 * when the daemon could not be reached (a refused connection, TLS) or
 * "deadline_exceeded" at the timeout (dispatched: it may have been
 * served); PLIMSOLL_E_PROTOCOL when the body is longer than
 * max_answer_bytes or the asked header longer than 8192 bytes
 * (http_status the answer's). */
PLIMSOLL_API int plimsoll_http_request(plimsoll_client *c, const struct plimsoll_http_request *req,
                                       struct plimsoll_http_answer *ret,
                                       struct plimsoll_error *err);
/* Free what *a holds and zero it; NULL and a zeroed answer are fine. */
PLIMSOLL_API void plimsoll_http_answer_free(struct plimsoll_http_answer *a);

/* ---- sessions ------------------------------------------------------------- */

/* languages: NULL-terminated hint, may be NULL.  floor (may be NULL): sent
 * as minimum_isolation with every run that sets none, and checked on every
 * answer of the session, cells included. */
PLIMSOLL_API plimsoll_session *plimsoll_session_open(plimsoll_client *c,
                                                     const char *const *languages,
                                                     const char *floor, struct plimsoll_error *err);
PLIMSOLL_API const char *plimsoll_session_id(const plimsoll_session *s);
/* run: a RunRequest with a snippet or project (borrowed). */
PLIMSOLL_API int plimsoll_session_run(plimsoll_session *s, const json_t *run, json_t **ret,
                                      struct plimsoll_error *err);
/* files may be NULL; timeout_ms 0 leaves it out. */
PLIMSOLL_API int plimsoll_session_cell(plimsoll_session *s, const char *language, const char *code,
                                       const json_t *files, unsigned timeout_ms, json_t **ret,
                                       struct plimsoll_error *err);
/* plimsoll_session_cell with RunCellStream: each chunk to on_output (may
 * be NULL); the answer joins the session's chain as a cell's does. */
PLIMSOLL_API int plimsoll_session_cell_stream(plimsoll_session *s, const char *language,
                                              const char *code, const json_t *files,
                                              unsigned timeout_ms, plimsoll_output_fn on_output,
                                              void *userdata, json_t **ret,
                                              struct plimsoll_error *err);
PLIMSOLL_API int plimsoll_session_close(plimsoll_session *s, struct plimsoll_error *err);
/* The session's chain: every accepted (request, response) in order. */
PLIMSOLL_API const plimsoll_chain *plimsoll_session_chain(const plimsoll_session *s);
/* Frees the handle; does not close the session (the daemon's lifetime ends it). */
PLIMSOLL_API void plimsoll_session_free(plimsoll_session *s);

/* Take up an existing session (ListSessions gives the caller's ids): its
 * GetSession, then a handle whose chain starts at the session's
 * previous_digest, so the calls made through it go on checking the chain
 * from where the daemon says it stands.  An ended session is
 * PLIMSOLL_E_SESSION_ENDED with its ended_reason; another caller's or an
 * unknown id, NOT_FOUND. */
PLIMSOLL_API plimsoll_session *plimsoll_session_connect(plimsoll_client *c, const char *session_id,
                                                        const char *floor,
                                                        struct plimsoll_error *err);
/*
 * Sessions behind a proxy (fleets): a session lives in the daemon that
 * opened it, and each daemon's PLIMSOLL_INSTANCE is the route of its
 * sessions.  A handle remembers the
 * route (OpenSession's answer, or what plimsoll_session_connect_route was
 * given or GetSession answered) and sends it as the Plimsoll-Route header
 * with every later call (runs, cells, streams, files, GetSession,
 * ExtendSession, CloseSession), so the proxy sends them to that daemon.
 * When the session's daemon is gone or draining, the proxy's other daemon
 * refuses with PLIMSOLL_E_WRONG_ROUTE (dispatched false: nothing ran).
 */
/* The handle's route: "" when the daemon named none (older than routes:
 * then no header is sent) or s is NULL.  Valid while s lives. */
PLIMSOLL_API const char *plimsoll_session_route(const plimsoll_session *s);
/* plimsoll_session_connect for a session of the daemon named route (1 to
 * 63 of [A-Za-z0-9._-], else PLIMSOLL_E_USAGE with nothing sent): its
 * GetSession and every call of the handle carry route.  NULL or "": no
 * route given, and the handle takes the one GetSession answers. */
PLIMSOLL_API plimsoll_session *plimsoll_session_connect_route(plimsoll_client *c,
                                                              const char *session_id,
                                                              const char *floor, const char *route,
                                                              struct plimsoll_error *err);
/* The session's SessionInfo now (GetSession) and ExtendSession. */
PLIMSOLL_API int plimsoll_session_info(plimsoll_session *s, json_t **ret,
                                       struct plimsoll_error *err);
PLIMSOLL_API int plimsoll_session_extend(plimsoll_session *s, unsigned ends_in_s, json_t **ret,
                                         struct plimsoll_error *err);

/* The caller's sessions: *ret is the ListSessionsResponse
 * ({"sessions": [SessionInfo]}, docs/api.md). */
PLIMSOLL_API int plimsoll_list_sessions(plimsoll_client *c, json_t **ret,
                                        struct plimsoll_error *err);
/* One session's SessionInfo; it waits for no call of the session. */
PLIMSOLL_API int plimsoll_get_session(plimsoll_client *c, const char *session_id, json_t **ret,
                                      struct plimsoll_error *err);
/* The session ends ends_in_s (>= 1) seconds from now instead, at most the
 * daemon's SANDBOX_SESSION_MAX_LIFETIME from its open (INVALID_REQUEST
 * past it); *ret its SessionInfo after. */
PLIMSOLL_API int plimsoll_extend_session(plimsoll_client *c, const char *session_id,
                                         unsigned ends_in_s, json_t **ret,
                                         struct plimsoll_error *err);

/*
 * A session's files (docs/sessions.md, "Session files").  Each answer
 * carries a record that joins the session's chain: the session variants
 * check and keep it, the client variants check it alone.  files: a JSON
 * array of {path, content | content_base64} (borrowed); offset and limit
 * 0 leave them out (limit: the daemon's most), as does depth 0 and a NULL
 * or empty path for ListFiles (the work directory).  *ret: the
 * WriteFilesResponse, ReadFileResponse (the bytes in content, or, when
 * not UTF-8, content_base64) or ListFilesResponse.
 */
PLIMSOLL_API int plimsoll_session_write_files(plimsoll_session *s, const json_t *files,
                                              json_t **ret, struct plimsoll_error *err);
PLIMSOLL_API int plimsoll_session_read_file(plimsoll_session *s, const char *path, unsigned offset,
                                            unsigned limit, json_t **ret,
                                            struct plimsoll_error *err);
PLIMSOLL_API int plimsoll_session_list_files(plimsoll_session *s, const char *path, unsigned depth,
                                             json_t **ret, struct plimsoll_error *err);
PLIMSOLL_API int plimsoll_write_files(plimsoll_client *c, const char *session_id,
                                      const json_t *files, json_t **ret,
                                      struct plimsoll_error *err);
PLIMSOLL_API int plimsoll_read_file(plimsoll_client *c, const char *session_id, const char *path,
                                    unsigned offset, unsigned limit, json_t **ret,
                                    struct plimsoll_error *err);
PLIMSOLL_API int plimsoll_list_files(plimsoll_client *c, const char *session_id, const char *path,
                                     unsigned depth, json_t **ret, struct plimsoll_error *err);

/* The low-level session calls: no chain is kept, each record is checked alone. */
PLIMSOLL_API int plimsoll_open_session(plimsoll_client *c, const char *const *languages,
                                       char ret_id[65], struct plimsoll_error *err);
PLIMSOLL_API int plimsoll_run_in_session(plimsoll_client *c, const char *session_id,
                                         const json_t *run, json_t **ret,
                                         struct plimsoll_error *err);
PLIMSOLL_API int plimsoll_run_cell(plimsoll_client *c, const char *session_id, const json_t *cell,
                                   unsigned timeout_ms, json_t **ret, struct plimsoll_error *err);
PLIMSOLL_API int plimsoll_close_session(plimsoll_client *c, const char *session_id,
                                        struct plimsoll_error *err);

/* ---- records and chains (docs/records.md, docs/clients.md) ---------------- */

/* The canonical (RFC 8785) text of v; malloc'd, NULL on a real number. */
PLIMSOLL_API char *plimsoll_canonical(const json_t *v);
/* SHA-256 of the canonical form of v as 64 hex digits. */
PLIMSOLL_API int plimsoll_canonical_sha256(const json_t *v, char ret_hex[65]);
/* Check one record against what was sent and what came back (response
 * with or without its "record").  previous NULL skips the chain check. */
PLIMSOLL_API int plimsoll_check_record(const json_t *request, const json_t *response,
                                       const json_t *record, const char *previous,
                                       struct plimsoll_error *err);

/* A chain keeper: append checks each answer against the previous one and
 * keeps it.  A harness signs plimsoll_chain_head() (which covers every
 * earlier record) or each kept record's canonical form with its own key. */
PLIMSOLL_API plimsoll_chain *plimsoll_chain_new(const char *previous);
PLIMSOLL_API int plimsoll_chain_append(plimsoll_chain *ch, const json_t *request,
                                       const json_t *response, struct plimsoll_error *err);
PLIMSOLL_API const char *plimsoll_chain_head(const plimsoll_chain *ch);
PLIMSOLL_API size_t plimsoll_chain_len(const plimsoll_chain *ch);
/* Entry i as {"request", "response", "record"} (borrowed), or NULL. */
PLIMSOLL_API const json_t *plimsoll_chain_entry(const plimsoll_chain *ch, size_t i);
PLIMSOLL_API void plimsoll_chain_free(plimsoll_chain *ch);
/* Check kept entries [{request, response, record}] from previous (NULL: ""). */
PLIMSOLL_API int plimsoll_verify_chain(const json_t *entries, const char *previous,
                                       struct plimsoll_error *err);

#ifdef __cplusplus
}
#endif
