/*
 * eddy-http-client: fetches URLs like `curl -s`, over eddy_http_client_t (a keyed pool with
 * keep-alive and TLS, HTTP/1.1 or HTTP/2), or loads a server with pipelined requests like wrk,
 * or with concurrent HTTP/2 streams like h2load.
 *
 *   eddy-http-client [--insecure] [--cacert FILE] [--timeout-ms N] [-X METHOD] [-d BODY] [-i]
 *                    [-Z] [--compressed] [--http1.1 | --http2 | --http2-prior-knowledge] URL...
 *   eddy-http-client --load [--connections N] [--depth D | --streams M] [--duration S]
 *                    [--threads T] [--http2-prior-knowledge] [-X METHOD] [-d BODY] URL
 *
 * Fetching: each URL in turn (with -Z, as curl's --parallel, all at once, printed in order);
 * the body goes to stdout (with -i, the status line and headers first: "HTTP/2 200 " and the
 * names in lower case over HTTP/2, as curl prints them). An error is one line on stderr,
 * "eddy-http-client: URL: reason". Exit status 0 when every URL got a response (any status), 1
 * when one did not, 2 for bad arguments. As curl: https offers h2 and http/1.1 by ALPN and
 * speaks what the server chose (--http2 asks for that, the default; --http1.1 offers no
 * ALPN); --http2-prior-knowledge speaks HTTP/2 from the first byte on http:// (h2c). --http2
 * on an http:// URL stays HTTP/1.1: there is no Upgrade: h2c here. --compressed, as curl's,
 * asks for every content coding the build has and prints the body decompressed.
 *
 * Loading: N connections (spread over T loops), each keeping D requests in flight for S
 * seconds; then one line of requests/s and latency percentiles, and one JSON line. A
 * connection is a client codec and aggregator with a small handler that sends the next request
 * for each response: per request no future, no pool, one shared request encoded again. With
 * --streams M (h2load's -m) or --http2-prior-knowledge, a connection speaks HTTP/2 (h2c by
 * prior knowledge) and keeps M streams open, a new one for each that ends, through the
 * connection handler's streams directly. Exit 1 when a response was not 2xx-3xx or a
 * connection failed.
 */
#include "example_util.h"

#include <string.h>
#include <unistd.h>

#define NAME "eddy-http-client"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: " NAME " [--insecure] [--cacert FILE] [--timeout-ms N] [-X METHOD] "
            "[-d BODY] [-i] [-Z] [--compressed]\n"
            "       " NAME "     [--http1.1 | --http2 | --http2-prior-knowledge] URL...\n"
            "       " NAME " --load [--connections N] [--depth D | --streams M] [--duration S] "
            "[--threads T] [--http2-prior-knowledge] [-X METHOD] [-d BODY] URL\n"
            "  -i  the status line and headers too       -Z  all URLs at once (curl's "
            "--parallel)\n"
            "  --http1.1  HTTP/1.1 only   --http2  h2 by ALPN over https (the default)\n"
            "  --http2-prior-knowledge  HTTP/2 from the first byte on http:// (h2c)\n"
            "  --compressed  ask for br, zstd, gzip, deflate; print the body decompressed\n"
            "  --streams M  with --load: HTTP/2, M streams in flight per connection\n");
}

typedef struct args_s {
    const char *method;
    const char *data; /* -d: the body, or NULL */
    const char *cacert;
    bool insecure, include, load, parallel, compressed;
    eddy_http_client_version_t version;
    unsigned long timeout_ms, connections, depth, streams, duration_s, threads;
    const char **urls;
    int nurls;
} args_t;

static eddy_http_request_t *make_request(const args_t *a, const char *target)
{
    eddy_http_request_t *req = eddy_http_request_new(a->method, target);
    if (req == NULL) {
        fprintf(stderr, NAME ": not a method: %s\n", a->method);
        return NULL;
    }
    if (a->data != NULL) {
        eddy_buf_t *body = eddy_buf_alloc(NULL, strlen(a->data), SIZE_MAX);
        if (body == NULL || eddy_buf_write_bytes(body, a->data, strlen(a->data)) != 0 ||
            eddy_http_request_add_header(req, "Content-Type",
                                         "application/x-www-form-urlencoded") != 0) {
            eddy_buf_release(body);
            eddy_msg_release(eddy_http_request_msg(req));
            return NULL;
        }
        eddy_http_request_set_body(req, body);
    }
    return req;
}

/* ---------------------------------------------------------------------------------------
 * Fetching
 */

static void print_response(const eddy_http_response_t *r, bool include)
{
    if (include && r->version == 20) {
        printf("HTTP/2 %d \r\n", r->status); /* no reason phrase in HTTP/2; curl's line */
    } else if (include) {
        printf("HTTP/1.%d %d %.*s\r\n", r->version == 10 ? 0 : 1, r->status, (int)r->reason.len,
               r->reason.p);
    }
    if (include) {
        for (size_t i = 0; i < r->header_count; i++) {
            const eddy_http_header_t *h = &r->headers[i];
            printf("%.*s: %.*s\r\n", (int)h->name.len, h->name.p, (int)h->value.len,
                   h->value.p);
        }
        printf("\r\n");
    }
    if (r->body != NULL) {
        fwrite(eddy_buf_read_ptr(r->body), 1, eddy_buf_readable(r->body), stdout);
    }
    fflush(stdout);
}

static eddy_tls_context_t *tls_context(const args_t *a)
{
    eddy_tls_context_t *c = example_tls_context(EDDY_TLS_CLIENT, NAME);
    if (c == NULL) {
        return NULL;
    }
    int rc = a->insecure ? eddy_tls_context_verify(c, EDDY_TLS_VERIFY_NONE) : 0;
    if (rc == 0 && a->cacert != NULL) {
        rc = eddy_tls_context_trust_file(c, a->cacert);
    }
    if (rc == 0 && a->version != EDDY_HTTP_CLIENT_HTTP1) { /* h2 and http/1.1 by ALPN */
        size_t n;
        const char *const *alpn = eddy_h2_alpn_protocols(&n);
        rc = eddy_tls_context_alpn(c, alpn, n);
    }
    if (rc != 0) {
        fprintf(stderr, NAME ": TLS: %s: %s\n", eddy_strerror(rc), eddy_tls_context_error(c));
        eddy_tls_context_release(c);
        return NULL;
    }
    return c;
}

static int fetch(const args_t *a)
{
    eddy_tls_context_t *tls = tls_context(a);
    if (tls == NULL) {
        return 1;
    }
    eddy_loop_options_t lo = {.name = "http-client"};
    eddy_loop_group_t *g = eddy_loop_group_new(1, &lo);
    eddy_http_client_options_t o = {.tls = tls, .response_timeout_ms = (int64_t)a->timeout_ms,
                                    .connect_timeout_ms = (int64_t)a->timeout_ms,
                                    .http_version = a->version,
                                    .decompress = a->compressed};
    eddy_http_client_t *client = g != NULL ? eddy_http_client_new(g, &o) : NULL;
    if (client == NULL) {
        fprintf(stderr, NAME ": out of memory or threads\n");
        return 1;
    }
    /* In turn, or with -Z all sent first (over HTTP/2 they share one connection), then each
     * printed in order as it completes. */
    eddy_future_t **fs = calloc((size_t)a->nurls, sizeof(*fs));
    if (fs == NULL) {
        fprintf(stderr, NAME ": out of memory\n");
        return 1;
    }
    int rc = 0;
    for (int i = 0, sent = 0; i < a->nurls; i++) {
        for (; sent < a->nurls && (sent <= i || a->parallel); sent++) {
            eddy_http_request_t *req = make_request(a, "/");
            fs[sent] = req != NULL ? eddy_http_client_send(client, a->urls[sent], req) : NULL;
        }
        eddy_future_t *f = fs[i];
        /* The client's own deadlines end every request; the wait has a bound all the same. */
        int err = f == NULL ? EDDY_ENOMEM
                  : eddy_future_await(f, (int64_t)a->timeout_ms * 3 + 1000) != 0
                      ? EDDY_ETIMEDOUT
                      : eddy_future_error(f);
        if (err == 0) {
            print_response(eddy_future_http_response(f), a->include);
        } else {
            fprintf(stderr, NAME ": %s: %s\n", a->urls[i], eddy_strerror(err));
            rc = 1;
        }
        eddy_future_cancel(f);
        eddy_future_release(f);
    }
    free(fs);
    eddy_future_t *closed = eddy_http_client_close(client);
    eddy_future_await(closed, 5000);
    eddy_future_release(closed);
    eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000), 5000);
    eddy_loop_group_free(g);
    eddy_tls_context_release(tls);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Loading
 */

/* Latencies as a log-linear histogram, as wrk keeps them: exact below 64 ns, then 32 buckets
 * per power of two (3% wide), so that recording costs an add and the percentiles no sort. */
#define HIST_SUB 32
#define HIST_BUCKETS (64 + 58 * HIST_SUB)

typedef struct latency_hist_s {
    _Atomic uint64_t n[HIST_BUCKETS];
} latency_hist_t;

static void hist_add(latency_hist_t *h, int64_t ns)
{
    uint64_t v = ns > 0 ? (uint64_t)ns : 0;
    int i = (int)v;
    if (v >= 64) {
        int e = 63 - __builtin_clzll(v);
        i = 64 + (e - 6) * HIST_SUB + (int)((v >> (e - 5)) & (HIST_SUB - 1));
    }
    atomic_fetch_add_explicit(&h->n[i], 1, memory_order_relaxed);
}

/* The latency in us at quantile q (0.5, 0.99...): the middle of its bucket; 0 when empty. */
static double hist_quantile(latency_hist_t *h, double q)
{
    uint64_t total = 0;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        total += atomic_load_explicit(&h->n[i], memory_order_relaxed);
    }
    uint64_t rank = (uint64_t)(q * (double)total), seen = 0;
    for (int i = 0; i < HIST_BUCKETS && total > 0; i++) {
        seen += atomic_load_explicit(&h->n[i], memory_order_relaxed);
        if (seen > rank) {
            if (i < 64) {
                return i / 1e3;
            }
            int e = (i - 64) / HIST_SUB + 6, sub = (i - 64) % HIST_SUB;
            double lo = (double)((uint64_t)(HIST_SUB + sub) << (e - 5));
            return (lo + (double)(1ull << (e - 5)) / 2) / 1e3;
        }
    }
    return 0;
}

typedef struct load_s {
    eddy_http_request_t *req; /* written again for every request (retained each time) */
    unsigned long depth;
    unsigned long streams;       /* HTTP/2: streams in flight per connection; 0: HTTP/1.1 */
    eddy_http_header_t *fields;  /* HTTP/2: the request's head, sent again for every stream */
    size_t nfields;
    eddy_buf_t *body;            /* HTTP/2: -d's bytes, sent as a slice each time, or NULL */
    _Atomic bool stop;
    _Atomic uint64_t ok, bad, failed_conns;
    latency_hist_t hist;
} load_t;

typedef struct conn_s {
    load_t *load;
    int64_t *sent_at; /* a ring of depth send times: responses come in order */
    unsigned long head, inflight;
    int64_t now; /* the clock once per read batch (0: not read yet), as wrk reads it */
    bool failed; /* counted in failed_conns */
} conn_t;

static int64_t batch_now(conn_t *c)
{
    if (c->now == 0) {
        c->now = eddy_now_ns();
    }
    return c->now;
}

static bool send_one(eddy_ctx_t *ctx, conn_t *c)
{
    eddy_msg_t *m = eddy_msg_retain(eddy_http_request_msg(c->load->req));
    if (m == NULL) {
        return false;
    }
    c->sent_at[(c->head + c->inflight) % c->load->depth] = batch_now(c);
    c->inflight++;
    eddy_ctx_write(ctx, m, NULL);
    return true;
}

static void conn_active(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    for (unsigned long i = 0; i < c->load->depth; i++) {
        send_one(ctx, c);
    }
    eddy_ctx_flush(ctx);
    eddy_ctx_fire_channel_active(ctx);
}

static void conn_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    conn_t *c = eddy_ctx_state(ctx);
    eddy_http_response_t *r = eddy_http_response_of(msg);
    if (r != NULL && r->status >= 200 && c->inflight > 0) {
        hist_add(&c->load->hist, batch_now(c) - c->sent_at[c->head]);
        c->head = (c->head + 1) % c->load->depth;
        c->inflight--;
        atomic_fetch_add_explicit(r->status < 400 ? &c->load->ok : &c->load->bad, 1,
                                  memory_order_relaxed);
        if (!atomic_load_explicit(&c->load->stop, memory_order_relaxed)) {
            send_one(ctx, c);
        } else if (c->inflight == 0) {
            eddy_ctx_close(ctx, NULL);
        }
    }
    eddy_msg_release(msg);
}

static void conn_read_complete(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    c->now = 0;
    eddy_ctx_flush(ctx);
}

static void conn_exception(eddy_ctx_t *ctx, int err)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (!atomic_load(&c->load->stop) && !c->failed) {
        fprintf(stderr, NAME ": connection failed: %s\n", eddy_strerror(err));
        atomic_fetch_add(&c->load->failed_conns, 1);
        c->failed = true;
    }
    eddy_ctx_close(ctx, NULL);
}

static void conn_inactive(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    load_t *l = c->load;
    if (!atomic_load(&l->stop) && !c->failed) {
        fprintf(stderr, NAME ": the server closed a connection\n");
        atomic_fetch_add(&l->failed_conns, 1);
    }
    eddy_ctx_fire_channel_inactive(ctx);
}

static void conn_free(void *state)
{
    conn_t *c = state;
    free(c->sent_at);
    free(c);
}

static const eddy_handler_ops_t conn_ops = {
    .name = "load",
    .channel_active = conn_active,
    .channel_read = conn_read,
    .channel_read_complete = conn_read_complete,
    .exception_caught = conn_exception,
    .channel_inactive = conn_inactive,
};

/* ---------------------------------------------------------------------------------------
 * Loading over HTTP/2: streams opened on the connection handler directly, as h2load does;
 * responses counted as their last frame comes, their bytes consumed at once.
 */

typedef struct h2conn_s {
    load_t *load;
    int64_t *sent_at;  /* one slot per stream in flight: the stream's user data */
    int64_t **free;    /* the slots not in use */
    unsigned long nfree, inflight;
    int64_t now;       /* the clock once per read batch, as conn_t's */
    bool failed;
    bool refused;      /* the server's GOAWAY came: no more streams here */
} h2conn_t;

static int64_t h2_now(h2conn_t *c)
{
    if (c->now == 0) {
        c->now = eddy_now_ns();
    }
    return c->now;
}

static void h2_fail(eddy_ctx_t *ctx, h2conn_t *c, const char *why)
{
    if (!atomic_load(&c->load->stop) && !c->failed) {
        fprintf(stderr, NAME ": connection failed: %s\n", why);
        atomic_fetch_add(&c->load->failed_conns, 1);
        c->failed = true;
    }
    eddy_ctx_close(ctx, NULL);
}

static void h2_open_one(eddy_ctx_t *ctx, h2conn_t *c)
{
    load_t *l = c->load;
    if (c->nfree == 0 || c->refused) {
        return;
    }
    int err;
    eddy_h2_stream_t *s = eddy_h2_stream_open(eddy_ctx_channel(ctx), l->fields, l->nfields,
                                              l->body == NULL, &err);
    if (s == NULL) {
        if (err == EDDY_ECONNABORTED) {
            c->refused = true;
        } else {
            h2_fail(ctx, c, eddy_strerror(err));
        }
        return;
    }
    int64_t *slot = c->free[--c->nfree];
    *slot = h2_now(c);
    eddy_h2_stream_set_user_data(s, slot);
    c->inflight++;
    if (l->body != NULL) {
        eddy_h2_stream_send_data(s, eddy_buf_retained_slice(l->body, 0, eddy_buf_readable(l->body)),
                                 true, NULL);
    }
    eddy_h2_stream_release(s); /* the connection keeps it until it ends */
}

static void h2_load_active(eddy_ctx_t *ctx)
{
    h2conn_t *c = eddy_ctx_state(ctx);
    for (unsigned long i = 0; i < c->load->streams; i++) {
        h2_open_one(ctx, c);
    }
    eddy_ctx_fire_channel_active(ctx);
}

/* The stream's response ended (ok: a 2xx or 3xx head came): count it, open the next. */
static void h2_stream_done(eddy_ctx_t *ctx, h2conn_t *c, eddy_h2_stream_t *s, bool ok)
{
    int64_t *slot = eddy_h2_stream_user_data(s);
    if (slot == NULL) {
        return;
    }
    eddy_h2_stream_set_user_data(s, NULL);
    c->free[c->nfree++] = slot;
    c->inflight--;
    hist_add(&c->load->hist, h2_now(c) - *slot);
    atomic_fetch_add_explicit(ok ? &c->load->ok : &c->load->bad, 1, memory_order_relaxed);
    if (!atomic_load_explicit(&c->load->stop, memory_order_relaxed)) {
        h2_open_one(ctx, c);
    } else if (c->inflight == 0) {
        eddy_ctx_close(ctx, NULL);
    }
}

static void h2_load_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    h2conn_t *c = eddy_ctx_state(ctx);
    eddy_h2_headers_t *h = eddy_h2_headers_of(msg);
    eddy_h2_data_t *d = eddy_h2_data_of(msg);
    eddy_h2_reset_t *r = eddy_h2_reset_of(msg);
    if (h != NULL && !h->trailers) {
        const eddy_http_header_t *st = eddy_h2_headers_get(h, ":status");
        bool ok = st != NULL && st->value.len == 3 && (st->value.p[0] == '2' ||
                                                       st->value.p[0] == '3');
        bool interim = st != NULL && st->value.len == 3 && st->value.p[0] == '1';
        if (!ok && !interim) {
            /* Counted now: the stream ends as bad, whatever follows. */
            h2_stream_done(ctx, c, h->stream, false);
        } else if (h->end_stream) {
            h2_stream_done(ctx, c, h->stream, true);
        }
    } else if (h != NULL && h->end_stream) {
        h2_stream_done(ctx, c, h->stream, true);
    } else if (d != NULL) {
        eddy_h2_stream_consume(d->stream, eddy_buf_readable(d->data));
        if (d->end_stream) {
            h2_stream_done(ctx, c, d->stream, true);
        }
    } else if (r != NULL) {
        h2_stream_done(ctx, c, r->stream, false);
    }
    eddy_msg_release(msg);
}

static void h2_load_read_complete(eddy_ctx_t *ctx)
{
    h2conn_t *c = eddy_ctx_state(ctx);
    c->now = 0;
    if (c->refused && c->inflight == 0) {
        h2_fail(ctx, c, "the server's GOAWAY");
    }
}

static void h2_load_exception(eddy_ctx_t *ctx, int err)
{
    h2_fail(ctx, eddy_ctx_state(ctx), eddy_strerror(err));
}

static void h2_load_inactive(eddy_ctx_t *ctx)
{
    h2conn_t *c = eddy_ctx_state(ctx);
    if (!atomic_load(&c->load->stop) && !c->failed) {
        fprintf(stderr, NAME ": the server closed a connection\n");
        atomic_fetch_add(&c->load->failed_conns, 1);
    }
    eddy_ctx_fire_channel_inactive(ctx);
}

static void h2conn_free(void *state)
{
    h2conn_t *c = state;
    free(c->sent_at);
    free(c->free);
    free(c);
}

static const eddy_handler_ops_t h2_load_ops = {
    .name = "load",
    .channel_active = h2_load_active,
    .channel_read = h2_load_read,
    .channel_read_complete = h2_load_read_complete,
    .exception_caught = h2_load_exception,
    .channel_inactive = h2_load_inactive,
};

static int h2_load_init(eddy_channel_t *ch, load_t *l)
{
    h2conn_t *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->sent_at = calloc(l->streams, sizeof(*c->sent_at))) == NULL ||
        (c->free = calloc(l->streams, sizeof(*c->free))) == NULL) {
        h2conn_free(c);
        return EDDY_ENOMEM;
    }
    c->load = l;
    for (unsigned long i = 0; i < l->streams; i++) {
        c->free[c->nfree++] = &c->sent_at[i];
    }
    /* The server's limit is the limit: what waits past it waits in the connection. */
    eddy_h2_options_t o = {.max_queued_streams = (uint32_t)l->streams};
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_h2_client_connection(&o),
                                  eddy_handler("load", &h2_load_ops, c, h2conn_free));
}

/* The head every stream sends: what make_request() built for HTTP/1.1, as HTTP/2 fields. */
static int h2_load_fields(load_t *l, const eddy_url_t *u, const char *target)
{
    eddy_http_request_t *req = l->req;
    l->fields = calloc(req->header_count + 4, sizeof(*l->fields));
    if (l->fields == NULL) {
        return EDDY_ENOMEM;
    }
    size_t k = 0;
    l->fields[k++] = (eddy_http_header_t){{":method", 7}, req->method_name};
    l->fields[k++] = (eddy_http_header_t){{":scheme", 7}, {"http", 4}};
    l->fields[k++] = (eddy_http_header_t){{":authority", 10}, {u->authority, strlen(u->authority)}};
    l->fields[k++] = (eddy_http_header_t){{":path", 5}, {target, strlen(target)}};
    for (size_t i = 0; i < req->header_count; i++) {
        if (!eddy_http_str_eq_nocase(req->headers[i].name, "host")) {
            l->fields[k++] = req->headers[i]; /* names in lower case: the handler sends them so */
        }
    }
    l->nfields = k;
    l->body = req->body;
    return 0;
}

static int load_init(eddy_channel_t *ch, void *arg)
{
    load_t *l = arg;
    if (l->streams > 0) {
        return h2_load_init(ch, l);
    }
    conn_t *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->sent_at = calloc(l->depth, sizeof(*c->sent_at))) == NULL) {
        free(c);
        return EDDY_ENOMEM;
    }
    c->load = l;
    return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_http_client_codec(NULL),
                                  eddy_http_response_aggregator(0),
                                  eddy_handler("load", &conn_ops, c, conn_free));
}

static int load(const args_t *a)
{
    eddy_url_t u;
    if (eddy_url_parse(a->urls[0], &u) != 0 || u.tls) {
        fprintf(stderr, NAME ": --load takes one http:// URL: %s\n", a->urls[0]);
        return 2;
    }
    char target[2048];
    snprintf(target, sizeof(target), "%s%.*s", u.path.len == 0 || u.path.p[0] == '?' ? "/" : "",
             (int)u.path.len, u.path.p);
    load_t *l = calloc(1, sizeof(*l));
    if (l == NULL || (l->req = make_request(a, target)) == NULL ||
        eddy_http_request_add_header(l->req, "Host", u.authority) != 0) {
        fprintf(stderr, NAME ": out of memory\n");
        return 1;
    }
    l->depth = a->depth;
    if (a->streams > 0 || a->version == EDDY_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE) {
        l->streams = a->streams > 0 ? a->streams : 1;
        if (h2_load_fields(l, &u, target) != 0) {
            fprintf(stderr, NAME ": out of memory\n");
            return 1;
        }
    }
    eddy_loop_options_t lo = {.name = "http-load"};
    eddy_loop_group_t *g = eddy_loop_group_new((unsigned)a->threads, &lo);
    eddy_bootstrap_t *b = eddy_bootstrap_new();
    eddy_channel_t **chs = calloc(a->connections, sizeof(*chs));
    if (g == NULL || b == NULL || chs == NULL) {
        fprintf(stderr, NAME ": out of memory or threads\n");
        return 1;
    }
    eddy_bootstrap_group(b, g);
    eddy_bootstrap_option(b, EDDY_TCP_NODELAY, 1);
    eddy_bootstrap_init(b, load_init, l);

    int rc = 0;
    for (unsigned long i = 0; rc == 0 && i < a->connections; i++) {
        eddy_future_t *f = eddy_bootstrap_connect(b, u.host, u.port);
        if (f == NULL || eddy_future_await(f, 10000) != 0 || eddy_future_error(f) != 0) {
            fprintf(stderr, NAME ": cannot connect to %s:%u: %s\n", u.host, u.port,
                    eddy_strerror(f != NULL ? eddy_future_error(f) : EDDY_ENOMEM));
            rc = 1;
        } else {
            chs[i] = eddy_channel_retain(eddy_future_channel(f));
        }
        eddy_future_release(f);
    }
    /* The window: from the last connect to the stop, responses counted as they come. */
    uint64_t ok0 = atomic_load(&l->ok);
    int64_t w0 = eddy_now_ns();
    if (rc == 0) {
        usleep((useconds_t)(a->duration_s * 1000000));
    }
    uint64_t done = atomic_load(&l->ok) - ok0;
    double secs = (double)(eddy_now_ns() - w0) / 1e9;
    atomic_store(&l->stop, true);
    for (unsigned long i = 0; i < a->connections; i++) {
        if (chs[i] != NULL) {
            /* Requests in flight are answered first (conn_read closes once none is left);
             * the close here bounds the wait. */
            eddy_future_await(eddy_channel_close_future(chs[i]), 2000);
            eddy_channel_close(chs[i], NULL);
            eddy_future_await(eddy_channel_close_future(chs[i]), 2000);
            eddy_channel_release(chs[i]);
        }
    }
    uint64_t errors = atomic_load(&l->bad) + atomic_load(&l->failed_conns);
    double p50 = hist_quantile(&l->hist, 0.5), p99 = hist_quantile(&l->hist, 0.99);
    double p999 = hist_quantile(&l->hist, 0.999);
    double rps = secs > 0 ? (double)done / secs : 0;
    printf("requests/s %.0f  p50 %.1f us  p99 %.1f us  p99.9 %.1f us  errors %lu\n", rps, p50,
           p99, p999, (unsigned long)errors);
    printf("{\"bench\":\"http_client\",\"rps\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
           "\"p999_us\":%.1f,\"errors\":%lu,\"connections\":%lu,\"depth\":%lu,"
           "\"http\":\"%s\",\"streams\":%lu}\n",
           rps, p50, p99, p999, (unsigned long)errors, a->connections, a->depth,
           l->streams > 0 ? "2" : "1.1", l->streams);
    fflush(stdout);
    eddy_bootstrap_free(b);
    eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000), 5000);
    eddy_loop_group_free(g);
    eddy_msg_release(eddy_http_request_msg(l->req));
    free(l->fields);
    free(l);
    free(chs);
    return rc != 0 || errors != 0 ? 1 : 0;
}

/* ---------------------------------------------------------------------------------------
 * main
 */

static bool parse_args(int argc, char **argv, args_t *a)
{
    *a = (args_t){.method = "GET", .timeout_ms = 30000, .connections = 16, .depth = 1,
                  .duration_s = 10, .threads = 1};
    a->urls = calloc((size_t)argc, sizeof(*a->urls));
    if (a->urls == NULL) {
        return false;
    }
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        struct {
            const char *name;
            unsigned long max, *out;
        } nums[] = {{"--timeout-ms", 3600000, &a->timeout_ms},
                    {"--connections", 100000, &a->connections},
                    {"--depth", 1024, &a->depth},
                    {"--streams", 100000, &a->streams},
                    {"--duration", 86400, &a->duration_s},
                    {"--threads", 64, &a->threads}};
        bool matched = false;
        for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]); k++) {
            if (strcmp(o, nums[k].name) == 0) {
                if (v == NULL || !example_parse_uint(v, nums[k].max, nums[k].out) ||
                    *nums[k].out == 0) {
                    return false;
                }
                i++;
                matched = true;
            }
        }
        if (matched) {
            continue;
        }
        if (strcmp(o, "--insecure") == 0 || strcmp(o, "-k") == 0) {
            a->insecure = true;
        } else if (strcmp(o, "-i") == 0) {
            a->include = true;
        } else if (strcmp(o, "-Z") == 0 || strcmp(o, "--parallel") == 0) {
            a->parallel = true;
        } else if (strcmp(o, "--compressed") == 0) {
            a->compressed = true;
        } else if (strcmp(o, "--http1.1") == 0) {
            a->version = EDDY_HTTP_CLIENT_HTTP1;
        } else if (strcmp(o, "--http2") == 0) {
            a->version = EDDY_HTTP_CLIENT_H2_TLS;
        } else if (strcmp(o, "--http2-prior-knowledge") == 0) {
            a->version = EDDY_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE;
        } else if (strcmp(o, "--load") == 0) {
            a->load = true;
        } else if (strcmp(o, "--cacert") == 0 && v != NULL) {
            a->cacert = argv[++i];
        } else if (strcmp(o, "-X") == 0 && v != NULL) {
            a->method = argv[++i];
        } else if (strcmp(o, "-d") == 0 && v != NULL) {
            a->data = argv[++i];
        } else if (o[0] != '-') {
            a->urls[a->nurls++] = o;
        } else {
            return false;
        }
    }
    if (a->data != NULL && strcmp(a->method, "GET") == 0) {
        a->method = "POST"; /* as curl -d */
    }
    if (a->streams > 0 && (!a->load || a->depth > 1)) {
        return false; /* --streams is the load's, instead of --depth */
    }
    return a->nurls > 0 && (!a->load || a->nurls == 1);
}

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    args_t a;
    if (!parse_args(argc, argv, &a)) {
        usage(stderr);
        free(a.urls);
        return 2;
    }
    int rc = a.load ? load(&a) : fetch(&a);
    free(a.urls);
    return rc;
}
