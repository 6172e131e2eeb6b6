/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine.h: the Docker Engine API over its local Unix socket.
 *
 * One socket path, found once at startup (DOCKER_HOST unix://PATH, or
 * /var/run/docker.sock), reused for every call.  A remote engine
 * (tcp://, ssh://, anything but unix://) is refused: the broker's per-run
 * socket and the cleanup after each run only work on the same machine.
 *
 * Ordinary calls go through libcurl (CURLOPT_UNIX_SOCKET_PATH), on a kept
 * handle whose connection stays open between calls (opened close-on-exec)
 * when no other call has it; the attach
 * stream, which the engine hijacks into a raw bidirectional byte stream
 * after an HTTP Upgrade, is a plain socket (libcurl has no hijack mode).
 * API version 1.41 (docker 20.10, Debian 12's docker.io).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/buf.h"
#include "../../core/capture.h"
#include "../../core/errors.h"

#define PL_DOCKER_API "/v1.41"
#define PL_DOCKER_MAX_RESPONSE (8u << 20) /* bytes of one API answer */

struct pl_docker_engine;

/*
 * Resolve the engine's socket from docker_host (the DOCKER_HOST setting;
 * NULL or "" means /var/run/docker.sock).  Refuses remote engines.  Does
 * not connect.
 */
int pl_docker_engine_new(const char *docker_host, struct pl_docker_engine **ret_engine,
                         struct pl_error *err);
void pl_docker_engine_free(struct pl_docker_engine *e);
const char *pl_docker_engine_socket(const struct pl_docker_engine *e);

/*
 * One API call.  path starts with "/" and excludes the version prefix.
 * body may be NULL.  On success (the engine answered at all) returns 0 with
 * *ret_status set and, when the answer is JSON, *ret_json (may be NULL).
 * Returns < 0 with err (INTERNAL) when the engine could not be reached or
 * the answer was unreadable or too large.
 */
int pl_docker_call(struct pl_docker_engine *e, const char *method, const char *path,
                   const json_t *body, long timeout_ms, long *ret_status, json_t **ret_json,
                   struct pl_error *err);

/* Percent-encode s for a query string; malloc'd, NULL on OOM. */
char *pl_docker_urlencode(const char *s);

/* The engine's message from an error answer ({"message": ...}), or "". */
const char *pl_docker_message(const json_t *answer);

/*
 * Open the attach stream of a created container (stdin, stdout, stderr,
 * stream=1).  Returns a connected socket whose bytes, after the HTTP
 * answer this function consumed, are the raw stream.
 */
int pl_docker_attach(struct pl_docker_engine *e, const char *container_id, int *ret_fd,
                     struct pl_error *err);

/* POST path (under PL_DOCKER_API) with an optional JSON body and take over
 * the connection as a raw stream (attach, exec start).  *ret_fd is the
 * stream, positioned at its first byte. */
int pl_docker_hijack(struct pl_docker_engine *e, const char *path, const char *json_body,
                     int *ret_fd, struct pl_error *err);

/*
 * The demultiplexer of the engine's stdout/stderr stream (Tty=false): each
 * frame is an 8-byte header (stream 1 or 2, three zero bytes, a big-endian
 * 32-bit length) and the payload.  Feed bytes as they arrive; payload bytes
 * are appended to out/err up to each cap, the rest counted and dropped.
 */
#define PL_DEMUX_MARK_MAX 64

/* One stream's search for the run's end marker (pl_demux_expect_end). */
struct pl_demux_mark {
    unsigned char pend[PL_DEMUX_MARK_MAX + 4]; /* bytes that may begin the marker, held back */
    size_t pend_len;
    bool done;  /* the whole marker came */
    bool after; /* bytes came after it (kept as output) */
    bool bad;   /* its fixed part came, then no status: the marker is not trusted */
    int status; /* what it reported, 0-255 */
};

struct pl_demux {
    unsigned char hdr[8];
    size_t hdr_len;
    uint32_t remaining;         /* payload bytes left in the current frame */
    int stream;                 /* of the current frame */
    bool broken;                /* a frame header was invalid */
    struct pl_capture out, err; /* caps set by the caller; totals count what the guest wrote */
    char mark[PL_DEMUX_MARK_MAX];
    size_t mark_len;           /* 0: no end marker is looked for */
    struct pl_demux_mark m[2]; /* stdout's, stderr's */
};

/* Returns < 0 once the stream is broken (an invalid header). */
int pl_demux_feed(struct pl_demux *d, const unsigned char *data, size_t len);
void pl_demux_free(struct pl_demux *d);

/*
 * Look for a run's end marker (docs/providers/docker.md, "The run's end"):
 * the bytes mark (1 to PL_DEMUX_MARK_MAX, a secret nonce among them), then
 * three decimal digits and a newline, as the last bytes of stdout and of
 * stderr.  The marker is taken out of the output; bytes that might begin
 * it are held back until they cannot (pl_demux_flush releases them).
 */
void pl_demux_expect_end(struct pl_demux *d, const char *mark, size_t len);

/* Whether both streams ended with the marker, nothing after it, and the same
 * status (into *status). */
bool pl_demux_ended(const struct pl_demux *d, int *status);

/* The stream ended without the marker: what was held back is output. */
int pl_demux_flush(struct pl_demux *d);

/* Take over from's place in the stream's framing (the frame being read),
 * for a demultiplexer that goes on reading the same stream into captures
 * of its own (a project's next step). */
void pl_demux_carry(struct pl_demux *to, const struct pl_demux *from);
