/*
 * Fuzz target: the framing decoders (length field, line, delimiter, fixed length) on an
 * embedded channel, the framing eddy-rpc-server and any length-prefixed protocol stand on.
 *
 * The first four bytes after the two header bytes are parameters: which decoder (and its
 * options) and its limits; the rest is the stream. A handler behind the decoder logs every
 * frame and error in order. The length field and fixed length decoders are checked against a
 * model written here from codec.h's description: the same frames, the same errors, in the
 * same order. Every decoder is checked for limits (no frame longer than the maximum), for the
 * same log whether the stream came whole or in pieces, and for releasing every buffer. After
 * an error the decoder returned (the cumulation discarded), nothing more is fed.
 */
#include "common.h"

enum { LOG_MAX = 4096 };

typedef enum { EV_FRAME, EV_TOO_LONG, EV_DECODE_SKIP, EV_DECODE_FATAL } ev_kind_t;

typedef struct event_s {
    ev_kind_t kind;
    size_t off, len; /* a frame: where in the stream, how long */
} event_t;

typedef struct log_s {
    const uint8_t *stream;
    size_t stream_len;
    event_t model[LOG_MAX]; /* expected, when modelled */
    size_t nmodel;
    bool modelled;
    size_t next;      /* events seen so far */
    bool fatal;       /* the decoder returned an error: feeding stops */
    size_t max_frame; /* no emitted frame is longer */
    hash_t h;
} log_t;

static bool is_decode_error(int err)
{
    return err == EDDY_EDECODE;
}

static void log_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    log_t *l = eddy_ctx_state(ctx);
    eddy_buf_t *b = eddy_buf_of(msg);
    CHECK(b != NULL);
    size_t n = eddy_buf_readable(b);
    CHECK(n <= l->max_frame);
    hash_int(&l->h, EV_FRAME);
    hash_int(&l->h, (int64_t)n);
    hash_bytes(&l->h, eddy_buf_read_ptr(b), n);
    if (l->modelled) {
        CHECK(l->next < l->nmodel);
        const event_t *e = &l->model[l->next];
        CHECK(e->kind == EV_FRAME);
        CHECK(e->len == n);
        CHECK(memcmp(l->stream + e->off, eddy_buf_read_ptr(b), n) == 0);
    }
    l->next++;
    eddy_msg_release(msg);
}

static void log_exception(eddy_ctx_t *ctx, int err)
{
    log_t *l = eddy_ctx_state(ctx);
    CHECK(err == EDDY_ETOOLONGFRAME || is_decode_error(err));
    hash_int(&l->h, err);
    if (l->modelled) {
        CHECK(l->next < l->nmodel);
        const event_t *e = &l->model[l->next];
        if (err == EDDY_ETOOLONGFRAME) {
            CHECK(e->kind == EV_TOO_LONG);
        } else {
            CHECK(e->kind == EV_DECODE_SKIP || e->kind == EV_DECODE_FATAL);
            l->fatal = e->kind == EV_DECODE_FATAL;
        }
    } else if (is_decode_error(err)) {
        l->fatal = true; /* unmodelled decoders return their decode errors */
    }
    l->next++;
}

static const eddy_handler_ops_t log_ops = {
    .name = "log",
    .channel_read = log_read,
    .exception_caught = log_exception,
};

static void model_add(log_t *l, ev_kind_t kind, size_t off, size_t len)
{
    CHECK(l->nmodel < LOG_MAX);
    l->model[l->nmodel++] = (event_t){kind, off, len};
}

/* codec.h's length field decoder over the whole stream (fail fast or not). */
static void model_length_field(log_t *l, const eddy_length_field_options_t *o)
{
    const uint8_t *s = l->stream;
    size_t n = l->stream_len, pos = 0;
    size_t header = o->length_field_offset + o->length_field_length;
    for (;;) {
        if (n - pos < header) {
            return;
        }
        const uint8_t *f = s + pos + o->length_field_offset;
        uint64_t v = 0;
        for (unsigned i = 0; i < o->length_field_length; i++) {
            unsigned k = o->little_endian ? o->length_field_length - 1 - i : i;
            v = v << 8 | f[k];
        }
        if (o->length_field_length == 8 && (int64_t)v < 0) {
            model_add(l, EV_DECODE_FATAL, 0, 0); /* a negative length */
            return;
        }
        /* v + adjustment + header (v <= INT64_MAX here): past INT64_MAX, or shorter than the
         * header, is malformed. */
        int64_t extra = o->length_adjustment + (int64_t)header;
        if (extra > 0 && (int64_t)v > INT64_MAX - extra) {
            model_add(l, EV_DECODE_FATAL, 0, 0);
            return;
        }
        int64_t len = (int64_t)v + extra;
        if (len < (int64_t)header) {
            model_add(l, EV_DECODE_FATAL, 0, 0);
            return;
        }
        size_t frame = (size_t)len;
        if (frame > o->max_frame_length) {
            if (o->fail_fast) {
                model_add(l, EV_TOO_LONG, 0, 0);
            }
            if (n - pos < frame) {
                return; /* discarded as it arrives; the stream ends inside it */
            }
            pos += frame;
            if (!o->fail_fast) {
                model_add(l, EV_TOO_LONG, 0, 0);
            }
            continue;
        }
        if (n - pos < frame) {
            return;
        }
        if (o->initial_bytes_to_strip > frame) {
            model_add(l, EV_DECODE_SKIP, 0, 0);
        } else {
            model_add(l, EV_FRAME, pos + o->initial_bytes_to_strip,
                      frame - o->initial_bytes_to_strip);
        }
        pos += frame;
    }
}

static void model_fixed(log_t *l, size_t frame)
{
    for (size_t pos = 0; l->stream_len - pos >= frame; pos += frame) {
        model_add(l, EV_FRAME, pos, frame);
    }
}

static uint64_t run(const uint8_t *p, size_t n, uint8_t mode, uint8_t opt)
{
    if (n < 4) {
        return 0;
    }
    const uint8_t *param = p;
    p += 4;
    n -= 4;
    static log_t l; /* large: not on the stack */
    memset(&l, 0, sizeof(l));
    l.stream = p;
    l.stream_len = n;
    l.h = (hash_t)HASH_INIT;
    l.max_frame = SIZE_MAX;
    eddy_decoder_t *d = NULL;
    const eddy_handler_ops_t *ops = NULL;
    unsigned kind = opt & 3;
    bool fail_fast = (opt & 8) != 0, strip = (opt & 16) != 0;
    if (kind == 0) {
        static const unsigned sizes[] = {1, 2, 3, 4, 8, 4, 2, 4};
        eddy_length_field_options_t o = {
            .length_field_offset = param[0] & 7,
            .length_field_length = sizes[(param[0] >> 3) & 7],
            .length_adjustment = (int8_t)param[1],
            .initial_bytes_to_strip = param[2] & 15,
            .little_endian = (param[0] & 64) != 0,
            .fail_fast = fail_fast,
        };
        size_t header = o.length_field_offset + o.length_field_length;
        o.max_frame_length = header + (param[3] % 64);
        d = eddy_length_field_decoder_new_opts(&o);
        CHECK(d != NULL);
        ops = eddy_length_field_decoder_ops();
        model_length_field(&l, &o);
        l.modelled = true;
        l.max_frame = o.max_frame_length;
    } else if (kind == 1) {
        size_t max = 1 + param[0] % 32;
        d = eddy_line_decoder_new(max, strip, fail_fast);
        CHECK(d != NULL);
        ops = eddy_line_decoder_ops();
        l.max_frame = max + (strip ? 0 : 2);
    } else if (kind == 2) {
        /* One or two delimiters of 1-3 bytes, from the parameters. */
        uint8_t a[3] = {param[1], param[2], param[3]};
        eddy_delimiter_t dl[2] = {{a, 1 + param[0] % 3}, {a + 1, 1 + (param[0] >> 2) % 2}};
        size_t max = 1 + (param[0] >> 3) % 32;
        d = eddy_delimiter_decoder_new(max, strip, fail_fast, dl, 1 + ((param[0] >> 5) & 1));
        CHECK(d != NULL);
        ops = eddy_delimiter_decoder_ops();
        l.max_frame = max + (strip ? 0 : 3);
    } else {
        size_t frame = 1 + param[0] % 48;
        d = eddy_fixed_length_decoder_new(frame);
        CHECK(d != NULL);
        ops = eddy_fixed_length_decoder_ops();
        model_fixed(&l, frame);
        l.modelled = true;
        l.max_frame = frame;
    }
    eddy_channel_t *ch = eddy_embedded_channel_new();
    CHECK(ch != NULL);
    add_decoder(ch, "frames", ops, d, opt);
    CHECK(eddy_pipeline_add_last(eddy_channel_pipeline(ch), "log", &log_ops, &l, NULL) == 0);
    uint32_t rng = mode;
    size_t off = 0;
    while (off < n && !l.fatal) {
        size_t k = next_chunk(mode, &rng, n - off);
        eddy_buf_t *b = eddy_buf_from(p + off, k);
        CHECK(b != NULL);
        eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
        off += k;
        CHECK(eddy_embedded_read_inbound(ch) == NULL); /* the log takes every frame */
    }
    /* The stream is complete (or ended by an error): the model saw it all. Events the model
     * expects at the end of input (none for these decoders) would come at close. */
    if (l.modelled && !l.fatal) {
        CHECK(l.next == l.nmodel);
    }
    CHECK(eddy_embedded_finish(ch));
    hash_int(&l.h, l.fatal);
    return l.h.h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_one(run, data, size);
    return 0;
}
