/* SPDX-License-Identifier: Apache-2.0 */
/*
 * openshell.c: the openshell provider (docs/providers/openshell.md): one
 * container of an OpenShell gateway per run, painted container only
 * after the gateway reported its docker compute driver and the startup
 * test passed in a real throwaway sandbox.
 *
 *   create   settings → the gateway's health and driver, the throwaway
 *            sandbox (proof.c) → the reaper's first pass → the periodic
 *            reaper
 *            (and with sessions on, one real session: session.c)
 *   ready    asks the gateway (Health) at most every 5 s; between, the
 *            cached answer
 *   run      run.c; grants through relay.c
 *   session  session.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/cleanup.h"
#include "../../core/clock.h"
#include "osh_int.h"

#define OSH_READY_EVERY_NS 5000000000ull

static void osh_destroy(void *state) {
    struct osh_state *s = state;
    if (!s)
        return;
    ph_books_destroy(&s->books);
    explicit_bzero(s->set.token, sizeof(s->set.token));
    pthread_mutex_destroy(&s->ready_lock);
    free(s);
}

static void osh_statep(struct osh_state **s) {
    osh_destroy(*s);
}

static int osh_create_state(const struct pl_config *config, void **ret_state,
                            struct pl_error *err) {
    PL_CLEANUP(osh_statep) struct osh_state *s = calloc(1, sizeof(*s));
    if (!s)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    ph_books_init(&s->books, "the OpenShell gateway");
    pthread_mutex_init(&s->ready_lock, NULL);
    s->max_timeout_ms = config->max_timeout_ms;
    s->session_lifetime_s = config->max_sessions > 0 ? config->session_lifetime_s : 0;
    if (osh_load_settings(config, &s->set, err) < 0)
        return -1;
    s->target = (struct ph_grpc_target){.url = s->set.url,
                                        .bearer = s->set.token,
                                        .ca_file = s->set.ca_file,
                                        .cert_file = s->set.cert_file,
                                        .key_file = s->set.key_file};
    if (osh_prove(s, err) < 0)
        return pl_error_wrap(
            err, "SANDBOX_PROVIDER=openshell: the startup test (image %s): ", s->set.image);
    if (s->session_lifetime_s && osh_prove_session(s, err) < 0)
        return pl_error_wrap(err, "SANDBOX_PROVIDER=openshell: SANDBOX_MAX_SESSIONS: ");
    s->ready_at_ns = pl_now_ns();
    if (osh_reap_once(s, err) < 0)
        return pl_error_wrap(err, "SANDBOX_PROVIDER=openshell: ");
    if (ph_reaper_start(&s->books, s->set.reap_interval_s, osh_reap_once, s, err) < 0)
        return -1;
    *ret_state = PL_TAKE_PTR(s);
    return 0;
}

static void osh_info(void *state, struct pl_provider_info *ret) {
    struct osh_state *s = state;
    *ret = (struct pl_provider_info){.tier = PL_TIER_CONTAINER, .runtime = "openshell"};
    struct pl_op_caps caps = {.supported = true,
                              .engine = "OpenShell sandbox (docker compute driver)",
                              .max_timeout_ms = s->max_timeout_ms,
                              .languages = {"javascript", "python", NULL},
                              .streams = true,
                              .grants = true};
    ret->snippet = caps;
    ret->project = caps;
    ret->project.languages[0] = NULL;
    ret->artifacts.project = true; /* hosted/files.c, ph_collect */
    ret->module = (struct pl_op_caps){.supported = false, .engine = ""};
    /* Sessions run snippets, projects and cells of the languages the
     * startup session proved; an idle one is stopped and gives back its
     * slot. */
    ret->session = (struct pl_op_caps){.supported = s->session_lifetime_s > 0,
                                       .engine = "OpenShell sandbox (docker compute driver), "
                                                 "stopped when idle",
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
    ret->idle_frees_slot = true;
    snprintf(s->checks[0], sizeof(s->checks[0]),
             "the gateway (version %s) reports one compute driver, docker %s: the evidence "
             "for the container tier",
             s->gateway_version[0] ? s->gateway_version : "unstated", s->driver_version);
    snprintf(s->checks[1], sizeof(s->checks[1]),
             "a throwaway sandbox of %s (cpu %s, %u MiB) was read back as asked: labels, image, "
             "limits, policy (first revision, loaded, hash %.16s..., the gateway's hash of "
             "the policy sent, as plimsoll computes it), no providers",
             s->set.image, s->set.cpu, s->set.memory_mib, s->policy_hash);
    snprintf(s->checks[2], sizeof(s->checks[2]),
             "files uploaded as a tar stream into %.200s and a test program ran there as a "
             "project's steps do (python3, node), as uid %u, not root; egress tried live and "
             "refused (%.200s)",
             s->set.workdir, s->user_uid, s->set.egress_probe);
    snprintf(s->checks[3], sizeof(s->checks[3]),
             "from inside: writes land only under /tmp, loopback is the only interface, the "
             "cgroup holds the memory and CPU limits, a child cannot read its parent's memory");
    snprintf(s->checks[4], sizeof(s->checks[4]),
             "a command cancelled at its deadline (by the gateway's timeout, and by the client "
             "cancelling its stream) ended 124, and after plimsoll's cleanup none of its "
             "processes was left; the sandbox was deleted and the delete read back");
    int n = 5;
    if (s->session_lifetime_s)
        ph_session_check(s->checks[n++], sizeof(s->checks[0]), "across an idle stop", s->cell_langs,
                         s->cell_note);
    for (int i = 0; i < n; i++)
        ret->checks[i] = s->checks[i];
}

/* /readyz needs no login: the gateway is asked at most every 5 s, so a
 * poller cannot make the daemon call it on every request. */
static int osh_ready(void *state, struct pl_error *err) {
    struct osh_state *s = state;
    pthread_mutex_lock(&s->ready_lock);
    uint64_t now = pl_now_ns();
    if (now - s->ready_at_ns >= OSH_READY_EVERY_NS) {
        struct pl_error e = {0};
        s->ready_rc = osh_health(s, 2000, &e);
        snprintf(s->ready_why, sizeof(s->ready_why), "%.250s", e.message);
        s->ready_at_ns = pl_now_ns();
    }
    int rc = s->ready_rc;
    if (rc < 0)
        pl_error_set(err, PL_REASON_NOT_READY, "%s", s->ready_why);
    pthread_mutex_unlock(&s->ready_lock);
    return rc;
}

const struct pl_provider_ops pl_openshell_ops = {
    .name = "openshell",
    .max_tier = PL_TIER_CONTAINER,
    .memory_budget_applies = false, /* the sandboxes run on the gateway's machines */
    .create = osh_create_state,
    .destroy = osh_destroy,
    .info = osh_info,
    .ready = osh_ready,
    .run = osh_run,
    .session_open = osh_session_open,
    .session_run = osh_session_run,
    .session_pause = osh_session_pause,
    .session_resume = osh_session_resume,
    .session_close = osh_session_close,
    .session_status = osh_session_status,
    .no_usage = "openshell reports no per-run usage: its gateway's API has no CPU or memory "
                "figures for a sandbox or a command",
};
