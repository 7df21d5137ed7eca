/*
 * What the DNS module's files share (not API): the zone's layout, which the loader
 * (zone.c) builds and the answerer (answer.c) reads, and the wire helpers both use.
 */
#ifndef EDDY_PIPELINE_CODEC_DNS_INTERNAL_H
#define EDDY_PIPELINE_CODEC_DNS_INTERNAL_H

#include <eddy/dns.h>

/* One record: its rdata is rdlen bytes at bytes + rdata, in uncompressed wire form with
 * names lowercased. */
typedef struct eddy__dns_rr_s {
    uint32_t rdata;
    uint32_t ttl;
    uint16_t type;
    uint16_t rdlen;
} eddy__dns_rr_t;

/* One name of the zone: its records are rrs[first .. first + count), sorted by type, so an
 * RRset is a run. count 0: an empty non-terminal (a parent of names below it, no data). */
typedef struct eddy__dns_node_s {
    uint32_t name; /* its wire form, lowercased, at bytes + name */
    uint32_t first, count;
    uint8_t name_len;
} eddy__dns_node_t;

struct eddy_dns_zone_s {
    uint8_t *bytes; /* names and rdata */
    eddy__dns_rr_t *rrs;
    size_t nrrs;
    eddy__dns_node_t *nodes;
    size_t nnodes;
    uint32_t *slots; /* open addressing by name hash: a node's index + 1, 0 empty */
    size_t mask;     /* slots - 1, a power of two minus one */
    uint32_t apex;   /* the node of the SOA owner */
    uint32_t soa;    /* the SOA's record */
};

/* The node named by the lowercased wire name (n bytes), or NULL. */
const eddy__dns_node_t *eddy__dns_zone_find(const eddy_dns_zone_t *z, const uint8_t *name,
                                            size_t n);

/* FNV-1a of the n bytes at p: the zone's hash of a lowercased wire name. */
uint32_t eddy__dns_hash(const uint8_t *p, size_t n);

/* The ASCII lowercase of c. */
static inline uint8_t eddy__dns_lower(uint8_t c)
{
    return c >= 'A' && c <= 'Z' ? (uint8_t)(c + ('a' - 'A')) : c;
}

/* Big-endian loads and stores. */
static inline uint16_t eddy__dns_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t eddy__dns_get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void eddy__dns_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void eddy__dns_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* The length of the uncompressed wire name at p (trusted: the zone's own). */
size_t eddy__dns_name_len(const uint8_t *p);

#endif /* EDDY_PIPELINE_CODEC_DNS_INTERNAL_H */
