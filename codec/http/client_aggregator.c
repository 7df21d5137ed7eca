/*
 * The client's aggregator (Netty's HttpObjectAggregator on the response side): a response
 * head and its content become one full response. A body that announces or reaches more than
 * the limit ends the connection (EDDY_ETOOLONGFRAME, then the close): unlike a server, which
 * can answer 413 and go on, a client cannot skip a response it will not take.
 */
#include "codec/http/internal.h"

#include <stdlib.h>

typedef struct response_aggregator_s {
    size_t max;
    eddy_http_response_t *resp; /* the head being completed, or NULL */
    eddy_buf_t *body;                  /* its body so far, or NULL */
    bool done;                         /* failed: nothing more goes on */
} response_aggregator_t;

static void drop_held(response_aggregator_t *s)
{
    if (s->resp != NULL) {
        eddy_msg_release(&s->resp->_msg);
        s->resp = NULL;
    }
    if (s->body != NULL) {
        eddy_buf_release(s->body);
        s->body = NULL;
    }
}

/* The connection ends with err: what it sends from now on is dropped. */
static void fail(eddy_ctx_t *ctx, response_aggregator_t *s, int err)
{
    s->done = true;
    drop_held(s);
    eddy_ctx_fire_exception(ctx, err);
    eddy_ctx_close(ctx, NULL);
}

static void on_content(eddy_ctx_t *ctx, response_aggregator_t *s, eddy_http_content_t *c)
{
    if (s->resp == NULL) {
        eddy_ctx_fire_channel_read(ctx, &c->_msg); /* no head of ours: not ours either */
        return;
    }
    int err =
        eddy__http_body_append(eddy_ctx_alloc(ctx), &s->body, c, s->resp->content_length, s->max);
    bool last = c->last;
    eddy_msg_release(&c->_msg);
    if (err != 0) {
        fail(ctx, s, err);
        return;
    }
    if (last) {
        eddy_http_response_t *r = s->resp;
        r->body = s->body;
        r->_msg.type = EDDY_MSG_HTTP_FULL_RESPONSE;
        s->resp = NULL;
        s->body = NULL;
        eddy_ctx_fire_channel_read(ctx, &r->_msg);
    }
}

static void response_aggregator_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    response_aggregator_t *s = eddy_ctx_state(ctx);
    if (s->done) {
        eddy_msg_release(msg);
        return;
    }
    if (msg->type == EDDY_MSG_HTTP_RESPONSE_HEAD) {
        eddy_http_response_t *r = eddy_http_response_of(msg);
        drop_held(s);
        if (r->content_length > 0 && (uint64_t)r->content_length > s->max) {
            eddy_msg_release(msg);
            fail(ctx, s, EDDY_ETOOLONGFRAME); /* refused before any of it is kept */
            return;
        }
        s->resp = r;
    } else if (msg->type == EDDY_MSG_HTTP_CONTENT) {
        on_content(ctx, s, eddy_http_content_of(msg));
    } else if (msg->type == EDDY_MSG_HTTP_FULL_RESPONSE &&
               eddy_http_response_of(msg)->body != NULL &&
               eddy_buf_readable(eddy_http_response_of(msg)->body) > s->max) {
        eddy_msg_release(msg); /* whole from the codec already, and still too long */
        fail(ctx, s, EDDY_ETOOLONGFRAME);
    } else {
        eddy_ctx_fire_channel_read(ctx, msg);
    }
}

static void response_aggregator_removed(eddy_ctx_t *ctx)
{
    response_aggregator_t *s = eddy_ctx_state(ctx);
    drop_held(s);
}

static const eddy_handler_ops_t response_aggregator_handler = {
    .name = "http_response_aggregator",
    .handler_removed = response_aggregator_removed,
    .channel_read = response_aggregator_read,
};

eddy_handler_t eddy_http_response_aggregator(size_t max_content_length)
{
    response_aggregator_t *s = calloc(1, sizeof(*s));
    if (s != NULL) {
        s->max = max_content_length != 0 ? max_content_length : EDDY_HTTP_MAX_CONTENT_LENGTH;
    }
    return eddy_handler(NULL, &response_aggregator_handler, s, eddy_free_state);
}
