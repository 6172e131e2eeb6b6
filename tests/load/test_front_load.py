# SPDX-License-Identifier: Apache-2.0
"""The front door under attack, against the real daemon (wasm provider), on
loopback only, every loop bounded in count and in time.

Phases, each a few seconds long, with an honest caller (key "bob", address
127.0.0.1) asking /healthz and running a wasm snippet throughout:

  baseline  no attack: the honest caller's usual latency
  announce  unauthenticated connections from three other loopback addresses
            (127.0.0.2-4), each announcing a 16 MiB body and sending 16 KiB
            of it: each is refused from its head (401), or closed at accept
            past the per-address cap
  trickle   from the same three addresses, more connections than the cap,
            each sending one byte every half second: half trickle a head,
            half an authenticated head announcing the largest body and then
            its bytes; each is cut at the read deadline, or refused at once
            (the cap, or 429 for the bytes in flight)
  amplify   from 127.0.0.5, three threads for each of two attacking keys
            ("alice", "mallory": together they can hold every byte in
            flight) sending bodies of the largest size built to blow up a
            JSON parser (nesting, empty arrays, zeros, empty objects) and a
            14 MiB string, each after "Expect: 100-continue": refused 400
            (the shape bounds, or the snippet's size after parsing) or 429
            (the bytes in flight, the daemon's or the key's)
  all       the three at once
  after     no attack again

Asserted: every honest call is answered correctly (healthz 200 "ok", the run
200 with "42"); every attacking request gets one of the answers above and
nothing else, and no connection outlives the read deadline by more than a
generous guard; the daemon's peak RSS (VmHWM) stays under 256 MiB; afterwards
the daemon is ready, its fd and thread counts are back, and the attacker's
share of the bytes in flight has come back. The honest caller's latencies
(p50/p99/max per phase) and the daemon's RSS are printed, never asserted:
docs/load.md records them.

    PLIMSOLL_BUILD_DIR=build python3 -m unittest tests/load/test_front_load.py
"""
import json
import os
import selectors
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.harness import SERVICE, Daemon, error_info  # noqa: E402
from plimsoll_test.procs import proc_counts  # noqa: E402
from plimsoll_test.rawhttp import head, read_answer  # noqa: E402

ATTACKERS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
AMPLIFIER = "127.0.0.5"  # its own address: a connection it loses is never the cap's doing
HONEST = "127.0.0.1"
READ_TIMEOUT_MS = 3000
PER_ADDRESS = 64              # the default: PLIMSOLL_MAX_CONNECTIONS (256) / 4
RSS_BOUND_KIB = 256 * 1024
LARGEST = 14680064            # PLIMSOLL_MAX_REQUEST_BYTES's default
# Guards, not performance claims: a client that waits longer than this for
# an answer counts as unanswered; a trickled connection alive longer than
# the deadline plus this was never cut.
ANSWER_GUARD_S = 30.0
CUT_GUARD_S = 5.0

# Each phase's length; PL_LOAD_PHASE_SCALE shortens them all (scripts/test
# runs them at half length to keep CI short), but a phase that trickles
# connections lasts at least two read deadlines, so each is cut at least once.
_FULL = {"baseline": 5, "announce": 10, "trickle": 12, "amplify": 10, "all": 12, "after": 4}
_SCALE = float(os.environ.get("PL_LOAD_PHASE_SCALE", "1"))
PHASE_SECONDS = {k: max(v * _SCALE, 2 * READ_TIMEOUT_MS / 1000.0 if k in ("trickle", "all") else 2)
                 for k, v in _FULL.items()}


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, int(round(p / 100.0 * len(xs) + 0.5)) - 1))]


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for %d" % (field, pid))


def connect(d, source, timeout=ANSWER_GUARD_S):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((source, 0))
        s.settimeout(timeout)
        s.connect((d.host, d.port))
    except OSError:
        s.close()
        raise
    return s


class Book:
    """Outcomes by phase and kind, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.phase = "setup"
        self.counts = {}      # (phase, what) -> n
        self.latency = {}     # (phase, what) -> [s]
        self.bad = []         # (phase, what, detail)

    def add(self, what, dt=None, bad=None):
        with self.lock:
            k = (self.phase, what)
            self.counts[k] = self.counts.get(k, 0) + 1
            if dt is not None:
                self.latency.setdefault(k, []).append(dt)
            if bad is not None:
                self.bad.append((self.phase, what, bad))

    def active(self, *phases):
        return self.phase in phases


def honest(d, book, stop):
    """/healthz and a wasm run as bob from 127.0.0.1, one after the other."""
    msg = json.dumps({"snippet": {"language": "javascript", "code": "console.log(6*7)"}}).encode()
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            s = connect(d, HONEST)
            try:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: plimsoll\r\nConnection: close\r\n\r\n")
                status, _, body = read_answer(s, ANSWER_GUARD_S)
            finally:
                s.close()
            ok = (status, body) == (200, b"ok\n")
            book.add("healthz", time.monotonic() - t0, None if ok else (status, body[:100]))
        except OSError as e:
            book.add("healthz", None, "%s: %s" % (type(e).__name__, e))
        t0 = time.monotonic()
        try:
            s = connect(d, HONEST)
            try:
                s.sendall(head(SERVICE + "Run", key=d.keys["bob"], length=len(msg)) + msg)
                status, _, body = read_answer(s, ANSWER_GUARD_S)
            finally:
                s.close()
            answer = json.loads(body)
            ok = status == 200 and answer.get("stdout") == "42\n"
            book.add("run", time.monotonic() - t0,
                     None if ok else (status, answer.get("message") or answer.get("stdout")))
        except (OSError, ValueError) as e:
            book.add("run", None, "%s: %s" % (type(e).__name__, e))
        stop.wait(0.1)


def announcer(d, book, stop, n, limit):
    """Unauthenticated heads announcing 16 MiB, 16 KiB of body sent."""
    i = n
    while not stop.is_set() and book.active("announce", "all") and limit[0] > 0:
        limit[0] -= 1
        i += 1
        src = ATTACKERS[i % len(ATTACKERS)]
        key = None if i % 2 else "not-a-key"
        try:
            s = connect(d, src)
        except OSError as e:
            book.add("announce-connect-failed", None, "%s" % e)
            continue
        try:
            s.sendall(head(SERVICE + "Run", key=key, length=16 << 20))
            try:
                s.sendall(b" " * 16384)
            except OSError:
                pass  # answered and closed already
            status, _, body = read_answer(s, ANSWER_GUARD_S)
            if status == 401 and error_info(json.loads(body))[0]["reason"] == "UNAUTHENTICATED":
                book.add("announce-401")
            else:
                book.add("announce-other", None, (status, body[:100]))
        except ConnectionError:
            book.add("announce-closed")  # at accept: the address is at its cap
        except socket.timeout:
            book.add("announce-unanswered", None, "no answer in %.0f s" % ANSWER_GUARD_S)
        except (OSError, ValueError) as e:
            book.add("announce-closed" if isinstance(e, OSError) else "announce-other",
                     None if isinstance(e, OSError) else str(e))
        finally:
            s.close()


def trickler(d, book, stop, src, limit):
    """More connections from src than its cap, one byte each every 0.5 s.
    Each connection's life ends in one of: closed at accept (the cap), cut
    at the read deadline, or an answer at once (429: the bytes in flight)."""
    sel = selectors.DefaultSelector()
    conns = {}  # socket -> [start, payload, sent, got]
    opened = 0
    want = PER_ADDRESS + 16

    def finish(s):
        start, _, sent, got = conns.pop(s)
        sel.unregister(s)
        s.close()
        life = time.monotonic() - start
        if got:
            code = got.split(b" ", 2)[1] if got.startswith(b"HTTP/1.1 ") else got[:40]
            if code == b"429":
                book.add("trickle-429")
            else:
                book.add("trickle-answered", None, got[:120])
        elif sent <= 1 and life < 1.0:
            book.add("trickle-closed-at-accept")
        else:
            book.add("trickle-cut", life)
            if life > READ_TIMEOUT_MS / 1000.0 + CUT_GUARD_S:
                book.add("trickle-late", None, "lived %.1f s" % life)

    try:
        next_drip = time.monotonic()
        while not stop.is_set() and book.active("trickle", "all"):
            while len(conns) < want and limit[0] > 0:
                limit[0] -= 1
                opened += 1
                if opened % 2:
                    payload = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"y" * 200
                else:
                    payload = head(SERVICE + "Run", key=d.keys["alice"], length=LARGEST) + \
                        b" " * 200
                try:
                    s = connect(d, src, timeout=5)
                except OSError as e:
                    book.add("trickle-connect-failed", None, str(e))
                    break
                s.setblocking(False)
                conns[s] = [time.monotonic(), payload, 0, b""]
                sel.register(s, selectors.EVENT_READ)
            for key, _ in sel.select(timeout=0.05):
                s = key.fileobj
                try:
                    chunk = s.recv(4096)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    chunk = b""
                if chunk:
                    conns[s][3] += chunk
                    if b"\r\n\r\n" in conns[s][3]:
                        finish(s)
                else:
                    finish(s)
            now = time.monotonic()
            if now >= next_drip:
                next_drip = now + 0.5
                for s, c in list(conns.items()):
                    if c[2] < len(c[1]):
                        # The authenticated ones send their head at once, then
                        # their body a byte at a time.
                        n = c[1].index(b"\r\n\r\n") + 5 if c[2] == 0 and b"\r\n\r\n" in c[1] \
                            else 1
                        try:
                            s.send(c[1][c[2]:c[2] + n])
                            c[2] += n
                        except OSError:
                            finish(s)
    finally:
        for s in list(conns):
            sel.unregister(s)
            s.close()
        sel.close()


AMPLIFIERS = {
    "nesting": lambda n: b"[" * (n // 2) + b"]" * (n // 2),
    "empty-arrays": lambda n: b"[" + b"[]," * ((n - 4) // 3) + b"[]]",
    "zeros": lambda n: b"[" + b"0," * ((n - 3) // 2) + b"0]",
    "empty-objects": lambda n: b"[" + b"{}," * ((n - 4) // 3) + b"{}]",
    "long-string": lambda n: json.dumps({"snippet": {"language": "javascript",
                                                     "code": "x" * (n - 64)}}).encode(),
}


def amplifier(d, book, stop, n, principal, bodies, limit):
    """Bodies of the largest size, sent after 100 Continue."""
    i = n
    while not stop.is_set() and book.active("amplify", "all") and limit[0] > 0:
        limit[0] -= 1
        i += 1
        name = sorted(bodies)[i % len(bodies)]
        body = bodies[name]
        try:
            s = connect(d, AMPLIFIER)
        except OSError as e:
            book.add("amplify-connect-failed", None, str(e))
            continue
        try:
            s.sendall(head(SERVICE + "Run", key=d.keys[principal], length=len(body),
                           extra="Expect: 100-continue\r\n"))
            s.settimeout(ANSWER_GUARD_S)
            first = s.recv(65536)
            if first.startswith(b"HTTP/1.1 100"):
                s.sendall(body)
                rest = first.split(b"\r\n\r\n", 1)[1]
                status, _, answer = read_answer(_Prefixed(s, rest), ANSWER_GUARD_S)
            else:
                status, _, answer = read_answer(_Prefixed(s, first), ANSWER_GUARD_S)
            reason = error_info(json.loads(answer))[0]["reason"]
            msg = json.loads(answer)["message"]
            if status == 429 and reason == "AT_CAPACITY":
                book.add("amplify-429")
            elif status == 400 and reason == "INVALID_REQUEST" and (
                    "PL_JSON_MAX" in msg or "snippet.code" in msg):
                book.add("amplify-400")
            else:
                book.add("amplify-other", None, (name, status, reason, msg[:100]))
        except (OSError, ValueError, KeyError, IndexError) as e:
            book.add("amplify-other", None, (name, "%s: %s" % (type(e).__name__, e)))
        finally:
            s.close()


class _Prefixed:
    """A socket whose first bytes were already read."""

    def __init__(self, s, first):
        self.s, self.first = s, first

    def settimeout(self, t):
        self.s.settimeout(t)

    def recv(self, n):
        if self.first:
            out, self.first = self.first, b""
            return out
        return self.s.recv(n)


class ParserBombs(unittest.TestCase):
    """Each body of the largest size, alone: what it costs the daemon."""

    def test_each_alone(self):
        for name in sorted(AMPLIFIERS):  # a daemon each: VmHWM only rises
            d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}).start()
            try:
                body = AMPLIFIERS[name](LARGEST)
                before = status_kib(d.proc.pid, "VmHWM")
                t0 = time.monotonic()
                status, answer = d.rpc("Run", None, raw=body)
                took = time.monotonic() - t0
                after = status_kib(d.proc.pid, "VmHWM")
                print("[bomb] %-13s %d bytes: %d %s in %.2f s; peak RSS %d -> %d KiB"
                      % (name, len(body), status, answer["message"][:60], took, before, after),
                      file=sys.stderr)
                self.assertEqual(status, 400, answer)
                self.assertEqual(error_info(answer)[0]["reason"], "INVALID_REQUEST")
                # The body itself, and a parse of a legal shape: a few times
                # its size at most, never the hundreds of MiB a tree costs.
                self.assertLess((after - before) * 1024, 4 * len(body), name)
            finally:
                d.stop()


class FrontDoorUnderAttack(unittest.TestCase):
    def test_front_door_holds(self):
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm",
                        "PLIMSOLL_REQUEST_READ_TIMEOUT_MS": str(READ_TIMEOUT_MS)},
                   principals=("alice", "bob", "mallory")).start()
        book = Book()
        stop = threading.Event()
        rss_max = {}
        bodies = {k: f(LARGEST) for k, f in AMPLIFIERS.items()}
        for k, b in bodies.items():
            self.assertLessEqual(len(b), LARGEST, k)

        def sample():
            while not stop.is_set():
                try:
                    kib = status_kib(d.proc.pid, "VmRSS")
                except (OSError, AssertionError):
                    return
                with book.lock:
                    rss_max[book.phase] = max(rss_max.get(book.phase, 0), kib)
                stop.wait(0.02)

        try:
            fds0, threads0 = proc_counts(d.proc.pid)
            rss0 = status_kib(d.proc.pid, "VmRSS")
            workers = [threading.Thread(target=honest, args=(d, book, stop), daemon=True),
                       threading.Thread(target=sample, daemon=True)]
            for w in workers:
                w.start()
            for phase in PHASE_SECONDS:
                with book.lock:
                    book.phase = phase
                attack = []
                if phase in ("announce", "all"):
                    limit = [4000]
                    attack += [threading.Thread(target=announcer, args=(d, book, stop, n, limit))
                               for n in range(12)]
                if phase in ("trickle", "all"):
                    limit = [3000]
                    attack += [threading.Thread(target=trickler, args=(d, book, stop, src, limit))
                               for src in ATTACKERS]
                if phase in ("amplify", "all"):
                    limit = [20000]
                    attack += [threading.Thread(target=amplifier,
                                                args=(d, book, stop, n, who, bodies, limit))
                               for n in range(3) for who in ("alice", "mallory")]
                for t in attack:
                    t.daemon = True
                    t.start()
                time.sleep(PHASE_SECONDS[phase])
                with book.lock:
                    book.phase = phase + "-drain"  # attackers see their phase end
                for t in attack:
                    t.join(ANSWER_GUARD_S + 10)
                    self.assertFalse(t.is_alive(), "an attacking client never finished")
            stop.set()
            for w in workers:
                w.join(ANSWER_GUARD_S + 10)
            hwm = status_kib(d.proc.pid, "VmHWM")
            self.report(book, rss0, rss_max, hwm)

            self.assertEqual(book.bad[:10], [], "%d wrong answers" % len(book.bad))
            for phase in PHASE_SECONDS:
                self.assertGreater(book.counts.get((phase, "healthz"), 0), 0, phase)
                self.assertGreater(book.counts.get((phase, "run"), 0), 0, phase)
            c = book.counts
            self.assertGreater(c.get(("announce", "announce-401"), 0), 0)
            self.assertGreater(c.get(("trickle", "trickle-cut"), 0), 0)
            self.assertGreater(c.get(("trickle", "trickle-closed-at-accept"), 0), 0,
                               "the per-address cap never refused a trickler")
            self.assertGreater(c.get(("amplify", "amplify-400"), 0), 0)
            self.assertLess(hwm, RSS_BOUND_KIB, "peak RSS %d KiB" % hwm)

            # Afterwards: ready, counts back, alice's share of the bytes back
            # (her two largest heads wait for their bodies).
            self.assertEqual(d.request("GET", "/readyz")[0], 200)
            held = [connect(d, HONEST), connect(d, HONEST)]
            try:
                for s in held:
                    s.sendall(head(SERVICE + "Run", key=d.keys["alice"], length=LARGEST))
                for s in held:
                    with self.assertRaises(socket.timeout):
                        read_answer(s, timeout=0.5)
            finally:
                for s in held:
                    s.close()
            deadline = time.monotonic() + 20
            while True:
                fds, threads = proc_counts(d.proc.pid)
                if (fds <= fds0 + 2 and threads <= threads0 + 2) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            print("[front] fds %d -> %d, threads %d -> %d" % (fds0, fds, threads0, threads),
                  file=sys.stderr)
            self.assertLessEqual(fds, fds0 + 2)
            self.assertLessEqual(threads, threads0 + 2)
        finally:
            stop.set()
            d.stop()

    def report(self, book, rss0, rss_max, hwm):
        out = sys.stderr
        print("\n[front] phase: honest healthz n p50/p99/max ms; run n p50/p99/max ms; "
              "daemon max RSS KiB; attack outcomes", file=out)
        for phase in PHASE_SECONDS:
            h = book.latency.get((phase, "healthz"), [])
            r = book.latency.get((phase, "run"), [])
            attack = {}
            for (p, w), n in sorted(book.counts.items()):
                if p in (phase, phase + "-drain") and w not in ("healthz", "run"):
                    attack[w] = attack.get(w, 0) + n
            print("[front] %-8s healthz %4d %6.1f/%6.1f/%7.1f  run %4d %6.1f/%6.1f/%7.1f  "
                  "RSS %6d  %s"
                  % (phase, len(h), pct(h, 50) * 1e3, pct(h, 99) * 1e3, max(h or [0]) * 1e3,
                     len(r), pct(r, 50) * 1e3, pct(r, 99) * 1e3, max(r or [0]) * 1e3,
                     rss_max.get(phase, 0), attack), file=out)
        cut = [x for (p, w), xs in book.latency.items() if w == "trickle-cut" for x in xs]
        print("[front] trickled connections cut after %.2f s (p50), %.2f s (max); "
              "RSS at start %d KiB, peak (VmHWM) %d KiB; bound %d KiB"
              % (pct(cut, 50), max(cut or [0]), rss0, hwm, RSS_BOUND_KIB), file=out)


if __name__ == "__main__":
    unittest.main()
