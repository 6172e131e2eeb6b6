/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fdio.h: reading and writing a descriptor against a deadline.
 *
 * Every function here returns 0 or a negative errno, takes its deadline
 * in nanoseconds on the daemon's clock (clock.h; 0: none) and, where it
 * waits, an optional stop descriptor (-1: none): when stop_fd becomes
 * readable the wait ends with -ECANCELED, so a server thread can be told
 * to leave a slow peer.  The descriptor may be blocking or not.
 * docs/internals/fdio.md.
 *
 *   -ETIMEDOUT   the deadline passed
 *   -ECANCELED   stop_fd became readable
 *   -EPIPE       the peer closed (reading: end of file before n bytes)
 *   other        the system call's errno
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Wait until fd is ready for events (POLLIN, POLLOUT).  0 when it is
 * (POLLHUP and POLLERR count as ready: the next read or write tells). */
int pl_fd_wait(int fd, short events, uint64_t deadline_ns, int stop_fd);

/* Read exactly n bytes into buf. */
int pl_fd_read_full(int fd, void *buf, size_t n, uint64_t deadline_ns, int stop_fd);

/*
 * Write all n bytes of buf (send with MSG_NOSIGNAL on a socket, write
 * otherwise).  *ret_written (may be NULL) counts the bytes that went, also
 * on failure, so a caller can tell "nothing was sent" from "cut short".
 */
int pl_fd_write_full(int fd, const void *buf, size_t n, uint64_t deadline_ns, int stop_fd,
                     size_t *ret_written);

/* O_NONBLOCK on (0 or -errno). */
int pl_fd_set_nonblock(int fd);
