/*
 * udp_server_eddy: eddy's UDP echo server on one loop. One datagram channel bound to
 * 127.0.0.1:port (eddy_datagram_open), whose one handler turns each packet into its reply
 * (the same packet turned around, eddy_datagram_turn: no copy, no new packet), writes it,
 * and flushes once per read batch (one recvmmsg). The channel reads as many
 * datagrams per readiness event as the raw server (--per-event, default 1024, as
 * EDDY_MAX_MESSAGES_PER_READ), in recvmmsg batches of up to 64 as the raw server's, and gets
 * the raw server's socket buffers. Replies to one peer go out as UDP_SEGMENT sends (eddy's
 * default), or one datagram each with --no-gso (sendmmsg, as the raw server without --gso).
 * The process is pinned to --cpu before the loop thread starts, so the loop inherits it.
 *
 * --idle N opens N more channels on port 0, each with the same handler, from the main thread
 * (eddy_datagram_open from any thread), and reports the memory they took (udp_common.h).
 *
 *   udp_server_eddy [--port N] [--cpu N] [--sockbuf BYTES] [--idle N] [--per-event N]
 *                   [--no-gso]
 */
#include <eddy/eddy.h>

#include "udp_common.h"

static void echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_datagram_t *d = eddy_datagram_of(msg);
    if (d == NULL) {
        eddy_msg_release(msg);
        return;
    }
    eddy_ctx_write(ctx, eddy_datagram_msg(eddy_datagram_turn(d, NULL)), NULL);
}

static void echo_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx); /* one sendmmsg (or GSO send) per read batch */
}

static void echo_exception(eddy_ctx_t *ctx, int err)
{
    (void)ctx;
    (void)err; /* a datagram too long, an ICMP error: the channel goes on */
}

static const eddy_handler_ops_t echo_ops = {
    .name = "udp-echo",
    .sharable = true,
    .channel_read = echo_read,
    .channel_read_complete = echo_read_complete,
    .exception_caught = echo_exception,
};

static int init_channel(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "echo", &echo_ops, NULL, NULL);
}

/* Opens a channel on 127.0.0.1:port and waits for it; exits on failure. */
static void open_channel(eddy_loop_t *loop, int port, const eddy_channel_config_t *cfg)
{
    eddy_addr_t local;
    eddy_addr_ip(&local, "127.0.0.1", (uint16_t)port);
    eddy_datagram_options_t opts = {.loop = loop, .config = cfg, .init = init_channel};
    eddy_future_t *f = eddy_datagram_open(&local, &opts);
    if (f == NULL || eddy_future_await(f, -1) != 0 || eddy_future_error(f) != 0) {
        fprintf(stderr, "udp_server_eddy: cannot bind 127.0.0.1:%d: %s\n", port,
                f != NULL ? eddy_strerror(eddy_future_error(f)) : "out of memory");
        exit(1);
    }
    eddy_future_release(f); /* the loop keeps the channel open */
}

int main(int argc, char **argv)
{
    udp_args_t a;
    udp_args_parse(&a, argc, argv, "udp_server_eddy");
    udp_pin(a.cpu, "udp_server_eddy");
    eddy_stop_signals_block();
    eddy_loop_options_t lopts = {.name = "udp-loop", .cpu = -1};
    eddy_loop_group_t *group = eddy_loop_group_new(1, &lopts);
    if (group == NULL) {
        fprintf(stderr, "udp_server_eddy: out of memory or threads\n");
        return 1;
    }
    eddy_loop_t *loop = eddy_loop_group_next(group);
    eddy_channel_config_t cfg;
    eddy_channel_config_init(&cfg);
    eddy_channel_config_set(&cfg, EDDY_MAX_MESSAGES_PER_READ, a.per_event);
    if (a.gso >= 0)
        eddy_channel_config_set(&cfg, EDDY_UDP_GSO, a.gso);
    if (a.sockbuf > 0) {
        eddy_channel_config_set(&cfg, EDDY_SO_RCVBUF, a.sockbuf);
        eddy_channel_config_set(&cfg, EDDY_SO_SNDBUF, a.sockbuf);
    }
    open_channel(loop, a.port, &cfg);
    udp_ready(a.port, "udp_server_eddy");
    if (a.idle > 0) {
        long before = udp_rss_kb();
        for (int i = 0; i < a.idle; i++)
            open_channel(loop, 0, NULL);
        udp_idle_report("eddy", a.idle, before);
    }
    /* SIGTERM (run.sh's kill) ends the process: there is nothing to save. */
    eddy_stop_signals_wait(-1);
    return 0;
}
