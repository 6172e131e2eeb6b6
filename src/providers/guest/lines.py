# SPDX-License-Identifier: Apache-2.0
# First in every Python guest program, after embed's _PL_FILES line (each
# file's first and last line there): an uncaught exception's traceback
# names the file and its line, not "<string>" and the program's line.  A
# program run inside another (openshell's join_pieces.py) adds its table.
import sys


def _pl_excepthook(kind, value, tb):
    import traceback
    maps = _pl_excepthook.maps
    top = traceback.TracebackException(kind, value, tb)
    todo, seen, hit = [top], set(), False
    while todo:
        te = todo.pop()
        if te is None or id(te) in seen:
            continue
        seen.add(id(te))
        for i, f in enumerate(te.stack):
            for first, last, path in maps.get(f.filename, ()):
                if first <= (f.lineno or 0) <= last:
                    te.stack[i] = traceback.FrameSummary(path, f.lineno - first + 1, f.name)
                    hit = True
        todo += [te.__cause__, te.__context__] + list(getattr(te, "exceptions", None) or ())
    if not hit:
        return sys.__excepthook__(kind, value, tb)
    sys.stderr.write("".join(top.format()))


_pl_excepthook.maps = dict(getattr(sys.excepthook, "maps", {}))
_pl_excepthook.maps[(lambda: 0).__code__.co_filename] = _PL_FILES
sys.excepthook = _pl_excepthook
