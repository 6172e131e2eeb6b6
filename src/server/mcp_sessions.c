/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mcp_sessions.c: the MCP session table (mcp_sessions.h).  A flat array
 * under one lock, grown by doubling up to PLIMSOLL_MCP_SESSIONS: the count
 * is checked before the array grows, so a stranger's initialize never
 * allocates past the bound.  Ids are compared in constant time.
 */
#include "mcp_sessions.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/ids.h"
#include "../core/keys.h"

struct entry {
    char id[PL_MCP_ID_LEN + 1];
    char principal[PL_PRINCIPAL_MAX + 1];
    struct pl_mcp_session_view view;
    uint64_t idle_until_ns; /* the last message + PLIMSOLL_MCP_SESSION_IDLE_MS */
    uint64_t end_ns;        /* open + PLIMSOLL_MCP_SESSION_LIFETIME_MS */
    unsigned calls;         /* tools/call in progress */
};

struct pl_mcp_sessions {
    pthread_mutex_t lock;
    const struct pl_config *config;
    struct entry *e;
    unsigned n, cap;
};

struct pl_mcp_sessions *pl_mcp_sessions_new(const struct pl_config *config) {
    struct pl_mcp_sessions *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    pthread_mutex_init(&t->lock, NULL);
    t->config = config;
    return t;
}

void pl_mcp_sessions_free(struct pl_mcp_sessions *t) {
    if (!t)
        return;
    if (t->e)
        OPENSSL_cleanse(t->e, sizeof(*t->e) * t->cap);
    free(t->e);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static bool expired(const struct entry *e, uint64_t now) {
    return now >= e->idle_until_ns || now >= e->end_ns;
}

/* Drop entry i (lock held): the last one takes its place. */
static void drop(struct pl_mcp_sessions *t, unsigned i) {
    if (i != t->n - 1)
        t->e[i] = t->e[t->n - 1];
    OPENSSL_cleanse(&t->e[t->n - 1], sizeof(t->e[0]));
    t->n--;
}

static void sweep(struct pl_mcp_sessions *t, uint64_t now) {
    for (unsigned i = 0; i < t->n;)
        if (expired(&t->e[i], now))
            drop(t, i);
        else
            i++;
}

/* The live entry with this id and principal (lock held), or NULL.  Every
 * id is compared, whatever matched. */
static struct entry *find(struct pl_mcp_sessions *t, const char *id, const char *principal,
                          uint64_t now) {
    if (!id || strlen(id) != PL_MCP_ID_LEN)
        return NULL;
    struct entry *hit = NULL;
    for (unsigned i = 0; i < t->n; i++)
        if (CRYPTO_memcmp(t->e[i].id, id, PL_MCP_ID_LEN) == 0)
            hit = &t->e[i];
    if (!hit)
        return NULL;
    if (expired(hit, now)) {
        drop(t, (unsigned)(hit - t->e));
        return NULL;
    }
    if (!principal || strcmp(hit->principal, principal) != 0)
        return NULL;
    return hit;
}

int pl_mcp_session_open(struct pl_mcp_sessions *t, const char *principal, enum pl_tier floor,
                        const char *version, char *id, struct pl_error *err) {
    const struct pl_config *c = t->config;
    if (strlen(principal) > PL_PRINCIPAL_MAX || strlen(version) >= PL_MCP_VERSION_LEN)
        return pl_error_set(err, PL_REASON_INTERNAL, "MCP session: principal or version too long");
    pthread_mutex_lock(&t->lock);
    uint64_t now = pl_now_ns();
    sweep(t, now);
    unsigned mine = 0;
    for (unsigned i = 0; i < t->n; i++)
        mine += strcmp(t->e[i].principal, principal) == 0;
    if (t->n >= c->mcp_sessions || mine >= c->mcp_sessions_per_key) {
        bool key = mine >= c->mcp_sessions_per_key;
        pthread_mutex_unlock(&t->lock);
        return pl_error_set(err, PL_REASON_AT_CAPACITY,
                            "%s MCP sessions are at %s (%u); end one (DELETE /mcp) or wait for "
                            "one to end",
                            key ? "this caller's" : "the daemon's",
                            key ? "PLIMSOLL_MCP_SESSIONS_PER_KEY" : "PLIMSOLL_MCP_SESSIONS",
                            key ? c->mcp_sessions_per_key : c->mcp_sessions);
    }
    if (t->n == t->cap) {
        unsigned cap = t->cap ? t->cap * 2 : 16;
        if (cap > c->mcp_sessions)
            cap = c->mcp_sessions;
        struct entry *e = calloc(cap, sizeof(*e));
        if (!e) {
            pthread_mutex_unlock(&t->lock);
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory opening an MCP session");
        }
        if (t->e) {
            memcpy(e, t->e, sizeof(*e) * t->n);
            OPENSSL_cleanse(t->e, sizeof(*e) * t->cap);
            free(t->e);
        }
        t->e = e;
        t->cap = cap;
    }
    struct entry *e = &t->e[t->n];
    memset(e, 0, sizeof(*e));
    if (pl_random_hex(e->id, sizeof(e->id), PL_MCP_ID_BYTES) < 0) {
        pthread_mutex_unlock(&t->lock);
        return pl_error_set(err, PL_REASON_INTERNAL, "no random bytes for an MCP session id");
    }
    memcpy(e->principal, principal, strlen(principal) + 1);
    e->view.floor = floor;
    memcpy(e->view.version, version, strlen(version) + 1);
    e->idle_until_ns = now + (uint64_t)c->mcp_session_idle_ms * 1000000u;
    e->end_ns = now + (uint64_t)c->mcp_session_lifetime_ms * 1000000u;
    memcpy(id, e->id, PL_MCP_ID_LEN + 1);
    t->n++;
    pthread_mutex_unlock(&t->lock);
    return 0;
}

int pl_mcp_session_touch(struct pl_mcp_sessions *t, const char *id, const char *principal,
                         struct pl_mcp_session_view *ret) {
    pthread_mutex_lock(&t->lock);
    uint64_t now = pl_now_ns();
    struct entry *e = find(t, id, principal, now);
    if (e) {
        e->idle_until_ns = now + (uint64_t)t->config->mcp_session_idle_ms * 1000000u;
        if (ret)
            *ret = e->view;
    }
    pthread_mutex_unlock(&t->lock);
    return e ? 0 : -1;
}

int pl_mcp_session_set_initialized(struct pl_mcp_sessions *t, const char *id,
                                   const char *principal) {
    pthread_mutex_lock(&t->lock);
    struct entry *e = find(t, id, principal, pl_now_ns());
    if (e)
        e->view.initialized = true;
    pthread_mutex_unlock(&t->lock);
    return e ? 0 : -1;
}

int pl_mcp_session_call_begin(struct pl_mcp_sessions *t, const char *id, const char *principal) {
    pthread_mutex_lock(&t->lock);
    struct entry *e = find(t, id, principal, pl_now_ns());
    int r = !e ? -1 : e->calls >= t->config->mcp_calls_per_session ? -2 : 0;
    if (r == 0)
        e->calls++;
    pthread_mutex_unlock(&t->lock);
    return r;
}

void pl_mcp_session_call_end(struct pl_mcp_sessions *t, const char *id) {
    pthread_mutex_lock(&t->lock);
    uint64_t now = pl_now_ns();
    for (unsigned i = 0; i < t->n; i++)
        if (CRYPTO_memcmp(t->e[i].id, id, PL_MCP_ID_LEN) == 0 && t->e[i].calls) {
            t->e[i].calls--;
            /* A long call counts as use: the idle clock starts at its end. */
            t->e[i].idle_until_ns = now + (uint64_t)t->config->mcp_session_idle_ms * 1000000u;
        }
    pthread_mutex_unlock(&t->lock);
}

int pl_mcp_session_end(struct pl_mcp_sessions *t, const char *id, const char *principal) {
    pthread_mutex_lock(&t->lock);
    struct entry *e = find(t, id, principal, pl_now_ns());
    if (e)
        drop(t, (unsigned)(e - t->e));
    pthread_mutex_unlock(&t->lock);
    return e ? 0 : -1;
}

unsigned pl_mcp_sessions_count(struct pl_mcp_sessions *t) {
    pthread_mutex_lock(&t->lock);
    sweep(t, pl_now_ns());
    unsigned n = t->n;
    pthread_mutex_unlock(&t->lock);
    return n;
}
