/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.c: fixed-shape counters rendered in Prometheus text format. */
#include "metrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const double bucket_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                       0.25,   0.5,   1,      2.5,   5,    10,    30,   60};
#define NBUCKETS (sizeof(bucket_bounds) / sizeof(bucket_bounds[0]))

/* What runs cost: CPU seconds and peak bytes, by payload kind (a fixed
 * list: the label's values are these and nothing else). */
static const double cpu_bounds[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                    1,     2.5,   5,    10,    30,   60,  300};
#define NCPU (sizeof(cpu_bounds) / sizeof(cpu_bounds[0]))
static const double mem_bounds[] = {
    1048576,   4194304,    16777216,     33554432,     67108864,     134217728,    268435456,
    536870912, 1073741824, 2147483648.0, 4294967296.0, 8589934592.0, 17179869184.0};
#define NMEM (sizeof(mem_bounds) / sizeof(mem_bounds[0]))
static const char *const usage_kinds[] = {"snippet", "module", "project", "cell"};
#define NKINDS (sizeof(usage_kinds) / sizeof(usage_kinds[0]))

_Static_assert(NCPU <= 16 && NMEM <= 16, "struct histogram holds 16 buckets");

/* One histogram's counts: cumulative per bucket, as rendered. */
struct histogram {
    uint64_t buckets[16];
    uint64_t count;
    double sum;
};

/* The method label: the service's methods, gRPC's health and reflection
 * (as the log line names them), and "other" for anything else, so a
 * caller's path never becomes a label. */
static const char *const method_names[] = {
    "Describe",      "Run",          "RunStream",    "OpenSession", "RunInSession",  "RunCell",
    "RunCellStream", "CloseSession", "ListSessions", "GetSession",  "ExtendSession", "WriteFiles",
    "ReadFile",      "ListFiles",    "Explain",      "metrics",     "preflight",     "health.Check",
    "health.Watch",  "reflection",   "mcp",          "other"};
#define NMETHODS (sizeof(method_names) / sizeof(method_names[0]))

static const char *const outcome_names[PL_RUN__COUNT] = {
#define PL_X(sym, name) [PL_RUN_##sym] = name,
    PL_RUN_OUTCOMES(PL_X)
#undef PL_X
};

struct pl_metrics {
    pthread_mutex_t lock;
    uint64_t runs[PL_RUN__COUNT][PL_TIER__COUNT];
    uint64_t refusals[PL_REASON__COUNT];
    uint64_t broker_forwarded, broker_refused;
    uint64_t cells_uplink, cells_exec;
    uint64_t requests[NMETHODS][PL_CODE__COUNT + 1]; /* last column: ok */
    uint64_t buckets[NBUCKETS];
    uint64_t count;
    double sum;
    const char *provider; /* the usage histograms' label */
    struct histogram cpu[NKINDS], mem[NKINDS];
};

struct pl_metrics *pl_metrics_new(void) {
    struct pl_metrics *m = calloc(1, sizeof(*m));
    if (m)
        pthread_mutex_init(&m->lock, NULL);
    return m;
}

void pl_metrics_free(struct pl_metrics *m) {
    if (!m)
        return;
    pthread_mutex_destroy(&m->lock);
    free(m);
}

void pl_metrics_run(struct pl_metrics *m, enum pl_run_outcome o, enum pl_tier t, uint64_t ns) {
    double s = (double)ns / 1e9;
    pthread_mutex_lock(&m->lock);
    if ((unsigned)o < PL_RUN__COUNT && (unsigned)t < PL_TIER__COUNT)
        m->runs[o][t]++;
    for (size_t i = 0; i < NBUCKETS; i++)
        if (s <= bucket_bounds[i])
            m->buckets[i]++;
    m->count++;
    m->sum += s;
    pthread_mutex_unlock(&m->lock);
}

void pl_metrics_set_provider(struct pl_metrics *m, const char *provider) {
    pthread_mutex_lock(&m->lock);
    m->provider = provider;
    pthread_mutex_unlock(&m->lock);
}

static void observe(struct histogram *h, const double *bounds, size_t n, double v) {
    for (size_t i = 0; i < n; i++)
        if (v <= bounds[i])
            h->buckets[i]++;
    h->count++;
    h->sum += v;
}

void pl_metrics_usage(struct pl_metrics *m, enum pl_payload_kind kind, uint64_t cpu_us,
                      uint64_t memory_peak_bytes) {
    const char *name = pl_payload_name(kind);
    size_t k = NKINDS;
    for (size_t i = 0; name && i < NKINDS; i++)
        if (strcmp(name, usage_kinds[i]) == 0)
            k = i;
    if (k == NKINDS)
        return;
    pthread_mutex_lock(&m->lock);
    observe(&m->cpu[k], cpu_bounds, NCPU, (double)cpu_us / 1e6);
    if (memory_peak_bytes)
        observe(&m->mem[k], mem_bounds, NMEM, (double)memory_peak_bytes);
    pthread_mutex_unlock(&m->lock);
}

/* One usage histogram family, every kind. */
static int render_usage(struct pl_buf *o, const char *name, const char *help,
                        const struct histogram *h, const double *bounds, size_t n,
                        const char *provider) {
    int r = pl_buf_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (size_t k = 0; k < NKINDS; k++) {
        for (size_t i = 0; i < n; i++)
            r |= pl_buf_printf(o, "%s_bucket{provider=\"%s\",kind=\"%s\",le=\"%.15g\"} %llu\n",
                               name, provider, usage_kinds[k], bounds[i],
                               (unsigned long long)h[k].buckets[i]);
        r |= pl_buf_printf(o,
                           "%s_bucket{provider=\"%s\",kind=\"%s\",le=\"+Inf\"} %llu\n"
                           "%s_sum{provider=\"%s\",kind=\"%s\"} %.9g\n"
                           "%s_count{provider=\"%s\",kind=\"%s\"} %llu\n",
                           name, provider, usage_kinds[k], (unsigned long long)h[k].count, name,
                           provider, usage_kinds[k], h[k].sum, name, provider, usage_kinds[k],
                           (unsigned long long)h[k].count);
    }
    return r;
}

void pl_metrics_broker(struct pl_metrics *m, unsigned forwarded, unsigned refused) {
    pthread_mutex_lock(&m->lock);
    m->broker_forwarded += forwarded;
    m->broker_refused += refused;
    pthread_mutex_unlock(&m->lock);
}

void pl_metrics_cell(struct pl_metrics *m, bool uplink) {
    pthread_mutex_lock(&m->lock);
    if (uplink)
        m->cells_uplink++;
    else
        m->cells_exec++;
    pthread_mutex_unlock(&m->lock);
}

void pl_metrics_refusal(struct pl_metrics *m, enum pl_reason r) {
    pthread_mutex_lock(&m->lock);
    if ((unsigned)r < PL_REASON__COUNT)
        m->refusals[r]++;
    pthread_mutex_unlock(&m->lock);
}

void pl_metrics_request(struct pl_metrics *m, const char *method, enum pl_code code, int ok) {
    size_t mi = NMETHODS - 1;
    for (size_t i = 0; i < NMETHODS; i++)
        if (strcmp(method, method_names[i]) == 0)
            mi = i;
    size_t ci = ok ? PL_CODE__COUNT : (size_t)code;
    if (ci > PL_CODE__COUNT)
        return;
    pthread_mutex_lock(&m->lock);
    m->requests[mi][ci]++;
    pthread_mutex_unlock(&m->lock);
}

int pl_metrics_render(struct pl_metrics *m, unsigned in_flight, int ready, struct pl_buf *o) {
    struct pl_metrics s;
    pthread_mutex_lock(&m->lock);
    memcpy(&s, m, sizeof(s));
    pthread_mutex_unlock(&m->lock);
    int r = 0;
    r |= pl_buf_puts(o, "# HELP plimsoll_runs_total Answered runs by outcome and isolation tier.\n"
                        "# TYPE plimsoll_runs_total counter\n");
    for (unsigned i = 0; i < PL_RUN__COUNT; i++)
        for (unsigned t = 0; t < PL_TIER__COUNT; t++)
            r |= pl_buf_printf(o, "plimsoll_runs_total{outcome=\"%s\",isolation=\"%s\"} %llu\n",
                               outcome_names[i], pl_tier_name((enum pl_tier)t),
                               (unsigned long long)s.runs[i][t]);
    r |= pl_buf_puts(o, "# HELP plimsoll_refusals_total Typed refusals and errors by reason.\n"
                        "# TYPE plimsoll_refusals_total counter\n");
    for (unsigned i = 1; i < PL_REASON__COUNT; i++)
        r |= pl_buf_printf(o, "plimsoll_refusals_total{reason=\"%s\"} %llu\n",
                           pl_reason_name((enum pl_reason)i), (unsigned long long)s.refusals[i]);
    r |=
        pl_buf_printf(o,
                      "# HELP plimsoll_broker_requests_total Guest requests to grant brokers.\n"
                      "# TYPE plimsoll_broker_requests_total counter\n"
                      "plimsoll_broker_requests_total{outcome=\"forwarded\"} %llu\n"
                      "plimsoll_broker_requests_total{outcome=\"refused\"} %llu\n",
                      (unsigned long long)s.broker_forwarded, (unsigned long long)s.broker_refused);
    r |= pl_buf_printf(o,
                       "# HELP plimsoll_session_cells_total Cells run, by how they reached the "
                       "kept interpreter.\n"
                       "# TYPE plimsoll_session_cells_total counter\n"
                       "plimsoll_session_cells_total{path=\"uplink\"} %llu\n"
                       "plimsoll_session_cells_total{path=\"exec\"} %llu\n",
                       (unsigned long long)s.cells_uplink, (unsigned long long)s.cells_exec);
    r |= pl_buf_puts(o, "# HELP plimsoll_requests_total API calls by method and result code.\n"
                        "# TYPE plimsoll_requests_total counter\n");
    for (unsigned i = 0; i < NMETHODS; i++)
        for (unsigned c = 0; c <= PL_CODE__COUNT; c++)
            if (s.requests[i][c])
                r |= pl_buf_printf(o, "plimsoll_requests_total{method=\"%s\",code=\"%s\"} %llu\n",
                                   method_names[i],
                                   c == PL_CODE__COUNT ? "ok" : pl_code_name((enum pl_code)c),
                                   (unsigned long long)s.requests[i][c]);
    r |= pl_buf_printf(o,
                       "# HELP plimsoll_in_flight Runs in progress.\n"
                       "# TYPE plimsoll_in_flight gauge\nplimsoll_in_flight %u\n"
                       "# HELP plimsoll_ready 1 when the provider's readiness holds.\n"
                       "# TYPE plimsoll_ready gauge\nplimsoll_ready %d\n",
                       in_flight, ready ? 1 : 0);
    r |= pl_buf_puts(o, "# HELP plimsoll_run_duration_seconds Run latency from dispatch to "
                        "answer.\n# TYPE plimsoll_run_duration_seconds histogram\n");
    for (size_t i = 0; i < NBUCKETS; i++)
        r |= pl_buf_printf(o, "plimsoll_run_duration_seconds_bucket{le=\"%g\"} %llu\n",
                           bucket_bounds[i], (unsigned long long)s.buckets[i]);
    r |= pl_buf_printf(o,
                       "plimsoll_run_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
                       "plimsoll_run_duration_seconds_sum %.9f\n"
                       "plimsoll_run_duration_seconds_count %llu\n",
                       (unsigned long long)s.count, s.sum, (unsigned long long)s.count);
    const char *prov = s.provider ? s.provider : "none";
    r |= render_usage(o, "plimsoll_run_cpu_seconds",
                      "CPU time (user and system) an answered run cost, as its provider "
                      "measured it.",
                      s.cpu, cpu_bounds, NCPU, prov);
    r |= render_usage(o, "plimsoll_run_memory_peak_bytes",
                      "The most memory an answered run held at once, as its provider measured "
                      "it.",
                      s.mem, mem_bounds, NMEM, prov);
    return r ? -1 : 0;
}
