/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wasi_runner.cc - the C API of wasi_runner.h on top of the wabt
 * interpreter (libwabt 1.0.32, built without WITH_WASI).
 *
 * A run is: validate the module and lower its memory and table maxima to
 * the caps (wasi_validate.cc), bind every import to a HostFunc
 * (wasi_calls.cc), instantiate in a fresh Store, then call the start
 * function (if any) and "_start" on a fresh interp Thread.  Everything
 * of a run lives in objects local to pl_wasi_run(), so nothing leaks from
 * one run into the next and the Store's destructor frees every interpreter
 * object when the run ends.
 *
 * Every guest pointer and length is checked against the current size of
 * linear memory before the host touches it (Ctx::span); a bad one makes the
 * WASI call return EFAULT.  Host-side allocations are bounded: the module's
 * items (types, functions, imports, exports, globals, tables and their
 * sizes, element segments and elements, data segments), iovec counts, argv
 * size and locals per function are capped (wasi_runner.h), output is
 * capped per stream and linear memory by the caller's limit.
 *
 * One allocation is not bounded by wabt 1.0.32: its value stack.  The
 * worker's RLIMIT_AS turns its growth into std::bad_alloc.  wabt itself is
 * compiled without exception handling landing pads, so the exception skips
 * wabt's destructors: thrown while the guest runs it ends the run as a
 * result (host_exhausted), thrown anywhere else the public functions report
 * PL_WASI_ERR_HOST; either way the process must run no further module.
 */
#include "wasi_runner.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <new>
#include <string>
#include <vector>

#include <wabt/config.h>
#include <wabt/interp/interp.h>

#include "wasi_runner_int.hh"

namespace plwasi {

std::string fmt(const char *format, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, format);
  vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  return std::string(buf);
}

}  // namespace plwasi

namespace {

using namespace plwasi;

/* argv[0] as the module sees it. */
constexpr const char kArgv0[] = "module";

/* Fill err with msg as one line (newlines and control bytes replaced)
 * and the reason the API sends for rc; returns rc.  Allocates nothing:
 * it also reports running out of host memory. */
int fail(pl_error *err, int rc, const char *msg) {
  if (err == nullptr) return rc;
  pl_error_set(err,
               rc == PL_WASI_ERR_HOST ? PL_REASON_INTERNAL
                                      : PL_REASON_INVALID_REQUEST,
               "%s", msg);
  for (char *p = err->message; *p != '\0'; p++) {
    unsigned char u = static_cast<unsigned char>(*p);
    if (u < 0x20 || u == 0x7f) *p = ' ';
  }
  return rc;
}
int fail(pl_error *err, int rc, const std::string &msg) {
  return fail(err, rc, msg.c_str());
}

/* Index of the export called `name` in the module's export list, or -1. */
long find_export(const wi::Module &module, const char *name) {
  const auto &types = module.export_types();
  for (size_t i = 0; i < types.size(); i++)
    if (types[i].name == name) return static_cast<long>(i);
  return -1;
}

/* Call a function of no params and no results on a fresh Thread.  Returns
 * true when it returned normally; false with *ret_trap set otherwise. */
bool call_void(wi::Store &store, wi::Ref func_ref, wi::Trap::Ptr *ret_trap) {
  wi::Func::Ptr func = store.UnsafeGet<wi::Func>(func_ref);
  wi::Thread thread(store);
  wi::Values params, results;
  return wabt::Succeeded(func->Call(thread, params, results, ret_trap));
}

/* How a guest call ended. */
enum class Ending { kReturned, kTrapped, kHostExhausted };

/* Call a function of no params and no results as call_void() does, and
 * turn the interpreter running out of host memory into an ending of the
 * run.  wabt's value stack is unbounded; the worker's RLIMIT_AS makes its
 * growth throw std::bad_alloc, which unwinds to here (wabt's own frames
 * skip their cleanup, which is why the process must then be recycled).
 * The Thread that held the stack is gone by the time this returns, so the
 * memory is back for collecting the result. */
Ending call_guest(wi::Store &store, wi::Ref func_ref, wi::Trap::Ptr *ret_trap) {
  try {
    return call_void(store, func_ref, ret_trap) ? Ending::kReturned
                                                : Ending::kTrapped;
  } catch (const std::bad_alloc &) {
    return Ending::kHostExhausted;
  }
}

/* Add the runner's own line after the kept stderr: past the cap, not
 * counted in it, and never setting truncated.  Returns < 0 when out of
 * memory. */
int append_line(pl_output *o, const char *line, size_t n) {
  char *p = static_cast<char *>(realloc(o->data, o->len + n + 1));
  if (p == nullptr) return -1;
  memcpy(p + o->len, line, n);
  o->len += n;
  p[o->len] = '\0';
  o->data = p;
  return 0;
}

/* Move a finished run's outcome into *r.  Returns < 0 on allocation
 * failure. */
int fill_result(Ctx &ctx, Ending ending, const std::string &trap_msg,
                pl_wasi_result *r) {
  if (pl_capture_finish(&ctx.out, &r->out) < 0 ||
      pl_capture_finish(&ctx.err, &r->err) < 0)
    return -1;
  r->memory_bytes = ctx.mem != nullptr ? ctx.mem->ByteSize() : 0;
  if (ending == Ending::kHostExhausted) {
    r->host_exhausted = true;
    r->out_of_memory = true;
    r->exit_code = 1;
    static const char kLine[] =
        "plimsoll: module stopped: the interpreter ran out of host memory\n";
    return append_line(&r->err, kLine, sizeof kLine - 1);
  }
  if (ctx.exited) {
    r->exited = true;
    r->exit_code = ctx.exit_code;
  } else if (ending == Ending::kTrapped) {
    r->trapped = true;
    r->exit_code = 1;
    std::string line = "plimsoll: module trapped: " + trap_msg + "\n";
    if (append_line(&r->err, line.data(), line.size()) < 0) return -1;
    r->trap_message = strdup(trap_msg.c_str());
    if (r->trap_message == nullptr) return -1;
  } else {
    r->exit_code = 0;
  }
  return 0;
}

/* Body of pl_wasi_run, exceptions still possible. */
int run_module(const uint8_t *wasm, size_t len, const char *const *args,
               size_t nargs, const char *stdin_data, size_t stdin_len,
               const pl_wasi_limits &limits, pl_wasi_start_fn on_start,
               void *userdata, pl_wasi_result *r, std::string *why) {
  /* Per-run context: argv, stdin, output captures. */
  Ctx ctx(limits.stdout_cap, limits.stderr_cap);
  pl_capture_stream(&ctx.out, limits.sink, 1, 0);
  pl_capture_stream(&ctx.err, limits.sink, 2, 0);
  if (nargs > PL_WASI_MAX_ARGS) {
    *why = fmt("too many arguments (%zu, at most %u)", nargs, PL_WASI_MAX_ARGS);
    return PL_WASI_ERR_ARGS;
  }
  ctx.argv.push_back(kArgv0);
  ctx.argv_len.push_back(sizeof kArgv0 - 1);
  ctx.argv_bytes = sizeof kArgv0;
  for (size_t i = 0; i < nargs; i++) {
    if (args[i] == nullptr) {
      *why = fmt("argument %zu is NULL", i);
      return PL_WASI_ERR_ARGS;
    }
    size_t n = strnlen(args[i], PL_WASI_MAX_ARGS_BYTES + 1);
    ctx.argv_bytes += n + 1;
    if (ctx.argv_bytes > PL_WASI_MAX_ARGS_BYTES) {
      *why = fmt("arguments exceed %u bytes", PL_WASI_MAX_ARGS_BYTES);
      return PL_WASI_ERR_ARGS;
    }
    ctx.argv.push_back(args[i]);
    ctx.argv_len.push_back(n);
  }
  ctx.in = reinterpret_cast<const uint8_t *>(stdin_data);
  ctx.in_len = stdin_data != nullptr ? stdin_len : 0;

  /* Declared before every RefPtr below so it is destroyed last. */
  wi::Store store(accepted_features());

  wi::ModuleDesc desc;
  int rc = parse_module(wasm, len, &desc, why);
  if (rc < 0) return rc;
  rc = check_module(&desc, limits, why);
  if (rc < 0) return rc;

  /* Take the start section out so that instantiation runs no guest code;
   * it is called below like _start, with the same trap handling. */
  std::vector<wi::StartDesc> starts = std::move(desc.starts);
  desc.starts.clear();

  wi::RefVec imports;
  bind_imports(store, desc, &ctx, &imports);

  wi::Module::Ptr module = wi::Module::New(store, std::move(desc));
  wi::Trap::Ptr trap;
  wi::Instance::Ptr instance =
      wi::Instance::Instantiate(store, module.ref(), imports, &trap);
  if (!instance) {
    *why = "instantiation failed: " +
           (trap ? trap->message() : std::string("unknown reason"));
    return PL_WASI_ERR_INSTANTIATE;
  }

  long mem_idx = find_export(*module, "memory");
  long start_idx = find_export(*module, "_start");
  if (mem_idx < 0 || start_idx < 0) { /* checked already; be defensive */
    *why = "instantiation failed: missing export";
    return PL_WASI_ERR_INSTANTIATE;
  }
  wi::Memory::Ptr memory =
      store.UnsafeGet<wi::Memory>(instance->exports()[mem_idx]);
  ctx.mem = memory.get();

  /* Nothing of the guest has run; from here on everything is a result. */
  if (on_start != nullptr && on_start(userdata) != 0) {
    *why = "the run was stopped before the module started";
    return PL_WASI_ERR_HOST;
  }
  Ending ending = Ending::kReturned;
  for (const wi::StartDesc &s : starts) {
    ending = call_guest(store, instance->funcs()[s.func_index], &trap);
    if (ending != Ending::kReturned) break;
  }
  if (ending == Ending::kReturned)
    ending = call_guest(store, instance->exports()[start_idx], &trap);

  std::string trap_msg;
  if (ending == Ending::kTrapped)
    trap_msg = trap ? trap->message() : std::string("unknown trap");
  if (fill_result(ctx, ending, trap_msg, r) < 0) {
    *why = "out of host memory while collecting the result";
    return PL_WASI_ERR_HOST;
  }
  return PL_WASI_OK;
}

}  // namespace

extern "C" {

int pl_wasi_validate(const uint8_t *wasm, size_t len,
                     const struct pl_wasi_limits *limits,
                     struct pl_error *err) {
  if ((wasm == nullptr && len != 0) || limits == nullptr)
    return fail(err, PL_WASI_ERR_ARGS, "invalid arguments");
  try {
    std::string why;
    wi::ModuleDesc desc;
    int rc = parse_module(wasm, len, &desc, &why);
    if (rc == PL_WASI_OK) rc = check_module(&desc, *limits, &why);
    return rc < 0 ? fail(err, rc, why) : rc;
  } catch (const std::bad_alloc &) {
    return fail(err, PL_WASI_ERR_HOST, "out of host memory while validating");
  } catch (...) {
    return fail(err, PL_WASI_ERR_HOST, "internal error while validating");
  }
}

int pl_wasi_run(const uint8_t *wasm, size_t len, const char *const *args,
                size_t nargs, const char *stdin_data, size_t stdin_len,
                const struct pl_wasi_limits *limits,
                struct pl_wasi_result *ret_result, struct pl_error *err) {
  return pl_wasi_run_hooked(wasm, len, args, nargs, stdin_data, stdin_len,
                            limits, nullptr, nullptr, ret_result, err);
}

int pl_wasi_run_hooked(const uint8_t *wasm, size_t len,
                       const char *const *args, size_t nargs,
                       const char *stdin_data, size_t stdin_len,
                       const struct pl_wasi_limits *limits,
                       pl_wasi_start_fn on_start, void *userdata,
                       struct pl_wasi_result *ret_result,
                       struct pl_error *err) {
  if (ret_result == nullptr)
    return fail(err, PL_WASI_ERR_ARGS, "invalid arguments");
  memset(ret_result, 0, sizeof *ret_result);
  if ((wasm == nullptr && len != 0) || limits == nullptr ||
      (args == nullptr && nargs != 0))
    return fail(err, PL_WASI_ERR_ARGS, "invalid arguments");
  int rc;
  std::string why;
  try {
    rc = run_module(wasm, len, args, nargs, stdin_data, stdin_len, *limits,
                    on_start, userdata, ret_result, &why);
  } catch (const std::bad_alloc &) {
    why = "out of host memory while running the module";
    rc = PL_WASI_ERR_HOST;
  } catch (...) {
    why = "internal error while running the module";
    rc = PL_WASI_ERR_HOST;
  }
  if (rc < 0) {
    pl_wasi_result_free(ret_result);
    return fail(err, rc, why);
  }
  return rc;
}

void pl_wasi_result_free(struct pl_wasi_result *r) {
  if (r == nullptr) return;
  pl_output_clear(&r->out);
  pl_output_clear(&r->err);
  free(r->trap_message);
  memset(r, 0, sizeof *r);
}

const char *pl_wasi_engine_version(void) {
  return "wabt interpreter " WABT_VERSION_STRING " (WASI preview 1 subset)";
}

}  // extern "C"
