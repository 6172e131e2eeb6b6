/* SPDX-License-Identifier: Apache-2.0 */
/*
 * js_proto.c: framing for the pool <-> worker protocol described in
 * js_proto.h: whole-frame writes with sendmsg(MSG_NOSIGNAL) (a frame's
 * pieces gathered, so a worker answers with one system call) and header
 * checks.  Exact reads are the core's pl_fd_read_full().  Used by both
 * processes; no allocation, no global state.
 */
#include "js_proto.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "../../../core/fdio.h"

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
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return -errno;
            /* The pool's end is non-blocking; a worker's never is, so a
             * worker never waits here (poll is not in its filter). */
            int w = pl_fd_wait(fd, POLLOUT, 0, -1);
            if (w < 0)
                return w;
            continue;
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

int pl_js_check_hdr(const struct pl_js_frame_hdr *hdr, uint16_t want_type, uint64_t max_len) {
    if (hdr->magic != PL_JS_PROTO_MAGIC || hdr->version != PL_JS_PROTO_VERSION ||
        hdr->type != want_type || hdr->len > max_len || hdr->reserved != 0)
        return -EPROTO;
    return 0;
}

int pl_js_write_output(int sock, int stream, const char *data, size_t len, size_t *ret_sent) {
    size_t n = len < PL_JS_MAX_OUTPUT_FRAME ? len : PL_JS_MAX_OUTPUT_FRAME;
    struct pl_js_output o = {.fd = (uint32_t)stream};
    struct iovec parts[2] = {{&o, sizeof(o)}, {(void *)data, n}};
    *ret_sent = n;
    return pl_js_write_frame(sock, PL_JS_MSG_OUTPUT, parts, 2);
}
