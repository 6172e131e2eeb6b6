/* SPDX-License-Identifier: Apache-2.0 */
/*
 * codec.h: Connect's binary codec (application/proto) over the API's JSON.
 *
 * The API decides everything on JSON.  A binary request is decoded into
 * the JSON object a JSON caller would have sent (proto field names, proto3
 * JSON types), handed to the same code, and a 200 answer's JSON is encoded
 * back to the binary message.  The descriptors are protobuf-c's, generated
 * at build time from proto/plimsoll/v1/sandbox.proto, so the contract file
 * is the only schema.
 *
 * Decoding is strict where the JSON decoder is strict: a field number the
 * contract does not have, a wire type that does not fit the field, a
 * string that is not UTF-8 are refused INVALID_REQUEST, and so is a body
 * that would decode to more than PL_JSON_MAX_ELEMENTS elements or nest
 * deeper than PL_JSON_MAX_DEPTH (jsonscan.h), counted as the JSON it
 * becomes and charged before each element is made, so a binary body can
 * never build more than a JSON one may.  Scalars repeated on the
 * wire keep the last value, a message repeated merges, a oneof keeps its
 * last member (protobuf's rules).
 */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "../core/buf.h"
#include "../core/errors.h"

/* How deep an answer may nest when encoded. */
#define PL_CODEC_MAX_DEPTH 16

/* The request and response messages of SandboxService's method (e.g.
 * "Run"); -1 when the service has no such method. */
int pl_codec_method(const char *method, const ProtobufCMessageDescriptor **ret_in,
                    const ProtobufCMessageDescriptor **ret_out);

/* The wire bytes of a desc message as a JSON object; NULL with err set
 * (INVALID_REQUEST) when they do not decode. */
json_t *pl_codec_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                        struct pl_error *err);

/* A JSON object of desc's shape, encoded; -1 with err set (INTERNAL) when
 * a member is not a field of desc or its value does not fit. */
int pl_codec_encode(const ProtobufCMessageDescriptor *desc, const json_t *obj, struct pl_buf *out,
                    struct pl_error *err);
