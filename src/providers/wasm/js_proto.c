/*
 * Framing helpers for the pool <-> worker protocol described in
 * js_proto.h: whole-frame writes with sendmsg(MSG_NOSIGNAL) and exact
 * reads with an optional monotonic deadline.  Used by both processes; no
 * allocation, no global state.
 */
#include "js_proto.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t pl_js_now_ns(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int pl_js_write_frame(int fd, uint16_t type, const struct iovec *parts, size_t nparts) {
    struct pl_js_frame_hdr hdr = {
        .magic = PL_JS_PROTO_MAGIC,
        .version = PL_JS_PROTO_VERSION,
        .type = type,
    };
    struct iovec iov[5];
    size_t niov = 1, total = 0;

    if (nparts > 4)
        return -EINVAL;
    for (size_t i = 0; i < nparts; i++) {
        if (parts[i].iov_len == 0)
            continue;
        total += parts[i].iov_len;
        iov[niov++] = parts[i];
    }
    if (total > UINT32_MAX)
        return -EMSGSIZE;
    hdr.len = (uint32_t)total;
    iov[0].iov_base = &hdr;
    iov[0].iov_len = sizeof(hdr);

    struct iovec *cur = iov;
    while (niov > 0) {
        struct msghdr msg = {.msg_iov = cur, .msg_iovlen = niov};
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        /* Skip fully written pieces, trim a partially written one. */
        while (niov > 0 && (size_t)n >= cur->iov_len) {
            n -= (ssize_t)cur->iov_len;
            cur++;
            niov--;
        }
        if (niov > 0) {
            cur->iov_base = (char *)cur->iov_base + n;
            cur->iov_len -= (size_t)n;
        }
    }
    return 0;
}

int pl_js_read_full(int fd, void *buf, size_t len, uint64_t deadline_ns) {
    char *p = buf;

    while (len > 0) {
        ssize_t n;

        if (deadline_ns) {
            uint64_t now = pl_js_now_ns();
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int timeout_ms, r;

            if (now >= deadline_ns)
                return -ETIMEDOUT;
            timeout_ms = (int)((deadline_ns - now + 999999) / 1000000);
            r = poll(&pfd, 1, timeout_ms);
            if (r < 0) {
                if (errno == EINTR)
                    continue;
                return -errno;
            }
            if (r == 0)
                continue; /* re-check the deadline */
        }
        n = read(fd, p, len);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EPIPE;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int pl_js_check_hdr(const struct pl_js_frame_hdr *hdr, uint16_t want_type, uint64_t max_len) {
    if (hdr->magic != PL_JS_PROTO_MAGIC || hdr->version != PL_JS_PROTO_VERSION ||
        hdr->type != want_type || hdr->len > max_len || hdr->reserved != 0)
        return -EPROTO;
    return 0;
}
