/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Minimal WASI (wasi_snapshot_preview1) host for the QuickJS guest.
 *
 * Implements exactly the imports the module has: fd_write (fd 1 and 2 go
 * to bounded in-memory buffers), clock_time_get (realtime and monotonic),
 * and stubs for fd_close, fd_seek and fd_fdstat_get.  Anything else the
 * guest might try is not importable at all.  The guest has no file
 * descriptors besides 1 and 2 and no filesystem (no preopens).
 *
 * Output is kept in a pl_capture per stream (src/core/capture.h): bytes
 * past a stream's cap are counted and dropped, the kept bytes are always
 * an exact prefix of what the guest wrote.  A capture grows inside
 * fd_write, a host import, where the deadline is deferred
 * (pl_wasi_host_enter), so realloc is never interrupted; if it fails, the
 * bytes are dropped and the stream counts as truncated.
 */
#ifndef PLIMSOLL_WASI_HOST_H
#define PLIMSOLL_WASI_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <wasm-rt.h>

#include "../../../core/capture.h"

/* The WASI "instance" wasm2c passes to every import. */
struct Z_wasi_snapshot_preview1_instance_t {
    wasm_rt_memory_t *memory; /* the guest's linear memory */
    struct pl_capture out[2]; /* [0] = fd 1, [1] = fd 2 */
};

typedef struct Z_wasi_snapshot_preview1_instance_t pl_wasi_t;

/*
 * The "plimsoll" import instance (broker_call, broker_reply; see
 * guest/guest_abi.h), implemented by the worker (js_worker.c): it forwards
 * the guest's request to the pool as a BROKER_REQ frame and keeps the reply
 * until the guest copies it out.  The reply buffer belongs to the worker
 * and is reused across runs.
 */
struct Z_plimsoll_instance_t {
    wasm_rt_memory_t *memory; /* the guest's linear memory */
    int fd;                   /* the worker's socket to the pool */
    uint32_t max_request;     /* 0: this run has no grant */
    uint32_t max_reply;
    bool has_reply; /* reply[0..reply_len) is kept for broker_reply() */
    size_t reply_len;
};

typedef struct Z_plimsoll_instance_t pl_broker_host_t;

/**
 * pl_wasi_init - prepare w for one run: empty captures that keep at most
 * stdout_cap and stderr_cap bytes.
 */
void pl_wasi_init(pl_wasi_t *w, wasm_rt_memory_t *memory, size_t stdout_cap, size_t stderr_cap);

/** pl_wasi_release - free a run's captures (after its RESULT was sent). */
void pl_wasi_release(pl_wasi_t *w);

/**
 * pl_wasi_host_enter / pl_wasi_host_leave - bracket host code called from
 * the guest.  A deadline that fires in between is deferred to
 * pl_wasi_host_leave(), which performs the jump.  Implemented by the worker.
 */
void pl_wasi_host_enter(void);
void pl_wasi_host_leave(void);

#endif
