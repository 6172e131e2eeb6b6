/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mcp_sessions.h: the MCP sessions a daemon holds (docs/mcp.md).
 *
 * An MCP session is what `initialize` opens on /mcp: its id (the
 * Mcp-Session-Id, a secret), its caller, the protocol revision agreed and
 * the floor fixed for it.  The table holds at most PLIMSOLL_MCP_SESSIONS of
 * them, PLIMSOLL_MCP_SESSIONS_PER_KEY of one caller's, each counted before
 * it is made; one ends PLIMSOLL_MCP_SESSION_IDLE_MS after its last message
 * or PLIMSOLL_MCP_SESSION_LIFETIME_MS after it opened, whichever comes
 * first, and is then swept on the next look.  A session is found only with
 * its id and its own caller: any other lookup is "no such session".
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../core/config.h"
#include "../core/errors.h"
#include "../core/tier.h"

#define PL_MCP_ID_BYTES 32u                  /* random bytes in an id */
#define PL_MCP_ID_LEN (2u * PL_MCP_ID_BYTES) /* its hex digits */
#define PL_MCP_VERSION_LEN 16u               /* "2025-11-25" and a NUL, room to spare */

struct pl_mcp_sessions;

/* What a call learns of its session (a copy). */
struct pl_mcp_session_view {
    enum pl_tier floor;
    char version[PL_MCP_VERSION_LEN];
    bool initialized;
};

struct pl_mcp_sessions *pl_mcp_sessions_new(const struct pl_config *config);
void pl_mcp_sessions_free(struct pl_mcp_sessions *t);

/*
 * Open a session for principal: its id into id (PL_MCP_ID_LEN + 1 bytes).
 * -1 with err AT_CAPACITY (which bound, in the message) or INTERNAL.
 */
int pl_mcp_session_open(struct pl_mcp_sessions *t, const char *principal, enum pl_tier floor,
                        const char *version, char *id, struct pl_error *err);

/* Find principal's session id, mark it used now, and copy what a call
 * needs into *ret.  -1 when there is none (unknown, ended, or another
 * caller's: one answer for all). */
int pl_mcp_session_touch(struct pl_mcp_sessions *t, const char *id, const char *principal,
                         struct pl_mcp_session_view *ret);

/* notifications/initialized came.  -1 when there is no such session. */
int pl_mcp_session_set_initialized(struct pl_mcp_sessions *t, const char *id,
                                   const char *principal);

/* A tools/call begins: 0, -1 no such session, -2 its
 * PLIMSOLL_MCP_CALLS_PER_SESSION are all taken.  Each 0 is paired with a
 * pl_mcp_session_call_end. */
int pl_mcp_session_call_begin(struct pl_mcp_sessions *t, const char *id, const char *principal);
void pl_mcp_session_call_end(struct pl_mcp_sessions *t, const char *id);

/* DELETE: end it now.  -1 when there is no such session. */
int pl_mcp_session_end(struct pl_mcp_sessions *t, const char *id, const char *principal);

/* Sessions held now (ended ones not yet swept excluded). */
unsigned pl_mcp_sessions_count(struct pl_mcp_sessions *t);
