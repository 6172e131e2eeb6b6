/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_cors.c: browsers on another origin (PLIMSOLL_CORS_ORIGINS), decided
 * here once for both transports.
 *
 * Only the service's paths take part, and only for a listed origin.  A
 * preflight (OPTIONS with Access-Control-Request-Method) is answered from
 * its head, with no key (a browser sends none on one) and nothing kept:
 * 204 with the grant when its Origin is listed, its method POST and every
 * header it asks for one the Connect or gRPC-Web browser transports send;
 * anything else falls through to the answer an OPTIONS has always had
 * (405, Allow: POST), with no CORS header, so a refused preflight learns
 * nothing (not even whether CORS is on).  Every other answer on those paths
 * to a listed origin (a result, a refusal, a stream) carries
 * Access-Control-Allow-Origin and the headers a client reads.  No
 * credentials mode: the key is a bearer header, never a cookie.  A
 * request whose Origin came more than once is refused INVALID_REQUEST (no
 * CORS header) before any of this, over HTTP/1.1 as over HTTP/2: which of
 * two origins a browser meant is nobody's guess.
 */
#include <string.h>

#include "../core/origin.h"
#include "api_int.h"

/* How long a browser may keep a preflight's grant. */
#define PL_CORS_MAX_AGE "600"

/* The most names an Access-Control-Request-Headers may list. */
#define PL_CORS_MAX_REQUEST_HEADERS 16u

/* What the browser transports of Connect and gRPC-Web send beyond what is
 * always allowed: the protocol's headers, its deadlines, the key. */
static const char *const allowed_headers[] = {
    "authorization",
    "content-type",
    "connect-protocol-version",
    "connect-timeout-ms",
    "connect-content-encoding",
    "connect-accept-encoding",
    "grpc-timeout",
    "grpc-accept-encoding",
    "x-grpc-web",
    "x-user-agent",
    "plimsoll-route",
    NULL,
};
#define ALLOWED_HEADERS                                                                            \
    "authorization, content-type, connect-protocol-version, connect-timeout-ms, "                  \
    "connect-content-encoding, connect-accept-encoding, grpc-timeout, grpc-accept-encoding, "      \
    "x-grpc-web, x-user-agent, plimsoll-route"

/* What a client reads of an answer beyond the safelisted headers: gRPC's
 * status (gRPC-Web's trailers-only answers carry it as headers) and the
 * encodings of Connect and gRPC. */
#define EXPOSED_HEADERS                                                                            \
    "grpc-status, grpc-message, grpc-status-details-bin, grpc-encoding, grpc-accept-encoding, "    \
    "connect-content-encoding, connect-accept-encoding, content-encoding, plimsoll-route"

static void put(struct pl_api_response *rs, const char *name, const char *value) {
    if (rs->ncors < PL_API_MAX_CORS_HEADERS)
        rs->cors[rs->ncors++] = (struct pl_api_fixed_header){name, value};
}

const char *api_cors_origin(const struct pl_api *api, const struct pl_api_request *rq) {
    if (!api->config->cors_origins.n || !rq->origin || rq->origin_repeated)
        return NULL;
    return pl_origins_find(&api->config->cors_origins, rq->origin);
}

bool api_cors_repeated(struct pl_api *api, const struct pl_api_request *rq,
                       struct pl_api_response *rs, struct call_log *lg) {
    if (!api->config->cors_origins.n || !rq->origin_repeated)
        return false;
    struct pl_error err = {0};
    pl_error_set(&err, PL_REASON_INVALID_REQUEST,
                 "the Origin header came more than once; a browser sends one");
    lg->cors = "Origin more than once";
    api_refuse(api, rs, lg, &err, NULL);
    return true;
}

bool api_cors_preflight(struct pl_api *api, const struct pl_api_request *rq, const char *listed,
                        struct pl_api_response *rs, struct call_log *lg) {
    (void)api;
    if (strcmp(rq->http_method, "OPTIONS") != 0 || !rq->cors_method)
        return false;
    lg->method = "preflight";
    if (!rq->origin)
        lg->cors = "no Origin";
    else if (!listed)
        lg->cors = "an origin not in PLIMSOLL_CORS_ORIGINS";
    else if (strcmp(rq->cors_method, "POST") != 0)
        lg->cors = "a method other than POST";
    else if (rq->cors_headers &&
             !pl_token_list_within(rq->cors_headers, allowed_headers, PL_CORS_MAX_REQUEST_HEADERS))
        lg->cors = "a request header outside the allowed ones";
    else
        lg->cors = NULL;
    if (lg->cors)
        return false; /* the next rung answers as to any OPTIONS */
    lg->cors = "granted";
    api_set_body(rs, 204, "text/plain; charset=utf-8", strdup(""));
    put(rs, "Access-Control-Allow-Origin", listed);
    put(rs, "Access-Control-Allow-Methods", "POST");
    put(rs, "Access-Control-Allow-Headers", ALLOWED_HEADERS);
    put(rs, "Access-Control-Max-Age", PL_CORS_MAX_AGE);
    put(rs, "Vary", "Origin");
    return true;
}

void api_cors_answer(const char *listed, struct pl_api_response *rs) {
    if (!listed)
        return;
    rs->ncors = 0;
    put(rs, "Access-Control-Allow-Origin", listed);
    put(rs, "Access-Control-Expose-Headers", EXPOSED_HEADERS);
    put(rs, "Vary", "Origin");
}
