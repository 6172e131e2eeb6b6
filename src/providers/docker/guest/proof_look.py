# SPDX-License-Identifier: Apache-2.0
# The startup proof's second session call (proof.c): how many of the first
# call's sleeps are left (0 after the cleanup), and the file it wrote.
import os


def comm(pid):
    try:
        with open('/proc/%s/comm' % pid) as f:
            return f.read().strip()
    except OSError:
        return ''  # gone between the listing and the read


left = [p for p in os.listdir('/proc') if p.isdigit() and comm(p) == 'sleep']
with open('/work/proof.txt') as f:
    print(len(left), f.read())
