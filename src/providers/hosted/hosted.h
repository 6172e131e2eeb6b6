/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hosted.h: what every provider of a hosted sandbox service shares
 * (docs/internals/hosted.md): one HTTP call against a remote API with a
 * deadline and a cap on what it reads, and the decoder of the length-
 * prefixed envelopes that Connect and gRPC streams are made of.
 *
 * Nothing here logs: a request may carry a secret header, and an answer
 * may echo one.  Errors are struct pl_error, INTERNAL unless said.
 *
 * The package (src/providers/hosted/), what e2b, dockercloud and openshell
 * share.  In plimsolld:
 *   hosted.h         this header: the HTTP call, the envelopes, the shared
 *                    settings, the cleanup, a project's steps, cells, the
 *                    startup test's project and session
 *   http.c           one call to a service's HTTP API on libcurl, with a
 *                    deadline and a cap on what it reads
 *   envelope.c       the length-prefixed envelopes of Connect streaming and
 *                    gRPC
 *   grpc.[ch]        one gRPC call over HTTP/2 on libcurl (openshell)
 *   books.[ch]       the runs holding a sandbox, the last outage, the
 *                    reaper's thread
 *   guard.[ch]       the guard: a microVM's one way to its run's broker
 *                    (e2b, dockercloud)
 *   hsettings.c      the settings every hosted provider has in some form
 *   project.c        a snippet and a project's steps in a hosted sandbox
 *   cleanup.c        the root cleanup between steps and after a session's
 *                    call, and what its programs print
 *   cells.c          a session's cells in the docker session agent's
 *                    interpreters, and the startup test's one real session
 *   files.c          a session's file calls (WriteFiles, ReadFile,
 *                    ListFiles) through guest/files.py
 *   proofproject.c   the test project every startup test runs
 *
 * Inside the hosted sandbox (guest/, embedded by guest/meson.build):
 *   guest/ancestors.py      this process and its ancestors, which a cleanup
 *                           spares (first in both cleanup programs)
 *   guest/end_processes.py  the cleanup: ends the guest user's processes
 *                           but the kept ones, and proves none is left
 *   guest/own_processes.py  a fresh sandbox's own processes, which a
 *                           "self" cleanup spares
 *   guest/check_files.py    the test project's step 1: the files arrived
 *                           whole
 *   guest/node_runs.js      step 2: Node runs
 *   guest/probe_egress.py   step 3: every egress probe target unreachable
 *   guest/whoami.py         the step that reads the guest's uid
 *   guest/session_look.py   the startup session's last call: its file kept,
 *                           its process gone
 *   guest/files.py          a session's file calls: the reader, the lister
 *                           and the writer, walking the work directory
 *                           without following a symlink
 *   guest/display_probe.py  the startup session's Python display output:
 *                           which of matplotlib and pandas it finds
 *   guest/display_probe.js  its JavaScript display output
 */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/buf.h"
#include "../../core/capture.h"
#include "../../core/errors.h"
#include "../../core/request.h"
#include "../provider.h"

/* One multipart/form-data part (a file upload). */
struct ph_part {
    const char *name;     /* the form field */
    const char *filename; /* NULL: none */
    const char *type;     /* its Content-Type; NULL: none */
    const void *data;
    size_t len;
};

/* One call's request; everything it points to is the caller's, read
 * during the call only. */
struct ph_request {
    const char *method; /* "GET", "POST", "DELETE" */
    const char *url;
    const char *const *headers; /* NULL-terminated "Name: value" lines; may be NULL */
    const json_t *json;         /* a JSON body, or NULL */
    const void *body;           /* raw body bytes (with a Content-Type header), or NULL */
    size_t body_len;
    const struct ph_part *parts; /* multipart parts, or NULL */
    size_t nparts;
    uint64_t timeout_ms;     /* the whole call, connect included; 0 = 30 s */
    size_t max_response;     /* bytes of answer kept; more is an error; 0 = 1 MiB */
    const char *want_header; /* a response header to keep (e.g. "X-Next-Token"), or NULL */
    /* Streaming: when set, the bytes of a 2xx answer go here instead of
     * into the body buffer (max_response does not apply to them); an error
     * answer is still kept as a body.  Return < 0 to abort the call. */
    int (*on_data)(void *userdata, const unsigned char *data, size_t len);
    void *userdata;
};

/* What ph_call filled: the body is malloc'd (ph_response_free). */
struct ph_response {
    long status;
    struct pl_buf body;
    char header[512]; /* want_header's value, "" when absent */
};

/*
 * Make one call.  Returns 0 when the server answered at all (any status),
 * with ret filled; < 0 with err when it could not be reached, the deadline
 * passed, the answer was larger than allowed, on_data aborted; err->errnum
 * is ETIMEDOUT for the deadline.  ret is zeroed first and, on a failure,
 * holds nothing.  Release ret with ph_response_free.  Any thread.
 */
int ph_call(const struct ph_request *req, struct ph_response *ret, struct pl_error *err);
/* Free the body; r is then empty (safe to free again). */
void ph_response_free(struct ph_response *r);

/* The answer's body as JSON: a new reference, NULL when it is not JSON. */
json_t *ph_response_json(const struct ph_response *r);

/* Percent-encode s for a URL's query or path; malloc'd, NULL on OOM. */
char *ph_urlencode(const char *s);

/*
 * The envelope decoder of Connect streaming and gRPC: each message is one
 * flags byte, a big-endian 32-bit length, then that many bytes.  Feed bytes
 * as they arrive; on_message sees each whole message.  A message longer
 * than max is refused (the stream is broken), so a server cannot make the
 * daemon hold more than max bytes.
 */
struct ph_envelopes {
    size_t max;
    unsigned char hdr[5];
    size_t hdr_len;
    unsigned char *msg;
    size_t msg_len, msg_need;
    bool broken;
    int (*on_message)(void *userdata, unsigned flags, const unsigned char *msg, size_t len);
    void *userdata;
};

/* Set e up (nothing allocated yet); ph_envelopes_free releases the half
 * message it may hold. */
void ph_envelopes_init(struct ph_envelopes *e, size_t max,
                       int (*on_message)(void *, unsigned, const unsigned char *, size_t),
                       void *userdata);
/* Returns < 0 when the stream is broken (too long, out of memory, or
 * on_message refused), and from then on.  on_message's msg is
 * NUL-terminated and valid until it returns. */
int ph_envelopes_feed(struct ph_envelopes *e, const unsigned char *data, size_t len);
/* Whether the stream stopped between messages (no half message pending). */
bool ph_envelopes_idle(const struct ph_envelopes *e);
void ph_envelopes_free(struct ph_envelopes *e);

/* One envelope around a message: 5 + len bytes appended to b; -1 when out
 * of memory or len does not fit 32 bits. */
int ph_envelope_append(struct pl_buf *b, unsigned flags, const void *msg, size_t len);

#define PH_FLAG_COMPRESSED 0x01u
#define PH_FLAG_END_STREAM 0x02u /* Connect: the end-of-stream message */

/*
 * Settings every hosted provider has in some form (hsettings.c), each into
 * dst (len bytes), def when unset: 0, or -1 with err INVALID_REQUEST.  Each
 * message starts with the setting's name; a secret is never in one.
 */
struct pl_config;
/* scheme://host[:port][/path]: https, or plain http to this machine only;
 * a path only when allow_path; trailing slashes dropped. */
int ph_setting_url(const struct pl_config *c, const char *name, const char *def, bool allow_path,
                   char *dst, size_t len, struct pl_error *err);
/* Required; no line break.  why completes "NAME: required ...". */
int ph_setting_secret(const struct pl_config *c, const char *name, const char *why, char *dst,
                      size_t len, struct pl_error *err);
/* [A-Za-z0-9._-]+ */
int ph_setting_name(const struct pl_config *c, const char *name, const char *def, char *dst,
                    size_t len, struct pl_error *err);
/* An absolute path of [A-Za-z0-9._-/], no "..". */
int ph_setting_workdir(const struct pl_config *c, const char *name, const char *def, char *dst,
                       size_t len, struct pl_error *err);
/* host:port[,host:port...]: the egress probe's targets. */
int ph_setting_probe(const struct pl_config *c, const char *name, const char *def, char *dst,
                     size_t len, struct pl_error *err);

/* The guard's URL as a VM dials it (http://IPv4:port: a VM's allowed
 * egress is an address) and the address the guard listens on.
 * ph_setting_guard zeroes g; url_name unset is 0 with no guard, and
 * listen_name defaults to 0.0.0.0. */
struct ph_guard_setting {
    char url[256]; /* "" when unset: grants are refused */
    char ip[16];
    unsigned port;
    char listen[64];
};
int ph_setting_guard(const struct pl_config *c, const char *url_name, const char *listen_name,
                     struct ph_guard_setting *g, struct pl_error *err);

/*
 * The cleanup between a project's steps (and after a session's call), run
 * as root in the sandbox by `python3 -c`: argv UID [PID:START...] ends
 * every process of UID but the kept ones and prints "clean", then "alive"
 * and the kept ones still alive (guest/end_processes.py says how).
 */
extern const char *const ph_end_user_processes;
/* The guest user's processes but the caller's own chain, "PID:START ..."
 * (run as that user): what a "self" cleanup is to spare
 * (guest/own_processes.py). */
extern const char *const ph_own_processes;
/* Whether a cleanup's output says clean; *ret_alive (may be NULL) gets the
 * " PID:START..." that follows "alive". */
bool ph_cleanup_clean(const char *out, size_t len, char *ret_alive, size_t alive_size);
/* The cleanup's own time: plimsoll's work, not the guest's, so it has at
 * least PH_CLEANUP_MIN_MS whatever is left of the run's or call's deadline
 * (a cleanup cut short ends a session it would have kept;
 * docs/internals/hosted.md).  The deadline (ns, pl_now_ns) its command gets. */
#define PH_CLEANUP_MIN_MS 10000u
uint64_t ph_cleanup_deadline(uint64_t deadline);
/* A cleanup's verdict from how its command ended: 0 when it said clean
 * (*ret_alive as ph_cleanup_clean), else INTERNAL saying why, after
 * "what <after> left running". */
int ph_cleanup_verdict(bool timed_out, int exit_code, const char *out, size_t len,
                       const char *after, char *ret_alive, size_t alive_size, struct pl_error *err);

/*
 * The startup test's project (proofproject.c): ph_proof_project fills pp
 * (which owns every pointer in pp->req but egress_probe, which must outlive
 * it); ph_proof_judge reads the result: every step passed, in workdir, as
 * a uid other than root (*ret_uid), and no egress probe target reached;
 * INTERNAL saying which did not.
 */
struct ph_proof_project {
    struct pl_run_request req;
    struct pl_file files[3];
    struct pl_step steps[3];
    const char *step1[2], *step2[3], *step3[4];
};
void ph_proof_project(struct ph_proof_project *pp, const char *egress_probe);
int ph_proof_judge(const struct pl_run_result *r, const char *workdir, const char *workdir_setting,
                   unsigned *ret_uid, struct pl_error *err);
/*
 * The guest's uid, learned before the test project by a project of one
 * step (no cleanup follows it) through the same path as every project, so
 * that the test project then runs with the cleanup between its steps,
 * which needs the uid: ph_proof_whoami fills w (which owns every pointer
 * in w->req), ph_proof_uid reads the result (not root; INTERNAL otherwise).
 */
struct ph_proof_whoami {
    struct pl_run_request req;
    struct pl_step step;
    const char *argv[3];
};
void ph_proof_whoami(struct ph_proof_whoami *w);
int ph_proof_uid(const struct pl_run_result *r, unsigned *ret_uid, struct pl_error *err);

/* A file a hosted provider uploads: its absolute path in the sandbox. */
struct ph_file {
    const char *path;
    const void *data;
    size_t len;
};

/*
 * A snippet and a project (project.c), the same on every hosted provider.
 * The provider uploads files (upload), runs one process as the guest's
 * user (step: argv in "/"; o's captures are set up with the run's output
 * cap) and, for a project, the cleanup between steps (between, may be
 * NULL).  A streaming call's o carries the call's sink (capture.h): step
 * gives it to the captures its process's output is read into as it comes
 * (pl_capture_stream with o's sink, fd and step), so the caller sees the
 * output before the step ends.
 *
 * ph_snippet: the code and its stdin uploaded under PH_SNIPPET_DIR, then
 * python3 or node on them from there, one step; where names the sandbox in
 * a timeout's detail ("sandbox", "VM").
 *
 * ph_project: the files uploaded under workdir, then each step through the
 * shell that makes the work directory and execs its argv; results, the
 * deadline (124, timed_out) and the first failing step as on docker.
 *
 * Both: 0 with ret filled, or < 0 with err from an op (INTERNAL when out
 * of memory); ret's output and steps are the caller's (pl_run_result_clear,
 * also after a failure).  ud is the ops', borrowed.
 */
#define PH_SNIPPET_DIR "/tmp/plimsoll"
struct ph_proc_out {
    struct pl_capture out, err;
    int exit_code;
    bool timed_out;
};
struct ph_project_ops {
    int (*upload)(void *ud, const struct ph_file *files, size_t n, uint64_t deadline,
                  struct pl_error *err);
    int (*step)(void *ud, const char *const *argv, size_t argc, uint64_t deadline,
                struct ph_proc_out *o, struct pl_error *err);
    int (*between)(void *ud, uint64_t deadline, const char *after, struct pl_error *err);
    /* A session's calls: their files go in through guest/files.py's writer
     * as the guest's user (ph_upload), never upload, which writes by path
     * (as root on E2B) and would follow a symlink an earlier call's guest
     * left on the way. */
    bool session;
};
/*
 * A call's files (absolute paths, under workdir or PH_SNIPPET_DIR): through
 * ops->upload, or in a session (ops->session) through the files writer
 * (files.c), which follows no symlink and refuses a path that breaks a rule
 * with INVALID_REQUEST naming the file (docker's sentences).  0, or < 0
 * with err.
 */
int ph_upload(const struct ph_project_ops *ops, void *ud, const char *workdir,
              const struct ph_file *files, size_t n, uint64_t deadline, struct pl_error *err);
/* A session's snippet or cell ("snippet", "cell") whose files the writer
 * refused (ph_upload's INVALID_REQUEST): the result docker gives, exit 1
 * and the reason in detail, and 0; -1 for any other failure. */
int ph_files_refused(const struct ph_project_ops *ops, const char *what, struct pl_run_result *ret,
                     struct pl_error *err);
int ph_snippet(const struct ph_project_ops *ops, void *ud, const char *where,
               const struct pl_run_ctx *ctx, const struct pl_run_request *req, uint64_t deadline,
               struct pl_run_result *ret, struct pl_error *err);
int ph_project(const struct ph_project_ops *ops, void *ud, const char *workdir,
               const struct pl_run_ctx *ctx, const struct pl_run_request *req, uint64_t deadline,
               struct pl_run_result *ret, struct pl_error *err);
/* A provider's finished process into o: its captures swapped in (the
 * provider frees what it gets back), its exit code and deadline. */
void ph_proc_out_take(struct ph_proc_out *o, struct pl_capture *out, struct pl_capture *err,
                      int exit_code, bool timed_out);
/* A capture's bytes, owned by the caller (a result's out or err). */
char *ph_take_output(struct pl_capture *c, size_t *ret_len, bool *ret_truncated);

/*
 * A session's cells (cells.c): the docker session agent's interpreters,
 * kept in the sandbox between calls, each with its relay; the provider's
 * ph_project_ops run every process as the guest's user.  ph_cells_keep
 * writes the kept ones ("PID:START ...", four at most) for the cleanup to
 * spare; ph_cells_survive keeps only those the cleanup reported alive;
 * ph_cells_drop forgets them all (an idle stop ends them).  ph_cell runs
 * one cell: its files under workdir and its code uploaded, an interpreter
 * started when none is kept (ret->interpreter_started), the code handed
 * over; exit 0 or 1, or 124 at the deadline (the interpreter is dropped).
 * ph_cell returns as ph_snippet; c is the session's, one call at a time.
 */
#define PH_CELL_FILE "/tmp/plimsoll/cell"
struct ph_interp {
    bool up;    /* kept: the last cleanup found it and its relay alive */
    bool fresh; /* started, and no cell has run in it yet */
    char name[25];
    unsigned long long pid, start, relay, relay_start;
};
struct ph_cells {
    struct ph_interp in[2]; /* python, javascript */
    /* What GetSession reads while a call may run (ph_cells_status): 1 << i
     * for each interpreter up, 4 << i for each ever started, as of the
     * last launch, cleanup or drop. */
    _Atomic unsigned seen;
};
/* The kept interpreters as ph_cells_status gives them (any thread). */
void ph_cells_status(struct ph_cells *c, struct pl_session_status *ret);
void ph_cells_keep(const struct ph_cells *c, char *out, size_t size);
void ph_cells_survive(struct ph_cells *c, const char *alive);
void ph_cells_drop(struct ph_cells *c);
int ph_cell(const struct ph_project_ops *ops, void *ud, struct ph_cells *c, const char *workdir,
            const struct pl_run_ctx *ctx, const struct pl_run_request *req, uint64_t deadline,
            struct pl_run_result *ret, struct pl_error *err);

/*
 * The one real session of the startup test when sessions are on: a project
 * call leaves a file and a process; each cell language keeps a value from
 * one cell to the next; the session is paused (or stopped, as the
 * provider's word `paused` says) and taken up again, and the next call finds
 * the file kept and the process gone, and each language's next cell a fresh
 * interpreter.  Python cells must work; JavaScript is offered only when its
 * cells worked (langs: the proved ones, NULL-terminated; note: why not).
 * what names the sandbox in messages ("VM", "sandbox").  Each proved
 * language's cells also send one display output, which must come back;
 * display says which came and which of matplotlib and pandas the
 * sandbox's Python finds.  The session is closed whatever happens; -1 with
 * err saying which step failed.
 */
struct ph_display_found {
    bool python, javascript, matplotlib, pandas;
};
struct ph_session_ops {
    int (*open)(void *state, const struct pl_session_open *o, void **ret_session,
                struct pl_error *err);
    int (*run)(void *state, void *session, const struct pl_run_ctx *ctx,
               const struct pl_run_request *req, struct pl_run_result *ret, struct pl_error *err);
    int (*pause)(void *state, void *session);
    int (*resume)(void *state, void *session, struct pl_error *err);
    void (*close)(void *state, void *session);
    const char *paused; /* "paused", "stopped" */
};
int ph_prove_session(const struct ph_session_ops *so, void *state, const char *what,
                     const char *langs[3], char *note, size_t note_size,
                     struct ph_display_found *display, struct pl_error *err);
/* Describe's sentence for it: "one real session: ... ended <across>; cells
 * kept a value in python and javascript ...". */
void ph_session_check(char *out, size_t size, const char *across, const char *const langs[3],
                      const char *note);

/*
 * A session's file calls (files.c; docs/internals/hosted.md, "Session
 * files"): WriteFiles, ReadFile and ListFiles under workdir, each through
 * guest/files.py run by ops->step as the guest's user (never ops->upload,
 * which writes by path).  A path that breaks a rule (a symlink, not a
 * regular file, another filesystem, ...) is refused with docker's
 * sentences: NOT_FOUND or INVALID_REQUEST; ReadFile fills ret's out,
 * out_len, file_size and more, ListFiles its entries and truncated.  What
 * the program prints is bounded and read only in its exact shape.  0, or
 * < 0 with err.
 */
int ph_files_call(const struct ph_project_ops *ops, void *ud, const char *workdir,
                  const struct pl_run_ctx *ctx, const struct pl_run_request *req, uint64_t deadline,
                  struct pl_run_result *ret, struct pl_error *err);

/*
 * A project's collect globs (docs/api.md, "Artifacts") under workdir once
 * its steps ended: guest/files.py's collect mode (src/providers/guest/
 * workfiles.py, the walk docker's bootstrap does) through ops->step as the
 * guest's user, with the run's time left and at least PL_COLLECT_MIN_MS,
 * looking at PL_COLLECT_VISITS entries at most (docker/reports.h); its
 * answer bounded and read by docker's parser (pl_collect_answer).  It fills ret's artifacts; what
 * keeps the collection from finishing leaves what came whole and artifacts_truncated, and a line in
 * the log: the run's answer stands.  0, or < 0 when out of memory.
 */
int ph_collect(const struct ph_project_ops *ops, void *ud, const char *workdir,
               const struct pl_run_ctx *ctx, const struct pl_run_request *req, uint64_t deadline,
               struct pl_run_result *ret);
