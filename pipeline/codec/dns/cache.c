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
#include "pipeline/codec/dns/internal.h"

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

/* The key of a query: its bytes after the ID, the question name lowercased (its labels are
 * plain: a pointer there means no key). Its length and the question name's, or 0. */
static size_t make_key(const uint8_t *q, size_t qlen, uint8_t *key, size_t *qname_len)
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
    memcpy(key, q + 2, qlen - 2);
    /* Length bytes (<= 63) are below 'A', so lowering every byte of the name is safe. */
    for (size_t k = EDDY_DNS_HEADER_LEN - 2; k < i - 2; k++) {
        key[k] = eddy__dns_lower(key[k]);
    }
    return qlen - 2;
}

static uint64_t hash_of(const uint8_t *p, size_t n, size_t max_len)
{
    uint64_t h = 0xcbf29ce484222325ull ^ max_len; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

int eddy_dns_cache_answer(eddy_dns_cache_t *c, const uint8_t *query, size_t qlen, size_t max_len,
                          uint8_t *out, size_t outcap, size_t *outlen)
{
    uint8_t key[KEY_MAX];
    size_t qname_len = 0;
    size_t klen = c != NULL && query != NULL ? make_key(query, qlen, key, &qname_len) : 0;
    if (klen == 0 || (query[2] & 0x80) != 0) {
        return eddy_dns_answer(c != NULL ? c->zone : NULL, query, qlen, max_len, out, outcap,
                               outlen);
    }
    uint64_t h = hash_of(key, klen, max_len);
    slot_t *s = &c->slot[h & c->mask];
    if (s->hash == h && s->key_len == klen && s->max_len == max_len && s->outcap == outcap &&
        memcmp(s->key, key, klen) == 0) {
        c->hits++;
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
