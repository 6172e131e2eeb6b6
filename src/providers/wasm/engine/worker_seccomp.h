/*
 * worker_seccomp.h: the filter shared by the worker executables.
 */
#pragma once

/*
 * Allow only what a serving worker needs (socket I/O on its fd, memory
 * management, the deadline timer, clocks, futex, exit); openat fails with
 * EACCES; anything else kills the worker (logs, in sanitizer builds).
 * Returns 0 or -errno.
 */
int pl_worker_seccomp(void);
