# SPDX-License-Identifier: Apache-2.0
# `python3 -c <this> N PIECE... ARG...`: a program longer than one
# argument of the gateway's ExecSandbox may be (openshell/exec.c,
# fit_command), sent as N pieces.  It joins them, takes them and their
# count out of sys.argv and sys.orig_argv (where the session agent finds
# its own source to start an interpreter with) and runs the whole as -c
# would have, compiled as "<pieces>" (src/providers/guest/lines.py keeps
# the tracebacks of both apart).
import sys
a, o = sys.argv, sys.orig_argv
n = int(a[1])
s = ''.join(a[2:2 + n])
i = o.index('-c')
sys.orig_argv = o[:i + 1] + [s] + o[i + 3 + n:]
del a[1:2 + n]
c = compile(s, '<pieces>', 'exec')
del a, o, n, s, i
exec(c)
