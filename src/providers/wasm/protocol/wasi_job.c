/* SPDX-License-Identifier: Apache-2.0 */
/* wasi_job.c: the module job encoding (see wasi_job.h). */
#include "wasi_job.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 4096u

static void put_u32(char *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (char)(v >> (8 * i));
}

static uint32_t get_u32(const char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)(unsigned char)p[i] << (8 * i);
    return v;
}

char *pl_wasi_job_encode(const char *const *args, size_t nargs, const uint8_t *wasm,
                         size_t wasm_len, size_t *ret_len) {
    if (nargs > MAX_ARGS)
        return NULL;
    size_t len = 4 + wasm_len;
    for (size_t i = 0; i < nargs; i++)
        len += 4 + strlen(args[i]);
    char *buf = malloc(len ? len : 1);
    if (!buf)
        return NULL;
    char *p = buf;
    put_u32(p, (uint32_t)nargs);
    p += 4;
    for (size_t i = 0; i < nargs; i++) {
        size_t n = strlen(args[i]);
        put_u32(p, (uint32_t)n);
        memcpy(p + 4, args[i], n);
        p += 4 + n;
    }
    if (wasm_len)
        memcpy(p, wasm, wasm_len);
    *ret_len = len;
    return buf;
}

void pl_wasi_job_free(struct pl_wasi_job *job) {
    if (!job)
        return;
    for (size_t i = 0; i < job->nargs; i++)
        free(job->args[i]);
    free(job->args);
    memset(job, 0, sizeof(*job));
}

/* The n arguments after the count, into j (each one counted in j->nargs
 * as it is made, so pl_wasi_job_free releases what there is); *off moves
 * past them.  -1 when they do not fit in len or one holds a NUL. */
static int decode_args(const char *buf, size_t len, uint32_t n, struct pl_wasi_job *j,
                       size_t *off) {
    for (uint32_t i = 0; i < n; i++) {
        if (len - *off < 4)
            return -1;
        uint32_t alen = get_u32(buf + *off);
        *off += 4;
        if (alen > len - *off || memchr(buf + *off, '\0', alen))
            return -1;
        j->args[i] = malloc((size_t)alen + 1);
        if (!j->args[i])
            return -1;
        memcpy(j->args[i], buf + *off, alen);
        j->args[i][alen] = '\0';
        j->nargs++;
        *off += alen;
    }
    return 0;
}

int pl_wasi_job_decode(const char *buf, size_t len, struct pl_wasi_job *ret) {
    struct pl_wasi_job j = {0};
    if (len < 4)
        return -1;
    uint32_t n = get_u32(buf);
    if (n > MAX_ARGS)
        return -1;
    size_t off = 4;
    j.args = calloc(n ? n : 1, sizeof(*j.args));
    if (!j.args)
        return -1;
    if (decode_args(buf, len, n, &j, &off) < 0) {
        pl_wasi_job_free(&j);
        return -1;
    }
    j.wasm = (const uint8_t *)buf + off;
    j.wasm_len = len - off;
    *ret = j;
    return 0;
}
