/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wasi_job.h: how a module run travels in the pool's RUN frame.
 *
 * The frame's "code" bytes are: u32 argument count (little-endian), then
 * each argument as u32 length + bytes, then the module's bytes.  The
 * frame's "stdin" is the guest's stdin.  A worker that refuses the module
 * (invalid, imports outside WASI, over a bound) answers with a REFUSED
 * frame of its own (js_proto.h), never with an exit status.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct pl_wasi_job {
    char **args; /* NUL-terminated copies */
    size_t nargs;
    const uint8_t *wasm; /* borrowed from the encoded bytes */
    size_t wasm_len;
};

/* Encode; returns a malloc'd buffer (*ret_len bytes) or NULL. */
char *pl_wasi_job_encode(const char *const *args, size_t nargs, const uint8_t *wasm,
                         size_t wasm_len, size_t *ret_len);

/* Decode bytes produced by pl_wasi_job_encode; < 0 when malformed. */
int pl_wasi_job_decode(const char *buf, size_t len, struct pl_wasi_job *ret_job);
void pl_wasi_job_free(struct pl_wasi_job *job);
