/*
 * docker.c: the docker provider.  Hardened containers through the local
 * Docker Engine, on runc (paints "container") or on verified gVisor runsc
 * (paints "kernel").  docs/providers/docker.md is the reference.
 *
 * A run is one container created from the inspected image ID with the run
 * configuration (read-only root, /tmp and /work as small noexec tmpfs, no
 * network, no capabilities, no-new-privileges, unprivileged user, memory /
 * CPU / process limits, optional seccomp profile), its stdin attached.  The
 * daemon writes a header, the payload and the guest's stdin to the
 * bootstrap (bootstrap.py), reads the demultiplexed output up to the caps,
 * kills the container at the deadline, reads its exit code and OOM flag,
 * and hands the container to a reaper that deletes it after the answer.
 *
 * Startup proof (create), before serving: the engine is local and answers;
 * the runtime is registered (runsc with its path); both images are present,
 * declare no VOLUME, and their IDs are recorded; one throwaway container per
 * image, with exactly the run configuration plus a throwaway Unix socket
 * mounted the way a broker socket will be, must show a read-only root, every
 * writable mount a tmpfs of the promised size marked noexec (and nosuid
 * under runc), writes landing only in those mounts, no program runnable from
 * them, the socket reachable, and under runsc a kernel that is not the
 * host's.  Containers this instance left behind are deleted first.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "../../core/canon.h"
#include "../provider.h"
#include "../../broker/broker.h"
#include "bootstrap.h"     /* generated: pl_docker_bootstrap[] */
#include "session_agent.h" /* generated: pl_docker_session_agent[] */
#include "engine.h"
#include "engine_parse.h"
#include "hostview.h"
#include "reports.h"
#include "seccomp_bpf.h"
#include "seccomp_runc.h"  /* generated: pl_seccomp_runc[], seccomp/plimsoll.json */
#include "seccomp_runsc.h" /* generated: pl_seccomp_runsc[], seccomp/plimsoll-runsc.json */

#define LABEL_INSTANCE "org.plimsoll.instance"
#define LABEL_RUN "org.plimsoll.run"
#define API_TIMEOUT_MS 30000L
#define KILL_GRACE_MS 3000
#define READY_CACHE_NS 1000000000ull

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

struct reap_item {
    struct reap_item *next;
    char id[72];
};

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

    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct reap_item *reap_head;
    bool reaper_stop;
    unsigned reap_pending;
    pthread_t reaper;
    bool reaper_started;

    uint64_t ready_at_ns; /* last time readiness held */

    /* The warm pool: containers created and started with the run
     * configuration at the default memory allowance, each waiting for its
     * one run.  [0] snippet image, [1] project image. */
    unsigned default_memory_mb;
    char warm[2][WARM_MAX][72];
    unsigned nwarm[2];
    bool warm_stop;
    pthread_t warmer;
    bool warmer_started;

    /* Sessions: on when SANDBOX_MAX_SESSIONS is set and the proof passed. */
    bool sessions_on;
    unsigned session_disk_mb;
    /* The sessions' warm pool (SANDBOX_SESSION_POOL). */
    unsigned pool_n;
    struct dsession *pool[64];
    unsigned npool;
    /* What callers' hints asked for, by mask (1 python, 2 javascript, 3
     * both; no hint counts as both), decayed: the filler makes more of the
     * mix callers use. */
    unsigned demand[4];
    bool pool_stop;
    bool pool_started;
    pthread_t pool_thread;
    pthread_cond_t pool_cond;
    const char *session_langs[3]; /* the cell languages the proof showed */
};

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- settings ----------------------------------------------------------- */

static const char *setting(const struct pl_config *c, const char *name) {
    const char *v = c->lookup ? c->lookup(name, c->lookup_userdata) : NULL;
    return v && *v ? v : NULL;
}

static int copy_setting(const struct pl_config *c, const char *name, const char *def, char *dst,
                        size_t len, struct pl_error *err) {
    const char *v = setting(c, name);
    if (!v)
        v = def;
    if (strlen(v) >= len)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: too long", name);
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

static int uint_setting(const struct pl_config *c, const char *name, unsigned def, unsigned min,
                        unsigned max, unsigned *ret, struct pl_error *err) {
    const char *v = setting(c, name);
    if (!v) {
        *ret = def;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || n < min || n > max)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "%s: \"%.32s\" must be a whole number from %u to %u", name, v, min,
                            max);
    *ret = (unsigned)n;
    return 0;
}

/* "1", "0.5", "2.25": CPUs with up to three decimals, 0.01 to 64. */
static int cpus_setting(const struct pl_config *c, unsigned *ret, struct pl_error *err) {
    const char *v = setting(c, "SANDBOX_DOCKER_CPUS");
    if (!v) {
        *ret = 1000;
        return 0;
    }
    unsigned whole = 0, frac = 0, digits = 0;
    const char *p = v;
    bool ok = *p >= '0' && *p <= '9';
    while (ok && *p >= '0' && *p <= '9' && whole < 1000)
        whole = whole * 10 + (unsigned)(*p++ - '0');
    if (ok && *p == '.') {
        p++;
        while (*p >= '0' && *p <= '9' && digits < 3) {
            frac = frac * 10 + (unsigned)(*p++ - '0');
            digits++;
        }
        if (digits == 0)
            ok = false;
    }
    while (digits < 3) {
        frac *= 10;
        digits++;
    }
    unsigned m = whole * 1000 + frac;
    if (!ok || *p || m < 10 || m > 64000)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_DOCKER_CPUS: \"%.32s\" must be a number of CPUs from 0.01 "
                            "to 64 (at most three decimals)",
                            v);
    *ret = m;
    return 0;
}

static int read_small_file(const char *path, size_t max, char **ret) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct pl_buf b = {0};
    char chunk[8192];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
        if (b.len + (size_t)n > max || pl_buf_append(&b, chunk, (size_t)n) < 0) {
            close(fd);
            pl_buf_free(&b);
            return -1;
        }
    }
    close(fd);
    if (n < 0) {
        pl_buf_free(&b);
        return -1;
    }
    *ret = b.data ? b.data : strdup("");
    return 0;
}

static int load_settings(const struct pl_config *c, struct docker_settings *s,
                         struct pl_error *err) {
    if (copy_setting(c, "SANDBOX_DOCKER_RUNTIME", "runc", s->runtime, sizeof(s->runtime), err) < 0)
        return -1;
    if (strcmp(s->runtime, "runc") != 0 && strcmp(s->runtime, "runsc") != 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_DOCKER_RUNTIME: \"%s\" is neither runc nor runsc", s->runtime);
    if (copy_setting(c, "SANDBOX_DOCKER_SNIPPET_IMAGE", "plimsoll/snippet:latest", s->snippet_image,
                     sizeof(s->snippet_image), err) < 0 ||
        copy_setting(c, "SANDBOX_DOCKER_PROJECT_IMAGE", "plimsoll/project:latest", s->project_image,
                     sizeof(s->project_image), err) < 0 ||
        copy_setting(c, "SANDBOX_DOCKER_INSTANCE", "default", s->instance, sizeof(s->instance),
                     err) < 0 ||
        copy_setting(c, "SANDBOX_DOCKER_RUN_DIR", "/run/plimsoll", s->run_dir, sizeof(s->run_dir),
                     err) < 0)
        return -1;
    for (const char *p = s->instance; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "SANDBOX_DOCKER_INSTANCE: use [A-Za-z0-9._-]");
    if (s->run_dir[0] != '/')
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_DOCKER_RUN_DIR: must be an absolute path");
    if (cpus_setting(c, &s->millicpus, err) < 0 ||
        uint_setting(c, "SANDBOX_DOCKER_PIDS", 128, 8, 4096, &s->pids, err) < 0 ||
        uint_setting(c, "SANDBOX_DOCKER_WORK_MB", 64, 1, 65536, &s->work_mb, err) < 0 ||
        uint_setting(c, "SANDBOX_DOCKER_TMP_MB", 16, 1, 65536, &s->tmp_mb, err) < 0 ||
        uint_setting(c, "SANDBOX_DOCKER_WARM", 2, 0, WARM_MAX, &s->warm, err) < 0)
        return -1;
    if (uint_setting(c, "SANDBOX_DOCKER_UID", PL_DOCKER_DEFAULT_UID, 1000, 4000000000u, &s->uid,
                     err) < 0)
        return -1;
    const char *sc = setting(c, "SANDBOX_DOCKER_SECCOMP");
    if (!sc) {
        /* The shipped profile for the runtime, compiled in (seccomp/). */
        const char *text = strcmp(s->runtime, "runsc") == 0 ? pl_seccomp_runsc : pl_seccomp_runc;
        s->seccomp = strdup(text);
        if (!s->seccomp)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        snprintf(s->seccomp_name, sizeof(s->seccomp_name), "plimsoll");
    } else if (strcmp(sc, "engine-default") == 0) {
        snprintf(s->seccomp_name, sizeof(s->seccomp_name), "engine-default");
    } else {
        if (strlen(sc) >= sizeof(s->seccomp_name))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "SANDBOX_DOCKER_SECCOMP: too long");
        memcpy(s->seccomp_name, sc, strlen(sc) + 1);
        if (read_small_file(sc, 1u << 20, &s->seccomp) < 0)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "SANDBOX_DOCKER_SECCOMP: cannot read %s", sc);
        json_t *j = json_loads(s->seccomp, 0, NULL);
        bool ok = json_is_object(j) && json_object_get(j, "defaultAction");
        json_decref(j);
        if (!ok)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "SANDBOX_DOCKER_SECCOMP: %s is not a seccomp profile (JSON with "
                                "defaultAction)",
                                sc);
    }
    /* gVisor filters the container's first process only: every exec gets
     * the same profile from a helper inside (seccomp_bpf.h). */
    if (strcmp(s->runtime, "runsc") == 0 && s->seccomp) {
        unsigned char *bpf = NULL;
        size_t n = 0;
        if (pl_docker_seccomp_bpf(s->seccomp, &bpf, &n, err) < 0)
            return -1;
        char *b64 = pl_base64_encode(bpf, n, 1);
        free(bpf);
        struct pl_buf e = {0};
        if (!b64 || pl_buf_printf(&e, "PLIMSOLL_SECCOMP_BPF=%s", b64) < 0) {
            free(b64);
            pl_buf_free(&e);
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        }
        free(b64);
        s->exec_filter_env = e.data;
    }
    return 0;
}

/*
 * The sandbox's uid and its groups must belong to no account of the host:
 * a host user with the same uid could signal (runc) or reach what the
 * sandbox can.  Checked against the host's user and group databases.
 */
static int check_uid_unused(const struct docker_settings *s, struct pl_error *err) {
    struct passwd pw, *pwr = NULL;
    struct group gr, *grr = NULL;
    char buf[16384];
    if (getpwuid_r((uid_t)s->uid, &pw, buf, sizeof(buf), &pwr) == 0 && pwr)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_DOCKER_UID: uid %u belongs to the host account \"%.64s\"; "
                            "the sandbox needs a uid no host account has",
                            s->uid, pw.pw_name);
    for (unsigned g = 0; g < PL_DOCKER_GID_COUNT; g++)
        if (getgrgid_r((gid_t)(s->uid + g), &gr, buf, sizeof(buf), &grr) == 0 && grr)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "SANDBOX_DOCKER_UID: gid %u (uid + %u) belongs to the host group "
                                "\"%.64s\"; the sandbox needs groups no host group has",
                                s->uid + g, g, gr.gr_name);
    return 0;
}

/* ---- container configuration -------------------------------------------- */

static json_t *tmpfs_opts(const struct docker_settings *st, unsigned mb) {
    char o[160];
    snprintf(o, sizeof(o), "rw,noexec,nosuid,nodev,size=%um,uid=%u,gid=%u,mode=1777", mb, st->uid,
             st->uid + GID_RUN);
    return json_string(o);
}

/* "uid:gid" for the guest's uid and one of its groups (GID_*). */
static void user_spec(const struct docker_settings *st, unsigned gid_off, char buf[32]) {
    snprintf(buf, 32, "%u:%u", st->uid, st->uid + gid_off);
}

/*
 * The run configuration, shared by runs and by the startup proof so the
 * proof tests exactly what runs get.  socket_dir, when set, is bind-mounted
 * read-only at /run/plimsoll (where a run's broker socket will live).
 */
static json_t *container_config(struct docker_state *s, const char *image_id, unsigned memory_mb,
                                const char *run_id, const char *socket_dir) {
    const struct docker_settings *st = &s->set;
    json_t *sec = json_array();
    json_array_append_new(sec, json_string("no-new-privileges:true"));
    if (st->seccomp) {
        struct pl_buf b = {0};
        pl_buf_printf(&b, "seccomp=%s", st->seccomp);
        json_array_append_new(sec, json_stringn(b.data, b.len));
        pl_buf_free(&b);
    }
    json_t *tmpfs = json_pack("{s:o, s:o}", "/tmp", tmpfs_opts(st, st->tmp_mb), "/work",
                              tmpfs_opts(st, st->work_mb));
    long long mem = (long long)memory_mb << 20;
    /* Under runsc PidsLimit also counts gVisor's own threads: the guest is
     * limited by RLIMIT_NPROC inside the sandbox instead, with a large
     * PidsLimit as a backstop (field notes).  Under runc, nproc would count
     * every container's uid 65534 processes, so PidsLimit alone. */
    bool runsc = strcmp(st->runtime, "runsc") == 0;
    json_t *ulimits = json_pack("[{s:s, s:i, s:i}]", "Name", "nofile", "Soft", 1024, "Hard", 1024);
    if (runsc)
        json_array_append_new(ulimits,
                              json_pack("{s:s, s:i, s:i}", "Name", "nproc", "Soft",
                                        (json_int_t)st->pids, "Hard", (json_int_t)st->pids));
    json_t *host = json_pack(
        "{s:s, s:b, s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:s, s:s, s:{s:s, s:{}}, s:o, s:b}",
        "NetworkMode", "none", "ReadonlyRootfs", 1, "CapDrop", json_pack("[s]", "ALL"),
        "SecurityOpt", sec, "Tmpfs", tmpfs, "Memory", (json_int_t)mem, "MemorySwap",
        (json_int_t)mem, "NanoCpus", (json_int_t)st->millicpus * 1000000, "PidsLimit",
        (json_int_t)(runsc ? 4096 : st->pids), "Runtime", st->runtime, "IpcMode", "none",
        "LogConfig", "Type", "none", "Config", "Ulimits", ulimits, "AutoRemove", 0);
    /* Every process of the container lives under the instance's cgroup
     * parent, where the host can find it whatever the engine says. */
    json_object_set_new(host, "CgroupParent", json_string(s->hv.parent));
    if (socket_dir) {
        char bind[PATH_MAX];
        snprintf(bind, sizeof(bind), "%s:/run/plimsoll:ro", socket_dir);
        json_object_set_new(host, "Binds", json_pack("[s]", bind));
    }
    json_t *labels = json_pack("{s:s, s:s}", LABEL_INSTANCE, st->instance, LABEL_RUN, run_id);
    json_t *cmd = json_pack("[s, s, s]", "python3", "-c", pl_docker_bootstrap);
    json_t *env = json_pack("[s, s, s, s]", "HOME=/tmp", "PYTHONUNBUFFERED=1",
                            "PYTHONDONTWRITEBYTECODE=1", "LANG=C.UTF-8");
    if (socket_dir)
        json_array_append_new(
            env, json_string("PLIMSOLL_BROKER_SOCKET=/run/plimsoll/" PL_BROKER_SOCKET_NAME));
    char user[32];
    user_spec(st, GID_RUN, user);
    return json_pack("{s:s, s:o, s:o, s:s, s:s, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:o, s:o}",
                     "Image", image_id, "Cmd", cmd, "Env", env, "User", user, "WorkingDir", "/work",
                     "AttachStdin", 1, "AttachStdout", 1, "AttachStderr", 1, "OpenStdin", 1,
                     "StdinOnce", 1, "Tty", 0, "NetworkDisabled", 1, "Labels", labels, "HostConfig",
                     host);
}

/* ---- what the host sees (hostview.h) -------------------------------------- */

/*
 * Kill every process of container id from the host, through its cgroup:
 * whatever state the guest put them in (stopped, traced, a main thread that
 * exited alone, every catchable signal ignored), a SIGKILL from the host
 * ends them.  *ret_n counts the processes signalled.
 */
static int host_kill(struct docker_state *s, const char *id, unsigned *ret_n) {
    char cg[200];
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    return pl_hostview_kill_all(&s->hv, cg, 5000, ret_n);
}

/*
 * After a container ended: prove from the host that nothing of it lives.
 * 0 when its cgroup is empty or gone; 1 when processes were still there
 * (they are killed); < 0 when they could not be killed.
 */
static int host_prove_gone(struct docker_state *s, const char *id) {
    char cg[200];
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    if (pl_hostview_wait_empty(&s->hv, cg, 1000) == 0)
        return 0;
    unsigned n = 0;
    int r = pl_hostview_kill_all(&s->hv, cg, 5000, &n);
    fprintf(stderr,
            "plimsolld: docker: container %.12s ended but %u of its processes were still running "
            "on the host; %s\n",
            id, n, r == 0 ? "killed" : "they could not all be killed");
    return r == 0 ? 1 : r;
}

/* End a container at its deadline: from the host first, then the engine. */
static int kill_container(struct docker_state *s, const char *id);
static int end_container(struct docker_state *s, const char *id) {
    unsigned n = 0;
    int hr = host_kill(s, id, &n);
    int er = kill_container(s, id);
    return hr == 0 || er == 0 ? 0 : -1;
}

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

static void peer_gate_init(struct peer_gate *g, struct docker_state *s) {
    memset(g, 0, sizeof(*g));
    g->s = s;
    pthread_mutex_init(&g->lock, NULL);
}

static void peer_gate_open(struct peer_gate *g, const char *container_id) {
    pthread_mutex_lock(&g->lock);
    pl_hostview_cgroup(&g->s->hv, container_id, g->cgroup, sizeof(g->cgroup));
    pthread_mutex_unlock(&g->lock);
}

static void peer_gate_destroy(struct peer_gate *g) {
    pthread_mutex_destroy(&g->lock);
}

static bool peer_gate_check(void *ud, int fd, pid_t pid, uid_t uid, gid_t gid) {
    (void)fd;
    (void)gid;
    struct peer_gate *g = ud;
    char want[200], got[256];
    pthread_mutex_lock(&g->lock);
    memcpy(want, g->cgroup, sizeof(want));
    pthread_mutex_unlock(&g->lock);
    if (!want[0] || pid <= 0)
        return false;
    if (!g->s->hv.runsc && uid != (uid_t)g->s->set.uid)
        return false;
    return pl_hostview_cgroup_of_pid(&g->s->hv, pid, got, sizeof(got)) == 0 &&
           strcmp(got, want) == 0;
}

static struct pl_broker_sock_access sandbox_access(struct docker_state *s, struct peer_gate *g) {
    return (struct pl_broker_sock_access){.set = true,
                                          .sock_uid = (uid_t)s->set.uid,
                                          .sock_gid = (gid_t)(s->set.uid + GID_RUN),
                                          .peer_ok = g ? peer_gate_check : NULL,
                                          .peer_userdata = g};
}

/* ---- the reaper: containers are deleted after the answer ---------------- */

static int remove_container(struct docker_state *s, const char *id) {
    char path[160];
    /* Nothing of it may outlive the deletion: once the engine forgets a
     * container, its cgroup goes and a survivor would be nobody's. */
    unsigned killed = 0;
    if (host_kill(s, id, &killed) < 0)
        return -1;
    snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
    long st = 0;
    struct pl_error e = {0};
    if (pl_docker_call(s->engine, "DELETE", path, NULL, API_TIMEOUT_MS, &st, NULL, &e) < 0)
        return -1;
    if (st != 204 && st != 404)
        return -1;
    if (pl_hostview_runtime_state(&s->hv, id)) {
        fprintf(stderr, "plimsolld: docker: the runtime still kept state for %.12s; removed\n", id);
        pl_hostview_remove_runtime_state(&s->hv, id);
    }
    return 0;
}

static void *reaper_main(void *arg) {
    struct docker_state *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->reap_head && !s->reaper_stop)
            pthread_cond_wait(&s->cond, &s->lock);
        struct reap_item *it = s->reap_head;
        if (!it)
            break; /* stopping, and nothing left */
        s->reap_head = it->next;
        pthread_mutex_unlock(&s->lock);
        /* Retry for about half a minute: the engine may be restarting.  A
         * container still left is deleted at this instance's next start. */
        long backoff_ms = 200;
        for (int attempt = 0; attempt < 10 && remove_container(s, it->id) < 0; attempt++) {
            struct timespec ts = {backoff_ms / 1000, (backoff_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
            backoff_ms = backoff_ms * 2 > 5000 ? 5000 : backoff_ms * 2;
        }
        free(it);
        pthread_mutex_lock(&s->lock);
        s->reap_pending--;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static void reap_later(struct docker_state *s, const char *id) {
    struct reap_item *it = calloc(1, sizeof(*it));
    if (!it || !s->reaper_started) {
        free(it);
        remove_container(s, id);
        return;
    }
    snprintf(it->id, sizeof(it->id), "%s", id);
    pthread_mutex_lock(&s->lock);
    it->next = s->reap_head;
    s->reap_head = it;
    s->reap_pending++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static int remove_listed(const char *id, void *ud) {
    return remove_container(ud, id);
}

/* Delete every container labelled with this instance (startup). */
static int delete_untracked(struct docker_state *s, unsigned *ret_n, struct pl_error *err) {
    char filter[256], path[512];
    snprintf(filter, sizeof(filter), "{\"label\":[\"%s=%s\"]}", LABEL_INSTANCE, s->set.instance);
    char *enc = pl_docker_urlencode(filter);
    snprintf(path, sizeof(path), "/containers/json?all=1&filters=%s", enc ? enc : "");
    free(enc);
    long st = 0;
    json_t *list = NULL;
    if (pl_docker_call(s->engine, "GET", path, NULL, API_TIMEOUT_MS, &st, &list, err) < 0)
        return -1;
    unsigned n = pl_docker_list_ids(list, remove_listed, s);
    json_decref(list);
    *ret_n = n;
    return 0;
}

/* ---- one container, start to finish --------------------------------------- */

struct cont_run {
    /* in */
    const char *image_id;
    unsigned memory_mb;
    const char *run_id;
    const char *socket_dir; /* NULL: no socket mount */
    const char *parts[4];   /* written to the bootstrap's stdin, in order */
    size_t part_len[4];
    int nparts;
    unsigned timeout_ms;
    bool exec; /* a session's exec: at the deadline stop reading; the cleanup kills */
    /* out */
    struct pl_demux dx; /* caps set by the caller */
    int exit_code;
    bool timed_out;
    bool oom;
    char id[72];
    char warm_id[72];       /* in: a started warm container to use, or "" */
    struct peer_gate *gate; /* in: opened for the container once it exists, or NULL */
    char exec_id[80];       /* an exec's id, while pump reads its stream */
    /* A project: the bootstrap writes the files and reports one line; then
     * each step is an engine exec (project_steps). */
    const struct pl_run_request *project;
    unsigned output_bytes;
    struct pl_step_result *steps; /* out: the steps that finished */
    size_t nsteps;
    bool until_line;        /* pump: stop once a whole line of stdout arrived */
    char step_error[200];   /* out: why the steps could not go on (protocol_error) */
    const char *step_env;   /* "NAME=value" for every step's exec, or NULL */
    bool files_done;        /* a session's call: the files were written by an exec */
    char files_failed[200]; /* ... and why they could not be, or "" */
};

static int api_expect(struct docker_state *s, const char *method, const char *path,
                      const json_t *body, long want, json_t **ret, struct pl_error *err) {
    long st = 0;
    json_t *j = NULL;
    if (pl_docker_call(s->engine, method, path, body, API_TIMEOUT_MS, &st, &j, err) < 0)
        return -1;
    if (st != want) {
        pl_error_set(err, PL_REASON_INTERNAL, "docker: %s %s answered %ld: %.200s", method, path,
                     st, pl_docker_message(j));
        json_decref(j);
        return -1;
    }
    if (ret)
        *ret = j;
    else
        json_decref(j);
    return 0;
}

static int set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int kill_container(struct docker_state *s, const char *id) {
    char path[128];
    snprintf(path, sizeof(path), "/containers/%s/kill", id);
    long st = 0;
    struct pl_error e = {0};
    if (pl_docker_call(s->engine, "POST", path, NULL, API_TIMEOUT_MS, &st, NULL, &e) < 0)
        return -1;
    return st == 204 || st == 409 ? 0 : -1; /* 409: not running any more */
}

/* Whether exec eid no longer runs (or its container is gone). */
static bool exec_ended(struct docker_state *s, const char *eid) {
    char path[160];
    snprintf(path, sizeof(path), "/exec/%s/json", eid);
    long st = 0;
    json_t *ins = NULL;
    struct pl_error e = {0};
    if (pl_docker_call(s->engine, "GET", path, NULL, 5000, &st, &ins, &e) < 0) {
        json_decref(ins);
        return false; /* the engine is away: the deadline decides */
    }
    bool ended = st == 404 || (st == 200 && !json_is_true(json_object_get(ins, "Running")));
    json_decref(ins);
    return ended;
}

/* Pump stdin out and output in until the stream ends; kill at the deadline. */
static int pump(struct docker_state *s, struct cont_run *r, int fd, uint64_t deadline_ns,
                struct pl_error *err) {
    int part = 0;
    size_t off = 0;
    bool wr_open = true;
    uint64_t hard_end = 0; /* after a kill: how long we still read */
    unsigned char buf[65536];
    if (r->nparts == 0) {
        shutdown(fd, SHUT_WR);
        wr_open = false;
    }
    for (;;) {
        uint64_t now = mono_ns();
        if (!r->timed_out && now >= deadline_ns) {
            r->timed_out = true;
            if (r->exec)
                return 0;
            if (end_container(s, r->id) < 0)
                return pl_error_set(err, PL_REASON_INTERNAL,
                                    "docker: cannot kill container at its deadline");
            hard_end = mono_ns() + (uint64_t)KILL_GRACE_MS * 1000000ull;
        }
        if (hard_end && now >= hard_end)
            return 0; /* killed; the stream did not end: stop reading */
        uint64_t until = hard_end ? hard_end : deadline_ns;
        int wait_ms = until > now ? (int)((until - now) / 1000000ull) + 1 : 0;
        /* An exec's stream may outlive its process: under runsc the engine
         * keeps it open when the sandbox dies under it.  A quiet exec is
         * asked about once a second. */
        if (r->exec_id[0] && wait_ms > 1000)
            wait_ms = 1000;
        struct pollfd p = {.fd = fd, .events = POLLIN | (wr_open ? POLLOUT : 0)};
        int pr = poll(&p, 1, wait_ms);
        if (pr < 0 && errno != EINTR)
            return pl_error_set(err, PL_REASON_INTERNAL, "poll: %s", strerror(errno));
        if (pr == 0 && r->exec_id[0] && exec_ended(s, r->exec_id))
            return 0;
        if (pr <= 0)
            continue;
        if (wr_open && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
            while (part < r->nparts) {
                size_t left = r->part_len[part] - off;
                if (left == 0) {
                    part++;
                    off = 0;
                    continue;
                }
                ssize_t w = send(fd, r->parts[part] + off, left, MSG_NOSIGNAL);
                if (w < 0) {
                    if (errno == EAGAIN || errno == EINTR)
                        break;
                    part = r->nparts; /* the guest stopped reading: drop the rest */
                    break;
                }
                off += (size_t)w;
            }
            if (part >= r->nparts) {
                shutdown(fd, SHUT_WR); /* StdinOnce: the container's stdin closes */
                wr_open = false;
            }
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = recv(fd, buf, sizeof(buf), 0);
            if (n == 0)
                return 0; /* the stream ended: the container exited */
            if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                    continue;
                if (r->timed_out)
                    return 0;
                return pl_error_set(err, PL_REASON_INTERNAL, "docker attach stream: %s",
                                    strerror(errno));
            }
            if (pl_demux_feed(&r->dx, buf, (size_t)n) < 0)
                return pl_error_set(err, PL_REASON_INTERNAL,
                                    "docker attach stream: malformed frame");
            if (r->until_line && part >= r->nparts && r->dx.out.len &&
                memchr(r->dx.out.data, '\n', r->dx.out.len))
                return 0;
        }
    }
}

/* Create a container with the run configuration; its ID into ret_id. */
static int create_container(struct docker_state *s, const char *image_id, unsigned memory_mb,
                            const char *run_id, const char *socket_dir, char ret_id[72],
                            struct pl_error *err) {
    char path[256];
    json_t *cfg = container_config(s, image_id, memory_mb, run_id, socket_dir);
    if (!cfg)
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory");
    snprintf(path, sizeof(path), "/containers/create?name=plimsoll-%.24s", run_id);
    json_t *created = NULL;
    int rc = api_expect(s, "POST", path, cfg, 201, &created, err);
    json_decref(cfg);
    if (rc < 0)
        return -1;
    if (pl_docker_created_id(created, ret_id) < 0) {
        json_decref(created);
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: create answered without an Id");
    }
    json_decref(created);
    return 0;
}

/* The first "PLIMSOLL {...}" line of the bootstrap's stdout. */
static json_t *report_line(const struct pl_buf *out) {
    const char *p = out->data;
    size_t n = out->len;
    while (p && n >= 9) {
        const char *eol = memchr(p, '\n', n);
        size_t len = eol ? (size_t)(eol - p) : n;
        if (len > 9 && memcmp(p, "PLIMSOLL ", 9) == 0)
            return json_loadb(p + 9, len - 9, 0, NULL);
        if (!eol)
            break;
        n -= len + 1;
        p = eol + 1;
    }
    return NULL;
}

static char *take(struct pl_buf *b, size_t *ret_len) {
    *ret_len = b->len;
    char *d = b->data ? b->data : calloc(1, 1);
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

static int exec_in(struct docker_state *s, const char *container_id, const char *user, json_t *cmd,
                   json_t *env, struct cont_run *r, int *ret_exit, struct pl_error *err);

static bool in_list(long v, const long *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (list[i] == v)
            return true;
    return false;
}

/*
 * End every process of container id but its PID 1 (init_host_pid, runc)
 * and the ones in keep (runc: host pids; runsc: gVisor pids), from the
 * host, then check that only those remain.  dead (runsc only) names pids the
 * cleanup found dead but not yet reaped, which gVisor still lists (under
 * runc a dead process has left its cgroup).  Under runc the processes are
 * read from the container's cgroup; under runsc from `runsc ps` and ended
 * with `runsc kill`.  *ret_killed counts what was ended.  0 when only the
 * spared remain; < 0 with err when something could not be ended or read.
 */
static int host_sweep(struct docker_state *s, const char *id, pid_t init_host_pid, const long *keep,
                      size_t nkeep, const long *dead, size_t ndead, unsigned *ret_killed,
                      struct pl_error *err) {
    char cg[200];
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    unsigned killed = 0;
    long ended[256]; /* runsc: pids a SIGKILL from the host went to */
    size_t nended = 0;
    uint64_t deadline = mono_ns() + 5000000000ull;
    for (;;) {
        size_t others = 0;
        if (!s->hv.runsc) {
            pid_t *procs = NULL;
            size_t n = 0;
            int r = pl_hostview_procs(&s->hv, cg, &procs, &n);
            if (r < 0 && r != -ENOENT)
                return pl_error_set(err, PL_REASON_INTERNAL,
                                    "the sandbox's cgroup could not be read: %s", strerror(-r));
            for (size_t i = 0; i < n; i++) {
                if (procs[i] == init_host_pid || in_list(procs[i], keep, nkeep))
                    continue;
                others++;
                if (kill(procs[i], SIGKILL) == 0)
                    killed++;
            }
            free(procs);
        } else {
            long *pids = NULL;
            size_t n = 0;
            /* gVisor lets a guest stop its PID 1 (Linux does not), and a
             * stopped PID 1 reaps nobody: what was killed would stay
             * listed.  Continue it from the host before looking again. */
            if (killed)
                pl_hostview_runsc_signal(&s->hv, id, 1, "CONT");
            if (pl_hostview_runsc_ps(&s->hv, id, &pids, &n, err) < 0)
                return -1;
            for (size_t i = 0; i < n; i++) {
                if (pids[i] == 1 || in_list(pids[i], keep, nkeep))
                    continue;
                /* A zombie a kept interpreter has not reaped yet: listed by
                 * gVisor (which cannot tell it from the living), dead by the
                 * cleanup's reading of its threads, or dead because the host
                 * itself sent it a SIGKILL, which nothing survives. */
                if (in_list(pids[i], dead, ndead) || in_list(pids[i], ended, nended))
                    continue;
                others++;
                if (pl_hostview_runsc_signal(&s->hv, id, pids[i], "KILL") == 0) {
                    killed++;
                    if (nended < sizeof(ended) / sizeof(ended[0]))
                        ended[nended++] = pids[i];
                }
            }
            free(pids);
        }
        if (others == 0)
            break;
        if (mono_ns() >= deadline)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "%zu processes of the sandbox could not be ended", others);
        usleep(5000);
    }
    if (ret_killed)
        *ret_killed = killed;
    return 0;
}

static void free_steps(struct pl_step_result *st, size_t n) {
    for (size_t i = 0; st && i < n; i++) {
        free(st[i].name);
        free(st[i].out);
        free(st[i].err);
    }
    free(st);
}

/*
 * An exec of argv, exactly: sh "exec "$@"" under runc; under runsc the
 * bootstrap's exec mode, which first installs the seccomp filter gVisor
 * does not give an exec.  A program that does not exist exits 127 with a
 * message on stderr.
 */
static json_t *step_cmd(struct docker_state *s, const char *const *argv, size_t argc) {
    json_t *cmd = s->set.exec_filter_env
                      ? json_pack("[s, s, s, s]", "python3", "-c", pl_docker_bootstrap, "exec")
                      : json_pack("[s, s, s, s]", "/bin/sh", "-c", "exec \"$@\"", "plimsoll");
    for (size_t k = 0; cmd && k < argc; k++)
        json_array_append_new(cmd, json_string(argv[k]));
    return cmd;
}

/* "uid:gid" of the sandbox's runs. */
static void run_user(struct docker_state *s, char buf[32]) {
    user_spec(&s->set, GID_RUN, buf);
}

/*
 * A project's steps, each one engine exec in container r->id as the
 * sandbox's user, in /work, in order, stopping at the first that fails.
 * Exit codes and output come from the engine (the exec's own stream and
 * inspect), a channel no process in the sandbox can open or write.  After
 * each step, everything it left running is ended from the host, so nothing
 * of one step can reach the next step's streams.  Engine failures are
 * infrastructure (< 0); a sandbox that ended under the steps (the guest's
 * doing, e.g. memory) is r->step_error.
 */
static int project_steps(struct docker_state *s, struct cont_run *r, uint64_t deadline,
                         pid_t init_host_pid, const long *keep, size_t nkeep,
                         struct pl_error *err) {
    const struct pl_run_request *req = r->project;
    r->steps = calloc(req->project.nsteps ? req->project.nsteps : 1, sizeof(*r->steps));
    if (!r->steps)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    char user[32];
    run_user(s, user);
    for (size_t i = 0; i < req->project.nsteps; i++) {
        uint64_t now = mono_ns();
        if (now >= deadline) {
            r->timed_out = true;
            return 0;
        }
        struct cont_run e = {.timeout_ms = (unsigned)((deadline - now) / 1000000ull) + 1};
        e.dx.out_cap = e.dx.err_cap = r->output_bytes;
        json_t *cmd = step_cmd(s, (const char *const *)req->project.steps[i].argv,
                               req->project.steps[i].argc);
        int code = -1;
        struct pl_error xerr = {0};
        int rc = exec_in(s, r->id, user, cmd, r->step_env ? json_pack("[s]", r->step_env) : NULL,
                         &e, &code, &xerr);
        uint32_t ms = (uint32_t)((mono_ns() - now) / 1000000ull);
        if (rc == 0 && code < 0 && !e.timed_out) {
            /* The stream ended with no exit code: the sandbox may be gone. */
            rc = -1;
            pl_error_set(&xerr, PL_REASON_INTERNAL, "the engine gave no exit code for step %zu",
                         i + 1);
        }
        if (rc < 0) {
            pl_demux_free(&e.dx);
            /* Did the sandbox end under the step (the guest's doing), or did
             * the engine fail us? */
            char path[160];
            json_t *ins = NULL;
            snprintf(path, sizeof(path), "/containers/%s/json", r->id);
            if (api_expect(s, "GET", path, NULL, 200, &ins, err) < 0)
                return -1;
            bool running = pl_docker_state_flag(ins, "Running");
            r->oom = pl_docker_state_flag(ins, "OOMKilled");
            json_decref(ins);
            if (running) {
                *err = xerr;
                return -1;
            }
            snprintf(r->step_error, sizeof(r->step_error), "the sandbox ended %s step %zu (%s)%s",
                     e.exec_id[0] ? "during" : "before", i + 1, req->project.steps[i].name,
                     r->oom ? ": out of memory" : "");
            return 0;
        }
        if (e.timed_out) {
            pl_demux_free(&e.dx);
            r->timed_out = true;
            return 0;
        }
        struct pl_step_result *st = &r->steps[r->nsteps];
        st->name = strdup(req->project.steps[i].name);
        st->exit_code = code;
        st->duration_ms = ms;
        st->out = take(&e.dx.out, &st->out_len);
        st->err = take(&e.dx.err, &st->err_len);
        st->out_truncated = e.dx.out_total > r->output_bytes;
        st->err_truncated = e.dx.err_total > r->output_bytes;
        pl_demux_free(&e.dx);
        r->nsteps++;
        if (!st->name || !st->out || !st->err)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        if (code < 0) {
            snprintf(r->step_error, sizeof(r->step_error),
                     "the engine gave no exit code for step %zu (%s)", i + 1,
                     req->project.steps[i].name);
            return 0;
        }
        if (host_sweep(s, r->id, init_host_pid, keep, nkeep, NULL, 0, NULL, err) < 0) {
            /* Under gVisor a step can kill the sandbox's PID 1 (Linux
             * ignores it): then the sandbox is over, and that is the
             * guest's doing, not the infrastructure's. */
            char path[160];
            json_t *ins = NULL;
            snprintf(path, sizeof(path), "/containers/%s/json", r->id);
            struct pl_error ierr = {0};
            bool running = true;
            if (api_expect(s, "GET", path, NULL, 200, &ins, &ierr) == 0)
                running = pl_docker_state_flag(ins, "Running");
            json_decref(ins);
            if (running)
                return -1;
            if (i + 1 < req->project.nsteps && code == 0)
                snprintf(r->step_error, sizeof(r->step_error),
                         "the sandbox ended after step %zu (%s); step %zu could not run", i + 1,
                         req->project.steps[i].name, i + 2);
            return 0;
        }
        if (code != 0)
            break;
    }
    return 0;
}

static int run_container(struct docker_state *s, struct cont_run *r, struct pl_error *err) {
    char path[256];
    if (r->warm_id[0]) {
        /* A warm container: created and started already, its bootstrap
         * blocked on stdin.  The run begins when we attach. */
        memcpy(r->id, r->warm_id, sizeof(r->id));
    } else if (create_container(s, r->image_id, r->memory_mb, r->run_id, r->socket_dir, r->id,
                                err) < 0) {
        return -1;
    }
    if (r->gate)
        peer_gate_open(r->gate, r->id);

    int fd = -1;
    if (pl_docker_attach(s->engine, r->id, &fd, err) < 0)
        goto fail;
    uint64_t t0 = mono_ns();
    if (!r->warm_id[0]) {
        snprintf(path, sizeof(path), "/containers/%s/start", r->id);
        if (api_expect(s, "POST", path, NULL, 204, NULL, err) < 0)
            goto fail;
    }
    if (set_nonblock(fd) < 0) {
        pl_error_set(err, PL_REASON_INTERNAL, "fcntl: %s", strerror(errno));
        goto fail;
    }
    r->until_line = r->project != NULL;
    if (pump(s, r, fd, t0 + (uint64_t)r->timeout_ms * 1000000ull, err) < 0)
        goto fail;
    close(fd);
    fd = -1;
    if (r->project) {
        /* The files are written and the report is in (or the bootstrap
         * failed): the steps, then the container ends. */
        json_t *rep = r->timed_out ? NULL : report_line(&r->dx.out);
        if (json_object_get(rep, "setup") && !json_object_get(rep, "setup_failed")) {
            json_t *ins = NULL;
            snprintf(path, sizeof(path), "/containers/%s/json", r->id);
            if (api_expect(s, "GET", path, NULL, 200, &ins, err) < 0) {
                json_decref(rep);
                goto fail;
            }
            pid_t init_pid =
                (pid_t)json_integer_value(json_object_get(json_object_get(ins, "State"), "Pid"));
            json_decref(ins);
            if (project_steps(s, r, t0 + (uint64_t)r->timeout_ms * 1000000ull, init_pid, NULL, 0,
                              err) < 0) {
                json_decref(rep);
                goto fail;
            }
        }
        json_decref(rep);
        if (end_container(s, r->id) < 0) {
            pl_error_set(err, PL_REASON_INTERNAL, "docker: cannot end the project's container");
            goto fail;
        }
    }

    /* The guest may close its output and keep running: the wait is bounded
     * by the deadline too, and a guest still running then is killed. */
    json_t *w = NULL;
    snprintf(path, sizeof(path), "/containers/%s/wait?condition=not-running", r->id);
    uint64_t deadline = t0 + (uint64_t)r->timeout_ms * 1000000ull, now = mono_ns();
    if (!r->timed_out && now < deadline) {
        long st = 0;
        long wait_ms = (long)((deadline - now) / 1000000ull) + 1;
        struct pl_error werr = {0};
        if (pl_docker_call(s->engine, "POST", path, NULL, wait_ms, &st, &w, &werr) == 0 &&
            st == 200)
            goto waited;
        json_decref(w);
        w = NULL;
        /* Not exited by the deadline (or the call failed): kill, then wait. */
        if (end_container(s, r->id) == 0)
            r->timed_out = mono_ns() >= deadline;
    }
    if (api_expect(s, "POST", path, NULL, 200, &w, err) < 0)
        goto fail;
waited:
    r->exit_code = pl_docker_wait_code(w);
    json_decref(w);
    json_t *ins = NULL;
    snprintf(path, sizeof(path), "/containers/%s/json", r->id);
    if (api_expect(s, "GET", path, NULL, 200, &ins, err) < 0)
        goto fail;
    r->oom = pl_docker_state_flag(ins, "OOMKilled");
    json_decref(ins);
    /* The engine's word is not the end: the host proves nothing of the run
     * lives, and an end nobody's process gives (the engine's -1 when a
     * guest made its PID 1 unkillable to the runtime) is infrastructure. */
    int gone = host_prove_gone(s, r->id);
    if (gone != 0) {
        pl_error_set(err, PL_REASON_INTERNAL,
                     "the run's container ended while its processes still ran on the host "
                     "(they %s); its result cannot be trusted",
                     gone > 0 ? "were killed" : "could not all be killed");
        goto fail;
    }
    if (!r->project && (r->exit_code < 0 || r->exit_code > 255)) {
        pl_error_set(err, PL_REASON_INTERNAL,
                     "the engine reported exit code %d, which no process can return; the run's "
                     "end cannot be trusted",
                     r->exit_code);
        goto fail;
    }
    reap_later(s, r->id);
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    reap_later(s, r->id);
    return -1;
}

/* ---- the warm pool ---------------------------------------------------------- */

static void random_hex(char *out, size_t nbytes) {
    static const char hex[] = "0123456789abcdef";
    unsigned char b[16] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, b, nbytes > 16 ? 16 : nbytes) < 0)
            memset(b, 0, sizeof(b));
        close(fd);
    }
    for (size_t i = 0; i < nbytes && i < 16; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[2 * (nbytes > 16 ? 16 : nbytes)] = '\0';
}

static int start_warm(struct docker_state *s, int which, char ret_id[72]) {
    char run_id[40] = "warm-";
    random_hex(run_id + 5, 12);
    struct pl_error e = {0};
    if (create_container(s, which ? s->project_id : s->snippet_id, s->default_memory_mb, run_id,
                         NULL, ret_id, &e) < 0)
        return -1;
    char path[128];
    snprintf(path, sizeof(path), "/containers/%s/start", ret_id);
    if (api_expect(s, "POST", path, NULL, 204, NULL, &e) < 0) {
        reap_later(s, ret_id);
        return -1;
    }
    return 0;
}

/*
 * Drop every waiting container.  Called whenever the engine failed us: a
 * container started before an engine restart can still be listed as
 * running (containerd kept it) while its stdin is wired to nothing.
 */
static void flush_warm(struct docker_state *s) {
    char ids[2 * WARM_MAX][72];
    unsigned n = 0;
    pthread_mutex_lock(&s->lock);
    for (int w = 0; w < 2; w++) {
        for (unsigned i = 0; i < s->nwarm[w]; i++)
            memcpy(ids[n++], s->warm[w][i], 72);
        s->nwarm[w] = 0;
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    for (unsigned i = 0; i < n; i++)
        reap_later(s, ids[i]);
}

static void *warmer_main(void *arg) {
    struct docker_state *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->warm_stop) {
        int which = s->nwarm[0] < s->set.warm ? 0 : s->nwarm[1] < s->set.warm ? 1 : -1;
        if (which < 0) {
            /* Full: look at the engine once a second; if it went away, what
             * waits may be unusable when it comes back. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT && !s->warm_stop) {
                pthread_mutex_unlock(&s->lock);
                long st = 0;
                struct pl_error e = {0};
                if (pl_docker_call(s->engine, "GET", "/_ping", NULL, 2000, &st, NULL, &e) < 0 ||
                    st != 200)
                    flush_warm(s);
                pthread_mutex_lock(&s->lock);
            }
            continue;
        }
        pthread_mutex_unlock(&s->lock);
        char id[72];
        int r = start_warm(s, which, id);
        pthread_mutex_lock(&s->lock);
        if (r < 0) {
            /* The engine may be away: try again in a second. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&s->cond, &s->lock, &ts);
            continue;
        }
        if (s->warm_stop || s->nwarm[which] >= s->set.warm) {
            pthread_mutex_unlock(&s->lock);
            reap_later(s, id);
            pthread_mutex_lock(&s->lock);
            continue;
        }
        memcpy(s->warm[which][s->nwarm[which]++], id, sizeof(id));
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Take a warm container for a run at the default allowance, if one is up. */
static bool take_warm(struct docker_state *s, int which, unsigned memory_mb, char ret_id[72]) {
    if (!s->set.warm || memory_mb != s->default_memory_mb)
        return false;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        bool have = s->nwarm[which] > 0;
        if (have)
            memcpy(ret_id, s->warm[which][--s->nwarm[which]], 72);
        pthread_cond_broadcast(&s->cond); /* the warmer refills */
        pthread_mutex_unlock(&s->lock);
        if (!have)
            return false;
        /* One that died (e.g. the engine restarted) is dropped, not used. */
        char path[128];
        snprintf(path, sizeof(path), "/containers/%s/json", ret_id);
        json_t *ins = NULL;
        struct pl_error e = {0};
        bool running = api_expect(s, "GET", path, NULL, 200, &ins, &e) == 0 &&
                       pl_docker_state_flag(ins, "Running");
        json_decref(ins);
        if (running)
            return true;
        reap_later(s, ret_id);
    }
}

static void warm_stop_and_drain(struct docker_state *s) {
    if (!s->warmer_started)
        return;
    pthread_mutex_lock(&s->lock);
    s->warm_stop = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->warmer, NULL);
    s->warmer_started = false;
    for (int w = 0; w < 2; w++)
        for (unsigned i = 0; i < s->nwarm[w]; i++)
            reap_later(s, s->warm[w][i]);
    s->nwarm[0] = s->nwarm[1] = 0;
}

/* ---- the startup proof ------------------------------------------------------ */

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

static void canary_handler(void *ud, const struct pl_http_request *req,
                           struct pl_http_response *resp) {
    (void)ud;
    (void)req;
    resp->status = 200;
    resp->body = "pong\n";
    resp->body_len = 5;
}

static int mkdir_p(const char *path, mode_t mode) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, mode) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    return mkdir(tmp, mode) < 0 && errno != EEXIST ? -1 : 0;
}

/*
 * SANDBOX_DOCKER_RUN_DIR/<instance>: root's, traverse-only for others (each
 * run's or session's directory below it is its sandbox uid's alone).
 */
static int make_instance_dir(struct docker_state *s, struct pl_error *err) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%.2000s/%s", s->set.run_dir, s->set.instance);
    if (mkdir_p(dir, 0711) < 0 || chmod(dir, 0711) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
    return 0;
}

/* Remove path: a directory of plimsoll's making (sockets, a "call"
 * subdirectory), depth-limited; symlinks are unlinked, never followed. */
static void remove_tree(const char *path, int depth) {
    DIR *dir = opendir(path);
    if (dir) {
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char sub[PATH_MAX];
            snprintf(sub, sizeof(sub), "%.3800s/%.255s", path, e->d_name);
            struct stat st;
            if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode) && depth > 0)
                remove_tree(sub, depth - 1);
            else
                unlink(sub);
        }
        closedir(dir);
    }
    rmdir(path);
}

/* A daemon killed with SIGKILL leaves its per-run and per-session
 * directories (broker sockets) behind: remove this instance's, and only
 * those (run-*, session-*, canary-*). */
static void delete_stale_dirs(struct docker_state *s) {
    char base[PATH_MAX];
    snprintf(base, sizeof(base), "%.2000s/%s", s->set.run_dir, s->set.instance);
    DIR *dir = opendir(base);
    if (!dir)
        return;
    struct dirent *e;
    unsigned n = 0;
    while ((e = readdir(dir))) {
        if (strncmp(e->d_name, "run-", 4) != 0 && strncmp(e->d_name, "session-", 8) != 0 &&
            strncmp(e->d_name, "canary-", 7) != 0)
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%.3800s/%.255s", base, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            remove_tree(path, 2);
            n++;
        }
    }
    closedir(dir);
    if (n)
        fprintf(stderr, "plimsolld: docker: removed %u directories left by instance %s\n", n,
                s->set.instance);
}

static int canary_start(struct docker_state *s, struct canary *c, struct pl_error *err) {
    memset(c, 0, sizeof(*c));
    peer_gate_init(&c->gate, s);
    c->gate_ready = true;
    char rnd[9];
    random_hex(rnd, 4);
    snprintf(c->dir, sizeof(c->dir), "%.2000s/%s/canary-%s", s->set.run_dir, s->set.instance, rnd);
    if (make_instance_dir(s, err) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "SANDBOX_DOCKER_RUN_DIR: %s", err->message);
    struct pl_broker_sock_opts o = {.dir = c->dir,
                                    .sock_name = PL_BROKER_SOCKET_NAME,
                                    .access = sandbox_access(s, &c->gate),
                                    .handler = canary_handler};
    char msg[256] = "";
    if (pl_broker_sock_start(&o, &c->sock, msg, sizeof(msg)) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "SANDBOX_DOCKER_RUN_DIR: canary socket: %s",
                            msg);
    return 0;
}

static void canary_stop(struct canary *c) {
    pl_broker_sock_stop(c->sock);
    c->sock = NULL;
    if (c->gate_ready)
        peer_gate_destroy(&c->gate);
    c->gate_ready = false;
}

static bool has_opt(const char *opts, const char *want) {
    size_t n = strlen(want);
    for (const char *p = opts; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && memcmp(p, want, n) == 0)
            return true;
        p = comma ? comma + 1 : NULL;
    }
    return false;
}

/* Judge one probe report against the run configuration. */
static int judge_probe(struct docker_state *s, const char *image, const json_t *rep,
                       json_t *ret_langs, struct pl_error *err) {
    bool runsc = strcmp(s->set.runtime, "runsc") == 0;
#define REFUSE(...)                                                                                \
    do {                                                                                           \
        char m_[400];                                                                              \
        snprintf(m_, sizeof(m_), __VA_ARGS__);                                                     \
        return pl_error_set(err, PL_REASON_INTERNAL,                                               \
                            "SANDBOX_PROVIDER=docker: startup proof with %s failed: %s", image,    \
                            m_);                                                                   \
    } while (0)
    if (!rep)
        REFUSE("the canary container gave no report");
    if (json_integer_value(json_object_get(rep, "uid")) != (json_int_t)s->set.uid)
        REFUSE("the guest does not run as uid %u (SANDBOX_DOCKER_UID)", s->set.uid);
    /* Mounts. */
    const char *mi = json_string_value(json_object_get(rep, "mountinfo"));
    bool root_ro = false, saw_tmp = false, saw_work = false;
    char *copy = strdup(mi ? mi : "");
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[12] = {0};
        int nf = 0;
        char *fs = NULL;
        for (char *tok = strtok_r(line, " ", &fs); tok && nf < 12; tok = strtok_r(NULL, " ", &fs))
            f[nf++] = tok;
        if (nf < 6)
            continue;
        const char *mp = f[4], *opts = f[5];
        int dash = -1;
        for (int i = 6; i < nf; i++)
            if (strcmp(f[i], "-") == 0) {
                dash = i;
                break;
            }
        const char *fstype = dash > 0 && dash + 1 < nf ? f[dash + 1] : "";
        if (strcmp(mp, "/") == 0)
            root_ro = has_opt(opts, "ro");
        bool is_tmp = strcmp(mp, "/tmp") == 0, is_work = strcmp(mp, "/work") == 0;
        if (is_tmp || is_work) {
            unsigned want_mb = is_tmp ? s->set.tmp_mb : s->set.work_mb;
            json_int_t size =
                json_integer_value(json_object_get(json_object_get(rep, "sizes"), mp));
            if (strcmp(fstype, "tmpfs") != 0 || !has_opt(opts, "rw") || !has_opt(opts, "noexec") ||
                (!runsc && !has_opt(opts, "nosuid")) || (!runsc && !has_opt(opts, "nodev")) ||
                size != (json_int_t)want_mb << 20) {
                free(copy);
                REFUSE("%s is not a %u MiB tmpfs marked rw,noexec%s (type %s, options %s, size "
                       "%lld)",
                       mp, want_mb, runsc ? "" : ",nosuid,nodev", fstype, opts, (long long)size);
            }
            if (is_tmp)
                saw_tmp = true;
            else
                saw_work = true;
        }
    }
    free(copy);
    if (!root_ro)
        REFUSE("the root filesystem is not read-only");
    if (!saw_tmp || !saw_work)
        REFUSE("/tmp or /work is not mounted");
    /* Writes land only in the two tmpfs. */
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(rep, "writes"), k, v) {
        bool ours = strcmp(k, "/tmp") == 0 || strcmp(k, "/work") == 0;
        bool written = strcmp(json_string_value(v) ? json_string_value(v) : "", "written") == 0;
        if (written != ours)
            REFUSE("a write at %s %s", k, written ? "succeeded" : "failed");
    }
    json_object_foreach(json_object_get(rep, "exec"), k, v) {
        const char *r = json_string_value(v);
        if (!r || strncmp(r, "ran", 3) == 0)
            REFUSE("a program copied into %s could be run", k);
    }
    if (json_object_size(json_object_get(rep, "exec")) != 2)
        REFUSE("the exec test did not run in both writable areas");
    /* Privileges. */
    const char *status = json_string_value(json_object_get(rep, "status"));
    if (!status || !strstr(status, "CapEff:\t0000000000000000"))
        REFUSE("the guest holds capabilities");
    if (!strstr(status, "Seccomp:\t2"))
        REFUSE("no seccomp filter is in force (under runsc, configure --oci-seccomp)");
    if (!runsc && !strstr(status, "NoNewPrivs:\t1"))
        REFUSE("no_new_privs is not set");
    /* The broker socket path works. */
    const char *sock = json_string_value(json_object_get(rep, "socket"));
    if (!sock || strncmp(sock, "pong", 4) != 0)
        REFUSE("the mounted Unix socket could not be reached (%s)%s", sock ? sock : "?",
               runsc ? "; runsc needs --host-uds=open" : "");
    /* The kernel. */
    const char *ver = json_string_value(json_object_get(rep, "version"));
    bool foreign = ver && strncmp(ver, s->host_version, strlen(ver) > 0 ? strlen(ver) - 1 : 0);
    if (runsc && !foreign)
        REFUSE("runsc is registered but the canary answered with the host's kernel");
    if (!runsc && foreign)
        REFUSE("runc reported a kernel other than the host's");
    /* Interpreters the image proved (each started and ran a thread). */
    json_object_foreach(json_object_get(rep, "interpreter_errors"), k, v) {
        REFUSE("%s does not run in this sandbox: %.200s%s", k,
               json_string_value(v) ? json_string_value(v) : "?",
               runsc && !s->set.seccomp
                   ? " (under runsc the engine's default seccomp profile breaks thread creation; "
                     "leave SANDBOX_DOCKER_SECCOMP unset for plimsoll's own profile)"
                   : "");
    }
    json_object_foreach(json_object_get(rep, "interpreters"), k, v) {
        if (!json_object_get(ret_langs, k))
            json_object_set(ret_langs, k, v);
    }
    return 0;
#undef REFUSE
}

static int probe_image(struct docker_state *s, const char *image, const char *image_id,
                       struct canary *can, json_t *ret_langs, struct pl_error *err) {
    json_t *h = json_pack("{s:s, s:[s, s], s:[s,s,s,s,s,s,s,s,s,s,s,s], s:s}", "kind", "probe",
                          "tmpfs", "/tmp", "/work", "write_targets", "/", "/etc", "/usr", "/var",
                          "/var/tmp", "/root", "/home", "/opt", "/srv", "/run", "/tmp", "/work",
                          "socket", "/run/plimsoll/broker.sock");
    char *line = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    struct pl_buf hdr = {0};
    pl_buf_printf(&hdr, "%zu\n%s", strlen(line), line);
    free(line);
    struct cont_run r = {.image_id = image_id,
                         .memory_mb = 256,
                         .run_id = "startup-proof",
                         .socket_dir = can->dir,
                         .parts = {hdr.data},
                         .part_len = {hdr.len},
                         .nparts = 1,
                         .timeout_ms = 60000};
    char run_id[40];
    snprintf(run_id, sizeof(run_id), "proof-%s-%.8s", strrchr(can->dir, '-') + 1, image_id + 7);
    r.run_id = run_id;
    r.gate = &can->gate;
    r.dx.out_cap = 1u << 20;
    r.dx.err_cap = 64u << 10;
    int rc = run_container(s, &r, err);
    pl_buf_free(&hdr);
    if (rc < 0) {
        pl_demux_free(&r.dx);
        char why[sizeof(err->message)];
        memcpy(why, err->message, sizeof(why));
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=docker: startup proof with %s failed: the canary "
                            "container did not run under %s: %.300s",
                            image, s->set.runtime, why);
    }
    json_t *rep = report_line(&r.dx.out);
    if (!rep && r.dx.err.len)
        fprintf(stderr, "plimsolld: docker probe stderr: %.*s\n", (int)r.dx.err.len, r.dx.err.data);
    pl_demux_free(&r.dx);
    rc = judge_probe(s, image, rep, ret_langs, err);
    json_decref(rep);
    return rc;
}

/* ---- create / destroy --------------------------------------------------------- */

static int inspect_image(struct docker_state *s, const char *setting_name, const char *ref,
                         char *ret_id, size_t idlen, struct pl_error *err) {
    char *enc = pl_docker_urlencode(ref);
    char path[600];
    snprintf(path, sizeof(path), "/images/%s/json", enc ? enc : "");
    free(enc);
    long st = 0;
    json_t *j = NULL;
    if (pl_docker_call(s->engine, "GET", path, NULL, API_TIMEOUT_MS, &st, &j, err) < 0)
        return -1;
    if (st != 200) {
        json_decref(j);
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "%s: image %s is not present in the engine (build it with "
                            "scripts/build-images)",
                            setting_name, ref);
    }
    const char *first = "";
    int bad = pl_docker_image_check(j, ret_id, idlen, &first);
    if (bad == 1) {
        pl_error_set(err, PL_REASON_INVALID_REQUEST,
                     "%s: image %s declares a VOLUME (%s): the engine would give every run an "
                     "unlimited writable host folder; refused",
                     setting_name, ref, first);
        json_decref(j);
        return -1;
    }
    if (bad) {
        json_decref(j);
        return pl_error_set(err, PL_REASON_INTERNAL, "%s: image %s has no sha256 ID", setting_name,
                            ref);
    }
    json_decref(j);
    return 0;
}

/* The runtime's registration, from GET /info. */
static int check_runtime(struct docker_state *s, char *ret_path, size_t len, json_t **ret_info,
                         struct pl_error *err) {
    json_t *info = NULL;
    if (api_expect(s, "GET", "/info", NULL, 200, &info, err) < 0)
        return -1;
    const char *path = pl_docker_runtime_path(info, s->set.runtime);
    if (!path) {
        json_decref(info);
        return pl_error_set(
            err, PL_REASON_INVALID_REQUEST,
            "SANDBOX_DOCKER_RUNTIME: the engine has no runtime \"%s\" registered%s", s->set.runtime,
            strcmp(s->set.runtime, "runsc") == 0
                ? " (add it to /etc/docker/daemon.json; see docs/providers/docker.md)"
                : "");
    }
    snprintf(ret_path, len, "%s", path);
    if (ret_info)
        *ret_info = info;
    else
        json_decref(info);
    return 0;
}

/* One container this instance may have left behind: killed, deleted, and
 * its runtime state and cgroup removed, whether or not the engine knew it. */
static void remove_leftover(const char *id, void *ud) {
    struct docker_state *s = ud;
    char cg[200];
    remove_container(s, id);
    pl_hostview_remove_runtime_state(&s->hv, id);
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    pl_hostview_remove_cgroup(&s->hv, cg);
}

/*
 * Startup: one started container (its bootstrap waiting on stdin) shows
 * the host where a container's processes live and where the runtime keeps
 * its state; both must be where the host-side proof will look.
 */
static int hostview_discover(struct docker_state *s, struct pl_error *err) {
    char run_id[40] = "hostview-", id[72] = "";
    random_hex(run_id + 9, 8);
    if (create_container(s, s->snippet_id, s->default_memory_mb, run_id, NULL, id, err) < 0)
        return -1;
    int rc = -1;
    char path[160], cg[200], got[256] = "";
    json_t *ins = NULL;
    snprintf(path, sizeof(path), "/containers/%s/start", id);
    if (api_expect(s, "POST", path, NULL, 204, NULL, err) < 0)
        goto out;
    snprintf(path, sizeof(path), "/containers/%s/json", id);
    if (api_expect(s, "GET", path, NULL, 200, &ins, err) < 0)
        goto out;
    json_int_t pid = json_integer_value(json_object_get(json_object_get(ins, "State"), "Pid"));
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    if (pid <= 0 || pl_hostview_cgroup_of_pid(&s->hv, (pid_t)pid, got, sizeof(got)) < 0 ||
        strcmp(got, cg) != 0) {
        pl_error_set(err, PL_REASON_INTERNAL,
                     "SANDBOX_PROVIDER=docker: a container's processes are not in the cgroup "
                     "plimsoll asked for (%s; found \"%s\"): the engine must use the cgroupfs "
                     "driver",
                     cg, got);
        goto out;
    }
    if (pl_hostview_find_runtime_root(&s->hv, id, err) < 0)
        goto out;
    /* An exec meets the profile too (under runsc by plimsoll's own helper). */
    if (s->set.seccomp) {
        static const char *const argv[] = {"grep", "-E", "^Seccomp:", "/proc/self/status"};
        struct cont_run e = {.timeout_ms = 20000};
        e.dx.out_cap = e.dx.err_cap = 4096;
        int code = -1;
        char user[32];
        run_user(s, user);
        if (exec_in(s, id, user, step_cmd(s, argv, 4), NULL, &e, &code, err) < 0) {
            pl_demux_free(&e.dx);
            goto out;
        }
        bool filtered = code == 0 && e.dx.out.data && strstr(e.dx.out.data, "Seccomp:\t2");
        pl_demux_free(&e.dx);
        if (!filtered) {
            pl_error_set(err, PL_REASON_INTERNAL,
                         "SANDBOX_PROVIDER=docker: a process started with docker exec has no "
                         "seccomp filter under %s (exit %d)",
                         s->set.runtime, code);
            goto out;
        }
    }
    if (s->hv.runsc) {
        long *pids = NULL;
        size_t n = 0;
        if (pl_hostview_runsc_ps(&s->hv, id, &pids, &n, err) < 0)
            goto out;
        free(pids);
        if (n < 1) {
            pl_error_set(err, PL_REASON_INTERNAL,
                         "SANDBOX_PROVIDER=docker: runsc ps listed no process in a running "
                         "sandbox");
            goto out;
        }
    }
    rc = 0;
out:
    json_decref(ins);
    if (id[0] && remove_container(s, id) < 0 && rc == 0)
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "SANDBOX_PROVIDER=docker: the startup container %.12s could not be "
                          "removed",
                          id);
    return rc;
}

static void pool_stop_and_drain(struct docker_state *s);

static void docker_destroy(void *state) {
    struct docker_state *s = state;
    if (!s)
        return;
    warm_stop_and_drain(s);
    pool_stop_and_drain(s);
    if (s->reaper_started) {
        pthread_mutex_lock(&s->lock);
        s->reaper_stop = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->reaper, NULL); /* it drains the queue before it stops */
    }
    pl_docker_engine_free(s->engine);
    free(s->set.seccomp);
    free(s->set.exec_filter_env);
    pthread_cond_destroy(&s->cond);
    pthread_cond_destroy(&s->pool_cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static int session_proof(struct docker_state *s, unsigned memory_mb, json_t *ret_langs,
                         struct pl_error *err);
static void *session_pool_main(void *arg);

static int docker_create(const struct pl_config *config, void **ret_state, struct pl_error *err) {
    struct docker_state *s = calloc(1, sizeof(*s));
    if (!s)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->max_timeout_ms = config->max_timeout_ms;
    s->default_memory_mb = config->memory_mb;
    s->session_disk_mb = config->session_disk_mb;
    s->pool_n = config->session_pool;
    pthread_cond_init(&s->pool_cond, NULL);
    json_t *langs = json_object();
    json_t *info = NULL;
    struct canary can = {0};

    if (load_settings(config, &s->set, err) < 0)
        goto fail;
    if (pl_docker_engine_new(setting(config, "DOCKER_HOST"), &s->engine, err) < 0)
        goto fail;
    long st = 0;
    if (pl_docker_call(s->engine, "GET", "/_ping", NULL, 5000, &st, NULL, err) < 0 || st != 200) {
        pl_error_set(err, PL_REASON_INTERNAL,
                     "SANDBOX_PROVIDER=docker: the engine at %s does not answer /_ping",
                     pl_docker_engine_socket(s->engine));
        goto fail;
    }
    if (check_runtime(s, s->runtime_path, sizeof(s->runtime_path), &info, err) < 0)
        goto fail;
    if (inspect_image(s, "SANDBOX_DOCKER_SNIPPET_IMAGE", s->set.snippet_image, s->snippet_id,
                      sizeof(s->snippet_id), err) < 0 ||
        inspect_image(s, "SANDBOX_DOCKER_PROJECT_IMAGE", s->set.project_image, s->project_id,
                      sizeof(s->project_id), err) < 0)
        goto fail;
    char *hv = NULL;
    if (read_small_file("/proc/version", sizeof(s->host_version) - 1, &hv) == 0) {
        snprintf(s->host_version, sizeof(s->host_version), "%s", hv);
        free(hv);
    }
    if (pthread_create(&s->reaper, NULL, reaper_main, s) == 0)
        s->reaper_started = true;
    if (check_uid_unused(&s->set, err) < 0 ||
        pl_hostview_init(&s->hv, s->set.instance, strcmp(s->set.runtime, "runsc") == 0,
                         s->runtime_path, err) < 0)
        goto fail;
    if (hostview_discover(s, err) < 0) {
        char why[sizeof(err->message)];
        snprintf(why, sizeof(why), "%s", err->message);
        pl_error_set(err, PL_REASON_INTERNAL,
                     "SANDBOX_PROVIDER=docker: startup proof: the first container under %s "
                     "failed: %.400s",
                     s->set.runtime, why);
        goto fail;
    }
    unsigned removed = pl_hostview_leftovers(&s->hv, remove_leftover, s);
    if (removed)
        fprintf(stderr,
                "plimsolld: docker: killed and removed %u containers of instance %s found in the "
                "cgroup tree or the runtime's state\n",
                removed, s->set.instance);
    removed = 0;
    if (delete_untracked(s, &removed, err) < 0)
        goto fail;
    delete_stale_dirs(s);
    if (removed)
        fprintf(stderr, "plimsolld: docker: deleted %u containers left by instance %s\n", removed,
                s->set.instance);

    if (canary_start(s, &can, err) < 0)
        goto fail;
    if (probe_image(s, s->set.snippet_image, s->snippet_id, &can, langs, err) < 0 ||
        probe_image(s, s->set.project_image, s->project_id, &can, langs, err) < 0)
        goto fail;
    canary_stop(&can);
    if (!json_object_get(langs, "python") || !json_object_get(langs, "javascript")) {
        pl_error_set(err, PL_REASON_INTERNAL,
                     "SANDBOX_PROVIDER=docker: the images must run python3 and node; the probe "
                     "found %zu of them",
                     json_object_size(langs));
        goto fail;
    }
    s->tier = strcmp(s->set.runtime, "runsc") == 0 ? PL_TIER_KERNEL : PL_TIER_CONTAINER;
    snprintf(s->engine_desc, sizeof(s->engine_desc),
             "docker %.16s, %.8s, seccomp %.40s; %.64s (%.19s); %.32s",
             pl_docker_server_version(info), s->set.runtime, s->set.seccomp_name,
             s->set.snippet_image, s->snippet_id,
             json_string_value(json_object_get(langs, "python")));
    /* langs' values read "Python 3.11.2" and "node v18.20.4". */
    snprintf(s->project_desc, sizeof(s->project_desc), "docker %.8s; %.64s (%.19s); %.32s",
             s->set.runtime, s->set.project_image, s->project_id,
             json_string_value(json_object_get(langs, "javascript")));
    if (config->max_sessions > 0) {
        json_t *cell_langs = json_array();
        int pr = session_proof(s, config->memory_mb, cell_langs, err);
        size_t k;
        json_t *e;
        json_array_foreach(cell_langs, k, e) {
            if (k < 2)
                s->session_langs[k] =
                    strcmp(json_string_value(e), "python") == 0 ? "python" : "javascript";
        }
        json_decref(cell_langs);
        if (pr < 0)
            goto fail;
        s->sessions_on = true;
        if (s->pool_n && pthread_create(&s->pool_thread, NULL, session_pool_main, s) == 0)
            s->pool_started = true;
    }
    json_decref(info);
    json_decref(langs);
    s->ready_at_ns = mono_ns();
    if (s->set.warm && pthread_create(&s->warmer, NULL, warmer_main, s) == 0)
        s->warmer_started = true;
    *ret_state = s;
    return 0;
fail:
    canary_stop(&can);
    json_decref(info);
    json_decref(langs);
    docker_destroy(s);
    return -1;
}

static void docker_info(void *state, struct pl_provider_info *ret) {
    struct docker_state *s = state;
    *ret = (struct pl_provider_info){
        .tier = s->tier,
        .runtime = s->set.runtime,
        .min_memory_mb = strcmp(s->set.runtime, "runsc") ? 6 : 16, /* engine: 6; runsc: 16 */
        .snippet = {.supported = true,
                    .engine = s->engine_desc,
                    .max_timeout_ms = s->max_timeout_ms,
                    .languages = {"python", "javascript", NULL},
                    .grants = true},
        .project = {.supported = true,
                    .engine = s->project_desc,
                    .max_timeout_ms = s->max_timeout_ms,
                    .languages = {"python", "javascript", NULL},
                    .grants = true},
        .module = {.supported = true,
                   .engine = "node WASI preview1 (node:wasi) in the snippet image",
                   .max_timeout_ms = s->max_timeout_ms},
        .session = {.supported = s->sessions_on,
                    .engine = s->sessions_on ? s->project_desc : "",
                    .max_timeout_ms = s->max_timeout_ms,
                    .languages = {s->session_langs[0], s->session_langs[1], NULL},
                    .grants = s->sessions_on},
    };
}

/* Cheap: the engine answers, the runtime is still registered at the same
 * path, both tags still name the inspected images.  Cached for a second. */
static int docker_ready(void *state, struct pl_error *err) {
    struct docker_state *s = state;
    uint64_t now = mono_ns();
    pthread_mutex_lock(&s->lock);
    bool fresh = s->ready_at_ns && now - s->ready_at_ns < READY_CACHE_NS;
    pthread_mutex_unlock(&s->lock);
    if (fresh)
        return 0;
    long st = 0;
    if (pl_docker_call(s->engine, "GET", "/_ping", NULL, 2000, &st, NULL, err) < 0 || st != 200) {
        flush_warm(s);
        return pl_error_set(err, PL_REASON_NOT_READY, "the docker engine does not answer");
    }
    char path[256], id[80];
    if (check_runtime(s, path, sizeof(path), NULL, err) < 0 || strcmp(path, s->runtime_path) != 0)
        return pl_error_set(err, PL_REASON_NOT_READY,
                            "the runtime %s is no longer registered as at startup", s->set.runtime);
    if (inspect_image(s, "SANDBOX_DOCKER_SNIPPET_IMAGE", s->set.snippet_image, id, sizeof(id),
                      err) < 0 ||
        strcmp(id, s->snippet_id) != 0 ||
        inspect_image(s, "SANDBOX_DOCKER_PROJECT_IMAGE", s->set.project_image, id, sizeof(id),
                      err) < 0 ||
        strcmp(id, s->project_id) != 0)
        return pl_error_set(err, PL_REASON_NOT_READY,
                            "an image tag no longer names the image inspected at startup");
    pthread_mutex_lock(&s->lock);
    s->ready_at_ns = now;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static void invalidate_ready(struct docker_state *s) {
    pthread_mutex_lock(&s->lock);
    s->ready_at_ns = 0;
    pthread_mutex_unlock(&s->lock);
    flush_warm(s);
}

/* ---- runs ----------------------------------------------------------------------- */

/*
 * A project's outcome.  The files report (one line, written before any
 * guest code existed; setup_report) says whether the steps could start;
 * the steps themselves came from the engine (project_steps).  A missing,
 * torn, oversized or unreadable report is protocol_error, never skipped.
 */
static void project_outcome(const struct pl_run_request *req, struct cont_run *r,
                            const char *setup_failed, bool setup_ok, const char *setup_problem,
                            struct pl_run_result *ret) {
    ret->steps = r->steps;
    ret->nsteps = r->nsteps;
    r->steps = NULL;
    r->nsteps = 0;
    int last = ret->nsteps ? ret->steps[ret->nsteps - 1].exit_code : 0;
    ret->exit_code = last;
    if (setup_failed) {
        ret->outcome = PL_OUTCOME_SETUP_FAILED;
        snprintf(ret->detail, sizeof(ret->detail), "writing the project's files failed: %.200s",
                 setup_failed);
    } else if (r->timed_out) {
        ret->outcome = PL_OUTCOME_TIMED_OUT;
        ret->exit_code = 124;
        snprintf(ret->detail, sizeof(ret->detail),
                 "the deadline of %u ms ended the run %s step %zu of %zu", r->timeout_ms,
                 setup_ok ? "during" : "before", ret->nsteps + 1, req->project.nsteps);
    } else if (!setup_ok) {
        ret->outcome = PL_OUTCOME_PROTOCOL_ERROR;
        snprintf(ret->detail, sizeof(ret->detail), "%.250s", setup_problem);
        if (r->oom)
            ret->exit_code = 137;
    } else if (r->step_error[0]) {
        ret->outcome = PL_OUTCOME_PROTOCOL_ERROR;
        snprintf(ret->detail, sizeof(ret->detail), "%.250s", r->step_error);
        if (r->oom)
            ret->exit_code = 137;
    } else {
        ret->outcome = PL_OUTCOME_COMPLETED;
        if (last != 0)
            snprintf(ret->detail, sizeof(ret->detail),
                     "step %zu (%s) exited %d; later steps did not run", ret->nsteps,
                     ret->steps[ret->nsteps - 1].name, last);
    }
}

/* The bootstrap's files report (reports.h). */
static json_t *setup_report(const struct cont_run *r, char *why, size_t len) {
    return pl_docker_files_report(r->dx.out.data, r->dx.out.len, r->dx.out_total, r->dx.out_cap,
                                  r->exit_code, why, len);
}

/*
 * Set r up for a snippet, module or project: the image, the bytes for the
 * bootstrap's stdin (the header in *hdr, a project's files in *files, which
 * r's parts point into) and the output caps.
 */
static int prepare_run(struct docker_state *s, const struct pl_run_ctx *ctx,
                       const struct pl_run_request *req, struct cont_run *r, struct pl_buf *hdr,
                       struct pl_buf *files, struct pl_error *err) {
    json_t *h = NULL;
    switch (req->kind) {
    case PL_PAYLOAD_SNIPPET:
        r->image_id = s->snippet_id;
        h = json_pack("{s:s, s:s, s:I}", "kind", "snippet", "language", req->snippet.language,
                      "code_len", (json_int_t)req->snippet.code_len);
        r->parts[1] = req->snippet.code;
        r->part_len[1] = req->snippet.code_len;
        r->parts[2] = req->snippet.stdin_data;
        r->part_len[2] = req->snippet.stdin_len;
        break;
    case PL_PAYLOAD_MODULE: {
        r->image_id = s->snippet_id;
        json_t *args = json_array();
        for (size_t i = 0; i < req->module.nargs; i++)
            json_array_append_new(args, json_string(req->module.args[i]));
        h = json_pack("{s:s, s:I, s:o}", "kind", "module", "wasm_len",
                      (json_int_t)req->module.wasm_len, "args", args);
        r->parts[1] = (const char *)req->module.wasm;
        r->part_len[1] = req->module.wasm_len;
        r->parts[2] = req->module.stdin_data;
        r->part_len[2] = req->module.stdin_len;
        break;
    }
    case PL_PAYLOAD_PROJECT: {
        r->image_id = s->project_id;
        json_t *fl = json_array();
        for (size_t i = 0; i < req->project.nfiles; i++) {
            json_array_append_new(fl, json_pack("{s:s, s:I}", "path", req->project.files[i].path,
                                                "len", (json_int_t)req->project.files[i].len));
            pl_buf_append(files, req->project.files[i].content, req->project.files[i].len);
        }
        h = json_pack("{s:s, s:o}", "kind", "project", "files", fl);
        r->parts[1] = files->data;
        r->part_len[1] = files->len;
        r->nparts = 2;
        /* The bootstrap's stdout carries one short report line; the steps'
         * output comes from their own execs. */
        r->dx.out_cap = 64u << 10;
        r->dx.err_cap = 64u << 10;
        r->project = req;
        r->output_bytes = ctx->output_bytes;
        break;
    }
    default: return pl_error_set(err, PL_REASON_INTERNAL, "docker: payload not dispatched here");
    }
    if (req->kind != PL_PAYLOAD_PROJECT) {
        /* Snippets and modules: header, the code, then the guest's stdin;
         * the guest's own output is the container's. */
        r->nparts = 3;
        r->dx.out_cap = r->dx.err_cap = ctx->output_bytes;
    }
    char *line = h ? json_dumps(h, JSON_COMPACT) : NULL;
    json_decref(h);
    if (line)
        pl_buf_printf(hdr, "%zu\n%s", strlen(line), line);
    free(line);
    r->parts[0] = hdr->data;
    r->part_len[0] = hdr->len;
    return hdr->data ? 0 : pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory");
}

/* Fill the result of a finished snippet, module or project from r. */
static int finish_run(const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                      struct cont_run *r, struct pl_run_result *ret, struct pl_error *err) {
    ret->timed_out = r->timed_out;
    ret->out_of_memory = r->oom;
    if (req->kind == PL_PAYLOAD_PROJECT) {
        if (r->files_done) {
            /* A session's call: the files exec's exit code said it. */
            project_outcome(req, r, r->files_failed[0] ? r->files_failed : NULL,
                            !r->files_failed[0], NULL, ret);
        } else {
            char why[160];
            json_t *rep = setup_report(r, why, sizeof(why));
            project_outcome(req, r, json_string_value(json_object_get(rep, "setup_failed")),
                            json_is_string(json_object_get(rep, "setup")), why, ret);
            json_decref(rep);
        }
        ret->out = calloc(1, 1);
        ret->err = take(&r->dx.err, &ret->err_len);
        if (ret->err_len > ctx->output_bytes) {
            ret->err_len = ctx->output_bytes;
            ret->err_truncated = true;
        }
        if (!ret->out || !ret->err) {
            pl_demux_free(&r->dx);
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        }
    } else {
        ret->exit_code = r->timed_out ? 124 : r->exit_code;
        ret->out = take(&r->dx.out, &ret->out_len);
        ret->err = take(&r->dx.err, &ret->err_len);
        ret->out_truncated = r->dx.out_total > ctx->output_bytes;
        ret->err_truncated = r->dx.err_total > ctx->output_bytes;
        ret->outcome = r->timed_out ? PL_OUTCOME_TIMED_OUT : PL_OUTCOME_COMPLETED;
        if (r->timed_out)
            snprintf(ret->detail, sizeof(ret->detail),
                     "the deadline of %u ms ended the run; the container was killed",
                     ctx->timeout_ms);
        else if (r->oom)
            snprintf(ret->detail, sizeof(ret->detail),
                     "out of memory: the container's limit is %u MiB; the kernel killed the "
                     "guest (exit %d)",
                     ctx->memory_mb, r->exit_code);
    }
    pl_demux_free(&r->dx);
    return 0;
}

static int docker_run(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                      struct pl_run_result *ret, struct pl_error *err) {
    struct docker_state *s = state;
    struct cont_run r = {
        .memory_mb = ctx->memory_mb, .run_id = ctx->run_id, .timeout_ms = ctx->timeout_ms};
    struct pl_buf hdr = {0}, files = {0};
    if (prepare_run(s, ctx, req, &r, &hdr, &files, err) < 0) {
        pl_buf_free(&hdr);
        pl_buf_free(&files);
        pl_demux_free(&r.dx);
        return -1;
    }
    /* A grant's broker listens in a directory of its own, bind-mounted at
     * /run/plimsoll; a warm container has no such mount, so grant runs
     * start cold.  Only this run's container may connect (peer_gate). */
    char broker_dir[PATH_MAX];
    struct peer_gate gate;
    peer_gate_init(&gate, s);
    if (ctx->broker) {
        snprintf(broker_dir, sizeof(broker_dir), "%.2000s/%s/run-%s", s->set.run_dir,
                 s->set.instance, ctx->run_id);
        struct pl_broker_sock_access acc = sandbox_access(s, &gate);
        if (make_instance_dir(s, err) < 0 ||
            pl_broker_listen(ctx->broker, broker_dir, &acc, err) < 0) {
            pl_buf_free(&hdr);
            pl_buf_free(&files);
            pl_demux_free(&r.dx);
            peer_gate_destroy(&gate);
            return -1;
        }
        r.socket_dir = broker_dir;
        r.gate = &gate;
    } else {
        take_warm(s, req->kind == PL_PAYLOAD_PROJECT ? 1 : 0, ctx->memory_mb, r.warm_id);
    }
    int rc = run_container(s, &r, err);
    /* The gate lives on this stack: nothing may ask it once we return. */
    pl_broker_unlisten(ctx->broker);
    peer_gate_destroy(&gate);
    pl_buf_free(&hdr);
    pl_buf_free(&files);
    if (rc < 0) {
        pl_demux_free(&r.dx);
        free_steps(r.steps, r.nsteps);
        invalidate_ready(s);
        return -1;
    }
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "plimsoll-%.24s", ctx->run_id);
    rc = finish_run(ctx, req, &r, ret, err);
    free_steps(r.steps, r.nsteps); /* what finish_run did not take */
    return rc;
}

/* ---- sessions (docs/sessions.md) ----------------------------------------------- */

enum { LANG_PY = 0, LANG_JS = 1 };
static const char *const lang_name[2] = {"python", "javascript"};

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
    bool pooled;           /* taken from the warm pool */
    unsigned mask;         /* the interpreters the pool started: 1 python, 2 javascript */
};

static int lang_index(const char *name) {
    return strcmp(name, "python") == 0 ? LANG_PY : LANG_JS;
}

/*
 * The container's security settings, as a digest: what must not change
 * between open and any call.  Read from the engine, not from inside.
 */
static int session_state(struct docker_state *s, const char *id, char ret_fp[65], bool *running,
                         bool *paused, struct pl_error *err) {
    char path[160];
    snprintf(path, sizeof(path), "/containers/%s/json", id);
    json_t *ins = NULL;
    if (api_expect(s, "GET", path, NULL, 200, &ins, err) < 0)
        return -1;
    int r = pl_docker_session_fp(ins, ret_fp, running, paused);
    json_decref(ins);
    return r < 0 ? pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory") : 0;
}

static json_t *agent_cmd(const char *mode, const char *arg) {
    json_t *c = json_pack("[s, s, s, s]", "python3", "-c", pl_docker_session_agent, mode);
    if (c && arg)
        json_array_append_new(c, json_string(arg));
    return c;
}

/*
 * One exec in the session's container, as uid 65534 in /work: stdin from
 * r's parts, output into r->dx, bounded by r->timeout_ms.  *ret_exit is the
 * exec's exit code (-1 when it timed out or the code is unknown).
 */
static int exec_in(struct docker_state *s, const char *container_id, const char *user, json_t *cmd,
                   json_t *env, struct cont_run *r, int *ret_exit, struct pl_error *err) {
    char path[160];
    *ret_exit = -1;
    json_t *cfg = json_pack("{s:b, s:b, s:b, s:b, s:o, s:s, s:s}", "AttachStdin", r->nparts > 0,
                            "AttachStdout", 1, "AttachStderr", 1, "Tty", 0, "Cmd", cmd,
                            "WorkingDir", "/work", "User", user);
    if (s->set.exec_filter_env) {
        if (!env)
            env = json_array();
        json_array_append_new(env, json_string(s->set.exec_filter_env));
    }
    if (cfg && env)
        json_object_set_new(cfg, "Env", env);
    else
        json_decref(env);
    if (!cfg)
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory");
    snprintf(path, sizeof(path), "/containers/%s/exec", container_id);
    json_t *created = NULL;
    int rc = api_expect(s, "POST", path, cfg, 201, &created, err);
    json_decref(cfg);
    if (rc < 0)
        return -1;
    char eid[80];
    snprintf(eid, sizeof(eid), "%s", json_string_value(json_object_get(created, "Id")) ?: "");
    json_decref(created);
    snprintf(path, sizeof(path), "/exec/%s/start", eid);
    int fd = -1;
    if (pl_docker_hijack(s->engine, path, "{\"Detach\":false,\"Tty\":false}", &fd, err) < 0)
        return -1;
    uint64_t t0 = mono_ns();
    r->exec = true;
    snprintf(r->id, sizeof(r->id), "%s", container_id);
    snprintf(r->exec_id, sizeof(r->exec_id), "%s", eid);
    if (set_nonblock(fd) < 0 ||
        pump(s, r, fd, t0 + (uint64_t)r->timeout_ms * 1000000ull, err) < 0) {
        close(fd);
        if (!err->message[0])
            pl_error_set(err, PL_REASON_INTERNAL, "docker exec: %s", strerror(errno));
        return -1;
    }
    close(fd);
    if (r->timed_out)
        return 0;
    /* The stream ends as the process does; the engine may record its exit
     * a moment later. */
    snprintf(path, sizeof(path), "/exec/%s/json", eid);
    for (int i = 0; i < 100; i++) {
        json_t *ins = NULL;
        long st = 0;
        if (pl_docker_call(s->engine, "GET", path, NULL, API_TIMEOUT_MS, &st, &ins, err) < 0)
            return -1;
        if (st == 404) {
            /* The exec went with its container (the guest ended the
             * sandbox): no exit code; the caller decides. */
            json_decref(ins);
            return 0;
        }
        if (st != 200) {
            pl_error_set(err, PL_REASON_INTERNAL, "docker: GET %s answered %ld: %.200s", path, st,
                         pl_docker_message(ins));
            json_decref(ins);
            return -1;
        }
        *ret_exit = pl_docker_exec_exit(ins);
        bool running = json_is_true(json_object_get(ins, "Running"));
        json_decref(ins);
        if (!running)
            break;
        usleep(10000);
    }
    return 0;
}

/*
 * Run a trusted agent mode and take its report: exit 0 and exactly one JSON
 * line, nothing before or after.  Other processes of the sandbox's uid may
 * be able to add bytes to the exec's output (under gVisor even after the
 * agent made itself non-dumpable; see docs/sessions.md); added bytes make
 * the report unreadable, never a different report.
 */
static int agent_json(struct docker_state *s, struct dsession *d, json_t *cmd, unsigned gid_off,
                      json_t **ret, struct pl_error *err) {
    struct cont_run r = {.timeout_ms = 20000};
    r.dx.out_cap = 1u << 20;
    r.dx.err_cap = 64u << 10;
    int code = -1;
    char mode[16];
    snprintf(mode, sizeof(mode), "%s", json_string_value(json_array_get(cmd, 3)) ?: "?");
    /* A trusted mode runs with a group of its own: no guest process may
     * open its descriptors or memory (it still may signal it: same uid). */
    char user[32];
    user_spec(&s->set, gid_off, user);
    int rc = exec_in(s, d->id, user, cmd, NULL, &r, &code, err);
    json_t *j = NULL;
    if (rc == 0 && code == 0 && !r.timed_out)
        j = pl_docker_agent_report(r.dx.out.data, r.dx.out.len, "");
    if (rc == 0 && !j)
        pl_error_set(err, PL_REASON_INTERNAL,
                     "session agent %s: no well-formed report (exit %d%s): %.200s", mode, code,
                     r.timed_out ? ", timed out" : "", r.dx.err.data ? r.dx.err.data : "");
    pl_demux_free(&r.dx);
    if (!j)
        return -1;
    *ret = j;
    return 0;
}

/* Start a language's interpreter; its pid and start time come from the
 * launcher, which runs no guest code (docs/sessions.md). */
/*
 * The cell uplink.  Each kept interpreter connects out to dir/cells.sock
 * (/run/plimsoll/cells.sock inside, the session's read-only mount) before
 * it listens, and greets with its language and the token its launch was
 * given in the exec's environment.  Cells then travel over that connection
 * with the agent's framing (docs/sessions.md), with no exec per cell.  What
 * comes back is the interpreter's output, guest data like any cell's; the
 * daemon bounds it (caps, deadline) and trusts nothing in it.  Without an
 * uplink (it failed, or the cell carries files) a cell goes through an exec
 * as before.
 */
#define UPLINK_NAME "cells.sock"
#define UPLINK_MAX_FRAME (64u << 20)

static void uplink_path(const struct dsession *d, char *buf, size_t len) {
    snprintf(buf, len, "%.4000s/" UPLINK_NAME, d->dir);
}

static void uplink_listen(struct dsession *d) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char path[PATH_MAX];
    uplink_path(d, path, sizeof(path));
    if (strlen(path) >= sizeof(sa.sun_path))
        return;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return;
    unlink(path);
    /* The sandbox's uid alone may connect (and the gate checks the peer). */
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        chown(path, (uid_t)d->s->set.uid, (gid_t)(d->s->set.uid + GID_RUN)) < 0 ||
        chmod(path, 0600) < 0 || listen(fd, 64) < 0) {
        close(fd);
        unlink(path);
        return;
    }
    d->lfd = fd;
}

static void uplink_drop(struct dsession *d, int lang) {
    if (d->in[lang].fd >= 0)
        close(d->in[lang].fd);
    d->in[lang].fd = -1;
}

static void uplink_close(struct dsession *d) {
    for (int i = 0; i < 2; i++)
        uplink_drop(d, i);
    if (d->lfd >= 0) {
        char path[PATH_MAX];
        uplink_path(d, path, sizeof(path));
        close(d->lfd);
        unlink(path);
    }
    d->lfd = -1;
}

/* Wait for fd to be ready for events until deadline; 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, uint64_t deadline) {
    for (;;) {
        uint64_t now = mono_ns();
        if (now >= deadline)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int ms = (int)((deadline - now) / 1000000ull) + 1;
        int r = poll(&p, 1, ms);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* Read exactly n bytes: 1 done, 0 timed out, -1 EOF or error. */
static int read_full(int fd, void *buf, size_t n, uint64_t deadline) {
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = read(fd, p, n);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        } else if (k == 0) {
            return -1;
        } else if (errno == EAGAIN || errno == EINTR) {
            int w = wait_fd(fd, POLLIN, deadline);
            if (w <= 0)
                return w;
        } else {
            return -1;
        }
    }
    return 1;
}

/* Write all of buf: 1 done, 0 timed out, -1 error; *written counts what went. */
static int write_full(int fd, const void *buf, size_t n, uint64_t deadline, size_t *written) {
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            *written += (size_t)k;
        } else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
            int w = wait_fd(fd, POLLOUT, deadline);
            if (w <= 0)
                return w;
        } else {
            return -1;
        }
    }
    return 1;
}

/*
 * After a launch: take the connection the launcher greeted with.  Every
 * connection waiting on the cell socket is judged: its peer must pass the
 * session's gate (the sandbox's cgroup) and, under runc where the peer is
 * the connecting process itself, run with the launched language's group
 * (only the launcher has it now: it ended every other process of it);
 * then its greeting must be "LANG TOKEN" with this launch's token,
 * compared in constant time.  Exactly one may match; anything else is
 * closed.  Two matches would mean the token leaked: the session ends.
 */
static int uplink_accept(struct dsession *d, int lang, const char *token, struct pl_error *err) {
    uplink_drop(d, lang);
    if (d->lfd < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "the session's cell socket is not open");
    char want[128];
    int wn = snprintf(want, sizeof(want), "%s %s", lang_name[lang], token);
    uint64_t deadline = mono_ns() + 2000000000ull;
    int found = -1;
    unsigned good = 0;
    gid_t lang_gid = (gid_t)(d->s->set.uid + (lang == LANG_PY ? GID_PY : GID_JS));
    for (;;) {
        int fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                break;
            if (good > 0 || wait_fd(d->lfd, POLLIN, deadline) != 1)
                break;
            continue;
        }
        struct ucred cr = {0};
        socklen_t cl = sizeof(cr);
        bool peer = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 &&
                    peer_gate_check(&d->gate, fd, cr.pid, cr.uid, cr.gid) &&
                    (d->s->hv.runsc || cr.gid == lang_gid);
        unsigned char h[5];
        char got[128];
        uint32_t n = 0;
        uint64_t greet_by = mono_ns() + 500000000ull;
        if (peer && read_full(fd, h, 5, greet_by) == 1 && h[0] == 'H' &&
            (n = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4]) ==
                (uint32_t)wn &&
            read_full(fd, got, n, greet_by) == 1) {
            unsigned char diff = 0;
            for (uint32_t i = 0; i < n; i++)
                diff |= (unsigned char)(got[i] ^ want[i]);
            if (diff == 0) {
                good++;
                if (found < 0) {
                    found = fd;
                    continue;
                }
            }
        }
        close(fd); /* not the launcher: an impostor, or a second claim */
    }
    if (good == 1) {
        d->in[lang].fd = found;
        return 0;
    }
    if (found >= 0)
        close(found);
    return pl_error_set(err, PL_REASON_INTERNAL,
                        good ? "the %s interpreter's cell channel was claimed twice"
                             : "the %s interpreter's launcher did not greet the cell socket",
                        lang_name[lang]);
}

enum uplink_end { UPLINK_UNUSABLE, UPLINK_RAN, UPLINK_ENDED, UPLINK_TIMED_OUT };

/* One cell over the uplink.  UPLINK_UNUSABLE: nothing was sent, use an
 * exec.  Otherwise *status (0 ran, 1 raised) and the output in dx. */
static enum uplink_end uplink_cell(struct dsession *d, int lang, const char *code, size_t len,
                                   uint64_t deadline, struct pl_demux *dx, int *status) {
    int fd = d->in[lang].fd;
    unsigned char junk[4096];
    ssize_t k;
    /* Whatever the interpreter wrote between cells is not this cell's. */
    int rounds = 0; /* bounded: an interpreter that never stops writing loses its uplink */
    while ((k = read(fd, junk, sizeof(junk))) > 0 && ++rounds < 256)
        ;
    if (k > 0) {
        uplink_drop(d, lang);
        return UPLINK_UNUSABLE;
    }
    if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
        uplink_drop(d, lang);
        return UPLINK_UNUSABLE;
    }
    unsigned char h[5] = {'C', (unsigned char)(len >> 24), (unsigned char)(len >> 16),
                          (unsigned char)(len >> 8), (unsigned char)len};
    size_t sent = 0;
    int w = write_full(fd, h, 5, deadline, &sent);
    if (w == 1)
        w = write_full(fd, code, len, deadline, &sent);
    if (w < 0 && sent == 0) {
        uplink_drop(d, lang);
        return UPLINK_UNUSABLE;
    }
    if (w <= 0)
        return w == 0 ? UPLINK_TIMED_OUT : UPLINK_ENDED;
    for (;;) {
        int r = read_full(fd, h, 5, deadline);
        if (r <= 0)
            return r == 0 ? UPLINK_TIMED_OUT : UPLINK_ENDED;
        uint32_t n = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
        if ((h[0] != 'O' && h[0] != 'E' && h[0] != 'X') || n > UPLINK_MAX_FRAME ||
            (h[0] == 'X' && n > 8))
            return UPLINK_ENDED; /* not the agent's framing: the channel is lost */
        if (h[0] == 'X') {
            char st[9] = {0};
            r = read_full(fd, st, n, deadline);
            if (r <= 0)
                return r == 0 ? UPLINK_TIMED_OUT : UPLINK_ENDED;
            *status = strcmp(st, "0") == 0 ? 0 : 1;
            return UPLINK_RAN;
        }
        struct pl_buf *b = h[0] == 'O' ? &dx->out : &dx->err;
        size_t cap = h[0] == 'O' ? dx->out_cap : dx->err_cap;
        uint64_t *total = h[0] == 'O' ? &dx->out_total : &dx->err_total;
        while (n > 0) {
            size_t chunk = n < sizeof(junk) ? n : sizeof(junk);
            r = read_full(fd, junk, chunk, deadline);
            if (r <= 0)
                return r == 0 ? UPLINK_TIMED_OUT : UPLINK_ENDED;
            size_t keep = b->len < cap ? cap - b->len : 0;
            if (keep > chunk)
                keep = chunk;
            if (keep && pl_buf_append(b, junk, keep) < 0)
                return UPLINK_ENDED;
            *total += chunk;
            n -= (uint32_t)chunk;
        }
    }
}

/*
 * The launcher's exchange, one exec as the language's group: it says
 * "ready" once it has ended every other process of that group; only then
 * does the token go to its stdin (the exec's own stream, which nothing in
 * the sandbox can read: the launcher's group is alone and others are
 * refused its /proc).  It greets the cell socket, starts the interpreter
 * and reports one JSON line; while it waits for the end of its stdin, the
 * daemon takes the greeting (uplink_accept: its peer is the launcher,
 * alive); then the daemon closes the stream and the launcher exits 0.
 */
static int launch_exchange(struct docker_state *s, struct dsession *d, int lang, const char *token,
                           json_t **ret, struct pl_error *err) {
    char user[32], path[160];
    user_spec(&s->set, lang == LANG_PY ? GID_PY : GID_JS, user);
    json_t *cfg =
        json_pack("{s:b, s:b, s:b, s:b, s:o, s:s, s:s}", "AttachStdin", 1, "AttachStdout", 1,
                  "AttachStderr", 1, "Tty", 0, "Cmd", agent_cmd("launch", lang_name[lang]),
                  "WorkingDir", "/work", "User", user);
    if (cfg && s->set.exec_filter_env)
        json_object_set_new(cfg, "Env", json_pack("[s]", s->set.exec_filter_env));
    if (!cfg)
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory");
    snprintf(path, sizeof(path), "/containers/%s/exec", d->id);
    json_t *created = NULL;
    int rc = api_expect(s, "POST", path, cfg, 201, &created, err);
    json_decref(cfg);
    if (rc < 0)
        return -1;
    char eid[80];
    snprintf(eid, sizeof(eid), "%s", json_string_value(json_object_get(created, "Id")) ?: "");
    json_decref(created);
    snprintf(path, sizeof(path), "/exec/%s/start", eid);
    int fd = -1;
    if (pl_docker_hijack(s->engine, path, "{\"Detach\":false,\"Tty\":false}", &fd, err) < 0)
        return -1;
    struct pl_demux dx = {.out_cap = 64u << 10, .err_cap = 64u << 10};
    uint64_t deadline = mono_ns() + 30000000000ull;
    bool sent = false, accepted = false;
    json_t *j = NULL;
    unsigned char buf[4096];
    rc = set_nonblock(fd);
    while (rc == 0) {
        int w = wait_fd(fd, POLLIN, deadline);
        if (w <= 0) {
            rc = pl_error_set(err, PL_REASON_INTERNAL, "the %s launcher did not finish in 30 s",
                              lang_name[lang]);
            break;
        }
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            break;
        if (pl_demux_feed(&dx, buf, (size_t)n) < 0) {
            rc = pl_error_set(err, PL_REASON_INTERNAL, "docker exec stream: malformed frame");
            break;
        }
        const char *o = dx.out.data;
        size_t len = dx.out.len;
        if (!sent && len >= 6) {
            if (memcmp(o, "ready\n", 6) != 0)
                break; /* not the launcher's first word: judged below */
            char line[80];
            int ln = snprintf(line, sizeof(line), "%s\n", token);
            size_t wrote = 0;
            if (write_full(fd, line, (size_t)ln, deadline, &wrote) != 1) {
                rc = pl_error_set(err, PL_REASON_INTERNAL, "the %s launcher took no token",
                                  lang_name[lang]);
                break;
            }
            sent = true;
        }
        if (sent && !accepted && len > 7 && o[len - 1] == '\n') {
            /* The report: exactly one line after "ready". */
            j = pl_docker_agent_report(o, len, "ready\n");
            if (!j)
                break;
            accepted = true;
            if (json_is_integer(json_object_get(j, "pid")) &&
                uplink_accept(d, lang, token, err) < 0)
                rc = -1;
            shutdown(fd, SHUT_WR); /* the launcher may go */
        }
    }
    close(fd);
    int code = -1;
    snprintf(path, sizeof(path), "/exec/%s/json", eid);
    for (int k = 0; rc == 0 && k < 100; k++) {
        json_t *ins = NULL;
        if (api_expect(s, "GET", path, NULL, 200, &ins, err) < 0) {
            rc = -1;
            break;
        }
        code = pl_docker_exec_exit(ins);
        bool running = json_is_true(json_object_get(ins, "Running"));
        json_decref(ins);
        if (!running)
            break;
        usleep(10000);
    }
    /* Nothing may follow the report, even after the greeting was taken. */
    json_t *whole = pl_docker_agent_report(dx.out.data, dx.out.len, "ready\n");
    bool intact = whole != NULL;
    json_decref(whole);
    if (rc == 0 && (!accepted || !j || !intact || (code != 0 && code != 1)))
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the %s launcher gave no well-formed report (exit %d): %.200s",
                          lang_name[lang], code, dx.err.data ? dx.err.data : "");
    pl_demux_free(&dx);
    if (rc < 0) {
        uplink_drop(d, lang);
        json_decref(j);
        return -1;
    }
    *ret = j;
    return 0;
}

/*
 * The host's pid of the sandbox's process `pid` that started at `start`
 * (runc: the pid namespace's pid read from the host, in the container's
 * cgroup; runsc: gVisor's pids are all the host can name, so pid itself).
 * -1 when no such process is there.
 */
static long host_pid_of(struct docker_state *s, struct dsession *d, long pid,
                        unsigned long long start) {
    if (s->hv.runsc)
        return pid;
    char cg[200];
    pl_hostview_cgroup(&s->hv, d->id, cg, sizeof(cg));
    pid_t *procs = NULL;
    size_t n = 0;
    long found = -1;
    if (pl_hostview_procs(&s->hv, cg, &procs, &n) == 0)
        for (size_t i = 0; i < n && found < 0; i++)
            if (pl_hostview_ns_pid(procs[i]) == pid && pl_hostview_start_time(procs[i]) == start)
                found = procs[i];
    free(procs);
    return found;
}

/* Start a language's interpreter.  Its pid and start time come from the
 * launcher, which runs no guest code; its uplink is the connection the
 * launcher greeted with (docs/sessions.md). */
static int launch(struct docker_state *s, struct dsession *d, int lang, struct pl_error *err) {
    json_t *j = NULL;
    unsigned char rnd[24];
    char token[49];
    if (RAND_bytes(rnd, sizeof(rnd)) != 1)
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness for the uplink token");
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(token + 2 * i, 3, "%02x", rnd[i]);
    uplink_drop(d, lang);
    d->in[lang].up = false;
    /* Connections waiting from before this launch are nobody's: close them. */
    for (int fd; d->lfd >= 0 && (fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0;)
        close(fd);
    int rc = launch_exchange(s, d, lang, token, &j, err);
    if (rc < 0) {
        OPENSSL_cleanse(token, sizeof(token));
        return -1;
    }
    json_t *pid = json_object_get(j, "pid"), *start = json_object_get(j, "start");
    if (!json_is_integer(pid) || !json_is_integer(start)) {
        pl_error_set(err, PL_REASON_INTERNAL, "the %s interpreter did not start: %.200s",
                     lang_name[lang], json_string_value(json_object_get(j, "error")) ?: "?");
        json_decref(j);
        OPENSSL_cleanse(token, sizeof(token));
        uplink_drop(d, lang);
        return -1;
    }
    d->in[lang].pid = (long)json_integer_value(pid);
    d->in[lang].start = (unsigned long long)json_integer_value(start);
    json_decref(j);
    OPENSSL_cleanse(token, sizeof(token));
    d->in[lang].host_pid = host_pid_of(s, d, d->in[lang].pid, d->in[lang].start);
    if (d->in[lang].host_pid < 0) {
        uplink_drop(d, lang);
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the host does not see the %s interpreter the launcher reported",
                            lang_name[lang]);
    }
    d->in[lang].up = true;
    d->in[lang].fresh = true;
    return 0;
}

/* The cleanup between calls: every process but PID 1 and the kept
 * interpreters ends; the verdict decides whether the session goes on. */
static void *cleaner_main(void *arg) {
    struct dsession *d = arg;
    struct docker_state *s = d->s;
    json_t *keep = json_array();
    for (int i = 0; i < 2; i++)
        if (d->in[i].up)
            json_array_append_new(
                keep, json_pack("[I, I]", (json_int_t)d->in[i].pid, (json_int_t)d->in[i].start));
    char ipc[24];
    snprintf(ipc, sizeof(ipc), "%ld", d->ipc_last);
    char *keep_s = json_dumps(keep, JSON_COMPACT);
    json_decref(keep);
    json_t *cmd = keep_s ? json_pack("[s, s, s, s, s, s]", "python3", "-c", pl_docker_session_agent,
                                     "cleanup", keep_s, ipc)
                         : NULL;
    json_t *j = NULL;
    struct pl_error err = {0};
    bool running = false, paused = false;
    char fp[65];
    long dead[256];
    size_t ndead = 0;
    if (!keep_s || !cmd || agent_json(s, d, cmd, GID_CLEAN, &j, &err) < 0) {
        /* A sandbox whose main process just ended refuses execs while the
         * engine is still tearing it down: give that a moment to show. */
        bool gone = false;
        for (int i = 0; i < 20 && !gone; i++) {
            struct pl_error serr = {0};
            gone = session_state(s, d->id, fp, &running, &paused, &serr) < 0 || !running;
            if (!gone)
                usleep(100000);
        }
        if (gone)
            snprintf(d->verdict, sizeof(d->verdict), "the sandbox's main process ended");
        else
            snprintf(d->verdict, sizeof(d->verdict),
                     "the cleanup between calls could not run: %.200s", err.message);
    } else if (!json_is_true(json_object_get(j, "clean"))) {
        snprintf(d->verdict, sizeof(d->verdict),
                 "the cleanup between calls could not prove the sandbox clean");
    } else {
        json_t *alive = json_object_get(j, "alive");
        for (int i = 0; i < 2; i++) {
            bool still = false;
            size_t k;
            json_t *e;
            json_array_foreach(alive, k, e) {
                if (json_integer_value(json_array_get(e, 0)) == d->in[i].pid)
                    still = true;
            }
            if (d->in[i].up && !still)
                uplink_drop(d, i);
            d->in[i].up = d->in[i].up && still;
        }
        if (json_is_integer(json_object_get(j, "ipc_last")))
            d->ipc_last = (long)json_integer_value(json_object_get(j, "ipc_last"));
        json_t *dl = json_object_get(j, "dead");
        for (size_t k = 0; k < json_array_size(dl) && ndead < sizeof(dead) / sizeof(dead[0]); k++)
            if (json_is_integer(json_array_get(dl, k)))
                dead[ndead++] = (long)json_integer_value(json_array_get(dl, k));
        /* /work and /tmp both persist from call to call: both count. */
        json_int_t used = json_integer_value(json_object_get(j, "work_used")) +
                          json_integer_value(json_object_get(j, "tmp_used"));
        json_int_t budget = (json_int_t)s->session_disk_mb << 20;
        if (used >= budget - (json_int_t)(64u << 10))
            snprintf(d->verdict, sizeof(d->verdict),
                     "the session's files reached its budget (SANDBOX_SESSION_DISK_MB, /work and "
                     "/tmp together)");
    }
    free(keep_s); /* cmd went to agent_json */
    json_decref(j);
    if (d->verdict[0])
        return NULL;
    /* The host's word, not the sandbox's: under runc the container's
     * cgroup, under runsc gVisor's own process list, must hold nothing but
     * PID 1 and the kept interpreters (the host's pids, their start times
     * checked); anything else is ended from the host, and a sandbox where
     * that fails ends. */
    long keep_host[2];
    size_t nkeep = 0;
    for (int i = 0; i < 2; i++) {
        if (!d->in[i].up)
            continue;
        if (!s->hv.runsc && pl_hostview_start_time((pid_t)d->in[i].host_pid) != d->in[i].start) {
            d->in[i].up = false; /* gone, or its pid is someone else's now */
            uplink_drop(d, i);
            continue;
        }
        keep_host[nkeep++] = d->in[i].host_pid;
    }
    unsigned killed = 0;
    struct pl_error herr = {0};
    if (host_sweep(s, d->id, d->init_pid, keep_host, nkeep, dead, ndead, &killed, &herr) < 0)
        snprintf(d->verdict, sizeof(d->verdict),
                 "the host could not prove the sandbox clean between calls: %.180s", herr.message);
    return NULL;
}

static void cleaner_join(struct dsession *d) {
    if (d->cleaner_running) {
        pthread_join(d->cleaner, NULL);
        d->cleaner_running = false;
    }
}

static void cleaner_start(struct dsession *d) {
    if (pthread_create(&d->cleaner, NULL, cleaner_main, d) == 0)
        d->cleaner_running = true;
    else
        snprintf(d->verdict, sizeof(d->verdict), "the cleanup between calls could not start");
}

/* Forget a session's sandbox (its container is the reaper's by now). */
static void dsession_free(struct dsession *d) {
    uplink_close(d);
    rmdir(d->dir);
    peer_gate_destroy(&d->gate);
    free(d);
}

/* Create and start one session sandbox; start the interpreters in langs. */
static int session_create(struct docker_state *s, const char *tag, unsigned memory_mb,
                          const bool langs[2], struct dsession **ret, struct pl_error *err) {
    struct dsession *d = calloc(1, sizeof(*d));
    if (!d)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    d->s = s;
    d->lfd = d->in[0].fd = d->in[1].fd = -1;
    peer_gate_init(&d->gate, s);
    snprintf(d->tag, sizeof(d->tag), "%s", tag);
    char run_id[40];
    snprintf(run_id, sizeof(run_id), "session-%s", d->tag);
    snprintf(d->dir, sizeof(d->dir), "%.2000s/%s/%s", s->set.run_dir, s->set.instance, run_id);
    /* The session's directory: the sandbox uid's, traverse only; root
     * creates the sockets in it (docs/security.md). */
    if (make_instance_dir(s, err) < 0 || mkdir(d->dir, 0700) < 0 ||
        chown(d->dir, (uid_t)s->set.uid, (gid_t)(s->set.uid + GID_RUN)) < 0 ||
        chmod(d->dir, 0100) < 0) {
        if (!err->message[0])
            pl_error_set(err, PL_REASON_INTERNAL, "cannot create %s: %s", d->dir, strerror(errno));
        rmdir(d->dir);
        peer_gate_destroy(&d->gate);
        free(d);
        return -1;
    }
    json_t *cfg = container_config(s, s->project_id, memory_mb, run_id, d->dir);
    if (!cfg) {
        dsession_free(d);
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory");
    }
    /* A run's walls; the main process is the agent, which runs no guest
     * code; the work directory is the session's disk budget. */
    json_object_set_new(cfg, "Cmd", agent_cmd("main", NULL));
    json_object_set_new(cfg, "AttachStdin", json_false());
    json_object_set_new(cfg, "OpenStdin", json_false());
    json_object_set_new(cfg, "StdinOnce", json_false());
    json_object_set_new(cfg, "AttachStdout", json_false());
    json_object_set_new(cfg, "AttachStderr", json_false());
    json_object_set_new(json_object_get(json_object_get(cfg, "HostConfig"), "Tmpfs"), "/work",
                        tmpfs_opts(&s->set, s->session_disk_mb));
    char path[256];
    snprintf(path, sizeof(path), "/containers/create?name=plimsoll-%s", run_id);
    json_t *created = NULL;
    int rc = api_expect(s, "POST", path, cfg, 201, &created, err);
    json_decref(cfg);
    if (rc < 0 || pl_docker_created_id(created, d->id) < 0) {
        json_decref(created);
        dsession_free(d);
        return rc < 0 ? -1 : pl_error_set(err, PL_REASON_INTERNAL, "docker: create gave no Id");
    }
    json_decref(created);
    peer_gate_open(&d->gate, d->id);
    bool running = false, paused = false;
    snprintf(path, sizeof(path), "/containers/%s/start", d->id);
    if (api_expect(s, "POST", path, NULL, 204, NULL, err) < 0 ||
        session_state(s, d->id, d->fp, &running, &paused, err) < 0)
        goto fail;
    if (!running) {
        pl_error_set(err, PL_REASON_INTERNAL, "the session's sandbox did not stay up");
        goto fail;
    }
    json_t *ins = NULL;
    snprintf(path, sizeof(path), "/containers/%s/json", d->id);
    if (api_expect(s, "GET", path, NULL, 200, &ins, err) < 0)
        goto fail;
    d->init_pid = (pid_t)json_integer_value(json_object_get(json_object_get(ins, "State"), "Pid"));
    json_decref(ins);
    uplink_listen(d);
    for (int lang = 0; lang < 2; lang++)
        if (langs[lang] && launch(s, d, lang, err) < 0)
            goto fail;
    *ret = d;
    return 0;
fail:
    reap_later(s, d->id);
    dsession_free(d);
    return -1;
}

/*
 * The sessions' warm pool (SANDBOX_SESSION_POOL): containers created,
 * started and running an interpreter of each language the image runs, each
 * never having run anyone's code, each given to one session.
 */
static void *session_pool_main(void *arg) {
    struct docker_state *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->pool_stop) {
        if (s->npool >= s->pool_n) {
            pthread_cond_wait(&s->pool_cond, &s->lock);
            continue;
        }
        /* The mix callers asked for, weighed against what already waits:
         * the mask whose demand has the fewest waiting sandboxes per ask. */
        unsigned mask = 3, waiting[4] = {0};
        for (unsigned i = 0; i < s->npool; i++)
            waiting[s->pool[i]->mask]++;
        double best = -1;
        for (unsigned m = 1; m <= 3; m++) {
            double score = s->demand[m] / (1.0 + waiting[m]);
            if (s->demand[m] && score > best) {
                best = score;
                mask = m;
            }
        }
        pthread_mutex_unlock(&s->lock);
        char tag[17] = "pool-";
        random_hex(tag + 5, 5);
        struct dsession *d = NULL;
        struct pl_error err = {0};
        const bool langs[2] = {mask & 1, (mask & 2) != 0};
        int r = session_create(s, tag, s->default_memory_mb, langs, &d, &err);
        if (r == 0)
            d->mask = mask;
        pthread_mutex_lock(&s->lock);
        if (r < 0) {
            /* The engine may be down: try again in a second. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&s->pool_cond, &s->lock, &ts);
            continue;
        }
        if (s->pool_stop || s->npool >= s->pool_n) {
            pthread_mutex_unlock(&s->lock);
            reap_later(s, d->id);
            dsession_free(d);
            pthread_mutex_lock(&s->lock);
            continue;
        }
        s->pool[s->npool++] = d;
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* A waiting sandbox for a session whose hint is want (a mask; 3 without a
 * hint): one that runs every hinted interpreter if any does, else any. */
static struct dsession *pool_take(struct docker_state *s, unsigned memory_mb, unsigned want) {
    struct dsession *d = NULL;
    if (!s->pool_n)
        return NULL;
    pthread_mutex_lock(&s->lock);
    s->demand[want]++;
    if (s->demand[want] > 64) /* decay: recent asks weigh more */
        for (unsigned m = 1; m <= 3; m++)
            s->demand[m] /= 2;
    if (memory_mb != s->default_memory_mb) {
        pthread_mutex_unlock(&s->lock);
        return NULL;
    }
    unsigned pick = s->npool;
    for (unsigned i = 0; i < s->npool && pick == s->npool; i++)
        if ((s->pool[i]->mask & want) == want)
            pick = i;
    if (pick == s->npool && s->npool > 0)
        pick = s->npool - 1;
    if (pick < s->npool) {
        d = s->pool[pick];
        s->pool[pick] = s->pool[--s->npool];
    }
    pthread_cond_broadcast(&s->pool_cond); /* the filler makes another */
    pthread_mutex_unlock(&s->lock);
    return d;
}

static void pool_stop_and_drain(struct docker_state *s) {
    if (!s->pool_started)
        return;
    pthread_mutex_lock(&s->lock);
    s->pool_stop = true;
    pthread_cond_broadcast(&s->pool_cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->pool_thread, NULL);
    s->pool_started = false;
    for (unsigned i = 0; i < s->npool; i++) {
        kill_container(s, s->pool[i]->id);
        reap_later(s, s->pool[i]->id);
        dsession_free(s->pool[i]);
    }
    s->npool = 0;
}

static void docker_session_close(void *state, void *session);

static int docker_session_open(void *state, const struct pl_session_open *o, void **ret_session,
                               struct pl_error *err) {
    struct docker_state *s = state;
    /* The hint starts those interpreters now, so the first cell answers at once. */
    bool langs[2] = {false, false};
    for (size_t i = 0; o->languages && o->languages[i]; i++)
        langs[lang_index(o->languages[i])] = true;
    unsigned want = (langs[0] ? 1u : 0u) | (langs[1] ? 2u : 0u);
    struct dsession *d = pool_take(s, o->memory_mb, want ? want : 3);
    if (d) {
        /* A waiting sandbox that lacks a hinted interpreter starts it now. */
        d->pooled = true;
        for (int lang = 0; lang < 2; lang++)
            if (langs[lang] && !d->in[lang].up && launch(s, d, lang, err) < 0) {
                docker_session_close(s, d);
                return -1;
            }
        *ret_session = d;
        return 0;
    }
    if (session_create(s, o->tag, o->memory_mb, langs, &d, err) < 0)
        return -1;
    *ret_session = d;
    return 0;
}

static void docker_session_close(void *state, void *session) {
    struct docker_state *s = state;
    struct dsession *d = session;
    cleaner_join(d);
    kill_container(s, d->id);
    reap_later(s, d->id);
    dsession_free(d);
}

static int docker_session_pause(void *state, void *session) {
    struct docker_state *s = state;
    struct dsession *d = session;
    cleaner_join(d);
    char path[160];
    struct pl_error err = {0};
    snprintf(path, sizeof(path), "/containers/%s/pause", d->id);
    return api_expect(s, "POST", path, NULL, 204, NULL, &err);
}

static int docker_session_resume(void *state, void *session, struct pl_error *err) {
    struct docker_state *s = state;
    struct dsession *d = session;
    char path[160];
    snprintf(path, sizeof(path), "/containers/%s/unpause", d->id);
    return api_expect(s, "POST", path, NULL, 204, NULL, err);
}

/*
 * A session call's files, written into /work by the bootstrap's files mode
 * in one exec as the calls' user (never through a symlink an earlier call
 * left).  0 with ret_failed "" when written, or why not; *ret_timed_out at
 * the deadline; < 0 when the engine failed.  The verdict is the exec's exit
 * code, read from the engine.
 */
static int session_files(struct docker_state *s, struct dsession *d, const struct pl_file *files,
                         size_t nfiles, uint64_t deadline, char *ret_failed, size_t flen,
                         bool *ret_timed_out, struct pl_error *err) {
    ret_failed[0] = '\0';
    *ret_timed_out = false;
    if (nfiles == 0)
        return 0;
    struct pl_buf hdr = {0}, body = {0};
    json_t *fl = json_array();
    for (size_t i = 0; i < nfiles; i++) {
        json_array_append_new(
            fl, json_pack("{s:s, s:I}", "path", files[i].path, "len", (json_int_t)files[i].len));
        pl_buf_append(&body, files[i].content, files[i].len);
    }
    json_t *h = json_pack("{s:s, s:o}", "kind", "files", "files", fl);
    char *line = h ? json_dumps(h, JSON_COMPACT) : NULL;
    json_decref(h);
    if (line)
        pl_buf_printf(&hdr, "%zu\n%s", strlen(line), line);
    free(line);
    uint64_t now = mono_ns();
    struct cont_run r = {.timeout_ms =
                             now < deadline ? (unsigned)((deadline - now) / 1000000ull) + 1 : 1,
                         .parts = {hdr.data, body.data},
                         .part_len = {hdr.len, body.len},
                         .nparts = 2};
    r.dx.out_cap = r.dx.err_cap = 4096;
    char user[32];
    run_user(s, user);
    int code = -1;
    int rc = hdr.data ? exec_in(s, d->id, user,
                                json_pack("[s, s, s]", "python3", "-c", pl_docker_bootstrap), NULL,
                                &r, &code, err)
                      : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    if (rc == 0) {
        *ret_timed_out = r.timed_out;
        if (!r.timed_out && code == 3)
            snprintf(ret_failed, flen, "%.*s",
                     (int)(r.dx.err.len && r.dx.err.data[r.dx.err.len - 1] == '\n'
                               ? r.dx.err.len - 1
                               : r.dx.err.len),
                     r.dx.err.data ? r.dx.err.data : "");
        else if (!r.timed_out && code != 0)
            snprintf(ret_failed, flen, "writing the files ended with exit %d", code);
    }
    pl_demux_free(&r.dx);
    pl_buf_free(&hdr);
    pl_buf_free(&body);
    return rc;
}

/*
 * A cell: its files first (an exec, when it has any), then its code to the
 * kept interpreter over the uplink, started for it when none runs.  An
 * uplink that is gone before anything was sent (the interpreter ended
 * between calls) gets a fresh interpreter, once.
 */
static int session_cell(struct docker_state *s, struct dsession *d, const struct pl_run_ctx *ctx,
                        const struct pl_run_request *req, struct pl_run_result *ret,
                        struct pl_error *err) {
    int lang = lang_index(req->cell.language);
    uint64_t deadline = mono_ns() + (uint64_t)ctx->timeout_ms * 1000000ull;
    char failed[200];
    bool timed_out = false;
    if (session_files(s, d, req->cell.files, req->cell.nfiles, deadline, failed, sizeof(failed),
                      &timed_out, err) < 0)
        return -1;
    if (timed_out || failed[0]) {
        ret->timed_out = timed_out;
        ret->exit_code = timed_out ? 124 : 1;
        ret->outcome = timed_out ? PL_OUTCOME_TIMED_OUT : PL_OUTCOME_COMPLETED;
        snprintf(ret->detail, sizeof(ret->detail),
                 timed_out ? "the deadline ended the cell while its files were written"
                           : "the cell's files could not be written: %.180s",
                 failed);
        ret->out = calloc(1, 1);
        ret->err = calloc(1, 1);
        return ret->out && ret->err ? 0 : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    struct pl_demux dx = {0};
    int status = 1;
    enum uplink_end e = UPLINK_UNUSABLE;
    for (int attempt = 0; attempt < 2 && e == UPLINK_UNUSABLE; attempt++) {
        if (!d->in[lang].up && launch(s, d, lang, err) < 0)
            return -1;
        /* Started for this cell, or at open for a hint, or by the pool: the
         * cell begins where nothing defined earlier exists. */
        if (d->in[lang].fresh)
            ret->interpreter_started = true;
        d->in[lang].fresh = false;
        pl_demux_free(&dx);
        memset(&dx, 0, sizeof(dx));
        dx.out_cap = dx.err_cap = ctx->output_bytes;
        e = uplink_cell(d, lang, req->cell.code, req->cell.code_len, deadline, &dx, &status);
        if (e == UPLINK_UNUSABLE)
            d->in[lang].up = false; /* it ended between calls: a fresh one */
    }
    if (e == UPLINK_UNUSABLE) {
        pl_demux_free(&dx);
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the %s interpreter's cell channel failed twice", lang_name[lang]);
    }
    ret->cell_uplink = true;
    ret->timed_out = e == UPLINK_TIMED_OUT;
    if (e == UPLINK_TIMED_OUT || e == UPLINK_ENDED) {
        /* The interpreter is no longer kept: the cleanup after this call
         * ends it, and the next cell starts a fresh one. */
        uplink_drop(d, lang);
        d->in[lang].up = false;
    }
    if (e == UPLINK_TIMED_OUT) {
        ret->exit_code = 124;
        ret->outcome = PL_OUTCOME_TIMED_OUT;
        snprintf(ret->detail, sizeof(ret->detail),
                 "the deadline of %u ms ended the cell and its interpreter", ctx->timeout_ms);
    } else if (e == UPLINK_ENDED) {
        ret->exit_code = 1;
        ret->outcome = PL_OUTCOME_COMPLETED;
        snprintf(ret->detail, sizeof(ret->detail), "the %s interpreter ended during the cell",
                 lang_name[lang]);
    } else {
        ret->exit_code = status == 0 ? 0 : 1;
        ret->outcome = PL_OUTCOME_COMPLETED;
    }
    ret->out = take(&dx.out, &ret->out_len);
    ret->err = take(&dx.err, &ret->err_len);
    ret->out_truncated = dx.out_total > ctx->output_bytes;
    ret->err_truncated = dx.err_total > ctx->output_bytes;
    pl_demux_free(&dx);
    return ret->out && ret->err ? 0 : pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
}

/* A project in a session: its files (an exec), then its steps (an exec
 * each, project_steps), sparing the kept interpreters between steps. */
static int session_project(struct docker_state *s, struct dsession *d, const struct pl_run_ctx *ctx,
                           const struct pl_run_request *req, struct cont_run *r,
                           struct pl_error *err) {
    uint64_t deadline = mono_ns() + (uint64_t)ctx->timeout_ms * 1000000ull;
    bool timed_out = false;
    if (session_files(s, d, req->project.files, req->project.nfiles, deadline, r->files_failed,
                      sizeof(r->files_failed), &timed_out, err) < 0)
        return -1;
    r->files_done = true;
    r->timed_out = timed_out;
    if (timed_out || r->files_failed[0])
        return 0;
    long keep[2];
    size_t nkeep = 0;
    for (int i = 0; i < 2; i++)
        if (d->in[i].up)
            keep[nkeep++] = d->in[i].host_pid;
    snprintf(r->id, sizeof(r->id), "%s", d->id);
    if (ctx->broker)
        r->step_env = "PLIMSOLL_BROKER_SOCKET=/run/plimsoll/call/" PL_BROKER_SOCKET_NAME;
    return project_steps(s, r, deadline, d->init_pid, keep, nkeep, err);
}

static int docker_session_run(void *state, void *session, const struct pl_run_ctx *ctx,
                              const struct pl_run_request *req, struct pl_run_result *ret,
                              struct pl_error *err) {
    struct docker_state *s = state;
    struct dsession *d = session;
    cleaner_join(d); /* the previous call's cleanup: this call waits for it */
    char fp[65];
    bool running = false, paused = false;
    /* The sandbox's own state first: a main process that ended also makes
     * the cleanup fail, and the first is the reason worth telling. */
    if (session_state(s, d->id, fp, &running, &paused, err) < 0)
        return pl_error_set(err, PL_REASON_SESSION_ENDED, "the sandbox is gone");
    if (!running)
        return pl_error_set(err, PL_REASON_SESSION_ENDED, "the sandbox's main process ended");
    if (d->verdict[0])
        return pl_error_set(err, PL_REASON_SESSION_ENDED, "%s", d->verdict);
    if (strcmp(fp, d->fp) != 0)
        return pl_error_set(err, PL_REASON_SESSION_ENDED,
                            "the sandbox's security settings changed since the session opened");
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "plimsoll-session-%s", d->tag);
    int rc;
    char call_dir[PATH_MAX];
    if (ctx->broker) {
        /* The grant of the call in progress, for anything in the sandbox. */
        snprintf(call_dir, sizeof(call_dir), "%.3000s/call", d->dir);
        struct pl_broker_sock_access acc = sandbox_access(s, &d->gate);
        if (pl_broker_listen(ctx->broker, call_dir, &acc, err) < 0) {
            cleaner_start(d);
            snprintf(ret->session_ended, sizeof(ret->session_ended), "%.200s", err->message);
            return -1;
        }
    }
    if (req->kind == PL_PAYLOAD_CELL) {
        rc = session_cell(s, d, ctx, req, ret, err);
    } else {
        struct cont_run r = {.timeout_ms = ctx->timeout_ms};
        struct pl_buf hdr = {0}, files = {0};
        rc = prepare_run(s, ctx, req, &r, &hdr, &files, err);
        if (rc == 0 && req->kind == PL_PAYLOAD_PROJECT) {
            rc = session_project(s, d, ctx, req, &r, err);
        } else if (rc == 0) {
            json_t *env = ctx->broker ? json_pack("[s]", "PLIMSOLL_BROKER_SOCKET=/run/plimsoll/"
                                                         "call/" PL_BROKER_SOCKET_NAME)
                                      : NULL;
            char user[32];
            run_user(s, user);
            int code = -1;
            rc = exec_in(s, d->id, user,
                         json_pack("[s, s, s]", "python3", "-c", pl_docker_bootstrap), env, &r,
                         &code, err);
            r.exit_code = code < 0 ? 137 : code;
        }
        pl_buf_free(&hdr);
        pl_buf_free(&files);
        if (rc == 0)
            rc = finish_run(ctx, req, &r, ret, err);
        pl_demux_free(&r.dx);
        free_steps(r.steps, r.nsteps);
    }
    pl_broker_unlisten(ctx->broker);
    /* Whatever the call left running ends now, after the answer. */
    cleaner_start(d);
    if (rc < 0)
        snprintf(ret->session_ended, sizeof(ret->session_ended), "%.200s", err->message);
    return rc;
}

/* With sessions on, one real session before serving (docs/sessions.md). */
static int session_proof(struct docker_state *s, unsigned memory_mb, json_t *ret_langs,
                         struct pl_error *err) {
#define PROOF_FAIL(...)                                                                            \
    do {                                                                                           \
        pl_error_set(err, PL_REASON_INTERNAL,                                                      \
                     "SANDBOX_MAX_SESSIONS: the startup session proof failed: " __VA_ARGS__);      \
        goto out;                                                                                  \
    } while (0)
    const char *none[] = {NULL};
    char tag[17] = "proof-"; /* two daemons may start at once: a name of its own */
    random_hex(tag + 6, 5);
    struct pl_session_open o = {
        .principal = "startup-proof", .memory_mb = memory_mb, .tag = tag, .languages = none};
    void *h = NULL;
    int ok = -1;
    struct pl_run_ctx ctx = {.principal = "startup-proof",
                             .timeout_ms = 30000,
                             .memory_mb = memory_mb,
                             .output_bytes = 65536};
    snprintf(ctx.run_id, sizeof(ctx.run_id), "startup-proof");
    if (docker_session_open(s, &o, &h, err) < 0)
        return -1;
    struct dsession *d = h;
    struct {
        const char *lang, *code;
    } steps[] = {
        {"python", "import subprocess\n"
                   "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
                   "open('/work/proof.txt', 'w').write('kept')\nprint('started')\n"},
        {"python", "import os\n"
                   "left = [p for p in os.listdir('/proc') if p.isdigit() and\n"
                   "        open('/proc/%s/comm' % p).read().strip() == 'sleep']\n"
                   "print(len(left), open('/work/proof.txt').read())\n"},
    };
    const char *want[] = {"started\n", "0 kept\n"};
    for (int i = 0; i < 2; i++) {
        struct pl_run_request req = {.kind = PL_PAYLOAD_SNIPPET};
        req.snippet.language = steps[i].lang;
        req.snippet.code = steps[i].code;
        req.snippet.code_len = strlen(steps[i].code);
        req.snippet.stdin_data = "";
        struct pl_run_result res = {0};
        int r = docker_session_run(s, d, &ctx, &req, &res, err);
        bool good = r == 0 && res.exit_code == 0 && res.out && strcmp(res.out, want[i]) == 0;
        char got[160];
        snprintf(got, sizeof(got), "%.60s|%.80s", res.out ? res.out : "", res.err ? res.err : "");
        pl_run_result_clear(&res);
        if (r < 0)
            goto out;
        if (!good)
            PROOF_FAIL("call %d answered \"%s\" instead of \"%s\"", i + 1, got, want[i]);
    }
    if (docker_session_pause(s, d) < 0 || docker_session_resume(s, d, err) < 0)
        PROOF_FAIL("pausing and resuming the sandbox failed");
    for (int lang = 0; lang < 2; lang++) {
        const char *cells[2] = {lang == LANG_PY ? "x = 41" : "globalThis.x = 41", "x + 1"};
        bool fresh[2];
        char out[2][64];
        for (int i = 0; i < 2; i++) {
            struct pl_run_request req = {.kind = PL_PAYLOAD_CELL};
            req.cell.language = lang_name[lang];
            req.cell.code = cells[i];
            req.cell.code_len = strlen(cells[i]);
            struct pl_run_result res = {0};
            int r = docker_session_run(s, d, &ctx, &req, &res, err);
            fresh[i] = res.interpreter_started;
            snprintf(out[i], sizeof(out[i]), "%d:%.50s", res.exit_code, res.out ? res.out : "");
            pl_run_result_clear(&res);
            if (r < 0)
                goto out;
        }
        if (!fresh[0] || fresh[1] || strcmp(out[1], "0:42\n") != 0)
            PROOF_FAIL("%s cells: the second saw \"%s\" (fresh %d, %d); the interpreter must keep "
                       "what the first defined",
                       lang_name[lang], out[1], fresh[0], fresh[1]);
        json_array_append_new(ret_langs, json_string(lang_name[lang]));
    }
    struct pl_run_request req = {.kind = PL_PAYLOAD_SNIPPET};
    req.snippet.language = "python";
    req.snippet.code = "print(open('/work/proof.txt').read())";
    req.snippet.code_len = strlen(req.snippet.code);
    req.snippet.stdin_data = "";
    struct pl_run_result res = {0};
    int r = docker_session_run(s, d, &ctx, &req, &res, err);
    bool kept = r == 0 && res.out && strcmp(res.out, "kept\n") == 0;
    pl_run_result_clear(&res);
    if (!kept)
        PROOF_FAIL("a file did not survive the calls and a pause");
    cleaner_join(d);
    if (d->verdict[0])
        PROOF_FAIL("%s", d->verdict);
    ok = 0;
out:
    if (ok < 0 && strncmp(err->message, "SANDBOX_MAX_SESSIONS", 20) != 0) {
        char m[sizeof(err->message)];
        snprintf(m, sizeof(m), "%s", err->message);
        pl_error_set(err, PL_REASON_INTERNAL,
                     "SANDBOX_MAX_SESSIONS: the startup session proof failed: %.400s", m);
    }
    if (d) {
        char id[72];
        memcpy(id, d->id, sizeof(id));
        docker_session_close(s, d);
        if (ok == 0) {
            /* Closing must end it: the container goes. */
            char path[160];
            long st = 0;
            struct pl_error e = {0};
            snprintf(path, sizeof(path), "/containers/%s/json", id);
            for (int i = 0; i < 100; i++) {
                if (pl_docker_call(s->engine, "GET", path, NULL, API_TIMEOUT_MS, &st, NULL, &e) ==
                        0 &&
                    st == 404)
                    break;
                usleep(50000);
            }
            if (st != 404) {
                pl_error_set(err, PL_REASON_INTERNAL,
                             "SANDBOX_MAX_SESSIONS: the startup session proof failed: closing the "
                             "session did not remove its sandbox");
                ok = -1;
            }
        }
    }
    return ok;
#undef PROOF_FAIL
}

const struct pl_provider_ops pl_docker_ops = {
    .name = "docker",
    .max_tier = PL_TIER_KERNEL,
    .memory_budget_applies = true,
    .create = docker_create,
    .destroy = docker_destroy,
    .info = docker_info,
    .ready = docker_ready,
    .run = docker_run,
    .session_open = docker_session_open,
    .session_run = docker_session_run,
    .session_pause = docker_session_pause,
    .session_resume = docker_session_resume,
    .session_close = docker_session_close,
};
