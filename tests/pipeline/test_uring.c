/*
 * What only the io_uring transport (pipeline/transport/socket_uring.c, reactor/poller_uring.c) can get
 * wrong, on loops made with small rings so its edges are reached at once: a buffer ring of two
 * buffers under a handler that keeps every buffer it reads (order kept, a dry ring survived);
 * a stream that makes the ring's buffers grow to 64 KiB (unless their size is fixed);
 * a completion queue far smaller than the connections writing to it (overflow survived);
 * multi-megabyte writes from several threads through a small send buffer (order kept); a
 * close, a reset and a half-close with a receive and a send in flight (the peer sees its FIN,
 * nothing is used after it is freed); and a ring the kernel refuses (a seccomp filter, as a
 * container's, in a child process), where a list of pollers ("io_uring,epoll") and the
 * default fall back to the next and say so once, and an explicit request fails; where the
 * kernel gives a ring, the default is io_uring. The rest of the suite runs on io_uring too, as
 * "<test>[io_uring]" (and as the default). Skipped where the running kernel gives no ring.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/channel.h>
#include <eddy/handler.h>
#include <eddy/loop.h>
#include <eddy/pipeline.h>

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEADLINE_MS 10000

#include "support/wait_util.h"
#include "support/socket_util.h"

/* ---------------------------------------------------------------------------------------
 * A server on one io_uring loop made with the options a test gives
 */

typedef struct server_s {
    eddy_loop_group_t *group;
    eddy_channel_t *listener;
    eddy_addr_t addr;
    eddy_channel_config_t child_config;
    const eddy_handler_ops_t *ops;
    _Atomic int accepted;
    _Atomic int closed;
    _Atomic int errors;
    _Atomic(eddy_channel_t *) child; /* the last accepted channel (retained) */
    /* keep_read: the buffers kept, in arrival order, until `expect` bytes came */
    eddy_msg_t **kept;
    size_t nkept, cap_kept, kept_bytes, expect;
    size_t largest; /* the largest buffer kept */
    /* big_reply: the reply's size */
    size_t reply_size;
    bool close_after_reply;
} server_t;

static server_t *srv_of(eddy_ctx_t *ctx)
{
    return eddy_ctx_state(ctx);
}

static void note_inactive(eddy_ctx_t *ctx)
{
    atomic_fetch_add(&srv_of(ctx)->closed, 1);
    eddy_ctx_fire_channel_inactive(ctx);
}

static void note_exception(eddy_ctx_t *ctx, int err)
{
    (void)err;
    atomic_fetch_add(&srv_of(ctx)->errors, 1);
}

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
    .channel_inactive = note_inactive,
    .exception_caught = note_exception,
};

/* Keeps every buffer it is given (each one a block of the loop's buffer ring) until the whole
 * message came, then writes them all back in the order they arrived. */
static void keep_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    server_t *s = srv_of(ctx);
    if (s->nkept == s->cap_kept) {
        s->cap_kept = s->cap_kept ? s->cap_kept * 2 : 256;
        s->kept = realloc(s->kept, s->cap_kept * sizeof(*s->kept));
    }
    s->kept[s->nkept++] = msg;
    size_t n = eddy_buf_readable(eddy_buf_of(msg));
    s->kept_bytes += n;
    s->largest = n > s->largest ? n : s->largest;
    if (s->kept_bytes == s->expect) {
        for (size_t i = 0; i < s->nkept; i++) {
            eddy_ctx_write(ctx, s->kept[i], NULL);
        }
        s->nkept = 0;
        eddy_ctx_flush(ctx);
    }
}

static void keep_removed(eddy_ctx_t *ctx)
{
    server_t *s = srv_of(ctx);
    for (size_t i = 0; i < s->nkept; i++) {
        eddy_msg_release(s->kept[i]);
    }
    s->nkept = 0;
}

static const eddy_handler_ops_t keep_ops = {
    .name = "keep",
    .channel_read = keep_read,
    .channel_inactive = note_inactive,
    .exception_caught = note_exception,
    .handler_removed = keep_removed,
};

/* At the first bytes read, writes reply_size bytes (a counting pattern) and, if asked, closes
 * at once: the send is still with the kernel, the receive still armed. */
static void big_reply_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    server_t *s = srv_of(ctx);
    eddy_msg_release(msg);
    if (s->reply_size == 0) {
        return;
    }
    eddy_buf_t *b = eddy_buf_new(s->reply_size);
    assert_non_null(b);
    for (size_t i = 0; i < s->reply_size; i++) {
        uint8_t v = (uint8_t)(i % 251);
        assert_int_equal(eddy_buf_write_bytes(b, &v, 1), 0);
    }
    s->reply_size = 0;
    eddy_ctx_write_and_flush(ctx, eddy_buf_msg(b), NULL);
    if (s->close_after_reply) {
        eddy_ctx_close(ctx, NULL);
    }
}

static const eddy_handler_ops_t big_reply_ops = {
    .name = "big-reply",
    .channel_read = big_reply_read,
    .channel_inactive = note_inactive,
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
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "h", s->ops, s, NULL);
}

/* Starts s on an io_uring loop made with opts (poller set here); false where the kernel
 * gives no ring. */
static bool server_start(server_t *s, eddy_loop_options_t opts)
{
    opts.poller = "io_uring";
    s->group = eddy_loop_group_new(1, &opts);
    if (s->group == NULL) {
        return false;
    }
    if (s->child_config.set == 0) {
        eddy_channel_config_init(&s->child_config);
    }
    eddy_addr_t a;
    eddy_addr_ip(&a, "127.0.0.1", 0);
    eddy_listen_options_t o = {
        .loop = eddy_loop_group_next(s->group),
        .child_init = init_child,
        .child_arg = s,
        .child_config = &s->child_config,
    };
    eddy_future_t *f = eddy_channel_listen(&a, &o);
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    s->listener = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    s->addr = *eddy_channel_local_addr(s->listener);
    return true;
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
    free(s->kept);
}

static eddy_channel_t *accepted_child(server_t *s)
{
    WAIT_FOR(atomic_load(&s->child) != NULL);
    return atomic_load(&s->child);
}

/* Reads until the peer's FIN (true) or an error (false), counting the bytes and checking
 * them against the counting pattern big_reply_read writes. */
static bool read_to_end(int fd, size_t *got)
{
    char buf[65536];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0) {
            return true;
        }
        if (r < 0) {
            assert_int_not_equal(errno, EAGAIN); /* the deadline passed: no FIN came */
            return false;
        }
        for (ssize_t i = 0; i < r; i++) {
            assert_int_equal((uint8_t)buf[i], (uint8_t)((*got + (size_t)i) % 251));
        }
        *got += (size_t)r;
    }
}

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (unsigned char)(i * 131 + (i >> 7) + seed);
    }
}

/* ---------------------------------------------------------------------------------------
 * Tests
 */

/* Sends bytes (a pattern of seed) to a keep handler on a loop made with opts and reads them
 * back, checked: they come back whole and in order. Returns the largest buffer the handler was
 * handed. */
static size_t keep_round_trip(eddy_loop_options_t opts, size_t bytes, unsigned seed)
{
    server_t s = {.ops = &keep_ops, .expect = bytes};
    if (!server_start(&s, opts)) {
        skip();
    }
    int fd = client_connect(&s.addr);
    unsigned char *out = malloc(s.expect), *in = malloc(s.expect);
    fill_pattern(out, s.expect, seed);
    send_all(fd, out, s.expect); /* the server holds everything: no reply before the end */
    recv_all(fd, in, s.expect);
    assert_memory_equal(in, out, s.expect);
    close(fd);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    assert_int_equal(atomic_load(&s.errors), 0);
    free(out);
    free(in);
    server_stop(&s);
    return s.largest;
}

/* Two 64-byte buffers in the ring; the handler keeps every buffer until 256 KiB came. Each
 * completion takes a slot, and a burst larger than the ring runs it dry (ENOBUFS ends the
 * multishot receive, which is armed again): nothing may be lost or reordered. */
static void test_uring_tiny_buffer_ring_and_a_handler_keeping_buffers(void **state)
{
    (void)state;
    eddy_loop_options_t tiny = {.uring_buffers = 2, .uring_buffer_size = 64};
    keep_round_trip(tiny, 256 * 1024, 7);
}

/* A stream (4 MiB) fills the 16 KiB buffers of the ring, which is then refilled with 64 KiB
 * ones (a completion per 64 KiB, as a readiness read takes); a size the loop's options give is
 * kept. */
static void test_uring_buffers_grow_for_a_stream_unless_the_size_is_fixed(void **state)
{
    (void)state;
    size_t largest = keep_round_trip((eddy_loop_options_t){0}, 4u << 20, 11);
    assert_true(largest > 16384 && largest <= 65536);
    largest = keep_round_trip((eddy_loop_options_t){.uring_buffer_size = 16384}, 4u << 20, 11);
    assert_true(largest <= 16384);
}

typedef struct conn_s {
    int fd;
    unsigned char out[16 * 64], in[16 * 64];
} conn_t;

/* Four submission entries (sixteen completions) and 64 connections that each send 16 x 64 B
 * at once, for several rounds: far more completions than the queue holds are posted between
 * two turns, and every echo must still come back. */
static void test_uring_small_completion_queue_and_many_connections(void **state)
{
    (void)state;
    server_t s = {.ops = &echo_ops};
    if (!server_start(&s, (eddy_loop_options_t){.uring_entries = 4, .uring_buffers = 16,
                                                .uring_buffer_size = 256})) {
        skip();
    }
    enum { CONNS = 64 };
    conn_t *c = calloc(CONNS, sizeof(*c));
    for (int i = 0; i < CONNS; i++) {
        c[i].fd = client_connect(&s.addr);
    }
    WAIT_FOR(atomic_load(&s.accepted) == CONNS);
    for (unsigned round = 0; round < 20; round++) {
        for (int i = 0; i < CONNS; i++) {
            fill_pattern(c[i].out, sizeof c[i].out, round * CONNS + (unsigned)i);
            for (int m = 0; m < 16; m++) {
                send_all(c[i].fd, c[i].out + m * 64, 64);
            }
        }
        for (int i = 0; i < CONNS; i++) {
            recv_all(c[i].fd, c[i].in, sizeof c[i].in);
            assert_memory_equal(c[i].in, c[i].out, sizeof c[i].out);
        }
    }
    for (int i = 0; i < CONNS; i++) {
        close(c[i].fd);
    }
    WAIT_FOR(atomic_load(&s.closed) == CONNS);
    assert_int_equal(atomic_load(&s.errors), 0);
    free(c);
    server_stop(&s);
}

enum { WRITERS = 4, CHUNKS = 256, CHUNK = 8192 };

typedef struct writer_s {
    eddy_channel_t *ch;
    int id;
} writer_t;

/* Chunks of CHUNK bytes, each starting with the writer's id and the chunk's number. */
static void *write_chunks(void *arg)
{
    writer_t *w = arg;
    for (uint32_t n = 0; n < CHUNKS; n++) {
        eddy_buf_t *b = eddy_buf_new(CHUNK);
        uint32_t head[2] = {(uint32_t)w->id, n};
        eddy_buf_write_bytes(b, head, sizeof head);
        for (size_t i = sizeof head; i < CHUNK; i++) {
            uint8_t v = (uint8_t)(n + i);
            eddy_buf_write_bytes(b, &v, 1);
        }
        eddy_channel_write_and_flush(w->ch, eddy_buf_msg(b), NULL);
    }
    return NULL;
}

/* 8 MiB written by four threads at once through a 4 KiB send buffer to a reader that takes
 * its time: each thread's chunks arrive whole and in its order. */
static void test_uring_writes_from_threads_through_a_small_send_buffer(void **state)
{
    (void)state;
    server_t s = {.ops = &echo_ops};
    eddy_channel_config_init(&s.child_config);
    eddy_channel_config_set(&s.child_config, EDDY_SO_SNDBUF, 4096);
    eddy_channel_config_set(&s.child_config, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, 64 << 20);
    if (!server_start(&s, (eddy_loop_options_t){0})) {
        skip();
    }
    int fd = client_connect(&s.addr);
    eddy_channel_t *ch = accepted_child(&s);
    pthread_t t[WRITERS];
    writer_t w[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer_t){ch, i};
        assert_int_equal(pthread_create(&t[i], NULL, write_chunks, &w[i]), 0);
    }
    uint32_t next[WRITERS] = {0};
    unsigned char *chunk = malloc(CHUNK);
    for (int k = 0; k < WRITERS * CHUNKS; k++) {
        if (k % 64 == 0) {
            usleep(2000); /* a slow reader: the sends wait for room */
        }
        recv_all(fd, chunk, CHUNK);
        uint32_t head[2];
        memcpy(head, chunk, sizeof head);
        assert_true(head[0] < WRITERS);
        assert_int_equal(head[1], next[head[0]]);
        next[head[0]]++;
        for (size_t i = sizeof head; i < CHUNK; i++) {
            assert_int_equal(chunk[i], (uint8_t)(head[1] + i));
        }
    }
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(next[i], CHUNKS);
    }
    free(chunk);
    close(fd);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    server_stop(&s);
}

/* The server writes 4 MiB to a client that is not reading and closes at once, its receive
 * armed and its send waiting for room: the close completes, the client reads a prefix of the
 * reply followed by the FIN, and nothing is touched after it was freed (ASan). */
static void test_uring_close_with_a_receive_and_a_send_in_flight(void **state)
{
    (void)state;
    server_t s = {.ops = &big_reply_ops, .reply_size = 4 << 20, .close_after_reply = true};
    if (!server_start(&s, (eddy_loop_options_t){0})) {
        skip();
    }
    int fd = client_connect(&s.addr);
    send_all(fd, "go", 2);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    size_t got = 0;
    bool fin = read_to_end(fd, &got);
    assert_true(fin || got < (size_t)(4 << 20)); /* a reset only if the reply was cut */
    assert_true(got <= (size_t)(4 << 20));
    close(fd);
    server_stop(&s);
}

/* The client resets the connection while the server's 4 MiB send waits for room: the send
 * fails, the channel closes, and its buffers stay until the kernel let go of them (ASan). */
static void test_uring_reset_with_a_send_in_flight(void **state)
{
    (void)state;
    server_t s = {.ops = &big_reply_ops, .reply_size = 4 << 20};
    if (!server_start(&s, (eddy_loop_options_t){0})) {
        skip();
    }
    int fd = client_connect(&s.addr);
    send_all(fd, "go", 2);
    char buf[4096];
    recv_all(fd, buf, sizeof buf); /* the send has begun */
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd); /* an RST */
    WAIT_FOR(atomic_load(&s.closed) == 1);
    server_stop(&s);
}

/* The client half-closes while the server's 4 MiB reply is still being sent, half-closure
 * allowed: the input's end is an event, the send goes on, and the server's own
 * shutdown_output sends its FIN after the whole reply. */
static void test_uring_half_close_with_a_send_in_flight(void **state)
{
    (void)state;
    server_t s = {.ops = &big_reply_ops, .reply_size = 4 << 20};
    eddy_channel_config_init(&s.child_config);
    eddy_channel_config_set(&s.child_config, EDDY_ALLOW_HALF_CLOSURE, 1);
    if (!server_start(&s, (eddy_loop_options_t){0})) {
        skip();
    }
    int fd = client_connect(&s.addr);
    send_all(fd, "go", 2);
    unsigned char first;
    recv_all(fd, &first, 1);
    assert_int_equal(first, 0);
    assert_int_equal(shutdown(fd, SHUT_WR), 0);
    eddy_channel_t *ch = accepted_child(&s);
    usleep(20000); /* the FIN reaches the server while its send waits for room */
    eddy_channel_shutdown_output(ch, NULL);
    size_t got = 1;
    assert_true(read_to_end(fd, &got));
    assert_int_equal(got, (size_t)(4 << 20));
    close(fd);
    assert_int_equal(atomic_load(&s.errors), 0);
    server_stop(&s);
}

/* ---------------------------------------------------------------------------------------
 * Falling back where the kernel refuses rings
 */

static _Atomic int fallback_logged;

static void count_fallback(eddy_log_level_t level, const char *message, void *arg)
{
    (void)level;
    (void)arg;
    if (strstr(message, "io_uring cannot be used here") != NULL) {
        atomic_fetch_add(&fallback_logged, 1);
    }
}

/* io_uring_setup() fails with EPERM from now on, as under a container runtime's filter. */
static bool refuse_rings(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

/* The argument that makes this program the child of the fallback test. */
#define FALLBACK_CHILD "--fallback-child"

/* In a child process (the filter cannot be undone): 0 when everything held, else the number
 * of the check that failed. */
static int fallback_child(void)
{
    if (!refuse_rings()) {
        return 100; /* no seccomp here: reported as a skip */
    }
    unsetenv("EDDY_POLLER");
    eddy_log_set_hook(count_fallback, NULL);
    eddy_log_set_level(EDDY_LOG_INFO);
    eddy_loop_t *asked = eddy_loop_new(&(eddy_loop_options_t){.poller = "io_uring"});
    if (asked != NULL) {
        return 1; /* an explicit request must fail */
    }
    /* A list falls back to its next entry, and so does the default; said once. */
    static const eddy_loop_options_t listed = {.poller = "io_uring,epoll"};
    const eddy_loop_options_t *tries[] = {&listed, &listed, NULL};
    for (int i = 0; i < 3; i++) {
        eddy_loop_group_t *g = eddy_loop_group_new(1, tries[i]);
        if (g == NULL) {
            return 2;
        }
        const char *name = eddy_loop_poller(eddy_loop_group_next(g));
        bool listed_one = tries[i] != NULL;
        if (strcmp(name, "io_uring") == 0 || (listed_one && strcmp(name, "epoll") != 0)) {
            return 3;
        }
        eddy_future_t *t = eddy_loop_group_shutdown_gracefully(g, 0, 1000);
        if (eddy_future_await(t, DEADLINE_MS) != 0 || eddy_loop_group_free(g) != 0) {
            return 4;
        }
    }
    if (atomic_load(&fallback_logged) != 1) {
        return 5;
    }
    eddy_log_set_hook(NULL, NULL);
    return 0;
}

static void test_uring_refused_ring_falls_back_by_default_and_fails_when_asked(void **state)
{
    (void)state;
    eddy_loop_t *probe = eddy_loop_new(&(eddy_loop_options_t){.poller = "io_uring"});
    if (probe == NULL) {
        skip(); /* no ring here anyway */
    }
    eddy_loop_free(probe);
    fflush(NULL);
    /* A fresh process: this one has threads, and a child forked from it may not start any
     * (TSan refuses; a lock held by another thread at the fork would never be let go). */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "pipeline_test_uring", FALLBACK_CHILD, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 100) {
        skip();
    }
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Where the kernel makes a ring, a loop with no poller asked for (no option, no
 * $EDDY_POLLER) gets io_uring. */
static void test_uring_is_the_default_where_the_kernel_has_it(void **state)
{
    (void)state;
    eddy_loop_t *probe = eddy_loop_new(&(eddy_loop_options_t){.poller = "io_uring"});
    if (probe == NULL) {
        skip(); /* refused here: the fallback test covers the default then */
    }
    eddy_loop_free(probe);
    const char *env = getenv("EDDY_POLLER");
    char *saved = env != NULL ? strdup(env) : NULL;
    unsetenv("EDDY_POLLER");
    eddy_loop_t *loop = eddy_loop_new(NULL);
    assert_non_null(loop);
    assert_string_equal(eddy_loop_poller(loop), "io_uring");
    eddy_loop_free(loop);
    if (saved != NULL) {
        setenv("EDDY_POLLER", saved, 1);
        free(saved);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], FALLBACK_CHILD) == 0) {
        return fallback_child();
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uring_tiny_buffer_ring_and_a_handler_keeping_buffers),
        cmocka_unit_test(test_uring_buffers_grow_for_a_stream_unless_the_size_is_fixed),
        cmocka_unit_test(test_uring_small_completion_queue_and_many_connections),
        cmocka_unit_test(test_uring_writes_from_threads_through_a_small_send_buffer),
        cmocka_unit_test(test_uring_close_with_a_receive_and_a_send_in_flight),
        cmocka_unit_test(test_uring_reset_with_a_send_in_flight),
        cmocka_unit_test(test_uring_half_close_with_a_send_in_flight),
        cmocka_unit_test(test_uring_is_the_default_where_the_kernel_has_it),
        cmocka_unit_test(test_uring_refused_ring_falls_back_by_default_and_fails_when_asked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
