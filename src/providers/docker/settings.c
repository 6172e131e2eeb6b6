/* SPDX-License-Identifier: Apache-2.0 */
/*
 * settings.c: the docker provider's settings (docs/providers/docker.md) and
 * the container configuration they give every run, session and proof; the
 * session settings digest, read back from the engine.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "docker_int.h"
#include "../settings.h"
#include <grp.h>
#include <pwd.h>

#include "../../core/canon.h"
#include "seccomp_bpf.h"
#include "bootstrap.h"     /* generated: pl_docker_bootstrap[] */
#include "seccomp_runc.h"  /* generated: seccomp/plimsoll.json */
#include "seccomp_runsc.h" /* generated: seccomp/plimsoll-runsc.json */

/* "1", "0.5", "2.25": CPUs with up to three decimals, 0.01 to 64. */
static int cpus_setting(const struct pl_config *c, unsigned *ret, struct pl_error *err) {
    const char *v = pl_setting(c, "SANDBOX_DOCKER_CPUS");
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

int dk_load_settings(const struct pl_config *c, struct docker_settings *s, struct pl_error *err) {
    if (pl_setting_copy(c, "SANDBOX_DOCKER_RUNTIME", "runc", s->runtime, sizeof(s->runtime), err) <
        0)
        return -1;
    if (strcmp(s->runtime, "runc") != 0 && strcmp(s->runtime, "runsc") != 0)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "SANDBOX_DOCKER_RUNTIME: \"%s\" is neither runc nor runsc", s->runtime);
    if (pl_setting_copy(c, "SANDBOX_DOCKER_SNIPPET_IMAGE", "plimsoll/snippet:latest",
                        s->snippet_image, sizeof(s->snippet_image), err) < 0 ||
        pl_setting_copy(c, "SANDBOX_DOCKER_PROJECT_IMAGE", "plimsoll/project:latest",
                        s->project_image, sizeof(s->project_image), err) < 0 ||
        pl_setting_copy(c, "SANDBOX_DOCKER_INSTANCE", "default", s->instance, sizeof(s->instance),
                        err) < 0 ||
        pl_setting_copy(c, "SANDBOX_DOCKER_RUN_DIR", "/run/plimsoll", s->run_dir,
                        sizeof(s->run_dir), err) < 0)
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
        pl_setting_uint(c, "SANDBOX_DOCKER_PIDS", 128, 8, 4096, &s->pids, err) < 0 ||
        pl_setting_uint(c, "SANDBOX_DOCKER_WORK_MB", 64, 1, 65536, &s->work_mb, err) < 0 ||
        pl_setting_uint(c, "SANDBOX_DOCKER_TMP_MB", 16, 1, 65536, &s->tmp_mb, err) < 0 ||
        pl_setting_uint(c, "SANDBOX_DOCKER_WARM", 2, 0, WARM_MAX, &s->warm, err) < 0)
        return -1;
    if (pl_setting_uint(c, "SANDBOX_DOCKER_UID", PL_DOCKER_DEFAULT_UID, 1000, 4000000000u, &s->uid,
                        err) < 0)
        return -1;
    const char *sc = pl_setting(c, "SANDBOX_DOCKER_SECCOMP");
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
        size_t sclen = 0;
        int rr = pl_file_read(sc, 1u << 20, &s->seccomp, &sclen);
        if (rr < 0)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "SANDBOX_DOCKER_SECCOMP: %s %s", sc,
                                pl_file_problem(rr));
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
int dk_check_uid_unused(const struct docker_settings *s, struct pl_error *err) {
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

json_t *dk_tmpfs_opts(const struct docker_settings *st, unsigned mb) {
    char o[160];
    snprintf(o, sizeof(o), "rw,noexec,nosuid,nodev,size=%um,uid=%u,gid=%u,mode=1777", mb, st->uid,
             st->uid + GID_RUN);
    return json_string(o);
}

/* "uid:gid" for the guest's uid and one of its groups (GID_*). */
void dk_user_spec(const struct docker_settings *st, unsigned gid_off, char buf[32]) {
    snprintf(buf, 32, "%u:%u", st->uid, st->uid + gid_off);
}

/*
 * The run configuration, shared by runs and by the startup proof so the
 * proof tests exactly what runs get.  socket_dir, when set, is bind-mounted
 * read-only at /run/plimsoll (where a run's broker socket will live);
 * waiters, when set, is the bootstrap's argument that starts what waits
 * with a warm container: "waiters" a snippet's interpreters, "step" a
 * project's steps (bootstrap.py).
 */
json_t *dk_container_config(struct docker_state *s, const char *image_id, unsigned memory_mb,
                            const char *run_id, const char *socket_dir, const char *waiters) {
    const struct docker_settings *st = &s->set;
    json_t *sec = json_array();
    json_array_append_new(sec, json_string("no-new-privileges:true"));
    if (st->seccomp) {
        struct pl_buf b = {0};
        pl_buf_printf(&b, "seccomp=%s", st->seccomp);
        json_array_append_new(sec, json_stringn(b.data, b.len));
        pl_buf_free(&b);
    }
    json_t *tmpfs = json_pack("{s:o, s:o}", "/tmp", dk_tmpfs_opts(st, st->tmp_mb), "/work",
                              dk_tmpfs_opts(st, st->work_mb));
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
    json_t *cmd = json_pack("[s, s, s, s]", "python3", "-I", "-c", pl_docker_bootstrap);
    if (waiters)
        json_array_append_new(cmd, json_string(waiters));
    json_t *env = json_pack("[s, s, s, s]", "HOME=/tmp", "PYTHONUNBUFFERED=1",
                            "PYTHONDONTWRITEBYTECODE=1", "LANG=C.UTF-8");
    if (socket_dir)
        json_array_append_new(
            env, json_string("PLIMSOLL_BROKER_SOCKET=/run/plimsoll/" PL_BROKER_SOCKET_NAME));
    char user[32];
    dk_user_spec(st, GID_RUN, user);
    return json_pack("{s:s, s:o, s:o, s:s, s:s, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:o, s:o}",
                     "Image", image_id, "Cmd", cmd, "Env", env, "User", user, "WorkingDir", "/work",
                     "AttachStdin", 1, "AttachStdout", 1, "AttachStderr", 1, "OpenStdin", 1,
                     "StdinOnce", 1, "Tty", 0, "NetworkDisabled", 1, "Labels", labels, "HostConfig",
                     host);
}

/* "uid:gid" of the sandbox's runs. */
void dk_run_user(struct docker_state *s, char buf[32]) {
    dk_user_spec(&s->set, GID_RUN, buf);
}

/*
 * The container's security settings, as a digest: what must not change
 * between open and any call.  Read from the engine, not from inside.
 */
int dk_session_state(struct docker_state *s, const char *id, char ret_fp[65], bool *running,
                     bool *paused, struct pl_error *err) {
    char path[160];
    snprintf(path, sizeof(path), "/containers/%s/json", id);
    json_t *ins = NULL;
    if (dk_api_expect(s, "GET", path, NULL, 200, &ins, err) < 0)
        return -1;
    int r = pl_docker_session_fp(ins, ret_fp, running, paused);
    json_decref(ins);
    return r < 0 ? pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory") : 0;
}
