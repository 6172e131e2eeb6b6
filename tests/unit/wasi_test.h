/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wasi_test.h: what test_wasi_runner.c and test_wasi_validate.c share: the
 * directory of the test modules built from tests/wasi/modules (argv[1],
 * else the build's), the default limits, load(), a module's bytes, and
 * cap_address_space() for the tests of host memory in a child.
 */
#pragma once
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../src/core/fileread.h"
#include "../../src/providers/wasm/wasi-worker/wasi_runner.h"

static const char *g_modules_dir = PL_WASI_MODULES_DIR;

/* True when running under valgrind (its preload library is in LD_PRELOAD):
 * RSS figures are then meaningless, and valgrind aborts instead of
 * throwing std::bad_alloc. */
static inline bool under_valgrind(void) {
    const char *p = getenv("LD_PRELOAD");
    return p != NULL && strstr(p, "vgpreload") != NULL;
}

static const struct pl_wasi_limits k_limits = {
    .memory_bytes = 64u << 20,
    .stdout_cap = 1u << 20,
    .stderr_cap = 64u << 10,
};

/* The test modules are tens of KiB; pl_file_read() allocates the bound. */
#define MAX_MODULE_BYTES (1u << 20)

/* A module's bytes, loaded from g_modules_dir. */
struct blob {
    uint8_t *data;
    size_t len;
};

static inline struct blob load(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.wasm", g_modules_dir, name);
    char *data;
    struct blob b = {NULL, 0};
    int rc = pl_file_read(path, MAX_MODULE_BYTES, &data, &b.len);
    if (rc < 0)
        fail_msg("%s %s", path, pl_file_problem(rc));
    b.data = (uint8_t *)data;
    return b;
}

/* In a child: cap the address space at what it maps now plus extra_mib
 * MiB; _exit(10) when that cannot be read, _exit(11) when it cannot be
 * set. */
static inline void cap_address_space(long extra_mib) {
    long vm_kib = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld", &vm_kib) != 1)
        _exit(10);
    fclose(f);
    vm_kib *= sysconf(_SC_PAGESIZE) / 1024;
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = (rlim_t)(vm_kib + extra_mib * 1024) * 1024;
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        _exit(11);
}

/* main()'s first step: argv[1], when given, is the modules' folder. */
static inline void modules_dir_from(int argc, char **argv) {
    if (argc > 1)
        g_modules_dir = argv[1];
}
