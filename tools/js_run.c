/* SPDX-License-Identifier: Apache-2.0 */
/*
 * js-run: run one JavaScript snippet through the wasm provider's worker pool,
 * for manual checks.  Prints the guest's stdout and stderr, then the
 * result struct (on stderr), and exits with the run's exit code (or 70 on
 * an infrastructure error).
 *
 *   js-run [-m MEMORY_MIB] [-t TIMEOUT_MS] [-o STDOUT_CAP] [-e STDERR_CAP]
 *          [-i STDIN_FILE|-] (-c CODE | FILE | -)
 *
 * The worker executable is found as for pl_js_pool_new() (PLIMSOLL_JS_WORKER
 * or the path compiled in).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/providers/wasm/js_pool.h"

/* Read a whole file ("-" = stdin) into a malloc'd buffer. */
static int read_file(const char *path, char **ret_buf, size_t *ret_len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rbe");
    char *buf = NULL;
    size_t len = 0, cap = 0;

    if (!f)
        return -errno;
    for (;;) {
        if (cap - len < 65536) {
            char *n = realloc(buf, cap + 65536);
            if (!n) {
                free(buf);
                if (f != stdin)
                    fclose(f);
                return -ENOMEM;
            }
            buf = n;
            cap += 65536;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (f != stdin)
        fclose(f);
    *ret_buf = buf;
    *ret_len = len;
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: js-run [-m MEMORY_MIB] [-t TIMEOUT_MS] [-o STDOUT_CAP] "
                    "[-e STDERR_CAP] [-i STDIN_FILE|-] (-c CODE | FILE | -)\n");
}

int main(int argc, char **argv) {
    struct pl_js_limits lim = {
        .memory_bytes = 64ull << 20,
        .timeout_ms = 2000,
        .stdout_cap = 1 << 20,
        .stderr_cap = 1 << 20,
    };
    struct pl_js_result res;
    struct pl_js_pool *pool = NULL;
    const char *inline_code = NULL, *stdin_path = NULL;
    char *code = NULL, *in = NULL;
    struct pl_error err = {0};
    size_t code_len = 0, in_len = 0;
    int opt, r;

    while ((opt = getopt(argc, argv, "m:t:o:e:i:c:h")) != -1) {
        switch (opt) {
        case 'm': lim.memory_bytes = strtoull(optarg, NULL, 10) << 20; break;
        case 't': lim.timeout_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'o': lim.stdout_cap = strtoull(optarg, NULL, 10); break;
        case 'e': lim.stderr_cap = strtoull(optarg, NULL, 10); break;
        case 'i': stdin_path = optarg; break;
        case 'c': inline_code = optarg; break;
        default: usage(); return 2;
        }
    }
    if (inline_code) {
        code = strdup(inline_code);
        code_len = strlen(inline_code);
    } else if (optind < argc) {
        r = read_file(argv[optind], &code, &code_len);
        if (r < 0) {
            fprintf(stderr, "js-run: %s: %s\n", argv[optind], strerror(-r));
            return 2;
        }
    } else {
        usage();
        return 2;
    }
    if (stdin_path && (r = read_file(stdin_path, &in, &in_len)) < 0) {
        fprintf(stderr, "js-run: %s: %s\n", stdin_path, strerror(-r));
        return 2;
    }

    {
        /* $PLIMSOLL_JS_WORKER, else the worker beside this program. */
        static char path[4096];
        const char *env = getenv("PLIMSOLL_JS_WORKER");
        ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
        if (env && *env) {
            snprintf(path, sizeof(path), "%s", env);
        } else if (n > 0) {
            path[n] = '\0';
            char *slash = strrchr(path, '/');
            if (slash)
                memcpy(slash + 1, "plimsoll-js-worker", sizeof("plimsoll-js-worker"));
        }
        r = pl_js_pool_new_ex(1, path, &pool, &err);
    }
    if (r < 0) {
        fprintf(stderr, "js-run: %s\n", err.message);
        return 70;
    }
    r = pl_js_pool_run(pool, code, code_len, in, in_len, &lim, &res);
    if (r < 0) {
        fprintf(stderr, "js-run: run failed: %s\n", strerror(-r));
        pl_js_pool_free(pool);
        return 70;
    }
    fwrite(res.out.data, 1, res.out.len, stdout);
    fflush(stdout);
    fwrite(res.err.data, 1, res.err.len, stderr);
    fprintf(stderr,
            "--- %s: exit_code=%d timed_out=%d out_of_memory=%d trapped=%d out_len=%zu "
            "out_truncated=%d err_len=%zu err_truncated=%d duration=%.3f ms guest=%.3f ms\n",
            pl_js_quickjs_version(), res.exit_code, res.timed_out, res.out_of_memory, res.trapped,
            res.out.len, res.out.truncated, res.err.len, res.err.truncated,
            (double)res.duration_ns / 1e6, (double)res.guest_ns / 1e6);
    r = res.exit_code;
    pl_js_result_free(&res);
    pl_js_pool_free(pool);
    free(code);
    free(in);
    return r;
}
