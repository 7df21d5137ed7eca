/*
 * eddy DNS: the message library of an authoritative DNS server (RFC 1034, 1035, 2181, 2308,
 * 6891): zones loaded from master files, queries parsed against hostile packets, answers
 * written into the caller's memory.
 *
 * It is pure computation on bytes: no sockets, no channels, no allocation per query. A
 * server reads a datagram (or a TCP message without its two-byte length), calls
 * eddy_dns_answer() with a buffer of its own, and sends what was written, or nothing when
 * the call returns an error:
 *
 *     uint8_t out[4096];
 *     size_t n;
 *     if (eddy_dns_answer(zone, pkt, len, EDDY_DNS_UDP_MAX, out, sizeof(out), &n) == 0)
 *         send(out, n);
 *
 * Zones are immutable once loaded: any number of threads may answer from one zone at once,
 * without locks, as long as none frees it meanwhile. The other functions touch only the
 * memory they are given.
 *
 * Names in wire form are sequences of labels (a length byte 1-63, then its bytes) ending
 * with the root's 0 byte, at most EDDY_DNS_NAME_MAX bytes in all: "\3www\7example\4test\0".
 * Text names are dotted, "www.example.test.", with RFC 1035 escapes (\. \\ \DDD).
 */
#ifndef EDDY_DNS_H
#define EDDY_DNS_H

#include <eddy/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sizes (RFC 1035 2.3.4, 4.2.1; RFC 6891 6.2.5). */
#define EDDY_DNS_NAME_MAX 255  /* a name in wire form, its root byte included */
#define EDDY_DNS_LABEL_MAX 63  /* a label's bytes */
#define EDDY_DNS_HEADER_LEN 12 /* the fixed header */
#define EDDY_DNS_UDP_MAX 512   /* the most a UDP answer may carry without EDNS */
#define EDDY_DNS_TCP_MAX 65535 /* the most a TCP message may carry (its length prefix) */
/* The UDP payload size our answers advertise in their OPT record: the DNS Flag Day 2020
 * figure, which fits the IPv6 minimum MTU without fragments. */
#define EDDY_DNS_EDNS_UDP_SIZE 1232

/* Record types (RFC 1035 3.2.2, RFC 3596, RFC 6891). */
enum {
    EDDY_DNS_TYPE_A = 1,
    EDDY_DNS_TYPE_NS = 2,
    EDDY_DNS_TYPE_CNAME = 5,
    EDDY_DNS_TYPE_SOA = 6,
    EDDY_DNS_TYPE_MX = 15,
    EDDY_DNS_TYPE_TXT = 16,
    EDDY_DNS_TYPE_AAAA = 28,
    EDDY_DNS_TYPE_OPT = 41,
    EDDY_DNS_TYPE_IXFR = 251,
    EDDY_DNS_TYPE_AXFR = 252,
    EDDY_DNS_TYPE_ANY = 255
};

/* Classes. */
enum { EDDY_DNS_CLASS_IN = 1, EDDY_DNS_CLASS_CH = 3, EDDY_DNS_CLASS_ANY = 255 };

/* Response codes; BADVERS is an extended one (RFC 6891), its upper bits in the OPT record. */
enum {
    EDDY_DNS_NOERROR = 0,
    EDDY_DNS_FORMERR = 1,
    EDDY_DNS_SERVFAIL = 2,
    EDDY_DNS_NXDOMAIN = 3,
    EDDY_DNS_NOTIMP = 4,
    EDDY_DNS_REFUSED = 5,
    EDDY_DNS_BADVERS = 16
};

/* The header's flag bits (the second 16-bit word, opcode and rcode masked out). */
enum {
    EDDY_DNS_FLAG_QR = 1u << 15, /* a response */
    EDDY_DNS_FLAG_AA = 1u << 10, /* authoritative answer */
    EDDY_DNS_FLAG_TC = 1u << 9,  /* truncated: retry over TCP */
    EDDY_DNS_FLAG_RD = 1u << 8,  /* recursion desired (copied, never done) */
    EDDY_DNS_FLAG_RA = 1u << 7   /* recursion available (never set by us) */
};

/* The OPT record's DO bit, in eddy_dns_msg_t.edns_flags. */
#define EDDY_DNS_EDNS_DO 0x8000u

/* ---------------------------------------------------------------------------------------
 * Zones
 */

typedef struct eddy_dns_zone_s eddy_dns_zone_t;

/**
 * Parse the len bytes of master-file text (RFC 1035 5, a subset) into a new zone, *out.
 * origin (text, "example.test." or "example.test"; NULL: none) is the $ORIGIN until the text
 * sets one. The text has $ORIGIN, $TTL, ';' comments, parentheses across lines, '@', names
 * relative to the origin or absolute, an omitted owner (the previous one), an omitted TTL
 * ($TTL, else the last one given) and class (IN; others are refused); types SOA, NS, A,
 * AAAA, CNAME, MX and TXT (quoted or bare strings, escapes \" \\ \DDD). TTLs may carry
 * units (1h30m, 2d, 1w).
 *
 * The zone is the SOA owner and every name at or below it: there must be exactly one SOA,
 * and every record must be at or below its owner. Refused too: CNAME beside other data at a
 * name, NS below the apex (delegations are not served), $INCLUDE, $GENERATE, other types.
 * Names are stored lowercased; a duplicate record is stored once.
 *
 * Returns 0 and *out (free it with eddy_dns_zone_free()); EDDY_EDECODE with a message
 * naming the line written to err ("line 12: bad TTL \"1x\"", NUL-terminated, cut to errlen;
 * err may be NULL); EDDY_EINVAL when out or text is NULL; EDDY_ENOMEM. *out is NULL on
 * failure.
 */
EDDY_EXTERN int eddy_dns_zone_parse(eddy_dns_zone_t **out, const char *text, size_t len,
                                    const char *origin, char *err, size_t errlen);

/**
 * eddy_dns_zone_parse() of the file at path, with no origin but the file's own. Errors as
 * there, the message starting "path:line: "; EDDY_ENOENT, EDDY_EACCES, EDDY_EIO... when the
 * file cannot be read (err says so too).
 */
EDDY_EXTERN int eddy_dns_zone_load(eddy_dns_zone_t **out, const char *path, char *err,
                                   size_t errlen);

/** Free z (NULL is ignored). No thread may be answering from it. */
EDDY_EXTERN void eddy_dns_zone_free(eddy_dns_zone_t *z);

/** The zone's apex in wire form, lowercased; *len its length. Valid while z is. */
EDDY_EXTERN const uint8_t *eddy_dns_zone_origin(const eddy_dns_zone_t *z, size_t *len);

/** How many records z holds (each counted once, the SOA included). */
EDDY_EXTERN size_t eddy_dns_zone_record_count(const eddy_dns_zone_t *z);

/* ---------------------------------------------------------------------------------------
 * Answering
 */

/**
 * The answer to the query in the qlen bytes at query, from zone z, written to out (outcap
 * bytes, at least EDDY_DNS_UDP_MAX); *outlen its length. Never allocates; z is only read.
 *
 * max_len is what the transport carries without EDNS: EDDY_DNS_UDP_MAX for UDP,
 * EDDY_DNS_TCP_MAX for TCP. A query with an OPT record advertising a larger UDP payload
 * size raises it to that size; either is capped at outcap. An answer whose answer and
 * authority sections do not fit is sent as header and question alone with TC set (the
 * client retries over TCP); additional records (glue) are left out when they do not fit.
 *
 * The answer (QR and AA set, ID, opcode, RD and the question copied as asked, case
 * included; RA never set):
 * - the RRset of the asked type at the name; QTYPE ANY: every record at the name;
 * - a CNAME at the name (the type asked not CNAME): the CNAME, then its target's answer
 *   while the chain stays in the zone (at most 8 CNAMEs; a loop stops there); the rcode is
 *   the last name's (RFC 6604);
 * - the name but not the type (or an empty non-terminal: a name existing only as a parent
 *   of others): NOERROR, the SOA in the authority section (NODATA, RFC 2308);
 * - no such name: NXDOMAIN, the SOA in the authority section;
 * - the additional section: the A and AAAA records in the zone of NS and MX targets;
 * - an OPT record (payload size EDDY_DNS_EDNS_UDP_SIZE, the DO bit copied) when the query
 *   had one. EDNS options in the query are ignored.
 * Other answers, with no records (AA clear):
 * - a name outside the zone, or a class other than IN and ANY: REFUSED;
 * - an opcode other than QUERY, or QTYPE AXFR, IXFR (zone transfers): NOTIMP;
 * - an OPT of a version other than 0: BADVERS (with an OPT record);
 * - a malformed query: FORMERR. Malformed: QDCOUNT other than 1, a name with a compression
 *   pointer that is not strictly backward (loops, forward, out of the packet, into the
 *   header), a label past the end or longer than 63 bytes, a name over 255 bytes, counts
 *   claiming more records than the packet holds, bytes after the last record, more than one
 *   OPT, an OPT outside the additional section or not owned by the root, QTYPE OPT.
 *   FORMERR and NOTIMP answers carry the header alone (QDCOUNT 0), and our OPT record when
 *   the query was an EDNS one that parsed (RFC 6891 6.1.1).
 *
 * Returns 0 when out holds an answer to send; otherwise there is nothing to send (drop the
 * packet): EDDY_EDECODE when there is no header (qlen < 12); EDDY_ENOTSUP when the packet
 * is a response (QR set): answering responses could loop between two servers or reflect;
 * EDDY_EINVAL when an argument is NULL or outcap is below EDDY_DNS_UDP_MAX.
 */
EDDY_EXTERN int eddy_dns_answer(const eddy_dns_zone_t *z, const uint8_t *query, size_t qlen,
                                size_t max_len, uint8_t *out, size_t outcap, size_t *outlen);

/* ---------------------------------------------------------------------------------------
 * The answer cache (PowerDNS's packet cache): a zone never changes, so a query answered once
 * is answered again by a copy, its ID and the asker's case of the question name put in.
 */

typedef struct eddy_dns_cache_s eddy_dns_cache_t;

/**
 * A cache of the answers of zone z (borrowed: it must outlive the cache), slots rounded up to
 * a power of two (about 1.6 KB each); a new answer replaces the one in its slot. For one
 * thread (a loop's): no lock. NULL without memory, or for z NULL or slots 0 or over 2^20.
 */
EDDY_EXTERN eddy_dns_cache_t *eddy_dns_cache_new(const eddy_dns_zone_t *z, size_t slots);
EDDY_EXTERN void eddy_dns_cache_free(eddy_dns_cache_t *c);
/**
 * eddy_dns_answer() of c's zone, the same bytes, from the cache when the same query (ID
 * aside, the question name without case) was answered before under the same max_len and
 * outcap. Queries over 300 bytes, with a compressed question name, or that are responses,
 * and answers over EDDY_DNS_EDNS_UDP_SIZE bytes are answered afresh each time. Debug builds
 * check every copy against a fresh answer.
 */
EDDY_EXTERN int eddy_dns_cache_answer(eddy_dns_cache_t *c, const uint8_t *query, size_t qlen,
                                      size_t max_len, uint8_t *out, size_t outcap,
                                      size_t *outlen);
/** Queries answered from the cache, and afresh (cacheable ones that missed). */
EDDY_EXTERN void eddy_dns_cache_stats(const eddy_dns_cache_t *c, uint64_t *hits,
                                      uint64_t *misses);

/* ---------------------------------------------------------------------------------------
 * Messages: the parser the answerer reads queries with, for tests and clients too
 */

/* Where a record sits. */
typedef enum {
    EDDY_DNS_SECTION_ANSWER = 1,
    EDDY_DNS_SECTION_AUTHORITY = 2,
    EDDY_DNS_SECTION_ADDITIONAL = 3
} eddy_dns_section_t;

/* A parsed message. Points into the bytes it was parsed from: valid while they are. */
typedef struct eddy_dns_msg_s {
    const uint8_t *bytes; /* the message */
    size_t len;
    uint16_t id;
    uint16_t flags; /* the second header word: EDDY_DNS_FLAG_* | opcode << 11 | rcode */
    uint8_t opcode; /* (flags >> 11) & 15; 0 QUERY */
    uint16_t rcode; /* the header's 4 bits, and with an OPT its upper 8 bits (BADVERS) */
    uint16_t qdcount, ancount, nscount, arcount;
    /* The first question, when qdcount >= 1: its name as sent (case kept), decompressed. */
    uint8_t qname[EDDY_DNS_NAME_MAX];
    size_t qname_len; /* 0 when there is no question */
    uint16_t qtype, qclass;
    /* The OPT record (EDNS), when has_opt. */
    bool has_opt;
    uint16_t udp_size; /* its payload size as sent (a responder treats < 512 as 512) */
    uint8_t edns_version;
    uint16_t edns_flags; /* EDDY_DNS_EDNS_DO */
    size_t _records;     /* the offset of the first record after the questions */
} eddy_dns_msg_t;

/* A record, as eddy_dns_msg_next_rr() returns it. */
typedef struct eddy_dns_rr_s {
    eddy_dns_section_t section;
    uint8_t name[EDDY_DNS_NAME_MAX]; /* the owner, decompressed, case kept */
    size_t name_len;
    uint16_t type, rclass;
    uint32_t ttl;
    uint16_t rdlen;
    const uint8_t *rdata; /* rdlen bytes in the message; names in it may be compressed */
    size_t rdata_off;     /* rdata's offset in the message, for eddy_dns_name_unpack() */
} eddy_dns_rr_t;

/* Where eddy_dns_msg_next_rr() is; zero it to start at the first record. */
typedef struct eddy_dns_cursor_s {
    size_t off;
    unsigned index;
} eddy_dns_cursor_t;

/**
 * Parse and check the whole of the n bytes at p as a DNS message into *m: the header, the
 * questions, every record (names bounded as eddy_dns_answer() describes; the rdata of A,
 * AAAA, NS, CNAME, MX, SOA and TXT checked against their type; other types' rdata
 * skipped), at most one OPT (in the additional section, owned by the root), nothing after
 * the last record. m points into p. Returns 0, EDDY_EDECODE (m is then partly filled: its
 * header fields are valid if n >= 12), or EDDY_EINVAL when m or p is NULL. Never reads
 * outside the n bytes.
 */
EDDY_EXTERN int eddy_dns_msg_parse(eddy_dns_msg_t *m, const uint8_t *p, size_t n);

/**
 * The record at *c of m (parsed by eddy_dns_msg_parse()) into *rr, advancing *c: 1 with a
 * record, 0 after the last one. The OPT record is returned too (type EDDY_DNS_TYPE_OPT).
 */
EDDY_EXTERN int eddy_dns_msg_next_rr(const eddy_dns_msg_t *m, eddy_dns_cursor_t *c,
                                     eddy_dns_rr_t *rr);

/**
 * The name at offset off of the len-byte message msg, decompressed into out
 * (EDDY_DNS_NAME_MAX bytes); *out_len its length, *next (may be NULL) the offset after it
 * where it sits (after its first pointer, if any). Returns 0 or EDDY_EDECODE (bounds,
 * pointers, lengths as eddy_dns_answer() describes).
 */
EDDY_EXTERN int eddy_dns_name_unpack(const uint8_t *msg, size_t len, size_t off, uint8_t *out,
                                     size_t *out_len, size_t *next);

/**
 * The text form of the wire name of n bytes at name ("www.example.test.", the root "."),
 * escaping '.', '\\', '"', ';', '(', ')', '@', ' ' and bytes outside printable ASCII as
 * RFC 1035 does (\. \DDD), into out (cap bytes, NUL-terminated, cut if short). Returns the
 * length of the full text (like snprintf), or EDDY_EDECODE when name is not a wire name.
 */
EDDY_EXTERN int eddy_dns_name_to_text(const uint8_t *name, size_t n, char *out, size_t cap);

/**
 * The wire form of the text name (a trailing dot optional; "." or "" is the root; escapes as
 * in zone files; case kept) into out (EDDY_DNS_NAME_MAX bytes), *out_len its length.
 * Returns 0 or EDDY_EDECODE (an empty label, a label over 63 bytes, a name over 255, a bad
 * escape).
 */
EDDY_EXTERN int eddy_dns_name_from_text(const char *text, uint8_t *out, size_t *out_len);

/**
 * A query for name (text, as eddy_dns_name_from_text() takes it), type qtype, class IN, RD
 * clear, written to out (cap bytes), *outlen its length. udp_size 0: no OPT record; else an
 * OPT record (version 0) advertising it. Returns 0, EDDY_EDECODE (a bad name) or
 * EDDY_ENOBUFS (cap too small).
 */
EDDY_EXTERN int eddy_dns_query_write(uint8_t *out, size_t cap, size_t *outlen, uint16_t id,
                                     const char *name, uint16_t qtype, uint16_t udp_size);

/** "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "BADVERS"..., or
 * "UNKNOWN". Never NULL. */
EDDY_EXTERN const char *eddy_dns_rcode_name(int rcode);

/** "A", "NS", "CNAME", "SOA", "MX", "TXT", "AAAA", "OPT", "AXFR", "ANY"..., or "UNKNOWN". */
EDDY_EXTERN const char *eddy_dns_type_name(uint16_t type);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_DNS_H */
