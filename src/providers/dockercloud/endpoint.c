/* SPDX-License-Identifier: Apache-2.0 */
/*
 * endpoint.c: a sandbox's own endpoint (core.endpoint.uri), with the
 * sandbox's scoped credential, never the management token: files
 * (upload, mkdir) and processes.  The API has no timeout on a process, so
 * a deadline is kept here: start it (createProcess), read its output page
 * by page (readOutput) until it has exited, and at the deadline send it
 * `kill` (signal).  A 401 (the five-minute credential ran out) gets a
 * fresh credential, once per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/canon.h"
#include "../../core/clock.h"
#include "dc_int.h"

/* One answer of the endpoint, as JSON: a page of output asks for 1 MiB of
 * data, but the first chunk always fits whatever its size (readOutput), so
 * room is left for one larger chunk in base64. */
#define DC_MAX_PAGE (8u << 20)

/* One call to the endpoint: JSON (or parts) in, JSON out. */
static int ep_call(struct dc_state *s, struct dc_sandbox *sb, const char *method, const char *path,
                   const json_t *body, const struct ph_part *parts, size_t nparts,
                   uint64_t timeout_ms, long *ret_status, json_t **ret_json, struct pl_error *err) {
    char url[1200];
    snprintf(url, sizeof(url), "%s%s", sb->endpoint, path);
    for (int attempt = 0;; attempt++) {
        if (pl_now_ns() >= sb->cred_until_ns && dc_credential(s, sb, err) < 0)
            return -1;
        char auth[4200];
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", sb->cred);
        const char *headers[] = {auth, "Accept: application/json", NULL};
        struct ph_request rq = {.method = method,
                                .url = url,
                                .headers = headers,
                                .json = body,
                                .parts = parts,
                                .nparts = nparts,
                                .timeout_ms = timeout_ms ? timeout_ms : s->set.call_timeout_ms,
                                .max_response = DC_MAX_PAGE};
        struct ph_response rs;
        int rc = ph_call(&rq, &rs, err);
        explicit_bzero(auth, sizeof(auth));
        if (rc < 0)
            return pl_error_wrap(err, "the sandbox's endpoint: ");
        if (rs.status == 401 && attempt == 0) {
            ph_response_free(&rs);
            sb->cred_until_ns = 0; /* a fresh credential */
            continue;
        }
        *ret_status = rs.status;
        *ret_json = ph_response_json(&rs);
        ph_response_free(&rs);
        if (rs.status >= 500) {
            json_decref(*ret_json);
            *ret_json = NULL;
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the sandbox's endpoint: %s %s answered %ld", method, path,
                                rs.status);
        }
        return 0;
    }
}

static int ep_refused(const char *what, long status, const json_t *j, struct pl_error *err) {
    char text[400];
    dc_error_text(j, text, sizeof(text));
    return pl_error_set(err, PL_REASON_INTERNAL, "the sandbox's endpoint: %s answered %ld%s%s",
                        what, status, text[0] ? ": " : "", text);
}

int dc_upload(struct dc_state *s, struct dc_sandbox *sb, const struct ph_file *files, size_t n,
              struct pl_error *err) {
    if (n == 0)
        return 0;
    struct ph_part *parts = calloc(2 * n, sizeof(*parts));
    char **meta = calloc(n, sizeof(*meta));
    int rc = parts && meta ? 0 : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    for (size_t i = 0; i < n && rc == 0; i++) {
        json_t *m = json_pack("{s:s, s:i}", "path", files[i].path, "mode", 0644);
        meta[i] = m ? json_dumps(m, JSON_COMPACT) : NULL;
        json_decref(m);
        if (!meta[i]) {
            rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
            break;
        }
        parts[2 * i] = (struct ph_part){.name = "metadata",
                                        .type = "application/json",
                                        .data = meta[i],
                                        .len = strlen(meta[i])};
        parts[2 * i + 1] = (struct ph_part){.name = "content",
                                            .type = "application/octet-stream",
                                            .data = files[i].data ? files[i].data : "",
                                            .len = files[i].len};
    }
    json_t *j = NULL;
    long st = 0;
    if (rc == 0)
        rc = ep_call(s, sb, "POST", "/v1/files/upload", NULL, parts, 2 * n, 0, &st, &j, err);
    if (rc == 0 && st != 200)
        rc = ep_refused("uploading files", st, j, err);
    json_decref(j);
    for (size_t i = 0; meta && i < n; i++)
        free(meta[i]);
    free(meta);
    free(parts);
    return rc;
}

int dc_mkdir(struct dc_state *s, struct dc_sandbox *sb, const char *path, struct pl_error *err) {
    json_t *body = json_pack("{s:s, s:b}", "path", path, "parents", 1);
    json_t *j = NULL;
    long st = 0;
    int rc = body ? ep_call(s, sb, "PUT", "/v1/files/directories", body, NULL, 0, 0, &st, &j, err)
                  : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    json_decref(body);
    if (rc == 0 && st != 200)
        rc = ep_refused("making a directory", st, j, err);
    json_decref(j);
    return rc;
}

/* The process's id from its resource name, "processes/<id>". */
static int process_id(const json_t *proc, char *out, size_t len) {
    const char *name = json_string_value(json_object_get(proc, "name"));
    const char *slash = name ? strrchr(name, '/') : NULL;
    const char *id = slash ? slash + 1 : name;
    if (!id || !*id || strlen(id) >= len ||
        strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") !=
            strlen(id))
        return -1;
    snprintf(out, len, "%s", id);
    return 0;
}

static void kill_process(struct dc_state *s, struct dc_sandbox *sb, const char *id) {
    char path[160];
    snprintf(path, sizeof(path), "/v1/processes/%s/signal", id);
    json_t *body = json_pack("{s:s}", "signal", "kill");
    json_t *j = NULL;
    long st = 0;
    struct pl_error ignored = {0};
    if (body)
        (void)ep_call(s, sb, "POST", path, body, NULL, 0, 5000, &st, &j, &ignored);
    json_decref(body);
    json_decref(j);
}

/* One page of output into p; *ret_next the cursor after it, *ret_exited
 * whether the process has exited (its code into p). */
static int read_page(struct dc_state *s, struct dc_sandbox *sb, struct dc_proc *p, const char *id,
                     unsigned long long *cursor, bool *ret_exited, struct pl_error *err) {
    char path[200];
    snprintf(path, sizeof(path), "/v1/processes/%s/output?resumeFrom=%llu&maxBytes=%u", id, *cursor,
             1u << 20);
    json_t *j = NULL;
    long st = 0;
    if (ep_call(s, sb, "GET", path, NULL, NULL, 0, 0, &st, &j, err) < 0)
        return -1;
    if (st != 200) {
        int rc = ep_refused("reading a process's output", st, j, err);
        json_decref(j);
        return rc;
    }
    int rc = dc_output_page(j, p, cursor, ret_exited, err);
    json_decref(j);
    return rc;
}

int dc_process(struct dc_state *s, struct dc_sandbox *sb, struct dc_proc *p, struct pl_error *err) {
    if (pl_now_ns() >= p->deadline_ns) {
        p->timed_out = true;
        return 0;
    }
    json_t *cmd = json_array();
    for (size_t i = 0; cmd && i < p->argc; i++)
        json_array_append_new(cmd, json_string(p->argv[i]));
    /* A run with a grant: where its guard is and its token, nothing else. */
    json_t *env = p->guard_token ? json_pack("{s:s, s:s}", "PLIMSOLL_GUARD_URL", p->guard_url,
                                             "PLIMSOLL_GUARD_TOKEN", p->guard_token)
                                 : json_object();
    json_t *body =
        json_pack("{s:o, s:s, s:o}", "cmd", cmd, "workingDir", p->cwd ? p->cwd : "/", "env", env);
    if (body && p->user)
        json_object_set_new(body, "user", json_string(p->user));
    json_t *j = NULL;
    long st = 0;
    int rc = body ? ep_call(s, sb, "POST", "/v1/processes", body, NULL, 0, 0, &st, &j, err)
                  : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    json_decref(body);
    if (rc < 0)
        return -1;
    char id[96];
    if (st != 201 && st != 200) {
        rc = ep_refused("starting a process", st, j, err);
        json_decref(j);
        return rc;
    }
    if (process_id(j, id, sizeof(id)) < 0) {
        json_decref(j);
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the sandbox's endpoint: a process answer without a usable name");
    }
    json_decref(j);
    unsigned long long cursor = 0;
    bool exited = false;
    while (!exited) {
        if (read_page(s, sb, p, id, &cursor, &exited, err) < 0) {
            kill_process(s, sb, id);
            return -1;
        }
        if (exited)
            break;
        uint64_t now = pl_now_ns();
        if (now >= p->deadline_ns) {
            kill_process(s, sb, id);
            p->timed_out = true;
            return 0;
        }
        uint64_t wait = (uint64_t)s->set.poll_ms * 1000000ull;
        pl_sleep_ns(now + wait > p->deadline_ns ? p->deadline_ns - now : wait);
    }
    return 0;
}
