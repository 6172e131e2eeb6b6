/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fdio.c: reading and writing a descriptor against a deadline (fdio.h).
 */
#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"

int pl_fd_wait(int fd, short events, uint64_t deadline_ns, int stop_fd) {
    for (;;) {
        int ms = pl_poll_ms_until(deadline_ns);
        if (ms == 0)
            return -ETIMEDOUT;
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = stop_fd, .events = POLLIN}};
        int r = poll(p, stop_fd >= 0 ? 2 : 1, ms);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            continue; /* the deadline is checked again above */
        if (stop_fd >= 0 && p[1].revents)
            return -ECANCELED;
        if (p[0].revents & POLLNVAL)
            return -EBADF;
        if (p[0].revents)
            return 0;
    }
}

int pl_fd_read_full(int fd, void *buf, size_t n, uint64_t deadline_ns, int stop_fd) {
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = read(fd, p, n);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k == 0)
            return -EPIPE;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int w = pl_fd_wait(fd, POLLIN, deadline_ns, stop_fd);
        if (w < 0)
            return w;
    }
    return 0;
}

int pl_fd_write_full(int fd, const void *buf, size_t n, uint64_t deadline_ns, int stop_fd,
                     size_t *ret_written) {
    const unsigned char *p = buf;
    size_t done = 0;
    bool sock = true;
    int rc = 0;
    while (n > 0) {
        ssize_t k = sock ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);
        if (k < 0 && sock && errno == ENOTSOCK) {
            sock = false;
            continue;
        }
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            done += (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            rc = -errno;
            break;
        }
        int w = pl_fd_wait(fd, POLLOUT, deadline_ns, stop_fd);
        if (w < 0) {
            rc = w;
            break;
        }
    }
    if (ret_written)
        *ret_written = done;
    return rc;
}

int pl_fd_set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    return 0;
}
