/*
 * eddy codecs: bytes into messages and back (Netty's io.netty.handler.codec).
 *
 * Decoders share one base, the byte-to-message decoder (Netty's ByteToMessageDecoder). It keeps
 * the bytes read so far (the cumulation), calls the decoder's decode callback until a call
 * makes no progress (consumes nothing and emits nothing), passes what decode emitted to the
 * next handler, and keeps the leftover bytes for the next read. When the channel's input ends
 * it calls decode_last once more, then releases what is left. The framing decoders below
 * (length field, line, delimiter, fixed length) are decoders on that base; a user writes their
 * own the same way:
 *
 *     static int tlv_decode(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in,
 *                           eddy_decoder_out_t *out);
 *     static const eddy_decoder_ops_t tlv_ops = {.name = "tlv", .decode = tlv_decode};
 *     static const eddy_handler_ops_t tlv_handler = EDDY_DECODER_HANDLER_OPS("tlv");
 *
 *     eddy_pipeline_add_last(p, "tlv", &tlv_handler, eddy_decoder_new(&tlv_ops, sizeof(tlv_t)),
 *                            eddy_free_state);
 *
 * A decoder's state is one block from malloc: handler_removed releases the bytes it holds
 * (and calls the decoder's destroy), so eddy_free_state is all it needs afterwards. A NULL
 * state (a constructor that failed) makes the handler release what it reads and raise
 * EDDY_EINVAL.
 *
 * The cumulation is either one buffer that reads are copied into (EDDY_CUMULATOR_MERGE, the
 * default) or a composite of the buffers as they were read (EDDY_CUMULATOR_COMPOSITE: no
 * copy per read, dearer searches). Decode reads it through eddy_cumulation_*(), the same in
 * both modes. Frames the built-in decoders emit are eddy_buf_t: a retained slice of the
 * cumulation (no copy), or a copy when a COMPOSITE frame spans several reads. After each
 * decode pass, bytes left that fill at most a quarter of a buffer of 16 KiB or more (the head
 * of the next frame at the end of a large read) are copied into a buffer their size, so a
 * connection waiting for the rest keeps those bytes, not the read.
 *
 * Errors: a decode that returns a negative EDDY_E* (malformed input: EDDY_EDECODE) says the
 * stream is broken. The cumulation is discarded and nothing after it is decoded; the messages
 * decode emitted before are delivered, the read batch ends (channel_read_complete passes on,
 * so what the handlers after it wrote for those messages is flushed), then the error is fired
 * to exception_caught and the channel closes after flush (eddy_ctx_close_after_flush): bad
 * input gets a clean close and loses no reply to what came before it, also when the handler
 * closes in exception_caught (Netty fires at once and leaves the channel open;
 * docs/architecture.md, "Errors", promises the close after the flush). Pipelines fed by hand
 * (eddy_pipeline_fire_channel_read) must end each batch with
 * eddy_pipeline_fire_channel_read_complete for the error to come. At the end of input
 * (decode_last) the error is fired at once. A decoder that stays in step
 * with the stream (a too-long frame skipped whole) reports with eddy_decoder_raise() instead,
 * in order with its messages, and decoding goes on. Too-long frames are never buffered: their
 * bytes are discarded as they arrive and EDDY_ETOOLONGFRAME is raised once.
 *
 * Encoders: the message-to-byte encoder base (Netty's MessageToByteEncoder) and the length
 * field prepender. Every callback runs on the channel's loop, like every handler's.
 */
#ifndef EDDY_CODEC_H
#define EDDY_CODEC_H

#include <eddy/buffer.h>
#include <eddy/common.h>
#include <eddy/datagram.h>
#include <eddy/pipeline.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eddy_decoder_s eddy_decoder_t;
typedef struct eddy_cumulation_s eddy_cumulation_t;
typedef struct eddy_decoder_out_s eddy_decoder_out_t;
typedef struct eddy_encoder_s eddy_encoder_t;

/* How a decoder keeps the bytes it has not consumed yet (Netty's Cumulator). */
typedef enum {
    EDDY_CUMULATOR_MERGE = 0,    /* copy reads into one buffer that grows (the default) */
    EDDY_CUMULATOR_COMPOSITE = 1 /* keep reads as components of a composite, uncopied */
} eddy_cumulator_t;

/*
 * Consume whole frames from the front of in and emit what they decode to (zero or more
 * messages). self: the decoder's own state (eddy_decoder_self). Return 0, or a negative
 * EDDY_E* for malformed input: the cumulation is then discarded and the error fired. A decode
 * that removes its own handler or closes the channel must return at once, touching neither in
 * nor self again (both are freed); what it emitted before is still delivered.
 */
typedef int (*eddy_decode_cb)(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in,
                              eddy_decoder_out_t *out);

/* A decoder kind: static, outlives every decoder made with it. */
typedef struct eddy_decoder_ops_s {
    const char *name;
    eddy_decode_cb decode;       /* required */
    eddy_decode_cb decode_last;  /* input ended; NULL: decode once more if bytes are left */
    void (*destroy)(void *self); /* release what self holds (not self); may be NULL */
    /* For message deadlines (eddy_decoder_message_since): true while a message is under way
     * beyond what the cumulation shows, for decoders that consume a message in parts (an
     * HTTP body) or search it incrementally. Such a decoder returns from decode after each
     * whole message, so that the base sees where one ends. NULL: every message it emits is
     * whole, and one is under way while unconsumed bytes are left. */
    bool (*in_message)(const void *self);
} eddy_decoder_ops_t;

/* ---------------------------------------------------------------------------------------
 * The decoder base
 */

/**
 * A decoder state of kind ops with self_size zeroed bytes of its own (eddy_decoder_self), to
 * pass to eddy_pipeline_add_*() with a handler table from EDDY_DECODER_HANDLER_OPS and
 * eddy_free_state. MERGE cumulation. NULL when ops or ops->decode is NULL, or out of memory.
 */
EDDY_EXTERN eddy_decoder_t *eddy_decoder_new(const eddy_decoder_ops_t *ops, size_t self_size);

/** The decoder's own state (aligned for any type); what decode receives as self. Borrows. */
EDDY_EXTERN void *eddy_decoder_self(eddy_decoder_t *d);

/** Choose how d cumulates, before the handler sees bytes: 0, EDDY_EINVAL (d NULL, bad mode). */
EDDY_EXTERN int eddy_decoder_set_cumulator(eddy_decoder_t *d, eddy_cumulator_t cumulator);

/** At most one message per read (Netty's setSingleDecode), for decoders that hand the rest
 * of the stream to another handler: 0 or EDDY_EINVAL (d NULL). */
EDDY_EXTERN int eddy_decoder_set_single_decode(eddy_decoder_t *d, bool single);

/** Since when (eddy_loop_now_ns) the message d is decoding has been under way: its first
 * bytes came in then, or the message before it ended then with these bytes behind it; 0 when
 * no message is under way. What the message deadline handler (below) reads. The loop's
 * thread. */
EDDY_EXTERN int64_t eddy_decoder_message_since(const eddy_decoder_t *d);

/*
 * The base's handler callbacks, for handler tables of decoders (EDDY_DECODER_HANDLER_OPS). The
 * handler's state must come from eddy_decoder_new() or a decoder constructor below.
 */

/** Release the cumulation, or pass its bytes on to the next handler when the channel is still
 * open (a decoder removed mid-stream hands the rest of the stream on, as in Netty); then the
 * decoder's destroy. */
EDDY_EXTERN void eddy_decoder_handler_removed(eddy_ctx_t *ctx);
/** Cumulate msg (taken over; messages that are not buffers or composites are passed on
 * untouched) and decode. Out of memory: the cumulation is discarded, EDDY_ENOMEM fired. */
EDDY_EXTERN void eddy_decoder_channel_read(eddy_ctx_t *ctx, eddy_msg_t *msg);
/** Ask for another read when auto-read is off and bytes came in but no message came out;
 * then a decode error of this read batch (exception_caught, and a close after flush). */
EDDY_EXTERN void eddy_decoder_channel_read_complete(eddy_ctx_t *ctx);
/** Decode what is left, then decode_last, release the rest and pass the event on. */
EDDY_EXTERN void eddy_decoder_channel_inactive(eddy_ctx_t *ctx);
/** On EDDY_EVENT_INPUT_SHUTDOWN, as channel_inactive; every event is passed on (the input's
 * end behind the messages backpressure still holds, once they went on). */
EDDY_EXTERN void eddy_decoder_user_event_triggered(eddy_ctx_t *ctx, int event, void *data);
/**
 * Backpressure per message: with EDDY_PAUSE_READ_WHEN_UNWRITABLE on, the decoder passes no
 * message on while the channel is unwritable (the bytes wait in its cumulation; the channel
 * stops reading after the read batch); once it is writable again, decoding goes on from a
 * task, as a batch of its own ending in channel_read_complete. Passes the event on.
 */
EDDY_EXTERN void eddy_decoder_channel_writability_changed(eddy_ctx_t *ctx);

/* A handler table for a decoder kind, named for logs: one static const table per kind, shared
 * by every decoder of the kind (not sharable: each decoder state sits in one pipeline). */
#define EDDY_DECODER_HANDLER_OPS(name_)                                                            \
    {                                                                                              \
        .name = (name_), .sharable = false, .handler_removed = eddy_decoder_handler_removed,       \
        .channel_inactive = eddy_decoder_channel_inactive,                                         \
        .channel_read = eddy_decoder_channel_read,                                                 \
        .channel_read_complete = eddy_decoder_channel_read_complete,                               \
        .user_event_triggered = eddy_decoder_user_event_triggered,                                 \
        .channel_writability_changed = eddy_decoder_channel_writability_changed,                   \
    }

/* ---------------------------------------------------------------------------------------
 * Message deadline (codec/deadline.c; in handler.h before #29): a whole message must arrive
 * within a time of its first byte, however the bytes trickle in (slowloris protection for any
 * protocol: an HTTP request, an RPC frame, a RESP command). The read timeout restarts at
 * every read, so a client sending a byte a second keeps it at bay for ever; this one does
 * not. It asks the decoders of the pipeline (those on the decoder base:
 * eddy_decoder_message_since) whether a message is under way and since when, at each
 * read_complete and when its timer fires; put it anywhere before the protocol's handler
 * (first is usual). Past the time: exception_caught with EDDY_ETIMEDOUT
 * passed on from the handler, then the channel closed; once. A connection between messages
 * is not timed (the idle and read timeouts are for that).
 */

/** The message deadline handler's ops table (static). Any thread. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_message_deadline_handler_ops(void);

/**
 * State for eddy_message_deadline_handler_ops(): each message must be decoded within
 * timeout_ms (at least 1 ms; 0 or negative: never) of the moment it began. NULL without
 * memory. Any thread.
 */
EDDY_EXTERN void *eddy_message_deadline_handler_new(int64_t timeout_ms);
/** The message deadline handler as one value (eddy_handler_t). */
EDDY_EXTERN eddy_handler_t eddy_message_deadline_handler(int64_t timeout_ms);

/* ---------------------------------------------------------------------------------------
 * What decode emits
 */

/** Emit msg to the next handler once decode returns, in order. Takes ownership of msg (also
 * on failure, when it is released): 0, EDDY_EINVAL (msg NULL), EDDY_ENOMEM. */
EDDY_EXTERN int eddy_decoder_emit(eddy_decoder_out_t *out, eddy_msg_t *msg);

/** eddy_decoder_emit() of a buffer; b NULL (a failed eddy_cumulation_read_buf) is EDDY_ENOMEM,
 * so decode may `return eddy_decoder_emit_buf(out, eddy_cumulation_read_buf(in, n));`. */
EDDY_EXTERN int eddy_decoder_emit_buf(eddy_decoder_out_t *out, eddy_buf_t *b);

/** Fire err (negative) to exception_caught after the messages emitted before it, keeping the
 * cumulation: for errors the decoder has already stepped over (a too-long frame skipped). */
EDDY_EXTERN void eddy_decoder_raise(eddy_decoder_out_t *out, int err);

/* ---------------------------------------------------------------------------------------
 * Reading the cumulation, inside decode. Offsets count from the first unconsumed byte; in and
 * what these return (offsets, pointers) are valid until decode returns.
 */

/** Bytes not consumed yet. */
EDDY_EXTERN size_t eddy_cumulation_readable(const eddy_cumulation_t *in);

/** Copy n bytes at off to dst, consuming nothing: 0 or EDDY_EBOUNDS (past the readable end). */
EDDY_EXTERN int eddy_cumulation_get_bytes(const eddy_cumulation_t *in, size_t off, void *dst,
                                          size_t n);

/** The unsigned integer of width bytes (1 to 8) at off, big endian unless little_endian: 0,
 * EDDY_EBOUNDS, EDDY_EINVAL (width). */
EDDY_EXTERN int eddy_cumulation_get_uint(const eddy_cumulation_t *in, size_t off, unsigned width,
                                         bool little_endian, uint64_t *out);

/** Offset of the first byte equal to byte at or after from; EDDY_ENOENT if none, EDDY_EBOUNDS
 * if from is past the readable end, EDDY_ENOMEM (COMPOSITE: the scratch for the search). */
EDDY_EXTERN int64_t eddy_cumulation_find(eddy_cumulation_t *in, size_t from, uint8_t byte);

/** Offset of the first occurrence of the n bytes at needle at or after from (found at from
 * when n is 0); errors as eddy_cumulation_find(). */
EDDY_EXTERN int64_t eddy_cumulation_find_bytes(eddy_cumulation_t *in, size_t from,
                                               const void *needle, size_t n);

/** Consume n bytes: 0 or EDDY_EBOUNDS (fewer readable; nothing consumed). */
EDDY_EXTERN int eddy_cumulation_skip(eddy_cumulation_t *in, size_t n);

/** Consume the next n bytes as a buffer the caller owns: a retained slice of the cumulation,
 * or a copy when they span COMPOSITE components. NULL when fewer are readable or out of
 * memory. */
EDDY_EXTERN eddy_buf_t *eddy_cumulation_read_buf(eddy_cumulation_t *in, size_t n);

/** The readable bytes as one buffer (borrowed until decode returns: keep offsets, not
 * pointers, across calls, since the bytes may move between them; COMPOSITE components are
 * copied together first), for decoders that want the eddy_buf_t API: reading from it consumes.
 * NULL when nothing is readable or out of memory. */
EDDY_EXTERN eddy_buf_t *eddy_cumulation_buf(eddy_cumulation_t *in);

/* ---------------------------------------------------------------------------------------
 * Length field framing (Netty's LengthFieldBasedFrameDecoder and LengthFieldPrepender)
 */

typedef struct eddy_length_field_options_s {
    size_t max_frame_length;       /* longest frame, header included; > 0 */
    size_t length_field_offset;    /* where the field starts; offset + length <= max */
    unsigned length_field_length;  /* 1, 2, 3, 4 or 8 bytes, unsigned (8: signed, >= 0) */
    int64_t length_adjustment;     /* added to the field's value */
    size_t initial_bytes_to_strip; /* dropped from the front of each frame */
    bool little_endian;            /* the field's byte order; false: big endian */
    bool fail_fast;                /* raise a too-long frame when its length is read, not
                                      after it was discarded (Netty's default: true) */
} eddy_length_field_options_t;

/**
 * A decoder splitting the stream by a length field: each frame is length_field_offset +
 * length_field_length + the field's value + length_adjustment bytes long, emitted without its
 * first initial_bytes_to_strip bytes. Errors raised: EDDY_ETOOLONGFRAME (frame longer than
 * max_frame_length, discarded as it arrives), EDDY_EDECODE (frame shorter than strip,
 * skipped); returned: EDDY_EDECODE (negative length, shorter than the header, or overflowing
 * 64 bits). Big endian, fail fast. NULL on invalid parameters or out of memory.
 */
EDDY_EXTERN eddy_decoder_t *eddy_length_field_decoder_new(size_t max_frame_length,
                                                          size_t length_field_offset,
                                                          unsigned length_field_length,
                                                          int64_t length_adjustment,
                                                          size_t initial_bytes_to_strip);
/** The same with every parameter (o borrowed). NULL on invalid options or out of memory. */
EDDY_EXTERN eddy_decoder_t *
eddy_length_field_decoder_new_opts(const eddy_length_field_options_t *o);
/** The handler table for length field decoders. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_length_field_decoder_ops(void);
/** A length field decoder as one value (pipeline.h, eddy_handler_t): ops and state. */
EDDY_EXTERN eddy_handler_t eddy_length_field_decoder(size_t max_frame_length,
                                                     size_t length_field_offset,
                                                     unsigned length_field_length,
                                                     int64_t length_adjustment,
                                                     size_t initial_bytes_to_strip);

typedef struct eddy_length_field_prepender_options_s {
    unsigned length_field_length;      /* 1, 2, 3, 4 or 8 bytes */
    int64_t length_adjustment;         /* added to the written length */
    bool length_includes_length_field; /* the length counts the field itself */
    bool little_endian;                /* false: big endian */
} eddy_length_field_prepender_options_t;

/**
 * State for eddy_length_field_prepender_ops(): an outbound handler writing each buffer or
 * composite as its length (big endian, length_field_length bytes) then its bytes, in one
 * message: the payload is copied after the header when small, else both go in a composite.
 * Other messages pass untouched. A length that does not fit the field fails the write's
 * promise with EDDY_ETOOLONGFRAME, a negative one with EDDY_EINVAL; the message is released.
 * Freed with eddy_free_state. NULL on a bad length or out of memory.
 */
EDDY_EXTERN void *eddy_length_field_prepender_new(unsigned length_field_length);
/** The same with every parameter (o borrowed). NULL on invalid options or out of memory. */
EDDY_EXTERN void *
eddy_length_field_prepender_new_opts(const eddy_length_field_prepender_options_t *o);
/** The handler table for length field prependers. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_length_field_prepender_ops(void);
/** A length field prepender as one value (eddy_handler_t). */
EDDY_EXTERN eddy_handler_t eddy_length_field_prepender(unsigned length_field_length);

/* ---------------------------------------------------------------------------------------
 * Delimited and fixed framing (Netty's LineBasedFrameDecoder, DelimiterBasedFrameDecoder,
 * FixedLengthFrameDecoder). "Too long" counts the frame without its delimiter; a too-long
 * frame is discarded up to and with its delimiter and EDDY_ETOOLONGFRAME raised once: as soon
 * as it passes the maximum with fail_fast, else when its delimiter arrives.
 */

/**
 * A decoder splitting lines at "\n" or "\r\n", emitting each line with its delimiter or
 * without (strip_delimiter). Lines longer than max_length are discarded. A partial line left at
 * the end of input is dropped. NULL when max_length is 0 or out of memory.
 */
EDDY_EXTERN eddy_decoder_t *eddy_line_decoder_new(size_t max_length, bool strip_delimiter,
                                                  bool fail_fast);
/** The handler table for line decoders. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_line_decoder_ops(void);
/** A line decoder as one value (eddy_handler_t). */
EDDY_EXTERN eddy_handler_t eddy_line_decoder(size_t max_length, bool strip_delimiter,
                                             bool fail_fast);

/* A delimiter: len bytes at bytes (len > 0). */
typedef struct eddy_delimiter_s {
    const void *bytes;
    size_t len;
} eddy_delimiter_t;

/**
 * A decoder splitting at any of the n delimiters (copied): where several match, the one that
 * makes the shortest frame wins (the first listed on a tie), decided once no delimiter still
 * arriving could win, so the frames do not depend on how the reads split the stream. Frames
 * longer than max_frame_length are discarded. NULL when n or max_frame_length is 0, a
 * delimiter is empty, or out of memory.
 */
EDDY_EXTERN eddy_decoder_t *eddy_delimiter_decoder_new(size_t max_frame_length,
                                                       bool strip_delimiter, bool fail_fast,
                                                       const eddy_delimiter_t *delimiters,
                                                       size_t n);
/** The handler table for delimiter decoders. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_delimiter_decoder_ops(void);
/** A delimiter decoder as one value (eddy_handler_t). */
EDDY_EXTERN eddy_handler_t eddy_delimiter_decoder(size_t max_frame_length, bool strip_delimiter,
                                                  bool fail_fast,
                                                  const eddy_delimiter_t *delimiters, size_t n);

/** A decoder emitting every frame_length bytes as a frame. NULL when frame_length is 0 or
 * out of memory. */
EDDY_EXTERN eddy_decoder_t *eddy_fixed_length_decoder_new(size_t frame_length);
/** The handler table for fixed length decoders. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_fixed_length_decoder_ops(void);
/** A fixed length decoder as one value (eddy_handler_t). */
EDDY_EXTERN eddy_handler_t eddy_fixed_length_decoder(size_t frame_length);

/* ---------------------------------------------------------------------------------------
 * The encoder base (Netty's MessageToByteEncoder)
 */

/* An encoder kind: static, outlives every encoder made with it. */
typedef struct eddy_encoder_ops_s {
    const char *name;
    uint32_t msg_type; /* with accept NULL: encode messages of this type (0: every message) */
    bool (*accept)(void *self, const eddy_msg_t *msg); /* NULL: by msg_type */
    /* Write msg (borrowed; released after the call) into out. 0, or a negative EDDY_E* that
     * fails the write's promise. */
    int (*encode)(eddy_ctx_t *ctx, void *self, eddy_msg_t *msg, eddy_buf_t *out);
    size_t (*size_hint)(void *self, const eddy_msg_t *msg); /* out's first capacity; NULL: 256 */
    void (*destroy)(void *self); /* release what self holds (not self); may be NULL */
} eddy_encoder_ops_t;

/** An encoder state of kind ops with self_size zeroed bytes of its own, for a handler table
 * from EDDY_ENCODER_HANDLER_OPS; freed with eddy_free_state. NULL when ops or ops->encode is
 * NULL, or out of memory. */
EDDY_EXTERN eddy_encoder_t *eddy_encoder_new(const eddy_encoder_ops_t *ops, size_t self_size);
/** The encoder's own state (aligned for any type); what encode receives as self. Borrows. */
EDDY_EXTERN void *eddy_encoder_self(eddy_encoder_t *e);

/** Call the encoder's destroy. */
EDDY_EXTERN void eddy_encoder_handler_removed(eddy_ctx_t *ctx);
/** Encode an accepted msg (taken over) into a buffer from eddy_ctx_alloc(ctx) and write that
 * with p; pass other messages on unchanged. Encode errors and EDDY_ENOMEM fail p, the message
 * released; a NULL state fails p with EDDY_EINVAL. */
EDDY_EXTERN void eddy_encoder_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p);

/* A handler table for an encoder kind, as EDDY_DECODER_HANDLER_OPS is for decoders. */
#define EDDY_ENCODER_HANDLER_OPS(name_)                                                            \
    {                                                                                              \
        .name = (name_), .sharable = false, .handler_removed = eddy_encoder_handler_removed,       \
        .write = eddy_encoder_write,                                                               \
    }

/* ---------------------------------------------------------------------------------------
 * The packet codec base (Netty's DatagramPacketDecoder and DatagramPacketEncoder), for
 * datagram channels (datagram.h): one datagram is one message. Nothing is cumulated across
 * datagrams, so a protocol decoder never sees part of one or two at once; a malformed
 * datagram is dropped and reported (exception_caught), and the channel goes on, since a
 * datagram channel serves many peers and one bad packet says nothing of the next.
 */

typedef struct eddy_packet_codec_s eddy_packet_codec_t;

/* A packet codec kind: static, outlives every codec made with it. */
typedef struct eddy_packet_codec_ops_s {
    const char *name;
    /* One received datagram (borrowed; released after the call) into *out, the message the
     * next handler gets (NULL: nothing goes on). Return 0, or a negative EDDY_E* for a
     * malformed datagram: it is dropped and the error fired to exception_caught. NULL:
     * datagrams pass on untouched. */
    int (*decode)(eddy_ctx_t *ctx, void *self, eddy_datagram_t *in, eddy_msg_t **out);
    /* An outbound message (borrowed; released after the call) into *out, the datagram
     * written in its place with the write's promise. Return 0, or a negative EDDY_E* that
     * fails the promise. NULL: writes pass on untouched. */
    int (*encode)(eddy_ctx_t *ctx, void *self, eddy_msg_t *msg, eddy_datagram_t **out);
    /* Which outbound messages encode takes; NULL: every message but datagrams. */
    bool (*accept)(void *self, const eddy_msg_t *msg);
    void (*destroy)(void *self); /* release what self holds (not self); may be NULL */
} eddy_packet_codec_ops_t;

/** A codec state of kind ops with self_size zeroed bytes of its own, for a handler table from
 * EDDY_PACKET_CODEC_HANDLER_OPS; freed with eddy_free_state. NULL when ops is NULL, has neither
 * decode nor encode, or out of memory. */
EDDY_EXTERN eddy_packet_codec_t *eddy_packet_codec_new(const eddy_packet_codec_ops_t *ops,
                                                       size_t self_size);
/** The codec's own state (aligned for any type); what decode and encode receive. Borrows. */
EDDY_EXTERN void *eddy_packet_codec_self(eddy_packet_codec_t *c);

/** Call the codec's destroy. */
EDDY_EXTERN void eddy_packet_codec_handler_removed(eddy_ctx_t *ctx);
/** Decode a datagram (taken over); other messages pass on. A NULL state drops the datagram
 * and fires EDDY_EINVAL. */
EDDY_EXTERN void eddy_packet_codec_channel_read(eddy_ctx_t *ctx, eddy_msg_t *msg);
/** Encode an accepted message (taken over) and write the datagram with p; others pass on. */
EDDY_EXTERN void eddy_packet_codec_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p);

#define EDDY_PACKET_CODEC_HANDLER_OPS(name_)                                                       \
    {                                                                                              \
        .name = (name_), .sharable = false,                                                        \
        .handler_removed = eddy_packet_codec_handler_removed,                                      \
        .channel_read = eddy_packet_codec_channel_read, .write = eddy_packet_codec_write,          \
    }

#ifdef __cplusplus
}
#endif
#endif /* EDDY_CODEC_H */
