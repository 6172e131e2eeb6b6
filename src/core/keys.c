/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keys.c: the keys file and bearer-key authentication.
 */
#include "keys.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "canon.h"
#include "cleanup.h"
#include "fileread.h"

struct pl_key_entry {
    char principal[PL_PRINCIPAL_MAX + 1];
    unsigned char digest[32];
};

struct pl_keys {
    size_t n;
    struct pl_key_entry *entries;
};

int pl_principal_valid(const char *s, size_t len) {
    if (len == 0 || len > PL_PRINCIPAL_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!(isalnum(ch) || ch == '.' || ch == '_' || ch == ':' || ch == '@' || ch == '-'))
            return 0;
    }
    return 1;
}

void pl_keys_free(struct pl_keys *keys) {
    if (!keys)
        return;
    if (keys->entries)
        OPENSSL_cleanse(keys->entries, keys->n * sizeof(*keys->entries));
    free(keys->entries);
    free(keys);
}

PL_DEFINE_FREEP(struct pl_keys, pl_keys_free)

size_t pl_keys_count(const struct pl_keys *keys) {
    return keys ? keys->n : 0;
}

int pl_keys_parse(const char *text, size_t len, struct pl_keys **ret_keys, struct pl_error *err) {
    if (len > PL_KEYS_MAX_FILE)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "PLIMSOLL_KEYS_FILE: larger than %u bytes", PL_KEYS_MAX_FILE);
    PL_CLEANUP(pl_keys_freep) struct pl_keys *k = calloc(1, sizeof(*k));
    if (!k)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    size_t cap = 0;
    size_t lineno = 0;
    size_t pos = 0;
    while (pos < len) {
        size_t start = pos;
        while (pos < len && text[pos] != '\n')
            pos++;
        size_t end = pos;
        if (pos < len)
            pos++; /* skip '\n' */
        lineno++;
        if (end > start && text[end - 1] == '\r')
            end--;
        /* trim */
        while (start < end && (text[start] == ' ' || text[start] == '\t'))
            start++;
        while (end > start && (text[end - 1] == ' ' || text[end - 1] == '\t'))
            end--;
        if (start == end || text[start] == '#')
            continue;
        size_t f1 = start;
        while (f1 < end && text[f1] != ' ' && text[f1] != '\t')
            f1++;
        size_t f2 = f1;
        while (f2 < end && (text[f2] == ' ' || text[f2] == '\t'))
            f2++;
        size_t plen = f1 - start;
        size_t hlen = end - f2;
        if (!pl_principal_valid(text + start, plen))
            return pl_error_set(
                err, PL_REASON_INVALID_REQUEST,
                "PLIMSOLL_KEYS_FILE: line %zu: principal must be 1-%u characters of "
                "[A-Za-z0-9._:@-]",
                lineno, PL_PRINCIPAL_MAX);
        if (hlen != 64 || memchr(text + f2, ' ', hlen) || memchr(text + f2, '\t', hlen))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "PLIMSOLL_KEYS_FILE: line %zu: expected \"<principal> "
                                "<64 hex digits of the key's SHA-256>\"",
                                lineno);
        struct pl_key_entry e = {0};
        memcpy(e.principal, text + start, plen);
        bool bad = false;
        for (size_t i = 0; i < 32; i++) {
            int hi = pl_hex_digit(text[f2 + 2 * i]), lo = pl_hex_digit(text[f2 + 2 * i + 1]);
            if (hi < 0 || lo < 0) {
                bad = true;
                break;
            }
            e.digest[i] = (unsigned char)(hi << 4 | lo);
        }
        if (bad)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "PLIMSOLL_KEYS_FILE: line %zu: the digest is not hexadecimal",
                                lineno);
        for (size_t i = 0; i < k->n; i++) {
            if (memcmp(k->entries[i].digest, e.digest, 32) == 0)
                return pl_error_set(
                    err, PL_REASON_INVALID_REQUEST,
                    "PLIMSOLL_KEYS_FILE: line %zu: this key digest is already listed", lineno);
        }
        if (k->n == PL_KEYS_MAX_ENTRIES)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "PLIMSOLL_KEYS_FILE: more than %u keys", PL_KEYS_MAX_ENTRIES);
        if (k->n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            struct pl_key_entry *ne = realloc(k->entries, ncap * sizeof(*ne));
            if (!ne)
                return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
            k->entries = ne;
            cap = ncap;
        }
        k->entries[k->n++] = e;
    }
    *ret_keys = PL_TAKE_PTR(k);
    return 0;
}

int pl_keys_load(const char *path, struct pl_keys **ret_keys, struct pl_error *err) {
    char *buf = NULL;
    size_t len = 0;
    int rc = pl_file_read(path, PL_KEYS_MAX_FILE, &buf, &len);
    if (rc < 0) {
        switch (rc) {
        case -EFBIG:
            pl_error_set(err, PL_REASON_INVALID_REQUEST, "PLIMSOLL_KEYS_FILE: larger than %u bytes",
                         PL_KEYS_MAX_FILE);
            break;
        case -EINVAL:
            pl_error_set(err, PL_REASON_INVALID_REQUEST,
                         "PLIMSOLL_KEYS_FILE: %s is not a regular file", path);
            break;
        case -ENOMEM: pl_error_set(err, PL_REASON_INTERNAL, "out of memory"); break;
        case -EIO:
            pl_error_set(err, PL_REASON_INVALID_REQUEST, "PLIMSOLL_KEYS_FILE: cannot read %s",
                         path);
            break;
        default:
            pl_error_set(err, PL_REASON_INVALID_REQUEST, "PLIMSOLL_KEYS_FILE: cannot open %s",
                         path);
        }
        if (err)
            err->errnum = -rc; /* the message stays as it was; the errno is kept */
        return -1;
    }
    int r = pl_keys_parse(buf, len, ret_keys, err);
    pl_file_free(buf, len);
    return r;
}

const char *pl_keys_authenticate(const struct pl_keys *keys, const char *key, size_t key_len) {
    if (!keys || !key || key_len == 0 || key_len > PL_KEY_MAX_BYTES)
        return NULL;
    unsigned char digest[32];
    unsigned int dlen = 0;
    if (EVP_Digest(key, key_len, digest, &dlen, EVP_sha256(), NULL) != 1 || dlen != 32)
        return NULL;
    const char *found = NULL;
    for (size_t i = 0; i < keys->n; i++) {
        if (CRYPTO_memcmp(keys->entries[i].digest, digest, 32) == 0 && !found)
            found = keys->entries[i].principal;
    }
    return found;
}

int pl_bearer_parse(const char *header, const char **ret_key, size_t *ret_len) {
    if (!header)
        return -1;
    while (*header == ' ')
        header++;
    if (strncasecmp(header, "Bearer", 6) != 0 || (header[6] != ' ' && header[6] != '\t'))
        return -1;
    const char *k = header + 7;
    while (*k == ' ' || *k == '\t')
        k++;
    size_t n = strlen(k);
    while (n > 0 && (k[n - 1] == ' ' || k[n - 1] == '\t'))
        n--;
    if (n == 0 || n > PL_KEY_MAX_BYTES)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)k[i];
        if (ch <= 0x20 || ch >= 0x7f)
            return -1;
    }
    *ret_key = k;
    *ret_len = n;
    return 0;
}
