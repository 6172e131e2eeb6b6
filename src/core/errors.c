/* SPDX-License-Identifier: Apache-2.0 */
/*
 * errors.c: lookups over the two X-macro tables in errors.h.
 */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *wire;
    int http;
} code_table[PL_CODE__COUNT] = {
#define PL_X(sym, wire, http) [PL_CODE_##sym] = {wire, http},
    PL_CONNECT_CODES(PL_X)
#undef PL_X
};

static const struct {
    const char *name;
    enum pl_code code;
    bool dispatched;
    const char *doc;
} reason_table[PL_REASON__COUNT] = {[PL_REASON_NONE] = {"NONE", PL_CODE_UNKNOWN, false, "no error"},
#define PL_X(sym, c, disp, d) [PL_REASON_##sym] = {#sym, PL_CODE_##c, disp, d},
                                    PL_REASONS(PL_X)
#undef PL_X
};

const char *pl_code_name(enum pl_code code) {
    if ((unsigned)code >= PL_CODE__COUNT)
        return "unknown";
    return code_table[code].wire;
}

int pl_code_http_status(enum pl_code code) {
    if ((unsigned)code >= PL_CODE__COUNT)
        return 500;
    return code_table[code].http;
}

int pl_code_from_name(const char *name, enum pl_code *ret_code) {
    for (unsigned i = 0; i < PL_CODE__COUNT; i++) {
        if (strcmp(code_table[i].wire, name) == 0) {
            *ret_code = (enum pl_code)i;
            return 0;
        }
    }
    return -1;
}

const char *pl_reason_name(enum pl_reason reason) {
    if ((unsigned)reason >= PL_REASON__COUNT)
        return "INTERNAL";
    return reason_table[reason].name;
}

enum pl_code pl_reason_code(enum pl_reason reason) {
    if ((unsigned)reason >= PL_REASON__COUNT)
        return PL_CODE_INTERNAL;
    return reason_table[reason].code;
}

bool pl_reason_dispatched(enum pl_reason reason) {
    if ((unsigned)reason >= PL_REASON__COUNT)
        return true;
    return reason_table[reason].dispatched;
}

const char *pl_reason_doc(enum pl_reason reason) {
    if ((unsigned)reason >= PL_REASON__COUNT)
        return "";
    return reason_table[reason].doc;
}

int pl_error_set(struct pl_error *err, enum pl_reason reason, const char *fmt, ...) {
    if (!err)
        return -1;
    /* Formatted apart first: an argument may be err->message itself. */
    char text[sizeof(err->message)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    err->reason = reason;
    err->errnum = 0;
    memcpy(err->message, text, sizeof(text));
    return -1;
}

int pl_error_errno(struct pl_error *err, enum pl_reason reason, int errnum, const char *fmt, ...) {
    if (!err)
        return -1;
    char text[sizeof(err->message)]; /* apart first, as in pl_error_set */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    err->reason = reason;
    err->errnum = errnum < 0 ? -errnum : errnum;
    memcpy(err->message, text, sizeof(text));
    if (n >= 0 && (size_t)n < sizeof(err->message) && err->errnum)
        snprintf(err->message + n, sizeof(err->message) - (size_t)n, ": %s", strerror(err->errnum));
    return -1;
}

int pl_error_wrap(struct pl_error *err, const char *fmt, ...) {
    if (!err)
        return -1;
    char prefix[256], old[sizeof(err->message)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->message, sizeof(old));
    /* The message is cut at its size, prefix first. */
    size_t p = strnlen(prefix, sizeof(prefix) - 1);
    memcpy(err->message, prefix, p);
    size_t room = sizeof(err->message) - 1 - p;
    size_t o = strnlen(old, sizeof(old) - 1);
    if (o > room)
        o = room;
    memcpy(err->message + p, old, o);
    err->message[p + o] = '\0';
    return -1;
}
