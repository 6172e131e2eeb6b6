/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wasi_calls.cc: the WASI preview 1 calls a module can make (the table in
 * docs/providers/wasm-modules.md), bound to one run's Ctx.
 *
 * Each takes the run's Ctx and the call's parameters (already type checked
 * by wabt against the import's FuncType) and returns a WASI errno.  Every
 * guest pointer and length is checked against the current size of linear
 * memory before the host touches it (Ctx::span); a bad one makes the call
 * return EFAULT.  proc_exit is special-cased in the binding.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "wasi_runner_int.hh"

namespace plwasi {
namespace {

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

}  // namespace

/* Whether an import of wasi_snapshot_preview1 `name` with type `ft` can be
 * bound: a known function with its exact signature, or an unknown one that
 * returns one i32 (bound to ENOSYS).  False with *why set otherwise. */
bool wasi_import_fits(const std::string &name, const wi::FuncType &ft,
                      std::string *why) {
  const WasiFunc *wf = find_wasi(name);
  if (wf != nullptr) {
    wi::FuncType want = wasi_type(*wf);
    if (ft.params != want.params || ft.results != want.results) {
      *why = fmt("import %s.%s has the wrong signature", kWasiModule,
                 name.c_str());
      return false;
    }
  } else if (ft.results.size() != 1 || ft.results[0] != wabt::Type::I32) {
    *why = fmt("import %s.%s must return a single i32 errno", kWasiModule,
               name.c_str());
    return false;
  }
  return true;
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

}  // namespace plwasi
