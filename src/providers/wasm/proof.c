/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proof.c: the wasm provider's startup proof.
 *
 * Before the daemon serves, create runs guests on its own pools and
 * refuses to start unless
 *   1. a hello world prints exactly what it should,
 *   2. an allocation past a 16 MiB cap is refused as out of memory,
 *   3. a regex bomb (a loop that never reaches QuickJS's interrupt check)
 *      is stopped at a 100 ms deadline, after which the pool still serves;
 *   4. a hello module prints 42, a module asking for more initial memory
 *      than a 16 MiB cap is refused, a looping module is stopped at 100 ms.
 * Each failure names what did not hold; the daemon exits with status 2.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "wasm_int.h"

/* The guests, from guest/proof_*.js and guest/proof_*.wat (meson.build). */
#include "proof_again_js.h"
#include "proof_alloc_js.h"
#include "proof_big_wasm.h"
#include "proof_hello_js.h"
#include "proof_hello_wasm.h"
#include "proof_loop_wasm.h"
#include "proof_regex_js.h"
#define PROOF_DEADLINE_MS 100u
#define PROOF_MARGIN_MS 1000u

static int proof_run(struct wasm_state *s, const char *code, uint64_t memory, unsigned timeout,
                     struct pl_js_result *r, struct pl_error *err) {
    struct pl_js_limits l = {
        .memory_bytes = memory, .timeout_ms = timeout, .stdout_cap = 4096, .stderr_cap = 4096};
    int rc = pl_js_pool_run(s->pool, code, strlen(code), "", 0, &l, r);
    if (rc < 0)
        return pl_error_errno(err, PL_REASON_INTERNAL, rc,
                              "SANDBOX_PROVIDER=wasm: startup proof: the worker failed");
    return 0;
}

static int snippet_proof(struct wasm_state *s, struct pl_error *err) {
    struct pl_js_result r = {0};

    if (proof_run(s, proof_js_hello, 64u << 20, 5000, &r, err) < 0)
        return -1;
    bool ok = r.exit_code == 0 && r.out.len == 3 && memcmp(r.out.data, "42\n", 3) == 0;
    pl_js_result_free(&r);
    if (!ok)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: hello world did not print 42");

    if (proof_run(s, proof_js_alloc, 16u << 20, 5000, &r, err) < 0)
        return -1;
    ok = r.out_of_memory && r.exit_code != 0 && r.out.len == 0;
    pl_js_result_free(&r);
    if (!ok)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: a 64 MiB allocation under a "
                            "16 MiB cap was not refused");

    if (proof_run(s, proof_js_regex, 64u << 20, PROOF_DEADLINE_MS, &r, err) < 0)
        return -1;
    uint64_t ms = r.duration_ns / 1000000u;
    ok = r.timed_out && r.exit_code == 124 && r.out.len == 0 &&
         ms < PROOF_DEADLINE_MS + PROOF_MARGIN_MS;
    pl_js_result_free(&r);
    if (!ok)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: a regex bomb was not stopped "
                            "at its %u ms deadline (took %llu ms)",
                            PROOF_DEADLINE_MS, (unsigned long long)ms);

    /* The pool still answers after a guest was abandoned. */
    if (proof_run(s, proof_js_again, 64u << 20, 5000, &r, err) < 0)
        return -1;
    ok = r.exit_code == 0 && r.out.len == 6;
    pl_js_result_free(&r);
    if (!ok)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: no answer after a deadline");
    return 0;
}
static int module_proof(struct wasm_state *s, struct pl_error *err) {
    struct pl_js_limits l = {
        .memory_bytes = 16u << 20, .timeout_ms = 5000, .stdout_cap = 4096, .stderr_cap = 4096};
    struct pl_js_result r = {0};
#define MOD(bytes) (const uint8_t *)(bytes), sizeof(bytes) - 1
    int rc = wasm_module_run(s, MOD(proof_hello), NULL, 0, NULL, 0, &l, NULL, &r);
    bool ok = rc == 0 && r.exit_code == 0 && r.out.len == 3 && memcmp(r.out.data, "42\n", 3) == 0;
    pl_js_result_free(&r);
    if (!ok)
        return pl_error_set(
            err, PL_REASON_INTERNAL,
            "SANDBOX_PROVIDER=wasm: startup proof: a hello module did not print 42");
    rc = wasm_module_run(s, MOD(proof_big), NULL, 0, NULL, 0, &l, NULL, &r);
    ok = rc == 0 && r.refused;
    pl_js_result_free(&r);
    if (!ok)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: a module asking for 300 pages "
                            "under a 16 MiB cap was not refused");
    l.timeout_ms = PROOF_DEADLINE_MS;
    rc = wasm_module_run(s, MOD(proof_loop), NULL, 0, NULL, 0, &l, NULL, &r);
    uint64_t ms = r.duration_ns / 1000000u;
    ok = rc == 0 && r.timed_out && ms < PROOF_DEADLINE_MS + PROOF_MARGIN_MS;
    pl_js_result_free(&r);
#undef MOD
    if (!ok)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=wasm: startup proof: a looping module was not "
                            "stopped at its %u ms deadline",
                            PROOF_DEADLINE_MS);
    return 0;
}

int wasm_startup_proof(struct wasm_state *s, struct pl_error *err) {
    if (snippet_proof(s, err) < 0 || module_proof(s, err) < 0)
        return -1;
    return 0;
}
