/* SPDX-License-Identifier: Apache-2.0 */
/*
 * output.c: one page of a process's output as the endpoint answers
 * readOutput (`{chunks: [{stream, data (base64), streamSequence}],
 * nextResumeFrom, exited?: {exitCode}}`), read into the run's captures.
 * The service's bytes are not trusted: a chunk that is not base64, or a
 * cursor that goes back, is an error; the captures keep no more than their
 * caps whatever the page holds (fuzz/fuzz_dc_output.c).
 */
#include <stdlib.h>
#include <string.h>

#include "../../core/canon.h"
#include "dc_int.h"

void dc_proc_init(struct dc_proc *p, size_t output_cap) {
    memset(p, 0, sizeof(*p));
    pl_capture_init(&p->out, output_cap);
    pl_capture_init(&p->err, output_cap);
    p->exit_code = -1;
}

void dc_proc_free(struct dc_proc *p) {
    pl_capture_free(&p->out);
    pl_capture_free(&p->err);
}

int dc_output_page(const json_t *j, struct dc_proc *p, unsigned long long *cursor, bool *ret_exited,
                   struct pl_error *err) {
    size_t i;
    json_t *c;
    int rc = 0;
    *ret_exited = false;
    json_array_foreach(json_object_get(j, "chunks"), i, c) {
        const char *stream = json_string_value(json_object_get(c, "stream"));
        const char *data = json_string_value(json_object_get(c, "data"));
        unsigned char *bytes = NULL;
        size_t len = 0;
        if (!stream || !data ||
            pl_base64_decode(data, strlen(data), DC_MAX_OUTPUT_PAGE, &bytes, &len) < 0) {
            rc = pl_error_set(err, PL_REASON_INTERNAL,
                              "the sandbox's endpoint: an output chunk that is not base64");
            break;
        }
        struct pl_capture *cap = strcmp(stream, "stderr") == 0 ? &p->err : &p->out;
        int added = pl_capture_add(cap, bytes, len);
        free(bytes);
        if (added < 0) {
            rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
            break;
        }
    }
    /* The cursor: a 64-bit integer comes as a string (or a number). */
    const json_t *next = json_object_get(j, "nextResumeFrom");
    unsigned long long nx = *cursor;
    if (json_is_string(next))
        nx = strtoull(json_string_value(next), NULL, 10);
    else if (json_is_integer(next) && json_integer_value(next) >= 0)
        nx = (unsigned long long)json_integer_value(next);
    if (rc == 0 && nx < *cursor)
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the sandbox's endpoint: the output cursor went back");
    *cursor = nx;
    const json_t *exited = json_object_get(j, "exited");
    *ret_exited = rc == 0 && json_is_object(exited);
    if (*ret_exited) {
        const json_t *code = json_object_get(exited, "exitCode");
        json_int_t v = json_is_integer(code) ? json_integer_value(code) : 0;
        if (v < -255 || v > 255) {
            *ret_exited = false;
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the sandbox's endpoint: an exit code out of range");
        }
        p->exit_code = (int)v;
    }
    return rc;
}
