/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_grants.c: libFuzzer harness for the grants file parser.  Every
 * variable the file names holds the same 40-byte value, so shared_token and
 * HS256 profiles can parse; key_file profiles read whatever path the input
 * names (none in the corpus).  Errors must be one NUL-terminated printable
 * line that never holds the value; a parsed file is looked up, matched
 * against a few paths, and makes a credential for each profile. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "../src/broker/grants.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ENV_VALUE "fuzz-value-0123456789abcdef0123456789abc" /* 40 bytes */

static const char *env(const char *name, void *userdata) {
    (void)name;
    (void)userdata;
    return ENV_VALUE;
}

static const char *const PATHS[] = {
    "/", "/items/1", "/items/1/notes", "/reports", "/reports/a/b", "/a/%2F", "/a/..", "/x?y",
};
static const char *const METHODS[] = {"GET", "POST", "DELETE", "get"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct pl_grants *g = NULL;
    struct pl_error err;
    memset(&err, 'X', sizeof(err));
    if (pl_grants_parse((const char *)data, size, env, NULL, &g, &err) < 0) {
        const char *nul = memchr(err.message, '\0', sizeof(err.message));
        if (!nul || nul == err.message)
            abort(); /* unterminated or empty message */
        for (const char *s = err.message; s < nul; s++)
            if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
                abort(); /* not one printable line */
        if (err.reason != PL_REASON_INVALID_REQUEST && err.reason != PL_REASON_INTERNAL)
            abort(); /* a bad file, or out of memory */
        if (g)
            abort();
        /* the value only ever comes from env(), so it can only leak from there */
        if (!memmem(data, size, ENV_VALUE, strlen(ENV_VALUE)) && strstr(err.message, ENV_VALUE))
            abort();
        return 0;
    }
    if (!g || g->n == 0)
        abort();
    for (size_t i = 0; i < g->n; i++) {
        const struct pl_grant_profile *p = pl_grants_find(g, g->profiles[i].name);
        if (p != &g->profiles[i])
            abort(); /* names are unique */
        for (size_t m = 0; m < sizeof(METHODS) / sizeof(METHODS[0]); m++)
            for (size_t k = 0; k < sizeof(PATHS) / sizeof(PATHS[0]); k++) {
                bool ok = pl_grant_route_allows(p, METHODS[m], PATHS[k]);
                if (ok && !pl_grant_path_canonical(PATHS[k]))
                    abort();
            }
        /* Each route's own text, made into a path, is matched by that route. */
        for (size_t r = 0; r < p->nroutes; r++) {
            const char *path = strchr(p->routes[r].text, ' ') + 1;
            if (!strchr(path, '*') && !pl_grant_route_allows(p, p->routes[r].method, path))
                abort();
        }
        if (!pl_grant_caller_allowed(p, p->callers[0]))
            abort();
        /* Every parsed profile can make a credential for its first caller. */
        char *v = NULL;
        if (pl_grant_credential(p, env, NULL, p->callers[0], 1700000000, &v, &err) < 0)
            abort();
        size_t plen = strlen(p->prefix);
        if (strncmp(v, p->prefix, plen) != 0 ||
            (p->kind == PL_CRED_SHARED_TOKEN && strcmp(v + plen, ENV_VALUE) != 0))
            abort();
        OPENSSL_cleanse(v, strlen(v));
        free(v);
    }
    pl_grants_free(g);
    return 0;
}
