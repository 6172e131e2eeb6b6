/* SPDX-License-Identifier: Apache-2.0 */
/*
 * registry.c: SANDBOX_PROVIDER's table, and the startup sequence around a
 * provider's proof.
 */
#include <pthread.h>
#include <stdio.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "provider.h"

extern const struct pl_provider_ops pl_disabled_ops;
extern const struct pl_provider_ops pl_wasm_ops;
extern const struct pl_provider_ops pl_docker_ops;
extern const struct pl_provider_ops pl_e2b_ops;
extern const struct pl_provider_ops pl_dockercloud_ops;
extern const struct pl_provider_ops pl_openshell_ops;

/* Every provider this build has, by its ops table: the name is the table's. */
static const struct pl_provider_ops *const registry[] = {
    &pl_disabled_ops, &pl_wasm_ops,        &pl_docker_ops,
    &pl_e2b_ops,      &pl_dockercloud_ops, &pl_openshell_ops,
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static char known_names[256];

static void fill_known_names(void) {
    size_t off = 0;
    for (size_t i = 0; i < COUNT(registry); i++) {
        const char *n = registry[i]->name;
        int k = snprintf(known_names + off, sizeof(known_names) - off, "%s%s", off ? ", " : "", n);
        if (k < 0 || (size_t)k >= sizeof(known_names) - off)
            break;
        off += (size_t)k;
    }
}

const char *pl_provider_known_names(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_known_names);
    return known_names;
}

void pl_run_result_clear(struct pl_run_result *r) {
    if (!r)
        return;
    free(r->out);
    free(r->err);
    for (size_t i = 0; i < r->nsteps; i++) {
        free(r->steps[i].name);
        free(r->steps[i].out);
        free(r->steps[i].err);
    }
    free(r->steps);
    json_decref(r->entries);
    json_decref(r->outputs);
    pl_artifacts_free(r->artifacts, r->nartifacts);
    memset(r, 0, sizeof(*r));
}

void pl_run_result_steps_completed(struct pl_run_result *r) {
    int last = r->nsteps ? r->steps[r->nsteps - 1].exit_code : 0;
    r->exit_code = last;
    r->outcome = PL_OUTCOME_COMPLETED;
    if (last != 0)
        snprintf(r->detail, sizeof(r->detail), "step %zu (%s) exited %d; later steps did not run",
                 r->nsteps, r->steps[r->nsteps - 1].name, last);
}

int pl_provider_start(const struct pl_config *config, struct pl_provider **ret_provider,
                      struct pl_error *err) {
    const struct pl_provider_ops *ops = NULL;
    for (size_t i = 0; i < COUNT(registry); i++)
        if (strcmp(registry[i]->name, config->provider) == 0)
            ops = registry[i];
    if (!ops)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_PROVIDER: unknown provider \"%s\" (known: %s)",
                            config->provider, pl_provider_known_names());
    if (ops->max_tier < config->min_isolation)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_MIN_ISOLATION: provider \"%s\" paints at most \"%s\", "
                            "below the required \"%s\"",
                            ops->name, pl_tier_name(ops->max_tier),
                            pl_tier_name(config->min_isolation));

    struct pl_provider *p = calloc(1, sizeof(*p));
    if (!p)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    p->ops = ops;
    if (ops->create && ops->create(config, &p->state, err) < 0) {
        free(p);
        return -1;
    }
    ops->info(p->state, &p->info);
    if (p->info.tier < config->min_isolation) {
        pl_error_set(err, PL_REASON_INVALID_REQUEST,
                     "SANDBOX_MIN_ISOLATION: provider \"%s\" proved \"%s\", below the required "
                     "\"%s\"",
                     ops->name, pl_tier_name(p->info.tier), pl_tier_name(config->min_isolation));
        pl_provider_stop(p);
        return -1;
    }
    *ret_provider = p;
    return 0;
}

void pl_provider_stop(struct pl_provider *p) {
    if (!p)
        return;
    if (p->ops->destroy)
        p->ops->destroy(p->state);
    free(p);
}
