# SPDX-License-Identifier: Apache-2.0
"""The daemon's own process seen from /proc: how many descriptors and
threads it holds, and its children (the wasm provider's workers)."""
import os


def proc_counts(pid):
    """(open descriptors, threads) of process pid."""
    return (len(os.listdir("/proc/%d/fd" % pid)), len(os.listdir("/proc/%d/task" % pid)))


def children(pid):
    """The daemon's worker processes: pids whose parent is pid."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                out.add(int(d))
    return out
