/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_client.c: libplimsoll against the shared vectors and real daemons.
 *
 * Run under tests/clients/harness.py, which starts the daemons and names
 * them in PLIMSOLL_TEST_* (docs/clients.md); without PLIMSOLL_TEST_URL
 * every daemon test fails rather than skips.  The session tests print a
 * skip when the harness had no docker engine.  The live-output tests
 * (test_stream_*) run most of their cases against a scripted server of
 * their own, in a thread: bytes no daemon would send, cut where a test
 * wants them cut.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "plimsoll.h"

#ifndef PL_EXAMPLE
#error "PL_EXAMPLE must name the built clients/c/example.c"
#endif
#ifndef PL_SOURCE_ROOT
#error "PL_SOURCE_ROOT must name the source tree"
#endif

static const char *env(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v)
        fail_msg("%s is unset: run under tests/clients/harness.py", name);
    return v;
}

static plimsoll_client *client_at(const char *url_var, const char *key_var,
                                  struct plimsoll_retry retry) {
    struct plimsoll_error err;
    plimsoll_client *c = plimsoll_client_new(
        &(struct plimsoll_options){.url = env(url_var), .api_key = env(key_var), .retry = retry},
        &err);
    assert_non_null(c);
    return c;
}

static plimsoll_client *client(const char *url_var) {
    return client_at(url_var, "PLIMSOLL_TEST_KEY", (struct plimsoll_retry){0});
}

static json_t *vectors(const char *name) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/vectors/%s", PL_SOURCE_ROOT, name);
    json_error_t je;
    json_t *v = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!v)
        fail_msg("%s: %s", path, je.text);
    return v;
}

/* ---- vectors -------------------------------------------------------------- */

static void test_canonical_vectors(void **state) {
    (void)state;
    json_t *vs = vectors("canonical.json");
    size_t i;
    json_t *v;
    assert_true(json_array_size(vs) > 0);
    json_array_foreach(vs, i, v) {
        char *got = plimsoll_canonical(json_object_get(v, "input"));
        assert_non_null(got);
        assert_string_equal(got, json_string_value(json_object_get(v, "canonical")));
        free(got);
        char hex[65];
        assert_int_equal(plimsoll_canonical_sha256(json_object_get(v, "input"), hex), 0);
        assert_string_equal(hex, json_string_value(json_object_get(v, "sha256")));
    }
    json_t *real = json_real(0.5);
    assert_null(plimsoll_canonical(real));
    json_decref(real);
    json_decref(vs);
}

static void test_record_vectors(void **state) {
    (void)state;
    json_t *vs = vectors("records.json");
    size_t i, bad = 0;
    json_t *v;
    json_array_foreach(vs, i, v) {
        struct plimsoll_error err;
        int r = plimsoll_check_record(json_object_get(v, "request"), json_object_get(v, "response"),
                                      json_object_get(v, "record"), NULL, &err);
        if (json_is_true(json_object_get(v, "valid"))) {
            assert_int_equal(r, 0);
        } else {
            assert_int_equal(r, -1);
            assert_int_equal(err.kind, PLIMSOLL_E_CHAIN);
            bad++;
        }
    }
    assert_true(bad > 0);
    json_decref(vs);
}

static void test_chain_vectors(void **state) {
    (void)state;
    json_t *vs = vectors("chains.json");
    size_t i, broken = 0;
    json_t *v;
    json_array_foreach(vs, i, v) {
        const char *name = json_string_value(json_object_get(v, "name"));
        json_t *entries = json_object_get(v, "entries");
        struct plimsoll_error err;
        int r = plimsoll_verify_chain(entries, NULL, &err);
        /* The keeper reaches the same verdict one entry at a time. */
        plimsoll_chain *ch = plimsoll_chain_new("");
        long kept_until = -1;
        size_t k;
        json_t *e;
        json_array_foreach(entries, k, e) {
            json_t *resp = json_deep_copy(json_object_get(e, "response"));
            json_object_set(resp, "record", json_object_get(e, "record"));
            struct plimsoll_error e2;
            int ar = plimsoll_chain_append(ch, json_object_get(e, "request"), resp, &e2);
            json_decref(resp);
            if (ar < 0) {
                kept_until = (long)k;
                assert_string_equal(e2.broken, err.broken);
                break;
            }
        }
        if (json_is_true(json_object_get(v, "valid"))) {
            if (r != 0)
                fail_msg("%s: %s", name, err.message);
            assert_int_equal(kept_until, -1);
            assert_int_equal(plimsoll_chain_len(ch), json_array_size(entries));
            json_t *last = json_array_get(entries, json_array_size(entries) - 1);
            assert_string_equal(
                plimsoll_chain_head(ch),
                json_string_value(json_object_get(json_object_get(last, "record"), "digest")));
        } else {
            broken++;
            assert_int_equal(r, -1);
            assert_int_equal(err.kind, PLIMSOLL_E_CHAIN);
            assert_int_equal(err.index, json_integer_value(json_object_get(v, "fails_at")));
            if (strcmp(err.broken, json_string_value(json_object_get(v, "broken"))) != 0)
                fail_msg("%s: broke at %s", name, err.broken);
            assert_int_equal(kept_until, err.index);
            assert_int_equal(plimsoll_chain_len(ch), (size_t)err.index);
        }
        plimsoll_chain_free(ch);
    }
    assert_true(broken >= 4);
    json_decref(vs);
}

/* ---- results and refusals ------------------------------------------------- */

static void test_describe(void **state) {
    (void)state;
    plimsoll_client *c = client("PLIMSOLL_TEST_URL");
    json_t *d = NULL;
    struct plimsoll_error err;
    assert_int_equal(plimsoll_describe(c, &d, &err), 0);
    assert_string_equal(json_string_value(json_object_get(d, "provider")), "wasm");
    assert_string_equal(json_string_value(json_object_get(d, "isolation")), "process");
    json_decref(d);
    plimsoll_client_free(c);
}

static void test_snippet_runs_and_record_checks(void **state) {
    (void)state;
    plimsoll_client *c = client("PLIMSOLL_TEST_URL");
    json_t *r = NULL;
    struct plimsoll_error err;
    struct plimsoll_run_options ro = {.minimum_isolation = "process", .timeout_ms = 5000};
    assert_int_equal(plimsoll_run_snippet(c, "javascript", "console.log(6*7)", &ro, &r, &err), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "exit_code")), 0);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "42\n");
    json_t *rec = json_object_get(r, "record");
    assert_string_equal(json_string_value(json_object_get(rec, "previous_digest")), "");
    json_decref(r);
    plimsoll_client_free(c);
}

static void test_nonzero_exit_is_a_result(void **state) {
    (void)state;
    plimsoll_client *c = client("PLIMSOLL_TEST_URL");
    json_t *r = NULL;
    struct plimsoll_error err;
    assert_int_equal(plimsoll_run_snippet(c, "javascript", "throw new Error('no')", NULL, &r, &err),
                     0);
    assert_int_not_equal(json_integer_value(json_object_get(r, "exit_code")), 0);
    assert_non_null(strstr(json_string_value(json_object_get(r, "stderr")), "no"));
    json_decref(r);
    plimsoll_client_free(c);
}

static void test_module_runs(void **state) {
    (void)state;
    FILE *f = fopen(env("PLIMSOLL_TEST_WASM_MODULE"), "rb");
    assert_non_null(f);
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    assert_true(n > 8);
    plimsoll_client *c = client("PLIMSOLL_TEST_URL");
    json_t *r = NULL;
    struct plimsoll_error err;
    assert_int_equal(plimsoll_run_module(c, buf, n, NULL, 0, NULL, &r, &err), 0);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "hello, world\n");
    json_decref(r);
    plimsoll_client_free(c);
}

static void refused_as(plimsoll_client *c, const char *code, size_t code_len, const char *floor,
                       enum plimsoll_errkind want, const char *reason) {
    json_t *r = NULL;
    struct plimsoll_error err;
    json_t *req =
        json_pack("{s:{s:s, s:s%}}", "snippet", "language", "javascript", "code", code, code_len);
    if (floor)
        json_object_set_new(req, "minimum_isolation", json_string(floor));
    assert_int_equal(plimsoll_run(c, req, &r, &err), -1);
    json_decref(req);
    assert_null(r);
    if (err.kind != want)
        fail_msg("%s: %s", plimsoll_errkind_name(err.kind), err.message);
    assert_string_equal(err.reason, reason);
    assert_false(err.dispatched);
}

static void test_typed_refusals(void **state) {
    (void)state;
    plimsoll_client *c = client("PLIMSOLL_TEST_URL");
    refused_as(c, "1", 1, "vm", PLIMSOLL_E_INSUFFICIENT_ISOLATION, "INSUFFICIENT_ISOLATION");
    size_t big = 262145;
    char *code = malloc(big);
    memset(code, 'x', big);
    refused_as(c, code, big, NULL, PLIMSOLL_E_INVALID_REQUEST, "INVALID_REQUEST");
    refused_as(c, code, 262144 - 1, "sideways", PLIMSOLL_E_INVALID_REQUEST, "INVALID_REQUEST");
    free(code);
    char id[65];
    struct plimsoll_error err;
    assert_int_equal(plimsoll_open_session(c, NULL, id, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_UNSUPPORTED);
    assert_false(err.dispatched);
    plimsoll_client_free(c);

    /* The floor refusal names the daemon's tier. */
    c = client("PLIMSOLL_TEST_URL");
    json_t *r = NULL;
    struct plimsoll_run_options ro = {.minimum_isolation = "kernel"};
    assert_int_equal(plimsoll_run_snippet(c, "javascript", "1", &ro, &r, &err), -1);
    assert_string_equal(err.isolation, "process");
    assert_string_equal(err.code, "failed_precondition");
    assert_int_equal(err.http_status, 400);
    plimsoll_client_free(c);

    struct plimsoll_error e2;
    plimsoll_client *bad = plimsoll_client_new(
        &(struct plimsoll_options){.url = env("PLIMSOLL_TEST_URL"), .api_key = "plk_wrong"}, &e2);
    refused_as(bad, "1", 1, NULL, PLIMSOLL_E_UNAUTHENTICATED, "UNAUTHENTICATED");
    plimsoll_client_free(bad);

    c = client("PLIMSOLL_TEST_DISABLED_URL");
    refused_as(c, "1", 1, NULL, PLIMSOLL_E_DISABLED, "DISABLED");
    plimsoll_client_free(c);
}

static void test_unreachable_is_infrastructure(void **state) {
    (void)state;
    plimsoll_client *c = client("PLIMSOLL_TEST_DEAD_URL");
    json_t *r = NULL;
    struct plimsoll_error err;
    assert_int_equal(plimsoll_run_snippet(c, "javascript", "1", NULL, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_INFRASTRUCTURE);
    assert_true(err.dispatched);
    plimsoll_client_free(c);
}

static size_t keep(char *p, size_t size, size_t n, void *ud) {
    char *out = ud;
    size_t have = strlen(out), add = size * n;
    if (have + add >= 128)
        return 0;
    memcpy(out + have, p, add);
    return add;
}

/* How many requests the harness's lowering proxy forwarded. */
static long proxy_count(void) {
    char url[512], out[128] = {0};
    snprintf(url, sizeof(url), "%s/__proxy/count", env("PLIMSOLL_TEST_LOWERING_URL"));
    CURL *h = curl_easy_init();
    assert_non_null(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    assert_int_equal(curl_easy_perform(h), CURLE_OK);
    curl_easy_cleanup(h);
    json_t *j = json_loads(out, 0, NULL);
    assert_non_null(j);
    long v = (long)json_integer_value(json_object_get(j, "count"));
    json_decref(j);
    return v;
}

static void test_lowered_isolation_is_a_mismatch_never_retried(void **state) {
    (void)state;
    plimsoll_client *c = client_at("PLIMSOLL_TEST_LOWERING_URL", "PLIMSOLL_TEST_KEY",
                                   (struct plimsoll_retry){.max_attempts = 5, .base_ms = 10});
    long before = proxy_count();
    json_t *r = NULL;
    struct plimsoll_error err;
    struct plimsoll_run_options ro = {.minimum_isolation = "process"};
    assert_int_equal(plimsoll_run_snippet(c, "javascript", "console.log(1)", &ro, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_ISOLATION_EVIDENCE_MISMATCH);
    assert_string_equal(err.code, "data_loss");
    assert_true(err.dispatched);
    assert_int_equal(proxy_count(), before + 1);
    /* Without a floor the same answer is a result whose record does not
     * check: the proxy changed what came back. */
    assert_int_equal(plimsoll_run_snippet(c, "javascript", "console.log(1)", NULL, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_CHAIN);
    assert_string_equal(err.broken, "response_sha256");
    plimsoll_client_free(c);
}

static void test_rate_limited_and_retry(void **state) {
    (void)state;
    plimsoll_client *c = client("PLIMSOLL_TEST_RATE_URL");
    json_t *r = NULL;
    struct plimsoll_error err;
    /* One token a second, a burst of one: the second call at once is shed. */
    plimsoll_run_snippet(c, "javascript", "1", NULL, &r, &err);
    json_decref(r);
    r = NULL;
    assert_int_equal(plimsoll_run_snippet(c, "javascript", "1", NULL, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_RATE_LIMITED);
    assert_false(err.dispatched);
    plimsoll_client_free(c);
    c = client_at("PLIMSOLL_TEST_RATE_URL", "PLIMSOLL_TEST_KEY",
                  (struct plimsoll_retry){.max_attempts = 6, .base_ms = 250, .cap_ms = 2000});
    if (plimsoll_run_snippet(c, "javascript", "console.log('again')", NULL, &r, &err) < 0)
        fail_msg("%s: %s", plimsoll_errkind_name(err.kind), err.message);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "again\n");
    json_decref(r);
    plimsoll_client_free(c);
}

static void *long_run(void *arg) {
    (void)arg;
    /* The probes below may hold the slot for a moment: retry until in. */
    plimsoll_client *c = client_at("PLIMSOLL_TEST_CAPACITY_URL", "PLIMSOLL_TEST_KEY",
                                   (struct plimsoll_retry){.max_attempts = 20, .base_ms = 20});
    json_t *r = NULL;
    struct plimsoll_error err;
    struct plimsoll_run_options ro = {.timeout_ms = 2500};
    plimsoll_run_snippet(c, "javascript", "for(;;){}", &ro, &r, &err);
    json_decref(r);
    plimsoll_client_free(c);
    return NULL;
}

static void test_at_capacity_and_retry(void **state) {
    (void)state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, long_run, NULL), 0);
    plimsoll_client *c = client("PLIMSOLL_TEST_CAPACITY_URL");
    json_t *r = NULL;
    struct plimsoll_error err = {0};
    /* Wait until the long run holds the only slot. */
    int got = 0;
    for (int i = 0; i < 400 && !got; i++) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
        json_t *d = NULL;
        if (plimsoll_run_snippet(c, "javascript", "1", NULL, &d, &err) < 0)
            got = err.kind == PLIMSOLL_E_AT_CAPACITY;
        json_decref(d);
    }
    assert_true(got);
    assert_false(err.dispatched);
    plimsoll_client_free(c);
    c = client_at("PLIMSOLL_TEST_CAPACITY_URL", "PLIMSOLL_TEST_KEY_B",
                  (struct plimsoll_retry){.max_attempts = 8, .base_ms = 250, .cap_ms = 2000});
    if (plimsoll_run_snippet(c, "javascript", "console.log('in')", NULL, &r, &err) < 0)
        fail_msg("%s: %s", plimsoll_errkind_name(err.kind), err.message);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "in\n");
    json_decref(r);
    plimsoll_client_free(c);
    pthread_join(t, NULL);
}

/* ---- sessions ------------------------------------------------------------- */

static bool have_sessions(void) {
    const char *u = getenv("PLIMSOLL_TEST_SESSION_URL");
    if (u && *u)
        return true;
    print_message("SKIP: no PLIMSOLL_TEST_SESSION_URL (the harness found no docker engine)\n");
    return false;
}

static json_t *py_run(const char *code) {
    return json_pack("{s:{s:s, s:s}}", "snippet", "language", "python", "code", code);
}

static void test_session_chain(void **state) {
    (void)state;
    if (!have_sessions())
        return;
    plimsoll_client *c = client("PLIMSOLL_TEST_SESSION_URL");
    struct plimsoll_error err;
    const char *langs[] = {"python", NULL};
    plimsoll_session *s = plimsoll_session_open(c, langs, "container", &err);
    if (!s)
        fail_msg("open: %s", err.message);
    json_t *r = NULL, *run = py_run("open('a.txt', 'w').write('kept')");
    assert_int_equal(plimsoll_session_run(s, run, &r, &err), 0);
    json_decref(run);
    json_decref(r);
    assert_int_equal(plimsoll_session_cell(s, "python", "x = 41", NULL, 0, &r, &err), 0);
    assert_true(json_is_true(json_object_get(r, "interpreter_started")));
    json_decref(r);
    assert_int_equal(plimsoll_session_cell(s, "python", "x + 1", NULL, 20000, &r, &err), 0);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "42\n");
    json_decref(r);
    json_t *files =
        json_pack("[{s:s, s:s}]", "path", "t.py", "content", "print(open('a.txt').read())");
    json_t *proj = json_pack("{s:{s:o, s:[{s:s, s:[s, s]}]}}", "project", "files", files, "steps",
                             "name", "t", "argv", "python3", "t.py");
    assert_int_equal(plimsoll_session_run(s, proj, &r, &err), 0);
    json_decref(proj);
    json_t *step = json_array_get(json_object_get(r, "steps"), 0);
    assert_string_equal(json_string_value(json_object_get(step, "stdout")), "kept\n");
    const char *digest = json_string_value(json_object_get(json_object_get(r, "record"), "digest"));
    assert_string_equal(plimsoll_chain_head(plimsoll_session_chain(s)), digest);
    json_decref(r);
    assert_int_equal(plimsoll_chain_len(plimsoll_session_chain(s)), 4);
    /* The kept entries verify again from the start, as a harness would. */
    json_t *kept = json_array();
    for (size_t i = 0; i < 4; i++)
        json_array_append(kept, (json_t *)plimsoll_chain_entry(plimsoll_session_chain(s), i));
    assert_int_equal(plimsoll_verify_chain(kept, NULL, &err), 0);
    json_decref(kept);

    /* A raised error in a cell is a result. */
    assert_int_equal(plimsoll_session_cell(s, "python", "1/0", NULL, 0, &r, &err), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "exit_code")), 1);
    json_decref(r);

    /* Another caller's key finds nothing. */
    plimsoll_client *b =
        client_at("PLIMSOLL_TEST_SESSION_URL", "PLIMSOLL_TEST_KEY_B", (struct plimsoll_retry){0});
    run = py_run("1");
    assert_int_equal(plimsoll_run_in_session(b, plimsoll_session_id(s), run, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_NOT_FOUND);
    plimsoll_client_free(b);

    /* A call the session object did not see breaks its chain. */
    assert_int_equal(plimsoll_run_in_session(c, plimsoll_session_id(s), run, &r, &err), 0);
    json_decref(r);
    r = NULL;
    assert_int_equal(plimsoll_session_run(s, run, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_CHAIN);
    assert_string_equal(err.broken, "previous_digest");

    /* Closed, it is ended, with the reason as metadata. */
    assert_int_equal(plimsoll_session_close(s, &err), 0);
    assert_int_equal(plimsoll_session_run(s, run, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_SESSION_ENDED);
    assert_false(err.dispatched);
    assert_string_equal(err.ended_reason, "its owner closed it");
    json_decref(run);
    plimsoll_session_free(s);
    plimsoll_client_free(c);
}

/* ListSessions, GetSession, ExtendSession, and a session taken up again by
 * its id with its chain going on from the daemon's previous_digest. */
static void test_session_management(void **state) {
    (void)state;
    if (!have_sessions())
        return;
    plimsoll_client *c = client("PLIMSOLL_TEST_SESSION_URL");
    struct plimsoll_error err;
    plimsoll_session *s = plimsoll_session_open(c, NULL, NULL, &err);
    if (!s)
        fail_msg("open: %s", err.message);
    json_t *r = NULL;
    assert_int_equal(plimsoll_session_cell(s, "python", "x = 41", NULL, 0, &r, &err), 0);
    json_decref(r);
    const char *id = plimsoll_session_id(s);

    json_t *info = NULL;
    assert_int_equal(plimsoll_session_info(s, &info, &err), 0);
    assert_string_equal(json_string_value(json_object_get(info, "state")), "ready");
    assert_int_equal(json_integer_value(json_object_get(info, "calls")), 1);
    assert_string_equal(json_string_value(json_object_get(info, "previous_digest")),
                        plimsoll_chain_head(plimsoll_session_chain(s)));
    json_decref(info);

    json_t *list = NULL;
    assert_int_equal(plimsoll_list_sessions(c, &list, &err), 0);
    bool listed = false;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(list, "sessions"), i, e) listed |=
        strcmp(json_string_value(json_object_get(e, "session_id")), id) == 0;
    assert_true(listed);
    json_decref(list);

    assert_int_equal(plimsoll_session_extend(s, 300, &info, &err), 0);
    assert_int_equal(json_string_length(json_object_get(info, "lifetime_deadline")), 30);
    json_decref(info);
    assert_int_equal(plimsoll_extend_session(c, id, 0, &info, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
    assert_int_equal(plimsoll_extend_session(c, id, 4000000000u, &info, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_INVALID_REQUEST);
    assert_non_null(strstr(err.message, "SANDBOX_SESSION_MAX_LIFETIME"));
    assert_int_equal(plimsoll_get_session(c, "xyz", &info, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);

    /* Another caller's key: NOT_FOUND, as an unknown id. */
    plimsoll_client *b =
        client_at("PLIMSOLL_TEST_SESSION_URL", "PLIMSOLL_TEST_KEY_B", (struct plimsoll_retry){0});
    assert_int_equal(plimsoll_get_session(b, id, &info, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_NOT_FOUND);
    assert_null(plimsoll_session_connect(b, id, NULL, &err));
    assert_int_equal(err.kind, PLIMSOLL_E_NOT_FOUND);
    plimsoll_client_free(b);

    /* Taken up again: the next call's record names the last one. */
    plimsoll_session *again = plimsoll_session_connect(c, id, "container", &err);
    if (!again)
        fail_msg("connect: %s", err.message);
    assert_string_equal(plimsoll_session_id(again), id);
    assert_int_equal(plimsoll_session_cell(again, "python", "x + 1", NULL, 0, &r, &err), 0);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "42\n");
    json_decref(r);
    assert_int_equal(plimsoll_chain_len(plimsoll_session_chain(again)), 1);
    /* The first handle missed that call: its chain breaks. */
    assert_int_equal(plimsoll_session_cell(s, "python", "x", NULL, 0, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_CHAIN);

    assert_int_equal(plimsoll_session_close(again, &err), 0);
    plimsoll_session *late = plimsoll_session_connect(c, id, NULL, &err);
    assert_null(late);
    assert_int_equal(err.kind, PLIMSOLL_E_SESSION_ENDED);
    assert_string_equal(err.ended_reason, "its owner closed it");
    plimsoll_session_free(again);
    plimsoll_session_free(s);
    plimsoll_client_free(c);
}

/* A session's files: written, read, listed, each record in the session's
 * chain (a floor on the session checks each record's tier). */
static void test_session_files(void **state) {
    (void)state;
    if (!have_sessions())
        return;
    plimsoll_client *c = client("PLIMSOLL_TEST_SESSION_URL");
    struct plimsoll_error err;
    plimsoll_session *s = plimsoll_session_open(c, NULL, "container", &err);
    if (!s)
        fail_msg("open: %s", err.message);
    json_t *files = json_pack("[{s:s, s:s}, {s:s, s:s}]", "path", "d/a.txt", "content", "hello",
                              "path", "d/b", "content_base64", "/wA=");
    json_t *r = NULL;
    if (plimsoll_session_write_files(s, files, &r, &err) < 0)
        fail_msg("write: %s %s", err.reason, err.message);
    json_decref(files);
    assert_int_equal(json_integer_value(json_object_get(r, "files")), 2);
    json_decref(r);
    assert_int_equal(plimsoll_session_read_file(s, "d/a.txt", 1, 3, &r, &err), 0);
    assert_string_equal(json_string_value(json_object_get(r, "content")), "ell");
    assert_true(json_is_true(json_object_get(r, "more")));
    json_decref(r);
    assert_int_equal(plimsoll_session_read_file(s, "d/b", 0, 0, &r, &err), 0);
    assert_string_equal(json_string_value(json_object_get(r, "content_base64")), "/wA=");
    json_decref(r);
    assert_int_equal(plimsoll_session_list_files(s, "d", 0, &r, &err), 0);
    assert_int_equal(json_array_size(json_object_get(r, "entries")), 2);
    json_decref(r);
    assert_int_equal(plimsoll_chain_len(plimsoll_session_chain(s)), 4);
    /* A refusal is typed and keeps the chain whole. */
    assert_int_equal(plimsoll_session_read_file(s, "d/none", 0, 0, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_NOT_FOUND);
    assert_int_equal(plimsoll_session_read_file(s, "../x", 0, 0, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_INVALID_REQUEST);
    assert_int_equal(
        plimsoll_session_cell(s, "python", "open('d/a.txt').read()", NULL, 0, &r, &err), 0);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "'hello'\n");
    json_decref(r);
    /* The client's variant checks the record alone; the session's chain
     * then misses that call. */
    assert_int_equal(plimsoll_list_files(c, plimsoll_session_id(s), NULL, 2, &r, &err), 0);
    json_decref(r);
    assert_int_equal(plimsoll_session_list_files(s, NULL, 0, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_CHAIN);
    assert_int_equal(plimsoll_session_close(s, &err), 0);
    plimsoll_session_free(s);
    plimsoll_client_free(c);
}

/* A project's artifacts from the docker daemon (8 files, 64 KiB: the
 * harness's SANDBOX_COLLECT_*), one-shot and in a session, saved. */
static const char artifact_script[] =
    "import os\n"
    "os.makedirs('out'); os.makedirs('zz')\n"
    "open('out/a.bin', 'wb').write(bytes(range(256)) * 4)\n"
    "open('out/b.txt', 'w', encoding='utf-8').write('h\\u00e9llo, artifacts\\n')\n"
    "open('out/z.bin', 'wb').write(bytes((i * 7) % 251 for i in range(70000)))\n"
    "[open('zz/%02d' % i, 'w').write('x') for i in range(10)]\n";

static void read_all(const char *path, unsigned char *buf, size_t cap, size_t *ret_len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    *ret_len = fread(buf, 1, cap, f);
    fclose(f);
}

static void check_artifacts(json_t *r) {
    assert_int_equal(json_integer_value(json_object_get(r, "exit_code")), 0);
    json_t *arts = json_object_get(r, "artifacts");
    assert_int_equal(json_array_size(arts), 8);
    assert_true(json_is_true(json_object_get(r, "artifacts_truncated")));
    const char *paths[] = {"out/a.bin", "out/b.txt", "out/z.bin", "zz/00"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(arts, i), "path")),
                            paths[i]);
    json_t *b = json_array_get(arts, 1), *z = json_array_get(arts, 2);
    assert_string_equal(json_string_value(json_object_get(b, "content")),
                        "h\xc3\xa9llo, artifacts\n");
    assert_true(json_is_true(json_object_get(z, "truncated")));
    assert_int_equal(json_integer_value(json_object_get(z, "size")), 70000);
    char tmpl[] = "/tmp/plimsoll-c-artifacts-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    struct plimsoll_error err;
    if (plimsoll_save_artifacts(r, tmpl, &err) != 8)
        fail_msg("save: %s", err.message);
    unsigned char buf[80000];
    size_t n = 0;
    char path[512];
    snprintf(path, sizeof path, "%s/out/a.bin", tmpl);
    read_all(path, buf, sizeof buf, &n);
    assert_int_equal(n, 1024);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(buf[i], i & 0xff);
    snprintf(path, sizeof path, "%s/out/z.bin", tmpl);
    read_all(path, buf, sizeof buf, &n);
    assert_int_equal(n, 65536 - 1024 - 18);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(buf[i], (i * 7) % 251);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    assert_int_equal(system(cmd), 0);
}

static void test_artifacts_live(void **state) {
    (void)state;
    if (!have_sessions())
        return;
    plimsoll_client *c = client("PLIMSOLL_TEST_SESSION_URL");
    struct plimsoll_error err;
    json_t *steps = json_pack("[{s:[s, s, s]}]", "argv", "python3", "-c", artifact_script);
    json_t *collect = json_pack("[s, s]", "out/*", "zz/*");
    json_t *r = NULL;
    if (plimsoll_run_project_collect(c, NULL, steps, collect, NULL, &r, &err) < 0)
        fail_msg("run: %s %s", err.reason, err.message);
    check_artifacts(r);
    json_decref(r);
    plimsoll_session *s = plimsoll_session_open(c, NULL, NULL, &err);
    if (!s)
        fail_msg("open: %s", err.message);
    json_t *run = json_pack("{s:{s:O, s:O}}", "project", "steps", steps, "collect", collect);
    if (plimsoll_session_run(s, run, &r, &err) < 0)
        fail_msg("session run: %s %s", err.reason, err.message);
    check_artifacts(r);
    json_decref(r);
    json_decref(run);
    assert_int_equal(plimsoll_session_close(s, &err), 0);
    plimsoll_session_free(s);
    json_decref(steps);
    json_decref(collect);
    plimsoll_client_free(c);
}

/* A python snippet's artifact, one-shot and in a session: its exact bytes. */
static void check_snippet_artifact(json_t *r) {
    assert_int_equal(json_integer_value(json_object_get(r, "exit_code")), 0);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "done\n");
    assert_false(json_is_true(json_object_get(r, "artifacts_truncated")));
    json_t *arts = json_object_get(r, "artifacts");
    assert_int_equal(json_array_size(arts), 1);
    json_t *a = json_array_get(arts, 0);
    assert_string_equal(json_string_value(json_object_get(a, "path")), "out/s.bin");
    assert_int_equal(json_integer_value(json_object_get(a, "size")), 256);
    assert_false(json_is_true(json_object_get(a, "truncated")));
    char tmpl[] = "/tmp/plimsoll-c-snippet-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    struct plimsoll_error err;
    if (plimsoll_save_artifacts(r, tmpl, &err) != 1)
        fail_msg("save: %s", err.message);
    unsigned char buf[512];
    size_t n = 0;
    char path[512];
    snprintf(path, sizeof path, "%s/out/s.bin", tmpl);
    read_all(path, buf, sizeof buf, &n);
    assert_int_equal(n, 256);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(buf[i], i);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    assert_int_equal(system(cmd), 0);
}

static void test_snippet_artifacts_live(void **state) {
    (void)state;
    if (!have_sessions())
        return;
    plimsoll_client *c = client("PLIMSOLL_TEST_SESSION_URL");
    struct plimsoll_error err;
    const char *code = "import os\n"
                       "os.makedirs('out', exist_ok=True)\n"
                       "open('out/s.bin', 'wb').write(bytes(range(256)))\n"
                       "print('done')\n";
    json_t *collect = json_pack("[s]", "out/*");
    json_t *r = NULL;
    if (plimsoll_run_snippet_collect(c, "python", code, collect, NULL, &r, &err) < 0)
        fail_msg("run: %s %s", err.reason, err.message);
    check_snippet_artifact(r);
    json_decref(r);
    json_t *bad = json_pack("[i]", 1);
    assert_int_equal(plimsoll_run_snippet_collect(c, "python", code, bad, NULL, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
    json_decref(bad);
    plimsoll_session *s = plimsoll_session_open(c, NULL, NULL, &err);
    if (!s)
        fail_msg("open: %s", err.message);
    json_t *run = json_pack("{s:{s:s, s:s, s:O}}", "snippet", "language", "python", "code", code,
                            "collect", collect);
    if (plimsoll_session_run(s, run, &r, &err) < 0)
        fail_msg("session run: %s %s", err.reason, err.message);
    check_snippet_artifact(r);
    json_decref(r);
    json_decref(run);
    assert_int_equal(plimsoll_session_close(s, &err), 0);
    plimsoll_session_free(s);
    json_decref(collect);
    plimsoll_client_free(c);
}

static void test_artifacts_save_refuses(void **state) {
    (void)state;
    char top[] = "/tmp/plimsoll-c-save-XXXXXX";
    assert_non_null(mkdtemp(top));
    char target[600], outside[600], p[700], q[700];
    snprintf(target, sizeof target, "%s/target", top);
    snprintf(outside, sizeof outside, "%s/outside", top);
    assert_int_equal(mkdir(target, 0777), 0);
    assert_int_equal(mkdir(outside, 0777), 0);
    struct plimsoll_error err;
    /* The exact bytes of path_base64 (d/caf\xe9.bin) and content_base64. */
    json_t *r =
        json_pack("{s:[{s:s, s:s, s:s}, {s:s, s:s}]}", "artifacts", "path", "x", "path_base64",
                  "ZC9jYWbpLmJpbg==", "content_base64", "/wD+", "path", "t.txt", "content", "hi");
    assert_int_equal(plimsoll_save_artifacts(r, target, &err), 2);
    json_decref(r);
    unsigned char buf[16];
    size_t n = 0;
    snprintf(p, sizeof p, "%s/d/caf\xe9.bin", target);
    read_all(p, buf, sizeof buf, &n);
    assert_int_equal(n, 3);
    assert_memory_equal(buf, "\xff\x00\xfe", 3);
    const char *bad[] = {"../x", "a/../../x", "/etc/x", "", "a//b", "./x", "a/."};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = json_pack("{s:[{s:s, s:s}, {s:s, s:s}]}", "artifacts", "path", "ok.txt", "content",
                      "ok", "path", bad[i], "content", "x");
        assert_int_equal(plimsoll_save_artifacts(r, target, &err), -1);
        assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
        json_decref(r);
        snprintf(p, sizeof p, "%s/ok.txt", target);
        assert_int_equal(access(p, F_OK), -1);
    }
    snprintf(p, sizeof p, "%s/link", target);
    assert_int_equal(symlink(outside, p), 0);
    snprintf(p, sizeof p, "%s/f", target);
    snprintf(q, sizeof q, "%s/f", outside);
    assert_int_equal(symlink(q, p), 0);
    const char *linked[] = {"link/x", "f"};
    for (size_t i = 0; i < 2; i++) {
        r = json_pack("{s:s, s:s}", "path", linked[i], "content", "x");
        assert_int_equal(plimsoll_artifact_save(r, target, &err), -1);
        assert_non_null(strstr(err.message, "symlink"));
        json_decref(r);
    }
    snprintf(p, sizeof p, "%s/x", outside);
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(access(q, F_OK), -1);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    assert_int_equal(system(cmd), 0);
}

static void test_session_floor_is_checked(void **state) {
    (void)state;
    if (!have_sessions())
        return;
    plimsoll_client *c = client("PLIMSOLL_TEST_SESSION_URL");
    struct plimsoll_error err;
    plimsoll_session *s = plimsoll_session_open(c, NULL, "kernel", &err);
    assert_non_null(s);
    json_t *r = NULL;
    /* The floor goes with a run: the daemon refuses before anything runs. */
    json_t *run = py_run("print(1)");
    assert_int_equal(plimsoll_session_run(s, run, &r, &err), -1);
    json_decref(run);
    assert_int_equal(err.kind, PLIMSOLL_E_INSUFFICIENT_ISOLATION);
    assert_false(err.dispatched);
    /* runc paints container: below a kernel floor the client refuses the
     * answer (the daemon has no floor on a cell to refuse it first). */
    assert_int_equal(plimsoll_session_cell(s, "python", "1", NULL, 0, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_ISOLATION_EVIDENCE_MISMATCH);
    assert_true(err.dispatched);
    assert_int_equal(plimsoll_session_close(s, &err), 0);
    plimsoll_session_free(s);
    plimsoll_client_free(c);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot read %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

/* The README shows clients/c/example.c as it is, and it runs. */
static void test_readme_example(void **state) {
    (void)state;
    char *readme = slurp(PL_SOURCE_ROOT "/README.md");
    char *example = slurp(PL_SOURCE_ROOT "/clients/c/example.c");
    assert_non_null(strstr(readme, example));
    free(readme);
    free(example);
    /* As the README's "Using it" sets them: the URL and a key file. */
    char path[] = "/tmp/plimsoll-readme-key-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_true(dprintf(fd, "%s\n", env("PLIMSOLL_TEST_KEY")) > 0);
    close(fd);
    setenv("PLIMSOLL_URL", env("PLIMSOLL_TEST_URL"), 1);
    unsetenv("PLIMSOLL_KEY");
    setenv("PLIMSOLL_KEY_FILE", path, 1);
    FILE *p = popen(PL_EXAMPLE, "r");
    assert_non_null(p);
    char out[64] = {0};
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    assert_int_equal(pclose(p), 0);
    assert_true(n > 0);
    assert_string_equal(out, "42\n");
    unlink(path);
    unsetenv("PLIMSOLL_URL");
    unsetenv("PLIMSOLL_KEY_FILE");
}

/* ---- reasons (tests/vectors/reasons.json) --------------------------------- */

static const json_t *reason_entry(const json_t *list, const char *reason) {
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        if (json_is_string(json_object_get(e, "reason")) &&
            strcmp(json_string_value(json_object_get(e, "reason")), reason) == 0)
            return e;
    }
    return NULL;
}

static const char *jstr(const json_t *e, const char *key) {
    const json_t *v = json_object_get(e, key);
    return json_is_string(v) ? json_string_value(v) : "(none)";
}

static const char *jbool(const json_t *e, const char *key) {
    const json_t *v = json_object_get(e, key);
    return json_is_boolean(v) ? (json_is_true(v) ? "true" : "false") : "(none)";
}

/* Whether kind is a typed refusal: those between PLIMSOLL_OK and
 * PLIMSOLL_E_REFUSED, and those added after PLIMSOLL_E_PROTOCOL (the
 * enum's values are the ABI: a new kind goes at its end). */
static bool refusal_kind(int kind) {
    return (kind > PLIMSOLL_OK && kind < PLIMSOLL_E_REFUSED) || kind == PLIMSOLL_E_WRONG_ROUTE;
}

/* The library's table: each refusal kind is a refusal reason of the file,
 * retried as it says. */
static void test_reason_table_is_the_files(void **state) {
    (void)state;
    json_t *v = vectors("reasons.json");
    json_t *list = json_object_get(v, "reasons");
    char got[256], want[256];
    for (int k = PLIMSOLL_OK + 1; k <= PLIMSOLL_E_WRONG_ROUTE; k++) {
        if (!refusal_kind(k))
            continue;
        const char *name = plimsoll_errkind_name((enum plimsoll_errkind)k);
        const json_t *e = reason_entry(list, name);
        snprintf(got, sizeof(got), "%s refusal retried=%s", name,
                 plimsoll_errkind_retryable((enum plimsoll_errkind)k) ? "true" : "false");
        if (e)
            snprintf(want, sizeof(want), "%s %s retried=%s", name, jstr(e, "channel"),
                     jbool(e, "retried"));
        else
            snprintf(want, sizeof(want), "%s: not a reason the daemon sends", name);
        assert_string_equal(got, want);
    }
    assert_false(plimsoll_errkind_retryable(PLIMSOLL_E_INFRASTRUCTURE));
    json_decref(v);
}

/* Each reason of the file, answered as the daemon sends it by the
 * harness's hostile daemon: the library's typed error says what the file
 * says.  A refusal must have a kind of its own, named as the reason. */
static void test_every_reason_of_the_file(void **state) {
    (void)state;
    const char *base = env("PLIMSOLL_TEST_HOSTILE_URL");
    json_t *v = vectors("reasons.json");
    json_t *list = json_object_get(v, "reasons");
    assert_true(json_array_size(list) > 10);
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        char url[512], got[512], want[512];
        snprintf(url, sizeof(url), "%s/reason/%s", base, jstr(e, "reason"));
        struct plimsoll_error err;
        plimsoll_client *c = plimsoll_client_new(
            &(struct plimsoll_options){.url = url, .api_key = "plk_reasons"}, &err);
        assert_non_null(c);
        json_t *res = NULL;
        assert_int_equal(plimsoll_run_snippet(c, "javascript", "console.log(1)", NULL, &res, &err),
                         -1);
        const char *kind = plimsoll_errkind_name(err.kind);
        char channel[64];
        if (refusal_kind(err.kind) && !strcmp(kind, err.reason))
            snprintf(channel, sizeof(channel), "refusal");
        else if (err.kind == PLIMSOLL_E_INFRASTRUCTURE)
            snprintf(channel, sizeof(channel), "infrastructure");
        else
            snprintf(channel, sizeof(channel), "the kind %s", kind);
        snprintf(got, sizeof(got), "%s %s %d dispatched=%s %s retried=%s", err.reason, err.code,
                 err.http_status, err.dispatched ? "true" : "false", channel,
                 plimsoll_errkind_retryable(err.kind) ? "true" : "false");
        const json_t *http = json_object_get(e, "http_status");
        snprintf(want, sizeof(want), "%s %s %d dispatched=%s %s retried=%s", jstr(e, "reason"),
                 jstr(e, "code"), json_is_integer(http) ? (int)json_integer_value(http) : -1,
                 jbool(e, "dispatched"), jstr(e, "channel"), jbool(e, "retried"));
        assert_string_equal(got, want);
        plimsoll_client_free(c);
    }
    json_decref(v);
}

/* ---- hostile answers (tests/vectors/hostile_answers.json) ----------------- */

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The kind of what a call gave: "result", "protocol", "refusal", … */
static const char *outcome_of(int r, const struct plimsoll_error *err) {
    if (r == 0)
        return "result";
    switch (err->kind) {
    case PLIMSOLL_E_PROTOCOL: return "protocol";
    case PLIMSOLL_E_ISOLATION_EVIDENCE_MISMATCH: return "mismatch";
    case PLIMSOLL_E_INFRASTRUCTURE:
        return strcmp(err->code, "deadline_exceeded") == 0 ? "timeout" : "transport";
    case PLIMSOLL_E_CHAIN: return "chain";
    case PLIMSOLL_E_USAGE: return "usage";
    default:
        return err->kind <= PLIMSOLL_E_REFUSED || refusal_kind(err->kind) ? "refusal" : "other";
    }
}

static bool same_bytes(const json_t *a, const json_t *b) {
    return json_is_string(a) && json_is_string(b) &&
           json_string_length(a) == json_string_length(b) &&
           memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
}

static void test_hostile_limits(void **state) {
    (void)state;
    json_t *v = vectors("hostile_answers.json");
    json_t *limits = json_object_get(v, "limits");
    assert_int_equal(PLIMSOLL_DEFAULT_MAX_ANSWER_BYTES,
                     json_integer_value(json_object_get(limits, "max_answer_bytes")));
    assert_int_equal(PLIMSOLL_MAX_ANSWER_DEPTH,
                     json_integer_value(json_object_get(limits, "max_depth")));
    assert_int_equal(PLIMSOLL_MAX_ANSWER_INTEGER,
                     json_integer_value(json_object_get(limits, "max_integer")));
    assert_string_equal(plimsoll_errkind_name(PLIMSOLL_E_PROTOCOL), "PROTOCOL");
    json_decref(v);
}

/* Every case: the call, what it gave, in time; all failures listed at once. */
static void test_hostile_answers(void **state) {
    (void)state;
    const char *base = env("PLIMSOLL_TEST_HOSTILE_URL");
    json_t *v = vectors("hostile_answers.json");
    json_t *cases = json_object_get(v, "cases");
    assert_true(json_array_size(cases) > 40);
    char failures[4096] = "";
    size_t nfail = 0, i;
    json_t *hc;
    json_array_foreach(cases, i, hc) {
        const char *name = json_string_value(json_object_get(hc, "name"));
        const char *call = json_string_value(json_object_get(hc, "call"));
        json_t *settings = json_object_get(hc, "client"), *want = json_object_get(hc, "expect");
        char url[512];
        snprintf(url, sizeof(url), "%s/%s", base, name);
        struct plimsoll_error err;
        plimsoll_client *c = plimsoll_client_new(
            &(struct plimsoll_options){
                .url = url,
                .api_key = "plk_hostile",
                .timeout_ms = (long)json_integer_value(json_object_get(settings, "timeout_ms")),
                .max_answer_bytes =
                    (size_t)json_integer_value(json_object_get(settings, "max_answer_bytes"))},
            &err);
        assert_non_null(c);
        json_t *res = NULL;
        char sid[65];
        double t0 = now_ms();
        int r = -1;
        if (strcmp(call, "Run") == 0)
            r = plimsoll_run(c, json_object_get(hc, "request"), &res, &err);
        else if (strcmp(call, "Describe") == 0)
            r = plimsoll_describe(c, &res, &err);
        else if (strcmp(call, "OpenSession") == 0)
            r = plimsoll_open_session(c, NULL, sid, &err);
        else
            fail_msg("no such call in the vectors: %s", call);
        double took = now_ms() - t0;
        const char *got = outcome_of(r, &err);
        char why[256] = "";
        bool listed = false;
        size_t k;
        json_t *o;
        json_array_foreach(json_object_get(want, "outcomes"), k, o) {
            listed = listed || strcmp(json_string_value(o), got) == 0;
        }
        json_t *within = json_object_get(want, "within_ms"), *wr = json_object_get(want, "result");
        if (!listed)
            snprintf(why, sizeof(why), "got %s: %.200s", got, r ? err.message : "a result");
        else if (within && took > (double)json_integer_value(within))
            snprintf(why, sizeof(why), "took %.0f ms", took);
        else if (r == 0 && wr && strcmp(call, "Run") == 0 &&
                 (json_integer_value(json_object_get(res, "exit_code")) !=
                      json_integer_value(json_object_get(wr, "exit_code")) ||
                  !same_bytes(json_object_get(res, "stdout"), json_object_get(wr, "stdout")) ||
                  !same_bytes(json_object_get(res, "stderr"), json_object_get(wr, "stderr"))))
            snprintf(why, sizeof(why), "the result is not the vector's");
        else if (strcmp(got, "refusal") == 0 &&
                 (strcmp(err.reason, json_string_value(json_object_get(want, "reason"))) != 0 ||
                  err.dispatched))
            snprintf(why, sizeof(why), "refused for %s (dispatched %d)", err.reason,
                     err.dispatched);
        else if (r != 0 && strcmp(got, "refusal") != 0 && !err.dispatched)
            snprintf(why, sizeof(why), "not dispatched");
        printf("%s %s: %s (%.0f ms)%s%s\n", why[0] ? "FAILED" : "ok", name, got, took,
               why[0] ? ": " : "", why);
        if (why[0]) {
            nfail++;
            size_t used = strlen(failures);
            snprintf(failures + used, sizeof(failures) - used, "\n  %s: %s", name, why);
        }
        json_decref(res);
        plimsoll_client_free(c);
    }
    json_decref(v);
    if (nfail)
        fail_msg("%zu hostile cases failed:%s", nfail, failures);
}

/* Run the CLI on a case of the hostile daemon: its exit status, and its
 * stdout in out (*n bytes). */
static int cli_on_case(const char *name, char *out, size_t *n) {
    char cli[4096], url[512];
    snprintf(cli, sizeof(cli), "%s", PL_EXAMPLE);
    char *slash = strrchr(cli, '/'); /* <build>/tests/client_example -> <build>/plimsoll */
    assert_non_null(slash);
    *slash = '\0';
    slash = strrchr(cli, '/');
    assert_non_null(slash);
    snprintf(slash, sizeof(cli) - (size_t)(slash - cli),
             "/plimsoll run \"console.log('hostile')\" "
             "2>/dev/null");
    snprintf(url, sizeof(url), "%s/%s", env("PLIMSOLL_TEST_HOSTILE_URL"), name);
    setenv("PLIMSOLL_URL", url, 1);
    setenv("PLIMSOLL_KEY", "plk_hostile", 1);
    FILE *p = popen(cli, "r");
    assert_non_null(p);
    *n = fread(out, 1, 256, p);
    int status = pclose(p);
    unsetenv("PLIMSOLL_URL");
    unsetenv("PLIMSOLL_KEY");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The CLI writes a guest's output byte for byte, NULs included, and an
 * answer that breaks the protocol is infrastructure (exit 4). */
static void test_cli_hostile(void **state) {
    (void)state;
    char out[256];
    size_t n = 0;
    assert_int_equal(cli_on_case("nul-in-output", out, &n), 0);
    static const char want[] = "before\0after\n";
    assert_int_equal(n, sizeof(want) - 1);
    assert_memory_equal(out, want, sizeof(want) - 1);
    assert_int_equal(cli_on_case("not-application-json", out, &n), 4);
    assert_int_equal(cli_on_case("nested-arrays", out, &n), 4);
}

/* ---- live output (RunStream, RunCellStream) against a scripted server ----- */

/* Bytes being built. */
struct bytes {
    unsigned char *p;
    size_t n;
};

static void bytes_add(struct bytes *b, const void *data, size_t n) {
    b->p = realloc(b->p, b->n + n + 1);
    assert_non_null(b->p);
    if (n)
        memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* One envelope: flags, a 4-byte big-endian length, the bytes. */
static void envelope(struct bytes *b, unsigned flags, const char *msg, size_t len) {
    unsigned char h[5] = {(unsigned char)flags, (unsigned char)(len >> 24),
                          (unsigned char)(len >> 16), (unsigned char)(len >> 8),
                          (unsigned char)len};
    bytes_add(b, h, 5);
    bytes_add(b, msg, len);
}

static void envelope_str(struct bytes *b, unsigned flags, const char *msg) {
    envelope(b, flags, msg, strlen(msg));
}

/* An envelope around a JSON value (stolen). */
static void envelope_json(struct bytes *b, unsigned flags, json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    assert_non_null(s);
    envelope(b, flags, s, strlen(s));
    free(s);
    json_decref(v);
}

static char *b64(const void *data, size_t n) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    char *out = malloc(n / 3 * 4 + 8), *o = out;
    assert_non_null(out);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *o++ = a[v >> 18 & 63];
        *o++ = a[v >> 12 & 63];
        *o++ = i + 1 < n ? a[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? a[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* An output message: stdout and stderr bytes (either may be NULL), a step. */
static void output_msg(struct bytes *b, const char *out, size_t out_len, const char *err,
                       size_t err_len, unsigned step) {
    json_t *o = json_object();
    char *s;
    if (out) {
        json_object_set_new(o, "stdout", json_string(s = b64(out, out_len)));
        free(s);
    }
    if (err) {
        json_object_set_new(o, "stderr", json_string(s = b64(err, err_len)));
        free(s);
    }
    if (step)
        json_object_set_new(o, "step", json_integer(step));
    envelope_json(b, 0, json_pack("{s:o}", "output", o));
}

/* resp (stolen) with a record that checks against sent. */
static json_t *with_record(const json_t *sent, json_t *resp) {
    char req[65], res[65], dig[65];
    assert_int_equal(plimsoll_canonical_sha256(sent, req), 0);
    assert_int_equal(plimsoll_canonical_sha256(resp, res), 0);
    json_t *rec =
        json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "version", 1, "request_sha256",
                  req, "response_sha256", res, "provider", "fake", "isolation", "process",
                  "runtime", "fake", "started_at", "2026-12-01T00:00:00.000000001Z", "ended_at",
                  "2026-12-01T00:00:00.000000002Z", "previous_digest", "");
    assert_int_equal(plimsoll_canonical_sha256(rec, dig), 0);
    json_object_set_new(rec, "digest", json_string(dig));
    json_object_set_new(resp, "record", rec);
    return resp;
}

/* A result message for sent: exit 0, stdout and stderr text, a record. */
static void result_msg(struct bytes *b, const json_t *sent, const char *out, size_t out_len,
                       const char *err) {
    json_t *resp = json_pack("{s:i, s:s%, s:s, s:s, s:s}", "exit_code", 0, "stdout", out, out_len,
                             "stderr", err, "isolation", "process", "outcome", "completed");
    envelope_json(b, 0, json_pack("{s:o}", "result", with_record(sent, resp)));
}

static void end_ok(struct bytes *b) {
    envelope(b, 2, "{}", 2);
}

/* The end of a stream with the daemon's Connect error for reason. */
static void end_error(struct bytes *b, const char *code, const char *reason, bool dispatched) {
    envelope_json(b, 2,
                  json_pack("{s:{s:s, s:s, s:[{s:s, s:{s:s, s:s, s:{s:s, s:s}}}]}}", "error",
                            "code", code, "message", "as the test says", "details", "type",
                            "google.rpc.ErrorInfo", "debug", "reason", reason, "domain", "plimsoll",
                            "metadata", "dispatched", dispatched ? "true" : "false", "isolation",
                            "process"));
}

/* What the scripted server answers one connection. */
struct script {
    int status;        /* 0: 200 */
    const char *ctype; /* NULL: application/connect+json */
    struct bytes body;
    size_t piece;        /* HTTP chunk size; 0: the whole body in one */
    size_t hold_at;      /* stop there until released (at most 5 s); 0: never */
    const char *headers; /* more answer header lines, each ending "\r\n"; NULL: none */
};

/* A server on 127.0.0.1 answering its scripts, one connection each. */
struct fake {
    int lfd, port;
    pthread_t thread;
    struct script *scripts;
    size_t nscripts, served;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool released, held_in_vain, joined;
    char method[16], path[256], ctype[128];
    struct bytes head;    /* the last request's head */
    struct bytes request; /* the last request's body */
};

static void write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0)
            return; /* the client hung up: what some cases want of it */
        c += w;
        n -= (size_t)w;
    }
}

static void write_chunk(int fd, const unsigned char *p, size_t n) {
    char h[32];
    int hn = snprintf(h, sizeof(h), "%zx\r\n", n);
    write_all(fd, h, (size_t)hn);
    write_all(fd, p, n);
    write_all(fd, "\r\n", 2);
}

/* The request's headers and body; false when the client went away. */
static bool read_request(struct fake *f, int fd) {
    char buf[1 << 16] = "";
    size_t n = 0;
    char *end = NULL;
    while (!(end = strstr(buf, "\r\n\r\n"))) {
        ssize_t r = recv(fd, buf + n, sizeof(buf) - 1 - n, 0);
        if (r <= 0)
            return false;
        n += (size_t)r;
        buf[n] = '\0';
    }
    size_t head = (size_t)(end + 4 - buf);
    sscanf(buf, "%15s %255s", f->method, f->path);
    free(f->head.p);
    f->head = (struct bytes){0};
    bytes_add(&f->head, buf, head);
    const char *cl = strcasestr(buf, "\r\nContent-Length:");
    const char *ct = strcasestr(buf, "\r\nContent-Type:");
    size_t want = cl ? strtoul(cl + 17, NULL, 10) : 0;
    f->ctype[0] = '\0';
    if (ct)
        sscanf(ct + 15, " %127[^\r]", f->ctype);
    free(f->request.p);
    f->request = (struct bytes){0};
    bytes_add(&f->request, buf + head, n - head);
    while (f->request.n < want) {
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        if (r <= 0)
            return false;
        bytes_add(&f->request, buf, (size_t)r);
    }
    return true;
}

static void *fake_serve(void *arg) {
    struct fake *f = arg;
    for (; f->served < f->nscripts; f->served++) {
        struct script *s = &f->scripts[f->served];
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0)
            break;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (!read_request(f, fd)) {
            close(fd);
            continue;
        }
        char head[512];
        int hn =
            snprintf(head, sizeof(head),
                     "HTTP/1.1 %d X\r\nContent-Type: %s\r\n%sTransfer-Encoding: chunked\r\n"
                     "Connection: close\r\n\r\n",
                     s->status ? s->status : 200, s->ctype ? s->ctype : "application/connect+json",
                     s->headers ? s->headers : "");
        write_all(fd, head, (size_t)hn);
        size_t piece = s->piece ? s->piece : s->body.n;
        for (size_t off = 0; off < s->body.n;) {
            size_t next = off + piece < s->body.n ? off + piece : s->body.n;
            if (s->hold_at > off && s->hold_at < next)
                next = s->hold_at;
            write_chunk(fd, s->body.p + off, next - off);
            off = next;
            if (s->hold_at && off == s->hold_at) {
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += 5;
                pthread_mutex_lock(&f->mu);
                while (!f->released)
                    if (pthread_cond_timedwait(&f->cv, &f->mu, &until) != 0) {
                        f->held_in_vain = true;
                        break;
                    }
                pthread_mutex_unlock(&f->mu);
            }
        }
        write_all(fd, "0\r\n\r\n", 5);
        shutdown(fd, SHUT_RDWR);
        close(fd);
    }
    return NULL;
}

/* Start a server for nscripts connections (the scripts stay the caller's). */
static struct fake *fake_start(struct script *scripts, size_t nscripts) {
    struct fake *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->scripts = scripts;
    f->nscripts = nscripts;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(f->lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(f->lfd, 8), 0);
    assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &al), 0);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_serve, f), 0);
    return f;
}

static void fake_release(struct fake *f) {
    pthread_mutex_lock(&f->mu);
    f->released = true;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* Wait for the server to finish (a client that hung up early is let go). */
static void fake_stop(struct fake *f) {
    fake_release(f);
    shutdown(f->lfd, SHUT_RDWR);
    if (!f->joined)
        pthread_join(f->thread, NULL);
    close(f->lfd);
    free(f->head.p);
    free(f->request.p);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}

static plimsoll_client *fake_client(const struct fake *f, int attempts) {
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", f->port);
    struct plimsoll_error err;
    plimsoll_client *c = plimsoll_client_new(
        &(struct plimsoll_options){.url = url,
                                   .api_key = "plk_fake",
                                   .timeout_ms = 20000,
                                   .retry = {.max_attempts = attempts, .base_ms = 1, .cap_ms = 2}},
        &err);
    assert_non_null(c);
    return c;
}

/* What an output function saw. */
struct seen {
    struct bytes out, err;
    int chunks;
    unsigned last_step;
    struct fake *release; /* set: release the server at the first chunk */
    int cancel_at;        /* > 0: stop at that chunk */
};

static int on_chunk(void *ud, const struct plimsoll_output *ch) {
    struct seen *s = ud;
    s->chunks++;
    s->last_step = ch->step;
    if (ch->stdout_len) {
        assert_non_null(ch->stdout_data);
        assert_int_equal(ch->stdout_data[ch->stdout_len], '\0');
        bytes_add(&s->out, ch->stdout_data, ch->stdout_len);
    }
    if (ch->stderr_len)
        bytes_add(&s->err, ch->stderr_data, ch->stderr_len);
    if (s->release && s->chunks == 1)
        fake_release(s->release);
    return s->cancel_at && s->chunks >= s->cancel_at;
}

static void seen_free(struct seen *s) {
    free(s->out.p);
    free(s->err.p);
}

static json_t *js_request(const char *code) {
    return json_pack("{s:{s:s, s:s}}", "snippet", "language", "javascript", "code", code);
}

/* The usual stream: three chunks (a NUL in one), the result, the end;
 * *ret_hold: where the first chunk's envelope ends. */
static struct bytes good_stream(const json_t *sent, size_t *ret_hold) {
    struct bytes b = {0};
    output_msg(&b, "one\n", 4, NULL, 0, 0);
    if (ret_hold)
        *ret_hold = b.n;
    output_msg(&b, NULL, 0, "warn\n", 5, 0);
    output_msg(&b, "t\0o\n", 4, NULL, 0, 0);
    result_msg(&b, sent, "one\nt\0o\n", 8, "warn\n");
    end_ok(&b);
    return b;
}

/* Run sent against one script: the call's return, with err and what the
 * output function saw. */
static int stream_once(struct script *sc, const json_t *sent, struct seen *seen, json_t **ret,
                       struct plimsoll_error *err) {
    struct fake *f = fake_start(sc, 1);
    plimsoll_client *c = fake_client(f, 0);
    int r = plimsoll_run_stream(c, sent, on_chunk, seen, ret, err);
    plimsoll_client_free(c);
    fake_stop(f);
    return r;
}

static void test_stream_live_and_checked(void **state) {
    (void)state;
    json_t *req = js_request("console.log('one')");
    size_t hold = 0;
    struct script sc = {.body = good_stream(req, &hold)};
    sc.hold_at = hold;
    /* The server holds the rest back until the output function saw the
     * first chunk (at most 5 s, then it gives up and says so). */
    struct fake *f = fake_start(&sc, 1);
    plimsoll_client *c = fake_client(f, 0);
    struct seen seen = {.release = f};
    json_t *res = NULL;
    struct plimsoll_error err;
    if (plimsoll_run_stream(c, req, on_chunk, &seen, &res, &err) < 0)
        fail_msg("%s: %s", plimsoll_errkind_name(err.kind), err.message);
    plimsoll_client_free(c);
    pthread_join(f->thread, NULL);
    f->joined = true;
    assert_false(f->held_in_vain);
    assert_int_equal(seen.chunks, 3);
    assert_int_equal(seen.out.n, 8);
    assert_memory_equal(seen.out.p, "one\nt\0o\n", 8);
    assert_string_equal((char *)seen.err.p, "warn\n");
    assert_int_equal(json_integer_value(json_object_get(res, "exit_code")), 0);
    /* The request: one envelope around the RunRequest's JSON. */
    assert_string_equal(f->path, "/plimsoll.v1.SandboxService/RunStream");
    assert_string_equal(f->ctype, "application/connect+json");
    assert_true(f->request.n > 5);
    assert_int_equal(f->request.p[0], 0);
    size_t len = (size_t)f->request.p[1] << 24 | (size_t)f->request.p[2] << 16 |
                 (size_t)f->request.p[3] << 8 | f->request.p[4];
    assert_int_equal(len, f->request.n - 5);
    json_t *got = json_loadb((char *)f->request.p + 5, len, 0, NULL);
    assert_true(json_equal(got, req));
    json_decref(got);
    fake_stop(f);
    json_decref(res);
    seen_free(&seen);
    free(sc.body.p);
    json_decref(req);
}

/* The same stream cut at every byte: HTTP chunks of one byte each, then
 * two pieces split at each point; each chunk as whole as before. */
static void test_stream_every_split(void **state) {
    (void)state;
    json_t *req = js_request("console.log('one')");
    struct bytes body = good_stream(req, NULL);
    for (size_t cut = 0; cut < body.n; cut++) {
        struct script sc = {.body = body, .piece = cut ? cut : 1};
        if (cut) {
            /* two pieces: [0, cut) and the rest */
            sc.piece = 0;
            sc.hold_at = cut;
        }
        struct seen seen = {0};
        json_t *res = NULL;
        struct plimsoll_error err;
        struct fake *f = fake_start(&sc, 1);
        fake_release(f); /* no holding: only the cut */
        plimsoll_client *c = fake_client(f, 0);
        int r = plimsoll_run_stream(c, req, on_chunk, &seen, &res, &err);
        plimsoll_client_free(c);
        fake_stop(f);
        if (r < 0)
            fail_msg("cut at %zu: %s", cut, err.message);
        assert_int_equal(seen.chunks, 3);
        assert_int_equal(seen.out.n, 8);
        assert_memory_equal(seen.out.p, "one\nt\0o\n", 8);
        json_decref(res);
        seen_free(&seen);
    }
    free(body.p);
    json_decref(req);
}

/* A stream that breaks a rule: PLIMSOLL_E_PROTOCOL (a message holding
 * why), dispatched, no result, and chunks given to the output function
 * before it broke.  Sent in HTTP chunks of 7 bytes; body is freed. */
static void stream_protocol(const char *name, struct bytes body, const json_t *req, const char *why,
                            int chunks) {
    struct script sc = {.body = body, .piece = 7};
    struct seen seen = {0};
    json_t *res = NULL;
    struct plimsoll_error err;
    int r = stream_once(&sc, req, &seen, &res, &err);
    if (r == 0)
        fail_msg("%s: a result", name);
    if (err.kind != PLIMSOLL_E_PROTOCOL || !strstr(err.message, why))
        fail_msg("%s: %s: %s", name, plimsoll_errkind_name(err.kind), err.message);
    assert_null(res);
    assert_true(err.dispatched);
    assert_string_equal(err.code, "unknown");
    if (seen.chunks != chunks)
        fail_msg("%s: %d chunks, not %d", name, seen.chunks, chunks);
    seen_free(&seen);
    free(body.p);
}

static void test_stream_protocol_errors(void **state) {
    (void)state;
    json_t *req = js_request("x");
    struct bytes b = {0};
    /* an envelope past PLIMSOLL_MAX_STREAM_MESSAGE, refused from its header */
    output_msg(&b, "a", 1, NULL, 0, 0);
    static const unsigned char big[5] = {0, 0x01, 0x00, 0x00, 0x01};
    bytes_add(&b, big, sizeof(big));
    bytes_add(&b, "{", 1);
    stream_protocol("oversize", b, req, "past PLIMSOLL_MAX_STREAM_MESSAGE", 1);
    /* flags: compressed, and unknown */
    b = (struct bytes){0};
    envelope_str(&b, 1, "{}");
    stream_protocol("compressed", b, req, "flags 0x01", 0);
    b = (struct bytes){0};
    output_msg(&b, "a", 1, NULL, 0, 0);
    envelope_str(&b, 0x80, "{}");
    stream_protocol("flags", b, req, "flags 0x80", 1);
    /* no result: chunks then {} */
    b = (struct bytes){0};
    output_msg(&b, "a", 1, NULL, 0, 0);
    end_ok(&b);
    stream_protocol("no result", b, req, "without a result or an error", 1);
    /* a result but no end */
    b = (struct bytes){0};
    result_msg(&b, req, "", 0, "");
    stream_protocol("no end", b, req, "without its end-of-stream message", 0);
    /* nothing at all */
    stream_protocol("empty", (struct bytes){0}, req, "without its end-of-stream message", 0);
    /* cut inside an envelope */
    b = (struct bytes){0};
    output_msg(&b, "a", 1, NULL, 0, 0);
    b.n -= 3;
    stream_protocol("cut", b, req, "ends inside an envelope", 0);
    /* bytes after the end */
    b = (struct bytes){0};
    result_msg(&b, req, "", 0, "");
    end_ok(&b);
    bytes_add(&b, "\0", 1);
    stream_protocol("after end", b, req, "after its end-of-stream message", 0);
    /* output after the result */
    b = (struct bytes){0};
    result_msg(&b, req, "", 0, "");
    output_msg(&b, "a", 1, NULL, 0, 0);
    end_ok(&b);
    stream_protocol("output after result", b, req, "a message after its result", 0);
    /* both members */
    b = (struct bytes){0};
    envelope_str(&b, 0, "{\"output\":{},\"result\":{}}");
    stream_protocol("both", b, req, "both an output and a result", 0);
    /* not base64, not JSON, a member of the wrong type */
    b = (struct bytes){0};
    envelope_str(&b, 0, "{\"output\":{\"stdout\":\"@@@\"}}");
    stream_protocol("base64", b, req, "not base64", 0);
    b = (struct bytes){0};
    envelope_str(&b, 0, "{\"output\":");
    stream_protocol("json", b, req, "not JSON", 0);
    b = (struct bytes){0};
    envelope_str(&b, 0, "{\"output\":{\"step\":-1}}");
    stream_protocol("step type", b, req, "uint32", 0);
    /* a snippet's chunk naming a step */
    b = (struct bytes){0};
    output_msg(&b, "a", 1, NULL, 0, 2);
    stream_protocol("step", b, req, "output of step 2", 0);
    /* streamed output that is not the result's */
    b = (struct bytes){0};
    output_msg(&b, "a", 1, NULL, 0, 0);
    result_msg(&b, req, "b", 1, "");
    end_ok(&b);
    stream_protocol("mismatch", b, req, "output of stdout is not the result's", 1);
    b = (struct bytes){0};
    output_msg(&b, NULL, 0, "e", 1, 0);
    result_msg(&b, req, "", 0, "");
    end_ok(&b);
    stream_protocol("stderr dropped", b, req, "output of stderr is not the result's", 1);
    /* a 200 that is not a stream */
    struct script sc = {.ctype = "application/json"};
    bytes_add(&sc.body, "{}", 2);
    struct seen seen = {0};
    json_t *res = NULL;
    struct plimsoll_error err;
    assert_int_equal(stream_once(&sc, req, &seen, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_PROTOCOL);
    assert_non_null(strstr(err.message, "not application/connect+json"));
    free(sc.body.p);
    json_decref(req);
}

static void test_stream_refusals_and_errors(void **state) {
    (void)state;
    json_t *req = js_request("x");
    /* A refusal: a 200 whose only message is the end, with the error. */
    struct script sc = {0};
    end_error(&sc.body, "failed_precondition", "DISABLED", false);
    struct seen seen = {0};
    json_t *res = NULL;
    struct plimsoll_error err;
    assert_int_equal(stream_once(&sc, req, &seen, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_DISABLED);
    assert_string_equal(err.reason, "DISABLED");
    assert_string_equal(err.code, "failed_precondition");
    assert_string_equal(err.isolation, "process");
    assert_false(err.dispatched);
    assert_int_equal(err.http_status, 200);
    assert_int_equal(seen.chunks, 0);
    free(sc.body.p);
    /* INTERNAL after output: infrastructure, the chunks given. */
    sc = (struct script){0};
    output_msg(&sc.body, "a", 1, NULL, 0, 0);
    end_error(&sc.body, "internal", "INTERNAL", true);
    assert_int_equal(stream_once(&sc, req, &seen, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_INFRASTRUCTURE);
    assert_true(err.dispatched);
    assert_int_equal(seen.chunks, 1);
    free(sc.body.p);
    seen_free(&seen);
    /* An end whose error is no Connect error. */
    sc = (struct script){0};
    envelope_str(&sc.body, 2, "{\"error\":{\"message\":\"x\"}}");
    seen = (struct seen){0};
    assert_int_equal(stream_once(&sc, req, &seen, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_PROTOCOL);
    free(sc.body.p);
    /* A non-200 answer is read as a unary call's. */
    sc = (struct script){.status = 429, .ctype = "application/json"};
    const char *e429 = "{\"code\":\"resource_exhausted\",\"message\":\"slow down\",\"details\":[{"
                       "\"debug\":{\"reason\":\"RATE_LIMITED\",\"metadata\":{\"dispatched\":"
                       "\"false\"}}}]}";
    bytes_add(&sc.body, e429, strlen(e429));
    assert_int_equal(stream_once(&sc, req, &seen, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_RATE_LIMITED);
    assert_int_equal(err.http_status, 429);
    assert_false(err.dispatched);
    free(sc.body.p);
    /* Canceled by the output function. */
    sc = (struct script){.body = good_stream(req, NULL)};
    seen = (struct seen){.cancel_at = 1};
    assert_int_equal(stream_once(&sc, req, &seen, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_INFRASTRUCTURE);
    assert_string_equal(err.code, "canceled");
    assert_true(err.dispatched);
    assert_int_equal(seen.chunks, 1);
    seen_free(&seen);
    free(sc.body.p);
    json_decref(req);
}

/* The result is checked as Run's: the record, and the floor. */
static void test_stream_result_checks(void **state) {
    (void)state;
    json_t *req = js_request("x");
    json_t *other = js_request("y");
    struct script sc = {0};
    output_msg(&sc.body, "a", 1, NULL, 0, 0);
    result_msg(&sc.body, other, "a", 1, ""); /* a record of another request */
    end_ok(&sc.body);
    struct seen seen = {0};
    json_t *res = NULL;
    struct plimsoll_error err;
    assert_int_equal(stream_once(&sc, req, &seen, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_CHAIN);
    assert_string_equal(err.broken, "request_sha256");
    free(sc.body.p);
    seen_free(&seen);
    /* The answer says "process": below a kernel floor. */
    json_object_set_new(req, "minimum_isolation", json_string("kernel"));
    sc = (struct script){.body = good_stream(req, NULL)};
    seen = (struct seen){0};
    assert_int_equal(stream_once(&sc, req, &seen, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_ISOLATION_EVIDENCE_MISMATCH);
    free(sc.body.p);
    seen_free(&seen);
    json_decref(other);
    json_decref(req);
}

/* A project's chunks name its steps; each step's are its output. */
static void test_stream_project_steps(void **state) {
    (void)state;
    json_t *req = json_pack("{s:{s:[{s:s, s:[s]}, {s:s, s:[s]}]}}", "project", "steps", "name", "a",
                            "argv", "a", "name", "b", "argv", "b");
    struct script sc = {0};
    output_msg(&sc.body, "1", 1, NULL, 0, 1);
    output_msg(&sc.body, "2", 1, "e", 1, 2);
    json_t *resp =
        json_pack("{s:i, s:s, s:s, s:[{s:s, s:s}, {s:s, s:s}]}", "exit_code", 0, "stdout", "",
                  "stderr", "", "steps", "stdout", "1", "stderr", "", "stdout", "2", "stderr", "e");
    envelope_json(&sc.body, 0, json_pack("{s:o}", "result", with_record(req, resp)));
    end_ok(&sc.body);
    struct seen seen = {0};
    json_t *res = NULL;
    struct plimsoll_error err;
    if (stream_once(&sc, req, &seen, &res, &err) < 0)
        fail_msg("%s", err.message);
    assert_int_equal(seen.chunks, 2);
    assert_int_equal(seen.last_step, 2);
    assert_string_equal((char *)seen.out.p, "12");
    json_decref(res);
    seen_free(&seen);
    free(sc.body.p);
    /* A step the project does not have. */
    struct bytes b = {0};
    output_msg(&b, "3", 1, NULL, 0, 3);
    stream_protocol("step 3", b, req, "output of step 3, but the request has 2 steps", 0);
    /* A step that streamed less than its result holds. */
    sc = (struct script){0};
    output_msg(&sc.body, "1", 1, NULL, 0, 1);
    resp = json_pack("{s:i, s:[{s:s}, {s:s}]}", "exit_code", 0, "steps", "stdout", "1", "stdout",
                     "not streamed");
    envelope_json(&sc.body, 0, json_pack("{s:o}", "result", with_record(req, resp)));
    end_ok(&sc.body);
    stream_protocol("step 2 missing", sc.body, req, "step 2's stdout is not the result's", 1);
    json_decref(req);
}

/* A refusal before any output is retried as Run's; a failure after
 * output never is. */
static void test_stream_retry(void **state) {
    (void)state;
    json_t *req = js_request("x");
    struct script sc[2] = {{0}, {0}};
    end_error(&sc[0].body, "resource_exhausted", "AT_CAPACITY", false);
    sc[1].body = good_stream(req, NULL);
    struct fake *f = fake_start(sc, 2);
    plimsoll_client *c = fake_client(f, 3);
    struct seen seen = {0};
    json_t *res = NULL;
    struct plimsoll_error err;
    if (plimsoll_run_stream(c, req, on_chunk, &seen, &res, &err) < 0)
        fail_msg("%s", err.message);
    assert_int_equal(seen.chunks, 3);
    plimsoll_client_free(c);
    fake_stop(f);
    json_decref(res);
    seen_free(&seen);
    free(sc[0].body.p);
    free(sc[1].body.p);
    /* Output, then AT_CAPACITY (no daemon does that): not tried again. */
    sc[0] = (struct script){0};
    output_msg(&sc[0].body, "a", 1, NULL, 0, 0);
    end_error(&sc[0].body, "resource_exhausted", "AT_CAPACITY", false);
    sc[1] = (struct script){.body = good_stream(req, NULL)};
    f = fake_start(sc, 2);
    c = fake_client(f, 3);
    seen = (struct seen){0};
    assert_int_equal(plimsoll_run_stream(c, req, on_chunk, &seen, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_AT_CAPACITY);
    assert_int_equal(seen.chunks, 1);
    plimsoll_client_free(c);
    fake_stop(f); /* the second script was never asked for */
    seen_free(&seen);
    free(sc[0].body.p);
    free(sc[1].body.p);
    json_decref(req);
}

/* RunCellStream: the session's call, its record over {"cell", timeout_ms}. */
static void test_stream_cell(void **state) {
    (void)state;
    static const char id[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    json_t *cell = json_pack("{s:s, s:s}", "language", "python", "code", "print(1)");
    json_t *sent = json_pack("{s:O, s:i}", "cell", cell, "timeout_ms", 5000);
    struct script sc = {0};
    output_msg(&sc.body, "1\n", 2, NULL, 0, 0);
    result_msg(&sc.body, sent, "1\n", 2, "");
    end_ok(&sc.body);
    struct fake *f = fake_start(&sc, 1);
    plimsoll_client *c = fake_client(f, 0);
    struct seen seen = {0};
    json_t *res = NULL;
    struct plimsoll_error err;
    if (plimsoll_run_cell_stream(c, id, cell, 5000, on_chunk, &seen, &res, &err) < 0)
        fail_msg("%s", err.message);
    assert_string_equal((char *)seen.out.p, "1\n");
    assert_string_equal(f->path, "/plimsoll.v1.SandboxService/RunCellStream");
    json_t *got = json_loadb((char *)f->request.p + 5, f->request.n - 5, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(got, "session_id")), id);
    json_decref(got);
    plimsoll_client_free(c);
    fake_stop(f);
    json_decref(res);
    seen_free(&seen);
    free(sc.body.p);
    /* Usage errors send nothing. */
    c = plimsoll_client_new(NULL, &err);
    assert_int_equal(plimsoll_run_cell_stream(c, "nope", cell, 0, NULL, NULL, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
    assert_int_equal(plimsoll_run_stream(c, NULL, NULL, NULL, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
    assert_int_equal(
        plimsoll_session_cell_stream(NULL, "python", "1", NULL, 0, NULL, NULL, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
    plimsoll_client_free(c);
    json_decref(sent);
    json_decref(cell);
}

/* Whether the daemon says kind streams (Describe: operations.KIND.streams). */
static bool kind_streams(plimsoll_client *c, const char *kind) {
    json_t *d = NULL;
    struct plimsoll_error err;
    if (plimsoll_describe(c, &d, &err) < 0)
        fail_msg("describe: %s", err.message);
    bool yes = json_is_true(
        json_object_get(json_object_get(json_object_get(d, "operations"), kind), "streams"));
    json_decref(d);
    return yes;
}

/* The real wasm daemon streams a snippet's output; joined, it is the result's. */
static void test_stream_real_daemon(void **state) {
    (void)state;
    plimsoll_client *c = client("PLIMSOLL_TEST_URL");
    bool streams = kind_streams(c, "snippet");
    json_t *req = json_pack("{s:{s:s, s:s}, s:s}", "snippet", "language", "javascript", "code",
                            "for (let i = 0; i < 3; i++) console.log('line ' + i);"
                            "console.error('oops')",
                            "minimum_isolation", "process");
    struct seen seen = {0};
    json_t *res = NULL;
    struct plimsoll_error err;
    if (plimsoll_run_stream(c, req, on_chunk, &seen, &res, &err) < 0)
        fail_msg("%s: %s", plimsoll_errkind_name(err.kind), err.message);
    assert_string_equal(json_string_value(json_object_get(res, "stdout")),
                        "line 0\nline 1\nline 2\n");
    assert_int_equal(seen.chunks > 0, streams);
    if (seen.chunks) {
        assert_string_equal((char *)seen.out.p, "line 0\nline 1\nline 2\n");
        assert_string_equal((char *)seen.err.p, "oops\n");
    }
    json_decref(res);
    seen_free(&seen);
    /* A refusal is the unary call's. */
    json_object_set_new(req, "minimum_isolation", json_string("vm"));
    assert_int_equal(plimsoll_run_stream(c, req, on_chunk, &seen, &res, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_INSUFFICIENT_ISOLATION);
    assert_false(err.dispatched);
    json_decref(req);
    plimsoll_client_free(c);
}

/* A session's cell with live output joins its chain as a cell does. */
static void test_stream_session_cell(void **state) {
    (void)state;
    if (!have_sessions())
        return;
    plimsoll_client *c = client("PLIMSOLL_TEST_SESSION_URL");
    bool streams = kind_streams(c, "session");
    struct plimsoll_error err;
    const char *langs[] = {"python", NULL};
    plimsoll_session *s = plimsoll_session_open(c, langs, "container", &err);
    if (!s)
        fail_msg("open: %s", err.message);
    struct seen seen = {0};
    json_t *r = NULL;
    if (plimsoll_session_cell_stream(s, "python", "import sys\nprint(1)\nprint(2, file=sys.stderr)",
                                     NULL, 20000, on_chunk, &seen, &r, &err) < 0)
        fail_msg("%s: %s", plimsoll_errkind_name(err.kind), err.message);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "1\n");
    assert_int_equal(seen.chunks > 0, streams);
    if (seen.chunks) {
        assert_string_equal((char *)seen.out.p, "1\n");
        assert_string_equal((char *)seen.err.p, "2\n");
    }
    assert_int_equal(plimsoll_chain_len(plimsoll_session_chain(s)), 1);
    assert_string_equal(plimsoll_chain_head(plimsoll_session_chain(s)),
                        json_string_value(json_object_get(json_object_get(r, "record"), "digest")));
    json_decref(r);
    seen_free(&seen);
    /* A later unary cell follows it in the chain. */
    assert_int_equal(plimsoll_session_cell(s, "python", "3", NULL, 0, &r, &err), 0);
    json_decref(r);
    assert_int_equal(plimsoll_chain_len(plimsoll_session_chain(s)), 2);
    assert_int_equal(plimsoll_session_close(s, &err), 0);
    plimsoll_session_free(s);
    plimsoll_client_free(c);
}

/* ---- a cell's display outputs and a run's usage ------------------------------ */

/* 256 bytes 0..255, the PNG the display tests show. */
static const unsigned char *png_bytes(void) {
    static unsigned char b[256];
    for (size_t i = 0; i < sizeof b; i++)
        b[i] = (unsigned char)i;
    return b;
}

/* A display output {"kind", "data": {TYPE: VALUE, ...}} of n pairs. */
static json_t *display_of(const char *kind, size_t n, const char *const *pairs) {
    json_t *data = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(data, pairs[2 * i], json_string(pairs[2 * i + 1]));
    return json_pack("{s:s, s:o}", "kind", kind, "data", data);
}

/* The accessors, on an answer made here. */
static void test_outputs_accessors(void **state) {
    (void)state;
    char *png = b64(png_bytes(), 256);
    const char *a[] = {"image/png", png, "text/plain", "a png", "application/json", "{\"a\":1}"};
    const char *b[] = {"text/html", "<b>42</b>"};
    json_t *r =
        json_pack("{s:[o, o], s:i, s:{s:i, s:i, s:i, s:i, s:s}, s:[{s:{s:i, s:s}}, {}]}", "outputs",
                  display_of("display", 3, a), display_of("result", 1, b), "outputs_dropped", 3,
                  "usage", "cpu_user_ms", 5, "cpu_system_ms", 6, "memory_peak_kib", 7, "wall_ms", 8,
                  "source", "cgroup", "steps", "usage", "wall_ms", 3, "source", "gvisor");
    assert_non_null(r);
    assert_int_equal(plimsoll_outputs_count(r), 2);
    assert_int_equal(plimsoll_outputs_dropped(r), 3);
    const json_t *d0 = plimsoll_output_at(r, 0), *d1 = plimsoll_output_at(r, 1);
    assert_null(plimsoll_output_at(r, 2));
    assert_string_equal(plimsoll_display_kind(d0), "display");
    assert_string_equal(plimsoll_display_kind(d1), "result");
    assert_int_equal(plimsoll_display_types(d0), 3);
    assert_string_equal(plimsoll_display_type(d0, 0), "image/png"); /* the order sent */
    assert_string_equal(plimsoll_display_type(d0, 1), "text/plain");
    assert_string_equal(plimsoll_display_type(d0, 2), "application/json");
    assert_null(plimsoll_display_type(d0, 3));
    unsigned char *got = NULL;
    size_t n = 0;
    struct plimsoll_error err;
    assert_int_equal(plimsoll_display_bytes(d0, "image/png", &got, &n, &err), 0);
    assert_int_equal(n, 256);
    assert_memory_equal(got, png_bytes(), 256);
    assert_int_equal(got[n], 0);
    free(got);
    assert_int_equal(plimsoll_display_bytes(d0, "application/json", &got, &n, &err), 0);
    assert_int_equal(n, 7);
    assert_string_equal((char *)got, "{\"a\":1}");
    free(got);
    assert_int_equal(plimsoll_display_bytes(d1, "image/png", &got, &n, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
    assert_null(got);
    assert_true(plimsoll_mime_is_text("text/csv"));
    assert_true(plimsoll_mime_is_text("image/svg+xml"));
    assert_true(plimsoll_mime_is_text("application/vnd.plotly.v1+json"));
    assert_true(plimsoll_mime_is_text("application/atom+xml"));
    assert_false(plimsoll_mime_is_text("image/png"));
    assert_false(plimsoll_mime_is_text("application/pdf"));
    assert_false(plimsoll_mime_is_text(NULL));
    struct plimsoll_usage u;
    assert_true(plimsoll_usage_of(r, &u));
    assert_int_equal(u.cpu_user_ms, 5);
    assert_int_equal(u.cpu_system_ms, 6);
    assert_int_equal(u.memory_peak_kib, 7);
    assert_int_equal(u.wall_ms, 8);
    assert_string_equal(u.source, "cgroup");
    assert_null(plimsoll_usage_absent(r));
    json_t *steps = json_object_get(r, "steps");
    assert_true(plimsoll_usage_of(json_array_get(steps, 0), &u));
    assert_int_equal(u.wall_ms, 3);
    assert_int_equal(u.memory_peak_kib, 0);
    assert_string_equal(u.source, "gvisor");
    assert_false(plimsoll_usage_of(json_array_get(steps, 1), &u));
    assert_string_equal(u.source, "");
    assert_int_equal(u.wall_ms, 0);
    json_t *none = json_pack("{s:s}", "usage_absent", "not measured here");
    assert_false(plimsoll_usage_of(none, &u));
    assert_string_equal(plimsoll_usage_absent(none), "not measured here");
    assert_int_equal(plimsoll_outputs_count(none), 0);
    assert_int_equal(plimsoll_outputs_dropped(none), 0);
    assert_null(plimsoll_output_at(none, 0));
    assert_null(plimsoll_display_kind(NULL));
    assert_int_equal(plimsoll_display_types(NULL), 0);
    json_decref(none);
    json_decref(r);
    free(png);
}

/* RunCell's unary answer from the scripted server: body as given. */
static int cell_answer(const char *body, json_t **ret, struct plimsoll_error *err) {
    static const char id[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    struct script sc = {.ctype = "application/json"};
    bytes_add(&sc.body, body, strlen(body));
    struct fake *f = fake_start(&sc, 1);
    plimsoll_client *c = fake_client(f, 0);
    json_t *cell = json_pack("{s:s, s:s}", "language", "python", "code", "1");
    int r = plimsoll_run_cell(c, id, cell, 0, ret, err);
    json_decref(cell);
    plimsoll_client_free(c);
    fake_stop(f);
    free(sc.body.p);
    return r;
}

/* Outputs and usage that are not what the protocol says are a protocol
 * error; a well-formed answer with them is taken. */
static void test_outputs_and_usage_checked(void **state) {
    (void)state;
    static const char *const bad[] = {
        "{\"outputs\": {\"kind\": \"display\"}}",
        "{\"outputs\": [null]}",
        "{\"outputs\": [{\"kind\": \"display\", \"data\": [\"text/plain\"]}]}",
        "{\"outputs\": [{\"kind\": \"display\", \"data\": {\"text/plain\": 1}}]}",
        "{\"outputs\": [{\"kind\": 1, \"data\": {}}]}",
        "{\"outputs\": [{\"kind\": \"update\", \"data\": {\"text/plain\": \"x\"}}]}",
        "{\"outputs\": [{\"data\": {\"text/plain\": \"x\"}}]}",
        "{\"outputs\": [{\"kind\": \"display\", \"data\": {\"image/png\": \"not base64!\"}}]}",
        "{\"outputs_dropped\": -1}",
        "{\"outputs_dropped\": \"3\"}",
        "{\"usage\": []}",
        "{\"usage\": {\"cpu_user_ms\": 4294967296}}",
        "{\"usage\": {\"wall_ms\": \"1\"}}",
        "{\"usage\": {\"source\": 1}}",
        "{\"usage_absent\": false}",
        "{\"steps\": [{\"usage\": {\"memory_peak_kib\": -1}}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *res = NULL;
        struct plimsoll_error err;
        if (cell_answer(bad[i], &res, &err) != -1 || err.kind != PLIMSOLL_E_PROTOCOL)
            fail_msg("taken: %s", bad[i]);
        assert_null(res);
    }
    json_t *sent = json_pack("{s:{s:s, s:s}}", "cell", "language", "python", "code", "1");
    const char *pairs[] = {"image/png", "AAEC", "text/plain", "x"};
    json_t *resp = json_pack("{s:i, s:s, s:[o], s:i, s:{s:i, s:s}}", "exit_code", 0, "isolation",
                             "process", "outputs", display_of("display", 2, pairs),
                             "outputs_dropped", 1, "usage", "wall_ms", 9, "source", "cgroup");
    char *body = json_dumps(with_record(sent, resp), JSON_COMPACT);
    json_t *res = NULL;
    struct plimsoll_error err;
    if (cell_answer(body, &res, &err) < 0)
        fail_msg("%s: %s", plimsoll_errkind_name(err.kind), err.message);
    assert_int_equal(plimsoll_outputs_count(res), 1);
    assert_int_equal(plimsoll_outputs_dropped(res), 1);
    unsigned char *got = NULL;
    size_t n = 0;
    assert_int_equal(
        plimsoll_display_bytes(plimsoll_output_at(res, 0), "image/png", &got, &n, &err), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(got, "\0\1\2", 3);
    free(got);
    struct plimsoll_usage u;
    assert_true(plimsoll_usage_of(res, &u));
    assert_int_equal(u.wall_ms, 9);
    free(body);
    json_decref(res);
    json_decref(resp);
    json_decref(sent);
}

/* What an output function saw of a cell's display outputs: their kinds and
 * first types, in order among the output ("out:" and the bytes of a run of
 * output chunks, however the daemon cut them), each event ending in "|". */
struct shown {
    struct bytes events;
    int displays;
    bool in_output; /* the last event is output, open for more */
};

static int on_shown(void *ud, const struct plimsoll_output *ch) {
    struct shown *s = ud;
    char line[160];
    if (ch->display) {
        assert_int_equal(ch->stdout_len + ch->stderr_len, 0);
        s->displays++;
        s->in_output = false;
        snprintf(line, sizeof line, "%s %s|", plimsoll_display_kind(ch->display),
                 plimsoll_display_type(ch->display, 0));
        bytes_add(&s->events, line, strlen(line));
        return 0;
    }
    if (s->in_output)
        s->events.n--; /* its "|" */
    else
        bytes_add(&s->events, "out:", 4);
    bytes_add(&s->events, ch->stdout_data ? ch->stdout_data : "", ch->stdout_len);
    bytes_add(&s->events, "|", 1);
    s->in_output = true;
    return 0;
}

/* A display chunk's message. */
static void display_msg(struct bytes *b, json_t *display) {
    envelope_json(b, 0, json_pack("{s:{s:o}}", "output", "display", display));
}

/* A cell's stream: output, displays, the result holding outputs. */
static int cell_stream_of(struct bytes *body, struct shown *shown, json_t **ret,
                          struct plimsoll_error *err) {
    static const char id[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    struct script sc = {.body = *body};
    struct fake *f = fake_start(&sc, 1);
    plimsoll_client *c = fake_client(f, 0);
    json_t *cell = json_pack("{s:s, s:s}", "language", "python", "code", "1");
    int r = plimsoll_run_cell_stream(c, id, cell, 0, on_shown, shown, ret, err);
    json_decref(cell);
    plimsoll_client_free(c);
    fake_stop(f);
    return r;
}

/* The result message of a cell's stream: stdout and these outputs. */
static void cell_result_msg(struct bytes *b, const char *out, json_t *outputs) {
    json_t *sent = json_pack("{s:{s:s, s:s}}", "cell", "language", "python", "code", "1");
    json_t *resp = json_pack("{s:i, s:s, s:s, s:s}", "exit_code", 0, "stdout", out, "stderr", "",
                             "isolation", "process");
    if (outputs)
        json_object_set_new(resp, "outputs", outputs);
    envelope_json(b, 0, json_pack("{s:o}", "result", with_record(sent, resp)));
    json_decref(sent);
}

static void test_stream_displays(void **state) {
    (void)state;
    const char *png[] = {"image/png", "AAEC"}, *html[] = {"text/html", "<b>42</b>"};
    const char *other[] = {"text/plain", "other"};
    /* In order among the output, and the result's. */
    struct bytes b = {0};
    output_msg(&b, "a\n", 2, NULL, 0, 0);
    display_msg(&b, display_of("display", 1, png));
    output_msg(&b, "b\n", 2, NULL, 0, 0);
    display_msg(&b, display_of("result", 1, html));
    cell_result_msg(
        &b, "a\nb\n",
        json_pack("[o, o]", display_of("display", 1, png), display_of("result", 1, html)));
    end_ok(&b);
    struct shown shown = {0};
    json_t *res = NULL;
    struct plimsoll_error err;
    if (cell_stream_of(&b, &shown, &res, &err) < 0)
        fail_msg("%s: %s", plimsoll_errkind_name(err.kind), err.message);
    assert_string_equal((char *)shown.events.p,
                        "out:a\n|display image/png|out:b\n|result text/html|");
    assert_int_equal(plimsoll_outputs_count(res), 2);
    json_decref(res);
    free(shown.events.p);
    free(b.p);
    /* What breaks the stream. */
    for (int k = 0; k < 6; k++) {
        struct bytes bb = {0};
        json_t *outputs = NULL;
        const char *out = "";
        switch (k) {
        case 0: /* a display the result does not hold */
            display_msg(&bb, display_of("display", 1, png));
            break;
        case 1: /* one it holds otherwise */
            display_msg(&bb, display_of("display", 1, other));
            outputs = json_pack("[o]", display_of("display", 1, png));
            break;
        case 2: /* in another order */
            display_msg(&bb, display_of("result", 1, html));
            display_msg(&bb, display_of("display", 1, png));
            outputs =
                json_pack("[o, o]", display_of("display", 1, png), display_of("result", 1, html));
            break;
        case 3: /* one that never came, once output came */
            output_msg(&bb, "a", 1, NULL, 0, 0);
            out = "a";
            outputs = json_pack("[o]", display_of("display", 1, png));
            break;
        case 4: /* a display with output bytes */
            envelope_json(&bb, 0,
                          json_pack("{s:{s:o, s:s}}", "output", "display",
                                    display_of("display", 1, png), "stdout", "YQ=="));
            out = "a";
            outputs = json_pack("[o]", display_of("display", 1, png));
            break;
        case 5: /* a display that is not one */
            display_msg(&bb,
                        json_pack("{s:s, s:{s:s}}", "kind", "display", "data", "image/png", "%%"));
            break;
        }
        cell_result_msg(&bb, out, outputs);
        end_ok(&bb);
        struct shown sh = {0};
        res = NULL;
        if (cell_stream_of(&bb, &sh, &res, &err) != -1 || err.kind != PLIMSOLL_E_PROTOCOL)
            fail_msg("case %d taken", k);
        free(sh.events.p);
        free(bb.p);
    }
}

/* A cell of the live tests: a raw PNG, an object with an HTML
 * representation shown and then the cell's value, output between. */
static const char display_cell[] =
    "print('before')\n"
    "display({'image/png': bytes(range(256)), 'text/plain': 'a png'}, raw=True)\n"
    "class Total:\n"
    "    def _repr_html_(self): return '<b>42</b>'\n"
    "    def __repr__(self): return 'Total(42)'\n"
    "display(Total())\n"
    "print('after')\n"
    "Total()\n";

static void check_display_cell(const json_t *r) {
    assert_int_equal(json_integer_value(json_object_get(r, "exit_code")), 0);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "before\nafter\n");
    assert_int_equal(plimsoll_outputs_count(r), 3);
    assert_int_equal(plimsoll_outputs_dropped(r), 0);
    static const char *const kinds[] = {"display", "display", "result"};
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(plimsoll_display_kind(plimsoll_output_at(r, i)), kinds[i]);
    unsigned char *got = NULL;
    size_t n = 0;
    struct plimsoll_error err;
    const json_t *png = plimsoll_output_at(r, 0);
    assert_int_equal(plimsoll_display_bytes(png, "image/png", &got, &n, &err), 0);
    assert_int_equal(n, 256);
    assert_memory_equal(got, png_bytes(), 256);
    free(got);
    for (size_t i = 1; i < 3; i++) {
        const json_t *d = plimsoll_output_at(r, i);
        assert_int_equal(plimsoll_display_types(d), 2);
        assert_int_equal(plimsoll_display_bytes(d, "text/html", &got, &n, &err), 0);
        assert_string_equal((char *)got, "<b>42</b>");
        free(got);
        assert_int_equal(plimsoll_display_bytes(d, "text/plain", &got, &n, &err), 0);
        assert_string_equal((char *)got, "Total(42)");
        free(got);
    }
}

/* Docker measures every run: a usage from the cgroup. */
static void check_cgroup_usage(const json_t *r) {
    struct plimsoll_usage u;
    if (!plimsoll_usage_of(r, &u))
        fail_msg("no usage: %s", plimsoll_usage_absent(r) ? plimsoll_usage_absent(r) : "(why?)");
    assert_string_equal(u.source, "cgroup");
    assert_true(u.wall_ms > 0);
    assert_true(u.memory_peak_kib > 0);
    assert_null(plimsoll_usage_absent(r));
}

/* The harness's docker daemon keeps 8 outputs of a cell
 * (SANDBOX_DISPLAY_OUTPUTS). */
#define HARNESS_DISPLAY_OUTPUTS 8

static void test_display_live(void **state) {
    (void)state;
    if (!have_sessions())
        return;
    plimsoll_client *c = client("PLIMSOLL_TEST_SESSION_URL");
    struct plimsoll_error err;
    json_t *d = NULL;
    assert_int_equal(plimsoll_describe(c, &d, &err), 0);
    json_t *disp = json_object_get(json_object_get(d, "operations"), "display");
    assert_true(json_is_true(json_object_get(disp, "python")));
    assert_true(json_is_true(json_object_get(disp, "javascript")));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(d, "limits"), "display_outputs")),
        HARNESS_DISPLAY_OUTPUTS);
    json_decref(d);
    plimsoll_session *s = plimsoll_session_open(c, NULL, NULL, &err);
    if (!s)
        fail_msg("open: %s", err.message);
    json_t *r = NULL;
    if (plimsoll_session_cell(s, "python", display_cell, NULL, 0, &r, &err) < 0)
        fail_msg("cell: %s", err.message);
    check_display_cell(r);
    check_cgroup_usage(r);
    json_decref(r);
    /* JavaScript's display() */
    if (plimsoll_session_cell(s, "javascript", "display({a: 1}); console.log('js')", NULL, 0, &r,
                              &err) < 0)
        fail_msg("js cell: %s", err.message);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "js\n");
    assert_int_equal(plimsoll_outputs_count(r), 1);
    const json_t *js = plimsoll_output_at(r, 0);
    assert_string_equal(plimsoll_display_kind(js), "display");
    assert_int_equal(plimsoll_display_types(js), 1);
    assert_string_equal(plimsoll_display_type(js, 0), "application/json");
    unsigned char *got = NULL;
    size_t n = 0;
    assert_int_equal(plimsoll_display_bytes(js, "application/json", &got, &n, &err), 0);
    assert_string_equal((char *)got, "{\"a\":1}");
    free(got);
    json_decref(r);
    /* Past the bound, the rest are counted, not kept. */
    if (plimsoll_session_cell(s, "python",
                              "for i in range(11): display({'text/plain': str(i)}, raw=True)", NULL,
                              0, &r, &err) < 0)
        fail_msg("cell: %s", err.message);
    assert_int_equal(plimsoll_outputs_count(r), HARNESS_DISPLAY_OUTPUTS);
    assert_int_equal(plimsoll_outputs_dropped(r), 11 - HARNESS_DISPLAY_OUTPUTS);
    assert_int_equal(plimsoll_display_bytes(plimsoll_output_at(r, 7), "text/plain", &got, &n, &err),
                     0);
    assert_string_equal((char *)got, "7");
    free(got);
    json_decref(r);
    /* Streamed: each display in its place among the output. */
    struct shown shown = {0};
    if (plimsoll_session_cell_stream(s, "python", display_cell, NULL, 0, on_shown, &shown, &r,
                                     &err) < 0)
        fail_msg("stream: %s: %s", plimsoll_errkind_name(err.kind), err.message);
    check_display_cell(r);
    assert_string_equal((char *)shown.events.p, "out:before\n|display image/png|display "
                                                "text/html|out:after\n|result text/html|");
    free(shown.events.p);
    json_decref(r);
    assert_int_equal(plimsoll_chain_len(plimsoll_session_chain(s)), 4);
    /* A project's steps each have their usage, and the run its own. */
    json_t *run = json_pack("{s:{s:[{s:[s]}, {s:[s, s, s]}]}}", "project", "steps", "argv", "true",
                            "argv", "sh", "-c", "echo hi");
    if (plimsoll_session_run(s, run, &r, &err) < 0)
        fail_msg("project: %s", err.message);
    check_cgroup_usage(r);
    json_t *steps = json_object_get(r, "steps");
    assert_int_equal(json_array_size(steps), 2);
    for (size_t i = 0; i < 2; i++)
        check_cgroup_usage(json_array_get(steps, i));
    json_decref(r);
    json_decref(run);
    assert_int_equal(plimsoll_session_close(s, &err), 0);
    plimsoll_session_free(s);
    /* A one-shot snippet too. */
    if (plimsoll_run_snippet(c, "python", "print(1)", NULL, &r, &err) < 0)
        fail_msg("snippet: %s", err.message);
    check_cgroup_usage(r);
    json_decref(r);
    plimsoll_client_free(c);
}

/* The wasm daemon's usage: present with its source, or absent with why. */
static void test_usage_wasm(void **state) {
    (void)state;
    plimsoll_client *c = client("PLIMSOLL_TEST_URL");
    json_t *r = NULL;
    struct plimsoll_error err;
    if (plimsoll_run_snippet(c, "javascript", "console.log(1)", NULL, &r, &err) < 0)
        fail_msg("%s", err.message);
    struct plimsoll_usage u;
    if (plimsoll_usage_of(r, &u)) {
        assert_string_equal(u.source, "worker");
        assert_null(plimsoll_usage_absent(r));
    } else {
        assert_non_null(plimsoll_usage_absent(r));
    }
    json_decref(r);
    plimsoll_client_free(c);
}

/* The CLI at <build>/plimsoll, from the example's path. */
static void cli_path(char *cli, size_t n) {
    snprintf(cli, n, "%s", PL_EXAMPLE); /* <build>/tests/client_example */
    for (int k = 0; k < 2; k++) {
        char *slash = strrchr(cli, '/');
        assert_non_null(slash);
        *slash = '\0';
    }
    size_t len = strlen(cli);
    snprintf(cli + len, n - len, "/plimsoll");
}

/* Run the CLI with argv against the session daemon; its exit status, its
 * stderr into err (NUL-terminated). */
static int run_cli(const char *const *args, char *errout, size_t cap) {
    char cli[4096];
    cli_path(cli, sizeof cli);
    const char *argv[16] = {cli};
    size_t n = 1;
    for (; args[n - 1] && n < 15; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        close(fds[0]);
        setenv("PLIMSOLL_URL", getenv("PLIMSOLL_TEST_SESSION_URL"), 1);
        setenv("PLIMSOLL_KEY", getenv("PLIMSOLL_TEST_KEY"), 1);
        execv(cli, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = read(fds[0], errout + got, cap - 1 - got)) > 0)
        got += (size_t)r;
    errout[got] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A file's bytes (at most cap), or -1 when it cannot be read. */
static long file_bytes(const char *path, unsigned char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return (long)n;
}

static unsigned session_calls(plimsoll_client *c, const char *id) {
    json_t *info = NULL;
    struct plimsoll_error err;
    if (plimsoll_get_session(c, id, &info, &err) < 0)
        fail_msg("get: %s", err.message);
    unsigned n = (unsigned)json_integer_value(json_object_get(info, "calls"));
    json_decref(info);
    return n;
}

/* plimsoll cell --outputs DIR: each display output's data in
 * DIR/NNN-KIND.EXT, exact; a symlink DIR refused before anything is sent;
 * an existing file never overwritten. */
static void test_cli_cell_outputs(void **state) {
    (void)state;
    if (!have_sessions())
        return;
    plimsoll_client *c = client("PLIMSOLL_TEST_SESSION_URL");
    struct plimsoll_error err;
    char id[65];
    const char *langs[] = {"python", NULL};
    if (plimsoll_open_session(c, langs, id, &err) < 0)
        fail_msg("open: %s", err.message);
    char top[] = "/tmp/plimsoll-c-outputs-XXXXXX";
    assert_non_null(mkdtemp(top));
    char code[600], dir[600], link[600], path[700], errout[4096];
    snprintf(code, sizeof code, "%s/cell.py", top);
    FILE *f = fopen(code, "w");
    assert_non_null(f);
    fputs(display_cell, f);
    fclose(f);
    snprintf(dir, sizeof dir, "%s/out", top); /* made by the CLI */
    const char *args[] = {"cell",      id,  "-l", "python", "--usage",
                          "--outputs", dir, "-f", code,     NULL};
    int st = run_cli(args, errout, sizeof errout);
    if (st != 0)
        fail_msg("exit %d: %s", st, errout);
    assert_non_null(strstr(errout, "3 display outputs: 6 files in "));
    assert_non_null(strstr(errout, "plimsoll: usage: "));
    assert_non_null(strstr(errout, "(cgroup)"));
    unsigned char buf[512];
    static const struct {
        const char *name, *bytes;
    } want[] = {
        {"001-display.txt", "a png"},     {"002-display.html", "<b>42</b>"},
        {"002-display.txt", "Total(42)"}, {"003-result.html", "<b>42</b>"},
        {"003-result.txt", "Total(42)"},
    };
    snprintf(path, sizeof path, "%s/001-display.png", dir);
    assert_int_equal(file_bytes(path, buf, sizeof buf), 256);
    assert_memory_equal(buf, png_bytes(), 256);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        snprintf(path, sizeof path, "%s/%s", dir, want[i].name);
        long n = file_bytes(path, buf, sizeof buf);
        assert_int_equal(n, (long)strlen(want[i].bytes));
        assert_memory_equal(buf, want[i].bytes, (size_t)n);
    }
    /* Again into the same directory: the first name there stops it, not
     * overwritten. */
    snprintf(path, sizeof path, "%s/001-display.png", dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("keep", f);
    fclose(f);
    st = run_cli(args, errout, sizeof errout);
    assert_int_equal(st, 2);
    assert_non_null(strstr(errout, "001-display.png exists; not overwritten"));
    assert_int_equal(file_bytes(path, buf, sizeof buf), 4);
    assert_memory_equal(buf, "keep", 4);
    /* A symlink as DIR: refused, and nothing is sent. */
    snprintf(link, sizeof link, "%s/link", top);
    assert_int_equal(symlink(dir, link), 0);
    unsigned calls = session_calls(c, id);
    const char *via_link[] = {"cell", id, "-l", "python", "--outputs", link, "-f", code, NULL};
    st = run_cli(via_link, errout, sizeof errout);
    assert_int_equal(st, 2);
    assert_non_null(strstr(errout, "is a symlink; refused"));
    assert_int_equal(session_calls(c, id), calls);
    /* A symlink in DIR where a file would go is not followed either. */
    char fresh[600], target[700];
    snprintf(fresh, sizeof fresh, "%s/fresh", top);
    assert_int_equal(mkdir(fresh, 0700), 0);
    snprintf(target, sizeof target, "%s/elsewhere", top);
    snprintf(path, sizeof path, "%s/001-display.png", fresh);
    assert_int_equal(symlink(target, path), 0);
    const char *into_fresh[] = {"cell", id, "-l", "python", "--outputs", fresh, "-f", code, NULL};
    st = run_cli(into_fresh, errout, sizeof errout);
    assert_int_equal(st, 2);
    assert_int_equal(access(target, F_OK), -1);
    /* Outputs are written in JSON mode too; the JSON is the answer's. */
    char json_dir[600];
    snprintf(json_dir, sizeof json_dir, "%s/json", top);
    const char *as_json[] = {
        "cell",   id,          "-l",     "python",
        "--json", "--outputs", json_dir, "display({'image/jpeg': b'\\xff\\xd8'}, raw=True)",
        NULL};
    st = run_cli(as_json, errout, sizeof errout);
    if (st != 0)
        fail_msg("exit %d: %s", st, errout);
    snprintf(path, sizeof path, "%s/001-display.jpg", json_dir);
    assert_int_equal(file_bytes(path, buf, sizeof buf), 2);
    assert_memory_equal(buf, "\xff\xd8", 2);
    assert_int_equal(plimsoll_close_session(c, id, &err), 0);
    plimsoll_client_free(c);
    snprintf(path, sizeof path, "rm -rf '%s'", top);
    assert_int_equal(system(path), 0);
}

/* ---- one raw exchange (plimsoll_http_request) ----------------------------- */

/* Each POST and DELETE to a path outside the Connect API against the
 * scripted server: what was sent (the key, the caller's lines, the bytes),
 * what came back as it came (any status, the Content-Type, the one header
 * asked for, the body); what cannot be sent refused before anything is;
 * the cap and an address out of reach as every call has them. */
static void test_http_request(void **state) {
    (void)state;
    struct script sc[3] = {
        {.status = 200,
         .ctype = "application/json",
         .headers = "mcp-session-id:  s-1 \r\nX-Other: 2\r\n"},
        {.status = 404, .ctype = "application/json"},
        {.status = 202, .ctype = "text/plain"},
    };
    bytes_add(&sc[0].body, "{\"ok\":\0true}", 12);
    bytes_add(&sc[1].body, "{\"error\":1}", 11);
    struct fake *f = fake_start(sc, 3);
    plimsoll_client *c = fake_client(f, 3);
    const char *lines[] = {"Content-Type: application/json", "X-Test: one", NULL};
    struct plimsoll_http_answer a;
    struct plimsoll_error err;
    assert_int_equal(
        plimsoll_http_request(c,
                              &(struct plimsoll_http_request){.path = "/mcp",
                                                              .headers = lines,
                                                              .body = "{\"m\":1}",
                                                              .body_len = 7,
                                                              .answer_header = "Mcp-Session-Id"},
                              &a, &err),
        0);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.content_type, "application/json");
    assert_string_equal(a.header, "s-1");
    assert_int_equal(a.body_len, 12);
    assert_memory_equal(a.body, "{\"ok\":\0true}", 12);
    assert_int_equal(a.body[12], '\0');
    assert_string_equal(f->method, "POST");
    assert_string_equal(f->path, "/mcp");
    assert_string_equal(f->ctype, "application/json");
    assert_int_equal(f->request.n, 7);
    assert_memory_equal(f->request.p, "{\"m\":1}", 7);
    assert_non_null(strstr((char *)f->head.p, "\r\nAuthorization: Bearer plk_fake\r\n"));
    assert_non_null(strstr((char *)f->head.p, "\r\nX-Test: one\r\n"));
    assert_null(strstr((char *)f->head.p, "Expect:"));
    assert_null(strstr((char *)f->head.p, "Connect-Protocol-Version"));
    plimsoll_http_answer_free(&a);
    assert_null(a.body);
    plimsoll_http_answer_free(&a); /* a zeroed answer, again */
    /* Any status is an answer; a header not sent is NULL. */
    assert_int_equal(
        plimsoll_http_request(
            c, &(struct plimsoll_http_request){.path = "/mcp", .answer_header = "Mcp-Session-Id"},
            &a, &err),
        0);
    assert_int_equal(a.status, 404);
    assert_null(a.header);
    assert_string_equal(a.body, "{\"error\":1}");
    assert_int_equal(f->request.n, 0);
    plimsoll_http_answer_free(&a);
    const char *sid[] = {"Mcp-Session-Id: s-1", NULL};
    assert_int_equal(plimsoll_http_request(c,
                                           &(struct plimsoll_http_request){.method = "DELETE",
                                                                           .path = "/mcp",
                                                                           .headers = sid,
                                                                           .timeout_ms = 2000},
                                           &a, &err),
                     0);
    assert_int_equal(a.status, 202);
    assert_int_equal(a.body_len, 0);
    assert_non_null(a.body);
    assert_string_equal(f->method, "DELETE");
    assert_non_null(strstr((char *)f->head.p, "\r\nMcp-Session-Id: s-1\r\n"));
    plimsoll_http_answer_free(&a);
    fake_stop(f);
    /* What cannot be sent: refused, nothing sent (no server listens). */
    const char *split[] = {"X-A: 1\r\nX-B: 2", NULL}, *nocolon[] = {"X-A", NULL},
               *badname[] = {"X A: 1", NULL};
    const struct plimsoll_http_request bad[] = {
        {.method = "GET", .path = "/mcp"},
        {.path = "mcp"},
        {.path = "/m cp"},
        {.path = NULL},
        {.path = "/mcp", .headers = split},
        {.path = "/mcp", .headers = nocolon},
        {.path = "/mcp", .headers = badname},
        {.method = "DELETE", .path = "/mcp", .body = "x", .body_len = 1},
        {.path = "/mcp", .body_len = 3},
        {.path = "/mcp", .answer_header = "Mcp-Session-Id:"},
        {.path = "/mcp", .timeout_ms = -1},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        a.status = 99;
        assert_int_equal(plimsoll_http_request(c, &bad[i], &a, &err), -1);
        assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
        assert_int_equal(a.status, 0);
        assert_null(a.body);
    }
    /* Out of reach: infrastructure, "unavailable" (f's port is closed). */
    assert_int_equal(
        plimsoll_http_request(c, &(struct plimsoll_http_request){.path = "/mcp"}, &a, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_INFRASTRUCTURE);
    assert_string_equal(err.code, "unavailable");
    plimsoll_client_free(c);
    /* Past the client's cap: a protocol error, with the status. */
    struct script big = {.status = 200, .ctype = "application/json"};
    for (int i = 0; i < 100; i++)
        bytes_add(&big.body, "0123456789", 10);
    f = fake_start(&big, 1);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", f->port);
    c = plimsoll_client_new(&(struct plimsoll_options){.url = url, .max_answer_bytes = 999}, &err);
    assert_non_null(c);
    assert_int_equal(
        plimsoll_http_request(c, &(struct plimsoll_http_request){.path = "/x"}, &a, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_PROTOCOL);
    assert_non_null(strstr(err.message, "max_answer_bytes"));
    assert_null(a.body);
    plimsoll_client_free(c);
    fake_stop(f);
    for (size_t i = 0; i < 3; i++)
        free(sc[i].body.p);
    free(big.body.p);
}

/* ---- sessions behind a proxy (Plimsoll-Route) ----------------------------- */

#define ROUTE_ID "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e"

/* A script answering JSON text with status. */
static struct script json_script(int status, const char *text) {
    struct script sc = {.status = status, .ctype = "application/json"};
    bytes_add(&sc.body, text, strlen(text));
    return sc;
}

/* A Connect refusal of reason, as the daemon sends it. */
static struct script refusal_script(int status, const char *code, const char *reason) {
    char text[512];
    snprintf(text, sizeof(text),
             "{\"code\":\"%s\",\"message\":\"%s, as the test says\",\"details\":[{\"type\":"
             "\"google.rpc.ErrorInfo\",\"debug\":{\"reason\":\"%s\",\"domain\":\"plimsoll\","
             "\"metadata\":{\"dispatched\":\"false\"}}}]}",
             code, reason, reason);
    return json_script(status, text);
}

/* A SessionInfo of ROUTE_ID naming route (NULL: none). */
static struct script info_script(const char *route) {
    char text[512];
    snprintf(text, sizeof(text),
             "{\"session_id\":\"" ROUTE_ID "\",\"state\":\"ready\",\"previous_digest\":\"\","
             "\"calls\":0%s%s%s}",
             route ? ",\"route\":\"" : "", route ? route : "", route ? "\"" : "");
    return json_script(200, text);
}

/* Whether the last request of f carried the route header (route NULL:
 * none at all). */
static void assert_route_sent(const struct fake *f, const char *route) {
    const char *h = strcasestr((const char *)f->head.p, "\r\nPlimsoll-Route:");
    if (!route) {
        if (h)
            fail_msg("%s sent a route: %s", f->path, (const char *)f->head.p);
        return;
    }
    char want[128];
    snprintf(want, sizeof(want), "\r\nPlimsoll-Route: %s\r\n", route);
    if (!strstr((const char *)f->head.p, want))
        fail_msg("%s did not send %s: %s", f->path, route, (const char *)f->head.p);
    assert_ptr_equal(strstr((const char *)f->head.p, want), h); /* once */
}

/* A handle sends OpenSession's route with each later call, over every
 * kind of call (unary, stream, files, GetSession, ExtendSession,
 * CloseSession); OpenSession itself goes anywhere. */
static void test_session_route_sent(void **state) {
    (void)state;
    static const char *const methods[] = {
        "OpenSession", "RunInSession", "RunCell",    "RunCellStream", "WriteFiles",
        "ReadFile",    "ListFiles",    "GetSession", "ExtendSession", "CloseSession"};
    struct script sc[10];
    sc[0] = json_script(200, "{\"session_id\":\"" ROUTE_ID "\",\"route\":\"daemon-1.eu_west\"}");
    for (size_t i = 1; i < 10; i++)
        sc[i] = refusal_script(404, "not_found", "NOT_FOUND");
    free(sc[7].body.p);
    free(sc[8].body.p);
    sc[7] = info_script("daemon-1.eu_west");
    sc[8] = info_script("daemon-1.eu_west");
    struct fake *f = fake_start(sc, 10);
    plimsoll_client *c = fake_client(f, 0);
    struct plimsoll_error err;
    plimsoll_session *s = plimsoll_session_open(c, NULL, NULL, &err);
    if (!s)
        fail_msg("open: %s", err.message);
    assert_string_equal(plimsoll_session_route(s), "daemon-1.eu_west");
    assert_route_sent(f, NULL);
    json_t *r = NULL, *run = py_run("1"),
           *files = json_pack("[{s:s, s:s}]", "path", "a", "content", "a");
    for (size_t i = 1; i < 10; i++) {
        int rc = 0;
        switch (i) {
        case 1: rc = plimsoll_session_run(s, run, &r, &err); break;
        case 2: rc = plimsoll_session_cell(s, "python", "1", NULL, 0, &r, &err); break;
        case 3:
            rc = plimsoll_session_cell_stream(s, "python", "1", NULL, 0, NULL, NULL, &r, &err);
            break;
        case 4: rc = plimsoll_session_write_files(s, files, &r, &err); break;
        case 5: rc = plimsoll_session_read_file(s, "a", 0, 0, &r, &err); break;
        case 6: rc = plimsoll_session_list_files(s, NULL, 0, &r, &err); break;
        case 7: rc = plimsoll_session_info(s, &r, &err); break;
        case 8: rc = plimsoll_session_extend(s, 60, &r, &err); break;
        case 9: rc = plimsoll_session_close(s, &err); break;
        }
        if (i == 7 || i == 8) {
            if (rc != 0)
                fail_msg("%s: %s", methods[i], err.message);
            json_decref(r);
            r = NULL;
        } else {
            assert_int_equal(rc, -1);
            assert_int_equal(err.kind, PLIMSOLL_E_NOT_FOUND);
        }
        char path[128];
        snprintf(path, sizeof(path), "/plimsoll.v1.SandboxService/%s", methods[i]);
        assert_string_equal(f->path, path);
        assert_route_sent(f, "daemon-1.eu_west");
    }
    json_decref(run);
    json_decref(files);
    plimsoll_session_free(s);
    plimsoll_client_free(c);
    fake_stop(f);
    for (size_t i = 0; i < 10; i++)
        free(sc[i].body.p);

    /* A daemon that names no route: nothing is sent, ever. */
    struct script old[2] = {json_script(200, "{\"session_id\":\"" ROUTE_ID "\"}"),
                            refusal_script(404, "not_found", "NOT_FOUND")};
    f = fake_start(old, 2);
    c = fake_client(f, 0);
    s = plimsoll_session_open(c, NULL, NULL, &err);
    assert_non_null(s);
    assert_string_equal(plimsoll_session_route(s), "");
    assert_int_equal(plimsoll_session_cell(s, "python", "1", NULL, 0, &r, &err), -1);
    assert_route_sent(f, NULL);
    assert_string_equal(plimsoll_session_route(NULL), "");
    plimsoll_session_free(s);
    plimsoll_client_free(c);
    fake_stop(f);
    for (size_t i = 0; i < 2; i++)
        free(old[i].body.p);
}

/* plimsoll_session_connect_route: the route given goes with GetSession
 * and every later call; without one, the handle takes GetSession's; one no
 * daemon may have is PLIMSOLL_E_USAGE with nothing sent; WRONG_ROUTE is
 * its typed refusal, never retried; a route answered that no daemon may
 * have is PLIMSOLL_E_PROTOCOL. */
static void test_session_connect_route(void **state) {
    (void)state;
    struct script sc[6] = {info_script("answered"),
                           refusal_script(404, "not_found", "NOT_FOUND"),
                           info_script("answered"),
                           refusal_script(404, "not_found", "NOT_FOUND"),
                           refusal_script(503, "unavailable", "WRONG_ROUTE"),
                           info_script("bad route")};
    struct fake *f = fake_start(sc, 6);
    plimsoll_client *c = fake_client(f, 4);
    struct plimsoll_error err;
    json_t *r = NULL;
    static const char *const bad[] = {
        "has space", "a/b", "x\r\nInjected: 1",
        "\xc3\xa9",  "a:b", "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_null(plimsoll_session_connect_route(c, ROUTE_ID, NULL, bad[i], &err));
        assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
        assert_non_null(strstr(err.message, "route"));
    }
    assert_int_equal(f->served, 0);

    plimsoll_session *s = plimsoll_session_connect_route(c, ROUTE_ID, NULL, "given", &err);
    if (!s)
        fail_msg("connect: %s", err.message);
    assert_route_sent(f, "given");
    assert_string_equal(plimsoll_session_route(s), "given");
    assert_int_equal(plimsoll_session_cell(s, "python", "1", NULL, 0, &r, &err), -1);
    assert_route_sent(f, "given");
    plimsoll_session_free(s);

    s = plimsoll_session_connect_route(c, ROUTE_ID, NULL, NULL, &err);
    assert_non_null(s);
    assert_route_sent(f, NULL);
    assert_string_equal(plimsoll_session_route(s), "answered");
    assert_int_equal(plimsoll_session_cell(s, "python", "1", NULL, 0, &r, &err), -1);
    assert_route_sent(f, "answered");

    /* WRONG_ROUTE: typed, not dispatched, not retried (the client retries
     * up to 4 attempts what may be). */
    size_t before = f->served;
    assert_int_equal(plimsoll_session_cell(s, "python", "1", NULL, 0, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_WRONG_ROUTE);
    assert_string_equal(err.reason, "WRONG_ROUTE");
    assert_string_equal(err.code, "unavailable");
    assert_int_equal(err.http_status, 503);
    assert_false(err.dispatched);
    assert_false(plimsoll_errkind_retryable(err.kind));
    assert_string_equal(plimsoll_errkind_name(PLIMSOLL_E_WRONG_ROUTE), "WRONG_ROUTE");
    assert_int_equal(plimsoll_chain_len(plimsoll_session_chain(s)), 0);
    plimsoll_session_free(s);

    assert_null(plimsoll_session_connect_route(c, ROUTE_ID, NULL, "", &err));
    assert_int_equal(err.kind, PLIMSOLL_E_PROTOCOL);
    assert_true(f->served >= before + 1);
    plimsoll_client_free(c);
    fake_stop(f);
    for (size_t i = 0; i < 6; i++)
        free(sc[i].body.p);
}

/* Against the harness's session daemon (PLIMSOLL_INSTANCE=clients-docker):
 * a session's route is PLIMSOLL_TEST_SESSION_ROUTE and its calls work; a
 * handle taken up elsewhere is WRONG_ROUTE and nothing ran; with the right
 * route it works. */
static void test_session_route_live(void **state) {
    (void)state;
    if (!have_sessions())
        return;
    const char *route = env("PLIMSOLL_TEST_SESSION_ROUTE");
    plimsoll_client *c = client("PLIMSOLL_TEST_SESSION_URL");
    struct plimsoll_error err;
    const char *langs[] = {"python", NULL};
    plimsoll_session *s = plimsoll_session_open(c, langs, NULL, &err);
    if (!s)
        fail_msg("open: %s", err.message);
    assert_string_equal(plimsoll_session_route(s), route);
    json_t *r = NULL;
    if (plimsoll_session_cell(s, "python", "x = 41", NULL, 0, &r, &err) < 0)
        fail_msg("cell: %s", err.message);
    json_decref(r);
    json_t *files = json_pack("[{s:s, s:s}]", "path", "r.txt", "content", "r");
    assert_int_equal(plimsoll_session_write_files(s, files, &r, &err), 0);
    json_decref(r);
    json_decref(files);
    json_t *info = NULL;
    assert_int_equal(plimsoll_session_info(s, &info, &err), 0);
    assert_string_equal(json_string_value(json_object_get(info, "route")), route);
    assert_int_equal(json_integer_value(json_object_get(info, "calls")), 2);
    json_decref(info);

    /* Elsewhere: refused before anything runs. */
    assert_null(plimsoll_session_connect_route(c, plimsoll_session_id(s), NULL, "elsewhere", &err));
    assert_int_equal(err.kind, PLIMSOLL_E_WRONG_ROUTE);
    assert_string_equal(err.code, "unavailable");
    assert_int_equal(err.http_status, 503);
    assert_false(err.dispatched);
    assert_null(
        plimsoll_session_connect_route(c, plimsoll_session_id(s), NULL, "no such/route", &err));
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);

    /* The right route: a handle that works, its chain going on. */
    plimsoll_session *again =
        plimsoll_session_connect_route(c, plimsoll_session_id(s), NULL, route, &err);
    if (!again)
        fail_msg("connect: %s", err.message);
    assert_string_equal(plimsoll_session_route(again), route);
    assert_int_equal(plimsoll_session_cell(again, "python", "print(x + 1)", NULL, 0, &r, &err), 0);
    assert_string_equal(json_string_value(json_object_get(r, "stdout")), "42\n");
    json_decref(r);
    assert_int_equal(plimsoll_session_read_file(again, "r.txt", 0, 0, &r, &err), 0);
    assert_string_equal(json_string_value(json_object_get(r, "content")), "r");
    json_decref(r);
    assert_int_equal(plimsoll_session_info(again, &info, &err), 0);
    assert_int_equal(json_integer_value(json_object_get(info, "calls")), 4);
    json_decref(info);
    assert_int_equal(plimsoll_session_close(again, &err), 0);
    plimsoll_session_free(again);
    plimsoll_session_free(s);
    plimsoll_client_free(c);
}

static void test_usage_errors(void **state) {
    (void)state;
    struct plimsoll_error err;
    assert_null(plimsoll_client_new(&(struct plimsoll_options){.url = "ftp://x"}, &err));
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
    assert_null(plimsoll_client_new(&(struct plimsoll_options){.api_key = "a\nb"}, &err));
    plimsoll_client *c = plimsoll_client_new(NULL, &err);
    assert_non_null(c);
    json_t *r = NULL;
    assert_int_equal(plimsoll_run_cell(c, "not-an-id", NULL, 0, &r, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
    assert_null(plimsoll_session_open(c, NULL, "sideways", &err));
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
    plimsoll_client_free(c);
    assert_true(plimsoll_errkind_retryable(PLIMSOLL_E_AT_CAPACITY));
    assert_true(plimsoll_errkind_retryable(PLIMSOLL_E_RATE_LIMITED));
    assert_false(plimsoll_errkind_retryable(PLIMSOLL_E_ISOLATION_EVIDENCE_MISMATCH));
    assert_false(plimsoll_errkind_retryable(PLIMSOLL_E_INFRASTRUCTURE));
    assert_string_equal(plimsoll_errkind_name(PLIMSOLL_E_SESSION_ENDED), "SESSION_ENDED");
}

/* The settings from the environment: PLIMSOLL_URL; PLIMSOLL_KEY before
 * PLIMSOLL_KEY_FILE's first line, both trimmed; what opts gives first. */
static int describe_with_env(const struct plimsoll_options *o, struct plimsoll_error *err) {
    plimsoll_client *c = plimsoll_client_from_env(o, err);
    if (!c)
        return -2;
    json_t *d = NULL;
    int r = plimsoll_describe(c, &d, err);
    json_decref(d);
    plimsoll_client_free(c);
    return r;
}

static void test_client_from_env(void **state) {
    (void)state;
    struct plimsoll_error err;
    char path[] = "/tmp/plimsoll-keyfile-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "  %s \nsecond line\n", env("PLIMSOLL_TEST_KEY"));
    fclose(f);
    setenv("PLIMSOLL_URL", env("PLIMSOLL_TEST_URL"), 1);
    unsetenv("PLIMSOLL_KEY");
    setenv("PLIMSOLL_KEY_FILE", path, 1);
    assert_int_equal(describe_with_env(NULL, &err), 0);
    /* PLIMSOLL_KEY comes first, and what the caller gives before both. */
    setenv("PLIMSOLL_KEY", "plk_not-a-key", 1);
    assert_int_equal(describe_with_env(NULL, &err), -1);
    assert_int_equal(err.kind, PLIMSOLL_E_UNAUTHENTICATED);
    assert_int_equal(
        describe_with_env(&(struct plimsoll_options){.api_key = env("PLIMSOLL_TEST_KEY")}, &err),
        0);
    setenv("PLIMSOLL_KEY", " \t", 1); /* blank: as if unset */
    assert_int_equal(describe_with_env(NULL, &err), 0);
    /* A key file that cannot be read is the caller's error, named. */
    unsetenv("PLIMSOLL_KEY");
    setenv("PLIMSOLL_KEY_FILE", "/nonexistent/plimsoll-key", 1);
    assert_int_equal(describe_with_env(NULL, &err), -2);
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
    assert_string_equal(
        err.message,
        "cannot read the key file /nonexistent/plimsoll-key: No such file or directory");
    setenv("PLIMSOLL_KEY_FILE", "/tmp", 1);
    assert_int_equal(describe_with_env(NULL, &err), -2);
    assert_non_null(strstr(err.message, "cannot read the key file /tmp: "));
    f = fopen(path, "w");
    fprintf(f, "\n%s\n", env("PLIMSOLL_TEST_KEY"));
    fclose(f);
    setenv("PLIMSOLL_KEY_FILE", path, 1);
    assert_int_equal(describe_with_env(NULL, &err), -2);
    assert_non_null(strstr(err.message, "holds no key on its first line"));
    /* No message holds the key. */
    setenv("PLIMSOLL_KEY", "plk_sekrit-sekrit\nmore", 1);
    assert_int_equal(describe_with_env(NULL, &err), -2);
    assert_int_equal(err.kind, PLIMSOLL_E_USAGE);
    assert_null(strstr(err.message, "sekrit"));
    setenv("PLIMSOLL_KEY", "plk_sekrit with-a-space", 1);
    assert_int_equal(describe_with_env(NULL, &err), -2);
    assert_non_null(strstr(err.message, "only visible ASCII"));
    assert_null(strstr(err.message, "sekrit"));
    /* The URL is trimmed too; an empty key given reads the environment. */
    char padded[512];
    snprintf(padded, sizeof(padded), " %s\n", env("PLIMSOLL_TEST_URL"));
    setenv("PLIMSOLL_URL", padded, 1);
    setenv("PLIMSOLL_KEY", env("PLIMSOLL_TEST_KEY"), 1);
    assert_int_equal(describe_with_env(&(struct plimsoll_options){.api_key = ""}, &err), 0);
    unlink(path);
    unsetenv("PLIMSOLL_KEY");
    unsetenv("PLIMSOLL_KEY_FILE");
    unsetenv("PLIMSOLL_URL");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canonical_vectors),
        cmocka_unit_test(test_record_vectors),
        cmocka_unit_test(test_chain_vectors),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_client_from_env),
        cmocka_unit_test(test_reason_table_is_the_files),
        cmocka_unit_test(test_every_reason_of_the_file),
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_readme_example),
        cmocka_unit_test(test_snippet_runs_and_record_checks),
        cmocka_unit_test(test_nonzero_exit_is_a_result),
        cmocka_unit_test(test_module_runs),
        cmocka_unit_test(test_typed_refusals),
        cmocka_unit_test(test_unreachable_is_infrastructure),
        cmocka_unit_test(test_lowered_isolation_is_a_mismatch_never_retried),
        cmocka_unit_test(test_rate_limited_and_retry),
        cmocka_unit_test(test_at_capacity_and_retry),
        cmocka_unit_test(test_session_chain),
        cmocka_unit_test(test_session_floor_is_checked),
        cmocka_unit_test(test_session_management),
        cmocka_unit_test(test_session_files),
        cmocka_unit_test(test_artifacts_live),
        cmocka_unit_test(test_snippet_artifacts_live),
        cmocka_unit_test(test_artifacts_save_refuses),
        cmocka_unit_test(test_hostile_limits),
        cmocka_unit_test(test_hostile_answers),
        cmocka_unit_test(test_cli_hostile),
        cmocka_unit_test(test_stream_live_and_checked),
        cmocka_unit_test(test_stream_every_split),
        cmocka_unit_test(test_stream_protocol_errors),
        cmocka_unit_test(test_stream_refusals_and_errors),
        cmocka_unit_test(test_stream_result_checks),
        cmocka_unit_test(test_stream_project_steps),
        cmocka_unit_test(test_stream_retry),
        cmocka_unit_test(test_stream_cell),
        cmocka_unit_test(test_stream_real_daemon),
        cmocka_unit_test(test_stream_session_cell),
        cmocka_unit_test(test_outputs_accessors),
        cmocka_unit_test(test_outputs_and_usage_checked),
        cmocka_unit_test(test_stream_displays),
        cmocka_unit_test(test_display_live),
        cmocka_unit_test(test_usage_wasm),
        cmocka_unit_test(test_cli_cell_outputs),
        cmocka_unit_test(test_http_request),
        cmocka_unit_test(test_session_route_sent),
        cmocka_unit_test(test_session_connect_route),
        cmocka_unit_test(test_session_route_live),
    };
    return cmocka_run_group_tests_name("libplimsoll", tests, NULL, NULL);
}
