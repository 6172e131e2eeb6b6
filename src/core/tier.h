/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tier.h: the isolation tiers, weakest first.  The order is the contract:
 * a floor is met when the provider's tier compares >= the floor.
 */
#pragma once

enum pl_tier {
    PL_TIER_NONE = 0,  /* Disabled: nothing runs */
    PL_TIER_PROCESS,   /* in the daemon's process (wasm) */
    PL_TIER_CONTAINER, /* shared host kernel (runc) */
    PL_TIER_KERNEL,    /* a stand-in kernel (gVisor runsc) */
    PL_TIER_VM,        /* hardware virtualisation (microVM) */
    PL_TIER__COUNT
};

/* "none", "process", "container", "kernel", "vm". */
const char *pl_tier_name(enum pl_tier tier);

/* Parse exactly one of the names above; returns < 0 otherwise. */
int pl_tier_parse(const char *s, enum pl_tier *ret_tier);
