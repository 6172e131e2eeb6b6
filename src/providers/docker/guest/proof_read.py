# SPDX-License-Identifier: Apache-2.0
# The startup proof's last session call (proof.c): the first call's file,
# after the calls, the cells and a pause.
with open('/work/proof.txt') as f:
    print(f.read())
