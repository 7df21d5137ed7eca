/*
 * eddy-getting-started: the program docs/getting-started.md walks through, a framed server
 * and its client in one file.
 *
 *   eddy-getting-started server [PORT]       answer each frame with it upper-cased
 *   eddy-getting-started client PORT TEXT... send each TEXT as a frame, print the answers
 *
 * Frames are a 4-byte big-endian length and that many bytes (Netty's
 * LengthFieldBasedFrameDecoder(65536, 0, 4, 0, 4) with a LengthFieldPrepender(4)). The server
 * closes a connection idle for 30 s, or whose frame does not arrive whole within 5 s; it stops
 * on SIGINT or SIGTERM.
 */
#include <eddy/eddy.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The server's handler: frames in (the decoder stripped their length), frames out (the
 * prepender adds it). */
static void upper_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_buf_t *frame = eddy_buf_of(msg); /* ours: we pass it on or release it */
    size_t n = eddy_buf_readable(frame);
    const uint8_t *in = eddy_buf_read_ptr(frame);
    eddy_buf_t *out = eddy_buf_alloc(eddy_ctx_alloc(ctx), n, n); /* pooled */
    for (size_t i = 0; out != NULL && i < n; i++) {
        eddy_buf_write_u8(out, (uint8_t)toupper(in[i]));
    }
    eddy_msg_release(msg);
    if (out == NULL) {
        eddy_ctx_close(ctx, NULL);
        return;
    }
    eddy_ctx_write(ctx, eddy_buf_msg(out), NULL); /* queued: flushed once per read batch */
}

static void upper_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
}

static void upper_exception(eddy_ctx_t *ctx, int err)
{
    fprintf(stderr, "server: %s\n", eddy_strerror(err)); /* a timeout, a bad frame, a reset */
    eddy_ctx_close(ctx, NULL);
}

static const eddy_handler_ops_t upper_ops = {
    .name = "upper",
    .sharable = true, /* no state: one table serves every connection */
    .channel_read = upper_read,
    .channel_read_complete = upper_read_complete,
    .exception_caught = upper_exception,
};

static int init_child(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_read_timeout_handler(30000),
                                  eddy_message_deadline_handler(5000),
                                  eddy_length_field_decoder(65536, 0, 4, 0, 4),
                                  eddy_length_field_prepender(4),
                                  eddy_handler("upper", &upper_ops, NULL, NULL));
}

static int serve(uint16_t port)
{
    eddy_stop_signals_block(); /* before the loops start: they inherit it */
    eddy_loop_group_t *loops = eddy_loop_group_new(0, NULL); /* a loop per CPU */
    eddy_server_bootstrap_t *b = eddy_server_bootstrap_new();
    eddy_server_bootstrap_group(b, loops, NULL); /* the loops accept and serve */
    eddy_server_bootstrap_child_init(b, init_child, NULL);
    eddy_future_t *bound = eddy_server_bootstrap_bind(b, "127.0.0.1", port);
    eddy_future_await(bound, -1);
    if (eddy_future_error(bound) != 0) {
        fprintf(stderr, "server: %s\n", eddy_strerror(eddy_future_error(bound)));
        return 1;
    }
    eddy_channel_t *listener = eddy_channel_retain(eddy_future_channel(bound));
    eddy_future_release(bound);
    printf("listening on port %u\n", eddy_addr_port(eddy_channel_local_addr(listener)));
    fflush(stdout);

    eddy_stop_signals_wait(-1);
    eddy_channel_close(listener, NULL);
    eddy_channel_release(listener);
    eddy_future_await(eddy_loop_group_shutdown_gracefully(loops, 0, 2000), -1);
    eddy_server_bootstrap_free(b);
    eddy_loop_group_free(loops);
    return 0;
}

/* The client's handler: prints each answer; the last one closes the connection. */
typedef struct client_s {
    int expected;
} client_t;

static void print_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    client_t *c = eddy_ctx_state(ctx);
    eddy_buf_t *frame = eddy_buf_of(msg);
    printf("%.*s\n", (int)eddy_buf_readable(frame), (const char *)eddy_buf_read_ptr(frame));
    eddy_msg_release(msg);
    if (--c->expected == 0) {
        eddy_ctx_close(ctx, NULL);
    }
}

static const eddy_handler_ops_t print_ops = {.name = "print", .channel_read = print_read};

static int init_client(eddy_channel_t *ch, void *arg)
{
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch),
                                  eddy_length_field_decoder(65536, 0, 4, 0, 4),
                                  eddy_length_field_prepender(4),
                                  eddy_handler("print", &print_ops, arg, NULL));
}

static int call(uint16_t port, char **texts, int n)
{
    client_t c = {.expected = n};
    eddy_loop_group_t *loops = eddy_loop_group_new(1, NULL);
    eddy_bootstrap_t *b = eddy_bootstrap_new();
    eddy_bootstrap_group(b, loops);
    eddy_bootstrap_init(b, init_client, &c);
    eddy_future_t *connected = eddy_bootstrap_connect(b, "127.0.0.1", port);
    eddy_future_await(connected, -1);
    int rc = eddy_future_error(connected) != 0;
    if (rc == 0) {
        eddy_channel_t *ch = eddy_future_channel(connected); /* held by the future */
        for (int i = 0; i < n; i++) {
            /* Any thread may write: the write travels to the channel's loop, in order. */
            eddy_channel_write(ch, eddy_buf_msg(eddy_buf_from_str(texts[i])), NULL);
        }
        eddy_channel_flush(ch);
        eddy_future_await(eddy_channel_close_future(ch), 5000); /* the last answer closes */
    } else {
        fprintf(stderr, "client: %s\n", eddy_strerror(eddy_future_error(connected)));
    }
    eddy_future_release(connected);
    eddy_future_await(eddy_loop_group_shutdown_gracefully(loops, 0, 2000), -1);
    eddy_bootstrap_free(b);
    eddy_loop_group_free(loops);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "server") == 0) {
        return serve(argc > 2 ? (uint16_t)atoi(argv[2]) : 9000);
    }
    if (argc >= 4 && strcmp(argv[1], "client") == 0) {
        return call((uint16_t)atoi(argv[2]), argv + 3, argc - 3);
    }
    fprintf(stderr, "usage: eddy-getting-started server [PORT]\n"
                    "       eddy-getting-started client PORT TEXT...\n");
    return 2;
}
