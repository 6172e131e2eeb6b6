/* SPDX-License-Identifier: Apache-2.0 */
/*
 * events.c: reading envd's process stream (process.proto's StartResponse
 * events in proto3 JSON, each in a Connect envelope).  Every byte here
 * comes from the VM's side; fuzz/fuzz_envd_stream.c feeds it anything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/canon.h"
#include "e2b_int.h"

void eb_proc_init(struct eb_proc *p, size_t output_cap) {
    memset(p, 0, sizeof(*p));
    pl_capture_init(&p->out, output_cap);
    pl_capture_init(&p->err, output_cap);
    p->exit_code = -1;
}

void eb_proc_free(struct eb_proc *p) {
    pl_capture_free(&p->out);
    pl_capture_free(&p->err);
}

/* Output bytes of a data event (base64 in proto3 JSON) into a capture. */
static int add_output(struct pl_capture *c, const json_t *v) {
    const char *b = json_string_value(v);
    if (!b)
        return -1;
    unsigned char *data = NULL;
    size_t len = 0;
    if (pl_base64_decode(b, strlen(b), EB_MAX_EVENT, &data, &len) < 0)
        return -1;
    int rc = pl_capture_add(c, data, len);
    free(data);
    return rc;
}

int eb_process_event(struct eb_proc *p, const unsigned char *msg, size_t len, unsigned *ret_pid) {
    json_t *j = json_loadb((const char *)msg, len, 0, NULL);
    json_t *ev = json_object_get(json_object_get(j, "event"), "start");
    int rc = 0;
    if (!json_is_object(json_object_get(j, "event"))) {
        rc = -1;
    } else if (ev) {
        json_int_t pid = json_integer_value(json_object_get(ev, "pid"));
        if (pid <= 0 || pid > 0x7fffffff)
            rc = -1;
        else if (ret_pid)
            *ret_pid = (unsigned)pid;
    } else if ((ev = json_object_get(json_object_get(j, "event"), "data"))) {
        json_t *o = json_object_get(ev, "stdout"), *e = json_object_get(ev, "stderr");
        if (o)
            rc = add_output(&p->out, o);
        else if (e)
            rc = add_output(&p->err, e);
    } else if ((ev = json_object_get(json_object_get(j, "event"), "end"))) {
        /* proto3 JSON omits zero values: no exitCode is exit 0, no
         * "exited" is false (ended by a signal). */
        json_t *code = json_object_get(ev, "exitCode");
        if (code && !json_is_integer(code))
            rc = -1;
        json_int_t c = json_integer_value(code);
        bool exited = json_is_true(json_object_get(ev, "exited"));
        const char *st = json_string_value(json_object_get(ev, "status"));
        snprintf(p->status, sizeof(p->status), "%s", st ? st : "");
        if (rc == 0) {
            p->ended = true;
            /* A process ended by a signal reports it; 128 + SIGKILL is the
             * shell's convention when the status names no number. */
            p->exit_code = exited ? (int)(c & 0xff) : (c > 0 && c < 256 ? (int)c : 137);
        }
    }
    json_decref(j);
    return rc;
}

static int on_message(void *ud, unsigned flags, const unsigned char *msg, size_t len) {
    struct eb_stream *st = ud;
    if (flags & PH_FLAG_COMPRESSED)
        return -1; /* never asked for */
    if (flags & PH_FLAG_END_STREAM) {
        st->trailer = true;
        json_t *j = json_loadb((const char *)msg, len, 0, NULL);
        json_t *e = json_object_get(j, "error");
        if (e) {
            const char *code = json_string_value(json_object_get(e, "code"));
            const char *m = json_string_value(json_object_get(e, "message"));
            snprintf(st->trailer_error, sizeof(st->trailer_error), "%s: %s", code ? code : "?",
                     m ? m : "");
        }
        json_decref(j);
        return 0;
    }
    if (st->trailer)
        return -1; /* nothing after the end of the stream */
    return eb_process_event(st->p, msg, len, &st->pid);
}

void eb_stream_init(struct eb_stream *st, struct eb_proc *p) {
    memset(st, 0, sizeof(*st));
    st->p = p;
    ph_envelopes_init(&st->env, EB_MAX_EVENT, on_message, st);
}

int eb_stream_feed(void *ud, const unsigned char *data, size_t len) {
    struct eb_stream *st = ud;
    return ph_envelopes_feed(&st->env, data, len);
}

void eb_stream_free(struct eb_stream *st) {
    ph_envelopes_free(&st->env);
}
