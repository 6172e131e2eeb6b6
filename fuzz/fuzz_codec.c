/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_codec.c: libFuzzer harness for Connect's binary codec
 * (src/server/codec.c), the bytes an application/proto caller sends.  The
 * first byte picks the method; the rest is its request.  What decodes must
 * encode again, and decode to the same JSON (the codec agrees with itself). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../src/server/codec.h"
#include "sandbox.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const ProtobufCServiceDescriptor *s = &plimsoll__v1__sandbox_service__descriptor;
    const ProtobufCMethodDescriptor *m = &s->methods[(data[0] & 0x7f) % s->n_methods];
    const ProtobufCMessageDescriptor *d = data[0] & 0x80 ? m->output : m->input;
    struct pl_error err = {0};
    json_t *j = pl_codec_decode(d, data + 1, size - 1, &err);
    if (!j)
        return 0;
    struct pl_buf b = {0};
    if (pl_codec_encode(d, j, &b, &err) < 0)
        abort(); /* what decoded is in the contract */
    json_t *again = pl_codec_decode(d, (const uint8_t *)(b.data ? b.data : ""), b.len, &err);
    if (!again || !json_equal(j, again))
        abort();
    json_decref(again);
    json_decref(j);
    pl_buf_free(&b);
    return 0;
}
