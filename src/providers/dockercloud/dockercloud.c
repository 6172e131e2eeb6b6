/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dockercloud.c: the dockercloud provider (docs/providers/dockercloud.md):
 * one Docker Sandboxes microVM per run, painted vm only after the startup
 * test on a real throwaway sandbox.
 *
 *   create   settings → the token, the permissions, the account's policy
 *            and the throwaway sandbox (proof.c) → the reaper's first pass
 *            → the periodic reaper
 *   ready    cached: the last word from the API; it never calls it
 *   run      run.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/cleanup.h"
#include "dc_int.h"

static void dc_destroy(void *state) {
    struct dc_state *s = state;
    if (!s)
        return;
    ph_books_destroy(&s->books); /* stops the reaper first */
    ph_guard_stop(s->guard);
    explicit_bzero(s->set.account, sizeof(s->set.account));
    explicit_bzero(s->set.secret, sizeof(s->set.secret));
    explicit_bzero(s->access_token, sizeof(s->access_token));
    pthread_mutex_destroy(&s->token_lock);
    free(s);
}

static void dc_statep(struct dc_state **s) {
    dc_destroy(*s);
}

static int dc_create_state(const struct pl_config *config, void **ret_state, struct pl_error *err) {
    PL_CLEANUP(dc_statep) struct dc_state *s = calloc(1, sizeof(*s));
    if (!s)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    ph_books_init(&s->books, "the Docker Sandboxes API");
    pthread_mutex_init(&s->token_lock, NULL);
    s->max_timeout_ms = config->max_timeout_ms;
    if (dc_load_settings(config, &s->set, err) < 0)
        return -1;
    if (s->set.guard.url[0]) {
        struct ph_guard_opts go = {.host = s->set.guard.listen, .port = s->set.guard.port};
        if (ph_guard_start(&go, &s->guard, err) < 0)
            return pl_error_wrap(err, "SANDBOX_DOCKERCLOUD_GUARD_URL: ");
    }
    if (dc_prove(s, err) < 0)
        return pl_error_wrap(
            err, "SANDBOX_PROVIDER=dockercloud: the startup test (image %s): ", s->set.image);
    if (dc_reap_once(s, err) < 0)
        return pl_error_wrap(err, "SANDBOX_PROVIDER=dockercloud: ");
    if (ph_reaper_start(&s->books, s->set.reap_interval_s, dc_reap_once, s, err) < 0)
        return -1;
    *ret_state = PL_TAKE_PTR(s);
    return 0;
}

static void dc_info(void *state, struct pl_provider_info *ret) {
    struct dc_state *s = state;
    *ret = (struct pl_provider_info){.tier = PL_TIER_VM, .runtime = "dockercloud"};
    struct pl_op_caps caps = {.supported = true,
                              .engine = "Docker Sandboxes microVM",
                              .max_timeout_ms = s->max_timeout_ms,
                              .languages = {"javascript", "python", NULL},
                              .streams = true,
                              .grants = s->guard != NULL};
    ret->snippet = caps;
    ret->project = caps;
    ret->project.languages[0] = NULL;
    ret->artifacts.project = true; /* hosted/files.c, ph_collect */
    ret->module = (struct pl_op_caps){.supported = false, .engine = ""};
    ret->session = (struct pl_op_caps){.supported = false, .engine = ""};
    snprintf(s->checks[0], sizeof(s->checks[0]),
             "the token was exchanged and holds the read, network-policy-read and delete "
             "permissions (each proved by a call that needs it, before anything was created); "
             "create, credential and delete were proved by the startup sandbox itself");
    snprintf(s->checks[1], sizeof(s->checks[1]), "the account's network policy in force: %s",
             s->proof.account_policy);
    snprintf(s->checks[2], sizeof(s->checks[2]),
             "a throwaway sandbox of %s (%u CPUs, %u MiB) came up with its policy read back "
             "deny-all with nothing allowed",
             s->set.image, s->set.cpus, s->set.memory_mib);
    snprintf(s->checks[3], sizeof(s->checks[3]),
             "%u files uploaded into a directory tree under %s and a test program ran there as "
             "a project's steps do (python3, node), with the cleanup between its steps, as uid "
             "%u, not root",
             s->proof.files_uploaded, s->set.workdir, s->proof.user_uid);
    snprintf(s->checks[4], sizeof(s->checks[4]),
             "egress tried live from inside: nothing reached (%s); the sandbox was deleted and "
             "the delete read back (404)",
             s->proof.probe_detail);
    for (int i = 0; i < 5; i++)
        ret->checks[i] = s->checks[i];
}

static int dc_ready(void *state, struct pl_error *err) {
    struct dc_state *s = state;
    return ph_books_ready(&s->books, err);
}

const struct pl_provider_ops pl_dockercloud_ops = {
    .name = "dockercloud",
    .max_tier = PL_TIER_VM,
    .memory_budget_applies = false, /* the sandboxes run on Docker's machines */
    .create = dc_create_state,
    .destroy = dc_destroy,
    .info = dc_info,
    .ready = dc_ready,
    .run = dc_run,
    .no_usage = "dockercloud reports no per-run usage: the Docker Sandboxes API has no CPU or "
                "memory figures for a sandbox",
};
