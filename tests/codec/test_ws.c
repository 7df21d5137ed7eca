/*
 * codec/ws/ through embedded channels, after the areas of the Autobahn testsuite:
 * framing at every length class and split at every byte, pings and pongs, reserved bits and
 * opcodes, fragmentation with control frames inside, UTF-8 (valid, invalid, split across
 * fragments, where it fails), limits (1009), close codes, permessage-deflate (context
 * takeover, window bits, a decompression bomb), the server's handshake (valid, each bad
 * header, 426, origin, subprotocols, other paths) and the client's against it, and a seeded
 * mutation run. Nothing leaks.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/channel.h>
#include <eddy/http.h>
#include <eddy/pipeline.h>
#include <eddy/websocket.h>

#include <openssl/sha.h>

#include "codec/ws/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---------------------------------------------------------------------------------------
 * Helpers
 */

static const uint8_t test_key[4] = {0x37, 0xfa, 0x21, 0x3d};

/* A growable byte string. */
typedef struct bytes_s {
    uint8_t *p;
    size_t n, cap;
} bytes_t;

static void bytes_add(bytes_t *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n > 0) {
        memcpy(b->p + b->n, p, n);
    }
    b->n += n;
}

static void bytes_free(bytes_t *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/* Append a frame as the first byte b0 (FIN, RSV, opcode) says, masked with test_key when
 * masked. */
static void frame_raw(bytes_t *out, uint8_t b0, const void *payload, size_t n, bool masked)
{
    uint8_t h[14];
    size_t hl = 0;
    h[hl++] = b0;
    uint8_t m = masked ? 0x80 : 0;
    if (n < 126) {
        h[hl++] = (uint8_t)(m | n);
    } else if (n <= 0xffff) {
        h[hl++] = m | 126;
        h[hl++] = (uint8_t)(n >> 8);
        h[hl++] = (uint8_t)n;
    } else {
        h[hl++] = m | 127;
        for (int i = 7; i >= 0; i--) {
            h[hl++] = (uint8_t)((uint64_t)n >> (8 * i));
        }
    }
    if (masked) {
        memcpy(h + hl, test_key, 4);
        hl += 4;
    }
    bytes_add(out, h, hl);
    size_t at = out->n;
    bytes_add(out, payload, n);
    if (masked && n > 0) {
        eddy__ws_mask(out->p + at, n, test_key, 0);
    }
}

static void frame_c(bytes_t *out, bool fin, uint8_t op, const void *payload, size_t n)
{
    frame_raw(out, (uint8_t)((fin ? 0x80 : 0) | op), payload, n, true);
}

static void frame_s(bytes_t *out, bool fin, uint8_t op, const char *s)
{
    frame_c(out, fin, op, s, strlen(s));
}

static void feed(eddy_channel_t *ch, const void *bytes, size_t n, size_t chunk)
{
    const uint8_t *p = bytes;
    size_t off = 0;
    do {
        size_t k = chunk == 0 || chunk > n - off ? n - off : chunk;
        eddy_buf_t *b = eddy_buf_from(p + off, k);
        assert_non_null(b);
        eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
        off += k;
    } while (off < n);
}

static void feed_bytes(eddy_channel_t *ch, bytes_t *b)
{
    feed(ch, b->p, b->n, 0);
    bytes_free(b);
}

static eddy_channel_t *ws_channel(bool client, const eddy_ws_config_t *c)
{
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(
                         eddy_channel_pipeline(ch), eddy_ws_frame_encoder(client),
                         eddy_ws_frame_decoder(client, c), eddy_ws_protocol_handler(client, c)),
                     0);
    return ch;
}

/* Every byte written out, in order. */
static void outbound(eddy_channel_t *ch, bytes_t *out)
{
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        eddy_buf_t *b = eddy_buf_of(m);
        assert_non_null(b);
        bytes_add(out, eddy_buf_read_ptr(b), eddy_buf_readable(b));
        eddy_msg_release(m);
    }
}

/* A frame as the tests see the server's (unmasked) output. */
typedef struct seen_s {
    uint8_t op;
    bool fin;
    size_t n;
    uint8_t payload[256];
} seen_t;

/* Parse the unmasked frames in b into v (up to max); returns how many. Asserts the bytes
 * are whole frames. */
static size_t parse_frames(const bytes_t *b, seen_t *v, size_t max)
{
    size_t i = 0, k = 0;
    while (i < b->n) {
        assert_true(b->n - i >= 2);
        uint8_t b0 = b->p[i], b1 = b->p[i + 1];
        assert_int_equal(b1 & 0x80, 0); /* a server never masks */
        size_t n = b1 & 0x7f, hl = 2;
        if (n == 126) {
            n = (size_t)b->p[i + 2] << 8 | b->p[i + 3];
            hl = 4;
        } else if (n == 127) {
            n = 0;
            for (int j = 0; j < 8; j++) {
                n = n << 8 | b->p[i + 2 + (size_t)j];
            }
            hl = 10;
        }
        assert_true(b->n - i >= hl + n);
        if (k < max) {
            v[k].op = b0 & 0x0f;
            v[k].fin = (b0 & 0x80) != 0;
            v[k].n = n;
            memcpy(v[k].payload, b->p + i + hl, n < 256 ? n : 256);
        }
        k++;
        i += hl + n;
    }
    return k;
}

/* The channel answered with exactly one frame, a close with code, and closed. */
static void expect_closed_with(eddy_channel_t *ch, int code)
{
    bytes_t out = {0};
    outbound(ch, &out);
    seen_t v[8];
    size_t n = parse_frames(&out, v, 8);
    bytes_free(&out);
    assert_true(n >= 1);
    assert_int_equal(v[n - 1].op, EDDY_WS_CLOSE);
    assert_true(v[n - 1].n >= 2);
    assert_int_equal(v[n - 1].payload[0] << 8 | v[n - 1].payload[1], code);
    assert_false(eddy_channel_is_open(ch));
}

static eddy_ws_frame_t *next_frame(eddy_channel_t *ch)
{
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    assert_non_null(m);
    eddy_ws_frame_t *f = eddy_ws_frame_of(m);
    assert_non_null(f);
    return f;
}

static void expect_frame(eddy_channel_t *ch, uint8_t op, const void *p, size_t n)
{
    eddy_ws_frame_t *f = next_frame(ch);
    assert_int_equal(f->opcode, op);
    assert_true(f->fin);
    assert_int_equal(f->rsv, 0);
    assert_int_equal(eddy_ws_frame_len(f), n);
    if (n > 0) {
        assert_memory_equal(eddy_buf_read_ptr(f->payload), p, n);
    }
    eddy_msg_release(&f->_msg);
}

static void expect_nothing_in(eddy_channel_t *ch)
{
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    if (m != NULL) {
        eddy_msg_release(m);
        fail_msg("an unexpected message came in");
    }
}

static void finish(eddy_channel_t *ch)
{
    eddy_embedded_finish(ch);
}

/* ---------------------------------------------------------------------------------------
 * Framing
 */

static void test_frames_of_every_length_class_decode(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static const size_t lens[] = {0, 1, 125, 126, 127, 65535, 65536, 200000};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        size_t n = lens[i];
        uint8_t *p = malloc(n + 1);
        for (size_t j = 0; j < n; j++) {
            p[j] = (uint8_t)(j * 7 + 3);
        }
        bytes_t b = {0};
        frame_c(&b, true, EDDY_WS_BINARY, p, n);
        /* Split in two at every byte of the header and around the payload's edges. */
        size_t total = b.n;
        for (size_t cut = 0; cut <= total; cut++) {
            if (cut > 20 && cut + 20 < total && cut != total / 2) {
                continue;
            }
            eddy_channel_t *ch = ws_channel(false, NULL);
            if (cut > 0) {
                feed(ch, b.p, cut, 0);
            }
            if (cut < total) {
                expect_nothing_in(ch);
                feed(ch, b.p + cut, total - cut, 0);
            }
            expect_frame(ch, EDDY_WS_BINARY, p, n);
            assert_true(eddy_channel_is_open(ch));
            finish(ch);
        }
        bytes_free(&b);
        free(p);
    }
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_frames_fed_byte_by_byte_decode(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    char text[300];
    memset(text, 'a', sizeof(text));
    static const size_t lens[] = {0, 125, 126, 300};
    for (size_t i = 0; i < 4; i++) {
        eddy_channel_t *ch = ws_channel(false, NULL);
        bytes_t b = {0};
        frame_c(&b, true, EDDY_WS_TEXT, text, lens[i]);
        frame_c(&b, true, EDDY_WS_BINARY, text, lens[i]);
        feed(ch, b.p, b.n, 1);
        bytes_free(&b);
        expect_frame(ch, EDDY_WS_TEXT, text, lens[i]);
        expect_frame(ch, EDDY_WS_BINARY, text, lens[i]);
        finish(ch);
    }
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_encoder_writes_every_length_class(void **state)
{
    (void)state;
    static const size_t lens[] = {0, 125, 126, 65535, 65536};
    for (size_t i = 0; i < 5; i++) {
        size_t n = lens[i];
        uint8_t *p = calloc(1, n + 1);
        /* server to client: unmasked, decoded by a client-side channel */
        eddy_channel_t *srv = ws_channel(false, NULL);
        eddy_channel_t *cli = ws_channel(true, NULL);
        eddy_embedded_write_outbound(srv, eddy_ws_frame_msg(eddy_ws_binary_frame(p, n)));
        eddy_msg_t *m;
        while ((m = eddy_embedded_read_outbound(srv)) != NULL) {
            eddy_embedded_write_inbound(cli, m);
        }
        expect_frame(cli, EDDY_WS_BINARY, p, n);
        /* client to server: masked */
        eddy_embedded_write_outbound(cli, eddy_ws_frame_msg(eddy_ws_binary_frame(p, n)));
        while ((m = eddy_embedded_read_outbound(cli)) != NULL) {
            eddy_buf_t *b = eddy_buf_of(m);
            assert_true(eddy_buf_read_ptr(b)[1] & 0x80);
            eddy_embedded_write_inbound(srv, m);
        }
        expect_frame(srv, EDDY_WS_BINARY, p, n);
        finish(srv);
        finish(cli);
        free(p);
    }
}

/* A server's large data frame goes out by reference: its header, then the payload's own
 * memory (no copy per member of a broadcast); a small one is one copied buffer. */
static void test_server_frames_send_large_payloads_by_reference(void **state)
{
    (void)state;
    uint8_t p[1000];
    memset(p, 'x', sizeof(p));
    eddy_channel_t *srv = ws_channel(false, NULL);
    eddy_ws_frame_t *f = eddy_ws_binary_frame(p, sizeof(p));
    const uint8_t *payload = eddy_buf_read_ptr(f->payload);
    eddy_ws_frame_t *shared = eddy_ws_frame_of(eddy_msg_retain(eddy_ws_frame_msg(f)));
    eddy_embedded_write_outbound(srv, eddy_ws_frame_msg(f));
    eddy_msg_t *head = eddy_embedded_read_outbound(srv);
    eddy_msg_t *body = eddy_embedded_read_outbound(srv);
    assert_non_null(head);
    assert_non_null(body);
    assert_int_equal(eddy_buf_readable(eddy_buf_of(head)), 4); /* 2 + a 16-bit length */
    assert_ptr_equal(eddy_buf_read_ptr(eddy_buf_of(body)), payload);
    assert_int_equal(eddy_buf_readable(eddy_buf_of(body)), sizeof(p));
    /* The frame itself is untouched: another member reads it whole. */
    assert_int_equal(eddy_buf_readable(shared->payload), sizeof(p));
    eddy_msg_release(head);
    eddy_msg_release(body);
    eddy_msg_release(eddy_ws_frame_msg(shared));
    eddy_embedded_write_outbound(srv, eddy_ws_frame_msg(eddy_ws_binary_frame(p, 100)));
    eddy_msg_t *small = eddy_embedded_read_outbound(srv);
    assert_int_equal(eddy_buf_readable(eddy_buf_of(small)), 102);
    assert_null(eddy_embedded_read_outbound(srv));
    eddy_msg_release(small);
    /* A small frame someone else holds too (a broadcast's) goes by reference as well. */
    eddy_ws_frame_t *b = eddy_ws_binary_frame(p, 64);
    eddy_msg_t *other = eddy_msg_retain(eddy_ws_frame_msg(b));
    const uint8_t *bytes = eddy_buf_read_ptr(b->payload);
    eddy_embedded_write_outbound(srv, eddy_ws_frame_msg(b));
    eddy_msg_t *bh = eddy_embedded_read_outbound(srv);
    eddy_msg_t *bb = eddy_embedded_read_outbound(srv);
    assert_non_null(bb);
    assert_int_equal(eddy_buf_readable(eddy_buf_of(bh)), 2);
    assert_ptr_equal(eddy_buf_read_ptr(eddy_buf_of(bb)), bytes);
    eddy_msg_release(bh);
    eddy_msg_release(bb);
    eddy_msg_release(other);
    finish(srv);
}

/* Our SHA-1 (the accept key's) against OpenSSL's, at every length around the block edges. */
static void test_sha1_matches_openssl(void **state)
{
    (void)state;
    uint8_t data[300];
    for (size_t i = 0; i < sizeof(data); i++) {
        data[i] = (uint8_t)(i * 131 + 7);
    }
    for (size_t n = 0; n <= sizeof(data); n++) {
        for (size_t split = 0; split <= n; split += n / 3 + 1) {
            uint8_t ours[20], theirs[20];
            eddy__ws_sha1(data, split, data + split, n - split, ours);
            SHA1(data, n, theirs);
            assert_memory_equal(ours, theirs, 20);
        }
    }
}

/* After our close frame nothing follows it: a frame written later (a broadcast reaching a
 * member whose close began) fails with EDDY_ECLOSED and is not sent (serverfuzz ws_chat). */
static void test_no_frame_after_our_close_frame(void **state)
{
    (void)state;
    eddy_channel_t *srv = ws_channel(false, NULL);
    eddy_embedded_write_outbound(srv, eddy_ws_frame_msg(eddy_ws_close_frame(1000, "bye")));
    eddy_msg_t *m;
    size_t frames = 0;
    while ((m = eddy_embedded_read_outbound(srv)) != NULL) {
        assert_int_equal(eddy_buf_read_ptr(eddy_buf_of(m))[0] & 0x0f, EDDY_WS_CLOSE);
        eddy_msg_release(m);
        frames++;
    }
    assert_int_equal(frames, 1);
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_channel_write_and_flush(srv, eddy_ws_frame_msg(eddy_ws_text_frame("late", 4)), p);
    eddy_embedded_run_pending(srv);
    assert_true(eddy_future_is_done(p));
    assert_int_equal(eddy_future_error(p), EDDY_ECLOSED);
    eddy_future_release(p);
    assert_null(eddy_embedded_read_outbound(srv));
    finish(srv);
}

static void test_mask_matches_bytewise_xor_at_every_phase(void **state)
{
    (void)state;
    uint8_t a[64], b[64];
    for (unsigned phase = 0; phase < 4; phase++) {
        for (size_t n = 0; n <= 40; n++) {
            for (size_t i = 0; i < n; i++) {
                a[i + 1] = b[i + 1] = (uint8_t)(i * 31 + phase);
            }
            unsigned after = eddy__ws_mask(a + 1, n, test_key, phase);
            for (size_t i = 0; i < n; i++) {
                b[i + 1] = b[i + 1] ^ test_key[(phase + i) & 3];
            }
            assert_memory_equal(a + 1, b + 1, n);
            assert_int_equal(after, (phase + n) & 3);
        }
    }
}

static void test_unmasked_client_frame_is_a_protocol_error(void **state)
{
    (void)state;
    eddy_channel_t *ch = ws_channel(false, NULL);
    bytes_t b = {0};
    frame_raw(&b, 0x81, "hi", 2, false);
    feed_bytes(ch, &b);
    expect_nothing_in(ch);
    expect_closed_with(ch, 1002);
    finish(ch);
}

static void test_masked_server_frame_is_a_protocol_error(void **state)
{
    (void)state;
    eddy_channel_t *ch = ws_channel(true, NULL);
    bytes_t b = {0};
    frame_raw(&b, 0x81, "hi", 2, true);
    feed_bytes(ch, &b);
    expect_nothing_in(ch);
    bytes_t out = {0};
    outbound(ch, &out);
    assert_true(out.n >= 8); /* a masked close frame: 2 + 4 + 2 */
    assert_int_equal(out.p[0], 0x88);
    uint8_t code[2] = {out.p[6], out.p[7]};
    uint8_t key[4];
    memcpy(key, out.p + 2, 4);
    eddy__ws_mask(code, 2, key, 0);
    assert_int_equal(code[0] << 8 | code[1], 1002);
    bytes_free(&out);
    assert_false(eddy_channel_is_open(ch));
    finish(ch);
}

static void test_reserved_bits_are_refused(void **state)
{
    (void)state;
    static const uint8_t firsts[] = {0xc1, 0xa1, 0x91, 0xf1, 0xc9, 0xa2};
    for (size_t i = 0; i < sizeof(firsts); i++) {
        eddy_channel_t *ch = ws_channel(false, NULL);
        bytes_t b = {0};
        frame_raw(&b, firsts[i], "x", 1, true);
        feed_bytes(ch, &b);
        expect_nothing_in(ch);
        expect_closed_with(ch, 1002);
        finish(ch);
    }
}

static void test_reserved_opcodes_are_refused(void **state)
{
    (void)state;
    static const uint8_t ops[] = {3, 4, 5, 6, 7, 0xb, 0xc, 0xd, 0xe, 0xf};
    for (size_t i = 0; i < sizeof(ops); i++) {
        eddy_channel_t *ch = ws_channel(false, NULL);
        bytes_t b = {0};
        frame_s(&b, true, EDDY_WS_TEXT, "before");
        frame_raw(&b, (uint8_t)(0x80 | ops[i]), "", 0, true);
        frame_s(&b, true, EDDY_WS_TEXT, "after");
        feed_bytes(ch, &b);
        expect_frame(ch, EDDY_WS_TEXT, "before", 6);
        expect_nothing_in(ch);
        expect_closed_with(ch, 1002);
        finish(ch);
    }
}

static void test_long_or_fragmented_control_frames_are_refused(void **state)
{
    (void)state;
    uint8_t p[126] = {0};
    for (int k = 0; k < 3; k++) {
        eddy_channel_t *ch = ws_channel(false, NULL);
        bytes_t b = {0};
        if (k == 0) {
            frame_c(&b, true, EDDY_WS_PING, p, 126);
        } else if (k == 1) {
            frame_c(&b, false, EDDY_WS_PING, p, 1);
        } else {
            frame_c(&b, true, EDDY_WS_CLOSE, p, 126);
        }
        feed_bytes(ch, &b);
        expect_closed_with(ch, 1002);
        finish(ch);
    }
}

static void test_lengths_with_the_top_bit_set_are_refused(void **state)
{
    (void)state;
    eddy_channel_t *ch = ws_channel(false, NULL);
    uint8_t h[] = {0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4};
    feed(ch, h, sizeof(h), 0);
    expect_closed_with(ch, 1002);
    finish(ch);
}

static void test_frames_over_the_limit_are_refused_before_their_payload(void **state)
{
    (void)state;
    eddy_ws_config_t c = {.max_frame_size = 1000};
    eddy_channel_t *ch = ws_channel(false, &c);
    uint8_t p[1001] = {0};
    bytes_t b = {0};
    frame_c(&b, true, EDDY_WS_BINARY, p, 1000);
    frame_c(&b, true, EDDY_WS_BINARY, p, 1001);
    feed(ch, b.p, b.n - 1001, 0); /* the second frame's header only */
    bytes_free(&b);
    expect_frame(ch, EDDY_WS_BINARY, p, 1000);
    expect_closed_with(ch, 1009);
    assert_int_equal(eddy_embedded_error(ch), EDDY_ETOOLONGFRAME);
    finish(ch);
}

/* ---------------------------------------------------------------------------------------
 * Pings and pongs
 */

static void test_ping_is_answered_with_its_payload(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    uint8_t p[125];
    for (int i = 0; i < 125; i++) {
        p[i] = (uint8_t)i;
    }
    eddy_channel_t *ch = ws_channel(false, NULL);
    bytes_t b = {0};
    frame_c(&b, true, EDDY_WS_PING, p, 125);
    frame_c(&b, true, EDDY_WS_PING, "", 0);
    frame_c(&b, true, EDDY_WS_PONG, "unsolicited", 11);
    feed_bytes(ch, &b);
    expect_nothing_in(ch); /* pings and pongs stay in the protocol handler */
    bytes_t out = {0};
    outbound(ch, &out);
    seen_t v[4];
    assert_int_equal(parse_frames(&out, v, 4), 2);
    bytes_free(&out);
    assert_int_equal(v[0].op, EDDY_WS_PONG);
    assert_int_equal(v[0].n, 125);
    assert_memory_equal(v[0].payload, p, 125);
    assert_int_equal(v[1].op, EDDY_WS_PONG);
    assert_int_equal(v[1].n, 0);
    assert_true(eddy_channel_is_open(ch));
    finish(ch);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_idle_connection_is_pinged(void **state)
{
    (void)state;
    eddy_ws_config_t c = {.ping_interval_ms = 1000};
    eddy_channel_t *ch = ws_channel(false, &c);
    eddy_embedded_advance_time(ch, 999);
    bytes_t out = {0};
    outbound(ch, &out);
    assert_int_equal(out.n, 0);
    eddy_embedded_advance_time(ch, 1);
    outbound(ch, &out);
    seen_t v[2];
    assert_int_equal(parse_frames(&out, v, 2), 1);
    assert_int_equal(v[0].op, EDDY_WS_PING);
    bytes_free(&out);
    /* Input keeps it quiet. */
    for (int i = 0; i < 5; i++) {
        eddy_embedded_advance_time(ch, 600);
        bytes_t b = {0};
        frame_c(&b, true, EDDY_WS_PONG, "", 0);
        feed_bytes(ch, &b);
    }
    outbound(ch, &out);
    assert_int_equal(out.n, 0);
    finish(ch);
}

/* ---------------------------------------------------------------------------------------
 * Fragmentation
 */

static void test_fragments_are_aggregated_around_control_frames(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = ws_channel(false, NULL);
    bytes_t b = {0};
    frame_s(&b, false, EDDY_WS_TEXT, "Hello, ");
    frame_s(&b, true, EDDY_WS_PING, "p1");
    frame_s(&b, false, EDDY_WS_CONTINUATION, "Wor");
    frame_s(&b, true, EDDY_WS_PONG, "");
    frame_s(&b, true, EDDY_WS_CONTINUATION, "ld!");
    frame_s(&b, false, EDDY_WS_BINARY, "");
    frame_s(&b, true, EDDY_WS_CONTINUATION, "");
    feed(ch, b.p, b.n, 3);
    bytes_free(&b);
    expect_frame(ch, EDDY_WS_TEXT, "Hello, World!", 13);
    expect_frame(ch, EDDY_WS_BINARY, "", 0);
    bytes_t out = {0};
    outbound(ch, &out);
    seen_t v[2];
    assert_int_equal(parse_frames(&out, v, 2), 1);
    assert_int_equal(v[0].op, EDDY_WS_PONG);
    bytes_free(&out);
    finish(ch);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_fragments_pass_as_they_come_without_aggregation(void **state)
{
    (void)state;
    eddy_ws_config_t c = {.no_aggregate = true};
    eddy_channel_t *ch = ws_channel(false, &c);
    bytes_t b = {0};
    frame_s(&b, false, EDDY_WS_TEXT, "ab");
    frame_s(&b, true, EDDY_WS_CONTINUATION, "cd");
    feed_bytes(ch, &b);
    eddy_ws_frame_t *f = next_frame(ch);
    assert_int_equal(f->opcode, EDDY_WS_TEXT);
    assert_false(f->fin);
    eddy_msg_release(&f->_msg);
    f = next_frame(ch);
    assert_int_equal(f->opcode, EDDY_WS_CONTINUATION);
    assert_true(f->fin);
    eddy_msg_release(&f->_msg);
    finish(ch);
}

static void test_continuation_without_start_is_a_protocol_error(void **state)
{
    (void)state;
    eddy_channel_t *ch = ws_channel(false, NULL);
    bytes_t b = {0};
    frame_s(&b, true, EDDY_WS_CONTINUATION, "orphan");
    feed_bytes(ch, &b);
    expect_nothing_in(ch);
    expect_closed_with(ch, 1002);
    assert_int_equal(eddy_embedded_error(ch), EDDY_EDECODE);
    finish(ch);
}

static void test_new_message_inside_a_fragmented_one_is_a_protocol_error(void **state)
{
    (void)state;
    for (int op = EDDY_WS_TEXT; op <= EDDY_WS_BINARY; op++) {
        eddy_channel_t *ch = ws_channel(false, NULL);
        bytes_t b = {0};
        frame_s(&b, false, EDDY_WS_TEXT, "open");
        frame_s(&b, true, (uint8_t)op, "intruder");
        feed_bytes(ch, &b);
        expect_nothing_in(ch);
        expect_closed_with(ch, 1002);
        finish(ch);
    }
}

static void test_messages_over_the_limit_are_refused(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_ws_config_t c = {.max_message_size = 100};
    eddy_channel_t *ch = ws_channel(false, &c);
    uint8_t p[100] = {0};
    bytes_t b = {0};
    frame_c(&b, false, EDDY_WS_BINARY, p, 60);
    frame_c(&b, true, EDDY_WS_CONTINUATION, p, 40);
    frame_c(&b, false, EDDY_WS_BINARY, p, 60);
    frame_c(&b, true, EDDY_WS_CONTINUATION, p, 41);
    feed_bytes(ch, &b);
    expect_frame(ch, EDDY_WS_BINARY, p, 100);
    expect_nothing_in(ch);
    expect_closed_with(ch, 1009);
    assert_int_equal(eddy_embedded_error(ch), EDDY_ETOOLONGFRAME);
    finish(ch);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* ---------------------------------------------------------------------------------------
 * UTF-8
 */

/* The reference: decode by the RFC 3629 table, byte by byte. */
static bool utf8_reference(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < len) {
            return false;
        }
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80) {
                return false;
            }
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            return false;
        }
        i += len;
    }
    return true;
}

static void test_utf8_check_agrees_with_the_reference(void **state)
{
    (void)state;
    uint8_t s[4];
    for (uint32_t v = 0; v < 1u << 24; v++) {
        s[0] = (uint8_t)(v >> 16), s[1] = (uint8_t)(v >> 8), s[2] = (uint8_t)v;
        for (size_t n = v < 256 ? 1 : v < 65536 ? 2 : 3; n <= 3; n++) {
            const uint8_t *p = s + 3 - n;
            if (eddy_ws_utf8_valid(p, n) != utf8_reference(p, n)) {
                fail_msg("%zu bytes %06x disagree", n, v);
            }
        }
    }
    uint32_t rng = 12345;
    for (int i = 0; i < 2000000; i++) {
        rng = rng * 1103515245u + 12345u;
        uint32_t r = rng ^ (rng >> 13) * 2654435761u;
        memcpy(s, &r, 4);
        s[0] = (uint8_t)(0xf0 | (s[0] & 0x0f)); /* four-byte leads, and what is past them */
        assert_int_equal(eddy_ws_utf8_valid(s, 4), utf8_reference(s, 4));
    }
}

static const struct {
    const char *bytes;
    size_t bad_at; /* where the check fails; SIZE_MAX: only at the end (truncated) */
} bad_utf8[] = {
    {"\xc0\xaf", 0},         /* overlong '/' */
    {"\xe0\x80\xaf", 1},     /* overlong, three bytes */
    {"\xf0\x80\x80\xaf", 1}, /* overlong, four bytes */
    {"\xed\xa0\x80", 1},     /* U+D800, a surrogate */
    {"\xed\xbf\xbf", 1},     /* U+DFFF */
    {"\xf4\x90\x80\x80", 1}, /* U+110000, past the last code point */
    {"\xf5\x80\x80\x80", 0}, /* no such lead */
    {"\xff", 0},
    {"\x80", 0}, /* a lone continuation */
    {"ab\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80"
     "edited",
     14},
    {"\xce\xba\xe1\xbd", SIZE_MAX}, /* truncated at the end */
    {"\xf0\x9f\x98", SIZE_MAX},
};

static void test_invalid_utf8_fails_the_connection_with_1007(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_utf8) / sizeof(bad_utf8[0]); i++) {
        const char *s = bad_utf8[i].bytes;
        size_t n = strlen(s);
        uint32_t st = EDDY__UTF8_ACCEPT;
        size_t at = eddy__ws_utf8_step(&st, (const uint8_t *)s, n);
        if (bad_utf8[i].bad_at == SIZE_MAX) {
            assert_int_equal(at, n);
            assert_int_not_equal(st, EDDY__UTF8_ACCEPT);
        } else {
            assert_int_equal(at, bad_utf8[i].bad_at);
        }
        eddy_channel_t *ch = ws_channel(false, NULL);
        bytes_t b = {0};
        frame_c(&b, true, EDDY_WS_TEXT, s, n);
        feed_bytes(ch, &b);
        expect_nothing_in(ch);
        expect_closed_with(ch, 1007);
        finish(ch);
    }
}

static void test_utf8_split_across_fragments_at_every_byte(void **state)
{
    (void)state;
    /* "κόσμε" and a four-byte emoji: every split point, valid, then with the last byte cut */
    const char *good = "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xf0\x9f\x98\x80";
    size_t n = strlen(good);
    for (size_t cut = 0; cut <= n; cut++) {
        for (size_t third = cut; third <= n; third += 3) {
            eddy_channel_t *ch = ws_channel(false, NULL);
            bytes_t b = {0};
            frame_c(&b, false, EDDY_WS_TEXT, good, cut);
            frame_c(&b, false, EDDY_WS_CONTINUATION, good + cut, third - cut);
            frame_c(&b, true, EDDY_WS_CONTINUATION, good + third, n - third);
            feed_bytes(ch, &b);
            expect_frame(ch, EDDY_WS_TEXT, good, n);
            finish(ch);
        }
        eddy_channel_t *ch = ws_channel(false, NULL);
        bytes_t b = {0};
        frame_c(&b, false, EDDY_WS_TEXT, good, cut < n - 1 ? cut : n - 1);
        frame_c(&b, true, EDDY_WS_CONTINUATION, good + (cut < n - 1 ? cut : n - 1),
                n - 1 - (cut < n - 1 ? cut : n - 1));
        feed_bytes(ch, &b);
        expect_nothing_in(ch);
        expect_closed_with(ch, 1007);
        finish(ch);
    }
}

static void test_invalid_utf8_fails_fast_before_the_message_ends(void **state)
{
    (void)state;
    /* The bad byte is in the second fragment: the connection fails there, before the rest
     * of the message came (Autobahn 6.4). */
    eddy_channel_t *ch = ws_channel(false, NULL);
    bytes_t b = {0};
    frame_s(&b, false, EDDY_WS_TEXT, "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5");
    frame_s(&b, false, EDDY_WS_CONTINUATION, "\xf4\x90\x80\x80");
    feed_bytes(ch, &b);
    expect_nothing_in(ch);
    expect_closed_with(ch, 1007);
    finish(ch);
}

/* ---------------------------------------------------------------------------------------
 * Closing
 */

static void test_close_is_answered_with_its_code_then_closed(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static const int codes[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010,
                                1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        eddy_channel_t *ch = ws_channel(false, NULL);
        uint8_t p[8] = {(uint8_t)(codes[i] >> 8), (uint8_t)codes[i], 'b', 'y', 'e'};
        bytes_t b = {0};
        frame_c(&b, true, EDDY_WS_CLOSE, p, 5);
        frame_s(&b, true, EDDY_WS_TEXT, "after the close");
        feed_bytes(ch, &b);
        eddy_ws_frame_t *f = next_frame(ch);
        assert_int_equal(eddy_ws_frame_close_code(f), codes[i]);
        size_t n;
        const char *r = eddy_ws_frame_close_reason(f, &n);
        assert_int_equal(n, 3);
        assert_memory_equal(r, "bye", 3);
        eddy_msg_release(&f->_msg);
        expect_nothing_in(ch);
        expect_closed_with(ch, codes[i]);
        finish(ch);
    }
    /* Without a status: answered with 1000. */
    eddy_channel_t *ch = ws_channel(false, NULL);
    bytes_t b = {0};
    frame_c(&b, true, EDDY_WS_CLOSE, "", 0);
    feed_bytes(ch, &b);
    eddy_ws_frame_t *f = next_frame(ch);
    assert_int_equal(eddy_ws_frame_close_code(f), 1005);
    eddy_msg_release(&f->_msg);
    expect_closed_with(ch, 1000);
    finish(ch);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_bad_close_payloads_are_protocol_errors(void **state)
{
    (void)state;
    static const int codes[] = {0,    999,  1004, 1005, 1006, 1015,
                                1016, 1100, 2000, 2999, 5000, 65535};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        eddy_channel_t *ch = ws_channel(false, NULL);
        uint8_t p[2] = {(uint8_t)(codes[i] >> 8), (uint8_t)codes[i]};
        bytes_t b = {0};
        frame_c(&b, true, EDDY_WS_CLOSE, p, 2);
        feed_bytes(ch, &b);
        if (eddy_embedded_read_inbound(ch) != NULL) {
            fail_msg("code %d came through", codes[i]);
        }
        expect_closed_with(ch, 1002);
        finish(ch);
    }
    eddy_channel_t *ch = ws_channel(false, NULL);
    bytes_t b = {0};
    frame_c(&b, true, EDDY_WS_CLOSE, "\x03", 1); /* a payload of one byte */
    feed_bytes(ch, &b);
    expect_closed_with(ch, 1002);
    finish(ch);
    ch = ws_channel(false, NULL);
    frame_c(&b, true, EDDY_WS_CLOSE, "\x03\xe8\xce\xba\xed\xa0\x80", 7); /* reason not UTF-8 */
    feed_bytes(ch, &b);
    expect_nothing_in(ch);
    expect_closed_with(ch, 1007);
    finish(ch);
}

static void test_our_close_waits_for_the_peers_then_closes(void **state)
{
    (void)state;
    eddy_channel_t *ch = ws_channel(false, NULL);
    eddy_embedded_write_outbound(ch, eddy_ws_frame_msg(eddy_ws_close_frame(1001, "going")));
    bytes_t out = {0};
    outbound(ch, &out);
    seen_t v[2];
    assert_int_equal(parse_frames(&out, v, 2), 1);
    assert_int_equal(v[0].op, EDDY_WS_CLOSE);
    bytes_free(&out);
    /* Nothing more may be sent; data may still arrive. */
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_channel_write_and_flush(ch, eddy_ws_frame_msg(eddy_ws_text_frame("x", 1)), p);
    assert_int_equal(eddy_future_error(p), EDDY_ECLOSED);
    eddy_future_release(p);
    bytes_t b = {0};
    frame_s(&b, true, EDDY_WS_TEXT, "late");
    feed_bytes(ch, &b);
    expect_frame(ch, EDDY_WS_TEXT, "late", 4);
    assert_true(eddy_channel_is_open(ch));
    frame_c(&b, true, EDDY_WS_CLOSE, "\x03\xe9", 2);
    feed_bytes(ch, &b);
    eddy_ws_frame_t *f = next_frame(ch);
    assert_int_equal(eddy_ws_frame_close_code(f), 1001);
    eddy_msg_release(&f->_msg);
    outbound(ch, &out);
    assert_int_equal(out.n, 0); /* our close was the answer already */
    assert_false(eddy_channel_is_open(ch));
    finish(ch);
}

static void test_our_close_without_answer_times_out(void **state)
{
    (void)state;
    eddy_ws_config_t c = {.close_timeout_ms = 2000};
    eddy_channel_t *ch = ws_channel(false, &c);
    eddy_embedded_write_outbound(ch, eddy_ws_frame_msg(eddy_ws_close_frame(1000, NULL)));
    eddy_embedded_advance_time(ch, 1999);
    assert_true(eddy_channel_is_open(ch));
    eddy_embedded_advance_time(ch, 1);
    assert_false(eddy_channel_is_open(ch));
    finish(ch);
}

static void test_close_frame_constructors_check_codes(void **state)
{
    (void)state;
    assert_null(eddy_ws_close_frame(1005, NULL));
    assert_null(eddy_ws_close_frame(999, NULL));
    char reason[200];
    memset(reason, 'r', sizeof(reason) - 1);
    reason[sizeof(reason) - 1] = '\0';
    eddy_ws_frame_t *f = eddy_ws_close_frame(4000, reason);
    assert_int_equal(eddy_ws_frame_len(f), 125);
    eddy_msg_release(&f->_msg);
    f = eddy_ws_close_frame(0, NULL);
    assert_int_equal(eddy_ws_frame_close_code(f), 1005);
    eddy_msg_release(&f->_msg);
}

/* ---------------------------------------------------------------------------------------
 * permessage-deflate
 */

/* A client and a server channel with deflate agreed as params (a response value). */
static void deflate_pair(const char *params, const eddy_ws_config_t *c, eddy_channel_t **cli,
                         eddy_channel_t **srv)
{
    for (int side = 0; side < 2; side++) {
        bool client = side == 0;
        eddy_channel_t *ch = eddy_embedded_channel_new();
        assert_int_equal(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch),
                                                eddy_ws_frame_encoder(client),
                                                eddy_ws_frame_decoder_ext(client, c),
                                                eddy_ws_deflate_handler(client, params, c),
                                                eddy_ws_protocol_handler(client, c)),
                         0);
        *(client ? cli : srv) = ch;
    }
}

/* Send f from one channel to the other; returns the bytes that went over. */
static size_t send_over(eddy_channel_t *from, eddy_channel_t *to, eddy_ws_frame_t *f)
{
    eddy_embedded_write_outbound(from, eddy_ws_frame_msg(f));
    size_t n = 0;
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(from)) != NULL) {
        n += eddy_buf_readable(eddy_buf_of(m));
        eddy_embedded_write_inbound(to, m);
    }
    return n;
}

static void test_deflate_round_trip_with_and_without_context_takeover(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    const char *text = "A WebSocket message, compressed: a WebSocket message, compressed again.";
    size_t tn = strlen(text);
    static const char *params[] = {
        "permessage-deflate",
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
        "permessage-deflate; server_max_window_bits=9; client_max_window_bits=9",
        "permessage-deflate; server_max_window_bits=8; client_max_window_bits=8",
        "permessage-deflate; client_max_window_bits=12; server_no_context_takeover",
    };
    for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
        eddy_channel_t *cli, *srv;
        deflate_pair(params[i], NULL, &cli, &srv);
        bool takeover = strstr(params[i], "client_no_context") == NULL;
        bool back_takeover = strstr(params[i], "server_no_context") == NULL;
        size_t first = send_over(cli, srv, eddy_ws_text_frame(text, tn));
        size_t second = send_over(cli, srv, eddy_ws_text_frame(text, tn));
        expect_frame(srv, EDDY_WS_TEXT, text, tn);
        expect_frame(srv, EDDY_WS_TEXT, text, tn);
        assert_true(first < tn + 6);
        if (takeover) {
            assert_true(second < first); /* the window remembers the first message */
        } else {
            assert_int_equal(second, first);
        }
        size_t back1 = send_over(srv, cli, eddy_ws_binary_frame(text, tn));
        size_t back2 = send_over(srv, cli, eddy_ws_binary_frame(text, tn));
        expect_frame(cli, EDDY_WS_BINARY, text, tn);
        expect_frame(cli, EDDY_WS_BINARY, text, tn);
        assert_true(back_takeover ? back2 < back1 : back2 == back1);
        /* A large message, fragmented by the sender, and an empty one. */
        size_t big = 300000;
        uint8_t *p = malloc(big);
        for (size_t k = 0; k < big; k++) {
            p[k] = (uint8_t)((k * k) >> 7);
        }
        eddy_buf_t *part1 = eddy_buf_from(p, 1000);
        eddy_buf_t *part2 = eddy_buf_from(p + 1000, big - 1000);
        send_over(cli, srv, eddy_ws_frame_new(EDDY_WS_BINARY, false, part1));
        send_over(cli, srv, eddy_ws_frame_new(EDDY_WS_CONTINUATION, true, part2));
        expect_frame(srv, EDDY_WS_BINARY, p, big);
        send_over(cli, srv, eddy_ws_text_frame("", 0));
        expect_frame(srv, EDDY_WS_TEXT, "", 0);
        free(p);
        assert_true(eddy_channel_is_open(srv) && eddy_channel_is_open(cli));
        finish(cli);
        finish(srv);
    }
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_deflate_sets_rsv1_on_the_first_frame_only(void **state)
{
    (void)state;
    eddy_channel_t *cli, *srv;
    deflate_pair("permessage-deflate", NULL, &cli, &srv);
    eddy_embedded_write_outbound(
        srv, eddy_ws_frame_msg(eddy_ws_frame_new(EDDY_WS_TEXT, false, eddy_buf_from_str("ab"))));
    eddy_embedded_write_outbound(srv, eddy_ws_frame_msg(eddy_ws_frame_new(
                                          EDDY_WS_CONTINUATION, true, eddy_buf_from_str("cd"))));
    eddy_embedded_write_outbound(srv,
                                 eddy_ws_frame_msg(eddy_ws_frame_new(EDDY_WS_PING, true, NULL)));
    bytes_t out = {0};
    outbound(srv, &out);
    seen_t v[3];
    assert_int_equal(parse_frames(&out, v, 3), 3);
    assert_int_equal(out.p[0], 0x40 | EDDY_WS_TEXT);
    size_t second = 2 + v[0].n;
    assert_int_equal(out.p[second], 0x80 | EDDY_WS_CONTINUATION);
    assert_int_equal(out.p[second + 2 + v[1].n], 0x80 | EDDY_WS_PING);
    feed(cli, out.p, out.n, 0);
    bytes_free(&out);
    expect_frame(cli, EDDY_WS_TEXT, "abcd", 4);
    finish(cli);
    finish(srv);
}

/* An empty message after another deflates to nothing in zlib; it must still end with a
 * block header (00), or the receiver's 00 00 ff ff starts a stored block and the next
 * message inflates as garbage (found with node's ws). Checked with a separate raw inflater
 * too, as a peer that shares nothing with ours. */
static void test_deflate_empty_message_after_another_keeps_the_stream_whole(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    const char *msgs[] = {"first", "", "", "second, after two empty ones", "", "third"};
    size_t count = sizeof(msgs) / sizeof(msgs[0]);
    eddy_channel_t *cli, *srv;
    deflate_pair("permessage-deflate", NULL, &cli, &srv);
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    assert_int_equal(inflateInit2(&zs, -15), Z_OK);
    for (size_t i = 0; i < count; i++) {
        size_t n = strlen(msgs[i]);
        eddy_embedded_write_outbound(srv, eddy_ws_frame_msg(eddy_ws_text_frame(msgs[i], n)));
        bytes_t out = {0};
        outbound(srv, &out);
        seen_t v[1];
        assert_int_equal(parse_frames(&out, v, 1), 1);
        assert_int_equal(out.p[0], 0x80 | 0x40 | EDDY_WS_TEXT);
        assert_true(v[0].n > 0); /* never an empty payload: at least the 00 of a block */
        /* The independent inflater: payload, then the tail, as RFC 7692 section 7.2.2. */
        uint8_t in[300], plain[300];
        memcpy(in, v[0].payload, v[0].n);
        memcpy(in + v[0].n, "\x00\x00\xff\xff", 4);
        zs.next_in = in;
        zs.avail_in = (uInt)(v[0].n + 4);
        zs.next_out = plain;
        zs.avail_out = sizeof(plain);
        int rc = inflate(&zs, Z_SYNC_FLUSH);
        assert_true(rc == Z_OK || rc == Z_BUF_ERROR);
        assert_int_equal(zs.avail_in, 0);
        assert_int_equal(sizeof(plain) - zs.avail_out, n);
        assert_memory_equal(plain, msgs[i], n);
        feed(cli, out.p, out.n, 0);
        bytes_free(&out);
        expect_frame(cli, EDDY_WS_TEXT, msgs[i], n);
    }
    inflateEnd(&zs);
    assert_true(eddy_channel_is_open(cli) && eddy_channel_is_open(srv));
    finish(cli);
    finish(srv);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* The largest message allowed, of bytes that do not compress, deflates to a little more than
 * itself: it must still pass in one frame, and one byte more must still be refused. */
static void test_deflate_incompressible_message_of_the_limit_passes(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    size_t n = EDDY_WS_MAX_MESSAGE_SIZE;
    uint8_t *p = malloc(n + 1);
    assert_non_null(p);
    uint32_t x = 2463534242u; /* xorshift32: bytes deflate cannot shrink */
    for (size_t i = 0; i <= n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
    eddy_channel_t *cli, *srv;
    deflate_pair("permessage-deflate", NULL, &cli, &srv);
    size_t wire = send_over(cli, srv, eddy_ws_binary_frame(p, n));
    assert_true(wire > n + 14); /* it grew */
    expect_frame(srv, EDDY_WS_BINARY, p, n);
    send_over(cli, srv, eddy_ws_binary_frame(p, n + 1));
    expect_closed_with(srv, EDDY_WS_CLOSE_TOO_BIG);
    expect_nothing_in(srv);
    free(p);
    finish(cli);
    finish(srv);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* A channel group writes one frame to every member: each member's deflater must leave it as
 * it was, so the next member compresses the original text, not the last one's output. */
static void test_deflate_leaves_a_shared_frame_unchanged(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    const char *text = "one frame for every member of a group, compressed by each of them";
    size_t tn = strlen(text);
    eddy_channel_t *cli[2], *srv[2];
    deflate_pair("permessage-deflate", NULL, &cli[0], &srv[0]);
    deflate_pair("permessage-deflate; server_no_context_takeover", NULL, &cli[1], &srv[1]);
    eddy_ws_frame_t *f = eddy_ws_text_frame(text, tn);
    assert_non_null(f);
    for (int k = 0; k < 2; k++) {
        eddy_msg_retain(eddy_ws_frame_msg(f));
        send_over(srv[k], cli[k], f);
        expect_frame(cli[k], EDDY_WS_TEXT, text, tn);
        assert_int_equal(f->rsv, 0);
        assert_int_equal(f->opcode, EDDY_WS_TEXT);
        assert_int_equal(eddy_ws_frame_len(f), tn);
        assert_memory_equal(eddy_buf_read_ptr(f->payload), text, tn);
    }
    eddy_msg_release(eddy_ws_frame_msg(f));
    for (int k = 0; k < 2; k++) {
        finish(cli[k]);
        finish(srv[k]);
    }
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_decompression_bomb_is_refused_with_1009(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    /* 16 MiB of zeros deflate to about 16 KiB; the limit is 1 MiB. */
    size_t big = (size_t)16 << 20;
    uint8_t *zeros = calloc(1, big);
    uLong cap = compressBound((uLong)big);
    uint8_t *z = malloc(cap);
    z_stream zs = {0};
    assert_int_equal(deflateInit2(&zs, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    zs.next_in = zeros;
    zs.avail_in = (uInt)big;
    zs.next_out = z;
    zs.avail_out = (uInt)cap;
    assert_int_equal(deflate(&zs, Z_SYNC_FLUSH), Z_OK);
    size_t zn = cap - zs.avail_out - 4;
    deflateEnd(&zs);
    free(zeros);
    eddy_channel_t *cli, *srv;
    deflate_pair("permessage-deflate", NULL, &cli, &srv);
    bytes_t b = {0};
    frame_raw(&b, 0x80 | 0x40 | EDDY_WS_BINARY, z, zn, true);
    free(z);
    feed_bytes(srv, &b);
    expect_nothing_in(srv);
    expect_closed_with(srv, 1009);
    finish(srv);
    finish(cli);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_garbage_compressed_data_fails_the_connection(void **state)
{
    (void)state;
    eddy_channel_t *cli, *srv;
    deflate_pair("permessage-deflate", NULL, &cli, &srv);
    bytes_t b = {0};
    frame_raw(&b, 0x80 | 0x40 | EDDY_WS_TEXT, "\xff\xff\xff\xff", 4, true);
    /* Control frames behind it in the same read go nowhere either (found by fuzz_ws). */
    frame_c(&b, true, EDDY_WS_PING, "", 0);
    frame_c(&b, true, EDDY_WS_CLOSE, "\x03\xe8", 2);
    feed_bytes(srv, &b);
    expect_nothing_in(srv);
    expect_closed_with(srv, 1007);
    finish(srv);
    /* RSV1 on a continuation, or on a control frame, is a protocol error. */
    for (int k = 0; k < 2; k++) {
        eddy_channel_t *c2, *s2;
        deflate_pair("permessage-deflate", NULL, &c2, &s2);
        if (k == 0) {
            frame_raw(&b, 0x00 | 0x40 | EDDY_WS_TEXT, "\x00", 1, true);
            frame_raw(&b, 0x80 | 0x40 | EDDY_WS_CONTINUATION, "\x00", 1, true);
        } else {
            frame_raw(&b, 0x80 | 0x40 | EDDY_WS_PING, "", 0, true);
        }
        feed_bytes(s2, &b);
        expect_nothing_in(s2);
        expect_closed_with(s2, 1002);
        finish(s2);
        finish(c2);
    }
    finish(cli);
}

static void test_deflate_negotiation(void **state)
{
    (void)state;
    eddy__ws_conf_t conf;
    eddy_ws_config_t c = {.deflate = true};
    assert_int_equal(eddy__ws_conf_copy(&conf, &c), 0);
    eddy__ws_deflate_params_t d;
    char answer[256];
    const char *o = "; client_max_window_bits";
    assert_int_equal(eddy__ws_deflate_negotiate_server(o, strlen(o), &conf.c, &d, answer, 256), 0);
    assert_string_equal(answer, "permessage-deflate");
    o = "; server_no_context_takeover; server_max_window_bits=10; client_max_window_bits=\"11\"";
    assert_int_equal(eddy__ws_deflate_negotiate_server(o, strlen(o), &conf.c, &d, answer, 256), 0);
    assert_string_equal(answer, "permessage-deflate; server_no_context_takeover; "
                                "server_max_window_bits=10; client_max_window_bits=11");
    assert_true(d.our_no_context);
    assert_int_equal(d.our_window_bits, 10);
    o = "; server_max_window_bits=8";
    assert_int_equal(eddy__ws_deflate_negotiate_server(o, strlen(o), &conf.c, &d, answer, 256), 0);
    assert_int_equal(d.our_window_bits, 9); /* zlib cannot deflate with 8 */
    static const char *bad[] = {"; server_max_window_bits=7",
                                "; server_max_window_bits=16",
                                "; server_max_window_bits",
                                "; mystery",
                                "; server_no_context_takeover; server_no_context_takeover",
                                "; client_no_context_takeover=1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(
            eddy__ws_deflate_negotiate_server(bad[i], strlen(bad[i]), &conf.c, &d, answer, 256),
            EDDY_EINVAL);
    }
    /* A client refuses a window it did not allow, or a value-less client window. */
    eddy__ws_conf_free(&conf);
    c.server_max_window_bits = 10;
    assert_int_equal(eddy__ws_conf_copy(&conf, &c), 0);
    o = "; server_max_window_bits=12";
    assert_int_equal(eddy__ws_deflate_accept_client(o, strlen(o), &conf.c, &d), EDDY_EINVAL);
    o = "; client_max_window_bits";
    assert_int_equal(eddy__ws_deflate_accept_client(o, strlen(o), &conf.c, &d), EDDY_EINVAL);
    o = "; server_max_window_bits=10; client_no_context_takeover";
    assert_int_equal(eddy__ws_deflate_accept_client(o, strlen(o), &conf.c, &d), 0);
    assert_true(d.our_no_context);
    eddy__ws_deflate_offer(&conf.c, answer, sizeof(answer));
    assert_string_equal(answer,
                        "permessage-deflate; client_max_window_bits; server_max_window_bits=10");
    eddy__ws_conf_free(&conf);
}

/* ---------------------------------------------------------------------------------------
 * The server's handshake
 */

/* What the application behind the handshaker saw. */
typedef struct app_s {
    int handshakes, failures;
    int error;        /* the last failure's */
    char reason[128]; /* ... and why */
    char subprotocol[64], extensions[256], path[64];
} app_t;

static void app_event(eddy_ctx_t *ctx, int event, void *data)
{
    app_t *a = eddy_ctx_state(ctx);
    const eddy_ws_handshake_event_t *ev = data;
    if (event == EDDY_EVENT_WS_HANDSHAKE) {
        a->handshakes++;
        snprintf(a->subprotocol, sizeof(a->subprotocol), "%s",
                 ev->subprotocol != NULL ? ev->subprotocol : "");
        snprintf(a->extensions, sizeof(a->extensions), "%s",
                 ev->extensions != NULL ? ev->extensions : "");
        snprintf(a->path, sizeof(a->path), "%s", ev->path);
    } else if (event == EDDY_EVENT_WS_HANDSHAKE_FAILED) {
        a->failures++;
        assert_non_null(ev->reason);
        a->error = ev->error;
        snprintf(a->reason, sizeof(a->reason), "%s", ev->reason);
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

static const eddy_handler_ops_t app_ops = {
    .name = "app",
    .user_event_triggered = app_event,
};

static bool origin_ok(const char *origin, size_t len, void *arg)
{
    (void)arg;
    return origin != NULL && len == 19 && memcmp(origin, "https://example.com", len) == 0;
}

static eddy_channel_t *http_ws_channel(const eddy_ws_config_t *c, app_t *app)
{
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch),
                                            eddy_http_request_decoder(NULL),
                                            eddy_http_aggregator(0), eddy_ws_server_handshaker(c),
                                            eddy_handler("app", &app_ops, app, NULL)),
                     0);
    return ch;
}

static char *out_str(eddy_channel_t *ch)
{
    bytes_t out = {0};
    outbound(ch, &out);
    bytes_add(&out, "", 1);
    return (char *)out.p;
}

#define RFC_REQUEST(extra)                                                                         \
    "GET /ws?x=1 HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\n"                   \
    "Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"           \
    "Sec-WebSocket-Version: 13\r\n" extra "\r\n"

static bool has_handler(eddy_channel_t *ch, const char *name)
{
    return eddy_pipeline_context(eddy_channel_pipeline(ch), name) != NULL;
}

static void test_server_handshake_upgrades_with_the_rfc_key(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_ws_config_t c = {.path = "/ws"};
    app_t app = {0};
    eddy_channel_t *ch = http_ws_channel(&c, &app);
    /* A frame right behind the request, in the same read. */
    bytes_t b = {0};
    bytes_add(&b, RFC_REQUEST(""), strlen(RFC_REQUEST("")));
    frame_s(&b, true, EDDY_WS_TEXT, "early");
    for (size_t chunk = 0; chunk < 2; chunk++) {
        if (chunk == 1) {
            finish(ch);
            memset(&app, 0, sizeof(app));
            ch = http_ws_channel(&c, &app);
        }
        feed(ch, b.p, b.n, chunk == 0 ? 0 : 5);
        char *s = out_str(ch);
        assert_non_null(strstr(s, "HTTP/1.1 101 Switching Protocols\r\n"));
        assert_non_null(strstr(s, "\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
        assert_non_null(strstr(s, "\r\nUpgrade: websocket\r\n"));
        assert_non_null(strstr(s, "\r\nConnection: Upgrade\r\n"));
        assert_null(strstr(s, "Sec-WebSocket-Protocol"));
        assert_null(strstr(s, "Sec-WebSocket-Extensions"));
        free(s);
        assert_int_equal(app.handshakes, 1);
        assert_string_equal(app.path, "/ws?x=1");
        assert_true(has_handler(ch, "ws_decoder") && has_handler(ch, "ws_encoder") &&
                    has_handler(ch, "ws_protocol"));
        assert_null(
            eddy_pipeline_context_ops(eddy_channel_pipeline(ch), eddy_http_request_decoder_ops()));
        assert_null(
            eddy_pipeline_context_ops(eddy_channel_pipeline(ch), eddy_http_aggregator_ops()));
        assert_false(has_handler(ch, "ws_server_handshaker"));
        expect_frame(ch, EDDY_WS_TEXT, "early", 5);
    }
    bytes_free(&b);
    /* The socket speaks WebSocket now. */
    eddy_embedded_write_outbound(ch, eddy_ws_frame_msg(eddy_ws_text_frame("hi", 2)));
    bytes_t out = {0};
    outbound(ch, &out);
    assert_int_equal(out.n, 4);
    assert_memory_equal(out.p, "\x81\x02hi", 4);
    bytes_free(&out);
    finish(ch);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* The request is answered with status ("426 Upgrade Required": the code and its reason
 * phrase, as on the wire) and in_body in the answer, then closed. */
static void expect_refused(const char *request, const char *status, const char *in_body,
                           const eddy_ws_config_t *c)
{
    app_t app = {0};
    eddy_channel_t *ch = http_ws_channel(c, &app);
    feed(ch, request, strlen(request), 0);
    char *s = out_str(ch);
    char line[64];
    snprintf(line, sizeof(line), "HTTP/1.1 %s\r\n", status);
    if (strncmp(s, line, strlen(line)) != 0 || strstr(s, in_body) == NULL) {
        fail_msg("expected %s with \"%s\", got:\n%s", status, in_body, s);
    }
    free(s);
    assert_int_equal(app.handshakes, 0);
    assert_false(eddy_channel_is_open(ch));
    expect_nothing_in(ch);
    finish(ch);
}

static void test_server_handshake_refuses_bad_requests(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_ws_config_t c = {.path = "/ws"};
    expect_refused(
        "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        "400 Bad Request", "Upgrade: websocket", &c);
    expect_refused(
        "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        "400 Bad Request", "Upgrade: websocket", &c);
    expect_refused(
        "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: keep-alive\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        "400 Bad Request", "Connection: Upgrade", &c);
    expect_refused(
        "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n",
        "426 Upgrade Required", "\r\nSec-WebSocket-Version: 13\r\n", &c);
    expect_refused("GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
                   "426 Upgrade Required", "Sec-WebSocket-Version: 13", &c);
    expect_refused("GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n",
                   "400 Bad Request", "Sec-WebSocket-Key must be 16 bytes", &c);
    expect_refused("GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ\r\nSec-WebSocket-Version: 13\r\n\r\n",
                   "400 Bad Request", "Sec-WebSocket-Key must be 16 bytes", &c);
    expect_refused("GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25j\r\nSec-WebSocket-Version: 13\r\n\r\n",
                   "400 Bad Request", "Sec-WebSocket-Key must be 16 bytes", &c);
    expect_refused("POST /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                   "Content-Length: 0\r\n\r\n",
                   "405 Method Not Allowed", "GET", &c);
    expect_refused(
        "GET /ws HTTP/1.0\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        "400 Bad Request", "HTTP/1.1", &c);
    eddy_ws_config_t oc = {.path = "/ws", .origin_cb = origin_ok};
    expect_refused(RFC_REQUEST("Origin: https://evil.example\r\n"), "403 Forbidden", "origin", &oc);
    expect_refused(RFC_REQUEST(""), "403 Forbidden", "origin", &oc);
    app_t app = {0};
    eddy_channel_t *ch = http_ws_channel(&oc, &app);
    feed(ch, RFC_REQUEST("Origin: https://example.com\r\n"),
         strlen(RFC_REQUEST("Origin: https://example.com\r\n")), 0);
    assert_int_equal(app.handshakes, 1);
    finish(ch);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_server_handshake_picks_subprotocol_and_deflate(void **state)
{
    (void)state;
    eddy_ws_config_t c = {.path = "/ws", .subprotocols = "chat, superchat", .deflate = true};
    app_t app = {0};
    eddy_channel_t *ch = http_ws_channel(&c, &app);
    const char *req = RFC_REQUEST("Sec-WebSocket-Protocol: v10.stomp, superchat\r\n"
                                  "Sec-WebSocket-Protocol: chat\r\n"
                                  "Sec-WebSocket-Extensions: x-webkit-deflate-frame, "
                                  "permessage-deflate; mystery=1, "
                                  "permessage-deflate; client_max_window_bits\r\n");
    feed(ch, req, strlen(req), 0);
    char *s = out_str(ch);
    assert_non_null(strstr(s, "\r\nSec-WebSocket-Protocol: superchat\r\n"));
    assert_non_null(strstr(s, "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n"));
    free(s);
    assert_string_equal(app.subprotocol, "superchat");
    assert_string_equal(app.extensions, "permessage-deflate");
    assert_true(has_handler(ch, "ws_deflate"));
    finish(ch);
    /* None in common: no subprotocol, still upgraded; deflate off: not agreed. */
    eddy_ws_config_t c2 = {.path = "/ws", .subprotocols = "chat"};
    memset(&app, 0, sizeof(app));
    ch = http_ws_channel(&c2, &app);
    req = RFC_REQUEST("Sec-WebSocket-Protocol: mqtt\r\n"
                      "Sec-WebSocket-Extensions: permessage-deflate\r\n");
    feed(ch, req, strlen(req), 0);
    s = out_str(ch);
    assert_non_null(strstr(s, " 101 "));
    assert_null(strstr(s, "Sec-WebSocket-Protocol"));
    assert_null(strstr(s, "Sec-WebSocket-Extensions"));
    free(s);
    assert_false(has_handler(ch, "ws_deflate"));
    assert_int_equal(app.handshakes, 1);
    finish(ch);
}

/* An offer that ends its header, with no ';' after it anywhere: the handshaker reads the
 * value's bytes only (it once looked for the ';' past them, out of the buffer; serverfuzz
 * ws seed 2 under ASan). The answer's extension is parsed the same way on the client. */
static void test_server_handshake_reads_an_offer_within_its_header(void **state)
{
    (void)state;
    eddy_ws_config_t c = {.path = "/ws", .deflate = true};
    app_t app = {0};
    eddy_channel_t *ch = http_ws_channel(&c, &app);
    const char *req = "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                      "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate"
                      "\r\n\r\n";
    feed(ch, req, strlen(req), 0);
    char *s = out_str(ch);
    assert_non_null(strstr(s, "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n"));
    free(s);
    assert_true(has_handler(ch, "ws_deflate"));
    assert_int_equal(app.handshakes, 1);
    finish(ch);
}

static void test_other_paths_pass_through_to_http(void **state)
{
    (void)state;
    eddy_ws_config_t c = {.path = "/ws"};
    app_t app = {0};
    eddy_channel_t *ch = http_ws_channel(&c, &app);
    const char *req = "GET / HTTP/1.1\r\nHost: h\r\n\r\nGET /wsx HTTP/1.1\r\nHost: h\r\n\r\n";
    feed(ch, req, strlen(req), 0);
    for (int i = 0; i < 2; i++) {
        eddy_msg_t *m = eddy_embedded_read_inbound(ch);
        assert_non_null(m);
        assert_int_equal(m->type, EDDY_MSG_HTTP_FULL_REQUEST);
        eddy_msg_release(m);
    }
    char *s = out_str(ch);
    assert_string_equal(s, "");
    free(s);
    assert_true(has_handler(ch, "ws_server_handshaker"));
    /* Then an upgrade on the same connection. */
    feed(ch, RFC_REQUEST(""), strlen(RFC_REQUEST("")), 0);
    assert_int_equal(app.handshakes, 1);
    finish(ch);
}

static void test_server_handshake_deadline_closes_silent_connections(void **state)
{
    (void)state;
    eddy_ws_config_t c = {.path = "/ws", .handshake_timeout_ms = 3000};
    app_t app = {0};
    eddy_channel_t *ch = http_ws_channel(&c, &app);
    feed(ch, "GET /ws HT", 10, 0);
    eddy_embedded_advance_time(ch, 2999);
    assert_true(eddy_channel_is_open(ch));
    eddy_embedded_advance_time(ch, 1);
    assert_false(eddy_channel_is_open(ch));
    assert_int_equal(eddy_embedded_error(ch), EDDY_ETIMEDOUT);
    finish(ch);
}

/* ---------------------------------------------------------------------------------------
 * The client's handshake, against the server's
 */

/* Move what each channel wrote to the other until neither writes more. */
static void pump(eddy_channel_t *a, eddy_channel_t *b)
{
    for (bool moved = true; moved;) {
        moved = false;
        eddy_msg_t *m;
        while ((m = eddy_embedded_read_outbound(a)) != NULL) {
            if (eddy_channel_is_open(b)) {
                eddy_embedded_write_inbound(b, m);
            } else {
                eddy_msg_release(m);
            }
            moved = true;
        }
        while ((m = eddy_embedded_read_outbound(b)) != NULL) {
            if (eddy_channel_is_open(a)) {
                eddy_embedded_write_inbound(a, m);
            } else {
                eddy_msg_release(m);
            }
            moved = true;
        }
    }
}

static eddy_channel_t *client_channel(const eddy_ws_config_t *c, app_t *app)
{
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_ws_client_handshaker(c),
                                            eddy_handler("app", &app_ops, app, NULL)),
                     0);
    return ch;
}

static void test_client_handshake_against_the_server(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (int deflate = 0; deflate < 2; deflate++) {
        eddy_ws_config_t sc = {.path = "/chat", .subprotocols = "v2, v1", .deflate = deflate};
        eddy_ws_config_t cc = {.host = "example.com",
                               .uri = "/chat",
                               .origin = "https://example.com",
                               .subprotocols = "v1, v2",
                               .deflate = true,
                               .client_max_window_bits = 10,
                               .client_no_context_takeover = true};
        app_t sapp = {0}, capp = {0};
        eddy_channel_t *srv = http_ws_channel(&sc, &sapp);
        eddy_channel_t *cli = client_channel(&cc, &capp);
        pump(cli, srv);
        assert_int_equal(sapp.handshakes, 1);
        assert_int_equal(capp.handshakes, 1);
        assert_int_equal(capp.failures, 0);
        assert_string_equal(sapp.subprotocol, "v1");
        assert_string_equal(capp.subprotocol, "v1");
        assert_string_equal(capp.extensions, sapp.extensions);
        if (deflate) {
            assert_string_equal(capp.extensions, "permessage-deflate; client_no_context_takeover; "
                                                 "client_max_window_bits=10");
        }
        assert_int_equal(has_handler(cli, "ws_deflate"), deflate);
        assert_false(has_handler(cli, "ws_client_handshaker"));
        eddy_embedded_write_outbound(cli, eddy_ws_frame_msg(eddy_ws_text_frame("ping?", 5)));
        pump(cli, srv);
        expect_frame(srv, EDDY_WS_TEXT, "ping?", 5);
        eddy_embedded_write_outbound(srv, eddy_ws_frame_msg(eddy_ws_text_frame("pong!", 5)));
        pump(cli, srv);
        expect_frame(cli, EDDY_WS_TEXT, "pong!", 5);
        /* The client closes: the server answers and closes, the client closes too. */
        eddy_embedded_write_outbound(cli, eddy_ws_frame_msg(eddy_ws_close_frame(1000, "done")));
        pump(cli, srv);
        eddy_ws_frame_t *f = next_frame(srv);
        assert_int_equal(eddy_ws_frame_close_code(f), 1000);
        eddy_msg_release(&f->_msg);
        f = next_frame(cli);
        assert_int_equal(eddy_ws_frame_close_code(f), 1000);
        eddy_msg_release(&f->_msg);
        assert_false(eddy_channel_is_open(srv));
        assert_false(eddy_channel_is_open(cli));
        finish(srv);
        finish(cli);
    }
    assert_int_equal(eddy_buf_live_count(), live);
}

/* The key the client sent, from its request. */
static void client_key(eddy_channel_t *cli, char key[25])
{
    char *s = out_str(cli);
    const char *k = strstr(s, "Sec-WebSocket-Key: ");
    assert_non_null(k);
    memcpy(key, k + 19, 24);
    key[24] = '\0';
    free(s);
}

/* An answer: head (status line and headers before the accept), the accept (right or
 * wrong), extra headers. */
static void answer_for(eddy_channel_t *cli, const char *head, bool right_accept, const char *extra,
                       char *answer, size_t cap)
{
    char key[25], accept[29];
    client_key(cli, key);
    eddy_ws_accept_key(key, 24, accept);
    snprintf(answer, cap, "%sSec-WebSocket-Accept: %s\r\n%s\r\n", head,
             right_accept ? accept : "AAAAAAAAAAAAAAAAAAAAAAAAAAA=", extra);
}

static void expect_client_fails(const char *head, bool right_accept, const char *extra)
{
    eddy_ws_config_t cc = {.host = "h", .subprotocols = "v1"};
    app_t capp = {0};
    eddy_channel_t *cli = client_channel(&cc, &capp);
    char answer[1024];
    answer_for(cli, head, right_accept, extra, answer, sizeof(answer));
    feed(cli, answer, strlen(answer), 0);
    assert_int_equal(capp.handshakes, 0);
    assert_int_equal(capp.failures, 1);
    assert_false(eddy_channel_is_open(cli));
    finish(cli);
}

static void test_client_handshake_fails_on_bad_answers(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    const char *ok = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\n";
    expect_client_fails(ok, false, "");
    expect_client_fails("HTTP/1.1 200 OK\r\n", true, "");
    expect_client_fails("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n", true, "");
    expect_client_fails(ok, true, "Sec-WebSocket-Protocol: v2\r\n");
    expect_client_fails(ok, true, "Sec-WebSocket-Extensions: permessage-deflate\r\n");
    expect_client_fails("garbage\r\n", true, "");
    /* And one that passes, for contrast, with a frame right behind it. */
    eddy_ws_config_t cc = {.host = "h", .subprotocols = "v1"};
    app_t capp = {0};
    eddy_channel_t *cli = client_channel(&cc, &capp);
    char answer[1024];
    answer_for(cli, ok, true, "Sec-WebSocket-Protocol: v1\r\n", answer, sizeof(answer));
    size_t n = strlen(answer);
    memcpy(answer + n, "\x81\x03hey", 5);
    feed(cli, answer, n + 5, 7);
    assert_int_equal(capp.handshakes, 1);
    expect_frame(cli, EDDY_WS_TEXT, "hey", 3);
    finish(cli);
    /* No answer at all: the deadline. */
    eddy_ws_config_t tc = {.host = "h", .handshake_timeout_ms = 500};
    memset(&capp, 0, sizeof(capp));
    cli = client_channel(&tc, &capp);
    eddy_embedded_advance_time(cli, 500);
    assert_int_equal(capp.failures, 1);
    assert_false(eddy_channel_is_open(cli));
    finish(cli);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* The answer goes through the HTTP client codec: its parser, its limits, its errors. */
static void expect_client_refuses(const char *answer, size_t n, int error, const char *reason)
{
    eddy_ws_config_t cc = {.host = "h"};
    app_t capp = {0};
    eddy_channel_t *cli = client_channel(&cc, &capp);
    feed(cli, answer, n, 0);
    assert_int_equal(capp.handshakes, 0);
    assert_int_equal(capp.failures, 1);
    assert_int_equal(capp.error, error);
    assert_string_equal(capp.reason, reason);
    assert_false(eddy_channel_is_open(cli));
    finish(cli);
}

static void test_client_handshake_reads_the_answer_with_the_http_codec(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    /* The request as it always went, written by the codec. */
    eddy_ws_config_t cc = {.host = "example.com", .uri = "/chat?room=1"};
    app_t capp = {0};
    eddy_channel_t *cli = client_channel(&cc, &capp);
    char *req = out_str(cli);
    const char *head = "GET /chat?room=1 HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\n"
                       "Connection: Upgrade\r\nSec-WebSocket-Key: ";
    assert_memory_equal(req, head, strlen(head));
    assert_non_null(strstr(req, "\r\nSec-WebSocket-Version: 13\r\n\r\n"));
    assert_null(strstr(req, "Content-Length"));
    free(req);
    /* Closed before the answer ended. */
    feed(cli, "HTTP/1.1 101 Switching", 22, 0);
    eddy_channel_close(cli, NULL);
    assert_int_equal(capp.failures, 1);
    assert_int_equal(capp.error, EDDY_ECLOSED);
    finish(cli);

    static const char refused[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nnope!";
    expect_client_refuses(refused, sizeof(refused) - 1, EDDY_EDECODE,
                          "the server did not switch protocols");
    /* A control byte in a value, which the codec refuses as every response's. */
    static const char control[] =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: web\x01socket\r\n\r\n";
    expect_client_refuses(control, sizeof(control) - 1, EDDY_EDECODE, "a malformed answer");
    /* A header section past the codec's limit. */
    size_t n = 10000;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, 'a', n);
    memcpy(big, "HTTP/1.1 101 Switching Protocols\r\nX-Big: ", 42);
    expect_client_refuses(big, n, EDDY_EDECODE, "the answer is too long");
    free(big);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* ---------------------------------------------------------------------------------------
 * Mutations
 */

static uint32_t next_rand(uint32_t *rng)
{
    *rng = *rng * 1103515245u + 12345u;
    return *rng >> 8;
}

static void test_mutated_frame_streams_decode_or_close_properly(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    uint32_t rng = 20240518;
#define RAND() next_rand(&rng)
    for (int round = 0; round < 3000; round++) {
        bytes_t b = {0};
        int frames = 1 + (int)(RAND() % 6);
        for (int i = 0; i < frames; i++) {
            uint8_t p[300];
            size_t n = RAND() % 3 == 0 ? RAND() % 300 : RAND() % 20;
            for (size_t k = 0; k < n; k++) {
                p[k] = (uint8_t)('a' + RAND() % 26);
            }
            switch (RAND() % 6) {
            case 0:
                frame_c(&b, true, EDDY_WS_TEXT, p, n);
                break;
            case 1:
                frame_c(&b, true, EDDY_WS_BINARY, p, n);
                break;
            case 2:
                frame_c(&b, true, EDDY_WS_PING, p, n % 126);
                break;
            case 3:
                frame_c(&b, false, EDDY_WS_TEXT, p, n / 2);
                frame_c(&b, true, EDDY_WS_PING, p, 3);
                frame_c(&b, true, EDDY_WS_CONTINUATION, p, n - n / 2);
                break;
            case 4:
                frame_c(&b, true, EDDY_WS_CLOSE, "\x03\xe8ok", 4);
                break;
            default:
                frame_c(&b, true, EDDY_WS_PONG, p, n % 126);
                break;
            }
        }
        int flips = (int)(RAND() % 4);
        for (int i = 0; i < flips && b.n > 0; i++) {
            b.p[RAND() % b.n] ^= (uint8_t)(1u << (RAND() % 8));
        }
        eddy_ws_config_t c = {
            .max_frame_size = 4096, .max_message_size = 8192, .no_aggregate = RAND() % 4 == 0};
        eddy_channel_t *ch = ws_channel(false, &c);
        size_t off = 0;
        while (off < b.n && eddy_channel_is_open(ch)) {
            size_t k = 1 + RAND() % 40;
            k = k < b.n - off ? k : b.n - off;
            feed(ch, b.p + off, k, 0);
            off += k;
        }
        eddy_msg_t *m;
        while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
            eddy_ws_frame_t *f = eddy_ws_frame_of(m);
            assert_non_null(f);
            if (f->opcode == EDDY_WS_TEXT && f->fin) {
                assert_true(
                    eddy_ws_utf8_valid(eddy_buf_read_ptr(f->payload), eddy_ws_frame_len(f)));
            }
            eddy_msg_release(m);
        }
        bytes_t out = {0};
        outbound(ch, &out);
        seen_t v[64];
        size_t n = parse_frames(&out, v, 64);
        bytes_free(&out);
        if (!eddy_channel_is_open(ch)) {
            /* Closed: always with a close frame carrying a proper status, last. */
            assert_true(n >= 1 && n <= 64);
            assert_int_equal(v[n - 1].op, EDDY_WS_CLOSE);
            assert_true(v[n - 1].n >= 2);
            assert_true(eddy_ws_close_code_valid(v[n - 1].payload[0] << 8 | v[n - 1].payload[1]));
        } else {
            for (size_t i = 0; i < n && i < 64; i++) {
                assert_int_equal(v[i].op, EDDY_WS_PONG);
            }
        }
        finish(ch);
        bytes_free(&b);
    }
#undef RAND
    assert_int_equal(eddy_buf_live_count(), live);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frames_of_every_length_class_decode),
        cmocka_unit_test(test_frames_fed_byte_by_byte_decode),
        cmocka_unit_test(test_encoder_writes_every_length_class),
        cmocka_unit_test(test_server_frames_send_large_payloads_by_reference),
        cmocka_unit_test(test_sha1_matches_openssl),
        cmocka_unit_test(test_no_frame_after_our_close_frame),
        cmocka_unit_test(test_mask_matches_bytewise_xor_at_every_phase),
        cmocka_unit_test(test_unmasked_client_frame_is_a_protocol_error),
        cmocka_unit_test(test_masked_server_frame_is_a_protocol_error),
        cmocka_unit_test(test_reserved_bits_are_refused),
        cmocka_unit_test(test_reserved_opcodes_are_refused),
        cmocka_unit_test(test_long_or_fragmented_control_frames_are_refused),
        cmocka_unit_test(test_lengths_with_the_top_bit_set_are_refused),
        cmocka_unit_test(test_frames_over_the_limit_are_refused_before_their_payload),
        cmocka_unit_test(test_ping_is_answered_with_its_payload),
        cmocka_unit_test(test_idle_connection_is_pinged),
        cmocka_unit_test(test_fragments_are_aggregated_around_control_frames),
        cmocka_unit_test(test_fragments_pass_as_they_come_without_aggregation),
        cmocka_unit_test(test_continuation_without_start_is_a_protocol_error),
        cmocka_unit_test(test_new_message_inside_a_fragmented_one_is_a_protocol_error),
        cmocka_unit_test(test_messages_over_the_limit_are_refused),
        cmocka_unit_test(test_utf8_check_agrees_with_the_reference),
        cmocka_unit_test(test_invalid_utf8_fails_the_connection_with_1007),
        cmocka_unit_test(test_utf8_split_across_fragments_at_every_byte),
        cmocka_unit_test(test_invalid_utf8_fails_fast_before_the_message_ends),
        cmocka_unit_test(test_close_is_answered_with_its_code_then_closed),
        cmocka_unit_test(test_bad_close_payloads_are_protocol_errors),
        cmocka_unit_test(test_our_close_waits_for_the_peers_then_closes),
        cmocka_unit_test(test_our_close_without_answer_times_out),
        cmocka_unit_test(test_close_frame_constructors_check_codes),
        cmocka_unit_test(test_deflate_round_trip_with_and_without_context_takeover),
        cmocka_unit_test(test_deflate_sets_rsv1_on_the_first_frame_only),
        cmocka_unit_test(test_deflate_leaves_a_shared_frame_unchanged),
        cmocka_unit_test(test_deflate_incompressible_message_of_the_limit_passes),
        cmocka_unit_test(test_deflate_empty_message_after_another_keeps_the_stream_whole),
        cmocka_unit_test(test_decompression_bomb_is_refused_with_1009),
        cmocka_unit_test(test_garbage_compressed_data_fails_the_connection),
        cmocka_unit_test(test_deflate_negotiation),
        cmocka_unit_test(test_server_handshake_upgrades_with_the_rfc_key),
        cmocka_unit_test(test_server_handshake_refuses_bad_requests),
        cmocka_unit_test(test_server_handshake_reads_an_offer_within_its_header),
        cmocka_unit_test(test_server_handshake_picks_subprotocol_and_deflate),
        cmocka_unit_test(test_other_paths_pass_through_to_http),
        cmocka_unit_test(test_server_handshake_deadline_closes_silent_connections),
        cmocka_unit_test(test_client_handshake_against_the_server),
        cmocka_unit_test(test_client_handshake_fails_on_bad_answers),
        cmocka_unit_test(test_client_handshake_reads_the_answer_with_the_http_codec),
        cmocka_unit_test(test_mutated_frame_streams_decode_or_close_properly),
    };
    return cmocka_run_group_tests_name("codec.ws", tests, NULL, NULL);
}
