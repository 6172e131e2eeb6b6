# SPDX-License-Identifier: Apache-2.0
"""What the host sees of a daemon instance's sandboxes, read the way an
auditor would: from the kernel (the cgroup tree, /proc), never from the
daemon or the engine.  Shared by tests/api and tests/hostile.

Every container of instance I lives under the cgroup parent
"/plimsoll-I" (docs/providers/docker.md); under runc its processes are
host processes running as the sandbox's uid (SANDBOX_DOCKER_UID), under
runsc the cgroup holds gVisor's own processes for the sandbox."""
import os
import time


def _pids_root():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            dash = parts.index("-")
            fstype, supers = parts[dash + 1], parts[dash + 3].split(",")
            if fstype == "cgroup" and "pids" in supers and parts[3] == "/":
                return parts[4], False
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            dash = parts.index("-")
            if parts[dash + 1] == "cgroup2":
                return parts[4], True
    raise RuntimeError("no cgroup hierarchy with pids")


PIDS_ROOT, V2 = _pids_root()


def instance_parent(instance):
    return os.path.join(PIDS_ROOT, "plimsoll-" + instance)


def exiting(tid):
    """Whether thread tid is gone or has begun to exit (the kernel's
    PF_EXITING in its flags): it can never run an instruction of its own
    again, though the kernel may still be freeing its memory."""
    try:
        with open("/proc/%d/task/%d/stat" % (tid, tid)) as f:
            stat = f.read()
    except OSError:
        return True
    return bool(int(stat[stat.rfind(")") + 2:].split()[6]) & 0x4)


def cgroup_tasks(instance, living=False):
    """{container id: [thread ids]} for every non-empty cgroup of the
    instance (living: counting only threads that have not begun to exit)."""
    out = {}
    parent = instance_parent(instance)
    try:
        names = os.listdir(parent)
    except FileNotFoundError:
        return out
    for name in names:
        path = os.path.join(parent, name)
        if not os.path.isdir(path):
            continue
        try:
            with open(os.path.join(path, "cgroup.threads" if V2 else "tasks")) as f:
                tids = [int(x) for x in f.read().split()]
        except FileNotFoundError:
            continue
        if living:
            tids = [t for t in tids if not exiting(t)]
        if tids:
            out[name] = tids
    return out


def uid_processes(uid):
    """(pid, comm, state) of every host process whose real uid is uid."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/status" % name) as f:
                status = f.read()
            with open("/proc/%s/comm" % name) as f:
                comm = f.read().strip()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1 0").split()[0]) == uid:
            found.append((int(name), comm, fields.get("State", "?").strip()))
    return found


def marked_tasks(marker):
    """(pid, tid) of every live thread on the host whose name (comm) starts
    with marker: hostile code names what it leaves behind, so a survivor is
    found whatever the daemon's settings."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            tids = os.listdir("/proc/%s/task" % name)
        except OSError:
            continue
        for tid in tids:
            try:
                with open("/proc/%s/task/%s/comm" % (name, tid)) as f:
                    named = f.read().startswith(marker)
                with open("/proc/%s/task/%s/stat" % (name, tid)) as f:
                    stat = f.read()
            except OSError:
                continue
            # A zombie is dead (not yet reaped by its parent): not a survivor.
            if named and stat[stat.rfind(")") + 2:][:1] not in ("Z", "X"):
                found.append((int(name), int(tid)))
    return found


def leftovers(instance, uid, wait=5.0, marker=None, unless=None):
    """What is left of the instance's runs on the host, after waiting up to
    `wait` seconds for the daemon's own cleanup to finish: a dict with the
    non-empty cgroups and the host processes running as the sandbox uid.
    unless, when given, takes that dict and drops what is not a run's (a
    waiting container's), in place, before it is judged."""
    deadline = time.monotonic() + wait
    while True:
        left = {"cgroups": cgroup_tasks(instance), "uid_processes": uid_processes(uid)}
        if marker:
            left["marked"] = marked_tasks(marker)
        if unless:
            unless(left)
        if not any(left.values()) or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def unique_uid():
    """A sandbox uid (and its three groups) of this test process's own, so a
    host-side check sees only its daemon's processes."""
    return 2000000000 + 4 * (os.getpid() % 1000000) + 4
