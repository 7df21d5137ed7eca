/*
 * Stream channels on real sockets (pipeline/transport/socket.c), on 127.0.0.1, ::1 and a Unix socket,
 * driven by plain blocking client sockets so the peer can misbehave: echo through a
 * pipeline, half-closure, a reset, a slow reader driving writability false and back with
 * bounded memory, close with queued writes failing their promises, writes from other
 * threads arriving in order, eddy's own client (eddy_channel_connect), offloaded handlers,
 * and a stalled message meeting its deadline. Every test is bounded in time and closes what
 * it opened.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/carrier.h>
#include <eddy/channel.h>
#include <eddy/codec.h>
#include <eddy/handler.h>
#include <eddy/pipeline.h>

#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/sockios.h> /* SIOCOUTQ */
#endif

#define DEADLINE_MS 10000

#include "support/wait_util.h"
#include "support/socket_util.h"

/* ---------------------------------------------------------------------------------------
 * A server whose handlers the tests choose, on one loop.
 */

typedef struct server_s {
    eddy_loop_group_t *group;
    eddy_channel_t *listener;
    eddy_addr_t addr;
    _Atomic int accepted;
    _Atomic int closed;
    _Atomic int errors;
    _Atomic int last_error;
    _Atomic int input_shutdown;
    _Atomic int unwritable;
    _Atomic int writable_again;
    _Atomic uint64_t echoed;
    _Atomic(eddy_channel_t *) child; /* the last accepted channel (retained) */
    eddy_channel_config_t child_config;
    eddy_channel_config_t config; /* the listener's, when set has a bit */
    const eddy_handler_ops_t *ops;
    eddy_carrier_t *carrier; /* offload the handler there */
    const eddy_handler_ops_t *after; /* NULL, or a handler on the loop after it */
    int (*before)(eddy_pipeline_t *p); /* NULL, or adds handlers in front of it */
    _Atomic int late; /* events the "after" handler saw once removed or inactive */
    _Atomic int reads; /* messages the "after" handler saw */
} server_t;

static server_t *srv_of(eddy_ctx_t *ctx)
{
    return eddy_ctx_state(ctx);
}

static void echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    atomic_fetch_add(&srv_of(ctx)->echoed, eddy_buf_readable(eddy_buf_of(msg)));
    eddy_ctx_write(ctx, msg, NULL);
}

static void echo_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
}

static void note_exception(eddy_ctx_t *ctx, int err)
{
    atomic_fetch_add(&srv_of(ctx)->errors, 1);
    atomic_store(&srv_of(ctx)->last_error, err);
}

static void note_inactive(eddy_ctx_t *ctx)
{
    atomic_fetch_add(&srv_of(ctx)->closed, 1);
    eddy_ctx_fire_channel_inactive(ctx);
}

static void note_user_event(eddy_ctx_t *ctx, int event, void *data)
{
    if (event == EDDY_EVENT_INPUT_SHUTDOWN) {
        atomic_fetch_add(&srv_of(ctx)->input_shutdown, 1);
        /* Answer the half-close: what was written goes out, then our FIN. */
        eddy_channel_shutdown_output(eddy_ctx_channel(ctx), NULL);
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

static void note_writability(eddy_ctx_t *ctx)
{
    if (eddy_channel_is_writable(eddy_ctx_channel(ctx))) {
        atomic_fetch_add(&srv_of(ctx)->writable_again, 1);
    } else {
        atomic_fetch_add(&srv_of(ctx)->unwritable, 1);
    }
    eddy_ctx_fire_channel_writability_changed(ctx);
}

static const eddy_handler_ops_t echo_ops = {
    .name = "echo",
    .sharable = true,
    .channel_read = echo_read,
    .channel_read_complete = echo_read_complete,
    .channel_inactive = note_inactive,
    .user_event_triggered = note_user_event,
    .channel_writability_changed = note_writability,
    .exception_caught = note_exception,
};

static int init_child(eddy_channel_t *ch, void *arg)
{
    server_t *s = arg;
    atomic_fetch_add(&s->accepted, 1);
    eddy_channel_t *old = atomic_exchange(&s->child, eddy_channel_retain(ch));
    if (old != NULL) {
        eddy_channel_release(old);
    }
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    if (s->before != NULL) {
        int rc = s->before(p);
        if (rc != 0) {
            return rc;
        }
    }
    if (s->carrier != NULL) {
        int rc = eddy_pipeline_add_last_on(p, s->carrier, "h", s->ops, s, NULL);
        if (rc == 0 && s->after != NULL) {
            rc = eddy_pipeline_add_last(p, "after", s->after, s, NULL);
        }
        return rc;
    }
    return eddy_pipeline_add_last(p, "h", s->ops, s, NULL);
}

static void server_start(server_t *s, const eddy_addr_t *addr)
{
    s->group = eddy_loop_group_new(1, NULL);
    assert_non_null(s->group);
    if (s->ops == NULL) {
        s->ops = &echo_ops;
    }
    if (s->child_config.set == 0) {
        eddy_channel_config_init(&s->child_config);
    }
    eddy_listen_options_t o = {
        .loop = eddy_loop_group_next(s->group),
        .child_init = init_child,
        .child_arg = s,
        .child_config = &s->child_config,
        .config = s->config.set != 0 ? &s->config : NULL,
    };
    eddy_future_t *f = eddy_channel_listen(addr, &o);
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    s->listener = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    s->addr = *eddy_channel_local_addr(s->listener);
    if (addr->u.sa.sa_family != AF_UNIX) {
        assert_true(eddy_addr_port(&s->addr) != 0);
    }
}

/* server_start on 127.0.0.1, an ephemeral port. */
static void server_start_local(server_t *s)
{
    eddy_addr_t a;
    eddy_addr_ip(&a, "127.0.0.1", 0);
    server_start(s, &a);
}

/* The channel s accepted last, once there is one (s keeps the reference). */
static eddy_channel_t *accepted_child(server_t *s)
{
    WAIT_FOR(atomic_load(&s->child) != NULL);
    return atomic_load(&s->child);
}

static void server_stop(server_t *s)
{
    eddy_channel_close(s->listener, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(s->listener), DEADLINE_MS), 0);
    eddy_channel_release(s->listener);
    eddy_channel_t *child = atomic_exchange(&s->child, NULL);
    if (child != NULL) {
        eddy_channel_close(child, NULL);
        assert_int_equal(eddy_future_await(eddy_channel_close_future(child), DEADLINE_MS), 0);
        eddy_channel_release(child);
    }
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(s->group, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(s->group), 0);
}

/* ---------------------------------------------------------------------------------------
 * Tests
 */

/* Start s on addr, with the handlers s names, echo 1 MiB through it, then stop it. */
static void echo_round_trip_on(server_t *s, const eddy_addr_t *addr)
{
    server_start(s, addr);
    int fd = client_connect(&s->addr);
    /* 1 MiB in uneven pieces, checked byte for byte. */
    size_t total = 1 << 20;
    unsigned char *out = malloc(total), *in = malloc(total);
    for (size_t i = 0; i < total; i++) {
        out[i] = (unsigned char)(i * 131 + (i >> 9));
    }
    size_t sent = 0, got = 0;
    while (got < total) {
        if (sent < total) {
            size_t n = total - sent < 7919 ? total - sent : 7919;
            send_all(fd, out + sent, n);
            sent += n;
        }
        struct pollfd pfd = {fd, POLLIN, 0};
        while (got < sent && poll(&pfd, 1, sent < total ? 0 : DEADLINE_MS) > 0) {
            ssize_t r = recv(fd, in + got, total - got, 0);
            assert_true(r > 0);
            got += (size_t)r;
        }
        /* All sent and still short after DEADLINE_MS: an echo went missing. */
        assert_true(sent < total || got == total);
    }
    assert_memory_equal(in, out, total);
    WAIT_FOR(atomic_load(&s->echoed) == total);
    close(fd);
    WAIT_FOR(atomic_load(&s->closed) == 1);
    assert_int_equal(atomic_load(&s->errors), 0);
    free(out);
    free(in);
    server_stop(s);
}

static void echo_round_trip(const eddy_addr_t *addr)
{
    server_t s = {0};
    echo_round_trip_on(&s, addr);
}

/* getsockopt(IPPROTO_TCP, name) on fd. */
static int tcp_get(int fd, int name)
{
    int v = -1;
    socklen_t len = sizeof(v);
    assert_int_equal(getsockopt(fd, IPPROTO_TCP, name, &v, &len), 0);
    return v;
}

/* The TCP options reach the sockets: the listener's Fast Open queue, and each accepted
 * channel's cork, unsent low mark, user timeout and keepalive timings; a value out of range
 * is refused. */
static void test_tcp_options_reach_the_socket(void **state)
{
    (void)state;
    server_t s = {0};
    eddy_channel_config_init(&s.config);
    eddy_channel_config_init(&s.child_config);
    assert_int_equal(eddy_channel_config_set(&s.config, EDDY_TCP_FASTOPEN, 64), 0);
    const struct {
        eddy_option_t opt;
        int name, value;
    } want[] = {
        {EDDY_TCP_CORK, TCP_CORK, 1},
        {EDDY_TCP_NOTSENT_LOWAT, TCP_NOTSENT_LOWAT, 16384},
        {EDDY_TCP_USER_TIMEOUT, TCP_USER_TIMEOUT, 5000},
        {EDDY_TCP_KEEPIDLE, TCP_KEEPIDLE, 30},
        {EDDY_TCP_KEEPINTVL, TCP_KEEPINTVL, 5},
        {EDDY_TCP_KEEPCNT, TCP_KEEPCNT, 3},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(eddy_channel_config_set(&s.child_config, want[i].opt, want[i].value), 0);
    }
    assert_int_equal(eddy_channel_config_set(&s.child_config, EDDY_TCP_KEEPCNT, 128), EDDY_EINVAL);
    assert_int_equal(eddy_channel_config_set(&s.child_config, EDDY_TCP_CORK, 2), EDDY_EINVAL);
    server_start_local(&s);
    assert_int_equal(tcp_get(eddy_channel_fd(s.listener), TCP_FASTOPEN), 64);
    int fd = client_connect(&s.addr);
    eddy_channel_t *child = accepted_child(&s);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(tcp_get(eddy_channel_fd(child), want[i].name), want[i].value);
        assert_int_equal(eddy_channel_option(child, want[i].opt), want[i].value);
    }
    /* The server closes the child first: this thread read its fd, and the loop's close must
     * come after in TSan's eyes too (a task, not our FIN, orders them). */
    server_stop(&s);
    close(fd);
}

/* An accepted channel's local address: its listener's when that is bound to one address (no
 * getsockname() then), the one the peer reached when it is bound to all (0.0.0.0). */
static void test_accepted_channels_know_their_local_address(void **state)
{
    (void)state;
    const char *binds[] = {"127.0.0.1", "0.0.0.0"};
    for (int i = 0; i < 2; i++) {
        server_t s = {0};
        eddy_addr_t a, to;
        eddy_addr_ip(&a, binds[i], 0);
        server_start(&s, &a);
        eddy_addr_ip(&to, "127.0.0.1", eddy_addr_port(&s.addr));
        int fd = client_connect(&to);
        const eddy_addr_t *local = eddy_channel_local_addr(accepted_child(&s));
        assert_int_equal(local->u.sa.sa_family, AF_INET);
        assert_int_equal(eddy_addr_port(local), eddy_addr_port(&s.addr));
        assert_int_equal(local->u.in4.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
        server_stop(&s); /* before our FIN, as in test_tcp_options_reach_the_socket */
        close(fd);
    }
}

static void test_socket_echoes_over_ipv4(void **state)
{
    (void)state;
    eddy_addr_t a;
    assert_int_equal(eddy_addr_ip(&a, "127.0.0.1", 0), 0);
    echo_round_trip(&a);
}

static void test_socket_echoes_over_ipv6(void **state)
{
    (void)state;
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    if (probe < 0) {
        skip();
    }
    close(probe);
    eddy_addr_t a;
    assert_int_equal(eddy_addr_ip(&a, "::1", 0), 0);
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    bool ok = bind(fd, &a.u.sa, a.len) == 0;
    close(fd);
    if (!ok) {
        skip(); /* no ::1 on this machine */
    }
    echo_round_trip(&a);
}

static void test_socket_echoes_over_unix_sockets(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof(path), "/tmp/eddy-test-%d.sock", (int)getpid());
    unlink(path);
    eddy_addr_t a;
    assert_int_equal(eddy_addr_unix(&a, path), 0);
    echo_round_trip(&a);
    unlink(path);
}

static void test_socket_half_close_is_an_event_when_allowed(void **state)
{
    (void)state;
    server_t s = {0};
    eddy_channel_config_init(&s.child_config);
    eddy_channel_config_set(&s.child_config, EDDY_ALLOW_HALF_CLOSURE, 1);
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    send_all(fd, "last words", 10);
    shutdown(fd, SHUT_WR);
    char buf[16];
    recv_all(fd, buf, 10);
    assert_memory_equal(buf, "last words", 10);
    /* The server answered the half-close with its own FIN after the echo. */
    assert_int_equal(recv(fd, buf, sizeof(buf), 0), 0);
    WAIT_FOR(atomic_load(&s.input_shutdown) == 1);
    assert_int_equal(atomic_load(&s.closed), 0); /* still open: half-closed */
    close(fd);
    server_stop(&s);
    assert_int_equal(atomic_load(&s.closed), 1);
}

static void test_socket_peer_fin_closes_without_half_closure(void **state)
{
    (void)state;
    server_t s = {0};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    shutdown(fd, SHUT_WR);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    char c;
    assert_int_equal(recv(fd, &c, 1, 0), 0);
    assert_int_equal(atomic_load(&s.input_shutdown), 0);
    close(fd);
    server_stop(&s);
}

static void test_socket_reset_is_an_error_then_a_close(void **state)
{
    (void)state;
    server_t s = {0};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    send_all(fd, "x", 1);
    char c;
    recv_all(fd, &c, 1);
    struct linger l = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    close(fd); /* RST */
    WAIT_FOR(atomic_load(&s.closed) == 1);
    /* The reset is seen as an error (ECONNRESET) or, when the kernel reports the end first,
     * as end of stream; either way the channel closes once and the loop goes on serving. */
    assert_true(atomic_load(&s.errors) <= 1);
    if (atomic_load(&s.errors) == 1) {
        assert_int_equal(atomic_load(&s.last_error), EDDY_ECONNRESET);
    }
    int fd2 = client_connect(&s.addr);
    send_all(fd2, "y", 1);
    recv_all(fd2, &c, 1);
    assert_int_equal(c, 'y');
    close(fd2);
    server_stop(&s);
}

/* A slow reader: the echo's outbound buffer passes the high water mark, writability goes
 * false, reading pauses (the backpressure policy), memory stays bounded; once the client
 * reads, writability comes back and every byte arrives. */
static void test_socket_slow_reader_pauses_reading_with_bounded_memory(void **state)
{
    (void)state;
    server_t s = {0};
    eddy_channel_config_init(&s.child_config);
    eddy_channel_config_set(&s.child_config, EDDY_PAUSE_READ_WHEN_UNWRITABLE, 1);
    eddy_channel_config_set(&s.child_config, EDDY_SO_SNDBUF, 32 * 1024);
    eddy_channel_config_set(&s.child_config, EDDY_SO_RCVBUF, 32 * 1024);
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    int small = 32 * 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    /* Send until the server stops taking bytes (it paused) or 64 MiB went out. */
    char chunk[16384];
    memset(chunk, 'z', sizeof(chunk));
    size_t sent = 0;
    struct timeval tv = {0, 200000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    while (sent < (64u << 20)) {
        ssize_t w = send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL);
        if (w <= 0) {
            break; /* blocked: the server stopped reading */
        }
        sent += (size_t)w;
    }
    assert_true(sent < (64u << 20));
    WAIT_FOR(atomic_load(&s.unwritable) >= 1);
    eddy_channel_t *child = atomic_load(&s.child);
    eddy_channel_counters_t c;
    eddy_channel_counters(child, &c);
    /* Bounded: about the high water mark plus one read batch, not everything sent. */
    assert_true(c.pending_outbound_bytes < 4u << 20);
    /* Now read everything back. */
    tv.tv_sec = DEADLINE_MS / 1000;
    tv.tv_usec = 0;
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    char *buf = malloc(1 << 16);
    size_t got = 0;
    while (got < sent) {
        ssize_t r = recv(fd, buf, 1 << 16, 0);
        assert_true(r > 0);
        for (ssize_t i = 0; i < r; i++) {
            assert_int_equal(buf[i], 'z');
        }
        got += (size_t)r;
    }
    free(buf);
    WAIT_FOR(atomic_load(&s.writable_again) >= 1);
    close(fd);
    server_stop(&s);
}

/* PAUSE_READ_WHEN_UNWRITABLE turned off while reading is paused: reading resumes once the
 * channel drains, it does not stay paused for good. The handler answers its first read with
 * a block past the high water mark, and turns the policy off when it goes unwritable. */
enum { BLOCK = 256 * 1024 };

static void block_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    if (atomic_fetch_add(&srv_of(ctx)->echoed, eddy_buf_readable(eddy_buf_of(msg))) > 0) {
        eddy_ctx_write(ctx, msg, NULL); /* later reads: echo */
        return;
    }
    eddy_msg_release(msg);
    eddy_buf_t *b = eddy_buf_new(BLOCK);
    memset(eddy_buf_write_ptr(b), 'b', BLOCK);
    eddy_buf_produce(b, BLOCK);
    eddy_ctx_write(ctx, eddy_buf_msg(b), NULL);
}

static void unpause_writability(eddy_ctx_t *ctx)
{
    if (!eddy_channel_is_writable(eddy_ctx_channel(ctx))) {
        assert_int_equal(
            eddy_channel_set_option(eddy_ctx_channel(ctx), EDDY_PAUSE_READ_WHEN_UNWRITABLE, 0), 0);
    }
    note_writability(ctx);
}

static const eddy_handler_ops_t block_ops = {
    .name = "block",
    .sharable = true,
    .channel_read = block_read,
    .channel_read_complete = echo_read_complete,
    .channel_inactive = note_inactive,
    .channel_writability_changed = unpause_writability,
    .exception_caught = note_exception,
};

static void test_socket_pause_turned_off_while_paused_reads_again(void **state)
{
    (void)state;
    server_t s = {.ops = &block_ops};
    eddy_channel_config_init(&s.child_config);
    eddy_channel_config_set(&s.child_config, EDDY_PAUSE_READ_WHEN_UNWRITABLE, 1);
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    send_all(fd, "go", 2);
    char *buf = malloc(BLOCK);
    recv_all(fd, buf, BLOCK);
    free(buf);
    WAIT_FOR(atomic_load(&s.writable_again) >= 1);
    send_all(fd, "ping", 4);
    struct pollfd pfd = {fd, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 2000), 1); /* read and echoed, not paused for good */
    char ping[4];
    recv_all(fd, ping, 4);
    assert_memory_equal(ping, "ping", 4);
    close(fd);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    server_stop(&s);
}

/* Writes queued on a channel whose peer never reads fail with EDDY_ECLOSED at close, their
 * messages released (ASan checks the release). */
static void test_socket_close_fails_queued_writes(void **state)
{
    (void)state;
    server_t s = {0};
    eddy_channel_config_init(&s.child_config);
    eddy_channel_config_set(&s.child_config, EDDY_SO_SNDBUF, 16 * 1024);
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    eddy_channel_t *child = accepted_child(&s);
    enum { N = 64 };
    eddy_promise_t *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = eddy_promise_new(NULL);
        eddy_buf_t *b = eddy_buf_new(64 * 1024);
        eddy_buf_write_zero(b, 64 * 1024);
        eddy_channel_write_and_flush(child, eddy_buf_msg(b), p[i]);
    }
    /* 4 MiB cannot fit in the socket buffers: the last writes are still queued. */
    WAIT_FOR(eddy_future_is_done(p[0]) || !eddy_channel_is_writable(child));
    eddy_promise_t *closed = eddy_promise_new(NULL);
    eddy_channel_close(child, closed);
    assert_int_equal(eddy_future_await(closed, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(closed), 0);
    eddy_future_release(closed);
    int ok = 0, failed = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(eddy_future_await(p[i], DEADLINE_MS), 0);
        if (eddy_future_error(p[i]) == 0) {
            ok++;
        } else {
            assert_int_equal(eddy_future_error(p[i]), EDDY_ECLOSED);
            failed++;
        }
        eddy_future_release(p[i]);
    }
    assert_true(failed > 0);
    assert_int_equal(ok + failed, N);
    close(fd);
    server_stop(&s);
}

/* Four threads write numbered records to one channel; each thread's records arrive in the
 * order it wrote them. */
typedef struct writer_s {
    eddy_channel_t *ch;
    uint8_t id;
} writer_t;

#define RECORDS 2000

static void *writer_main(void *arg)
{
    writer_t *w = arg;
    for (uint32_t i = 0; i < RECORDS; i++) {
        eddy_buf_t *b = eddy_buf_new(5);
        eddy_buf_write_u8(b, w->id);
        eddy_buf_write_u32(b, i);
        eddy_channel_write_and_flush(w->ch, eddy_buf_msg(b), NULL);
    }
    return NULL;
}

static const eddy_handler_ops_t quiet_ops = {
    .name = "quiet",
    .sharable = true,
    .channel_inactive = note_inactive,
    .exception_caught = note_exception,
};

static void test_socket_writes_from_other_threads_keep_their_order(void **state)
{
    (void)state;
    server_t s = {.ops = &quiet_ops};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    eddy_channel_t *child = accepted_child(&s);
    pthread_t t[4];
    writer_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (writer_t){child, (uint8_t)i};
        pthread_create(&t[i], NULL, writer_main, &w[i]);
    }
    uint32_t next[4] = {0};
    for (int n = 0; n < 4 * RECORDS; n++) {
        unsigned char rec[5];
        recv_all(fd, rec, 5);
        assert_true(rec[0] < 4);
        uint32_t seq = (uint32_t)rec[1] << 24 | (uint32_t)rec[2] << 16 | (uint32_t)rec[3] << 8 |
                       rec[4];
        assert_int_equal(seq, next[rec[0]]);
        next[rec[0]]++;
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
    }
    close(fd);
    server_stop(&s);
}

/* Writes from two threads after the channel's loop terminated: each runs where it was made
 * (the loop takes no tasks any more), finds the channel closed and fails its promise; the two
 * must not run channel code at the same time (TSan checks). */
static _Atomic int late_writes_failed;

static void *late_writer_main(void *arg)
{
    eddy_channel_t *ch = arg;
    for (int i = 0; i < 2000; i++) {
        eddy_promise_t *p = eddy_promise_new(NULL);
        eddy_channel_write_and_flush(ch, eddy_buf_msg(eddy_buf_from("late", 4)), p);
        if (eddy_future_is_done(p) && eddy_future_error(p) == EDDY_ECLOSED) {
            atomic_fetch_add(&late_writes_failed, 1);
        }
        eddy_future_release(p);
    }
    return NULL;
}

static void test_socket_writes_after_the_loop_terminated_fail_one_at_a_time(void **state)
{
    (void)state;
    server_t s = {.ops = &quiet_ops};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    WAIT_FOR(atomic_load(&s.child) != NULL);
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(s.group, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    eddy_channel_t *child = atomic_load(&s.child);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        pthread_create(&th[i], NULL, late_writer_main, child);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
    }
    assert_int_equal(atomic_load(&late_writes_failed), 4000);
    eddy_channel_release(s.listener);
    eddy_channel_release(atomic_exchange(&s.child, NULL));
    assert_int_equal(eddy_loop_group_free(s.group), 0);
    close(fd);
}

/* A handler value whose constructor failed, added from a thread other than the channel's
 * loop: the add reports the failure, frees every state it was given and leaves the pipeline
 * alone (it belongs to the loop). It used to take the on-loop path from this thread. */
static _Atomic int offloop_freed;

static void offloop_free(void *state)
{
    atomic_fetch_add(&offloop_freed, 1);
    free(state);
}

static void test_socket_failed_handler_added_off_the_loop_is_reported(void **state)
{
    (void)state;
    server_t s = {0};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    eddy_channel_t *child = accepted_child(&s);
    eddy_pipeline_t *p = eddy_channel_pipeline(child);
    assert_false(eddy_loop_in_event_loop(eddy_channel_loop(child)));
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(p, eddy_length_field_decoder(64, 0, 5, 0, 0)),
                     EDDY_ENOMEM);
    assert_int_equal(
        EDDY_PIPELINE_ADD_LAST(p, eddy_handler("extra", &quiet_ops, malloc(8), offloop_free),
                               eddy_length_field_decoder(64, 0, 5, 0, 0)),
        EDDY_ENOMEM);
    assert_int_equal(atomic_load(&offloop_freed), 1);
    /* Nothing was added: the echo still answers alone. */
    send_all(fd, "abc", 3);
    char buf[3];
    recv_all(fd, buf, 3);
    assert_memory_equal(buf, "abc", 3);
    close(fd);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    assert_int_equal(atomic_load(&s.errors), 0);
    server_stop(&s);
}

/* eddy's own client: connect, exchange, and a refused connection failing its future. */
typedef struct client_s {
    _Atomic uint64_t got;
    _Atomic int active;
} client_t;

static void client_active(eddy_ctx_t *ctx)
{
    client_t *c = eddy_ctx_state(ctx);
    atomic_store(&c->active, 1);
    eddy_ctx_write_and_flush(ctx, eddy_buf_msg(eddy_buf_from_str("ping")), NULL);
    eddy_ctx_fire_channel_active(ctx);
}

static void client_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    client_t *c = eddy_ctx_state(ctx);
    atomic_fetch_add(&c->got, eddy_buf_readable(eddy_buf_of(msg)));
    eddy_msg_release(msg);
}

static const eddy_handler_ops_t client_ops = {
    .name = "client", .channel_active = client_active, .channel_read = client_read};

static int init_client(eddy_channel_t *ch, void *arg)
{
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "client", &client_ops, arg, NULL);
}

static void test_socket_eddy_client_connects_and_refusal_fails(void **state)
{
    (void)state;
    server_t s = {0};
    server_start_local(&s);
    client_t c = {0};
    eddy_loop_t *loop = eddy_loop_group_next(s.group);
    eddy_future_t *f = eddy_channel_connect(loop, &s.addr, NULL, init_client, &c);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    eddy_channel_t *ch = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    WAIT_FOR(atomic_load(&c.got) == 4);
    assert_int_equal(atomic_load(&c.active), 1);
    char buf[64];
    assert_string_equal(eddy_addr_format(eddy_channel_remote_addr(ch), buf, sizeof(buf)),
                        eddy_addr_format(&s.addr, buf + 32, 32));
    eddy_channel_close(ch, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(ch), DEADLINE_MS), 0);
    eddy_channel_release(ch);

    /* A port nobody listens on: refused. */
    eddy_addr_t dead;
    eddy_addr_ip(&dead, "127.0.0.1", 1);
    client_t c2 = {0};
    f = eddy_channel_connect(loop, &dead, NULL, init_client, &c2);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), EDDY_ECONNREFUSED);
    eddy_future_release(f);
    server_stop(&s);
}

/* The handler runs on a carrier thread, off the loop; per channel order holds. */
static _Atomic int offload_on_loop;

static void slow_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    if (eddy_loop_in_event_loop(eddy_ctx_loop(ctx))) {
        atomic_store(&offload_on_loop, 1);
    }
    usleep(200); /* "blocking" work */
    atomic_fetch_add(&srv_of(ctx)->echoed, eddy_buf_readable(eddy_buf_of(msg)));
    eddy_ctx_write_and_flush(ctx, msg, NULL);
}

static const eddy_handler_ops_t slow_ops = {
    .name = "slow",
    .sharable = true,
    .channel_read = slow_read,
    .channel_inactive = note_inactive,
    .exception_caught = note_exception,
};

static int consume_nothing(eddy_carrier_t *c, unsigned thread, const eddy_carrier_item_t *items,
                           size_t n, void *arg)
{
    (void)c;
    (void)thread;
    (void)items;
    (void)n;
    (void)arg;
    return 0;
}

static const eddy_carrier_ops_t carrier_ops = {.consume = consume_nothing};

/* A carrier for offloaded handlers: per-channel (key) order. */
static eddy_carrier_t *offload_carrier_new(unsigned partitions, unsigned consumers)
{
    eddy_carrier_options_t o;
    eddy_carrier_options_init(&o);
    o.partitions = partitions;
    o.consumers = consumers;
    o.partitioner = EDDY_CARRIER_BY_KEY;
    eddy_carrier_t *carrier;
    assert_int_equal(eddy_carrier_new(&carrier, &o, &carrier_ops, NULL), 0);
    return carrier;
}

static void test_socket_offloaded_handler_runs_off_the_loop_in_order(void **state)
{
    (void)state;
    eddy_carrier_t *carrier = offload_carrier_new(4, 2);
    server_t s = {.ops = &slow_ops, .carrier = carrier};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    char out[3000], in[3000];
    for (size_t i = 0; i < sizeof(out); i++) {
        out[i] = (char)('a' + i % 26);
    }
    for (size_t i = 0; i < sizeof(out); i += 100) {
        send_all(fd, out + i, 100);
        usleep(100);
    }
    recv_all(fd, in, sizeof(in));
    assert_memory_equal(in, out, sizeof(out));
    assert_int_equal(atomic_load(&offload_on_loop), 0);
    close(fd);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    server_stop(&s);
    assert_int_equal(eddy_carrier_shutdown(carrier, EDDY_CARRIER_DRAIN), 0);
    eddy_carrier_free(carrier);
}

/* An offloaded handler may still be inside an event when the loop group is freed (its
 * channel_inactive fires on after the test saw it begin): the channel keeps its loop's
 * memory, and what the handler fires is refused as on any terminated loop, not a use after
 * free. */
static _Atomic int late_entered, late_go;

static void late_inactive(eddy_ctx_t *ctx)
{
    atomic_store(&late_entered, 1);
    while (!atomic_load(&late_go)) {
        usleep(1000);
    }
    eddy_ctx_fire_channel_inactive(ctx);
    eddy_ctx_write_and_flush(ctx, eddy_buf_msg(eddy_buf_from("late", 4)), NULL);
}

static const eddy_handler_ops_t late_ops = {
    .name = "late",
    .sharable = true,
    .channel_inactive = late_inactive,
};

static void test_socket_offloaded_handler_outlives_its_loop_group(void **state)
{
    (void)state;
    eddy_carrier_t *carrier = offload_carrier_new(2, 1);
    server_t s = {.ops = &late_ops, .carrier = carrier};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    WAIT_FOR(atomic_load(&s.accepted) == 1);
    close(fd);
    WAIT_FOR(atomic_load(&late_entered) == 1);
    server_stop(&s); /* frees the group while the handler is inside channel_inactive */
    atomic_store(&late_go, 1);
    assert_int_equal(eddy_carrier_shutdown(carrier, EDDY_CARRIER_DRAIN), 0);
    eddy_carrier_free(carrier);
}

/* An offloaded handler still busy with a read when the channel closes: the close waits for
 * it in order. Every inbound event of an offloaded context goes through its partition, so
 * what it passes on reaches the handlers after it before channel_inactive does, and they are
 * removed only after that (the read is not "late": it arrives while they are in place). */
static _Atomic int fwd_removed;

static void fwd_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    usleep(100000); /* the client's FIN closes the channel meanwhile */
    eddy_ctx_fire_channel_read(ctx, msg);
}

static void fwd_removed_cb(eddy_ctx_t *ctx)
{
    (void)ctx;
    atomic_store(&fwd_removed, 1);
}

static const eddy_handler_ops_t fwd_ops = {
    .name = "fwd",
    .sharable = true,
    .handler_removed = fwd_removed_cb,
    .channel_read = fwd_read,
};

static void after_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    if (eddy_ctx_is_removed(ctx) || atomic_load(&srv_of(ctx)->closed) > 0) {
        atomic_fetch_add(&srv_of(ctx)->late, 1);
    }
    atomic_fetch_add(&srv_of(ctx)->reads, 1);
    eddy_msg_release(msg);
}

static const eddy_handler_ops_t after_ops = {
    .name = "after",
    .sharable = true,
    .channel_read = after_read,
    .channel_inactive = note_inactive,
};

static void test_socket_offloaded_reads_after_close_skip_removed_handlers(void **state)
{
    (void)state;
    eddy_carrier_t *carrier = offload_carrier_new(2, 1);
    server_t s = {.ops = &fwd_ops, .carrier = carrier, .after = &after_ops};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    send_all(fd, "x", 1);
    close(fd);
    WAIT_FOR(atomic_load(&fwd_removed) == 1);
    server_stop(&s);
    assert_int_equal(eddy_carrier_shutdown(carrier, EDDY_CARRIER_DRAIN), 0);
    eddy_carrier_free(carrier);
    assert_int_equal(atomic_load(&s.closed), 1);
    assert_int_equal(atomic_load(&s.late), 0);
    assert_int_equal(atomic_load(&s.reads), 1);
}

/* An offloaded handler that passes reads on after a while, in front of an echo on the loop
 * that writes at channel_read and flushes at channel_read_complete (the usual echo): the
 * read_complete travels behind the reads through the carrier, so the flush comes after the
 * writes and every byte comes back. Before, read_complete skipped the offloaded handler
 * (it does not implement it) and flushed nothing, and the replies waited for ever. */
static void slow_fwd_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    usleep(2000);
    eddy_ctx_fire_channel_read(ctx, msg);
}

static const eddy_handler_ops_t slow_fwd_ops = {
    .name = "slow-fwd",
    .sharable = true,
    .channel_read = slow_fwd_read,
};

static void test_socket_offloaded_handler_keeps_read_complete_behind_reads(void **state)
{
    (void)state;
    eddy_carrier_t *carrier = offload_carrier_new(2, 1);
    server_t s = {.ops = &slow_fwd_ops, .carrier = carrier, .after = &echo_ops};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    char out[4096], in[4096];
    for (size_t i = 0; i < sizeof(out); i++) {
        out[i] = (char)('a' + i % 26);
    }
    for (int round = 0; round < 8; round++) {
        /* Several small writes: several reads and batches on the server. */
        for (size_t off = 0; off < sizeof(out); off += 512) {
            send_all(fd, out + off, 512);
        }
        recv_all(fd, in, sizeof(in));
        assert_memory_equal(in, out, sizeof(in));
    }
    close(fd);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    server_stop(&s);
    assert_int_equal(eddy_carrier_shutdown(carrier, EDDY_CARRIER_DRAIN), 0);
    eddy_carrier_free(carrier);
}

/* The usual echo itself offloaded: channel_read writes without a flush, and
 * channel_read_complete flushes. The read_complete of a batch reaches the handler after that
 * batch's reads, on the carrier, so each flush sends what came before it and nothing waits
 * behind a flush that already ran. The reads take a while, so the loop runs batches ahead of
 * the carrier; the client sends in many writes and checks every byte comes back in order. */
static void lagging_echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    usleep(50);
    echo_read(ctx, msg);
}

static const eddy_handler_ops_t lagging_echo_ops = {
    .name = "lagging-echo",
    .sharable = true,
    .channel_read = lagging_echo_read,
    .channel_read_complete = echo_read_complete,
    .channel_inactive = note_inactive,
    .exception_caught = note_exception,
};

static void test_socket_offloaded_echo_that_flushes_in_read_complete_loses_nothing(void **state)
{
    (void)state;
    eddy_carrier_t *carrier = offload_carrier_new(2, 1);
    server_t s = {.ops = &lagging_echo_ops, .carrier = carrier};
    eddy_addr_t a;
    assert_int_equal(eddy_addr_ip(&a, "127.0.0.1", 0), 0);
    echo_round_trip_on(&s, &a);
    assert_int_equal(eddy_carrier_shutdown(carrier, EDDY_CARRIER_DRAIN), 0);
    eddy_carrier_free(carrier);
}

/* A handler-scoped timer of an offloaded handler runs on the carrier, with the handler's
 * events, and never after its handler_removed (which also runs there). */
static _Atomic int off_timer_runs, off_timer_after_removed, off_timer_on_loop, off_removed;

static void off_timer_cb(eddy_ctx_t *ctx, void *arg)
{
    (void)arg;
    if (atomic_load(&off_removed)) {
        atomic_fetch_add(&off_timer_after_removed, 1);
    }
    if (eddy_loop_in_event_loop(eddy_ctx_loop(ctx))) {
        atomic_fetch_add(&off_timer_on_loop, 1);
    }
    atomic_fetch_add(&off_timer_runs, 1);
}

static void off_timer_active(eddy_ctx_t *ctx)
{
    assert_true(eddy_ctx_schedule_at_fixed_rate(ctx, 1, 1, off_timer_cb, NULL) != 0);
    assert_true(eddy_ctx_schedule(ctx, 60000, off_timer_cb, NULL) != 0);
    eddy_ctx_fire_channel_active(ctx);
}

static void off_timer_removed(eddy_ctx_t *ctx)
{
    (void)ctx;
    atomic_store(&off_removed, 1);
}

static const eddy_handler_ops_t off_timer_ops = {
    .name = "off-timer",
    .sharable = true,
    .handler_removed = off_timer_removed,
    .channel_active = off_timer_active,
};

static void test_socket_offloaded_handler_timers_run_on_its_carrier(void **state)
{
    (void)state;
    eddy_carrier_t *carrier = offload_carrier_new(2, 1);
    server_t s = {.ops = &off_timer_ops, .carrier = carrier, .after = &echo_ops};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    WAIT_FOR(atomic_load(&off_timer_runs) >= 20);
    close(fd);
    WAIT_FOR(atomic_load(&off_removed) == 1);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    usleep(20000); /* the periodic timer would have run again by now */
    server_stop(&s);
    assert_int_equal(eddy_carrier_shutdown(carrier, EDDY_CARRIER_DRAIN), 0);
    eddy_carrier_free(carrier);
    assert_int_equal(atomic_load(&off_timer_after_removed), 0);
    assert_int_equal(atomic_load(&off_timer_on_loop), 0);
}

/* ---------------------------------------------------------------------------------------
 * The message deadline (eddy_message_deadline_handler) on real sockets: frames of a 2-byte
 * length then the payload, echoed without the length.
 */

#define FRAME_DEADLINE_MS 400

static int add_frame_deadline(eddy_pipeline_t *p)
{
    return EDDY_PIPELINE_ADD_LAST(p, eddy_message_deadline_handler(FRAME_DEADLINE_MS),
                                  eddy_length_field_decoder(1024, 0, 2, 0, 2));
}

/* A client that sends the first bytes of a frame and then stalls is closed once the deadline
 * has passed since those bytes, with EDDY_ETIMEDOUT raised first; it is not kept waiting
 * until the connection idles out. */
static void test_socket_message_deadline_closes_a_stalled_frame(void **state)
{
    (void)state;
    server_t s = {.before = add_frame_deadline};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    int64_t t0 = eddy_now_ns();
    send_all(fd, "\0\5he", 4); /* 5 bytes announced, 2 sent */
    char c;
    ssize_t r = recv(fd, &c, 1, 0);
    int64_t waited = eddy_now_ns() - t0;
    assert_true(r == 0 || (r < 0 && errno == ECONNRESET)); /* closed, not SO_RCVTIMEO */
    assert_true(waited >= FRAME_DEADLINE_MS * 1000000LL);
    assert_true(waited < DEADLINE_MS * 1000000LL / 2);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    assert_int_equal(atomic_load(&s.errors), 1);
    assert_int_equal(atomic_load(&s.last_error), EDDY_ETIMEDOUT);
    assert_int_equal(atomic_load(&s.echoed), 0);
    close(fd);
    server_stop(&s);
}

/* A frame that trickles in but ends within the deadline is served, and the connection is not
 * timed between frames: a pause longer than the deadline before the next one is fine. */
static void test_socket_message_deadline_serves_a_frame_completed_in_time(void **state)
{
    (void)state;
    server_t s = {.before = add_frame_deadline};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    char buf[5];
    for (int i = 0; i < 2; i++) {
        send_all(fd, "\0\5he", 4);
        usleep(FRAME_DEADLINE_MS * 1000 / 4);
        send_all(fd, "llo", 3);
        recv_all(fd, buf, 5);
        assert_memory_equal(buf, "hello", 5);
        usleep(FRAME_DEADLINE_MS * 1000 * 3 / 2); /* between frames: not timed */
    }
    assert_int_equal(atomic_load(&s.closed), 0);
    assert_int_equal(atomic_load(&s.errors), 0);
    close(fd);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    server_stop(&s);
}

/* ---------------------------------------------------------------------------------------
 * Close after flush, lingering (eddy_channel_close_after_flush)
 */

#define REPLY_BYTES (2u << 20)

static _Atomic int reply_reads, reply_late_write;
static _Atomic int64_t reply_closed_ns;

static void reply_closed(eddy_future_t *f, void *arg)
{
    (void)f;
    (void)arg;
    atomic_store(&reply_closed_ns, eddy_now_ns());
}

/* The first read gets a large reply, then a close after flush; a write after that fails. */
static void reply_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_msg_release(msg);
    if (atomic_fetch_add(&reply_reads, 1) > 0) {
        return;
    }
    eddy_buf_t *b = eddy_buf_new(REPLY_BYTES);
    for (size_t i = 0; i < REPLY_BYTES; i++) {
        eddy_buf_write_u8(b, (uint8_t)(i * 7));
    }
    eddy_ctx_write(ctx, eddy_buf_msg(b), NULL);
    eddy_promise_t *closed = eddy_promise_new(eddy_ctx_loop(ctx));
    eddy_future_add_listener(closed, reply_closed, NULL);
    eddy_ctx_close_after_flush(ctx, closed);
    eddy_future_release(closed);
    eddy_promise_t *late = eddy_promise_new(NULL);
    eddy_ctx_write_and_flush(ctx, eddy_buf_msg(eddy_buf_from("late", 4)), late);
    atomic_store(&reply_late_write, eddy_future_error(late));
    eddy_future_release(late);
}

static const eddy_handler_ops_t reply_ops = {
    .name = "reply",
    .sharable = true,
    .channel_read = reply_read,
    .channel_inactive = note_inactive,
};

static void reply_server_start(server_t *s, int64_t linger_ms)
{
    atomic_store(&reply_reads, 0);
    atomic_store(&reply_closed_ns, 0);
    s->ops = &reply_ops;
    eddy_channel_config_init(&s->child_config);
    eddy_channel_config_set(&s->child_config, EDDY_LINGER_MS, linger_ms);
    eddy_channel_config_set(&s->child_config, EDDY_SO_SNDBUF, 16384);
    server_start_local(s);
}

/* Read the whole reply, checked, then what follows: 0 (our FIN) or an error. */
static ssize_t read_reply(int fd)
{
    unsigned char *in = malloc(REPLY_BYTES);
    recv_all(fd, in, REPLY_BYTES);
    for (size_t i = 0; i < REPLY_BYTES; i++) {
        assert_int_equal(in[i], (unsigned char)(i * 7));
    }
    free(in);
    char c;
    return recv(fd, &c, 1, 0);
}

/* The client keeps sending after its request while the reply is still going out (a
 * pipelined request behind "Connection: close", the rest of an upload): the server drops it
 * instead of handing it on, and the reply arrives whole, then FIN, not a reset. A plain
 * close here would have answered the late bytes with a reset and cut the reply short. */
static void test_socket_close_after_flush_lingers_so_the_reply_arrives_whole(void **state)
{
    (void)state;
    server_t s = {0};
    reply_server_start(&s, 5000);
    int fd = client_connect(&s.addr);
    /* 2 MiB do not fit the server's 16 KiB send buffer and our receive buffer: until we read,
     * the server is still flushing when the late bytes come. */
    send_all(fd, "request", 7);
    WAIT_FOR(atomic_load(&reply_reads) == 1);
    usleep(20000); /* the server is closing, its reply still queued: now more comes */
    char junk[65536];
    memset(junk, 'j', sizeof(junk));
    for (int i = 0; i < 8; i++) {
        send_all(fd, junk, sizeof(junk));
    }
    assert_int_equal(read_reply(fd), 0); /* the whole reply, then FIN */
    assert_int_equal(atomic_load(&reply_reads), 1); /* the late bytes were dropped */
    assert_int_equal(atomic_load(&reply_late_write), EDDY_EPIPE);
    /* The server waits for our close (its linger is 5 s), then closes at once. */
    int64_t t0 = eddy_now_ns();
    close(fd);
    WAIT_FOR(atomic_load(&reply_closed_ns) != 0);
    assert_true(atomic_load(&reply_closed_ns) - t0 < 2000000000LL);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    server_stop(&s);
}

/* A peer that never closes: the server lingers EDDY_LINGER_MS after its FIN, then closes. */
static void test_socket_close_after_flush_stops_lingering_at_the_linger_time(void **state)
{
    (void)state;
    server_t s = {0};
    reply_server_start(&s, 200);
    int fd = client_connect(&s.addr);
    int64_t asked = eddy_now_ns(); /* before the server's FIN, whenever that comes */
    send_all(fd, "request", 7);
    assert_int_equal(read_reply(fd), 0);
    send_all(fd, "more", 4); /* dropped while lingering */
    WAIT_FOR(atomic_load(&reply_closed_ns) != 0);
    /* Closed by the linger timer (we have not closed): 200 ms after the FIN at least. */
    int64_t waited = atomic_load(&reply_closed_ns) - asked;
    assert_true(waited >= 200000000LL);
    assert_true(waited < 8000000000LL);
    assert_int_equal(atomic_load(&reply_reads), 1);
    WAIT_FOR(atomic_load(&s.closed) == 1); /* the close completes its promise last */
    close(fd);
    server_stop(&s);
}

/* EDDY_LINGER_MS 0: FIN after the reply, then close without waiting for the peer. */
static void test_socket_close_after_flush_without_lingering(void **state)
{
    (void)state;
    server_t s = {0};
    reply_server_start(&s, 0);
    int fd = client_connect(&s.addr);
    send_all(fd, "request", 7);
    assert_int_equal(read_reply(fd), 0);
    WAIT_FOR(atomic_load(&reply_closed_ns) != 0);
    assert_int_equal(atomic_load(&s.closed), 1); /* inactive came before the promise */
    close(fd);
    server_stop(&s);
}

/* A plain close while lingering ends it at once. */
static void test_socket_plain_close_ends_lingering(void **state)
{
    (void)state;
    server_t s = {0};
    reply_server_start(&s, 60000);
    int fd = client_connect(&s.addr);
    send_all(fd, "request", 7);
    assert_int_equal(read_reply(fd), 0);
    eddy_channel_t *child = accepted_child(&s);
    assert_true(eddy_channel_is_open(child));
    eddy_channel_close(child, NULL);
    WAIT_FOR(atomic_load(&reply_closed_ns) != 0);
    assert_int_equal(atomic_load(&s.closed), 1);
    close(fd);
    server_stop(&s);
}

/* Shutting the loop group down closes its channels (Netty's closeAll): the client sees the
 * end of stream, the handlers see inactive, nothing leaks. */
static void test_socket_loop_shutdown_closes_channels(void **state)
{
    (void)state;
    server_t s = {0};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    send_all(fd, "hello", 5);
    char buf[8];
    recv_all(fd, buf, 5);
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(s.group, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(recv(fd, buf, sizeof(buf), 0), 0);
    assert_int_equal(atomic_load(&s.closed), 1);
    assert_false(eddy_channel_is_open(s.listener));
    eddy_channel_release(s.listener);
    eddy_channel_release(atomic_exchange(&s.child, NULL));
    assert_int_equal(eddy_loop_group_free(s.group), 0);
    close(fd);
}

/* With AUTO_READ off the channel reads only when asked, one batch per request. */
static void test_socket_auto_read_off_reads_on_request(void **state)
{
    (void)state;
    server_t s = {0};
    eddy_channel_config_init(&s.child_config);
    eddy_channel_config_set(&s.child_config, EDDY_AUTO_READ, 0);
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    send_all(fd, "abc", 3);
    WAIT_FOR(atomic_load(&s.child) != NULL);
    usleep(50000);
    assert_int_equal(atomic_load(&s.echoed), 0); /* nothing read yet */
    eddy_channel_read(atomic_load(&s.child));
    char buf[4];
    recv_all(fd, buf, 3);
    assert_memory_equal(buf, "abc", 3);
    send_all(fd, "def", 3);
    usleep(50000);
    assert_int_equal(atomic_load(&s.echoed), 3); /* one batch per request */
    eddy_channel_read(atomic_load(&s.child));
    recv_all(fd, buf, 3);
    assert_memory_equal(buf, "def", 3);
    close(fd);
    server_stop(&s);
}

/* Reads per batch of the "batch" handler (the loop's thread writes them; the test reads them
 * once the batch is over). */
static _Atomic int batch_reads, batch_most, batches;

static void batch_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    atomic_fetch_add(&batch_reads, 1);
    echo_read(ctx, msg);
}

static void batch_read_complete(eddy_ctx_t *ctx)
{
    int n = atomic_exchange(&batch_reads, 0);
    if (n > atomic_load(&batch_most)) {
        atomic_store(&batch_most, n);
    }
    atomic_fetch_add(&batches, 1);
    eddy_ctx_flush(ctx);
}

static const eddy_handler_ops_t batch_ops = {
    .name = "batch",
    .sharable = true,
    .channel_read = batch_read,
    .channel_read_complete = batch_read_complete,
    .channel_inactive = note_inactive,
    .exception_caught = note_exception,
};

/* A read that fills a buffer of the largest size (64 KiB) ends its batch, even with more
 * bytes waiting: the next read would most often find EAGAIN. What is left comes with the next
 * batch. (On io_uring a receive takes a provided buffer of 16 KiB: one per batch as well.) */
static void test_socket_full_read_of_the_largest_buffer_ends_the_batch(void **state)
{
    (void)state;
    atomic_store(&batch_reads, 0);
    atomic_store(&batch_most, 0);
    atomic_store(&batches, 0);
    server_t s = {.ops = &batch_ops};
    eddy_channel_config_init(&s.child_config);
    eddy_channel_config_set(&s.child_config, EDDY_AUTO_READ, 0);
    eddy_channel_config_set(&s.child_config, EDDY_RCVBUF_ALLOC_MIN, 65536);
    eddy_channel_config_set(&s.child_config, EDDY_RCVBUF_ALLOC_INITIAL, 65536);
    eddy_channel_config_set(&s.child_config, EDDY_RCVBUF_ALLOC_MAX, 65536);
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    size_t total = 65536 + 4096;
    unsigned char *out = malloc(total), *in = malloc(total);
    for (size_t i = 0; i < total; i++) {
        out[i] = (unsigned char)(i * 7 + (i >> 8));
    }
    send_all(fd, out, total);
    /* Every byte acknowledged: all of it waits in the server's socket. */
#ifdef SIOCOUTQ
    int unacked = 1;
    WAIT_FOR(ioctl(fd, SIOCOUTQ, &unacked) == 0 && unacked == 0);
#else
    usleep(100000);
#endif
    eddy_channel_t *child = accepted_child(&s);
    eddy_channel_read(child);
    WAIT_FOR(atomic_load(&batches) == 1);
    assert_int_equal(atomic_load(&batch_most), 1);
    size_t first = atomic_load(&s.echoed);
    assert_true(first > 0 && first < total);
    /* The rest, batch by batch. */
    while (atomic_load(&s.echoed) < total) {
        int before = atomic_load(&batches);
        eddy_channel_read(child);
        WAIT_FOR(atomic_load(&batches) > before);
    }
    recv_all(fd, in, total);
    assert_memory_equal(in, out, total);
    assert_int_equal(atomic_load(&s.errors), 0);
    free(out);
    free(in);
    close(fd);
    server_stop(&s);
}

/* With AUTO_READ off, a handler that asks for the next read from channel_read_complete (as a
 * proxy or a flow-controlled handler does) gets it: the request made inside the batch is not
 * forgotten when the batch ends. */
static void ask_active(eddy_ctx_t *ctx)
{
    eddy_ctx_read(ctx);
    eddy_ctx_fire_channel_active(ctx);
}

static void ask_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
    eddy_ctx_read(ctx);
}

static const eddy_handler_ops_t ask_ops = {
    .name = "ask",
    .sharable = true,
    .channel_active = ask_active,
    .channel_read = echo_read,
    .channel_read_complete = ask_read_complete,
    .channel_inactive = note_inactive,
    .exception_caught = note_exception,
};

static void test_socket_auto_read_off_read_asked_inside_the_batch(void **state)
{
    (void)state;
    server_t s = {.ops = &ask_ops};
    eddy_channel_config_init(&s.child_config);
    eddy_channel_config_set(&s.child_config, EDDY_AUTO_READ, 0);
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    char buf[4];
    for (int i = 0; i < 3; i++) {
        send_all(fd, "abc", 3);
        struct pollfd pfd = {fd, POLLIN, 0};
        assert_int_equal(poll(&pfd, 1, 2000), 1); /* not stalled after the first batch */
        recv_all(fd, buf, 3);
        assert_memory_equal(buf, "abc", 3);
    }
    close(fd);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    server_stop(&s);
}

/* The server writes, every write lands in its socket buffer (the promises succeed), and it
 * closes while bytes the client sent sit unread: the client still gets every byte and then an
 * end of stream. A plain close() there sends a reset instead, which throws away what the
 * kernel had not yet sent (the client reads slowly, so most of it). */
static void close_with_unread_input(const eddy_addr_t *a)
{
    server_t s = {0};
    eddy_channel_config_init(&s.child_config);
    eddy_channel_config_set(&s.child_config, EDDY_AUTO_READ, 0);
    eddy_channel_config_set(&s.child_config, EDDY_SO_SNDBUF, 512 * 1024);
    server_start(&s, a);
    int fd = socket(a->u.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int small = 8 * 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    assert_int_equal(connect(fd, &s.addr.u.sa, s.addr.len), 0);
    struct timeval tv = {DEADLINE_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    send_all(fd, "never read by the server", 24);
    eddy_channel_t *child = accepted_child(&s);
    enum { N = 4, PIECE = 64 * 1024 };
    eddy_promise_t *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = eddy_promise_new(NULL);
        eddy_buf_t *b = eddy_buf_new(PIECE);
        memset(eddy_buf_write_ptr(b), 'a' + i, PIECE);
        eddy_buf_produce(b, PIECE);
        eddy_channel_write_and_flush(child, eddy_buf_msg(b), p[i]);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(eddy_future_await(p[i], DEADLINE_MS), 0);
        assert_int_equal(eddy_future_error(p[i]), 0);
        eddy_future_release(p[i]);
    }
    eddy_promise_t *closed = eddy_promise_new(NULL);
    eddy_channel_close(child, closed);
    assert_int_equal(eddy_future_await(closed, DEADLINE_MS), 0);
    eddy_future_release(closed);
    size_t got = 0;
    bool ok = true;
    char buf[16 * 1024];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        if (r <= 0) {
            assert_int_equal(r, 0); /* an end of stream, not ECONNRESET (TCP or Unix) */
            break;
        }
        for (ssize_t i = 0; i < r; i++) {
            ok &= buf[i] == (char)('a' + (got + (size_t)i) / PIECE);
        }
        got += (size_t)r;
    }
    assert_int_equal(got, (size_t)N * PIECE);
    assert_true(ok);
    close(fd);
    server_stop(&s);
}

static void test_socket_close_with_unread_input_delivers_what_was_written(void **state)
{
    (void)state;
    eddy_addr_t a;
    eddy_addr_ip(&a, "127.0.0.1", 0);
    close_with_unread_input(&a);
    char path[64];
    snprintf(path, sizeof(path), "/tmp/eddy-test-unread-%d.sock", (int)getpid());
    unlink(path);
    assert_int_equal(eddy_addr_unix(&a, path), 0);
    close_with_unread_input(&a);
    unlink(path);
}

/* A write not yet flushed when the output shuts down would go after the FIN: its promise fails
 * with EDDY_EPIPE, as a later write's does, and the channel stays open for reading. A flush
 * after the shutdown used to meet EPIPE from the socket and close the channel. */
static void test_socket_shutdown_output_fails_unflushed_writes(void **state)
{
    (void)state;
    server_t s = {0};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    eddy_channel_t *child = accepted_child(&s);
    eddy_promise_t *sent = eddy_promise_new(NULL), *unsent = eddy_promise_new(NULL);
    eddy_channel_write_and_flush(child, eddy_buf_msg(eddy_buf_from_str("sent")), sent);
    eddy_channel_write(child, eddy_buf_msg(eddy_buf_from_str("unsent")), unsent);
    eddy_channel_shutdown_output(child, NULL);
    eddy_channel_flush(child);
    assert_int_equal(eddy_future_await(sent, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(sent), 0);
    assert_int_equal(eddy_future_await(unsent, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(unsent), EDDY_EPIPE);
    char buf[16];
    recv_all(fd, buf, 4);
    assert_memory_equal(buf, "sent", 4);
    assert_int_equal(recv(fd, buf, sizeof(buf), 0), 0); /* then the FIN */
    usleep(50 * 1000);
    assert_true(eddy_channel_is_open(child));
    assert_int_equal(atomic_load(&s.errors), 0);
    eddy_future_release(sent);
    eddy_future_release(unsent);
    close(fd);
    server_stop(&s);
}

/* A close from a loop task (outside any event) of a channel nobody else holds: the close drops
 * the channel's last reference, and the operation must not touch it afterwards (ASan). A timer
 * of the application's that closes an idle connection does the same. */
static void close_task(void *arg)
{
    eddy_channel_close(arg, NULL);
}

static void test_socket_close_from_a_task_when_nobody_else_holds_the_channel(void **state)
{
    (void)state;
    server_t s = {0};
    server_start_local(&s);
    int fd = client_connect(&s.addr);
    eddy_channel_t *child = accepted_child(&s);
    eddy_loop_t *loop = eddy_channel_loop(child);
    atomic_store(&s.child, NULL);
    eddy_channel_release(child); /* only the open channel's own reference is left */
    assert_int_equal(eddy_loop_execute(loop, close_task, child), 0);
    char c;
    assert_int_equal(recv(fd, &c, 1, 0), 0); /* the end of stream */
    WAIT_FOR(atomic_load(&s.closed) == 1);
    close(fd);
    server_stop(&s);
}

/* Out of descriptors: the listener neither spins nor dies; once descriptors free up it
 * serves again. The limit is lowered for this process, whose client sockets count too. */
static void test_socket_listener_survives_descriptor_exhaustion(void **state)
{
    (void)state;
    server_t s = {0};
    server_start_local(&s);
    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    int probe = dup(0);
    struct rlimit low = {(rlim_t)probe + 6, old.rlim_max};
    close(probe);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fds[16];
    int n = 0;
    while (n < 16) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            break;
        }
        if (connect(fd, &s.addr.u.sa, s.addr.len) != 0) {
            close(fd);
            break;
        }
        fds[n++] = fd;
    }
    usleep(300000); /* the listener meets EMFILE meanwhile */
    eddy_loop_metrics_t m0, m1;
    eddy_loop_metrics(eddy_loop_group_loop(s.group, 0), &m0);
    usleep(200000);
    eddy_loop_metrics(eddy_loop_group_loop(s.group, 0), &m1);
    /* Not spinning on the pending connection: a few turns (the 100 ms back-off), not
     * thousands. */
    assert_true(m1.turns - m0.turns < 200);
    for (int i = 0; i < n; i++) {
        close(fds[i]);
    }
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    usleep(150000);
    int fd = client_connect(&s.addr);
    send_all(fd, "back", 4);
    char buf[4];
    recv_all(fd, buf, 4);
    assert_memory_equal(buf, "back", 4);
    close(fd);
    server_stop(&s);
}

/* An init that refuses closes the channel it was given; nothing is used after it is freed
 * (ASan checks). Server side: the client sees the end of stream. Client side: the connect
 * fails with the init's error. */
static int refuse(eddy_channel_t *ch, void *arg)
{
    (void)ch;
    (void)arg;
    return EDDY_EACCES;
}

static void test_socket_refusing_init_closes_cleanly(void **state)
{
    (void)state;
    eddy_loop_group_t *g = eddy_loop_group_new(1, NULL);
    eddy_addr_t a;
    eddy_addr_ip(&a, "127.0.0.1", 0);
    eddy_listen_options_t o = {.loop = eddy_loop_group_next(g), .child_init = refuse};
    eddy_future_t *f = eddy_channel_listen(&a, &o);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    eddy_channel_t *l = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    int fd = client_connect(eddy_channel_local_addr(l));
    char c;
    assert_int_equal(recv(fd, &c, 1, 0), 0);
    close(fd);
    f = eddy_channel_connect(eddy_loop_group_next(g), eddy_channel_local_addr(l), NULL, refuse,
                             NULL);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), EDDY_EACCES);
    eddy_future_release(f);
    eddy_channel_release(l);
    assert_int_equal(eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000),
                                       DEADLINE_MS),
                     0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socket_echoes_over_ipv4),
        cmocka_unit_test(test_accepted_channels_know_their_local_address),
        cmocka_unit_test(test_tcp_options_reach_the_socket),
        cmocka_unit_test(test_socket_echoes_over_ipv6),
        cmocka_unit_test(test_socket_echoes_over_unix_sockets),
        cmocka_unit_test(test_socket_half_close_is_an_event_when_allowed),
        cmocka_unit_test(test_socket_peer_fin_closes_without_half_closure),
        cmocka_unit_test(test_socket_reset_is_an_error_then_a_close),
        cmocka_unit_test(test_socket_slow_reader_pauses_reading_with_bounded_memory),
        cmocka_unit_test(test_socket_pause_turned_off_while_paused_reads_again),
        cmocka_unit_test(test_socket_close_fails_queued_writes),
        cmocka_unit_test(test_socket_writes_from_other_threads_keep_their_order),
        cmocka_unit_test(test_socket_writes_after_the_loop_terminated_fail_one_at_a_time),
        cmocka_unit_test(test_socket_failed_handler_added_off_the_loop_is_reported),
        cmocka_unit_test(test_socket_eddy_client_connects_and_refusal_fails),
        cmocka_unit_test(test_socket_offloaded_handler_runs_off_the_loop_in_order),
        cmocka_unit_test(test_socket_offloaded_handler_outlives_its_loop_group),
        cmocka_unit_test(test_socket_offloaded_reads_after_close_skip_removed_handlers),
        cmocka_unit_test(test_socket_offloaded_handler_keeps_read_complete_behind_reads),
        cmocka_unit_test(test_socket_offloaded_echo_that_flushes_in_read_complete_loses_nothing),
        cmocka_unit_test(test_socket_offloaded_handler_timers_run_on_its_carrier),
        cmocka_unit_test(test_socket_message_deadline_closes_a_stalled_frame),
        cmocka_unit_test(test_socket_message_deadline_serves_a_frame_completed_in_time),
        cmocka_unit_test(test_socket_close_after_flush_lingers_so_the_reply_arrives_whole),
        cmocka_unit_test(test_socket_close_after_flush_stops_lingering_at_the_linger_time),
        cmocka_unit_test(test_socket_close_after_flush_without_lingering),
        cmocka_unit_test(test_socket_plain_close_ends_lingering),
        cmocka_unit_test(test_socket_loop_shutdown_closes_channels),
        cmocka_unit_test(test_socket_auto_read_off_reads_on_request),
        cmocka_unit_test(test_socket_auto_read_off_read_asked_inside_the_batch),
        cmocka_unit_test(test_socket_full_read_of_the_largest_buffer_ends_the_batch),
        cmocka_unit_test(test_socket_close_with_unread_input_delivers_what_was_written),
        cmocka_unit_test(test_socket_shutdown_output_fails_unflushed_writes),
        cmocka_unit_test(test_socket_close_from_a_task_when_nobody_else_holds_the_channel),
        cmocka_unit_test(test_socket_listener_survives_descriptor_exhaustion),
        cmocka_unit_test(test_socket_refusing_init_closes_cleanly),
    };
    return cmocka_run_group_tests_name("pipeline.socket", tests, NULL, NULL);
}
