/*
 * The gRPC client (codec/grpc/channel.c, client.c) against eddy's own gRPC server on
 * loopback, in one process: the four kinds of call, metadata both ways, statuses and their
 * messages, deadlines, cancels, message limits, gzip both ways, connections refused, made
 * again, drained by GOAWAY and closed with calls in flight, keepalive, TLS, and 1000 unary
 * calls over two connections. The server runs on a loop group of its own, the client on one
 * loop; calls start on that loop (run_sync) and their callbacks record what the test thread
 * then checks.
 */
#include "support/loop_util.h"

#include <eddy/bootstrap.h>
#include <eddy/carrier.h>
#include <eddy/channel.h>
#include <eddy/grpc.h>
#include <eddy/tls.h>

#include "codec/grpc/internal.h" /* a call's gzip_in: whether messages came compressed */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SVC "/test.Echo/"

/* ---------------------------------------------------------------------------------------
 * The server's methods
 */

static atomic_long accepted;        /* connections the server took */
static atomic_long requests;        /* calls that reached a method */
static atomic_int server_cancel;    /* the last on_cancel's status, + 100 once heard */
static atomic_bool request_gzipped; /* the last Gzip request came compressed */

static eddy_buf_t *text(const char *s)
{
    eddy_buf_t *b = eddy_buf_from(s, strlen(s));
    assert_non_null(b);
    return b;
}

static bool buf_is(const eddy_buf_t *b, const char *s)
{
    size_t n = strlen(s);
    return b != NULL && eddy_buf_readable(b) == n && memcmp(eddy_buf_read_ptr(b), s, n) == 0;
}

static void on_cancel(eddy_grpc_call_t *call, eddy_grpc_status_t why)
{
    (void)call;
    atomic_store(&server_cancel, 100 + (int)why);
}

static void unary_echo(eddy_grpc_call_t *call, eddy_buf_t *req)
{
    atomic_fetch_add(&requests, 1);
    eddy_grpc_call_reply(call, req);
}

/* The request's metadata back in the response headers, then the request and trailers. */
static void metadata_echo(eddy_grpc_call_t *call, eddy_buf_t *req)
{
    size_t n;
    const eddy_http_header_t *md = eddy_grpc_call_metadata(call, &n);
    eddy_grpc_call_send_headers(call, md, n);
    eddy_grpc_call_send(call, req, NULL);
    static const char bin[] = {0, 1, 2, (char)0xff};
    eddy_http_header_t tr[] = {{{"x-trailer", 9}, {"done", 4}},
                               {{"x-trailer-bin", 13}, {bin, sizeof(bin)}}};
    eddy_grpc_call_finish(call, EDDY_GRPC_OK, NULL, tr, 2);
}

/* The request is "<code> <message>": finish with them. */
static void status_echo(eddy_grpc_call_t *call, eddy_buf_t *req)
{
    char s[256] = {0};
    size_t n = eddy_buf_readable(req) < sizeof(s) - 1 ? eddy_buf_readable(req) : sizeof(s) - 1;
    memcpy(s, eddy_buf_read_ptr(req), n);
    eddy_buf_release(req);
    char *rest;
    long code = strtol(s, &rest, 10);
    eddy_grpc_call_finish(call, (eddy_grpc_status_t)code, *rest == ' ' ? rest + 1 : rest, NULL, 0);
}

/* Never answers: the call ends by the client's cancel or a deadline. */
static void never(eddy_grpc_call_t *call, eddy_buf_t *req)
{
    (void)call;
    atomic_fetch_add(&requests, 1);
    eddy_buf_release(req);
}

/* The request is a count: that many responses "r<i>", then OK. */
static void server_stream(eddy_grpc_call_t *call, eddy_buf_t *req)
{
    char s[16] = {0};
    memcpy(s, eddy_buf_read_ptr(req), eddy_buf_readable(req) < 15 ? eddy_buf_readable(req) : 15);
    eddy_buf_release(req);
    long n = strtol(s, NULL, 10);
    for (long i = 0; i < n; i++) {
        char r[32];
        snprintf(r, sizeof(r), "r%ld", i);
        eddy_grpc_call_send(call, text(r), NULL);
    }
    eddy_grpc_call_finish(call, EDDY_GRPC_OK, NULL, NULL, 0);
}

/* Client streaming: the count and bytes of the requests, as "<count>/<bytes>". */
static void count_message(eddy_grpc_call_t *call, eddy_buf_t *msg)
{
    size_t *c = eddy_grpc_call_user_data(call);
    if (c == NULL) {
        c = calloc(2, sizeof(size_t));
        eddy_grpc_call_set_user_data(call, c, free);
    }
    c[0]++;
    c[1] += eddy_buf_readable(msg);
    eddy_buf_release(msg);
}

static void count_done(eddy_grpc_call_t *call)
{
    size_t *c = eddy_grpc_call_user_data(call);
    char r[64];
    snprintf(r, sizeof(r), "%zu/%zu", c != NULL ? c[0] : 0, c != NULL ? c[1] : 0);
    eddy_grpc_call_reply(call, text(r));
}

/* Bidi: each message back at once; the half-close ends it OK. */
static void bidi_message(eddy_grpc_call_t *call, eddy_buf_t *msg)
{
    eddy_grpc_call_send(call, msg, NULL);
}

static void bidi_done(eddy_grpc_call_t *call)
{
    eddy_grpc_call_finish(call, EDDY_GRPC_OK, NULL, NULL, 0);
}

/* Bidi that never answers, for keepalive: the call stays open, idle. */
static void idle_message(eddy_grpc_call_t *call, eddy_buf_t *msg)
{
    (void)call;
    eddy_buf_release(msg);
}

/* The request back, compressed when the client accepts gzip; notes how it came. */
static void gzip_echo(eddy_grpc_call_t *call, eddy_buf_t *req)
{
    atomic_store(&request_gzipped, call->gzip_in);
    eddy_grpc_call_set_compression(call, "gzip");
    eddy_grpc_call_reply(call, req);
}

/* A response of the size the request says (a decimal). */
static void sized(eddy_grpc_call_t *call, eddy_buf_t *req)
{
    char s[16] = {0};
    memcpy(s, eddy_buf_read_ptr(req), eddy_buf_readable(req) < 15 ? eddy_buf_readable(req) : 15);
    eddy_buf_release(req);
    size_t n = (size_t)strtoul(s, NULL, 10);
    eddy_buf_t *b = eddy_buf_new(n + 1);
    memset(eddy_buf_write_ptr(b), 'z', n);
    eddy_buf_produce(b, n);
    eddy_grpc_call_reply(call, b);
}

/* Late: a method on a carrier (late_carrier, when a test sets it) that holds its thread until
 * the test opens late_gate, then replies. */
static eddy_carrier_t *late_carrier;
static gate_t late_gate;

static void late_reply(eddy_grpc_call_t *call, eddy_buf_t *req)
{
    gate_task(&late_gate);
    eddy_grpc_call_reply(call, req); /* the loop may be gone: the hand-off is refused */
}

static const eddy_grpc_method_ops_t late_ops = {.on_request = late_reply};
static const eddy_grpc_method_ops_t unary_ops = {.on_request = unary_echo};
static const eddy_grpc_method_ops_t metadata_ops = {.on_request = metadata_echo};
static const eddy_grpc_method_ops_t status_ops = {.on_request = status_echo};
static const eddy_grpc_method_ops_t never_ops = {.on_request = never, .on_cancel = on_cancel};
static const eddy_grpc_method_ops_t sstream_ops = {.on_request = server_stream};
static const eddy_grpc_method_ops_t cstream_ops = {.on_message = count_message,
                                                   .on_half_close = count_done};
static const eddy_grpc_method_ops_t bidi_ops = {.on_message = bidi_message,
                                                .on_half_close = bidi_done};
static const eddy_grpc_method_ops_t idle_ops = {.on_message = idle_message,
                                                .on_half_close = bidi_done,
                                                .on_cancel = on_cancel};
static const eddy_grpc_method_ops_t gzip_ops = {.on_request = gzip_echo};
static const eddy_grpc_method_ops_t sized_ops = {.on_request = sized};

static eddy_grpc_server_t *server_new(const eddy_grpc_server_options_t *o)
{
    eddy_grpc_server_t *s = eddy_grpc_server_new(o);
    assert_non_null(s);
    assert_int_equal(eddy_grpc_server_add_method(s, SVC "Unary", EDDY_GRPC_UNARY, &unary_ops,
                                                 NULL), 0);
    assert_int_equal(eddy_grpc_server_add_method(s, SVC "Metadata", EDDY_GRPC_UNARY,
                                                 &metadata_ops, NULL), 0);
    assert_int_equal(eddy_grpc_server_add_method(s, SVC "Status", EDDY_GRPC_UNARY, &status_ops,
                                                 NULL), 0);
    assert_int_equal(eddy_grpc_server_add_method(s, SVC "Never", EDDY_GRPC_UNARY, &never_ops,
                                                 NULL), 0);
    assert_int_equal(eddy_grpc_server_add_method(s, SVC "ServerStream",
                                                 EDDY_GRPC_SERVER_STREAMING, &sstream_ops,
                                                 NULL), 0);
    assert_int_equal(eddy_grpc_server_add_method(s, SVC "ClientStream",
                                                 EDDY_GRPC_CLIENT_STREAMING, &cstream_ops,
                                                 NULL), 0);
    assert_int_equal(eddy_grpc_server_add_method(s, SVC "Bidi", EDDY_GRPC_BIDI_STREAMING,
                                                 &bidi_ops, NULL), 0);
    assert_int_equal(eddy_grpc_server_add_method(s, SVC "Idle", EDDY_GRPC_BIDI_STREAMING,
                                                 &idle_ops, NULL), 0);
    assert_int_equal(eddy_grpc_server_add_method(s, SVC "Gzip", EDDY_GRPC_UNARY, &gzip_ops,
                                                 NULL), 0);
    assert_int_equal(eddy_grpc_server_add_method(s, SVC "Sized", EDDY_GRPC_UNARY, &sized_ops,
                                                 NULL), 0);
    if (late_carrier != NULL) {
        assert_int_equal(eddy_grpc_server_add_method_on(s, SVC "Late", EDDY_GRPC_UNARY,
                                                        &late_ops, NULL, late_carrier), 0);
    }
    return s;
}

/* ---------------------------------------------------------------------------------------
 * The environment: a server on loopback, a client loop and channel
 */

typedef struct env_s {
    eddy_grpc_server_t *server;
    eddy_tls_context_t *server_tls, *client_tls;
    eddy_loop_group_t *group;
    eddy_server_bootstrap_t *sb;
    eddy_channel_t *listener;
    uint16_t port;
    eddy_loop_t *loop;
    eddy_grpc_channel_t *chan;
} env_t;

static int child_init(eddy_channel_t *ch, void *arg)
{
    env_t *e = arg;
    atomic_fetch_add(&accepted, 1);
    if (e->server_tls != NULL) {
        int rc = eddy_tls_add(ch, e->server_tls, NULL, NULL);
        if (rc != 0) {
            return rc;
        }
    }
    return eddy_grpc_server_init_channel(ch, e->server);
}

/* A server (o: its options, NULL the defaults) listening on an ephemeral port. */
static void server_open(env_t *e, const eddy_grpc_server_options_t *o)
{
    atomic_store(&accepted, 0);
    atomic_store(&requests, 0);
    atomic_store(&server_cancel, 0);
    e->server = server_new(o);
    e->group = eddy_loop_group_new(1, NULL);
    e->sb = eddy_server_bootstrap_new();
    assert_non_null(e->group);
    assert_non_null(e->sb);
    assert_int_equal(eddy_server_bootstrap_group(e->sb, e->group, NULL), 0);
    eddy_server_bootstrap_child_init(e->sb, child_init, e);
    eddy_future_t *f = eddy_server_bootstrap_bind(e->sb, "127.0.0.1", 0);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    e->listener = eddy_channel_retain(eddy_future_channel(f));
    e->port = eddy_addr_port(eddy_channel_local_addr(e->listener));
    eddy_future_release(f);
}

/* The client's loop and a channel to target (NULL: the server) with o (NULL: defaults). */
static void client_open(env_t *e, const char *target, const eddy_grpc_channel_options_t *o)
{
    char t[64];
    snprintf(t, sizeof(t), "%s:%u", e->client_tls != NULL ? "localhost" : "127.0.0.1", e->port);
    if (e->loop == NULL) {
        e->loop = start_loop(NULL);
    }
    e->chan = eddy_grpc_channel_new(e->loop, target != NULL ? target : t, o);
    assert_non_null(e->chan);
}

static void env_open(env_t *e, const eddy_grpc_server_options_t *so,
                     const eddy_grpc_channel_options_t *co)
{
    memset(e, 0, sizeof(*e));
    server_open(e, so);
    client_open(e, NULL, co);
}

static void channel_close(env_t *e)
{
    eddy_future_t *f = eddy_grpc_channel_close(e->chan);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    eddy_future_release(f);
    e->chan = NULL;
}

static void server_close(env_t *e)
{
    eddy_channel_close(e->listener, NULL);
    eddy_channel_release(e->listener);
    eddy_future_t *f = eddy_server_bootstrap_shutdown(e->sb);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    eddy_future_release(f);
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(e->group, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(e->group), 0);
    eddy_server_bootstrap_free(e->sb);
    eddy_grpc_server_free(e->server);
}

static void env_close(env_t *e)
{
    if (e->chan != NULL) {
        channel_close(e);
    }
    server_close(e);
    finish_loop(e->loop);
    eddy_tls_context_release(e->server_tls);
    eddy_tls_context_release(e->client_tls);
}

static void tls_env(env_t *e, bool h2);

/* ---------------------------------------------------------------------------------------
 * Client calls, recorded
 */

typedef struct result_s {
    atomic_bool headers, closed;
    eddy_grpc_status_t status;
    char message[256];
    int messages;
    size_t bytes;
    char first[64];   /* the first response, as text */
    char echo[64];    /* the response headers' x-echo */
    char echo_bin[8]; /* ... and x-echo-bin */
    size_t echo_bin_len;
    char trailer[64]; /* the trailers' x-trailer */
    char trailer_bin[8];
    size_t trailer_bin_len;
    bool gzip_in;     /* responses came compressed */
    int pingpong;     /* bidi: messages to send back and forth before the half-close */
    bool half_close_at_end; /* ... which comes then */
    atomic_int writable; /* on_writable runs */
} result_t;

static void copy_value(const eddy_http_header_t *f, char *out, size_t cap, size_t *len)
{
    size_t n = f != NULL ? (f->value.len < cap - 1 ? f->value.len : cap - 1) : 0;
    if (n > 0) {
        memcpy(out, f->value.p, n);
    }
    out[n] = '\0';
    if (len != NULL) {
        *len = n;
    }
}

static const eddy_http_header_t *md_find(const eddy_http_header_t *md, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++) {
        if (md[i].name.len == strlen(k) && memcmp(md[i].name.p, k, md[i].name.len) == 0) {
            return &md[i];
        }
    }
    return NULL;
}

static void rec_headers(eddy_grpc_call_t *call)
{
    result_t *r = eddy_grpc_call_arg(call);
    copy_value(eddy_grpc_call_metadata_get(call, "x-echo"), r->echo, sizeof(r->echo), NULL);
    copy_value(eddy_grpc_call_metadata_get(call, "x-echo-bin"), r->echo_bin, sizeof(r->echo_bin),
               &r->echo_bin_len);
    r->gzip_in = call->gzip_in;
    atomic_store(&r->headers, true);
}

static void rec_message(eddy_grpc_call_t *call, eddy_buf_t *msg)
{
    result_t *r = eddy_grpc_call_arg(call);
    if (r->messages++ == 0) {
        size_t n = eddy_buf_readable(msg) < sizeof(r->first) - 1 ? eddy_buf_readable(msg)
                                                                   : sizeof(r->first) - 1;
        memcpy(r->first, eddy_buf_read_ptr(msg), n);
        r->first[n] = '\0';
    }
    r->bytes += eddy_buf_readable(msg);
    if (r->pingpong > 0 && --r->pingpong > 0) {
        eddy_grpc_call_send(call, msg, NULL); /* back again */
        return;
    }
    eddy_buf_release(msg);
    if (r->pingpong == 0 && r->messages > 0 && r->half_close_at_end) {
        eddy_grpc_call_half_close(call);
        r->half_close_at_end = false;
    }
}

static void rec_writable(eddy_grpc_call_t *call)
{
    result_t *r = eddy_grpc_call_arg(call);
    atomic_fetch_add(&r->writable, 1);
}

static void rec_close(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message)
{
    result_t *r = eddy_grpc_call_arg(call);
    r->status = status;
    snprintf(r->message, sizeof(r->message), "%s", message);
    size_t n;
    const eddy_http_header_t *tr = eddy_grpc_call_trailers(call, &n);
    copy_value(md_find(tr, n, "x-trailer"), r->trailer, sizeof(r->trailer), NULL);
    copy_value(md_find(tr, n, "x-trailer-bin"), r->trailer_bin, sizeof(r->trailer_bin),
               &r->trailer_bin_len);
    atomic_store(&r->closed, true);
}

static const eddy_grpc_client_ops_t rec_ops = {
    .on_headers = rec_headers,
    .on_message = rec_message,
    .on_writable = rec_writable,
    .on_close = rec_close,
};

/* A call to start on the loop: path, options, requests to send, half-close or not. */
typedef struct start_s {
    env_t *e;
    const char *path;
    const eddy_grpc_call_options_t *o;
    result_t *r;
    const char *requests[4];
    bool half_close;
    eddy_grpc_call_t *call;
    int err;
    int send_err;
} start_t;

static void start_task(void *arg)
{
    start_t *st = arg;
    st->call = eddy_grpc_call_start(st->e->chan, st->path, st->o, &rec_ops, st->r, &st->err);
    for (size_t i = 0; st->call != NULL && i < 4 && st->requests[i] != NULL; i++) {
        int err = eddy_grpc_call_send(st->call, text(st->requests[i]), NULL);
        st->send_err = st->send_err != 0 ? st->send_err : err;
    }
    if (st->call != NULL && st->half_close) {
        eddy_grpc_call_half_close(st->call);
    }
}

/* Start a call of path sending req (NULL: none) and half-closing; its call (a reference). */
static eddy_grpc_call_t *call_start(env_t *e, const char *path, const char *req,
                                    const eddy_grpc_call_options_t *o, result_t *r)
{
    start_t st = {.e = e, .path = path, .o = o, .r = r, .requests = {req}, .half_close = true};
    run_sync(e->loop, start_task, &st);
    assert_non_null(st.call);
    return st.call;
}

/* Wait for r's call to end, release it, and check its status. */
static void call_wait(eddy_grpc_call_t *call, result_t *r, eddy_grpc_status_t want)
{
    assert_true(wait_flag(&r->closed, DEADLINE_MS));
    eddy_grpc_call_release(call);
    if (r->status != want) {
        fail_msg("status %s (%s), wanted %s", eddy_grpc_status_name(r->status), r->message,
                 eddy_grpc_status_name(want));
    }
}

/* A unary call through eddy_grpc_unary(), awaited; the future (release it). */
static eddy_future_t *unary(env_t *e, const char *path, const char *req,
                            const eddy_grpc_call_options_t *o)
{
    eddy_future_t *f = eddy_grpc_unary(e->chan, path, text(req), o);
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    assert_non_null(eddy_future_grpc_reply(f));
    return f;
}

static void unary_expect(env_t *e, const char *path, const char *req, eddy_grpc_status_t want,
                         const char *response)
{
    eddy_future_t *f = unary(e, path, req, NULL);
    const eddy_grpc_reply_t *r = eddy_future_grpc_reply(f);
    if (r->status != want) {
        fail_msg("%s: status %s (%s), wanted %s", path, eddy_grpc_status_name(r->status),
                 r->message, eddy_grpc_status_name(want));
    }
    if (response != NULL) {
        assert_true(buf_is(r->response, response));
    }
    eddy_future_release(f);
}

/* ---------------------------------------------------------------------------------------
 * The tests
 */

/* A string of n 'b's (free it). */
static char *bees(size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, 'b', n);
    s[n] = '\0';
    return s;
}

static void test_unary(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL, NULL);
    unary_expect(&e, SVC "Unary", "hello", EDDY_GRPC_OK, "hello");
    unary_expect(&e, SVC "Unary", "", EDDY_GRPC_OK, ""); /* an empty message is one */
    /* The call API: a unary call by hand, its headers and messages seen. */
    result_t r = {0};
    eddy_grpc_call_t *call = call_start(&e, SVC "Unary", "by hand", NULL, &r);
    call_wait(call, &r, EDDY_GRPC_OK);
    assert_true(atomic_load(&r.headers));
    assert_int_equal(r.messages, 1);
    assert_string_equal(r.first, "by hand");
    assert_int_equal(atomic_load(&accepted), 1);
    /* A request near the default largest (4 MiB), past a stream's usual 1 MiB queue. */
    char *huge = bees(3 << 20);
    result_t h = {0};
    eddy_grpc_call_t *hc = call_start(&e, SVC "ClientStream", huge, NULL, &h);
    call_wait(hc, &h, EDDY_GRPC_OK);
    assert_string_equal(h.first, "1/3145728");
    free(huge);
    env_close(&e);
}

static void test_server_streaming(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL, NULL);
    result_t r = {0};
    eddy_grpc_call_t *call = call_start(&e, SVC "ServerStream", "500", NULL, &r);
    call_wait(call, &r, EDDY_GRPC_OK);
    assert_int_equal(r.messages, 500);
    assert_string_equal(r.first, "r0");
    /* None: the status alone. */
    result_t z = {0};
    call = call_start(&e, SVC "ServerStream", "0", NULL, &z);
    call_wait(call, &z, EDDY_GRPC_OK);
    assert_int_equal(z.messages, 0);
    env_close(&e);
}

static void test_client_streaming(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL, NULL);
    result_t r = {0};
    start_t st = {.e = &e, .path = SVC "ClientStream", .r = &r,
                  .requests = {"one", "two", "three"}, .half_close = true};
    run_sync(e.loop, start_task, &st);
    assert_non_null(st.call);
    assert_int_equal(st.send_err, 0);
    call_wait(st.call, &r, EDDY_GRPC_OK);
    assert_string_equal(r.first, "3/11");
    /* No request at all. */
    result_t z = {0};
    eddy_grpc_call_t *call = call_start(&e, SVC "ClientStream", NULL, NULL, &z);
    call_wait(call, &z, EDDY_GRPC_OK);
    assert_string_equal(z.first, "0/0");
    env_close(&e);
}

static void test_bidi_ping_pong(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL, NULL);
    result_t r = {.pingpong = 100, .half_close_at_end = true};
    start_t st = {.e = &e, .path = SVC "Bidi", .r = &r, .requests = {"ping"}};
    run_sync(e.loop, start_task, &st); /* each answer goes back; the 100th half-closes */
    assert_non_null(st.call);
    call_wait(st.call, &r, EDDY_GRPC_OK);
    assert_int_equal(r.messages, 100);
    assert_int_equal(r.bytes, 400);
    env_close(&e);
}

static void test_metadata(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL, NULL);
    static const char bin[] = {(char)0xff, 0, 'a', (char)0x80, '\n'};
    eddy_http_header_t md[] = {{{"x-echo", 6}, {"hello there", 11}},
                               {{"x-echo-bin", 10}, {bin, sizeof(bin)}}};
    eddy_grpc_call_options_t o = {.metadata = md, .metadata_count = 2};
    result_t r = {0};
    eddy_grpc_call_t *call = call_start(&e, SVC "Metadata", "m", &o, &r);
    call_wait(call, &r, EDDY_GRPC_OK);
    assert_string_equal(r.echo, "hello there");
    assert_int_equal(r.echo_bin_len, sizeof(bin));
    assert_memory_equal(r.echo_bin, bin, sizeof(bin));
    assert_string_equal(r.trailer, "done");
    static const char tbin[] = {0, 1, 2, (char)0xff};
    assert_int_equal(r.trailer_bin_len, sizeof(tbin));
    assert_memory_equal(r.trailer_bin, tbin, sizeof(tbin));
    /* The unary reply holds both. */
    eddy_future_t *f = unary(&e, SVC "Metadata", "u", &o);
    const eddy_grpc_reply_t *rep = eddy_future_grpc_reply(f);
    assert_int_equal(rep->status, EDDY_GRPC_OK);
    assert_non_null(md_find(rep->headers, rep->headers_count, "x-echo"));
    assert_non_null(md_find(rep->trailers, rep->trailers_count, "x-trailer-bin"));
    eddy_future_release(f);
    /* Refused at the start: a bad name, a value outside printable ASCII, a reserved name. */
    eddy_http_header_t bad[][1] = {{{{"X-Up", 4}, {"v", 1}}},
                                   {{{"x-ok", 4}, {"\x01", 1}}},
                                   {{{"grpc-status", 11}, {"0", 1}}}};
    for (size_t i = 0; i < 3; i++) {
        eddy_grpc_call_options_t b = {.metadata = bad[i], .metadata_count = 1};
        start_t st = {.e = &e, .path = SVC "Unary", .o = &b, .r = &r};
        run_sync(e.loop, start_task, &st);
        assert_null(st.call);
        assert_int_equal(st.err, EDDY_EINVAL);
        eddy_future_t *u = eddy_grpc_unary(e.chan, SVC "Unary", text("x"), &b);
        assert_int_equal(eddy_future_await(u, DEADLINE_MS), 0);
        assert_int_equal(eddy_future_error(u), EDDY_EINVAL);
        eddy_future_release(u);
    }
    env_close(&e);
}

static void test_status_message(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL, NULL);
    const char *msg = "caf\xc3\xa9 100% \xe2\x9c\x93 %41 done\t";
    char req[128];
    snprintf(req, sizeof(req), "%d %s", EDDY_GRPC_FAILED_PRECONDITION, msg);
    eddy_future_t *f = unary(&e, SVC "Status", req, NULL);
    const eddy_grpc_reply_t *r = eddy_future_grpc_reply(f);
    assert_int_equal(r->status, EDDY_GRPC_FAILED_PRECONDITION);
    assert_string_equal(r->message, msg);
    assert_null(r->response);
    eddy_future_release(f);
    /* OK without a response message: a unary call's INTERNAL. */
    snprintf(req, sizeof(req), "%d", EDDY_GRPC_OK);
    f = unary(&e, SVC "Status", req, NULL);
    assert_int_equal(eddy_future_grpc_reply(f)->status, EDDY_GRPC_INTERNAL);
    eddy_future_release(f);
    /* ... but a streaming call's plain OK. */
    result_t s = {0};
    eddy_grpc_call_t *call = call_start(&e, SVC "Status", req, NULL, &s);
    call_wait(call, &s, EDDY_GRPC_OK);
    /* Two responses to a unary call: INTERNAL. */
    f = unary(&e, SVC "ServerStream", "2", NULL);
    assert_int_equal(eddy_future_grpc_reply(f)->status, EDDY_GRPC_INTERNAL);
    eddy_future_release(f);
    env_close(&e);
}

static void test_unimplemented(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL, NULL);
    unary_expect(&e, "/test.Echo/Nope", "x", EDDY_GRPC_UNIMPLEMENTED, NULL);
    unary_expect(&e, "/other.Service/Unary", "x", EDDY_GRPC_UNIMPLEMENTED, NULL);
    /* A path that is not gRPC's is refused at the start. */
    eddy_future_t *f = eddy_grpc_unary(e.chan, "nope", text("x"), NULL);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), EDDY_EINVAL);
    eddy_future_release(f);
    env_close(&e);
}

static void test_deadline(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL, NULL);
    eddy_grpc_call_options_t o = {.deadline_ms = 200};
    int64_t t0 = eddy_now_ns();
    eddy_future_t *f = unary(&e, SVC "Never", "x", &o);
    int64_t took = (eddy_now_ns() - t0) / MS;
    assert_int_equal(eddy_future_grpc_reply(f)->status, EDDY_GRPC_DEADLINE_EXCEEDED);
    assert_true(took >= 190 && took < 5000);
    eddy_future_release(f);
    /* The server's call ended too: the reset (CANCELLED) or its own deadline. */
    int64_t end = eddy_now_ns() + DEADLINE_MS * MS;
    while (atomic_load(&server_cancel) == 0 && eddy_now_ns() < end) {
        sleep_ms(1);
    }
    int why = atomic_load(&server_cancel) - 100;
    assert_true(why == EDDY_GRPC_CANCELLED || why == EDDY_GRPC_DEADLINE_EXCEEDED);
    env_close(&e);
}

/* Cancel a call in flight: the client hears CANCELLED, so does the server's method. */
static void cancel_task(void *arg)
{
    assert_int_equal(eddy_grpc_call_cancel(arg), 0);
}

static void test_cancel(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL, NULL);
    result_t r = {0};
    eddy_grpc_call_t *call = call_start(&e, SVC "Never", "x", NULL, &r);
    assert_true(wait_for(&requests, 1, DEADLINE_MS));
    run_sync(e.loop, cancel_task, call);
    call_wait(call, &r, EDDY_GRPC_CANCELLED);
    int64_t end = eddy_now_ns() + DEADLINE_MS * MS;
    while (atomic_load(&server_cancel) == 0 && eddy_now_ns() < end) {
        sleep_ms(1);
    }
    assert_int_equal(atomic_load(&server_cancel), 100 + EDDY_GRPC_CANCELLED);
    /* A unary future cancelled cancels its call. */
    atomic_store(&server_cancel, 0);
    eddy_future_t *f = eddy_grpc_unary(e.chan, SVC "Never", text("y"), NULL);
    assert_true(wait_for(&requests, 2, DEADLINE_MS));
    assert_int_equal(eddy_future_cancel(f), 0);
    assert_int_equal(eddy_future_error(f), EDDY_ECANCELED);
    eddy_future_release(f);
    end = eddy_now_ns() + DEADLINE_MS * MS;
    while (atomic_load(&server_cancel) == 0 && eddy_now_ns() < end) {
        sleep_ms(1);
    }
    assert_int_equal(atomic_load(&server_cancel), 100 + EDDY_GRPC_CANCELLED);
    env_close(&e);
}

static void test_message_limits(void **state)
{
    (void)state;
    env_t e;
    eddy_grpc_server_options_t so = {.max_recv_message = 64 * 1024};
    eddy_grpc_channel_options_t co = {.max_send_message = 100 * 1024,
                                      .max_recv_message = 32 * 1024};
    env_open(&e, &so, &co);
    char *big = bees(80 * 1024), *bigger = bees(120 * 1024);
    /* Past the server's limit: its RESOURCE_EXHAUSTED. */
    unary_expect(&e, SVC "Unary", big, EDDY_GRPC_RESOURCE_EXHAUSTED, NULL);
    /* Past ours to send: refused here (a unary call ends RESOURCE_EXHAUSTED). */
    unary_expect(&e, SVC "Unary", bigger, EDDY_GRPC_RESOURCE_EXHAUSTED, NULL);
    result_t r = {0};
    start_t st = {.e = &e, .path = SVC "Bidi", .r = &r, .requests = {bigger}};
    run_sync(e.loop, start_task, &st);
    assert_int_equal(st.send_err, EDDY_EMSGSIZE);
    call_wait(st.call, &r, EDDY_GRPC_RESOURCE_EXHAUSTED); /* the refused send ended it */
    /* A response past ours to receive: RESOURCE_EXHAUSTED, the stream reset. */
    unary_expect(&e, SVC "Sized", "40000", EDDY_GRPC_RESOURCE_EXHAUSTED, NULL);
    unary_expect(&e, SVC "Sized", "30000", EDDY_GRPC_OK, NULL);
    free(big);
    free(bigger);
    env_close(&e);
}

static void test_gzip(void **state)
{
    (void)state;
    env_t e;
    eddy_grpc_channel_options_t co = {.compress = true};
    env_open(&e, NULL, &co);
    char body[4096];
    memset(body, 'g', sizeof(body) - 1);
    body[sizeof(body) - 1] = '\0';
    result_t r = {0};
    eddy_grpc_call_t *call = call_start(&e, SVC "Gzip", body, NULL, &r);
    call_wait(call, &r, EDDY_GRPC_OK);
    assert_true(atomic_load(&request_gzipped));
    assert_true(r.gzip_in);
    assert_int_equal(r.bytes, sizeof(body) - 1);
    channel_close(&e);
    /* Without compress: the request goes plain; the response still comes gzip'd. */
    client_open(&e, NULL, NULL);
    result_t p = {0};
    call = call_start(&e, SVC "Gzip", body, NULL, &p);
    call_wait(call, &p, EDDY_GRPC_OK);
    assert_false(atomic_load(&request_gzipped));
    assert_true(p.gzip_in);
    assert_int_equal(p.bytes, sizeof(body) - 1);
    env_close(&e);
}

static void test_connection_refused(void **state)
{
    (void)state;
    env_t e;
    memset(&e, 0, sizeof(e));
    server_open(&e, NULL);
    uint16_t port = e.port;
    server_close(&e); /* nothing listens on port now */
    char target[32];
    snprintf(target, sizeof(target), "127.0.0.1:%u", port);
    client_open(&e, target, NULL);
    eddy_future_t *f = unary(&e, SVC "Unary", "x", NULL);
    const eddy_grpc_reply_t *r = eddy_future_grpc_reply(f);
    assert_int_equal(r->status, EDDY_GRPC_UNAVAILABLE);
    assert_non_null(strstr(r->message, "refused"));
    eddy_future_release(f);
    /* Several at once, all told, and again later (each tries again). */
    for (int round = 0; round < 2; round++) {
        eddy_future_t *fs[8];
        for (size_t i = 0; i < 8; i++) {
            fs[i] = eddy_grpc_unary(e.chan, SVC "Unary", text("x"), NULL);
        }
        for (size_t i = 0; i < 8; i++) {
            assert_int_equal(eddy_future_await(fs[i], DEADLINE_MS), 0);
            assert_int_equal(eddy_future_grpc_reply(fs[i])->status, EDDY_GRPC_UNAVAILABLE);
            eddy_future_release(fs[i]);
        }
    }
    channel_close(&e);
    /* A host that does not resolve. */
    client_open(&e, "no-such-host.invalid:50051", NULL);
    f = unary(&e, SVC "Unary", "x", NULL);
    assert_int_equal(eddy_future_grpc_reply(f)->status, EDDY_GRPC_UNAVAILABLE);
    eddy_future_release(f);
    channel_close(&e);
    finish_loop(e.loop);
}

/* Targets that do not parse; a channel never used closes at once. */
static void test_targets(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    assert_null(eddy_grpc_channel_new(loop, "no-port", NULL));
    assert_null(eddy_grpc_channel_new(loop, "host:0", NULL));
    assert_null(eddy_grpc_channel_new(loop, "host:70000", NULL));
    assert_null(eddy_grpc_channel_new(loop, "host:80x", NULL));
    assert_null(eddy_grpc_channel_new(loop, "::1:80", NULL));
    assert_null(eddy_grpc_channel_new(loop, "[::1]80", NULL));
    assert_null(eddy_grpc_channel_new(loop, ":80", NULL));
    const char *good[] = {"[::1]:80", "localhost:1", "example.com:65535"};
    for (size_t i = 0; i < 3; i++) {
        eddy_grpc_channel_t *c = eddy_grpc_channel_new(loop, good[i], NULL);
        assert_non_null(c);
        eddy_future_t *f = eddy_grpc_channel_close(c);
        assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
        assert_int_equal(eddy_future_error(f), 0);
        eddy_future_release(f);
    }
    finish_loop(loop);
}

/* Calls in flight and waiting when the channel closes: UNAVAILABLE "channel closed". */
static void test_close_in_flight(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL, NULL);
    result_t r[3] = {0};
    eddy_grpc_call_t *call[3];
    for (size_t i = 0; i < 3; i++) {
        call[i] = call_start(&e, SVC "Never", "x", NULL, &r[i]);
    }
    assert_true(wait_for(&requests, 3, DEADLINE_MS));
    eddy_future_t *u = eddy_grpc_unary(e.chan, SVC "Never", text("y"), NULL);
    assert_true(wait_for(&requests, 4, DEADLINE_MS));
    channel_close(&e);
    for (size_t i = 0; i < 3; i++) {
        call_wait(call[i], &r[i], EDDY_GRPC_UNAVAILABLE);
        assert_string_equal(r[i].message, "channel closed");
    }
    assert_int_equal(eddy_future_await(u, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_grpc_reply(u)->status, EDDY_GRPC_UNAVAILABLE);
    eddy_future_release(u);
    /* Closed before its connection was ready: the waiting calls are told too. */
    client_open(&e, NULL, NULL);
    result_t w = {0};
    start_t st = {.e = &e, .path = SVC "Never", .r = &w, .requests = {"z"}};
    run_sync(e.loop, start_task, &st);
    channel_close(&e);
    call_wait(st.call, &w, EDDY_GRPC_UNAVAILABLE);
    env_close(&e);
}

/* Requests sent before the connection is ready wait for it; is_writable says so. */
typedef struct early_s {
    env_t *e;
    result_t *r, *w;
    eddy_grpc_call_t *call, *quiet;
    bool writable;
    uint64_t timer;
    int64_t left;
} early_t;

static void early_task(void *arg)
{
    early_t *x = arg;
    eddy_grpc_call_options_t o = {.deadline_ms = 60000};
    x->call = eddy_grpc_call_start(x->e->chan, SVC "ClientStream", &o, &rec_ops, x->r, NULL);
    x->timer = eddy_grpc_call_schedule(x->call, 10, NULL, NULL);
    x->left = eddy_grpc_call_time_left_ms(x->call);
    for (int i = 0; i < 10; i++) {
        eddy_grpc_call_send(x->call, text("abcd"), NULL);
    }
    eddy_grpc_call_half_close(x->call);
    assert_int_equal(eddy_grpc_call_half_close(x->call), EDDY_ECLOSED);
    x->quiet = eddy_grpc_call_start(x->e->chan, SVC "ClientStream", NULL, &rec_ops, x->w, NULL);
    x->writable = eddy_grpc_call_is_writable(x->quiet);
}

static void half_close_task(void *arg)
{
    assert_int_equal(eddy_grpc_call_half_close(arg), 0);
}

static void test_sent_before_ready(void **state)
{
    (void)state;
    if (!eddy_tls_available()) {
        skip();
    }
    env_t e;
    memset(&e, 0, sizeof(e));
    tls_env(&e, true); /* the handshake's round trips: the calls surely wait */
    server_open(&e, NULL);
    eddy_grpc_channel_options_t co = {.tls = e.client_tls};
    client_open(&e, NULL, &co);
    result_t r = {0}, w = {0};
    early_t x = {.e = &e, .r = &r, .w = &w};
    run_sync(e.loop, early_task, &x);
    assert_int_equal(x.timer, 0); /* no call timer before a stream */
    assert_true(x.left > 59000 && x.left <= 60000);
    call_wait(x.call, &r, EDDY_GRPC_OK);
    assert_string_equal(r.first, "10/40");
    /* Not writable while waiting: on_writable once on a stream. */
    assert_false(x.writable);
    int64_t end = eddy_now_ns() + DEADLINE_MS * MS;
    while (atomic_load(&w.writable) == 0 && eddy_now_ns() < end) {
        sleep_ms(1);
    }
    assert_int_equal(atomic_load(&w.writable), 1);
    run_sync(e.loop, half_close_task, x.quiet);
    call_wait(x.quiet, &w, EDDY_GRPC_OK);
    assert_string_equal(w.first, "0/0");
    env_close(&e);
}

/* 1000 unary calls at once over two connections. */
static void test_many_over_two(void **state)
{
    (void)state;
    env_t e;
    eddy_grpc_channel_options_t co = {.connections = 2};
    env_open(&e, NULL, &co);
    enum { N = 1000 };
    eddy_future_t **f = calloc(N, sizeof(*f));
    assert_non_null(f);
    for (size_t i = 0; i < N; i++) {
        char req[16];
        snprintf(req, sizeof(req), "%zu", i);
        f[i] = eddy_grpc_unary(e.chan, SVC "Unary", text(req), NULL);
        assert_non_null(f[i]);
    }
    for (size_t i = 0; i < N; i++) {
        char want[16];
        snprintf(want, sizeof(want), "%zu", i);
        assert_int_equal(eddy_future_await(f[i], 3 * DEADLINE_MS), 0);
        const eddy_grpc_reply_t *r = eddy_future_grpc_reply(f[i]);
        assert_non_null(r);
        if (r->status != EDDY_GRPC_OK || !buf_is(r->response, want)) {
            fail_msg("call %zu: %s %s", i, eddy_grpc_status_name(r->status), r->message);
        }
        eddy_future_release(f[i]);
    }
    free(f);
    assert_int_equal(atomic_load(&accepted), 2);
    assert_int_equal(atomic_load(&requests), N);
    env_close(&e);
}

/* The server ends idle connections (GOAWAY, close): later calls get a new one. */
static void test_server_goaway(void **state)
{
    (void)state;
    env_t e;
    eddy_grpc_server_options_t so = {.h2 = {.idle_timeout_ms = 200}};
    env_open(&e, &so, NULL);
    unary_expect(&e, SVC "Unary", "a", EDDY_GRPC_OK, "a");
    sleep_ms(1200);
    unary_expect(&e, SVC "Unary", "b", EDDY_GRPC_OK, "b");
    assert_int_equal(atomic_load(&accepted), 2);
    /* A graceful shutdown of the server with a call in flight: the call ends UNAVAILABLE
     * (its connection closed under it at the server's deadline), never hangs. */
    env_close(&e);
}

/* Keepalive: pings on a quiet call; a server that allows two strikes says GOAWAY
 * ENHANCE_YOUR_CALM, which ends the call UNAVAILABLE. */
static void test_keepalive_too_many_pings(void **state)
{
    (void)state;
    env_t e;
    eddy_grpc_channel_options_t co = {.keepalive_ms = 40, .keepalive_timeout_ms = 2000};
    env_open(&e, NULL, &co);
    result_t r = {0};
    start_t st = {.e = &e, .path = SVC "Idle", .r = &r, .requests = {"x"}};
    run_sync(e.loop, start_task, &st);
    call_wait(st.call, &r, EDDY_GRPC_UNAVAILABLE);
    channel_close(&e);
    /* A server that permits them: the call lives on. */
    server_close(&e);
    eddy_grpc_server_options_t so = {.min_ping_interval_ms = 10};
    server_open(&e, &so);
    client_open(&e, NULL, &co);
    result_t ok = {0};
    start_t s2 = {.e = &e, .path = SVC "Idle", .r = &ok, .requests = {"x"}};
    run_sync(e.loop, start_task, &s2);
    sleep_ms(500);
    assert_false(atomic_load(&ok.closed));
    run_sync(e.loop, cancel_task, s2.call);
    call_wait(s2.call, &ok, EDDY_GRPC_CANCELLED);
    env_close(&e);
}

/* A peer that takes the connection and never answers: the keepalive PING goes unanswered. */
static void mute_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    (void)ctx;
    eddy_msg_release(msg);
}

static void mute_exception(eddy_ctx_t *ctx, int err)
{
    (void)ctx;
    (void)err; /* the client's close crossing ours */
}

static const eddy_handler_ops_t mute_ops = {.name = "mute", .channel_read = mute_read,
                                            .exception_caught = mute_exception};

static int mute_init(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_handler("mute", &mute_ops,
                                                                          NULL, NULL));
}

/* A server of mute connections (TLS's handshake never ends there either). */
static void mute_open(env_t *e)
{
    memset(e, 0, sizeof(*e));
    e->server = server_new(NULL);
    e->group = eddy_loop_group_new(1, NULL);
    e->sb = eddy_server_bootstrap_new();
    assert_int_equal(eddy_server_bootstrap_group(e->sb, e->group, NULL), 0);
    eddy_server_bootstrap_child_init(e->sb, mute_init, NULL);
    eddy_future_t *f = eddy_server_bootstrap_bind(e->sb, "127.0.0.1", 0);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    e->listener = eddy_channel_retain(eddy_future_channel(f));
    e->port = eddy_addr_port(eddy_channel_local_addr(e->listener));
    eddy_future_release(f);
}

/* The mute server goes first: our connection's close then ends at its FIN. */
static void mute_close(env_t *e)
{
    server_close(e);
    channel_close(e);
    finish_loop(e->loop);
    eddy_tls_context_release(e->client_tls);
}

static void test_keepalive_timeout(void **state)
{
    (void)state;
    env_t e;
    mute_open(&e);
    eddy_grpc_channel_options_t co = {.keepalive_ms = 50, .keepalive_timeout_ms = 200};
    client_open(&e, NULL, &co);
    result_t r = {0};
    int64_t t0 = eddy_now_ns();
    eddy_grpc_call_t *call = call_start(&e, SVC "Unary", "x", NULL, &r);
    call_wait(call, &r, EDDY_GRPC_UNAVAILABLE);
    assert_non_null(strstr(r.message, "keepalive"));
    assert_true((eddy_now_ns() - t0) / MS < 5000);
    mute_close(&e);
}

/* A call waiting for its connection (a TLS handshake that never ends): its deadline passes
 * there; another is cancelled there; a third ends with the channel. */
static void test_waiting_call(void **state)
{
    (void)state;
    if (!eddy_tls_available()) {
        skip();
    }
    env_t e;
    mute_open(&e);
    e.client_tls = eddy_tls_context_new(EDDY_TLS_CLIENT);
    assert_non_null(e.client_tls);
    eddy_grpc_channel_options_t co = {.tls = e.client_tls};
    client_open(&e, NULL, &co);
    eddy_grpc_call_options_t quick = {.deadline_ms = 50};
    eddy_future_t *f = unary(&e, SVC "Unary", "x", &quick);
    assert_int_equal(eddy_future_grpc_reply(f)->status, EDDY_GRPC_DEADLINE_EXCEEDED);
    eddy_future_release(f);
    result_t r = {0}, w = {0};
    eddy_grpc_call_t *call = call_start(&e, SVC "Unary", "x", NULL, &r);
    run_sync(e.loop, cancel_task, call);
    call_wait(call, &r, EDDY_GRPC_CANCELLED);
    call = call_start(&e, SVC "Unary", "x", NULL, &w);
    channel_close(&e);
    call_wait(call, &w, EDDY_GRPC_UNAVAILABLE);
    assert_string_equal(w.message, "channel closed");
    server_close(&e);
    finish_loop(e.loop);
    eddy_tls_context_release(e.client_tls);
}

/* Over TLS: ALPN chooses h2; a server that offers only http/1.1 is refused. */
static void tls_env(env_t *e, bool h2)
{
    eddy_tls_self_signed_t *ss = NULL;
    assert_int_equal(eddy_tls_self_signed_new("localhost", 1, &ss), 0);
    const char *cert = eddy_tls_self_signed_cert_pem(ss);
    const char *key = eddy_tls_self_signed_key_pem(ss);
    e->server_tls = eddy_tls_context_new(EDDY_TLS_SERVER);
    e->client_tls = eddy_tls_context_new(EDDY_TLS_CLIENT);
    assert_int_equal(eddy_tls_context_use_certificate_pem(e->server_tls, cert, strlen(cert), key,
                                                          strlen(key)), 0);
    size_t n;
    const char *const *alpn = eddy_grpc_alpn_protocols(&n);
    static const char *const h1[] = {"http/1.1"};
    assert_int_equal(eddy_tls_context_alpn(e->server_tls, h2 ? alpn : h1, h2 ? n : 1), 0);
    assert_int_equal(eddy_tls_context_alpn(e->client_tls, alpn, n), 0);
    assert_int_equal(eddy_tls_context_trust_pem(e->client_tls, cert, strlen(cert)), 0);
    eddy_tls_self_signed_free(ss);
}

static void test_tls(void **state)
{
    (void)state;
    if (!eddy_tls_available()) {
        skip();
    }
    for (int h2 = 1; h2 >= 0; h2--) {
        env_t e;
        memset(&e, 0, sizeof(e));
        tls_env(&e, h2);
        server_open(&e, NULL);
        eddy_grpc_channel_options_t co = {.tls = e.client_tls};
        client_open(&e, NULL, &co);
        eddy_future_t *f = unary(&e, SVC "Unary", "secret", NULL);
        const eddy_grpc_reply_t *r = eddy_future_grpc_reply(f);
        if (h2) {
            assert_int_equal(r->status, EDDY_GRPC_OK);
            assert_true(buf_is(r->response, "secret"));
        } else {
            assert_int_equal(r->status, EDDY_GRPC_UNAVAILABLE);
            assert_non_null(strstr(r->message, "ALPN"));
        }
        eddy_future_release(f);
        env_close(&e);
    }
}

/* eddy_grpc_unary() from many threads at once. */
typedef struct thread_arg_s {
    env_t *e;
    atomic_long *ok;
} thread_arg_t;

static void *unary_thread(void *arg)
{
    thread_arg_t *t = arg;
    for (int i = 0; i < 50; i++) {
        eddy_future_t *f = eddy_grpc_unary(t->e->chan, SVC "Unary", text("t"), NULL);
        if (eddy_future_await(f, DEADLINE_MS) == 0 && eddy_future_grpc_reply(f) != NULL &&
            eddy_future_grpc_reply(f)->status == EDDY_GRPC_OK) {
            atomic_fetch_add(t->ok, 1);
        }
        eddy_future_release(f);
    }
    return NULL;
}

/* A method on a carrier answers after the server's loops were shut down and freed (as
 * eddy-grpc-server stops: loops, then the carrier): the answer is dropped, nothing touches the
 * freed loop (ASan, TSan), and the call's memory goes when the carrier lets it go. */
static void test_carrier_outlives_loops(void **state)
{
    (void)state;
    eddy_carrier_options_t co;
    eddy_carrier_options_init(&co);
    assert_int_equal(eddy_carrier_new(&late_carrier, &co, NULL, NULL), 0);
    atomic_init(&late_gate.entered, false);
    atomic_init(&late_gate.open, false);
    env_t e;
    env_open(&e, NULL, NULL);
    result_t r = {0};
    eddy_grpc_call_t *call = call_start(&e, SVC "Late", "late", NULL, &r);
    assert_true(wait_flag(&late_gate.entered, DEADLINE_MS));
    channel_close(&e);
    call_wait(call, &r, EDDY_GRPC_UNAVAILABLE);
    server_close(&e); /* the loop group is freed with the method still inside */
    atomic_store(&late_gate.open, true);
    eddy_carrier_shutdown(late_carrier, EDDY_CARRIER_DRAIN);
    eddy_carrier_free(late_carrier);
    late_carrier = NULL;
    finish_loop(e.loop);
}

static void test_threads(void **state)
{
    (void)state;
    env_t e;
    eddy_grpc_channel_options_t co = {.connections = 3};
    env_open(&e, NULL, &co);
    atomic_long ok;
    atomic_init(&ok, 0);
    thread_arg_t t = {&e, &ok};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, unary_thread, &t), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
    }
    assert_int_equal(atomic_load(&ok), 200);
    env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_server_streaming),
        cmocka_unit_test(test_client_streaming),
        cmocka_unit_test(test_bidi_ping_pong),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_status_message),
        cmocka_unit_test(test_unimplemented),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_message_limits),
        cmocka_unit_test(test_gzip),
        cmocka_unit_test(test_connection_refused),
        cmocka_unit_test(test_targets),
        cmocka_unit_test(test_close_in_flight),
        cmocka_unit_test(test_sent_before_ready),
        cmocka_unit_test(test_many_over_two),
        cmocka_unit_test(test_server_goaway),
        cmocka_unit_test(test_keepalive_too_many_pings),
        cmocka_unit_test(test_keepalive_timeout),
        cmocka_unit_test(test_waiting_call),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_carrier_outlives_loops),
        cmocka_unit_test(test_threads),
    };
    int failed = cmocka_run_group_tests_name("codec.grpc_client", tests, NULL, NULL);
    if (eddy_library_shutdown() != 0) { /* a buffer still alive: one leaked */
        fprintf(stderr, "buffers alive at the end\n");
        failed++;
    }
    return failed;
}
