/* SPDX-License-Identifier: Apache-2.0 */
/*
 * settings.h: reading a provider's own settings (SANDBOX_DOCKER_*,
 * SANDBOX_E2B_*, ...) through the lookup the daemon's settings came from
 * (config.h), with the same rules everywhere: an empty value is an unset
 * one, a number is whole and within its bounds, and every message starts
 * with the setting's name.
 */
#pragma once

#include <stddef.h>

#include "../core/config.h"
#include "../core/errors.h"

/* The value of a setting, or NULL when it is unset or empty. */
const char *pl_setting(const struct pl_config *c, const char *name);

/* Copy a setting (or def when unset) into dst; refused when too long. */
int pl_setting_copy(const struct pl_config *c, const char *name, const char *def, char *dst,
                    size_t len, struct pl_error *err);

/* A whole number from min to max (def when unset). */
int pl_setting_uint(const struct pl_config *c, const char *name, unsigned def, unsigned min,
                    unsigned max, unsigned *ret, struct pl_error *err);
