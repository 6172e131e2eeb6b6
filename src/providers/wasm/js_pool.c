/* SPDX-License-Identifier: Apache-2.0 */
/*
 * js_pool.c: the worker pool's processes (js_pool.h), in the daemon.
 *
 * Keeps N worker processes (plimsoll-js-worker, or plimsoll-wasi-worker
 * for a module pool), each connected by a private socketpair, and hands
 * each run to a free one (js_pool_run.c speaks the protocol with it).  A
 * worker that dies or misbehaves is replaced; a worker found dead while
 * idle is replaced transparently before a run is sent to it.
 *
 * Workers are started with posix_spawn() (vfork-style, safe in the
 * multi-threaded daemon, and the untrusted code then runs in a fresh
 * small image that holds none of the daemon's memory), with an empty
 * environment, stdin/stdout on /dev/null, stderr inherited for
 * diagnostics, the socket on fd 3 and every other fd closed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* posix_spawn_file_actions_addclosefrom_np */
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../core/clock.h"
#include "../../core/fdio.h"
#include "js_pool.h"
#include "protocol/js_proto.h"
#include "wasm_int.h"

#ifndef PL_JS_WORKER_DEFAULT_PATH
#define PL_JS_WORKER_DEFAULT_PATH "/usr/libexec/plimsoll/plimsoll-js-worker"
#endif

#define PL_JS_MAX_WORKERS 256
/* How long a new worker may take to say HELLO. */
#define PL_JS_SPAWN_TIMEOUT_NS PL_MS(10000)

const char *pl_js_quickjs_version(void) {
    return "QuickJS 2021-03-27 (wasm32-wasi, wasm2c; each run starts from a pre-initialised "
           "engine image) with the ES2023 built-ins it lacks added by "
           "plimsoll; not: class static blocks, #x in obj, RegExp d flag, Error cause, symbols as "
           "WeakMap keys";
}

/* Fill err (which may be NULL) with what failed and the system error r
 * (negative) behind it; returns r, so a caller can return the errno. */
__attribute__((format(printf, 3, 4))) static int fail(struct pl_error *err, int r, const char *fmt,
                                                      ...) {
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    pl_error_errno(err, PL_REASON_INTERNAL, r, "%s", what);
    return r;
}

/* ---- worker processes ------------------------------------------------------ */

/* Kill and reap a worker, close its socket.  Safe on an empty slot. */
void pl_js_worker_stop(struct pl_js_worker *w) {
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    if (w->pid > 0) {
        kill(w->pid, SIGKILL);
        while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        w->pid = 0;
    }
}

/* Start a worker in slot w (which must be empty) and wait for HELLO. */
static int worker_start(char *const *argv, struct pl_js_worker *w, struct pl_error *err) {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    struct pl_js_frame_hdr hdr;
    struct pl_js_hello hello;
    const char *path = argv[0];
    char *const envp[] = {NULL};
    sigset_t none, all;
    int sv[2], r;
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return fail(err, -errno, "socketpair");
    /* The pool's end only: its reads wait against a deadline
     * (pl_fd_read_full), the worker's end stays blocking. */
    r = pl_fd_set_nonblock(sv[0]);
    if (r < 0) {
        close(sv[0]);
        close(sv[1]);
        return fail(err, r, "socketpair");
    }
    if (sv[1] == 3) {
        /* dup2(3, 3) would keep FD_CLOEXEC set; move it first. */
        int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
        if (moved < 0) {
            r = -errno;
            close(sv[0]);
            close(sv[1]);
            return fail(err, r, "socketpair");
        }
        close(sv[1]);
        sv[1] = moved;
    }

    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    r = posix_spawn(&pid, path, &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(sv[1]);
    if (r != 0) {
        close(sv[0]);
        return fail(err, -r, "cannot start %s", path);
    }
    w->pid = pid;
    w->fd = sv[0];

    uint64_t hello_by = pl_now_ns() + PL_JS_SPAWN_TIMEOUT_NS;
    r = pl_fd_read_full(w->fd, &hdr, sizeof(hdr), hello_by, -1);
    if (r == 0)
        r = pl_js_check_hdr(&hdr, PL_JS_MSG_HELLO, sizeof(hello));
    if (r == 0 && hdr.len != sizeof(hello))
        r = -EPROTO;
    if (r == 0)
        r = pl_fd_read_full(w->fd, &hello, sizeof(hello), hello_by, -1);
    if (r < 0) {
        pl_js_worker_stop(w);
        return fail(err, r, "worker %s did not start", path);
    }
    return 0;
}

/* True if an idle worker has died or sent something unexpected. */
bool pl_js_worker_stale(const struct pl_js_worker *w) {
    struct pollfd pfd = {.fd = w->fd, .events = POLLIN};

    if (w->fd < 0)
        return true;
    return poll(&pfd, 1, 0) != 0;
}

int pl_js_worker_restart(struct pl_js_pool *pool, struct pl_js_worker *w) {
    int r;

    pl_js_worker_stop(w);
    r = worker_start(pool->argv, w, NULL);
    pthread_mutex_lock(&pool->lock);
    pool->respawns++;
    pthread_mutex_unlock(&pool->lock);
    return r;
}

/* ---- pool ------------------------------------------------------------------ */

int pl_js_pool_new_ex(unsigned workers, const char *worker_path, struct pl_js_pool **ret_pool,
                      struct pl_error *err) {
    return pl_js_pool_new_args(workers, worker_path, NULL, 0, ret_pool, err);
}

int pl_js_pool_new_args(unsigned workers, const char *worker_path, const char *const *args,
                        unsigned flags, struct pl_js_pool **ret_pool, struct pl_error *err) {
    struct pl_js_pool *pool;
    const char *path = worker_path;
    int r;

    if (!ret_pool || workers == 0 || workers > PL_JS_MAX_WORKERS)
        return fail(err, -EINVAL, "invalid arguments (workers must be 1..%d)", PL_JS_MAX_WORKERS);
    *ret_pool = NULL;
    if (!path || !*path)
        path = PL_JS_WORKER_DEFAULT_PATH;
    if (access(path, X_OK) != 0)
        return fail(err, -errno, "worker executable %s", path);

    pool = calloc(1, sizeof(*pool));
    if (!pool)
        return fail(err, -ENOMEM, "a pool of %u workers", workers);
    pool->w = calloc(workers, sizeof(*pool->w));
    pool->worker_path = strdup(path);
    if (!pool->w || !pool->worker_path) {
        free(pool->w);
        free(pool->worker_path);
        free(pool);
        return fail(err, -ENOMEM, "a pool of %u workers", workers);
    }
    pool->argv[0] = pool->worker_path;
    for (int i = 0; args && args[i] && i < 6; i++) {
        pool->argv[i + 1] = strdup(args[i]);
        if (!pool->argv[i + 1]) {
            for (int k = 1; k <= i; k++)
                free(pool->argv[k]);
            free(pool->w);
            free(pool->worker_path);
            free(pool);
            return fail(err, -ENOMEM, "a pool of %u workers", workers);
        }
    }
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->cond, NULL);
    pool->flags = flags;
    pool->n = workers;
    for (unsigned i = 0; i < workers; i++)
        pool->w[i].fd = -1;
    for (unsigned i = 0; i < workers; i++) {
        r = worker_start(pool->argv, &pool->w[i], err);
        if (r < 0) {
            pl_js_pool_free(pool);
            return r;
        }
    }
    *ret_pool = pool;
    return 0;
}

int pl_js_pool_new(unsigned workers, struct pl_js_pool **ret_pool, struct pl_error *err) {
    return pl_js_pool_new_ex(workers, NULL, ret_pool, err);
}

void pl_js_pool_free(struct pl_js_pool *pool) {
    if (!pool)
        return;
    for (unsigned i = 0; i < pool->n; i++)
        pl_js_worker_stop(&pool->w[i]);
    pthread_cond_destroy(&pool->cond);
    pthread_mutex_destroy(&pool->lock);
    free(pool->w);
    for (int k = 1; k < 8; k++)
        free(pool->argv[k]);
    free(pool->worker_path);
    free(pool);
}

unsigned pl_js_pool_worker_pids(struct pl_js_pool *pool, int *pids, unsigned max) {
    if (!pool)
        return 0;
    pthread_mutex_lock(&pool->lock);
    for (unsigned i = 0; i < pool->n && i < max; i++)
        pids[i] = (int)pool->w[i].pid;
    pthread_mutex_unlock(&pool->lock);
    return pool->n;
}

uint64_t pl_js_pool_respawns(struct pl_js_pool *pool) {
    uint64_t n;

    if (!pool)
        return 0;
    pthread_mutex_lock(&pool->lock);
    n = pool->respawns;
    pthread_mutex_unlock(&pool->lock);
    return n;
}

struct pl_js_worker *pl_js_pool_acquire(struct pl_js_pool *pool) {
    struct pl_js_worker *w = NULL;

    pthread_mutex_lock(&pool->lock);
    for (;;) {
        for (unsigned i = 0; i < pool->n; i++) {
            if (!pool->w[i].busy) {
                w = &pool->w[i];
                break;
            }
        }
        if (w)
            break;
        pthread_cond_wait(&pool->cond, &pool->lock);
    }
    w->busy = true;
    pthread_mutex_unlock(&pool->lock);
    return w;
}

void pl_js_pool_release(struct pl_js_pool *pool, struct pl_js_worker *w) {
    pthread_mutex_lock(&pool->lock);
    w->busy = false;
    pthread_cond_signal(&pool->cond);
    pthread_mutex_unlock(&pool->lock);
}
