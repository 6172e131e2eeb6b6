/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine.c: Docker Engine API calls (libcurl over a Unix socket), the
 * attach stream, and the stdout/stderr demultiplexer.  See engine.h.
 */
#include "engine.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../core/canon.h"
#include "engine_parse.h"

#define ATTACH_HEADER_MAX 8192u
#define ATTACH_TIMEOUT_MS 10000
struct pl_docker_engine {
    char socket[108];
    pthread_mutex_t mu;
    /* The libcurl handle kept between calls, its connection to the engine
     * still open (docs/providers/docker.md, "One connection kept"); under
     * mu.  One: a kept handle holds three descriptors (the connection and
     * libcurl's wakeup pair), and with one the daemon's count stays what it
     * was after its first call (the hostile and load suites' leak checks);
     * calls that overlap open their own connection. */
    CURL *kept;
};

int pl_docker_engine_new(const char *docker_host, struct pl_docker_engine **ret,
                         struct pl_error *err) {
    const char *path = "/var/run/docker.sock";
    if (docker_host && *docker_host) {
        if (strncmp(docker_host, "unix://", 7) != 0)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "DOCKER_HOST: \"%.100s\" is not a local engine; plimsoll uses "
                                "only unix:///path (the broker socket and the cleanup after "
                                "each run need the engine on this machine)",
                                docker_host);
        path = docker_host + 7;
    }
    if (path[0] != '/' || strlen(path) >= sizeof(((struct pl_docker_engine *)0)->socket))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "DOCKER_HOST: the socket path must be absolute and short");
    struct pl_docker_engine *e = calloc(1, sizeof(*e));
    if (!e)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    memcpy(e->socket, path, strlen(path) + 1);
    pthread_mutex_init(&e->mu, NULL);
    *ret = e;
    return 0;
}

void pl_docker_engine_free(struct pl_docker_engine *e) {
    if (!e)
        return;
    curl_easy_cleanup(e->kept); /* NULL-safe */
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* A handle for one call: a kept one (its connection to the engine still
 * open, its options reset) or a new one. */
static CURL *handle_take(struct pl_docker_engine *e) {
    pthread_mutex_lock(&e->mu);
    CURL *c = e->kept;
    e->kept = NULL;
    pthread_mutex_unlock(&e->mu);
    if (!c)
        return curl_easy_init();
    curl_easy_reset(c); /* keeps the live connection, forgets every option */
    return c;
}

/* Keep a handle whose call went through, for the next call; a handle whose
 * call failed, or one while another is kept, is closed with its
 * connection. */
static void handle_give_back(struct pl_docker_engine *e, CURL *c, bool ok) {
    if (ok) {
        pthread_mutex_lock(&e->mu);
        if (!e->kept) {
            e->kept = c;
            c = NULL;
        }
        pthread_mutex_unlock(&e->mu);
    }
    if (c)
        curl_easy_cleanup(c);
}

/* The engine's socket is root's: opened close-on-exec, so that no child
 * the daemon starts (runsc ps / kill) inherits a kept connection. */
static curl_socket_t open_cloexec(void *ud, curlsocktype purpose, struct curl_sockaddr *a) {
    (void)ud;
    (void)purpose;
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

const char *pl_docker_engine_socket(const struct pl_docker_engine *e) {
    return e->socket;
}

bool pl_docker_body_append(struct pl_buf *b, const void *data, size_t len, size_t max) {
    return !(b->len + len > max || pl_buf_append(b, data, len) < 0);
}

json_t *pl_docker_answer_json(const struct pl_buf *resp) {
    return resp->len ? json_loadb(resp->data, resp->len, 0, NULL) : NULL;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    size_t len = size * n;
    if (!pl_docker_body_append(ud, p, len, PL_DOCKER_MAX_RESPONSE))
        return 0; /* aborts the transfer */
    return len;
}

int pl_docker_call(struct pl_docker_engine *e, const char *method, const char *path,
                   const json_t *body, long timeout_ms, long *ret_status, json_t **ret_json,
                   struct pl_error *err) {
    char url[1024];
    int n = snprintf(url, sizeof(url), "http://docker%s%s", PL_DOCKER_API, path);
    if (n < 0 || (size_t)n >= sizeof(url))
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: request path too long");
    CURL *c = handle_take(e);
    if (!c)
        return pl_error_set(err, PL_REASON_INTERNAL, "docker: out of memory");
    char *payload = body ? json_dumps(body, JSON_COMPACT) : NULL;
    struct curl_slist *h = NULL;
    struct pl_buf resp = {0};
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_cloexec);
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, e->socket);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
    if (payload) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(payload));
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
    }
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    handle_give_back(e, c, rc == CURLE_OK);
    free(payload);
    if (rc != CURLE_OK) {
        pl_buf_free(&resp);
        return pl_error_set(err, PL_REASON_INTERNAL, "docker engine at %s: %s %s: %s", e->socket,
                            method, path, curl_easy_strerror(rc));
    }
    *ret_status = status;
    if (ret_json) {
        *ret_json = pl_docker_answer_json(&resp);
    }
    pl_buf_free(&resp);
    return 0;
}

char *pl_docker_urlencode(const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(n * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return out;
}

const char *pl_docker_message(const json_t *answer) {
    const char *m = json_string_value(json_object_get(answer, "message"));
    return m ? m : "";
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int pl_docker_attach(struct pl_docker_engine *e, const char *id, int *ret_fd,
                     struct pl_error *err) {
    char path[256];
    snprintf(path, sizeof(path), "/containers/%.128s/attach?stream=1&stdin=1&stdout=1&stderr=1",
             id);
    return pl_docker_hijack(e, path, NULL, ret_fd, err);
}

int pl_docker_hijack(struct pl_docker_engine *e, const char *path, const char *json_body,
                     int *ret_fd, struct pl_error *err) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "socket: %s", strerror(errno));
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, e->socket, strlen(e->socket) + 1);
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        int saved = errno;
        close(fd);
        return pl_error_set(err, PL_REASON_INTERNAL, "docker engine at %s: %s", e->socket,
                            strerror(saved));
    }
    char req[1024];
    size_t blen = json_body ? strlen(json_body) : 0;
    int n = snprintf(req, sizeof(req),
                     "POST %s%s HTTP/1.1\r\n"
                     "Host: docker\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n"
                     "%sContent-Length: %zu\r\n\r\n%s",
                     PL_DOCKER_API, path, json_body ? "Content-Type: application/json\r\n" : "",
                     blen, json_body ? json_body : "");
    if (n < 0 || (size_t)n >= sizeof(req) || write_all(fd, req, (size_t)n) < 0) {
        close(fd);
        return pl_error_set(err, PL_REASON_INTERNAL, "docker attach: cannot send the request");
    }
    /* Read the answer's head and not one stream byte more: look at what
     * has come (MSG_PEEK), then take exactly up to the blank line, or all
     * of it while the head has not ended (its end may straddle two reads:
     * the search starts 3 bytes back). */
    char head[ATTACH_HEADER_MAX];
    size_t len = 0;
    while (len < sizeof(head) - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ATTACH_TIMEOUT_MS) <= 0)
            break;
        ssize_t r = recv(fd, head + len, sizeof(head) - 1 - len, MSG_PEEK);
        if (r <= 0)
            break;
        size_t from = len >= 3 ? len - 3 : 0;
        const char *end = memmem(head + from, len + (size_t)r - from, "\r\n\r\n", 4);
        size_t take = end ? (size_t)(end + 4 - head) - len : (size_t)r;
        if (recv(fd, head + len, take, 0) != (ssize_t)take)
            break;
        len += take;
        if (end)
            break;
    }
    head[len] = '\0';
    if (pl_docker_upgrade_head(head, len) < 0) {
        close(fd);
        return pl_error_set(err, PL_REASON_INTERNAL, "docker refused the stream: %.120s", head);
    }
    *ret_fd = fd;
    return 0;
}

void pl_demux_expect_end(struct pl_demux *d, const char *mark, size_t len) {
    if (len > sizeof(d->mark))
        len = 0;
    memcpy(d->mark, mark, len);
    d->mark_len = len;
    memset(d->m, 0, sizeof(d->m));
}

/*
 * Output bytes p[0..n) of one stream, through the marker's search: bytes
 * that could begin the marker wait in m->pend; on a byte that breaks the
 * match the oldest waiting byte is output and the rest tried again.
 */
static int mark_feed(const struct pl_demux *d, struct pl_capture *c, struct pl_demux_mark *m,
                     const unsigned char *p, size_t n) {
    if (d->mark_len == 0 || m->done) {
        if (m->done && n)
            m->after = true;
        return pl_capture_add(c, p, n);
    }
    while (n > 0) {
        if (m->pend_len == 0) {
            const unsigned char *hit = memchr(p, (unsigned char)d->mark[0], n);
            size_t plain = hit ? (size_t)(hit - p) : n;
            if (plain && pl_capture_add(c, p, plain) < 0)
                return -1;
            p += plain;
            n -= plain;
            if (!hit)
                return 0;
        }
        m->pend[m->pend_len++] = *p++;
        n--;
        if (m->pend_len <= d->mark_len) {
            while (m->pend_len && memcmp(m->pend, d->mark, m->pend_len) != 0) {
                if (pl_capture_add(c, m->pend, 1) < 0)
                    return -1;
                memmove(m->pend, m->pend + 1, --m->pend_len);
            }
            continue;
        }
        /* The fixed part (with the nonce) came: three digits, a newline. */
        size_t k = m->pend_len - d->mark_len;
        unsigned char b = m->pend[m->pend_len - 1];
        if (k <= 3 ? (b < '0' || b > '9') : b != '\n') {
            m->bad = m->done = true;
        } else if (k == 4) {
            const unsigned char *st = m->pend + d->mark_len;
            m->status = (st[0] - '0') * 100 + (st[1] - '0') * 10 + (st[2] - '0');
            m->bad = m->status > 255;
            m->done = true;
        }
        if (m->done) {
            m->pend_len = 0;
            return mark_feed(d, c, m, p, n);
        }
    }
    return 0;
}

bool pl_demux_ended(const struct pl_demux *d, int *status) {
    for (int i = 0; i < 2; i++)
        if (!d->mark_len || !d->m[i].done || d->m[i].bad || d->m[i].after)
            return false;
    if (d->m[0].status != d->m[1].status)
        return false;
    *status = d->m[0].status;
    return true;
}

int pl_demux_flush(struct pl_demux *d) {
    int rc = 0;
    for (int i = 0; i < 2; i++) {
        struct pl_demux_mark *m = &d->m[i];
        if (m->pend_len && pl_capture_add(i == 0 ? &d->out : &d->err, m->pend, m->pend_len) < 0)
            rc = -1;
        m->pend_len = 0;
    }
    return rc;
}

void pl_demux_carry(struct pl_demux *to, const struct pl_demux *from) {
    memcpy(to->hdr, from->hdr, sizeof(to->hdr));
    to->hdr_len = from->hdr_len;
    to->remaining = from->remaining;
    to->stream = from->stream;
    to->broken = from->broken;
}

int pl_demux_feed(struct pl_demux *d, const unsigned char *p, size_t n) {
    while (n > 0 && !d->broken) {
        if (d->remaining == 0) {
            size_t take = 8 - d->hdr_len;
            if (take > n)
                take = n;
            memcpy(d->hdr + d->hdr_len, p, take);
            d->hdr_len += take;
            p += take;
            n -= take;
            if (d->hdr_len < 8)
                return 0;
            d->hdr_len = 0;
            if ((d->hdr[0] != 1 && d->hdr[0] != 2) || d->hdr[1] || d->hdr[2] || d->hdr[3]) {
                d->broken = true;
                return -1;
            }
            d->stream = d->hdr[0];
            d->remaining = (uint32_t)d->hdr[4] << 24 | (uint32_t)d->hdr[5] << 16 |
                           (uint32_t)d->hdr[6] << 8 | d->hdr[7];
            continue;
        }
        size_t take = d->remaining < n ? d->remaining : n;
        int i = d->stream == 1 ? 0 : 1;
        if (mark_feed(d, i == 0 ? &d->out : &d->err, &d->m[i], p, take) < 0)
            return -1;
        d->remaining -= (uint32_t)take;
        p += take;
        n -= take;
    }
    return d->broken ? -1 : 0;
}

void pl_demux_free(struct pl_demux *d) {
    pl_capture_free(&d->out);
    pl_capture_free(&d->err);
}

/* ---- readers of the engine's answers (engine_parse.h) ---------------------- */

int pl_docker_upgrade_head(char *head, size_t len) {
    if (len < 4 || memcmp(head + len - 4, "\r\n\r\n", 4) != 0 ||
        (strncmp(head, "HTTP/1.1 101", 12) != 0 && strncmp(head, "HTTP/1.1 200", 12) != 0)) {
        char *eol = strstr(head, "\r\n");
        if (eol)
            *eol = '\0';
        return -1;
    }
    return 0;
}

int pl_docker_created_id(const json_t *created, char ret_id[PL_DOCKER_ID_MAX]) {
    const char *id = json_string_value(json_object_get(created, "Id"));
    if (!id || strlen(id) >= PL_DOCKER_ID_MAX)
        return -1;
    memcpy(ret_id, id, strlen(id) + 1);
    return 0;
}

unsigned pl_docker_list_ids(const json_t *list, int (*each)(const char *id, void *ud), void *ud) {
    unsigned n = 0;
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c) {
        const char *id = json_string_value(json_object_get(c, "Id"));
        if (id && each(id, ud) == 0)
            n++;
    }
    return n;
}

int pl_docker_wait_code(const json_t *wait) {
    /* No code, or one no process can return, reads as -1: never as a 0. */
    json_t *c = json_object_get(wait, "StatusCode");
    if (!json_is_integer(c))
        return -1;
    json_int_t v = json_integer_value(c);
    return v < -1 || v > 255 ? -1 : (int)v;
}

bool pl_docker_state_flag(const json_t *inspect, const char *flag) {
    return json_is_true(json_object_get(json_object_get(inspect, "State"), flag));
}

int pl_docker_exec_exit(const json_t *inspect) {
    json_t *code = json_object_get(inspect, "ExitCode");
    if (json_is_integer(code) && !json_is_true(json_object_get(inspect, "Running")))
        return (int)json_integer_value(code);
    return -1;
}

int pl_docker_image_check(const json_t *j, char *ret_id, size_t idlen, const char **ret_volume) {
    const char *id = json_string_value(json_object_get(j, "Id"));
    json_t *vols = json_object_get(json_object_get(j, "Config"), "Volumes");
    if (json_object_size(vols) > 0) {
        const char *first = "";
        const char *k;
        json_t *v;
        json_object_foreach(vols, k, v) {
            first = k;
            break;
        }
        *ret_volume = first;
        return 1;
    }
    if (!id || strncmp(id, "sha256:", 7) != 0 || strlen(id) >= idlen)
        return 2;
    memcpy(ret_id, id, strlen(id) + 1);
    return 0;
}

const char *pl_docker_runtime_path(const json_t *info, const char *runtime) {
    json_t *rt = json_object_get(json_object_get(info, "Runtimes"), runtime);
    const char *path = json_string_value(json_object_get(rt, "path"));
    return rt && path ? path : NULL;
}

const char *pl_docker_server_version(const json_t *info) {
    const char *v = json_string_value(json_object_get(info, "ServerVersion"));
    return v ? v : "?";
}

int pl_docker_session_fp(const json_t *ins, char ret_fp[65], bool *running, bool *paused) {
    static const char *const keys[] = {
        "Binds",          "CapAdd",   "CapDrop",     "Devices", "IpcMode",    "Memory",
        "MemorySwap",     "NanoCpus", "NetworkMode", "PidMode", "PidsLimit",  "Privileged",
        "ReadonlyRootfs", "Runtime",  "SecurityOpt", "Tmpfs",   "UsernsMode", "Ulimits",
        "CgroupnsMode",   "Mounts",   NULL};
    json_t *hc = json_object_get(ins, "HostConfig"), *pick = json_object();
    for (int i = 0; keys[i]; i++) {
        json_t *v = json_object_get(hc, keys[i]);
        json_object_set(pick, keys[i], v ? v : json_null());
    }
    json_object_set(pick, "User", json_object_get(json_object_get(ins, "Config"), "User"));
    json_object_set(pick, "Image", json_object_get(ins, "Image"));
    int r = pl_canon_sha256(pick, ret_fp);
    json_t *st = json_object_get(ins, "State");
    *running = json_is_true(json_object_get(st, "Running"));
    *paused = json_is_true(json_object_get(st, "Paused"));
    json_decref(pick);
    return r;
}
