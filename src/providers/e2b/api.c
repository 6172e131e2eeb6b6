/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.c: E2B's control plane (spec/openapi.yml of e2b-dev/E2B): create,
 * read, list and delete sandboxes, with the API key in X-API-Key.  Every
 * failure of the service itself (unreachable, 5xx) is remembered as an
 * outage, which readiness reads without calling anything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/cleanup.h"
#include "../hosted/hosted.h"
#include "e2b_int.h"

#define EB_MAX_ANSWER (1u << 20)
#define EB_MAX_PAGES 100

/* One call within timeout_ms; 5xx and transport failures are outages and
 * errors. */
static int call_within(struct e2b_state *s, const char *method, const char *path,
                       const json_t *body, const char *want_header, unsigned timeout_ms,
                       long *ret_status, json_t **ret_json, char *ret_header, size_t header_len,
                       struct pl_error *err) {
    char url[1024], key[300];
    snprintf(url, sizeof(url), "%s%s", s->set.api_url, path);
    snprintf(key, sizeof(key), "X-API-Key: %s", s->set.api_key);
    const char *headers[] = {key, "Accept: application/json", NULL};
    struct ph_request rq = {.method = method,
                            .url = url,
                            .headers = headers,
                            .json = body,
                            .timeout_ms = timeout_ms,
                            .max_response = EB_MAX_ANSWER,
                            .want_header = want_header};
    struct ph_response rs;
    if (ph_call(&rq, &rs, err) < 0) {
        pl_error_wrap(err, "E2B's API: ");
        ph_outage(&s->books, err);
        return -1;
    }
    *ret_status = rs.status;
    if (ret_json)
        *ret_json = ph_response_json(&rs);
    if (ret_header)
        snprintf(ret_header, header_len, "%s", rs.header);
    ph_response_free(&rs);
    if (rs.status >= 500) {
        pl_error_set(err, PL_REASON_INTERNAL, "E2B's API: %s %s answered %ld", method, path,
                     rs.status);
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

/* One call within SANDBOX_E2B_CALL_TIMEOUT_MS. */
static int call(struct e2b_state *s, const char *method, const char *path, const json_t *body,
                const char *want_header, long *ret_status, json_t **ret_json, char *ret_header,
                size_t header_len, struct pl_error *err) {
    return call_within(s, method, path, body, want_header, s->set.call_timeout_ms, ret_status,
                       ret_json, ret_header, header_len, err);
}

/* E2B's error message ({"code", "message"}), or "". */
static const char *message_of(const json_t *j) {
    const char *m = json_string_value(json_object_get(j, "message"));
    return m ? m : "";
}

static bool id_ok(const char *v, size_t max) {
    size_t n = v ? strlen(v) : 0;
    return n > 0 && n < max &&
           strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == n;
}

static bool domain_ok(const char *v, size_t max) {
    size_t n = v ? strlen(v) : 0;
    return n > 0 && n < max &&
           strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") == n &&
           v[0] != '.' && v[0] != '-';
}

/* The domain when the answer names none: the API's host without "api.". */
static void default_domain(const struct eb_settings *set, char *out, size_t len) {
    const char *h = strstr(set->api_url, "://");
    h = h ? h + 3 : set->api_url;
    if (strncmp(h, "api.", 4) == 0)
        h += 4;
    snprintf(out, len, "%.*s", (int)strcspn(h, ":/"), h);
}

/*
 * Read a create's (or connect's) answer.  Both access tokens are required:
 * the provider never lowers its access requirements, so an answer without
 * either is refused (the caller deletes the VM).
 */
static int read_sandbox(struct e2b_state *s, const json_t *a, struct eb_sandbox *ret,
                        struct pl_error *err) {
    const char *id = json_string_value(json_object_get(a, "sandboxID"));
    if (!id_ok(id, sizeof(ret->id)))
        return pl_error_set(err, PL_REASON_INTERNAL, "E2B's answer has no usable sandboxID");
    snprintf(ret->id, sizeof(ret->id), "%s", id);
    const char *tok = json_string_value(json_object_get(a, "envdAccessToken"));
    if (!tok || !*tok || strlen(tok) >= sizeof(ret->envd_token) || strpbrk(tok, "\r\n"))
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "E2B's answer for sandbox %s lacks envdAccessToken (created with "
                            "secure: true): refused, the VM is deleted",
                            ret->id);
    snprintf(ret->envd_token, sizeof(ret->envd_token), "%s", tok);
    tok = json_string_value(json_object_get(a, "trafficAccessToken"));
    if (!tok || !*tok || strlen(tok) >= sizeof(ret->traffic_token) || strpbrk(tok, "\r\n"))
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "E2B's answer for sandbox %s lacks trafficAccessToken (created with "
                            "allowPublicTraffic: false): refused, the VM is deleted",
                            ret->id);
    snprintf(ret->traffic_token, sizeof(ret->traffic_token), "%s", tok);
    const char *dom = json_string_value(json_object_get(a, "domain"));
    if (dom && *dom) {
        if (!domain_ok(dom, sizeof(ret->domain)))
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "E2B's answer for sandbox %s has an unusable domain", ret->id);
        snprintf(ret->domain, sizeof(ret->domain), "%s", dom);
    } else {
        default_domain(&s->set, ret->domain, sizeof(ret->domain));
    }
    const char *v = json_string_value(json_object_get(a, "envdVersion"));
    snprintf(ret->envd_version, sizeof(ret->envd_version), "%s", v ? v : "");
    snprintf(ret->envd_url, sizeof(ret->envd_url), "%s://%d-%s.%s%s", s->set.scheme, EB_ENVD_PORT,
             ret->id, ret->domain, s->set.port_suffix);
    return 0;
}

int eb_create(struct e2b_state *s, const char *run_id, unsigned timeout_s, const char *allow_out,
              struct eb_sandbox *ret, struct pl_error *err) {
    memset(ret, 0, sizeof(*ret));
    json_t *body = json_pack("{s:s, s:i, s:b, s:b, s:b, s:{s:b, s:[s]}, s:{s:s, s:s}}",
                             "templateID", s->set.template_id, "timeout", (int)timeout_s, "secure",
                             1, "allow_internet_access", 0, "autoPause", 0, "network",
                             "allowPublicTraffic", 0, "denyOut", "0.0.0.0/0", "metadata",
                             EB_LABEL_INSTANCE, s->set.instance, EB_LABEL_RUN, run_id);
    if (body && allow_out) {
        /* Deny-all stays; one address is allowed (E2B: allowOut wins). */
        char cidr[32];
        snprintf(cidr, sizeof(cidr), "%s/32", allow_out);
        json_object_set_new(json_object_get(body, "network"), "allowOut", json_pack("[s]", cidr));
    }
    if (!body)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    long st = 0;
    json_t *a = NULL;
    int rc = call(s, "POST", "/sandboxes", body, NULL, &st, &a, NULL, 0, err);
    json_decref(body);
    if (rc < 0)
        return pl_error_wrap(err, "creating a VM: ");
    if (st != 201) {
        pl_error_set(err, PL_REASON_INTERNAL, "E2B refused the create (%ld): %.200s", st,
                     message_of(a));
        json_decref(a);
        return -1;
    }
    rc = read_sandbox(s, a, ret, err);
    json_decref(a);
    if (rc < 0 && ret->id[0]) {
        struct pl_error ignored = {0};
        (void)eb_delete(s, ret->id, &ignored);
    }
    return rc;
}

int eb_get(struct e2b_state *s, const char *id, json_t **ret_detail, long *ret_status,
           struct pl_error *err) {
    char path[128];
    snprintf(path, sizeof(path), "/sandboxes/%s", id);
    *ret_detail = NULL;
    if (call(s, "GET", path, NULL, NULL, ret_status, ret_detail, NULL, 0, err) < 0)
        return -1;
    if (*ret_status != 200) {
        pl_error_set(err, PL_REASON_INTERNAL, "E2B: reading sandbox %s answered %ld: %.200s", id,
                     *ret_status, message_of(*ret_detail));
        json_decref(*ret_detail);
        *ret_detail = NULL;
        return -1;
    }
    return 0;
}

/* An array of strings that is exactly the set want[0..n) (absent: empty). */
static bool same_set(const json_t *arr, const char *const *want, size_t n) {
    if (!arr || json_is_null(arr))
        return n == 0;
    if (!json_is_array(arr))
        return false;
    size_t i;
    const json_t *v;
    bool seen[2] = {false, false};
    json_array_foreach(arr, i, v) {
        const char *t = json_string_value(v);
        size_t k = 0;
        while (t && k < n && strcmp(t, want[k]) != 0)
            k++;
        if (!t || k == n)
            return false;
        seen[k] = true;
    }
    for (size_t k = 0; k < n; k++)
        if (!seen[k])
            return false;
    return true;
}

/* What a detail's network says that is not what the create sent, or NULL. */
static const char *network_mismatch(const json_t *d, const char *allow_out, char *cidr,
                                    size_t cidr_len) {
    const json_t *inet = json_object_get(d, "allowInternetAccess");
    if (!json_is_false(inet))
        return !inet || json_is_null(inet) ? "allowInternetAccess is not set (it was sent false)"
                                           : "allowInternetAccess is not false";
    const json_t *net = json_object_get(d, "network");
    if (!json_is_object(net))
        return "it reports no network";
    if (!json_is_false(json_object_get(net, "allowPublicTraffic")))
        return "network.allowPublicTraffic is not false";
    const char *deny[] = {"0.0.0.0/0"};
    if (!same_set(json_object_get(net, "denyOut"), deny, 1))
        return "network.denyOut is not [\"0.0.0.0/0\"]";
    const char *allow[1] = {NULL};
    if (allow_out) {
        snprintf(cidr, cidr_len, "%s/32", allow_out);
        allow[0] = cidr;
    }
    if (!same_set(json_object_get(net, "allowOut"), allow, allow_out ? 1 : 0))
        return allow_out ? "network.allowOut is not the guard's address alone"
                         : "network.allowOut is not empty";
    const json_t *rules = json_object_get(net, "rules");
    if (rules && !json_is_null(rules) && !(json_is_object(rules) && json_object_size(rules) == 0))
        return "network.rules is not empty";
    const json_t *proxy = json_object_get(net, "egressProxy");
    if (proxy && !json_is_null(proxy))
        return "network.egressProxy is set";
    return NULL;
}

int eb_check_network(struct e2b_state *s, const char *id, const char *allow_out,
                     struct pl_error *err) {
    json_t *d = NULL;
    long st = 0;
    if (eb_get(s, id, &d, &st, err) < 0)
        return pl_error_wrap(err, "reading the VM's network back: ");
    char cidr[32];
    const char *why = network_mismatch(d, allow_out, cidr, sizeof(cidr));
    json_decref(d);
    if (why)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "E2B's detail of sandbox %s is not the network it was created with: "
                            "%s (internet denied, public traffic off, %s): refused, the VM is "
                            "deleted",
                            id, why, allow_out ? "only the guard allowed" : "nothing allowed");
    return 0;
}

/* A call on one sandbox with no answer to read: 0 when the status is one of
 * the two that mean done; a 404 outside them is SESSION_ENDED. */
static int on_sandbox(struct e2b_state *s, const char *method, const char *id, const char *suffix,
                      const char *what, long ok1, long ok2, struct pl_error *err) {
    char path[128];
    snprintf(path, sizeof(path), "/sandboxes/%s%s", id, suffix);
    long st = 0;
    json_t *a = NULL;
    if (call(s, method, path, NULL, NULL, &st, &a, NULL, 0, err) < 0)
        return pl_error_wrap(err, "%s sandbox %s: ", what, id);
    int rc = 0;
    if (st != ok1 && st != ok2)
        rc = pl_error_set(err, st == 404 ? PL_REASON_SESSION_ENDED : PL_REASON_INTERNAL,
                          "E2B: %s sandbox %s answered %ld: %.200s", what, id, st, message_of(a));
    json_decref(a);
    return rc;
}

int eb_sandbox_metrics(struct e2b_state *s, const char *id, long long start_s, long long end_s,
                       unsigned timeout_ms, json_t **ret, struct pl_error *err) {
    char path[192];
    snprintf(path, sizeof(path), "/sandboxes/%s/metrics?start=%lld&end=%lld", id, start_s, end_s);
    long st = 0;
    *ret = NULL;
    json_t *a = NULL;
    if (call_within(s, "GET", path, NULL, NULL, timeout_ms, &st, &a, NULL, 0, err) < 0)
        return pl_error_wrap(err, "reading sandbox %s's metrics: ", id);
    if (st != 200 || !json_is_array(a)) {
        pl_error_set(err, PL_REASON_INTERNAL, "E2B: sandbox %s's metrics answered %ld: %.200s", id,
                     st, message_of(a));
        json_decref(a);
        return -1;
    }
    *ret = a;
    return 0;
}

int eb_delete(struct e2b_state *s, const char *id, struct pl_error *err) {
    return on_sandbox(s, "DELETE", id, "", "deleting", 204, 404, err);
}

int eb_list_ours(struct e2b_state *s, json_t **ret_list, struct pl_error *err) {
    char filter[128];
    snprintf(filter, sizeof(filter), "%s=%s", EB_LABEL_INSTANCE, s->set.instance);
    PL_AUTO_FREE char *q = ph_urlencode(filter);
    PL_AUTO_JSON json_t *all = json_array();
    char token[512] = "";
    if (!q || !all)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    for (int page = 0; page < EB_MAX_PAGES; page++) {
        char path[1024], next[512] = "";
        PL_AUTO_FREE char *tq = ph_urlencode(token);
        if (!tq)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        snprintf(path, sizeof(path), "/v2/sandboxes?metadata=%s&state=running,paused&limit=100%s%s",
                 q, *token ? "&nextToken=" : "", tq);
        long st = 0;
        PL_AUTO_JSON json_t *a = NULL;
        if (call(s, "GET", path, NULL, "X-Next-Token", &st, &a, next, sizeof(next), err) < 0)
            return -1;
        if (st != 200 || !json_is_array(a))
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "E2B: listing sandboxes answered %ld: %.200s", st, message_of(a));
        json_array_extend(all, a);
        if (!*next) {
            *ret_list = PL_TAKE_PTR(all);
            return 0;
        }
        snprintf(token, sizeof(token), "%s", next);
    }
    return pl_error_set(err, PL_REASON_INTERNAL, "E2B: more than %d pages of sandboxes",
                        EB_MAX_PAGES);
}

int eb_pause(struct e2b_state *s, const char *id, struct pl_error *err) {
    return on_sandbox(s, "POST", id, "/pause", "pausing", 204, 409, err); /* 409: paused */
}

int eb_connect(struct e2b_state *s, struct eb_sandbox *sb, unsigned timeout_s,
               struct pl_error *err) {
    char path[128];
    snprintf(path, sizeof(path), "/sandboxes/%s/connect", sb->id);
    /* Always an explicit timeout: without one a connect resets the TTL. */
    json_t *body = json_pack("{s:i}", "timeout", (int)timeout_s);
    long st = 0;
    json_t *a = NULL;
    int rc = body ? call(s, "POST", path, body, NULL, &st, &a, NULL, 0, err)
                  : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    json_decref(body);
    if (rc < 0)
        return pl_error_wrap(err, "resuming sandbox %s: ", sb->id);
    if (st != 200 && st != 201) {
        rc = pl_error_set(err, st == 404 ? PL_REASON_SESSION_ENDED : PL_REASON_INTERNAL,
                          "E2B: resuming sandbox %s answered %ld: %.200s", sb->id, st,
                          message_of(a));
        json_decref(a);
        return rc;
    }
    /* The answer's sandboxID is the one to keep (a resume may change it),
     * and it must carry both access tokens again. */
    struct eb_sandbox now;
    memset(&now, 0, sizeof(now));
    rc = read_sandbox(s, a, &now, err);
    json_decref(a);
    if (rc < 0) {
        struct pl_error ignored = {0};
        (void)eb_delete(s, now.id[0] ? now.id : sb->id, &ignored);
        return pl_error_wrap(err, "resuming sandbox %s: ", sb->id);
    }
    *sb = now;
    return 0;
}
