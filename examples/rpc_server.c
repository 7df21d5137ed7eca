/*
 * eddy-rpc-server: a small RPC server over length-prefixed frames (rpc_proto.h), wire
 * compatible with Netty's LengthFieldBasedFrameDecoder and LengthFieldPrepender.
 *
 *   eddy-rpc-server [--host ADDR] [--port N] [--threads N] [--offload-threads N]
 *                   [--max-frame N] [--request-timeout S]
 *
 * "echo" and "add" are answered on the I/O loop. "sleep" blocks, so it runs on an offload
 * carrier, keyed by the channel id: one connection's sleeps run one after another, in the
 * order they came, and different connections' sleeps run side by side on the carrier's
 * threads. The loop never waits for them: a carrier partition that is full answers status 3
 * rather than block the loop. Stopping does not wait for them either: sleeps under way end
 * at once and, like those still queued, are answered with status 3.
 *
 * A frame longer than --max-frame closes its connection; a malformed payload gets status 2
 * and the connection goes on (one too short to hold an id is closed). So does a frame that
 * has not arrived whole --request-timeout after its first bytes (the library's message
 * deadline: a client trickling a byte now and then cannot hold a connection for ever).
 * Reading from a connection pauses while its replies are not drained. SIGINT or SIGTERM stop
 * it gracefully.
 */
#include "rpc_proto.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Longer sleeps are cut to this, so that one call cannot hold a carrier thread for long. */
#define MAX_SLEEP_MS 10000u

static _Atomic uint64_t errors_seen;
static _Atomic uint64_t calls_served;

/* Set on SIGINT/SIGTERM, under stop_lock, and stop_cond broadcast: sleeps wait on it (with a
 * deadline of the monotonic clock), so that stopping ends them at once. */
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cond;
static bool stopping;

typedef struct sleep_call_s {
    eddy_channel_t *ch; /* retained until the reply is written */
    uint64_t id;
    uint32_t ms;
} sleep_call_t;

static void rpc_exception(eddy_ctx_t *ctx, int err)
{
    /* Too-long frames (EDDY_ETOOLONGFRAME), short payloads, resets: close. Say so now and
     * then. */
    uint64_t n = atomic_fetch_add(&errors_seen, 1) + 1;
    if ((n & (n - 1)) == 0) {
        fprintf(stderr, "eddy-rpc-server: closing a connection: %s (%llu so far)\n",
                eddy_strerror(err), (unsigned long long)n);
    }
    eddy_ctx_close(ctx, NULL);
}

/* A reply payload: id, status, then n bytes of body. NULL without memory. Any thread. */
static eddy_buf_t *reply_new(eddy_allocator_t *a, uint64_t id, uint8_t status, const void *body,
                             size_t n)
{
    eddy_buf_t *b = eddy_buf_alloc(a, RPC_HEADER + n, EDDY_BUF_DEFAULT_MAX_CAPACITY);
    if (b == NULL) {
        return NULL;
    }
    eddy_buf_write_u64(b, id);
    eddy_buf_write_u8(b, status);
    if (n > 0) {
        eddy_buf_write_bytes(b, body, n);
    }
    return b;
}

/* Queue a reply on the loop; channel_read_complete flushes the batch. */
static void reply(eddy_ctx_t *ctx, uint64_t id, uint8_t status, const void *body, size_t n)
{
    eddy_buf_t *b = reply_new(eddy_ctx_alloc(ctx), id, status, body, n);
    if (b == NULL) {
        rpc_exception(ctx, EDDY_ENOMEM); /* unanswered, the client would wait for ever */
        return;
    }
    atomic_fetch_add_explicit(&calls_served, 1, memory_order_relaxed);
    eddy_ctx_write(ctx, eddy_buf_msg(b), NULL);
}

/* Wait ms, or less when the server stops first: true when the whole time passed. */
static bool sleep_unless_stopped(uint32_t ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&stop_lock);
    int rc = 0;
    while (!stopping && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&stop_cond, &stop_lock, &until);
    }
    pthread_mutex_unlock(&stop_lock);
    return rc == ETIMEDOUT;
}

/* On a carrier thread: sleep, then answer. The write hops to the channel's loop. Once the
 * server is stopping, a sleep under way ends and one not begun does not begin: both are
 * answered with status 3 at once, so that shutting down waits for no sleep. */
static int sleep_run(void *arg, void **result)
{
    sleep_call_t *sc = arg;
    uint8_t status = sleep_unless_stopped(sc->ms) ? RPC_OK : RPC_SERVER_ERROR;
    eddy_buf_t *b = reply_new(NULL, sc->id, status, NULL, 0);
    if (b != NULL) {
        atomic_fetch_add_explicit(&calls_served, 1, memory_order_relaxed);
        eddy_channel_write_and_flush(sc->ch, eddy_buf_msg(b), NULL);
    } else {
        eddy_channel_close(sc->ch, NULL);
    }
    eddy_channel_release(sc->ch);
    free(sc);
    *result = NULL;
    return 0;
}

static void sleep_call(eddy_ctx_t *ctx, eddy_carrier_t *carrier, uint64_t id, uint32_t ms)
{
    sleep_call_t *sc = malloc(sizeof(*sc));
    if (sc == NULL) {
        reply(ctx, id, RPC_SERVER_ERROR, NULL, 0);
        return;
    }
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    *sc = (sleep_call_t){.ch = eddy_channel_retain(ch), .id = id, .ms = ms};
    eddy_future_t *f = eddy_carrier_execute(carrier, eddy_channel_id(ch), sleep_run, sc);
    /* sleep_run always succeeds, so a future already failed means it was never queued (the
     * partition is full, or the carrier stopped) and the call is still ours. */
    if (f == NULL || (eddy_future_is_done(f) && eddy_future_error(f) < 0)) {
        eddy_channel_release(sc->ch);
        free(sc);
        reply(ctx, id, RPC_SERVER_ERROR, NULL, 0);
    }
    eddy_future_release(f);
}

static void dispatch(eddy_ctx_t *ctx, uint64_t id, const uint8_t *method, size_t mlen,
                     const uint8_t *body, size_t n)
{
    if (mlen == 4 && memcmp(method, "echo", 4) == 0) {
        reply(ctx, id, RPC_OK, body, n);
    } else if (mlen == 3 && memcmp(method, "add", 3) == 0) {
        if (n != 16) {
            reply(ctx, id, RPC_BAD_REQUEST, NULL, 0);
            return;
        }
        /* Unsigned, so that overflow wraps instead of being undefined. */
        uint64_t sum = rpc_get_u64(body) + rpc_get_u64(body + 8);
        uint8_t out[8];
        for (int i = 0; i < 8; i++) {
            out[i] = (uint8_t)(sum >> (56 - 8 * i));
        }
        reply(ctx, id, RPC_OK, out, sizeof(out));
    } else if (mlen == 5 && memcmp(method, "sleep", 5) == 0) {
        if (n != 4) {
            reply(ctx, id, RPC_BAD_REQUEST, NULL, 0);
            return;
        }
        uint32_t ms =
            (uint32_t)body[0] << 24 | (uint32_t)body[1] << 16 | (uint32_t)body[2] << 8 | body[3];
        sleep_call(ctx, eddy_ctx_state(ctx), id, ms < MAX_SLEEP_MS ? ms : MAX_SLEEP_MS);
    } else {
        reply(ctx, id, RPC_UNKNOWN_METHOD, NULL, 0);
    }
}

static void rpc_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_buf_t *b = eddy_buf_of(msg); /* the framer emits buffers, length field stripped */
    size_t n = b != NULL ? eddy_buf_readable(b) : 0;
    if (n < 8) {
        /* Not even an id to answer to: the stream cannot be trusted. */
        eddy_msg_release(msg);
        rpc_exception(ctx, EDDY_EDECODE);
        return;
    }
    const uint8_t *p = eddy_buf_read_ptr(b);
    uint64_t id = rpc_get_u64(p);
    if (n < RPC_HEADER || RPC_HEADER + (size_t)p[8] > n) {
        reply(ctx, id, RPC_BAD_REQUEST, NULL, 0);
    } else {
        size_t mlen = p[8];
        dispatch(ctx, id, p + RPC_HEADER, mlen, p + RPC_HEADER + mlen, n - RPC_HEADER - mlen);
    }
    eddy_msg_release(msg);
}

static void rpc_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx); /* one gathering write per read batch */
}

static const eddy_handler_ops_t rpc_ops = {
    .name = "rpc",
    .sharable = true, /* the state is the carrier, shared by every connection */
    .channel_read = rpc_read,
    .channel_read_complete = rpc_read_complete,
    .exception_caught = rpc_exception,
};

typedef struct server_s {
    eddy_carrier_t *carrier;
    size_t max_frame;
    int64_t request_timeout_ms; /* 0: none */
} server_t;

static int init_child(eddy_channel_t *ch, void *arg)
{
    server_t *s = arg;
    return rpc_add_framing(eddy_channel_pipeline(ch), s->max_frame, s->request_timeout_ms,
                           eddy_handler("rpc", &rpc_ops, s->carrier, NULL));
}

static void usage(FILE *f)
{
    fprintf(f, "usage: eddy-rpc-server [--host ADDR] [--port N] [--threads N] "
               "[--offload-threads N] [--max-frame N]\n"
               "                       [--request-timeout S]\n"
               "  --host ADDR           address to listen on (default 127.0.0.1)\n"
               "  --port N              port (default 9000; 0 picks one)\n"
               "  --threads N           worker loops (default: one per CPU)\n"
               "  --offload-threads N   carrier threads running \"sleep\" (default 16)\n"
               "  --max-frame N         longest frame in bytes, length field included\n"
               "                        (default 1048576); longer ones close the connection\n"
               "  --request-timeout S   close connections whose frame has not arrived whole\n"
               "                        S seconds after its first bytes (default 30; 0: never)\n"
               "Methods: echo, add, sleep. SIGINT or SIGTERM stop it gracefully.\n");
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    unsigned long port = RPC_DEFAULT_PORT, threads = 0, offload = 16;
    unsigned long max_frame = RPC_DEFAULT_MAX_FRAME, request = 30;
    for (int i = 1; i < argc; i += 2) { /* each option and its value */
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--host") == 0 && v != NULL) {
            host = v;
        } else if (strcmp(a, "--port") == 0 && v != NULL && example_parse_uint(v, 65535, &port)) {
        } else if (strcmp(a, "--threads") == 0 && v != NULL && example_parse_uint(v, 1024, &threads)) {
        } else if (strcmp(a, "--offload-threads") == 0 && v != NULL &&
                   example_parse_uint(v, EDDY_CARRIER_MAX_THREADS, &offload) && offload > 0) {
        } else if (strcmp(a, "--max-frame") == 0 && v != NULL &&
                   example_parse_uint(v, UINT32_MAX, &max_frame) && max_frame >= 4 + RPC_HEADER) {
        } else if (strcmp(a, "--request-timeout") == 0 && v != NULL &&
                   example_parse_uint(v, 86400, &request)) {
        } else {
            usage(stderr);
            return 2;
        }
    }
    eddy_stop_signals_block(); /* before any loop thread: they inherit it */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the deadlines' clock: no jumps */
    pthread_cond_init(&stop_cond, &ca);
    pthread_condattr_destroy(&ca);

    /* One partition per carrier thread, dealt round-robin: channel ids are consecutive, so
     * connections made together land on different threads. IF_POSSIBLE: a full partition
     * fails the call instead of blocking the loop that offers it. */
    eddy_carrier_options_t co;
    eddy_carrier_options_init(&co);
    co.partitions = (unsigned)offload;
    co.consumers = (unsigned)offload;
    co.partitioner = EDDY_CARRIER_BY_KEY;
    co.assign = EDDY_CARRIER_CIRCLE;
    co.full = EDDY_CARRIER_IF_POSSIBLE;
    server_t srv = {.max_frame = max_frame, .request_timeout_ms = (int64_t)request * 1000};
    int err = eddy_carrier_new(&srv.carrier, &co, NULL, NULL);
    if (err != 0) {
        fprintf(stderr, "eddy-rpc-server: cannot start the carrier: %s\n", eddy_strerror(err));
        return 1;
    }
    eddy_loop_options_t boss_opts = {.name = "rpc-boss"};
    eddy_loop_options_t worker_opts = {.name = "rpc-worker"};
    eddy_loop_group_t *boss = eddy_loop_group_new(1, &boss_opts);
    eddy_loop_group_t *workers = eddy_loop_group_new(threads, &worker_opts);
    eddy_server_bootstrap_t *b = eddy_server_bootstrap_new();
    if (boss == NULL || workers == NULL || b == NULL) {
        fprintf(stderr, "eddy-rpc-server: out of memory or threads\n");
        return 1;
    }
    example_configure(b, boss, workers, init_child, &srv);

    eddy_channel_t *server = example_bind(b, host, port, "eddy-rpc-server");
    if (server == NULL) {
        return 1;
    }
    char addr[80];
    printf("eddy-rpc-server: listening on %s, %zu worker loops, %lu offload threads, "
           "frames up to %lu bytes (eddy %s)\n",
           eddy_addr_format(eddy_channel_local_addr(server), addr, sizeof(addr)),
           eddy_loop_group_size(workers), offload, max_frame, eddy_version());
    fflush(stdout);

    int sig = eddy_stop_signals_wait(-1);
    pthread_mutex_lock(&stop_lock);
    stopping = true;
    pthread_cond_broadcast(&stop_cond);
    pthread_mutex_unlock(&stop_lock);
    /* Stop accepting; let the sleeps under way and the queued ones be answered (status 3)
     * while the loops still run; then close the connections and end the loops. The carrier
     * is freed last: a loop may still offer to it until it ended. */
    example_unbind(server);
    eddy_carrier_shutdown(srv.carrier, EDDY_CARRIER_DRAIN);
    eddy_server_counters_t c;
    eddy_server_bootstrap_counters(b, &c);
    int rc = example_shutdown(b, workers, boss);
    eddy_carrier_free(srv.carrier);
    printf("eddy-rpc-server: stopped by %s; %llu connections served, %llu calls answered, "
           "%llu connections closed on errors\n",
           sig == SIGINT ? "SIGINT" : "SIGTERM", (unsigned long long)c.accepted,
           (unsigned long long)atomic_load(&calls_served),
           (unsigned long long)atomic_load(&errors_seen));
    return rc;
}
