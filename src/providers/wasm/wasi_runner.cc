/*
 * wasi_runner.cc - the C API of wasi_runner.h on top of the wabt
 * interpreter (libwabt 1.0.32, built without WITH_WASI).
 *
 * A run is: count the module's items against the PL_WASI_MAX_* bounds with
 * wabt's binary reader and a delegate that allocates nothing
 * (BoundsCounter), parse + validate the bytes with
 * wabt::interp::ReadBinaryInterp, check the module against plimsoll's
 * rules (only wasi_snapshot_preview1
 * function imports, "_start" and "memory" exported, resource bounds), lower
 * the declared memory and table maxima to the caps, bind every import to a
 * HostFunc implemented here, instantiate in a fresh Store, then call the
 * start function (if any) and "_start" on a fresh interp Thread.  Everything
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

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <new>
#include <string>
#include <vector>

#include <wabt/binary-reader-nop.h>
#include <wabt/binary-reader.h>
#include <wabt/config.h>
#include <wabt/error.h>
#include <wabt/feature.h>
#include <wabt/interp/binary-reader-interp.h>
#include <wabt/interp/interp.h>

namespace {

namespace wi = wabt::interp;

/* The only import module a module may use. */
constexpr const char kWasiModule[] = "wasi_snapshot_preview1";

/* WASI preview 1 errno values (wasi/api.h). */
constexpr uint16_t kSuccess = 0;
constexpr uint16_t kEbadf = 8;
constexpr uint16_t kEfault = 21;
constexpr uint16_t kEinval = 28;
constexpr uint16_t kEio = 29;
constexpr uint16_t kEnosys = 52;
constexpr uint16_t kEnotsup = 58;
constexpr uint16_t kEspipe = 70;
constexpr uint16_t kEnotcapable = 76;

/* WASI constants used by the fd functions. */
constexpr uint8_t kFiletypeUnknown = 0;
constexpr uint16_t kFdflagAppend = 1;
constexpr uint64_t kRightFdRead = 1ull << 1;
constexpr uint64_t kRightFdFdstatSetFlags = 1ull << 3;
constexpr uint64_t kRightFdWrite = 1ull << 6;
constexpr uint64_t kRightFdFilestatGet = 1ull << 21;
constexpr uint64_t kRightPollFdReadwrite = 1ull << 27;

constexpr uint64_t kPageSize = 65536;
constexpr uint64_t kMaxPages = 65536; /* 4 GiB, the wasm32 limit */

/* argv[0] as the module sees it. */
constexpr const char kArgv0[] = "module";

/* ---------------------------------------------------------------- */
/* Small helpers                                                     */
/* ---------------------------------------------------------------- */

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

/* printf into a std::string (messages only; short). */
std::string fmt(const char *format, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *format, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, format);
  vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  return std::string(buf);
}

/* Little-endian loads and stores on guest memory (wasm is little-endian
 * whatever the host is). */
uint32_t ld32(const uint8_t *p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
void st16(uint8_t *p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void st32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void st64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

/* ---------------------------------------------------------------- */
/* Per-run state seen by the host functions                          */
/* ---------------------------------------------------------------- */

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

/* A guest iovec, copied out of linear memory before use so that a read
 * into a buffer overlapping the iovec array cannot change later entries. */
struct Iov {
  uint32_t base;
  uint32_t len;
};

/* Read and bounds-check `n` iovecs at guest address `ptr`.  Every buffer
 * is checked too.  Returns a WASI errno. */
uint16_t load_iovs(const Ctx &c, uint32_t ptr, uint32_t n, Iov *iovs,
                   uint64_t *ret_total) {
  if (n > PL_WASI_MAX_IOVS) return kEinval;
  uint8_t *raw;
  if (!c.span(ptr, static_cast<uint64_t>(n) * 8, &raw)) return kEfault;
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; i++) {
    iovs[i].base = ld32(raw + 8 * i);
    iovs[i].len = ld32(raw + 8 * i + 4);
    uint8_t *unused;
    if (!c.span(iovs[i].base, iovs[i].len, &unused)) return kEfault;
    total += iovs[i].len;
  }
  /* The byte count is returned to the guest as a u32. */
  if (total > UINT32_MAX) return kEinval;
  *ret_total = total;
  return kSuccess;
}

/* ---------------------------------------------------------------- */
/* WASI host functions                                               */
/*                                                                   */
/* Each takes the run's Ctx and the call's parameters (already type  */
/* checked by wabt against the import's FuncType) and returns a WASI */
/* errno.  proc_exit is special-cased in the binding.                */
/* ---------------------------------------------------------------- */

using Values = wi::Values;
using Handler = uint16_t (*)(Ctx &, const Values &);

uint32_t p32(const Values &p, size_t i) { return p[i].Get<uint32_t>(); }

uint16_t wasi_args_sizes_get(Ctx &c, const Values &p) {
  uint8_t *argc_p, *size_p;
  if (!c.span(p32(p, 0), 4, &argc_p) || !c.span(p32(p, 1), 4, &size_p))
    return kEfault;
  st32(argc_p, static_cast<uint32_t>(c.argv.size()));
  st32(size_p, static_cast<uint32_t>(c.argv_bytes));
  return kSuccess;
}

uint16_t wasi_args_get(Ctx &c, const Values &p) {
  uint32_t argv_ptr = p32(p, 0), buf_ptr = p32(p, 1);
  uint8_t *argv_p, *buf_p;
  if (!c.span(argv_ptr, 4ull * c.argv.size(), &argv_p) ||
      !c.span(buf_ptr, c.argv_bytes, &buf_p))
    return kEfault;
  uint32_t off = 0;
  for (size_t i = 0; i < c.argv.size(); i++) {
    st32(argv_p + 4 * i, buf_ptr + off);
    memcpy(buf_p + off, c.argv[i], c.argv_len[i]);
    buf_p[off + c.argv_len[i]] = 0;
    off += static_cast<uint32_t>(c.argv_len[i] + 1);
  }
  return kSuccess;
}

uint16_t wasi_environ_sizes_get(Ctx &c, const Values &p) {
  uint8_t *count_p, *size_p;
  if (!c.span(p32(p, 0), 4, &count_p) || !c.span(p32(p, 1), 4, &size_p))
    return kEfault;
  st32(count_p, 0);
  st32(size_p, 0);
  return kSuccess;
}

uint16_t wasi_environ_get(Ctx &, const Values &) {
  return kSuccess; /* empty environment: nothing to write */
}

/* Map a WASI clock id to a host clock; false for unknown ids. */
bool host_clock(uint32_t id, clockid_t *ret) {
  switch (id) {
    case 0: *ret = CLOCK_REALTIME; return true;
    case 1: *ret = CLOCK_MONOTONIC; return true;
    case 2: *ret = CLOCK_PROCESS_CPUTIME_ID; return true;
    case 3: *ret = CLOCK_THREAD_CPUTIME_ID; return true;
    default: return false;
  }
}

uint64_t ts_ns(const struct timespec &ts) {
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

uint16_t wasi_clock_res_get(Ctx &c, const Values &p) {
  clockid_t id;
  if (!host_clock(p32(p, 0), &id)) return kEinval;
  uint8_t *out;
  if (!c.span(p32(p, 1), 8, &out)) return kEfault;
  struct timespec ts;
  if (clock_getres(id, &ts) != 0) return kEinval;
  st64(out, ts_ns(ts));
  return kSuccess;
}

uint16_t wasi_clock_time_get(Ctx &c, const Values &p) {
  clockid_t id;
  if (!host_clock(p32(p, 0), &id)) return kEinval;
  uint8_t *out;
  if (!c.span(p32(p, 2), 8, &out)) return kEfault; /* p[1] is precision */
  struct timespec ts;
  if (clock_gettime(id, &ts) != 0) return kEinval;
  st64(out, ts_ns(ts));
  return kSuccess;
}

uint16_t wasi_fd_write(Ctx &c, const Values &p) {
  uint32_t fd = p32(p, 0);
  pl_capture *sink = fd == 1 ? &c.out : fd == 2 ? &c.err : nullptr;
  if (sink == nullptr || !c.open_std(fd)) return kEbadf;
  Iov iovs[PL_WASI_MAX_IOVS];
  uint64_t total = 0;
  uint16_t e = load_iovs(c, p32(p, 1), p32(p, 2), iovs, &total);
  if (e != kSuccess) return e;
  uint8_t *nwritten;
  if (!c.span(p32(p, 3), 4, &nwritten)) return kEfault;
  uint32_t n = p32(p, 2);
  for (uint32_t i = 0; i < n; i++) {
    uint8_t *data;
    if (!c.span(iovs[i].base, iovs[i].len, &data)) return kEfault;
    /* Kept up to the cap; past it, or when host memory is short, the
     * bytes are dropped and the stream counts as cut, never an error. */
    (void)pl_capture_add(sink, data, iovs[i].len);
  }
  /* Report everything as written even past the cap: a guest told "0
   * bytes" would retry forever. */
  st32(nwritten, static_cast<uint32_t>(total));
  return kSuccess;
}

uint16_t wasi_fd_read(Ctx &c, const Values &p) {
  uint32_t fd = p32(p, 0);
  if (fd != 0 || !c.open_std(fd)) return kEbadf;
  Iov iovs[PL_WASI_MAX_IOVS];
  uint64_t total = 0;
  uint16_t e = load_iovs(c, p32(p, 1), p32(p, 2), iovs, &total);
  if (e != kSuccess) return e;
  uint8_t *nread_p;
  if (!c.span(p32(p, 3), 4, &nread_p)) return kEfault;
  uint32_t n = p32(p, 2);
  uint32_t nread = 0;
  for (uint32_t i = 0; i < n && c.in_pos < c.in_len; i++) {
    uint8_t *data;
    if (!c.span(iovs[i].base, iovs[i].len, &data)) return kEfault;
    size_t left = c.in_len - c.in_pos;
    size_t take = iovs[i].len < left ? iovs[i].len : left;
    memcpy(data, c.in + c.in_pos, take);
    c.in_pos += take;
    nread += static_cast<uint32_t>(take);
  }
  st32(nread_p, nread);
  return kSuccess;
}

uint16_t wasi_fd_close(Ctx &c, const Values &p) {
  uint32_t fd = p32(p, 0);
  if (!c.open_std(fd)) return kEbadf;
  c.closed[fd] = true;
  return kSuccess;
}

uint16_t wasi_fd_fdstat_get(Ctx &c, const Values &p) {
  uint32_t fd = p32(p, 0);
  if (!c.open_std(fd)) return kEbadf;
  uint8_t *st;
  if (!c.span(p32(p, 1), 24, &st)) return kEfault;
  uint64_t rights = kRightPollFdReadwrite | kRightFdFdstatSetFlags |
                    kRightFdFilestatGet |
                    (fd == 0 ? kRightFdRead : kRightFdWrite);
  memset(st, 0, 24);
  st[0] = kFiletypeUnknown; /* a pipe: not a tty, not seekable */
  st16(st + 2, fd == 0 ? 0 : kFdflagAppend);
  st64(st + 8, rights);
  st64(st + 16, 0);
  return kSuccess;
}

uint16_t wasi_fd_fdstat_set_flags(Ctx &c, const Values &p) {
  if (!c.open_std(p32(p, 0))) return kEbadf;
  if ((p32(p, 1) & ~static_cast<uint32_t>(kFdflagAppend)) != 0)
    return kEnotsup;
  return kSuccess;
}

uint16_t wasi_fd_filestat_get(Ctx &c, const Values &p) {
  if (!c.open_std(p32(p, 0))) return kEbadf;
  uint8_t *st;
  if (!c.span(p32(p, 1), 64, &st)) return kEfault;
  memset(st, 0, 64);
  st[16] = kFiletypeUnknown;
  st64(st + 24, 1); /* nlink */
  return kSuccess;
}

uint16_t wasi_fd_seek(Ctx &c, const Values &p) {
  return c.open_std(p32(p, 0)) ? kEspipe : kEbadf;
}

uint16_t wasi_fd_prestat_get(Ctx &, const Values &) {
  return kEbadf; /* no preopened directories at all */
}

uint16_t wasi_fd_prestat_dir_name(Ctx &, const Values &) { return kEbadf; }

uint16_t wasi_path_open(Ctx &c, const Values &p) {
  /* 0, 1 and 2 are not directories; nothing else is open. */
  return c.open_std(p32(p, 0)) ? kEnotcapable : kEbadf;
}

uint16_t wasi_random_get(Ctx &c, const Values &p) {
  uint32_t len = p32(p, 1);
  uint8_t *buf;
  if (!c.span(p32(p, 0), len, &buf)) return kEfault;
  size_t done = 0;
  while (done < len) {
    ssize_t n = getrandom(buf + done, len - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return kEio;
    }
    done += static_cast<size_t>(n);
  }
  return kSuccess;
}

uint16_t wasi_sched_yield(Ctx &, const Values &) { return kSuccess; }

uint16_t wasi_enosys(Ctx &, const Values &) { return kEnosys; }

/* The implemented functions and their exact preview 1 signatures.  Params:
 * 'i' = i32, 'I' = i64.  `handler` NULL marks proc_exit. */
struct WasiFunc {
  const char *name;
  const char *params;
  bool returns_errno;
  Handler handler;
};

const WasiFunc kWasiFuncs[] = {
    {"args_get", "ii", true, wasi_args_get},
    {"args_sizes_get", "ii", true, wasi_args_sizes_get},
    {"environ_get", "ii", true, wasi_environ_get},
    {"environ_sizes_get", "ii", true, wasi_environ_sizes_get},
    {"clock_res_get", "ii", true, wasi_clock_res_get},
    {"clock_time_get", "iIi", true, wasi_clock_time_get},
    {"fd_close", "i", true, wasi_fd_close},
    {"fd_fdstat_get", "ii", true, wasi_fd_fdstat_get},
    {"fd_fdstat_set_flags", "ii", true, wasi_fd_fdstat_set_flags},
    {"fd_filestat_get", "ii", true, wasi_fd_filestat_get},
    {"fd_prestat_get", "ii", true, wasi_fd_prestat_get},
    {"fd_prestat_dir_name", "iii", true, wasi_fd_prestat_dir_name},
    {"fd_read", "iiii", true, wasi_fd_read},
    {"fd_seek", "iIii", true, wasi_fd_seek},
    {"fd_write", "iiii", true, wasi_fd_write},
    {"path_open", "iiiiiIIii", true, wasi_path_open},
    {"poll_oneoff", "iiii", true, wasi_enosys},
    {"proc_exit", "i", false, nullptr},
    {"random_get", "ii", true, wasi_random_get},
    {"sched_yield", "", true, wasi_sched_yield},
};

const WasiFunc *find_wasi(const std::string &name) {
  for (const WasiFunc &f : kWasiFuncs)
    if (name == f.name) return &f;
  return nullptr;
}

/* The FuncType a table entry stands for. */
wi::FuncType wasi_type(const WasiFunc &f) {
  wi::ValueTypes params;
  for (const char *c = f.params; *c; c++)
    params.push_back(*c == 'I' ? wabt::Type::I64 : wabt::Type::I32);
  wi::ValueTypes results;
  if (f.returns_errno) results.push_back(wabt::Type::I32);
  return wi::FuncType(params, results);
}

/* ---------------------------------------------------------------- */
/* Module checks                                                     */
/* ---------------------------------------------------------------- */

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
    const WasiFunc *wf = find_wasi(it.name);
    if (wf != nullptr) {
      wi::FuncType want = wasi_type(*wf);
      if (ft.params != want.params || ft.results != want.results) {
        *why = fmt("import %s.%s has the wrong signature", kWasiModule,
                   it.name.c_str());
        return PL_WASI_ERR_MODULE;
      }
    } else if (ft.results.size() != 1 || ft.results[0] != wabt::Type::I32) {
      *why = fmt("import %s.%s must return a single i32 errno", kWasiModule,
                 it.name.c_str());
      return PL_WASI_ERR_MODULE;
    }
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

/* Index of the export called `name` in the module's export list, or -1. */
long find_export(const wi::Module &module, const char *name) {
  const auto &types = module.export_types();
  for (size_t i = 0; i < types.size(); i++)
    if (types[i].name == name) return static_cast<long>(i);
  return -1;
}

/* Build the import vector: one HostFunc per import, bound to `ctx`. */
void bind_imports(wi::Store &store, const wi::ModuleDesc &desc, Ctx *ctx,
                  wi::RefVec *imports) {
  for (const wi::ImportDesc &imp : desc.imports) {
    const auto &ft = *static_cast<const wi::FuncType *>(imp.type.type.get());
    const WasiFunc *wf = find_wasi(imp.type.name);
    wi::HostFunc::Ptr fn;
    if (wf != nullptr && wf->handler == nullptr) {
      /* proc_exit: record the code and unwind the whole run with a trap
       * that pl_wasi_run recognises through ctx->exited. */
      fn = wi::HostFunc::New(
          store, ft,
          [ctx](wi::Thread &thread, const Values &params, Values &,
                wi::Trap::Ptr *out_trap) -> wabt::Result {
            ctx->exited = true;
            ctx->exit_code = params[0].Get<uint32_t>();
            *out_trap = wi::Trap::New(thread.store(), "proc_exit");
            return wabt::Result::Error;
          });
    } else {
      Handler h = wf != nullptr ? wf->handler : wasi_enosys;
      fn = wi::HostFunc::New(
          store, ft,
          [ctx, h](wi::Thread &, const Values &params, Values &results,
                   wi::Trap::Ptr *) -> wabt::Result {
            uint16_t e = h(*ctx, params);
            results.resize(1);
            results[0] = wi::Value::Make(static_cast<uint32_t>(e));
            return wabt::Result::Ok;
          });
    }
    imports->push_back(fn.ref());
  }
}

/* Call a function of no params and no results on a fresh Thread.  Returns
 * true when it returned normally; false with *ret_trap set otherwise. */
bool call_void(wi::Store &store, wi::Ref func_ref, wi::Trap::Ptr *ret_trap) {
  wi::Func::Ptr func = store.UnsafeGet<wi::Func>(func_ref);
  wi::Thread thread(store);
  Values params, results;
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
