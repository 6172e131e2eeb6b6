/* SPDX-License-Identifier: Apache-2.0 */
/*
 * display.c: a cell's display outputs, bounded and checked (display.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "display.h"

void pl_displays_init(struct pl_displays *d, struct pl_display_bounds b,
                      const struct pl_output_sink *sink) {
    *d = (struct pl_displays){.b = b, .sink = sink};
}

bool pl_displays_admit(struct pl_displays *d, size_t n) {
    size_t kept = d->list ? json_array_size(d->list) : 0;
    if (d->admitted || kept >= d->b.outputs || n > d->b.output_bytes || n > d->b.bytes ||
        d->used > d->b.bytes - n) {
        d->dropped++;
        return false;
    }
    d->used += n;
    d->admitted = n;
    return true;
}

void pl_displays_take(struct pl_displays *d, const char *data, size_t n) {
    size_t charged = d->admitted;
    d->admitted = 0;
    json_t *o = charged == n ? pl_display_parse(data, n) : NULL;
    if (o && !d->list)
        d->list = json_array();
    if (!o || !d->list || json_array_append_new(d->list, o) < 0) {
        d->used -= charged;
        d->dropped++;
        return;
    }
    if (d->sink && d->sink->display)
        d->sink->display(d->sink->ud, o);
}

void pl_displays_cancel(struct pl_displays *d) {
    if (!d->admitted)
        return;
    d->used -= d->admitted;
    d->admitted = 0;
    d->dropped++;
}

void pl_displays_finish(struct pl_displays *d, json_t **outputs, unsigned *dropped) {
    *outputs = d->list;
    *dropped = d->dropped;
    d->list = NULL;
    d->dropped = 0;
    d->used = 0;
    d->admitted = 0;
}

void pl_displays_free(struct pl_displays *d) {
    if (!d)
        return;
    json_decref(d->list);
    d->list = NULL;
}

static bool ends_with(const char *s, size_t n, const char *tail) {
    size_t t = strlen(tail);
    return n >= t && memcmp(s + n - t, tail, t) == 0;
}

bool pl_display_mime_is_text(const char *mime) {
    size_t n = strlen(mime);
    return strncmp(mime, "text/", 5) == 0 || strcmp(mime, "application/json") == 0 ||
           strcmp(mime, "application/javascript") == 0 || strcmp(mime, "image/svg+xml") == 0 ||
           ends_with(mime, n, "+json") || ends_with(mime, n, "+xml");
}

/* RFC 7230's token characters, lowercase only: a MIME type is named as
 * Jupyter names it. */
static bool token_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("!#$&^_.+-", c) != NULL;
}

/* type/subtype, both non-empty tokens, at most PL_DISPLAY_MIME_MAX bytes. */
static bool mime_ok(const char *m) {
    size_t n = strlen(m), slash = 0, k = 0;
    if (n == 0 || n > PL_DISPLAY_MIME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)m[i];
        if (c == '/') {
            k++;
            slash = i;
        } else if (c == '\0' || !token_char(c)) {
            return false;
        }
    }
    return k == 1 && slash > 0 && slash + 1 < n;
}

static bool b64_char(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

/* Standard base64 with its padding, no whitespace; empty is well formed. */
static bool b64_strict(const char *s, size_t n) {
    if (n % 4 != 0)
        return false;
    size_t pad = n >= 1 && s[n - 1] == '=' ? (n >= 2 && s[n - 2] == '=' ? 2 : 1) : 0;
    for (size_t i = 0; i < n - pad; i++)
        if (!b64_char((unsigned char)s[i]))
            return false;
    return true;
}

json_t *pl_display_parse(const char *data, size_t n) {
    json_error_t e;
    json_t *in = json_loadb(data, n, JSON_REJECT_DUPLICATES, &e);
    json_t *kind = json_object_get(in, "kind"), *types = json_object_get(in, "data");
    const char *k = json_string_value(kind);
    bool ok = json_is_object(in) && json_object_size(in) == 2 && k &&
              (strcmp(k, "display") == 0 || strcmp(k, "result") == 0) && json_is_object(types) &&
              json_object_size(types) > 0 && json_object_size(types) <= PL_DISPLAY_TYPES_MAX;
    const char *mime;
    json_t *v;
    json_object_foreach(ok ? types : NULL, mime, v) {
        size_t len = json_string_length(v);
        const char *s = json_string_value(v);
        if (!s || !mime_ok(mime) ||
            (pl_display_mime_is_text(mime) ? memchr(s, '\0', len) != NULL : !b64_strict(s, len))) {
            ok = false;
            break;
        }
    }
    if (!ok) {
        json_decref(in);
        return NULL;
    }
    return in;
}

bool pl_display_list_reparses(const json_t *list) {
    for (size_t i = 0; i < json_array_size(list); i++) {
        char *again = json_dumps(json_array_get(list, i), JSON_COMPACT);
        json_t *back = again ? pl_display_parse(again, strlen(again)) : NULL;
        bool same = back && json_equal(back, json_array_get(list, i));
        json_decref(back);
        free(again);
        if (!same)
            return false;
    }
    return true;
}

/* ---- a hosted cell's framed stderr ----------------------------------------- */

int pl_frames_in_feed(struct pl_frames_in *f, const void *data, size_t len) {
    const unsigned char *p = data;
    while (len > 0) {
        if (f->raw)
            return pl_capture_add(f->err, p, len);
        if (f->left == 0 && f->hlen < 5) { /* a header */
            size_t k = 5 - f->hlen < len ? 5 - f->hlen : len;
            memcpy(f->head + f->hlen, p, k);
            f->hlen += k;
            p += k;
            len -= k;
            if (f->head[0] != 'E' && f->head[0] != 'D') {
                f->raw = true; /* not the framing: what came is stderr */
                int r = pl_capture_add(f->err, f->head, f->hlen);
                f->hlen = 0;
                if (r < 0)
                    return r;
                continue;
            }
            if (f->hlen < 5)
                return 0;
            f->left = f->n = (uint32_t)f->head[1] << 24 | (uint32_t)f->head[2] << 16 |
                             (uint32_t)f->head[3] << 8 | f->head[4];
            f->got = 0;
            if (f->head[0] == 'D' && pl_displays_admit(f->disp, f->n) &&
                !(f->buf = malloc(f->n ? f->n : 1)))
                pl_displays_cancel(f->disp);
            if (f->left == 0) { /* an empty frame: whole already */
                if (f->buf)
                    pl_displays_take(f->disp, f->buf, 0);
                free(f->buf);
                f->buf = NULL;
                f->hlen = 0;
            }
            continue;
        }
        size_t k = f->left < len ? f->left : len;
        if (f->head[0] == 'E') {
            int r = pl_capture_add(f->err, p, k);
            if (r < 0)
                return r;
        } else if (f->buf) {
            memcpy(f->buf + f->got, p, k);
        }
        f->got += (uint32_t)k;
        f->left -= (uint32_t)k;
        p += k;
        len -= k;
        if (f->left == 0) {
            if (f->buf)
                pl_displays_take(f->disp, f->buf, f->n);
            free(f->buf);
            f->buf = NULL;
            f->hlen = 0;
        }
    }
    return 0;
}

void pl_frames_in_end(struct pl_frames_in *f) {
    if (f->buf)
        pl_displays_cancel(f->disp);
    free(f->buf);
    f->buf = NULL;
    if (!f->raw && f->hlen > 0 && f->hlen < 5 && f->left == 0)
        f->hlen = 0; /* a cut header: nothing of it is anyone's */
    f->left = 0;
}
