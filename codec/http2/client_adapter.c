/*
 * The client's adapter between HTTP/1.1's objects and streams: each eddy_http_request_t
 * written opens a stream (its head, then its body, or its content messages for a chunked
 * one); each stream's response comes back aggregated as one full eddy_http_response_t, which
 * completes the future of the eddy_http_send() that wrote the request, as the exchange
 * handler completes it for HTTP/1.1 (exchange.c), or passes on for a request written by
 * hand. Responses are matched by stream, so they may come in any order; what ends one stream
 * (a reset, its timeout, a cancelled future) leaves the others alone.
 */
#include "internal.h"

#include "codec/http/shared.h"
#include "pipeline/layer.h"

#include <eddy/tls.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A request on its way and the response coming back. */
typedef struct pending_s {
    struct pending_s *prev, *next; /* the adapter's, oldest first */
    struct client_adapter_s *a;
    eddy_h2_stream_t *stream;   /* a reference */
    eddy_promise_t *p;          /* the send's future (a reference); NULL: written by hand */
    eddy_http_response_t *resp; /* the head once it came; its body gathers in resp->body */
    eddy_http_method_t method;
    uint64_t timer; /* the response timeout (a stream timer), or 0 */
} pending_t;

typedef struct client_adapter_s {
    size_t max;         /* the largest body */
    int64_t timeout_ms; /* per response; <= 0: none */
    bool https;         /* the pipeline holds a TLS handler: ":scheme" is https */
    int error;          /* the first error the connection met (exception_caught), or 0 */
    eddy_ctx_t *ctx;
    pending_t *first, *last;
    pending_t *chunked; /* the request whose content messages are being written */
} client_adapter_t;

/* The user data of a stream whose pending ended while the stream went on: its later
 * messages are ours to drop, not to pass on. */
static char finished;

static void release_response(void *r)
{
    eddy_msg_release(&((eddy_http_response_t *)r)->_msg);
}

static void pending_free(pending_t *x)
{
    client_adapter_t *a = x->a;
    if (x->prev != NULL) {
        x->prev->next = x->next;
    } else {
        a->first = x->next;
    }
    if (x->next != NULL) {
        x->next->prev = x->prev;
    } else {
        a->last = x->prev;
    }
    if (a->chunked == x) {
        a->chunked = NULL;
    }
    if (x->timer != 0) {
        eddy_h2_stream_cancel(x->stream, x->timer);
    }
    if (x->resp != NULL) {
        eddy_msg_release(&x->resp->_msg);
    }
    eddy_h2_stream_set_user_data(x->stream, &finished);
    eddy_h2_stream_release(x->stream);
    eddy_future_release(x->p);
    free(x);
}

/* The request of x ends with err: its future fails, or, written by hand, the pipeline hears
 * of it. Frees x. */
static void pending_fail(pending_t *x, int err)
{
    eddy_ctx_t *ctx = x->a->ctx;
    bool by_hand = x->p == NULL;
    if (!by_hand) {
        eddy_promise_fail(x->p, err);
    }
    pending_free(x);
    if (by_hand && !eddy_ctx_is_removed(ctx)) {
        eddy_ctx_fire_exception(ctx, err);
    }
}

/* The response of x is whole: to its future, or on down the pipeline. Frees x. */
static void pending_complete(pending_t *x)
{
    eddy_ctx_t *ctx = x->a->ctx;
    eddy_http_response_t *r = x->resp;
    x->resp = NULL;
    r->_msg.type = EDDY_MSG_HTTP_FULL_RESPONSE;
    eddy_promise_t *p = x->p != NULL ? eddy_future_retain(x->p) : NULL;
    pending_free(x);
    if (p != NULL) {
        eddy__promise_succeed_owned(p, r, release_response);
        eddy_future_release(p);
    } else {
        eddy_ctx_fire_channel_read(ctx, &r->_msg);
    }
}

/* pending_fail(), and the stream is reset with code (the response is not wanted). */
static void pending_abort(pending_t *x, int err, uint32_t code)
{
    eddy_h2_stream_t *s = eddy_h2_stream_retain(x->stream);
    pending_fail(x, err);
    eddy_h2_stream_reset(s, code);
    eddy_h2_stream_release(s);
}

static void fail_all(client_adapter_t *a, int err)
{
    while (a->first != NULL) {
        pending_fail(a->first, err);
    }
}

/* ---------------------------------------------------------------------------------------
 * Requests out
 */

/* What a request's head must not carry over HTTP/2: the connection-specific fields, Host
 * (it becomes :authority), and TE but "trailers" (RFC 9113 section 8.2.2). */
static bool left_out(eddy_http_str_t name, eddy_http_str_t value)
{
    return eddy__h2_connection_specific(name.p, name.len) ||
           eddy_http_str_eq_nocase(name, "host") ||
           (eddy_http_str_eq_nocase(name, "te") && !eddy_http_str_eq_nocase(value, "trailers"));
}

static bool expects_content(eddy_http_method_t m)
{
    return m == EDDY_HTTP_POST || m == EDDY_HTTP_PUT || m == EDDY_HTTP_PATCH;
}

static eddy_http_str_t lit(const char *s)
{
    return (eddy_http_str_t){s, strlen(s)};
}

/* Open req's stream with its head (end_stream when nothing follows). NULL and *err. */
static eddy_h2_stream_t *head_open(client_adapter_t *a, const eddy_http_request_t *req, size_t body,
                                   bool end_stream, int *err)
{
    eddy_http_header_t stack[40];
    size_t max = req->header_count + 5;
    eddy_http_header_t *f = max <= 40 ? stack : malloc(max * sizeof(*f));
    if (f == NULL) {
        *err = EDDY_ENOMEM;
        return NULL;
    }
    const eddy_http_header_t *host = eddy_http_request_header(req, "host");
    size_t k = 0;
    f[k++] = (eddy_http_header_t){lit(":method"), req->method_name};
    f[k++] = (eddy_http_header_t){lit(":scheme"), lit(a->https ? "https" : "http")};
    if (host != NULL) {
        f[k++] = (eddy_http_header_t){lit(":authority"), host->value};
    }
    f[k++] = (eddy_http_header_t){lit(":path"), req->target};
    for (size_t i = 0; i < req->header_count; i++) {
        if (!left_out(req->headers[i].name, req->headers[i].value)) {
            f[k++] = req->headers[i];
        }
    }
    char length[24];
    if (!req->chunked && (body > 0 || expects_content(req->method))) {
        f[k++] = (eddy_http_header_t){lit("content-length"),
                                      eddy__h2_decimal(body, length, sizeof(length))};
    }
    eddy_h2_stream_t *s = eddy_h2_stream_open(eddy_ctx_channel(a->ctx), f, k, end_stream, err);
    if (f != stack) {
        free(f);
    }
    return s;
}

static void timed_out(eddy_h2_stream_t *s, void *arg)
{
    (void)s;
    pending_t *x = arg;
    x->timer = 0; /* it ran */
    pending_abort(x, EDDY_ETIMEDOUT, EDDY_H2_CANCEL);
}

/* The send's future completed. Cancelled by its caller: the stream is reset (the response is
 * not wanted), the connection and its other streams go on. Runs on the loop; arg is a
 * reference to the stream. */
static void on_settled(eddy_future_t *f, void *arg)
{
    eddy_h2_stream_t *s = arg;
    if (eddy_future_error(f) == EDDY_ECANCELED && !eddy_h2_stream_is_closed(s)) {
        void *data = eddy_h2_stream_user_data(s);
        if (data != NULL && data != &finished) {
            pending_free(data);
        }
        eddy_h2_stream_reset(s, EDDY_H2_CANCEL);
    }
    eddy_h2_stream_release(s);
}

/* Send req (taken) on a new stream. f: the future of its response (taken; NULL for a
 * request written by hand); wp: the write's promise, done once the request is on its way. */
static void request_send(client_adapter_t *a, eddy_http_request_t *req, eddy_promise_t *f,
                         eddy_promise_t *wp)
{
    size_t body = req->chunked || req->body == NULL ? 0 : eddy_buf_readable(req->body);
    bool end_stream = !req->chunked && body == 0;
    int err = a->chunked != NULL ? EDDY_EBUSY : 0;
    pending_t *x = err == 0 ? calloc(1, sizeof(*x)) : NULL;
    if (err == 0 && x == NULL) {
        err = EDDY_ENOMEM;
    }
    eddy_h2_stream_t *s = err == 0 ? head_open(a, req, body, end_stream, &err) : NULL;
    if (s == NULL) {
        free(x);
        eddy_msg_release(&req->_msg);
        eddy__promise_done(wp, err);
        if (f != NULL) {
            eddy_promise_fail(f, err);
            eddy_future_release(f);
        } else if (wp == NULL) {
            eddy_ctx_fire_exception(a->ctx, err); /* nobody else would hear of it */
        }
        return;
    }
    *x = (pending_t){.prev = a->last, .a = a, .stream = s, .p = f, .method = req->method};
    if (a->last != NULL) {
        a->last->next = x;
    } else {
        a->first = x;
    }
    a->last = x;
    eddy_h2_stream_set_user_data(s, x);
    if (f != NULL && eddy_future_add_listener(f, on_settled, eddy_h2_stream_retain(s)) != 0) {
        eddy_h2_stream_release(s); /* no memory: cancelling then only fails the future */
    }
    if (a->timeout_ms > 0) {
        x->timer = eddy_h2_stream_schedule(s, a->timeout_ms, timed_out, x);
    }
    if (req->chunked) {
        a->chunked = x;
    }
    if (body > 0) {
        eddy_buf_t *b = req->body;
        req->body = NULL;
        err = eddy_h2_stream_send_data(s, b, true, wp); /* completes wp either way */
        wp = NULL;
        if (err != 0) {
            pending_abort(x, err, EDDY_H2_INTERNAL_ERROR);
        }
    }
    eddy_msg_release(&req->_msg);
    eddy__promise_done(wp, 0);
}

/* A content message of the chunked request being written. */
static void content_send(client_adapter_t *a, eddy_http_content_t *c, eddy_promise_t *p)
{
    pending_t *x = a->chunked;
    eddy_buf_t *b = c->data;
    bool last = c->last;
    c->data = NULL;
    eddy_msg_release(&c->_msg);
    if (x == NULL) {
        if (b != NULL) {
            eddy_buf_release(b);
        }
        eddy__promise_done(p, EDDY_ECLOSED);
        return;
    }
    if (last) {
        a->chunked = NULL;
    }
    int err = eddy_h2_stream_send_data(x->stream, b, last, p);
    if (err != 0 && err != EDDY_ECLOSED) {
        pending_abort(x, err, EDDY_H2_INTERNAL_ERROR);
    }
}

static void adapter_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    client_adapter_t *a = eddy_ctx_state(ctx);
    eddy_http_request_t *req;
    eddy_promise_t *f;
    if (eddy__http_send_take(msg, &req, &f)) {
        request_send(a, req, f, p);
    } else if (msg->type == EDDY_MSG_HTTP_CLIENT_REQUEST) {
        request_send(a, eddy_http_request_of(msg), NULL, p);
    } else if (msg->type == EDDY_MSG_HTTP_CONTENT) {
        content_send(a, eddy_http_content_of(msg), p);
    } else if (eddy_buf_of(msg) != NULL) {
        eddy_ctx_fail_write(ctx, msg, p, EDDY_ENOTSUP); /* bytes would break the framing */
    } else {
        eddy_ctx_write(ctx, msg, p);
    }
}

/* ---------------------------------------------------------------------------------------
 * Responses in
 */

/* The response of a head block (not interim), its strings pointing into the block's bytes. */
static eddy_http_response_t *response_build(const pending_t *x, eddy_h2_headers_t *h, int status)
{
    eddy_http_response_t *r = eddy_http_response_of(eddy__http_message_new(true, h->count));
    if (r == NULL) {
        return NULL;
    }
    r->_head = eddy__h2_headers_storage(h);
    r->status = status;
    r->version = 20;
    r->stream_id = eddy_h2_stream_id(h->stream);
    r->keep_alive = true;
    r->reason = lit(eddy_http_reason(status));
    r->request_method = x->method;
    for (size_t i = 0; i < h->count; i++) {
        const eddy_http_header_t *f = &h->fields[i];
        if (f->name.len > 0 && f->name.p[0] == ':') {
            continue;
        }
        if (eddy_http_str_eq(f->name, "content-length") &&
            eddy__http_parse_length(f->value, &r->content_length) != 0) {
            r->content_length = -1; /* nghttp2 resets a stream whose length lies */
        }
        r->headers[r->header_count++] = *f;
    }
    return r;
}

/* The status of a head block: its ":status" as a number, or 0 when it has none fit. */
static int status_of(const eddy_h2_headers_t *h)
{
    const eddy_http_header_t *f = eddy_h2_headers_get(h, ":status");
    if (f == NULL || f->value.len != 3) {
        return 0;
    }
    int v = 0;
    for (size_t i = 0; i < 3; i++) {
        if (f->value.p[i] < '0' || f->value.p[i] > '9') {
            return 0;
        }
        v = v * 10 + (f->value.p[i] - '0');
    }
    return v >= 100 ? v : 0;
}

static void on_headers(pending_t *x, eddy_h2_headers_t *h)
{
    if (h->trailers || x->resp != NULL) { /* trailers are not kept, as HTTP/1.1's aren't */
        if (h->end_stream && x->resp != NULL) {
            pending_complete(x);
        }
        return;
    }
    int status = status_of(h);
    if (status >= 100 && status < 200) {
        return; /* interim: the final head is still to come */
    }
    if (status == 0 || (x->resp = response_build(x, h, status)) == NULL) {
        pending_abort(x, status == 0 ? EDDY_EDECODE : EDDY_ENOMEM,
                      status == 0 ? EDDY_H2_PROTOCOL_ERROR : EDDY_H2_INTERNAL_ERROR);
        return;
    }
    if (h->end_stream) {
        pending_complete(x);
    }
}

static void on_data(pending_t *x, eddy_h2_data_t *d)
{
    client_adapter_t *a = x->a;
    eddy_http_response_t *r = x->resp;
    size_t n = eddy_buf_readable(d->data);
    eddy_h2_stream_consume(d->stream, n); /* bounded by max: the window comes back at once */
    size_t have = r != NULL && r->body != NULL ? eddy_buf_readable(r->body) : 0;
    int err = r == NULL ? EDDY_EDECODE : n > a->max - have ? EDDY_ETOOLONGFRAME : 0;
    if (err == 0 && n > 0) {
        if (r->body == NULL && d->end_stream) {
            r->body = eddy_buf_retain(d->data); /* the whole body in one piece: uncopied */
        } else {
            if (r->body == NULL) {
                size_t first = r->content_length > 0 && (uint64_t)r->content_length <= a->max
                                   ? (size_t)r->content_length
                                   : n;
                r->body = eddy_buf_alloc(eddy_ctx_alloc(a->ctx), first, a->max);
            }
            if (r->body == NULL || eddy_buf_write_buf(r->body, d->data, n) != 0) {
                err = EDDY_ENOMEM;
            }
        }
    }
    if (err != 0) {
        pending_abort(x, err, EDDY_H2_CANCEL);
    } else if (d->end_stream) {
        pending_complete(x);
    }
}

/* What a stream's end means for its request. */
static int reset_error(const client_adapter_t *a, const eddy_h2_reset_t *r)
{
    if (r->error_code == EDDY_H2_REFUSED_STREAM) {
        return EDDY_ECONNABORTED; /* not processed: may go again */
    }
    if (r->by_peer) {
        return EDDY_ECONNRESET;
    }
    if (!eddy_channel_is_active(eddy_ctx_channel(a->ctx))) {
        return a->error != 0 ? a->error : EDDY_ECLOSED; /* the connection ended under it */
    }
    return r->error_code == EDDY_H2_ENHANCE_YOUR_CALM ? EDDY_ETOOLONGFRAME : EDDY_ECONNRESET;
}

static void adapter_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    client_adapter_t *a = eddy_ctx_state(ctx);
    eddy_h2_headers_t *h = eddy_h2_headers_of(msg);
    eddy_h2_data_t *d = h == NULL ? eddy_h2_data_of(msg) : NULL;
    eddy_h2_reset_t *r = h == NULL && d == NULL ? eddy_h2_reset_of(msg) : NULL;
    eddy_h2_stream_t *s = h != NULL   ? h->stream
                          : d != NULL ? d->stream
                          : r != NULL ? r->stream
                                      : NULL;
    void *data = s != NULL ? eddy_h2_stream_user_data(s) : NULL;
    if (data == NULL) {
        eddy_ctx_fire_channel_read(ctx, msg); /* not a stream, or one opened by another */
        return;
    }
    if (data == &finished) {
        if (d != NULL) {
            eddy_h2_stream_consume(s, eddy_buf_readable(d->data));
        }
    } else if (h != NULL) {
        on_headers(data, h);
    } else if (d != NULL) {
        on_data(data, d);
    } else {
        pending_fail(data, reset_error(a, r));
    }
    eddy_msg_release(msg);
}

static void adapter_exception(eddy_ctx_t *ctx, int err)
{
    client_adapter_t *a = eddy_ctx_state(ctx);
    if (a->error == 0) {
        a->error = err;
    }
    eddy_ctx_fire_exception(ctx, err);
}

static void adapter_inactive(eddy_ctx_t *ctx)
{
    client_adapter_t *a = eddy_ctx_state(ctx);
    fail_all(a, a->error != 0 ? a->error : EDDY_ECLOSED);
    eddy_ctx_fire_channel_inactive(ctx);
}

static void adapter_added(eddy_ctx_t *ctx)
{
    client_adapter_t *a = eddy_ctx_state(ctx);
    a->ctx = ctx;
    a->https = eddy_pipeline_context_ops(eddy_ctx_pipeline(ctx), eddy_tls_handler_ops()) != NULL;
}

static void adapter_removed(eddy_ctx_t *ctx)
{
    client_adapter_t *a = eddy_ctx_state(ctx);
    while (a->first != NULL) {
        pending_t *x = a->first;
        if (x->p != NULL) {
            eddy_promise_fail(x->p, a->error != 0 ? a->error : EDDY_ECLOSED);
        }
        pending_free(x);
    }
}

static const eddy_handler_ops_t client_adapter_ops = {
    .name = "h2-http-client",
    .handler_added = adapter_added,
    .handler_removed = adapter_removed,
    .channel_read = adapter_read,
    .exception_caught = adapter_exception,
    .channel_inactive = adapter_inactive,
    .write = adapter_write,
};

eddy_handler_t eddy_h2_http_client_adapter(size_t max_content_length, int64_t response_timeout_ms)
{
    client_adapter_t *a = calloc(1, sizeof(*a));
    if (a != NULL) {
        a->max = max_content_length != 0 ? max_content_length : EDDY_HTTP_MAX_CONTENT_LENGTH;
        a->timeout_ms = response_timeout_ms;
    }
    return eddy_handler("h2-http-client", &client_adapter_ops, a, eddy_free_state);
}
