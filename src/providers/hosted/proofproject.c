/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proofproject.c: the test project every hosted provider's startup test
 * runs through exactly a project step's path (docs/internals/hosted.md,
 * "The startup test"): three files in a directory tree, three steps
 * (Python reads the files back and says where and as whom it runs, Node
 * runs, every egress probe target is tried and must be unreachable): the
 * programs are guest/check_files.py, guest/node_runs.js and
 * guest/probe_egress.py.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_files_py.h" /* generated: ph_guest_check_files[] */
#include "hosted.h"
#include "node_runs_js.h"    /* generated: ph_guest_node_runs[] */
#include "probe_egress_py.h" /* generated: ph_guest_probe_egress[] */
#include "whoami_py.h"       /* generated: ph_guest_whoami[] */

void ph_proof_project(struct ph_proof_project *pp, const char *egress_probe) {
    memset(pp, 0, sizeof(*pp));
    pp->files[0] = (struct pl_file){.path = "check_files.py",
                                    .content = (unsigned char *)ph_guest_check_files,
                                    .len = sizeof(ph_guest_check_files) - 1};
    pp->files[1] =
        (struct pl_file){.path = "data/one.txt", .content = (unsigned char *)"one\n", .len = 4};
    pp->files[2] =
        (struct pl_file){.path = "data/two/two.txt", .content = (unsigned char *)"two\n", .len = 4};
    pp->step1[0] = "python3";
    pp->step1[1] = "check_files.py";
    pp->step2[0] = "node";
    pp->step2[1] = "-e";
    pp->step2[2] = ph_guest_node_runs;
    pp->step3[0] = "python3";
    pp->step3[1] = "-c";
    pp->step3[2] = ph_guest_probe_egress;
    pp->step3[3] = egress_probe;
    pp->steps[0] = (struct pl_step){.name = "files", .argv = pp->step1, .argc = 2};
    pp->steps[1] = (struct pl_step){.name = "node", .argv = pp->step2, .argc = 3};
    pp->steps[2] = (struct pl_step){.name = "egress", .argv = pp->step3, .argc = 4};
    pp->req.kind = PL_PAYLOAD_PROJECT;
    pp->req.project.files = pp->files;
    pp->req.project.nfiles = 3;
    pp->req.project.steps = pp->steps;
    pp->req.project.nsteps = 3;
}

void ph_proof_whoami(struct ph_proof_whoami *w) {
    memset(w, 0, sizeof(*w));
    w->argv[0] = "python3";
    w->argv[1] = "-c";
    w->argv[2] = ph_guest_whoami;
    w->step = (struct pl_step){.name = "whoami", .argv = w->argv, .argc = 3};
    w->req.kind = PL_PAYLOAD_PROJECT;
    w->req.project.steps = &w->step;
    w->req.project.nsteps = 1;
}

/* "UID\n", not root. */
static int read_uid(const char *out, unsigned *ret_uid, struct pl_error *err) {
    char *end = NULL;
    unsigned long uid = strtoul(out, &end, 10);
    if (end == out || *end != '\n' || uid == 0 || uid > 0x7fffffff)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "a run's code runs as uid %.16s: it must not run as root", out);
    *ret_uid = (unsigned)uid;
    return 0;
}

int ph_proof_uid(const struct pl_run_result *r, unsigned *ret_uid, struct pl_error *err) {
    const struct pl_step_result *st = r->nsteps == 1 ? &r->steps[0] : NULL;
    if (!st || r->timed_out || st->exit_code != 0 || !st->out)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the step that reads the guest's uid failed (exit %d): %.160s",
                            st ? st->exit_code : -1, st && st->err ? st->err : "");
    return read_uid(st->out, ret_uid, err);
}

int ph_proof_judge(const struct pl_run_result *r, const char *workdir, const char *workdir_setting,
                   unsigned *ret_uid, struct pl_error *err) {
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
    size_t wl = strlen(workdir);
    if (files_step->out_len <= wl + 1 || memcmp(files_step->out, workdir, wl) != 0 ||
        files_step->out[wl] != '\n')
        return pl_error_set(err, PL_REASON_INTERNAL, "the test project ran in %.100s, not in %s %s",
                            files_step->out, workdir_setting, workdir);
    if (read_uid(files_step->out + wl + 1, ret_uid, err) < 0)
        return -1;
    /* Step 3: nothing reached. */
    const struct pl_step_result *eg = &r->steps[2];
    if (!eg->out || strstr(eg->out, "reached ") || !strstr(eg->out, "blocked "))
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "egress is open: a sandbox without a grant reached %.160s",
                            eg->out ? eg->out : "(no report)");
    return 0;
}
