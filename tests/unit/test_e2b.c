/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2b.c: the e2b provider's parts that need no VM: its settings (every
 * rule at its edge), the envelopes of a Connect stream (hosted/envelope.c),
 * envd's process events (e2b/events.c) and the VM's metrics read as a
 * run's usage (e2b/usage.c), fed as a hostile or broken server would send
 * them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/providers/e2b/e2b_int.h"
#include "settings_test.h"

/* ---- settings ------------------------------------------------------------ */

/* The two required settings plus one more (name may be NULL). */
static int load(const char *name, const char *value, struct eb_settings *s, struct pl_error *err) {
    struct env e = {{"E2B_API_KEY", "SANDBOX_E2B_TEMPLATE", name}, {"k", "tmpl", value}};
    struct pl_config c = {.lookup = lookup, .lookup_userdata = &e};
    return eb_load_settings(&c, s, err);
}

static void test_settings_defaults(void **state) {
    (void)state;
    struct eb_settings s;
    struct pl_error err = {0};
    assert_int_equal(load(NULL, NULL, &s, &err), 0);
    assert_string_equal(s.api_url, "https://api.e2b.app");
    assert_string_equal(s.scheme, "https");
    assert_string_equal(s.port_suffix, "");
    assert_string_equal(s.instance, "default");
    assert_int_equal(s.cpu_count, 2);
    assert_int_equal(s.memory_mb, 512);
    assert_string_equal(s.workdir, "/home/user/project");
}

static void test_settings_required(void **state) {
    (void)state;
    struct eb_settings s;
    struct pl_error err = {0};
    struct env none = {{NULL}, {NULL}};
    struct pl_config c = {.lookup = lookup, .lookup_userdata = &none};
    assert_int_equal(eb_load_settings(&c, &s, &err), -1);
    assert_non_null(strstr(err.message, "E2B_API_KEY: required"));
    struct env key_only = {{"E2B_API_KEY"}, {"k"}};
    c.lookup_userdata = &key_only;
    assert_int_equal(eb_load_settings(&c, &s, &err), -1);
    assert_non_null(strstr(err.message, "SANDBOX_E2B_TEMPLATE: required"));
    /* An empty value is an unset one. */
    struct env empty = {{"E2B_API_KEY", "SANDBOX_E2B_TEMPLATE"}, {"", "t"}};
    c.lookup_userdata = &empty;
    assert_int_equal(eb_load_settings(&c, &s, &err), -1);
    assert_non_null(strstr(err.message, "E2B_API_KEY"));
    /* A key that could split a header is refused, and never echoed. */
    struct env crlf = {{"E2B_API_KEY", "SANDBOX_E2B_TEMPLATE"}, {"secret\r\nX-Evil: 1", "t"}};
    c.lookup_userdata = &crlf;
    assert_int_equal(eb_load_settings(&c, &s, &err), -1);
    assert_null(strstr(err.message, "secret"));
}

static void test_settings_api_url(void **state) {
    (void)state;
    struct eb_settings s;
    struct pl_error err = {0};
    assert_int_equal(load("SANDBOX_E2B_API_URL", "http://127.0.0.1:8080/", &s, &err), 0);
    assert_string_equal(s.scheme, "http");
    assert_string_equal(s.port_suffix, ":8080");
    assert_string_equal(s.api_url, "http://127.0.0.1:8080");
    assert_int_equal(load("SANDBOX_E2B_API_URL", "http://localhost:1", &s, &err), 0);
    assert_int_equal(load("SANDBOX_E2B_API_URL", "https://api.example.test:443", &s, &err), 0);
    /* The key never crosses the network in the clear. */
    assert_int_equal(load("SANDBOX_E2B_API_URL", "http://api.example.test", &s, &err), -1);
    assert_non_null(strstr(err.message, "plain http"));
    const char *bad[] = {"ftp://x",        "https://",         "https://a/b",
                         "https://a:",     "https://a:123456", "https://a:8x",
                         "https://user@a", "https://a?q",      NULL};
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(load("SANDBOX_E2B_API_URL", bad[i], &s, &err), -1);
        assert_non_null(strstr(err.message, "SANDBOX_E2B_API_URL"));
    }
}

static void test_settings_bounds(void **state) {
    (void)state;
    struct eb_settings s;
    struct pl_error err = {0};
    assert_int_equal(load("SANDBOX_E2B_CPU_COUNT", "1", &s, &err), 0);
    assert_int_equal(load("SANDBOX_E2B_CPU_COUNT", "64", &s, &err), 0);
    assert_int_equal(load("SANDBOX_E2B_CPU_COUNT", "0", &s, &err), -1);
    assert_int_equal(load("SANDBOX_E2B_CPU_COUNT", "65", &s, &err), -1);
    assert_int_equal(load("SANDBOX_E2B_MEMORY_MB", "128", &s, &err), 0);
    assert_int_equal(load("SANDBOX_E2B_MEMORY_MB", "127", &s, &err), -1);
    assert_int_equal(load("SANDBOX_E2B_REAP_INTERVAL_S", "4", &s, &err), -1);
    assert_int_equal(load("SANDBOX_E2B_VM_SLACK_S", "3601", &s, &err), -1);
    assert_int_equal(load("SANDBOX_E2B_INSTANCE", "a b", &s, &err), -1);
    assert_int_equal(load("SANDBOX_E2B_TEMPLATE", "x", &s, &err), 0);
    assert_int_equal(load("SANDBOX_E2B_WORKDIR", "relative", &s, &err), -1);
    assert_int_equal(load("SANDBOX_E2B_WORKDIR", "/a/../etc", &s, &err), -1);
    assert_int_equal(load("SANDBOX_E2B_WORKDIR", "/a b", &s, &err), -1);
    assert_int_equal(load("SANDBOX_E2B_EGRESS_PROBE", "10.0.0.1:80,example.test:443", &s, &err), 0);
    const char *bad[] = {"10.0.0.1", ":80", "a:", "a:1x", "a:80,", "a b:80", "a:123456", NULL};
    for (int i = 0; bad[i]; i++)
        assert_int_equal(load("SANDBOX_E2B_EGRESS_PROBE", bad[i], &s, &err), -1);
}

static void test_settings_guard(void **state) {
    (void)state;
    struct eb_settings s;
    struct pl_error err = {0};
    assert_int_equal(load(NULL, NULL, &s, &err), 0);
    assert_string_equal(s.guard_url, ""); /* no guard: grants off */
    assert_int_equal(load("E2B_GUARD_URL", "http://10.1.2.3:7480", &s, &err), 0);
    assert_string_equal(s.guard_ip, "10.1.2.3");
    assert_int_equal(s.guard_port, 7480);
    assert_string_equal(s.guard_listen, "0.0.0.0");
    const char *bad[] = {"https://10.1.2.3:1",      "http://guard.example:80",
                         "http://10.1.2.3",         "http://10.1.2.3:0",
                         "http://10.1.2.3:65536",   "http://10.1.2.300:80",
                         "http://10.1.2.3:80/path", "http://10.1.2.3:80x",
                         "http://1.2.3:80",         NULL};
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(load("E2B_GUARD_URL", bad[i], &s, &err), -1);
        assert_non_null(strstr(err.message, "E2B_GUARD_URL"));
    }
}

/* ---- envelopes ------------------------------------------------------------ */

struct seen {
    int n;
    unsigned flags[8];
    char msg[8][64];
    int refuse_at; /* on_message refuses the n-th message (1-based); 0 never */
};

static int on_msg(void *ud, unsigned flags, const unsigned char *m, size_t len) {
    struct seen *s = ud;
    if (s->n < 8) {
        s->flags[s->n] = flags;
        snprintf(s->msg[s->n], sizeof(s->msg[0]), "%.*s", (int)len, m);
    }
    s->n++;
    return s->refuse_at == s->n ? -1 : 0;
}

static void test_envelopes_any_split(void **state) {
    (void)state;
    struct pl_buf b = {0};
    assert_int_equal(ph_envelope_append(&b, 0, "{\"a\":1}", 7), 0);
    assert_int_equal(ph_envelope_append(&b, 0, "", 0), 0);
    assert_int_equal(ph_envelope_append(&b, PH_FLAG_END_STREAM, "{}", 2), 0);
    /* Every way of cutting the bytes in two gives the same messages. */
    for (size_t cut = 0; cut <= b.len; cut++) {
        struct seen s = {0};
        struct ph_envelopes e;
        ph_envelopes_init(&e, 64, on_msg, &s);
        assert_int_equal(ph_envelopes_feed(&e, (unsigned char *)b.data, cut), 0);
        assert_int_equal(ph_envelopes_feed(&e, (unsigned char *)b.data + cut, b.len - cut), 0);
        assert_int_equal(s.n, 3);
        assert_string_equal(s.msg[0], "{\"a\":1}");
        assert_string_equal(s.msg[1], "");
        assert_int_equal(s.flags[2], PH_FLAG_END_STREAM);
        assert_true(ph_envelopes_idle(&e));
        ph_envelopes_free(&e);
    }
    pl_buf_free(&b);
}

static void test_envelopes_bounds(void **state) {
    (void)state;
    /* A length past the cap breaks the stream before anything is held. */
    unsigned char big[5] = {0, 0x7f, 0xff, 0xff, 0xff};
    struct seen s = {0};
    struct ph_envelopes e;
    ph_envelopes_init(&e, 1024, on_msg, &s);
    assert_int_equal(ph_envelopes_feed(&e, big, 5), -1);
    assert_null(e.msg);
    assert_int_equal(ph_envelopes_feed(&e, (unsigned char *)"x", 1), -1); /* stays broken */
    ph_envelopes_free(&e);
    /* Exactly the cap is fine; a half message is not idle. */
    struct pl_buf b = {0};
    assert_int_equal(ph_envelope_append(&b, 0, "0123456789", 10), 0);
    ph_envelopes_init(&e, 10, on_msg, &s);
    assert_int_equal(ph_envelopes_feed(&e, (unsigned char *)b.data, 8), 0);
    assert_false(ph_envelopes_idle(&e));
    assert_int_equal(ph_envelopes_feed(&e, (unsigned char *)b.data + 8, b.len - 8), 0);
    assert_true(ph_envelopes_idle(&e));
    ph_envelopes_free(&e);
    /* A refusal from the reader breaks the stream. */
    struct seen r = {.refuse_at = 1};
    ph_envelopes_init(&e, 10, on_msg, &r);
    assert_int_equal(ph_envelopes_feed(&e, (unsigned char *)b.data, b.len), -1);
    ph_envelopes_free(&e);
    pl_buf_free(&b);
}

/* ---- envd's process events ------------------------------------------------ */

static int feed_events(struct eb_proc *p, const char *const *events, unsigned flags_last,
                       struct eb_stream *st) {
    struct pl_buf b = {0};
    for (int i = 0; events[i]; i++)
        ph_envelope_append(&b, events[i + 1] ? 0 : flags_last, events[i], strlen(events[i]));
    eb_stream_init(st, p);
    int rc = eb_stream_feed(st, (unsigned char *)b.data, b.len);
    pl_buf_free(&b);
    return rc;
}

static void test_events_a_run(void **state) {
    (void)state;
    struct eb_proc p;
    eb_proc_init(&p, 4);
    struct eb_stream st;
    const char *ev[] = {"{\"event\":{\"start\":{\"pid\":42}}}",
                        "{\"event\":{\"data\":{\"stdout\":\"aGVsbG8=\"}}}", /* hello */
                        "{\"event\":{\"keepalive\":{}}}",
                        "{\"event\":{\"data\":{\"stderr\":\"b29wcw==\"}}}", /* oops */
                        "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}",
                        "{}",
                        NULL};
    assert_int_equal(feed_events(&p, ev, PH_FLAG_END_STREAM, &st), 0);
    assert_int_equal(st.pid, 42);
    assert_true(st.trailer);
    assert_true(p.ended);
    assert_int_equal(p.exit_code, 0); /* proto3 JSON omits a zero exitCode */
    /* Kept up to the cap, counted beyond it. */
    assert_int_equal(p.out.kept.len, 4);
    assert_int_equal(p.out.total, 5);
    assert_true(pl_capture_truncated(&p.out));
    assert_int_equal(p.err.kept.len, 4);
    eb_stream_free(&st);
    eb_proc_free(&p);
}

static void test_events_endings(void **state) {
    (void)state;
    struct eb_proc p;
    struct eb_stream st;
    eb_proc_init(&p, 64);
    const char *exit3[] = {"{\"event\":{\"end\":{\"exitCode\":3,\"exited\":true}}}", NULL};
    assert_int_equal(feed_events(&p, exit3, 0, &st), 0);
    assert_int_equal(p.exit_code, 3);
    eb_stream_free(&st);
    eb_proc_free(&p);
    /* Ended by a signal: not "exited"; the shell's 128 + 9. */
    eb_proc_init(&p, 64);
    const char *killed[] = {"{\"event\":{\"end\":{\"exitCode\":-1,\"status\":\"signal: killed\"}}}",
                            NULL};
    assert_int_equal(feed_events(&p, killed, 0, &st), 0);
    assert_true(p.ended);
    assert_int_equal(p.exit_code, 137);
    eb_stream_free(&st);
    eb_proc_free(&p);
    /* The end-of-stream error is kept for the message. */
    eb_proc_init(&p, 64);
    const char *trailer[] = {"{\"error\":{\"code\":\"deadline_exceeded\",\"message\":\"late\"}}",
                             NULL};
    assert_int_equal(feed_events(&p, trailer, PH_FLAG_END_STREAM, &st), 0);
    assert_false(p.ended);
    assert_string_equal(st.trailer_error, "deadline_exceeded: late");
    eb_stream_free(&st);
    eb_proc_free(&p);
}

static void test_events_hostile(void **state) {
    (void)state;
    const char *bad[] = {
        "not json",
        "{\"nothing\":1}",
        "{\"event\":{\"start\":{\"pid\":0}}}",
        "{\"event\":{\"start\":{\"pid\":-5}}}",
        "{\"event\":{\"data\":{\"stdout\":\"***\"}}}",
        "{\"event\":{\"data\":{\"stdout\":7}}}",
        "{\"event\":{\"end\":{\"exitCode\":\"3\"}}}",
        NULL,
    };
    for (int i = 0; bad[i]; i++) {
        struct eb_proc p;
        struct eb_stream st;
        eb_proc_init(&p, 64);
        const char *one[] = {bad[i], NULL};
        assert_int_equal(feed_events(&p, one, 0, &st), -1);
        assert_false(p.ended);
        eb_stream_free(&st);
        eb_proc_free(&p);
    }
    /* Nothing may follow the end of the stream; compression was never asked for. */
    struct eb_proc p;
    struct eb_stream st;
    eb_proc_init(&p, 64);
    const char *after[] = {"{}", NULL};
    assert_int_equal(feed_events(&p, after, PH_FLAG_END_STREAM, &st), 0);
    struct pl_buf b = {0};
    ph_envelope_append(&b, 0, "{\"event\":{\"keepalive\":{}}}", 26);
    assert_int_equal(eb_stream_feed(&st, (unsigned char *)b.data, b.len), -1);
    eb_stream_free(&st);
    eb_proc_free(&p);
    eb_proc_init(&p, 64);
    eb_stream_init(&st, &p);
    b.len = 0;
    ph_envelope_append(&b, PH_FLAG_COMPRESSED, "x", 1);
    assert_int_equal(eb_stream_feed(&st, (unsigned char *)b.data, b.len), -1);
    eb_stream_free(&st);
    eb_proc_free(&p);
    pl_buf_free(&b);
}

/* ---- usage from E2B's metrics -------------------------------------------- */

static json_t *sample(long long t, int cores, double pct, long long mem) {
    return json_pack("{s:s, s:I, s:i, s:f, s:I, s:I, s:I, s:I, s:I}", "timestamp",
                     "2026-01-01T00:00:00Z", "timestampUnix", (json_int_t)t, "cpuCount", cores,
                     "cpuUsedPct", pct, "memUsed", (json_int_t)mem, "memTotal",
                     (json_int_t)(512 << 20), "memCache", (json_int_t)0, "diskUsed", (json_int_t)0,
                     "diskTotal", (json_int_t)0);
}

static void test_usage_from_samples(void **state) {
    (void)state;
    struct pl_usage u;
    char why[128] = "";
    /* Out of order, one outside the window, two of one second (the later
     * stands): 2 cores at 50% for 2 s, then at 25% for 1 s. */
    json_t *a = json_array();
    json_array_append_new(a, sample(1003, 2, 25.0, 30 << 20));
    json_array_append_new(a, sample(1000, 2, 90.0, 10 << 20));
    json_array_append_new(a, sample(1002, 2, 10.0, 99 << 20));
    json_array_append_new(a, sample(1002, 2, 50.0, 20 << 20));
    json_array_append_new(a, sample(900, 2, 100.0, 500 << 20));
    assert_int_equal(eb_usage_of(a, 1000, 1010, &u, why, sizeof(why)), 0);
    assert_true(u.present);
    assert_string_equal(u.source, "service");
    assert_int_equal(u.cpu_user_us, 2000000 + 500000);
    assert_int_equal(u.cpu_system_us, 0);
    assert_int_equal(u.memory_peak_bytes, 30u << 20);
    json_decref(a);

    /* One sample in the window: no figures, and why. */
    a = json_array();
    json_array_append_new(a, sample(1000, 2, 50.0, 1));
    json_array_append_new(a, sample(1000, 2, 50.0, 1));
    assert_int_equal(eb_usage_of(a, 1000, 1010, &u, why, sizeof(why)), -1);
    assert_false(u.present);
    assert_non_null(strstr(why, "held one sample"));
    json_decref(a);
    a = json_array();
    assert_int_equal(eb_usage_of(a, 1000, 1010, &u, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "held no samples"));
    json_decref(a);
}

static void test_usage_refuses_what_is_no_sample(void **state) {
    (void)state;
    struct pl_usage u;
    char why[128];
    const char *bad[] = {
        "{}",
        "[1]",
        "[{\"timestampUnix\": 1000, \"cpuCount\": 2, \"cpuUsedPct\": 50, \"memUsed\": -1}]",
        "[{\"timestampUnix\": 1000, \"cpuCount\": 0, \"cpuUsedPct\": 50, \"memUsed\": 1}]",
        "[{\"timestampUnix\": 1000, \"cpuCount\": 2, \"cpuUsedPct\": 500, \"memUsed\": 1}]",
        "[{\"timestampUnix\": 1000, \"cpuCount\": 2, \"cpuUsedPct\": -1, \"memUsed\": 1}]",
        "[{\"timestampUnix\": \"1000\", \"cpuCount\": 2, \"cpuUsedPct\": 5, \"memUsed\": 1}]",
        "[{\"timestampUnix\": 1000, \"cpuCount\": 2, \"memUsed\": 1}]",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *a = json_loads(bad[i], 0, NULL);
        assert_non_null(a);
        why[0] = '\0';
        assert_int_equal(eb_usage_of(a, 0, 2000, &u, why, sizeof(why)), -1);
        assert_false(u.present);
        assert_true(why[0] != '\0');
        json_decref(a);
    }
    /* A long-lived VM's many samples: the first EB_USAGE_MAX_SAMPLES count. */
    json_t *a = json_array();
    for (long long t = 0; t < EB_USAGE_MAX_SAMPLES + 10; t++)
        json_array_append_new(a, sample(t, 1, 100.0, t));
    assert_int_equal(eb_usage_of(a, 0, 1 << 30, &u, why, sizeof(why)), 0);
    assert_int_equal(u.cpu_user_us, (uint64_t)(EB_USAGE_MAX_SAMPLES - 1) * 1000000u);
    assert_int_equal(u.memory_peak_bytes, EB_USAGE_MAX_SAMPLES - 1);
    json_decref(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settings_defaults),
        cmocka_unit_test(test_settings_required),
        cmocka_unit_test(test_settings_api_url),
        cmocka_unit_test(test_settings_bounds),
        cmocka_unit_test(test_settings_guard),
        cmocka_unit_test(test_envelopes_any_split),
        cmocka_unit_test(test_envelopes_bounds),
        cmocka_unit_test(test_events_a_run),
        cmocka_unit_test(test_events_endings),
        cmocka_unit_test(test_events_hostile),
        cmocka_unit_test(test_usage_from_samples),
        cmocka_unit_test(test_usage_refuses_what_is_no_sample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
