/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seccomp_bpf.h: a seccomp profile (the engine's JSON format) compiled to
 * the classic BPF program the kernel takes, for the processes the runtime
 * does not filter itself.
 *
 * Under runc the container's profile covers every process of the
 * container, execs included.  Under runsc (gVisor 2022-12-19, measured) it
 * covers only the container's first process: a `docker exec` runs with no
 * filter at all.  Every exec plimsoll makes under runsc therefore starts a
 * small helper that installs this program (PR_SET_NO_NEW_PRIVS, then
 * SECCOMP_SET_MODE_FILTER) before anything of the guest's runs, so a
 * session's calls, cells and a project's steps meet the same filter as a
 * snippet (docs/providers/docker.md).
 *
 * The profile subset read: defaultAction and defaultErrnoRet; archMap's
 * sub-architectures of x86_64; syscalls[] with names, action (ALLOW,
 * ERRNO with errnoRet, KILL, KILL_PROCESS, KILL_THREAD, TRAP, LOG) and args
 * (index, value, valueTwo, op EQ, NE, LT, LE, GT, GE, MASKED_EQ).  A rule
 * with includes or excludes, or another action or op, is refused: plimsoll
 * never applies less than the profile says.  Names this kernel's library
 * does not know are skipped, as the engine skips them.
 */
#pragma once

#include <stddef.h>

#include "../../core/errors.h"

/*
 * Compile profile_json.  On success *ret is the program (malloc'd, a
 * multiple of 8 bytes: struct sock_filter) and *ret_len its size.  err
 * names SANDBOX_DOCKER_SECCOMP when the profile cannot be compiled.
 */
int pl_docker_seccomp_bpf(const char *profile_json, unsigned char **ret, size_t *ret_len,
                          struct pl_error *err);
