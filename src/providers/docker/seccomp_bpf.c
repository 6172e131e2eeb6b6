/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seccomp_bpf.c: a seccomp profile compiled to BPF with libseccomp
 * (seccomp_bpf.h).
 */
#include "seccomp_bpf.h"

#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>

#include "../../core/buf.h"

#define SETTING "SANDBOX_DOCKER_SECCOMP"

static int action_of(const char *name, json_int_t errno_ret, uint32_t *ret) {
    if (!name)
        return -1;
    if (strcmp(name, "SCMP_ACT_ALLOW") == 0)
        *ret = SCMP_ACT_ALLOW;
    else if (strcmp(name, "SCMP_ACT_ERRNO") == 0)
        *ret = SCMP_ACT_ERRNO((uint16_t)(errno_ret > 0 && errno_ret < 4096 ? errno_ret : EPERM));
    else if (strcmp(name, "SCMP_ACT_KILL") == 0 || strcmp(name, "SCMP_ACT_KILL_THREAD") == 0)
        *ret = SCMP_ACT_KILL_THREAD;
    else if (strcmp(name, "SCMP_ACT_KILL_PROCESS") == 0)
        *ret = SCMP_ACT_KILL_PROCESS;
    else if (strcmp(name, "SCMP_ACT_TRAP") == 0)
        *ret = SCMP_ACT_TRAP;
    else if (strcmp(name, "SCMP_ACT_LOG") == 0)
        *ret = SCMP_ACT_LOG;
    else
        return -1;
    return 0;
}

static int op_of(const char *name, enum scmp_compare *ret) {
    static const struct {
        const char *name;
        enum scmp_compare op;
    } ops[] = {{"SCMP_CMP_EQ", SCMP_CMP_EQ},
               {"SCMP_CMP_NE", SCMP_CMP_NE},
               {"SCMP_CMP_LT", SCMP_CMP_LT},
               {"SCMP_CMP_LE", SCMP_CMP_LE},
               {"SCMP_CMP_GT", SCMP_CMP_GT},
               {"SCMP_CMP_GE", SCMP_CMP_GE},
               {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ}};
    for (size_t i = 0; name && i < sizeof(ops) / sizeof(ops[0]); i++)
        if (strcmp(name, ops[i].name) == 0) {
            *ret = ops[i].op;
            return 0;
        }
    return -1;
}

static bool nonempty(const json_t *o) {
    return (json_is_object(o) && json_object_size(o) > 0) ||
           (json_is_array(o) && json_array_size(o) > 0);
}

/* One rule of the profile into ctx; < 0 with err when it cannot be kept. */
static int add_rule(scmp_filter_ctx ctx, const json_t *rule, size_t idx, struct pl_error *err) {
    uint32_t act;
    if (nonempty(json_object_get(rule, "includes")) || nonempty(json_object_get(rule, "excludes")))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            SETTING ": rule %zu has includes or excludes, which plimsoll cannot "
                                    "apply to the execs it makes under runsc",
                            idx);
    if (action_of(json_string_value(json_object_get(rule, "action")),
                  json_integer_value(json_object_get(rule, "errnoRet")), &act) < 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, SETTING ": rule %zu: unknown action",
                            idx);
    const json_t *args = json_object_get(rule, "args");
    struct scmp_arg_cmp cmp[6];
    unsigned ncmp = 0;
    size_t k;
    const json_t *a;
    json_array_foreach(args, k, a) {
        enum scmp_compare op;
        json_int_t index = json_integer_value(json_object_get(a, "index"));
        if (ncmp >= 6 || index < 0 || index > 5 ||
            op_of(json_string_value(json_object_get(a, "op")), &op) < 0)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                SETTING ": rule %zu: an argument filter plimsoll cannot apply",
                                idx);
        cmp[ncmp++] = (struct scmp_arg_cmp){
            .arg = (unsigned)index,
            .op = op,
            .datum_a = (scmp_datum_t)json_integer_value(json_object_get(a, "value")),
            .datum_b = (scmp_datum_t)json_integer_value(json_object_get(a, "valueTwo"))};
    }
    json_t *names = json_object_get(rule, "names");
    json_t *one = json_object_get(rule, "name");
    size_t n = json_is_array(names) ? json_array_size(names) : one ? 1 : 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = json_string_value(one && !names ? one : json_array_get(names, i));
        int nr = name ? seccomp_syscall_resolve_name(name) : __NR_SCMP_ERROR;
        if (nr == __NR_SCMP_ERROR)
            continue; /* unknown here: the engine skips it too */
        int r = seccomp_rule_add_array(ctx, act, nr, ncmp, cmp);
        if (r < 0 && r != -EEXIST && r != -EACCES)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                SETTING ": rule %zu: %s cannot be filtered as given (%s)", idx,
                                name, strerror(-r));
    }
    return 0;
}

int pl_docker_seccomp_bpf(const char *profile_json, unsigned char **ret, size_t *ret_len,
                          struct pl_error *err) {
    *ret = NULL;
    *ret_len = 0;
    json_t *p = json_loads(profile_json, 0, NULL);
    uint32_t def;
    if (!json_is_object(p) ||
        action_of(json_string_value(json_object_get(p, "defaultAction")),
                  json_integer_value(json_object_get(p, "defaultErrnoRet")), &def) < 0) {
        json_decref(p);
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            SETTING ": not a profile plimsoll can compile (defaultAction)");
    }
    scmp_filter_ctx ctx = seccomp_init(def);
    if (!ctx) {
        json_decref(p);
        return pl_error_set(err, PL_REASON_INTERNAL, "seccomp_init failed");
    }
    int rc = 0;
    /* The engine's archMap: the native architecture's sub-architectures
     * (i386 and x32 system calls from an x86_64 process) are filtered too. */
    size_t i;
    const json_t *m;
    json_array_foreach(json_object_get(p, "archMap"), i, m) {
        if (strcmp(json_string_value(json_object_get(m, "architecture")) ?: "",
                   "SCMP_ARCH_X86_64") != 0)
            continue;
        size_t k;
        const json_t *sub;
        json_array_foreach(json_object_get(m, "subArchitectures"), k, sub) {
            const char *a = json_string_value(sub);
            uint32_t arch = a && strcmp(a, "SCMP_ARCH_X86") == 0   ? SCMP_ARCH_X86
                            : a && strcmp(a, "SCMP_ARCH_X32") == 0 ? SCMP_ARCH_X32
                                                                   : 0;
            if (arch && seccomp_arch_add(ctx, arch) < 0 && seccomp_arch_exist(ctx, arch) != 0)
                rc = pl_error_set(err, PL_REASON_INTERNAL, "seccomp_arch_add failed");
        }
    }
    /* The filter's caller sets no-new-privs itself, before it installs. */
    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    const json_t *rule;
    json_array_foreach(json_object_get(p, "syscalls"), i, rule) {
        if (rc == 0)
            rc = add_rule(ctx, rule, i, err);
    }
    json_decref(p);
    if (rc < 0) {
        seccomp_release(ctx);
        return -1;
    }
    int fd = memfd_create("plimsoll-seccomp", MFD_CLOEXEC);
    if (fd < 0 || seccomp_export_bpf(ctx, fd) < 0) {
        if (fd >= 0)
            close(fd);
        seccomp_release(ctx);
        return pl_error_set(err, PL_REASON_INTERNAL, "seccomp_export_bpf failed");
    }
    seccomp_release(ctx);
    struct pl_buf b = {0};
    char chunk[4096];
    ssize_t n;
    lseek(fd, 0, SEEK_SET);
    while ((n = read(fd, chunk, sizeof(chunk))) > 0)
        if (pl_buf_append(&b, chunk, (size_t)n) < 0) {
            n = -1;
            break;
        }
    close(fd);
    if (n < 0 || b.len == 0 || b.len % 8 != 0 || b.len / 8 > 65535) {
        pl_buf_free(&b);
        return pl_error_set(err, PL_REASON_INTERNAL, "the compiled seccomp filter is unusable");
    }
    *ret = (unsigned char *)b.data;
    *ret_len = b.len;
    return 0;
}
