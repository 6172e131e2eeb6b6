/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc.c: one gRPC call over HTTP/2 on libcurl (grpc.h).
 */
#include "grpc.h"

#include <curl/curl.h>
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../core/buf.h"
#include "../../core/cleanup.h"
#include "../../core/clock.h"
#include "hosted.h"

static const char *const code_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *ph_grpc_code_name(int code) {
    static _Thread_local char other[24];
    if (code >= 0 && (size_t)code < sizeof(code_names) / sizeof(code_names[0]))
        return code_names[code];
    snprintf(other, sizeof(other), "code %d", code);
    return other;
}

struct call {
    CURL *h;
    struct ph_grpc_call *c;
    struct ph_envelopes env;
    long http_status;
    bool grpc_type;
    bool broken; /* the answer broke the rules; why says how */
    char why[160];
    struct pl_error msg_err; /* on_message's refusal */
    bool msg_failed;
};

static int hexval(int ch) {
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* grpc-message is percent-encoded UTF-8: decode it, drop control bytes. */
static void decode_message(char *dst, size_t size, const char *v, size_t vl) {
    size_t o = 0;
    for (size_t i = 0; i < vl && o + 1 < size; i++) {
        int ch = (unsigned char)v[i];
        if (ch == '%' && i + 2 < vl && hexval(v[i + 1]) >= 0 && hexval(v[i + 2]) >= 0) {
            ch = hexval(v[i + 1]) << 4 | hexval(v[i + 2]);
            i += 2;
        }
        if (ch < 0x20 || ch == 0x7f)
            continue;
        dst[o++] = (char)ch;
    }
    dst[o] = '\0';
}

void ph_grpc_header_line(struct ph_grpc_call *c, const char *line, size_t len, long *http_status,
                         bool *ret_grpc_type) {
    while (len && (line[len - 1] == '\r' || line[len - 1] == '\n'))
        len--;
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        /* a status line: "HTTP/2 200" */
        const char *sp = memchr(line, ' ', len), *end = line + len;
        long st = 0;
        int n = 0;
        for (const char *p = sp ? sp + 1 : end; p < end && *p >= '0' && *p <= '9' && n < 4;
             p++, n++)
            st = st * 10 + (*p - '0');
        *http_status = n == 3 ? st : 0; /* exactly three digits, or no status */
        return;
    }
    const char *colon = memchr(line, ':', len);
    if (!colon)
        return;
    size_t nl = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vl = len - nl - 1;
    while (vl && (*v == ' ' || *v == '\t'))
        v++, vl--;
    while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        vl--;
    if (nl == 11 && strncasecmp(line, "grpc-status", nl) == 0) {
        int st = 0;
        size_t i = 0;
        for (; i < vl && v[i] >= '0' && v[i] <= '9' && st < 1000; i++)
            st = st * 10 + (v[i] - '0');
        c->status = (i == vl && vl > 0 && st < 1000) ? st : PH_GRPC_UNKNOWN;
    } else if (nl == 12 && strncasecmp(line, "grpc-message", nl) == 0) {
        decode_message(c->message, sizeof(c->message), v, vl);
    } else if (nl == 12 && strncasecmp(line, "content-type", nl) == 0) {
        /* application/grpc, optionally +proto or ;params */
        *ret_grpc_type = vl >= 16 && strncasecmp(v, "application/grpc", 16) == 0 &&
                         (vl == 16 || v[16] == '+' || v[16] == ';');
    }
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    struct call *k = ud;
    ph_grpc_header_line(k->c, p, size * n, &k->http_status, &k->grpc_type);
    return size * n;
}

static int on_envelope(void *ud, unsigned flags, const unsigned char *msg, size_t len) {
    struct call *k = ud;
    if (flags & PH_FLAG_COMPRESSED) {
        k->broken = true;
        snprintf(k->why, sizeof(k->why), "a compressed message (none was offered)");
        return -1;
    }
    int rc = k->c->on_message ? k->c->on_message(k->c->ud, msg, len, &k->msg_err) : 0;
    if (rc < 0) {
        k->msg_failed = true;
        return -1;
    }
    if (rc > 0) {
        k->c->stopped = true;
        return -1;
    }
    return 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    struct call *k = ud;
    size_t len = size * n;
    if (k->http_status != 200 || !k->grpc_type) {
        /* not a gRPC answer: its body is not ours to read */
        return len;
    }
    if (ph_envelopes_feed(&k->env, (const unsigned char *)p, len) < 0) {
        if (!k->broken && !k->msg_failed && !k->c->stopped) {
            k->broken = true;
            snprintf(k->why, sizeof(k->why), "a message larger than %zu bytes", k->c->max_message);
        }
        return 0;
    }
    return len;
}

/* gRPC's mapping of an HTTP status with no grpc-status. */
static int http_to_grpc(long st) {
    switch (st) {
    case 400: return PH_GRPC_INTERNAL;
    case 401: return PH_GRPC_UNAUTHENTICATED;
    case 403: return PH_GRPC_PERMISSION_DENIED;
    case 404: return PH_GRPC_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504: return PH_GRPC_UNAVAILABLE;
    default: return PH_GRPC_UNKNOWN;
    }
}

/* The request's headers (the bearer's line among them) and the handle's
 * options but the body's. */
static int add_header(struct curl_slist **l, const char *line) {
    struct curl_slist *n = curl_slist_append(*l, line);
    if (!n)
        return -1;
    *l = n;
    return 0;
}

static int setup(CURL *h, const struct ph_grpc_target *t, const struct ph_grpc_call *c,
                 struct curl_slist **hdrs, struct pl_error *err) {
    char url[1024], line[4200];
    uint64_t timeout = c->timeout_ms ? c->timeout_ms : 30000;
    if ((size_t)snprintf(url, sizeof(url), "%s%s", t->url, c->method) >= sizeof(url))
        return pl_error_set(err, PL_REASON_INTERNAL, "%s: the URL is too long", c->method);
    const char *fixed[] = {"Content-Type: application/grpc", "TE: trailers",
                           "Expect:", "User-Agent: plimsoll-grpc", "Accept:"};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (add_header(hdrs, fixed[i]) < 0)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    /* grpc-timeout: at most 8 digits, in milliseconds */
    snprintf(line, sizeof(line), "grpc-timeout: %llum",
             (unsigned long long)(timeout > 99999999 ? 99999999 : timeout));
    if (add_header(hdrs, line) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    if (t->bearer && t->bearer[0]) {
        if ((size_t)snprintf(line, sizeof(line), "Authorization: Bearer %s", t->bearer) >=
            sizeof(line))
            return pl_error_set(err, PL_REASON_INTERNAL, "%s: the bearer token is too long",
                                c->method);
        int added = add_header(hdrs, line);
        explicit_bzero(line, sizeof(line));
        if (added < 0)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (t->ca_file && t->ca_file[0])
        curl_easy_setopt(h, CURLOPT_CAINFO, t->ca_file);
    if (t->cert_file && t->cert_file[0]) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, t->cert_file);
        curl_easy_setopt(h, CURLOPT_SSLKEY, t->key_file);
    }
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout < 10000 ? timeout : 10000));
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    return 0;
}

/* What the call came to, once libcurl is done with it. */
static int judge(struct call *k, CURLcode cc, const struct ph_grpc_target *t, bool check_version,
                 struct pl_error *err) {
    struct ph_grpc_call *c = k->c;
    if (c->stopped)
        return 0;
    if (k->msg_failed) {
        *err = k->msg_err;
        return -1;
    }
    if (k->broken)
        return pl_error_set(err, PL_REASON_INTERNAL, "%s: the answer broke gRPC's rules: %s",
                            c->method, k->why);
    if (cc != CURLE_OK)
        return pl_error_errno(err, PL_REASON_INTERNAL,
                              cc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : ECONNREFUSED,
                              "%s %s: %s", c->method, t->url, curl_easy_strerror(cc));
    long version = CURL_HTTP_VERSION_2_0;
    if (check_version)
        curl_easy_getinfo(k->h, CURLINFO_HTTP_VERSION, &version);
    if (version != CURL_HTTP_VERSION_2_0)
        return pl_error_set(err, PL_REASON_INTERNAL, "%s: the answer is not HTTP/2", c->method);
    if (k->http_status != 200) {
        if (c->status < 0)
            c->status = http_to_grpc(k->http_status);
        if (!c->message[0])
            snprintf(c->message, sizeof(c->message), "HTTP status %ld", k->http_status);
        return 0;
    }
    if (!k->grpc_type)
        return pl_error_set(err, PL_REASON_INTERNAL, "%s: the answer is not application/grpc",
                            c->method);
    if (c->status < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "%s: the answer ended without a grpc-status",
                            c->method);
    if (c->status == PH_GRPC_OK && !ph_envelopes_idle(&k->env))
        return pl_error_set(err, PL_REASON_INTERNAL, "%s: the answer ended inside a message",
                            c->method);
    return 0;
}

static void start_call(struct call *k, struct ph_grpc_call *c) {
    memset(k, 0, sizeof(*k));
    k->c = c;
    c->status = -1;
    c->message[0] = '\0';
    c->stopped = false;
    ph_envelopes_init(&k->env, c->max_message ? c->max_message : (4u << 20), on_envelope, k);
}

/* The call's handle and decoder, released (start_call made them). */
static void call_clear(struct call *k) {
    if (k->h)
        curl_easy_cleanup(k->h);
    ph_envelopes_free(&k->env);
}

/* The request's headers, wiped (the bearer's line among them) and freed. */
static void headers_wipep(struct curl_slist **hdrs) {
    for (struct curl_slist *l = *hdrs; l; l = l->next)
        explicit_bzero(l->data, strlen(l->data));
    curl_slist_free_all(*hdrs);
}

int ph_grpc(const struct ph_grpc_target *t, struct ph_grpc_call *c, struct pl_error *err) {
    /* The handle, released first, reads the body and the headers. */
    PL_CLEANUP(pl_buf_free) struct pl_buf body = {0};
    PL_CLEANUP(headers_wipep) struct curl_slist *hdrs = NULL;
    PL_CLEANUP(call_clear) struct call k;
    start_call(&k, c);
    if (!(k.h = curl_easy_init()) || ph_envelope_append(&body, 0, c->msg, c->len) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    if (setup(k.h, t, c, &hdrs, err) < 0)
        return -1;
    curl_easy_setopt(k.h, CURLOPT_POSTFIELDS, body.data);
    curl_easy_setopt(k.h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body.len);
    curl_easy_setopt(k.h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(k.h, CURLOPT_WRITEDATA, &k);
    curl_easy_setopt(k.h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(k.h, CURLOPT_HEADERDATA, &k);
    return judge(&k, curl_easy_perform(k.h), t, true, err);
}

/* ------------------------------------------------------------ duplex */

/*
 * libcurl 7.88 (Debian 12) loses an HTTP/2 answer that arrives while a
 * paused upload waits (measured: docs/internals/hosted.md, "gRPC"), so the
 * bidirectional call speaks HTTP/2 itself with nghttp2 over a connection
 * libcurl makes (CONNECT_ONLY: the same TLS, CA, client certificate and
 * ALPN as every other call).
 */
struct duplex {
    struct call k;
    struct ph_grpc_duplex *d;
    nghttp2_session *session;
    SSL_CTX *ctx; /* https: TLS here, with ALPN h2 (libcurl gives the TCP) */
    SSL *ssl;
    curl_socket_t sock;
    int32_t stream;
    bool closed;   /* the stream ended */
    uint32_t rst;  /* its RST_STREAM code, when reset */
    bool io_error; /* the connection failed */
    bool eof;
};

/* One write and one read on the connection: bytes, -EAGAIN, or another
 * negative value when it failed (-EPIPE: it ended). */
static ssize_t io_write(struct duplex *x, const void *data, size_t len) {
    if (x->ssl) {
        ERR_clear_error();
        int n = SSL_write(x->ssl, data, (int)(len > INT32_MAX ? INT32_MAX : len));
        if (n > 0)
            return n;
        int e = SSL_get_error(x->ssl, n);
        return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? -EAGAIN : -EIO;
    }
    size_t sent = 0;
    CURLcode cc = curl_easy_send(x->k.h, data, len, &sent);
    return cc == CURLE_AGAIN ? -EAGAIN : cc != CURLE_OK ? -EIO : (ssize_t)sent;
}

static ssize_t io_read(struct duplex *x, void *buf, size_t len) {
    if (x->ssl) {
        ERR_clear_error();
        int n = SSL_read(x->ssl, buf, (int)(len > INT32_MAX ? INT32_MAX : len));
        if (n > 0)
            return n;
        int e = SSL_get_error(x->ssl, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return -EAGAIN;
        return e == SSL_ERROR_ZERO_RETURN ? -EPIPE : -EIO;
    }
    size_t got = 0;
    CURLcode cc = curl_easy_recv(x->k.h, buf, len, &got);
    if (cc == CURLE_AGAIN)
        return -EAGAIN;
    return cc != CURLE_OK ? -EIO : got == 0 ? -EPIPE : (ssize_t)got;
}

static ssize_t on_send(nghttp2_session *session, const uint8_t *data, size_t len, int flags,
                       void *ud) {
    struct duplex *x = ud;
    (void)session, (void)flags;
    ssize_t n = io_write(x, data, len);
    if (n == -EAGAIN)
        return NGHTTP2_ERR_WOULDBLOCK;
    if (n < 0) {
        x->io_error = true;
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return n;
}

static int on_header2(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                      size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                      void *ud) {
    struct duplex *x = ud;
    (void)session, (void)flags;
    if (frame->hd.stream_id != x->stream)
        return 0;
    char line[1200];
    int n;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0)
        n = snprintf(line, sizeof(line), "HTTP/2 %.*s", (int)(valuelen < 8 ? valuelen : 8),
                     (const char *)value);
    else
        n = snprintf(line, sizeof(line), "%.*s: %.*s", (int)(namelen < 64 ? namelen : 64),
                     (const char *)name, (int)(valuelen < 1024 ? valuelen : 1024),
                     (const char *)value);
    if (n > 0)
        ph_grpc_header_line(x->k.c, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1,
                            &x->k.http_status, &x->k.grpc_type);
    return 0;
}

static int on_chunk(nghttp2_session *session, uint8_t flags, int32_t stream, const uint8_t *data,
                    size_t len, void *ud) {
    struct duplex *x = ud;
    (void)flags;
    if (stream != x->stream)
        return 0;
    if (on_body((char *)data, 1, len, &x->k) != len) /* broken or stopped: the call ends */
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream, NGHTTP2_CANCEL);
    return 0;
}

static int on_close(nghttp2_session *session, int32_t stream, uint32_t code, void *ud) {
    struct duplex *x = ud;
    (void)session;
    if (stream == x->stream) {
        x->closed = true;
        x->rst = code;
    }
    return 0;
}

/* The upload: queued envelopes; none queued, it waits (DEFERRED) until
 * on_turn queues one or half-closes. */
static ssize_t on_read2(nghttp2_session *session, int32_t stream, uint8_t *buf, size_t len,
                        uint32_t *flags, nghttp2_data_source *src, void *ud) {
    struct duplex *x = ud;
    struct ph_grpc_duplex *d = x->d;
    (void)session, (void)stream, (void)src;
    size_t avail = d->out.len - d->out_off;
    if (!avail) {
        if (d->half_closed) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            return 0;
        }
        return NGHTTP2_ERR_DEFERRED;
    }
    size_t m = avail < len ? avail : len;
    memcpy(buf, d->out.data + d->out_off, m);
    d->out_off += m;
    if (d->out_off == d->out.len)
        d->out.len = d->out_off = 0;
    return (ssize_t)m;
}

void ph_grpc_duplex_init(struct ph_grpc_duplex *d) {
    memset(d, 0, sizeof(*d));
    d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

void ph_grpc_duplex_free(struct ph_grpc_duplex *d) {
    pl_buf_free(&d->out);
    if (d->wake_fd >= 0)
        close(d->wake_fd);
    d->wake_fd = -1;
}

int ph_grpc_duplex_send(struct ph_grpc_duplex *d, const void *msg, size_t len) {
    if (d->half_closed)
        return -1;
    return ph_envelope_append(&d->out, 0, msg, len);
}

void ph_grpc_duplex_close(struct ph_grpc_duplex *d) {
    d->half_closed = true;
}

size_t ph_grpc_duplex_pending(const struct ph_grpc_duplex *d) {
    return d->out.len - d->out_off;
}

void ph_grpc_duplex_wake(struct ph_grpc_duplex *d) {
    uint64_t one = 1;
    if (d->wake_fd >= 0)
        (void)!write(d->wake_fd, &one, sizeof(one));
}

/* Bytes from the connection into the session, until none is waiting. */
static void duplex_recv(struct duplex *x) {
    uint8_t buf[16384];
    for (;;) {
        ssize_t got = io_read(x, buf, sizeof(buf));
        if (got == -EAGAIN)
            return;
        if (got < 0) {
            *(got == -EPIPE ? &x->eof : &x->io_error) = true;
            return;
        }
        if (nghttp2_session_mem_recv(x->session, buf, (size_t)got) < 0) {
            x->io_error = true;
            return;
        }
    }
}

/* TLS 1.2 or later over libcurl's TCP connection: the gateway's
 * certificate verified (the CA file, or the system's) for the URL's host,
 * an optional client certificate, and ALPN h2, which the gateway must
 * select. */
static int duplex_tls(const struct ph_grpc_target *t, struct duplex *x, const char *host,
                      uint64_t deadline, struct pl_error *err) {
    const char *method = x->k.c->method;
    static const unsigned char alpn[] = {2, 'h', '2'};
    if (!(x->ctx = SSL_CTX_new(TLS_client_method())))
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    SSL_CTX_set_min_proto_version(x->ctx, TLS1_2_VERSION);
    /* nghttp2 offers what is left of a frame again, maybe from elsewhere */
    SSL_CTX_set_mode(x->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(x->ctx, SSL_VERIFY_PEER, NULL);
    int ca = t->ca_file && t->ca_file[0] ? SSL_CTX_load_verify_locations(x->ctx, t->ca_file, NULL)
                                         : SSL_CTX_set_default_verify_paths(x->ctx);
    if (ca != 1 || SSL_CTX_set_alpn_protos(x->ctx, alpn, sizeof(alpn)) != 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "%s: the CA file does not load", method);
    if (t->cert_file && t->cert_file[0] &&
        (SSL_CTX_use_certificate_chain_file(x->ctx, t->cert_file) != 1 ||
         SSL_CTX_use_PrivateKey_file(x->ctx, t->key_file, SSL_FILETYPE_PEM) != 1 ||
         SSL_CTX_check_private_key(x->ctx) != 1))
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "%s: the client certificate or its key does not load", method);
    if (!(x->ssl = SSL_new(x->ctx)) || SSL_set_fd(x->ssl, (int)x->sock) != 1)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(x->ssl), host) != 1) {
        /* a name, not an address */
        SSL_set_tlsext_host_name(x->ssl, host);
        if (SSL_set1_host(x->ssl, host) != 1)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    for (;;) {
        ERR_clear_error();
        int r = SSL_connect(x->ssl);
        if (r == 1)
            break;
        int e = SSL_get_error(x->ssl, r);
        uint64_t now = pl_now_ns();
        if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) || now >= deadline) {
            long v = SSL_get_verify_result(x->ssl);
            return pl_error_errno(err, PL_REASON_INTERNAL, now >= deadline ? ETIMEDOUT : EPROTO,
                                  "%s %s: TLS: %s", method, t->url,
                                  v != X509_V_OK ? X509_verify_cert_error_string(v)
                                                 : "the handshake failed");
        }
        struct pollfd p = {.fd = (int)x->sock,
                           .events = (short)(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)};
        (void)poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
    }
    const unsigned char *sel = NULL;
    unsigned sel_len = 0;
    SSL_get0_alpn_selected(x->ssl, &sel, &sel_len);
    if (sel_len != 2 || memcmp(sel, "h2", 2) != 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "%s %s: the server did not select h2 (ALPN)",
                            method, t->url);
    return 0;
}

/* The request's pseudo-headers and headers, as nghttp2 takes them. */
#define NV(n, v)                                                                                   \
    (nghttp2_nv) {                                                                                 \
        (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE                 \
    }

static int duplex_open(const struct ph_grpc_target *t, struct duplex *x, uint64_t deadline,
                       struct pl_error *err) {
    struct ph_grpc_call *c = x->k.c;
    uint64_t timeout = c->timeout_ms ? c->timeout_ms : 30000;
    bool tls = strncmp(t->url, "https://", 8) == 0;
    if (!tls && strncmp(t->url, "http://", 7) != 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "%s: not an http(s) URL", c->method);
    const char *auth = t->url + (tls ? 8 : 7);
    const char *slash = strchr(auth, '/');
    char authority[300], host[300], tcp[320];
    snprintf(authority, sizeof(authority), "%.*s",
             (int)(slash ? (size_t)(slash - auth) : strlen(auth)), auth);
    /* the host, without its port or an IPv6 literal's brackets */
    snprintf(host, sizeof(host), "%s", authority[0] == '[' ? authority + 1 : authority);
    char *end = authority[0] == '[' ? strchr(host, ']') : strrchr(host, ':');
    if (end)
        *end = '\0';
    /* libcurl makes the TCP connection only: its TLS would start its own
     * HTTP/2 on the connection */
    snprintf(tcp, sizeof(tcp), "http://%s/", authority);
    curl_easy_setopt(x->k.h, CURLOPT_URL, tcp);
    curl_easy_setopt(x->k.h, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(x->k.h, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(x->k.h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->k.h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout < 10000 ? timeout : 10000));
    CURLcode cc = curl_easy_perform(x->k.h);
    if (cc != CURLE_OK)
        return pl_error_errno(err, PL_REASON_INTERNAL,
                              cc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : ECONNREFUSED,
                              "%s %s: %s", c->method, t->url, curl_easy_strerror(cc));
    curl_easy_getinfo(x->k.h, CURLINFO_ACTIVESOCKET, &x->sock);
    if (tls && duplex_tls(t, x, host, deadline, err) < 0)
        return -1;
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header2);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    int rc = nghttp2_session_client_new(&x->session, cb, x);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    nghttp2_settings_entry set[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                    {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 65536}};
    nghttp2_submit_settings(x->session, NGHTTP2_FLAG_NONE, set, 2);
    char path[512], tmo[32], bearer[4200];
    snprintf(path, sizeof(path), "%s%s", slash ? slash : "", c->method);
    snprintf(tmo, sizeof(tmo), "%llum",
             (unsigned long long)(timeout > 99999999 ? 99999999 : timeout));
    nghttp2_nv hdrs[9] = {NV(":method", "POST"),
                          NV(":scheme", tls ? "https" : "http"),
                          NV(":authority", authority),
                          NV(":path", path),
                          NV("content-type", "application/grpc"),
                          NV("te", "trailers"),
                          NV("user-agent", "plimsoll-grpc"),
                          NV("grpc-timeout", tmo)};
    size_t nh = 8;
    if (t->bearer && t->bearer[0]) {
        if ((size_t)snprintf(bearer, sizeof(bearer), "Bearer %s", t->bearer) >= sizeof(bearer))
            return pl_error_set(err, PL_REASON_INTERNAL, "%s: the bearer token is too long",
                                c->method);
        hdrs[nh++] = (nghttp2_nv){(uint8_t *)"authorization", (uint8_t *)bearer, 13, strlen(bearer),
                                  NGHTTP2_NV_FLAG_NO_INDEX};
    }
    nghttp2_data_provider body = {.read_callback = on_read2};
    x->stream = nghttp2_submit_request(x->session, NULL, hdrs, nh, &body, x);
    explicit_bzero(bearer, sizeof(bearer));
    if (x->stream < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "%s: %s", c->method,
                            nghttp2_strerror(x->stream));
    return 0;
}

/* The session, the TLS and the call, released in that order. */
static void duplex_clear(struct duplex *x) {
    if (x->session)
        nghttp2_session_del(x->session);
    if (x->ssl)
        SSL_free(x->ssl); /* no close_notify: the stream's end said it all */
    SSL_CTX_free(x->ctx);
    call_clear(&x->k);
}

int ph_grpc_duplex(const struct ph_grpc_target *t, struct ph_grpc_duplex *d, struct pl_error *err) {
    struct ph_grpc_call *c = &d->call;
    PL_CLEANUP(duplex_clear) struct duplex x = {.d = d, .sock = CURL_SOCKET_BAD};
    start_call(&x.k, c);
    d->out.len = d->out_off = 0;
    d->half_closed = false;
    uint64_t deadline = pl_deadline_in_ms(c->timeout_ms ? c->timeout_ms : 30000);
    bool cancelled = false, timed_out = false;
    if (!(x.k.h = curl_easy_init()) || ph_envelope_append(&d->out, 0, c->msg, c->len) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    if (duplex_open(t, &x, deadline, err) < 0)
        return -1;
    curl_socket_t sock = x.sock;
    while (!x.closed && !x.io_error && !x.eof) {
        if (nghttp2_session_send(x.session) != 0) {
            x.io_error = true;
            break;
        }
        if (x.closed)
            break;
        uint64_t now = pl_now_ns();
        if (now >= deadline) {
            timed_out = true;
            break;
        }
        uint64_t left = (deadline - now) / 1000000 + 1;
        unsigned turn = d->turn_ms ? d->turn_ms : 100;
        struct pollfd p[2] = {
            {.fd = sock,
             .events = (short)(POLLIN | (nghttp2_session_want_write(x.session) ? POLLOUT : 0))},
            {.fd = d->wake_fd, .events = POLLIN}};
        /* TLS may hold bytes already read: look before waiting */
        duplex_recv(&x);
        if (x.closed || x.io_error || x.eof)
            break;
        int n = poll(p, d->wake_fd >= 0 ? 2 : 1, (int)(left < turn ? left : turn));
        if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            duplex_recv(&x);
        if (n > 0 && d->wake_fd >= 0 && (p[1].revents & POLLIN)) {
            uint64_t v;
            (void)!read(d->wake_fd, &v, sizeof(v));
        }
        if (x.closed || c->stopped || x.k.broken || x.k.msg_failed)
            break;
        /* the caller's turn */
        if (d->on_turn(c->ud, d) < 0) {
            cancelled = true;
            break;
        }
        if (ph_grpc_duplex_pending(d) || d->half_closed)
            nghttp2_session_resume_data(x.session, x.stream);
    }
    if (!x.closed && x.session) {
        /* ended here: the gateway is told, best effort */
        nghttp2_submit_rst_stream(x.session, NGHTTP2_FLAG_NONE, x.stream, NGHTTP2_CANCEL);
        (void)nghttp2_session_send(x.session);
    }
    if (cancelled) {
        c->stopped = true; /* the caller ended it: no status */
        return 0;
    }
    CURLcode cc = CURLE_OK;
    if (timed_out)
        cc = CURLE_OPERATION_TIMEDOUT;
    else if (!c->stopped && !x.k.broken && !x.k.msg_failed &&
             (x.io_error || x.eof || (x.rst != NGHTTP2_NO_ERROR && c->status < 0)))
        cc = CURLE_RECV_ERROR;
    return judge(&x.k, cc, t, false, err);
}
