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
    bool explain;    /* Explain: the last rung takes nothing */
    char value[320]; /* what the rung compared, for Explain's ticket */
};

/* What a rung compared, in words: for Explain's ticket only (a call's
 * ladder formats nothing). */
#define VALUE(c, ...)                                                                              \
    ((c)->explain ? (void)snprintf((c)->value, sizeof((c)->value), __VA_ARGS__) : (void)0)

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
    case PL_PAYLOAD_WRITE_FILES:
    case PL_PAYLOAD_READ_FILE:
    case PL_PAYLOAD_LIST_FILES: return &in->files;
    default: return NULL;
    }
}

/* ---- the rungs: each 0 to go on, or -1 with c->err set ------------------ */

/* INVALID_REQUEST: a grant_profile this daemon does not have, or one a
 * session may not use. */
static int check_grant_profile(struct run_call *c, struct call_log *lg) {
    if (!c->req.grant_profile) {
        VALUE(c, "no grant_profile asked");
        return 0;
    }
    VALUE(c, "grant_profile \"%.128s\"%s", c->req.grant_profile,
          c->session_id ? " in a session" : "");
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
    VALUE(c, "provider \"%s\"", pl_provider_name(c->api->provider));
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
    VALUE(c, "minimum_isolation %s against this daemon's tier %s",
          c->req.has_floor ? pl_tier_name(c->req.floor) : "(none)", pl_tier_name(tier));
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
    VALUE(c, "%s%s%s%s", c->cell ? "a cell in " : pl_payload_name(c->req.kind),
          c->cell                             ? c->req.cell.language
          : c->req.kind == PL_PAYLOAD_SNIPPET ? " in "
                                              : "",
          !c->cell && c->req.kind == PL_PAYLOAD_SNIPPET ? c->req.snippet.language : "",
          c->session_id ? ", in a session" : "");
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
    if ((!c->caps || !c->caps->supported) && pl_payload_is_files(c->req.kind))
        return pl_error_set(&c->err, PL_REASON_UNSUPPORTED,
                            "provider \"%s\" has no session file calls (Describe: "
                            "operations.files)",
                            name);
    if (!c->caps || !c->caps->supported)
        return pl_error_set(&c->err, PL_REASON_UNSUPPORTED,
                            "provider \"%s\" does not run %s payloads", name,
                            pl_payload_name(c->req.kind));
    if (c->req.ncollect &&
        !(c->req.kind == PL_PAYLOAD_PROJECT ? in->artifacts.project : in->artifacts.snippet))
        return pl_error_set(&c->err, PL_REASON_UNSUPPORTED,
                            "%s.collect: provider \"%s\" brings back no %s artifacts (Describe: "
                            "operations.artifacts)",
                            pl_payload_name(c->req.kind), name, pl_payload_name(c->req.kind));
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
    VALUE(c, "%s: %s", c->grant ? "a grant" : "no grant",
          c->caps->grants ? "the provider brokers grants for this kind"
                          : "the provider brokers no grant for this kind");
    if (!c->grant || c->caps->grants)
        return 0;
    return pl_error_set(&c->err, PL_REASON_UNSUPPORTED,
                        "provider \"%s\" does not broker grants for %s payloads; see Describe",
                        pl_provider_name(c->api->provider), pl_payload_name(c->req.kind));
}

/* CALLER_NOT_ALLOWED: the caller is not in the profile's allowed_callers. */
static int check_grant_caller(struct run_call *c, struct call_log *lg) {
    (void)lg;
    if (c->grant)
        VALUE(c, "caller \"%.128s\" against the profile's allowed_callers", c->principal);
    else
        VALUE(c, "no grant");
    if (!c->grant || pl_grant_caller_allowed(c->grant, c->principal))
        return 0;
    return pl_error_set(&c->err, PL_REASON_CALLER_NOT_ALLOWED,
                        "caller \"%.128s\" is not in the allowed_callers of grant profile "
                        "\"%.128s\"; nothing ran",
                        c->principal, c->grant->name);
}

/* INVALID_REQUEST: a timeout_ms over the kind's longest (an unset one is
 * the default, capped to it).  The caller's deadline, when shorter, is the
 * run's (never a refusal: it only shortens). */
static int check_timeout(struct run_call *c, struct call_log *lg) {
    unsigned t = c->req.timeout_ms ? c->req.timeout_ms : c->api->config->default_timeout_ms;
    unsigned most = c->caps->max_timeout_ms;
    VALUE(c, "timeout_ms %u%s against the longest, %u%s", t,
          c->req.timeout_ms ? "" : " (the default)", most,
          lg->deadline_ms ? "; the caller's deadline can shorten it" : "");
    if (most && t > most) {
        if (c->req.timeout_ms)
            return pl_error_set(&c->err, PL_REASON_INVALID_REQUEST,
                                "timeout_ms: %u exceeds the longest allowed for %s payloads, %u ms",
                                c->req.timeout_ms, pl_payload_name(c->req.kind), most);
        t = most;
    }
    if (lg->deadline_ms && lg->deadline_ms < t)
        t = lg->deadline_ms;
    c->timeout_ms = t;
    return 0;
}

/* INVALID_REQUEST: a memory_mb below the least the provider can start. */
static int check_memory(struct run_call *c, struct call_log *lg) {
    (void)lg;
    const struct pl_provider *prov = c->api->provider;
    VALUE(c, "memory_mb %u%s against the least the provider starts, %u",
          c->req.memory_mb ? c->req.memory_mb : c->api->config->memory_mb,
          c->req.memory_mb ? "" : " (the allowance)", prov->info.min_memory_mb);
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
    VALUE(c, "the provider's readiness now");
    if (pl_provider_ready(c->api->provider, &c->err) == 0)
        return 0;
    c->err.reason = PL_REASON_NOT_READY;
    return -1;
}

/* SHUTTING_DOWN: the daemon is draining. */
static int check_draining(struct run_call *c, struct call_log *lg) {
    (void)lg;
    VALUE(c, "the daemon %s", atomic_load(&c->api->draining) ? "is draining" : "serves");
    if (!atomic_load(&c->api->draining))
        return 0;
    return pl_error_set(&c->err, PL_REASON_SHUTTING_DOWN, "the daemon is shutting down");
}

/* RATE_LIMITED, AT_CAPACITY: admission takes a slot.  In a session its own
 * refusals stand here instead (NOT_FOUND, SESSION_ENDED): a session holds
 * its admission slot from open to end, and the call takes its turn. */
static int take_place(struct run_call *c, struct call_log *lg) {
    (void)lg;
    if (c->session_id) {
        VALUE(c, "the session's turn (the caller's own, open)%s",
              c->explain ? "; a stopped session's slot is not looked at" : "");
        if (c->explain)
            return pl_sessions_peek(c->api->sessions, c->principal, c->session_id, c->ended_reason,
                                    sizeof(c->ended_reason), &c->err);
        return pl_sessions_begin(c->api->sessions, c->principal, c->session_id, &c->ss,
                                 c->ended_reason, sizeof(c->ended_reason), &c->err);
    }
    /* The daemon-wide count is said only in an AT_CAPACITY refusal, as Run
     * says it: a ticket that passes tells nobody how busy others are. */
    VALUE(c, "the caller's rate tokens and a free run slot");
    if (c->explain)
        return pl_admission_peek(c->api->admission, c->principal, &c->err);
    return pl_admission_acquire(c->api->admission, c->principal, &c->err);
}

/* The refusal ladder, in the documented order. */
static const struct rung {
    const char *check; /* its name in Explain's ticket */
    const char *name;  /* for a reader: which rung, which reason */
    int (*check_fn)(struct run_call *c, struct call_log *lg);
} ladder[] = {
    {"grant_profile", "grant profile (INVALID_REQUEST)", check_grant_profile},
    {"provider", "provider disabled (DISABLED)", check_provider_runs},
    {"isolation_floor", "isolation floor (INSUFFICIENT_ISOLATION)", check_floor},
    {"payload", "kind, language, session (UNSUPPORTED)", check_payload_supported},
    {"grant_brokered", "grant brokered for the kind (UNSUPPORTED)", check_grant_brokered},
    {"grant_caller", "grant's callers (CALLER_NOT_ALLOWED)", check_grant_caller},
    {"timeout", "timeout (INVALID_REQUEST)", check_timeout},
    {"memory", "memory (INVALID_REQUEST)", check_memory},
    {"ready", "readiness (NOT_READY)", check_ready},
    {"draining", "draining (SHUTTING_DOWN)", check_draining},
    {"admission", "admission or the session's turn (RATE_LIMITED, AT_CAPACITY, SESSION_ENDED)",
     take_place},
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
                             .output_bytes = cfg->output_bytes,
                             .files = {.list_entries = cfg->file_list_entries},
                             .collect = {.files = cfg->collect_files, .bytes = cfg->collect_bytes},
                             .display = {.outputs = cfg->display_outputs,
                                         .output_bytes = cfg->display_output_bytes,
                                         .bytes = cfg->display_bytes}};
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
    /* A streaming call's head goes out now; its output as it is kept. */
    if (lg->stream)
        ctx.sink = api_stream_begin(lg->stream);
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
        /* A file call's path that names nothing is NOT_FOUND, and like
         * INVALID_REQUEST it ends no session. */
        bool turned_down =
            c->err.reason == PL_REASON_INVALID_REQUEST ||
            (c->err.reason == PL_REASON_NOT_FOUND && pl_payload_is_files(c->req.kind));
        if (!turned_down && c->err.reason != PL_REASON_SESSION_ENDED &&
            c->err.reason != PL_REASON_NOT_READY)
            c->err.reason = PL_REASON_INTERNAL;
        if (c->ss)
            pl_sessions_done(api->sessions, c->ss, NULL, turned_down ? NULL : c->err.message);
        c->ss = NULL;
        return -1;
    }
    bool files = pl_payload_is_files(c->req.kind);
    json_t *out = files ? api_files_json(&c->req, &res)
                        : api_result_json(&res, prov->info.tier, (uint32_t)(elapsed / 1000000ull));
    if (out && c->cell)
        json_object_set_new(out, "interpreter_started", json_boolean(res.interpreter_started));
    if (c->cell)
        pl_metrics_cell(api->metrics, res.cell_uplink);
    if (!files && res.usage.present)
        pl_metrics_usage(api->metrics, c->req.kind, res.usage.cpu_user_us + res.usage.cpu_system_us,
                         res.usage.memory_peak_bytes);
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
    if (!files)
        pl_metrics_run(api->metrics, oc, prov->info.tier, elapsed);
    lg->outcome = files ? "ok" : "ran";
    api_set_json(rs, 200, out);
    return 0;
}

/* The call's request, as api_run_request's inner says it is. */
static int decode_call(const struct pl_api *api, enum pl_payload_kind inner, const char *body,
                       size_t body_len, struct pl_run_request *ret, struct pl_error *err) {
    const struct pl_config *cfg = api->config;
    if (pl_payload_is_files(inner)) {
        struct pl_files_limits fl = {.read_bytes = cfg->file_read_bytes};
        return pl_files_request_decode(inner, body, body_len, &fl, ret, err);
    }
    struct pl_request_limits limits = {.max_timeout_ms = cfg->max_timeout_ms,
                                       .memory_mb = cfg->memory_mb,
                                       .allow_cell = inner == PL_PAYLOAD_CELL};
    return pl_run_request_decode(body, body_len, &limits, ret, err);
}

void api_run_request(struct pl_api *api, const char *principal, const char *body, size_t body_len,
                     const char *session_id, enum pl_payload_kind inner, struct pl_api_response *rs,
                     struct call_log *lg) {
    struct run_call c = {.api = api,
                         .principal = principal,
                         .session_id = session_id,
                         .cell = inner == PL_PAYLOAD_CELL};
    int r = decode_call(api, inner, body, body_len, &c.req, &c.err);
    for (size_t i = 0; r == 0 && i < sizeof(ladder) / sizeof(ladder[0]); i++)
        r = ladder[i].check_fn(&c, lg);
    if (r == 0)
        r = dispatch(&c, rs, lg);
    pl_run_request_clear(&c.req);
    if (r < 0)
        api_refuse(api, rs, lg, &c.err,
                   c.err.reason == PL_REASON_SESSION_ENDED && c.ended_reason[0] ? c.ended_reason
                                                                                : NULL);
}

/* ---- Explain ------------------------------------------------------------- */

/* One rung of the ticket; at a refusal, the error the call would get. */
static int ticket_add(struct run_call *c, json_t *checks, const char *check, const char *what,
                      int r) {
    json_t *e = json_pack("{s:s, s:s, s:s, s:b}", "check", check, "what", what, "value", c->value,
                          "passed", r == 0);
    if (e && r < 0) {
        int status = 0;
        json_t *body = api_error_body(
            c->api, &c->err,
            c->err.reason == PL_REASON_SESSION_ENDED && c->ended_reason[0] ? c->ended_reason : NULL,
            &status);
        json_t *info =
            json_object_get(json_array_get(json_object_get(body, "details"), 0), "debug");
        json_t *refusal = json_pack(
            "{s:O?, s:O?, s:O?, s:O?, s:O?, s:i}", "code", json_object_get(body, "code"), "message",
            json_object_get(body, "message"), "reason", json_object_get(info, "reason"), "domain",
            json_object_get(info, "domain"), "metadata", json_object_get(info, "metadata"),
            "http_status", (json_int_t)status);
        json_decref(body);
        if (!refusal || json_object_set_new(e, "refusal", refusal) < 0) {
            json_decref(e);
            e = NULL;
        }
    }
    return e ? json_array_append_new(checks, e) : -1;
}

void api_run_explain(struct pl_api *api, const char *principal, const char *body, size_t body_len,
                     const char *session_id, enum pl_payload_kind inner, struct pl_api_response *rs,
                     struct call_log *lg) {
    struct run_call c = {.api = api,
                         .principal = principal,
                         .session_id = session_id,
                         .cell = inner == PL_PAYLOAD_CELL,
                         .explain = true};
    json_t *checks = json_array();
    int r = decode_call(api, inner, body, body_len, &c.req, &c.err);
    VALUE(&c, "the %s decodes within the request limits",
          c.cell                       ? "cell"
          : pl_payload_is_files(inner) ? pl_payload_name(inner)
                                       : "RunRequest");
    int bad = !checks || ticket_add(&c, checks, "request", "the request (INVALID_REQUEST)", r);
    for (size_t i = 0; r == 0 && !bad && i < sizeof(ladder) / sizeof(ladder[0]); i++) {
        c.value[0] = '\0';
        r = ladder[i].check_fn(&c, lg);
        bad = ticket_add(&c, checks, ladder[i].check, ladder[i].name, r);
    }
    pl_run_request_clear(&c.req);
    json_t *out = bad ? NULL
                      : json_pack("{s:o, s:b, s:s}", "checks", checks, "dispatch", r == 0,
                                  "isolation", pl_tier_name(api->provider->info.tier));
    if (!out) {
        if (bad)
            json_decref(checks);
        api_set_text(rs, 500, "out of memory\n");
        return;
    }
    lg->outcome = "ok";
    api_set_json(rs, 200, out);
}
