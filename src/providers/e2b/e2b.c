/* SPDX-License-Identifier: Apache-2.0 */
/*
 * e2b.c: the e2b provider (docs/providers/e2b.md): one E2B microVM per run,
 * painted vm only after the startup test on a real throwaway VM.
 *
 *   create   settings → the reaper's first pass (VMs this instance left) →
 *            the startup test (proof.c) → the periodic reaper
 *   ready    cached: the last word from E2B's API; it never calls E2B, so
 *            an unauthenticated /readyz poll costs nothing
 *   run      run.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/cleanup.h"
#include "../../core/clock.h"
#include "e2b_int.h"

static void e2b_destroy(void *state) {
    struct e2b_state *s = state;
    if (!s)
        return;
    ph_books_destroy(&s->books); /* stops the reaper first */
    ph_guard_stop(s->guard);
    explicit_bzero(s->set.api_key, sizeof(s->set.api_key));
    free(s);
}

static void e2b_statep(struct e2b_state **s) {
    e2b_destroy(*s);
}

static int e2b_create(const struct pl_config *config, void **ret_state, struct pl_error *err) {
    PL_CLEANUP(e2b_statep) struct e2b_state *s = calloc(1, sizeof(*s));
    if (!s)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    ph_books_init(&s->books, "E2B's API");
    s->max_timeout_ms = config->max_timeout_ms;
    if (eb_load_settings(config, &s->set, err) < 0)
        return -1;
    s->session_lifetime_s = config->max_sessions > 0 ? config->session_lifetime_s : 0;
    if (s->set.guard_url[0]) {
        struct ph_guard_opts go = {.host = s->set.guard_listen, .port = s->set.guard_port};
        if (ph_guard_start(&go, &s->guard, err) < 0)
            return pl_error_wrap(err, "E2B_GUARD_URL: ");
    }
    if (eb_reap_once(s, err) < 0)
        return pl_error_wrap(err, "SANDBOX_PROVIDER=e2b: E2B's API at %s: ", s->set.api_url);
    if (eb_prove(s, err) < 0)
        return pl_error_wrap(
            err, "SANDBOX_PROVIDER=e2b: the startup test (template %s): ", s->set.template_id);
    if (s->session_lifetime_s && eb_prove_session(s, err) < 0)
        return pl_error_wrap(err, "SANDBOX_PROVIDER=e2b: SANDBOX_MAX_SESSIONS: ");
    if (ph_reaper_start(&s->books, s->set.reap_interval_s, eb_reap_once, s, err) < 0)
        return -1;
    *ret_state = PL_TAKE_PTR(s);
    return 0;
}

static void e2b_info(void *state, struct pl_provider_info *ret) {
    struct e2b_state *s = state;
    *ret = (struct pl_provider_info){.tier = PL_TIER_VM, .runtime = "e2b"};
    struct pl_op_caps caps = {.supported = true,
                              .engine = "E2B microVM (Firecracker)",
                              .max_timeout_ms = s->max_timeout_ms,
                              .languages = {"javascript", "python", NULL},
                              .streams = true,
                              .grants = s->guard != NULL};
    ret->snippet = caps;
    ret->project = caps;
    ret->project.languages[0] = NULL;
    ret->artifacts.project = true; /* hosted/files.c, ph_collect */
    ret->module = (struct pl_op_caps){.supported = false, .engine = ""};
    /* Sessions run snippets, projects and cells of the languages the
     * startup session proved. */
    ret->session = (struct pl_op_caps){.supported = s->session_lifetime_s > 0,
                                       .engine = "E2B microVM (Firecracker), paused when idle",
                                       .max_timeout_ms = s->max_timeout_ms};
    /* The session file calls: plimsoll's files program in the session's
     * sandbox (hosted/files.c). */
    ret->files = (struct pl_op_caps){.supported = s->session_lifetime_s > 0,
                                     .engine = s->session_lifetime_s > 0
                                                   ? "plimsoll's files program in the session's "
                                                     "sandbox, as the guest's user"
                                                   : "",
                                     .max_timeout_ms = s->max_timeout_ms};
    for (size_t i = 0; i < 3 && s->cell_langs[i]; i++)
        ret->session.languages[i] = s->cell_langs[i];
    ret->display.python = s->cell_display.python;
    ret->display.javascript = s->cell_display.javascript;
    ret->display.matplotlib = s->cell_display.matplotlib;
    ret->display.pandas = s->cell_display.pandas;
    snprintf(s->checks[0], sizeof(s->checks[0]),
             "a throwaway VM of template %s was created with secure: true, public traffic off "
             "and the internet denied, its answer carried both access tokens, and its own "
             "detail reads back that network (allowInternetAccess false, denyOut 0.0.0.0/0 "
             "alone, nothing allowed out), as every run's VM's must",
             s->set.template_id);
    snprintf(s->checks[1], sizeof(s->checks[1]),
             "its resources read back from the API and seen from inside: %u CPUs, %u MiB",
             s->proof.cpu_count, s->proof.memory_mb);
    snprintf(s->checks[2], sizeof(s->checks[2]),
             "%u files uploaded into %s and a test program ran there as a project's steps do "
             "(python3, node), with the cleanup between its steps, as uid %u, not root",
             s->proof.files_uploaded, s->set.workdir, s->user_uid);
    snprintf(s->checks[3], sizeof(s->checks[3]),
             "egress tried live from inside: nothing reached (%s)", s->proof.probe_detail);
    snprintf(s->checks[4], sizeof(s->checks[4]),
             "the VM was deleted and the delete read back (404)");
    int n = 5;
    if (s->session_lifetime_s)
        ph_session_check(s->checks[n++], sizeof(s->checks[0]), "across a pause and a resume",
                         s->cell_langs, s->cell_note);
    for (int i = 0; i < n; i++)
        ret->checks[i] = s->checks[i];
}

static int e2b_ready(void *state, struct pl_error *err) {
    struct e2b_state *s = state;
    return ph_books_ready(&s->books, err);
}

const struct pl_provider_ops pl_e2b_ops = {
    .name = "e2b",
    .max_tier = PL_TIER_VM,
    .memory_budget_applies = false, /* the VMs run on E2B's machines */
    .create = e2b_create,
    .destroy = e2b_destroy,
    .info = e2b_info,
    .ready = e2b_ready,
    .run = eb_run,
    .session_open = eb_session_open,
    .session_run = eb_session_run,
    .session_pause = eb_session_pause,
    .session_resume = eb_session_resume,
    .session_close = eb_session_close,
    .session_status = eb_session_status,
};
