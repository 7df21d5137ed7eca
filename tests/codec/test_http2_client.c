/*
 * The client side of HTTP/2 (codec/http2/client.c, client_adapter.c): a client connection
 * and its adapter on one embedded channel, eddy's server connection and adapter on another,
 * the bytes carried between them by hand. eddy_http_send() futures completed by stream;
 * bodies both ways past the windows; responses out of order; the queue above the server's
 * MAX_CONCURRENT_STREAMS and its bound; a reset by the server; GOAWAY with streams still
 * queued; a body past the limit; the response timeout on the virtual clock; a cancelled
 * future; the connection closing under streams; interim heads and trailers; a request written
 * by hand; a chunked request; streams opened directly. Then eddy_http_client_t over
 * loopback against an eddy server: h2c by prior knowledge and h2 chosen by ALPN, many
 * requests at once on one connection. Nothing leaked.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/eddy.h>

#include "codec/http2/internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEADLINE_MS 10000

#include "support/wait_util.h"

/* ---------------------------------------------------------------------------------------
 * The server: "/" answers "hello"; "/echo" the request's body; "/bytes/N" N bytes of a
 * pattern; "/hold" is kept for the test to answer; "/reset" resets its stream; "/interim"
 * answers 103, then 200; "/trailers" answers with trailers through the stream's own calls.
 */

#define MAX_HELD 16

typedef struct responder_s {
    eddy_http_request_t *held[MAX_HELD]; /* the /hold requests, in the order they came */
    size_t nheld;
    size_t requests; /* every request seen */
} responder_t;

static responder_t responder;

static uint8_t pattern_byte(size_t i)
{
    return (uint8_t)('a' + (i * 7 + i / 251) % 26);
}

static eddy_buf_t *pattern(size_t n)
{
    eddy_buf_t *b = eddy_buf_alloc(NULL, n > 0 ? n : 1, SIZE_MAX);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = pattern_byte(i);
        assert_int_equal(eddy_buf_write_bytes(b, &c, 1), 0);
    }
    return b;
}

static bool is_pattern(const eddy_buf_t *b, size_t n)
{
    if (n == 0) {
        return b == NULL || eddy_buf_readable(b) == 0;
    }
    if (b == NULL || eddy_buf_readable(b) != n) {
        return false;
    }
    const uint8_t *p = eddy_buf_read_ptr(b);
    for (size_t i = 0; i < n; i++) {
        if (p[i] != pattern_byte(i)) {
            return false;
        }
    }
    return true;
}

static eddy_buf_t *text(const char *s)
{
    eddy_buf_t *b = eddy_buf_from(s, strlen(s));
    assert_non_null(b);
    return b;
}

static eddy_http_response_t *answer(uint32_t stream_id, int status, eddy_buf_t *body)
{
    eddy_http_response_t *r = eddy_http_response_new(status);
    assert_non_null(r);
    r->stream_id = stream_id;
    assert_int_equal(eddy_http_response_add_header(r, "X-Served-By", "test"), 0);
    eddy_http_response_set_body(r, body);
    return r;
}

static eddy_h2_stream_t *server_stream(eddy_ctx_t *ctx, uint32_t id)
{
    eddy__h2_conn_t *c = eddy__h2_conn_of(eddy_ctx_pipeline(ctx));
    assert_non_null(c);
    eddy_h2_stream_t *s = eddy__h2_stream_get(c, (int32_t)id);
    assert_non_null(s);
    return s;
}

static void respond(eddy_ctx_t *ctx, eddy_http_request_t *req)
{
    eddy_http_str_t t = req->target;
    uint32_t id = req->stream_id;
    eddy_http_response_t *r = NULL;
    if (eddy_http_str_eq(t, "/hold")) {
        assert_true(responder.nheld < MAX_HELD);
        responder.held[responder.nheld++] = req;
        return;
    }
    if (eddy_http_str_eq(t, "/reset")) {
        assert_int_equal(eddy_h2_stream_reset(server_stream(ctx, id), EDDY_H2_INTERNAL_ERROR), 0);
    } else if (eddy_http_str_eq(t, "/trailers")) {
        eddy_h2_stream_t *s = server_stream(ctx, id);
        eddy_http_header_t head[] = {{{":status", 7}, {"200", 3}}, {{"x-a", 3}, {"1", 1}}};
        eddy_http_header_t tail[] = {{{"x-checksum", 10}, {"42", 2}}};
        assert_int_equal(eddy_h2_stream_send_headers(s, head, 2, false), 0);
        assert_int_equal(eddy_h2_stream_send_data(s, text("with trailers"), false, NULL), 0);
        assert_int_equal(eddy_h2_stream_send_headers(s, tail, 1, true), 0);
    } else if (eddy_http_str_eq(t, "/lying")) { /* content-length 3, 5 bytes */
        eddy_h2_stream_t *s = server_stream(ctx, id);
        eddy_http_header_t head[] = {{{":status", 7}, {"200", 3}},
                                     {{"content-length", 14}, {"3", 1}}};
        assert_int_equal(eddy_h2_stream_send_headers(s, head, 2, false), 0);
        assert_int_equal(eddy_h2_stream_send_data(s, text("12345"), true, NULL), 0);
    } else if (eddy_http_str_eq(t, "/interim")) {
        eddy_ctx_write(ctx, eddy_http_response_msg(answer(id, 103, NULL)), NULL);
        r = answer(id, 200, text("after 103"));
    } else if (eddy_http_str_eq(t, "/echo")) {
        eddy_buf_t *body = req->body;
        req->body = NULL;
        r = answer(id, 200, body);
    } else if (t.len > 7 && memcmp(t.p, "/bytes/", 7) == 0) {
        r = answer(id, 200, pattern(strtoul(t.p + 7, NULL, 10)));
    } else if (eddy_http_str_eq(t, "/")) {
        r = answer(id, 200, text("hello"));
    } else {
        r = answer(id, 404, text("not found"));
    }
    if (r != NULL) {
        r->head_only = req->method == EDDY_HTTP_HEAD;
    }
    eddy_msg_release(&req->_msg);
    if (r != NULL) {
        eddy_ctx_write_and_flush(ctx, eddy_http_response_msg(r), NULL);
    }
}

static void responder_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req == NULL || msg->type != EDDY_MSG_HTTP_FULL_REQUEST) {
        eddy_msg_release(msg);
        return;
    }
    responder.requests++;
    respond(ctx, req);
}

static const eddy_handler_ops_t responder_ops = {
    .name = "responder",
    .channel_read = responder_read,
};

static void responder_reset(void)
{
    for (size_t i = 0; i < responder.nheld; i++) {
        eddy_msg_release(&responder.held[i]->_msg);
    }
    memset(&responder, 0, sizeof(responder));
}

/* ---------------------------------------------------------------------------------------
 * A client and a server, each an embedded channel, and the bytes between them.
 */

typedef struct pair_s {
    eddy_channel_t *c, *s;
} pair_t;

typedef struct pair_options_s {
    eddy_h2_options_t client, server;
    size_t max_content;
    int64_t timeout_ms;
    bool no_adapter; /* the client connection alone: its stream messages reach the tail */
} pair_options_t;

/* Carry what each side flushed to the other until neither has anything more to say. */
static void pump(pair_t *pr)
{
    for (int round = 0; round < 10000; round++) {
        eddy_embedded_run_pending(pr->c);
        eddy_embedded_run_pending(pr->s);
        bool moved = false;
        eddy_msg_t *m;
        while ((m = eddy_embedded_read_outbound(pr->c)) != NULL) {
            eddy_embedded_write_inbound(pr->s, m);
            moved = true;
        }
        while ((m = eddy_embedded_read_outbound(pr->s)) != NULL) {
            eddy_embedded_write_inbound(pr->c, m);
            moved = true;
        }
        if (!moved) {
            return;
        }
    }
    fail_msg("the two sides never went quiet");
}

static pair_t pair_open(const pair_options_t *o)
{
    static const pair_options_t defaults;
    o = o != NULL ? o : &defaults;
    responder_reset();
    pair_t pr = {eddy_embedded_channel_new(), eddy_embedded_channel_new()};
    assert_non_null(pr.c);
    assert_non_null(pr.s);
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(pr.s),
                                            eddy_h2_connection(&o->server), eddy_h2_http_adapter(0),
                                            eddy_handler("responder", &responder_ops, NULL, NULL)),
                     0);
    eddy_pipeline_t *p = eddy_channel_pipeline(pr.c);
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(p, eddy_h2_client_connection(&o->client)), 0);
    if (!o->no_adapter) {
        assert_int_equal(
            EDDY_PIPELINE_ADD_LAST(p, eddy_h2_http_client_adapter(o->max_content, o->timeout_ms)),
            0);
    }
    pump(&pr); /* prefaces and SETTINGS both ways */
    return pr;
}

/* Close both; whatever either left at its tail is released, errors included. */
static void pair_close(pair_t *pr)
{
    pump(pr);
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_inbound(pr->c)) != NULL) {
        eddy_msg_release(m);
    }
    eddy_embedded_error(pr->c);
    eddy_embedded_error(pr->s);
    eddy_embedded_finish(pr->c);
    responder_reset();
    eddy_embedded_finish(pr->s);
}

static eddy_http_request_t *request(const char *method, const char *target)
{
    eddy_http_request_t *r = eddy_http_request_new(method, target);
    assert_non_null(r);
    assert_int_equal(eddy_http_request_add_header(r, "Host", "example.test"), 0);
    return r;
}

static eddy_future_t *send_get(pair_t *pr, const char *target)
{
    eddy_future_t *f = eddy_http_send(pr->c, request("GET", target));
    assert_non_null(f);
    return f;
}

/* The response f completed with (f must have succeeded). */
static eddy_http_response_t *response_of(eddy_future_t *f)
{
    assert_true(eddy_future_is_done(f));
    if (eddy_future_error(f) != 0) {
        fail_msg("the future failed: %s", eddy_strerror(eddy_future_error(f)));
    }
    eddy_http_response_t *r = eddy_future_http_response(f);
    assert_non_null(r);
    return r;
}

static bool body_is(const eddy_http_response_t *r, const char *s)
{
    size_t n = strlen(s);
    return r->body != NULL && eddy_buf_readable(r->body) == n &&
           memcmp(eddy_buf_read_ptr(r->body), s, n) == 0;
}

static bool header_is(const eddy_http_response_t *r, const char *name, const char *value)
{
    const eddy_http_header_t *h = eddy_http_response_header(r, name);
    return h != NULL && eddy_http_str_eq(h->value, value);
}

static int error_of(eddy_future_t *f)
{
    assert_true(eddy_future_is_done(f));
    int err = eddy_future_error(f);
    eddy_future_release(f);
    return err;
}

/* Answer the i-th held request with body. */
static void answer_held(pair_t *pr, size_t i, const char *body)
{
    assert_true(i < responder.nheld);
    eddy_http_request_t *req = responder.held[i];
    eddy_embedded_write_outbound(pr->s,
                                 eddy_http_response_msg(answer(req->stream_id, 200, text(body))));
}

/* ---------------------------------------------------------------------------------------
 * Tests through the embedded channels
 */

static void test_get(void **state)
{
    (void)state;
    pair_t pr = pair_open(NULL);
    eddy_future_t *f = send_get(&pr, "/");
    pump(&pr);
    eddy_http_response_t *r = response_of(f);
    assert_int_equal(r->_msg.type, EDDY_MSG_HTTP_FULL_RESPONSE);
    assert_int_equal(r->status, 200);
    assert_int_equal(r->version, 20);
    assert_int_equal(r->stream_id, 1);
    assert_true(r->keep_alive);
    assert_int_equal(r->request_method, EDDY_HTTP_GET);
    assert_true(eddy_http_str_eq(r->reason, "OK"));
    assert_true(body_is(r, "hello"));
    assert_int_equal(r->content_length, 5);
    assert_true(header_is(r, "x-served-by", "test"));
    assert_true(header_is(r, "Content-Length", "5"));
    for (size_t i = 0; i < r->header_count; i++) {
        assert_true(r->headers[i].name.p[0] != ':'); /* no pseudo-header field */
    }
    eddy_future_release(f);
    /* A second request on the same connection: stream 3; a 404 is a response too. */
    f = send_get(&pr, "/nope");
    pump(&pr);
    r = response_of(f);
    assert_int_equal(r->status, 404);
    assert_int_equal(r->stream_id, 3);
    assert_true(body_is(r, "not found"));
    eddy_future_release(f);
    /* HEAD: the length, no body. */
    f = eddy_http_send(pr.c, request("HEAD", "/"));
    pump(&pr);
    r = response_of(f);
    assert_int_equal(r->status, 200);
    assert_null(r->body);
    assert_int_equal(r->request_method, EDDY_HTTP_HEAD);
    eddy_future_release(f);
    assert_int_equal(responder.requests, 3);
    pair_close(&pr);
}

/* Bodies larger than every window, both ways: the windows come back as bytes are used. */
static void test_bodies_past_windows(void **state)
{
    (void)state;
    pair_t pr = pair_open(NULL);
    size_t n = 300000;
    eddy_http_request_t *req = request("POST", "/echo");
    eddy_http_request_set_body(req, pattern(n));
    eddy_future_t *echo = eddy_http_send(pr.c, req);
    eddy_future_t *big = send_get(&pr, "/bytes/700000");
    eddy_future_t *empty = eddy_http_send(pr.c, request("POST", "/echo"));
    pump(&pr);
    assert_true(is_pattern(response_of(echo)->body, n));
    assert_true(is_pattern(response_of(big)->body, 700000));
    assert_null(response_of(empty)->body);
    eddy_future_release(echo);
    eddy_future_release(big);
    eddy_future_release(empty);
    pair_close(&pr);
}

/* Responses in the order the server chose, each to its own future. */
static void test_out_of_order(void **state)
{
    (void)state;
    pair_t pr = pair_open(NULL);
    eddy_future_t *f[5];
    for (size_t i = 0; i < 5; i++) {
        f[i] = send_get(&pr, "/hold");
    }
    pump(&pr);
    assert_int_equal(responder.nheld, 5);
    char body[32];
    for (size_t i = 5; i-- > 0;) {
        snprintf(body, sizeof(body), "answer %zu", i);
        answer_held(&pr, i, body);
        pump(&pr);
        assert_true(eddy_future_is_done(f[i]));
        assert_false(i > 0 && eddy_future_is_done(f[i - 1]));
    }
    for (size_t i = 0; i < 5; i++) {
        snprintf(body, sizeof(body), "answer %zu", i);
        eddy_http_response_t *r = response_of(f[i]);
        assert_true(body_is(r, body));
        assert_int_equal(r->stream_id, 2 * i + 1);
        eddy_future_release(f[i]);
    }
    pair_close(&pr);
}

/* The server allows 2 streams: the rest wait, at most 2 of them, and go as slots free. */
static void test_queue_above_limit(void **state)
{
    (void)state;
    pair_options_t o = {.server = {.max_concurrent_streams = 2},
                        .client = {.max_queued_streams = 2}};
    pair_t pr = pair_open(&o);
    eddy_future_t *f[4];
    for (size_t i = 0; i < 4; i++) {
        f[i] = send_get(&pr, "/hold");
    }
    eddy_future_t *over = send_get(&pr, "/hold");
    pump(&pr);
    assert_int_equal(error_of(over), EDDY_EBUSY);
    assert_int_equal(responder.nheld, 2);
    answer_held(&pr, 0, "first");
    pump(&pr);
    assert_int_equal(responder.nheld, 3); /* a slot freed: the third went */
    answer_held(&pr, 1, "second");
    answer_held(&pr, 2, "third");
    pump(&pr);
    assert_int_equal(responder.nheld, 4);
    answer_held(&pr, 3, "fourth");
    pump(&pr);
    const char *bodies[] = {"first", "second", "third", "fourth"};
    for (size_t i = 0; i < 4; i++) {
        assert_true(body_is(response_of(f[i]), bodies[i]));
        eddy_future_release(f[i]);
    }
    pair_close(&pr);
}

/* The server resets a stream, or breaks the protocol in one: that stream fails alone. */
static void test_reset_by_server(void **state)
{
    (void)state;
    pair_t pr = pair_open(NULL);
    eddy_future_t *f = send_get(&pr, "/reset");
    eddy_future_t *ok = send_get(&pr, "/");
    eddy_future_t *lying = send_get(&pr, "/lying");
    pump(&pr);
    assert_int_equal(error_of(f), EDDY_ECONNRESET);
    /* A body longer than its content-length: nghttp2 resets the stream (PROTOCOL_ERROR). */
    assert_int_equal(error_of(lying), EDDY_ECONNRESET);
    assert_true(body_is(response_of(ok), "hello"));
    eddy_future_release(ok);
    pair_close(&pr);
}

/* The server's GOAWAY (a graceful close): the stream it took finishes; those still queued
 * past its limit fail with EDDY_ECONNABORTED; no stream opens after. */
static void test_goaway(void **state)
{
    (void)state;
    pair_options_t o = {.server = {.max_concurrent_streams = 1}};
    pair_t pr = pair_open(&o);
    eddy_future_t *taken = send_get(&pr, "/hold");
    eddy_future_t *queued1 = send_get(&pr, "/hold");
    eddy_future_t *queued2 = send_get(&pr, "/");
    pump(&pr);
    assert_int_equal(responder.nheld, 1);
    eddy_channel_close(pr.s, NULL); /* GOAWAY, last stream 1 */
    pump(&pr);
    assert_int_equal(error_of(queued1), EDDY_ECONNABORTED);
    assert_int_equal(error_of(queued2), EDDY_ECONNABORTED);
    assert_false(eddy_future_is_done(taken));
    int events[8];
    size_t n = eddy_embedded_events(pr.c, events, 8);
    bool goaway = false;
    for (size_t i = 0; i < n; i++) {
        goaway = goaway || events[i] == EDDY_EVENT_H2_GOAWAY;
    }
    assert_true(goaway);
    eddy_future_t *late = send_get(&pr, "/");
    pump(&pr);
    assert_int_equal(error_of(late), EDDY_ECONNABORTED);
    /* Answered through the stream itself: the server's connection closes inside this send
     * (its last stream ended after its GOAWAY), and eddy_h2_http_adapter() does not expect
     * to be removed under its own write. */
    eddy__h2_conn_t *sc = eddy__h2_conn_of(eddy_channel_pipeline(pr.s));
    eddy_h2_stream_t *s = eddy__h2_stream_get(sc, 1);
    assert_non_null(s);
    eddy_http_header_t head[] = {{{":status", 7}, {"200", 3}}};
    assert_int_equal(eddy_h2_stream_send_headers(s, head, 1, false), 0);
    assert_int_equal(eddy_h2_stream_send_data(s, text("finished"), true, NULL), 0);
    pump(&pr);
    assert_true(body_is(response_of(taken), "finished"));
    eddy_future_release(taken);
    pair_close(&pr);
}

static void test_body_too_long(void **state)
{
    (void)state;
    pair_options_t o = {.max_content = 1000};
    pair_t pr = pair_open(&o);
    eddy_future_t *f = send_get(&pr, "/bytes/5000");
    eddy_future_t *fits = send_get(&pr, "/bytes/1000");
    pump(&pr);
    assert_int_equal(error_of(f), EDDY_ETOOLONGFRAME);
    assert_true(is_pattern(response_of(fits)->body, 1000));
    eddy_future_release(fits);
    /* The connection goes on. */
    f = send_get(&pr, "/");
    pump(&pr);
    assert_true(body_is(response_of(f), "hello"));
    eddy_future_release(f);
    pair_close(&pr);
}

/* The response timeout ends its stream only; the server sees the reset. */
static void test_timeout(void **state)
{
    (void)state;
    pair_options_t o = {.timeout_ms = 1000};
    pair_t pr = pair_open(&o);
    eddy_future_t *f = send_get(&pr, "/hold");
    pump(&pr);
    eddy_embedded_advance_time(pr.c, 500);
    eddy_future_t *quick = send_get(&pr, "/");
    pump(&pr);
    assert_true(body_is(response_of(quick), "hello"));
    eddy_future_release(quick);
    assert_false(eddy_future_is_done(f));
    eddy_embedded_advance_time(pr.c, 600);
    pump(&pr);
    assert_int_equal(error_of(f), EDDY_ETIMEDOUT);
    eddy_h2_stream_t *s = eddy__h2_stream_get(eddy__h2_conn_of(eddy_channel_pipeline(pr.s)), 1);
    assert_null(s); /* the server's stream 1 closed: the reset reached it */
    f = send_get(&pr, "/");
    pump(&pr);
    assert_true(body_is(response_of(f), "hello"));
    eddy_future_release(f);
    pair_close(&pr);
}

static void test_cancel(void **state)
{
    (void)state;
    pair_t pr = pair_open(NULL);
    eddy_future_t *f = send_get(&pr, "/hold");
    eddy_future_t *other = send_get(&pr, "/hold");
    pump(&pr);
    assert_int_equal(eddy_future_cancel(f), 0);
    pump(&pr);
    assert_int_equal(error_of(f), EDDY_ECANCELED);
    eddy__h2_conn_t *sc = eddy__h2_conn_of(eddy_channel_pipeline(pr.s));
    assert_null(eddy__h2_stream_get(sc, 1));
    assert_non_null(eddy__h2_stream_get(sc, 3));
    answer_held(&pr, 1, "still here");
    pump(&pr);
    assert_true(body_is(response_of(other), "still here"));
    eddy_future_release(other);
    pair_close(&pr);
}

/* A stream still waiting past the server's limit is cancelled before it ever went out. */
static void test_cancel_queued(void **state)
{
    (void)state;
    pair_options_t o = {.server = {.max_concurrent_streams = 1}};
    pair_t pr = pair_open(&o);
    eddy_future_t *first = send_get(&pr, "/hold");
    eddy_future_t *queued = send_get(&pr, "/");
    eddy_future_t *after = send_get(&pr, "/");
    pump(&pr);
    assert_int_equal(eddy_future_cancel(queued), 0);
    pump(&pr);
    assert_int_equal(error_of(queued), EDDY_ECANCELED);
    answer_held(&pr, 0, "one");
    pump(&pr);
    assert_true(body_is(response_of(first), "one"));
    eddy_http_response_t *r = response_of(after);
    assert_true(body_is(r, "hello"));
    assert_int_equal(r->stream_id, 5);
    assert_int_equal(responder.requests, 2); /* stream 3 never reached the server */
    eddy_future_release(first);
    eddy_future_release(after);
    pair_close(&pr);
}

static void test_connection_lost(void **state)
{
    (void)state;
    pair_t pr = pair_open(NULL);
    eddy_future_t *f = send_get(&pr, "/hold");
    pump(&pr);
    eddy_embedded_shutdown_input(pr.c);
    eddy_embedded_run_pending(pr.c);
    assert_int_equal(error_of(f), EDDY_ECLOSED);
    f = send_get(&pr, "/");
    eddy_embedded_run_pending(pr.c);
    assert_int_equal(error_of(f), EDDY_ECLOSED);
    pair_close(&pr);
}

static void test_interim_and_trailers(void **state)
{
    (void)state;
    pair_t pr = pair_open(NULL);
    eddy_future_t *interim = send_get(&pr, "/interim");
    eddy_future_t *trailers = send_get(&pr, "/trailers");
    pump(&pr);
    eddy_http_response_t *r = response_of(interim);
    assert_int_equal(r->status, 200);
    assert_true(body_is(r, "after 103"));
    r = response_of(trailers);
    assert_true(body_is(r, "with trailers"));
    assert_true(header_is(r, "x-a", "1"));
    assert_null(eddy_http_response_header(r, "x-checksum")); /* trailers are not kept */
    eddy_future_release(interim);
    eddy_future_release(trailers);
    pair_close(&pr);
}

/* A request written by hand: its full response passes on to the tail. */
static void test_by_hand(void **state)
{
    (void)state;
    pair_t pr = pair_open(NULL);
    eddy_embedded_write_outbound(pr.c, eddy_http_request_msg(request("GET", "/")));
    pump(&pr);
    eddy_msg_t *m = eddy_embedded_read_inbound(pr.c);
    assert_non_null(m);
    assert_int_equal(m->type, EDDY_MSG_HTTP_FULL_RESPONSE);
    assert_true(body_is(eddy_http_response_of(m), "hello"));
    eddy_msg_release(m);
    /* Bytes written at the adapter would break the framing. */
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_channel_write_and_flush(pr.c, eddy_buf_msg(text("GET / HTTP/1.1\r\n\r\n")), p);
    eddy_embedded_run_pending(pr.c);
    assert_int_equal(error_of(p), EDDY_ENOTSUP);
    pair_close(&pr);
}

/* A chunked request: its content messages are the stream's body. */
static void test_chunked_request(void **state)
{
    (void)state;
    pair_t pr = pair_open(NULL);
    eddy_http_request_t *req = request("POST", "/echo");
    req->chunked = true;
    eddy_future_t *f = eddy_http_send(pr.c, req);
    eddy_future_t *busy = send_get(&pr, "/"); /* not before the chunked body ends */
    eddy_embedded_run_pending(pr.c);
    assert_int_equal(error_of(busy), EDDY_EBUSY);
    const char *parts[] = {"one,", "two,", "three"};
    for (size_t i = 0; i < 3; i++) {
        eddy_http_content_t *c = eddy_http_content_new(text(parts[i]), i == 2);
        assert_non_null(c);
        eddy_channel_write_and_flush(pr.c, &c->_msg, NULL);
        pump(&pr);
    }
    assert_true(body_is(response_of(f), "one,two,three"));
    eddy_future_release(f);
    pair_close(&pr);
}

/* Streams opened directly: the stream messages reach the tail. */
static void test_stream_open(void **state)
{
    (void)state;
    pair_options_t o = {.no_adapter = true};
    pair_t pr = pair_open(&o);
    eddy_http_header_t get[] = {{{":method", 7}, {"GET", 3}},
                                {{":scheme", 7}, {"http", 4}},
                                {{":authority", 10}, {"example.test", 12}},
                                {{":path", 5}, {"/bytes/10", 9}},
                                {{"accept", 6}, {"*/*", 3}}};
    int err = 1;
    eddy_h2_stream_t *s = eddy_h2_stream_open(pr.c, get, 5, true, &err);
    assert_non_null(s);
    assert_int_equal(err, 0);
    assert_int_equal(eddy_h2_stream_id(s), 1);
    pump(&pr);
    eddy_msg_t *m = eddy_embedded_read_inbound(pr.c);
    eddy_h2_headers_t *h = eddy_h2_headers_of(m);
    assert_non_null(h);
    assert_ptr_equal(h->stream, s);
    assert_false(h->trailers);
    const eddy_http_header_t *status = eddy_h2_headers_get(h, ":status");
    assert_non_null(status);
    assert_true(eddy_http_str_eq(status->value, "200"));
    eddy_msg_release(m);
    size_t got = 0;
    bool ended = false;
    while ((m = eddy_embedded_read_inbound(pr.c)) != NULL) {
        eddy_h2_data_t *d = eddy_h2_data_of(m);
        assert_non_null(d);
        got += eddy_buf_readable(d->data);
        ended = d->end_stream;
        eddy_h2_stream_consume(d->stream, eddy_buf_readable(d->data));
        eddy_msg_release(m);
    }
    assert_int_equal(got, 10);
    assert_true(ended);
    assert_true(eddy_h2_stream_is_closed(s));
    eddy_h2_stream_release(s);
    /* A body through the stream: POST /echo. */
    eddy_http_header_t post[] = {{{":method", 7}, {"POST", 4}},
                                 {{":scheme", 7}, {"http", 4}},
                                 {{":authority", 10}, {"example.test", 12}},
                                 {{":path", 5}, {"/echo", 5}}};
    s = eddy_h2_stream_open(pr.c, post, 4, false, &err);
    assert_non_null(s);
    assert_int_equal(eddy_h2_stream_send_data(s, text("ping"), true, NULL), 0);
    pump(&pr);
    m = eddy_embedded_read_inbound(pr.c);
    assert_non_null(eddy_h2_headers_of(m));
    eddy_msg_release(m);
    m = eddy_embedded_read_inbound(pr.c);
    assert_non_null(eddy_h2_data_of(m));
    assert_int_equal(eddy_buf_readable(eddy_h2_data_of(m)->data), 4);
    eddy_msg_release(m);
    eddy_h2_stream_release(s);
    /* Refused: pseudo-header fields after a regular one, no :method, no :path, a
     * connection-specific field, the server's side. */
    eddy_http_header_t late[] = {{{"accept", 6}, {"*/*", 3}}, {{":method", 7}, {"GET", 3}}};
    assert_null(eddy_h2_stream_open(pr.c, late, 2, true, &err));
    assert_int_equal(err, EDDY_EINVAL);
    assert_null(eddy_h2_stream_open(pr.c, get + 1, 4, true, &err));
    assert_int_equal(err, EDDY_EINVAL);
    assert_null(eddy_h2_stream_open(pr.c, get, 3, true, &err));
    assert_int_equal(err, EDDY_EINVAL);
    eddy_http_header_t conn[] = {{{":method", 7}, {"GET", 3}},
                                 {{":scheme", 7}, {"http", 4}},
                                 {{":path", 5}, {"/", 1}},
                                 {{"connection", 10}, {"close", 5}}};
    assert_null(eddy_h2_stream_open(pr.c, conn, 4, true, &err));
    assert_int_equal(err, EDDY_EINVAL);
    assert_null(eddy_h2_stream_open(pr.s, get, 5, true, &err));
    assert_int_equal(err, EDDY_EINVAL);
    pair_close(&pr);
}

/* ---------------------------------------------------------------------------------------
 * eddy_http_client_t over loopback
 */

static _Atomic uint64_t accepted;

static void served_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req == NULL) {
        eddy_msg_release(msg);
        return;
    }
    char body[256];
    snprintf(body, sizeof(body), "%.*s %.*s v%d", (int)req->method_name.len, req->method_name.p,
             (int)req->target.len, req->target.p, req->version);
    eddy_http_response_t *r = eddy_http_response_new(200);
    assert_non_null(r);
    r->stream_id = req->stream_id;
    eddy_http_response_set_body(r, text(body));
    eddy_msg_release(msg);
    eddy_ctx_write_and_flush(ctx, eddy_http_response_msg(r), NULL);
}

static const eddy_handler_ops_t served_ops = {
    .name = "served",
    .sharable = true,
    .channel_read = served_read,
};

typedef struct served_s {
    eddy_tls_context_t *tls;
    eddy_h2_options_t h2;
} served_t;

static int served_init(eddy_channel_t *ch, void *arg)
{
    atomic_fetch_add(&accepted, 1);
    served_t *sv = arg;
    if (sv->tls != NULL) {
        int rc = eddy_tls_add(ch, sv->tls, NULL, NULL);
        if (rc != 0) {
            return rc;
        }
    }
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_h2_server_upgrade(&sv->h2, 0),
                                  eddy_http_request_decoder(NULL), eddy_http_aggregator(0),
                                  eddy_http_response_encoder(),
                                  eddy_handler("served", &served_ops, NULL, NULL));
}

typedef struct env_s {
    eddy_loop_group_t *server_group, *client_group;
    eddy_server_bootstrap_t *sb;
    eddy_channel_t *server;
    eddy_http_client_t *client;
    eddy_tls_context_t *server_tls, *client_tls;
    served_t served;
    char base[128]; /* http://127.0.0.1:port or https://localhost:port */
} env_t;

/* A server (TLS or not; its HTTP/2 options h2, NULL: the defaults) and a client (o). */
static void env_open_with(env_t *e, bool tls, eddy_http_client_options_t *o,
                          const eddy_h2_options_t *h2)
{
    memset(e, 0, sizeof(*e));
    if (h2 != NULL) {
        e->served.h2 = *h2;
    }
    atomic_store(&accepted, 0);
    if (tls) {
        eddy_tls_self_signed_t *ss = NULL;
        assert_int_equal(eddy_tls_self_signed_new("localhost", 1, &ss), 0);
        const char *cert = eddy_tls_self_signed_cert_pem(ss);
        const char *key = eddy_tls_self_signed_key_pem(ss);
        e->server_tls = eddy_tls_context_new(EDDY_TLS_SERVER);
        e->client_tls = eddy_tls_context_new(EDDY_TLS_CLIENT);
        assert_non_null(e->server_tls);
        assert_non_null(e->client_tls);
        assert_int_equal(eddy_tls_context_use_certificate_pem(e->server_tls, cert, strlen(cert),
                                                              key, strlen(key)),
                         0);
        size_t n;
        const char *const *alpn = eddy_h2_alpn_protocols(&n);
        assert_int_equal(eddy_tls_context_alpn(e->server_tls, alpn, n), 0);
        assert_int_equal(eddy_tls_context_alpn(e->client_tls, alpn, n), 0);
        assert_int_equal(eddy_tls_context_trust_pem(e->client_tls, cert, strlen(cert)), 0);
        eddy_tls_self_signed_free(ss);
        o->tls = e->client_tls;
    }
    e->server_group = eddy_loop_group_new(1, NULL);
    e->client_group = eddy_loop_group_new(2, NULL);
    e->sb = eddy_server_bootstrap_new();
    assert_non_null(e->server_group);
    assert_non_null(e->client_group);
    assert_non_null(e->sb);
    assert_int_equal(eddy_server_bootstrap_group(e->sb, e->server_group, NULL), 0);
    e->served.tls = e->server_tls;
    eddy_server_bootstrap_child_init(e->sb, served_init, &e->served);
    eddy_future_t *f = eddy_server_bootstrap_bind(e->sb, "127.0.0.1", 0);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    e->server = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    snprintf(e->base, sizeof(e->base), "%s://%s:%u", tls ? "https" : "http",
             tls ? "localhost" : "127.0.0.1", eddy_addr_port(eddy_channel_local_addr(e->server)));
    e->client = eddy_http_client_new(e->client_group, o);
    assert_non_null(e->client);
}

static void env_open(env_t *e, bool tls, eddy_http_client_options_t *o)
{
    env_open_with(e, tls, o, NULL);
}

static void group_finish(eddy_loop_group_t *g)
{
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(g, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

static void env_close(env_t *e)
{
    eddy_future_t *f = eddy_http_client_close(e->client);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    eddy_future_release(f);
    eddy_channel_close(e->server, NULL);
    eddy_channel_release(e->server);
    group_finish(e->client_group);
    eddy_server_bootstrap_free(e->sb);
    group_finish(e->server_group);
    eddy_tls_context_release(e->server_tls);
    eddy_tls_context_release(e->client_tls);
}

/* n GETs of base/i at once: each answered "GET /i v20" (over HTTP/2), all on one connection. */
static void many_at_once(env_t *e, size_t n, int version)
{
    eddy_future_t **f = calloc(n, sizeof(*f));
    assert_non_null(f);
    char url[192], want[64];
    for (size_t i = 0; i < n; i++) {
        snprintf(url, sizeof(url), "%s/%zu", e->base, i);
        f[i] = eddy_http_client_get(e->client, url);
        assert_non_null(f[i]);
    }
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(eddy_future_await(f[i], DEADLINE_MS), 0);
        eddy_http_response_t *r = response_of(f[i]);
        snprintf(want, sizeof(want), "GET /%zu v%d", i, version);
        assert_int_equal(r->version, version == 20 ? 20 : 11);
        if (!body_is(r, want)) {
            fail_msg("response %zu: %.*s", i, (int)eddy_buf_readable(r->body),
                     (const char *)eddy_buf_read_ptr(r->body));
        }
        eddy_future_release(f[i]);
    }
    free(f);
}

static void test_client_prior_knowledge(void **state)
{
    (void)state;
    env_t e;
    eddy_http_client_options_t o = {.http_version = EDDY_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE};
    env_open(&e, false, &o);
    many_at_once(&e, 200, 20);
    many_at_once(&e, 10, 20);
    assert_int_equal(atomic_load(&accepted), 1); /* one connection carried them all */
    /* A POST with a body. */
    eddy_http_request_t *req = eddy_http_request_new("POST", "/");
    assert_non_null(req);
    eddy_http_request_set_body(req, text("x=1"));
    char url[192];
    snprintf(url, sizeof(url), "%s/post", e.base);
    eddy_future_t *f = eddy_http_client_send(e.client, url, req);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_true(body_is(response_of(f), "POST /post v20"));
    eddy_future_release(f);
    env_close(&e);
}

static void test_client_alpn(void **state)
{
    (void)state;
    if (!eddy_tls_available()) {
        skip();
    }
    env_t e;
    eddy_http_client_options_t o = {0};
    env_open(&e, true, &o);
    many_at_once(&e, 100, 20);
    assert_int_equal(atomic_load(&accepted), 1);
    env_close(&e);
    /* HTTP/1.1 only: the same server answers over HTTP/1.1, several connections. */
    eddy_http_client_options_t h1 = {.http_version = EDDY_HTTP_CLIENT_HTTP1,
                                     .max_connections_per_host = 4};
    env_open(&e, true, &h1);
    many_at_once(&e, 20, 11);
    assert_true(atomic_load(&accepted) > 1);
    env_close(&e);
}

/* The server ends an idle connection (GOAWAY, close): the next requests go on a new one. */
static void test_client_server_goes_away(void **state)
{
    (void)state;
    env_t e;
    eddy_http_client_options_t o = {.http_version = EDDY_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE};
    eddy_h2_options_t h2 = {.idle_timeout_ms = 200};
    env_open_with(&e, false, &o, &h2);
    many_at_once(&e, 20, 20);
    assert_int_equal(atomic_load(&accepted), 1);
    usleep(1500 * 1000); /* idle past the server's limit: it says GOAWAY and closes */
    many_at_once(&e, 20, 20);
    assert_int_equal(atomic_load(&accepted), 2);
    env_close(&e);
}

/* Without prior knowledge, http:// stays HTTP/1.1. */
static void test_client_plain_default(void **state)
{
    (void)state;
    env_t e;
    eddy_http_client_options_t o = {0};
    env_open(&e, false, &o);
    many_at_once(&e, 4, 11);
    env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_bodies_past_windows),
        cmocka_unit_test(test_out_of_order),
        cmocka_unit_test(test_queue_above_limit),
        cmocka_unit_test(test_reset_by_server),
        cmocka_unit_test(test_goaway),
        cmocka_unit_test(test_body_too_long),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_cancel_queued),
        cmocka_unit_test(test_connection_lost),
        cmocka_unit_test(test_interim_and_trailers),
        cmocka_unit_test(test_by_hand),
        cmocka_unit_test(test_chunked_request),
        cmocka_unit_test(test_stream_open),
        cmocka_unit_test(test_client_prior_knowledge),
        cmocka_unit_test(test_client_alpn),
        cmocka_unit_test(test_client_server_goes_away),
        cmocka_unit_test(test_client_plain_default),
    };
    int failed = cmocka_run_group_tests_name("codec.http2_client", tests, NULL, NULL);
    eddy_library_shutdown();
    return failed;
}
