/*
 * The answerer: a query in, an authoritative answer out, written into the caller's buffer
 * with name compression, truncated to the header and question when it does not fit.
 *
 * The query is parsed whole (message.c) before anything in it is used. The answer is
 * written section by section after a header left blank and filled in last, when the counts
 * are known. Each record is written whole or not at all: a record that would pass the limit
 * is taken back, with the compression targets it added, and for the answer and authority
 * sections that turns the answer into a truncated one.
 */
#include "codec/dns/internal.h"

#include <assert.h>
#include <string.h>

/* CNAMEs followed per answer. BIND follows 16, Knot and NSD 8-12; a chain longer than a few
 * is a misconfiguration, and each step costs a lookup and room in the packet. */
#define MAX_CNAMES 8

/* Names remembered as compression targets per answer: each label of a name written in full
 * is one. 64 covers the question, an answer RRset's targets and glue; past it, names are
 * still written correctly, only longer. */
#define COMP_MAX 64

/* NS and MX targets whose A and AAAA records go into the additional section. */
#define GLUE_MAX 16

/* The OPT record we add: root owner, type, class, TTL, rdlength. */
#define OPT_LEN 11

/* Compression pointers reach the first 16 KiB of a message (14 bits). */
#define POINTER_MAX 0x3FFF

/* A name already in the message: its bytes (uncompressed, in memory that lives as long as
 * the answer) and where it starts in the message. */
typedef struct comp_s {
    const uint8_t *name;
    uint16_t len, off;
} comp_t;

typedef struct answer_s {
    const eddy_dns_zone_t *z;
    eddy_dns_msg_t q;
    uint8_t *out;
    size_t len, limit; /* written; the most that may be, room for an OPT kept aside */
    comp_t comp[COMP_MAX];
    size_t ncomp;
    uint16_t an, ns, ar;
    uint16_t rcode;
    bool aa, tc;
    const uint8_t *glue[GLUE_MAX];
    size_t nglue;
} answer_t;

/* ---------------------------------------------------------------------------------------
 * Writing
 */

static bool same_name(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (eddy__dns_lower(a[i]) != eddy__dns_lower(b[i])) {
            return false;
        }
    }
    return true;
}

/* The uncompressed name (n bytes) at the end of the message, its longest suffix already in
 * the message replaced by a pointer to it (RFC 1035 4.1.4). Suffixes are compared ignoring
 * case, as names are: the answer's owner points at the question, and so shows the case the
 * client asked in. False when it does not fit. */
static bool put_name(answer_t *a, const uint8_t *name, size_t n)
{
    size_t i;
    const comp_t *hit = NULL;
    for (i = 0; name[i] != 0; i += 1 + (size_t)name[i]) {
        for (size_t k = 0; k < a->ncomp && hit == NULL; k++) {
            if (a->comp[k].len == n - i && same_name(a->comp[k].name, name + i, n - i)) {
                hit = &a->comp[k];
            }
        }
        if (hit != NULL) {
            break;
        }
    }
    /* i: the bytes of labels written out; then a pointer, or the root byte (i == n - 1). */
    size_t need = hit != NULL ? i + 2 : n;
    if (a->limit - a->len < need) {
        return false;
    }
    for (size_t j = 0; j < i; j += 1 + (size_t)name[j]) {
        if (a->len + j <= POINTER_MAX && a->ncomp < COMP_MAX) {
            a->comp[a->ncomp++] = (comp_t){name + j, (uint16_t)(n - j), (uint16_t)(a->len + j)};
        }
    }
    memcpy(a->out + a->len, name, i);
    if (hit != NULL) {
        assert(hit->off < a->len); /* pointers go backward only */
        eddy__dns_put16(a->out + a->len + i, (uint16_t)(0xC000 | hit->off));
    } else {
        a->out[a->len + i] = 0;
    }
    a->len += need;
    return true;
}

static bool put_bytes(answer_t *a, const void *p, size_t n)
{
    assert(a->len <= a->limit);
    if (a->limit - a->len < n) {
        return false;
    }
    memcpy(a->out + a->len, p, n);
    a->len += n;
    return true;
}

/* Record rr of the zone, owned by the name (n bytes), with ttl; its names compressed. Whole
 * or not at all. */
static bool put_rr(answer_t *a, const uint8_t *owner, size_t n, const eddy__dns_rr_t *rr,
                   uint32_t ttl)
{
    size_t len = a->len, ncomp = a->ncomp;
    const uint8_t *rd = a->z->bytes + rr->rdata;
    uint8_t fixed[10];
    eddy__dns_put16(fixed, rr->type);
    eddy__dns_put16(fixed + 2, EDDY_DNS_CLASS_IN);
    eddy__dns_put32(fixed + 4, ttl);
    bool ok = put_name(a, owner, n) && put_bytes(a, fixed, sizeof(fixed));
    size_t start = a->len;
    if (ok) {
        /* RFC 3597 4: only the names of RFC 1035's types may be compressed. */
        switch (rr->type) {
        case EDDY_DNS_TYPE_NS:
        case EDDY_DNS_TYPE_CNAME:
            ok = put_name(a, rd, rr->rdlen);
            break;
        case EDDY_DNS_TYPE_MX:
            assert(rr->rdlen > 2); /* the loader checked the zone's records */
            ok = put_bytes(a, rd, 2) && put_name(a, rd + 2, rr->rdlen - 2u);
            break;
        case EDDY_DNS_TYPE_SOA: {
            size_t m = eddy__dns_name_len(rd), r = eddy__dns_name_len(rd + m);
            assert(m + r + 20 == rr->rdlen); /* two names and five 32-bit fields */
            ok = put_name(a, rd, m) && put_name(a, rd + m, r) && put_bytes(a, rd + m + r, 20);
            break;
        }
        default:
            ok = put_bytes(a, rd, rr->rdlen);
            break;
        }
    }
    if (!ok) {
        a->len = len;
        a->ncomp = ncomp;
        return false;
    }
    eddy__dns_put16(a->out + start - 2, (uint16_t)(a->len - start));
    return true;
}

/* Remember the target of an NS or MX record for the additional section. */
static void want_glue(answer_t *a, const eddy__dns_rr_t *rr)
{
    const uint8_t *rd = a->z->bytes + rr->rdata;
    const uint8_t *target = rr->type == EDDY_DNS_TYPE_MX ? rd + 2 : rd;
    size_t n = eddy__dns_name_len(target);
    for (size_t i = 0; i < a->nglue; i++) {
        if (eddy__dns_name_len(a->glue[i]) == n && memcmp(a->glue[i], target, n) == 0) {
            return;
        }
    }
    if (a->nglue < GLUE_MAX) {
        a->glue[a->nglue++] = target;
    }
}

/* The records of node of type (EDDY_DNS_TYPE_ANY: all) into the answer section, owned by
 * the name (n bytes). False when they do not fit. */
static bool put_answers(answer_t *a, const eddy__dns_node_t *node, uint16_t type,
                        const uint8_t *owner, size_t n)
{
    for (uint32_t i = node->first; i < node->first + node->count; i++) {
        const eddy__dns_rr_t *rr = &a->z->rrs[i];
        if (type != EDDY_DNS_TYPE_ANY && rr->type != type) {
            continue;
        }
        if (!put_rr(a, owner, n, rr, rr->ttl)) {
            return false;
        }
        a->an++;
        if (rr->type == EDDY_DNS_TYPE_NS || rr->type == EDDY_DNS_TYPE_MX) {
            want_glue(a, rr);
        }
    }
    return true;
}

/* The zone's SOA into the authority section, for a negative answer: its TTL the lesser of
 * its own and its minimum field, which RFC 2308 5 makes the negative-caching TTL. */
static bool put_soa(answer_t *a)
{
    const eddy_dns_zone_t *z = a->z;
    const eddy__dns_rr_t *soa = &z->rrs[z->soa];
    const uint8_t *rd = z->bytes + soa->rdata;
    uint32_t minimum = eddy__dns_get32(rd + soa->rdlen - 4);
    const eddy__dns_node_t *apex = &z->nodes[z->apex];
    if (!put_rr(a, z->bytes + apex->name, apex->name_len, soa,
                soa->ttl < minimum ? soa->ttl : minimum)) {
        return false;
    }
    a->ns++;
    return true;
}

/* The A and AAAA records of the NS and MX targets in the zone, RRset by RRset while they
 * fit: glue that does not fit is left out, never a reason to truncate (RFC 2181 9). */
static void put_glue(answer_t *a)
{
    static const uint16_t types[] = {EDDY_DNS_TYPE_A, EDDY_DNS_TYPE_AAAA};
    for (size_t g = 0; g < a->nglue; g++) {
        size_t n = eddy__dns_name_len(a->glue[g]);
        const eddy__dns_node_t *node = eddy__dns_zone_find(a->z, a->glue[g], n);
        if (node == NULL) {
            continue; /* out of the zone, or not there */
        }
        for (size_t t = 0; t < 2; t++) {
            size_t len = a->len, ncomp = a->ncomp;
            uint16_t ar = a->ar;
            for (uint32_t i = node->first; i < node->first + node->count; i++) {
                const eddy__dns_rr_t *rr = &a->z->rrs[i];
                if (rr->type != types[t]) {
                    continue;
                }
                if (!put_rr(a, a->glue[g], n, rr, rr->ttl)) {
                    a->len = len;
                    a->ncomp = ncomp;
                    a->ar = ar;
                    return;
                }
                a->ar++;
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * Looking up
 */

/* Whether the name (n bytes, lowercased) is the zone's apex or below it. */
static bool in_zone(const eddy_dns_zone_t *z, const uint8_t *name, size_t n)
{
    const eddy__dns_node_t *apex = &z->nodes[z->apex];
    for (size_t i = 0; n - i >= apex->name_len; i += 1 + (size_t)name[i]) {
        if (n - i == apex->name_len && memcmp(name + i, z->bytes + apex->name, n - i) == 0) {
            return true;
        }
        if (name[i] == 0) {
            break;
        }
    }
    return false;
}

static const eddy__dns_rr_t *find_type(const eddy_dns_zone_t *z, const eddy__dns_node_t *node,
                                       uint16_t type)
{
    for (uint32_t i = node->first; i < node->first + node->count; i++) {
        if (z->rrs[i].type == type) {
            return &z->rrs[i];
        }
    }
    return NULL;
}

/* The answer and authority sections for the question; false when they do not fit. */
static bool resolve(answer_t *a)
{
    const eddy_dns_zone_t *z = a->z;
    uint8_t lower[EDDY_DNS_NAME_MAX];
    size_t n = a->q.qname_len;
    for (size_t i = 0; i < n; i++) {
        lower[i] = eddy__dns_lower(a->q.qname[i]);
    }
    if (!in_zone(z, lower, n)) {
        a->rcode = EDDY_DNS_REFUSED;
        return true;
    }
    a->aa = true;
    /* The first owner is the question's name as asked: it compresses to the question, and
     * the client sees its own case (0x20 randomisation). Later ones are CNAME targets. */
    const uint8_t *owner = a->q.qname, *name = lower;
    const eddy__dns_node_t *seen[MAX_CNAMES];
    uint16_t qtype = a->q.qtype;
    for (size_t step = 0;; step++) {
        const eddy__dns_node_t *node = eddy__dns_zone_find(z, name, n);
        if (node == NULL) {
            a->rcode = EDDY_DNS_NXDOMAIN;
            return put_soa(a);
        }
        if (qtype == EDDY_DNS_TYPE_ANY) {
            return node->count > 0 ? put_answers(a, node, qtype, owner, n) : put_soa(a);
        }
        if (find_type(z, node, qtype) != NULL) {
            return put_answers(a, node, qtype, owner, n);
        }
        const eddy__dns_rr_t *cname = find_type(z, node, EDDY_DNS_TYPE_CNAME);
        if (cname == NULL) {
            return put_soa(a); /* NODATA, empty non-terminals included */
        }
        if (!put_answers(a, node, EDDY_DNS_TYPE_CNAME, owner, n)) {
            return false;
        }
        seen[step] = node;
        /* Follow the target while it is in the zone, not yet visited, and the chain short;
         * else the answer ends with the CNAME and the resolver follows it. */
        name = owner = z->bytes + cname->rdata;
        n = cname->rdlen;
        if (step + 1 == MAX_CNAMES || !in_zone(z, name, n)) {
            return true;
        }
        const eddy__dns_node_t *next = eddy__dns_zone_find(z, name, n);
        for (size_t k = 0; k <= step; k++) {
            if (next != NULL && seen[k] == next) {
                return true; /* a loop: what was written is the chain up to it */
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * The answer
 */

/* A header-only answer (FORMERR, NOTIMP): nothing after it can be trusted or understood. */
static size_t header_only(uint8_t *out, uint16_t id, uint16_t flags)
{
    memset(out, 0, EDDY_DNS_HEADER_LEN);
    eddy__dns_put16(out, id);
    eddy__dns_put16(out + 2, flags);
    return EDDY_DNS_HEADER_LEN;
}

/* Our OPT record at p (OPT_LEN bytes): our UDP size, the extended rcode's upper bits, version
 * 0, and the DO bit copied (RFC 3225 3). */
static void put_opt(uint8_t *p, uint16_t rcode, uint16_t edns_flags)
{
    p[0] = 0;
    eddy__dns_put16(p + 1, EDDY_DNS_TYPE_OPT);
    eddy__dns_put16(p + 3, EDDY_DNS_EDNS_UDP_SIZE);
    eddy__dns_put32(p + 5, (uint32_t)(rcode >> 4) << 24 | (edns_flags & EDDY_DNS_EDNS_DO));
    eddy__dns_put16(p + 9, 0);
}

/* A header-only answer with rcode, plus our OPT when the query parsed and had one (RFC 6891
 * 6.1.1: an answer to an EDNS query carries an OPT, also an error's). */
static size_t header_answer(const uint8_t *query, size_t qlen, uint8_t *out, uint16_t id,
                            uint16_t flags, uint16_t rcode)
{
    eddy_dns_msg_t q;
    size_t len = header_only(out, id, (uint16_t)(flags | rcode));
    if (eddy_dns_msg_parse(&q, query, qlen) == 0 && q.has_opt) {
        put_opt(out + len, rcode, q.edns_flags);
        eddy__dns_put16(out + 10, 1);
        len += OPT_LEN;
    }
    return len;
}

int eddy_dns_answer(const eddy_dns_zone_t *z, const uint8_t *query, size_t qlen, size_t max_len,
                    uint8_t *out, size_t outcap, size_t *outlen)
{
    if (z == NULL || query == NULL || out == NULL || outlen == NULL || outcap < EDDY_DNS_UDP_MAX) {
        return EDDY_EINVAL;
    }
    if (qlen < EDDY_DNS_HEADER_LEN) {
        return EDDY_EDECODE;
    }
    uint16_t id = eddy__dns_get16(query), qflags = eddy__dns_get16(query + 2);
    if (qflags & EDDY_DNS_FLAG_QR) {
        return EDDY_ENOTSUP;
    }
    /* What every answer echoes: the opcode and RD. */
    uint16_t flags =
        (uint16_t)(EDDY_DNS_FLAG_QR | (qflags & (0xF << 11)) | (qflags & EDDY_DNS_FLAG_RD));
    if (((qflags >> 11) & 15) != 0) {
        *outlen = header_answer(query, qlen, out, id, flags, EDDY_DNS_NOTIMP);
        return 0;
    }
    answer_t a;
    a.z = z;
    int parsed = eddy_dns_msg_parse(&a.q, query, qlen);
    if (parsed != 0 || a.q.qdcount != 1 || a.q.qtype == EDDY_DNS_TYPE_OPT) {
        /* Malformed: header only; with our OPT when the query parsed (a count of questions
         * we do not take) and was an EDNS one. */
        *outlen = parsed == 0 ? header_answer(query, qlen, out, id, flags, EDDY_DNS_FORMERR)
                              : header_only(out, id, flags | EDDY_DNS_FORMERR);
        return 0;
    }

    /* The limit: the transport's, or the client's EDNS size if larger (below 512 counts as
     * 512, RFC 6891 6.2.5), within the caller's buffer and a message's 16-bit length. */
    size_t limit = max_len < EDDY_DNS_UDP_MAX ? EDDY_DNS_UDP_MAX : max_len;
    if (a.q.has_opt && a.q.udp_size > limit) {
        limit = a.q.udp_size;
    }
    limit = limit < outcap ? limit : outcap;
    limit = limit < EDDY_DNS_TCP_MAX ? limit : EDDY_DNS_TCP_MAX;
    a.out = out;
    a.len = EDDY_DNS_HEADER_LEN;
    a.limit = limit - (a.q.has_opt ? OPT_LEN : 0);
    a.ncomp = 0;
    a.an = a.ns = a.ar = 0;
    a.rcode = EDDY_DNS_NOERROR;
    a.aa = a.tc = false;
    a.nglue = 0;

    /* The question as asked, which always fits: 12 + 255 + 4 + 11 < 512. */
    uint8_t qfixed[4];
    eddy__dns_put16(qfixed, a.q.qtype);
    eddy__dns_put16(qfixed + 2, a.q.qclass);
    bool fits = put_name(&a, a.q.qname, a.q.qname_len) && put_bytes(&a, qfixed, 4);
    assert(fits);
    (void)fits; /* release builds */
    size_t question_end = a.len;

    if (a.q.has_opt && a.q.edns_version != 0) {
        a.rcode = EDDY_DNS_BADVERS; /* RFC 6891 6.1.3: no records, our version in the OPT */
    } else if (a.q.qclass != EDDY_DNS_CLASS_IN && a.q.qclass != EDDY_DNS_CLASS_ANY) {
        a.rcode = EDDY_DNS_REFUSED; /* not ours: we serve IN only */
    } else if (a.q.qtype == EDDY_DNS_TYPE_AXFR || a.q.qtype == EDDY_DNS_TYPE_IXFR) {
        a.rcode = EDDY_DNS_NOTIMP;
    } else if (resolve(&a)) {
        put_glue(&a);
    } else {
        /* RFC 2181 9: what does not fit is not sent in part; the client asks again over TCP.
         * The rcode stays: it is known, only the records are missing. */
        a.len = question_end;
        a.an = a.ns = a.ar = 0;
        a.tc = true;
    }

    if (a.q.has_opt) {
        assert(a.len + OPT_LEN <= limit);
        put_opt(out + a.len, a.rcode, a.q.edns_flags);
        a.len += OPT_LEN;
        a.ar++;
    }
    flags |=
        (uint16_t)((a.aa ? EDDY_DNS_FLAG_AA : 0) | (a.tc ? EDDY_DNS_FLAG_TC : 0) | (a.rcode & 15));
    header_only(out, id, flags);
    eddy__dns_put16(out + 4, 1);
    eddy__dns_put16(out + 6, a.an);
    eddy__dns_put16(out + 8, a.ns);
    eddy__dns_put16(out + 10, a.ar);
    assert(a.len <= limit);
    *outlen = a.len;
    return 0;
}
