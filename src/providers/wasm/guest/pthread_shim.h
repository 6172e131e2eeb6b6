/* SPDX-License-Identifier: Apache-2.0 */
/*
 * No-op pthreads for building QuickJS for wasm32-wasi.
 *
 * wasi-libc (Debian 12) ships no pthread.h, but QuickJS includes it for
 * Atomics.wait/notify.  scripts/build/quickjs-wasm writes a pthread.h that
 * includes this file into the engine's own build directory, on that
 * compile's include path only, so nothing in the tree is named like a
 * system header.  The guest is single-threaded and never calls
 * JS_SetCanBlock(), so Atomics.wait throws before it reaches these calls;
 * they only need to compile.  Every function succeeds and does nothing,
 * except the waits, which return at once (a timed wait reports ETIMEDOUT).
 */
#ifndef PLIMSOLL_GUEST_PTHREAD_SHIM_H
#define PLIMSOLL_GUEST_PTHREAD_SHIM_H

#include <errno.h>
#include <time.h>

typedef struct {
    int unused;
} pthread_mutex_t;
typedef struct {
    int unused;
} pthread_cond_t;
typedef struct {
    int unused;
} pthread_mutexattr_t;
typedef struct {
    int unused;
} pthread_condattr_t;

#define PTHREAD_MUTEX_INITIALIZER                                                                  \
    { 0 }
#define PTHREAD_COND_INITIALIZER                                                                   \
    { 0 }

static inline int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a) {
    (void)m;
    (void)a;
    return 0;
}
static inline int pthread_mutex_destroy(pthread_mutex_t *m) {
    (void)m;
    return 0;
}
static inline int pthread_mutex_lock(pthread_mutex_t *m) {
    (void)m;
    return 0;
}
static inline int pthread_mutex_unlock(pthread_mutex_t *m) {
    (void)m;
    return 0;
}
static inline int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a) {
    (void)c;
    (void)a;
    return 0;
}
static inline int pthread_cond_destroy(pthread_cond_t *c) {
    (void)c;
    return 0;
}
static inline int pthread_cond_signal(pthread_cond_t *c) {
    (void)c;
    return 0;
}
static inline int pthread_cond_broadcast(pthread_cond_t *c) {
    (void)c;
    return 0;
}
static inline int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
    (void)c;
    (void)m;
    return 0;
}
static inline int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                         const struct timespec *t) {
    (void)c;
    (void)m;
    (void)t;
    return ETIMEDOUT;
}

#endif
