/* SPDX-License-Identifier: Apache-2.0 */
/*
 * broker_sock.h: the per-run Unix-socket server a sandbox with a grant talks
 * HTTP/1.1 to.
 *
 * The socket lives in a directory of its own that the provider bind-mounts
 * into the sandbox.  One server thread serves one connection at a time, so a
 * run's broker calls are serialized; each connection carries exactly one
 * request (the answer says "Connection: close").  The parsing is
 * broker_http.h's; deciding and forwarding the request is the handler's.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../core/errors.h"
#include "broker_http.h"

#define PL_BROKER_DEFAULT_IDLE_TIMEOUT_MS 5000u
#define PL_BROKER_MAX_IDLE_TIMEOUT_MS 600000u
#define PL_BROKER_DEFAULT_MAX_CONNECTIONS 256u

struct pl_broker_sock;

/*
 * Called once per valid request, on the server thread; fills *resp (which
 * arrives zeroed).  Whatever resp points to must stay valid until done() is
 * called with the same resp; the simplest scheme is that the handler
 * allocates body and headers and done() frees them.  A status the writer
 * refuses (outside 200..599) is answered 500.  The handler may block (it
 * forwards upstream with its own timeout); pl_broker_sock_stop waits for it.
 */
typedef void (*pl_broker_handler_fn)(void *userdata, const struct pl_http_request *req,
                                     struct pl_http_response *resp);
/* Called after the handler's response was written (or failed to be); may be NULL. */
typedef void (*pl_broker_done_fn)(void *userdata, struct pl_http_response *resp);

/*
 * Who may connect, decided before a byte is read.  The kernel enforces the
 * files' owners and modes; peer_ok sees each accepted connection's
 * SO_PEERCRED (the connecting process's host pid, uid, gid) and returns
 * true to serve it.  A refused peer's connection is closed unread and
 * counted (pl_broker_sock_refused).
 */
struct pl_broker_sock_access {
    bool set;       /* false: the directory 0755 and the socket 0666 (anyone) */
    uid_t sock_uid; /* the owner of the directory (mode 0100: traverse only) and of the
                       socket (0600): the only uid besides root that may connect */
    gid_t sock_gid; /* their group */
    bool (*peer_ok)(void *userdata, int fd, pid_t pid, uid_t uid, gid_t gid); /* may be NULL */
    void *peer_userdata;
};

struct pl_broker_sock_opts {
    const char *dir;       /* created (see access); must not exist yet; parent must exist */
    const char *sock_name; /* e.g. "broker.sock"; one path component */
    struct pl_broker_sock_access access;
    struct pl_http_limits
        limits;               /* 0 fields: defaults; above the PL_HTTP_CAP_* ceilings: refused */
    unsigned idle_timeout_ms; /* per connection: max wait for a complete request, and max
                                 time to write the answer; 0: 5000; at most 600000 */
    unsigned max_connections; /* per run, counts every accepted connection; 0: 256; past it,
                                 answer 429 without reading */
    pl_broker_handler_fn handler; /* required */
    pl_broker_done_fn done;       /* optional */
    void *userdata;
};

/*
 * Create opts->dir and the socket in it, and start the server thread (it
 * polls the listen fd and a stop eventfd, with every signal blocked).  Per
 * connection: read with the idle timeout, parse; a parse error is answered
 * with its status and a JSON body {"error":"bad_request",...,"message":"..."}
 * without calling the handler, an incomplete request at the timeout with 408,
 * else the handler is called and its response written (MSG_NOSIGNAL, bounded
 * by the idle timeout); then the connection is closed.  "Expect:
 * 100-continue" gets an interim 100 once the head is valid.  Every wait is
 * pl_fd_wait (fdio.h) with the stop eventfd as its stop descriptor.
 * Returns 0 with *ret set, or a negative errno with err (may be NULL)
 * holding INTERNAL, that errno and what failed ("broker socket: mkdir DIR:
 * File exists"); on failure nothing is left on disk.
 */
int pl_broker_sock_start(const struct pl_broker_sock_opts *opts, struct pl_broker_sock **ret,
                         struct pl_error *err);

/*
 * Stop the thread, close the fds, unlink the socket and remove the directory
 * (left in place, silently, if something else was put in it).  A thread
 * waiting on a client wakes within a few milliseconds; a handler call in
 * progress is waited for, so the handler's own timeout bounds this.  Must not
 * be called from the handler.  NULL-safe.
 */
void pl_broker_sock_stop(struct pl_broker_sock *s);

/* The socket's path ("<dir>/<sock_name>"). */
const char *pl_broker_sock_path(const struct pl_broker_sock *s);

/* Connections accepted so far (those answered 429 included). */
unsigned pl_broker_sock_connections(const struct pl_broker_sock *s);

/* Connections closed unread because access.peer_ok refused their peer. */
unsigned pl_broker_sock_refused(const struct pl_broker_sock *s);
