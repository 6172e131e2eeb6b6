/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_sessions.c: the session methods' outer messages.  OpenSession and
 * CloseSession are answered here; RunInSession and RunCell unwrap their
 * RunRequest (RunCell builds one from the cell) and take the Run path
 * (api_run.c) with the session's id.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/jsonscan.h"
#include "api_int.h"

const char *const api_session_methods[] = {"OpenSession",  "RunInSession",  "RunCell",
                                           "CloseSession", "RunCellStream", NULL};

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
    if (!pl_provider_runs(prov))
        return pl_error_set(
            err, PL_REASON_DISABLED,
            "this daemon runs the Disabled provider: nothing runs until an operator "
            "sets SANDBOX_PROVIDER");
    if (!api->sessions)
        return pl_error_set(err, PL_REASON_UNSUPPORTED,
                            "sessions are off on this daemon (SANDBOX_MAX_SESSIONS is not set)");
    if (!prov->info.session.supported)
        return pl_error_set(err, PL_REASON_UNSUPPORTED, "provider \"%s\" keeps no sessions",
                            pl_provider_name(prov));
    return 0;
}

static void run_inner(struct pl_api *api, const char *principal, bool cell, bool explain,
                      const struct pl_api_request *rq, struct pl_api_response *rs,
                      struct call_log *lg);

void api_handle_session_call(struct pl_api *api, const char *principal, const char *method,
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
        api_set_json(rs, 200, json_pack("{s:s}", "session_id", id));
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
        api_set_json(rs, 200, json_object());
        return;
    }
    /* RunInSession and RunCell: an inner RunRequest, decoded by the Run path. */
    run_inner(api, principal,
              strcmp(method, "RunCell") == 0 || strcmp(method, "RunCellStream") == 0, false, rq, rs,
              lg);
    return;
refused:
    json_decref(m);
    api_refuse(api, rs, lg, &err, NULL);
}

/* RunInSession, RunCell and Explain: the inner RunRequest (for a cell one
 * built from it and its timeout) and the session id, then the Run path
 * (explain: its ladder alone). */
static void run_inner(struct pl_api *api, const char *principal, bool cell, bool explain,
                      const struct pl_api_request *rq, struct pl_api_response *rs,
                      struct call_log *lg) {
    struct pl_error err = {0};
    json_t *m = NULL;
    static const char *const rf[] = {"session_id", "run", NULL}, *const rc[] = {"sessionId", "run",
                                                                                NULL};
    static const char *const cf[] = {"session_id", "cell", "timeout_ms", NULL}, *const cc[] = {
                                                                                    "sessionId",
                                                                                    "cell",
                                                                                    "timeoutMs",
                                                                                    NULL};
    static const char *const ef[] = {"session_id", "run", "cell", "timeout_ms", NULL},
                             *const ec[] = {"sessionId", "run", "cell", "timeoutMs", NULL};
    const char *id = NULL;
    if (!(m = decode_outer(rq->body, rq->body_len,
                           explain ? "ExplainRequest"
                           : cell  ? "RunCellRequest"
                                   : "RunInSessionRequest",
                           explain ? ef
                           : cell  ? cf
                                   : rf,
                           explain ? ec
                           : cell  ? cc
                                   : rc,
                           &err)))
        goto refused;
    if (explain) {
        /* the Run, RunInSession or RunCell it stands for */
        cell = json_object_get(m, "cell") != NULL;
        if (cell == (json_object_get(m, "run") != NULL)) {
            pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                         "ExplainRequest: exactly one of run and cell");
            goto refused;
        }
        if (!cell && json_object_get(m, "timeout_ms")) {
            pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                         "ExplainRequest: timeout_ms goes with a cell (a run's is in the run)");
            goto refused;
        }
        if (json_object_get(m, "session_id") && !(id = session_id_of(m, &err)))
            goto refused;
        if (cell && !id) {
            pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                         "ExplainRequest: a cell runs only in a session (session_id)");
            goto refused;
        }
        /* It counts against the rate limit: no probing for free. */
        if (pl_admission_spend(api->admission, principal, &err) < 0)
            goto refused;
    } else if (!(id = session_id_of(m, &err))) {
        goto refused;
    }
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
    if (id && strlen(id) == PL_SESSION_ID_LEN)
        memcpy(idcopy, id, sizeof(idcopy));
    json_decref(m);
    if (explain)
        api_run_explain(api, principal, text, strlen(text), id ? idcopy : NULL, cell, rs, lg);
    else
        api_run_request(api, principal, text, strlen(text), idcopy, cell, rs, lg);
    free(text);
    return;
refused:
    json_decref(m);
    api_refuse(api, rs, lg, &err, NULL);
}

void api_handle_explain(struct pl_api *api, const char *principal, const struct pl_api_request *rq,
                        struct pl_api_response *rs, struct call_log *lg) {
    run_inner(api, principal, false, true, rq, rs, lg);
}
