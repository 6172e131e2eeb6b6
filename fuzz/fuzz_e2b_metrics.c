/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_e2b_metrics.c: the daemon's reader of E2B's metrics of a VM as a
 * run's usage (src/providers/e2b/usage.c).  The input is what E2B, or
 * something in its place, answers GET /sandboxes/{id}/metrics with; the
 * first eight bytes choose the run's window.  Whatever the bytes, a usage
 * is either present with the service's source or absent with a reason.
 *
 *   build-fuzz/fuzz/fuzz_e2b_metrics fuzz/corpus/e2b_metrics
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/e2b/e2b_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8)
        return 0;
    uint32_t a, b;
    memcpy(&a, data, 4);
    memcpy(&b, data + 4, 4);
    long long start = a, end = (long long)a + (b & 0xffff);
    json_t *j = json_loadb((const char *)data + 8, size - 8, 0, NULL);
    if (!j)
        return 0;
    struct pl_usage u;
    char why[128] = "";
    int r = eb_usage_of(j, start, end, &u, why, sizeof(why));
    if (r == 0 && (!u.present || strcmp(u.source, "service") != 0 || u.cpu_system_us != 0))
        abort();
    if (r < 0 && (u.present || !why[0]))
        abort();
    json_decref(j);
    return 0;
}
