# SPDX-License-Identifier: Apache-2.0
# The guest user's processes other than this one and its ancestors
# (after ancestors.py), "PID:START" each, on one line: a fresh sandbox's
# own processes, read before any code runs, which a "self" cleanup
# (end_processes.py) then spares.  os: from ancestors.py.
mine = ancestors()
uid, out = str(os.getuid()), []
for p in os.listdir('/proc'):
    if not p.isdigit() or int(p) in mine:
        continue
    try:
        with open('/proc/%s/status' % p) as f:
            if not any(l.split()[1:2] == [uid] for l in f if l.startswith('Uid:')):
                continue
        with open('/proc/%s/stat' % p) as f:
            raw = f.read()
        out.append('%s:%s' % (p, raw[raw.rfind(')') + 2:].split()[19]))
    except (OSError, ValueError, IndexError):
        pass
print(' '.join(out))
