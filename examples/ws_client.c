/*
 * eddy-ws-client: a WebSocket client (include/eddy/websocket.h) for a terminal or a benchmark.
 *
 *   eddy-ws-client [--count N [--size B]] [--deflate] [--insecure] [--tls-ca CA]
 *                  [--servername NAME] URL
 *
 * URL is ws://HOST[:PORT][/PATH] or wss://... Each line read from standard input goes out as
 * a text message, and each message that comes back is printed, one line per text message
 * (a binary one as "[N bytes of binary]"); what it says itself (connected, closed, errors)
 * goes to standard error. At the end of the input it starts the closing
 * handshake (1000) and exits 0 once the server answered it; a close the server starts is
 * answered, and ends the run the same way.
 *
 * With --count N it sends N text messages of --size bytes (default 32), one at a time, each
 * after the answer to the one before, checks that each answer is the message sent (an echo
 * server's, or a broadcast with nobody else talking), and prints the rate and round-trip
 * times instead of the messages.
 *
 * The pipeline is the library's: TLS for wss (verifying the server's certificate and name
 * unless --insecure), the client handshaker (which sends the upgrade request, checks the 101
 * and installs the WebSocket handlers), then the handler below. Exit status 0 after a clean
 * closing handshake (and, with --count, every answer right), 1 otherwise, 2 for bad usage.
 */
#include <eddy/eddy.h>
#include <eddy/websocket.h>

#include "example_util.h"

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct client_s {
    const char *url;
    eddy_promise_t *ready; /* the handshake: succeeds, or fails with its error */
    unsigned long count;   /* --count (0: lines from stdin) */
    size_t size;
    char *payload; /* what --count sends, size bytes */
    unsigned long sent, answered;
    _Atomic unsigned long mismatches;
    int64_t sent_at;
    int64_t *rtt;            /* per message, ns */
    eddy_promise_t *counted; /* --count: every answer came */
    _Atomic int close_code;  /* the server's close frame's status, 0: none came */
} client_t;

static void send_next(eddy_ctx_t *ctx, client_t *c)
{
    eddy_ws_frame_t *f = eddy_ws_text_frame(c->payload, c->size);
    if (f == NULL) {
        eddy_ctx_fire_exception(ctx, EDDY_ENOMEM);
        return;
    }
    c->sent++;
    c->sent_at = eddy_now_ns();
    eddy_ctx_write_and_flush(ctx, eddy_ws_frame_msg(f), NULL);
}

static void on_answer(eddy_ctx_t *ctx, client_t *c, eddy_ws_frame_t *f)
{
    if (c->answered >= c->sent) {
        atomic_fetch_add(&c->mismatches, 1); /* nothing was asked */
        return;
    }
    if (f->opcode != EDDY_WS_TEXT || eddy_ws_frame_len(f) != c->size ||
        memcmp(eddy_buf_read_ptr(f->payload), c->payload, c->size) != 0) {
        atomic_fetch_add(&c->mismatches, 1);
    }
    c->rtt[c->answered++] = eddy_now_ns() - c->sent_at;
    if (c->sent < c->count) {
        send_next(ctx, c);
    } else {
        eddy_promise_succeed(c->counted, NULL);
    }
}

static void client_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    client_t *c = eddy_ctx_state(ctx);
    eddy_ws_frame_t *f = eddy_ws_frame_of(msg);
    if (f == NULL) {
        eddy_msg_release(msg);
        return;
    }
    if (f->opcode == EDDY_WS_CLOSE) {
        /* The protocol handler answered it (or it answers ours) and closes the channel. */
        atomic_store(&c->close_code, eddy_ws_frame_close_code(f));
    } else if (c->count > 0) {
        on_answer(ctx, c, f);
    } else if (f->opcode == EDDY_WS_TEXT) {
        fwrite(eddy_buf_read_ptr(f->payload), 1, eddy_ws_frame_len(f), stdout);
        fputc('\n', stdout);
        fflush(stdout);
    } else {
        printf("[%zu bytes of binary]\n", eddy_ws_frame_len(f));
        fflush(stdout);
    }
    eddy_msg_release(msg);
}

static void client_event(eddy_ctx_t *ctx, int event, void *data)
{
    client_t *c = eddy_ctx_state(ctx);
    const eddy_ws_handshake_event_t *ev = data;
    if (event == EDDY_EVENT_WS_HANDSHAKE) {
        fprintf(stderr, "eddy-ws-client: connected to %s%s%s\n", c->url,
                ev->extensions != NULL ? " with " : "",
                ev->extensions != NULL ? ev->extensions : "");
        eddy_promise_succeed(c->ready, NULL);
        if (c->count > 0) {
            send_next(ctx, c);
        }
    } else if (event == EDDY_EVENT_WS_HANDSHAKE_FAILED) {
        fprintf(stderr, "eddy-ws-client: handshake failed: %s\n", ev->reason);
        eddy_promise_fail(c->ready, ev->error != 0 ? ev->error : EDDY_EDECODE);
    } else if (event == EDDY_EVENT_TLS_HANDSHAKE) {
        const eddy_tls_handshake_event_t *hs = data;
        if (hs->error != 0) {
            fprintf(stderr, "eddy-ws-client: TLS handshake failed: %s\n", hs->reason);
        }
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

static void client_exception(eddy_ctx_t *ctx, int err)
{
    fprintf(stderr, "eddy-ws-client: %s\n", eddy_strerror(err));
    /* The server's protocol errors were answered with a close frame, and the library closes
     * once it is out (a lingering close): closing at once could reset the connection under
     * it. */
    if (err != EDDY_EDECODE && err != EDDY_ETOOLONGFRAME) {
        eddy_ctx_close(ctx, NULL);
    }
}

static void client_inactive(eddy_ctx_t *ctx)
{
    client_t *c = eddy_ctx_state(ctx);
    eddy_promise_fail(c->ready, EDDY_ECLOSED); /* no-op once it succeeded */
    eddy_ctx_fire_channel_inactive(ctx);
}

static const eddy_handler_ops_t client_ops = {
    .name = "ws-client",
    .channel_read = client_read,
    .user_event_triggered = client_event,
    .exception_caught = client_exception,
    .channel_inactive = client_inactive,
};

typedef struct init_arg_s {
    client_t *client;
    eddy_ws_config_t ws;
    eddy_tls_context_t *tls; /* NULL: ws:// */
    eddy_tls_handler_options_t tls_opts;
} init_arg_t;

static int init_conn(eddy_channel_t *ch, void *arg)
{
    init_arg_t *ia = arg;
    if (ia->tls != NULL) {
        int rc = eddy_tls_add(ch, ia->tls, &ia->tls_opts, NULL);
        if (rc != 0) {
            return rc;
        }
    }
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_ws_client_handshaker(&ia->ws),
                                  eddy_handler("ws-client", &client_ops, ia->client, NULL));
}

/* A ws:// or wss:// URL (eddy_url_parse), without a fragment, so that its path runs to the
 * end of the string: the handshake sends it as it is ("/" when there is none). */
static bool parse_url(const char *s, eddy_url_t *u, const char **path)
{
    if ((strncmp(s, "ws://", 5) != 0 && strncmp(s, "wss://", 6) != 0) ||
        strchr(s, '#') != NULL || eddy_url_parse(s, u) != 0) {
        return false;
    }
    if (u->path.len > 0 && u->path.p[0] != '/') {
        return false; /* "ws://host?query": a query needs a path before it here */
    }
    *path = u->path.len > 0 ? u->path.p : "/";
    return true;
}

/* The client's TLS context: verification on unless insecure, against ca or the system's. */
static eddy_tls_context_t *tls_context(const char *ca, bool insecure)
{
    eddy_tls_context_t *c = example_tls_context(EDDY_TLS_CLIENT, "eddy-ws-client");
    if (c == NULL) {
        return NULL;
    }
    int rc = insecure ? eddy_tls_context_verify(c, EDDY_TLS_VERIFY_NONE) : 0;
    if (rc == 0 && ca != NULL) {
        rc = eddy_tls_context_trust_file(c, ca);
    }
    if (rc != 0) {
        fprintf(stderr, "eddy-ws-client: TLS: %s: %s\n", eddy_strerror(rc),
                eddy_tls_context_error(c));
        eddy_tls_context_release(c);
        return NULL;
    }
    return c;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Send each line of standard input as a text message until its end, or until the channel
 * closes (the server ended the conversation). */
static void send_lines(eddy_channel_t *ch)
{
    eddy_future_t *closed = eddy_channel_close_future(ch);
    char *line = NULL;
    size_t cap = 0;
    struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
    while (!eddy_future_is_done(closed)) {
        int n = poll(&pfd, 1, 100); /* now and then, look whether the channel closed */
        if (n == 0 || (n < 0 && errno == EINTR)) {
            continue;
        }
        ssize_t len = n > 0 ? getline(&line, &cap, stdin) : -1;
        if (len < 0) {
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            len--;
        }
        if (!eddy_ws_utf8_valid(line, (size_t)len)) {
            fprintf(stderr, "eddy-ws-client: a line that is not UTF-8 was not sent\n");
            continue;
        }
        eddy_ws_frame_t *f = eddy_ws_text_frame(line, (size_t)len);
        if (f != NULL) {
            eddy_channel_write_and_flush(ch, eddy_ws_frame_msg(f), NULL);
        }
    }
    free(line);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: eddy-ws-client [--count N [--size B]] [--deflate] [--insecure] "
               "[--tls-ca CA]\n"
               "                      [--servername NAME] URL\n"
               "  URL               ws://HOST[:PORT][/PATH] or wss://HOST[:PORT][/PATH]\n"
               "  --count N         send N messages, one at a time, check the answers and\n"
               "                    print the rate (default: send the lines of stdin)\n"
               "  --size B          bytes per --count message (default 32)\n"
               "  --deflate         offer permessage-deflate\n"
               "  --insecure        wss: do not verify the server's certificate\n"
               "  --tls-ca CA       wss: trust these CAs (PEM) instead of the system's\n"
               "  --servername NAME wss: the name sent (SNI) and verified (default: HOST)\n"
               "Prints each text message received on a line of its own. Exits 0 after a clean\n"
               "closing handshake.\n");
}

int main(int argc, char **argv)
{
    unsigned long count = 0, size = 32;
    bool deflate = false, insecure = false;
    const char *tls_ca = NULL, *servername = NULL, *url_text = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--deflate") == 0) {
            deflate = true;
        } else if (strcmp(a, "--insecure") == 0) {
            insecure = true;
        } else if (strcmp(a, "--tls-ca") == 0 && v != NULL) {
            tls_ca = argv[++i];
        } else if (strcmp(a, "--servername") == 0 && v != NULL) {
            servername = argv[++i];
        } else if (strcmp(a, "--count") == 0 && v != NULL &&
                   example_parse_uint(v, 100000000, &count) && count > 0) {
            i++;
        } else if (strcmp(a, "--size") == 0 && v != NULL &&
                   example_parse_uint(v, EDDY_WS_MAX_MESSAGE_SIZE, &size)) {
            i++;
        } else if (a[0] != '-' && url_text == NULL) {
            url_text = a;
        } else {
            usage(stderr);
            return 2;
        }
    }
    eddy_url_t url;
    const char *path = "/";
    if (url_text == NULL || !parse_url(url_text, &url, &path)) {
        if (url_text != NULL) {
            fprintf(stderr, "eddy-ws-client: not a ws:// or wss:// URL: %s\n", url_text);
        }
        usage(stderr);
        return 2;
    }

    client_t c = {.url = url_text, .count = count, .size = size, .ready = eddy_promise_new(NULL)};
    c.counted = eddy_promise_new(NULL);
    c.payload = malloc(size > 0 ? size : 1);
    c.rtt = calloc(count > 0 ? count : 1, sizeof(*c.rtt));
    if (c.ready == NULL || c.counted == NULL || c.payload == NULL || c.rtt == NULL) {
        fprintf(stderr, "eddy-ws-client: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < size; i++) {
        c.payload[i] = (char)('a' + i % 26);
    }
    init_arg_t ia = {
        .client = &c,
        .ws = {.host = url.authority, .uri = path, .deflate = deflate},
    };
    if (url.tls && (ia.tls = tls_context(tls_ca, insecure)) == NULL) {
        return 1;
    }
    ia.tls_opts.server_name = servername != NULL ? servername : url.host;

    eddy_loop_options_t lo = {.name = "ws-client"};
    eddy_loop_group_t *g = eddy_loop_group_new(1, &lo);
    eddy_bootstrap_t *b = eddy_bootstrap_new();
    if (g == NULL || b == NULL) {
        fprintf(stderr, "eddy-ws-client: out of memory or threads\n");
        return 1;
    }
    eddy_bootstrap_group(b, g);
    eddy_bootstrap_option(b, EDDY_TCP_NODELAY, 1);
    eddy_bootstrap_init(b, init_conn, &ia);

    int rc = 1;
    eddy_channel_t *ch = NULL;
    eddy_future_t *f = eddy_bootstrap_connect(b, url.host, url.port);
    if (f == NULL || eddy_future_await(f, 30000) != 0 || eddy_future_error(f) != 0) {
        fprintf(stderr, "eddy-ws-client: cannot connect to %s:%u: %s\n", url.host, url.port,
                f != NULL ? eddy_strerror(eddy_future_error(f)) : "out of memory");
    } else {
        ch = eddy_channel_retain(eddy_future_channel(f));
    }
    eddy_future_release(f);

    /* The handshaker has its own deadline (EDDY_WS_HANDSHAKE_TIMEOUT_MS), and so has TLS. */
    if (ch != NULL && eddy_future_await(c.ready, -1) == 0 && eddy_future_error(c.ready) == 0) {
        int64_t t0 = eddy_now_ns();
        if (count > 0) {
            eddy_future_t *closed = eddy_channel_close_future(ch);
            while (eddy_future_await(c.counted, 100) == EDDY_ETIMEDOUT &&
                   !eddy_future_is_done(closed)) {
            }
        } else {
            send_lines(ch);
        }
        double secs = (double)(eddy_now_ns() - t0) / 1e9;
        /* Our close (1000), unless the server's came first; the protocol handler closes the
         * channel once the server answers, or after its close timeout. */
        eddy_ws_frame_t *bye = eddy_ws_close_frame(EDDY_WS_CLOSE_NORMAL, NULL);
        if (bye != NULL) {
            eddy_channel_write_and_flush(ch, eddy_ws_frame_msg(bye), NULL);
        }
        eddy_future_await(eddy_channel_close_future(ch), EDDY_WS_CLOSE_TIMEOUT_MS + 2000);
        int code = atomic_load(&c.close_code);
        bool clean = code != 0;
        if (!clean) {
            fprintf(stderr, "eddy-ws-client: the connection closed without a closing "
                            "handshake\n");
        }
        rc = clean ? 0 : 1;
        if (count > 0) {
            unsigned long done = c.answered;
            unsigned long bad = atomic_load(&c.mismatches);
            printf("eddy-ws-client: %lu of %lu messages of %lu bytes answered in %.3f s, "
                   "%lu wrong\n",
                   done, count, size, secs, bad);
            if (done > 0) {
                qsort(c.rtt, done, sizeof(*c.rtt), cmp_i64);
                printf("  %.0f messages/s; round trip p50 %.1f us, p99 %.1f us, max %.1f us\n",
                       (double)done / secs, (double)c.rtt[done / 2] / 1e3,
                       (double)c.rtt[done * 99 / 100] / 1e3, (double)c.rtt[done - 1] / 1e3);
            }
            if (done != count || bad != 0) {
                rc = 1;
            }
        }
        if (clean && code != EDDY_WS_CLOSE_NORMAL) {
            fprintf(stderr, "eddy-ws-client: the server closed with %d\n", code);
        }
    }
    if (ch != NULL) {
        eddy_channel_close(ch, NULL);
        eddy_future_await(eddy_channel_close_future(ch), 2000);
        eddy_channel_release(ch);
    }
    eddy_bootstrap_free(b);
    eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000), 5000);
    eddy_loop_group_free(g);
    eddy_tls_context_release(ia.tls);
    eddy_future_release(c.ready);
    eddy_future_release(c.counted);
    free(c.payload);
    free(c.rtt);
    return rc;
}
