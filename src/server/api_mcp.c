/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_mcp.c: the Model Context Protocol server at /mcp (docs/mcp.md),
 * revision 2025-11-25 over Streamable HTTP, every answer one JSON body.
 *
 * A thin face over the API: each tool is one of the service's calls
 * (Run, OpenSession, RunCell, CloseSession, the file calls, Explain),
 * made on the calling thread with the caller's principal through the same
 * functions a Connect call reaches, so its refusal ladder, admission, rate
 * limit, record and log line are the API's.  What this file adds is the
 * protocol: JSON-RPC, the MCP sessions (mcp_sessions.h), the tools'
 * schemas (mcp/tools.json, compiled in), and the three channels: a run's
 * result (whatever its exit), a typed refusal (isError, "nothing ran"),
 * and an infrastructure failure (a JSON-RPC error).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/canon.h"
#include "../core/clock.h"
#include "../core/jsonscan.h"
#include "../core/log.h"
#include "api_int.h"
#include "mcp_sessions.h"
#include "mcp_tools_json.h"

#define MCP_LATEST "2025-11-25"
static const char *const mcp_versions[] = {MCP_LATEST, "2025-06-18", "2025-03-26"};

/* JSON-RPC's codes, and MCP's own. */
#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_INTERNAL -32603
#define RPC_SERVER_REFUSED -32000     /* the daemon refused the call (data.reason) */
#define RPC_NO_SESSION -32001         /* no such MCP session */
#define RPC_RESOURCE_NOT_FOUND -32002 /* MCP's */

#define MCP_ID_MAX 256u /* bytes in a request's string id */

static bool known_version(const char *v) {
    for (size_t i = 0; i < sizeof(mcp_versions) / sizeof(mcp_versions[0]); i++)
        if (strcmp(v, mcp_versions[i]) == 0)
            return true;
    return false;
}

/* ---- answers ----------------------------------------------------------------- */

/* A JSON-RPC error answer; takes data's reference (may be NULL); id is
 * borrowed (NULL: null). */
static void rpc_error(struct pl_api_response *rs, int status, json_t *id, int code,
                      const char *message, json_t *data) {
    json_t *err = json_pack("{s:i, s:s}", "code", code, "message", message);
    if (!err) /* a message that is not UTF-8 */
        err = json_pack("{s:i, s:s}", "code", code, "message", "(a message that is not UTF-8)");
    if (err && data)
        json_object_set(err, "data", data);
    json_decref(data);
    json_t *v =
        json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", err);
    api_set_json(rs, status, v);
}

static void rpc_result(struct pl_api_response *rs, json_t *id, json_t *result) {
    json_t *v = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
    api_set_json(rs, 200, v);
}

/* A refusal at the head, in JSON-RPC's shape (id null: no body was read). */
static bool head_refuse(struct pl_api *api, struct pl_api_response *rs, struct call_log *lg,
                        int status, enum pl_reason reason, int code, const char *message) {
    if (reason != PL_REASON_NONE) {
        pl_metrics_refusal(api->metrics, reason);
        lg->reason = reason;
    }
    lg->outcome = "refused";
    rpc_error(rs, status, NULL, code, message,
              reason != PL_REASON_NONE ? json_pack("{s:s}", "reason", pl_reason_name(reason))
                                       : NULL);
    return true;
}

/* A header the answer carries (name static, value copied). */
static void add_header(struct pl_api_response *rs, const char *name, const char *value) {
    if (rs->nheaders >= PL_API_MAX_HEADERS)
        return;
    char *v = strdup(value);
    if (!v)
        return;
    rs->headers[rs->nheaders++] = (struct pl_api_header){name, v};
}

/* ---- the head ---------------------------------------------------------------- */

/* Whether the daemon listens where only this machine reaches it. */
static bool listens_on_loopback(const struct pl_config *c) {
    if (c->listen.kind == PL_LISTEN_UNIX)
        return true;
    const char *h = c->listen.host;
    return strcmp(h, "localhost") == 0 || strncmp(h, "127.", 4) == 0 || strcmp(h, "::1") == 0 ||
           strcmp(h, "[::1]") == 0;
}

/* Whether Host names this machine: localhost, 127.0.0.1 or [::1], any port. */
static bool host_is_local(const char *host) {
    if (!host)
        return false;
    size_t n;
    if (host[0] == '[') {
        const char *e = strchr(host, ']');
        if (!e)
            return false;
        n = (size_t)(e - host) + 1;
    } else {
        n = strcspn(host, ":");
    }
    const char *rest = host + n;
    if (*rest == ':') {
        if (!rest[1] || strlen(rest + 1) > 5 || strspn(rest + 1, "0123456789") != strlen(rest + 1))
            return false;
    } else if (*rest) {
        return false;
    }
    return (n == 9 && strncasecmp(host, "localhost", 9) == 0) ||
           (n == 9 && strncmp(host, "127.0.0.1", 9) == 0) ||
           (n == 5 && strncmp(host, "[::1]", 5) == 0);
}

/* Whether Origin is the request's own: http:// or https:// and the Host
 * the request names, as the console's page on the daemon sends it. */
static bool same_origin(const char *origin, const char *host) {
    if (!origin || !host)
        return false;
    const char *rest = strncasecmp(origin, "http://", 7) == 0    ? origin + 7
                       : strncasecmp(origin, "https://", 8) == 0 ? origin + 8
                                                                 : NULL;
    return rest && strcasecmp(rest, host) == 0;
}

/* Whether Accept takes a JSON answer (absent: anything). */
static bool accepts_json(const char *accept) {
    return !accept || strcasestr(accept, "application/json") ||
           strcasestr(accept, "application/*") || strstr(accept, "*/*");
}

bool api_mcp_head(struct pl_api *api, const struct pl_api_request *rq, struct pl_api_call *call,
                  struct pl_api_response *rs) {
    struct call_log *lg = &call->lg;
    call->svc = API_SVC_MCP;
    lg->method = "mcp";
    lg->codec = "json";
    if (rq->origin_repeated ||
        (rq->origin && !api_cors_origin(api, rq) && !same_origin(rq->origin, rq->host)))
        return head_refuse(api, rs, lg, 403, PL_REASON_NONE, RPC_INVALID_REQUEST,
                           "Origin is neither this daemon's own nor one of PLIMSOLL_CORS_ORIGINS");
    if (listens_on_loopback(api->config) && !host_is_local(rq->host))
        return head_refuse(api, rs, lg, 403, PL_REASON_NONE, RPC_INVALID_REQUEST,
                           "Host must be localhost, 127.0.0.1 or [::1] on a daemon that listens "
                           "on loopback");
    bool post = strcmp(rq->http_method, "POST") == 0;
    bool del = strcmp(rq->http_method, "DELETE") == 0;
    if (!post && !del) {
        rs->allow = "POST, DELETE";
        return head_refuse(api, rs, lg, 405, PL_REASON_NONE, RPC_INVALID_REQUEST,
                           "method not allowed: POST a JSON-RPC message, or DELETE to end the "
                           "MCP session (no server-to-client stream is offered)");
    }
    if (post && call->protocol != API_CONNECT_JSON)
        return head_refuse(api, rs, lg, 415, PL_REASON_NONE, RPC_INVALID_REQUEST,
                           "unsupported media type: send Content-Type: application/json");
    if (post && !accepts_json(rq->accept))
        return head_refuse(api, rs, lg, 406, PL_REASON_NONE, RPC_INVALID_REQUEST,
                           "not acceptable: every answer of /mcp is application/json");
    lg->principal = api_authenticate(api, rq);
    if (!lg->principal)
        return head_refuse(api, rs, lg, 401, PL_REASON_UNAUTHENTICATED, RPC_SERVER_REFUSED,
                           "send Authorization: Bearer <key> with a key listed in the keys file");
    if (rq->mcp_protocol_version && !known_version(rq->mcp_protocol_version))
        return head_refuse(api, rs, lg, 400, PL_REASON_INVALID_REQUEST, RPC_INVALID_REQUEST,
                           "MCP-Protocol-Version: not one this server speaks (2025-11-25, "
                           "2025-06-18, 2025-03-26)");
    if (del) {
        if (!rq->mcp_session_id)
            return head_refuse(api, rs, lg, 400, PL_REASON_INVALID_REQUEST, RPC_INVALID_REQUEST,
                               "DELETE needs the Mcp-Session-Id to end");
        if (pl_mcp_session_end(api->mcp_sessions, rq->mcp_session_id, lg->principal) < 0)
            return head_refuse(api, rs, lg, 404, PL_REASON_NONE, RPC_NO_SESSION,
                               "session not found");
        api_set_body(rs, 204, "application/json", strdup(""));
        lg->outcome = "ok";
        return true;
    }
    return false; /* the body: the generic rungs (its size, the bytes in flight) come next */
}

void api_mcp_wrap(struct pl_api_response *rs) {
    if (rs->status == 200 || rs->status == 202 || rs->status == 204)
        return;
    json_t *v = rs->body && rs->content_type && strcmp(rs->content_type, "application/json") == 0
                    ? json_loadb(rs->body, rs->body_len, 0, NULL)
                    : NULL;
    const char *jr = json_string_value(json_object_get(v, "jsonrpc"));
    if (jr && strcmp(jr, "2.0") == 0) {
        json_decref(v);
        return; /* already JSON-RPC's */
    }
    /* A Connect error (the generic rungs: a body too large, the bytes in
     * flight) or a text answer (out of memory). */
    const char *msg = json_string_value(json_object_get(v, "message"));
    json_t *details = json_array_get(json_object_get(v, "details"), 0);
    const char *reason =
        json_string_value(json_object_get(json_object_get(details, "debug"), "reason"));
    int status = rs->status;
    size_t text_len;
    char *text = !v && rs->body ? pl_utf8_lossy((const unsigned char *)rs->body,
                                                rs->body_len < 512 ? rs->body_len : 512, &text_len)
                                : NULL;
    if (text)
        text[strcspn(text, "\n")] = '\0';
    json_t *data = reason ? json_pack("{s:s}", "reason", reason) : NULL;
    char *m = strdup(msg ? msg : text && *text ? text : "refused");
    pl_api_response_clear(rs);
    rpc_error(rs, status, NULL,
              status >= 500   ? RPC_INTERNAL
              : status == 400 ? RPC_INVALID_REQUEST
                              : RPC_SERVER_REFUSED,
              m ? m : "refused", data);
    free(m);
    free(text);
    json_decref(v);
}

/* ---- tools: their schemas and arguments ------------------------------------- */

/* mcp/tools.json, parsed once (read-only after). */
static json_t *tools_json;
static pthread_once_t tools_once = PTHREAD_ONCE_INIT;
static void tools_parse(void) {
    tools_json = json_loadb(pl_mcp_tools_json, sizeof(pl_mcp_tools_json) - 1, 0, NULL);
}
static json_t *tools_doc(void) {
    pthread_once(&tools_once, tools_parse);
    return tools_json;
}

static json_t *tool_def(const char *name) {
    json_t *tools = json_object_get(tools_doc(), "tools");
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
            return t;
    }
    return NULL;
}

/* v against schema, the subset tools.json uses (type, properties, required,
 * additionalProperties false, enum, minimum, maximum, items, minItems,
 * maxItems).  -1 with err INVALID_REQUEST naming the argument at fault. */
static int check_value(const json_t *schema, const json_t *v, const char *path,
                       struct pl_error *err) {
    const char *type = json_string_value(json_object_get(schema, "type"));
    bool ok = !type || (strcmp(type, "string") == 0 && json_is_string(v)) ||
              (strcmp(type, "integer") == 0 && json_is_integer(v)) ||
              (strcmp(type, "boolean") == 0 && json_is_boolean(v)) ||
              (strcmp(type, "array") == 0 && json_is_array(v)) ||
              (strcmp(type, "object") == 0 && json_is_object(v));
    if (!ok)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "argument %s: not a%s %s", path,
                            type[0] == 'a' || type[0] == 'i' || type[0] == 'o' ? "n" : "", type);
    json_t *en = json_object_get(schema, "enum");
    if (en) {
        bool found = false;
        size_t i;
        json_t *x;
        json_array_foreach(en, i, x) found = found || json_equal(x, v);
        if (!found)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "argument %s: not one of its values", path);
    }
    if (json_is_integer(v)) {
        json_t *lo = json_object_get(schema, "minimum"), *hi = json_object_get(schema, "maximum");
        if ((lo && json_integer_value(v) < json_integer_value(lo)) ||
            (hi && json_integer_value(v) > json_integer_value(hi)) || json_integer_value(v) < 0 ||
            json_integer_value(v) > 4294967295)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "argument %s: out of bounds", path);
    }
    if (json_is_array(v)) {
        json_t *lo = json_object_get(schema, "minItems"), *hi = json_object_get(schema, "maxItems");
        if ((lo && json_array_size(v) < (size_t)json_integer_value(lo)) ||
            (hi && json_array_size(v) > (size_t)json_integer_value(hi)))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "argument %s: too few or too many items", path);
        json_t *items = json_object_get(schema, "items");
        size_t i;
        json_t *x;
        char sub[160];
        json_array_foreach(v, i, x) {
            snprintf(sub, sizeof(sub), "%.128s[%zu]", path, i);
            if (items && check_value(items, x, sub, err) < 0)
                return -1;
        }
    }
    if (json_is_object(v)) {
        json_t *props = json_object_get(schema, "properties");
        const char *k;
        json_t *x;
        char sub[160];
        json_object_foreach((json_t *)v, k, x) {
            json_t *ps = json_object_get(props, k);
            snprintf(sub, sizeof(sub), "%.64s.%.64s", path, k);
            if (!ps && json_is_false(json_object_get(schema, "additionalProperties")))
                return pl_error_set(err, PL_REASON_INVALID_REQUEST, "argument %s: no such argument",
                                    sub);
            if (ps && check_value(ps, x, sub, err) < 0)
                return -1;
        }
        size_t i;
        json_array_foreach(json_object_get(schema, "required"), i, x) {
            if (!json_object_get(v, json_string_value(x)))
                return pl_error_set(err, PL_REASON_INVALID_REQUEST, "argument %s.%s: missing", path,
                                    json_string_value(x));
        }
    }
    return 0;
}

/* The snippet languages this daemon's provider runs (Describe's). */
static json_t *snippet_languages(struct pl_api *api) {
    json_t *d = pl_api_describe(api);
    json_t *l =
        json_object_get(json_object_get(json_object_get(d, "operations"), "snippet"), "languages");
    json_t *r = json_is_array(l) && json_array_size(l) ? json_copy(l) : NULL;
    json_decref(d);
    return r;
}

/* tools/list's answer: tools.json's tools, the run schema in place of its
 * reference, and run_code's languages the provider's. */
static json_t *tools_list(struct pl_api *api) {
    json_t *doc = tools_doc();
    json_t *tools = json_deep_copy(json_object_get(doc, "tools"));
    json_t *langs = snippet_languages(api);
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *out = json_object_get(t, "outputSchema");
        if (json_object_get(out, "$ref"))
            json_object_set_new(t, "outputSchema", json_deep_copy(json_object_get(doc, "run")));
        if (langs && strcmp(json_string_value(json_object_get(t, "name")), "run_code") == 0)
            json_object_set(
                json_object_get(json_object_get(json_object_get(t, "inputSchema"), "properties"),
                                "language"),
                "enum", langs);
    }
    json_decref(langs);
    return json_pack("{s:o}", "tools", tools);
}

/* ---- tools: the calls ---------------------------------------------------------- */

/* One call of the service on this thread, as a Connect JSON call of the
 * caller's would make it; its own log line and count. */
static void inner_call(struct pl_api *api, const char *principal, const char *method, json_t *req,
                       struct pl_api_response *rs) {
    uint64_t t0 = pl_now_ns();
    memset(rs, 0, sizeof(*rs));
    struct call_log lg = {
        .principal = principal, .method = method, .outcome = "ok", .codec = "json"};
    char path[96];
    snprintf(path, sizeof(path), "/plimsoll.v1.SandboxService/%s", method);
    char *body = json_dumps(req, JSON_COMPACT);
    struct pl_api_request rq = {.http_method = "POST",
                                .path = path,
                                .content_type = "application/json",
                                .body = body,
                                .body_len = body ? strlen(body) : 0,
                                .length_known = true};
    rq.content_length = rq.body_len;
    if (!body)
        api_set_text(rs, 500, "out of memory\n");
    else if (strcmp(method, "Run") == 0)
        api_run_request(api, principal, rq.body, rq.body_len, NULL, PL_PAYLOAD_NONE, rs, &lg);
    else if (strcmp(method, "Explain") == 0)
        api_handle_explain(api, principal, &rq, rs, &lg);
    else
        api_handle_session_call(api, principal, method, &rq, rs, &lg);
    api_log_call(api, &rq, rs, &lg, t0);
    free(body);
}

/* The inner answer's error: its reason name and message (borrowed from e). */
static void error_of(json_t *e, const char **ret_reason, const char **ret_msg,
                     bool *ret_dispatched) {
    json_t *d = json_object_get(json_array_get(json_object_get(e, "details"), 0), "debug");
    *ret_reason = json_string_value(json_object_get(d, "reason"));
    *ret_msg = json_string_value(json_object_get(e, "message"));
    *ret_dispatched =
        json_is_string(json_object_get(json_object_get(d, "metadata"), "dispatched")) &&
        strcmp(json_string_value(json_object_get(json_object_get(d, "metadata"), "dispatched")),
               "true") == 0;
}

/* A refusal as the model sees it: isError, "nothing ran", the reason. */
static json_t *refusal_result(struct pl_api *api, const char *reason, const char *msg) {
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '.' || msg[n - 1] == ' '))
        n--;
    char *text = NULL;
    bool says = strcasestr(msg, "nothing ran") != NULL;
    if (asprintf(&text, "REFUSED %s: %.*s.%s", reason, (int)n, msg, says ? "" : " Nothing ran.") <
        0)
        text = NULL;
    json_t *r =
        json_pack("{s:[{s:s, s:s}], s:b, s:{s:{s:s, s:b, s:s}}}", "content", "type", "text", "text",
                  text ? text : "REFUSED", "isError", 1, "_meta", "org.plimsoll/refusal", "reason",
                  reason, "dispatched", 0, "isolation", pl_tier_name(api->provider->info.tier));
    free(text);
    return r;
}

/* A refusal decided here (the MCP session's floor, its calls at once, an
 * argument): counted as the API counts its own. */
static json_t *refuse_here(struct pl_api *api, const struct pl_error *err) {
    pl_metrics_refusal(api->metrics, err->reason);
    return refusal_result(api, pl_reason_name(err->reason), err->message);
}

/* A text cut to at most max bytes, at a UTF-8 boundary: a new string;
 * *cut says whether anything was left out. */
static json_t *cut_text(const char *s, size_t max, bool *cut) {
    size_t n = s ? strlen(s) : 0;
    *cut = n > max;
    if (n > max) {
        n = max;
        while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    return json_stringn(s ? s : "", n);
}

/* A newline after text that does not end with one. */
static int end_line(struct pl_buf *b, const char *text) {
    size_t n = strlen(text);
    return n && text[n - 1] == '\n' ? 0 : pl_buf_puts(b, "\n");
}

static bool jbool(json_t *o, const char *k) {
    return json_is_true(json_object_get(o, k));
}

/* A RunResponse as run_code's and run_cell's structured result, and its
 * content blocks (a summary, then an image per image output). */
static json_t *run_result(struct pl_api *api, json_t *r, bool cell) {
    size_t max = api->config->mcp_output_bytes;
    bool cut_out, cut_err;
    json_t *out = cut_text(json_string_value(json_object_get(r, "stdout")), max, &cut_out);
    json_t *err = cut_text(json_string_value(json_object_get(r, "stderr")), max, &cut_err);
    json_t *s = json_pack(
        "{s:I, s:o, s:o, s:b, s:b, s:s, s:s, s:b, s:b, s:I, s:s}", "exit_code",
        json_integer_value(json_object_get(r, "exit_code")), "stdout", out, "stderr", err,
        "stdout_truncated", cut_out || jbool(r, "stdout_truncated"), "stderr_truncated",
        cut_err || jbool(r, "stderr_truncated"), "isolation",
        json_string_value(json_object_get(r, "isolation"))
            ? json_string_value(json_object_get(r, "isolation"))
            : "",
        "outcome",
        json_string_value(json_object_get(r, "outcome"))
            ? json_string_value(json_object_get(r, "outcome"))
            : "",
        "timed_out", jbool(r, "timed_out"), "out_of_memory", jbool(r, "out_of_memory"),
        "duration_ms", json_integer_value(json_object_get(r, "duration_ms")), "record_digest",
        json_string_value(json_object_get(json_object_get(r, "record"), "digest"))
            ? json_string_value(json_object_get(json_object_get(r, "record"), "digest"))
            : "");
    if (!s)
        return NULL;
    if (json_object_get(r, "usage"))
        json_object_set(s, "usage", json_object_get(r, "usage"));
    json_t *content = json_array();
    json_t *outputs = json_array();
    if (cell) {
        json_object_set_new(s, "interpreter_started",
                            json_boolean(jbool(r, "interpreter_started")));
        size_t i;
        json_t *o;
        json_array_foreach(json_object_get(r, "outputs"), i, o) {
            json_t *types = json_array();
            const char *mime;
            json_t *data;
            json_object_foreach(json_object_get(o, "data"), mime, data) {
                json_array_append_new(types, json_string(mime));
                if (strncmp(mime, "image/", 6) == 0 && strcmp(mime, "image/svg+xml") != 0)
                    json_array_append_new(content, json_pack("{s:s, s:O, s:s}", "type", "image",
                                                             "data", data, "mimeType", mime));
            }
            json_array_append_new(
                outputs,
                json_pack("{s:O, s:o}", "kind", json_object_get(o, "kind"), "mime_types", types));
        }
        json_object_set(s, "outputs", outputs);
        json_object_set_new(
            s, "outputs_dropped",
            json_integer(json_integer_value(json_object_get(r, "outputs_dropped"))));
    }
    /* The summary first: what a model reads. */
    struct pl_buf b = {0};
    char head[256];
    snprintf(head, sizeof(head), "exit_code %lld, isolation %s, outcome %s, %lld ms%s%s\n",
             (long long)json_integer_value(json_object_get(s, "exit_code")),
             json_string_value(json_object_get(s, "isolation")),
             json_string_value(json_object_get(s, "outcome")),
             (long long)json_integer_value(json_object_get(s, "duration_ms")),
             jbool(s, "timed_out") ? ", timed out" : "",
             jbool(s, "out_of_memory") ? ", out of memory" : "");
    int rc = pl_buf_puts(&b, head);
    const char *so = json_string_value(json_object_get(s, "stdout"));
    const char *se = json_string_value(json_object_get(s, "stderr"));
    if (*so)
        rc |= pl_buf_puts(&b, "--- stdout") | pl_buf_puts(&b, cut_out ? " (cut)" : "") |
              pl_buf_puts(&b, " ---\n") | pl_buf_puts(&b, so) | end_line(&b, so);
    if (*se)
        rc |= pl_buf_puts(&b, "--- stderr") | pl_buf_puts(&b, cut_err ? " (cut)" : "") |
              pl_buf_puts(&b, " ---\n") | pl_buf_puts(&b, se) | end_line(&b, se);
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(r, "outputs"), i, o) {
        const char *plain =
            json_string_value(json_object_get(json_object_get(o, "data"), "text/plain"));
        if (plain) {
            bool c;
            json_t *t = cut_text(plain, max, &c);
            rc |= pl_buf_puts(&b, "--- output (") |
                  pl_buf_puts(&b, json_string_value(json_object_get(o, "kind"))) |
                  pl_buf_puts(&b, ") ---\n") | pl_buf_puts(&b, json_string_value(t)) |
                  end_line(&b, json_string_value(t));
            json_decref(t);
        }
    }
    json_decref(outputs);
    if (rc || json_array_insert_new(content, 0,
                                    json_pack("{s:s, s:s#}", "type", "text", "text",
                                              b.data ? b.data : "", b.len)) < 0) {
        pl_buf_free(&b);
        json_decref(content);
        json_decref(s);
        return NULL;
    }
    pl_buf_free(&b);
    return json_pack("{s:o, s:o, s:b}", "content", content, "structuredContent", s, "isError", 0);
}

/* structured as the result, and its JSON as the text a model reads. */
static json_t *plain_result(json_t *structured) {
    char *text = json_dumps(structured, JSON_COMPACT);
    json_t *r = text ? json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text", "text",
                                 text, "structuredContent", structured, "isError", 0)
                     : NULL;
    if (!text)
        json_decref(structured);
    free(text);
    return r;
}

static json_t *file_result(struct pl_api *api, const char *tool, json_t *r) {
    if (strcmp(tool, "write_files") == 0)
        return plain_result(json_pack("{s:I, s:I}", "files",
                                      json_integer_value(json_object_get(r, "files")), "bytes",
                                      json_integer_value(json_object_get(r, "bytes"))));
    if (strcmp(tool, "read_file") == 0) {
        size_t max = api->config->mcp_output_bytes;
        bool cut = false;
        json_t *s =
            json_pack("{s:O?, s:I, s:I, s:I, s:b}", "path", json_object_get(r, "path"), "size",
                      json_integer_value(json_object_get(r, "size")), "offset",
                      json_integer_value(json_object_get(r, "offset")), "length",
                      json_integer_value(json_object_get(r, "length")), "more", jbool(r, "more"));
        const char *b64 = json_string_value(json_object_get(r, "content_base64"));
        if (b64) {
            size_t n = strlen(b64);
            cut = n > max;
            json_object_set_new(s, "content_base64", json_stringn(b64, cut ? max / 4 * 4 : n));
        } else {
            json_object_set_new(
                s, "content",
                cut_text(json_string_value(json_object_get(r, "content")), max, &cut));
        }
        json_object_set_new(s, "truncated", json_boolean(cut));
        return plain_result(s);
    }
    if (strcmp(tool, "list_files") == 0) {
        json_t *entries = json_array();
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(r, "entries"), i, e) {
            json_array_append_new(entries,
                                  json_pack("{s:O?, s:O?, s:I}", "path", json_object_get(e, "path"),
                                            "type", json_object_get(e, "type"), "size",
                                            json_integer_value(json_object_get(e, "size"))));
        }
        return plain_result(
            json_pack("{s:o, s:b}", "entries", entries, "truncated", jbool(r, "truncated")));
    }
    return NULL;
}

/* The request of the service a tool's arguments make, and its method. */
static json_t *tool_request(struct pl_api *api, const char *tool, json_t *a, enum pl_tier floor,
                            const char **ret_method) {
    json_t *sid = json_object_get(a, "session_id");
    if (strcmp(tool, "run_code") == 0 || strcmp(tool, "explain") == 0) {
        enum pl_tier t = floor;
        enum pl_tier asked;
        const char *m = json_string_value(json_object_get(a, "minimum_isolation"));
        if (m && pl_tier_parse(m, &asked) == 0 && asked > t)
            t = asked;
        json_t *run =
            json_pack("{s:I}", "timeout_ms", json_integer_value(json_object_get(a, "timeout_ms")));
        if (t > PL_TIER_NONE)
            json_object_set_new(run, "minimum_isolation", json_string(pl_tier_name(t)));
        if (strcmp(tool, "explain") == 0 && sid) {
            *ret_method = "Explain";
            json_decref(run);
            return json_pack("{s:O, s:{s:O, s:O}, s:I}", "session_id", sid, "cell", "language",
                             json_object_get(a, "language"), "code", json_object_get(a, "code"),
                             "timeout_ms", json_integer_value(json_object_get(a, "timeout_ms")));
        }
        json_object_set_new(
            run, "snippet",
            json_pack("{s:O, s:O, s:O?}", "language", json_object_get(a, "language"), "code",
                      json_object_get(a, "code"), "stdin", json_object_get(a, "stdin")));
        if (strcmp(tool, "explain") == 0) {
            *ret_method = "Explain";
            return json_pack("{s:o}", "run", run);
        }
        *ret_method = "Run";
        return run;
    }
    (void)api;
    if (strcmp(tool, "open_session") == 0) {
        *ret_method = "OpenSession";
        json_t *l = json_object_get(a, "languages");
        return l ? json_pack("{s:O}", "languages", l) : json_object();
    }
    if (strcmp(tool, "run_cell") == 0) {
        *ret_method = "RunCell";
        return json_pack("{s:O, s:{s:O, s:O}, s:I}", "session_id", sid, "cell", "language",
                         json_object_get(a, "language"), "code", json_object_get(a, "code"),
                         "timeout_ms", json_integer_value(json_object_get(a, "timeout_ms")));
    }
    if (strcmp(tool, "close_session") == 0) {
        *ret_method = "CloseSession";
        return json_pack("{s:O}", "session_id", sid);
    }
    /* The file calls take their arguments as the service's fields. */
    *ret_method = strcmp(tool, "write_files") == 0 ? "WriteFiles"
                  : strcmp(tool, "read_file") == 0 ? "ReadFile"
                                                   : "ListFiles";
    return json_deep_copy(a);
}

/* tools/call: the result, or NULL with *ret_err a JSON-RPC error's code
 * and message (an unknown tool, an infrastructure failure). */
static json_t *tools_call(struct pl_api *api, const char *principal, const char *mcp_id,
                          const struct pl_mcp_session_view *view, json_t *params, int *ret_code,
                          const char **ret_msg, json_t **ret_data) {
    const char *tool = json_string_value(json_object_get(params, "name"));
    json_t *def = tool ? tool_def(tool) : NULL;
    if (!def) {
        *ret_code = RPC_INVALID_PARAMS;
        *ret_msg = "unknown tool";
        return NULL;
    }
    json_t *a = json_object_get(params, "arguments");
    struct pl_error err = {0};
    if (a && !json_is_object(a)) {
        pl_error_set(&err, PL_REASON_INVALID_REQUEST, "arguments: not an object");
        return refuse_here(api, &err);
    }
    json_t *args = a ? json_incref(a) : json_object();
    json_t *result = NULL;
    if (check_value(json_object_get(def, "inputSchema"), args, "arguments", &err) < 0) {
        result = refuse_here(api, &err);
        goto out;
    }
    bool session_tool = strcmp(tool, "run_code") != 0 && strcmp(tool, "explain") != 0;
    if (session_tool && view->floor > api->provider->info.tier) {
        pl_error_set(&err, PL_REASON_INSUFFICIENT_ISOLATION,
                     "this MCP session's floor is %s; this daemon's provider runs at %s",
                     pl_tier_name(view->floor), pl_tier_name(api->provider->info.tier));
        result = refuse_here(api, &err);
        goto out;
    }
    int b = pl_mcp_session_call_begin(api->mcp_sessions, mcp_id, principal);
    if (b == -2) {
        pl_error_set(&err, PL_REASON_AT_CAPACITY,
                     "this MCP session's calls at once are at PLIMSOLL_MCP_CALLS_PER_SESSION (%u); "
                     "retry when one has answered",
                     api->config->mcp_calls_per_session);
        result = refuse_here(api, &err);
        goto out;
    }
    if (b < 0) {
        pl_error_set(&err, PL_REASON_SESSION_ENDED, "this MCP session has ended");
        result = refuse_here(api, &err);
        goto out;
    }
    const char *method = NULL;
    json_t *req = tool_request(api, tool, args, view->floor, &method);
    struct pl_api_response rs;
    if (req)
        inner_call(api, principal, method, req, &rs);
    else
        api_set_text(memset(&rs, 0, sizeof(rs)), 500, "out of memory\n");
    json_decref(req);
    pl_mcp_session_call_end(api->mcp_sessions, mcp_id);
    json_t *answer = rs.body && rs.content_type && strcmp(rs.content_type, "application/json") == 0
                         ? json_loadb(rs.body, rs.body_len, JSON_ALLOW_NUL, NULL)
                         : NULL;
    if (rs.status == 200 && answer) {
        if (strcmp(method, "Run") == 0 || strcmp(method, "RunCell") == 0)
            result = run_result(api, answer, strcmp(method, "RunCell") == 0);
        else if (strcmp(method, "OpenSession") == 0)
            result = plain_result(json_pack("{s:O, s:s}", "session_id",
                                            json_object_get(answer, "session_id"), "isolation",
                                            pl_tier_name(api->provider->info.tier)));
        else if (strcmp(method, "CloseSession") == 0)
            result = plain_result(json_pack("{s:b}", "closed", 1));
        else if (strcmp(method, "Explain") == 0)
            result = plain_result(json_pack(
                "{s:b, s:O?, s:O?}", "dispatch", jbool(answer, "dispatch"), "isolation",
                json_object_get(answer, "isolation"), "checks", json_object_get(answer, "checks")));
        else
            result = file_result(api, tool, answer);
        if (result && strcmp(method, "Explain") == 0) {
            json_t *sc = json_object_get(result, "structuredContent");
            if (!json_object_get(sc, "isolation"))
                json_object_set_new(sc, "isolation",
                                    json_string(pl_tier_name(api->provider->info.tier)));
            if (!json_object_get(sc, "checks"))
                json_object_set_new(sc, "checks", json_array());
        }
        if (!result) {
            *ret_code = RPC_INTERNAL;
            *ret_msg = "out of memory making the tool's result";
        }
    } else if (answer) {
        const char *reason, *msg;
        bool dispatched;
        error_of(answer, &reason, &msg, &dispatched);
        if (reason && strcmp(reason, "INTERNAL") != 0) {
            result = refusal_result(api, reason, msg ? msg : "");
        } else {
            *ret_code = RPC_INTERNAL;
            *ret_msg = msg ? msg : "infrastructure around the run failed";
            *ret_data = json_pack("{s:s, s:b}", "reason", "INTERNAL", "dispatched", dispatched);
            /* msg lives in answer: keep a copy past its free */
            static __thread char keep[512];
            snprintf(keep, sizeof(keep), "%s", *ret_msg);
            *ret_msg = keep;
        }
    } else {
        *ret_code = RPC_INTERNAL;
        *ret_msg = "the daemon's answer could not be read";
        *ret_data = json_pack("{s:s, s:b}", "reason", "INTERNAL", "dispatched", 1);
    }
    json_decref(answer);
    pl_api_response_clear(&rs);
out:
    json_decref(args);
    return result;
}

/* ---- resources ------------------------------------------------------------------ */

#define DESCRIBE_URI "plimsoll://describe"

static json_t *resources_list(void) {
    return json_pack(
        "{s:[{s:s, s:s, s:s, s:s, s:s}]}", "resources", "uri", DESCRIBE_URI, "name", "describe",
        "title", "This daemon: its provider, tier, operations and limits", "description",
        "Describe's answer: the isolation tier every run gets, what the provider runs, "
        "and the daemon's limits",
        "mimeType", "application/json");
}

/* resources/read: NULL when the URI is none of this server's. */
static json_t *resources_read(struct pl_api *api, json_t *params) {
    const char *uri = json_string_value(json_object_get(params, "uri"));
    if (!uri || strcmp(uri, DESCRIBE_URI) != 0)
        return NULL;
    json_t *d = pl_api_describe(api);
    char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    json_t *r = text ? json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", DESCRIBE_URI,
                                 "mimeType", "application/json", "text", text)
                     : NULL;
    free(text);
    return r;
}

/* ---- initialize ------------------------------------------------------------------ */

/* The floor the initialize fixes: the operator's, the header's and the
 * client's capability, the highest.  -1 with err when one is no tier. */
static int initial_floor(struct pl_api *api, const struct pl_api_request *rq, json_t *params,
                         enum pl_tier *ret, struct pl_error *err) {
    enum pl_tier f = api->config->mcp_min_isolation, t;
    if (rq->mcp_floor) {
        if (pl_tier_parse(rq->mcp_floor, &t) < 0)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "Plimsoll-Minimum-Isolation: not a tier (none, process, container, "
                                "kernel, vm)");
        f = t > f ? t : f;
    }
    json_t *cap = json_object_get(
        json_object_get(json_object_get(json_object_get(params, "capabilities"), "experimental"),
                        "org.plimsoll"),
        "minimum_isolation");
    if (cap) {
        if (!json_is_string(cap) || pl_tier_parse(json_string_value(cap), &t) < 0)
            return pl_error_set(
                err, PL_REASON_INVALID_REQUEST,
                "capabilities.experimental[\"org.plimsoll\"].minimum_isolation: not a "
                "tier (none, process, container, kernel, vm)");
        f = t > f ? t : f;
    }
    *ret = f;
    return 0;
}

static void initialize(struct pl_api *api, const struct pl_api_request *rq, const char *principal,
                       json_t *id, json_t *params, struct pl_api_response *rs,
                       struct call_log *lg) {
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    if (!json_is_object(params) || !asked) {
        rpc_error(rs, 200, id, RPC_INVALID_PARAMS, "initialize: params.protocolVersion is missing",
                  NULL);
        return;
    }
    const char *version = known_version(asked) ? asked : MCP_LATEST;
    struct pl_error err = {0};
    enum pl_tier floor = PL_TIER_NONE;
    if (initial_floor(api, rq, params, &floor, &err) < 0) {
        rpc_error(rs, 200, id, RPC_INVALID_PARAMS, err.message, NULL);
        return;
    }
    char sid[PL_MCP_ID_LEN + 1];
    if (pl_mcp_session_open(api->mcp_sessions, principal, floor, version, sid, &err) < 0) {
        pl_metrics_refusal(api->metrics, err.reason);
        lg->reason = err.reason;
        lg->outcome = err.reason == PL_REASON_INTERNAL ? "error" : "refused";
        rpc_error(rs, err.reason == PL_REASON_AT_CAPACITY ? 429 : 500, id,
                  err.reason == PL_REASON_AT_CAPACITY ? RPC_SERVER_REFUSED : RPC_INTERNAL,
                  err.message, json_pack("{s:s}", "reason", pl_reason_name(err.reason)));
        return;
    }
    enum pl_tier tier = api->provider->info.tier;
    char instructions[768];
    snprintf(instructions, sizeof(instructions),
             "plimsolld runs code in sandboxes at isolation tier %s (provider %s; tiers: none < "
             "process < container < kernel < vm). This MCP session's floor is %s%s. Every result "
             "names the tier that ran it. A tool error that starts with REFUSED means nothing ran: "
             "its reason says why (INSUFFICIENT_ISOLATION, AT_CAPACITY, RATE_LIMITED, "
             "SESSION_ENDED, INVALID_REQUEST, ...). A non-zero exit code is the program's own.",
             pl_tier_name(tier), pl_provider_name(api->provider), pl_tier_name(floor),
             floor > tier ? ", above this daemon's tier: every tool will be refused" : "");
    json_t *result =
        json_pack("{s:s, s:{s:{s:b}, s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version,
                  "capabilities", "tools", "listChanged", 0, "resources", "listChanged", 0,
                  "serverInfo", "name", "plimsolld", "title", "plimsoll", "version", PL_VERSION,
                  "instructions", instructions);
    rpc_result(rs, id, result);
    add_header(rs, "Mcp-Session-Id", sid);
}

/* ---- the body ------------------------------------------------------------------ */

/* A request's id: a string of at most MCP_ID_MAX bytes or an integer. */
static bool id_valid(const json_t *id) {
    return (json_is_string(id) && json_string_length(id) <= MCP_ID_MAX) || json_is_integer(id);
}

void api_mcp_body(struct pl_api *api, struct pl_api_call *call, const struct pl_api_request *rq,
                  struct pl_api_response *rs) {
    struct call_log *lg = &call->lg;
    const char *principal = lg->principal;
    struct pl_error err = {0};
    if (pl_json_check_bounds(rq->body, rq->body_len, &err) < 0) {
        rpc_error(rs, 400, NULL, RPC_INVALID_REQUEST, err.message, NULL);
        lg->outcome = "refused";
        return;
    }
    json_error_t je;
    json_t *m = json_loadb(rq->body, rq->body_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!m) {
        rpc_error(rs, 400, NULL, RPC_PARSE_ERROR, "parse error: the body is not JSON", NULL);
        lg->outcome = "refused";
        return;
    }
    json_t *id = json_object_get(m, "id");
    const char *method = json_string_value(json_object_get(m, "method"));
    json_t *params = json_object_get(m, "params");
    if (json_is_array(m)) {
        rpc_error(rs, 400, NULL, RPC_INVALID_REQUEST,
                  "a JSON-RPC batch: send one message per request (MCP 2025-06-18 and later)",
                  NULL);
        lg->outcome = "refused";
        goto out;
    }
    const char *jr = json_string_value(json_object_get(m, "jsonrpc"));
    if (!json_is_object(m) || !jr || strcmp(jr, "2.0") != 0 || (id && !id_valid(id)) ||
        (params && !json_is_object(params)) || (json_object_get(m, "method") && !method)) {
        rpc_error(rs, 400, id && id_valid(id) ? id : NULL, RPC_INVALID_REQUEST,
                  "not a JSON-RPC 2.0 message (jsonrpc \"2.0\"; id a string or an integer; "
                  "method a string; params an object)",
                  NULL);
        lg->outcome = "refused";
        goto out;
    }
    if (!method && !id) {
        rpc_error(rs, 400, NULL, RPC_INVALID_REQUEST, "a message with neither method nor id", NULL);
        lg->outcome = "refused";
        goto out;
    }
    if (method && strcmp(method, "initialize") == 0 && id) {
        if (rq->mcp_session_id) {
            rpc_error(rs, 400, id, RPC_INVALID_REQUEST,
                      "initialize opens an MCP session: send it without Mcp-Session-Id", NULL);
            lg->outcome = "refused";
            goto out;
        }
        initialize(api, rq, principal, id, params, rs, lg);
        goto out;
    }
    if (!rq->mcp_session_id) {
        rpc_error(rs, 400, id, RPC_INVALID_REQUEST,
                  "no Mcp-Session-Id: send initialize first, then its Mcp-Session-Id with every "
                  "message",
                  NULL);
        lg->outcome = "refused";
        goto out;
    }
    struct pl_mcp_session_view view;
    if (pl_mcp_session_touch(api->mcp_sessions, rq->mcp_session_id, principal, &view) < 0) {
        rpc_error(rs, 404, id, RPC_NO_SESSION, "session not found", NULL);
        lg->outcome = "refused";
        goto out;
    }
    if (rq->mcp_protocol_version && strcmp(rq->mcp_protocol_version, view.version) != 0) {
        rpc_error(rs, 400, id, RPC_INVALID_REQUEST,
                  "MCP-Protocol-Version is not the version this session agreed", NULL);
        lg->outcome = "refused";
        goto out;
    }
    if (!id) { /* a notification, or a response to a request this server never sends */
        if (method && strcmp(method, "notifications/initialized") == 0)
            pl_mcp_session_set_initialized(api->mcp_sessions, rq->mcp_session_id, principal);
        api_set_body(rs, 202, "application/json", strdup(""));
        goto out;
    }
    if (!method) { /* a response with an id: nothing asked for it */
        api_set_body(rs, 202, "application/json", strdup(""));
        goto out;
    }
    if (strcmp(method, "ping") == 0) {
        rpc_result(rs, id, json_object());
        goto out;
    }
    if (!view.initialized) {
        rpc_error(rs, 200, id, RPC_INVALID_REQUEST,
                  "the session is not initialized: send notifications/initialized first", NULL);
        goto out;
    }
    if (strcmp(method, "tools/list") == 0) {
        rpc_result(rs, id, tools_list(api));
    } else if (strcmp(method, "resources/list") == 0) {
        rpc_result(rs, id, resources_list());
    } else if (strcmp(method, "resources/templates/list") == 0) {
        rpc_result(rs, id, json_pack("{s:[]}", "resourceTemplates"));
    } else if (strcmp(method, "resources/read") == 0) {
        json_t *r = resources_read(api, params);
        if (r)
            rpc_result(rs, id, r);
        else
            rpc_error(rs, 200, id, RPC_RESOURCE_NOT_FOUND, "resource not found",
                      json_pack("{s:O?}", "uri", json_object_get(params, "uri")));
    } else if (strcmp(method, "tools/call") == 0) {
        int code = 0;
        const char *msg = NULL;
        json_t *data = NULL;
        json_t *empty = params ? NULL : json_object();
        json_t *r = tools_call(api, principal, rq->mcp_session_id, &view, params ? params : empty,
                               &code, &msg, &data);
        json_decref(empty);
        if (r)
            rpc_result(rs, id, r);
        else
            rpc_error(rs, 200, id, code ? code : RPC_INTERNAL, msg ? msg : "internal error", data);
    } else {
        rpc_error(rs, 200, id, RPC_METHOD_NOT_FOUND, "method not found", NULL);
    }
out:
    json_decref(m);
}
