# SPDX-License-Identifier: Apache-2.0
# The startup test's command that runs past its deadline (`/bin/sh -c`):
# three processes marked plimsoll-proof-orphan, one of them in a session
# of its own, which orphans.py looks for after the cleanup.
python3 -c 'import time; time.sleep(999)' plimsoll-proof-orphan &
setsid python3 -c 'import time; time.sleep(999)' plimsoll-proof-orphan &
exec python3 -c 'import time; time.sleep(999)' plimsoll-proof-orphan
