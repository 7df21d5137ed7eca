/*
 * No silent loss (#28), on real loopback sockets against servers built as a user builds them:
 * a write that fails with no promise never leaves a hole in the stream (the hard cap with a
 * pipelining, half-closing client), backpressure holds per message for replies larger than
 * their requests, a pipeline missing an encoder says so, a hostile WebSocket connection
 * costs at most one log line, and the stall watchdog names the handler that held the loop.
 * Every test is bounded in time and closes what it opened.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/channel.h>
#include <eddy/codec.h>
#include <eddy/http.h>
#include <eddy/pipeline.h>
#include <eddy/websocket.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DEADLINE_MS 20000

#include "support/wait_util.h"
#include "support/socket_util.h"

/* ---------------------------------------------------------------------------------------
 * What the library logs, kept for the tests to read.
 */

#define LOG_LINES 256

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char *log_lines[LOG_LINES];
static int log_levels[LOG_LINES];
static size_t log_count;

static void keep_log(eddy_log_level_t level, const char *message, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&log_lock);
    if (log_count < LOG_LINES) {
        log_levels[log_count] = (int)level;
        log_lines[log_count++] = strdup(message);
    }
    pthread_mutex_unlock(&log_lock);
}

static void log_capture(void)
{
    eddy_log_set_level(EDDY_LOG_DEBUG);
    eddy_log_set_hook(keep_log, NULL);
}

static void log_forget(void)
{
    pthread_mutex_lock(&log_lock);
    for (size_t i = 0; i < log_count; i++) {
        free(log_lines[i]);
    }
    log_count = 0;
    pthread_mutex_unlock(&log_lock);
}

static void log_release(void)
{
    eddy_log_set_hook(NULL, NULL);
    eddy_log_set_level(EDDY_LOG_INFO);
    log_forget();
}

/* Lines at WARN or above that hold every one of the NULL-ended needles. */
static size_t warnings_with(const char *needle, ...)
{
    size_t n = 0;
    pthread_mutex_lock(&log_lock);
    for (size_t i = 0; i < log_count; i++) {
        if (log_levels[i] < EDDY_LOG_WARN) {
            continue;
        }
        bool all = true;
        va_list ap;
        va_start(ap, needle);
        for (const char *s = needle; s != NULL && all; s = va_arg(ap, const char *)) {
            all = strstr(log_lines[i], s) != NULL;
        }
        va_end(ap);
        n += all;
    }
    pthread_mutex_unlock(&log_lock);
    return n;
}

static void log_print(void)
{
    pthread_mutex_lock(&log_lock);
    for (size_t i = 0; i < log_count; i++) {
        if (log_levels[i] >= EDDY_LOG_WARN) {
            print_message("  log: %s\n", log_lines[i]);
        }
    }
    pthread_mutex_unlock(&log_lock);
}

/* ---------------------------------------------------------------------------------------
 * A server on one loop, its pipeline made by the test.
 */

typedef struct server_s {
    eddy_loop_group_t *group;
    eddy_channel_t *listener;
    eddy_addr_t addr;
    eddy_channel_config_t child;
    int (*init)(eddy_channel_t *ch, struct server_s *s);
    _Atomic int accepted;
    _Atomic int errors;
    _Atomic int last_error;
    _Atomic int closed;
    _Atomic uint64_t max_pending; /* the most the outbound buffer held after a reply */
    size_t reply_size;            /* big replies: the size of each */
    bool skip_exceptions;         /* the handler leaves exception_caught to the tail */
    int64_t stall_threshold_ns;   /* the loop's watchdog (0: its default) */
    _Atomic uint64_t child_id;    /* the last accepted channel's id */
    _Atomic uint64_t read;        /* the channel's bytes read at its last read_complete */
    _Atomic uint64_t decoded;     /* bytes of the lines that reached the handler */
} server_t;

static int init_child(eddy_channel_t *ch, void *arg)
{
    server_t *s = arg;
    atomic_fetch_add(&s->accepted, 1);
    atomic_store(&s->child_id, eddy_channel_id(ch));
    return s->init(ch, s);
}

static void server_start(server_t *s, int (*init)(eddy_channel_t *, server_t *))
{
    s->init = init;
    eddy_loop_options_t lo = {.name = "no-loss", .stall_threshold_ns = s->stall_threshold_ns};
    s->group = eddy_loop_group_new(1, &lo);
    assert_non_null(s->group);
    eddy_addr_t a;
    eddy_addr_ip(&a, "127.0.0.1", 0);
    eddy_listen_options_t o = {
        .loop = eddy_loop_group_next(s->group),
        .child_init = init_child,
        .child_arg = s,
        .child_config = &s->child,
    };
    eddy_future_t *f = eddy_channel_listen(&a, &o);
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    s->listener = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    s->addr = *eddy_channel_local_addr(s->listener);
}

static void server_stop(server_t *s)
{
    eddy_channel_close(s->listener, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(s->listener), DEADLINE_MS), 0);
    eddy_channel_release(s->listener);
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(s->group, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(s->group), 0);
}

static server_t *srv(eddy_ctx_t *ctx)
{
    return eddy_ctx_state(ctx);
}

static void note_exception(eddy_ctx_t *ctx, int err)
{
    atomic_fetch_add(&srv(ctx)->errors, 1);
    atomic_store(&srv(ctx)->last_error, err);
    eddy_ctx_close(ctx, NULL);
}

static void note_inactive(eddy_ctx_t *ctx)
{
    atomic_fetch_add(&srv(ctx)->closed, 1);
    eddy_ctx_fire_channel_inactive(ctx);
}

/* The peer's FIN (half-closure allowed): answer what came, then close. */
static void close_at_input_end(eddy_ctx_t *ctx, int event, void *data)
{
    if (event == EDDY_EVENT_INPUT_SHUTDOWN) {
        eddy_ctx_close_after_flush(ctx, NULL);
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

static void flush_at_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
}

static void note_pending(eddy_ctx_t *ctx)
{
    eddy_channel_counters_t c;
    eddy_channel_counters(eddy_ctx_channel(ctx), &c);
    uint64_t was = atomic_load(&srv(ctx)->max_pending);
    while (c.pending_outbound_bytes > was &&
           !atomic_compare_exchange_weak(&srv(ctx)->max_pending, &was, c.pending_outbound_bytes)) {
    }
}

/* ---------------------------------------------------------------------------------------
 * A line echo server, as the user of #28 wrote it: every line back, written with no promise,
 * flushed once per read batch.
 */

static void line_echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_ctx_write(ctx, msg, NULL); /* the line with its "\n" */
    note_pending(ctx);
}

static const eddy_handler_ops_t line_echo_ops = {
    .name = "line_echo",
    .sharable = true,
    .channel_read = line_echo_read,
    .channel_read_complete = flush_at_read_complete,
    .channel_inactive = note_inactive,
    .user_event_triggered = close_at_input_end,
    .exception_caught = note_exception,
};

static const eddy_handler_ops_t line_echo_quiet_ops = {
    .name = "line_echo",
    .sharable = true,
    .channel_read = line_echo_read,
    .channel_read_complete = flush_at_read_complete,
    .channel_inactive = note_inactive,
    .user_event_triggered = close_at_input_end,
};

static int init_line_echo(eddy_channel_t *ch, server_t *s)
{
    return EDDY_PIPELINE_ADD_LAST(
        eddy_channel_pipeline(ch), eddy_line_decoder(1024, false, false),
        eddy_handler("line_echo", s->skip_exceptions ? &line_echo_quiet_ops : &line_echo_ops, s,
                     NULL));
}

#define LINES 6000
#define LINE_LEN 100

static void make_line(char *out, int i)
{
    int n = snprintf(out, LINE_LEN, "line %05d ", i);
    memset(out + n, 'a' + i % 26, (size_t)(LINE_LEN - 1 - n));
    out[LINE_LEN - 1] = '\n';
}

typedef struct sender_s {
    int fd;
    const char *data;
    size_t len;
} sender_t;

/* Send everything, then half-close; the server may close first (send errors end it). */
static void *send_then_half_close(void *arg)
{
    sender_t *s = arg;
    size_t off = 0;
    while (off < s->len) {
        ssize_t w = send(s->fd, s->data + off, s->len - off, MSG_NOSIGNAL);
        if (w <= 0) {
            break;
        }
        off += (size_t)w;
    }
    shutdown(s->fd, SHUT_WR);
    return NULL;
}

/* Read until EOF or an error into a buffer of cap bytes; returns how many came. */
static size_t read_to_end(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, DEADLINE_MS) <= 0) {
            fail_msg("no EOF within %d ms after %zu bytes", DEADLINE_MS, got);
        }
        ssize_t r = recv(fd, buf + got, cap - got, 0);
        if (r <= 0) {
            return got;
        }
        got += (size_t)r;
        assert_true(got < cap); /* never more than was sent */
    }
}

/*
 * The line echo with the hard cap, a client pipelining 6,000 lines and half-closing; small
 * socket buffers, so the replies pile up. It gets every answer or, at the cap, a prefix and
 * the close: never a stream that goes on after a hole. Returns the bytes that came.
 */
static size_t pipeline_lines(server_t *s, bool slow_reader)
{
    size_t total = (size_t)LINES * LINE_LEN;
    char *sent = malloc(total), *got = malloc(total + 1);
    for (int i = 0; i < LINES; i++) {
        make_line(sent + (size_t)i * LINE_LEN, i);
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int small = 4096;
    if (slow_reader) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    }
    assert_int_equal(connect(fd, &s->addr.u.sa, s->addr.len), 0);
    sender_t snd = {fd, sent, total};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, send_then_half_close, &snd), 0);
    if (slow_reader) {
        usleep(300 * 1000); /* let the replies pile up before reading any */
    }
    size_t n = read_to_end(fd, got, total + 1);
    pthread_join(t, NULL);
    close(fd);
    /* A prefix of what was sent, to the byte: no hole anywhere. */
    for (size_t i = 0; i < n; i++) {
        if (got[i] != sent[i]) {
            fail_msg("byte %zu (line %zu) differs: a hole in the stream", i, i / LINE_LEN);
        }
    }
    free(sent);
    free(got);
    return n;
}

static void test_cap_with_a_pipelining_half_closing_client_leaves_no_hole(void **state)
{
    (void)state;
    server_t s = {0};
    eddy_channel_config_init(&s.child);
    eddy_channel_config_set(&s.child, EDDY_MAX_PENDING_OUTBOUND, 65536);
    eddy_channel_config_set(&s.child, EDDY_ALLOW_HALF_CLOSURE, 1);
    eddy_channel_config_set(&s.child, EDDY_SO_SNDBUF, 4096);
    server_start(&s, init_line_echo);
    size_t n = pipeline_lines(&s, true);
    /* The cap was reached: the answers stop at a prefix, with the error raised. */
    assert_true(n < (size_t)LINES * LINE_LEN);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    assert_int_equal(atomic_load(&s.errors), 1);
    assert_int_equal(atomic_load(&s.last_error), EDDY_ENOBUFS);
    assert_true(atomic_load(&s.max_pending) <= 65536);
    server_stop(&s);
}

/* No handler takes the error: the tail logs it once, naming the channel, the handler that
 * wrote and the message type. */
static void test_cap_failure_nobody_handles_is_logged_once(void **state)
{
    (void)state;
    log_capture();
    server_t s = {.skip_exceptions = true};
    eddy_channel_config_init(&s.child);
    eddy_channel_config_set(&s.child, EDDY_MAX_PENDING_OUTBOUND, 65536);
    eddy_channel_config_set(&s.child, EDDY_ALLOW_HALF_CLOSURE, 1);
    eddy_channel_config_set(&s.child, EDDY_SO_SNDBUF, 4096);
    server_start(&s, init_line_echo);
    size_t n = pipeline_lines(&s, true);
    assert_true(n < (size_t)LINES * LINE_LEN);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    server_stop(&s);
    if (warnings_with("ENOBUFS", "'line_echo'", "a buffer", "channel ", NULL) != 1 ||
        warnings_with("channel", NULL) != 1) {
        log_print();
        fail_msg("wanted one warning naming the channel, the handler and the message type");
    }
    log_release();
}

/* With the backpressure pause the same client gets every answer: the decoder passes no line
 * on while the channel is unwritable, so the cap above the high water mark is never met. */
static void test_cap_with_pause_read_answers_everything(void **state)
{
    (void)state;
    server_t s = {0};
    eddy_channel_config_init(&s.child);
    eddy_channel_config_set(&s.child, EDDY_MAX_PENDING_OUTBOUND, 65536);
    eddy_channel_config_set(&s.child, EDDY_WRITE_BUFFER_LOW_WATER_MARK, 16384);
    eddy_channel_config_set(&s.child, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, 32768);
    eddy_channel_config_set(&s.child, EDDY_PAUSE_READ_WHEN_UNWRITABLE, 1);
    eddy_channel_config_set(&s.child, EDDY_ALLOW_HALF_CLOSURE, 1);
    eddy_channel_config_set(&s.child, EDDY_SO_SNDBUF, 4096);
    server_start(&s, init_line_echo);
    size_t n = pipeline_lines(&s, true);
    assert_int_equal(n, (size_t)LINES * LINE_LEN);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    assert_int_equal(atomic_load(&s.errors), 0);
    /* At most the high water mark and one reply. */
    assert_true(atomic_load(&s.max_pending) <= 32768 + LINE_LEN);
    server_stop(&s);
}

/* ---------------------------------------------------------------------------------------
 * Replies larger than their requests: each line asks for a 1 MiB reply.
 */

#define BIG_REPLY ((size_t)1 << 20)
#define BIG_REQUESTS 100

static void big_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_msg_release(msg);
    size_t n = srv(ctx)->reply_size;
    eddy_buf_t *b = eddy_buf_alloc(eddy_ctx_alloc(ctx), n, n);
    assert_non_null(b);
    memset(eddy_buf_write_ptr(b), 'k', n - 1);
    ((char *)eddy_buf_write_ptr(b))[n - 1] = '\n';
    eddy_buf_produce(b, n);
    eddy_ctx_write(ctx, eddy_buf_msg(b), NULL);
    note_pending(ctx);
}

static const eddy_handler_ops_t big_ops = {
    .name = "keys",
    .sharable = true,
    .channel_read = big_read,
    .channel_read_complete = flush_at_read_complete,
    .channel_inactive = note_inactive,
    .user_event_triggered = close_at_input_end,
    .exception_caught = note_exception,
};

static int init_big(eddy_channel_t *ch, server_t *s)
{
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_line_decoder(1024, false, false),
                                  eddy_handler("keys", &big_ops, s, NULL));
}

static void test_pause_read_bounds_replies_larger_than_requests(void **state)
{
    (void)state;
    server_t s = {.reply_size = BIG_REPLY};
    eddy_channel_config_init(&s.child);
    eddy_channel_config_set(&s.child, EDDY_PAUSE_READ_WHEN_UNWRITABLE, 1);
    eddy_channel_config_set(&s.child, EDDY_ALLOW_HALF_CLOSURE, 1);
    server_start(&s, init_big);
    /* 10 KB of pipelined requests in one write: one read on the server. */
    char req[BIG_REQUESTS * LINE_LEN];
    for (int i = 0; i < BIG_REQUESTS; i++) {
        make_line(req + (size_t)i * LINE_LEN, i);
    }
    int fd = client_connect(&s.addr);
    send_all(fd, req, sizeof(req));
    shutdown(fd, SHUT_WR);
    usleep(200 * 1000); /* not reading yet: the replies would all queue without the pause */
    size_t want = (size_t)BIG_REQUESTS * BIG_REPLY, got = 0;
    char *buf = malloc(1 << 16);
    for (;;) {
        ssize_t r = recv(fd, buf, 1 << 16, 0);
        assert_true(r >= 0);
        if (r == 0) {
            break;
        }
        for (ssize_t i = 0; i < r; i++) {
            char c = (got + (size_t)i) % BIG_REPLY == BIG_REPLY - 1 ? '\n' : 'k';
            assert_int_equal(buf[i], c);
        }
        got += (size_t)r;
    }
    free(buf);
    close(fd);
    assert_int_equal(got, want);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    assert_int_equal(atomic_load(&s.errors), 0);
    /* The high water mark (64 KiB) and one reply, not a reply per request of the read. */
    uint64_t most = atomic_load(&s.max_pending);
    if (most > 65536 + BIG_REPLY) {
        fail_msg("the server queued %llu bytes of replies", (unsigned long long)most);
    }
    server_stop(&s);
}

/* A client that pipelines requests for replies 40 times their size and never reads: the
 * decoder holds lines back while the channel is unwritable, and the channel must read no more
 * meanwhile. Each time the kernel took some replies the channel became writable for a moment;
 * reading resumed at once, before the held lines went, and on io_uring a multishot receive
 * brought in a batch (up to a megabyte) each time: the held input grew without bound (an HTTP
 * server 100 MB in 2 s). Now the input stays held until the decoder is through. */

static void held_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    atomic_fetch_add(&srv(ctx)->decoded, eddy_buf_readable(eddy_buf_of(msg))); /* with "\n" */
    big_read(ctx, msg);
}

static void held_read_complete(eddy_ctx_t *ctx)
{
    eddy_channel_counters_t c;
    eddy_channel_counters(eddy_ctx_channel(ctx), &c);
    atomic_store(&srv(ctx)->read, c.bytes_read);
    eddy_ctx_flush(ctx);
}

static const eddy_handler_ops_t held_ops = {
    .name = "keys",
    .sharable = true,
    .channel_read = held_read,
    .channel_read_complete = held_read_complete,
    .channel_inactive = note_inactive,
    .exception_caught = note_exception,
};

static int init_held(eddy_channel_t *ch, server_t *s)
{
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_line_decoder(1024, false, false),
                                  eddy_handler("keys", &held_ops, s, NULL));
}

/* Send lines on fd until the server has taken nothing for 300 ms, or 1.5 s passed. */
static void send_until_refused(int fd)
{
    char chunk[640 * LINE_LEN];
    for (int i = 0; i < 640; i++) {
        make_line(chunk + (size_t)i * LINE_LEN, i);
    }
    int64_t start = now_ms(), last = start;
    while (now_ms() - start < 1500 && now_ms() - last < 300) {
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, 50) == 1 && send(fd, chunk, sizeof(chunk), MSG_DONTWAIT) > 0) {
            last = now_ms();
        }
    }
}

static void test_pause_read_holds_input_behind_held_messages(void **state)
{
    (void)state;
    server_t s = {.reply_size = 40 * LINE_LEN};
    eddy_channel_config_init(&s.child);
    eddy_channel_config_set(&s.child, EDDY_PAUSE_READ_WHEN_UNWRITABLE, 1);
    server_start(&s, init_held);
    int fd = client_connect(&s.addr);
    send_until_refused(fd);
    usleep(100 * 1000); /* the last batch read */
    uint64_t read = atomic_load(&s.read), decoded = atomic_load(&s.decoded);
    print_message("  read %llu bytes, decoded %llu\n", (unsigned long long)read,
                  (unsigned long long)decoded);
    /* What a read (epoll) or a batch of receives (io_uring: the loop's ring, 2 MiB) brings
     * in past the pause, and a partial line. */
    if (read - decoded > ((size_t)4 << 20)) {
        fail_msg("the server holds %llu bytes of input", (unsigned long long)(read - decoded));
    }
    close(fd);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    server_stop(&s);
}

/* ---------------------------------------------------------------------------------------
 * The WebSocket pipeline of the README also serves pages.
 */

static void page_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req != NULL) {
        eddy_http_response_t *r = eddy_http_response_new(200);
        r->keep_alive = req->keep_alive;
        eddy_http_response_set_body(r, eddy_buf_from_str("stats: 1\n"));
        eddy_ctx_write_and_flush(ctx, eddy_http_response_msg(r), NULL);
    }
    eddy_msg_release(msg);
}

static const eddy_handler_ops_t page_ops = {
    .name = "stats",
    .sharable = true,
    .channel_read = page_read,
    .channel_inactive = note_inactive,
};

static int init_ws_pages(eddy_channel_t *ch, server_t *s)
{
    static const eddy_ws_config_t ws = {.path = "/ws"};
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_http_request_decoder(NULL),
                                  eddy_http_aggregator(0), eddy_http_response_encoder(),
                                  eddy_ws_server_handshaker(&ws),
                                  eddy_handler("stats", &page_ops, s, NULL));
}

/* As the README showed it before #28: no response encoder. */
static int init_ws_pages_no_encoder(eddy_channel_t *ch, server_t *s)
{
    static const eddy_ws_config_t ws = {.path = "/ws"};
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_http_request_decoder(NULL),
                                  eddy_http_aggregator(0), eddy_ws_server_handshaker(&ws),
                                  eddy_handler("stats", &page_ops, s, NULL));
}

static size_t get_stats(server_t *s, char *buf, size_t cap)
{
    int fd = client_connect(&s->addr);
    const char *req = "GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    send_all(fd, req, strlen(req));
    size_t n = read_to_end(fd, buf, cap);
    buf[n] = '\0';
    close(fd);
    return n;
}

static void test_ws_pipeline_serves_a_page(void **state)
{
    (void)state;
    server_t s = {0};
    eddy_channel_config_init(&s.child);
    server_start(&s, init_ws_pages);
    char buf[4096];
    get_stats(&s, buf, sizeof(buf) - 1);
    assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(buf, "stats: 1\n"));
    server_stop(&s);
}

/* Without the encoder the response cannot reach the socket: the error is raised and logged,
 * and the client sees the connection close instead of waiting for ever. */
static void test_ws_pipeline_without_encoder_says_so(void **state)
{
    (void)state;
    log_capture();
    server_t s = {0};
    eddy_channel_config_init(&s.child);
    server_start(&s, init_ws_pages_no_encoder);
    char buf[4096];
    assert_int_equal(get_stats(&s, buf, sizeof(buf) - 1), 0);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    server_stop(&s);
    if (warnings_with("an HTTP response", "'stats'", "ENOTSUP", "encoder", NULL) != 1) {
        log_print();
        fail_msg("wanted one warning naming the handler, the response and the missing encoder");
    }
    log_release();
}

/* ---------------------------------------------------------------------------------------
 * A hostile WebSocket connection: a protocol error, then a reset, at once.
 */

static void ws_app_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_msg_release(msg);
}

static const eddy_handler_ops_t ws_app_ops = {
    .name = "ws_app",
    .sharable = true,
    .channel_read = ws_app_read,
    .channel_inactive = note_inactive,
    .exception_caught = note_exception,
};

static const eddy_handler_ops_t ws_app_quiet_ops = {
    .name = "ws_app",
    .sharable = true,
    .channel_read = ws_app_read,
    .channel_inactive = note_inactive,
};

static int init_ws(eddy_channel_t *ch, server_t *s)
{
    static const eddy_ws_config_t ws = {.path = "/ws"};
    return EDDY_PIPELINE_ADD_LAST(
        eddy_channel_pipeline(ch), eddy_http_request_decoder(NULL), eddy_http_aggregator(0),
        eddy_http_response_encoder(), eddy_ws_server_handshaker(&ws),
        eddy_handler("ws_app", s->skip_exceptions ? &ws_app_quiet_ops : &ws_app_ops, s, NULL));
}

/* Upgrade, then an unmasked frame (a protocol error from a client) and a reset behind it. */
static void hostile_ws_client(server_t *s)
{
    int fd = client_connect(&s->addr);
    const char *up = "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n";
    send_all(fd, up, strlen(up));
    char buf[1024];
    size_t got = 0;
    while (got < 4 || memcmp(buf + got - 4, "\r\n\r\n", 4) != 0) {
        ssize_t r = recv(fd, buf + got, 1, 0);
        assert_true(r == 1);
        got++;
        assert_true(got < sizeof(buf));
    }
    assert_memory_equal(buf, "HTTP/1.1 101", 12);
    const unsigned char bad[] = {0x81, 0x05, 'h', 'e', 'l', 'l', 'o'}; /* not masked */
    send_all(fd, bad, sizeof(bad));
    struct linger l = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    close(fd); /* a reset */
}

#define HOSTILE_CONNECTIONS 40

static void test_ws_protocol_error_with_reset_logs_nothing_unhandled(void **state)
{
    (void)state;
    log_capture();
    server_t s = {0};
    eddy_channel_config_init(&s.child);
    server_start(&s, init_ws);
    for (int i = 0; i < HOSTILE_CONNECTIONS; i++) {
        hostile_ws_client(&s);
    }
    WAIT_FOR(atomic_load(&s.closed) == HOSTILE_CONNECTIONS);
    server_stop(&s);
    /* The handler saw each connection's error and closed: nothing reached the tail. */
    if (warnings_with("channel", NULL) != 0) {
        log_print();
        fail_msg("an error the handler had seen was logged as unhandled");
    }
    log_release();
}

static void test_ws_protocol_error_nobody_handles_logs_once_per_connection(void **state)
{
    (void)state;
    log_capture();
    server_t s = {.skip_exceptions = true};
    eddy_channel_config_init(&s.child);
    server_start(&s, init_ws);
    for (int i = 0; i < HOSTILE_CONNECTIONS; i++) {
        hostile_ws_client(&s);
    }
    WAIT_FOR(atomic_load(&s.closed) == HOSTILE_CONNECTIONS);
    server_stop(&s);
    size_t n = warnings_with("channel", NULL);
    if (n > HOSTILE_CONNECTIONS) {
        log_print();
        fail_msg("%zu lines for %d connections: more than one each", n, HOSTILE_CONNECTIONS);
    }
    log_release();
}

/* ---------------------------------------------------------------------------------------
 * The stall watchdog names the handler that held the loop, and its channel.
 */

static void stall_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_msg_release(msg);
    int64_t until = eddy_now_ns() + 400 * 1000000LL; /* a blocking call in a handler */
    while (eddy_now_ns() < until) {
    }
    eddy_ctx_close(ctx, NULL);
}

static const eddy_handler_ops_t staller_ops = {
    .name = "staller",
    .sharable = true,
    .channel_read = stall_read,
    .channel_inactive = note_inactive,
};

static int init_staller(eddy_channel_t *ch, server_t *s)
{
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_line_decoder(1024, false, false),
                                  eddy_handler("staller", &staller_ops, s, NULL));
}

static void test_watchdog_names_the_stalled_handler(void **state)
{
    (void)state;
    log_capture();
    server_t s = {.stall_threshold_ns = 50 * 1000000LL};
    eddy_channel_config_init(&s.child);
    server_start(&s, init_staller);
    int fd = client_connect(&s.addr);
    send_all(fd, "hold\n", 5);
    WAIT_FOR(atomic_load(&s.closed) == 1);
    close(fd);
    char id[64];
    snprintf(id, sizeof(id), "channel %llu ", (unsigned long long)atomic_load(&s.child_id));
    WAIT_FOR(warnings_with("stalled", "handler 'staller'", id, NULL) == 1);
    server_stop(&s);
    log_release();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap_with_a_pipelining_half_closing_client_leaves_no_hole),
        cmocka_unit_test(test_cap_failure_nobody_handles_is_logged_once),
        cmocka_unit_test(test_cap_with_pause_read_answers_everything),
        cmocka_unit_test(test_pause_read_bounds_replies_larger_than_requests),
        cmocka_unit_test(test_pause_read_holds_input_behind_held_messages),
        cmocka_unit_test(test_ws_pipeline_serves_a_page),
        cmocka_unit_test(test_ws_pipeline_without_encoder_says_so),
        cmocka_unit_test(test_ws_protocol_error_with_reset_logs_nothing_unhandled),
        cmocka_unit_test(test_ws_protocol_error_nobody_handles_logs_once_per_connection),
        cmocka_unit_test(test_watchdog_names_the_stalled_handler),
    };
    return cmocka_run_group_tests_name("pipeline.no_loss", tests, NULL, NULL);
}
