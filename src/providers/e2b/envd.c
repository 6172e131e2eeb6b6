/* SPDX-License-Identifier: Apache-2.0 */
/*
 * envd.c: envd, E2B's agent inside each VM (spec/envd/envd.yaml and
 * spec/envd/process/process.proto of e2b-dev/E2B), reached at
 * scheme://49983-<sandboxID>.<domain>: files up by multipart, a process
 * as a Connect server stream of events, a signal by a unary call, the
 * VM's own view of its resources.  Every call carries the VM's access
 * tokens; the user is chosen by HTTP Basic with an empty password.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/canon.h"
#include "../../core/clock.h"
#include "../hosted/hosted.h"
#include "e2b_int.h"

#define EB_MAX_SMALL (64u << 10)

/* The headers every envd call carries; bufs holds their text. */
struct envd_headers {
    char token[320], traffic[320], user[128];
    const char *list[8];
};

static void envd_headers(const struct eb_sandbox *sb, const char *user, struct envd_headers *h,
                         const char *content_type, const char *extra) {
    snprintf(h->token, sizeof(h->token), "X-Access-Token: %s", sb->envd_token);
    snprintf(h->traffic, sizeof(h->traffic), "E2B-Traffic-Access-Token: %s", sb->traffic_token);
    char *basic = NULL;
    char cred[80];
    snprintf(cred, sizeof(cred), "%s:", user);
    basic = pl_base64_encode(cred, strlen(cred), 1);
    snprintf(h->user, sizeof(h->user), "Authorization: Basic %s", basic ? basic : "");
    free(basic);
    size_t n = 0;
    h->list[n++] = h->token;
    h->list[n++] = h->traffic;
    h->list[n++] = h->user;
    if (content_type)
        h->list[n++] = content_type;
    if (extra)
        h->list[n++] = extra;
    h->list[n] = NULL;
}

static void url_of(const struct eb_sandbox *sb, const char *path, char *out, size_t len) {
    snprintf(out, len, "%s%s", sb->envd_url, path);
}

int eb_upload(struct e2b_state *s, const struct eb_sandbox *sb, const char *user,
              const struct ph_file *files, size_t n, struct pl_error *err) {
    if (n == 0)
        return 0;
    struct ph_part *parts = calloc(n, sizeof(*parts));
    if (!parts)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++)
        parts[i] = (struct ph_part){
            .name = "file", .filename = files[i].path, .data = files[i].data, .len = files[i].len};
    char url[768];
    char *u = ph_urlencode(user);
    snprintf(url, sizeof(url), "%s/files?username=%s", sb->envd_url, u ? u : "user");
    free(u);
    struct envd_headers h;
    envd_headers(sb, user, &h, NULL, NULL);
    struct ph_request rq = {.method = "POST",
                            .url = url,
                            .headers = h.list,
                            .parts = parts,
                            .nparts = n,
                            .timeout_ms = s->set.call_timeout_ms,
                            .max_response = EB_MAX_SMALL};
    struct ph_response rs;
    int rc = ph_call(&rq, &rs, err);
    free(parts);
    if (rc < 0)
        return pl_error_wrap(err, "envd: uploading %zu files: ", n);
    if (rs.status != 200 && rs.status != 201 && rs.status != 204)
        rc = pl_error_set(err, PL_REASON_INTERNAL, "envd: uploading %zu files answered %ld", n,
                          rs.status);
    ph_response_free(&rs);
    return rc;
}

int eb_metrics(struct e2b_state *s, const struct eb_sandbox *sb, json_t **ret,
               struct pl_error *err) {
    char url[768];
    url_of(sb, "/metrics", url, sizeof(url));
    struct envd_headers h;
    envd_headers(sb, "user", &h, NULL, NULL);
    struct ph_request rq = {.method = "GET",
                            .url = url,
                            .headers = h.list,
                            .timeout_ms = s->set.call_timeout_ms,
                            .max_response = EB_MAX_SMALL};
    struct ph_response rs;
    if (ph_call(&rq, &rs, err) < 0)
        return pl_error_wrap(err, "envd: reading /metrics: ");
    *ret = rs.status == 200 ? ph_response_json(&rs) : NULL;
    long st = rs.status;
    ph_response_free(&rs);
    if (!*ret)
        return pl_error_set(err, PL_REASON_INTERNAL, "envd: /metrics answered %ld", st);
    return 0;
}

/* SendSignal SIGKILL to pid (the deadline, or a broken stream). */
static void kill_pid(const struct eb_sandbox *sb, unsigned pid) {
    char url[768], body[128];
    url_of(sb, "/process.Process/SendSignal", url, sizeof(url));
    snprintf(body, sizeof(body), "{\"process\":{\"pid\":%u},\"signal\":\"SIGNAL_SIGKILL\"}", pid);
    struct envd_headers h;
    envd_headers(sb, "root", &h, "Content-Type: application/json", "Connect-Protocol-Version: 1");
    struct ph_request rq = {.method = "POST",
                            .url = url,
                            .headers = h.list,
                            .body = body,
                            .body_len = strlen(body),
                            .timeout_ms = 5000,
                            .max_response = EB_MAX_SMALL};
    struct ph_response rs;
    struct pl_error ignored = {0};
    if (ph_call(&rq, &rs, &ignored) == 0)
        ph_response_free(&rs);
}

int eb_process(struct e2b_state *s, const struct eb_sandbox *sb, struct eb_proc *p,
               struct pl_error *err) {
    uint64_t now = pl_now_ns();
    uint64_t left_ms = p->deadline_ns > now ? (p->deadline_ns - now) / 1000000 : 0;
    if (left_ms == 0) {
        p->timed_out = true;
        return 0;
    }
    json_t *args = json_array();
    for (size_t i = 1; args && i < p->argc; i++)
        json_array_append_new(args, json_string(p->argv[i]));
    /* A run with a grant: where its guard is and its token, nothing else. */
    json_t *envs = sb->guard_token[0]
                       ? json_pack("{s:s, s:s}", "PLIMSOLL_GUARD_URL", s->set.guard_url,
                                   "PLIMSOLL_GUARD_TOKEN", sb->guard_token)
                       : json_object();
    /* stdin: false, or envd keeps the process's stdin open (process.proto's
     * StartRequest: "We default to true") and a step that reads it waits
     * for its deadline. */
    json_t *req = json_pack("{s:{s:s, s:o, s:o, s:s}, s:b}", "process", "cmd", p->argv[0], "args",
                            args, "envs", envs, "cwd", p->cwd ? p->cwd : "/", "stdin", 0);
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    struct pl_buf body = {0};
    if (!text || ph_envelope_append(&body, 0, text, strlen(text)) < 0) {
        free(text);
        pl_buf_free(&body);
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    free(text);
    char url[768], timeout[64];
    url_of(sb, "/process.Process/Start", url, sizeof(url));
    snprintf(timeout, sizeof(timeout), "Connect-Timeout-Ms: %llu", (unsigned long long)left_ms);
    struct envd_headers h;
    envd_headers(sb, p->user, &h, "Content-Type: application/connect+json", timeout);
    /* Connect-Protocol-Version is for unary calls only; streams carry none. */
    struct eb_stream st;
    eb_stream_init(&st, p);
    struct ph_request rq = {.method = "POST",
                            .url = url,
                            .headers = h.list,
                            .body = body.data,
                            .body_len = body.len,
                            .timeout_ms = left_ms, /* the client's deadline too */
                            .on_data = eb_stream_feed,
                            .userdata = &st};
    struct ph_response rs;
    int rc = ph_call(&rq, &rs, err);
    pl_buf_free(&body);
    long status = rc == 0 ? rs.status : 0;
    if (rc == 0)
        ph_response_free(&rs);
    bool deadline = rc < 0 && err && err->errnum == ETIMEDOUT;
    if (deadline && !p->ended) {
        /* envd was told the deadline too; this makes sure. */
        if (st.pid)
            kill_pid(sb, st.pid);
        p->timed_out = true;
        eb_stream_free(&st);
        *err = (struct pl_error){0};
        return 0;
    }
    eb_stream_free(&st);
    if (rc < 0) {
        if (st.pid && !p->ended)
            kill_pid(sb, st.pid);
        return pl_error_wrap(err, "envd: the process stream broke: ");
    }
    if (status != 200)
        return pl_error_set(err, PL_REASON_INTERNAL, "envd: starting the process answered %ld",
                            status);
    if (st.env.broken)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "envd: the process stream carried an unreadable event");
    if (!p->ended) {
        if (st.trailer_error[0] && strncmp(st.trailer_error, "deadline_exceeded", 17) == 0) {
            p->timed_out = true;
            return 0;
        }
        if (st.pid)
            kill_pid(sb, st.pid);
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "envd: the process stream ended without the process's end%s%s",
                            st.trailer_error[0] ? ": " : "", st.trailer_error);
    }
    return 0;
}
