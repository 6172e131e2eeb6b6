# plimsoll's in-container session agent (docs/providers/docker.md, Sessions).
#
# A session keeps one container for many calls, with a Python and a Node
# interpreter kept alive between cells.  plimsolld runs this file as
# `python3 -c <this file> MODE [ARGS...]`, as the container's command and
# through Engine API execs (user 65534, working directory /work):
#
#   main            PID 1: reaps orphans, sleeps, exits 0 on SIGTERM/SIGINT.
#                   Runs no guest code.
#   launch LANG     trusted: makes itself non-dumpable, starts the LANG
#                   ("python" | "javascript") interpreter server detached
#                   (double fork + setsid, reparented to PID 1), waits until
#                   its socket /tmp/.plimsoll/cell-LANG.sock accepts, prints
#                   {"pid": P, "start": S, "dumpable": B} and exits 0, or
#                   {"error": "..."} and exits 1.
#   cell            stdin: the header's length on a line, the JSON header
#                   {"language", "code_len", "files": [{"path", "len"}]},
#                   the code, then each file's bytes.  Writes the files under
#                   /work, sends the code to the interpreter and relays its
#                   output to fds 1 and 2.  Exit: 0 the code ran, 1 it raised,
#                   2 bad header or file (a "plimsoll: " line on stderr),
#                   3 no interpreter listens (nothing written at all),
#                   4 the interpreter ended before the cell did.
#   cleanup KEEP    trusted, non-dumpable: KEEP is [[pid, start], ...]; stops
#                   then kills every process but PID 1, itself and the kept
#                   ones (spared only if their starttime still matches), and
#                   prints {"clean", "left", "alive", "work_used",
#                   "work_size"}; exit 0.
#   ps              debugging: a JSON list of the container's processes.
#   interp LANG SOCK  the Python interpreter server (what launch python
#                   execs); the Node one is `node -e <NODE_SERVER> SOCK`.
#
# Socket framing, both directions: 1 type byte, a 4-byte big-endian length,
# the data.  Client to server: "C" the cell's code (UTF-8), one frame per
# connection.  Server to client: "O" stdout bytes, "E" stderr bytes, "X" the
# end, its data the status in ASCII ("0" ran, "1" raised).
#
# Cell semantics.  Python: the last statement, when an expression whose
# value is not None, is printed with repr(); top-level await works
# (PyCF_ALLOW_TOP_LEVEL_AWAIT, run with asyncio.run); SystemExit(None or 0)
# ends the cell with status 0, any other code is status 1 with
# "SystemExit: N" (or the message) on stderr; the interpreter keeps running.
# fds 1 and 2 of the Python server are pipes relayed to the running cell, so
# os.write(1, ...), C code and child processes reach it too; output made
# between cells is dropped; stdin is /dev/null.  Node: the completion value,
# when not undefined, is printed with util.inspect, awaited first when it is
# a thenable; a cell that does not compile and mentions `await` runs as the
# body of an async function (a single expression's value is shown; other
# such cells keep no declarations: assign to globalThis); console and
# process.stdout/stderr write frames (a synchronous cell's output reaches
# the client when it ends); an uncaught exception or unhandled rejection
# while a cell runs makes it status 1.
#
# Only launch and cleanup are trusted with what they print; everything else
# here runs next to (or is) the guest's code.  Non-dumpable protects their
# stdout under runc from the prctl on (not during the interpreter's start);
# gVisor (2022-12-19) does not enforce it: a guest process can open
# /proc/<pid>/fd/1 and write (not read) there.  The daemon must accept a
# report only when stdout is exactly one JSON line and the exit code is 0.
import os
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else ""


def _nondumpable():
    # First thing for the trusted modes: a same-uid guest process can open
    # /proc/<pid>/fd/1 of a dumpable process and forge its report.
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return False, "prctl: errno %d" % ctypes.get_errno()
        return libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0, None
    except Exception as e:  # noqa: BLE001 - never fatal, reported instead
        return False, "prctl: %s" % e


if MODE in ("launch", "cleanup"):
    NONDUMPABLE = _nondumpable()

import json  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402

SOCK_DIR = "/tmp/.plimsoll"
LANGS = ("python", "javascript")
T_CODE, T_OUT, T_ERR, T_END, T_HELLO = b"C", b"O", b"E", b"X", b"H"
MAX_CODE = 64 << 20


def sock_path(lang):
    return "%s/cell-%s.sock" % (SOCK_DIR, lang)


def say(obj):
    os.write(1, (json.dumps(obj, separators=(", ", ": ")) + "\n").encode())


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def frame(kind, data):
    return kind + struct.pack(">I", len(data)) + data


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def recv_frame(s, limit=MAX_CODE):
    head = recv_exact(s, 5)
    if head is None:
        return None, None
    n = struct.unpack(">I", head[1:])[0]
    if n > limit:
        return None, None
    data = recv_exact(s, n)
    if data is None:
        return None, None
    return head[:1], data


# ---- /proc ---------------------------------------------------------------

def proc_stat(pid):
    """(state, ppid, starttime, comm) of pid, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    lp, rp = raw.find("("), raw.rfind(")")
    rest = raw[rp + 2:].split()
    # rest[0] is field 3 (state), so field N is rest[N - 3].
    try:
        return rest[0], int(rest[1]), int(rest[19]), raw[lp + 1:rp]
    except (IndexError, ValueError):
        return None


def list_pids():
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            out.append(int(name))
    return out


def alive(pid):
    st = proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X", "x")


# ---- main ----------------------------------------------------------------

def mode_main():
    sigs = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    while True:
        # Reap every child that has ended: orphans of execs land here.
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if pid == 0:
                break
        info = signal.sigtimedwait(sigs, 5.0)
        if info is not None and info.si_signo in (signal.SIGTERM, signal.SIGINT):
            os._exit(0)


# ---- launch --------------------------------------------------------------

def prepare_sock_dir():
    import stat
    try:
        os.mkdir(SOCK_DIR, 0o700)
    except FileExistsError:
        st = os.lstat(SOCK_DIR)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(SOCK_DIR)
            os.mkdir(SOCK_DIR, 0o700)
        elif st.st_uid != os.getuid():
            raise OSError("%s belongs to uid %d" % (SOCK_DIR, st.st_uid))
    os.chmod(SOCK_DIR, 0o700)


def server_argv(lang, path):
    if lang == "python":
        # sys.orig_argv keeps the -c source, which sys.argv drops.
        src = sys.orig_argv[sys.orig_argv.index("-c") + 1]
        return ["python3", "-c", src, "interp", "python", path]
    return ["node", "-e", NODE_SERVER, path]


def spawn_detached(argv):
    """Double fork with setsid; returns the pid that execs argv."""
    r, w = os.pipe()
    first = os.fork()
    if first == 0:
        try:
            os.close(r)
            os.setsid()
            second = os.fork()
            if second == 0:
                try:
                    null = os.open("/dev/null", os.O_RDWR)
                    for fd in (0, 1, 2):
                        os.dup2(null, fd)
                    os.closerange(3, 65536)
                    os.chdir("/work")
                    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
                    os.execvp(argv[0], argv)
                finally:
                    os._exit(127)
            os.write(w, str(second).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 64)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(first, 0)
    if not data:
        raise OSError("the server could not be started")
    return int(data)


def mode_launch(args):
    dumpable_off, why = NONDUMPABLE
    try:
        if len(args) != 1 or args[0] not in LANGS:
            raise ValueError("usage: launch python|javascript")
        lang = args[0]
        path = sock_path(lang)
        prepare_sock_dir()
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        pid = spawn_detached(server_argv(lang, path))
        deadline = time.monotonic() + 10.0
        while True:
            if not alive(pid):
                raise OSError("the %s server ended at startup" % lang)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(path)
                cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
                peer = struct.unpack("3i", cred)[0]
                # gVisor (2022-12-19) reports the caller's own pid here.
                if peer not in (0, pid, os.getpid()):
                    raise OSError("the socket is served by pid %d, not %d" % (peer, pid))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                pass
            finally:
                s.close()
            if time.monotonic() > deadline:
                raise OSError("the %s server did not listen within 10 s" % lang)
            time.sleep(0.005)
        st = proc_stat(pid)
        if st is None or st[0] in ("Z", "X"):
            raise OSError("the %s server ended at startup" % lang)
        out = {"pid": pid, "start": st[2], "dumpable": not dumpable_off}
        if why:
            out["dumpable_error"] = why
        say(out)
        os._exit(0)
    except Exception as e:  # noqa: BLE001
        say({"error": str(e) or type(e).__name__})
        os._exit(1)


# ---- cell (the client) ---------------------------------------------------

def fail2(msg):
    os.write(2, ("plimsoll: %s\n" % msg).encode())
    os._exit(2)


def read_stdin_exact(n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(0, min(n - len(buf), 1 << 20))
        if not chunk:
            fail2("stdin ended early")
        buf += chunk
    return bytes(buf)


def read_stdin_line(limit=16):
    buf = bytearray()
    while True:
        c = os.read(0, 1)
        if not c or c == b"\n":
            return bytes(buf)
        buf += c
        if len(buf) > limit:
            fail2("bad header length")


def safe_parts(rel):
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\0" in rel:
        return None
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return parts


def write_work_file(rel, data):
    """Write /work/rel without following any symlink on the way."""
    import stat
    parts = safe_parts(rel)
    if parts is None:
        fail2("refused file path %r: relative paths inside /work only" % (rel,))
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        dfd = os.open("/work", flags_dir)
    except OSError as e:
        fail2("/work: %s" % e.strerror)
    try:
        for p in parts[:-1]:
            # gVisor (2022-12-19) follows a symlink despite O_NOFOLLOW when
            # O_DIRECTORY is given: lstat first, and check that what was
            # opened is what lstat saw.
            try:
                before = os.stat(p, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                os.mkdir(p, 0o755, dir_fd=dfd)
                before = os.stat(p, dir_fd=dfd, follow_symlinks=False)
            if not stat.S_ISDIR(before.st_mode):
                raise OSError(40, "not a directory")
            nfd = os.open(p, flags_dir, dir_fd=dfd)
            os.close(dfd)
            dfd = nfd
            after = os.fstat(dfd)
            if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
                raise OSError(40, "changed while opened")
        fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644,
                     dir_fd=dfd)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
    except OSError as e:
        if e.errno in (40, 20):  # ELOOP, ENOTDIR: a symlink or a file on the way
            fail2("refused file path %r: a symlink or a file is in the way" % (rel,))
        fail2("%s: %s" % (rel, e.strerror or e))
    finally:
        os.close(dfd)


def mode_cell(args):
    try:
        n = int(read_stdin_line())
        h = json.loads(read_stdin_exact(n))
        lang = h["language"]
        if lang not in LANGS:
            fail2("unknown language %r" % (lang,))
        code = read_stdin_exact(int(h["code_len"]))
        files = []
        for f in h.get("files", []):
            files.append((f["path"], read_stdin_exact(int(f["len"]))))
    except (ValueError, KeyError, TypeError) as e:
        fail2("bad header: %s" % e)
    for rel, data in files:
        write_work_file(rel, data)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(sock_path(lang))
    except (FileNotFoundError, ConnectionRefusedError):
        os._exit(3)
    try:
        s.sendall(frame(T_CODE, code))
        while True:
            kind, data = recv_frame(s, limit=1 << 30)
            if kind is None:
                break
            if kind == T_OUT:
                write_all(1, data)
            elif kind == T_ERR:
                write_all(2, data)
            elif kind == T_END:
                os._exit(0 if data == b"0" else 1)
    except OSError:
        pass
    os.write(2, b"plimsoll: the interpreter ended\n")
    os._exit(4)


# ---- the Python interpreter server ---------------------------------------

def uplink_connect(lang):
    """Connect to plimsolld's cell socket and say hello with the launch's
    token; None when there is none (cells then come through execs)."""
    uplink = os.environ.pop("PLIMSOLL_CELL_UPLINK", "")
    token = os.environ.pop("PLIMSOLL_CELL_TOKEN", "")
    if not uplink or not token:
        return None
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bounded: a backlog that guest code filled must not keep this server
    # from listening (cells then come through execs).
    up.settimeout(2.0)
    try:
        up.connect(uplink)
        up.sendall(frame(T_HELLO, ("%s %s" % (lang, token)).encode()))
    except OSError:
        up.close()
        return None
    up.settimeout(None)
    return up


def mode_interp(args):
    import ast
    import builtins
    import io
    import linecache
    import threading
    import traceback
    import types

    path = args[1]
    os.chdir("/work")
    me = os.getpid()
    # fds 1 and 2 become pipes that a pump thread relays to the current
    # cell, so print, os.write(1, ...), C extensions and child processes all
    # reach the cell.  Output made between cells is dropped.
    reads = {}
    for fd, kind in ((1, T_OUT), (2, T_ERR)):
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        os.set_blocking(r, False)
        reads[r] = kind
    lock = threading.RLock()
    state = {"conn": None}

    def forward(r, kind):
        try:
            data = os.read(r, 65536)
        except BlockingIOError:
            return False
        if not data:
            return False
        conn = state["conn"]
        if conn is not None:
            try:
                conn.sendall(frame(kind, data))
            except OSError:
                state["conn"] = None
        return True

    def pump():
        import select
        p = select.poll()
        for r in reads:
            p.register(r, select.POLLIN)
        while True:
            for r, _ in p.poll():
                with lock:
                    forward(r, reads[r])

    def drain():
        with lock:
            for r, kind in reads.items():
                while forward(r, kind):
                    pass

    threading.Thread(target=pump, daemon=True).start()

    class Direct(io.RawIOBase):
        # sys.stdout and sys.stderr send their frames at once (output printed
        # just before os._exit is not lost in a pipe), after what already
        # waits in the pipes, so a child's output keeps its place.
        def __init__(self, kind):
            self.kind = kind

        def writable(self):
            return True

        def write(self, b):
            data = bytes(b)
            with lock:
                for r, kind in reads.items():
                    while forward(r, kind):
                        pass
                conn = state["conn"]
                if conn is not None and data:
                    try:
                        conn.sendall(frame(self.kind, data))
                    except OSError:
                        state["conn"] = None
            return len(data)

    def std(kind, fd):
        t = io.TextIOWrapper(Direct(kind), encoding="utf-8", errors="backslashreplace",
                             write_through=True)
        t.fileno = lambda: fd  # for code that asks (faulthandler, subprocess)
        return t

    out, err = std(T_OUT, 1), std(T_ERR, 2)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    sys.argv = [""]
    g = main.__dict__
    agent_file = sys._getframe().f_code.co_filename
    counter = [0]

    def show_exc(e):
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == agent_file:
            tb = tb.tb_next
        sys.stderr.write("".join(traceback.format_exception(type(e), e, tb)))

    def run(code):
        counter[0] += 1
        name = "<cell %d>" % counter[0]
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        try:
            tree = compile(code, name, "exec", ast.PyCF_ONLY_AST | flags)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            chunks = [compile(tree, name, "exec", flags)]
            if last is not None:
                chunks.append(compile(last, name, "eval", flags))
        except (SyntaxError, ValueError, OverflowError) as e:
            sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
            return 1
        try:
            value = None
            for c in chunks:
                value = eval(c, g)
                if c.co_flags & 0x80:  # CO_COROUTINE: the cell awaited at top level
                    import asyncio
                    value = asyncio.run(value)
            if last is not None and value is not None:
                sys.stdout.write(repr(value) + "\n")
            return 0
        except SystemExit as e:
            if e.code is None or e.code == 0:
                return 0
            sys.stderr.write("%s\n" % (e.code if isinstance(e.code, str)
                                       else "SystemExit: %r" % (e.code,)))
            return 1
        except BaseException as e:  # noqa: BLE001 - the cell's error, reported
            show_exc(e)
            return 1

    def serve(conn, code):
        state["conn"] = conn
        sys.stdout, sys.stderr = out, err
        try:
            status = run(code.decode("utf-8", "replace"))
        except BaseException:  # noqa: BLE001 - e.g. an error printing the error
            status = 1
        if os.getpid() != me:  # the cell forked and this is the child
            os._exit(0)
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:  # noqa: BLE001
                pass
        drain()
        with lock:
            try:
                conn.sendall(frame(T_END, str(status).encode()))
            except OSError:
                pass
            state["conn"] = None

    # The uplink: a connection out to plimsolld's socket in the session's
    # directory, made before this server listens (so the launcher's report
    # comes after the hello), over which cells arrive without an exec.
    up = uplink_connect("python")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    import select
    while True:
        ready = select.select([srv] + ([up] if up is not None else []), [], [])[0]
        if up is not None and up in ready:
            try:
                kind, code = recv_frame(up)
            except OSError:
                kind = None
            if kind != T_CODE:  # plimsolld closed it, or sent nonsense
                up.close()
                up = None
                continue
            serve(up, code)
            continue
        conn, _ = srv.accept()
        try:
            kind, code = recv_frame(conn)
        except OSError:
            kind = None
        if kind != T_CODE:
            conn.close()
            continue
        serve(conn, code)
        conn.close()


# ---- the Node interpreter server -----------------------------------------

NODE_SERVER = r"""
'use strict';
const net = require('net'), vm = require('vm'), util = require('util');
const stream = require('stream'), Module = require('module');
const path = process.argv[1];
process.chdir('/work');
let cur = null, running = false, failed = false;
function send(conn, t, b) {
  if (!conn || conn.destroyed) return;
  const h = Buffer.allocUnsafe(5);
  h[0] = t; h.writeUInt32BE(b.length, 1);
  conn.write(Buffer.concat([h, b]));
}
function sink(t) {
  const s = new stream.Writable({ write(c, e, cb) { send(cur, t, c); cb(); } });
  s.isTTY = false; s.columns = 80; s.fd = t === 0x4f ? 1 : 2;
  return s;
}
const out = sink(0x4f), err = sink(0x45);
for (const [k, s] of [['stdout', out], ['stderr', err]])
  Object.defineProperty(process, k, { configurable: true, enumerable: true, get() { return s; } });
const con = new console.Console({ stdout: out, stderr: err, colorMode: false });
const g = {
  console: con, require: Module.createRequire('/work/'), process, Buffer,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
  queueMicrotask, URL, URLSearchParams, TextEncoder, TextDecoder, structuredClone,
  AbortController, AbortSignal, Event, EventTarget, atob, btoa, performance,
  __filename: '/work/cell', __dirname: '/work', module: { exports: {} },
};
g.exports = g.module.exports;
const ctx = vm.createContext(g);
function fmt(e) {
  if (e && typeof e.stack === 'string')
    return e.stack.split('\n').filter(l => !/^\s+at (.*\()?(node:|\[eval\])/.test(l)).join('\n');
  return util.inspect(e);
}
process.on('uncaughtException', e => { if (running) { failed = true; err.write('Uncaught ' + fmt(e) + '\n'); } });
process.on('unhandledRejection', e => { if (running) { failed = true; err.write('Uncaught (in promise) ' + fmt(e) + '\n'); } });
function compile(code) {
  try { return new vm.Script(code, { filename: 'cell' }); }
  catch (e) {
    if (!e || e.name !== 'SyntaxError' || !/\bawait\b/.test(code)) throw e;
    // Top-level await: the cell runs as the body of an async function.  A
    // single expression is returned (its value is shown); otherwise the
    // cell's declarations are local to it.
    try { return new vm.Script('(async () => { return (' + code.replace(/[\s;]+$/, '') + '\n) })()', { filename: 'cell' }); }
    catch (e2) {}
    try { return new vm.Script('(async () => {' + code + '\n})()', { filename: 'cell' }); }
    catch (e3) { throw e; }
  }
}
async function run(conn, code, keep) {
  cur = conn; running = true; failed = false;
  try {
    let v = compile(code).runInContext(ctx);
    if (v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function') v = await v;
    if (v !== undefined) out.write(util.inspect(v) + '\n');
  } catch (e) { failed = true; err.write(fmt(e) + '\n'); }
  await new Promise(r => setImmediate(r));
  send(conn, 0x58, Buffer.from(failed ? '1' : '0'));
  running = false; cur = null;
  if (!keep) conn.end();
}
const queue = [];
let busy = false;
async function next() {
  if (busy) return;
  busy = true;
  while (queue.length) { const [c, code, keep] = queue.shift(); if (!c.destroyed) await run(c, code, keep); }
  busy = false;
}
function listen() {
net.createServer(conn => {
  let buf = Buffer.alloc(0), done = false;
  conn.on('error', () => {});
  conn.on('data', d => {
    if (done) return;
    buf = Buffer.concat([buf, d]);
    if (buf.length < 5) return;
    const n = buf.readUInt32BE(1);
    if (buf[0] !== 0x43 || n > 64 * 1024 * 1024) { done = true; conn.destroy(); return; }
    if (buf.length < 5 + n) return;
    done = true;
    queue.push([conn, buf.subarray(5, 5 + n).toString('utf8')]);
    next();
  });
}).listen(path);
}
// The uplink (see uplink_connect): connected and greeted before listening.
const uplink = process.env.PLIMSOLL_CELL_UPLINK, token = process.env.PLIMSOLL_CELL_TOKEN;
delete process.env.PLIMSOLL_CELL_UPLINK; delete process.env.PLIMSOLL_CELL_TOKEN;
if (uplink && token) {
  let buf = Buffer.alloc(0), listening = false;
  const up = net.connect(uplink);
  const start = () => { if (!listening) { listening = true; listen(); } };
  up.on('connect', () => { send(up, 0x48, Buffer.from('javascript ' + token)); start(); });
  up.on('error', start);
  setTimeout(() => { if (!listening) { up.destroy(); start(); } }, 2000).unref();
  up.on('data', d => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 5) {
      const n = buf.readUInt32BE(1);
      if (buf[0] !== 0x43 || n > 64 * 1024 * 1024) { up.destroy(); return; }
      if (buf.length < 5 + n) return;
      queue.push([up, buf.subarray(5, 5 + n).toString('utf8'), true]);
      buf = buf.subarray(5 + n);
      next();
    }
  });
} else {
  listen();
}
"""


# ---- cleanup -------------------------------------------------------------

def mode_cleanup(args):
    try:
        me = os.getpid()
        keep = {}
        for pid, start in json.loads(args[0] if args else "[]"):
            keep[int(pid)] = int(start)

        def spared(pid):
            if pid not in keep:
                return False
            st = proc_stat(pid)
            return st is not None and st[2] == keep[pid]

        def others():
            found = []
            for pid in list_pids():
                if pid in (1, me) or spared(pid):
                    continue
                if alive(pid):
                    found.append(pid)
            return found

        left = others()
        rounds = 0
        while left and rounds < 10:
            rounds += 1
            # Stop everything first, rescanning until no new process shows
            # up, so nothing forks during the kill.
            stopped = set()
            for _ in range(50):
                fresh = [p for p in left if p not in stopped]
                if not fresh:
                    break
                for p in fresh:
                    try:
                        os.kill(p, signal.SIGSTOP)
                    except OSError:
                        pass
                    stopped.add(p)
                left = others()
            for p in stopped | set(left):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            for _ in range(20):
                left = others()
                if not left:
                    break
                time.sleep(0.005)
        kept_alive = [[p, s] for p, s in sorted(keep.items()) if spared(p) and alive(p)]
        st = os.statvfs("/work")
        say({"clean": not left, "left": left, "alive": kept_alive,
             "work_used": (st.f_blocks - st.f_bfree) * st.f_frsize,
             "work_size": st.f_blocks * st.f_frsize})
    except BaseException as e:  # noqa: BLE001 - never raises
        try:
            say({"clean": False, "error": str(e) or type(e).__name__})
        except BaseException:  # noqa: BLE001
            pass
    os._exit(0)


def mode_ps(args):
    out = []
    for pid in sorted(list_pids()):
        st = proc_stat(pid)
        if st is not None:
            out.append({"pid": pid, "ppid": st[1], "comm": st[3], "state": st[0], "start": st[2]})
    say(out)


def entry():
    args = sys.argv[2:]
    if MODE == "main":
        mode_main()
    elif MODE == "launch":
        mode_launch(args)
    elif MODE == "cell":
        mode_cell(args)
    elif MODE == "cleanup":
        mode_cleanup(args)
    elif MODE == "ps":
        mode_ps(args)
    elif MODE == "interp" and len(args) == 2 and args[0] == "python":
        mode_interp(args)
    else:
        os.write(2, b"plimsoll: unknown mode\n")
        os._exit(64)


entry()
