/* SPDX-License-Identifier: Apache-2.0 */
/*
 * relay.c: grants through a relay in the sandbox that plimsoll dials into
 * (docs/providers/openshell.md, "Grants: the relay").  The sandbox keeps no
 * network rule at all: a run with a grant starts the relay (guest/relay.py)
 * over ExecSandboxInteractive, and one thread of the daemon holds that
 * stream for the run.  Each guest connection's bytes come up framed; the
 * thread reads each request with broker_http's parser under the limits of
 * docker's socket (16 KiB head, 64 headers, the profile's body, 5 s, one
 * request per connection, max_calls + 256 connections a run) and hands it
 * to the run's broker, whose rules, limits and counts are the same as on
 * docker; the answer goes down framed.
 *
 * Everything the relay sends is the guest's: its frames are read by a
 * strict, bounded parser (osh_relay_rx_feed, fuzzed), and a frame that
 * breaks the rules ends the relay for the rest of the run (grants then
 * fail in the guest; the run goes on).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../broker/broker.h"
#include "../../broker/broker_http.h"
#include "../../core/clock.h"
#include "../../core/log.h"
#include "openshell.pb-c.h"
#include "osh_int.h"
#include "relay_py.h" /* generated: osh_guest_relay[] */

#define RELAY_READY_MS 15000u        /* the relay's start, at most */
#define RELAY_IDLE_MS 5000u          /* a request read whole, as docker's socket */
#define RELAY_END_MS 2000u           /* after the half-close, before a cancel */
#define RELAY_BACKLOG (1u << 20)     /* answer bytes queued before more are made */
#define RELAY_DOWN_CHUNK (60u << 10) /* an answer's D frames */

/* ------------------------------------------------------------ relay */

struct relay_conn {
    uint32_t id; /* 0: a free slot */
    uint64_t opened_ns;
    struct pl_buf in;
    bool overflow;  /* more than a request may be: 413 */
    bool guest_eof; /* the guest closed its side */
    bool continued; /* its 100 Continue was sent */
    bool dirty;     /* bytes came since the last look */
};

enum { RELAY_STARTING, RELAY_READY, RELAY_ENDED };

struct osh_relay {
    struct osh_state *s;
    const struct osh_sandbox *sb;
    struct pl_broker *broker;
    uint64_t deadline_ns;
    struct ph_grpc_duplex d;
    uint8_t *start_msg;
    pthread_t thread;
    pthread_mutex_t lock; /* state, why, keep; with cond */
    pthread_cond_t cond;
    int state;
    char why[256]; /* why it ended before it was asked to */
    char keep[OSH_RELAY_KEEP][32];
    size_t nkeep;
    atomic_bool ending;
    uint64_t end_by_ns;
    /* the relay thread's own */
    struct osh_relay_rx rx;
    struct relay_conn conns[OSH_RELAY_MAX_OPEN];
    uint32_t last_id;
    unsigned accepted, max_accepted;
    struct pl_http_limits lim;
    size_t max_in;
    bool ready_seen;
    unsigned answered, refused;
};

static void set_state(struct osh_relay *r, int state, const char *why) {
    pthread_mutex_lock(&r->lock);
    if (r->state != RELAY_ENDED) {
        r->state = state;
        if (why && !r->why[0] && !atomic_load(&r->ending))
            snprintf(r->why, sizeof(r->why), "%.*s", (int)sizeof(r->why) - 1, why);
    }
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

static int send_frame(struct osh_relay *r, unsigned type, uint32_t id, const void *p, size_t n) {
    uint8_t *frame = malloc(OSH_RELAY_HDR + n);
    if (!frame)
        return -1;
    frame[0] = (uint8_t)type;
    for (int i = 0; i < 4; i++) {
        frame[1 + i] = (uint8_t)(id >> (24 - 8 * i));
        frame[5 + i] = (uint8_t)((uint32_t)n >> (24 - 8 * i));
    }
    if (n)
        memcpy(frame + OSH_RELAY_HDR, p, n);
    Openshell__V1__ExecSandboxInput in = OPENSHELL__V1__EXEC_SANDBOX_INPUT__INIT;
    in.payload_case = OPENSHELL__V1__EXEC_SANDBOX_INPUT__PAYLOAD_STDIN;
    in.stdin.data = frame;
    in.stdin.len = OSH_RELAY_HDR + n;
    size_t len = protobuf_c_message_get_packed_size(&in.base);
    uint8_t *packed = malloc(len);
    int rc = -1;
    if (packed) {
        protobuf_c_message_pack(&in.base, packed);
        rc = ph_grpc_duplex_send(&r->d, packed, len);
    }
    free(packed);
    free(frame);
    return rc;
}

/* The connection of id; id 0: a free slot. */
static struct relay_conn *find(struct osh_relay *r, uint32_t id) {
    for (size_t i = 0; i < OSH_RELAY_MAX_OPEN; i++)
        if (r->conns[i].id == id)
            return &r->conns[i];
    return NULL;
}

static void release(struct relay_conn *c) {
    pl_buf_free(&c->in);
    memset(c, 0, sizeof(*c));
}

/* An answer, whole, then the close; the slot is free again. */
static void answer(struct osh_relay *r, uint32_t id, const char *bytes, size_t len) {
    for (size_t off = 0; off < len; off += RELAY_DOWN_CHUNK)
        (void)send_frame(r, OSH_RELAY_DATA, id, bytes + off,
                         len - off < RELAY_DOWN_CHUNK ? len - off : RELAY_DOWN_CHUNK);
    (void)send_frame(r, OSH_RELAY_CLOSE, id, NULL, 0);
}

static void answer_error(struct osh_relay *r, uint32_t id, int status, const char *message) {
    char *out = NULL;
    size_t len = 0;
    r->refused++;
    if (pl_http_format_error(status, message, &out, &len) == 0)
        answer(r, id, out, len);
    else
        (void)send_frame(r, OSH_RELAY_CLOSE, id, NULL, 0);
    free(out);
}

/* Inside libcurl: frames only change state; on_turn does the work. */
static int on_frame(void *ud, unsigned type, uint32_t id, const unsigned char *p, size_t n) {
    struct osh_relay *r = ud;
    if (!r->ready_seen) {
        if (type != OSH_RELAY_READY)
            return -1;
        r->ready_seen = true;
        char list[OSH_RELAY_KEEP * 32];
        if (n >= sizeof(list))
            return -1;
        memcpy(list, p, n);
        list[n] = '\0';
        pthread_mutex_lock(&r->lock);
        r->nkeep = 0;
        int bad = 0;
        for (char *save = NULL, *tok = strtok_r(list, " ", &save); tok;
             tok = strtok_r(NULL, " ", &save)) {
            if (r->nkeep == OSH_RELAY_KEEP || strlen(tok) >= sizeof(r->keep[0]) ||
                strspn(tok, "0123456789:") != strlen(tok) || !strchr(tok, ':')) {
                bad = 1;
                break;
            }
            snprintf(r->keep[r->nkeep++], sizeof(r->keep[0]), "%s", tok);
        }
        pthread_mutex_unlock(&r->lock);
        if (bad || !r->nkeep)
            return -1;
        set_state(r, RELAY_READY, NULL);
        return 0;
    }
    switch (type) {
    case OSH_RELAY_OPEN: {
        if (id <= r->last_id)
            return -1; /* ids only grow, from 1 */
        r->last_id = id;
        r->accepted++;
        if (r->accepted > r->max_accepted) {
            /* unread, as on docker's socket */
            answer_error(r, id, 429, "this run's broker connection limit is reached");
            return 0;
        }
        struct relay_conn *c = find(r, 0);
        if (!c) {
            answer_error(r, id, 503, "too many broker connections open at once");
            return 0;
        }
        c->id = id;
        c->opened_ns = pl_now_ns();
        return 0;
    }
    case OSH_RELAY_DATA: {
        struct relay_conn *c = id ? find(r, id) : NULL;
        if (!c || c->overflow)
            return 0; /* answered already, or refused */
        if (c->in.len + n > r->max_in) {
            c->overflow = true;
        } else if (pl_buf_append(&c->in, p, n) < 0) {
            c->overflow = true;
        }
        c->dirty = true;
        return 0;
    }
    case OSH_RELAY_CLOSE: {
        struct relay_conn *c = id ? find(r, id) : NULL;
        if (c) {
            c->guest_eof = true;
            c->dirty = true;
        }
        return 0;
    }
    default: return -1; /* a second ready */
    }
}

static int on_event(void *ud, const unsigned char *msg, size_t len, struct pl_error *err) {
    struct osh_relay *r = ud;
    Openshell__V1__ExecSandboxEvent *ev = openshell__v1__exec_sandbox_event__unpack(NULL, len, msg);
    if (!ev)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the OpenShell gateway: a relay event does not read");
    int rc = 0;
    switch (ev->payload_case) {
    case OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD_STDOUT:
        if (osh_relay_rx_feed(&r->rx, ev->stdout->data.data, ev->stdout->data.len, on_frame, r) <
            0) {
            set_state(r, RELAY_ENDED, "the relay's frames broke the rules");
            rc = 1; /* stop reading: it is over */
        }
        break;
    case OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD_STDERR: break; /* the guest's to write */
    case OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD_EXIT: {
        char why[64];
        snprintf(why, sizeof(why), "the relay exited %d", ev->exit->exit_code);
        set_state(r, RELAY_ENDED, why);
        rc = 1;
        break;
    }
    default:
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the OpenShell gateway: a relay event with no payload");
    }
    protobuf_c_message_free_unpacked(&ev->base, NULL);
    return rc;
}

/* One connection's bytes so far: answered when whole or refused. */
static void look(struct osh_relay *r, struct relay_conn *c, uint64_t now) {
    c->dirty = false;
    uint32_t id = c->id;
    if (c->overflow) {
        answer_error(r, id, 413, "the request is larger than this grant allows");
        release(c);
        return;
    }
    struct pl_http_request req = {0};
    struct pl_http_parse_info info = {0};
    size_t consumed = 0;
    int rc = c->in.len ? pl_http_parse_request_ex((const char *)c->in.data, c->in.len, &r->lim,
                                                  &req, &consumed, &info)
                       : 0;
    if (rc == 0) {
        if (info.head_complete && info.expect_continue && !c->continued) {
            static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            c->continued = true;
            (void)send_frame(r, OSH_RELAY_DATA, id, cont, sizeof(cont) - 1);
        }
        if (c->guest_eof) {
            /* the guest left mid-request: nothing to answer */
            (void)send_frame(r, OSH_RELAY_CLOSE, id, NULL, 0);
            release(c);
        } else if (now - c->opened_ns >= RELAY_IDLE_MS * 1000000ull) {
            answer_error(r, id, 408, "the request did not arrive whole in time");
            release(c);
        }
        return;
    }
    if (rc < 0) {
        answer_error(r, id, -rc, info.error ? info.error : "the request was refused");
        release(c);
        return;
    }
    struct pl_broker_reply reply = {0};
    pl_broker_handle(r->broker, req.method, req.target, req.headers, req.nheaders, req.body,
                     req.body_len, &reply);
    struct pl_http_response resp = {.status = reply.status,
                                    .headers = reply.headers,
                                    .nheaders = reply.nheaders,
                                    .body = reply.body,
                                    .body_len = reply.body_len};
    char *out = NULL;
    size_t len = 0;
    if (pl_http_format_response(&resp, &out, &len) == 0)
        answer(r, id, out, len);
    else
        answer_error(r, id, 500, "the broker's answer could not be written");
    r->answered++;
    free(out);
    pl_broker_reply_clear(&reply);
    pl_http_request_clear(&req);
    release(c);
}

static int on_turn(void *ud, struct ph_grpc_duplex *d) {
    struct osh_relay *r = ud;
    uint64_t now = pl_now_ns();
    pthread_mutex_lock(&r->lock);
    int state = r->state;
    pthread_mutex_unlock(&r->lock);
    if (state == RELAY_ENDED || now >= r->deadline_ns)
        return -1;
    if (atomic_load(&r->ending)) {
        if (!d->half_closed) {
            ph_grpc_duplex_close(d); /* the relay reads its end and exits */
            r->end_by_ns = now + RELAY_END_MS * 1000000ull;
        }
        return now >= r->end_by_ns ? -1 : 0;
    }
    for (size_t i = 0; i < OSH_RELAY_MAX_OPEN; i++) {
        struct relay_conn *c = &r->conns[i];
        if (!c->id || ph_grpc_duplex_pending(d) > RELAY_BACKLOG)
            continue;
        if (c->dirty || now - c->opened_ns >= RELAY_IDLE_MS * 1000000ull)
            look(r, c, now);
    }
    return 0;
}

static void *relay_main(void *arg) {
    struct osh_relay *r = arg;
    struct pl_error err = {0};
    int rc = ph_grpc_duplex(&r->s->target, &r->d, &err);
    char why[sizeof(err.message) + 300];
    if (rc < 0)
        snprintf(why, sizeof(why), "%s", err.message);
    else if (!r->d.call.stopped && r->d.call.status != PH_GRPC_OK)
        snprintf(why, sizeof(why), "ExecSandboxInteractive: %s: %s",
                 ph_grpc_code_name(r->d.call.status), r->d.call.message);
    else
        snprintf(why, sizeof(why), "the relay's stream ended");
    set_state(r, RELAY_ENDED, why);
    return NULL;
}

static void relay_free(struct osh_relay *r) {
    for (size_t i = 0; i < OSH_RELAY_MAX_OPEN; i++)
        release(&r->conns[i]);
    ph_grpc_duplex_free(&r->d);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    free(r->start_msg);
    free(r);
}

int osh_relay_start(struct osh_state *s, const struct osh_sandbox *sb, struct pl_broker *broker,
                    uint64_t deadline_ns, struct osh_relay **ret, struct pl_error *err) {
    struct osh_relay *r = calloc(1, sizeof(*r));
    if (!r)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    r->s = s;
    r->sb = sb;
    r->broker = broker;
    r->deadline_ns = deadline_ns;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    ph_grpc_duplex_init(&r->d);
    osh_relay_rx_init(&r->rx);
    r->lim = (struct pl_http_limits){.max_head_bytes = 16u << 10,
                                     .max_headers = 64,
                                     .max_body_bytes = pl_broker_max_request_bytes(broker)};
    pl_http_limits_effective(&r->lim, &r->lim);
    r->max_in = r->lim.max_head_bytes + r->lim.max_body_bytes;
    r->max_accepted = pl_broker_max_calls(broker) + 256;

    uint64_t now = pl_now_ns();
    uint64_t left_ms = deadline_ns > now ? (deadline_ns - now) / 1000000 : 0;
    const char *argv[] = {"python3", "-I", "-c", osh_guest_relay, OSH_RELAY_SOCKET};
    Openshell__V1__ExecSandboxRequest start = OPENSHELL__V1__EXEC_SANDBOX_REQUEST__INIT;
    start.sandbox_id = (char *)sb->id;
    start.n_command = sizeof(argv) / sizeof(argv[0]);
    start.command = (char **)argv;
    start.workdir = "/tmp";
    start.timeout_seconds = (uint32_t)((left_ms + 999) / 1000 + 5);
    Openshell__V1__ExecSandboxInput in = OPENSHELL__V1__EXEC_SANDBOX_INPUT__INIT;
    in.payload_case = OPENSHELL__V1__EXEC_SANDBOX_INPUT__PAYLOAD_START;
    in.start = &start;
    size_t len = protobuf_c_message_get_packed_size(&in.base);
    if (!(r->start_msg = malloc(len))) {
        relay_free(r);
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    }
    protobuf_c_message_pack(&in.base, r->start_msg);
    r->d.call = (struct ph_grpc_call){.method = "/openshell.v1.OpenShell/ExecSandboxInteractive",
                                      .msg = r->start_msg,
                                      .len = len,
                                      .timeout_ms = left_ms + 10000,
                                      .max_message = OSH_MAX_MESSAGE,
                                      .on_message = on_event,
                                      .ud = r};
    r->d.on_turn = on_turn;
    if (pthread_create(&r->thread, NULL, relay_main, r) != 0) {
        relay_free(r);
        return pl_error_set(err, PL_REASON_INTERNAL, "the relay's thread did not start");
    }
    /* Nothing of the guest's runs before its broker socket listens. */
    uint64_t ready_by = pl_deadline_in_ms(RELAY_READY_MS);
    if (ready_by > deadline_ns)
        ready_by = deadline_ns;
    pthread_mutex_lock(&r->lock);
    while (r->state == RELAY_STARTING && pl_now_ns() < ready_by) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&r->cond, &r->lock, &ts);
    }
    int state = r->state;
    char why[256];
    snprintf(why, sizeof(why), "%s", r->why[0] ? r->why : "it did not start in time");
    pthread_mutex_unlock(&r->lock);
    if (state != RELAY_READY) {
        osh_relay_stop(r);
        return pl_error_set(err, PL_REASON_INTERNAL, "the grant's relay did not start: %s", why);
    }
    *ret = r;
    return 0;
}

size_t osh_relay_keep(struct osh_relay *r, char (*keep)[32], size_t max) {
    pthread_mutex_lock(&r->lock);
    size_t n = r->nkeep < max ? r->nkeep : max;
    memcpy(keep, r->keep, n * sizeof(r->keep[0]));
    pthread_mutex_unlock(&r->lock);
    return n;
}

void osh_relay_stop(struct osh_relay *r) {
    if (!r)
        return;
    atomic_store(&r->ending, true);
    ph_grpc_duplex_wake(&r->d);
    pthread_join(r->thread, NULL);
    pthread_mutex_lock(&r->lock);
    bool early = r->why[0] != '\0';
    pthread_mutex_unlock(&r->lock);
    if (early)
        pl_log("warn", "the grant's relay ended before its run",
               json_pack("{s:s, s:s, s:i, s:i}", "sandbox", r->sb->name, "why", r->why, "answered",
                         (int)r->answered, "refused", (int)r->refused));
    relay_free(r);
}
