/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_dc_output.c: the daemon's reader of a process's output pages on the
 * dockercloud provider (src/providers/dockercloud/output.c).  The input is
 * what a hostile sandbox endpoint, or a broken proxy in front of it,
 * answers readOutput with, read twice in a row as two pages; the first
 * byte picks the captures' cap.  Whatever the bytes, the captures keep no
 * more than their caps and count at least what they kept, the cursor
 * never goes back on a page that read, and an exit code is in range.
 *
 *   build-fuzz/fuzz/fuzz_dc_output fuzz/corpus/dc_output
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/dockercloud/dc_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    size_t cap = data[0] & 0x0f ? (size_t)(data[0] & 0x0f) * 7 : 4096;
    data++, size--;
    json_t *page = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!page)
        return 0;
    struct dc_proc p;
    dc_proc_init(&p, cap);
    unsigned long long cursor = 0;
    for (int round = 0; round < 2; round++) {
        unsigned long long before = cursor;
        bool exited = false;
        struct pl_error err = {0};
        int rc = dc_output_page(page, &p, &cursor, &exited, &err);
        if (rc == 0 && cursor < before)
            abort(); /* a page that read never moved the cursor back */
        if (rc < 0 && (exited || err.message[0] == '\0'))
            abort(); /* a refused page says why and ends nothing */
        if (exited && (p.exit_code < -255 || p.exit_code > 255))
            abort();
    }
    if (p.out.kept.len > cap || p.err.kept.len > cap || p.out.total < p.out.kept.len ||
        p.err.total < p.err.kept.len)
        abort();
    dc_proc_free(&p);
    json_decref(page);
    return 0;
}
