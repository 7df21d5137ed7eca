/*
 * The bootstraps (bootstrap/bootstrap.c, bootstrap/server_bootstrap.c) on real loopback
 * sockets: echo through a ServerBootstrap and a Bootstrap (by address and by name), one group
 * for boss and workers, missing configuration, the connection limit, SO_REUSEPORT mode, a
 * refused connect, the graceful shutdown of children, reconnecting with backoff, stopping it on free, the connect timeout and
 * Unix sockets. Every test is bounded in time and closes and frees what it made.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/eddy.h>

#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define DEADLINE_MS 10000

#include "support/wait_util.h"

/* ---------------------------------------------------------------------------------------
 * Handlers: an echo server and a client that keeps what it reads.
 */

static _Atomic int children_inited;
static _Atomic int child_attr_seen;
static _Atomic int listener_inited;
static int child_key; /* attribute keys: addresses */
static int listener_key;

static void echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_ctx_write(ctx, msg, NULL);
}

static void echo_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
}

static const eddy_handler_ops_t echo_ops = {
    .name = "echo",
    .sharable = true,
    .channel_read = echo_read,
    .channel_read_complete = echo_read_complete,
};

static int init_echo_child(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    atomic_fetch_add(&children_inited, 1);
    if (eddy_channel_attr(ch, &child_key) == (void *)&child_key) {
        atomic_fetch_add(&child_attr_seen, 1);
    }
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "echo", &echo_ops, NULL, NULL);
}

static int init_listener(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    if (eddy_channel_attr(ch, &listener_key) == (void *)&listener_key) {
        atomic_fetch_add(&listener_inited, 1);
    }
    return 0;
}

typedef struct rx_s {
    char data[256];
    _Atomic size_t len; /* release by the loop after data, acquire by the test */
} rx_t;

static void rx_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    rx_t *rx = eddy_ctx_state(ctx);
    eddy_buf_t *b = eddy_buf_of(msg);
    size_t len = atomic_load_explicit(&rx->len, memory_order_relaxed);
    size_t n = eddy_buf_readable(b);
    if (n > sizeof(rx->data) - len) {
        n = sizeof(rx->data) - len;
    }
    eddy_buf_read_bytes(b, rx->data + len, n);
    atomic_store_explicit(&rx->len, len + n, memory_order_release);
    eddy_buf_release(b);
}

static const eddy_handler_ops_t rx_ops = {
    .name = "rx",
    .sharable = true,
    .channel_read = rx_read,
};

static int init_rx(eddy_channel_t *ch, void *arg)
{
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "rx", &rx_ops, arg, NULL);
}

/* ---------------------------------------------------------------------------------------
 * Helpers
 */

static eddy_loop_group_t *group_new(size_t n)
{
    eddy_loop_group_t *g = eddy_loop_group_new(n, NULL);
    assert_non_null(g);
    return g;
}

static void group_finish(eddy_loop_group_t *g)
{
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(g, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

/* The channel f completed with, retained; f released. */
static eddy_channel_t *await_channel(eddy_future_t *f)
{
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    if (eddy_future_error(f) != 0) {
        fprintf(stderr, "future failed: %s\n", eddy_strerror(eddy_future_error(f)));
    }
    assert_int_equal(eddy_future_error(f), 0);
    eddy_channel_t *ch = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    return ch;
}

/* The error f failed with; f released. */
static int await_error(eddy_future_t *f, int64_t ms)
{
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, ms), 0);
    int err = eddy_future_error(f);
    eddy_future_release(f);
    return err;
}

static void close_channel(eddy_channel_t *ch)
{
    eddy_channel_close(ch, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(ch), DEADLINE_MS), 0);
    eddy_channel_release(ch);
}

static uint16_t port_of(eddy_channel_t *ch)
{
    return eddy_addr_port(eddy_channel_local_addr(ch));
}

/* A port nothing listens on (bound and closed at once, so likely free for a while). */
/* A client bootstrap on g that reconnects as ro says. */
static eddy_bootstrap_t *retrying_client(eddy_loop_group_t *g, const eddy_reconnect_options_t *ro)
{
    eddy_bootstrap_t *cb = eddy_bootstrap_new();
    assert_non_null(cb);
    assert_int_equal(eddy_bootstrap_group(cb, g), 0);
    assert_int_equal(eddy_bootstrap_reconnect(cb, ro), 0);
    return cb;
}

static uint16_t closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* A blocking client socket on 127.0.0.1:port, with receive and send timeouts. */
static int raw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {DEADLINE_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Send text on fd and read the echo back. */
static void raw_echo(int fd, const char *text)
{
    size_t n = strlen(text);
    assert_int_equal(send(fd, text, n, MSG_NOSIGNAL), (ssize_t)n);
    char buf[64];
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, buf + got, sizeof(buf) - got, 0);
        assert_true(r > 0);
        got += (size_t)r;
    }
    assert_memory_equal(buf, text, n);
}

/* Write text on ch and wait for the echo in rx (which starts empty). */
static void client_echo(eddy_channel_t *ch, rx_t *rx, const char *text)
{
    size_t n = strlen(text);
    eddy_channel_write_and_flush(ch, eddy_buf_msg(eddy_buf_from_str(text)), NULL);
    WAIT_FOR(atomic_load_explicit(&rx->len, memory_order_acquire) >= n);
    assert_int_equal(atomic_load(&rx->len), n);
    assert_memory_equal(rx->data, text, n);
}

static eddy_server_bootstrap_t *echo_server(eddy_loop_group_t *boss, eddy_loop_group_t *workers)
{
    eddy_server_bootstrap_t *b = eddy_server_bootstrap_new();
    assert_non_null(b);
    assert_int_equal(eddy_server_bootstrap_group(b, boss, workers), 0);
    assert_int_equal(eddy_server_bootstrap_option(b, EDDY_SO_BACKLOG, 128), 0);
    assert_int_equal(eddy_server_bootstrap_child_option(b, EDDY_TCP_NODELAY, 1), 0);
    eddy_server_bootstrap_child_init(b, init_echo_child, NULL);
    return b;
}

static eddy_bootstrap_t *rx_client(eddy_loop_group_t *g, rx_t *rx)
{
    eddy_bootstrap_t *b = eddy_bootstrap_new();
    assert_non_null(b);
    assert_int_equal(eddy_bootstrap_group(b, g), 0);
    eddy_bootstrap_init(b, init_rx, rx);
    return b;
}

/* ---------------------------------------------------------------------------------------
 * Tests
 */

static void test_bootstraps_echo_by_address_and_by_name(void **state)
{
    (void)state;
    atomic_store(&children_inited, 0);
    atomic_store(&child_attr_seen, 0);
    atomic_store(&listener_inited, 0);
    eddy_loop_group_t *boss = group_new(1);
    eddy_loop_group_t *workers = group_new(2);
    eddy_loop_group_t *clients = group_new(1);

    eddy_server_bootstrap_t *sb = echo_server(boss, workers);
    assert_int_equal(eddy_server_bootstrap_child_attr(sb, &child_key, &child_key), 0);
    assert_int_equal(eddy_server_bootstrap_attr(sb, &listener_key, &listener_key), 0);
    eddy_server_bootstrap_init(sb, init_listener, NULL);
    eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind(sb, "127.0.0.1", 0));
    uint16_t port = port_of(server);
    assert_true(port != 0);
    assert_int_equal(atomic_load(&listener_inited), 1);

    rx_t rx1 = {0}, rx2 = {0};
    eddy_bootstrap_t *cb1 = rx_client(clients, &rx1);
    eddy_channel_t *c1 = await_channel(eddy_bootstrap_connect(cb1, "127.0.0.1", port));
    assert_true(eddy_channel_is_active(c1));
    client_echo(c1, &rx1, "hello");

    /* "localhost" may come back as ::1 first, refused here: the next address is tried. */
    eddy_bootstrap_t *cb2 = rx_client(clients, &rx2);
    assert_int_equal(eddy_bootstrap_option(cb2, EDDY_CONNECT_TIMEOUT_MS, 5000), 0);
    eddy_channel_t *c2 = await_channel(eddy_bootstrap_connect(cb2, "localhost", port));
    client_echo(c2, &rx2, "by name");

    eddy_server_counters_t cn;
    eddy_server_bootstrap_counters(sb, &cn);
    assert_int_equal(cn.accepted, 2);
    assert_int_equal(cn.active, 2);
    assert_int_equal(cn.rejected_max + cn.rejected_rate, 0);
    assert_int_equal(atomic_load(&children_inited), 2);
    assert_int_equal(atomic_load(&child_attr_seen), 2);

    close_channel(c1);
    close_channel(c2);
    WAIT_FOR((eddy_server_bootstrap_counters(sb, &cn), cn.active == 0));
    close_channel(server);
    eddy_bootstrap_free(cb1);
    eddy_bootstrap_free(cb2);
    eddy_server_bootstrap_free(sb);
    group_finish(clients);
    group_finish(workers);
    group_finish(boss);
}

static void test_one_group_serves_boss_and_workers(void **state)
{
    (void)state;
    eddy_loop_group_t *g = group_new(2);
    eddy_server_bootstrap_t *sb = echo_server(g, NULL);
    /* No host: every interface, reached here through 127.0.0.1. */
    eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind(sb, NULL, 0));
    rx_t rx = {0};
    eddy_bootstrap_t *cb = rx_client(g, &rx);
    eddy_channel_t *c = await_channel(eddy_bootstrap_connect(cb, "127.0.0.1", port_of(server)));
    client_echo(c, &rx, "one group");
    close_channel(c);
    close_channel(server);
    /* Freed after the group: the state lives on with the channels that used it. */
    group_finish(g);
    eddy_bootstrap_free(cb);
    eddy_server_bootstrap_free(sb);
}

static void test_missing_configuration_fails_with_einval(void **state)
{
    (void)state;
    eddy_server_bootstrap_t *sb = eddy_server_bootstrap_new();
    assert_non_null(sb);
    eddy_server_bootstrap_child_init(sb, init_echo_child, NULL);
    assert_int_equal(await_error(eddy_server_bootstrap_bind(sb, "127.0.0.1", 0), 0), EDDY_EINVAL);
    assert_int_equal(eddy_server_bootstrap_group(sb, NULL, NULL), EDDY_EINVAL);

    eddy_loop_group_t *g = group_new(1);
    eddy_server_bootstrap_free(sb);
    sb = eddy_server_bootstrap_new();
    assert_int_equal(eddy_server_bootstrap_group(sb, g, NULL), 0);
    assert_int_equal(await_error(eddy_server_bootstrap_bind(sb, "127.0.0.1", 0), 0), EDDY_EINVAL);
    assert_int_equal(await_error(eddy_server_bootstrap_bind_unix(sb, "/tmp/x"), 0), EDDY_EINVAL);
    eddy_server_bootstrap_free(sb);

    eddy_bootstrap_t *cb = eddy_bootstrap_new();
    assert_non_null(cb);
    assert_int_equal(await_error(eddy_bootstrap_connect(cb, "127.0.0.1", 1), 0), EDDY_EINVAL);
    assert_int_equal(eddy_bootstrap_group(cb, g), 0);
    assert_int_equal(await_error(eddy_bootstrap_connect(cb, NULL, 1), 0), EDDY_EINVAL);
    assert_int_equal(eddy_bootstrap_option(cb, EDDY_OPTION_COUNT_, 1), EDDY_EINVAL);
    eddy_bootstrap_free(cb);
    group_finish(g);
}

static void test_max_connections_closes_the_extra_one(void **state)
{
    (void)state;
    eddy_loop_group_t *g = group_new(2);
    eddy_server_bootstrap_t *sb = echo_server(g, NULL);
    eddy_server_bootstrap_limits(sb, 1, 0);
    eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind(sb, "127.0.0.1", 0));
    uint16_t port = port_of(server);

    int fd1 = raw_connect(port);
    raw_echo(fd1, "first");
    int fd2 = raw_connect(port);
    char c;
    ssize_t r = recv(fd2, &c, 1, 0); /* the server closes it at once: EOF or a reset */
    assert_true(r == 0 || (r < 0 && errno == ECONNRESET));
    eddy_server_counters_t cn;
    eddy_server_bootstrap_counters(sb, &cn);
    assert_int_equal(cn.accepted, 2);
    assert_int_equal(cn.active, 1);
    assert_int_equal(cn.rejected_max, 1);
    raw_echo(fd1, "still served");
    close(fd2);
    close(fd1);
    WAIT_FOR((eddy_server_bootstrap_counters(sb, &cn), cn.active == 0));

    /* A slot is free again. */
    int fd3 = raw_connect(port);
    raw_echo(fd3, "third");
    close(fd3);
    close_channel(server);
    eddy_server_bootstrap_free(sb);
    group_finish(g);
}

/* A child's close op that says goodbye before it passes the close on, as a protocol's
 * graceful close (HTTP/2's GOAWAY) does. */
static void bye_close(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    eddy_ctx_write(ctx, eddy_buf_msg(eddy_buf_from_str("bye")), NULL);
    eddy_ctx_close_after_flush(ctx, p);
}

static const eddy_handler_ops_t bye_ops = {
    .name = "bye",
    .sharable = true,
    .channel_read = echo_read,
    .channel_read_complete = echo_read_complete,
    .close = bye_close,
};

static int init_bye_child(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "bye", &bye_ops, NULL, NULL);
}

static void test_shutdown_closes_children_through_their_pipelines(void **state)
{
    (void)state;
    eddy_loop_group_t *g = group_new(2);
    eddy_server_bootstrap_t *sb = eddy_server_bootstrap_new();
    eddy_server_bootstrap_group(sb, g, NULL);
    eddy_server_bootstrap_child_init(sb, init_bye_child, NULL);
    eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind(sb, "127.0.0.1", 0));
    uint16_t port = port_of(server);
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = raw_connect(port);
        raw_echo(fds[i], "hello");
    }
    close_channel(server);

    eddy_future_t *f = eddy_server_bootstrap_shutdown(sb);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    eddy_server_counters_t cn;
    eddy_server_bootstrap_counters(sb, &cn);
    assert_int_equal(cn.active, 0);
    for (int i = 0; i < 3; i++) { /* each said goodbye, then closed */
        char buf[8] = {0};
        size_t got = 0;
        ssize_t r;
        while (got < sizeof(buf) && (r = recv(fds[i], buf + got, sizeof(buf) - got, 0)) > 0) {
            got += (size_t)r;
        }
        assert_int_equal(got, 3);
        assert_memory_equal(buf, "bye", 3);
        close(fds[i]);
    }
    eddy_future_t *again = eddy_server_bootstrap_shutdown(sb); /* nothing left: done at once */
    assert_true(eddy_future_is_done(again));
    assert_int_equal(eddy_future_error(again), 0);
    eddy_future_release(again);
    eddy_future_release(f);
    eddy_server_bootstrap_free(sb);
    group_finish(g);
}

static int refuse_init(eddy_channel_t *ch, void *arg)
{
    (void)ch;
    (void)arg;
    return EDDY_EPERM;
}

static void test_init_callbacks_that_fail_close_the_channel(void **state)
{
    (void)state;
    eddy_loop_group_t *g = group_new(1);
    eddy_server_bootstrap_t *sb = echo_server(g, NULL);
    eddy_server_bootstrap_child_init(sb, refuse_init, NULL);
    eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind(sb, "127.0.0.1", 0));
    int fd = raw_connect(port_of(server));
    char c;
    ssize_t r = recv(fd, &c, 1, 0);
    assert_true(r == 0 || (r < 0 && errno == ECONNRESET));
    close(fd);
    eddy_server_counters_t cn;
    WAIT_FOR((eddy_server_bootstrap_counters(sb, &cn), cn.accepted == 1 && cn.active == 0));

    eddy_bootstrap_t *cb = eddy_bootstrap_new();
    assert_int_equal(eddy_bootstrap_group(cb, g), 0);
    eddy_bootstrap_init(cb, refuse_init, NULL);
    assert_int_equal(
        await_error(eddy_bootstrap_connect(cb, "127.0.0.1", port_of(server)), DEADLINE_MS),
        EDDY_EPERM);
    eddy_bootstrap_free(cb);
    close_channel(server);
    eddy_server_bootstrap_free(sb);
    group_finish(g);
}

static void test_accept_rate_limit_closes_the_excess(void **state)
{
    (void)state;
    eddy_loop_group_t *g = group_new(1);
    eddy_server_bootstrap_t *sb = echo_server(g, NULL);
    eddy_server_bootstrap_limits(sb, 0, 2);
    eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind(sb, "127.0.0.1", 0));
    int fd[5];
    for (int i = 0; i < 5; i++) {
        fd[i] = raw_connect(port_of(server));
    }
    eddy_server_counters_t cn;
    WAIT_FOR((eddy_server_bootstrap_counters(sb, &cn), cn.accepted == 5));
    /* Two per second window; the five may straddle a second boundary. */
    assert_true(cn.rejected_rate >= 1 && cn.rejected_rate <= 3);
    for (int i = 0; i < 5; i++) {
        close(fd[i]);
    }
    WAIT_FOR((eddy_server_bootstrap_counters(sb, &cn), cn.active == 0));
    close_channel(server);
    eddy_server_bootstrap_free(sb);
    group_finish(g);
}

/*
 * Once the listener's close future completed, nothing of the server touches the worker group
 * any more: it may be freed at once, before the boss group (TSan saw the boss loop still
 * queueing onto the freed worker loops).
 */
static void test_workers_freed_right_after_the_listener_closed(void **state)
{
    (void)state;
    for (int i = 0; i < 10; i++) {
        eddy_loop_group_t *boss = group_new(1);
        eddy_loop_group_t *workers = group_new(2);
        eddy_server_bootstrap_t *sb = echo_server(boss, workers);
        eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind(sb, "127.0.0.1", 0));
        eddy_server_bootstrap_free(sb);
        close_channel(server);
        group_finish(workers);
        group_finish(boss);
    }
}

static void test_reuseport_mode_serves_clients(void **state)
{
    (void)state;
    eddy_loop_group_t *workers = group_new(2);
    eddy_server_bootstrap_t *sb = echo_server(workers, NULL);
    assert_int_equal(eddy_server_bootstrap_reuseport(sb, true), 0);
    eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind(sb, "127.0.0.1", 0));
    uint16_t port = port_of(server);
    assert_true(port != 0);

    enum { N = 16 };
    int fd[N];
    for (int i = 0; i < N; i++) {
        fd[i] = raw_connect(port);
        raw_echo(fd[i], "reuseport");
    }
    eddy_server_counters_t cn;
    eddy_server_bootstrap_counters(sb, &cn);
    assert_int_equal(cn.active, N);
    for (int i = 0; i < N; i++) {
        close(fd[i]);
    }
    WAIT_FOR((eddy_server_bootstrap_counters(sb, &cn), cn.active == 0));

    /* Closing the first listener closes its sibling: the port is refused then. */
    close_channel(server);
    bool refused = false;
    for (int64_t until = now_ms() + DEADLINE_MS; !refused && now_ms() < until;) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        refused = connect(s, (struct sockaddr *)&a, sizeof(a)) != 0 && errno == ECONNREFUSED;
        close(s);
        if (!refused) {
            usleep(1000);
        }
    }
    assert_true(refused);
    eddy_server_bootstrap_free(sb);
    group_finish(workers);
}

static void test_connect_to_a_closed_port_is_refused(void **state)
{
    (void)state;
    eddy_loop_group_t *g = group_new(1);
    rx_t rx = {0};
    eddy_bootstrap_t *cb = rx_client(g, &rx);
    assert_int_equal(
        await_error(eddy_bootstrap_connect(cb, "127.0.0.1", closed_port()), DEADLINE_MS),
        EDDY_ECONNREFUSED);
    eddy_bootstrap_free(cb);
    group_finish(g);
}

static _Atomic int reconnect_attempts;
static _Atomic int64_t reconnect_last_delay;

static void count_attempt(eddy_bootstrap_t *b, unsigned attempt, int64_t delay_ms, int err,
                          void *arg)
{
    (void)b;
    (void)arg;
    (void)err;
    atomic_store(&reconnect_attempts, (int)attempt);
    atomic_store(&reconnect_last_delay, delay_ms);
}

static void test_reconnect_with_backoff_until_the_server_opens(void **state)
{
    (void)state;
    atomic_store(&reconnect_attempts, 0);
    eddy_loop_group_t *g = group_new(1);
    uint16_t port = closed_port();
    rx_t rx = {0};
    eddy_bootstrap_t *cb = rx_client(g, &rx);
    eddy_reconnect_options_t ro = {
        .backoff = EDDY_BACKOFF_EXPONENTIAL,
        .base_ms = 20,
        .max_ms = 80,
        .cb = count_attempt,
    };
    assert_int_equal(eddy_bootstrap_reconnect(cb, &ro), 0);
    eddy_future_t *f = eddy_bootstrap_connect(cb, "127.0.0.1", port);
    assert_non_null(f);
    WAIT_FOR(atomic_load(&reconnect_attempts) >= 2);
    assert_false(eddy_future_is_done(f));

    eddy_server_bootstrap_t *sb = echo_server(g, NULL);
    eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind(sb, "127.0.0.1", port));
    eddy_channel_t *c = await_channel(f);
    client_echo(c, &rx, "at last");
    assert_true(atomic_load(&reconnect_attempts) >= 2);
    assert_true(atomic_load(&reconnect_last_delay) <= 80);

    close_channel(c);
    close_channel(server);
    eddy_bootstrap_free(cb);
    eddy_server_bootstrap_free(sb);
    group_finish(g);
}

static void test_free_stops_reconnecting(void **state)
{
    (void)state;
    atomic_store(&reconnect_attempts, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_reconnect_options_t ro = {
        .backoff = EDDY_BACKOFF_FIXED,
        .base_ms = 60000, /* never reached: free cancels the wait */
        .cb = count_attempt,
    };
    eddy_bootstrap_t *cb = retrying_client(g, &ro);
    eddy_future_t *f = eddy_bootstrap_connect(cb, "127.0.0.1", closed_port());
    WAIT_FOR(atomic_load(&reconnect_attempts) == 1);
    int64_t t0 = now_ms();
    eddy_bootstrap_free(cb);
    assert_int_equal(await_error(f, DEADLINE_MS), EDDY_ECANCELED);
    assert_true(now_ms() - t0 < 5000);
    assert_int_equal(atomic_load(&reconnect_attempts), 1);
    group_finish(g);
}

/* The group shuts down while a retry waits: the loop drops the timer without running it, and
 * free must still fail the future (and free the job) rather than wait for it forever. */
static void free_during_a_retry(bool free_group_first)
{
    atomic_store(&reconnect_attempts, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_reconnect_options_t ro = {
        .backoff = EDDY_BACKOFF_FIXED,
        .base_ms = 60000,
        .cb = count_attempt,
    };
    eddy_bootstrap_t *cb = retrying_client(g, &ro);
    eddy_future_t *f = eddy_bootstrap_connect(cb, "127.0.0.1", closed_port());
    WAIT_FOR(atomic_load(&reconnect_attempts) == 1);
    /* Terminated, not freed yet: the future belongs to its loop. */
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(g, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    if (free_group_first) {
        /* The job holds its loop: the retry's timer and the future stay readable. */
        assert_int_equal(eddy_loop_group_free(g), 0);
    }
    eddy_bootstrap_free(cb);
    assert_int_equal(await_error(f, 2000), EDDY_ECANCELED);
    if (!free_group_first) {
        assert_int_equal(eddy_loop_group_free(g), 0);
    }
}

static void test_free_after_the_group_shut_down_during_a_retry(void **state)
{
    (void)state;
    free_during_a_retry(false);
}

static void test_free_after_the_group_was_freed_during_a_retry(void **state)
{
    (void)state;
    free_during_a_retry(true);
}

static _Atomic int attempts_off_loop;

static void count_attempt_off_loop(eddy_bootstrap_t *b, unsigned attempt, int64_t delay_ms, int err,
                                   void *arg)
{
    count_attempt(b, attempt, delay_ms, err, arg);
    if (eddy_loop_current() == NULL) {
        atomic_fetch_add(&attempts_off_loop, 1);
    }
}

/* A name that does not resolve fails on the resolver's helper thread: the retry is still
 * announced on a loop. A label over 63 characters fails in the resolver itself, without DNS. */
static void test_reconnect_callback_runs_on_a_loop_after_a_failed_resolve(void **state)
{
    (void)state;
    atomic_store(&reconnect_attempts, 0);
    atomic_store(&attempts_off_loop, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_reconnect_options_t ro = {
        .backoff = EDDY_BACKOFF_FIXED,
        .base_ms = 5,
        .max_attempts = 2,
        .cb = count_attempt_off_loop,
    };
    eddy_bootstrap_t *cb = retrying_client(g, &ro);
    char host[80];
    memset(host, 'a', 64);
    snprintf(host + 64, sizeof(host) - 64, ".invalid");
    int err = await_error(eddy_bootstrap_connect(cb, host, 80), DEADLINE_MS);
    assert_true(err != 0);
    assert_int_equal(atomic_load(&reconnect_attempts), 2);
    assert_int_equal(atomic_load(&attempts_off_loop), 0);
    eddy_bootstrap_free(cb);
    group_finish(g);
}

/*
 * A peer that does not answer, made here: a listener on 127.0.0.1 whose accept queue is full
 * (backlog 0, filled, never accepted) drops further SYNs, so a connect to it waits in SYN_SENT
 * for the kernel's retransmission, a second later. (10.255.255.1 is not routable, but sandboxes
 * may answer for any address.)
 */
typedef struct silent_s {
    int lfd;
    int filler[3];
    uint16_t port;
} silent_t;

static void silent_open(silent_t *s)
{
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    assert_true(s->lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s->lfd, 0), 0); /* the accept queue holds one */
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &len), 0);
    s->port = ntohs(a.sin_port);
    for (int i = 0; i < 3; i++) {
        s->filler[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        assert_true(s->filler[i] >= 0);
        (void)connect(s->filler[i], (struct sockaddr *)&a, sizeof(a));
    }
    usleep(50000); /* let the handshakes that can complete complete */
}

/* Make room: the fillers go (those still in SYN_SENT stop trying) and the queue empties, so
 * the next SYN gets through. */
static void silent_make_room(silent_t *s)
{
    for (int i = 0; i < 3; i++) {
        if (s->filler[i] >= 0) {
            close(s->filler[i]);
            s->filler[i] = -1;
        }
    }
    int fd;
    while ((fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0 ||
           (errno != EAGAIN && errno != EWOULDBLOCK)) {
        if (fd >= 0) {
            close(fd);
        }
    }
}

static void silent_close(silent_t *s)
{
    silent_make_room(s);
    close(s->lfd);
}

/* A connect still under way when the bootstrap is freed fails with EDDY_ECANCELED, and the
 * channel it then makes once the peer answers is closed. */
static void test_free_fails_a_connect_under_way(void **state)
{
    (void)state;
    silent_t peer;
    silent_open(&peer);
    eddy_loop_group_t *g = group_new(1);
    eddy_bootstrap_t *cb = eddy_bootstrap_new();
    assert_int_equal(eddy_bootstrap_group(cb, g), 0);
    eddy_future_t *f = eddy_bootstrap_connect(cb, "127.0.0.1", peer.port);
    usleep(100 * 1000);
    assert_false(eddy_future_is_done(f));
    eddy_bootstrap_free(cb);
    silent_make_room(&peer); /* the connect's next SYN gets through */
    assert_int_equal(await_error(f, DEADLINE_MS), EDDY_ECANCELED);
    silent_close(&peer);
    group_finish(g);
}

static void test_reconnect_gives_up_after_max_attempts(void **state)
{
    (void)state;
    atomic_store(&reconnect_attempts, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_reconnect_options_t ro = {
        .backoff = EDDY_BACKOFF_LINEAR,
        .base_ms = 5,
        .max_attempts = 3,
        .cb = count_attempt,
    };
    eddy_bootstrap_t *cb = retrying_client(g, &ro);
    assert_int_equal(
        await_error(eddy_bootstrap_connect(cb, "127.0.0.1", closed_port()), DEADLINE_MS),
        EDDY_ECONNREFUSED);
    assert_int_equal(atomic_load(&reconnect_attempts), 3);
    assert_int_equal(atomic_load(&reconnect_last_delay), 15);
    eddy_bootstrap_free(cb);
    group_finish(g);
}

static _Atomic int client_inits;
static _Atomic(eddy_channel_t *) last_client; /* retained */

static _Atomic int client_actives;

static void count_active(eddy_ctx_t *ctx)
{
    atomic_fetch_add(&client_actives, 1);
    eddy_ctx_fire_channel_active(ctx);
}

static const eddy_handler_ops_t count_active_ops = {
    .name = "count-active",
    .sharable = true,
    .channel_active = count_active,
};

static int init_and_keep(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    atomic_fetch_add(&client_inits, 1);
    eddy_channel_t *old = atomic_exchange(&last_client, eddy_channel_retain(ch));
    eddy_channel_release(old);
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "count", &count_active_ops, NULL,
                                  NULL);
}

static void test_reconnect_on_close_replaces_a_lost_connection(void **state)
{
    (void)state;
    atomic_store(&client_inits, 0);
    atomic_store(&client_actives, 0);
    atomic_store(&reconnect_attempts, 0);
    eddy_loop_group_t *g = group_new(1);
    eddy_server_bootstrap_t *sb = echo_server(g, NULL);
    eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind(sb, "127.0.0.1", 0));
    eddy_bootstrap_t *cb = eddy_bootstrap_new();
    assert_int_equal(eddy_bootstrap_group(cb, g), 0);
    eddy_bootstrap_init(cb, init_and_keep, NULL);
    eddy_reconnect_options_t ro = {
        .backoff = EDDY_BACKOFF_FIXED,
        .base_ms = 10,
        .on_close = true,
        .cb = count_attempt,
    };
    assert_int_equal(eddy_bootstrap_reconnect(cb, &ro), 0);
    eddy_channel_t *c1 = await_channel(eddy_bootstrap_connect(cb, "127.0.0.1", port_of(server)));
    assert_int_equal(atomic_load(&client_inits), 1);
    close_channel(c1);
    WAIT_FOR(atomic_load(&client_inits) == 2);
    assert_int_equal(atomic_load(&reconnect_attempts), 1);
    eddy_channel_t *c2 = atomic_exchange(&last_client, NULL);
    WAIT_FOR(atomic_load(&client_actives) == 2);

    /* Freed first: closing the replacement then starts nothing. */
    eddy_bootstrap_free(cb);
    close_channel(c2);
    usleep(50000);
    assert_int_equal(atomic_load(&client_inits), 2);
    close_channel(server);
    eddy_server_bootstrap_free(sb);
    group_finish(g);
}

/* A connect that gets no answer (silent_open) ends with EDDY_ETIMEDOUT after
 * CONNECT_TIMEOUT_MS. */
static void test_connect_timeout_is_honoured(void **state)
{
    (void)state;
    silent_t peer;
    silent_open(&peer);

    eddy_loop_group_t *g = group_new(1);
    eddy_bootstrap_t *cb = eddy_bootstrap_new();
    assert_int_equal(eddy_bootstrap_group(cb, g), 0);
    assert_int_equal(eddy_bootstrap_option(cb, EDDY_CONNECT_TIMEOUT_MS, 300), 0);
    int64_t t0 = now_ms();
    eddy_future_t *f = eddy_bootstrap_connect(cb, "127.0.0.1", peer.port);
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    int64_t took = now_ms() - t0;
    int err = eddy_future_error(f);
    if (err == 0) {
        close_channel(eddy_channel_retain(eddy_future_channel(f)));
    }
    eddy_future_release(f);
    eddy_bootstrap_free(cb);
    group_finish(g);
    silent_close(&peer);
    if (err != EDDY_ETIMEDOUT) {
        fprintf(stderr, "a full accept queue gave %d (%s) here, not a timeout: skipped\n", err,
                eddy_strerror(err));
        skip();
    }
    assert_true(took >= 250 && took < 3000);
}

static void test_unix_socket_bind_and_connect(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof(path), "/tmp/eddy-bootstrap-%d.sock", (int)getpid());
    unlink(path);
    eddy_loop_group_t *g = group_new(1);
    eddy_server_bootstrap_t *sb = echo_server(g, NULL);
    eddy_channel_t *server = await_channel(eddy_server_bootstrap_bind_unix(sb, path));
    rx_t rx = {0};
    eddy_bootstrap_t *cb = rx_client(g, &rx);
    eddy_channel_t *c = await_channel(eddy_bootstrap_connect_unix(cb, path));
    client_echo(c, &rx, "over unix");
    close_channel(c);
    close_channel(server);
    unlink(path);
    eddy_bootstrap_free(cb);
    eddy_server_bootstrap_free(sb);
    group_finish(g);
}

/* ---------------------------------------------------------------------------------------
 * Datagram mode
 */

static _Atomic int dgram_reads[2];

/* Echo each packet back, counting per loop. */
static void dgram_echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_datagram_t *d = eddy_datagram_of(msg);
    assert_non_null(d);
    atomic_fetch_add(&dgram_reads[eddy_loop_index(eddy_channel_loop(eddy_ctx_channel(ctx)))], 1);
    eddy_ctx_write_and_flush(ctx, eddy_datagram_msg(eddy_datagram_turn(d, NULL)), NULL);
}

static const eddy_handler_ops_t dgram_echo_ops = {.name = "echo", .channel_read = dgram_echo_read};

static int init_dgram_echo(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "echo", &dgram_echo_ops, NULL, NULL);
}

/* A datagram bind with SO_REUSEPORT serves one port from both loops; closing the first
 * channel closes the other; a connect in datagram mode makes a connected channel. */
static void test_datagram_bind_reuseport_and_connect(void **state)
{
    (void)state;
    eddy_loop_group_t *g = group_new(2);
    eddy_bootstrap_t *b = eddy_bootstrap_new();
    assert_int_equal(eddy_bootstrap_group(b, g), 0);
    eddy_bootstrap_init(b, init_dgram_echo, NULL);
    /* Not in datagram mode yet: bind is refused. */
    assert_int_equal(await_error(eddy_bootstrap_bind(b, "127.0.0.1", 0), DEADLINE_MS),
                     EDDY_EINVAL);
    assert_int_equal(eddy_bootstrap_datagram(b, true), 0);
    assert_int_equal(eddy_bootstrap_reuseport(b, true), 0);
    eddy_channel_t *ch = await_channel(eddy_bootstrap_bind(b, "127.0.0.1", 0));
    assert_true(eddy_channel_is_datagram(ch));
    uint16_t port = port_of(ch);
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char in[16];
    for (int i = 0; i < 64; i++) {
        int fd = socket(AF_INET, SOCK_DGRAM, 0);
        struct timeval tv = {DEADLINE_MS / 1000, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        assert_int_equal(sendto(fd, "ping", 4, 0, (struct sockaddr *)&to, sizeof(to)), 4);
        assert_int_equal(recv(fd, in, sizeof(in), 0), 4);
        close(fd);
    }
    assert_true(atomic_load(&dgram_reads[0]) > 0 && atomic_load(&dgram_reads[1]) > 0);

    /* A connected datagram channel through the same bootstrap, to the bound port. */
    eddy_bootstrap_t *cb = eddy_bootstrap_new();
    eddy_bootstrap_group(cb, g);
    eddy_bootstrap_datagram(cb, true);
    eddy_bootstrap_init(cb, init_rx, &(rx_t){0});
    eddy_channel_t *client = await_channel(eddy_bootstrap_connect(cb, "127.0.0.1", port));
    assert_int_equal(eddy_addr_port(eddy_channel_remote_addr(client)), port);
    close_channel(client);
    eddy_bootstrap_free(cb);

    close_channel(ch);
    /* Both sockets closed: the port binds again without SO_REUSEPORT. */
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    bool bound = false;
    for (int64_t until = now_ms() + DEADLINE_MS; !bound && now_ms() < until;) {
        bound = bind(fd, (struct sockaddr *)&to, sizeof(to)) == 0;
        if (!bound) {
            usleep(1000);
        }
    }
    assert_true(bound);
    close(fd);
    eddy_bootstrap_free(b);
    group_finish(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bootstraps_echo_by_address_and_by_name),
        cmocka_unit_test(test_one_group_serves_boss_and_workers),
        cmocka_unit_test(test_missing_configuration_fails_with_einval),
        cmocka_unit_test(test_max_connections_closes_the_extra_one),
        cmocka_unit_test(test_init_callbacks_that_fail_close_the_channel),
        cmocka_unit_test(test_shutdown_closes_children_through_their_pipelines),
        cmocka_unit_test(test_accept_rate_limit_closes_the_excess),
        cmocka_unit_test(test_workers_freed_right_after_the_listener_closed),
        cmocka_unit_test(test_reuseport_mode_serves_clients),
        cmocka_unit_test(test_connect_to_a_closed_port_is_refused),
        cmocka_unit_test(test_reconnect_with_backoff_until_the_server_opens),
        cmocka_unit_test(test_free_stops_reconnecting),
        cmocka_unit_test(test_free_after_the_group_shut_down_during_a_retry),
        cmocka_unit_test(test_free_after_the_group_was_freed_during_a_retry),
        cmocka_unit_test(test_free_fails_a_connect_under_way),
        cmocka_unit_test(test_reconnect_callback_runs_on_a_loop_after_a_failed_resolve),
        cmocka_unit_test(test_reconnect_gives_up_after_max_attempts),
        cmocka_unit_test(test_reconnect_on_close_replaces_a_lost_connection),
        cmocka_unit_test(test_connect_timeout_is_honoured),
        cmocka_unit_test(test_unix_socket_bind_and_connect),
        cmocka_unit_test(test_datagram_bind_reuseport_and_connect),
    };
    return cmocka_run_group_tests_name("bootstrap.bootstrap", tests, NULL, NULL);
}
