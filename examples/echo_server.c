/*
 * eddy-echo-server: Netty's EchoServer in C. Every byte a client sends comes back.
 *
 *   eddy-echo-server [--host ADDR] [--port N] [--threads N] [--max-pending BYTES]
 *                    [--tls CERT KEY [--tls-ca FILE]]
 *
 * With --tls it speaks TLS (OpenSSL, include/eddy/tls.h) with the PEM certificate chain and
 * key given; --tls-ca also requires clients to present a certificate issued by those CAs.
 *
 * A client that never reads cannot make it grow: reading from a connection pauses while its
 * replies are not drained (EDDY_PAUSE_READ_WHEN_UNWRITABLE). --max-pending also sets a hard cap
 * on each connection's queued replies (EDDY_MAX_PENDING_OUTBOUND; 0, the default, is none).
 * Reading pauses once the replies pass the high water mark (64 KiB), so a cap below the mark
 * plus one read (up to 64 KiB) can be passed. The echo writes with no promise: a write past
 * the cap closes the connection after the replies already queued, and the client gets a
 * prefix of its bytes, then the close, never a gap (tests/examples/serverfuzz.py's echo_cap
 * and tls_cap check it). SIGINT or SIGTERM stop it gracefully: the listener closes,
 * connections get what was flushed and close, exit 0.
 */
#include <eddy/eddy.h>

#include "example_util.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Atomic uint64_t errors_seen;

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
    /* Resets and such are the clients' business; count them, say so now and then. */
    uint64_t n = atomic_fetch_add(&errors_seen, 1) + 1;
    if ((n & (n - 1)) == 0) {
        fprintf(stderr, "eddy-echo-server: connection error: %s (%llu so far)\n",
                eddy_strerror(err), (unsigned long long)n);
    }
    eddy_ctx_close(ctx, NULL);
}

/* A failed TLS handshake says why (OpenSSL's reason), as rarely as other errors. */
static void echo_event(eddy_ctx_t *ctx, int event, void *data)
{
    const eddy_tls_handshake_event_t *hs = data;
    if (event == EDDY_EVENT_TLS_HANDSHAKE && hs->error != 0) {
        uint64_t n = atomic_load(&errors_seen) + 1;
        if ((n & (n - 1)) == 0) {
            fprintf(stderr, "eddy-echo-server: TLS handshake failed: %s\n", hs->reason);
        }
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

static const eddy_handler_ops_t echo_ops = {
    .name = "echo",
    .sharable = true, /* no per-connection state: one instance serves every pipeline */
    .channel_read = echo_read,
    .channel_read_complete = echo_read_complete,
    .user_event_triggered = echo_event,
    .exception_caught = echo_exception,
};

/* arg: the TLS context, or NULL for plain TCP. TLS goes first, nearest the socket. */
static int init_child(eddy_channel_t *ch, void *arg)
{
    eddy_tls_context_t *tls = arg;
    if (tls != NULL) {
        int rc = eddy_tls_add(ch, tls, NULL, NULL);
        if (rc != 0) {
            return rc;
        }
    }
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "echo", &echo_ops, NULL, NULL);
}

/* The server's TLS context from PEM files, or NULL (said on stderr). */
static eddy_tls_context_t *tls_context(const char *cert, const char *key, const char *ca)
{
    eddy_tls_context_t *c = example_tls_context(EDDY_TLS_SERVER, "eddy-echo-server");
    if (c == NULL) {
        return NULL;
    }
    int rc = eddy_tls_context_use_certificate_file(c, cert, key);
    if (rc == 0 && ca != NULL) {
        rc = eddy_tls_context_trust_file(c, ca);
        if (rc == 0) {
            rc = eddy_tls_context_verify(c, EDDY_TLS_VERIFY_REQUIRE);
        }
    }
    if (rc != 0) {
        fprintf(stderr, "eddy-echo-server: TLS: %s: %s\n", eddy_strerror(rc),
                eddy_tls_context_error(c));
        eddy_tls_context_release(c);
        return NULL;
    }
    return c;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: eddy-echo-server [--host ADDR] [--port N] [--threads N] "
            "[--max-pending BYTES] [--tls CERT KEY [--tls-ca FILE]]\n"
            "  --host ADDR          address to listen on (default 127.0.0.1; 0.0.0.0 for all)\n"
            "  --port N             port (default 8007; 0 picks one)\n"
            "  --threads N          worker loops (default: one per CPU)\n"
            "  --max-pending BYTES  close a connection whose queued replies would pass BYTES\n"
            "                       (EDDY_MAX_PENDING_OUTBOUND; default 0: no cap)\n"
            "  --tls CERT KEY       speak TLS with this certificate chain and key (PEM files)\n"
            "  --tls-ca FILE        with --tls: require client certificates issued by these CAs\n"
            "Echoes every byte back. SIGINT or SIGTERM stop it gracefully.\n");
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    unsigned long port = 8007, threads = 0, max_pending = 0;
    const char *tls_cert = NULL, *tls_key = NULL, *tls_ca = NULL;
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
        } else if (strcmp(a, "--max-pending") == 0 && v != NULL &&
                   example_parse_uint(v, UINT32_MAX, &max_pending)) {
        } else if (strcmp(a, "--tls") == 0 && v != NULL && i + 2 < argc) {
            tls_cert = v;
            tls_key = argv[i + 2];
            i++; /* two values */
        } else if (strcmp(a, "--tls-ca") == 0 && v != NULL) {
            tls_ca = v;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (tls_ca != NULL && tls_cert == NULL) {
        usage(stderr);
        return 2;
    }
    eddy_tls_context_t *tls = NULL;
    if (tls_cert != NULL && (tls = tls_context(tls_cert, tls_key, tls_ca)) == NULL) {
        return 1;
    }
    eddy_stop_signals_block(); /* before any loop thread: they inherit it */

    eddy_loop_options_t boss_opts = {.name = "echo-boss"};
    eddy_loop_options_t worker_opts = {.name = "echo-worker"};
    eddy_loop_group_t *boss = eddy_loop_group_new(1, &boss_opts);
    eddy_loop_group_t *workers = eddy_loop_group_new(threads, &worker_opts);
    eddy_server_bootstrap_t *b = eddy_server_bootstrap_new();
    if (boss == NULL || workers == NULL || b == NULL) {
        fprintf(stderr, "eddy-echo-server: out of memory or threads\n");
        return 1;
    }
    example_configure(b, boss, workers, init_child, tls);
    eddy_server_bootstrap_child_option(b, EDDY_MAX_PENDING_OUTBOUND, (int64_t)max_pending);

    eddy_channel_t *server = example_bind(b, host, port, "eddy-echo-server");
    if (server == NULL) {
        return 1;
    }
    char addr[80];
    printf("eddy-echo-server: listening on %s%s, %zu worker loops (eddy %s)\n",
           eddy_addr_format(eddy_channel_local_addr(server), addr, sizeof(addr)),
           tls != NULL ? " with TLS" : "", eddy_loop_group_size(workers), eddy_version());
    fflush(stdout);

    int sig = eddy_stop_signals_wait(-1);
    /* Stop accepting, then let the loops close every connection (each gets one last try at
     * what it flushed) and end. */
    example_unbind(server);
    eddy_server_counters_t c;
    eddy_server_bootstrap_counters(b, &c);
    int rc = example_shutdown(b, workers, boss);
    eddy_tls_context_release(tls);
    /* Last: give back the memory eddy keeps for the process, so that a memory checker
     * (valgrind, tests/examples/echo_valgrind.sh) sees none of it at exit. */
    if (rc == 0 && eddy_library_shutdown() != 0) {
        fprintf(stderr, "eddy-echo-server: eddy still busy at exit (a buffer leaked?)\n");
        rc = 1;
    }
    printf("eddy-echo-server: stopped by %s; %llu connections served, %llu errors\n",
           sig == SIGINT ? "SIGINT" : "SIGTERM", (unsigned long long)c.accepted,
           (unsigned long long)atomic_load(&errors_seen));
    return rc;
}
