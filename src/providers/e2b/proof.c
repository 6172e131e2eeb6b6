/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proof.c: the startup test, one throwaway VM (docs/providers/e2b.md, "What
 * the startup test proves").  Created as every run's VM is (secure, public
 * traffic off, internet denied, both access tokens required in the answer);
 * its resources read back from the control plane and from inside; several
 * files uploaded into the project directory and a test program run through
 * exactly a project step's path; egress tried live; the VM deleted and the
 * delete read back.  The daemon serves nothing unless all of it holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/clock.h"
#include "../../core/ids.h"
#include "e2b_int.h"

/* Step 1: the files arrived whole, in the project directory. */
static const char check_files[] =
    "import os, sys\n"
    "want = {'check_files.py': None, 'data/one.txt': b'one\\n', 'data/two/two.txt': b'two\\n'}\n"
    "for path, body in want.items():\n"
    "    with open(path, 'rb') as f:\n"
    "        got = f.read()\n"
    "    if body is not None and got != body:\n"
    "        sys.exit('%s: wrong content' % path)\n"
    "print(os.getcwd())\n"
    "print(os.getuid())\n";

/* Step 3: every probe target is unreachable.  Prints one line per target:
 * "reached host:port" or "blocked host:port why". */
static const char probe_egress[] =
    "import socket, sys\n"
    "for target in sys.argv[1].split(','):\n"
    "    host, port = target.rsplit(':', 1)\n"
    "    try:\n"
    "        socket.create_connection((host, int(port)), timeout=3).close()\n"
    "        print('reached', target)\n"
    "    except OSError as e:\n"
    "        print('blocked', target, type(e).__name__)\n";

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

/* The project the proof runs: three files, three steps. */
static int proof_project(struct e2b_state *s, const struct eb_sandbox *sb, struct pl_run_result *r,
                         struct pl_error *err) {
    struct pl_file files[] = {
        {.path = "check_files.py",
         .content = (unsigned char *)check_files,
         .len = sizeof(check_files) - 1},
        {.path = "data/one.txt", .content = (unsigned char *)"one\n", .len = 4},
        {.path = "data/two/two.txt", .content = (unsigned char *)"two\n", .len = 4},
    };
    const char *step1[] = {"python3", "check_files.py"};
    const char *step2[] = {"node", "-e", "console.log(typeof require('fs').readFileSync)"};
    const char *step3[] = {"python3", "-c", probe_egress, s->set.egress_probe};
    struct pl_step steps[] = {
        {.name = "files", .argv = step1, .argc = 2},
        {.name = "node", .argv = step2, .argc = 3},
        {.name = "egress", .argv = step3, .argc = 4},
    };
    struct pl_run_request req = {.kind = PL_PAYLOAD_PROJECT};
    req.project.files = files;
    req.project.nfiles = 3;
    req.project.steps = steps;
    req.project.nsteps = 3;
    struct pl_run_ctx ctx = {.timeout_ms = 60000, .output_bytes = 64 * 1024};
    if (eb_project(s, sb, &ctx, &req, pl_deadline_in_ms(ctx.timeout_ms), r, err) < 0)
        return pl_error_wrap(err, "the test project: ");
    s->proof.files_uploaded = 3;
    if (r->nsteps != 3 || r->timed_out || r->exit_code != 0) {
        const struct pl_step_result *last = r->nsteps ? &r->steps[r->nsteps - 1] : NULL;
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the test project failed at step %s (exit %d): %.160s",
                            last ? last->name : "?", last ? last->exit_code : -1,
                            last && last->err ? last->err : "");
    }
    /* Step 1 printed its working directory (the project directory) and
     * its uid: the guest's user, which must not be root. */
    const struct pl_step_result *files_step = &r->steps[0];
    size_t wl = strlen(s->set.workdir);
    if (files_step->out_len <= wl + 1 || memcmp(files_step->out, s->set.workdir, wl) != 0 ||
        files_step->out[wl] != '\n')
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the test project ran in %.100s, not in SANDBOX_E2B_WORKDIR %s",
                            files_step->out, s->set.workdir);
    char *end = NULL;
    unsigned long uid = strtoul(files_step->out + wl + 1, &end, 10);
    if (end == files_step->out + wl + 1 || *end != '\n' || uid == 0 || uid > 0x7fffffff)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the guest's user \"user\" has uid %.16s: a run's code must not run "
                            "as root",
                            files_step->out + wl + 1);
    s->user_uid = (unsigned)uid;
    /* Step 3: nothing reached. */
    const struct pl_step_result *eg = &r->steps[2];
    if (!eg->out || strstr(eg->out, "reached ") || !strstr(eg->out, "blocked "))
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "egress is open: a VM without a grant reached %.160s",
                            eg->out ? eg->out : "(no report)");
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
