/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_osh_exec.c: what an OpenShell gateway (or anything answering in its
 * place) sends back for one ExecSandbox call, as the daemon reads it: the
 * response headers and trailers line by line (hosted/grpc.c), then the
 * body's gRPC envelopes, each an ExecSandboxEvent (openshell/event.c).
 * The input is the header block, a blank line, then the body; the first
 * byte picks the captures' cap.  Whatever the bytes: the captures keep no
 * more than their caps, the status is -1 or a code below 1000, the
 * message stays a printable C string, and nothing is read past the exit.
 *
 *   build-fuzz/fuzz/fuzz_osh_exec fuzz/corpus/osh_exec
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/openshell/osh_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct run {
    struct osh_exec x;
    bool exited;
    unsigned after_exit;
};

static int on_message(void *ud, unsigned flags, const unsigned char *msg, size_t len) {
    struct run *r = ud;
    (void)flags;
    if (r->exited) {
        r->after_exit++;
        return -1;
    }
    struct pl_error err = {0};
    int rc = osh_exec_event(&r->x, msg, len, &err);
    if (rc < 0 && err.message[0] == '\0')
        abort(); /* a refusal says why */
    if (rc > 0)
        r->exited = true;
    return rc == 0 ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    size_t cap = data[0] & 0x0f ? (size_t)(data[0] & 0x0f) * 7 : 4096;
    data++, size--;
    struct ph_grpc_call c = {.status = -1};
    long http = 0;
    bool grpc_type = false;
    size_t i = 0;
    while (i < size) {
        const uint8_t *nl = memchr(data + i, '\n', size - i);
        size_t len = nl ? (size_t)(nl - (data + i)) : size - i;
        if (len == 0) {
            i++;
            break;
        }
        ph_grpc_header_line(&c, (const char *)data + i, len, &http, &grpc_type);
        i += len + (nl ? 1 : 0);
    }
    if (c.status < -1 || c.status >= 1000 || strlen(c.message) >= sizeof(c.message) || http < 0 ||
        http >= 1000)
        abort();
    for (const char *p = c.message; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            abort();
    struct run r = {0};
    osh_exec_init(&r.x, cap);
    struct ph_envelopes env;
    ph_envelopes_init(&env, 1u << 16, on_message, &r);
    (void)ph_envelopes_feed(&env, data + i, size - i);
    ph_envelopes_free(&env);
    if (r.after_exit || r.x.out.kept.len > cap || r.x.err.kept.len > cap ||
        r.x.out.total < r.x.out.kept.len || r.x.err.total < r.x.err.kept.len)
        abort();
    osh_exec_free(&r.x);
    return 0;
}
