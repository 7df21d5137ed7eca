/*
 * The message deadline handler (include/eddy/codec.h): a whole message must be decoded within
 * a time of its first byte, for any protocol whose decoder is on the decoder base. The
 * decoders say since when a message is under way (eddy_decoder_message_since); one timer,
 * armed when one is and not already armed, re-checks when it fires (the message may have
 * ended, and another begun, meanwhile), so a message costs a look, not a timer.
 */
#include "pipeline/layer.h"

#include <eddy/codec.h>

#include <stdlib.h>

typedef struct deadline_s {
    eddy_ctx_t *ctx;
    int64_t timeout_ns;
    uint64_t timer; /* the pending scoped timer's id, or 0 */
    bool closed;    /* timed out */
} deadline_t;

void *eddy_message_deadline_handler_new(int64_t timeout_ms)
{
    deadline_t *s = calloc(1, sizeof(*s));
    if (s != NULL) {
        s->timeout_ns = eddy__timeout_ns(timeout_ms);
    }
    return s;
}

static void oldest_since(void *state, void *arg)
{
    int64_t *oldest = arg;
    int64_t since = eddy_decoder_message_since(state);
    if (since != 0 && (*oldest == 0 || since < *oldest)) {
        *oldest = since;
    }
}

/* The oldest message under way in any decoder of the pipeline, or 0. */
static int64_t message_since(eddy_pipeline_t *p)
{
    int64_t oldest = 0;
    eddy__pipeline_each_state(p, eddy_decoder_channel_read, oldest_since, &oldest);
    return oldest;
}

static void deadline_fired(eddy_ctx_t *ctx, void *arg);

static void deadline_check(deadline_t *s)
{
    if (s->timer != 0 || s->closed || s->timeout_ns <= 0) {
        return;
    }
    int64_t since = message_since(eddy_ctx_pipeline(s->ctx));
    if (since == 0) {
        return;
    }
    int64_t left = since + s->timeout_ns - eddy_loop_now_ns(eddy_ctx_loop(s->ctx));
    if (left <= 0) {
        eddy__ctx_timed_out(s->ctx, &s->closed); /* s may be freed when this returns */
        return;
    }
    s->timer = eddy_ctx_schedule_ns(s->ctx, left, deadline_fired, s);
}

static void deadline_fired(eddy_ctx_t *ctx, void *arg)
{
    (void)ctx;
    deadline_t *s = arg;
    s->timer = 0;
    deadline_check(s);
}

static void deadline_added(eddy_ctx_t *ctx)
{
    deadline_t *s = eddy_ctx_state(ctx);
    s->ctx = ctx;
}

static void deadline_read_complete(eddy_ctx_t *ctx)
{
    deadline_check(eddy_ctx_state(ctx));
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_fire_channel_read_complete(ctx);
    }
}

static const eddy_handler_ops_t deadline_ops = {
    .name = "message_deadline",
    .handler_added = deadline_added,
    .channel_read_complete = deadline_read_complete,
};

const eddy_handler_ops_t *eddy_message_deadline_handler_ops(void)
{
    return &deadline_ops;
}

eddy_handler_t eddy_message_deadline_handler(int64_t timeout_ms)
{
    return eddy_handler(NULL, eddy_message_deadline_handler_ops(),
                        eddy_message_deadline_handler_new(timeout_ms), eddy_free_state);
}
