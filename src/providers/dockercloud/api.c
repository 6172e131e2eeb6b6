/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.c: the management surface of the Docker Sandboxes API v1
 * (docs/providers/dockercloud.md, "The documents it follows"): the token
 * exchange, then every call with `Authorization: Bearer` and the access
 * token; a 401 exchanges the token again, once per call.  Every change to
 * an existing sandbox sends If-Match with the etag just read; a create
 * sends an Idempotency-Key.  A failure of the service itself (unreachable,
 * 5xx) is remembered as an outage, which readiness reads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/clock.h"
#include "../../core/ids.h"
#include "dc_int.h"

#define DC_MAX_ANSWER (4u << 20)
#define DC_MAX_PAGES 100

void dc_error_text(const json_t *j, char *out, size_t len) {
    const char *code = json_string_value(json_object_get(j, "code"));
    const char *msg = json_string_value(json_object_get(j, "message"));
    snprintf(out, len, "%s%s%.300s", code ? code : "", code && msg ? ": " : "", msg ? msg : "");
}

int dc_exchange_token(struct dc_state *s, struct pl_error *err) {
    json_t *body = json_pack("{s:s, s:s}", "identifier", s->set.account, "secret", s->set.secret);
    if (!body)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    const char *headers[] = {"Accept: application/json", NULL};
    struct ph_request rq = {.method = "POST",
                            .url = s->set.auth_url,
                            .headers = headers,
                            .json = body,
                            .timeout_ms = s->set.call_timeout_ms,
                            .max_response = 64 * 1024};
    struct ph_response rs;
    int rc = ph_call(&rq, &rs, err);
    /* The request held the secret: nothing of it stays around. */
    json_object_clear(body);
    json_decref(body);
    if (rc < 0) {
        pl_error_wrap(err, "Docker's token endpoint: ");
        ph_outage(&s->books, err);
        return -1;
    }
    json_t *j = ph_response_json(&rs);
    long status = rs.status;
    ph_response_free(&rs);
    const char *tok = json_string_value(json_object_get(j, "access_token"));
    if (status != 200 || !tok || !*tok || strlen(tok) >= sizeof(s->access_token) ||
        strpbrk(tok, "\r\n ")) {
        json_decref(j);
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "Docker's token endpoint answered %ld without a usable access_token "
                          "(check SANDBOX_DOCKERCLOUD_ACCOUNT and SANDBOX_DOCKERCLOUD_TOKEN)",
                          status);
        if (status >= 500)
            ph_outage(&s->books, err);
        return rc;
    }
    pthread_mutex_lock(&s->token_lock);
    snprintf(s->access_token, sizeof(s->access_token), "%s", tok);
    pthread_mutex_unlock(&s->token_lock);
    json_decref(j);
    return 0;
}

/* One attempt with the current access token. */
static int call_once(struct dc_state *s, const char *method, const char *url, const json_t *body,
                     const char *const *extra, struct ph_response *rs, struct pl_error *err) {
    char auth[4200];
    pthread_mutex_lock(&s->token_lock);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", s->access_token);
    pthread_mutex_unlock(&s->token_lock);
    const char *headers[8] = {auth, "Accept: application/json"};
    size_t n = 2;
    for (size_t i = 0; extra && extra[i] && n < 7; i++)
        headers[n++] = extra[i];
    headers[n] = NULL;
    struct ph_request rq = {.method = method,
                            .url = url,
                            .headers = headers,
                            .json = body,
                            .timeout_ms = s->set.call_timeout_ms,
                            .max_response = DC_MAX_ANSWER,
                            .want_header = "ETag"};
    int rc = ph_call(&rq, rs, err);
    explicit_bzero(auth, sizeof(auth));
    return rc;
}

int dc_call(struct dc_state *s, const char *method, const char *path, const json_t *body,
            const char *const *extra_headers, long *ret_status, json_t **ret_json, char *ret_etag,
            size_t etag_len, struct pl_error *err) {
    char url[1024];
    snprintf(url, sizeof(url), "%s%s", s->set.api_url, path);
    struct ph_response rs;
    for (int attempt = 0;; attempt++) {
        if (call_once(s, method, url, body, extra_headers, &rs, err) < 0) {
            pl_error_wrap(err, "the Docker Sandboxes API: ");
            ph_outage(&s->books, err);
            return -1;
        }
        if (rs.status != 401 || attempt > 0)
            break;
        /* The access token expired (or was revoked): exchange it again. */
        ph_response_free(&rs);
        if (dc_exchange_token(s, err) < 0)
            return -1;
    }
    *ret_status = rs.status;
    if (ret_json)
        *ret_json = ph_response_json(&rs);
    if (ret_etag)
        snprintf(ret_etag, etag_len, "%s", rs.header);
    ph_response_free(&rs);
    if (rs.status >= 500) {
        pl_error_set(err, PL_REASON_INTERNAL, "the Docker Sandboxes API: %s %s answered %ld",
                     method, path, rs.status);
        ph_outage(&s->books, err);
        if (ret_json) {
            json_decref(*ret_json);
            *ret_json = NULL;
        }
        return -1;
    }
    ph_outage(&s->books, NULL);
    return 0;
}

/* An API answer that is not the one expected, as an error. */
static int refused(const char *what, long status, const json_t *j, struct pl_error *err) {
    char text[400];
    dc_error_text(j, text, sizeof(text));
    return pl_error_set(err, PL_REASON_INTERNAL, "the Docker Sandboxes API: %s answered %ld%s%s",
                        what, status, text[0] ? ": " : "", text);
}

static bool uid_ok(const char *v, size_t max) {
    size_t n = v ? strlen(v) : 0;
    return n > 0 && n < max &&
           strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == n;
}

/* A sandbox answer into ret: uid, display name, etag, endpoint, status. */
static int read_sandbox(const json_t *a, const char *etag, struct dc_sandbox *ret,
                        const char **ret_status, struct pl_error *err) {
    const char *uid = json_string_value(json_object_get(a, "uid"));
    const json_t *core = json_object_get(a, "core");
    const char *status = json_string_value(json_object_get(core, "status"));
    const char *dn = json_string_value(json_object_get(a, "displayName"));
    if (!uid_ok(uid, sizeof(ret->uid)) || !status || !dn || strlen(dn) >= sizeof(ret->display_name))
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the Docker Sandboxes API: a sandbox answer without uid, display "
                            "name or status");
    snprintf(ret->uid, sizeof(ret->uid), "%s", uid);
    snprintf(ret->display_name, sizeof(ret->display_name), "%s", dn);
    const char *tag = etag && *etag ? etag : json_string_value(json_object_get(core, "etag"));
    snprintf(ret->etag, sizeof(ret->etag), "%s", tag ? tag : "");
    const char *uri = json_string_value(json_object_get(json_object_get(core, "endpoint"), "uri"));
    if (uri && strlen(uri) < sizeof(ret->endpoint))
        snprintf(ret->endpoint, sizeof(ret->endpoint), "%s", uri);
    *ret_status = status;
    return 0;
}

/* The endpoint's URL: https, or http to this machine only (the scoped
 * credential travels in a header); a path prefix is kept. */
static bool endpoint_ok(const char *u) {
    const char *host;
    if (strncmp(u, "https://", 8) == 0)
        host = u + 8;
    else if (strncmp(u, "http://", 7) == 0)
        host = u + 7;
    else
        return false;
    if (strncmp(u, "http://", 7) == 0 && strncmp(host, "127.", 4) != 0 &&
        strncmp(host, "localhost", 9) != 0)
        return false;
    return strpbrk(u, " \r\n\"'\\?#") == NULL;
}

static int get_sandbox(struct dc_state *s, const char *uid, struct dc_sandbox *sb,
                       const char **ret_status, json_t **keep, long *ret_http,
                       struct pl_error *err) {
    char path[160], etag[128];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", uid);
    json_t *j = NULL;
    long st = 0;
    if (dc_call(s, "GET", path, NULL, NULL, &st, &j, etag, sizeof(etag), err) < 0)
        return -1;
    *ret_http = st;
    if (st != 200) {
        int rc = refused("reading a sandbox", st, j, err);
        json_decref(j);
        return rc;
    }
    int rc = read_sandbox(j, etag, sb, ret_status, err);
    *keep = j; /* ret_status points into it */
    return rc;
}

int dc_create(struct dc_state *s, const char *run_id, unsigned timeout_s, const char *allow,
              struct dc_sandbox *ret, struct pl_error *err) {
    memset(ret, 0, sizeof(*ret));
    char name[72], timeout[32], idem[64], idem_hdr[96];
    snprintf(name, sizeof(name), "%s%s", s->set.prefix, run_id);
    snprintf(timeout, sizeof(timeout), "%us", timeout_s);
    if (pl_random_hex(idem, sizeof(idem), 16) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    snprintf(idem_hdr, sizeof(idem_hdr), "Idempotency-Key: %s", idem);
    json_t *body = json_pack(
        "{s:s, s:s, s:{s:i, s:I}, s:{s:s, s:s}, s:[{s:s, s:[], s:[]}], s:{s:{s:s, s:s}}}",
        "displayName", name, "imageRef", s->set.image, "resources", "cpus", (int)s->set.cpus,
        "memoryMib", (json_int_t)s->set.memory_mib, "labels", "plimsoll-instance", s->set.instance,
        "plimsoll-run", run_id, "networkPolicies", "mode", "denyAll", "allowNetworks",
        "denyNetworks", "features", "timeouts", "timeout", timeout, "onTimeout", "delete");
    if (!body)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    if (allow) {
        json_t *pol = json_array_get(json_object_get(body, "networkPolicies"), 0);
        json_array_append_new(json_object_get(pol, "allowNetworks"), json_string(allow));
    }
    const char *extra[] = {idem_hdr, NULL};
    json_t *a = NULL;
    long st = 0;
    char etag[128];
    int rc = dc_call(s, "POST", "/v1/sandboxes", body, extra, &st, &a, etag, sizeof(etag), err);
    json_decref(body);
    if (rc < 0)
        return -1;
    if (st != 201 && st != 202) {
        rc = refused("creating a sandbox", st, a, err);
        json_decref(a);
        return rc;
    }
    const char *status = NULL;
    rc = read_sandbox(a, etag, ret, &status, err);
    /* 202: still creating or starting; read it back until it settles. */
    uint64_t until = pl_deadline_in_ms(s->set.call_timeout_ms * 4u);
    while (rc == 0 && strcmp(status, "running") != 0) {
        if (strcmp(status, "creating") != 0 && strcmp(status, "starting") != 0) {
            rc =
                pl_error_set(err, PL_REASON_INTERNAL,
                             "the sandbox %s did not start: its status is %.40s", ret->uid, status);
            break;
        }
        if (pl_now_ns() >= until) {
            rc = pl_error_set(err, PL_REASON_INTERNAL, "the sandbox %s was still %s after %u ms",
                              ret->uid, status, s->set.call_timeout_ms * 4u);
            break;
        }
        pl_sleep_ns(100000000ull);
        json_decref(a);
        a = NULL;
        long http = 0;
        rc = get_sandbox(s, ret->uid, ret, &status, &a, &http, err);
    }
    if (rc == 0 && strcmp(ret->display_name, name) != 0)
        rc = pl_error_set(err, PL_REASON_INTERNAL, "the sandbox %s came back named %.64s, not %s",
                          ret->uid, ret->display_name, name);
    if (rc == 0 && (!ret->endpoint[0] || !endpoint_ok(ret->endpoint)))
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the running sandbox %s has no usable endpoint (https, or http to "
                          "this machine only)",
                          ret->uid);
    json_decref(a);
    return rc;
}

int dc_delete(struct dc_state *s, const char *uid, struct pl_error *err) {
    char path[160];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", uid);
    /* Read for the etag, then delete under it; a stale one (someone changed
     * the sandbox between) is read again. */
    for (int attempt = 0; attempt < 3; attempt++) {
        json_t *j = NULL;
        long st = 0;
        char etag[128], if_match[160];
        if (dc_call(s, "GET", path, NULL, NULL, &st, &j, etag, sizeof(etag), err) < 0)
            return -1;
        if (st == 404) {
            json_decref(j);
            return 0;
        }
        if (st != 200) {
            int rc = refused("reading a sandbox to delete it", st, j, err);
            json_decref(j);
            return rc;
        }
        if (!etag[0]) {
            const char *t = json_string_value(json_object_get(json_object_get(j, "core"), "etag"));
            snprintf(etag, sizeof(etag), "%s", t ? t : "");
        }
        json_decref(j);
        j = NULL;
        if (!etag[0] || strpbrk(etag, "\r\n"))
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the Docker Sandboxes API: sandbox %s has no etag to delete under",
                                uid);
        snprintf(if_match, sizeof(if_match), "If-Match: %s", etag);
        const char *extra[] = {if_match, NULL};
        if (dc_call(s, "DELETE", path, NULL, extra, &st, &j, NULL, 0, err) < 0)
            return -1;
        if (st == 202 || st == 204 || st == 404) {
            json_decref(j);
            return 0;
        }
        if (st == 403) {
            char text[400];
            dc_error_text(j, text, sizeof(text));
            json_decref(j);
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the Docker Sandboxes API: the token lacks the sandboxesDelete "
                                "permission (deleting a sandbox answered 403%s%s)",
                                text[0] ? ": " : "", text);
        }
        if (st != 412) {
            int rc = refused("deleting a sandbox", st, j, err);
            json_decref(j);
            return rc;
        }
        json_decref(j);
    }
    return pl_error_set(err, PL_REASON_INTERNAL,
                        "the Docker Sandboxes API: sandbox %s changed under every delete (412)",
                        uid);
}

/* "network/layer, ..." of a policy's list, for a message. */
static void describe_networks(const json_t *list, char *out, size_t len) {
    size_t off = 0, i;
    json_t *e;
    out[0] = '\0';
    json_array_foreach(list, i, e) {
        const char *net = json_is_string(e) ? json_string_value(e)
                                            : json_string_value(json_object_get(e, "network"));
        int n = snprintf(out + off, len - off, "%s%s", off ? ", " : "", net ? net : "?");
        if (n < 0 || (size_t)n >= len - off)
            break;
        off += (size_t)n;
    }
}

/* Whether the allowed networks are exactly allow ("": none). */
static bool allows_exactly(const json_t *list, const char *allow) {
    if (list && !json_is_array(list))
        return false;
    if (!allow || !*allow)
        return json_array_size(list) == 0;
    if (json_array_size(list) != 1)
        return false;
    const json_t *e = json_array_get(list, 0);
    const char *net =
        json_is_string(e) ? json_string_value(e) : json_string_value(json_object_get(e, "network"));
    return net && strcmp(net, allow) == 0;
}

int dc_policy_sealed(struct dc_state *s, const char *uid, const char *allow, char *why,
                     size_t why_len, struct pl_error *err) {
    char path[200];
    if (uid)
        snprintf(path, sizeof(path), "/v1/sandboxes/%s/network-policies", uid);
    else
        snprintf(path, sizeof(path), "/v1/network-policies");
    json_t *j = NULL;
    long st = 0;
    if (dc_call(s, "GET", path, NULL, NULL, &st, &j, NULL, 0, err) < 0)
        return -1;
    if (st != 200) {
        int rc = refused(uid ? "reading a sandbox's network policy"
                             : "reading the account's network policy",
                         st, j, err);
        json_decref(j);
        return rc;
    }
    const json_t *eff = json_object_get(j, "effective");
    const char *mode = json_string_value(json_object_get(eff, "mode"));
    const json_t *allowed = json_object_get(eff, "allowNetworks");
    char nets[256];
    describe_networks(allowed, nets, sizeof(nets));
    snprintf(why, why_len, "mode %s%s%s", mode ? mode : "(none)", nets[0] ? ", allowing " : "",
             nets);
    /* The account's policy may allow the guard's network, or nothing. */
    bool ok = mode && strcmp(mode, "denyAll") == 0 &&
              (allows_exactly(allowed, allow) || (!uid && allows_exactly(allowed, "")));
    int rc = 0;
    if (!ok)
        rc = pl_error_set(err, PL_REASON_NOT_READY,
                          "%s network policy in force is not deny-all with nothing allowed%s%s: "
                          "%s",
                          uid ? "the sandbox's" : "the account's",
                          allow && *allow ? " but the guard's " : "", allow ? allow : "", why);
    json_decref(j);
    return rc;
}

int dc_credential(struct dc_state *s, struct dc_sandbox *sb, struct pl_error *err) {
    char path[200];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/endpoint-credentials", sb->uid);
    json_t *body = json_pack("{s:[s, s], s:s}", "permissions", "sandboxesExec",
                             "sandboxesFilesWrite", "ttl", "300s");
    json_t *j = NULL;
    long st = 0;
    int rc = body ? dc_call(s, "POST", path, body, NULL, &st, &j, NULL, 0, err)
                  : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    json_decref(body);
    if (rc < 0)
        return -1;
    const char *tok = json_string_value(json_object_get(j, "token"));
    if (st != 200 || !tok || !*tok || strlen(tok) >= sizeof(sb->cred) || strpbrk(tok, "\r\n ")) {
        rc = st != 200 ? refused("issuing an endpoint credential", st, j, err)
                       : pl_error_set(err, PL_REASON_INTERNAL,
                                      "the Docker Sandboxes API: an endpoint credential answer "
                                      "without a usable token");
        json_decref(j);
        return rc;
    }
    snprintf(sb->cred, sizeof(sb->cred), "%s", tok);
    /* Renewed a minute before the five minutes asked for are up. */
    sb->cred_until_ns = pl_now_ns() + 240ull * 1000000000ull;
    json_decref(j);
    return 0;
}

int dc_list_ours(struct dc_state *s, json_t **ret_list, struct pl_error *err) {
    json_t *all = json_array();
    if (!all)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    char token[512] = "";
    int rc = 0;
    for (int page = 0; page < DC_MAX_PAGES && rc == 0; page++) {
        char path[800];
        char *enc = token[0] ? ph_urlencode(token) : NULL;
        snprintf(path, sizeof(path), "/v1/sandboxes?pageSize=100%s%s", enc ? "&pageToken=" : "",
                 enc ? enc : "");
        free(enc);
        json_t *j = NULL;
        long st = 0;
        if (dc_call(s, "GET", path, NULL, NULL, &st, &j, NULL, 0, err) < 0) {
            rc = -1;
            break;
        }
        if (st != 200) {
            rc = refused("listing sandboxes", st, j, err);
            json_decref(j);
            break;
        }
        size_t i;
        json_t *sb;
        json_array_foreach(json_object_get(j, "sandboxes"), i, sb) {
            const char *dn = json_string_value(json_object_get(sb, "displayName"));
            /* The service cannot filter by prefix: it is done here. */
            if (dn && strncmp(dn, s->set.prefix, strlen(s->set.prefix)) == 0)
                json_array_append(all, sb);
        }
        const char *next = json_string_value(json_object_get(j, "nextPageToken"));
        snprintf(token, sizeof(token), "%s", next ? next : "");
        json_decref(j);
        if (!token[0])
            break;
    }
    if (rc < 0)
        json_decref(all);
    else
        *ret_list = all;
    return rc;
}
