/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_config.c: libFuzzer harness for the settings parser.  The input is
 * NAME=VALUE lines fed through the lookup function the daemon uses. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct env {
    char *names[32];
    char *values[32];
    int n;
};

static const char *lookup(const char *name, void *ud) {
    struct env *e = ud;
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->names[i], name) == 0)
            return e->values[i];
    if (strcmp(name, "PLIMSOLL_KEYS_FILE") == 0)
        return "/dev/null";
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct env e = {0};
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && e.n < 32;
         line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        e.names[e.n] = line;
        e.values[e.n] = eq + 1;
        e.n++;
    }
    struct pl_config c;
    struct pl_error err;
    if (pl_config_load(&c, lookup, &e, &err) == 0)
        (void)pl_config_effective_concurrency(&c, true);
    struct pl_listen l;
    pl_listen_parse(text, &l);
    free(text);
    return 0;
}
