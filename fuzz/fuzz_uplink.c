/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_uplink.c: the daemon's reader of a session interpreter's uplink
 * (src/providers/docker/uplink_cell.c).  The input is what a hostile
 * interpreter sends once the cell arrived, from the other end of a
 * socketpair, which it then closes.
 * Whatever the bytes, the call ends (ran, ended, never timed out on a
 * closed peer), keeps no more than its caps and counts at least what it
 * kept; a status comes only with "ran".  Display frames ("D") go to a
 * pl_displays whose bounds the first byte's next bits pick: it never keeps
 * more outputs or bytes than they allow, and what it keeps parses again.
 *
 *   CC=clang-14 CXX=clang++-14 scripts/build/configure build-fuzz -Dfuzz=true \
 *       -Db_sanitize=address,undefined -Db_lundef=false
 *   build-fuzz/fuzz/fuzz_uplink fuzz/corpus/uplink
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../src/providers/docker/docker_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t CAPS[4] = {0, 7, 4096, 1u << 20};

struct peer {
    int fd;
    const uint8_t *data;
    size_t size;
};

/* The interpreter: take the cell's frame (6 bytes: "C", length 1, "1"),
 * answer with the input, close. */
static void *peer_main(void *arg) {
    struct peer *p = arg;
    unsigned char cell[6];
    size_t got = 0;
    while (got < sizeof(cell)) {
        ssize_t k = read(p->fd, cell + got, sizeof(cell) - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    (void)pl_fd_write_full(p->fd, p->data, p->size, 0, -1, NULL); /* the daemon may stop reading */
    shutdown(p->fd, SHUT_RDWR);
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 65536)
        return 0;
    size_t cap = CAPS[data[0] & 3];
    struct pl_display_bounds bounds = {.outputs = 1u + ((data[0] >> 2) & 3u),
                                       .output_bytes = 64u << ((data[0] >> 4) & 3u),
                                       .bytes = 128u << ((data[0] >> 6) & 3u)};
    struct pl_displays disp;
    pl_displays_init(&disp, bounds, NULL);
    data++;
    size--;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    int buf = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    if (pl_fd_set_nonblock(sv[0]) < 0)
        abort();
    struct dsession d;
    memset(&d, 0, sizeof(d));
    d.in[LANG_PY].fd = sv[0];
    d.in[LANG_JS].fd = -1;
    d.lfd = -1;
    struct pl_demux dx;
    memset(&dx, 0, sizeof(dx));
    pl_capture_init(&dx.out, cap);
    pl_capture_init(&dx.err, cap);
    int status = -7;
    struct peer p = {sv[1], data, size};
    pthread_t t;
    if (pthread_create(&t, NULL, peer_main, &p) != 0)
        abort();
    enum uplink_end e =
        dk_uplink_cell(&d, LANG_PY, "1", 1, pl_deadline_in_ms(5000), &dx, &disp, &status);
    shutdown(sv[0], SHUT_RDWR); /* the peer may still be writing */
    pthread_join(t, NULL);
    if (e == UPLINK_TIMED_OUT)
        abort(); /* a closed peer ends the call at once */
    if (e == UPLINK_RAN ? (status != 0 && status != 1) : status != -7)
        abort();
    if (dx.out.kept.len > cap || dx.err.kept.len > cap || dx.out.total < dx.out.kept.len ||
        dx.err.total < dx.err.kept.len)
        abort();
    json_t *outs = NULL;
    unsigned dropped = 0;
    size_t used = disp.used;
    if (disp.admitted)
        abort(); /* every admitted bundle is taken or cancelled */
    pl_displays_finish(&disp, &outs, &dropped);
    if (json_array_size(outs) > bounds.outputs || used > bounds.bytes)
        abort();
    if (!pl_display_list_reparses(outs))
        abort();
    json_decref(outs);
    pl_demux_free(&dx);
    dk_uplink_drop(&d, LANG_PY);
    close(sv[1]);
    return 0;
}
