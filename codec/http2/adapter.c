/*
 * The adapter between streams and HTTP/1.1's objects (Netty's
 * Http2StreamFrameToHttpObjectCodec, without child channels): a stream's head and body become
 * one full eddy_http_request_t; an eddy_http_response_t written back becomes the stream's
 * HEADERS and DATA. Requests are answered by stream id, or in the order they came when the
 * response names none, which is what a handler written for HTTP/1.1 does.
 */
#include "internal.h"

#include "buffer/layer.h"
#include "codec/http/shared.h"
#include "pipeline/layer.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A request and its answer. */
typedef struct exchange_s {
    struct exchange_s *prev, *next; /* the adapter's exchanges, in the order they came */
    eddy_h2_stream_t *stream;       /* a reference */
    eddy_http_request_t *req;       /* being gathered; NULL once passed on */
    bool emitted;                   /* the request went on; an answer is due */
    bool dead;                      /* the stream ended: the answer goes nowhere */
    /* A body of parts (eddy_http_response_add_body()) being sent as the stream takes it: the
     * parts (owned) from sent on, and the response's promise (a reference) for the last. */
    eddy_msg_t **parts;
    size_t nparts, sent; /* parts, and those sent whole */
    eddy_promise_t *body_p;
} exchange_t;

static void parts_drop(exchange_t *ex, int err)
{
    for (size_t i = ex->sent; i < ex->nparts; i++) {
        eddy_msg_release(ex->parts[i]);
    }
    free(ex->parts);
    ex->parts = NULL;
    ex->nparts = ex->sent = 0;
    eddy__promise_done(ex->body_p, err);
    eddy_future_release(ex->body_p);
    ex->body_p = NULL;
}

typedef struct adapter_s {
    size_t max;                   /* the largest body */
    exchange_t *first, *last;
    exchange_t *chunked;          /* the exchange whose chunked body is being written */
} adapter_t;

static void exchange_free(adapter_t *a, exchange_t *ex)
{
    if (ex->prev != NULL) {
        ex->prev->next = ex->next;
    } else {
        a->first = ex->next;
    }
    if (ex->next != NULL) {
        ex->next->prev = ex->prev;
    } else {
        a->last = ex->prev;
    }
    if (a->chunked == ex) {
        a->chunked = NULL;
    }
    if (ex->parts != NULL) {
        parts_drop(ex, EDDY_ECLOSED); /* the stream ended first */
    }
    if (ex->req != NULL) {
        eddy_msg_release(&ex->req->_msg);
    }
    if (eddy_h2_stream_user_data(ex->stream) == ex) {
        eddy_h2_stream_set_user_data(ex->stream, NULL);
    }
    eddy_h2_stream_release(ex->stream);
    eddy__small_free(ex, sizeof(*ex));
}

static exchange_t *exchange_new(adapter_t *a, eddy_h2_stream_t *s)
{
    exchange_t *ex = eddy__small_alloc(sizeof(*ex)); /* one per request: recycled */
    if (ex == NULL) {
        return NULL;
    }
    memset(ex, 0, sizeof(*ex));
    ex->stream = eddy_h2_stream_retain(s);
    ex->prev = a->last;
    if (a->last != NULL) {
        a->last->next = ex;
    } else {
        a->first = ex;
    }
    a->last = ex;
    eddy_h2_stream_set_user_data(s, ex);
    return ex;
}

/* ---------------------------------------------------------------------------------------
 * Requests in
 */

static bool str_is(eddy_http_str_t s, const char *lit)
{
    return eddy_http_str_eq(s, lit);
}

/* Take a pseudo-header field into req: 0, or 400 for one unknown or repeated. */
static int pseudo_take(eddy_http_request_t *req, const eddy_http_header_t *f, bool *scheme,
                       eddy_http_str_t *authority)
{
    if (str_is(f->name, ":method") && req->method_name.p == NULL) {
        req->method_name = f->value;
        req->method = eddy__http_method_of(f->value.p, f->value.len);
    } else if (str_is(f->name, ":path") && req->target.p == NULL) {
        req->target = f->value;
    } else if (str_is(f->name, ":scheme") && !*scheme) {
        *scheme = true;
    } else if (str_is(f->name, ":authority") && authority->p == NULL) {
        *authority = f->value;
    } else {
        return 400;
    }
    return 0;
}

/* What RFC 9113 section 8.3.1 asks of a request's pseudo-header fields. */
static int pseudo_check(const eddy_http_request_t *req, bool scheme)
{
    if (req->method_name.p == NULL || req->method_name.len == 0) {
        return 400;
    }
    if (req->method == EDDY_HTTP_CONNECT) {
        return 0;
    }
    if (!scheme || req->target.p == NULL || req->target.len == 0) {
        return 400;
    }
    return 0;
}

/* s copied to *to with a NUL after it (the strings are not said to end in one, but a
 * parser that stops at a non-digit finds it there), *to moved past both. */
static eddy_http_str_t str_copy(eddy_http_str_t s, char **to)
{
    eddy_http_str_t c = {*to, s.len};
    if (s.len > 0) {
        memcpy(*to, s.p, s.len);
    }
    (*to)[s.len] = '\0';
    *to += s.len + 1;
    return c;
}

/* What request_build makes room for: a slot per regular field and one for a Host made from
 * :authority; their names' and values' bytes, and the pseudo-header fields' values', each
 * with a NUL. */
static size_t request_room(const eddy_h2_headers_t *h, size_t *bytes)
{
    size_t slots = 1;
    *bytes = 0;
    for (size_t i = 0; i < h->count; i++) {
        const eddy_http_header_t *f = &h->fields[i];
        bool pseudo = f->name.len > 0 && f->name.p[0] == ':';
        slots += pseudo ? 0 : 1;
        *bytes += (pseudo ? 0 : f->name.len + 1) + f->value.len + 1;
    }
    return slots;
}

/* The request of a header block, its strings copied into its own block (the block's buffer
 * goes with the message: an open stream keeps only what it uses); a Host field from
 * :authority when none came, so HTTP/1.1 handlers find it where they look. */
static eddy_http_request_t *request_build(eddy_h2_headers_t *h)
{
    size_t bytes, slots = request_room(h, &bytes);
    eddy_http_request_t *req =
        eddy_http_request_of(eddy__http_message_new_bytes(false, slots, bytes));
    if (req == NULL) {
        return NULL;
    }
    char *to = (char *)(req->headers + slots);
    req->version = 20;
    req->keep_alive = true;
    req->stream_id = eddy_h2_stream_id(h->stream);
    bool scheme = false, host = false, regular = false;
    eddy_http_str_t authority = {NULL, 0};
    for (size_t i = 0; i < h->count; i++) {
        const eddy_http_header_t *f = &h->fields[i];
        if (f->name.len > 0 && f->name.p[0] == ':') {
            eddy_http_header_t g = {.name = f->name, .value = str_copy(f->value, &to)};
            req->error = regular ? 400 : req->error; /* pseudo after regular: malformed */
            int err = pseudo_take(req, &g, &scheme, &authority);
            req->error = req->error != 0 ? req->error : err;
            continue;
        }
        regular = true;
        host = host || str_is(f->name, "host");
        eddy_http_header_t g = {.name = str_copy(f->name, &to), .value = str_copy(f->value, &to)};
        if (str_is(g.name, "content-length") &&
            eddy__http_parse_length(g.value, &req->content_length) != 0) {
            req->error = 400;
        }
        req->headers[req->header_count++] = g;
    }
    if (!host && authority.p != NULL) {
        req->headers[req->header_count++] =
            (eddy_http_header_t){.name = {"host", 4}, .value = authority};
    }
    if (req->error == 0) {
        req->error = pseudo_check(req, scheme);
    }
    return req;
}

/* Pass the gathered request on as a full one. */
static void request_emit(eddy_ctx_t *ctx, exchange_t *ex)
{
    eddy_http_request_t *req = ex->req;
    ex->req = NULL;
    ex->emitted = true;
    req->_msg.type = EDDY_MSG_HTTP_FULL_REQUEST;
    if (req->error != 0 && req->body != NULL) {
        eddy_buf_release(req->body);
        req->body = NULL;
    }
    eddy_ctx_fire_channel_read(ctx, &req->_msg);
}

static void on_headers(eddy_ctx_t *ctx, adapter_t *a, eddy_h2_headers_t *h)
{
    exchange_t *ex = eddy_h2_stream_user_data(h->stream);
    if (h->trailers) { /* trailers are not kept, as the HTTP/1.1 aggregator keeps none */
        if (ex != NULL && ex->req != NULL && h->end_stream) {
            request_emit(ctx, ex);
        }
        return;
    }
    if (ex != NULL) {
        return; /* a second head: nghttp2 refuses it before us */
    }
    ex = exchange_new(a, h->stream);
    if (ex == NULL || (ex->req = request_build(h)) == NULL) {
        if (ex != NULL) {
            exchange_free(a, ex);
        }
        eddy_h2_stream_reset(h->stream, EDDY_H2_INTERNAL_ERROR);
        return;
    }
    if (h->end_stream) {
        request_emit(ctx, ex);
    }
}

/* Add a piece of body to the request (the stream's window comes back at once: the body is
 * bounded by max). */
static void body_add(eddy_ctx_t *ctx, adapter_t *a, eddy_http_request_t *req, eddy_h2_data_t *d)
{
    size_t n = eddy_buf_readable(d->data);
    size_t have = req->body != NULL ? eddy_buf_readable(req->body) : 0;
    if (req->error != 0 || n == 0) {
        return;
    }
    if (n > a->max - have) {
        req->error = 413;
        req->keep_alive = true;
        return;
    }
    if (req->body == NULL && d->end_stream) {
        req->body = eddy_buf_retain(d->data); /* the whole body in one piece: uncopied */
        return;
    }
    if (req->body == NULL) {
        size_t first = req->content_length > 0 && (uint64_t)req->content_length <= a->max
                           ? (size_t)req->content_length
                           : n;
        req->body = eddy_buf_alloc(eddy_ctx_alloc(ctx), first, a->max);
    }
    if (req->body == NULL || eddy_buf_write_buf(req->body, d->data, n) != 0) {
        req->error = 500;
    }
}

static void on_data(eddy_ctx_t *ctx, adapter_t *a, eddy_h2_data_t *d)
{
    eddy_h2_stream_consume(d->stream, eddy_buf_readable(d->data));
    exchange_t *ex = eddy_ctx_is_removed(ctx) ? NULL : eddy_h2_stream_user_data(d->stream);
    if (ex == NULL || ex->req == NULL) {
        return;
    }
    body_add(ctx, a, ex->req, d);
    if (d->end_stream) {
        eddy_http_request_t *req = ex->req;
        int64_t got = req->body != NULL ? (int64_t)eddy_buf_readable(req->body) : 0;
        if (req->error == 0 && req->content_length >= 0 && got != req->content_length) {
            req->error = 400; /* RFC 9113 section 8.1.1 (nghttp2 resets such streams first) */
        }
        request_emit(ctx, ex);
    }
}

static void on_reset(adapter_t *a, eddy_h2_reset_t *r)
{
    exchange_t *ex = eddy_h2_stream_user_data(r->stream);
    if (ex == NULL) {
        return;
    }
    if (!ex->emitted) {
        exchange_free(a, ex);
        return;
    }
    ex->dead = true; /* its answer, when it comes, goes nowhere */
    if (a->chunked == ex || ex->parts != NULL) {
        exchange_free(a, ex);
    }
}

static void adapter_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    adapter_t *a = eddy_ctx_state(ctx);
    switch (msg->type) {
    case EDDY_MSG_H2_HEADERS:
        on_headers(ctx, a, eddy_h2_headers_of(msg));
        break;
    case EDDY_MSG_H2_DATA:
        on_data(ctx, a, eddy_h2_data_of(msg));
        break;
    case EDDY_MSG_H2_RESET:
        on_reset(a, eddy_h2_reset_of(msg));
        break;
    default:
        eddy_ctx_fire_channel_read(ctx, msg);
        return;
    }
    eddy_msg_release(msg);
}

/* ---------------------------------------------------------------------------------------
 * Responses out
 */

/* The exchange a response answers: by stream id, or the oldest unanswered. */
static exchange_t *exchange_for(adapter_t *a, uint32_t stream_id)
{
    for (exchange_t *ex = a->first; ex != NULL; ex = ex->next) {
        if (ex->emitted && ex != a->chunked && ex->parts == NULL &&
            (stream_id == 0 || eddy_h2_stream_id(ex->stream) == stream_id)) {
            return ex;
        }
    }
    return NULL;
}

/* A body that could not be queued after its head: the stream cannot end well, so it is
 * reset (the client sees RST_STREAM INTERNAL_ERROR, never a body cut short in silence), and
 * the log says why. */
static void stream_failed(eddy_ctx_t *ctx, exchange_t *ex, int err)
{
    if (err == 0 || err == EDDY_ECLOSED) {
        return;
    }
    eddy__log(EDDY_LOG_WARN, "http2: channel %llu: stream %u reset: its body could not be "
              "queued: %s", (unsigned long long)eddy_channel_id(eddy_ctx_channel(ctx)),
              eddy_h2_stream_id(ex->stream), eddy_strerror(err));
    eddy_h2_stream_reset(ex->stream, EDDY_H2_INTERNAL_ERROR);
}

/* Whether a response of status carries Content-Length (RFC 9110 section 8.6). */
static bool has_length(int status)
{
    return status >= 200 && status != 204 && status != 304;
}

/* Send r's head on ex's stream; end_stream when nothing follows. */
static int head_send(exchange_t *ex, const eddy_http_response_t *r, bool end_stream)
{
    eddy_http_header_t stack[32];
    size_t n = r->header_count + 2;
    eddy_http_header_t *f = n <= 32 ? stack : malloc(n * sizeof(*f));
    if (f == NULL) {
        return EDDY_ENOMEM;
    }
    char status[8], length[24];
    size_t k = 0;
    f[k++] = (eddy_http_header_t){.name = {":status", 7},
                                  .value = eddy__h2_decimal((size_t)r->status, status, sizeof(status))};
    for (size_t i = 0; i < r->header_count; i++) {
        const eddy_http_header_t *h = &r->headers[i];
        if (!eddy__h2_connection_specific(h->name.p, h->name.len)) {
            f[k++] = *h;
        }
    }
    if (!eddy__http_response_streamed(r) && has_length(r->status)) {
        size_t len = (size_t)eddy_http_response_body_length(r);
        f[k++] = (eddy_http_header_t){.name = {"content-length", 14},
                                      .value = eddy__h2_decimal(len, length, sizeof(length))};
    }
    int err = eddy_h2_stream_send_headers(ex->stream, f, k, end_stream);
    if (f != stack) {
        free(f);
    }
    return err;
}

/* A file region goes as DATA read from the file in pieces this large (nghttp2 frames them
 * at the peer's maximum frame size). */
#define FILE_CHUNK ((size_t)64 << 10)

/* The next piece of fr as a buffer: the buffer, or NULL with *err set. */
static eddy_buf_t *region_piece(eddy_ctx_t *ctx, eddy_file_region_t *fr, int *err)
{
    uint64_t left = eddy_file_region_remaining(fr);
    size_t cap = left < FILE_CHUNK ? (size_t)left : FILE_CHUNK;
    eddy_buf_t *b = eddy_buf_alloc(eddy_ctx_alloc(ctx), cap > 0 ? cap : 1, cap > 0 ? cap : 1);
    ssize_t got = b == NULL ? EDDY_ENOMEM : eddy_file_region_read(fr, eddy_buf_write_ptr(b), cap);
    if (got < 0) {
        if (b != NULL) {
            eddy_buf_release(b);
        }
        *err = (int)got;
        return NULL;
    }
    eddy_buf_produce(b, (size_t)got);
    eddy_file_region_skip(fr, (uint64_t)got);
    return b;
}

/* A chunked input (a streamed body, its only part) goes as DATA read in pieces this large:
 * a frame's worth at the default SETTINGS_MAX_FRAME_SIZE. */
#define INPUT_CHUNK ((size_t)16 << 10)

/* The next piece of the input c as a buffer (empty at its end: *end set), or NULL with *err. */
static eddy_buf_t *input_piece(eddy_ctx_t *ctx, eddy_chunked_t *c, bool *end, int *err)
{
    eddy_buf_t *b = eddy_buf_alloc(eddy_ctx_alloc(ctx), INPUT_CHUNK, INPUT_CHUNK);
    ssize_t got = b == NULL ? EDDY_ENOMEM : eddy__chunked_read(c, eddy_buf_write_ptr(b), INPUT_CHUNK);
    if (got < 0) {
        if (b != NULL) {
            eddy_buf_release(b);
        }
        *err = (int)got;
        return NULL;
    }
    eddy_buf_produce(b, (size_t)got);
    *end = got == 0;
    return b;
}

/* The next piece of part: a buffer whole, a region's or an input's next piece; *done once
 * it is the part's last. NULL with *err set. */
static eddy_buf_t *part_piece(eddy_ctx_t *ctx, eddy_msg_t *part, bool *done, int *err)
{
    eddy_file_region_t *fr = eddy_file_region_of(part);
    eddy_chunked_t *in = eddy_chunked_of(part);
    *done = true;
    if (in != NULL) {
        return input_piece(ctx, in, done, err);
    }
    if (fr == NULL) {
        return eddy_buf_retain(eddy_buf_of(part));
    }
    eddy_buf_t *b = region_piece(ctx, fr, err);
    *done = eddy_file_region_remaining(fr) == 0;
    return b;
}

/*
 * The next DATA of ex's body: a buffer part whole, or the next piece of a region or input
 * part, with end_stream and the promise on the body's last byte. 0, or the error that ends
 * the stream.
 */
static int send_piece(eddy_ctx_t *ctx, exchange_t *ex)
{
    eddy_msg_t *part = ex->parts[ex->sent];
    int err = 0;
    bool done;
    eddy_buf_t *b = part_piece(ctx, part, &done, &err);
    if (b == NULL) {
        return err;
    }
    if (done) {
        eddy_msg_release(part);
        ex->sent++;
    }
    bool fin = ex->sent == ex->nparts;
    eddy_promise_t *p = fin ? ex->body_p : NULL;
    ex->body_p = fin ? NULL : ex->body_p;
    err = eddy__h2_stream_send(ex->stream, b, fin, p, false);
    eddy_future_release(p); /* the stream completes it, either way */
    return err;
}

/*
 * Send ex's body while the stream takes more (eddy_h2_stream_is_writable(): its queue and the
 * channel's water marks), so a large file costs the stream's queue, not the file; the rest
 * waits for EDDY_EVENT_H2_STREAM_WRITABLE. Frees ex once the body is out, or resets the
 * stream when it cannot end well.
 */
static void pump_body(eddy_ctx_t *ctx, adapter_t *a, exchange_t *ex)
{
    int err = 0;
    while (err == 0 && ex->sent < ex->nparts && eddy_h2_stream_is_writable(ex->stream)) {
        err = send_piece(ctx, ex);
        if (eddy_ctx_is_removed(ctx)) {
            return; /* a send closed the channel: the exchanges went with the handler */
        }
    }
    if (err != 0 || ex->sent == ex->nparts) {
        parts_drop(ex, err != 0 ? err : EDDY_ECLOSED);
        stream_failed(ctx, ex, err);
        exchange_free(a, ex);
    }
}

/* r's body parts after its head, taken into ex with the promise p (may be NULL). */
static void send_parts(eddy_ctx_t *ctx, adapter_t *a, exchange_t *ex, eddy_http_response_t *r,
                       eddy_promise_t *p)
{
    ex->parts = eddy__http_response_take_parts(r, &ex->nparts);
    ex->sent = 0;
    /* Pieces are read as the stream takes them: a piece queued ahead is enough (a slow
     * reader of a file then holds 64 KiB of it, not half a MiB). */
    eddy__h2_stream_cap_pending(ex->stream, FILE_CHUNK);
    ex->body_p = p != NULL ? eddy_future_retain(p) : NULL;
    pump_body(ctx, a, ex);
}

/* The stream of an exchange with a body waiting can take more. */
static void adapter_user_event(eddy_ctx_t *ctx, int event, void *data)
{
    adapter_t *a = eddy_ctx_state(ctx);
    exchange_t *ex = event == EDDY_EVENT_H2_STREAM_WRITABLE ? eddy_h2_stream_user_data(data) : NULL;
    if (ex != NULL && ex->parts != NULL && !ex->dead) {
        pump_body(ctx, a, ex);
    }
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_fire_user_event(ctx, event, data);
    }
}

/* Whether r's body goes after its head: DATA frames follow the HEADERS. */
static bool has_data(const eddy_http_response_t *r)
{
    return r->status >= 200 && !r->head_only && !r->chunked &&
           (r->_streamed || eddy_http_response_body_length(r) > 0);
}

static void on_response(eddy_ctx_t *ctx, adapter_t *a, eddy_http_response_t *r,
                        eddy_promise_t *p)
{
    exchange_t *ex = exchange_for(a, r->stream_id);
    int err = EDDY_ECLOSED;
    if (ex != NULL && !ex->dead) {
        bool interim = r->status < 200;
        bool body = has_data(r);
        err = head_send(ex, r, !interim && !body && !r->chunked);
        if (err == 0 && body && r->_nparts > 0 && !eddy_ctx_is_removed(ctx)) {
            send_parts(ctx, a, ex, r, p);
            eddy_msg_release(&r->_msg);
            return; /* p and ex are the body's now */
        } else if (err == 0 && body && !eddy_ctx_is_removed(ctx)) {
            eddy_buf_t *b = r->body;
            r->body = NULL;
            err = eddy__h2_stream_send(ex->stream, b, true, p, false);
            p = NULL; /* completed by the stream, either way */
            if (!eddy_ctx_is_removed(ctx)) {
                stream_failed(ctx, ex, err);
            }
        }
        if (eddy_ctx_is_removed(ctx)) {
            ex = NULL; /* a send closed the channel: the exchanges went with the handler */
        } else if (interim) {
            ex = NULL; /* the final answer is still due */
        } else if (r->chunked && err == 0) {
            a->chunked = ex;
            ex = NULL;
        }
    }
    if (ex != NULL) {
        exchange_free(a, ex);
    }
    eddy_msg_release(&r->_msg);
    eddy__promise_done(p, err);
}

static void on_content(eddy_ctx_t *ctx, adapter_t *a, eddy_http_content_t *c, eddy_promise_t *p)
{
    exchange_t *ex = a->chunked;
    if (ex == NULL || ex->dead) {
        eddy_msg_release(&c->_msg);
        eddy__promise_done(p, EDDY_ECLOSED);
        return;
    }
    eddy_buf_t *b = c->data;
    c->data = NULL;
    bool last = c->last;
    eddy_msg_release(&c->_msg);
    int err = eddy_h2_stream_send_data(ex->stream, b, last, p);
    if (eddy_ctx_is_removed(ctx)) {
        return; /* the send closed the channel: the exchanges went with the handler */
    }
    stream_failed(ctx, ex, err);
    if (last) {
        exchange_free(a, ex);
    }
}

static void adapter_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    adapter_t *a = eddy_ctx_state(ctx);
    eddy_http_response_t *r = eddy_http_response_of(msg);
    if (r != NULL && msg->type == EDDY_MSG_HTTP_RESPONSE) {
        on_response(ctx, a, r, p);
    } else if (msg->type == EDDY_MSG_HTTP_CONTENT) {
        on_content(ctx, a, eddy_http_content_of(msg), p);
    } else {
        /* Bytes (a pre-encoded HTTP/1.1 answer) or anything else: no place in HTTP/2. */
        eddy_ctx_fail_write(ctx, msg, p, EDDY_ENOTSUP);
    }
}

static void adapter_removed(eddy_ctx_t *ctx)
{
    adapter_t *a = eddy_ctx_state(ctx);
    while (a->first != NULL) {
        exchange_free(a, a->first);
    }
}

static const eddy_handler_ops_t adapter_ops = {
    .name = "h2-http",
    .handler_removed = adapter_removed,
    .channel_read = adapter_read,
    .user_event_triggered = adapter_user_event,
    .write = adapter_write,
};

eddy_handler_t eddy_h2_http_adapter(size_t max_content_length)
{
    adapter_t *a = calloc(1, sizeof(*a));
    if (a != NULL) {
        a->max = max_content_length != 0 ? max_content_length : EDDY_HTTP_MAX_CONTENT_LENGTH;
    }
    return eddy_handler("h2-http", &adapter_ops, a, eddy_free_state);
}

int eddy__h2_adapter_upgraded(eddy_pipeline_t *p, eddy_http_request_t *req, eddy_h2_stream_t *s)
{
    eddy_ctx_t *ctx = eddy_pipeline_context_ops(p, &adapter_ops);
    if (ctx == NULL) {
        eddy_msg_release(&req->_msg);
        return EDDY_ENOENT;
    }
    exchange_t *ex = exchange_new(eddy_ctx_state(ctx), s);
    if (ex == NULL) {
        eddy_msg_release(&req->_msg);
        return EDDY_ENOMEM;
    }
    req->version = 20;
    req->stream_id = eddy_h2_stream_id(s);
    req->keep_alive = true;
    ex->req = req;
    request_emit(ctx, ex);
    return 0;
}
