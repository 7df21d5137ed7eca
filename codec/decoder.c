/*
 * The byte-to-message decoder base (Netty's ByteToMessageDecoder): the cumulation, the decode
 * loop, and the delivery of what decode emitted.
 *
 * A decoder's state is freed by the pipeline right after handler_removed, even when that runs
 * from inside one of our own callbacks (a handler downstream closes the channel while we fire
 * a frame to it, or decode removes its own handler). So after every call that can reach other
 * handlers (decode, a fire) we ask eddy_ctx_is_removed() before touching the state again; the
 * context itself stays valid until the outermost event leaves the pipeline.
 *
 * Backpressure is per message: with EDDY_PAUSE_READ_WHEN_UNWRITABLE on, no message goes on
 * while the channel is unwritable. What the decoder holds then waits in the cumulation (the
 * channel stops reading after this read batch), and decoding resumes from a task once the
 * channel drained, so a client pipelining requests with large replies costs the high water
 * mark plus one reply, not one reply per request of a read.
 */
#include <eddy/channel.h>
#include <eddy/codec.h>

#include "buffer/layer.h"
#include "pipeline/layer.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* COMPOSITE: components kept before they are merged into one, so a frame trickling in byte by
 * byte costs one copy per this many reads instead of a composite without bound. The composite's
 * own default cap (buffer.h). */
#define COMPOSITE_MAX_COMPONENTS 1024

/* Merged cumulations grow as eddy_buf_ensure_writable() does (buffer.h): doubling from 64
 * bytes to 4 MiB, then in 4 MiB steps, so that appending n bytes costs O(n) amortised. */
#define MERGE_MIN 64
#define MERGE_STEP ((size_t)4 << 20)

/* Messages decode emits in one call before the list needs the heap: most emit one. */
#define OUT_INLINE 8

struct eddy_cumulation_s {
    eddy_buf_t *buf;         /* the bytes as one buffer, or NULL */
    eddy_composite_t *comp;  /* or as components (COMPOSITE), or NULL; never both */
    bool owned;              /* buf is ours alone: appends may fill its spare room */
    eddy_allocator_t *alloc; /* for merged buffers: the channel's */
};

typedef struct entry_s {
    eddy_msg_t *msg; /* a message to fire, or NULL for err */
    int err;
} entry_t;

struct eddy_decoder_out_s {
    entry_t *v;
    size_t n, cap;
    size_t msgs;          /* messages among the entries */
    int lost_err;         /* an error raised when no room was left to queue it */
    eddy_msg_t *leftover; /* the cumulation, handed over by a removal inside decode */
    entry_t inline_v[OUT_INLINE];
};

struct eddy_decoder_s {
    const eddy_decoder_ops_t *ops;
    eddy_cumulator_t cumulator;
    bool single_decode;
    bool got_bytes;             /* bytes came in since the last read_complete */
    bool fired;                 /* a message went on since the last read_complete */
    bool closing;               /* inside input_closed(): nested closes do nothing more */
    bool held;                  /* decoding stopped for backpressure with bytes left */
    bool holding;               /* ... and holds the channel's input (eddy__channel_hold_input) */
    bool resume_queued;         /* resume() will run */
    bool input_ended;           /* the input ended while held: handled behind the bytes */
    size_t emitted;             /* messages fired, ever: read_complete after a close */
    int64_t since;              /* the message under way began then (loop clock); 0: none */
    int failed;                 /* a decode error waiting for read_complete (negative), or
                                   1 once raised: input is dropped from then on; 0: none */
    eddy_decoder_out_t *active; /* the decode call in progress, if any */
    eddy_cumulation_t cum;
    max_align_t self[]; /* the decoder's own state */
};

/* ---------------------------------------------------------------------------------------
 * The cumulation
 */

static size_t grown_capacity(size_t need)
{
    if (need > MERGE_STEP) {
        size_t steps = need / MERGE_STEP + (need % MERGE_STEP != 0);
        return steps <= SIZE_MAX / MERGE_STEP ? steps * MERGE_STEP : need;
    }
    size_t cap = MERGE_MIN;
    while (cap < need) {
        cap <<= 1;
    }
    return cap;
}

/* Drop every byte. */
static void cum_clear(eddy_cumulation_t *c)
{
    if (c->buf != NULL) {
        eddy_buf_release(c->buf);
        c->buf = NULL;
    }
    if (c->comp != NULL) {
        eddy_composite_release(c->comp);
        c->comp = NULL;
    }
    c->owned = false;
}

/* Merge a composite's bytes into one buffer of our own (room for extra more bytes). */
static int cum_flatten(eddy_cumulation_t *c, size_t extra)
{
    assert(c->comp != NULL && c->buf == NULL);
    size_t n = eddy_composite_readable(c->comp);
    if (extra > SIZE_MAX - n) {
        return EDDY_ENOMEM;
    }
    size_t cap = grown_capacity(n + extra);
    eddy_buf_t *b = eddy_buf_alloc(c->alloc, cap, cap);
    if (b == NULL) {
        return EDDY_ENOMEM;
    }
    eddy_composite_get_bytes(c->comp, 0, eddy_buf_write_ptr(b), n);
    eddy_buf_produce(b, n);
    eddy_composite_release(c->comp);
    c->comp = NULL;
    c->buf = b;
    c->owned = true;
    return 0;
}

/* MERGE: append in (taken over) by copying, into spare room when buf is ours alone, else into
 * a new buffer holding both. Never grows buf in place: frames already sliced out of it keep
 * pointing into its memory, and a moved buffer would have to keep its old block alive. */
static int cum_merge(eddy_cumulation_t *c, eddy_buf_t *in)
{
    size_t n = eddy_buf_readable(in);
    assert((c->buf != NULL) != (c->comp != NULL)); /* something to append to, one form */
    int err = 0;
    if (c->comp != NULL) {
        err = cum_flatten(c, n); /* the cumulator changed mid-stream */
    }
    if (err == 0 && c->owned && eddy_buf_writable(c->buf) >= n) {
        eddy_buf_write_buf(c->buf, in, n); /* cannot fail: the room is there */
        eddy_buf_release(in);
        return 0;
    }
    size_t have = err == 0 ? eddy_buf_readable(c->buf) : 0;
    if (err == 0 && n > SIZE_MAX - have) {
        err = EDDY_ENOMEM;
    }
    eddy_buf_t *b = NULL;
    if (err == 0) {
        size_t cap = grown_capacity(have + n);
        b = eddy_buf_alloc(c->alloc, cap, cap);
        err = b == NULL ? EDDY_ENOMEM : 0;
    }
    if (err != 0) {
        eddy_buf_release(in);
        return err;
    }
    eddy_buf_write_buf(b, c->buf, have);
    eddy_buf_write_buf(b, in, n);
    eddy_buf_release(c->buf);
    eddy_buf_release(in);
    c->buf = b;
    c->owned = true;
    return 0;
}

/* COMPOSITE: append in (taken over) as a component, merging the components into one first
 * when the composite is full. */
static int cum_add(eddy_cumulation_t *c, eddy_buf_t *in)
{
    assert((c->buf != NULL) != (c->comp != NULL));
    if (c->comp == NULL) {
        c->comp = eddy_composite_new(COMPOSITE_MAX_COMPONENTS);
        if (c->comp == NULL) {
            eddy_buf_release(in);
            return EDDY_ENOMEM;
        }
        eddy_buf_t *first = c->buf;
        c->buf = NULL;
        c->owned = false;
        int err = eddy_composite_add(c->comp, first); /* takes first over, even on failure */
        if (err != 0) {
            eddy_buf_release(in);
            return err;
        }
    }
    if (eddy_composite_components(c->comp) >= COMPOSITE_MAX_COMPONENTS) {
        eddy_buf_t *all = eddy_composite_consolidate(c->comp);
        int err = all != NULL ? eddy_composite_add(c->comp, all) : EDDY_ENOMEM;
        if (err != 0) {
            eddy_buf_release(in);
            return err;
        }
    }
    return eddy_composite_add(c->comp, in);
}

/* Append the bytes of msg (taken over). On failure the stream has a hole: the caller discards
 * the cumulation. */
static int cumulate(eddy_decoder_t *d, eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_cumulation_t *c = &d->cum;
    c->alloc = eddy_ctx_alloc(ctx);
    eddy_buf_t *in;
    if (msg->type == EDDY_MSG_COMPOSITE) {
        eddy_composite_t *mc = eddy_composite_of(msg);
        in = eddy_composite_consolidate(mc);
        eddy_composite_release(mc);
        if (in == NULL) {
            return EDDY_ENOMEM;
        }
    } else {
        in = eddy_buf_of(msg);
    }
    assert(in != NULL); /* channel_read passes other messages on */
    if (eddy_buf_readable(in) == 0) {
        eddy_buf_release(in);
        return 0;
    }
    if (c->buf == NULL && c->comp == NULL) {
        /* Nothing left over: the read itself is the cumulation, uncopied. Its spare room is
         * ours to fill only if nobody else holds it. */
        c->buf = in;
        c->owned = eddy_buf_refcnt(in) == 1;
        return 0;
    }
    return d->cumulator == EDDY_CUMULATOR_COMPOSITE ? cum_add(c, in) : cum_merge(c, in);
}

/* A leftover at most a quarter of the buffer holding it, a buffer of at least this size, is
 * copied into a buffer its size after a decode pass, so that a connection waiting for the rest
 * of a frame keeps a few KiB, not the whole read: bench/ws's 16 KiB echo kept a 64 KiB read per
 * connection for the head of its next frame. The price: a read that came short, whose spare
 * room the next read would have filled, now costs that read a new buffer and the leftover a
 * second copy. Not compacted: a COMPOSITE cumulation after its second read, and a slice (its
 * capacity is its own length, not that of the read it keeps). */
#define COMPACT_MIN_CAPACITY 16384

static void cum_compact(eddy_cumulation_t *c)
{
    if (c->buf == NULL) {
        return;
    }
    size_t n = eddy_buf_readable(c->buf), cap = eddy_buf_capacity(c->buf);
    if (n == 0 || cap < COMPACT_MIN_CAPACITY || n > cap / 4) {
        return;
    }
    eddy_buf_t *b = eddy_buf_alloc(c->alloc, n, n);
    if (b == NULL) {
        return; /* kept as it is: only memory is lost */
    }
    eddy_buf_write_buf(b, c->buf, n);
    assert(eddy_buf_readable(b) == n && eddy_buf_readable(c->buf) == 0);
    eddy_buf_release(c->buf);
    c->buf = b;
    c->owned = true;
}

/* The cumulation's bytes as one message (it is left empty), or NULL when there are none. */
static eddy_msg_t *cum_take(eddy_cumulation_t *c)
{
    eddy_msg_t *msg = NULL;
    if (eddy_cumulation_readable(c) > 0) {
        if (c->buf == NULL) {
            eddy_buf_t *b = eddy_composite_consolidate(c->comp);
            msg = b != NULL ? eddy_buf_msg(b) : NULL;
        } else {
            msg = eddy_buf_msg(c->buf);
            c->buf = NULL;
        }
    }
    cum_clear(c);
    return msg;
}

size_t eddy_cumulation_readable(const eddy_cumulation_t *in)
{
    assert(in->buf == NULL || in->comp == NULL); /* never both */
    if (in->buf != NULL) {
        return eddy_buf_readable(in->buf);
    }
    return in->comp != NULL ? eddy_composite_readable(in->comp) : 0;
}

int eddy_cumulation_get_bytes(const eddy_cumulation_t *in, size_t off, void *dst, size_t n)
{
    size_t r = eddy_cumulation_readable(in);
    if (off > r || n > r - off) {
        return EDDY_EBOUNDS;
    }
    if (n == 0) {
        return 0;
    }
    if (in->buf != NULL) {
        return eddy_buf_get_bytes(in->buf, eddy_buf_reader_index(in->buf) + off, dst, n);
    }
    return eddy_composite_get_bytes(in->comp, off, dst, n);
}

int eddy_cumulation_get_uint(const eddy_cumulation_t *in, size_t off, unsigned width,
                             bool little_endian, uint64_t *out)
{
    if (width < 1 || width > 8) {
        return EDDY_EINVAL;
    }
    uint8_t b[8];
    int err = eddy_cumulation_get_bytes(in, off, b, width);
    if (err != 0) {
        return err;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < width; i++) {
        if (little_endian) {
            v |= (uint64_t)b[i] << (8 * i);
        } else {
            v = v << 8 | b[i];
        }
    }
    *out = v;
    return 0;
}

int64_t eddy_cumulation_find_bytes(eddy_cumulation_t *in, size_t from, const void *needle, size_t n)
{
    size_t r = eddy_cumulation_readable(in);
    if (from > r) {
        return EDDY_EBOUNDS;
    }
    if (n == 0) {
        return (int64_t)from;
    }
    if (in->buf != NULL) {
        size_t rd = eddy_buf_reader_index(in->buf);
        int64_t at = n == 1 ? eddy_buf_find(in->buf, rd + from, rd + r, *(const uint8_t *)needle)
                            : eddy_buf_find_bytes(in->buf, rd + from, rd + r, needle, n);
        return at < 0 ? at : at - (int64_t)rd;
    }
    if (in->comp == NULL) {
        return EDDY_ENOENT;
    }
    return eddy__composite_find(in->comp, from, needle, n);
}

int64_t eddy_cumulation_find(eddy_cumulation_t *in, size_t from, uint8_t byte)
{
    return eddy_cumulation_find_bytes(in, from, &byte, 1);
}

int eddy_cumulation_skip(eddy_cumulation_t *in, size_t n)
{
    if (in->buf != NULL) {
        return eddy_buf_skip(in->buf, n);
    }
    if (in->comp != NULL) {
        return eddy_composite_skip(in->comp, n);
    }
    return n == 0 ? 0 : EDDY_EBOUNDS;
}

eddy_buf_t *eddy_cumulation_read_buf(eddy_cumulation_t *in, size_t n)
{
    if (in->buf != NULL) {
        return eddy_buf_read_retained_slice(in->buf, n);
    }
    if (in->comp != NULL) {
        return eddy_composite_read_buf(in->comp, n);
    }
    return n == 0 ? eddy_buf_alloc(in->alloc, 0, 0) : NULL;
}

eddy_buf_t *eddy_cumulation_buf(eddy_cumulation_t *in)
{
    if (in->comp != NULL && cum_flatten(in, 0) != 0) {
        return NULL;
    }
    return in->buf;
}

/* ---------------------------------------------------------------------------------------
 * What decode emits
 */

static void out_init(eddy_decoder_out_t *out)
{
    out->v = out->inline_v;
    out->n = 0;
    out->cap = OUT_INLINE;
    out->msgs = 0;
    out->lost_err = 0;
    out->leftover = NULL;
}

static int out_push(eddy_decoder_out_t *out, eddy_msg_t *msg, int err)
{
    assert(out->n <= out->cap && (msg != NULL) != (err != 0)); /* a message or an error */
    if (out->n == out->cap) {
        size_t cap = out->cap * 2;
        entry_t *v = malloc(cap * sizeof(*v));
        if (v == NULL) {
            return EDDY_ENOMEM;
        }
        memcpy(v, out->v, out->n * sizeof(*v));
        if (out->v != out->inline_v) {
            free(out->v);
        }
        out->v = v;
        out->cap = cap;
    }
    out->v[out->n++] = (entry_t){msg, err};
    return 0;
}

int eddy_decoder_emit(eddy_decoder_out_t *out, eddy_msg_t *msg)
{
    if (msg == NULL) {
        return EDDY_EINVAL;
    }
    int err = out_push(out, msg, 0);
    if (err != 0) {
        eddy_msg_release(msg);
        return err;
    }
    out->msgs++;
    return 0;
}

int eddy_decoder_emit_buf(eddy_decoder_out_t *out, eddy_buf_t *b)
{
    return b != NULL ? eddy_decoder_emit(out, eddy_buf_msg(b)) : EDDY_ENOMEM;
}

void eddy_decoder_raise(eddy_decoder_out_t *out, int err)
{
    if (err < 0 && out_push(out, NULL, err) != 0) {
        out->lost_err = err;
    }
}

/* Fire the entries in order, then free the list. Uses only ctx, never the decoder: it may
 * have been removed (and its state freed) by the time a fire returns. */
static void out_deliver(eddy_ctx_t *ctx, eddy_decoder_out_t *out)
{
    for (size_t i = 0; i < out->n; i++) {
        assert(out->v[i].msg != NULL || out->v[i].err < 0);
        if (out->v[i].msg != NULL) {
            eddy_ctx_fire_channel_read(ctx, out->v[i].msg);
        } else {
            eddy_ctx_fire_exception(ctx, out->v[i].err);
        }
    }
    if (out->lost_err != 0) {
        eddy_ctx_fire_exception(ctx, out->lost_err);
    }
    if (out->v != out->inline_v) {
        free(out->v);
    }
    out->n = 0;
}

/* The bytes of a decoder being removed: to the next handler while the channel is open, as
 * Netty does (a decoder removed mid-stream hands the rest of the stream on), else released. */
static void pass_leftover(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    if (eddy_channel_is_open(eddy_ctx_channel(ctx))) {
        eddy_ctx_fire_channel_read(ctx, msg);
        eddy_ctx_fire_channel_read_complete(ctx);
    } else {
        eddy_msg_release(msg);
    }
}

/* ---------------------------------------------------------------------------------------
 * The decode loop
 */

typedef struct pass_s {
    int err;         /* what decode returned */
    size_t consumed; /* bytes it consumed */
    size_t msgs;     /* messages it emitted */
} pass_t;

/* After a decode call: is a message under way, and since when? A call that emitted and
 * stopped at a message's end (every emission, for decoders without in_message) ends one; the
 * bytes left then begin the next. */
static void track_message(eddy_ctx_t *ctx, eddy_decoder_t *d, bool emitted)
{
    bool inside = d->ops->in_message != NULL && d->ops->in_message(d->self);
    bool pending = inside || eddy_cumulation_readable(&d->cum) > 0;
    if (!pending) {
        d->since = 0;
    } else if (d->since == 0 || (emitted && !inside)) {
        d->since = eddy_loop_now_ns(eddy_ctx_loop(ctx));
        d->since += d->since == 0; /* 0 means none */
    }
}

int64_t eddy_decoder_message_since(const eddy_decoder_t *d)
{
    return d != NULL ? d->since : 0;
}

/* One call of fn and the delivery of what it produced. false: the handler was removed and
 * its state freed, so the caller must not touch d again. */
static bool decode_once(eddy_ctx_t *ctx, eddy_decoder_t *d, eddy_decode_cb fn, pass_t *r)
{
    eddy_decoder_out_t out;
    out_init(&out);
    size_t before = eddy_cumulation_readable(&d->cum);
    assert(d->active == NULL); /* decode never runs inside itself */
    d->active = &out;
    int err = fn(ctx, d->self, &d->cum, &out);
    bool removed = eddy_ctx_is_removed(ctx);
    if (!removed) {
        d->active = NULL;
        size_t after = eddy_cumulation_readable(&d->cum);
        *r = (pass_t){err, after < before ? before - after : 0, out.msgs};
        if (err < 0) {
            cum_clear(&d->cum);
        }
        d->emitted += out.msgs;
        d->fired |= out.msgs > 0;
        track_message(ctx, d, out.msgs > 0);
    }
    out_deliver(ctx, &out);
    if (out.leftover != NULL) {
        /* decode removed its own handler: the rest of the stream follows its messages, unless
         * decode also said the stream is broken. */
        if (err < 0) {
            eddy_msg_release(out.leftover);
        } else {
            pass_leftover(ctx, out.leftover);
        }
    }
    if (err < 0) {
        if (!removed && !d->closing && d->failed == 0) {
            /* In a read batch: raised after its read_complete (below), so that what the
             * handlers after us wrote for the messages before it is flushed first. */
            d->failed = err;
        } else if (removed || d->closing) {
            eddy_ctx_fire_exception(ctx, err);
        }
    }
    return !removed && !eddy_ctx_is_removed(ctx);
}

/* Backpressure per message: the channel pauses reading while unwritable, and its decoder
 * passes no message on meanwhile. Not once it closed (the end of input decodes the rest). */
static bool held_back(eddy_ctx_t *ctx)
{
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    return !eddy_channel_is_writable(ch) &&
           eddy_channel_option(ch, EDDY_PAUSE_READ_WHEN_UNWRITABLE) != 0 &&
           eddy_channel_is_open(ch);
}

/* While backpressure holds messages back, the channel reads nothing more: the held bytes go
 * first, once it drains (resume), and only then does reading go on. */
static void hold_input(eddy_ctx_t *ctx, eddy_decoder_t *d, bool hold)
{
    if (d->holding != hold) {
        d->holding = hold;
        eddy__channel_hold_input(eddy_ctx_channel(ctx), hold);
    }
}

/* Decode until a call makes no progress, or backpressure holds the rest (the input held
 * meanwhile). false: the handler is gone. */
static bool call_decode(eddy_ctx_t *ctx, eddy_decoder_t *d)
{
    d->held = false;
    while (eddy_cumulation_readable(&d->cum) > 0) {
        if (held_back(ctx)) {
            d->held = true; /* resumed by eddy_decoder_channel_writability_changed() */
            break;
        }
        pass_t r;
        if (!decode_once(ctx, d, d->ops->decode, &r)) {
            return false;
        }
        if (r.err < 0) {
            break;
        }
        if (r.consumed == 0) {
            if (r.msgs > 0) {
                /* It would emit the same again forever: a broken decoder, as Netty says with
                 * a DecoderException. */
                eddy_ctx_fire_exception(ctx, EDDY_EDECODE);
                if (eddy_ctx_is_removed(ctx)) {
                    return false;
                }
            }
            break;
        }
        if (d->single_decode && r.msgs > 0) {
            break;
        }
    }
    cum_compact(&d->cum);
    hold_input(ctx, d, d->held);
    return true;
}

/* The input ended: decode what is left, decode_last, release the rest. false: the handler
 * is gone. */
static bool input_closed(eddy_ctx_t *ctx, eddy_decoder_t *d)
{
    if (d->closing || d->active != NULL) {
        /* A close from inside our own decode or delivery: the outer call finishes the job,
         * and decoding here would run decode inside itself. */
        return true;
    }
    d->closing = true;
    size_t emitted = d->emitted;
    if (!call_decode(ctx, d)) {
        return false;
    }
    if (d->held) {
        /* Backpressure holds messages still: the end of input waits behind them (resume()),
         * and what went on meanwhile is flushed. */
        d->closing = false;
        d->input_ended = true;
        if (d->emitted != emitted) {
            eddy_ctx_fire_channel_read_complete(ctx);
            return !eddy_ctx_is_removed(ctx);
        }
        return true;
    }
    pass_t r;
    if (d->ops->decode_last != NULL) {
        if (!decode_once(ctx, d, d->ops->decode_last, &r)) {
            return false;
        }
    } else if (eddy_cumulation_readable(&d->cum) > 0) {
        if (!decode_once(ctx, d, d->ops->decode, &r)) {
            return false;
        }
    }
    cum_clear(&d->cum);
    d->closing = false;
    if (d->emitted != emitted) {
        eddy_ctx_fire_channel_read_complete(ctx);
        return !eddy_ctx_is_removed(ctx);
    }
    return true;
}

/* ---------------------------------------------------------------------------------------
 * The handler callbacks
 */

void eddy_decoder_handler_removed(eddy_ctx_t *ctx)
{
    eddy_decoder_t *d = eddy_ctx_state(ctx);
    if (d == NULL) {
        return;
    }
    hold_input(ctx, d, false);
    eddy_msg_t *left = cum_take(&d->cum);
    if (left != NULL) {
        if (d->active != NULL) {
            d->active->leftover = left; /* after the messages decode is emitting */
        } else {
            pass_leftover(ctx, left);
        }
    }
    if (d->ops->destroy != NULL) {
        d->ops->destroy(d->self);
    }
}

void eddy_decoder_channel_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_decoder_t *d = eddy_ctx_state(ctx);
    if (d == NULL) {
        eddy_msg_release(msg);
        eddy_ctx_fire_exception(ctx, EDDY_EINVAL);
        return;
    }
    if (msg->type != EDDY_MSG_BUF && msg->type != EDDY_MSG_COMPOSITE) {
        d->fired = true;
        eddy_ctx_fire_channel_read(ctx, msg); /* not bytes: not ours to decode */
        return;
    }
    d->got_bytes = true;
    int err = cumulate(d, ctx, msg);
    if (err != 0) {
        cum_clear(&d->cum);
        eddy_ctx_fire_exception(ctx, err);
        return;
    }
    if (d->active != NULL) {
        return; /* fed from inside our own decode: the loop running it goes on with these */
    }
    if (d->failed != 0) {
        cum_clear(&d->cum); /* out of step with the stream: the channel closes at read_complete */
        return;
    }
    if (call_decode(ctx, d) && eddy_cumulation_readable(&d->cum) == 0) {
        cum_clear(&d->cum); /* all consumed: hold no memory between reads */
    }
}

/* The end of a batch of messages: read_complete on, then a decode error of the batch. */
static void finish_batch(eddy_ctx_t *ctx, eddy_decoder_t *d)
{
    int failed = d != NULL && d->failed < 0 ? d->failed : 0;
    if (failed != 0) {
        d->failed = 1;
    }
    eddy_ctx_fire_channel_read_complete(ctx);
    if (failed != 0 && !eddy_ctx_is_removed(ctx) && eddy_channel_is_open(eddy_ctx_channel(ctx))) {
        /* The stream is broken: the error, then the channel closes once what was written is
         * out (docs/architecture.md, "Errors": bad input closes after what was queued is
         * flushed). A handler that
         * closes in exception_caught closes at once, after read_complete's flush. Once the
         * channel closed (a reset came in the same batch, and a handler acted on it) the
         * error has nobody left to tell: it would only reach the tail. */
        eddy_ctx_fire_exception(ctx, failed);
        eddy_ctx_close_after_flush(ctx, NULL);
    }
}

void eddy_decoder_channel_read_complete(eddy_ctx_t *ctx)
{
    eddy_decoder_t *d = eddy_ctx_state(ctx);
    if (d != NULL) {
        /* Bytes came but no message went on: without auto-read nobody else asks for more,
         * and the channel would stall (Netty's channelReadComplete). Not while backpressure
         * holds messages: their resumption reads on. */
        if (d->got_bytes && !d->fired && !d->held &&
            eddy_channel_option(eddy_ctx_channel(ctx), EDDY_AUTO_READ) == 0) {
            eddy_ctx_read(ctx);
        }
        d->got_bytes = false;
        d->fired = false;
    }
    finish_batch(ctx, d);
}

/* The channel drained after backpressure held messages back: decode on, as a batch of its
 * own (read_complete after, so the handlers flush), then the end of input if it came. A task,
 * not a call from inside the writability event: that fires from within a flush, maybe the
 * application's own read_complete, which must not see channel_read inside it. */
static void resume(eddy_ctx_t *ctx, void *arg)
{
    (void)arg;
    eddy_decoder_t *d = eddy_ctx_state(ctx);
    assert(d != NULL && d->resume_queued);
    d->resume_queued = false;
    if (!d->held || held_back(ctx)) {
        return; /* decoded meanwhile, or unwritable again: the next drain resumes */
    }
    size_t emitted = d->emitted;
    if (!call_decode(ctx, d)) {
        return;
    }
    if (eddy_cumulation_readable(&d->cum) == 0) {
        cum_clear(&d->cum);
    }
    if (d->emitted != emitted || d->failed < 0) {
        finish_batch(ctx, d);
        if (eddy_ctx_is_removed(ctx)) {
            return;
        }
    } else if (!d->held && !d->input_ended &&
               eddy_channel_option(eddy_ctx_channel(ctx), EDDY_AUTO_READ) == 0) {
        eddy_ctx_read(ctx); /* a message's first part only: without auto-read, ask for more */
    }
    if (d->held || !d->input_ended) {
        return;
    }
    d->input_ended = false;
    if (!eddy_channel_is_open(eddy_ctx_channel(ctx))) {
        return; /* closed meanwhile: channel_inactive decoded the rest */
    }
    if (input_closed(ctx, d) && !eddy_ctx_is_removed(ctx) && !d->input_ended) {
        eddy_ctx_fire_user_event(ctx, EDDY_EVENT_INPUT_SHUTDOWN, NULL); /* held back till now */
    }
}

void eddy_decoder_channel_writability_changed(eddy_ctx_t *ctx)
{
    eddy_decoder_t *d = eddy_ctx_state(ctx);
    if (d != NULL && d->held && !d->resume_queued &&
        eddy_channel_is_writable(eddy_ctx_channel(ctx))) {
        d->resume_queued = eddy_ctx_execute(ctx, resume, NULL) == 0;
    }
    eddy_ctx_fire_channel_writability_changed(ctx);
}

void eddy_decoder_channel_inactive(eddy_ctx_t *ctx)
{
    eddy_decoder_t *d = eddy_ctx_state(ctx);
    if (d != NULL) {
        input_closed(ctx, d);
    }
    eddy_ctx_fire_channel_inactive(ctx);
}

void eddy_decoder_user_event_triggered(eddy_ctx_t *ctx, int event, void *data)
{
    eddy_decoder_t *d = eddy_ctx_state(ctx);
    if (d != NULL && event == EDDY_EVENT_INPUT_SHUTDOWN && input_closed(ctx, d) &&
        d->input_ended) {
        return; /* behind the messages backpressure holds: resume() passes it on */
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

/* ---------------------------------------------------------------------------------------
 * Making decoders
 */

eddy_decoder_t *eddy_decoder_new(const eddy_decoder_ops_t *ops, size_t self_size)
{
    if (ops == NULL || ops->decode == NULL ||
        self_size > SIZE_MAX - offsetof(eddy_decoder_t, self)) {
        return NULL;
    }
    eddy_decoder_t *d = calloc(1, offsetof(eddy_decoder_t, self) + self_size);
    if (d == NULL) {
        return NULL;
    }
    d->ops = ops;
    d->cumulator = EDDY_CUMULATOR_MERGE;
    return d;
}

void *eddy_decoder_self(eddy_decoder_t *d)
{
    return d->self;
}

int eddy_decoder_set_cumulator(eddy_decoder_t *d, eddy_cumulator_t cumulator)
{
    if (d == NULL || (cumulator != EDDY_CUMULATOR_MERGE && cumulator != EDDY_CUMULATOR_COMPOSITE)) {
        return EDDY_EINVAL;
    }
    d->cumulator = cumulator;
    return 0;
}

int eddy_decoder_set_single_decode(eddy_decoder_t *d, bool single)
{
    if (d == NULL) {
        return EDDY_EINVAL;
    }
    d->single_decode = single;
    return 0;
}
