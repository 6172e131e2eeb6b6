/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fileread.h: reading a whole file the daemon was told to trust, strictly.
 *
 * The settings name files (keys, grants, a seccomp profile, a signing
 * key).  One reader serves them all, with the same rules: the path must
 * name a regular file (a FIFO would hang the daemon, a device could be
 * anything; O_NONBLOCK keeps even the open from waiting), of at most max
 * bytes, read whole; the buffer is NUL-terminated for text parsers and is
 * wiped before it is freed (secrets pass through it).
 * docs/internals/fileread.md.
 */
#pragma once

#include <stddef.h>

/*
 * Read path into a malloc'd buffer of *ret_len bytes plus a NUL.  0, or:
 *   -ENOENT, -EACCES, ...  it cannot be opened (open's errno)
 *   -EINVAL                it is not a regular file
 *   -EFBIG                 it is larger than max bytes
 *   -EIO, -ENOMEM          it cannot be read
 */
int pl_file_read(const char *path, size_t max, char **ret, size_t *ret_len);

/* Wipe and free a buffer from pl_file_read (NULL-safe). */
void pl_file_free(char *buf, size_t len);

/* The rule a pl_file_read error broke, in words ("is not a regular file"). */
const char *pl_file_problem(int rc);
