/* SPDX-License-Identifier: Apache-2.0 */
/* sessions.c: the table of sessions (see sessions.h). */
#include "sessions.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/canon.h"
#include "../core/cleanup.h"
#include "../core/clock.h"
#include "../core/ids.h"
#include "../core/log.h"

#define TOMBSTONE_S 600 /* an ended session's reason is kept this long */

struct pl_session {
    bool used;
    char id[PL_SESSION_ID_LEN + 1];
    char tag[17]; /* first 16 hex of sha256(id): names the sandbox, appears in logs */
    char principal[256];
    void *handle; /* the provider's */
    bool ended;
    char ended_reason[256];
    uint64_t opened_ns, last_ns, ended_ns;
    uint64_t opened_wall;  /* the wall clock at open, ns since the epoch */
    uint64_t last_call_ns; /* the end of its last call; 0 before any */
    uint64_t expires_ns;   /* it ends here: the lifetime, or ExtendSession's */
    bool extended;
    unsigned calls;      /* calls that made a record */
    unsigned char langs; /* the hint: 1 python, 2 javascript */
    bool paused;
    bool slot_given; /* paused, and its admission slot given back (the provider's way) */
    /* One call at a time, in arrival order: a ticket lock. */
    unsigned long next_ticket, serving;
    bool busy;
    char previous[65];
};

struct pl_sessions {
    struct pl_sessions_limits lim;
    struct pl_provider *prov;
    struct pl_admission *adm;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct pl_session *slots; /* 2 * max: ended sessions linger as tombstones */
    unsigned nslots;
    bool stop;
    bool closed; /* shut down: sessions ended, no new ones */
    pthread_t reaper;
    bool reaper_started;
};

static unsigned open_count_locked(struct pl_sessions *s) {
    unsigned n = 0;
    for (unsigned i = 0; i < s->nslots; i++)
        if (s->slots[i].used && !s->slots[i].ended)
            n++;
    return n;
}

unsigned pl_sessions_open_count(struct pl_sessions *s) {
    if (!s)
        return 0;
    pthread_mutex_lock(&s->lock);
    unsigned n = open_count_locked(s);
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* End a session: the sandbox goes, the admission slot comes back, the
 * reason stays.  Called with the lock held and the session not busy; the
 * lock is dropped around the provider's close. */
static int ended_error(struct pl_error *err, const char *why, char *ret_why, size_t why_size) {
    if (ret_why && why_size)
        snprintf(ret_why, why_size, "%s", why);
    return pl_error_set(err, PL_REASON_SESSION_ENDED, "the session has ended: %s", why);
}

static void end_locked(struct pl_sessions *s, struct pl_session *ss, const char *why) {
    if (ss->ended)
        return;
    ss->ended = true;
    ss->ended_ns = pl_now_ns();
    snprintf(ss->ended_reason, sizeof(ss->ended_reason), "%s", why);
    void *h = ss->handle;
    ss->handle = NULL;
    ss->busy = true; /* nobody may use it while the sandbox goes */
    char principal[256], tag[17];
    memcpy(principal, ss->principal, sizeof(principal));
    memcpy(tag, ss->tag, sizeof(tag));
    bool holds_slot = !ss->slot_given;
    pthread_mutex_unlock(&s->lock);
    if (h)
        pl_provider_session_close(s->prov, h);
    if (holds_slot)
        pl_admission_release(s->adm, principal);
    pl_log("info", "session ended",
           json_pack("{s:s, s:s, s:s}", "session", tag, "principal", principal, "reason", why));
    pthread_mutex_lock(&s->lock);
    ss->busy = false;
    pthread_cond_broadcast(&s->cond);
}

static void *reaper_main(void *arg) {
    struct pl_sessions *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        struct timespec ts = pl_timespec_of(pl_deadline_in_ms(250));
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
        if (s->stop)
            break;
        for (unsigned i = 0; i < s->nslots; i++) {
            struct pl_session *ss = &s->slots[i];
            /* Read per slot: a pause below lets go of the lock, and a slot
             * opened, called or ended meanwhile holds a later time than a
             * clock read before it (the difference would wrap, and a
             * session just opened would end as past its lifetime). */
            uint64_t now = pl_now_ns();
            if (!ss->used)
                continue;
            if (ss->ended) {
                if (!ss->busy && now - ss->ended_ns > (uint64_t)TOMBSTONE_S * 1000000000ull)
                    memset(ss, 0, sizeof(*ss));
                continue;
            }
            if (ss->busy || ss->next_ticket != ss->serving)
                continue; /* a call is running or waiting */
            if (now >= ss->expires_ns) {
                end_locked(s, ss,
                           ss->extended ? "the session reached the end ExtendSession gave it"
                                        : "the session reached SANDBOX_SESSION_LIFETIME");
            } else if (!ss->paused && pl_provider_pauses(s->prov) &&
                       now - ss->last_ns >= (uint64_t)s->lim.idle_s * 1000000000ull) {
                ss->busy = true;
                void *h = ss->handle;
                char principal[sizeof(ss->principal)];
                memcpy(principal, ss->principal, sizeof(principal));
                pthread_mutex_unlock(&s->lock);
                int r = pl_provider_session_pause(s->prov, h);
                /* A provider whose idle sandbox holds no interpreter and
                 * no running code gives the slot back (openshell). */
                bool give = r == 0 && s->prov->info.idle_frees_slot;
                if (give)
                    pl_admission_release(s->adm, principal);
                pthread_mutex_lock(&s->lock);
                ss->busy = false;
                if (r == 0) {
                    ss->paused = true;
                    ss->slot_given = give;
                } else
                    end_locked(s, ss, "the sandbox could not be paused when idle");
                pthread_cond_broadcast(&s->cond);
            }
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int pl_sessions_new(const struct pl_sessions_limits *limits, struct pl_provider *provider,
                    struct pl_admission *admission, struct pl_sessions **ret_sessions,
                    struct pl_error *err) {
    struct pl_sessions *s = calloc(1, sizeof(*s));
    if (!s)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    s->lim = *limits;
    s->prov = provider;
    s->adm = admission;
    s->nslots = limits->max_sessions * 2;
    s->slots = calloc(s->nslots ? s->nslots : 1, sizeof(*s->slots));
    pthread_mutex_init(&s->lock, NULL);
    pl_cond_init_monotonic(&s->cond);
    if (!s->slots || pthread_create(&s->reaper, NULL, reaper_main, s) != 0) {
        free(s->slots);
        free(s);
        return pl_error_set(err, PL_REASON_INTERNAL, "sessions: cannot start");
    }
    s->reaper_started = true;
    *ret_sessions = s;
    return 0;
}

void pl_sessions_shutdown(struct pl_sessions *s) {
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    if (s->closed) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->closed = true;
    s->stop = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (s->reaper_started)
        pthread_join(s->reaper, NULL);
    pthread_mutex_lock(&s->lock);
    for (unsigned i = 0; i < s->nslots; i++) {
        struct pl_session *ss = &s->slots[i];
        while (ss->used && ss->busy)
            pthread_cond_wait(&s->cond, &s->lock);
        if (ss->used && !ss->ended)
            end_locked(s, ss, "the daemon shut down");
    }
    pthread_mutex_unlock(&s->lock);
}

void pl_sessions_free(struct pl_sessions *s) {
    if (!s)
        return;
    pl_sessions_shutdown(s);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s->slots);
    free(s);
}

int pl_sessions_open(struct pl_sessions *s, const char *principal, const char *const *languages,
                     char ret_id[PL_SESSION_ID_LEN + 1], struct pl_error *err) {
    if (strlen(principal) >= sizeof(((struct pl_session *)0)->principal))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "principal too long");
    if (pl_admission_acquire(s->adm, principal, err) < 0)
        return -1;
    pthread_mutex_lock(&s->lock);
    struct pl_session *ss = NULL;
    if (s->closed) {
        pthread_mutex_unlock(&s->lock);
        pl_admission_release(s->adm, principal);
        return pl_error_set(err, PL_REASON_SHUTTING_DOWN, "the daemon is shutting down");
    }
    if (open_count_locked(s) < s->lim.max_sessions) {
        for (unsigned i = 0; i < s->nslots && !ss; i++)
            if (!s->slots[i].used)
                ss = &s->slots[i];
        if (!ss) /* every spare slot holds a tombstone: reuse the oldest */
            for (unsigned i = 0; i < s->nslots; i++)
                if (s->slots[i].ended && !s->slots[i].busy &&
                    (!ss || s->slots[i].ended_ns < ss->ended_ns))
                    ss = &s->slots[i];
    }
    if (!ss) {
        pthread_mutex_unlock(&s->lock);
        pl_admission_release(s->adm, principal);
        return pl_error_set(err, PL_REASON_AT_CAPACITY,
                            "every session slot (SANDBOX_MAX_SESSIONS=%u) is in use",
                            s->lim.max_sessions);
    }
    memset(ss, 0, sizeof(*ss));
    if (pl_random_hex(ss->id, sizeof(ss->id), 32) < 0) {
        pthread_mutex_unlock(&s->lock);
        pl_admission_release(s->adm, principal);
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness available");
    }
    char digest[65];
    pl_sha256_hex(ss->id, PL_SESSION_ID_LEN, digest);
    memcpy(ss->tag, digest, 16);
    snprintf(ss->principal, sizeof(ss->principal), "%s", principal);
    ss->used = true;
    ss->busy = true; /* opening */
    ss->opened_ns = ss->last_ns = pl_now_ns();
    pthread_mutex_unlock(&s->lock);

    struct pl_session_open o = {.principal = principal,
                                .memory_mb = s->lim.memory_mb,
                                .tag = ss->tag,
                                .languages = languages};
    void *h = NULL;
    int r = pl_provider_session_open(s->prov, &o, &h, err);
    pthread_mutex_lock(&s->lock);
    ss->busy = false;
    if (r < 0) {
        memset(ss, 0, sizeof(*ss));
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        pl_admission_release(s->adm, principal);
        if (err->reason != PL_REASON_AT_CAPACITY)
            err->reason = PL_REASON_INTERNAL;
        return -1;
    }
    ss->handle = h;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    ss->opened_ns = ss->last_ns = pl_now_ns();
    ss->opened_wall = (uint64_t)wall.tv_sec * 1000000000ull + (uint64_t)wall.tv_nsec;
    ss->expires_ns = ss->opened_ns + (uint64_t)s->lim.lifetime_s * 1000000000ull;
    for (size_t i = 0; languages && languages[i]; i++)
        ss->langs |= strcmp(languages[i], "python") == 0 ? 1 : 2;
    memcpy(ret_id, ss->id, PL_SESSION_ID_LEN + 1);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pl_log("info", "session opened",
           json_pack("{s:s, s:s}", "session", o.tag, "principal", principal));
    return 0;
}

/* Find the session with this id owned by principal; NULL otherwise.  The
 * id comparison is constant-time and every slot is looked at. */
static struct pl_session *find_locked(struct pl_sessions *s, const char *principal,
                                      const char *id) {
    struct pl_session *found = NULL;
    if (strlen(id) != PL_SESSION_ID_LEN)
        return NULL;
    for (unsigned i = 0; i < s->nslots; i++) {
        struct pl_session *ss = &s->slots[i];
        if (ss->used && CRYPTO_memcmp(ss->id, id, PL_SESSION_ID_LEN) == 0)
            found = ss;
    }
    if (found && strcmp(found->principal, principal) != 0)
        return NULL; /* another caller's: the same answer as an unknown id */
    return found;
}

static int no_such(struct pl_error *err) {
    return pl_error_set(err, PL_REASON_NOT_FOUND,
                        "session_id: no such session for this caller (unknown, closed long "
                        "ago, or another caller's)");
}

int pl_sessions_peek(struct pl_sessions *s, const char *principal, const char *id,
                     char *ret_ended_reason, size_t ended_reason_size, struct pl_error *err) {
    pthread_mutex_lock(&s->lock);
    struct pl_session *ss = find_locked(s, principal, id);
    int r = 0;
    if (!ss)
        r = no_such(err);
    else if (ss->ended)
        r = ended_error(err, ss->ended_reason, ret_ended_reason, ended_reason_size);
    pthread_mutex_unlock(&s->lock);
    return r;
}

int pl_sessions_begin(struct pl_sessions *s, const char *principal, const char *id,
                      struct pl_session **ret_session, char *ret_ended_reason,
                      size_t ended_reason_size, struct pl_error *err) {
    pthread_mutex_lock(&s->lock);
    struct pl_session *ss = find_locked(s, principal, id);
    if (!ss) {
        pthread_mutex_unlock(&s->lock);
        return no_such(err);
    }
    unsigned long ticket = ss->next_ticket++;
    while ((ss->serving != ticket || ss->busy) && ss->used)
        pthread_cond_wait(&s->cond, &s->lock);
    if (!ss->used || CRYPTO_memcmp(ss->id, id, PL_SESSION_ID_LEN) != 0) {
        pthread_mutex_unlock(&s->lock);
        return no_such(err); /* the tombstone was recycled while we waited */
    }
    if (ss->ended) {
        ss->serving++;
        pthread_cond_broadcast(&s->cond);
        ended_error(err, ss->ended_reason, ret_ended_reason, ended_reason_size);
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    ss->busy = true;
    if (ss->paused && ss->slot_given) {
        /* Its slot back first: without one the call is refused, and the
         * session stays as it is.  (principal is its owner's.) */
        pthread_mutex_unlock(&s->lock);
        int r = pl_admission_acquire(s->adm, principal, err);
        pthread_mutex_lock(&s->lock);
        if (r < 0) {
            ss->busy = false;
            ss->serving++;
            pthread_cond_broadcast(&s->cond);
            pthread_mutex_unlock(&s->lock);
            return -1;
        }
        ss->slot_given = false;
    }
    if (ss->paused) {
        void *h = ss->handle;
        pthread_mutex_unlock(&s->lock);
        struct pl_error rerr = {0};
        int r = pl_provider_session_resume(s->prov, h, &rerr);
        pthread_mutex_lock(&s->lock);
        ss->paused = false;
        if (r < 0) {
            ss->busy = false;
            end_locked(s, ss, "the sandbox could not be resumed after a pause");
            ss->serving++;
            pthread_cond_broadcast(&s->cond);
            ended_error(err, ss->ended_reason, ret_ended_reason, ended_reason_size);
            pthread_mutex_unlock(&s->lock);
            return -1;
        }
    }
    pthread_mutex_unlock(&s->lock);
    *ret_session = ss;
    return 0;
}

void *pl_session_handle(struct pl_session *ss) {
    return ss->handle;
}

const char *pl_session_previous_digest(struct pl_session *ss) {
    return ss->previous;
}

void pl_sessions_done(struct pl_sessions *s, struct pl_session *ss, const char *digest,
                      const char *ended_reason) {
    pthread_mutex_lock(&s->lock);
    if (digest) {
        snprintf(ss->previous, sizeof(ss->previous), "%s", digest);
        ss->calls++;
    }
    ss->last_ns = ss->last_call_ns = pl_now_ns();
    ss->busy = false;
    if (ended_reason)
        end_locked(s, ss, ended_reason);
    ss->serving++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

int pl_sessions_close(struct pl_sessions *s, const char *principal, const char *id,
                      struct pl_error *err) {
    struct pl_session *ss = NULL;
    int r = pl_sessions_begin(s, principal, id, &ss, NULL, 0, err);
    if (r < 0 && err->reason == PL_REASON_SESSION_ENDED) {
        /* Closing an ended session forgets it; not an error. */
        pthread_mutex_lock(&s->lock);
        struct pl_session *t = find_locked(s, principal, id);
        if (t && t->ended && !t->busy)
            memset(t, 0, sizeof(*t));
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    if (r < 0)
        return -1;
    pthread_mutex_lock(&s->lock);
    ss->busy = false;
    end_locked(s, ss, "its owner closed it");
    ss->serving++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* ---- what a caller may see of its sessions -------------------------------- */

/* A monotonic instant of ss's as the wall clock read it (see sessions.h). */
static uint64_t wall_of(const struct pl_session *ss, uint64_t mono) {
    return mono >= ss->opened_ns ? ss->opened_wall + (mono - ss->opened_ns)
                                 : ss->opened_wall - (ss->opened_ns - mono);
}

static void info_locked(struct pl_sessions *s, const struct pl_session *ss,
                        struct pl_session_info *ret) {
    memset(ret, 0, sizeof(*ret));
    memcpy(ret->id, ss->id, sizeof(ret->id));
    ret->state = ss->ended ? "ended" : ss->paused ? "paused" : "ready";
    if (ss->ended) {
        snprintf(ret->ended_reason, sizeof(ret->ended_reason), "%s", ss->ended_reason);
        ret->ended_at = wall_of(ss, ss->ended_ns);
    } else {
        ret->lifetime_deadline = wall_of(ss, ss->expires_ns);
        if (!ss->paused && pl_provider_pauses(s->prov) && ss->next_ticket == ss->serving)
            ret->idle_deadline = wall_of(ss, ss->last_ns + (uint64_t)s->lim.idle_s * 1000000000ull);
        /* The handle is valid while set: a close takes it under the lock
         * first (end_locked). */
        if (ss->handle)
            pl_provider_session_status(s->prov, ss->handle, &ret->status);
    }
    ret->created = ss->opened_wall;
    ret->last_call = ss->last_call_ns ? wall_of(ss, ss->last_call_ns) : 0;
    ret->calls = ss->calls;
    ret->calls_waiting = (unsigned)(ss->next_ticket - ss->serving);
    memcpy(ret->previous, ss->previous, sizeof(ret->previous));
    size_t n = 0;
    if (ss->langs & 1)
        ret->languages[n++] = "python";
    if (ss->langs & 2)
        ret->languages[n++] = "javascript";
    ret->max_lifetime_s = s->lim.max_lifetime_s;
}

int pl_sessions_get(struct pl_sessions *s, const char *principal, const char *id,
                    struct pl_session_info *ret, struct pl_error *err) {
    pthread_mutex_lock(&s->lock);
    struct pl_session *ss = find_locked(s, principal, id);
    /* One still opening has no sandbox yet: as good as unknown. */
    int r = ss && ss->opened_wall ? 0 : no_such(err);
    if (r == 0)
        info_locked(s, ss, ret);
    pthread_mutex_unlock(&s->lock);
    return r;
}

int pl_sessions_list(struct pl_sessions *s, const char *principal, struct pl_session_info **ret,
                     size_t *ret_n, struct pl_error *err) {
    *ret = NULL;
    *ret_n = 0;
    pthread_mutex_lock(&s->lock);
    size_t n = 0;
    for (unsigned i = 0; i < s->nslots; i++)
        if (s->slots[i].used && s->slots[i].opened_wall &&
            strcmp(s->slots[i].principal, principal) == 0)
            n++;
    struct pl_session_info *out = n ? calloc(n, sizeof(*out)) : NULL;
    /* Oldest open first: the slots' order is reuse's, not time's. */
    PL_AUTO_FREE const struct pl_session **order = n ? calloc(n, sizeof(*order)) : NULL;
    if (n && (!out || !order)) {
        pthread_mutex_unlock(&s->lock);
        free(out);
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    size_t k = 0;
    for (unsigned i = 0; i < s->nslots; i++) {
        const struct pl_session *ss = &s->slots[i];
        if (!ss->used || !ss->opened_wall || strcmp(ss->principal, principal) != 0)
            continue;
        size_t j = k++;
        for (; j > 0 && order[j - 1]->opened_ns > ss->opened_ns; j--)
            order[j] = order[j - 1];
        order[j] = ss;
    }
    for (size_t i = 0; i < n; i++)
        info_locked(s, order[i], &out[i]);
    pthread_mutex_unlock(&s->lock);
    *ret = out;
    *ret_n = n;
    return 0;
}

int pl_sessions_extend(struct pl_sessions *s, const char *principal, const char *id,
                       unsigned ends_in_s, struct pl_session_info *ret, char *ret_ended_reason,
                       size_t ended_reason_size, struct pl_error *err) {
    pthread_mutex_lock(&s->lock);
    struct pl_session *ss = find_locked(s, principal, id);
    int r = 0;
    uint64_t now = pl_now_ns();
    if (!ss || !ss->opened_wall) {
        r = no_such(err);
    } else if (ss->ended) {
        r = ended_error(err, ss->ended_reason, ret_ended_reason, ended_reason_size);
    } else {
        uint64_t last = ss->opened_ns + (uint64_t)s->lim.max_lifetime_s * 1000000000ull;
        uint64_t until = now + (uint64_t)ends_in_s * 1000000000ull;
        if (until > last) {
            r = pl_error_set(err, PL_REASON_INVALID_REQUEST,
                             "ends_in_s: %u s from now is past this daemon's "
                             "SANDBOX_SESSION_MAX_LIFETIME, %u s from the session's open; "
                             "it may ask at most %llu",
                             ends_in_s, s->lim.max_lifetime_s,
                             (unsigned long long)(last > now ? (last - now) / 1000000000ull : 0));
        } else {
            ss->expires_ns = until;
            ss->extended = true;
            info_locked(s, ss, ret);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return r;
}
