/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proof.c: the startup test (docs/providers/openshell.md, "What the
 * startup test proves").  The gateway's word first: it answers, healthy,
 * and its one compute driver is docker (the evidence for the container
 * tier).  Then one throwaway sandbox, made and read back as every run's
 * is, which shows from inside: the test project runs through exactly a
 * project step's path (files uploaded, tools present, not root, egress
 * refused); writes land only under /tmp; loopback is the only interface;
 * its own cgroup holds the requested memory and CPU limits; a child
 * cannot read its parent's memory; and a cancelled command's processes
 * are gone once plimsoll's own cleanup has run.  The delete is read back.  The daemon serves
 * nothing unless all of it holds.  What runs inside: guest/walls.py (with
 * guest/walls_child.py), guest/spawn_orphans.sh and guest/orphans.py.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/clock.h"
#include "../../core/ids.h"
#include "orphans_py.h" /* generated: osh_guest_orphans[] */
#include "osh_int.h"
#include "spawn_orphans_sh.h" /* generated: osh_guest_spawn_orphans[] */
#include "walls_py.h"         /* generated: osh_guest_walls[] */

/* The limits asked, as the cgroup says them. */
static int judge_inside(struct osh_state *s, const char *out, struct pl_error *err) {
    json_t *j = json_loads(out, 0, NULL);
    if (!j)
        return pl_error_set(err, PL_REASON_INTERNAL, "the walls' test printed %.200s", out);
    int rc = -1;
    json_t *bad = json_object_get(j, "written_outside_tmp");
    const char *ifaces = NULL;
    json_t *ifs = json_object_get(j, "interfaces");
    const char *mem = json_string_value(json_object_get(j, "memory"));
    const char *cpu = json_string_value(json_object_get(j, "cpu"));
    const char *read_by = json_string_value(json_object_get(j, "parent_memory_read_by"));
    if (json_array_size(ifs) == 1)
        ifaces = json_string_value(json_array_get(ifs, 0));
    unsigned long long want_mem = (unsigned long long)s->set.memory_mib << 20;
    unsigned long long quota = 0, period = 0;
    unsigned long long millis = strtoull(s->set.cpu, NULL, 10);
    if (!strchr(s->set.cpu, 'm'))
        millis *= 1000;
    if (!json_is_array(bad) || json_array_size(bad) != 0 ||
        !json_is_true(json_object_get(j, "tmp_writable")))
        pl_error_set(err, PL_REASON_INTERNAL,
                     "writes must land only under /tmp: written outside it %s, /tmp %s",
                     json_array_size(bad) ? json_string_value(json_array_get(bad, 0)) : "nowhere",
                     json_is_true(json_object_get(j, "tmp_writable")) ? "writable"
                                                                      : "not writable");
    else if (!ifaces || strcmp(ifaces, "lo") != 0)
        pl_error_set(err, PL_REASON_INTERNAL,
                     "loopback must be the only interface: the sandbox has %zu interfaces",
                     json_array_size(ifs));
    else if (!mem || strtoull(mem, NULL, 10) != want_mem)
        pl_error_set(err, PL_REASON_INTERNAL,
                     "the sandbox's cgroup holds a memory limit of %.40s, not %llu bytes",
                     mem ? mem : "(none)", want_mem);
    else if (!cpu || sscanf(cpu, "%llu %llu", &quota, &period) != 2 || period == 0 ||
             quota * 1000 / period != millis)
        pl_error_set(err, PL_REASON_INTERNAL,
                     "the sandbox's cgroup holds a CPU limit of %.40s, not %s CPUs",
                     cpu ? cpu : "(none)", s->set.cpu);
    else if (!read_by || read_by[0])
        pl_error_set(err, PL_REASON_INTERNAL, "a child read its parent's memory through %.100s",
                     read_by ? read_by : "(the test did not say)");
    else
        rc = 0;
    json_decref(j);
    return rc;
}

int osh_prove(struct osh_state *s, struct pl_error *err) {
    if (osh_health(s, 0, err) < 0 || osh_gateway_driver(s, err) < 0)
        return -1;
    char run_id[33];
    if (pl_random_hex(run_id, sizeof(run_id), 16) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    struct osh_sandbox sb;
    if (osh_open(s, run_id, 120000, &sb, err) < 0)
        return pl_error_wrap(err, "the startup sandbox: ");
    struct ph_proof_project pp;
    ph_proof_project(&pp, s->set.egress_probe);
    struct pl_run_ctx ctx = {.timeout_ms = 60000, .output_bytes = 64 * 1024};
    struct pl_run_result r = {0};
    int rc = osh_call(s, &sb, NULL, &ctx, &pp.req, pl_deadline_in_ms(ctx.timeout_ms), &r, err);
    if (rc == 0)
        rc = ph_proof_judge(&r, s->set.workdir, "SANDBOX_OPENSHELL_WORKDIR", &s->user_uid, err);
    pl_run_result_clear(&r);
    char out[4096];
    int code = 0;
    if (rc == 0) {
        const char *argv[] = {"python3", "-I", "-c", osh_guest_walls};
        rc = osh_command(s, &sb, argv, sizeof(argv) / sizeof(argv[0]), 30000, out, sizeof(out),
                         &code, err);
        if (rc == 0 && code != 0)
            rc = pl_error_set(err, PL_REASON_INTERNAL, "the walls' test exited %d", code);
        if (rc == 0)
            rc = judge_inside(s, out, err);
    }
    /* A command ended at its deadline, first by the gateway's own
     * timeout (upstream documents its 124), then by the client cancelling
     * its stream; then plimsoll's own cleanup, the one between a project's
     * steps and a session's calls, and what it started is gone.  What the
     * gateway ends of it is the gateway's business: one that ends only the
     * command's process group (not the process that left it with setsid)
     * passes as well, since no run relies on more than the cleanup. */
    for (int cancel = 0; rc == 0 && cancel < 2; cancel++) {
        const char *spawn[] = {"/bin/sh", "-c", osh_guest_spawn_orphans};
        rc = osh_command_cancel(s, &sb, spawn, 3, 1500, cancel, out, sizeof(out), &code, err);
        if (rc == 0 && code != 124)
            rc = pl_error_set(err, PL_REASON_INTERNAL,
                              "a command past its deadline ended %d, not cancelled", code);
        if (rc == 0)
            rc = osh_cleanup(s, &sb, NULL, pl_deadline_in_ms(20000),
                             cancel ? "a command whose stream was cancelled"
                                    : "a command the gateway timed out",
                             NULL, 0, err);
        const char *check[] = {"python3", "-I", "-c", osh_guest_orphans};
        if (rc == 0)
            rc = osh_command(s, &sb, check, sizeof(check) / sizeof(check[0]), 15000, out,
                             sizeof(out), &code, err);
        if (rc == 0 && (code != 0 || strcmp(out, "none\n") != 0))
            rc = pl_error_set(err, PL_REASON_INTERNAL,
                              "the processes of a command %s are still there after the "
                              "cleanup: %.100s",
                              cancel ? "whose stream was cancelled" : "the gateway timed out", out);
    }
    char name[sizeof(sb.name)];
    snprintf(name, sizeof(name), "%s", sb.name);
    osh_close(s, &sb);
    if (rc < 0)
        return pl_error_wrap(err, "the startup sandbox %s: ", name);
    return osh_gone(s, name, err);
}
