# SPDX-License-Identifier: Apache-2.0
"""HTTP by hand over a raw socket, for what an HTTP client library will not
send: a head alone, a body that trickles, a connection from another
loopback address."""
import socket

# An answer that comes from the head alone arrives in milliseconds; the
# guard is for a machine under load, and far below "never".
AT_ONCE_S = 10.0


def raw_connect(d, source="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(AT_ONCE_S)
    s.connect((d.host, d.port))
    return s


def head(path, key=None, length=None, ctype="application/json", method="POST", extra=""):
    h = "%s %s HTTP/1.1\r\nHost: plimsoll\r\n" % (method, path)
    if ctype:
        h += "Content-Type: %s\r\n" % ctype
    if key:
        h += "Authorization: Bearer %s\r\n" % key
    if length is not None:
        h += "Content-Length: %d\r\n" % length
    return (h + extra + "\r\n").encode()


def read_answer(s, timeout=AT_ONCE_S):
    """One HTTP answer from a raw socket: (status, headers, body bytes).
    Raises socket.timeout when none arrives in time."""
    s.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed before an answer: %r" % data[:200])
        data += chunk
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    while len(rest) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, headers, rest[:n]


def closed_by_peer(s, timeout):
    """Whether the daemon ends the connection within timeout (reads and
    drops anything it sends first)."""
    s.settimeout(timeout)
    try:
        while s.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
