/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dc_int.h: the dockercloud provider's internals (docs/providers/dockercloud.md).
 * Nothing outside src/providers/dockercloud/ includes this file; every name
 * here starts with dc_.
 *
 * The provider drives the Docker Sandboxes API v1: the management surface
 * and each sandbox's own endpoint.  Its guest programs are the hosted
 * providers' (src/providers/hosted/guest/).  In plimsolld:
 *   dockercloud.c   the ops table: create (settings, the startup test, the
 *                   reaper), ready (the last word from the API, cached), run
 *   dc_int.h        this header
 *   settings.c      the provider's settings (their shape only) and the
 *                   compute sizes
 *   api.c           the management surface: the token exchange, sandboxes,
 *                   network policies, endpoint credentials
 *   endpoint.c      a sandbox's own endpoint with its scoped credential:
 *                   files, processes under a deadline kept here
 *   output.c        one page of a process's output into the run's captures
 *                   (alone, for its fuzz harness)
 *   run.c           one run in one sandbox: create, the seal read back,
 *                   upload, the steps, the delete
 *   proof.c         the startup test: the token, its permissions, the
 *                   account's policy, one throwaway sandbox
 *   reaper.c        sandboxes with this instance's name prefix that no run
 *                   holds
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/capture.h"
#include "../../core/errors.h"
#include "../hosted/books.h"
#include "../hosted/guard.h"
#include "../hosted/hosted.h"
#include "../provider.h"

struct dc_settings {
    char account[256];   /* SANDBOX_DOCKERCLOUD_ACCOUNT: a secret, never logged */
    char secret[512];    /* SANDBOX_DOCKERCLOUD_TOKEN: a secret, never logged */
    char auth_url[512];  /* SANDBOX_DOCKERCLOUD_AUTH_URL: Docker's token endpoint */
    char api_url[512];   /* SANDBOX_DOCKERCLOUD_API_URL */
    char image[256];     /* SANDBOX_DOCKERCLOUD_IMAGE: imageRef */
    unsigned cpus;       /* SANDBOX_DOCKERCLOUD_CPUS */
    unsigned memory_mib; /* SANDBOX_DOCKERCLOUD_MEMORY_MIB: a documented pair with cpus */
    char instance[25];   /* SANDBOX_DOCKERCLOUD_INSTANCE: in every display name */
    char workdir[256];   /* SANDBOX_DOCKERCLOUD_WORKDIR */
    char egress_probe[512];
    unsigned call_timeout_ms; /* one API call */
    unsigned reap_interval_s;
    unsigned slack_s; /* a sandbox's timeout past its run's deadline */
    unsigned poll_ms; /* between two reads of a process's output */
    struct ph_guard_setting guard;
    char prefix[40]; /* "pl-<instance>-": every display name starts so */
};

/* What the startup proof showed (Describe). */
struct dc_proof {
    unsigned files_uploaded;
    unsigned user_uid;
    char probe_detail[512];
    char account_policy[128];
};

/* The provider's state (create's): set at startup but books (its own
 * lock) and access_token (token_lock), which a 401 renews. */
struct dc_state {
    struct dc_settings set;
    struct dc_proof proof;
    unsigned max_timeout_ms;
    struct ph_books books;  /* runs holding a sandbox, the last outage, the reaper */
    struct ph_guard *guard; /* when SANDBOX_DOCKERCLOUD_GUARD_URL is set */
    pthread_mutex_t token_lock;
    char access_token[4096]; /* from the exchange; "" before it */
    char checks[6][768];
};

/* The most processes of the guest's user a fresh sandbox may have. */
#define DC_KEEP_MAX 16

/* A sandbox as the API answered its create (and the reads after it); its
 * holder's from dc_open to dc_close.  cred is a secret, wiped after. */
struct dc_sandbox {
    char uid[64];
    char display_name[72];
    char etag[128];
    char endpoint[512]; /* core.endpoint.uri */
    char cred[4096];    /* the scoped endpoint credential */
    uint64_t cred_until_ns;
    char allow[24];       /* the one network it may reach: "<guard>/32" with a grant, else "" */
    char guard_token[72]; /* a run with a grant: its guard token ("" none) */
    /* The guest's user's processes the sandbox had before any code ran,
     * "PID:START ..." (read before a project of several steps): the
     * cleanup between steps spares them (run.c). */
    char keep[DC_KEEP_MAX * 24];
};

/*
 * Unless said, an int function returns 0, or -1 with err filled (INTERNAL),
 * and what it takes is borrowed for the call.
 */

/* settings.c */
/* The SANDBOX_DOCKERCLOUD_* settings into s (zeroed first);
 * INVALID_REQUEST naming the one at fault, never a secret's value. */
int dc_load_settings(const struct pl_config *c, struct dc_settings *s, struct pl_error *err);

/* api.c: the management surface.  A 401 exchanges the token again, once;
 * a transport failure or a 5xx is recorded as an outage in s->books. */
/* Exchange the account's secret for an access token (kept under token_lock);
 * INTERNAL, naming the settings, when the answer holds no usable token. */
int dc_exchange_token(struct dc_state *s, struct pl_error *err);
/* One management call: 0 with *ret_status for any status below 500,
 * *ret_json (may be NULL; the caller drops it) and the ETag into ret_etag
 * (may be NULL); -1 on a transport failure or a 5xx. */
int dc_call(struct dc_state *s, const char *method, const char *path, const json_t *body,
            const char *const *extra_headers, long *ret_status, json_t **ret_json, char *ret_etag,
            size_t etag_len, struct pl_error *err);
/* The API's error message ("code: message", cut to fit len), or "". */
void dc_error_text(const json_t *j, char *out, size_t len);
/* Create a sandbox named prefix + run_id, deny-all with allow alone
 * allowed (the guard's /32; NULL: nothing), deleted by the service
 * timeout_s after; wait for it to run with a usable endpoint.  On failure
 * ret->uid may name a sandbox the caller deletes. */
int dc_create(struct dc_state *s, const char *run_id, unsigned timeout_s, const char *allow,
              struct dc_sandbox *ret, struct pl_error *err);
/* Delete under the etag just read (a stale one read again, 3 tries): 0
 * when deleted or already gone; a 403 says the permission is missing. */
int dc_delete(struct dc_state *s, const char *uid, struct pl_error *err);
/* The effective policy of a sandbox (uid) or, with uid NULL, the account's:
 * < 0 unless it is deny-all with nothing allowed but allow (a network, or
 * "" for none; the account's may also allow nothing); why says what it is.
 * Not sealed is NOT_READY (nothing runs); a failed read INTERNAL. */
int dc_policy_sealed(struct dc_state *s, const char *uid, const char *allow, char *why,
                     size_t why_len, struct pl_error *err);
/* A scoped endpoint credential (exec, files write; 300 s) into sb->cred,
 * renewed by the endpoint's calls a minute before it runs out. */
int dc_credential(struct dc_state *s, struct dc_sandbox *sb, struct pl_error *err);
/* Every sandbox whose display name carries this instance's prefix, every
 * page: *ret_list a new JSON array the caller drops (unset on failure). */
int dc_list_ours(struct dc_state *s, json_t **ret_list, struct pl_error *err);

/* endpoint.c: the sandbox's own endpoint, with its scoped credential
 * (renewed in sb when it runs out or a 401 answers). */
/* Files (absolute paths) up in one multipart call, mode 0644. */
int dc_upload(struct dc_state *s, struct dc_sandbox *sb, const struct ph_file *files, size_t n,
              struct pl_error *err);
/* A directory and its parents (mkdir with parents: true). */
int dc_mkdir(struct dc_state *s, struct dc_sandbox *sb, const char *path, struct pl_error *err);

/* One process: argv in cwd as user (NULL: the sandbox's default user),
 * until it exits or the deadline.  Set up by dc_proc_init (captures of
 * output_cap bytes each, exit_code -1), freed by dc_proc_free; what it
 * points to is the caller's. */
struct dc_proc {
    const char *user;
    const char *const *argv;
    size_t argc;
    const char *cwd;
    uint64_t deadline_ns;
    const char *guard_url, *guard_token; /* a run with a grant: its environment */
    /* filled */
    struct pl_capture out, err;
    int exit_code;
    bool timed_out;
};
/* One page of readOutput's answer into p's captures (output.c; the
 * service's bytes, fuzzed): the cursor advanced, *ret_exited and
 * p->exit_code once it has exited.  < 0 on a page that does not read: a
 * chunk not base64, a cursor that goes back, an exit code out of range. */
#define DC_MAX_OUTPUT_PAGE (6u << 20) /* one chunk, decoded */
int dc_output_page(const json_t *page, struct dc_proc *p, unsigned long long *cursor,
                   bool *ret_exited, struct pl_error *err);
void dc_proc_init(struct dc_proc *p, size_t output_cap);
void dc_proc_free(struct dc_proc *p);
/* 0 when the process exited or met its deadline (timed_out; it is sent
 * kill); < 0 when the endpoint failed (the process is sent kill too).
 * Its output is polled every SANDBOX_DOCKERCLOUD_POLL_MS. */
int dc_process(struct dc_state *s, struct dc_sandbox *sb, struct dc_proc *p, struct pl_error *err);

/* run.c */
/* The provider's run op (provider.h): snippets and projects (UNSUPPORTED
 * else, and for a grant without the guard), one sandbox each. */
int dc_run(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
           struct pl_run_result *ret, struct pl_error *err);
/* Create a run's sandbox (tracked first), wait for it, read its seal back
 * (NOT_READY when it is not sealed), get its endpoint credential.  Any
 * failure deletes it and untracks the run; *ret is the caller's to
 * dc_close. */
int dc_open(struct dc_state *s, const char *run_id, unsigned timeout_ms, bool grant,
            struct dc_sandbox *ret, struct pl_error *err);
/* The delete, then the run untracked; err (may be NULL) says why a delete
 * failed, and the reaper finds that sandbox by its name. */
int dc_close(struct dc_state *s, const char *run_id, const struct dc_sandbox *sb,
             struct pl_error *err);
/* A project in sb as hosted/project.c runs it, the cleanup between steps
 * as root (needs s->proof.user_uid); ret filled as pl_provider_run's. */
int dc_project(struct dc_state *s, struct dc_sandbox *sb, const struct pl_run_ctx *ctx,
               const struct pl_run_request *req, uint64_t deadline, struct pl_run_result *ret,
               struct pl_error *err);

/* proof.c */
/* The startup test: the token, the permissions, the account's policy, then
 * one throwaway sandbox, deleted and read back gone; s->proof filled. */
int dc_prove(struct dc_state *s, struct pl_error *err);

/* reaper.c */
/* One pass (ph_reaper_start's reap_once; state: the dc_state): delete the
 * sandboxes of this instance's prefix no run tracks.  The count deleted,
 * or -1 when the list failed. */
int dc_reap_once(void *state, struct pl_error *err);
