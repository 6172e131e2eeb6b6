# SPDX-License-Identifier: Apache-2.0
# plimsoll's guest-side common part (docs/providers/docker.md, "Guest
# scripts").  The build puts this file first in both scripts compiled into
# plimsolld (bootstrap.py, session_agent.py), so what they share is written
# once.  It imports only os: it runs before the seccomp filter is in place,
# where the less that runs the better.
import os


def seccomp_filter():
    """Under runsc, gVisor gives an exec no seccomp filter: plimsoll passes
    the profile, compiled, in PLIMSOLL_SECCOMP_BPF, and it is installed here
    before anything of the guest's runs (a process started later inherits
    it).  A failure ends this process with status 125 before any guest
    code."""
    b64 = os.environ.pop("PLIMSOLL_SECCOMP_BPF", None)
    if not b64:
        return
    try:
        import base64
        import ctypes
        prog = base64.b64decode(b64)
        buf = ctypes.create_string_buffer(prog, len(prog))

        class Fprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
        fp = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
        libc = ctypes.CDLL(None, use_errno=True)
        # PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP with SECCOMP_MODE_FILTER.
        if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fp), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl")
    except Exception as e:  # noqa: BLE001 - nothing of the guest's may run unfiltered
        os.write(2, ("plimsoll: the seccomp filter could not be installed: %s\n" % e).encode())
        os._exit(125)


def nondumpable():
    """Make this process non-dumpable, so a process of the same uid cannot
    open its descriptors or memory through /proc (Linux; gVisor checks the
    group) and forge what it reports.  (True, None) when it holds, else
    (False, why); never fatal."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return False, "prctl: errno %d" % ctypes.get_errno()
        return libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0, None
    except Exception as e:  # noqa: BLE001 - reported instead
        return False, "prctl: %s" % e


# ---- the stdin readers: what the daemon writes to an exec's stdin ----------

def read_exact(n, fd=0):
    """Exactly n bytes from fd, or None when it ends first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_line(limit, fd=0):
    """The bytes before the next newline (or before the end of fd), read
    one at a time so nothing after the line is consumed; None when more
    than limit bytes come without a newline."""
    buf = bytearray()
    while True:
        c = os.read(fd, 1)
        if not c or c == b"\n":
            return bytes(buf)
        buf += c
        if len(buf) > limit:
            return None


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
