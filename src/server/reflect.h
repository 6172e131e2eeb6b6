/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reflect.h: the wire code of gRPC's health and server-reflection
 * messages, and reflection's answers from the descriptors the build
 * generated from proto/ (scripts/build/descriptors: every file plimsolld
 * serves and every file it imports, never a hand-made copy).  No I/O and
 * no API state: a peer's message in, an answer's message out; the
 * envelopes, the streams and their budgets are api_health.c's.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "../core/buf.h"
#include "../core/errors.h"

enum pl_pbsym_kind {
    PL_PBSYM_SERVICE,
    PL_PBSYM_METHOD,
    PL_PBSYM_MESSAGE,
    PL_PBSYM_ENUM,
    PL_PBSYM_EXTENSION,
};

/* One FileDescriptorProto, serialized, and the files it imports,
 * transitively (indexes into pl_pbfiles). */
struct pl_pbfile {
    const char *name;
    const unsigned char *bytes;
    size_t len;
    const unsigned short *deps;
    size_t ndeps;
};

/* A fully-qualified name a file defines; sorted by name (bytewise). */
struct pl_pbsym {
    const char *name;
    unsigned short file;
    enum pl_pbsym_kind kind;
    const char *extendee; /* an extension's message, else "" */
    int number;           /* an extension's field number, else 0 */
};

/* The generated tables (descriptors.c in the build tree). */
extern const struct pl_pbfile pl_pbfiles[];
extern const size_t pl_npbfiles;
extern const struct pl_pbsym pl_pbsyms[];
extern const size_t pl_npbsyms;

/* grpc.health.v1.HealthCheckResponse.ServingStatus */
enum pl_health_status {
    PL_HEALTH_UNKNOWN = 0,
    PL_HEALTH_SERVING = 1,
    PL_HEALTH_NOT_SERVING = 2,
    PL_HEALTH_SERVICE_UNKNOWN = 3,
};

/* A HealthCheckRequest: its service name, copied NUL-terminated into ret
 * (size cap; "" when absent).  INVALID_REQUEST for bytes that are no
 * protobuf message, a service that is not UTF-8 or does not fit. */
int pl_health_request_decode(const uint8_t *msg, size_t len, char *ret, size_t cap,
                             struct pl_error *err);

/* A HealthCheckResponse with status, appended to out.  < 0 out of memory. */
int pl_health_response_encode(enum pl_health_status status, struct pl_buf *out);

/*
 * One ServerReflectionRequest (msg, len bytes, no envelope) answered: the
 * ServerReflectionResponse appended to out.  services are the names
 * list_services answers (NULL-terminated).  A file, symbol or extension
 * the tables do not hold is an answer (error_response, NOT_FOUND), as is
 * a request naming none of the five questions (INVALID_ARGUMENT).  < 0
 * with INVALID_REQUEST for bytes that are no such message (the stream
 * ends with it), INTERNAL when out of memory.
 */
int pl_reflect_answer(const uint8_t *msg, size_t len, const char *const *services,
                      struct pl_buf *out, struct pl_error *err);

/*
 * Connect's JSON codec for reflection (proto3's JSON mapping, on a table
 * of the dozen fields): a ServerReflectionRequest's JSON (lowerCamelCase
 * or the proto names; null for an absent field) as its protobuf bytes,
 * appended to out; INVALID_REQUEST for JSON that is no such message (an
 * unknown field, a wrong type, past jsonscan's bounds).
 */
int pl_reflect_request_from_json(const char *json, size_t len, struct pl_buf *out,
                                 struct pl_error *err);

/* A ServerReflectionResponse (pl_reflect_answer's bytes) as its JSON,
 * appended to out (bytes as base64).  < 0 out of memory, or bytes that
 * are no such message. */
int pl_reflect_response_to_json(const uint8_t *msg, size_t len, struct pl_buf *out);

/* The symbol named name (n bytes), or NULL. */
const struct pl_pbsym *pl_pbsym_find(const char *name, size_t n);
