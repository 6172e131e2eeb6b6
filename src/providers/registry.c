/*
 * registry.c: SANDBOX_PROVIDER's table, and the startup sequence around a
 * provider's proof.
 */
#include <stdlib.h>
#include <string.h>

#include "provider.h"

extern const struct pl_provider_ops pl_disabled_ops;
extern const struct pl_provider_ops pl_wasm_ops;
extern const struct pl_provider_ops pl_docker_ops;

static const struct {
    const char *name;
    const struct pl_provider_ops *ops; /* NULL: known, not in this build */
} registry[] = {
    /* clang-format off */
    {"disabled",    &pl_disabled_ops},
    {"wasm",        &pl_wasm_ops},
    {"docker",      &pl_docker_ops},
    {"e2b",         NULL},
    {"dockercloud", NULL},
    {"openshell",   NULL},
    /* clang-format on */
};

const char *const pl_provider_names[] = {"disabled",    "wasm",      "docker", "e2b",
                                         "dockercloud", "openshell", NULL};

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
    memset(r, 0, sizeof(*r));
}

int pl_provider_start(const struct pl_config *config, struct pl_provider **ret_provider,
                      struct pl_error *err) {
    const struct pl_provider_ops *ops = NULL;
    bool known = false;
    for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++) {
        if (strcmp(registry[i].name, config->provider) == 0) {
            known = true;
            ops = registry[i].ops;
        }
    }
    if (!known)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_PROVIDER: unknown provider \"%s\" (known: disabled, wasm, "
                            "docker, e2b, dockercloud, openshell)",
                            config->provider);
    if (!ops)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_PROVIDER: provider \"%s\" is not available in this build "
                            "of plimsolld",
                            config->provider);
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
