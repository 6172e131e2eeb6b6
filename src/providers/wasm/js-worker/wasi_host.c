/* SPDX-License-Identifier: Apache-2.0 */
/*
 * WASI imports for the QuickJS guest; see wasi_host.h.
 *
 * All guest pointers are offsets into linear memory and are range-checked
 * against its current size before use; a bad pointer yields EFAULT (21)
 * rather than touching host memory.  Errno values are WASI's, not Linux's.
 */
#include "wasi_host.h"

#include "qjs_wasm.h" /* generated: import prototypes, u32/u64 */

#include <string.h>
#include <time.h>

/* WASI errno values (wasi_snapshot_preview1). */
#define WASI_ESUCCESS 0
#define WASI_EBADF 8
#define WASI_EFAULT 21
#define WASI_EINVAL 28
#define WASI_ESPIPE 70

#define WASI_CLOCK_REALTIME 0
#define WASI_CLOCK_MONOTONIC 1
#define WASI_FILETYPE_CHARACTER_DEVICE 2
#define WASI_RIGHT_FD_WRITE (1u << 6)

void pl_wasi_init(pl_wasi_t *w, wasm_rt_memory_t *memory, size_t stdout_cap, size_t stderr_cap) {
    memset(w, 0, sizeof(*w));
    w->memory = memory;
    pl_capture_init(&w->out[0], stdout_cap);
    pl_capture_init(&w->out[1], stderr_cap);
}

void pl_wasi_release(pl_wasi_t *w) {
    pl_capture_free(&w->out[0]);
    pl_capture_free(&w->out[1]);
}

/* Pointer to len bytes at guest address addr, or NULL if out of bounds. */
static uint8_t *guest_ptr(pl_wasi_t *w, uint32_t addr, uint64_t len) {
    wasm_rt_memory_t *m = w->memory;

    if (!m || !m->data || (uint64_t)addr + len > m->size)
        return NULL;
    return m->data + addr;
}

static void put_u32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, sizeof(v)); /* wasm and x86_64/aarch64 are little-endian */
}

static void put_u64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, sizeof(v));
}

static uint32_t get_u32(const uint8_t *p) {
    uint32_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

static uint32_t do_fd_write(pl_wasi_t *w, uint32_t fd, uint32_t iovs, uint32_t iovs_len,
                            uint32_t nwritten_ptr) {
    struct pl_capture *s;
    uint8_t *vec, *nw;
    uint64_t total = 0;

    if (fd != 1 && fd != 2)
        return WASI_EBADF;
    s = &w->out[fd - 1];
    vec = guest_ptr(w, iovs, (uint64_t)iovs_len * 8);
    nw = guest_ptr(w, nwritten_ptr, 4);
    if (!vec || !nw)
        return WASI_EFAULT;
    for (uint32_t i = 0; i < iovs_len; i++) {
        uint32_t base = get_u32(vec + 8 * i);
        uint32_t len = get_u32(vec + 8 * i + 4);
        uint8_t *data = guest_ptr(w, base, len);

        if (!data)
            return WASI_EFAULT;
        (void)pl_capture_add(s, data, len); /* -ENOMEM: dropped, and counted as cut */
        total += len;
    }
    /* Report everything as written, kept or not, so the guest moves on. */
    put_u32(nw, total > UINT32_MAX ? UINT32_MAX : (uint32_t)total);
    return WASI_ESUCCESS;
}

u32 Z_wasi_snapshot_preview1Z_fd_write(pl_wasi_t *w, u32 fd, u32 iovs, u32 iovs_len,
                                       u32 nwritten_ptr) {
    uint32_t r;

    pl_wasi_host_enter();
    r = do_fd_write(w, fd, iovs, iovs_len, nwritten_ptr);
    pl_wasi_host_leave();
    return r;
}

u32 Z_wasi_snapshot_preview1Z_clock_time_get(pl_wasi_t *w, u32 id, u64 precision, u32 time_ptr) {
    struct timespec ts;
    uint8_t *out;
    clockid_t clk;

    (void)precision;
    if (id == WASI_CLOCK_REALTIME)
        clk = CLOCK_REALTIME;
    else if (id == WASI_CLOCK_MONOTONIC)
        clk = CLOCK_MONOTONIC;
    else
        return WASI_EINVAL; /* no CPU-time clocks for the guest */
    out = guest_ptr(w, time_ptr, 8);
    if (!out)
        return WASI_EFAULT;
    if (clock_gettime(clk, &ts) != 0)
        return WASI_EINVAL;
    put_u64(out, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
    return WASI_ESUCCESS;
}

u32 Z_wasi_snapshot_preview1Z_fd_close(pl_wasi_t *w, u32 fd) {
    (void)w;
    return fd <= 2 ? WASI_ESUCCESS : WASI_EBADF;
}

u32 Z_wasi_snapshot_preview1Z_fd_seek(pl_wasi_t *w, u32 fd, u64 offset, u32 whence,
                                      u32 newoffset_ptr) {
    (void)w;
    (void)offset;
    (void)whence;
    (void)newoffset_ptr;
    return fd <= 2 ? WASI_ESPIPE : WASI_EBADF;
}

u32 Z_wasi_snapshot_preview1Z_fd_fdstat_get(pl_wasi_t *w, u32 fd, u32 stat_ptr) {
    uint8_t *st;

    if (fd != 1 && fd != 2)
        return WASI_EBADF;
    st = guest_ptr(w, stat_ptr, 24);
    if (!st)
        return WASI_EFAULT;
    /* struct fdstat: u8 filetype; u16 flags @2; u64 rights_base @8;
     * u64 rights_inheriting @16.  A write-only character device makes
     * wasi-libc treat the stream as a line-buffered terminal. */
    memset(st, 0, 24);
    st[0] = WASI_FILETYPE_CHARACTER_DEVICE;
    put_u64(st + 8, WASI_RIGHT_FD_WRITE);
    return WASI_ESUCCESS;
}
