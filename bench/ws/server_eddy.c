/*
 * ws_server_eddy: the eddy subject of bench/ws, a WebSocket server on one loop (accept and
 * I/O), kept to what the benchmark measures: the HTTP request decoder, the aggregator and the
 * server handshaker of websocket.h on /ws, then one handler of ours. Permessage-deflate is
 * off, as in the Netty baseline (bench/ws/java/NettyWsServer.java).
 *
 * Modes:
 *   (default)            echo: each text or binary message goes back to its sender as the
 *                        same frame message, one flush per read batch.
 *   --broadcast          each message goes to every upgraded connection (the sender too) by
 *                        one eddy_channel_group_write() of the frame message, as an
 *                        application writes it: each member's frame encoder writes the
 *                        header into a buffer of its own, and the payload behind it (under
 *                        256 bytes) or as a retained duplicate beside it (256 and over).
 *   --broadcast-encoded  the same, but the frame is encoded once into a buffer and the group
 *                        writes that buffer: each member gets a retained duplicate, the frame
 *                        encoder lets buffers through, and no member copies a byte.
 *
 * In the broadcast modes a handler nearest the socket ("tap") sees every buffer on its way
 * out and counts the bytes that lie in the memory of the broadcast they came from (shared)
 * and the bytes that do not (written for the member: headers, and payload copied on the
 * way); SIGTERM prints the counts as one JSON line, {"ws_server":"eddy",...,
 * "bytes_copied":...}, and ends the process.
 *
 *   ws_server_eddy [--port N] [--cpu N] [--broadcast | --broadcast-encoded]
 *
 * Prints "ws_server_eddy: listening on PORT" once bound.
 */
#include <eddy/eddy.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MODE_ECHO, MODE_BROADCAST, MODE_BROADCAST_ENCODED };

static int mode = MODE_ECHO;
static eddy_channel_group_t *members;

/* The counts of the broadcast modes. Written on the loop thread only, read by main at the end
 * (relaxed: main reads them once the client is done, nothing else depends on them). */
static _Atomic uint64_t broadcasts, buffers_out, bytes_shared, bytes_copied, bytes_encoded;

/* The memory of the last broadcast, kept (one reference) until the next one, so nothing else
 * can be allocated there while members still write it and the tap's test stays exact. */
static eddy_buf_t *last_src;

static void tap_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_buf_t *b = eddy_buf_of(msg);
    size_t n = b != NULL ? eddy_buf_readable(b) : 0;
    /* The 101 answer passes here too, before any broadcast: it is not a member's write. */
    if (b != NULL && last_src != NULL &&
        !(n >= 5 && memcmp(eddy_buf_read_ptr(b), "HTTP/", 5) == 0)) {
        const uint8_t *lo = eddy_buf_read_ptr(last_src), *hi = lo + eddy_buf_readable(last_src);
        const uint8_t *at = eddy_buf_read_ptr(b);
        atomic_fetch_add_explicit(&buffers_out, 1, memory_order_relaxed);
        if (at >= lo && at + n <= hi) {
            atomic_fetch_add_explicit(&bytes_shared, n, memory_order_relaxed);
        } else {
            atomic_fetch_add_explicit(&bytes_copied, n, memory_order_relaxed);
        }
    } else if (msg->type == EDDY_MSG_COMPOSITE && last_src != NULL) {
        /* Not made by eddy's WebSocket encoder today; counted as copies, to be looked at. */
        atomic_fetch_add_explicit(&bytes_copied, eddy_composite_readable(eddy_composite_of(msg)),
                                  memory_order_relaxed);
    }
    eddy_ctx_write(ctx, msg, p);
}

static const eddy_handler_ops_t tap_ops = {
    .name = "tap",
    .sharable = true,
    .write = tap_write,
};

static void ws_handshake(eddy_ctx_t *ctx, int event, void *data)
{
    if (event == EDDY_EVENT_WS_HANDSHAKE && mode != MODE_ECHO) {
        int err = eddy_channel_group_add(members, eddy_ctx_channel(ctx));
        if (err != 0) {
            fprintf(stderr, "ws_server_eddy: group add: %s\n", eddy_strerror(err));
        }
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

/* The frame encoded once into a new buffer: header, then payload (servers do not mask). */
static eddy_buf_t *encode_once(const eddy_ws_frame_t *f)
{
    size_t n = eddy_buf_readable(f->payload);
    eddy_buf_t *b = eddy_buf_new(14 + n);
    if (b == NULL) {
        return NULL;
    }
    eddy_buf_write_u8(b, (uint8_t)(0x80 | f->opcode));
    if (n < 126) {
        eddy_buf_write_u8(b, (uint8_t)n);
    } else if (n <= 0xffff) {
        eddy_buf_write_u8(b, 126);
        eddy_buf_write_u16(b, (uint16_t)n);
    } else {
        eddy_buf_write_u8(b, 127);
        eddy_buf_write_u64(b, (uint64_t)n);
    }
    eddy_buf_write_bytes(b, eddy_buf_read_ptr(f->payload), n);
    return b;
}

static void broadcast(eddy_ctx_t *ctx, eddy_ws_frame_t *f)
{
    eddy_msg_t *out = eddy_ws_frame_msg(f);
    eddy_buf_t *src = f->payload;
    if (mode == MODE_BROADCAST_ENCODED) {
        src = encode_once(f);
        eddy_msg_release(out);
        if (src == NULL) {
            eddy_ctx_close(ctx, NULL);
            return;
        }
        atomic_fetch_add_explicit(&bytes_encoded, eddy_buf_readable(src), memory_order_relaxed);
        out = eddy_buf_msg(src);
    }
    if (last_src != NULL) {
        eddy_buf_release(last_src);
    }
    last_src = eddy_buf_retain(src);
    atomic_fetch_add_explicit(&broadcasts, 1, memory_order_relaxed);
    eddy_future_t *done = eddy_channel_group_write(members, out, NULL, NULL, true);
    if (done != NULL) {
        eddy_future_release(done);
    }
}

static void ws_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_ws_frame_t *f = eddy_ws_frame_of(msg);
    if (f == NULL || (f->opcode != EDDY_WS_TEXT && f->opcode != EDDY_WS_BINARY)) {
        eddy_msg_release(msg); /* the peer's close: the protocol handler answers it */
        return;
    }
    if (mode == MODE_ECHO) {
        eddy_ctx_write(ctx, msg, NULL); /* the same frame message goes back */
        return;
    }
    broadcast(ctx, f);
}

static void ws_read_complete(eddy_ctx_t *ctx)
{
    if (mode == MODE_ECHO) {
        eddy_ctx_flush(ctx); /* one write per read batch */
    }
}

static void ws_exception(eddy_ctx_t *ctx, int err)
{
    (void)err; /* the load generators close with resets */
    eddy_ctx_close(ctx, NULL);
}

static const eddy_handler_ops_t ws_ops = {
    .name = "bench",
    .sharable = true,
    .channel_read = ws_read,
    .channel_read_complete = ws_read_complete,
    .user_event_triggered = ws_handshake,
    .exception_caught = ws_exception,
};

static int init_child(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    eddy_ws_config_t ws = {.path = "/ws"};
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    if (mode != MODE_ECHO) {
        int err = eddy_pipeline_add_last(p, "tap", &tap_ops, NULL, NULL);
        if (err != 0) {
            return err;
        }
    }
    return EDDY_PIPELINE_ADD_LAST(p, eddy_http_request_decoder(NULL), eddy_http_aggregator(0),
                                  eddy_ws_server_handshaker(&ws),
                                  eddy_handler("bench", &ws_ops, NULL, NULL));
}

static void usage(void)
{
    fprintf(stderr, "usage: ws_server_eddy [--port N] [--cpu N] "
                    "[--broadcast | --broadcast-encoded]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int port = 8008, cpu = -1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--broadcast") == 0) {
            mode = MODE_BROADCAST;
        } else if (strcmp(argv[i], "--broadcast-encoded") == 0) {
            mode = MODE_BROADCAST_ENCODED;
        } else if (strcmp(argv[i], "--port") == 0 && v != NULL && atoi(v) > 0 && atoi(v) < 65536) {
            port = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--cpu") == 0 && v != NULL && atoi(v) >= 0) {
            cpu = atoi(argv[++i]);
        } else {
            usage();
        }
    }
    if (cpu >= 0) {
        /* Before the loop thread starts, so it inherits the CPU. */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) {
            perror("ws_server_eddy: sched_setaffinity");
            return 1;
        }
    }
    /* SIGTERM and SIGINT are taken by sigwait() below; the loop thread inherits the mask. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    members = eddy_channel_group_new("ws-members");
    eddy_loop_options_t opts = {.name = "ws-loop", .cpu = -1};
    eddy_loop_group_t *group = eddy_loop_group_new(1, &opts);
    eddy_server_bootstrap_t *b = eddy_server_bootstrap_new();
    if (members == NULL || group == NULL || b == NULL) {
        fprintf(stderr, "ws_server_eddy: out of memory or threads\n");
        return 1;
    }
    eddy_server_bootstrap_group(b, group, NULL);
    eddy_server_bootstrap_option(b, EDDY_SO_BACKLOG, 1024);
    eddy_server_bootstrap_child_option(b, EDDY_TCP_NODELAY, 1);
    eddy_server_bootstrap_child_init(b, init_child, NULL);
    eddy_future_t *bound = eddy_server_bootstrap_bind(b, "127.0.0.1", (uint16_t)port);
    if (bound == NULL || eddy_future_await(bound, -1) != 0 || eddy_future_error(bound) != 0) {
        fprintf(stderr, "ws_server_eddy: cannot listen on port %d: %s\n", port,
                bound != NULL ? eddy_strerror(eddy_future_error(bound)) : "out of memory");
        return 1;
    }
    eddy_future_release(bound);
    printf("ws_server_eddy: listening on %d\n", port);
    fflush(stdout);
    int sig;
    sigwait(&stop, &sig);
    if (mode != MODE_ECHO) {
        eddy_group_counters_t gc;
        eddy_channel_group_counters(members, &gc);
        printf("{\"ws_server\":\"eddy\",\"mode\":\"%s\",\"broadcasts\":%llu,"
               "\"member_writes\":%llu,\"buffers_out\":%llu,\"bytes_shared\":%llu,"
               "\"bytes_copied\":%llu,\"bytes_encoded\":%llu}\n",
               mode == MODE_BROADCAST ? "broadcast" : "broadcast_encoded",
               (unsigned long long)atomic_load(&broadcasts), (unsigned long long)gc.written,
               (unsigned long long)atomic_load(&buffers_out),
               (unsigned long long)atomic_load(&bytes_shared),
               (unsigned long long)atomic_load(&bytes_copied),
               (unsigned long long)atomic_load(&bytes_encoded));
        fflush(stdout);
    }
    /* Nothing to save: the loop and its channels go with the process. */
    _exit(0);
}
