/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_wasi_validate.c - libFuzzer harness for pl_wasi_validate(): the
 * module bounds' counting pass (wabt's binary reader with BoundsCounter),
 * wabt's parser and validator, and plimsoll's module rules.
 *
 * Build and run (docs/security.md, "Fuzzing"):
 *   CC=clang-14 CXX=clang++-14 scripts/build/configure build-fuzz -Dfuzz=true \
 *     -Db_sanitize=address,undefined -Db_lundef=false
 *   build-fuzz/fuzz/fuzz_wasi_validate -max_total_time=300 -max_len=65536 \
 *     -rss_limit_mb=2048 CORPUS_COPY
 *
 * Each input is validated under a 64 MiB memory cap; the harness checks
 * that the call returns, that a refusal comes with a one-line,
 * NUL-terminated reason sent as INVALID_REQUEST, and that it is never a
 * host allocation failure:
 * the module bounds are there so that no input makes validation run out
 * of memory.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/wasm/wasi-worker/wasi_runner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const struct pl_wasi_limits limits = {
        .memory_bytes = 64u << 20, .stdout_cap = 4096, .stderr_cap = 4096};
    struct pl_error err = {0};
    int rc = pl_wasi_validate(data, size, &limits, &err);
    if (rc < 0 && (memchr(err.message, '\0', sizeof err.message) == NULL ||
                   strchr(err.message, '\n') != NULL || err.reason != PL_REASON_INVALID_REQUEST))
        abort();
    if (rc != 0 && rc != PL_WASI_ERR_MODULE)
        abort(); /* ARGS or HOST would be a bug here */
    return 0;
}
