/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record.c: libplimsoll's record and chain checks (docs/clients.md).
 *
 * The checks run in the contract's order, and the first that fails names
 * itself in err->broken, so every client reports the same break for the
 * same bytes (tests/vectors/chains.json).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/buf.h"
#include "../core/canon.h"
#include "lib.h"

int plc_fail(struct plimsoll_error *err, enum plimsoll_errkind kind, const char *fmt, ...) {
    if (!err)
        return -1;
    memset(err, 0, sizeof(*err));
    err->kind = kind;
    err->index = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return -1;
}

static int broken(struct plimsoll_error *err, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int broken(struct plimsoll_error *err, const char *what, const char *fmt, ...) {
    if (!err)
        return -1;
    memset(err, 0, sizeof(*err));
    err->kind = PLIMSOLL_E_CHAIN;
    err->index = -1;
    err->dispatched = true;
    snprintf(err->code, sizeof(err->code), "data_loss");
    snprintf(err->broken, sizeof(err->broken), "%s", what);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return -1;
}

char *plimsoll_canonical(const json_t *v) {
    struct pl_buf b = {0};
    if (pl_canon_dump(v, &b) < 0 || pl_buf_append(&b, "", 1) < 0) {
        pl_buf_free(&b);
        return NULL;
    }
    return b.data;
}

int plimsoll_canonical_sha256(const json_t *v, char ret_hex[65]) {
    return pl_canon_sha256(v, ret_hex);
}

/* SHA-256 of v without its member `drop`. */
static int sha_without(const json_t *v, const char *drop, char hex[65]) {
    if (!json_is_object(v) || !json_object_get(v, drop))
        return pl_canon_sha256(v, hex);
    json_t *copy = json_copy((json_t *)v);
    if (!copy)
        return -1;
    json_object_del(copy, drop);
    int r = pl_canon_sha256(copy, hex);
    json_decref(copy);
    return r;
}

/* The member is exactly want: a NUL inside it does not end the comparison. */
static bool str_is(const json_t *rec, const char *key, const char *want) {
    const json_t *v = json_object_get(rec, key);
    const char *s = json_string_value(v);
    return s && json_string_length(v) == strlen(want) && memcmp(s, want, strlen(want)) == 0;
}

int plimsoll_check_record(const json_t *request, const json_t *response, const json_t *record,
                          const char *previous, struct plimsoll_error *err) {
    if (!record)
        record = json_object_get(response, "record");
    char hex[65];
    if (!json_is_object(record))
        return broken(err, "version", "the answer carries no run record");
    json_t *ver = json_object_get(record, "version");
    if (!json_is_integer(ver) || json_integer_value(ver) != 1)
        return broken(err, "version", "the run record's version is not 1");
    if (sha_without(record, "digest", hex) < 0 || !str_is(record, "digest", hex))
        return broken(err, "digest", "the run record's digest does not match its contents");
    if (pl_canon_sha256(request, hex) < 0 || !str_is(record, "request_sha256", hex))
        return broken(err, "request_sha256",
                      "the run record's request_sha256 is not the digest of what was sent");
    if (sha_without(response, "record", hex) < 0 || !str_is(record, "response_sha256", hex))
        return broken(err, "response_sha256",
                      "the run record's response_sha256 is not the digest of the answer");
    if (previous && !str_is(record, "previous_digest", previous))
        return broken(err, "previous_digest",
                      "the run record does not name the previous record (%s): a call is "
                      "missing, reordered or foreign",
                      previous[0] ? "a different digest" : "it should start the chain");
    const json_t *sv = json_object_get(record, "started_at");
    const json_t *ev = json_object_get(record, "ended_at");
    const char *s = json_string_value(sv), *e = json_string_value(ev);
    if (!s || !e || json_string_length(sv) != json_string_length(ev) ||
        memcmp(e, s, json_string_length(sv)) < 0)
        return broken(err, "ended_at", "the run record ends before it starts");
    return 0;
}

struct plimsoll_chain {
    json_t *entries;
    char head[65];
};

plimsoll_chain *plimsoll_chain_new(const char *previous) {
    if (previous && strlen(previous) > 64)
        return NULL;
    plimsoll_chain *ch = calloc(1, sizeof(*ch));
    if (!ch)
        return NULL;
    ch->entries = json_array();
    if (!ch->entries) {
        free(ch);
        return NULL;
    }
    snprintf(ch->head, sizeof(ch->head), "%s", previous ? previous : "");
    return ch;
}

int plimsoll_chain_append(plimsoll_chain *ch, const json_t *request, const json_t *response,
                          struct plimsoll_error *err) {
    if (!ch)
        return plc_fail(err, PLIMSOLL_E_USAGE, "no chain");
    const json_t *record = json_object_get(response, "record");
    if (plimsoll_check_record(request, response, record, ch->head, err) < 0)
        return -1;
    json_t *resp = json_deep_copy(response);
    if (resp)
        json_object_del(resp, "record");
    json_t *e = json_pack("{s:o, s:o, s:o}", "request", json_deep_copy(request), "response", resp,
                          "record", json_deep_copy(record));
    if (!e || json_array_append_new(ch->entries, e) < 0)
        return plc_fail(err, PLIMSOLL_E_USAGE, "out of memory");
    snprintf(ch->head, sizeof(ch->head), "%s",
             json_string_value(json_object_get(record, "digest")));
    return 0;
}

const char *plimsoll_chain_head(const plimsoll_chain *ch) {
    return ch ? ch->head : "";
}

size_t plimsoll_chain_len(const plimsoll_chain *ch) {
    return ch ? json_array_size(ch->entries) : 0;
}

const json_t *plimsoll_chain_entry(const plimsoll_chain *ch, size_t i) {
    return ch ? json_array_get(ch->entries, i) : NULL;
}

void plimsoll_chain_free(plimsoll_chain *ch) {
    if (!ch)
        return;
    json_decref(ch->entries);
    free(ch);
}

int plimsoll_verify_chain(const json_t *entries, const char *previous, struct plimsoll_error *err) {
    if (!json_is_array(entries))
        return plc_fail(err, PLIMSOLL_E_USAGE, "entries must be an array");
    const char *prev = previous ? previous : "";
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        const json_t *rec = json_object_get(e, "record");
        if (plimsoll_check_record(json_object_get(e, "request"), json_object_get(e, "response"),
                                  rec, prev, err) < 0) {
            if (err)
                err->index = (long)i;
            return -1;
        }
        prev = json_string_value(json_object_get(rec, "digest"));
    }
    return 0;
}
