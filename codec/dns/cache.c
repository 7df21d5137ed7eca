/*
 * The answer cache (include/eddy/dns.h; PowerDNS's packet cache): a zone never changes once
 * loaded, so the answer to a query depends only on the query's bytes, its question name
 * compared without case, and the transport's limits. A query seen before is answered by a copy
 * of the answer kept then, its ID and question name (with the asker's case) put in. Names in
 * the answer that repeat the question point at it (compression), so they show the asker's case
 * as a fresh answer would.
 *
 * Direct-mapped: a query's hash picks one slot, and a new answer replaces what was there. One
 * cache per thread (a loop), no lock.
 */
#include "codec/dns/internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* What is cached: queries (ID aside) up to KEY_MAX bytes, answers up to ANSWER_MAX (the EDNS
 * size we advertise): a query or answer longer is answered afresh every time. */
#define KEY_MAX 300
#define ANSWER_MAX EDDY_DNS_EDNS_UDP_SIZE

typedef struct slot_s {
    uint64_t hash;
    size_t max_len, outcap; /* the limits it was answered under */
    uint16_t key_len, answer_len, qname_len; /* qname_len: 0 when the answer has no question */
    uint8_t key[KEY_MAX];
    uint8_t answer[ANSWER_MAX];
} slot_t;

struct eddy_dns_cache_s {
    const eddy_dns_zone_t *zone;
    size_t mask; /* slots - 1 */
    uint64_t hits, misses;
    slot_t slot[];
};

eddy_dns_cache_t *eddy_dns_cache_new(const eddy_dns_zone_t *z, size_t slots)
{
    if (z == NULL || slots == 0 || slots > (1u << 20)) {
        return NULL;
    }
    size_t n = 1;
    while (n < slots) {
        n <<= 1;
    }
    eddy_dns_cache_t *c = calloc(1, sizeof(*c) + n * sizeof(c->slot[0]));
    if (c != NULL) {
        c->zone = z;
        c->mask = n - 1;
    }
    return c;
}

void eddy_dns_cache_free(eddy_dns_cache_t *c)
{
    free(c);
}

void eddy_dns_cache_stats(const eddy_dns_cache_t *c, uint64_t *hits, uint64_t *misses)
{
    *hits = c->hits;
    *misses = c->misses;
}

/* ASCII upper case to lower in each byte of w where mask has 0xff (SWAR: no branch). */
static uint64_t lower8(uint64_t w, uint64_t mask)
{
    const uint64_t high = 0x8080808080808080ull;
    uint64_t low7 = w & ~high;
    uint64_t ge_a = low7 + 0x3f3f3f3f3f3f3f3full; /* high bit set where byte >= 'A' */
    uint64_t gt_z = low7 + 0x2525252525252525ull; /* high bit set where byte > 'Z' */
    uint64_t upper = (ge_a ^ gt_z) & ~w & high & mask;
    return w | (upper >> 2); /* 0x80 >> 2 == 0x20: 'A' + 0x20 == 'a' */
}

/* The key of a query: its bytes after the ID, the question name lowercased (its labels are
 * plain: a pointer there means no key), made and hashed 8 bytes a step (a byte at a time cost
 * more than the rest of a hit); *hash its hash, with max_len. Its length and the question
 * name's, or 0. */
static size_t make_key(const uint8_t *q, size_t qlen, size_t max_len, uint8_t *key,
                       size_t *qname_len, uint64_t *hash)
{
    if (qlen < EDDY_DNS_HEADER_LEN + 5 || qlen - 2 > KEY_MAX) {
        return 0;
    }
    size_t i = EDDY_DNS_HEADER_LEN;
    while (i < qlen && q[i] != 0) {
        if (q[i] > EDDY_DNS_LABEL_MAX) {
            return 0; /* a compression pointer, or worse: answered afresh */
        }
        i += 1 + (size_t)q[i];
    }
    if (i >= qlen) {
        return 0;
    }
    *qname_len = i + 1 - EDDY_DNS_HEADER_LEN;
    /* In key offsets the name is [10, i - 2); its length bytes (<= 63) are below 'A', so
     * lowering every byte of it is safe. */
    size_t n = qlen - 2, name_lo = EDDY_DNS_HEADER_LEN - 2, name_hi = i - 2;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ max_len ^ ((uint64_t)n << 32);
    for (size_t k = 0; k < n; k += 8) {
        uint64_t w = 0, mask = 0;
        size_t take = n - k < 8 ? n - k : 8;
        memcpy(&w, q + 2 + k, take);
        size_t from = name_lo > k ? name_lo - k : 0, to = name_hi > k ? name_hi - k : 0;
        if (to > take) {
            to = take;
        }
        if (from < to) { /* the name's bytes among these, in memory order */
            uint8_t m[8] = {0};
            memset(m + from, 0xff, to - from);
            memcpy(&mask, m, 8);
        }
        w = lower8(w, mask);
        memcpy(key + k, &w, take);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    *hash = h ^ (h >> 29);
    assert(n <= KEY_MAX && *qname_len <= n); /* the checks above bound both */
    return n;
}

int eddy_dns_cache_answer(eddy_dns_cache_t *c, const uint8_t *query, size_t qlen, size_t max_len,
                          uint8_t *out, size_t outcap, size_t *outlen)
{
    uint8_t key[KEY_MAX];
    size_t qname_len = 0;
    uint64_t h = 0;
    size_t klen =
        c != NULL && query != NULL ? make_key(query, qlen, max_len, key, &qname_len, &h) : 0;
    if (klen == 0 || (query[2] & 0x80) != 0) {
        return eddy_dns_answer(c != NULL ? c->zone : NULL, query, qlen, max_len, out, outcap,
                               outlen);
    }
    assert(((c->mask + 1) & c->mask) == 0); /* a power of two slots */
    slot_t *s = &c->slot[h & c->mask];
    if (s->hash == h && s->key_len == klen && s->max_len == max_len && s->outcap == outcap &&
        memcmp(s->key, key, klen) == 0) {
        c->hits++;
        assert(s->answer_len <= outcap && s->answer_len <= ANSWER_MAX && s->answer_len >= 2);
        memcpy(out, s->answer, s->answer_len);
        memcpy(out, query, 2); /* the ID */
        if (s->qname_len == qname_len) {
            memcpy(out + EDDY_DNS_HEADER_LEN, query + EDDY_DNS_HEADER_LEN, qname_len);
        }
        *outlen = s->answer_len;
#ifndef NDEBUG
        /* The copy is what a fresh answer would be, byte for byte. */
        uint8_t *fresh = malloc(outcap);
        size_t n = 0;
        assert(fresh == NULL ||
               (eddy_dns_answer(c->zone, query, qlen, max_len, fresh, outcap, &n) == 0 &&
                n == *outlen && memcmp(fresh, out, n) == 0));
        free(fresh);
#endif
        return 0;
    }
    c->misses++;
    int rc = eddy_dns_answer(c->zone, query, qlen, max_len, out, outcap, outlen);
    if (rc == 0 && *outlen <= ANSWER_MAX) {
        s->hash = h;
        s->max_len = max_len;
        s->outcap = outcap;
        s->key_len = (uint16_t)klen;
        memcpy(s->key, key, klen);
        s->answer_len = (uint16_t)*outlen;
        memcpy(s->answer, out, *outlen);
        /* Answers that copy the question (QDCOUNT 1) get the asker's case put back in. */
        s->qname_len = (uint16_t)(eddy__dns_get16(out + 4) == 1 ? qname_len : 0);
    }
    return rc;
}
