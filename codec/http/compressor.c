/*
 * The compressor handler (include/eddy/http_coding.h): Accept-Encoding read on the way in,
 * the answering response compressed on the way out.
 *
 * Each request leaves a note (its stream, the coding chosen for it, whether it was HEAD) in a
 * small array, in the order requests came; a response takes the note of its stream, or the
 * oldest when it names none, which is how both HTTP/1.1 (in order) and the HTTP/2 adapter
 * (by stream, or the oldest unanswered) match them. Interim 1xx responses take none. Notes
 * are a few bytes each and as many as requests in flight: pipelined ones, or open streams.
 *
 * A chunked response's coding state lives until its last piece. Content names no stream:
 * it belongs to the chunked response before it, as the HTTP/1.1 encoder and the HTTP/2
 * adapter both read it (one streamed body at a time per connection), so one slot holds it.
 */
#include "codec/http/coding.h"
#include "codec/http/internal.h"

#include <eddy/http_coding.h>

#include "buffer/layer.h"
#include "pipeline/layer.h"

#include <eddy/file.h>
#include <eddy/handler.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_CODINGS 8

/* What a request asked for. */
typedef struct note_s {
    uint32_t stream_id;
    int8_t coding; /* index into the compressor's codings, or -1: as it is */
    bool head;     /* a HEAD request: its answer has no body to compress */
} note_t;

typedef struct compressor_s {
    const eddy__coding_ops_t *codings[MAX_CODINGS]; /* most preferred first */
    int levels[MAX_CODINGS];
    size_t n;
    size_t min_length;
    eddy__http_fifo_t notes;       /* note_t: requests not answered yet, oldest first */
    const eddy__coding_ops_t *ops; /* the streamed body being compressed, or NULL */
    void *enc;
} compressor_t;

/* ---------------------------------------------------------------------------------------
 * Accept-Encoding
 */

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* A qvalue ("0", "0.5", "1.000"; RFC 9110 section 12.4.2) as thousandths, or -1. */
static int qvalue(const char *p, size_t n)
{
    if (n == 0 || (p[0] != '0' && p[0] != '1') || (n > 1 && (p[1] != '.' || n > 5))) {
        return -1;
    }
    int q = (p[0] - '0') * 1000, scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        q += (p[i] - '0') * scale;
    }
    return q <= 1000 ? q : -1;
}

/* The q of the parameters at p (";q=0.5", others ignored): 1000 when absent, -1 when bad. */
static int params_q(const char *p, size_t n)
{
    int q = 1000;
    size_t i = 0;
    while (i < n) {
        while (i < n && (is_blank(p[i]) || p[i] == ';')) {
            i++;
        }
        size_t start = i;
        while (i < n && p[i] != ';' && !is_blank(p[i])) {
            i++;
        }
        if (i - start >= 2 && (p[start] == 'q' || p[start] == 'Q') && p[start + 1] == '=') {
            q = qvalue(p + start + 2, i - start - 2);
        }
    }
    return q;
}

/* The next element of the list v at *at: its coding's name and q. false at the end. */
static bool accept_next(eddy_http_str_t v, size_t *at, eddy_http_str_t *name, int *q)
{
    size_t i = *at;
    while (i < v.len && (is_blank(v.p[i]) || v.p[i] == ',')) {
        i++;
    }
    if (i == v.len) {
        return false;
    }
    size_t start = i;
    while (i < v.len && v.p[i] != ',' && v.p[i] != ';' && !is_blank(v.p[i])) {
        i++;
    }
    *name = (eddy_http_str_t){v.p + start, i - start};
    size_t params = i;
    while (i < v.len && v.p[i] != ',') {
        i++;
    }
    *q = params_q(v.p + params, i - params);
    *at = i;
    return true;
}

/* The q each offered coding gets from v, into q[] (0: not acceptable). */
static void accept_qs(const compressor_t *c, eddy_http_str_t v, int *q)
{
    int star = 0, named[MAX_CODINGS];
    memset(named, -1, sizeof(named));
    eddy_http_str_t name;
    int qv;
    for (size_t at = 0; accept_next(v, &at, &name, &qv);) {
        if (qv < 0) {
            continue; /* a malformed element counts as not sent */
        }
        if (name.len == 1 && name.p[0] == '*') {
            star = qv;
            continue;
        }
        const eddy__coding_ops_t *ops = eddy__coding_find(name.p, name.len);
        for (size_t i = 0; ops != NULL && i < c->n; i++) {
            if (c->codings[i] == ops && qv > named[i]) {
                named[i] = qv;
            }
        }
    }
    for (size_t i = 0; i < c->n; i++) {
        q[i] = named[i] >= 0 ? named[i] : star;
    }
}

/* The index of the coding to answer a request with, or -1 for none. */
static int negotiate(const compressor_t *c, const eddy_http_request_t *req)
{
    const eddy_http_header_t *h = eddy_http_request_header(req, "accept-encoding");
    if (h == NULL || req->method == EDDY_HTTP_HEAD) {
        return -1;
    }
    int q[MAX_CODINGS], best = -1;
    accept_qs(c, h->value, q);
    for (size_t i = 0; i < c->n; i++) {
        if (q[i] > 0 && (best < 0 || q[i] > q[best])) {
            best = (int)i;
        }
    }
    return best;
}

/* ---------------------------------------------------------------------------------------
 * Notes: the requests not answered yet
 */

/* Take the note of stream_id (0: the oldest) into *n. false when there is none. */
static bool note_take(compressor_t *c, uint32_t stream_id, note_t *n)
{
    for (size_t i = 0; i < c->notes.count; i++) {
        note_t *at = eddy__http_fifo_at(&c->notes, i);
        if (stream_id == 0 || at->stream_id == stream_id) {
            *n = *at;
            eddy__http_fifo_remove(&c->notes, i);
            return true;
        }
    }
    return false;
}

static void compressor_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    compressor_t *c = eddy_ctx_state(ctx);
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req != NULL && msg->type != EDDY_MSG_HTTP_CLIENT_REQUEST) {
        note_t n = {req->stream_id, (int8_t)negotiate(c, req), req->method == EDDY_HTTP_HEAD};
        if (eddy__http_fifo_push(&c->notes, &n) != 0) {
            eddy_msg_release(msg);
            eddy_ctx_fire_exception(ctx, EDDY_ENOMEM);
            eddy_ctx_close(ctx, NULL); /* its answer could no longer be matched */
            return;
        }
    }
    eddy_ctx_fire_channel_read(ctx, msg);
}

/* ---------------------------------------------------------------------------------------
 * Responses
 */

/* Whether the type (its value, parameters and all) is compressed already. */
static bool type_compressed(eddy_http_str_t t)
{
    static const char *const prefixes[] = {"image/",
                                           "audio/",
                                           "video/",
                                           "font/woff",
                                           "application/zip",
                                           "application/gzip",
                                           "application/x-gzip",
                                           "application/zstd",
                                           "application/x-bzip2",
                                           "application/x-xz",
                                           "application/x-7z-compressed",
                                           "application/x-rar-compressed",
                                           NULL};
    for (const char *const *p = prefixes; *p != NULL; p++) {
        size_t n = strlen(*p);
        if (t.len >= n && strncasecmp(t.p, *p, n) == 0) {
            return !(n == 6 && t.len >= 13 && strncasecmp(t.p, "image/svg+xml", 13) == 0);
        }
    }
    return false;
}

/* Whether the list v holds token, any case. */
static bool list_has(eddy_http_str_t v, const char *token)
{
    size_t n = strlen(token);
    for (size_t i = 0; i + n <= v.len; i++) {
        bool starts = i == 0 || v.p[i - 1] == ',' || is_blank(v.p[i - 1]);
        size_t e = i + n;
        bool ends = e == v.len || v.p[e] == ',' || v.p[e] == ';' || is_blank(v.p[e]);
        if (starts && ends && strncasecmp(v.p + i, token, n) == 0) {
            return true;
        }
    }
    return false;
}

/* Whether r's header called name lists token. */
static bool header_lists(const eddy_http_response_t *r, const char *name, const char *token)
{
    for (size_t i = 0; i < r->header_count; i++) {
        if (eddy_http_str_eq_nocase(r->headers[i].name, name) &&
            list_has(r->headers[i].value, token)) {
            return true;
        }
    }
    return false;
}

/* Whether r may be compressed at all, whoever asks. */
static bool compressible(const compressor_t *c, const eddy_http_response_t *r)
{
    if (r->status < 200 || r->status == 204 || r->status == 206 || r->status == 304 ||
        r->head_only || eddy_http_response_header(r, "content-encoding") != NULL ||
        header_lists(r, "cache-control", "no-transform")) {
        return false;
    }
    const eddy_http_header_t *type = eddy_http_response_header(r, "content-type");
    if (type != NULL && type_compressed(type->value)) {
        return false;
    }
    if (r->_nparts > 0) { /* a streamed body (a chunked input) is the application's to code */
        return !r->_streamed && eddy_http_response_body_length(r) >= c->min_length;
    }
    return r->chunked || (r->body != NULL && eddy_buf_readable(r->body) >= c->min_length);
}

/* "Vary: Accept-Encoding", unless a Vary says so already (or "*"). */
static int vary_add(eddy_http_response_t *r)
{
    if (header_lists(r, "vary", "accept-encoding") || header_lists(r, "vary", "*")) {
        return 0;
    }
    return eddy_http_response_add_header(r, "Vary", "Accept-Encoding");
}

/* A strong ETag made weak (RFC 9110 section 8.8.3.3: the compressed body is another
 * representation, equivalent in meaning, not byte for byte). */
static int etag_weaken(eddy_http_response_t *r)
{
    const eddy_http_header_t *h = eddy_http_response_header(r, "etag");
    if (h == NULL || (h->value.len >= 2 && h->value.p[0] == 'W' && h->value.p[1] == '/')) {
        return 0;
    }
    char *weak = malloc(h->value.len + 3);
    if (weak == NULL) {
        return EDDY_ENOMEM;
    }
    memcpy(weak, "W/", 2);
    memcpy(weak + 2, h->value.p, h->value.len);
    weak[h->value.len + 2] = '\0';
    eddy__http_remove_field(&r->_msg, "etag");
    int err = eddy_http_response_add_header(r, "ETag", weak);
    free(weak);
    return err;
}

/* The headers of a response compressed with ops. */
static int headers_set(eddy_http_response_t *r, const eddy__coding_ops_t *ops)
{
    int err = eddy_http_response_add_header(r, "Content-Encoding", ops->name);
    return err != 0 ? err : etag_weaken(r);
}

/* The n bytes at in compressed at once with coding i into *out (a new buffer). */
static int code_whole(eddy_ctx_t *ctx, const compressor_t *c, size_t i, const uint8_t *in,
                      size_t n, eddy_buf_t **out)
{
    const eddy__coding_ops_t *ops = c->codings[i];
    *out = eddy_buf_alloc(eddy_ctx_alloc(ctx), n / 4 + 64, EDDY_BUF_DEFAULT_MAX_CAPACITY);
    if (*out == NULL) {
        return EDDY_ENOMEM;
    }
    int err;
    if (ops->enc_whole != NULL) {
        err = ops->enc_whole(c->levels[i], in, n, *out);
    } else {
        void *enc = ops->enc_new(c->levels[i], n);
        err = enc == NULL ? EDDY_ENOMEM : eddy__coding_encode(ops, enc, in, n, EDDY__CODING_FINISH, *out);
        if (enc != NULL) {
            ops->enc_free(enc);
        }
    }
    if (err != 0) {
        eddy_buf_release(*out);
        *out = NULL;
    }
    return err;
}

/* r's whole body compressed at once with coding i. */
static int compress_whole(eddy_ctx_t *ctx, const compressor_t *c, size_t i, eddy_http_response_t *r)
{
    eddy_buf_t *out;
    int err = code_whole(ctx, c, i, eddy_buf_read_ptr(r->body), eddy_buf_readable(r->body), &out);
    err = err != 0 ? err : headers_set(r, c->codings[i]);
    if (err != 0) {
        if (out != NULL) {
            eddy_buf_release(out);
        }
        return err;
    }
    eddy_http_response_set_body(r, out);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * A body of parts (file regions, buffers) compressed as it is read: the chunked input that
 * takes their place, pulled by the response encoder (HTTP/1.1) or the HTTP/2 adapter only
 * while the peer takes more, so a slow reader of a large file costs a chunk and the coding's
 * state, never the file.
 */

/* Read from a region this much at a time (nginx reads 32 KiB for gzip). */
#define SQUEEZE_READ ((size_t)32 << 10)

typedef struct squeeze_s {
    const eddy__coding_ops_t *ops;
    void *enc;
    eddy_msg_t **parts; /* owned, each */
    size_t n, at;       /* parts, and the one read next */
    const uint8_t *in;  /* what the coding has yet to take: staged, or a buffer part's */
    size_t in_n;
    bool eof;           /* every part read */
    bool finished;      /* ... and the coding ended */
    uint8_t stage[];    /* SQUEEZE_READ bytes read from a region */
} squeeze_t;

/* The next input of s into s->in (0 bytes: every part was read). 0, or the read's error
 * (EDDY_ETRUNCATED: the file ended before its region). */
static int squeeze_fill(squeeze_t *s)
{
    s->in_n = 0;
    while (s->in_n == 0 && s->at < s->n) {
        eddy_msg_t *part = s->parts[s->at];
        eddy_file_region_t *fr = eddy_file_region_of(part);
        if (fr == NULL || eddy_file_region_remaining(fr) == 0) {
            eddy_buf_t *b = fr == NULL ? eddy_buf_of(part) : NULL;
            s->in = b != NULL ? eddy_buf_read_ptr(b) : NULL;
            s->in_n = b != NULL ? eddy_buf_readable(b) : 0;
            s->at++;
            continue;
        }
        ssize_t got = eddy_file_region_read(fr, s->stage, SQUEEZE_READ);
        if (got <= 0) {
            return got < 0 ? (int)got : EDDY_ETRUNCATED;
        }
        eddy_file_region_skip(fr, (uint64_t)got);
        s->in = s->stage;
        s->in_n = (size_t)got;
    }
    s->eof = s->in_n == 0;
    return 0;
}

/* eddy_chunked_read_cb: compressed bytes into dst until it is full or the coding ended. */
static ssize_t squeeze_read(void *arg, uint8_t *dst, size_t cap)
{
    squeeze_t *s = arg;
    eddy__coding_io_t io = {.in = s->in, .in_n = s->in_n, .out = dst, .out_n = cap};
    while (!s->finished && io.out_n > 0) {
        if (io.in_n == 0 && !s->eof) {
            int err = squeeze_fill(s);
            if (err != 0) {
                return err;
            }
            io.in = s->in;
            io.in_n = s->in_n;
        }
        int rc = s->ops->enc_step(s->enc, &io, s->eof ? EDDY__CODING_FINISH : EDDY__CODING_RUN);
        if (rc < 0) {
            return rc;
        }
        s->finished = rc == 1 && s->eof;
    }
    s->in = io.in;
    s->in_n = io.in_n;
    return (ssize_t)(cap - io.out_n);
}

/* eddy_chunked_close_cb. */
static void squeeze_free(void *arg)
{
    squeeze_t *s = arg;
    for (size_t i = 0; i < s->n; i++) {
        eddy_msg_release(s->parts[i]);
    }
    free(s->parts);
    s->ops->enc_free(s->enc);
    free(s);
}

/* A body of parts up to this long, where the coding compresses whole bodies faster than
 * streams (libdeflate), is read whole and compressed at once: it keeps its length. */
#define WHOLE_PARTS_MAX ((uint64_t)256 << 10)

/* The bytes of r's parts, read into one buffer (*out), or an error (EDDY_ETRUNCATED: a file
 * shorter than its region). */
static int parts_read(eddy_ctx_t *ctx, const eddy_http_response_t *r, eddy_buf_t **out)
{
    size_t n = (size_t)eddy_http_response_body_length(r);
    eddy_buf_t *b = eddy_buf_alloc(eddy_ctx_alloc(ctx), n > 0 ? n : 1, n > 0 ? n : 1);
    int err = b == NULL ? EDDY_ENOMEM : 0;
    for (size_t k = 0; err == 0 && k < r->_nparts; k++) {
        eddy_file_region_t *fr = eddy_file_region_of(r->_parts[k]);
        eddy_buf_t *part = fr == NULL ? eddy_buf_of(r->_parts[k]) : NULL;
        if (part != NULL) {
            eddy_buf_write_bytes(b, eddy_buf_read_ptr(part), eddy_buf_readable(part));
            continue;
        }
        size_t want = (size_t)eddy_file_region_remaining(fr);
        ssize_t got = eddy_file_region_read(fr, eddy_buf_write_ptr(b), want);
        err = got < 0 ? (int)got : (size_t)got < want ? EDDY_ETRUNCATED : 0;
        if (err == 0) {
            eddy_buf_produce(b, want);
        }
    }
    if (err != 0 && b != NULL) {
        eddy_buf_release(b);
        b = NULL;
    }
    *out = b;
    return err;
}

/* r's parts (a file) read and compressed at once with coding i: r gets the compressed body
 * in their place. */
static int compress_parts_whole(eddy_ctx_t *ctx, const compressor_t *c, size_t i,
                                eddy_http_response_t *r)
{
    eddy_buf_t *in, *out = NULL;
    int err = parts_read(ctx, r, &in);
    if (err == 0) {
        err = code_whole(ctx, c, i, eddy_buf_read_ptr(in), eddy_buf_readable(in), &out);
        eddy_buf_release(in);
    }
    err = err != 0 ? err : headers_set(r, c->codings[i]);
    if (err != 0) {
        if (out != NULL) {
            eddy_buf_release(out);
        }
        return err;
    }
    size_t n;
    eddy_msg_t **parts = eddy__http_response_take_parts(r, &n);
    for (size_t k = 0; k < n; k++) {
        eddy_msg_release(parts[k]);
    }
    free(parts);
    r->_parts_len = 0;
    eddy_http_response_set_body(r, out);
    eddy__http_remove_field(&r->_msg, "accept-ranges"); /* ranges are of the file's bytes */
    return 0;
}

/* r's parts compressed with coding i as they are read: r is streamed (no Content-Length,
 * no ranges). 0, or an error with r as it came but for its headers. */
static int compress_parts(const compressor_t *c, size_t i, eddy_http_response_t *r)
{
    const eddy__coding_ops_t *ops = c->codings[i];
    squeeze_t *s = malloc(sizeof(*s) + SQUEEZE_READ);
    eddy_msg_t **parts = malloc(r->_nparts * sizeof(*parts));
    void *enc = ops->enc_new(c->levels[i], (size_t)eddy_http_response_body_length(r));
    int err = s == NULL || parts == NULL || enc == NULL ? EDDY_ENOMEM : headers_set(r, ops);
    eddy_chunked_t *in = NULL;
    if (err == 0) {
        *s = (squeeze_t){.ops = ops, .enc = enc, .parts = parts, .n = r->_nparts};
        in = eddy_chunked_new(squeeze_read, squeeze_free, s, 0);
        err = in == NULL ? EDDY_ENOMEM : 0;
    }
    if (err != 0) { /* no input: its close never runs */
        if (enc != NULL) {
            ops->enc_free(enc);
        }
        free(parts);
        free(s);
        return err;
    }
    eddy__http_remove_field(&r->_msg, "accept-ranges"); /* ranges are of the file's bytes */
    eddy__http_response_stream_parts(r, eddy_chunked_msg(in), parts);
    return 0;
}

/* r's parts (a file) compressed with coding i: at once when small and the coding is faster
 * so, else as they are read. */
static int compress_file(eddy_ctx_t *ctx, const compressor_t *c, size_t i,
                         eddy_http_response_t *r)
{
    if (c->codings[i]->enc_whole != NULL &&
        eddy_http_response_body_length(r) <= WHOLE_PARTS_MAX) {
        return compress_parts_whole(ctx, c, i, r);
    }
    return compress_parts(c, i, r);
}

/* The streamed body's coding, when there is one, ends. */
static void stream_end(compressor_t *c)
{
    if (c->ops != NULL) {
        c->ops->enc_free(c->enc);
        c->ops = NULL;
        c->enc = NULL;
    }
}

/* Start compressing r's streamed body with coding i. */
static int compress_start(compressor_t *c, size_t i, eddy_http_response_t *r)
{
    /* One streamed body at a time: its last piece ends it. One still open was given up (its
     * HTTP/2 stream reset, the application stopped writing it): its coding goes. */
    stream_end(c);
    c->enc = c->codings[i]->enc_new(c->levels[i], 0);
    if (c->enc == NULL) {
        return EDDY_ENOMEM;
    }
    c->ops = c->codings[i];
    return headers_set(r, c->ops);
}

/* Rewrite r as its note asks. Errors leave it as it came but for its Vary (and a weakened
 * ETag). */
static void on_response(eddy_ctx_t *ctx, compressor_t *c, eddy_http_response_t *r)
{
    note_t n;
    if (r->status < 200 || !note_take(c, r->stream_id, &n) || n.head || !compressible(c, r)) {
        return;
    }
    int err = vary_add(r);
    if (err == 0 && n.coding >= 0) {
        size_t i = (size_t)n.coding;
        err = r->chunked       ? compress_start(c, i, r)
              : r->_nparts > 0 ? compress_file(ctx, c, i, r)
                               : compress_whole(ctx, c, i, r);
    }
    if (err != 0) {
        /* A Content-Encoding added before the failure would announce a coding the body does
         * not have (compressible() saw none of the application's). */
        eddy__http_remove_field(&r->_msg, "content-encoding");
        stream_end(c);
        eddy__log(EDDY_LOG_DEBUG, "http compressor: channel %llu: a response goes uncompressed: %s",
                  (unsigned long long)eddy_channel_id(eddy_ctx_channel(ctx)), eddy_strerror(err));
    }
}

/* The next piece of the streamed body, compressed in place. */
static int on_content(eddy_ctx_t *ctx, compressor_t *c, eddy_http_content_t *content)
{
    size_t n = content->data != NULL ? eddy_buf_readable(content->data) : 0;
    eddy_buf_t *out =
        eddy_buf_alloc(eddy_ctx_alloc(ctx), n / 2 + 64, EDDY_BUF_DEFAULT_MAX_CAPACITY);
    if (out == NULL) {
        return EDDY_ENOMEM;
    }
    const uint8_t *in = n > 0 ? eddy_buf_read_ptr(content->data) : (const uint8_t *)"";
    int err = eddy__coding_encode(c->ops, c->enc, in, n,
                                  content->last ? EDDY__CODING_FINISH : EDDY__CODING_FLUSH, out);
    if (err != 0) {
        eddy_buf_release(out);
        return err;
    }
    if (content->data != NULL) {
        eddy_buf_release(content->data);
    }
    content->data = out;
    return 0;
}

static void compressor_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    compressor_t *c = eddy_ctx_state(ctx);
    eddy_http_response_t *r = eddy_http_response_of(msg);
    eddy_http_content_t *content = eddy_http_content_of(msg);
    if (r != NULL && msg->type == EDDY_MSG_HTTP_RESPONSE) {
        on_response(ctx, c, r);
    } else if (content != NULL && c->ops != NULL) {
        int err = on_content(ctx, c, content);
        if (content->last || err != 0) {
            stream_end(c);
        }
        if (err != 0) {
            eddy_ctx_fail_write(ctx, msg, p, err);
            return;
        }
    }
    eddy_ctx_write(ctx, msg, p);
}

static void compressor_removed(eddy_ctx_t *ctx)
{
    compressor_t *c = eddy_ctx_state(ctx);
    stream_end(c);
    eddy__http_fifo_destroy(&c->notes);
}

static const eddy_handler_ops_t compressor_ops = {
    .name = "http_compressor",
    .handler_removed = compressor_removed,
    .channel_read = compressor_read,
    .write = compressor_write,
};

/* ---------------------------------------------------------------------------------------
 * Making one
 */

/* The level o sets for ops (0: its default): -1 when out of its range. */
static int level_of(const eddy__coding_ops_t *ops, const eddy_http_compressor_options_t *o)
{
    int level;
    memcpy(&level, (const char *)o + ops->level_option, sizeof(level));
    if (level == 0) {
        return ops->default_level;
    }
    return level >= ops->min_level && level <= ops->max_level ? level : -1;
}

/* Add the coding called by the n bytes at name to c. */
static int coding_add(compressor_t *c, const char *name, size_t n,
                      const eddy_http_compressor_options_t *o)
{
    const eddy__coding_ops_t *ops = eddy__coding_find(name, n);
    if (ops == NULL) {
        eddy__log(EDDY_LOG_ERROR,
                  "http compressor: the coding \"%.*s\" is not in this build "
                  "(it has: \"%s\")",
                  (int)n, name, eddy_http_codings());
        return EDDY_ENOTSUP;
    }
    int level = level_of(ops, o);
    if (level < 0) {
        return EDDY_EINVAL;
    }
    for (size_t i = 0; i < c->n; i++) {
        if (c->codings[i] == ops) {
            return 0; /* named twice: the first place counts */
        }
    }
    assert(c->n < MAX_CODINGS); /* four codings exist, each taken once */
    c->codings[c->n] = ops;
    c->levels[c->n++] = level;
    return 0;
}

/* The codings of the comma-separated list s into c, in its order. */
static int codings_parse(compressor_t *c, const char *s, const eddy_http_compressor_options_t *o)
{
    eddy_http_str_t v = {s, strlen(s)}, name;
    int q, err = 0;
    for (size_t at = 0; err == 0 && accept_next(v, &at, &name, &q);) {
        err = coding_add(c, name.p, name.len, o);
    }
    return err;
}

static int compressor_init(compressor_t *c, const eddy_http_compressor_options_t *o)
{
    c->notes.size = sizeof(note_t);
    c->min_length = o->min_length != 0 ? o->min_length : EDDY_HTTP_COMPRESS_MIN_LENGTH;
    const char *codings = o->codings != NULL ? o->codings : eddy_http_codings();
    return codings_parse(c, codings, o);
}

eddy_handler_t eddy_http_compressor(const eddy_http_compressor_options_t *o)
{
    static const eddy_http_compressor_options_t defaults = {0};
    compressor_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return (eddy_handler_t){.error = EDDY_ENOMEM};
    }
    int err = compressor_init(c, o != NULL ? o : &defaults);
    if (err != 0) {
        free(c);
        return (eddy_handler_t){.error = err};
    }
    return eddy_handler(NULL, &compressor_ops, c, eddy_free_state);
}

bool eddy_http_coding_available(const char *name)
{
    return name != NULL && eddy__coding_find(name, strlen(name)) != NULL;
}

const char *eddy_http_codings(void)
{
    return eddy__codings_list();
}
