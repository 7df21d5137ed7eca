/*
 * The HTTP/1.1 client (codec/http/client_*.c, exchange.c) through the embedded
 * channel: request encoding; response framing by every rule, fed whole, at every split point
 * and in seeded random pieces; pipelining; HEAD, 204, 304, 1xx and 101; Expect: 100-continue
 * both ways; every error and the futures failing with it; limits; the response timeout on the
 * virtual clock; cancel. Then one exchange over a real socket against an eddy HTTP server
 * built here, pipelined. Nothing leaked.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/bootstrap.h>
#include <eddy/channel.h>
#include <eddy/http.h>
#include <eddy/http_client.h>
#include <eddy/pipeline.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEADLINE_MS 10000

/* ---------------------------------------------------------------------------------------
 * Helpers
 */

typedef struct setup_s {
    bool aggregate;
    size_t max_content;
    bool exchange;
    int64_t timeout_ms;
    eddy_http_client_codec_options_t o;
} setup_t;

static eddy_channel_t *client_channel(const setup_t *su)
{
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(p, eddy_http_client_codec(&su->o)), 0);
    if (su->aggregate) {
        assert_int_equal(EDDY_PIPELINE_ADD_LAST(p, eddy_http_response_aggregator(su->max_content)),
                         0);
    }
    if (su->exchange) {
        assert_int_equal(EDDY_PIPELINE_ADD_LAST(p, eddy_http_exchange(su->timeout_ms)), 0);
    }
    return ch;
}

static eddy_channel_t *aggregating(void)
{
    return client_channel(&(setup_t){.aggregate = true});
}

static eddy_channel_t *exchanging(int64_t timeout_ms)
{
    return client_channel(
        &(setup_t){.aggregate = true, .exchange = true, .timeout_ms = timeout_ms});
}

static eddy_http_client_request_t *request(const char *method, const char *target)
{
    eddy_http_client_request_t *r = eddy_http_client_request_new(method, target);
    assert_non_null(r);
    return r;
}

/* Write a request without a body from the tail. */
static void write_request(eddy_channel_t *ch, const char *method)
{
    eddy_embedded_write_outbound(ch, eddy_http_client_request_msg(request(method, "/")));
}

static void feed(eddy_channel_t *ch, const void *bytes, size_t n, size_t chunk)
{
    const uint8_t *p = bytes;
    size_t off = 0;
    do {
        size_t k = chunk == 0 || chunk > n - off ? n - off : chunk;
        eddy_buf_t *b = eddy_buf_from(p + off, k);
        assert_non_null(b);
        eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
        off += k;
    } while (off < n);
}

static void feed_str(eddy_channel_t *ch, const char *s)
{
    feed(ch, s, strlen(s), 0);
}

/* The bytes of a message that reached the head, appended to a growing string. */
static void append_bytes(char **s, size_t *n, size_t *cap, eddy_msg_t *m)
{
    size_t k;
    eddy_buf_t *b = eddy_buf_of(m);
    eddy_composite_t *c = eddy_composite_of(m);
    assert_true(b != NULL || c != NULL);
    k = b != NULL ? eddy_buf_readable(b) : eddy_composite_readable(c);
    while (*n + k + 1 > *cap) {
        *cap *= 2;
        *s = realloc(*s, *cap);
        assert_non_null(*s);
    }
    if (b != NULL) {
        memcpy(*s + *n, eddy_buf_read_ptr(b), k);
    } else {
        assert_int_equal(eddy_composite_get_bytes(c, 0, *s + *n, k), 0);
    }
    *n += k;
}

/* Everything written out, as a NUL-terminated string the caller frees. */
static char *outbound_str(eddy_channel_t *ch)
{
    size_t n = 0, cap = 256;
    char *s = malloc(cap);
    assert_non_null(s);
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        append_bytes(&s, &n, &cap, m);
        eddy_msg_release(m);
    }
    s[n] = '\0';
    return s;
}

static void expect_outbound(eddy_channel_t *ch, const char *want)
{
    char *got = outbound_str(ch);
    assert_string_equal(got, want);
    free(got);
}

static eddy_http_client_response_t *next_response(eddy_channel_t *ch, uint32_t type)
{
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    assert_non_null(m);
    assert_int_equal(m->type, type);
    eddy_http_client_response_t *r = eddy_http_client_response_of(m);
    assert_non_null(r);
    return r;
}

static eddy_http_client_response_t *next_full(eddy_channel_t *ch)
{
    return next_response(ch, EDDY_MSG_HTTP_FULL_RESPONSE);
}

static void release_resp(eddy_http_client_response_t *r)
{
    eddy_msg_release(&r->_msg);
}

static void expect_nothing(eddy_channel_t *ch)
{
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    if (m != NULL) {
        eddy_msg_release(m);
        fail_msg("an unexpected message came out");
    }
}

static void assert_str(eddy_http_str_t s, const char *lit)
{
    if (!eddy_http_str_eq(s, lit)) {
        fail_msg("\"%.*s\" is not \"%s\"", (int)s.len, s.p, lit);
    }
}

static void assert_body(const eddy_buf_t *b, const char *lit)
{
    size_t n = strlen(lit);
    if (n == 0) {
        assert_true(b == NULL || eddy_buf_readable(b) == 0);
        return;
    }
    assert_non_null(b);
    assert_int_equal(eddy_buf_readable(b), n);
    assert_memory_equal(eddy_buf_read_ptr(b), lit, n);
}

/* A full response's status and body. Released. */
static void expect_full(eddy_channel_t *ch, int status, const char *body, bool keep_alive)
{
    eddy_http_client_response_t *r = next_full(ch);
    assert_int_equal(r->status, status);
    assert_body(r->body, body);
    assert_int_equal(r->keep_alive, keep_alive);
    release_resp(r);
}

/* Close as a user does (through the pipeline: requests left unanswered are no error then),
 * and free. What was written out is dropped: the tests that care read it before. */
static void finish_clean(eddy_channel_t *ch, int64_t live)
{
    eddy_channel_close(ch, NULL);
    eddy_embedded_run_pending(ch);
    free(outbound_str(ch));
    assert_true(eddy_embedded_finish(ch));
    assert_int_equal(eddy_buf_live_count(), live);
}

/* The error that reached the tail; the channel then closed. */
static void expect_error(eddy_channel_t *ch, int err)
{
    assert_int_equal(eddy_embedded_error(ch), err);
    assert_false(eddy_channel_is_open(ch));
}

/* ---------------------------------------------------------------------------------------
 * Requests
 */

static void test_request_writes_the_framing_headers_itself(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = client_channel(&(setup_t){0});

    eddy_http_client_request_t *r = request("GET", "/a?b=c");
    assert_int_equal(r->method, EDDY_HTTP_GET);
    assert_int_equal(eddy_http_client_request_add_header(r, "Host", "example.com"), 0);
    assert_int_equal(eddy_http_client_request_add_header(r, "X-Empty", ""), 0);
    eddy_embedded_write_outbound(ch, eddy_http_client_request_msg(r));
    expect_outbound(ch, "GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nX-Empty: \r\n\r\n");

    /* An empty body: a length for the methods that carry content, none for the others. */
    static const struct {
        const char *method;
        const char *want;
    } empty[] = {
        {"POST", "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"},
        {"PUT", "PUT / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"},
        {"PATCH", "PATCH / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"},
        {"HEAD", "HEAD / HTTP/1.1\r\n\r\n"},
        {"DELETE", "DELETE / HTTP/1.1\r\n\r\n"},
        {"OPTIONS", "OPTIONS / HTTP/1.1\r\n\r\n"},
        {"TRACE", "TRACE / HTTP/1.1\r\n\r\n"},
        {"CONNECT", "CONNECT / HTTP/1.1\r\n\r\n"},
        {"PROPFIND", "PROPFIND / HTTP/1.1\r\n\r\n"},
    };
    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
        write_request(ch, empty[i].method);
        expect_outbound(ch, empty[i].want);
    }

    /* A body, Connection: close; HTTP/1.0 keeping alive says so. */
    r = request("PUT", "/x");
    r->keep_alive = false;
    eddy_http_client_request_set_body(r, eddy_buf_from_str("hello"));
    eddy_embedded_write_outbound(ch, eddy_http_client_request_msg(r));
    expect_outbound(ch, "PUT /x HTTP/1.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    r = request("GET", "/");
    r->version = 10;
    eddy_embedded_write_outbound(ch, eddy_http_client_request_msg(r));
    expect_outbound(ch, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");

    /* The public encoder writes the same bytes. */
    r = request("POST", "/e");
    eddy_http_client_request_set_body(r, eddy_buf_from_str("abc"));
    eddy_buf_t *out = eddy_buf_new(16);
    assert_int_equal(eddy_http_client_request_encode(r, out), 0);
    assert_int_equal(eddy_buf_readable(out),
                     strlen("POST /e HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"));
    assert_memory_equal(eddy_buf_read_ptr(out), "POST /e HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
                        eddy_buf_readable(out));
    eddy_buf_release(out);

    /* What the encoder writes from the fields is refused as a header, as is bad syntax. */
    static const char *const refused[][2] = {
        {"Content-Length", "1"}, {"transfer-encoding", "chunked"},
        {"Connection", "close"}, {"Expect", "100-continue"},
        {"Bad Name", "v"},       {"", "v"},
        {"X", "a\r\nB: c"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        assert_int_equal(eddy_http_client_request_add_header(r, refused[i][0], refused[i][1]),
                         EDDY_EINVAL);
    }
    eddy_msg_release(eddy_http_client_request_msg(r));
    assert_null(eddy_http_client_request_new("GE T", "/"));
    assert_null(eddy_http_client_request_new("GET", "/a b"));
    assert_null(eddy_http_client_request_new("GET", "/a\r\n"));
    assert_null(eddy_http_client_request_new("GET", ""));
    r = request("PROPFIND", "*");
    assert_int_equal(r->method, EDDY_HTTP_OTHER);
    assert_ptr_equal(eddy_http_client_request_of(eddy_http_client_request_msg(r)), r);
    eddy_msg_release(eddy_http_client_request_msg(r));
    finish_clean(ch, live);
}

static void test_request_sends_a_large_body_by_reference(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = client_channel(&(setup_t){0});
    size_t n = 64 * 1024;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, 'x', n);
    eddy_buf_t *body = eddy_buf_from(big, n);
    eddy_http_client_request_t *r = request("POST", "/up");
    eddy_http_client_request_set_body(r, eddy_buf_retain(body));
    eddy_embedded_write_outbound(ch, eddy_http_client_request_msg(r));
    eddy_msg_t *m = eddy_embedded_read_outbound(ch);
    assert_non_null(m);
    assert_int_equal(m->type, EDDY_MSG_COMPOSITE); /* the head, then the body's own bytes */
    assert_true(eddy_buf_refcnt(body) > 1);
    char *s = NULL;
    size_t len = 0, cap = 16;
    s = malloc(cap);
    append_bytes(&s, &len, &cap, m);
    eddy_msg_release(m);
    const char *head = "POST /up HTTP/1.1\r\nContent-Length: 65536\r\n\r\n";
    assert_int_equal(len, strlen(head) + n);
    assert_memory_equal(s, head, strlen(head));
    assert_memory_equal(s + strlen(head), big, n);
    free(s);
    free(big);
    eddy_buf_release(body);
    finish_clean(ch, live);
}

static void test_request_sends_a_chunked_body_as_its_content_comes(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = client_channel(&(setup_t){0});
    eddy_http_client_request_t *r = request("POST", "/c");
    r->chunked = true;
    eddy_embedded_write_outbound(ch, eddy_http_client_request_msg(r));
    expect_outbound(ch, "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    eddy_embedded_write_outbound(ch,
                                 &eddy_http_content_new(eddy_buf_from_str("hello"), false)->_msg);
    eddy_embedded_write_outbound(ch, &eddy_http_content_new(NULL, false)->_msg);
    eddy_embedded_write_outbound(
        ch, &eddy_http_content_new(eddy_buf_from_str("0123456789abcdefg"), true)->_msg);
    expect_outbound(ch, "5\r\nhello\r\n11\r\n0123456789abcdefg\r\n0\r\n\r\n");
    /* Content after the last chunk, or without a chunked request, is raw bytes. */
    eddy_embedded_write_outbound(ch, &eddy_http_content_new(eddy_buf_from_str("raw"), true)->_msg);
    expect_outbound(ch, "raw");
    /* An empty last piece is the zero chunk. */
    r = request("PUT", "/d");
    r->chunked = true;
    eddy_embedded_write_outbound(ch, eddy_http_client_request_msg(r));
    eddy_embedded_write_outbound(ch, &eddy_http_content_new(NULL, true)->_msg);
    expect_outbound(ch, "PUT /d HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    finish_clean(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * Responses, framed
 */

/* Requests to write before a stream, and the stream: what the aggregated responses must be. */
typedef struct stream_s {
    const char *methods; /* one letter per request: G(ET), H(EAD), C(ONNECT) */
    const char *bytes;
    const char *want; /* "status:keep:body|" per full response */
    bool eof;         /* the close ends the last response */
} stream_t;

static const stream_t streams[] = {
    {"G", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello", "200:1:hello|", false},
    {"G",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n"
     "6\r\n world\r\n0\r\nTrailer: v\r\n\r\n",
     "200:1:hello world|", false},
    {"GG",
     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 404 Not Found\r\n"
     "Content-Length: 2\r\n\r\nno",
     "200:1:a|404:1:no|", false},
    {"HG",
     "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nHTTP/1.1 204 No Content\r\n"
     "Content-Length: 7\r\n\r\n",
     "200:1:|204:1:|", false},
    {"GG",
     "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
     "304:1:|100:1:|102:1:|200:1:ok|", false},
    {"C", "HTTP/1.1 200 Connection established\r\n\r\n", "200:1:|", false},
    {"C", "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 2\r\n\r\nno", "407:1:no|",
     false},
    {"G",
     "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
     "1\r\nx\r\n0\r\n\r\n",
     "200:0:x|", false},
    {"G", "HTTP/1.0 200 OK\r\n\r\nuntil the close", "200:0:until the close|", true},
    {"G", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi", "200:1:hi|",
     false},
    {"G", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi", "200:0:hi|",
     false},
    {"G",
     "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
     "1\r\nx\r\n0\r\n\r\n",
     "200:0:x|", false},
    {"G", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzipped", "200:0:zipped|", true},
    {"G", "\r\nHTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", "200:1:|", false},
    {"GG",
     "HTTP/1.1 200 OK\nContent-Length: 2\n\nabHTTP/1.1 201 Created\r\n"
     "Content-Length: 2, 2\r\n\r\ncd",
     "200:1:ab|201:1:cd|", false},
};

static eddy_http_method_t method_letter(char c)
{
    return c == 'H' ? EDDY_HTTP_HEAD : c == 'C' ? EDDY_HTTP_CONNECT : EDDY_HTTP_GET;
}

/* Run stream t cut where cuts says (ascending offsets, ncuts of them) and return the
 * responses in the "want" notation; nothing else may come out and no error. */
static char *run_stream(const stream_t *t, const size_t *cuts, size_t ncuts)
{
    eddy_channel_t *ch = aggregating();
    for (const char *m = t->methods; *m != '\0'; m++) {
        const char *name = *m == 'H' ? "HEAD" : *m == 'C' ? "CONNECT" : "GET";
        write_request(ch, name);
    }
    char *drop = outbound_str(ch);
    free(drop);
    size_t n = strlen(t->bytes), from = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : n;
        if (to > from) {
            feed(ch, t->bytes + from, to - from, 0);
        }
        from = to;
    }
    if (t->eof) {
        eddy_embedded_shutdown_input(ch);
    }
    assert_int_equal(eddy_embedded_error(ch), 0);
    char *out = calloc(1, 4096);
    assert_non_null(out);
    eddy_msg_t *m;
    size_t k = 0;
    const char *methods = t->methods;
    while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
        eddy_http_client_response_t *r = eddy_http_client_response_of(m);
        assert_non_null(r);
        assert_int_equal(m->type, EDDY_MSG_HTTP_FULL_RESPONSE);
        assert_int_equal(r->request_method, method_letter(*methods));
        if (r->status >= 200) {
            methods++;
        }
        size_t blen = r->body != NULL ? eddy_buf_readable(r->body) : 0;
        k += (size_t)snprintf(out + k, 4096 - k, "%d:%d:%.*s|", r->status, r->keep_alive, (int)blen,
                              r->body != NULL ? (const char *)eddy_buf_read_ptr(r->body) : "");
        eddy_msg_release(m);
    }
    assert_true(eddy_embedded_finish(ch));
    return out;
}

static void check_stream(const stream_t *t, const size_t *cuts, size_t ncuts)
{
    char *got = run_stream(t, cuts, ncuts);
    if (strcmp(got, t->want) != 0) {
        fail_msg("stream \"%s\" cut %zu times (first at %zu): \"%s\", not \"%s\"", t->bytes, ncuts,
                 ncuts > 0 ? cuts[0] : 0, got, t->want);
    }
    free(got);
}

static void test_responses_decode_the_same_however_they_are_split(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    uint32_t seed = 19;
    for (size_t i = 0; i < sizeof(streams) / sizeof(streams[0]); i++) {
        const stream_t *t = &streams[i];
        size_t n = strlen(t->bytes);
        check_stream(t, NULL, 0);
        /* Every split point, then byte by byte, then seeded random pieces. */
        for (size_t at = 1; at < n; at++) {
            check_stream(t, &at, 1);
        }
        size_t *cuts = malloc(n * sizeof(*cuts));
        assert_non_null(cuts);
        for (size_t at = 1; at < n; at++) {
            cuts[at - 1] = at;
        }
        check_stream(t, cuts, n - 1);
        for (int round = 0; round < 20; round++) {
            size_t k = 0;
            for (size_t at = 1; at < n; at++) {
                seed = seed * 1103515245u + 12345u;
                if ((seed >> 16) % 4 == 0) {
                    cuts[k++] = at;
                }
            }
            check_stream(t, cuts, k);
        }
        free(cuts);
    }
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_response_heads_carry_what_the_server_said(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = client_channel(&(setup_t){0});
    write_request(ch, "GET");
    free(outbound_str(ch));
    feed_str(ch, "HTTP/1.1 418 I'm a teapot \r\nServer:  eddy \r\nX-Empty:\r\n"
                 "Content-Length: 4\r\n\r\ntea");
    eddy_http_client_response_t *r = next_response(ch, EDDY_MSG_HTTP_RESPONSE_HEAD);
    assert_int_equal(r->status, 418);
    assert_str(r->reason, "I'm a teapot ");
    assert_int_equal(r->version, 11);
    assert_true(r->keep_alive);
    assert_false(r->chunked);
    assert_int_equal(r->content_length, 4);
    assert_int_equal(r->request_method, EDDY_HTTP_GET);
    assert_null(r->body);
    assert_int_equal(r->header_count, 3);
    assert_str(r->headers[0].name, "Server");
    assert_str(r->headers[0].value, "eddy");
    const eddy_http_header_t *h = eddy_http_client_response_header(r, "content-LENGTH");
    assert_non_null(h);
    assert_str(h->value, "4");
    assert_null(eddy_http_client_response_header(r, "cookie"));
    release_resp(r);
    eddy_http_content_t *c = eddy_http_content_of(eddy_embedded_read_inbound(ch));
    assert_non_null(c);
    assert_false(c->last);
    assert_body(c->data, "tea");
    eddy_msg_release(&c->_msg);
    feed_str(ch, "!");
    c = eddy_http_content_of(eddy_embedded_read_inbound(ch));
    assert_non_null(c);
    assert_true(c->last);
    assert_body(c->data, "!");
    eddy_msg_release(&c->_msg);
    expect_nothing(ch);
    finish_clean(ch, live);
}

static void test_response_bodies_come_in_pieces_of_at_most_max_chunk_size(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = client_channel(&(setup_t){.o = {.max_chunk_size = 4}});
    write_request(ch, "GET");
    free(outbound_str(ch));
    feed_str(ch,
             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n0\r\n\r\n");
    eddy_http_client_response_t *r = next_response(ch, EDDY_MSG_HTTP_RESPONSE_HEAD);
    assert_true(r->chunked);
    assert_int_equal(r->content_length, -1);
    release_resp(r);
    const char *want[] = {"0123", "4567", "89", ""};
    for (size_t i = 0; i < 4; i++) {
        eddy_http_content_t *c = eddy_http_content_of(eddy_embedded_read_inbound(ch));
        assert_non_null(c);
        assert_body(c->data, want[i]);
        assert_int_equal(c->last, i == 3);
        eddy_msg_release(&c->_msg);
    }
    finish_clean(ch, live);
}

static void test_101_ends_http_and_passes_the_bytes_after_it(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = aggregating();
    write_request(ch, "GET");
    free(outbound_str(ch));
    feed_str(ch, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x02hi");
    expect_full(ch, 101, "", true);
    eddy_buf_t *b = eddy_buf_of(eddy_embedded_read_inbound(ch));
    assert_non_null(b);
    assert_body(b, "\x81\x02hi");
    eddy_buf_release(b);
    feed_str(ch, "HTTP/1.1 200 OK\r\n\r\n"); /* not HTTP any more: bytes */
    b = eddy_buf_of(eddy_embedded_read_inbound(ch));
    assert_non_null(b);
    eddy_buf_release(b);
    eddy_embedded_shutdown_input(ch);
    assert_int_equal(eddy_embedded_error(ch), 0);
    finish_clean(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * Errors
 */

static void test_malformed_responses_fail_the_connection(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static const char *const bad[] = {
        "HTTP/2.0 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 099 Low\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1  200 OK\r\n\r\n",
        "http/1.1 200 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456789\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
        "HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n",
        "HTTP/1.1 200 OK\r\nBad Name: a\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
        "HTTP/1.1 200 O\x01K\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: \x7f\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        for (size_t chunk = 0; chunk <= 1; chunk++) {
            eddy_channel_t *ch = aggregating();
            write_request(ch, "GET");
            write_request(ch, "GET");
            free(outbound_str(ch));
            /* The stream is dropped from the error on: a valid response after it is not
             * decoded. */
            feed(ch, bad[i], strlen(bad[i]), chunk);
            if (eddy_channel_is_open(ch)) {
                feed_str(ch, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
            }
            int err = eddy_embedded_error(ch);
            if (err != EDDY_EDECODE) {
                fail_msg("\"%s\" (chunk %zu): error %d", bad[i], chunk, err);
            }
            assert_false(eddy_channel_is_open(ch));
            expect_nothing(ch);
            finish_clean(ch, live);
        }
    }
    /* A response when no request waits. */
    eddy_channel_t *ch = aggregating();
    feed_str(ch, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    expect_error(ch, EDDY_EDECODE);
    expect_nothing(ch);
    finish_clean(ch, live);
    ch = aggregating();
    write_request(ch, "GET");
    free(outbound_str(ch));
    feed_str(ch, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n");
    expect_full(ch, 200, "", true);
    expect_error(ch, EDDY_EDECODE);
    finish_clean(ch, live);
}

static void test_limits_fail_the_connection_as_too_long(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    setup_t su = {.aggregate = true,
                  .max_content = 8,
                  .o = {.max_initial_line = 32, .max_header_size = 64, .max_header_count = 2}};
    char big[200];
    memset(big, 'a', sizeof(big));
    big[sizeof(big) - 1] = '\0';
    char line[256], headers[256];
    snprintf(line, sizeof(line), "HTTP/1.1 200 %s", big);
    snprintf(headers, sizeof(headers), "HTTP/1.1 200 OK\r\nX: %s", big);
    const char *const over[] = {
        line, /* endless: failed without the LF */
        "HTTP/1.1 200 OOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOK\r\n\r\n",
        headers,
        "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
        /* Refused at the head: what follows in the same read is not decoded after it. */
        "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n123456789HTTP/9.9",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n12345\r\n4\r\n6789\r\n",
        "HTTP/1.1 200 OK\r\n\r\n123456789",
    };
    for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
        for (size_t chunk = 0; chunk <= 1; chunk++) {
            eddy_channel_t *ch = client_channel(&su);
            write_request(ch, "GET");
            free(outbound_str(ch));
            feed(ch, over[i], strlen(over[i]), chunk);
            int err = eddy_embedded_error(ch);
            if (err != EDDY_ETOOLONGFRAME) {
                fail_msg("\"%.40s\" (chunk %zu): error %d", over[i], chunk, err);
            }
            assert_false(eddy_channel_is_open(ch));
            expect_nothing(ch);
            finish_clean(ch, live);
        }
    }
    /* Trailers count against the header size; a chunk-size line past the line limit is
     * malformed. */
    eddy_channel_t *ch = client_channel(&su);
    write_request(ch, "GET");
    free(outbound_str(ch));
    feed_str(ch, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: ");
    feed(ch, big, sizeof(big) - 1, 7);
    expect_error(ch, EDDY_ETOOLONGFRAME);
    finish_clean(ch, live);
    ch = client_channel(&su);
    write_request(ch, "GET");
    free(outbound_str(ch));
    feed_str(ch, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;");
    feed(ch, big, 100, 1);
    expect_error(ch, EDDY_EDECODE);
    finish_clean(ch, live);
}

static void test_a_close_before_the_answer_is_eof(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static const char *const cut[] = {
        "",
        "HTTP/1.1 200 OK\r\nContent-Le",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n",
        "HTTP/1.1 100 Continue\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
        eddy_channel_t *ch = aggregating();
        write_request(ch, "GET");
        free(outbound_str(ch));
        feed_str(ch, cut[i]);
        if (i == 5) {
            expect_full(ch, 100, "", true);
        }
        eddy_embedded_shutdown_input(ch);
        assert_int_equal(eddy_embedded_error(ch), EDDY_EOF);
        expect_nothing(ch);
        finish_clean(ch, live);
    }
    /* A body until the close, with another request still waiting: the body, then EOF. */
    eddy_channel_t *ch = aggregating();
    write_request(ch, "GET");
    write_request(ch, "GET");
    free(outbound_str(ch));
    feed_str(ch, "HTTP/1.1 200 OK\r\n\r\nall");
    eddy_embedded_shutdown_input(ch);
    expect_full(ch, 200, "all", false);
    assert_int_equal(eddy_embedded_error(ch), EDDY_EOF);
    finish_clean(ch, live);
    /* Nothing waiting: a clean end. Our own close: no error either. */
    ch = aggregating();
    write_request(ch, "GET");
    free(outbound_str(ch));
    feed_str(ch, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    expect_full(ch, 200, "", true);
    eddy_embedded_shutdown_input(ch);
    assert_int_equal(eddy_embedded_error(ch), 0);
    finish_clean(ch, live);
    ch = aggregating();
    write_request(ch, "GET");
    free(outbound_str(ch));
    feed_str(ch, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab");
    eddy_channel_close(ch, NULL);
    eddy_embedded_run_pending(ch);
    assert_int_equal(eddy_embedded_error(ch), 0);
    finish_clean(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * Expect: 100-continue
 */

static eddy_http_client_request_t *expecting(const char *body)
{
    eddy_http_client_request_t *r = request("PUT", "/e");
    eddy_http_client_request_expect(r, true);
    if (body != NULL) {
        eddy_http_client_request_set_body(r, eddy_buf_from_str(body));
    } else {
        r->chunked = true;
    }
    return r;
}

static void test_expect_continue_sends_the_body_after_100(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = aggregating();
    eddy_embedded_write_outbound(ch, eddy_http_client_request_msg(expecting("body")));
    expect_outbound(ch, "PUT /e HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    /* What is written meanwhile waits behind the body. */
    write_request(ch, "GET");
    expect_outbound(ch, "");
    feed_str(ch, "HTTP/1.1 100 Continue\r\n\r\n");
    expect_full(ch, 100, "", true);
    expect_outbound(ch, "bodyGET / HTTP/1.1\r\n\r\n");
    feed_str(ch, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
                 "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    expect_full(ch, 201, "", true);
    expect_full(ch, 200, "", true);
    finish_clean(ch, live);

    /* Chunked: its content waits too. Without content, no expectation (RFC 9110 10.1.1). */
    ch = aggregating();
    eddy_embedded_write_outbound(ch, eddy_http_client_request_msg(expecting(NULL)));
    eddy_embedded_write_outbound(ch, &eddy_http_content_new(eddy_buf_from_str("ab"), true)->_msg);
    expect_outbound(ch, "PUT /e HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                        "Expect: 100-continue\r\n\r\n");
    feed_str(ch, "HTTP/1.1 100 Continue\r\n\r\n");
    expect_full(ch, 100, "", true);
    expect_outbound(ch, "2\r\nab\r\n0\r\n\r\n");
    eddy_http_client_request_t *r = request("GET", "/");
    eddy_http_client_request_expect(r, true);
    eddy_embedded_write_outbound(ch, eddy_http_client_request_msg(r));
    expect_outbound(ch, "GET / HTTP/1.1\r\n\r\n");
    finish_clean(ch, live);
}

static int promise_errors[4];

static void record_error(eddy_future_t *f, void *arg)
{
    promise_errors[(intptr_t)arg] = eddy_future_error(f);
}

static eddy_promise_t *watched(eddy_channel_t *ch, intptr_t i)
{
    promise_errors[i] = 1;
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    assert_non_null(p);
    assert_int_equal(eddy_future_add_listener(p, record_error, (void *)i), 0);
    return p;
}

static void test_expect_continue_drops_the_body_on_a_final_answer(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = aggregating();
    eddy_embedded_write_outbound(ch, eddy_http_client_request_msg(expecting(NULL)));
    eddy_promise_t *p0 = watched(ch, 0), *p1 = watched(ch, 1), *p2 = watched(ch, 2);
    eddy_channel_write(ch, &eddy_http_content_new(eddy_buf_from_str("ab"), false)->_msg, p0);
    eddy_channel_write(ch, eddy_http_client_request_msg(request("GET", "/")), p1);
    eddy_channel_flush(ch);
    eddy_embedded_run_pending(ch);
    free(outbound_str(ch));
    feed_str(ch, "HTTP/1.1 417 Expectation Failed\r\nContent-Length: 2\r\n\r\nno");
    expect_full(ch, 417, "no", false); /* the connection is not to be reused */
    assert_int_equal(promise_errors[0], EDDY_ECANCELED);
    assert_int_equal(promise_errors[1], EDDY_ECANCELED);
    /* The rest of the dropped body is dropped as it comes, not sent. */
    eddy_channel_write(ch, &eddy_http_content_new(eddy_buf_from_str("cd"), true)->_msg, p2);
    eddy_channel_flush(ch);
    eddy_embedded_run_pending(ch);
    assert_int_equal(promise_errors[2], EDDY_ECANCELED);
    expect_outbound(ch, "");
    eddy_future_release(p0);
    eddy_future_release(p1);
    eddy_future_release(p2);
    finish_clean(ch, live);

    /* Closed while holding: what was held fails with EDDY_ECLOSED. */
    ch = aggregating();
    eddy_embedded_write_outbound(ch, eddy_http_client_request_msg(expecting("body")));
    p0 = watched(ch, 0);
    eddy_channel_write(ch, eddy_http_client_request_msg(request("GET", "/")), p0);
    eddy_embedded_run_pending(ch);
    free(outbound_str(ch));
    eddy_channel_close(ch, NULL);
    eddy_embedded_run_pending(ch);
    assert_int_equal(promise_errors[0], EDDY_ECLOSED);
    eddy_future_release(p0);
    finish_clean(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * The exchange
 */

/* Send a request without a body; the future, to release. */
static eddy_future_t *send_get(eddy_channel_t *ch, const char *method, const char *target)
{
    eddy_future_t *f = eddy_http_send(ch, request(method, target));
    assert_non_null(f);
    eddy_embedded_run_pending(ch);
    return f;
}

static void expect_future_body(eddy_future_t *f, int status, const char *body)
{
    assert_true(eddy_future_is_done(f));
    assert_int_equal(eddy_future_error(f), 0);
    eddy_http_client_response_t *r = eddy_future_http_response(f);
    assert_non_null(r);
    assert_int_equal(r->status, status);
    assert_body(r->body, body);
    eddy_future_release(f);
}

static void expect_future_error(eddy_future_t *f, int err)
{
    assert_true(eddy_future_is_done(f));
    assert_int_equal(eddy_future_error(f), err);
    assert_null(eddy_future_http_response(f));
    eddy_future_release(f);
}

static void test_exchange_completes_pipelined_sends_in_order(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = exchanging(0);
    eddy_future_t *f[3] = {send_get(ch, "GET", "/1"), send_get(ch, "HEAD", "/2"),
                           send_get(ch, "GET", "/3")};
    expect_outbound(ch, "GET /1 HTTP/1.1\r\n\r\nHEAD /2 HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\n\r\n");
    /* A request written by hand takes its place in the order; its response passes on. */
    write_request(ch, "GET");
    free(outbound_str(ch));
    for (int i = 0; i < 3; i++) {
        assert_false(eddy_future_is_done(f[i]));
    }
    feed_str(ch, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none"
                 "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n");
    assert_false(eddy_future_is_done(f[2]));
    feed_str(ch, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nthree\r\n0\r\n\r\n"
                 "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfour");
    expect_future_body(f[0], 200, "one");
    eddy_http_client_response_t *r = eddy_future_http_response(f[1]);
    assert_int_equal(r->content_length, 50);
    assert_int_equal(r->request_method, EDDY_HTTP_HEAD);
    expect_future_body(f[1], 200, "");
    expect_future_body(f[2], 200, "three");
    expect_full(ch, 200, "four", true);
    expect_nothing(ch);
    assert_true(eddy_channel_is_open(ch));
    finish_clean(ch, live);
}

static void test_exchange_fails_every_send_with_the_error_that_ended_it(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    /* A decode error. */
    eddy_channel_t *ch = exchanging(0);
    eddy_future_t *a = send_get(ch, "GET", "/"), *b = send_get(ch, "GET", "/");
    feed_str(ch, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/9.9 200 OK\r\n\r\n");
    expect_future_body(a, 200, "x");
    expect_future_error(b, EDDY_EDECODE);
    assert_false(eddy_channel_is_open(ch));
    assert_int_equal(eddy_embedded_error(ch), 0); /* handled: a send waited for it */
    /* Sent on a closed channel. */
    expect_future_error(eddy_http_send(ch, request("GET", "/")), EDDY_ECLOSED);
    finish_clean(ch, live);

    /* Too long for the aggregator. */
    ch = client_channel(&(setup_t){.aggregate = true, .max_content = 4, .exchange = true});
    a = send_get(ch, "GET", "/");
    feed_str(ch, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
    expect_future_error(a, EDDY_ETOOLONGFRAME);
    finish_clean(ch, live);

    /* The end of input. */
    ch = exchanging(0);
    a = send_get(ch, "GET", "/");
    b = send_get(ch, "GET", "/");
    eddy_embedded_shutdown_input(ch);
    expect_future_error(a, EDDY_EOF);
    expect_future_error(b, EDDY_EOF);
    finish_clean(ch, live);

    /* Our own close, and an error with nothing waiting (told on to the tail). */
    ch = exchanging(0);
    a = send_get(ch, "GET", "/");
    eddy_channel_close(ch, NULL);
    eddy_embedded_run_pending(ch);
    expect_future_error(a, EDDY_ECLOSED);
    finish_clean(ch, live);
    ch = exchanging(0);
    feed_str(ch, "HTTP/1.1 200 OK\r\n\r\n");
    expect_error(ch, EDDY_EDECODE);
    finish_clean(ch, live);

    /* No exchange in the pipeline: the send reaches the socket un-encoded. Its future fails,
     * and the write, which had no promise of its own, raises the error and closes. */
    ch = aggregating();
    a = send_get(ch, "GET", "/");
    expect_future_error(a, EDDY_EINVAL);
    expect_error(ch, EDDY_ENOTSUP);
    finish_clean(ch, live);
}

static void test_exchange_closes_after_a_response_that_does_not_keep_alive(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = exchanging(0);
    eddy_future_t *a = send_get(ch, "GET", "/"), *b = send_get(ch, "GET", "/");
    feed_str(ch, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok");
    expect_future_body(a, 200, "ok");
    expect_future_error(b, EDDY_ECLOSED);
    assert_false(eddy_channel_is_open(ch));
    finish_clean(ch, live);

    /* Expect: 100-continue answered without the body: completed, then closed. */
    ch = exchanging(0);
    a = eddy_http_send(ch, expecting("body"));
    eddy_embedded_run_pending(ch);
    free(outbound_str(ch));
    feed_str(ch, "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n");
    expect_future_body(a, 413, "");
    assert_false(eddy_channel_is_open(ch));
    expect_outbound(ch, "");
    finish_clean(ch, live);
}

static void test_exchange_times_out_the_oldest_request(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = exchanging(1000);
    eddy_future_t *a = send_get(ch, "GET", "/"), *b = send_get(ch, "GET", "/");
    eddy_embedded_advance_time(ch, 900);
    feed_str(ch, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    expect_future_body(a, 200, "");
    /* b waits from its turn: 900 ms later it is still within its second. */
    eddy_embedded_advance_time(ch, 900);
    assert_false(eddy_future_is_done(b));
    assert_true(eddy_channel_is_open(ch));
    eddy_embedded_advance_time(ch, 200);
    expect_future_error(b, EDDY_ETIMEDOUT);
    assert_false(eddy_channel_is_open(ch));
    finish_clean(ch, live);

    /* Nothing waiting, nothing to time. */
    ch = exchanging(10);
    eddy_embedded_advance_time(ch, 100);
    assert_true(eddy_channel_is_open(ch));
    finish_clean(ch, live);
}

static void test_exchange_closes_when_a_future_is_cancelled(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = exchanging(0);
    eddy_future_t *a = send_get(ch, "GET", "/"), *b = send_get(ch, "GET", "/");
    assert_int_equal(eddy_future_cancel(a), 0);
    eddy_embedded_run_pending(ch);
    assert_false(eddy_channel_is_open(ch));
    expect_future_error(a, EDDY_ECANCELED);
    expect_future_error(b, EDDY_ECLOSED);
    finish_clean(ch, live);
}

static void test_exchange_completes_an_upgrade_with_its_101(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    eddy_channel_t *ch = exchanging(0);
    eddy_future_t *a = send_get(ch, "GET", "/ws");
    feed_str(ch, "HTTP/1.1 101 Switching Protocols\r\n\r\nframes");
    expect_future_body(a, 101, "");
    assert_true(eddy_channel_is_open(ch));
    eddy_buf_t *b = eddy_buf_of(eddy_embedded_read_inbound(ch));
    assert_non_null(b);
    assert_body(b, "frames");
    eddy_buf_release(b);
    expect_future_error(eddy_http_send(ch, request("GET", "/")), EDDY_EINVAL);
    finish_clean(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * Over a socket, against an eddy HTTP server
 */

/* The server's application: answers each request with its target as the body. */
static void echo_target_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req == NULL) {
        eddy_msg_release(msg);
        return;
    }
    eddy_http_response_t *r = eddy_http_response_new(req->error != 0 ? req->error : 200);
    assert_non_null(r);
    r->keep_alive = req->keep_alive;
    eddy_http_response_set_body(r, eddy_buf_from(req->target.p, req->target.len));
    eddy_msg_release(msg);
    eddy_ctx_write_and_flush(ctx, eddy_http_response_msg(r), NULL);
}

static const eddy_handler_ops_t echo_target_ops = {
    .name = "echo_target",
    .channel_read = echo_target_read,
};

static int init_server_child(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_http_request_decoder(NULL),
                                  eddy_http_aggregator(0), eddy_http_response_encoder(),
                                  eddy_handler("app", &echo_target_ops, NULL, NULL));
}

static int init_client(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_http_client_codec(NULL),
                                  eddy_http_response_aggregator(0), eddy_http_exchange(5000));
}

static eddy_channel_t *await_channel(eddy_future_t *f)
{
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    eddy_channel_t *ch = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    return ch;
}

static void group_finish(eddy_loop_group_t *g)
{
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(g, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

static void test_exchange_pipelines_requests_to_an_eddy_server(void **state)
{
    (void)state;
    eddy_loop_group_t *sg = eddy_loop_group_new(1, NULL), *cg = eddy_loop_group_new(1, NULL);
    assert_non_null(sg);
    assert_non_null(cg);
    eddy_server_bootstrap_t *sb = eddy_server_bootstrap_new();
    eddy_bootstrap_t *cb = eddy_bootstrap_new();
    assert_non_null(sb);
    assert_non_null(cb);
    assert_int_equal(eddy_server_bootstrap_group(sb, sg, NULL), 0);
    eddy_server_bootstrap_child_init(sb, init_server_child, NULL);
    eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind(sb, "127.0.0.1", 0));
    uint16_t port = eddy_addr_port(eddy_channel_local_addr(server));
    assert_int_equal(eddy_bootstrap_group(cb, cg), 0);
    eddy_bootstrap_init(cb, init_client, NULL);
    eddy_channel_t *ch = await_channel(eddy_bootstrap_connect(cb, "127.0.0.1", port));

    /* Sent from this thread, all at once: pipelined on the one connection. */
    enum { N = 32 };
    eddy_future_t *f[N];
    char target[N][32];
    for (int i = 0; i < N; i++) {
        snprintf(target[i], sizeof(target[i]), "/req/%d", i);
        eddy_http_client_request_t *r = request(i % 3 == 2 ? "POST" : "GET", target[i]);
        assert_int_equal(eddy_http_client_request_add_header(r, "Host", "127.0.0.1"), 0);
        if (i % 3 == 2) {
            eddy_http_client_request_set_body(r, eddy_buf_from_str("payload"));
        }
        f[i] = eddy_http_send(ch, r);
        assert_non_null(f[i]);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(eddy_future_await(f[i], DEADLINE_MS), 0);
        assert_int_equal(eddy_future_error(f[i]), 0);
        eddy_http_client_response_t *r = eddy_future_http_response(f[i]);
        assert_int_equal(r->status, 200);
        assert_true(r->keep_alive);
        assert_body(r->body, target[i]);
        eddy_future_release(f[i]);
    }
    /* The last one closes: the server closes after it, and so do we. */
    eddy_http_client_request_t *r = request("GET", "/bye");
    assert_int_equal(eddy_http_client_request_add_header(r, "Host", "127.0.0.1"), 0);
    r->keep_alive = false;
    eddy_future_t *last = eddy_http_send(ch, r);
    assert_int_equal(eddy_future_await(last, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(last), 0);
    assert_false(eddy_future_http_response(last)->keep_alive);
    eddy_future_release(last);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(ch), DEADLINE_MS), 0);
    eddy_channel_release(ch);

    eddy_bootstrap_free(cb);
    eddy_channel_close(server, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(server), DEADLINE_MS), 0);
    eddy_channel_release(server);
    eddy_server_bootstrap_free(sb);
    group_finish(cg);
    group_finish(sg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_writes_the_framing_headers_itself),
        cmocka_unit_test(test_request_sends_a_large_body_by_reference),
        cmocka_unit_test(test_request_sends_a_chunked_body_as_its_content_comes),
        cmocka_unit_test(test_responses_decode_the_same_however_they_are_split),
        cmocka_unit_test(test_response_heads_carry_what_the_server_said),
        cmocka_unit_test(test_response_bodies_come_in_pieces_of_at_most_max_chunk_size),
        cmocka_unit_test(test_101_ends_http_and_passes_the_bytes_after_it),
        cmocka_unit_test(test_malformed_responses_fail_the_connection),
        cmocka_unit_test(test_limits_fail_the_connection_as_too_long),
        cmocka_unit_test(test_a_close_before_the_answer_is_eof),
        cmocka_unit_test(test_expect_continue_sends_the_body_after_100),
        cmocka_unit_test(test_expect_continue_drops_the_body_on_a_final_answer),
        cmocka_unit_test(test_exchange_completes_pipelined_sends_in_order),
        cmocka_unit_test(test_exchange_fails_every_send_with_the_error_that_ended_it),
        cmocka_unit_test(test_exchange_closes_after_a_response_that_does_not_keep_alive),
        cmocka_unit_test(test_exchange_times_out_the_oldest_request),
        cmocka_unit_test(test_exchange_closes_when_a_future_is_cancelled),
        cmocka_unit_test(test_exchange_completes_an_upgrade_with_its_101),
        cmocka_unit_test(test_exchange_pipelines_requests_to_an_eddy_server),
    };
    return cmocka_run_group_tests_name("codec.http_client", tests, NULL, NULL);
}
