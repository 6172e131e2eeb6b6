# SPDX-License-Identifier: Apache-2.0
"""The wasm guest's JavaScript on the host (src/providers/wasm/guest/):
every .js file through `node --check`, and the console's formatter
(format.js, which the guest evaluates to format(args)) run by node, once
against fixed answers and once against what the real daemon prints for the
same console.log calls (the guest's QuickJS running the same file, embedded
by scripts/build/embed).  The daemon half needs a build (PLIMSOLL_BUILD_DIR,
default ./build)."""
import json
import os
import shutil
import subprocess
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GUEST = os.path.join(ROOT, "src", "providers", "wasm", "guest")
FORMAT_JS = os.path.join(GUEST, "format.js")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from plimsoll_test.harness import PLIMSOLLD, ClassDaemon  # noqa: E402
from plimsoll_test.payloads import js  # noqa: E402

NODE = shutil.which("node")
SEP = "---8<---"

# console.log's arguments, as JavaScript array literals.  Each has a value
# or a '%' format string that takes the formatter's path in the guest
# (qjs_guest.c prints strings, integers, booleans, null and undefined alone
# without it).
CASES = [
    "[{a: 1, 'b-c': 'x', [Symbol('s')]: 2}]",
    "[[1, 'two', [3, [4, [5, [6]]]]]]",
    "[new Map([['k', {v: [1, 2]}]]), new Set([1, 'a'])]",
    "['%s is %d years, %i, %f %j %o %O %c%% %x', 'Bob', 42.5, 42.9, '3.25x', {a: [1]}, [1],"
    " {b: 2}, 'color: red']",
    "[(() => { const o = {name: 'loop'}; o.self = o; return o; })()]",
    "[Array.from({length: 120}, (_, i) => i)]",
    "[new Uint8Array([1, 2, 3]), [, 1], -0, 10n, '%d', 7n]",
    "[Object.create(null), new (class Point { constructor() { this.x = 1; } })()]",
    "[{long: 'x'.repeat(80), nested: {deep: {deeper: {deepest: 1}}}}]",
    "[function named() {}, () => 1, undefined, null, true, 1.5, 'top']",
    "[new Date(0), new Date(NaN), /a+b/gi, Promise.resolve(1)]",
    "[{get g() { return 1; }, n: NaN, i: -Infinity, s: 'it\\'s\\n'}]",
    "[(() => { const e = new TypeError('bad'); e.stack = ''; return e; })()]",
]

# format.js run by node: print format(args) for each case, then SEP.
RUNNER = r"""
const fs = require('fs');
const vm = require('vm');
const format = vm.runInThisContext(fs.readFileSync(process.argv[1], 'utf8'),
                                   {filename: process.argv[1]});
for (const c of JSON.parse(process.argv[2]))
  process.stdout.write(format(vm.runInThisContext(c)) + '\n' + process.argv[3] + '\n');
"""


# builtins.js run by node: each built-in it adds, called on the same values
# as node's own where node has one (Node.js 20 has most; groupBy and
# withResolvers came later, and are checked against written answers).
BUILTINS_RUNNER = r"""
const fs = require('fs');
const util = require('util');
const vm = require('vm');
const path = process.argv[1];
const list = vm.runInThisContext(fs.readFileSync(path, 'utf8'), {filename: path});
const arr = () => [3, 1, 4, 1, 5];
const typed = () => new Int8Array([3, 1, 4, 1, 5]);
const odd = (x) => x % 2 === 1;
const never = () => false;
const args = {
  at: [[0], [-1], [9], [1.7], ['x'], []],
  hasOwn: [[{a: 1}, 'a'], [{}, 'b'], [Object.create({p: 1}), 'p']],
  findLast: [[odd], [never]],
  findLastIndex: [[odd], [never]],
  toReversed: [[]],
  toSorted: [[], [(a, b) => b - a], ['not a function']],
  toSpliced: [[1, 1, 'x'], [0], [-2, 1], []],
  with: [[1, 9], [-1, 7], [9, 0], ['x', 2]],
  structuredClone: [[{a: [1, {b: 2}], d: new Date(0), m: new Map([[1, new Set([2])]]),
                     r: /x+/g, u: new Uint8Array([1, 2]), e: new RangeError('r')}],
                    [Symbol('s')], [() => 1], []],
};
const name = (v) => (v === Array.prototype ? 'array' : v === String.prototype ? 'string' :
  v === Object.getPrototypeOf(Int8Array.prototype) ? 'typed' : 'static');
const self = {array: arr, string: () => 'abcde', typed, static: null};
const call = (f, me, a) => {
  try { return {value: f.apply(me, a)}; } catch (e) { return {error: e.name}; }
};
// Cross-context values compare by their JSON-like shape.
const same = (x, y) => util.isDeepStrictEqual(JSON.parse(JSON.stringify(util.inspect(x))),
                                              JSON.parse(JSON.stringify(util.inspect(y))));
let compared = 0;
const bad = [];
for (const [where, key, fn] of list) {
  const kind = name(where);
  const native = kind === 'array' ? Array.prototype[key] : kind === 'string' ? String.prototype[key]
    : kind === 'typed' ? Object.getPrototypeOf(Int8Array.prototype)[key]
    : {Object, Map, Promise}[where.constructor === Function ? where.name : ''] ?.[key]
      ?? (key === 'structuredClone' ? structuredClone : undefined);
  if (typeof native !== 'function') continue;
  // Node.js 20's structuredClone has length 0; WebIDL's, and ours, 1
  if (fn.length !== native.length && key !== 'structuredClone') bad.push([kind, key, 'length', fn.length, native.length]);
  if (fn.name !== native.name) bad.push([kind, key, 'name', fn.name, native.name]);
  for (const a of args[key] || []) {
    const me = self[kind] ? self[kind]() : where;
    const mine = call(fn, me, a), theirs = call(native, self[kind] ? self[kind]() : globalThis, a);
    compared++;
    if (!same(mine, theirs)) bad.push([kind, key, util.inspect(a), util.inspect(mine),
                                       util.inspect(theirs)]);
  }
}
const group = list.filter(([, k]) => k === 'groupBy').map(([, , f]) => f);
const o = group[0]([1, 2, 3], (x) => (odd(x) ? 'odd' : 'even'));
const m = group[1]([1, 2, 3, -0, 0], (x) => (x === 0 ? x : odd(x)));
if (util.inspect({...o}) !== "{ odd: [ 1, 3 ], even: [ 2 ] }" || Object.getPrototypeOf(o) !== null)
  bad.push(['Object.groupBy', util.inspect(o)]);
if (util.inspect(m) !== 'Map(3) { true => [ 1, 3 ], false => [ 2 ], 0 => [ -0, 0 ] }')
  bad.push(['Map.groupBy', util.inspect(m)]);
const wr = list.find(([, k]) => k === 'withResolvers')[2].call(Promise);
if (!(wr.promise instanceof Promise) || typeof wr.resolve !== 'function') bad.push(['withResolvers']);
process.stdout.write(JSON.stringify({compared, bad, names: list.map(([w, k]) => name(w) + '.' + k)}));
"""


def node_format(cases):
    out = subprocess.run([NODE, "-e", RUNNER, FORMAT_JS, json.dumps(cases), SEP],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return out.split("\n" + SEP + "\n")[:-1]


def snippet(cases):
    """A snippet printing each case with console.log, then SEP."""
    return "".join("console.log(...(%s));\nconsole.log(%s);\n" % (c, json.dumps(SEP))
                   for c in cases)


@unittest.skipIf(NODE is None, "node is not installed")
class GuestScripts(unittest.TestCase):
    def test_every_script_parses(self):
        scripts = sorted(f for f in os.listdir(GUEST) if f.endswith(".js"))
        self.assertIn("format.js", scripts)
        for name in scripts:
            with self.subTest(script=name):
                r = subprocess.run([NODE, "--check", os.path.join(GUEST, name)],
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_builtins_agree_with_node(self):
        out = subprocess.run([NODE, "-e", BUILTINS_RUNNER, os.path.join(GUEST, "builtins.js")],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        got = json.loads(out.stdout)
        self.assertEqual(got["bad"], [])
        self.assertGreaterEqual(got["compared"], 40, got)
        for want in ("array.at", "string.at", "typed.toSorted", "static.structuredClone",
                     "static.groupBy", "static.withResolvers"):
            self.assertIn(want, got["names"])

    def test_formatter_on_the_host(self):
        want = {
            "[{a: 1, b: 'x'}]": "{ a: 1, b: 'x' }",
            "['%s=%d', 'n', 4, 'rest']": "n=4 rest",
            "[(() => { const o = {name: 'loop'}; o.self = o; return o; })()]":
                "{ name: 'loop', self: [Circular] }",
            "[new Map([['k', 1]])]": "Map(1) { 'k' => 1 }",
            "[[[[[1]]]]]": "[ [ [ [Array] ] ] ]",
            "[-0, 'top', [undefined, null]]": "-0 top [ undefined, null ]",
            "[Array.from({length: 30}, (_, i) => i)]":
                "[\n  " + ",\n  ".join(str(i) for i in range(30)) + "\n]",
        }
        cases = list(want)
        self.assertEqual(dict(zip(cases, node_format(cases))), want)


@unittest.skipIf(NODE is None, "node is not installed")
@unittest.skipUnless(os.path.exists(PLIMSOLLD), "no build at " + PLIMSOLLD)
class FormatterAgainstTheDaemon(ClassDaemon, unittest.TestCase):
    DAEMON_ENV = {"SANDBOX_PROVIDER": "wasm", "SANDBOX_OUTPUT_BYTES": "65536"}

    def test_same_lines_as_the_guest(self):
        status, body = self.d.rpc("Run", js(snippet(CASES)))
        self.assertEqual(status, 200, body)
        self.assertEqual((body["exit_code"], body["stderr"]), (0, ""), body)
        guest = body["stdout"].split("\n" + SEP + "\n")[:-1]
        host = node_format(CASES)
        self.assertEqual(len(guest), len(CASES), body["stdout"])
        for case, g, h in zip(CASES, guest, host):
            with self.subTest(case=case):
                self.assertEqual(h, g)


if __name__ == "__main__":
    unittest.main()
