/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uplink_cell.c: one cell over a kept interpreter's uplink, the daemon's
 * side of the framing (docs/sessions.md, "The uplink"): the cell goes out
 * as one "C" frame; "O" and "E" frames come back into the call's capture,
 * "D" frames (a display output's MIME bundle, display.h) into its outputs,
 * and one "X" frame ends the cell with its status.  Every byte read here is
 * the guest's: the interpreter runs its code.  Anything but that framing
 * loses the channel; nothing read is trusted beyond the call's output.
 * Alone in its file so its fuzz harness (fuzz/fuzz_uplink.c) and unit test
 * (tests/unit/test_uplink.c) link it without the rest of the provider.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "docker_int.h"

void dk_uplink_drop(struct dsession *d, int lang) {
    if (d->in[lang].fd >= 0)
        close(d->in[lang].fd);
    d->in[lang].fd = -1;
}

/* One cell over the uplink.  UPLINK_UNUSABLE: nothing was sent (the
 * uplink is dropped; the caller starts a fresh interpreter).  UPLINK_RAN:
 * *status (0 ran, 1 raised).  What output came back is in dx. */
/* A "D" frame's n bytes: into disp when its bounds admit them, read and
 * dropped otherwise (counted there).  0 or fdio's negative errno. */
static int display_frame(int fd, uint32_t n, uint64_t deadline, struct pl_displays *disp,
                         unsigned char *junk, size_t jsize) {
    char *b = NULL;
    if (disp && pl_displays_admit(disp, n) && !(b = malloc(n ? n : 1)))
        pl_displays_cancel(disp);
    if (b) {
        int r = pl_fd_read_full(fd, b, n, deadline, -1);
        if (r == 0)
            pl_displays_take(disp, b, n);
        else
            pl_displays_cancel(disp);
        free(b);
        return r;
    }
    while (n > 0) {
        size_t chunk = n < jsize ? n : jsize;
        int r = pl_fd_read_full(fd, junk, chunk, deadline, -1);
        if (r < 0)
            return r;
        n -= (uint32_t)chunk;
    }
    return 0;
}

enum uplink_end dk_uplink_cell(struct dsession *d, int lang, const char *code, size_t len,
                               uint64_t deadline, struct pl_demux *dx, struct pl_displays *disp,
                               int *status) {
    int fd = d->in[lang].fd;
    unsigned char junk[4096];
    ssize_t k;
    /* Whatever the interpreter wrote between cells is not this cell's. */
    int rounds = 0; /* bounded: an interpreter that never stops writing loses its uplink */
    while ((k = read(fd, junk, sizeof(junk))) > 0 && ++rounds < 256)
        ;
    if (k > 0) {
        dk_uplink_drop(d, lang);
        return UPLINK_UNUSABLE;
    }
    if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
        dk_uplink_drop(d, lang);
        return UPLINK_UNUSABLE;
    }
    unsigned char h[5] = {'C', (unsigned char)(len >> 24), (unsigned char)(len >> 16),
                          (unsigned char)(len >> 8), (unsigned char)len};
    size_t sent = 0, more = 0;
    int w = pl_fd_write_full(fd, h, 5, deadline, -1, &sent);
    if (w == 0)
        w = pl_fd_write_full(fd, code, len, deadline, -1, &more);
    if (w < 0 && w != -ETIMEDOUT && sent + more == 0) {
        dk_uplink_drop(d, lang);
        return UPLINK_UNUSABLE;
    }
    if (w < 0)
        return w == -ETIMEDOUT ? UPLINK_TIMED_OUT : UPLINK_ENDED;
    for (;;) {
        int r = pl_fd_read_full(fd, h, 5, deadline, -1);
        if (r < 0)
            return r == -ETIMEDOUT ? UPLINK_TIMED_OUT : UPLINK_ENDED;
        uint32_t n = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
        if (h[0] == 'D') { /* bounded by disp, not by the frame limit */
            r = display_frame(fd, n, deadline, disp, junk, sizeof(junk));
            if (r < 0)
                return r == -ETIMEDOUT ? UPLINK_TIMED_OUT : UPLINK_ENDED;
            continue;
        }
        if ((h[0] != 'O' && h[0] != 'E' && h[0] != 'X') || n > UPLINK_MAX_FRAME ||
            (h[0] == 'X' && n > 8))
            return UPLINK_ENDED; /* not the agent's framing: the channel is lost */
        if (h[0] == 'X') {
            char st[9] = {0};
            r = pl_fd_read_full(fd, st, n, deadline, -1);
            if (r < 0)
                return r == -ETIMEDOUT ? UPLINK_TIMED_OUT : UPLINK_ENDED;
            *status = strcmp(st, "0") == 0 ? 0 : 1;
            return UPLINK_RAN;
        }
        struct pl_capture *c = h[0] == 'O' ? &dx->out : &dx->err;
        while (n > 0) {
            size_t chunk = n < sizeof(junk) ? n : sizeof(junk);
            r = pl_fd_read_full(fd, junk, chunk, deadline, -1);
            if (r < 0)
                return r == -ETIMEDOUT ? UPLINK_TIMED_OUT : UPLINK_ENDED;
            if (pl_capture_add(c, junk, chunk) < 0)
                return UPLINK_ENDED;
            n -= (uint32_t)chunk;
        }
    }
}
