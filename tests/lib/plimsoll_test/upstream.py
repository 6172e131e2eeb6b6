# SPDX-License-Identifier: Apache-2.0
"""A test API server: the upstream a grant's broker forwards to.

A real HTTP server on loopback (standard library only) that checks the
credential on every request the way a real API would, and records what it
received so tests can tell what reached it and what did not:

  * shared token: the Authorization header must be exactly "Bearer <token>";
  * JWT: the signature is verified (HS256 with hmac; RS256 and EdDSA with
    the openssl command against the public key), then iss, aud, exp, nbf,
    iat, jti and scope are checked; sub is recorded.

A request that fails the check is answered 401 and recorded with the reason.
Routes: /slow sleeps 3 s; /big answers `n` bytes (query n=); anything else
echoes {"method", "path", "query", "sub", "body"} as JSON.
"""
import base64
import hashlib
import hmac
import json
import os
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def openssl_verify(alg, pub_pem, data, sig):
    with tempfile.TemporaryDirectory() as d:
        dp, sp = os.path.join(d, "data"), os.path.join(d, "sig")
        with open(dp, "wb") as f:
            f.write(data)
        with open(sp, "wb") as f:
            f.write(sig)
        if alg == "RS256":
            cmd = ["openssl", "dgst", "-sha256", "-verify", pub_pem, "-signature", sp, dp]
        else:
            cmd = ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", pub_pem, "-rawin",
                   "-in", dp, "-sigfile", sp]
        return subprocess.run(cmd, capture_output=True).returncode == 0


class Check:
    """How the upstream checks the credential."""

    def __init__(self, token=None, alg=None, hmac_key=None, pub_pem=None, issuer=None,
                 audience=None, scopes=()):
        self.token, self.alg, self.hmac_key, self.pub_pem = token, alg, hmac_key, pub_pem
        self.issuer, self.audience, self.scopes = issuer, audience, list(scopes)

    def verify(self, authorization):
        """Returns (ok, reason, claims)."""
        if not authorization or not authorization.startswith("Bearer "):
            return False, "no bearer credential", None
        cred = authorization[len("Bearer "):]
        if self.token is not None:
            ok = hmac.compare_digest(cred.encode(), self.token.encode())
            return ok, "" if ok else "wrong token", None
        parts = cred.split(".")
        if len(parts) != 3:
            return False, "not a compact JWS", None
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            sig = b64url_decode(parts[2])
        except ValueError:
            return False, "undecodable JWT", None
        if header.get("alg") != self.alg or header.get("typ") != "JWT":
            return False, "unexpected header %r" % header, claims
        signing_input = (parts[0] + "." + parts[1]).encode()
        if self.alg == "HS256":
            good = hmac.compare_digest(
                hmac.new(self.hmac_key, signing_input, hashlib.sha256).digest(), sig)
        else:
            good = openssl_verify(self.alg, self.pub_pem, signing_input, sig)
        if not good:
            return False, "bad signature", claims
        now = time.time()
        if claims.get("iss") != self.issuer:
            return False, "wrong issuer", claims
        if claims.get("aud") != self.audience:
            return False, "wrong audience", claims
        if not isinstance(claims.get("exp"), int) or claims["exp"] <= now:
            return False, "expired", claims
        if not isinstance(claims.get("nbf"), int) or claims["nbf"] > now + 5:
            return False, "not yet valid", claims
        if not isinstance(claims.get("iat"), int) or claims["iat"] > now + 5:
            return False, "issued in the future", claims
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            return False, "no subject", claims
        jti = claims.get("jti")
        if not isinstance(jti, str) or len(jti) < 16:
            return False, "no unique id", claims
        if claims.get("scope", "").split() != self.scopes:
            return False, "wrong scopes %r" % claims.get("scope"), claims
        return True, "", claims


class Upstream:
    def __init__(self, check, tls=None):
        """tls: (certfile, keyfile) to serve HTTPS instead of HTTP."""
        self.check = check
        self.received = []
        self.lock = threading.Lock()
        up = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def handle_any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                u = urllib.parse.urlsplit(self.path)
                ok, reason, claims = up.check.verify(self.headers.get("Authorization"))
                entry = {"method": self.command, "path": u.path, "query": u.query,
                         "headers": {k.lower(): v for k, v in self.headers.items()},
                         "body": body.decode("utf-8", "replace"), "ok": ok, "reason": reason,
                         "claims": claims}
                with up.lock:
                    up.received.append(entry)
                if not ok:
                    return self.answer(401, {"error": reason})
                if u.path == "/slow":
                    time.sleep(3)
                if u.path == "/big":
                    n = int(urllib.parse.parse_qs(u.query).get("n", ["0"])[0])
                    return self.answer(200, None, b"x" * n, "text/plain")
                self.answer(200, {"method": self.command, "path": u.path, "query": u.query,
                                  "sub": (claims or {}).get("sub"), "body": entry["body"]},
                            extra={"X-Request-Id": "up-1", "Set-Cookie": "secret=1"})

            def answer(self, status, obj, raw=None, ctype="application/json", extra=None):
                data = raw if raw is not None else json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = handle_any

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that hung up (the broker's answer cap) is not news

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            self.url = "https://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def take(self):
        with self.lock:
            r, self.received = self.received, []
        return r

    def close(self):
        self.server.shutdown()
        self.server.server_close()
