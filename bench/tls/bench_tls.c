/*
 * bench/tls: TLS echo throughput and full handshakes per second. One program, two roles:
 *
 *   bench_tls server PORT CERT KEY
 *       an eddy TLS echo server on 127.0.0.1:PORT, one loop (listener and connections), until
 *       SIGINT or SIGTERM; prints "listening on 127.0.0.1:PORT" once it is.
 *   bench_tls load stream|handshakes PORT SECONDS WARMUP [CONNECTIONS] [SIZE]
 *       the load generator, one eddy loop with OpenSSL clients, against any TLS echo server:
 *       stream: CONNECTIONS (16) connections each keep WINDOW writes of SIZE (64 KiB) bytes in
 *       flight and count the bytes echoed; handshakes: CONNECTIONS connections in a loop of
 *       connect, full handshake (no resumption), one byte echoed, close (with a reset, so no
 *       TIME_WAIT piles up). After WARMUP seconds, it measures for SECONDS and prints
 *       "RESULT <case> <per second> <protocol> <cipher>".
 *
 * bench/tls/run.sh runs the eddy server and Netty's (java/TlsEchoServer.java) in turn against
 * the same load generator. The load generator does not verify certificates (both servers
 * present the same one), so its own CPU goes to the handshake and the records.
 */
#include <eddy/eddy.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WINDOW 4 /* writes in flight per streaming connection */

static void die(const char *what, int err)
{
    fprintf(stderr, "bench_tls: %s: %s\n", what, eddy_strerror(err));
    exit(1);
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------------------------------
 * The server
 */

static void echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_ctx_write(ctx, msg, NULL);
}

static void echo_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
}

static void echo_exception(eddy_ctx_t *ctx, int err)
{
    (void)err; /* resets from the handshake loop's clients */
    eddy_ctx_close(ctx, NULL);
}

static const eddy_handler_ops_t echo_ops = {
    .name = "echo",
    .sharable = true,
    .channel_read = echo_read,
    .channel_read_complete = echo_read_complete,
    .exception_caught = echo_exception,
};

static int server_init(eddy_channel_t *ch, void *arg)
{
    int rc = eddy_tls_add(ch, arg, NULL, NULL);
    return rc != 0
               ? rc
               : eddy_pipeline_add_last(eddy_channel_pipeline(ch), "echo", &echo_ops, NULL, NULL);
}

static int run_server(uint16_t port, const char *cert, const char *key)
{
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    eddy_tls_context_t *tls = eddy_tls_context_new(EDDY_TLS_SERVER);
    int rc = tls != NULL ? eddy_tls_context_use_certificate_file(tls, cert, key) : EDDY_ENOMEM;
    if (rc != 0) {
        fprintf(stderr, "bench_tls: %s\n", tls != NULL ? eddy_tls_context_error(tls) : "");
        return 1;
    }
    eddy_loop_group_t *g = eddy_loop_group_new(1, NULL);
    eddy_addr_t addr;
    eddy_addr_ip(&addr, "127.0.0.1", port);
    eddy_channel_config_t child;
    eddy_channel_config_init(&child);
    eddy_channel_config_set(&child, EDDY_PAUSE_READ_WHEN_UNWRITABLE, 1);
    eddy_listen_options_t o = {
        .loop = eddy_loop_group_next(g),
        .child_init = server_init,
        .child_arg = tls,
        .child_config = &child,
    };
    eddy_future_t *f = eddy_channel_listen(&addr, &o);
    if (f == NULL || eddy_future_await(f, -1) != 0 || eddy_future_error(f) != 0) {
        die("listen", f != NULL ? eddy_future_error(f) : EDDY_ENOMEM);
    }
    eddy_channel_t *listener = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    printf("listening on 127.0.0.1:%u\n", port);
    fflush(stdout);
    int sig;
    sigwait(&stop, &sig);
    eddy_channel_close(listener, NULL);
    eddy_channel_release(listener);
    eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000), 5000);
    eddy_loop_group_free(g);
    eddy_tls_context_release(tls);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The load generator
 */

typedef struct load_s {
    eddy_loop_t *loop;
    eddy_addr_t addr;
    eddy_tls_context_t *tls;
    size_t size;
    bool handshakes;
    _Atomic uint64_t count; /* bytes echoed (stream) or handshakes done */
    _Atomic bool stopping;
    _Atomic int errors;
    char protocol[32], cipher[96];
    _Atomic bool described;
} load_t;

typedef struct conn_s {
    load_t *load;
    size_t got; /* bytes back since the last chunk sent (stream) */
} conn_t;

static void connect_one(conn_t *c);

static void send_chunk(eddy_ctx_t *ctx, conn_t *c)
{
    eddy_buf_t *b = eddy_buf_alloc(eddy_ctx_alloc(ctx), c->load->size, c->load->size);
    if (b == NULL) {
        eddy_ctx_close(ctx, NULL);
        return;
    }
    memset(eddy_buf_write_ptr(b), 'x', c->load->size);
    eddy_buf_produce(b, c->load->size);
    eddy_ctx_write(ctx, eddy_buf_msg(b), NULL);
}

static void load_event(eddy_ctx_t *ctx, int event, void *data)
{
    conn_t *c = eddy_ctx_state(ctx);
    load_t *l = c->load;
    const eddy_tls_handshake_event_t *hs = data;
    if (event != EDDY_EVENT_TLS_HANDSHAKE) {
        eddy_ctx_fire_user_event(ctx, event, data);
        return;
    }
    if (hs->error != 0) {
        /* Those the final shutdown cuts short are not worth a word. */
        if (!atomic_load(&l->stopping) && atomic_fetch_add(&l->errors, 1) == 0) {
            fprintf(stderr, "bench_tls: handshake failed: %s\n", hs->reason);
        }
        return;
    }
    if (!atomic_exchange(&l->described, true)) {
        snprintf(l->protocol, sizeof(l->protocol), "%s", hs->protocol);
        snprintf(l->cipher, sizeof(l->cipher), "%s", hs->cipher);
    }
    if (l->handshakes) {
        eddy_ctx_write_and_flush(ctx, eddy_buf_msg(eddy_buf_from("!", 1)), NULL);
        return;
    }
    for (int i = 0; i < WINDOW; i++) {
        send_chunk(ctx, c);
    }
    eddy_ctx_flush(ctx);
}

static void load_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    conn_t *c = eddy_ctx_state(ctx);
    load_t *l = c->load;
    size_t n = eddy_buf_readable(eddy_buf_of(msg));
    eddy_msg_release(msg);
    if (l->handshakes) {
        atomic_fetch_add_explicit(&l->count, 1, memory_order_relaxed);
        eddy_ctx_close(ctx, NULL); /* inactive connects the next */
        return;
    }
    atomic_fetch_add_explicit(&l->count, n, memory_order_relaxed);
    c->got += n;
    bool sent = false;
    while (c->got >= l->size && !atomic_load_explicit(&l->stopping, memory_order_relaxed)) {
        c->got -= l->size;
        send_chunk(ctx, c);
        sent = true;
    }
    if (sent) {
        eddy_ctx_flush(ctx);
    }
}

static void load_inactive(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (c->load->handshakes && !atomic_load(&c->load->stopping)) {
        connect_one(c);
    }
    eddy_ctx_fire_channel_inactive(ctx);
}

static void load_exception(eddy_ctx_t *ctx, int err)
{
    (void)err;
    eddy_ctx_close(ctx, NULL);
}

static const eddy_handler_ops_t load_ops = {
    .name = "load",
    .channel_inactive = load_inactive,
    .channel_read = load_read,
    .user_event_triggered = load_event,
    .exception_caught = load_exception,
};

static int load_init(eddy_channel_t *ch, void *arg)
{
    conn_t *c = arg;
    c->got = 0;
    int rc = eddy_tls_add(ch, c->load->tls, NULL, NULL);
    return rc != 0 ? rc
                   : eddy_pipeline_add_last(eddy_channel_pipeline(ch), "load", &load_ops, c, NULL);
}

static void connect_later(eddy_timer_t *t, void *arg)
{
    eddy_timer_release(t);
    connect_one(arg);
}

/* A failed connect (the server is busy) is tried again a millisecond later. */
static void connected(eddy_future_t *f, void *arg)
{
    conn_t *c = arg;
    int err = eddy_future_error(f);
    eddy_future_release(f);
    if (err != 0 && !atomic_load(&c->load->stopping)) {
        eddy_loop_schedule(c->load->loop, 1, connect_later, c);
    }
}

static void connect_one(conn_t *c)
{
    static eddy_channel_config_t config;
    static bool made;
    if (!made) {
        /* Reset at close: a handshake loop would otherwise fill the port range with
         * TIME_WAIT sockets. */
        eddy_channel_config_init(&config);
        eddy_channel_config_set(&config, EDDY_SO_LINGER, c->load->handshakes ? 0 : -1);
        made = true;
    }
    eddy_future_t *f = eddy_channel_connect(c->load->loop, &c->load->addr, &config, load_init, c);
    if (f != NULL && eddy_future_add_listener(f, connected, c) != 0) {
        eddy_future_release(f);
    }
}

static void start_all(void *arg)
{
    conn_t *conns = arg;
    for (conn_t *c = conns; c->load != NULL; c++) {
        connect_one(c);
    }
}

static int run_load(bool handshakes, uint16_t port, double seconds, double warmup, unsigned nconns,
                    size_t size)
{
    load_t l = {.size = size, .handshakes = handshakes};
    eddy_addr_ip(&l.addr, "127.0.0.1", port);
    l.tls = eddy_tls_context_new(EDDY_TLS_CLIENT);
    if (l.tls == NULL || eddy_tls_context_verify(l.tls, EDDY_TLS_VERIFY_NONE) != 0 ||
        eddy_tls_context_session_resumption(l.tls, false) != 0) {
        die("tls context", EDDY_ENOMEM);
    }
    eddy_loop_group_t *g = eddy_loop_group_new(1, NULL);
    l.loop = eddy_loop_group_next(g);
    conn_t *conns = calloc(nconns + 1, sizeof(*conns)); /* ends with an empty one */
    for (unsigned i = 0; i < nconns; i++) {
        conns[i].load = &l;
    }
    eddy_loop_execute(l.loop, start_all, conns);
    sleep_s(warmup);
    uint64_t c0 = atomic_load(&l.count);
    int64_t t0 = eddy_now_ns();
    sleep_s(seconds);
    uint64_t c1 = atomic_load(&l.count);
    int64_t t1 = eddy_now_ns();
    atomic_store(&l.stopping, true);
    double rate = (double)(c1 - c0) / ((double)(t1 - t0) / 1e9);
    printf("RESULT %s %.6g %s %s\n", handshakes ? "handshakes" : "stream_64k", rate,
           l.protocol[0] ? l.protocol : "-", l.cipher[0] ? l.cipher : "-");
    fflush(stdout);
    /* The loop closes every connection as it shuts down. */
    eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000), 5000);
    eddy_loop_group_free(g);
    eddy_tls_context_release(l.tls);
    free(conns);
    return c1 > c0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "server") == 0) {
        return run_server((uint16_t)atoi(argv[2]), argv[3], argv[4]);
    }
    if (argc >= 6 && strcmp(argv[1], "load") == 0) {
        bool hs = strcmp(argv[2], "handshakes") == 0;
        unsigned conns = argc > 6 ? (unsigned)atoi(argv[6]) : 16;
        size_t size = argc > 7 ? (size_t)atol(argv[7]) : 65536;
        return run_load(hs, (uint16_t)atoi(argv[3]), atof(argv[4]), atof(argv[5]),
                        conns > 0 ? conns : 16, size > 0 ? size : 65536);
    }
    fprintf(stderr, "usage: bench_tls server PORT CERT KEY\n"
                    "       bench_tls load stream|handshakes PORT SECONDS WARMUP "
                    "[CONNECTIONS] [SIZE]\n"
                    "(bench/tls/run.sh BUILD_DIR runs the comparison with Netty)\n");
    return 2;
}
