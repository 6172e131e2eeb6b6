/* SPDX-License-Identifier: Apache-2.0 */
/*
 * settings.c: the dockercloud provider's settings
 * (docs/providers/dockercloud.md, "Settings").  Only their shape is checked
 * here: preflight proves nothing about the service itself.
 */
#include <stdio.h>
#include <string.h>

#include "../settings.h"
#include "dc_int.h"

/* The documented compute sizes: CPUs and the memory that goes with them. */
static const struct {
    unsigned cpus, memory_mib;
} sizes[] = {{1, 2048}, {2, 4096}, {4, 8192}, {8, 16384}, {16, 32768}};

int dc_load_settings(const struct pl_config *c, struct dc_settings *s, struct pl_error *err) {
    memset(s, 0, sizeof(*s));
    const char *why = "with SANDBOX_PROVIDER=dockercloud";
    if (ph_setting_secret(c, "SANDBOX_DOCKERCLOUD_ACCOUNT", why, s->account, sizeof(s->account),
                          err) < 0 ||
        ph_setting_secret(c, "SANDBOX_DOCKERCLOUD_TOKEN", why, s->secret, sizeof(s->secret), err) <
            0)
        return -1;
    if (!pl_setting(c, "SANDBOX_DOCKERCLOUD_AUTH_URL"))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_DOCKERCLOUD_AUTH_URL: required %s (Docker's token "
                            "endpoint, which exchanges the account's token for an access "
                            "token)",
                            why);
    if (!pl_setting(c, "SANDBOX_DOCKERCLOUD_IMAGE"))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_DOCKERCLOUD_IMAGE: required %s (the image that carries "
                            "every tool a run needs)",
                            why);
    if (ph_setting_url(c, "SANDBOX_DOCKERCLOUD_AUTH_URL", "", true, s->auth_url,
                       sizeof(s->auth_url), err) < 0 ||
        ph_setting_url(c, "SANDBOX_DOCKERCLOUD_API_URL", "https://connect.docker.com/sandboxes",
                       true, s->api_url, sizeof(s->api_url), err) < 0 ||
        pl_setting_copy(c, "SANDBOX_DOCKERCLOUD_IMAGE", "", s->image, sizeof(s->image), err) < 0 ||
        ph_setting_name(c, "SANDBOX_DOCKERCLOUD_INSTANCE", "default", s->instance,
                        sizeof(s->instance), err) < 0 ||
        pl_setting_uint(c, "SANDBOX_DOCKERCLOUD_CPUS", 2, 1, 16, &s->cpus, err) < 0 ||
        pl_setting_uint(c, "SANDBOX_DOCKERCLOUD_MEMORY_MIB", 4096, 2048, 32768, &s->memory_mib,
                        err) < 0 ||
        ph_setting_workdir(c, "SANDBOX_DOCKERCLOUD_WORKDIR", "/tmp/plimsoll/project", s->workdir,
                           sizeof(s->workdir), err) < 0 ||
        ph_setting_probe(c, "SANDBOX_DOCKERCLOUD_EGRESS_PROBE", "1.1.1.1:443,8.8.8.8:53",
                         s->egress_probe, sizeof(s->egress_probe), err) < 0 ||
        pl_setting_uint(c, "SANDBOX_DOCKERCLOUD_CALL_TIMEOUT_MS", 30000, 1000, 300000,
                        &s->call_timeout_ms, err) < 0 ||
        pl_setting_uint(c, "SANDBOX_DOCKERCLOUD_REAP_INTERVAL_S", 60, 5, 3600, &s->reap_interval_s,
                        err) < 0 ||
        pl_setting_uint(c, "SANDBOX_DOCKERCLOUD_SLACK_S", 60, 5, 3600, &s->slack_s, err) < 0 ||
        pl_setting_uint(c, "SANDBOX_DOCKERCLOUD_POLL_MS", 50, 10, 2000, &s->poll_ms, err) < 0 ||
        ph_setting_guard(c, "SANDBOX_DOCKERCLOUD_GUARD_URL", "SANDBOX_DOCKERCLOUD_GUARD_LISTEN",
                         &s->guard, err) < 0)
        return -1;
    if (strspn(s->image, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@") !=
        strlen(s->image))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_DOCKERCLOUD_IMAGE: an image reference of "
                            "[A-Za-z0-9._-/:@]");
    /* A display name is [a-zA-Z0-9_-]: no dot in the instance. */
    if (strchr(s->instance, '.'))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_DOCKERCLOUD_INSTANCE: use [A-Za-z0-9_-] (it is part of "
                            "every sandbox's display name)");
    bool pair = false;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        pair = pair || (sizes[i].cpus == s->cpus && sizes[i].memory_mib == s->memory_mib);
    if (!pair)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_DOCKERCLOUD_CPUS and SANDBOX_DOCKERCLOUD_MEMORY_MIB: %u CPUs "
                            "with %u MiB is not a documented size (1/2048, 2/4096, 4/8192, "
                            "8/16384, 16/32768)",
                            s->cpus, s->memory_mib);
    snprintf(s->prefix, sizeof(s->prefix), "pl-%s-", s->instance);
    return 0;
}
