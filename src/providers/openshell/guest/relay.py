# SPDX-License-Identifier: Apache-2.0
# The relay a run with a grant starts in its sandbox, as
# `python3 -c <this> SOCKET` (docs/providers/openshell.md, "Grants: the
# relay").  It listens on the guest's broker socket and carries each
# connection's bytes, framed, on its stdout (an ExecSandboxInteractive
# stream the daemon reads), and the daemon's answers, framed, from its
# stdin back to the connection.  It parses nothing: every request is read
# by the daemon's own parser (broker_http), as on docker's socket.
#
# A frame is one type byte, a big-endian 32-bit connection id and a
# big-endian 32-bit length, then that many bytes.  Up: R (ready: its own
# PID:START and its ancestors'), O (a connection opened), D (its bytes),
# C (the guest closed its side).  Down: D (answer bytes), C (close once
# written).  The daemon's half-close ends it.
import os, selectors, socket, struct, sys
path = sys.argv[1]
os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
try:
    os.unlink(path)
except FileNotFoundError:
    pass
ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ls.bind(path)
os.chmod(path, 0o600)
ls.listen(64)
ls.setblocking(False)
out = sys.stdout.buffer
def send(t, i, b=b''):
    out.write(struct.pack('>cII', t, i, len(b)) + b)
    out.flush()
chain, p = [], os.getpid()
while p > 1 and len(chain) < 8:
    try:
        with open('/proc/%d/stat' % p) as f:
            rest = f.read().rsplit(')', 1)[1].split()
    except OSError:
        break
    chain.append('%d:%s' % (p, rest[19]))
    p = int(rest[1])
send(b'R', 0, ' '.join(chain).encode())
R, W = selectors.EVENT_READ, selectors.EVENT_WRITE
sel = selectors.DefaultSelector()
sel.register(ls, R, 0)
sel.register(0, R, -1)
conns, nid, inbuf = {}, 0, b''
class Conn:
    def __init__(self, s):
        self.s, self.buf, self.eof, self.closing, self.ev = s, bytearray(), False, False, 0
def want(i):
    c = conns[i]
    if c.closing and not c.buf:
        drop(i)
        return
    ev = (0 if c.eof else R) | (W if c.buf else 0)
    if ev != c.ev:
        if c.ev:
            sel.unregister(c.s)
        if ev:
            sel.register(c.s, ev, i)
        c.ev = ev
def drop(i):
    c = conns.pop(i)
    if c.ev:
        sel.unregister(c.s)
    c.s.close()
while True:
    for key, ev in sel.select():
        i = key.data
        if i == 0:
            try:
                s, _ = ls.accept()
            except OSError:
                continue
            nid += 1
            s.setblocking(False)
            conns[nid] = Conn(s)
            want(nid)
            send(b'O', nid)
        elif i == -1:
            b = os.read(0, 65536)
            if not b:
                sys.exit(0)
            inbuf += b
            while len(inbuf) >= 9:
                t, j, n = struct.unpack('>cII', inbuf[:9])
                if len(inbuf) < 9 + n:
                    break
                data, inbuf = inbuf[9:9 + n], inbuf[9 + n:]
                if j in conns:
                    if t == b'D':
                        conns[j].buf += data
                    elif t == b'C':
                        conns[j].closing = True
                    want(j)
        elif i in conns:
            c = conns[i]
            try:
                if ev & R:
                    b = c.s.recv(65536)
                    if b:
                        send(b'D', i, b)
                    else:
                        c.eof = True
                        send(b'C', i)
                if ev & W and c.buf:
                    del c.buf[:c.s.send(c.buf)]
            except BlockingIOError:
                pass
            except OSError:
                if not c.eof:
                    send(b'C', i)
                drop(i)
                continue
            want(i)
