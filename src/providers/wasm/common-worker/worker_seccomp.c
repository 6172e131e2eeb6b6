/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker_seccomp.c: the system-call filter both worker executables
 * (plimsoll-js-worker, plimsoll-wasi-worker) install before they serve.
 */
#include "worker_seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define PL_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define PL_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

/*
 * Sanitizer builds (ASan+UBSan, used by the test suite) keep the filter but
 * log instead of killing: the sanitizer runtime makes system calls of its
 * own (signal stacks, /proc reads) that a serving worker never needs.  The
 * release build kills.
 */
#if defined(__SANITIZE_ADDRESS__)
#define PL_SECCOMP_DENY SECCOMP_RET_LOG
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PL_SECCOMP_DENY SECCOMP_RET_LOG
#endif
#endif
#ifndef PL_SECCOMP_DENY
#define PL_SECCOMP_DENY SECCOMP_RET_KILL_PROCESS
#endif

#define ALLOW(nr)                                                                                  \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

/* Skip the next instruction unless `flag` is set in `flags`: the ALLOW
 * pair that follows then applies only to the worker that asked for it. */
#define ONLY_WITH(flag) BPF_JUMP(BPF_JMP | BPF_JA, (flags & (flag)) ? 0 : 2, 0, 0)

/*
 * Allow only what a serving worker needs: socket I/O on its existing fd,
 * memory management (guest memory is mmap/mprotect, the C heap uses
 * brk/mmap/mremap/madvise), the deadline timer and signal return, clocks,
 * futex (libc locks), getrandom (the JavaScript worker seeds each run's
 * Math.random with it, the module worker serves WASI random_get) and exit.
 * The module worker also gets clock_getres (WASI clock_res_get; the
 * JavaScript guest does not import it).  openat fails with EACCES; anything else (socket, exec,
 * kill, ptrace, ...) kills the whole worker, and the pool reports an
 * infrastructure error and respawns it.
 *
 * The src/core/ helpers a worker links stay inside this list: pl_now_ns()
 * is clock_gettime; pl_fd_read_full() with no deadline on the worker's
 * blocking socket is read() alone (it would poll only after EAGAIN, which
 * a blocking socket does not return); frames go out with sendmsg()
 * (pl_js_write_frame()).  test_js_pool, test_wasi_runner and the API
 * tests run both workers under this filter in the release build, where a
 * call outside it would kill the worker and fail the run.
 */
int pl_worker_seccomp(unsigned flags) {
#ifdef PL_AUDIT_ARCH
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PL_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(__NR_read),
        ALLOW(__NR_write),
        ALLOW(__NR_writev),
        ALLOW(__NR_sendmsg),
        ALLOW(__NR_mmap),
        ALLOW(__NR_munmap),
        ALLOW(__NR_mprotect),
        ALLOW(__NR_mremap),
        ALLOW(__NR_madvise),
        ALLOW(__NR_brk),
        ALLOW(__NR_rt_sigreturn),
        ALLOW(__NR_rt_sigprocmask),
        ALLOW(__NR_setitimer),
        ALLOW(__NR_clock_gettime),
#ifdef __NR_gettimeofday
        ALLOW(__NR_gettimeofday),
#endif
        ALLOW(__NR_futex),
        ALLOW(__NR_getpid),
        ALLOW(__NR_exit),
        ALLOW(__NR_exit_group),
        ALLOW(__NR_getrandom),
        ONLY_WITH(PL_SECCOMP_WASI_CALLS),
        ALLOW(__NR_clock_getres),
        /* libc may probe files (e.g. /proc/sys/vm/overcommit_memory when
         * trimming a heap): refuse quietly instead of killing. */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
        BPF_STMT(BPF_RET | BPF_K, PL_SECCOMP_DENY),
    };
    struct sock_fprog prog = {
        .len = (unsigned short)(sizeof(filter) / sizeof(filter[0])),
        .filter = filter,
    };

    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
        return -errno;
    return 0;
#else
    (void)flags;
    return -ENOSYS;
#endif
}
