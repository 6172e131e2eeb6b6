/* SPDX-License-Identifier: Apache-2.0 */
/*
 * guard.h: the guard, the one address on the plimsoll server a microVM may
 * reach (docs/grants.md, "From a microVM: the guard").  A run with a grant
 * is admitted with its broker and gets a fresh token; its guest sends
 * plain HTTP/1.1 requests to the guard with that token in
 * X-Plimsoll-Guard; the guard finds the run's broker by the token and hands
 * it the request (routes, limits and the record's counts are the broker's,
 * exactly as on docker's socket).  A request without a token of a run in
 * progress is answered 401 and reaches no broker.  When the run ends its
 * token is revoked, after every request of it in flight has been answered.
 *
 * The bytes come from the guest: the parser is broker_http's (strict,
 * bounded, fuzzed), every wait has an absolute deadline (the head's,
 * shorter, then the whole request's), one request per connection, the
 * token is checked from the head before a body byte is read, and the
 * connections in progress are capped in all and per source address.
 */
#pragma once

#include <stdint.h>

#include "../../broker/broker.h"
#include "../../core/errors.h"

#define PH_GUARD_HEADER "x-plimsoll-guard"
#define PH_GUARD_TOKEN_LEN 64 /* hex characters */

struct ph_guard;

struct ph_guard_opts {
    const char *host;         /* an IPv4 literal to listen on ("0.0.0.0": every address) */
    unsigned port;            /* 0: any free port (ph_guard_port says which) */
    unsigned max_connections; /* in progress at once; past it 503 unread; 0: 64 */
    unsigned max_per_address; /* of those, from one source address; 0: a quarter */
    unsigned idle_timeout_ms; /* reading a request, writing the answer; 0: 5000 */
    unsigned head_timeout_ms; /* reading its head, whose token is checked first; 0: 2000 */
};

/* Listen on o->host:o->port and serve on threads of its own; *ret is the
 * caller's to ph_guard_stop.  INVALID_REQUEST when host is not IPv4,
 * INTERNAL (with the errno) when it cannot listen or start. */
int ph_guard_start(const struct ph_guard_opts *o, struct ph_guard **ret, struct pl_error *err);
/* Stop serving; waits for the connections in progress, then frees g.
 * NULL-safe. */
void ph_guard_stop(struct ph_guard *g);
/* The port it listens on (the one chosen when o->port was 0). */
unsigned ph_guard_port(const struct ph_guard *g);

/* Admit a run's broker (borrowed until revoked); a fresh token into
 * token (PH_GUARD_TOKEN_LEN + 1 bytes; only its digest is kept).  INTERNAL
 * when the guard holds its most runs; on success err is cleared.  Any
 * thread. */
int ph_guard_admit(struct ph_guard *g, struct pl_broker *b, char *token, struct pl_error *err);
/* Revoke a token: from now on it is unknown; returns once no request of
 * it is in flight (the broker may then go).  Unknown tokens are ignored.
 * Any thread. */
void ph_guard_revoke(struct ph_guard *g, const char *token);
/* Requests answered 401 (no token, or not one of a run in progress). */
unsigned ph_guard_refused(const struct ph_guard *g);
