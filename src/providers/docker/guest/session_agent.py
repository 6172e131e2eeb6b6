# SPDX-License-Identifier: Apache-2.0
# plimsoll's in-container session agent (docs/sessions.md).  The build
# compiles it into plimsolld after common.py (the seccomp installer,
# nondumpable, the stdin readers) and NODE_SERVER (cell_server.js).
#
# A session keeps one container for many calls, with a Python and a Node
# interpreter kept alive between cells.  plimsolld runs this file as
# `python3 -c <this file> MODE [ARGS...]`, as the container's command and
# through Engine API execs (working directory /work), always as the sandbox's
# uid; the group tells the roles apart (docs/sessions.md, "Who can reach
# what"): G+0 the calls' own code, G+1 the Python interpreter, G+2 the
# JavaScript one, G+3 the cleanup.  Linux refuses /proc/<pid>/fd, environ
# and mem of a process whose group differs, so there a process of one role
# cannot read another role's descriptors or memory; the gVisor of Debian 12
# does not refuse them, so a launch keeps nothing secret on a stream and
# stops everything else while it runs (docs/sessions.md, "The uplink").
#
#   launch LANG     trusted, as the LANG interpreter's group: ends every
#                   other process of that group, stops every other process
#                   but PID 1 and kills any that holds a descriptor to its
#                   streams, connects to plimsolld's cell socket
#                   /run/plimsoll/cells.sock and reads the challenge the
#                   daemon sends there, starts the interpreter detached
#                   (double fork + setsid, reparented to PID 1) holding that
#                   connection as fd 3, waits until it says it is ready on fd
#                   4, prints a newline and {"challenge": C, "pid": P,
#                   "start": S}, closes its streams, continues what it
#                   stopped and exits 0; or prints {"error": "..."} last and
#                   exits 1.  Nothing secret is on its streams; a connected
#                   socket cannot be reopened through /proc.
#   cleanup KEEP IPC  trusted, its own group: KEEP is [[pid, start], ...];
#                   ends every process but PID 1, itself and the kept ones
#                   (spared only if their start time still matches; a
#                   process counts as alive while any of its threads is),
#                   removes System V IPC objects and POSIX message queues,
#                   and prints {"clean", "left", "alive", "dead", "work_used",
#                   "work_size", "tmp_used", "ipc_removed", "ipc_last"}; exit
#                   0.  IPC is the highest System V id seen by the last
#                   cleanup (gVisor lists none: ids are probed up to it).
#   ps              debugging: a JSON list of the container's processes.
#   vmlaunch LANG NAME, vmcell NAME FILE
#                   the same interpreters in a hosted VM (e2b), reached
#                   through a relay on an abstract socket: see "hosted VMs".
#   interp python   the Python interpreter server (what launch python execs,
#                   fd 3 the uplink, fd 4 the ready pipe); the Node one is
#                   `node -e <NODE_SERVER>` with the same descriptors
#                   (NODE_SERVER is cell_server.js, put in by the build).
#
# Uplink framing, both directions: 1 type byte, a 4-byte big-endian length,
# the data.  plimsolld to interpreter: "C" a cell's code (UTF-8); to the
# launcher, first, "H" the challenge (read by the launcher, never by the
# interpreter).
# Interpreter to plimsolld: "O" stdout bytes, "E" stderr bytes, "D" a
# display output (a JSON MIME bundle: {"kind": "display" | "result",
# "data": {TYPE: text or base64}}), "X" the end of a cell, its data the
# status in ASCII ("0" ran, "1" raised).
#
# Cell semantics.  Python: the last statement, when an expression whose
# value is not None, is shown as a "result" display output when it has a
# rich representation (a _repr_*_ method, a matplotlib figure), otherwise
# printed with repr(); display(*objs) sends display outputs; matplotlib
# figures left open at the cell's end come back as image/png and are
# closed (the Agg backend); top-level await works
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
# plimsolld when it ends); an uncaught exception or unhandled rejection
# while a cell runs makes it status 1.
#
# Only launch and cleanup are trusted with what they print; everything else
# here runs next to (or is) the guest's code.  The daemon accepts a report
# only when stdout is exactly what the mode prints and the exit code (from
# the engine) is 0.
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else ""


seccomp_filter()  # common.py
if MODE in ("launch", "cleanup", "interp", "vmcell"):
    NONDUMPABLE = nondumpable()

import json  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402

LANGS = ("python", "javascript")
UPLINK = "/run/plimsoll/cells.sock"
T_CODE, T_OUT, T_ERR, T_END, T_HELLO = b"C", b"O", b"E", b"X", b"H"
T_DISPLAY = b"D"
MAX_CODE = 64 << 20
UPLINK_FD, READY_FD = 3, 4


def say(obj):
    os.write(1, (json.dumps(obj, separators=(", ", ": ")) + "\n").encode())


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


# The /proc readers and end_all are procs.py's (the build puts it first).

# ---- main ----------------------------------------------------------------

# ---- launch --------------------------------------------------------------

def server_argv(lang):
    if lang == "python":
        # sys.orig_argv keeps the -c source, which sys.argv drops.
        src = sys.orig_argv[sys.orig_argv.index("-c") + 1]
        return ["python3", "-I", "-c", src, "interp", "python"]
    return ["node", "-e", NODE_SERVER]


def spawn_detached(argv, uplink_fd, ready_fd):
    """Double fork with setsid; the grandchild gets uplink_fd as fd 3 and
    ready_fd as fd 4, /dev/null for 0-2, nothing else.  Returns its pid."""
    r, w = os.pipe()
    first = os.fork()
    if first == 0:
        try:
            os.close(r)
            os.setsid()
            second = os.fork()
            if second == 0:
                try:
                    os.dup2(uplink_fd, 10)
                    os.dup2(ready_fd, 11)
                    os.dup2(10, UPLINK_FD)
                    os.dup2(11, READY_FD)
                    null = os.open("/dev/null", os.O_RDWR)
                    for fd in (0, 1, 2):
                        os.dup2(null, fd)
                    os.closerange(READY_FD + 1, 65536)
                    os.set_inheritable(UPLINK_FD, True)
                    os.set_inheritable(READY_FD, True)
                    os.chdir(os.environ.get("PLIMSOLL_WORK_DIR", "/work"))
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
        raise OSError("the interpreter could not be started")
    return int(data)


def start_interpreter(lang, uplink):
    """Start lang's interpreter detached with uplink as fd 3 (closed here),
    and wait until it serves cells: it writes one byte to fd 4 then.
    Returns its pid."""
    import select
    rr, rw = os.pipe()
    pid = spawn_detached(server_argv(lang), uplink.fileno(), rw)
    uplink.close()
    os.close(rw)
    ok = select.select([rr], [], [], 10.0)[0] and os.read(rr, 1) == b"1"
    os.close(rr)
    if not ok:
        raise OSError("the %s interpreter did not start within 10 s" % lang)
    return pid


def stop_others(me):
    """SIGSTOP every process but PID 1 and this one, rescanning until every
    one reads stopped (a stopped process can neither fork nor open
    anything).  A process whose threads /proc does not list is killed: it
    cannot be seen to stop.  Returns (the pids this call stopped, the pids
    found stopped already); raises when one does not stop within 2 s."""
    stopped, before, doomed = set(), set(), set()
    deadline = time.monotonic() + 2.0
    while True:
        running = []
        for p in list_pids():
            if p in (1, me):
                continue
            states = thread_states(p)
            if states is None:
                if alive(p):
                    doomed.add(p)
                    running.append(p)
                continue
            live = [t for t in states if t not in ("Z", "X", "x", "")]
            if live and all(t in ("T", "t") for t in live):
                if p not in stopped:
                    before.add(p)
            elif live:
                running.append(p)
        if not running:
            return stopped, before
        if time.monotonic() > deadline:
            raise OSError("processes did not stop for the launch: %s" % sorted(running)[:8])
        for p in running:
            try:
                os.kill(p, signal.SIGKILL if p in doomed else signal.SIGSTOP)
            except OSError:
                pass
            if p not in doomed:
                stopped.add(p)
        time.sleep(0.001)


def stream_ids():
    """(device, inode) of this process's stdio pipes and sockets (the exec's
    streams; /dev/null is nobody's secret)."""
    import stat
    ids = set()
    for fd in (0, 1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            ids.add((st.st_dev, st.st_ino))
    return ids


def end_holders(me, ids):
    """Kill every process (but PID 1 and this one) that holds a descriptor
    to one of ids, and wait until each is gone.  A process whose
    descriptors are refused to this one (Linux: another group, or not
    dumpable) was refused this one's as well."""
    holders = []
    for p in list_pids():
        if p in (1, me):
            continue
        try:
            fds = os.listdir("/proc/%d/fd" % p)
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat("/proc/%d/fd/%s" % (p, fd))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in ids:
                holders.append(p)
                break
    for p in holders:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + 2.0
    while any(alive(p) for p in holders):
        if time.monotonic() > deadline:
            raise OSError("processes holding the launcher's streams did not end")
        time.sleep(0.002)
    return holders


def launch_report(obj, stopped):
    """The launcher's last word: a newline (ending whatever a process wrote
    to this stream before it was stopped), then one JSON line; then no
    stream of this process is open, and what it stopped goes on."""
    os.write(1, b"\n" + (json.dumps(obj, separators=(", ", ": ")) + "\n").encode())
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    for p in stopped:
        try:
            os.kill(p, signal.SIGCONT)
        except OSError:
            pass
    os._exit(1 if "error" in obj else 0)


def mode_launch(args):
    dumpable_off, why = NONDUMPABLE
    stopped = set()
    try:
        if len(args) != 1 or args[0] not in LANGS:
            raise ValueError("usage: launch python|javascript")
        lang = args[0]
        me, group = os.getpid(), os.getgid()
        # What this interpreter's group left is no longer anyone's.  (gVisor
        # shows group 0 for a zombie leader whose other threads run: no
        # process here has group 0, so that reads as "maybe ours".)
        left = end_all(lambda p: p in (1, me) or proc_gid(p) not in (group, 0))
        if left:
            raise OSError("processes of the %s group could not be ended: %s" % (lang, left))
        # Everything else waits while the launch runs, and nothing may keep
        # this process's streams open past it (docs/sessions.md, "The
        # uplink"): what it wrote there before the stop comes before the
        # report, and nothing can come after it.
        stopped, _ = stop_others(me)
        killed = end_holders(me, stream_ids())
        stopped.difference_update(killed)
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        up.settimeout(5.0)
        up.connect(UPLINK)
        kind, challenge = recv_frame(up, 64)
        if kind != T_HELLO or not challenge:
            raise OSError("plimsolld sent no challenge on the cell socket")
        up.settimeout(None)
        pid = start_interpreter(lang, up)
        st = proc_stat(pid)
        if st is None or not alive(pid):
            raise OSError("the %s interpreter ended at startup" % lang)
        out = {"challenge": challenge.decode("ascii", "replace"), "pid": pid,
               "start": st[2], "dumpable": not dumpable_off}
        if why:
            out["dumpable_error"] = why
        launch_report(out, stopped)
    except Exception as e:  # noqa: BLE001
        launch_report({"error": (str(e) or type(e).__name__)[:500]}, stopped)


# ---- hosted VMs (e2b): no uplink to plimsolld -----------------------------
#
# A VM cannot reach plimsolld's cell socket, so there each cell is an envd
# process of its own (vmcell) that reaches the kept interpreter through a
# relay in the VM.  Both run as the session's user: the VM holds that one
# caller's code and nothing else of anyone's.  plimsolld knows an
# interpreter as kept only while its pid and start time, and its relay's,
# survive the root cleanup after each call (docs/providers/e2b.md, "Cells").

VM_NO_INTERPRETER, VM_CHANNEL_ENDED = 3, 4


def relay(lsock, up):
    """Pass one client of lsock at a time to up (the interpreter's end),
    bytes both ways; end when the interpreter's end closes.  Output the
    interpreter sends while no client is connected is dropped (plimsolld
    ends an interpreter whose cell did not finish cleanly)."""
    import select
    conn = None
    while True:
        watch = [up, conn if conn is not None else lsock]
        ready = select.select(watch, [], [])[0]
        if up in ready:
            data = up.recv(65536)
            if not data:
                os._exit(0)
            if conn is not None:
                try:
                    conn.sendall(data)
                except OSError:
                    conn.close()
                    conn = None
        if conn is None and lsock in ready:
            try:
                conn = lsock.accept()[0]
            except OSError:
                conn = None
        elif conn is not None and conn in ready:
            try:
                data = conn.recv(65536)
            except OSError:
                data = b""
            if not data:
                conn.close()
                conn = None
            else:
                up.sendall(data)


def mode_vmlaunch(args):
    try:
        if len(args) != 2 or args[0] not in LANGS or not args[1].isalnum():
            raise ValueError("usage: vmlaunch python|javascript NAME")
        lang, name = args
        os.environ["PLIMSOLL_WORK_DIR"] = os.getcwd()
        # An abstract socket: no file the guest could replace, and its name
        # (random, from plimsolld) cannot be taken before this bind.
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind("\0plimsoll-cell-" + name)
        lsock.listen(8)
        mine, theirs = socket.socketpair()
        pid = start_interpreter(lang, theirs)
        # The relay: detached as the interpreter is, holding both sockets.
        pr, pw = os.pipe()
        first = os.fork()
        if first == 0:
            try:
                os.close(pr)
                os.setsid()
                second = os.fork()
                if second == 0:
                    os.close(pw)
                    null = os.open("/dev/null", os.O_RDWR)
                    for fd in (0, 1, 2):
                        os.dup2(null, fd)
                    relay(lsock, mine)
                os.write(pw, str(second).encode())
            finally:
                os._exit(0)
        os.close(pw)
        data = os.read(pr, 64)
        os.close(pr)
        os.waitpid(first, 0)
        lsock.close()
        mine.close()
        rpid = int(data) if data else 0
        st, rst = proc_stat(pid), proc_stat(rpid) if rpid else None
        if st is None or rst is None or not alive(pid):
            raise OSError("the %s interpreter or its relay ended at startup" % lang)
        say({"pid": pid, "start": st[2], "relay": rpid, "relay_start": rst[2]})
        os._exit(0)
    except Exception as e:  # noqa: BLE001
        say({"error": str(e) or type(e).__name__})
        os._exit(1)


def mode_vmcell(args):
    """One cell: exit 0 or 1 as the interpreter's "X" says; VM_NO_INTERPRETER
    when nothing listens (no code was sent); VM_CHANNEL_ENDED when the
    channel ends before "X".  The interpreter's stdout goes to fd 1 as it
    is; its stderr ("E") and display outputs ("D") go to fd 2 as frames
    (a type byte, a 4-byte big-endian length, the bytes), relayed as they
    come (the daemon's pl_frames_in reads them)."""
    name, path = args
    with open(path, "rb") as f:
        code = f.read()
    status = b""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\0plimsoll-cell-" + name)
    except OSError:
        os._exit(VM_NO_INTERPRETER)
    try:
        s.sendall(frame(T_CODE, code))
        while True:
            head = recv_exact(s, 5)
            if head is None:
                break
            n = struct.unpack(">I", head[1:])[0]
            kind = head[:1]
            if kind in (T_ERR, T_DISPLAY):
                write_all(2, head)
            while n > 0:
                chunk = s.recv(min(n, 65536))
                if not chunk:
                    os._exit(VM_CHANNEL_ENDED)
                n -= len(chunk)
                if kind == T_OUT:
                    write_all(1, chunk)
                elif kind in (T_ERR, T_DISPLAY):
                    write_all(2, chunk)
                elif kind == T_END:
                    status += chunk[:8]
            if kind == T_END:
                os._exit(0 if status == b"0" else 1)
    except OSError:
        pass
    os._exit(VM_CHANNEL_ENDED)


# ---- the Python interpreter server ---------------------------------------

def mode_interp(args):
    import ast
    import base64
    import builtins
    import io
    import linecache
    import threading
    import traceback
    import types

    # Started isolated (-I, as every trusted program of plimsoll's: a module
    # a call left in /work is never imported by the agent's own code); the
    # cells then get what a plain `python3 -c` gives: the working directory
    # first on the path, the user's site packages when they exist, and the
    # environment's bytecode setting.
    import site
    sys.path.insert(0, "")
    if os.path.isdir(site.getusersitepackages()):
        site.addsitedir(site.getusersitepackages())
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    os.chdir(os.environ.get("PLIMSOLL_WORK_DIR", "/work"))  # the host test's override
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
    sys.excepthook = sys.__excepthook__  # the cells' interpreter is plain Python
    g = main.__dict__
    agent_file = sys._getframe().f_code.co_filename
    counter = [0]

    def show_exc(e):
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == agent_file:
            tb = tb.tb_next
        sys.stderr.write("".join(traceback.format_exception(type(e), e, tb)))

    # Display outputs (docs/sessions.md, "Display outputs"): a bundle per
    # object, as Jupyter's display_data.  matplotlib draws with Agg, its
    # cache in /tmp (the image's home is not writable).
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/.plimsoll-matplotlib")
    reprs = (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"),
             ("text/latex", "_repr_latex_"), ("image/svg+xml", "_repr_svg_"),
             ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"),
             ("application/json", "_repr_json_"))
    shown = set()  # the figures this cell displayed already

    def is_text(mime):
        return (mime.startswith("text/") or mime in ("application/json", "application/javascript",
                                                     "image/svg+xml")
                or mime.endswith("+json") or mime.endswith("+xml"))

    def figure_png(fig):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=fig.dpi)
        return buf.getvalue()

    def is_figure(obj):
        fm = sys.modules.get("matplotlib.figure")
        return fm is not None and isinstance(obj, fm.Figure)

    def encoded(mime, v):
        if isinstance(v, tuple) and v:
            v = v[0]  # (data, metadata)
        if is_text(mime):
            if isinstance(v, (bytes, bytearray)):
                v = bytes(v).decode("utf-8", "replace")
            elif not isinstance(v, str):
                v = json.dumps(v)
            return v.replace("\0", "\ufffd")
        if isinstance(v, str):
            v = base64.b64decode(v.encode("ascii", "replace"))  # checked, then re-encoded
        return base64.b64encode(bytes(v)).decode("ascii")

    def bundle(obj, rich_only=False):
        """The MIME bundle of obj, or None when rich_only and it has no
        representation beyond text/plain."""
        data = {}
        if is_figure(obj):
            shown.add(id(obj))
            data["image/png"] = figure_png(obj)
        elif not isinstance(obj, type):
            mb = getattr(obj, "_repr_mimebundle_", None)
            try:
                got = mb() if callable(mb) else None
            except Exception as e:  # noqa: BLE001 - the object's error, said
                sys.stderr.write("display: %s._repr_mimebundle_ raised %r\n"
                                 % (type(obj).__name__, e))
                got = None
            if isinstance(got, tuple) and got:
                got = got[0]
            if isinstance(got, dict):
                data.update((k, v) for k, v in got.items() if isinstance(k, str) and v is not None)
            for mime, meth in reprs:
                f = getattr(obj, meth, None)
                if mime in data or not callable(f):
                    continue
                try:
                    v = f()
                except Exception as e:  # noqa: BLE001
                    sys.stderr.write("display: %s.%s raised %r\n" % (type(obj).__name__, meth, e))
                    continue
                if v is not None:
                    data[mime] = v
        if rich_only and not [k for k in data if k != "text/plain"]:
            return None
        if "text/plain" not in data:
            data["text/plain"] = repr(obj)
        out = {}
        for mime, v in data.items():
            try:
                out[mime] = encoded(mime, v)
            except Exception as e:  # noqa: BLE001 - e.g. not base64, not bytes
                sys.stderr.write("display: %s's %s left out: %r\n" % (type(obj).__name__, mime, e))
        return out

    def send_display(data, kind="display"):
        msg = json.dumps({"kind": kind, "data": data}, separators=(",", ":")).encode()
        with lock:
            for r, k in reads.items():
                while forward(r, k):
                    pass
            conn = state["conn"]
            if conn is not None:
                try:
                    conn.sendall(frame(T_DISPLAY, msg))
                except OSError:
                    state["conn"] = None

    def display(*objs, raw=False):
        """Show each object as a display output (Jupyter's display():
        its _repr_*_ methods, a matplotlib figure as image/png).  With
        raw=True each object is a MIME bundle already: {type: data}."""
        for obj in objs:
            if raw:
                if not isinstance(obj, dict):
                    raise TypeError("display(raw=True) takes {mime type: data} dicts")
                send_display({k: encoded(k, v) for k, v in obj.items()})
            else:
                send_display(bundle(obj))

    builtins.display = display

    def open_figures():
        """Each figure pyplot holds, shown unless this cell displayed it
        already; then all closed."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            for num in plt.get_fignums():
                fig = plt.figure(num)
                if id(fig) not in shown:
                    send_display({"image/png": encoded("image/png", figure_png(fig)),
                                  "text/plain": encoded("text/plain", repr(fig))})
            plt.close("all")
        except Exception as e:  # noqa: BLE001 - the figure's error, said
            sys.stderr.write("display: an open figure could not be drawn: %r\n" % (e,))

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
                rich = bundle(value, rich_only=True)
                if rich is not None:
                    send_display(rich, "result")
                else:
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
        shown.clear()
        try:
            status = run(code.decode("utf-8", "replace"))
        except BaseException:  # noqa: BLE001 - e.g. an error printing the error
            status = 1
        if os.getpid() != me:  # the cell forked and this is the child
            os._exit(0)
        try:
            open_figures()
        except BaseException:  # noqa: BLE001
            pass
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

    # The uplink: the connection the launcher opened and greeted with, fd 3.
    # Cells arrive on it one at a time; when plimsolld closes it (a deadline,
    # the session's end), this interpreter ends.
    up = socket.socket(fileno=UPLINK_FD)
    os.write(READY_FD, b"1")
    os.close(READY_FD)
    while True:
        try:
            kind, code = recv_frame(up)
        except OSError:
            kind = None
        if kind != T_CODE:  # plimsolld closed it, or sent nonsense
            os._exit(0)
        serve(up, code)


# ---- cleanup -------------------------------------------------------------

def remove_sysv_ipc(last):
    """Remove every System V shared memory segment, semaphore set and
    message queue of the sandbox's IPC namespace.  Linux lists them in
    /proc/sysvipc; gVisor does not, and numbers each kind from 1 up: there,
    ids up to a fresh probe's (and up to `last`, the highest seen before)
    are tried.  Returns (removed, highest id seen)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    IPC_RMID, IPC_PRIVATE = 0, 0
    rm = {"shm": lambda i: libc.shmctl(i, IPC_RMID, None),
          "sem": lambda i: libc.semctl(i, 0, IPC_RMID),
          "msg": lambda i: libc.msgctl(i, IPC_RMID, None)}
    removed, high = 0, last
    if os.path.isdir("/proc/sysvipc"):
        for kind in ("shm", "sem", "msg"):
            with open("/proc/sysvipc/" + kind) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 1 and rm[kind](int(fields[1])) == 0:
                        removed += 1
        return removed, high
    make = {"shm": lambda: libc.shmget(IPC_PRIVATE, 4096, 0o600),
            "sem": lambda: libc.semget(IPC_PRIVATE, 1, 0o600),
            "msg": lambda: libc.msgget(IPC_PRIVATE, 0o600)}
    for kind in ("shm", "sem", "msg"):
        probe = make[kind]()
        if probe < 0:
            continue  # refused (the shipped seccomp profile): none can exist
        top = max(probe, last)
        high = max(high, probe)
        for i in range(0, top + 1):
            if i != probe and rm[kind](i) == 0:
                removed += 1
        rm[kind](probe)
    return removed, high


def remove_mqueues():
    """POSIX message queues, where the sandbox can list them (/dev/mqueue;
    the shipped seccomp profile refuses mq_open outright)."""
    removed = 0
    try:
        names = os.listdir("/dev/mqueue")
    except OSError:
        return 0
    for name in names:
        try:
            os.unlink("/dev/mqueue/" + name)
            removed += 1
        except OSError:
            pass
    return removed


def mode_cleanup(args):
    try:
        me = os.getpid()
        keep = {}
        for pid, start in json.loads(args[0] if args else "[]"):
            keep[int(pid)] = int(start)
        last_ipc = int(args[1]) if len(args) > 1 else 0

        spared = kept_only(keep, me)
        left = end_all(spared)
        kept_alive = [[p, s] for p, s in sorted(keep.items()) if spared(p) and alive(p)]
        # Dead but not yet reaped (a kept interpreter's child it has not
        # waited for): gVisor's process list, which the host reads, still
        # shows them, and only this kernel's view tells them from the living.
        dead = [p for p in list_pids() if not spared(p) and not alive(p)]
        ipc_removed, ipc_last = remove_sysv_ipc(last_ipc)
        ipc_removed += remove_mqueues()
        st = os.statvfs("/work")
        tmp = os.statvfs("/tmp")
        say({"clean": not left, "left": left, "alive": kept_alive, "dead": dead,
             "work_used": (st.f_blocks - st.f_bfree) * st.f_frsize,
             "work_size": st.f_blocks * st.f_frsize,
             "tmp_used": (tmp.f_blocks - tmp.f_bfree) * tmp.f_frsize,
             "ipc_removed": ipc_removed, "ipc_last": ipc_last})
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
    if MODE == "launch":
        mode_launch(args)
    elif MODE == "cleanup":
        mode_cleanup(args)
    elif MODE == "ps":
        mode_ps(args)
    elif MODE == "vmlaunch":
        mode_vmlaunch(args)
    elif MODE == "vmcell" and len(args) == 2:
        mode_vmcell(args)
    elif MODE == "interp" and len(args) == 1 and args[0] == "python":
        mode_interp(args)
    else:
        os.write(2, b"plimsoll: unknown mode\n")
        os._exit(64)


entry()
