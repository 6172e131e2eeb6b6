# SPDX-License-Identifier: Apache-2.0
# The steps' waiters (docs/providers/docker.md, "The steps wait"), shared by
# a project container's bootstrap and a session's step runner: the build
# puts this file after common.py, steps_common.py, procs.py and WAIT_STEP
# (step_wait.py) in both.  The program imports select, signal, socket and
# time before any guest code exists.


LATER_WAITERS = 2


def spawn_step_waiters(first=True, count=LATER_WAITERS):
    """Start the steps' waiters (step_wait.py, put before this file as
    WAIT_STEP) as serve_steps starts a step, each with its fd 3: the first
    step's ("step": a pipe; not when first is false) and count for the
    later python3 steps ("later0", ...: a socket, since gVisor opens
    another process's pipe through /proc whatever it is); {name: (pid,
    this end)}.  One that cannot start is left out (its step then starts
    as every other)."""
    got = {}
    null = os.open("/dev/null", os.O_RDONLY)
    sigs = signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}
    for i in range(0 if first else 1, 1 + count):
        if i == 0:
            r, w = os.pipe()
        else:
            a, b = socket.socketpair()
            r, w = b.detach(), a.detach()
        if r == 3:  # the child's dup2 onto itself would keep close-on-exec
            r, old = os.dup(r), r
            os.close(old)
        argv = ["python3", "-c", WAIT_STEP] + (["later"] if i else [])
        try:
            pid = os.posix_spawnp("python3", argv, os.environ,
                                  file_actions=[(os.POSIX_SPAWN_DUP2, null, 0),
                                                (os.POSIX_SPAWN_DUP2, r, 3)],
                                  setsid=True, setsigmask=(), setsigdef=sigs)
            got["later%d" % (i - 1) if i else "step"] = (pid, w)
        except OSError:
            os.close(w)
        os.close(r)
    os.close(null)
    return got


def ready_later(waiters, wait=0.0):
    """The later steps' waiters that said they are not dumpable, by now or
    within wait seconds in all, {pid: (this end, its start time)}; any
    other is killed and reaped here, before any guest code of the steps
    exists."""
    later = {}
    until = time.monotonic() + wait
    for key in [k for k in waiters if k.startswith("later")]:
        pid, fd = waiters.pop(key)
        try:
            # poll, not select: under runsc the exec filter refuses select.
            said = select.poll()
            said.register(fd, select.POLLIN)
            left = max(0, int((until - time.monotonic()) * 1000))
            ok = bool(said.poll(left)) and os.read(fd, 1) == b"r"
        except OSError:
            ok = False
        st = proc_stat(pid) if ok else None  # procs.py
        if st is not None:
            later[pid] = (fd, st[2])
        else:
            drop_waiter(pid, fd)
    return later


def drop_waiter(pid, fd):
    os.close(fd)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def intact(pid, start, held):
    """Whether a later step's waiter is still the one started, running (it
    is continued first), with everything a process of its uid could change
    from outside as this process holds it (held, steps_common.py)."""
    st = proc_stat(pid)
    if st is None or st[2] != start or st[0] in ("Z", "X"):
        return False
    try:
        os.kill(pid, signal.SIGCONT)
        return inherited(pid) == held  # steps_common.py
    except OSError:
        return False


def hand_step(waiter, argv, env, ask=False):
    """A step, handed to its waiter: its status once it ended, or None when
    the waiter is gone or does not answer (it is reaped; the step then
    starts as every other).  ask: a later step's waiter, asked first."""
    pid, w = waiter
    fields = [str(len(argv))] + argv + ["%s=%s" % kv for kv in env.items()]
    try:
        if any("\0" in f for f in fields):
            raise OSError("not for the waiter")
        if ask:
            # poll, not select: under runsc the exec filter refuses select.
            os.write(w, b"?")
            answer = select.poll()
            answer.register(w, select.POLLIN)
            if not answer.poll(5000) or os.read(w, 1) != b"!":
                raise OSError("no answer")
        write_all(w, "\0".join(fields).encode("utf-8", "surrogateescape"))
    except (OSError, UnicodeError):
        drop_waiter(pid, w)
        return None
    os.close(w)
    return status_code(os.waitpid(pid, 0)[1])


def hand_later(later, held, argv, env):
    """A later python3 step, to a waiter of later that is intact: its
    status, or None when none can take it."""
    if argv[0] != "python3":
        return None
    while later:
        pid, (fd, start) = later.popitem()
        if not intact(pid, start, held):
            drop_waiter(pid, fd)
            continue
        code = hand_step((pid, fd), argv, env, ask=True)
        if code is not None:
            return code
    return None


def end_all_but(later, keep=None):
    """After a step: end every process but PID 1, this one, the later
    steps' waiters and keep ({pid: start}: a session's kept interpreters)
    (procs.py's end_all: stop, then kill, until none is alive), then reap
    this process's children; a waiter reaped is dropped from later.  72
    when processes cannot be ended."""
    spare = dict(keep or {})
    spare.update((pid, start) for pid, (fd, start) in later.items())
    left = end_all(kept_only(spare, os.getpid()))
    if left:
        write_all(2, ("plimsoll: processes of the step could not be ended: %s\n"
                      % sorted(left)[:8]).encode())
        os._exit(72)
    while True:
        try:
            got = os.waitpid(-1, os.WNOHANG)[0]
        except ChildProcessError:
            return
        if got == 0:
            return
        if got in later:
            os.close(later.pop(got)[0])
