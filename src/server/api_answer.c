/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_answer.c: the bodies the API answers with: text, JSON, a refusal as
 * a Connect error with its google.rpc.ErrorInfo, and a run's result.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/buf.h"
#include "../core/canon.h"
#include "../core/log.h"
#include "api_int.h"

void pl_api_response_clear(struct pl_api_response *rs) {
    free(rs->body);
    for (unsigned i = 0; i < rs->nheaders; i++)
        free(rs->headers[i].value);
    for (unsigned i = 0; i < rs->ntrailers; i++)
        free(rs->trailers[i].value);
    memset(rs, 0, sizeof(*rs));
}

void api_set_body(struct pl_api_response *rs, int status, const char *ctype, char *body) {
    rs->status = status;
    rs->content_type = ctype;
    rs->body = body;
    rs->body_len = body ? strlen(body) : 0;
}

void api_set_text(struct pl_api_response *rs, int status, const char *text) {
    api_set_body(rs, status, "text/plain; charset=utf-8", strdup(text));
}

void api_set_json(struct pl_api_response *rs, int status, json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    if (!s) {
        api_set_text(rs, 500, "out of memory\n");
        return;
    }
    api_set_body(rs, status, "application/json", s);
}

/* ---- google.rpc.ErrorInfo in protobuf wire format ---------------------- */

int pl_error_info_encode(const char *reason, const char *domain, const char *const *keys,
                         const char *const *values, size_t n, unsigned char **ret,
                         size_t *ret_len) {
    struct pl_buf b = {0};
    int r = pl_buf_put_pb_bytes(&b, 1, reason, strlen(reason));
    if (r == 0)
        r = pl_buf_put_pb_bytes(&b, 2, domain, strlen(domain));
    for (size_t i = 0; r == 0 && i < n; i++) {
        struct pl_buf e = {0};
        r = pl_buf_put_pb_bytes(&e, 1, keys[i], strlen(keys[i]));
        if (r == 0)
            r = pl_buf_put_pb_bytes(&e, 2, values[i], strlen(values[i]));
        if (r == 0)
            r = pl_buf_put_pb_bytes(&b, 3, e.data ? e.data : "", e.len);
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

json_t *api_error_body(const struct pl_api *api, const struct pl_error *err,
                       const char *ended_reason, int *ret_status) {
    enum pl_reason reason = err->reason == PL_REASON_NONE ? PL_REASON_INTERNAL : err->reason;
    enum pl_code code = pl_reason_code(reason);
    const char *dispatched =
        pl_reason_dispatched(reason) && !err->before_dispatch ? "true" : "false";
    const char *isolation = pl_tier_name(api->provider->info.tier);
    const char *keys[] = {"dispatched", "isolation", "ended_reason"};
    const char *vals[] = {dispatched, isolation, ended_reason ? ended_reason : ""};
    size_t nmeta = reason == PL_REASON_SESSION_ENDED && ended_reason && ended_reason[0] ? 3 : 2;
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
    if (ret_status)
        *ret_status = pl_code_http_status(code);
    return json_pack("{s:s, s:s, s:[o]}", "code", pl_code_name(code), "message", err->message,
                     "details", detail);
}

void api_refuse(struct pl_api *api, struct pl_api_response *rs, struct call_log *lg,
                const struct pl_error *err, const char *ended_reason) {
    enum pl_reason reason = err->reason == PL_REASON_NONE ? PL_REASON_INTERNAL : err->reason;
    int status = 500;
    json_t *body = api_error_body(api, err, ended_reason, &status);
    pl_metrics_refusal(api->metrics, reason);
    lg->outcome = reason == PL_REASON_INTERNAL ? "error" : "refused";
    lg->reason = reason;
    if (!body) {
        api_set_text(rs, 500, "out of memory\n");
        return;
    }
    api_set_json(rs, status, body);
}

/* ---- a run's result ------------------------------------------------------ */

/*
 * Output is text when it is valid UTF-8.  Otherwise the string field holds
 * a lossy copy (each byte outside ASCII becomes U+FFFD) and <name>_base64
 * carries the exact bytes, so nothing the guest wrote is lost.
 */
static int put_output(json_t *o, const char *name, const char *data, size_t len) {
    const unsigned char *p = (const unsigned char *)(data ? data : "");
    if (pl_utf8_valid(p, len))
        return json_object_set_new(o, name, json_stringn((const char *)p, len));
    size_t n = 0;
    char *lossy = pl_utf8_lossy(p, len, &n);
    json_object_set_new(o, name, json_stringn(lossy ? lossy : "", lossy ? n : 0));
    free(lossy);
    char *b64 = pl_base64_encode(p, len, 1);
    char key[64];
    snprintf(key, sizeof(key), "%s_base64", name);
    int r = json_object_set_new(o, key, json_string(b64 ? b64 : ""));
    free(b64);
    return r;
}

/* A request's collect globs' files (docs/api.md, "Artifacts"), and
 * whether the bounds left some out. */
static int artifacts_json(json_t *o, const struct pl_run_result *r) {
    json_t *list = json_array();
    if (!list || json_object_set_new(o, "artifacts", list) < 0 ||
        json_object_set_new(o, "artifacts_truncated", json_boolean(r->artifacts_truncated)) < 0)
        return -1;
    for (size_t i = 0; i < r->nartifacts; i++) {
        const struct pl_artifact *a = &r->artifacts[i];
        json_t *e = json_pack("{s:I, s:b}", "size",
                              (json_int_t)(a->size > UINT32_MAX ? UINT32_MAX : a->size),
                              "truncated", a->truncated);
        if (!e || json_array_append_new(list, e) < 0 ||
            put_output(e, "path", a->path, a->path_len) < 0 ||
            put_output(e, "content", (const char *)a->data, a->len) < 0)
            return -1;
    }
    return 0;
}

/* Saturating at UINT32_MAX, as every Usage figure. */
static json_int_t u32_of(uint64_t v) {
    return (json_int_t)(v > UINT32_MAX ? UINT32_MAX : v);
}

/* A Usage object (docs/api.md, "Usage"): microseconds and bytes shown as
 * milliseconds and KiB; a peak of 0 is one not measured, left out (as
 * proto3 leaves out a zero). */
static json_t *usage_json(const struct pl_usage *u) {
    json_t *o = json_pack("{s:I, s:I, s:I, s:s}", "cpu_user_ms", u32_of(u->cpu_user_us / 1000),
                          "cpu_system_ms", u32_of(u->cpu_system_us / 1000), "wall_ms",
                          u32_of(u->wall_us / 1000), "source", u->source ? u->source : "");
    if (o && u->memory_peak_bytes)
        json_object_set_new(o, "memory_peak_kib",
                            json_integer(u32_of(u->memory_peak_bytes / 1024)));
    return o;
}

json_t *api_result_json(const struct pl_run_result *r, enum pl_tier tier, uint32_t dur_ms) {
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
            if (s->usage.present)
                json_object_set_new(so, "usage", usage_json(&s->usage));
            json_array_append_new(steps, so);
        }
    }
    json_object_set_new(o, "steps", steps);
    if (r->outputs && json_array_size(r->outputs) > 0)
        json_object_set(o, "outputs", r->outputs);
    if (r->outputs_dropped)
        json_object_set_new(o, "outputs_dropped", json_integer(r->outputs_dropped));
    if (r->usage.present)
        json_object_set_new(o, "usage", usage_json(&r->usage));
    else if (r->usage_absent[0])
        json_object_set_new(o, "usage_absent", json_string(r->usage_absent));
    if (r->collected && artifacts_json(o, r) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *api_files_json(const struct pl_run_request *req, const struct pl_run_result *r) {
    json_t *o = NULL;
    switch (req->kind) {
    case PL_PAYLOAD_WRITE_FILES:
        return json_pack("{s:I, s:I}", "files", (json_int_t)req->write.nfiles, "bytes",
                         (json_int_t)req->write.bytes);
    case PL_PAYLOAD_READ_FILE:
        o = json_pack("{s:s, s:I, s:I, s:I, s:b}", "path", req->file.path, "size",
                      (json_int_t)(r->file_size > UINT32_MAX ? UINT32_MAX : r->file_size), "offset",
                      (json_int_t)req->file.offset, "length", (json_int_t)r->out_len, "more",
                      r->more);
        if (o && put_output(o, "content", r->out, r->out_len) < 0) {
            json_decref(o);
            o = NULL;
        }
        return o;
    case PL_PAYLOAD_LIST_FILES:
        return json_pack("{s:O, s:b}", "entries", r->entries ? r->entries : json_array(),
                         "truncated", r->truncated);
    default: return NULL;
    }
}
