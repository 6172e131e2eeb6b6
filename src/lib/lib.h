/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lib.h: what libplimsoll's files share; not installed.
 *
 *   client.c  the client, one POST an attempt over libcurl, the deadline
 *             and the retries
 *   answer.c  the kinds, what an answer may be, refusals from Connect
 *             errors and their google.rpc.ErrorInfo
 *   calls.c   Describe, the runs and the sessions, each answer checked
 *   record.c  records and chains
 */
#pragma once
#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../include/plimsoll.h"

struct pl_buf;

struct plimsoll_client {
    CURL *curl;
    char *base;      /* "http://host:port" without a trailing slash */
    char *unix_path; /* NULL for TCP */
    char *auth;      /* "Authorization: Bearer …" or NULL */
    long timeout_ms;
    size_t max_answer;
    struct plimsoll_retry retry;
    bool skip_checks;
};

/* Fill err (kind, printf message; everything else cleared); returns -1. */
int plc_fail(struct plimsoll_error *err, enum plimsoll_errkind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- client.c ------------------------------------------------------------- */

/* POST msg to method, retrying what the policy allows; *ret is the 200
 * answer (a new reference), checked against the method's shape. */
int plc_call(plimsoll_client *c, const char *method, const json_t *msg, json_t **ret,
             struct plimsoll_error *err);

/* ---- answer.c ------------------------------------------------------------- */

/* A protocol error: infrastructure (dispatched), code "unknown", the HTTP
 * status and a printf reason; returns -1. */
int plc_protocol_fail(struct plimsoll_error *err, const char *method, long status, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
/* The JSON object of method's 200 answer b, its known members of their
 * types, or NULL with why (n bytes). */
json_t *plc_parse_result(const struct pl_buf *b, const char *method, char *why, size_t n);
/* Whether a Content-Type is application/json, any charset UTF-8. */
bool plc_media_type_is_json(const char *ct);
/* A non-200 answer into *err: a refusal, infrastructure, or a protocol
 * error when it is not a Connect error; always -1. */
int plc_refusal(plimsoll_client *c, const char *method, long status, const struct pl_buf *answer,
                struct plimsoll_error *err);
