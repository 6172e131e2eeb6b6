/*
 * pool.c: the warm pools.  Containers created and started with the run
 * configuration, each waiting for its one run; session sandboxes running
 * the interpreters callers ask for, each waiting for its one session.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "docker_int.h"

static int start_warm(struct docker_state *s, int which, char ret_id[72]) {
    char run_id[40] = "warm-";
    pl_random_hex(run_id + 5, sizeof(run_id) - 5, 12);
    struct pl_error e = {0};
    if (dk_create_container(s, which ? s->project_id : s->snippet_id, s->default_memory_mb, run_id,
                         NULL, ret_id, &e) < 0)
        return -1;
    char path[128];
    snprintf(path, sizeof(path), "/containers/%s/start", ret_id);
    if (dk_api_expect(s, "POST", path, NULL, 204, NULL, &e) < 0) {
        dk_reap_later(s, ret_id);
        return -1;
    }
    return 0;
}

/*
 * Drop every waiting container.  Called whenever the engine failed us: a
 * container started before an engine restart can still be listed as
 * running (containerd kept it) while its stdin is wired to nothing.
 */
void dk_flush_warm(struct docker_state *s) {
    char ids[2 * WARM_MAX][72];
    unsigned n = 0;
    pthread_mutex_lock(&s->lock);
    for (int w = 0; w < 2; w++) {
        for (unsigned i = 0; i < s->nwarm[w]; i++)
            memcpy(ids[n++], s->warm[w][i], 72);
        s->nwarm[w] = 0;
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    for (unsigned i = 0; i < n; i++)
        dk_reap_later(s, ids[i]);
}

void *dk_warmer_main(void *arg) {
    struct docker_state *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->warm_stop) {
        int which = s->nwarm[0] < s->set.warm ? 0 : s->nwarm[1] < s->set.warm ? 1 : -1;
        if (which < 0) {
            /* Full: look at the engine once a second; if it went away, what
             * waits may be unusable when it comes back. */
            struct timespec ts = pl_timespec_of(pl_deadline_in_ms(1000));
            if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT && !s->warm_stop) {
                pthread_mutex_unlock(&s->lock);
                long st = 0;
                struct pl_error e = {0};
                if (pl_docker_call(s->engine, "GET", "/_ping", NULL, 2000, &st, NULL, &e) < 0 ||
                    st != 200)
                    dk_flush_warm(s);
                pthread_mutex_lock(&s->lock);
            }
            continue;
        }
        pthread_mutex_unlock(&s->lock);
        char id[72];
        int r = start_warm(s, which, id);
        pthread_mutex_lock(&s->lock);
        if (r < 0) {
            /* The engine may be away: try again in a second. */
            struct timespec ts = pl_timespec_of(pl_deadline_in_ms(1000));
            pthread_cond_timedwait(&s->cond, &s->lock, &ts);
            continue;
        }
        if (s->warm_stop || s->nwarm[which] >= s->set.warm) {
            pthread_mutex_unlock(&s->lock);
            dk_reap_later(s, id);
            pthread_mutex_lock(&s->lock);
            continue;
        }
        memcpy(s->warm[which][s->nwarm[which]++], id, sizeof(id));
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Take a warm container for a run at the default allowance, if one is up. */
bool dk_take_warm(struct docker_state *s, int which, unsigned memory_mb, char ret_id[72]) {
    if (!s->set.warm || memory_mb != s->default_memory_mb)
        return false;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        bool have = s->nwarm[which] > 0;
        if (have)
            memcpy(ret_id, s->warm[which][--s->nwarm[which]], 72);
        pthread_cond_broadcast(&s->cond); /* the warmer refills */
        pthread_mutex_unlock(&s->lock);
        if (!have)
            return false;
        /* One that died (e.g. the engine restarted) is dropped, not used. */
        char path[128];
        snprintf(path, sizeof(path), "/containers/%s/json", ret_id);
        json_t *ins = NULL;
        struct pl_error e = {0};
        bool running = dk_api_expect(s, "GET", path, NULL, 200, &ins, &e) == 0 &&
                       pl_docker_state_flag(ins, "Running");
        json_decref(ins);
        if (running)
            return true;
        dk_reap_later(s, ret_id);
    }
}

void dk_warm_stop_and_drain(struct docker_state *s) {
    if (!s->warmer_started)
        return;
    pthread_mutex_lock(&s->lock);
    s->warm_stop = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->warmer, NULL);
    s->warmer_started = false;
    for (int w = 0; w < 2; w++)
        for (unsigned i = 0; i < s->nwarm[w]; i++)
            dk_reap_later(s, s->warm[w][i]);
    s->nwarm[0] = s->nwarm[1] = 0;
}

/*
 * The sessions' warm pool (SANDBOX_SESSION_POOL): containers created,
 * started and running an interpreter of each language the image runs, each
 * never having run anyone's code, each given to one session.
 */
void *dk_session_pool_main(void *arg) {
    struct docker_state *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->pool_stop) {
        if (s->npool >= s->pool_n) {
            pthread_cond_wait(&s->pool_cond, &s->lock);
            continue;
        }
        /* The mix callers asked for, weighed against what already waits:
         * the mask whose demand has the fewest waiting sandboxes per ask. */
        unsigned mask = 3, waiting[4] = {0};
        for (unsigned i = 0; i < s->npool; i++)
            waiting[s->pool[i]->mask]++;
        double best = -1;
        for (unsigned m = 1; m <= 3; m++) {
            double score = s->demand[m] / (1.0 + waiting[m]);
            if (s->demand[m] && score > best) {
                best = score;
                mask = m;
            }
        }
        pthread_mutex_unlock(&s->lock);
        char tag[17] = "pool-";
        pl_random_hex(tag + 5, sizeof(tag) - 5, 5);
        struct dsession *d = NULL;
        struct pl_error err = {0};
        const bool langs[2] = {mask & 1, (mask & 2) != 0};
        int r = dk_session_create(s, tag, s->default_memory_mb, langs, &d, &err);
        if (r == 0)
            d->mask = mask;
        pthread_mutex_lock(&s->lock);
        if (r < 0) {
            /* The engine may be down: try again in a second. */
            struct timespec ts = pl_timespec_of(pl_deadline_in_ms(1000));
            pthread_cond_timedwait(&s->pool_cond, &s->lock, &ts);
            continue;
        }
        if (s->pool_stop || s->npool >= s->pool_n) {
            pthread_mutex_unlock(&s->lock);
            dk_reap_later(s, d->id);
            dk_dsession_free(d);
            pthread_mutex_lock(&s->lock);
            continue;
        }
        s->pool[s->npool++] = d;
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* A waiting sandbox for a session whose hint is want (a mask; 3 without a
 * hint): one that runs every hinted interpreter if any does, else any. */
struct dsession *dk_pool_take(struct docker_state *s, unsigned memory_mb, unsigned want) {
    struct dsession *d = NULL;
    if (!s->pool_n)
        return NULL;
    pthread_mutex_lock(&s->lock);
    s->demand[want]++;
    if (s->demand[want] > 64) /* decay: recent asks weigh more */
        for (unsigned m = 1; m <= 3; m++)
            s->demand[m] /= 2;
    if (memory_mb != s->default_memory_mb) {
        pthread_mutex_unlock(&s->lock);
        return NULL;
    }
    unsigned pick = s->npool;
    for (unsigned i = 0; i < s->npool && pick == s->npool; i++)
        if ((s->pool[i]->mask & want) == want)
            pick = i;
    if (pick == s->npool && s->npool > 0)
        pick = s->npool - 1;
    if (pick < s->npool) {
        d = s->pool[pick];
        s->pool[pick] = s->pool[--s->npool];
    }
    pthread_cond_broadcast(&s->pool_cond); /* the filler makes another */
    pthread_mutex_unlock(&s->lock);
    return d;
}

void dk_pool_stop_and_drain(struct docker_state *s) {
    if (!s->pool_started)
        return;
    pthread_mutex_lock(&s->lock);
    s->pool_stop = true;
    pthread_cond_broadcast(&s->pool_cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->pool_thread, NULL);
    s->pool_started = false;
    for (unsigned i = 0; i < s->npool; i++) {
        dk_kill_container(s, s->pool[i]->id);
        dk_reap_later(s, s->pool[i]->id);
        dk_dsession_free(s->pool[i]);
    }
    s->npool = 0;
}
