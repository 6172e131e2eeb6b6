# SPDX-License-Identifier: Apache-2.0
"""Grants for the tests: profiles, a temporary grants file with keys and a
certificate (GrantFiles), the credentials' settings (grant_env), and
GrantDaemon, a docker daemon holding grants to a test API (upstream.py) for
a test class."""
import json
import os
import random
import shutil
import socket
import subprocess
import tempfile

from .docker import DockerDaemon, require_engine
from .upstream import Check, Upstream

TOKEN = "tok-" + "7f3a9c" * 8 + "-never-in-a-log"
HMAC_KEY = "hs256-key-" + "k" * 40
SCOPES = ["items:read", "items:write"]
ROUTES = ["GET /items/*", "POST /items/*/notes", "GET /reports/**", "GET /big", "GET /slow"]


def profile(base_url, credential, callers=("alice", "bob"), routes=ROUTES, **extra):
    p = {"base_url": base_url, "routes": list(routes), "allowed_callers": list(callers),
         "scopes": SCOPES, "credential": credential}
    p.update(extra)
    return p


class GrantFiles:
    """A temporary folder with a grants file and keys."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="plimsoll-grants-")
        self.path = os.path.join(self.dir, "grants.json")
        for alg, args in (("rsa", ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]),
                          ("ed", ["-algorithm", "ED25519"])):
            key = os.path.join(self.dir, alg + ".pem")
            subprocess.run(["openssl", "genpkey"] + args + ["-out", key], check=True,
                           capture_output=True)
            subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-out",
                            os.path.join(self.dir, alg + ".pub")], check=True,
                           capture_output=True)
        # A private CA's certificate for an HTTPS API on 127.0.0.1.
        self.cert = os.path.join(self.dir, "tls.crt")
        self.cert_key = os.path.join(self.dir, "tls.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", self.cert_key,
                        "-out", self.cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                       capture_output=True)
        os.chmod(self.dir, 0o755)

    def key(self, alg):
        return os.path.join(self.dir, alg + ".pem")

    def pub(self, alg):
        return os.path.join(self.dir, alg + ".pub")

    def write(self, profiles):
        with open(self.path, "w") as f:
            json.dump({"profiles": profiles}, f)
        return self.path

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def token_cred():
    return {"kind": "shared_token", "env": "ITEMS_TOKEN"}


def jwt_cred(alg, files=None):
    c = {"kind": "jwt", "alg": alg, "issuer": "plimsoll-test", "audience": "items-api",
         "ttl_seconds": 120}
    if alg == "HS256":
        c["key_env"] = "ITEMS_JWT_KEY"
    else:
        c["key_file"] = files.key("rsa" if alg == "RS256" else "ed")
    return c


def grant_env(path, **extra):
    env = {"PLIMSOLL_GRANTS_FILE": path, "ITEMS_TOKEN": TOKEN, "ITEMS_JWT_KEY": HMAC_KEY}
    env.update(extra)
    return env


class GrantDaemon(DockerDaemon):
    """DockerDaemon whose daemon holds grants: setUpClass first makes
    cls.files (GrantFiles) and cls.up (a test API that checks the shared
    TOKEN) and writes the profiles cls.grants() returns; the daemon gets
    grant_env's settings too.  A subclass's tearDownClass stops cls.d and
    calls close_grants()."""

    @classmethod
    def grants(cls):
        """The profiles, {name: profile(...)}: cls.files and cls.up are
        there, and any other API a profile names is made here."""
        return {"items": profile(cls.up.url, token_cred())}

    @classmethod
    def settings(cls):
        env = super().settings()
        env.update(grant_env(cls.files.path))
        return env

    @classmethod
    def setUpClass(cls):
        require_engine()
        cls.files = GrantFiles()
        cls.up = Upstream(Check(token=TOKEN))
        cls.files.write(cls.grants())
        super().setUpClass()

    @classmethod
    def close_grants(cls):
        cls.up.close()
        cls.files.close()


# A guest's client of its broker socket (PLIMSOLL_BROKER_SOCKET): call()
# makes one request and returns (status, the JSON body's "error", else its
# "path"), or (0, the error's name) when the socket refused it; raw() sends
# bytes and returns the answer's status line.
SOCKET_CLIENT = (
    "import http.client, json, os, socket, time\n"
    "SOCK = os.environ.get('PLIMSOLL_BROKER_SOCKET')\n"
    "class C(http.client.HTTPConnection):\n"
    "    def connect(self):\n"
    "        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
    "        s.connect(SOCK)\n"
    "        self.sock = s\n"
    "def call(method, path, body=None, headers=None):\n"
    "    try:\n"
    "        c = C('broker', timeout=30)\n"
    "        c.request(method, path, body=body, headers=headers or {})\n"
    "        r = c.getresponse()\n"
    "        t = r.read().decode()\n"
    "    except OSError as e:\n"
    "        return 0, type(e).__name__\n"
    "    try:\n"
    "        j = json.loads(t)\n"
    "        e = j.get('error') or j.get('path')\n"
    "    except Exception:\n"
    "        e = None\n"
    "    return r.status, e\n"
    "def raw(data, wait=30):\n"
    "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
    "    s.settimeout(wait)\n"
    "    s.connect(SOCK)\n"
    "    try:\n"
    "        s.sendall(data)\n"
    "    except OSError:\n"
    "        pass\n"
    "    out = b''\n"
    "    try:\n"
    "        while True:\n"
    "            b = s.recv(65536)\n"
    "            if not b: break\n"
    "            out += b\n"
    "    except OSError:\n"
    "        pass\n"
    "    s.close()\n"
    "    return out.split(b'\\r\\n', 1)[0].decode()\n"
)

# A guest program that calls the guard as a run with a grant does: its own
# token, then none and a wrong one; prints what each call answered and which
# PLIMSOLL_GUARD_* variables it was given.
GUARD_CALL = ("import http.client, json, os, sys\n"
              "u = os.environ.get('PLIMSOLL_GUARD_URL', '')\n"
              "host, port = u[len('http://'):].rsplit(':', 1)\n"
              "def call(path, token):\n"
              "    c = http.client.HTTPConnection(host, int(port), timeout=10)\n"
              "    h = {'X-Plimsoll-Guard': token} if token is not None else {}\n"
              "    c.request('GET', path, headers=h)\n"
              "    r = c.getresponse()\n"
              "    return r.status, r.read().decode()\n"
              "tok = os.environ.get('PLIMSOLL_GUARD_TOKEN')\n"
              "print(json.dumps({'ok': call('/items/1', tok), 'route': call('/admin', tok),\n"
              "                  'none': call('/items/2', None), 'wrong': call('/items/3', 'f' * 64),\n"
              "                  'env': sorted(k for k in os.environ if k.startswith('PLIMSOLL_GUARD'))}))\n")


def free_port(host):
    """A port free on host right now (the guard's, in tests), drawn at
    random below the kernel's ephemeral range (32768 and up here): suites
    that run at once make outgoing connections whose local ports come from
    that range, and one of them could take a port between this answer and
    the daemon's bind."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        s = socket.socket()
        try:
            s.bind((host, port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port below the ephemeral range on %s" % host)
