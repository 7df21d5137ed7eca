/*
 * The HTTP aggregator (Netty's HttpObjectAggregator): a request head and its content pieces
 * become one full request. The body never grows past the limit: a request announcing more
 * is rejected (413) before any of its body is kept, one whose chunks add up to more is
 * rejected when they do. A rejected request is the last message of the connection (http.h),
 * as one the decoder rejects is: everything after it is dropped as it arrives.
 */
#include "codec/http/internal.h"

#include <stdlib.h>

typedef struct http_aggregator_s {
    size_t max;
    eddy_http_request_t *req; /* the head being completed, or NULL */
    eddy_buf_t *body;         /* its body so far, or NULL */
    bool done;                /* a request was rejected: nothing more goes on */
} http_aggregator_t;

static void drop_held(http_aggregator_t *s)
{
    if (s->req != NULL) {
        eddy_msg_release(&s->req->_msg);
        s->req = NULL;
    }
    if (s->body != NULL) {
        eddy_buf_release(s->body);
        s->body = NULL;
    }
}

/* Pass req on as a rejected request: status, close after the answer; the last message. */
static void reject(eddy_ctx_t *ctx, http_aggregator_t *s, eddy_http_request_t *req, int status)
{
    s->done = true;
    req->error = status;
    req->keep_alive = false;
    req->_msg.type = EDDY_MSG_HTTP_FULL_REQUEST;
    eddy_ctx_fire_channel_read(ctx, &req->_msg);
}

static void on_head(eddy_ctx_t *ctx, http_aggregator_t *s, eddy_http_request_t *req)
{
    drop_held(s);
    if (req->content_length > 0 && (uint64_t)req->content_length > s->max) {
        reject(ctx, s, req, 413);
        return;
    }
    /* Held before the 100 Continue goes out: a flush that fails closes the channel, and
     * removing this handler then releases what it holds. */
    s->req = req;
    if (req->expect_continue) {
        /* The client waits for this before it sends the body (RFC 9110 section 10.1.1). */
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        eddy_buf_t *b = eddy_buf_from(cont, sizeof(cont) - 1);
        if (b != NULL) {
            eddy_ctx_write_and_flush(ctx, eddy_buf_msg(b), NULL);
        }
    }
}

int eddy__http_body_append(eddy_allocator_t *a, eddy_buf_t **body, eddy_http_content_t *c,
                           int64_t announced, size_t max)
{
    size_t n = c->data != NULL ? eddy_buf_readable(c->data) : 0;
    size_t have = *body != NULL ? eddy_buf_readable(*body) : 0;
    if (n > max - have) {
        return EDDY_ETOOLONGFRAME;
    }
    if (*body == NULL && c->last && n > 0) {
        *body = c->data; /* the whole body in one piece: kept as it is, uncopied */
        c->data = NULL;
    } else if (n > 0) {
        if (*body == NULL) {
            size_t first = announced > 0 && (uint64_t)announced <= max ? (size_t)announced : n;
            *body = eddy_buf_alloc(a, first, max);
        }
        if (*body == NULL || eddy_buf_write_buf(*body, c->data, n) != 0) {
            return EDDY_ENOMEM;
        }
    }
    return 0;
}

static void on_content(eddy_ctx_t *ctx, http_aggregator_t *s, eddy_http_content_t *c)
{
    if (s->req == NULL) {
        eddy_msg_release(&c->_msg); /* content of a head already dropped (out of memory) */
        return;
    }
    int err =
        eddy__http_body_append(eddy_ctx_alloc(ctx), &s->body, c, s->req->content_length, s->max);
    if (err == EDDY_ETOOLONGFRAME) {
        eddy_http_request_t *req = s->req;
        s->req = NULL;
        drop_held(s);
        eddy_msg_release(&c->_msg);
        reject(ctx, s, req, 413);
        return;
    }
    if (err != 0) {
        eddy_msg_release(&c->_msg);
        drop_held(s); /* the rest of this request's content is dropped as it comes */
        eddy_ctx_fire_exception(ctx, EDDY_ENOMEM);
        return;
    }
    bool last = c->last;
    eddy_msg_release(&c->_msg);
    if (last) {
        eddy_http_request_t *req = s->req;
        req->body = s->body;
        req->_msg.type = EDDY_MSG_HTTP_FULL_REQUEST;
        s->req = NULL;
        s->body = NULL;
        s->done = !req->keep_alive; /* the last one served (RFC 9112 section 9.6) */
        eddy_ctx_fire_channel_read(ctx, &req->_msg);
    }
}

static void aggregator_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    http_aggregator_t *s = eddy_ctx_state(ctx);
    if (s == NULL) {
        /* A constructor that failed: as the decoder base does, drop and say so. */
        eddy_msg_release(msg);
        eddy_ctx_fire_exception(ctx, EDDY_EINVAL);
        return;
    }
    if (s->done) {
        eddy_msg_release(msg); /* after a rejected request: nothing is served */
        return;
    }
    if (msg->type == EDDY_MSG_HTTP_REQUEST) {
        on_head(ctx, s, eddy_http_request_of(msg));
    } else if (msg->type == EDDY_MSG_HTTP_CONTENT) {
        on_content(ctx, s, eddy_http_content_of(msg));
    } else {
        if (msg->type == EDDY_MSG_HTTP_FULL_REQUEST) {
            /* Complete already, or the decoder's rejection in the middle of the held
             * request's body. */
            drop_held(s);
            eddy_http_request_t *req = eddy_http_request_of(msg);
            s->done = req->error != 0 || !req->keep_alive;
        }
        eddy_ctx_fire_channel_read(ctx, msg);
    }
}

static void aggregator_removed(eddy_ctx_t *ctx)
{
    http_aggregator_t *s = eddy_ctx_state(ctx);
    if (s != NULL) {
        drop_held(s);
    }
}

static const eddy_handler_ops_t http_aggregator_handler = {
    .name = "http_aggregator",
    .handler_removed = aggregator_removed,
    .channel_read = aggregator_read,
};

void *eddy_http_aggregator_new(size_t max_content_length)
{
    http_aggregator_t *s = calloc(1, sizeof(*s));
    if (s != NULL) {
        s->max = max_content_length != 0 ? max_content_length : EDDY_HTTP_MAX_CONTENT_LENGTH;
    }
    return s;
}

const eddy_handler_ops_t *eddy_http_aggregator_ops(void)
{
    return &http_aggregator_handler;
}

eddy_handler_t eddy_http_aggregator(size_t max_content_length)
{
    return eddy_handler(NULL, eddy_http_aggregator_ops(),
                        eddy_http_aggregator_new(max_content_length), eddy_free_state);
}
