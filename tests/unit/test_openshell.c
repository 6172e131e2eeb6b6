/* SPDX-License-Identifier: Apache-2.0 */
/* test_openshell.c: the openshell provider's settings, every rule at its
 * edge (src/providers/openshell/settings.c); gRPC's response lines as the
 * client reads them (hosted/grpc.c); and ExecSandbox's events
 * (openshell/event.c), packed here with protobuf-c as a gateway would;
 * the relay's frames (openshell/relay_frame.c), every rule at its edge. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/providers/openshell/osh_int.h"
#include "openshell.pb-c.h"
#include "settings_test.h"

/* The required settings, after up to two that come first (and so win). */
static int load2(const char *n1, const char *v1, const char *n2, const char *v2,
                 struct osh_settings *s, struct pl_error *err) {
    const char *names[] = {"SANDBOX_OPENSHELL_URL", "SANDBOX_OPENSHELL_TOKEN",
                           "SANDBOX_OPENSHELL_IMAGE"};
    const char *values[] = {"https://gw.invalid:8443", "tok", "ns/img:1"};
    struct env e = {{NULL}, {NULL}};
    int n = 0;
    if (n1) {
        e.name[n] = n1;
        e.value[n++] = v1;
    }
    if (n2) {
        e.name[n] = n2;
        e.value[n++] = v2;
    }
    for (int i = 0; i < 3; i++) {
        e.name[n] = names[i];
        e.value[n++] = values[i];
    }
    struct pl_config c = {.lookup = lookup, .lookup_userdata = &e};
    return osh_load_settings(&c, s, err);
}

static void refused2(const char *n1, const char *v1, const char *n2, const char *v2,
                     const char *phrase) {
    struct osh_settings s;
    struct pl_error err = {0};
    if (load2(n1, v1, n2, v2, &s, &err) != -1)
        fail_msg("%s=%s was accepted", n1, v1);
    if (!strstr(err.message, phrase))
        fail_msg("%s=%s: \"%s\" lacks \"%s\"", n1, v1, err.message, phrase);
    assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
    assert_null(strstr(err.message, "tok\""));
}

static void refused(const char *name, const char *value, const char *phrase) {
    refused2(name, value, NULL, NULL, phrase);
}

static void accepted(const char *name, const char *value) {
    struct osh_settings s;
    struct pl_error err = {0};
    if (load2(name, value, NULL, NULL, &s, &err) != 0)
        fail_msg("%s=%s refused: %s", name, value, err.message);
}

static void test_defaults(void **state) {
    (void)state;
    struct osh_settings s;
    struct pl_error err = {0};
    assert_int_equal(load2(NULL, NULL, NULL, NULL, &s, &err), 0);
    assert_string_equal(s.url, "https://gw.invalid:8443");
    assert_string_equal(s.token, "tok");
    assert_string_equal(s.cpu, "1");
    assert_int_equal(s.memory_mib, 512);
    assert_string_equal(s.instance, "default");
    assert_string_equal(s.workdir, "/tmp/plimsoll/project");
    assert_int_equal(s.call_timeout_ms, 30000);
}

static void test_required(void **state) {
    (void)state;
    struct osh_settings s;
    struct pl_error err = {0};
    struct pl_config none = {.lookup = lookup, .lookup_userdata = &(struct env){{NULL}, {NULL}}};
    assert_int_equal(osh_load_settings(&none, &s, &err), -1);
    assert_non_null(strstr(err.message, "SANDBOX_OPENSHELL_URL"));
    /* Neither a token nor a client certificate: who calls is unknown. */
    refused("SANDBOX_OPENSHELL_TOKEN", "",
            "SANDBOX_OPENSHELL_TOKEN or SANDBOX_OPENSHELL_CERT_FILE");
}

static void test_url(void **state) {
    (void)state;
    accepted("SANDBOX_OPENSHELL_URL", "http://127.0.0.1:8080");
    refused("SANDBOX_OPENSHELL_URL", "http://gw.example:8080", "SANDBOX_OPENSHELL_URL");
    refused("SANDBOX_OPENSHELL_URL", "ftp://gw.example", "SANDBOX_OPENSHELL_URL");
    refused("SANDBOX_OPENSHELL_URL", "https://gw.example/path", "SANDBOX_OPENSHELL_URL");
    /* TLS material only with https. */
    refused2("SANDBOX_OPENSHELL_URL", "http://127.0.0.1:1", "SANDBOX_OPENSHELL_CA_FILE",
             PL_SOURCE_ROOT "/README.md", "https://");
    refused("SANDBOX_OPENSHELL_CA_FILE", "relative.pem", "SANDBOX_OPENSHELL_CA_FILE");
    refused("SANDBOX_OPENSHELL_CA_FILE", "/nonexistent/ca.pem", "SANDBOX_OPENSHELL_CA_FILE");
    accepted("SANDBOX_OPENSHELL_CA_FILE", PL_SOURCE_ROOT "/README.md");
    refused("SANDBOX_OPENSHELL_CERT_FILE", PL_SOURCE_ROOT "/README.md", "both or neither");
}

static void test_limits_and_names(void **state) {
    (void)state;
    accepted("SANDBOX_OPENSHELL_CPU", "2");
    accepted("SANDBOX_OPENSHELL_CPU", "500m");
    accepted("SANDBOX_OPENSHELL_CPU", "999999m");
    refused("SANDBOX_OPENSHELL_CPU", "0", "SANDBOX_OPENSHELL_CPU");
    refused("SANDBOX_OPENSHELL_CPU", "0.5", "SANDBOX_OPENSHELL_CPU");
    refused("SANDBOX_OPENSHELL_CPU", "1000000m", "SANDBOX_OPENSHELL_CPU");
    refused("SANDBOX_OPENSHELL_CPU", "2Gi", "SANDBOX_OPENSHELL_CPU");
    accepted("SANDBOX_OPENSHELL_CPU", ""); /* empty is unset: the default */
    accepted("SANDBOX_OPENSHELL_MEMORY_MIB", "64");
    refused("SANDBOX_OPENSHELL_MEMORY_MIB", "63", "SANDBOX_OPENSHELL_MEMORY_MIB");
    accepted("SANDBOX_OPENSHELL_MEMORY_MIB", "65536");
    refused("SANDBOX_OPENSHELL_MEMORY_MIB", "65537", "SANDBOX_OPENSHELL_MEMORY_MIB");
    refused("SANDBOX_OPENSHELL_IMAGE", "img; rm -rf /", "SANDBOX_OPENSHELL_IMAGE");
    refused("SANDBOX_OPENSHELL_INSTANCE", "a b", "SANDBOX_OPENSHELL_INSTANCE");
    refused("SANDBOX_OPENSHELL_WORKDIR", "/home/sandbox/p", "under /tmp");
    accepted("SANDBOX_OPENSHELL_WORKDIR", "/tmp/w");
    refused("SANDBOX_OPENSHELL_TOKEN", "a\nb", "SANDBOX_OPENSHELL_TOKEN");
}

static void lines(struct ph_grpc_call *c, long *http, bool *grpc, const char *const *l) {
    c->status = -1;
    c->message[0] = '\0';
    *http = 0;
    *grpc = false;
    for (; *l; l++)
        ph_grpc_header_line(c, *l, strlen(*l), http, grpc);
}

static void test_grpc_lines(void **state) {
    (void)state;
    struct ph_grpc_call c;
    long http;
    bool grpc;
    lines(&c, &http, &grpc,
          (const char *[]){"HTTP/2 200\r\n", "Content-Type: application/grpc+proto\r\n",
                           "grpc-status: 5\r\n", "grpc-message: no%20such%0Asandbox%zz\r\n", NULL});
    assert_int_equal(http, 200);
    assert_true(grpc);
    assert_int_equal(c.status, PH_GRPC_NOT_FOUND);
    /* decoded, the line break dropped, a broken escape kept as is */
    assert_string_equal(c.message, "no suchsandbox%zz");
    lines(&c, &http, &grpc,
          (const char *[]){"HTTP/2 2000\r\n", "content-type: application/grpcx\r\n",
                           "grpc-status: 1x\r\n", NULL});
    assert_int_equal(http, 0);
    assert_false(grpc);
    assert_int_equal(c.status, PH_GRPC_UNKNOWN);
    lines(&c, &http, &grpc,
          (const char *[]){"HTTP/2 99999999999999999999999\r\n", "grpc-status:\r\n", NULL});
    assert_int_equal(http, 0);
    assert_int_equal(c.status, PH_GRPC_UNKNOWN);
    assert_string_equal(ph_grpc_code_name(16), "UNAUTHENTICATED");
    assert_string_equal(ph_grpc_code_name(17), "code 17");
}

static size_t pack_event(int kind, const char *data, int code, uint8_t *out) {
    Openshell__V1__ExecSandboxEvent ev = OPENSHELL__V1__EXEC_SANDBOX_EVENT__INIT;
    Openshell__V1__ExecSandboxStdout o = OPENSHELL__V1__EXEC_SANDBOX_STDOUT__INIT;
    Openshell__V1__ExecSandboxStderr e = OPENSHELL__V1__EXEC_SANDBOX_STDERR__INIT;
    Openshell__V1__ExecSandboxExit x = OPENSHELL__V1__EXEC_SANDBOX_EXIT__INIT;
    ev.payload_case = kind;
    if (kind == OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD_STDOUT) {
        o.data.data = (uint8_t *)data;
        o.data.len = strlen(data);
        ev.stdout = &o;
    } else if (kind == OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD_STDERR) {
        e.data.data = (uint8_t *)data;
        e.data.len = strlen(data);
        ev.stderr = &e;
    } else if (kind == OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD_EXIT) {
        x.exit_code = code;
        ev.exit = &x;
    }
    return protobuf_c_message_pack(&ev.base, out);
}

static void test_exec_events(void **state) {
    (void)state;
    struct osh_exec x;
    osh_exec_init(&x, 4);
    struct pl_error err = {0};
    uint8_t b[256];
    size_t n = pack_event(OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD_STDOUT, "hello", 0, b);
    assert_int_equal(osh_exec_event(&x, b, n, &err), 0);
    n = pack_event(OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD_STDERR, "e", 0, b);
    assert_int_equal(osh_exec_event(&x, b, n, &err), 0);
    /* the cap holds; the total counts what was offered */
    assert_int_equal(x.out.kept.len, 4);
    assert_int_equal(x.out.total, 5);
    assert_int_equal(x.err.kept.len, 1);
    n = pack_event(OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD_EXIT, NULL, 3, b);
    assert_int_equal(osh_exec_event(&x, b, n, &err), 1);
    assert_int_equal(x.exit_code, 3);
    /* an event with no payload, and bytes that are not an event */
    n = pack_event(OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD__NOT_SET, NULL, 0, b);
    assert_int_equal(osh_exec_event(&x, b, n, &err), -1);
    assert_non_null(strstr(err.message, "no payload"));
    assert_int_equal(osh_exec_event(&x, (const uint8_t *)"\xff\xff\xff", 3, &err), -1);
    osh_exec_free(&x);
}

struct frames {
    char log[512];
    int refuse; /* refuse the frame of this type */
};

static int on_frame(void *ud, unsigned type, uint32_t id, const unsigned char *p, size_t n) {
    struct frames *f = ud;
    size_t used = strlen(f->log);
    snprintf(f->log + used, sizeof(f->log) - used, "%c%u:%.*s;", (char)type, id, (int)n,
             (const char *)p);
    return (int)type == f->refuse ? -1 : 0;
}

static size_t frame(uint8_t *b, char type, uint32_t id, const char *p, uint32_t n) {
    b[0] = (uint8_t)type;
    for (int i = 0; i < 4; i++) {
        b[1 + i] = (uint8_t)(id >> (24 - 8 * i));
        b[5 + i] = (uint8_t)(n >> (24 - 8 * i));
    }
    if (p)
        memcpy(b + 9, p, n);
    return 9 + (p ? n : 0);
}

static struct osh_relay_rx rx; /* 64 KiB */

static void test_relay_frames(void **state) {
    (void)state;
    uint8_t b[256];
    size_t n = frame(b, 'R', 0, "7:1 1:2", 7);
    n += frame(b + n, 'O', 1, NULL, 0);
    n += frame(b + n, 'D', 1, "GET", 3);
    n += frame(b + n, 'C', 1, NULL, 0);
    /* byte by byte reads as whole */
    struct frames f = {{0}, 0};
    osh_relay_rx_init(&rx);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(osh_relay_rx_feed(&rx, b + i, 1, on_frame, &f), 0);
    assert_string_equal(f.log, "R0:7:1 1:2;O1:;D1:GET;C1:;");
    /* an unknown type; bytes on an O; a payload past the limit */
    const struct {
        char type;
        uint32_t len;
    } bad[] = {{'Z', 0}, {'O', 1}, {'C', 2}, {'D', OSH_RELAY_FRAME_MAX + 1}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&f, 0, sizeof(f));
        osh_relay_rx_init(&rx);
        n = frame(b, bad[i].type, 1, NULL, bad[i].len);
        assert_int_equal(osh_relay_rx_feed(&rx, b, n, on_frame, &f), -1);
        assert_string_equal(f.log, "");
        /* broken stays broken */
        n = frame(b, 'O', 2, NULL, 0);
        assert_int_equal(osh_relay_rx_feed(&rx, b, n, on_frame, &f), -1);
        assert_string_equal(f.log, "");
    }
    /* the largest payload passes */
    uint8_t *big = calloc(1, 9 + OSH_RELAY_FRAME_MAX);
    assert_non_null(big);
    n = frame(big, 'D', 3, (const char *)big + 9, OSH_RELAY_FRAME_MAX);
    memset(&f, 0, sizeof(f));
    osh_relay_rx_init(&rx);
    assert_int_equal(osh_relay_rx_feed(&rx, big, n, on_frame, &f), 0);
    assert_int_equal(strncmp(f.log, "D3:", 3), 0);
    free(big);
    /* a frame the reader's caller refuses breaks it too */
    memset(&f, 0, sizeof(f));
    f.refuse = 'O';
    osh_relay_rx_init(&rx);
    n = frame(b, 'O', 4, NULL, 0);
    n += frame(b + n, 'C', 4, NULL, 0);
    assert_int_equal(osh_relay_rx_feed(&rx, b, n, on_frame, &f), -1);
    assert_string_equal(f.log, "O4:;");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),     cmocka_unit_test(test_required),
        cmocka_unit_test(test_url),          cmocka_unit_test(test_limits_and_names),
        cmocka_unit_test(test_grpc_lines),   cmocka_unit_test(test_exec_events),
        cmocka_unit_test(test_relay_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
