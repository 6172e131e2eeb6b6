/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proof.c: the startup test, one throwaway VM (docs/providers/e2b.md, "What
 * the startup test proves").  Created as every run's VM is (secure, public
 * traffic off, internet denied, both access tokens required in the answer);
 * its resources read back from the control plane and from inside; several
 * files uploaded into the project directory and a test program run through
 * exactly a project step's path (the guest's uid learned first by a project
 * of one step, so the cleanup runs between the test's steps); egress tried live; the VM deleted and
 * the delete read back.  The daemon serves nothing unless all of it holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/clock.h"
#include "../../core/ids.h"
#include "e2b_int.h"

static int check_resources(struct e2b_state *s, const struct eb_sandbox *sb, struct pl_error *err) {
    json_t *d = NULL;
    long st = 0;
    if (eb_get(s, sb->id, &d, &st, err) < 0)
        return pl_error_wrap(err, "reading the VM back: ");
    json_int_t cpu = json_integer_value(json_object_get(d, "cpuCount"));
    json_int_t mem = json_integer_value(json_object_get(d, "memoryMB"));
    json_decref(d);
    if (cpu != (json_int_t)s->set.cpu_count || mem != (json_int_t)s->set.memory_mb)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the VM has %lld CPUs and %lld MiB, the settings expect %u and %u "
                            "(SANDBOX_E2B_CPU_COUNT, SANDBOX_E2B_MEMORY_MB; E2B takes them from "
                            "the template)",
                            (long long)cpu, (long long)mem, s->set.cpu_count, s->set.memory_mb);
    json_t *m = NULL;
    if (eb_metrics(s, sb, &m, err) < 0)
        return pl_error_wrap(err, "reading the VM's resources from inside: ");
    json_int_t icpu = json_integer_value(json_object_get(m, "cpu_count"));
    /* envd.yaml's Metrics: mem_total in bytes (mem_total_mib, deprecated,
     * in older envds). */
    json_t *total = json_object_get(m, "mem_total");
    json_int_t imem = total ? json_integer_value(total) / (1024 * 1024)
                            : json_integer_value(json_object_get(m, "mem_total_mib"));
    json_decref(m);
    /* A kernel keeps a little memory for itself: the inside may see up to
     * 15% less than the VM has, never more. */
    if (icpu != (json_int_t)s->set.cpu_count || imem > (json_int_t)s->set.memory_mb * 105 / 100 ||
        imem < (json_int_t)s->set.memory_mb * 85 / 100)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "inside, the VM sees %lld CPUs and %lld MiB; the settings expect %u "
                            "and %u",
                            (long long)icpu, (long long)imem, s->set.cpu_count, s->set.memory_mb);
    s->proof.cpu_count = s->set.cpu_count;
    s->proof.memory_mb = s->set.memory_mb;
    return 0;
}

/* The guest's uid, by a project of one step through the path every
 * project takes (hosted/proofproject.c): the cleanup between the test
 * project's steps needs it. */
static int learn_uid(struct e2b_state *s, const struct eb_sandbox *sb, struct pl_error *err) {
    struct ph_proof_whoami w;
    ph_proof_whoami(&w);
    struct pl_run_ctx ctx = {.timeout_ms = 30000, .output_bytes = 4096};
    struct pl_run_result r = {0};
    int rc = eb_project(s, sb, &ctx, &w.req, pl_deadline_in_ms(ctx.timeout_ms), &r, err);
    if (rc == 0)
        rc = ph_proof_uid(&r, &s->user_uid, err);
    pl_run_result_clear(&r);
    return rc < 0 ? pl_error_wrap(err, "the guest's uid: ") : 0;
}

/* The project every hosted provider's proof runs (hosted/proofproject.c),
 * with the cleanup as root between its steps, as every project's. */
static int proof_project(struct e2b_state *s, const struct eb_sandbox *sb, struct pl_run_result *r,
                         struct pl_error *err) {
    if (learn_uid(s, sb, err) < 0)
        return -1;
    struct ph_proof_project pp;
    ph_proof_project(&pp, s->set.egress_probe);
    struct pl_run_ctx ctx = {.timeout_ms = 60000, .output_bytes = 64 * 1024};
    if (eb_project(s, sb, &ctx, &pp.req, pl_deadline_in_ms(ctx.timeout_ms), r, err) < 0)
        return pl_error_wrap(err, "the test project: ");
    s->proof.files_uploaded = 3;
    unsigned as = 0;
    if (ph_proof_judge(r, s->set.workdir, "SANDBOX_E2B_WORKDIR", &as, err) < 0)
        return -1;
    if (as != s->user_uid)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the test project ran as uid %u, the step before it as uid %u", as,
                            s->user_uid);
    snprintf(s->proof.probe_detail, sizeof(s->proof.probe_detail), "%s", s->set.egress_probe);
    return 0;
}

int eb_prove(struct e2b_state *s, struct pl_error *err) {
    char run_id[33];
    if (pl_random_hex(run_id, sizeof(run_id), 16) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    struct eb_sandbox sb;
    if (eb_open(s, run_id, 60000, NULL, &sb, err) < 0)
        return pl_error_wrap(err, "the startup VM: ");
    snprintf(s->proof.envd_version, sizeof(s->proof.envd_version), "%s", sb.envd_version);
    struct pl_run_result r = {0};
    int rc = check_resources(s, &sb, err);
    if (rc == 0)
        rc = proof_project(s, &sb, &r, err);
    pl_run_result_clear(&r);
    eb_close(s, run_id, &sb);
    if (rc < 0)
        return pl_error_wrap(err, "the startup VM %s: ", sb.id);
    /* The delete is read back: a VM that outlives its run costs money. */
    json_t *d = NULL;
    long st = 0;
    struct pl_error gone = {0};
    if (eb_get(s, sb.id, &d, &st, &gone) == 0) {
        json_decref(d);
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the startup VM %s is still there after its delete", sb.id);
    }
    if (st != 404)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "reading the deleted startup VM %s back answered %ld: %s", sb.id, st,
                            gone.message);
    return 0;
}
