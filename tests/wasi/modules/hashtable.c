/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hashtable: a hash table keyed with SipHash-2-4 under a 128-bit seed from
 * random_get, the way hardened hash tables seed themselves.  Inserts
 * `n` keys (argv[1], default 2000), looks each up, looks up as many absent
 * keys, deletes every third key and looks everything up again.  stdout
 * depends only on n, never on the seed (where each key lands does, what
 * is found does not); stderr names the seed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wasi/api.h>

static uint64_t rotl(uint64_t x, int b) {
    return (x << b) | (x >> (64 - b));
}

static void sipround(uint64_t v[4]) {
    v[0] += v[1], v[1] = rotl(v[1], 13), v[1] ^= v[0], v[0] = rotl(v[0], 32);
    v[2] += v[3], v[3] = rotl(v[3], 16), v[3] ^= v[2];
    v[0] += v[3], v[3] = rotl(v[3], 21), v[3] ^= v[0];
    v[2] += v[1], v[1] = rotl(v[1], 17), v[1] ^= v[2], v[2] = rotl(v[2], 32);
}

static uint64_t k0, k1;

static uint64_t siphash(const char *p, size_t len) {
    uint64_t v[4] = {0x736f6d6570736575ull ^ k0, 0x646f72616e646f6dull ^ k1,
                     0x6c7967656e657261ull ^ k0, 0x7465646279746573ull ^ k1};
    uint64_t b = (uint64_t)len << 56, m;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&m, p + i, 8);
        v[3] ^= m;
        sipround(v);
        sipround(v);
        v[0] ^= m;
    }
    for (size_t j = 0; i + j < len; j++)
        b |= (uint64_t)(unsigned char)p[i + j] << (8 * j);
    v[3] ^= b;
    sipround(v);
    sipround(v);
    v[0] ^= b;
    v[2] ^= 0xff;
    for (int r = 0; r < 4; r++)
        sipround(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

struct slot {
    char key[24]; /* "" = empty; "\x01" = deleted */
    uint64_t value;
};

static struct slot *table;
static size_t mask;

static struct slot *find(const char *key, int for_insert) {
    struct slot *tomb = NULL;
    for (size_t i = siphash(key, strlen(key)) & mask;; i = (i + 1) & mask) {
        struct slot *s = &table[i];
        if (s->key[0] == '\0')
            return for_insert ? (tomb ? tomb : s) : NULL;
        if (s->key[0] == '\x01') {
            if (!tomb)
                tomb = s;
        } else if (strcmp(s->key, key) == 0) {
            return s;
        }
    }
}

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
    uint8_t seed[16];
    if (n == 0 || n > 1000000 || __wasi_random_get(seed, sizeof seed) != 0)
        return 2;
    memcpy(&k0, seed, 8);
    memcpy(&k1, seed + 8, 8);
    fprintf(stderr, "seed %016llx%016llx\n", (unsigned long long)k0, (unsigned long long)k1);
    size_t cap = 1;
    while (cap < 2 * n)
        cap *= 2;
    mask = cap - 1;
    table = calloc(cap, sizeof *table);
    if (!table)
        return 3;

    char key[24];
    for (unsigned long i = 0; i < n; i++) {
        snprintf(key, sizeof key, "key-%lu", i);
        struct slot *s = find(key, 1);
        strcpy(s->key, key);
        s->value = (uint64_t)i * i;
    }
    unsigned long found = 0, absent_found = 0;
    uint64_t sum = 0;
    for (unsigned long i = 0; i < n; i++) {
        snprintf(key, sizeof key, "key-%lu", i);
        struct slot *s = find(key, 0);
        if (s && s->value == (uint64_t)i * i)
            found++, sum += s->value;
        snprintf(key, sizeof key, "absent-%lu", i);
        absent_found += find(key, 0) != NULL;
    }
    printf("inserted %lu, found %lu, sum %llu, absent keys found %lu\n", n, found,
           (unsigned long long)sum, absent_found);
    for (unsigned long i = 0; i < n; i += 3) {
        snprintf(key, sizeof key, "key-%lu", i);
        struct slot *s = find(key, 0);
        if (s)
            s->key[0] = '\x01';
    }
    found = 0, sum = 0;
    for (unsigned long i = 0; i < n; i++) {
        snprintf(key, sizeof key, "key-%lu", i);
        struct slot *s = find(key, 0);
        if (s)
            found++, sum += s->value;
    }
    printf("after deleting every third key: found %lu, sum %llu\n", found, (unsigned long long)sum);
    return 0;
}
