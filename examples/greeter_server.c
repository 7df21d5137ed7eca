/*
 * eddy-greeter-server: a gRPC service in a page of C. helloworld.Greeter/SayHello answers
 * "Hello, <name>"; any gRPC client of gRPC's own greeter example talks to it.
 *
 *   eddy-greeter-server [PORT]        (50051; 0 picks a free one and prints it)
 */
#include <eddy/eddy.h>

#include "helloworld.pb-c.h"

#include <stdio.h>
#include <stdlib.h>

/* The one method: a request in, a reply out. The library does the protocol (framing,
 * deadlines, cancellation, statuses); the method reads and writes messages. */
static void say_hello(eddy_grpc_call_t *call, eddy_buf_t *request)
{
    Helloworld__HelloRequest *req = helloworld__hello_request__unpack(
        NULL, eddy_buf_readable(request), eddy_buf_read_ptr(request));
    eddy_buf_release(request);
    if (req == NULL) {
        eddy_grpc_call_finish(call, EDDY_GRPC_INVALID_ARGUMENT, "not a HelloRequest", NULL, 0);
        return;
    }
    char text[256];
    snprintf(text, sizeof(text), "Hello, %s", req->name);
    helloworld__hello_request__free_unpacked(req, NULL);

    Helloworld__HelloReply reply = HELLOWORLD__HELLO_REPLY__INIT;
    reply.message = text;
    size_t n = helloworld__hello_reply__get_packed_size(&reply);
    eddy_buf_t *out = eddy_buf_new(n + 1);
    if (out != NULL) {
        eddy_buf_produce(out, helloworld__hello_reply__pack(&reply, eddy_buf_write_ptr(out)));
    }
    eddy_grpc_call_reply(call, out); /* the reply and status OK, in one write */
}

static const eddy_grpc_method_ops_t say_hello_ops = {.on_request = say_hello};

static int init_child(eddy_channel_t *ch, void *arg)
{
    return eddy_grpc_server_init_channel(ch, arg); /* HTTP/2, then gRPC */
}

int main(int argc, char **argv)
{
    int port = argc > 1 ? atoi(argv[1]) : 50051;
    eddy_grpc_server_t *grpc = eddy_grpc_server_new(NULL);
    if (grpc == NULL || eddy_grpc_server_add_method(grpc, "/helloworld.Greeter/SayHello",
                                                    EDDY_GRPC_UNARY, &say_hello_ops, NULL) != 0) {
        return 1;
    }
    eddy_stop_signals_block();
    eddy_loop_group_t *loops = eddy_loop_group_new(0, NULL); /* a loop per core */
    eddy_server_bootstrap_t *b = eddy_server_bootstrap_new();
    eddy_server_bootstrap_group(b, loops, NULL);
    eddy_server_bootstrap_child_init(b, init_child, grpc);
    eddy_future_t *bound = eddy_server_bootstrap_bind(b, "127.0.0.1", (uint16_t)port);
    if (eddy_future_await(bound, -1) != 0 || eddy_future_error(bound) != 0) {
        fprintf(stderr, "eddy-greeter-server: %s\n", eddy_strerror(eddy_future_error(bound)));
        return 1;
    }
    printf("PORT %u\n", (unsigned)eddy_addr_port(eddy_channel_local_addr(eddy_future_channel(bound))));
    fflush(stdout);
    eddy_future_release(bound);

    eddy_stop_signals_wait(-1); /* SIGINT or SIGTERM */
    eddy_future_t *closed = eddy_server_bootstrap_shutdown(b); /* GOAWAY, calls finish */
    eddy_future_await(closed, 5000);
    eddy_future_release(closed);
    eddy_future_await(eddy_loop_group_shutdown_gracefully(loops, 0, 2000), 5000);
    eddy_server_bootstrap_free(b);
    eddy_loop_group_free(loops);
    eddy_grpc_server_free(grpc);
    return 0;
}
