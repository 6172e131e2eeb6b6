/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cleanup.c: the cleanup a hosted sandbox runs as root between a project's
 * steps and after a session's call (docs/internals/hosted.md, "Cleanup"):
 * its programs, and how the daemon reads what they print.
 */
#include <stdio.h>
#include <string.h>

#include "../../core/clock.h"
#include "end_processes_py.h" /* generated: ph_guest_end_processes[] */
#include "hosted.h"
#include "own_processes_py.h" /* generated: ph_guest_own_processes[] */

/* The programs (guest/end_processes.py, guest/own_processes.py) say what
 * the cleanup ends and spares. */
const char *const ph_end_user_processes = ph_guest_end_processes;
const char *const ph_own_processes = ph_guest_own_processes;

bool ph_cleanup_clean(const char *out, size_t len, char *ret_alive, size_t alive_size) {
    /* "clean\nalive[ P:S...]\n" and nothing else */
    if (len < 12 || memcmp(out, "clean\nalive", 11) != 0 || out[len - 1] != '\n' ||
        memchr(out + 11, '\n', len - 12))
        return false;
    if (ret_alive)
        snprintf(ret_alive, alive_size, "%.*s", (int)(len - 12), out + 11);
    return true;
}

uint64_t ph_cleanup_deadline(uint64_t deadline) {
    uint64_t floor = pl_now_ns() + (uint64_t)PH_CLEANUP_MIN_MS * 1000000ull;
    return deadline > floor ? deadline : floor;
}

int ph_cleanup_verdict(bool timed_out, int exit_code, const char *out, size_t len,
                       const char *after, char *ret_alive, size_t alive_size,
                       struct pl_error *err) {
    if (!timed_out && exit_code == 0 && ph_cleanup_clean(out, len, ret_alive, alive_size))
        return 0;
    char why[48];
    if (timed_out)
        snprintf(why, sizeof(why), "the cleanup timed out");
    else if (exit_code != 0)
        snprintf(why, sizeof(why), "the cleanup exited %d", exit_code);
    else
        snprintf(why, sizeof(why), "the cleanup did not say clean");
    return pl_error_set(err, PL_REASON_INTERNAL,
                        "what %s left running could not be ended (%s): %.*s", after, why,
                        (int)(len < 100 ? len : 100), out);
}
