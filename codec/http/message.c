/*
 * HTTP messages: requests, content pieces and responses, and the encoding of a response.
 */
#include "codec/http/internal.h"

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
 * Requests and content
 */

static void request_free(eddy_msg_t *msg)
{
    eddy_http_request_t *req = EDDY_CONTAINER_OF(msg, eddy_http_request_t, _msg);
    if (req->_head != NULL) {
        eddy_buf_release(req->_head);
    }
    if (req->body != NULL) {
        eddy_buf_release(req->body);
    }
    free(req);
}

eddy_http_request_t *eddy__http_request_alloc(size_t count)
{
    /* One block: the request, then its header slots (the struct's size keeps them aligned). */
    if (count > (SIZE_MAX - sizeof(eddy_http_request_t)) / sizeof(eddy_http_header_t)) {
        return NULL;
    }
    eddy_http_request_t *req =
        malloc(sizeof(eddy_http_request_t) + count * sizeof(eddy_http_header_t));
    if (req == NULL) {
        return NULL;
    }
    memset(req, 0, sizeof(*req));
    eddy_msg_init(&req->_msg, EDDY_MSG_HTTP_REQUEST, request_free);
    req->version = 11;
    req->content_length = -1;
    req->headers = (eddy_http_header_t *)(req + 1);
    return req;
}

eddy_http_request_t *eddy_http_request_of(eddy_msg_t *msg)
{
    if (msg == NULL ||
        (msg->type != EDDY_MSG_HTTP_REQUEST && msg->type != EDDY_MSG_HTTP_FULL_REQUEST)) {
        return NULL;
    }
    return EDDY_CONTAINER_OF(msg, eddy_http_request_t, _msg);
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

static void response_free(eddy_msg_t *msg)
{
    eddy_http_response_t *r = EDDY_CONTAINER_OF(msg, eddy_http_response_t, _msg);
    if (r->body != NULL) {
        eddy_buf_release(r->body);
    }
    if (r->_headers != NULL) {
        eddy_buf_release(r->_headers);
    }
    free(r);
}

eddy_http_response_t *eddy_http_response_new(int status)
{
    if (status < 100 || status > 999) {
        return NULL;
    }
    eddy_http_response_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    eddy_msg_init(&r->_msg, EDDY_MSG_HTTP_RESPONSE, response_free);
    r->status = status;
    r->version = 11;
    r->keep_alive = true;
    return r;
}

eddy_http_response_t *eddy_http_response_of(eddy_msg_t *msg)
{
    if (msg == NULL || msg->type != EDDY_MSG_HTTP_RESPONSE) {
        return NULL;
    }
    return EDDY_CONTAINER_OF(msg, eddy_http_response_t, _msg);
}

eddy_msg_t *eddy_http_response_msg(eddy_http_response_t *r)
{
    return &r->_msg;
}

int eddy_http_response_add_header(eddy_http_response_t *r, const char *name, const char *value)
{
    if (!eddy__http_is_token(name, strlen(name)) || strpbrk(value, "\r\n") != NULL) {
        return EDDY_EINVAL;
    }
    eddy_http_str_t n = {name, strlen(name)};
    if (eddy_http_str_eq_nocase(n, "content-length") ||
        eddy_http_str_eq_nocase(n, "transfer-encoding") ||
        eddy_http_str_eq_nocase(n, "connection")) {
        return EDDY_EINVAL;
    }
    if (r->_headers == NULL) {
        r->_headers = eddy_buf_new(256);
        if (r->_headers == NULL) {
            return EDDY_ENOMEM;
        }
    }
    size_t vlen = strlen(value);
    size_t before = eddy_buf_writer_index(r->_headers);
    int err = eddy_buf_ensure_writable(r->_headers, n.len + vlen + 4);
    if (err == 0) {
        eddy_buf_write_bytes(r->_headers, name, n.len);
        eddy_buf_write_bytes(r->_headers, ": ", 2);
        eddy_buf_write_bytes(r->_headers, value, vlen);
        eddy_buf_write_bytes(r->_headers, "\r\n", 2);
    } else {
        eddy_buf_set_writer_index(r->_headers, before);
    }
    return err;
}

void eddy_http_response_set_body(eddy_http_response_t *r, eddy_buf_t *b)
{
    if (r->body != NULL) {
        eddy_buf_release(r->body);
    }
    r->body = b;
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

/* Decimal digits of v into end's left; returns where they start. */
static char *format_u64(char *end, uint64_t v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    return end;
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
    return r->chunked && r->version == 10 && status_has_body(r->status);
}

bool eddy_http_response_keeps_alive(const eddy_http_response_t *r)
{
    return r->keep_alive && !close_delimited(r);
}

int eddy_http_response_encode(const eddy_http_response_t *r, eddy_buf_t *out)
{
    const char *reason = eddy_http_reason(r->status);
    size_t body = r->body != NULL ? eddy_buf_readable(r->body) : 0;
    size_t hdrs = r->_headers != NULL ? eddy_buf_readable(r->_headers) : 0;
    size_t reason_len = strlen(reason);
    /* Status line, headers, the framing headers (at most 50 bytes) and the blank line. */
    size_t need = 13 + reason_len + 2 + hdrs + 64 + (r->head_only ? 0 : body);
    int err = eddy_buf_ensure_writable(out, need);
    if (err != 0) {
        return err;
    }
    char line[16] = "HTTP/1.1 ";
    line[7] = r->version == 10 ? '0' : '1';
    format_u64(line + 12, (uint64_t)r->status);
    line[12] = ' ';
    eddy_buf_write_bytes(out, line, 13);
    eddy_buf_write_bytes(out, reason, reason_len);
    eddy_buf_write_bytes(out, "\r\n", 2);
    if (hdrs > 0) {
        eddy_buf_write_bytes(out, eddy_buf_read_ptr(r->_headers), hdrs);
    }
    if (r->chunked && status_has_body(r->status)) {
        if (!close_delimited(r)) {
            eddy_buf_write_bytes(out, "Transfer-Encoding: chunked\r\n", 28);
        }
    } else if (status_has_body(r->status)) {
        char num[24];
        char *s = format_u64(num + sizeof(num), body);
        eddy_buf_write_bytes(out, "Content-Length: ", 16);
        eddy_buf_write_bytes(out, s, (size_t)(num + sizeof(num) - s));
        eddy_buf_write_bytes(out, "\r\n", 2);
    }
    if (!eddy_http_response_keeps_alive(r)) {
        eddy_buf_write_bytes(out, "Connection: close\r\n", 19);
    } else if (r->version == 10) {
        eddy_buf_write_bytes(out, "Connection: keep-alive\r\n", 24);
    }
    eddy_buf_write_bytes(out, "\r\n", 2);
    if (body > 0 && !r->head_only && !r->chunked) {
        eddy_buf_write_bytes(out, eddy_buf_read_ptr(r->body), body);
    }
    return 0;
}
