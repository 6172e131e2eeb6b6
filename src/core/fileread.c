/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fileread.c: reading a whole file, strictly (fileread.h).
 */
#include "fileread.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

int pl_file_read(const char *path, size_t max, char **ret, size_t *ret_len) {
    *ret = NULL;
    *ret_len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    if (st.st_size > (off_t)max) {
        close(fd);
        return -EFBIG;
    }
    char *buf = malloc(max + 2);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    size_t len = 0;
    int rc = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, max + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -EIO;
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > max) { /* it grew while we read */
            rc = -EFBIG;
            break;
        }
    }
    close(fd);
    if (rc < 0) {
        pl_file_free(buf, len);
        return rc;
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    return 0;
}

void pl_file_free(char *buf, size_t len) {
    if (buf) {
        OPENSSL_cleanse(buf, len);
        free(buf);
    }
}

const char *pl_file_problem(int rc) {
    switch (rc) {
    case -EINVAL: return "is not a regular file";
    case -EFBIG: return "is too large";
    case -EIO: return "cannot be read";
    case -ENOMEM: return "cannot be read (out of memory)";
    default: return "cannot be opened";
    }
}
