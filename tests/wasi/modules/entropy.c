/* SPDX-License-Identifier: Apache-2.0 */
/*
 * entropy: what a C program sees of randomness and clocks through
 * wasi-libc: getentropy (random_get), clock_getres and clock_gettime on
 * every clock (clock_res_get, clock_time_get), time(), and nanosleep,
 * which needs poll_oneoff (ENOSYS here) and so fails.  Prints one line per
 * check; exits 0 when every line says what the docs promise.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures;

static void check(const char *what, int ok) {
    printf("%s: %s\n", what, ok ? "ok" : "FAILED");
    failures += !ok;
}

int main(void) {
    unsigned char a[256], b[256];
    check("getentropy 256 bytes, twice, differ", getentropy(a, sizeof a) == 0 &&
                                                     getentropy(b, sizeof b) == 0 &&
                                                     memcmp(a, b, sizeof a) != 0);
    errno = 0;
    check("getentropy 257 bytes is EIO", getentropy(a, 257) == -1 && errno == EIO);

    static const struct {
        clockid_t id;
        const char *name;
    } clocks[] = {
        {CLOCK_REALTIME, "realtime"},
        {CLOCK_MONOTONIC, "monotonic"},
        {CLOCK_PROCESS_CPUTIME_ID, "process cputime"},
        {CLOCK_THREAD_CPUTIME_ID, "thread cputime"},
    };
    for (size_t i = 0; i < sizeof clocks / sizeof clocks[0]; i++) {
        struct timespec res = {0, 0}, t1, t2;
        char what[64];
        snprintf(what, sizeof what, "clock_getres(%s) in (0, 1 s]", clocks[i].name);
        check(what, clock_getres(clocks[i].id, &res) == 0 && res.tv_sec == 0 && res.tv_nsec > 0);
        snprintf(what, sizeof what, "clock_gettime(%s) does not go back", clocks[i].name);
        check(what,
              clock_gettime(clocks[i].id, &t1) == 0 && clock_gettime(clocks[i].id, &t2) == 0 &&
                  (t2.tv_sec > t1.tv_sec || (t2.tv_sec == t1.tv_sec && t2.tv_nsec >= t1.tv_nsec)));
    }
    check("time() is after 2020", time(NULL) > 1577836800);
    struct timespec nap = {0, 1000000};
    check("nanosleep fails (the host has no poll_oneoff)", nanosleep(&nap, NULL) != 0);
    return failures ? 1 : 0;
}
