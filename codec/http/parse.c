/*
 * What the request decoder and the client's response decoder share: finding a head's end,
 * the syntax of header lines, tokens and lengths, and the framing of a body (Content-Length,
 * chunked with trailers, or until the close). Each decoder turns the errors into its own:
 * the request decoder into a rejected request (400, 431), the client into exception_caught.
 */
#include "codec/http/internal.h"

#include <assert.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Heads
 */

size_t eddy__http_find_blank_line(const uint8_t *p, size_t n, size_t from, size_t *scan)
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

void eddy__http_limits_init(eddy__http_limits_t *l, size_t max_line, size_t max_header_size,
                            size_t max_header_count, size_t max_chunk)
{
    l->max_line = max_line != 0 ? max_line : EDDY_HTTP_MAX_INITIAL_LINE;
    l->max_header_size = max_header_size != 0 ? max_header_size : EDDY_HTTP_MAX_HEADER_SIZE;
    l->max_header_count = max_header_count != 0 ? max_header_count : EDDY_HTTP_MAX_HEADER_COUNT;
    l->max_chunk = max_chunk != 0 ? max_chunk : EDDY_HTTP_MAX_CHUNK_SIZE;
}

eddy_http_method_t eddy__http_method_of(const void *s, size_t n)
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
        if (strlen(methods[i].name) == n && memcmp(methods[i].name, s, n) == 0) {
            return methods[i].m;
        }
    }
    return EDDY_HTTP_OTHER;
}

ssize_t eddy__http_head_find(eddy__http_head_scan_t *hs, const eddy__http_limits_t *l,
                             const uint8_t *p, size_t avail, size_t *line1)
{
    size_t max_line = l->max_line;
    if (hs->line1 == 0) {
        /* The first line's end, searched from where the last call stopped. */
        size_t look = avail < max_line + 2 ? avail : max_line + 2;
        const uint8_t *lf = hs->scan < look ? memchr(p + hs->scan, '\n', look - hs->scan) : NULL;
        if (lf == NULL) {
            hs->scan = look;
            return avail >= max_line + 2 ? EDDY__HTTP_LINE_TOO_LONG : 0;
        }
        hs->line1 = (size_t)(lf - p) + 1;
        hs->scan = 0;
        if (hs->line1 > max_line + 1 && p[hs->line1 - 2] != '\r') {
            return EDDY__HTTP_LINE_TOO_LONG; /* an LF alone ended one byte too late */
        }
    }
    size_t first = hs->line1;
    size_t n = eddy__http_find_blank_line(p, avail, first - 1, &hs->scan);
    size_t limit = l->max_header_size + 2; /* + the blank line */
    if (n == 0) {
        return avail - first > limit ? EDDY__HTTP_HEAD_TOO_LONG : 0;
    }
    if (n - first > limit) {
        return EDDY__HTTP_HEAD_TOO_LONG;
    }
    *hs = (eddy__http_head_scan_t){0};
    *line1 = first;
    return (ssize_t)n;
}

ssize_t eddy__http_head_next(eddy__http_head_scan_t *hs, const eddy__http_limits_t *l,
                             eddy_cumulation_t *in, size_t *line1)
{
    for (;;) {
        size_t avail = eddy_cumulation_readable(in);
        if (avail == 0) {
            return 0;
        }
        eddy_buf_t *b = eddy_cumulation_buf(in);
        if (b == NULL) {
            return EDDY_ENOMEM;
        }
        const uint8_t *p = eddy_buf_read_ptr(b);
        /* Empty lines before a message are ignored (RFC 9112 section 2.2). */
        size_t skip = eddy__http_empty_lines(p, avail);
        if (skip == 0) {
            return eddy__http_head_find(hs, l, p, avail, line1);
        }
        assert(skip <= avail);
        eddy_cumulation_skip(in, skip);
        hs->scan = 0;
    }
}

size_t eddy__http_empty_lines(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n && (p[i] == '\r' || p[i] == '\n')) {
        i++;
    }
    return i;
}

size_t eddy__http_header_lines(const uint8_t *p, size_t n, size_t line1, const uint8_t **begin,
                               const uint8_t **end)
{
    /* The blank line's LF is the last byte, its CR maybe the one before. */
    assert(line1 <= n && p[n - 1] == '\n'); /* a whole head, its blank line last */
    const uint8_t *e = p + n - 1;
    if (e > p + line1 && e[-1] == '\r') {
        e--;
    }
    *begin = p + line1;
    *end = e;
    return eddy__http_count_lines(p + line1, p + n) - 1; /* every LF but the blank line's */
}

/* RFC 9110 tchar: what tokens (methods, header names) are made of. */
static bool is_tchar(uint8_t c)
{
    /* A bitmap of ALPHA, DIGIT and !#$%&'*+-.^_`|~ (codes below 128): a header line's name is
     * checked a byte at a time, so this is on every response's and request's path. */
    static const uint64_t tchars[2] = {0x03ff6cfa00000000u, 0x57ffffffc7fffffeu};
    return c < 128 && (tchars[c >> 6] >> (c & 63) & 1) != 0;
}

bool eddy__http_is_token(const void *s, size_t n)
{
    const uint8_t *p = s;
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

ssize_t eddy__http_line_length(const uint8_t *p, const uint8_t *lf)
{
    size_t n = (size_t)(lf - p);
    if (n > 0 && p[n - 1] == '\r') {
        n--;
    }
    return memchr(p, '\r', n) != NULL ? -1 : (ssize_t)n;
}

bool eddy__http_value_ok(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f) {
            return false;
        }
    }
    return true;
}

size_t eddy__http_count_lines(const uint8_t *p, const uint8_t *end)
{
    size_t lines = 0;
    for (const uint8_t *c = p; (c = memchr(c, '\n', (size_t)(end - c)));) {
        c++;
        lines++;
    }
    return lines;
}

int eddy__http_parse_length(eddy_http_str_t v, int64_t *out)
{
    int64_t first = -1;
    const char *p = v.p, *end = v.p + v.len;
    do {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        eddy_http_str_t t =
            eddy__http_trim((eddy_http_str_t){p, (size_t)((comma != NULL ? comma : end) - p)});
        if (t.len == 0 || t.len > 18) {
            return EDDY_EDECODE; /* empty, or past what 63 bits surely hold */
        }
        int64_t n = 0;
        for (size_t i = 0; i < t.len; i++) {
            if (t.p[i] < '0' || t.p[i] > '9') {
                return EDDY_EDECODE;
            }
            n = n * 10 + (t.p[i] - '0');
        }
        if (first >= 0 && n != first) {
            return EDDY_EDECODE;
        }
        first = n;
        p = comma != NULL ? comma + 1 : end;
    } while (p < end);
    *out = first;
    return 0;
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

static void connection_token(eddy_http_str_t t, void *arg)
{
    eddy__http_head_info_t *h = arg;
    if (eddy_http_str_eq_nocase(t, "close")) {
        h->conn_close = true;
    } else if (eddy_http_str_eq_nocase(t, "keep-alive")) {
        h->conn_keep_alive = true;
    }
}

static void te_token(eddy_http_str_t t, void *arg)
{
    eddy__http_head_info_t *h = arg;
    if (t.len == 0) {
        return; /* empty list elements are allowed (RFC 9110 section 5.6.1) */
    }
    bool chunked = eddy_http_str_eq_nocase(t, "chunked");
    h->te_chunked += chunked;
    h->te_chunked_last = chunked;
    h->te_other |= !chunked;
}

/* The first byte from p on that may not be in a field value: a control byte but HT (CR and
 * LF among them) or DEL; end when none. Eight bytes at a time while they are all plain (the
 * values are most of a head's bytes): a byte below 0x20 or equal to 0x7f sets its top bit in
 * ((x - 0x20..) & ~x) or in the zero test of x ^ 0x7f..; a lone HT makes the slow path look. */
static const uint8_t *skip_field_bytes(const uint8_t *p, const uint8_t *end)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    while (end - p >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        uint64_t del = x ^ (0x7f * ones);
        if ((((x - 0x20 * ones) & ~x) | ((del - ones) & ~del)) & highs) {
            break;
        }
        p += 8;
    }
    while (p < end && ((*p >= 0x20 && *p != 0x7f) || *p == '\t')) {
        p++;
    }
    return p;
}

/* One header line at p, in one pass: a token, ':', blanks, the value (no control byte but
 * HT), blanks, then CRLF or LF. The byte after the line, or NULL when it is malformed: no
 * name, a blank before the colon or a line starting with one (obs-fold, RFC 9112 section
 * 5.2), a bare CR. The head's blank line ends every line, so the LF is there to find. */
static const uint8_t *header_line(const uint8_t *p, const uint8_t *end, eddy_http_str_t *name,
                                  eddy_http_str_t *value)
{
    const uint8_t *q = p;
    while (q < end && is_tchar(*q)) {
        q++;
    }
    if (q == p || q == end || *q != ':') {
        return NULL;
    }
    *name = (eddy_http_str_t){(const char *)p, (size_t)(q - p)};
    q++;
    while (q < end && (*q == ' ' || *q == '\t')) {
        q++;
    }
    const uint8_t *v = q;
    q = skip_field_bytes(q, end);
    if (q < end && *q != '\r' && *q != '\n') {
        return NULL; /* a control byte */
    }
    const uint8_t *v_end = q;
    while (v_end > v && (v_end[-1] == ' ' || v_end[-1] == '\t')) {
        v_end--;
    }
    if (q < end && *q == '\r') {
        q++;
    }
    if (q == end || *q != '\n') {
        return NULL;
    }
    *value = (eddy_http_str_t){(const char *)v, (size_t)(v_end - v)};
    return q + 1;
}

int eddy__http_parse_headers(const uint8_t *p, const uint8_t *end, eddy_http_header_t *headers,
                             size_t *count, eddy__http_head_info_t *h)
{
    while (p < end) {
        eddy_http_str_t name, value;
        const uint8_t *next = header_line(p, end, &name, &value);
        if (next == NULL) {
            return EDDY_EDECODE;
        }
        eddy_http_header_t *hd = &headers[(*count)++];
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
                h->expect_continue = true;
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
                if (eddy__http_parse_length(value, &n) != 0 ||
                    (h->has_length && n != h->content_length)) {
                    return EDDY_EDECODE;
                }
                h->has_length = true;
                h->content_length = n;
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
        p = next;
    }
    return 0;
}

bool eddy__http_keep_alive(int version, const eddy__http_head_info_t *h)
{
    return version == 11 ? !h->conn_close : h->conn_keep_alive && !h->conn_close;
}

int eddy__http_head_decode(eddy_cumulation_t *in, size_t n, size_t line1, size_t max_count,
                           bool response, eddy__http_head_t *h)
{
    assert(line1 > 0 && line1 <= n); /* eddy__http_head_find() measured both */
    *h = (eddy__http_head_t){0};
    eddy_buf_t *head = eddy_cumulation_read_buf(in, n);
    if (head == NULL) {
        return EDDY_ENOMEM;
    }
    const uint8_t *p = eddy_buf_read_ptr(head);
    const uint8_t *lines, *end;
    size_t count = eddy__http_header_lines(p, n, line1, &lines, &end);
    if (count > max_count) {
        eddy_buf_release(head);
        return EDDY_ETOOLONGFRAME;
    }
    if ((h->msg = eddy__http_message_new(response, count)) == NULL) {
        eddy_buf_release(head);
        return EDDY_ENOMEM;
    }
    /* The message owns the bytes from here: its strings point into them. */
    eddy_http_response_t *r = response ? eddy_http_response_of(h->msg) : NULL;
    eddy_http_request_t *req = response ? NULL : eddy_http_request_of(h->msg);
    eddy_http_header_t *headers = r != NULL ? r->headers : req->headers;
    size_t *used = r != NULL ? &r->header_count : &req->header_count;
    *(r != NULL ? &r->_head : &req->_head) = head;
    ssize_t len = eddy__http_line_length(p, p + line1 - 1);
    h->line = (eddy_http_str_t){len < 0 ? NULL : (const char *)p, len < 0 ? 0 : (size_t)len};
    int err = eddy__http_parse_headers(lines, end, headers, used, &h->info);
    assert(*used <= count); /* a slot for each line, counted above */
    return err;
}

/* ---------------------------------------------------------------------------------------
 * Bodies
 */

/* Pass on up to remaining body bytes of those readable, at most max_chunk of them. */
static int emit_content(eddy__http_body_t *b, const eddy__http_limits_t *l, eddy_cumulation_t *in,
                        eddy_decoder_out_t *out, bool last_when_done)
{
    size_t n = eddy_cumulation_readable(in);
    if (n > b->remaining) {
        n = (size_t)b->remaining;
    }
    if (n > l->max_chunk) {
        n = l->max_chunk;
    }
    eddy_buf_t *data = eddy_cumulation_read_buf(in, n);
    if (data == NULL) {
        return EDDY_ENOMEM;
    }
    b->remaining -= n;
    eddy_http_content_t *c = eddy_http_content_new(data, last_when_done && b->remaining == 0);
    return c != NULL ? eddy_decoder_emit(out, &c->_msg) : EDDY_ENOMEM;
}

static int emit_last(eddy_decoder_out_t *out)
{
    eddy_http_content_t *c = eddy_http_content_new(NULL, true);
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

/* A chunk-size line [p, p + n) without its line ending: 0 and *size, or EDDY_EDECODE. */
static int parse_chunk_size(const uint8_t *p, size_t n, uint64_t *size)
{
    uint64_t v = 0;
    size_t i = 0;
    for (; i < n && hex_value(p[i]) >= 0; i++) {
        if (i >= 15) {
            return EDDY_EDECODE; /* more than 60 bits of chunk: nobody sends that */
        }
        v = v << 4 | (uint64_t)hex_value(p[i]);
    }
    if (i == 0) {
        return EDDY_EDECODE;
    }
    while (i < n && (p[i] == ' ' || p[i] == '\t')) {
        i++;
    }
    if (i < n && p[i] != ';') {
        return EDDY_EDECODE;
    }
    if (!eddy__http_value_ok(p + i, n - i)) {
        return EDDY_EDECODE;
    }
    *size = v;
    return 0;
}

void eddy__http_body_start(eddy__http_body_t *b, int state, uint64_t length)
{
    /* A length or a chunk's data has bytes to come (the other states ignore length). */
    assert(state != EDDY__HTTP_BODY_NONE);
    assert((state != EDDY__HTTP_BODY_LENGTH && state != EDDY__HTTP_BODY_CHUNK_DATA) || length > 0);
    b->state = state;
    b->remaining = length;
    b->scan = 0;
}

/* One step of chunked framing on the readable bytes at p: 0 (progress made, or *wait when
 * more bytes are needed) or an error. */
static int chunk_step(eddy__http_body_t *b, const eddy__http_limits_t *l, eddy_cumulation_t *in,
                      eddy_decoder_out_t *out, const uint8_t *p, size_t avail, bool *wait)
{
    switch (b->state) {
    case EDDY__HTTP_BODY_CHUNK_SIZE: {
        size_t look = avail < l->max_line + 2 ? avail : l->max_line + 2;
        const uint8_t *lf = memchr(p, '\n', look);
        if (lf == NULL) {
            /* A chunk-size line this long is no framing anyone sends: malformed. */
            *wait = true;
            return avail >= l->max_line + 2 ? EDDY_EDECODE : 0;
        }
        ssize_t len = eddy__http_line_length(p, lf);
        uint64_t size = 0;
        if (len < 0 || parse_chunk_size(p, (size_t)len, &size) != 0) {
            return EDDY_EDECODE;
        }
        eddy_cumulation_skip(in, (size_t)(lf - p) + 1);
        if (size == 0) {
            eddy__http_body_start(b, EDDY__HTTP_BODY_TRAILERS, 0);
        } else {
            eddy__http_body_start(b, EDDY__HTTP_BODY_CHUNK_DATA, size);
        }
        return 0;
    }
    case EDDY__HTTP_BODY_CHUNK_END:
        if (p[0] == '\n') {
            eddy_cumulation_skip(in, 1);
        } else if (p[0] != '\r') {
            return EDDY_EDECODE;
        } else if (avail < 2) {
            *wait = true;
            return 0;
        } else if (p[1] == '\n') {
            eddy_cumulation_skip(in, 2);
        } else {
            return EDDY_EDECODE;
        }
        b->state = EDDY__HTTP_BODY_CHUNK_SIZE;
        return 0;
    case EDDY__HTTP_BODY_TRAILERS: {
        size_t n = eddy__http_find_blank_line(p, avail, SIZE_MAX, &b->scan);
        if (n == 0) {
            *wait = true;
            return avail > l->max_header_size + 2 ? EDDY_ETOOLONGFRAME : 0;
        }
        if (n > l->max_header_size + 2) {
            return EDDY_ETOOLONGFRAME;
        }
        /* Trailers are read and dropped: nothing here needs them. */
        eddy_cumulation_skip(in, n);
        b->state = EDDY__HTTP_BODY_NONE;
        return emit_last(out);
    }
    default:
        return EDDY_EDECODE;
    }
}

int eddy__http_body_decode(eddy__http_body_t *b, const eddy__http_limits_t *l,
                           eddy_cumulation_t *in, eddy_decoder_out_t *out)
{
    for (;;) {
        size_t avail = eddy_cumulation_readable(in);
        if (avail == 0 || b->state == EDDY__HTTP_BODY_NONE) {
            return 0;
        }
        int err = 0;
        switch (b->state) {
        case EDDY__HTTP_BODY_LENGTH:
        case EDDY__HTTP_BODY_CHUNK_DATA: {
            bool fixed = b->state == EDDY__HTTP_BODY_LENGTH;
            err = emit_content(b, l, in, out, fixed);
            if (err == 0 && b->remaining == 0) {
                b->state = fixed ? EDDY__HTTP_BODY_NONE : EDDY__HTTP_BODY_CHUNK_END;
            }
            break;
        }
        case EDDY__HTTP_BODY_UNTIL_CLOSE:
            b->remaining = UINT64_MAX; /* until the close: every byte is the body's */
            err = emit_content(b, l, in, out, false);
            break;
        default: {
            eddy_buf_t *buf = eddy_cumulation_buf(in);
            if (buf == NULL) {
                return EDDY_ENOMEM;
            }
            bool wait = false;
            err = chunk_step(b, l, in, out, eddy_buf_read_ptr(buf), avail, &wait);
            if (err == 0 && wait) {
                return 0;
            }
            break;
        }
        }
        if (err != 0) {
            return err;
        }
    }
}

int eddy__http_body_finish(eddy__http_body_t *b, const eddy__http_limits_t *l,
                           eddy_cumulation_t *in, eddy_decoder_out_t *out)
{
    if (b->state != EDDY__HTTP_BODY_UNTIL_CLOSE) {
        return b->state == EDDY__HTTP_BODY_NONE ? 0 : EDDY_EOF;
    }
    int err = eddy__http_body_decode(b, l, in, out);
    if (err != 0) {
        return err;
    }
    b->state = EDDY__HTTP_BODY_NONE;
    return emit_last(out);
}
