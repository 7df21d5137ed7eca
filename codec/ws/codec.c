/*
 * The WebSocket frame decoder (on the byte-to-message decoder base) and encoder (on the
 * message-to-byte encoder base), RFC 6455 section 5.
 *
 * The decoder checks a frame's header as soon as its first bytes are in, so a bad frame is
 * refused before its payload is buffered: unknown opcodes, RSV bits no extension agreed,
 * fragmented or long control frames, a mask the role forbids or lacks (1002), lengths with
 * the top bit set (1002), payloads over the limit (1009). It answers with a close frame
 * written toward the head (the encoder sits before it), and returns the error, so the base
 * closes the channel once that is flushed. Payloads are unmasked in place, in the bytes the
 * decoder was handed (they are its own: a pipeline hands each read over).
 */
#include "codec/ws/internal.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


/* ---------------------------------------------------------------------------------------
 * Decoder
 */

typedef struct ws_decoder_s {
    bool client;      /* we are the client: frames come unmasked */
    bool rsv1;        /* RSV1 may start a data message (permessage-deflate) */
    size_t max_frame; /* the longest payload */
} ws_decoder_t;

/* Answer a protocol error with a close frame and say the stream is broken. */
static int refuse(eddy_ctx_t *ctx, int code)
{
    eddy_ws_frame_t *f = eddy_ws_close_frame(code, NULL);
    if (f != NULL) {
        eddy_ctx_write_and_flush(ctx, &f->_msg, NULL);
    }
    return code == EDDY_WS_CLOSE_TOO_BIG ? EDDY_ETOOLONGFRAME : EDDY_EDECODE;
}

static bool opcode_known(unsigned op)
{
    return op <= EDDY_WS_BINARY || (op >= EDDY_WS_CLOSE && op <= EDDY_WS_PONG);
}

static int ws_decode(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in, eddy_decoder_out_t *out)
{
    ws_decoder_t *s = self;
    size_t r = eddy_cumulation_readable(in);
    uint8_t h[2];
    if (eddy_cumulation_get_bytes(in, 0, h, 2) != 0) {
        return 0;
    }
    bool fin = (h[0] & 0x80) != 0;
    unsigned rsv = h[0] & 0x70;
    unsigned op = h[0] & 0x0f;
    bool masked = (h[1] & 0x80) != 0;
    unsigned len7 = h[1] & 0x7f;
    bool control = (op & 0x8) != 0;
    unsigned allowed = s->rsv1 && (op == EDDY_WS_TEXT || op == EDDY_WS_BINARY) ? EDDY_WS_RSV1 : 0;
    if (!opcode_known(op) || (rsv & ~allowed) != 0 || (control && (!fin || len7 > 125)) ||
        masked == s->client) {
        return refuse(ctx, EDDY_WS_CLOSE_PROTOCOL_ERROR);
    }
    size_t hl = 2;
    uint64_t len = len7;
    if (len7 == 126) {
        if (eddy_cumulation_get_uint(in, 2, 2, false, &len) != 0) {
            return 0;
        }
        hl += 2;
    } else if (len7 == 127) {
        if (eddy_cumulation_get_uint(in, 2, 8, false, &len) != 0) {
            return 0;
        }
        if (len >> 63) {
            return refuse(ctx, EDDY_WS_CLOSE_PROTOCOL_ERROR); /* section 5.2: top bit 0 */
        }
        hl += 8;
    }
    /* With permessage-deflate, a message of max_frame bytes that does not compress grows a
     * little in deflate (5 bytes a stored block of up to 64 KiB, in zlib): allow for that, or
     * the largest message allowed could not be sent compressed (1 MiB of random bytes
     * deflates to about 1,048,900). The inflated message is held to max_message_size. */
    size_t limit = s->rsv1 && !control ? s->max_frame + (s->max_frame >> 8) + 64 : s->max_frame;
    if (s->max_frame > SIZE_MAX / 2) {
        limit = s->max_frame;
    }
    if (len > limit) {
        return refuse(ctx, EDDY_WS_CLOSE_TOO_BIG);
    }
    uint8_t key[4] = {0};
    if (masked) {
        if (eddy_cumulation_get_bytes(in, hl, key, 4) != 0) {
            return 0;
        }
        hl += 4;
    }
    assert(hl <= 14 && r >= hl); /* the header's bytes were read from what is readable */
    if (r - hl < len) {
        return 0; /* the payload is not all here yet */
    }
    eddy_cumulation_skip(in, hl);
    eddy_buf_t *payload = eddy_cumulation_read_buf(in, (size_t)len);
    if (payload == NULL) {
        return EDDY_ENOMEM;
    }
    if (masked && len > 0) {
        /* The view is ours (see the top); its readable bytes are writable memory. */
        uint8_t *p = (uint8_t *)(uintptr_t)eddy_buf_read_ptr(payload);
        eddy__ws_mask(p, (size_t)len, key, 0);
    }
    eddy_ws_frame_t *f = eddy_ws_frame_new((eddy_ws_opcode_t)op, fin, payload);
    if (f == NULL) {
        return EDDY_ENOMEM;
    }
    f->rsv = (uint8_t)rsv;
    return eddy_decoder_emit(out, &f->_msg);
}

static const eddy_decoder_ops_t ws_decoder_ops = {
    .name = "ws_decoder",
    .decode = ws_decode,
};

static const eddy_handler_ops_t ws_decoder_handler = EDDY_DECODER_HANDLER_OPS("ws_decoder");

eddy_handler_t eddy__ws_frame_decoder(bool client, size_t max_frame, bool rsv1)
{
    eddy_decoder_t *d = eddy_decoder_new(&ws_decoder_ops, sizeof(ws_decoder_t));
    if (d != NULL) {
        ws_decoder_t *s = eddy_decoder_self(d);
        s->client = client;
        s->rsv1 = rsv1;
        s->max_frame = max_frame != 0 ? max_frame : EDDY_WS_MAX_FRAME_SIZE;
    }
    return eddy_handler("ws_decoder", &ws_decoder_handler, d, eddy_free_state);
}

eddy_handler_t eddy_ws_frame_decoder(bool client, const eddy_ws_config_t *config)
{
    return eddy__ws_frame_decoder(client, config != NULL ? config->max_frame_size : 0, false);
}

eddy_handler_t eddy_ws_frame_decoder_ext(bool client, const eddy_ws_config_t *config)
{
    return eddy__ws_frame_decoder(client, config != NULL ? config->max_frame_size : 0, true);
}

/* ---------------------------------------------------------------------------------------
 * Encoder
 */

/* Masking keys drawn at once from the CSPRNG (section 10.3 wants them unpredictable): one
 * eddy__random_bytes call per 64 frames. */
#define KEY_POOL 256

typedef struct ws_encoder_s {
    bool client;     /* we are the client: frames go masked */
    bool close_sent; /* a close frame went out: nothing may follow it (RFC 6455 5.5.1) */
    size_t used; /* bytes of pool handed out */
    uint8_t pool[KEY_POOL];
} ws_encoder_t;

static bool ws_accept(void *self, const eddy_msg_t *msg)
{
    (void)self;
    return msg->type == EDDY_MSG_WS_FRAME;
}

static size_t ws_size_hint(void *self, const eddy_msg_t *msg)
{
    (void)self;
    const eddy_ws_frame_t *f = eddy_ws_frame_of((eddy_msg_t *)(uintptr_t)msg); /* only looks */
    assert(f != NULL); /* ws_accept() let frames alone in */
    return 14 + eddy_buf_readable(f->payload);
}

/* A server frame's payload of at least this many bytes goes out by reference: the header in a
 * buffer of its own, then a retained duplicate of the payload, which the socket gathers (one
 * writev). Below it a copy into the header's buffer costs less than a second outbound entry
 * and iovec, unless the frame is shared (a broadcast): then it goes by reference too, so a
 * broadcast to a channel group copies no payload byte per member. */
#define BY_REFERENCE_MIN 256

/* The frame header of f (payload n bytes, unmasked) into out. */
static void put_header(eddy_buf_t *out, const eddy_ws_frame_t *f, size_t n, uint8_t mask)
{
    assert(eddy_buf_writable(out) >= 14 - (mask != 0 ? 4 : 0)); /* the longest header */
    eddy_buf_write_u8(out, (uint8_t)((f->fin ? 0x80 : 0) | (f->rsv & 0x70) | (f->opcode & 0x0f)));
    if (n < 126) {
        eddy_buf_write_u8(out, (uint8_t)(mask | n));
    } else if (n <= 0xffff) {
        eddy_buf_write_u8(out, (uint8_t)(mask | 126));
        eddy_buf_write_u16(out, (uint16_t)n);
    } else {
        eddy_buf_write_u8(out, (uint8_t)(mask | 127));
        eddy_buf_write_u64(out, (uint64_t)n);
    }
}

static int ws_encode(eddy_ctx_t *ctx, void *self, eddy_msg_t *msg, eddy_buf_t *out)
{
    (void)ctx;
    ws_encoder_t *e = self;
    eddy_ws_frame_t *f = eddy_ws_frame_of(msg);
    assert(f != NULL); /* ws_accept() let frames alone in */
    size_t n = eddy_buf_readable(f->payload);
    bool control = (f->opcode & 0x8) != 0;
    if (control && (n > 125 || !f->fin)) {
        return EDDY_EINVAL; /* section 5.5: a control frame is short and whole */
    }
    int err = eddy_buf_ensure_writable(out, 14 + n);
    if (err != 0) {
        return err;
    }
    put_header(out, f, n, e->client ? 0x80 : 0);
    if (!e->client) {
        eddy_buf_write_bytes(out, eddy_buf_read_ptr(f->payload), n);
        return 0;
    }
    if (e->used == 0 || e->used + 4 > KEY_POOL) {
        if (eddy__random_bytes(e->pool, KEY_POOL) != 0) {
            return EDDY_EIO;
        }
        e->used = 0;
    }
    assert(e->used + 4 <= KEY_POOL);
    const uint8_t *key = e->pool + e->used;
    e->used += 4;
    eddy_buf_write_bytes(out, key, 4);
    uint8_t *p = eddy_buf_write_ptr(out);
    memcpy(p, eddy_buf_read_ptr(f->payload), n);
    eddy__ws_mask(p, n, key, 0);
    eddy_buf_produce(out, n);
    return 0;
}

static const eddy_encoder_ops_t ws_encoder_ops = {
    .name = "ws_encoder",
    .accept = ws_accept,
    .encode = ws_encode,
    .size_hint = ws_size_hint,
};

/* The encoder's write: a server's large data frame by reference, everything else through the
 * encoder base (one buffer). */
static void ws_encoder_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_encoder_t *enc = eddy_ctx_state(ctx);
    ws_encoder_t *e = enc != NULL ? eddy_encoder_self(enc) : NULL;
    eddy_ws_frame_t *f = msg->type == EDDY_MSG_WS_FRAME ? eddy_ws_frame_of(msg) : NULL;
    if (e != NULL && f != NULL) {
        if (e->close_sent) {
            /* After our close frame no frame may go (a broadcast that reached a member after
             * its close began: serverfuzz ws_chat on io_uring): its write fails. */
            eddy_ctx_fail_write(ctx, msg, p, EDDY_ECLOSED);
            return;
        }
        e->close_sent = f->opcode == EDDY_WS_CLOSE;
    }
    size_t n = f != NULL && f->payload != NULL ? eddy_buf_readable(f->payload) : 0;
    /* A frame someone else holds too (a channel group's broadcast) goes by reference at any
     * size: copying it would be a copy per member. A reference count read while other loops
     * release theirs only picks between two correct ways. */
    bool shared = eddy_msg_refcnt(msg) > 1;
    if (e == NULL || e->client || (n < BY_REFERENCE_MIN && !shared) || n == 0 ||
        (f->opcode & 0x8) != 0) {
        eddy_encoder_write(ctx, msg, p);
        return;
    }
    eddy_buf_t *head = eddy_buf_alloc(eddy_ctx_alloc(ctx), 14, 14);
    eddy_buf_t *body = head != NULL ? eddy_buf_retained_duplicate(f->payload) : NULL;
    if (body == NULL) {
        if (head != NULL) {
            eddy_buf_release(head);
        }
        eddy_ctx_fail_write(ctx, msg, p, EDDY_ENOMEM);
        return;
    }
    put_header(head, f, n, 0);
    eddy_msg_release(msg);
    eddy_ctx_write(ctx, eddy_buf_msg(head), NULL);
    eddy_ctx_write(ctx, eddy_buf_msg(body), p); /* p completes once the whole frame is out */
}

static const eddy_handler_ops_t ws_encoder_handler = {
    .name = "ws_encoder",
    .sharable = false,
    .handler_removed = eddy_encoder_handler_removed,
    .write = ws_encoder_write,
};

eddy_handler_t eddy_ws_frame_encoder(bool client)
{
    eddy_encoder_t *e = eddy_encoder_new(&ws_encoder_ops, sizeof(ws_encoder_t));
    if (e != NULL) {
        ws_encoder_t *s = eddy_encoder_self(e);
        s->client = client;
    }
    return eddy_handler("ws_encoder", &ws_encoder_handler, e, eddy_free_state);
}
