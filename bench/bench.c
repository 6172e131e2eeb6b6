/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench.c: latency measurements for bench/run.
 *
 *   bench http URL KEY N BODY   POST BODY to URL N times on one keep-alive
 *                               connection (after 50 warm-up calls)
 *   bench http-new URL KEY N BODY   the same, a new connection each time
 *   bench http-paced URL KEY N BODY GAP_MS   as http, but each call starts
 *                               GAP_MS after the previous one started (a
 *                               steady rate; 3 warm-up calls)
 *   bench spawn N CMD [ARG...]  run CMD N times (posix_spawn + wait),
 *                               stdout to /dev/null
 *
 * Prints one JSON object: n, p50_us, p95_us, p99_us, mean_us, min_us, and
 * for http the number of non-200 answers.  Timing only: whether answers are
 * right is the tests' business.
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

extern char **environ;

static void report(double *t, int n, int bad) {
    printf("{");
    print_series(t, n);
    printf(",\"bad\":%d}\n", bad);
}

static size_t sink(char *p, size_t s, size_t n, void *ud) {
    (void)p;
    (void)ud;
    return s * n;
}

static int bench_http(const char *url, const char *key, int n, const char *body, int fresh,
                      double gap_ms) {
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char auth[1024];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, auth);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    double *t = calloc((size_t)n, sizeof(*t));
    int bad = 0;
    double next = now_us();
    for (int i = gap_ms > 0 ? -3 : -50; i < n; i++) {
        if (fresh)
            curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L),
                curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
        if (gap_ms > 0) { /* the call's start on the steady schedule */
            double wait = next - now_us();
            if (wait > 0)
                usleep((useconds_t)wait);
            next += gap_ms * 1000.0;
        }
        double t0 = now_us();
        CURLcode rc = curl_easy_perform(c);
        double dt = now_us() - t0;
        long st = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
        if (i >= 0) {
            t[i] = dt;
            if (rc != CURLE_OK || st != 200)
                bad++;
        }
    }
    report(t, n, bad);
    free(t);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return 0;
}

static int bench_spawn(int n, char **argv) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    double *t = calloc((size_t)n, sizeof(*t));
    int bad = 0;
    for (int i = -3; i < n; i++) {
        double t0 = now_us();
        pid_t pid;
        int st = 0;
        if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0 ||
            waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad += i >= 0;
        if (i >= 0)
            t[i] = now_us() - t0;
    }
    report(t, n, bad);
    free(t);
    posix_spawn_file_actions_destroy(&fa);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 6 && (strcmp(argv[1], "http") == 0 || strcmp(argv[1], "http-new") == 0)) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return bench_http(argv[2], argv[3], (int)strtol(argv[4], NULL, 10), argv[5],
                          strcmp(argv[1], "http-new") == 0, 0);
    }
    if (argc >= 7 && strcmp(argv[1], "http-paced") == 0) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return bench_http(argv[2], argv[3], (int)strtol(argv[4], NULL, 10), argv[5], 0,
                          strtod(argv[6], NULL));
    }
    if (argc >= 4 && strcmp(argv[1], "spawn") == 0)
        return bench_spawn((int)strtol(argv[2], NULL, 10), argv + 3);
    fprintf(stderr, "usage: bench http|http-new URL KEY N BODY | bench http-paced URL KEY N "
                    "BODY GAP_MS | bench spawn N CMD [ARG...]\n");
    return 2;
}
