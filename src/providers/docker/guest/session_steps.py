# SPDX-License-Identifier: Apache-2.0
# A session's project call (docs/sessions.md, "A project call"): one exec
# of this program, as the calls' group, runs all of the call's steps.
# plimsolld runs it as `python3 -I -c <this file>`, compiled in after
# common.py, steps_common.py and procs.py; it is apart from the
# session agent so that its start (the exec's Python, the imports, the
# source to compile) is what a runner needs and no more.
#
# stdin: the length of a JSON header on one line, the header ({"token",
# "keep": [[pid, start], ...]}: the kept interpreters), then the steps,
# each as a project's bootstrap takes them (steps_common.py).  Each is
# started here; once it ended, every process but PID 1, this one and the
# kept ones is stopped and killed (the cleanup's end_all) before the step's
# end marker goes to both streams.  Exits 0 when stdin ends; 70 on a bad
# header; 71 on a command without the token; 72 when a step's processes
# could not be ended (no marker: the daemon gives no result for it); 73
# when the commands' socket cannot be reached.
#
# This process is not dumpable and its group is the calls': under runc
# neither a step (not dumpable) nor a kept interpreter (another group) can
# open its descriptors, so the next step's command, its nonce among it, is
# read here alone; the daemon sends it only after the host saw the
# container hold nothing but PID 1, this process and the kept interpreters.
# Under runsc any process of the sandbox's uid can open another's pipes, so
# the commands come on a socket instead (gVisor does not reopen one through
# /proc): with an argument, the path of a socket plimsolld listens on for
# this call alone, which only the calls' group may connect to; the
# connection becomes stdin.
import ctypes  # noqa: F401 - steps_common.py's put_back, with resource
import json
import resource  # noqa: F401
import signal
import socket
import sys
import time  # noqa: F401 - procs.py's end_all sleeps with it

seccomp_filter()  # common.py
nondumpable()  # common.py
if len(sys.argv) > 1:
    try:
        _conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _conn.connect(sys.argv[1])
        os.dup2(_conn.fileno(), 0)
        _conn.close()
    except OSError:
        os._exit(73)


def main():
    n = read_line(16)
    try:
        h = json.loads(read_exact(int(n)))
        token = h["token"]
        keep = {int(p): int(s) for p, s in h["keep"]}
    except (ValueError, KeyError, TypeError):
        os._exit(70)
    spared = kept_only(keep, os.getpid())  # procs.py

    def end_others():
        left = end_all(spared)  # procs.py; PID 1 reaps what it killed
        if left:
            write_all(2, ("plimsoll: processes of the step could not be ended: %s\n"
                          % sorted(left)[:8]).encode())
            os._exit(72)

    serve_steps(token, end_others)  # steps_common.py


main()
