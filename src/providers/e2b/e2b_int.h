/* SPDX-License-Identifier: Apache-2.0 */
/*
 * e2b_int.h: the e2b provider's internals (docs/providers/e2b.md).
 * Nothing outside src/providers/e2b/ includes this file; every name here
 * starts with eb_.
 *
 * The provider drives two APIs of E2B: the control plane and envd, the
 * agent inside each microVM.  Its guest programs are the hosted providers'
 * (src/providers/hosted/guest/).  In plimsolld:
 *   e2b.c           the ops table: create (settings, the reaper's first
 *                   pass, the startup test), ready (the last word from
 *                   E2B's API, cached), run, sessions
 *   e2b_int.h       this header
 *   settings.c      the provider's settings (their shape only) and envd's
 *                   endpoint derived from the API's URL
 *   api.c           the control plane: create, read, list and delete a VM
 *   envd.c          envd: files up by multipart, a process as a Connect
 *                   server stream, signals, the VM's own view of its
 *                   resources
 *   events.c        envd's process stream read (alone, for its fuzz harness)
 *   run.c           one run in one VM: create, upload, the steps, the delete
 *   session.c       a session: one VM, the root cleanup after each call,
 *                   paused when idle and resumed, cells
 *   proof.c         the startup test in a throwaway VM
 *   reaper.c        VMs with this instance's label that no run holds
 *   usage.c         what a run or a call cost, from E2B's metrics of its VM
 *                   (the reader alone, for its fuzz harness and unit test)
 */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/capture.h"
#include "../../core/errors.h"
#include "../hosted/books.h"
#include "../hosted/guard.h"
#include "../hosted/hosted.h"
#include "../provider.h"

#define EB_LABEL_INSTANCE "plimsoll-instance"
#define EB_LABEL_RUN "plimsoll-run"
#define EB_ENVD_PORT 49983
#define EB_MAX_KEEP 4 /* kept processes: two languages' interpreters and relays */

struct eb_settings {
    char api_key[256];      /* E2B_API_KEY: a secret, never logged */
    char api_url[512];      /* SANDBOX_E2B_API_URL */
    char template_id[128];  /* SANDBOX_E2B_TEMPLATE */
    char instance[64];      /* SANDBOX_E2B_INSTANCE */
    unsigned cpu_count;     /* SANDBOX_E2B_CPU_COUNT: expected */
    unsigned memory_mb;     /* SANDBOX_E2B_MEMORY_MB: expected */
    char workdir[256];      /* SANDBOX_E2B_WORKDIR: a project's directory */
    char egress_probe[512]; /* SANDBOX_E2B_EGRESS_PROBE: host:port[,host:port...] */
    char guard_url[256];    /* E2B_GUARD_URL: http://IPv4:port, as a VM dials it; "" none */
    char guard_ip[16];      /* its address: the one a VM with a grant may reach */
    char guard_listen[64];  /* SANDBOX_E2B_GUARD_LISTEN: the IPv4 the guard listens on */
    unsigned guard_port;
    unsigned call_timeout_ms; /* SANDBOX_E2B_CALL_TIMEOUT_MS: one control-plane call */
    unsigned reap_interval_s; /* SANDBOX_E2B_REAP_INTERVAL_S */
    unsigned vm_slack_s;      /* SANDBOX_E2B_VM_SLACK_S: a VM's TTL past its run's deadline */
    /* Derived from api_url: the scheme and the port envd is reached on. */
    char scheme[8];
    char port_suffix[8]; /* ":8080" or "" */
};

/* What the startup proof showed (Describe). */
struct eb_proof {
    char envd_version[64];
    unsigned cpu_count, memory_mb;
    unsigned files_uploaded;
    char probe_detail[512];
};

/* The provider's state (create's): set at startup but books (its own
 * lock). */
struct e2b_state {
    struct eb_settings set;
    struct eb_proof proof;
    unsigned max_timeout_ms;
    struct ph_guard *guard;      /* when E2B_GUARD_URL is set */
    unsigned user_uid;           /* the guest's user, from the proof (0: not known yet) */
    unsigned session_lifetime_s; /* SANDBOX_SESSION_LIFETIME; sessions on when > 0 */
    /* Runs holding a VM, the last outage, the reaper (hosted/books.h). */
    struct ph_books books;
    char checks[7][768]; /* Describe's startup_checks */
    /* Cell languages the startup session proved (Describe), and why one
     * was not. */
    const char *cell_langs[3];
    char cell_note[256];
    struct ph_display_found cell_display; /* what the startup session's cells could show */
    char proof_verdict[256];              /* the startup session's last cleanup, when it failed */
};

/* A sandbox as the control plane answered its create (or connect); its
 * holder's from eb_open to eb_close.  The tokens are secrets. */
struct eb_sandbox {
    char id[64];
    char domain[256];
    char envd_token[256];
    char traffic_token[256];
    char envd_version[64];
    char envd_url[512];   /* scheme://49983-<id>.<domain><:port> */
    char guard_token[72]; /* a run with a grant: its guard token ("" none) */
    /* "PID:START ..." of the guest user's processes the cleanup spares (a
     * session's interpreters and their relays); "" in a run. */
    char keep[EB_MAX_KEEP * 32];
};

/*
 * Unless said, an int function returns 0, or -1 with err filled (INTERNAL),
 * and what it takes is borrowed for the call.
 */

/* settings.c */
/* The E2B_* and SANDBOX_E2B_* settings into s; INVALID_REQUEST naming the
 * one at fault, never a secret's value. */
int eb_load_settings(const struct pl_config *c, struct eb_settings *s, struct pl_error *err);

/* api.c: the control plane.  Each call records an outage on failure (a
 * transport failure or a 5xx), and its end on an answer. */
/* Create a VM (secure, internet and public traffic off, denyOut all)
 * labelled with the instance and run_id, its TTL timeout_s; allow_out: the
 * one address it may reach (the guard's), or NULL.  An answer without both
 * access tokens is refused and that VM deleted here. */
int eb_create(struct e2b_state *s, const char *run_id, unsigned timeout_s, const char *allow_out,
              struct eb_sandbox *ret, struct pl_error *err);
/* GET /sandboxes/{id}: 0 with *ret_detail (a reference the caller drops)
 * on 200; else -1 with *ret_detail NULL and *ret_status the answer's (404:
 * gone), left unset when E2B did not answer. */
int eb_get(struct e2b_state *s, const char *id, json_t **ret_detail, long *ret_status,
           struct pl_error *err);
/* 0 when deleted or already gone (404). */
int eb_delete(struct e2b_state *s, const char *id, struct pl_error *err);
/* The VM's own detail (GET /sandboxes/{id}) must report the network the
 * create sent: allowInternetAccess false, public traffic off, denyOut
 * exactly 0.0.0.0/0, allowOut exactly allow_out/32 (or none), no rules, no
 * egress proxy.  Anything else is refused (INTERNAL; the caller deletes the
 * VM; docs/providers/e2b.md). */
int eb_check_network(struct e2b_state *s, const char *id, const char *allow_out,
                     struct pl_error *err);
/* Pause (409, already paused, is fine); resume with an explicit timeout,
 * *sb replaced by the answer's (its sandboxID and tokens; an answer
 * without both tokens is refused and that VM deleted).  404 is
 * SESSION_ENDED: the VM is gone. */
int eb_pause(struct e2b_state *s, const char *id, struct pl_error *err);
int eb_connect(struct e2b_state *s, struct eb_sandbox *sb, unsigned timeout_s,
               struct pl_error *err);
/* GET /sandboxes/{id}/metrics for [start_s, end_s] (Unix seconds),
 * within timeout_ms: *ret the answer's array of samples, a reference the
 * caller drops. */
int eb_sandbox_metrics(struct e2b_state *s, const char *id, long long start_s, long long end_s,
                       unsigned timeout_ms, json_t **ret, struct pl_error *err);
/* Sandboxes carrying this instance's label, running or paused, every page
 * (EB_MAX_PAGES at most): *ret_list a new JSON array the caller drops
 * (unset on failure). */
int eb_list_ours(struct e2b_state *s, json_t **ret_list, struct pl_error *err);

/* envd.c: the agent in the VM, reached with the VM's access tokens. */
/* Files (absolute paths) up as user in one multipart call. */
int eb_upload(struct e2b_state *s, const struct eb_sandbox *sb, const char *user,
              const struct ph_file *files, size_t n, struct pl_error *err);

/* One process: argv run in cwd as user, until it ends or the deadline.
 * Set up by eb_proc_init (captures of output_cap bytes each, exit_code
 * -1), freed by eb_proc_free; what it points to is the caller's. */
struct eb_proc {
    const char *user;
    const char *const *argv;
    size_t argc;
    const char *cwd;
    uint64_t deadline_ns;
    /* filled */
    struct pl_capture out, err;
    int exit_code;
    bool ended;     /* the end event arrived */
    bool timed_out; /* the deadline ended it */
    char status[64];
};
void eb_proc_init(struct eb_proc *p, size_t output_cap);
void eb_proc_free(struct eb_proc *p);
/* Returns 0 when the process ran to an end or to its deadline (see
 * timed_out; envd is told the deadline, and a process still there is sent
 * SIGKILL); < 0 (INTERNAL) when the stream broke or envd refused.  A run's
 * guard token (in sb) goes to its environment. */
int eb_process(struct e2b_state *s, const struct eb_sandbox *sb, struct eb_proc *p,
               struct pl_error *err);
/* The VM's own view of its resources (envd's /metrics): *ret a reference
 * the caller drops. */
int eb_metrics(struct e2b_state *s, const struct eb_sandbox *sb, json_t **ret,
               struct pl_error *err);

/* events.c: envd's process stream, as it arrives (a fuzz target; every
 * byte is the VM's).  eb_stream_init ties st to p, which outlives it;
 * eb_stream_free releases what a half-read message holds. */
#define EB_MAX_EVENT (4u << 20) /* one event of the process stream */
struct eb_stream {
    struct eb_proc *p;
    struct ph_envelopes env;
    unsigned pid;            /* from the start event; 0 before it */
    bool trailer;            /* the end-of-stream message arrived */
    char trailer_error[200]; /* its error, "code: message" */
};
void eb_stream_init(struct eb_stream *st, struct eb_proc *p);
/* ph_request.on_data: < 0 once the stream is broken. */
int eb_stream_feed(void *stream, const unsigned char *data, size_t len);
void eb_stream_free(struct eb_stream *st);
/* One event's JSON into p (output, the end); the start's pid into
 * *ret_pid (may be NULL).  < 0 when it does not read. */
int eb_process_event(struct eb_proc *p, const unsigned char *msg, size_t len, unsigned *ret_pid);

/* usage.c (docs/api.md, "Usage"; docs/providers/e2b.md, "What a run cost") */
/* The most samples one reading considers; one answer's are bounded by its
 * size too. */
#define EB_USAGE_MAX_SAMPLES 4096
/* The longest the metrics are waited for after a run (and never past its
 * deadline). */
#define EB_USAGE_TIMEOUT_MS 2000
/* E2B's samples (SandboxMetric objects, every byte the service's) of
 * [start_s, end_s] as a usage: the VM's CPU time, estimated from each
 * sample's cpuUsedPct and cpuCount over the time since the sample before
 * (cpu_user_us; the service gives no split, cpu_system_us is 0), and the
 * largest memUsed.  0 with ret present; -1 with why filled when there are
 * fewer than two samples in the window, or a sample is malformed.  wall_us
 * is left to the caller. */
int eb_usage_of(const json_t *samples, long long start_s, long long end_s, struct pl_usage *ret,
                char *why, size_t why_len);

/* proof.c */
/* The startup test: one throwaway VM, its resources read back, the test
 * project, egress tried, deleted and read back gone; s->proof and
 * s->user_uid filled. */
int eb_prove(struct e2b_state *s, struct pl_error *err);

/* run.c */
/* After a run or a call that began at start_s (Unix seconds) and
 * start_ns (monotonic): E2B's metrics of VM id (usage.c) into ret->usage,
 * or why not into ret->usage_absent; bounded by EB_USAGE_TIMEOUT_MS and
 * deadline. */
void eb_usage(struct e2b_state *s, const char *id, long long start_s, uint64_t start_ns,
              uint64_t deadline, struct pl_run_result *ret);
/* The provider's run op (provider.h): snippets and projects (UNSUPPORTED
 * else), one VM each; a grant without E2B_GUARD_URL is INTERNAL. */
int eb_run(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
           struct pl_run_result *ret, struct pl_error *err);
/* A project's files and steps in sb, exactly as a run does it (the proof
 * takes this path too). */
int eb_project(struct e2b_state *s, const struct eb_sandbox *sb, const struct pl_run_ctx *ctx,
               const struct pl_run_request *req, uint64_t deadline, struct pl_run_result *ret,
               struct pl_error *err);
/* Create a VM for a run (tracked first), check the answer and read its
 * network back (eb_check_network).  Any failure deletes it and untracks
 * the run; *ret is the caller's to eb_close. */
int eb_open(struct e2b_state *s, const char *run_id, unsigned timeout_ms, const char *allow_out,
            struct eb_sandbox *ret, struct pl_error *err);
/* Delete a run's VM and stop tracking it; a failure leaves it to the reaper. */
void eb_close(struct e2b_state *s, const char *run_id, const struct eb_sandbox *sb);

/* A snippet in sb, as a run does it. */
int eb_snippet(struct e2b_state *s, const struct eb_sandbox *sb, const struct pl_run_ctx *ctx,
               const struct pl_run_request *req, uint64_t deadline, struct pl_run_result *ret,
               struct pl_error *err);
/* As root, end every process of the guest's uid but sb->keep's and prove
 * none is left, with PH_CLEANUP_MIN_MS at least; `after` names what left
 * them, for the message (INTERNAL, ph_cleanup_verdict).  eb_cleanup also
 * returns " PID:START..." of the kept ones still alive. */
int eb_end_leftovers(struct e2b_state *s, const struct eb_sandbox *sb, uint64_t deadline,
                     const char *after, struct pl_error *err);
int eb_cleanup(struct e2b_state *s, const struct eb_sandbox *sb, uint64_t deadline,
               const char *after, char *ret_alive, size_t alive_size, struct pl_error *err);

/* session.c (docs/providers/e2b.md, "Sessions"): the pl_provider_ops
 * session methods.  run leaves its cleanup to a thread the next call,
 * pause, resume and close wait for; a failed cleanup, or a VM E2B says is
 * gone, is SESSION_ENDED.  pause (no err) ends every process first.
 * eb_prove_session: the startup test's one real session (hosted/cells.c),
 * its last cleanup's verdict included. */
int eb_session_open(void *state, const struct pl_session_open *o, void **ret_session,
                    struct pl_error *err);
int eb_session_run(void *state, void *session, const struct pl_run_ctx *ctx,
                   const struct pl_run_request *req, struct pl_run_result *ret,
                   struct pl_error *err);
int eb_session_pause(void *state, void *session);
int eb_session_resume(void *state, void *session, struct pl_error *err);
void eb_session_close(void *state, void *session);
/* The kept interpreters as the last cleanup found them (no disk figure). */
void eb_session_status(void *state, void *session, struct pl_session_status *ret);
int eb_prove_session(struct e2b_state *s, struct pl_error *err);
/* The guest user's uploads and processes, and the cleanup between steps,
 * as hosted/project.c and hosted/cells.c take them (ud: struct eb_step). */
struct eb_step {
    struct e2b_state *s;
    const struct eb_sandbox *sb;
};
extern const struct ph_project_ops eb_ops;
/* The same in a session: its files through the writer (hosted.h, ph_upload). */
extern const struct ph_project_ops eb_session_ops;

/* reaper.c */
/* One pass (ph_reaper_start's reap_once; state: the e2b_state): delete
 * this instance's VMs no run tracks.  The count deleted, or -1 when the
 * list failed. */
int eb_reap_once(void *state, struct pl_error *err);
