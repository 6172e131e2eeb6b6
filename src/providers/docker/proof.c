/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proof.c: the startup proof (docs/providers/docker.md, "The startup
 * proof"): the host's view of a first container, one canary per image
 * judged from its own report, and one real session when sessions are on.
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

#include "../../core/cleanup.h"
#include "../../core/log.h"
#include "docker_int.h"
#include "proof_keep.h"
#include "proof_look.h"
#include "proof_read.h"
#include "../../core/canon.h"

static void canary_handler(void *ud, const struct pl_http_request *req,
                           struct pl_http_response *resp) {
    (void)ud;
    (void)req;
    resp->status = 200;
    resp->body = "pong\n";
    resp->body_len = 5;
}

int dk_canary_start(struct docker_state *s, struct canary *c, struct pl_error *err) {
    memset(c, 0, sizeof(*c));
    dk_peer_gate_init(&c->gate, s);
    c->gate_ready = true;
    char rnd[9];
    pl_random_hex(rnd, sizeof(rnd), 4);
    snprintf(c->dir, sizeof(c->dir), "%.2000s/%s/canary-%s", s->set.run_dir, s->set.instance, rnd);
    if (dk_make_instance_dir(s, err) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "SANDBOX_DOCKER_RUN_DIR: %s", err->message);
    struct pl_broker_sock_opts o = {.dir = c->dir,
                                    .sock_name = PL_BROKER_SOCKET_NAME,
                                    .access = dk_sandbox_access(s, &c->gate),
                                    .handler = canary_handler};
    if (pl_broker_sock_start(&o, &c->sock, err) < 0)
        return pl_error_wrap(err, "SANDBOX_DOCKER_RUN_DIR: canary socket: ");
    return 0;
}

void dk_canary_stop(struct canary *c) {
    pl_broker_sock_stop(c->sock);
    c->sock = NULL;
    if (c->gate_ready)
        dk_peer_gate_destroy(&c->gate);
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

/* The display check's answer (the session image's probe only): a library
 * counts when the report says true; why one did not import is logged once,
 * its first 200 bytes. */
static void judge_display(struct docker_state *s, const char *image, const json_t *rep) {
    static const char *const names[] = {"matplotlib", "pandas"};
    bool *found[] = {&s->image_display.matplotlib, &s->image_display.pandas};
    for (size_t i = 0; i < 2; i++) {
        *found[i] = json_is_true(json_object_get(json_object_get(rep, "display"), names[i]));
        if (*found[i])
            continue;
        const char *why =
            json_string_value(json_object_get(json_object_get(rep, "display_errors"), names[i]));
        char cut[201];
        snprintf(cut, sizeof(cut), "%s", why ? why : "not reported");
        pl_log("info", "docker: a display kind is off: the session image lacks its library",
               json_pack("{s:s, s:s, s:s%}", "image", image, "library", names[i], "why", cut,
                         strlen(cut)));
    }
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

int dk_probe_image(struct docker_state *s, const char *image, const char *image_id, bool display,
                   struct canary *can, json_t *ret_langs, struct pl_error *err) {
    json_t *h = json_pack("{s:s, s:[s, s], s:[s,s,s,s,s,s,s,s,s,s,s,s], s:s, s:b}", "kind", "probe",
                          "tmpfs", "/tmp", "/work", "write_targets", "/", "/etc", "/usr", "/var",
                          "/var/tmp", "/root", "/home", "/opt", "/srv", "/run", "/tmp", "/work",
                          "socket", "/run/plimsoll/broker.sock", "display", display);
    PL_AUTO_FREE char *line = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    PL_CLEANUP(pl_buf_free) struct pl_buf hdr = {0};
    pl_buf_printf(&hdr, "%zu\n%s", strlen(line), line);
    struct cont_input in = {.image_id = image_id,
                            .memory_mb = 256,
                            .run_id = "startup-proof",
                            .socket_dir = can->dir,
                            .parts = {hdr.data},
                            .part_len = {hdr.len},
                            .nparts = 1,
                            .timeout_ms = 60000};
    PL_CLEANUP(dk_cont_pump_clear) struct cont_pump p = {0};
    struct cont_result res = {0};
    char run_id[40];
    snprintf(run_id, sizeof(run_id), "proof-%s-%.8s", strrchr(can->dir, '-') + 1, image_id + 7);
    in.run_id = run_id;
    in.gate = &can->gate;
    p.dx.out.cap = 1u << 20;
    p.dx.err.cap = 64u << 10;
    if (dk_run_container(s, &in, &p, &res, err) < 0) {
        char why[sizeof(err->message)];
        memcpy(why, err->message, sizeof(why));
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=docker: startup proof with %s failed: the canary "
                            "container did not run under %s: %.300s",
                            image, s->set.runtime, why);
    }
    PL_AUTO_JSON json_t *rep = dk_report_line(&p.dx.out.kept);
    if (!rep && p.dx.err.kept.len)
        fprintf(stderr, "plimsolld: docker probe stderr: %.*s\n", (int)p.dx.err.kept.len,
                p.dx.err.kept.data);
    if (judge_probe(s, image, rep, ret_langs, err) < 0)
        return -1;
    if (display)
        judge_display(s, image, rep);
    return 0;
}

int dk_inspect_image(struct docker_state *s, const char *setting_name, const char *ref,
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
                            "scripts/build/images)",
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
int dk_check_runtime(struct docker_state *s, char *ret_path, size_t len, json_t **ret_info,
                     struct pl_error *err) {
    json_t *info = NULL;
    if (dk_api_expect(s, "GET", "/info", NULL, 200, &info, err) < 0)
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
void dk_remove_leftover(const char *id, void *ud) {
    struct docker_state *s = ud;
    char cg[200];
    dk_remove_container(s, id);
    pl_hostview_remove_runtime_state(&s->hv, id);
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    pl_hostview_remove_cgroup(&s->hv, cg);
}

/*
 * Startup: one started container (its bootstrap waiting on stdin) shows
 * the host where a container's processes live and where the runtime keeps
 * its state; both must be where the host-side proof will look.
 */
static int hostview_check(struct docker_state *s, const char *id, struct pl_error *err) {
    char path[160], cg[200], got[256] = "";
    snprintf(path, sizeof(path), "/containers/%s/start", id);
    if (dk_api_expect(s, "POST", path, NULL, 204, NULL, err) < 0)
        return -1;
    PL_AUTO_JSON json_t *ins = NULL;
    snprintf(path, sizeof(path), "/containers/%s/json", id);
    if (dk_api_expect(s, "GET", path, NULL, 200, &ins, err) < 0)
        return -1;
    json_int_t pid = json_integer_value(json_object_get(json_object_get(ins, "State"), "Pid"));
    pl_hostview_cgroup(&s->hv, id, cg, sizeof(cg));
    if (pid <= 0 || pl_hostview_cgroup_of_pid(&s->hv, (pid_t)pid, got, sizeof(got)) < 0 ||
        strcmp(got, cg) != 0)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "SANDBOX_PROVIDER=docker: a container's processes are not in the "
                            "cgroup plimsoll asked for (%s; found \"%s\"): the engine must use "
                            "the cgroupfs driver",
                            cg, got);
    if (pl_hostview_find_runtime_root(&s->hv, id, err) < 0)
        return -1;
    /* An exec meets the profile too (under runsc by plimsoll's own helper). */
    if (s->set.seccomp) {
        static const char *const argv[] = {"grep", "-E", "^Seccomp:", "/proc/self/status"};
        struct cont_input in = {.timeout_ms = 20000};
        PL_CLEANUP(dk_cont_pump_clear) struct cont_pump e = {0};
        struct cont_result res = {0};
        e.dx.out.cap = e.dx.err.cap = 4096;
        char user[32];
        dk_run_user(s, user);
        if (dk_exec_in(s, id, user, dk_step_cmd(s, argv, 4), NULL, &in, &e, &res, err) < 0)
            return -1;
        if (res.exit_code != 0 || !e.dx.out.kept.data || !strstr(e.dx.out.kept.data, "Seccomp:\t2"))
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "SANDBOX_PROVIDER=docker: a process started with docker exec has "
                                "no seccomp filter under %s (exit %d)",
                                s->set.runtime, res.exit_code);
    }
    if (s->hv.runsc) {
        PL_AUTO_FREE long *pids = NULL;
        size_t n = 0;
        if (pl_hostview_runsc_ps(&s->hv, id, &pids, &n, err) < 0)
            return -1;
        if (n < 1)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "SANDBOX_PROVIDER=docker: runsc ps listed no process in a running "
                                "sandbox");
    }
    return 0;
}

int dk_hostview_discover(struct docker_state *s, struct pl_error *err) {
    char run_id[40] = "hostview-", id[72] = "";
    pl_random_hex(run_id + 9, sizeof(run_id) - 9, 8);
    if (dk_create_container(s, s->snippet_id, s->default_memory_mb, run_id, NULL, NULL, id, err) <
        0)
        return -1;
    int rc = hostview_check(s, id, err);
    if (dk_remove_container_patiently(s, id, 5) < 0 && rc == 0)
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "SANDBOX_PROVIDER=docker: the startup container %.12s could not be "
                          "removed",
                          id);
    return rc;
}

/* The startup session proof's refusal; returns -1. */
#define PROOF_FAIL(...)                                                                            \
    pl_error_set(err, PL_REASON_INTERNAL,                                                          \
                 "SANDBOX_MAX_SESSIONS: the startup session proof failed: " __VA_ARGS__)

/* The first two calls: a file kept, no process left. */
static int proof_steps(struct docker_state *s, struct dsession *d, const struct pl_run_ctx *ctx,
                       struct pl_error *err) {
    const char *steps[] = {pl_docker_proof_keep, pl_docker_proof_look};
    const char *want[] = {"started\n", "0 kept\n"};
    for (int i = 0; i < 2; i++) {
        struct pl_run_request req = {.kind = PL_PAYLOAD_SNIPPET};
        req.snippet.language = "python";
        req.snippet.code = steps[i];
        req.snippet.code_len = strlen(steps[i]);
        req.snippet.stdin_data = "";
        struct pl_run_result res = {0};
        int r = dk_session_run(s, d, ctx, &req, &res, err);
        bool good = r == 0 && res.exit_code == 0 && res.out && strcmp(res.out, want[i]) == 0;
        char got[160];
        snprintf(got, sizeof(got), "%.60s|%.80s", res.out ? res.out : "", res.err ? res.err : "");
        pl_run_result_clear(&res);
        if (r < 0)
            return -1;
        if (!good)
            return PROOF_FAIL("call %d answered \"%s\" instead of \"%s\"", i + 1, got, want[i]);
    }
    return 0;
}

/* Two cells in each language: the second sees what the first defined. */
static int proof_cells(struct docker_state *s, struct dsession *d, const struct pl_run_ctx *ctx,
                       json_t *ret_langs, struct pl_error *err) {
    for (int lang = 0; lang < 2; lang++) {
        const char *cells[2] = {lang == LANG_PY ? "x = 41" : "globalThis.x = 41", "x + 1"};
        bool fresh[2];
        char out[2][64];
        for (int i = 0; i < 2; i++) {
            struct pl_run_request req = {.kind = PL_PAYLOAD_CELL};
            req.cell.language = dk_lang_name[lang];
            req.cell.code = cells[i];
            req.cell.code_len = strlen(cells[i]);
            struct pl_run_result res = {0};
            int r = dk_session_run(s, d, ctx, &req, &res, err);
            fresh[i] = res.interpreter_started;
            snprintf(out[i], sizeof(out[i]), "%d:%.50s", res.exit_code, res.out ? res.out : "");
            pl_run_result_clear(&res);
            if (r < 0)
                return -1;
        }
        if (!fresh[0] || fresh[1] || strcmp(out[1], "0:42\n") != 0)
            return PROOF_FAIL("%s cells: the second saw \"%s\" (fresh %d, %d); the interpreter "
                              "must keep what the first defined",
                              dk_lang_name[lang], out[1], fresh[0], fresh[1]);
        json_array_append_new(ret_langs, json_string(dk_lang_name[lang]));
    }
    return 0;
}

/* The session's calls, a pause and a resume among them, and the cleaner's
 * verdict. */
static int proof_calls(struct docker_state *s, struct dsession *d, const struct pl_run_ctx *ctx,
                       json_t *ret_langs, struct pl_error *err) {
    if (proof_steps(s, d, ctx, err) < 0)
        return -1;
    if (dk_session_pause(s, d) < 0 || dk_session_resume(s, d, err) < 0)
        return PROOF_FAIL("pausing and resuming the sandbox failed");
    if (proof_cells(s, d, ctx, ret_langs, err) < 0)
        return -1;
    struct pl_run_request req = {.kind = PL_PAYLOAD_SNIPPET};
    req.snippet.language = "python";
    req.snippet.code = pl_docker_proof_read;
    req.snippet.code_len = strlen(req.snippet.code);
    req.snippet.stdin_data = "";
    struct pl_run_result res = {0};
    int r = dk_session_run(s, d, ctx, &req, &res, err);
    bool kept = r == 0 && res.out && strcmp(res.out, "kept\n") == 0;
    pl_run_result_clear(&res);
    if (!kept)
        return PROOF_FAIL("a file did not survive the calls and a pause");
    dk_cleaner_join(d);
    if (d->verdict[0])
        return PROOF_FAIL("%s", d->verdict);
    return 0;
}

/* The proof's session closed; after a proof that passed (ok 0), closing
 * must end it: the container goes.  The proof's answer. */
static int proof_close(struct docker_state *s, struct dsession *d, int ok, struct pl_error *err) {
    char id[72];
    memcpy(id, d->id, sizeof(id));
    dk_session_close(s, d);
    if (ok < 0)
        return ok;
    char path[160];
    long st = 0;
    struct pl_error e = {0};
    snprintf(path, sizeof(path), "/containers/%s/json", id);
    for (int i = 0; i < 100; i++) {
        if (pl_docker_call(s->engine, "GET", path, NULL, API_TIMEOUT_MS, &st, NULL, &e) == 0 &&
            st == 404)
            break;
        usleep(50000);
    }
    if (st != 404)
        return PROOF_FAIL("closing the session did not remove its sandbox");
    return 0;
}

/* With sessions on, one real session before serving (docs/sessions.md).
 * The session's close is a call after the calls, not a cleanup: whether
 * it removed the sandbox is part of the answer. */
int dk_session_proof(struct docker_state *s, unsigned memory_mb, json_t *ret_langs,
                     struct pl_error *err) {
    const char *none[] = {NULL};
    char tag[17] = "proof-"; /* two daemons may start at once: a name of its own */
    pl_random_hex(tag + 6, sizeof(tag) - 6, 5);
    struct pl_session_open o = {
        .principal = "startup-proof", .memory_mb = memory_mb, .tag = tag, .languages = none};
    void *h = NULL;
    struct pl_run_ctx ctx = {.principal = "startup-proof",
                             .timeout_ms = 30000,
                             .memory_mb = memory_mb,
                             .output_bytes = 65536};
    snprintf(ctx.run_id, sizeof(ctx.run_id), "startup-proof");
    if (dk_session_open(s, &o, &h, err) < 0)
        return -1;
    struct dsession *d = h;
    int ok = proof_calls(s, d, &ctx, ret_langs, err);
    if (ok < 0 && strncmp(err->message, "SANDBOX_MAX_SESSIONS", 20) != 0) {
        char m[sizeof(err->message)];
        snprintf(m, sizeof(m), "%s", err->message);
        pl_error_set(err, PL_REASON_INTERNAL,
                     "SANDBOX_MAX_SESSIONS: the startup session proof failed: %.400s", m);
    }
    return d ? proof_close(s, d, ok, err) : ok;
}
#undef PROOF_FAIL
