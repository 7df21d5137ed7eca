/*
 * eddy_http_client_t (codec/http/client.c) against an eddy HTTP server on 127.0.0.1: URL
 * parsing, a GET with Host and target from the URL, keep-alive reuse through the pool, a
 * response that closes its connection, a POST body, the response timeout, cancelling, a
 * refused connect, a server that closes pooled connections while idle, closing the client with
 * a request in flight, four threads sharing a pool of two connections, and compressed
 * responses decompressed (a gzip bomb refused). Every test is
 * bounded in time and frees what it made.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/eddy.h>

#include "support/coding_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define DEADLINE_MS 10000

#include "support/wait_util.h"

/* ---------------------------------------------------------------------------------------
 * The server: answers "METHOD TARGET HOST BODY" as its body; /close answers and closes; /stall
 * never answers; /drop closes without answering.
 */

static _Atomic uint64_t accepted;

static eddy_buf_t *text(const char *fmt, ...)
{
    char s[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s, sizeof(s), fmt, ap);
    va_end(ap);
    eddy_buf_t *b = eddy_buf_alloc(NULL, (size_t)n, SIZE_MAX);
    assert_non_null(b);
    assert_int_equal(eddy_buf_write_bytes(b, s, (size_t)n), 0);
    return b;
}

/* What /text answers: 100 KB of text, which the server's compressor compresses in the
 * coding the request accepts; its Accept-Encoding comes back in X-Accept. */
static eddy_buf_t *text_100k(void)
{
    eddy_buf_t *b = eddy_buf_new(100000);
    assert_non_null(b);
    for (size_t i = 0; eddy_buf_readable(b) < 100000; i++) {
        char line[32];
        int n = snprintf(line, sizeof(line), "line %zu of the text\n", i);
        size_t k = 100000 - eddy_buf_readable(b);
        eddy_buf_write_bytes(b, line, (size_t)n < k ? (size_t)n : k);
    }
    return b;
}

static void coded_answer(eddy_ctx_t *ctx, const eddy_http_request_t *req)
{
    eddy_http_response_t *r = eddy_http_response_new(200);
    assert_non_null(r);
    const eddy_http_header_t *ae = eddy_http_request_header(req, "accept-encoding");
    char accept[128];
    snprintf(accept, sizeof(accept), "%.*s", ae != NULL ? (int)ae->value.len : 1,
             ae != NULL ? ae->value.p : "-");
    eddy_http_response_add_header(r, "X-Accept", accept);
    eddy_http_response_add_header(r, "Content-Type", "text/plain");
    if (eddy_http_str_eq(req->target, "/bomb")) {
        eddy_http_response_add_header(r, "Content-Encoding", "gzip");
        eddy_http_response_set_body(r, gzip_zeros(64)); /* 64 KiB */
    } else {
        eddy_http_response_set_body(r, text_100k());
    }
    eddy_ctx_write_and_flush(ctx, eddy_http_response_msg(r), NULL);
}

static void server_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req == NULL) {
        eddy_msg_release(msg);
        return;
    }
    if (eddy_http_str_eq(req->target, "/stall")) {
        eddy_msg_release(msg);
        return;
    }
    if (eddy_http_str_eq(req->target, "/drop")) {
        eddy_msg_release(msg);
        eddy_ctx_close(ctx, NULL);
        return;
    }
    if (eddy_http_str_eq(req->target, "/text") || eddy_http_str_eq(req->target, "/bomb")) {
        coded_answer(ctx, req);
        eddy_msg_release(msg);
        return;
    }
    const eddy_http_header_t *host = eddy_http_request_header(req, "Host");
    size_t blen = req->body != NULL ? eddy_buf_readable(req->body) : 0;
    eddy_http_response_t *r = eddy_http_response_new(200);
    assert_non_null(r);
    eddy_http_response_set_body(
        r, text("%.*s %.*s %.*s %.*s", (int)req->method_name.len, req->method_name.p,
                (int)req->target.len, req->target.p, host != NULL ? (int)host->value.len : 1,
                host != NULL ? host->value.p : "-", (int)blen,
                blen > 0 ? (const char *)eddy_buf_read_ptr(req->body) : ""));
    r->keep_alive = req->keep_alive && !eddy_http_str_eq(req->target, "/close");
    eddy_msg_release(msg);
    eddy_ctx_write_and_flush(ctx, eddy_http_response_msg(r), NULL);
}

static const eddy_handler_ops_t server_ops = {
    .name = "server",
    .sharable = true,
    .channel_read = server_read,
};

static int init_child(eddy_channel_t *ch, void *arg)
{
    atomic_fetch_add(&accepted, 1);
    int rc = eddy_channel_group_add(arg, ch);
    return rc != 0 ? rc
                   : EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch),
                                            eddy_h2_server_upgrade(NULL, 0),
                                            eddy_http_request_decoder(NULL),
                                            eddy_http_aggregator(0), eddy_http_response_encoder(),
                                            eddy_http_compressor(NULL),
                                            eddy_handler("server", &server_ops, NULL, NULL));
}

typedef struct env_s {
    eddy_loop_group_t *server_group, *client_group;
    eddy_server_bootstrap_t *sb;
    eddy_channel_group_t *children;
    eddy_channel_t *server;
    uint16_t port;
    eddy_http_client_t *client;
    char url[128]; /* http://127.0.0.1:port */
} env_t;

static void env_open(env_t *e, const eddy_http_client_options_t *o)
{
    memset(e, 0, sizeof(*e));
    atomic_store(&accepted, 0);
    e->server_group = eddy_loop_group_new(1, NULL);
    e->client_group = eddy_loop_group_new(2, NULL);
    e->children = eddy_channel_group_new("children");
    e->sb = eddy_server_bootstrap_new();
    assert_non_null(e->server_group);
    assert_non_null(e->client_group);
    assert_non_null(e->children);
    assert_non_null(e->sb);
    assert_int_equal(eddy_server_bootstrap_group(e->sb, e->server_group, NULL), 0);
    eddy_server_bootstrap_child_init(e->sb, init_child, e->children);
    eddy_future_t *f = eddy_server_bootstrap_bind(e->sb, "127.0.0.1", 0);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    e->server = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    e->port = eddy_addr_port(eddy_channel_local_addr(e->server));
    snprintf(e->url, sizeof(e->url), "http://127.0.0.1:%u", e->port);
    e->client = eddy_http_client_new(e->client_group, o);
    assert_non_null(e->client);
}

static void group_finish(eddy_loop_group_t *g)
{
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(g, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

static int await_error(eddy_future_t *f)
{
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    int err = eddy_future_error(f);
    eddy_future_release(f);
    return err;
}

/* Close what env_open made; the client too unless the test closed it (e->client NULL). */
static void env_close(env_t *e)
{
    if (e->client != NULL) {
        assert_int_equal(await_error(eddy_http_client_close(e->client)), 0);
    }
    assert_int_equal(await_error(eddy_channel_group_close(e->children, NULL, NULL)), 0);
    eddy_channel_close(e->server, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(e->server), DEADLINE_MS), 0);
    eddy_channel_release(e->server);
    eddy_server_bootstrap_free(e->sb);
    group_finish(e->client_group);
    group_finish(e->server_group);
    eddy_channel_group_free(e->children);
}

/* A GET of e->url + path, its future the caller's. */
static eddy_future_t *get(env_t *e, const char *path)
{
    char url[256];
    snprintf(url, sizeof(url), "%s%s", e->url, path);
    eddy_future_t *f = eddy_http_client_get(e->client, url);
    assert_non_null(f);
    return f;
}

/* GET e->url + path; asserts a 200 whose body is want (NULL: any). */
static void get_ok(env_t *e, const char *path, const char *want)
{
    eddy_future_t *f = get(e, path);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    eddy_http_client_response_t *r = eddy_future_http_response(f);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    if (want != NULL) {
        assert_non_null(r->body);
        assert_int_equal(eddy_buf_readable(r->body), strlen(want));
        assert_memory_equal(eddy_buf_read_ptr(r->body), want, strlen(want));
    }
    eddy_future_release(f);
}

/* ---------------------------------------------------------------------------------------
 * Tests
 */

static void test_url_parse(void **state)
{
    (void)state;
    eddy_url_t u;
    assert_int_equal(eddy_url_parse("http://example.com", &u), 0);
    assert_false(u.tls);
    assert_string_equal(u.host, "example.com");
    assert_int_equal(u.port, 80);
    assert_string_equal(u.authority, "example.com");
    assert_int_equal(u.path.len, 0);

    assert_int_equal(eddy_url_parse("https://[::1]:8443/a/b?c=d#frag", &u), 0);
    assert_true(u.tls);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 8443);
    assert_string_equal(u.authority, "[::1]:8443");
    assert_int_equal(u.path.len, strlen("/a/b?c=d"));
    assert_memory_equal(u.path.p, "/a/b?c=d", u.path.len);

    assert_int_equal(eddy_url_parse("https://h:443?q", &u), 0);
    assert_string_equal(u.authority, "h");
    assert_memory_equal(u.path.p, "?q", 2);
    assert_int_equal(eddy_url_parse("wss://h/x", &u), 0);
    assert_true(u.tls);
    assert_int_equal(u.port, 443);

    const char *bad[] = {"ftp://h/",      "http://",         "http:///x",    "http://h:0/",
                         "http://h:65536", "http://h:1x/",   "http://u@h/",  "http://[::1/",
                         "http://h:/",     "http://a b/",    "http://h::1/", "h/x",
                         NULL};
    for (size_t i = 0; bad[i] != NULL; i++) {
        assert_int_equal(eddy_url_parse(bad[i], &u), EDDY_EINVAL);
    }
    assert_int_equal(eddy_url_parse(NULL, &u), EDDY_EINVAL);
}

static void test_get_sends_target_and_host_from_the_url(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    char want[128];
    snprintf(want, sizeof(want), "GET / 127.0.0.1:%u ", e.port);
    get_ok(&e, "", want);
    snprintf(want, sizeof(want), "GET /a/b?x=1 127.0.0.1:%u ", e.port);
    get_ok(&e, "/a/b?x=1#frag", want);
    snprintf(want, sizeof(want), "GET /?q 127.0.0.1:%u ", e.port);
    get_ok(&e, "?q", want);
    env_close(&e);
}

static void test_keep_alive_reuses_one_connection(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    for (int i = 0; i < 20; i++) {
        get_ok(&e, "/x", NULL);
    }
    assert_int_equal(atomic_load(&accepted), 1);
    env_close(&e);
}

static void test_a_response_that_closes_is_not_reused(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    get_ok(&e, "/close", NULL);
    get_ok(&e, "/close", NULL);
    get_ok(&e, "/x", NULL);
    assert_int_equal(atomic_load(&accepted), 3);
    env_close(&e);
}

static void test_post_sends_its_body(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    eddy_http_client_request_t *req = eddy_http_client_request_new("POST", "/ignored");
    assert_non_null(req);
    eddy_http_client_request_set_body(req, text("hello"));
    char url[160];
    snprintf(url, sizeof(url), "%s/p", e.url);
    eddy_future_t *f = eddy_http_client_send(e.client, url, req);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    eddy_http_client_response_t *r = eddy_future_http_response(f);
    char want[128];
    snprintf(want, sizeof(want), "POST /p 127.0.0.1:%u hello", e.port);
    assert_int_equal(eddy_buf_readable(r->body), strlen(want));
    assert_memory_equal(eddy_buf_read_ptr(r->body), want, strlen(want));
    eddy_future_release(f);
    env_close(&e);
}

static void test_a_stalled_response_times_out(void **state)
{
    (void)state;
    env_t e;
    eddy_http_client_options_t o = {.response_timeout_ms = 200};
    env_open(&e, &o);
    assert_int_equal(await_error(get(&e, "/stall")), EDDY_ETIMEDOUT);
    get_ok(&e, "/after", NULL); /* the pool made a new connection */
    env_close(&e);
}

static void test_cancel_ends_the_request_and_its_connection(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    eddy_future_t *f = get(&e, "/stall");
    WAIT_FOR(atomic_load(&accepted) == 1);
    assert_int_equal(eddy_future_cancel(f), 0);
    assert_int_equal(await_error(f), EDDY_ECANCELED);
    get_ok(&e, "/after", NULL);
    assert_int_equal(atomic_load(&accepted), 2);
    env_close(&e);
}

static void test_refused_and_bad_urls_fail_clearly(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    assert_int_equal(await_error(eddy_http_client_get(e.client, "ftp://127.0.0.1/")),
                     EDDY_EINVAL);
    assert_int_equal(await_error(eddy_http_client_get(e.client, "http://127.0.0.1:0/")),
                     EDDY_EINVAL);
    /* A port nothing listens on: the server's, once closed. */
    eddy_loop_group_t *g = eddy_loop_group_new(1, NULL);
    eddy_server_bootstrap_t *sb = eddy_server_bootstrap_new();
    eddy_server_bootstrap_group(sb, g, NULL);
    eddy_server_bootstrap_child_init(sb, init_child, e.children);
    eddy_future_t *bound = eddy_server_bootstrap_bind(sb, "127.0.0.1", 0);
    assert_int_equal(eddy_future_await(bound, DEADLINE_MS), 0);
    eddy_channel_t *l = eddy_future_channel(bound);
    uint16_t port = eddy_addr_port(eddy_channel_local_addr(l));
    eddy_channel_close(l, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(l), DEADLINE_MS), 0);
    eddy_future_release(bound);
    char url[160];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/", port);
    assert_int_equal(await_error(eddy_http_client_get(e.client, url)), EDDY_ECONNREFUSED);
    eddy_server_bootstrap_free(sb);
    group_finish(g);
    env_close(&e);
}

static void test_a_connection_the_server_dropped_is_replaced(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    get_ok(&e, "/x", NULL);
    /* The server closes every connection while it sits idle in the pool. */
    assert_int_equal(await_error(eddy_channel_group_close(e.children, NULL, NULL)), 0);
    get_ok(&e, "/y", NULL);
    assert_int_equal(atomic_load(&accepted), 2);
    /* A GET whose connection goes away under it is tried once more: /drop always goes, so
     * it fails after two connections. */
    int err = await_error(get(&e, "/drop"));
    assert_true(err == EDDY_EOF || err == EDDY_ECLOSED || err == EDDY_ECONNRESET);
    env_close(&e);
}

static void test_close_fails_a_request_in_flight(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    eddy_future_t *f = get(&e, "/stall");
    WAIT_FOR(atomic_load(&accepted) == 1);
    eddy_future_t *closed = eddy_http_client_close(e.client);
    /* The request's connection is out (acquired): the client's close fails the request,
     * which closes its connection and gives it back, and the pools close then. */
    assert_int_equal(await_error(f), EDDY_ECLOSED);
    assert_int_equal(await_error(closed), 0);
    e.client = NULL;
    env_close(&e);
}

typedef struct worker_s {
    env_t *e;
    int failures;
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    char url[160];
    snprintf(url, sizeof(url), "%s/w", w->e->url);
    for (int i = 0; i < 50; i++) {
        eddy_future_t *f = eddy_http_client_get(w->e->client, url);
        if (f == NULL || eddy_future_await(f, DEADLINE_MS) != 0 || eddy_future_error(f) != 0 ||
            eddy_future_http_response(f)->status != 200) {
            w->failures++;
        }
        eddy_future_release(f);
    }
    return NULL;
}

static void test_four_threads_share_two_connections(void **state)
{
    (void)state;
    env_t e;
    eddy_http_client_options_t o = {.max_connections_per_host = 2};
    env_open(&e, &o);
    worker_t w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_t){.e = &e};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].failures, 0);
    }
    assert_true(atomic_load(&accepted) <= 2);
    env_close(&e);
}

/* decompress: Accept-Encoding sent with every coding, the answer (br, our first choice)
 * decompressed byte for byte, its Content-Encoding gone; over HTTP/1.1 and HTTP/2 (h2c). */
static void check_text(env_t *e, const char *want_accept, int version)
{
    eddy_future_t *f = get(e, "/text");
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    eddy_http_response_t *r = eddy_future_http_response(f);
    assert_int_equal(r->version, version);
    const eddy_http_header_t *accept = eddy_http_response_header(r, "x-accept");
    assert_non_null(accept);
    assert_true(eddy_http_str_eq(accept->value, want_accept));
    assert_null(eddy_http_response_header(r, "content-encoding"));
    eddy_buf_t *want = text_100k();
    assert_int_equal(eddy_buf_readable(r->body), 100000);
    assert_int_equal(r->content_length, 100000);
    assert_memory_equal(eddy_buf_read_ptr(r->body), eddy_buf_read_ptr(want), 100000);
    eddy_buf_release(want);
    eddy_future_release(f);
}

static void test_decompress_asks_for_and_inflates_compressed_answers(void **state)
{
    (void)state;
    if (!eddy_http_coding_available("gzip")) {
        skip(); /* a build without zlib: these tests speak gzip */
    }
    eddy_http_client_version_t versions[] = {EDDY_HTTP_CLIENT_HTTP1,
                                             EDDY_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE};
    for (size_t v = 0; v < 2; v++) {
        env_t e;
        eddy_http_client_options_t o = {.decompress = true, .http_version = versions[v]};
        env_open(&e, &o);
        check_text(&e, eddy_http_codings(), v == 0 ? 11 : 20);
        env_close(&e);
    }
    /* Without the option: nothing asked, nothing compressed. */
    env_t e;
    env_open(&e, NULL);
    check_text(&e, "-", 11);
    env_close(&e);
}

static void test_decompress_refuses_a_gzip_bomb(void **state)
{
    (void)state;
    if (!eddy_http_coding_available("gzip")) {
        skip();
    }
    env_t e;
    eddy_http_client_options_t o = {.decompress = true}; /* 1 MiB at most */
    env_open(&e, &o);
    assert_int_equal(await_error(get(&e, "/bomb")), EDDY_ETOOLONGFRAME);
    get_ok(&e, "/text", NULL); /* the connection, or another, goes on */
    env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_parse),
        cmocka_unit_test(test_get_sends_target_and_host_from_the_url),
        cmocka_unit_test(test_keep_alive_reuses_one_connection),
        cmocka_unit_test(test_a_response_that_closes_is_not_reused),
        cmocka_unit_test(test_post_sends_its_body),
        cmocka_unit_test(test_a_stalled_response_times_out),
        cmocka_unit_test(test_cancel_ends_the_request_and_its_connection),
        cmocka_unit_test(test_refused_and_bad_urls_fail_clearly),
        cmocka_unit_test(test_a_connection_the_server_dropped_is_replaced),
        cmocka_unit_test(test_close_fails_a_request_in_flight),
        cmocka_unit_test(test_four_threads_share_two_connections),
        cmocka_unit_test(test_decompress_asks_for_and_inflates_compressed_answers),
        cmocka_unit_test(test_decompress_refuses_a_gzip_bomb),
    };
    return cmocka_run_group_tests_name("bootstrap.http_client", tests, NULL, NULL);
}
