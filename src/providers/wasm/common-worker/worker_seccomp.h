/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker_seccomp.h: the filter shared by the worker executables.
 */
#pragma once

/* pl_worker_seccomp() flags: system calls only one worker needs.
 * PL_SECCOMP_WASI_CALLS: clock_getres, for WASI's clock_res_get (the
 * module worker; both workers get getrandom). */
#define PL_SECCOMP_WASI_CALLS (1u << 0)

/*
 * Allow only what a serving worker needs (socket I/O on its fd, memory
 * management, the deadline timer, clocks, futex, getrandom, exit), plus what `flags`
 * adds; openat fails with EACCES; anything else kills the worker (logs, in
 * sanitizer builds).  Returns 0 or -errno.
 */
int pl_worker_seccomp(unsigned flags);
