/* SPDX-License-Identifier: Apache-2.0 */
/*
 * docker_int.h: what the docker provider's files share, and nothing
 * outside src/providers/docker/ includes (h2o's *_internal.h).
 *
 * The package (docs/internals/adding-a-provider.md), in plimsolld:
 *   docker.c          the ops table: create (the startup proof's order),
 *                     destroy, info, ready
 *   docker_int.h      this header
 *   settings.c        the provider's settings and the container
 *                     configuration they give; the session settings digest
 *                     read back
 *   container.c       one container: create, inspect, exec, the attach and
 *                     exec streams, the end, the reaper, the host's view
 *                     (kill, prove, sweep), the sockets' peer gate, run
 *                     directories; a payload's stdin and its answer (for
 *                     run.c and session.c)
 *   pool.c            the warm pools: started containers waiting for one
 *                     run, session sandboxes waiting for one session
 *   proof.c           the startup proof (the host's view, the canary per
 *                     image, one real session)
 *   run.c             a run: snippets, modules and projects (steps as execs)
 *   session.c         sessions: open, calls, cells, the cleanup between calls
 *   files.c           a session's file calls: WriteFiles, ReadFile, ListFiles
 *   uplink.c          a session's cell channel: a kept interpreter's launch
 *                     and the greeting taken from its launcher
 *   uplink_cell.c     one cell's frames over the uplink (alone, for its fuzz
 *                     harness and unit test)
 *   engine.[ch]       the Docker Engine API client over its Unix socket, the
 *                     attach stream, the stdout/stderr demultiplexer
 *   engine_parse.h    the readers of the engine's answers (fuzzed apart)
 *   hostview.[ch]     what the host sees of a container: its cgroup and the
 *                     runtime's state, and the kill
 *   reports.[ch]      the readers of the in-sandbox helpers' reports
 *   usage.c           what a run, a step or a session call cost, from the
 *                     container's cgroup
 *   seccomp_bpf.[ch]  the seccomp profile compiled to BPF for execs under
 *                     runsc
 *
 * Inside the container (guest/, embedded by guest/meson.build after
 * src/providers/guest/lines.py):
 *   guest/common.py         first in each program: the seccomp installer
 *                           (runsc), non-dumpable, the stdin readers
 *   guest/steps_common.py   after common.py in bootstrap.py and
 *                           session_steps.py: the step protocol a project's
 *                           steps are run by (the marker, the commands)
 *   guest/procs.py          the /proc readers and end_all (in
 *                           session_agent.py and session_steps.py)
 *   guest/bootstrap.py      every run container's command: a snippet or a
 *                           project (staying PID 1), a session call's
 *                           files, the startup probe
 *   guest/wait_main.py      the Python waiter a warm container keeps until
 *                           the run's code arrives (in bootstrap.py)
 *   guest/wait_main.js      the same for Node (in bootstrap.py)
 *   guest/step_wait.py      a project's steps, waiting in a warm project
 *                           container or beside a session's step runner
 *                           (in bootstrap.py and session_steps.py)
 *   guest/step_waiters.py   starting, checking and handing steps to those
 *                           waiters (in bootstrap.py and session_steps.py)
 *   guest/session_main.py   a session container's PID 1: runs no guest
 *                           code, reaps orphans
 *   guest/session_agent.py  a session's execs: an interpreter's launch and
 *                           the Python cell server, the cleanup between
 *                           calls (also the hosted providers' cells)
 *   guest/session_steps.py  a session's project call's steps, one exec for
 *                           the call, waiting from the cleanup before it
 *                           (run.c, session.c)
 *   guest/cell_server.js    the Node cell server (in session_agent.py)
 *   guest/proof_keep.py     the startup proof's session calls (proof.c):
 *   guest/proof_look.py     a process left behind and a file, what the
 *   guest/proof_read.py     cleanup left of them, the file after a pause
 */
#pragma once

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../broker/broker.h"
#include "../../core/buf.h"
#include "../../core/clock.h"
#include "../../core/errors.h"
#include "../../core/fdio.h"
#include "../../core/fileread.h"
#include "../../core/ids.h"
#include "../../core/pool.h"
#include "../provider.h"
#include "engine.h"
#include "engine_parse.h"
#include "hostview.h"

#define LABEL_INSTANCE "org.plimsoll.instance"
#define LABEL_RUN "org.plimsoll.run"
#define API_TIMEOUT_MS 30000L
#define KILL_GRACE_MS 3000
/* How long an exec's stream is still read after the engine reports the
 * exec ended (dk_pump): its output can be on its way. */
#define EXEC_DRAIN_MS 2000
/* How long a run that ended by SIGKILL waits for the engine's late OOM
 * verdict (run.c), and how often it asks.  Only a sandbox that died with
 * its cgroup waits (runsc); the engine's flag can come seconds after the
 * exit (docs/providers/docker.md). */
#define OOM_LATE_MS 3000
#define OOM_LATE_STEP_MS 50
/* How long a run that took a warm container holds the pool's refill back
 * at most (pool.c; released at the run's end): a new sandbox's start
 * shares the cores with the run (docs/providers/docker.md, "The pool
 * stands aside"). */
#define WARM_HOLD_MS 500
/* A snippet's or module's end marker: this, the run's nonce, a space, then
 * the status and a newline (bootstrap.py's supervise; "The run's end"). */
#define END_MARK_PREFIX "\x1eplimsoll-end "
/* How long a readiness check stands.  While calls come (one asked within
 * READY_KEEP_NS), the keeper thread re-checks each READY_KEEP_EVERY_MS, so
 * a call finds a standing check instead of waiting for the engine's /info;
 * an idle daemon asks the engine nothing. */
#define READY_CACHE_NS 1500000000ull
#define READY_KEEP_EVERY_MS 1000u
#define READY_KEEP_NS 60000000000ull

/*
 * Who the guest is.  SANDBOX_DOCKER_UID (default below, a uid no host
 * account should have) runs every guest process; its groups tell the
 * daemon's own helpers apart from guest code, because Linux and gVisor
 * both refuse /proc/<pid>/fd, environ and mem of a process whose group
 * differs (docs/sessions.md):
 *   uid + 0  runs, snippets, projects, a session's calls
 *   uid + 1  a session's kept Python interpreter and its launcher
 *   uid + 2  a session's kept JavaScript interpreter and its launcher
 *   uid + 3  the cleanup between session calls
 */
#define PL_DOCKER_DEFAULT_UID 2000000000u
#define PL_DOCKER_GID_COUNT 4u
enum { GID_RUN = 0, GID_PY = 1, GID_JS = 2, GID_CLEAN = 3 };

struct docker_settings {
    char runtime[16];           /* SANDBOX_DOCKER_RUNTIME */
    char snippet_image[256];    /* SANDBOX_DOCKER_SNIPPET_IMAGE */
    char project_image[256];    /* SANDBOX_DOCKER_PROJECT_IMAGE */
    char instance[64];          /* SANDBOX_DOCKER_INSTANCE */
    char run_dir[PATH_MAX / 4]; /* SANDBOX_DOCKER_RUN_DIR */
    char *seccomp;              /* the seccomp profile's JSON text; NULL: the engine's default */
    char seccomp_name[PATH_MAX / 4]; /* "plimsoll", "engine-default" or the file's path */
    unsigned uid;                    /* SANDBOX_DOCKER_UID: the guest's uid (gids below) */
    char *exec_filter_env; /* runsc: "PLIMSOLL_SECCOMP_BPF=<base64>" for every exec, or NULL */
    unsigned millicpus;    /* SANDBOX_DOCKER_CPUS x 1000 */
    unsigned pids;         /* SANDBOX_DOCKER_PIDS */
    unsigned work_mb;      /* SANDBOX_DOCKER_WORK_MB */
    unsigned tmp_mb;       /* SANDBOX_DOCKER_TMP_MB */
    unsigned warm;         /* SANDBOX_DOCKER_WARM: started containers kept per image */
};

#define WARM_MAX 16u

struct dsession; /* a session's sandbox, below */

/* One container waiting for the reaper (docker_state.reap_head). */
struct reap_item {
    struct reap_item *next;
    char id[72];
};

/*
 * The provider's state (create's).  lock guards the reaper's queue
 * (reap_head, reap_pending, reaper_stop), the readiness times and
 * keeper_stop; cond wakes the reaper and the keeper.  The pools lock
 * themselves, demand is atomic; the rest is set at startup.
 */
struct docker_state {
    struct docker_settings set;
    struct pl_docker_engine *engine;
    struct pl_hostview hv; /* the host's own view of containers */
    enum pl_tier tier;
    char runtime_path[256];
    char snippet_id[80], project_id[80];
    char engine_desc[256], project_desc[256];
    unsigned max_timeout_ms;
    char host_version[512];
    /* What the startup proof showed, one sentence each, for Describe's
     * startup_checks (docs/providers/docker.md, "The startup proof"). */
    char checks[6][400];

    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct reap_item *reap_head;
    bool reaper_stop;
    unsigned reap_pending;
    pthread_t reaper;
    bool reaper_started;

    uint64_t ready_at_ns; /* last time readiness held */
    uint64_t asked_at_ns; /* last time a call or a poll asked */
    pthread_t keeper;     /* keeps readiness standing while calls come */
    bool keeper_started, keeper_stop;

    /* The warm pools (pool.c): started containers each waiting for one
     * run at the default memory allowance; session sandboxes each waiting
     * for one session. */
    unsigned default_memory_mb;
    struct pl_pool run_pool;

    /* Sessions: on when SANDBOX_MAX_SESSIONS is set and the proof passed. */
    bool sessions_on;
    unsigned session_disk_mb;
    unsigned pool_n; /* SANDBOX_SESSION_POOL */
    struct pl_pool session_pool;
    /* What callers' hints asked for, by mask (1 python, 2 javascript, 3
     * both; no hint counts as both), decayed: the filler makes more of the
     * mix callers use. */
    atomic_uint demand[4];
    const char *session_langs[3]; /* the cell languages the proof showed */
    /* What the session image's probe imported as the sandbox user (proof.c):
     * the libraries behind Describe's display kinds. */
    struct {
        bool matplotlib; /* matplotlib with Agg, and matplotlib.pyplot */
        bool pandas;
    } image_display;
};

/*
 * A socket in a sandbox's directory (a run's broker, a session's cell
 * uplink) admits processes of one container only.  The peer's cgroup, read
 * from the host for the pid SO_PEERCRED names, must be the container's:
 * under runc the peer is the guest's process itself (and must run as the
 * sandbox's uid), under runsc it is gVisor's own process for the sandbox,
 * which lives in the container's cgroup too.  A host process of any uid, a
 * process of the sandbox's uid outside the container and another run's
 * guest are all refused before a byte is read.  Until the container exists
 * every peer is refused.
 */
struct peer_gate {
    struct docker_state *s;
    pthread_mutex_t lock;
    char cgroup[200]; /* "" until the container is created */
};

/*
 * What a run, a step or a session call cost (usage.c): a reading of the
 * container's cgroup when it began, the reading at its end.  The caller
 * zeroes nothing: dk_usage_begin or dk_usage_step_begin sets it up, and
 * dk_usage_clear (or the end) closes what it holds.
 */
struct dk_usage {
    bool started;     /* the beginning was read (or the container is fresh) */
    bool taken;       /* final is the reading at the end (or absent says why) */
    uint64_t t0_ns;   /* when it began */
    uint64_t user_us; /* the cgroup's CPU counters then */
    uint64_t system_us;
    bool peak_from_start; /* the cgroup's memory peak counts from the beginning */
    uint64_t peak_seen;   /* the largest peak read before a reset since then */
    int peak_fd;          /* v2: the descriptor memory.peak was reset through */
    bool peak_open;
    struct pl_usage final;
    char absent[100]; /* why final is not present */
};

/*
 * A container's run, in three parts by owner: what the caller asks
 * (cont_input), what the pump keeps while it reads (cont_pump), what the
 * run came to (cont_result).  dk_run_container (a run's own container)
 * and dk_exec_in (an exec) take all three, dk_project_steps the input and
 * the result (each step is an exec with a pump of its own);
 * dk_cont_prepare fills the input and the captures for a payload,
 * dk_cont_finish turns captures and result into the run's answer.
 */

/* The caller's: set before the call (by dk_cont_prepare for a payload),
 * only read by the lifecycle code.  Borrows everything it points to. */
struct cont_input {
    const char *image_id;
    unsigned memory_mb;
    const char *run_id;
    const char *socket_dir; /* NULL: no socket mount */
    const char *parts[4];   /* written to the bootstrap's stdin, in order */
    size_t part_len[4];
    int nparts;
    unsigned timeout_ms;
    /* The bootstrap is the run's own container's PID 1 (dk_run, not a
     * session's exec): it ends the run with the end marker ("The run's
     * end"), which kills everything else in the pid namespace. */
    bool own_container;
    char warm_id[72];       /* a started warm container to use, or "" */
    struct peer_gate *gate; /* opened for the container once it exists, or NULL */
    /* A project: the bootstrap writes the files and reports one line; then
     * the steps: in the run's own container, each sent to the bootstrap on
     * the attach stream (step_token, below); in a session, each an engine
     * exec (dk_project_steps). */
    const struct pl_run_request *project;
    /* The bootstrap's stdin stays open once the parts are written: a
     * project's steps follow on it. */
    bool keep_stdin;
    /* The project's token, in its header: a step's command carries it, so
     * the bootstrap runs no command a guest wrote into its stdin. */
    char step_token[33];
    unsigned output_bytes;             /* each step's streams' cap */
    const struct pl_output_sink *sink; /* RunStream's, for the steps' output; NULL */
    const char *step_env;              /* "NAME=value" for every step's exec, or NULL */
    /* A project or snippet in its own container with collect globs: once
     * its steps or its guest ended (not by the deadline, nor a snippet's by
     * SIGKILL), dk_collect with this ctx and request into this result,
     * before the container's end.  NULL otherwise. */
    const struct pl_run_ctx *collect_ctx;
    const struct pl_run_request *collect_req;
    struct pl_run_result *collect_ret;
    /* What the run costs (usage.c), or NULL: read at the guest's end (a
     * run's own container: before the deadline's kill too), and around
     * each step of a project (into its step's usage). */
    struct dk_usage *usage;
};

/* The pump's: the caller zeroes it and sets only dx's caps, sinks and end
 * mark (dk_cont_prepare does for a payload); once the call returned it
 * reads the captures in dx, or hands them to dk_cont_finish.  The rest is
 * the lifecycle code's alone.  dk_cont_pump_clear releases the captures. */
struct cont_pump {
    struct pl_demux dx;
    char id[72];      /* the container: created, taken warm, or the exec's */
    bool exec;        /* an exec: at the deadline stop reading; its container's owner ends it */
    char exec_id[80]; /* an exec's id, while dk_pump reads its stream ("": none started) */
    bool until_line;  /* stop once a whole line of stdout arrived */
    bool step;        /* a project's step: stop once both streams' end markers came */
};

/* The run's outcome: written by the lifecycle code, and by session.c for
 * what it did itself (a call's files); read by the caller and
 * dk_cont_finish, which takes the steps.  dk_cont_result_clear frees the
 * steps; a result of no project holds nothing. */
struct cont_result {
    int exit_code; /* the container's, or the exec's (-1: unknown) */
    bool timed_out;
    bool oom;
    struct pl_step_result *steps; /* the steps that finished */
    size_t nsteps;
    char step_error[200];   /* why the steps could not go on (protocol_error) */
    bool files_done;        /* a session's call: the files were written by an exec */
    char files_failed[200]; /* ... and why they could not be, or "" */
};

/*
 * The startup proof's throwaway socket: the run's own transport (the
 * broker's socket server, with the sandbox-only owner, mode and peer
 * check), answering "pong" to any request it lets through.
 */
struct canary {
    char dir[PATH_MAX];
    struct pl_broker_sock *sock;
    struct peer_gate gate;
    bool gate_ready;
};

enum { LANG_PY = 0, LANG_JS = 1 };
/* "python", "javascript": a session's languages by index. */
extern const char *const dk_lang_name[2];

/*
 * A session's sandbox (session.c), its holder's from dk_session_create or
 * dk_pool_take until dk_session_close.  While the cleaner runs, it alone
 * touches the session (dk_cleaner_join waits for it).
 */
/* The steps' waiters a pooled project container's PID 1 starts (the first
 * step's and two for later python3 steps: bootstrap.py, LATER_WAITERS), and
 * the most a session's step runner starts (session_steps.py, MAX_WAITERS). */
#define DK_STEP_WAITERS 3
/* What the host's sweeps between a session's steps spare: the two kept
 * interpreters, the runner and its waiters. */
#define DK_SESSION_SPARED (2 + 1 + DK_STEP_WAITERS)

/* A session's step runner (guest/session_steps.py): its exec's stream and
 * the socket its commands go on. */
struct dk_runner {
    int fd;     /* the exec's stream, -1 once ended */
    int cmd_fd; /* the commands' socket (dk_steps_accept), -1 once ended */
    struct cont_pump p;
};

struct dsession {
    char id[72];        /* the container */
    char tag[17];       /* non-secret label */
    char dir[PATH_MAX]; /* host directory mounted at /run/plimsoll (grants) */
    char fp[65];        /* the security settings at open */
    struct {
        long pid;                 /* in the sandbox's pid namespace */
        unsigned long long start; /* its start time (clock ticks since boot) */
        long host_pid;            /* runc: the host's pid; runsc: gVisor's (= pid) */
        bool up;
        bool fresh; /* no cell has run in it yet */
        int fd;     /* its uplink: the connection its launcher greeted with */
    } in[2];        /* the kept interpreters, learnt from the launcher only */
    int lfd;        /* listening at dir/cells.sock for the launchers' greetings */
    pid_t init_pid; /* the host's pid of the sandbox's PID 1 (runc) */
    long ipc_last;  /* the highest System V IPC id the last cleanup saw */
    pthread_t cleaner;
    bool cleaner_running;
    char verdict[256]; /* non-empty: the session must end, and why */
    struct docker_state *s;
    struct peer_gate gate; /* who may connect to the session's sockets */
    struct {
        struct dk_runner r;
        long pid;                 /* in the sandbox's pid namespace */
        unsigned long long start; /* its start time */
        long host_pid;            /* runc: the host's pid; runsc: gVisor's */
        bool up;                  /* started, connected, waiting for a call */
        bool wanted;              /* a project call ran: each cleanup leaves one waiting */
        unsigned want; /* its python3 steps' waiters: the most a call had python3 steps */
        struct {
            long pid; /* 0: gone */
            unsigned long long start;
            long host_pid;
        } w[DK_STEP_WAITERS]; /* its waiters, as it said them */
        size_t nw;
    } runner;      /* a step runner waiting for the next project call */
    bool pooled;   /* taken from the warm pool */
    unsigned mask; /* the interpreters the pool started: 1 python, 2 javascript */
    /* What GetSession reads while a call may run (dk_session_status):
     * seen_disk, /work and /tmp in bytes as the last cleanup measured them;
     * seen_interp, 1 << lang for each interpreter alive and 4 << lang for
     * each ever started, as of the last launch or cleanup. */
    _Atomic uint64_t seen_disk;
    _Atomic unsigned seen_interp;
};

/*
 * The cell uplink.  Each kept interpreter's launcher connects out to
 * dir/cells.sock (/run/plimsoll/cells.sock inside, the session's read-only
 * mount), reads the challenge the daemon sends there and names it in its
 * report; the interpreter inherits that connection.  Cells then travel over it
 * with the agent's framing (docs/sessions.md), with no exec per cell.  What
 * comes back is the interpreter's output, guest data like any cell's; the
 * daemon bounds it (caps, deadline) and trusts nothing in it.  A cell's
 * files go in an exec of their own first; an uplink found unusable before
 * anything was sent gets a fresh interpreter, once (session.c).
 */
#define UPLINK_NAME "cells.sock"
#define STEPS_SOCK_NAME "steps.sock"
#define UPLINK_MAX_FRAME (64u << 20)

enum uplink_end { UPLINK_UNUSABLE, UPLINK_RAN, UPLINK_ENDED, UPLINK_TIMED_OUT };

/*
 * Unless said, an int function returns 0, or -1 with err filled (INTERNAL),
 * and every id, path and buffer it takes is borrowed for the call.
 */

/* container.c */
/* After a container ended: 0 when its cgroup is empty or gone, 1 when
 * processes were still there (killed now, and logged), < 0 when they could
 * not all be killed.  No err: the caller says what it means. */
int dk_host_prove_gone(struct docker_state *s, const char *id);
/* End a container at its deadline: SIGKILL to its cgroup from the host,
 * then the engine's kill.  0 when either worked, -1 when neither did. */
int dk_end_container(struct docker_state *s, const char *id);
/* A peer gate's life: init before the container exists (every peer is
 * refused), open with the container's id once it does, destroy after the
 * socket it guards stopped listening.  g->lock guards the cgroup. */
void dk_peer_gate_init(struct peer_gate *g, struct docker_state *s);
void dk_peer_gate_open(struct peer_gate *g, const char *container_id);
void dk_peer_gate_destroy(struct peer_gate *g);
/* The broker socket's peer_ok (ud: the gate), called on the socket's
 * thread: whether the peer's cgroup is the container's (and, under runc,
 * its uid the sandbox's). */
bool dk_peer_gate_check(void *ud, int fd, pid_t pid, uid_t uid, gid_t gid);
/* Socket access for a sandbox's directory: owned by the sandbox's uid and
 * GID_RUN, peers judged by g (NULL: no peer check).  g must outlive the
 * socket. */
struct pl_broker_sock_access dk_sandbox_access(struct docker_state *s, struct peer_gate *g);
/* Kill what is left in the container's cgroup, then delete it (force, with
 * its volumes) and any runtime state left for it.  0 once the engine
 * answered 204 or 404; -1 (no err) when the kill or the delete failed. */
int dk_remove_container(struct docker_state *s, const char *id);
/* dk_remove_container, tried up to attempts times with a growing pause
 * (200 ms doubling to 5 s).  Blocks the caller throughout. */
int dk_remove_container_patiently(struct docker_state *s, const char *id, int attempts);
/* The reaper thread (arg: the docker_state).  Deletes what dk_reap_later
 * queued, under s->lock for the queue only; on reaper_stop it drains the
 * queue, then returns. */
void *dk_reaper_main(void *arg);
/* Hand a container to the reaper (id is copied).  Past REAP_BACKLOG
 * waiting the caller tries the deletion itself first; with no reaper (or no
 * memory) it deletes it now, once.  Any thread. */
void dk_reap_later(struct docker_state *s, const char *id);
/* A guard (PL_GUARD(dk_reap_guard_end)): whichever way its scope ends, the
 * container id names goes to the reaper; id NULL hands nothing on. */
struct dk_reap_guard {
    struct docker_state *s;
    const char *id;
};
static inline void dk_reap_guard_end(struct dk_reap_guard *g) {
    if (g->id)
        dk_reap_later(g->s, g->id);
}
/* Startup: delete every container labelled with this instance; *ret_n how
 * many were deleted.  -1 with err when the engine could not list them. */
int dk_delete_untracked(struct docker_state *s, unsigned *ret_n, struct pl_error *err);
/* One Engine API call that must answer want: *ret (may be NULL) gets the
 * JSON answer, a reference the caller drops, on success only.  Another
 * status is INTERNAL with the engine's message. */
int dk_api_expect(struct docker_state *s, const char *method, const char *path, const json_t *body,
                  long want, json_t **ret, struct pl_error *err);
/* The engine's kill: 0 on 204, or 409 (not running any more); else -1. */
int dk_kill_container(struct docker_state *s, const char *id);
/* Write in's parts to fd, read fd into p->dx until the stream ends, the
 * end marker or (p->until_line) a line of stdout arrives, or the deadline:
 * then res->timed_out, and a run's container (p->id) is ended and read
 * KILL_GRACE_MS more (an exec's, p->exec, is left to its owner).  fd stays
 * the caller's. */
int dk_pump(struct docker_state *s, const struct cont_input *in, struct cont_pump *p,
            struct cont_result *res, int fd, uint64_t deadline_ns, struct pl_error *err);
/* Create a container with the run configuration (dk_container_config),
 * its id into ret_id.  waiters: what its bootstrap starts waiting
 * (dk_container_config), or NULL.  The caller deletes it. */
int dk_create_container(struct docker_state *s, const char *image_id, unsigned memory_mb,
                        const char *run_id, const char *socket_dir, const char *waiters,
                        char ret_id[72], struct pl_error *err);
/* End every process of container id but its PID 1 (init_host_pid, runc)
 * and keep's, from the host, and see only those remain; dead (runsc) names
 * unreaped zombies gVisor still lists.  Waits 5 s at most; *ret_killed
 * (may be NULL) counts what was ended. */
int dk_host_sweep(struct docker_state *s, const char *id, pid_t init_host_pid, const long *keep,
                  size_t nkeep, const long *dead, size_t ndead, unsigned *ret_killed,
                  struct pl_error *err);
/* SANDBOX_DOCKER_RUN_DIR/<instance>, made if need be: root's, mode 0711. */
int dk_make_instance_dir(struct docker_state *s, struct pl_error *err);
/* Startup: remove this instance's run-*, session-* and canary-* directories
 * a killed daemon left behind (logged when any). */
void dk_delete_stale_dirs(struct docker_state *s);
/* Create and start an exec of cmd in container_id as user, in /work, with
 * env plus runsc's exec filter: *ret_fd its stream (the caller closes it),
 * ret_eid its id.  Takes cmd's and env's references. */
int dk_exec_start(struct docker_state *s, const char *container_id, const char *user, json_t *cmd,
                  json_t *env, bool attach_stdin, int *ret_fd, char ret_eid[80],
                  struct pl_error *err);
/* One exec as dk_exec_start (stdin from in's parts) pumped into p->dx
 * until it ends or in->timeout_ms (res->timed_out, still 0);
 * res->exit_code its exit code, -1 at the deadline, when its container
 * went or none came.  Sets p->exec, p->id and p->exec_id; the caller
 * clears p. */
int dk_exec_in(struct docker_state *s, const char *container_id, const char *user, json_t *cmd,
               json_t *env, const struct cont_input *in, struct cont_pump *p,
               struct cont_result *res, struct pl_error *err);
/* End capture c: its bytes, malloc'd and the caller's (NULL when out of
 * memory), *ret_len and *ret_truncated (may be NULL).  c is empty after. */
char *dk_take(struct pl_capture *c, size_t *ret_len, bool *ret_truncated);
/* Free n step results and their strings, then st itself; NULL-safe. */
void dk_free_steps(struct pl_step_result *st, size_t n);
/* Release what a cont_pump holds (its captures); a zeroed one is fine. */
void dk_cont_pump_clear(struct cont_pump *p);
/* Release what a cont_result holds (its steps); a zeroed one is fine. */
void dk_cont_result_clear(struct cont_result *res);
/* Set in and p up for a snippet, module or project: image, the
 * bootstrap's stdin (in's parts point into *hdr, *files and req, which
 * must outlive in), p's caps and sinks, and the end marker
 * (in->own_container).  INTERNAL for another kind. */
int dk_cont_prepare(struct docker_state *s, const struct pl_run_ctx *ctx,
                    const struct pl_run_request *req, struct cont_input *in, struct cont_pump *p,
                    struct pl_buf *hdr, struct pl_buf *files, struct pl_error *err);
/* Fill ret from a finished run's p and res: the output moves into ret
 * (malloc'd, the caller's, with res's steps), p's captures are freed.  -1
 * only when out of memory. */
int dk_cont_finish(const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                   struct cont_pump *p, struct cont_result *res, struct pl_run_result *ret,
                   struct pl_error *err);

/* docker.c */
/* Readiness no longer stands (a run failed): the next call checks again,
 * and the warm containers are dropped.  Takes s->lock. */
void dk_invalidate_ready(struct docker_state *s);
/* Check readiness now (the engine answers, the runtime is registered at the
 * same path, both tags name the inspected images) and let it stand for
 * READY_CACHE_NS.  Returns 0 or -1 with err (NOT_READY); an engine that
 * does not answer also drops the warm containers.  Call without s->lock. */
int dk_ready_refresh(struct docker_state *s, struct pl_error *err);

/* pool.c */
/* Start the runs' pool (nothing when SANDBOX_DOCKER_WARM is 0): 0, or
 * -errno (runs then start cold). */
int dk_run_pool_start(struct docker_state *s);
/* Drop every waiting warm container (the engine may have restarted). */
void dk_flush_warm(struct docker_state *s);
/* A started warm container of image which (0 snippet, 1 project) into
 * ret_id, only at the default memory allowance; false when none.  The
 * container is then the caller's to delete; dk_warm_done follows the run. */
bool dk_take_warm(struct docker_state *s, int which, unsigned memory_mb, char ret_id[72]);
/* A run on a warm container ended: the refill its take held back starts. */
void dk_warm_done(struct docker_state *s);
/* Start the sessions' pool (nothing when SANDBOX_SESSION_POOL is 0): 0,
 * or -errno (sessions then open cold). */
int dk_session_pool_start(struct docker_state *s);
/* The provider's pools op: the runs' and sessions' pools, for Describe. */
size_t dk_pools(void *state, struct pl_pool_report *ret, size_t max);
/* A waiting session sandbox best fitting the interpreters want (1
 * python, 2 javascript, 3 both), counted in the demand; NULL when none or
 * memory_mb is not the default.  The caller owns it (dk_session_close). */
struct dsession *dk_pool_take(struct docker_state *s, unsigned memory_mb, unsigned want);
/* Stop both pools' fillers and drop what waits (destroy). */
void dk_pools_stop(struct docker_state *s);

/* proof.c */
/* The startup proof's socket in a canary-* directory, answering "pong".
 * On failure too, c is the caller's to dk_canary_stop, which is safe on a
 * zeroed or stopped canary. */
int dk_canary_start(struct docker_state *s, struct canary *c, struct pl_error *err);
void dk_canary_stop(struct canary *c);
/* Run one canary container of image (its id image_id) with the run
 * configuration and judge its report; the interpreters it proved are added
 * to ret_langs (name -> version) unless there already.  With display (the
 * session image's probe), what the cells' python3 imports there is kept in
 * s->image_display. */
int dk_probe_image(struct docker_state *s, const char *image, const char *image_id, bool display,
                   struct canary *can, json_t *ret_langs, struct pl_error *err);
/* The image ref names: its sha256 id into ret_id.  INVALID_REQUEST naming
 * setting_name when the image is absent or declares a VOLUME. */
int dk_inspect_image(struct docker_state *s, const char *setting_name, const char *ref,
                     char *ret_id, size_t idlen, struct pl_error *err);
/* The runtime's path as GET /info registers it into ret_path;
 * INVALID_REQUEST when it is not registered.  *ret_info (may be NULL) gets
 * /info's answer, a reference the caller drops. */
int dk_check_runtime(struct docker_state *s, char *ret_path, size_t len, json_t **ret_info,
                     struct pl_error *err);
/* pl_hostview_leftovers' callback (ud: the docker_state): kill, delete and
 * remove the runtime state and cgroup of one container left behind. */
void dk_remove_leftover(const char *id, void *ud);
/* Startup: one started container shows the host where containers' processes
 * and runtime state live (s->hv learns the runtime root); it is deleted. */
int dk_hostview_discover(struct docker_state *s, struct pl_error *err);
/* With sessions on: one real session proves calls, cells, a pause and the
 * close; ret_langs (an array) gets the cell languages that worked. */
int dk_session_proof(struct docker_state *s, unsigned memory_mb, json_t *ret_langs,
                     struct pl_error *err);

/* run.c */
/* The first "PLIMSOLL {...}" line of out, parsed: a new reference, or NULL
 * when there is none or it does not parse. */
json_t *dk_report_line(const struct pl_buf *out);
/* The exec command that runs argv exactly (under runsc through the
 * bootstrap's exec mode, which installs the seccomp filter first): a new
 * reference, or NULL when out of memory. */
json_t *dk_step_cmd(struct docker_state *s, const char *const *argv, size_t argc);
/* A session's project steps: one exec of the step runner runs them all
 * (run.c; docs/sessions.md, "A project call").  r is a runner started and
 * connected (session.c); it is ended by dk_runner_end (its commands'
 * socket closes: it exits).  keep is the kept interpreters as the sandbox
 * knows them ([[pid, start], ...]); spare the host pids the sweeps between
 * steps spare (runc: the kept interpreters, the runner and its waiters),
 * spare_start their start times (at most DK_SESSION_SPARED). */
int dk_runner_start(struct docker_state *s, const char *id, const char *sock, unsigned waiters,
                    struct dk_runner *r, struct pl_error *err);
void dk_runner_end(struct dk_runner *r);
int dk_session_steps(struct docker_state *s, const struct cont_input *in, struct dk_runner *r,
                     pid_t init_host_pid, const json_t *keep, const long *spare,
                     const unsigned long long *spare_start, size_t nspare, struct cont_result *res,
                     uint64_t deadline, struct pl_error *err);
/* A project's steps (in->project) in container id, in order, an exec each
 * as the run's user (with in->step_env; output at in->output_bytes, to
 * in->sink), ending what each left running but init_host_pid and keep's;
 * the first that fails, or the deadline (res->timed_out), stops them.
 * Into res->steps; a sandbox that ended under them is res->step_error,
 * with 0. */
int dk_project_steps(struct docker_state *s, const struct cont_input *in, const char *id,
                     struct cont_result *res, uint64_t deadline, pid_t init_host_pid,
                     const long *keep, size_t nkeep, struct pl_error *err);
/* Run in in its own container (or in->warm_id's) to its end: create or
 * take, attach, pump into p, a project's steps, the exit and OOM verdict
 * into res, the host's proof nothing lives.  The container goes to the
 * reaper whatever happens; in->gate is opened for it once it exists. */
int dk_run_container(struct docker_state *s, const struct cont_input *in, struct cont_pump *p,
                     struct cont_result *res, struct pl_error *err);
/* The provider's run op (provider.h).  A container run that failed also
 * invalidates readiness. */
int dk_run(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
           struct pl_run_result *ret, struct pl_error *err);

/* session.c */
/* The session agent's command for mode (and its arg, may be NULL): a new
 * reference, or NULL when out of memory. */
json_t *dk_agent_cmd(const char *mode, const char *arg);
/* Wait for the cleanup after the last call, if one runs; it alone touches
 * d while it runs.  The session's caller only. */
void dk_cleaner_join(struct dsession *d);
/* Forget a session's sandbox: its uplinks, its directory, its gate, d.  The
 * cleaner must be joined and the container handed to the reaper first. */
void dk_dsession_free(struct dsession *d);
/* Create and start one session sandbox with the interpreters in langs
 * ([LANG_PY], [LANG_JS]) running; *ret is the caller's (dk_session_close).
 * On failure nothing is left but a container given to the reaper. */
int dk_session_create(struct docker_state *s, const char *tag, unsigned memory_mb,
                      const bool langs[2], struct dsession **ret, struct pl_error *err);
/* The provider's session ops (provider.h); calls on one session never
 * overlap.  run waits for the last call's cleanup and starts its own after;
 * SESSION_ENDED when the sandbox is gone, changed, or a cleanup failed.
 * pause (no err) joins the cleanup first; close also reaps and frees;
 * status reads what dk_session_seen and the cleanup published. */
void dk_session_status(void *state, void *session, struct pl_session_status *ret);
/* A session call's files into /work (the bootstrap's files mode, as the
 * calls' user, never through a symlink): 0 with ret_failed "" when written
 * or why not; *ret_timed_out at the deadline; < 0 when the engine failed. */
int dk_session_write(struct docker_state *s, struct dsession *d, const struct pl_file *files,
                     size_t nfiles, uint64_t deadline, char *ret_failed, size_t flen,
                     bool *ret_timed_out, struct pl_error *err);
/* files.c: one of a session's file calls (req->kind WRITE_FILES,
 * READ_FILE, LIST_FILES) after the session's checks; INVALID_REQUEST or
 * NOT_FOUND naming the rule a path broke, INTERNAL when the reader failed. */
int dk_session_file_call(struct docker_state *s, struct dsession *d, const struct pl_run_ctx *ctx,
                         const struct pl_run_request *req, struct pl_run_result *ret,
                         struct pl_error *err);
/* files.c: a run's collect globs (docs/api.md, "Artifacts") in container
 * id once its guest ended: one exec of the bootstrap's collect mode as the
 * calls' user, with the run's time left and at least PL_COLLECT_MIN_MS;
 * the answer into ret's artifacts by pl_collect_answer (reports.h), which
 * leaves the run's answer standing whatever keeps the collection from
 * finishing.  < 0 only when out of memory. */
int dk_collect(struct docker_state *s, const char *id, const struct pl_run_ctx *ctx,
               const struct pl_run_request *req, uint64_t deadline, struct pl_run_result *ret);
/* Publish the interpreters' state (d->in[].up) for status. */
void dk_session_seen(struct dsession *d);
int dk_session_open(void *state, const struct pl_session_open *o, void **ret_session,
                    struct pl_error *err);
void dk_session_close(void *state, void *session);
int dk_session_pause(void *state, void *session);
int dk_session_resume(void *state, void *session, struct pl_error *err);
int dk_session_run(void *state, void *session, const struct pl_run_ctx *ctx,
                   const struct pl_run_request *req, struct pl_run_result *ret,
                   struct pl_error *err);

/* usage.c */
/* Begin measuring in container id: fresh, a container not started yet
 * (its cgroup counts from zero at its start); else a reading now, and the
 * memory peak reset when the kernel allows. */
void dk_usage_begin(struct docker_state *s, const char *id, bool fresh, struct dk_usage *u);
/* The reading at the end into u->final, once (a later call does nothing;
 * NULL or not begun: nothing); u->absent says why when the cgroup could
 * not be read. */
void dk_usage_end(struct docker_state *s, const char *id, struct dk_usage *u);
/* A step of run (may be NULL) begins: a reading now, the peak reset (the
 * run's peak so far kept in run first). */
void dk_usage_step_begin(struct docker_state *s, const char *id, struct dk_usage *run,
                         struct dk_usage *step);
/* The step ended after duration_ms: its usage into ret (its memory peak
 * only when the reset at its start held; nothing when the cgroup could not
 * be read); step is cleared. */
void dk_usage_step_end(struct docker_state *s, const char *id, struct dk_usage *run,
                       struct dk_usage *step, uint32_t duration_ms, struct pl_usage *ret);
/* Close what u holds; a u dk_usage_end took is closed already. */
void dk_usage_clear(struct dk_usage *u);
/* u's end reading into ret->usage, or why there is none into
 * ret->usage_absent. */
void dk_usage_result(const struct dk_usage *u, struct pl_run_result *ret);

/* settings.c */
/* The SANDBOX_DOCKER_* settings into s; INVALID_REQUEST naming the one at
 * fault.  s->seccomp and s->exec_filter_env are malloc'd, the caller's to
 * free, also after a failure. */
int dk_load_settings(const struct pl_config *c, struct docker_settings *s, struct pl_error *err);
/* INVALID_REQUEST when the sandbox's uid or one of its PL_DOCKER_GID_COUNT
 * groups belongs to a host account. */
int dk_check_uid_unused(const struct docker_settings *s, struct pl_error *err);
/* A tmpfs's options (mb MiB, noexec, the guest's uid): a new reference,
 * NULL when out of memory. */
json_t *dk_tmpfs_opts(const struct docker_settings *st, unsigned mb);
/* "uid:gid" for the guest's uid and one of its groups (GID_*). */
void dk_user_spec(const struct docker_settings *st, unsigned gid_off, char buf[32]);
/* The run configuration every run, session and proof container gets: a new
 * reference, or NULL when out of memory.  socket_dir, when set, is mounted
 * read-only at /run/plimsoll. */
json_t *dk_container_config(struct docker_state *s, const char *image_id, unsigned memory_mb,
                            const char *run_id, const char *socket_dir, const char *waiters);
/* "uid:gid" of the sandbox's runs (GID_RUN). */
void dk_run_user(struct docker_state *s, char buf[32]);
/* The container's security settings as a digest (ret_fp), and whether it
 * runs and is paused, read from the engine; -1 with err when it cannot be
 * read (gone: the engine's 404). */
int dk_session_state(struct docker_state *s, const char *id, char ret_fp[65], bool *running,
                     bool *paused, struct pl_error *err);

/* uplink.c, uplink_cell.c: called by whoever holds d (the session's
 * caller, or its cleaner while that runs). */
/* Listen at dir/cells.sock (the sandbox's uid alone may connect) into
 * d->lfd; on any failure d->lfd stays -1 and launches fail. */
void dk_uplink_listen(struct dsession *d);
/* A session's project call under runsc: listen at dir/steps.sock (root's,
 * group GID_RUN, 0660: only the calls' group may connect); the listening fd
 * or -1 with err. */
int dk_steps_listen(const struct dsession *d, struct pl_error *err);
/* The one connection to lfd whose peer passes the session's gate, by the
 * deadline (else -1 and *timed_out, or err); lfd is closed and the socket's
 * path unlinked whatever comes. */
int dk_steps_accept(struct dsession *d, int lfd, uint64_t deadline, bool *timed_out,
                    struct pl_error *err);
/* Close lfd and unlink the steps' socket (dk_steps_accept does it too). */
void dk_steps_unlisten(const struct dsession *d, int lfd);
/* The host's pid of the sandbox's process pid that started at start
 * (runc: found in the container's cgroup; runsc: pid itself), or -1. */
long dk_host_pid_of(struct docker_state *s, const struct dsession *d, long pid,
                    unsigned long long start);
/* Close lang's uplink, if any (its fd is -1 after). */
void dk_uplink_drop(struct dsession *d, int lang);
/* Drop both uplinks, close and unlink the listening socket. */
void dk_uplink_close(struct dsession *d);
/* One cell over lang's uplink: UPLINK_RAN with *status (0 ran, 1 raised)
 * and the output in dx, its display outputs in disp (NULL: dropped
 * uncounted); UPLINK_UNUSABLE when nothing was sent (the uplink
 * is dropped); UPLINK_ENDED or UPLINK_TIMED_OUT when the channel was lost
 * mid-cell.  Every byte read is the guest's. */
enum uplink_end dk_uplink_cell(struct dsession *d, int lang, const char *code, size_t len,
                               uint64_t deadline, struct pl_demux *dx, struct pl_displays *disp,
                               int *status);
/* Start a language's interpreter; its pid and start time come from the
 * launcher, which runs no guest code (docs/sessions.md), and its uplink
 * is the connection the launcher greeted with.  d->in[lang] is up after. */
int dk_launch(struct docker_state *s, struct dsession *d, int lang, struct pl_error *err);
