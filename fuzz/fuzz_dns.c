/*
 * Fuzz target: the DNS answerer (codec/dns/) on tests/codec/dns_test.zone,
 * compiled in. The input is a query, answered at the UDP limit (512) and the TCP one
 * (65535); each answer must parse with the module's own parser and keep the invariants a
 * client relies on: the ID, opcode and RD echoed, QR set and RA clear, the question copied
 * byte for byte, within the limit, TC only when the records would not fit, the same records
 * at both limits when neither truncated. A packet left unanswered must be one without a
 * header or a response. The input is also loaded as zone text: the loader must return an
 * error with a message or a zone that answers.
 */
#include <eddy/dns.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_dns_zone.h" /* dns_test_zone[]: made from the file by fuzz/CMakeLists.txt */

/* Checked always, whatever the build (abort: libFuzzer keeps the input). */
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "CHECK failed %s:%d: %s\n", __FILE__, __LINE__, #c);                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static eddy_dns_zone_t *zone;
static eddy_dns_cache_t *cache; /* answers the same queries again: the same bytes */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char err[256];
    int rc = eddy_dns_zone_parse(&zone, (const char *)dns_test_zone, sizeof(dns_test_zone), NULL,
                                 err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "fuzz_dns: the test zone: %s\n", err);
        abort();
    }
    cache = eddy_dns_cache_new(zone, 16);
    if (cache == NULL) {
        abort();
    }
    return 0;
}

/* The answer cache gives the bytes eddy_dns_answer() gave (out, n; rc), asked twice (the
 * second time from the cache when the query is cacheable). */
static void check_cache(const uint8_t *q, size_t qlen, size_t max_len, const uint8_t *out,
                        size_t n, int rc, size_t cap)
{
    static uint8_t again[EDDY_DNS_TCP_MAX];
    for (int i = 0; i < 2; i++) {
        size_t m = 0;
        int rc2 = eddy_dns_cache_answer(cache, q, qlen, max_len, again, cap, &m);
        CHECK(rc2 == rc);
        CHECK(rc != 0 || (m == n && memcmp(again, out, n) == 0));
    }
}

/* Every record of m parses; returns the answer and authority counts' sum. */
static unsigned walk(const eddy_dns_msg_t *m, bool query_had_opt)
{
    eddy_dns_cursor_t c = {0};
    eddy_dns_rr_t rr;
    unsigned n = 0, opts = 0;
    int rc;
    while ((rc = eddy_dns_msg_next_rr(m, &c, &rr)) == 1) {
        n++;
        if (rr.type == EDDY_DNS_TYPE_OPT) {
            opts++;
            CHECK(rr.rclass == EDDY_DNS_EDNS_UDP_SIZE);
        } else {
            CHECK(rr.rclass == EDDY_DNS_CLASS_IN);
        }
        char text[1100];
        CHECK(eddy_dns_name_to_text(rr.name, rr.name_len, text, sizeof(text)) > 0);
    }
    CHECK(rc == 0);
    CHECK(n == (unsigned)m->ancount + m->nscount + m->arcount);
    CHECK(opts == (query_had_opt ? 1u : 0u));
    return (unsigned)m->ancount + m->nscount;
}

/* The answer to the n bytes at q at limit max_len into out; checks it. Returns its length, 0
 * when there is none. */
static size_t answer(const uint8_t *q, size_t n, size_t max_len, uint8_t *out, size_t cap)
{
    size_t len = 0;
    int rc = eddy_dns_answer(zone, q, n, max_len, out, cap, &len);
    if (rc != 0) {
        CHECK(n < EDDY_DNS_HEADER_LEN ? rc == EDDY_EDECODE
                                      : rc == EDDY_ENOTSUP && (q[2] & 0x80) != 0);
        return 0;
    }
    CHECK(n >= EDDY_DNS_HEADER_LEN && (q[2] & 0x80) == 0);
    eddy_dns_msg_t m, qm;
    CHECK(eddy_dns_msg_parse(&m, out, len) == 0);
    bool query_ok = eddy_dns_msg_parse(&qm, q, n) == 0;
    size_t limit = max_len;
    if (query_ok && qm.has_opt && qm.udp_size > limit) {
        limit = qm.udp_size;
    }
    CHECK(len <= (limit < cap ? limit : cap));
    CHECK(memcmp(out, q, 2) == 0);
    CHECK((m.flags & EDDY_DNS_FLAG_QR) && !(m.flags & EDDY_DNS_FLAG_RA));
    CHECK((m.flags & 0x7900) == ((q[2] << 8 | q[3]) & 0x7900)); /* opcode, RD */
    if (m.qdcount == 0) {
        /* The header, and our OPT when the query was an EDNS one that parsed. */
        CHECK(len == EDDY_DNS_HEADER_LEN + (m.has_opt ? 11u : 0u));
        CHECK(!m.has_opt || (query_ok && qm.has_opt));
        CHECK(m.rcode == EDDY_DNS_FORMERR || m.rcode == EDDY_DNS_NOTIMP);
        return len;
    }
    CHECK(m.qdcount == 1 && query_ok && qm.qdcount == 1);
    CHECK(m.qname_len == qm.qname_len && memcmp(m.qname, qm.qname, m.qname_len) == 0);
    CHECK(m.qtype == qm.qtype && m.qclass == qm.qclass);
    walk(&m, qm.has_opt);
    if (m.flags & EDDY_DNS_FLAG_TC) {
        CHECK(m.ancount == 0 && m.nscount == 0 && m.arcount == (qm.has_opt ? 1 : 0));
    }
    if (m.rcode != EDDY_DNS_NOERROR && m.rcode != EDDY_DNS_NXDOMAIN) {
        CHECK(m.ancount == 0 && m.nscount == 0 && !(m.flags & EDDY_DNS_FLAG_AA));
    }
    if (m.rcode == EDDY_DNS_NXDOMAIN || (m.rcode == EDDY_DNS_NOERROR && m.ancount == 0 &&
                                         !(m.flags & EDDY_DNS_FLAG_TC) &&
                                         (m.flags & EDDY_DNS_FLAG_AA))) {
        CHECK(m.nscount == 1); /* the SOA */
    }
    return len;
}

/* The input as zone text: an error with a message, or a zone that answers. */
static void load(const uint8_t *data, size_t size)
{
    eddy_dns_zone_t *z = NULL;
    char err[256] = "";
    int rc = eddy_dns_zone_parse(&z, (const char *)data, size, "example.test", err, sizeof(err));
    if (rc != 0) {
        CHECK(rc == EDDY_EDECODE && z == NULL && err[0] != '\0');
        return;
    }
    size_t n;
    const uint8_t *origin = eddy_dns_zone_origin(z, &n);
    char name[1100];
    CHECK(eddy_dns_name_to_text(origin, n, name, sizeof(name)) > 0);
    uint8_t q[512], a[4096];
    size_t qlen, alen;
    CHECK(eddy_dns_query_write(q, sizeof(q), &qlen, 1, name, EDDY_DNS_TYPE_ANY, 0) == 0);
    CHECK(eddy_dns_answer(z, q, qlen, sizeof(a), a, sizeof(a), &alen) == 0);
    eddy_dns_msg_t m;
    CHECK(eddy_dns_msg_parse(&m, a, alen) == 0);
    CHECK(m.rcode == EDDY_DNS_NOERROR);
    walk(&m, false);
    eddy_dns_zone_free(z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t udp[EDDY_DNS_UDP_MAX + 3], tcp[EDDY_DNS_TCP_MAX];
    size_t u = answer(data, size, EDDY_DNS_UDP_MAX, udp, sizeof(udp));
    size_t t = answer(data, size, EDDY_DNS_TCP_MAX, tcp, sizeof(tcp));
    size_t n = 0;
    int rc = eddy_dns_answer(zone, data, size, EDDY_DNS_UDP_MAX, udp, sizeof(udp), &n);
    check_cache(data, size, EDDY_DNS_UDP_MAX, udp, n, rc, sizeof(udp));
    CHECK((u == 0) == (t == 0));
    if (u > 0 && !(udp[2] & 2) && !(tcp[2] & 2)) {
        /* Neither truncated: the same answer and authority records, glue aside. */
        CHECK(memcmp(udp + 2, tcp + 2, 8) == 0);
    }
    if (size <= 4096) {
        load(data, size);
    }
    return 0;
}
