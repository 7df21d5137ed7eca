/*
 * eddy-dns-server: an authoritative DNS server for one zone file, on UDP and TCP on the same
 * port (RFC 1035, RFC 7766), built on eddy's datagram channels and stream channels.
 *
 * UDP: a datagram channel per loop on the port (SO_REUSEPORT spreads clients over them); each
 * query is answered from the zone (include/eddy/dns.h: eddy_dns_answer, through a per-loop
 * cache of answers, eddy_dns_cache_answer) into its own pooled buffer and its packet turned
 * around to its sender, one sendmmsg per read batch. An answer too large for the
 * client's UDP size (512, or its EDNS size) goes out truncated (TC) and the client asks again
 * over TCP. Responses and packets without a whole header are dropped, never answered (a
 * server that answers responses can be made to loop with another one, or to reflect).
 *
 * TCP: each message carries a two-byte length in front (the length field codec); queries on
 * one connection are answered in order. A malformed query gets its FORMERR and the
 * connection goes on (the framing still holds); a frame that is no query at all (under 12
 * bytes, or a response) closes it after what was answered before. A connection idle for
 * --idle-timeout seconds, or one whose message has not arrived whole 10 seconds after it
 * began, is closed.
 *
 * usage: eddy-dns-server --zone FILE [--host ADDR] [--port N] [--threads N]
 */
#include <eddy/eddy.h>
#include <eddy/dns.h>

#include "example_util.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A UDP query is at most this long (a question and an OPT record take well under 512; the
 * rest is a client's padding or garbage), and is copied aside while its buffer takes the
 * answer, whose size the buffer's capacity bounds (EDDY_DATAGRAM_RECV_SIZE: 2048 by default;
 * we advertise EDNS 1232). */
#define UDP_QUERY_MAX 2048
/* A TCP message is at most this long (the length field's reach), two bytes of length apart. */
#define TCP_MSG_MAX 65535
/* A TCP message must arrive whole this long after its first bytes (slow-loris clients). */
#define TCP_MESSAGE_DEADLINE_MS 10000

typedef struct server_s {
    const eddy_dns_zone_t *zone;
    int64_t idle_ms; /* TCP connections idle this long close (RFC 7766: seconds) */
} server_t;

static _Atomic uint64_t answered_udp, answered_tcp, dropped;

/* ---------------------------------------------------------------------------------------
 * UDP
 */

/* Answers kept per loop (eddy_dns_cache_t): a query asked before is answered by a copy. */
#define CACHE_SLOTS 1024

typedef struct udp_s {
    eddy_dns_cache_t *cache; /* this loop's */
    bool wrote;
} udp_t;

static void udp_free(void *state)
{
    udp_t *u = state;
    if (u != NULL) {
        eddy_dns_cache_free(u->cache);
        free(u);
    }
}

static void udp_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    udp_t *u = eddy_ctx_state(ctx);
    eddy_datagram_t *d = eddy_datagram_of(msg);
    eddy_buf_t *b = d != NULL ? eddy_datagram_content(d) : NULL;
    /* The answer goes into the query's own buffer (pooled, EDDY_DATAGRAM_RECV_SIZE bytes),
     * the query copied aside first, and the packet goes back turned around: no buffer and no
     * packet is made per query. */
    uint8_t query[UDP_QUERY_MAX];
    size_t qlen = b != NULL ? eddy_buf_readable(b) : 0;
    if (b == NULL || qlen > sizeof(query)) {
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed); /* not a query */
        eddy_msg_release(msg);
        return;
    }
    memcpy(query, eddy_buf_read_ptr(b), qlen);
    eddy_buf_t *out = NULL; /* a buffer of its own, when the query's is too small */
    if (eddy_buf_capacity(b) < UDP_QUERY_MAX) {
        b = out = eddy_buf_alloc(eddy_ctx_alloc(ctx), UDP_QUERY_MAX, UDP_QUERY_MAX);
    } else {
        eddy_buf_clear(b);
    }
    size_t n = 0;
    int rc = b == NULL ? EDDY_ENOMEM
                       : eddy_dns_cache_answer(u->cache, query, qlen, EDDY_DNS_UDP_MAX,
                                               eddy_buf_write_ptr(b), eddy_buf_capacity(b), &n);
    if (rc != 0) {
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        if (out != NULL) {
            eddy_buf_release(out);
        }
        eddy_msg_release(msg);
        return;
    }
    eddy_buf_set_writer_index(b, n);
    eddy_ctx_write(ctx, eddy_datagram_msg(eddy_datagram_turn(d, out)), NULL);
    u->wrote = true;
    atomic_fetch_add_explicit(&answered_udp, 1, memory_order_relaxed);
}

static void udp_read_complete(eddy_ctx_t *ctx)
{
    udp_t *u = eddy_ctx_state(ctx);
    if (u->wrote) {
        u->wrote = false;
        eddy_ctx_flush(ctx); /* one sendmmsg for the batch's answers */
    }
}

static void udp_exception(eddy_ctx_t *ctx, int err)
{
    (void)ctx;
    /* A datagram too long for our receive buffer (EMSGSIZE) or an ICMP error: one packet's
     * business; the channel serves on. */
    (void)err;
    atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
}

static const eddy_handler_ops_t udp_ops = {
    .name = "dns-udp",
    .channel_read = udp_read,
    .channel_read_complete = udp_read_complete,
    .exception_caught = udp_exception,
};

static int init_udp(eddy_channel_t *ch, void *arg)
{
    server_t *srv = arg;
    udp_t *u = calloc(1, sizeof(*u));
    if (u != NULL && (u->cache = eddy_dns_cache_new(srv->zone, CACHE_SLOTS)) == NULL) {
        free(u);
        u = NULL;
    }
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "dns", &udp_ops, u, udp_free);
}

/* ---------------------------------------------------------------------------------------
 * TCP
 */

static void tcp_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    const eddy_dns_zone_t *zone = eddy_ctx_state(ctx);
    eddy_buf_t *q = eddy_buf_of(msg);
    eddy_buf_t *out = q != NULL ? eddy_buf_alloc(eddy_ctx_alloc(ctx), 2 + TCP_MSG_MAX,
                                                 2 + TCP_MSG_MAX)
                                : NULL;
    size_t n = 0;
    int rc = out != NULL ? eddy_dns_answer(zone, eddy_buf_read_ptr(q), eddy_buf_readable(q),
                                           EDDY_DNS_TCP_MAX, eddy_buf_write_ptr(out) + 2,
                                           TCP_MSG_MAX, &n)
                         : EDDY_ENOMEM;
    eddy_msg_release(msg);
    if (rc != 0) {
        /* Nothing to answer (no header, a response): this client does not speak DNS. */
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        if (out != NULL) {
            eddy_buf_release(out);
        }
        eddy_ctx_close_after_flush(ctx, NULL);
        return;
    }
    eddy_buf_write_u16(out, (uint16_t)n);
    eddy_buf_set_writer_index(out, 2 + n);
    atomic_fetch_add_explicit(&answered_tcp, 1, memory_order_relaxed);
    eddy_ctx_write(ctx, eddy_buf_msg(out), NULL);
}

static void tcp_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
}

static void tcp_user_event(eddy_ctx_t *ctx, int event, void *data)
{
    if (event == EDDY_EVENT_ALL_IDLE) {
        eddy_ctx_close_after_flush(ctx, NULL); /* RFC 7766: the server closes idle ones */
        return;
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

static void tcp_exception(eddy_ctx_t *ctx, int err)
{
    (void)err; /* a reset, a frame that lies: the client's business */
    atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
    eddy_ctx_close(ctx, NULL);
}

static const eddy_handler_ops_t tcp_ops = {
    .name = "dns-tcp",
    .channel_read = tcp_read,
    .channel_read_complete = tcp_read_complete,
    .user_event_triggered = tcp_user_event,
    .exception_caught = tcp_exception,
};

static int init_tcp(eddy_channel_t *ch, void *arg)
{
    server_t *srv = arg;
    return EDDY_PIPELINE_ADD_LAST(
        eddy_channel_pipeline(ch), eddy_idle_state_handler(0, 0, srv->idle_ms),
        eddy_message_deadline_handler(TCP_MESSAGE_DEADLINE_MS),
        eddy_length_field_decoder(2 + TCP_MSG_MAX, 0, 2, 0, 2),
        eddy_handler("dns", &tcp_ops, (void *)(uintptr_t)srv->zone, NULL));
}

/* ---------------------------------------------------------------------------------------
 * Main
 */

static void usage(FILE *f)
{
    fprintf(f, "usage: eddy-dns-server --zone FILE [--host ADDR] [--port N] [--threads N]\n"
               "                       [--idle-timeout S]\n"
               "  --zone FILE        the zone to serve (RFC 1035 master file: SOA NS A AAAA\n"
               "                     CNAME MX TXT, $ORIGIN, $TTL)\n"
               "  --host ADDR        address to serve on (default 127.0.0.1; 0.0.0.0 for all)\n"
               "  --port N           UDP and TCP port (default 5353; 0 picks one)\n"
               "  --threads N        loops, each serving UDP and TCP (default: one per CPU)\n"
               "  --idle-timeout S   close TCP connections idle S seconds (default 10)\n"
               "An authoritative DNS server. SIGINT or SIGTERM stop it gracefully.\n");
}

/* Open the UDP side on host:port (every loop of group): its first channel, or NULL. */
static eddy_channel_t *serve_udp(eddy_bootstrap_t *b, eddy_loop_group_t *group, server_t *srv,
                                 const char *host, unsigned long port)
{
    eddy_bootstrap_group(b, group);
    eddy_bootstrap_datagram(b, true);
    eddy_bootstrap_reuseport(b, true);
    eddy_bootstrap_option(b, EDDY_SO_RCVBUF, 4 << 20); /* bursts of queries queue, not drop */
    /* Up to 256 queries per wake-up, in recvmmsg batches of 64 (NSD takes 100): the default,
     * 16, suits streams, whose reads bring many messages each. */
    eddy_bootstrap_option(b, EDDY_MAX_MESSAGES_PER_READ, 256);
    eddy_bootstrap_init(b, init_udp, srv);
    eddy_future_t *f = eddy_bootstrap_bind(b, host, (uint16_t)port);
    if (f == NULL || eddy_future_await(f, -1) != 0 || eddy_future_error(f) != 0) {
        fprintf(stderr, "eddy-dns-server: cannot serve UDP on %s:%lu: %s\n", host, port,
                f != NULL ? eddy_strerror(eddy_future_error(f)) : "out of memory");
        eddy_future_release(f);
        return NULL;
    }
    eddy_channel_t *ch = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    return ch;
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *zone_path = NULL;
    unsigned long port = 5353, threads = 0, idle = 10;
    for (int i = 1; i < argc; i += 2) { /* each option and its value */
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--zone") == 0 && v != NULL) {
            zone_path = v;
        } else if (strcmp(a, "--host") == 0 && v != NULL) {
            host = v;
        } else if (strcmp(a, "--port") == 0 && v != NULL && example_parse_uint(v, 65535, &port)) {
        } else if (strcmp(a, "--threads") == 0 && v != NULL &&
                   example_parse_uint(v, 1024, &threads)) {
        } else if (strcmp(a, "--idle-timeout") == 0 && v != NULL &&
                   example_parse_uint(v, 86400, &idle)) {
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (zone_path == NULL) {
        usage(stderr);
        return 2;
    }
    eddy_dns_zone_t *zone = NULL;
    char err[256];
    if (eddy_dns_zone_load(&zone, zone_path, err, sizeof(err)) != 0) {
        fprintf(stderr, "eddy-dns-server: %s: %s\n", zone_path, err);
        return 1;
    }
    eddy_stop_signals_block(); /* before any loop thread: they inherit it */

    server_t srv = {.zone = zone, .idle_ms = (int64_t)idle * 1000};
    eddy_loop_options_t opts = {.name = "dns"};
    eddy_loop_group_t *loops = eddy_loop_group_new(threads, &opts);
    eddy_bootstrap_t *ub = eddy_bootstrap_new();
    eddy_server_bootstrap_t *tb = eddy_server_bootstrap_new();
    if (loops == NULL || ub == NULL || tb == NULL) {
        fprintf(stderr, "eddy-dns-server: out of memory or threads\n");
        return 1;
    }
    /* UDP first: with --port 0 it picks the port, and TCP takes the same one. That port may
     * be taken on TCP (a client's ephemeral port): then both sides try again elsewhere. */
    example_configure(tb, loops, NULL, init_tcp, &srv);
    eddy_server_bootstrap_reuseport(tb, true);
    eddy_channel_t *udp = NULL, *tcp = NULL;
    for (int tries = port == 0 ? 20 : 1; tcp == NULL && tries > 0; tries--) {
        udp = serve_udp(ub, loops, &srv, host, port);
        if (udp == NULL) {
            return 1;
        }
        uint16_t p = eddy_addr_port(eddy_channel_local_addr(udp));
        eddy_future_t *f = eddy_server_bootstrap_bind(tb, host, p);
        if (f != NULL && eddy_future_await(f, -1) == 0 && eddy_future_error(f) == 0) {
            tcp = eddy_channel_retain(eddy_future_channel(f));
        } else if (tries == 1 || f == NULL || eddy_future_error(f) != EDDY_EADDRINUSE) {
            fprintf(stderr, "eddy-dns-server: cannot serve TCP on %s:%u: %s\n", host, p,
                    f != NULL ? eddy_strerror(eddy_future_error(f)) : "out of memory");
            eddy_future_release(f);
            return 1;
        } else {
            example_unbind(udp); /* closes every loop's UDP channel: they close with it */
        }
        eddy_future_release(f);
    }
    char addr[80];
    size_t origin_len = 0;
    const uint8_t *origin = eddy_dns_zone_origin(zone, &origin_len);
    char origin_text[1024]; /* a name's text, escapes included */
    if (eddy_dns_name_to_text(origin, origin_len, origin_text, sizeof(origin_text)) < 0) {
        snprintf(origin_text, sizeof(origin_text), "?");
    }
    printf("eddy-dns-server: serving %s (%zu records) on %s udp+tcp, %zu loops (eddy %s)\n",
           origin_text, eddy_dns_zone_record_count(zone),
           eddy_addr_format(eddy_channel_local_addr(udp), addr, sizeof(addr)),
           eddy_loop_group_size(loops), eddy_version());
    fflush(stdout);

    int sig = eddy_stop_signals_wait(-1);
    example_unbind(tcp);
    example_unbind(udp);
    eddy_server_counters_t c;
    eddy_server_bootstrap_counters(tb, &c);
    eddy_bootstrap_free(ub);
    int rc = example_shutdown(tb, loops, NULL);
    eddy_dns_zone_free(zone);
    printf("eddy-dns-server: stopped by %s; %llu UDP and %llu TCP answers, %llu TCP "
           "connections, %llu packets dropped\n",
           sig == SIGINT ? "SIGINT" : "SIGTERM", (unsigned long long)atomic_load(&answered_udp),
           (unsigned long long)atomic_load(&answered_tcp), (unsigned long long)c.accepted,
           (unsigned long long)atomic_load(&dropped));
    return rc;
}
