/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_grpc.c: libFuzzer harness for what a gRPC, gRPC-Web or Connect
 * caller's bytes meet before the codec (src/server/api_grpc.c): the
 * request's envelope, grpc-timeout and Connect-Timeout-Ms; and the
 * rewriting of an answer into gRPC's form, with the bytes as its body. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/server/api_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct pl_error err = {0};
    const char *msg;
    size_t len;
    if (api_grpc_unwrap((const char *)data, size, &msg, &len, &err) == 0 &&
        (msg != (const char *)data + 5 || len != size - 5))
        abort(); /* one message, exactly the rest of the body */
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    unsigned ms = 0;
    api_grpc_timeout(text, &ms);
    api_connect_timeout(text, &ms);
    /* An answer of each kind, its body these bytes. */
    static const char *const ctypes[] = {"application/json", "application/proto", "text/plain"};
    for (int i = 0; i < 3; i++) {
        struct pl_api_response rs = {.status = i == 1 ? 200 : 400, .content_type = ctypes[i]};
        rs.body = malloc(size + 1);
        if (!rs.body)
            break;
        memcpy(rs.body, data, size);
        rs.body[size] = '\0';
        rs.body_len = size;
        api_grpc_wrap(i == 2 ? API_GRPC_WEB : API_GRPC, "application/grpc", &rs);
        if (rs.status != 200 || !rs.body)
            abort(); /* gRPC answers every call with 200 and a body, maybe empty */
        pl_api_response_clear(&rs);
    }
    free(text);
    return 0;
}
