/* SPDX-License-Identifier: Apache-2.0 */
/*
 * settings.c: the openshell provider's settings
 * (docs/providers/openshell.md, "Settings").  Only their shape is checked
 * here; the gateway itself is proved by the startup test.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../settings.h"
#include "osh_int.h"

static int readable_file(const struct pl_config *c, const char *name, char *dst, size_t len,
                         struct pl_error *err) {
    if (pl_setting_copy(c, name, "", dst, len, err) < 0)
        return -1;
    if (dst[0] && (dst[0] != '/' || access(dst, R_OK) != 0))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "%s: an absolute path to a file this daemon can read", name);
    return 0;
}

int osh_load_settings(const struct pl_config *c, struct osh_settings *s, struct pl_error *err) {
    memset(s, 0, sizeof(*s));
    const char *why = "with SANDBOX_PROVIDER=openshell";
    if (!pl_setting(c, "SANDBOX_OPENSHELL_URL"))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_OPENSHELL_URL: required %s (the gateway's gRPC address, "
                            "https://host:port, or http:// to this machine only)",
                            why);
    if (!pl_setting(c, "SANDBOX_OPENSHELL_IMAGE"))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_OPENSHELL_IMAGE: required %s (the image that carries every "
                            "tool a run needs)",
                            why);
    if (ph_setting_url(c, "SANDBOX_OPENSHELL_URL", "", false, s->url, sizeof(s->url), err) < 0 ||
        (pl_setting(c, "SANDBOX_OPENSHELL_TOKEN") &&
         ph_setting_secret(c, "SANDBOX_OPENSHELL_TOKEN", why, s->token, sizeof(s->token), err) <
             0) ||
        readable_file(c, "SANDBOX_OPENSHELL_CA_FILE", s->ca_file, sizeof(s->ca_file), err) < 0 ||
        readable_file(c, "SANDBOX_OPENSHELL_CERT_FILE", s->cert_file, sizeof(s->cert_file), err) <
            0 ||
        readable_file(c, "SANDBOX_OPENSHELL_KEY_FILE", s->key_file, sizeof(s->key_file), err) < 0 ||
        pl_setting_copy(c, "SANDBOX_OPENSHELL_IMAGE", "", s->image, sizeof(s->image), err) < 0 ||
        pl_setting_copy(c, "SANDBOX_OPENSHELL_CPU", "1", s->cpu, sizeof(s->cpu), err) < 0 ||
        pl_setting_uint(c, "SANDBOX_OPENSHELL_MEMORY_MIB", 512, 64, 65536, &s->memory_mib, err) <
            0 ||
        ph_setting_name(c, "SANDBOX_OPENSHELL_INSTANCE", "default", s->instance,
                        sizeof(s->instance), err) < 0 ||
        ph_setting_workdir(c, "SANDBOX_OPENSHELL_WORKDIR", "/tmp/plimsoll/project", s->workdir,
                           sizeof(s->workdir), err) < 0 ||
        ph_setting_probe(c, "SANDBOX_OPENSHELL_EGRESS_PROBE", "1.1.1.1:443,8.8.8.8:53",
                         s->egress_probe, sizeof(s->egress_probe), err) < 0 ||
        pl_setting_uint(c, "SANDBOX_OPENSHELL_CALL_TIMEOUT_MS", 30000, 1000, 300000,
                        &s->call_timeout_ms, err) < 0 ||
        pl_setting_uint(c, "SANDBOX_OPENSHELL_REAP_INTERVAL_S", 60, 5, 3600, &s->reap_interval_s,
                        err) < 0)
        return -1;
    if (!s->token[0] && !s->cert_file[0])
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_OPENSHELL_TOKEN or SANDBOX_OPENSHELL_CERT_FILE: required %s "
                            "(the gateway must know who calls it)",
                            why);
    if (!s->cert_file[0] != !s->key_file[0])
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_OPENSHELL_CERT_FILE and SANDBOX_OPENSHELL_KEY_FILE: both or "
                            "neither");
    if (strncmp(s->url, "https://", 8) != 0 && (s->ca_file[0] || s->cert_file[0]))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_OPENSHELL_CA_FILE and SANDBOX_OPENSHELL_CERT_FILE need an "
                            "https:// SANDBOX_OPENSHELL_URL");
    if (strspn(s->image, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@") !=
            strlen(s->image) ||
        !s->image[0])
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_OPENSHELL_IMAGE: an image reference of [A-Za-z0-9._-/:@]");
    /* Kubernetes' quantities, the two forms the limits take: "2", "500m". */
    size_t digits = strspn(s->cpu, "0123456789");
    if (digits == 0 || digits > 6 || (s->cpu[digits] && strcmp(s->cpu + digits, "m") != 0) ||
        (s->cpu[0] == '0'))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_OPENSHELL_CPU: CPUs (\"2\") or millicores (\"500m\"), not 0");
    if (strncmp(s->workdir, "/tmp/", 5) != 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_OPENSHELL_WORKDIR: under /tmp (the only place a sandbox "
                            "can write)");
    return 0;
}
