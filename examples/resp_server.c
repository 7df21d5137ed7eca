/*
 * eddy-resp-server: a small Redis-compatible server on eddy. redis-cli and redis-benchmark
 * talk to it; the commands are in resp_store.c.
 *
 *   eddy-resp-server [--host ADDR] [--port N] [--threads N] [--max-bulk-len BYTES]
 *                    [--max-output BYTES] [--request-timeout S]
 *
 * Each connection's pipeline is the library's message deadline (--request-timeout: a command
 * must arrive whole within it of its first bytes, however slowly they trickle), the RESP
 * decoder (include/eddy/resp.h), then one handler that runs every command of a read batch
 * against the shared keyspace, appends the replies to one buffer, and writes and flushes that
 * once per batch (channel_read_complete): a client pipelining 16 commands gets its 16 replies
 * in one write. A protocol error or QUIT gets its reply, then the connection closes. SIGINT or
 * SIGTERM stop it gracefully.
 */
#include <eddy/eddy.h>
#include <eddy/resp.h>

#include "example_util.h"
#include "resp_store.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A batch's replies start in a buffer this big (pooled); past OUT_WRITE_AT bytes they are
 * queued and a new buffer starts, so a long batch of large values does not grow one buffer
 * without bound. 4 KiB holds 16 pipelined replies of redis-benchmark's 3-byte values many
 * times over. */
#define OUT_INITIAL 4096
#define OUT_WRITE_AT (64 * 1024)

/* Default of --max-output: replies a connection may hold unsent, bytes (Redis' hard limit for
 * replicas). Backpressure stops reading a client that does not read, but one read of 64 KiB of
 * GETs of a large value would otherwise make gigabytes of replies. */
#define MAX_OUTPUT_DEFAULT ((size_t)256 << 20)

/* Active expiry: every 100 ms (Redis' hz 10), up to this many buckets of each shard. */
#define EXPIRE_PERIOD_MS 100
#define EXPIRE_BUCKETS 64

static _Atomic uint64_t errors_seen;
static _Atomic uint64_t output_closes;         /* connections closed at --max-output */
static size_t max_output = MAX_OUTPUT_DEFAULT; /* 0: no limit */

typedef struct conn_s {
    resp_store_t *store;
    eddy_buf_t *out; /* replies of the batch so far, or NULL */
    uint64_t cmds;   /* commands since the last read_complete */
    bool wrote;      /* something was written since the last flush */
    bool closing;    /* the last reply is on its way: ignore the rest */
    bool counted;    /* counted as a connected client */
} conn_t;

typedef struct server_s {
    resp_store_t *store;
    eddy_resp_decoder_options_t limits;
    int64_t request_timeout_ms; /* 0: none */
} server_t;

static void conn_close_now(eddy_ctx_t *ctx, conn_t *c)
{
    c->closing = true;
    if (c->out != NULL) {
        eddy_buf_release(c->out);
        c->out = NULL;
    }
    eddy_ctx_close(ctx, NULL);
}

/* Replies held for the client (this batch's and those queued unsent) past --max-output: the
 * connection closes, as Redis' client-output-buffer-limit does, rather than grow without
 * bound; a reply cut out of the stream would put every later one out of step. */
static bool over_output_limit(eddy_ctx_t *ctx, conn_t *c)
{
    eddy_channel_counters_t k;
    eddy_channel_counters(eddy_ctx_channel(ctx), &k);
    if (k.pending_outbound_bytes + eddy_buf_readable(c->out) <= max_output) {
        return false;
    }
    uint64_t n = atomic_fetch_add(&output_closes, 1) + 1;
    if ((n & (n - 1)) == 0) {
        fprintf(stderr,
                "eddy-resp-server: a client holds more than %zu bytes of unread replies: "
                "closed (%llu so far)\n",
                max_output, (unsigned long long)n);
    }
    conn_close_now(ctx, c);
    return true;
}

static void conn_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    conn_t *c = eddy_ctx_state(ctx);
    eddy_resp_cmd_t *cmd = eddy_resp_cmd_of(msg);
    if (cmd == NULL || c->closing) {
        eddy_msg_release(msg);
        return;
    }
    if (c->out == NULL) {
        c->out = eddy_buf_alloc(eddy_ctx_alloc(ctx), OUT_INITIAL, EDDY_BUF_DEFAULT_MAX_CAPACITY);
        if (c->out == NULL) {
            eddy_resp_cmd_release(cmd);
            conn_close_now(ctx, c);
            return;
        }
    }
    int rc;
    if (cmd->error != NULL) {
        rc = eddy_resp_write_errorf(c->out, "ERR %s", cmd->error);
        c->closing = true;
    } else {
        rc = resp_store_exec(c->store, cmd, c->out);
        c->cmds++;
    }
    eddy_resp_cmd_release(cmd);
    if (rc < 0) {
        conn_close_now(ctx, c);
        return;
    }
    if (rc == RESP_STORE_CLOSE || c->closing) {
        c->closing = true;
        eddy_buf_t *last = c->out;
        c->out = NULL;
        eddy_resp_close_after_flush(ctx, eddy_buf_msg(last));
        return;
    }
    size_t held = eddy_buf_readable(c->out);
    if (held < OUT_WRITE_AT && held <= max_output) {
        return; /* the common case: no look at the channel's counters per command */
    }
    /* Past here only when the batch's buffer is big: the channel's unsent bytes grow only by
     * the buffers queued below (between reads, backpressure bounds them), so the limit is
     * passed by at most one buffer and one reply. */
    if (max_output > 0 && over_output_limit(ctx, c)) {
        return;
    }
    if (held >= OUT_WRITE_AT) {
        eddy_ctx_write(ctx, eddy_buf_msg(c->out), NULL);
        c->out = NULL;
        c->wrote = true;
    }
}

static void conn_read_complete(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (c->cmds > 0) {
        resp_store_count_commands(c->store, c->cmds);
        c->cmds = 0;
    }
    if (c->out != NULL && eddy_buf_readable(c->out) > 0) {
        eddy_ctx_write(ctx, eddy_buf_msg(c->out), NULL);
        c->out = NULL;
        c->wrote = true;
    }
    if (c->wrote) {
        c->wrote = false;
        eddy_ctx_flush(ctx); /* one gathering write per read batch */
    }
}

static void conn_active(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    resp_store_client_opened(c->store);
    c->counted = true;
    eddy_ctx_fire_channel_active(ctx);
}

static void conn_inactive(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (c->counted) {
        resp_store_client_closed(c->store);
        c->counted = false;
    }
    eddy_ctx_fire_channel_inactive(ctx);
}

static void conn_removed(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (c->counted) {
        resp_store_client_closed(c->store);
        c->counted = false;
    }
    if (c->out != NULL) {
        eddy_buf_release(c->out);
        c->out = NULL;
    }
}

static void conn_exception(eddy_ctx_t *ctx, int err)
{
    /* Resets and such are the clients' business; count them, say so now and then. */
    uint64_t n = atomic_fetch_add(&errors_seen, 1) + 1;
    if ((n & (n - 1)) == 0) {
        fprintf(stderr, "eddy-resp-server: connection error: %s (%llu so far)\n",
                eddy_strerror(err), (unsigned long long)n);
    }
    conn_close_now(ctx, eddy_ctx_state(ctx));
}

static const eddy_handler_ops_t conn_ops = {
    .name = "resp",
    .handler_removed = conn_removed,
    .channel_active = conn_active,
    .channel_inactive = conn_inactive,
    .channel_read = conn_read,
    .channel_read_complete = conn_read_complete,
    .exception_caught = conn_exception,
};

static int init_child(eddy_channel_t *ch, void *arg)
{
    server_t *srv = arg;
    conn_t *c = calloc(1, sizeof(*c));
    if (c != NULL) {
        c->store = srv->store;
    }
    return EDDY_PIPELINE_ADD_LAST(
        eddy_channel_pipeline(ch), eddy_message_deadline_handler(srv->request_timeout_ms),
        eddy_resp_decoder(&srv->limits), eddy_handler("resp", &conn_ops, c, eddy_free_state));
}

/* Each loop sweeps its share of the shards. */
typedef struct sweeper_s {
    resp_store_t *store;
    size_t part, parts;
    eddy_timer_t *timer;
} sweeper_t;

static void sweep(eddy_timer_t *t, void *arg)
{
    (void)t;
    sweeper_t *sw = arg;
    resp_store_expire_cycle(sw->store, sw->part, sw->parts, EXPIRE_BUCKETS);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: eddy-resp-server [--host ADDR] [--port N] [--threads N] [--max-bulk-len N]\n"
               "                        [--max-output N] [--request-timeout S]\n"
               "  --host ADDR        address to listen on (default 127.0.0.1; 0.0.0.0 for all)\n"
               "  --port N           port (default 6380; 0 picks one)\n"
               "  --threads N        worker loops sharing one keyspace (default: one per CPU)\n"
               "  --max-bulk-len N   longest bulk string accepted, bytes (default 64 MiB)\n"
               "  --max-output N     close a client holding more unread replies, bytes\n"
               "                     (default 256 MiB; 0: no limit)\n"
               "  --request-timeout S  close a client whose command has not arrived whole\n"
               "                     S seconds after its first bytes (default 30; 0: never)\n"
               "A Redis-compatible server: PING ECHO SET GET DEL EXISTS INCR DECR INCRBY DECRBY\n"
               "EXPIRE PEXPIRE TTL PTTL PERSIST FLUSHALL DBSIZE INFO COMMAND CONFIG GET SELECT\n"
               "QUIT. SIGINT or SIGTERM stop it gracefully.\n");
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    unsigned long port = 6380, threads = 0, max_bulk = EDDY_RESP_DEFAULT_MAX_BULK_LEN;
    unsigned long max_out = MAX_OUTPUT_DEFAULT, request = 30;
    for (int i = 1; i < argc; i += 2) { /* each option and its value */
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--host") == 0 && v != NULL) {
            host = v;
        } else if (strcmp(a, "--port") == 0 && v != NULL && example_parse_uint(v, 65535, &port)) {
        } else if (strcmp(a, "--threads") == 0 && v != NULL &&
                   example_parse_uint(v, 1024, &threads)) {
        } else if (strcmp(a, "--max-bulk-len") == 0 && v != NULL &&
                   example_parse_uint(v, (unsigned long)1 << 40, &max_bulk) && max_bulk > 0) {
        } else if (strcmp(a, "--max-output") == 0 && v != NULL &&
                   example_parse_uint(v, (unsigned long)1 << 40, &max_out)) {
            max_output = (size_t)max_out;
        } else if (strcmp(a, "--request-timeout") == 0 && v != NULL &&
                   example_parse_uint(v, 86400, &request)) {
        } else {
            usage(stderr);
            return 2;
        }
    }
    eddy_stop_signals_block(); /* before any loop thread: they inherit it */

    server_t srv = {.store = resp_store_new(),
                    .limits = {.max_bulk_len = max_bulk},
                    .request_timeout_ms = (int64_t)request * 1000};
    eddy_loop_options_t boss_opts = {.name = "resp-boss"};
    eddy_loop_options_t worker_opts = {.name = "resp-worker"};
    eddy_loop_group_t *boss = eddy_loop_group_new(1, &boss_opts);
    eddy_loop_group_t *workers = eddy_loop_group_new(threads, &worker_opts);
    eddy_server_bootstrap_t *b = eddy_server_bootstrap_new();
    size_t loops = workers != NULL ? eddy_loop_group_size(workers) : 0;
    sweeper_t *sweepers = calloc(loops > 0 ? loops : 1, sizeof(*sweepers));
    if (srv.store == NULL || boss == NULL || workers == NULL || b == NULL || sweepers == NULL) {
        fprintf(stderr, "eddy-resp-server: out of memory or threads\n");
        return 1;
    }
    example_configure(b, boss, workers, init_child, &srv);

    eddy_channel_t *server = example_bind(b, host, port, "eddy-resp-server");
    if (server == NULL) {
        return 1;
    }
    resp_store_set_server_info(srv.store, eddy_addr_port(eddy_channel_local_addr(server)),
                               (unsigned)loops);
    for (size_t i = 0; i < loops; i++) {
        sweepers[i] = (sweeper_t){.store = srv.store, .part = i, .parts = loops};
        sweepers[i].timer =
            eddy_loop_schedule_at_fixed_rate(eddy_loop_group_loop(workers, i), EXPIRE_PERIOD_MS,
                                             EXPIRE_PERIOD_MS, sweep, &sweepers[i]);
    }
    char addr[80];
    printf("eddy-resp-server: listening on %s, %zu worker loops (eddy %s)\n",
           eddy_addr_format(eddy_channel_local_addr(server), addr, sizeof(addr)), loops,
           eddy_version());
    fflush(stdout);

    int sig = eddy_stop_signals_wait(-1);
    /* Stop accepting, then let the loops close every connection (each gets one last try at
     * what it flushed) and end; shutting down cancels the sweepers. */
    example_unbind(server);
    eddy_server_counters_t c;
    eddy_server_bootstrap_counters(b, &c);
    int rc = example_shutdown(b, workers, boss);
    for (size_t i = 0; i < loops; i++) {
        eddy_timer_release(sweepers[i].timer);
    }
    free(sweepers);
    size_t keys = resp_store_size(srv.store, NULL);
    resp_store_free(srv.store);
    printf("eddy-resp-server: stopped by %s; %llu connections served, %zu keys dropped, "
           "%llu errors, %llu closed at --max-output\n",
           sig == SIGINT ? "SIGINT" : "SIGTERM", (unsigned long long)c.accepted, keys,
           (unsigned long long)atomic_load(&errors_seen),
           (unsigned long long)atomic_load(&output_closes));
    return rc;
}
