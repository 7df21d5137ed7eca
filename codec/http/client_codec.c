/*
 * The HTTP/1.1 client codec (Netty's HttpClientCodec): one handler that encodes requests on
 * their way out and decodes responses on their way in, on the byte-to-message decoder base.
 * The two halves share a FIFO of the requests written and not yet answered: a response is
 * framed by the method of the request it answers (no body after HEAD, or after a 2xx to
 * CONNECT), and one that arrives when no request waits is an error.
 *
 * Expect: 100-continue holds the outbound side: the request's head goes out, then its body
 * and everything written after it wait in the codec until the server answers. A 100 lets them
 * go; a final status first means the server did without the body, which is then dropped, and
 * since the server may still wait for it the connection must not carry another request: the
 * response says keep_alive false.
 *
 * Errors end the connection's HTTP: decode returns them, so the base drops the rest of the
 * input, fires the error after the read batch and closes once what was written is flushed.
 */
#include "codec/http/internal.h"
#include "pipeline/layer.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Bodies and chunks up to this size are copied after their head into one buffer; longer ones
 * go by reference in a composite (the length field prepender's rule and number: two mallocs
 * against a copy of 1 KiB; not measured). */
#define COPY_MAX 1024

enum {
    ST_HEAD = 0, /* waiting for a status line */
    ST_BODY,     /* a response's body (s->body) */
    ST_UPGRADED, /* after 101: bytes pass on as they are */
    ST_BAD       /* after an error: the rest is dropped */
};

/* A request written and not answered yet. */
typedef struct sent_s {
    uint8_t method; /* eddy_http_method_t */
    bool expect;    /* its body is held until the server answers (100-continue) */
} sent_t;

/* A write held back behind a 100-continue request. */
typedef struct held_s {
    eddy_msg_t *msg;
    eddy_promise_t *p;
} held_t;

typedef struct client_codec_s {
    eddy__http_limits_t lim;
    int state;
    eddy__http_head_scan_t head; /* ST_HEAD: the search for the head's end */
    eddy__http_body_t body;      /* ST_BODY */
    bool closed_here;            /* the close came through us: the end of input is no error */

    eddy__http_fifo_t sent; /* sent_t: the requests written, oldest first */

    bool chunks;           /* content messages are the chunks of the request written last */
    bool dropping;         /* ... of a request whose body was dropped: they are dropped too */
    bool holding;          /* writes wait for the answer to an Expect: 100-continue */
    eddy_buf_t *held_body; /* the held request's body (not chunked), or NULL */
    held_t *held;          /* the writes after it, in order */
    size_t held_cap, held_count;
} client_codec_t;

static client_codec_t *codec_of(eddy_ctx_t *ctx)
{
    eddy_decoder_t *d = eddy_ctx_state(ctx);
    return d != NULL ? eddy_decoder_self(d) : NULL;
}

/* ---------------------------------------------------------------------------------------
 * The FIFO of requests written
 */

static sent_t *sent_oldest(client_codec_t *s)
{
    return s->sent.count > 0 ? eddy__http_fifo_at(&s->sent, 0) : NULL;
}

/* ---------------------------------------------------------------------------------------
 * Encoding
 */

/* head (taken over) and then body's bytes (borrowed), as one message: copied into head when
 * short, else joined in a composite that holds a reference to body. NULL without memory. */
static eddy_msg_t *join(eddy_buf_t *head, eddy_buf_t *body, const char *tail, size_t tail_len)
{
    assert(head != NULL);
    size_t n = body != NULL ? eddy_buf_readable(body) : 0;
    if (n <= COPY_MAX) {
        if (eddy_buf_ensure_writable(head, n + tail_len) != 0) {
            eddy_buf_release(head);
            return NULL;
        }
        if (n > 0) {
            eddy_buf_write_bytes(head, eddy_buf_read_ptr(body), n);
        }
        eddy_buf_write_bytes(head, tail, tail_len);
        return eddy_buf_msg(head);
    }
    eddy_composite_t *c = eddy_composite_new(3);
    eddy_buf_t *ref = eddy_buf_retained_duplicate(body);
    eddy_buf_t *end = tail_len > 0 ? eddy_buf_from(tail, tail_len) : NULL;
    int err = c != NULL && ref != NULL && (tail_len == 0 || end != NULL) ? 0 : EDDY_ENOMEM;
    if (err == 0) {
        err = eddy_composite_add(c, head); /* each add takes its buffer over, also failing */
        head = NULL;
    }
    if (err == 0) {
        err = eddy_composite_add(c, ref);
        ref = NULL;
    }
    if (err == 0 && end != NULL) {
        err = eddy_composite_add(c, end);
        end = NULL;
    }
    eddy_buf_t *left[] = {head, ref, end};
    for (size_t i = 0; i < 3; i++) {
        if (left[i] != NULL) {
            eddy_buf_release(left[i]);
        }
    }
    if (err != 0) {
        if (c != NULL) {
            eddy_composite_release(c);
        }
        return NULL;
    }
    return eddy_composite_msg(c);
}

/* A request as bytes: its head, and its body unless that is held back. */
static int write_request(eddy_ctx_t *ctx, client_codec_t *s, eddy_http_request_t *r,
                         eddy_promise_t *p)
{
    bool expect = eddy__http_client_request_expects(r);
    int err = eddy__http_fifo_push(&s->sent, &(sent_t){(uint8_t)r->method, expect});
    if (err != 0) {
        return err;
    }
    eddy_buf_t *head = eddy_buf_alloc(eddy_ctx_alloc(ctx), eddy__http_client_request_head_size(r),
                                      EDDY_BUF_DEFAULT_MAX_CAPACITY);
    err = head != NULL ? eddy__http_client_request_encode_head(r, head) : EDDY_ENOMEM;
    if (err != 0) {
        if (head != NULL) {
            eddy_buf_release(head);
        }
        eddy__http_fifo_pop_newest(&s->sent); /* never written: the server will not answer */
        return err;
    }
    s->chunks = r->chunked;
    s->dropping = false;
    if (expect) {
        s->holding = true;
        /* A reference of its own: the request stays as it was, to be sent again (a retry,
         * or one request written many times). */
        s->held_body = r->chunked || r->body == NULL ? NULL : eddy_buf_retain(r->body);
        eddy_ctx_write(ctx, eddy_buf_msg(head), p);
        return 0;
    }
    eddy_msg_t *m = join(head, r->chunked ? NULL : r->body, "", 0);
    if (m == NULL) {
        eddy__http_fifo_pop_newest(&s->sent);
        return EDDY_ENOMEM;
    }
    eddy_ctx_write(ctx, m, p);
    return 0;
}

/* A content message as the chunk of a chunked request (the last one ends the body). */
static eddy_msg_t *encode_chunk(eddy_ctx_t *ctx, eddy_http_content_t *c)
{
    size_t n = c->data != NULL ? eddy_buf_readable(c->data) : 0;
    eddy_buf_t *head = eddy_buf_alloc(eddy_ctx_alloc(ctx), 32 + (n <= COPY_MAX ? n : 0),
                                      EDDY_BUF_DEFAULT_MAX_CAPACITY);
    if (head == NULL) {
        return NULL;
    }
    if (n == 0) {
        eddy_buf_write_bytes(head, "0\r\n\r\n", c->last ? 5 : 0);
        return eddy_buf_msg(head);
    }
    char size[24];
    int len = snprintf(size, sizeof(size), "%zx\r\n", n);
    eddy_buf_write_bytes(head, size, (size_t)len);
    return c->last ? join(head, c->data, "\r\n0\r\n\r\n", 7) : join(head, c->data, "\r\n", 2);
}

/* Write msg (taken over) as the codec's outbound half does when nothing is held. */
static void write_now(eddy_ctx_t *ctx, client_codec_t *s, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_http_request_t *r =
        msg->type == EDDY_MSG_HTTP_CLIENT_REQUEST ? eddy_http_request_of(msg) : NULL;
    if (r != NULL) {
        int err = write_request(ctx, s, r, p);
        if (err != 0) {
            eddy_ctx_fail_write(ctx, msg, p, err);
        } else {
            eddy_msg_release(msg);
        }
        return;
    }
    eddy_http_content_t *c = eddy_http_content_of(msg);
    if (c == NULL) {
        eddy_ctx_write(ctx, msg, p); /* bytes and others pass as they are */
        return;
    }
    bool chunk = s->chunks, drop = s->dropping;
    if (c->last) {
        s->chunks = false;
        s->dropping = false;
    }
    eddy_msg_t *out = NULL;
    if (drop) {
        eddy_msg_release(msg);
        eddy__promise_done(p, EDDY_ECANCELED); /* the server answered without this body */
        return;
    }
    if (chunk) {
        out = encode_chunk(ctx, c);
    } else if (c->data != NULL && eddy_buf_readable(c->data) > 0) {
        out = eddy_buf_msg(eddy_buf_retain(c->data)); /* no chunked request: raw bytes */
    } else {
        eddy_msg_release(msg);
        eddy__promise_done(p, 0);
        return;
    }
    if (out == NULL) {
        eddy_ctx_fail_write(ctx, msg, p, EDDY_ENOMEM);
        return;
    }
    eddy_msg_release(msg);
    eddy_ctx_write(ctx, out, p);
}

static int held_push(client_codec_t *s, eddy_msg_t *msg, eddy_promise_t *p)
{
    assert(s->holding && s->held_count <= s->held_cap);
    if (s->held_count == s->held_cap) {
        size_t cap = s->held_cap != 0 ? s->held_cap * 2 : 8;
        held_t *v = realloc(s->held, cap * sizeof(*v));
        if (v == NULL) {
            return EDDY_ENOMEM;
        }
        s->held = v;
        s->held_cap = cap;
    }
    s->held[s->held_count++] = (held_t){msg, p != NULL ? eddy_future_retain(p) : NULL};
    return 0;
}

static void codec_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    client_codec_t *s = codec_of(ctx);
    if (s == NULL) {
        eddy_ctx_fail_write(ctx, msg, p, EDDY_EINVAL);
        return;
    }
    if (s->holding) {
        int err = held_push(s, msg, p);
        if (err != 0) {
            eddy_ctx_fail_write(ctx, msg, p, err);
        }
        return;
    }
    write_now(ctx, s, msg, p);
}

/* Everything held: failed with err and released, from the oldest. */
static void drop_held(client_codec_t *s, int err)
{
    if (s->held_body != NULL) {
        eddy_buf_release(s->held_body);
        s->held_body = NULL;
    }
    for (size_t i = 0; i < s->held_count; i++) {
        eddy_msg_release(s->held[i].msg);
        eddy__promise_done(s->held[i].p, err);
        eddy_future_release(s->held[i].p);
    }
    s->held_count = 0;
    s->holding = false;
}

/* The server said 100 Continue: the held body goes, then what was written after it, until
 * another request holds again. */
static void release_held(eddy_ctx_t *ctx, client_codec_t *s)
{
    assert(s->holding); /* the answer to the request that holds */
    s->holding = false;
    if (s->held_body != NULL) {
        eddy_buf_t *b = s->held_body;
        s->held_body = NULL;
        eddy_ctx_write(ctx, eddy_buf_msg(b), NULL);
    }
    size_t i = 0;
    for (; i < s->held_count && !s->holding; i++) {
        write_now(ctx, s, s->held[i].msg, s->held[i].p);
        eddy_future_release(s->held[i].p);
    }
    memmove(s->held, s->held + i, (s->held_count - i) * sizeof(*s->held));
    s->held_count -= i;
    eddy_ctx_flush(ctx);
}

/* The server answered the held request without wanting its body: the body, its chunks yet to
 * come and what waited behind it are dropped (failed with EDDY_ECANCELED); the connection is
 * not to be reused, which the response says. */
static void cancel_held(client_codec_t *s)
{
    assert(s->holding);
    /* The held request's chunks are dropped up to its last one, which may be among these. */
    s->dropping = s->chunks;
    for (size_t i = 0; i < s->held_count && s->dropping; i++) {
        eddy_http_content_t *c = eddy_http_content_of(s->held[i].msg);
        s->dropping = c == NULL || !c->last;
    }
    s->chunks = s->dropping;
    drop_held(s, EDDY_ECANCELED);
    for (size_t i = 0; i < s->sent.count; i++) {
        ((sent_t *)eddy__http_fifo_at(&s->sent, i))->expect = false;
    }
}

static void codec_close(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    client_codec_t *s = codec_of(ctx);
    if (s != NULL) {
        s->closed_here = true;
    }
    eddy_ctx_close(ctx, p);
}

/* ---------------------------------------------------------------------------------------
 * Decoding
 */

/* The stream cannot be framed any more: drop the rest, report err. */
static int fail(client_codec_t *s, eddy_cumulation_t *in, int err)
{
    s->state = ST_BAD;
    eddy_cumulation_skip(in, eddy_cumulation_readable(in));
    return err;
}

/* "HTTP/1.x SSS reason" ([p, p + n), no line ending) into r: 0 or EDDY_EDECODE. */
static int parse_status_line(const uint8_t *p, size_t n, eddy_http_response_t *r)
{
    if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9' || p[8] != ' ' ||
        p[9] < '1' || p[9] > '9' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9') {
        return EDDY_EDECODE;
    }
    if (n > 12 && (p[12] != ' ' || !eddy__http_value_ok(p + 13, n - 13))) {
        return EDDY_EDECODE;
    }
    r->version = p[7] == '0' ? 10 : 11;
    r->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    r->reason = n > 12 ? (eddy_http_str_t){(const char *)p + 13, n - 13}
                       : (eddy_http_str_t){(const char *)p + 12, 0};
    return 0;
}

/* How r's body is framed (RFC 9112 section 6.3), given what its headers say: a body state,
 * with r's keep_alive, chunked and content_length set; or EDDY_EDECODE. */
static int body_framing(eddy_http_response_t *r, const eddy__http_head_info_t *h)
{
    r->content_length = h->has_length ? h->content_length : -1;
    bool no_body = r->status < 200 || r->status == 204 || r->status == 304 ||
                   r->request_method == EDDY_HTTP_HEAD ||
                   (r->request_method == EDDY_HTTP_CONNECT && r->status < 300);
    if (no_body) {
        return EDDY__HTTP_BODY_NONE;
    }
    if (h->has_te) {
        if (h->te_chunked > 1) {
            return EDDY_EDECODE;
        }
        /* Transfer-Encoding overrides Content-Length, and such a message may have been
         * smuggled: no other goes on the connection. A 1.0 message has no business with
         * it at all (RFC 9112 section 6.1): decoded, then the connection closes. */
        if (h->has_length || r->version == 10) {
            r->keep_alive = false;
        }
        r->content_length = -1;
        if (h->te_chunked_last) {
            r->chunked = true;
            return EDDY__HTTP_BODY_CHUNK_SIZE;
        }
        r->keep_alive = false; /* chunked is not the final coding: the close ends it */
        return EDDY__HTTP_BODY_UNTIL_CLOSE;
    }
    if (h->has_length) {
        return h->content_length > 0 ? EDDY__HTTP_BODY_LENGTH : EDDY__HTTP_BODY_NONE;
    }
    r->keep_alive = false;
    return EDDY__HTTP_BODY_UNTIL_CLOSE;
}

/* The head of n bytes at the front of in, line1 of them the status line with its LF. */
static int decode_head(eddy_ctx_t *ctx, client_codec_t *s, eddy_cumulation_t *in,
                       eddy_decoder_out_t *out, size_t n, size_t line1)
{
    assert(s->state == ST_HEAD);
    eddy__http_head_t hd;
    int herr = eddy__http_head_decode(in, n, line1, s->lim.max_header_count, true, &hd);
    if (hd.msg == NULL) {
        return herr == EDDY_ENOMEM ? herr : fail(s, in, herr);
    }
    eddy_http_response_t *r = eddy_http_response_of(hd.msg);
    const eddy__http_head_info_t h = hd.info;
    int err = hd.line.p == NULL ? EDDY_EDECODE
                                : parse_status_line((const uint8_t *)hd.line.p, hd.line.len, r);
    if (err == 0) {
        err = herr;
    }
    sent_t *req = sent_oldest(s);
    assert(req != NULL);
    r->request_method = (eddy_http_method_t)req->method;
    r->keep_alive = eddy__http_keep_alive(r->version, &h);
    int framing = err == 0 ? body_framing(r, &h) : err;
    if (framing < 0) {
        eddy_msg_release(&r->_msg);
        return fail(s, in, framing);
    }
    if (req->expect && s->holding) {
        if (r->status == 100) {
            req->expect = false;
            release_held(ctx, s);
        } else if (r->status >= 200) {
            cancel_held(s);
            r->keep_alive = false;
        }
    }
    if (r->status == 101) {
        s->state = ST_UPGRADED; /* HTTP ends here (RFC 9110 section 15.2.2) */
    } else if (r->status >= 200) {
        eddy__http_fifo_pop(&s->sent); /* a 1xx is interim: the final response is still to come */
    }
    if (framing == EDDY__HTTP_BODY_LENGTH && (uint64_t)r->content_length <= s->lim.max_chunk &&
        eddy_cumulation_readable(in) >= (size_t)r->content_length) {
        /* The whole body is here and fits one piece: one full response, as a response without
         * a body comes (the aggregator has nothing to join). */
        if ((r->body = eddy_cumulation_read_buf(in, (size_t)r->content_length)) == NULL) {
            eddy_msg_release(&r->_msg);
            return EDDY_ENOMEM;
        }
        r->_msg.type = EDDY_MSG_HTTP_FULL_RESPONSE;
    } else if (framing == EDDY__HTTP_BODY_NONE) {
        r->_msg.type = EDDY_MSG_HTTP_FULL_RESPONSE;
    } else {
        s->state = ST_BODY;
        eddy__http_body_start(&s->body, framing, (uint64_t)r->content_length);
    }
    return eddy_decoder_emit(out, &r->_msg);
}

/* One step in ST_HEAD: skip empty lines, find the head's end, decode it. Empty lines between
 * messages are tolerated, as the request decoder does (RFC 9112 section 2.2). */
static int decode_status(eddy_ctx_t *ctx, client_codec_t *s, eddy_cumulation_t *in,
                         eddy_decoder_out_t *out)
{
    size_t line1 = 0;
    ssize_t n = eddy__http_head_next(&s->head, &s->lim, in, &line1);
    if (n == EDDY_ENOMEM) {
        return (int)n;
    }
    if (s->sent.count == 0 && eddy_cumulation_readable(in) > 0) {
        return fail(s, in, EDDY_EDECODE); /* a response to nothing */
    }
    if (n <= 0) {
        return n == 0 ? 0 : fail(s, in, EDDY_ETOOLONGFRAME);
    }
    return decode_head(ctx, s, in, out, (size_t)n, line1);
}

static int client_decode(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in,
                         eddy_decoder_out_t *out)
{
    client_codec_t *s = self;
    size_t avail = eddy_cumulation_readable(in);
    if (avail == 0) {
        return 0;
    }
    if (s->closed_here) {
        /* Closed by a handler (the aggregator refusing a body, the exchange): what is left
         * of the input is nobody's any more, and no error of it should follow theirs. */
        s->state = ST_BAD;
    }
    switch (s->state) {
    case ST_HEAD:
        return decode_status(ctx, s, in, out);
    case ST_BODY: {
        assert(s->body.state != EDDY__HTTP_BODY_NONE);
        /* One response per call: the base sees where each ends. */
        int err = eddy__http_body_decode(&s->body, &s->lim, in, out);
        if (err != 0) {
            return err == EDDY_ENOMEM ? err : fail(s, in, err);
        }
        if (s->body.state == EDDY__HTTP_BODY_NONE) {
            s->state = ST_HEAD;
        }
        return 0;
    }
    case ST_UPGRADED:
        return eddy_decoder_emit_buf(out, eddy_cumulation_read_buf(in, avail));
    default:
        return eddy_cumulation_skip(in, avail);
    }
}

/* The input ended: a body until the close ends with it; anything else under way, or a request
 * still waiting, was cut short (EDDY_EOF), unless we closed ourselves. */
static int client_decode_last(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in,
                              eddy_decoder_out_t *out)
{
    client_codec_t *s = self;
    if (s->state == ST_UPGRADED || s->state == ST_BAD || s->closed_here) {
        return client_decode(ctx, self, in, out);
    }
    int err = 0;
    if (s->state == ST_BODY) {
        err = eddy__http_body_finish(&s->body, &s->lim, in, out);
        if (err == 0) {
            s->state = ST_HEAD;
        }
    }
    if (err == 0 && (s->sent.count > 0 || eddy_cumulation_readable(in) > 0)) {
        err = EDDY_EOF;
    }
    s->state = ST_BAD;
    eddy_cumulation_skip(in, eddy_cumulation_readable(in));
    return err;
}

static bool client_in_message(const void *self)
{
    const client_codec_t *s = self;
    return s->state == ST_BODY || (s->state == ST_HEAD && (s->head.scan > 0 || s->head.line1 > 0));
}

static void client_destroy(void *self)
{
    client_codec_t *s = self;
    drop_held(s, EDDY_ECLOSED);
    free(s->held);
    eddy__http_fifo_destroy(&s->sent);
}

static const eddy_decoder_ops_t client_decoder = {
    .name = "http_client_codec",
    .decode = client_decode,
    .decode_last = client_decode_last,
    .destroy = client_destroy,
    .in_message = client_in_message,
};

static const eddy_handler_ops_t client_codec_handler = {
    .name = "http_client_codec",
    .handler_removed = eddy_decoder_handler_removed,
    .channel_inactive = eddy_decoder_channel_inactive,
    .channel_read = eddy_decoder_channel_read,
    .channel_read_complete = eddy_decoder_channel_read_complete,
    .user_event_triggered = eddy_decoder_user_event_triggered,
    .channel_writability_changed = eddy_decoder_channel_writability_changed,
    .close = codec_close,
    .write = codec_write,
};

eddy_handler_t eddy_http_client_codec(const eddy_http_client_codec_options_t *o)
{
    eddy_decoder_t *dec = eddy_decoder_new(&client_decoder, sizeof(client_codec_t));
    if (dec != NULL) {
        client_codec_t *s = eddy_decoder_self(dec);
        eddy_http_client_codec_options_t none = {0};
        if (o == NULL) {
            o = &none;
        }
        eddy__http_limits_init(&s->lim, o->max_initial_line, o->max_header_size,
                               o->max_header_count, o->max_chunk_size);
        s->sent.size = sizeof(sent_t);
    }
    return eddy_handler(NULL, &client_codec_handler, dec, eddy_free_state);
}

const eddy_handler_ops_t *eddy_http_client_codec_ops(void)
{
    return &client_codec_handler;
}
