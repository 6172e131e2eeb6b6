/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.c: a session on E2B (docs/providers/e2b.md, "Sessions"): one VM
 * for the session's life, created as a run's VM is.  Each call's code runs
 * as the guest's user; after each call a root process ends everything of
 * that user and proves none is left.  An idle session is paused (E2B keeps
 * the files; every process ends) and the next call resumes it with
 * `connect` and an explicit timeout, keeping the sandboxID of the answer.
 * A VM that E2B says is gone ends its session with that reason.
 *
 * Cells (docs/providers/e2b.md, "Cells"): a Python or Node interpreter kept
 * in the VM between calls, the docker session agent's own servers, started
 * detached by `vmlaunch` with a relay on an abstract socket; each cell is
 * one envd process (`vmcell`) that hands the code over and relays the
 * output.  The daemon keeps an interpreter only while its pid and start
 * time, and its relay's, survive the root cleanup after each call; a pause
 * ends them all, so the next cell says interpreter_started.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/clock.h"
#include "../../core/ids.h"
#include "e2b_int.h"
#include "session_agent.h" /* the docker package's guest agent: its interpreters */

#define EB_CELL_FILE "/tmp/plimsoll/cell"
/* vmcell's exit codes besides the cell's 0 and 1 (session_agent.py). */
#define EB_CELL_NO_INTERPRETER 3
#define EB_CELL_CHANNEL_ENDED 4

static const char *const cell_lang[] = {"python", "javascript"};

/* A kept interpreter and its relay, as vmlaunch reported them. */
struct eb_interp {
    bool up;    /* kept: the last cleanup found both alive */
    bool fresh; /* started and no cell has run in it yet */
    char name[25];
    unsigned long long pid, start, relay, relay_start;
};

struct eb_session {
    char run_id[48]; /* the VM's plimsoll-run label; tracked while it lives */
    struct eb_sandbox sb;
    uint64_t opened_ns;
    struct eb_interp in[2];
};

/* The kept interpreters into the cleanup's spare list. */
static void set_keep(struct eb_session *ss) {
    size_t off = 0;
    ss->sb.keep[0] = '\0';
    for (size_t i = 0; i < 2; i++) {
        const struct eb_interp *in = &ss->in[i];
        if (!in->up)
            continue;
        int n = snprintf(ss->sb.keep + off, sizeof(ss->sb.keep) - off, "%s%llu:%llu %llu:%llu",
                         off ? " " : "", in->pid, in->start, in->relay, in->relay_start);
        if (n > 0 && (size_t)n < sizeof(ss->sb.keep) - off)
            off += (size_t)n;
    }
}

static bool has_token(const char *alive, unsigned long long pid, unsigned long long start) {
    char t[48];
    snprintf(t, sizeof(t), " %llu:%llu", pid, start);
    size_t n = strlen(t);
    for (const char *p = alive; (p = strstr(p, t)) != NULL; p += n)
        if (p[n] == '\0' || p[n] == ' ')
            return true;
    return false;
}

/* The cleanup after a call (or before a pause): everything of the user
 * ends but the kept interpreters; one whose interpreter or relay did not
 * survive is no longer kept. */
static int session_cleanup(struct e2b_state *s, struct eb_session *ss, uint64_t deadline,
                           const char *after, struct pl_error *err) {
    set_keep(ss);
    char alive[sizeof(ss->sb.keep) + 8];
    if (eb_cleanup(s, &ss->sb, deadline, after, alive, sizeof(alive), err) < 0)
        return -1;
    for (size_t i = 0; i < 2; i++) {
        struct eb_interp *in = &ss->in[i];
        if (in->up &&
            !(has_token(alive, in->pid, in->start) && has_token(alive, in->relay, in->relay_start)))
            in->up = false;
    }
    set_keep(ss);
    return 0;
}

/* Start lang's interpreter and its relay in the VM (vmlaunch). */
static int launch(struct e2b_state *s, struct eb_session *ss, size_t lang, uint64_t deadline,
                  bool *ret_timed_out, struct pl_error *err) {
    struct eb_interp *in = &ss->in[lang];
    *in = (struct eb_interp){0};
    char name[sizeof(in->name)];
    if (pl_random_hex(name, sizeof(name), 12) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    /* In the work directory, made first when nothing has made it yet. */
    const char *argv[] = {"/bin/sh",
                          "-c",
                          "mkdir -p \"$0\" && cd \"$0\" && exec \"$@\"",
                          s->set.workdir,
                          "python3",
                          "-c",
                          pl_docker_session_agent,
                          "vmlaunch",
                          cell_lang[lang],
                          name};
    struct eb_proc p;
    eb_proc_init(&p, 4096);
    p.user = "user";
    p.argv = argv;
    p.argc = 10;
    p.cwd = "/";
    p.deadline_ns = deadline;
    int rc = eb_process(s, &ss->sb, &p, err);
    *ret_timed_out = rc == 0 && p.timed_out;
    json_t *j = NULL;
    if (rc == 0 && !p.timed_out) {
        j = p.out.kept.data ? json_loadb((const char *)p.out.kept.data, p.out.kept.len, 0, NULL)
                            : NULL;
        json_t *pid = json_object_get(j, "pid"), *st = json_object_get(j, "start");
        json_t *rp = json_object_get(j, "relay"), *rst = json_object_get(j, "relay_start");
        if (p.exit_code != 0 || !json_is_integer(pid) || !json_is_integer(st) ||
            !json_is_integer(rp) || !json_is_integer(rst) || json_integer_value(pid) <= 1 ||
            json_integer_value(rp) <= 1 || json_integer_value(st) < 0 ||
            json_integer_value(rst) < 0)
            rc = pl_error_set(err, PL_REASON_INTERNAL,
                              "the %s interpreter could not be started in the VM: %.200s",
                              cell_lang[lang],
                              p.out.kept.data ? (const char *)p.out.kept.data : "no answer");
        else
            *in = (struct eb_interp){.up = true,
                                     .fresh = true,
                                     .pid = (unsigned long long)json_integer_value(pid),
                                     .start = (unsigned long long)json_integer_value(st),
                                     .relay = (unsigned long long)json_integer_value(rp),
                                     .relay_start = (unsigned long long)json_integer_value(rst)};
        snprintf(in->name, sizeof(in->name), "%s", name);
    }
    json_decref(j);
    eb_proc_free(&p);
    set_keep(ss);
    return rc;
}

/*
 * A cell: its files and code uploaded (the files into the work directory),
 * then `vmcell` hands the code to the kept interpreter, started for it when
 * none is kept.  One that is gone before the code was sent gets a fresh
 * interpreter, once.  A deadline, or a channel that ends before the cell
 * does, drops the interpreter: the cleanup after the call ends it.
 */
static int session_cell(struct e2b_state *s, struct eb_session *ss, const struct pl_run_ctx *ctx,
                        const struct pl_run_request *req, uint64_t deadline,
                        struct pl_run_result *ret, struct pl_error *err) {
    size_t lang = strcmp(req->cell.language, "javascript") == 0 ? 1 : 0;
    size_t nf = req->cell.nfiles;
    struct ph_file *files = calloc(nf + 1, sizeof(*files));
    char(*paths)[PL_PATH_MAX_BYTES + 300] = calloc(nf ? nf : 1, sizeof(*paths));
    if (!files || !paths) {
        free(files);
        free(paths);
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    for (size_t i = 0; i < nf; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/%s", s->set.workdir, req->cell.files[i].path);
        files[i] = (struct ph_file){paths[i], req->cell.files[i].content, req->cell.files[i].len};
    }
    files[nf] = (struct ph_file){EB_CELL_FILE, req->cell.code, req->cell.code_len};
    int rc = eb_upload(s, &ss->sb, "user", files, nf + 1, err);
    free(files);
    free(paths);
    if (rc < 0)
        return -1;
    struct eb_interp *in = &ss->in[lang];
    struct eb_proc p = {0};
    bool timed_out = false, sent = false;
    for (int attempt = 0; attempt < 2 && !sent && !timed_out; attempt++) {
        if (!in->up && launch(s, ss, lang, deadline, &timed_out, err) < 0)
            return -1;
        if (timed_out)
            break;
        if (in->fresh)
            ret->interpreter_started = true;
        in->fresh = false;
        const char *argv[] = {"python3", "-c",     pl_docker_session_agent,
                              "vmcell",  in->name, EB_CELL_FILE};
        eb_proc_free(&p);
        eb_proc_init(&p, ctx->output_bytes);
        p.user = "user";
        p.argv = argv;
        p.argc = 6;
        p.cwd = "/";
        p.deadline_ns = deadline;
        if (eb_process(s, &ss->sb, &p, err) < 0) {
            eb_proc_free(&p);
            return -1;
        }
        timed_out = p.timed_out;
        sent = timed_out || p.exit_code != EB_CELL_NO_INTERPRETER;
        if (!sent)
            in->up = false; /* it ended between calls: a fresh one */
    }
    if (!sent && !timed_out) {
        eb_proc_free(&p);
        return pl_error_set(err, PL_REASON_INTERNAL, "the %s interpreter took no cell twice",
                            cell_lang[lang]);
    }
    ret->timed_out = timed_out;
    if (timed_out) {
        in->up = false;
        ret->exit_code = 124;
        ret->outcome = PL_OUTCOME_TIMED_OUT;
        snprintf(ret->detail, sizeof(ret->detail),
                 "the deadline of %u ms ended the cell and its interpreter", ctx->timeout_ms);
    } else if (p.exit_code != 0 && p.exit_code != 1) {
        /* The channel ended first: the interpreter ended, or the cell's
         * code ended what carried it.  Either way it is not kept. */
        in->up = false;
        ret->exit_code = 1;
        ret->outcome = PL_OUTCOME_COMPLETED;
        snprintf(ret->detail, sizeof(ret->detail), "the %s interpreter ended during the cell",
                 cell_lang[lang]);
    } else {
        ret->exit_code = p.exit_code;
        ret->outcome = PL_OUTCOME_COMPLETED;
    }
    ret->out = ph_take_output(&p.out, &ret->out_len, &ret->out_truncated);
    ret->err = ph_take_output(&p.err, &ret->err_len, &ret->err_truncated);
    eb_proc_free(&p);
    return ret->out && ret->err ? 0 : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
}

int eb_session_open(void *state, const struct pl_session_open *o, void **ret_session,
                    struct pl_error *err) {
    (void)o;
    struct e2b_state *s = state;
    struct eb_session *ss = calloc(1, sizeof(*ss));
    if (!ss)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    char hex[25];
    if (pl_random_hex(hex, sizeof(hex), 12) < 0) {
        free(ss);
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    }
    snprintf(ss->run_id, sizeof(ss->run_id), "session-%s", hex);
    if (eb_open(s, ss->run_id, s->session_lifetime_s * 1000u, NULL, &ss->sb, err) < 0) {
        free(ss);
        return pl_error_wrap(err, "opening a session's VM: ");
    }
    ss->opened_ns = pl_now_ns();
    *ret_session = ss;
    return 0;
}

/* After a failed call: a VM that E2B says is gone ends the session. */
static int judge_failure(struct e2b_state *s, struct eb_session *ss, struct pl_error *err) {
    json_t *d = NULL;
    long st = 0;
    struct pl_error probe = {0};
    if (eb_get(s, ss->sb.id, &d, &st, &probe) < 0 && st == 404)
        return pl_error_set(err, PL_REASON_SESSION_ENDED,
                            "E2B says the session's VM %s is gone (404) after: %.300s", ss->sb.id,
                            err->message);
    json_decref(d);
    return -1;
}

int eb_session_run(void *state, void *session, const struct pl_run_ctx *ctx,
                   const struct pl_run_request *req, struct pl_run_result *ret,
                   struct pl_error *err) {
    struct e2b_state *s = state;
    struct eb_session *ss = session;
    if (req->kind != PL_PAYLOAD_SNIPPET && req->kind != PL_PAYLOAD_PROJECT &&
        req->kind != PL_PAYLOAD_CELL)
        return pl_error_set(err, PL_REASON_UNSUPPORTED,
                            "an e2b session runs snippets, projects and cells");
    if (ctx->broker)
        return pl_error_set(err, PL_REASON_INTERNAL, "e2b: a grant reached a session");
    uint64_t deadline = pl_deadline_in_ms(ctx->timeout_ms);
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "%s", ss->sb.id);
    set_keep(ss);
    int rc;
    if (req->kind == PL_PAYLOAD_CELL)
        rc = session_cell(s, ss, ctx, req, deadline, ret, err);
    else if (req->kind == PL_PAYLOAD_SNIPPET)
        rc = eb_snippet(s, &ss->sb, ctx, req, deadline, ret, err);
    else
        rc = eb_project(s, &ss->sb, ctx, req, deadline, ret, err);
    if (rc < 0)
        return judge_failure(s, ss, err);
    /* The cleanup between calls: nothing of this call reaches the next but
     * the kept interpreters. */
    struct pl_error cerr = {0};
    if (session_cleanup(s, ss, deadline, "the call", &cerr) < 0)
        snprintf(ret->session_ended, sizeof(ret->session_ended), "%.200s", cerr.message);
    return 0;
}

int eb_session_pause(void *state, void *session) {
    struct e2b_state *s = state;
    struct eb_session *ss = session;
    struct pl_error err = {0};
    /* A pause ends the interpreters (the spec's rule, whatever E2B's
     * snapshot would keep): they are ended here, and none is kept after. */
    for (size_t i = 0; i < 2; i++)
        ss->in[i].up = false;
    (void)session_cleanup(s, ss, pl_deadline_in_ms(10000), "the session before its pause", &err);
    err = (struct pl_error){0};
    return eb_pause(s, ss->sb.id, &err);
}

int eb_session_resume(void *state, void *session, struct pl_error *err) {
    struct e2b_state *s = state;
    struct eb_session *ss = session;
    uint64_t lived_s = (pl_now_ns() - ss->opened_ns) / 1000000000ull;
    uint64_t left = s->session_lifetime_s > lived_s ? s->session_lifetime_s - lived_s : 1;
    return eb_connect(s, &ss->sb, (unsigned)left + s->set.vm_slack_s, err);
}

void eb_session_close(void *state, void *session) {
    struct e2b_state *s = state;
    struct eb_session *ss = session;
    if (!ss)
        return;
    eb_close(s, ss->run_id, &ss->sb);
    free(ss);
}

/* One cell of the startup session: it must print want and say whether it
 * began in a fresh interpreter as expected.  < 0 with the reason. */
static int proof_cell(struct e2b_state *s, void *h, const char *lang, const char *code,
                      const char *want, bool started, struct pl_error *err) {
    struct pl_run_request req = {.kind = PL_PAYLOAD_CELL};
    req.cell.language = lang;
    req.cell.code = code;
    req.cell.code_len = strlen(code);
    struct pl_run_ctx ctx = {.timeout_ms = 30000, .output_bytes = 4096};
    struct pl_run_result r = {0};
    int rc = eb_session_run(s, h, &ctx, &req, &r, err);
    if (rc == 0 && (r.exit_code != 0 || !r.out || strcmp(r.out, want) != 0 ||
                    r.interpreter_started != started || r.session_ended[0]))
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the %s cell %s printed \"%.60s\" (exit %d, %s interpreter; %.80s), "
                          "not \"%s\" from %s one",
                          lang, code, r.out ? r.out : "", r.exit_code,
                          r.interpreter_started ? "a fresh" : "a kept",
                          r.err && r.err[0] ? r.err : r.session_ended, want,
                          started ? "a fresh" : "the kept");
    pl_run_result_clear(&r);
    return rc;
}

/* The two cells of each language: a value defined, then read back from the
 * kept interpreter. */
static const struct {
    const char *lang, *define, *read, *read_out, *gone, *gone_out;
} proof_cells[] = {
    {"python", "x = 41", "x + 1", "42\n", "'x' in globals()", "False\n"},
    {"javascript", "var x = 41", "x + 1", "42\n", "typeof x", "'undefined'\n"},
};

/*
 * The one real session the daemon opens at startup when sessions are on:
 * a project call leaves a file and a process; each cell language keeps a
 * value from one cell to the next; the VM is paused and resumed, and the
 * next call finds the file kept and the process gone, and each language's
 * next cell a fresh interpreter.  Python cells must work (python3 runs the
 * cleanup too); JavaScript is offered only when its cells worked.
 */
int eb_prove_session(struct e2b_state *s, struct pl_error *err) {
    void *h = NULL;
    struct pl_session_open o = {.principal = "startup", .tag = "proof"};
    if (eb_session_open(s, &o, &h, err) < 0)
        return -1;
    struct pl_file files[] = {{.path = "kept.txt", .content = (unsigned char *)"kept\n", .len = 5}};
    const char *leave[] = {"sh", "-c", "sleep 600 > /dev/null 2>&1 &"};
    struct pl_step steps[] = {{.name = "leave", .argv = leave, .argc = 3}};
    struct pl_run_request first = {.kind = PL_PAYLOAD_PROJECT};
    first.project.files = files;
    first.project.nfiles = 1;
    first.project.steps = steps;
    first.project.nsteps = 1;
    struct pl_run_ctx ctx = {.timeout_ms = 60000, .output_bytes = 4096};
    struct pl_run_result r = {0};
    int rc = eb_session_run(s, h, &ctx, &first, &r, err);
    if (rc == 0 && (r.session_ended[0] || r.exit_code != 0))
        rc = pl_error_set(err, PL_REASON_INTERNAL, "the session's first call: %s",
                          r.session_ended[0] ? r.session_ended : "it failed");
    pl_run_result_clear(&r);
    bool proved[2] = {false, false};
    s->cell_note[0] = '\0';
    for (size_t i = 0; i < 2 && rc == 0; i++) {
        struct pl_error cerr = {0};
        if (proof_cell(s, h, proof_cells[i].lang, proof_cells[i].define, "", true, &cerr) == 0 &&
            proof_cell(s, h, proof_cells[i].lang, proof_cells[i].read, proof_cells[i].read_out,
                       false, &cerr) == 0)
            proved[i] = true;
        else if (i == 0)
            rc = pl_error_set(err, cerr.reason, "%s", cerr.message);
        else
            snprintf(s->cell_note, sizeof(s->cell_note), "%.250s", cerr.message);
    }
    if (rc == 0 && eb_session_pause(s, h) < 0)
        rc = pl_error_set(err, PL_REASON_INTERNAL, "the session's VM could not be paused");
    if (rc == 0)
        rc = eb_session_resume(s, h, err);
    const char *look[] = {
        "python3", "-c",
        "import os\n"
        "print(open('kept.txt').read(), end='')\n"
        "print(sum(1 for p in os.listdir('/proc') if p.isdigit() and\n"
        "          open('/proc/%s/cmdline' % p).read() == 'sleep\\x00600\\x00'))\n"};
    struct pl_step steps2[] = {{.name = "look", .argv = look, .argc = 3}};
    struct pl_run_request second = {.kind = PL_PAYLOAD_PROJECT};
    second.project.steps = steps2;
    second.project.nsteps = 1;
    if (rc == 0)
        rc = eb_session_run(s, h, &ctx, &second, &r, err);
    if (rc == 0 && (r.nsteps != 1 || !r.steps[0].out || strcmp(r.steps[0].out, "kept\n0\n") != 0))
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "after a pause and a resume the session's VM showed %.100s, not its "
                          "file alone",
                          r.nsteps && r.steps[0].out ? r.steps[0].out : "nothing");
    pl_run_result_clear(&r);
    for (size_t i = 0; i < 2 && rc == 0; i++)
        if (proved[i])
            rc = proof_cell(s, h, proof_cells[i].lang, proof_cells[i].gone, proof_cells[i].gone_out,
                            true, err);
    eb_session_close(s, h);
    size_t n = 0;
    for (size_t i = 0; i < 2; i++)
        if (rc == 0 && proved[i])
            s->cell_langs[n++] = proof_cells[i].lang;
    s->cell_langs[n] = NULL;
    return rc < 0 ? pl_error_wrap(err, "the startup session: ") : 0;
}
