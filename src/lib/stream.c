/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stream.c: the answer of RunStream and RunCellStream, read as it comes.
 *
 * Connect server streaming (application/connect+json): the body is a run of
 * envelopes, each one flags byte, a 4-byte big-endian length and that many
 * bytes of JSON.  Flags 0 is a RunStreamResponse (an output chunk, or the
 * result), flags 2 the end of the stream ({} or {"error": …}, a Connect
 * error as a unary call gets it).  The bytes are fed here from libcurl's
 * write callback in whatever pieces the network gives, so a chunk reaches
 * the caller as soon as its envelope is whole; nothing here does I/O, so
 * the fuzz harness (fuzz/fuzz_lib_stream.c) drives it alone.
 *
 * It holds one message at a time and the result.  What it gave the caller
 * is not kept: each step's stdout and stderr are joined as a length and a
 * running SHA-256, compared with the result's bytes at the end, so what
 * was streamed is what the record covers; a cell's display outputs, each
 * a chunk of its own, are joined the same way (their canonical forms) and
 * compared with the result's outputs.  Anything the protocol does not
 * allow breaks the stream for good; the call is then a protocol error
 * (docs/clients.md, "Live output").
 */
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/buf.h"
#include "../core/canon.h"
#include "../core/cleanup.h"
#include "lib.h"

#define FLAG_END 0x02u

int plc_stream_init(struct plc_stream *s, const char *method, size_t max_body, unsigned nsteps,
                    plimsoll_output_fn on_output, void *userdata) {
    *s = (struct plc_stream){.method = method,
                             .max_body = max_body,
                             .nsteps = nsteps,
                             .on_output = on_output,
                             .userdata = userdata};
    s->joined = calloc((size_t)nsteps + 1, sizeof(*s->joined));
    return s->joined ? 0 : -1;
}

void plc_stream_free(struct plc_stream *s) {
    EVP_MD_CTX_free(s->displays.sha[0]);
    if (s->joined)
        for (size_t i = 0; i <= s->nsteps; i++) {
            EVP_MD_CTX_free(s->joined[i].sha[0]);
            EVP_MD_CTX_free(s->joined[i].sha[1]);
        }
    free(s->joined);
    pl_buf_free(&s->msg);
    json_decref(s->result);
    json_decref(s->error);
    *s = (struct plc_stream){0};
}

/* Break the stream for good with why ("the stream " + why); -1. */
static int broke(struct plc_stream *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int broke(struct plc_stream *s, const char *fmt, ...) {
    if (!s->broken) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->why, sizeof(s->why), fmt, ap);
        va_end(ap);
        s->broken = true;
    }
    return -1;
}

/* Add len bytes to stream i (0 stdout, 1 stderr) of joined step j. */
static int join(struct plc_stream *s, struct plc_joined *j, int i, const unsigned char *p,
                size_t len) {
    j->seen = true;
    if (len > PLIMSOLL_MAX_STREAM_MESSAGE - j->len[i])
        return broke(s, "has more output than a result could hold");
    if (!j->sha[i] &&
        (!(j->sha[i] = EVP_MD_CTX_new()) || EVP_DigestInit_ex(j->sha[i], EVP_sha256(), NULL) != 1))
        return broke(s, "cannot be checked (out of memory)");
    if (len && EVP_DigestUpdate(j->sha[i], p, len) != 1)
        return broke(s, "cannot be checked (SHA-256 failed)");
    j->len[i] += len;
    return 0;
}

/* The bytes of an output chunk's member name (base64), or -1. */
static int chunk_bytes(struct plc_stream *s, const json_t *output, const char *name,
                       unsigned char **ret, size_t *ret_len) {
    const json_t *v = json_object_get(output, name);
    *ret = NULL;
    *ret_len = 0;
    if (!json_is_string(v) || json_string_length(v) == 0)
        return 0;
    if (pl_base64_decode(json_string_value(v), json_string_length(v), PLIMSOLL_MAX_STREAM_MESSAGE,
                         ret, ret_len) < 0)
        return broke(s, "has an output chunk that is not one: output.%s is not base64", name);
    unsigned char *t = realloc(*ret, *ret_len + 1); /* NUL-terminated for the caller */
    if (!t) {
        free(*ret);
        *ret = NULL;
        return broke(s, "cannot be read (out of memory)");
    }
    t[*ret_len] = '\0';
    *ret = t;
    return 0;
}

/* One display output's line as the displays are joined: its canonical
 * form and a newline; malloc'd, or NULL. */
static char *display_line(const json_t *d, size_t *ret_len) {
    char *c = plimsoll_canonical(d);
    size_t n = c ? strlen(c) : 0;
    char *line = c ? realloc(c, n + 2) : NULL;
    if (!line) {
        free(c);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    *ret_len = n + 1;
    return line;
}

/* An output chunk that is a cell's display output: nothing else in it. */
static int on_display_message(struct plc_stream *s, const json_t *output, const json_t *display) {
    char why[200];
    json_t *o = json_object_get(output, "stdout"), *e = json_object_get(output, "stderr");
    if (json_string_length(o) || json_string_length(e))
        return broke(s, "has an output chunk with both a display output and output bytes");
    if (plc_check_display(display, "output.display", why, sizeof(why)) < 0)
        return broke(s, "has an output chunk that is not one: %s", why);
    size_t n = 0;
    PL_AUTO_FREE char *line = display_line(display, &n);
    if (!line)
        return broke(s, "cannot be checked (out of memory)");
    if (join(s, &s->displays, 0, (const unsigned char *)line, n) < 0)
        return -1;
    s->ndisplays++;
    if (s->on_output) {
        json_int_t step = json_integer_value(json_object_get(output, "step"));
        struct plimsoll_output chunk = {.step = step > 0 && step <= UINT32_MAX ? (unsigned)step : 0,
                                        .display = display};
        s->chunks++;
        if (s->on_output(s->userdata, &chunk) != 0) {
            s->canceled = true;
            return -1;
        }
    }
    return 0;
}

static int on_output_message(struct plc_stream *s, const json_t *output) {
    const json_t *display = json_object_get(output, "display");
    if (display && !json_is_null(display))
        return on_display_message(s, output, display);
    json_int_t step = json_integer_value(json_object_get(output, "step"));
    if (step < 0 || (uint64_t)step > s->nsteps)
        return broke(s, "has output of step %" JSON_INTEGER_FORMAT ", but the request has %u steps",
                     step, s->nsteps);
    PL_AUTO_FREE unsigned char *out = NULL;
    PL_AUTO_FREE unsigned char *errb = NULL;
    size_t out_len = 0, err_len = 0;
    struct plc_joined *j = &s->joined[step];
    if (chunk_bytes(s, output, "stdout", &out, &out_len) < 0 ||
        chunk_bytes(s, output, "stderr", &errb, &err_len) < 0 || join(s, j, 0, out, out_len) < 0 ||
        join(s, j, 1, errb, err_len) < 0)
        return -1;
    if ((out_len || err_len) && s->on_output) {
        struct plimsoll_output chunk = {.stdout_data = out_len ? (const char *)out : NULL,
                                        .stdout_len = out_len,
                                        .stderr_data = err_len ? (const char *)errb : NULL,
                                        .stderr_len = err_len,
                                        .step = (unsigned)step};
        s->chunks++;
        if (s->on_output(s->userdata, &chunk) != 0) {
            s->canceled = true;
            return -1;
        }
    }
    return 0;
}

/* One whole envelope: s->msg, with flags s->hdr[0]. */
static int on_message(struct plc_stream *s) {
    char why[256];
    bool end = s->hdr[0] & FLAG_END;
    if (!end && s->result)
        return broke(s, "has a message after its result");
    json_t *m = plc_parse_stream_message(&s->msg, end, why, sizeof(why));
    if (!m)
        return broke(s, "has a %s that is not one: %s",
                     end ? "end-of-stream message" : "RunStreamResponse", why);
    int r = 0;
    if (end) {
        s->ended = true;
        json_t *e = json_object_get(m, "error");
        if (e && !json_is_null(e))
            s->error = json_incref(e);
    } else {
        json_t *out = json_object_get(m, "output"), *res = json_object_get(m, "result");
        if (json_is_null(out))
            out = NULL;
        if (json_is_null(res))
            res = NULL;
        if (out && res)
            r = broke(s, "has a message with both an output and a result");
        else if (res && plc_check_run(res, "RunStreamResponse.result", why, sizeof(why)) < 0)
            r = broke(s, "has a result that is not one: %s", why);
        else if (res)
            s->result = json_incref(res);
        else if (out)
            r = on_output_message(s, out);
        /* neither: a kind of message this client does not know, skipped */
    }
    json_decref(m);
    return r;
}

int plc_stream_feed(struct plc_stream *s, const void *data, size_t len) {
    const unsigned char *p = data;
    if (s->broken || s->canceled)
        return -1;
    if (len > s->max_body - s->body)
        return broke(s, "is longer than the client's max_answer_bytes (%zu)", s->max_body);
    s->body += len;
    while (len > 0) {
        if (s->ended)
            return broke(s, "goes on after its end-of-stream message");
        if (s->hdr_len < sizeof(s->hdr)) {
            size_t take = sizeof(s->hdr) - s->hdr_len < len ? sizeof(s->hdr) - s->hdr_len : len;
            memcpy(s->hdr + s->hdr_len, p, take);
            s->hdr_len += take;
            p += take;
            len -= take;
            if (s->hdr_len < sizeof(s->hdr))
                break;
            s->need = (size_t)s->hdr[1] << 24 | (size_t)s->hdr[2] << 16 | (size_t)s->hdr[3] << 8 |
                      s->hdr[4];
            if (s->hdr[0] & ~FLAG_END)
                return broke(s, "has an envelope with flags 0x%02x (%s)", s->hdr[0],
                             s->hdr[0] == 0x01 ? "compressed, which was not asked for"
                                               : "not a message nor the end of the stream");
            if (s->need > PLIMSOLL_MAX_STREAM_MESSAGE)
                return broke(s,
                             "announces a message of %zu bytes, past "
                             "PLIMSOLL_MAX_STREAM_MESSAGE (%zu)",
                             s->need, PLIMSOLL_MAX_STREAM_MESSAGE);
            s->msg.len = 0;
        }
        /* The message's bytes; an empty one is whole with its header. */
        size_t take = s->need - s->msg.len < len ? s->need - s->msg.len : len;
        if (take && pl_buf_append(&s->msg, p, take) < 0)
            return broke(s, "cannot be read (out of memory)");
        p += take;
        len -= take;
        if (s->msg.len < s->need)
            break;
        s->hdr_len = 0;
        int r = on_message(s);
        if (s->msg.cap > 65536) {
            pl_buf_free(&s->msg); /* hold no large message past its time */
            s->msg = (struct pl_buf){0};
        }
        if (r < 0)
            return -1;
    }
    return 0;
}

/* The exact bytes of a result's (or step's) output name: <name>_base64
 * when the text is a lossy copy, else the text; malloc'd, or -1. */
static int kept_bytes(struct plc_stream *s, const json_t *where, const char *name,
                      unsigned char **ret, size_t *ret_len) {
    char key[32];
    snprintf(key, sizeof(key), "%s_base64", name);
    const json_t *b64 = json_object_get(where, key), *text = json_object_get(where, name);
    *ret = NULL;
    *ret_len = 0;
    if (json_is_string(b64) && json_string_length(b64) > 0) {
        if (pl_base64_decode(json_string_value(b64), json_string_length(b64), s->max_body, ret,
                             ret_len) < 0)
            return broke(s, "ends with a result whose %s is not base64", key);
        return 0;
    }
    size_t n = json_is_string(text) ? json_string_length(text) : 0;
    *ret = malloc(n + 1);
    if (!*ret)
        return broke(s, "cannot be checked (out of memory)");
    if (n)
        memcpy(*ret, json_string_value(text), n);
    *ret_len = n;
    return 0;
}

/* Whether what streamed of one stream is bytes: the same length and
 * SHA-256. */
static bool joined_is(struct plc_joined *j, int i, const unsigned char *bytes, size_t len) {
    unsigned char a[EVP_MAX_MD_SIZE], b[EVP_MAX_MD_SIZE];
    unsigned int an = 0, bn = 0;
    if (j->len[i] != len)
        return false;
    if (!j->sha[i])
        return len == 0;
    return EVP_DigestFinal_ex(j->sha[i], a, &an) == 1 &&
           EVP_Digest(bytes, len, b, &bn, EVP_sha256(), NULL) == 1 && an == bn &&
           memcmp(a, b, an) == 0;
}

/* The streamed output, joined, is the result's byte for byte: a step's
 * chunks its step's output, the others the run's; the display outputs
 * streamed are the result's outputs.  A stream that sent no chunk (a kind
 * that does not stream) has nothing to check; once a step streamed, every
 * step of the result is checked. */
/* The display outputs given, in order, are the result's outputs: the same
 * count and the same joined canonical forms. */
static int check_displays(struct plc_stream *s, const json_t *result) {
    const json_t *outputs = json_object_get(result, "outputs");
    size_t n = json_array_size(outputs), i;
    const json_t *d;
    EVP_MD_CTX *sha = EVP_MD_CTX_new();
    unsigned char want[EVP_MAX_MD_SIZE], got[EVP_MAX_MD_SIZE];
    unsigned int wn = 0, gn = 0;
    size_t len = 0;
    bool ok = sha && EVP_DigestInit_ex(sha, EVP_sha256(), NULL) == 1;
    json_array_foreach(outputs, i, d) {
        size_t ln = 0;
        char *line = ok ? display_line(d, &ln) : NULL;
        ok = line && EVP_DigestUpdate(sha, line, ln) == 1;
        len += ln;
        free(line);
    }
    ok = ok && EVP_DigestFinal_ex(sha, want, &wn) == 1;
    EVP_MD_CTX_free(sha);
    if (!ok)
        return broke(s, "cannot be checked (out of memory)");
    if (s->displays.sha[0]) {
        if (EVP_DigestFinal_ex(s->displays.sha[0], got, &gn) != 1)
            return broke(s, "cannot be checked (SHA-256 failed)");
    } else {
        EVP_Digest("", 0, got, &gn, EVP_sha256(), NULL);
    }
    if (s->ndisplays != n || s->displays.len[0] != len || wn != gn || memcmp(want, got, wn) != 0)
        return broke(s, "display outputs are not the result's: %zu streamed, %zu kept",
                     s->ndisplays, n);
    return 0;
}

static int check_output(struct plc_stream *s, const json_t *result) {
    bool any = s->displays.seen, any_step = false;
    for (size_t i = 0; i <= s->nsteps; i++) {
        any = any || s->joined[i].seen;
        any_step = any_step || (i > 0 && s->joined[i].seen);
    }
    if (!any)
        return 0;
    if (check_displays(s, result) < 0)
        return -1;
    const json_t *steps = json_object_get(result, "steps");
    size_t nres = json_is_array(steps) ? json_array_size(steps) : 0;
    static struct plc_joined none;
    for (size_t st = 0; st <= s->nsteps || st <= nres; st++) {
        struct plc_joined *j = st <= s->nsteps ? &s->joined[st] : &none;
        if (!j->seen && !(any_step && st >= 1 && st <= nres))
            continue;
        if (st > nres)
            return broke(s, "has output of step %zu, but the result has %zu steps", st, nres);
        const json_t *where = st == 0 ? result : json_array_get(steps, st - 1);
        static const char *const names[] = {"stdout", "stderr"};
        for (int i = 0; i < 2; i++) {
            unsigned char *kept = NULL;
            size_t kept_len = 0;
            if (kept_bytes(s, where, names[i], &kept, &kept_len) < 0)
                return -1;
            bool same = joined_is(j, i, kept, kept_len);
            free(kept);
            if (!same) {
                if (st)
                    return broke(s,
                                 "output of step %zu's %s is not the result's: %zu bytes "
                                 "streamed, %zu kept",
                                 st, names[i], j->len[i], kept_len);
                return broke(s, "output of %s is not the result's: %zu bytes streamed, %zu kept",
                             names[i], j->len[i], kept_len);
            }
        }
    }
    return 0;
}

int plc_stream_finish(struct plc_stream *s, json_t **ret, struct plimsoll_error *err) {
    const char *m = s->method;
    if (s->canceled) {
        plc_fail(err, PLIMSOLL_E_INFRASTRUCTURE,
                 "%s: the output function stopped the stream; the code may have run", m);
        if (err) {
            snprintf(err->code, sizeof(err->code), "canceled");
            err->dispatched = true;
            err->http_status = 200;
        }
        return -1;
    }
    if (!s->broken && s->hdr_len)
        broke(s, "ends inside an envelope (%zu bytes of it)", s->hdr_len + s->msg.len);
    if (s->broken)
        return plc_protocol_fail(err, m, 200, "the stream %s", s->why);
    if (s->error)
        return plc_refusal_of(s->max_body, m, 200, s->error, err);
    if (!s->ended)
        broke(s, "ends without its end-of-stream message");
    else if (!s->result)
        broke(s, "ends without a result or an error");
    else
        check_output(s, s->result);
    if (s->broken)
        return plc_protocol_fail(err, m, 200, "the stream %s", s->why);
    *ret = json_incref(s->result);
    return 0;
}
