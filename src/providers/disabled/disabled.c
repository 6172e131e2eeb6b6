/* SPDX-License-Identifier: Apache-2.0 */
/*
 * disabled.c: the Disabled provider, the daemon's state when
 * SANDBOX_PROVIDER is unset.
 *
 * It paints "none" and runs nothing: its run method is NULL, so the core
 * refuses every payload with DISABLED before anything else could happen.
 * Nothing falls back to running code some other way.
 */
#include "../provider.h"

static void disabled_info(void *state, struct pl_provider_info *ret) {
    (void)state;
    *ret = (struct pl_provider_info){.tier = PL_TIER_NONE, .runtime = ""};
}

const struct pl_provider_ops pl_disabled_ops = {
    .name = "disabled",
    .max_tier = PL_TIER_NONE,
    .memory_budget_applies = false,
    .create = NULL,
    .destroy = NULL,
    .info = disabled_info,
    .ready = NULL,
    .run = NULL,
};
