/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal interface of plimsoll's own wasm2c runtime (wasm_rt_host.c).
 *
 * wabt's wasm2c output calls a small set of runtime functions declared in
 * <wasm-rt.h> (traps, linear memory, tables, function types).  Instead of
 * linking wabt's wasm-rt-impl.c we implement them here so that
 *   - linear memory is one mmap reservation per worker process, reused
 *     and zeroed between instances, capped per run by lowering max_pages,
 *     grown with mprotect (no 8 GiB guard region per instance, no realloc,
 *     so a deadline signal can never interrupt the C library's allocator);
 *   - traps and the deadline jump land on one sigjmp_buf owned by the worker.
 * The state is process-global, as wasm2c requires; only the worker process
 * (one guest at a time) uses it.
 *
 * Must be compiled with the same WASM_RT_* defines as the generated code
 * (WASM_RT_MEMCHECK_SIGNAL_HANDLER=0, WASM_RT_MAX_CALL_STACK_DEPTH).
 */
#ifndef PLIMSOLL_WASM_RT_HOST_H
#define PLIMSOLL_WASM_RT_HOST_H

#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>

#include <wasm-rt.h>

#if WASM_RT_MEMCHECK_SIGNAL_HANDLER
#error "plimsoll requires WASM_RT_MEMCHECK_SIGNAL_HANDLER=0 (explicit bounds checks)"
#endif
#if !WASM_RT_USE_STACK_DEPTH_COUNT
#error "plimsoll requires wasm2c call-depth counting"
#endif

/* Size of a wasm page. */
#define PL_WASM_PAGE_SIZE 65536u

/* siglongjmp value used for the deadline; trap codes are wasm_rt_trap_t. */
#define PL_WASM_JUMP_DEADLINE 0x100

/*
 * Where traps (and the deadline) jump to.  The worker sets it with
 * sigsetjmp() around instantiation and every guest call, and sets
 * pl_wasm_jump_armed while it is valid.
 */
extern sigjmp_buf pl_wasm_jump;
extern volatile bool pl_wasm_jump_armed;

/**
 * pl_wasm_rt_set_memory_cap - set the maximum linear memory, in wasm pages,
 * for instances created from now on.  Instances whose module declares a
 * higher maximum get this one instead.  pages must be >= 1 and <= 65535.
 */
void pl_wasm_rt_set_memory_cap(uint32_t pages);

/**
 * pl_wasm_rt_memory_failed - true if the last wasm_rt_allocate_memory()
 * could not honour the module's initial size (cap too small or mmap
 * failure).  The instantiation then traps; the worker reports it as OOM.
 */
bool pl_wasm_rt_memory_failed(void);

/* A copy of an instance's linear memory (the engine's image), with the
 * spans of it that are zero and those that are not: a restore writes
 * zeros where the image has them instead of copying them. */
struct pl_wasm_span {
    uint32_t off, len;
    bool zero;
};

struct pl_wasm_image {
    uint8_t *data; /* pages * PL_WASM_PAGE_SIZE bytes */
    uint32_t pages;
    uint32_t n_spans;
    struct pl_wasm_span *spans; /* in order, covering [0, pages) */
};

/**
 * pl_wasm_image_take - copy mem into img (which must be zeroed or freed)
 * and find its spans.  Returns 0, or -1 out of memory (img left empty).
 */
int pl_wasm_image_take(struct pl_wasm_image *img, const wasm_rt_memory_t *mem);

/**
 * pl_wasm_rt_memory_restore - put an instance's memory back to an image:
 * [0, pages) holds the image's bytes, nothing the instance wrote beyond
 * them survives (scrubbed as wasm_rt_free_memory does), and the memory's
 * size is the image's again (its max_pages is left as it was).  Returns 0,
 * or -1 when the memory cannot be restored (the instance must then be
 * freed and made again).
 */
int pl_wasm_rt_memory_restore(wasm_rt_memory_t *mem, const struct pl_wasm_image *img);

/**
 * pl_wasm_rt_memory_set_max - the most pages mem may grow to from now on:
 * min(pages, module_max).  For an instance kept across runs, whose cap is
 * the run's.
 */
void pl_wasm_rt_memory_set_max(wasm_rt_memory_t *mem, uint32_t pages, uint32_t module_max);

/**
 * pl_wasm_rt_reset_after_jump - reset global runtime state after a trap or
 * deadline jump out of guest code (call depth counter).
 */
void pl_wasm_rt_reset_after_jump(void);

#endif
