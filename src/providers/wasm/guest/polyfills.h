/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyfills.h: the ES2022/ES2023 built-ins QuickJS 2021-03-27 lacks, and
 * a few the web and Node.js give code written today (structuredClone,
 * Object.groupBy, Map.groupBy, Promise.withResolvers), for the snippet's
 * global (docs/providers/wasm.md, "The JavaScript it runs").
 *
 * Each is compiled by plg_init() and put on its object as an ordinary
 * method (writable, configurable, not enumerable), as a built-in is.  The
 * engine's image holds them (js-worker/js_worker.c), so a run pays
 * nothing for them, and every run starts from the image: nothing one run
 * does to them reaches the next.
 *
 * Included once, by qjs_guest.c.
 */
#pragma once

/* The object a built-in belongs to. */
enum builtin_target {
    ON_GLOBAL,       /* globalThis */
    ON_OBJECT,       /* Object */
    ON_MAP,          /* Map */
    ON_PROMISE,      /* Promise */
    ON_ARRAY_PROTO,  /* Array.prototype */
    ON_STRING_PROTO, /* String.prototype */
    ON_TYPED_PROTO,  /* %TypedArray%.prototype, Int8Array.prototype's prototype */
};

struct builtin {
    enum builtin_target target;
    const char *name;
    const char *src; /* a function expression, strict */
};

#define AT_SRC(conv)                                                                               \
    "(function at(index) { 'use strict';\n"                                                        \
    "  const o = " conv ", n = o.length >>> 0;\n"                                                  \
    "  let k = Math.trunc(index) || 0;\n"                                                          \
    "  if (k < 0) k += n;\n"                                                                       \
    "  return k < 0 || k >= n ? undefined : o[k]; })"

#define FIND_LAST_SRC(fname, found, none)                                                          \
    "(function " fname "(pred, thisArg) { 'use strict';\n"                                         \
    "  if (this == null) throw new TypeError('" fname " called on null or undefined');\n"          \
    "  if (typeof pred !== 'function') throw new TypeError(String(pred) + ' is not a "             \
    "function');\n"                                                                                \
    "  const o = Object(this);\n"                                                                  \
    "  for (let k = (o.length >>> 0) - 1; k >= 0; k--)\n"                                          \
    "    if (pred.call(thisArg, o[k], k, o)) return " found ";\n"                                  \
    "  return " none "; })"

/* The copy an array method returns: an Array, or a typed array of the
 * same kind. */
#define COPY_SRC(typed)                                                                            \
    "  const o = Object(this), n = o.length >>> 0;\n"                                              \
    "  const a = " typed ";\n"                                                                     \
    "  for (let k = 0; k < n; k++) a[k] = o[k];\n"

#define ARRAY_COPY "new Array(n)"
#define TYPED_COPY "new (Object.getPrototypeOf(o).constructor)(n)"

#define TO_REVERSED_SRC(typed)                                                                     \
    "(function toReversed() { 'use strict';\n" COPY_SRC(typed) "  return a.reverse(); })"

#define TO_SORTED_SRC(typed)                                                                       \
    "(function toSorted(cmp) { 'use strict';\n"                                                    \
    "  if (cmp !== undefined && typeof cmp !== 'function')\n"                                      \
    "    throw new TypeError('the comparison function must be a function or "                      \
    "undefined');\n" COPY_SRC(typed) "  return a.sort(cmp); })"

#define WITH_SRC(typed)                                                                            \
    "(function (index, value) { 'use strict';\n" COPY_SRC(                                         \
        typed) "  let k = Math.trunc(index) || 0;\n"                                               \
               "  if (k < 0) k += n;\n"                                                            \
               "  if (k < 0 || k >= n) throw new RangeError('Invalid index : ' + index);\n"        \
               "  a[k] = value;\n"                                                                 \
               "  return a; })"

static const char structured_clone_src[] =
    "(function structuredClone(value) { 'use strict';\n"
    "  const seen = new Map();\n"
    "  const fail = (what) => { const e = new Error(what + ' could not be cloned.');\n"
    "    e.name = 'DataCloneError'; throw e; };\n"
    "  const clone = (v) => {\n"
    "    if (typeof v === 'symbol') fail(String(v));\n"
    "    if (typeof v === 'function') fail('function ' + (v.name || '(anonymous)'));\n"
    "    if (v === null || typeof v !== 'object') return v;\n"
    "    if (seen.has(v)) return seen.get(v);\n"
    "    const tag = Object.prototype.toString.call(v);\n"
    "    let out;\n"
    "    switch (tag) {\n"
    "    case '[object Date]': out = new Date(v.getTime()); seen.set(v, out); return out;\n"
    "    case '[object RegExp]': out = new RegExp(v.source, v.flags); seen.set(v, out); return "
    "out;\n"
    "    case '[object Boolean]': case '[object Number]': case '[object String]':\n"
    "    case '[object BigInt]':\n"
    "      out = Object(v.valueOf()); seen.set(v, out); return out;\n"
    "    case '[object ArrayBuffer]': out = v.slice(0); seen.set(v, out); return out;\n"
    "    case '[object Map]': out = new Map(); seen.set(v, out);\n"
    "      for (const [k, x] of v) out.set(clone(k), clone(x)); return out;\n"
    "    case '[object Set]': out = new Set(); seen.set(v, out);\n"
    "      for (const x of v) out.add(clone(x)); return out;\n"
    "    case '[object Error]':\n"
    "      out = new (globalThis[v.name] && globalThis[v.name].prototype instanceof Error ?\n"
    "                 globalThis[v.name] : Error)(v.message);\n"
    "      seen.set(v, out);\n"
    "      if ('stack' in v) out.stack = String(v.stack);\n"
    "      if ('cause' in v) out.cause = clone(v.cause);\n"
    "      return out;\n"
    "    case '[object Array]': out = new Array(v.length); seen.set(v, out); break;\n"
    "    case '[object Object]': out = {}; seen.set(v, out); break;\n"
    "    default:\n"
    "      if (ArrayBuffer.isView(v)) {\n"
    "        const b = clone(v.buffer);\n"
    "        out = v instanceof DataView ? new DataView(b, v.byteOffset, v.byteLength)\n"
    "            : new (Object.getPrototypeOf(v).constructor)(b, v.byteOffset, v.length);\n"
    "        seen.set(v, out); return out;\n"
    "      }\n"
    "      fail(tag.slice(8, -1));\n"
    "    }\n"
    "    for (const k of Object.keys(v)) out[k] = clone(v[k]);\n"
    "    return out;\n"
    "  };\n"
    "  if (arguments.length === 0) throw new TypeError(\"structuredClone: 1 argument "
    "required, but only 0 present.\");\n"
    "  return clone(value); })";

static const char group_by_src[] =
    "(function groupBy(items, callback) { 'use strict';\n"
    "  if (typeof callback !== 'function') throw new TypeError('callback is not a function');\n"
    "  const out = Object.create(null); let k = 0;\n"
    "  for (const x of items) {\n"
    "    const key = callback(x, k++);\n"
    "    const p = typeof key === 'symbol' ? key : String(key);\n"
    "    (out[p] || (out[p] = [])).push(x);\n"
    "  }\n"
    "  return out; })";

static const char map_group_by_src[] =
    "(function groupBy(items, callback) { 'use strict';\n"
    "  if (typeof callback !== 'function') throw new TypeError('callback is not a function');\n"
    "  const out = new Map(); let k = 0;\n"
    "  for (const x of items) {\n"
    "    let key = callback(x, k++);\n"
    "    if (key === 0) key = 0; /* -0 and +0 are one key */\n"
    "    const g = out.get(key);\n"
    "    if (g) g.push(x); else out.set(key, [x]);\n"
    "  }\n"
    "  return out; })";

static const struct builtin builtins[] = {
    /* ES2022 */
    {ON_ARRAY_PROTO, "at", AT_SRC("Object(this)")},
    {ON_STRING_PROTO, "at",
     "(function at(index) { 'use strict';\n"
     "  if (this == null) throw new TypeError('String.prototype.at called on null or "
     "undefined');\n"
     "  const s = String(this), n = s.length;\n"
     "  let k = Math.trunc(index) || 0;\n"
     "  if (k < 0) k += n;\n"
     "  return k < 0 || k >= n ? undefined : s[k]; })"},
    {ON_TYPED_PROTO, "at", AT_SRC("this")},
    {ON_OBJECT, "hasOwn",
     "(function hasOwn(o, key) { 'use strict';\n"
     "  if (o == null) throw new TypeError('Cannot convert undefined or null to object');\n"
     "  return Object.prototype.hasOwnProperty.call(o, key); })"},
    /* ES2023 */
    {ON_ARRAY_PROTO, "findLast", FIND_LAST_SRC("findLast", "o[k]", "undefined")},
    {ON_ARRAY_PROTO, "findLastIndex", FIND_LAST_SRC("findLastIndex", "k", "-1")},
    {ON_TYPED_PROTO, "findLast", FIND_LAST_SRC("findLast", "o[k]", "undefined")},
    {ON_TYPED_PROTO, "findLastIndex", FIND_LAST_SRC("findLastIndex", "k", "-1")},
    {ON_ARRAY_PROTO, "toReversed", TO_REVERSED_SRC(ARRAY_COPY)},
    {ON_ARRAY_PROTO, "toSorted", TO_SORTED_SRC(ARRAY_COPY)},
    {ON_ARRAY_PROTO, "toSpliced",
     "(function toSpliced(start, skipCount) { 'use strict';\n"
     "  const a = Array.prototype.slice.call(Object(this));\n"
     "  Array.prototype.splice.apply(a, arguments);\n"
     "  return a; })"},
    {ON_ARRAY_PROTO, "with", WITH_SRC(ARRAY_COPY)},
    {ON_TYPED_PROTO, "toReversed", TO_REVERSED_SRC(TYPED_COPY)},
    {ON_TYPED_PROTO, "toSorted", TO_SORTED_SRC(TYPED_COPY)},
    {ON_TYPED_PROTO, "with", WITH_SRC(TYPED_COPY)},
    /* what the web and Node.js give (ES2024, HTML) */
    {ON_GLOBAL, "structuredClone", structured_clone_src},
    {ON_OBJECT, "groupBy", group_by_src},
    {ON_MAP, "groupBy", map_group_by_src},
    {ON_PROMISE, "withResolvers",
     "(function withResolvers() { 'use strict';\n"
     "  let resolve, reject;\n"
     "  const promise = new this((a, b) => { resolve = a; reject = b; });\n"
     "  return {promise, resolve, reject}; })"},
};

/* The object a built-in belongs to, found from the global object as the
 * engine made it (no script runs for it). */
static JSValue builtin_target(JSContext *ctx, enum builtin_target t) {
    static const char *const ctor[] = {
        [ON_OBJECT] = "Object",       [ON_MAP] = "Map",
        [ON_PROMISE] = "Promise",     [ON_ARRAY_PROTO] = "Array",
        [ON_STRING_PROTO] = "String", [ON_TYPED_PROTO] = "Int8Array",
    };
    JSValue global = JS_GetGlobalObject(ctx);
    if (t == ON_GLOBAL)
        return global;
    JSValue c = JS_GetPropertyStr(ctx, global, ctor[t]);
    JS_FreeValue(ctx, global);
    if (JS_IsException(c) || t == ON_OBJECT || t == ON_MAP || t == ON_PROMISE)
        return c;
    JSValue proto = JS_GetPropertyStr(ctx, c, "prototype");
    JS_FreeValue(ctx, c);
    if (JS_IsException(proto) || t != ON_TYPED_PROTO)
        return proto;
    JSValue typed = JS_GetPrototype(ctx, proto); /* %TypedArray%.prototype */
    JS_FreeValue(ctx, proto);
    return typed;
}

/* Every one compiled and put in place. */
static int add_builtins(JSContext *ctx) {
    for (size_t i = 0; i < countof(builtins); i++) {
        const struct builtin *b = &builtins[i];
        JSValue f =
            JS_Eval(ctx, b->src, strlen(b->src), "<plimsoll-builtins>", JS_EVAL_TYPE_GLOBAL);
        if (JS_IsException(f))
            return -1;
        JSValue target = builtin_target(ctx, b->target);
        if (JS_IsException(target)) {
            JS_FreeValue(ctx, f);
            return -1;
        }
        int r = JS_DefinePropertyValueStr(ctx, target, b->name, f,
                                          JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
        JS_FreeValue(ctx, target);
        if (r < 0)
            return -1;
    }
    return 0;
}
