/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_client.c: libplimsoll against the shared vectors and real daemons.
 *
 * Run under tests/clients/harness.py, which starts the daemons and names
 * them in PLIMSOLL_TEST_* (docs/clients.md); without PLIMSOLL_TEST_URL
 * every daemon test fails rather than skips.  The session tests print a
 * skip when the harness had no docker engine.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

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
    setenv("PLIMSOLL_URL", env("PLIMSOLL_TEST_URL"), 1);
    setenv("PLIMSOLL_KEY", env("PLIMSOLL_TEST_KEY"), 1);
    FILE *p = popen(PL_EXAMPLE, "r");
    assert_non_null(p);
    char out[64] = {0};
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    assert_int_equal(pclose(p), 0);
    assert_true(n > 0);
    assert_string_equal(out, "42\n");
    unsetenv("PLIMSOLL_URL");
    unsetenv("PLIMSOLL_KEY");
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

/* The library's table: each refusal kind (between PLIMSOLL_OK and
 * PLIMSOLL_E_REFUSED) is a refusal reason of the file, retried as it says. */
static void test_reason_table_is_the_files(void **state) {
    (void)state;
    json_t *v = vectors("reasons.json");
    json_t *list = json_object_get(v, "reasons");
    char got[256], want[256];
    for (int k = PLIMSOLL_OK + 1; k < PLIMSOLL_E_REFUSED; k++) {
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
        if (err.kind > PLIMSOLL_OK && err.kind < PLIMSOLL_E_REFUSED && !strcmp(kind, err.reason))
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
    default: return err->kind <= PLIMSOLL_E_REFUSED ? "refusal" : "other";
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canonical_vectors),
        cmocka_unit_test(test_record_vectors),
        cmocka_unit_test(test_chain_vectors),
        cmocka_unit_test(test_usage_errors),
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
        cmocka_unit_test(test_hostile_limits),
        cmocka_unit_test(test_hostile_answers),
        cmocka_unit_test(test_cli_hostile),
    };
    return cmocka_run_group_tests_name("libplimsoll", tests, NULL, NULL);
}
