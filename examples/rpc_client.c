/*
 * eddy-rpc-client: calls eddy-rpc-server (rpc_proto.h) with many calls in flight on each
 * connection, checks every reply, and ends with calls/s and latency.
 *
 *   eddy-rpc-client [--host H] [--port N] [--calls N] [--method echo|add|sleep|mix]
 *                   [--size N] [--sleep-ms N] [--inflight N] [--connections N]
 *                   [--timeout-ms N] [--threads N] [--max-frame N]
 *   eddy-rpc-client --bad [--host H] [--port N] [--max-frame N]
 *
 * The connections come from a channel pool (eddy_channel_pool_t, max_connections =
 * --connections): one worker per connection acquires a channel at the start and starts calls
 * on it; a connection that dies fails its pending calls, goes back to the pool (which drops
 * it) and its worker acquires a new one while calls are left; at the end every channel is
 * released and the pool closed. Each connection keeps up to --inflight calls pending in a
 * table indexed by the id modulo a power of two (the full id is checked: a reply to a call
 * that timed out is ignored). A periodic handler-scoped timer (eddy_ctx_schedule_at_fixed_rate)
 * fails calls older than --timeout-ms. Exit status 0 when every call got a correct reply, 1
 * otherwise.
 *
 * --bad checks the server's handling of bad input over plain blocking sockets: malformed
 * payloads get status 2 and the connection stays usable, a payload without an id and a frame
 * longer than the server's maximum close the connection, and the server serves on.
 */
#include "rpc_proto.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

typedef enum { METHOD_ECHO, METHOD_ADD, METHOD_SLEEP, METHOD_MIX } method_t;

static const char *const method_names[] = {"echo", "add", "sleep", "mix"};

typedef struct run_s {
    method_t method;
    size_t size; /* echo body bytes */
    uint32_t sleep_ms;
    unsigned inflight; /* per connection */
    int64_t timeout_ns;
    int64_t scan_ms; /* the timeout timer's period */
    size_t max_frame;
    uint64_t calls;
    _Atomic uint64_t issued;   /* calls claimed by connections (may run past calls) */
    _Atomic uint64_t finished; /* calls answered, failed or timed out: index into lat */
    _Atomic uint64_t errors, timeouts, late;
    int64_t *lat;          /* per finished call: latency in ns, or -1 when it failed */
    _Atomic unsigned live; /* workers that may still finish calls */
    eddy_promise_t *done;  /* completes when every call finished or no worker is left */
    eddy_channel_pool_t *pool;
    const char *host;
    unsigned long port;
    pthread_mutex_t lock; /* guards the workers' channels and stopping */
    bool stopping;        /* the end: channels go back to the pool for good */
} run_t;

/* One connection's worth of calls: the channel it holds from the pool, replaced when it dies. */
typedef struct worker_s {
    run_t *run;
    eddy_channel_t *ch; /* acquired (a reference of ours), or NULL; under run->lock */
    uint64_t issued_at; /* run->issued when ch was acquired */
} worker_t;

typedef struct slot_s {
    uint64_t id;
    int64_t sent_at;
    method_t method;
    bool busy;
} slot_t;

typedef struct conn_s {
    run_t *run;
    eddy_ctx_t *ctx;
    uint64_t timer; /* the scan's handler-scoped timer, or 0 */
    uint64_t next_id;
    unsigned pending;
    bool active;
    bool unflushed; /* calls queued in this read batch: channel_read_complete flushes them */
    size_t mask;
    slot_t slots[]; /* mask + 1: a power of two, at least twice --inflight */
} conn_t;

/* The echo body of call id, and the operands of an add: known on both sides of the call. */
static uint8_t body_byte(uint64_t id, size_t i)
{
    return (uint8_t)(id * 131u + i * 7u);
}

static uint64_t add_a(uint64_t id)
{
    return id * 0x9E3779B97F4A7C15ull; /* large values of both signs: sums overflow too */
}

static uint64_t add_b(uint64_t id)
{
    return ~id * 31u;
}

static void finish_call(run_t *run, int64_t latency)
{
    uint64_t i = atomic_fetch_add(&run->finished, 1);
    if (i < run->calls) {
        run->lat[i] = latency;
    }
    if (latency < 0) {
        atomic_fetch_add(&run->errors, 1);
    }
    if (i + 1 == run->calls) {
        eddy_promise_succeed(run->done, NULL);
    }
}

/* Queue one call on c (not flushed). False when out of memory. */
static bool send_call(conn_t *c)
{
    run_t *run = c->run;
    uint64_t id;
    do {
        /* A slot may still hold a slow call from long ago: skip its id. With at least twice
         * as many slots as calls in flight, a free one is near. */
        id = c->next_id++;
    } while (c->slots[id & c->mask].busy);
    method_t m = run->method == METHOD_MIX ? (method_t)(id % 3) : run->method;
    size_t mlen = strlen(method_names[m]);
    size_t n = m == METHOD_ECHO ? run->size : m == METHOD_ADD ? 16 : 4;
    eddy_buf_t *b = eddy_buf_alloc(eddy_ctx_alloc(c->ctx), RPC_HEADER + mlen + n,
                                   EDDY_BUF_DEFAULT_MAX_CAPACITY);
    if (b == NULL) {
        return false;
    }
    eddy_buf_write_u64(b, id);
    eddy_buf_write_u8(b, (uint8_t)mlen);
    eddy_buf_write_bytes(b, method_names[m], mlen);
    if (m == METHOD_ECHO) {
        uint8_t *p = eddy_buf_write_ptr(b);
        for (size_t i = 0; i < n; i++) {
            p[i] = body_byte(id, i);
        }
        eddy_buf_produce(b, n);
    } else if (m == METHOD_ADD) {
        eddy_buf_write_u64(b, add_a(id));
        eddy_buf_write_u64(b, add_b(id));
    } else {
        eddy_buf_write_u32(b, run->sleep_ms);
    }
    c->slots[id & c->mask] =
        (slot_t){.id = id, .sent_at = eddy_now_ns(), .method = m, .busy = true};
    c->pending++;
    eddy_ctx_write(c->ctx, eddy_buf_msg(b), NULL);
    return true;
}

/* Top c up to --inflight calls while calls are left; flush them unless a read batch is under
 * way (channel_read_complete then flushes once for the whole batch, as Netty clients do). */
static void send_calls(conn_t *c, bool flush)
{
    run_t *run = c->run;
    bool sent = false;
    while (c->pending < run->inflight && atomic_load(&run->issued) < run->calls) {
        if (atomic_fetch_add(&run->issued, 1) >= run->calls) {
            break;
        }
        if (!send_call(c)) {
            finish_call(run, -1);
            break;
        }
        sent = true;
    }
    if (sent && flush) {
        eddy_ctx_flush(c->ctx);
    } else if (sent) {
        c->unflushed = true;
    }
}

/* Is body (n bytes) the right reply to call id of method m? */
static bool reply_ok(const run_t *run, uint64_t id, method_t m, const uint8_t *body, size_t n)
{
    if (m == METHOD_ECHO) {
        if (n != run->size) {
            return false;
        }
        for (size_t i = 0; i < n; i++) {
            if (body[i] != body_byte(id, i)) {
                return false;
            }
        }
        return true;
    }
    if (m == METHOD_ADD) {
        return n == 8 && rpc_get_u64(body) == add_a(id) + add_b(id);
    }
    return n == 0;
}

static void scan_timeouts(eddy_ctx_t *ctx, void *arg)
{
    (void)ctx;
    conn_t *c = arg;
    int64_t now = eddy_now_ns();
    for (size_t i = 0; i <= c->mask && c->pending > 0; i++) {
        slot_t *s = &c->slots[i];
        if (s->busy && now - s->sent_at >= c->run->timeout_ns) {
            s->busy = false;
            c->pending--;
            atomic_fetch_add(&c->run->timeouts, 1);
            finish_call(c->run, -1);
        }
    }
    send_calls(c, true);
}

static void stop_timer(conn_t *c)
{
    eddy_ctx_cancel(c->ctx, c->timer); /* the callback will not run again */
    c->timer = 0;
}

static void client_added(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    c->ctx = ctx;
}

static void client_active(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    c->active = true; /* calls start when a worker acquires the channel: start_calls() */
    eddy_ctx_fire_channel_active(ctx);
}

static void client_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    conn_t *c = eddy_ctx_state(ctx);
    eddy_buf_t *b = eddy_buf_of(msg);
    size_t n = b != NULL ? eddy_buf_readable(b) : 0;
    if (n < RPC_HEADER) {
        eddy_msg_release(msg);
        fprintf(stderr, "eddy-rpc-client: a reply of %zu bytes, too short\n", n);
        eddy_ctx_close(ctx, NULL);
        return;
    }
    const uint8_t *p = eddy_buf_read_ptr(b);
    uint64_t id = rpc_get_u64(p);
    slot_t *s = &c->slots[id & c->mask];
    if (!s->busy || s->id != id) {
        atomic_fetch_add(&c->run->late, 1); /* it timed out: already counted */
        eddy_msg_release(msg);
        return;
    }
    s->busy = false;
    c->pending--;
    bool ok = p[8] == RPC_OK && reply_ok(c->run, id, s->method, p + RPC_HEADER, n - RPC_HEADER);
    if (!ok && atomic_load(&c->run->errors) < 5) {
        fprintf(stderr, "eddy-rpc-client: call %llu (%s): status %u, %zu bytes: wrong\n",
                (unsigned long long)id, method_names[s->method], p[8], n - RPC_HEADER);
    }
    finish_call(c->run, ok ? eddy_now_ns() - s->sent_at : -1);
    eddy_msg_release(msg);
    send_calls(c, false);
}

static void client_read_complete(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (c->unflushed) {
        c->unflushed = false;
        eddy_ctx_flush(ctx);
    }
    eddy_ctx_fire_channel_read_complete(ctx);
}

static void client_inactive(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    stop_timer(c);
    /* Calls still pending will not be answered: they failed. */
    for (size_t i = 0; i <= c->mask; i++) {
        if (c->slots[i].busy) {
            c->slots[i].busy = false;
            finish_call(c->run, -1);
        }
    }
    c->pending = 0;
    c->active = false;
    eddy_ctx_fire_channel_inactive(ctx);
}

static void client_exception(eddy_ctx_t *ctx, int err)
{
    fprintf(stderr, "eddy-rpc-client: %s\n", eddy_strerror(err));
    eddy_ctx_close(ctx, NULL);
}

static const eddy_handler_ops_t client_ops = {
    .name = "rpc-client",
    .handler_added = client_added,
    .channel_active = client_active,
    .channel_read = client_read,
    .channel_read_complete = client_read_complete,
    .channel_inactive = client_inactive,
    .exception_caught = client_exception,
};

static int init_conn(eddy_channel_t *ch, void *arg)
{
    run_t *run = arg;
    size_t slots = 2;
    while (slots < 2 * (size_t)run->inflight) {
        slots <<= 1;
    }
    conn_t *c = calloc(1, sizeof(*c) + slots * sizeof(slot_t));
    if (c != NULL) {
        *c = (conn_t){.run = run, .next_id = 1, .mask = slots - 1};
    }
    /* No deadline for replies: --timeout-ms bounds each call instead. */
    return rpc_add_framing(eddy_channel_pipeline(ch), run->max_frame, 0,
                           eddy_handler("client", &client_ops, c, eddy_free_state));
}

/* An acquired channel starts its calls. On its loop; arg is the channel (a reference). */
static void start_calls(void *arg)
{
    eddy_channel_t *ch = arg;
    eddy_ctx_t *ctx = eddy_pipeline_context(eddy_channel_pipeline(ch), "client");
    conn_t *c = ctx != NULL ? eddy_ctx_state(ctx) : NULL;
    /* A channel that closed meanwhile has its worker acquiring another already. */
    if (c != NULL && c->active && c->timer == 0) {
        /* Handler-scoped: it ends with the handler, whoever removes it. */
        c->timer = eddy_ctx_schedule_at_fixed_rate(ctx, c->run->scan_ms, c->run->scan_ms,
                                                   scan_timeouts, c);
        if (c->timer == 0) {
            eddy_ctx_fire_exception(ctx, EDDY_ENOMEM);
        } else {
            send_calls(c, true);
        }
    }
    eddy_channel_release(ch);
}

/* ---------------------------------------------------------------------------------------
 * Workers: connections from the pool
 */

static void worker_acquire(worker_t *w);

/* w can finish no more calls. */
static void worker_lost(worker_t *w)
{
    if (atomic_fetch_sub(&w->run->live, 1) == 1) {
        eddy_promise_succeed(w->run->done, NULL);
    }
}

static void pool_put(run_t *run, eddy_channel_t *ch)
{
    eddy_future_release(eddy_channel_pool_release(run->pool, ch));
    eddy_channel_release(ch);
}

/* w's channel closed: its pending calls failed already (client_inactive). Back to the pool
 * with it (the pool drops it), and on with a new one while calls are left, unless this one
 * died before a call was issued anywhere: a server that hangs up at once would make us spin. */
static void channel_closed(eddy_future_t *f, void *arg)
{
    (void)f;
    worker_t *w = arg;
    run_t *run = w->run;
    pthread_mutex_lock(&run->lock);
    eddy_channel_t *ch = NULL;
    if (!run->stopping) { /* else main releases it */
        ch = w->ch;
        w->ch = NULL;
    }
    pthread_mutex_unlock(&run->lock);
    if (ch == NULL) {
        return;
    }
    pool_put(run, ch);
    uint64_t issued = atomic_load(&run->issued);
    if (issued < run->calls && issued > w->issued_at) {
        worker_acquire(w);
    } else {
        worker_lost(w);
    }
}

/* w holds ch now (our reference): watch it close, then start its calls on its loop. */
static void worker_start(worker_t *w, eddy_channel_t *ch)
{
    run_t *run = w->run;
    pthread_mutex_lock(&run->lock);
    bool stopping = run->stopping;
    if (!stopping) {
        w->ch = ch;
        w->issued_at = atomic_load(&run->issued);
    }
    pthread_mutex_unlock(&run->lock);
    if (stopping) {
        pool_put(run, ch);
        return;
    }
    if (eddy_future_add_listener(eddy_channel_close_future(ch), channel_closed, w) != 0) {
        fprintf(stderr, "eddy-rpc-client: out of memory\n");
        eddy_channel_close(ch, NULL); /* unwatched: it stays w's until the end */
        return;
    }
    if (eddy_loop_execute(eddy_channel_loop(ch), start_calls, eddy_channel_retain(ch)) != 0) {
        eddy_channel_release(ch);
        eddy_channel_close(ch, NULL); /* channel_closed gives it back */
    }
}

/* A worker's acquire after its channel died completed. */
static void acquired(eddy_future_t *f, void *arg)
{
    worker_t *w = arg;
    int err = eddy_future_error(f);
    if (err != 0) {
        fprintf(stderr, "eddy-rpc-client: cannot connect again to %s:%lu: %s\n", w->run->host,
                w->run->port, eddy_strerror(err));
        worker_lost(w);
    } else {
        worker_start(w, eddy_channel_retain(eddy_future_channel(f)));
    }
    eddy_future_release(f);
}

static void worker_acquire(worker_t *w)
{
    eddy_future_t *f = eddy_channel_pool_acquire(w->run->pool);
    if (f == NULL || eddy_future_add_listener(f, acquired, w) != 0) {
        eddy_future_release(f);
        worker_lost(w);
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* ---------------------------------------------------------------------------------------
 * --bad: raw frames over a blocking socket
 */

static int bad_connect(const char *host, unsigned long port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    char service[16];
    snprintf(service, sizeof(service), "%lu", port);
    if (getaddrinfo(host, service, &hints, &ai) != 0) {
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = ai; a != NULL && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd >= 0) {
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    return fd;
}

/* Send a frame: the length field says len, then n payload bytes follow (n <= len). */
static bool bad_send(int fd, uint32_t len, const void *payload, size_t n)
{
    uint8_t frame[4 + 64];
    frame[0] = (uint8_t)(len >> 24);
    frame[1] = (uint8_t)(len >> 16);
    frame[2] = (uint8_t)(len >> 8);
    frame[3] = (uint8_t)len;
    memcpy(frame + 4, payload, n);
    return send(fd, frame, 4 + n, MSG_NOSIGNAL) == (ssize_t)(4 + n);
}

/* Read exactly n bytes: n, 0 at end of stream, -1 on error or timeout. */
static ssize_t bad_recv(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r == 0) {
            return 0;
        }
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == ECONNRESET ? 0 : -1;
        }
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* Expect a reply to id with status and body (n bytes). */
static bool bad_expect(int fd, uint64_t id, uint8_t status, const void *body, size_t n)
{
    uint8_t buf[4 + 64];
    if (bad_recv(fd, buf, 4) != 4) {
        return false;
    }
    size_t len = (size_t)buf[0] << 24 | (size_t)buf[1] << 16 | (size_t)buf[2] << 8 | buf[3];
    if (len != RPC_HEADER + n || bad_recv(fd, buf, len) != (ssize_t)len) {
        return false;
    }
    return rpc_get_u64(buf) == id && buf[8] == status &&
           (n == 0 || memcmp(buf + RPC_HEADER, body, n) == 0);
}

/* Expect the server to close: end of stream (or a reset) before any byte. */
static bool bad_expect_close(int fd)
{
    uint8_t b;
    return bad_recv(fd, &b, 1) == 0;
}

static int run_bad(const char *host, unsigned long port, size_t max_frame)
{
    static const uint8_t bad_len[] = {0, 0, 0, 0, 0, 0, 0, 7, 200, 'e', 'c', 'h', 'o'};
    static const uint8_t id_only[] = {0, 0, 0, 0, 0, 0, 0, 8};
    static const uint8_t echo[] = {0, 0, 0, 0, 0, 0, 0, 9, 4, 'e', 'c', 'h', 'o', 'h', 'i'};
    static const uint8_t unknown[] = {0, 0, 0, 0, 0, 0, 0, 10, 3, 'n', 'o', 'p'};
    static const uint8_t short_add[] = {0, 0, 0, 0, 0, 0, 0, 11, 3, 'a', 'd', 'd', 1, 2, 3};
    static const uint8_t no_id[] = {1, 2, 3, 4, 5};
    static const uint8_t junk[64] = {0};
    static const char *const what[] = {
        "a method length past the end gets status 2",
        "a payload of just an id gets status 2",
        "the connection still serves calls after them",
        "an unknown method gets status 1",
        "an add with a short body gets status 2",
        "a payload without an id closes the connection",
        "a frame over the maximum closes the connection",
    };
    bool ok[sizeof(what) / sizeof(what[0])] = {false};
    int fd = bad_connect(host, port);
    if (fd < 0) {
        fprintf(stderr, "eddy-rpc-client: cannot connect to %s:%lu\n", host, port);
        return 1;
    }
    ok[0] = bad_send(fd, sizeof(bad_len), bad_len, sizeof(bad_len)) &&
            bad_expect(fd, 7, RPC_BAD_REQUEST, NULL, 0);
    ok[1] = bad_send(fd, sizeof(id_only), id_only, sizeof(id_only)) &&
            bad_expect(fd, 8, RPC_BAD_REQUEST, NULL, 0);
    ok[2] = bad_send(fd, sizeof(echo), echo, sizeof(echo)) && bad_expect(fd, 9, RPC_OK, "hi", 2);
    ok[3] = bad_send(fd, sizeof(unknown), unknown, sizeof(unknown)) &&
            bad_expect(fd, 10, RPC_UNKNOWN_METHOD, NULL, 0);
    ok[4] = bad_send(fd, sizeof(short_add), short_add, sizeof(short_add)) &&
            bad_expect(fd, 11, RPC_BAD_REQUEST, NULL, 0);
    ok[5] = bad_send(fd, sizeof(no_id), no_id, sizeof(no_id)) && bad_expect_close(fd);
    close(fd);
    /* The length field counts the payload only; the maximum counts the field too. */
    fd = bad_connect(host, port);
    ok[6] = fd >= 0 && bad_send(fd, (uint32_t)max_frame - 3, junk, sizeof(junk)) &&
            bad_expect_close(fd);
    if (fd >= 0) {
        close(fd);
    }
    /* And the server goes on serving. */
    fd = bad_connect(host, port);
    bool serving = fd >= 0 && bad_send(fd, sizeof(echo), echo, sizeof(echo)) &&
                   bad_expect(fd, 9, RPC_OK, "hi", 2);
    if (fd >= 0) {
        close(fd);
    }
    int failed = serving ? 0 : 1;
    for (size_t i = 0; i < sizeof(what) / sizeof(what[0]); i++) {
        printf("  %s: %s\n", what[i], ok[i] ? "yes" : "NO");
        failed += ok[i] ? 0 : 1;
    }
    printf("  the server serves new connections afterwards: %s\n", serving ? "yes" : "NO");
    printf("eddy-rpc-client: bad input checks %s\n", failed == 0 ? "passed" : "FAILED");
    return failed == 0 ? 0 : 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: eddy-rpc-client [--host H] [--port N] [--calls N] "
               "[--method echo|add|sleep|mix] [--size N] [--sleep-ms N] [--inflight N] "
               "[--connections N] [--timeout-ms N] [--threads N] [--max-frame N]\n"
               "       eddy-rpc-client --bad [--host H] [--port N] [--max-frame N]\n"
               "  --host H          server (default 127.0.0.1; names are resolved)\n"
               "  --port N          port (default 9000)\n"
               "  --calls N         calls in all (default 10000)\n"
               "  --method M        echo, add, sleep, or mix (the three in turn; default echo)\n"
               "  --size N          echo body bytes (default 64)\n"
               "  --sleep-ms N      milliseconds each sleep asks for (default 10)\n"
               "  --inflight N      calls in flight per connection (default 64)\n"
               "  --connections N   connections at once (default 1)\n"
               "  --timeout-ms N    a call not answered by then fails (default 5000)\n"
               "  --threads N       client loops (default 1)\n"
               "  --max-frame N     longest frame, length field included (default 1048576)\n"
               "  --bad             send malformed and oversized frames, check the answers\n"
               "Checks every reply; prints calls/s, latency, errors and timeouts.\n");
}

static bool parse_method(const char *s, method_t *out)
{
    for (int m = METHOD_ECHO; m <= METHOD_MIX; m++) {
        if (strcmp(s, method_names[m]) == 0) {
            *out = (method_t)m;
            return true;
        }
    }
    return false;
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    unsigned long port = RPC_DEFAULT_PORT, calls = 10000, size = 64, sleep_ms = 10;
    unsigned long inflight = 64, conns_n = 1, timeout_ms = 5000, threads = 1;
    unsigned long max_frame = RPC_DEFAULT_MAX_FRAME;
    method_t method = METHOD_ECHO;
    bool bad = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--bad") == 0) {
            bad = true;
            continue;
        } else if (strcmp(a, "--host") == 0 && v != NULL) {
            host = v;
        } else if (strcmp(a, "--port") == 0 && v != NULL && example_parse_uint(v, 65535, &port)) {
        } else if (strcmp(a, "--calls") == 0 && v != NULL && example_parse_uint(v, 100000000, &calls)) {
        } else if (strcmp(a, "--method") == 0 && v != NULL && parse_method(v, &method)) {
        } else if (strcmp(a, "--size") == 0 && v != NULL && example_parse_uint(v, 16 << 20, &size)) {
        } else if (strcmp(a, "--sleep-ms") == 0 && v != NULL &&
                   example_parse_uint(v, UINT32_MAX, &sleep_ms)) {
        } else if (strcmp(a, "--inflight") == 0 && v != NULL &&
                   example_parse_uint(v, 1 << 20, &inflight) && inflight > 0) {
        } else if (strcmp(a, "--connections") == 0 && v != NULL &&
                   example_parse_uint(v, 10000, &conns_n) && conns_n > 0) {
        } else if (strcmp(a, "--timeout-ms") == 0 && v != NULL &&
                   example_parse_uint(v, 86400000, &timeout_ms) && timeout_ms > 0) {
        } else if (strcmp(a, "--threads") == 0 && v != NULL && example_parse_uint(v, 64, &threads) &&
                   threads > 0) {
        } else if (strcmp(a, "--max-frame") == 0 && v != NULL &&
                   example_parse_uint(v, UINT32_MAX, &max_frame) && max_frame >= 4 + RPC_HEADER) {
        } else {
            usage(stderr);
            return 2;
        }
        i++;
    }
    if (bad) {
        return run_bad(host, port, max_frame);
    }
    if (4 + RPC_HEADER + strlen("echo") + size > max_frame) { /* only echo calls carry --size */
        fprintf(stderr, "eddy-rpc-client: --size %lu does not fit --max-frame %lu\n", size,
                max_frame);
        return 2;
    }
    run_t run = {
        .method = method,
        .size = size,
        .sleep_ms = (uint32_t)sleep_ms,
        .inflight = (unsigned)inflight,
        .timeout_ns = (int64_t)timeout_ms * 1000000,
        /* A tenth of the timeout, between 1 and 100 ms: timeouts fire at most 10% late. */
        .scan_ms = timeout_ms < 10     ? 1
                   : timeout_ms > 1000 ? 100
                                       : (int64_t)timeout_ms / 10,
        .max_frame = max_frame,
        .calls = calls,
        .lat = calloc(calls ? calls : 1, sizeof(int64_t)),
        .done = eddy_promise_new(NULL),
    };
    atomic_init(&run.live, (unsigned)conns_n);
    pthread_mutex_init(&run.lock, NULL);
    run.host = host;
    run.port = port;
    worker_t *workers = calloc(conns_n, sizeof(*workers));
    if (run.lat == NULL || run.done == NULL || workers == NULL) {
        fprintf(stderr, "eddy-rpc-client: out of memory\n");
        return 1;
    }
    if (calls == 0) {
        eddy_promise_succeed(run.done, NULL);
    }
    eddy_loop_options_t lo = {.name = "rpc-client"};
    eddy_loop_group_t *g = eddy_loop_group_new(threads, &lo);
    eddy_bootstrap_t *b = eddy_bootstrap_new();
    if (g == NULL || b == NULL) {
        fprintf(stderr, "eddy-rpc-client: out of memory or threads\n");
        return 1;
    }
    eddy_bootstrap_group(b, g);
    eddy_bootstrap_option(b, EDDY_TCP_NODELAY, 1);
    eddy_bootstrap_init(b, init_conn, &run);
    eddy_channel_pool_options_t po = {.max_connections = conns_n};
    run.pool = eddy_channel_pool_new(b, host, (uint16_t)port, &po);
    if (run.pool == NULL) {
        fprintf(stderr, "eddy-rpc-client: out of memory\n");
        return 1;
    }

    int64_t t0 = eddy_now_ns();
    int rc = 0;
    unsigned long up = 0; /* workers whose first connection came up */
    for (; up < conns_n; up++) {
        eddy_future_t *f = eddy_channel_pool_acquire(run.pool);
        if (f == NULL || eddy_future_await(f, 30000) != 0 || eddy_future_error(f) != 0) {
            fprintf(stderr, "eddy-rpc-client: cannot connect to %s:%lu: %s\n", host, port,
                    f != NULL ? eddy_strerror(eddy_future_error(f)) : "out of memory");
            eddy_future_release(f);
            rc = 1;
            break;
        }
        workers[up].run = &run;
        worker_start(&workers[up], eddy_channel_retain(eddy_future_channel(f)));
        eddy_future_release(f);
    }
    /* Workers that never got a connection will not finish calls: count them out. */
    for (unsigned long k = up; k < conns_n; k++) {
        if (atomic_fetch_sub(&run.live, 1) == 1) {
            eddy_promise_succeed(run.done, NULL);
        }
    }
    eddy_future_await(run.done, -1); /* every pending call ends: answered or timed out */
    double secs = (double)(eddy_now_ns() - t0) / 1e9;
    /* Every channel back, then the pool closes them all (and fails an acquire under way). */
    pthread_mutex_lock(&run.lock);
    run.stopping = true;
    pthread_mutex_unlock(&run.lock);
    for (unsigned long i = 0; i < up; i++) {
        /* stopping: no callback touches a worker's channel any more. */
        if (workers[i].ch != NULL) {
            pool_put(&run, workers[i].ch);
            workers[i].ch = NULL;
        }
    }
    eddy_future_t *closed = eddy_channel_pool_close(run.pool);
    eddy_future_await(closed, 5000);
    eddy_future_release(closed);
    eddy_bootstrap_free(b);
    eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000), 5000);
    eddy_loop_group_free(g);
    free(workers);
    pthread_mutex_destroy(&run.lock);

    /* Calls never finished (every connection lost) are errors too. */
    uint64_t finished = atomic_load(&run.finished);
    finished = finished < calls ? finished : calls;
    uint64_t errors = atomic_load(&run.errors) + (calls - finished);
    uint64_t timeouts = atomic_load(&run.timeouts);
    size_t n = 0;
    for (uint64_t i = 0; i < finished; i++) {
        if (run.lat[i] >= 0) {
            run.lat[n++] = run.lat[i];
        }
    }
    qsort(run.lat, n, sizeof(*run.lat), cmp_i64);
    printf("eddy-rpc-client: %zu of %lu %s calls succeeded over %lu connection(s), %lu in "
           "flight each, in %.3f s\n",
           n, calls, method_names[method], up, inflight, secs);
    if (n > 0) {
        printf("  %.0f calls/s; latency p50 %.1f us, p99 %.1f us, max %.1f us\n", (double)n / secs,
               (double)run.lat[n / 2] / 1e3, (double)run.lat[n * 99 / 100] / 1e3,
               (double)run.lat[n - 1] / 1e3);
    }
    printf("  %llu errors (%llu timeouts), %llu late replies ignored\n", (unsigned long long)errors,
           (unsigned long long)timeouts, (unsigned long long)atomic_load(&run.late));
    eddy_future_release(run.done);
    free(run.lat);
    return rc == 0 && errors == 0 && n == calls ? 0 : 1;
}
