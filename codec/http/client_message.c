/*
 * The client's messages: requests as the caller builds them and their encoding, responses as
 * the decoder fills them.
 */
#include "codec/http/internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Requests
 */

static void request_free(eddy_msg_t *msg)
{
    eddy_http_client_request_t *r = EDDY_CONTAINER_OF(msg, eddy_http_client_request_t, _msg);
    if (r->_head != NULL) {
        eddy_buf_release(r->_head);
    }
    if (r->body != NULL) {
        eddy_buf_release(r->body);
    }
    free(r);
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

eddy_http_client_request_t *eddy_http_client_request_new(const char *method, const char *target)
{
    size_t mlen = method != NULL ? strlen(method) : 0;
    size_t tlen = target != NULL ? strlen(target) : 0;
    if (!eddy__http_is_token(method, mlen) || !target_ok(target, tlen)) {
        return NULL;
    }
    eddy_http_client_request_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    eddy_msg_init(&r->_msg, EDDY_MSG_HTTP_CLIENT_REQUEST, request_free);
    r->method = eddy__http_method_of(method, mlen);
    r->version = 11;
    r->keep_alive = true;
    if ((r->_head = request_line(method, mlen, target, tlen, 128)) == NULL) {
        free(r);
        return NULL;
    }
    return r;
}

/* Whether the header lines in [p, p + n) ("Name: value\r\n"...) hold one called name. */
static bool has_header(const char *p, size_t n, const char *name)
{
    size_t len = strlen(name);
    while (n > 0) {
        const char *eol = memchr(p, '\n', n);
        size_t line = eol != NULL ? (size_t)(eol - p) + 1 : n;
        if (line > len && p[len] == ':' && eddy_http_str_eq_nocase((eddy_http_str_t){p, len}, name)) {
            return true;
        }
        p += line;
        n -= line;
    }
    return false;
}

int eddy__http_client_request_route(eddy_http_client_request_t *r, const char *target,
                                    const char *authority)
{
    size_t tlen = strlen(target), alen = strlen(authority);
    if (!target_ok(target, tlen)) {
        return EDDY_EINVAL;
    }
    const char *old = (const char *)eddy_buf_read_ptr(r->_head);
    size_t n = eddy_buf_readable(r->_head);
    const char *sp = memchr(old, ' ', n);
    const char *eol = memchr(old, '\n', n);
    assert(sp != NULL && eol != NULL && sp < eol); /* request_line() wrote it */
    const char *headers = eol + 1;
    size_t hn = n - (size_t)(headers - old);
    bool host = !has_header(headers, hn, "host");
    eddy_buf_t *b = request_line(old, (size_t)(sp - old), target, tlen, hn + (host ? alen + 8 : 0));
    if (b == NULL) {
        return EDDY_ENOMEM;
    }
    if (host) {
        eddy_buf_write_bytes(b, "Host: ", 6);
        eddy_buf_write_bytes(b, authority, alen);
        eddy_buf_write_bytes(b, "\r\n", 2);
    }
    eddy_buf_write_bytes(b, headers, hn);
    eddy_buf_release(r->_head);
    r->_head = b;
    return 0;
}

int eddy_http_client_request_add_header(eddy_http_client_request_t *r, const char *name,
                                        const char *value)
{
    eddy_http_str_t n = {name, strlen(name)};
    if (!eddy__http_is_token(name, n.len) || strpbrk(value, "\r\n") != NULL ||
        eddy_http_str_eq_nocase(n, "content-length") ||
        eddy_http_str_eq_nocase(n, "transfer-encoding") ||
        eddy_http_str_eq_nocase(n, "connection") || eddy_http_str_eq_nocase(n, "expect")) {
        return EDDY_EINVAL;
    }
    size_t vlen = strlen(value);
    size_t before = eddy_buf_writer_index(r->_head);
    int err = eddy_buf_ensure_writable(r->_head, n.len + vlen + 4);
    if (err == 0) {
        eddy_buf_write_bytes(r->_head, name, n.len);
        eddy_buf_write_bytes(r->_head, ": ", 2);
        eddy_buf_write_bytes(r->_head, value, vlen);
        eddy_buf_write_bytes(r->_head, "\r\n", 2);
    } else {
        eddy_buf_set_writer_index(r->_head, before);
    }
    return err;
}

void eddy_http_client_request_set_body(eddy_http_client_request_t *r, eddy_buf_t *b)
{
    if (r->body != NULL) {
        eddy_buf_release(r->body);
    }
    r->body = b;
}

void eddy_http_client_request_expect(eddy_http_client_request_t *r, bool on)
{
    r->expect_continue = on;
}

eddy_msg_t *eddy_http_client_request_msg(eddy_http_client_request_t *r)
{
    return &r->_msg;
}

eddy_http_client_request_t *eddy_http_client_request_of(eddy_msg_t *msg)
{
    if (msg == NULL || msg->type != EDDY_MSG_HTTP_CLIENT_REQUEST) {
        return NULL;
    }
    return EDDY_CONTAINER_OF(msg, eddy_http_client_request_t, _msg);
}

size_t eddy__http_client_request_body_len(const eddy_http_client_request_t *r)
{
    return r->chunked || r->body == NULL ? 0 : eddy_buf_readable(r->body);
}

bool eddy__http_client_request_expects(const eddy_http_client_request_t *r)
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

size_t eddy__http_client_request_head_size(const eddy_http_client_request_t *r)
{
    return eddy_buf_readable(r->_head) + 128; /* the framing lines add at most 100 bytes */
}

int eddy__http_client_request_encode_head(const eddy_http_client_request_t *r, eddy_buf_t *out)
{
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
        char num[24];
        int len = snprintf(num, sizeof(num), "Content-Length: %zu\r\n", body);
        eddy_buf_write_bytes(out, num, (size_t)len);
    }
    if (!r->keep_alive) {
        eddy_buf_write_bytes(out, "Connection: close\r\n", 19);
    } else if (r->version == 10) {
        eddy_buf_write_bytes(out, "Connection: keep-alive\r\n", 24);
    }
    if (eddy__http_client_request_expects(r)) {
        eddy_buf_write_bytes(out, "Expect: 100-continue\r\n", 22);
    }
    eddy_buf_write_bytes(out, "\r\n", 2);
    return 0;
}

int eddy_http_client_request_encode(const eddy_http_client_request_t *r, eddy_buf_t *out)
{
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
 * The FIFO of requests waiting for their responses
 */

int eddy__http_fifo_push(eddy__http_fifo_t *f, const void *e)
{
    if (f->count == f->cap) {
        size_t cap = f->cap != 0 ? f->cap * 2 : 8;
        uint8_t *v = malloc(cap * f->size);
        if (v == NULL) {
            return EDDY_ENOMEM;
        }
        for (size_t i = 0; i < f->count; i++) {
            memcpy(v + i * f->size, eddy__http_fifo_at(f, i), f->size);
        }
        free(f->v);
        f->v = v;
        f->cap = cap;
        f->first = 0;
    }
    memcpy(f->v + (f->first + f->count++) % f->cap * f->size, e, f->size);
    return 0;
}

void *eddy__http_fifo_at(const eddy__http_fifo_t *f, size_t i)
{
    assert(i < f->count);
    return f->v + (f->first + i) % f->cap * f->size;
}

void eddy__http_fifo_pop(eddy__http_fifo_t *f)
{
    assert(f->count > 0);
    f->first = (f->first + 1) % f->cap;
    f->count--;
}

void eddy__http_fifo_pop_newest(eddy__http_fifo_t *f)
{
    assert(f->count > 0);
    f->count--;
}

void eddy__http_fifo_destroy(eddy__http_fifo_t *f)
{
    free(f->v);
    *f = (eddy__http_fifo_t){.size = f->size};
}

/* ---------------------------------------------------------------------------------------
 * Responses
 */

static void response_free(eddy_msg_t *msg)
{
    eddy_http_client_response_t *r = EDDY_CONTAINER_OF(msg, eddy_http_client_response_t, _msg);
    if (r->_head != NULL) {
        eddy_buf_release(r->_head);
    }
    if (r->body != NULL) {
        eddy_buf_release(r->body);
    }
    free(r);
}

eddy_http_client_response_t *eddy__http_client_response_alloc(size_t count)
{
    /* One block: the response, then its header slots (the struct's size keeps them aligned). */
    if (count > (SIZE_MAX - sizeof(eddy_http_client_response_t)) / sizeof(eddy_http_header_t)) {
        return NULL;
    }
    eddy_http_client_response_t *r =
        malloc(sizeof(eddy_http_client_response_t) + count * sizeof(eddy_http_header_t));
    if (r == NULL) {
        return NULL;
    }
    memset(r, 0, sizeof(*r));
    eddy_msg_init(&r->_msg, EDDY_MSG_HTTP_RESPONSE_HEAD, response_free);
    r->version = 11;
    r->content_length = -1;
    r->headers = (eddy_http_header_t *)(r + 1);
    return r;
}

eddy_http_client_response_t *eddy_http_client_response_of(eddy_msg_t *msg)
{
    if (msg == NULL ||
        (msg->type != EDDY_MSG_HTTP_RESPONSE_HEAD && msg->type != EDDY_MSG_HTTP_FULL_RESPONSE)) {
        return NULL;
    }
    return EDDY_CONTAINER_OF(msg, eddy_http_client_response_t, _msg);
}

const eddy_http_header_t *eddy_http_client_response_header(const eddy_http_client_response_t *r,
                                                           const char *name)
{
    return eddy__http_header_find(r->headers, r->header_count, name);
}
