# SPDX-License-Identifier: Apache-2.0
# The Python waiter bootstrap.py starts before a run's code arrives
# (bootstrap.py holds it as WAIT_PY, put in by scripts/build/embed):
# `python3 -c <this>` runs /tmp/.plimsoll-main.py as `python3 FILE` would,
# after "go" on fd 3: a fresh __main__, sys.argv and sys.path[0] as for a
# script; an uncaught exception's traceback without this program's frames
# and status 1; SystemExit's status (or its message and 1); 130 after an
# uncaught ^C.  The end is the interpreter's own less its teardown:
# non-daemon threads joined, atexit handlers run, sys.stdout and sys.stderr
# flushed, then _exit (the container ends with the run: nothing is left to
# tear down).
import os, sys, types, atexit
try:
    go = os.read(3, 8)
    os.close(3)
except OSError:
    go = b""
if go != b"go":
    os._exit(70)
path = "/tmp/.plimsoll-main.py"
def exit_status(e):
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    try:
        print(e.code, file=sys.stderr)
    except Exception:
        pass
    return 1
def run():
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    sys.argv[:] = [path]
    sys.path[0] = os.path.dirname(path)
    try:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec")
    except BaseException as e:
        sys.excepthook(type(e), e.with_traceback(None), None)
        return 1
    try:
        exec(code, main.__dict__)
    except SystemExit as e:
        return exit_status(e)
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    return 0
status = run()
threading = sys.modules.get("threading")
if threading is not None:
    threading._shutdown()
atexit._run_exitfuncs()
for f in (sys.stdout, sys.stderr):
    try:
        f.flush()
    except Exception:
        status = status or 120
os._exit(status)
