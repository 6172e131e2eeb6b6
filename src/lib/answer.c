/* SPDX-License-Identifier: Apache-2.0 */
/*
 * answer.c: what libplimsoll makes of the daemon's answers (docs/clients.md).
 *
 * Before anything else, an answer must be one the protocol allows ("What a
 * client reads"): JSON within the depth, number and type rules of each
 * method's shape below, else PLIMSOLL_E_PROTOCOL.  A non-200 answer is a
 * Connect error: its google.rpc.ErrorInfo (JSON "debug" or the binary
 * "value") names the reason, which becomes a typed refusal, or
 * infrastructure.  The kinds' names live here too.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/buf.h"
#include "../core/canon.h"
#include "../core/display.h"
#include "lib.h"

/* ---- kinds ---------------------------------------------------------------- */

/* Each kind's name; reason: the kind is the typed refusal of the daemon's
 * reason of that name (the enum's order is the ABI's, not this). */
static const struct {
    enum plimsoll_errkind kind;
    const char *name;
    bool reason;
} kinds[] = {
    {PLIMSOLL_OK, "OK", false},
    {PLIMSOLL_E_INVALID_REQUEST, "INVALID_REQUEST", true},
    {PLIMSOLL_E_UNAUTHENTICATED, "UNAUTHENTICATED", true},
    {PLIMSOLL_E_DISABLED, "DISABLED", true},
    {PLIMSOLL_E_INSUFFICIENT_ISOLATION, "INSUFFICIENT_ISOLATION", true},
    {PLIMSOLL_E_UNSUPPORTED, "UNSUPPORTED", true},
    {PLIMSOLL_E_CALLER_NOT_ALLOWED, "CALLER_NOT_ALLOWED", true},
    {PLIMSOLL_E_NOT_READY, "NOT_READY", true},
    {PLIMSOLL_E_SHUTTING_DOWN, "SHUTTING_DOWN", true},
    {PLIMSOLL_E_RATE_LIMITED, "RATE_LIMITED", true},
    {PLIMSOLL_E_AT_CAPACITY, "AT_CAPACITY", true},
    {PLIMSOLL_E_SESSION_ENDED, "SESSION_ENDED", true},
    {PLIMSOLL_E_NOT_FOUND, "NOT_FOUND", true},
    {PLIMSOLL_E_REFUSED, "REFUSED", false},
    {PLIMSOLL_E_INFRASTRUCTURE, "INFRASTRUCTURE", false},
    {PLIMSOLL_E_ISOLATION_EVIDENCE_MISMATCH, "ISOLATION_EVIDENCE_MISMATCH", false},
    {PLIMSOLL_E_CHAIN, "CHAIN", false},
    {PLIMSOLL_E_USAGE, "USAGE", false},
    {PLIMSOLL_E_PROTOCOL, "PROTOCOL", false},
    {PLIMSOLL_E_WRONG_ROUTE, "WRONG_ROUTE", true},
};

const char *plimsoll_errkind_name(enum plimsoll_errkind kind) {
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (kinds[i].kind == kind)
            return kinds[i].name;
    return "UNKNOWN";
}

bool plimsoll_errkind_retryable(enum plimsoll_errkind kind) {
    return kind == PLIMSOLL_E_AT_CAPACITY || kind == PLIMSOLL_E_RATE_LIMITED;
}

static enum plimsoll_errkind kind_of_reason(const char *reason) {
    if (!reason)
        return PLIMSOLL_E_REFUSED;
    for (size_t i = 1; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (kinds[i].reason && strcmp(kinds[i].name, reason) == 0)
            return kinds[i].kind;
    return PLIMSOLL_E_REFUSED;
}

/* ---- what an answer may be (docs/clients.md) ------------------------------ */

/* A protocol error: infrastructure (dispatched), code "unknown"; -1. */
int plc_protocol_fail(struct plimsoll_error *err, const char *method, long status, const char *fmt,
                      ...) {
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    plc_fail(err, PLIMSOLL_E_PROTOCOL,
             "%s: HTTP %ld with an answer that breaks the protocol: %s; the code may have run",
             method, status, why);
    if (err) {
        snprintf(err->code, sizeof(err->code), "unknown");
        err->dispatched = true;
        err->http_status = (int)status;
    }
    return -1;
}

/* K_STRING_MAP: a proto map<string, string>, an object of strings. */
enum kind { K_STRING, K_BOOL, K_INT32, K_UINT32, K_MESSAGE, K_ANY, K_STRING_MAP };

/* A known member of a message: its type, repeated or not; rows end at NULL. */
struct field {
    const char *name;
    enum kind kind;
    bool repeated;
    const struct field *sub;
};

static const struct field usage_shape[] = {
    {"cpu_user_ms", K_UINT32, false, NULL},     {"cpu_system_ms", K_UINT32, false, NULL},
    {"memory_peak_kib", K_UINT32, false, NULL}, {"wall_ms", K_UINT32, false, NULL},
    {"source", K_STRING, false, NULL},          {NULL, K_ANY, false, NULL},
};
static const struct field display_output_shape[] = {
    {"kind", K_STRING, false, NULL},
    {"data", K_STRING_MAP, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field step_result_shape[] = {
    {"name", K_STRING, false, NULL},           {"exit_code", K_INT32, false, NULL},
    {"stdout", K_STRING, false, NULL},         {"stderr", K_STRING, false, NULL},
    {"stdout_truncated", K_BOOL, false, NULL}, {"stderr_truncated", K_BOOL, false, NULL},
    {"duration_ms", K_UINT32, false, NULL},    {"timed_out", K_BOOL, false, NULL},
    {"stdout_base64", K_STRING, false, NULL},  {"stderr_base64", K_STRING, false, NULL},
    {"usage", K_MESSAGE, false, usage_shape},  {NULL, K_ANY, false, NULL},
};
static const struct field run_record_shape[] = {
    {"version", K_INT32, false, NULL},
    {"request_sha256", K_STRING, false, NULL},
    {"response_sha256", K_STRING, false, NULL},
    {"provider", K_STRING, false, NULL},
    {"isolation", K_STRING, false, NULL},
    {"runtime", K_STRING, false, NULL},
    {"started_at", K_STRING, false, NULL},
    {"ended_at", K_STRING, false, NULL},
    {"previous_digest", K_STRING, false, NULL},
    {"digest", K_STRING, false, NULL},
    {"broker_calls", K_UINT32, false, NULL},
    {"broker_refused", K_UINT32, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field artifact_shape[] = {
    {"path", K_STRING, false, NULL},
    {"path_base64", K_STRING, false, NULL},
    {"size", K_UINT32, false, NULL},
    {"content", K_STRING, false, NULL},
    {"content_base64", K_STRING, false, NULL},
    {"truncated", K_BOOL, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field run_response_shape[] = {
    {"exit_code", K_INT32, false, NULL},
    {"stdout", K_STRING, false, NULL},
    {"stderr", K_STRING, false, NULL},
    {"stdout_truncated", K_BOOL, false, NULL},
    {"stderr_truncated", K_BOOL, false, NULL},
    {"duration_ms", K_UINT32, false, NULL},
    {"sandbox_name", K_STRING, false, NULL},
    {"isolation", K_STRING, false, NULL},
    {"timed_out", K_BOOL, false, NULL},
    {"out_of_memory", K_BOOL, false, NULL},
    {"outcome", K_STRING, false, NULL},
    {"detail", K_STRING, false, NULL},
    {"steps", K_MESSAGE, true, step_result_shape},
    {"record", K_MESSAGE, false, run_record_shape},
    {"stdout_base64", K_STRING, false, NULL},
    {"stderr_base64", K_STRING, false, NULL},
    {"interpreter_started", K_BOOL, false, NULL},
    {"artifacts", K_MESSAGE, true, artifact_shape},
    {"artifacts_truncated", K_BOOL, false, NULL},
    {"outputs", K_MESSAGE, true, display_output_shape},
    {"outputs_dropped", K_UINT32, false, NULL},
    {"usage", K_MESSAGE, false, usage_shape},
    {"usage_absent", K_STRING, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field operation_shape[] = {
    {"supported", K_BOOL, false, NULL},
    {"engine", K_STRING, false, NULL},
    {"max_timeout_ms", K_UINT32, false, NULL},
    {"languages", K_STRING, true, NULL},
    {"grants", K_BOOL, false, NULL},
    {"streams", K_BOOL, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field artifact_support_shape[] = {
    {"project", K_BOOL, false, NULL},
    {"snippet", K_BOOL, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field display_support_shape[] = {
    {"python", K_BOOL, false, NULL},     {"javascript", K_BOOL, false, NULL},
    {"matplotlib", K_BOOL, false, NULL}, {"pandas", K_BOOL, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field operations_shape[] = {
    {"snippet", K_MESSAGE, false, operation_shape},
    {"project", K_MESSAGE, false, operation_shape},
    {"module", K_MESSAGE, false, operation_shape},
    {"session", K_MESSAGE, false, operation_shape},
    {"files", K_MESSAGE, false, operation_shape},
    {"artifacts", K_MESSAGE, false, artifact_support_shape},
    {"display", K_MESSAGE, false, display_support_shape},
    {NULL, K_ANY, false, NULL},
};
static const struct field limits_shape[] = {
    {"memory_mb", K_UINT32, false, NULL},
    {"total_memory_mb", K_UINT32, false, NULL},
    {"max_concurrent", K_UINT32, false, NULL},
    {"effective_concurrency", K_UINT32, false, NULL},
    {"per_key_concurrent", K_UINT32, false, NULL},
    {"rate_per_min", K_UINT32, false, NULL},
    {"rate_burst", K_UINT32, false, NULL},
    {"default_timeout_ms", K_UINT32, false, NULL},
    {"output_bytes", K_UINT32, false, NULL},
    {"max_snippet_bytes", K_UINT32, false, NULL},
    {"max_request_bytes", K_UINT32, false, NULL},
    {"memory_budget_applies", K_BOOL, false, NULL},
    {"min_memory_mb", K_UINT32, false, NULL},
    {"file_read_bytes", K_UINT32, false, NULL},
    {"file_list_entries", K_UINT32, false, NULL},
    {"session_max_lifetime_s", K_UINT32, false, NULL},
    {"collect_files", K_UINT32, false, NULL},
    {"collect_bytes", K_UINT32, false, NULL},
    {"display_outputs", K_UINT32, false, NULL},
    {"display_output_bytes", K_UINT32, false, NULL},
    {"display_bytes", K_UINT32, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field describe_shape[] = {
    {"version", K_STRING, false, NULL},
    {"provider", K_STRING, false, NULL},
    {"isolation", K_STRING, false, NULL},
    {"runtime", K_STRING, false, NULL},
    {"ready", K_BOOL, false, NULL},
    {"ready_detail", K_STRING, false, NULL},
    {"supports_sessions", K_BOOL, false, NULL},
    {"languages", K_STRING, true, NULL},
    {"operations", K_MESSAGE, false, operations_shape},
    {"limits", K_MESSAGE, false, limits_shape},
    {"startup_checks", K_STRING, true, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field open_session_shape[] = {
    {"session_id", K_STRING, false, NULL},
    {"route", K_STRING, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field session_interpreter_shape[] = {
    {"language", K_STRING, false, NULL},
    {"alive", K_BOOL, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field session_info_shape[] = {
    {"session_id", K_STRING, false, NULL},
    {"state", K_STRING, false, NULL},
    {"ended_reason", K_STRING, false, NULL},
    {"created_at", K_STRING, false, NULL},
    {"last_call_at", K_STRING, false, NULL},
    {"idle_deadline", K_STRING, false, NULL},
    {"lifetime_deadline", K_STRING, false, NULL},
    {"ended_at", K_STRING, false, NULL},
    {"calls", K_UINT32, false, NULL},
    {"calls_waiting", K_UINT32, false, NULL},
    {"previous_digest", K_STRING, false, NULL},
    {"languages", K_STRING, true, NULL},
    {"interpreters", K_MESSAGE, true, session_interpreter_shape},
    {"disk_used_kib", K_UINT32, false, NULL},
    {"disk_budget_kib", K_UINT32, false, NULL},
    {"max_lifetime_s", K_UINT32, false, NULL},
    {"route", K_STRING, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field list_sessions_shape[] = {
    {"sessions", K_MESSAGE, true, session_info_shape},
    {NULL, K_ANY, false, NULL},
};
static const struct field write_files_shape[] = {
    {"files", K_UINT32, false, NULL},
    {"bytes", K_UINT32, false, NULL},
    {"record", K_MESSAGE, false, run_record_shape},
    {NULL, K_ANY, false, NULL},
};
static const struct field read_file_shape[] = {
    {"path", K_STRING, false, NULL},
    {"size", K_UINT32, false, NULL},
    {"offset", K_UINT32, false, NULL},
    {"content", K_STRING, false, NULL},
    {"content_base64", K_STRING, false, NULL},
    {"length", K_UINT32, false, NULL},
    {"more", K_BOOL, false, NULL},
    {"record", K_MESSAGE, false, run_record_shape},
    {NULL, K_ANY, false, NULL},
};
static const struct field file_entry_shape[] = {
    {"path", K_STRING, false, NULL}, {"path_base64", K_STRING, false, NULL},
    {"type", K_STRING, false, NULL}, {"size", K_UINT32, false, NULL},
    {"mode", K_UINT32, false, NULL}, {"modified_at", K_STRING, false, NULL},
    {NULL, K_ANY, false, NULL},
};
static const struct field list_files_shape[] = {
    {"entries", K_MESSAGE, true, file_entry_shape},
    {"truncated", K_BOOL, false, NULL},
    {"record", K_MESSAGE, false, run_record_shape},
    {NULL, K_ANY, false, NULL},
};
static const struct field empty_shape[] = {{NULL, K_ANY, false, NULL}};
/* What of a Connect error is checked; its details are read leniently. */
static const struct field connect_error_shape[] = {
    {"code", K_STRING, false, NULL},
    {"message", K_STRING, false, NULL},
    {"details", K_ANY, true, NULL},
    {NULL, K_ANY, false, NULL},
};
/* The messages of RunStream and RunCellStream (bytes are base64 strings),
 * and the end of a stream: {} or {"error": …} (Connect's "metadata" is
 * allowed and ignored). */
static const struct field output_chunk_shape[] = {
    {"stdout", K_STRING, false, NULL}, {"stderr", K_STRING, false, NULL},
    {"step", K_UINT32, false, NULL},   {"display", K_MESSAGE, false, display_output_shape},
    {NULL, K_ANY, false, NULL},
};
static const struct field run_stream_response_shape[] = {
    {"output", K_MESSAGE, false, output_chunk_shape},
    {"result", K_MESSAGE, false, run_response_shape},
    {NULL, K_ANY, false, NULL},
};
static const struct field end_stream_shape[] = {
    {"error", K_MESSAGE, false, connect_error_shape},
    {"metadata", K_ANY, false, NULL},
    {NULL, K_ANY, false, NULL},
};

/* The 200 answer of each method. */
static const struct {
    const char *method;
    const struct field *shape;
} responses[] = {
    {"Describe", describe_shape},          {"Run", run_response_shape},
    {"RunInSession", run_response_shape},  {"RunCell", run_response_shape},
    {"OpenSession", open_session_shape},   {"CloseSession", empty_shape},
    {"ListSessions", list_sessions_shape}, {"GetSession", session_info_shape},
    {"ExtendSession", session_info_shape}, {"WriteFiles", write_files_shape},
    {"ReadFile", read_file_shape},         {"ListFiles", list_files_shape},
};

static const struct field *response_shape(const char *method) {
    for (size_t i = 0; i < sizeof(responses) / sizeof(responses[0]); i++)
        if (strcmp(responses[i].method, method) == 0)
            return responses[i].shape;
    return empty_shape;
}

/* Depth and numbers, everywhere in v (at depth `depth`); < 0 with why. */
static int check_tree(const json_t *v, int depth, char *why, size_t n) {
    switch (json_typeof(v)) {
    case JSON_REAL: snprintf(why, n, "a number that is not an integer"); return -1;
    case JSON_INTEGER: {
        json_int_t x = json_integer_value(v);
        if (x > PLIMSOLL_MAX_ANSWER_INTEGER || x < -PLIMSOLL_MAX_ANSWER_INTEGER) {
            snprintf(why, n, "the integer %" JSON_INTEGER_FORMAT " is past 2^53-1", x);
            return -1;
        }
        return 0;
    }
    case JSON_OBJECT:
    case JSON_ARRAY: break;
    default: return 0;
    }
    if (depth > PLIMSOLL_MAX_ANSWER_DEPTH) {
        snprintf(why, n, "nested deeper than %d", PLIMSOLL_MAX_ANSWER_DEPTH);
        return -1;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (check_tree(e, depth + 1, why, n) < 0)
                return -1;
        }
        return 0;
    }
    const char *k;
    json_t *e;
    json_object_foreach((json_t *)v, k, e) {
        if (check_tree(e, depth + 1, why, n) < 0)
            return -1;
    }
    return 0;
}

static int check_shape(const json_t *v, const struct field *shape, const char *where, char *why,
                       size_t n);

static int check_scalar(const json_t *v, const struct field *f, const char *where, char *why,
                        size_t n) {
    bool ok = false;
    json_int_t x = json_integer_value(v);
    switch (f->kind) {
    case K_ANY: return 0;
    case K_MESSAGE: return check_shape(v, f->sub, where, why, n);
    case K_STRING: ok = json_is_string(v); break;
    case K_BOOL: ok = json_is_boolean(v); break;
    case K_INT32: ok = json_is_integer(v) && x >= INT32_MIN && x <= INT32_MAX; break;
    case K_UINT32: ok = json_is_integer(v) && x >= 0 && x <= (json_int_t)UINT32_MAX; break;
    case K_STRING_MAP: {
        if (!json_is_object(v)) {
            snprintf(why, n, "%s is not an object", where);
            return -1;
        }
        const char *k;
        json_t *e;
        json_object_foreach((json_t *)v, k, e) {
            if (!json_is_string(e)) {
                snprintf(why, n, "%s[\"%.40s\"] is not a string", where, k);
                return -1;
            }
        }
        return 0;
    }
    }
    if (!ok) {
        static const char *const names[] = {"a string", "a bool", "an int32", "a uint32"};
        snprintf(why, n, "%s is not %s", where, names[f->kind]);
        return -1;
    }
    return 0;
}

/* v is an object whose known members have their types (null is the
 * default, as proto3 JSON says); < 0 with why. */
static int check_shape(const json_t *v, const struct field *shape, const char *where, char *why,
                       size_t n) {
    if (!json_is_object(v)) {
        snprintf(why, n, "%s is not an object", where);
        return -1;
    }
    for (const struct field *f = shape; f->name; f++) {
        const json_t *x = json_object_get(v, f->name);
        if (!x || json_is_null(x))
            continue;
        char at[96];
        snprintf(at, sizeof(at), "%s.%s", where, f->name);
        if (!f->repeated) {
            if (check_scalar(x, f, at, why, n) < 0)
                return -1;
            continue;
        }
        if (!json_is_array(x)) {
            snprintf(why, n, "%s is not an array", at);
            return -1;
        }
        size_t i;
        json_t *e;
        json_array_foreach(x, i, e) {
            char ati[128];
            snprintf(ati, sizeof(ati), "%s[%zu]", at, i);
            if (json_is_null(e)) {
                snprintf(why, n, "%s is null", ati);
                return -1;
            }
            if (check_scalar(e, f, ati, why, n) < 0)
                return -1;
        }
    }
    return 0;
}

/* The JSON object of an answer's body, its known members of their types
 * (shape), or NULL with why.  NULs in strings are kept: they are valid. */
static json_t *parse_answer(const struct pl_buf *b, const struct field *shape, const char *what,
                            char *why, size_t n) {
    json_error_t je;
    json_t *j =
        json_loadb(b->data ? b->data : "", b->len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!j) {
        snprintf(why, n, "not JSON (%s)", je.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        snprintf(why, n, "the answer is not a JSON object");
    } else if (check_tree(j, 1, why, n) == 0 && check_shape(j, shape, what, why, n) == 0) {
        return j;
    }
    json_decref(j);
    return NULL;
}

/* ---- what a shape cannot say ---------------------------------------------- */

int plc_check_display(const json_t *d, const char *where, char *why, size_t n) {
    const char *kind = json_string_value(json_object_get(d, "kind"));
    if (!kind || strlen(kind) != json_string_length(json_object_get(d, "kind")) ||
        (strcmp(kind, "display") != 0 && strcmp(kind, "result") != 0)) {
        snprintf(why, n, "%s.kind is \"%.40s\", not display or result", where, kind ? kind : "");
        return -1;
    }
    const char *mime;
    json_t *v;
    json_object_foreach(json_object_get(d, "data"), mime, v) {
        unsigned char *raw = NULL;
        size_t len = 0;
        if (pl_display_mime_is_text(mime))
            continue;
        if (pl_base64_decode(json_string_value(v), json_string_length(v), SIZE_MAX - 1, &raw,
                             &len) < 0) {
            snprintf(why, n, "%s.data[\"%.40s\"] is not base64", where, mime);
            return -1;
        }
        free(raw);
    }
    return 0;
}

int plc_check_run(const json_t *result, const char *where, char *why, size_t n) {
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(result, "outputs"), i, d) {
        char at[96];
        snprintf(at, sizeof(at), "%s.outputs[%zu]", where, i);
        if (plc_check_display(d, at, why, n) < 0)
            return -1;
    }
    return 0;
}

/* The methods whose answer is a RunResponse. */
static bool is_run(const char *method) {
    return strcmp(method, "Run") == 0 || strcmp(method, "RunInSession") == 0 ||
           strcmp(method, "RunCell") == 0;
}

json_t *plc_parse_result(const struct pl_buf *b, const char *method, char *why, size_t n) {
    json_t *j = parse_answer(b, response_shape(method), method, why, n);
    if (j && is_run(method) && plc_check_run(j, method, why, n) < 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

json_t *plc_parse_stream_message(const struct pl_buf *b, bool end, char *why, size_t n) {
    return end ? parse_answer(b, end_stream_shape, "the end-of-stream message", why, n)
               : parse_answer(b, run_stream_response_shape, "RunStreamResponse", why, n);
}

static void trim(const char **s, size_t *n) {
    while (*n && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

/* A Content-Type of type (any case), with a charset, if any, of UTF-8
 * (quoted or not); other parameters are ignored. */
bool plc_media_type_is(const char *ct, const char *type) {
    if (!ct)
        return false;
    const char *semi = strchr(ct, ';');
    const char *p = ct;
    size_t n = semi ? (size_t)(semi - ct) : strlen(ct);
    trim(&p, &n);
    if (n != strlen(type) || strncasecmp(p, type, n) != 0)
        return false;
    while (semi) {
        p = semi + 1;
        semi = strchr(p, ';');
        n = semi ? (size_t)(semi - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        const char *name = p;
        size_t nn = eq ? (size_t)(eq - p) : n;
        trim(&name, &nn);
        if (nn != 7 || strncasecmp(name, "charset", 7) != 0)
            continue;
        const char *val = eq ? eq + 1 : p + n;
        size_t vn = (size_t)(p + n - val);
        trim(&val, &vn);
        if (vn >= 2 && val[0] == '"' && val[vn - 1] == '"') {
            val++;
            vn -= 2;
        }
        if (vn != 5 || strncasecmp(val, "utf-8", 5) != 0)
            return false;
    }
    return true;
}

bool plc_media_type_is_json(const char *ct) {
    return plc_media_type_is(ct, "application/json");
}

/* ---- google.rpc.ErrorInfo, binary ----------------------------------------- */

static bool varint(const unsigned char **p, const unsigned char *end, uint64_t *ret) {
    uint64_t x = 0;
    for (unsigned s = 0; s < 64 && *p < end; s += 7) {
        unsigned char b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) {
            *ret = x;
            return true;
        }
    }
    return false;
}

/* The next length-delimited field of [*p, end) (other wire types skipped):
 * 1 with its number and bytes, 0 at the end, -1 on malformed input. */
static int next_field(const unsigned char **p, const unsigned char *end, uint64_t *num,
                      const unsigned char **val, size_t *len) {
    while (*p < end) {
        uint64_t key, n;
        if (!varint(p, end, &key))
            return -1;
        switch (key & 7) {
        case 0:
            if (!varint(p, end, &n))
                return -1;
            break;
        case 1:
        case 5: {
            size_t w = (key & 7) == 1 ? 8 : 4;
            if ((size_t)(end - *p) < w)
                return -1;
            *p += w;
            break;
        }
        case 2:
            if (!varint(p, end, &n) || n > (uint64_t)(end - *p))
                return -1;
            *num = key >> 3;
            *val = *p;
            *len = (size_t)n;
            *p += n;
            return 1;
        default: return -1;
        }
    }
    return 0;
}

/* details[0].value as {"reason", "metadata"} (what debug holds), or NULL. */
static json_t *decode_error_info(const char *b64, size_t max) {
    unsigned char *raw = NULL;
    size_t rawlen = 0;
    if (pl_base64_decode(b64, strlen(b64), max, &raw, &rawlen) < 0)
        return NULL;
    json_t *info = json_pack("{s:s, s:{}}", "reason", "", "metadata");
    const unsigned char *p = raw, *end = raw + rawlen, *v;
    size_t len;
    uint64_t num;
    int r = 0;
    while (info && (r = next_field(&p, end, &num, &v, &len)) == 1) {
        if (num == 1) {
            json_object_set_new(info, "reason", json_stringn((const char *)v, len));
        } else if (num == 3) {
            const unsigned char *q = v, *qend = v + len, *kv;
            size_t kvlen;
            uint64_t kn;
            json_t *key = NULL, *val = NULL;
            int e;
            while ((e = next_field(&q, qend, &kn, &kv, &kvlen)) == 1) {
                json_t **slot = kn == 1 ? &key : kn == 2 ? &val : NULL;
                if (slot) {
                    json_decref(*slot);
                    *slot = json_stringn((const char *)kv, kvlen);
                }
            }
            const char *k = json_string_value(key);
            if (e == 0 && k && strlen(k) == json_string_length(key))
                json_object_set_new(json_object_get(info, "metadata"), k,
                                    val ? json_incref(val) : json_string(""));
            json_decref(key);
            json_decref(val);
            if (e < 0)
                r = -1;
        }
        if (r < 0)
            break;
    }
    free(raw);
    if (r < 0 || !json_is_string(json_object_get(info, "reason"))) {
        json_decref(info);
        return NULL;
    }
    return info;
}

/* A non-200 answer into *err: a refusal, infrastructure, or a protocol
 * error when it is not a Connect error; always -1. */
int plc_refusal(plimsoll_client *c, const char *method, long status, const struct pl_buf *answer,
                struct plimsoll_error *err) {
    char why[256];
    json_t *j = parse_answer(answer, connect_error_shape, "the error", why, sizeof(why));
    if (!j)
        return plc_protocol_fail(err, method, status, "not a Connect error (%s)", why);
    plc_refusal_of(c->max_answer, method, status, j, err);
    json_decref(j);
    return -1;
}

/* A Connect error j (its known members of their types) into *err; -1. */
int plc_refusal_of(size_t max, const char *method, long status, const json_t *j,
                   struct plimsoll_error *err) {
    const char *code = json_string_value(json_object_get(j, "code"));
    if (!code || !*code)
        return plc_protocol_fail(err, method, status, "not a Connect error (it has no code)");
    json_t *d0 = json_array_get(json_object_get(j, "details"), 0);
    json_t *dbg = json_object_get(d0, "debug"), *info = NULL;
    if (!json_is_string(json_object_get(dbg, "reason")) &&
        json_is_string(json_object_get(d0, "value")))
        dbg = info = decode_error_info(json_string_value(json_object_get(d0, "value")), max);
    json_t *meta = json_object_get(dbg, "metadata");
    const char *reason = json_string_value(json_object_get(dbg, "reason"));
    if (reason && !*reason)
        reason = NULL;
    const char *dispatched = json_string_value(json_object_get(meta, "dispatched"));
    enum plimsoll_errkind kind;
    if ((reason && strcmp(reason, "INTERNAL") == 0) || (!reason && strcmp(code, "internal") == 0))
        kind = PLIMSOLL_E_INFRASTRUCTURE;
    else
        kind = kind_of_reason(reason);
    const char *msg = json_string_value(json_object_get(j, "message"));
    plc_fail(err, kind, "%s", msg ? msg : "");
    if (err) {
        snprintf(err->reason, sizeof(err->reason), "%s", reason ? reason : "");
        snprintf(err->code, sizeof(err->code), "%s", code);
        err->http_status = (int)status;
        /* Without the metadata, only a refusal the daemon names says nothing ran. */
        err->dispatched =
            dispatched ? strcmp(dispatched, "false") != 0 : kind == PLIMSOLL_E_INFRASTRUCTURE;
        const char *iso = json_string_value(json_object_get(meta, "isolation"));
        const char *why_ended = json_string_value(json_object_get(meta, "ended_reason"));
        snprintf(err->isolation, sizeof(err->isolation), "%s", iso ? iso : "");
        if (kind == PLIMSOLL_E_SESSION_ENDED) {
            if (!why_ended && msg && strncmp(msg, "the session has ended: ", 23) == 0)
                why_ended = msg + 23;
            snprintf(err->ended_reason, sizeof(err->ended_reason), "%s",
                     why_ended ? why_ended : "");
        }
    }
    json_decref(info);
    return -1;
}
