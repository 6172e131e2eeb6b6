/*
 * fuzz_validate.c - libFuzzer harness for pl_wasi_validate().
 *
 * Build (see DESIGN.md / fuzz/run_fuzz.sh):
 *   clang-14 -g -O1 -fsanitize=fuzzer,address -Isrc fuzz/fuzz_validate.c \
 *     <wasi_runner.cc compiled with -fsanitize=fuzzer,address> \
 *     /usr/lib/x86_64-linux-gnu/libwabt.a -lstdc++
 *
 * Each input is validated under a 64 MiB memory cap; the harness only
 * checks that the call returns and that a refusal comes with a one-line,
 * NUL-terminated reason.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/wasm/wasi/wasi_runner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const struct pl_wasi_limits limits = {
        .memory_bytes = 64u << 20, .stdout_cap = 4096, .stderr_cap = 4096};
    char err[256];
    int rc = pl_wasi_validate(data, size, &limits, err, sizeof err);
    if (rc < 0 && (memchr(err, '\0', sizeof err) == NULL || strchr(err, '\n') != NULL))
        abort();
    if (rc != 0 && rc != PL_WASI_ERR_MODULE)
        abort(); /* ARGS or HOST would be a bug here */
    return 0;
}
