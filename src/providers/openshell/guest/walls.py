# SPDX-License-Identifier: Apache-2.0
# The startup test's walls, from inside (openshell/proof.c, judge_inside):
# writes land only under /tmp, loopback is the only interface, the cgroup's
# memory and CPU limits, and whether a child (CHILD, walls_child.py, put in
# by scripts/build/embed) can read this process's memory.  One JSON line.
import ctypes, json, os, socket, subprocess, sys
r = {}
bad = []
for d in ('/', '/etc', '/usr', '/var', '/home', '/opt', '/root', os.path.expanduser('~')):
    if os.path.realpath(d) == '/tmp' or os.path.realpath(d).startswith('/tmp/'):
        continue
    p = os.path.join(d, '.plimsoll-proof-%d' % os.getpid())
    try:
        with open(p, 'w') as f:
            f.write('x')
        bad.append(d)
        os.unlink(p)
    except OSError:
        pass
r['written_outside_tmp'] = bad
try:
    p = '/tmp/.plimsoll-proof-%d' % os.getpid()
    with open(p, 'w') as f:
        f.write('x')
    os.unlink(p)
    r['tmp_writable'] = True
except OSError:
    r['tmp_writable'] = False
r['interfaces'] = sorted(n for _, n in socket.if_nameindex())
def rd(p):
    try:
        with open(p) as f:
            return f.read().strip()
    except OSError:
        return None
if rd('/sys/fs/cgroup/memory.max') is not None:
    r['memory'] = rd('/sys/fs/cgroup/memory.max')
    r['cpu'] = rd('/sys/fs/cgroup/cpu.max')
else:
    r['memory'] = rd('/sys/fs/cgroup/memory/memory.limit_in_bytes')
    q = rd('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')
    per = rd('/sys/fs/cgroup/cpu/cpu.cfs_period_us')
    r['cpu'] = '%s %s' % (q, per) if q and per else None
secret = ctypes.create_string_buffer(os.urandom(16).hex().encode())
out = subprocess.run([sys.executable, '-c', CHILD, str(os.getpid()),
                      str(ctypes.addressof(secret)), str(len(secret.value)),
                      secret.value.decode()], stdout=subprocess.PIPE, timeout=20)
r['parent_memory_read_by'] = out.stdout.decode().strip()
print(json.dumps(r))
