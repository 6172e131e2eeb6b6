# SPDX-License-Identifier: Apache-2.0
# The startup proof's first session call (proof.c): a process that leaves
# its session behind, and a file; the cleanup between calls must end the one
# and keep the other.
import subprocess

subprocess.Popen(['sleep', '300'], start_new_session=True)
with open('/work/proof.txt', 'w') as f:
    f.write('kept')
print('started')
