/*
 * eddy-http-server: an HTTP/1.1 and HTTP/2 server on eddy's HTTP codecs (include/eddy/http.h,
 * include/eddy/http2.h).
 *
 *   eddy-http-server [--host ADDR] [--port N] [--threads N] [--idle-timeout S]
 *                    [--tls CERT KEY] [--max-body BYTES] [--gzip]
 *
 *   GET /          200 "Hello, World!" as text/plain, keep-alive
 *   GET /stats     the server's counters as JSON: connections, requests, each loop's metrics
 *   POST /echo     200 with the request's body (at most --max-body bytes: 413 past it)
 *   GET /bytes/N   200 with N bytes (N at most 64 MiB)
 *   otherwise      404
 *
 * One port speaks HTTP/1.1 and HTTP/2: h2c by prior knowledge (curl --http2-prior-knowledge,
 * h2load, gRPC clients) and by "Upgrade: h2c" (curl --http2), and with --tls, h2 chosen by
 * ALPN. The handler below is the same for both versions: eddy_h2_server_upgrade() swaps the
 * HTTP/1.1 handlers for HTTP/2's when the client speaks it, and the adapter hands the handler
 * the same request objects.
 *
 * Bad requests are answered (400, 413, 414, 431, 501, 505) with "Connection: close" and the
 * connection closes once the answer is written; the others go on being served. Pipelined
 * requests are answered in order, the answers of one read flushed together in one writev.
 * SIGINT or SIGTERM stop it gracefully.
 *
 * --gzip puts the response encoder and the compressor (include/eddy/http_coding.h) before the
 * handler, which then writes response objects on HTTP/1.1 too, not pre-encoded bytes: bodies
 * of 1 KiB or more go compressed with the best coding the client accepts among those built
 * (br, zstd, gzip, deflate); with --root, files too, compressed as they are read (a file with
 * a precompressed sibling the client takes is served from the sibling instead).
 *
 * The pipeline is the library's pieces, as Netty's HttpHelloWorldServer is: a message deadline
 * (--request-timeout: a request must arrive whole within it, however slowly its bytes
 * trickle), a read timeout (--idle-timeout), the request decoder and aggregator, then the
 * handler below. A connection that must end (Connection: close, HTTP/1.0, a bad request) ends
 * with the channel's close after flush: FIN after the answer, then what the client still
 * sends is read and dropped for a while (a lingering close, EDDY_LINGER_MS), so a pipelined
 * request behind it cannot turn the close into a reset that loses the answer. The handler
 * keeps no timer and no channel pointer of its own.
 */
#include <eddy/eddy.h>
#include <eddy/http.h>

#include "example_util.h"

#include <signal.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char hello_body[] = "Hello, World!";

/* Requests answered, one counter per loop: each loop writes only its own (no lock prefix,
 * no shared cache line), /stats sums them. Beside it the loop's copy of the /bytes pattern,
 * whose answers are slices of it (no copy, and no reference count shared between loops). */
typedef struct loop_stats_s {
    alignas(64) _Atomic uint64_t requests;
    eddy_buf_t *pattern;
} loop_stats_t;

static eddy_loop_group_t *loops;
static loop_stats_t *stats;
static eddy_server_bootstrap_t *server;
static int64_t idle_timeout_ms = 60000;
static int64_t request_timeout_ms = 30000; /* --request-timeout; 0: none */
static size_t max_body = (size_t)1 << 20;  /* --max-body */
static _Atomic uint64_t timeouts;          /* connections closed by either timeout */
static bool gzip;                          /* --gzip: responses through the compressor */
static eddy_http_files_t *files;           /* --root: the directory served, or NULL */

/* The answer to GET / with keep-alive, pre-encoded per loop thread and rebuilt when the
 * loop's cached Date (eddy_http_date: renewed once a second) changes. */
typedef struct hello_cache_s {
    char date[EDDY_HTTP_DATE_LEN + 1]; /* the Date it was built with */
    size_t len;
    char bytes[256];
} hello_cache_t;

static _Thread_local hello_cache_t hello;

static void hello_refresh(eddy_loop_t *loop)
{
    const char *date = eddy_http_date(loop);
    if (hello.len > 0 && memcmp(hello.date, date, EDDY_HTTP_DATE_LEN) == 0) {
        return;
    }
    memcpy(hello.date, date, sizeof(hello.date));
    int n = snprintf(hello.bytes, sizeof(hello.bytes),
                     "HTTP/1.1 200 OK\r\nServer: eddy\r\nDate: %s\r\n"
                     "Content-Type: text/plain\r\nContent-Length: %zu\r\n\r\n%s",
                     hello.date, sizeof(hello_body) - 1, hello_body);
    hello.len = n > 0 && (size_t)n < sizeof(hello.bytes) ? (size_t)n : 0;
}

/* Per connection: the answer being built, and whether we are closing. */
typedef struct conn_s {
    eddy_buf_t *out;     /* the answer being built */
    loop_stats_t *stats; /* this connection's loop's counters */
    bool wrote;          /* answers were written since the last flush */
    bool closing;        /* answered with Connection: close: ignore the rest */
} conn_t;

/* How long a closing connection reads and drops what the peer still sends (nginx's
 * lingering_timeout is 5 s; our answers are small, a second is plenty on a LAN). */
#define LINGER_MS 1000

/* The buffer for the current request's answer. NULL when out of memory. */
static eddy_buf_t *conn_out(eddy_ctx_t *ctx, conn_t *c)
{
    if (c->out == NULL) {
        c->out = eddy_buf_alloc(eddy_ctx_alloc(ctx), 256, EDDY_BUF_DEFAULT_MAX_CAPACITY);
    }
    return c->out;
}

/* Append an answer to the current one: status, optional content type and body (taken over). */
static void respond(eddy_ctx_t *ctx, conn_t *c, const eddy_http_request_t *req, int status,
                    const char *type, eddy_buf_t *body)
{
    eddy_http_response_t *r = eddy_http_response_new(status);
    bool object = req->version == 20 || gzip; /* written as a response, not as bytes */
    eddy_buf_t *out = object ? NULL : conn_out(ctx, c);
    if (r == NULL || (out == NULL && !object)) {
        if (r != NULL) {
            eddy_msg_release(eddy_http_response_msg(r));
        }
        if (body != NULL) {
            eddy_buf_release(body);
        }
        c->closing = true;
        return;
    }
    r->version = req->version == 10 ? 10 : 11;
    r->keep_alive = req->keep_alive && req->error == 0;
    r->head_only = req->method == EDDY_HTTP_HEAD;
    eddy_http_response_add_header(r, "Server", "eddy");
    eddy_http_response_add_header(r, "Date", hello.date);
    if (type != NULL) {
        eddy_http_response_add_header(r, "Content-Type", type);
    }
    eddy_http_response_set_body(r, body);
    if (object) {
        /* HTTP/2: the response object goes to the adapter, on the request's stream; with
         * --gzip, through the compressor (and on HTTP/1.1 the encoder, which closes after a
         * response that does not keep alive). */
        r->stream_id = req->stream_id;
        c->closing = c->closing || (req->version != 20 && !r->keep_alive);
        eddy_ctx_write(ctx, eddy_http_response_msg(r), NULL);
        c->wrote = true;
        return;
    }
    if (eddy_http_response_encode(r, out) != 0 || !r->keep_alive) {
        c->closing = true;
    }
    eddy_msg_release(eddy_http_response_msg(r));
}

/* Append JSON text, formatted, to b (errors leave it short: /stats is best effort). */
static void put(eddy_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(eddy_buf_t *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0) {
        eddy_buf_write_bytes(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
    }
}

static eddy_buf_t *stats_json(void)
{
    eddy_buf_t *b = eddy_buf_new(1024);
    if (b == NULL) {
        return NULL;
    }
    eddy_server_counters_t sc;
    eddy_server_bootstrap_counters(server, &sc);
    size_t n = eddy_loop_group_size(loops);
    uint64_t requests = 0;
    for (size_t i = 0; i < n; i++) {
        requests += atomic_load_explicit(&stats[i].requests, memory_order_relaxed);
    }
    put(b, "{\"connections\":{\"current\":%llu,\"total\":%llu},\"requests\":%llu,\"loops\":[",
        (unsigned long long)sc.active, (unsigned long long)sc.accepted,
        (unsigned long long)requests);
    for (size_t i = 0; i < n; i++) {
        eddy_loop_metrics_t m;
        eddy_loop_metrics(eddy_loop_group_loop(loops, i), &m);
        put(b,
            "%s{\"loop\":%zu,\"requests\":%llu,\"turns\":%llu,\"io_events\":%llu,"
            "\"tasks_run\":%llu,\"timers_fired\":%llu,\"wakeups\":%llu,\"poll_ns\":%llu,"
            "\"io_ns\":%llu,\"task_ns\":%llu,\"task_queue_depth\":%lld,\"lag_max_ns\":%llu,"
            "\"stalls\":%llu}",
            i > 0 ? "," : "", i,
            (unsigned long long)atomic_load_explicit(&stats[i].requests, memory_order_relaxed),
            (unsigned long long)m.turns, (unsigned long long)m.io_events,
            (unsigned long long)m.tasks_run, (unsigned long long)m.timers_fired,
            (unsigned long long)m.wakeups, (unsigned long long)m.poll_ns,
            (unsigned long long)m.io_ns, (unsigned long long)m.task_ns,
            (long long)m.task_queue_depth, (unsigned long long)m.lag_max_ns,
            (unsigned long long)m.stalls);
    }
    put(b, "]}\n");
    return b;
}

/* What GET /bytes/N answers: whole alphabets (filled in main). Up to its size an answer is
 * a retained slice of the loop's copy, shared as a cached file would be; past it, copied a
 * block at a time. */
static char pattern[26 * 2048];

/* GET /bytes/N: N bytes of the pattern, or 400 for a bad N. */
static void bytes(eddy_ctx_t *ctx, conn_t *c, const eddy_http_request_t *req)
{
    char digits[16];
    size_t k = req->target.len - 7;
    unsigned long n = 0;
    if (k == 0 || k >= sizeof(digits)) {
        respond(ctx, c, req, 400, "text/plain", eddy_buf_from_str("Bad Request\n"));
        return;
    }
    memcpy(digits, req->target.p + 7, k);
    digits[k] = '\0';
    if (!example_parse_uint(digits, 64ul << 20, &n)) {
        respond(ctx, c, req, 400, "text/plain", eddy_buf_from_str("Bad Request\n"));
        return;
    }
    if (n > 0 && n <= sizeof(pattern)) {
        eddy_buf_t *b = eddy_buf_retained_slice(c->stats->pattern, 0, n);
        respond(ctx, c, req, 200, "application/octet-stream", b);
        return;
    }
    eddy_buf_t *b = eddy_buf_alloc(eddy_ctx_alloc(ctx), n > 0 ? n : 1, n > 0 ? n : 1);
    for (size_t done = 0; b != NULL && done < n;) {
        size_t piece = n - done < sizeof(pattern) ? n - done : sizeof(pattern);
        eddy_buf_write_bytes(b, pattern, piece); /* a multiple of 26 but at the end */
        done += piece;
    }
    respond(ctx, c, req, 200, "application/octet-stream", b);
}

static void handle(eddy_ctx_t *ctx, conn_t *c, const eddy_http_request_t *req)
{
    hello_refresh(eddy_ctx_loop(ctx));
    uint64_t n = atomic_load_explicit(&c->stats->requests, memory_order_relaxed);
    atomic_store_explicit(&c->stats->requests, n + 1, memory_order_relaxed);
    if (req->error != 0) {
        char text[64];
        snprintf(text, sizeof(text), "%s\n", eddy_http_reason(req->error));
        respond(ctx, c, req, req->error, "text/plain", eddy_buf_from_str(text));
        return;
    }
    bool get = req->method == EDDY_HTTP_GET || req->method == EDDY_HTTP_HEAD;
    if (get && eddy_http_str_eq(req->target, "/")) {
        if (req->method == EDDY_HTTP_GET && req->version == 11 && req->keep_alive &&
            hello.len > 0 && !gzip) {
            /* The hot path: the pre-encoded answer, appended. */
            eddy_buf_t *out = conn_out(ctx, c);
            if (out == NULL || eddy_buf_write_bytes(out, hello.bytes, hello.len) != 0) {
                c->closing = true;
            }
            return;
        }
        respond(ctx, c, req, 200, "text/plain", eddy_buf_from(hello_body, sizeof(hello_body) - 1));
    } else if (get && eddy_http_str_eq(req->target, "/stats")) {
        respond(ctx, c, req, 200, "application/json", stats_json());
    } else if (req->method == EDDY_HTTP_POST && eddy_http_str_eq(req->target, "/echo")) {
        eddy_buf_t *body = req->body != NULL ? eddy_buf_retain(req->body) : NULL;
        respond(ctx, c, req, 200, "application/octet-stream", body);
    } else if (get && req->target.len > 7 && memcmp(req->target.p, "/bytes/", 7) == 0) {
        bytes(ctx, c, req);
    } else {
        respond(ctx, c, req, 404, "text/plain", eddy_buf_from_str("Not Found\n"));
    }
}

static void http_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    conn_t *c = eddy_ctx_state(ctx);
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req != NULL && msg->type == EDDY_MSG_HTTP_FULL_REQUEST && !c->closing) {
        handle(ctx, c, req);
        if (c->out != NULL) {
            /* Queued now, flushed with the rest of the read: in order with what other
             * handlers write meanwhile (the aggregator's "100 Continue"). */
            eddy_ctx_write(ctx, eddy_buf_msg(c->out), NULL);
            c->out = NULL;
            c->wrote = true;
        }
    }
    eddy_msg_release(msg);
}

/* One flush per read: every answer of a pipelined batch goes out in one writev. */
static void http_read_complete(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (c->closing) {
        /* The library's lingering close (EDDY_LINGER_MS): flush, FIN after the answer,
         * drop what still comes, close. */
        eddy_ctx_close_after_flush(ctx, NULL);
    } else if (c->wrote) {
        c->wrote = false;
        eddy_ctx_flush(ctx);
    }
}

static void http_exception(eddy_ctx_t *ctx, int err)
{
    /* Resets and such are the clients' business; a timeout (the message deadline or the
     * read timeout, which close the channel themselves) is counted. */
    if (err == EDDY_ETIMEDOUT) {
        atomic_fetch_add_explicit(&timeouts, 1, memory_order_relaxed);
    }
    eddy_ctx_close(ctx, NULL);
}

static void http_removed(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (c->out != NULL) {
        eddy_buf_release(c->out);
        c->out = NULL;
    }
}

static const eddy_handler_ops_t http_ops = {
    .name = "http",
    .handler_removed = http_removed,
    .channel_read = http_read,
    .channel_read_complete = http_read_complete,
    .exception_caught = http_exception,
};

static conn_t *conn_new(eddy_channel_t *ch)
{
    conn_t *c = calloc(1, sizeof(*c));
    if (c != NULL) {
        c->stats = &stats[eddy_loop_index(eddy_channel_loop(ch))];
    }
    return c;
}

/* A timeout of 0 makes its handler never fire. A failed constructor (no memory) fails the
 * add, which frees the rest. arg: the TLS context, or NULL; TLS goes first, nearest the
 * socket. eddy_h2_server_upgrade() takes the HTTP/1.1 decoder's place when the client speaks
 * HTTP/2. */
static int init_child(eddy_channel_t *ch, void *arg)
{
    eddy_tls_context_t *tls = arg;
    if (tls != NULL) {
        int rc = eddy_tls_add(ch, tls, NULL, NULL);
        if (rc != 0) {
            return rc;
        }
    }
    /* The library's handlers (--root's file handler, --gzip's compressor) answer with response
     * objects, which the response encoder writes; the compressor stays after HTTP/2's adapter
     * when the upgrade puts it in (and removes the encoder). */
    eddy_handler_t h[8];
    size_t n = 0;
    h[n++] = eddy_message_deadline_handler(request_timeout_ms);
    h[n++] = eddy_read_timeout_handler(idle_timeout_ms);
    h[n++] = eddy_h2_server_upgrade(NULL, max_body);
    h[n++] = eddy_http_request_decoder(NULL);
    h[n++] = eddy_http_aggregator(max_body);
    if (gzip || files != NULL) {
        h[n++] = eddy_http_response_encoder();
    }
    if (gzip) {
        h[n++] = eddy_http_compressor(NULL);
    }
    h[n++] = files != NULL ? eddy_http_files_handler(files)
                           : eddy_handler("http", &http_ops, conn_new(ch), eddy_free_state);
    return eddy_pipeline_add_handlers(eddy_channel_pipeline(ch), h, n);
}

/* The server's TLS context from PEM files, offering h2 and http/1.1 by ALPN, or NULL (said
 * on stderr). */
static eddy_tls_context_t *tls_context(const char *cert, const char *key)
{
    eddy_tls_context_t *c = example_tls_context(EDDY_TLS_SERVER, "eddy-http-server");
    if (c == NULL) {
        return NULL;
    }
    size_t n;
    const char *const *alpn = eddy_h2_alpn_protocols(&n);
    int rc = eddy_tls_context_use_certificate_file(c, cert, key);
    if (rc == 0) {
        rc = eddy_tls_context_alpn(c, alpn, n);
    }
    if (rc != 0) {
        fprintf(stderr, "eddy-http-server: TLS: %s: %s\n", eddy_strerror(rc),
                eddy_tls_context_error(c));
        eddy_tls_context_release(c);
        return NULL;
    }
    return c;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: eddy-http-server [--host ADDR] [--port N] [--threads N] [--idle-timeout S]\n"
               "                        [--request-timeout S] [--tls CERT KEY] [--max-body BYTES]\n"
               "                        [--root DIR]\n"
               "  --host ADDR   address to listen on (default 127.0.0.1; 0.0.0.0 for all)\n"
               "  --port N      port (default 8080; 0 picks one)\n"
               "  --threads N   loops, one of which also accepts (default: one per CPU)\n"
               "  --idle-timeout S  close connections that send nothing for S seconds\n"
               "                (default 60; 0: never)\n"
               "  --request-timeout S  close connections whose request has not arrived whole\n"
               "                S seconds after its first bytes (default 30; 0: never)\n"
               "  --tls CERT KEY  serve https (h2 or http/1.1 by ALPN) with this certificate\n"
               "                chain and key (PEM)\n"
               "  --max-body BYTES  the largest request body (default 1048576): 413 past it\n"
               "  --gzip        compress bodies of 1 KiB or more for clients that accept it\n"
               "                (br, zstd, gzip, deflate: those this build has)\n"
               "  --root DIR    serve the files under DIR (GET and HEAD, ranges, conditionals)\n"
               "                instead of the routes below\n"
               "GET / answers \"Hello, World!\", GET /stats the counters as JSON, POST /echo the\n"
               "request's body, GET /bytes/N N bytes, the rest 404. HTTP/1.1 and HTTP/2 (h2c by\n"
               "prior knowledge or Upgrade; h2 by ALPN with --tls) on the same port.\n"
               "SIGINT or SIGTERM stop it gracefully.\n");
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    unsigned long port = 8080, threads = 0, idle = 60, request = 30, body = max_body;
    const char *tls_cert = NULL, *tls_key = NULL, *root = NULL;
    for (int i = 1; i < argc; i += 2) { /* each option and its value */
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--gzip") == 0) {
            gzip = true;
            i--; /* no value */
        } else if (strcmp(a, "--host") == 0 && v != NULL) {
            host = v;
        } else if (strcmp(a, "--port") == 0 && v != NULL && example_parse_uint(v, 65535, &port)) {
        } else if (strcmp(a, "--threads") == 0 && v != NULL &&
                   example_parse_uint(v, 1024, &threads)) {
        } else if (strcmp(a, "--idle-timeout") == 0 && v != NULL &&
                   example_parse_uint(v, 86400, &idle)) {
        } else if (strcmp(a, "--request-timeout") == 0 && v != NULL &&
                   example_parse_uint(v, 86400, &request)) {
        } else if (strcmp(a, "--max-body") == 0 && v != NULL &&
                   example_parse_uint(v, 1ul << 30, &body)) {
        } else if (strcmp(a, "--root") == 0 && v != NULL) {
            root = v;
        } else if (strcmp(a, "--tls") == 0 && v != NULL && i + 2 < argc) {
            tls_cert = v;
            tls_key = argv[i + 2];
            i++; /* two values */
        } else {
            usage(stderr);
            return 2;
        }
    }
    int frc = root != NULL ? eddy_http_files_new(root, NULL, &files) : 0;
    if (frc != 0) {
        fprintf(stderr, "eddy-http-server: --root %s: %s\n", root, eddy_strerror(frc));
        return 1;
    }
    eddy_tls_context_t *tls = NULL;
    if (tls_cert != NULL && (tls = tls_context(tls_cert, tls_key)) == NULL) {
        return 1;
    }
    max_body = body;
    for (size_t i = 0; i < sizeof(pattern); i++) {
        pattern[i] = (char)('a' + i % 26);
    }
    eddy_stop_signals_block(); /* before any loop thread: they inherit it */
    idle_timeout_ms = (int64_t)idle * 1000;
    request_timeout_ms = (int64_t)request * 1000;

    /* One group accepts and serves, as nginx's workers do: with --threads 1, one loop. */
    eddy_loop_options_t opts = {.name = "http"};
    loops = eddy_loop_group_new(threads, &opts);
    server = eddy_server_bootstrap_new();
    size_t stats_size = loops != NULL ? eddy_loop_group_size(loops) * sizeof(*stats) : 0;
    stats = stats_size > 0 ? aligned_alloc(alignof(loop_stats_t), stats_size) : NULL;
    bool patterns = stats != NULL;
    if (stats != NULL) {
        memset(stats, 0, stats_size);
        for (size_t i = 0; i < eddy_loop_group_size(loops); i++) {
            patterns &= (stats[i].pattern = eddy_buf_from(pattern, sizeof(pattern))) != NULL;
        }
    }
    if (loops == NULL || server == NULL || !patterns) {
        fprintf(stderr, "eddy-http-server: out of memory or threads\n");
        return 1;
    }
    example_configure(server, loops, NULL, init_child, tls);
    eddy_server_bootstrap_child_option(server, EDDY_LINGER_MS, LINGER_MS);

    eddy_channel_t *listener = example_bind(server, host, port, "eddy-http-server");
    if (listener == NULL) {
        return 1;
    }
    char addr[80];
    printf("eddy-http-server: listening on %s, %zu loops (eddy %s)\n",
           eddy_addr_format(eddy_channel_local_addr(listener), addr, sizeof(addr)),
           eddy_loop_group_size(loops), eddy_version());
    fflush(stdout);

    int sig = eddy_stop_signals_wait(-1);
    example_unbind(listener);
    /* HTTP/2 connections say GOAWAY and finish the streams in flight; 5 s at most. */
    eddy_future_t *closed = eddy_server_bootstrap_shutdown(server);
    eddy_future_await(closed, 5000);
    eddy_future_release(closed);
    eddy_server_counters_t c;
    eddy_server_bootstrap_counters(server, &c);
    uint64_t requests = 0;
    size_t nloops = eddy_loop_group_size(loops);
    for (size_t i = 0; i < nloops; i++) {
        requests += atomic_load(&stats[i].requests);
    }
    int rc = example_shutdown(server, loops, NULL);
    for (size_t i = 0; i < nloops; i++) {
        eddy_buf_release(stats[i].pattern); /* the slices still out hold it on */
    }
    free(stats);
    eddy_http_files_release(files);
    if (tls != NULL) {
        eddy_tls_context_release(tls);
    }
    printf("eddy-http-server: stopped by %s; %llu connections, %llu requests served, "
           "%llu closed at a timeout\n",
           sig == SIGINT ? "SIGINT" : "SIGTERM", (unsigned long long)c.accepted,
           (unsigned long long)requests,
           (unsigned long long)atomic_load_explicit(&timeouts, memory_order_relaxed));
    return rc;
}
