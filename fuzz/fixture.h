/* SPDX-License-Identifier: Apache-2.0 */
/* fixture.h: the real API on the Disabled provider for the harnesses that
 * drive it (fuzz_h2, fuzz_mcp): the settings from lookup, one key,
 * "fuzz-key", of the principal "fuzzer", and room for 4 runs.  Aborts
 * when any of it cannot be made. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/admission.h"
#include "../src/core/canon.h"
#include "../src/core/keys.h"
#include "../src/core/metrics.h"
#include "../src/providers/provider.h"
#include "../src/server/api.h"

extern const struct pl_provider_ops pl_disabled_ops;

static void fuzz_api_init(const char *harness, pl_env_lookup_fn lookup, struct pl_config *config,
                          struct pl_provider *provider, struct pl_api *api) {
    struct pl_error err = {0};
    if (pl_config_load(config, lookup, NULL, &err) < 0) {
        fprintf(stderr, "%s: %s\n", harness, err.message);
        abort();
    }
    char hex[65], line[128];
    pl_sha256_hex("fuzz-key", 8, hex);
    snprintf(line, sizeof(line), "fuzzer %s\n", hex);
    struct pl_keys *keys;
    struct pl_admission *adm;
    struct pl_admission_limits l = {4, 4, 1000000, 1000000};
    if (pl_keys_parse(line, strlen(line), &keys, &err) < 0 ||
        pl_admission_new(&l, NULL, NULL, &adm) < 0)
        abort();
    provider->ops = &pl_disabled_ops;
    pl_disabled_ops.info(NULL, &provider->info);
    *api = (struct pl_api){.config = config,
                           .keys = keys,
                           .provider = provider,
                           .admission = adm,
                           .metrics = pl_metrics_new(),
                           .effective_concurrency = 4};
}
