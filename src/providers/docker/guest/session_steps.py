# SPDX-License-Identifier: Apache-2.0
# A session's project call (docs/sessions.md, "A project call"): one exec
# of this program, as the calls' group, runs all of the call's steps.
# plimsolld runs it as `python3 -I -c <this file>`, compiled in after
# common.py, steps_common.py and procs.py; it is apart from the
# session agent so that its start (the exec's Python, the imports, the
# source to compile) is what a runner needs and no more.
#
# Its commands come on a socket, never on a pipe: under runsc any process
# of the sandbox's uid can open another's pipes whatever its group, and
# gVisor does not reopen a socket through /proc.  The first argument is the
# path of the socket plimsolld listens on for this runner alone (root's,
# the calls' group, 0660: the kept interpreters, another group, cannot
# connect); the connection becomes fd 0.  The second is how many python3
# steps' waiters to start (step_waiters.py; "The steps wait" in
# docs/providers/docker.md), at most MAX_WAITERS: they start first thing,
# before the runner connects.  The runner then writes its pid and start
# time there, and each waiter's ("PID START [PID START]...\n"): plimsolld
# spares them by those in the cleanup between calls, since a runner may be
# started by one cleanup and wait for the next project call
# (docs/sessions.md, "A waiting runner").
#
# Then, on fd 0: the length of a JSON header on one line, the header
# ({"token", "keep": [[pid, start], ...]}: the kept interpreters), then the
# steps, each as a project's bootstrap takes them (steps_common.py).  Each
# is started here (a python3 step by a waiter that is ready and intact);
# once it ended, every process but PID 1, this one, the unused waiters and
# the kept interpreters is stopped and killed (the cleanup's end_all)
# before the step's end marker goes to both streams.  Exits 0 when fd 0
# ends; 70 on a bad header; 71 on a command without the token; 72 when a
# step's processes could not be ended (no marker: the daemon gives no
# result for it); 73 when the socket cannot be reached.
#
# This process is not dumpable and its group is the calls': neither a step
# (not dumpable) nor a kept interpreter can open its descriptors or read
# its memory, so the next step's command, its nonce among it, is read here
# alone.
import ctypes  # noqa: F401 - steps_common.py's put_back, with resource
import json
import resource  # noqa: F401
import select  # noqa: F401 - step_waiters.py's
import signal
import socket
import sys
import time  # noqa: F401 - procs.py's end_all sleeps with it

MAX_WAITERS = 3  # DK_STEP_WAITERS (docker_int.h)
WAITERS_READY_S = 1.0  # how long the first step waits for them to be ready, in all

seccomp_filter()  # common.py
nondumpable()  # common.py
try:
    _WAITERS = spawn_step_waiters(first=False, count=min(int(sys.argv[2]), MAX_WAITERS))
    _said = [(os.getpid(), proc_stat(os.getpid())[2])]  # procs.py
    for _pid, _fd in list(_WAITERS.values()):
        _st = proc_stat(_pid)
        if _st is not None:
            _said.append((_pid, _st[2]))
    _conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _conn.connect(sys.argv[1])
    os.dup2(_conn.fileno(), 0)
    _conn.close()
    write_all(0, (" ".join("%d %d" % p for p in _said) + "\n").encode())
except (OSError, IndexError, TypeError, ValueError):
    os._exit(73)


def main():
    n = read_line(16)
    try:
        h = json.loads(read_exact(int(n)))
        token = h["token"]
        keep = {int(p): int(s) for p, s in h["keep"]}
    except (ValueError, KeyError, TypeError):
        os._exit(70)
    later = {}
    held = inherited()  # steps_common.py; as serve_steps takes it

    def start(argv, env):
        if _WAITERS:
            later.update(ready_later(_WAITERS, WAITERS_READY_S))  # empties _WAITERS
        return hand_later(later, held, argv, env)  # step_waiters.py

    def end_others():
        end_all_but(later, keep)  # step_waiters.py; PID 1 reaps what it killed

    serve_steps(token, end_others, start)  # steps_common.py


main()
