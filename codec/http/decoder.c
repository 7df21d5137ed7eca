/*
 * The HTTP/1.1 request decoder (Netty's HttpRequestDecoder), on the byte-to-message decoder
 * base: a request head is decoded once its blank line has arrived, from one contiguous run of
 * bytes that the request then keeps as a retained slice (its strings point into it, no copy);
 * bodies go on as slices of what was read, Content-Length or chunked.
 *
 * Limits bound what a peer can make us hold: the cumulation never holds more than a request
 * line, a header section or a chunk-size line beyond their limits before the request is
 * rejected, and bodies are passed on as they arrive. A rejected request is emitted as a full
 * request with error set; everything after it is discarded (state BAD), since the stream can
 * no longer be framed (RFC 9112 section 2.2).
 */
#include "codec/http/internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

enum {
    ST_HEAD = 0, /* waiting for a request head */
    ST_BODY,     /* its body (d->body) */
    ST_BAD       /* a request was rejected: discard the rest */
};

typedef struct http_decoder_s {
    eddy__http_limits_t lim;
    int state;
    eddy__http_head_scan_t head; /* ST_HEAD: the search for the head's end */
    eddy__http_body_t body;      /* ST_BODY */
} http_decoder_t;

/* ---------------------------------------------------------------------------------------
 * Parsing a head
 */

static eddy_http_str_t str_of(const uint8_t *p, size_t n)
{
    return (eddy_http_str_t){(const char *)p, n};
}

/* Parse the request line [p, p + n) into req: 0 or a status. */
static int parse_request_line(const uint8_t *p, size_t n, eddy_http_request_t *req)
{
    const uint8_t *end = p + n;
    const uint8_t *sp1 = memchr(p, ' ', n);
    if (sp1 == NULL || !eddy__http_is_token(p, (size_t)(sp1 - p))) {
        return 400;
    }
    const uint8_t *t = sp1 + 1;
    const uint8_t *sp2 = memchr(t, ' ', (size_t)(end - t));
    if (sp2 == NULL || sp2 == t) {
        return 400;
    }
    for (const uint8_t *c = t; c < sp2; c++) {
        if (*c <= 0x20 || *c == 0x7f) {
            return 400;
        }
    }
    const uint8_t *v = sp2 + 1;
    if (end - v != 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' ||
        v[7] < '0' || v[7] > '9') {
        return 400;
    }
    if (v[5] != '1') {
        return 505;
    }
    req->method_name = str_of(p, (size_t)(sp1 - p));
    req->method = eddy__http_method_of(p, (size_t)(sp1 - p));
    req->target = str_of(t, (size_t)(sp2 - t));
    req->version = v[7] == '0' ? 10 : 11;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Decoding
 */

/* Emit a rejected request and discard the rest of the stream. */
static int reject(http_decoder_t *d, eddy_cumulation_t *in, eddy_decoder_out_t *out, int status)
{
    assert(d->state != ST_BAD && status >= 400 && status <= 505); /* one rejection, the last */
    d->state = ST_BAD;
    eddy_cumulation_skip(in, eddy_cumulation_readable(in));
    eddy_http_request_t *req = eddy_http_request_of(eddy__http_message_new(false, 0));
    if (req == NULL) {
        return EDDY_ENOMEM;
    }
    req->error = status;
    req->_msg.type = EDDY_MSG_HTTP_FULL_REQUEST;
    return eddy_decoder_emit(out, &req->_msg);
}

/* The status that answers a parsing error: 431 for a section past its limit, else 400. */
static int status_of(int err)
{
    return err == EDDY_ETOOLONGFRAME ? 431 : 400;
}

/* Whether what the headers of req say about its framing is acceptable: 0 or a status. */
static int check_framing(const eddy_http_request_t *req, const eddy__http_head_info_t *h)
{
    if (h->te_chunked > 1 || (h->te_chunked == 1 && !h->te_chunked_last)) {
        return 400; /* chunked twice, or not the final coding (RFC 9112 section 6.3) */
    }
    if (h->has_te && h->has_length) {
        return 400; /* request smuggling (RFC 9112 section 6.3) */
    }
    if (h->has_te && (h->te_other || h->te_chunked == 0)) {
        return 501;
    }
    if (h->hosts > 1 || (req->version == 11 && h->hosts == 0)) {
        return 400; /* RFC 9112 section 3.2 */
    }
    return 0;
}

/* The head of n bytes at the front of in, line1 of them the request line with its LF. */
static int decode_head(http_decoder_t *d, eddy_cumulation_t *in, eddy_decoder_out_t *out, size_t n,
                       size_t line1)
{
    assert(d->state == ST_HEAD);
    eddy__http_head_t hd;
    int err = eddy__http_head_decode(in, n, line1, d->lim.max_header_count, false, &hd);
    if (err == EDDY_ENOMEM) {
        return err;
    }
    if (err == EDDY_ETOOLONGFRAME) {
        return reject(d, in, out, 431);
    }
    eddy_http_request_t *req = eddy_http_request_of(hd.msg);
    const eddy__http_head_info_t *h = &hd.info;
    int status =
        hd.line.p == NULL ? 400 : parse_request_line((const uint8_t *)hd.line.p, hd.line.len, req);
    if (status == 0) {
        status = err != 0 ? 400 : check_framing(req, h);
    }
    if (status != 0) {
        eddy_msg_release(&req->_msg);
        return reject(d, in, out, status);
    }
    req->chunked = h->te_chunked == 1;
    req->content_length = h->has_length ? h->content_length : -1;
    req->expect_continue = h->expect_continue && req->version == 11;
    req->keep_alive = eddy__http_keep_alive(req->version, h);
    if (req->version == 10 && req->chunked) {
        req->keep_alive = false; /* RFC 9112 section 6.1: close after a 1.0 chunked request */
    }
    if (req->chunked) {
        d->state = ST_BODY;
        eddy__http_body_start(&d->body, EDDY__HTTP_BODY_CHUNK_SIZE, 0);
    } else if (req->content_length > 0) {
        d->state = ST_BODY;
        eddy__http_body_start(&d->body, EDDY__HTTP_BODY_LENGTH, (uint64_t)req->content_length);
    } else {
        req->_msg.type = EDDY_MSG_HTTP_FULL_REQUEST;
    }
    return eddy_decoder_emit(out, &req->_msg);
}

static int http_decode(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in, eddy_decoder_out_t *out)
{
    (void)ctx;
    http_decoder_t *d = self;
    size_t avail = eddy_cumulation_readable(in);
    if (avail == 0) {
        return 0;
    }
    if (d->state == ST_BAD) {
        return eddy_cumulation_skip(in, avail);
    }
    /* One request per call: the base sees where each ends (message deadlines, in_message). */
    if (d->state == ST_BODY) {
        int err = eddy__http_body_decode(&d->body, &d->lim, in, out);
        if (err == EDDY_ENOMEM) {
            return err;
        }
        if (err != 0) {
            return reject(d, in, out, status_of(err));
        }
        if (d->body.state == EDDY__HTTP_BODY_NONE) {
            d->state = ST_HEAD;
        }
        assert(d->body.state != EDDY__HTTP_BODY_UNTIL_CLOSE); /* a request's body never is */
        return 0;
    }
    size_t line1 = 0;
    ssize_t n = eddy__http_head_next(&d->head, &d->lim, in, &line1);
    if (n == EDDY_ENOMEM || n == 0) {
        return (int)n;
    }
    if (n < 0) {
        return reject(d, in, out, n == EDDY__HTTP_LINE_TOO_LONG ? 414 : 431);
    }
    return decode_head(d, in, out, (size_t)n, line1);
}

/* A request is under way from its first byte searched to its last content: the head is
 * searched incrementally and the body passed on in parts. */
static bool http_in_message(const void *self)
{
    const http_decoder_t *d = self;
    return d->state == ST_BODY || (d->state == ST_HEAD && (d->head.scan > 0 || d->head.line1 > 0));
}

static const eddy_decoder_ops_t http_request_decoder = {
    .name = "http_request_decoder",
    .decode = http_decode,
    .in_message = http_in_message,
};

static const eddy_handler_ops_t http_request_decoder_handler =
    EDDY_DECODER_HANDLER_OPS("http_request_decoder");

eddy_decoder_t *eddy_http_request_decoder_new(const eddy_http_decoder_options_t *o)
{
    eddy_decoder_t *dec = eddy_decoder_new(&http_request_decoder, sizeof(http_decoder_t));
    if (dec == NULL) {
        return NULL;
    }
    http_decoder_t *d = eddy_decoder_self(dec);
    eddy_http_decoder_options_t none = {0};
    if (o == NULL) {
        o = &none;
    }
    eddy__http_limits_init(&d->lim, o->max_initial_line, o->max_header_size, o->max_header_count,
                           o->max_chunk_size);
    d->state = ST_HEAD;
    return dec;
}

const eddy_handler_ops_t *eddy_http_request_decoder_ops(void)
{
    return &http_request_decoder_handler;
}

eddy_handler_t eddy_http_request_decoder(const eddy_http_decoder_options_t *opts)
{
    return eddy_handler(NULL, eddy_http_request_decoder_ops(), eddy_http_request_decoder_new(opts),
                        eddy_free_state);
}
