/* SPDX-License-Identifier: Apache-2.0 */
/*
 * provider.h: the one interface every sandbox back-end implements.
 *
 * A provider is data: a const struct pl_provider_ops with its name, the
 * highest tier it can ever paint, and function pointers grouped by phase.
 * The registry (registry.c) finds it by SANDBOX_PROVIDER.  Adding a
 * back-end is a new folder plus one registry row.
 *
 * Phases and contracts:
 *   create   the startup proof (preflight).  Runs before the daemon serves;
 *            a failure stops the daemon.  Proves behaviour, not settings.
 *   info     what the provider proved: the tier it paints, the runtime, and
 *            what it supports.  Stable after create.
 *   ready    the cheap readiness re-check behind /readyz and every run.
 *            Optional: NULL means always ready.  Never starts a sandbox.
 *   run      run one payload.  Called only after every refusal was decided
 *            (the request is then "dispatched").  A non-zero guest exit is a
 *            result (return 0); return < 0 only when infrastructure failed.
 *            NULL means the provider runs nothing (Disabled).
 *
 * The providers folder's own files, in plimsolld:
 *   provider.h     this header: the ops table and the wrappers the core
 *                  calls
 *   registry.c     SANDBOX_PROVIDER's table, and the startup around a
 *                  provider's proof (its ceiling and its proven tier
 *                  against SANDBOX_MIN_ISOLATION)
 *   settings.[ch]  reading a provider's own settings, with the same rules
 *                  everywhere
 * Each folder below is a package with its list in its header: docker/
 * (docker_int.h), wasm/ (wasm_int.h), e2b/ (e2b_int.h), dockercloud/
 * (dc_int.h), openshell/ (osh_int.h), hosted/ (hosted.h); disabled/ holds
 * disabled.c alone and guest/ lines.py alone, first in every Python guest
 * program.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../core/capture.h"
#include "../core/config.h"
#include "../core/display.h"
#include "../core/errors.h"
#include "../core/pool.h"
#include "../core/request.h"
#include "../core/tier.h"

/* One operation's answer in Describe. */
struct pl_op_caps {
    bool supported;
    const char *engine;       /* software identity, e.g. "QuickJS 2021-03-27" */
    unsigned max_timeout_ms;  /* longest allowed timeout for this kind */
    const char *languages[4]; /* NULL-terminated; snippet/project/cell languages */
    bool grants;              /* whether runs of this kind can carry a grant */
    bool streams;             /* whether its runs give output as it comes (pl_run_ctx.sink) */
};

struct pl_provider_info {
    enum pl_tier tier;      /* the mark this provider painted at startup */
    const char *runtime;    /* evidence: e.g. "runc", "runsc", "wasm2c"; "" when none */
    unsigned min_memory_mb; /* the smallest memory_mb its engine accepts; 0 = no minimum */
    struct pl_op_caps snippet;
    struct pl_op_caps project;
    struct pl_op_caps module;
    struct pl_op_caps session;
    /* The session file calls (WriteFiles, ReadFile, ListFiles): supported
     * when its session_run takes their kinds. */
    struct pl_op_caps files;
    /* Which payloads may name collect globs (pl_run_ctx.collect): the
     * provider reads the matched files after the run into
     * pl_run_result.artifacts. */
    struct {
        bool project;
        bool snippet;
    } artifacts;
    /* What a cell can show besides its text (display.h), as the startup
     * test found it in the sandbox the cells run in. */
    struct {
        bool python;     /* display() and rich values in Python cells */
        bool javascript; /* display() in JavaScript cells */
        bool matplotlib; /* an open figure comes back as image/png */
        bool pandas;     /* a DataFrame as text/html and text/plain */
    } display;
    /* An idle session's pause gives back its admission slot (the next
     * call takes one again, or is refused AT_CAPACITY): the provider's
     * paused sandbox runs nothing (openshell's idle stop). */
    bool idle_frees_slot;
    /* What the startup test proved, one sentence each; NULL-terminated. */
    const char *checks[8];
};

struct pl_broker; /* broker/broker.h */

/* A warm pool's figures now, for Describe's pools. */
struct pl_pool_report {
    const char *name; /* e.g. "runs", "sessions" */
    unsigned target;  /* items it keeps waiting when full */
    struct pl_pool_stats stats;
};
#define PL_MAX_POOLS 4

/* What a session's file calls are given beside the request. */
struct pl_files_ctx {
    unsigned list_entries; /* SANDBOX_FILE_LIST_ENTRIES */
};

/* A run's collect bounds (SANDBOX_COLLECT_FILES, SANDBOX_COLLECT_BYTES). */
struct pl_collect_ctx {
    unsigned files;
    unsigned bytes;
};

/* A file a collect glob matched: its path relative to the work directory
 * (bytes, maybe not UTF-8), its size, and its first len bytes. */
struct pl_artifact {
    char *path; /* owned, path_len bytes, no NUL inside */
    size_t path_len;
    uint64_t size;
    unsigned char *data; /* owned, len bytes (NULL when len is 0) */
    size_t len;
    bool truncated; /* len < size: the run's byte budget ran out */
};

/* What a run or a step cost, as the provider measured it (docs/api.md,
 * "Usage"): present false when it measured nothing. */
struct pl_usage {
    bool present;
    uint64_t cpu_user_us;
    uint64_t cpu_system_us;
    uint64_t memory_peak_bytes;
    uint64_t wall_us;
    const char *source; /* static: "cgroup", "gvisor", "worker", "service" */
};

/* Per-run settings the core resolved before dispatch. */
struct pl_run_ctx {
    const char *principal;
    unsigned timeout_ms;      /* resolved: request's, or the default */
    unsigned memory_mb;       /* resolved: request's, or the allowance */
    unsigned output_bytes;    /* cap per stream */
    char run_id[33];          /* random hex, names the sandbox */
    struct pl_broker *broker; /* the run's grant, credential obtained; NULL when none.
                                 Owned by the core; the provider attaches its transport. */
    /* RunStream and RunCellStream: where the guest's output goes as it is
     * kept (capture.h), besides the result; NULL for every other call.  A
     * provider whose kind says `streams` gives it every kept byte. */
    const struct pl_output_sink *sink;
    /* The file calls' bounds (a session's WriteFiles, ReadFile, ListFiles). */
    struct pl_files_ctx files;
    /* The bounds of what a request's collect globs bring back. */
    struct pl_collect_ctx collect;
    /* A cell's display outputs' bounds (SANDBOX_DISPLAY_*, display.h). */
    struct pl_display_bounds display;
};

struct pl_step_result {
    char *name;
    int exit_code;
    char *out;
    size_t out_len;
    bool out_truncated;
    char *err;
    size_t err_len;
    bool err_truncated;
    uint32_t duration_ms;
    bool timed_out;
    struct pl_usage usage;
};

/* Project outcomes: a stable classification, not a string to parse. */
#define PL_OUTCOME_COMPLETED "completed"
#define PL_OUTCOME_SETUP_FAILED "setup_failed"
#define PL_OUTCOME_TIMED_OUT "timed_out"
#define PL_OUTCOME_PROTOCOL_ERROR "protocol_error"

struct pl_run_result {
    int exit_code;
    char *out; /* malloc'd; out_len bytes */
    size_t out_len;
    bool out_truncated;
    char *err;
    size_t err_len;
    bool err_truncated;
    bool timed_out;
    bool out_of_memory;
    char sandbox_name[64];
    const char *outcome; /* one of PL_OUTCOME_* */
    char detail[256];
    struct pl_step_result *steps;
    size_t nsteps;
    bool interpreter_started; /* a cell: the call began with a fresh interpreter */
    bool cell_uplink;         /* a cell: it went over the interpreter's uplink, no exec */
    /* ReadFile: out holds the bytes read; file_size the file's size, more
     * whether bytes remain past them.  ListFiles: entries, a JSON array of
     * FileEntry (owned), truncated past the entries' bound. */
    uint64_t file_size;
    bool more;
    json_t *entries;
    bool truncated;
    char session_ended[256]; /* set by a session call after which the session must end: why */
    /* A request with collect globs: what they matched (owned), in the
     * walk's order; collected says the provider looked (the answer then
     * carries the list, maybe empty); artifacts_truncated that more
     * matched than the bounds let in. */
    struct pl_artifact *artifacts;
    size_t nartifacts;
    bool collected;
    bool artifacts_truncated;
    /* A cell's display outputs (display.h): a JSON array of well-formed
     * DisplayOutput objects (owned; NULL: none came), and how many were
     * left out. */
    json_t *outputs;
    unsigned outputs_dropped;
    /* What the run cost; when not present, usage_absent says why (empty:
     * the provider gives no reason). */
    struct pl_usage usage;
    char usage_absent[128];
};

/* Free an artifact list of n entries; NULL-safe.  Inline: the report
 * parsers that make the lists link without the registry (fuzz/). */
static inline void pl_artifacts_free(struct pl_artifact *a, size_t n) {
    for (size_t i = 0; a && i < n; i++) {
        free(a[i].path);
        free(a[i].data);
    }
    free(a);
}

/* What a provider needs to open a session's sandbox. */
struct pl_session_open {
    const char *principal;
    unsigned memory_mb;
    const char *tag;              /* non-secret label for the sandbox's name */
    const char *const *languages; /* the caller's hint; NULL-terminated, may be empty */
};

/* A session's sandbox as its provider last saw it, for GetSession. */
struct pl_session_status {
    uint64_t disk_used_bytes;   /* its files, as the last cleanup measured them */
    uint64_t disk_budget_bytes; /* 0: the provider reports no disk figure */
    struct {
        const char *language; /* static: "python", "javascript" */
        bool alive;
    } interpreters[2]; /* those it keeps, as the last cleanup found them */
    size_t ninterpreters;
};

/* Free what a result holds (out, err, steps and their strings) and zero
 * it; NULL-safe, and fine on a zeroed result. */
void pl_run_result_clear(struct pl_run_result *r);

/*
 * A project whose steps all ran as far as they went (no deadline, no
 * protocol error): outcome completed, the exit code the last step's, and
 * the detail naming the step that stopped it when one failed.
 */
void pl_run_result_steps_completed(struct pl_run_result *r);

struct pl_provider_ops {
    const char *name;
    enum pl_tier max_tier;      /* the highest mark it can ever paint */
    bool memory_budget_applies; /* false when sandboxes run on other machines */

    int (*create)(const struct pl_config *config, void **ret_state, struct pl_error *err);
    void (*destroy)(void *state);
    void (*info)(void *state, struct pl_provider_info *ret_info);
    int (*ready)(void *state, struct pl_error *err);
    int (*run)(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
               struct pl_run_result *ret_result, struct pl_error *err);

    /*
     * Sessions (docs/sessions.md); all NULL when the provider keeps none.
     * session_run runs a snippet, a project or a cell in the session's
     * sandbox; it returns < 0 with PL_REASON_SESSION_ENDED (message: why)
     * when the session can no longer be used; the core then closes it.
     * Calls on one session never overlap.
     */
    int (*session_open)(void *state, const struct pl_session_open *o, void **ret_session,
                        struct pl_error *err);
    int (*session_run)(void *state, void *session, const struct pl_run_ctx *ctx,
                       const struct pl_run_request *req, struct pl_run_result *ret_result,
                       struct pl_error *err);
    int (*session_pause)(void *state, void *session);
    int (*session_resume)(void *state, void *session, struct pl_error *err);
    void (*session_close)(void *state, void *session);
    /* Optional: what the provider last learnt of the session's sandbox.
     * Called under the session table's lock, also while a call runs in
     * the session: it reads what it kept and never waits. */
    void (*session_status)(void *state, void *session, struct pl_session_status *ret);

    /* Optional: its warm pools now, at most max into ret; how many. */
    size_t (*pools)(void *state, struct pl_pool_report *ret, size_t max);

    /* Why its runs carry no usage (docs/api.md, "Usage"), given in each
     * answer whose run left usage and usage_absent empty; NULL: none. */
    const char *no_usage;
};

/* A run the provider answered without a word on its usage gets the
 * provider's reason, if it has one. */
static inline void pl_provider_usage_reason(const struct pl_provider_ops *ops,
                                            struct pl_run_result *ret) {
    if (!ret->usage.present && !ret->usage_absent[0] && ops->no_usage)
        snprintf(ret->usage_absent, sizeof(ret->usage_absent), "%s", ops->no_usage);
}

/* A started provider: its ops, state and what it proved. */
struct pl_provider {
    const struct pl_provider_ops *ops;
    void *state;
    struct pl_provider_info info;
};

/*
 * Find SANDBOX_PROVIDER's row, check its ceiling against
 * SANDBOX_MIN_ISOLATION, run its startup proof, and check the proven tier
 * again.  err names the setting at fault (INVALID_REQUEST; the proof's own
 * reason when it failed).  *ret_provider is the caller's: pl_provider_stop.
 */
int pl_provider_start(const struct pl_config *config, struct pl_provider **ret_provider,
                      struct pl_error *err);
/* Destroy the provider's state and free p; NULL-safe.  No call may be in
 * progress. */
void pl_provider_stop(struct pl_provider *p);

/*
 * The core calls a provider only through these wrappers (valkey's
 * connection.h): each optional method is checked here, once, so no
 * `->ops->` appears outside src/providers/.
 */

/* The provider's name (SANDBOX_PROVIDER's value). */
static inline const char *pl_provider_name(const struct pl_provider *p) {
    return p->ops->name;
}

/* Whether it runs anything at all (the Disabled provider does not). */
static inline bool pl_provider_runs(const struct pl_provider *p) {
    return p->ops->run != NULL;
}

/* Whether its sandboxes count against this machine's memory. */
static inline bool pl_provider_memory_budget_applies(const struct pl_provider *p) {
    return p->ops->memory_budget_applies;
}

/* Whether it keeps sessions: it says so and has the methods. */
static inline bool pl_provider_keeps_sessions(const struct pl_provider *p) {
    return p->info.session.supported && p->ops->session_open && p->ops->session_run &&
           p->ops->session_close;
}

/* Readiness, through the optional method: 0, or < 0 with err (NOT_READY,
 * or what the check met).  Never starts a sandbox; any thread. */
static inline int pl_provider_ready(struct pl_provider *p, struct pl_error *err) {
    return p->ops->ready ? p->ops->ready(p->state, err) : 0;
}

/* Run one payload, after every refusal was decided: 0 with *ret filled
 * (the caller's: pl_run_result_clear, also after a failure), or < 0 with err
 * when infrastructure failed; DISABLED when the provider runs nothing. */
static inline int pl_provider_run(struct pl_provider *p, const struct pl_run_ctx *ctx,
                                  const struct pl_run_request *req, struct pl_run_result *ret,
                                  struct pl_error *err) {
    if (!p->ops->run)
        return pl_error_set(err, PL_REASON_DISABLED, "provider \"%s\" runs nothing", p->ops->name);
    int rc = p->ops->run(p->state, ctx, req, ret, err);
    if (rc == 0)
        pl_provider_usage_reason(p->ops, ret);
    return rc;
}

/* Open a session's sandbox: 0 with *ret_session, the provider's handle,
 * until pl_provider_session_close; < 0 with err, nothing left open.
 * UNSUPPORTED when the provider keeps no sessions. */
static inline int pl_provider_session_open(struct pl_provider *p, const struct pl_session_open *o,
                                           void **ret_session, struct pl_error *err) {
    if (!pl_provider_keeps_sessions(p))
        return pl_error_set(err, PL_REASON_UNSUPPORTED, "provider \"%s\" keeps no sessions",
                            p->ops->name);
    return p->ops->session_open(p->state, o, ret_session, err);
}

/* One call in an open session (not checked here: only a session from
 * pl_provider_session_open reaches it), as pl_provider_run; SESSION_ENDED
 * (ret->session_ended may say why) when the session can no longer be used,
 * and the caller then closes it.  Calls on one session never overlap. */
static inline int pl_provider_session_run(struct pl_provider *p, void *session,
                                          const struct pl_run_ctx *ctx,
                                          const struct pl_run_request *req,
                                          struct pl_run_result *ret, struct pl_error *err) {
    int rc = p->ops->session_run(p->state, session, ctx, req, ret, err);
    if (rc == 0)
        pl_provider_usage_reason(p->ops, ret);
    return rc;
}

/* Whether it can pause an idle session's sandbox. */
static inline bool pl_provider_pauses(const struct pl_provider *p) {
    return p->ops->session_pause != NULL;
}

/* Pause an idle session's sandbox: 0, or < 0 (no error object) when it
 * could not or the provider cannot pause (the core then ends the session).
 * Not while a call runs in it. */
static inline int pl_provider_session_pause(struct pl_provider *p, void *session) {
    return p->ops->session_pause ? p->ops->session_pause(p->state, session) : -1;
}

/* Take a paused session up again before its next call: 0 (also when the
 * provider has no resume), or < 0 with err (the core then ends the
 * session). */
static inline int pl_provider_session_resume(struct pl_provider *p, void *session,
                                             struct pl_error *err) {
    return p->ops->session_resume ? p->ops->session_resume(p->state, session, err) : 0;
}

/* End a session's sandbox and free its handle, which is invalid after.
 * Not while a call runs in it. */
static inline void pl_provider_session_close(struct pl_provider *p, void *session) {
    p->ops->session_close(p->state, session);
}

/* What the provider last learnt of an open session's sandbox (a zeroed
 * status when it reports nothing); never waits. */
static inline void pl_provider_session_status(struct pl_provider *p, void *session,
                                              struct pl_session_status *ret) {
    *ret = (struct pl_session_status){0};
    if (p->ops->session_status)
        p->ops->session_status(p->state, session, ret);
}

/* Its warm pools' figures, at most max into ret; how many (0 when it
 * keeps no pool).  The names are the provider's, static. */
static inline size_t pl_provider_pools(struct pl_provider *p, struct pl_pool_report *ret,
                                       size_t max) {
    return p->ops->pools ? p->ops->pools(p->state, ret, max) : 0;
}

/*
 * The known providers' names, comma-separated ("disabled, wasm, docker, ..."),
 * from the registry's ops tables, for messages and docs.  A static string,
 * built once; any thread.
 */
const char *pl_provider_known_names(void);
