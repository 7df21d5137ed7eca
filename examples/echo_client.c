/*
 * eddy-echo-client: Netty's EchoClient in C, with numbers. Each connection sends --count
 * messages of --size bytes, one at a time, checks that every byte comes back, and the run
 * ends with throughput and round-trip latency.
 *
 *   eddy-echo-client [--host H] [--port N] [--size N] [--count N] [--connections N]
 *                    [--threads N] [--tls [--tls-ca FILE] [--servername NAME] [--insecure]]
 *
 * With --tls it speaks TLS and checks the server's certificate (against FILE, or the system's
 * CAs) and name (NAME, or the --host given) unless --insecure.
 *
 * Exit status 0 when every byte came back as sent, 1 otherwise.
 */
#include <eddy/eddy.h>

#include "example_util.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct run_s {
    size_t size;
    uint64_t count;
    _Atomic unsigned left;     /* connections still running */
    _Atomic uint64_t mismatches;
    _Atomic uint64_t done;     /* messages echoed */
    eddy_promise_t *finished;  /* completes when the last connection is done */
} run_t;

typedef struct conn_s {
    run_t *run;
    unsigned id;
    uint64_t sent;     /* messages sent */
    size_t got;        /* bytes of the current message back */
    int64_t sent_at;   /* when the current message left */
    int64_t *rtt;      /* per message, ns */
    bool finished;
} conn_t;

static uint8_t byte_at(const conn_t *c, uint64_t msg, size_t i)
{
    return (uint8_t)(c->id * 131u + msg * 7u + i);
}

static void send_next(eddy_ctx_t *ctx, conn_t *c)
{
    eddy_buf_t *b = eddy_buf_alloc(eddy_ctx_alloc(ctx), c->run->size, c->run->size);
    if (b == NULL) {
        eddy_ctx_fire_exception(ctx, EDDY_ENOMEM);
        return;
    }
    uint8_t *p = eddy_buf_write_ptr(b);
    for (size_t i = 0; i < c->run->size; i++) {
        p[i] = byte_at(c, c->sent, i);
    }
    eddy_buf_set_writer_index(b, c->run->size);
    c->got = 0;
    c->sent_at = eddy_now_ns();
    c->sent++;
    eddy_ctx_write_and_flush(ctx, eddy_buf_msg(b), NULL);
}

static void finish(conn_t *c)
{
    if (!c->finished) {
        c->finished = true;
        if (atomic_fetch_sub(&c->run->left, 1) == 1) {
            eddy_promise_succeed(c->run->finished, NULL);
        }
    }
}

static void client_active(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (c->run->count == 0) {
        finish(c);
    } else {
        send_next(ctx, c);
    }
    eddy_ctx_fire_channel_active(ctx);
}

static void client_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    conn_t *c = eddy_ctx_state(ctx);
    eddy_buf_t *b = eddy_buf_of(msg);
    const uint8_t *p = eddy_buf_read_ptr(b);
    size_t n = eddy_buf_readable(b);
    for (size_t i = 0; i < n; i++) {
        if (c->got == c->run->size || p[i] != byte_at(c, c->sent - 1, c->got)) {
            atomic_fetch_add(&c->run->mismatches, 1);
            eddy_msg_release(msg);
            finish(c);
            eddy_ctx_close(ctx, NULL);
            return;
        }
        c->got++;
    }
    eddy_msg_release(msg);
    if (c->got == c->run->size) {
        c->rtt[c->sent - 1] = eddy_now_ns() - c->sent_at;
        atomic_fetch_add(&c->run->done, 1);
        if (c->sent < c->run->count) {
            send_next(ctx, c);
        } else {
            finish(c);
        }
    }
}

static void client_inactive(eddy_ctx_t *ctx)
{
    finish(eddy_ctx_state(ctx)); /* closed early: the summary shows what was missing */
    eddy_ctx_fire_channel_inactive(ctx);
}

/* A failed TLS handshake says why: OpenSSL's reason beats "TLS failure". */
static void client_event(eddy_ctx_t *ctx, int event, void *data)
{
    const eddy_tls_handshake_event_t *hs = data;
    if (event == EDDY_EVENT_TLS_HANDSHAKE && hs->error != 0) {
        fprintf(stderr, "eddy-echo-client: TLS handshake failed: %s\n", hs->reason);
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

static void client_exception(eddy_ctx_t *ctx, int err)
{
    fprintf(stderr, "eddy-echo-client: %s\n", eddy_strerror(err));
    eddy_ctx_close(ctx, NULL);
}

static const eddy_handler_ops_t client_ops = {
    .name = "echo-client",
    .channel_active = client_active,
    .channel_read = client_read,
    .channel_inactive = client_inactive,
    .user_event_triggered = client_event,
    .exception_caught = client_exception,
};

/* Connections are made one after another; `current` is the one being made. A name with
 * several addresses runs init once per address tried, and every try of one connection
 * shares its state (a failed try never becomes active, so it never touches it). */
typedef struct init_arg_s {
    conn_t *conns;
    _Atomic unsigned current;
    eddy_tls_context_t *tls; /* NULL: plain TCP */
    eddy_tls_handler_options_t tls_opts;
} init_arg_t;

static int init_conn(eddy_channel_t *ch, void *arg)
{
    init_arg_t *ia = arg;
    conn_t *c = &ia->conns[atomic_load(&ia->current)];
    if (ia->tls != NULL) {
        int rc = eddy_tls_add(ch, ia->tls, &ia->tls_opts, NULL);
        if (rc != 0) {
            return rc;
        }
    }
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "client", &client_ops, c, NULL);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The client's TLS context: verification on unless insecure, against ca or the system's. */
static eddy_tls_context_t *tls_context(const char *ca, bool insecure)
{
    eddy_tls_context_t *c = example_tls_context(EDDY_TLS_CLIENT, "eddy-echo-client");
    if (c == NULL) {
        return NULL;
    }
    int rc = insecure ? eddy_tls_context_verify(c, EDDY_TLS_VERIFY_NONE) : 0;
    if (rc == 0 && ca != NULL) {
        rc = eddy_tls_context_trust_file(c, ca);
    }
    if (rc != 0) {
        fprintf(stderr, "eddy-echo-client: TLS: %s: %s\n", eddy_strerror(rc),
                eddy_tls_context_error(c));
        eddy_tls_context_release(c);
        return NULL;
    }
    return c;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: eddy-echo-client [--host H] [--port N] [--size N] [--count N] "
               "[--connections N] [--threads N] [--progress]\n"
               "                        [--tls [--tls-ca FILE] [--servername NAME] [--insecure]]\n"
               "  --host H          server (default 127.0.0.1; names are resolved)\n"
               "  --port N          port (default 8007)\n"
               "  --size N          bytes per message (default 256)\n"
               "  --count N         messages per connection, one in flight (default 10000)\n"
               "  --connections N   connections at once (default 1)\n"
               "  --threads N       client loops (default 1)\n"
               "  --progress        a live progress line on stderr\n"
               "  --tls             speak TLS, verifying the server's certificate and name\n"
               "  --tls-ca FILE     trust these CAs (PEM) instead of the system's\n"
               "  --servername NAME the name sent (SNI) and verified (default: --host)\n"
               "  --insecure        do not verify the server's certificate\n"
               "Checks every byte; prints messages/s, MB/s and round-trip latency.\n");
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    unsigned long port = 8007, size = 256, count = 10000, conns_n = 1, threads = 1;
    bool progress = false, tls = false, insecure = false;
    const char *tls_ca = NULL, *servername = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--progress") == 0) {
            progress = true;
            continue;
        } else if (strcmp(a, "--tls") == 0) {
            tls = true;
            continue;
        } else if (strcmp(a, "--insecure") == 0) {
            insecure = true;
            continue;
        } else if (strcmp(a, "--tls-ca") == 0 && v != NULL) {
            tls_ca = v;
        } else if (strcmp(a, "--servername") == 0 && v != NULL) {
            servername = v;
        } else if (strcmp(a, "--host") == 0 && v != NULL) {
            host = v;
        } else if (strcmp(a, "--port") == 0 && v != NULL && example_parse_uint(v, 65535, &port)) {
        } else if (strcmp(a, "--size") == 0 && v != NULL && example_parse_uint(v, 16 << 20, &size) &&
                   size > 0) {
        } else if (strcmp(a, "--count") == 0 && v != NULL && example_parse_uint(v, 100000000, &count)) {
        } else if (strcmp(a, "--connections") == 0 && v != NULL &&
                   example_parse_uint(v, 10000, &conns_n) && conns_n > 0) {
        } else if (strcmp(a, "--threads") == 0 && v != NULL && example_parse_uint(v, 64, &threads) &&
                   threads > 0) {
        } else {
            usage(stderr);
            return 2;
        }
        i++;
    }
    run_t run = {.size = size, .count = count, .finished = eddy_promise_new(NULL)};
    atomic_init(&run.left, (unsigned)conns_n);
    conn_t *conns = calloc(conns_n, sizeof(*conns));
    int64_t *rtt = calloc(conns_n * (count ? count : 1), sizeof(*rtt));
    if (conns == NULL || rtt == NULL || run.finished == NULL) {
        fprintf(stderr, "eddy-echo-client: out of memory\n");
        return 1;
    }
    for (unsigned long i = 0; i < conns_n; i++) {
        conns[i] = (conn_t){.run = &run, .id = (unsigned)i, .rtt = rtt + i * count};
    }
    init_arg_t ia = {.conns = conns};
    if (tls && (ia.tls = tls_context(tls_ca, insecure)) == NULL) {
        return 1;
    }
    ia.tls_opts.server_name = servername != NULL ? servername : host;
    eddy_loop_options_t lo = {.name = "echo-client"};
    eddy_loop_group_t *g = eddy_loop_group_new(threads, &lo);
    eddy_bootstrap_t *b = eddy_bootstrap_new();
    eddy_bootstrap_group(b, g);
    eddy_bootstrap_option(b, EDDY_TCP_NODELAY, 1);
    eddy_bootstrap_init(b, init_conn, &ia);

    int64_t t0 = eddy_now_ns();
    int rc = 0;
    unsigned long up = 0; /* connections that came up */
    eddy_channel_t **chans = calloc(conns_n, sizeof(*chans));
    for (; up < conns_n; up++) {
        atomic_store(&ia.current, (unsigned)up);
        eddy_future_t *f = eddy_bootstrap_connect(b, host, (uint16_t)port);
        if (f == NULL || eddy_future_await(f, 30000) != 0 || eddy_future_error(f) != 0) {
            fprintf(stderr, "eddy-echo-client: cannot connect to %s:%lu: %s\n", host, port,
                    f != NULL ? eddy_strerror(eddy_future_error(f)) : "out of memory");
            eddy_future_release(f);
            rc = 1;
            break;
        }
        chans[up] = eddy_channel_retain(eddy_future_channel(f));
        eddy_future_release(f);
    }
    /* Connections that never came up will not finish: count them out. */
    for (unsigned long k = up; k < conns_n; k++) {
        if (atomic_fetch_sub(&run.left, 1) == 1) {
            eddy_promise_succeed(run.finished, NULL);
        }
    }
    conns_n = up;
    if (conns_n > 0) {
        /* With --progress, a live line every quarter second until the run ends. */
        int64_t deadline = eddy_now_ns() + (int64_t)600 * 1000000000;
        while (eddy_future_await(run.finished, progress ? 250 : 600000) == EDDY_ETIMEDOUT &&
               eddy_now_ns() < deadline) {
            if (progress) {
                double el = (double)(eddy_now_ns() - t0) / 1e9;
                uint64_t d = atomic_load(&run.done);
                fprintf(stderr, "\r  %5.1f s: %llu of %llu messages, %.0f messages/s   ", el,
                        (unsigned long long)d, (unsigned long long)(conns_n * count),
                        (double)d / el);
            }
        }
        if (progress) {
            fprintf(stderr, "\r%70s\r", "");
        }
    }
    double secs = (double)(eddy_now_ns() - t0) / 1e9;
    for (unsigned long i = 0; i < conns_n; i++) {
        eddy_channel_close(chans[i], NULL);
        eddy_future_await(eddy_channel_close_future(chans[i]), 2000);
        eddy_channel_release(chans[i]);
    }
    free(chans);
    eddy_bootstrap_free(b);
    eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000), 5000);
    eddy_loop_group_free(g);
    eddy_tls_context_release(ia.tls);

    uint64_t done = atomic_load(&run.done);
    uint64_t want = (uint64_t)conns_n * count;
    size_t n = 0;
    for (unsigned long i = 0; i < conns_n; i++) {
        for (uint64_t k = 0; k < count; k++) {
            if (conns[i].rtt[k] > 0) {
                rtt[n++] = conns[i].rtt[k];
            }
        }
    }
    qsort(rtt, n, sizeof(*rtt), cmp_i64);
    printf("eddy-echo-client: %llu of %llu messages of %lu bytes echoed over %lu "
           "connection(s) in %.3f s\n",
           (unsigned long long)done, (unsigned long long)want, size, conns_n, secs);
    if (n > 0) {
        printf("  %.0f messages/s, %.2f MB/s each way; round trip p50 %.1f us, p99 %.1f us, "
               "max %.1f us\n",
               (double)done / secs, (double)done * (double)size / secs / 1e6,
               (double)rtt[n / 2] / 1e3, (double)rtt[n * 99 / 100] / 1e3,
               (double)rtt[n - 1] / 1e3);
    }
    uint64_t bad = atomic_load(&run.mismatches);
    if (bad != 0) {
        printf("  %llu connection(s) got bytes that were not sent\n", (unsigned long long)bad);
    }
    eddy_future_release(run.finished);
    free(conns);
    free(rtt);
    return rc == 0 && bad == 0 && done == want ? 0 : 1;
}
