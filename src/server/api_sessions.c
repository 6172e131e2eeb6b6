/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_sessions.c: the session methods' outer messages.  OpenSession,
 * CloseSession, ListSessions, GetSession and ExtendSession are answered
 * here; RunInSession and RunCell unwrap their
 * RunRequest (RunCell builds one from the cell) and take the Run path
 * (api_run.c) with the session's id.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../core/jsonscan.h"
#include "../core/record.h"
#include "api_int.h"

const char *const api_session_methods[] = {
    "OpenSession", "RunInSession",  "RunCell",    "CloseSession", "RunCellStream", "ListSessions",
    "GetSession",  "ExtendSession", "WriteFiles", "ReadFile",     "ListFiles",     NULL};

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

static void run_inner(struct pl_api *api, const char *principal, enum pl_payload_kind inner,
                      bool explain, const struct pl_api_request *rq, struct pl_api_response *rs,
                      struct call_log *lg);

static int open_session(struct pl_api *api, const char *principal, const struct pl_api_request *rq,
                        struct pl_api_response *rs, struct call_log *lg, struct pl_error *err) {
    static const char *const f[] = {"languages", NULL}, *const c[] = {"languages", NULL};
    PL_AUTO_JSON json_t *m = decode_outer(rq->body, rq->body_len, "OpenSessionRequest", f, c, err);
    if (!m)
        return -1;
    json_t *langs = json_object_get(m, "languages");
    const char *hint[5] = {0};
    size_t n = json_array_size(langs);
    if ((langs && !json_is_array(langs)) || n > 4)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "languages: a list of at most 4");
    for (size_t i = 0; i < n; i++) {
        hint[i] = json_string_value(json_array_get(langs, i));
        if (!hint[i] || (strcmp(hint[i], "python") != 0 && strcmp(hint[i], "javascript") != 0))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "languages[%zu]: must be \"python\" or \"javascript\"", i);
    }
    if (sessions_available(api, err) < 0)
        return -1;
    if (pl_provider_ready(api->provider, err) < 0) {
        err->reason = PL_REASON_NOT_READY;
        return -1;
    }
    if (atomic_load(&api->draining))
        return pl_error_set(err, PL_REASON_SHUTTING_DOWN, "the daemon is shutting down");
    char id[PL_SESSION_ID_LEN + 1];
    if (pl_sessions_open(api->sessions, principal, hint, id, err) < 0)
        return -1;
    lg->outcome = "ok";
    api_set_json(rs, 200,
                 json_pack("{s:s, s:s}", "session_id", id, "route", api->config->instance));
    return 0;
}

static int close_session(struct pl_api *api, const char *principal, const struct pl_api_request *rq,
                         struct pl_api_response *rs, struct call_log *lg, struct pl_error *err) {
    static const char *const f[] = {"session_id", NULL}, *const c[] = {"sessionId", NULL};
    PL_AUTO_JSON json_t *m = decode_outer(rq->body, rq->body_len, "CloseSessionRequest", f, c, err);
    const char *id;
    if (!m || !(id = session_id_of(m, err)) || sessions_available(api, err) < 0 ||
        pl_sessions_close(api->sessions, principal, id, err) < 0)
        return -1;
    lg->outcome = "ok";
    api_set_json(rs, 200, json_object());
    return 0;
}

/* An instant of pl_session_info's as RFC 3339; "" for none. */
static json_t *instant(uint64_t ns) {
    char t[40];
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};
    if (!ns || pl_rfc3339(ts, t) < 0)
        return json_string("");
    return json_string(t);
}

/* A SessionInfo message. */
static json_t *session_info_json(const struct pl_session_info *in, const char *route) {
    json_t *langs = json_array(), *interp = json_array();
    for (size_t i = 0; in->languages[i]; i++)
        json_array_append_new(langs, json_string(in->languages[i]));
    for (size_t i = 0; i < in->status.ninterpreters; i++)
        json_array_append_new(interp, json_pack("{s:s, s:b}", "language",
                                                in->status.interpreters[i].language, "alive",
                                                in->status.interpreters[i].alive));
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:s, s:o, s:o, s:I, s:I, "
                     "s:I, s:s}",
                     "session_id", in->id, "state", in->state, "ended_reason", in->ended_reason,
                     "created_at", instant(in->created), "last_call_at", instant(in->last_call),
                     "idle_deadline", instant(in->idle_deadline), "lifetime_deadline",
                     instant(in->lifetime_deadline), "ended_at", instant(in->ended_at), "calls",
                     (json_int_t)in->calls, "calls_waiting", (json_int_t)in->calls_waiting,
                     "previous_digest", in->previous, "languages", langs, "interpreters", interp,
                     "disk_used_kib", (json_int_t)((in->status.disk_used_bytes + 1023) >> 10),
                     "disk_budget_kib", (json_int_t)(in->status.disk_budget_bytes >> 10),
                     "max_lifetime_s", (json_int_t)in->max_lifetime_s, "route", route);
}

static int list_sessions(struct pl_api *api, const char *principal, const struct pl_api_request *rq,
                         struct pl_api_response *rs, struct call_log *lg, struct pl_error *err) {
    static const char *const f[] = {NULL}, *const c[] = {NULL};
    PL_AUTO_JSON json_t *m = decode_outer(rq->body, rq->body_len, "ListSessionsRequest", f, c, err);
    struct pl_session_info *list = NULL;
    size_t n = 0;
    if (!m || sessions_available(api, err) < 0 ||
        pl_sessions_list(api->sessions, principal, &list, &n, err) < 0)
        return -1;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, session_info_json(&list[i], api->config->instance));
    free(list);
    lg->outcome = "ok";
    api_set_json(rs, 200, json_pack("{s:o}", "sessions", arr));
    return 0;
}

static int get_session(struct pl_api *api, const char *principal, const struct pl_api_request *rq,
                       struct pl_api_response *rs, struct call_log *lg, struct pl_error *err) {
    static const char *const f[] = {"session_id", NULL}, *const c[] = {"sessionId", NULL};
    PL_AUTO_JSON json_t *m = decode_outer(rq->body, rq->body_len, "GetSessionRequest", f, c, err);
    const char *id;
    struct pl_session_info info;
    if (!m || !(id = session_id_of(m, err)) || sessions_available(api, err) < 0 ||
        pl_sessions_get(api->sessions, principal, id, &info, err) < 0)
        return -1;
    lg->outcome = "ok";
    api_set_json(rs, 200, session_info_json(&info, api->config->instance));
    return 0;
}

static int extend_session(struct pl_api *api, const char *principal,
                          const struct pl_api_request *rq, struct pl_api_response *rs,
                          struct call_log *lg, char *ended, size_t ended_size,
                          struct pl_error *err) {
    static const char *const f[] = {"session_id", "ends_in_s", NULL}, *const c[] = {"sessionId",
                                                                                    "endsInS",
                                                                                    NULL};
    PL_AUTO_JSON json_t *m =
        decode_outer(rq->body, rq->body_len, "ExtendSessionRequest", f, c, err);
    const char *id;
    if (!m || !(id = session_id_of(m, err)))
        return -1;
    json_t *e = json_object_get(m, "ends_in_s");
    json_int_t secs = json_is_integer(e) ? json_integer_value(e) : -1;
    if (secs < 1 || secs > UINT32_MAX)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "ends_in_s: required, a whole number of seconds from 1");
    struct pl_session_info info;
    if (sessions_available(api, err) < 0 ||
        pl_sessions_extend(api->sessions, principal, id, (unsigned)secs, &info, ended, ended_size,
                           err) < 0)
        return -1;
    lg->outcome = "ok";
    api_set_json(rs, 200, session_info_json(&info, api->config->instance));
    return 0;
}

void api_handle_session_call(struct pl_api *api, const char *principal, const char *method,
                             const struct pl_api_request *rq, struct pl_api_response *rs,
                             struct call_log *lg) {
    struct pl_error err = {0};
    char ended[256] = "";
    int rc;
    if (strcmp(method, "OpenSession") == 0) {
        rc = open_session(api, principal, rq, rs, lg, &err);
    } else if (strcmp(method, "CloseSession") == 0) {
        rc = close_session(api, principal, rq, rs, lg, &err);
    } else if (strcmp(method, "ListSessions") == 0) {
        rc = list_sessions(api, principal, rq, rs, lg, &err);
    } else if (strcmp(method, "GetSession") == 0) {
        rc = get_session(api, principal, rq, rs, lg, &err);
    } else if (strcmp(method, "ExtendSession") == 0) {
        rc = extend_session(api, principal, rq, rs, lg, ended, sizeof(ended), &err);
    } else if (strcmp(method, "WriteFiles") == 0) {
        run_inner(api, principal, PL_PAYLOAD_WRITE_FILES, false, rq, rs, lg);
        return;
    } else if (strcmp(method, "ReadFile") == 0) {
        run_inner(api, principal, PL_PAYLOAD_READ_FILE, false, rq, rs, lg);
        return;
    } else if (strcmp(method, "ListFiles") == 0) {
        run_inner(api, principal, PL_PAYLOAD_LIST_FILES, false, rq, rs, lg);
        return;
    } else {
        /* RunInSession and RunCell: an inner RunRequest, decoded by the Run path. */
        bool cell = strcmp(method, "RunCell") == 0 || strcmp(method, "RunCellStream") == 0;
        run_inner(api, principal, cell ? PL_PAYLOAD_CELL : PL_PAYLOAD_NONE, false, rq, rs, lg);
        return;
    }
    if (rc < 0)
        api_refuse(api, rs, lg, &err, ended[0] ? ended : NULL);
}

/* The inner call of RunInSession, RunCell, a file call or Explain, read
 * from the outer message: the inner message's text (a RunRequest; for a
 * cell one built from it and its timeout; a file call's message without
 * session_id), the session id (or "-" for one of the wrong length; "" for
 * an Explain without one) and what the text is. */
struct inner_call {
    char *text;
    enum pl_payload_kind inner;
    char id[PL_SESSION_ID_LEN + 1];
};

/* The file calls' messages: what each outer message may hold besides
 * session_id, snake_case and camelCase. */
static const char *const write_f[] = {"session_id", "files", NULL}, *const write_c[] = {
                                                                        "sessionId", "files", NULL};
static const char *const read_f[] = {"session_id", "path", "offset", "limit", NULL},
                         *const read_c[] = {"sessionId", "path", "offset", "limit", NULL};
static const char *const list_f[] = {"session_id", "path", "depth", NULL}, *const list_c[] = {
                                                                               "sessionId", "path",
                                                                               "depth", NULL};

static const struct {
    enum pl_payload_kind kind;
    const char *message; /* the request message's name */
    const char *explain; /* its member of ExplainRequest */
    const char *const *f, *const *c;
} file_calls[] = {
    {PL_PAYLOAD_WRITE_FILES, "WriteFilesRequest", "write_files", write_f, write_c},
    {PL_PAYLOAD_READ_FILE, "ReadFileRequest", "read_file", read_f, read_c},
    {PL_PAYLOAD_LIST_FILES, "ListFilesRequest", "list_files", list_f, list_c},
};

static int file_call_of(enum pl_payload_kind kind) {
    for (int i = 0; i < 3; i++)
        if (file_calls[i].kind == kind)
            return i;
    return -1;
}

/* A file call's inner text: its message without session_id (which an
 * Explain's member must not hold: the ExplainRequest's names the session). */
static char *file_text(json_t *m, int which, bool in_explain, struct pl_error *err) {
    if (in_explain && json_object_get(m, "session_id")) {
        pl_error_set(err, PL_REASON_INVALID_REQUEST,
                     "ExplainRequest.%s: no session_id inside (the ExplainRequest's names the "
                     "session)",
                     file_calls[which].explain);
        return NULL;
    }
    json_object_del(m, "session_id");
    char *t = json_dumps(m, JSON_COMPACT);
    if (!t)
        pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    return t;
}

static int inner_call_read(struct pl_api *api, const char *principal, bool explain,
                           const struct pl_api_request *rq, struct inner_call *ret,
                           struct pl_error *err) {
    static const char *const rf[] = {"session_id", "run", NULL}, *const rc[] = {"sessionId", "run",
                                                                                NULL};
    static const char *const cf[] = {"session_id", "cell", "timeout_ms", NULL}, *const cc[] = {
                                                                                    "sessionId",
                                                                                    "cell",
                                                                                    "timeoutMs",
                                                                                    NULL};
    static const char *const ef[] = {"session_id",  "run",       "cell",       "timeout_ms",
                                     "write_files", "read_file", "list_files", NULL},
                             *const ec[] = {"sessionId",  "run",      "cell",      "timeoutMs",
                                            "writeFiles", "readFile", "listFiles", NULL};
    enum pl_payload_kind inner = ret->inner;
    int fc = file_call_of(inner);
    const char *id = NULL;
    PL_AUTO_JSON json_t *m = decode_outer(rq->body, rq->body_len,
                                          explain                    ? "ExplainRequest"
                                          : fc >= 0                  ? file_calls[fc].message
                                          : inner == PL_PAYLOAD_CELL ? "RunCellRequest"
                                                                     : "RunInSessionRequest",
                                          explain                    ? ef
                                          : fc >= 0                  ? file_calls[fc].f
                                          : inner == PL_PAYLOAD_CELL ? cf
                                                                     : rf,
                                          explain                    ? ec
                                          : fc >= 0                  ? file_calls[fc].c
                                          : inner == PL_PAYLOAD_CELL ? cc
                                                                     : rc,
                                          err);
    if (!m)
        return -1;
    json_t *files_member = NULL;
    if (explain) {
        /* the call it stands for */
        int members = 0;
        inner = PL_PAYLOAD_NONE;
        if (json_object_get(m, "run"))
            members++;
        if (json_object_get(m, "cell")) {
            members++;
            inner = PL_PAYLOAD_CELL;
        }
        for (int i = 0; i < 3; i++)
            if ((files_member = json_object_get(m, file_calls[i].explain)) != NULL) {
                members++;
                inner = file_calls[i].kind;
                fc = i;
            }
        if (fc >= 0)
            files_member = json_object_get(m, file_calls[fc].explain);
        if (members != 1)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "ExplainRequest: exactly one of run, cell, write_files, read_file "
                                "and list_files");
        if (inner != PL_PAYLOAD_CELL && json_object_get(m, "timeout_ms"))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "ExplainRequest: timeout_ms goes with a cell (a run's is in the "
                                "run)");
        if (json_object_get(m, "session_id") && !(id = session_id_of(m, err)))
            return -1;
        if (inner != PL_PAYLOAD_NONE && !id)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "ExplainRequest: a %s runs only in a session (session_id)",
                                inner == PL_PAYLOAD_CELL ? "cell" : "file call");
        /* It counts against the rate limit: no probing for free. */
        if (pl_admission_spend(api->admission, principal, err) < 0)
            return -1;
    } else if (!(id = session_id_of(m, err))) {
        return -1;
    }
    /* The id first: a file call's text is made by taking it out of m. */
    if (!id)
        ret->id[0] = '\0';
    else if (strlen(id) == PL_SESSION_ID_LEN)
        memcpy(ret->id, id, sizeof(ret->id));
    else
        snprintf(ret->id, sizeof(ret->id), "-"); /* a wrong length is simply no session */
    id = NULL;
    PL_AUTO_JSON json_t *in = NULL;
    if (fc >= 0) {
        json_t *src = explain ? files_member : m;
        if (!json_is_object(src))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: must be an object",
                                file_calls[fc].explain);
        ret->text = file_text(src, fc, explain, err);
        if (!ret->text)
            return -1;
    } else {
        if (inner == PL_PAYLOAD_CELL) {
            json_t *c = json_object_get(m, "cell");
            if (!json_is_object(c))
                return pl_error_set(err, PL_REASON_INVALID_REQUEST, "cell: required");
            in = json_pack("{s:O}", "cell", c);
            json_t *t = json_object_get(m, "timeout_ms");
            if (in && t)
                json_object_set(in, "timeout_ms", t);
        } else {
            in = json_incref(json_object_get(m, "run"));
            if (!json_is_object(in))
                return pl_error_set(err, PL_REASON_INVALID_REQUEST, "run: required");
        }
        ret->text = in ? json_dumps(in, JSON_COMPACT) : NULL;
        if (!ret->text)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    ret->inner = inner;
    return 0;
}

/* RunInSession, RunCell, the file calls and Explain: the inner call, then
 * the Run path (explain: its ladder alone). */
static void run_inner(struct pl_api *api, const char *principal, enum pl_payload_kind inner,
                      bool explain, const struct pl_api_request *rq, struct pl_api_response *rs,
                      struct call_log *lg) {
    struct pl_error err = {0};
    struct inner_call in = {.inner = inner};
    if (inner_call_read(api, principal, explain, rq, &in, &err) < 0) {
        api_refuse(api, rs, lg, &err, NULL);
        return;
    }
    PL_AUTO_FREE char *text = in.text;
    if (explain)
        api_run_explain(api, principal, text, strlen(text), in.id[0] ? in.id : NULL, in.inner, rs,
                        lg);
    else
        api_run_request(api, principal, text, strlen(text), in.id, in.inner, rs, lg);
}

void api_handle_explain(struct pl_api *api, const char *principal, const struct pl_api_request *rq,
                        struct pl_api_response *rs, struct call_log *lg) {
    run_inner(api, principal, PL_PAYLOAD_NONE, true, rq, rs, lg);
}
