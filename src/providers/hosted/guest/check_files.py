# SPDX-License-Identifier: Apache-2.0
# Step 1 of the startup test's project (docs/internals/hosted.md, "The
# startup test"), uploaded as check_files.py and run as `python3
# check_files.py`: the files arrived whole, in the project directory.
# Prints the working directory and the uid.
import os, sys
want = {'check_files.py': None, 'data/one.txt': b'one\n', 'data/two/two.txt': b'two\n'}
for path, body in want.items():
    with open(path, 'rb') as f:
        got = f.read()
    if body is not None and got != body:
        sys.exit('%s: wrong content' % path)
print(os.getcwd())
print(os.getuid())
