/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h: counters behind GET /metrics (Prometheus text format 0.0.4).
 *
 *   plimsoll_runs_total{outcome,isolation}    answered runs
 *   plimsoll_refusals_total{reason}           typed refusals and errors
 *   plimsoll_requests_total{method,code}      every API call
 *   plimsoll_broker_requests_total{outcome}   guest requests to brokers:
 *                                             forwarded | refused
 *   plimsoll_in_flight                        runs in progress
 *   plimsoll_ready                            1 when readiness holds
 *   plimsoll_run_duration_seconds             histogram of run latency
 *   plimsoll_run_cpu_seconds{provider,kind}   histogram of what runs cost:
 *   plimsoll_run_memory_peak_bytes{provider,kind}  CPU (user + system) and
 *                                             peak memory (docs/api.md,
 *                                             "Usage")
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"
#include "request.h"
#include "tier.h"

#define PL_RUN_OUTCOMES(X)                                                                         \
    X(EXIT_ZERO, "exit_zero")                                                                      \
    X(EXIT_NONZERO, "exit_nonzero")                                                                \
    X(TIMED_OUT, "timed_out")                                                                      \
    X(OUT_OF_MEMORY, "out_of_memory")

enum pl_run_outcome {
#define PL_X(sym, name) PL_RUN_##sym,
    PL_RUN_OUTCOMES(PL_X)
#undef PL_X
        PL_RUN__COUNT
};

struct pl_metrics;

struct pl_metrics *pl_metrics_new(void);
void pl_metrics_free(struct pl_metrics *m);

void pl_metrics_run(struct pl_metrics *m, enum pl_run_outcome outcome, enum pl_tier tier,
                    uint64_t duration_ns);
void pl_metrics_refusal(struct pl_metrics *m, enum pl_reason reason);
/* One run's broker counters, added when the run ends. */
void pl_metrics_broker(struct pl_metrics *m, unsigned forwarded, unsigned refused);
/* The provider's name, the usage histograms' provider label (static). */
void pl_metrics_set_provider(struct pl_metrics *m, const char *provider);
/* What one answered run cost (its usage): CPU, user and system together,
 * and its memory peak (0: not measured, not counted).  kind: snippet,
 * module, project or cell; another is not counted. */
void pl_metrics_usage(struct pl_metrics *m, enum pl_payload_kind kind, uint64_t cpu_us,
                      uint64_t memory_peak_bytes);
/* A cell that ran: over the kept interpreter's uplink, or through an exec. */
void pl_metrics_cell(struct pl_metrics *m, bool uplink);
/* method: a short name ("Run", "Describe", "metrics", "other"). */
void pl_metrics_request(struct pl_metrics *m, const char *method, enum pl_code code_or_ok, int ok);

/* Render every metric; in_flight and ready are sampled by the caller. */
int pl_metrics_render(struct pl_metrics *m, unsigned in_flight, int ready, struct pl_buf *out);
