# SPDX-License-Identifier: Apache-2.0
# A project's first step, started before the request (bootstrap.py holds
# this as WAIT_STEP, put in by scripts/build/embed; docs/providers/docker.md,
# "The steps wait").  A pooled project container's bootstrap starts
# `python3 -c <this>` the way it starts a step (posix_spawn: a session of
# its own, stdin /dev/null, the container's stdout and stderr, every signal
# at its default, the container's environment, /work), before any guest
# code or file exists, and kills it unused if the first step is not
# handed to it.  It reads that step on fd 3 until the end: the number of
# arguments, the arguments, then the step's environment as NAME=value, all
# NUL-separated.  `python3 -c CODE ...`, `python3 FILE ...` (a regular
# file, not a zip) and `python3 -m MODULE ...` run here as that command
# would run, when nothing Python reads at its start differs in the step's
# environment; anything else is exec'd as the bootstrap would have
# started it (127 when the program does not exist, 126 when it cannot
# run).  What differs from a fresh interpreter: the stack's two outermost
# frames are this program's, /proc/self/cmdline is this program's command,
# and the process started before the request.
_MAIN = dict(globals())  # __main__ as `python3 -c` makes it, before anything here
import os  # noqa: E402 - already loaded by the interpreter's start
import sys  # noqa: E402

del sys.path[0]  # '' (/work): nothing of this program is looked up there
_STARTUP = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ")
_MODULES = set(sys.modules)
# A later step's waiter ("later") lives beside the steps before its own:
# it is made non-dumpable before any guest code exists, so a process of
# the same uid can neither read nor write its memory or open its
# descriptors (Linux; gVisor refuses the memory, and fd 3 is a socket,
# which it does not open); a ^C while it waits ends it silently; it says
# "r" once that holds.  Before the bootstrap hands it a step it asks "?",
# answered "!" only by a waiter that runs: a signal sent to it while it
# waited was delivered by then (the bootstrap continues it first).
_LATER = sys.argv[1:] == ["later"]
if _LATER:
    import _signal
    import ctypes
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        os._exit(70)
    os.write(3, b"r")


def _read():
    data = bytearray()
    try:
        if _LATER:
            if os.read(3, 1) != b"?":
                os._exit(70)
            os.write(3, b"!")
        while True:
            chunk = os.read(3, 65536)
            if not chunk:
                break
            data += chunk
        os.close(3)
        parts = [p.decode("utf-8", "surrogateescape") for p in bytes(data).split(b"\0")]
        n = int(parts[0])
        env = dict(p.partition("=")[::2] for p in parts[1 + n:])
        return parts[1:1 + n], env
    except (OSError, ValueError):
        os._exit(70)


def _exec(argv, env):
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as e:
        os.write(2, ("plimsoll: %s: %s\n" % (argv[0], e.strerror)).encode())
        os._exit(127 if e.errno == 2 else 126)


def _same_start(env):
    # Whether Python would start the same under env as it did here.
    names = set(env) | set(os.environ)
    return all(env.get(k) == os.environ.get(k) for k in names
               if k.startswith(("PYTHON", "LC_")) or k in _STARTUP)


def _script(path):
    # The source of a script Python would run as a file, else None.
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return None if data.startswith(b"PK\x03\x04") else data


def _become_the_step():
    # A later waiter: back to what an exec gives (dumpable, Python's ^C,
    # none of this program's modules).
    if _LATER:
        _libc.prctl(4, 1, 0, 0, 0)
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        for name in set(sys.modules) - _MODULES:
            del sys.modules[name]
    # The user's site-packages when an earlier step made it since this
    # interpreter started: added as site adds it at a start, before the
    # system's, with its .pth files and usercustomize.
    import site
    usp = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if usp and usp not in sys.path and os.path.isdir(usp):
        before = list(sys.path)
        site.addsitedir(usp)
        added = [p for p in sys.path if p not in before]
        system = [i for i, p in enumerate(before) if p in site.getsitepackages()]
        at = system[0] if system else len(before)
        sys.path[:] = before[:at] + added + before[at:]
        site.execusercustomize()


def _main(extra):
    main = type(sys)("__main__")
    main.__dict__.update(_MAIN)
    main.__dict__.update(extra, __annotations__={})
    sys.modules["__main__"] = main
    return main.__dict__


def _run(argv, env):
    # Run the step here as its command would, or exec the command.
    form = argv[1] if len(argv) > 2 and argv[0] == "python3" else None
    source = None
    if form not in ("-c", "-m"):
        form = "file" if len(argv) > 1 and argv[0] == "python3" and argv[1][:1] != "-" else None
        source = _script(argv[1]) if form else None
        form = form if source is not None else None
    if form is None or not _same_start(env):
        _exec(argv, env)
    os.environ.clear()
    os.environ.update(env)
    sys.orig_argv[:] = argv
    _become_the_step()
    try:
        if form == "-c":
            sys.argv[:] = ["-c"] + argv[3:]
            sys.path.insert(0, "")
            code = compile(argv[2], "<string>", "exec")
            exec(code, _main({}))
        elif form == "-m":
            sys.argv[:] = ["-m"] + argv[3:]
            sys.path.insert(0, os.getcwd())
            import runpy  # as `python3 -m` does
            _main({})  # runpy runs the module in __main__'s namespace
            runpy._run_module_as_main(argv[2])
        else:
            full = os.path.abspath(argv[1])
            sys.argv[:] = argv[1:]
            sys.path.insert(0, os.path.dirname(os.path.realpath(argv[1])))
            loader = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", full)
            code = compile(source, full, "exec")
            exec(code, _main({"__file__": full, "__cached__": None, "__loader__": loader}))
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - as the interpreter reports it
        tb = e.__traceback__.tb_next  # from the step's own frames on
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        raise SystemExit(130 if isinstance(e, KeyboardInterrupt) else 1) from None


_run(*_read())
