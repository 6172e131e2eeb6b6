/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_wasi_validate.c - cmocka tests of what the wasi_runner library
 * refuses, and where: modules refused by pl_wasi_validate() (and by
 * pl_wasi_run() the same way), edge inputs, a module that validates but
 * fails to instantiate, and each bound on a module's counts, at it and
 * one past it, checked before the parser allocates for them.  The modules
 * are tests/wasi/build_modules.sh's (directory given as argv[1]) and
 * modules built here, as tests/wasi/wasmgen.py builds them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wasi_test.h"

/* Validate `name`; expects refusal with `reason` in the message. */
static void expect_refused(const char *name, const char *reason) {
    struct blob b = load(name);
    struct pl_error err = {0};
    int rc = pl_wasi_validate(b.data, b.len, &k_limits, &err);
    assert_int_equal(rc, PL_WASI_ERR_MODULE);
    if (strstr(err.message, reason) == NULL)
        fail_msg("%s: reason \"%s\" does not contain \"%s\"", name, err.message, reason);
    assert_null(strchr(err.message, '\n'));
    assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
    /* pl_wasi_run refuses the same module the same way. */
    struct pl_wasi_result r;
    struct pl_error err2 = {0};
    rc = pl_wasi_run(b.data, b.len, NULL, 0, NULL, 0, &k_limits, &r, &err2);
    assert_int_equal(rc, PL_WASI_ERR_MODULE);
    assert_string_equal(err.message, err2.message);
    assert_null(r.out.data);
    free(b.data);
}

static void test_refused_modules(void **state) {
    (void)state;
    expect_refused("envfoo", "import env.foo is not allowed");
    expect_refused("garbage", "invalid module: bad magic value");
    expect_refused("badsig", "wasi_snapshot_preview1.fd_write has the wrong signature");
    expect_refused("bigmem", "initial memory of 2000 pages");
    expect_refused("nomem", "does not export a memory named \"memory\"");
    expect_refused("nostart", "does not export a \"_start\" function");
    expect_refused("manylocals", "10001 params and locals");
}

static void test_validate_edge_inputs(void **state) {
    (void)state;
    struct pl_error err = {0};
    static const uint8_t header_only[] = {0, 'a', 's', 'm', 1, 0, 0, 0};
    assert_int_equal(pl_wasi_validate(NULL, 0, &k_limits, &err), PL_WASI_ERR_MODULE);
    assert_int_equal(pl_wasi_validate(NULL, 5, &k_limits, &err), PL_WASI_ERR_ARGS);
    assert_int_equal(pl_wasi_validate(header_only, 8, NULL, &err), PL_WASI_ERR_ARGS);
    /* An empty module is valid wasm but has no _start. */
    assert_int_equal(pl_wasi_validate(header_only, 8, &k_limits, &err), PL_WASI_ERR_MODULE);
    assert_non_null(strstr(err.message, "_start"));
    assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
    /* err may be NULL. */
    assert_int_equal(pl_wasi_validate(header_only, 8, &k_limits, NULL), PL_WASI_ERR_MODULE);
    /* A DataCount section claiming ~25 million segments with no data
     * section: refused before the parser reserves memory for them (found
     * by fuzz_wasi_validate as a multi-gigabyte allocation). */
    static const uint8_t huge_data_count[] = {
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01, 0x60, 0x00, 0x00, 0x0c,
        0x0c, 0xff, 0xff, 0x84, 0x0c, 0x0c, 0x0c, 0x0c, 0x03, 0x02, 0x01, 0x00, 0x05, 0x04, 0x01,
        0x00, 0xac, 0x02, 0x07, 0x06, 0x13, 0x02, 0x6d, 0x65, 0x6d, 0x6f, 0x72, 0x79, 0x02, 0x00,
        0x06, 0x5f, 0x73, 0x74, 0x61, 0x72, 0x74, 0x00, 0x60, 0x00, 0x00, 0x03, 0x02, 0x01, 0x00,
        0x05, 0x04, 0x01, 0x00, 0x00, 0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b};
    assert_int_equal(pl_wasi_validate(huge_data_count, sizeof huge_data_count, &k_limits, &err),
                     PL_WASI_ERR_MODULE);
    assert_non_null(strstr(err.message, "data count"));
    /* Every truncation of a real module is refused, never accepted. */
    struct blob b = load("hello");
    for (size_t n = 0; n < b.len; n += 97)
        assert_int_not_equal(pl_wasi_validate(b.data, n, &k_limits, &err), 0);
    free(b.data);
}

static void test_instantiation_failure(void **state) {
    (void)state;
    struct blob b = load("dataoob");
    struct pl_error err = {0};
    struct pl_wasi_result r;
    assert_int_equal(pl_wasi_validate(b.data, b.len, &k_limits, &err), 0);
    int rc = pl_wasi_run(b.data, b.len, NULL, 0, NULL, 0, &k_limits, &r, &err);
    assert_int_equal(rc, PL_WASI_ERR_INSTANTIATE);
    assert_non_null(strstr(err.message, "instantiation failed"));
    assert_int_equal(err.reason, PL_REASON_INVALID_REQUEST);
    assert_null(r.out.data);
    free(b.data);
}

/* ---- module bounds -------------------------------------------------------- */

/* A growable byte buffer for building modules. */
struct wbuf {
    uint8_t *p;
    size_t len, cap;
};

static void wb_put(struct wbuf *b, const void *d, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        assert_non_null(b->p);
        b->cap = cap;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void wb_byte(struct wbuf *b, uint8_t v) {
    wb_put(b, &v, 1);
}

static void wb_uleb(struct wbuf *b, uint64_t v) {
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        wb_byte(b, (uint8_t)(byte | (v ? 0x80 : 0)));
    } while (v);
}

static void wb_name(struct wbuf *b, const char *s) {
    wb_uleb(b, strlen(s));
    wb_put(b, s, strlen(s));
}

/* Append section `id` with `body` to m, and empty body. */
static void wb_section(struct wbuf *m, uint8_t id, struct wbuf *body) {
    wb_byte(m, id);
    wb_uleb(m, body->len);
    wb_put(m, body->p, body->len);
    body->len = 0;
}

/* A valid module with "memory", "_start" and the counts asked for; each
 * zero count takes its default.  tests/wasi/wasmgen.py builds the same. */
struct modspec {
    uint32_t types;         /* function types in all (default 2) */
    uint32_t imports;       /* wasi_snapshot_preview1.proc_exit imports */
    uint32_t funcs;         /* defined functions (default 1: _start) */
    uint32_t tables;        /* tables, each of table_initial elements */
    uint32_t table_initial; /* elements per table */
    uint32_t globals;       /* i32 globals */
    uint32_t exports;       /* exports in all (default 2: memory, _start) */
    uint32_t empty_elems;   /* empty passive element segments */
    uint32_t elems[2];      /* items in up to two more passive segments */
    uint32_t datas;         /* empty passive data segments */
    bool data_count;        /* a DataCount section saying `datas` */
    uint32_t locals;        /* i32 locals of _start */
    bool split_locals;      /* one declaration per local instead of one in all */
};

static struct blob build_module(const struct modspec *s) {
    struct wbuf m = {0}, b = {0};
    uint32_t types = s->types ? s->types : 2, funcs = s->funcs ? s->funcs : 1;
    uint32_t exports = s->exports ? s->exports : 2;
    static const uint8_t magic[] = {0, 'a', 's', 'm', 1, 0, 0, 0};
    wb_put(&m, magic, sizeof magic);
    /* 1 type: () -> () and (i32) -> (), then copies of the first. */
    wb_uleb(&b, types);
    for (uint32_t i = 0; i < types; i++)
        wb_put(&b, i == 1 ? "\x60\x01\x7f\x00" : "\x60\x00\x00", i == 1 ? 4 : 3);
    wb_section(&m, 1, &b);
    if (s->imports) { /* 2 import */
        wb_uleb(&b, s->imports);
        for (uint32_t i = 0; i < s->imports; i++) {
            wb_name(&b, "wasi_snapshot_preview1");
            wb_name(&b, "proc_exit");
            wb_put(&b, "\x00\x01", 2);
        }
        wb_section(&m, 2, &b);
    }
    wb_uleb(&b, funcs); /* 3 function */
    for (uint32_t i = 0; i < funcs; i++)
        wb_byte(&b, 0);
    wb_section(&m, 3, &b);
    if (s->tables) { /* 4 table */
        wb_uleb(&b, s->tables);
        for (uint32_t i = 0; i < s->tables; i++) {
            wb_put(&b, "\x70\x00", 2);
            wb_uleb(&b, s->table_initial);
        }
        wb_section(&m, 4, &b);
    }
    wb_put(&b, "\x01\x00\x01", 3); /* 5 memory: one, of one page */
    wb_section(&m, 5, &b);
    if (s->globals) { /* 6 global */
        wb_uleb(&b, s->globals);
        for (uint32_t i = 0; i < s->globals; i++)
            wb_put(&b, "\x7f\x00\x41\x00\x0b", 5);
        wb_section(&m, 6, &b);
    }
    wb_uleb(&b, exports); /* 7 export */
    wb_name(&b, "memory");
    wb_put(&b, "\x02\x00", 2);
    wb_name(&b, "_start");
    wb_byte(&b, 0);
    wb_uleb(&b, s->imports);
    for (uint32_t i = 2; i < exports; i++) {
        char name[16];
        snprintf(name, sizeof name, "e%u", i);
        wb_name(&b, name);
        wb_byte(&b, 0);
        wb_uleb(&b, s->imports);
    }
    wb_section(&m, 7, &b);
    uint32_t nelem = s->empty_elems + (s->elems[0] > 0) + (s->elems[1] > 0);
    if (nelem) { /* 9 element: passive, funcref, items = _start */
        wb_uleb(&b, nelem);
        for (uint32_t i = 0; i < s->empty_elems; i++)
            wb_put(&b, "\x01\x00\x00", 3);
        for (int k = 0; k < 2; k++) {
            if (!s->elems[k])
                continue;
            wb_put(&b, "\x01\x00", 2);
            wb_uleb(&b, s->elems[k]);
            for (uint32_t i = 0; i < s->elems[k]; i++)
                wb_uleb(&b, s->imports);
        }
        wb_section(&m, 9, &b);
    }
    if (s->data_count) { /* 12 DataCount */
        wb_uleb(&b, s->datas);
        wb_section(&m, 12, &b);
    }
    wb_uleb(&b, funcs); /* 10 code: empty bodies, _start's with its locals */
    struct wbuf body = {0};
    if (s->locals && s->split_locals) {
        wb_uleb(&body, s->locals);
        for (uint32_t i = 0; i < s->locals; i++)
            wb_put(&body, "\x01\x7f", 2);
    } else if (s->locals) {
        wb_byte(&body, 1);
        wb_uleb(&body, s->locals);
        wb_byte(&body, 0x7f);
    } else {
        wb_byte(&body, 0);
    }
    wb_byte(&body, 0x0b);
    wb_uleb(&b, body.len);
    wb_put(&b, body.p, body.len);
    free(body.p);
    for (uint32_t i = 1; i < funcs; i++)
        wb_put(&b, "\x02\x00\x0b", 3);
    wb_section(&m, 10, &b);
    if (s->datas) { /* 11 data: passive, empty */
        wb_uleb(&b, s->datas);
        for (uint32_t i = 0; i < s->datas; i++)
            wb_put(&b, "\x01\x00", 2);
        wb_section(&m, 11, &b);
    }
    free(b.p);
    return (struct blob){m.p, m.len};
}

struct bound_case {
    const char *name;
    struct modspec at, past;
    const char *why; /* in the refusal of `past` */
};

static const struct bound_case k_bounds[] = {
    {"PL_WASI_MAX_TYPES",
     {.types = PL_WASI_MAX_TYPES},
     {.types = PL_WASI_MAX_TYPES + 1},
     "module has 100001 function types; at most 100000 are allowed"},
    {"PL_WASI_MAX_FUNCS",
     {.funcs = PL_WASI_MAX_FUNCS},
     {.funcs = PL_WASI_MAX_FUNCS + 1},
     "module has 100001 functions (imported and defined); at most 100000"},
    {"PL_WASI_MAX_FUNCS (imported count)",
     {.imports = 1, .funcs = PL_WASI_MAX_FUNCS - 1},
     {.imports = 1, .funcs = PL_WASI_MAX_FUNCS},
     "module has 100001 functions (imported and defined)"},
    {"PL_WASI_MAX_IMPORTS",
     {.imports = PL_WASI_MAX_IMPORTS},
     {.imports = PL_WASI_MAX_IMPORTS + 1},
     "module has 1001 imports; at most 1000"},
    {"PL_WASI_MAX_EXPORTS",
     {.exports = PL_WASI_MAX_EXPORTS},
     {.exports = PL_WASI_MAX_EXPORTS + 1},
     "module has 10001 exports; at most 10000"},
    {"PL_WASI_MAX_GLOBALS",
     {.globals = PL_WASI_MAX_GLOBALS},
     {.globals = PL_WASI_MAX_GLOBALS + 1},
     "module has 10001 globals; at most 10000"},
    {"PL_WASI_MAX_TABLES",
     {.tables = PL_WASI_MAX_TABLES},
     {.tables = PL_WASI_MAX_TABLES + 1},
     "module has 17 tables; at most 16"},
    {"PL_WASI_MAX_TABLE_ELEMS",
     {.tables = 1, .table_initial = PL_WASI_MAX_TABLE_ELEMS},
     {.tables = 1, .table_initial = PL_WASI_MAX_TABLE_ELEMS + 1},
     "table of 262145 initial elements exceeds the cap of 262144"},
    {"PL_WASI_MAX_ELEM_SEGMENTS",
     {.empty_elems = PL_WASI_MAX_ELEM_SEGMENTS},
     {.empty_elems = PL_WASI_MAX_ELEM_SEGMENTS + 1},
     "module has 10001 element segments; at most 10000"},
    {"PL_WASI_MAX_ELEMS",
     {.elems = {PL_WASI_MAX_ELEMS / 2, PL_WASI_MAX_ELEMS / 2}},
     {.elems = {PL_WASI_MAX_ELEMS / 2, PL_WASI_MAX_ELEMS / 2 + 1}},
     "module has 1048577 elements (in all element segments); at most 1048576"},
    {"PL_WASI_MAX_DATA_SEGMENTS",
     {.datas = PL_WASI_MAX_DATA_SEGMENTS},
     {.datas = PL_WASI_MAX_DATA_SEGMENTS + 1},
     "module has 10001 data segments; at most 10000"},
    {"PL_WASI_MAX_DATA_SEGMENTS (DataCount)",
     {.datas = PL_WASI_MAX_DATA_SEGMENTS, .data_count = true},
     {.datas = PL_WASI_MAX_DATA_SEGMENTS + 1, .data_count = true},
     "module has 10001 data segments (DataCount section)"},
    {"PL_WASI_MAX_FUNC_LOCALS",
     {.locals = PL_WASI_MAX_FUNC_LOCALS},
     {.locals = PL_WASI_MAX_FUNC_LOCALS + 1},
     "function 0 has 4097 params and locals (at most 4096 allowed)"},
    {"PL_WASI_MAX_FUNC_LOCALS (one declaration each)",
     {.locals = PL_WASI_MAX_FUNC_LOCALS, .split_locals = true},
     {.locals = PL_WASI_MAX_FUNC_LOCALS + 1, .split_locals = true},
     "function 0 has 4097 params and locals (at most 4096 allowed)"},
};

/* Each bound: a module at it passes validation and runs; one past it is
 * refused, with the bound in the reason. */
static void test_module_bounds_at_and_past(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_bounds / sizeof k_bounds[0]; i++) {
        const struct bound_case *c = &k_bounds[i];
        struct pl_error err = {0};
        struct blob at = build_module(&c->at), past = build_module(&c->past);
        int rc = pl_wasi_validate(at.data, at.len, &k_limits, &err);
        if (rc != PL_WASI_OK)
            fail_msg("%s: the module at the bound was refused: %s", c->name, err.message);
        struct pl_wasi_result r;
        rc = pl_wasi_run(at.data, at.len, NULL, 0, NULL, 0, &k_limits, &r, &err);
        if (rc != PL_WASI_OK || r.exit_code != 0 || r.trapped)
            fail_msg("%s: the module at the bound did not run: %d %s", c->name, rc, err.message);
        pl_wasi_result_free(&r);
        rc = pl_wasi_validate(past.data, past.len, &k_limits, &err);
        if (rc != PL_WASI_ERR_MODULE || strstr(err.message, c->why) == NULL)
            fail_msg("%s: one past the bound: %d \"%s\"", c->name, rc, err.message);
        free(at.data);
        free(past.data);
    }
}

/* Far past the bounds, in a child whose address space is only 64 MiB above
 * what it uses: refused by the counting pass, never an allocation failure
 * (before the bounds, wabt reserved about 1 GB for two million functions). */
static void test_module_bounds_checked_before_allocation(void **state) {
    (void)state;
    if (under_valgrind())
        skip();
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* ASan's shadow memory makes an RLIMIT_AS cap meaningless */
#endif
    /* The last: one function of 3.9M local declarations (117 MB in the
     * interpreter's reader without the bound). */
    static const struct modspec huge[] = {
        {.funcs = 2000000},   {.types = 2500000},
        {.globals = 1500000}, {.empty_elems = 2500000},
        {.elems = {7000000}}, {.datas = 3500000},
        {.exports = 700000},  {.locals = 3900000, .split_locals = true},
    };
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        struct blob b = build_module(&huge[i]);
        assert_true(b.len <= (8u << 20)); /* the API's module size limit */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            cap_address_space(64);
            struct pl_error err = {0};
            int rc = pl_wasi_validate(b.data, b.len, &k_limits, &err);
            _exit(rc == PL_WASI_ERR_MODULE && strstr(err.message, "at most") != NULL ? 0
                  : rc == PL_WASI_ERR_HOST                                           ? 12
                                                                                     : 13);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("module %zu (%zu bytes): child status %d", i, b.len, status);
        free(b.data);
    }
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_modules),
        cmocka_unit_test(test_validate_edge_inputs),
        cmocka_unit_test(test_instantiation_failure),
        cmocka_unit_test(test_module_bounds_at_and_past),
        cmocka_unit_test(test_module_bounds_checked_before_allocation),
    };
    modules_dir_from(argc, argv);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
