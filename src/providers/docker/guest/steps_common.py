# SPDX-License-Identifier: Apache-2.0
# What both step runners share (docs/providers/docker.md, "A project"):
# the bootstrap as a project container's PID 1 and the session agent's
# steps mode.  The build puts this file after common.py in both.


def status_code(st):
    """A wait status as the marker carries it: the exit code, or 128 + the
    signal that ended the process."""
    code = os.waitstatus_to_exitcode(st)
    return 128 - code if code < 0 else code


def mark_end(end, code):
    """The end marker, the nonce end and the status, on both streams."""
    mark = ("\x1eplimsoll-end %s %03d\n" % (end, code)).encode()
    write_all(1, mark)
    write_all(2, mark)


def drain_stdin():
    """Drop what is on stdin once nothing of the guest lives: the daemon
    writes nothing while a step runs, so it is what a guest wrote into this
    process's stdin (under runsc a process can open another's descriptors
    whatever its group)."""
    os.set_blocking(0, False)
    try:
        while os.read(0, 65536):
            pass
    except BlockingIOError:
        pass
    finally:
        os.set_blocking(0, True)


def step_command(token, base):
    """The next step the daemon sent on stdin: (argv, its end nonce, its
    environment); None when stdin ended (the daemon is done with the
    steps).  A command that is torn, malformed or lacks the project's
    token ends this process: 71, before anything runs."""
    line = read_line(16)
    if not line:
        return None
    try:
        body = read_exact(int(line))
        cmd = json.loads(body)
        ok = isinstance(cmd, dict) and cmd.get("token") == token
        argv, end = cmd["argv"], cmd["end"]
        ok = ok and isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
        ok = ok and isinstance(end, str) and end.isalnum()
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        os._exit(71)
    env = dict(base)
    name, _, value = str(cmd.get("env", "")).partition("=")
    if name:
        env[name] = value
    return argv, end, env


def serve_steps(token, end_others, start=None):
    """Run the steps the daemon sends on stdin, one at a time, until stdin
    ends (exit 0): start each, and once it ended, end_others() (everything
    else of the step's is ended and reaped), drop what a guest wrote into
    stdin, and write the step's end marker.  Every signal stays blocked
    here; the steps get them at their defaults.  start, when given, is
    asked to start each step first (its status, or None to start it as
    usual)."""
    null = os.open("/dev/null", os.O_RDONLY)
    sigs = signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    base = dict(os.environ)
    held = inherited()
    while True:
        got = step_command(token, base)
        if got is None:
            os._exit(0)  # stdin ended: the daemon is done with the steps
        argv, end, env = got
        why = put_back(held)
        if why:
            write_all(2, ("plimsoll: an earlier step changed what every step inherits from "
                          "this sandbox's step runner (%s), and it cannot be put back without a "
                          "privilege the sandbox does not have: this step is not run\n"
                          % why).encode())
            code = 126
        else:
            code = start(argv, env) if start else None
            if code is None:
                code = spawn_step(argv, env, null, sigs)
        end_others()
        drain_stdin()
        mark_end(end, code)


def spawn_step(argv, env, null, sigs):
    """Start a step in a session of its own, stdin /dev/null, the signals
    this process blocks unblocked and at their defaults; wait for it.  Its
    status as the marker carries it (127 and a message on stderr when the
    program does not exist, 126 when it cannot run)."""
    try:
        pid = os.posix_spawnp(argv[0], argv, env, file_actions=[(os.POSIX_SPAWN_DUP2, null, 0)],
                              setsid=True, setsigmask=(), setsigdef=sigs)
        return status_code(os.waitpid(pid, 0)[1])
    except OSError as e:
        write_all(2, ("plimsoll: %s: %s\n" % (argv[0], e.strerror)).encode())
        return 127 if e.errno == 2 else 126


# ---- what a step inherits from the runner ---------------------------------
#
# Another process of the steps' uid can change this process's resource
# limits (prlimit), nice value (setpriority), CPUs (sched_setaffinity),
# scheduling policy (sched_setscheduler) and I/O priority (ioprio_set)
# without reaching its memory or descriptors, and every later step would
# inherit them.  So they are taken before the first step and put back before
# each later one; what cannot be put back without a privilege (a lowered
# hard limit, a raised nice value, SCHED_IDLE) refuses the step instead.
# The programs import resource and ctypes before any guest code exists.

IOPRIO_CALLS = {"x86_64": (251, 252), "aarch64": (30, 31)}.get(os.uname().machine)
_LIBC = []  # libc, loaded by the first io_priority


def io_priority(value=None, pid=0):
    """The I/O priority of pid (ioprio_get; 0: this process), or set it to
    value; None where the call is not known or not implemented."""
    if IOPRIO_CALLS is None:
        return None
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    libc = _LIBC[0]
    if value is not None:
        libc.syscall(IOPRIO_CALLS[0], 1, pid, value)  # IOPRIO_WHO_PROCESS
    got = libc.syscall(IOPRIO_CALLS[1], 1, pid)
    return None if got < 0 else got


def inherited(pid=0):
    """What a step inherits from process pid (0: this one) and another
    process of the same uid can change: every resource limit, the nice
    value, the CPUs, the scheduling policy and priority, the I/O
    priority."""
    names = [k for k in dir(resource) if k.startswith("RLIMIT_") and k != "RLIMIT_OFILE"]
    return {"limits": {k: resource.prlimit(pid, getattr(resource, k)) for k in names},
            "nice": os.getpriority(os.PRIO_PROCESS, pid), "cpus": os.sched_getaffinity(pid),
            "policy": (os.sched_getscheduler(pid), os.sched_getparam(pid).sched_priority),
            "io": io_priority(pid=pid)}


def put_back(held):
    """Put back what was changed of inherited() since held: None when all
    of it holds again, else what still differs."""
    for k, lim in held["limits"].items():
        if resource.getrlimit(getattr(resource, k)) != lim:
            try:
                resource.setrlimit(getattr(resource, k), lim)
            except (OSError, ValueError):
                pass
    for put in (lambda: os.setpriority(os.PRIO_PROCESS, 0, held["nice"]),
                lambda: os.sched_setaffinity(0, held["cpus"]),
                lambda: os.sched_setscheduler(0, held["policy"][0],
                                              os.sched_param(held["policy"][1])),
                lambda: io_priority(held["io"])):
        try:
            put()
        except OSError:
            pass
    now = inherited()
    differ = [k for k, lim in held["limits"].items() if now["limits"][k] != lim]
    differ += [name for k, name in (("nice", "nice value"), ("cpus", "CPUs"),
                                    ("policy", "scheduling policy"), ("io", "I/O priority"))
               if now[k] != held[k]]
    return ", ".join(differ) or None
