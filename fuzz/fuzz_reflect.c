/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_reflect.c: libFuzzer harness for the decoders of gRPC's health and
 * server-reflection requests (src/server/reflect.c), a peer's bytes as
 * each stream's message: HealthCheckRequest, ServerReflectionRequest and
 * the ExtensionRequest inside it, answered from the generated descriptor
 * tables.  An answer is always a message: it must read back as one.  The
 * same bytes as Connect's JSON form of a ServerReflectionRequest: what it
 * decodes to is answered, and every answer reads back as JSON. */
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
    if (r == 0) {
        struct pl_buf json = {0};
        if (pl_reflect_response_to_json((const uint8_t *)out.data, out.len, &json) < 0)
            abort(); /* an answer's bytes always have a JSON form */
        pl_buf_free(&json);
    }
    pl_buf_free(&out);
    struct pl_buf pb = {0}, json = {0};
    if (pl_reflect_request_from_json((const char *)data, size, &pb, &err) == 0) {
        struct pl_buf answer = {0};
        if (pl_reflect_answer((const uint8_t *)(pb.data ? pb.data : ""), pb.len, services, &answer,
                              &err) < 0 &&
            err.reason != PL_REASON_INVALID_REQUEST)
            abort();
        if (answer.len &&
            pl_reflect_response_to_json((const uint8_t *)answer.data, answer.len, &json) < 0)
            abort();
        pl_buf_free(&answer);
    } else if (err.reason != PL_REASON_INVALID_REQUEST && err.reason != PL_REASON_INTERNAL) {
        abort();
    }
    pl_buf_free(&pb);
    pl_buf_free(&json);
    json = (struct pl_buf){0};
    pl_reflect_response_to_json(data, size, &json); /* any bytes: an answer or -1 */
    pl_buf_free(&json);
    pl_pbsym_find((const char *)data, size);
    return 0;
}
