/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mcp.c: `plimsoll mcp`, the stdio face of the daemon's MCP server.
 *
 * An MCP client that starts servers as subprocesses speaks JSON-RPC on
 * their stdin and stdout, one message a line (MCP's stdio transport).
 * This relays each line as one POST to the daemon's /mcp (Streamable
 * HTTP), through libplimsoll's client and its settings (PLIMSOLL_URL, the
 * key, the answer cap), and writes what comes back to stdout, one message
 * a line.  Nothing but JSON-RPC messages goes to stdout; what the relay
 * has to say goes to stderr, one line each.
 *
 * The MCP session the daemon opens at initialize is the relay's: it sends
 * its Mcp-Session-Id and the negotiated MCP-Protocol-Version with every
 * later message, keeps the initialize it relayed, and when the daemon
 * answers 404 (it restarted, or the session expired) initializes again
 * with it, says notifications/initialized, and sends the message once
 * more.  At the end of stdin it waits for the requests in flight and ends
 * the MCP session (DELETE); SIGTERM and SIGINT end it at once.
 *
 * Requests run at once, up to MCP_IN_FLIGHT, each on a thread of its own
 * with a client (and so a connection) of its own, so a long tools/call
 * does not hold up a ping; stdin is not read while all are busy.  An
 * initialize is relayed alone: nothing more is read until its answer is
 * in; so is a notification (or a response), which the daemon answers at
 * once (202), so that notifications/initialized reaches it before the
 * requests that follow it.  Every buffer is bounded: a line by --max-message-bytes (an
 * over-long one is skipped to its newline, never held whole), an answer
 * by the client's max_answer_bytes.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "../../include/plimsoll.h"
#include "../core/buf.h"
#include "../core/tier.h"
#include "cli.h"

/* The daemon's MCP endpoint. */
#define MCP_PATH "/mcp"
/* The longest line read from stdin unless --max-message-bytes says
 * otherwise, and the most it may say. */
#define MCP_DEFAULT_MAX_MESSAGE ((size_t)4 << 20)
#define MCP_MAX_MAX_MESSAGE ((size_t)1 << 30)
/* Requests relayed at once. */
#define MCP_IN_FLIGHT 8
/* The DELETE that ends the MCP session: best effort, this long at most. */
#define MCP_DELETE_TIMEOUT_MS 2000
/* A message's exchange: past the longest run a daemon allows
 * (SANDBOX_MAX_TIMEOUT_MS, at most an hour), so a tools/call is never cut
 * before the daemon answers it. */
#define MCP_MESSAGE_TIMEOUT_MS (3600000L + 60000L)
/* The longest a session id or protocol version kept from the daemon. */
#define MCP_HEADER_VALUE_MAX 256

/* JSON-RPC's error codes the relay writes. */
#define RPC_PARSE_ERROR (-32700)
#define RPC_INVALID_REQUEST (-32600)
#define RPC_INTERNAL_ERROR (-32603)

/* One message read from stdin. */
struct msg {
    char *body; /* the line's bytes, sent as they are */
    size_t len;
    json_t *id;      /* a request's id (a reference); NULL for a notification or a response */
    bool initialize; /* a request of method initialize */
};

struct relay;

/* One request in flight: its thread and its own client. */
struct slot {
    struct relay *r;
    plimsoll_client *c;
    pthread_t thread;
    bool joinable; /* a thread was started and not joined yet */
    bool busy;     /* under r->slots_mu */
    struct msg m;
};

struct relay {
    const char *floor; /* --minimum-isolation, or NULL */
    size_t max_message;
    plimsoll_client *main_c; /* the main thread's: initialize, the final DELETE */
    plimsoll_client *sig_c;  /* the signal thread's DELETE */

    /* The MCP session, under mu: its id, the negotiated version, the
     * initialize that opened it, and a count of the sessions taken (a
     * message sent with one session knows whether a re-initialize came
     * since). */
    pthread_mutex_t mu;
    char *session_id;
    char *version;
    struct pl_buf init;
    unsigned long generation;
    pthread_mutex_t reinit_mu; /* one re-initialize at a time */

    pthread_mutex_t out_mu; /* stdout, one whole line at a time */
    bool out_broken;

    pthread_mutex_t slots_mu;
    pthread_cond_t slots_cv;
    unsigned busy;
    struct slot slots[MCP_IN_FLIGHT];
};

/* ---- stdout and stderr ---------------------------------------------------- */

/* One diagnostic line on stderr; a line break in it becomes a space. */
__attribute__((format(printf, 1, 2))) static void diag(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    for (char *p = line; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fprintf(stderr, "plimsoll: mcp: %s\n", line);
}

/* Write v as one line on stdout, whole, flushed.  Compact JSON holds no
 * line break (one in a string is escaped).  A stdout that cannot be
 * written (the client went away) is said once; the relay then ends. */
static void write_message(struct relay *r, const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) {
        diag("an answer could not be encoded as one line (out of memory)");
        return;
    }
    size_t n = strlen(s);
    pthread_mutex_lock(&r->out_mu);
    if (!r->out_broken &&
        (fwrite(s, 1, n, stdout) != n || fputc('\n', stdout) == EOF || fflush(stdout) != 0)) {
        r->out_broken = true;
        diag("cannot write stdout (%s): ending", strerror(errno));
    }
    pthread_mutex_unlock(&r->out_mu);
    free(s);
}

/* A JSON-RPC error for id (NULL: null) on stdout. */
static void write_error(struct relay *r, const json_t *id, int code, const char *message) {
    json_t *e =
        json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
                  id ? (json_t *)id : json_null(), "error", "code", code, "message", message);
    if (e)
        write_message(r, e);
    else
        diag("out of memory writing an error: %s", message);
    json_decref(e);
}

/* What failed around message m: -32603 with m's id for a request, a line
 * on stderr for anything else. */
__attribute__((format(printf, 3, 4))) static void fail_message(struct relay *r, const struct msg *m,
                                                               const char *fmt, ...) {
    char what[768], line[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (m->id) {
        snprintf(line, sizeof(line), "plimsolld: %s", what);
        write_error(r, m->id, RPC_INTERNAL_ERROR, line);
    } else {
        diag("a notification was not delivered: %s", what);
    }
}

/* ---- the MCP session ------------------------------------------------------ */

/* What a POST sends of the session: copies taken under mu. */
struct sess {
    char *id, *version;
    unsigned long generation;
};

static void sess_clear(struct sess *s) {
    free(s->id);
    free(s->version);
    *s = (struct sess){0};
}

static int sess_snapshot(struct relay *r, struct sess *s) {
    *s = (struct sess){0};
    pthread_mutex_lock(&r->mu);
    s->generation = r->generation;
    if (r->session_id)
        s->id = strdup(r->session_id);
    if (r->version)
        s->version = strdup(r->version);
    bool oom = (r->session_id && !s->id) || (r->version && !s->version);
    pthread_mutex_unlock(&r->mu);
    if (oom)
        sess_clear(s);
    return oom ? -1 : 0;
}

/* A value from the daemon fit for a header line: visible ASCII, bounded. */
static bool header_value_ok(const char *v) {
    if (!v || !*v || strlen(v) > MCP_HEADER_VALUE_MAX)
        return false;
    for (; *v; v++)
        if ((unsigned char)*v < 0x21 || (unsigned char)*v > 0x7e)
            return false;
    return true;
}

/* POST body to /mcp: an initialize with the floor (s NULL), anything else
 * with s's session. */
static int post(struct relay *r, plimsoll_client *c, const char *body, size_t len,
                const struct sess *s, struct plimsoll_http_answer *ret,
                struct plimsoll_error *err) {
    char floor[64], sid[MCP_HEADER_VALUE_MAX + 32], ver[MCP_HEADER_VALUE_MAX + 32];
    const char *h[6] = {"Content-Type: application/json",
                        "Accept: application/json, text/event-stream"};
    size_t n = 2;
    if (!s && r->floor) {
        snprintf(floor, sizeof(floor), "Plimsoll-Minimum-Isolation: %s", r->floor);
        h[n++] = floor;
    }
    if (s && s->id) {
        snprintf(sid, sizeof(sid), "Mcp-Session-Id: %s", s->id);
        h[n++] = sid;
    }
    if (s && s->version) {
        snprintf(ver, sizeof(ver), "MCP-Protocol-Version: %s", s->version);
        h[n++] = ver;
    }
    h[n] = NULL;
    return plimsoll_http_request(
        c,
        &(struct plimsoll_http_request){.path = MCP_PATH,
                                        .headers = h,
                                        .body = body,
                                        .body_len = len,
                                        .answer_header = "Mcp-Session-Id",
                                        .timeout_ms = MCP_MESSAGE_TIMEOUT_MS},
        ret, err);
}

/* The session an initialize's answer a opens, taken as the relay's (body,
 * len: the initialize, kept for a re-initialize); < 0 with why when a
 * does not open one. */
static int take_session(struct relay *r, const struct plimsoll_http_answer *a, const char *body,
                        size_t len, char *why, size_t n) {
    if (a->status != 200) {
        snprintf(why, n, "initialize was answered HTTP %ld", a->status);
        return -1;
    }
    json_t *j = json_loadb(a->body, a->body_len, 0, NULL);
    json_t *res = json_object_get(j, "result");
    const char *v = json_string_value(json_object_get(res, "protocolVersion"));
    int rc = -1;
    if (!json_is_object(res))
        snprintf(why, n, "initialize was answered with no result");
    else if (!header_value_ok(a->header))
        snprintf(why, n, "initialize was answered with %s Mcp-Session-Id",
                 a->header ? "an unusable" : "no");
    else if (v && !header_value_ok(v))
        snprintf(why, n, "initialize was answered with an unusable protocolVersion");
    else
        rc = 0;
    if (rc == 0) {
        char *id = strdup(a->header), *ver = v ? strdup(v) : NULL;
        struct pl_buf init = {0};
        if (!id || (v && !ver) || pl_buf_append(&init, body, len) < 0) {
            snprintf(why, n, "out of memory");
            free(id);
            free(ver);
            pl_buf_free(&init);
            rc = -1;
        } else {
            pthread_mutex_lock(&r->mu);
            free(r->session_id);
            free(r->version);
            pl_buf_free(&r->init);
            r->session_id = id;
            r->version = ver;
            r->init = init;
            r->generation++;
            pthread_mutex_unlock(&r->mu);
        }
    }
    json_decref(j);
    return rc;
}

/* The daemon forgot the session sent with generation gen (404): open
 * another with the kept initialize, say notifications/initialized, unless
 * another thread did so since.  < 0 with why. */
static int reinitialize(struct relay *r, plimsoll_client *c, unsigned long gen, char *why,
                        size_t n) {
    pthread_mutex_lock(&r->reinit_mu);
    pthread_mutex_lock(&r->mu);
    bool done = r->generation != gen;
    struct pl_buf init = {0};
    bool oom = !done && pl_buf_append(&init, r->init.data, r->init.len) < 0;
    pthread_mutex_unlock(&r->mu);
    int rc = 0;
    if (done) {
        pthread_mutex_unlock(&r->reinit_mu);
        return 0;
    }
    struct plimsoll_http_answer a = {0};
    struct plimsoll_error err;
    if (oom || !init.len) {
        snprintf(why, n, "%s", oom ? "out of memory" : "no initialize to send again");
        rc = -1;
    } else if (post(r, c, init.data, init.len, NULL, &a, &err) < 0) {
        snprintf(why, n, "%s", err.message);
        rc = -1;
    } else {
        rc = take_session(r, &a, init.data, init.len, why, n);
    }
    plimsoll_http_answer_free(&a);
    pl_buf_free(&init);
    if (rc == 0) {
        static const char note[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
        struct sess s;
        if (sess_snapshot(r, &s) < 0) {
            snprintf(why, n, "out of memory");
            rc = -1;
        } else if (post(r, c, note, sizeof(note) - 1, &s, &a, &err) < 0) {
            snprintf(why, n, "notifications/initialized: %s", err.message);
            rc = -1;
        } else if (a.status != 202 && a.status != 204 && a.status != 200) {
            snprintf(why, n, "notifications/initialized was answered HTTP %ld", a.status);
            rc = -1;
        }
        plimsoll_http_answer_free(&a);
        sess_clear(&s);
        if (rc == 0)
            diag("the daemon forgot the MCP session; initialized a new one");
    }
    pthread_mutex_unlock(&r->reinit_mu);
    return rc;
}

/* ---- answers -------------------------------------------------------------- */

/* Whether a Content-Type is type, parameters aside, any case. */
static bool media_type_is(const char *ct, const char *type) {
    size_t n = strlen(type);
    if (!ct || strncasecmp(ct, type, n) != 0)
        return false;
    ct += n;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

/* Whether v is a JSON-RPC message: an object of jsonrpc "2.0" with a
 * method, a result or an error object. */
static bool is_rpc_message(const json_t *v) {
    const char *ver = json_string_value(json_object_get(v, "jsonrpc"));
    return json_is_object(v) && ver && strcmp(ver, "2.0") == 0 &&
           (json_object_get(v, "method") || json_object_get(v, "result") ||
            json_is_object(json_object_get(v, "error")));
}

/* Write the message v answering m: an error of id null answering a
 * request gets the request's id, so that the client can match it. */
static void write_answer(struct relay *r, const struct msg *m, json_t *v) {
    json_t *id = json_object_get(v, "id");
    if (m->id && json_is_object(json_object_get(v, "error")) && (!id || json_is_null(id)))
        json_object_set(v, "id", m->id);
    write_message(r, v);
}

/* One event's data (the event's data lines joined with line breaks): a
 * JSON-RPC message to write, or a line on stderr; 1 when written. */
static size_t write_event(struct relay *r, const struct msg *m, const struct pl_buf *data) {
    json_t *v = json_loadb(data->data ? data->data : "", data->len, JSON_ALLOW_NUL, NULL);
    size_t wrote = 0;
    if (is_rpc_message(v)) {
        write_answer(r, m, v);
        wrote = 1;
    } else {
        diag("the daemon's event stream carried an event that is not a JSON-RPC message");
    }
    json_decref(v);
    return wrote;
}

/* A text/event-stream body (mcp_sse_events): each event's data is one
 * JSON-RPC message; how many were written. */
struct event_to {
    struct relay *r;
    const struct msg *m;
};
static size_t on_event(void *ud, const struct pl_buf *data) {
    const struct event_to *t = ud;
    return write_event(t->r, t->m, data);
}
static size_t write_events(struct relay *r, const struct msg *m, const char *p, size_t len) {
    bool oom;
    size_t wrote = mcp_sse_events(p, len, on_event, &(struct event_to){r, m}, &oom);
    if (oom)
        diag("out of memory reading the daemon's event stream");
    return wrote;
}

/* What the daemon answered m: to stdout, or why not. */
static void deliver(struct relay *r, const struct msg *m, const struct plimsoll_http_answer *a) {
    const char *ct = a->content_type;
    if ((a->status == 202 || a->status == 204) && !a->body_len) {
        if (m->id)
            fail_message(r, m, "HTTP %ld with no answer to a request", a->status);
        return;
    }
    if (a->status == 200 && media_type_is(ct, "text/event-stream")) {
        if (write_events(r, m, a->body, a->body_len) == 0 && m->id)
            fail_message(r, m, "an event stream that carried no answer");
        return;
    }
    json_t *v = json_loadb(a->body, a->body_len, JSON_ALLOW_NUL, NULL);
    bool ok = a->status >= 200 && a->status < 300
                  ? is_rpc_message(v)
                  : json_is_object(json_object_get(v, "error")) && is_rpc_message(v);
    if (ok)
        write_answer(r, m, v);
    else if (v)
        fail_message(r, m, "HTTP %ld with a JSON answer that is not a JSON-RPC message", a->status);
    else
        fail_message(r, m, "HTTP %ld with an answer that is not JSON (%s, %zu bytes)", a->status,
                     ct ? ct : "no Content-Type", a->body_len);
    json_decref(v);
}

/* Relay m with client c: its POST, a re-initialize and one more POST when
 * the daemon forgot the session, its answer. */
static void relay_message(struct relay *r, plimsoll_client *c, const struct msg *m) {
    struct sess s;
    struct plimsoll_http_answer a = {0};
    struct plimsoll_error err;
    if (sess_snapshot(r, &s) < 0) {
        fail_message(r, m, "out of memory");
        return;
    }
    int rc = post(r, c, m->body, m->len, &s, &a, &err);
    if (rc == 0 && a.status == 404 && s.id) {
        char why[600];
        plimsoll_http_answer_free(&a);
        unsigned long gen = s.generation;
        sess_clear(&s);
        if (reinitialize(r, c, gen, why, sizeof(why)) < 0) {
            fail_message(
                r, m, "the daemon forgot the MCP session and initializing again failed: %s", why);
            return;
        }
        if (sess_snapshot(r, &s) < 0) {
            fail_message(r, m, "out of memory");
            return;
        }
        rc = post(r, c, m->body, m->len, &s, &a, &err);
    }
    sess_clear(&s);
    if (rc < 0)
        fail_message(r, m, "%s", err.message);
    else
        deliver(r, m, &a);
    plimsoll_http_answer_free(&a);
}

/* An initialize, on the main thread: its answer's session becomes the
 * relay's, and the message is kept for a re-initialize. */
static void relay_initialize(struct relay *r, const struct msg *m) {
    struct plimsoll_http_answer a = {0};
    struct plimsoll_error err;
    if (post(r, r->main_c, m->body, m->len, NULL, &a, &err) < 0) {
        fail_message(r, m, "%s", err.message);
        return;
    }
    char why[256];
    json_t *v = json_loadb(a.body, a.body_len, 0, NULL);
    if (a.status == 200 && json_object_get(v, "result") &&
        take_session(r, &a, m->body, m->len, why, sizeof(why)) < 0)
        diag("%s: later messages go without a session", why);
    json_decref(v);
    deliver(r, m, &a);
    plimsoll_http_answer_free(&a);
}

/* ---- requests in flight --------------------------------------------------- */

static void msg_clear(struct msg *m) {
    free(m->body);
    json_decref(m->id);
    *m = (struct msg){0};
}

static void *slot_run(void *arg) {
    struct slot *sl = arg;
    struct relay *r = sl->r;
    relay_message(r, sl->c, &sl->m);
    msg_clear(&sl->m);
    pthread_mutex_lock(&r->slots_mu);
    sl->busy = false;
    r->busy--;
    pthread_cond_broadcast(&r->slots_cv);
    pthread_mutex_unlock(&r->slots_mu);
    return NULL;
}

/* Relay m (taken) on a free slot's thread, waiting for one. */
static void dispatch(struct relay *r, struct msg *m) {
    pthread_mutex_lock(&r->slots_mu);
    while (r->busy == MCP_IN_FLIGHT)
        pthread_cond_wait(&r->slots_cv, &r->slots_mu);
    struct slot *sl = NULL;
    for (size_t i = 0; i < MCP_IN_FLIGHT && !sl; i++)
        if (!r->slots[i].busy)
            sl = &r->slots[i];
    sl->busy = true;
    r->busy++;
    pthread_mutex_unlock(&r->slots_mu);
    if (sl->joinable) /* its last thread is done, or all but */
        pthread_join(sl->thread, NULL);
    sl->joinable = false;
    sl->m = *m;
    *m = (struct msg){0};
    if (pthread_create(&sl->thread, NULL, slot_run, sl) == 0) {
        sl->joinable = true;
        return;
    }
    diag("cannot start a thread (%s): relaying this message alone", strerror(errno));
    slot_run(sl);
}

/* Wait for every request in flight. */
static void drain(struct relay *r) {
    pthread_mutex_lock(&r->slots_mu);
    while (r->busy)
        pthread_cond_wait(&r->slots_cv, &r->slots_mu);
    pthread_mutex_unlock(&r->slots_mu);
    for (size_t i = 0; i < MCP_IN_FLIGHT; i++)
        if (r->slots[i].joinable) {
            pthread_join(r->slots[i].thread, NULL);
            r->slots[i].joinable = false;
        }
}

/* ---- the end -------------------------------------------------------------- */

/* DELETE the MCP session with client c, best effort, within
 * MCP_DELETE_TIMEOUT_MS. */
static void end_session(struct relay *r, plimsoll_client *c) {
    struct sess s;
    if (sess_snapshot(r, &s) < 0 || !s.id) {
        sess_clear(&s);
        return;
    }
    char sid[MCP_HEADER_VALUE_MAX + 32], ver[MCP_HEADER_VALUE_MAX + 32];
    snprintf(sid, sizeof(sid), "Mcp-Session-Id: %s", s.id);
    snprintf(ver, sizeof(ver), "MCP-Protocol-Version: %s", s.version ? s.version : "");
    const char *h[] = {sid, s.version ? ver : NULL, NULL};
    struct plimsoll_http_answer a = {0};
    struct plimsoll_error err;
    if (plimsoll_http_request(c,
                              &(struct plimsoll_http_request){.method = "DELETE",
                                                              .path = MCP_PATH,
                                                              .headers = h,
                                                              .timeout_ms = MCP_DELETE_TIMEOUT_MS},
                              &a, &err) < 0)
        diag("the MCP session was not ended: %s", err.message);
    else if (a.status != 204 && a.status != 200 && a.status != 404)
        diag("the MCP session was not ended: HTTP %ld", a.status);
    plimsoll_http_answer_free(&a);
    sess_clear(&s);
}

/* SIGTERM and SIGINT, blocked in every thread and waited for here: end
 * the session and exit 0, a line being written finished first. */
static void *signal_run(void *arg) {
    struct relay *r = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int sig = 0;
    while (sigwait(&set, &sig) != 0)
        ;
    end_session(r, r->sig_c);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    pthread_mutex_timedlock(&r->out_mu, &until);
    _exit(0);
}

/* ---- stdin ---------------------------------------------------------------- */

/* Whether the bytes are all JSON whitespace. */
static bool blank(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return false;
    return true;
}

/* One whole line read (without its newline): relayed, or answered here. */
static void take_line(struct relay *r, struct pl_buf *line) {
    if (blank(line->data, line->len))
        return;
    json_error_t je;
    json_t *v = json_loadb(line->data, line->len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!v) {
        char msg[256];
        snprintf(msg, sizeof(msg), "Parse error: %s", je.text);
        write_error(r, NULL, RPC_PARSE_ERROR, msg);
        return;
    }
    const char *method = json_string_value(json_object_get(v, "method"));
    json_t *id = json_object_get(v, "id");
    struct msg m = {.body = line->data, .len = line->len};
    if (method && id)
        m.id = json_incref(id);
    m.initialize = m.id && strcmp(method, "initialize") == 0;
    json_decref(v);
    *line = (struct pl_buf){0}; /* the message owns the bytes */
    if (m.initialize) {
        relay_initialize(r, &m);
        msg_clear(&m);
    } else if (!m.id) {
        /* A notification or a response, in order with what follows it
         * (notifications/initialized before the requests it allows). */
        relay_message(r, r->main_c, &m);
        msg_clear(&m);
    } else {
        dispatch(r, &m);
    }
}

static void on_line(void *ud, struct pl_buf *line) {
    take_line(ud, line);
}

static void on_refused(void *ud, bool oom) {
    struct relay *r = ud;
    char msg[160];
    if (oom)
        snprintf(msg, sizeof(msg),
                 "Invalid Request: out of memory for the message; it was skipped");
    else
        snprintf(msg, sizeof(msg),
                 "Invalid Request: the message is longer than %zu bytes (--max-message-bytes); it "
                 "was skipped",
                 r->max_message);
    write_error(r, NULL, RPC_INVALID_REQUEST, msg);
}

/* Read stdin to its end (or until stdout breaks), line by line. */
static void read_lines(struct relay *r) {
    char chunk[65536];
    struct mcp_lines lines = {.max = r->max_message};
    const struct mcp_line_sink sink = {on_line, on_refused, r};
    for (;;) {
        pthread_mutex_lock(&r->out_mu);
        bool broken = r->out_broken;
        pthread_mutex_unlock(&r->out_mu);
        if (broken)
            break;
        ssize_t got = read(STDIN_FILENO, chunk, sizeof(chunk));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            diag("cannot read stdin: %s", strerror(errno));
        if (got <= 0)
            break;
        mcp_lines_feed(&lines, chunk, (size_t)got, &sink);
    }
    mcp_lines_end(&lines, &sink);
}

/* ---- the command ---------------------------------------------------------- */

static void relay_free(struct relay *r) {
    for (size_t i = 0; i < MCP_IN_FLIGHT; i++)
        plimsoll_client_free(r->slots[i].c);
    plimsoll_client_free(r->main_c);
    plimsoll_client_free(r->sig_c);
    pthread_mutex_lock(&r->mu); /* the signal thread may be reading them */
    free(r->session_id);
    free(r->version);
    r->session_id = r->version = NULL;
    pl_buf_free(&r->init);
    pthread_mutex_unlock(&r->mu);
}

static int mcp_usage(const char *why) {
    fprintf(stderr,
            "plimsoll: %s\n"
            "usage: plimsoll mcp [--minimum-isolation none|process|container|kernel|vm]\n"
            "                    [--max-message-bytes N]\n",
            why);
    return EXIT_USAGE;
}

int cmd_mcp(int argc, char **argv) {
    static struct relay r = {
        .max_message = MCP_DEFAULT_MAX_MESSAGE,
        .mu = PTHREAD_MUTEX_INITIALIZER,
        .reinit_mu = PTHREAD_MUTEX_INITIALIZER,
        .out_mu = PTHREAD_MUTEX_INITIALIZER,
        .slots_mu = PTHREAD_MUTEX_INITIALIZER,
        .slots_cv = PTHREAD_COND_INITIALIZER,
    };
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--minimum-isolation") == 0 && i + 1 < argc) {
            enum pl_tier t;
            r.floor = argv[++i];
            if (pl_tier_parse(r.floor, &t) < 0)
                return mcp_usage(
                    "--minimum-isolation takes none, process, container, kernel or vm");
        } else if (strcmp(argv[i], "--max-message-bytes") == 0 && i + 1 < argc) {
            const char *s = argv[++i];
            char *end = NULL;
            errno = 0;
            unsigned long long v = strtoull(s, &end, 10);
            if (errno || *end || !*s || s[0] == '-' || v == 0 || v > MCP_MAX_MAX_MESSAGE)
                return mcp_usage("--max-message-bytes takes 1 to 1073741824");
            r.max_message = (size_t)v;
        } else {
            return mcp_usage("unknown option or missing value");
        }
    }
    /* A client each: libplimsoll's are not to be shared between threads. */
    bool ok = (r.main_c = cli_client_from_env()) && (r.sig_c = cli_client_from_env());
    for (size_t i = 0; ok && i < MCP_IN_FLIGHT; i++) {
        r.slots[i].r = &r;
        ok = (r.slots[i].c = cli_client_from_env()) != NULL;
    }
    if (!ok) {
        relay_free(&r);
        return EXIT_USAGE;
    }
    /* The signals go to the signal thread only; a closed stdout is an
     * error to see, not a death. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t sig_thread;
    if (pthread_create(&sig_thread, NULL, signal_run, &r) != 0) {
        diag("cannot start the signal thread: %s", strerror(errno));
        relay_free(&r);
        return EXIT_INFRA;
    }
    pthread_detach(sig_thread);
    read_lines(&r);
    drain(&r);
    end_session(&r, r.main_c);
    fflush(stdout);
    /* The signal thread still waits in sigwait with its client, which
     * stays (r is static: nothing is lost); the rest goes. */
    plimsoll_client *keep = r.sig_c;
    r.sig_c = NULL;
    relay_free(&r);
    r.sig_c = keep;
    return EXIT_RAN_OK;
}
