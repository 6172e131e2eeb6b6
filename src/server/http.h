/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.h: the HTTP server in front of the API layer: the front door
 * (front.c: the listening socket, the caps, TLS, HTTP/2 or HTTP/1.1 by the
 * first bytes) and HTTP/1.1 on libmicrohttpd (http1.c); HTTP/2 is h2.c.
 *
 * One thread per connection: a run blocks its connection's thread for its
 * whole duration, and PLIMSOLL_MAX_CONNECTIONS bounds the threads, at most
 * PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS of them from one TCP address.
 *
 * The server moves bytes and keeps time.  When a request's head is in, it
 * hands the head to pl_api_begin, which answers every call it can refuse
 * (unknown path, method, content type, key, a body too large or over the
 * bytes in flight) before a body byte is read; otherwise it reads the body
 * up to PLIMSOLL_MAX_REQUEST_BYTES and hands it to pl_api_finish.
 *
 * Reading a request, head and body, has an absolute deadline,
 * PLIMSOLL_REQUEST_READ_TIMEOUT_MS, counted from the connection's start or
 * from the previous answer on a kept-alive connection; a connection still
 * reading past it is shut down.  Once the request is read nothing cuts it:
 * a run takes its own time.
 */
#pragma once

#include "api.h"

struct pl_http;

/* Bind PLIMSOLL_LISTEN and start serving.  err says what failed. */
int pl_http_start(struct pl_api *api, struct pl_http **ret_http, struct pl_error *err);

/* SIGHUP: read the TLS certificate, key and client certificates again
 * (tls.h); the old ones stay in use when it fails.  0 without TLS. */
int pl_http_reload(struct pl_http *http, struct pl_error *err);

/* The bound address as text ("127.0.0.1:7475", "unix:/run/p.sock"). */
const char *pl_http_address(const struct pl_http *http);

/* Stop accepting new connections; open ones keep being served. */
void pl_http_quiesce(struct pl_http *http);

/*
 * Wait until every request already read has had its answer sent, or
 * timeout_ms passes.  Returns the number still in progress.
 */
unsigned pl_http_wait_idle(struct pl_http *http, unsigned timeout_ms);

/* Close everything and free. */
void pl_http_stop(struct pl_http *http);
