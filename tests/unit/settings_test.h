/* SPDX-License-Identifier: Apache-2.0 */
/* settings_test.h: a provider's settings as a unit test feeds them: a
 * small table of names and values behind the lookup config.h takes. */
#pragma once

#include <string.h>

struct env {
    const char *name[8];
    const char *value[8];
};

static inline const char *lookup(const char *name, void *userdata) {
    const struct env *e = userdata;
    for (int i = 0; i < 8 && e->name[i]; i++)
        if (strcmp(e->name[i], name) == 0)
            return e->value[i];
    return NULL;
}
