#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# build_modules.sh - build the WebAssembly test modules for wasi-runner.
#
# Usage: tests/build_modules.sh OUTDIR
#
# C modules are compiled with clang-14 for wasm32-wasi against Debian's
# wasi-libc (headers in /usr/include/wasm32-wasi, libraries in
# /usr/lib/wasm32-wasi, which clang finds without --sysroot; set
# WASI_SYSROOT to use another sysroot).  .wat modules are assembled with
# wabt's wat2wasm.  Two modules with thousands of locals are generated here
# rather than committed.
set -eu

out=${1:?usage: build_modules.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
src="$here/modules"
CLANG=${CLANG:-clang-14}
WAT2WASM=${WAT2WASM:-wat2wasm}
sysroot_flag=
if [ -n "${WASI_SYSROOT:-}" ]; then
    sysroot_flag="--sysroot=$WASI_SYSROOT"
fi

mkdir -p "$out"

for c in "$src"/*.c; do
    name=$(basename "$c" .c)
    # shellcheck disable=SC2086
    "$CLANG" --target=wasm32-wasi $sysroot_flag -O2 -Wall -Werror \
        -Wl,--strip-all -o "$out/$name.wasm" "$c"
done

for w in "$src"/*.wat; do
    name=$(basename "$w" .wat)
    "$WAT2WASM" -o "$out/$name.wasm" "$w"
done

# manylocals: one function with 10000 i64 locals (over the 4096 cap).
# fatlocals: 4000 locals per frame, recursing without bound: must trap with
# the host's memory use bounded (4000 x 16 bytes x call-stack depth).
# opstack: 20000 operands left on the value stack across a recursive call;
# wabt does not bound its value stack, so this is the module that makes the
# host allocate most per byte of module (about 0.5 GB for 60 KB).
gen_locals() { # $1 = count, $2 = body
    printf '(module\n  (memory (export "memory") 1)\n  (func $f (param i32)'
    i=0
    while [ "$i" -lt "$1" ]; do printf ' (local i64)'; i=$((i + 1)); done
    printf '\n    %s)\n  (func (export "_start") (call $f (i32.const 0))))\n' "$2"
}
gen_locals 10000 '' > "$out/manylocals.wat"
gen_locals 4000 '(call $f (i32.add (local.get 0) (i32.const 1)))' \
    > "$out/fatlocals.wat"
"$WAT2WASM" -o "$out/manylocals.wasm" "$out/manylocals.wat"
"$WAT2WASM" -o "$out/fatlocals.wasm" "$out/fatlocals.wat"
{
    printf '(module\n  (memory (export "memory") 1)\n  (func $f\n'
    i=0; while [ "$i" -lt 20000 ]; do printf ' i64.const 0'; i=$((i + 1)); done
    printf '\n    call $f\n'
    i=0; while [ "$i" -lt 20000 ]; do printf ' drop'; i=$((i + 1)); done
    printf ')\n  (func (export "_start") (call $f)))\n'
} > "$out/opstack.wat"
"$WAT2WASM" -o "$out/opstack.wasm" "$out/opstack.wat"

# garbage: bytes that are not a module at all.
printf 'this is not a WebAssembly module\n' > "$out/garbage.wasm"
