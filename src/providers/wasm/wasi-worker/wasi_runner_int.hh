/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wasi_runner_int.hh: what the module runner's three files share, and
 * nothing outside src/providers/wasm/ includes.
 *
 *   wasi_runner.cc    the C API: a run from bytes to result
 *   wasi_validate.cc  the module bounds' counting pass, wabt's parser and
 *                     validator, plimsoll's rules for a module
 *   wasi_calls.cc     the WASI preview 1 calls a module can make, bound
 *                     to a run's Ctx
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include <wabt/feature.h>
#include <wabt/interp/interp.h>

#include "wasi_runner.h"

namespace plwasi {

namespace wi = wabt::interp;

/* The only import module a module may use. */
constexpr const char kWasiModule[] = "wasi_snapshot_preview1";

constexpr uint64_t kPageSize = 65536;
constexpr uint64_t kMaxPages = 65536; /* 4 GiB, the wasm32 limit */

/* printf into a std::string (messages only; short). */
std::string fmt(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Per-run state seen by the host functions. */
struct Ctx {
  /* argv: pointers into the caller's strings (live for the whole run). */
  std::vector<const char *> argv;
  std::vector<size_t> argv_len;
  uint64_t argv_bytes = 0; /* sum of (len + 1) */

  const uint8_t *in = nullptr;
  size_t in_len = 0;
  size_t in_pos = 0;

  /* stdout and stderr, kept up to their caps (src/core/capture.h). */
  pl_capture out;
  pl_capture err;
  bool closed[3] = {false, false, false};

  bool exited = false;
  uint32_t exit_code = 0;

  /* The instance's linear memory; set right after instantiation and before
   * any guest code runs.  Raw pointer: the Store owns it for the run. */
  wi::Memory *mem = nullptr;

  /* Bounds check: point *ret at guest bytes [ptr, ptr+len) or return
   * false when that range is not entirely inside linear memory. */
  bool span(uint32_t ptr, uint64_t len, uint8_t **ret) const {
    if (mem == nullptr) return false;
    uint64_t size = mem->ByteSize();
    if (ptr > size || len > size - ptr) return false;
    *ret = mem->UnsafeData() + ptr;
    return true;
  }

  /* True when fd is one of 0, 1, 2 and has not been closed. */
  bool open_std(uint32_t fd) const { return fd < 3 && !closed[fd]; }

  Ctx(size_t stdout_cap, size_t stderr_cap) {
    pl_capture_init(&out, stdout_cap);
    pl_capture_init(&err, stderr_cap);
  }
  Ctx(const Ctx &) = delete;
  Ctx &operator=(const Ctx &) = delete;
  ~Ctx() {
    pl_capture_free(&out);
    pl_capture_free(&err);
  }
};

/* ---- wasi_validate.cc -------------------------------------------- */

/* The wasm features accepted (wabt's defaults without threads, memory64,
 * multi-memory, exceptions, tail calls, GC). */
wabt::Features accepted_features();

/* Count the module's items against the bounds, then parse and validate
 * the bytes into *desc.  Returns < 0 with *why set. */
int parse_module(const uint8_t *wasm, size_t len, wi::ModuleDesc *desc,
                 std::string *why);

/* Apply plimsoll's rules to a parsed module and lower the memory and table
 * maxima to the caps.  Returns < 0 with *why set when it is refused. */
int check_module(wi::ModuleDesc *desc, const pl_wasi_limits &limits,
                 std::string *why);

/* ---- wasi_calls.cc ----------------------------------------------- */

/* Whether an import of wasi_snapshot_preview1 `name` with type `ft` can be
 * bound: a known function with its exact signature, or an unknown one that
 * returns one i32.  False with *why set otherwise. */
bool wasi_import_fits(const std::string &name, const wi::FuncType &ft,
                      std::string *why);

/* Build the import vector: one HostFunc per import, bound to `ctx`
 * (proc_exit records the code and unwinds the run with a trap; an unknown
 * function answers ENOSYS). */
void bind_imports(wi::Store &store, const wi::ModuleDesc &desc, Ctx *ctx,
                  wi::RefVec *imports);

}  // namespace plwasi
