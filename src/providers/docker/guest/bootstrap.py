# SPDX-License-Identifier: Apache-2.0
# plimsoll's in-container bootstrap (docs/providers/docker.md).
#
# plimsolld starts every container with `python3 -c <this file>` and writes
# to the container's stdin: the length of a JSON header on one line, the
# header, then the payload's bytes, then (snippets) the guest's stdin.  This
# file is compiled into plimsolld after common.py (the seccomp installer,
# nondumpable, the stdin readers).
#
#   snippet  write the code to /tmp, start the interpreter on it (or, in
#            a warm container, hand it to the waiting one) and stay
#            PID 1 (supervise); fd 0 is left at the first byte of the guest's
#            stdin, fds 1 and 2 are the container's, so the daemon reads the
#            guest's output directly.  When the guest's main process ends,
#            every other process is killed and reaped, then both streams get
#            the end marker: the header's nonce and the exit status.
#   project  write the files into /work, report one "PLIMSOLL <json>" line
#            on stdout ({"setup": "ok"} or {"setup_failed": why}), then run
#            the steps the daemon sends on stdin, one at a time: each is
#            started by this process, and when it ends every other process
#            is killed and reaped before both streams get the step's end
#            marker (its own nonce and the step's exit status).
#   files    a session's project call: write the files, exit 0 (3 and the
#            reason on stderr when they cannot be written).
#   read     a session's ReadFile: one regular file of /work, reached
#            without following a symlink; "PLIMSOLL {"size": N}" and the
#            bytes asked for on stdout, or an exit code that names the rule
#            it broke (FILE_RULES).
#   list     a session's ListFiles: one JSON line an entry, then
#            "PLIMSOLL {"truncated": B}"; the same rules.
#   collect  a project's collect globs, after its steps: per file matched a
#            JSON line and its first bytes, then "PLIMSOLL {"truncated": B}".
#   probe    the startup proof: report what this container can see and do.
#
# Everything here runs inside the sandbox as the unprivileged user; the
# daemon judges what it reports and never trusts it for the wall itself.
import json
import sys


seccomp_filter()  # common.py


def need(data):
    """What a stdin reader returned, or the end of this process (70) when
    the daemon's stream ended early or broke a bound."""
    if data is None:
        os._exit(70)
    return data


def emit(obj):
    os.write(1, b"PLIMSOLL " + json.dumps(obj, separators=(",", ":")).encode() + b"\n")


def b64(data):
    import base64
    return base64.b64encode(data).decode()


import signal  # noqa: E402 - supervise's, loaded while the container waits
import ctypes  # noqa: E402,F401 - steps_common.py's, likewise
import resource  # noqa: E402,F401 - steps_common.py's, likewise
import select  # noqa: E402 - the later steps' waiters', likewise
import socket  # noqa: E402
import time  # noqa: E402,F401 - procs.py's end_all sleeps with it


def start_child(start):
    """Run start() in a child process (it does not return); the child's
    pid.  Signals are blocked here first, as supervise needs."""
    sigs = signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    pid = os.fork()
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        start()
        os._exit(70)
    return pid


def end_every():
    """Kill every process of this pid namespace but this one and reap them
    all: when waitpid says there is no child left, nothing else lives (every
    process here descends from PID 1 or was handed to it)."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def supervise(pid, end, stay=False):
    """Stay PID 1 while the guest's main process, pid, runs
    (docs/providers/docker.md, "The run's end").  When it ends, kill and
    reap every other process of this pid namespace; only then write the end
    marker (the header's nonce and the status) to both streams, and exit
    with the guest's status (stay: the header's "hold", until the daemon
    ends the container).  Nothing of the guest can write after the
    marker: nothing of it lives.  The marker only says where the streams
    end: the daemon still kills the container's cgroup and reads its OOM
    count from the host before it answers."""
    sigs = signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    code = 70
    while True:
        got, st = os.waitpid(-1, 0)
        if got == pid:
            code = status_code(st)
            break
    end_every()
    mark_end(end, code)
    if stay:
        # The header's "hold": the daemon reads the run's collect globs
        # now (nothing of the guest lives), then ends the container.
        hold()
    os._exit(code)


def exec_guest(argv):
    """A start for start_child: exec argv (127 when it cannot be)."""
    def start():
        try:
            os.execvp(argv[0], argv)
        except OSError as e:
            os.write(2, ("plimsoll: %s: %s\n" % (argv[0], e.strerror)).encode())
        os._exit(127)
    return start


# ---- the waiting interpreters (docs/providers/docker.md, "The run's end") --
#
# A warm container's bootstrap (started with the argument "waiters") starts
# one interpreter per language before any header arrives: each is the
# ordinary python3 or node, started by exec, and waits for one word on its
# fd 3.  A snippet's language is handed "go" once its code is in /tmp;
# every other waiter is killed first.  A waiter never sees the header (nor
# the end marker's nonce); the guest's stdin is fd 0, shared and left at
# the guest's first byte.  The run then costs no interpreter start.

MAIN_PY = "/tmp/.plimsoll-main.py"
MAIN_JS = "/tmp/.plimsoll-main.js"
WAIT_JS_PATH = "/tmp/.plimsoll-wait.js"

# The waiting interpreters: WAIT_PY (wait_main.py) and WAIT_JS
# (wait_main.js), put before this file by scripts/build/embed.


def spawn_waiters():
    """Start the waiting interpreters: {language: (pid, the go pipe)}.
    One that cannot start is left out (its language execs as before)."""
    waiters = {}
    try:
        with open(WAIT_JS_PATH, "w") as f:
            f.write(WAIT_JS)
    except OSError:
        pass
    for lang, argv in (("python", ["python3", "-c", WAIT_PY]), ("javascript", ["node", WAIT_JS_PATH])):
        r, w = os.pipe()
        if r == 3:  # the child's dup2 onto itself would keep close-on-exec
            r, old = os.dup(r), r
            os.close(old)
        try:
            pid = os.posix_spawnp(argv[0], argv, os.environ,
                                  file_actions=[(os.POSIX_SPAWN_DUP2, r, 3)])
            waiters[lang] = (pid, w)
        except OSError:
            os.close(w)
        os.close(r)
    return waiters


def end_waiters(waiters):
    """Kill the waiters not used (supervise reaps them)."""
    for pid, w in waiters.values():
        os.close(w)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    waiters.clear()


def hand_over(waiter):
    """Say "go" to a waiter: its pid, or None when it is gone (then the
    guest is started by exec)."""
    pid, w = waiter
    try:
        os.write(w, b"go")
    except OSError:
        pid = None
    os.close(w)
    return pid


def snippet(h, waiters):
    code = need(read_exact(h["code_len"]))
    path = MAIN_PY if h["language"] == "python" else MAIN_JS
    with open(path, "wb") as f:
        f.write(code)
    argv = ["python3", path] if path == MAIN_PY else ["node", path]
    # Only as its own container's PID 1 (never in a session's exec, where
    # ending every other process would end the session's).
    if "end" not in h or os.getpid() != 1:
        os.execvp(argv[0], argv)
    waiter = waiters.pop(h["language"], None)
    end_waiters(waiters)
    pid = hand_over(waiter) if waiter else None
    supervise(pid or start_child(exec_guest(argv)), h.pop("end"), h.get("hold", False))


def module(h):
    wasm = need(read_exact(h["wasm_len"]))
    with open("/tmp/.plimsoll-module.wasm", "wb") as f:
        f.write(wasm)
    runner = (
        "const { WASI } = require('node:wasi');"
        "const fs = require('node:fs');"
        "const wasi = new WASI({ version: 'preview1', args: ['module', ...JSON.parse(process.env.PLIMSOLL_ARGS)],"
        " env: {}, preopens: {}, returnOnExit: true });"
        "const m = new WebAssembly.Module(fs.readFileSync('/tmp/.plimsoll-module.wasm'));"
        "const i = new WebAssembly.Instance(m, wasi.getImportObject ? wasi.getImportObject() :"
        " { wasi_snapshot_preview1: wasi.wasiImport });"
        "process.exitCode = wasi.start(i);"
    )
    with open("/tmp/.plimsoll-module.js", "w") as f:
        f.write(runner)
    os.environ["PLIMSOLL_ARGS"] = json.dumps(h.get("args", []))
    argv = ["node", "--no-warnings", "--experimental-wasi-unstable-preview1",
            "/tmp/.plimsoll-module.js"]
    if "end" not in h or os.getpid() != 1:
        os.execvp(argv[0], argv)
    supervise(start_child(exec_guest(argv)), h.pop("end"))


class SetupError(Exception):
    """A file of the request cannot be written; the message says why."""


def write_work_file(rel, data):
    """Write /work/rel without following a symlink on the way: in a session
    an earlier call may have left one there."""
    import stat
    parts = parts_of(rel)
    if parts is None:
        raise SetupError("refused file path %r: relative paths inside /work only" % (rel,))
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    dfd = os.open("/work", flags_dir)
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
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    except OSError as e:
        if e.errno in (40, 20):  # ELOOP, ENOTDIR: a symlink or a file on the way
            raise SetupError("refused file path %r: a symlink or a file is in the way" % (rel,))
        raise SetupError("%s: %s" % (rel, e.strerror or e))
    finally:
        os.close(dfd)


def write_files(h):
    """The request's files into /work, in order; SetupError says what failed.
    Every file's bytes are read from stdin even after a failure."""
    error = None
    for f in h["files"]:
        data = need(read_exact(f["len"]))
        if error is None:
            try:
                write_work_file(f["path"], data)
            except SetupError as e:
                error = str(e)
    if error is not None:
        raise SetupError(error)


def work_dir(parts):
    """An fd of the directory /work/parts..., and /work's device."""
    dfd = os.open("/work", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    dev = os.fstat(dfd).st_dev
    try:
        for p in parts:
            nfd = open_dir_at(dfd, p, dev)
            os.close(dfd)
            dfd = nfd
    except BaseException:
        os.close(dfd)
        raise
    return dfd, dev


def file_call(fn, h):
    """Run a file call; its rule's exit code when it broke one
    (workfiles.py's FILE_RULES, which the daemon maps to its own
    sentences: nothing the reader found travels but the code)."""
    try:
        fn(h)
    except FileRule as e:
        os._exit(e.code)
    except OSError as e:
        os._exit(rule_code(e))
    os._exit(0)


def read_file(h):
    parts = parts_of(h.get("path"))
    if parts is None:
        raise FileRule("other")
    dfd, dev = work_dir(parts[:-1])
    read_at(dfd, dev, parts[-1], h["offset"], h["limit"])


def list_files(h):
    path = h.get("path") or ""
    parts = parts_of(path) if path else []
    if parts is None:
        raise FileRule("other")
    top, dev = work_dir(parts)
    list_at(top, dev, os.fsencode(path + "/") if path else b"", h["depth"], h["entries"])


def collect(h):
    """A run's collect globs, from /work (workfiles.py)."""
    top, dev = work_dir([])
    collect_from(top, dev, h)


def hold():
    """Stay PID 1 with nothing to do (the files could not be written):
    give up stdin and the output streams, take no signal, reap orphans."""
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    sigs = signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        signal.sigtimedwait({signal.SIGCHLD}, 1.0)


def run_steps(token, waiters):
    """The project's steps (docs/providers/docker.md, "A project"): read a
    step from stdin, start it, and once it ended, end everything else
    before its end marker goes to both streams.  The daemon sends a step
    only after the previous step's marker, and (runc) after the host saw
    this container's cgroup hold this process alone (and the later steps'
    waiters): no guest process lives while a step's command, its nonce
    among it, is on stdin, and what a guest wrote there before is dropped
    before the marker.  A command without the project's token ends the
    sandbox: 71."""
    # /work (the project's files, the guest's) is never searched for a
    # module: plimsolld runs this file as `python3 -I -c`.
    # The steps' waiters (step_wait.py, "The steps wait"): the first step
    # goes to its own; a later python3 step to a later one that is intact.
    first = waiters.pop("step", None)
    later = ready_later(waiters)
    held = inherited()  # steps_common.py; as serve_steps takes it

    def start(argv, env):
        nonlocal first
        if first is not None:
            waiter, first = first, None
            return hand_step(waiter, argv, env)
        return hand_later(later, held, argv, env)

    def end_others():
        if later:
            end_all_but(later)
        else:
            end_every()

    serve_steps(token, end_others, start)  # steps_common.py


def project(h, waiters):
    # The steps run here, each started by this process, which then ends
    # everything else before it writes the step's end marker; the files
    # report comes first, before any guest code exists
    # (docs/providers/docker.md, "A project").
    nondumpable()
    try:
        write_files(h)
    except SetupError as e:
        emit({"setup_failed": str(e)})
        end_waiters(waiters)
        hold()
    emit({"setup": "ok"})
    if "token" not in h or os.getpid() != 1:
        end_waiters(waiters)
        hold()
    run_steps(h.pop("token"), waiters)


def files(h):
    # A session's project call: write the files, exit 0; 3 with the reason
    # on stderr when they cannot be written.  The exit code is the engine's.
    try:
        write_files(h)
    except SetupError as e:
        os.write(2, (str(e) + "\n").encode())
        os._exit(3)
    os._exit(0)


# The display kinds the session image can give a Python cell (the header's
# "display": the session image's probe only): matplotlib drawing with Agg
# through pyplot, and pandas, each imported by the cells' python3 as the
# sandbox user.  One JSON line: each name and null, or why it failed.
DISPLAY_CHECK = """
import json


def mpl():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot


found = {}
for name, how in (("matplotlib", mpl), ("pandas", lambda: __import__("pandas"))):
    try:
        how()
        found[name] = None
    except Exception as e:
        found[name] = ("%s: %s" % (type(e).__name__, e))[:200]
print(json.dumps(found))
"""


def display_start(h):
    """The display check started beside the rest of the probe; None when
    the header does not ask for it, or what it found when neither library
    is there to import (no interpreter started for nothing)."""
    if not h.get("display"):
        return None
    import importlib.util
    names = ("matplotlib", "pandas")
    missing = {n: "ModuleNotFoundError: No module named '%s'" % n for n in names
               if importlib.util.find_spec(n) is None}
    if len(missing) == len(names):
        return missing
    import subprocess
    import tempfile
    try:
        env = dict(os.environ, MPLBACKEND="Agg", MPLCONFIGDIR=tempfile.mkdtemp(dir="/tmp"))
        return subprocess.Popen(["python3", "-c", DISPLAY_CHECK], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
    except OSError as e:
        return {n: str(e)[:200] for n in names}


def display_end(started, report):
    """The display check's answer into report["display"] (name: true or
    false) and report["display_errors"] (name: why)."""
    import subprocess
    if started is None:
        return
    names = ("matplotlib", "pandas")
    if isinstance(started, dict):
        found = started
    else:
        try:
            out, err = started.communicate(timeout=30)
            found = json.loads(out.decode().strip().splitlines()[-1])
        except subprocess.TimeoutExpired:
            started.kill()
            started.wait()
            found = {n: "timed out" for n in names}
        except (ValueError, IndexError):
            why = "exit %d: %s" % (started.returncode, err.decode(errors="replace")[-200:])
            found = {n: why for n in names}
    report["display"] = {n: n in found and found[n] is None for n in names}
    report["display_errors"] = {n: found.get(n) or "not reported" for n in names
                                if not report["display"][n]}


def probe(h):
    import subprocess
    display = display_start(h)
    report = {"mountinfo": open("/proc/self/mountinfo").read(),
              "status": open("/proc/self/status").read(),
              "version": open("/proc/version").read(), "uid": os.getuid(), "sizes": {},
              "writes": {}, "exec": {}, "socket": ""}
    for d in h["tmpfs"]:
        st = os.statvfs(d)
        report["sizes"][d] = st.f_blocks * st.f_frsize
    targets = list(h["write_targets"])
    for line in report["mountinfo"].splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] not in targets:
            targets.append(fields[4])
    for d in targets:
        path = os.path.join(d, ".plimsoll-probe")
        try:
            with open(path, "w") as f:
                f.write("x")
            os.unlink(path)
            report["writes"][d] = "written"
        except OSError as e:
            report["writes"][d] = e.strerror or "refused"
    for d in h["tmpfs"]:
        path = os.path.join(d, ".plimsoll-true")
        try:
            with open("/bin/true", "rb") as src, open(path, "wb") as dst:
                dst.write(src.read())
            os.chmod(path, 0o755)
            r = subprocess.run([path])
            report["exec"][d] = "ran, exit %d" % r.returncode
        except OSError as e:
            report["exec"][d] = e.strerror or "refused"
    # Each interpreter must start and run a thread (node starts its own).
    report["interpreters"] = {}
    report["interpreter_errors"] = {}
    checks = (("python", ["python3", "-c", "import sys, threading; t = threading.Thread("
                          "target=len, args=('',)); t.start(); t.join(); "
                          "print('Python ' + sys.version.split()[0])"]),
              ("javascript", ["node", "-e", "console.log('node ' + process.version)"]))
    for name, argv in checks:
        try:
            r = subprocess.run(argv, capture_output=True, timeout=20)
            if r.returncode == 0:
                report["interpreters"][name] = r.stdout.decode().strip()
            else:
                report["interpreter_errors"][name] = r.stderr.decode(errors="replace")[:300]
        except (OSError, subprocess.SubprocessError) as e:
            report["interpreter_errors"][name] = str(e)[:300]
    if h.get("socket"):
        import socket
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(h["socket"])
            s.sendall(b"GET /ping HTTP/1.1\r\nHost: plimsoll\r\n\r\n")
            answer = b""
            while len(answer) < 4096:
                chunk = s.recv(4096)
                if not chunk:
                    break
                answer += chunk
            s.close()
            head, _, body = answer.partition(b"\r\n\r\n")
            report["socket"] = (body if head.startswith(b"HTTP/1.1 200") else
                                b"refused: " + head[:64]).decode(errors="replace")
        except OSError as e:
            report["socket"] = "error: " + (e.strerror or str(e))
    display_end(display, report)
    emit(report)


def step_exec(argv):
    """A project step under runsc (the filter is in place): exec argv
    exactly; a program that does not exist exits 127."""
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        os.write(2, ("plimsoll: %s: %s\n" % (argv[0], e.strerror)).encode())
        os._exit(127 if e.errno == 2 else 126)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "exec":
        step_exec(sys.argv[2:])
    # Made non-dumpable while the container waits, so a run does not wait
    # for it (supervise needs it; project does it again).
    nondumpable()
    # A warm container's: the interpreters (a snippet's) or the first step
    # (a project's) wait while the container does.
    waiters = {}
    if sys.argv[1:] == ["waiters"] and os.getpid() == 1:
        waiters = spawn_waiters()
    elif sys.argv[1:] == ["step"] and os.getpid() == 1:
        waiters = spawn_step_waiters()
    # The header's length on a line of its own, then the header: only those
    # few digits are read a byte at a time (each read is a system call, and
    # under gVisor a costly one).
    n = int(need(read_line(16)))
    h = json.loads(need(read_exact(n)))
    kind = h["kind"]
    if kind == "snippet":
        snippet(h, waiters)  # does not return
    if kind == "project":
        project(h, waiters)
    end_waiters(waiters)
    handler = {"module": module, "files": files, "probe": probe,
               "read": lambda h: file_call(read_file, h),
               "list": lambda h: file_call(list_files, h),
               "collect": lambda h: file_call(collect, h)}.get(kind)
    if handler is None:
        os._exit(70)
    handler(h)


main()
