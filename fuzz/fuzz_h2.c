/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_h2.c: libFuzzer harness for the daemon's HTTP/2 request path
 * (src/server/h2.c): the input is everything a peer sends after the
 * preface, over a socket pair, to a real connection of pl_h2_serve with
 * its nghttp2 callbacks, streams, deadlines and workers, in front of the
 * real API on the Disabled provider (so a request with the key reaches
 * its body and dispatch, and is refused DISABLED).  The connection must
 * end when the input does, with every stream freed (ASan sees the rest). */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../src/server/h2.h"
#include "fixture.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct pl_config config;
static struct pl_provider provider;
static struct pl_api api;
static struct pl_h2 *h2;
static atomic_uint in_progress;

/* Every setting at its default but one origin for CORS (its preflight
 * and answers are reached too); the keys are made here, not read. */
static const char *setting(const char *name, void *userdata) {
    (void)userdata;
    if (strcmp(name, "PLIMSOLL_CORS_ORIGINS") == 0)
        return "http://127.0.0.2:8000";
    return strcmp(name, "PLIMSOLL_KEYS_FILE") == 0 ? "/dev/null" : NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_api_init("fuzz_h2", setting, &config, &provider, &api);
    /* Deadlines short enough that a stream left open ends within a run. */
    config.request_read_timeout_ms = 100;
    config.answer_send_timeout_ms = 100;
    h2 = pl_h2_new(&api, &in_progress, NULL);
    return h2 ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return 0;
    int big = 1 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    if (write(sv[0], preface, sizeof(preface) - 1) != (ssize_t)sizeof(preface) - 1 ||
        (size && write(sv[0], data, size) != (ssize_t)size)) {
        close(sv[0]);
        close(sv[1]);
        return 0;
    }
    shutdown(sv[0], SHUT_WR);
    pl_h2_serve(h2, sv[1], NULL, NULL); /* closes sv[1] once the input ends */
    close(sv[0]);
    if (atomic_load(&in_progress) != 0)
        abort(); /* every stream the input opened was freed */
    return 0;
}
