/*
 * codec/grpc's wire formats, alone: the deframer against messages split at every offset and
 * hostile prefixes (a length of 0xFFFFFFFF, bad flags, a stream ending inside a message),
 * grpc-timeout both ways, grpc-message's percent-encoding, "-bin" base64 padded and not,
 * grpc-status, metadata names, gzip messages and bombs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "codec/grpc/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the deframer handed out. */
typedef struct got_s {
    size_t count;
    size_t lens[16];
    uint8_t first[16];
    bool compressed[16];
} got_t;

static int collect(void *arg, eddy_buf_t *msg, bool compressed)
{
    got_t *g = arg;
    assert_true(g->count < 16);
    g->lens[g->count] = eddy_buf_readable(msg);
    g->first[g->count] = eddy_buf_readable(msg) > 0 ? eddy_buf_read_ptr(msg)[0] : 0;
    g->compressed[g->count] = compressed;
    g->count++;
    eddy_buf_release(msg);
    return 0;
}

/* Three messages (0, 5 and 300 bytes) back to back. */
static size_t three_messages(uint8_t *out)
{
    size_t lens[3] = {0, 5, 300}, k = 0;
    for (int i = 0; i < 3; i++) {
        eddy__grpc_prefix(out + k, false, (uint32_t)lens[i]);
        k += 5;
        memset(out + k, 'a' + i, lens[i]);
        k += lens[i];
    }
    return k;
}

/* Feed wire in pieces cut at a and b. */
static int feed(eddy__grpc_deframer_t *d, const uint8_t *wire, size_t n, size_t a, size_t b,
                got_t *g)
{
    size_t cuts[4] = {0, a, b, n};
    for (int i = 0; i < 3; i++) {
        eddy_buf_t *piece = eddy_buf_from(wire + cuts[i], cuts[i + 1] - cuts[i]);
        const char *why = NULL;
        int rc = eddy__grpc_deframe(d, piece, 1024, collect, g, &why);
        eddy_buf_release(piece);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static void test_messages_split_at_every_pair_of_offsets_come_out_whole(void **state)
{
    (void)state;
    uint8_t wire[512];
    size_t n = three_messages(wire);
    for (size_t a = 0; a <= n; a++) {
        for (size_t b = a; b <= n; b += 7) {
            eddy__grpc_deframer_t d = {0};
            got_t g = {0};
            assert_int_equal(feed(&d, wire, n, a, b, &g), 0);
            assert_int_equal(g.count, 3);
            assert_int_equal(g.lens[0], 0);
            assert_int_equal(g.lens[1], 5);
            assert_int_equal(g.lens[2], 300);
            assert_int_equal(g.first[1], 'b');
            assert_int_equal(g.first[2], 'c');
            assert_false(eddy__grpc_deframer_partial(&d));
            eddy__grpc_deframer_free(&d);
        }
    }
}

static void test_a_length_past_the_limit_is_resource_exhausted_before_any_allocation(void **state)
{
    (void)state;
    uint8_t wire[5];
    eddy__grpc_prefix(wire, false, 0xFFFFFFFFu);
    eddy__grpc_deframer_t d = {0};
    got_t g = {0};
    eddy_buf_t *b = eddy_buf_from(wire, 5);
    const char *why = NULL;
    assert_int_equal(eddy__grpc_deframe(&d, b, 4u << 20, collect, &g, &why),
                     EDDY_GRPC_RESOURCE_EXHAUSTED);
    assert_non_null(why);
    assert_null(d.msg);
    eddy_buf_release(b);
    eddy__grpc_deframer_free(&d);
}

static void test_a_compressed_flag_other_than_0_or_1_is_internal(void **state)
{
    (void)state;
    uint8_t wire[6] = {2, 0, 0, 0, 1, 'x'};
    eddy__grpc_deframer_t d = {0};
    got_t g = {0};
    eddy_buf_t *b = eddy_buf_from(wire, sizeof(wire));
    const char *why = NULL;
    assert_int_equal(eddy__grpc_deframe(&d, b, 1024, collect, &g, &why), EDDY_GRPC_INTERNAL);
    assert_int_equal(g.count, 0);
    eddy_buf_release(b);
    eddy__grpc_deframer_free(&d);
}

static void test_a_message_cut_short_is_partial(void **state)
{
    (void)state;
    uint8_t wire[512];
    three_messages(wire);
    eddy__grpc_deframer_t d = {0};
    got_t g = {0};
    eddy_buf_t *b = eddy_buf_from(wire, 20); /* the third message's prefix and 0 bytes */
    const char *why = NULL;
    assert_int_equal(eddy__grpc_deframe(&d, b, 1024, collect, &g, &why), 0);
    assert_int_equal(g.count, 2);
    assert_true(eddy__grpc_deframer_partial(&d));
    eddy_buf_release(b);
    eddy__grpc_deframer_free(&d);
}

static void test_grpc_timeout_parses_every_unit_and_refuses_the_rest(void **state)
{
    (void)state;
    assert_int_equal(eddy__grpc_timeout_parse("1H", 2), 3600LL * 1000000000);
    assert_int_equal(eddy__grpc_timeout_parse("2M", 2), 120LL * 1000000000);
    assert_int_equal(eddy__grpc_timeout_parse("3S", 2), 3000000000LL);
    assert_int_equal(eddy__grpc_timeout_parse("4m", 2), 4000000);
    assert_int_equal(eddy__grpc_timeout_parse("5u", 2), 5000);
    assert_int_equal(eddy__grpc_timeout_parse("99999999n", 9), 99999999);
    assert_true(eddy__grpc_timeout_parse("99999999H", 9) > 0);
    const char *bad[] = {"", "S", "1", "1s", "123456789S", "-1S", "1 S", "1SS", "0x1S"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(eddy__grpc_timeout_parse(bad[i], strlen(bad[i])), -1);
    }
}

static void test_grpc_timeout_formats_within_8_digits_never_shorter(void **state)
{
    (void)state;
    int64_t cases[] = {1, 999, 1000000, 99999999, 100000000, 1500000000LL,
                       86400LL * 1000000000, INT64_MAX / 2};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[16];
        size_t n = eddy__grpc_timeout_format(cases[i], out);
        assert_true(n >= 2 && n <= 9);
        int64_t back = eddy__grpc_timeout_parse(out, n);
        assert_true(back >= cases[i] || n == 9);
    }
}

static void test_grpc_message_percent_encoding_round_trips_the_interop_text(void **state)
{
    (void)state;
    const char *text = "\t\ntest with whitespace\r\nand Unicode BMP \xe2\x98\xba and non-BMP "
                       "\xf0\x9f\x98\x88\t\n 100%";
    char enc[256], dec[256];
    size_t n = eddy__grpc_percent_encode(text, strlen(text), enc);
    for (size_t i = 0; i < n; i++) {
        assert_true(enc[i] >= 0x20 && enc[i] <= 0x7e);
    }
    assert_non_null(strstr(enc, "%25"));
    eddy__grpc_percent_decode(enc, n, dec);
    assert_string_equal(dec, text);
    eddy__grpc_percent_decode("50%", 3, dec); /* lenient: a lone '%' stays */
    assert_string_equal(dec, "50%");
    eddy__grpc_percent_decode("%zz%4", 5, dec);
    assert_string_equal(dec, "%zz%4");
}

static void test_bin_values_decode_padded_or_not_and_encode_unpadded(void **state)
{
    (void)state;
    uint8_t out[16];
    assert_int_equal(eddy__grpc_unbase64("q6ur", 4, out), 3);
    assert_memory_equal(out, "\xab\xab\xab", 3);
    assert_int_equal(eddy__grpc_unbase64("q6s", 3, out), 2);
    assert_int_equal(eddy__grpc_unbase64("q6s=", 4, out), 2);
    assert_int_equal(eddy__grpc_unbase64("qw", 2, out), 1);
    assert_int_equal(eddy__grpc_unbase64("qw==", 4, out), 1);
    assert_int_equal(eddy__grpc_unbase64("q", 1, out), -1);
    assert_int_equal(eddy__grpc_unbase64("q!ur", 4, out), -1);
    char enc[16];
    assert_int_equal(eddy__grpc_base64((const uint8_t *)"\xab\xab", 2, enc), 3);
    assert_string_equal(enc, "q6s");
}

static void test_grpc_status_parses_0_to_16_only(void **state)
{
    (void)state;
    assert_int_equal(eddy__grpc_status_parse("0", 1), 0);
    assert_int_equal(eddy__grpc_status_parse("16", 2), 16);
    assert_int_equal(eddy__grpc_status_parse("17", 2), EDDY_GRPC_UNKNOWN);
    assert_int_equal(eddy__grpc_status_parse("01", 2), EDDY_GRPC_UNKNOWN);
    assert_int_equal(eddy__grpc_status_parse("", 0), EDDY_GRPC_UNKNOWN);
    assert_int_equal(eddy__grpc_status_parse("1a", 2), EDDY_GRPC_UNKNOWN);
    assert_string_equal(eddy_grpc_status_name(4), "DEADLINE_EXCEEDED");
    assert_string_equal(eddy_grpc_status_name(99), "UNKNOWN");
    assert_int_equal(eddy__grpc_status_of_http(404), EDDY_GRPC_UNIMPLEMENTED);
    assert_int_equal(eddy__grpc_status_of_reset(EDDY_H2_REFUSED_STREAM), EDDY_GRPC_UNAVAILABLE);
}

static void test_metadata_names_the_application_may_send(void **state)
{
    (void)state;
    assert_true(eddy__grpc_md_name_ok("x-trace-id", 10));
    assert_true(eddy__grpc_md_name_ok("a.b_c-bin", 9));
    assert_false(eddy__grpc_md_name_ok("X-Upper", 7));
    assert_false(eddy__grpc_md_name_ok("grpc-status", 11));
    assert_false(eddy__grpc_md_name_ok("content-type", 12));
    assert_false(eddy__grpc_md_name_ok(":path", 5));
    assert_false(eddy__grpc_md_name_ok("", 0));
    eddy_http_header_t md[] = {{{"x-bin", 5}, {"\x00\xff", 2}}, {{"x-a", 3}, {"v", 1}}};
    eddy_http_header_t *fields;
    eddy_buf_t *store;
    assert_int_equal(eddy__grpc_md_fields(NULL, 0, md, 2, &fields, &store), 0);
    assert_int_equal(fields[0].value.len, 3);
    assert_memory_equal(fields[0].value.p, "AP8", 3);
    free(fields);
    eddy_buf_release(store);
    eddy_http_header_t bad[] = {{{"x-a", 3}, {"line\nbreak", 10}}};
    assert_int_equal(eddy__grpc_md_fields(NULL, 0, bad, 1, &fields, &store), EDDY_EINVAL);
}

static void test_gzip_messages_round_trip_and_bombs_stop_at_the_limit(void **state)
{
    (void)state;
    if (!eddy__grpc_has_gzip()) {
        skip();
    }
    size_t n = 1 << 20;
    uint8_t *zeros = calloc(1, n);
    eddy_buf_t *m = eddy_buf_from(zeros, n);
    eddy_buf_t *z = eddy__grpc_gzip(m);
    assert_non_null(z);
    assert_true(eddy_buf_readable(z) < 4096);
    int status = 0;
    const char *why = NULL;
    eddy_buf_t *back = eddy__grpc_gunzip(eddy_buf_retain(z), n, &status, &why);
    assert_non_null(back);
    assert_int_equal(eddy_buf_readable(back), n);
    eddy_buf_release(back);
    assert_null(eddy__grpc_gunzip(z, 4096, &status, &why)); /* a bomb for a 4 KiB limit */
    assert_int_equal(status, EDDY_GRPC_RESOURCE_EXHAUSTED);
    assert_null(eddy__grpc_gunzip(eddy_buf_from("garbage!", 8), n, &status, &why));
    assert_int_equal(status, EDDY_GRPC_INTERNAL);
    eddy_buf_release(m);
    free(zeros);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_split_at_every_pair_of_offsets_come_out_whole),
        cmocka_unit_test(test_a_length_past_the_limit_is_resource_exhausted_before_any_allocation),
        cmocka_unit_test(test_a_compressed_flag_other_than_0_or_1_is_internal),
        cmocka_unit_test(test_a_message_cut_short_is_partial),
        cmocka_unit_test(test_grpc_timeout_parses_every_unit_and_refuses_the_rest),
        cmocka_unit_test(test_grpc_timeout_formats_within_8_digits_never_shorter),
        cmocka_unit_test(test_grpc_message_percent_encoding_round_trips_the_interop_text),
        cmocka_unit_test(test_bin_values_decode_padded_or_not_and_encode_unpadded),
        cmocka_unit_test(test_grpc_status_parses_0_to_16_only),
        cmocka_unit_test(test_metadata_names_the_application_may_send),
        cmocka_unit_test(test_gzip_messages_round_trip_and_bombs_stop_at_the_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
