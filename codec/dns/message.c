/*
 * DNS messages on the wire: names (compressed, in text), the parser that checks a whole
 * message before anything in it is trusted, and a query writer.
 *
 * Every read is checked against the message's length before it happens: the parser is
 * what stands between a hostile datagram and the answerer.
 */
#include "codec/dns/internal.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* Compression pointers followed per name. Each must point strictly backward and each label
 * grows the name, so a name ends without this cap; it only bounds the work on a packet made
 * of pointers to pointers (a 512-byte one could hold 250 of them). */
#define MAX_HOPS 64

/* The OPT record's fixed part: root owner, type, class, TTL, rdlength. */
#define OPT_LEN 11

uint32_t eddy__dns_hash(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

size_t eddy__dns_name_len(const uint8_t *p)
{
    size_t n = 0;
    while (p[n] != 0) {
        assert(p[n] <= EDDY_DNS_LABEL_MAX);
        n += 1 + (size_t)p[n];
    }
    assert(n + 1 <= EDDY_DNS_NAME_MAX);
    return n + 1;
}

/* ---------------------------------------------------------------------------------------
 * Names
 */

int eddy_dns_name_unpack(const uint8_t *msg, size_t len, size_t off, uint8_t *out, size_t *out_len,
                         size_t *next)
{
    size_t n = 0, pos = off, after = 0;
    unsigned hops = 0;
    for (;;) {
        if (pos >= len) {
            return EDDY_EDECODE;
        }
        uint8_t b = msg[pos];
        if ((b & 0xC0) == 0xC0) {
            if (pos + 1 >= len) {
                return EDDY_EDECODE;
            }
            size_t target = (size_t)(b & 0x3F) << 8 | msg[pos + 1];
            /* Strictly backward (no loop can form), and never into the header, where no
             * name is. */
            if (target >= pos || target < EDDY_DNS_HEADER_LEN || ++hops > MAX_HOPS) {
                return EDDY_EDECODE;
            }
            if (hops == 1) {
                after = pos + 2;
            }
            pos = target;
            continue;
        }
        if (b > EDDY_DNS_LABEL_MAX) { /* 0x40 and 0x80: label types RFC 6891 retired */
            return EDDY_EDECODE;
        }
        if (len - pos - 1 < b || n + 1 + b > EDDY_DNS_NAME_MAX) {
            return EDDY_EDECODE;
        }
        out[n] = b;
        memcpy(out + n + 1, msg + pos + 1, b);
        n += 1 + (size_t)b;
        pos += 1 + (size_t)b;
        if (b == 0) {
            break;
        }
    }
    *out_len = n;
    if (next != NULL) {
        *next = hops > 0 ? after : pos;
    }
    return 0;
}

/* Whether c must be escaped in a text name: the characters zone files give a meaning to. */
static bool needs_escape(uint8_t c)
{
    return c == '.' || c == '\\' || c == '"' || c == ';' || c == '(' || c == ')' || c == '@' ||
           c == '$';
}

int eddy_dns_name_to_text(const uint8_t *name, size_t n, char *out, size_t cap)
{
    char tmp[EDDY_DNS_NAME_MAX * 4 + 2]; /* every byte as \DDD, at worst */
    size_t t = 0, pos = 0;
    for (;;) {
        if (pos >= n || name[pos] > EDDY_DNS_LABEL_MAX || n - pos - 1 < name[pos]) {
            return EDDY_EDECODE;
        }
        size_t l = name[pos++];
        if (l == 0) {
            break;
        }
        for (size_t i = 0; i < l; i++) {
            uint8_t c = name[pos + i];
            if (c <= ' ' || c >= 0x7F) {
                t += (size_t)snprintf(tmp + t, sizeof(tmp) - t, "\\%03u", c);
            } else if (needs_escape(c)) {
                tmp[t++] = '\\';
                tmp[t++] = (char)c;
            } else {
                tmp[t++] = (char)c;
            }
        }
        tmp[t++] = '.';
        pos += l;
    }
    if (pos != n || n > EDDY_DNS_NAME_MAX) {
        return EDDY_EDECODE;
    }
    if (t == 0) {
        tmp[t++] = '.';
    }
    if (cap > 0) {
        size_t k = t < cap - 1 ? t : cap - 1;
        memcpy(out, tmp, k);
        out[k] = '\0';
    }
    return (int)t;
}

int eddy_dns_name_from_text(const char *text, uint8_t *out, size_t *out_len)
{
    size_t n = 0, len = strlen(text);
    if (len == 1 && text[0] == '.') {
        len = 0;
    }
    size_t i = 0;
    while (i < len) {
        size_t start = n++; /* the label's length byte */
        while (i < len && text[i] != '.') {
            uint8_t c = (uint8_t)text[i++];
            if (c == '\\') {
                if (i >= len) {
                    return EDDY_EDECODE;
                }
                if (text[i] >= '0' && text[i] <= '9') {
                    if (len - i < 3) {
                        return EDDY_EDECODE;
                    }
                    unsigned v = 0;
                    for (int k = 0; k < 3; k++, i++) {
                        if (text[i] < '0' || text[i] > '9') {
                            return EDDY_EDECODE;
                        }
                        v = v * 10 + (unsigned)(text[i] - '0');
                    }
                    if (v > 255) {
                        return EDDY_EDECODE;
                    }
                    c = (uint8_t)v;
                } else {
                    c = (uint8_t)text[i++];
                }
            }
            if (n >= EDDY_DNS_NAME_MAX - 1) {
                return EDDY_EDECODE;
            }
            out[n++] = c;
        }
        size_t l = n - start - 1;
        if (l == 0 || l > EDDY_DNS_LABEL_MAX) {
            return EDDY_EDECODE;
        }
        out[start] = (uint8_t)l;
        if (i < len) {
            i++; /* the dot; a final one ends the name */
        }
    }
    out[n++] = 0;
    *out_len = n;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The parser
 */

/* Whether the rdata of rr (in msg) is what its type says: names that end exactly where the
 * rdata does, fixed lengths, strings that fill it. Other types are opaque. */
static bool rdata_ok(const uint8_t *msg, size_t len, const eddy_dns_rr_t *rr)
{
    uint8_t name[EDDY_DNS_NAME_MAX];
    size_t nl, off = rr->rdata_off, end = rr->rdata_off + rr->rdlen;
    switch (rr->type) {
    case EDDY_DNS_TYPE_A:
        return rr->rdlen == 4;
    case EDDY_DNS_TYPE_AAAA:
        return rr->rdlen == 16;
    case EDDY_DNS_TYPE_NS:
    case EDDY_DNS_TYPE_CNAME:
        return eddy_dns_name_unpack(msg, end, off, name, &nl, &off) == 0 && off == end;
    case EDDY_DNS_TYPE_MX:
        return rr->rdlen > 2 && eddy_dns_name_unpack(msg, end, off + 2, name, &nl, &off) == 0 &&
               off == end;
    case EDDY_DNS_TYPE_SOA:
        return eddy_dns_name_unpack(msg, end, off, name, &nl, &off) == 0 &&
               eddy_dns_name_unpack(msg, end, off, name, &nl, &off) == 0 && end - off == 20;
    case EDDY_DNS_TYPE_TXT:
        if (rr->rdlen == 0) {
            return false;
        }
        while (off < end) {
            off += 1 + (size_t)msg[off];
        }
        return off == end;
    default:
        (void)len;
        return true;
    }
}

/* The record at *off (the index-th after the questions) into *rr, *off moved past it. */
static int parse_rr(const eddy_dns_msg_t *m, size_t *off, unsigned index, eddy_dns_rr_t *rr)
{
    size_t pos;
    int err = eddy_dns_name_unpack(m->bytes, m->len, *off, rr->name, &rr->name_len, &pos);
    if (err != 0) {
        return err;
    }
    if (m->len - pos < 10) {
        return EDDY_EDECODE;
    }
    const uint8_t *p = m->bytes + pos;
    rr->type = eddy__dns_get16(p);
    rr->rclass = eddy__dns_get16(p + 2);
    rr->ttl = eddy__dns_get32(p + 4);
    rr->rdlen = eddy__dns_get16(p + 8);
    rr->rdata_off = pos + 10;
    if (m->len - rr->rdata_off < rr->rdlen) {
        return EDDY_EDECODE;
    }
    rr->rdata = m->bytes + rr->rdata_off;
    unsigned an = m->ancount, ns = m->nscount;
    rr->section = index < an        ? EDDY_DNS_SECTION_ANSWER
                  : index < an + ns ? EDDY_DNS_SECTION_AUTHORITY
                                    : EDDY_DNS_SECTION_ADDITIONAL;
    /* Names in rdata are read within the message (pointers may reach back before the
     * rdata), but must end where the rdata does. */
    if (!rdata_ok(m->bytes, m->len, rr)) {
        return EDDY_EDECODE;
    }
    *off = rr->rdata_off + rr->rdlen;
    return 0;
}

int eddy_dns_msg_parse(eddy_dns_msg_t *m, const uint8_t *p, size_t n)
{
    if (m == NULL || p == NULL) {
        return EDDY_EINVAL;
    }
    memset(m, 0, sizeof(*m));
    m->bytes = p;
    m->len = n;
    if (n < EDDY_DNS_HEADER_LEN) {
        return EDDY_EDECODE;
    }
    m->id = eddy__dns_get16(p);
    m->flags = eddy__dns_get16(p + 2);
    m->opcode = (uint8_t)((m->flags >> 11) & 15);
    m->rcode = m->flags & 15;
    m->qdcount = eddy__dns_get16(p + 4);
    m->ancount = eddy__dns_get16(p + 6);
    m->nscount = eddy__dns_get16(p + 8);
    m->arcount = eddy__dns_get16(p + 10);

    /* Counts are claims: each loop below stops at the first record the bytes do not hold,
     * so a lying count costs at most one pass over the packet. */
    size_t off = EDDY_DNS_HEADER_LEN;
    for (unsigned i = 0; i < m->qdcount; i++) {
        uint8_t other[EDDY_DNS_NAME_MAX];
        size_t nl;
        int err = eddy_dns_name_unpack(p, n, off, i == 0 ? m->qname : other, &nl, &off);
        if (err != 0 || n - off < 4) {
            m->qname_len = 0;
            return EDDY_EDECODE;
        }
        if (i == 0) {
            m->qname_len = nl;
            m->qtype = eddy__dns_get16(p + off);
            m->qclass = eddy__dns_get16(p + off + 2);
        }
        off += 4;
    }
    m->_records = off;

    unsigned total = (unsigned)m->ancount + m->nscount + m->arcount;
    for (unsigned i = 0; i < total; i++) {
        eddy_dns_rr_t rr;
        int err = parse_rr(m, &off, i, &rr);
        if (err != 0) {
            return err;
        }
        if (rr.type == EDDY_DNS_TYPE_OPT) {
            /* RFC 6891 6.1.1: one OPT, in the additional section, owned by the root. */
            if (m->has_opt || rr.section != EDDY_DNS_SECTION_ADDITIONAL || rr.name_len != 1) {
                return EDDY_EDECODE;
            }
            m->has_opt = true;
            m->udp_size = rr.rclass;
            m->rcode = (uint16_t)((rr.ttl >> 24) << 4 | (m->flags & 15));
            m->edns_version = (uint8_t)(rr.ttl >> 16);
            m->edns_flags = (uint16_t)rr.ttl;
        }
    }
    if (off != n) {
        return EDDY_EDECODE;
    }
    return 0;
}

int eddy_dns_msg_next_rr(const eddy_dns_msg_t *m, eddy_dns_cursor_t *c, eddy_dns_rr_t *rr)
{
    unsigned total = (unsigned)m->ancount + m->nscount + m->arcount;
    if (c->index >= total) {
        return 0;
    }
    if (c->index == 0) {
        c->off = m->_records;
    }
    int err = parse_rr(m, &c->off, c->index, rr);
    if (err != 0) {
        return err; /* only for a message eddy_dns_msg_parse() refused */
    }
    c->index++;
    return 1;
}

/* ---------------------------------------------------------------------------------------
 * Queries and names of codes
 */

int eddy_dns_query_write(uint8_t *out, size_t cap, size_t *outlen, uint16_t id, const char *name,
                         uint16_t qtype, uint16_t udp_size)
{
    uint8_t wire[EDDY_DNS_NAME_MAX];
    size_t nl;
    int err = eddy_dns_name_from_text(name, wire, &nl);
    if (err != 0) {
        return err;
    }
    size_t need = EDDY_DNS_HEADER_LEN + nl + 4 + (udp_size != 0 ? OPT_LEN : 0);
    if (cap < need) {
        return EDDY_ENOBUFS;
    }
    memset(out, 0, EDDY_DNS_HEADER_LEN);
    eddy__dns_put16(out, id);
    eddy__dns_put16(out + 4, 1);
    eddy__dns_put16(out + 10, udp_size != 0 ? 1 : 0);
    size_t off = EDDY_DNS_HEADER_LEN;
    memcpy(out + off, wire, nl);
    off += nl;
    eddy__dns_put16(out + off, qtype);
    eddy__dns_put16(out + off + 2, EDDY_DNS_CLASS_IN);
    off += 4;
    if (udp_size != 0) {
        out[off] = 0;
        eddy__dns_put16(out + off + 1, EDDY_DNS_TYPE_OPT);
        eddy__dns_put16(out + off + 3, udp_size);
        eddy__dns_put32(out + off + 5, 0);
        eddy__dns_put16(out + off + 9, 0);
        off += OPT_LEN;
    }
    assert(off == need);
    *outlen = off;
    return 0;
}

const char *eddy_dns_rcode_name(int rcode)
{
    switch (rcode) {
    case EDDY_DNS_NOERROR:
        return "NOERROR";
    case EDDY_DNS_FORMERR:
        return "FORMERR";
    case EDDY_DNS_SERVFAIL:
        return "SERVFAIL";
    case EDDY_DNS_NXDOMAIN:
        return "NXDOMAIN";
    case EDDY_DNS_NOTIMP:
        return "NOTIMP";
    case EDDY_DNS_REFUSED:
        return "REFUSED";
    case 6:
        return "YXDOMAIN";
    case 7:
        return "YXRRSET";
    case 8:
        return "NXRRSET";
    case 9:
        return "NOTAUTH";
    case 10:
        return "NOTZONE";
    case EDDY_DNS_BADVERS:
        return "BADVERS";
    default:
        return "UNKNOWN";
    }
}

const char *eddy_dns_type_name(uint16_t type)
{
    switch (type) {
    case EDDY_DNS_TYPE_A:
        return "A";
    case EDDY_DNS_TYPE_NS:
        return "NS";
    case EDDY_DNS_TYPE_CNAME:
        return "CNAME";
    case EDDY_DNS_TYPE_SOA:
        return "SOA";
    case EDDY_DNS_TYPE_MX:
        return "MX";
    case EDDY_DNS_TYPE_TXT:
        return "TXT";
    case EDDY_DNS_TYPE_AAAA:
        return "AAAA";
    case EDDY_DNS_TYPE_OPT:
        return "OPT";
    case EDDY_DNS_TYPE_IXFR:
        return "IXFR";
    case EDDY_DNS_TYPE_AXFR:
        return "AXFR";
    case EDDY_DNS_TYPE_ANY:
        return "ANY";
    default:
        return "UNKNOWN";
    }
}
