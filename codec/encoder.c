/*
 * The message-to-byte encoder base (Netty's MessageToByteEncoder): an accepted message is
 * encoded into a fresh buffer that goes on with the write's promise; others pass unchanged.
 */
#include "pipeline/layer.h"

#include <eddy/codec.h>

#include <stdlib.h>

/* out's first capacity without a size hint: Netty's ioBuffer() default. */
#define ENCODER_DEFAULT_SIZE 256

struct eddy_encoder_s {
    const eddy_encoder_ops_t *ops;
    max_align_t self[]; /* the encoder's own state */
};

static bool accepts(eddy_encoder_t *e, const eddy_msg_t *msg)
{
    if (e->ops->accept != NULL) {
        return e->ops->accept(e->self, msg);
    }
    return e->ops->msg_type == 0 || msg->type == e->ops->msg_type;
}

void eddy_encoder_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_encoder_t *e = eddy_ctx_state(ctx);
    if (e == NULL) {
        eddy_ctx_fail_write(ctx, msg, p, EDDY_EINVAL);
        return;
    }
    if (!accepts(e, msg)) {
        eddy_ctx_write(ctx, msg, p);
        return;
    }
    size_t size =
        e->ops->size_hint != NULL ? e->ops->size_hint(e->self, msg) : ENCODER_DEFAULT_SIZE;
    if (size > EDDY_BUF_DEFAULT_MAX_CAPACITY) {
        size = EDDY_BUF_DEFAULT_MAX_CAPACITY; /* a hint, not a promise: out grows if need be */
    }
    eddy_buf_t *out = eddy_buf_alloc(eddy_ctx_alloc(ctx), size, EDDY_BUF_DEFAULT_MAX_CAPACITY);
    int err = out != NULL ? e->ops->encode(ctx, e->self, msg, out) : EDDY_ENOMEM;
    if (err < 0) {
        if (out != NULL) {
            eddy_buf_release(out);
        }
        eddy_ctx_fail_write(ctx, msg, p, err); /* with no promise: raised, the stream closes */
        return;
    }
    eddy_msg_release(msg);
    /* Even an empty buffer goes on, so that p completes in order with the other writes. */
    eddy_ctx_write(ctx, eddy_buf_msg(out), p);
}

void eddy_encoder_handler_removed(eddy_ctx_t *ctx)
{
    eddy_encoder_t *e = eddy_ctx_state(ctx);
    if (e != NULL && e->ops->destroy != NULL) {
        e->ops->destroy(e->self);
    }
}

eddy_encoder_t *eddy_encoder_new(const eddy_encoder_ops_t *ops, size_t self_size)
{
    if (ops == NULL || ops->encode == NULL ||
        self_size > SIZE_MAX - offsetof(eddy_encoder_t, self)) {
        return NULL;
    }
    eddy_encoder_t *e = calloc(1, offsetof(eddy_encoder_t, self) + self_size);
    if (e != NULL) {
        e->ops = ops;
    }
    return e;
}

void *eddy_encoder_self(eddy_encoder_t *e)
{
    return e->self;
}
