/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wasi_validate.cc: whether a module may run, decided before any of it
 * does.
 *
 * Three steps: count the module's items against the PL_WASI_MAX_* bounds
 * with wabt's binary reader and a delegate that allocates nothing
 * (BoundsCounter); parse and validate the bytes with
 * wabt::interp::ReadBinaryInterp; check the module against plimsoll's
 * rules (only wasi_snapshot_preview1 function imports, "_start" and
 * "memory" exported, initial memory within the cap) and lower the
 * declared memory and table maxima to the caps.  pl_wasi_validate() is
 * these steps alone; fuzz/fuzz_wasi_validate.c drives them with arbitrary
 * bytes.
 */
#include <stdint.h>

#include <string>

#include <wabt/binary-reader-nop.h>
#include <wabt/binary-reader.h>
#include <wabt/error.h>
#include <wabt/interp/binary-reader-interp.h>

#include "wasi_runner_int.hh"

namespace plwasi {

/* The wasm features accepted.  wabt's defaults (MVP plus mutable globals,
 * saturating conversions, sign extension, SIMD, multi-value, bulk memory,
 * reference types), with everything that would change the host's
 * resource picture (threads/shared memory, memory64, multi-memory,
 * exceptions, tail calls, GC) explicitly off. */
wabt::Features accepted_features() {
  wabt::Features f;
  f.disable_threads();
  f.disable_memory64();
  f.disable_multi_memory();
  f.disable_exceptions();
  f.disable_tail_call();
  f.disable_gc();
  f.disable_function_references();
  return f;
}

namespace {

/* Read an unsigned LEB128 of at most 32 bits at *pos; false when it runs
 * past end or is over-long. */
bool read_u32_leb(const uint8_t *p, size_t end, size_t *pos, uint32_t *out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 35; shift += 7) {
    if (*pos >= end) return false;
    uint8_t b = p[(*pos)++];
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      if (v > UINT32_MAX) return false;
      *out = static_cast<uint32_t>(v);
      return true;
    }
  }
  return false;
}

/* wabt checks every vector count against the bytes left in its section
 * before it reserves memory, except the DataCount section's count, which
 * no bytes follow: a 10-byte section could make it reserve gigabytes (found
 * by fuzz_wasi_validate).  Refuse a data count larger than the data
 * section's payload (each segment takes at least one byte) before wabt
 * sees the module.  The scan stops at the first malformed section header
 * (wabt reports it, but only after it has read the sections before it). */
bool data_count_is_plausible(const uint8_t *wasm, size_t len, std::string *why) {
  constexpr uint8_t kDataSection = 11, kDataCountSection = 12;
  bool have_count = false;
  uint32_t data_count = 0;
  uint64_t data_bytes = 0;
  size_t pos = 8;
  while (pos < len) {
    uint8_t id = wasm[pos++];
    uint32_t size;
    if (!read_u32_leb(wasm, len, &pos, &size) || size > len - pos) break;
    size_t body = pos;
    if (id == kDataCountSection && !have_count) {
      /* The first one is the count wabt reserves for; a later one is a
       * section-order error it reports after that. */
      if (!read_u32_leb(wasm, body + size, &body, &data_count)) break;
      have_count = true;
    } else if (id == kDataSection && size > data_bytes) {
      data_bytes = size;
    }
    pos += size;
  }
  if (have_count && data_count > data_bytes) {
    *why = fmt("invalid module: data count %u is larger than the data section "
               "(%llu bytes)",
               data_count, static_cast<unsigned long long>(data_bytes));
    return false;
  }
  return true;
}

/* The first pass over a module: wabt's own binary reader with a delegate
 * that compares each count with its bound as the reader announces it,
 * before any item is read, and allocates nothing but one number per type
 * and per function (after their counts passed).  The interpreter's reader
 * (the second pass) reserves memory for every count it is given, and the
 * counts are limited only by the section's size (one byte per item): an
 * 8 MiB module of two million empty functions makes it allocate about a
 * gigabyte, one function of four million local declarations 117 MB.  A
 * malformed module is not reported by this pass: the second pass fails at
 * the same byte with wabt's own message. */
class BoundsCounter : public wabt::BinaryReaderNop {
 public:
  /* Why the module was refused; empty while every bound holds. */
  std::string why;

  /* Errors are the second pass's to report (and the delegate must not let
   * the reader print them to the worker's stderr). */
  bool OnError(const wabt::Error &) override { return true; }

  wabt::Result OnTypeCount(wabt::Index count) override {
    return bound(count, PL_WASI_MAX_TYPES, "function types");
  }
  wabt::Result OnImportCount(wabt::Index count) override {
    return bound(count, PL_WASI_MAX_IMPORTS, "imports");
  }
  wabt::Result OnImportFunc(wabt::Index, std::string_view, std::string_view,
                            wabt::Index, wabt::Index) override {
    imported_funcs_++;
    return wabt::Result::Ok;
  }
  wabt::Result OnFunctionCount(wabt::Index count) override {
    return bound(static_cast<uint64_t>(imported_funcs_) + count,
                 PL_WASI_MAX_FUNCS, "functions (imported and defined)");
  }
  wabt::Result OnTableCount(wabt::Index count) override {
    return bound(count, PL_WASI_MAX_TABLES, "tables");
  }
  wabt::Result OnTable(wabt::Index, wabt::Type,
                       const wabt::Limits *limits) override {
    if (limits->initial <= PL_WASI_MAX_TABLE_ELEMS) return wabt::Result::Ok;
    why = fmt("table of %llu initial elements exceeds the cap of %u",
              static_cast<unsigned long long>(limits->initial),
              PL_WASI_MAX_TABLE_ELEMS);
    return wabt::Result::Error;
  }
  wabt::Result OnGlobalCount(wabt::Index count) override {
    return bound(count, PL_WASI_MAX_GLOBALS, "globals");
  }
  wabt::Result OnExportCount(wabt::Index count) override {
    return bound(count, PL_WASI_MAX_EXPORTS, "exports");
  }
  wabt::Result OnElemSegmentCount(wabt::Index count) override {
    return bound(count, PL_WASI_MAX_ELEM_SEGMENTS, "element segments");
  }
  wabt::Result OnElemSegmentElemExprCount(wabt::Index,
                                          wabt::Index count) override {
    elems_ += count;
    return bound(elems_, PL_WASI_MAX_ELEMS,
                 "elements (in all element segments)");
  }
  wabt::Result OnDataCount(wabt::Index count) override {
    return bound(count, PL_WASI_MAX_DATA_SEGMENTS,
                 "data segments (DataCount section)");
  }
  wabt::Result OnDataSegmentCount(wabt::Index count) override {
    return bound(count, PL_WASI_MAX_DATA_SEGMENTS, "data segments");
  }
  /* Params + locals per function: the interpreter's reader keeps one
   * entry per local declaration, and an 8 MiB body can hold four million
   * of them; the interpreter then materialises every local on each call. */
  wabt::Result OnFuncType(wabt::Index, wabt::Index param_count, wabt::Type *,
                          wabt::Index, wabt::Type *) override {
    type_params_.push_back(param_count); /* at most PL_WASI_MAX_TYPES */
    return wabt::Result::Ok;
  }
  wabt::Result OnFunction(wabt::Index, wabt::Index sig_index) override {
    func_params_.push_back(sig_index < type_params_.size() ? type_params_[sig_index] : 0);
    return wabt::Result::Ok;
  }
  wabt::Result BeginFunctionBody(wabt::Index, wabt::Offset) override {
    locals_ = body_ < func_params_.size() ? func_params_[body_] : 0;
    return wabt::Result::Ok;
  }
  wabt::Result OnLocalDecl(wabt::Index, wabt::Index count,
                           wabt::Type) override {
    locals_ += count;
    return wabt::Result::Ok;
  }
  wabt::Result EndFunctionBody(wabt::Index) override {
    if (locals_ > PL_WASI_MAX_FUNC_LOCALS) {
      why = fmt("function %llu has %llu params and locals (at most %u "
                "allowed)",
                static_cast<unsigned long long>(imported_funcs_) + body_,
                static_cast<unsigned long long>(locals_),
                PL_WASI_MAX_FUNC_LOCALS);
      return wabt::Result::Error;
    }
    body_++;
    return wabt::Result::Ok;
  }

 private:
  wabt::Index imported_funcs_ = 0;
  uint64_t elems_ = 0;
  std::vector<wabt::Index> type_params_; /* params of each type */
  std::vector<wabt::Index> func_params_; /* params of each defined function */
  size_t body_ = 0;                      /* index of the body being read */
  uint64_t locals_ = 0;                  /* its params + locals so far */

  wabt::Result bound(uint64_t n, uint64_t max, const char *what) {
    if (n <= max) return wabt::Result::Ok;
    why = fmt("module has %llu %s; at most %llu are allowed",
              static_cast<unsigned long long>(n), what,
              static_cast<unsigned long long>(max));
    return wabt::Result::Error;
  }
};

}  // namespace

/* Parse and validate the bytes into *desc.  Returns < 0 with *why set. */
int parse_module(const uint8_t *wasm, size_t len, wi::ModuleDesc *desc,
                 std::string *why) {
  if (len < 8) {
    *why = "invalid module: too short to be a WebAssembly binary";
    return PL_WASI_ERR_MODULE;
  }
  if (!data_count_is_plausible(wasm, len, why)) return PL_WASI_ERR_MODULE;
  wabt::ReadBinaryOptions options(accepted_features(), nullptr,
                                  /*read_debug_names=*/false,
                                  /*stop_on_first_error=*/true,
                                  /*fail_on_custom_section_error=*/false);
  {
    BoundsCounter counter;
    (void)wabt::ReadBinary(wasm, len, &counter, options);
    if (!counter.why.empty()) {
      *why = counter.why;
      return PL_WASI_ERR_MODULE;
    }
  }
  wabt::Errors errors;
  wabt::Result r = wi::ReadBinaryInterp("module", wasm, len, options, &errors,
                                        desc);
  if (wabt::Failed(r)) {
    if (errors.empty()) {
      *why = "invalid module";
    } else {
      const wabt::Error &e = errors.front();
      *why = "invalid module: " + e.message +
             fmt(" (at byte offset %zu)", e.loc.offset);
    }
    return PL_WASI_ERR_MODULE;
  }
  return PL_WASI_OK;
}

namespace {

/* Type of function `index` in the module's function index space (imported
 * functions come first).  NULL when out of range. */
const wi::FuncType *func_type_at(const wi::ModuleDesc &desc, wabt::Index index) {
  size_t nimports = desc.imports.size(); /* all imports are functions here */
  if (index < nimports) {
    const wi::ExternType *t = desc.imports[index].type.type.get();
    return t->kind == wabt::ExternalKind::Func
               ? static_cast<const wi::FuncType *>(t)
               : nullptr;
  }
  if (index - nimports < desc.funcs.size())
    return &desc.funcs[index - nimports].type;
  return nullptr;
}

/* Number of whole pages allowed by the caller's memory cap. */
uint64_t cap_pages(const pl_wasi_limits &limits) {
  uint64_t pages = limits.memory_bytes / kPageSize;
  return pages > kMaxPages ? kMaxPages : pages;
}

}  // namespace

/* Apply plimsoll's rules to a parsed module and lower the memory and table
 * maxima to the caps (the lowering only matters for a run).  Returns < 0
 * with *why set when the module is refused. */
int check_module(wi::ModuleDesc *desc, const pl_wasi_limits &limits,
                 std::string *why) {
  /* Imports: functions from wasi_snapshot_preview1 only. */
  for (const wi::ImportDesc &imp : desc->imports) {
    const wi::ImportType &it = imp.type;
    if (it.module != kWasiModule) {
      *why = "import " + it.module + "." + it.name +
             " is not allowed: only wasi_snapshot_preview1 functions can be "
             "imported";
      return PL_WASI_ERR_MODULE;
    }
    if (it.type->kind != wabt::ExternalKind::Func) {
      *why = fmt("import %s.%s is a %s: only functions can be imported",
                 kWasiModule, it.name.c_str(), wabt::GetKindName(it.type->kind));
      return PL_WASI_ERR_MODULE;
    }
    const auto &ft = *static_cast<const wi::FuncType *>(it.type.get());
    if (!wasi_import_fits(it.name, ft, why)) return PL_WASI_ERR_MODULE;
  }

  /* Exports: "_start" () -> () and "memory". */
  bool have_start = false, have_memory = false;
  for (const wi::ExportDesc &ex : desc->exports) {
    const std::string &name = ex.type.name;
    wabt::ExternalKind kind = ex.type.type->kind;
    if (name == "_start") {
      if (kind != wabt::ExternalKind::Func) {
        *why = "export \"_start\" is not a function";
        return PL_WASI_ERR_MODULE;
      }
      const wi::FuncType *ft = func_type_at(*desc, ex.index);
      if (ft == nullptr || !ft->params.empty() || !ft->results.empty()) {
        *why = "export \"_start\" must have type () -> ()";
        return PL_WASI_ERR_MODULE;
      }
      have_start = true;
    } else if (name == "memory") {
      if (kind != wabt::ExternalKind::Memory) {
        *why = "export \"memory\" is not a memory";
        return PL_WASI_ERR_MODULE;
      }
      have_memory = true;
    }
  }
  if (!have_start) {
    *why = "module does not export a \"_start\" function";
    return PL_WASI_ERR_MODULE;
  }
  if (!have_memory) {
    *why = "module does not export a memory named \"memory\"";
    return PL_WASI_ERR_MODULE;
  }

  /* Memory: initial within the cap, max lowered to the cap. */
  uint64_t max_pages = cap_pages(limits);
  for (wi::MemoryDesc &m : desc->memories) {
    wabt::Limits &l = m.type.limits;
    if (l.initial > max_pages) {
      *why = fmt("initial memory of %llu pages (%llu bytes) exceeds the cap "
                 "of %llu bytes",
                 static_cast<unsigned long long>(l.initial),
                 static_cast<unsigned long long>(l.initial * kPageSize),
                 static_cast<unsigned long long>(limits.memory_bytes));
      return PL_WASI_ERR_MODULE;
    }
    if (!l.has_max || l.max > max_pages) {
      l.max = max_pages;
      l.has_max = true;
    }
  }

  /* Tables: their number and initial sizes were bounded by the counting
   * pass; the maximum is lowered to the cap. */
  for (wi::TableDesc &t : desc->tables) {
    wabt::Limits &l = t.type.limits;
    if (!l.has_max || l.max > PL_WASI_MAX_TABLE_ELEMS) {
      l.max = PL_WASI_MAX_TABLE_ELEMS;
      l.has_max = true;
    }
  }

  /* Params + locals per function were counted in the first pass. */
  return PL_WASI_OK;
}

}  // namespace plwasi
