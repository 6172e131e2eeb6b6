/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tls.h: TLS on the daemon's port (OpenSSL): the certificate and key of
 * PLIMSOLL_TLS_CERT_FILE and PLIMSOLL_TLS_KEY_FILE, TLS 1.2 and later
 * only, ALPN "h2" and "http/1.1", and client certificates mapped to
 * principals by PLIMSOLL_TLS_CLIENT_CERTS_FILE (lines "PRINCIPAL
 * SHA256-OF-THE-CERTIFICATE'S-DER", as the keys file maps keys).
 *
 * pl_tls_reload (SIGHUP) reads the files again into a new context; the
 * connections already open keep the one they began with (OpenSSL frees it
 * with the last of them), so no run in progress is touched; a reload that
 * fails keeps the old context.  A connection keeps its certificate's
 * fingerprint, not a principal: every request asks pl_tls_principal,
 * which reads the current file, so a certificate removed and reloaded is
 * nobody from the next request on, on every connection already open.
 */
#pragma once

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdint.h>

#include "../core/config.h"
#include "../core/errors.h"

struct pl_tls;

int pl_tls_new(const struct pl_config *cfg, struct pl_tls **ret_tls, struct pl_error *err);
int pl_tls_reload(struct pl_tls *tls, struct pl_error *err);
void pl_tls_free(struct pl_tls *tls);

/*
 * The handshake on fd, by deadline_ns (pl_now_ns's clock).  NULL when it
 * fails or the peer is too slow.  *ret_h2: ALPN chose "h2".
 * ret_fingerprint: the client certificate's SHA-256 fingerprint, or ""
 * when it sent none.
 */
SSL *pl_tls_accept(struct pl_tls *tls, int fd, uint64_t deadline_ns, bool *ret_h2,
                   char ret_fingerprint[65]);

/* The principal the current client certificates file gives fingerprint,
 * or NULL (none, unlisted, or tls NULL); the string lives as long as tls,
 * and is the same pointer across reloads. */
const char *pl_tls_principal(struct pl_tls *tls, const char *fingerprint);

/* The certificate's SHA-256 fingerprint, as the client certs file has it. */
void pl_tls_fingerprint(X509 *cert, char hex[65]);
