# SPDX-License-Identifier: Apache-2.0
# What the cleanup programs share (end_processes.py, own_processes.py).
import os


def ancestors():
    """This process and its ancestors (the exec's own chain): the PIDs a
    cleanup spares whatever their uid."""
    mine = set()
    p = os.getpid()
    while p > 0 and p not in mine:
        mine.add(p)
        try:
            with open('/proc/%d/stat' % p) as f:
                p = int(f.read().rsplit(')', 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return mine
