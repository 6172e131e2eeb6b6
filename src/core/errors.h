/* SPDX-License-Identifier: Apache-2.0 */
/*
 * errors.h: plimsoll's one error model.
 *
 * Two tables, both X-macros so the enum, the wire name, the HTTP status and
 * the stable reason string cannot drift apart:
 *
 *   PL_CONNECT_CODES  the Connect protocol's codes (gRPC status names in
 *                     snake_case) with the HTTP status the Connect protocol
 *                     assigns to each.
 *   PL_REASONS        plimsoll's stable refusal reasons.  Each names its
 *                     Connect code and whether the request can have been
 *                     dispatched (handed to a provider) when it is raised.
 *
 * Library code fills a struct pl_error and returns a negative value; the
 * API layer turns it into a Connect error body, once, at the edge.
 *
 * The core (src/core/), the layer every other part links, has no header of
 * its own; its files (plimsolld's, and the few the wasm workers link:
 * clock, fdio, capture, buf, errors):
 *   errors.[ch]    this header: the Connect codes, the reasons, struct
 *                  pl_error
 *   config.[ch]    every daemon setting: read once, validated, frozen
 *   display.[ch]   a cell's display outputs: their bounds, the bundle parser,
 *                  a hosted cell's framed stderr
 *   origin.[ch]    PLIMSOLL_CORS_ORIGINS normalised, a request's Origin
 *                  looked up in it, a header's list of names checked
 *   keys.[ch]      the keys file and bearer-key authentication
 *   admission.[ch] the run slots and per-caller token buckets, shed at
 *                  once, never queued
 *   request.[ch]   the Run request's decoder: normalize, then validate
 *   jsonscan.[ch]  a JSON text's elements and depth, counted before
 *                  jansson builds it
 *   canon.[ch]     RFC 8785 canonical JSON, SHA-256, base64, UTF-8
 *   record.[ch]    run records: build and verify; RFC 3339 times
 *   tier.[ch]      the isolation tiers, weakest first, and their names
 *   metrics.[ch]   the counters behind GET /metrics
 *   acct.[ch]      the kernel's CPU and memory accounting files (a
 *                  cgroup's, a process's), read and parsed
 *   log.[ch]       structured log lines, one JSON object each on stderr
 *   buf.[ch]       a growable byte buffer (and protobuf's varints)
 *   cleanup.h      scope-bound cleanup attributes and the TAKE macros
 *   clock.[ch]     the one clock: nanoseconds on CLOCK_MONOTONIC,
 *                  deadlines
 *   fdio.[ch]      descriptor reads and writes against a deadline and a
 *                  stop descriptor
 *   ids.[ch]       random identifiers and secrets (RAND_bytes, hex)
 *   fileread.[ch]  a whole operator-named file, strictly: regular,
 *                  bounded, wiped
 *   capture.[ch]   a guest's output kept up to a cap, the rest counted
 *   pool.[ch]      a warm pool: items made ahead by a filler thread, each
 *                  handed to one taker
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* X(enum suffix, wire name, HTTP status) */
#define PL_CONNECT_CODES(X)                                                                        \
    X(CANCELED, "canceled", 499)                                                                   \
    X(UNKNOWN, "unknown", 500)                                                                     \
    X(INVALID_ARGUMENT, "invalid_argument", 400)                                                   \
    X(DEADLINE_EXCEEDED, "deadline_exceeded", 504)                                                 \
    X(NOT_FOUND, "not_found", 404)                                                                 \
    X(ALREADY_EXISTS, "already_exists", 409)                                                       \
    X(PERMISSION_DENIED, "permission_denied", 403)                                                 \
    X(RESOURCE_EXHAUSTED, "resource_exhausted", 429)                                               \
    X(FAILED_PRECONDITION, "failed_precondition", 400)                                             \
    X(ABORTED, "aborted", 409)                                                                     \
    X(OUT_OF_RANGE, "out_of_range", 400)                                                           \
    X(UNIMPLEMENTED, "unimplemented", 501)                                                         \
    X(INTERNAL, "internal", 500)                                                                   \
    X(UNAVAILABLE, "unavailable", 503)                                                             \
    X(DATA_LOSS, "data_loss", 500)                                                                 \
    X(UNAUTHENTICATED, "unauthenticated", 401)

enum pl_code {
#define PL_X(sym, wire, http) PL_CODE_##sym,
    PL_CONNECT_CODES(PL_X)
#undef PL_X
        PL_CODE__COUNT
};

/*
 * X(reason, Connect code, dispatched, one-line meaning)
 *
 * "dispatched" is what metadata.dispatched says on the wire: every refusal
 * is decided before the provider is handed the request, so it is false; an
 * infrastructure failure may strike after dispatch, so it is true there.
 */
#define PL_REASONS(X)                                                                              \
    X(INVALID_REQUEST, INVALID_ARGUMENT, false, "the request is malformed or exceeds a bound")     \
    X(UNAUTHENTICATED, UNAUTHENTICATED, false, "no API key, or an unknown one")                    \
    X(DISABLED, FAILED_PRECONDITION, false, "the daemon runs the Disabled provider: nothing runs") \
    X(INSUFFICIENT_ISOLATION, FAILED_PRECONDITION, false,                                          \
      "the caller's floor is above the provider's tier")                                           \
    X(UNSUPPORTED, UNIMPLEMENTED, false, "the provider does not run this kind of payload")         \
    X(CALLER_NOT_ALLOWED, PERMISSION_DENIED, false,                                                \
      "the caller is not in the grant profile's allowed_callers")                                  \
    X(NOT_READY, UNAVAILABLE, false, "the provider's readiness check does not hold")               \
    X(SHUTTING_DOWN, UNAVAILABLE, false, "the daemon is draining for shutdown")                    \
    X(RATE_LIMITED, RESOURCE_EXHAUSTED, false, "the caller's rate limit is spent")                 \
    X(AT_CAPACITY, RESOURCE_EXHAUSTED, false, "every run slot (global or the caller's) is busy")   \
    X(SESSION_ENDED, FAILED_PRECONDITION, false, "the session has ended")                          \
    X(NOT_FOUND, NOT_FOUND, false, "no such method or resource")                                   \
    X(INTERNAL, INTERNAL, true, "infrastructure around the run failed")                            \
    X(WRONG_ROUTE, UNAVAILABLE, false,                                                             \
      "the call names another daemon's route: its session's daemon was not reached")

enum pl_reason {
    PL_REASON_NONE = 0,
#define PL_X(sym, code, disp, doc) PL_REASON_##sym,
    PL_REASONS(PL_X)
#undef PL_X
        PL_REASON__COUNT
};

/*
 * The one error object: a reason the API can send, the system error behind
 * it (0 when none), and a message that gathers context as it travels up
 * (pl_error_wrap).  Library code fills it and returns -1; the daemon and
 * the API layer log it once, at the edge.
 */
struct pl_error {
    enum pl_reason reason;
    int errnum; /* the errno behind the failure, or 0 */
    char message[512];
    bool before_dispatch; /* an INTERNAL failure that struck before dispatch */
};

/* Wire name of a Connect code ("invalid_argument"); never NULL. */
const char *pl_code_name(enum pl_code code);
/* HTTP status the Connect protocol assigns to a code. */
int pl_code_http_status(enum pl_code code);
/* Parse a wire name; returns < 0 when unknown. */
int pl_code_from_name(const char *name, enum pl_code *ret_code);

/* Stable reason string ("AT_CAPACITY"); "NONE" for PL_REASON_NONE. */
const char *pl_reason_name(enum pl_reason reason);
/* The Connect code a reason is sent with. */
enum pl_code pl_reason_code(enum pl_reason reason);
/* Whether metadata.dispatched is true for this reason. */
bool pl_reason_dispatched(enum pl_reason reason);
/* One-line meaning, for docs and logs. */
const char *pl_reason_doc(enum pl_reason reason);

/*
 * Fill err (when non-NULL) with a reason and a printf-style message.
 * Always returns -1 so callers can write `return pl_error_set(...)`.
 */
int pl_error_set(struct pl_error *err, enum pl_reason reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * As pl_error_set, with a system error: errnum (positive or negative) is
 * kept in err->errnum and its text is appended (": No such file or
 * directory").  Returns -1.
 */
int pl_error_errno(struct pl_error *err, enum pl_reason reason, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Add context in front of err's message as it travels up ("grant profile
 * \"items\": " + what failed below); the reason and errnum stay.
 * Returns -1.
 */
int pl_error_wrap(struct pl_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
