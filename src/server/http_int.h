/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_int.h: what the two halves of the HTTP server share, and nothing
 * outside them includes.
 *
 *   front.c   the front door: the listening socket, the acceptor, the caps
 *             on connections (all, per address), the first bytes read to
 *             tell HTTP/2, TLS and HTTP/1.1 apart, TLS, the hand-off to
 *             h2.c or http1.c; the server's start and stop (http.h)
 *   http1.c   HTTP/1.1 on libmicrohttpd: each connection's read and send
 *             deadlines (the watchdog), requests, streaming answers
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "api.h"
#include "http.h"

/*
 * MHD's own timeout is idle-based: a byte every so often keeps a
 * connection forever.  This is for a connection that sent nothing at all,
 * and for an answer the client reads slowly (the TLS pump's writes to MHD
 * too); the absolute deadline on reading a request is
 * PLIMSOLL_REQUEST_READ_TIMEOUT_MS (the watchdog).
 */
#define CONNECTION_IDLE_TIMEOUT_S 120

struct MHD_Daemon;
struct conn;
struct peer;

struct pl_http {
    struct pl_api *api;
    atomic_uint in_progress; /* requests read but whose answer is not yet sent */
    char address[160];
    char unix_path[108];
    pthread_mutex_t lock; /* conns and every conn's fields, stopping, sniffing, peers */

    /* HTTP/1.1 (http1.c): MHD, every open connection, and the watchdog
     * that cuts the ones still reading past the read deadline. */
    struct MHD_Daemon *daemon;
    pthread_cond_t wake;
    struct conn *conns;
    bool stopping;
    bool watchdog_started;
    pthread_t watchdog;

    /* The front (front.c): every connection is accepted here, and the ones
     * that open with HTTP/2's preface go to h2.c; the others to MHD. */
    int listen_fd;
    pthread_cond_t sniffed; /* a sniffing connection was handed on */
    struct pl_h2 *h2;
    struct pl_tls *tls; /* NULL: plain HTTP */
    int stop_fd[2];     /* the acceptor's wake-up at quiesce */
    bool acceptor_started;
    pthread_t acceptor;
    unsigned sniffing;  /* connections whose first bytes are awaited (lock) */
    struct peer *peers; /* per-address counts of sniffing and HTTP/2 (lock) */
};

/* PLIMSOLL_ANSWER_SEND_TIMEOUT_MS in nanoseconds: the bound on sending
 * one answer, or one piece of a TLS connection's answer. */
static inline uint64_t pl_http_send_ns(const struct pl_http *h) {
    return (uint64_t)h->api->config->answer_send_timeout_ms * 1000000ull;
}

/* front.c: give back one count of the TCP address ss (port ignored) that
 * the acceptor charged when it took the connection; takes h->lock.  A
 * Unix-socket address has no count and is ignored. */
void pl_front_peer_release(struct pl_http *h, const struct sockaddr_storage *ss);

/* http1.c: start the watchdog and MHD (no listening socket of its own;
 * the front hands it connections), with PLIMSOLL_MAX_CONNECTIONS and the
 * per-address cap as MHD's own limits.  err says what failed; what
 * started is stopped by pl_http1_stop. */
int pl_http1_start(struct pl_http *h, struct pl_error *err);

/* http1.c: stop the watchdog, then MHD (which ends its connections).
 * Safe on what pl_http1_start left half started. */
void pl_http1_stop(struct pl_http *h);

/* http1.c: serve fd, an accepted connection already counted against its
 * address, as HTTP/1.1.  fingerprint is its TLS client certificate's
 * (tls.h), NULL or "" for none.  fd is MHD's in every case: closed by it,
 * and the address's count given back when the connection ends (or now,
 * when MHD refuses it at a cap). */
void pl_http1_add(struct pl_http *h, int fd, const struct sockaddr_storage *addr, socklen_t addrlen,
                  const char *fingerprint);

/* http1.c: the connections MHD holds now. */
unsigned pl_http1_connections(struct pl_http *h);
