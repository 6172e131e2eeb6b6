# SPDX-License-Identifier: Apache-2.0
"""The JavaScript the wasm provider runs (docs/providers/wasm.md, "The
JavaScript it runs"): every ES2022 and ES2023 built-in and syntax feature
with its status, run through the real daemon, and the built-ins plimsoll
adds to QuickJS 2021-03-27 (lazily: compiled on first use) held to their
specifications' behaviour; a built-in one run replaced is back in the next.

Run: cd tests/api && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_wasm_language
"""
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.harness import ClassDaemon  # noqa: E402
from plimsoll_test.payloads import js  # noqa: E402

# Each feature: a script that evaluates to true when the feature works.
# Syntax goes through indirect eval, so a syntax error is that feature's
# alone.
FEATURES = {
    # ES2022
    "class fields": "class A { x = 1 }; new A().x === 1",
    "private fields and methods":
        "class A { #x = 1; #m() { return this.#x } get() { return this.#m() } }; new A().get() === 1",
    "static class fields": "class A { static x = 2 }; A.x === 2",
    "class static blocks": "class A { static { A.y = 3 } }; A.y === 3",
    "ergonomic brand checks (#x in obj)":
        "class A { #x; static has(o) { return #x in o } }; A.has(new A()) && !A.has({})",
    "RegExp match indices (d flag)": "/b/d.exec('ab').indices[0][0] === 1",
    "Array.prototype.at": "[1, 2, 3].at(-1) === 3",
    "String.prototype.at": "'abc'.at(-1) === 'c'",
    "TypedArray.prototype.at": "new Uint8Array([1, 2]).at(-1) === 2",
    "Object.hasOwn": "Object.hasOwn({a: 1}, 'a') && !Object.hasOwn({}, 'toString')",
    "Error cause": "new Error('x', {cause: 7}).cause === 7",
    # ES2023
    "Array.prototype.findLast, findLastIndex":
        "[1, 2, 3, 4].findLast(x => x % 2) === 3 && [1, 2, 3].findLastIndex(x => x > 5) === -1",
    "TypedArray.prototype.findLast, findLastIndex":
        "new Int8Array([1, 2, 3]).findLast(x => x < 3) === 2",
    "Array.prototype.toReversed, toSorted, toSpliced, with":
        "const a = [3, 1, 2]; JSON.stringify([a.toReversed(), a.toSorted(), a.toSpliced(0, 1),"
        " a.with(0, 9), a]) === '[[2,1,3],[1,2,3],[1,2],[9,1,2],[3,1,2]]'",
    "TypedArray.prototype.toReversed, toSorted, with":
        "const t = new Int16Array([3, 1, 2]); t.toSorted() instanceof Int16Array &&"
        " t.toSorted().join() === '1,2,3' && t.toReversed().join() === '2,1,3' &&"
        " t.with(0, 9).join() === '9,1,2' && t.join() === '3,1,2'",
    "hashbang grammar": "(0, eval)('#!/usr/bin/env node\\n1') === 1",
    "symbols as WeakMap keys": "new WeakMap().set(Symbol('k'), 1) instanceof WeakMap",
    # What the web and Node.js give code written today
    "structuredClone": "const o = {d: new Date(0)}; o.self = o;"
                       " const c = structuredClone(o); c.self === c && c.d.getTime() === 0 && c !== o",
    "Object.groupBy, Map.groupBy":
        "Object.groupBy([1, 2, 3], x => x % 2 ? 'odd' : 'even').odd.length === 2 &&"
        " Map.groupBy([1, 2, 3], x => x % 2).get(1).length === 2",
    "Promise.withResolvers": "typeof Promise.withResolvers().resolve === 'function'",
}

PROBE = ("const features = %s;\n"
         "const out = {};\n"
         "for (const [name, src] of Object.entries(features)) {\n"
         "  try { out[name] = (0, eval)(src) === true ? 'ok' : 'wrong'; }\n"
         "  catch (e) { out[name] = e instanceof SyntaxError ? 'syntax error' : 'missing'; }\n"
         "}\n"
         "console.log(JSON.stringify(out));\n" % json.dumps(FEATURES))

# What runs today: the syntax QuickJS 2021-03-27 lacks cannot be added by
# a library, Error's cause would take replacing Error itself, and a
# WeakMap's keys are the engine's to check.
STATUS = {name: "ok" for name in FEATURES}
STATUS.update({"class static blocks": "syntax error",
               "ergonomic brand checks (#x in obj)": "syntax error",
               "RegExp match indices (d flag)": "syntax error",
               "Error cause": "wrong",
               "symbols as WeakMap keys": "missing"})


class Language(ClassDaemon, unittest.TestCase):
    DAEMON_ENV = {"SANDBOX_PROVIDER": "wasm", "SANDBOX_RATE_PER_MIN": "100000",
                  "SANDBOX_RATE_BURST": "10000"}

    def run_js(self, code):
        status, body = self.d.rpc("Run", js(code))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stderr"], "", body)
        return body["stdout"]

    def test_every_es2022_and_es2023_feature_with_its_status(self):
        self.assertEqual(json.loads(self.run_js(PROBE)), STATUS)

    def test_describe_says_what_runs(self):
        status, d = self.d.rpc("Describe", {})
        engine = d["operations"]["snippet"]["engine"]
        self.assertIn("QuickJS 2021-03-27", engine)
        self.assertIn("ES2023 built-ins", engine)

    def test_the_added_built_ins_behave(self):
        out = self.run_js(
            "const r = [];\n"
            "r.push([1, 2, 3].at(-4), [1, 2, 3].at(1.7), 'abc'.at(-0), [].at(0));\n"
            "try { Object.hasOwn(null, 'a'); r.push('no throw'); } catch (e) { r.push(e.name); }\n"
            "try { [1].with(5, 0); } catch (e) { r.push(e.name); }\n"
            "try { [1].toSorted('x'); } catch (e) { r.push(e.name); }\n"
            "const a = [3, 1, 2], s = a.toSorted((x, y) => y - x); r.push(s.join(), a.join());\n"
            "r.push([1, 2, 3, 4].toSpliced(1, 2, 'x').join(), [1, 2].toSpliced().join());\n"
            "r.push(Array.prototype.findLast.call({length: 2, 0: 'a', 1: 'b'}, () => true));\n"
            "const m = new Map([[1, {x: [1]}]]); const c = structuredClone(m);\n"
            "r.push(c.get(1).x[0], c.get(1) !== m.get(1));\n"
            "try { structuredClone(() => 1); } catch (e) { r.push(e.name); }\n"
            "const g = Object.groupBy([1, 2, 3, 4], x => x > 2);\n"
            "r.push(Object.getPrototypeOf(g) === null, g.true.join());\n"
            "const {promise, resolve} = Promise.withResolvers(); resolve(5);\n"
            "promise.then(v => { r.push(v); console.log(JSON.stringify(r)); });\n")
        self.assertEqual(json.loads(out), [
            None, 2, "a", None, "TypeError", "RangeError", "TypeError", "3,2,1", "3,1,2",
            "1,x,4", "1,2", "b", 1, True, "DataCloneError", True, "3,4", 5])

    def test_they_look_like_built_ins(self):
        out = self.run_js(
            "const d = Object.getOwnPropertyDescriptor(Array.prototype, 'at');\n"
            "console.log(JSON.stringify([typeof d.get, typeof d.value, d.writable,\n"
            "  d.enumerable, d.configurable, d.value === [].at, d.value.name,\n"
            "  Object.keys([]).length, 'at' in [], typeof Array.prototype.toSorted]));\n")
        self.assertEqual(json.loads(out),
                         ["undefined", "function", True, False, True, True, "at", 0, True,
                          "function"])

    def test_code_may_replace_them_and_the_next_run_is_pristine(self):
        out = self.run_js(
            "Array.prototype.at = function () { return 'mine'; };\n"
            "const o = {at: 1}; const arr = [1]; arr.findLast = 'own';\n"
            "console.log(JSON.stringify([[].at(0), o.at, arr.findLast,\n"
            "  Object.keys(arr).includes('findLast'), typeof [].findLast]));\n")
        self.assertEqual(json.loads(out), ["mine", 1, "own", True, "function"])
        self.assertEqual(self.run_js("console.log([5, 6].at(-1))"), "6\n")

    def test_a_name_built_at_run_time_finds_them(self):
        # They are in the engine's image, whatever the source names.
        self.assertEqual(self.run_js("const n = 'to' + 'Sorted'; console.log(typeof [][n])"),
                         "function\n")
        self.assertEqual(self.run_js("console.log(typeof globalThis['structured' + 'Clone'])"),
                         "function\n")

    def test_feature_detection_finds_them(self):
        self.assertEqual(self.run_js(
            "console.log(!!Array.prototype.at && 'findLast' in Array.prototype &&"
            " typeof structuredClone === 'function' && typeof globalThis.structuredClone)"),
            "function\n")


if __name__ == "__main__":
    unittest.main()
