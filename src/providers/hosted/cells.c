/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cells.c: a session's cells on a hosted provider, and the one real session
 * of the startup test (docs/internals/hosted.md, "Cells").  The
 * interpreters are the docker session agent's own servers, started
 * detached in the sandbox by `vmlaunch` with a relay on an abstract
 * socket; each cell is one process (`vmcell`) that hands the code over and
 * relays the output.  An interpreter is kept only while its pid and start
 * time, and its relay's, survive the cleanup after each call; an idle stop
 * or pause ends them all, so the next cell says interpreter_started.
 *
 * The provider runs each process as the guest's user through its
 * ph_project_ops (upload, step), as for a project's steps.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/ids.h"
#include "hosted.h"
#include "session_agent.h"    /* docker's guest agent (docker_agent_dep): its interpreters */
#include "display_probe_js.h" /* generated: ph_guest_display_probe_js[] */
#include "display_probe_py.h" /* generated: ph_guest_display_probe[] */
#include "session_look_py.h"  /* generated: ph_guest_session_look[] */

/* vmcell's exit codes besides the cell's 0 and 1 (session_agent.py). */
#define CELL_NO_INTERPRETER 3

static const char *const cell_lang[] = {"python", "javascript"};

void ph_cells_keep(const struct ph_cells *c, char *out, size_t size) {
    size_t off = 0;
    out[0] = '\0';
    for (size_t i = 0; i < 2; i++) {
        const struct ph_interp *in = &c->in[i];
        if (!in->up)
            continue;
        int n = snprintf(out + off, size - off, "%s%llu:%llu %llu:%llu", off ? " " : "", in->pid,
                         in->start, in->relay, in->relay_start);
        if (n > 0 && (size_t)n < size - off)
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

/* Publish the interpreters' state for ph_cells_status. */
static void seen(struct ph_cells *c) {
    unsigned v = atomic_load(&c->seen) & 0xcu;
    for (size_t i = 0; i < 2; i++)
        if (c->in[i].up)
            v |= (1u | 4u) << i;
    atomic_store(&c->seen, v);
}

void ph_cells_status(struct ph_cells *c, struct pl_session_status *ret) {
    unsigned v = atomic_load(&c->seen);
    for (size_t i = 0; i < 2; i++)
        if (v & (4u << i)) {
            ret->interpreters[ret->ninterpreters].language = cell_lang[i];
            ret->interpreters[ret->ninterpreters++].alive = (v & (1u << i)) != 0;
        }
}

void ph_cells_survive(struct ph_cells *c, const char *alive) {
    for (size_t i = 0; i < 2; i++) {
        struct ph_interp *in = &c->in[i];
        if (in->up &&
            !(has_token(alive, in->pid, in->start) && has_token(alive, in->relay, in->relay_start)))
            in->up = false;
    }
    seen(c);
}

void ph_cells_drop(struct ph_cells *c) {
    for (size_t i = 0; i < 2; i++)
        c->in[i].up = false;
    seen(c);
}

/* One process as the guest's user: its output into o (cap bytes of
 * stdout, err_cap of stderr), and to sink and err_sink as it comes (NULL:
 * nowhere). */
static int process_split(const struct ph_project_ops *ops, void *ud, const char *const *argv,
                         size_t argc, uint64_t deadline, size_t cap,
                         const struct pl_output_sink *sink, size_t err_cap,
                         const struct pl_output_sink *err_sink, struct ph_proc_out *o,
                         struct pl_error *err) {
    pl_capture_init(&o->out, cap);
    pl_capture_init(&o->err, err_cap);
    pl_capture_stream(&o->out, sink, 1, 0);
    pl_capture_stream(&o->err, err_sink, 2, 0);
    o->exit_code = -1;
    o->timed_out = false;
    return ops->step(ud, argv, argc, deadline, o, err);
}

static int process(const struct ph_project_ops *ops, void *ud, const char *const *argv, size_t argc,
                   uint64_t deadline, size_t cap, const struct pl_output_sink *sink,
                   struct ph_proc_out *o, struct pl_error *err) {
    return process_split(ops, ud, argv, argc, deadline, cap, sink, cap, sink, o, err);
}

static void process_free(struct ph_proc_out *o) {
    pl_capture_free(&o->out);
    pl_capture_free(&o->err);
}

/* Start lang's interpreter and its relay (vmlaunch), in the work
 * directory, made first when nothing has made it yet. */
static int launch(const struct ph_project_ops *ops, void *ud, struct ph_cells *c,
                  const char *workdir, size_t lang, uint64_t deadline, bool *ret_timed_out,
                  struct pl_error *err) {
    struct ph_interp *in = &c->in[lang];
    *in = (struct ph_interp){0};
    char name[sizeof(in->name)];
    if (pl_random_hex(name, sizeof(name), 12) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    const char *argv[] = {"/bin/sh",
                          "-c",
                          "mkdir -p \"$0\" && cd \"$0\" && exec \"$@\"",
                          workdir,
                          "python3",
                          "-I",
                          "-c",
                          pl_docker_session_agent,
                          "vmlaunch",
                          cell_lang[lang],
                          name};
    struct ph_proc_out p;
    int rc = process(ops, ud, argv, sizeof(argv) / sizeof(argv[0]), deadline, 4096, NULL, &p, err);
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
                              "the %s interpreter could not be started in the sandbox: %.200s",
                              cell_lang[lang],
                              p.out.kept.data ? (const char *)p.out.kept.data : "no answer");
        else
            *in = (struct ph_interp){.up = true,
                                     .fresh = true,
                                     .pid = (unsigned long long)json_integer_value(pid),
                                     .start = (unsigned long long)json_integer_value(st),
                                     .relay = (unsigned long long)json_integer_value(rp),
                                     .relay_start = (unsigned long long)json_integer_value(rst)};
        snprintf(in->name, sizeof(in->name), "%s", name);
        seen(c);
    }
    json_decref(j);
    process_free(&p);
    return rc;
}

/* The cell's files (into the work directory) and its code. */
static int upload_cell(const struct ph_project_ops *ops, void *ud, const char *workdir,
                       const struct pl_run_request *req, uint64_t deadline, struct pl_error *err) {
    size_t nf = req->cell.nfiles;
    struct ph_file *files = calloc(nf + 1, sizeof(*files));
    char(*paths)[PL_PATH_MAX_BYTES + 300] = calloc(nf ? nf : 1, sizeof(*paths));
    if (!files || !paths) {
        free(files);
        free(paths);
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    for (size_t i = 0; i < nf; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/%s", workdir, req->cell.files[i].path);
        files[i] = (struct ph_file){paths[i], req->cell.files[i].content, req->cell.files[i].len};
    }
    files[nf] = (struct ph_file){PH_CELL_FILE, req->cell.code, req->cell.code_len};
    int rc = ph_upload(ops, ud, workdir, files, nf + 1, deadline, err);
    free(files);
    free(paths);
    return rc;
}

/* vmcell's stderr: the interpreter's stderr and display outputs as frames
 * (pl_frames_in), decoded as they come. */
struct cell_frames {
    struct pl_frames_in in;
    struct pl_capture err; /* the cell's stderr, to the call's sink */
    struct pl_displays disp;
    bool failed; /* out of memory */
};

static void frames_write(void *ud, unsigned step, int fd, const char *data, size_t len) {
    struct cell_frames *f = ud;
    (void)step;
    (void)fd;
    if (pl_frames_in_feed(&f->in, data, len) < 0)
        f->failed = true;
}

/* The framed stderr's bound: the cell's stderr and its display outputs,
 * with room for the frames' headers. */
static size_t framed_cap(const struct pl_run_ctx *ctx) {
    return 2 * (size_t)ctx->output_bytes + (size_t)ctx->display.bytes + (1u << 20);
}

int ph_cell(const struct ph_project_ops *ops, void *ud, struct ph_cells *c, const char *workdir,
            const struct pl_run_ctx *ctx, const struct pl_run_request *req, uint64_t deadline,
            struct pl_run_result *ret, struct pl_error *err) {
    size_t lang = strcmp(req->cell.language, "javascript") == 0 ? 1 : 0;
    if (upload_cell(ops, ud, workdir, req, deadline, err) < 0)
        return ph_files_refused(ops, "cell", ret, err);
    struct ph_interp *in = &c->in[lang];
    struct ph_proc_out p = {0};
    struct cell_frames fr = {0};
    const struct pl_output_sink frames_sink = {.write = frames_write, .ud = &fr};
    bool timed_out = false, sent = false;
    for (int attempt = 0; attempt < 2 && !sent && !timed_out; attempt++) {
        if (!in->up && launch(ops, ud, c, workdir, lang, deadline, &timed_out, err) < 0)
            return -1;
        if (timed_out)
            break;
        if (in->fresh)
            ret->interpreter_started = true;
        in->fresh = false;
        const char *argv[] = {"python3", "-I",     "-c",        pl_docker_session_agent,
                              "vmcell",  in->name, PH_CELL_FILE};
        process_free(&p);
        pl_capture_free(&fr.err);
        pl_displays_free(&fr.disp);
        pl_frames_in_end(&fr.in);
        fr = (struct cell_frames){0};
        pl_capture_init(&fr.err, ctx->output_bytes);
        pl_capture_stream(&fr.err, ctx->sink, 2, 0);
        pl_displays_init(&fr.disp, ctx->display, ctx->sink);
        fr.in = (struct pl_frames_in){.err = &fr.err, .disp = &fr.disp};
        if (process_split(ops, ud, argv, sizeof(argv) / sizeof(argv[0]), deadline,
                          ctx->output_bytes, ctx->sink, framed_cap(ctx), &frames_sink, &p,
                          err) < 0) {
            process_free(&p);
            pl_capture_free(&fr.err);
            pl_displays_free(&fr.disp);
            pl_frames_in_end(&fr.in);
            return -1;
        }
        pl_frames_in_end(&fr.in);
        if (pl_capture_truncated(&p.err)) /* the framed stream was cut */
            fr.err.total++;
        timed_out = p.timed_out;
        sent = timed_out || p.exit_code != CELL_NO_INTERPRETER;
        if (!sent)
            in->up = false; /* it ended between calls: a fresh one */
    }
    if (!sent && !timed_out) {
        process_free(&p);
        pl_capture_free(&fr.err);
        pl_displays_free(&fr.disp);
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
    ret->err = ph_take_output(&fr.err, &ret->err_len, &ret->err_truncated);
    pl_displays_finish(&fr.disp, &ret->outputs, &ret->outputs_dropped);
    process_free(&p);
    pl_capture_free(&fr.err);
    return ret->out && ret->err && !fr.failed
               ? 0
               : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
}

/* ------------------------------------------------------------ the proof */

/* One cell of the startup session: it must print want and say whether it
 * began in a fresh interpreter as expected.  < 0 with the reason. */
static int proof_cell(const struct ph_session_ops *so, void *state, void *h, const char *lang,
                      const char *code, const char *want, bool started, struct pl_error *err) {
    struct pl_run_request req = {.kind = PL_PAYLOAD_CELL};
    req.cell.language = lang;
    req.cell.code = code;
    req.cell.code_len = strlen(code);
    struct pl_run_ctx ctx = {.timeout_ms = 30000, .output_bytes = 4096};
    struct pl_run_result r = {0};
    int rc = so->run(state, h, &ctx, &req, &r, err);
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
 * kept interpreter; after the idle stop, gone. */
static const struct {
    const char *lang, *define, *read, *read_out, *gone, *gone_out;
} proof_cells[] = {
    {"python", "x = 41", "x + 1", "42\n", "'x' in globals()", "False\n"},
    {"javascript", "var x = 41", "x + 1", "42\n", "typeof x", "'undefined'\n"},
};

/* A display output from a cell of lang: what came as its text/plain, or
 * NULL (out: a buffer of size bytes). */
static const char *proof_display(const struct ph_session_ops *so, void *state, void *h,
                                 const char *lang, const char *code, char *out, size_t size) {
    struct pl_run_request req = {.kind = PL_PAYLOAD_CELL};
    req.cell.language = lang;
    req.cell.code = code;
    req.cell.code_len = strlen(code);
    struct pl_run_ctx ctx = {.timeout_ms = 30000,
                             .output_bytes = 4096,
                             .display = {.outputs = 1, .output_bytes = 4096, .bytes = 4096}};
    struct pl_run_result r = {0};
    struct pl_error err = {0};
    const char *got = NULL;
    if (so->run(state, h, &ctx, &req, &r, &err) == 0 && r.exit_code == 0) {
        json_t *data = json_object_get(json_array_get(r.outputs, 0), "data");
        const char *t = json_string_value(json_object_get(data, "text/plain"));
        if (t && json_array_size(r.outputs) == 1) {
            snprintf(out, size, "%s", t);
            got = out;
        }
    }
    pl_run_result_clear(&r);
    return got;
}

int ph_prove_session(const struct ph_session_ops *so, void *state, const char *what,
                     const char *langs[3], char *note, size_t note_size,
                     struct ph_display_found *display, struct pl_error *err) {
    *display = (struct ph_display_found){0};
    void *h = NULL;
    struct pl_session_open o = {.principal = "startup", .tag = "proof"};
    if (so->open(state, &o, &h, err) < 0)
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
    int rc = so->run(state, h, &ctx, &first, &r, err);
    if (rc == 0 && (r.session_ended[0] || r.exit_code != 0))
        rc = pl_error_set(err, PL_REASON_INTERNAL, "the session's first call: %s",
                          r.session_ended[0] ? r.session_ended : "it failed");
    pl_run_result_clear(&r);
    bool proved[2] = {false, false};
    note[0] = '\0';
    for (size_t i = 0; i < 2 && rc == 0; i++) {
        struct pl_error cerr = {0};
        if (proof_cell(so, state, h, proof_cells[i].lang, proof_cells[i].define, "", true, &cerr) ==
                0 &&
            proof_cell(so, state, h, proof_cells[i].lang, proof_cells[i].read,
                       proof_cells[i].read_out, false, &cerr) == 0) {
            proved[i] = true;
            char kinds[8];
            const char *k = proof_display(
                so, state, h, proof_cells[i].lang,
                i == 0 ? ph_guest_display_probe : ph_guest_display_probe_js, kinds, sizeof(kinds));
            if (i == 0 && k && strlen(k) == 2) {
                display->python = true;
                display->matplotlib = k[0] == '1';
                display->pandas = k[1] == '1';
            } else if (i == 1 && k && strcmp(k, "js") == 0) {
                display->javascript = true;
            }
        } else if (i == 0)
            rc = pl_error_set(err, cerr.reason, "%s", cerr.message);
        else
            snprintf(note, note_size, "%.250s", cerr.message);
    }
    if (rc == 0 && so->pause(state, h) < 0)
        rc = pl_error_set(err, PL_REASON_INTERNAL, "the session's %s could not be %s", what,
                          so->paused);
    if (rc == 0)
        rc = so->resume(state, h, err);
    const char *look[] = {"python3", "-I", "-c", ph_guest_session_look};
    struct pl_step steps2[] = {
        {.name = "look", .argv = look, .argc = sizeof(look) / sizeof(look[0])}};
    struct pl_run_request second = {.kind = PL_PAYLOAD_PROJECT};
    second.project.steps = steps2;
    second.project.nsteps = 1;
    if (rc == 0)
        rc = so->run(state, h, &ctx, &second, &r, err);
    if (rc == 0 && (r.nsteps != 1 || !r.steps[0].out || strcmp(r.steps[0].out, "kept\n0\n") != 0))
        rc =
            pl_error_set(err, PL_REASON_INTERNAL,
                         "after it was %s and taken up again the session's %s showed %.100s, "
                         "not its file alone",
                         so->paused, what, r.nsteps && r.steps[0].out ? r.steps[0].out : "nothing");
    pl_run_result_clear(&r);
    for (size_t i = 0; i < 2 && rc == 0; i++)
        if (proved[i])
            rc = proof_cell(so, state, h, proof_cells[i].lang, proof_cells[i].gone,
                            proof_cells[i].gone_out, true, err);
    so->close(state, h);
    size_t n = 0;
    for (size_t i = 0; i < 2; i++)
        if (rc == 0 && proved[i])
            langs[n++] = proof_cells[i].lang;
    langs[n] = NULL;
    return rc < 0 ? pl_error_wrap(err, "the startup session: ") : 0;
}

void ph_session_check(char *out, size_t size, const char *across, const char *const langs[3],
                      const char *note) {
    snprintf(out, size,
             "one real session: a call's file was kept and its processes ended %s; cells kept "
             "a value in %s%s and began in a fresh interpreter after it%s%s",
             across, langs[0] ? langs[0] : "no language", langs[1] ? " and javascript" : "",
             note[0] ? "; javascript cells are not offered: " : "", note);
}
