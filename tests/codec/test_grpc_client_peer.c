/*
 * The gRPC client against a real peer: Python's grpcio (tests/codec/grpc_peer.py, started
 * here on an ephemeral port; the test is skipped, 77, without grpcio). Unary, the streaming
 * kinds, metadata both ways with -bin, a status and its message, deadlines and cancels the
 * peer sees, gzip both ways, a message of 1 MiB, an unknown method.
 */
#include "support/loop_util.h"

#include <eddy/grpc.h>

#include "codec/grpc/internal.h" /* a call's gzip_in */

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SVC "/peer.Test/"

extern char **environ;

static pid_t peer_pid;
static int peer_stdin = -1;
static eddy_loop_t *loop;
static eddy_grpc_channel_t *chan, *zchan; /* zchan compresses its requests */

/* ---------------------------------------------------------------------------------------
 * The peer
 */

/* Start the peer; its port, 0 when it has no grpcio (it said SKIP), -1 on failure. */
static int peer_start(void)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    static char python[] = "python3", script[] = PEER_SCRIPT;
    char *argv[] = {python, script, NULL};
    int rc = posix_spawnp(&peer_pid, "python3", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    peer_stdin = in[1];
    char line[32] = {0};
    size_t got = 0;
    while (rc == 0 && got < sizeof(line) - 1 && memchr(line, '\n', got) == NULL) {
        struct pollfd p = {.fd = out[0], .events = POLLIN};
        ssize_t n = poll(&p, 1, 30000) == 1 ? read(out[0], line + got, sizeof(line) - 1 - got)
                                            : -1;
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    close(out[0]); /* after the whole line: the peer writes nothing more */
    if (memchr(line, '\n', got) == NULL) {
        fprintf(stderr, "the peer did not start (%s)\n", rc != 0 ? strerror(rc) : "no port");
        return -1;
    }
    return strncmp(line, "SKIP", 4) == 0 ? 0 : atoi(line);
}

static void peer_stop(void)
{
    close(peer_stdin); /* it stops at the end of its input */
    int status;
    for (int i = 0; i < 500 && waitpid(peer_pid, &status, WNOHANG) == 0; i++) {
        sleep_ms(10);
    }
    if (waitpid(peer_pid, &status, WNOHANG) == 0) {
        kill(peer_pid, SIGKILL);
        waitpid(peer_pid, &status, 0);
    }
}

/* ---------------------------------------------------------------------------------------
 * Calls
 */

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

static const eddy_http_header_t *md_find(const eddy_http_header_t *md, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++) {
        if (md[i].name.len == strlen(k) && memcmp(md[i].name.p, k, md[i].name.len) == 0) {
            return &md[i];
        }
    }
    return NULL;
}

static eddy_future_t *unary_on(eddy_grpc_channel_t *c, const char *path, eddy_buf_t *req,
                               const eddy_grpc_call_options_t *o)
{
    eddy_future_t *f = eddy_grpc_unary(c, path, req, o);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    const eddy_grpc_reply_t *r = eddy_future_grpc_reply(f);
    assert_non_null(r);
    return f;
}

static eddy_future_t *unary(const char *path, const char *req, const eddy_grpc_call_options_t *o)
{
    return unary_on(chan, path, text(req), o);
}

static void expect_status(const eddy_future_t *f, eddy_grpc_status_t want)
{
    const eddy_grpc_reply_t *r = eddy_future_grpc_reply(f);
    if (r->status != want) {
        fail_msg("status %s (%s), wanted %s", eddy_grpc_status_name(r->status), r->message,
                 eddy_grpc_status_name(want));
    }
}

/* A streaming call recorded: its responses' count, the first, the status. */
typedef struct result_s {
    atomic_bool closed;
    eddy_grpc_status_t status;
    char message[128];
    int messages;
    size_t bytes;
    char first[32];
    int pingpong; /* bidi: round trips before the half-close */
    bool gzip_in;
} result_t;

static void rec_message(eddy_grpc_call_t *call, eddy_buf_t *msg)
{
    result_t *r = eddy_grpc_call_arg(call);
    if (r->messages++ == 0) {
        snprintf(r->first, sizeof(r->first), "%.*s", (int)eddy_buf_readable(msg),
                 (const char *)eddy_buf_read_ptr(msg));
    }
    r->bytes += eddy_buf_readable(msg);
    r->gzip_in = call->gzip_in;
    if (r->pingpong > 0 && --r->pingpong > 0) {
        eddy_grpc_call_send(call, msg, NULL);
        return;
    }
    eddy_buf_release(msg);
    if (r->pingpong == 0 && r->messages > 0 && strcmp(eddy_grpc_call_path(call), SVC "Bidi") == 0) {
        eddy_grpc_call_half_close(call);
    }
}

static void rec_close(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message)
{
    result_t *r = eddy_grpc_call_arg(call);
    r->status = status;
    snprintf(r->message, sizeof(r->message), "%s", message);
    atomic_store(&r->closed, true);
}

static const eddy_grpc_client_ops_t rec_ops = {.on_message = rec_message,
                                               .on_close = rec_close};

typedef struct start_s {
    const char *path;
    result_t *r;
    const char *requests[4];
    bool half_close;
    eddy_grpc_call_t *call;
} start_t;

static void start_task(void *arg)
{
    start_t *st = arg;
    st->call = eddy_grpc_call_start(chan, st->path, NULL, &rec_ops, st->r, NULL);
    for (size_t i = 0; st->call != NULL && i < 4 && st->requests[i] != NULL; i++) {
        eddy_grpc_call_send(st->call, text(st->requests[i]), NULL);
    }
    if (st->call != NULL && st->half_close) {
        eddy_grpc_call_half_close(st->call);
    }
}

static void call_run(start_t *st, eddy_grpc_status_t want)
{
    run_sync(loop, start_task, st);
    assert_non_null(st->call);
    assert_true(wait_flag(&st->r->closed, DEADLINE_MS));
    eddy_grpc_call_release(st->call);
    if (st->r->status != want) {
        fail_msg("status %s (%s)", eddy_grpc_status_name(st->r->status), st->r->message);
    }
}

/* ---------------------------------------------------------------------------------------
 * The tests
 */

static void test_unary(void **state)
{
    (void)state;
    eddy_future_t *f = unary(SVC "Echo", "hello grpcio", NULL);
    expect_status(f, EDDY_GRPC_OK);
    assert_true(buf_is(eddy_future_grpc_reply(f)->response, "hello grpcio"));
    eddy_future_release(f);
    f = unary(SVC "Echo", "", NULL);
    expect_status(f, EDDY_GRPC_OK);
    assert_int_equal(eddy_buf_readable(eddy_future_grpc_reply(f)->response), 0);
    eddy_future_release(f);
}

static void test_metadata(void **state)
{
    (void)state;
    static const char bin[] = {(char)0xfe, 0, 'x', (char)0x80};
    eddy_http_header_t md[] = {{{"x-text", 6}, {"some words", 10}},
                               {{"x-data-bin", 10}, {bin, sizeof(bin)}}};
    eddy_grpc_call_options_t o = {.metadata = md, .metadata_count = 2};
    eddy_future_t *f = unary(SVC "Echo", "m", &o);
    const eddy_grpc_reply_t *r = eddy_future_grpc_reply(f);
    expect_status(f, EDDY_GRPC_OK);
    const eddy_http_header_t *h = md_find(r->headers, r->headers_count, "x-text");
    assert_non_null(h);
    assert_int_equal(h->value.len, 10);
    assert_memory_equal(h->value.p, "some words", 10);
    h = md_find(r->headers, r->headers_count, "x-data-bin");
    assert_non_null(h);
    assert_int_equal(h->value.len, sizeof(bin));
    assert_memory_equal(h->value.p, bin, sizeof(bin));
    h = md_find(r->trailers, r->trailers_count, "x-trailer");
    assert_non_null(h);
    assert_memory_equal(h->value.p, "done", 4);
    h = md_find(r->trailers, r->trailers_count, "x-trailer-bin");
    assert_non_null(h);
    assert_int_equal(h->value.len, 3);
    assert_memory_equal(h->value.p, "\x00\x01\xff", 3);
    eddy_future_release(f);
}

static void test_status(void **state)
{
    (void)state;
    const char *msg = "na\xc3\xafve 50% \xe2\x9c\x97 %zz";
    char req[96];
    snprintf(req, sizeof(req), "%d %s", EDDY_GRPC_PERMISSION_DENIED, msg);
    eddy_future_t *f = unary(SVC "Status", req, NULL);
    expect_status(f, EDDY_GRPC_PERMISSION_DENIED);
    assert_string_equal(eddy_future_grpc_reply(f)->message, msg);
    assert_null(eddy_future_grpc_reply(f)->response);
    eddy_future_release(f);
    f = unary(SVC "Nope", "x", NULL);
    expect_status(f, EDDY_GRPC_UNIMPLEMENTED);
    eddy_future_release(f);
}

static void test_streaming(void **state)
{
    (void)state;
    result_t s = {0};
    start_t st = {.path = SVC "ServerStream", .r = &s, .requests = {"300"}, .half_close = true};
    call_run(&st, EDDY_GRPC_OK);
    assert_int_equal(s.messages, 300);
    assert_string_equal(s.first, "r0");
    result_t c = {0};
    start_t ct = {.path = SVC "ClientStream", .r = &c, .requests = {"a", "bb", "ccc"},
                  .half_close = true};
    call_run(&ct, EDDY_GRPC_OK);
    assert_string_equal(c.first, "3/6");
    result_t b = {.pingpong = 50};
    start_t bt = {.path = SVC "Bidi", .r = &b, .requests = {"ping"}};
    call_run(&bt, EDDY_GRPC_OK);
    assert_int_equal(b.messages, 50);
}

static void cancel_task(void *arg)
{
    assert_int_equal(eddy_grpc_call_cancel(arg), 0);
}

/* How the peer's last Sleep ended. */
static void sleep_end_is(const char *want)
{
    eddy_future_t *f = unary(SVC "SleepEnd", "", NULL);
    expect_status(f, EDDY_GRPC_OK);
    assert_true(buf_is(eddy_future_grpc_reply(f)->response, want));
    eddy_future_release(f);
}

static void test_deadline_and_cancel(void **state)
{
    (void)state;
    eddy_grpc_call_options_t o = {.deadline_ms = 300};
    int64_t t0 = eddy_now_ns();
    eddy_future_t *f = unary(SVC "Sleep", "z", &o);
    expect_status(f, EDDY_GRPC_DEADLINE_EXCEEDED);
    assert_true((eddy_now_ns() - t0) / MS < 5000);
    eddy_future_release(f);
    sleep_end_is("cancelled");
    /* A deadline long enough: the answer comes. */
    eddy_grpc_call_options_t slow = {.deadline_ms = 20000};
    f = unary(SVC "Echo", "in time", &slow);
    expect_status(f, EDDY_GRPC_OK);
    eddy_future_release(f);
    /* Cancelled by us: the peer sees it go. */
    result_t r = {0};
    start_t st = {.path = SVC "Sleep", .r = &r, .requests = {"z"}, .half_close = true};
    run_sync(loop, start_task, &st);
    sleep_ms(200);
    run_sync(loop, cancel_task, st.call);
    assert_true(wait_flag(&r.closed, DEADLINE_MS));
    eddy_grpc_call_release(st.call);
    assert_int_equal(r.status, EDDY_GRPC_CANCELLED);
    sleep_end_is("cancelled");
}

static void test_gzip_and_size(void **state)
{
    (void)state;
    size_t n = 1 << 20;
    eddy_buf_t *big = eddy_buf_new(n);
    memset(eddy_buf_write_ptr(big), 'q', n);
    eddy_buf_produce(big, n);
    eddy_future_t *f = unary_on(zchan, SVC "Gzip", eddy_buf_retain(big), NULL);
    expect_status(f, EDDY_GRPC_OK);
    const eddy_buf_t *resp = eddy_future_grpc_reply(f)->response;
    assert_int_equal(eddy_buf_readable(resp), n);
    assert_memory_equal(eddy_buf_read_ptr(resp), eddy_buf_read_ptr(big), n);
    eddy_future_release(f);
    f = unary_on(chan, SVC "Echo", big, NULL); /* 1 MiB plain, both ways */
    expect_status(f, EDDY_GRPC_OK);
    assert_int_equal(eddy_buf_readable(eddy_future_grpc_reply(f)->response), n);
    eddy_future_release(f);
    /* The response came compressed. */
    result_t r = {0};
    start_t st = {.path = SVC "Gzip", .r = &r, .requests = {"squeeze me squeeze me"},
                  .half_close = true};
    call_run(&st, EDDY_GRPC_OK);
    assert_true(r.gzip_in);
    assert_string_equal(r.first, "squeeze me squeeze me");
}

int main(void)
{
    int port = peer_start();
    if (port <= 0) {
        if (port == 0) {
            fprintf(stderr, "no grpcio: skipped\n");
            peer_stop();
        }
        return port == 0 ? 77 : 1;
    }
    loop = eddy_loop_new(NULL);
    eddy_loop_start(loop);
    char target[32];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    eddy_grpc_channel_options_t zo = {.compress = true};
    chan = eddy_grpc_channel_new(loop, target, NULL);
    zchan = eddy_grpc_channel_new(loop, target, &zo);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_streaming),
        cmocka_unit_test(test_deadline_and_cancel),
        cmocka_unit_test(test_gzip_and_size),
    };
    int failed = chan != NULL && zchan != NULL
                     ? cmocka_run_group_tests_name("codec.grpc_client_peer", tests, NULL, NULL)
                     : 1;
    eddy_grpc_channel_t *both[] = {chan, zchan};
    for (size_t i = 0; i < 2; i++) {
        eddy_future_t *f = both[i] != NULL ? eddy_grpc_channel_close(both[i]) : NULL;
        if (f != NULL && (eddy_future_await(f, DEADLINE_MS) != 0 || eddy_future_error(f) != 0)) {
            failed++;
        }
        eddy_future_release(f);
    }
    eddy_future_await(eddy_loop_shutdown_gracefully(loop, 0, 5000), DEADLINE_MS);
    eddy_loop_free(loop);
    peer_stop();
    if (eddy_library_shutdown() != 0) { /* a buffer still alive: one leaked */
        fprintf(stderr, "buffers alive at the end\n");
        failed++;
    }
    return failed;
}
