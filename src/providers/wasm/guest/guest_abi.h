/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ABI between the wasm guest (guest/qjs_guest.c) and the host worker
 * (js-worker/js_worker.c).  Shared by both sides so the status codes and
 * the shadow-stack size cannot drift apart.  Plain C, no includes.
 *
 * Exports of the wasm module (names after wasm2c mangling in brackets):
 *   _initialize()                     reactor constructor, call once per instance
 *   plg_init() -> i32                 make the runtime and context, once per instance,
 *                                     after _initialize; PLG_RUN_OK or PLG_RUN_OOM.
 *                                     The host keeps the memory and globals it leaves
 *                                     as the engine's image (js-worker/js_worker.c).
 *   plg_alloc(u32 size) -> u32        malloc(size + 1), NUL-terminated; 0 = OOM
 *   plg_run(u32 code, u32 code_len, u32 stdin, u32 stdin_len, u32 broker_max_request,
 *           u64 seed) -> i32 PLG_RUN_*; broker_max_request 0 = no grant; seed is
 *                                     Math.random's; at most once per copy of the image
 *
 * Imports from module "plimsoll" (wasm2c: Z_plimsollZ_<name>), the HTTP
 * broker of a grant.  Two calls so that the guest allocates the reply
 * itself, at its exact size, under its own memory cap; the host never
 * calls back into the guest:
 *   broker_call(u32 req, u32 req_len) -> i32   send the request (JSON bytes) and
 *       wait for the reply; returns the reply's length (>= 0), which the host
 *       keeps until the next broker_call, or a PLG_BROKER_E* code
 *   broker_reply(u32 dst, u32 cap) -> i32      copy the kept reply to dst
 *       (cap >= its length); returns the length or a PLG_BROKER_E* code
 */
#ifndef PLIMSOLL_GUEST_ABI_H
#define PLIMSOLL_GUEST_ABI_H

/* plg_run() results. */
#define PLG_RUN_OK 0        /* script and its jobs completed */
#define PLG_RUN_EXCEPTION 1 /* uncaught exception / unhandled rejection, printed to fd 2 */
#define PLG_RUN_OOM 2       /* as EXCEPTION, but an allocation had failed */

/* broker_call() / broker_reply() errors (negative). */
#define PLG_BROKER_ENOGRANT (-1)   /* this run has no grant */
#define PLG_BROKER_ETOOBIG (-2)    /* request over the grant's max_request_bytes */
#define PLG_BROKER_EUNAVAIL (-3)   /* the broker failed (callback returned < 0) */
#define PLG_BROKER_EREPLYBIG (-4)  /* reply over the grant's max_reply_bytes */
#define PLG_BROKER_EFAULT (-5)     /* pointer/length outside linear memory, or cap too small */
#define PLG_BROKER_ENOREPLY (-6)   /* broker_reply() without a kept reply */
#define PLG_BROKER_ECALLLIMIT (-7) /* the grant's max_calls reached */

/* Size of the guest's shadow stack in linear memory (wasm-ld -z stack-size).
 * The build script passes the same number to the linker. */
#define PLG_SHADOW_STACK_SIZE (1024 * 1024)

#endif
