/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tls.c: the daemon's TLS (OpenSSL).  See tls.h.
 */
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/fileread.h"
#include "../core/keys.h"

/* One client certificate's principal. */
struct client_cert {
    struct client_cert *next;
    char fingerprint[65];
    char principal[];
};

/* A context and the client certificates it asks for; a reload makes a new
 * one and frees the one before at once: a connection keeps only its
 * certificate's fingerprint (each request asks pl_tls_principal of the
 * current one), and OpenSSL keeps an old context alive, counted, until
 * its last connection is freed. */
struct generation {
    SSL_CTX *ctx;
    struct client_cert *certs;
};

/* A principal's name, the same pointer for every generation that lists
 * it, so a caller's per-key budgets stay one across reloads.  Append-only:
 * names come from the operator's file alone. */
struct name {
    struct name *next;
    char s[];
};

struct pl_tls {
    char cert[4096], key[4096], clients[4096];
    pthread_mutex_t lock; /* current, names */
    struct generation *current;
    struct name *names;
};

static void generation_free(struct generation *g) {
    if (!g)
        return;
    SSL_CTX_free(g->ctx);
    while (g->certs) {
        struct client_cert *c = g->certs;
        g->certs = c->next;
        free(c);
    }
    free(g);
}

void pl_tls_fingerprint(X509 *cert, char hex[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    hex[0] = '\0';
    if (X509_digest(cert, EVP_sha256(), md, &n) != 1 || n != 32)
        return;
    for (unsigned i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static int ssl_error(struct pl_error *err, const char *what, const char *path) {
    char buf[256] = "";
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, buf, sizeof(buf));
    ERR_clear_error();
    return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: %s: %s", what, path,
                        buf[0] ? buf : "unreadable");
}

/* "PRINCIPAL HEX64" lines; '#' comments and blank lines skipped. */
static int load_clients(const char *path, struct client_cert **ret, struct pl_error *err) {
    char *text = NULL;
    size_t len = 0;
    int rc = pl_file_read(path, 1 << 20, &text, &len);
    if (rc < 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "PLIMSOLL_TLS_CLIENT_CERTS_FILE: %s %s",
                            path, pl_file_problem(rc));
    struct client_cert *list = NULL;
    unsigned lineno = 0;
    int r = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        char *p = line + strspn(line, " \t");
        if (!*p || *p == '#')
            continue;
        char name[129], fp[65], extra;
        if (sscanf(p, "%128s %64s %c", name, fp, &extra) != 2 || strlen(fp) != 64 ||
            strspn(fp, "0123456789abcdef") != 64 || !pl_principal_valid(name, strlen(name))) {
            r = pl_error_set(err, PL_REASON_INVALID_REQUEST,
                             "PLIMSOLL_TLS_CLIENT_CERTS_FILE: %s line %u: want \"PRINCIPAL "
                             "SHA256HEX\" (the certificate's DER, lower-case hex)",
                             path, lineno);
            break;
        }
        struct client_cert *c = calloc(1, sizeof(*c) + strlen(name) + 1);
        if (!c) {
            r = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
            break;
        }
        memcpy(c->fingerprint, fp, 65);
        memcpy(c->principal, name, strlen(name) + 1);
        c->next = list;
        list = c;
    }
    pl_file_free(text, len);
    if (r < 0) {
        while (list) {
            struct client_cert *c = list;
            list = c->next;
            free(c);
        }
        return -1;
    }
    *ret = list;
    return 0;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg) {
    (void)ssl;
    (void)arg;
    static const unsigned char ours[] = "\x02h2\x08http/1.1";
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, ours, sizeof(ours) - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK; /* no ALPN in common: HTTP/1.1 */
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* Any certificate is taken at the handshake; the fingerprint decides. */
static int accept_any(int ok, X509_STORE_CTX *x) {
    (void)ok;
    (void)x;
    return 1;
}

static int build(struct pl_tls *t, struct generation **ret, struct pl_error *err) {
    struct generation *g = calloc(1, sizeof(*g));
    if (!g)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    g->ctx = SSL_CTX_new(TLS_server_method());
    int r = 0;
    if (!g->ctx || SSL_CTX_set_min_proto_version(g->ctx, TLS1_2_VERSION) != 1)
        r = ssl_error(err, "TLS", "no context");
    else if (SSL_CTX_use_certificate_chain_file(g->ctx, t->cert) != 1)
        r = ssl_error(err, "PLIMSOLL_TLS_CERT_FILE", t->cert);
    else if (SSL_CTX_use_PrivateKey_file(g->ctx, t->key, SSL_FILETYPE_PEM) != 1)
        r = ssl_error(err, "PLIMSOLL_TLS_KEY_FILE (not a PEM key, or not the certificate's key)",
                      t->key);
    else if (SSL_CTX_check_private_key(g->ctx) != 1)
        r = ssl_error(err, "PLIMSOLL_TLS_KEY_FILE: not the certificate's key", t->key);
    else if (t->clients[0] && load_clients(t->clients, &g->certs, err) < 0)
        r = -1;
    if (r < 0) {
        SSL_CTX_free(g->ctx);
        free(g);
        return -1;
    }
    SSL_CTX_set_options(g->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                    SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_alpn_select_cb(g->ctx, alpn_select, NULL);
    if (t->clients[0])
        SSL_CTX_set_verify(g->ctx, SSL_VERIFY_PEER, accept_any);
    *ret = g;
    return 0;
}

int pl_tls_new(const struct pl_config *cfg, struct pl_tls **ret_tls, struct pl_error *err) {
    struct pl_tls *t = calloc(1, sizeof(*t));
    if (!t)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    memcpy(t->cert, cfg->tls_cert_file, sizeof(t->cert));
    memcpy(t->key, cfg->tls_key_file, sizeof(t->key));
    memcpy(t->clients, cfg->tls_client_certs_file, sizeof(t->clients));
    pthread_mutex_init(&t->lock, NULL);
    if (build(t, &t->current, err) < 0) {
        pthread_mutex_destroy(&t->lock);
        free(t);
        return -1;
    }
    *ret_tls = t;
    return 0;
}

int pl_tls_reload(struct pl_tls *t, struct pl_error *err) {
    struct generation *g;
    if (build(t, &g, err) < 0)
        return -1;
    pthread_mutex_lock(&t->lock);
    struct generation *old = t->current;
    t->current = g;
    pthread_mutex_unlock(&t->lock);
    generation_free(old);
    return 0;
}

void pl_tls_free(struct pl_tls *t) {
    if (!t)
        return;
    generation_free(t->current);
    while (t->names) {
        struct name *n = t->names;
        t->names = n->next;
        free(n);
    }
    pthread_mutex_destroy(&t->lock);
    free(t);
}

const char *pl_tls_principal(struct pl_tls *t, const char *fingerprint) {
    if (!t || !fingerprint || !fingerprint[0])
        return NULL;
    const char *found = NULL;
    pthread_mutex_lock(&t->lock);
    for (struct client_cert *c = t->current->certs; c && !found; c = c->next) {
        if (strcmp(c->fingerprint, fingerprint) != 0)
            continue;
        for (struct name *n = t->names; n && !found; n = n->next)
            if (strcmp(n->s, c->principal) == 0)
                found = n->s;
        if (!found) {
            size_t len = strlen(c->principal);
            struct name *n = malloc(sizeof(*n) + len + 1);
            if (n) { /* out of memory: nobody, as an unlisted certificate */
                memcpy(n->s, c->principal, len + 1);
                n->next = t->names;
                t->names = n;
                found = n->s;
            }
        }
        break;
    }
    pthread_mutex_unlock(&t->lock);
    return found;
}

SSL *pl_tls_accept(struct pl_tls *t, int fd, uint64_t deadline_ns, bool *ret_h2,
                   char ret_fingerprint[65]) {
    pthread_mutex_lock(&t->lock);
    SSL *ssl = SSL_new(t->current->ctx); /* holds a reference to the context */
    pthread_mutex_unlock(&t->lock);
    *ret_h2 = false;
    ret_fingerprint[0] = '\0';
    if (!ssl || SSL_set_fd(ssl, fd) != 1) {
        SSL_free(ssl);
        return NULL;
    }
    /* Non-blocking: a record cut short must not hold the handshake past
     * its deadline inside a read.  The connection stays so. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (;;) {
        ERR_clear_error();
        int r = SSL_accept(ssl);
        if (r == 1)
            break;
        int e = SSL_get_error(ssl, r);
        uint64_t now = pl_now_ns();
        if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) || now >= deadline_ns) {
            ERR_clear_error();
            SSL_free(ssl);
            return NULL;
        }
        struct pollfd p = {.fd = fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
        if (poll(&p, 1, (int)((deadline_ns - now) / 1000000ull) + 1) < 0 && errno != EINTR) {
            SSL_free(ssl);
            return NULL;
        }
    }
    const unsigned char *alpn = NULL;
    unsigned alpnlen = 0;
    SSL_get0_alpn_selected(ssl, &alpn, &alpnlen);
    *ret_h2 = alpnlen == 2 && memcmp(alpn, "h2", 2) == 0;
    X509 *peer = SSL_get1_peer_certificate(ssl);
    if (peer) {
        pl_tls_fingerprint(peer, ret_fingerprint);
        X509_free(peer);
    }
    return ssl;
}
