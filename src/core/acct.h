/* SPDX-License-Identifier: Apache-2.0 */
/*
 * acct.h: the kernel's accounting of CPU time and memory, read from the
 * files it keeps it in: a cgroup's (v1 cpuacct.usage_user, cpuacct.stat,
 * memory.max_usage_in_bytes; v2 cpu.stat, memory.peak) and a process's
 * (/proc/<pid>/stat, /proc/<pid>/status).  What a run cost (docs/api.md,
 * "Usage") is computed from two readings of these.
 *
 * The parsers take the file's text, NUL-terminated, and accept only what
 * the kernel writes: a number that does not parse, or a field that is
 * missing, is -EINVAL, never a guess.  The kernel writes these files, not
 * a guest (under gVisor too: the cgroup is the host's, holding gVisor's
 * own processes), but /proc/<pid>/stat carries the process's name, which
 * the process chose: its fields are counted from the last ')'.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The most a file read here holds (cpu.stat is ~200 bytes; status ~1.5 KiB). */
#define PL_ACCT_TEXT_MAX 8192

/*
 * Read a small kernel file whole into buf (NUL-terminated).  0, or -errno
 * (-ENOENT: the cgroup or process is gone; -EFBIG: longer than len - 1).
 */
int pl_acct_read(const char *path, char *buf, size_t len);

/* One decimal number, optionally followed by a newline (v1's
 * memory.max_usage_in_bytes and cpuacct.usage_user, v2's memory.peak).
 * 0, or -EINVAL. */
int pl_acct_number(const char *text, uint64_t *ret);

/* v2 cpu.stat: user_usec and system_usec, in microseconds.  0, or -EINVAL
 * when either is missing or malformed. */
int pl_acct_cpu_stat(const char *text, uint64_t *ret_user_us, uint64_t *ret_system_us);

/* v1 cpuacct.stat: "user N" and "system N" in clock ticks of hz per
 * second, as microseconds.  0, or -EINVAL. */
int pl_acct_cpuacct_stat(const char *text, long hz, uint64_t *ret_user_us, uint64_t *ret_system_us);

/* /proc/<pid>/stat: utime and stime (fields 14 and 15, in clock ticks of
 * hz per second), as microseconds.  0, or -EINVAL. */
int pl_acct_proc_stat(const char *text, long hz, uint64_t *ret_user_us, uint64_t *ret_system_us);

/* /proc/<pid>/status: VmHWM (the process's peak resident set, "N kB"), in
 * bytes.  0, or -EINVAL (also when absent: a kernel thread, a zombie). */
int pl_acct_proc_hwm(const char *text, uint64_t *ret_bytes);
