# SPDX-License-Identifier: Apache-2.0
# A docker session container's PID 1 (docs/sessions.md), compiled into
# plimsolld after common.py and run as the container's command,
# `python3 -c <this file>`.  It runs no guest code: it installs the seccomp
# filter (under runsc), makes itself non-dumpable, reaps every orphan the
# session's execs leave (the kept interpreters are reparented to it),
# sleeps, and exits 0 on SIGTERM or SIGINT.
#
# It is apart from the session agent (session_agent.py, run by execs) so
# that the container's command, which the engine returns twice in every
# inspect, the settings read-back before each call among them, is these
# few lines and not the agent's 30 KB: the read-back's inspect went from
# about 80 KB to 21 KB (docs/sessions.md says how each was read).
import signal

seccomp_filter()  # common.py
nondumpable()  # common.py; what it says is not needed here


def main():
    sigs = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    while True:
        # Reap every child that has ended: orphans of execs land here.
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if pid == 0:
                break
        info = signal.sigtimedwait(sigs, 5.0)
        if info is not None and info.si_signo in (signal.SIGTERM, signal.SIGINT):
            os._exit(0)


main()
