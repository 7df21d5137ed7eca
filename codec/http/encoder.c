/*
 * The HTTP/1.1 response encoder (Netty's HttpResponseEncoder), on the message-to-byte encoder
 * base: a response becomes its head and body; content after a chunked response becomes
 * chunks (for a 1.0 client, the bytes as they are), after any other response raw bytes. A
 * response that does not keep the connection alive closes it once its last byte is written.
 */
#include "codec/http/internal.h"

#include "pipeline/layer.h"

#include <assert.h>
#include <stdlib.h>

typedef struct http_encoder_s {
    eddy__pump_t pump; /* a streamed body (a chunked input part) and what is written after it */
    bool framed;       /* the input being pumped goes as chunks; else as it is (1.0) */
    bool input_closes; /* ... and the connection ends after it */
    bool streaming; /* the response being written is followed by its content messages */
    bool chunked;   /* ... written as chunks; else as they are, the close ending them */
    bool empty;     /* ... but it has no body (HEAD, 1xx, 204, 304): its content is dropped */
    bool closes;    /* ... and it ends the connection */
    bool close_now; /* a response that ends the connection was just encoded, whole */
} http_encoder_t;

static bool http_accept(void *self, const eddy_msg_t *msg)
{
    (void)self;
    return msg->type == EDDY_MSG_HTTP_RESPONSE || msg->type == EDDY_MSG_HTTP_CONTENT;
}

static size_t http_size_hint(void *self, const eddy_msg_t *msg)
{
    (void)self;
    eddy_msg_t *m = (eddy_msg_t *)(uintptr_t)msg; /* the _of accessors only look */
    eddy_http_response_t *r = eddy_http_response_of(m);
    if (r != NULL) {
        return 128 + (r->_head != NULL ? eddy_buf_readable(r->_head) : 0) +
               (r->body != NULL ? eddy_buf_readable(r->body) : 0);
    }
    eddy_http_content_t *c = eddy_http_content_of(m);
    assert(c != NULL); /* http_accept() let responses and content alone in */
    return 32 + (c->data != NULL ? eddy_buf_readable(c->data) : 0);
}

/* n bytes at p as a chunk onto out, and the zero chunk after them when last. */
static int encode_chunk(const uint8_t *p, size_t n, bool last, eddy_buf_t *out)
{
    int err = eddy_buf_ensure_writable(out, n + 32);
    if (err != 0) {
        return err;
    }
    if (n > 0) {
        static const char hex[] = "0123456789abcdef";
        char num[20];
        size_t i = sizeof(num);
        for (size_t v = n; v != 0; v >>= 4) {
            assert(i > 0); /* 16 hex digits hold any size_t */
            num[--i] = hex[v & 15];
        }
        eddy_buf_write_bytes(out, num + i, sizeof(num) - i);
        eddy_buf_write_bytes(out, "\r\n", 2);
        eddy_buf_write_bytes(out, p, n);
        eddy_buf_write_bytes(out, "\r\n", 2);
    }
    if (last) {
        eddy_buf_write_bytes(out, "0\r\n\r\n", 5);
    }
    return 0;
}

static int http_encode(eddy_ctx_t *ctx, void *self, eddy_msg_t *msg, eddy_buf_t *out)
{
    (void)ctx;
    http_encoder_t *e = self;
    eddy_http_response_t *r = eddy_http_response_of(msg);
    if (r != NULL) {
        e->streaming = r->chunked;
        e->chunked = r->chunked && r->version != 10;
        e->framed = r->_streamed && r->version != 10;
        e->empty =
            r->chunked && (r->head_only || r->status < 200 || r->status == 204 || r->status == 304);
        e->closes = !eddy_http_response_keeps_alive(r);
        e->input_closes = e->closes && r->_streamed;
        e->close_now = e->closes && !eddy__http_response_streamed(r);
        return eddy_http_response_encode(r, out);
    }
    eddy_http_content_t *c = eddy_http_content_of(msg);
    assert(c != NULL); /* http_accept() let responses and content alone in */
    bool empty = e->streaming && e->empty;
    bool chunked = e->streaming && e->chunked;
    if (e->streaming && c->last) {
        e->streaming = false;
        e->close_now = e->closes;
    }
    if (empty) {
        return 0;
    }
    if (chunked) {
        size_t n = c->data != NULL ? eddy_buf_readable(c->data) : 0;
        return encode_chunk(n > 0 ? eddy_buf_read_ptr(c->data) : NULL, n, c->last, out);
    }
    if (c->data != NULL) {
        return eddy_buf_write_bytes(out, eddy_buf_read_ptr(c->data), eddy_buf_readable(c->data));
    }
    return 0;
}

/* The base's write, then the close a response promised with "Connection: close" (RFC 9112
 * section 9.6): the channel's close after flush, which sends what was written, then FIN, and
 * drops what the client still sends for a while (a lingering close). */
/* The body parts of a response (eddy_http_response_add_body()), which go on after its head as
 * they are: file regions reach the transport whole. p goes with the last one. */
static void write_parts(eddy_ctx_t *ctx, eddy_msg_t **parts, size_t n, eddy_promise_t *p)
{
    for (size_t i = 0; i < n; i++) {
        eddy_ctx_write(ctx, parts[i], i + 1 == n ? p : NULL);
    }
    free(parts);
}

/* Whether the parts of r are written: not for HEAD, nor for a status without a body. */
static bool sends_parts(const eddy_http_response_t *r)
{
    return !r->head_only && r->status >= 200 && r->status != 204 && r->status != 304;
}

/* The write of msg now, nothing queued before it. */
static void write_now(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_encoder_t *enc = eddy_ctx_state(ctx);
    eddy_http_response_t *r = eddy_http_response_of(msg);
    size_t n = 0;
    eddy_msg_t **parts = r != NULL && r->_nparts > 0 && sends_parts(r)
                             ? eddy__http_response_take_parts(r, &n)
                             : NULL;
    eddy_encoder_write(ctx, msg, n > 0 ? NULL : p);
    if (n > 0) {
        write_parts(ctx, parts, n, p);
    }
    http_encoder_t *e = eddy_encoder_self(enc);
    if (e->close_now) {
        e->close_now = false;
        eddy_ctx_close_after_flush(ctx, NULL);
    }
}

/* A chunk b (taken over) of a streamed body: framed as one (1.1), or as it is (1.0); the
 * zero chunk and p with the last, and then the close a 1.0 response needs. */
static void emit_chunk(eddy_ctx_t *ctx, eddy_buf_t *b, bool last, eddy_promise_t *p)
{
    http_encoder_t *e = eddy_encoder_self(eddy_ctx_state(ctx));
    eddy_buf_t *out = b;
    if (e->framed) {
        size_t n = eddy_buf_readable(b);
        out = eddy_buf_alloc(eddy_ctx_alloc(ctx), n + 32, EDDY_BUF_DEFAULT_MAX_CAPACITY);
        int err = out != NULL ? encode_chunk(eddy_buf_read_ptr(b), n, last, out) : EDDY_ENOMEM;
        eddy_buf_release(b);
        if (err != 0) {
            if (out != NULL) {
                eddy_buf_release(out);
            }
            eddy__promise_done(p, err);
            eddy_ctx_fire_exception(ctx, err);
            eddy_ctx_close(ctx, NULL); /* the body would have a hole */
            return;
        }
    }
    eddy_ctx_write(ctx, eddy_buf_msg(out), p);
    if (last && e->input_closes) {
        e->input_closes = false;
        eddy_ctx_close_after_flush(ctx, NULL);
    }
}

/* What a response queued behind a streamed body will write: its head's header lines and
 * the body it sends (a streamed one's input counts by itself). */
static size_t queued_bytes(eddy_msg_t *msg)
{
    eddy_http_response_t *r = eddy_http_response_of(msg);
    if (r == NULL) {
        return 0;
    }
    size_t head = r->_head != NULL ? eddy_buf_readable(r->_head) : 0;
    return head + (sends_parts(r) && !r->_streamed ? eddy_http_response_body_length(r) : 0);
}

static const eddy__pump_ops_t http_pump = {
    .emit = emit_chunk,
    .pass = write_now,
    .bytes = queued_bytes,
};

/* Queue msg with p behind what is queued; a streamed response as its head, then its input
 * (which p goes with). */
static void queue(eddy_ctx_t *ctx, http_encoder_t *e, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_http_response_t *r = eddy_http_response_of(msg);
    size_t n = 0;
    eddy_msg_t **input = r != NULL && r->_streamed && sends_parts(r)
                             ? eddy__http_response_take_parts(r, &n)
                             : NULL;
    assert(input == NULL || n == 1); /* a chunked input is the only part */
    e->pump.ops = &http_pump;
    int err = eddy__pump_add(&e->pump, ctx, msg, input != NULL ? NULL : p);
    if (err != 0) {
        eddy_ctx_fail_write(ctx, msg, p, err);
    } else if (input != NULL && (err = eddy__pump_add(&e->pump, ctx, input[0], p)) != 0) {
        /* The head is queued, its body cannot be: the connection cannot go on. */
        eddy__promise_done(p, err);
        eddy_ctx_fire_exception(ctx, err);
        eddy_ctx_close(ctx, NULL);
    }
    if (input != NULL && err != 0) {
        eddy_msg_release(input[0]);
    }
    free(input);
}

static void http_encoder_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    http_encoder_t *e = eddy_encoder_self(eddy_ctx_state(ctx));
    eddy_http_response_t *r = eddy_http_response_of(msg);
    if (eddy__pump_busy(&e->pump) || (r != NULL && r->_streamed && sends_parts(r))) {
        queue(ctx, e, msg, p);
        return;
    }
    write_now(ctx, msg, p);
}

static void http_encoder_flush(eddy_ctx_t *ctx)
{
    http_encoder_t *e = eddy_encoder_self(eddy_ctx_state(ctx));
    eddy__pump_run(&e->pump, ctx);
    eddy_ctx_flush(ctx);
}

static void http_encoder_writability(eddy_ctx_t *ctx)
{
    http_encoder_t *e = eddy_encoder_self(eddy_ctx_state(ctx));
    if (eddy__pump_busy(&e->pump) && eddy__outbound_has_room(eddy_ctx_channel(ctx))) {
        eddy__pump_run(&e->pump, ctx);
        eddy_ctx_flush(ctx);
    }
    eddy_ctx_fire_channel_writability_changed(ctx);
}

static void http_encoder_removed(eddy_ctx_t *ctx)
{
    http_encoder_t *e = eddy_encoder_self(eddy_ctx_state(ctx));
    eddy__pump_drop(&e->pump, EDDY_ECLOSED);
    eddy_encoder_handler_removed(ctx);
}

static const eddy_encoder_ops_t http_response_encoder = {
    .name = "http_response_encoder",
    .accept = http_accept,
    .encode = http_encode,
    .size_hint = http_size_hint,
};

static const eddy_handler_ops_t http_response_encoder_handler = {
    .name = "http_response_encoder",
    .handler_removed = http_encoder_removed,
    .channel_writability_changed = http_encoder_writability,
    .write = http_encoder_write,
    .flush = http_encoder_flush,
};

eddy_encoder_t *eddy_http_response_encoder_new(void)
{
    return eddy_encoder_new(&http_response_encoder, sizeof(http_encoder_t));
}

const eddy_handler_ops_t *eddy_http_response_encoder_ops(void)
{
    return &http_response_encoder_handler;
}

eddy_handler_t eddy_http_response_encoder(void)
{
    return eddy_handler(NULL, eddy_http_response_encoder_ops(), eddy_http_response_encoder_new(),
                        eddy_free_state);
}
