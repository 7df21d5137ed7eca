/*
 * The packet codec base (include/eddy/codec.h; Netty's DatagramPacketDecoder and
 * DatagramPacketEncoder): one datagram in, one message out, and back.
 */
#include "pipeline/layer.h"

#include <eddy/codec.h>
#include <eddy/datagram.h>

#include <stdlib.h>

struct eddy_packet_codec_s {
    const eddy_packet_codec_ops_t *ops;
    max_align_t self[]; /* the codec's own state */
};

eddy_packet_codec_t *eddy_packet_codec_new(const eddy_packet_codec_ops_t *ops, size_t self_size)
{
    if (ops == NULL || (ops->decode == NULL && ops->encode == NULL) ||
        self_size > SIZE_MAX - offsetof(eddy_packet_codec_t, self)) {
        return NULL;
    }
    eddy_packet_codec_t *c = calloc(1, offsetof(eddy_packet_codec_t, self) + self_size);
    if (c != NULL) {
        c->ops = ops;
    }
    return c;
}

void *eddy_packet_codec_self(eddy_packet_codec_t *c)
{
    return c->self;
}

void eddy_packet_codec_handler_removed(eddy_ctx_t *ctx)
{
    eddy_packet_codec_t *c = eddy_ctx_state(ctx);
    if (c != NULL && c->ops->destroy != NULL) {
        c->ops->destroy(c->self);
    }
}

void eddy_packet_codec_channel_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_packet_codec_t *c = eddy_ctx_state(ctx);
    eddy_datagram_t *d = eddy_datagram_of(msg);
    if (d == NULL || (c != NULL && c->ops->decode == NULL)) {
        eddy_ctx_fire_channel_read(ctx, msg);
        return;
    }
    eddy_msg_t *out = NULL;
    int err = c != NULL ? c->ops->decode(ctx, c->self, d, &out) : EDDY_EINVAL;
    eddy_datagram_release(d);
    if (err < 0) {
        /* One bad datagram: dropped and reported; the next is decoded as usual. */
        if (out != NULL) {
            eddy_msg_release(out);
        }
        eddy_ctx_fire_exception(ctx, err);
        return;
    }
    if (out != NULL) {
        eddy_ctx_fire_channel_read(ctx, out);
    }
}

static bool accepts(const eddy_packet_codec_t *c, const eddy_msg_t *msg)
{
    if (c->ops->encode == NULL) {
        return false;
    }
    return c->ops->accept != NULL ? c->ops->accept((void *)(uintptr_t)c->self, msg)
                                  : msg->type != EDDY_MSG_DATAGRAM;
}

void eddy_packet_codec_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_packet_codec_t *c = eddy_ctx_state(ctx);
    if (c == NULL) {
        eddy_ctx_fail_write(ctx, msg, p, EDDY_EINVAL);
        return;
    }
    if (!accepts(c, msg)) {
        eddy_ctx_write(ctx, msg, p);
        return;
    }
    eddy_datagram_t *out = NULL;
    int err = c->ops->encode(ctx, c->self, msg, &out);
    if (err < 0 || out == NULL) {
        if (out != NULL) {
            eddy_datagram_release(out);
        }
        eddy_ctx_fail_write(ctx, msg, p, err < 0 ? err : EDDY_EINVAL); /* a packet drops */
        return;
    }
    eddy_msg_release(msg);
    eddy_ctx_write(ctx, eddy_datagram_msg(out), p);
}
