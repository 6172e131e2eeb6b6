# SPDX-License-Identifier: Apache-2.0
# The cleanup a hosted sandbox runs as root between a project's steps and
# after a session's call (docs/internals/hosted.md, "Cleanup"), after
# ancestors.py: `python3 -c <this> UID [PID:START...]`.
#
# It ends every process of the guest's user (by the real uid in
# /proc/PID/status, which a process cannot hide by making itself
# non-dumpable) but the kept ones, and proves none is left; as on docker, a
# step never finds what an earlier one left running.  The kept processes
# (a session's interpreters and their relays) are each spared only while
# its start time matches and it is alive.  A process is alive while any of
# its threads is (a leader that exited alone reads as a zombie while its
# other threads run on); a true zombie counts as ended: a kept interpreter
# may not have reaped a child the cleanup killed.  Prints "clean" and, on a
# second line, "alive" and the kept ones still alive.
#
# Whatever the uid, the cleanup spares itself, its ancestors (the exec's
# own chain) and PID 1 (the sandbox's main process, which must live): no
# service documents which user its main process runs as, and on one whose
# main process is the guest's user it cannot be ended from inside anyway.
# UID "self" is for a service whose commands all run as the guest's user
# (openshell: ExecSandbox has no user): the cleanup ends every other
# process of its own uid.
import signal, sys, time  # and os, from ancestors.py
uid = sys.argv[1]
keep = dict(tuple(int(x) for x in k.split(':')) for k in sys.argv[2:])
if uid == 'self':
    uid = str(os.getuid())
mine = ancestors()
mine.add(1)
def stat(p):
    try:
        with open('/proc/%d/stat' % p) as f:
            rest = f.read()
        return int(rest[rest.rfind(')') + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None
def alive(p):
    try:
        tids = os.listdir('/proc/%d/task' % p)
    except OSError:
        return False
    for t in tids:
        try:
            with open('/proc/%d/task/%s/stat' % (p, t)) as f:
                raw = f.read()
        except OSError:
            continue
        if raw[raw.rfind(')') + 2:][:1] not in ('Z', 'X', 'x', ''):
            return True
    return False
def spared(p):
    return p in keep and stat(p) == keep[p] and alive(p)
def theirs():
    out = []
    for p in os.listdir('/proc'):
        if not p.isdigit() or int(p) in mine:
            continue
        try:
            with open('/proc/%s/status' % p) as f:
                if any(l.split()[1:2] == [uid] for l in f if l.startswith('Uid:')):
                    if not spared(int(p)) and alive(int(p)):
                        out.append(int(p))
        except (OSError, ValueError):
            pass
    return out
for _ in range(100):
    left = theirs()
    if not left:
        print('clean')
        break
    for p in left:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.01)
else:
    print('left', theirs())
print(' '.join(['alive'] + ['%d:%d' % (p, s) for p, s in sorted(keep.items()) if spared(p)]))
