/*
 * api.h: the HTTP-independent API layer.
 *
 * The HTTP server (http.c) hands over a parsed request and sends back the
 * response this layer fills; everything plimsoll decides about a call
 * (authentication, routing, the refusal order, admission, dispatch, the
 * run record, metrics and the per-request log line) happens here.
 *
 * The refusal order for Run, each decided before dispatch:
 *   UNAUTHENTICATED -> INVALID_REQUEST (including an unknown grant_profile)
 *   -> DISABLED -> INSUFFICIENT_ISOLATION -> UNSUPPORTED (including a grant
 *   on a kind the provider cannot broker) -> CALLER_NOT_ALLOWED -> NOT_READY
 *   -> (SHUTTING_DOWN | RATE_LIMITED | AT_CAPACITY) -> the grant's
 *   credential is obtained -> dispatch.
 */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "../broker/grants.h"
#include "../core/admission.h"
#include "../core/config.h"
#include "../core/keys.h"
#include "../core/metrics.h"
#include "../providers/provider.h"
#include "sessions.h"

struct pl_api {
    const struct pl_config *config;
    struct pl_keys *keys;
    const struct pl_grants *grants; /* NULL when PLIMSOLL_GRANTS_FILE is unset */
    pl_grants_env_fn env;           /* where shared tokens and HS256 keys are read */
    void *env_userdata;
    struct pl_provider *provider;
    struct pl_admission *admission;
    struct pl_metrics *metrics;
    struct pl_sessions *sessions; /* NULL when sessions are off */
    unsigned effective_concurrency;
    atomic_bool draining;
};

struct pl_api_request {
    const char *http_method;   /* "GET", "POST", ... */
    const char *path;          /* URL path, no query */
    const char *content_type;  /* may be NULL */
    const char *authorization; /* may be NULL */
    const char *body;
    size_t body_len;
    bool body_too_large; /* the server stopped reading at the limit */
};

struct pl_api_response {
    int status;
    const char *content_type;
    char *body; /* malloc'd */
    size_t body_len;
    const char *allow; /* Allow header for 405, else NULL */
};

/* Handle one call; always fills ret (status 500 on internal failure). */
void pl_api_handle(struct pl_api *api, const struct pl_api_request *rq,
                   struct pl_api_response *ret);

void pl_api_response_clear(struct pl_api_response *rs);

/* The Describe answer (also logged once at startup). */
json_t *pl_api_describe(struct pl_api *api);

/* Encode google.rpc.ErrorInfo as protobuf bytes (exposed for tests). */
int pl_error_info_encode(const char *reason, const char *domain, const char *const *meta_keys,
                         const char *const *meta_values, size_t nmeta, unsigned char **ret,
                         size_t *ret_len);
