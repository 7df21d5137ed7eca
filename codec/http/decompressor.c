/*
 * The decompressor (include/eddy/http_coding.h): bodies that arrive with a Content-Encoding
 * this build has come out decompressed, never past a cap, so a small compressed body (a
 * "bomb": 1 GiB of zeros is 1 MiB of gzip) cannot make us hold a large one: the coding stops
 * writing one byte past the cap and the message is refused there.
 */
#include "codec/http/coding.h"
#include "codec/http/internal.h"

#include <eddy/http_coding.h>

#include "buffer/layer.h"
#include "pipeline/layer.h"

#include <stdlib.h>
#include <string.h>

/* The coding a message's single Content-Encoding names, or NULL: none, several, or one this
 * build lacks (those pass as they are). */
static const eddy__coding_ops_t *coding_of(const eddy_http_header_t *h, size_t n)
{
    const eddy_http_header_t *ce = eddy__http_header_find(h, n, "content-encoding");
    if (ce == NULL ||
        eddy__http_header_find(ce + 1, n - (size_t)(ce + 1 - h), "content-encoding") != NULL) {
        return NULL;
    }
    eddy_http_str_t v = eddy__http_trim(ce->value);
    return eddy__coding_find(v.p, v.len);
}

/* What the handler and the functions read and change of a request or a response. */
typedef struct parts_s {
    const eddy__coding_ops_t *ops; /* its coding, or NULL */
    eddy_buf_t **body;
    int64_t *length;
} parts_t;

static parts_t parts_of(eddy_msg_t *msg)
{
    eddy_http_request_t *req = eddy_http_request_of(msg);
    eddy_http_response_t *r = eddy_http_response_of(msg);
    if (req != NULL) {
        return (parts_t){coding_of(req->headers, req->header_count), &req->body,
                         &req->content_length};
    }
    if (r != NULL) {
        return (parts_t){coding_of(r->headers, r->header_count), &r->body, &r->content_length};
    }
    return (parts_t){NULL, NULL, NULL};
}

/* The n bytes at in decompressed with d onto out, whose bytes may not pass max; a last
 * piece must end the stream. */
static int piece_decode(const eddy__coding_ops_t *ops, void *d, const uint8_t *in, size_t n,
                        eddy_buf_t *out, size_t max, bool last)
{
    bool done = false;
    int err = eddy__coding_decode(ops, d, in, n, out, max, &done);
    if (err == 0 && done != last) {
        err = EDDY_EDECODE; /* cut short, or more bytes after its end */
    }
    return err;
}

/* The headers that spoke of the compressed body: Content-Encoding, and a Content-Length that
 * counted its compressed bytes (content_length says the new count, or -1). */
static void headers_drop(eddy_msg_t *msg)
{
    eddy__http_remove_field(msg, "content-encoding");
    eddy__http_remove_field(msg, "content-length");
}

/* A new buffer for what n compressed bytes inflate to (text: about four times). */
static eddy_buf_t *out_new(size_t n, size_t max)
{
    size_t guess = n < max / 4 ? n * 4 + 64 : max + 1;
    return eddy_buf_new(guess < 65536 ? guess : 65536);
}

/* Decompress the whole body of msg's parts p. */
static int whole_decode(eddy_msg_t *msg, parts_t p, size_t max)
{
    size_t n = *p.body != NULL ? eddy_buf_readable(*p.body) : 0;
    if (p.ops == NULL || n == 0) {
        return 0; /* nothing to do: no coding of ours, or no body (HEAD, 204, 304) */
    }
    max = max != 0 ? max : EDDY_HTTP_MAX_CONTENT_LENGTH;
    void *d = p.ops->dec_new();
    eddy_buf_t *out = out_new(n, max);
    int err = d == NULL || out == NULL
                  ? EDDY_ENOMEM
                  : piece_decode(p.ops, d, eddy_buf_read_ptr(*p.body), n, out, max, true);
    if (d != NULL) {
        p.ops->dec_free(d);
    }
    if (err != 0) {
        if (out != NULL) {
            eddy_buf_release(out);
        }
        return err;
    }
    eddy_buf_release(*p.body);
    *p.body = out;
    *p.length = (int64_t)eddy_buf_readable(out);
    headers_drop(msg);
    return 0;
}

int eddy_http_response_decompress(eddy_http_response_t *r, size_t max)
{
    return whole_decode(&r->_msg, parts_of(&r->_msg), max);
}

int eddy_http_request_decompress(eddy_http_request_t *r, size_t max)
{
    return whole_decode(&r->_msg, parts_of(&r->_msg), max);
}

/* ---------------------------------------------------------------------------------------
 * The handler
 */

typedef struct decompressor_s {
    size_t max;
    const eddy__coding_ops_t *ops; /* the streamed body being decompressed, or NULL */
    void *dec;
    size_t total;  /* ... its bytes so far */
    bool ended;    /* ... and its coding's stream ended */
    bool dropping; /* a streamed body failed: its content is dropped (the channel closes) */
} decompressor_t;

static void stream_end(decompressor_t *d)
{
    if (d->ops != NULL) {
        d->ops->dec_free(d->dec);
        d->ops = NULL;
        d->dec = NULL;
    }
}

/* A body that could not be decompressed: said, and the connection ends. */
static void fail(eddy_ctx_t *ctx, int err)
{
    eddy_ctx_fire_exception(ctx, err);
    eddy_ctx_close(ctx, NULL);
}

/* A full message: a request that fails becomes a rejected one, for the application to
 * answer; a response that fails is an error. Returns whether msg goes on. */
static bool on_full(eddy_ctx_t *ctx, decompressor_t *d, eddy_msg_t *msg)
{
    int err = whole_decode(msg, parts_of(msg), d->max);
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (err == 0) {
        return true;
    }
    if (req != NULL) {
        req->error = err == EDDY_ETOOLONGFRAME ? 413 : 400;
        req->keep_alive = false;
        eddy_http_request_set_body(req, NULL);
        return true;
    }
    eddy_msg_release(msg);
    fail(ctx, err);
    return false;
}

/* A head whose body follows as content: its coding starts. Returns whether msg goes on. */
static bool on_head(eddy_ctx_t *ctx, decompressor_t *d, eddy_msg_t *msg)
{
    parts_t p = parts_of(msg);
    d->dropping = false;
    if (p.ops == NULL) {
        return true;
    }
    if ((d->dec = p.ops->dec_new()) == NULL) {
        eddy_msg_release(msg);
        fail(ctx, EDDY_ENOMEM);
        return false;
    }
    d->ops = p.ops;
    d->total = 0;
    d->ended = false;
    *p.length = -1;
    headers_drop(msg);
    return true;
}

/* A piece of a streamed body, decompressed in place. */
static int on_content(decompressor_t *d, eddy_http_content_t *c)
{
    size_t n = c->data != NULL ? eddy_buf_readable(c->data) : 0;
    eddy_buf_t *out = out_new(n, d->max - d->total);
    if (out == NULL) {
        return EDDY_ENOMEM;
    }
    const uint8_t *in = n > 0 ? eddy_buf_read_ptr(c->data) : (const uint8_t *)"";
    /* The stream may end before the last piece (which must then bring no more bytes):
     * once ended, the decode refuses bytes without calling the coding. */
    int err = eddy__coding_decode(d->ops, d->dec, in, n, out, d->max - d->total, &d->ended);
    if (err == 0 && c->last && !d->ended) {
        err = EDDY_EDECODE; /* cut short */
    }
    if (err != 0) {
        eddy_buf_release(out);
        return err;
    }
    d->total += eddy_buf_readable(out);
    if (c->data != NULL) {
        eddy_buf_release(c->data);
    }
    c->data = out;
    return 0;
}

static void decompressor_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    decompressor_t *d = eddy_ctx_state(ctx);
    eddy_http_content_t *c = eddy_http_content_of(msg);
    bool on = true;
    if (msg->type == EDDY_MSG_HTTP_FULL_REQUEST || msg->type == EDDY_MSG_HTTP_FULL_RESPONSE) {
        on = on_full(ctx, d, msg);
    } else if (msg->type == EDDY_MSG_HTTP_REQUEST || msg->type == EDDY_MSG_HTTP_RESPONSE_HEAD) {
        on = on_head(ctx, d, msg);
    } else if (c != NULL && (d->ops != NULL || d->dropping)) {
        int err = d->dropping ? 0 : on_content(d, c);
        on = err == 0 && !d->dropping;
        d->dropping = d->dropping || err != 0;
        if (c->last || err != 0) {
            stream_end(d);
        }
        if (!on) {
            eddy_msg_release(msg);
        }
        if (err != 0) {
            fail(ctx, err);
        }
    }
    if (on) {
        eddy_ctx_fire_channel_read(ctx, msg);
    }
}

static void decompressor_removed(eddy_ctx_t *ctx)
{
    stream_end(eddy_ctx_state(ctx));
}

static const eddy_handler_ops_t decompressor_ops = {
    .name = "http_decompressor",
    .handler_removed = decompressor_removed,
    .channel_read = decompressor_read,
};

eddy_handler_t eddy_http_decompressor(const eddy_http_decompressor_options_t *o)
{
    decompressor_t *d = calloc(1, sizeof(*d));
    if (d != NULL) {
        d->max = o != NULL && o->max_length != 0 ? o->max_length : EDDY_HTTP_MAX_CONTENT_LENGTH;
    }
    return eddy_handler("http_decompressor", &decompressor_ops, d, eddy_free_state);
}
