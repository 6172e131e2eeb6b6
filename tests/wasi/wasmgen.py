# SPDX-License-Identifier: Apache-2.0
"""Build WebAssembly modules with chosen counts, for the module bounds' edge
tests (tests/api, tests/hostile) and the fuzz corpus seeds.

build(...) gives a valid WASI command module ("memory", "_start") with as
many types, imports, functions, tables, globals, exports, element segments,
elements and data segments as asked; tests/unit/test_wasi_validate.c builds
the same modules in C.  writer(out, err) gives a module that writes those
exact bytes to stdout and stderr.  Standard library only.

    python3 tests/wasi/wasmgen.py OUT.wasm funcs=100001   # one module, for a look
"""
import sys

# The bounds of src/providers/wasm/wasi-worker/wasi_runner.h (PL_WASI_MAX_*).
BOUNDS = {
    "types": 100000,
    "funcs": 100000,
    "imports": 1000,
    "exports": 10000,
    "globals": 10000,
    "tables": 16,
    "table_elems": 262144,
    "elem_segments": 10000,
    "elems": 1048576,
    "data_segments": 10000,
    "func_locals": 4096,
}


def uleb(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def name(s):
    s = s.encode()
    return uleb(len(s)) + s


def section(ident, body):
    return bytes([ident]) + uleb(len(body)) + body


def build(types=2, imports=0, funcs=1, tables=0, table_initial=0, globals=0, exports=2,
          empty_elems=0, elems=(), datas=0, data_count=False, locals=0, split_locals=False):
    """A module: `types` function types (the first two are () -> () and
    (i32) -> ()), `imports` imports of wasi_snapshot_preview1.proc_exit,
    `funcs` defined functions of empty bodies (the first is _start),
    `tables` tables of `table_initial` elements, `globals` i32 globals,
    `exports` exports in all (memory, _start, then more names for _start),
    `empty_elems` empty passive element segments plus one passive segment
    per number in `elems` with that many items, `datas` empty passive data
    segments, a DataCount section when `data_count`, and `locals` i32
    locals in _start (one declaration each when `split_locals`)."""
    start = imports  # the index of _start: imports come first
    m = b"\0asm\1\0\0\0"
    body = uleb(types) + b"".join(b"\x60\x01\x7f\x00" if i == 1 else b"\x60\x00\x00"
                                  for i in range(types))
    m += section(1, body)
    if imports:
        imp = name("wasi_snapshot_preview1") + name("proc_exit") + b"\x00\x01"
        m += section(2, uleb(imports) + imp * imports)
    m += section(3, uleb(funcs) + b"\x00" * funcs)
    if tables:
        m += section(4, uleb(tables) + (b"\x70\x00" + uleb(table_initial)) * tables)
    m += section(5, b"\x01\x00\x01")
    if globals:
        m += section(6, uleb(globals) + b"\x7f\x00\x41\x00\x0b" * globals)
    exp = name("memory") + b"\x02\x00" + name("_start") + b"\x00" + uleb(start)
    exp += b"".join(name("e%d" % i) + b"\x00" + uleb(start) for i in range(2, exports))
    m += section(7, uleb(exports) + exp)
    segments = [b"\x01\x00\x00"] * empty_elems
    segments += [b"\x01\x00" + uleb(n) + uleb(start) * n for n in elems]
    if segments:
        m += section(9, uleb(len(segments)) + b"".join(segments))
    if data_count:
        m += section(12, uleb(datas))
    if split_locals:
        decls = uleb(locals) + b"\x01\x7f" * locals
    else:
        decls = (b"\x01" + uleb(locals) + b"\x7f") if locals else b"\x00"
    start_body = decls + b"\x0b"
    m += section(10, uleb(funcs) + uleb(len(start_body)) + start_body
                 + b"\x02\x00\x0b" * (funcs - 1))
    if datas:
        m += section(11, uleb(datas) + b"\x01\x00" * datas)
    return m


def sleb(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if (n == 0 and not b & 0x40) or (n == -1 and b & 0x40):
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def writer(out=b"", err=b""):
    """A module whose _start writes `out` to stdout and `err` to stderr with
    fd_write, whatever the bytes are (under 60 KiB each), then returns."""
    code = b""
    data = b""
    base = 16  # 0..7: the iovec, 8..11: nwritten
    for fd, buf in ((1, out), (2, err)):
        if not buf:
            continue
        offset = base + len(data)
        data += buf
        code += b"\x41\x00\x41" + sleb(offset) + b"\x36\x02\x00"      # iov.base
        code += b"\x41\x04\x41" + sleb(len(buf)) + b"\x36\x02\x00"    # iov.len
        code += b"\x41" + sleb(fd) + b"\x41\x00\x41\x01\x41\x08\x10\x00\x1a"
    body = b"\x00" + code + b"\x0b"
    m = b"\0asm\1\0\0\0"
    m += section(1, uleb(2) + b"\x60\x04\x7f\x7f\x7f\x7f\x01\x7f" + b"\x60\x00\x00")
    m += section(2, uleb(1) + name("wasi_snapshot_preview1") + name("fd_write") + b"\x00\x00")
    m += section(3, uleb(1) + b"\x01")
    m += section(5, b"\x01\x00\x02")
    m += section(7, uleb(2) + name("memory") + b"\x02\x00" + name("_start") + b"\x00\x01")
    m += section(10, uleb(1) + uleb(len(body)) + body)
    m += section(11, uleb(1) + b"\x00\x41" + sleb(base) + b"\x0b" + uleb(len(data)) + data)
    return m


# Each bound: the arguments of a module at it, and of one just past it.
EDGES = {
    "types": ({"types": BOUNDS["types"]}, {"types": BOUNDS["types"] + 1}),
    "funcs": ({"funcs": BOUNDS["funcs"]}, {"funcs": BOUNDS["funcs"] + 1}),
    "imports": ({"imports": BOUNDS["imports"]}, {"imports": BOUNDS["imports"] + 1}),
    "exports": ({"exports": BOUNDS["exports"]}, {"exports": BOUNDS["exports"] + 1}),
    "globals": ({"globals": BOUNDS["globals"]}, {"globals": BOUNDS["globals"] + 1}),
    "tables": ({"tables": BOUNDS["tables"]}, {"tables": BOUNDS["tables"] + 1}),
    "table_elems": ({"tables": 1, "table_initial": BOUNDS["table_elems"]},
                    {"tables": 1, "table_initial": BOUNDS["table_elems"] + 1}),
    "elem_segments": ({"empty_elems": BOUNDS["elem_segments"]},
                      {"empty_elems": BOUNDS["elem_segments"] + 1}),
    "elems": ({"elems": (BOUNDS["elems"] // 2, BOUNDS["elems"] // 2)},
              {"elems": (BOUNDS["elems"] // 2, BOUNDS["elems"] // 2 + 1)}),
    "data_segments": ({"datas": BOUNDS["data_segments"]},
                      {"datas": BOUNDS["data_segments"] + 1}),
    "func_locals": ({"locals": BOUNDS["func_locals"], "split_locals": True},
                    {"locals": BOUNDS["func_locals"] + 1, "split_locals": True}),
}

# What the refusal of the module one past each bound says.
REASONS = {
    "types": "module has 100001 function types; at most 100000 are allowed",
    "funcs": "module has 100001 functions (imported and defined); at most 100000 are allowed",
    "imports": "module has 1001 imports; at most 1000 are allowed",
    "exports": "module has 10001 exports; at most 10000 are allowed",
    "globals": "module has 10001 globals; at most 10000 are allowed",
    "tables": "module has 17 tables; at most 16 are allowed",
    "table_elems": "table of 262145 initial elements exceeds the cap of 262144",
    "elem_segments": "module has 10001 element segments; at most 10000 are allowed",
    "elems": "module has 1048577 elements (in all element segments); at most 1048576 are allowed",
    "data_segments": "module has 10001 data segments; at most 10000 are allowed",
    "func_locals": "function 0 has 4097 params and locals (at most 4096 allowed)",
}


if __name__ == "__main__":
    kw = dict(a.split("=", 1) for a in sys.argv[2:])
    with open(sys.argv[1], "wb") as f:
        f.write(build(**{k: int(v) for k, v in kw.items()}))
