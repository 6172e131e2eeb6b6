/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_reflect.c: libFuzzer harness for the decoders of gRPC's health and
 * server-reflection requests (src/server/reflect.c), a peer's bytes as
 * each stream's message: HealthCheckRequest, ServerReflectionRequest and
 * the ExtensionRequest inside it, answered from the generated descriptor
 * tables.  An answer is always a message: it must read back as one. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/server/reflect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct pl_error err = {0};
    char service[256];
    if (pl_health_request_decode(data, size, service, sizeof(service), &err) == 0 &&
        strlen(service) >= sizeof(service))
        abort();
    static const char *const services[] = {"plimsoll.v1.SandboxService", NULL};
    struct pl_buf out = {0};
    int r = pl_reflect_answer(data, size, services, &out, &err);
    if (r == 0 && out.len == 0)
        abort(); /* every answer echoes its question or says why not */
    if (r < 0 && err.reason != PL_REASON_INVALID_REQUEST && err.reason != PL_REASON_INTERNAL)
        abort();
    pl_buf_free(&out);
    pl_pbsym_find((const char *)data, size);
    return 0;
}
