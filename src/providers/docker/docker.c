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
#include <limits.h>
#include <poll.h>
#include <pthread.h>
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

#define LABEL_INSTANCE "org.plimsoll.instance"
#define LABEL_RUN "org.plimsoll.run"
#define API_TIMEOUT_MS 30000L
#define KILL_GRACE_MS 3000
#define READY_CACHE_NS 1000000000ull
#define PROJECT_REPORT_MAX (256u << 20)

struct docker_settings {
    char runtime[16];           /* SANDBOX_DOCKER_RUNTIME */
    char snippet_image[256];    /* SANDBOX_DOCKER_SNIPPET_IMAGE */
    char project_image[256];    /* SANDBOX_DOCKER_PROJECT_IMAGE */
    char instance[64];          /* SANDBOX_DOCKER_INSTANCE */
    char run_dir[PATH_MAX / 4]; /* SANDBOX_DOCKER_RUN_DIR */
    char *seccomp;              /* SANDBOX_DOCKER_SECCOMP's JSON text, or NULL */
    char seccomp_path[PATH_MAX / 4];
    unsigned millicpus; /* SANDBOX_DOCKER_CPUS x 1000 */
    unsigned pids;      /* SANDBOX_DOCKER_PIDS */
    unsigned work_mb;   /* SANDBOX_DOCKER_WORK_MB */
    unsigned tmp_mb;    /* SANDBOX_DOCKER_TMP_MB */
    unsigned warm;      /* SANDBOX_DOCKER_WARM: started containers kept per image */
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
    const char *sc = setting(c, "SANDBOX_DOCKER_SECCOMP");
    if (sc) {
        if (strlen(sc) >= sizeof(s->seccomp_path))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "SANDBOX_DOCKER_SECCOMP: too long");
        memcpy(s->seccomp_path, sc, strlen(sc) + 1);
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
    return 0;
}

/* ---- container configuration -------------------------------------------- */

static json_t *tmpfs_opts(unsigned mb) {
    char o[128];
    snprintf(o, sizeof(o), "rw,noexec,nosuid,nodev,size=%um,uid=65534,gid=65534,mode=1777", mb);
    return json_string(o);
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
    json_t *tmpfs =
        json_pack("{s:o, s:o}", "/tmp", tmpfs_opts(st->tmp_mb), "/work", tmpfs_opts(st->work_mb));
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
    return json_pack("{s:s, s:o, s:o, s:s, s:s, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:o, s:o}",
                     "Image", image_id, "Cmd", cmd, "Env", env, "User", "65534:65534", "WorkingDir",
                     "/work", "AttachStdin", 1, "AttachStdout", 1, "AttachStderr", 1, "OpenStdin",
                     1, "StdinOnce", 1, "Tty", 0, "NetworkDisabled", 1, "Labels", labels,
                     "HostConfig", host);
}

/* ---- the reaper: containers are deleted after the answer ---------------- */

static int remove_container(struct docker_state *s, const char *id) {
    char path[160];
    snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
    long st = 0;
    struct pl_error e = {0};
    if (pl_docker_call(s->engine, "DELETE", path, NULL, API_TIMEOUT_MS, &st, NULL, &e) < 0)
        return -1;
    return st == 204 || st == 404 ? 0 : -1;
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
    char warm_id[72]; /* in: a started warm container to use, or "" */
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
            if (kill_container(s, r->id) < 0)
                return pl_error_set(err, PL_REASON_INTERNAL,
                                    "docker: cannot kill container at its deadline");
            hard_end = mono_ns() + (uint64_t)KILL_GRACE_MS * 1000000ull;
        }
        if (hard_end && now >= hard_end)
            return 0; /* killed; the stream did not end: stop reading */
        uint64_t until = hard_end ? hard_end : deadline_ns;
        int wait_ms = until > now ? (int)((until - now) / 1000000ull) + 1 : 0;
        struct pollfd p = {.fd = fd, .events = POLLIN | (wr_open ? POLLOUT : 0)};
        int pr = poll(&p, 1, wait_ms);
        if (pr < 0 && errno != EINTR)
            return pl_error_set(err, PL_REASON_INTERNAL, "poll: %s", strerror(errno));
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
    if (pump(s, r, fd, t0 + (uint64_t)r->timeout_ms * 1000000ull, err) < 0)
        goto fail;
    close(fd);
    fd = -1;

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
        if (kill_container(s, r->id) == 0)
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

struct canary {
    char dir[PATH_MAX];
    char sock[PATH_MAX];
    int fd;
    pthread_t thread;
    bool running;
};

static void *canary_main(void *arg) {
    struct canary *c = arg;
    for (;;) {
        int cfd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return NULL; /* the listening socket was shut down */
        }
        char b[16];
        struct pollfd p = {.fd = cfd, .events = POLLIN};
        if (poll(&p, 1, 5000) > 0 && recv(cfd, b, sizeof(b), 0) > 0)
            send(cfd, "pong\n", 5, MSG_NOSIGNAL);
        close(cfd);
    }
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
    c->fd = -1;
    char rnd[9];
    unsigned char rb[4];
    int ufd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (ufd < 0 || read(ufd, rb, 4) != 4) {
        if (ufd >= 0)
            close(ufd);
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness");
    }
    close(ufd);
    snprintf(rnd, sizeof(rnd), "%02x%02x%02x%02x", rb[0], rb[1], rb[2], rb[3]);
    snprintf(c->dir, sizeof(c->dir), "%.2000s/%s/canary-%s", s->set.run_dir, s->set.instance, rnd);
    if (mkdir_p(c->dir, 0755) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "SANDBOX_DOCKER_RUN_DIR: cannot create %s: %s",
                            c->dir, strerror(errno));
    chmod(c->dir, 0755);
    snprintf(c->sock, sizeof(c->sock), "%.3000s/broker.sock", c->dir);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(c->sock) >= sizeof(sun.sun_path))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_DOCKER_RUN_DIR: %s is too long for a socket path", c->dir);
    memcpy(sun.sun_path, c->sock, strlen(c->sock) + 1);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || bind(c->fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
        chmod(c->sock, 0666) < 0 || listen(c->fd, 8) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "canary socket %s: %s", c->sock,
                            strerror(errno));
    if (pthread_create(&c->thread, NULL, canary_main, c) != 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "canary thread");
    c->running = true;
    return 0;
}

static void canary_stop(struct canary *c) {
    if (c->fd >= 0)
        shutdown(c->fd, SHUT_RDWR);
    if (c->running)
        pthread_join(c->thread, NULL);
    if (c->fd >= 0)
        close(c->fd);
    if (c->sock[0])
        unlink(c->sock);
    if (c->dir[0])
        rmdir(c->dir);
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
    if (json_integer_value(json_object_get(rep, "uid")) != 65534)
        REFUSE("the guest does not run as uid 65534");
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
                     "set SANDBOX_DOCKER_SECCOMP to seccomp/plimsoll.json)"
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
    struct canary can = {.fd = -1};

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
    unsigned removed = 0;
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
    can.fd = -1;
    can.running = false;
    can.dir[0] = can.sock[0] = '\0';
    if (!json_object_get(langs, "python") || !json_object_get(langs, "javascript")) {
        pl_error_set(err, PL_REASON_INTERNAL,
                     "SANDBOX_PROVIDER=docker: the images must run python3 and node; the probe "
                     "found %zu of them",
                     json_object_size(langs));
        goto fail;
    }
    s->tier = strcmp(s->set.runtime, "runsc") == 0 ? PL_TIER_KERNEL : PL_TIER_CONTAINER;
    snprintf(s->engine_desc, sizeof(s->engine_desc), "docker %.16s, %.8s; %.64s (%.19s); %.32s",
             pl_docker_server_version(info), s->set.runtime, s->set.snippet_image, s->snippet_id,
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

static char *take(struct pl_buf *b, size_t *ret_len) {
    *ret_len = b->len;
    char *d = b->data ? b->data : calloc(1, 1);
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

static int decode_b64_field(const json_t *o, const char *key, char **ret, size_t *ret_len) {
    const char *v = json_string_value(json_object_get(o, key));
    unsigned char *d = NULL;
    size_t n = 0;
    if (!v || pl_base64_decode(v, strlen(v), PROJECT_REPORT_MAX, &d, &n) < 0)
        return -1;
    *ret = (char *)d;
    *ret_len = n;
    return 0;
}

/* Turn the bootstrap's "PLIMSOLL {...}" lines into steps and an outcome. */
static void project_outcome(const struct pl_run_request *req, struct cont_run *r,
                            struct pl_run_result *ret) {
    bool setup = false, done = false, bad = false;
    ret->steps = calloc(req->project.nsteps, sizeof(*ret->steps));
    const char *p = r->dx.out.data;
    size_t n = r->dx.out.len;
    while (p && n > 0 && ret->steps) {
        const char *eol = memchr(p, '\n', n);
        if (!eol)
            break; /* a torn last line: the reporter was cut off */
        size_t len = (size_t)(eol - p);
        json_t *j =
            len > 9 && memcmp(p, "PLIMSOLL ", 9) == 0 ? json_loadb(p + 9, len - 9, 0, NULL) : NULL;
        n -= len + 1;
        p = eol + 1;
        if (!j) {
            bad = true;
            continue;
        }
        json_t *step = json_object_get(j, "step");
        if (json_object_get(j, "setup_failed")) {
            ret->outcome = PL_OUTCOME_SETUP_FAILED;
            snprintf(ret->detail, sizeof(ret->detail), "writing the project's files failed: %s",
                     json_string_value(json_object_get(j, "setup_failed")));
            json_decref(j);
            return;
        } else if (json_object_get(j, "setup")) {
            setup = true;
        } else if (json_object_get(j, "done")) {
            done = true;
        } else if (json_is_integer(step) && (size_t)json_integer_value(step) == ret->nsteps &&
                   ret->nsteps < req->project.nsteps) {
            struct pl_step_result *s = &ret->steps[ret->nsteps];
            s->name = strdup(req->project.steps[ret->nsteps].name);
            s->exit_code = (int)json_integer_value(json_object_get(j, "exit_code"));
            s->duration_ms = (uint32_t)json_integer_value(json_object_get(j, "duration_ms"));
            s->out_truncated = json_is_true(json_object_get(j, "stdout_truncated"));
            s->err_truncated = json_is_true(json_object_get(j, "stderr_truncated"));
            if (decode_b64_field(j, "stdout", &s->out, &s->out_len) < 0 ||
                decode_b64_field(j, "stderr", &s->err, &s->err_len) < 0)
                bad = true;
            ret->nsteps++;
        } else {
            bad = true;
        }
        json_decref(j);
    }
    int last = ret->nsteps ? ret->steps[ret->nsteps - 1].exit_code : 0;
    ret->exit_code = last;
    if (r->timed_out) {
        ret->outcome = PL_OUTCOME_TIMED_OUT;
        ret->exit_code = 124;
        snprintf(ret->detail, sizeof(ret->detail),
                 "the deadline of %u ms ended the run during step %zu of %zu", r->timeout_ms,
                 ret->nsteps + 1, req->project.nsteps);
    } else if (!setup && !bad && ret->nsteps == 0 && !done) {
        ret->outcome = PL_OUTCOME_SETUP_FAILED;
        snprintf(ret->detail, sizeof(ret->detail),
                 "the sandbox ended before the project's files were written (exit %d%s)",
                 r->exit_code, r->oom ? ", out of memory" : "");
    } else if (bad || !done) {
        ret->outcome = PL_OUTCOME_PROTOCOL_ERROR;
        snprintf(ret->detail, sizeof(ret->detail),
                 "the sandbox's step reporter %s (container exit %d%s)",
                 bad ? "wrote something unreadable" : "ended before the last report", r->exit_code,
                 r->oom ? ", out of memory" : "");
        if (r->oom)
            ret->exit_code = r->exit_code;
    } else {
        ret->outcome = PL_OUTCOME_COMPLETED;
        if (last != 0)
            snprintf(ret->detail, sizeof(ret->detail),
                     "step %zu (%s) exited %d; later steps "
                     "did not run",
                     ret->nsteps, ret->steps[ret->nsteps - 1].name, last);
    }
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
        json_t *fl = json_array(), *steps = json_array();
        for (size_t i = 0; i < req->project.nfiles; i++) {
            json_array_append_new(fl, json_pack("{s:s, s:I}", "path", req->project.files[i].path,
                                                "len", (json_int_t)req->project.files[i].len));
            pl_buf_append(files, req->project.files[i].content, req->project.files[i].len);
        }
        for (size_t i = 0; i < req->project.nsteps; i++) {
            json_t *argv = json_array();
            for (size_t k = 0; k < req->project.steps[i].argc; k++)
                json_array_append_new(argv, json_string(req->project.steps[i].argv[k]));
            json_array_append_new(steps, argv);
        }
        h = json_pack("{s:s, s:o, s:o, s:I}", "kind", "project", "files", fl, "steps", steps,
                      "output_bytes", (json_int_t)ctx->output_bytes);
        r->parts[1] = files->data;
        r->part_len[1] = files->len;
        r->nparts = 2;
        /* Reports carry each step's kept output in base64. */
        uint64_t cap = (uint64_t)ctx->output_bytes * 2 * req->project.nsteps * 4 / 3 + (1u << 20);
        r->dx.out_cap = cap > PROJECT_REPORT_MAX ? PROJECT_REPORT_MAX : (size_t)cap;
        r->dx.err_cap = 64u << 10;
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
        project_outcome(req, r, ret);
        ret->out = calloc(1, 1);
        ret->err = take(&r->dx.err, &ret->err_len);
        if (ret->err_len > ctx->output_bytes) {
            ret->err_len = ctx->output_bytes;
            ret->err_truncated = true;
        }
        if (!ret->out || !ret->err || (req->project.nsteps && !ret->steps)) {
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
     * start cold. */
    char broker_dir[PATH_MAX];
    if (ctx->broker) {
        snprintf(broker_dir, sizeof(broker_dir), "%.2000s/%s/run-%s", s->set.run_dir,
                 s->set.instance, ctx->run_id);
        char parent[PATH_MAX];
        snprintf(parent, sizeof(parent), "%.2000s/%s", s->set.run_dir, s->set.instance);
        if (mkdir_p(parent, 0755) < 0 || pl_broker_listen(ctx->broker, broker_dir, err) < 0) {
            pl_buf_free(&hdr);
            pl_buf_free(&files);
            pl_demux_free(&r.dx);
            if (!err->message[0])
                pl_error_set(err, PL_REASON_INTERNAL, "cannot create %s: %s", parent,
                             strerror(errno));
            return -1;
        }
        r.socket_dir = broker_dir;
    } else {
        take_warm(s, req->kind == PL_PAYLOAD_PROJECT ? 1 : 0, ctx->memory_mb, r.warm_id);
    }
    int rc = run_container(s, &r, err);
    pl_buf_free(&hdr);
    pl_buf_free(&files);
    if (rc < 0) {
        pl_demux_free(&r.dx);
        invalidate_ready(s);
        return -1;
    }
    snprintf(ret->sandbox_name, sizeof(ret->sandbox_name), "plimsoll-%.24s", ctx->run_id);
    return finish_run(ctx, req, &r, ret, err);
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
        long pid;
        unsigned long long start;
        bool up;
        bool fresh; /* no cell has run in it yet */
        int fd;     /* its uplink, or -1: cells then go through an exec */
    } in[2];        /* the kept interpreters, learnt from the launcher only */
    int lfd;        /* listening at dir/cells.sock for the interpreters' uplinks */
    pthread_t cleaner;
    bool cleaner_running;
    char verdict[256]; /* non-empty: the session must end, and why */
    struct docker_state *s;
    bool pooled;   /* taken from the warm pool */
    unsigned mask; /* the interpreters the pool started: 1 python, 2 javascript */
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
static int exec_call(struct docker_state *s, struct dsession *d, const char *user, json_t *cmd,
                     json_t *env, struct cont_run *r, int *ret_exit, struct pl_error *err) {
    char path[160];
    *ret_exit = -1;
    json_t *cfg = json_pack("{s:b, s:b, s:b, s:b, s:o, s:s, s:s}", "AttachStdin", r->nparts > 0,
                            "AttachStdout", 1, "AttachStderr", 1, "Tty", 0, "Cmd", cmd,
                            "WorkingDir", "/work", "User", user);
    if (cfg && env)
        json_object_set_new(cfg, "Env", env);
    else
        json_decref(env);
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
    uint64_t t0 = mono_ns();
    r->exec = true;
    memcpy(r->id, d->id, sizeof(r->id));
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
    snprintf(path, sizeof(path), "/exec/%s/json", eid);
    json_t *ins = NULL;
    if (api_expect(s, "GET", path, NULL, 200, &ins, err) < 0)
        return -1;
    *ret_exit = pl_docker_exec_exit(ins);
    json_decref(ins);
    return 0;
}

/*
 * Run a trusted agent mode and take its report: exit 0 and exactly one JSON
 * line, nothing before or after.  Other processes of the sandbox's uid may
 * be able to add bytes to the exec's output (under gVisor even after the
 * agent made itself non-dumpable; see docs/sessions.md); added bytes make
 * the report unreadable, never a different report.
 */
static int agent_json(struct docker_state *s, struct dsession *d, const char *mode, const char *arg,
                      json_t *env, json_t **ret, struct pl_error *err) {
    struct cont_run r = {.timeout_ms = 20000};
    r.dx.out_cap = 1u << 20;
    r.dx.err_cap = 64u << 10;
    int code = -1;
    /* The cleanup runs with a group of its own: under runc no guest process
     * may then open its descriptors (it still may signal them: same uid). */
    const char *user = strcmp(mode, "cleanup") == 0 ? "65534:65533" : "65534:65534";
    int rc = exec_call(s, d, user, agent_cmd(mode, arg), env, &r, &code, err);
    json_t *j = NULL;
    const char *o = r.dx.out.data;
    size_t n = r.dx.out.len;
    if (rc == 0 && code == 0 && !r.timed_out && o && n > 1 && o[n - 1] == '\n' &&
        !memchr(o, '\n', n - 1))
        j = json_loadb(o, n - 1, JSON_REJECT_DUPLICATES, NULL);
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
    /* uid 65534 inside connects: the socket must be writable by it. */
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0666) < 0 ||
        listen(fd, 4) < 0) {
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

/* After a launch: take the interpreter's uplink, if it greets in time. */
static void uplink_accept(struct dsession *d, int lang, const char *token) {
    uplink_drop(d, lang);
    if (d->lfd < 0)
        return;
    char want[128];
    int wn = snprintf(want, sizeof(want), "%s %s", lang_name[lang], token);
    uint64_t deadline = mono_ns() + 2000000000ull;
    while (wait_fd(d->lfd, POLLIN, deadline) == 1) {
        int fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            continue;
        unsigned char h[5];
        char got[128];
        uint32_t n = 0;
        if (read_full(fd, h, 5, deadline) == 1 && h[0] == 'H' &&
            (n = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4]) ==
                (uint32_t)wn &&
            read_full(fd, got, n, deadline) == 1) {
            unsigned char diff = 0;
            for (uint32_t i = 0; i < n; i++)
                diff |= (unsigned char)(got[i] ^ want[i]);
            if (diff == 0) {
                d->in[lang].fd = fd;
                return;
            }
        }
        close(fd); /* not the interpreter we launched */
    }
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

static int launch(struct docker_state *s, struct dsession *d, int lang, struct pl_error *err) {
    json_t *j = NULL;
    unsigned char rnd[24];
    char token[49];
    if (RAND_bytes(rnd, sizeof(rnd)) != 1)
        return pl_error_set(err, PL_REASON_INTERNAL, "no randomness for the uplink token");
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(token + 2 * i, 3, "%02x", rnd[i]);
    char tenv[80];
    snprintf(tenv, sizeof(tenv), "PLIMSOLL_CELL_TOKEN=%s", token);
    json_t *env = d->lfd >= 0
                      ? json_pack("[s, s]", "PLIMSOLL_CELL_UPLINK=/run/plimsoll/" UPLINK_NAME, tenv)
                      : NULL;
    /* Connections nobody greeted (guest code may connect too) go first, so
     * the backlog has room for the interpreter about to start. */
    for (int fd; d->lfd >= 0 && (fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0;)
        close(fd);
    if (agent_json(s, d, "launch", lang_name[lang], env, &j, err) < 0)
        return -1;
    json_t *pid = json_object_get(j, "pid"), *start = json_object_get(j, "start");
    if (!json_is_integer(pid) || !json_is_integer(start)) {
        pl_error_set(err, PL_REASON_INTERNAL, "the %s interpreter did not start: %.200s",
                     lang_name[lang], json_string_value(json_object_get(j, "error")) ?: "?");
        json_decref(j);
        return -1;
    }
    d->in[lang].pid = (long)json_integer_value(pid);
    d->in[lang].start = (unsigned long long)json_integer_value(start);
    d->in[lang].up = true;
    d->in[lang].fresh = true;
    json_decref(j);
    uplink_accept(d, lang, token);
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
    char *keep_s = json_dumps(keep, JSON_COMPACT);
    json_decref(keep);
    json_t *j = NULL;
    struct pl_error err = {0};
    bool running = false, paused = false;
    char fp[65];
    if (!keep_s || agent_json(s, d, "cleanup", keep_s, NULL, &j, &err) < 0) {
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
            d->in[i].up = d->in[i].up && still;
        }
        json_int_t used = json_integer_value(json_object_get(j, "work_used"));
        json_int_t size = json_integer_value(json_object_get(j, "work_size"));
        if (size > 0 && used >= size - (json_int_t)(64u << 10))
            snprintf(d->verdict, sizeof(d->verdict),
                     "the work directory reached its budget (SANDBOX_SESSION_DISK_MB)");
    }
    free(keep_s);
    json_decref(j);
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

/* Create and start one session sandbox; start the interpreters in langs. */
static int session_create(struct docker_state *s, const char *tag, unsigned memory_mb,
                          const bool langs[2], struct dsession **ret, struct pl_error *err) {
    struct dsession *d = calloc(1, sizeof(*d));
    if (!d)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    d->s = s;
    d->lfd = d->in[0].fd = d->in[1].fd = -1;
    snprintf(d->tag, sizeof(d->tag), "%s", tag);
    char run_id[40];
    snprintf(run_id, sizeof(run_id), "session-%s", d->tag);
    snprintf(d->dir, sizeof(d->dir), "%.2000s/%s/%s", s->set.run_dir, s->set.instance, run_id);
    if (mkdir_p(d->dir, 0755) < 0) {
        pl_error_set(err, PL_REASON_INTERNAL, "cannot create %s: %s", d->dir, strerror(errno));
        free(d);
        return -1;
    }
    json_t *cfg = container_config(s, s->project_id, memory_mb, run_id, d->dir);
    if (!cfg) {
        rmdir(d->dir);
        free(d);
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
                        tmpfs_opts(s->session_disk_mb));
    char path[256];
    snprintf(path, sizeof(path), "/containers/create?name=plimsoll-%s", run_id);
    json_t *created = NULL;
    int rc = api_expect(s, "POST", path, cfg, 201, &created, err);
    json_decref(cfg);
    if (rc < 0 || pl_docker_created_id(created, d->id) < 0) {
        json_decref(created);
        rmdir(d->dir);
        free(d);
        return rc < 0 ? -1 : pl_error_set(err, PL_REASON_INTERNAL, "docker: create gave no Id");
    }
    json_decref(created);
    bool running = false, paused = false;
    snprintf(path, sizeof(path), "/containers/%s/start", d->id);
    if (api_expect(s, "POST", path, NULL, 204, NULL, err) < 0 ||
        session_state(s, d->id, d->fp, &running, &paused, err) < 0)
        goto fail;
    if (!running) {
        pl_error_set(err, PL_REASON_INTERNAL, "the session's sandbox did not stay up");
        goto fail;
    }
    uplink_listen(d);
    for (int lang = 0; lang < 2; lang++)
        if (langs[lang] && launch(s, d, lang, err) < 0)
            goto fail;
    *ret = d;
    return 0;
fail:
    uplink_close(d);
    reap_later(s, d->id);
    rmdir(d->dir);
    free(d);
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
            uplink_close(d);
            rmdir(d->dir);
            free(d);
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
        uplink_close(s->pool[i]);
        rmdir(s->pool[i]->dir);
        free(s->pool[i]);
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
    uplink_close(d);
    kill_container(s, d->id);
    reap_later(s, d->id);
    rmdir(d->dir);
    free(d);
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

/* A cell: files and code to the agent's cell client, which hands the code
 * to the kept interpreter; exit 3 means none listens (start one, retry),
 * 4 that it ended during the cell. */
static int session_cell(struct docker_state *s, struct dsession *d, const struct pl_run_ctx *ctx,
                        const struct pl_run_request *req, struct pl_run_result *ret,
                        struct pl_error *err) {
    int lang = lang_index(req->cell.language);
    json_t *fl = json_array();
    struct pl_buf files = {0}, hdr = {0};
    for (size_t i = 0; i < req->cell.nfiles; i++) {
        json_array_append_new(fl, json_pack("{s:s, s:I}", "path", req->cell.files[i].path, "len",
                                            (json_int_t)req->cell.files[i].len));
        pl_buf_append(&files, req->cell.files[i].content, req->cell.files[i].len);
    }
    json_t *h = json_pack("{s:s, s:I, s:o}", "language", lang_name[lang], "code_len",
                          (json_int_t)req->cell.code_len, "files", fl);
    char *line = h ? json_dumps(h, JSON_COMPACT) : NULL;
    json_decref(h);
    if (line)
        pl_buf_printf(&hdr, "%zu\n%s", strlen(line), line);
    free(line);
    uint64_t deadline = mono_ns() + (uint64_t)ctx->timeout_ms * 1000000ull;
    int rc = -1, code = -1;
    struct cont_run r = {0};
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!d->in[lang].up && launch(s, d, lang, err) < 0)
            goto out;
        /* Started for this cell, or at open for a hint, or by the pool: the
         * cell begins where nothing defined earlier exists. */
        if (d->in[lang].fresh)
            ret->interpreter_started = true;
        d->in[lang].fresh = false;
        if (d->in[lang].fd >= 0 && req->cell.nfiles == 0) {
            memset(&r, 0, sizeof(r));
            r.dx.out_cap = r.dx.err_cap = ctx->output_bytes;
            int status = 1;
            enum uplink_end e =
                uplink_cell(d, lang, req->cell.code, req->cell.code_len, deadline, &r.dx, &status);
            if (e != UPLINK_UNUSABLE) {
                ret->cell_uplink = true;
                r.timed_out = e == UPLINK_TIMED_OUT;
                code = e == UPLINK_RAN ? status : e == UPLINK_ENDED ? 4 : -1;
                break;
            }
            pl_demux_free(&r.dx); /* nothing was sent: the exec below runs the cell */
        }
        uint64_t now = mono_ns();
        memset(&r, 0, sizeof(r));
        r.timeout_ms = now < deadline ? (unsigned)((deadline - now) / 1000000ull) + 1 : 1;
        r.parts[0] = hdr.data;
        r.part_len[0] = hdr.len;
        r.parts[1] = req->cell.code;
        r.part_len[1] = req->cell.code_len;
        r.parts[2] = files.data;
        r.part_len[2] = files.len;
        r.nparts = 3;
        r.dx.out_cap = r.dx.err_cap = ctx->output_bytes;
        if (exec_call(s, d, "65534:65534", agent_cmd("cell", NULL), NULL, &r, &code, err) < 0)
            goto out;
        if (code == 3 && !r.timed_out && attempt == 0) {
            d->in[lang].up = false; /* nothing listened: a fresh one */
            pl_demux_free(&r.dx);
            continue;
        }
        break;
    }
    rc = 0;
    ret->timed_out = r.timed_out;
    if (r.timed_out || code == 4)
        uplink_drop(d, lang);
    if (r.timed_out) {
        /* The deadline ends the interpreter too: the cleanup no longer spares it. */
        d->in[lang].up = false;
        ret->exit_code = 124;
        ret->outcome = PL_OUTCOME_TIMED_OUT;
        snprintf(ret->detail, sizeof(ret->detail),
                 "the deadline of %u ms ended the cell and its interpreter", ctx->timeout_ms);
    } else if (code == 4) {
        d->in[lang].up = false;
        ret->exit_code = 1;
        ret->outcome = PL_OUTCOME_COMPLETED;
        snprintf(ret->detail, sizeof(ret->detail), "the %s interpreter ended during the cell",
                 lang_name[lang]);
    } else {
        ret->exit_code = code == 0 ? 0 : 1;
        ret->outcome = PL_OUTCOME_COMPLETED;
        if (code == 2)
            snprintf(ret->detail, sizeof(ret->detail), "the cell's files could not be written");
        else if (code != 0 && code != 1)
            snprintf(ret->detail, sizeof(ret->detail), "the cell client exited %d", code);
    }
    ret->out = take(&r.dx.out, &ret->out_len);
    ret->err = take(&r.dx.err, &ret->err_len);
    ret->out_truncated = r.dx.out_total > ctx->output_bytes;
    ret->err_truncated = r.dx.err_total > ctx->output_bytes;
out:
    pl_demux_free(&r.dx);
    pl_buf_free(&hdr);
    pl_buf_free(&files);
    return rc;
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
    if (req->kind == PL_PAYLOAD_CELL) {
        rc = session_cell(s, d, ctx, req, ret, err);
    } else {
        struct cont_run r = {.timeout_ms = ctx->timeout_ms};
        struct pl_buf hdr = {0}, files = {0};
        json_t *env = NULL;
        char call_dir[PATH_MAX];
        rc = prepare_run(s, ctx, req, &r, &hdr, &files, err);
        if (rc == 0 && ctx->broker) {
            /* The grant of the call in progress, for anything in the sandbox. */
            snprintf(call_dir, sizeof(call_dir), "%.3000s/call", d->dir);
            rc = pl_broker_listen(ctx->broker, call_dir, err);
            env = json_pack("[s]",
                            "PLIMSOLL_BROKER_SOCKET=/run/plimsoll/call/" PL_BROKER_SOCKET_NAME);
        }
        int code = -1;
        if (rc == 0)
            rc = exec_call(s, d, "65534:65534",
                           json_pack("[s, s, s]", "python3", "-c", pl_docker_bootstrap), env, &r,
                           &code, err);
        else
            json_decref(env);
        pl_buf_free(&hdr);
        pl_buf_free(&files);
        if (rc == 0) {
            r.exit_code = code < 0 ? 137 : code;
            rc = finish_run(ctx, req, &r, ret, err);
        }
        pl_demux_free(&r.dx);
    }
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
