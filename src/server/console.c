/* SPDX-License-Identifier: Apache-2.0 */
/*
 * console.c: the operator's console (docs/console.md), four static
 * assets compiled into plimsolld (src/server/console/).  They hold no data:
 * the page asks the API for everything, with the key typed on it.
 */
#include "console.h"

#include <string.h>

#include "console_console_css.h"
#include "console_console_js.h"
#include "console_favicon_svg.h"
#include "console_index_html.h"

static const struct pl_console_asset assets[] = {
    {"/", "text/html; charset=utf-8", pl_console_html, sizeof(pl_console_html) - 1},
    {"/console.js", "text/javascript; charset=utf-8", pl_console_js, sizeof(pl_console_js) - 1},
    {"/console.css", "text/css; charset=utf-8", pl_console_css, sizeof(pl_console_css) - 1},
    {"/favicon.svg", "image/svg+xml", pl_console_svg, sizeof(pl_console_svg) - 1},
};

const struct pl_console_asset *pl_console_find(const char *path) {
    for (size_t i = 0; i < sizeof(assets) / sizeof(assets[0]); i++)
        if (strcmp(path, assets[i].path) == 0)
            return &assets[i];
    return NULL;
}
