/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sessions.h: the daemon's table of sessions (docs/sessions.md).
 *
 * A session is one sandbox a provider keeps for many calls of one owner.
 * This layer is provider-independent: it mints the unguessable id, checks
 * the owner, runs one call at a time in arrival order, holds the session's
 * admission slot from open to end, chains the records, pauses a session
 * idle past SANDBOX_SESSION_IDLE and ends one past SANDBOX_SESSION_LIFETIME
 * (a background thread), and keeps an ended session's reason so the next
 * call is refused with SESSION_ENDED and that reason.  The provider's
 * session operations do the sandbox work.
 *
 * Ids are 32 random bytes in hex; they are compared in constant time and
 * never logged (log lines carry a short digest of the id instead).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/admission.h"
#include "../core/errors.h"
#include "../providers/provider.h"

#define PL_SESSION_ID_LEN 64 /* hex characters */

struct pl_sessions;
struct pl_session;

struct pl_sessions_limits {
    unsigned max_sessions;   /* SANDBOX_MAX_SESSIONS (0: sessions off) */
    unsigned lifetime_s;     /* SANDBOX_SESSION_LIFETIME */
    unsigned max_lifetime_s; /* SANDBOX_SESSION_MAX_LIFETIME: ExtendSession's most */
    unsigned idle_s;         /* SANDBOX_SESSION_IDLE */
    unsigned memory_mb;      /* the per-run allowance a session's sandbox gets */
};

int pl_sessions_new(const struct pl_sessions_limits *limits, struct pl_provider *provider,
                    struct pl_admission *admission, struct pl_sessions **ret_sessions,
                    struct pl_error *err);

/* End every session, each after its call in progress (daemon shutdown);
 * later opens are refused SHUTTING_DOWN, later calls SESSION_ENDED. */
void pl_sessions_shutdown(struct pl_sessions *s);

/* Shut down (if not yet) and free the table.  NULL-safe. */
void pl_sessions_free(struct pl_sessions *s);

/* Open a session for principal; languages is the caller's hint (may be
 * empty).  Admission (rate and slot) is taken here and held until the end. */
int pl_sessions_open(struct pl_sessions *s, const char *principal, const char *const *languages,
                     char ret_id[PL_SESSION_ID_LEN + 1], struct pl_error *err);

/*
 * Take the session for one call: refuses an unknown id and another caller's
 * id alike (NOT_FOUND, "no such session"), an ended one with SESSION_ENDED
 * and its reason (also copied to ret_ended_reason, when given, for the
 * answer's ErrorInfo).  Waits for the calls before it (in arrival order)
 * and resumes a paused sandbox.  On success the caller must
 * pl_sessions_done().
 */
int pl_sessions_begin(struct pl_sessions *s, const char *principal, const char *id,
                      struct pl_session **ret_session, char *ret_ended_reason,
                      size_t ended_reason_size, struct pl_error *err);

/* What begin would answer now (NOT_FOUND, SESSION_ENDED with its reason),
 * without waiting, taking a turn or resuming anything: Explain's. */
int pl_sessions_peek(struct pl_sessions *s, const char *principal, const char *id,
                     char *ret_ended_reason, size_t ended_reason_size, struct pl_error *err);

/* The provider's handle and the previous record's digest ("" at first). */
void *pl_session_handle(struct pl_session *ss);
const char *pl_session_previous_digest(struct pl_session *ss);

/*
 * Finish a call.  digest: the new record's digest (NULL when no record was
 * made).  ended_reason: non-NULL when the provider said the session ended.
 */
void pl_sessions_done(struct pl_sessions *s, struct pl_session *ss, const char *digest,
                      const char *ended_reason);

/* Close a session (its owner's CloseSession): same refusals as begin. */
int pl_sessions_close(struct pl_sessions *s, const char *principal, const char *id,
                      struct pl_error *err);

/*
 * A session as GetSession and ListSessions give it.  Wall-clock instants
 * are nanoseconds since the epoch (0: none): the open's wall clock plus
 * the time that passed on the monotonic clock since.
 */
struct pl_session_info {
    char id[PL_SESSION_ID_LEN + 1];
    const char *state; /* "ready", "paused", "ended" */
    char ended_reason[256];
    uint64_t created, last_call, idle_deadline, lifetime_deadline, ended_at;
    unsigned calls;         /* calls that made a record: the chain's length */
    unsigned calls_waiting; /* running or waiting their turn now */
    char previous[65];
    const char *languages[5]; /* the hint, NULL-terminated; static strings */
    struct pl_session_status status;
    unsigned max_lifetime_s;
};

/* One of principal's sessions, open or ended (kept as a tombstone for a
 * while), without waiting for its calls: NOT_FOUND as begin otherwise. */
int pl_sessions_get(struct pl_sessions *s, const char *principal, const char *id,
                    struct pl_session_info *ret, struct pl_error *err);

/* principal's sessions, open and ended, oldest open first: *ret (the
 * caller's to free; NULL when none) of *ret_n.  Never another's. */
int pl_sessions_list(struct pl_sessions *s, const char *principal, struct pl_session_info **ret,
                     size_t *ret_n, struct pl_error *err);

/*
 * ExtendSession: the session ends ends_in_s seconds from now instead (a
 * shorter time too), without waiting for its calls.  Refused as begin
 * (NOT_FOUND, SESSION_ENDED and its reason into ret_ended_reason), and
 * INVALID_REQUEST, naming the most it may ask now, when that would be past
 * max_lifetime_s from its open.  *ret: the session after.
 */
int pl_sessions_extend(struct pl_sessions *s, const char *principal, const char *id,
                       unsigned ends_in_s, struct pl_session_info *ret, char *ret_ended_reason,
                       size_t ended_reason_size, struct pl_error *err);

/* Sessions currently open (not ended). */
unsigned pl_sessions_open_count(struct pl_sessions *s);
