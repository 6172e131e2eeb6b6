/* SPDX-License-Identifier: Apache-2.0 */
/*
 * calls.c: libplimsoll's calls: Describe, the runs and the sessions.
 *
 * Each call builds its message, sends it through plc_call() (client.c),
 * or plc_call_stream() for live output, and checks what comes back before
 * handing it over: a run's answer must meet the floor the request or its
 * session set, then carry a record that checks against what was sent
 * (record.c); a session's answers must chain.  A streaming call's result
 * is checked exactly as the unary call's.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/canon.h"
#include "../core/tier.h"
#include "lib.h"

struct plimsoll_session {
    plimsoll_client *c;
    char id[65];
    char *floor;
    plimsoll_chain *chain;
    /* the daemon that holds the session, sent as Plimsoll-Route with each
     * of its calls; "" for none */
    char route[PLC_ROUTE_MAX + 1];
};

/* ---- the checks of a run's answer ----------------------------------------- */

/* A string member holding no NUL, or NULL: "vm\\u0000" is no tier. */
static const char *exact_string(const json_t *v) {
    const char *s = json_string_value(v);
    return s && strlen(s) == json_string_length(v) ? s : NULL;
}

static int tier_rank(const char *s) {
    enum pl_tier t;
    return s && pl_tier_parse(s, &t) == 0 ? (int)t : -1;
}

/* The checks of a 200 answer to a run: the floor first, then the record. */
static int check_answer(plimsoll_client *c, const json_t *sent, const json_t *answer,
                        const char *floor, const char *previous, struct plimsoll_error *err) {
    if (floor && *floor) {
        const char *riso =
            exact_string(json_object_get(json_object_get(answer, "record"), "isolation"));
        /* A file call's answer has no tier of its own: its record's. */
        const char *iso = json_object_get(answer, "isolation")
                              ? exact_string(json_object_get(answer, "isolation"))
                              : riso;
        int want = tier_rank(floor);
        if (tier_rank(iso) < want || tier_rank(riso) < want) {
            plc_fail(err, PLIMSOLL_E_ISOLATION_EVIDENCE_MISMATCH,
                     "asked for at least %s, the answer says %s (record: %s); the code may "
                     "have run",
                     floor, iso ? iso : "(missing)", riso ? riso : "(missing)");
            if (err) {
                snprintf(err->code, sizeof(err->code), "data_loss");
                snprintf(err->isolation, sizeof(err->isolation), "%s", iso ? iso : "");
                err->dispatched = true;
            }
            return -1;
        }
    }
    if (c->skip_checks)
        return 0;
    return plimsoll_check_record(sent, answer, NULL, previous, err);
}

/* A streaming call's output function, and the steps its request has. */
struct live {
    plimsoll_output_fn on_output;
    void *userdata;
    unsigned nsteps;
};

/* method (unary), or its streaming twin when live is set, on route. */
static int run_call(plimsoll_client *c, const char *method, const json_t *msg, const char *route,
                    const json_t *sent, const char *floor, plimsoll_chain *chain,
                    const struct live *live, json_t **ret, struct plimsoll_error *err) {
    json_t *answer = NULL;
    if (!ret)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no place for the answer");
    if (live) {
        char name[32];
        snprintf(name, sizeof(name), "%sStream", method);
        if (plc_call_stream(c, name, msg, route, live->nsteps, live->on_output, live->userdata,
                            &answer, err) < 0)
            return -1;
    } else if (plc_call(c, method, msg, route, &answer, err) < 0) {
        return -1;
    }
    if (check_answer(c, sent, answer, floor, chain ? plimsoll_chain_head(chain) : NULL, err) < 0 ||
        (chain && plimsoll_chain_append(chain, sent, answer, err) < 0)) {
        json_decref(answer);
        return -1;
    }
    *ret = answer;
    return 0;
}

/* ---- the calls ------------------------------------------------------------ */

int plimsoll_describe(plimsoll_client *c, json_t **ret, struct plimsoll_error *err) {
    json_t *msg = json_object();
    int r =
        msg ? plc_call(c, "Describe", msg, NULL, ret, err) : plc_fail(err, PLIMSOLL_E_USAGE, "oom");
    json_decref(msg);
    return r;
}

int plimsoll_explain(plimsoll_client *c, const json_t *request, json_t **ret,
                     struct plimsoll_error *err) {
    if (!json_is_object(request))
        return plc_fail(err, PLIMSOLL_E_USAGE, "an ExplainRequest is a JSON object");
    if (!ret)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no place for the answer");
    return plc_call(c, "Explain", request, NULL, ret, err);
}

int plimsoll_run(plimsoll_client *c, const json_t *request, json_t **ret,
                 struct plimsoll_error *err) {
    if (!json_is_object(request))
        return plc_fail(err, PLIMSOLL_E_USAGE, "a RunRequest is a JSON object");
    const char *floor = json_string_value(json_object_get(request, "minimum_isolation"));
    return run_call(c, "Run", request, NULL, request, floor, NULL, NULL, ret, err);
}

int plimsoll_run_stream(plimsoll_client *c, const json_t *request, plimsoll_output_fn on_output,
                        void *userdata, json_t **ret, struct plimsoll_error *err) {
    if (!json_is_object(request))
        return plc_fail(err, PLIMSOLL_E_USAGE, "a RunRequest is a JSON object");
    const char *floor = json_string_value(json_object_get(request, "minimum_isolation"));
    /* A project's chunks name its steps, from 1. */
    size_t nsteps = json_array_size(json_object_get(json_object_get(request, "project"), "steps"));
    if (nsteps > 0xffffu)
        return plc_fail(err, PLIMSOLL_E_USAGE, "a project has at most 65535 steps here");
    struct live live = {on_output, userdata, (unsigned)nsteps};
    return run_call(c, "Run", request, NULL, request, floor, NULL, &live, ret, err);
}

/* Add the run options to req (a new reference, stolen); NULL on OOM. */
static json_t *with_options(json_t *req, const struct plimsoll_run_options *ro) {
    if (!req || !ro)
        return req;
    int bad = 0;
    if (ro->minimum_isolation)
        bad |= json_object_set_new(req, "minimum_isolation", json_string(ro->minimum_isolation));
    if (ro->grant_profile)
        bad |= json_object_set_new(req, "grant_profile", json_string(ro->grant_profile));
    if (ro->timeout_ms)
        bad |= json_object_set_new(req, "timeout_ms", json_integer(ro->timeout_ms));
    if (ro->memory_mb)
        bad |= json_object_set_new(req, "memory_mb", json_integer(ro->memory_mb));
    if (bad) {
        json_decref(req);
        return NULL;
    }
    return req;
}

static int run_built(plimsoll_client *c, json_t *req, json_t **ret, struct plimsoll_error *err) {
    if (!req)
        return plc_fail(err, PLIMSOLL_E_USAGE,
                        "the request cannot be built (text must be valid UTF-8)");
    int r = plimsoll_run(c, req, ret, err);
    json_decref(req);
    return r;
}

/* collect, when given, is an array of strings: checked before anything is
 * sent, as the daemon would refuse it. */
static int check_collect(const json_t *collect, struct plimsoll_error *err) {
    if (!collect)
        return 0;
    if (!json_is_array(collect))
        return plc_fail(err, PLIMSOLL_E_USAGE, "collect is an array of glob strings");
    for (size_t i = 0; i < json_array_size(collect); i++)
        if (!json_is_string(json_array_get(collect, i)))
            return plc_fail(err, PLIMSOLL_E_USAGE, "collect glob %zu is not a string", i);
    return 0;
}

/* payload with "collect" set to collect (borrowed) when it names globs;
 * NULL (payload released) when memory ran out. */
static json_t *with_collect(json_t *payload, const json_t *collect) {
    if (payload && collect && json_array_size(collect) &&
        json_object_set(payload, "collect", (json_t *)collect) < 0) {
        json_decref(payload);
        return NULL;
    }
    return payload;
}

int plimsoll_run_snippet_collect(plimsoll_client *c, const char *language, const char *code,
                                 const json_t *collect, const struct plimsoll_run_options *ro,
                                 json_t **ret, struct plimsoll_error *err) {
    if (!language || !code)
        return plc_fail(err, PLIMSOLL_E_USAGE, "a snippet needs a language and code");
    if (check_collect(collect, err) < 0)
        return -1;
    json_t *sn = json_pack("{s:s, s:s}", "language", language, "code", code);
    if (sn && ro && ro->stdin_data &&
        json_object_set_new(sn, "stdin", json_string(ro->stdin_data)) < 0) {
        json_decref(sn);
        sn = NULL;
    }
    sn = with_collect(sn, collect);
    return run_built(c, with_options(sn ? json_pack("{s:o}", "snippet", sn) : NULL, ro), ret, err);
}

int plimsoll_run_snippet(plimsoll_client *c, const char *language, const char *code,
                         const struct plimsoll_run_options *ro, json_t **ret,
                         struct plimsoll_error *err) {
    return plimsoll_run_snippet_collect(c, language, code, NULL, ro, ret, err);
}

int plimsoll_run_project_collect(plimsoll_client *c, const json_t *files, const json_t *steps,
                                 const json_t *collect, const struct plimsoll_run_options *ro,
                                 json_t **ret, struct plimsoll_error *err) {
    if (!json_is_array(steps) || (files && !json_is_array(files)) ||
        (collect && !json_is_array(collect)))
        return plc_fail(err, PLIMSOLL_E_USAGE,
                        "a project has an array of steps (and of files, and of collect globs)");
    if (check_collect(collect, err) < 0)
        return -1;
    json_t *p = json_pack("{s:O}", "steps", (json_t *)steps);
    if (p && files && json_object_set(p, "files", (json_t *)files) < 0) {
        json_decref(p);
        p = NULL;
    }
    p = with_collect(p, collect);
    return run_built(c, with_options(p ? json_pack("{s:o}", "project", p) : NULL, ro), ret, err);
}

int plimsoll_run_project(plimsoll_client *c, const json_t *files, const json_t *steps,
                         const struct plimsoll_run_options *ro, json_t **ret,
                         struct plimsoll_error *err) {
    return plimsoll_run_project_collect(c, files, steps, NULL, ro, ret, err);
}

/* ---- a project's artifacts, saved ------------------------------------------ */

/* The exact bytes of a text member and its _base64 twin: the twin's when
 * present.  Returns 0 with *ret malloc'd (NUL-terminated past *ret_len). */
static int exact_bytes(const json_t *obj, const char *name, const char *b64_name,
                       unsigned char **ret, size_t *ret_len) {
    const json_t *b64 = json_object_get(obj, b64_name);
    if (json_is_string(b64) && json_string_length(b64) > 0) {
        unsigned char *raw = NULL;
        size_t n = 0;
        if (pl_base64_decode(json_string_value(b64), json_string_length(b64), SIZE_MAX - 1, &raw,
                             &n) < 0)
            return -1;
        unsigned char *out = realloc(raw, n + 1);
        if (!out) {
            free(raw);
            return -1;
        }
        out[n] = 0;
        *ret = out;
        *ret_len = n;
        return 0;
    }
    const json_t *text = json_object_get(obj, name);
    size_t n = json_is_string(text) ? json_string_length(text) : 0;
    unsigned char *out = malloc(n + 1);
    if (!out)
        return -1;
    if (n)
        memcpy(out, json_string_value(text), n);
    out[n] = 0;
    *ret = out;
    *ret_len = n;
    return 0;
}

/* A path that cannot leave the directory it is saved below: relative, no
 * NUL, no empty, "." or ".." segment. */
static bool artifact_path_ok(const unsigned char *p, size_t n) {
    if (n == 0 || p[0] == '/' || memchr(p, 0, n))
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/')
            continue;
        size_t len = i - start;
        if (len == 0 || (len == 1 && p[start] == '.') ||
            (len == 2 && p[start] == '.' && p[start + 1] == '.'))
            return false;
        start = i + 1;
    }
    return true;
}

static int artifact_path(const json_t *a, unsigned char **ret, size_t *ret_len,
                         struct plimsoll_error *err) {
    if (!json_is_object(a))
        return plc_fail(err, PLIMSOLL_E_USAGE, "an artifact is an object of a RunResponse");
    if (exact_bytes(a, "path", "path_base64", ret, ret_len) < 0)
        return plc_fail(err, PLIMSOLL_E_USAGE, "an artifact's path_base64 is not base64");
    if (!artifact_path_ok(*ret, *ret_len)) {
        plc_fail(err, PLIMSOLL_E_USAGE,
                 "artifact path \"%.200s\" is empty or absolute, or has an empty, \".\" or "
                 "\"..\" segment; not saved",
                 (const char *)*ret);
        free(*ret);
        *ret = NULL;
        return -1;
    }
    return 0;
}

int plimsoll_artifact_save(const json_t *artifact, const char *dir, struct plimsoll_error *err) {
    unsigned char *path = NULL, *data = NULL;
    size_t plen = 0, dlen = 0;
    if (!dir)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no directory to save the artifact below");
    if (artifact_path(artifact, &path, &plen, err) < 0)
        return -1;
    if (exact_bytes(artifact, "content", "content_base64", &data, &dlen) < 0) {
        plc_fail(err, PLIMSOLL_E_USAGE, "artifact %.200s: content_base64 is not base64",
                 (const char *)path);
        free(path);
        return -1;
    }
    int rc = -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        plc_fail(err, PLIMSOLL_E_USAGE, "%s: %s", dir, strerror(errno));
        goto out;
    }
    char *name = (char *)path;
    for (;;) {
        char *slash = strchr(name, '/');
        if (slash)
            *slash = 0;
        struct stat st;
        bool exists = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (exists && S_ISLNK(st.st_mode)) {
            plc_fail(err, PLIMSOLL_E_USAGE, "artifact: %.200s is a symlink in %s; not saved",
                     (const char *)path, dir);
            goto out;
        }
        if (!slash) {
            int out = openat(fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
            if (out < 0) {
                plc_fail(err, PLIMSOLL_E_USAGE, "artifact %.200s: %s", (const char *)path,
                         strerror(errno));
                goto out;
            }
            size_t done = 0;
            while (done < dlen) {
                ssize_t w = write(out, data + done, dlen - done);
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0) {
                    plc_fail(err, PLIMSOLL_E_USAGE, "artifact %.200s: %s", (const char *)path,
                             strerror(errno));
                    close(out);
                    goto out;
                }
                done += (size_t)w;
            }
            if (close(out) < 0) {
                plc_fail(err, PLIMSOLL_E_USAGE, "artifact %.200s: %s", (const char *)path,
                         strerror(errno));
                goto out;
            }
            rc = 0;
            goto out;
        }
        if (!exists && mkdirat(fd, name, 0777) < 0 && errno != EEXIST) {
            plc_fail(err, PLIMSOLL_E_USAGE, "artifact %.200s: %s", (const char *)path,
                     strerror(errno));
            goto out;
        }
        int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
            plc_fail(err, PLIMSOLL_E_USAGE, "artifact %.200s: %s", (const char *)path,
                     strerror(errno));
            goto out;
        }
        close(fd);
        fd = sub;
        *slash = '/';
        name = slash + 1;
    }
out:
    if (fd >= 0)
        close(fd);
    free(path);
    free(data);
    return rc;
}

int plimsoll_save_artifacts(const json_t *result, const char *dir, struct plimsoll_error *err) {
    const json_t *arts = json_object_get(result, "artifacts");
    size_t i;
    const json_t *a;
    json_array_foreach(arts, i, a) {
        unsigned char *path = NULL;
        size_t n = 0;
        if (artifact_path(a, &path, &n, err) < 0)
            return -1;
        free(path);
    }
    json_array_foreach(arts, i, a) {
        if (plimsoll_artifact_save(a, dir, err) < 0)
            return -1;
    }
    return (int)json_array_size(arts);
}

int plimsoll_run_module(plimsoll_client *c, const void *wasm, size_t len, const char *const *args,
                        size_t nargs, const struct plimsoll_run_options *ro, json_t **ret,
                        struct plimsoll_error *err) {
    if (!wasm || !len)
        return plc_fail(err, PLIMSOLL_E_USAGE, "a module needs its bytes");
    char *b64 = pl_base64_encode(wasm, len, 1);
    json_t *m = b64 ? json_pack("{s:s}", "wasm_base64", b64) : NULL;
    free(b64);
    if (m && nargs) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < nargs; i++)
            if (json_array_append_new(a, json_string(args[i])) < 0) {
                json_decref(a);
                a = NULL;
            }
        if (!a || json_object_set_new(m, "args", a) < 0) {
            json_decref(m);
            m = NULL;
        }
    }
    if (m && ro && ro->stdin_data &&
        json_object_set_new(m, "stdin", json_string(ro->stdin_data)) < 0) {
        json_decref(m);
        m = NULL;
    }
    return run_built(c, with_options(m ? json_pack("{s:o}", "module", m) : NULL, ro), ret, err);
}

/* ---- sessions ------------------------------------------------------------- */

static bool id_ok(const char *id) {
    return id && strlen(id) == 64 && strspn(id, "0123456789abcdef") == 64;
}

/* OpenSession: the session's id, and its route when ret_route is set
 * ("" when the daemon named none). */
static int open_session(plimsoll_client *c, const char *const *languages, char ret_id[65],
                        char ret_route[PLC_ROUTE_MAX + 1], struct plimsoll_error *err) {
    json_t *msg = json_object();
    if (msg && languages) {
        json_t *a = json_array();
        for (size_t i = 0; a && languages[i]; i++)
            json_array_append_new(a, json_string(languages[i]));
        json_object_set_new(msg, "languages", a);
    }
    if (!msg)
        return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    json_t *answer = NULL;
    int r = plc_call(c, "OpenSession", msg, NULL, &answer, err);
    json_decref(msg);
    if (r < 0)
        return -1;
    const char *id = exact_string(json_object_get(answer, "session_id"));
    const char *route = json_string_value(json_object_get(answer, "route"));
    if (!id_ok(id)) {
        json_decref(answer);
        return plc_protocol_fail(err, "OpenSession", 200, "the answer names no session");
    }
    if (route && *route &&
        !(exact_string(json_object_get(answer, "route")) && plc_route_ok(route))) {
        json_decref(answer);
        return plc_protocol_fail(err, "OpenSession", 200,
                                 "its route is not 1 to %d of [A-Za-z0-9._-]", PLC_ROUTE_MAX);
    }
    memcpy(ret_id, id, 65);
    if (ret_route)
        snprintf(ret_route, PLC_ROUTE_MAX + 1, "%s", route ? route : "");
    json_decref(answer);
    return 0;
}

int plimsoll_open_session(plimsoll_client *c, const char *const *languages, char ret_id[65],
                          struct plimsoll_error *err) {
    return open_session(c, languages, ret_id, NULL, err);
}

static int in_session(plimsoll_client *c, const char *id, const json_t *run, const char *route,
                      const char *floor, plimsoll_chain *chain, json_t **ret,
                      struct plimsoll_error *err) {
    if (!id_ok(id) || !json_is_object(run))
        return plc_fail(err, PLIMSOLL_E_USAGE, "a session id and a RunRequest object");
    /* A session's floor goes with every run that sets none, so the daemon
     * refuses below it before anything runs. */
    const char *f = json_string_value(json_object_get(run, "minimum_isolation"));
    json_t *sent = json_copy((json_t *)run);
    if (sent && !(f && *f) && floor && *floor &&
        json_object_set_new(sent, "minimum_isolation", json_string(floor)) < 0) {
        json_decref(sent);
        sent = NULL;
    }
    json_t *msg = sent ? json_pack("{s:s, s:O}", "session_id", id, "run", sent) : NULL;
    if (!msg) {
        json_decref(sent);
        return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    }
    int r =
        run_call(c, "RunInSession", msg, route, sent, f && *f ? f : floor, chain, NULL, ret, err);
    json_decref(msg);
    json_decref(sent);
    return r;
}

static int cell_call(plimsoll_client *c, const char *id, const json_t *cell, unsigned timeout_ms,
                     const char *route, const char *floor, plimsoll_chain *chain,
                     const struct live *live, json_t **ret, struct plimsoll_error *err) {
    if (!id_ok(id) || !json_is_object(cell))
        return plc_fail(err, PLIMSOLL_E_USAGE, "a session id and a Cell object");
    json_t *sent = json_pack("{s:O}", "cell", (json_t *)cell);
    if (sent && timeout_ms)
        json_object_set_new(sent, "timeout_ms", json_integer(timeout_ms));
    json_t *msg = sent ? json_copy(sent) : NULL;
    if (!msg || json_object_set_new(msg, "session_id", json_string(id)) < 0) {
        json_decref(sent);
        json_decref(msg);
        return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    }
    int r = run_call(c, "RunCell", msg, route, sent, floor, chain, live, ret, err);
    json_decref(msg);
    json_decref(sent);
    return r;
}

int plimsoll_run_in_session(plimsoll_client *c, const char *session_id, const json_t *run,
                            json_t **ret, struct plimsoll_error *err) {
    return in_session(c, session_id, run, NULL, NULL, NULL, ret, err);
}

int plimsoll_run_cell(plimsoll_client *c, const char *session_id, const json_t *cell,
                      unsigned timeout_ms, json_t **ret, struct plimsoll_error *err) {
    return cell_call(c, session_id, cell, timeout_ms, NULL, NULL, NULL, NULL, ret, err);
}

int plimsoll_run_cell_stream(plimsoll_client *c, const char *session_id, const json_t *cell,
                             unsigned timeout_ms, plimsoll_output_fn on_output, void *userdata,
                             json_t **ret, struct plimsoll_error *err) {
    struct live live = {on_output, userdata, 0};
    return cell_call(c, session_id, cell, timeout_ms, NULL, NULL, NULL, &live, ret, err);
}

static int close_session(plimsoll_client *c, const char *session_id, const char *route,
                         struct plimsoll_error *err) {
    if (!id_ok(session_id))
        return plc_fail(err, PLIMSOLL_E_USAGE, "a session id is 64 lowercase hex digits");
    json_t *msg = json_pack("{s:s}", "session_id", session_id);
    json_t *answer = NULL;
    int r = msg ? plc_call(c, "CloseSession", msg, route, &answer, err)
                : plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    json_decref(msg);
    json_decref(answer);
    return r;
}

int plimsoll_close_session(plimsoll_client *c, const char *session_id, struct plimsoll_error *err) {
    return close_session(c, session_id, NULL, err);
}

int plimsoll_list_sessions(plimsoll_client *c, json_t **ret, struct plimsoll_error *err) {
    json_t *msg = json_object();
    int r = msg ? plc_call(c, "ListSessions", msg, NULL, ret, err)
                : plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    json_decref(msg);
    return r;
}

/* GetSession and ExtendSession on route: a SessionInfo naming the session
 * asked for, and a route that is none or one a daemon may have. */
static int session_info_call(plimsoll_client *c, const char *method, const char *session_id,
                             unsigned ends_in_s, const char *route, json_t **ret,
                             struct plimsoll_error *err) {
    *ret = NULL;
    if (!id_ok(session_id))
        return plc_fail(err, PLIMSOLL_E_USAGE, "a session id is 64 lowercase hex digits");
    json_t *msg = json_pack("{s:s}", "session_id", session_id);
    if (msg && ends_in_s)
        json_object_set_new(msg, "ends_in_s", json_integer(ends_in_s));
    int r = msg ? plc_call(c, method, msg, route, ret, err)
                : plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    json_decref(msg);
    const char *got = r == 0 ? exact_string(json_object_get(*ret, "session_id")) : NULL;
    const json_t *their = r == 0 ? json_object_get(*ret, "route") : NULL;
    const char *why = NULL;
    if (r == 0 && (!got || strcmp(got, session_id) != 0))
        why = "the answer is about another session";
    else if (their && json_string_length(their) > 0 &&
             !(exact_string(their) && plc_route_ok(json_string_value(their))))
        why = "its route is not 1 to 63 of [A-Za-z0-9._-]";
    if (why) {
        json_decref(*ret);
        *ret = NULL;
        return plc_protocol_fail(err, method, 200, "%s", why);
    }
    return r;
}

int plimsoll_get_session(plimsoll_client *c, const char *session_id, json_t **ret,
                         struct plimsoll_error *err) {
    return session_info_call(c, "GetSession", session_id, 0, NULL, ret, err);
}

static int extend_session(plimsoll_client *c, const char *session_id, unsigned ends_in_s,
                          const char *route, json_t **ret, struct plimsoll_error *err) {
    if (ends_in_s == 0) {
        *ret = NULL;
        return plc_fail(err, PLIMSOLL_E_USAGE, "ends_in_s: a whole number of seconds from 1");
    }
    return session_info_call(c, "ExtendSession", session_id, ends_in_s, route, ret, err);
}

int plimsoll_extend_session(plimsoll_client *c, const char *session_id, unsigned ends_in_s,
                            json_t **ret, struct plimsoll_error *err) {
    return extend_session(c, session_id, ends_in_s, NULL, ret, err);
}

/* A handle for session_id with its chain starting at previous. */
static plimsoll_session *session_new(plimsoll_client *c, const char *previous, const char *floor,
                                     struct plimsoll_error *err) {
    if (floor && tier_rank(floor) < 0) {
        plc_fail(err, PLIMSOLL_E_USAGE, "the floor is none, process, container, kernel or vm");
        return NULL;
    }
    plimsoll_session *s = calloc(1, sizeof(*s));
    if (!s || !(s->chain = plimsoll_chain_new(previous)) ||
        (floor && !(s->floor = strdup(floor)))) {
        plimsoll_session_free(s);
        plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
        return NULL;
    }
    s->c = c;
    return s;
}

plimsoll_session *plimsoll_session_connect_route(plimsoll_client *c, const char *session_id,
                                                 const char *floor, const char *route,
                                                 struct plimsoll_error *err) {
    if (route && *route && !plc_route_ok(route)) {
        plc_fail(err, PLIMSOLL_E_USAGE,
                 "route: 1 to %d of A-Z, a-z, 0-9, '.', '_' and '-' (a daemon's "
                 "PLIMSOLL_INSTANCE), not \"%.80s\"",
                 PLC_ROUTE_MAX, route);
        return NULL;
    }
    json_t *info = NULL;
    if (session_info_call(c, "GetSession", session_id, 0, route, &info, err) < 0)
        return NULL;
    const char *state = exact_string(json_object_get(info, "state"));
    const char *prev = exact_string(json_object_get(info, "previous_digest"));
    plimsoll_session *s = NULL;
    if (state && strcmp(state, "ended") == 0) {
        const char *why = json_string_value(json_object_get(info, "ended_reason"));
        plc_fail(err, PLIMSOLL_E_SESSION_ENDED, "the session has ended: %s", why ? why : "");
        snprintf(err->reason, sizeof(err->reason), "SESSION_ENDED");
        snprintf(err->code, sizeof(err->code), "failed_precondition");
        snprintf(err->ended_reason, sizeof(err->ended_reason), "%s", why ? why : "");
    } else if (!state || (strcmp(state, "ready") != 0 && strcmp(state, "paused") != 0)) {
        plc_protocol_fail(err, "GetSession", 200, "the session's state is none the API has");
    } else if (!prev || (*prev && (strlen(prev) != 64 || strspn(prev, "0123456789abcdef") != 64))) {
        plc_protocol_fail(err, "GetSession", 200, "previous_digest is not a SHA-256 digest");
    } else if ((s = session_new(c, prev, floor, err)) != NULL) {
        memcpy(s->id, session_id, 65);
        /* The route given, else the one GetSession answered (checked). */
        const char *theirs = json_string_value(json_object_get(info, "route"));
        snprintf(s->route, sizeof(s->route), "%s", route && *route ? route : theirs ? theirs : "");
    }
    json_decref(info);
    return s;
}

plimsoll_session *plimsoll_session_connect(plimsoll_client *c, const char *session_id,
                                           const char *floor, struct plimsoll_error *err) {
    return plimsoll_session_connect_route(c, session_id, floor, NULL, err);
}

const char *plimsoll_session_route(const plimsoll_session *s) {
    return s ? s->route : "";
}

int plimsoll_session_info(plimsoll_session *s, json_t **ret, struct plimsoll_error *err) {
    if (!s)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no session");
    return session_info_call(s->c, "GetSession", s->id, 0, s->route, ret, err);
}

int plimsoll_session_extend(plimsoll_session *s, unsigned ends_in_s, json_t **ret,
                            struct plimsoll_error *err) {
    if (!s)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no session");
    return extend_session(s->c, s->id, ends_in_s, s->route, ret, err);
}

/* ---- a session's files ----------------------------------------------------- */

/* A file call: sent is the message without session_id (what the record's
 * request digest covers), the session's chain and floor when s is set. */
static int file_call(plimsoll_client *c, const char *id, const char *method, json_t *sent,
                     const char *route, const char *floor, plimsoll_chain *chain, json_t **ret,
                     struct plimsoll_error *err) {
    if (!id_ok(id)) {
        json_decref(sent);
        return plc_fail(err, PLIMSOLL_E_USAGE, "a session id is 64 lowercase hex digits");
    }
    json_t *msg = sent ? json_copy(sent) : NULL;
    if (!msg || json_object_set_new(msg, "session_id", json_string(id)) < 0) {
        json_decref(sent);
        json_decref(msg);
        return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    }
    int r = run_call(c, method, msg, route, sent, floor, chain, NULL, ret, err);
    json_decref(msg);
    json_decref(sent);
    return r;
}

static json_t *write_msg(const json_t *files) {
    return json_is_array(files) ? json_pack("{s:O}", "files", (json_t *)files) : NULL;
}

static json_t *read_msg(const char *path, unsigned offset, unsigned limit) {
    json_t *m = path ? json_pack("{s:s}", "path", path) : NULL;
    if (m && offset)
        json_object_set_new(m, "offset", json_integer(offset));
    if (m && limit)
        json_object_set_new(m, "limit", json_integer(limit));
    return m;
}

static json_t *list_msg(const char *path, unsigned depth) {
    json_t *m = json_object();
    if (m && path && *path)
        json_object_set_new(m, "path", json_string(path));
    if (m && depth)
        json_object_set_new(m, "depth", json_integer(depth));
    return m;
}

int plimsoll_write_files(plimsoll_client *c, const char *session_id, const json_t *files,
                         json_t **ret, struct plimsoll_error *err) {
    return file_call(c, session_id, "WriteFiles", write_msg(files), NULL, NULL, NULL, ret, err);
}

int plimsoll_read_file(plimsoll_client *c, const char *session_id, const char *path,
                       unsigned offset, unsigned limit, json_t **ret, struct plimsoll_error *err) {
    return file_call(c, session_id, "ReadFile", read_msg(path, offset, limit), NULL, NULL, NULL,
                     ret, err);
}

int plimsoll_list_files(plimsoll_client *c, const char *session_id, const char *path,
                        unsigned depth, json_t **ret, struct plimsoll_error *err) {
    return file_call(c, session_id, "ListFiles", list_msg(path, depth), NULL, NULL, NULL, ret, err);
}

int plimsoll_session_write_files(plimsoll_session *s, const json_t *files, json_t **ret,
                                 struct plimsoll_error *err) {
    if (!s)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no session");
    return file_call(s->c, s->id, "WriteFiles", write_msg(files), s->route, s->floor, s->chain, ret,
                     err);
}

int plimsoll_session_read_file(plimsoll_session *s, const char *path, unsigned offset,
                               unsigned limit, json_t **ret, struct plimsoll_error *err) {
    if (!s)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no session");
    return file_call(s->c, s->id, "ReadFile", read_msg(path, offset, limit), s->route, s->floor,
                     s->chain, ret, err);
}

int plimsoll_session_list_files(plimsoll_session *s, const char *path, unsigned depth, json_t **ret,
                                struct plimsoll_error *err) {
    if (!s)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no session");
    return file_call(s->c, s->id, "ListFiles", list_msg(path, depth), s->route, s->floor, s->chain,
                     ret, err);
}

plimsoll_session *plimsoll_session_open(plimsoll_client *c, const char *const *languages,
                                        const char *floor, struct plimsoll_error *err) {
    plimsoll_session *s = session_new(c, "", floor, err);
    if (s && open_session(c, languages, s->id, s->route, err) < 0) {
        plimsoll_session_free(s);
        return NULL;
    }
    return s;
}

const char *plimsoll_session_id(const plimsoll_session *s) {
    return s ? s->id : "";
}

int plimsoll_session_run(plimsoll_session *s, const json_t *run, json_t **ret,
                         struct plimsoll_error *err) {
    if (!s)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no session");
    return in_session(s->c, s->id, run, s->route, s->floor, s->chain, ret, err);
}

/* A session's cell, streaming when live is set. */
static int session_cell(plimsoll_session *s, const char *language, const char *code,
                        const json_t *files, unsigned timeout_ms, const struct live *live,
                        json_t **ret, struct plimsoll_error *err) {
    if (!s || !language || !code)
        return plc_fail(err, PLIMSOLL_E_USAGE, "a session, a language and code");
    json_t *cell = json_pack("{s:s, s:s}", "language", language, "code", code);
    if (cell && files && json_object_set(cell, "files", (json_t *)files) < 0) {
        json_decref(cell);
        cell = NULL;
    }
    if (!cell)
        return plc_fail(err, PLIMSOLL_E_USAGE, "the cell cannot be built (valid UTF-8 text)");
    int r = cell_call(s->c, s->id, cell, timeout_ms, s->route, s->floor, s->chain, live, ret, err);
    json_decref(cell);
    return r;
}

int plimsoll_session_cell(plimsoll_session *s, const char *language, const char *code,
                          const json_t *files, unsigned timeout_ms, json_t **ret,
                          struct plimsoll_error *err) {
    return session_cell(s, language, code, files, timeout_ms, NULL, ret, err);
}

int plimsoll_session_cell_stream(plimsoll_session *s, const char *language, const char *code,
                                 const json_t *files, unsigned timeout_ms,
                                 plimsoll_output_fn on_output, void *userdata, json_t **ret,
                                 struct plimsoll_error *err) {
    struct live live = {on_output, userdata, 0};
    return session_cell(s, language, code, files, timeout_ms, &live, ret, err);
}

int plimsoll_session_close(plimsoll_session *s, struct plimsoll_error *err) {
    if (!s)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no session");
    return close_session(s->c, s->id, s->route, err);
}

const plimsoll_chain *plimsoll_session_chain(const plimsoll_session *s) {
    return s ? s->chain : NULL;
}

void plimsoll_session_free(plimsoll_session *s) {
    if (!s)
        return;
    plimsoll_chain_free(s->chain);
    free(s->floor);
    OPENSSL_cleanse(s->id, sizeof(s->id));
    free(s);
}
