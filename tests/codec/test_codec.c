/*
 * codec/ through the embedded channel: the decoder base (cumulation in both modes,
 * leftovers, decode_last, errors, removal), the framing decoders fed whole, frame by frame,
 * byte by byte and in odd chunks, too-long and hostile input, the length field prepender
 * round-tripping through the decoder, the encoder base, and nothing leaked.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/channel.h>
#include <eddy/codec.h>
#include <eddy/pipeline.h>

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Helpers
 */

/* Errors that passed the codec, counted by a handler after it (and stopped there). */
static struct {
    int n;
    int last;
} errs;

static void count_error(eddy_ctx_t *ctx, int err)
{
    (void)ctx;
    errs.n++;
    errs.last = err;
}

static const eddy_handler_ops_t errors_ops = {
    .name = "errors",
    .sharable = true,
    .exception_caught = count_error,
};

static eddy_channel_t *channel_with(const eddy_handler_ops_t *ops, void *state)
{
    errs.n = 0;
    errs.last = 0;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    assert_int_equal(eddy_pipeline_add_last(p, "codec", ops, state, eddy_free_state), 0);
    assert_int_equal(eddy_pipeline_add_last(p, "errors", &errors_ops, NULL, NULL), 0);
    return ch;
}

static eddy_channel_t *decoder_channel(const eddy_handler_ops_t *ops, eddy_decoder_t *d,
                                       eddy_cumulator_t cumulator)
{
    assert_non_null(d);
    assert_int_equal(eddy_decoder_set_cumulator(d, cumulator), 0);
    return channel_with(ops, d);
}

static void write_bytes(eddy_channel_t *ch, const void *bytes, size_t n)
{
    eddy_buf_t *b = eddy_buf_from(bytes, n);
    assert_non_null(b);
    eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
}

/* Feed n bytes in chunks of chunk bytes (0: all at once). */
static void feed(eddy_channel_t *ch, const void *bytes, size_t n, size_t chunk)
{
    const uint8_t *p = bytes;
    size_t off = 0;
    do {
        size_t k = chunk == 0 || chunk > n - off ? n - off : chunk;
        write_bytes(ch, p + off, k);
        off += k;
    } while (off < n);
}

static void free_msg(eddy_msg_t *msg)
{
    free(msg);
}

static void expect_frame(eddy_channel_t *ch, const void *bytes, size_t n)
{
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    assert_non_null(m);
    eddy_buf_t *b = eddy_buf_of(m);
    assert_non_null(b);
    assert_int_equal(eddy_buf_readable(b), n);
    if (n > 0) {
        assert_memory_equal(eddy_buf_read_ptr(b), bytes, n);
    }
    eddy_msg_release(m);
}

static void expect_str(eddy_channel_t *ch, const char *s)
{
    expect_frame(ch, s, strlen(s));
}

static void expect_nothing(eddy_channel_t *ch)
{
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    if (m != NULL) {
        eddy_msg_release(m);
        fail_msg("an unexpected message came out");
    }
}

static void drain(eddy_channel_t *ch)
{
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
        eddy_msg_release(m);
    }
}

/* The bytes of an outbound message (a buffer or a composite) as one buffer the caller owns. */
static eddy_buf_t *outbound_bytes(eddy_msg_t *m)
{
    assert_non_null(m);
    if (m->type == EDDY_MSG_BUF) {
        return eddy_buf_of(m);
    }
    assert_int_equal(m->type, EDDY_MSG_COMPOSITE);
    eddy_buf_t *b = eddy_composite_consolidate(eddy_composite_of(m));
    assert_non_null(b);
    eddy_msg_release(m);
    return b;
}

static size_t put_uint(uint8_t *p, uint64_t v, unsigned width, bool little_endian)
{
    for (unsigned i = 0; i < width; i++) {
        unsigned shift = 8 * (little_endian ? i : width - 1 - i);
        p[i] = (uint8_t)(v >> shift);
    }
    return width;
}

/* Frames into a stream: one write per frame (exact), all in one write (coalesced), one byte
 * per write, or odd chunks that split headers and payloads. */
enum { EXACT, COALESCED, BYTE_BY_BYTE, CHUNKS_OF_3, CHUNKS_OF_7, FEED_MODES };

typedef struct stream_s {
    uint8_t bytes[16384];
    size_t n;
    size_t ends[64]; /* where each frame ends */
    size_t frames;
} stream_t;

static void stream_end_frame(stream_t *s)
{
    assert_true(s->frames < 64);
    s->ends[s->frames++] = s->n;
}

static void stream_put(stream_t *s, const void *bytes, size_t n)
{
    assert_true(n <= sizeof(s->bytes) - s->n);
    memcpy(s->bytes + s->n, bytes, n);
    s->n += n;
}

static void feed_stream(eddy_channel_t *ch, const stream_t *s, int mode)
{
    switch (mode) {
    case EXACT: {
        size_t start = 0;
        for (size_t i = 0; i < s->frames; i++) {
            feed(ch, s->bytes + start, s->ends[i] - start, 0);
            start = s->ends[i];
        }
        break;
    }
    case COALESCED:
        feed(ch, s->bytes, s->n, 0);
        break;
    case BYTE_BY_BYTE:
        feed(ch, s->bytes, s->n, 1);
        break;
    case CHUNKS_OF_3:
        feed(ch, s->bytes, s->n, 3);
        break;
    default:
        feed(ch, s->bytes, s->n, 7);
        break;
    }
}

static void finish_clean(eddy_channel_t *ch, int64_t live)
{
    assert_true(eddy_embedded_finish(ch));
    assert_int_equal(eddy_buf_live_count(), live);
}

static const eddy_cumulator_t cumulators[] = {EDDY_CUMULATOR_MERGE, EDDY_CUMULATOR_COMPOSITE};

/* ---------------------------------------------------------------------------------------
 * The length field decoder
 */

/* A frame: `offset` filler bytes, the field holding len(payload) + delta, the payload. */
static void put_lf_frame(stream_t *s, size_t offset, unsigned width, bool le, int64_t delta,
                         const void *payload, size_t n)
{
    uint8_t head[32];
    memset(head, 0xA5, offset);
    put_uint(head + offset, (uint64_t)((int64_t)n + delta), width, le);
    stream_put(s, head, offset + width);
    stream_put(s, payload, n);
    stream_end_frame(s);
}

static void test_length_field_decoder_splits_frames_however_they_arrive(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static uint8_t big[3000];
    for (size_t i = 0; i < sizeof(big); i++) {
        big[i] = (uint8_t)(i * 7);
    }
    stream_t s = {.n = 0};
    put_lf_frame(&s, 0, 4, false, 0, "hello", 5);
    put_lf_frame(&s, 0, 4, false, 0, "", 0);
    put_lf_frame(&s, 0, 4, false, 0, "world!!", 7);
    put_lf_frame(&s, 0, 4, false, 0, big, sizeof(big));
    for (int mode = 0; mode < FEED_MODES; mode++) {
        for (size_t c = 0; c < 2; c++) {
            eddy_channel_t *ch =
                decoder_channel(eddy_length_field_decoder_ops(),
                                eddy_length_field_decoder_new(4096, 0, 4, 0, 4), cumulators[c]);
            feed_stream(ch, &s, mode);
            expect_str(ch, "hello");
            expect_str(ch, "");
            expect_str(ch, "world!!");
            expect_frame(ch, big, sizeof(big));
            expect_nothing(ch);
            assert_int_equal(errs.n, 0);
            finish_clean(ch, live);
        }
    }
}

static void test_length_field_decoder_reads_every_field_length_at_odd_offsets(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static const unsigned widths[] = {1, 2, 3, 4, 8};
    static uint8_t payload[200];
    for (size_t i = 0; i < sizeof(payload); i++) {
        payload[i] = (uint8_t)(255 - i);
    }
    static const size_t sizes[] = {0, 1, 200};
    for (size_t w = 0; w < 5; w++) {
        for (int le = 0; le < 2; le++) {
            for (size_t offset = 0; offset <= 3; offset += 3) {
                for (int strip = 0; strip < 2; strip++) {
                    unsigned width = widths[w];
                    stream_t s = {.n = 0};
                    for (size_t k = 0; k < 3; k++) {
                        put_lf_frame(&s, offset, width, le, 0, payload, sizes[k]);
                    }
                    eddy_length_field_options_t o = {
                        .max_frame_length = 4096,
                        .length_field_offset = offset,
                        .length_field_length = width,
                        .initial_bytes_to_strip = strip ? offset + width : 0,
                        .little_endian = le,
                        .fail_fast = true,
                    };
                    for (int mode = COALESCED; mode <= CHUNKS_OF_3; mode++) {
                        eddy_channel_t *ch = decoder_channel(eddy_length_field_decoder_ops(),
                                                             eddy_length_field_decoder_new_opts(&o),
                                                             cumulators[mode % 2]);
                        feed_stream(ch, &s, mode);
                        size_t start = 0;
                        for (size_t k = 0; k < 3; k++) {
                            size_t head = strip ? offset + width : 0;
                            expect_frame(ch, s.bytes + start + head, s.ends[k] - start - head);
                            start = s.ends[k];
                        }
                        expect_nothing(ch);
                        assert_int_equal(errs.n, 0);
                        finish_clean(ch, live);
                    }
                }
            }
        }
    }
}

/* The examples of Netty's LengthFieldBasedFrameDecoder documentation. */
static void test_length_field_decoder_applies_adjustment_and_strip(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static const struct {
        size_t offset;
        unsigned width;
        int64_t adjustment;
        size_t strip;
        const char *in;
        size_t in_len;
        const char *out;
        size_t out_len;
    } cases[] = {
        {0, 2, 0, 0, "\x00\x0cHELLO, WORLD", 14, "\x00\x0cHELLO, WORLD", 14},
        {0, 2, 0, 2, "\x00\x0cHELLO, WORLD", 14, "HELLO, WORLD", 12},
        {0, 2, -2, 0, "\x00\x0eHELLO, WORLD", 14, "\x00\x0eHELLO, WORLD", 14},
        {2, 3, 0, 0, "\xca\xfe\x00\x00\x0cHELLO, WORLD", 17, "\xca\xfe\x00\x00\x0cHELLO, WORLD",
         17},
        {0, 3, 2, 0, "\x00\x00\x0c\xca\xfeHELLO, WORLD", 17, "\x00\x00\x0c\xca\xfeHELLO, WORLD",
         17},
        {1, 2, 1, 3, "\xca\x00\x0c\xfeHELLO, WORLD", 16, "\xfeHELLO, WORLD", 13},
        {1, 2, -3, 3, "\xca\x00\x10\xfeHELLO, WORLD", 16, "\xfeHELLO, WORLD", 13},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (size_t chunk = 0; chunk <= 1; chunk++) {
            eddy_channel_t *ch =
                decoder_channel(eddy_length_field_decoder_ops(),
                                eddy_length_field_decoder_new(64, cases[i].offset, cases[i].width,
                                                              cases[i].adjustment, cases[i].strip),
                                cumulators[chunk]);
            feed(ch, cases[i].in, cases[i].in_len, chunk);
            feed(ch, cases[i].in, cases[i].in_len, chunk); /* twice: back to back */
            expect_frame(ch, cases[i].out, cases[i].out_len);
            expect_frame(ch, cases[i].out, cases[i].out_len);
            expect_nothing(ch);
            assert_int_equal(errs.n, 0);
            finish_clean(ch, live);
        }
    }
}

static void test_length_field_decoder_discards_too_long_frames(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static uint8_t junk[100];
    memset(junk, 'j', sizeof(junk));
    stream_t s = {.n = 0};
    put_lf_frame(&s, 0, 4, false, 0, "abc", 3);
    put_lf_frame(&s, 0, 4, false, 0, junk, sizeof(junk)); /* 104 > 16 */
    put_lf_frame(&s, 0, 4, false, 0, "def", 3);
    put_lf_frame(&s, 0, 4, false, 0, junk, 13); /* 17 > 16, arriving whole */
    put_lf_frame(&s, 0, 4, false, 0, "ghi", 3);
    for (int fail_fast = 0; fail_fast < 2; fail_fast++) {
        for (int mode = 0; mode < FEED_MODES; mode++) {
            eddy_length_field_options_t o = {
                .max_frame_length = 16,
                .length_field_length = 4,
                .initial_bytes_to_strip = 4,
                .fail_fast = fail_fast,
            };
            eddy_channel_t *ch =
                decoder_channel(eddy_length_field_decoder_ops(),
                                eddy_length_field_decoder_new_opts(&o), cumulators[mode % 2]);
            feed_stream(ch, &s, mode);
            expect_str(ch, "abc");
            expect_str(ch, "def");
            expect_str(ch, "ghi");
            expect_nothing(ch);
            assert_int_equal(errs.n, 2);
            assert_int_equal(errs.last, EDDY_ETOOLONGFRAME);
            finish_clean(ch, live);
        }
    }
}

static void test_length_field_decoder_fails_fast_or_after_the_discarded_frame(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    uint8_t head[4];
    put_uint(head, 40, 4, false);
    for (int fail_fast = 0; fail_fast < 2; fail_fast++) {
        eddy_length_field_options_t o = {
            .max_frame_length = 16,
            .length_field_length = 4,
            .fail_fast = fail_fast,
        };
        eddy_channel_t *ch =
            decoder_channel(eddy_length_field_decoder_ops(), eddy_length_field_decoder_new_opts(&o),
                            EDDY_CUMULATOR_MERGE);
        feed(ch, head, 3, 1);
        assert_int_equal(errs.n, 0);
        feed(ch, head + 3, 1, 0);
        assert_int_equal(errs.n, fail_fast ? 1 : 0); /* the length is known */
        for (int i = 0; i < 39; i++) {
            feed(ch, "x", 1, 0);
        }
        assert_int_equal(errs.n, fail_fast ? 1 : 0);
        feed(ch, "x", 1, 0); /* the frame's last byte */
        assert_int_equal(errs.n, 1);
        assert_int_equal(errs.last, EDDY_ETOOLONGFRAME);
        expect_nothing(ch);
        finish_clean(ch, live);
    }
}

static void test_length_field_decoder_never_buffers_a_too_long_frame(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch =
        decoder_channel(eddy_length_field_decoder_ops(),
                        eddy_length_field_decoder_new(1024, 0, 8, 0, 8), EDDY_CUMULATOR_MERGE);
    uint8_t head[8];
    put_uint(head, (uint64_t)1 << 40, 8, false); /* a terabyte announced */
    feed(ch, head, sizeof(head), 0);
    assert_int_equal(errs.n, 1);
    static uint8_t chunk[65536];
    memset(chunk, 'z', sizeof(chunk));
    for (int i = 0; i < 64; i++) { /* 4 MiB */
        feed(ch, chunk, sizeof(chunk), 0);
        assert_int_equal(eddy_buf_live_count(), live); /* nothing kept between reads */
    }
    assert_int_equal(errs.n, 1);
    expect_nothing(ch);
    finish_clean(ch, live);
}

static void test_length_field_decoder_rejects_negative_short_and_overflowing_lengths(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static const struct {
        unsigned width;
        int64_t adjustment;
        uint64_t value;
    } bad[] = {
        {8, 0, (uint64_t)1 << 63},     /* negative before adjustment (a Java long) */
        {8, 0, UINT64_MAX},            /* -1 */
        {1, -10, 3},                   /* adjusted below the header's length */
        {4, -5, 0},                    /* negative after adjustment */
        {8, 100, INT64_MAX},           /* overflows 64 bits */
        {8, INT64_MAX, INT64_MAX - 1}, /* overflows 64 bits */
        {8, INT64_MIN, 5},             /* far below zero */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        for (size_t c = 0; c < 2; c++) {
            eddy_channel_t *ch = decoder_channel(
                eddy_length_field_decoder_ops(),
                eddy_length_field_decoder_new(64, 0, bad[i].width, bad[i].adjustment, 0),
                cumulators[c]);
            uint8_t frame[16];
            size_t n = put_uint(frame, bad[i].value, bad[i].width, false);
            memcpy(frame + n, "garbage", 7);
            feed(ch, frame, n + 7, 0);
            assert_int_equal(errs.n, 1);
            assert_int_equal(errs.last, EDDY_EDECODE);
            expect_nothing(ch);
            finish_clean(ch, live);
        }
    }
    /* The stream is broken: after the error the channel closes (after a flush), and what
     * comes later is not decoded. */
    eddy_channel_t *ch =
        decoder_channel(eddy_length_field_decoder_ops(),
                        eddy_length_field_decoder_new(64, 0, 8, 0, 8), EDDY_CUMULATOR_MERGE);
    uint8_t frame[16];
    put_uint(frame, (uint64_t)1 << 63, 8, false);
    feed(ch, frame, 8, 0);
    assert_false(eddy_channel_is_open(ch));
    put_uint(frame, 2, 8, false);
    memcpy(frame + 8, "ok", 2);
    feed(ch, frame, 10, 1);
    expect_nothing(ch);
    assert_int_equal(errs.n, 1);
    finish_clean(ch, live);
}

static void test_length_field_decoder_skips_frames_shorter_than_the_strip(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch =
        decoder_channel(eddy_length_field_decoder_ops(),
                        eddy_length_field_decoder_new(64, 0, 2, 0, 5), EDDY_CUMULATOR_MERGE);
    /* 2 + 1 bytes < strip 5: skipped whole; then 2 + 4 bytes: 1 left after the strip. */
    feed(ch,
         "\x00\x01"
         "a"
         "\x00\x04"
         "bcdX",
         9, 0);
    assert_int_equal(errs.n, 1);
    assert_int_equal(errs.last, EDDY_EDECODE);
    expect_str(ch, "X");
    expect_nothing(ch);
    finish_clean(ch, live);
}

static void test_length_field_decoders_nest(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (size_t c = 0; c < 2; c++) {
        /* Outer frames (2-byte length) carry inner frames (1-byte length) that span them. */
        eddy_channel_t *ch =
            decoder_channel(eddy_length_field_decoder_ops(),
                            eddy_length_field_decoder_new(64, 0, 2, 0, 2), cumulators[c]);
        eddy_decoder_t *inner = eddy_length_field_decoder_new(16, 0, 1, 0, 1);
        assert_int_equal(eddy_decoder_set_cumulator(inner, cumulators[1 - c]), 0);
        assert_int_equal(eddy_pipeline_add_after(eddy_channel_pipeline(ch), "codec", "inner",
                                                 eddy_length_field_decoder_ops(), inner,
                                                 eddy_free_state),
                         0);
        feed(ch,
             "\x00\x05\x02hi\x03o"
             "\x00\x06ne\x03two",
             15, c == 0 ? 0 : 4);
        expect_str(ch, "hi");
        expect_str(ch, "one");
        expect_str(ch, "two");
        expect_nothing(ch);
        assert_int_equal(errs.n, 0);
        finish_clean(ch, live);
    }
}

static void test_length_field_decoder_refuses_bad_parameters(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    assert_null(eddy_length_field_decoder_new(0, 0, 4, 0, 0));
    assert_null(eddy_length_field_decoder_new(64, 0, 5, 0, 0));
    assert_null(eddy_length_field_decoder_new(64, 0, 0, 0, 0));
    assert_null(eddy_length_field_decoder_new(64, 61, 4, 0, 0));
    assert_null(eddy_length_field_decoder_new(3, 0, 4, 0, 0));
    assert_null(eddy_length_field_decoder_new_opts(NULL));
    assert_null(eddy_length_field_prepender_new(5));
    assert_null(eddy_length_field_prepender_new(0));
    assert_null(eddy_line_decoder_new(0, true, false));
    assert_null(eddy_fixed_length_decoder_new(0));
    eddy_delimiter_t empty = {"", 0};
    assert_null(eddy_delimiter_decoder_new(8, true, true, &empty, 1));
    assert_null(eddy_delimiter_decoder_new(8, true, true, NULL, 0));
    assert_null(eddy_decoder_new(NULL, 0));
    assert_int_equal(eddy_decoder_set_cumulator(NULL, EDDY_CUMULATOR_MERGE), EDDY_EINVAL);

    /* A failed constructor still makes a handler: it refuses what it reads. */
    eddy_channel_t *ch =
        channel_with(eddy_length_field_decoder_ops(), eddy_length_field_decoder_new(0, 0, 4, 0, 0));
    feed(ch, "\x00\x00\x00\x01x", 5, 0);
    assert_int_equal(errs.n, 1);
    assert_int_equal(errs.last, EDDY_EINVAL);
    expect_nothing(ch);
    finish_clean(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * The length field prepender
 */

static void test_length_field_prepender_round_trips_through_the_decoder(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static const unsigned widths[] = {1, 2, 3, 4, 8};
    static uint8_t payload[5000];
    for (size_t i = 0; i < sizeof(payload); i++) {
        payload[i] = (uint8_t)(i * 13 + 1);
    }
    static const size_t sizes[] = {0, 5, 200, 1024, 1025, 5000};
    for (size_t w = 0; w < 5; w++) {
        for (int le = 0; le < 2; le++) {
            for (int includes = 0; includes < 2; includes++) {
                for (int64_t adj = 0; adj <= 5; adj += 5) {
                    unsigned width = widths[w];
                    eddy_length_field_prepender_options_t po = {
                        .length_field_length = width,
                        .length_adjustment = adj,
                        .length_includes_length_field = includes,
                        .little_endian = le,
                    };
                    eddy_length_field_options_t dopt = {
                        .max_frame_length = 1 << 20,
                        .length_field_length = width,
                        .length_adjustment = -adj - (includes ? (int64_t)width : 0),
                        .initial_bytes_to_strip = width,
                        .little_endian = le,
                        .fail_fast = true,
                    };
                    eddy_channel_t *out = channel_with(eddy_length_field_prepender_ops(),
                                                       eddy_length_field_prepender_new_opts(&po));
                    eddy_channel_t *in = decoder_channel(
                        eddy_length_field_decoder_ops(), eddy_length_field_decoder_new_opts(&dopt),
                        le ? EDDY_CUMULATOR_COMPOSITE : EDDY_CUMULATOR_MERGE);
                    size_t sent = 0;
                    for (size_t k = 0; k < 6; k++) {
                        if (width < 8 && sizes[k] + (size_t)adj + width >= (size_t)1
                                                                               << (8 * width)) {
                            continue; /* does not fit the field: tested below */
                        }
                        eddy_buf_t *b = eddy_buf_from(payload, sizes[k]);
                        assert_true(eddy_embedded_write_outbound(out, eddy_buf_msg(b)));
                        eddy_msg_t *m = eddy_embedded_read_outbound(out);
                        /* Big payloads go out in a composite, uncopied; small ones copied. */
                        assert_int_equal(m->type,
                                         sizes[k] > 1024 ? EDDY_MSG_COMPOSITE : EDDY_MSG_BUF);
                        eddy_buf_t *bytes = outbound_bytes(m);
                        assert_int_equal(eddy_buf_readable(bytes), width + sizes[k]);
                        feed(in, eddy_buf_read_ptr(bytes), eddy_buf_readable(bytes), 3);
                        eddy_buf_release(bytes);
                        expect_frame(in, payload, sizes[k]);
                        sent++;
                    }
                    assert_true(sent >= 3);
                    expect_nothing(in);
                    assert_int_equal(errs.n, 0);
                    finish_clean(in, live);
                    finish_clean(out, live);
                }
            }
        }
    }
}

static int write_with_promise(eddy_channel_t *ch, eddy_msg_t *msg)
{
    eddy_promise_t *p = eddy_promise_new(NULL);
    assert_non_null(p);
    eddy_channel_write_and_flush(ch, msg, p);
    eddy_embedded_run_pending(ch);
    assert_true(eddy_future_is_done(p));
    int err = eddy_future_error(p);
    eddy_future_release(p);
    return err;
}

static void test_length_field_prepender_fails_lengths_the_field_cannot_hold(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static uint8_t payload[70000];
    eddy_channel_t *ch =
        channel_with(eddy_length_field_prepender_ops(), eddy_length_field_prepender_new(1));
    assert_int_equal(write_with_promise(ch, eddy_buf_msg(eddy_buf_from(payload, 256))),
                     EDDY_ETOOLONGFRAME);
    assert_int_equal(write_with_promise(ch, eddy_buf_msg(eddy_buf_from(payload, 255))), 0);
    eddy_buf_release(outbound_bytes(eddy_embedded_read_outbound(ch)));
    assert_null(eddy_embedded_read_outbound(ch));
    finish_clean(ch, live);

    ch = channel_with(eddy_length_field_prepender_ops(), eddy_length_field_prepender_new(2));
    assert_int_equal(write_with_promise(ch, eddy_buf_msg(eddy_buf_from(payload, 65536))),
                     EDDY_ETOOLONGFRAME);
    assert_null(eddy_embedded_read_outbound(ch));
    finish_clean(ch, live);

    eddy_length_field_prepender_options_t o = {
        .length_field_length = 4,
        .length_adjustment = -10,
    };
    ch = channel_with(eddy_length_field_prepender_ops(), eddy_length_field_prepender_new_opts(&o));
    assert_int_equal(write_with_promise(ch, eddy_buf_msg(eddy_buf_from(payload, 3))), EDDY_EINVAL);
    assert_null(eddy_embedded_read_outbound(ch));
    finish_clean(ch, live);

    o = (eddy_length_field_prepender_options_t){
        .length_field_length = 8,
        .length_adjustment = INT64_MAX,
    };
    ch = channel_with(eddy_length_field_prepender_ops(), eddy_length_field_prepender_new_opts(&o));
    assert_int_equal(write_with_promise(ch, eddy_buf_msg(eddy_buf_from(payload, 3))),
                     EDDY_ETOOLONGFRAME);
    finish_clean(ch, live);
}

static eddy_composite_t *composite_of_parts(const uint8_t *bytes, const size_t *parts, size_t n)
{
    eddy_composite_t *c = eddy_composite_new(0);
    assert_non_null(c);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(eddy_composite_add(c, eddy_buf_from(bytes, parts[i])), 0);
        bytes += parts[i];
    }
    return c;
}

static void test_length_field_prepender_joins_composites_and_passes_other_messages(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static uint8_t payload[3000];
    for (size_t i = 0; i < sizeof(payload); i++) {
        payload[i] = (uint8_t)(i ^ 0x5c);
    }
    eddy_channel_t *ch =
        channel_with(eddy_length_field_prepender_ops(), eddy_length_field_prepender_new(2));
    static const size_t big[] = {1000, 1500, 500}, small[] = {3, 4};
    for (int k = 0; k < 2; k++) {
        const size_t *parts = k == 0 ? big : small;
        size_t n = k == 0 ? 3 : 2, total = 0;
        for (size_t i = 0; i < n; i++) {
            total += parts[i];
        }
        eddy_composite_t *c = composite_of_parts(payload, parts, n);
        assert_true(eddy_embedded_write_outbound(ch, eddy_composite_msg(c)));
        eddy_msg_t *m = eddy_embedded_read_outbound(ch);
        if (k == 0) {
            assert_int_equal(m->type, EDDY_MSG_COMPOSITE);
            assert_int_equal(eddy_composite_components(eddy_composite_of(m)), 4);
        }
        eddy_buf_t *b = outbound_bytes(m);
        uint8_t head[2];
        put_uint(head, total, 2, false);
        assert_int_equal(eddy_buf_readable(b), 2 + total);
        assert_memory_equal(eddy_buf_read_ptr(b), head, 2);
        assert_memory_equal(eddy_buf_read_ptr(b) + 2, payload, total);
        eddy_buf_release(b);
    }
    /* Not bytes: passed on untouched (and refused by the head, which only writes bytes). */
    eddy_msg_t *other = malloc(sizeof(*other));
    eddy_msg_init(other, EDDY_MSG_USER, free_msg);
    assert_int_equal(write_with_promise(ch, other), EDDY_ENOTSUP);
    assert_null(eddy_embedded_read_outbound(ch));
    finish_clean(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * The line decoder
 */

static void test_line_decoder_splits_lf_and_crlf_lines(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    stream_t s = {.n = 0};
    static const char *lines[] = {"first\n", "second\r\n", "\n", "\r\n", "a\rb\n", "last\r\n"};
    for (size_t i = 0; i < 6; i++) {
        stream_put(&s, lines[i], strlen(lines[i]));
        stream_end_frame(&s);
    }
    for (int strip = 0; strip < 2; strip++) {
        for (int mode = 0; mode < FEED_MODES; mode++) {
            eddy_channel_t *ch =
                decoder_channel(eddy_line_decoder_ops(), eddy_line_decoder_new(64, strip, false),
                                cumulators[mode % 2]);
            feed_stream(ch, &s, mode);
            for (size_t i = 0; i < 6; i++) {
                size_t n = strlen(lines[i]);
                if (strip) {
                    n -= n >= 2 && lines[i][n - 2] == '\r' ? 2 : 1;
                }
                expect_frame(ch, lines[i], n);
            }
            expect_nothing(ch);
            assert_int_equal(errs.n, 0);
            finish_clean(ch, live);
        }
    }
}

static void test_line_decoder_discards_too_long_lines(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    stream_t s = {.n = 0};
    static const char *chunks[] = {
        "short\n", "xxxxxxxxxxxxxxxxxxxxxxxxx\r\n", "ok\n", "yyyyyyyyy\n", "12345678\r\n", "end\n"};
    for (size_t i = 0; i < 6; i++) {
        stream_put(&s, chunks[i], strlen(chunks[i]));
        stream_end_frame(&s);
    }
    for (int fail_fast = 0; fail_fast < 2; fail_fast++) {
        for (int mode = 0; mode < FEED_MODES; mode++) {
            eddy_channel_t *ch =
                decoder_channel(eddy_line_decoder_ops(), eddy_line_decoder_new(8, true, fail_fast),
                                cumulators[mode % 2]);
            feed_stream(ch, &s, mode);
            expect_str(ch, "short");
            expect_str(ch, "ok");
            expect_str(ch, "12345678"); /* exactly the maximum, its "\r\n" split or not */
            expect_str(ch, "end");
            expect_nothing(ch);
            assert_int_equal(errs.n, 2);
            assert_int_equal(errs.last, EDDY_ETOOLONGFRAME);
            finish_clean(ch, live);
        }
    }
    /* When the error fires: at the 9th byte with fail fast, else at the delimiter. */
    for (int fail_fast = 0; fail_fast < 2; fail_fast++) {
        eddy_channel_t *ch =
            decoder_channel(eddy_line_decoder_ops(), eddy_line_decoder_new(8, true, fail_fast),
                            EDDY_CUMULATOR_MERGE);
        feed(ch, "xxxxxxxx", 8, 1);
        assert_int_equal(errs.n, 0);
        feed(ch, "x", 1, 0);
        assert_int_equal(errs.n, fail_fast ? 1 : 0);
        feed(ch, "xxxxxxxxxxxx", 12, 5);
        assert_int_equal(errs.n, fail_fast ? 1 : 0);
        feed(ch, "\nnext\n", 6, 0);
        assert_int_equal(errs.n, 1);
        expect_str(ch, "next");
        finish_clean(ch, live);
    }
}

static void test_line_decoder_drops_a_partial_line_at_close(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (size_t c = 0; c < 2; c++) {
        eddy_channel_t *ch = decoder_channel(eddy_line_decoder_ops(),
                                             eddy_line_decoder_new(64, true, false), cumulators[c]);
        feed(ch, "one\ntw", 6, 0);
        feed(ch, "o", 1, 0);
        expect_str(ch, "one");
        eddy_embedded_shutdown_input(ch); /* no half-closure: closes */
        expect_nothing(ch);
        finish_clean(ch, live);
    }
}

/* ---------------------------------------------------------------------------------------
 * The delimiter and fixed length decoders
 */

static void test_delimiter_decoder_prefers_the_shortest_frame(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    const eddy_delimiter_t lines[] = {{"\r\n", 2}, {"\n", 1}};
    const eddy_delimiter_t ab[] = {{"b", 1}, {"ab", 2}, {"\0", 1}};
    for (int mode = 0; mode < FEED_MODES; mode++) {
        eddy_channel_t *ch = decoder_channel(eddy_delimiter_decoder_ops(),
                                             eddy_delimiter_decoder_new(64, true, true, lines, 2),
                                             cumulators[mode % 2]);
        stream_t s = {.n = 0};
        stream_put(&s, "TestLine\r\ng\r\n", 13);
        stream_end_frame(&s);
        stream_put(&s, "x\ny\r\n", 5);
        stream_end_frame(&s);
        feed_stream(ch, &s, mode);
        expect_str(ch, "TestLine");
        expect_str(ch, "g");
        expect_str(ch, "x");
        expect_str(ch, "y");
        expect_nothing(ch);
        finish_clean(ch, live);

        ch = decoder_channel(eddy_delimiter_decoder_ops(),
                             eddy_delimiter_decoder_new(64, false, true, ab, 3),
                             cumulators[mode % 2]);
        s = (stream_t){.n = 0};
        /* "xxab": "ab" ends "xx" before "b" ends "xxa". Then "zb", "q\0", and "aab", where
         * "ab" again ends the shorter frame. */
        stream_put(&s, "xxabzbq\0aab", 11);
        stream_end_frame(&s);
        feed_stream(ch, &s, mode);
        expect_str(ch, "xxab");
        expect_str(ch, "zb");
        expect_frame(ch, "q\0", 2);
        expect_str(ch, "aab");
        expect_nothing(ch);
        assert_int_equal(errs.n, 0);
        finish_clean(ch, live);

        /* A delimiter still arriving may win: "eee" ties "ee" and is listed first, "abcdef"
         * starts before "cd". However the reads split the stream, the frames are those of
         * the whole stream (found by fuzz/fuzz_frame.c). */
        const eddy_delimiter_t overlap[] = {{"eee", 3}, {"ee", 2}, {"abcdef", 6}, {"cd", 2}};
        ch = decoder_channel(eddy_delimiter_decoder_ops(),
                             eddy_delimiter_decoder_new(64, true, true, overlap, 4),
                             cumulators[mode % 2]);
        s = (stream_t){.n = 0};
        stream_put(&s, "xeeeyyabcdefzzcdw", 17);
        stream_end_frame(&s);
        feed_stream(ch, &s, mode);
        expect_str(ch, "x");
        expect_str(ch, "yy");
        expect_str(ch, "zz");
        expect_nothing(ch);
        assert_int_equal(errs.n, 0);
        finish_clean(ch, live);
    }
}

static void test_delimiter_decoder_discards_too_long_frames(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    const eddy_delimiter_t end[] = {{"END", 3}};
    stream_t s = {.n = 0};
    stream_put(&s, "okEND", 5);
    stream_end_frame(&s);
    stream_put(&s, "toolongframeE", 13); /* the delimiter split across two reads */
    stream_end_frame(&s);
    stream_put(&s, "NDnextEND", 9);
    stream_end_frame(&s);
    stream_put(&s, "abcdEN", 6); /* exactly the maximum, then a split delimiter */
    stream_end_frame(&s);
    stream_put(&s, "DlastlongerEND", 14); /* too long, delimited in one read */
    stream_end_frame(&s);
    stream_put(&s, "fineEND", 7);
    stream_end_frame(&s);
    for (int fail_fast = 0; fail_fast < 2; fail_fast++) {
        for (int mode = 0; mode < FEED_MODES; mode++) {
            eddy_channel_t *ch = decoder_channel(
                eddy_delimiter_decoder_ops(),
                eddy_delimiter_decoder_new(4, true, fail_fast, end, 1), cumulators[mode % 2]);
            feed_stream(ch, &s, mode);
            expect_str(ch, "ok");
            expect_str(ch, "next");
            expect_str(ch, "abcd");
            expect_str(ch, "fine");
            expect_nothing(ch);
            assert_int_equal(errs.n, 2);
            assert_int_equal(errs.last, EDDY_ETOOLONGFRAME);
            finish_clean(ch, live);
        }
    }
}

static void test_fixed_length_decoder_splits_fixed_frames(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    stream_t s = {.n = 0};
    stream_put(&s, "abcdefghijk", 11);
    stream_end_frame(&s);
    for (int mode = 0; mode < FEED_MODES; mode++) {
        eddy_channel_t *ch =
            decoder_channel(eddy_fixed_length_decoder_ops(), eddy_fixed_length_decoder_new(3),
                            cumulators[mode % 2]);
        feed_stream(ch, &s, mode);
        expect_str(ch, "abc");
        expect_str(ch, "def");
        expect_str(ch, "ghi");
        expect_nothing(ch); /* "jk" waits, and is released at the end */
        finish_clean(ch, live);
    }
}

static void test_composite_cumulation_merges_many_small_reads(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static uint8_t big[3000]; /* 3000 one-byte reads: more than a composite's 1024 parts */
    for (size_t i = 0; i < sizeof(big); i++) {
        big[i] = (uint8_t)(i * 31);
    }
    eddy_channel_t *ch =
        decoder_channel(eddy_fixed_length_decoder_ops(), eddy_fixed_length_decoder_new(sizeof(big)),
                        EDDY_CUMULATOR_COMPOSITE);
    feed(ch, big, sizeof(big), 1);
    feed(ch, big, sizeof(big), 1000);
    expect_frame(ch, big, sizeof(big));
    expect_frame(ch, big, sizeof(big));
    expect_nothing(ch);
    finish_clean(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * Hostile input: random bytes in random chunks into every decoder
 */

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_decoders_survive_random_input(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    const eddy_delimiter_t delims[] = {{"\r\n", 2}, {"\0", 1}, {"xyz", 3}};
    static uint8_t noise[4096];
    for (int round = 0; round < 40; round++) {
        eddy_decoder_t *d;
        const eddy_handler_ops_t *ops;
        switch (round % 5) {
        case 0:
            ops = eddy_length_field_decoder_ops();
            d = eddy_length_field_decoder_new(200, (size_t)(round % 3), 1, -1, 1);
            break;
        case 1: {
            ops = eddy_length_field_decoder_ops();
            eddy_length_field_options_t o = {
                .max_frame_length = 300,
                .length_field_offset = 1,
                .length_field_length = (unsigned[]){1, 3, 8}[round % 3],
                .length_adjustment = (int64_t)(next_random() % 64) - 32,
                .initial_bytes_to_strip = 2,
                .little_endian = round & 1,
                .fail_fast = round & 2,
            };
            d = eddy_length_field_decoder_new_opts(&o);
            break;
        }
        case 2:
            ops = eddy_line_decoder_ops();
            d = eddy_line_decoder_new(40, round & 1, round & 2);
            break;
        case 3:
            ops = eddy_delimiter_decoder_ops();
            d = eddy_delimiter_decoder_new(40, round & 1, round & 2, delims, 3);
            break;
        default:
            ops = eddy_fixed_length_decoder_ops();
            d = eddy_fixed_length_decoder_new(1 + next_random() % 50);
            break;
        }
        eddy_channel_t *ch = decoder_channel(ops, d, cumulators[(round / 5) % 2]);
        for (int burst = 0; burst < 30; burst++) {
            /* Delimiters and zeros (small lengths) among the noise, so that frames come out,
             * too-long and negative lengths occur, and the decoders fall in and out of step. */
            static const uint8_t special[] = {'\r', '\n', 0, 'x', 'y', 'z', 1, 2};
            for (size_t i = 0; i < sizeof(noise); i++) {
                uint64_t r = next_random();
                switch (r & 3) {
                case 0:
                    noise[i] = special[(r >> 8) % sizeof(special)];
                    break;
                case 1:
                    noise[i] = 0;
                    break;
                default:
                    noise[i] = (uint8_t)(r >> 16);
                    break;
                }
            }
            size_t n = 1 + next_random() % sizeof(noise);
            feed(ch, noise, n, 1 + next_random() % 300);
            drain(ch);
        }
        errs.n = 0;
        eddy_embedded_shutdown_input(ch);
        drain(ch);
        finish_clean(ch, live);
    }
}

/* ---------------------------------------------------------------------------------------
 * A custom decoder on the base: records ending in ';', the last one unterminated; '!' is
 * malformed. Each record comes out as a message of its own type.
 */

enum { MSG_RECORD = EDDY_MSG_USER + 1 };

typedef struct record_s {
    eddy_msg_t hdr;
    bool last; /* made by decode_last: the input ended without ';' */
    size_t len;
    char text[];
} record_t;

static int emit_record(eddy_cumulation_t *in, eddy_decoder_out_t *out, size_t len, bool last)
{
    record_t *r = malloc(sizeof(*r) + len + 1);
    if (r == NULL) {
        return EDDY_ENOMEM;
    }
    eddy_msg_init(&r->hdr, MSG_RECORD, free_msg);
    r->last = last;
    r->len = len;
    eddy_cumulation_get_bytes(in, 0, r->text, len);
    r->text[len] = '\0';
    eddy_cumulation_skip(in, len + (last ? 0 : 1));
    return eddy_decoder_emit(out, &r->hdr);
}

typedef struct records_s {
    int decodes;       /* decode calls */
    int lasts;         /* decode_last calls */
    int *destroyed;    /* counts destroy calls, outside the state */
    bool remove_after; /* remove its own handler after the first record */
    bool close_on_bye; /* close the channel after the record "bye" */
} records_t;

static int records_lasts; /* decode_last calls, over every records decoder */

static int records_decode(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in,
                          eddy_decoder_out_t *out)
{
    records_t *rs = self;
    rs->decodes++;
    int64_t bang = eddy_cumulation_find(in, 0, '!');
    int64_t end = eddy_cumulation_find(in, 0, ';');
    if (bang >= 0 && (end < 0 || bang < end)) {
        return EDDY_EDECODE;
    }
    if (end < 0) {
        return 0;
    }
    bool bye = end == 3 && eddy_cumulation_find_bytes(in, 0, "bye", 3) == 0;
    int err = emit_record(in, out, (size_t)end, false);
    if (err == 0 && rs->remove_after) {
        /* Hand the rest of the stream to whoever follows; self and in are gone after this. */
        eddy_pipeline_remove(eddy_ctx_pipeline(ctx), eddy_ctx_name(ctx));
    } else if (err == 0 && rs->close_on_bye && bye) {
        eddy_ctx_close(ctx, NULL); /* the same: self and in are gone */
    }
    return err;
}

static int records_decode_last(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in,
                               eddy_decoder_out_t *out)
{
    (void)ctx;
    records_t *rs = self;
    rs->lasts++;
    records_lasts++;
    size_t n = eddy_cumulation_readable(in);
    return n > 0 ? emit_record(in, out, n, true) : 0;
}

static void records_destroy(void *self)
{
    records_t *rs = self;
    (*rs->destroyed)++;
}

static const eddy_decoder_ops_t records_ops = {
    .name = "records",
    .decode = records_decode,
    .decode_last = records_decode_last,
    .destroy = records_destroy,
};

static const eddy_handler_ops_t records_handler = EDDY_DECODER_HANDLER_OPS("records");

static eddy_decoder_t *records_new(int *destroyed, bool remove_after)
{
    eddy_decoder_t *d = eddy_decoder_new(&records_ops, sizeof(records_t));
    assert_non_null(d);
    records_t *rs = eddy_decoder_self(d);
    rs->destroyed = destroyed;
    rs->remove_after = remove_after;
    return d;
}

static eddy_channel_t *records_channel(int *destroyed, bool remove_after,
                                       eddy_cumulator_t cumulator)
{
    return decoder_channel(&records_handler, records_new(destroyed, remove_after), cumulator);
}

static void expect_record(eddy_channel_t *ch, const char *text, bool last)
{
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    assert_non_null(m);
    assert_int_equal(m->type, MSG_RECORD);
    record_t *r = EDDY_CONTAINER_OF(m, record_t, hdr);
    assert_string_equal(r->text, text);
    assert_int_equal(r->last, last);
    eddy_msg_release(m);
}

static void test_custom_decoder_keeps_leftovers_and_decodes_last_on_close(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (int mode = 0; mode < FEED_MODES; mode++) {
        int destroyed = 0;
        eddy_decoder_t *d = records_new(&destroyed, false);
        records_t *rs = eddy_decoder_self(d);
        eddy_channel_t *ch = decoder_channel(&records_handler, d, cumulators[mode % 2]);
        stream_t s = {.n = 0};
        stream_put(&s, "alpha;", 6);
        stream_end_frame(&s);
        stream_put(&s, ";beta;gam", 9);
        stream_end_frame(&s);
        stream_put(&s, "ma", 2);
        stream_end_frame(&s);
        feed_stream(ch, &s, mode);
        expect_record(ch, "alpha", false);
        expect_record(ch, "", false);
        expect_record(ch, "beta", false);
        expect_nothing(ch); /* "gamma" waits for its ';' */
        assert_int_equal(rs->lasts, 0);
        eddy_embedded_shutdown_input(ch); /* closes: decode_last gets the rest */
        expect_record(ch, "gamma", true);
        expect_nothing(ch);
        assert_int_equal(destroyed, 1);
        assert_int_equal(errs.n, 0);
        finish_clean(ch, live);
    }
}

static void test_decoder_decodes_last_on_input_shutdown_with_half_closure(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    int destroyed = 0;
    eddy_decoder_t *d = records_new(&destroyed, false);
    eddy_channel_t *ch = decoder_channel(&records_handler, d, EDDY_CUMULATOR_MERGE);
    assert_int_equal(eddy_channel_set_option(ch, EDDY_ALLOW_HALF_CLOSURE, 1), 0);
    feed(ch, "a;b", 3, 0);
    expect_record(ch, "a", false);
    eddy_embedded_shutdown_input(ch);
    assert_true(eddy_channel_is_open(ch));
    expect_record(ch, "b", true);
    int events[4];
    assert_int_equal(eddy_embedded_events(ch, events, 4), 1); /* passed on */
    assert_int_equal(events[0], EDDY_EVENT_INPUT_SHUTDOWN);
    assert_int_equal(destroyed, 0);
    finish_clean(ch, live);
    assert_int_equal(destroyed, 1);
}

static void test_decoder_error_discards_the_cumulation(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (size_t c = 0; c < 2; c++) {
        int destroyed = 0;
        eddy_channel_t *ch = records_channel(&destroyed, false, cumulators[c]);
        feed(ch, "ok;pend", 7, 0);
        feed(ch, "ing!lost;", 9, 0);
        expect_record(ch, "ok", false); /* emitted before the error: delivered */
        expect_nothing(ch);
        assert_int_equal(errs.n, 1);
        assert_int_equal(errs.last, EDDY_EDECODE);
        /* Out of step with the stream: the channel closed after the batch's flush, and
         * nothing after the error is decoded. */
        assert_false(eddy_channel_is_open(ch));
        feed(ch, "fresh;", 6, 2);
        expect_nothing(ch);
        finish_clean(ch, live);
    }
}

/* A handler as users write it: answer at channel_read, flush at channel_read_complete, close
 * in exception_caught. */
static void answer_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_ctx_write(ctx, msg, NULL);
}

static void answer_flush(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
}

static void answer_exception(eddy_ctx_t *ctx, int err)
{
    errs.n++;
    errs.last = err;
    eddy_ctx_close(ctx, NULL);
}

static const eddy_handler_ops_t answer_ops = {
    .name = "answer",
    .channel_read = answer_read,
    .channel_read_complete = answer_flush,
    .exception_caught = answer_exception,
};

/* A valid frame and a broken one in one read: the error comes after the batch's
 * read_complete, so the answer to the valid frame is flushed before the handler closes.
 * (Before #20 the error came first and the close failed the answer, never flushed.) */
static void test_decoder_error_comes_after_the_replies_before_it_are_flushed(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    errs.n = 0;
    errs.last = 0;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_int_equal(eddy_pipeline_add_last(eddy_channel_pipeline(ch), "frames",
                                            eddy_length_field_decoder_ops(),
                                            eddy_length_field_decoder_new(64, 0, 1, -5, 1),
                                            eddy_free_state),
                     0);
    assert_int_equal(
        eddy_pipeline_add_last(eddy_channel_pipeline(ch), "answer", &answer_ops, NULL, NULL), 0);
    /* With the -5 adjustment: 7 is a frame of "ok", 1 a negative length. */
    const uint8_t bytes[] = {7, 'o', 'k', 1, 'x'};
    feed(ch, bytes, sizeof(bytes), 0);
    assert_int_equal(errs.n, 1);
    assert_int_equal(errs.last, EDDY_EDECODE);
    assert_false(eddy_channel_is_open(ch));
    eddy_msg_t *out = eddy_embedded_read_outbound(ch);
    assert_non_null(out);
    assert_int_equal(eddy_buf_readable(eddy_buf_of(out)), 2);
    assert_memory_equal(eddy_buf_read_ptr(eddy_buf_of(out)), "ok", 2);
    eddy_msg_release(out);
    assert_true(eddy_embedded_finish(ch));
    assert_int_equal(eddy_buf_live_count(), live);
}

/* Passes the first message on, then removes the handler called "codec" (a protocol switch). */
static void remover_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_ctx_fire_channel_read(ctx, msg);
    eddy_pipeline_t *p = eddy_ctx_pipeline(ctx);
    if (eddy_pipeline_context(p, "codec") != NULL) {
        assert_int_equal(eddy_pipeline_remove(p, "codec"), 0);
    }
}

static const eddy_handler_ops_t remover_ops = {.name = "remover", .channel_read = remover_read};

static void test_decoder_removed_downstream_hands_its_leftover_on(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (size_t c = 0; c < 2; c++) {
        int destroyed = 0;
        eddy_channel_t *ch = records_channel(&destroyed, false, cumulators[c]);
        eddy_pipeline_t *p = eddy_channel_pipeline(ch);
        assert_int_equal(eddy_pipeline_add_after(p, "codec", "remover", &remover_ops, NULL, NULL),
                         0);
        feed(ch, "on", 2, 0);
        feed(ch, "e;two;three", 11, 0); /* 2 components in COMPOSITE mode */
        expect_record(ch, "one", false);
        expect_str(ch, "two;three"); /* the rest of the stream, undecoded */
        expect_nothing(ch);
        assert_int_equal(destroyed, 1);
        feed(ch, "four", 4, 0); /* no decoder any more */
        expect_str(ch, "four");
        finish_clean(ch, live);
    }
}

static void test_decoder_removing_itself_in_decode_delivers_its_frame_first(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (size_t c = 0; c < 2; c++) {
        int destroyed = 0;
        eddy_channel_t *ch = records_channel(&destroyed, true, cumulators[c]);
        feed(ch, "hel", 3, 0);
        feed(ch, "lo;world;", 9, 0);
        expect_record(ch, "hello", false);
        expect_str(ch, "world;");
        expect_nothing(ch);
        assert_int_equal(destroyed, 1);
        assert_null(eddy_pipeline_context(eddy_channel_pipeline(ch), "codec"));
        finish_clean(ch, live);
    }
}

/* Closes the channel when the first message reaches it. */
static void closer_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_msg_release(msg);
    eddy_ctx_close(ctx, NULL);
}

static const eddy_handler_ops_t closer_ops = {.name = "closer", .channel_read = closer_read};

static void test_decoder_survives_a_close_while_it_delivers(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (size_t c = 0; c < 2; c++) {
        int destroyed = 0;
        eddy_channel_t *ch = records_channel(&destroyed, false, cumulators[c]);
        assert_int_equal(eddy_pipeline_add_after(eddy_channel_pipeline(ch), "codec", "closer",
                                                 &closer_ops, NULL, NULL),
                         0);
        feed(ch, "a;b;c;tail", 10, 0);
        assert_false(eddy_channel_is_open(ch));
        assert_int_equal(destroyed, 1);
        drain(ch);
        finish_clean(ch, live);
    }
}

static void test_decoder_closing_its_channel_in_decode_stops_there(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (size_t c = 0; c < 2; c++) {
        int destroyed = 0;
        eddy_decoder_t *d = records_new(&destroyed, false);
        ((records_t *)eddy_decoder_self(d))->close_on_bye = true;
        eddy_channel_t *ch = decoder_channel(&records_handler, d, cumulators[c]);
        records_lasts = 0;
        feed(ch, "a;bye;rest;more", 15, 0);
        assert_false(eddy_channel_is_open(ch));
        expect_record(ch, "a", false);
        expect_record(ch, "bye", false);
        expect_nothing(ch); /* the rest is released, not decoded inside the decode */
        assert_int_equal(records_lasts, 0);
        assert_int_equal(destroyed, 1);
        finish_clean(ch, live);
    }
}

static void test_decoder_never_writes_into_a_buffer_others_hold(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = decoder_channel(eddy_fixed_length_decoder_ops(),
                                         eddy_fixed_length_decoder_new(4), EDDY_CUMULATOR_MERGE);
    eddy_buf_t *mine = eddy_buf_new(64); /* spare room after its 2 bytes */
    assert_int_equal(eddy_buf_write_bytes(mine, "ab", 2), 0);
    eddy_embedded_write_inbound(ch, eddy_buf_msg(eddy_buf_retain(mine)));
    feed(ch, "cd", 2, 0);
    expect_str(ch, "abcd");
    assert_int_equal(eddy_buf_writer_index(mine), 2); /* "cd" went elsewhere */
    assert_int_equal(eddy_buf_refcnt(mine), 1);
    eddy_buf_release(mine);
    finish_clean(ch, live);
}

/* A large read whose frames went on and left a short partial frame: the decoder copies the
 * partial frame out and lets the read go (a connection waiting for the rest of a frame keeps a
 * few KiB, not 64); a long partial frame stays where it is. */
static void test_decoder_lets_a_large_read_go_for_a_short_leftover(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    enum { FRAME = 20000, READ = 65536 };
    static uint8_t bytes[3 * FRAME];
    for (size_t i = 0; i < sizeof(bytes); i++) {
        bytes[i] = (uint8_t)(i * 7 + i / 251);
    }
    const size_t lefts[] = {1000, READ / 4, READ / 4 + 1, FRAME - 1};
    for (int c = 0; c < 2; c++) {
        for (size_t k = 0; k < sizeof(lefts) / sizeof(lefts[0]); k++) {
            eddy_channel_t *ch = decoder_channel(eddy_fixed_length_decoder_ops(),
                                                 eddy_fixed_length_decoder_new(FRAME),
                                                 cumulators[c]);
            eddy_buf_t *read = eddy_buf_new(READ);
            assert_int_equal(eddy_buf_write_bytes(read, bytes, 2 * FRAME + lefts[k]), 0);
            eddy_embedded_write_inbound(ch, eddy_buf_msg(eddy_buf_retain(read)));
            expect_frame(ch, bytes, FRAME);
            expect_frame(ch, bytes + FRAME, FRAME);
            expect_nothing(ch);
            /* A quarter of the read at most: copied out, the read let go. */
            assert_int_equal(eddy_buf_refcnt(read), lefts[k] <= READ / 4 ? 1 : 2);
            eddy_buf_release(read);
            feed(ch, bytes + 2 * FRAME + lefts[k], FRAME - lefts[k], 0);
            expect_frame(ch, bytes + 2 * FRAME, FRAME);
            expect_nothing(ch);
            finish_clean(ch, live);
        }
    }
}

static void test_decoder_passes_other_messages_and_takes_composites(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = decoder_channel(eddy_fixed_length_decoder_ops(),
                                         eddy_fixed_length_decoder_new(2), EDDY_CUMULATOR_MERGE);
    eddy_msg_t *other = malloc(sizeof(*other));
    eddy_msg_init(other, EDDY_MSG_USER, free_msg);
    eddy_embedded_write_inbound(ch, other);
    assert_ptr_equal(eddy_embedded_read_inbound(ch), other);
    eddy_msg_release(other);

    static const size_t parts[] = {1, 2, 1};
    eddy_composite_t *c = composite_of_parts((const uint8_t *)"1234", parts, 3);
    eddy_embedded_write_inbound(ch, eddy_composite_msg(c));
    expect_str(ch, "12");
    expect_str(ch, "34");
    expect_nothing(ch);
    finish_clean(ch, live);
}

static void test_decoder_single_decode_emits_one_message_per_read(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_decoder_t *d = eddy_fixed_length_decoder_new(1);
    assert_int_equal(eddy_decoder_set_single_decode(d, true), 0);
    eddy_channel_t *ch = decoder_channel(eddy_fixed_length_decoder_ops(), d, EDDY_CUMULATOR_MERGE);
    feed(ch, "abc", 3, 0);
    expect_str(ch, "a");
    expect_nothing(ch);
    feed(ch, "d", 1, 0);
    expect_str(ch, "b");
    expect_nothing(ch);
    eddy_embedded_shutdown_input(ch); /* one more from the loop, one from decode_last */
    expect_str(ch, "c");
    expect_str(ch, "d");
    expect_nothing(ch);
    finish_clean(ch, live);
}

/* Counts read requests on their way to the head. */
static int reads_asked;

static void count_read(eddy_ctx_t *ctx)
{
    reads_asked++;
    eddy_ctx_read(ctx);
}

static const eddy_handler_ops_t read_counter_ops = {.name = "reads", .read = count_read};

static void test_decoder_asks_for_more_without_auto_read(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = decoder_channel(eddy_fixed_length_decoder_ops(),
                                         eddy_fixed_length_decoder_new(4), EDDY_CUMULATOR_MERGE);
    assert_int_equal(
        eddy_pipeline_add_first(eddy_channel_pipeline(ch), "reads", &read_counter_ops, NULL, NULL),
        0);
    reads_asked = 0;
    feed(ch, "ab", 2, 0);
    assert_int_equal(reads_asked, 0); /* auto-read: the channel reads on by itself */
    assert_int_equal(eddy_channel_set_option(ch, EDDY_AUTO_READ, 0), 0);
    reads_asked = 0;
    feed(ch, "c", 1, 0);
    assert_int_equal(reads_asked, 1); /* no frame yet: more is needed */
    feed(ch, "d", 1, 0);
    assert_int_equal(reads_asked, 1); /* a frame went on: its reader asks if it wants */
    expect_str(ch, "abcd");
    finish_clean(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * The encoder base: points {x, y} as two big-endian 32-bit integers; negative x is refused.
 */

enum { MSG_POINT = EDDY_MSG_USER + 2 };

typedef struct point_s {
    eddy_msg_t hdr;
    int32_t x, y;
} point_t;

static int points_freed;

static void point_free(eddy_msg_t *msg)
{
    points_freed++;
    free(msg);
}

static eddy_msg_t *point_new(int32_t x, int32_t y)
{
    point_t *pt = malloc(sizeof(*pt));
    assert_non_null(pt);
    eddy_msg_init(&pt->hdr, MSG_POINT, point_free);
    pt->x = x;
    pt->y = y;
    return &pt->hdr;
}

static int point_encode(eddy_ctx_t *ctx, void *self, eddy_msg_t *msg, eddy_buf_t *out)
{
    (void)ctx;
    int *encoded = self;
    point_t *pt = EDDY_CONTAINER_OF(msg, point_t, hdr);
    if (pt->x < 0) {
        return EDDY_EINVAL;
    }
    (*encoded)++;
    int err = eddy_buf_write_u32(out, (uint32_t)pt->x);
    return err != 0 ? err : eddy_buf_write_u32(out, (uint32_t)pt->y);
}

static size_t point_size(void *self, const eddy_msg_t *msg)
{
    (void)self;
    (void)msg;
    return 8;
}

static const eddy_encoder_ops_t point_encoder = {
    .name = "points",
    .msg_type = MSG_POINT,
    .encode = point_encode,
    .size_hint = point_size,
};

static const eddy_handler_ops_t point_handler = EDDY_ENCODER_HANDLER_OPS("points");

static void test_encoder_encodes_its_messages_and_passes_others(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    points_freed = 0;
    eddy_encoder_t *e = eddy_encoder_new(&point_encoder, sizeof(int));
    assert_non_null(e);
    int *encoded = eddy_encoder_self(e);
    eddy_channel_t *ch = channel_with(&point_handler, e);
    assert_true(eddy_embedded_write_outbound(ch, point_new(1, 0x01020304)));
    eddy_buf_t *b = outbound_bytes(eddy_embedded_read_outbound(ch));
    assert_int_equal(eddy_buf_readable(b), 8);
    assert_memory_equal(eddy_buf_read_ptr(b), "\x00\x00\x00\x01\x01\x02\x03\x04", 8);
    eddy_buf_release(b);
    assert_int_equal(points_freed, 1);
    assert_int_equal(*encoded, 1);

    eddy_msg_t *raw = eddy_buf_msg(eddy_buf_from_str("raw"));
    assert_true(eddy_embedded_write_outbound(ch, raw));
    assert_ptr_equal(eddy_embedded_read_outbound(ch), raw); /* untouched */
    eddy_msg_release(raw);

    assert_int_equal(write_with_promise(ch, point_new(-1, 0)), EDDY_EINVAL);
    assert_int_equal(points_freed, 2);
    assert_null(eddy_embedded_read_outbound(ch));
    finish_clean(ch, live);

    /* A NULL state (a failed constructor) fails the writes it gets. */
    ch = channel_with(&point_handler, NULL);
    assert_int_equal(write_with_promise(ch, point_new(1, 1)), EDDY_EINVAL);
    assert_int_equal(points_freed, 3);
    finish_clean(ch, live);
}

static void test_encoder_and_prepender_frame_messages_for_the_decoder(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *out =
        channel_with(eddy_length_field_prepender_ops(), eddy_length_field_prepender_new(2));
    assert_int_equal(eddy_pipeline_add_last(eddy_channel_pipeline(out), "points", &point_handler,
                                            eddy_encoder_new(&point_encoder, sizeof(int)),
                                            eddy_free_state),
                     0);
    eddy_channel_t *in =
        decoder_channel(eddy_length_field_decoder_ops(),
                        eddy_length_field_decoder_new(64, 0, 2, 0, 2), EDDY_CUMULATOR_MERGE);
    for (int32_t i = 0; i < 3; i++) {
        assert_true(eddy_embedded_write_outbound(out, point_new(i, -i)));
        eddy_buf_t *b = outbound_bytes(eddy_embedded_read_outbound(out));
        feed(in, eddy_buf_read_ptr(b), eddy_buf_readable(b), 0);
        eddy_buf_release(b);
        uint8_t want[8];
        put_uint(want, (uint64_t)i, 4, false);
        put_uint(want + 4, (uint32_t)-i, 4, false);
        expect_frame(in, want, 8);
    }
    finish_clean(in, live);
    finish_clean(out, live);
}

/* ---------------------------------------------------------------------------------------
 * The packet codec base: a datagram is one message
 */

/* Decode "<n><n bytes>" datagrams into a buffer of the n bytes; encode buffers into
 * datagrams to a fixed recipient with the length in front. */
typedef struct lp_self_s {
    eddy_addr_t to;
    int decoded;
} lp_self_t;

static int lp_decode(eddy_ctx_t *ctx, void *self, eddy_datagram_t *in, eddy_msg_t **out)
{
    (void)ctx;
    lp_self_t *s = self;
    eddy_buf_t *b = eddy_datagram_content(in);
    if (b == NULL || eddy_buf_readable(b) < 1) {
        return EDDY_EDECODE;
    }
    size_t n = eddy_buf_read_ptr(b)[0];
    if (eddy_buf_readable(b) != n + 1) {
        return EDDY_EDECODE; /* a length that lies: the whole datagram is bad */
    }
    eddy_buf_skip(b, 1);
    *out = eddy_buf_msg(eddy_buf_retain(b));
    s->decoded++;
    return 0;
}

static int lp_encode(eddy_ctx_t *ctx, void *self, eddy_msg_t *msg, eddy_datagram_t **out)
{
    lp_self_t *s = self;
    eddy_buf_t *in = eddy_buf_of(msg);
    if (in == NULL || eddy_buf_readable(in) > 255) {
        return EDDY_EMSGSIZE;
    }
    eddy_buf_t *b = eddy_buf_alloc(eddy_ctx_alloc(ctx), eddy_buf_readable(in) + 1, 256);
    if (b == NULL) {
        return EDDY_ENOMEM;
    }
    eddy_buf_write_u8(b, (uint8_t)eddy_buf_readable(in));
    eddy_buf_write_bytes(b, eddy_buf_read_ptr(in), eddy_buf_readable(in));
    *out = eddy_datagram_new(b, &s->to, NULL);
    return *out != NULL ? 0 : EDDY_ENOMEM;
}

static const eddy_packet_codec_ops_t lp_ops = {
    .name = "lp", .decode = lp_decode, .encode = lp_encode};
static const eddy_handler_ops_t lp_handler = EDDY_PACKET_CODEC_HANDLER_OPS("lp");

static eddy_msg_t *packet_of(const char *bytes, size_t n, const eddy_addr_t *from)
{
    eddy_buf_t *b = eddy_buf_alloc(eddy_allocator_default(), n, n);
    eddy_buf_write_bytes(b, bytes, n);
    return eddy_datagram_msg(eddy_datagram_new(b, NULL, from));
}

static void test_packet_codec_one_datagram_one_message(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    eddy_packet_codec_t *c = eddy_packet_codec_new(&lp_ops, sizeof(lp_self_t));
    assert_non_null(c);
    lp_self_t *self = eddy_packet_codec_self(c);
    eddy_addr_ip(&self->to, "127.0.0.1", 53);
    assert_int_equal(eddy_pipeline_add_last(eddy_channel_pipeline(ch), "lp", &lp_handler, c,
                                            eddy_free_state), 0);
    eddy_addr_t from;
    eddy_addr_ip(&from, "10.0.0.1", 1000);
    /* Two messages in one datagram are not two messages: the datagram is malformed. */
    assert_false(eddy_embedded_write_inbound(ch, packet_of("\003abc\002de", 7, &from)));
    assert_int_equal(eddy_embedded_error(ch), EDDY_EDECODE);
    /* Nor is half of one; the channel goes on after both. */
    assert_false(eddy_embedded_write_inbound(ch, packet_of("\005ab", 3, &from)));
    assert_int_equal(eddy_embedded_error(ch), EDDY_EDECODE);
    assert_true(eddy_embedded_write_inbound(ch, packet_of("\003xyz", 4, &from)));
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    assert_non_null(eddy_buf_of(m));
    assert_int_equal(eddy_buf_readable(eddy_buf_of(m)), 3);
    assert_memory_equal(eddy_buf_read_ptr(eddy_buf_of(m)), "xyz", 3);
    eddy_msg_release(m);
    assert_int_equal(self->decoded, 1);
    /* Other messages pass through. */
    eddy_buf_t *plain = eddy_buf_alloc(eddy_allocator_default(), 4, 4);
    eddy_buf_write_bytes(plain, "raw!", 4);
    assert_true(eddy_embedded_write_inbound(ch, eddy_buf_msg(plain)));
    eddy_msg_release(eddy_embedded_read_inbound(ch));
    /* Outbound: a buffer becomes a datagram to the codec's recipient. */
    eddy_buf_t *reply = eddy_buf_alloc(eddy_allocator_default(), 2, 2);
    eddy_buf_write_bytes(reply, "ok", 2);
    assert_true(eddy_embedded_write_outbound(ch, eddy_buf_msg(reply)));
    eddy_msg_t *o = eddy_embedded_read_outbound(ch);
    eddy_datagram_t *d = eddy_datagram_of(o);
    assert_non_null(d);
    assert_int_equal(eddy_addr_port(eddy_datagram_recipient(d)), 53);
    assert_int_equal(eddy_buf_readable(eddy_datagram_content(d)), 3);
    assert_memory_equal(eddy_buf_read_ptr(eddy_datagram_content(d)), "\002ok", 3);
    eddy_msg_release(o);
    assert_true(eddy_embedded_finish(ch));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packet_codec_one_datagram_one_message),
        cmocka_unit_test(test_length_field_decoder_splits_frames_however_they_arrive),
        cmocka_unit_test(test_length_field_decoder_reads_every_field_length_at_odd_offsets),
        cmocka_unit_test(test_length_field_decoder_applies_adjustment_and_strip),
        cmocka_unit_test(test_length_field_decoder_discards_too_long_frames),
        cmocka_unit_test(test_length_field_decoder_fails_fast_or_after_the_discarded_frame),
        cmocka_unit_test(test_length_field_decoder_never_buffers_a_too_long_frame),
        cmocka_unit_test(test_length_field_decoder_rejects_negative_short_and_overflowing_lengths),
        cmocka_unit_test(test_decoder_error_comes_after_the_replies_before_it_are_flushed),
        cmocka_unit_test(test_length_field_decoder_skips_frames_shorter_than_the_strip),
        cmocka_unit_test(test_length_field_decoders_nest),
        cmocka_unit_test(test_length_field_decoder_refuses_bad_parameters),
        cmocka_unit_test(test_length_field_prepender_round_trips_through_the_decoder),
        cmocka_unit_test(test_length_field_prepender_fails_lengths_the_field_cannot_hold),
        cmocka_unit_test(test_length_field_prepender_joins_composites_and_passes_other_messages),
        cmocka_unit_test(test_line_decoder_splits_lf_and_crlf_lines),
        cmocka_unit_test(test_line_decoder_discards_too_long_lines),
        cmocka_unit_test(test_line_decoder_drops_a_partial_line_at_close),
        cmocka_unit_test(test_delimiter_decoder_prefers_the_shortest_frame),
        cmocka_unit_test(test_delimiter_decoder_discards_too_long_frames),
        cmocka_unit_test(test_fixed_length_decoder_splits_fixed_frames),
        cmocka_unit_test(test_composite_cumulation_merges_many_small_reads),
        cmocka_unit_test(test_decoders_survive_random_input),
        cmocka_unit_test(test_custom_decoder_keeps_leftovers_and_decodes_last_on_close),
        cmocka_unit_test(test_decoder_decodes_last_on_input_shutdown_with_half_closure),
        cmocka_unit_test(test_decoder_error_discards_the_cumulation),
        cmocka_unit_test(test_decoder_removed_downstream_hands_its_leftover_on),
        cmocka_unit_test(test_decoder_removing_itself_in_decode_delivers_its_frame_first),
        cmocka_unit_test(test_decoder_survives_a_close_while_it_delivers),
        cmocka_unit_test(test_decoder_closing_its_channel_in_decode_stops_there),
        cmocka_unit_test(test_decoder_never_writes_into_a_buffer_others_hold),
        cmocka_unit_test(test_decoder_lets_a_large_read_go_for_a_short_leftover),
        cmocka_unit_test(test_decoder_passes_other_messages_and_takes_composites),
        cmocka_unit_test(test_decoder_single_decode_emits_one_message_per_read),
        cmocka_unit_test(test_decoder_asks_for_more_without_auto_read),
        cmocka_unit_test(test_encoder_encodes_its_messages_and_passes_others),
        cmocka_unit_test(test_encoder_and_prepender_frame_messages_for_the_decoder),
    };
    return cmocka_run_group_tests_name("codec.codec", tests, NULL, NULL);
}
