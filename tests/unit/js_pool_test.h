/* SPDX-License-Identifier: Apache-2.0 */
/*
 * js_pool_test.h: what test_js_pool.c and test_js_pool_protocol.c share:
 * the CHECK counter, the default limits, run() and the two pools on the
 * real worker (PLIMSOLL_JS_WORKER, else the one in this build tree) that
 * each executable's setup starts.  Each group of CHECKs is one cmocka
 * test (CASE), which fails when any of its CHECKs did.
 */
#pragma once
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../src/providers/wasm/js_pool.h"

static int g_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                        \
            g_failures++;                                                                          \
        }                                                                                          \
    } while (0)

static const struct pl_js_limits k_default = {
    .memory_bytes = 64ull << 20,
    .timeout_ms = 2000,
    .stdout_cap = 1 << 20,
    .stderr_cap = 1 << 20,
};

/* Run code; on infrastructure failure print it and return the error. */
static inline int run(struct pl_js_pool *pool, const char *code, const char *in,
                      const struct pl_js_limits *lim, struct pl_js_result *res) {
    int r = pl_js_pool_run(pool, code, strlen(code), in, in ? strlen(in) : 0,
                           lim ? lim : &k_default, res);
    if (r < 0) {
        fprintf(stderr, "  run(%.40s...) failed: %s\n", code, strerror(-r));
        /* Keep the checks that follow from crashing on NULL. */
        res->out.data = calloc(1, 1);
        res->err.data = calloc(1, 1);
    }
    return r;
}

static inline bool contains(const struct pl_js_result *r, const char *stream, const char *needle) {
    const char *hay = strcmp(stream, "out") == 0 ? r->out.data : r->err.data;

    return hay && strstr(hay, needle) != NULL;
}

/* Two workers (g_pool) and one (g_pool1), for the whole executable. */
static struct pl_js_pool *g_pool, *g_pool1;

static inline const char *worker_path(void) {
    const char *p = getenv("PLIMSOLL_JS_WORKER");
    return p && *p ? p : PL_JS_WORKER_BUILD_PATH;
}

static int setup(void **state) {
    (void)state;
    struct pl_error err = {0};
    printf("runtime: %s\n", pl_js_quickjs_version());
    if (pl_js_pool_new_ex(2, worker_path(), &g_pool, &err) < 0 ||
        pl_js_pool_new_ex(1, worker_path(), &g_pool1, &err) < 0) {
        fprintf(stderr, "pl_js_pool_new: %s\n", err.message);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pl_js_pool_free(g_pool);
    pl_js_pool_free(g_pool1);
    pl_js_result_free(NULL);
    pl_js_pool_free(NULL);
    return 0;
}

#define CASE(fn, pool)                                                                             \
    static void case_##fn(void **state) {                                                          \
        (void)state;                                                                               \
        int before = g_failures;                                                                   \
        fn(pool);                                                                                  \
        if (g_failures != before)                                                                  \
            fail_msg("%d check(s) failed in " #fn, g_failures - before);                           \
    }
