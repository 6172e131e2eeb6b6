/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Scope-bound cleanup: a variable declared with one of these attributes is
 * released when it goes out of scope, on every path, so an error path is a
 * plain `return`.  Ownership is handed on with a TAKE macro, which returns
 * the value and leaves the variable owning nothing (NULL, -1, or a zeroed
 * struct), so the cleanup then does nothing.
 *
 *     PL_AUTO_FREE char *line = json_dumps(h, 0);
 *     PL_AUTO_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC);
 *     PL_AUTO_JSON json_t *doc = json_loads(text, 0, NULL);
 *     ...
 *     *ret_line = PL_TAKE_PTR(line);
 *
 * A value of a project type whose `x_clear(T *)` releases what it holds
 * (and does nothing to a zeroed one) takes PL_CLEANUP(x_clear) as it is:
 *
 *     PL_CLEANUP(pl_buf_free) struct pl_buf hdr = {0};
 *
 * A value that exists only to be cleaned up when the scope ends (say, a
 * container to remove on any early return) takes PL_GUARD(x_end).
 *
 * A pointer to an object freed by a NULL-safe `x_free(T *)` takes the
 * x_freep that PL_DEFINE_FREEP(T, x_free) declares next to the type.  See
 * docs/internals/cleanup.md.
 */
#pragma once

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define PL_CLEANUP(func) __attribute__((cleanup(func)))

/* A guard: a variable whose only use is the cleanup that ends its scope
 * (clang, unlike gcc, calls such a variable unused). */
#define PL_GUARD(func) __attribute__((cleanup(func), unused))

static inline void pl_freep(void *p) {
    free(*(void **)p);
}

/* errno survives: a cleanup runs after the code that set it. */
static inline void pl_closep(const int *fd) {
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}

static inline void pl_fclosep(FILE **f) {
    if (*f) {
        int saved = errno;
        fclose(*f);
        errno = saved;
    }
}

static inline void pl_json_decrefp(json_t **j) {
    json_decref(*j);
}

#define PL_AUTO_FREE PL_CLEANUP(pl_freep)
#define PL_AUTO_CLOSE PL_CLEANUP(pl_closep)
#define PL_AUTO_FCLOSE PL_CLEANUP(pl_fclosep)
#define PL_AUTO_JSON PL_CLEANUP(pl_json_decrefp)

/* The pointer, with the variable left NULL. */
#define PL_TAKE_PTR(p)                                                                             \
    ({                                                                                             \
        __typeof__(p) *pl_take_p_ = &(p);                                                          \
        __typeof__(p) pl_take_v_ = *pl_take_p_;                                                    \
        *pl_take_p_ = NULL;                                                                        \
        pl_take_v_;                                                                                \
    })

/* The descriptor, with the variable left -1. */
#define PL_TAKE_FD(fd)                                                                             \
    ({                                                                                             \
        int *pl_take_p_ = &(fd);                                                                   \
        int pl_take_v_ = *pl_take_p_;                                                              \
        *pl_take_p_ = -1;                                                                          \
        pl_take_v_;                                                                                \
    })

/* The struct's value, with the variable left zeroed. */
#define PL_TAKE_STRUCT(s)                                                                          \
    ({                                                                                             \
        __typeof__(s) *pl_take_p_ = &(s);                                                          \
        __typeof__(s) pl_take_v_ = *pl_take_p_;                                                    \
        *pl_take_p_ = (__typeof__(s)){0};                                                          \
        pl_take_v_;                                                                                \
    })

/* FUNCp(T **): FUNC(*p), for a NULL-safe FUNC(T *) that frees the object. */
#define PL_DEFINE_FREEP(type, func)                                                                \
    static inline void func##p(type **p) {                                                         \
        func(*p);                                                                                  \
    }
