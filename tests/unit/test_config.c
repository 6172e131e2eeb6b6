/* SPDX-License-Identifier: Apache-2.0 */
/* test_config.c: settings validation, each startup error by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <unistd.h>

#include "../../src/core/config.h"
#include "../../src/providers/provider.h"

struct env {
    const char *kv[32][2];
};

static const char *lookup(const char *name, void *ud) {
    struct env *e = ud;
    for (int i = 0; i < 32 && e->kv[i][0]; i++)
        if (strcmp(e->kv[i][0], name) == 0)
            return e->kv[i][1];
    return NULL;
}

/* Load with the keys file set plus the given pairs; returns the result. */
static int load(struct pl_config *c, struct pl_error *err, const char *const *pairs) {
    static struct env e;
    memset(&e, 0, sizeof(e));
    e.kv[0][0] = "PLIMSOLL_KEYS_FILE";
    e.kv[0][1] = "/dev/null";
    int i = 1;
    for (; pairs && pairs[0]; pairs += 2, i++) {
        e.kv[i][0] = pairs[0];
        e.kv[i][1] = pairs[1];
    }
    memset(err, 0, sizeof(*err));
    return pl_config_load(c, lookup, &e, err);
}

#define LOAD(...) load(&c, &err, (const char *const[]){__VA_ARGS__, NULL, NULL})

static void assert_refused_naming(int r, const struct pl_error *err, const char *setting) {
    assert_int_equal(r, -1);
    if (strncmp(err->message, setting, strlen(setting)) != 0)
        fail_msg("message \"%s\" does not start with %s", err->message, setting);
}

static void test_defaults(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    assert_int_equal(load(&c, &err, NULL), 0);
    assert_string_equal(c.provider, "disabled");
    assert_int_equal(c.min_isolation, PL_TIER_NONE);
    assert_int_equal(c.max_concurrent, 8);
    assert_int_equal(c.per_key_concurrent, 4); /* half the global cap */
    assert_int_equal(c.memory_mb, 256);
    assert_int_equal(c.total_memory_mb, 0);
    assert_int_equal(c.rate_per_min, 600);
    assert_int_equal(c.rate_burst, 60);
    assert_int_equal(c.listen.kind, PL_LISTEN_TCP);
    assert_string_equal(c.listen.host, "127.0.0.1");
    assert_int_equal(c.listen.port, 7475);
    assert_int_equal(pl_config_effective_concurrency(&c, true), 8);
}

static void test_empty_provider_is_disabled(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    assert_int_equal(LOAD("SANDBOX_PROVIDER", ""), 0);
    assert_string_equal(c.provider, "disabled");
}

static void test_per_key_default_is_half(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    assert_int_equal(LOAD("SANDBOX_MAX_CONCURRENT", "10"), 0);
    assert_int_equal(c.per_key_concurrent, 5);
    assert_int_equal(LOAD("SANDBOX_MAX_CONCURRENT", "1"), 0);
    assert_int_equal(c.per_key_concurrent, 1);
    assert_int_equal(LOAD("SANDBOX_MAX_CONCURRENT", "10", "SANDBOX_PER_KEY_CONCURRENT", "10"), 0);
    assert_int_equal(c.per_key_concurrent, 10);
    assert_refused_naming(LOAD("SANDBOX_MAX_CONCURRENT", "10", "SANDBOX_PER_KEY_CONCURRENT", "11"),
                          &err, "SANDBOX_PER_KEY_CONCURRENT");
}

static void test_session_max_lifetime(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    assert_int_equal(LOAD("SANDBOX_SESSION_LIFETIME", "600"), 0);
    assert_int_equal(c.session_max_lifetime_s, 86400);
    /* never below the lifetime a session gets at open */
    assert_int_equal(LOAD("SANDBOX_SESSION_LIFETIME", "172800"), 0);
    assert_int_equal(c.session_max_lifetime_s, 172800);
    assert_int_equal(LOAD("SANDBOX_SESSION_LIFETIME", "600", "SANDBOX_SESSION_MAX_LIFETIME", "600"),
                     0);
    assert_int_equal(c.session_max_lifetime_s, 600);
    assert_refused_naming(
        LOAD("SANDBOX_SESSION_LIFETIME", "600", "SANDBOX_SESSION_MAX_LIFETIME", "599"), &err,
        "SANDBOX_SESSION_MAX_LIFETIME");
    assert_refused_naming(LOAD("SANDBOX_SESSION_MAX_LIFETIME", "604801"), &err,
                          "SANDBOX_SESSION_MAX_LIFETIME");
    assert_refused_naming(LOAD("SANDBOX_SESSION_MAX_LIFETIME", "1e5"), &err,
                          "SANDBOX_SESSION_MAX_LIFETIME");
}

static void test_malformed_tier(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    assert_refused_naming(LOAD("SANDBOX_MIN_ISOLATION", "strong"), &err, "SANDBOX_MIN_ISOLATION");
    assert_refused_naming(LOAD("SANDBOX_MIN_ISOLATION", "Kernel"), &err, "SANDBOX_MIN_ISOLATION");
    assert_int_equal(LOAD("SANDBOX_MIN_ISOLATION", "vm"), 0);
    assert_int_equal(c.min_isolation, PL_TIER_VM);
}

static void test_memory_pair(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    assert_refused_naming(LOAD("SANDBOX_MEMORY_MB", "256"), &err, "SANDBOX_MEMORY_MB");
    assert_refused_naming(LOAD("SANDBOX_TOTAL_MEMORY_MB", "1024"), &err, "SANDBOX_TOTAL_MEMORY_MB");
    assert_refused_naming(LOAD("SANDBOX_MEMORY_MB", "2048", "SANDBOX_TOTAL_MEMORY_MB", "1024"),
                          &err, "SANDBOX_MEMORY_MB");
    /* Equal is the edge that still admits one run. */
    assert_int_equal(LOAD("SANDBOX_MEMORY_MB", "1024", "SANDBOX_TOTAL_MEMORY_MB", "1024"), 0);
    assert_int_equal(pl_config_effective_concurrency(&c, true), 1);
}

static void test_effective_concurrency(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    /* The spec's example: cap 8, 1024 MB budget, 256 MB a run -> 4. */
    assert_int_equal(LOAD("SANDBOX_MAX_CONCURRENT", "8", "SANDBOX_TOTAL_MEMORY_MB", "1024",
                          "SANDBOX_MEMORY_MB", "256"),
                     0);
    assert_int_equal(pl_config_effective_concurrency(&c, true), 4);
    /* Providers whose sandboxes run elsewhere ignore the budget. */
    assert_int_equal(pl_config_effective_concurrency(&c, false), 8);
    /* The count is smaller than the budget allows. */
    assert_int_equal(LOAD("SANDBOX_MAX_CONCURRENT", "2", "SANDBOX_TOTAL_MEMORY_MB", "1024",
                          "SANDBOX_MEMORY_MB", "256"),
                     0);
    assert_int_equal(pl_config_effective_concurrency(&c, true), 2);
    /* 1000 / 256 rounds down to 3. */
    assert_int_equal(LOAD("SANDBOX_TOTAL_MEMORY_MB", "1000", "SANDBOX_MEMORY_MB", "256"), 0);
    assert_int_equal(pl_config_effective_concurrency(&c, true), 3);
}

static void test_integer_bounds(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    assert_refused_naming(LOAD("SANDBOX_MAX_CONCURRENT", "0"), &err, "SANDBOX_MAX_CONCURRENT");
    assert_refused_naming(LOAD("SANDBOX_MAX_CONCURRENT", "4097"), &err, "SANDBOX_MAX_CONCURRENT");
    assert_int_equal(LOAD("SANDBOX_MAX_CONCURRENT", "4096"), 0);
    assert_refused_naming(LOAD("SANDBOX_MAX_CONCURRENT", "-1"), &err, "SANDBOX_MAX_CONCURRENT");
    assert_refused_naming(LOAD("SANDBOX_MAX_CONCURRENT", "8x"), &err, "SANDBOX_MAX_CONCURRENT");
    assert_refused_naming(LOAD("SANDBOX_MAX_CONCURRENT", " 8"), &err, "SANDBOX_MAX_CONCURRENT");
    assert_refused_naming(LOAD("SANDBOX_MAX_CONCURRENT", "99999999999999999999999"), &err,
                          "SANDBOX_MAX_CONCURRENT");
    assert_refused_naming(LOAD("SANDBOX_RATE_PER_MIN", "0"), &err, "SANDBOX_RATE_PER_MIN");
    assert_refused_naming(LOAD("SANDBOX_OUTPUT_BYTES", "1023"), &err, "SANDBOX_OUTPUT_BYTES");
    assert_refused_naming(LOAD("SANDBOX_MEMORY_MB", "15", "SANDBOX_TOTAL_MEMORY_MB", "1024"), &err,
                          "SANDBOX_MEMORY_MB");
    assert_refused_naming(LOAD("SANDBOX_TIMEOUT_MS", "70000"), &err, "SANDBOX_TIMEOUT_MS");
    assert_refused_naming(LOAD("SANDBOX_RATE_BURST", "0"), &err, "SANDBOX_RATE_BURST");
}

/* The front door's bounds: each default, and each edge (at it, one past). */
static void test_front_door(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    assert_int_equal(load(&c, &err, NULL), 0);
    assert_int_equal(c.max_request_bytes, 14680064);
    assert_int_equal(c.request_bytes_in_flight, 64u << 20);
    assert_int_equal(c.request_read_timeout_ms, 30000);
    assert_int_equal(c.answer_send_timeout_ms, 30000);
    assert_int_equal(c.max_connections, 256);
    assert_int_equal(c.max_connections_per_address, 64); /* a quarter */

    assert_int_equal(LOAD("PLIMSOLL_REQUEST_READ_TIMEOUT_MS", "100"), 0);
    assert_refused_naming(LOAD("PLIMSOLL_REQUEST_READ_TIMEOUT_MS", "99"), &err,
                          "PLIMSOLL_REQUEST_READ_TIMEOUT_MS");
    assert_int_equal(LOAD("PLIMSOLL_REQUEST_READ_TIMEOUT_MS", "3600000"), 0);
    assert_refused_naming(LOAD("PLIMSOLL_REQUEST_READ_TIMEOUT_MS", "3600001"), &err,
                          "PLIMSOLL_REQUEST_READ_TIMEOUT_MS");
    assert_int_equal(LOAD("PLIMSOLL_ANSWER_SEND_TIMEOUT_MS", "100"), 0);
    assert_refused_naming(LOAD("PLIMSOLL_ANSWER_SEND_TIMEOUT_MS", "99"), &err,
                          "PLIMSOLL_ANSWER_SEND_TIMEOUT_MS");
    assert_refused_naming(LOAD("PLIMSOLL_ANSWER_SEND_TIMEOUT_MS", "3600001"), &err,
                          "PLIMSOLL_ANSWER_SEND_TIMEOUT_MS");

    assert_int_equal(LOAD("PLIMSOLL_MAX_CONNECTIONS", "4"), 0);
    assert_int_equal(c.max_connections_per_address, 1);
    assert_int_equal(
        LOAD("PLIMSOLL_MAX_CONNECTIONS", "16", "PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS", "16"), 0);
    assert_int_equal(c.max_connections_per_address, 16);
    assert_refused_naming(
        LOAD("PLIMSOLL_MAX_CONNECTIONS", "16", "PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS", "17"), &err,
        "PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS");
    assert_refused_naming(LOAD("PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS", "0"), &err,
                          "PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS");

    /* One key's share: half the bytes in flight, at least one largest body. */
    assert_int_equal(load(&c, &err, NULL), 0);
    assert_int_equal(c.key_request_bytes_in_flight, 32u << 20);
    assert_int_equal(LOAD("PLIMSOLL_MAX_REQUEST_BYTES", "65536",
                          "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT", "100000"),
                     0);
    assert_int_equal(c.key_request_bytes_in_flight, 65536);
    assert_int_equal(LOAD("PLIMSOLL_MAX_REQUEST_BYTES", "65536",
                          "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT", "65536"),
                     0);
    assert_refused_naming(LOAD("PLIMSOLL_MAX_REQUEST_BYTES", "65536",
                               "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT", "65535"),
                          &err, "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT");
    assert_int_equal(LOAD("PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT", "67108864"), 0);
    assert_refused_naming(LOAD("PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT", "67108865"), &err,
                          "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT");

    /* The bytes in flight hold at least one largest body. */
    assert_int_equal(LOAD("PLIMSOLL_MAX_REQUEST_BYTES", "134217728"), 0);
    assert_int_equal(c.request_bytes_in_flight, 134217728);
    assert_int_equal(LOAD("PLIMSOLL_MAX_REQUEST_BYTES", "65536",
                          "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT", "65536"),
                     0);
    assert_refused_naming(LOAD("PLIMSOLL_MAX_REQUEST_BYTES", "65537",
                               "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT", "65536"),
                          &err, "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT");
    assert_refused_naming(LOAD("PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT", "65535"), &err,
                          "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT");
    assert_int_equal(LOAD("PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT", "4294967295"), 0);
    assert_refused_naming(LOAD("PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT", "4294967296"), &err,
                          "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT");
    assert_int_equal(LOAD("PLIMSOLL_MAX_REQUEST_BYTES", "268435456"), 0);
    assert_refused_naming(LOAD("PLIMSOLL_MAX_REQUEST_BYTES", "268435457"), &err,
                          "PLIMSOLL_MAX_REQUEST_BYTES");
}

static void test_listen(void **state) {
    (void)state;
    struct pl_listen l;
    assert_int_equal(pl_listen_parse("0.0.0.0:80", &l), 0);
    assert_int_equal(l.port, 80);
    assert_int_equal(pl_listen_parse("[::1]:9000", &l), 0);
    assert_string_equal(l.host, "::1");
    assert_int_equal(pl_listen_parse("unix:/run/plimsoll.sock", &l), 0);
    assert_int_equal(l.kind, PL_LISTEN_UNIX);
    assert_string_equal(l.path, "/run/plimsoll.sock");
    assert_int_equal(pl_listen_parse("localhost:0", &l), 0);
    assert_int_equal(pl_listen_parse("unix:relative", &l), -1);
    assert_int_equal(pl_listen_parse("host", &l), -1);
    assert_int_equal(pl_listen_parse("host:", &l), -1);
    assert_int_equal(pl_listen_parse(":80", &l), -1);
    assert_int_equal(pl_listen_parse("h:65536", &l), -1);
    assert_int_equal(pl_listen_parse("::1:80", &l), -1);
    struct pl_config c;
    struct pl_error err;
    assert_refused_naming(LOAD("PLIMSOLL_LISTEN", "nowhere"), &err, "PLIMSOLL_LISTEN");
}

static void test_console(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    assert_int_equal(load(&c, &err, NULL), 0);
    assert_true(c.console); /* on unless turned off */
    assert_int_equal(LOAD("PLIMSOLL_CONSOLE", "off"), 0);
    assert_false(c.console);
    assert_int_equal(LOAD("PLIMSOLL_CONSOLE", "on"), 0);
    assert_true(c.console);
    assert_refused_naming(LOAD("PLIMSOLL_CONSOLE", "yes"), &err, "PLIMSOLL_CONSOLE");
    assert_refused_naming(LOAD("PLIMSOLL_CONSOLE", "OFF"), &err, "PLIMSOLL_CONSOLE");
}

/* PLIMSOLL_INSTANCE: the route key; the host's name when unset. */
static void test_instance(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    char host[256] = "";
    assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
    assert_int_equal(load(&c, &err, NULL), 0);
    assert_string_equal(c.instance, host);
    assert_int_equal(LOAD("PLIMSOLL_INSTANCE", "d-1.east_2"), 0);
    assert_string_equal(c.instance, "d-1.east_2");
    char longest[64];
    memset(longest, 'a', 63);
    longest[63] = '\0';
    assert_int_equal(LOAD("PLIMSOLL_INSTANCE", longest), 0);
    assert_string_equal(c.instance, longest);
    char too_long[65];
    memset(too_long, 'a', 64);
    too_long[64] = '\0';
    const char *bad[] = {too_long, "a b", "d1/x", "d1:7475", "\xc3\xa9", "d1\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_refused_naming(LOAD("PLIMSOLL_INSTANCE", bad[i]), &err, "PLIMSOLL_INSTANCE");
    assert_true(pl_route_valid("d1"));
    assert_false(pl_route_valid(""));
    assert_false(pl_route_valid(too_long));
    /* SIGTERM's notice: none unless set, at most 5 minutes. */
    assert_int_equal(c.drain_notice_ms, 0);
    assert_int_equal(LOAD("PLIMSOLL_DRAIN_NOTICE_MS", "300000"), 0);
    assert_int_equal(c.drain_notice_ms, 300000);
    assert_refused_naming(LOAD("PLIMSOLL_DRAIN_NOTICE_MS", "300001"), &err,
                          "PLIMSOLL_DRAIN_NOTICE_MS");
}

static void test_keys_file_required(void **state) {
    (void)state;
    struct env e = {0};
    struct pl_config c;
    struct pl_error err = {0};
    assert_int_equal(pl_config_load(&c, lookup, &e, &err), -1);
    assert_non_null(strstr(err.message, "PLIMSOLL_KEYS_FILE"));
}

static void test_reserved_settings_refused(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    for (const char *const *r = pl_config_reserved_settings; *r; r++)
        assert_refused_naming(load(&c, &err, (const char *const[]){*r, "1", NULL, NULL}), &err, *r);
}

/* Provider selection: unknown, not built, and below the floor. */
static void test_provider_start(void **state) {
    (void)state;
    struct pl_config c;
    struct pl_error err;
    struct pl_provider *p = NULL;
    assert_int_equal(LOAD("SANDBOX_PROVIDER", "kvm"), 0);
    assert_refused_naming(pl_provider_start(&c, &p, &err), &err, "SANDBOX_PROVIDER");
    assert_non_null(strstr(err.message, "unknown provider"));

    assert_int_equal(LOAD("SANDBOX_PROVIDER", "disabled", "SANDBOX_MIN_ISOLATION", "process"), 0);
    assert_refused_naming(pl_provider_start(&c, &p, &err), &err, "SANDBOX_MIN_ISOLATION");

    assert_int_equal(LOAD("SANDBOX_MIN_ISOLATION", "none"), 0);
    assert_int_equal(pl_provider_start(&c, &p, &err), 0);
    assert_string_equal(pl_provider_name(p), "disabled");
    assert_int_equal(p->info.tier, PL_TIER_NONE);
    assert_false(pl_provider_runs(p)); /* Disabled never runs anything */
    pl_provider_stop(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_empty_provider_is_disabled),
        cmocka_unit_test(test_per_key_default_is_half),
        cmocka_unit_test(test_session_max_lifetime),
        cmocka_unit_test(test_malformed_tier),
        cmocka_unit_test(test_memory_pair),
        cmocka_unit_test(test_effective_concurrency),
        cmocka_unit_test(test_integer_bounds),
        cmocka_unit_test(test_front_door),
        cmocka_unit_test(test_listen),
        cmocka_unit_test(test_console),
        cmocka_unit_test(test_instance),
        cmocka_unit_test(test_keys_file_required),
        cmocka_unit_test(test_reserved_settings_refused),
        cmocka_unit_test(test_provider_start),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
