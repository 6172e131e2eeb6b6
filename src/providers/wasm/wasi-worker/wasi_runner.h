/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wasi_runner.h - run an untrusted WebAssembly (WASI preview 1) module
 * inside the calling process, with a linear-memory cap, bounded output
 * capture and a bounded call depth.
 *
 * The engine is the wabt interpreter (libwabt, C++); this header is the
 * plain C face of it so the rest of plimsoll stays C.  The module gets a
 * deliberately small WASI surface: its own argv, an empty environment,
 * stdin from a caller-supplied buffer, stdout/stderr captured into capped
 * buffers, clocks and randomness.  There are no preopened directories, so
 * the module has no file system access at all.
 *
 * The interpreter cannot be interrupted from inside, so the caller MUST
 * run pl_wasi_run() in a disposable worker process and end that worker at
 * the deadline (docs/providers/wasm-modules.md).  Nothing in this library
 * needs cleaning up after such a kill, and no state is shared between
 * runs, so a worker may run any number of modules one after another
 * (unless one ran out of host memory: see host_exhausted).
 *
 * All functions are safe to call from several threads at once (they share
 * no mutable state), although the daemon is expected to run one module per
 * worker process at a time.
 */
#ifndef PLIMSOLL_WASI_RUNNER_H
#define PLIMSOLL_WASI_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../../../core/capture.h"
#include "../../../core/errors.h"

/* Return codes (all failures are < 0). */
#define PL_WASI_OK 0
#define PL_WASI_ERR_ARGS (-1)        /* bad arguments from the caller */
#define PL_WASI_ERR_MODULE (-2)      /* module refused (invalid or not allowed) */
#define PL_WASI_ERR_INSTANTIATE (-3) /* module could not be instantiated */
#define PL_WASI_ERR_HOST (-4)        /* host allocation failed; recycle the worker */

/* Fixed bounds on host-side resources a module can make the host allocate.
 * They are not caller-tunable because they exist to protect the worker.
 * The module bounds are checked by a counting pass over the binary before
 * the interpreter's reader allocates anything for the items they count
 * (docs/providers/wasm-modules.md, "Module bounds", has the cost of each
 * at its limit). */
#define PL_WASI_MAX_TYPES 100000u         /* function types */
#define PL_WASI_MAX_FUNCS 100000u         /* functions, imported and defined */
#define PL_WASI_MAX_IMPORTS 1000u         /* imports (all functions) */
#define PL_WASI_MAX_EXPORTS 10000u        /* exports */
#define PL_WASI_MAX_GLOBALS 10000u        /* globals */
#define PL_WASI_MAX_TABLES 16u            /* tables per module */
#define PL_WASI_MAX_TABLE_ELEMS 262144u   /* elements per table (initial and max) */
#define PL_WASI_MAX_ELEM_SEGMENTS 10000u  /* element segments */
#define PL_WASI_MAX_ELEMS 1048576u        /* elements in all element segments */
#define PL_WASI_MAX_DATA_SEGMENTS 10000u  /* data segments (and the DataCount) */
#define PL_WASI_MAX_FUNC_LOCALS 4096u     /* params + locals per function */
#define PL_WASI_MAX_IOVS 1024u            /* iovecs per fd_read/fd_write call */
#define PL_WASI_MAX_ARGS_BYTES (1u << 20) /* total bytes of argv strings */
#define PL_WASI_MAX_ARGS 4096u            /* number of caller args */

/* Limits applied to one run. */
struct pl_wasi_limits {
    /* Linear memory cap in bytes.  The module's memory maximum is lowered
     * to floor(memory_bytes / 65536) pages before instantiation, so
     * memory.grow past it returns -1 to the guest.  A module whose INITIAL
     * memory is above the cap is refused.  Values above 4 GiB act as 4 GiB. */
    uint64_t memory_bytes;
    /* Bytes kept per output stream; the rest is dropped and the stream's
     * *_truncated flag set.  No marker is inserted into the kept bytes. */
    size_t stdout_cap;
    size_t stderr_cap;
    /* Where the kept bytes also go, as the module writes them (capture.h;
     * step 0, fd 1 or 2), from inside fd_write; NULL: nowhere.  The
     * runner's own line after a trap is not offered: it is added to the
     * result's err after the kept bytes. */
    const struct pl_output_sink *sink;
};

/* Outcome of one run.  Release with pl_wasi_result_free(). */
struct pl_wasi_result {
    /* The WASI exit status: proc_exit's u32 argument, whatever it is;
     * 0 when _start returned; 1 on a trap or when host memory ran out. */
    uint32_t exit_code;
    /* The module called proc_exit (exit_code is the code it passed). */
    bool exited;
    /* The module trapped (unreachable, out-of-bounds access, call stack
     * exhausted, integer divide by zero, ...). */
    bool trapped;
    /* The interpreter ran out of host memory while the guest ran (wabt's
     * value stack is unbounded; the worker's RLIMIT_AS stops it).  The
     * run was stopped, one "plimsoll: ..." line is on stderr, and the
     * process must not run another module: wabt skipped its cleanup. */
    bool host_exhausted;
    /* Set with host_exhausted.  A failed memory.grow is not reported:
     * wabt has no hook for it, so only the guest sees -1. */
    bool out_of_memory;
    /* Size of the module's linear memory when the run ended, in bytes. */
    uint64_t memory_bytes;
    /* Captured stdout.  out.data is non-NULL and NUL-terminated after a
     * successful pl_wasi_run() (the NUL is not counted in out.len); the
     * module may have written NUL bytes itself, so use out.len. */
    struct pl_output out;
    /* Captured stderr, same conventions.  On a trap one line
     * "plimsoll: module trapped: <message>\n" is appended after whatever
     * the module wrote; that line is added even when the stream is at its
     * cap and does not count towards the cap or set err.truncated (nor does
     * the line for host memory running out). */
    struct pl_output err;
    /* Trap message without the prefix (NUL-terminated), or NULL. */
    char *trap_message;
};

/*
 * Errors: every function below returns one of the codes above and, on
 * failure, fills err (which may be NULL) with a one-line reason (newlines
 * and control bytes replaced) and the reason the API would send:
 * PL_REASON_INVALID_REQUEST for a refused module or bad arguments,
 * PL_REASON_INTERNAL for PL_WASI_ERR_HOST.  err is left alone on success.
 */

/*
 * Parse, validate and check a module without running it.
 *
 * Refuses (returns < 0, the reason in err) when the bytes are not a
 * valid WebAssembly module; import anything other than functions from
 * "wasi_snapshot_preview1"; import a known WASI function with the wrong
 * signature or an unknown one that does not return one i32; lack an exported
 * "_start" function of type () -> () or an exported memory named "memory";
 * declare an initial memory above limits->memory_bytes; or exceed the fixed
 * PL_WASI_MAX_* bounds above (checked before the reader allocates for the
 * items counted).
 *
 * Returns PL_WASI_OK, PL_WASI_ERR_ARGS, PL_WASI_ERR_MODULE or
 * PL_WASI_ERR_HOST.
 */
int pl_wasi_validate(const uint8_t *wasm, size_t len, const struct pl_wasi_limits *limits,
                     struct pl_error *err);

/*
 * Run the module's start function (if any) and then "_start" to completion
 * in the calling thread.  The module sees argv = {"module", args[0], ...,
 * args[nargs-1]}, an empty environment and stdin_data as its stdin.
 *
 * Returns < 0 only when the run could not happen: the module fails
 * pl_wasi_validate() (PL_WASI_ERR_MODULE), instantiation fails, e.g. a data
 * segment does not fit (PL_WASI_ERR_INSTANTIATE), bad arguments
 * (PL_WASI_ERR_ARGS) or a host allocation failed before the guest started
 * (PL_WASI_ERR_HOST; the worker process should then be recycled).  err
 * says why.  A trap, any proc_exit status, and host memory running out
 * while the guest runs (host_exhausted) are results: PL_WASI_OK with
 * *ret_result filled in.
 * On failure *ret_result is zeroed and owns nothing.
 *
 * There is no deadline: a module that loops forever never returns.  Run
 * this in a worker process and SIGKILL it at the deadline.
 */
int pl_wasi_run(const uint8_t *wasm, size_t len, const char *const *args, size_t nargs,
                const char *stdin_data, size_t stdin_len, const struct pl_wasi_limits *limits,
                struct pl_wasi_result *ret_result, struct pl_error *err);

/* Called once per run by pl_wasi_run_hooked(), after instantiation and
 * immediately before the first guest instruction (the start function,
 * else "_start").  Nothing of the guest has run when it is called, and
 * nothing can be refused after it.  A non-zero return stops the run there:
 * pl_wasi_run_hooked() returns PL_WASI_ERR_HOST. */
typedef int (*pl_wasi_start_fn)(void *userdata);

/*
 * pl_wasi_run() with a start hook (NULL = none).  The worker uses it to
 * tell the daemon "the guest starts now" and to arm its deadline: a module
 * refused by validation or instantiation never reaches the hook.
 */
int pl_wasi_run_hooked(const uint8_t *wasm, size_t len, const char *const *args, size_t nargs,
                       const char *stdin_data, size_t stdin_len,
                       const struct pl_wasi_limits *limits, pl_wasi_start_fn on_start,
                       void *userdata, struct pl_wasi_result *ret_result, struct pl_error *err);

/* Release the buffers of a result and zero it.  NULL-safe; safe to call
 * twice. */
void pl_wasi_result_free(struct pl_wasi_result *r);

/* Static string naming the engine, e.g.
 * "wabt interpreter 1.0.32 (WASI preview 1 subset)". */
const char *pl_wasi_engine_version(void);

#ifdef __cplusplus
}
#endif

#endif /* PLIMSOLL_WASI_RUNNER_H */
