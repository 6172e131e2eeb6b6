/* SPDX-License-Identifier: Apache-2.0 */
/* record.c: build and check run records (see record.h). */
#include "record.h"

#include <stdio.h>
#include <string.h>

#include "canon.h"

int pl_rfc3339(struct timespec ts, char ret[40]) {
    struct tm tm;
    time_t t = ts.tv_sec;
    if (!gmtime_r(&t, &tm))
        return -1;
    char date[24];
    if (strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        return -1;
    snprintf(ret, 40, "%s.%09ldZ", date, ts.tv_nsec);
    return 0;
}

json_t *pl_record_build(const struct pl_record_input *in) {
    struct timespec end = in->started;
    uint64_t ns = (uint64_t)end.tv_nsec + in->elapsed_ns;
    end.tv_sec += (time_t)(ns / 1000000000ull);
    end.tv_nsec = (long)(ns % 1000000000ull);
    char s[40], e[40];
    if (pl_rfc3339(in->started, s) < 0 || pl_rfc3339(end, e) < 0)
        return NULL;
    json_t *r =
        json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "version",
                  PL_RECORD_VERSION, "request_sha256", in->request_sha256, "response_sha256",
                  in->response_sha256, "provider", in->provider, "isolation", in->isolation,
                  "runtime", in->runtime ? in->runtime : "", "started_at", s, "ended_at", e,
                  "previous_digest", in->previous_digest ? in->previous_digest : "", "broker_calls",
                  (json_int_t)in->broker_calls, "broker_refused", (json_int_t)in->broker_refused);
    if (!r)
        return NULL;
    char d[65];
    if (pl_canon_sha256(r, d) < 0 || json_object_set_new(r, "digest", json_string(d)) < 0) {
        json_decref(r);
        return NULL;
    }
    return r;
}

int pl_record_verify(const json_t *record) {
    const char *want = json_string_value(json_object_get(record, "digest"));
    if (!want)
        return -1;
    json_t *copy = json_copy((json_t *)record);
    if (!copy)
        return -1;
    json_object_del(copy, "digest");
    char d[65];
    int r = pl_canon_sha256(copy, d);
    json_decref(copy);
    if (r < 0)
        return -1;
    return strcmp(d, want) == 0 ? 0 : -1;
}
