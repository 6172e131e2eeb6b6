/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reports.h: the readers of what plimsoll's own helpers inside a sandbox
 * report (the bootstrap's files report, the session agent's launch and
 * cleanup reports), apart from the calls that fetch them, so unit tests and
 * the fuzzer (fuzz/fuzz_engine.c) reach them.  Internal to the docker
 * provider.
 *
 * A helper reports before any guest code can reach its output (the
 * bootstrap before the first step; the launcher and the cleanup with a
 * group of their own, docs/sessions.md), so a report is trusted for what
 * it says only when it has exactly its shape: anything added, cut or
 * garbled is refused, never read around.
 */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The bootstrap's files report: out holds the container's stdout as kept
 * (len bytes; total were written, cap was the limit).  It must be exactly
 * one line "PLIMSOLL {...}\n" whose object has a string "setup" or
 * "setup_failed".  Returns the object, or NULL with why (a sentence, at
 * most wlen bytes) saying what was wrong: oversized, torn, trailing bytes,
 * unreadable, or empty (exit_code then says how the sandbox ended).
 */
json_t *pl_docker_files_report(const char *out, size_t len, uint64_t total, size_t cap,
                               int exit_code, char *why, size_t wlen);

/*
 * An agent's report: out (len bytes) must be prefix (may be "") then
 * exactly one line holding one JSON object, nothing after it.  Returns the
 * object, or NULL.
 */
json_t *pl_docker_agent_report(const char *out, size_t len, const char *prefix);
