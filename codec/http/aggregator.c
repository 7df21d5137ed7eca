/*
 * The HTTP aggregators (Netty's HttpObjectAggregator): a head and its content pieces become
 * one full message, a request on a server, a response on a client. They hold the same state
 * and join bodies the same way; they differ in what a body past the limit does.
 *
 * The server's: the body never grows past the limit: a request announcing more is rejected
 * (413) before any of its body is kept, one whose chunks add up to more is rejected when they
 * do. A rejected request is the last message of the connection (http.h), as one the decoder
 * rejects is: everything after it is dropped as it arrives.
 *
 * The client's: a body that announces or reaches more than the limit ends the connection
 * (EDDY_ETOOLONGFRAME, then the close): unlike a server, which can answer 413 and go on, a
 * client cannot skip a response it will not take.
 */
#include "codec/http/internal.h"

#include <assert.h>
#include <stdlib.h>

typedef struct aggregator_s {
    size_t max;
    eddy_msg_t *head; /* the head being completed (a request or a response), or NULL */
    eddy_buf_t *body; /* its body so far, or NULL */
    bool done;        /* a request was rejected, a response failed: nothing more goes on */
} aggregator_t;

static void drop_held(aggregator_t *s)
{
    if (s->head != NULL) {
        eddy_msg_release(s->head);
        s->head = NULL;
    }
    if (s->body != NULL) {
        eddy_buf_release(s->body);
        s->body = NULL;
    }
}

static void aggregator_removed(eddy_ctx_t *ctx)
{
    aggregator_t *s = eddy_ctx_state(ctx);
    if (s != NULL) {
        drop_held(s);
    }
}

static aggregator_t *aggregator_new(size_t max_content_length)
{
    aggregator_t *s = calloc(1, sizeof(*s));
    if (s != NULL) {
        s->max = max_content_length != 0 ? max_content_length : EDDY_HTTP_MAX_CONTENT_LENGTH;
    }
    return s;
}

/* The Content-Length the held head announced, -1 when none. */
static int64_t announced(const aggregator_t *s)
{
    eddy_http_request_t *req = eddy_http_request_of(s->head);
    return req != NULL ? req->content_length : eddy_http_response_of(s->head)->content_length;
}

/* Add the bytes of c (taken over) to the held body; *last whether c ended it. 0,
 * EDDY_ETOOLONGFRAME (past the limit), EDDY_ENOMEM. */
static int add_content(eddy_ctx_t *ctx, aggregator_t *s, eddy_http_content_t *c, bool *last)
{
    assert(s->head != NULL);
    int err = eddy__http_body_append(eddy_ctx_alloc(ctx), &s->body, c, announced(s), s->max);
    *last = c->last;
    eddy_msg_release(&c->_msg);
    return err;
}

/* The held head with the body held, as a full message for the caller to pass on. */
static eddy_msg_t *take_full(aggregator_t *s)
{
    eddy_msg_t *m = s->head;
    eddy_http_request_t *req = eddy_http_request_of(m);
    eddy_http_response_t *r = req == NULL ? eddy_http_response_of(m) : NULL;
    assert(req != NULL || r != NULL);
    *(req != NULL ? &req->body : &r->body) = s->body;
    m->type = req != NULL ? EDDY_MSG_HTTP_FULL_REQUEST : EDDY_MSG_HTTP_FULL_RESPONSE;
    s->head = NULL;
    s->body = NULL;
    return m;
}

/* ---------------------------------------------------------------------------------------
 * Requests
 */

/* Pass req on as a rejected request: status, close after the answer; the last message. */
static void reject(eddy_ctx_t *ctx, aggregator_t *s, eddy_http_request_t *req, int status)
{
    assert(!s->done && s->head == NULL); /* one rejection, and nothing held past it */
    s->done = true;
    req->error = status;
    req->keep_alive = false;
    req->_msg.type = EDDY_MSG_HTTP_FULL_REQUEST;
    eddy_ctx_fire_channel_read(ctx, &req->_msg);
}

static void on_head(eddy_ctx_t *ctx, aggregator_t *s, eddy_http_request_t *req)
{
    drop_held(s);
    if (req->content_length > 0 && (uint64_t)req->content_length > s->max) {
        reject(ctx, s, req, 413);
        return;
    }
    /* Held before the 100 Continue goes out: a flush that fails closes the channel, and
     * removing this handler then releases what it holds. */
    s->head = &req->_msg;
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

static void on_content(eddy_ctx_t *ctx, aggregator_t *s, eddy_http_content_t *c)
{
    if (s->head == NULL) {
        eddy_msg_release(&c->_msg); /* content of a head already dropped (out of memory) */
        return;
    }
    bool last;
    int err = add_content(ctx, s, c, &last);
    if (err == EDDY_ETOOLONGFRAME) {
        eddy_http_request_t *req = eddy_http_request_of(s->head);
        s->head = NULL;
        drop_held(s);
        reject(ctx, s, req, 413);
        return;
    }
    if (err != 0) {
        drop_held(s); /* the rest of this request's content is dropped as it comes */
        eddy_ctx_fire_exception(ctx, EDDY_ENOMEM);
        return;
    }
    if (last) {
        eddy_msg_t *m = take_full(s);
        s->done = !eddy_http_request_of(m)->keep_alive; /* the last one served (RFC 9112 9.6) */
        eddy_ctx_fire_channel_read(ctx, m);
    }
}

static void aggregator_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    aggregator_t *s = eddy_ctx_state(ctx);
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

static const eddy_handler_ops_t http_aggregator_handler = {
    .name = "http_aggregator",
    .handler_removed = aggregator_removed,
    .channel_read = aggregator_read,
};

void *eddy_http_aggregator_new(size_t max_content_length)
{
    return aggregator_new(max_content_length);
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

/* ---------------------------------------------------------------------------------------
 * Responses
 */

/* The connection ends with err: what it sends from now on is dropped. */
static void fail(eddy_ctx_t *ctx, aggregator_t *s, int err)
{
    s->done = true;
    drop_held(s);
    eddy_ctx_fire_exception(ctx, err);
    eddy_ctx_close(ctx, NULL);
}

static void on_response_content(eddy_ctx_t *ctx, aggregator_t *s, eddy_http_content_t *c)
{
    if (s->head == NULL) {
        eddy_ctx_fire_channel_read(ctx, &c->_msg); /* no head of ours: not ours either */
        return;
    }
    bool last;
    int err = add_content(ctx, s, c, &last);
    if (err != 0) {
        fail(ctx, s, err);
    } else if (last) {
        eddy_ctx_fire_channel_read(ctx, take_full(s));
    }
}

static void response_aggregator_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    aggregator_t *s = eddy_ctx_state(ctx);
    if (s->done) {
        eddy_msg_release(msg);
        return;
    }
    eddy_http_response_t *r =
        msg->type != EDDY_MSG_HTTP_RESPONSE ? eddy_http_response_of(msg) : NULL;
    if (msg->type == EDDY_MSG_HTTP_RESPONSE_HEAD) {
        drop_held(s);
        if (r->content_length > 0 && (uint64_t)r->content_length > s->max) {
            eddy_msg_release(msg);
            fail(ctx, s, EDDY_ETOOLONGFRAME); /* refused before any of it is kept */
            return;
        }
        s->head = msg;
    } else if (msg->type == EDDY_MSG_HTTP_CONTENT) {
        on_response_content(ctx, s, eddy_http_content_of(msg));
    } else if (r != NULL && r->body != NULL && eddy_buf_readable(r->body) > s->max) {
        eddy_msg_release(msg); /* whole from the codec already, and still too long */
        fail(ctx, s, EDDY_ETOOLONGFRAME);
    } else {
        eddy_ctx_fire_channel_read(ctx, msg);
    }
}

static const eddy_handler_ops_t response_aggregator_handler = {
    .name = "http_response_aggregator",
    .handler_removed = aggregator_removed,
    .channel_read = response_aggregator_read,
};

eddy_handler_t eddy_http_response_aggregator(size_t max_content_length)
{
    return eddy_handler(NULL, &response_aggregator_handler, aggregator_new(max_content_length),
                        eddy_free_state);
}
