/*
 * codec/dns/: the zone loader (every type, directives, parentheses, errors naming
 * their line), every kind of answer from tests/codec/dns_test.zone checked record by
 * record through our own parser, name compression, EDNS sizes and truncation, and hostile
 * packets: malformed names, lying counts, every prefix of valid queries, and a seeded
 * mutation loop whose answers must all parse back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/dns.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------
 * Helpers
 */

static eddy_dns_zone_t *zone; /* dns_test.zone, loaded by the group setup */

static int load_test_zone(void **state)
{
    char err[256];
    int rc = eddy_dns_zone_load(&zone, DNS_TEST_ZONE, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "%s\n", err);
    }
    return rc;
}

static int free_test_zone(void **state)
{
    eddy_dns_zone_free(zone);
    return 0;
}

/* A text form of the rdata of rr (in msg), as a zone file would write it. */
static void render_rdata(const eddy_dns_msg_t *m, const eddy_dns_rr_t *rr, char *out, size_t cap)
{
    uint8_t name[EDDY_DNS_NAME_MAX];
    char t1[1024], t2[1024];
    size_t nl, next;
    const uint8_t *rd = rr->rdata;
    switch (rr->type) {
    case EDDY_DNS_TYPE_A:
    case EDDY_DNS_TYPE_AAAA:
        inet_ntop(rr->type == EDDY_DNS_TYPE_A ? AF_INET : AF_INET6, rd, out, (socklen_t)cap);
        return;
    case EDDY_DNS_TYPE_NS:
    case EDDY_DNS_TYPE_CNAME:
        assert_int_equal(eddy_dns_name_unpack(m->bytes, m->len, rr->rdata_off, name, &nl, NULL), 0);
        assert_true(eddy_dns_name_to_text(name, nl, out, cap) > 0);
        return;
    case EDDY_DNS_TYPE_MX:
        assert_int_equal(eddy_dns_name_unpack(m->bytes, m->len, rr->rdata_off + 2, name, &nl, NULL),
                         0);
        assert_true(eddy_dns_name_to_text(name, nl, t1, sizeof(t1)) > 0);
        snprintf(out, cap, "%u %s", rd[0] << 8 | rd[1], t1);
        return;
    case EDDY_DNS_TYPE_SOA: {
        assert_int_equal(eddy_dns_name_unpack(m->bytes, m->len, rr->rdata_off, name, &nl, &next),
                         0);
        assert_true(eddy_dns_name_to_text(name, nl, t1, sizeof(t1)) > 0);
        assert_int_equal(eddy_dns_name_unpack(m->bytes, m->len, next, name, &nl, &next), 0);
        assert_true(eddy_dns_name_to_text(name, nl, t2, sizeof(t2)) > 0);
        const uint8_t *p = m->bytes + next;
        uint32_t v[5];
        for (int k = 0; k < 5; k++) {
            v[k] = (uint32_t)p[4 * k] << 24 | (uint32_t)p[4 * k + 1] << 16 |
                   (uint32_t)p[4 * k + 2] << 8 | p[4 * k + 3];
        }
        int w = snprintf(out, cap, "%s %s %u %u %u %u %u", t1, t2, v[0], v[1], v[2], v[3], v[4]);
        assert_true(w > 0 && (size_t)w < cap);
        return;
    }
    case EDDY_DNS_TYPE_TXT: {
        size_t n = 0;
        for (size_t i = 0; i < rr->rdlen;) {
            size_t l = rd[i++];
            n += (size_t)snprintf(out + n, cap - n, "%s\"", n ? " " : "");
            for (size_t k = 0; k < l; k++, i++) {
                uint8_t c = rd[i];
                if (c == '"' || c == '\\') {
                    n += (size_t)snprintf(out + n, cap - n, "\\%c", c);
                } else if (c < ' ' || c > '~') {
                    n += (size_t)snprintf(out + n, cap - n, "\\%03u", c);
                } else {
                    n += (size_t)snprintf(out + n, cap - n, "%c", c);
                }
            }
            n += (size_t)snprintf(out + n, cap - n, "\"");
        }
        return;
    }
    case EDDY_DNS_TYPE_OPT:
        snprintf(out, cap, "udp=%u version=%u do=%u", rr->rclass, (rr->ttl >> 16) & 255,
                 (rr->ttl >> 15) & 1);
        return;
    default:
        snprintf(out, cap, "\\# %u", rr->rdlen);
        return;
    }
}

/* The answer in msg as text: "RCODE flags" then one line per record, "an name ttl TYPE
 * rdata" (OPT: "ar OPT udp=..."). Fails the test when msg does not parse. */
static void render(const uint8_t *msg, size_t len, char *out, size_t cap)
{
    eddy_dns_msg_t m;
    assert_int_equal(eddy_dns_msg_parse(&m, msg, len), 0);
    size_t n = (size_t)snprintf(
        out, cap, "%s%s%s%s%s", eddy_dns_rcode_name(m.rcode),
        m.flags & EDDY_DNS_FLAG_AA ? " aa" : "", m.flags & EDDY_DNS_FLAG_TC ? " tc" : "",
        m.flags & EDDY_DNS_FLAG_RD ? " rd" : "", m.flags & EDDY_DNS_FLAG_RA ? " ra" : "");
    eddy_dns_cursor_t c = {0};
    eddy_dns_rr_t rr;
    int rc;
    while ((rc = eddy_dns_msg_next_rr(&m, &c, &rr)) == 1) {
        static const char *const sections[] = {"", "an", "ns", "ar"};
        char name[1024], rdata[2048];
        assert_true(eddy_dns_name_to_text(rr.name, rr.name_len, name, sizeof(name)) > 0);
        render_rdata(&m, &rr, rdata, sizeof(rdata));
        if (rr.type == EDDY_DNS_TYPE_OPT) {
            n += (size_t)snprintf(out + n, cap - n, "\n%s OPT %s", sections[rr.section], rdata);
        } else {
            assert_int_equal(rr.rclass, EDDY_DNS_CLASS_IN);
            n += (size_t)snprintf(out + n, cap - n, "\n%s %s %u %s %s", sections[rr.section], name,
                                  rr.ttl, eddy_dns_type_name(rr.type), rdata);
        }
        assert_true(n < cap);
    }
    assert_int_equal(rc, 0);
}

/* What every answer to the query must be: parseable, the ID, opcode, RD echoed, QR set,
 * RA clear, within limit, the question copied byte for byte when it has one. */
static void check_answer(const uint8_t *q, size_t qlen, const uint8_t *a, size_t alen, size_t limit)
{
    eddy_dns_msg_t m, qm;
    assert_int_equal(eddy_dns_msg_parse(&m, a, alen), 0);
    assert_true(alen <= limit);
    assert_memory_equal(a, q, 2);
    assert_true(m.flags & EDDY_DNS_FLAG_QR);
    assert_false(m.flags & EDDY_DNS_FLAG_RA);
    uint16_t qflags = (uint16_t)(q[2] << 8 | q[3]);
    assert_int_equal(m.flags & (0x7800 | EDDY_DNS_FLAG_RD), qflags & (0x7800 | EDDY_DNS_FLAG_RD));
    if (m.qdcount == 1) {
        assert_int_equal(eddy_dns_msg_parse(&qm, q, qlen), 0);
        assert_int_equal(m.qname_len, qm.qname_len);
        assert_memory_equal(m.qname, qm.qname, m.qname_len);
        assert_int_equal(m.qtype, qm.qtype);
        assert_int_equal(m.qclass, qm.qclass);
    } else {
        /* FORMERR or NOTIMP: the header, and our OPT when the query was an EDNS one. */
        assert_int_equal(m.qdcount, 0);
        assert_int_equal(alen, EDDY_DNS_HEADER_LEN + (m.has_opt ? 11u : 0u));
        if (m.has_opt) {
            assert_int_equal(eddy_dns_msg_parse(&qm, q, qlen), 0);
            assert_true(qm.has_opt);
        }
    }
}

/* Ask zone z for name/type (udp_size 0: no OPT) at max_len; the answer as render() writes
 * it into text. */
static void ask_zone(const eddy_dns_zone_t *z, const char *name, uint16_t type, uint16_t udp_size,
                     size_t max_len, char *text, size_t cap)
{
    uint8_t q[512], a[65535];
    size_t qlen, alen;
    assert_int_equal(eddy_dns_query_write(q, sizeof(q), &qlen, 0x1234, name, type, udp_size), 0);
    assert_int_equal(eddy_dns_answer(z, q, qlen, max_len, a, sizeof(a), &alen), 0);
    size_t limit = max_len < 512 ? 512 : max_len;
    limit = udp_size > limit ? udp_size : limit;
    check_answer(q, qlen, a, alen, limit);
    render(a, alen, text, cap);
}

static void expect(const char *name, uint16_t type, const char *want)
{
    char text[8192];
    ask_zone(zone, name, type, 0, EDDY_DNS_UDP_MAX, text, sizeof(text));
    assert_string_equal(text, want);
}

/* The answer to the raw query q, rendered. */
static void answer_raw(const uint8_t *q, size_t qlen, char *text, size_t cap)
{
    uint8_t a[4096];
    size_t alen;
    assert_int_equal(eddy_dns_answer(zone, q, qlen, 512, a, sizeof(a), &alen), 0);
    check_answer(q, qlen, a, alen, 512);
    render(a, alen, text, cap);
}

static void expect_raw(const uint8_t *q, size_t qlen, const char *want)
{
    char text[4096];
    answer_raw(q, qlen, text, sizeof(text));
    assert_string_equal(text, want);
}

/* Load text as a zone, expecting it to fail with a message containing want. */
static void expect_zone_error(const char *text, const char *want)
{
    eddy_dns_zone_t *z = (eddy_dns_zone_t *)1;
    char err[256];
    assert_int_equal(eddy_dns_zone_parse(&z, text, strlen(text), "example.test", err, sizeof(err)),
                     EDDY_EDECODE);
    assert_null(z);
    if (strstr(err, want) == NULL) {
        fail_msg("error \"%s\" does not contain \"%s\"", err, want);
    }
}

#define SOA_LINE "@ 3600 IN SOA ns1 host 1 2 3 4 5\n"

/* ---------------------------------------------------------------------------------------
 * Zones
 */

static void test_dns_zone_loads_the_test_zone(void **state)
{
    size_t n;
    const uint8_t *origin = eddy_dns_zone_origin(zone, &n);
    assert_int_equal(n, 14);
    assert_memory_equal(origin, "\7example\4test", 14);
    /* 8 at the apex, 7 at ns1, ns2, mail, host, 6 CNAMEs, 10 c*, 3 txt and deep, 40 many */
    assert_int_equal(eddy_dns_zone_record_count(zone), 8 + 7 + 6 + 10 + 3 + 40);
}

static void test_dns_zone_reads_directives_parentheses_and_omitted_fields(void **state)
{
    const char *text = "$TTL 1h\n"
                       "@ IN SOA ns1 Hostmaster ( 1 ; serial\n"
                       "   2 3 4 ; times\n"
                       "   5 )\n"
                       "  NS ns1.EXAMPLE.test.\n" /* omitted owner, TTL and class */
                       "ns1 IN 60 A 192.0.2.1\n"  /* class before TTL */
                       "    AAAA 2001:db8::1\n"
                       "$ORIGIN sub\n" /* relative: sub.example.test. */
                       "x 1d A 192.0.2.2\n"
                       "@ TXT \"at sub\"\n"
                       "$ORIGIN example.test.\n"
                       "y.example.test. 1w2d MX 5 x.sub\n";
    eddy_dns_zone_t *z;
    char err[256] = "";
    assert_int_equal(eddy_dns_zone_parse(&z, text, strlen(text), "Example.Test", err, sizeof(err)),
                     0);
    assert_int_equal(eddy_dns_zone_record_count(z), 7);
    char got[4096];
    ask_zone(z, "example.test", EDDY_DNS_TYPE_SOA, 0, 512, got, sizeof(got));
    assert_string_equal(got, "NOERROR aa\n"
                             "an example.test. 3600 SOA ns1.example.test. hostmaster.example.test."
                             " 1 2 3 4 5");
    ask_zone(z, "example.test", EDDY_DNS_TYPE_NS, 0, 512, got, sizeof(got));
    assert_string_equal(got, "NOERROR aa\n"
                             "an example.test. 3600 NS ns1.example.test.\n"
                             "ar ns1.example.test. 60 A 192.0.2.1\n"
                             "ar ns1.example.test. 3600 AAAA 2001:db8::1"); /* $TTL */
    ask_zone(z, "sub.example.test", EDDY_DNS_TYPE_TXT, 0, 512, got, sizeof(got));
    assert_string_equal(got, "NOERROR aa\nan sub.example.test. 3600 TXT \"at sub\"");
    ask_zone(z, "y.example.test", EDDY_DNS_TYPE_MX, 0, 512, got, sizeof(got));
    assert_string_equal(got, "NOERROR aa\n"
                             "an y.example.test. 777600 MX 5 x.sub.example.test.\n"
                             "ar x.sub.example.test. 86400 A 192.0.2.2");
    eddy_dns_zone_free(z);
}

static void test_dns_zone_stores_a_duplicate_once(void **state)
{
    const char *text = SOA_LINE "a A 192.0.2.1\na A 192.0.2.1\na A 192.0.2.2\n";
    eddy_dns_zone_t *z;
    assert_int_equal(eddy_dns_zone_parse(&z, text, strlen(text), "example.test.", NULL, 0), 0);
    assert_int_equal(eddy_dns_zone_record_count(z), 3);
    eddy_dns_zone_free(z);
}

static void test_dns_zone_errors_name_their_line(void **state)
{
    expect_zone_error(SOA_LINE "a 1x A 192.0.2.1\n", "line 2: bad TTL \"1x\"");
    expect_zone_error(SOA_LINE "\n\na A 192.0.2.300\n", "line 4: bad A address \"192.0.2.300\"");
    expect_zone_error(SOA_LINE "a AAAA 2001:db8::g\n", "line 2: bad AAAA address");
    expect_zone_error(SOA_LINE "a SRV 0 0 1 b\n", "line 2: unknown or unsupported record type");
    expect_zone_error(SOA_LINE "a CH TXT x\n", "line 2: class CH not supported");
    expect_zone_error(SOA_LINE "a A\n", "line 2: A takes 1 field, not 0");
    expect_zone_error(SOA_LINE "a MX x b\n", "line 2: bad MX preference \"x\"");
    expect_zone_error(SOA_LINE "a MX 10\n", "line 2: MX takes 2 fields, not 1");
    expect_zone_error(SOA_LINE "a TXT \"unterminated\n", "line 2: unterminated quoted string");
    expect_zone_error(SOA_LINE "a TXT \"\\999\"\n", "line 2: bad TXT string");
    expect_zone_error(SOA_LINE "a ( A\n 192.0.2.1\n", "line 2: '(' without ')'");
    expect_zone_error(SOA_LINE "a A 192.0.2.1 )\n", "line 2: ')' without '('");
    expect_zone_error(SOA_LINE "$INCLUDE other\n", "line 2: directive $INCLUDE not supported");
    expect_zone_error(SOA_LINE "a..b A 192.0.2.1\n", "line 2: bad name \"a..b\"");
    expect_zone_error(SOA_LINE "a CNAME b\na A 192.0.2.1\n",
                      "line 3: CNAME and other data at a.example.test.");
    expect_zone_error(SOA_LINE "sub NS ns.sub\n",
                      "line 2: NS at sub.example.test., below the apex");
    expect_zone_error(SOA_LINE "x.example.net. A 192.0.2.1\n",
                      "line 2: x.example.net. is outside the zone example.test.");
    expect_zone_error(SOA_LINE "@ SOA ns1 host 1 2 3 4 5\n", "line 2: a second SOA record");
    expect_zone_error("a 60 A 192.0.2.1\n", "no SOA record");
    expect_zone_error(SOA_LINE "@ SOA ns1 host x 2 3 4 5\n", "line 2: bad SOA serial \"x\"");
    expect_zone_error("@ IN SOA ns1 host 1 2 3 4 5\n", "line 1: no TTL, and no $TTL before");
    expect_zone_error("  60 A 192.0.2.1\n", "line 1: no owner name, and none before");
    /* A label of 64 bytes. */
    expect_zone_error(SOA_LINE "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa A "
                               "192.0.2.1\n",
                      "line 2: bad name");

    eddy_dns_zone_t *z;
    char err[256];
    const char *rel = "a 60 A 192.0.2.1\n";
    assert_int_equal(eddy_dns_zone_parse(&z, rel, strlen(rel), NULL, err, sizeof(err)),
                     EDDY_EDECODE);
    assert_string_equal(err, "line 1: relative name \"a\" with no origin ($ORIGIN)");
    const char nul[] = SOA_LINE "a 60 A 192.0.2.1\0junk\n";
    assert_int_equal(
        eddy_dns_zone_parse(&z, nul, sizeof(nul) - 1, "example.test", err, sizeof(err)),
        EDDY_EDECODE);
    assert_string_equal(err, "line 2: a NUL byte");
    const char *quoted_lines = SOA_LINE "a TXT \"x\\\ny\"\n";
    assert_int_equal(eddy_dns_zone_parse(&z, quoted_lines, strlen(quoted_lines), "example.test",
                                         err, sizeof(err)),
                     EDDY_EDECODE);
    assert_string_equal(err, "line 2: unterminated quoted string");
    assert_int_equal(eddy_dns_zone_load(&z, "/nonexistent/zone", err, sizeof(err)), EDDY_ENOENT);
    assert_null(z);
}

static void test_dns_zone_load_names_the_file(void **state)
{
    char path[] = "/tmp/eddy-dns-zone-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "$ORIGIN example.test.\n" SOA_LINE "\nbad 60 A nope\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    eddy_dns_zone_t *z;
    char err[256], want[300];
    assert_int_equal(eddy_dns_zone_load(&z, path, err, sizeof(err)), EDDY_EDECODE);
    snprintf(want, sizeof(want), "%s:4: bad A address \"nope\"", path);
    assert_string_equal(err, want);
    unlink(path);
}

/* ---------------------------------------------------------------------------------------
 * Answers
 */

static void test_dns_answers_a_and_aaaa(void **state)
{
    expect("ns2.example.test", EDDY_DNS_TYPE_A,
           "NOERROR aa\nan ns2.example.test. 600 A 192.0.2.54");
    expect("mail.example.test.", EDDY_DNS_TYPE_AAAA,
           "NOERROR aa\nan mail.example.test. 3600 AAAA 2001:db8::25");
}

static void test_dns_answers_mx_with_glue(void **state)
{
    expect("example.test", EDDY_DNS_TYPE_MX,
           "NOERROR aa\n"
           "an example.test. 3600 MX 10 mail.example.test.\n"
           "an example.test. 3600 MX 20 mail.example.net.\n"
           "ar mail.example.test. 3600 A 192.0.2.25\n"
           "ar mail.example.test. 3600 AAAA 2001:db8::25");
}

static void test_dns_answers_ns_with_glue(void **state)
{
    expect("example.test", EDDY_DNS_TYPE_NS,
           "NOERROR aa\n"
           "an example.test. 3600 NS ns1.example.test.\n"
           "an example.test. 3600 NS ns2.example.test.\n"
           "ar ns1.example.test. 3600 A 192.0.2.53\n"
           "ar ns1.example.test. 3600 AAAA 2001:db8::53\n"
           "ar ns2.example.test. 600 A 192.0.2.54");
}

static void test_dns_answers_soa_and_txt(void **state)
{
    expect("example.test", EDDY_DNS_TYPE_SOA,
           "NOERROR aa\n"
           "an example.test. 3600 SOA ns1.example.test. hostmaster.example.test. 2024010101 "
           "7200 3600 1209600 300");
    expect("txt.example.test", EDDY_DNS_TYPE_TXT,
           "NOERROR aa\n"
           "an txt.example.test. 3600 TXT \"first string\" \"second \\\"quoted\\\" string\" "
           "\"back\\\\slash\" \"ABC\"\n"
           "an txt.example.test. 3600 TXT \"unquoted\"");
}

static void test_dns_answers_any_with_every_record(void **state)
{
    expect("mail.example.test", EDDY_DNS_TYPE_ANY,
           "NOERROR aa\n"
           "an mail.example.test. 3600 A 192.0.2.25\n"
           "an mail.example.test. 3600 AAAA 2001:db8::25");
}

static void test_dns_follows_a_cname_chain(void **state)
{
    expect("www.example.test", EDDY_DNS_TYPE_A,
           "NOERROR aa\n"
           "an www.example.test. 3600 CNAME web.example.test.\n"
           "an web.example.test. 3600 CNAME host.example.test.\n"
           "an host.example.test. 3600 A 192.0.2.80");
    /* Asked for the CNAME itself: no chase. */
    expect("www.example.test", EDDY_DNS_TYPE_CNAME,
           "NOERROR aa\nan www.example.test. 3600 CNAME web.example.test.");
    /* A type the target lacks: NODATA at the end of the chain. */
    expect("web.example.test", EDDY_DNS_TYPE_MX,
           "NOERROR aa\n"
           "an web.example.test. 3600 CNAME host.example.test.\n"
           "ns example.test. 300 SOA ns1.example.test. hostmaster.example.test. 2024010101 "
           "7200 3600 1209600 300");
}

static void test_dns_cname_chains_stop_out_of_zone_at_loops_and_at_eight(void **state)
{
    expect("alias-out.example.test", EDDY_DNS_TYPE_A,
           "NOERROR aa\nan alias-out.example.test. 3600 CNAME www.example.net.");
    expect("loop1.example.test", EDDY_DNS_TYPE_A,
           "NOERROR aa\n"
           "an loop1.example.test. 3600 CNAME loop2.example.test.\n"
           "an loop2.example.test. 3600 CNAME loop1.example.test.");
    expect("dangling.example.test", EDDY_DNS_TYPE_A,
           "NXDOMAIN aa\n"
           "an dangling.example.test. 3600 CNAME nowhere.example.test.\n"
           "ns example.test. 300 SOA ns1.example.test. hostmaster.example.test. 2024010101 "
           "7200 3600 1209600 300");
    char text[8192];
    ask_zone(zone, "c1.example.test", EDDY_DNS_TYPE_A, 0, 512, text, sizeof(text));
    assert_non_null(strstr(text, "an c8.example.test. 3600 CNAME c9.example.test."));
    assert_null(strstr(text, "c9.example.test. 3600 CNAME"));
    ask_zone(zone, "c3.example.test", EDDY_DNS_TYPE_A, 0, 512, text, sizeof(text));
    assert_non_null(strstr(text, "an c10.example.test. 3600 A 192.0.2.10"));
}

static void test_dns_answers_nxdomain_and_nodata_with_the_soa(void **state)
{
    const char *soa = "ns example.test. 300 SOA ns1.example.test. hostmaster.example.test. "
                      "2024010101 7200 3600 1209600 300";
    char want[512];
    snprintf(want, sizeof(want), "NXDOMAIN aa\n%s", soa);
    expect("nope.example.test", EDDY_DNS_TYPE_A, want);
    expect("x.a.b.c.deep.example.test", EDDY_DNS_TYPE_A, want);
    snprintf(want, sizeof(want), "NOERROR aa\n%s", soa);
    expect("host.example.test", EDDY_DNS_TYPE_MX, want);
    /* Empty non-terminals exist: NODATA, for every type, ANY included. */
    expect("b.c.deep.example.test", EDDY_DNS_TYPE_A, want);
    expect("deep.example.test", EDDY_DNS_TYPE_ANY, want);
    expect("a.b.c.deep.example.test", EDDY_DNS_TYPE_A,
           "NOERROR aa\nan a.b.c.deep.example.test. 3600 A 192.0.2.99");
}

static void test_dns_refuses_other_zones_and_classes(void **state)
{
    expect("example.net", EDDY_DNS_TYPE_A, "REFUSED");
    expect("test", EDDY_DNS_TYPE_SOA, "REFUSED");
    expect(".", EDDY_DNS_TYPE_NS, "REFUSED");
    expect("xexample.test", EDDY_DNS_TYPE_A, "REFUSED");
    uint8_t q[512];
    size_t qlen;
    assert_int_equal(eddy_dns_query_write(q, sizeof(q), &qlen, 7, "example.test", 1, 0), 0);
    q[2] |= 1; /* RD: copied, and RA stays clear */
    q[qlen - 1] = EDDY_DNS_CLASS_CH;
    expect_raw(q, qlen, "REFUSED rd");
    q[qlen - 1] = EDDY_DNS_CLASS_ANY;
    expect_raw(q, qlen, "NOERROR aa rd\nan example.test. 3600 A 192.0.2.1");
}

static void test_dns_notimp_for_other_opcodes_and_transfers(void **state)
{
    uint8_t q[512];
    size_t qlen;
    assert_int_equal(eddy_dns_query_write(q, sizeof(q), &qlen, 7, "example.test", 1, 0), 0);
    q[2] = 4 << 3; /* NOTIFY */
    expect_raw(q, qlen, "NOTIMP");
    q[2] = 2 << 3 | 1; /* STATUS, RD */
    expect_raw(q, qlen, "NOTIMP rd");
    expect("example.test", EDDY_DNS_TYPE_AXFR, "NOTIMP");
    expect("example.test", EDDY_DNS_TYPE_IXFR, "NOTIMP");
}

static void test_dns_matches_names_ignoring_case_and_echoes_the_question(void **state)
{
    uint8_t q[512], a[512];
    size_t qlen, alen;
    assert_int_equal(eddy_dns_query_write(q, sizeof(q), &qlen, 99, "HoSt.ExAmPlE.tEsT", 1, 0), 0);
    assert_int_equal(eddy_dns_answer(zone, q, qlen, 512, a, sizeof(a), &alen), 0);
    check_answer(q, qlen, a, alen, 512); /* the question byte for byte, case kept */
    assert_memory_equal(a + 12, "\4HoSt\7ExAmPlE\4tEsT", 19);
    /* The owner is a pointer to the question, so it reads in the client's case. */
    assert_int_equal(a[qlen], 0xC0);
    assert_int_equal(a[qlen + 1], 12);
    char text[512];
    render(a, alen, text, sizeof(text));
    assert_string_equal(text, "NOERROR aa\nan HoSt.ExAmPlE.tEsT. 3600 A 192.0.2.80");
}

/* ---------------------------------------------------------------------------------------
 * Compression, EDNS, truncation
 */

/* Every compression pointer in the records of the answer points before itself. */
static size_t uncompressed_size(const uint8_t *a, size_t alen)
{
    eddy_dns_msg_t m;
    assert_int_equal(eddy_dns_msg_parse(&m, a, alen), 0);
    size_t n = EDDY_DNS_HEADER_LEN + m.qname_len + 4;
    eddy_dns_cursor_t c = {0};
    eddy_dns_rr_t rr;
    while (eddy_dns_msg_next_rr(&m, &c, &rr) == 1) {
        n += rr.name_len + 10 + rr.rdlen;
        uint8_t name[EDDY_DNS_NAME_MAX];
        size_t nl, next;
        if (rr.type == EDDY_DNS_TYPE_NS || rr.type == EDDY_DNS_TYPE_CNAME) {
            assert_int_equal(eddy_dns_name_unpack(a, alen, rr.rdata_off, name, &nl, &next), 0);
            n += nl - rr.rdlen;
        } else if (rr.type == EDDY_DNS_TYPE_MX) {
            assert_int_equal(eddy_dns_name_unpack(a, alen, rr.rdata_off + 2, name, &nl, &next), 0);
            n += nl + 2 - rr.rdlen;
        }
    }
    return n;
}

static void test_dns_compresses_names_backward(void **state)
{
    uint8_t q[512], a[4096];
    size_t qlen, alen;
    assert_int_equal(eddy_dns_query_write(q, sizeof(q), &qlen, 1, "example.test", 2, 0), 0);
    assert_int_equal(eddy_dns_answer(zone, q, qlen, 512, a, sizeof(a), &alen), 0);
    check_answer(q, qlen, a, alen, 512);
    /* Two NS, three glue records: every owner and target is a pointer or ends in one. */
    size_t full = uncompressed_size(a, alen);
    assert_true(alen < full);
    assert_int_equal(a[qlen], 0xC0); /* the first owner: the question */
    assert_int_equal(a[qlen + 1], 12);
    /* Walk the bytes after the question: each pointer's target precedes it. */
    eddy_dns_msg_t m;
    assert_int_equal(eddy_dns_msg_parse(&m, a, alen), 0);
    eddy_dns_cursor_t c = {0};
    eddy_dns_rr_t rr;
    size_t pointers = 0, off = qlen;
    while (eddy_dns_msg_next_rr(&m, &c, &rr) == 1) {
        for (size_t p = off; p < c.off; p++) {
            if ((a[p] & 0xC0) == 0xC0 && p + 1 < c.off && p < rr.rdata_off - 10) {
                assert_true(((size_t)(a[p] & 0x3F) << 8 | a[p + 1]) < p);
                pointers++;
                break;
            }
        }
        off = c.off;
    }
    assert_int_equal(pointers, 5); /* every owner */
    /* The many A records: 40 owners of 2 bytes instead of 19. */
    char text[8192];
    assert_int_equal(eddy_dns_query_write(q, sizeof(q), &qlen, 1, "many.example.test", 1, 0), 0);
    assert_int_equal(eddy_dns_answer(zone, q, qlen, 65535, a, sizeof(a), &alen), 0);
    render(a, alen, text, sizeof(text));
    assert_int_equal(alen, qlen + 40 * (2 + 10 + 4));
    assert_int_equal(uncompressed_size(a, alen), qlen + 40 * (19 + 10 + 4));
}

static void test_dns_truncates_over_udp_and_fits_over_tcp(void **state)
{
    char text[8192];
    ask_zone(zone, "many.example.test", EDDY_DNS_TYPE_A, 0, EDDY_DNS_UDP_MAX, text, sizeof(text));
    assert_string_equal(text, "NOERROR aa tc");
    ask_zone(zone, "many.example.test", EDDY_DNS_TYPE_A, 0, EDDY_DNS_TCP_MAX, text, sizeof(text));
    assert_non_null(strstr(text, "NOERROR aa\nan many.example.test. 3600 A 192.0.2.100\n"));
    assert_non_null(strstr(text, "an many.example.test. 3600 A 192.0.2.139"));
    /* The caller's buffer caps the size too. */
    uint8_t q[512], a[600];
    size_t qlen, alen;
    assert_int_equal(eddy_dns_query_write(q, sizeof(q), &qlen, 1, "many.example.test", 1, 0), 0);
    assert_int_equal(eddy_dns_answer(zone, q, qlen, 65535, a, sizeof(a), &alen), 0);
    assert_true(a[2] & 2); /* TC */
    assert_int_equal(alen, qlen);
    assert_int_equal(eddy_dns_answer(zone, q, qlen, 65535, a, 511, &alen), EDDY_EINVAL);
}

static void test_dns_edns_raises_the_udp_limit_and_is_answered_with_opt(void **state)
{
    char text[8192];
    /* 4096 from the client: the answer (about 700 bytes) fits. */
    ask_zone(zone, "many.example.test", EDDY_DNS_TYPE_A, 4096, EDDY_DNS_UDP_MAX, text,
             sizeof(text));
    assert_non_null(strstr(text, "NOERROR aa\nan many.example.test."));
    assert_non_null(strstr(text, "\nar OPT udp=1232 version=0 do=0"));
    /* 600: not enough; TC, and the OPT still there. */
    ask_zone(zone, "many.example.test", EDDY_DNS_TYPE_A, 600, EDDY_DNS_UDP_MAX, text, sizeof(text));
    assert_string_equal(text, "NOERROR aa tc\nar OPT udp=1232 version=0 do=0");
    /* Below 512 counts as 512. */
    ask_zone(zone, "ns2.example.test", EDDY_DNS_TYPE_A, 100, EDDY_DNS_UDP_MAX, text, sizeof(text));
    assert_string_equal(text, "NOERROR aa\nan ns2.example.test. 600 A 192.0.2.54\n"
                              "ar OPT udp=1232 version=0 do=0");
    /* The DO bit is copied (RFC 3225 3), though nothing is signed. */
    uint8_t q[512], a[4096];
    size_t qlen, alen;
    assert_int_equal(eddy_dns_query_write(q, sizeof(q), &qlen, 5, "ns2.example.test", 1, 1232), 0);
    q[qlen - 4] = 0x80; /* DO */
    assert_int_equal(eddy_dns_answer(zone, q, qlen, 512, a, sizeof(a), &alen), 0);
    render(a, alen, text, sizeof(text));
    assert_string_equal(text, "NOERROR aa\nan ns2.example.test. 600 A 192.0.2.54\n"
                              "ar OPT udp=1232 version=0 do=1");
}

static void test_dns_badvers_for_edns_versions_above_zero(void **state)
{
    uint8_t q[512];
    size_t qlen;
    assert_int_equal(eddy_dns_query_write(q, sizeof(q), &qlen, 5, "example.test", 1, 1232), 0);
    q[qlen - 5] = 1; /* version 1 */
    expect_raw(q, qlen, "BADVERS\nar OPT udp=1232 version=0 do=0");
}

/* ---------------------------------------------------------------------------------------
 * Hostile packets
 */

/* The answer's rcode; also checks that nothing but the header came back for FORMERR. */
static int rcode_of(const uint8_t *q, size_t qlen)
{
    uint8_t a[4096];
    size_t alen;
    int rc = eddy_dns_answer(zone, q, qlen, 512, a, sizeof(a), &alen);
    if (rc != 0) {
        return rc;
    }
    check_answer(q, qlen, a, alen, 512);
    eddy_dns_msg_t m;
    assert_int_equal(eddy_dns_msg_parse(&m, a, alen), 0);
    return m.rcode;
}

#define HDR(qd, an, ns, ar) 0xAB, 0xCD, 0x01, 0x00, 0, qd, 0, an, 0, ns, 0, ar

static void test_dns_formerr_for_malformed_queries(void **state)
{
    static const uint8_t no_question[] = {HDR(0, 0, 0, 0)};
    static const uint8_t two_questions[] = {
        HDR(2, 0, 0, 0), 1, 'a', 0, 0, 1, 0, 1, 0xC0, 12, 0, 1, 0, 1};
    static const uint8_t pointer_loop[] = {HDR(1, 0, 0, 0), 1, 'a', 0xC0, 14, 0, 1, 0, 1};
    static const uint8_t pointer_self[] = {HDR(1, 0, 0, 0), 0xC0, 12, 0, 1, 0, 1};
    static const uint8_t pointer_forward[] = {HDR(1, 0, 0, 0), 0xC0, 18, 0, 1, 0, 1, 0};
    static const uint8_t pointer_out[] = {HDR(1, 0, 0, 0), 0xFF, 0xFF, 0, 1, 0, 1};
    static const uint8_t pointer_header[] = {HDR(1, 0, 0, 0), 0xC0, 2, 0, 1, 0, 1};
    static const uint8_t label_past_end[] = {HDR(1, 0, 0, 0), 9, 'a', 'b'};
    static const uint8_t label_type_01[] = {HDR(1, 0, 0, 0), 0x41, 'a', 0, 0, 1, 0, 1};
    static const uint8_t no_qtype[] = {HDR(1, 0, 0, 0), 1, 'a', 0, 0};
    static const uint8_t lying_ancount[] = {HDR(1, 5, 0, 0), 1, 'a', 0, 0, 1, 0, 1};
    static const uint8_t lying_arcount[] = {
        HDR(1, 0, 0, 0xff), 1, 'a', 0, 0, 1, 0, 1, 0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t rdlen_past_end[] = {
        HDR(1, 0, 0, 1), 1, 'a', 0, 0, 1, 0, 1, 0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 9, 1};
    static const uint8_t two_opts[] = {HDR(1, 0, 0, 2),
                                       1,
                                       'a',
                                       0,
                                       0,
                                       1,
                                       0,
                                       1,
                                       0,
                                       0,
                                       41,
                                       0x10,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       41,
                                       0x10,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0};
    static const uint8_t opt_in_answers[] = {
        HDR(1, 1, 0, 0), 1, 'a', 0, 0, 1, 0, 1, 0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t opt_not_root[] = {
        HDR(1, 0, 0, 1), 1, 'a', 0, 0, 1, 0, 1, 0xC0, 12, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t trailing[] = {HDR(1, 0, 0, 0), 1, 'a', 0, 0, 1, 0, 1, 0};
    static const uint8_t qtype_opt[] = {HDR(1, 0, 0, 0), 1, 'a', 0, 0, 41, 0, 1};
    static const uint8_t bad_a_rdata[] = {
        HDR(1, 0, 0, 1), 1, 'a', 0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 3, 1, 2, 3};
    static const struct {
        const uint8_t *p;
        size_t n;
    } cases[] = {
#define CASE(x) {x, sizeof(x)}
        CASE(no_question),     CASE(two_questions), CASE(pointer_loop),   CASE(pointer_self),
        CASE(pointer_forward), CASE(pointer_out),   CASE(pointer_header), CASE(label_past_end),
        CASE(label_type_01),   CASE(no_qtype),      CASE(lying_ancount),  CASE(lying_arcount),
        CASE(rdlen_past_end),  CASE(two_opts),      CASE(opt_in_answers), CASE(opt_not_root),
        CASE(trailing),        CASE(qtype_opt),     CASE(bad_a_rdata),
#undef CASE
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (rcode_of(cases[i].p, cases[i].n) != EDDY_DNS_FORMERR) {
            fail_msg("case %zu: not FORMERR", i);
        }
    }
}

static void test_dns_formerr_for_names_over_255_bytes(void **state)
{
    /* 4 labels of 63 bytes: 4 * 64 + 1 = 257 bytes. */
    uint8_t q[400];
    const uint8_t hdr[] = {HDR(1, 0, 0, 0)};
    memcpy(q, hdr, sizeof(hdr));
    size_t n = sizeof(hdr);
    for (int l = 0; l < 4; l++) {
        q[n++] = 63;
        memset(q + n, 'a', 63);
        n += 63;
    }
    q[n++] = 0;
    q[n++] = 0, q[n++] = 1, q[n++] = 0, q[n++] = 1;
    assert_int_equal(rcode_of(q, n), EDDY_DNS_FORMERR);
    /* The same through pointers: a 251-byte name, then "\3abc" + a pointer to it. */
    n = sizeof(hdr);
    for (int l = 0; l < 3; l++) {
        q[n++] = 63;
        memset(q + n, 'a', 63);
        n += 63;
    }
    q[n++] = 57;
    memset(q + n, 'b', 57);
    n += 57;
    q[n++] = 0; /* 251 bytes */
    q[n++] = 0, q[n++] = 1, q[n++] = 0, q[n++] = 1;
    q[5] = 2;
    q[n++] = 5, memcpy(q + n, "abcde", 5), n += 5;
    q[n++] = 0xC0, q[n++] = 12;
    q[n++] = 0, q[n++] = 1, q[n++] = 0, q[n++] = 1;
    uint8_t name[EDDY_DNS_NAME_MAX];
    size_t nl;
    assert_int_equal(eddy_dns_name_unpack(q, n, 12, name, &nl, NULL), 0);
    assert_int_equal(nl, 251);
    assert_int_equal(eddy_dns_name_unpack(q, n, 12 + 250 + 4, name, &nl, NULL), EDDY_EDECODE);
    assert_int_equal(rcode_of(q, n), EDDY_DNS_FORMERR);
}

static void test_dns_drops_responses_and_headerless_packets(void **state)
{
    uint8_t q[512], a[512];
    size_t qlen, alen = 77;
    assert_int_equal(eddy_dns_query_write(q, sizeof(q), &qlen, 1, "example.test", 1, 0), 0);
    q[2] |= 0x80; /* QR */
    assert_int_equal(eddy_dns_answer(zone, q, qlen, 512, a, sizeof(a), &alen), EDDY_ENOTSUP);
    for (size_t n = 0; n < 12; n++) {
        assert_int_equal(eddy_dns_answer(zone, q, n, 512, a, sizeof(a), &alen), EDDY_EDECODE);
    }
    assert_int_equal(alen, 77);
}

/* Queries of every kind, for the prefix and mutation loops. */
static size_t sample_queries(uint8_t q[][512], size_t *len)
{
    static const struct {
        const char *name;
        uint16_t type, udp;
    } asks[] = {
        {"example.test", EDDY_DNS_TYPE_SOA, 0},    {"example.test", EDDY_DNS_TYPE_NS, 1232},
        {"example.test", EDDY_DNS_TYPE_MX, 0},     {"www.example.test", EDDY_DNS_TYPE_A, 4096},
        {"many.example.test", EDDY_DNS_TYPE_A, 0}, {"txt.example.test", EDDY_DNS_TYPE_TXT, 0},
        {"nope.example.test", EDDY_DNS_TYPE_A, 0}, {"deep.example.test", EDDY_DNS_TYPE_ANY, 512},
        {"example.net", EDDY_DNS_TYPE_A, 0},       {"c1.example.test", EDDY_DNS_TYPE_AAAA, 1232},
    };
    size_t n = sizeof(asks) / sizeof(asks[0]);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(eddy_dns_query_write(q[i], 512, &len[i], (uint16_t)(0x5000 + i),
                                              asks[i].name, asks[i].type, asks[i].udp),
                         0);
    }
    return n;
}

static void test_dns_every_prefix_of_a_query_is_formerr_or_dropped(void **state)
{
    uint8_t q[16][512];
    size_t len[16];
    size_t n = sample_queries(q, len);
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < len[i]; k++) {
            int rc = rcode_of(q[i], k);
            assert_int_equal(rc, k < 12 ? EDDY_EDECODE : EDDY_DNS_FORMERR);
        }
        assert_true(rcode_of(q[i], len[i]) >= 0);
    }
}

static uint32_t next_random(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void test_dns_survives_mutated_queries(void **state)
{
    uint8_t q[16][512];
    size_t len[16];
    size_t nq = sample_queries(q, len);
    uint32_t seed = 20240101;
    for (int iter = 0; iter < 5000; iter++) {
        uint8_t p[600];
        size_t i = next_random(&seed) % nq, n = len[i];
        memcpy(p, q[i], n);
        int edits = 1 + (int)(next_random(&seed) % 4);
        for (int e = 0; e < edits; e++) {
            uint32_t r = next_random(&seed);
            size_t at = n > 0 ? r % n : 0;
            switch ((r >> 16) % 5) {
            case 0: /* a random byte */
                p[at] = (uint8_t)(r >> 8);
                break;
            case 1: /* a bit */
                p[at] ^= (uint8_t)(1u << ((r >> 8) % 8));
                break;
            case 2: /* a pointer */
                if (at + 1 < n) {
                    p[at] = (uint8_t)(0xC0 | ((r >> 8) & 1));
                    p[at + 1] = (uint8_t)(r >> 9);
                }
                break;
            case 3: /* cut */
                n = at;
                break;
            default: /* a byte inserted */
                if (n < sizeof(p) - 1) {
                    memmove(p + at + 1, p + at, n - at);
                    p[at] = (uint8_t)(r >> 8);
                    n++;
                }
                break;
            }
        }
        p[2] &= 0x7F; /* keep it a query, mostly, so that it is answered */
        if (iter % 7 == 0 && n > 2) {
            p[2] |= 0x80;
        }
        static const size_t limits[] = {512, 65535};
        for (size_t l = 0; l < 2; l++) {
            uint8_t a[4096];
            size_t alen;
            int rc = eddy_dns_answer(zone, p, n, limits[l], a, sizeof(a), &alen);
            if (rc != 0) {
                assert_true(n < 12 ? rc == EDDY_EDECODE : rc == EDDY_ENOTSUP);
                continue;
            }
            eddy_dns_msg_t m;
            size_t limit = limits[l];
            if (eddy_dns_msg_parse(&m, p, n) == 0 && m.has_opt && m.udp_size > limit) {
                limit = m.udp_size;
            }
            check_answer(p, n, a, alen, limit < sizeof(a) ? limit : sizeof(a));
            char text[16384];
            render(a, alen, text, sizeof(text));
        }
    }
}

/* The answer cache answers every query with the bytes a fresh answer has: names in any case,
 * with and without EDNS, UDP and TCP limits, truncated ones; repeats come from the cache. */
static void test_dns_cache_answers_as_fresh(void **state)
{
    (void)state;
    eddy_dns_cache_t *c = eddy_dns_cache_new(zone, 64);
    assert_non_null(c);
    static const char *names[] = {"www.example.test", "WwW.ExAmPlE.TeSt", "example.test",
                                  "EXAMPLE.TEST", "many.example.test", "nope.example.test",
                                  "NoPe.Example.Test", "mail.example.test", "out.of.zone"};
    static const uint16_t types[] = {EDDY_DNS_TYPE_A, EDDY_DNS_TYPE_AAAA, EDDY_DNS_TYPE_MX,
                                     EDDY_DNS_TYPE_SOA, EDDY_DNS_TYPE_TXT, EDDY_DNS_TYPE_ANY};
    static const uint16_t sizes[] = {0, 512, 1232, 4096};
    static const size_t limits[] = {512, 65535};
    static uint8_t fresh[65535], cached[65535];
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
                for (size_t z = 0; z < 4; z++) {
                    for (size_t l = 0; l < 2; l++) {
                        uint8_t q[512];
                        size_t qlen, n1, n2;
                        uint16_t id = (uint16_t)(round * 1000 + i * 7 + t);
                        assert_int_equal(eddy_dns_query_write(q, sizeof(q), &qlen, id, names[i],
                                                              types[t], sizes[z]),
                                         0);
                        assert_int_equal(eddy_dns_answer(zone, q, qlen, limits[l], fresh,
                                                         sizeof(fresh), &n1),
                                         0);
                        assert_int_equal(eddy_dns_cache_answer(c, q, qlen, limits[l], cached,
                                                               sizeof(cached), &n2),
                                         0);
                        assert_int_equal(n1, n2);
                        assert_memory_equal(fresh, cached, n1);
                    }
                }
            }
        }
    }
    uint64_t hits, misses;
    eddy_dns_cache_stats(c, &hits, &misses);
    assert_true(hits > 0 && misses > 0);
    /* Responses and headerless packets are not answered, cache or not. */
    uint8_t resp[12] = {0, 1, 0x80, 0, 0, 1};
    size_t n;
    assert_int_equal(eddy_dns_cache_answer(c, resp, sizeof(resp), 512, cached, sizeof(cached), &n),
                     EDDY_ENOTSUP);
    assert_int_equal(eddy_dns_cache_answer(c, resp, 5, 512, cached, sizeof(cached), &n),
                     EDDY_EDECODE);
    eddy_dns_cache_free(c);
    assert_null(eddy_dns_cache_new(zone, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dns_zone_loads_the_test_zone),
        cmocka_unit_test(test_dns_zone_reads_directives_parentheses_and_omitted_fields),
        cmocka_unit_test(test_dns_zone_stores_a_duplicate_once),
        cmocka_unit_test(test_dns_zone_errors_name_their_line),
        cmocka_unit_test(test_dns_zone_load_names_the_file),
        cmocka_unit_test(test_dns_answers_a_and_aaaa),
        cmocka_unit_test(test_dns_answers_mx_with_glue),
        cmocka_unit_test(test_dns_answers_ns_with_glue),
        cmocka_unit_test(test_dns_answers_soa_and_txt),
        cmocka_unit_test(test_dns_answers_any_with_every_record),
        cmocka_unit_test(test_dns_follows_a_cname_chain),
        cmocka_unit_test(test_dns_cname_chains_stop_out_of_zone_at_loops_and_at_eight),
        cmocka_unit_test(test_dns_answers_nxdomain_and_nodata_with_the_soa),
        cmocka_unit_test(test_dns_refuses_other_zones_and_classes),
        cmocka_unit_test(test_dns_notimp_for_other_opcodes_and_transfers),
        cmocka_unit_test(test_dns_matches_names_ignoring_case_and_echoes_the_question),
        cmocka_unit_test(test_dns_compresses_names_backward),
        cmocka_unit_test(test_dns_truncates_over_udp_and_fits_over_tcp),
        cmocka_unit_test(test_dns_edns_raises_the_udp_limit_and_is_answered_with_opt),
        cmocka_unit_test(test_dns_badvers_for_edns_versions_above_zero),
        cmocka_unit_test(test_dns_formerr_for_malformed_queries),
        cmocka_unit_test(test_dns_formerr_for_names_over_255_bytes),
        cmocka_unit_test(test_dns_drops_responses_and_headerless_packets),
        cmocka_unit_test(test_dns_every_prefix_of_a_query_is_formerr_or_dropped),
        cmocka_unit_test(test_dns_survives_mutated_queries),
        cmocka_unit_test(test_dns_cache_answers_as_fresh),
    };
    return cmocka_run_group_tests_name("codec.dns", tests, load_test_zone, free_test_zone);
}
