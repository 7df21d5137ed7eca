/*
 * Datagram channels on real sockets (pipeline/transport/datagram.c): UDP on 127.0.0.1 and ::1 and Unix
 * datagram sockets, driven by plain sockets so the peer can do what no eddy peer would. Echo
 * of packets that know their peer; a connected channel writing plain buffers and hearing of
 * the peer's closed port (ECONNREFUSED) without closing; truncated datagrams reported, never
 * passed on; writes refused one by one (no recipient, too large) while the rest go on; a full
 * Unix peer making sends wait (EAGAIN), losing nothing, in order; water marks; GSO runs
 * arriving as separate datagrams; GRO receives split again. Bounded in time; closes what it
 * opened.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/buffer.h>
#include <eddy/channel.h>
#include <eddy/datagram.h>
#include <eddy/pipeline.h>

#include <errno.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define DEADLINE_MS 10000

#ifndef SOL_UDP
#define SOL_UDP 17
#endif

#include "support/wait_util.h"

/* ---------------------------------------------------------------------------------------
 * A datagram channel whose handler the test chooses, on a loop of its own.
 */

typedef struct node_s {
    eddy_loop_group_t *group;
    eddy_channel_t *ch;
    eddy_addr_t addr;            /* the channel's local address */
    const eddy_handler_ops_t *ops;
    eddy_channel_config_t config;
    _Atomic int reads;           /* packets read */
    _Atomic int errors;
    _Atomic int last_error;
    _Atomic int unwritable, writable_again;
    _Atomic int sender_ok;       /* packets whose sender and recipient looked right */
    char last[2048];             /* the last payload read (the loop writes, the test reads
                                    after a WAIT_FOR on reads) */
    _Atomic size_t last_len;
} node_t;

static node_t *node_of(eddy_ctx_t *ctx)
{
    return eddy_ctx_state(ctx);
}

static void note_packet(node_t *n, eddy_datagram_t *d)
{
    eddy_buf_t *b = eddy_datagram_content(d);
    size_t len = eddy_buf_readable(b);
    if (len > sizeof(n->last)) {
        len = sizeof(n->last);
    }
    memcpy(n->last, eddy_buf_read_ptr(b), len);
    atomic_store(&n->last_len, len);
    const eddy_addr_t *from = eddy_datagram_sender(d), *to = eddy_datagram_recipient(d);
    if (from->len > 0 && to->len > 0 && to->u.sa.sa_family == n->addr.u.sa.sa_family) {
        atomic_fetch_add(&n->sender_ok, 1);
    }
}

/* Echo: each packet back to its sender, flushed once per read batch. */
static void echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    node_t *n = node_of(ctx);
    eddy_datagram_t *d = eddy_datagram_of(msg);
    assert_non_null(d);
    note_packet(n, d);
    atomic_fetch_add(&n->reads, 1);
    eddy_datagram_t *reply = eddy_datagram_reply(d, eddy_datagram_take_content(d));
    eddy_datagram_release(d);
    eddy_ctx_write(ctx, eddy_datagram_msg(reply), NULL);
}

static void flush_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
}

static void count_error(eddy_ctx_t *ctx, int err)
{
    atomic_store(&node_of(ctx)->last_error, err);
    atomic_fetch_add(&node_of(ctx)->errors, 1);
}

static void count_writability(eddy_ctx_t *ctx)
{
    if (eddy_channel_is_writable(eddy_ctx_channel(ctx))) {
        atomic_fetch_add(&node_of(ctx)->writable_again, 1);
    } else {
        atomic_fetch_add(&node_of(ctx)->unwritable, 1);
    }
}

static const eddy_handler_ops_t echo_ops = {
    .name = "echo",
    .channel_read = echo_read,
    .channel_read_complete = flush_complete,
    .exception_caught = count_error,
    .channel_writability_changed = count_writability,
};

/* Keep: note each packet and drop it. */
static void keep_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    node_t *n = node_of(ctx);
    eddy_datagram_t *d = eddy_datagram_of(msg);
    assert_non_null(d);
    note_packet(n, d);
    atomic_fetch_add(&n->reads, 1);
    eddy_msg_release(msg);
}

static const eddy_handler_ops_t keep_ops = {
    .name = "keep",
    .channel_read = keep_read,
    .exception_caught = count_error,
    .channel_writability_changed = count_writability,
};

static int init_node(eddy_channel_t *ch, void *arg)
{
    node_t *n = arg;
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "h", n->ops, n, NULL);
}

/* Open n's channel on local (NULL: none), connected to remote (NULL: none). */
static void node_open(node_t *n, const eddy_addr_t *local, const eddy_addr_t *remote)
{
    n->group = eddy_loop_group_new(1, NULL);
    assert_non_null(n->group);
    if (n->ops == NULL) {
        n->ops = &echo_ops;
    }
    if (n->config.set == 0) {
        eddy_channel_config_init(&n->config);
    }
    eddy_datagram_options_t o = {
        .loop = eddy_loop_group_next(n->group),
        .config = &n->config,
        .init = init_node,
        .arg = n,
        .remote = remote,
    };
    eddy_future_t *f = eddy_datagram_open(local, &o);
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    n->ch = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    assert_true(eddy_channel_is_datagram(n->ch));
    assert_true(eddy_channel_is_active(n->ch));
    n->addr = *eddy_channel_local_addr(n->ch);
}

/* A keeping node on 127.0.0.1, an ephemeral port, with opt = value (opt < 0: none). */
static void keeper_open(node_t *n, int opt, int64_t value)
{
    n->ops = &keep_ops;
    eddy_channel_config_init(&n->config);
    if (opt >= 0) {
        assert_int_equal(eddy_channel_config_set(&n->config, (eddy_option_t)opt, value), 0);
    }
    eddy_addr_t lo;
    eddy_addr_ip(&lo, "127.0.0.1", 0);
    node_open(n, &lo, NULL);
}

static void node_close(node_t *n)
{
    eddy_channel_close(n->ch, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(n->ch), DEADLINE_MS), 0);
    assert_false(eddy_channel_is_open(n->ch));
    eddy_channel_release(n->ch);
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(n->group, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(n->group), 0);
}

/* A plain datagram socket of family bound to local (NULL: unbound), with timeouts. */
static int peer_socket(int family, const eddy_addr_t *local)
{
    int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    if (local != NULL) {
        assert_int_equal(bind(fd, &local->u.sa, local->len), 0);
    }
    struct timeval tv = {DEADLINE_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

static void peer_addr(int fd, eddy_addr_t *a)
{
    a->len = sizeof(a->u);
    assert_int_equal(getsockname(fd, &a->u.sa, &a->len), 0);
}

/* A packet of len bytes, each (seed + i) & 0xff, written on the test's thread. */
static eddy_buf_t *pattern_buf(size_t len, unsigned seed)
{
    eddy_buf_t *b = eddy_buf_alloc(eddy_allocator_default(), len, len);
    assert_non_null(b);
    for (size_t i = 0; i < len; i++) {
        eddy_buf_write_u8(b, (uint8_t)(seed + i));
    }
    return b;
}

static void check_pattern(const char *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        assert_int_equal((uint8_t)p[i], (uint8_t)(seed + i));
    }
}

/* ---------------------------------------------------------------------------------------
 * Tests
 */

/* Packets from a plain socket come back from an unconnected channel, each to its sender. */
static void echo_on(const char *ip)
{
    node_t n = {0};
    eddy_addr_t a;
    assert_int_equal(eddy_addr_ip(&a, ip, 0), 0);
    node_open(&n, &a, NULL);
    assert_true(eddy_addr_port(&n.addr) != 0);
    int fd = peer_socket(a.u.sa.sa_family, NULL);
    char out[1500], in[2048];
    for (unsigned i = 0; i < 200; i++) {
        size_t len = 1 + (i * 37) % sizeof(out);
        for (size_t k = 0; k < len; k++) {
            out[k] = (char)(i + k);
        }
        assert_int_equal(sendto(fd, out, len, 0, &n.addr.u.sa, n.addr.len), (ssize_t)len);
        eddy_addr_t from;
        from.len = sizeof(from.u);
        ssize_t r = recvfrom(fd, in, sizeof(in), 0, &from.u.sa, &from.len);
        assert_int_equal(r, (ssize_t)len);
        assert_memory_equal(in, out, len);
        assert_int_equal(eddy_addr_port(&from), eddy_addr_port(&n.addr));
    }
    /* An empty datagram is a datagram too. */
    assert_int_equal(sendto(fd, out, 0, 0, &n.addr.u.sa, n.addr.len), 0);
    assert_int_equal(recv(fd, in, sizeof(in), 0), 0);
    WAIT_FOR(atomic_load(&n.reads) == 201);
    assert_int_equal(atomic_load(&n.sender_ok), 201);
    assert_int_equal(atomic_load(&n.errors), 0);
    eddy_channel_counters_t c;
    eddy_channel_counters(n.ch, &c);
    assert_int_equal(c.msgs_read, 201);
    WAIT_FOR((eddy_channel_counters(n.ch, &c), c.msgs_written == 201));
    close(fd);
    node_close(&n);
}

static void echo_ipv4(void **state)
{
    (void)state;
    echo_on("127.0.0.1");
}

static void echo_ipv6(void **state)
{
    (void)state;
    int probe = socket(AF_INET6, SOCK_DGRAM, 0);
    if (probe < 0) {
        skip();
    }
    close(probe);
    echo_on("::1");
}

/* A Unix datagram channel answers a peer bound to a path of its own. */
static void echo_unix(void **state)
{
    (void)state;
    char dir[] = "/tmp/eddy-dgram-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char spath[128], cpath[128];
    snprintf(spath, sizeof(spath), "%s/s", dir);
    snprintf(cpath, sizeof(cpath), "%s/c", dir);
    eddy_addr_t sa, ca;
    assert_int_equal(eddy_addr_unix(&sa, spath), 0);
    assert_int_equal(eddy_addr_unix(&ca, cpath), 0);
    node_t n = {0};
    node_open(&n, &sa, NULL);
    int fd = peer_socket(AF_UNIX, &ca);
    char in[64];
    for (int i = 0; i < 50; i++) {
        char msg[32];
        int len = snprintf(msg, sizeof(msg), "hello %d", i);
        assert_int_equal(sendto(fd, msg, (size_t)len, 0, &sa.u.sa, sa.len), len);
        assert_int_equal(recv(fd, in, sizeof(in), 0), len);
        assert_memory_equal(in, msg, (size_t)len);
    }
    close(fd);
    node_close(&n);
    unlink(spath);
    unlink(cpath);
    rmdir(dir);
}

/* A connected channel writes plain buffers to its peer and reads its answers as packets; a
 * peer's closed port comes back as ECONNREFUSED, and the channel stays open. */
static void connected_channel(void **state)
{
    (void)state;
    eddy_addr_t lo;
    eddy_addr_ip(&lo, "127.0.0.1", 0);
    int fd = peer_socket(AF_INET, &lo);
    eddy_addr_t pa;
    peer_addr(fd, &pa);
    node_t n = {.ops = &keep_ops};
    node_open(&n, NULL, &pa);
    assert_int_equal(eddy_addr_port(eddy_channel_remote_addr(n.ch)), eddy_addr_port(&pa));
    for (unsigned i = 0; i < 10; i++) {
        eddy_channel_write_and_flush(n.ch, eddy_buf_msg(pattern_buf(100 + i, i)), NULL);
    }
    char in[256];
    eddy_addr_t from;
    for (unsigned i = 0; i < 10; i++) {
        from.len = sizeof(from.u);
        ssize_t r = recvfrom(fd, in, sizeof(in), 0, &from.u.sa, &from.len);
        assert_int_equal(r, 100 + i);
        check_pattern(in, (size_t)r, i);
    }
    assert_int_equal(sendto(fd, "pong", 4, 0, &from.u.sa, from.len), 4);
    WAIT_FOR(atomic_load(&n.reads) == 1);
    assert_int_equal(atomic_load(&n.last_len), 4);
    /* The peer goes away: the next send draws an ICMP port unreachable. */
    close(fd);
    for (int i = 0; i < 20 && atomic_load(&n.last_error) != EDDY_ECONNREFUSED; i++) {
        eddy_channel_write_and_flush(n.ch, eddy_buf_msg(pattern_buf(10, 0)), NULL);
        usleep(20000);
    }
    assert_int_equal(atomic_load(&n.last_error), EDDY_ECONNREFUSED);
    assert_true(eddy_channel_is_open(n.ch));
    node_close(&n);
}

/* A datagram longer than EDDY_DATAGRAM_RECV_SIZE is reported (EMSGSIZE), never passed on;
 * the next one is read whole. */
static void truncated_reported(void **state)
{
    (void)state;
    node_t n = {0};
    keeper_open(&n, EDDY_DATAGRAM_RECV_SIZE, 100);
    assert_int_equal(eddy_channel_option(n.ch, EDDY_MAX_MESSAGES_PER_READ), 64);
    int fd = peer_socket(AF_INET, NULL);
    char big[200] = {0}, small[100];
    memset(small, 'x', sizeof(small));
    assert_int_equal(sendto(fd, big, sizeof(big), 0, &n.addr.u.sa, n.addr.len), 200);
    WAIT_FOR(atomic_load(&n.errors) == 1);
    assert_int_equal(atomic_load(&n.last_error), EDDY_EMSGSIZE);
    assert_int_equal(atomic_load(&n.reads), 0);
    assert_int_equal(sendto(fd, small, sizeof(small), 0, &n.addr.u.sa, n.addr.len), 100);
    WAIT_FOR(atomic_load(&n.reads) == 1);
    assert_int_equal(atomic_load(&n.last_len), 100);
    close(fd);
    node_close(&n);
}

/* A promise listener's view of a write. */
typedef struct outcome_s {
    _Atomic int done;
    _Atomic int err;
} outcome_t;

static void note_outcome(eddy_future_t *f, void *arg)
{
    outcome_t *o = arg;
    atomic_store(&o->err, eddy_future_error(f));
    atomic_store(&o->done, 1);
}

static void write_noting(eddy_channel_t *ch, eddy_msg_t *msg, outcome_t *o)
{
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    assert_non_null(p);
    assert_int_equal(eddy_future_add_listener(p, note_outcome, o), 0);
    eddy_channel_write_and_flush(ch, msg, p);
    eddy_future_release(p);
}

/* Writes the socket cannot take fail their own promises; those after them go out. */
static void bad_writes_fail_alone(void **state)
{
    (void)state;
    eddy_addr_t lo;
    eddy_addr_ip(&lo, "127.0.0.1", 0);
    int fd = peer_socket(AF_INET, &lo);
    eddy_addr_t pa;
    peer_addr(fd, &pa);
    node_t n = {.ops = &keep_ops};
    node_open(&n, &lo, NULL);
    outcome_t no_addr = {0}, too_big = {0}, fine = {0};
    /* A plain buffer on an unconnected channel: no recipient. */
    write_noting(n.ch, eddy_buf_msg(pattern_buf(10, 0)), &no_addr);
    /* 70000 bytes: more than a UDP datagram holds. */
    write_noting(n.ch, eddy_datagram_msg(eddy_datagram_new(pattern_buf(70000, 1), &pa, NULL)),
                 &too_big);
    write_noting(n.ch, eddy_datagram_msg(eddy_datagram_new(pattern_buf(33, 2), &pa, NULL)),
                 &fine);
    WAIT_FOR(atomic_load(&fine.done) && atomic_load(&too_big.done) && atomic_load(&no_addr.done));
    assert_int_equal(atomic_load(&no_addr.err), EDDY_EDESTADDRREQ);
    assert_int_equal(atomic_load(&too_big.err), EDDY_EMSGSIZE);
    assert_int_equal(atomic_load(&fine.err), 0);
    char in[64];
    assert_int_equal(recv(fd, in, sizeof(in), 0), 33);
    check_pattern(in, 33, 2);
    assert_true(eddy_channel_is_open(n.ch));
    close(fd);
    node_close(&n);
}

/* A Unix peer that does not read fills up: sends wait (EAGAIN) instead of dropping, the
 * channel turns unwritable, and once the peer reads, every datagram arrives, in order. */
static void full_peer_loses_nothing(void **state)
{
    (void)state;
    char dir[] = "/tmp/eddy-dgram-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/p", dir);
    eddy_addr_t pa;
    assert_int_equal(eddy_addr_unix(&pa, path), 0);
    int fd = peer_socket(AF_UNIX, &pa);
    node_t n = {.ops = &keep_ops};
    eddy_channel_config_init(&n.config);
    assert_int_equal(eddy_channel_config_set(&n.config, EDDY_WRITE_BUFFER_HIGH_WATER_MARK,
                                             64 * 1024), 0);
    assert_int_equal(eddy_channel_config_set(&n.config, EDDY_WRITE_BUFFER_LOW_WATER_MARK,
                                             16 * 1024), 0);
    node_open(&n, NULL, &pa);
    enum { COUNT = 3000, SIZE = 200 };
    outcome_t last = {0};
    for (unsigned i = 0; i < COUNT; i++) {
        eddy_buf_t *b = pattern_buf(SIZE, i);
        if (i + 1 < COUNT) {
            eddy_channel_write(n.ch, eddy_buf_msg(b), NULL);
        } else {
            eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(n.ch));
            eddy_future_add_listener(p, note_outcome, &last);
            eddy_channel_write(n.ch, eddy_buf_msg(b), p);
            eddy_future_release(p);
        }
    }
    eddy_channel_flush(n.ch);
    /* 600 KB queued against a peer queue that holds far less: the channel must wait. */
    WAIT_FOR(atomic_load(&n.unwritable) >= 1);
    eddy_channel_counters_t c;
    eddy_channel_counters(n.ch, &c);
    assert_true(c.pending_outbound_bytes > 0);
    assert_false(atomic_load(&last.done));
    char in[SIZE + 1];
    for (unsigned i = 0; i < COUNT; i++) {
        ssize_t r = recv(fd, in, sizeof(in), 0);
        assert_int_equal(r, SIZE);
        check_pattern(in, SIZE, i);
    }
    WAIT_FOR(atomic_load(&last.done));
    assert_int_equal(atomic_load(&last.err), 0);
    WAIT_FOR(atomic_load(&n.writable_again) >= 1);
    eddy_channel_counters(n.ch, &c);
    assert_int_equal(c.pending_outbound_bytes, 0);
    assert_int_equal(c.msgs_written, COUNT);
    close(fd);
    node_close(&n);
    unlink(path);
    rmdir(dir);
}

/* Runs of same-size packets (GSO where the kernel has it) arrive as separate datagrams, with
 * their own contents, in order; a shorter one ends a run, other peers break it. */
static void gso_runs_arrive_whole(void **state)
{
    (void)state;
    eddy_addr_t lo;
    eddy_addr_ip(&lo, "127.0.0.1", 0);
    int fa = peer_socket(AF_INET, &lo), fb = peer_socket(AF_INET, &lo);
    int rcv = 4 << 20;
    setsockopt(fa, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    eddy_addr_t pa, pb;
    peer_addr(fa, &pa);
    peer_addr(fb, &pb);
    node_t n = {.ops = &keep_ops};
    node_open(&n, &lo, NULL);
    /* 100 x 1000 B to a (two GSO runs: 64 at most), then 7 x 300 B + 1 x 100 B to a, with one
     * packet to b in between. */
    unsigned seed = 0;
    for (unsigned i = 0; i < 100; i++) {
        eddy_channel_write(n.ch, eddy_datagram_msg(eddy_datagram_new(pattern_buf(1000, seed++),
                                                                     &pa, NULL)), NULL);
    }
    for (unsigned i = 0; i < 8; i++) {
        if (i == 4) {
            eddy_channel_write(n.ch, eddy_datagram_msg(eddy_datagram_new(pattern_buf(5, 99),
                                                                         &pb, NULL)), NULL);
        }
        size_t len = i == 7 ? 100 : 300;
        eddy_channel_write(n.ch, eddy_datagram_msg(eddy_datagram_new(pattern_buf(len, seed++),
                                                                     &pa, NULL)), NULL);
    }
    eddy_channel_flush(n.ch);
    char in[2048];
    for (unsigned i = 0; i < 108; i++) {
        ssize_t r = recv(fa, in, sizeof(in), 0);
        size_t want = i < 100 ? 1000 : i == 107 ? 100 : 300;
        assert_int_equal(r, (ssize_t)want);
        check_pattern(in, want, i);
    }
    assert_int_equal(recv(fb, in, sizeof(in), 0), 5);
    check_pattern(in, 5, 99);
    close(fa);
    close(fb);
    node_close(&n);
}

/* With UDP_GRO on, what the kernel coalesces is split again: each datagram a packet. */
static void gro_split_again(void **state)
{
    (void)state;
    node_t n = {0};
    keeper_open(&n, EDDY_UDP_GRO, 1);
    int fd = peer_socket(AF_INET, NULL);
    assert_int_equal(connect(fd, &n.addr.u.sa, n.addr.len), 0);
#ifdef UDP_SEGMENT
    /* One GSO send of 20 x 500 B: the receiver's GRO may keep it as one. */
    int seg = 500;
    setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg));
#endif
    char out[10000];
    for (size_t i = 0; i < sizeof(out); i++) {
        out[i] = (char)(i / 500);
    }
    ssize_t w = send(fd, out, sizeof(out), 0);
    int expect = 20;
    if (w < 0) {
        /* No GSO here: send them one by one. */
        int zero = 0;
#ifdef UDP_SEGMENT
        setsockopt(fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero));
#endif
        (void)zero;
        for (int i = 0; i < 20; i++) {
            assert_int_equal(send(fd, out + i * 500, 500, 0), 500);
        }
    }
    WAIT_FOR(atomic_load(&n.reads) == expect);
    assert_int_equal(atomic_load(&n.last_len), 500);
    assert_int_equal((unsigned char)n.last[0], 19);
    assert_int_equal(atomic_load(&n.errors), 0);
    close(fd);
    node_close(&n);
}

/* Options: datagram ones apply, stream ones are harmless, bad values refused. */
static void options(void **state)
{
    (void)state;
    node_t n = {0};
    keeper_open(&n, -1, 0);
    assert_int_equal(eddy_channel_option(n.ch, EDDY_DATAGRAM_RECV_SIZE), 2048);
    assert_int_equal(eddy_channel_option(n.ch, EDDY_UDP_GSO), 1);
    /* A datagram channel reads one recvmmsg batch per wake-up, not the streams' 16. */
    assert_int_equal(eddy_channel_option(n.ch, EDDY_MAX_MESSAGES_PER_READ), 64);
    assert_int_equal(eddy_channel_set_option(n.ch, EDDY_DATAGRAM_RECV_SIZE, 0), EDDY_EINVAL);
    assert_int_equal(eddy_channel_set_option(n.ch, EDDY_DATAGRAM_RECV_SIZE, 65537), EDDY_EINVAL);
    assert_int_equal(eddy_channel_set_option(n.ch, EDDY_IP_MULTICAST_TTL, 256), EDDY_EINVAL);
    node_close(&n);
}

/* Opening refuses what cannot be: no address at all, mixed families, a port in use. */
static void open_errors(void **state)
{
    (void)state;
    eddy_loop_group_t *g = eddy_loop_group_new(1, NULL);
    eddy_datagram_options_t o = {.loop = eddy_loop_group_next(g)};
    eddy_future_t *f = eddy_datagram_open(NULL, &o);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), EDDY_EINVAL);
    eddy_future_release(f);
    eddy_addr_t v4, v6;
    eddy_addr_ip(&v4, "127.0.0.1", 0);
    eddy_addr_ip(&v6, "::1", 9);
    o.remote = &v6;
    f = eddy_datagram_open(&v4, &o);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), EDDY_EINVAL);
    eddy_future_release(f);
    o.remote = NULL;
    int fd = peer_socket(AF_INET, &v4);
    eddy_addr_t taken;
    peer_addr(fd, &taken);
    f = eddy_datagram_open(&taken, &o);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), EDDY_EADDRINUSE);
    eddy_future_release(f);
    close(fd);
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(g, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

/* Two channels on one port with SO_REUSEPORT, on two loops: both open, both serve. */
static void reuseport_shares_port(void **state)
{
    (void)state;
    node_t a = {0}, b = {0};
    eddy_channel_config_init(&a.config);
    assert_int_equal(eddy_channel_config_set(&a.config, EDDY_SO_REUSEPORT, 1), 0);
    b.config = a.config;
    eddy_addr_t lo;
    eddy_addr_ip(&lo, "127.0.0.1", 0);
    node_open(&a, &lo, NULL);
    node_open(&b, &a.addr, NULL);
    assert_int_equal(eddy_addr_port(&b.addr), eddy_addr_port(&a.addr));
    /* Many senders (ports): the kernel spreads them over both. */
    char in[16];
    for (int i = 0; i < 64; i++) {
        int fd = peer_socket(AF_INET, NULL);
        assert_int_equal(sendto(fd, "x", 1, 0, &a.addr.u.sa, a.addr.len), 1);
        assert_int_equal(recv(fd, in, sizeof(in), 0), 1);
        close(fd);
    }
    assert_int_equal(atomic_load(&a.reads) + atomic_load(&b.reads), 64);
    assert_true(atomic_load(&a.reads) > 0 && atomic_load(&b.reads) > 0);
    node_close(&a);
    node_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(echo_ipv4),
        cmocka_unit_test(echo_ipv6),
        cmocka_unit_test(echo_unix),
        cmocka_unit_test(connected_channel),
        cmocka_unit_test(truncated_reported),
        cmocka_unit_test(bad_writes_fail_alone),
        cmocka_unit_test(full_peer_loses_nothing),
        cmocka_unit_test(gso_runs_arrive_whole),
        cmocka_unit_test(gro_split_again),
        cmocka_unit_test(options),
        cmocka_unit_test(open_errors),
        cmocka_unit_test(reuseport_shares_port),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
