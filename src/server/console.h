/* SPDX-License-Identifier: Apache-2.0 */
/*
 * console.h: the operator's console's assets (console.c).
 */
#pragma once

#include <stddef.h>

struct pl_console_asset {
    const char *path; /* "/", "/console.js", "/console.css", "/favicon.svg" */
    const char *content_type;
    const char *body;
    size_t len;
};

/* The asset at path, or NULL. */
const struct pl_console_asset *pl_console_find(const char *path);
