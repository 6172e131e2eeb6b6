/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine.c: the wasm engine's own lifecycle, without the daemon, for
 * bench/run's comparison with the same snippet over HTTP.
 *
 *   bench-engine WORKER N           N runs of console.log(2), one after the
 *                                   other, on a pool of one worker
 *   bench-engine WORKER N THREADS   the same N runs from THREADS threads at
 *                                   once on a pool of THREADS workers
 *
 * A run is what the provider asks of its pool: pl_js_pool_run() with the
 * daemon's default limits (256 MiB, 30 s, 1 MiB of output), timed from the
 * call to the result: the worker round trip, the run on the engine's image
 * and, when the next run comes before the last restore has finished, the
 * wait for it.  Prints one JSON object: n, p50_us, p95_us, p99_us,
 * mean_us, min_us, guest_p50_us (the worker's own time for the run),
 * per_s (runs a second over the whole series) and bad (runs that did not
 * print "2").  Timing only; the tests say whether answers are right.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/providers/wasm/js_pool.h"
#include "clock.h"

#define SNIPPET "console.log(2)"
#define WARMUP 200

static const struct pl_js_limits k_limits = {
    .memory_bytes = 256ull << 20,
    .timeout_ms = 30000,
    .stdout_cap = 1 << 20,
    .stderr_cap = 1 << 20,
};

struct series {
    struct pl_js_pool *pool;
    double *t;     /* per run, µs */
    double *guest; /* per run, µs */
    int from, to;  /* this thread's runs */
    int bad;
};

static void *runs(void *arg) {
    struct series *s = arg;

    for (int i = s->from; i < s->to; i++) {
        struct pl_js_result r;
        double t0 = now_us();
        int rc = pl_js_pool_run(s->pool, SNIPPET, strlen(SNIPPET), NULL, 0, &k_limits, &r);
        double dt = now_us() - t0;

        if (i >= 0) {
            s->t[i] = dt;
            s->guest[i] = rc == 0 ? (double)r.guest_ns / 1e3 : 0;
            s->bad += rc != 0 || r.exit_code != 0 || !r.out.data || strcmp(r.out.data, "2\n");
        }
        if (rc == 0)
            pl_js_result_free(&r);
    }
    return NULL;
}

int main(int argc, char **argv) {
    struct pl_js_pool *pool;
    struct pl_error err = {0};
    int n = argc >= 3 ? atoi(argv[2]) : 0;
    int threads = argc >= 4 ? atoi(argv[3]) : 1;

    if (argc < 3 || n < 1 || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: bench-engine WORKER N [THREADS]\n");
        return 2;
    }
    if (pl_js_pool_new_ex((unsigned)threads, argv[1], &pool, &err) < 0) {
        fprintf(stderr, "bench-engine: %s\n", err.message);
        return 1;
    }
    double *t = calloc((size_t)n, sizeof(*t)), *guest = calloc((size_t)n, sizeof(*guest));
    struct series *s = calloc((size_t)threads, sizeof(*s));
    pthread_t *th = calloc((size_t)threads, sizeof(*th));
    if (!t || !guest || !s || !th)
        return 1;

    struct series warm = {.pool = pool, .t = t, .guest = guest, .from = -WARMUP, .to = 0};
    runs(&warm);
    double t0 = now_us();
    for (int k = 0; k < threads; k++) {
        s[k] = (struct series){.pool = pool,
                               .t = t,
                               .guest = guest,
                               .from = (int)((long)n * k / threads),
                               .to = (int)((long)n * (k + 1) / threads)};
        if (pthread_create(&th[k], NULL, runs, &s[k]) != 0)
            return 1;
    }
    int bad = 0;
    for (int k = 0; k < threads; k++) {
        pthread_join(th[k], NULL);
        bad += s[k].bad;
    }
    double secs = (now_us() - t0) / 1e6;

    qsort(guest, (size_t)n, sizeof(*guest), cmp_double);
    printf("{");
    print_series(t, n);
    printf(",\"guest_p50_us\":%.1f,\"per_s\":%.0f,\"threads\":%d,\"bad\":%d}\n", guest[n / 2],
           n / secs, threads, bad);
    pl_js_pool_free(pool);
    free(t);
    free(guest);
    free(s);
    free(th);
    return bad ? 1 : 0;
}
