# SPDX-License-Identifier: Apache-2.0
"""Certificates for the TLS tests, made at test time by the openssl CLI."""
import hashlib
import os
import ssl
import subprocess


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    """A CA, a server certificate for 127.0.0.1 and localhost, and two
    client certificates; returns their paths."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=plimsoll test CA",
            cwd=d)
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
                      ("server2", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
                      ("alice", "extendedKeyUsage=clientAuth"),
                      ("mallory", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name, cwd=d)
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext + "\n")
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile",
                name + ".ext", cwd=d)
    return {n: os.path.join(d, n) for n in ("ca", "server", "server2", "alice", "mallory")}


def fingerprint(pem_path):
    with open(pem_path) as f:
        der = ssl.PEM_cert_to_DER_cert(f.read())
    return hashlib.sha256(der).hexdigest()
