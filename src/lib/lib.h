/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lib.h: what libplimsoll's files share; not installed.
 *
 * libplimsoll (src/lib/; its public header is include/plimsoll.h), in the
 * caller's process:
 *   lib.h            this header
 *   client.c         the client, one POST an attempt over libcurl, the
 *                    deadline and the retries; one raw exchange
 *                    (plimsoll_http_request, the daemon's /mcp)
 *   answer.c         the kinds, what an answer may be, refusals from
 *                    Connect errors and their google.rpc.ErrorInfo
 *   calls.c          Describe, the runs and the sessions, each answer
 *                    checked
 *   record.c         records and chains
 *   stream.c         RunStream's and RunCellStream's answer, read as it
 *                    comes
 *   outputs.c        a cell's display outputs and a run's usage, read out
 *                    of an answer (and a display output's bytes)
 *   libplimsoll.map  the ABI: only the plimsoll_* functions, by version
 */
#pragma once
#include <curl/curl.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../include/plimsoll.h"
#include "../core/buf.h"

struct plimsoll_client {
    CURL *curl;
    char *base;      /* "http://host:port" without a trailing slash */
    char *unix_path; /* NULL for TCP */
    char *auth;      /* "Authorization: Bearer …" or NULL */
    long timeout_ms;
    size_t max_answer;
    struct plimsoll_retry retry;
    bool skip_checks;
};

/* Fill err (kind, printf message; everything else cleared); returns -1. */
int plc_fail(struct plimsoll_error *err, enum plimsoll_errkind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- client.c ------------------------------------------------------------- */

/* The longest route: a daemon's PLIMSOLL_INSTANCE is 1 to 63 of
 * [A-Za-z0-9._-]. */
#define PLC_ROUTE_MAX 63

/* Whether route is one a daemon may have (1 to PLC_ROUTE_MAX of
 * [A-Za-z0-9._-]). */
bool plc_route_ok(const char *route);

/* POST msg to method, retrying what the policy allows; *ret is the 200
 * answer (a new reference), checked against the method's shape.  route
 * (NULL or "": none; plc_route_ok already) goes as the Plimsoll-Route
 * header: a session's daemon behind a proxy. */
int plc_call(plimsoll_client *c, const char *method, const json_t *msg, const char *route,
             json_t **ret, struct plimsoll_error *err);

/* POST msg to method as a Connect server stream (stream.c reads the
 * answer; nsteps as plc_stream_init takes it), retrying what the policy
 * allows while no chunk was given; *ret is the result (a new reference),
 * its streamed output checked against it. */
int plc_call_stream(plimsoll_client *c, const char *method, const json_t *msg, const char *route,
                    unsigned nsteps, plimsoll_output_fn on_output, void *userdata, json_t **ret,
                    struct plimsoll_error *err);

/* ---- answer.c ------------------------------------------------------------- */

/* A protocol error: infrastructure (dispatched), code "unknown", the HTTP
 * status and a printf reason; returns -1. */
int plc_protocol_fail(struct plimsoll_error *err, const char *method, long status, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
/* The JSON object of method's 200 answer b, its known members of their
 * types, or NULL with why (n bytes). */
json_t *plc_parse_result(const struct pl_buf *b, const char *method, char *why, size_t n);
/* A message of a stream (end: its end-of-stream message, else a
 * RunStreamResponse): its JSON object, known members of their types, or
 * NULL with why. */
json_t *plc_parse_stream_message(const struct pl_buf *b, bool end, char *why, size_t n);
/* What a display output's shape cannot say: a kind of "display" or
 * "result", and the data of each type that is not text base64; < 0 with
 * why (n bytes), where naming it. */
int plc_check_display(const json_t *d, const char *where, char *why, size_t n);
/* A RunResponse's values beyond its shape: each of its outputs as
 * plc_check_display checks one; < 0 with why. */
int plc_check_run(const json_t *result, const char *where, char *why, size_t n);
/* Whether a Content-Type is type (any case), any charset UTF-8. */
bool plc_media_type_is(const char *ct, const char *type);
/* Whether a Content-Type is application/json, any charset UTF-8. */
bool plc_media_type_is_json(const char *ct);
/* A non-200 answer into *err: a refusal, infrastructure, or a protocol
 * error when it is not a Connect error; always -1. */
int plc_refusal(plimsoll_client *c, const char *method, long status, const struct pl_buf *answer,
                struct plimsoll_error *err);
/* The same of a parsed Connect error j (an end-of-stream's "error");
 * max bounds its decoded ErrorInfo; always -1. */
int plc_refusal_of(size_t max, const char *method, long status, const json_t *j,
                   struct plimsoll_error *err);

/* ---- stream.c ------------------------------------------------------------- */

/* The Content-Type of a Connect server stream of JSON messages. */
#define PLC_STREAM_MEDIA_TYPE "application/connect+json"

/* What one step's output has joined so far: a length and a running SHA-256
 * of each stream (0 stdout, 1 stderr). */
struct plc_joined {
    EVP_MD_CTX *sha[2]; /* NULL until a chunk */
    size_t len[2];
    bool seen;
};

/*
 * The answer of one RunStream or RunCellStream, fed as it comes: envelopes
 * of one flags byte (0: a message, 2: the end), a 4-byte big-endian length
 * and that many bytes.  Each output chunk goes to on_output as soon as its
 * envelope is whole.  It holds one message at a time (at most
 * PLIMSOLL_MAX_STREAM_MESSAGE), the result, and the running digests of
 * the output, never the output itself.  Once broken it stays broken.
 */
struct plc_stream {
    const char *method;
    size_t max_body; /* the whole body: the client's max_answer_bytes */
    size_t body;     /* bytes fed */
    unsigned nsteps; /* chunks may name steps 0..nsteps */
    plimsoll_output_fn on_output;
    void *userdata;
    unsigned char hdr[5];
    size_t hdr_len;
    size_t need;               /* the current message's length */
    struct pl_buf msg;         /* the current message, as far as it came */
    json_t *result;            /* the result, once read */
    json_t *error;             /* the end's error, once read */
    bool ended;                /* the end was read */
    bool broken;               /* why says why */
    bool canceled;             /* on_output asked to stop */
    size_t chunks;             /* chunks given to on_output */
    struct plc_joined *joined; /* nsteps + 1 */
    /* The display outputs given, joined: each one's canonical form and a
     * newline (which the canonical form never holds), as a running
     * SHA-256 (len[0] the bytes, sha[0] the digest), and their count. */
    struct plc_joined displays;
    size_t ndisplays;
    char why[256];
};

/* A stream of method's answer, nothing read; nsteps: the project's steps
 * the request has (0 for anything else).  < 0 on allocation failure. */
int plc_stream_init(struct plc_stream *s, const char *method, size_t max_body, unsigned nsteps,
                    plimsoll_output_fn on_output, void *userdata);
/* The next len bytes of the body; < 0 once the stream is broken or
 * on_output asked to stop. */
int plc_stream_feed(struct plc_stream *s, const void *data, size_t len);
/* At the end of the body: 0 with *ret the result (a new reference), its
 * streamed output checked against it; else -1 with *err: the end's error,
 * canceled, or a protocol error. */
int plc_stream_finish(struct plc_stream *s, json_t **ret, struct plimsoll_error *err);
void plc_stream_free(struct plc_stream *s);
