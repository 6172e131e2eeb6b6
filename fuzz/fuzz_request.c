/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_request.c: libFuzzer harness for the Run request decoder and the
 * canonical form it feeds (the bytes every caller controls). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../src/core/buf.h"
#include "../src/core/canon.h"
#include "../src/core/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const struct pl_request_limits limits = {.max_timeout_ms = 60000, .memory_mb = 256};
    struct pl_run_request req;
    struct pl_error err;
    if (pl_run_request_decode((const char *)data, size, &limits, &req, &err) == 0) {
        char hex[65];
        if (pl_canon_sha256(req.canonical, hex) != 0)
            abort(); /* a normalized request always has a canonical form */
        pl_run_request_clear(&req);
    }
    pl_empty_request_decode((const char *)data, size, &err);
    return 0;
}
