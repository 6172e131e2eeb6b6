/* SPDX-License-Identifier: Apache-2.0 */
/*
 * broker.h: one run's broker, the part of plimsoll that makes a grant's
 * calls and holds its credential outside the sandbox.
 *
 * A broker is made for one run from one grant profile and the calling
 * principal.  It obtains the credential once (a shared token copied from the
 * daemon's environment, or a freshly minted JWT naming the principal), holds
 * it only in its own memory and wipes it when freed.  Every guest request is
 * checked, in this order, before anything leaves the daemon:
 *
 *   1. method and path (without the query) must match a route of the
 *      profile (grants.h); the path must be canonical;
 *   2. the body must fit the profile's max_request_bytes;
 *   3. the run must not have used up max_calls.
 *
 * A request that fails a check is answered by the broker itself (a
 * "refusal": 400, 403, 413 or 429 with a JSON body naming the reason and the
 * header X-Plimsoll-Broker: refused) and never reaches the API.  An allowed
 * request is forwarded with libcurl to base_url + path?query, with only a
 * short list of the guest's headers and the credential header added; the
 * answer's status, a short list of its headers and its body (at most
 * max_response_bytes) go back to the guest.  Upstream failures are answered
 * 502 (unreachable, answer too large) or 504 (timeout), also marked with
 * X-Plimsoll-Broker.  docs/grants.md is the reference.
 *
 * Transports: pl_broker_listen() serves HTTP on a Unix socket in a per-run
 * directory (docker); pl_broker_handle_json() takes the wasm guest's JSON
 * form.  Both end in pl_broker_handle().
 *
 * The broker package (src/broker/), in plimsolld:
 *   broker.[ch]       one run's broker: decide, forward with libcurl,
 *                     answer (this header)
 *   broker_http.[ch]  the strict HTTP/1.1 parser and answer writer for the
 *                     guest's bytes (also the guard's and openshell's relay)
 *   broker_sock.[ch]  the per-run Unix-socket server, one connection at a
 *                     time
 *   grants.[ch]       grant profiles: the grants file parsed, validated,
 *                     looked up, freed
 *   grants_int.h      what the three grants files share
 *   grants_routes.c   base_url, route patterns, the canonical-path rule,
 *                     matching
 *   grants_cred.c     a profile's credential: checked at parse, made for
 *                     each run
 *   jwt.[ch]          minting a "jwt" profile's token (HS256, RS256, EdDSA)
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/errors.h"
#include "broker_http.h"
#include "broker_sock.h"
#include "grants.h"

#define PL_BROKER_MAX_REPLY_HEADERS 12
#define PL_BROKER_SOCKET_NAME "broker.sock"

struct pl_broker;

/* One answer to the guest.  Strings are owned by the reply. */
struct pl_broker_reply {
    int status;
    struct pl_http_header headers[PL_BROKER_MAX_REPLY_HEADERS];
    size_t nheaders;
    char *body;
    size_t body_len;
    bool refused; /* answered by the broker; never reached the API */
};

/**
 * pl_broker_new - a broker for one run of `principal` under profile `p`
 * (borrowed; must outlive the broker).  Obtains the credential now.
 * deadline_ns (pl_now_ns's clock, clock.h; 0: none) bounds every upstream
 * call, each also bounded by the profile's call_timeout_ms.  On failure err
 * holds INTERNAL and a message that never contains the credential.
 */
int pl_broker_new(const struct pl_grant_profile *p, pl_grants_env_fn env, void *env_userdata,
                  const char *principal, uint64_t deadline_ns, struct pl_broker **ret_broker,
                  struct pl_error *err);

/** pl_broker_free - stop serving, wipe the credential, free.  NULL-safe. */
void pl_broker_free(struct pl_broker *b);

/**
 * pl_broker_handle - decide and, when allowed, forward one guest request.
 * Always fills *ret (a refusal or an upstream failure is a reply too).
 * target is the request target: "/path" or "/path?query".
 */
void pl_broker_handle(struct pl_broker *b, const char *method, const char *target,
                      const struct pl_http_header *headers, size_t nheaders, const char *body,
                      size_t body_len, struct pl_broker_reply *ret);

void pl_broker_reply_clear(struct pl_broker_reply *r);

/**
 * pl_broker_handle_json - the wasm guest's form.  req is
 * {"method": "GET", "path": "/x?y", "headers": {"name": "value"}, "body": "..."};
 * the reply is {"status": 200, "headers": {...}, "body": "..."} with
 * "body_base64" instead of "body" when the answer is not UTF-8, and
 * "refused": true on a refusal.  A malformed request is a 400 reply.
 * Returns 0 with a malloc'd reply, < 0 only when out of memory.
 */
int pl_broker_handle_json(struct pl_broker *b, const char *req, size_t req_len, char **ret_reply,
                          size_t *ret_reply_len);

/**
 * pl_broker_listen - serve HTTP/1.1 on dir/broker.sock for this run.  dir
 * must not exist yet (it is created, and removed by pl_broker_free).
 * access says who may connect (broker_sock.h): the provider makes the
 * socket its sandbox's alone and checks each peer before a byte is read.
 */
int pl_broker_listen(struct pl_broker *b, const char *dir,
                     const struct pl_broker_sock_access *access, struct pl_error *err);

/* Stop serving the socket (idempotent; pl_broker_free does it too): a
 * provider calls it before its run returns, so its access check is never
 * called after the run's state is gone. */
void pl_broker_unlisten(struct pl_broker *b);

/* Connections the access check refused unread (for tests and metrics). */
unsigned pl_broker_refused_peers(const struct pl_broker *b);

/* Counters for the run record: requests forwarded to the API, and requests
 * the broker refused itself. */
unsigned pl_broker_calls(const struct pl_broker *b);
/* The profile's body bounds, for a transport's own framing limits. */
size_t pl_broker_max_request_bytes(const struct pl_broker *b);
size_t pl_broker_max_response_bytes(const struct pl_broker *b);
unsigned pl_broker_max_calls(const struct pl_broker *b);
unsigned pl_broker_refused(const struct pl_broker *b);
