# SPDX-License-Identifier: Apache-2.0
# The startup session's last project call (hosted/cells.c,
# ph_prove_session), after a pause and a resume: the first call's file is
# kept and the process it left running is gone.  Prints the file, then how
# many of its `sleep 600` are still there.
import os


def cmdline(pid):
    try:
        with open('/proc/%s/cmdline' % pid) as f:
            return f.read()
    except OSError:
        return ''  # it ended between the listing and the read


with open('kept.txt') as f:
    print(f.read(), end='')
print(sum(1 for p in os.listdir('/proc') if p.isdigit() and cmdline(p) == 'sleep\x00600\x00'))
