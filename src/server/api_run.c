/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_run.c: Run, RunInSession and RunCell, from the decoded request to
 * the answer.
 *
 * Before dispatch a call climbs the refusal ladder: the table `ladder`
 * below, one small check per rung, in the order docs/api.md ("The order
 * of the checks in Run") documents.  The first rung that fails answers;
 * nothing after it is looked at and nothing has run.  The last rung takes
 * the call's place (an admission slot, or its turn in a session), so every
 * refusal before it holds nothing to give back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../broker/broker.h"
#include "../core/canon.h"
#include "../core/clock.h"
#include "../core/ids.h"
#include "../core/record.h"
#include "../core/request.h"
#include "api_int.h"

/* One call on its way up the ladder and through dispatch. */
struct run_call {
    struct pl_api *api;
    const char *principal;
    const char *session_id; /* NULL for Run */
    bool cell;
    struct pl_run_request req;
    const struct pl_grant_profile *grant; /* the request's profile, once found */
    const struct pl_op_caps *caps;        /* what the provider says of this kind */
    unsigned timeout_ms;                  /* the request's, or the default, capped */
    struct pl_session *ss;                /* the session's turn, once taken */
    char ended_reason[256];               /* SESSION_ENDED: why, for ErrorInfo */
    struct pl_error err;
};

static bool language_listed(const struct pl_op_caps *c, const char *lang) {
    for (int i = 0; i < 4 && c->languages[i]; i++)
        if (strcmp(c->languages[i], lang) == 0)
            return true;
    return false;
}

static const struct pl_op_caps *caps_for(const struct pl_provider_info *in,
                                         enum pl_payload_kind k) {
    switch (k) {
    case PL_PAYLOAD_SNIPPET: return &in->snippet;
    case PL_PAYLOAD_PROJECT: return &in->project;
    case PL_PAYLOAD_MODULE: return &in->module;
    default: return NULL;
    }
}

/* ---- the rungs: each 0 to go on, or -1 with c->err set ------------------ */

/* INVALID_REQUEST: a grant_profile this daemon does not have, or one a
 * session may not use. */
static int check_grant_profile(struct run_call *c, struct call_log *lg) {
    if (!c->req.grant_profile)
        return 0;
    c->grant = pl_grants_find(c->api->grants, c->req.grant_profile);
    if (!c->grant)
        return pl_error_set(&c->err, PL_REASON_INVALID_REQUEST,
                            c->api->grants ? "grant_profile: unknown profile \"%.128s\""
                                           : "grant_profile: unknown profile \"%.128s\" (this "
                                             "daemon has no PLIMSOLL_GRANTS_FILE)",
                            c->req.grant_profile);
    lg->grant_profile = c->grant->name;
    if (c->session_id && !c->grant->allow_in_sessions)
        return pl_error_set(&c->err, PL_REASON_INVALID_REQUEST,
                            "grant_profile: profile \"%.128s\" does not set allow_in_sessions: "
                            "in a session anything an earlier call left running could use the "
                            "grant; run it outside a session",
                            c->grant->name);
    return 0;
}

/* DISABLED: the Disabled provider runs nothing, whatever the floor. */
static int check_provider_runs(struct run_call *c, struct call_log *lg) {
    (void)lg;
    if (pl_provider_runs(c->api->provider))
        return 0;
    return pl_error_set(&c->err, PL_REASON_DISABLED,
                        "this daemon runs the Disabled provider: nothing runs until an operator "
                        "sets SANDBOX_PROVIDER");
}

/* INSUFFICIENT_ISOLATION: the caller's floor above the provider's tier. */
static int check_floor(struct run_call *c, struct call_log *lg) {
    (void)lg;
    enum pl_tier tier = c->api->provider->info.tier;
    if (!c->req.has_floor || c->req.floor <= tier)
        return 0;
    return pl_error_set(&c->err, PL_REASON_INSUFFICIENT_ISOLATION,
                        "minimum_isolation \"%s\" is above this daemon's tier \"%s\"; nothing ran",
                        pl_tier_name(c->req.floor), pl_tier_name(tier));
}

/* UNSUPPORTED: sessions off or not kept, a kind or language the provider
 * (or a session) does not run. */
static int check_payload_supported(struct run_call *c, struct call_log *lg) {
    (void)lg;
    const struct pl_provider *prov = c->api->provider;
    const struct pl_provider_info *in = &prov->info;
    const char *name = pl_provider_name(prov);
    c->caps = caps_for(in, c->req.kind);
    if (c->session_id && (!c->api->sessions || !in->session.supported))
        return pl_error_set(&c->err, PL_REASON_UNSUPPORTED,
                            c->api->sessions ? "provider \"%s\" keeps no sessions"
                                             : "sessions are off (SANDBOX_MAX_SESSIONS is not set)",
                            name);
    if (c->cell) {
        c->caps = &in->session;
        if (!language_listed(c->caps, c->req.cell.language))
            return pl_error_set(&c->err, PL_REASON_UNSUPPORTED,
                                "cell.language: this daemon's sessions run cells in %s%s%s",
                                c->caps->languages[0] ? c->caps->languages[0] : "no language",
                                c->caps->languages[1] ? " and " : "",
                                c->caps->languages[1] ? c->caps->languages[1] : "");
    } else if (c->session_id && c->req.kind == PL_PAYLOAD_MODULE) {
        return pl_error_set(&c->err, PL_REASON_UNSUPPORTED,
                            "a session runs snippets, projects and cells, not modules");
    }
    if (!c->caps || !c->caps->supported)
        return pl_error_set(&c->err, PL_REASON_UNSUPPORTED,
                            "provider \"%s\" does not run %s payloads", name,
                            pl_payload_name(c->req.kind));
    if (!c->cell && c->req.kind == PL_PAYLOAD_SNIPPET &&
        !language_listed(c->caps, c->req.snippet.language))
        return pl_error_set(&c->err, PL_REASON_UNSUPPORTED,
                            "provider \"%s\" does not run %s snippets", name,
                            c->req.snippet.language);
    return 0;
}

/* UNSUPPORTED: a grant on a kind the provider does not broker for. */
static int check_grant_brokered(struct run_call *c, struct call_log *lg) {
    (void)lg;
    if (!c->grant || c->caps->grants)
        return 0;
    return pl_error_set(&c->err, PL_REASON_UNSUPPORTED,
                        "provider \"%s\" does not broker grants for %s payloads; see Describe",
                        pl_provider_name(c->api->provider), pl_payload_name(c->req.kind));
}

/* CALLER_NOT_ALLOWED: the caller is not in the profile's allowed_callers. */
static int check_grant_caller(struct run_call *c, struct call_log *lg) {
    (void)lg;
    if (!c->grant || pl_grant_caller_allowed(c->grant, c->principal))
        return 0;
    return pl_error_set(&c->err, PL_REASON_CALLER_NOT_ALLOWED,
                        "caller \"%.128s\" is not in the allowed_callers of grant profile "
                        "\"%.128s\"; nothing ran",
                        c->principal, c->grant->name);
}

/* INVALID_REQUEST: a timeout_ms over the kind's longest (an unset one is
 * the default, capped to it). */
static int check_timeout(struct run_call *c, struct call_log *lg) {
    (void)lg;
    unsigned t = c->req.timeout_ms ? c->req.timeout_ms : c->api->config->default_timeout_ms;
    unsigned most = c->caps->max_timeout_ms;
    if (most && t > most) {
        if (c->req.timeout_ms)
            return pl_error_set(&c->err, PL_REASON_INVALID_REQUEST,
                                "timeout_ms: %u exceeds the longest allowed for %s payloads, %u ms",
                                c->req.timeout_ms, pl_payload_name(c->req.kind), most);
        t = most;
    }
    c->timeout_ms = t;
    return 0;
}

/* INVALID_REQUEST: a memory_mb below the least the provider can start. */
static int check_memory(struct run_call *c, struct call_log *lg) {
    (void)lg;
    const struct pl_provider *prov = c->api->provider;
    if (!c->req.memory_mb || c->req.memory_mb >= prov->info.min_memory_mb)
        return 0;
    return pl_error_set(&c->err, PL_REASON_INVALID_REQUEST,
                        "memory_mb: %u is below %u, the least provider \"%s\" can start a "
                        "sandbox with (Describe: limits.min_memory_mb)",
                        c->req.memory_mb, prov->info.min_memory_mb, pl_provider_name(prov));
}

/* NOT_READY: the provider says it cannot take a run now. */
static int check_ready(struct run_call *c, struct call_log *lg) {
    (void)lg;
    if (pl_provider_ready(c->api->provider, &c->err) == 0)
        return 0;
    c->err.reason = PL_REASON_NOT_READY;
    return -1;
}

/* SHUTTING_DOWN: the daemon is draining. */
static int check_draining(struct run_call *c, struct call_log *lg) {
    (void)lg;
    if (!atomic_load(&c->api->draining))
        return 0;
    return pl_error_set(&c->err, PL_REASON_SHUTTING_DOWN, "the daemon is shutting down");
}

/* RATE_LIMITED, AT_CAPACITY: admission takes a slot.  In a session its own
 * refusals stand here instead (NOT_FOUND, SESSION_ENDED): a session holds
 * its admission slot from open to end, and the call takes its turn. */
static int take_place(struct run_call *c, struct call_log *lg) {
    (void)lg;
    if (c->session_id)
        return pl_sessions_begin(c->api->sessions, c->principal, c->session_id, &c->ss,
                                 c->ended_reason, sizeof(c->ended_reason), &c->err);
    return pl_admission_acquire(c->api->admission, c->principal, &c->err);
}

/* The refusal ladder, in the documented order. */
static const struct rung {
    const char *name; /* for a reader: which rung, which reason */
    int (*check)(struct run_call *c, struct call_log *lg);
} ladder[] = {
    {"grant profile (INVALID_REQUEST)", check_grant_profile},
    {"provider disabled (DISABLED)", check_provider_runs},
    {"isolation floor (INSUFFICIENT_ISOLATION)", check_floor},
    {"kind, language, session (UNSUPPORTED)", check_payload_supported},
    {"grant brokered for the kind (UNSUPPORTED)", check_grant_brokered},
    {"grant's callers (CALLER_NOT_ALLOWED)", check_grant_caller},
    {"timeout (INVALID_REQUEST)", check_timeout},
    {"memory (INVALID_REQUEST)", check_memory},
    {"readiness (NOT_READY)", check_ready},
    {"draining (SHUTTING_DOWN)", check_draining},
    {"admission or the session's turn (RATE_LIMITED, AT_CAPACITY, SESSION_ENDED)", take_place},
};

/* ---- dispatch ------------------------------------------------------------ */

/* Give back what a call took at the last rung. */
static void release_place(struct run_call *c) {
    if (c->ss)
        pl_sessions_done(c->api->sessions, c->ss, NULL, NULL);
    else
        pl_admission_release(c->api->admission, c->principal);
    c->ss = NULL;
}

static enum pl_run_outcome classify(const struct pl_run_result *r) {
    if (r->timed_out)
        return PL_RUN_TIMED_OUT;
    if (r->out_of_memory)
        return PL_RUN_OUT_OF_MEMORY;
    return r->exit_code == 0 ? PL_RUN_EXIT_ZERO : PL_RUN_EXIT_NONZERO;
}

/* The run record over the canonical request and the answer; NULL when it
 * cannot be built. */
static json_t *record_of(struct run_call *c, json_t *out, struct timespec started, uint64_t elapsed,
                         unsigned calls, unsigned refused) {
    const struct pl_provider *prov = c->api->provider;
    char req_sha[65], resp_sha[65];
    if (!out || pl_canon_sha256(c->req.canonical, req_sha) < 0 ||
        pl_canon_sha256(out, resp_sha) < 0)
        return NULL;
    struct pl_record_input ri = {.request_sha256 = req_sha,
                                 .response_sha256 = resp_sha,
                                 .provider = pl_provider_name(prov),
                                 .isolation = pl_tier_name(prov->info.tier),
                                 .runtime = prov->info.runtime,
                                 .started = started,
                                 .elapsed_ns = elapsed,
                                 .broker_calls = calls,
                                 .broker_refused = refused,
                                 .previous_digest =
                                     c->ss ? pl_session_previous_digest(c->ss) : NULL};
    return pl_record_build(&ri);
}

/*
 * After the ladder: the run's id, the grant's credential (a failure there
 * is INTERNAL before dispatch: nothing ran), the provider's run, and the
 * answer with its record.  Returns 0 when rs holds the answer, -1 with
 * c->err set (and the place given back) when the call is refused.
 */
static int dispatch(struct run_call *c, struct pl_api_response *rs, struct call_log *lg) {
    struct pl_api *api = c->api;
    const struct pl_config *cfg = api->config;
    struct pl_provider *prov = api->provider;
    struct pl_run_ctx ctx = {.principal = c->principal,
                             .timeout_ms = c->timeout_ms,
                             .memory_mb = c->req.memory_mb ? c->req.memory_mb : cfg->memory_mb,
                             .output_bytes = cfg->output_bytes};
    if (pl_random_hex(ctx.run_id, sizeof(ctx.run_id), 16) < 0) {
        release_place(c);
        pl_error_set(&c->err, PL_REASON_INTERNAL, "no randomness available");
        c->err.before_dispatch = true;
        return -1;
    }
    if (c->grant && pl_broker_new(c->grant, api->env, api->env_userdata, c->principal,
                                  pl_deadline_in_ms(c->timeout_ms), &ctx.broker, &c->err) < 0) {
        release_place(c);
        c->err.before_dispatch = true;
        return -1;
    }
    struct timespec started;
    clock_gettime(CLOCK_REALTIME, &started);
    uint64_t t0 = pl_now_ns();
    struct pl_run_result res = {0};
    int r = c->ss ? pl_provider_session_run(prov, pl_session_handle(c->ss), &ctx, &c->req, &res,
                                            &c->err)
                  : pl_provider_run(prov, &ctx, &c->req, &res, &c->err);
    uint64_t elapsed = pl_now_ns() - t0;
    unsigned calls = pl_broker_calls(ctx.broker), refused = pl_broker_refused(ctx.broker);
    lg->broker_calls = calls;
    lg->broker_refused = refused;
    if (c->grant)
        pl_metrics_broker(api->metrics, calls, refused);
    pl_broker_free(ctx.broker); /* stops its socket, wipes the credential */
    if (!c->ss)
        pl_admission_release(api->admission, c->principal);
    if (r < 0) {
        pl_run_result_clear(&res);
        /* A provider may refuse the payload itself before the guest started
         * (e.g. a WebAssembly module that does not validate), find the
         * session's sandbox unusable before the call (it then ends), or
         * find its sandbox's wall not in place before any code ran
         * (NOT_READY: a hosted sandbox's policy read back); anything else
         * it reports is infrastructure, and ends a session. */
        if (c->err.reason != PL_REASON_INVALID_REQUEST &&
            c->err.reason != PL_REASON_SESSION_ENDED && c->err.reason != PL_REASON_NOT_READY)
            c->err.reason = PL_REASON_INTERNAL;
        if (c->ss)
            pl_sessions_done(api->sessions, c->ss, NULL,
                             c->err.reason == PL_REASON_INVALID_REQUEST ? NULL : c->err.message);
        c->ss = NULL;
        return -1;
    }
    json_t *out = api_result_json(&res, prov->info.tier, (uint32_t)(elapsed / 1000000ull));
    if (out && c->cell)
        json_object_set_new(out, "interpreter_started", json_boolean(res.interpreter_started));
    if (c->cell)
        pl_metrics_cell(api->metrics, res.cell_uplink);
    enum pl_run_outcome oc = classify(&res);
    json_t *record = record_of(c, out, started, elapsed, calls, refused);
    if (c->ss)
        pl_sessions_done(api->sessions, c->ss,
                         record ? json_string_value(json_object_get(record, "digest")) : NULL,
                         res.session_ended[0] ? res.session_ended : NULL);
    c->ss = NULL;
    pl_run_result_clear(&res);
    if (!out || !record || json_object_set_new(out, "record", record) < 0) {
        json_decref(out);
        return pl_error_set(&c->err, PL_REASON_INTERNAL, "could not encode the result");
    }
    pl_metrics_run(api->metrics, oc, prov->info.tier, elapsed);
    lg->outcome = "ran";
    api_set_json(rs, 200, out);
    return 0;
}

void api_run_request(struct pl_api *api, const char *principal, const char *body, size_t body_len,
                     const char *session_id, bool cell, struct pl_api_response *rs,
                     struct call_log *lg) {
    const struct pl_config *cfg = api->config;
    struct pl_request_limits limits = {
        .max_timeout_ms = cfg->max_timeout_ms, .memory_mb = cfg->memory_mb, .allow_cell = cell};
    struct run_call c = {
        .api = api, .principal = principal, .session_id = session_id, .cell = cell};
    int r = pl_run_request_decode(body, body_len, &limits, &c.req, &c.err);
    for (size_t i = 0; r == 0 && i < sizeof(ladder) / sizeof(ladder[0]); i++)
        r = ladder[i].check(&c, lg);
    if (r == 0)
        r = dispatch(&c, rs, lg);
    pl_run_request_clear(&c.req);
    if (r < 0)
        api_refuse(api, rs, lg, &c.err,
                   c.err.reason == PL_REASON_SESSION_ENDED && c.ended_reason[0] ? c.ended_reason
                                                                                : NULL);
}
