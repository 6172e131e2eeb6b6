/* SPDX-License-Identifier: Apache-2.0 */
/*
 * h2.h: HTTP/2 (h2c with prior knowledge) in front of the API, with
 * Debian's libnghttp2.  gRPC needs it; Connect and gRPC-Web calls work
 * over it too.  front.c accepts every connection and hands one that opens
 * with HTTP/2's preface here; libmicrohttpd keeps HTTP/1.1.
 *
 * One thread per connection runs its nghttp2 session; each request whose
 * body is read runs in a thread of its own (a run blocks for its whole
 * duration), at most PL_H2_MAX_STREAMS of them per connection.  The rules
 * of HTTP/1.1's front hold per stream: the head decides first
 * (pl_api_begin), the body is bounded by PLIMSOLL_MAX_REQUEST_BYTES, and
 * reading a request has the absolute deadline
 * PLIMSOLL_REQUEST_READ_TIMEOUT_MS (past it the stream is reset).
 */
#pragma once

#include <openssl/ssl.h>
#include <stdatomic.h>

#include "api.h"
#include "tls.h"

#define PL_H2_MAX_STREAMS 100
/* A request's header block, name and value bytes together. */
#define PL_H2_MAX_HEADER_BYTES 32768

struct pl_h2;

/* in_progress counts requests read and not yet answered (http_int.h's); tls
 * answers each request's client certificate (NULL: plain HTTP only). */
struct pl_h2 *pl_h2_new(struct pl_api *api, atomic_uint *in_progress, struct pl_tls *tls);

/* Serve one connection in the calling thread until it ends; closes fd
 * and frees ssl (TLS, ALPN h2; NULL for h2c).  fingerprint: the client
 * certificate's (tls.h), or "" or NULL; copied. */
void pl_h2_serve(struct pl_h2 *h2, int fd, SSL *ssl, const char *fingerprint);

/* The open connections (for the connection caps). */
unsigned pl_h2_connections(struct pl_h2 *h2);

/* Shut every connection down and wait for their threads; then free. */
void pl_h2_stop(struct pl_h2 *h2);
