/*
 * Minimal WASI (wasi_snapshot_preview1) host for the QuickJS guest.
 *
 * Implements exactly the imports the module has: fd_write (fd 1 and 2 go
 * to bounded in-memory buffers), clock_time_get (realtime and monotonic),
 * and stubs for fd_close, fd_seek and fd_fdstat_get.  Anything else the
 * guest might try is not importable at all.  The guest has no file
 * descriptors besides 1 and 2 and no filesystem (no preopens).
 *
 * Output buffers are provided by the worker before the guest starts and
 * never grown, so an import can be interrupted by the deadline without
 * leaving the C heap inconsistent.  Bytes past a stream's cap are counted and dropped;
 * the kept bytes are always an exact prefix of what the guest wrote.
 */
#ifndef PLIMSOLL_WASI_HOST_H
#define PLIMSOLL_WASI_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <wasm-rt.h>

/* One captured output stream. */
struct pl_out_stream {
    char *buf;
    size_t len; /* kept bytes, <= cap */
    size_t cap;
    uint64_t total; /* bytes the guest wrote, kept or not */
    bool truncated;
};

/* The WASI "instance" wasm2c passes to every import. */
struct Z_wasi_snapshot_preview1_instance_t {
    wasm_rt_memory_t *memory;    /* the guest's linear memory */
    struct pl_out_stream out[2]; /* [0] = fd 1, [1] = fd 2 */
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
 * pl_wasi_init - prepare w for one run.  stdout_buf/stderr_buf are
 * caller-owned buffers of at least stdout_cap/stderr_cap bytes (they are
 * reused across runs, so no allocation happens per run).
 */
void pl_wasi_init(pl_wasi_t *w, wasm_rt_memory_t *memory, char *stdout_buf, size_t stdout_cap,
                  char *stderr_buf, size_t stderr_cap);

/**
 * pl_wasi_host_enter / pl_wasi_host_leave - bracket host code called from
 * the guest.  A deadline that fires in between is deferred to
 * pl_wasi_host_leave(), which performs the jump.  Implemented by the worker.
 */
void pl_wasi_host_enter(void);
void pl_wasi_host_leave(void);

#endif
