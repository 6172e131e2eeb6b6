/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hosted.h: what every provider of a hosted sandbox service shares
 * (docs/internals/hosted.md): one HTTP call against a remote API with a
 * deadline and a cap on what it reads, and the decoder of the length-
 * prefixed envelopes that Connect and gRPC streams are made of.
 *
 * Nothing here logs: a request may carry a secret header, and an answer
 * may echo one.  Errors are struct pl_error, INTERNAL unless said.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/buf.h"
#include "../../core/errors.h"

/* One multipart/form-data part (a file upload). */
struct ph_part {
    const char *name;     /* the form field */
    const char *filename; /* NULL: none */
    const void *data;
    size_t len;
};

struct ph_request {
    const char *method; /* "GET", "POST", "DELETE" */
    const char *url;
    const char *const *headers; /* NULL-terminated "Name: value" lines; may be NULL */
    const json_t *json;         /* a JSON body, or NULL */
    const void *body;           /* raw body bytes (with a Content-Type header), or NULL */
    size_t body_len;
    const struct ph_part *parts; /* multipart parts, or NULL */
    size_t nparts;
    uint64_t timeout_ms;     /* the whole call, connect included; 0 = 30 s */
    size_t max_response;     /* bytes of answer kept; more is an error; 0 = 1 MiB */
    const char *want_header; /* a response header to keep (e.g. "X-Next-Token"), or NULL */
    /* Streaming: when set, the bytes of a 2xx answer go here instead of
     * into the body buffer (max_response does not apply to them); an error
     * answer is still kept as a body.  Return < 0 to abort the call. */
    int (*on_data)(void *userdata, const unsigned char *data, size_t len);
    void *userdata;
};

struct ph_response {
    long status;
    struct pl_buf body;
    char header[512]; /* want_header's value, "" when absent */
};

/*
 * Make one call.  Returns 0 when the server answered at all (any status),
 * with ret filled; < 0 with err when it could not be reached, the deadline
 * passed, the answer was larger than allowed, on_data aborted.  err->errnum is ETIMEDOUT for the
 * deadline. Release ret with ph_response_free.
 */
int ph_call(const struct ph_request *req, struct ph_response *ret, struct pl_error *err);
void ph_response_free(struct ph_response *r);

/* The answer's body as JSON (NULL when it is not JSON). */
json_t *ph_response_json(const struct ph_response *r);

/* Percent-encode s for a URL's query or path; malloc'd, NULL on OOM. */
char *ph_urlencode(const char *s);

/*
 * The envelope decoder of Connect streaming and gRPC: each message is one
 * flags byte, a big-endian 32-bit length, then that many bytes.  Feed bytes
 * as they arrive; on_message sees each whole message.  A message longer
 * than max is refused (the stream is broken), so a server cannot make the
 * daemon hold more than max bytes.
 */
struct ph_envelopes {
    size_t max;
    unsigned char hdr[5];
    size_t hdr_len;
    unsigned char *msg;
    size_t msg_len, msg_need;
    bool broken;
    int (*on_message)(void *userdata, unsigned flags, const unsigned char *msg, size_t len);
    void *userdata;
};

void ph_envelopes_init(struct ph_envelopes *e, size_t max,
                       int (*on_message)(void *, unsigned, const unsigned char *, size_t),
                       void *userdata);
/* Returns < 0 when the stream is broken (too long, or on_message refused). */
int ph_envelopes_feed(struct ph_envelopes *e, const unsigned char *data, size_t len);
/* Whether the stream stopped between messages (no half message pending). */
bool ph_envelopes_idle(const struct ph_envelopes *e);
void ph_envelopes_free(struct ph_envelopes *e);

/* One envelope around a message: 5 + len bytes appended to b. */
int ph_envelope_append(struct pl_buf *b, unsigned flags, const void *msg, size_t len);

#define PH_FLAG_COMPRESSED 0x01u
#define PH_FLAG_END_STREAM 0x02u /* Connect: the end-of-stream message */
