/*
 * eddy-demo: what `make run` shows. Until channels and bootstraps land (#6, #7), it walks
 * through what exists: buffers (a framed message parsed with zero-copy slices, a composite for
 * writev, the pooled allocator's metrics), then a loop group running cross-thread tasks, a
 * timer and a future, then an offload carrier keeping per-key order.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <eddy/eddy.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Append one frame: a 4-byte big-endian length, then the payload. */
static int write_frame(eddy_buf_t *out, const char *payload)
{
    size_t n = strlen(payload);
    int err = eddy_buf_write_u32(out, (uint32_t)n);
    return err != 0 ? err : eddy_buf_write_bytes(out, payload, n);
}

/* Take one whole frame off in, as a zero-copy slice, or NULL when more bytes are needed. */
static eddy_buf_t *read_frame(eddy_buf_t *in)
{
    uint32_t len;
    if (eddy_buf_get_u32(in, eddy_buf_reader_index(in), &len) != 0 ||
        eddy_buf_readable(in) < 4 + (size_t)len) {
        return NULL;
    }
    eddy_buf_skip(in, 4);
    return eddy_buf_read_retained_slice(in, len);
}

/* ---- loops ---- */

static atomic_long tasks_run;

static void count_task(void *arg)
{
    (void)arg;
    atomic_fetch_add(&tasks_run, 1);
}

static void tick(eddy_timer_t *t, void *arg)
{
    (void)t;
    atomic_fetch_add((atomic_int *)arg, 1);
}

static int square(void *arg, void **result)
{
    long v = (long)(intptr_t)arg;
    *result = (void *)(intptr_t)(v * v);
    return 0;
}

static int loops_demo(void)
{
    printf("\nloops: a group of 2, tasks from this thread, a timer and a future\n");
    eddy_loop_group_t *g = eddy_loop_group_new(2, NULL);
    if (g == NULL) {
        fprintf(stderr, "demo: no loop group\n");
        return 1;
    }
    eddy_loop_t *loop = eddy_loop_group_next(g);
    int64_t t0 = eddy_now_ns();
    for (int i = 0; i < 100000; i++) {
        eddy_loop_execute(eddy_loop_group_next(g), count_task, NULL);
    }
    atomic_int ticks = 0;
    eddy_timer_t *t = eddy_loop_schedule_at_fixed_rate(loop, 0, 20, tick, &ticks);
    eddy_future_t *f = eddy_loop_submit(loop, square, (void *)(intptr_t)12);
    if (eddy_future_await(f, 2000) == 0 && eddy_future_error(f) == 0) {
        printf("  submit: 12 squared on the loop = %ld\n",
               (long)(intptr_t)eddy_future_result(f));
    }
    eddy_future_release(f);
    struct timespec pause = {0, 110 * 1000000};
    nanosleep(&pause, NULL);
    eddy_timer_cancel(t);
    eddy_timer_release(t);
    eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000), -1);
    eddy_loop_metrics_t m;
    eddy_loop_group_metrics(g, &m);
    printf("  100000 tasks ran: %ld (%.1f ms), timer ticks in 110 ms every 20 ms: %d\n",
           atomic_load(&tasks_run), (double)(eddy_now_ns() - t0) / 1e6, atomic_load(&ticks));
    printf("  metrics: %llu tasks, %llu timers fired, %llu turns, %llu wake-ups, %llu stalls\n",
           (unsigned long long)m.tasks_run, (unsigned long long)m.timers_fired,
           (unsigned long long)m.turns, (unsigned long long)m.wakeups,
           (unsigned long long)m.stalls);
    return eddy_loop_group_free(g) == 0 ? 0 : 1;
}

/* ---- carrier ---- */

#define KEYS 8
#define PER_KEY 10000

static long last_seen[KEYS];
static atomic_long out_of_order;

static int consume(eddy_carrier_t *c, unsigned thread, const eddy_carrier_item_t *items,
                   size_t n, void *arg)
{
    (void)c, (void)thread, (void)arg;
    for (size_t i = 0; i < n; i++) {
        long v = (long)(intptr_t)items[i].data;
        if (v != last_seen[items[i].key] + 1) {
            atomic_fetch_add(&out_of_order, 1);
        }
        last_seen[items[i].key] = v; /* one thread at a time per key (ordered mode) */
    }
    return 0;
}

static const eddy_carrier_ops_t demo_ops = {.consume = consume};

static int carrier_demo(void)
{
    printf("\ncarrier: 8 partitions, 2 consumer threads, %d items on %d keys, ordered\n",
           KEYS * PER_KEY, KEYS);
    eddy_carrier_options_t o;
    eddy_carrier_options_init(&o);
    o.partitions = 8;
    o.consumers = 2;
    o.partitioner = EDDY_CARRIER_BY_KEY;
    o.mode = EDDY_CARRIER_ORDERED;
    eddy_carrier_t *c;
    if (eddy_carrier_new(&c, &o, &demo_ops, NULL) != 0) {
        fprintf(stderr, "demo: no carrier\n");
        return 1;
    }
    for (long i = 1; i <= PER_KEY; i++) {
        for (uint64_t k = 0; k < KEYS; k++) {
            eddy_carrier_offer(c, k, (void *)(intptr_t)i, 0);
        }
        if (i == PER_KEY / 2) {
            eddy_carrier_set_consumers(c, 3); /* rebalance under load */
        }
    }
    eddy_carrier_shutdown(c, EDDY_CARRIER_DRAIN);
    uint64_t hist[10];
    eddy_carrier_batch_histogram(c, hist, 10);
    printf("  consumed, rebalanced to 3 threads half way: %ld items out of order\n",
           atomic_load(&out_of_order));
    uint64_t larger = 0;
    for (int k = 4; k < 10; k++) {
        larger += hist[k];
    }
    printf("  batches by size: 1: %llu, 2-3: %llu, 4-7: %llu, 8-15: %llu, 16 and more: %llu\n",
           (unsigned long long)hist[0], (unsigned long long)hist[1],
           (unsigned long long)hist[2], (unsigned long long)hist[3],
           (unsigned long long)larger);
    eddy_carrier_free(c);
    return atomic_load(&out_of_order) == 0 ? 0 : 1;
}

/* ---------------------------------------------------------------------------------------
 * Channels: an echo server and eddy's own client on loopback, through pipelines.
 */

static void echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_ctx_write(ctx, msg, NULL); /* passes ownership on */
}

static void echo_read_complete(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
}

static const eddy_handler_ops_t echo_ops = {
    .name = "echo",
    .sharable = true,
    .channel_read = echo_read,
    .channel_read_complete = echo_read_complete,
};

static int init_echo(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "echo", &echo_ops, NULL, NULL);
}

typedef struct pinger_s {
    int round_trips;
    size_t got;
    eddy_promise_t *done;
} pinger_t;

static void ping(eddy_ctx_t *ctx)
{
    eddy_ctx_write_and_flush(ctx, eddy_buf_msg(eddy_buf_from_str("ping!")), NULL);
}

static void pinger_active(eddy_ctx_t *ctx)
{
    ping(ctx);
    eddy_ctx_fire_channel_active(ctx);
}

static void pinger_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    pinger_t *pg = eddy_ctx_state(ctx);
    pg->got += eddy_buf_readable(eddy_buf_of(msg));
    eddy_msg_release(msg);
    if (pg->got % 5 == 0 && ++pg->round_trips < 1000) {
        ping(ctx);
    } else if (pg->round_trips == 1000) {
        eddy_promise_succeed(pg->done, NULL);
    }
}

static const eddy_handler_ops_t pinger_ops = {
    .name = "pinger", .channel_active = pinger_active, .channel_read = pinger_read};

static int init_pinger(eddy_channel_t *ch, void *arg)
{
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "pinger", &pinger_ops, arg, NULL);
}

static int channels_demo(void)
{
    printf("\nchannels: an echo server and a client on 127.0.0.1, 1000 round trips\n");
    eddy_loop_group_t *g = eddy_loop_group_new(2, NULL);
    eddy_addr_t addr;
    eddy_addr_ip(&addr, "127.0.0.1", 0);
    eddy_listen_options_t lo = {.loop = eddy_loop_group_next(g), .children = g,
                                .child_init = init_echo};
    eddy_future_t *bound = eddy_channel_listen(&addr, &lo);
    if (eddy_future_await(bound, 5000) != 0 || eddy_future_error(bound) != 0) {
        fprintf(stderr, "demo: listen failed: %s\n", eddy_strerror(eddy_future_error(bound)));
        return 1;
    }
    eddy_channel_t *server = eddy_future_channel(bound);
    char text[64];
    printf("  listening on %s\n",
           eddy_addr_format(eddy_channel_local_addr(server), text, sizeof(text)));
    pinger_t pg = {.done = eddy_promise_new(NULL)};
    int64_t t0 = eddy_now_ns();
    eddy_future_t *conn = eddy_channel_connect(eddy_loop_group_next(g),
                                               eddy_channel_local_addr(server), NULL,
                                               init_pinger, &pg);
    int rc = eddy_future_await(pg.done, 10000) == 0 && eddy_future_error(conn) == 0 ? 0 : 1;
    double us = (double)(eddy_now_ns() - t0) / 1000.0;
    printf("  %d round trips of 5 bytes in %.0f us (%.1f us each)\n", pg.round_trips, us,
           us / (pg.round_trips ? pg.round_trips : 1));
    eddy_channel_t *client = eddy_future_channel(conn);
    if (client != NULL) {
        eddy_channel_counters_t c;
        eddy_channel_counters(client, &c);
        printf("  client counters: %llu bytes read, %llu written\n",
               (unsigned long long)c.bytes_read, (unsigned long long)c.bytes_written);
    }
    eddy_future_release(conn);
    eddy_future_release(pg.done);
    eddy_future_release(bound);
    /* Shutting the group down closes the server and every connection. */
    eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000), -1);
    eddy_loop_group_free(g);
    printf("  group shut down: listener and connections closed\n");
    return rc;
}

int main(void)
{
    eddy_allocator_t *alloc = eddy_allocator_default();
    printf("eddy %s demo\n\nbuffers (allocator: %s)\n", eddy_version(),
           eddy_allocator_name(alloc));

    eddy_buf_t *wire = eddy_buf_new(0); /* grows as frames are written */
    const char *words[] = {"hello", "from", "eddy's", "pooled", "buffers"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (write_frame(wire, words[i]) != 0) {
            fprintf(stderr, "demo: write failed\n");
            return 1;
        }
    }
    printf("wrote %zu bytes of frames; capacity grew to %zu\n", eddy_buf_readable(wire),
           eddy_buf_capacity(wire));

    /* Decode: each frame is a slice of the wire buffer, gathered into a composite. */
    eddy_composite_t *gathered = eddy_composite_new(0);
    eddy_buf_t *frame;
    while ((frame = read_frame(wire)) != NULL) {
        printf("  frame: \"%.*s\" (%zu bytes, refcount of the wire buffer now %u)\n",
               (int)eddy_buf_readable(frame), (const char *)eddy_buf_read_ptr(frame),
               eddy_buf_readable(frame), eddy_buf_refcnt(wire));
        eddy_composite_add(gathered, frame); /* takes ownership */
    }
    eddy_buf_release(wire); /* the slices keep the memory alive */

    struct iovec iov[16];
    int n = eddy_composite_iovec(gathered, iov, 16);
    printf("composite: %zu bytes in %d iovecs, ready for writev\n",
           eddy_composite_readable(gathered), n);
    eddy_buf_t *joined = eddy_composite_consolidate(gathered);
    printf("consolidated: \"%.*s\"\n", (int)eddy_buf_readable(joined),
           (const char *)eddy_buf_read_ptr(joined));
    eddy_buf_release(joined);
    eddy_composite_release(gathered);

    /* A burst of buffers of network-like sizes, then the allocator's view of memory. */
    eddy_buf_t *burst[256];
    for (int i = 0; i < 256; i++) {
        burst[i] = eddy_buf_new((size_t)64 << (i % 11)); /* 64 B .. 64 KiB */
    }
    eddy_allocator_metrics_t m;
    eddy_allocator_metrics(alloc, &m);
    printf("\n256 live buffers: %zu KiB in use, %zu KiB held, %zu arenas\n", m.used >> 10,
           m.held >> 10, m.arenas);
    for (int i = 0; i < 256; i++) {
        eddy_buf_release(burst[i]);
    }
    size_t returned = eddy_allocator_trim(alloc);
    eddy_allocator_metrics(alloc, &m);
    printf("all released, trim returned %zu KiB: %zu KiB in use, %zu KiB held\n",
           returned >> 10, m.used >> 10, m.held >> 10);
    int rc = loops_demo();
    rc |= carrier_demo();
    rc |= channels_demo();
    printf("\nlive buffers at exit: %lld\n", (long long)eddy_buf_live_count());
    return rc == 0 && eddy_buf_live_count() == 0 ? 0 : 1;
}
