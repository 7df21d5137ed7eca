/*
 * HTTP messages: the one request and the one response, decoded or built, content pieces, and
 * the encoding of a built request and a built response. A decoded message points into the
 * head it came in; a built one into the head its setters render, as the encoder writes it.
 */
#include "codec/http/internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Strings
 */

static uint8_t lower(uint8_t c)
{
    return c >= 'A' && c <= 'Z' ? (uint8_t)(c | 0x20) : c;
}

bool eddy_http_str_eq_nocase(eddy_http_str_t s, const char *lit)
{
    size_t n = strlen(lit);
    if (s.len != n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (lower((uint8_t)s.p[i]) != lower((uint8_t)lit[i])) {
            return false;
        }
    }
    return true;
}

bool eddy_http_str_eq(eddy_http_str_t s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.p, lit, n) == 0;
}

eddy_http_str_t eddy__http_trim(eddy_http_str_t s)
{
    while (s.len > 0 && (s.p[0] == ' ' || s.p[0] == '\t')) {
        s.p++;
        s.len--;
    }
    while (s.len > 0 && (s.p[s.len - 1] == ' ' || s.p[s.len - 1] == '\t')) {
        s.len--;
    }
    return s;
}

/* ---------------------------------------------------------------------------------------
 * What requests and responses share: one block, its parts freed, a built head's headers
 */

/* Header slots a built message has in its own block before it needs an array of its own: the
 * responses eddy-http-server writes add two or three. */
#define BUILT_SLOTS 8

/* Whether msg is not NULL and of one of the three types a message kind has. */
static bool is_one_of(const eddy_msg_t *msg, uint32_t a, uint32_t b, uint32_t c)
{
    return msg != NULL && (msg->type == a || msg->type == b || msg->type == c);
}

static void message_free(eddy_msg_t *msg);

eddy_msg_t *eddy__http_message_new(bool response, size_t count)
{
    return eddy__http_message_new_bytes(response, count, 0);
}

eddy_msg_t *eddy__http_message_new_bytes(bool response, size_t count, size_t bytes)
{
    /* One block: the message, then its header slots (the struct's size keeps them aligned),
     * then the bytes. */
    size_t size = response ? sizeof(eddy_http_response_t) : sizeof(eddy_http_request_t);
    if (count > (SIZE_MAX - size) / sizeof(eddy_http_header_t) ||
        bytes > SIZE_MAX - size - count * sizeof(eddy_http_header_t)) {
        return NULL;
    }
    char *m = malloc(size + count * sizeof(eddy_http_header_t) + bytes);
    if (m == NULL) {
        return NULL;
    }
    eddy_http_header_t *slots = (eddy_http_header_t *)(m + size);
    eddy_msg_t *msg;
    if (response) {
        eddy_http_response_t *r = (eddy_http_response_t *)m;
        *r = (eddy_http_response_t){.version = 11, .content_length = -1, .headers = slots};
        msg = &r->_msg;
    } else {
        eddy_http_request_t *r = (eddy_http_request_t *)m;
        *r = (eddy_http_request_t){.version = 11, .content_length = -1, .headers = slots};
        msg = &r->_msg;
    }
    eddy_msg_init(msg, response ? EDDY_MSG_HTTP_RESPONSE_HEAD : EDDY_MSG_HTTP_REQUEST,
                  message_free);
    return msg;
}

static void release_parts(eddy_http_response_t *r)
{
    for (size_t i = 0; i < r->_nparts; i++) {
        eddy_msg_release(r->_parts[i]);
    }
    free(r->_parts);
    r->_parts = NULL;
    r->_nparts = r->_parts_cap = 0;
}

/* What a request or a response owns, freed with it: whichever it is, by its type. */
static void message_free(eddy_msg_t *msg)
{
    eddy_http_response_t *r = eddy_http_response_of(msg);
    eddy_http_request_t *req = r == NULL ? eddy_http_request_of(msg) : NULL;
    assert(r != NULL || req != NULL); /* the types change, never the kind */
    eddy_buf_t *parts[] = {r != NULL ? r->_head : req->_head, r != NULL ? r->body : req->body};
    for (size_t i = 0; i < 2; i++) {
        if (parts[i] != NULL) {
            eddy_buf_release(parts[i]);
        }
    }
    if (r != NULL) {
        release_parts(r);
    }
    eddy_http_header_t *headers = r != NULL ? r->headers : req->headers;
    size_t size = r != NULL ? sizeof(*r) : sizeof(*req);
    if (headers != (eddy_http_header_t *)((char *)msg + size)) {
        free(headers); /* a built message's slots, grown out of its block */
    }
    free(msg);
}

static void replace_body(eddy_buf_t **slot, eddy_buf_t *b)
{
    if (*slot != NULL) {
        eddy_buf_release(*slot);
    }
    *slot = b;
}

/* What a built message's setters keep in step: its head's bytes (the header lines from
 * offset lines on) and the header slots that point into them. */
typedef struct built_s {
    eddy_buf_t **head;
    size_t lines;
    eddy_http_header_t **headers;
    size_t *count;
    size_t *cap;
    size_t block; /* the message's size: its first slots follow it (eddy__http_message_new()) */
} built_t;

/* Point count slots at the header lines from p on, "Name: value\r\n" each, as built_add()
 * writes them: the value is what was given, blanks and all. */
static void index_lines(const char *p, const char *end, eddy_http_header_t *h, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        assert(colon != NULL && end - colon >= 4); /* built_add() wrote ": " and "\r\n" */
        const char *cr = memchr(colon, '\r', (size_t)(end - colon));
        assert(cr != NULL && cr[1] == '\n');
        h[i].name = (eddy_http_str_t){p, (size_t)(colon - p)};
        h[i].value = (eddy_http_str_t){colon + 2, (size_t)(cr - colon - 2)};
        p = cr + 2;
    }
    assert(p == end); /* one slot a line, no line left over */
}

/* Room for want slots in b's array: 0 or EDDY_ENOMEM (the array as it was). */
static int built_reserve(const built_t *b, void *m, size_t want)
{
    if (want <= *b->cap) {
        return 0;
    }
    size_t cap = *b->cap * 2 >= want ? *b->cap * 2 : want;
    eddy_http_header_t *inline_slots = (eddy_http_header_t *)((char *)m + b->block);
    eddy_http_header_t *v = *b->headers == inline_slots ? malloc(cap * sizeof(*v))
                                                        : realloc(*b->headers, cap * sizeof(*v));
    if (v == NULL) {
        return EDDY_ENOMEM;
    }
    if (*b->headers == inline_slots) {
        memcpy(v, inline_slots, *b->count * sizeof(*v));
    }
    *b->headers = v;
    *b->cap = cap;
    return 0;
}

static int add_checked(eddy_msg_t *msg, const char *name, const char *value);

/* Whether name is a token, value has no CR or LF (nor NUL: it ends there), and name is none
 * of the framing headers the encoder writes itself (expect too for a request). */
static bool header_ok(const char *name, const char *value, bool request)
{
    eddy_http_str_t n = {name, strlen(name)};
    return eddy__http_is_token(name, n.len) && strpbrk(value, "\r\n") == NULL &&
           !eddy_http_str_eq_nocase(n, "content-length") &&
           !eddy_http_str_eq_nocase(n, "transfer-encoding") &&
           !eddy_http_str_eq_nocase(n, "connection") &&
           !(request && eddy_http_str_eq_nocase(n, "expect"));
}

/* Append "name: value\r\n" to the built message m and a slot for it; when the head's bytes
 * moved, every slot is pointed at them again. 0 or EDDY_ENOMEM (nothing changed). */
static int built_add(const built_t *b, void *m, const char *name, const char *value)
{
    size_t nlen = strlen(name), vlen = strlen(value);
    if (built_reserve(b, m, *b->count + 1) != 0) {
        return EDDY_ENOMEM;
    }
    if (*b->head == NULL && (*b->head = eddy_buf_new(256)) == NULL) {
        return EDDY_ENOMEM;
    }
    eddy_buf_t *head = *b->head;
    uintptr_t was = (uintptr_t)eddy_buf_read_ptr(head);
    size_t before = eddy_buf_writer_index(head);
    int err = eddy_buf_ensure_writable(head, nlen + vlen + 4);
    if (err != 0) {
        eddy_buf_set_writer_index(head, before);
        return err;
    }
    eddy_buf_write_bytes(head, name, nlen);
    eddy_buf_write_bytes(head, ": ", 2);
    eddy_buf_write_bytes(head, value, vlen);
    eddy_buf_write_bytes(head, "\r\n", 2);
    const char *p = (const char *)eddy_buf_read_ptr(head);
    const char *end = p + eddy_buf_readable(head);
    if ((uintptr_t)p == was) {
        index_lines(end - nlen - vlen - 4, end, *b->headers + *b->count, 1);
    } else {
        index_lines(p + b->lines, end, *b->headers, *b->count + 1);
    }
    ++*b->count;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Requests
 */

static bool request_built(const eddy_http_request_t *r)
{
    return r->_msg.type == EDDY_MSG_HTTP_CLIENT_REQUEST;
}

/* The parts of the built request r its setters keep in step. */
static built_t request_parts(eddy_http_request_t *r)
{
    assert(request_built(r) && r->_head != NULL);
    /* The header lines follow the request line. */
    size_t lines =
        (size_t)(r->target.p + r->target.len + 11 - (const char *)eddy_buf_read_ptr(r->_head));
    return (built_t){&r->_head, lines, &r->headers, &r->header_count, &r->_header_cap, sizeof(*r)};
}

/* Whether target may go on a request line: not empty, nothing that ends or breaks it. */
static bool target_ok(const char *target, size_t tlen)
{
    if (tlen == 0) {
        return false;
    }
    for (size_t i = 0; i < tlen; i++) {
        if ((uint8_t)target[i] <= 0x20 || target[i] == 0x7f) {
            return false;
        }
    }
    return true;
}

/* A head buffer holding the request line as HTTP/1.1 (the encoder writes the version digit
 * as r->version says), with room for extra bytes of headers. NULL without memory. */
static eddy_buf_t *request_line(const char *method, size_t mlen, const char *target, size_t tlen,
                                size_t extra)
{
    eddy_buf_t *b = eddy_buf_new(mlen + tlen + 12 + extra);
    if (b != NULL) {
        eddy_buf_write_bytes(b, method, mlen);
        eddy_buf_write_bytes(b, " ", 1);
        eddy_buf_write_bytes(b, target, tlen);
        eddy_buf_write_bytes(b, " HTTP/1.1\r\n", 11);
    }
    return b;
}

/* Point r's method_name and target at its head's request line; returns where its header
 * lines begin. */
static const char *request_point_line(eddy_http_request_t *r)
{
    const char *p = (const char *)eddy_buf_read_ptr(r->_head);
    size_t n = eddy_buf_readable(r->_head);
    const char *sp = memchr(p, ' ', n);
    const char *eol = memchr(p, '\n', n);
    assert(sp != NULL && eol != NULL && sp < eol); /* request_line() wrote it */
    r->method_name = (eddy_http_str_t){p, (size_t)(sp - p)};
    r->target = (eddy_http_str_t){sp + 1, (size_t)(eol - 10 - (sp + 1))}; /* " HTTP/1.1\r" */
    return eol + 1;
}

/* Take head (request_line() and header_count lines) as r's, its strings pointed into it. */
static void request_set_head(eddy_http_request_t *r, eddy_buf_t *head)
{
    if (r->_head != NULL) {
        eddy_buf_release(r->_head);
    }
    r->_head = head;
    const char *lines = request_point_line(r);
    index_lines(lines, (const char *)eddy_buf_read_ptr(head) + eddy_buf_readable(head), r->headers,
                r->header_count);
}

eddy_http_request_t *eddy_http_request_new(const char *method, const char *target)
{
    size_t mlen = method != NULL ? strlen(method) : 0;
    size_t tlen = target != NULL ? strlen(target) : 0;
    if (!eddy__http_is_token(method, mlen) || !target_ok(target, tlen)) {
        return NULL;
    }
    eddy_http_request_t *r = eddy_http_request_of(eddy__http_message_new(false, BUILT_SLOTS));
    eddy_buf_t *head = r != NULL ? request_line(method, mlen, target, tlen, 128) : NULL;
    if (head == NULL) {
        free(r);
        return NULL;
    }
    r->_msg.type = EDDY_MSG_HTTP_CLIENT_REQUEST;
    r->_header_cap = BUILT_SLOTS;
    r->method = eddy__http_method_of(method, mlen);
    r->keep_alive = true;
    request_set_head(r, head);
    return r;
}

int eddy__http_client_request_route(eddy_http_request_t *r, const char *target,
                                    const char *authority)
{
    size_t tlen = strlen(target), alen = strlen(authority);
    if (!request_built(r) || !target_ok(target, tlen)) {
        return EDDY_EINVAL;
    }
    built_t b = request_parts(r);
    bool host = eddy_http_request_header(r, "host") == NULL;
    if (host && built_reserve(&b, r, r->header_count + 1) != 0) {
        return EDDY_ENOMEM;
    }
    const char *old = (const char *)eddy_buf_read_ptr(r->_head);
    const char *headers = old + b.lines;
    size_t hn = eddy_buf_readable(r->_head) - b.lines;
    eddy_buf_t *head = request_line(r->method_name.p, r->method_name.len, target, tlen,
                                    hn + (host ? alen + 8 : 0));
    if (head == NULL) {
        return EDDY_ENOMEM;
    }
    if (host) {
        eddy_buf_write_bytes(head, "Host: ", 6);
        eddy_buf_write_bytes(head, authority, alen);
        eddy_buf_write_bytes(head, "\r\n", 2);
        r->header_count++;
    }
    eddy_buf_write_bytes(head, headers, hn);
    request_set_head(r, head);
    return 0;
}

int eddy_http_request_add_header(eddy_http_request_t *r, const char *name, const char *value)
{
    return header_ok(name, value, true) ? add_checked(&r->_msg, name, value) : EDDY_EINVAL;
}

uint64_t eddy__http_part_length(eddy_msg_t *msg)
{
    if (msg->type == EDDY_MSG_CHUNKED) {
        return 0; /* not known: the response is streamed */
    }
    eddy_file_region_t *fr = eddy_file_region_of(msg);
    return fr != NULL ? eddy_file_region_remaining(fr) : eddy_buf_readable(eddy_buf_of(msg));
}

/* Room for one more part in r: 0 or EDDY_ENOMEM. */
static int parts_grow(eddy_http_response_t *r)
{
    if (r->_nparts < r->_parts_cap) {
        return 0;
    }
    size_t cap = r->_parts_cap != 0 ? 2 * r->_parts_cap : 4;
    eddy_msg_t **p = realloc(r->_parts, cap * sizeof(*p));
    if (p == NULL) {
        return EDDY_ENOMEM;
    }
    r->_parts = p;
    r->_parts_cap = cap;
    return 0;
}

/* Whether msg may join r's parts: a buffer or a region, or a chunked input alone. */
static bool part_fits(const eddy_http_response_t *r, const eddy_msg_t *msg)
{
    if (r->_msg.type != EDDY_MSG_HTTP_RESPONSE || r->body != NULL || r->chunked ||
        r->_streamed) {
        return false;
    }
    return msg->type == EDDY_MSG_BUF || msg->type == EDDY_MSG_FILE_REGION ||
           (msg->type == EDDY_MSG_CHUNKED && r->_nparts == 0 && r->_parts_len == 0);
}

int eddy_http_response_add_body(eddy_http_response_t *r, eddy_msg_t *msg)
{
    int err = part_fits(r, msg) ? parts_grow(r) : EDDY_EINVAL;
    if (err != 0) {
        eddy_msg_release(msg);
        return err;
    }
    if (r->head_only && msg->type != EDDY_MSG_CHUNKED) {
        /* Only its length is ever written: let it go now, so that a HEAD answer queued
         * behind others (pipelined to a peer not reading) holds no file open. */
        r->_parts_len += eddy__http_part_length(msg);
        eddy_msg_release(msg);
        return 0;
    }
    r->_parts[r->_nparts++] = msg;
    r->_parts_len += eddy__http_part_length(msg);
    r->_streamed = msg->type == EDDY_MSG_CHUNKED;
    return 0;
}

uint64_t eddy_http_response_body_length(const eddy_http_response_t *r)
{
    return r->body != NULL ? eddy_buf_readable(r->body) : r->_parts_len;
}

void eddy__http_response_stream_parts(eddy_http_response_t *r, eddy_msg_t *input,
                                      eddy_msg_t **out)
{
    assert(input->type == EDDY_MSG_CHUNKED && r->_nparts > 0 && !r->_streamed);
    memcpy(out, r->_parts, r->_nparts * sizeof(*out));
    r->_parts[0] = input;
    r->_nparts = 1;
    r->_parts_len = 0;
    r->_streamed = true;
}

eddy_msg_t **eddy__http_response_take_parts(eddy_http_response_t *r, size_t *n)
{
    eddy_msg_t **parts = r->_parts;
    *n = r->_nparts;
    r->_parts = NULL;
    r->_nparts = r->_parts_cap = 0;
    return parts;
}

void eddy_http_request_set_body(eddy_http_request_t *r, eddy_buf_t *b)
{
    replace_body(&r->body, b);
}

void eddy_http_request_expect(eddy_http_request_t *r, bool on)
{
    r->expect_continue = on;
}

eddy_msg_t *eddy_http_request_msg(eddy_http_request_t *r)
{
    return &r->_msg;
}

eddy_http_request_t *eddy_http_request_of(eddy_msg_t *msg)
{
    return is_one_of(msg, EDDY_MSG_HTTP_REQUEST, EDDY_MSG_HTTP_FULL_REQUEST,
                     EDDY_MSG_HTTP_CLIENT_REQUEST)
               ? EDDY_CONTAINER_OF(msg, eddy_http_request_t, _msg)
               : NULL;
}

const eddy_http_header_t *eddy_http_request_header(const eddy_http_request_t *req, const char *name)
{
    return eddy__http_header_find(req->headers, req->header_count, name);
}

const eddy_http_header_t *eddy__http_header_find(const eddy_http_header_t *h, size_t n,
                                                 const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (eddy_http_str_eq_nocase(h[i].name, name)) {
            return &h[i];
        }
    }
    return NULL;
}

size_t eddy__http_client_request_body_len(const eddy_http_request_t *r)
{
    return r->chunked || r->body == NULL ? 0 : eddy_buf_readable(r->body);
}

bool eddy__http_client_request_expects(const eddy_http_request_t *r)
{
    /* RFC 9110 section 10.1.1: no 100-continue expectation without content. */
    return r->expect_continue && (r->chunked || eddy__http_client_request_body_len(r) > 0);
}

/* Methods whose requests carry content by definition: an empty one says so with
 * "Content-Length: 0" (RFC 9110 section 8.6); the others send no length when empty. */
static bool expects_content(eddy_http_method_t m)
{
    return m == EDDY_HTTP_POST || m == EDDY_HTTP_PUT || m == EDDY_HTTP_PATCH;
}

size_t eddy__http_client_request_head_size(const eddy_http_request_t *r)
{
    return eddy_buf_readable(r->_head) + 128; /* the framing lines add at most 100 bytes */
}

/* "Connection: close" when keep_alive is off, "Connection: keep-alive" for a 1.0 message
 * that stays open: the line both encoders write. */
static void write_connection(eddy_buf_t *out, bool keep_alive, int version)
{
    if (!keep_alive) {
        eddy_buf_write_bytes(out, "Connection: close\r\n", 19);
    } else if (version == 10) {
        eddy_buf_write_bytes(out, "Connection: keep-alive\r\n", 24);
    }
}

/* Decimal digits of v into end's left; returns where they start. */
static char *format_u64(char *end, uint64_t v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    return end;
}

static void write_length(eddy_buf_t *out, uint64_t n)
{
    char num[24];
    char *s = format_u64(num + sizeof(num), n);
    eddy_buf_write_bytes(out, "Content-Length: ", 16);
    eddy_buf_write_bytes(out, s, (size_t)(num + sizeof(num) - s));
    eddy_buf_write_bytes(out, "\r\n", 2);
}

int eddy__http_client_request_encode_head(const eddy_http_request_t *r, eddy_buf_t *out)
{
    assert(request_built(r));
    int err = eddy_buf_ensure_writable(out, eddy__http_client_request_head_size(r));
    if (err != 0) {
        return err;
    }
    const uint8_t *h = eddy_buf_read_ptr(r->_head);
    size_t hn = eddy_buf_readable(r->_head);
    const uint8_t *lf = memchr(h, '\n', hn);
    size_t line = (size_t)(lf - h) + 1; /* "... HTTP/1.1\r\n" */
    eddy_buf_write_bytes(out, h, line - 3);
    eddy_buf_write_bytes(out, r->version == 10 ? "0\r\n" : "1\r\n", 3);
    eddy_buf_write_bytes(out, h + line, hn - line);
    size_t body = eddy__http_client_request_body_len(r);
    if (r->chunked) {
        eddy_buf_write_bytes(out, "Transfer-Encoding: chunked\r\n", 28);
    } else if (body > 0 || expects_content(r->method)) {
        write_length(out, body);
    }
    write_connection(out, r->keep_alive, r->version);
    if (eddy__http_client_request_expects(r)) {
        eddy_buf_write_bytes(out, "Expect: 100-continue\r\n", 22);
    }
    eddy_buf_write_bytes(out, "\r\n", 2);
    return 0;
}

int eddy_http_request_encode(const eddy_http_request_t *r, eddy_buf_t *out)
{
    if (!request_built(r)) {
        return EDDY_EINVAL;
    }
    size_t body = eddy__http_client_request_body_len(r);
    int err = eddy_buf_ensure_writable(out, eddy__http_client_request_head_size(r) + body);
    if (err == 0) {
        err = eddy__http_client_request_encode_head(r, out);
    }
    if (err == 0 && body > 0) {
        err = eddy_buf_write_bytes(out, eddy_buf_read_ptr(r->body), body);
    }
    return err;
}

/* ---------------------------------------------------------------------------------------
 * Content
 */

static void content_free(eddy_msg_t *msg)
{
    eddy_http_content_t *c = EDDY_CONTAINER_OF(msg, eddy_http_content_t, _msg);
    if (c->data != NULL) {
        eddy_buf_release(c->data);
    }
    free(c);
}

eddy_http_content_t *eddy_http_content_new(eddy_buf_t *data, bool last)
{
    eddy_http_content_t *c = malloc(sizeof(*c));
    if (c == NULL) {
        if (data != NULL) {
            eddy_buf_release(data);
        }
        return NULL;
    }
    eddy_msg_init(&c->_msg, EDDY_MSG_HTTP_CONTENT, content_free);
    c->data = data;
    c->last = last;
    return c;
}

eddy_http_content_t *eddy_http_content_of(eddy_msg_t *msg)
{
    if (msg == NULL || msg->type != EDDY_MSG_HTTP_CONTENT) {
        return NULL;
    }
    return EDDY_CONTAINER_OF(msg, eddy_http_content_t, _msg);
}

/* ---------------------------------------------------------------------------------------
 * Responses
 */

eddy_http_response_t *eddy_http_response_new(int status)
{
    if (status < 100 || status > 999) {
        return NULL;
    }
    eddy_http_response_t *r = eddy_http_response_of(eddy__http_message_new(true, BUILT_SLOTS));
    if (r == NULL) {
        return NULL;
    }
    r->_msg.type = EDDY_MSG_HTTP_RESPONSE;
    r->_header_cap = BUILT_SLOTS;
    r->status = status;
    r->keep_alive = true;
    const char *reason = eddy_http_reason(status);
    r->reason = (eddy_http_str_t){reason, strlen(reason)};
    return r;
}

eddy_http_response_t *eddy_http_response_of(eddy_msg_t *msg)
{
    return is_one_of(msg, EDDY_MSG_HTTP_RESPONSE, EDDY_MSG_HTTP_RESPONSE_HEAD,
                     EDDY_MSG_HTTP_FULL_RESPONSE)
               ? EDDY_CONTAINER_OF(msg, eddy_http_response_t, _msg)
               : NULL;
}

eddy_msg_t *eddy_http_response_msg(eddy_http_response_t *r)
{
    return &r->_msg;
}

const eddy_http_header_t *eddy_http_response_header(const eddy_http_response_t *r, const char *name)
{
    return eddy__http_header_find(r->headers, r->header_count, name);
}

int eddy_http_response_add_header(eddy_http_response_t *r, const char *name, const char *value)
{
    return header_ok(name, value, false) ? add_checked(&r->_msg, name, value) : EDDY_EINVAL;
}

/* The parts of msg its setters keep in step, when it is a built request or response. */
static bool built_parts(eddy_msg_t *msg, built_t *b)
{
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req != NULL) {
        if (request_built(req)) {
            *b = request_parts(req);
        }
        return request_built(req);
    }
    eddy_http_response_t *r = eddy_http_response_of(msg);
    if (r == NULL || msg->type != EDDY_MSG_HTTP_RESPONSE) {
        return false;
    }
    /* A built response's head holds its header lines alone: the status line is written from
     * status and version when it is encoded. */
    *b = (built_t){&r->_head, 0, &r->headers, &r->header_count, &r->_header_cap, sizeof(*r)};
    return true;
}

/* Add a field whose name and value were checked already. */
static int add_checked(eddy_msg_t *msg, const char *name, const char *value)
{
    built_t b;
    if (!built_parts(msg, &b)) {
        return EDDY_EINVAL;
    }
    int err = built_add(&b, msg, name, value);
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (err == 0 && req != NULL) {
        request_point_line(req); /* the head may have moved */
    }
    return err;
}

/* Drop the i-th of count slots at h. */
static void slot_remove(eddy_http_header_t *h, size_t *count, size_t i)
{
    memmove(h + i, h + i + 1, (*count - i - 1) * sizeof(*h));
    --*count;
}

/* Drop the i-th header of a built message: its line leaves the head (moved down in place, so
 * the strings before it stay where they are) and the slots are pointed at the lines again. */
static void built_remove(const built_t *b, size_t i)
{
    eddy_http_header_t *h = *b->headers;
    size_t n = eddy_buf_readable(*b->head);
    char *base = (char *)eddy_buf_write_ptr(*b->head) - n; /* the readable bytes, writable */
    size_t from = (size_t)(h[i].name.p - base);
    size_t to = (size_t)(h[i].value.p - base) + h[i].value.len + 2; /* past its "\r\n" */
    assert(from >= b->lines && to <= n);
    memmove(base + from, base + to, n - to);
    eddy_buf_set_writer_index(*b->head, eddy_buf_writer_index(*b->head) - (to - from));
    slot_remove(h, b->count, i);
    index_lines(base + b->lines, base + n - (to - from), h, *b->count);
}

int eddy__http_remove_field(eddy_msg_t *msg, const char *name)
{
    built_t b;
    bool built = built_parts(msg, &b);
    eddy_http_request_t *req = eddy_http_request_of(msg);
    eddy_http_response_t *r = req == NULL ? eddy_http_response_of(msg) : NULL;
    if (req == NULL && r == NULL) {
        return EDDY_EINVAL;
    }
    eddy_http_header_t *h = req != NULL ? req->headers : r->headers;
    size_t *count = req != NULL ? &req->header_count : &r->header_count;
    int removed = 0;
    for (size_t i = *count; i-- > 0;) {
        if (!eddy_http_str_eq_nocase(h[i].name, name)) {
            continue;
        }
        if (built) {
            built_remove(&b, i);
        } else {
            slot_remove(h, count, i); /* decoded: the bytes stay, unpointed */
        }
        removed++;
    }
    return removed;
}

int eddy__http_add_field(eddy_msg_t *msg, const char *name, const char *value)
{
    if (!eddy__http_is_token(name, strlen(name)) || strpbrk(value, "\r\n") != NULL) {
        return EDDY_EINVAL;
    }
    return add_checked(msg, name, value);
}

void eddy_http_response_set_body(eddy_http_response_t *r, eddy_buf_t *b)
{
    replace_body(&r->body, b);
}

/*
 * The reason phrase of every code in the IANA HTTP Status Code Registry, under the names
 * RFC 9110 gives them (413 Content Too Large, 422 Unprocessable Content), indexed by the code
 * itself: one bounds check and one load. Two registered codes have no name of their own:
 * 306, which the registry lists as "(Unused)", goes by that, and 418, reserved there as
 * unusable since RFC 2324's joke made it common, goes by the joke's "I'm a teapot", as the
 * servers that send it say. 510 is obsolete (RFC 2774 is historic) and still registered.
 */
static const char *const reasons[512] = {
    [100] = "Continue",
    [101] = "Switching Protocols",
    [102] = "Processing",
    [103] = "Early Hints",
    [200] = "OK",
    [201] = "Created",
    [202] = "Accepted",
    [203] = "Non-Authoritative Information",
    [204] = "No Content",
    [205] = "Reset Content",
    [206] = "Partial Content",
    [207] = "Multi-Status",
    [208] = "Already Reported",
    [226] = "IM Used",
    [300] = "Multiple Choices",
    [301] = "Moved Permanently",
    [302] = "Found",
    [303] = "See Other",
    [304] = "Not Modified",
    [305] = "Use Proxy",
    [306] = "(Unused)",
    [307] = "Temporary Redirect",
    [308] = "Permanent Redirect",
    [400] = "Bad Request",
    [401] = "Unauthorized",
    [402] = "Payment Required",
    [403] = "Forbidden",
    [404] = "Not Found",
    [405] = "Method Not Allowed",
    [406] = "Not Acceptable",
    [407] = "Proxy Authentication Required",
    [408] = "Request Timeout",
    [409] = "Conflict",
    [410] = "Gone",
    [411] = "Length Required",
    [412] = "Precondition Failed",
    [413] = "Content Too Large",
    [414] = "URI Too Long",
    [415] = "Unsupported Media Type",
    [416] = "Range Not Satisfiable",
    [417] = "Expectation Failed",
    [418] = "I'm a teapot",
    [421] = "Misdirected Request",
    [422] = "Unprocessable Content",
    [423] = "Locked",
    [424] = "Failed Dependency",
    [425] = "Too Early",
    [426] = "Upgrade Required",
    [428] = "Precondition Required",
    [429] = "Too Many Requests",
    [431] = "Request Header Fields Too Large",
    [451] = "Unavailable For Legal Reasons",
    [500] = "Internal Server Error",
    [501] = "Not Implemented",
    [502] = "Bad Gateway",
    [503] = "Service Unavailable",
    [504] = "Gateway Timeout",
    [505] = "HTTP Version Not Supported",
    [506] = "Variant Also Negotiates",
    [507] = "Insufficient Storage",
    [508] = "Loop Detected",
    [510] = "Not Extended",
    [511] = "Network Authentication Required",
};

const char *eddy_http_reason(int status)
{
    if (status < 0 || (size_t)status >= sizeof(reasons) / sizeof(reasons[0]) ||
        reasons[status] == NULL) {
        return "Unknown";
    }
    return reasons[status];
}

/* Whether a response with this status may carry a body, hence a length (RFC 9110 6.4.1). */
static bool status_has_body(int status)
{
    return status >= 200 && status != 204 && status != 304;
}

/* A 1.0 response whose length is not known up front: a 1.0 client does not know chunked
 * (RFC 9112 section 6.1), so the body goes as it is and the close ends it (section 6.3). */
static bool close_delimited(const eddy_http_response_t *r)
{
    return eddy__http_response_streamed(r) && r->version == 10 && status_has_body(r->status);
}

bool eddy__http_response_streamed(const eddy_http_response_t *r)
{
    return r->chunked || r->_streamed;
}

bool eddy_http_response_keeps_alive(const eddy_http_response_t *r)
{
    return r->keep_alive && !close_delimited(r);
}

int eddy_http_response_encode(const eddy_http_response_t *r, eddy_buf_t *out)
{
    if (r->_msg.type != EDDY_MSG_HTTP_RESPONSE) {
        return EDDY_EINVAL; /* a decoded head: its bytes are not header lines alone */
    }
    const char *reason = eddy_http_reason(r->status);
    size_t body = r->body != NULL ? eddy_buf_readable(r->body) : 0;
    size_t hdrs = r->_head != NULL ? eddy_buf_readable(r->_head) : 0;
    size_t reason_len = strlen(reason);
    /* Status line, headers, the framing headers (at most 50 bytes) and the blank line. */
    size_t need = 13 + reason_len + 2 + hdrs + 64 + (r->head_only ? 0 : body);
    int err = eddy_buf_ensure_writable(out, need);
    if (err != 0) {
        return err;
    }
    assert(r->status >= 100 && r->status <= 999); /* three digits in the status line */
    char line[16] = "HTTP/1.1 ";
    line[7] = r->version == 10 ? '0' : '1';
    format_u64(line + 12, (uint64_t)r->status);
    line[12] = ' ';
    eddy_buf_write_bytes(out, line, 13);
    eddy_buf_write_bytes(out, reason, reason_len);
    eddy_buf_write_bytes(out, "\r\n", 2);
    if (hdrs > 0) {
        eddy_buf_write_bytes(out, eddy_buf_read_ptr(r->_head), hdrs);
    }
    if (eddy__http_response_streamed(r) && status_has_body(r->status)) {
        if (!close_delimited(r)) {
            eddy_buf_write_bytes(out, "Transfer-Encoding: chunked\r\n", 28);
        }
    } else if (status_has_body(r->status)) {
        write_length(out, eddy_http_response_body_length(r));
    }
    write_connection(out, eddy_http_response_keeps_alive(r), r->version);
    eddy_buf_write_bytes(out, "\r\n", 2);
    if (body > 0 && !r->head_only && !r->chunked) {
        eddy_buf_write_bytes(out, eddy_buf_read_ptr(r->body), body);
    }
    return 0;
}
