/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_parse.h: the readers of what the Docker Engine answers, apart from
 * the calls that fetch it, so the fuzzer (fuzz/fuzz_engine.c) reaches them
 * without a socket.  Internal to the docker provider; pl_demux_feed and
 * pl_docker_message (engine.h) are the other two.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../core/buf.h"

#define PL_DOCKER_ID_MAX 72 /* bytes of a container ID, with its NUL */

/*
 * One chunk of an API answer: appended to b unless b would then hold more
 * than max bytes (pl_docker_call's max is PL_DOCKER_MAX_RESPONSE).  false:
 * refused (too large, or out of memory); libcurl then aborts the transfer.
 */
bool pl_docker_body_append(struct pl_buf *b, const void *data, size_t len, size_t max);

/* The answer's JSON: NULL when it is empty or not JSON. */
json_t *pl_docker_answer_json(const struct pl_buf *resp);

/*
 * The head of a hijacked stream's answer (attach, exec start): len bytes
 * at head, NUL-terminated at head[len].  0 when it is a whole head (ends
 * in an empty line) answering 101 or 200; else -1, with head cut at its
 * first line break (for the error message).
 */
int pl_docker_upgrade_head(char *head, size_t len);

/* The "Id" of a create answer into ret_id; -1 when absent or too long. */
int pl_docker_created_id(const json_t *created, char ret_id[PL_DOCKER_ID_MAX]);

/*
 * A container list (GET /containers/json): each element's "Id" string is
 * given to each(); returns how many calls returned 0.
 */
unsigned pl_docker_list_ids(const json_t *list, int (*each)(const char *id, void *ud), void *ud);

/* A wait answer's "StatusCode" (0 when absent). */
int pl_docker_wait_code(const json_t *wait);

/* Container inspect: State.<flag> is true ("Running", "Paused", "OOMKilled"). */
bool pl_docker_state_flag(const json_t *inspect, const char *flag);

/* Exec inspect: the exit code, or -1 while running or when unknown. */
int pl_docker_exec_exit(const json_t *inspect);

/*
 * Image inspect, the startup proof's checks: 1 when Config.Volumes names a
 * volume (*ret_volume: the first, pointing into j); 2 when the ID is not a
 * "sha256:" ID shorter than idlen; else 0 with the ID in ret_id.
 */
int pl_docker_image_check(const json_t *j, char *ret_id, size_t idlen, const char **ret_volume);

/* /info: the path the runtime is registered with, or NULL. */
const char *pl_docker_runtime_path(const json_t *info, const char *runtime);

/* /info: ServerVersion, or "?". */
const char *pl_docker_server_version(const json_t *info);

/*
 * Container inspect: the digest of the security settings a session must
 * keep (HostConfig's, Config.User, Image) and State.Running / Paused.
 * Returns < 0 when the digest cannot be made (a real number, out of memory).
 */
int pl_docker_session_fp(const json_t *inspect, char ret_fp[65], bool *running, bool *paused);
