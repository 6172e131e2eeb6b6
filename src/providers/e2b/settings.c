/* SPDX-License-Identifier: Apache-2.0 */
/*
 * settings.c: the e2b provider's settings (docs/providers/e2b.md).  Only
 * their shape is checked here: preflight proves nothing about E2B itself.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../settings.h"
#include "e2b_int.h"

/* The scheme and the port suffix envd is reached on, from the API's URL
 * (already checked: scheme://host[:port]). */
static void derive_endpoint(struct eb_settings *s) {
    bool https = strncmp(s->api_url, "https://", 8) == 0;
    snprintf(s->scheme, sizeof(s->scheme), "%s", https ? "https" : "http");
    const char *host = s->api_url + (https ? 8 : 7);
    const char *port = strchr(host, ':');
    if (port)
        snprintf(s->port_suffix, sizeof(s->port_suffix), "%s", port);
}

int eb_load_settings(const struct pl_config *c, struct eb_settings *s, struct pl_error *err) {
    memset(s, 0, sizeof(*s));
    struct ph_guard_setting g;
    if (ph_setting_secret(c, "E2B_API_KEY", "with SANDBOX_PROVIDER=e2b", s->api_key,
                          sizeof(s->api_key), err) < 0)
        return -1;
    if (!pl_setting(c, "SANDBOX_E2B_TEMPLATE"))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_E2B_TEMPLATE: required with SANDBOX_PROVIDER=e2b (the "
                            "template that carries every tool a run needs)");
    if (ph_setting_name(c, "SANDBOX_E2B_TEMPLATE", "", s->template_id, sizeof(s->template_id),
                        err) < 0 ||
        ph_setting_url(c, "SANDBOX_E2B_API_URL", "https://api.e2b.app", false, s->api_url,
                       sizeof(s->api_url), err) < 0 ||
        ph_setting_name(c, "SANDBOX_E2B_INSTANCE", "default", s->instance, sizeof(s->instance),
                        err) < 0 ||
        pl_setting_uint(c, "SANDBOX_E2B_CPU_COUNT", 2, 1, 64, &s->cpu_count, err) < 0 ||
        pl_setting_uint(c, "SANDBOX_E2B_MEMORY_MB", 512, 128, 65536, &s->memory_mb, err) < 0 ||
        ph_setting_workdir(c, "SANDBOX_E2B_WORKDIR", "/home/user/project", s->workdir,
                           sizeof(s->workdir), err) < 0 ||
        ph_setting_probe(c, "SANDBOX_E2B_EGRESS_PROBE", "1.1.1.1:443,8.8.8.8:53", s->egress_probe,
                         sizeof(s->egress_probe), err) < 0 ||
        pl_setting_uint(c, "SANDBOX_E2B_CALL_TIMEOUT_MS", 30000, 1000, 300000, &s->call_timeout_ms,
                        err) < 0 ||
        pl_setting_uint(c, "SANDBOX_E2B_REAP_INTERVAL_S", 60, 5, 3600, &s->reap_interval_s, err) <
            0 ||
        pl_setting_uint(c, "SANDBOX_E2B_VM_SLACK_S", 30, 5, 3600, &s->vm_slack_s, err) < 0 ||
        ph_setting_guard(c, "E2B_GUARD_URL", "SANDBOX_E2B_GUARD_LISTEN", &g, err) < 0)
        return -1;
    derive_endpoint(s);
    snprintf(s->guard_url, sizeof(s->guard_url), "%s", g.url);
    snprintf(s->guard_ip, sizeof(s->guard_ip), "%s", g.ip);
    snprintf(s->guard_listen, sizeof(s->guard_listen), "%s", g.listen);
    s->guard_port = g.port;
    return 0;
}
