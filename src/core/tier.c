/* SPDX-License-Identifier: Apache-2.0 */
/* tier.c: names of the isolation tiers. */
#include "tier.h"

#include <string.h>

static const char *const tier_names[PL_TIER__COUNT] = {
    [PL_TIER_NONE] = "none",     [PL_TIER_PROCESS] = "process", [PL_TIER_CONTAINER] = "container",
    [PL_TIER_KERNEL] = "kernel", [PL_TIER_VM] = "vm",
};

const char *pl_tier_name(enum pl_tier tier) {
    if ((unsigned)tier >= PL_TIER__COUNT)
        return "none";
    return tier_names[tier];
}

int pl_tier_parse(const char *s, enum pl_tier *ret_tier) {
    if (!s)
        return -1;
    for (unsigned i = 0; i < PL_TIER__COUNT; i++) {
        if (strcmp(s, tier_names[i]) == 0) {
            *ret_tier = (enum pl_tier)i;
            return 0;
        }
    }
    return -1;
}
