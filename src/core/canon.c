/* SPDX-License-Identifier: Apache-2.0 */
/*
 * canon.c: RFC 8785 canonical JSON (the subset described in canon.h),
 * SHA-256 and base64.
 */
#include "canon.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int dump_string(const char *s, size_t n, struct pl_buf *out) {
    static const char hex[] = "0123456789abcdef";
    if (pl_buf_append(out, "\"", 1) < 0)
        return -1;
    size_t run = 0; /* start of the pending literal run */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char ubuf[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (c < 0x20) {
                ubuf[0] = '\\';
                ubuf[1] = 'u';
                ubuf[2] = '0';
                ubuf[3] = '0';
                ubuf[4] = hex[c >> 4];
                ubuf[5] = hex[c & 15];
                ubuf[6] = '\0';
                esc = ubuf;
            }
        }
        if (esc) {
            if (pl_buf_append(out, s + run, i - run) < 0 || pl_buf_puts(out, esc) < 0)
                return -1;
            run = i + 1;
        }
    }
    if (pl_buf_append(out, s + run, n - run) < 0)
        return -1;
    return pl_buf_append(out, "\"", 1);
}

static int key_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int pl_canon_dump(const json_t *v, struct pl_buf *out) {
    switch (json_typeof(v)) {
    case JSON_NULL: return pl_buf_puts(out, "null");
    case JSON_TRUE: return pl_buf_puts(out, "true");
    case JSON_FALSE: return pl_buf_puts(out, "false");
    case JSON_INTEGER: return pl_buf_printf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    case JSON_REAL: return -1;
    case JSON_STRING: return dump_string(json_string_value(v), json_string_length(v), out);
    case JSON_ARRAY: {
        if (pl_buf_puts(out, "[") < 0)
            return -1;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if ((i && pl_buf_puts(out, ",") < 0) || pl_canon_dump(e, out) < 0)
                return -1;
        }
        return pl_buf_puts(out, "]");
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(v);
        const char **keys = n ? malloc(n * sizeof(*keys)) : NULL;
        if (n && !keys)
            return -1;
        size_t i = 0;
        const char *k;
        json_t *e;
        json_object_foreach((json_t *)v, k, e) keys[i++] = k;
        if (n)
            qsort(keys, n, sizeof(*keys), key_cmp);
        int r = pl_buf_puts(out, "{");
        for (i = 0; r == 0 && i < n; i++) {
            if (i)
                r = pl_buf_puts(out, ",");
            if (r == 0)
                r = dump_string(keys[i], strlen(keys[i]), out);
            if (r == 0)
                r = pl_buf_puts(out, ":");
            if (r == 0)
                r = pl_canon_dump(json_object_get(v, keys[i]), out);
        }
        free(keys);
        return r < 0 ? -1 : pl_buf_puts(out, "}");
    }
    }
    return -1;
}

int pl_sha256_hex(const void *data, size_t len, char ret_hex[65]) {
    static const char hex[] = "0123456789abcdef";
    unsigned char d[32];
    unsigned int dl = 0;
    if (EVP_Digest(data, len, d, &dl, EVP_sha256(), NULL) != 1 || dl != 32)
        return -1;
    for (int i = 0; i < 32; i++) {
        ret_hex[2 * i] = hex[d[i] >> 4];
        ret_hex[2 * i + 1] = hex[d[i] & 15];
    }
    ret_hex[64] = '\0';
    return 0;
}

int pl_canon_sha256(const json_t *v, char ret_hex[65]) {
    struct pl_buf b = {0};
    int r = pl_canon_dump(v, &b);
    if (r == 0)
        r = pl_sha256_hex(b.data ? b.data : "", b.len, ret_hex);
    pl_buf_free(&b);
    return r;
}

char *pl_base64_encode(const void *data, size_t len, int pad) {
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    char *out = malloc(((len + 2) / 3) * 4 + 1);
    if (!out)
        return NULL;
    size_t o = 0, i = 0;
    for (; i + 2 < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[o++] = al[v >> 18];
        out[o++] = al[(v >> 12) & 63];
        out[o++] = al[(v >> 6) & 63];
        out[o++] = al[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
        out[o++] = al[v >> 18];
        out[o++] = al[(v >> 12) & 63];
        if (i + 1 < len)
            out[o++] = al[(v >> 6) & 63];
        else if (pad)
            out[o++] = '=';
        if (pad)
            out[o++] = '=';
    }
    out[o] = '\0';
    return out;
}

int pl_hex_digit(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int b64val(char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

int pl_base64_decode(const char *s, size_t len, size_t max, unsigned char **ret_data,
                     size_t *ret_len) {
    while (len > 0 && s[len - 1] == '=')
        len--;
    if (len % 4 == 1)
        return -1;
    size_t outlen = len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0);
    if (outlen > max)
        return -2;
    unsigned char *out = malloc(outlen ? outlen : 1);
    if (!out)
        return -1;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64val(s[i]);
        if (v < 0) {
            free(out);
            return -1;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    *ret_data = out;
    *ret_len = o;
    return 0;
}

char *pl_utf8_lossy(const unsigned char *s, size_t n, size_t *ret_len) {
    char *out = malloc(n * 3 + 1);
    size_t k = 0;
    for (size_t i = 0; out && i < n; i++) {
        if (s[i] < 0x80) {
            out[k++] = (char)s[i];
        } else {
            memcpy(out + k, "\xef\xbf\xbd", 3);
            k += 3;
        }
    }
    if (out)
        out[k] = '\0';
    *ret_len = k;
    return out;
}

bool pl_utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (i + len > n)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}
