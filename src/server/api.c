/*
 * api.c: routing, the Connect protocol's unary JSON mapping, the refusal
 * order, dispatch and run records.  See api.h.
 */
#include "api.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../broker/broker.h"
#include "../core/buf.h"
#include "../core/canon.h"
#include "../core/clock.h"
#include "../core/ids.h"
#include "../core/jsonscan.h"
#include "../core/log.h"
#include "../core/record.h"
#include "../core/request.h"

#define SERVICE_PREFIX "/plimsoll.v1.SandboxService/"
#define PL_VERSION "0.1.0"

/* Methods in the proto that this build does not serve yet. */
static const char *const session_methods[] = {"OpenSession", "RunInSession", "RunCell",
                                              "CloseSession", NULL};

void pl_api_response_clear(struct pl_api_response *rs) {
    free(rs->body);
    memset(rs, 0, sizeof(*rs));
}

static void set_body(struct pl_api_response *rs, int status, const char *ctype, char *body) {
    rs->status = status;
    rs->content_type = ctype;
    rs->body = body;
    rs->body_len = body ? strlen(body) : 0;
}

static void set_text(struct pl_api_response *rs, int status, const char *text) {
    set_body(rs, status, "text/plain; charset=utf-8", strdup(text));
}

static void set_json(struct pl_api_response *rs, int status, json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    if (!s) {
        set_text(rs, 500, "out of memory\n");
        return;
    }
    set_body(rs, status, "application/json", s);
}

/* ---- google.rpc.ErrorInfo in protobuf wire format ---------------------- */

static int put_varint(struct pl_buf *b, uint64_t v) {
    unsigned char tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v)
            tmp[n] |= 0x80;
        n++;
    } while (v);
    return pl_buf_append(b, tmp, n);
}

static int put_bytes_field(struct pl_buf *b, unsigned field, const void *data, size_t len) {
    if (put_varint(b, (uint64_t)field << 3 | 2) < 0 || put_varint(b, len) < 0)
        return -1;
    return pl_buf_append(b, data, len);
}

int pl_error_info_encode(const char *reason, const char *domain, const char *const *keys,
                         const char *const *values, size_t n, unsigned char **ret,
                         size_t *ret_len) {
    struct pl_buf b = {0};
    int r = put_bytes_field(&b, 1, reason, strlen(reason));
    if (r == 0)
        r = put_bytes_field(&b, 2, domain, strlen(domain));
    for (size_t i = 0; r == 0 && i < n; i++) {
        struct pl_buf e = {0};
        r = put_bytes_field(&e, 1, keys[i], strlen(keys[i]));
        if (r == 0)
            r = put_bytes_field(&e, 2, values[i], strlen(values[i]));
        if (r == 0)
            r = put_bytes_field(&b, 3, e.data ? e.data : "", e.len);
        pl_buf_free(&e);
    }
    if (r < 0) {
        pl_buf_free(&b);
        return -1;
    }
    *ret = (unsigned char *)b.data;
    *ret_len = b.len;
    return 0;
}

/* ---- error answers -------------------------------------------------------- */

struct call_log {
    const char *principal;
    const char *method;
    const char *grant_profile; /* the name only; never a credential */
    unsigned broker_calls, broker_refused;
    const char *outcome;
    enum pl_reason reason;
};

static void refuse(struct pl_api *api, struct pl_api_response *rs, struct call_log *lg,
                   const struct pl_error *err) {
    enum pl_reason reason = err->reason == PL_REASON_NONE ? PL_REASON_INTERNAL : err->reason;
    enum pl_code code = pl_reason_code(reason);
    const char *dispatched =
        pl_reason_dispatched(reason) && !err->before_dispatch ? "true" : "false";
    const char *isolation = pl_tier_name(api->provider->info.tier);
    const char *keys[] = {"dispatched", "isolation", "ended_reason"};
    const char *vals[] = {dispatched, isolation, err->ended_reason};
    size_t nmeta = reason == PL_REASON_SESSION_ENDED && err->ended_reason[0] ? 3 : 2;
    unsigned char *pb = NULL;
    size_t pblen = 0;
    char *b64 = NULL;
    if (pl_error_info_encode(pl_reason_name(reason), "plimsoll", keys, vals, nmeta, &pb, &pblen) ==
        0)
        b64 = pl_base64_encode(pb, pblen, 0);
    free(pb);
    json_t *meta = json_object();
    for (size_t i = 0; meta && i < nmeta; i++)
        json_object_set_new(meta, keys[i], json_string(vals[i]));
    json_t *detail = json_pack("{s:s, s:s, s:{s:s, s:s, s:o}}", "type", "google.rpc.ErrorInfo",
                               "value", b64 ? b64 : "", "debug", "reason", pl_reason_name(reason),
                               "domain", "plimsoll", "metadata", meta);
    free(b64);
    json_t *body = json_pack("{s:s, s:s, s:[o]}", "code", pl_code_name(code), "message",
                             err->message, "details", detail);
    pl_metrics_refusal(api->metrics, reason);
    lg->outcome = reason == PL_REASON_INTERNAL ? "error" : "refused";
    lg->reason = reason;
    if (!body) {
        set_text(rs, 500, "out of memory\n");
        return;
    }
    set_json(rs, pl_code_http_status(code), body);
}

/* ---- Describe ------------------------------------------------------------- */

static json_t *op_json(const struct pl_op_caps *c, bool with_languages) {
    json_t *o = json_pack("{s:b, s:s, s:i, s:b}", "supported", c->supported, "engine",
                          c->engine ? c->engine : "", "max_timeout_ms",
                          (json_int_t)c->max_timeout_ms, "grants", c->grants);
    if (o && with_languages) {
        json_t *langs = json_array();
        for (int i = 0; i < 4 && c->languages[i]; i++)
            json_array_append_new(langs, json_string(c->languages[i]));
        json_object_set_new(o, "languages", langs);
    }
    return o;
}

json_t *pl_api_describe(struct pl_api *api) {
    const struct pl_config *c = api->config;
    const struct pl_provider_info *in = &api->provider->info;
    struct pl_error err = {0};
    bool ready = pl_provider_ready(api->provider, &err) == 0;
    json_t *cell_langs = json_array();
    for (int i = 0; i < 4 && in->session.languages[i]; i++)
        json_array_append_new(cell_langs, json_string(in->session.languages[i]));
    json_t *d = json_pack(
        "{s:s, s:s, s:s, s:s, s:b, s:s, s:b, s:o, s:{s:o, s:o, s:o, s:o},"
        " s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b}}",
        "version", "plimsolld " PL_VERSION, "provider", api->provider->ops->name, "isolation",
        pl_tier_name(in->tier), "runtime", in->runtime ? in->runtime : "", "ready", ready,
        "ready_detail", ready ? "" : err.message, "supports_sessions", in->session.supported,
        "languages", cell_langs, "operations", "snippet", op_json(&in->snippet, true), "project",
        op_json(&in->project, true), "module", op_json(&in->module, false), "session",
        op_json(&in->session, true), "limits", "memory_mb", (json_int_t)c->memory_mb,
        "total_memory_mb", (json_int_t)c->total_memory_mb, "max_concurrent",
        (json_int_t)c->max_concurrent, "effective_concurrency",
        (json_int_t)api->effective_concurrency, "per_key_concurrent",
        (json_int_t)c->per_key_concurrent, "rate_per_min", (json_int_t)c->rate_per_min,
        "rate_burst", (json_int_t)c->rate_burst, "default_timeout_ms",
        (json_int_t)c->default_timeout_ms, "output_bytes", (json_int_t)c->output_bytes,
        "max_snippet_bytes", (json_int_t)PL_SNIPPET_MAX_BYTES, "max_request_bytes",
        (json_int_t)c->max_request_bytes, "memory_budget_applies",
        api->provider->ops->memory_budget_applies);
    if (d && json_object_set_new(json_object_get(d, "limits"), "min_memory_mb",
                                 json_integer((json_int_t)in->min_memory_mb)) < 0) {
        json_decref(d);
        return NULL;
    }
    return d;
}

/* ---- Run ------------------------------------------------------------------ */

static bool utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (i + len > n)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}

/*
 * Output is text when it is valid UTF-8.  Otherwise the string field holds
 * a lossy copy (each byte outside ASCII becomes U+FFFD) and <name>_base64
 * carries the exact bytes, so nothing the guest wrote is lost.
 */
static int put_output(json_t *o, const char *name, const char *data, size_t len) {
    const unsigned char *p = (const unsigned char *)(data ? data : "");
    if (utf8_valid(p, len))
        return json_object_set_new(o, name, json_stringn((const char *)p, len));
    struct pl_buf b = {0};
    for (size_t i = 0; i < len; i++) {
        if (p[i] < 0x80)
            pl_buf_append(&b, &p[i], 1);
        else
            pl_buf_puts(&b, "\xef\xbf\xbd");
    }
    json_object_set_new(o, name, json_stringn(b.data ? b.data : "", b.len));
    pl_buf_free(&b);
    char *b64 = pl_base64_encode(p, len, 1);
    char key[64];
    snprintf(key, sizeof(key), "%s_base64", name);
    int r = json_object_set_new(o, key, json_string(b64 ? b64 : ""));
    free(b64);
    return r;
}

static json_t *result_json(const struct pl_run_result *r, enum pl_tier tier, uint32_t dur_ms) {
    json_t *o = json_pack("{s:i, s:b, s:b, s:i, s:s, s:s, s:b, s:b, s:s, s:s}", "exit_code",
                          (json_int_t)r->exit_code, "stdout_truncated", r->out_truncated,
                          "stderr_truncated", r->err_truncated, "duration_ms", (json_int_t)dur_ms,
                          "sandbox_name", r->sandbox_name, "isolation", pl_tier_name(tier),
                          "timed_out", r->timed_out, "out_of_memory", r->out_of_memory, "outcome",
                          r->outcome ? r->outcome : PL_OUTCOME_COMPLETED, "detail", r->detail);
    if (!o)
        return NULL;
    put_output(o, "stdout", r->out, r->out_len);
    put_output(o, "stderr", r->err, r->err_len);
    json_t *steps = json_array();
    for (size_t i = 0; i < r->nsteps; i++) {
        const struct pl_step_result *s = &r->steps[i];
        json_t *so = json_pack(
            "{s:s, s:i, s:b, s:b, s:i, s:b}", "name", s->name ? s->name : "", "exit_code",
            (json_int_t)s->exit_code, "stdout_truncated", s->out_truncated, "stderr_truncated",
            s->err_truncated, "duration_ms", (json_int_t)s->duration_ms, "timed_out", s->timed_out);
        if (so) {
            put_output(so, "stdout", s->out, s->out_len);
            put_output(so, "stderr", s->err, s->err_len);
            json_array_append_new(steps, so);
        }
    }
    json_object_set_new(o, "steps", steps);
    return o;
}

static enum pl_run_outcome classify(const struct pl_run_result *r) {
    if (r->timed_out)
        return PL_RUN_TIMED_OUT;
    if (r->out_of_memory)
        return PL_RUN_OUT_OF_MEMORY;
    return r->exit_code == 0 ? PL_RUN_EXIT_ZERO : PL_RUN_EXIT_NONZERO;
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

/* Give back what a refused call took: a run's admission slot, or its turn
 * in a session. */
static void release_slot(struct pl_api *api, const char *principal, struct pl_session *ss) {
    if (ss)
        pl_sessions_done(api->sessions, ss, NULL, NULL);
    else
        pl_admission_release(api->admission, principal);
}

static bool language_listed(const struct pl_op_caps *c, const char *lang) {
    for (int i = 0; i < 4 && c->languages[i]; i++)
        if (strcmp(c->languages[i], lang) == 0)
            return true;
    return false;
}

/*
 * Run, RunInSession and RunCell share one path.  body is a RunRequest (for
 * RunCell one the daemon built from the cell and its timeout); session_id
 * is NULL for Run.  The refusal order is the one in api.h, with the
 * session's own refusals (unknown id, ended) where admission stands for a
 * run: a session holds its admission slot from open to end.
 */
static void run_request(struct pl_api *api, const char *principal, const char *body,
                        size_t body_len, const char *session_id, bool cell,
                        struct pl_api_response *rs, struct call_log *lg) {
    const struct pl_config *cfg = api->config;
    struct pl_provider *prov = api->provider;
    const struct pl_provider_info *in = &prov->info;
    struct pl_error err = {0};
    struct pl_run_request req = {0};
    struct pl_request_limits limits = {
        .max_timeout_ms = cfg->max_timeout_ms, .memory_mb = cfg->memory_mb, .allow_cell = cell};
    struct pl_session *ss = NULL;

    if (pl_run_request_decode(body, body_len, &limits, &req, &err) < 0) {
        refuse(api, rs, lg, &err);
        return;
    }
    const struct pl_grant_profile *grant = NULL;
    if (req.grant_profile) {
        grant = pl_grants_find(api->grants, req.grant_profile);
        if (!grant) {
            pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                         api->grants ? "grant_profile: unknown profile \"%.128s\""
                                     : "grant_profile: unknown profile \"%.128s\" (this daemon "
                                       "has no PLIMSOLL_GRANTS_FILE)",
                         req.grant_profile);
            goto refused;
        }
        lg->grant_profile = grant->name;
        if (session_id && !grant->allow_in_sessions) {
            pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                         "grant_profile: profile \"%.128s\" does not set allow_in_sessions: in "
                         "a session anything an earlier call left running could use the grant; "
                         "run it outside a session",
                         grant->name);
            goto refused;
        }
    }
    if (!prov->ops->run) {
        pl_error_set(&err, PL_REASON_DISABLED,
                     "this daemon runs the Disabled provider: nothing runs until an operator "
                     "sets SANDBOX_PROVIDER");
        goto refused;
    }
    if (req.has_floor && req.floor > in->tier) {
        pl_error_set(&err, PL_REASON_INSUFFICIENT_ISOLATION,
                     "minimum_isolation \"%s\" is above this daemon's tier \"%s\"; nothing ran",
                     pl_tier_name(req.floor), pl_tier_name(in->tier));
        goto refused;
    }
    const struct pl_op_caps *caps = caps_for(in, req.kind);
    if (session_id && (!api->sessions || !in->session.supported)) {
        pl_error_set(&err, PL_REASON_UNSUPPORTED,
                     api->sessions ? "provider \"%s\" keeps no sessions"
                                   : "sessions are off (SANDBOX_MAX_SESSIONS is not set)",
                     prov->ops->name);
        goto refused;
    }
    if (cell) {
        caps = &in->session;
        if (!language_listed(caps, req.cell.language)) {
            pl_error_set(&err, PL_REASON_UNSUPPORTED,
                         "cell.language: this daemon's sessions run cells in %s%s%s",
                         caps->languages[0] ? caps->languages[0] : "no language",
                         caps->languages[1] ? " and " : "",
                         caps->languages[1] ? caps->languages[1] : "");
            goto refused;
        }
    } else if (session_id && req.kind == PL_PAYLOAD_MODULE) {
        pl_error_set(&err, PL_REASON_UNSUPPORTED,
                     "a session runs snippets, projects and cells, not modules");
        goto refused;
    }
    if (!caps || !caps->supported) {
        pl_error_set(&err, PL_REASON_UNSUPPORTED, "provider \"%s\" does not run %s payloads",
                     prov->ops->name, pl_payload_name(req.kind));
        goto refused;
    }
    if (!cell && req.kind == PL_PAYLOAD_SNIPPET && !language_listed(caps, req.snippet.language)) {
        pl_error_set(&err, PL_REASON_UNSUPPORTED, "provider \"%s\" does not run %s snippets",
                     prov->ops->name, req.snippet.language);
        goto refused;
    }
    if (grant && !caps->grants) {
        pl_error_set(&err, PL_REASON_UNSUPPORTED,
                     "provider \"%s\" does not broker grants for %s payloads; see Describe",
                     prov->ops->name, pl_payload_name(req.kind));
        goto refused;
    }
    if (grant && !pl_grant_caller_allowed(grant, principal)) {
        pl_error_set(&err, PL_REASON_CALLER_NOT_ALLOWED,
                     "caller \"%.128s\" is not in the allowed_callers of grant profile "
                     "\"%.128s\"; nothing ran",
                     principal, grant->name);
        goto refused;
    }
    unsigned timeout = req.timeout_ms ? req.timeout_ms : cfg->default_timeout_ms;
    if (caps->max_timeout_ms && timeout > caps->max_timeout_ms) {
        if (req.timeout_ms) {
            pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                         "timeout_ms: %u exceeds the longest allowed for %s payloads, %u ms",
                         req.timeout_ms, pl_payload_name(req.kind), caps->max_timeout_ms);
            goto refused;
        }
        timeout = caps->max_timeout_ms;
    }
    if (req.memory_mb && req.memory_mb < in->min_memory_mb) {
        pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                     "memory_mb: %u is below %u, the least provider \"%s\" can start a sandbox "
                     "with (Describe: limits.min_memory_mb)",
                     req.memory_mb, in->min_memory_mb, prov->ops->name);
        goto refused;
    }
    if (pl_provider_ready(prov, &err) < 0) {
        err.reason = PL_REASON_NOT_READY;
        goto refused;
    }
    if (atomic_load(&api->draining)) {
        pl_error_set(&err, PL_REASON_SHUTTING_DOWN, "the daemon is shutting down");
        goto refused;
    }
    if (session_id ? pl_sessions_begin(api->sessions, principal, session_id, &ss, &err) < 0
                   : pl_admission_acquire(api->admission, principal, &err) < 0)
        goto refused;

    /* Dispatch. */
    struct pl_run_ctx ctx = {.principal = principal,
                             .timeout_ms = timeout,
                             .memory_mb = req.memory_mb ? req.memory_mb : cfg->memory_mb,
                             .output_bytes = cfg->output_bytes};
    if (pl_random_hex(ctx.run_id, sizeof(ctx.run_id), 16) < 0) {
        release_slot(api, principal, ss);
        pl_error_set(&err, PL_REASON_INTERNAL, "no randomness available");
        err.before_dispatch = true;
        goto refused;
    }
    if (grant) {
        /* The credential, once per run; the deadline bounds every call. */
        uint64_t grant_deadline = pl_now_ns() + (uint64_t)timeout * 1000000ull;
        if (pl_broker_new(grant, api->env, api->env_userdata, principal, grant_deadline,
                          &ctx.broker, &err) < 0) {
            release_slot(api, principal, ss);
            err.before_dispatch = true;
            goto refused;
        }
    }
    struct timespec started;
    clock_gettime(CLOCK_REALTIME, &started);
    uint64_t t0 = pl_now_ns();
    struct pl_run_result res = {0};
    int r = ss ? prov->ops->session_run(prov->state, pl_session_handle(ss), &ctx, &req, &res, &err)
               : prov->ops->run(prov->state, &ctx, &req, &res, &err);
    uint64_t elapsed = pl_now_ns() - t0;
    unsigned broker_calls = pl_broker_calls(ctx.broker);
    unsigned broker_refused = pl_broker_refused(ctx.broker);
    lg->broker_calls = broker_calls;
    lg->broker_refused = broker_refused;
    if (grant)
        pl_metrics_broker(api->metrics, broker_calls, broker_refused);
    pl_broker_free(ctx.broker); /* stops its socket, wipes the credential */
    if (!ss)
        pl_admission_release(api->admission, principal);
    if (r < 0) {
        pl_run_result_clear(&res);
        /* A provider may refuse the payload itself before the guest started
         * (e.g. a WebAssembly module that does not validate), or find the
         * session's sandbox unusable before the call (it then ends);
         * anything else it reports is infrastructure, and ends a session. */
        if (err.reason != PL_REASON_INVALID_REQUEST && err.reason != PL_REASON_SESSION_ENDED)
            err.reason = PL_REASON_INTERNAL;
        if (ss)
            pl_sessions_done(api->sessions, ss, NULL,
                             err.reason == PL_REASON_INVALID_REQUEST ? NULL : err.message);
        refuse(api, rs, lg, &err);
        pl_run_request_clear(&req);
        return;
    }
    json_t *out = result_json(&res, in->tier, (uint32_t)(elapsed / 1000000ull));
    if (out && cell)
        json_object_set_new(out, "interpreter_started", json_boolean(res.interpreter_started));
    if (cell)
        pl_metrics_cell(api->metrics, res.cell_uplink);
    char session_end[sizeof(res.session_ended)];
    memcpy(session_end, res.session_ended, sizeof(session_end));
    enum pl_run_outcome oc = classify(&res);
    pl_run_result_clear(&res);
    char req_sha[65], resp_sha[65];
    json_t *record = NULL;
    if (out && pl_canon_sha256(req.canonical, req_sha) == 0 &&
        pl_canon_sha256(out, resp_sha) == 0) {
        struct pl_record_input ri = {.request_sha256 = req_sha,
                                     .response_sha256 = resp_sha,
                                     .provider = prov->ops->name,
                                     .isolation = pl_tier_name(in->tier),
                                     .runtime = in->runtime,
                                     .started = started,
                                     .elapsed_ns = elapsed,
                                     .broker_calls = broker_calls,
                                     .broker_refused = broker_refused,
                                     .previous_digest = ss ? pl_session_previous_digest(ss) : NULL};
        record = pl_record_build(&ri);
    }
    if (ss)
        pl_sessions_done(api->sessions, ss,
                         record ? json_string_value(json_object_get(record, "digest")) : NULL,
                         session_end[0] ? session_end : NULL);
    pl_run_request_clear(&req);
    if (!out || !record || json_object_set_new(out, "record", record) < 0) {
        json_decref(out);
        pl_error_set(&err, PL_REASON_INTERNAL, "could not encode the result");
        refuse(api, rs, lg, &err);
        return;
    }
    pl_metrics_run(api->metrics, oc, in->tier, elapsed);
    lg->outcome = "ran";
    set_json(rs, 200, out);
    return;

refused:
    pl_run_request_clear(&req);
    refuse(api, rs, lg, &err);
}

static void handle_run(struct pl_api *api, const char *principal, const struct pl_api_request *rq,
                       struct pl_api_response *rs, struct call_log *lg) {
    run_request(api, principal, rq->body, rq->body_len, NULL, false, rs, lg);
}

/* ---- sessions ---------------------------------------------------------------- */

/* Decode a small outer message: a JSON object whose keys are all in
 * fields (snake_case, or its camelCase twin in camel). */
static json_t *decode_outer(const char *body, size_t len, const char *what,
                            const char *const *fields, const char *const *camel,
                            struct pl_error *err) {
    if (len && pl_json_check_bounds(body, len, err) < 0)
        return NULL;
    json_error_t jerr;
    json_t *o = len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr) : json_object();
    if (!o || !json_is_object(o)) {
        json_decref(o);
        pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: the body must be a JSON object", what);
        return NULL;
    }
    json_t *norm = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        const char *name = NULL;
        for (size_t i = 0; fields[i]; i++)
            if (strcmp(k, fields[i]) == 0 || strcmp(k, camel[i]) == 0)
                name = fields[i];
        if (!name) {
            pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: unknown field \"%.64s\"", what, k);
            json_decref(o);
            json_decref(norm);
            return NULL;
        }
        json_object_set(norm, name, v);
    }
    json_decref(o);
    return norm;
}

static const char *session_id_of(json_t *m, struct pl_error *err) {
    const char *id = json_string_value(json_object_get(m, "session_id"));
    if (!id || !*id) {
        pl_error_set(err, PL_REASON_INVALID_REQUEST, "session_id: required");
        return NULL;
    }
    return id;
}

/* What every session method checks first: a provider that runs, and
 * sessions switched on and kept by it. */
static int sessions_available(struct pl_api *api, struct pl_error *err) {
    struct pl_provider *prov = api->provider;
    if (!prov->ops->run)
        return pl_error_set(
            err, PL_REASON_DISABLED,
            "this daemon runs the Disabled provider: nothing runs until an operator "
            "sets SANDBOX_PROVIDER");
    if (!api->sessions)
        return pl_error_set(err, PL_REASON_UNSUPPORTED,
                            "sessions are off on this daemon (SANDBOX_MAX_SESSIONS is not set)");
    if (!prov->info.session.supported)
        return pl_error_set(err, PL_REASON_UNSUPPORTED, "provider \"%s\" keeps no sessions",
                            prov->ops->name);
    return 0;
}

static void handle_session_call(struct pl_api *api, const char *principal, const char *method,
                                const struct pl_api_request *rq, struct pl_api_response *rs,
                                struct call_log *lg) {
    struct pl_error err = {0};
    json_t *m = NULL;
    if (strcmp(method, "OpenSession") == 0) {
        static const char *const f[] = {"languages", NULL}, *const c[] = {"languages", NULL};
        if (!(m = decode_outer(rq->body, rq->body_len, "OpenSessionRequest", f, c, &err)))
            goto refused;
        json_t *langs = json_object_get(m, "languages");
        const char *hint[5] = {0};
        size_t n = json_array_size(langs);
        if ((langs && !json_is_array(langs)) || n > 4) {
            pl_error_set(&err, PL_REASON_INVALID_REQUEST, "languages: a list of at most 4");
            goto refused;
        }
        for (size_t i = 0; i < n; i++) {
            hint[i] = json_string_value(json_array_get(langs, i));
            if (!hint[i] ||
                (strcmp(hint[i], "python") != 0 && strcmp(hint[i], "javascript") != 0)) {
                pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                             "languages[%zu]: must be \"python\" or \"javascript\"", i);
                goto refused;
            }
        }
        if (sessions_available(api, &err) < 0)
            goto refused;
        if (pl_provider_ready(api->provider, &err) < 0) {
            err.reason = PL_REASON_NOT_READY;
            goto refused;
        }
        if (atomic_load(&api->draining)) {
            pl_error_set(&err, PL_REASON_SHUTTING_DOWN, "the daemon is shutting down");
            goto refused;
        }
        char id[PL_SESSION_ID_LEN + 1];
        if (pl_sessions_open(api->sessions, principal, hint, id, &err) < 0)
            goto refused;
        json_decref(m);
        lg->outcome = "ok";
        set_json(rs, 200, json_pack("{s:s}", "session_id", id));
        return;
    }
    if (strcmp(method, "CloseSession") == 0) {
        static const char *const f[] = {"session_id", NULL}, *const c[] = {"sessionId", NULL};
        const char *id;
        if (!(m = decode_outer(rq->body, rq->body_len, "CloseSessionRequest", f, c, &err)) ||
            !(id = session_id_of(m, &err)) || sessions_available(api, &err) < 0 ||
            pl_sessions_close(api->sessions, principal, id, &err) < 0)
            goto refused;
        json_decref(m);
        lg->outcome = "ok";
        set_json(rs, 200, json_object());
        return;
    }
    /* RunInSession and RunCell: an inner RunRequest, decoded by the Run path. */
    bool cell = strcmp(method, "RunCell") == 0;
    static const char *const rf[] = {"session_id", "run", NULL}, *const rc[] = {"sessionId", "run",
                                                                                NULL};
    static const char *const cf[] = {"session_id", "cell", "timeout_ms", NULL}, *const cc[] = {
                                                                                    "sessionId",
                                                                                    "cell",
                                                                                    "timeoutMs",
                                                                                    NULL};
    const char *id;
    if (!(m = decode_outer(rq->body, rq->body_len, cell ? "RunCellRequest" : "RunInSessionRequest",
                           cell ? cf : rf, cell ? cc : rc, &err)) ||
        !(id = session_id_of(m, &err)))
        goto refused;
    json_t *inner;
    if (cell) {
        json_t *c = json_object_get(m, "cell");
        if (!json_is_object(c)) {
            pl_error_set(&err, PL_REASON_INVALID_REQUEST, "cell: required");
            goto refused;
        }
        inner = json_pack("{s:O}", "cell", c);
        json_t *t = json_object_get(m, "timeout_ms");
        if (inner && t)
            json_object_set(inner, "timeout_ms", t);
    } else {
        inner = json_incref(json_object_get(m, "run"));
        if (!json_is_object(inner)) {
            json_decref(inner);
            pl_error_set(&err, PL_REASON_INVALID_REQUEST, "run: required");
            goto refused;
        }
    }
    char *text = inner ? json_dumps(inner, JSON_COMPACT) : NULL;
    json_decref(inner);
    if (!text) {
        pl_error_set(&err, PL_REASON_INTERNAL, "out of memory");
        goto refused;
    }
    char idcopy[PL_SESSION_ID_LEN + 1] = "-"; /* a wrong length is simply no session */
    if (strlen(id) == PL_SESSION_ID_LEN)
        memcpy(idcopy, id, sizeof(idcopy));
    json_decref(m);
    run_request(api, principal, text, strlen(text), idcopy, cell, rs, lg);
    free(text);
    return;
refused:
    json_decref(m);
    refuse(api, rs, lg, &err);
}

/* ---- routing ---------------------------------------------------------------- */

static bool json_content_type(const char *ct) {
    if (!ct)
        return false;
    size_t n = strlen("application/json");
    if (strncasecmp(ct, "application/json", n) != 0)
        return false;
    return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

static const char *authenticate(struct pl_api *api, const struct pl_api_request *rq) {
    const char *key;
    size_t len;
    if (pl_bearer_parse(rq->authorization, &key, &len) < 0)
        return NULL;
    return pl_keys_authenticate(api->keys, key, len);
}

/* What the head decided, carried to the body phase. */
struct pl_api_call {
    struct call_log lg;
    const char *method; /* "Run", "Describe" or a session method */
    size_t held;        /* body bytes held against the bytes in flight */
};

static void refuse_too_large(struct pl_api *api, struct pl_api_response *rs, struct call_log *lg) {
    struct pl_error err = {0};
    pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                 "request body exceeds PLIMSOLL_MAX_REQUEST_BYTES (%u bytes)",
                 api->config->max_request_bytes);
    refuse(api, rs, lg, &err);
}

/*
 * The request bodies in flight: every caller's together, and each
 * caller's own (principals are the keys file's strings, so a pointer
 * names one).  One lock: it is taken twice per call with a body.
 */
struct pl_key_bytes {
    struct pl_key_bytes *next;
    const char *principal;
    size_t held;
};

static pthread_mutex_t body_bytes_lock = PTHREAD_MUTEX_INITIALIZER;

static struct pl_key_bytes **key_bytes_find(struct pl_api *api, const char *principal) {
    struct pl_key_bytes **k = &api->key_bytes;
    while (*k && (*k)->principal != principal)
        k = &(*k)->next;
    return k;
}

/* Hold n bytes for principal; which bound refused it in *ret_which. */
static int hold_body_bytes(struct pl_api *api, const char *principal, size_t n,
                           const char **ret_which) {
    const struct pl_config *c = api->config;
    pthread_mutex_lock(&body_bytes_lock);
    size_t all = atomic_load(&api->body_bytes);
    struct pl_key_bytes **k = key_bytes_find(api, principal);
    size_t mine = *k ? (*k)->held : 0;
    int r = -1;
    if (n > c->request_bytes_in_flight || all > c->request_bytes_in_flight - n)
        *ret_which = "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT";
    else if (n > c->key_request_bytes_in_flight || mine > c->key_request_bytes_in_flight - n)
        *ret_which = "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT";
    else if (!*k && !(*k = calloc(1, sizeof(**k))))
        *ret_which = "memory"; /* out of it: refused like a spent budget */
    else {
        (*k)->principal = principal;
        (*k)->held += n;
        atomic_store(&api->body_bytes, all + n);
        r = 0;
    }
    pthread_mutex_unlock(&body_bytes_lock);
    return r;
}

static void release_body_bytes(struct pl_api *api, const char *principal, size_t n) {
    pthread_mutex_lock(&body_bytes_lock);
    atomic_fetch_sub(&api->body_bytes, n);
    struct pl_key_bytes **k = key_bytes_find(api, principal);
    if (*k && ((*k)->held -= n) == 0) {
        struct pl_key_bytes *gone = *k;
        *k = gone->next;
        free(gone);
    }
    pthread_mutex_unlock(&body_bytes_lock);
}

/*
 * The head phase: everything the request line and the headers decide,
 * before a body byte is read.  In order: the probes and /metrics (GET, no
 * body), an unknown path or method (404), a method other than POST (405),
 * the content type (415), authentication (401), the announced length
 * against PLIMSOLL_MAX_REQUEST_BYTES (400), and the bodies already held
 * against PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT, then the caller's against
 * PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT (429 AT_CAPACITY).  Returns
 * true when rs holds the answer; false when the call needs its body, with
 * call->method set and the body's bytes held.
 */
static bool route_head(struct pl_api *api, const struct pl_api_request *rq,
                       struct pl_api_response *rs, struct pl_api_call *call) {
    struct call_log *lg = &call->lg;
    struct pl_error err = {0};
    bool get = strcmp(rq->http_method, "GET") == 0 || strcmp(rq->http_method, "HEAD") == 0;

    if (strcmp(rq->path, "/healthz") == 0 && get) {
        lg->method = "healthz";
        set_text(rs, 200, "ok\n");
        return true;
    }
    if (strcmp(rq->path, "/readyz") == 0 && get) {
        lg->method = "readyz";
        if (atomic_load(&api->draining)) {
            set_text(rs, 503, "not ready: shutting down\n");
        } else if (pl_provider_ready(api->provider, &err) < 0) {
            struct pl_buf b = {0};
            pl_buf_printf(&b, "not ready: %s\n", err.message);
            set_body(rs, 503, "text/plain; charset=utf-8", b.data);
        } else {
            set_text(rs, 200, "ready\n");
        }
        return true;
    }
    if (strcmp(rq->path, "/metrics") == 0 && get) {
        lg->method = "metrics";
        lg->principal = authenticate(api, rq);
        if (!lg->principal) {
            set_text(rs, 401, "unauthenticated: send Authorization: Bearer <key>\n");
            lg->outcome = "refused";
            lg->reason = PL_REASON_UNAUTHENTICATED;
            pl_metrics_refusal(api->metrics, PL_REASON_UNAUTHENTICATED);
            return true;
        }
        struct pl_buf b = {0};
        int ready = pl_provider_ready(api->provider, &err) == 0 && !atomic_load(&api->draining);
        if (pl_metrics_render(api->metrics, pl_admission_in_flight(api->admission), ready, &b) <
            0) {
            pl_buf_free(&b);
            set_text(rs, 500, "out of memory\n");
            return true;
        }
        set_body(rs, 200, "text/plain; version=0.0.4; charset=utf-8", b.data);
        return true;
    }
    if (strncmp(rq->path, SERVICE_PREFIX, strlen(SERVICE_PREFIX)) != 0) {
        lg->method = "other";
        pl_error_set(&err, PL_REASON_NOT_FOUND, "no route for %.128s", rq->path);
        refuse(api, rs, lg, &err);
        return true;
    }
    const char *method = rq->path + strlen(SERVICE_PREFIX);
    bool known = strcmp(method, "Run") == 0 || strcmp(method, "Describe") == 0;
    bool reserved = false;
    for (const char *const *m = session_methods; *m; m++)
        if (strcmp(method, *m) == 0) {
            reserved = true;
            lg->method = *m;
        }
    if (!reserved)
        lg->method = strcmp(method, "Run") == 0        ? "Run"
                     : strcmp(method, "Describe") == 0 ? "Describe"
                                                       : "other";
    if (!known && !reserved) {
        pl_error_set(&err, PL_REASON_NOT_FOUND, "no method %.64s in plimsoll.v1.SandboxService",
                     method);
        refuse(api, rs, lg, &err);
        return true;
    }
    if (strcmp(rq->http_method, "POST") != 0) {
        set_text(rs, 405, "method not allowed: Connect unary calls use POST\n");
        rs->allow = "POST";
        lg->outcome = "refused";
        return true;
    }
    if (!json_content_type(rq->content_type)) {
        set_text(rs, 415, "unsupported media type: send Content-Type: application/json\n");
        lg->outcome = "refused";
        return true;
    }
    lg->principal = authenticate(api, rq);
    if (!lg->principal) {
        pl_error_set(&err, PL_REASON_UNAUTHENTICATED,
                     "send Authorization: Bearer <key> with a key listed in the keys file");
        refuse(api, rs, lg, &err);
        return true;
    }
    if (rq->body_too_large ||
        (rq->length_known && rq->content_length > api->config->max_request_bytes)) {
        refuse_too_large(api, rs, lg);
        return true;
    }
    /* A body of unknown length (chunked) may grow to the largest allowed. */
    size_t want = rq->length_known ? (size_t)rq->content_length : api->config->max_request_bytes;
    const char *which = NULL;
    if (want && hold_body_bytes(api, lg->principal, want, &which) < 0) {
        bool mine = strcmp(which, "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT") == 0;
        pl_error_set(&err, PL_REASON_AT_CAPACITY,
                     "%s request bodies being read or decided are at %s (%u bytes); this body "
                     "(%zu bytes) was not read; retry after a short wait",
                     mine ? "this caller's" : "the daemon's", which,
                     mine ? api->config->key_request_bytes_in_flight
                          : api->config->request_bytes_in_flight,
                     want);
        refuse(api, rs, lg, &err);
        return true;
    }
    call->held = want;
    call->method = lg->method;
    return false;
}

/* The body phase: the body is read (or was cut at the limit). */
static void route_body(struct pl_api *api, const struct pl_api_request *rq,
                       struct pl_api_response *rs, struct pl_api_call *call) {
    struct call_log *lg = &call->lg;
    struct pl_error err = {0};
    if (rq->body_too_large) {
        refuse_too_large(api, rs, lg);
        return;
    }
    if (strcmp(call->method, "Run") == 0) {
        handle_run(api, lg->principal, rq, rs, lg);
        return;
    }
    if (strcmp(call->method, "Describe") == 0) {
        if (pl_empty_request_decode(rq->body, rq->body_len, &err) < 0) {
            refuse(api, rs, lg, &err);
            return;
        }
        json_t *d = pl_api_describe(api);
        if (!d) {
            set_text(rs, 500, "out of memory\n");
            return;
        }
        lg->outcome = "ok";
        set_json(rs, 200, d);
        return;
    }
    handle_session_call(api, lg->principal, call->method, rq, rs, lg);
}

/* Count the call, and log it unless it was a probe that succeeded. */
static void finish_log(struct pl_api *api, const struct pl_api_request *rq,
                       struct pl_api_response *rs, const struct call_log *lg, uint64_t t0) {
    if (!rs->body)
        set_text(rs, 500, "internal error\n");
    bool quiet = strcmp(lg->method, "healthz") == 0 || strcmp(lg->method, "readyz") == 0;
    if (!quiet) {
        enum pl_code code = lg->reason ? pl_reason_code(lg->reason) : PL_CODE_UNKNOWN;
        pl_metrics_request(api->metrics, lg->method, code, rs->status == 200);
    }
    if (quiet && rs->status == 200)
        return; /* probes answer often; log them only when they fail */
    json_t *f =
        json_pack("{s:s?, s:s, s:s, s:s, s:s, s:i, s:f}", "principal", lg->principal, "method",
                  lg->method, "path_kind",
                  strncmp(rq->path, SERVICE_PREFIX, strlen(SERVICE_PREFIX)) == 0 ? "rpc" : "http",
                  "outcome", lg->outcome, "reason", lg->reason ? pl_reason_name(lg->reason) : "",
                  "status", (json_int_t)rs->status, "duration_ms", (double)(pl_now_ns() - t0) / 1e6);
    if (f && lg->grant_profile) {
        json_object_set_new(f, "grant_profile", json_string(lg->grant_profile));
        json_object_set_new(f, "broker_calls", json_integer(lg->broker_calls));
        json_object_set_new(f, "broker_refused", json_integer(lg->broker_refused));
    }
    pl_log("info", "request", f);
}

bool pl_api_begin(struct pl_api *api, const struct pl_api_request *rq,
                  struct pl_api_call **ret_call, struct pl_api_response *rs) {
    uint64_t t0 = pl_now_ns();
    memset(rs, 0, sizeof(*rs));
    *ret_call = NULL;
    struct pl_api_call *call = calloc(1, sizeof(*call));
    if (!call) {
        set_text(rs, 500, "out of memory\n");
        return true;
    }
    call->lg = (struct call_log){.principal = NULL, .method = "other", .outcome = "ok"};
    if (route_head(api, rq, rs, call)) {
        finish_log(api, rq, rs, &call->lg, t0);
        free(call);
        return true;
    }
    *ret_call = call;
    return false;
}

void pl_api_finish(struct pl_api *api, struct pl_api_call *call, const struct pl_api_request *rq,
                   struct pl_api_response *rs) {
    uint64_t t0 = pl_now_ns();
    memset(rs, 0, sizeof(*rs));
    route_body(api, rq, rs, call);
    finish_log(api, rq, rs, &call->lg, t0);
}

void pl_api_call_free(struct pl_api *api, struct pl_api_call *call) {
    if (!call)
        return;
    if (call->held)
        release_body_bytes(api, call->lg.principal, call->held);
    free(call);
}

void pl_api_handle(struct pl_api *api, const struct pl_api_request *rq,
                   struct pl_api_response *rs) {
    struct pl_api_request head = *rq;
    if (!head.length_known) { /* a body given whole: its length is known */
        head.length_known = true;
        head.content_length = rq->body_len;
    }
    struct pl_api_call *call;
    if (pl_api_begin(api, &head, &call, rs))
        return;
    pl_api_finish(api, call, rq, rs);
    pl_api_call_free(api, call);
}
