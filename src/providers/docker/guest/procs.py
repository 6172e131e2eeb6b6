# SPDX-License-Identifier: Apache-2.0
# The sandbox's processes as /proc shows them, and ending all of them but
# the spared (docs/sessions.md): the build puts this file after common.py
# in the session agent and the session's step runner (session_steps.py).
# It imports nothing; the program imports signal and time before it calls
# end_all.


def proc_stat(pid):
    """(state, ppid, starttime, comm) of pid, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    lp, rp = raw.find("("), raw.rfind(")")
    rest = raw[rp + 2:].split()
    # rest[0] is field 3 (state), so field N is rest[N - 3].
    try:
        return rest[0], int(rest[1]), int(rest[19]), raw[lp + 1:rp]
    except (IndexError, ValueError):
        return None


def proc_gid(pid):
    """The real group of pid, or None when it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("Gid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def list_pids():
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            out.append(int(name))
    return out


def thread_states(pid):
    """The states of pid's threads, or None when /proc lists none (gVisor,
    for a zombie leader whose other threads may run)."""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None
    states = []
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid), "rb") as f:
                raw = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        states.append(raw[raw.rfind(")") + 2:][:1])
    return states


def alive(pid):
    """A process is alive while any of its threads is: a main thread that
    exited alone reads as a zombie ("Z") while the others run on.  Linux
    lists the threads (/proc/PID/task); gVisor lists none for a zombie
    leader, but counts them in /proc/PID/status ("Threads: 2" while one
    still runs, "1" once all are gone)."""
    states = thread_states(pid)
    if states is not None:
        return any(t not in ("Z", "X", "x", "") for t in states)
    try:
        with open("/proc/%d/status" % pid) as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return False
    state = fields.get("State", "").strip()[:1]
    try:
        threads = int(fields.get("Threads", "0"))
    except ValueError:
        threads = 2  # unreadable: assume it lives
    return state not in ("Z", "X", "x") or threads > 1


def kept_only(keep, me):
    """A spare() for end_all: PID 1, me, and each kept pid ({pid: start})
    while its start time still matches."""
    def spared(pid):
        if pid in (1, me):
            return True
        if pid not in keep:
            return False
        st = proc_stat(pid)
        return st is not None and st[2] == keep[pid]
    return spared


def end_all(spare):
    """Stop, then kill, every process for which spare(pid) is false, until
    none is alive.  Killing does not depend on the state /proc shows: a
    zombie with a live thread dies of the SIGKILL, a true zombie ignores it.
    Returns the pids still alive after ten rounds."""
    def others():
        return [p for p in list_pids() if not spare(p) and alive(p)]

    left = others()
    rounds = 0
    while left and rounds < 10:
        rounds += 1
        # Stop everything first, rescanning until no new process shows up,
        # so nothing forks during the kill.
        stopped = set()
        for _ in range(50):
            fresh = [p for p in left if p not in stopped]
            if not fresh:
                break
            for p in fresh:
                try:
                    os.kill(p, signal.SIGSTOP)
                except OSError:
                    pass
                stopped.add(p)
            left = others()
        for p in stopped | set(left):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        for _ in range(40):
            left = others()
            if not left:
                break
            time.sleep(0.005)
    return left
