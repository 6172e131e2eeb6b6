/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wasicalls: calls every WASI preview 1 function once or more and prints
 * one line per call, "name=errno" plus what came back, then exits through
 * proc_exit(7).  The tests compare the whole output with the behaviour
 * docs/providers/wasm-modules.md lists: each call works or returns its
 * errno, and none of them ends the worker.
 *
 * Run it with stdin "in" (two bytes) and no arguments.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <wasi/api.h>

/* proc_raise is in preview 1 but no longer in wasi-libc's header. */
__attribute__((import_module("wasi_snapshot_preview1"), import_name("proc_raise"))) extern uint16_t
raw_proc_raise(uint32_t sig);

#define BADFD 9
/* An address past the end of a one-page... any small module's memory. */
#define BADPTR ((void *)0xfffffff0u)

static void line(const char *name, int e) {
    printf("%s=%d\n", name, e);
}

int main(void) {
    uint8_t buf[256];
    __wasi_size_t a = 0, b = 0;
    __wasi_timestamp_t t = 0;
    __wasi_fdstat_t fds;
    __wasi_filestat_t fst;
    __wasi_prestat_t pre;
    __wasi_filesize_t off = 0;
    __wasi_fd_t fd = 0;
    __wasi_size_t n = 0;
    __wasi_ciovec_t civ = {(const uint8_t *)"", 0};
    __wasi_iovec_t iov = {buf, sizeof buf};
    __wasi_event_t ev;
    __wasi_subscription_t sub;
    __wasi_roflags_t rof = 0;

    int e = __wasi_args_sizes_get(&a, &b);
    printf("args_sizes_get=%d argc=%u bytes=%u\n", e, (unsigned)a, (unsigned)b);
    uint8_t *argv[4];
    e = __wasi_args_get(argv, buf);
    printf("args_get=%d argv0=%s\n", e, (const char *)argv[0]);
    e = __wasi_environ_sizes_get(&a, &b);
    printf("environ_sizes_get=%d count=%u bytes=%u\n", e, (unsigned)a, (unsigned)b);
    line("environ_get", __wasi_environ_get(argv, buf));

    /* Clocks: realtime, monotonic, process and thread CPU time; 4 is no clock. */
    for (uint32_t id = 0; id < 5; id++) {
        t = 0;
        e = __wasi_clock_res_get(id, &t);
        printf("clock_res_get(%u)=%d %s\n", id, e, e == 0 ? (t > 0 ? "positive" : "zero") : "-");
        __wasi_timestamp_t t2 = 0;
        e = __wasi_clock_time_get(id, 1, &t2);
        printf("clock_time_get(%u)=%d %s\n", id, e, e == 0 ? (t2 > 0 ? "positive" : "zero") : "-");
    }
    line("clock_res_get(badptr)", __wasi_clock_res_get(0, BADPTR));

    /* Randomness: two draws differ; a bad buffer is EFAULT, never a kill. */
    uint8_t r1[32] = {0}, r2[32] = {0};
    e = __wasi_random_get(r1, sizeof r1);
    int e2 = __wasi_random_get(r2, sizeof r2);
    printf("random_get=%d,%d %s\n", e, e2, memcmp(r1, r2, sizeof r1) != 0 ? "differ" : "same");
    line("random_get(0 bytes)", __wasi_random_get(r1, 0));
    line("random_get(badptr)", __wasi_random_get(BADPTR, 64));
    static uint8_t big[1 << 20];
    line("random_get(1 MiB)", __wasi_random_get(big, sizeof big));

    /* Descriptors: 0, 1 and 2 exist, nothing else does. */
    line("fd_advise", __wasi_fd_advise(1, 0, 0, __WASI_ADVICE_NORMAL));
    line("fd_allocate", __wasi_fd_allocate(1, 0, 1));
    line("fd_close(9)", __wasi_fd_close(BADFD));
    line("fd_datasync", __wasi_fd_datasync(1));
    e = __wasi_fd_fdstat_get(1, &fds);
    printf("fd_fdstat_get(1)=%d filetype=%u flags=%u\n", e, fds.fs_filetype, fds.fs_flags);
    line("fd_fdstat_get(9)", __wasi_fd_fdstat_get(BADFD, &fds));
    line("fd_fdstat_set_flags(1,append)", __wasi_fd_fdstat_set_flags(1, __WASI_FDFLAGS_APPEND));
    line("fd_fdstat_set_flags(1,nonblock)", __wasi_fd_fdstat_set_flags(1, __WASI_FDFLAGS_NONBLOCK));
    line("fd_fdstat_set_rights", __wasi_fd_fdstat_set_rights(1, 0, 0));
    e = __wasi_fd_filestat_get(2, &fst);
    printf("fd_filestat_get(2)=%d filetype=%u nlink=%llu\n", e, fst.filetype,
           (unsigned long long)fst.nlink);
    line("fd_filestat_get(9)", __wasi_fd_filestat_get(BADFD, &fst));
    line("fd_filestat_set_size", __wasi_fd_filestat_set_size(1, 0));
    line("fd_filestat_set_times", __wasi_fd_filestat_set_times(1, 0, 0, 0));
    line("fd_pread", __wasi_fd_pread(0, &iov, 1, 0, &n));
    line("fd_prestat_get(3)", __wasi_fd_prestat_get(3, &pre));
    line("fd_prestat_dir_name(3)", __wasi_fd_prestat_dir_name(3, buf, 8));
    line("fd_pwrite", __wasi_fd_pwrite(1, &civ, 1, 0, &n));
    e = __wasi_fd_read(0, &iov, 1, &n);
    printf("fd_read(0)=%d n=%u %.*s\n", e, (unsigned)n, (int)n, (const char *)buf);
    line("fd_read(9)", __wasi_fd_read(BADFD, &iov, 1, &n));
    line("fd_readdir", __wasi_fd_readdir(1, buf, sizeof buf, 0, &n));
    line("fd_renumber", __wasi_fd_renumber(1, 2));
    line("fd_seek(1)", __wasi_fd_seek(1, 0, __WASI_WHENCE_CUR, &off));
    line("fd_seek(9)", __wasi_fd_seek(BADFD, 0, __WASI_WHENCE_CUR, &off));
    line("fd_sync", __wasi_fd_sync(1));
    line("fd_tell", __wasi_fd_tell(1, &off));
    line("fd_write(9)", __wasi_fd_write(BADFD, &civ, 1, &n));
    line("fd_close(0)", __wasi_fd_close(0));
    line("fd_read(0) after close", __wasi_fd_read(0, &iov, 1, &n));

    /* Paths: there is no directory to resolve anything against. */
    line("path_create_directory", __wasi_path_create_directory(3, "d"));
    line("path_filestat_get", __wasi_path_filestat_get(3, 0, "f", &fst));
    line("path_filestat_set_times", __wasi_path_filestat_set_times(3, 0, "f", 0, 0, 0));
    line("path_link", __wasi_path_link(3, 0, "a", 3, "b"));
    line("path_open(1)", __wasi_path_open(1, 0, "f", 0, 0, 0, 0, &fd));
    line("path_open(9)", __wasi_path_open(BADFD, 0, "f", 0, 0, 0, 0, &fd));
    line("path_readlink", __wasi_path_readlink(3, "l", buf, sizeof buf, &n));
    line("path_remove_directory", __wasi_path_remove_directory(3, "d"));
    line("path_rename", __wasi_path_rename(3, "a", 3, "b"));
    line("path_symlink", __wasi_path_symlink("a", 3, "b"));
    line("path_unlink_file", __wasi_path_unlink_file(3, "f"));

    /* Polling, signals, scheduling and sockets. */
    memset(&sub, 0, sizeof sub);
    sub.u.tag = __WASI_EVENTTYPE_CLOCK;
    sub.u.u.clock.timeout = 1000000;
    line("poll_oneoff", __wasi_poll_oneoff(&sub, &ev, 1, &n));
    line("proc_raise", raw_proc_raise(9));
    line("sched_yield", __wasi_sched_yield());
    line("sock_accept", __wasi_sock_accept(3, 0, &fd));
    line("sock_recv", __wasi_sock_recv(3, &iov, 1, 0, &n, &rof));
    line("sock_send", __wasi_sock_send(3, &civ, 1, 0, &n));
    line("sock_shutdown", __wasi_sock_shutdown(3, __WASI_SDFLAGS_WR));
    fflush(stdout);
    __wasi_proc_exit(7);
}
