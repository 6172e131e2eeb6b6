/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record.h: the run record every answered run carries.
 *
 * A record binds what was sent to what came back and to the evidence:
 *   request_sha256   SHA-256 of the canonical request (request.h)
 *   response_sha256  SHA-256 of the canonical response without "record"
 *   provider, isolation, runtime   the evidence
 *   started_at       wall clock at dispatch (RFC 3339, UTC, nanoseconds)
 *   ended_at         started_at + elapsed time on CLOCK_MONOTONIC, so it
 *                    can never fall before started_at
 *   broker_calls     requests the run's broker forwarded to the grant's API
 *   broker_refused   requests the broker refused itself (0 and 0 without a grant)
 *   previous_digest  the digest of the previous record in a session; ""
 *   digest           SHA-256 of the canonical record without "digest"
 * docs/records.md is the reference for client authors; tests/vectors/
 * holds worked examples.
 */
#pragma once

#include <jansson.h>
#include <stdint.h>
#include <time.h>

#define PL_RECORD_VERSION 1

struct pl_record_input {
    const char *request_sha256;
    const char *response_sha256;
    const char *provider;
    const char *isolation;
    const char *runtime;
    struct timespec started; /* CLOCK_REALTIME at dispatch */
    uint64_t elapsed_ns;     /* CLOCK_MONOTONIC difference */
    unsigned broker_calls;
    unsigned broker_refused;
    const char *previous_digest; /* NULL or "" when none */
};

/* Build the record object, digest included.  NULL on OOM. */
json_t *pl_record_build(const struct pl_record_input *in);

/* Format a wall-clock instant as RFC 3339 UTC with 9 fraction digits. */
int pl_rfc3339(struct timespec ts, char ret[40]);

/* Recompute a record's digest and compare; 0 when it matches. */
int pl_record_verify(const json_t *record);
