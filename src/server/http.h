/*
 * http.h: the HTTP/1.1 server (libmicrohttpd) in front of the API layer.
 *
 * One thread per connection: a run blocks its connection's thread for its
 * whole duration, and PLIMSOLL_MAX_CONNECTIONS bounds the threads.  The
 * server only moves bytes: it reads the body up to
 * PLIMSOLL_MAX_REQUEST_BYTES and hands the call to pl_api_handle.
 */
#pragma once

#include "api.h"

struct pl_http;

/* Bind PLIMSOLL_LISTEN and start serving.  err says what failed. */
int pl_http_start(struct pl_api *api, struct pl_http **ret_http, struct pl_error *err);

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
