/* SPDX-License-Identifier: Apache-2.0 */
/*
 * osh_int.h: the openshell provider's internals (docs/providers/openshell.md).
 * Nothing outside src/providers/openshell/ includes this file; every name
 * here starts with osh_.
 *
 * The provider drives an OpenShell gateway over gRPC (hosted/grpc.c, the
 * messages of proto/openshell/openshell.proto packed by protobuf-c).
 *
 * In plimsolld:
 *   openshell.c     the ops table: create (settings, the gateway's health
 *                   and driver, the startup test, the reaper), ready (the
 *                   gateway's Health at most every 5 s), run, sessions
 *   osh_int.h       this header
 *   settings.c      the provider's settings (their shape only)
 *   api.c           the gateway's calls, one gRPC call each, and the
 *                   read-back of a sandbox against what was asked
 *   exec.c          one command through ExecSandbox's stream; files
 *                   uploaded as a tar stream on an exec's stdin
 *   event.c         one ExecSandbox event read (alone, for its fuzz harness)
 *   run.c           one run in one sandbox: create, read back, upload, the
 *                   steps, the delete
 *   session.c       a session: one sandbox read back before every call, the
 *                   cleanup after each, stopped when idle
 *   proof.c         the startup test in a throwaway sandbox
 *   reaper.c        the sandboxes nobody holds, found by their labels
 *   relay.c         grants: the relay in the sandbox, dialled over
 *                   ExecSandboxInteractive, each request to the run's broker
 *   relay_frame.c   the relay's frames as the daemon reads them (alone, for
 *                   its fuzz harness)
 *
 * Inside the sandbox (guest/, embedded by guest/meson.build):
 *   guest/relay.py           the relay: the guest's broker socket, its
 *                            connections carried in frames on stdio
 *   guest/join_pieces.py     a program longer than one ExecSandbox argument,
 *                            sent in pieces, joined and run
 *   guest/walls.py           the startup test's walls from inside: writes,
 *                            interfaces, cgroup limits, memory reads
 *   guest/walls_child.py     walls.py's child: tries to read its parent's
 *                            memory (in walls.py)
 *   guest/spawn_orphans.sh   the startup test's command that outlives its
 *                            deadline
 *   guest/orphans.py         after the cleanup: whether any of those
 *                            processes is left
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/capture.h"
#include "../../core/errors.h"
#include "../hosted/books.h"
#include "../hosted/grpc.h"
#include "../hosted/hosted.h"
#include "../provider.h"

/* Labels every sandbox carries (metadata and template). */
#define OSH_LABEL_MANAGED "plimsoll" /* "1": made by some plimsoll */
#define OSH_LABEL_INSTANCE "plimsoll.instance"
#define OSH_LABEL_RUN "plimsoll.run"
#define OSH_LABEL_DEADLINE "plimsoll.deadline" /* the run's deadline, Unix seconds */
/* Another instance's sandbox is deleted this long past its deadline. */
#define OSH_FOREIGN_GRACE_S 300
/* A gRPC message, and an upload's chunk under the gateway's 1 MiB. */
#define OSH_MAX_MESSAGE (4u << 20)
#define OSH_UPLOAD_CHUNK (768u << 10)
/* Upstream's limits on an exec's command (crates/openshell-server/src/grpc/
 * validation.rs:31-33): arguments, and bytes of one argument. */
#define OSH_EXEC_MAX_ARGS 1024u
#define OSH_EXEC_MAX_ARG_LEN (32u << 10)
/* The guest user's own processes a fresh sandbox may run. */
#define OSH_MAX_BASELINE 8

struct osh_settings {
    char url[512];       /* SANDBOX_OPENSHELL_URL */
    char token[4096];    /* SANDBOX_OPENSHELL_TOKEN: a secret, never logged; "" none */
    char ca_file[512];   /* SANDBOX_OPENSHELL_CA_FILE */
    char cert_file[512]; /* SANDBOX_OPENSHELL_CERT_FILE */
    char key_file[512];  /* SANDBOX_OPENSHELL_KEY_FILE */
    char image[256];     /* SANDBOX_OPENSHELL_IMAGE */
    char cpu[16];        /* SANDBOX_OPENSHELL_CPU: "1", "500m" */
    unsigned memory_mib; /* SANDBOX_OPENSHELL_MEMORY_MIB */
    char instance[25];   /* SANDBOX_OPENSHELL_INSTANCE */
    char workdir[256];   /* SANDBOX_OPENSHELL_WORKDIR: under /tmp */
    char egress_probe[512];
    unsigned call_timeout_ms;
    unsigned reap_interval_s;
};

/* The provider's state (create's): set at startup but books (its own
 * lock), the readiness fields (ready_lock) and policy_hash, which every
 * read-back writes (the same value, unlocked). */
struct osh_state {
    struct osh_settings set;
    struct ph_grpc_target target;
    unsigned max_timeout_ms;
    struct ph_books books;
    /* what the startup test showed */
    char driver[64], driver_version[64], gateway_version[64];
    char policy_hash[65]; /* upstream's hash of the policy sent, once a sandbox showed it */
    unsigned user_uid;
    char checks[7][768];
    /* sessions: on when SANDBOX_MAX_SESSIONS > 0 */
    unsigned session_lifetime_s;
    const char *cell_langs[3];            /* the cell languages the startup session proved */
    char cell_note[256];                  /* why javascript is not among them */
    struct ph_display_found cell_display; /* what the startup session's cells could show */
    /* readiness: asked at most every 5 s */
    pthread_mutex_t ready_lock;
    uint64_t ready_at_ns;
    int ready_rc;
    char ready_why[256];
};

/* One sandbox as a run (or a session) holds it, from osh_open to
 * osh_close. */
struct osh_sandbox {
    char name[20]; /* "pl-" and 16 hex digits: the lookup key */
    char id[64];   /* metadata.id: ExecSandbox's key */
    char run_id[40];
    uint64_t deadline_s; /* its label */
    /* The guest user's processes before any code ran (the sandbox's main
     * process among them): "PID:START" each, spared by the cleanup. */
    char baseline[OSH_MAX_BASELINE][32];
    size_t nbaseline;
};

/*
 * Unless said, an int function returns 0, or -1 with err filled (INTERNAL),
 * and what it takes is borrowed for the call.
 */

/* settings.c */
/* The SANDBOX_OPENSHELL_* settings into s (zeroed first); INVALID_REQUEST
 * naming the one at fault.  Only their shape: the gateway is proved later. */
int osh_load_settings(const struct pl_config *c, struct osh_settings *s, struct pl_error *err);

/* api.c: each call records the gateway's outage, or its end, in s->books. */
/* The compute driver the gateway reports (GetGatewayInfo): it must say
 * itself healthy and run one driver, docker; s->driver, driver_version and
 * gateway_version are filled. */
int osh_gateway_driver(struct osh_state *s, struct pl_error *err);
/* Health within timeout_ms (0: SANDBOX_OPENSHELL_CALL_TIMEOUT_MS): 0 only
 * when the gateway answers healthy. */
int osh_health(struct osh_state *s, uint64_t timeout_ms, struct pl_error *err);
/* Create the sandbox (sb->name, run_id and deadline_s set by the caller),
 * wait for READY until deadline, and read it back (osh_readback).  On a
 * failure the sandbox may exist: the caller deletes it (osh_close). */
int osh_create(struct osh_state *s, struct osh_sandbox *sb, uint64_t deadline,
               struct pl_error *err);
/* Read the sandbox back whole: labels, image, limits, policy, READY, its
 * name and id (sb->id learnt the first time), no providers, the policy's
 * revision and hash (into s->policy_hash).  Any difference is NOT_READY
 * (the wall is not as asked; nothing ran); a gateway failure INTERNAL. */
int osh_readback(struct osh_state *s, struct osh_sandbox *sb, struct pl_error *err);
/* DeleteSandbox: 0 when deleted or already gone; it does not wait (osh_gone). */
int osh_delete(struct osh_state *s, const char *name, struct pl_error *err);
/* 0 once GetSandbox says NOT_FOUND, waiting through DELETING for the call
 * timeout at most; -1 while it is still there. */
int osh_gone(struct osh_state *s, const char *name, struct pl_error *err);
/* Each sandbox made by some plimsoll: name, instance, run, deadline. */
struct osh_listed {
    char name[64], instance[64], run[64];
    uint64_t deadline_s;
};
/* Every sandbox labelled managed (the label checked again here), every
 * page: *ret a malloc'd array the caller frees, *ret_n its length; a
 * deadline label that does not read is 0 (past).  *ret NULL on failure. */
int osh_list_managed(struct osh_state *s, struct osh_listed **ret, size_t *ret_n,
                     struct pl_error *err);
/* The gRPC status as an error (INTERNAL): "Method: CODE: message".
 * Returns -1. */
int osh_status_error(struct pl_error *err, const char *method, const struct ph_grpc_call *c);

/* exec.c: one command through ExecSandbox.  An osh_exec is set up by
 * osh_exec_init (captures of output_cap bytes each, exit_code -1) and freed
 * by osh_exec_free; what it points to is the caller's. */
struct osh_exec {
    const char *const *argv;
    size_t argc;
    const char *workdir; /* NULL: the gateway's default */
    const void *stdin_data;
    size_t stdin_len;
    const char *env_name, *env_value; /* one variable of the guest's, or NULL */
    uint64_t deadline_ns;
    bool cancel_first; /* the client's deadline before the gateway's (the startup test) */
    /* filled */
    struct pl_capture out, err;
    int exit_code;
    bool timed_out;
};
void osh_exec_init(struct osh_exec *x, size_t output_cap);
void osh_exec_free(struct osh_exec *x);
/* 0 when it exited or met its deadline (timed_out, exit 124); < 0 when
 * the gateway failed (an outage).  A command over upstream's limits is
 * refused before anything is sent; a long python3 -c program goes in
 * pieces. */
int osh_exec(struct osh_state *s, const struct osh_sandbox *sb, struct osh_exec *x,
             struct pl_error *err);
/* Files into the sandbox (absolute paths under /tmp, else refused): one
 * tar stream on an exec's stdin, in chunks under the gateway's message
 * limit.  An exec that fails or times out is INTERNAL. */
int osh_upload(struct osh_state *s, const struct osh_sandbox *sb, const struct ph_file *files,
               size_t n, uint64_t deadline, struct pl_error *err);
/* One ExecSandboxEvent into x (exported for its fuzz harness): 1 at the
 * exit, 0 for output, < 0 when it does not read. */
int osh_exec_event(struct osh_exec *x, const unsigned char *msg, size_t len, struct pl_error *err);

/* run.c */
/* The provider's run op (provider.h): snippets and projects (UNSUPPORTED
 * else), one sandbox each, its relay when the run has a grant. */
int osh_run(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
            struct pl_run_result *ret, struct pl_error *err);
/* A sandbox for run_id, declaring timeout_ms as its lifetime: tracked in
 * s->books, created, read back, its baseline read.  *ret is the caller's
 * to osh_close; on failure it was closed already. */
int osh_open(struct osh_state *s, const char *run_id, unsigned timeout_ms, struct osh_sandbox *ret,
             struct pl_error *err);
/* Delete the sandbox and untrack its run; one the delete did not reach is
 * left to the reaper, by its labels. */
void osh_close(struct osh_state *s, const struct osh_sandbox *sb);
/* One call in a sandbox: a snippet, a project or (cells: a session's
 * interpreters; NULL for a run) a cell, as the guest's user; ret filled as
 * pl_provider_run's. */
int osh_call(struct osh_state *s, const struct osh_sandbox *sb, struct ph_cells *cells,
             const struct pl_run_ctx *ctx, const struct pl_run_request *req, uint64_t deadline,
             struct pl_run_result *ret, struct pl_error *err);
/* The cleanup (run.c says what it spares), with PH_CLEANUP_MIN_MS at
 * least; ret_alive (may be NULL): the kept ones still alive,
 * " PID:START ...".  INTERNAL naming what `after` left running when it
 * could not prove the sandbox clean. */
#define OSH_MAX_KEEP 12    /* kept processes besides the baseline */
#define OSH_KEEP_BYTES 512 /* their "PID:START ..." */
int osh_cleanup(struct osh_state *s, const struct osh_sandbox *sb, const char *keep,
                uint64_t deadline, const char *after, char *ret_alive, size_t alive_size,
                struct pl_error *err);
/* One command with a small output, for the startup test and the cleanup:
 * in /tmp, within timeout_ms; its stdout (out_size - 1 bytes at most,
 * NUL-terminated) into out, *ret_exit (124 at the deadline).  < 0 as
 * osh_exec. */
int osh_command(struct osh_state *s, const struct osh_sandbox *sb, const char *const *argv,
                size_t argc, unsigned timeout_ms, char *out, size_t out_size, int *ret_exit,
                struct pl_error *err);

/* The same, cancelled by the client at timeout_ms when cancel_first (the
 * gateway's own deadline set well past it). */
int osh_command_cancel(struct osh_state *s, const struct osh_sandbox *sb, const char *const *argv,
                       size_t argc, unsigned timeout_ms, bool cancel_first, char *out,
                       size_t out_size, int *ret_exit, struct pl_error *err);

/* relay.c: grants through a relay in the sandbox (guest/relay.py). */
#define OSH_RELAY_SOCKET "/tmp/plimsoll-relay/broker.sock" /* PLIMSOLL_BROKER_SOCKET */
#define OSH_RELAY_MAX_OPEN 16                              /* connections open at once */
#define OSH_RELAY_KEEP 8 /* the relay and its ancestors, spared by the cleanup */
/* A frame: type, big-endian connection id and length, then the bytes. */
#define OSH_RELAY_HDR 9
#define OSH_RELAY_FRAME_MAX 65536u
#define OSH_RELAY_READY 'R'
#define OSH_RELAY_OPEN 'O'
#define OSH_RELAY_DATA 'D'
#define OSH_RELAY_CLOSE 'C'
/* The relay's frames as they come (exported for its fuzz harness): each
 * whole frame to on_frame (p valid until it returns); < 0 once a frame
 * breaks the rules (an unknown type, a payload over OSH_RELAY_FRAME_MAX,
 * bytes on an O or C) or on_frame refuses it, and from then on.  Every byte
 * is the guest's.  osh_relay_rx_init zeroes rx. */
struct osh_relay_rx {
    unsigned char hdr[OSH_RELAY_HDR];
    size_t hdr_len;
    unsigned type;
    uint32_t id;
    size_t need, have;
    bool broken;
    unsigned char payload[OSH_RELAY_FRAME_MAX];
};
void osh_relay_rx_init(struct osh_relay_rx *rx);
int osh_relay_rx_feed(struct osh_relay_rx *rx, const unsigned char *data, size_t len,
                      int (*on_frame)(void *ud, unsigned type, uint32_t id, const unsigned char *p,
                                      size_t n),
                      void *ud);
struct osh_relay;
struct pl_broker;
/* Start the relay for a run's broker and wait until it listens; INTERNAL
 * when it does not (the run fails as infrastructure: nothing ran).  A
 * thread of its own holds the stream; *ret is the caller's to
 * osh_relay_stop, and sb and broker must outlive it. */
int osh_relay_start(struct osh_state *s, const struct osh_sandbox *sb, struct pl_broker *broker,
                    uint64_t deadline_ns, struct osh_relay **ret, struct pl_error *err);
/* Its processes ("PID:START"), which the cleanup between steps spares: at
 * most max into keep; how many.  Any thread. */
size_t osh_relay_keep(struct osh_relay *r, char (*keep)[32], size_t max);
/* Half-close its stdin (it exits), cancel it if it lingers, join its
 * thread and free r (logged when it ended early); NULL-safe. */
void osh_relay_stop(struct osh_relay *r);

/* session.c: a session's sandbox (the pl_provider_ops session methods).
 * run reads the sandbox back first (a difference is SESSION_ENDED) and
 * leaves its cleanup to a thread the next call, pause, resume and close
 * wait for; pause (no err) ends every process of the guest's. */
int osh_session_open(void *state, const struct pl_session_open *o, void **ret_session,
                     struct pl_error *err);
int osh_session_run(void *state, void *session, const struct pl_run_ctx *ctx,
                    const struct pl_run_request *req, struct pl_run_result *ret,
                    struct pl_error *err);
int osh_session_pause(void *state, void *session);
int osh_session_resume(void *state, void *session, struct pl_error *err);
void osh_session_close(void *state, void *session);
/* The kept interpreters as the last cleanup found them (no disk figure). */
void osh_session_status(void *state, void *session, struct pl_session_status *ret);
/* The one real session of the startup test (hosted/cells.c). */
int osh_prove_session(struct osh_state *s, struct pl_error *err);

/* proof.c */
/* The startup test: the gateway's health and driver, then one throwaway
 * sandbox (the test project, the walls, a cancelled command's cleanup),
 * deleted and read back gone; s->user_uid learnt. */
int osh_prove(struct osh_state *s, struct pl_error *err);

/* reaper.c */
/* One pass (ph_reaper_start's reap_once; state: the osh_state): delete this
 * instance's sandboxes no run tracks and another's past its deadline plus
 * OSH_FOREIGN_GRACE_S.  The count deleted, or -1 when the list failed. */
int osh_reap_once(void *state, struct pl_error *err);
