/*
 * echo_server_eddy: eddy's echo server on one loop. A ServerBootstrap whose one loop both
 * accepts and serves (workers NULL), with the echo handler of examples/echo_server.c: each
 * read buffer goes back out as it is, one flush per read batch. The process is pinned to
 * --cpu before the loop thread starts, so the loop inherits it (eddy_loop_group_new ignores
 * opts->cpu and, with cpu_set, pins loop i to CPU i).
 *
 *   echo_server_eddy [--port N] [--cpu N]
 */
#include <eddy/eddy.h>

#include "server_common.h"

#include <signal.h>

static void echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_ctx_write(ctx, msg, NULL); /* the same buffer goes back out: no copy */
}

static void echo_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx); /* one gathering write per read batch */
}

static void echo_exception(eddy_ctx_t *ctx, int err)
{
    (void)err; /* resets from the churn clients are expected */
    eddy_ctx_close(ctx, NULL);
}

static const eddy_handler_ops_t echo_ops = {
    .name = "echo",
    .sharable = true,
    .channel_read = echo_read,
    .channel_read_complete = echo_read_complete,
    .exception_caught = echo_exception,
};

static int init_child(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "echo", &echo_ops, NULL, NULL);
}

int main(int argc, char **argv)
{
    server_args_t a;
    server_args_parse(&a, argc, argv, "echo_server_eddy");
    server_pin(a.cpu, "echo_server_eddy");
    /* SIGTERM (run.sh's kill) ends the process at once: there is nothing to save. */
    eddy_loop_options_t opts = {.name = "echo-loop", .cpu = -1};
    eddy_loop_group_t *group = eddy_loop_group_new(1, &opts);
    eddy_server_bootstrap_t *b = eddy_server_bootstrap_new();
    if (group == NULL || b == NULL) {
        fprintf(stderr, "echo_server_eddy: out of memory or threads\n");
        return 1;
    }
    eddy_server_bootstrap_group(b, group, NULL);
    eddy_server_bootstrap_option(b, EDDY_SO_BACKLOG, 1024);
    eddy_server_bootstrap_child_option(b, EDDY_TCP_NODELAY, 1);
    eddy_server_bootstrap_child_option(b, EDDY_PAUSE_READ_WHEN_UNWRITABLE, 1);
    eddy_server_bootstrap_child_init(b, init_child, NULL);
    eddy_future_t *bound = eddy_server_bootstrap_bind(b, "127.0.0.1", (uint16_t)a.port);
    if (bound == NULL || eddy_future_await(bound, -1) != 0 || eddy_future_error(bound) != 0) {
        fprintf(stderr, "echo_server_eddy: cannot listen on port %d: %s\n", a.port,
                bound != NULL ? eddy_strerror(eddy_future_error(bound)) : "out of memory");
        return 1;
    }
    eddy_future_release(bound);
    server_ready(a.port, "echo_server_eddy");
    sigset_t none;
    sigemptyset(&none);
    for (;;)
        sigsuspend(&none);
}
