# plimsoll's in-container bootstrap (docs/providers/docker.md).
#
# plimsolld starts every container with `python3 -c <this file>` and writes
# to the container's stdin: the length of a JSON header on one line, the
# header, then the payload's bytes, then (snippets) the guest's stdin.  This file is compiled into plimsolld.
#
#   snippet  write the code to /tmp, exec the interpreter; fd 0 is left at
#            the first byte of the guest's stdin, fds 1 and 2 are the
#            container's, so the daemon reads the guest's output directly.
#   project  write the files into /work, run the steps in order (stop on
#            the first failure), capturing each step's output up to the cap,
#            and report one "PLIMSOLL <json>" line per step on stdout.
#   probe    the startup proof: report what this container can see and do.
#
# Everything here runs inside the sandbox as the unprivileged user; the
# daemon judges what it reports and never trusts it for the wall itself.
import json
import os


def read_exact(n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(0, n - len(buf))
        if not chunk:
            os._exit(70)
        buf += chunk
    return bytes(buf)


def read_line(limit=1 << 22):
    buf = bytearray()
    while True:
        c = os.read(0, 1)
        if not c or c == b"\n":
            return bytes(buf)
        buf += c
        if len(buf) > limit:
            os._exit(70)


def emit(obj):
    os.write(1, b"PLIMSOLL " + json.dumps(obj, separators=(",", ":")).encode() + b"\n")


def b64(data):
    import base64
    return base64.b64encode(data).decode()


def snippet(h):
    code = read_exact(h["code_len"])
    ext = ".py" if h["language"] == "python" else ".js"
    path = "/tmp/.plimsoll-main" + ext
    with open(path, "wb") as f:
        f.write(code)
    argv = ["python3", path] if ext == ".py" else ["node", path]
    os.execvp(argv[0], argv)


def module(h):
    wasm = read_exact(h["wasm_len"])
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
    os.execvp("node", ["node", "--no-warnings", "--experimental-wasi-unstable-preview1",
                       "/tmp/.plimsoll-module.js"])


def capture(stream, cap, box):
    kept = bytearray()
    total = 0
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        total += len(chunk)
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
    box.append((bytes(kept), total > cap))


def project(h):
    import subprocess
    import threading
    import time
    cap = h["output_bytes"]
    try:
        for f in h["files"]:
            data = read_exact(f["len"])
            path = os.path.join("/work", f["path"])
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(data)
    except OSError as e:
        emit({"setup_failed": "%s: %s" % (getattr(e, "filename", "") or "", e.strerror)})
        return
    emit({"setup": "ok"})
    for i, step in enumerate(h["steps"]):
        t0 = time.monotonic()
        try:
            p = subprocess.Popen(step, cwd="/work", stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            emit({"step": i, "exit_code": 127, "stdout": "", "stderr":
                  b64(("plimsoll: %s: %s\n" % (step[0], e.strerror)).encode()),
                  "stdout_truncated": False, "stderr_truncated": False,
                  "duration_ms": int((time.monotonic() - t0) * 1000)})
            break
        out, err = [], []
        ts = [threading.Thread(target=capture, args=(p.stdout, cap, out)),
              threading.Thread(target=capture, args=(p.stderr, cap, err))]
        for t in ts:
            t.start()
        rc = p.wait()
        for t in ts:
            t.join()
        if rc < 0:
            rc = 128 - rc
        emit({"step": i, "exit_code": rc, "stdout": b64(out[0][0]), "stderr": b64(err[0][0]),
              "stdout_truncated": out[0][1], "stderr_truncated": err[0][1],
              "duration_ms": int((time.monotonic() - t0) * 1000)})
        if rc != 0:
            break
    emit({"done": True})


def probe(h):
    import subprocess
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
            s.sendall(b"ping\n")
            report["socket"] = s.recv(64).decode(errors="replace")
            s.close()
        except OSError as e:
            report["socket"] = "error: " + (e.strerror or str(e))
    emit(report)


def main():
    # The header's length on a line of its own, then the header: only those
    # few digits are read a byte at a time (each read is a system call, and
    # under gVisor a costly one).
    n = int(read_line(limit=16))
    h = json.loads(read_exact(n))
    kind = h["kind"]
    if kind == "snippet":
        snippet(h)
    elif kind == "module":
        module(h)
    elif kind == "project":
        project(h)
    elif kind == "probe":
        probe(h)
    else:
        os._exit(70)


main()
