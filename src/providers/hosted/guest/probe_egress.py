# SPDX-License-Identifier: Apache-2.0
# Step 3 of the startup test's project: `python3 -c <this> HOST:PORT,...`
# tries every egress probe target, each of which must be unreachable.
# Prints one line per target: "reached HOST:PORT" or "blocked HOST:PORT WHY".
import socket, sys
for target in sys.argv[1].split(','):
    host, port = target.rsplit(':', 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        print('reached', target)
    except OSError as e:
        print('blocked', target, type(e).__name__)
