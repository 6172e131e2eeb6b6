/* SPDX-License-Identifier: Apache-2.0 */
/*
 * settings.c: a provider's own settings (settings.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"

const char *pl_setting(const struct pl_config *c, const char *name) {
    const char *v = c->lookup ? c->lookup(name, c->lookup_userdata) : NULL;
    return v && *v ? v : NULL;
}

int pl_setting_copy(const struct pl_config *c, const char *name, const char *def, char *dst,
                    size_t len, struct pl_error *err) {
    const char *v = pl_setting(c, name);
    if (!v)
        v = def;
    if (strlen(v) >= len)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: too long", name);
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

int pl_setting_uint(const struct pl_config *c, const char *name, unsigned def, unsigned min,
                    unsigned max, unsigned *ret, struct pl_error *err) {
    const char *v = pl_setting(c, name);
    if (!v) {
        *ret = def;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || n < min || n > max)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "%s: \"%.32s\" must be a whole number from %u to %u", name, v, min,
                            max);
    *ret = (unsigned)n;
    return 0;
}
