/*
 * Length field framing: the decoder (Netty's LengthFieldBasedFrameDecoder) and the prepender
 * (Netty's LengthFieldPrepender).
 *
 * A frame is length_field_offset bytes, the length field, then (field value +
 * length_adjustment) bytes. The decoder never buffers a frame longer than the maximum: it
 * skips its bytes as they arrive (discarding mode) and raises EDDY_ETOOLONGFRAME once, when
 * the length is read (fail fast) or when the last byte went by.
 */
#include "pipeline/layer.h"

#include <eddy/codec.h>

#include <assert.h>
#include <stdlib.h>

static bool field_length_ok(unsigned n)
{
    return n == 1 || n == 2 || n == 3 || n == 4 || n == 8;
}

/* ---------------------------------------------------------------------------------------
 * The decoder
 */

typedef struct length_field_s {
    uint64_t max;   /* max_frame_length */
    size_t offset;  /* length_field_offset */
    unsigned field; /* length_field_length */
    size_t end;     /* offset + field: the header's length */
    int64_t adjustment;
    size_t strip;
    bool little_endian;
    bool fail_fast;
    bool discarding;     /* skipping a too-long frame */
    uint64_t to_discard; /* its bytes still to come */
} length_field_t;

/* The frame's whole length from the field's value, or EDDY_EDECODE when it is negative, shorter
 * than the header, or past 64 bits. Netty computes this in a Java long, where an overflow wraps
 * to a negative length and fails the same way. */
static int frame_length(const length_field_t *lf, uint64_t value, uint64_t *len)
{
    int64_t n;
    if (value > INT64_MAX || __builtin_add_overflow((int64_t)value, lf->adjustment, &n) ||
        __builtin_add_overflow(n, (int64_t)lf->end, &n) || n < (int64_t)lf->end) {
        return EDDY_EDECODE;
    }
    *len = (uint64_t)n;
    return 0;
}

/* Skip what has come of a too-long frame; raise at its end unless raised when it began. */
static int discard(length_field_t *lf, eddy_cumulation_t *in, eddy_decoder_out_t *out)
{
    assert(lf->discarding && lf->to_discard > 0);
    size_t readable = eddy_cumulation_readable(in);
    size_t n = lf->to_discard < readable ? (size_t)lf->to_discard : readable;
    eddy_cumulation_skip(in, n);
    lf->to_discard -= n;
    if (lf->to_discard == 0) {
        lf->discarding = false;
        if (!lf->fail_fast) {
            eddy_decoder_raise(out, EDDY_ETOOLONGFRAME);
        }
    }
    return 0;
}

static int length_field_decode(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in,
                               eddy_decoder_out_t *out)
{
    (void)ctx;
    length_field_t *lf = self;
    assert(field_length_ok(lf->field) && lf->end == lf->offset + lf->field); /* options */
    if (lf->discarding) {
        return discard(lf, in, out); /* the base calls again for what follows */
    }
    size_t readable = eddy_cumulation_readable(in);
    if (readable < lf->end) {
        return 0;
    }
    uint64_t value, len;
    int got = eddy_cumulation_get_uint(in, lf->offset, lf->field, lf->little_endian, &value);
    assert(got == 0); /* the header is there: readable >= end */
    (void)got;
    int err = frame_length(lf, value, &len);
    if (err != 0) {
        return err; /* out of step with the stream: the base discards what it holds */
    }
    if (len > lf->max) {
        if (len <= readable) {
            eddy_cumulation_skip(in, (size_t)len);
            eddy_decoder_raise(out, EDDY_ETOOLONGFRAME);
            return 0;
        }
        lf->discarding = true;
        lf->to_discard = len - readable;
        eddy_cumulation_skip(in, readable);
        if (lf->fail_fast) {
            eddy_decoder_raise(out, EDDY_ETOOLONGFRAME);
        }
        return 0;
    }
    if (readable < len) {
        return 0;
    }
    if (lf->strip > len) {
        /* The frame's bounds are known, so the stream stays in step: skip it and go on. */
        eddy_cumulation_skip(in, (size_t)len);
        eddy_decoder_raise(out, EDDY_EDECODE);
        return 0;
    }
    eddy_cumulation_skip(in, lf->strip);
    return eddy_decoder_emit_buf(out, eddy_cumulation_read_buf(in, (size_t)len - lf->strip));
}

/* Skipping a too-long frame is a message under way too: its deadline still runs. */
static bool length_field_in_message(const void *self)
{
    return ((const length_field_t *)self)->discarding;
}

static const eddy_decoder_ops_t length_field_decoder = {
    .name = "length_field_decoder",
    .decode = length_field_decode,
    .in_message = length_field_in_message,
};

static const eddy_handler_ops_t length_field_handler =
    EDDY_DECODER_HANDLER_OPS("length_field_decoder");

eddy_decoder_t *eddy_length_field_decoder_new_opts(const eddy_length_field_options_t *o)
{
    if (o == NULL || !field_length_ok(o->length_field_length) ||
        o->length_field_length > o->max_frame_length ||
        o->length_field_offset > o->max_frame_length - o->length_field_length ||
        (uint64_t)o->max_frame_length > INT64_MAX) {
        return NULL;
    }
    eddy_decoder_t *d = eddy_decoder_new(&length_field_decoder, sizeof(length_field_t));
    if (d == NULL) {
        return NULL;
    }
    length_field_t *lf = eddy_decoder_self(d);
    lf->max = o->max_frame_length;
    lf->offset = o->length_field_offset;
    lf->field = o->length_field_length;
    lf->end = o->length_field_offset + o->length_field_length;
    lf->adjustment = o->length_adjustment;
    lf->strip = o->initial_bytes_to_strip;
    lf->little_endian = o->little_endian;
    lf->fail_fast = o->fail_fast;
    return d;
}

eddy_decoder_t *eddy_length_field_decoder_new(size_t max_frame_length, size_t length_field_offset,
                                              unsigned length_field_length,
                                              int64_t length_adjustment,
                                              size_t initial_bytes_to_strip)
{
    eddy_length_field_options_t o = {
        .max_frame_length = max_frame_length,
        .length_field_offset = length_field_offset,
        .length_field_length = length_field_length,
        .length_adjustment = length_adjustment,
        .initial_bytes_to_strip = initial_bytes_to_strip,
        .fail_fast = true,
    };
    return eddy_length_field_decoder_new_opts(&o);
}

const eddy_handler_ops_t *eddy_length_field_decoder_ops(void)
{
    return &length_field_handler;
}

/* ---------------------------------------------------------------------------------------
 * The prepender
 */

/* Payloads up to this size are copied after the header into one pooled buffer rather than
 * joined to it in a composite, which costs two mallocs (docs/style.md, "Hot paths": no
 * allocation per message beyond pooled buffers). Copying 1 KiB is estimated to cost about as
 * much; not measured. */
#define PREPENDER_COPY_MAX 1024

typedef struct prepender_s {
    unsigned field;
    int64_t adjustment;
    bool includes_field;
    bool little_endian;
} prepender_t;

/* The value to write for a payload of n bytes: 0, EDDY_ETOOLONGFRAME (does not fit the
 * field), EDDY_EINVAL (negative). */
static int prepended_length(const prepender_t *pp, size_t n, uint64_t *value)
{
    int64_t v;
    if ((uint64_t)n > INT64_MAX || __builtin_add_overflow((int64_t)n, pp->adjustment, &v) ||
        (pp->includes_field && __builtin_add_overflow(v, (int64_t)pp->field, &v))) {
        return EDDY_ETOOLONGFRAME;
    }
    if (v < 0) {
        return EDDY_EINVAL;
    }
    if (pp->field < 8 && (uint64_t)v >> (8 * pp->field) != 0) {
        return EDDY_ETOOLONGFRAME;
    }
    *value = (uint64_t)v;
    return 0;
}

static void put_length(const prepender_t *pp, eddy_buf_t *b, uint64_t v)
{
    uint8_t bytes[8];
    for (unsigned i = 0; i < pp->field; i++) {
        unsigned shift = 8 * (pp->little_endian ? i : pp->field - 1 - i);
        bytes[i] = (uint8_t)(v >> shift);
    }
    eddy_buf_write_bytes(b, bytes, pp->field); /* b was sized for it */
}

/* Move the bytes of payload (taken over) after the header in c, without copying: a buffer as
 * it is, a composite's components one by one. */
static int join(eddy_composite_t *c, eddy_msg_t *payload)
{
    if (payload->type == EDDY_MSG_BUF) {
        return eddy_composite_add(c, eddy_buf_of(payload));
    }
    eddy_composite_t *src = eddy_composite_of(payload);
    int err = 0;
    while (err == 0 && eddy_composite_readable(src) > 0) {
        struct iovec first;
        eddy_composite_iovec(src, &first, 1);
        /* One whole component: a retained slice of it, not a copy. */
        eddy_buf_t *b = eddy_composite_read_buf(src, first.iov_len);
        err = b != NULL ? eddy_composite_add(c, b) : EDDY_ENOMEM;
    }
    eddy_composite_release(src);
    return err;
}

static void prepender_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    prepender_t *pp = eddy_ctx_state(ctx);
    if (msg->type != EDDY_MSG_BUF && msg->type != EDDY_MSG_COMPOSITE) {
        eddy_ctx_write(ctx, msg, p); /* not bytes: not ours */
        return;
    }
    size_t n = eddy__msg_bytes(msg);
    uint64_t value = 0;
    int err = pp != NULL ? prepended_length(pp, n, &value) : EDDY_EINVAL;
    eddy_buf_t *head = NULL;
    if (err == 0) {
        size_t room = pp->field + (n <= PREPENDER_COPY_MAX ? n : 0);
        head = eddy_buf_alloc(eddy_ctx_alloc(ctx), room, EDDY_BUF_DEFAULT_MAX_CAPACITY);
        err = head == NULL ? EDDY_ENOMEM : 0;
    }
    if (err != 0) {
        eddy_ctx_fail_write(ctx, msg, p, err);
        return;
    }
    put_length(pp, head, value);
    if (n <= PREPENDER_COPY_MAX) {
        if (msg->type == EDDY_MSG_BUF) {
            eddy_buf_write_buf(head, eddy_buf_of(msg), n);
        } else {
            eddy_composite_get_bytes(eddy_composite_of(msg), 0, eddy_buf_write_ptr(head), n);
            eddy_buf_produce(head, n);
        }
        eddy_msg_release(msg);
        eddy_ctx_write(ctx, eddy_buf_msg(head), p);
        return;
    }
    /* One message, so the header never goes out without its payload (a write refused with
     * EDDY_ENOBUFS refuses both). */
    size_t parts =
        msg->type == EDDY_MSG_BUF ? 1 : eddy_composite_components(eddy_composite_of(msg));
    eddy_composite_t *c = eddy_composite_new(parts + 1);
    if (c == NULL) {
        eddy_buf_release(head);
        eddy_ctx_fail_write(ctx, msg, p, EDDY_ENOMEM);
        return;
    }
    err = eddy_composite_add(c, head); /* takes head over, also on failure */
    if (err == 0) {
        err = join(c, msg);
    } else {
        eddy_msg_release(msg);
    }
    if (err != 0) {
        eddy_composite_release(c);
        eddy_ctx_fail_write(ctx, NULL, p, err); /* msg went with the composite */
        return;
    }
    eddy_ctx_write(ctx, eddy_composite_msg(c), p);
}

static const eddy_handler_ops_t prepender_handler = {
    .name = "length_field_prepender",
    .write = prepender_write,
};

void *eddy_length_field_prepender_new_opts(const eddy_length_field_prepender_options_t *o)
{
    if (o == NULL || !field_length_ok(o->length_field_length)) {
        return NULL;
    }
    prepender_t *pp = malloc(sizeof(*pp));
    if (pp != NULL) {
        pp->field = o->length_field_length;
        pp->adjustment = o->length_adjustment;
        pp->includes_field = o->length_includes_length_field;
        pp->little_endian = o->little_endian;
    }
    return pp;
}

void *eddy_length_field_prepender_new(unsigned length_field_length)
{
    eddy_length_field_prepender_options_t o = {.length_field_length = length_field_length};
    return eddy_length_field_prepender_new_opts(&o);
}

const eddy_handler_ops_t *eddy_length_field_prepender_ops(void)
{
    return &prepender_handler;
}

eddy_handler_t eddy_length_field_decoder(size_t max_frame_length, size_t length_field_offset,
                                         unsigned length_field_length, int64_t length_adjustment,
                                         size_t initial_bytes_to_strip)
{
    return eddy_handler(NULL, eddy_length_field_decoder_ops(),
                        eddy_length_field_decoder_new(max_frame_length, length_field_offset,
                                                      length_field_length, length_adjustment,
                                                      initial_bytes_to_strip),
                        eddy_free_state);
}

eddy_handler_t eddy_length_field_prepender(unsigned length_field_length)
{
    return eddy_handler(NULL, eddy_length_field_prepender_ops(),
                        eddy_length_field_prepender_new(length_field_length), eddy_free_state);
}
