/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_api.c: the API layer's refusal order, admission, dispatch and run
 * records, driven through pl_api_handle.
 *
 * The daemon's only real provider in this build is Disabled, which refuses
 * before any later check can be reached.  To exercise the checks after it,
 * this file defines a test double ("probe") whose tier, capabilities,
 * readiness and run behaviour each test sets.  It lives only in this test;
 * tests/api/ drives the real daemon over HTTP.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/canon.h"
#include "../../src/core/record.h"
#include "../../src/server/api.h"

static struct {
    bool ready;
    int run_rc;
    int exit_code;
    const char *out;
    size_t out_len;
    bool block;
    sem_t entered, release;
    int runs;
} probe;

static void probe_info(void *s, struct pl_provider_info *ret) {
    (void)s;
    *ret = (struct pl_provider_info){
        .tier = PL_TIER_PROCESS,
        .runtime = "probe",
        .min_memory_mb = 8,
        .snippet = {.supported = true,
                    .engine = "probe 1",
                    .max_timeout_ms = 5000,
                    .languages = {"javascript", NULL}},
    };
}

static int probe_ready(void *s, struct pl_error *err) {
    (void)s;
    return probe.ready ? 0 : pl_error_set(err, PL_REASON_NOT_READY, "probe not ready");
}

static int probe_run(void *s, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                     struct pl_run_result *ret, struct pl_error *err) {
    (void)s;
    (void)req;
    __atomic_add_fetch(&probe.runs, 1, __ATOMIC_SEQ_CST);
    if (probe.block) {
        sem_post(&probe.entered);
        sem_wait(&probe.release);
    }
    if (probe.run_rc < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "probe infrastructure failed");
    ret->exit_code = probe.exit_code;
    ret->out = malloc(probe.out_len + 1);
    memcpy(ret->out, probe.out, probe.out_len);
    ret->out_len = probe.out_len;
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "probe-%.12s", ctx->run_id);
    ret->outcome = PL_OUTCOME_COMPLETED;
    return 0;
}

static const struct pl_provider_ops probe_ops = {
    .name = "probe",
    .max_tier = PL_TIER_PROCESS,
    .memory_budget_applies = true,
    .info = probe_info,
    .ready = probe_ready,
    .run = probe_run,
};

#define KEY "test-key"

struct fixture {
    struct pl_config config;
    struct pl_keys *keys;
    struct pl_provider provider;
    struct pl_admission *admission;
    struct pl_api api;
};

static struct fixture *fixture_new(unsigned capacity, unsigned burst) {
    struct fixture *f = calloc(1, sizeof(*f));
    f->config.max_timeout_ms = 60000;
    f->config.default_timeout_ms = 1000;
    f->config.memory_mb = 256;
    f->config.output_bytes = 1024;
    f->config.max_request_bytes = 1 << 20;
    f->config.request_bytes_in_flight = 4u << 20;
    f->config.key_request_bytes_in_flight = 4u << 20;
    f->config.max_concurrent = capacity;
    f->config.per_key_concurrent = capacity;
    f->config.rate_per_min = 60;
    f->config.rate_burst = burst;
    char hex[65], line[128];
    pl_sha256_hex(KEY, strlen(KEY), hex);
    snprintf(line, sizeof(line), "tester %s\n", hex);
    struct pl_error err;
    assert_int_equal(pl_keys_parse(line, strlen(line), &f->keys, &err), 0);
    f->provider.ops = &probe_ops;
    probe_info(NULL, &f->provider.info);
    struct pl_admission_limits l = {capacity, capacity, 60, burst};
    assert_int_equal(pl_admission_new(&l, NULL, NULL, &f->admission), 0);
    f->api = (struct pl_api){.config = &f->config,
                             .keys = f->keys,
                             .provider = &f->provider,
                             .admission = f->admission,
                             .metrics = pl_metrics_new(),
                             .effective_concurrency = capacity};
    probe.ready = true;
    probe.run_rc = 0;
    probe.exit_code = 0;
    probe.out = "hi\n";
    probe.out_len = 3;
    probe.block = false;
    probe.runs = 0;
    sem_init(&probe.entered, 0, 0);
    sem_init(&probe.release, 0, 0);
    return f;
}

static void fixture_free(struct fixture *f) {
    pl_keys_free(f->keys);
    pl_admission_free(f->admission);
    pl_metrics_free(f->api.metrics);
    free(f);
}

static json_t *call(struct fixture *f, const char *method, const char *body, int *ret_status) {
    char path[128];
    snprintf(path, sizeof(path), "/plimsoll.v1.SandboxService/%s", method);
    struct pl_api_request rq = {.http_method = "POST",
                                .path = path,
                                .content_type = "application/json",
                                .authorization = "Bearer " KEY,
                                .body = body,
                                .body_len = strlen(body)};
    struct pl_api_response rs;
    pl_api_handle(&f->api, &rq, &rs);
    *ret_status = rs.status;
    json_t *j = json_loadb(rs.body, rs.body_len, JSON_ALLOW_NUL, NULL);
    pl_api_response_clear(&rs);
    assert_non_null(j);
    return j;
}

static void assert_refusal(json_t *j, int status, int want_status, const char *code,
                           const char *reason, const char *dispatched) {
    assert_int_equal(status, want_status);
    assert_string_equal(json_string_value(json_object_get(j, "code")), code);
    json_t *d = json_array_get(json_object_get(j, "details"), 0);
    assert_string_equal(json_string_value(json_object_get(d, "type")), "google.rpc.ErrorInfo");
    json_t *dbg = json_object_get(d, "debug");
    assert_string_equal(json_string_value(json_object_get(dbg, "reason")), reason);
    assert_string_equal(json_string_value(json_object_get(dbg, "domain")), "plimsoll");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(dbg, "metadata"), "dispatched")),
        dispatched);
    /* The binary value says the same as the debug copy. */
    const char *keys[] = {"dispatched", "isolation"};
    const char *vals[] = {dispatched, "process"};
    unsigned char *pb;
    size_t n;
    assert_int_equal(pl_error_info_encode(reason, "plimsoll", keys, vals, 2, &pb, &n), 0);
    char *b64 = pl_base64_encode(pb, n, 0);
    assert_string_equal(json_string_value(json_object_get(d, "value")), b64);
    free(b64);
    free(pb);
}

#define JS(code) "{\"snippet\":{\"language\":\"javascript\",\"code\":\"" code "\"}"

static void test_refusal_order(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 100);
    int st;
    json_t *j;
    /* An invalid request beats every later check, even a floor. */
    j = call(f, "Run", "{\"minimum_isolation\":\"vm\"}", &st);
    assert_refusal(j, st, 400, "invalid_argument", "INVALID_REQUEST", "false");
    json_decref(j);
    /* A floor above the mark. */
    j = call(f, "Run", JS("1") ",\"minimum_isolation\":\"container\"}", &st);
    assert_refusal(j, st, 400, "failed_precondition", "INSUFFICIENT_ISOLATION", "false");
    json_decref(j);
    /* The floor is met at the mark itself. */
    j = call(f, "Run", JS("1") ",\"minimum_isolation\":\"process\"}", &st);
    assert_int_equal(st, 200);
    json_decref(j);
    /* Floor beats UNSUPPORTED: nothing about the payload is looked at. */
    j = call(f, "Run",
             "{\"minimum_isolation\":\"kernel\",\"snippet\":{\"language\":\"python\","
             "\"code\":\"1\"}}",
             &st);
    assert_refusal(j, st, 400, "failed_precondition", "INSUFFICIENT_ISOLATION", "false");
    json_decref(j);
    j = call(f, "Run", "{\"snippet\":{\"language\":\"python\",\"code\":\"1\"}}", &st);
    assert_refusal(j, st, 501, "unimplemented", "UNSUPPORTED", "false");
    json_decref(j);
    j = call(f, "Run", "{\"project\":{\"steps\":[{\"argv\":[\"true\"]}]}}", &st);
    assert_refusal(j, st, 501, "unimplemented", "UNSUPPORTED", "false");
    json_decref(j);
    /* Longer than this payload kind allows. */
    j = call(f, "Run", JS("1") ",\"timeout_ms\":5001}", &st);
    assert_refusal(j, st, 400, "invalid_argument", "INVALID_REQUEST", "false");
    json_decref(j);
    j = call(f, "Run", JS("1") ",\"grant_profile\":\"github\"}", &st);
    assert_refusal(j, st, 400, "invalid_argument", "INVALID_REQUEST", "false");
    json_decref(j);
    probe.ready = false;
    j = call(f, "Run", JS("1") "}", &st);
    assert_refusal(j, st, 503, "unavailable", "NOT_READY", "false");
    json_decref(j);
    assert_int_equal(probe.runs, 1); /* only the one that was admitted ran */
    fixture_free(f);
}

struct bg {
    struct fixture *f;
    int status;
};

static void *bg_call(void *arg) {
    struct bg *b = arg;
    json_t *j = call(b->f, "Run", JS("1") "}", &b->status);
    json_decref(j);
    return NULL;
}

static void test_at_capacity(void **state) {
    (void)state;
    struct fixture *f = fixture_new(2, 100);
    probe.block = true;
    pthread_t t[2];
    struct bg b[2] = {{f, 0}, {f, 0}};
    for (int i = 0; i < 2; i++) {
        pthread_create(&t[i], NULL, bg_call, &b[i]);
        sem_wait(&probe.entered);
    }
    int st;
    json_t *j = call(f, "Run", JS("1") "}", &st);
    assert_refusal(j, st, 429, "resource_exhausted", "AT_CAPACITY", "false");
    json_decref(j);
    assert_int_equal(pl_admission_in_flight(f->admission), 2);
    for (int i = 0; i < 2; i++)
        sem_post(&probe.release);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(b[i].status, 200);
    }
    assert_int_equal(pl_admission_in_flight(f->admission), 0);
    assert_int_equal(probe.runs, 2);
    fixture_free(f);
}

static void test_rate_limited(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 2);
    int st;
    for (int i = 0; i < 2; i++) {
        json_t *j = call(f, "Run", JS("1") "}", &st);
        assert_int_equal(st, 200);
        json_decref(j);
    }
    json_t *j = call(f, "Run", JS("1") "}", &st);
    assert_refusal(j, st, 429, "resource_exhausted", "RATE_LIMITED", "false");
    json_decref(j);
    fixture_free(f);
}

static void test_internal_is_not_a_result(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 100);
    probe.run_rc = -1;
    int st;
    json_t *j = call(f, "Run", JS("1") "}", &st);
    assert_refusal(j, st, 500, "internal", "INTERNAL", "true");
    assert_null(json_object_get(j, "stderr"));
    json_decref(j);
    assert_int_equal(pl_admission_in_flight(f->admission), 0);
    fixture_free(f);
}

static void test_result_and_record(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 100);
    probe.exit_code = 3;
    const char *body = JS("process.exit(3)") ",\"timeoutMs\":900}";
    int st;
    json_t *j = call(f, "Run", body, &st);
    assert_int_equal(st, 200); /* a non-zero exit is a result */
    assert_int_equal(json_integer_value(json_object_get(j, "exit_code")), 3);
    assert_string_equal(json_string_value(json_object_get(j, "stdout")), "hi\n");
    assert_string_equal(json_string_value(json_object_get(j, "isolation")), "process");
    assert_string_equal(json_string_value(json_object_get(j, "outcome")), "completed");
    json_t *rec = json_incref(json_object_get(j, "record"));
    assert_non_null(rec);
    assert_int_equal(pl_record_verify(rec), 0);
    /* The request digest is over the normalized request (camelCase mapped). */
    json_t *want_req = json_pack("{s:{s:s, s:s}, s:i}", "snippet", "language", "javascript", "code",
                                 "process.exit(3)", "timeout_ms", 900);
    char rq[65], rs[65];
    pl_canon_sha256(want_req, rq);
    assert_string_equal(json_string_value(json_object_get(rec, "request_sha256")), rq);
    json_object_del(j, "record");
    pl_canon_sha256(j, rs);
    assert_string_equal(json_string_value(json_object_get(rec, "response_sha256")), rs);
    assert_string_equal(json_string_value(json_object_get(rec, "provider")), "probe");
    assert_string_equal(json_string_value(json_object_get(rec, "runtime")), "probe");
    assert_true(strcmp(json_string_value(json_object_get(rec, "ended_at")),
                       json_string_value(json_object_get(rec, "started_at"))) >= 0);
    json_decref(want_req);
    json_decref(rec);
    json_decref(j);
    fixture_free(f);
}

static void test_binary_output_kept_exactly(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 100);
    probe.out = "a\xff\x00z";
    probe.out_len = 4;
    int st;
    json_t *j = call(f, "Run", JS("1") "}", &st);
    assert_int_equal(st, 200);
    const char *lossy = json_string_value(json_object_get(j, "stdout"));
    assert_memory_equal(lossy, "a\xef\xbf\xbd", 4);
    assert_string_equal(json_string_value(json_object_get(j, "stdout_base64")), "Yf8Aeg==");
    json_decref(j);
    fixture_free(f);
}

static void test_draining(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 100);
    atomic_store(&f->api.draining, true);
    int st;
    json_t *j = call(f, "Run", JS("1") "}", &st);
    assert_refusal(j, st, 503, "unavailable", "SHUTTING_DOWN", "false");
    json_decref(j);
    fixture_free(f);
}

static void test_describe_reports_limits(void **state) {
    (void)state;
    struct fixture *f = fixture_new(3, 100);
    int st;
    json_t *j = call(f, "Describe", "{}", &st);
    assert_int_equal(st, 200);
    assert_string_equal(json_string_value(json_object_get(j, "isolation")), "process");
    json_t *sn = json_object_get(json_object_get(j, "operations"), "snippet");
    assert_true(json_is_true(json_object_get(sn, "supported")));
    assert_string_equal(json_string_value(json_object_get(sn, "engine")), "probe 1");
    assert_int_equal(json_integer_value(json_object_get(sn, "max_timeout_ms")), 5000);
    json_t *lim = json_object_get(j, "limits");
    assert_int_equal(json_integer_value(json_object_get(lim, "effective_concurrency")), 3);
    json_decref(j);
    j = call(f, "Describe", "{\"x\":1}", &st);
    assert_refusal(j, st, 400, "invalid_argument", "INVALID_REQUEST", "false");
    json_decref(j);
    fixture_free(f);
}

/* The head phase, as the server calls it: no body at hand yet. */
static bool head(struct fixture *f, const char *method, const char *path, const char *ctype,
                 const char *auth, bool length_known, uint64_t length, struct pl_api_call **call,
                 struct pl_api_response *rs) {
    struct pl_api_request rq = {.http_method = method,
                                .path = path,
                                .content_type = ctype,
                                .authorization = auth,
                                .length_known = length_known,
                                .content_length = length};
    return pl_api_begin(&f->api, &rq, call, rs);
}

static json_t *answer(struct pl_api_response *rs, int *ret_status) {
    *ret_status = rs->status;
    json_t *j = json_loadb(rs->body, rs->body_len, 0, NULL);
    pl_api_response_clear(rs);
    assert_non_null(j);
    return j;
}

#define RUN_PATH "/plimsoll.v1.SandboxService/Run"

static void test_head_decides_before_the_body(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 100);
    struct pl_api_call *call;
    struct pl_api_response rs;
    /* Each refusal the head can make, in the documented order, with a body
     * of the largest size announced: none of it is needed. */
    assert_true(head(f, "POST", "/nope", "application/json", NULL, true, 1 << 20, &call, &rs));
    assert_null(call);
    assert_int_equal(rs.status, 404);
    pl_api_response_clear(&rs);
    assert_true(head(f, "GET", RUN_PATH, "application/json", NULL, true, 1 << 20, &call, &rs));
    assert_int_equal(rs.status, 405);
    pl_api_response_clear(&rs);
    assert_true(head(f, "POST", RUN_PATH, "text/plain", NULL, true, 1 << 20, &call, &rs));
    assert_int_equal(rs.status, 415);
    pl_api_response_clear(&rs);
    assert_true(
        head(f, "POST", RUN_PATH, "application/json", "Bearer nope", true, 1 << 20, &call, &rs));
    int st;
    json_t *j = answer(&rs, &st);
    assert_refusal(j, st, 401, "unauthenticated", "UNAUTHENTICATED", "false");
    json_decref(j);
    /* Past PLIMSOLL_MAX_REQUEST_BYTES by one byte: refused from the head. */
    assert_true(head(f, "POST", RUN_PATH, "application/json", "Bearer " KEY, true, (1 << 20) + 1,
                     &call, &rs));
    j = answer(&rs, &st);
    assert_refusal(j, st, 400, "invalid_argument", "INVALID_REQUEST", "false");
    assert_non_null(strstr(json_string_value(json_object_get(j, "message")),
                           "PLIMSOLL_MAX_REQUEST_BYTES (1048576 bytes)"));
    json_decref(j);
    /* At the limit the call goes on to its body, which it holds. */
    assert_false(
        head(f, "POST", RUN_PATH, "application/json", "Bearer " KEY, true, 1 << 20, &call, &rs));
    assert_non_null(call);
    assert_int_equal(atomic_load(&f->api.body_bytes), 1 << 20);
    pl_api_call_free(&f->api, call);
    assert_int_equal(atomic_load(&f->api.body_bytes), 0);
    assert_int_equal(probe.runs, 0);
    fixture_free(f);
}

static void test_bytes_in_flight(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 100);
    f->config.request_bytes_in_flight = 3u << 20; /* three bodies of the largest size */
    f->config.key_request_bytes_in_flight = 3u << 20;
    struct pl_api_call *held[3];
    struct pl_api_response rs;
    for (int i = 0; i < 3; i++)
        assert_false(head(f, "POST", RUN_PATH, "application/json", "Bearer " KEY, true, 1 << 20,
                          &held[i], &rs));
    /* The budget is spent: one more byte is refused, typed, nothing read. */
    struct pl_api_call *call;
    assert_true(head(f, "POST", RUN_PATH, "application/json", "Bearer " KEY, true, 1, &call, &rs));
    int st;
    json_t *j = answer(&rs, &st);
    assert_refusal(j, st, 429, "resource_exhausted", "AT_CAPACITY", "false");
    assert_non_null(strstr(json_string_value(json_object_get(j, "message")),
                           "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT"));
    json_decref(j);
    /* A body with no length (chunked) holds the largest size. */
    pl_api_call_free(&f->api, held[0]);
    assert_false(
        head(f, "POST", RUN_PATH, "application/json", "Bearer " KEY, false, 0, &held[0], &rs));
    assert_int_equal(atomic_load(&f->api.body_bytes), 3u << 20);
    /* An empty body holds nothing and always passes. */
    assert_false(head(f, "POST", "/plimsoll.v1.SandboxService/Describe", "application/json",
                      "Bearer " KEY, true, 0, &call, &rs));
    struct pl_api_request rq = {.http_method = "POST",
                                .path = "/plimsoll.v1.SandboxService/Describe",
                                .body = "",
                                .body_len = 0};
    pl_api_finish(&f->api, call, &rq, &rs);
    assert_int_equal(rs.status, 200);
    pl_api_response_clear(&rs);
    pl_api_call_free(&f->api, call);
    for (int i = 0; i < 3; i++)
        pl_api_call_free(&f->api, held[i]);
    assert_int_equal(atomic_load(&f->api.body_bytes), 0);
    fixture_free(f);
}

/* One caller's share: its own bodies stop at it, another caller's pass. */
static void test_bytes_in_flight_per_key(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 100);
    char hex[65], lines[256];
    pl_sha256_hex("other-key", strlen("other-key"), hex);
    pl_keys_free(f->keys);
    char tester[65];
    pl_sha256_hex(KEY, strlen(KEY), tester);
    snprintf(lines, sizeof(lines), "tester %s\nother %s\n", tester, hex);
    struct pl_error err;
    assert_int_equal(pl_keys_parse(lines, strlen(lines), &f->keys, &err), 0);
    f->api.keys = f->keys;
    f->config.request_bytes_in_flight = 3u << 20;
    f->config.key_request_bytes_in_flight = 2u << 20;
    struct pl_api_call *mine[2], *call;
    struct pl_api_response rs;
    int st;
    for (int i = 0; i < 2; i++)
        assert_false(head(f, "POST", RUN_PATH, "application/json", "Bearer " KEY, true, 1 << 20,
                          &mine[i], &rs));
    assert_true(head(f, "POST", RUN_PATH, "application/json", "Bearer " KEY, true, 1, &call, &rs));
    json_t *j = answer(&rs, &st);
    assert_refusal(j, st, 429, "resource_exhausted", "AT_CAPACITY", "false");
    assert_non_null(strstr(json_string_value(json_object_get(j, "message")),
                           "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT (2097152 bytes)"));
    json_decref(j);
    /* Another caller still has the rest of the daemon's bytes. */
    assert_false(head(f, "POST", RUN_PATH, "application/json", "Bearer other-key", true, 1 << 20,
                      &call, &rs));
    pl_api_call_free(&f->api, call);
    pl_api_call_free(&f->api, mine[0]);
    assert_false(
        head(f, "POST", RUN_PATH, "application/json", "Bearer " KEY, true, 1 << 20, &mine[0], &rs));
    for (int i = 0; i < 2; i++)
        pl_api_call_free(&f->api, mine[i]);
    assert_int_equal(atomic_load(&f->api.body_bytes), 0);
    assert_null(f->api.key_bytes);
    fixture_free(f);
}

static void test_memory_below_the_provider_minimum(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 100);
    int st;
    json_t *j = call(f, "Run", JS("1") ",\"memory_mb\":7}", &st);
    assert_refusal(j, st, 400, "invalid_argument", "INVALID_REQUEST", "false");
    assert_non_null(strstr(json_string_value(json_object_get(j, "message")), "below 8"));
    json_decref(j);
    assert_int_equal(probe.runs, 0);
    j = call(f, "Run", JS("1") ",\"memory_mb\":8}", &st);
    assert_int_equal(st, 200);
    json_decref(j);
    j = call(f, "Describe", "{}", &st);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "limits"), "min_memory_mb")), 8);
    json_decref(j);
    fixture_free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusal_order),
        cmocka_unit_test(test_at_capacity),
        cmocka_unit_test(test_rate_limited),
        cmocka_unit_test(test_internal_is_not_a_result),
        cmocka_unit_test(test_result_and_record),
        cmocka_unit_test(test_binary_output_kept_exactly),
        cmocka_unit_test(test_draining),
        cmocka_unit_test(test_describe_reports_limits),
        cmocka_unit_test(test_head_decides_before_the_body),
        cmocka_unit_test(test_bytes_in_flight),
        cmocka_unit_test(test_bytes_in_flight_per_key),
        cmocka_unit_test(test_memory_below_the_provider_minimum),
    };
    return cmocka_run_group_tests_name("api", tests, NULL, NULL);
}
