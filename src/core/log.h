/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h: structured log lines, one JSON object per line on stderr.
 *
 * Logging happens at the edges (the daemon and the API layer), once per
 * event.  Callers never pass a key, token or session id: the fields are
 * chosen by the API layer, and no field carries caller secrets.
 */
#pragma once

#include <jansson.h>

/* Write {"ts":..., "level":level, "msg":msg, ...fields} and a newline.
 * Steals the reference to fields (may be NULL). */
void pl_log(const char *level, const char *msg, json_t *fields);
