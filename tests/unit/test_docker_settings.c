/* SPDX-License-Identifier: Apache-2.0 */
/* test_docker_settings.c: the docker provider's settings (settings.c:
 * defaults, every bound at its edge, the seccomp profile's forms) and the
 * session settings digest (engine.c: what must not change between a
 * session's open and any call, read back from the engine's inspect). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/providers/docker/docker_int.h"
#include "settings_test.h"

/* ---- settings ------------------------------------------------------------ */

/* Load with one setting (name may be NULL: none). */
static int load1(const char *name, const char *value, struct docker_settings *s,
                 struct pl_error *err) {
    struct env e = {{name}, {value}};
    struct pl_config c = {.lookup = lookup, .lookup_userdata = &e};
    memset(s, 0, sizeof(*s));
    memset(err, 0, sizeof(*err));
    return dk_load_settings(&c, s, err);
}

static void settings_free(struct docker_settings *s) {
    free(s->seccomp);
    free(s->exec_filter_env);
    memset(s, 0, sizeof(*s));
}

static void test_defaults(void **state) {
    (void)state;
    struct docker_settings s;
    struct pl_error err;
    assert_int_equal(load1(NULL, NULL, &s, &err), 0);
    assert_string_equal(s.runtime, "runc");
    assert_string_equal(s.snippet_image, "plimsoll/snippet:latest");
    assert_string_equal(s.project_image, "plimsoll/project:latest");
    assert_string_equal(s.instance, "default");
    assert_string_equal(s.run_dir, "/run/plimsoll");
    assert_int_equal(s.millicpus, 1000);
    assert_int_equal(s.pids, 128);
    assert_int_equal(s.work_mb, 64);
    assert_int_equal(s.tmp_mb, 16);
    assert_int_equal(s.warm, 2);
    assert_int_equal(s.uid, PL_DOCKER_DEFAULT_UID);
    assert_string_equal(s.seccomp_name, "plimsoll");
    assert_non_null(strstr(s.seccomp, "defaultAction"));
    assert_null(s.exec_filter_env); /* runc filters every exec itself */
    settings_free(&s);
}

static void test_runsc_carries_the_filter_for_execs(void **state) {
    (void)state;
    struct docker_settings s;
    struct pl_error err;
    assert_int_equal(load1("SANDBOX_DOCKER_RUNTIME", "runsc", &s, &err), 0);
    assert_non_null(s.exec_filter_env);
    assert_true(strncmp(s.exec_filter_env, "PLIMSOLL_SECCOMP_BPF=", 21) == 0);
    assert_true(strlen(s.exec_filter_env) > 21 + 100);
    settings_free(&s);
    assert_int_equal(load1("SANDBOX_DOCKER_RUNTIME", "kata", &s, &err), -1);
    assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
    assert_non_null(strstr(err.message, "SANDBOX_DOCKER_RUNTIME"));
    settings_free(&s);
}

static void test_every_bound_at_its_edge(void **state) {
    (void)state;
    static const struct {
        const char *name, *value;
        int ok;
    } cases[] = {
        {"SANDBOX_DOCKER_CPUS", "0.01", 1},       {"SANDBOX_DOCKER_CPUS", "0.009", 0},
        {"SANDBOX_DOCKER_CPUS", "64", 1},         {"SANDBOX_DOCKER_CPUS", "64.001", 0},
        {"SANDBOX_DOCKER_CPUS", "1.25", 1},       {"SANDBOX_DOCKER_CPUS", "1.2345", 0},
        {"SANDBOX_DOCKER_CPUS", "1.", 0},         {"SANDBOX_DOCKER_CPUS", "-1", 0},
        {"SANDBOX_DOCKER_CPUS", "one", 0},        {"SANDBOX_DOCKER_PIDS", "8", 1},
        {"SANDBOX_DOCKER_PIDS", "7", 0},          {"SANDBOX_DOCKER_PIDS", "4096", 1},
        {"SANDBOX_DOCKER_PIDS", "4097", 0},       {"SANDBOX_DOCKER_PIDS", "12x", 0},
        {"SANDBOX_DOCKER_PIDS", "-8", 0},         {"SANDBOX_DOCKER_WORK_MB", "1", 1},
        {"SANDBOX_DOCKER_WORK_MB", "0", 0},       {"SANDBOX_DOCKER_WORK_MB", "65536", 1},
        {"SANDBOX_DOCKER_WORK_MB", "65537", 0},   {"SANDBOX_DOCKER_TMP_MB", "0", 0},
        {"SANDBOX_DOCKER_WARM", "0", 1},          {"SANDBOX_DOCKER_WARM", "16", 1},
        {"SANDBOX_DOCKER_WARM", "17", 0},         {"SANDBOX_DOCKER_UID", "1000", 1},
        {"SANDBOX_DOCKER_UID", "999", 0},         {"SANDBOX_DOCKER_UID", "4000000000", 1},
        {"SANDBOX_DOCKER_UID", "4000000001", 0},  {"SANDBOX_DOCKER_INSTANCE", "ci-1.a_b", 1},
        {"SANDBOX_DOCKER_INSTANCE", "a/b", 0},    {"SANDBOX_DOCKER_INSTANCE", "a b", 0},
        {"SANDBOX_DOCKER_RUN_DIR", "/srv/pl", 1}, {"SANDBOX_DOCKER_RUN_DIR", "run/pl", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct docker_settings s;
        struct pl_error err;
        int r = load1(cases[i].name, cases[i].value, &s, &err);
        if (r != (cases[i].ok ? 0 : -1))
            fail_msg("%s=%s: got %d (%s)", cases[i].name, cases[i].value, r, err.message);
        if (!cases[i].ok) {
            assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
            assert_non_null(strstr(err.message, cases[i].name)); /* the message names it */
        }
        settings_free(&s);
    }
    struct docker_settings s;
    struct pl_error err;
    assert_int_equal(load1("SANDBOX_DOCKER_CPUS", "0.5", &s, &err), 0);
    assert_int_equal(s.millicpus, 500);
    settings_free(&s);
    char longname[300];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = 0;
    assert_int_equal(load1("SANDBOX_DOCKER_SNIPPET_IMAGE", longname, &s, &err), -1);
    assert_non_null(strstr(err.message, "too long"));
    settings_free(&s);
}

static void test_the_seccomp_profile_forms(void **state) {
    (void)state;
    struct docker_settings s;
    struct pl_error err;
    assert_int_equal(load1("SANDBOX_DOCKER_SECCOMP", "engine-default", &s, &err), 0);
    assert_null(s.seccomp);
    assert_string_equal(s.seccomp_name, "engine-default");
    settings_free(&s);

    char dir[] = "/tmp/plimsoll-seccomp-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char good[128], bad[128], fifo[128];
    snprintf(good, sizeof(good), "%s/good.json", dir);
    snprintf(bad, sizeof(bad), "%s/bad.json", dir);
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    FILE *f = fopen(good, "w");
    fputs("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[]}", f);
    fclose(f);
    f = fopen(bad, "w");
    fputs("{\"syscalls\":[]}", f);
    fclose(f);
    assert_int_equal(mkfifo(fifo, 0600), 0);

    assert_int_equal(load1("SANDBOX_DOCKER_SECCOMP", good, &s, &err), 0);
    assert_string_equal(s.seccomp_name, good);
    assert_non_null(strstr(s.seccomp, "SCMP_ACT_ERRNO"));
    settings_free(&s);
    assert_int_equal(load1("SANDBOX_DOCKER_SECCOMP", bad, &s, &err), -1);
    assert_non_null(strstr(err.message, "not a seccomp profile"));
    settings_free(&s);
    /* a FIFO would hang the daemon at startup: refused before any read */
    assert_int_equal(load1("SANDBOX_DOCKER_SECCOMP", fifo, &s, &err), -1);
    assert_non_null(strstr(err.message, "SANDBOX_DOCKER_SECCOMP"));
    settings_free(&s);
    assert_int_equal(load1("SANDBOX_DOCKER_SECCOMP", "/nonexistent/p.json", &s, &err), -1);
    settings_free(&s);
    unlink(good);
    unlink(bad);
    unlink(fifo);
    rmdir(dir);
}

/* ---- the session settings digest ------------------------------------------ */

static const char *INSPECT =
    "{\"Id\":\"abc\",\"Name\":\"/plimsoll-session-1\",\"Image\":\"sha256:1111\","
    "\"State\":{\"Running\":true,\"Paused\":false,\"Pid\":4242},"
    "\"Config\":{\"User\":\"2000000000:2000000000\",\"Hostname\":\"x\"},"
    "\"HostConfig\":{\"Binds\":null,\"CapAdd\":null,\"CapDrop\":[\"ALL\"],\"Devices\":[],"
    "\"IpcMode\":\"private\",\"Memory\":67108864,\"MemorySwap\":67108864,"
    "\"NanoCpus\":1000000000,\"NetworkMode\":\"none\",\"PidMode\":\"\",\"PidsLimit\":128,"
    "\"Privileged\":false,\"ReadonlyRootfs\":true,\"Runtime\":\"runc\","
    "\"SecurityOpt\":[\"no-new-privileges\",\"seccomp={}\"],\"Tmpfs\":{\"/tmp\":\"size=16m\"},"
    "\"UsernsMode\":\"\",\"Ulimits\":null,\"CgroupnsMode\":\"private\",\"Mounts\":null,"
    "\"LogConfig\":{\"Type\":\"none\"}}}";

static void fp_of(json_t *j, char fp[65], bool *running, bool *paused) {
    assert_int_equal(pl_docker_session_fp(j, fp, running, paused), 0);
    assert_int_equal(strlen(fp), 64);
}

static void test_digest_is_stable(void **state) {
    (void)state;
    json_t *a = json_loads(INSPECT, 0, NULL);
    char f1[65], f2[65];
    bool running, paused;
    fp_of(a, f1, &running, &paused);
    assert_true(running);
    assert_false(paused);
    /* what is not a security setting does not count: name, state, log config */
    json_object_set_new(a, "Name", json_string("/renamed"));
    json_object_set_new(json_object_get(a, "State"), "Paused", json_true());
    json_object_set_new(json_object_get(a, "State"), "Pid", json_integer(1));
    json_object_set_new(json_object_get(a, "HostConfig"), "LogConfig", json_null());
    json_object_set_new(json_object_get(a, "Config"), "Hostname", json_string("y"));
    fp_of(a, f2, &running, &paused);
    assert_true(paused);
    assert_string_equal(f1, f2);
    json_decref(a);
}

static void test_digest_sees_every_security_setting(void **state) {
    (void)state;
    static const char *const keys[] = {
        "Binds",     "CapAdd",     "CapDrop",        "Devices",      "IpcMode",
        "Memory",    "MemorySwap", "NanoCpus",       "NetworkMode",  "PidMode",
        "PidsLimit", "Privileged", "ReadonlyRootfs", "Runtime",      "SecurityOpt",
        "Tmpfs",     "UsernsMode", "Ulimits",        "CgroupnsMode", "Mounts",
    };
    json_t *base = json_loads(INSPECT, 0, NULL);
    char f0[65], f1[65];
    bool running, paused;
    fp_of(base, f0, &running, &paused);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *a = json_deep_copy(base);
        json_object_set_new(json_object_get(a, "HostConfig"), keys[i], json_string("changed"));
        fp_of(a, f1, &running, &paused);
        if (strcmp(f0, f1) == 0)
            fail_msg("HostConfig.%s changed and the digest did not", keys[i]);
        json_decref(a);
    }
    json_t *a = json_deep_copy(base);
    json_object_set_new(json_object_get(a, "Config"), "User", json_string("0:0"));
    fp_of(a, f1, &running, &paused);
    assert_string_not_equal(f0, f1);
    json_decref(a);
    a = json_deep_copy(base);
    json_object_set_new(a, "Image", json_string("sha256:2222"));
    fp_of(a, f1, &running, &paused);
    assert_string_not_equal(f0, f1);
    json_decref(a);
    /* a key removed is a change too (null, not absent-and-ignored) */
    a = json_deep_copy(base);
    json_object_del(json_object_get(a, "HostConfig"), "PidsLimit");
    fp_of(a, f1, &running, &paused);
    assert_string_not_equal(f0, f1);
    json_decref(a);
    json_decref(base);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_runsc_carries_the_filter_for_execs),
        cmocka_unit_test(test_every_bound_at_its_edge),
        cmocka_unit_test(test_the_seccomp_profile_forms),
        cmocka_unit_test(test_digest_is_stable),
        cmocka_unit_test(test_digest_sees_every_security_setting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
