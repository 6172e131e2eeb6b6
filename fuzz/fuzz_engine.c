/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_engine.c: libFuzzer harness for what the Docker Engine answers.
 *
 * The first byte picks the target, the rest is the engine's bytes:
 *   0  the stdout/stderr stream demultiplexer (pl_demux_feed): byte 1 picks
 *      the two caps, byte 2 seeds the chunking; the stream is fed in those
 *      chunks and, separately, at once, and both must agree with a plain
 *      reference reading of the frames;
 *   1  an API answer: collected as libcurl hands it over (chunks, a size
 *      limit picked by byte 1), parsed as pl_docker_call parses it, then
 *      read by every reader docker.c uses (create, list, wait, container
 *      and exec inspect, image inspect, /info, error messages, the session
 *      settings digest);
 *   2  the head of a hijacked stream's answer (attach, exec start);
 *   3  the bootstrap's files report (pl_docker_files_report), byte 1 the
 *      cap: accepted only as exactly one "PLIMSOLL {...}" line;
 *   4  the cleanup's report (pl_docker_agent_report): accepted only as
 *      exactly one line;
 *   5  the run's end marker (pl_demux_expect_end) in a guest's stdout: byte
 *      1 seeds the chunking, the rest is what the guest and the bootstrap
 *      wrote; fed as frames in chunks, it must agree with a plain reading
 *      (the first whole marker and its status taken out, nothing else lost);
 *   6  a launcher's stream (pl_last_line), byte 1 seeding the chunking: its
 *      report must be the plain reading of the stream's last line;
 *   7  a session's step runner's word (pl_docker_runner_word): accepted only
 *      as what printing the numbers it gives back writes.
 * (the first byte's value mod 8), except two values of their own:
 *   0xf8  ReadFile's reader's report (pl_docker_read_report);
 *   0xf9  ListFiles' lister's report (pl_docker_list_report), byte 1 the
 *         most entries: each accepted entry a FileEntry of a relative path;
 *   0xfa  a project's collect report (pl_docker_collect_report), byte 1
 *         the most files and whether a torn report is taken, byte 2 the
 *         byte budget: the artifacts within both, each path relative.
 * Any crash, leak, sanitizer report or broken invariant (abort) is a bug. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/docker/engine.h"
#include "../src/providers/docker/engine_parse.h"
#include "../src/providers/docker/reports.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t CAPS[8] = {0, 1, 7, 8, 100, 4096, 65536, 1u << 20};

static uint32_t next_rand(uint32_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static bool same_demux(const struct pl_demux *a, const struct pl_demux *b) {
    return a->broken == b->broken && a->out.total == b->out.total && a->err.total == b->err.total &&
           a->out.kept.len == b->out.kept.len && a->err.kept.len == b->err.kept.len &&
           (!a->out.kept.len || memcmp(a->out.kept.data, b->out.kept.data, a->out.kept.len) == 0) &&
           (!a->err.kept.len || memcmp(a->err.kept.data, b->err.kept.data, a->err.kept.len) == 0) &&
           (a->broken || (a->remaining == b->remaining && a->hdr_len == b->hdr_len));
}

/* The frames as the engine's documentation describes them, read at once. */
static void reference(const uint8_t *p, size_t n, struct pl_demux *ref) {
    size_t i = 0;
    while (i < n) {
        if (n - i < 8)
            return; /* a header still incomplete */
        const uint8_t *h = p + i;
        if ((h[0] != 1 && h[0] != 2) || h[1] || h[2] || h[3]) {
            ref->broken = true;
            return;
        }
        uint32_t len = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
        i += 8;
        size_t take = n - i < len ? n - i : len;
        struct pl_buf *b = h[0] == 1 ? &ref->out.kept : &ref->err.kept;
        size_t cap = h[0] == 1 ? ref->out.cap : ref->err.cap;
        size_t keep = b->len < cap ? cap - b->len : 0;
        if (keep > take)
            keep = take;
        if (keep && pl_buf_append(b, p + i, keep) < 0)
            abort();
        *(h[0] == 1 ? &ref->out.total : &ref->err.total) += take;
        i += take;
    }
}

static void fuzz_demux(const uint8_t *p, size_t n) {
    if (n < 2)
        return;
    size_t out_cap = CAPS[p[0] & 7], err_cap = CAPS[(p[0] >> 3) & 7];
    uint32_t seed = 0x9e3779b9u ^ p[1];
    bool tiny = p[0] & 0x40; /* chunks of 1..4 bytes, else 1..256 */
    p += 2;
    n -= 2;
    struct pl_demux chunked = {.out = {.cap = out_cap}, .err = {.cap = err_cap}};
    struct pl_demux whole = chunked, ref = chunked;
    size_t off = 0;
    int last = 0;
    while (off < n) {
        size_t c = 1 + next_rand(&seed) % (tiny ? 4 : 256);
        if (c > n - off)
            c = n - off;
        int r = pl_demux_feed(&chunked, p + off, c);
        if (r < 0 && !chunked.broken)
            abort(); /* only a broken stream is refused */
        if (last < 0 && r == 0)
            abort(); /* broken stays broken */
        last = r;
        off += c;
    }
    if (pl_demux_feed(&whole, p, n) < 0 && !whole.broken)
        abort();
    reference(p, n, &ref);
    if (chunked.out.kept.len > out_cap || chunked.err.kept.len > err_cap ||
        chunked.out.total < chunked.out.kept.len || chunked.err.total < chunked.err.kept.len)
        abort();
    if (!same_demux(&chunked, &whole) || chunked.broken != ref.broken ||
        chunked.out.total != ref.out.total || chunked.err.total != ref.err.total ||
        chunked.out.kept.len != ref.out.kept.len || chunked.err.kept.len != ref.err.kept.len ||
        (ref.out.kept.len &&
         memcmp(chunked.out.kept.data, ref.out.kept.data, ref.out.kept.len) != 0) ||
        (ref.err.kept.len &&
         memcmp(chunked.err.kept.data, ref.err.kept.data, ref.err.kept.len) != 0))
        abort();
    pl_demux_free(&chunked);
    pl_demux_free(&whole);
    pl_demux_free(&ref);
}

struct list_seen {
    unsigned called, kept;
};

static int each_id(const char *id, void *ud) {
    struct list_seen *s = ud;
    if (!id)
        abort();
    s->called++;
    if (strlen(id) % 2)
        return -1;
    s->kept++;
    return 0;
}

static bool is_hex64(const char *s) {
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[64] == '\0';
}

static void read_answer(const json_t *j) {
    /* error answers */
    const char *m = pl_docker_message(j);
    if (!m)
        abort();
    (void)strlen(m);
    /* create: the ID into a buffer of exactly its size */
    char *id = malloc(PL_DOCKER_ID_MAX);
    if (!id)
        return;
    if (pl_docker_created_id(j, id) == 0) {
        const char *want = json_string_value(json_object_get(j, "Id"));
        if (!want || strcmp(id, want) != 0 || strlen(id) >= PL_DOCKER_ID_MAX)
            abort();
    }
    free(id);
    /* containers list (the orphan cleanup) */
    struct list_seen seen = {0};
    unsigned n = pl_docker_list_ids(j, each_id, &seen);
    if (n != seen.kept || seen.called > json_array_size(j))
        abort();
    /* wait, container inspect, exec inspect */
    (void)pl_docker_wait_code(j);
    (void)pl_docker_state_flag(j, "Running");
    (void)pl_docker_state_flag(j, "Paused");
    (void)pl_docker_state_flag(j, "OOMKilled");
    int code = pl_docker_exec_exit(j);
    if (code != -1 && !json_is_integer(json_object_get(j, "ExitCode")))
        abort();
    /* image inspect: docker.c's ID buffers hold 80 bytes */
    char *img = malloc(80);
    if (!img)
        return;
    const char *vol = NULL;
    int r = pl_docker_image_check(j, img, 80, &vol);
    if (r == 1 && !vol)
        abort();
    if (r == 0 && (strncmp(img, "sha256:", 7) != 0 || strlen(img) >= 80))
        abort();
    free(img);
    /* /info */
    const char *rt[] = {"runc", "runsc", "io.containerd.runc.v2", ""};
    for (size_t i = 0; i < sizeof(rt) / sizeof(rt[0]); i++) {
        const char *path = pl_docker_runtime_path(j, rt[i]);
        if (path)
            (void)strlen(path);
    }
    if (!pl_docker_server_version(j))
        abort();
    /* the session settings digest: a pure function of the answer */
    char fp1[65], fp2[65];
    bool run1 = false, pause1 = false, run2 = true, pause2 = true;
    int r1 = pl_docker_session_fp(j, fp1, &run1, &pause1);
    json_t *copy = json_deep_copy(j);
    if (copy) {
        int r2 = pl_docker_session_fp(copy, fp2, &run2, &pause2);
        if (r1 != r2 || run1 != run2 || pause1 != pause2 ||
            (r1 == 0 && (!is_hex64(fp1) || strcmp(fp1, fp2) != 0)))
            abort();
        json_decref(copy);
    }
}

static void fuzz_answer(const uint8_t *p, size_t n) {
    if (n < 1)
        return;
    /* the limit: pl_docker_call's, or one the input can pass */
    size_t max = p[0] & 0x80 ? PL_DOCKER_MAX_RESPONSE : (size_t)(p[0] & 0x7f) * 64;
    uint32_t seed = 0x85ebca6bu ^ p[0];
    p++;
    n--;
    struct pl_buf resp = {0};
    size_t off = 0;
    bool refused = false;
    while (off < n) {
        size_t c = 1 + next_rand(&seed) % 512;
        if (c > n - off)
            c = n - off;
        size_t before = resp.len;
        if (!pl_docker_body_append(&resp, p + off, c, max)) {
            if (resp.len != before || before + c <= max)
                abort(); /* refused only when too large, and nothing kept */
            refused = true;
            break; /* libcurl aborts the transfer */
        }
        if (resp.len > max || memcmp(resp.data + before, p + off, c) != 0)
            abort();
        off += c;
    }
    if (refused != (n > max))
        abort();
    if (!refused) {
        json_t *j = pl_docker_answer_json(&resp);
        if (j)
            read_answer(j);
        json_decref(j);
    }
    pl_buf_free(&resp);
}

static void fuzz_upgrade(const uint8_t *p, size_t n) {
    if (n > 8191) /* pl_docker_hijack reads at most this much */
        n = 8191;
    char *head = malloc(n + 1);
    if (!head)
        return;
    memcpy(head, p, n);
    head[n] = '\0';
    if (pl_docker_upgrade_head(head, n) == 0) {
        if (n < 16 || memcmp(head + n - 4, "\r\n\r\n", 4) != 0 ||
            (memcmp(head, "HTTP/1.1 101", 12) != 0 && memcmp(head, "HTTP/1.1 200", 12) != 0))
            abort();
    } else if (strstr(head, "\r\n")) {
        abort(); /* the message is cut at its first line */
    }
    free(head);
}

static void fuzz_files_report(const uint8_t *p, size_t n) {
    if (n < 1)
        return;
    size_t cap = CAPS[p[0] % 8];
    const char *out = (const char *)p + 1;
    size_t len = n - 1 < cap ? n - 1 : cap;
    char why[160];
    json_t *j = pl_docker_files_report(out, len, n - 1, cap, 137, why, sizeof(why));
    if (j) {
        /* Exactly one whole line, within the cap, naming its outcome. */
        if (n - 1 > cap || len < 11 || out[len - 1] != '\n' || memchr(out, '\n', len - 1) ||
            memcmp(out, "PLIMSOLL ", 9) != 0 || why[0] ||
            !(json_is_string(json_object_get(j, "setup")) ||
              json_is_string(json_object_get(j, "setup_failed"))))
            abort();
        json_decref(j);
    } else if (!why[0]) {
        abort(); /* a refusal always says why */
    }
}

static void fuzz_agent_report(const uint8_t *p, size_t n) {
    const char *out = (const char *)p;
    json_t *j = pl_docker_agent_report(out, n);
    if (j) {
        if (!json_is_object(j) || n < 2 || out[n - 1] != '\n' || memchr(out, '\n', n - 1))
            abort();
        json_decref(j);
    }
}

/* A launcher's stream (pl_last_line): fed in chunks seeded by byte 1, the
 * report must be what a plain reading of the whole stream's last line
 * gives. */
static void fuzz_last_line(const uint8_t *p, size_t n) {
    if (n < 1)
        return;
    uint32_t seed = 0x9e3779b9u ^ p[0];
    const char *s = (const char *)p + 1;
    n--;
    struct pl_last_line *l = calloc(1, sizeof(*l));
    if (!l)
        return;
    for (size_t at = 0; at < n;) {
        size_t c = 1 + next_rand(&seed) % 300;
        if (c > n - at)
            c = n - at;
        pl_last_line_feed(l, s + at, c);
        at += c;
    }
    json_t *got = pl_last_line_report(l);
    free(l);
    json_t *want = NULL;
    if (n >= 2 && s[n - 1] == '\n') {
        size_t b = n - 1;
        while (b > 0 && s[b - 1] != '\n')
            b--;
        size_t len = n - 1 - b;
        if (len > 0 && len <= PL_LAST_LINE_MAX) {
            want = json_loadb(s + b, len, JSON_REJECT_DUPLICATES, NULL);
            if (!json_is_object(want)) {
                json_decref(want);
                want = NULL;
            }
        }
    }
    if (!got != !want || (got && !json_equal(got, want)))
        abort();
    json_decref(got);
    json_decref(want);
}

/* A marker whose own prefix repeats, so a broken match must be tried again
 * from inside itself. */
static const char MARK[] = "\x1e\x1e"
                           "E"
                           "\x1e\x1e"
                           "EN ";

static void fuzz_end_mark(const uint8_t *p, size_t n) {
    if (n < 1)
        return;
    uint32_t seed = 0x85ebca6bu ^ p[0];
    p++;
    n--;
    size_t ml = sizeof(MARK) - 1;
    struct pl_demux d = {.out = {.cap = 1u << 20}, .err = {.cap = 1u << 20}};
    pl_demux_expect_end(&d, MARK, ml);
    size_t off = 0;
    while (off < n) {
        size_t c = 1 + next_rand(&seed) % 16;
        if (c > n - off)
            c = n - off;
        unsigned char frame[8 + 16] = {1, 0, 0, 0, 0, 0, 0, (unsigned char)c};
        memcpy(frame + 8, p + off, c);
        /* the header and the payload split at a random point too */
        size_t cut = next_rand(&seed) % (8 + c + 1);
        if (pl_demux_feed(&d, frame, cut) < 0 || pl_demux_feed(&d, frame + cut, 8 + c - cut) < 0)
            abort();
        off += c;
    }
    const struct pl_demux_mark *m = &d.m[0];
    /* The plain reading: the first whole marker, then three digits and a
     * newline (or the first byte that is not). */
    const uint8_t *hit = n >= ml ? memmem(p, n, MARK, ml) : NULL;
    size_t want_len = n, cut_at = n, cut_len = 0;
    bool done = false, bad = false, after = false;
    int status = 0;
    if (hit) {
        size_t at = (size_t)(hit - p), k = 0;
        const uint8_t *st = hit + ml;
        size_t left = n - at - ml;
        while (k < left && k < 4 && (k < 3 ? st[k] >= '0' && st[k] <= '9' : st[k] == '\n'))
            k++;
        if (k == 4) {
            done = true;
            status = (st[0] - '0') * 100 + (st[1] - '0') * 10 + (st[2] - '0');
            bad = status > 255;
            cut_len = ml + 4;
        } else if (k < left) {
            done = bad = true;
            cut_len = ml + k + 1;
        }
        if (done) {
            cut_at = at;
            want_len = n - cut_len;
            after = n > at + cut_len;
        }
    }
    if (m->done != done || m->bad != bad || m->after != after ||
        (done && !bad && m->status != status))
        abort();
    if (pl_demux_flush(&d) < 0 || d.out.kept.len != want_len || d.out.total != want_len ||
        d.err.total != 0 || (cut_at && memcmp(d.out.kept.data, p, cut_at) != 0) ||
        (want_len > cut_at &&
         memcmp(d.out.kept.data + cut_at, p + cut_at + cut_len, want_len - cut_at) != 0))
        abort();
    int got = -1;
    if (pl_demux_ended(&d, &got))
        abort(); /* stderr never had the marker */
    pl_demux_free(&d);
}

/* A step runner's word: whatever is accepted prints back to its bytes. */
static void fuzz_runner_word(const uint8_t *p, size_t n) {
    long pids[4];
    unsigned long long starts[4];
    int k = pl_docker_runner_word((const char *)p, n, pids, starts, 4);
    if (k < 0)
        return;
    if (k == 0 || k > 4)
        abort();
    char buf[256];
    size_t at = 0;
    for (int i = 0; i < k; i++) {
        if (pids[i] < 2)
            abort();
        at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%ld %llu", i ? " " : "", pids[i],
                               starts[i]);
    }
    if (at + 1 != n || memcmp(buf, p, at) != 0 || p[at] != '\n')
        abort();
}

/* ReadFile's report: what is accepted has its head line and a size that
 * fits, and the bytes begin right after it. */
static void fuzz_read_report(const uint8_t *p, size_t n) {
    uint64_t size = 0;
    size_t head = 0;
    if (pl_docker_read_report((const char *)p, n, &size, &head) < 0)
        return;
    if (head < 20 || head > n || p[head - 1] != '\n' || memchr(p, '\n', head - 1) ||
        memcmp(p, "PLIMSOLL ", 9) != 0 || size > 0xffffffffull)
        abort();
}

/* ListFiles' report: at most `most` entries, each a FileEntry whose path is
 * relative and free of "..", and the whole input used. */
static void fuzz_list_report(const uint8_t *p, size_t n) {
    if (n < 1)
        return;
    size_t most = p[0] % 16;
    json_t *entries = NULL;
    bool truncated = false;
    if (pl_docker_list_report((const char *)p + 1, n - 1, most, &entries, &truncated) < 0) {
        if (entries)
            abort();
        return;
    }
    if (!json_is_array(entries) || json_array_size(entries) > most || p[n - 1] != '\n')
        abort();
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        const char *path = json_string_value(json_object_get(e, "path"));
        if (!path || !*path || path[0] == '/' || strstr(path, "//") ||
            !json_is_string(json_object_get(e, "type")) ||
            json_integer_value(json_object_get(e, "size")) > 0xffffffffll ||
            json_integer_value(json_object_get(e, "mode")) > 07777)
            abort();
    }
    json_decref(entries);
}

/* A collect report: at most the files and bytes allowed, each artifact a
 * relative path without NUL, its bytes no more than its size. */
static void fuzz_collect_report(const uint8_t *p, size_t n) {
    if (n < 2)
        return;
    struct pl_collect_ctx b = {.files = 1u + (p[0] & 0x7f) % 16, .bytes = (unsigned)p[1] * 16};
    bool partial = p[0] & 0x80;
    struct pl_artifact *a = NULL;
    size_t na = 0, total = 0;
    bool truncated = false;
    if (pl_docker_collect_report((const char *)p + 2, n - 2, &b, partial, &a, &na, &truncated) <
        0) {
        if (a)
            abort();
        return;
    }
    if (na > b.files || (!partial && p[n - 1] != '\n'))
        abort();
    for (size_t i = 0; i < na; i++) {
        if (!a[i].path_len || a[i].path[0] == '/' || memchr(a[i].path, '\0', a[i].path_len) ||
            a[i].len > a[i].size || (a[i].len && !a[i].data) ||
            a[i].truncated != (a[i].len < a[i].size))
            abort();
        total += a[i].len;
    }
    if (total > b.bytes)
        abort();
    pl_artifacts_free(a, na);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    /* Two first bytes of their own (the rest go by data[0] % 8, as the
     * corpus was made): 0xf8 ReadFile's report, 0xf9 ListFiles', 0xfa a
     * collect report. */
    if (data[0] == 0xf8) {
        fuzz_read_report(data + 1, size - 1);
        return 0;
    }
    if (data[0] == 0xf9) {
        fuzz_list_report(data + 1, size - 1);
        return 0;
    }
    if (data[0] == 0xfa) {
        fuzz_collect_report(data + 1, size - 1);
        return 0;
    }
    switch (data[0] % 8) {
    case 0: fuzz_demux(data + 1, size - 1); break;
    case 1: fuzz_answer(data + 1, size - 1); break;
    case 2: fuzz_upgrade(data + 1, size - 1); break;
    case 3: fuzz_files_report(data + 1, size - 1); break;
    case 4: fuzz_agent_report(data + 1, size - 1); break;
    case 6: fuzz_last_line(data + 1, size - 1); break;
    case 7: fuzz_runner_word(data + 1, size - 1); break;
    default: fuzz_end_mark(data + 1, size - 1); break;
    }
    return 0;
}
