/*
 * ABI between the wasm guest (guest/qjs_guest.c) and the host worker
 * (src/js_worker.c).  Shared by both sides so the status codes and the
 * shadow-stack size cannot drift apart.  Plain C, no includes.
 *
 * Exports of the wasm module (names after wasm2c mangling in brackets):
 *   _initialize()                     reactor constructor, call once per instance
 *   plg_alloc(u32 size) -> u32        malloc(size + 1), NUL-terminated; 0 = OOM
 *   plg_run(u32 code, u32 code_len, u32 stdin, u32 stdin_len) -> i32  PLG_RUN_*
 */
#ifndef PLIMSOLL_GUEST_ABI_H
#define PLIMSOLL_GUEST_ABI_H

/* plg_run() results. */
#define PLG_RUN_OK 0        /* script and its jobs completed */
#define PLG_RUN_EXCEPTION 1 /* uncaught exception / unhandled rejection, printed to fd 2 */
#define PLG_RUN_OOM 2       /* as EXCEPTION, but an allocation had failed */

/* Size of the guest's shadow stack in linear memory (wasm-ld -z stack-size).
 * The build script passes the same number to the linker. */
#define PLG_SHADOW_STACK_SIZE (1024 * 1024)

#endif
