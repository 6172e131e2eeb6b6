/* SPDX-License-Identifier: Apache-2.0 */
/*
 * outputs.c: a cell's display outputs and a run's usage, read out of an
 * answer the library has accepted (include/plimsoll.h, "a cell's display
 * outputs and a run's usage").
 *
 * answer.c has checked the members' types and what a type cannot say (a
 * display output's kind, its binary data base64) before the caller got
 * the answer, so these only read; given something else than an answer (a
 * NULL, a member missing), they answer as for an answer without it.  The
 * rule of which MIME types travel as text is the daemon's own
 * (core/display.h), so the two cannot drift apart.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/canon.h"
#include "../core/display.h"
#include "lib.h"

size_t plimsoll_outputs_count(const json_t *result) {
    return json_array_size(json_object_get(result, "outputs"));
}

const json_t *plimsoll_output_at(const json_t *result, size_t i) {
    return json_array_get(json_object_get(result, "outputs"), i);
}

/* A uint32 member of obj; 0 when it is missing or not one. */
static unsigned u32(const json_t *obj, const char *name) {
    json_int_t x = json_integer_value(json_object_get(obj, name));
    return x > 0 && x <= (json_int_t)UINT32_MAX ? (unsigned)x : 0;
}

unsigned plimsoll_outputs_dropped(const json_t *result) {
    return u32(result, "outputs_dropped");
}

const char *plimsoll_display_kind(const json_t *display) {
    return json_string_value(json_object_get(display, "kind"));
}

size_t plimsoll_display_types(const json_t *display) {
    return json_object_size(json_object_get(display, "data"));
}

const char *plimsoll_display_type(const json_t *display, size_t j) {
    json_t *data = json_object_get(display, "data");
    void *it = json_object_iter(data);
    for (size_t k = 0; it && k < j; k++)
        it = json_object_iter_next(data, it);
    return it ? json_object_iter_key(it) : NULL;
}

bool plimsoll_mime_is_text(const char *mime) {
    return mime && pl_display_mime_is_text(mime);
}

int plimsoll_display_bytes(const json_t *display, const char *mime, unsigned char **ret,
                           size_t *ret_len, struct plimsoll_error *err) {
    if (!ret || !ret_len)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no place for the bytes");
    *ret = NULL;
    *ret_len = 0;
    const json_t *v = mime ? json_object_get(json_object_get(display, "data"), mime) : NULL;
    if (!json_is_string(v))
        return plc_fail(err, PLIMSOLL_E_USAGE, "the display output has no %.127s data",
                        mime ? mime : "(NULL)");
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (!pl_display_mime_is_text(mime)) {
        unsigned char *raw = NULL, *out;
        size_t len = 0;
        if (pl_base64_decode(s, n, SIZE_MAX - 1, &raw, &len) < 0)
            return plc_fail(err, PLIMSOLL_E_USAGE, "the display output's %.127s data is not base64",
                            mime);
        out = realloc(raw, len + 1);
        if (!out) {
            free(raw);
            return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
        }
        out[len] = '\0';
        *ret = out;
        *ret_len = len;
        return 0;
    }
    unsigned char *out = malloc(n + 1);
    if (!out)
        return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    memcpy(out, s, n);
    out[n] = '\0';
    *ret = out;
    *ret_len = n;
    return 0;
}

bool plimsoll_usage_of(const json_t *result_or_step, struct plimsoll_usage *ret) {
    const json_t *u = json_object_get(result_or_step, "usage");
    if (!ret)
        return json_is_object(u);
    *ret = (struct plimsoll_usage){.source = ""};
    if (!json_is_object(u))
        return false;
    const char *source = json_string_value(json_object_get(u, "source"));
    *ret = (struct plimsoll_usage){.cpu_user_ms = u32(u, "cpu_user_ms"),
                                   .cpu_system_ms = u32(u, "cpu_system_ms"),
                                   .memory_peak_kib = u32(u, "memory_peak_kib"),
                                   .wall_ms = u32(u, "wall_ms"),
                                   .source = source ? source : ""};
    return true;
}

const char *plimsoll_usage_absent(const json_t *result) {
    const char *why = json_string_value(json_object_get(result, "usage_absent"));
    return why && *why ? why : NULL;
}
