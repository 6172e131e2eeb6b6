/* SPDX-License-Identifier: Apache-2.0 */
/*
 * usage.c: what a run or a session call cost, as E2B's own metrics of its
 * VM say (GET /sandboxes/{id}/metrics, which run.c asks for;
 * docs/providers/e2b.md, "What a run cost").  E2B samples each VM every
 * few seconds: a sample is the VM's CPU use in percent of its cores and
 * its memory in use, at one whole second.
 * The CPU time is estimated from consecutive samples, the memory peak is
 * the largest sample; a run shorter than the sampling, or whose samples
 * E2B has not published yet, has none (usage_absent says so).  Every byte
 * of the answer is the service's: a sample that is not what the contract
 * says is refused, never guessed at.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_int.h"

struct sample {
    long long t;  /* timestampUnix */
    double cpus;  /* cpuCount * cpuUsedPct / 100: cores busy */
    uint64_t mem; /* memUsed */
};

static int by_time(const void *a, const void *b) {
    const struct sample *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* One SandboxMetric: 0, 1 when outside the window, -1 when malformed. */
static int read_sample(const json_t *o, long long start_s, long long end_s, struct sample *ret) {
    const json_t *t = json_object_get(o, "timestampUnix");
    const json_t *n = json_object_get(o, "cpuCount");
    const json_t *pct = json_object_get(o, "cpuUsedPct");
    const json_t *mem = json_object_get(o, "memUsed");
    if (!json_is_object(o) || !json_is_integer(t) || !json_is_integer(n) || !json_is_number(pct) ||
        !json_is_integer(mem))
        return -1;
    double p = json_number_value(pct);
    json_int_t cores = json_integer_value(n), used = json_integer_value(mem);
    /* A percentage of all the VM's cores: 0 to 100, a little over for
     * rounding; anything else is not a reading. */
    if (!isfinite(p) || p < 0 || p > 101 || cores < 1 || cores > 1024 || used < 0)
        return -1;
    ret->t = (long long)json_integer_value(t);
    if (ret->t < start_s || ret->t > end_s)
        return 1;
    ret->cpus = (double)cores * (p > 100 ? 100 : p) / 100.0;
    ret->mem = (uint64_t)used;
    return 0;
}

int eb_usage_of(const json_t *samples, long long start_s, long long end_s, struct pl_usage *ret,
                char *why, size_t why_len) {
    memset(ret, 0, sizeof(*ret));
    if (!json_is_array(samples)) {
        snprintf(why, why_len, "e2b's metrics are not a list of samples");
        return -1;
    }
    size_t n = json_array_size(samples);
    if (n > EB_USAGE_MAX_SAMPLES)
        n = EB_USAGE_MAX_SAMPLES; /* the oldest first, as E2B lists them */
    struct sample *v = calloc(n ? n : 1, sizeof(*v));
    if (!v) {
        snprintf(why, why_len, "out of memory reading e2b's metrics");
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int r = read_sample(json_array_get(samples, i), start_s, end_s, &v[k]);
        if (r < 0) {
            free(v);
            snprintf(why, why_len, "e2b's metrics hold a sample that is not one");
            return -1;
        }
        if (r == 0)
            k++;
    }
    qsort(v, k, sizeof(*v), by_time);
    /* Samples of one second are one: the later of them stands. */
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m > 0 && v[m - 1].t == v[i].t)
            m--;
        v[m++] = v[i];
    }
    if (m < 2) {
        free(v);
        snprintf(why, why_len,
                 "e2b's metrics held %s sample%s of the VM within the run (it samples every "
                 "few seconds, and publishes them late)",
                 m ? "one" : "no", m ? "" : "s");
        return -1;
    }
    double cpu_s = 0;
    uint64_t peak = v[0].mem;
    for (size_t i = 1; i < m; i++) {
        cpu_s += v[i].cpus * (double)(v[i].t - v[i - 1].t);
        if (v[i].mem > peak)
            peak = v[i].mem;
    }
    free(v);
    *ret = (struct pl_usage){.present = true,
                             .cpu_user_us =
                                 cpu_s * 1e6 >= 1.8e19 ? UINT64_MAX : (uint64_t)(cpu_s * 1e6),
                             .memory_peak_bytes = peak,
                             .source = "service"};
    return 0;
}
