/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Guest shim: the only C code compiled together with QuickJS to wasm32-wasi.
 *
 * It exports a three-call API to the host (see guest_abi.h): plg_init() to
 * make the QuickJS runtime and context with every global a snippet sees,
 * plg_alloc() to get a buffer in linear memory for the script and stdin,
 * and plg_run() to execute a script once in that context.  The host calls
 * plg_init() once per worker and keeps the linear memory and globals it
 * leaves as the engine's image; every run starts from a copy of that image
 * and its memory is thrown away afterwards (js-worker/js_worker.c), so
 * nothing here needs to be freed or reset, and plg_run() is called at most
 * once per copy.  What plg_init() makes is the same for every run; what must differ
 * between runs (Math.random's seed) plg_run() takes from the host.
 *
 * What the script sees: the standard ECMAScript globals of QuickJS
 * 2021-03-27 (with BigInt), plus `console` (log/info/debug to stdout,
 * error/warn/trace to stderr) and `readStdin()` (the whole stdin as a
 * string), and `plimsoll.request(options)` / `plimsoll.hasGrant` (HTTP
 * through the broker of the run's grant, if any; see js_plimsoll_request).
 * QuickJS's std/os modules are not compiled in, so there is no file,
 * network, process or environment access; the WASI calls the module
 * imports are fd_write, clock_time_get, fd_close, fd_seek and
 * fd_fdstat_get, all implemented by the host (js-worker/wasi_host.c), and
 * its only other imports are plimsoll.broker_call/broker_reply
 * (guest_abi.h), implemented by the worker (js-worker/js_worker.c).
 *
 * Out of memory: QuickJS allocates through guest_malloc() and friends,
 * which set g_alloc_failed when malloc() returns NULL (linear memory could
 * not grow past the host's cap).  A run that ends in an uncaught exception
 * after an allocation failure is reported as PLG_RUN_OOM.  A 64 KiB reserve
 * block is freed before printing the error so the message can be built
 * even at the cap.
 */
#include <malloc.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quickjs.h"
#include "cutils.h"

#include "builtins_js.h" /* generated from builtins.js by scripts/build/embed */
#include "format_js.h"   /* generated from format.js by scripts/build/embed */
#include "guest_abi.h"

#define EXPORT(name) __attribute__((export_name(name), visibility("default")))
/* An undefined function wasm-ld leaves as an import of module "plimsoll". */
#define IMPORT(name) __attribute__((import_module("plimsoll"), import_name(name)))

IMPORT("broker_call") int32_t plimsoll_broker_call(uint32_t req_ptr, uint32_t req_len);
IMPORT("broker_reply") int32_t plimsoll_broker_reply(uint32_t dst_ptr, uint32_t cap);

/* QuickJS adds this per block in its own accounting (see quickjs.c). */
#define GUEST_MALLOC_OVERHEAD 8
/* Freed on out-of-memory so the error can still be formatted and printed. */
#define GUEST_OOM_RESERVE (64 * 1024)
/* Guest shadow stack given to wasm-ld (-z stack-size) minus headroom for
 * C frames below QuickJS's last stack check. */
#define GUEST_JS_MAX_STACK (PLG_SHADOW_STACK_SIZE - 128 * 1024)

static bool g_alloc_failed;
static void *g_oom_reserve;
static const char *g_stdin_data;
static size_t g_stdin_len;
static uint32_t g_broker_max_request;      /* 0: this run has no grant */
static JSValue g_plimsoll = JS_UNDEFINED;  /* the plimsoll object, made by plg_init */
static JSValue g_formatter = JS_UNDEFINED; /* console's formatter, compiled by plg_init */
static JSRuntime *g_rt;                    /* made by plg_init, NULL if it failed */
static JSContext *g_ctx;
static uint64_t g_random_state; /* Math.random's, seeded by plg_run */

/* Unhandled promise rejections still pending at the end of the run. */
struct rejection {
    JSValue promise;
    JSValue reason;
};
static struct rejection *g_rejections;
static size_t g_n_rejections, g_cap_rejections;

/* ---- allocator with an out-of-memory flag -------------------------------- */

static void *guest_malloc(JSMallocState *s, size_t size) {
    void *p;

    if (s->malloc_size + size > s->malloc_limit) {
        g_alloc_failed = true;
        return NULL;
    }
    p = malloc(size);
    if (!p) {
        g_alloc_failed = true;
        return NULL;
    }
    s->malloc_count++;
    s->malloc_size += malloc_usable_size(p) + GUEST_MALLOC_OVERHEAD;
    return p;
}

static void guest_free(JSMallocState *s, void *ptr) {
    if (!ptr)
        return;
    s->malloc_count--;
    s->malloc_size -= malloc_usable_size(ptr) + GUEST_MALLOC_OVERHEAD;
    free(ptr);
}

static void *guest_realloc(JSMallocState *s, void *ptr, size_t size) {
    size_t old_size;
    void *p;

    if (!ptr) {
        if (size == 0)
            return NULL;
        return guest_malloc(s, size);
    }
    old_size = malloc_usable_size(ptr);
    if (size == 0) {
        guest_free(s, ptr);
        return NULL;
    }
    if (s->malloc_size + size - old_size > s->malloc_limit) {
        g_alloc_failed = true;
        return NULL;
    }
    p = realloc(ptr, size);
    if (!p) {
        g_alloc_failed = true;
        return NULL;
    }
    s->malloc_size += malloc_usable_size(p) - old_size;
    return p;
}

static size_t guest_usable_size(const void *ptr) {
    return malloc_usable_size((void *)ptr);
}

static const JSMallocFunctions guest_mf = {
    guest_malloc,
    guest_free,
    guest_realloc,
    guest_usable_size,
};

/* ---- output ------------------------------------------------------------ */

/* Write all of buf to fd (1 or 2).  The host never blocks and never
 * returns a short count except on truncation, which it hides from us. */
static void write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);

        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

static void write_str(int fd, const char *s) {
    write_all(fd, s, strlen(s));
}

/*
 * Node-like value formatting for console.* and uncaught errors: format.js,
 * embedded by scripts/build/embed as pl_guest_format and compiled on first
 * use only (hello-world never pays for it).  format(args) returns one line
 * without the trailing newline.  Returns the formatter function (borrowed
 * reference), compiling it once.
 */
static JSValueConst get_formatter(JSContext *ctx) {
    if (JS_IsUndefined(g_formatter)) {
        JSValue f = JS_Eval(ctx, pl_guest_format, sizeof(pl_guest_format) - 1, "<plimsoll-console>",
                            JS_EVAL_TYPE_GLOBAL);
        if (JS_IsException(f))
            return JS_EXCEPTION;
        g_formatter = f;
    }
    return g_formatter;
}

/* True if v can be printed without the JS formatter. */
static bool is_simple(JSValueConst v) {
    int tag = JS_VALUE_GET_TAG(v);

    if (tag == JS_TAG_FLOAT64) {
        double d = JS_VALUE_GET_FLOAT64(v);
        return !(d == 0 && signbit(d)); /* -0 prints as "-0" in node */
    }
    return tag == JS_TAG_STRING || tag == JS_TAG_INT || tag == JS_TAG_BOOL || tag == JS_TAG_NULL ||
           tag == JS_TAG_UNDEFINED;
}

/* Format console arguments into one line (without newline) in *buf.
 * Returns -1 with a JS exception pending on failure. */
static int format_args(JSContext *ctx, int argc, JSValueConst *argv, DynBuf *buf) {
    bool simple = true;
    int i;

    for (i = 0; i < argc && simple; i++)
        simple = is_simple(argv[i]);
    if (simple && argc > 1 && JS_IsString(argv[0])) {
        /* A format string needs the slow path if it contains '%'. */
        const char *s = JS_ToCString(ctx, argv[0]);
        if (!s)
            return -1;
        simple = strchr(s, '%') == NULL;
        JS_FreeCString(ctx, s);
    }

    if (simple) {
        for (i = 0; i < argc; i++) {
            size_t len;
            const char *s = JS_ToCStringLen(ctx, &len, argv[i]);
            if (!s)
                return -1;
            if (i > 0)
                dbuf_putc(buf, ' ');
            dbuf_put(buf, (const uint8_t *)s, len);
            JS_FreeCString(ctx, s);
        }
    } else {
        JSValueConst fmt = get_formatter(ctx);
        JSValue arr, res;
        const char *s;
        size_t len;

        if (JS_IsException(fmt))
            return -1;
        arr = JS_NewArray(ctx);
        if (JS_IsException(arr))
            return -1;
        for (i = 0; i < argc; i++) {
            if (JS_SetPropertyUint32(ctx, arr, (uint32_t)i, JS_DupValue(ctx, argv[i])) < 0) {
                JS_FreeValue(ctx, arr);
                return -1;
            }
        }
        res = JS_Call(ctx, fmt, JS_UNDEFINED, 1, (JSValueConst *)&arr);
        JS_FreeValue(ctx, arr);
        if (JS_IsException(res))
            return -1;
        s = JS_ToCStringLen(ctx, &len, res);
        JS_FreeValue(ctx, res);
        if (!s)
            return -1;
        dbuf_put(buf, (const uint8_t *)s, len);
        JS_FreeCString(ctx, s);
    }
    if (dbuf_error(buf)) {
        JS_ThrowOutOfMemory(ctx);
        return -1;
    }
    return 0;
}

/* console.log & co.; magic is the file descriptor (1 or 2). */
static JSValue js_console_write(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv,
                                int magic) {
    DynBuf buf;

    (void)this_val;
    dbuf_init2(&buf, JS_GetRuntime(ctx), (DynBufReallocFunc *)js_realloc_rt);
    if (format_args(ctx, argc, argv, &buf) < 0) {
        dbuf_free(&buf);
        return JS_EXCEPTION;
    }
    dbuf_putc(&buf, '\n');
    if (dbuf_error(&buf)) {
        dbuf_free(&buf);
        return JS_ThrowOutOfMemory(ctx);
    }
    write_all(magic, (const char *)buf.buf, buf.size);
    dbuf_free(&buf);
    return JS_UNDEFINED;
}

/* readStdin(): the whole of stdin, decoded as UTF-8, as one string. */
static JSValue js_read_stdin(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    (void)this_val;
    (void)argc;
    (void)argv;
    return JS_NewStringLen(ctx, g_stdin_data ? g_stdin_data : "", g_stdin_len);
}

static const JSCFunctionListEntry console_funcs[] = {
    JS_CFUNC_MAGIC_DEF("log", 0, js_console_write, 1),
    JS_CFUNC_MAGIC_DEF("info", 0, js_console_write, 1),
    JS_CFUNC_MAGIC_DEF("debug", 0, js_console_write, 1),
    JS_CFUNC_MAGIC_DEF("error", 0, js_console_write, 2),
    JS_CFUNC_MAGIC_DEF("warn", 0, js_console_write, 2),
    JS_CFUNC_MAGIC_DEF("trace", 0, js_console_write, 2),
};

/* ---- plimsoll.request: HTTP through the grant's broker ---------------------- */

/* Throw a plain Error (QuickJS 2021-03-27 has no JS_ThrowError). */
static JSValue throw_error(JSContext *ctx, const char *msg) {
    JSValue err = JS_NewError(ctx);

    if (JS_IsException(err))
        return err;
    if (JS_DefinePropertyValueStr(ctx, err, "message", JS_NewString(ctx, msg),
                                  JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE) < 0) {
        JS_FreeValue(ctx, err);
        return JS_EXCEPTION;
    }
    return JS_Throw(ctx, err);
}

static JSValue throw_broker_error(JSContext *ctx, int32_t code) {
    switch (code) {
    case PLG_BROKER_ENOGRANT: return throw_error(ctx, "plimsoll.request: this run has no grant");
    case PLG_BROKER_ETOOBIG:
        return throw_error(ctx, "plimsoll.request: request too large for this grant");
    case PLG_BROKER_EREPLYBIG:
        return throw_error(ctx, "plimsoll.request: broker reply too large for this grant");
    case PLG_BROKER_ECALLLIMIT:
        return throw_error(ctx, "plimsoll.request: this grant's call limit was reached");
    case PLG_BROKER_EUNAVAIL: return throw_error(ctx, "plimsoll.request: broker unavailable");
    default: return throw_error(ctx, "plimsoll.request: broker unavailable (host error)");
    }
}

/* Copy options.headers (undefined -> {}) into a new plain object, checking
 * that it is an object whose own enumerable string-keyed values are all
 * strings.  Values are read once, so a getter cannot change what is sent. */
static JSValue copy_headers(JSContext *ctx, JSValueConst headers) {
    JSPropertyEnum *tab = NULL;
    uint32_t n = 0;
    JSValue out;

    out = JS_NewObject(ctx);
    if (JS_IsException(out) || JS_IsUndefined(headers))
        return out;
    if (!JS_IsObject(headers) || JS_IsArray(ctx, headers) || JS_IsFunction(ctx, headers)) {
        JS_FreeValue(ctx, out);
        return JS_ThrowTypeError(ctx, "plimsoll.request: headers must be an object");
    }
    if (JS_GetOwnPropertyNames(ctx, &tab, &n, headers, JS_GPN_STRING_MASK | JS_GPN_ENUM_ONLY) < 0) {
        JS_FreeValue(ctx, out);
        return JS_EXCEPTION;
    }
    for (uint32_t i = 0; i < n; i++) {
        JSValue v = JS_GetProperty(ctx, headers, tab[i].atom);

        if (JS_IsException(v))
            goto fail;
        if (!JS_IsString(v)) {
            JS_FreeValue(ctx, v);
            JS_ThrowTypeError(ctx, "plimsoll.request: header values must be strings");
            goto fail;
        }
        if (JS_DefinePropertyValue(ctx, out, tab[i].atom, v, JS_PROP_C_W_E) < 0)
            goto fail;
    }
    for (uint32_t i = 0; i < n; i++)
        JS_FreeAtom(ctx, tab[i].atom);
    js_free(ctx, tab);
    return out;
fail:
    for (uint32_t i = 0; i < n; i++)
        JS_FreeAtom(ctx, tab[i].atom);
    js_free(ctx, tab);
    JS_FreeValue(ctx, out);
    return JS_EXCEPTION;
}

/* options.<name> as a string value; undefined gives dflt (NULL: required). */
static JSValue get_string_option(JSContext *ctx, JSValueConst options, const char *name,
                                 const char *dflt) {
    JSValue v = JS_GetPropertyStr(ctx, options, name);

    if (JS_IsException(v) || JS_IsString(v))
        return v;
    if (JS_IsUndefined(v) && dflt)
        return JS_NewString(ctx, dflt);
    JS_FreeValue(ctx, v);
    return JS_ThrowTypeError(ctx, "plimsoll.request: %s must be a string", name);
}

/* The request object, in the key order the broker sees:
 * {"method":..,"path":..,"headers":{..},"body":..}. */
static JSValue build_request(JSContext *ctx, JSValueConst options) {
    static const char *const keys[] = {"method", "path", "headers", "body"};
    JSValue vals[4] = {JS_UNDEFINED, JS_UNDEFINED, JS_UNDEFINED, JS_UNDEFINED};
    JSValue req = JS_EXCEPTION, h;
    int i;

    if (!JS_IsObject(options) || JS_IsArray(ctx, options) || JS_IsFunction(ctx, options))
        return JS_ThrowTypeError(ctx, "plimsoll.request: options must be an object");
    vals[0] = get_string_option(ctx, options, "method", "GET");
    if (JS_IsException(vals[0]))
        goto out;
    vals[1] = get_string_option(ctx, options, "path", NULL);
    if (JS_IsException(vals[1]))
        goto out;
    h = JS_GetPropertyStr(ctx, options, "headers");
    if (JS_IsException(h))
        goto out;
    vals[2] = copy_headers(ctx, h);
    JS_FreeValue(ctx, h);
    if (JS_IsException(vals[2]))
        goto out;
    vals[3] = get_string_option(ctx, options, "body", "");
    if (JS_IsException(vals[3]))
        goto out;
    req = JS_NewObject(ctx);
    if (JS_IsException(req))
        goto out;
    for (i = 0; i < 4; i++) {
        JSValue v = vals[i];

        vals[i] = JS_UNDEFINED;
        if (JS_DefinePropertyValueStr(ctx, req, keys[i], v, JS_PROP_C_W_E) < 0) {
            JS_FreeValue(ctx, req);
            req = JS_EXCEPTION;
            goto out;
        }
    }
out:
    for (i = 0; i < 4; i++)
        JS_FreeValue(ctx, vals[i]);
    return req;
}

/*
 * plimsoll.request(options): validate and serialise the request, hand the
 * JSON bytes to the host (broker_call), and return JSON.parse of its reply.
 * Synchronous: the whole guest waits, under the run's deadline.
 */
static JSValue js_plimsoll_request(JSContext *ctx, JSValueConst this_val, int argc,
                                   JSValueConst *argv) {
    JSValue req, json, ret;
    const char *bytes;
    size_t len;
    int32_t n;
    char *reply;

    (void)this_val;
    req = build_request(ctx, argc > 0 ? argv[0] : JS_UNDEFINED);
    if (JS_IsException(req))
        return req;
    json = JS_JSONStringify(ctx, req, JS_UNDEFINED, JS_UNDEFINED);
    JS_FreeValue(ctx, req);
    if (JS_IsException(json))
        return json;
    bytes = JS_ToCStringLen(ctx, &len, json);
    JS_FreeValue(ctx, json);
    if (!bytes)
        return JS_EXCEPTION;
    if (g_broker_max_request == 0) {
        JS_FreeCString(ctx, bytes);
        return throw_broker_error(ctx, PLG_BROKER_ENOGRANT);
    }
    if (len > g_broker_max_request) {
        char msg[128];

        JS_FreeCString(ctx, bytes);
        snprintf(msg, sizeof(msg),
                 "plimsoll.request: request too large (%zu bytes; this grant allows %u)", len,
                 (unsigned)g_broker_max_request);
        return throw_error(ctx, msg);
    }
    n = plimsoll_broker_call((uint32_t)(uintptr_t)bytes, (uint32_t)len);
    JS_FreeCString(ctx, bytes);
    if (n < 0)
        return throw_broker_error(ctx, n);
    reply = js_malloc(ctx, (size_t)n + 1);
    if (!reply)
        return JS_EXCEPTION;
    n = plimsoll_broker_reply((uint32_t)(uintptr_t)reply, (uint32_t)n);
    if (n < 0) {
        js_free(ctx, reply);
        return throw_broker_error(ctx, n);
    }
    reply[n] = '\0'; /* JS_ParseJSON wants a terminated buffer */
    ret = JS_ParseJSON(ctx, reply, (size_t)n, "<broker reply>");
    js_free(ctx, reply);
    return ret;
}

/* The global `plimsoll`: request() and hasGrant, both read-only. */
static int add_plimsoll(JSContext *ctx, JSValueConst global) {
    JSValue obj = JS_NewObject(ctx);

    if (JS_IsException(obj))
        return -1;
    if (JS_DefinePropertyValueStr(ctx, obj, "request",
                                  JS_NewCFunction(ctx, js_plimsoll_request, "request", 1),
                                  JS_PROP_ENUMERABLE) < 0 ||
        JS_DefinePropertyValueStr(ctx, global, "plimsoll", JS_DupValue(ctx, obj),
                                  JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE) < 0) {
        JS_FreeValue(ctx, obj);
        return -1;
    }
    g_plimsoll = obj; /* plg_run adds hasGrant, the run's own */
    return 0;
}

/* Install console, readStdin and plimsoll on the global object. */
static int add_globals(JSContext *ctx) {
    JSValue global = JS_GetGlobalObject(ctx);
    JSValue console = JS_NewObject(ctx);
    int ret = -1;

    if (JS_IsException(console))
        goto out;
    JS_SetPropertyFunctionList(ctx, console, console_funcs, countof(console_funcs));
    if (JS_DefinePropertyValueStr(ctx, global, "console", console,
                                  JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE) < 0)
        goto out;
    if (JS_DefinePropertyValueStr(ctx, global, "readStdin",
                                  JS_NewCFunction(ctx, js_read_stdin, "readStdin", 0),
                                  JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE) < 0)
        goto out;
    if (add_plimsoll(ctx, global) < 0)
        goto out;
    ret = 0;
out:
    JS_FreeValue(ctx, global);
    return ret;
}

/* ---- Math.random ------------------------------------------------------- */

/* QuickJS seeds its own generator when the context is made, which is once
 * per image: every run would draw the same sequence.  This one is the same
 * kind of generator (xorshift64*, 52 random bits per double in [0, 1)),
 * seeded by plg_run from the host's randomness. */
static JSValue js_math_random(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    uint64_t x = g_random_state, bits;
    double d;

    (void)this_val, (void)argc, (void)argv;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    g_random_state = x;
    bits = ((x * UINT64_C(0x2545F4914F6CDD1D)) >> 12) | (UINT64_C(0x3ff) << 52);
    memcpy(&d, &bits, sizeof(d));
    return JS_NewFloat64(ctx, d - 1.0);
}

static int add_math_random(JSContext *ctx) {
    JSValue global = JS_GetGlobalObject(ctx);
    JSValue math = JS_GetPropertyStr(ctx, global, "Math");
    int r = -1;

    if (!JS_IsException(math))
        r = JS_DefinePropertyValueStr(ctx, math, "random",
                                      JS_NewCFunction(ctx, js_math_random, "random", 0),
                                      JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
    JS_FreeValue(ctx, math);
    JS_FreeValue(ctx, global);
    return r < 0 ? -1 : 0;
}

/* ---- uncaught errors --------------------------------------------------- */

/* Print "Uncaught <value>" (+ stack for errors) to stderr.  Never fails:
 * falls back to fixed text when the value cannot be formatted. */
static void print_uncaught(JSContext *ctx, JSValueConst exc, const char *prefix) {
    DynBuf buf;

    dbuf_init2(&buf, JS_GetRuntime(ctx), (DynBufReallocFunc *)js_realloc_rt);
    dbuf_putstr(&buf, prefix);
    if (JS_IsNull(exc) && g_alloc_failed) {
        dbuf_putstr(&buf, "InternalError: out of memory");
    } else if (JS_IsString(exc) || JS_IsNumber(exc) || JS_IsBool(exc)) {
        const char *s = JS_ToCString(ctx, exc);
        dbuf_putstr(&buf, s ? s : "(unprintable value)");
        JS_FreeCString(ctx, s);
    } else if (format_args(ctx, 1, &exc, &buf) < 0) {
        /* Formatting threw (getter, proxy, memory): use toString. */
        JSValue pending = JS_GetException(ctx);
        const char *s = JS_ToCString(ctx, exc);
        JS_FreeValue(ctx, pending);
        if (!s) {
            pending = JS_GetException(ctx);
            JS_FreeValue(ctx, pending);
        }
        dbuf_putstr(&buf,
                    s ? s
                      : (g_alloc_failed ? "InternalError: out of memory" : "(unprintable value)"));
        JS_FreeCString(ctx, s);
    }
    dbuf_putc(&buf, '\n');
    if (dbuf_error(&buf)) {
        write_str(2, prefix);
        write_str(2, g_alloc_failed ? "InternalError: out of memory\n" : "(unprintable value)\n");
    } else {
        write_all(2, (const char *)buf.buf, buf.size);
    }
    dbuf_free(&buf);
}

/* Take the pending exception and report it.  Returns the run status. */
static int report_exception(JSContext *ctx) {
    JSValue exc;

    if (g_alloc_failed) {
        /* Give the printer room to work at the memory cap. */
        free(g_oom_reserve);
        g_oom_reserve = NULL;
    }
    exc = JS_GetException(ctx);
    if (g_alloc_failed)
        JS_RunGC(JS_GetRuntime(ctx));
    print_uncaught(ctx, exc, "Uncaught ");
    JS_FreeValue(ctx, exc);
    return g_alloc_failed ? PLG_RUN_OOM : PLG_RUN_EXCEPTION;
}

/* QuickJS host promise rejection tracker: remember unhandled rejections,
 * forget them when a handler is attached later. */
static void rejection_tracker(JSContext *ctx, JSValueConst promise, JSValueConst reason,
                              JS_BOOL is_handled, void *opaque) {
    size_t i;

    (void)opaque;
    if (is_handled) {
        for (i = 0; i < g_n_rejections; i++) {
            if (JS_VALUE_GET_PTR(g_rejections[i].promise) == JS_VALUE_GET_PTR(promise)) {
                JS_FreeValue(ctx, g_rejections[i].promise);
                JS_FreeValue(ctx, g_rejections[i].reason);
                g_rejections[i] = g_rejections[--g_n_rejections];
                return;
            }
        }
        return;
    }
    if (g_n_rejections == g_cap_rejections) {
        size_t ncap = g_cap_rejections ? g_cap_rejections * 2 : 8;
        struct rejection *n = realloc(g_rejections, ncap * sizeof(*n));
        if (!n)
            return; /* best effort; cannot track */
        g_rejections = n;
        g_cap_rejections = ncap;
    }
    g_rejections[g_n_rejections].promise = JS_DupValue(ctx, promise);
    g_rejections[g_n_rejections].reason = JS_DupValue(ctx, reason);
    g_n_rejections++;
}

/* ---- exports ------------------------------------------------------------- */

/**
 * plg_alloc - allocate size bytes (+1 for a NUL) in linear memory.
 * Returns the guest address, or 0 when memory is exhausted.
 */
EXPORT("plg_alloc") uint32_t plg_alloc(uint32_t size) {
    char *p = malloc((size_t)size + 1);

    if (!p)
        return 0;
    p[size] = '\0';
    return (uint32_t)(uintptr_t)p;
}

/*
 * The built-ins QuickJS lacks: builtins.js's value is a list of
 * [where, name, function], and each function is defined on its object as a
 * built-in is (writable, configurable, not enumerable).  Returns -1 with a
 * JS exception pending (or out of memory) on failure.
 */
static int add_builtins(JSContext *ctx) {
    JSValue list = JS_Eval(ctx, pl_guest_builtins, sizeof(pl_guest_builtins) - 1,
                           "<plimsoll-builtins>", JS_EVAL_TYPE_GLOBAL);
    if (JS_IsException(list))
        return -1;
    uint32_t n = 0;
    JSValue len = JS_GetPropertyStr(ctx, list, "length");
    int r = JS_ToUint32(ctx, &n, len);
    JS_FreeValue(ctx, len);
    for (uint32_t i = 0; r == 0 && i < n; i++) {
        JSValue e = JS_GetPropertyUint32(ctx, list, i);
        JSValue where = JS_GetPropertyUint32(ctx, e, 0);
        JSValue name = JS_GetPropertyUint32(ctx, e, 1);
        JSAtom a = JS_ValueToAtom(ctx, name);
        r = a == JS_ATOM_NULL || !JS_IsObject(where) ? -1
            : JS_DefinePropertyValue(ctx, where, a, JS_GetPropertyUint32(ctx, e, 2),
                                     JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE) < 0
                ? -1
                : 0;
        JS_FreeAtom(ctx, a);
        JS_FreeValue(ctx, name);
        JS_FreeValue(ctx, where);
        JS_FreeValue(ctx, e);
    }
    JS_FreeValue(ctx, list);
    return r;
}

/**
 * plg_init - make the runtime and the context with every global a snippet
 * sees (console, readStdin, plimsoll, the built-ins of builtins.js, the
 * per-run Math.random) and compile the console's formatter.  The host
 * calls it once per instance, before any plg_run.  Returns PLG_RUN_OK, or
 * PLG_RUN_OOM after printing why to fd 2.
 */
EXPORT("plg_init") int32_t plg_init(void) {
    g_oom_reserve = malloc(GUEST_OOM_RESERVE);
    g_rt = JS_NewRuntime2(&guest_mf, NULL);
    if (!g_rt)
        goto failed;
    JS_SetMaxStackSize(g_rt, GUEST_JS_MAX_STACK);
    JS_SetHostPromiseRejectionTracker(g_rt, rejection_tracker, NULL);
    g_ctx = JS_NewContext(g_rt);
    if (!g_ctx)
        goto failed;
    if (add_globals(g_ctx) < 0 || add_builtins(g_ctx) < 0 || add_math_random(g_ctx) < 0 ||
        JS_IsException(get_formatter(g_ctx)))
        goto failed;
    return PLG_RUN_OK;

failed:
    g_ctx = NULL; /* plg_run then refuses to run */
    write_str(2, "plimsoll: could not create the JavaScript runtime "
                 "(out of memory)\n");
    return PLG_RUN_OOM;
}

/**
 * plg_run - run code (NUL-terminated at code[code_len], as plg_alloc
 * guarantees) as a global script named "<snippet>" in the context plg_init
 * made, then drain the job queue.  stdin is what readStdin() returns.
 * broker_max_request is the run's grant (0: none; plimsoll.request then
 * throws).  seed is Math.random's (0 is taken as 1).  Returns a PLG_RUN_*
 * status.
 */
EXPORT("plg_run")
int32_t plg_run(uint32_t code_ptr, uint32_t code_len, uint32_t stdin_ptr, uint32_t stdin_len,
                uint32_t broker_max_request, uint64_t seed) {
    const char *code = (const char *)(uintptr_t)code_ptr;
    JSContext *ctx = g_ctx;
    JSValue val;
    int status = PLG_RUN_OK;

    if (!ctx)
        return PLG_RUN_OOM; /* plg_init failed and said so */
    g_stdin_data = (const char *)(uintptr_t)stdin_ptr;
    g_stdin_len = stdin_len;
    g_broker_max_request = broker_max_request;
    g_random_state = seed ? seed : 1;
    /* Read-only, as the run's grant is. */
    if (JS_DefinePropertyValueStr(ctx, g_plimsoll, "hasGrant",
                                  JS_NewBool(ctx, broker_max_request != 0), JS_PROP_ENUMERABLE) < 0)
        return report_exception(ctx);

    val = JS_Eval(ctx, code, code_len, "<snippet>", JS_EVAL_TYPE_GLOBAL);
    if (JS_IsException(val))
        return report_exception(ctx);
    JS_FreeValue(ctx, val); /* the completion value is never printed */

    for (;;) {
        JSContext *job_ctx;
        int r = JS_ExecutePendingJob(g_rt, &job_ctx);

        if (r == 0)
            break;
        if (r < 0)
            return report_exception(job_ctx);
    }

    if (g_n_rejections > 0) {
        print_uncaught(ctx, g_rejections[0].reason, "Uncaught (in promise) ");
        status = g_alloc_failed ? PLG_RUN_OOM : PLG_RUN_EXCEPTION;
    }
    /* No teardown: the host discards the whole instance. */
    return status;
}
