/*
 * http.c: libmicrohttpd glue.  See http.h.
 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <time.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../core/buf.h"

#define CONNECTION_IDLE_TIMEOUT_S 120

struct pl_http {
    struct pl_api *api;
    atomic_uint in_progress; /* requests read but whose answer is not yet sent */
    struct MHD_Daemon *daemon;
    int listen_fd;
    char address[160];
    char unix_path[108];
};

struct call_ctx {
    struct pl_buf body;
    bool too_large;
};

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
    (void)c;
    (void)toe;
    struct pl_http *h = cls;
    struct call_ctx *ctx = *con_cls;
    if (ctx) {
        atomic_fetch_sub(&h->in_progress, 1);
        pl_buf_free(&ctx->body);
        free(ctx);
        *con_cls = NULL;
    }
}

static enum MHD_Result send_response(struct MHD_Connection *c, struct pl_api_response *rs,
                                     bool close_after) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(rs->body_len, rs->body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        pl_api_response_clear(rs);
        return MHD_NO;
    }
    rs->body = NULL; /* owned by MHD now */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, rs->content_type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (rs->allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, rs->allow);
    if (close_after)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)rs->status, r);
    MHD_destroy_response(r);
    return ret;
}

static void fill_request(struct MHD_Connection *c, const char *url, const char *method,
                         struct pl_api_request *rq) {
    rq->http_method = method;
    rq->path = url;
    rq->content_type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    rq->authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    (void)version;
    struct pl_http *h = cls;
    struct call_ctx *ctx = *con_cls;
    size_t limit = h->api->config->max_request_bytes;

    if (!ctx) {
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
            return MHD_NO;
        *con_cls = ctx;
        atomic_fetch_add(&h->in_progress, 1);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            errno = 0;
            char *end = NULL;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno == 0 && end != cl && n > limit) {
                /* Answer at once; the unread body closes the connection. */
                struct pl_api_request rq = {0};
                fill_request(c, url, method, &rq);
                rq.body = "";
                rq.body_too_large = true;
                struct pl_api_response rs;
                pl_api_handle(h->api, &rq, &rs);
                return send_response(c, &rs, true);
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!ctx->too_large) {
            if (ctx->body.len + *upload_data_size > limit) {
                ctx->too_large = true;
                pl_buf_free(&ctx->body);
            } else if (pl_buf_append(&ctx->body, upload_data, *upload_data_size) < 0) {
                return MHD_NO;
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    struct pl_api_request rq = {0};
    fill_request(c, url, method, &rq);
    rq.body = ctx->body.data ? ctx->body.data : "";
    rq.body_len = ctx->body.len;
    rq.body_too_large = ctx->too_large;
    struct pl_api_response rs;
    pl_api_handle(h->api, &rq, &rs);
    return send_response(c, &rs, false);
}

static int bind_tcp(const struct pl_listen *l, int *ret_fd, char *addr, size_t addrlen,
                    struct pl_error *err) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", l->port);
    int gai = getaddrinfo(l->host, port, &hints, &res);
    if (gai != 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "PLIMSOLL_LISTEN: cannot resolve %s: %s",
                            l->host, gai_strerror(gai));
    int fd = -1;
    int saved = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 256) == 0)
            break;
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "PLIMSOLL_LISTEN: cannot bind %s:%u: %s",
                            l->host, l->port, strerror(saved));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port_n = l->port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
            port_n = ntohs(in->sin_port);
            snprintf(addr, addrlen, "%s:%u", host, port_n);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
            port_n = ntohs(in6->sin6_port);
            snprintf(addr, addrlen, "[%s]:%u", host, port_n);
        }
    }
    *ret_fd = fd;
    return 0;
}

static int bind_unix(const struct pl_listen *l, int *ret_fd, struct pl_error *err) {
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, l->path, strlen(l->path) + 1);
    struct stat st;
    if (lstat(l->path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "PLIMSOLL_LISTEN: %s exists and is not a socket", l->path);
        unlink(l->path); /* a stale socket of an earlier run */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "socket: %s", strerror(errno));
    mode_t old = umask(0117); /* srw-rw---- */
    int r = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
    int saved = errno;
    umask(old);
    if (r < 0 || listen(fd, 256) < 0) {
        if (r == 0)
            saved = errno;
        close(fd);
        return pl_error_set(err, PL_REASON_INTERNAL, "PLIMSOLL_LISTEN: cannot bind %s: %s", l->path,
                            strerror(saved));
    }
    *ret_fd = fd;
    return 0;
}

int pl_http_start(struct pl_api *api, struct pl_http **ret_http, struct pl_error *err) {
    struct pl_http *h = calloc(1, sizeof(*h));
    if (!h)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    h->api = api;
    h->listen_fd = -1;
    const struct pl_listen *l = &api->config->listen;
    int r;
    if (l->kind == PL_LISTEN_UNIX) {
        r = bind_unix(l, &h->listen_fd, err);
        snprintf(h->address, sizeof(h->address), "unix:%s", l->path);
        memcpy(h->unix_path, l->path, strlen(l->path) + 1);
    } else {
        r = bind_tcp(l, &h->listen_fd, h->address, sizeof(h->address), err);
    }
    if (r < 0) {
        free(h);
        return -1;
    }
    h->daemon =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                             MHD_USE_POLL | MHD_USE_ERROR_LOG,
                         0, NULL, NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET, h->listen_fd,
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)api->config->max_connections,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_IDLE_TIMEOUT_S,
                         MHD_OPTION_NOTIFY_COMPLETED, completed, h, MHD_OPTION_END);
    if (!h->daemon) {
        close(h->listen_fd);
        free(h);
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "PLIMSOLL_LISTEN: the HTTP server did not "
                            "start");
    }
    *ret_http = h;
    return 0;
}

const char *pl_http_address(const struct pl_http *h) {
    return h->address;
}

void pl_http_quiesce(struct pl_http *h) {
    if (h && h->daemon) {
        MHD_socket fd = MHD_quiesce_daemon(h->daemon);
        if (fd != MHD_INVALID_SOCKET) {
            close(fd);
            h->listen_fd = -1;
        }
    }
}

unsigned pl_http_wait_idle(struct pl_http *h, unsigned timeout_ms) {
    struct timespec tick = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
    for (unsigned waited = 0;; waited += 10) {
        unsigned n = atomic_load(&h->in_progress);
        if (n == 0 || waited >= timeout_ms)
            return n;
        nanosleep(&tick, NULL);
    }
}

void pl_http_stop(struct pl_http *h) {
    if (!h)
        return;
    if (h->daemon)
        MHD_stop_daemon(h->daemon); /* closes a listen socket not yet quiesced */
    if (h->unix_path[0])
        unlink(h->unix_path);
    free(h);
}
