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
#include "pipeline/codec/http/internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

enum {
    ST_HEAD = 0,   /* waiting for a request head */
    ST_BODY,       /* Content-Length bytes to pass on */
    ST_CHUNK_SIZE, /* a chunk-size line */
    ST_CHUNK_DATA, /* chunk bytes to pass on */
    ST_CHUNK_END,  /* the CRLF after a chunk's data */
    ST_TRAILERS,   /* the trailer section after the last chunk */
    ST_BAD         /* a request was rejected: discard the rest */
};

typedef struct http_decoder_s {
    size_t max_line;
    size_t max_header_size;
    size_t max_header_count;
    size_t max_chunk;
    int state;
    size_t scan;        /* ST_HEAD, ST_TRAILERS: bytes already searched (for the request
                           line's LF, then for the blank line) */
    size_t line1;       /* ST_HEAD: the request line's length with its LF, once known */
    uint64_t remaining; /* ST_BODY, ST_CHUNK_DATA: body bytes still to come */
} http_decoder_t;

/* ---------------------------------------------------------------------------------------
 * Framing
 */

/*
 * The length of a section ending with a blank line ("\n\n" or "\n\r\n"), given that an LF sits
 * at index from (or, from == SIZE_MAX, just before p: an empty section is possible). Resumes
 * at *scan; returns 0 when the blank line has not arrived yet, *scan saved.
 */
static size_t find_blank_line(const uint8_t *p, size_t n, size_t from, size_t *scan)
{
    size_t j = *scan > from || from == SIZE_MAX ? *scan : from;
    if (from == SIZE_MAX && j == 0) {
        /* The section may be empty: a blank line right at the start. */
        if (n >= 1 && p[0] == '\n') {
            return 1;
        }
        if (n >= 2 && p[0] == '\r' && p[1] == '\n') {
            return 2;
        }
        if (n < 2) {
            return 0;
        }
    }
    while (j < n) {
        const uint8_t *lf = memchr(p + j, '\n', n - j);
        if (lf == NULL) {
            *scan = n;
            return 0;
        }
        j = (size_t)(lf - p);
        if (j + 1 >= n) {
            *scan = j;
            return 0;
        }
        if (p[j + 1] == '\n') {
            return j + 2;
        }
        if (p[j + 1] == '\r') {
            if (j + 2 >= n) {
                *scan = j;
                return 0;
            }
            if (p[j + 2] == '\n') {
                return j + 3;
            }
        }
        j++;
    }
    *scan = n;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Parsing a head
 */

/* RFC 9110 tchar: what tokens (methods, header names) are made of. */
static bool is_tchar(uint8_t c)
{
    uint8_t l = c | 0x20;
    return (l >= 'a' && l <= 'z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool is_token(const uint8_t *p, size_t n)
{
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_tchar(p[i])) {
            return false;
        }
    }
    return true;
}

static eddy_http_method_t method_of(const uint8_t *p, size_t n)
{
    static const struct {
        const char *name;
        eddy_http_method_t m;
    } methods[] = {
        {"GET", EDDY_HTTP_GET},     {"HEAD", EDDY_HTTP_HEAD},       {"POST", EDDY_HTTP_POST},
        {"PUT", EDDY_HTTP_PUT},     {"DELETE", EDDY_HTTP_DELETE},   {"OPTIONS", EDDY_HTTP_OPTIONS},
        {"PATCH", EDDY_HTTP_PATCH}, {"CONNECT", EDDY_HTTP_CONNECT}, {"TRACE", EDDY_HTTP_TRACE},
    };
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        if (strlen(methods[i].name) == n && memcmp(methods[i].name, p, n) == 0) {
            return methods[i].m;
        }
    }
    return EDDY_HTTP_OTHER;
}

/* The line [p, end) without its line ending: LF or CRLF; any other CR is an error (-1). */
static ssize_t line_length(const uint8_t *p, const uint8_t *lf)
{
    size_t n = (size_t)(lf - p);
    if (n > 0 && p[n - 1] == '\r') {
        n--;
    }
    return memchr(p, '\r', n) != NULL ? -1 : (ssize_t)n;
}

static eddy_http_str_t str_of(const uint8_t *p, size_t n)
{
    return (eddy_http_str_t){(const char *)p, n};
}

/* Call fn(token, arg) for each element of a comma-separated list, trimmed. */
static void for_each_token(eddy_http_str_t v, void (*fn)(eddy_http_str_t t, void *arg), void *arg)
{
    const char *p = v.p, *end = v.p + v.len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma != NULL ? comma : end;
        eddy_http_str_t t = eddy__http_trim((eddy_http_str_t){p, (size_t)(e - p)});
        fn(t, arg);
        p = comma != NULL ? comma + 1 : end;
    }
}

typedef struct head_info_s {
    int error;
    int hosts;
    bool has_length;
    bool has_te;
    bool te_chunked;
    bool te_other;
    bool conn_close;
    bool conn_keep_alive;
} head_info_t;

static void connection_token(eddy_http_str_t t, void *arg)
{
    head_info_t *h = arg;
    if (eddy_http_str_eq_nocase(t, "close")) {
        h->conn_close = true;
    } else if (eddy_http_str_eq_nocase(t, "keep-alive")) {
        h->conn_keep_alive = true;
    }
}

static void te_token(eddy_http_str_t t, void *arg)
{
    head_info_t *h = arg;
    if (t.len == 0) {
        return; /* empty list elements are allowed (RFC 9110 section 5.6.1) */
    }
    if (eddy_http_str_eq_nocase(t, "chunked")) {
        if (h->te_chunked) {
            h->error = 400; /* chunked twice */
        }
        h->te_chunked = true;
    } else {
        if (h->te_chunked) {
            h->error = 400; /* chunked not the final coding (RFC 9112 section 6.3) */
        }
        h->te_other = true;
    }
}

/* Content-Length: digits, or a list of the same digits ("42, 42" is allowed by RFC 9110
 * section 8.6). 0 and *out, or 400. */
static int parse_length(eddy_http_str_t v, int64_t *out)
{
    int64_t first = -1;
    const char *p = v.p, *end = v.p + v.len;
    do {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        eddy_http_str_t t =
            eddy__http_trim((eddy_http_str_t){p, (size_t)((comma != NULL ? comma : end) - p)});
        if (t.len == 0 || t.len > 18) {
            return 400; /* empty, or past what 63 bits surely hold */
        }
        int64_t n = 0;
        for (size_t i = 0; i < t.len; i++) {
            if (t.p[i] < '0' || t.p[i] > '9') {
                return 400;
            }
            n = n * 10 + (t.p[i] - '0');
        }
        if (first >= 0 && n != first) {
            return 400;
        }
        first = n;
        p = comma != NULL ? comma + 1 : end;
    } while (p < end);
    *out = first;
    return 0;
}

/* Whether every byte of a header value is allowed: no controls but HTAB (RFC 9110 5.5). */
static bool value_ok(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f) {
            return false;
        }
    }
    return true;
}

/* Parse the request line [p, p + n) into req: 0 or a status. */
static int parse_request_line(const uint8_t *p, size_t n, eddy_http_request_t *req)
{
    const uint8_t *end = p + n;
    const uint8_t *sp1 = memchr(p, ' ', n);
    if (sp1 == NULL || !is_token(p, (size_t)(sp1 - p))) {
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
    req->method = method_of(p, (size_t)(sp1 - p));
    req->target = str_of(t, (size_t)(sp2 - t));
    req->version = v[7] == '0' ? 10 : 11;
    return 0;
}

/* Parse the header lines [p, end) (each ending in LF, the blank line excluded) into req's
 * headers: 0 or a status. */
static int parse_headers(const uint8_t *p, const uint8_t *end, eddy_http_request_t *req,
                         head_info_t *h)
{
    while (p < end) {
        const uint8_t *lf = memchr(p, '\n', (size_t)(end - p));
        ssize_t len = line_length(p, lf);
        if (len <= 0 || p[0] == ' ' || p[0] == '\t') {
            return 400; /* a bare CR, or obs-fold (RFC 9112 section 5.2) */
        }
        const uint8_t *colon = memchr(p, ':', (size_t)len);
        if (colon == NULL || !is_token(p, (size_t)(colon - p))) {
            return 400; /* no name, or blanks before the colon (RFC 9112 section 5.1) */
        }
        eddy_http_str_t name = str_of(p, (size_t)(colon - p));
        eddy_http_str_t value = eddy__http_trim(str_of(colon + 1, (size_t)(p + len - (colon + 1))));
        if (!value_ok((const uint8_t *)value.p, value.len)) {
            return 400;
        }
        eddy_http_header_t *hd = &req->headers[req->header_count++];
        hd->name = name;
        hd->value = value;
        switch (name.len) {
        case 4:
            if (eddy_http_str_eq_nocase(name, "host")) {
                h->hosts++;
            }
            break;
        case 6:
            if (eddy_http_str_eq_nocase(name, "expect") &&
                eddy_http_str_eq_nocase(value, "100-continue")) {
                req->expect_continue = true;
            }
            break;
        case 10:
            if (eddy_http_str_eq_nocase(name, "connection")) {
                for_each_token(value, connection_token, h);
            }
            break;
        case 14:
            if (eddy_http_str_eq_nocase(name, "content-length")) {
                int64_t n = 0;
                int err = parse_length(value, &n);
                if (err != 0 || (h->has_length && n != req->content_length)) {
                    return 400;
                }
                h->has_length = true;
                req->content_length = n;
            }
            break;
        case 17:
            if (eddy_http_str_eq_nocase(name, "transfer-encoding")) {
                h->has_te = true;
                for_each_token(value, te_token, h);
            }
            break;
        default:
            break;
        }
        p = lf + 1;
    }
    return h->error;
}

/* ---------------------------------------------------------------------------------------
 * Decoding
 */

/* Emit a rejected request and discard the rest of the stream. */
static int reject(http_decoder_t *d, eddy_cumulation_t *in, eddy_decoder_out_t *out, int status)
{
    d->state = ST_BAD;
    eddy_cumulation_skip(in, eddy_cumulation_readable(in));
    eddy_http_request_t *req = eddy__http_request_alloc(0);
    if (req == NULL) {
        return EDDY_ENOMEM;
    }
    req->error = status;
    req->_msg.type = EDDY_MSG_HTTP_FULL_REQUEST;
    return eddy_decoder_emit(out, &req->_msg);
}

/* The head of n bytes at the front of in, line1 of them the request line with its LF. */
static int decode_head(http_decoder_t *d, eddy_cumulation_t *in, eddy_decoder_out_t *out, size_t n,
                       size_t line1)
{
    eddy_buf_t *head = eddy_cumulation_read_buf(in, n);
    if (head == NULL) {
        return EDDY_ENOMEM;
    }
    const uint8_t *p = eddy_buf_read_ptr(head);
    /* Every header line ends in an LF; the request line's and the blank line's are not
     * headers. */
    size_t lines = 0;
    for (const uint8_t *c = p + line1, *end = p + n; (c = memchr(c, '\n', (size_t)(end - c)));) {
        c++;
        lines++;
    }
    size_t count = lines - 1;
    if (count > d->max_header_count) {
        eddy_buf_release(head);
        return reject(d, in, out, 431);
    }
    eddy_http_request_t *req = eddy__http_request_alloc(count);
    if (req == NULL) {
        eddy_buf_release(head);
        return EDDY_ENOMEM;
    }
    req->_head = head;
    head_info_t h = {0};
    ssize_t len = line_length(p, p + line1 - 1);
    int status = len < 0 ? 400 : parse_request_line(p, (size_t)len, req);
    if (status == 0) {
        /* The headers end before the blank line: its LF is the last byte, its CR maybe the
         * one before. */
        const uint8_t *end = p + n - 1;
        if (end > p + line1 && end[-1] == '\r') {
            end--;
        }
        status = parse_headers(p + line1, end, req, &h);
    }
    if (status == 0) {
        if (h.has_te && h.has_length) {
            status = 400; /* request smuggling (RFC 9112 section 6.3) */
        } else if (h.has_te && (h.te_other || !h.te_chunked)) {
            status = 501;
        } else if (h.hosts > 1 || (req->version == 11 && h.hosts == 0)) {
            status = 400; /* RFC 9112 section 3.2 */
        }
    }
    if (status != 0) {
        eddy_msg_release(&req->_msg);
        return reject(d, in, out, status);
    }
    req->chunked = h.te_chunked;
    req->keep_alive = req->version == 11 ? !h.conn_close : h.conn_keep_alive && !h.conn_close;
    if (req->version == 10 && req->chunked) {
        req->keep_alive = false; /* RFC 9112 section 6.1: close after a 1.0 chunked request */
    }
    if (req->version == 10) {
        req->expect_continue = false;
    }
    if (req->chunked) {
        d->state = ST_CHUNK_SIZE;
    } else if (req->content_length > 0) {
        d->state = ST_BODY;
        d->remaining = (uint64_t)req->content_length;
    } else {
        req->_msg.type = EDDY_MSG_HTTP_FULL_REQUEST;
    }
    return eddy_decoder_emit(out, &req->_msg);
}

/* Pass on up to remaining body bytes of those readable. */
static int emit_content(http_decoder_t *d, eddy_cumulation_t *in, eddy_decoder_out_t *out,
                        bool last_when_done)
{
    size_t n = eddy_cumulation_readable(in);
    if (n > d->remaining) {
        n = (size_t)d->remaining;
    }
    if (n > d->max_chunk) {
        n = d->max_chunk;
    }
    eddy_buf_t *data = eddy_cumulation_read_buf(in, n);
    if (data == NULL) {
        return EDDY_ENOMEM;
    }
    d->remaining -= n;
    eddy_http_content_t *c = eddy_http_content_new(data, last_when_done && d->remaining == 0);
    return c != NULL ? eddy_decoder_emit(out, &c->_msg) : EDDY_ENOMEM;
}

static int hex_value(uint8_t c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A chunk-size line [p, p + n) without its line ending: 0 and *size, or 400. */
static int parse_chunk_size(const uint8_t *p, size_t n, uint64_t *size)
{
    uint64_t v = 0;
    size_t i = 0;
    for (; i < n && hex_value(p[i]) >= 0; i++) {
        if (i >= 15) {
            return 400; /* more than 60 bits of chunk: nobody sends that */
        }
        v = v << 4 | (uint64_t)hex_value(p[i]);
    }
    if (i == 0) {
        return 400;
    }
    while (i < n && (p[i] == ' ' || p[i] == '\t')) {
        i++;
    }
    if (i < n && p[i] != ';') {
        return 400;
    }
    if (!value_ok(p + i, n - i)) {
        return 400;
    }
    *size = v;
    return 0;
}

static int http_decode(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in, eddy_decoder_out_t *out)
{
    (void)ctx;
    http_decoder_t *d = self;
    /* One request per call: the base sees where each ends (message deadlines, in_message). */
    bool done = false;
    for (;;) {
        size_t avail = eddy_cumulation_readable(in);
        if (avail == 0 || done) {
            return 0;
        }
        if (d->state == ST_BAD) {
            return eddy_cumulation_skip(in, avail);
        }
        if (d->state == ST_BODY || d->state == ST_CHUNK_DATA) {
            bool fixed = d->state == ST_BODY;
            int err = emit_content(d, in, out, fixed);
            if (err != 0) {
                return err;
            }
            if (d->remaining == 0) {
                d->state = fixed ? ST_HEAD : ST_CHUNK_END;
                done = fixed;
            }
            continue;
        }
        eddy_buf_t *b = eddy_cumulation_buf(in);
        if (b == NULL) {
            return EDDY_ENOMEM;
        }
        const uint8_t *p = eddy_buf_read_ptr(b);
        switch (d->state) {
        case ST_HEAD: {
            /* Empty lines before a request line are ignored (RFC 9112 section 2.2). */
            size_t skip = 0;
            while (skip < avail && (p[skip] == '\r' || p[skip] == '\n')) {
                skip++;
            }
            if (skip > 0) {
                eddy_cumulation_skip(in, skip);
                d->scan = 0;
                continue;
            }
            if (d->line1 == 0) {
                /* The request line's end, searched from where the last call stopped. */
                size_t look = avail < d->max_line + 2 ? avail : d->max_line + 2;
                const uint8_t *lf =
                    d->scan < look ? memchr(p + d->scan, '\n', look - d->scan) : NULL;
                if (lf == NULL) {
                    d->scan = look;
                    return avail >= d->max_line + 2 ? reject(d, in, out, 414) : 0;
                }
                d->line1 = (size_t)(lf - p) + 1;
                d->scan = 0;
                if (d->line1 > d->max_line + 1 && p[d->line1 - 2] != '\r') {
                    return reject(d, in, out, 414); /* an LF alone ended one byte too late */
                }
            }
            size_t line1 = d->line1;
            size_t n = find_blank_line(p, avail, line1 - 1, &d->scan);
            size_t limit = d->max_header_size + 2; /* + the blank line */
            if (n == 0) {
                return avail - line1 > limit ? reject(d, in, out, 431) : 0;
            }
            if (n - line1 > limit) {
                return reject(d, in, out, 431);
            }
            d->scan = 0;
            d->line1 = 0;
            int err = decode_head(d, in, out, n, line1);
            if (err != 0) {
                return err;
            }
            done = d->state == ST_HEAD; /* no body */
            break;
        }
        case ST_CHUNK_SIZE: {
            size_t look = avail < d->max_line + 2 ? avail : d->max_line + 2;
            const uint8_t *lf = memchr(p, '\n', look);
            if (lf == NULL) {
                return avail >= d->max_line + 2 ? reject(d, in, out, 400) : 0;
            }
            ssize_t len = line_length(p, lf);
            uint64_t size = 0;
            if (len < 0 || parse_chunk_size(p, (size_t)len, &size) != 0) {
                return reject(d, in, out, 400);
            }
            eddy_cumulation_skip(in, (size_t)(lf - p) + 1);
            if (size == 0) {
                d->state = ST_TRAILERS;
                d->scan = 0;
            } else {
                d->state = ST_CHUNK_DATA;
                d->remaining = size;
            }
            break;
        }
        case ST_CHUNK_END:
            if (p[0] == '\n') {
                eddy_cumulation_skip(in, 1);
            } else if (p[0] != '\r') {
                return reject(d, in, out, 400);
            } else if (avail < 2) {
                return 0;
            } else if (p[1] == '\n') {
                eddy_cumulation_skip(in, 2);
            } else {
                return reject(d, in, out, 400);
            }
            d->state = ST_CHUNK_SIZE;
            break;
        case ST_TRAILERS: {
            size_t n = find_blank_line(p, avail, SIZE_MAX, &d->scan);
            if (n == 0) {
                return avail > d->max_header_size + 2 ? reject(d, in, out, 431) : 0;
            }
            if (n > d->max_header_size + 2) {
                return reject(d, in, out, 431);
            }
            /* Trailers are read and dropped: nothing here needs them. */
            eddy_cumulation_skip(in, n);
            d->scan = 0;
            d->state = ST_HEAD;
            eddy_http_content_t *c = eddy_http_content_new(NULL, true);
            if (c == NULL) {
                return EDDY_ENOMEM;
            }
            int err = eddy_decoder_emit(out, &c->_msg);
            if (err != 0) {
                return err;
            }
            done = true;
            break;
        }
        default:
            return EDDY_EDECODE;
        }
    }
}

/* A request is under way from its first byte searched to its last content: the head is
 * searched incrementally and the body passed on in parts. */
static bool http_in_message(const void *self)
{
    const http_decoder_t *d = self;
    return (d->state != ST_HEAD && d->state != ST_BAD) || d->scan > 0 || d->line1 > 0;
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
    d->max_line = o->max_initial_line != 0 ? o->max_initial_line : EDDY_HTTP_MAX_INITIAL_LINE;
    d->max_header_size = o->max_header_size != 0 ? o->max_header_size : EDDY_HTTP_MAX_HEADER_SIZE;
    d->max_header_count =
        o->max_header_count != 0 ? o->max_header_count : EDDY_HTTP_MAX_HEADER_COUNT;
    d->max_chunk = o->max_chunk_size != 0 ? o->max_chunk_size : EDDY_HTTP_MAX_CHUNK_SIZE;
    d->state = ST_HEAD;
    return dec;
}

const eddy_handler_ops_t *eddy_http_request_decoder_ops(void)
{
    return &http_request_decoder_handler;
}
