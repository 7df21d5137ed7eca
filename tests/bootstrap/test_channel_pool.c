/*
 * Channel pools (bootstrap/channel_pool.c) against an echo server on 127.0.0.1: reuse in LIFO
 * order, waiters served in order at max_connections, a channel closed while acquired, the
 * acquire timeout, max pending, a connection the server closes while idle, bad releases, the
 * health checks, idle limits, close with acquires waiting and channels out, four threads
 * sharing three connections; and pool maps: one pool per key (also when threads race for
 * it), remove, close with channels out, a failing factory. Every test is bounded in time
 * and closes and frees what it made.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/eddy.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define DEADLINE_MS 10000

#include "support/wait_util.h"

/* ---------------------------------------------------------------------------------------
 * The echo server, and a client handler that counts what comes back per channel
 */

static void echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_ctx_write(ctx, msg, NULL);
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

/* Every accepted channel joins the group arg, so that a test can close the server's side. */
static int init_echo_child(eddy_channel_t *ch, void *arg)
{
    int rc = eddy_channel_group_add(arg, ch);
    return rc != 0
               ? rc
               : eddy_pipeline_add_last(eddy_channel_pipeline(ch), "echo", &echo_ops, NULL, NULL);
}

/* A client channel's received byte count, found by the channel (attributes are the loop's). */
typedef struct rx_s {
    _Atomic(eddy_channel_t *) ch;
    _Atomic size_t len; /* release by the loop, acquire by the test */
} rx_t;

#define MAX_RX 64
static rx_t rxs[MAX_RX];
static _Atomic size_t nrx;

static void rx_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    rx_t *rx = eddy_ctx_state(ctx);
    eddy_buf_t *b = eddy_buf_of(msg);
    atomic_fetch_add_explicit(&rx->len, eddy_buf_readable(b), memory_order_release);
    eddy_buf_release(b);
}

static const eddy_handler_ops_t rx_ops = {
    .name = "rx",
    .sharable = true,
    .channel_read = rx_read,
};

static int init_rx(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    size_t i = atomic_fetch_add(&nrx, 1);
    assert_true(i < MAX_RX);
    atomic_store(&rxs[i].len, 0);
    atomic_store(&rxs[i].ch, ch);
    return eddy_pipeline_add_last(eddy_channel_pipeline(ch), "rx", &rx_ops, &rxs[i], NULL);
}

static rx_t *rx_of(eddy_channel_t *ch)
{
    size_t n = atomic_load(&nrx);
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(&rxs[i].ch) == ch) {
            return &rxs[i];
        }
    }
    fail_msg("no rx for the channel");
    return NULL;
}

/* Write text on ch and wait for its echo. The caller holds ch (acquired). */
static void echo(eddy_channel_t *ch, const char *text)
{
    rx_t *rx = rx_of(ch);
    size_t before = atomic_load_explicit(&rx->len, memory_order_acquire);
    eddy_channel_write_and_flush(ch, eddy_buf_msg(eddy_buf_from_str(text)), NULL);
    WAIT_FOR(atomic_load_explicit(&rx->len, memory_order_acquire) >= before + strlen(text));
}

/* ---------------------------------------------------------------------------------------
 * The setup: a server and a client bootstrap on their own groups
 */

typedef struct env_s {
    eddy_loop_group_t *server_group, *client_group;
    eddy_server_bootstrap_t *sb;
    eddy_channel_group_t *children;
    eddy_channel_t *server;
    eddy_bootstrap_t *cb;
    uint16_t port;
    eddy_channel_pool_t *pool;
} env_t;

static eddy_channel_t *await_channel(eddy_future_t *f)
{
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    eddy_channel_t *ch = eddy_channel_retain(eddy_future_channel(f));
    eddy_future_release(f);
    return ch;
}

/* The error f failed with (0: success), f released. */
static int await_error(eddy_future_t *f)
{
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    int err = eddy_future_error(f);
    eddy_future_release(f);
    return err;
}

/* A channel from the pool (a reference of ours: pool_put releases it). */
static eddy_channel_t *pool_get(env_t *e)
{
    return await_channel(eddy_channel_pool_acquire(e->pool));
}

static void pool_put(env_t *e, eddy_channel_t *ch)
{
    assert_int_equal(await_error(eddy_channel_pool_release(e->pool, ch)), 0);
    eddy_channel_release(ch);
}

static eddy_channel_pool_counters_t counters(env_t *e)
{
    eddy_channel_pool_counters_t c;
    eddy_channel_pool_counters(e->pool, &c);
    return c;
}

static uint64_t server_active(env_t *e)
{
    eddy_server_counters_t c;
    eddy_server_bootstrap_counters(e->sb, &c);
    return c.active;
}

static void env_open(env_t *e, const eddy_channel_pool_options_t *o)
{
    memset(e, 0, sizeof(*e));
    atomic_store(&nrx, 0);
    e->server_group = eddy_loop_group_new(2, NULL);
    e->client_group = eddy_loop_group_new(2, NULL);
    e->children = eddy_channel_group_new("children");
    e->sb = eddy_server_bootstrap_new();
    e->cb = eddy_bootstrap_new();
    assert_non_null(e->server_group);
    assert_non_null(e->client_group);
    assert_non_null(e->children);
    assert_non_null(e->sb);
    assert_non_null(e->cb);
    assert_int_equal(eddy_server_bootstrap_group(e->sb, e->server_group, NULL), 0);
    eddy_server_bootstrap_child_init(e->sb, init_echo_child, e->children);
    e->server = await_channel(eddy_server_bootstrap_bind(e->sb, "127.0.0.1", 0));
    e->port = eddy_addr_port(eddy_channel_local_addr(e->server));
    assert_int_equal(eddy_bootstrap_group(e->cb, e->client_group), 0);
    eddy_bootstrap_init(e->cb, init_rx, NULL);
    e->pool = eddy_channel_pool_new(e->cb, "127.0.0.1", e->port, o);
    assert_non_null(e->pool);
}

static void group_finish(eddy_loop_group_t *g)
{
    eddy_future_t *t = eddy_loop_group_shutdown_gracefully(g, 0, 2000);
    assert_int_equal(eddy_future_await(t, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

/* Close the pool (every channel back already) and everything else. */
static void env_close(env_t *e)
{
    if (e->pool != NULL) {
        assert_int_equal(await_error(eddy_channel_pool_close(e->pool)), 0);
    }
    eddy_bootstrap_free(e->cb);
    assert_int_equal(await_error(eddy_channel_group_close(e->children, NULL, NULL)), 0);
    eddy_channel_close(e->server, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(e->server), DEADLINE_MS), 0);
    eddy_channel_release(e->server);
    eddy_server_bootstrap_free(e->sb);
    group_finish(e->client_group);
    group_finish(e->server_group);
    eddy_channel_group_free(e->children);
}

/* ---------------------------------------------------------------------------------------
 * Tests
 */

static void test_release_then_acquire_reuses_the_last_released_first(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    eddy_channel_t *a = pool_get(&e);
    eddy_channel_t *b = pool_get(&e);
    assert_ptr_not_equal(a, b);
    echo(a, "a");
    echo(b, "b");
    uint64_t ida = eddy_channel_id(a), idb = eddy_channel_id(b);
    assert_int_equal(counters(&e).acquired, 2);
    pool_put(&e, a);
    pool_put(&e, b);
    eddy_channel_pool_counters_t c = counters(&e);
    assert_int_equal(c.idle, 2);
    assert_int_equal(c.acquired, 0);

    /* Most recently released first: b, then a; no new connection. */
    eddy_channel_t *x = pool_get(&e);
    eddy_channel_t *y = pool_get(&e);
    assert_int_equal(eddy_channel_id(x), idb);
    assert_int_equal(eddy_channel_id(y), ida);
    echo(x, "again");
    c = counters(&e);
    assert_int_equal(c.created, 2);
    assert_int_equal(c.idle, 0);
    assert_int_equal(c.acquired, 2);
    pool_put(&e, x);
    pool_put(&e, y);
    env_close(&e);
}

/* The hot path: an idle channel is handed out by the call itself, and the release's answer
 * too; neither waits for a loop. */
static void test_an_acquire_that_finds_an_idle_channel_completes_on_return(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    pool_put(&e, pool_get(&e));
    for (int i = 0; i < 3; i++) {
        eddy_future_t *f = eddy_channel_pool_acquire(e.pool);
        assert_true(eddy_future_is_done(f));
        assert_int_equal(eddy_future_error(f), 0);
        eddy_channel_t *ch = eddy_future_channel(f);
        assert_non_null(ch);
        eddy_future_t *r = eddy_channel_pool_release(e.pool, ch);
        assert_true(eddy_future_is_done(r));
        assert_int_equal(eddy_future_error(r), 0);
        eddy_future_release(r);
        /* A second release of it is refused, and also answered at once. */
        r = eddy_channel_pool_release(e.pool, ch);
        assert_true(eddy_future_is_done(r));
        assert_int_equal(eddy_future_error(r), EDDY_EINVAL);
        eddy_future_release(r);
        eddy_future_release(f);
    }
    eddy_channel_pool_counters_t c = counters(&e);
    assert_int_equal(c.created, 1);
    assert_int_equal(c.idle, 1);
    env_close(&e);
}

static void test_max_connections_serves_waiters_in_order_on_release(void **state)
{
    (void)state;
    eddy_channel_pool_options_t o = {.max_connections = 1};
    env_t e;
    env_open(&e, &o);
    eddy_channel_t *a = pool_get(&e);
    eddy_future_t *f1 = eddy_channel_pool_acquire(e.pool);
    eddy_future_t *f2 = eddy_channel_pool_acquire(e.pool);
    assert_non_null(f1);
    assert_non_null(f2);
    assert_false(eddy_future_is_done(f1));
    assert_false(eddy_future_is_done(f2));
    assert_int_equal(counters(&e).pending, 2);

    pool_put(&e, a);
    eddy_channel_t *b = await_channel(f1);
    assert_ptr_equal(b, a);
    assert_false(eddy_future_is_done(f2));
    assert_int_equal(counters(&e).pending, 1);
    echo(b, "first");
    pool_put(&e, b);
    eddy_channel_t *c = await_channel(f2);
    assert_ptr_equal(c, a);
    pool_put(&e, c);
    assert_int_equal(counters(&e).created, 1);
    assert_int_equal(counters(&e).pending, 0);
    env_close(&e);
}

static void test_a_channel_closed_while_acquired_frees_its_slot_at_once(void **state)
{
    (void)state;
    eddy_channel_pool_options_t o = {.max_connections = 1};
    env_t e;
    env_open(&e, &o);
    eddy_channel_t *a = pool_get(&e);
    eddy_future_t *w = eddy_channel_pool_acquire(e.pool);
    assert_false(eddy_future_is_done(w));
    eddy_channel_close(a, NULL);
    eddy_channel_t *b = await_channel(w); /* a new connection, a not released yet */
    assert_ptr_not_equal(b, a);
    echo(b, "replacement");
    eddy_channel_pool_counters_t c = counters(&e);
    assert_int_equal(c.acquired, 2);
    assert_int_equal(c.created, 2);
    assert_int_equal(c.closed, 1);
    pool_put(&e, a); /* only the record goes */
    assert_int_equal(counters(&e).acquired, 1);
    assert_int_equal(counters(&e).idle, 0);
    pool_put(&e, b);
    assert_int_equal(counters(&e).idle, 1);
    env_close(&e);
}

static void test_a_waiting_acquire_times_out(void **state)
{
    (void)state;
    eddy_channel_pool_options_t o = {.max_connections = 1, .acquire_timeout_ms = 100};
    env_t e;
    env_open(&e, &o);
    eddy_channel_t *a = pool_get(&e);
    int64_t t0 = now_ms();
    assert_int_equal(await_error(eddy_channel_pool_acquire(e.pool)), EDDY_ETIMEDOUT);
    int64_t took = now_ms() - t0;
    assert_true(took >= 90 && took < 5000);
    assert_int_equal(counters(&e).pending, 0);
    /* The slot still works for the next one. */
    pool_put(&e, a);
    pool_put(&e, pool_get(&e));
    env_close(&e);
}

static void test_acquires_beyond_max_pending_fail_busy(void **state)
{
    (void)state;
    eddy_channel_pool_options_t o = {.max_connections = 1, .max_pending_acquires = 1};
    env_t e;
    env_open(&e, &o);
    eddy_channel_t *a = pool_get(&e);
    eddy_future_t *f1 = eddy_channel_pool_acquire(e.pool);
    assert_false(eddy_future_is_done(f1));
    assert_int_equal(await_error(eddy_channel_pool_acquire(e.pool)), EDDY_EBUSY);
    assert_int_equal(counters(&e).pending, 1);
    pool_put(&e, a);
    pool_put(&e, await_channel(f1));
    env_close(&e);
}

static void test_an_idle_channel_the_server_closed_leaves_the_pool(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    eddy_channel_t *a = pool_get(&e);
    echo(a, "hello");
    uint64_t ida = eddy_channel_id(a);
    pool_put(&e, a);
    assert_int_equal(counters(&e).idle, 1);

    assert_int_equal(await_error(eddy_channel_group_close(e.children, NULL, NULL)), 0);
    WAIT_FOR(counters(&e).idle == 0);
    eddy_channel_pool_counters_t c = counters(&e);
    assert_int_equal(c.closed, 1);

    eddy_channel_t *b = pool_get(&e);
    assert_int_not_equal(eddy_channel_id(b), ida);
    echo(b, "new one");
    assert_int_equal(counters(&e).created, 2);
    pool_put(&e, b);
    env_close(&e);
}

static void test_foreign_and_double_releases_fail_einval(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    eddy_channel_t *own = pool_get(&e);
    eddy_channel_t *foreign = await_channel(eddy_bootstrap_connect(e.cb, "127.0.0.1", e.port));
    assert_int_equal(await_error(eddy_channel_pool_release(e.pool, foreign)), EDDY_EINVAL);
    eddy_channel_pool_counters_t c = counters(&e);
    assert_int_equal(c.acquired, 1);
    assert_int_equal(c.idle, 0);

    assert_int_equal(await_error(eddy_channel_pool_release(e.pool, own)), 0);
    assert_int_equal(await_error(eddy_channel_pool_release(e.pool, own)), EDDY_EINVAL);
    c = counters(&e);
    assert_int_equal(c.acquired, 0);
    assert_int_equal(c.idle, 1);
    eddy_channel_release(own);

    eddy_channel_close(foreign, NULL);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(foreign), DEADLINE_MS), 0);
    eddy_channel_release(foreign);
    env_close(&e);
}

static _Atomic int checked;

static bool refuse_all(eddy_channel_t *ch, void *arg)
{
    (void)ch;
    assert_ptr_equal(arg, &checked);
    atomic_fetch_add(&checked, 1);
    return false;
}

static void test_health_checks_close_what_fails_them(void **state)
{
    (void)state;
    atomic_store(&checked, 0);
    eddy_channel_pool_options_t o = {.acquire_check = refuse_all, .check_arg = &checked};
    env_t e;
    env_open(&e, &o);
    eddy_channel_t *a = pool_get(&e); /* a new connection is not checked */
    uint64_t ida = eddy_channel_id(a);
    pool_put(&e, a);
    eddy_channel_t *b = pool_get(&e); /* the idle one fails: closed, a new one made */
    assert_int_equal(atomic_load(&checked), 1);
    assert_int_not_equal(eddy_channel_id(b), ida);
    WAIT_FOR(counters(&e).closed == 1);
    pool_put(&e, b);
    assert_int_equal(await_error(eddy_channel_pool_close(e.pool)), 0);

    /* The release check. */
    eddy_channel_pool_options_t r = {.release_check = refuse_all, .check_arg = &checked};
    e.pool = eddy_channel_pool_new(e.cb, "127.0.0.1", e.port, &r);
    assert_non_null(e.pool);
    pool_put(&e, pool_get(&e));
    assert_int_equal(atomic_load(&checked), 2);
    assert_int_equal(counters(&e).idle, 0);
    WAIT_FOR(counters(&e).closed == 1);
    env_close(&e);
}

static void test_idle_channels_beyond_max_idle_or_too_old_close(void **state)
{
    (void)state;
    eddy_channel_pool_options_t o = {.max_idle = 1, .idle_timeout_ms = 300};
    env_t e;
    env_open(&e, &o);
    eddy_channel_t *a = pool_get(&e);
    eddy_channel_t *b = pool_get(&e);
    pool_put(&e, a);
    pool_put(&e, b); /* beyond max_idle: closed */
    assert_true(counters(&e).idle <= 1);
    WAIT_FOR(counters(&e).closed >= 1);
    /* The other goes after idle_timeout_ms, and the server sees both gone. */
    WAIT_FOR(counters(&e).idle == 0 && counters(&e).closed == 2);
    WAIT_FOR(server_active(&e) == 0);
    /* Reused before its time, a channel stays. */
    eddy_channel_t *c = pool_get(&e);
    pool_put(&e, c);
    c = pool_get(&e);
    pool_put(&e, c);
    assert_int_equal(counters(&e).created, 3);
    env_close(&e);
}

static void test_close_fails_waiters_and_closes_channels_as_they_return(void **state)
{
    (void)state;
    eddy_channel_pool_options_t o = {.max_connections = 2};
    env_t e;
    env_open(&e, &o);
    eddy_channel_t *a = pool_get(&e);
    eddy_channel_t *b = pool_get(&e);
    pool_put(&e, b); /* idle */
    eddy_channel_t *a2 = pool_get(&e);
    assert_ptr_equal(a2, b);
    eddy_future_t *w1 = eddy_channel_pool_acquire(e.pool);
    eddy_future_t *w2 = eddy_channel_pool_acquire(e.pool);
    assert_false(eddy_future_is_done(w1));

    eddy_future_t *closed = eddy_channel_pool_close(e.pool);
    assert_non_null(closed);
    assert_int_equal(await_error(w1), EDDY_ECLOSED);
    assert_int_equal(await_error(w2), EDDY_ECLOSED);
    assert_false(eddy_future_is_done(closed));

    eddy_channel_t *keep = eddy_channel_retain(a);
    pool_put(&e, a);
    assert_int_equal(eddy_future_await(eddy_channel_close_future(keep), DEADLINE_MS), 0);
    eddy_channel_release(keep);
    assert_false(eddy_future_is_done(closed));
    pool_put(&e, a2);
    assert_int_equal(await_error(closed), 0); /* the pool is freed */
    e.pool = NULL;
    WAIT_FOR(server_active(&e) == 0);
    env_close(&e);
}

static void test_close_with_nothing_out_completes_at_once_after_idle_closed(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, NULL);
    pool_put(&e, pool_get(&e));
    assert_int_equal(await_error(eddy_channel_pool_close(e.pool)), 0);
    e.pool = NULL;
    WAIT_FOR(server_active(&e) == 0);
    env_close(&e);
}

/* Four threads share three connections. */
enum { THREADS = 4, ROUNDS = 2000, LIMIT = 3 };

static _Atomic int over_limit;

static void *stress_thread(void *arg)
{
    env_t *e = arg;
    char text[16];
    for (int i = 0; i < ROUNDS; i++) {
        eddy_future_t *f = eddy_channel_pool_acquire(e->pool);
        if (eddy_future_await(f, DEADLINE_MS) != 0 || eddy_future_error(f) != 0) {
            atomic_fetch_add(&over_limit, 1000);
            eddy_future_release(f);
            return NULL;
        }
        eddy_channel_t *ch = eddy_future_channel(f);
        if (server_active(e) > LIMIT) {
            atomic_fetch_add(&over_limit, 1);
        }
        rx_t *rx = rx_of(ch);
        size_t before = atomic_load_explicit(&rx->len, memory_order_acquire);
        int n = snprintf(text, sizeof(text), "%d", i);
        eddy_channel_write_and_flush(ch, eddy_buf_msg(eddy_buf_from_str(text)), NULL);
        int64_t until = now_ms() + DEADLINE_MS;
        while (atomic_load_explicit(&rx->len, memory_order_acquire) < before + (size_t)n &&
               now_ms() < until) {
            sched_yield();
        }
        eddy_future_t *r = eddy_channel_pool_release(e->pool, ch);
        if (eddy_future_error(r) != 0) {
            atomic_fetch_add(&over_limit, 1000);
        }
        eddy_future_release(r);
        eddy_future_release(f);
    }
    return NULL;
}

static void test_four_threads_share_three_connections(void **state)
{
    (void)state;
    eddy_channel_pool_options_t o = {.max_connections = LIMIT};
    env_t e;
    env_open(&e, &o);
    atomic_store(&over_limit, 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, stress_thread, &e), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    assert_int_equal(atomic_load(&over_limit), 0);
    eddy_channel_pool_counters_t c = counters(&e);
    assert_true(c.created <= LIMIT);
    assert_int_equal(c.acquired, 0);
    assert_int_equal(c.pending, 0);
    assert_int_equal(c.closed, 0);
    assert_int_equal(c.idle, c.created);
    assert_true(server_active(&e) <= LIMIT);
    env_close(&e);
}

/* ---------------------------------------------------------------------------------------
 * Pool maps
 */

/* The factory: a pool to 127.0.0.1:port of the env for any plain key, none for TLS keys (the
 * test's bootstrap speaks no TLS), counting its calls per port. */
typedef struct factory_s {
    env_t *e;
    _Atomic int calls;
    _Atomic int per_port[8]; /* by key port - e->port, for the ports tests use */
} factory_t;

static eddy_channel_pool_t *make_pool(const eddy_channel_pool_key_t *key, void *arg)
{
    factory_t *fa = arg;
    atomic_fetch_add(&fa->calls, 1);
    unsigned slot = (unsigned)(uint16_t)(key->port - fa->e->port);
    if (slot < 8) {
        atomic_fetch_add(&fa->per_port[slot], 1);
    }
    if (key->tls) {
        return NULL;
    }
    return eddy_channel_pool_new(fa->e->cb, "127.0.0.1", fa->e->port, NULL);
}

static void map_open(env_t *e, factory_t *fa, eddy_channel_pool_map_t **m)
{
    env_open(e, NULL);
    /* The env's own pool is not needed: the map makes them. */
    assert_int_equal(await_error(eddy_channel_pool_close(e->pool)), 0);
    e->pool = NULL;
    memset(fa, 0, sizeof(*fa));
    fa->e = e;
    *m = eddy_channel_pool_map_new(make_pool, fa);
    assert_non_null(*m);
}

static void test_pool_map_makes_one_pool_per_key(void **state)
{
    (void)state;
    env_t e;
    factory_t fa;
    eddy_channel_pool_map_t *m;
    map_open(&e, &fa, &m);
    eddy_channel_pool_key_t k1 = {.host = "127.0.0.1", .port = e.port};
    char host[] = "127.0.0.1"; /* the same host in other memory: compared by value */
    eddy_channel_pool_key_t k1_again = {.host = host, .port = e.port};
    eddy_channel_pool_key_t k2 = {.host = "localhost", .port = e.port};
    eddy_channel_pool_key_t k3 = {.host = "127.0.0.1", .port = (uint16_t)(e.port + 1)};
    assert_false(eddy_channel_pool_map_contains(m, &k1));
    eddy_channel_pool_t *p1 = eddy_channel_pool_map_get(m, &k1);
    assert_non_null(p1);
    host[0] = 'x'; /* the map copied the host: changing ours changes nothing */
    assert_ptr_equal(eddy_channel_pool_map_get(m, &k1), p1);
    host[0] = '1';
    assert_ptr_equal(eddy_channel_pool_map_get(m, &k1_again), p1);
    assert_int_equal(atomic_load(&fa.calls), 1);

    eddy_channel_pool_t *p2 = eddy_channel_pool_map_get(m, &k2);
    eddy_channel_pool_t *p3 = eddy_channel_pool_map_get(m, &k3);
    assert_non_null(p2);
    assert_non_null(p3);
    assert_ptr_not_equal(p1, p2);
    assert_ptr_not_equal(p1, p3);
    assert_ptr_not_equal(p2, p3);
    assert_int_equal(atomic_load(&fa.calls), 3);
    assert_int_equal(eddy_channel_pool_map_size(m), 3);
    assert_true(eddy_channel_pool_map_contains(m, &k2));

    /* Many keys: the table grows and every pool stays where it was. */
    eddy_channel_pool_t *many[40];
    char names[40][16];
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof(names[i]), "host%d", i);
        eddy_channel_pool_key_t k = {.host = names[i], .port = e.port};
        many[i] = eddy_channel_pool_map_get(m, &k);
        assert_non_null(many[i]);
    }
    for (int i = 0; i < 40; i++) {
        eddy_channel_pool_key_t k = {.host = names[i], .port = e.port};
        assert_ptr_equal(eddy_channel_pool_map_get(m, &k), many[i]);
    }
    assert_ptr_equal(eddy_channel_pool_map_get(m, &k1), p1);
    assert_int_equal(atomic_load(&fa.calls), 43);
    assert_int_equal(eddy_channel_pool_map_size(m), 43);

    /* The pools work. */
    e.pool = p1;
    eddy_channel_t *ch = pool_get(&e);
    echo(ch, "through the map");
    pool_put(&e, ch);
    e.pool = NULL;
    assert_int_equal(await_error(eddy_channel_pool_map_close(m)), 0);
    env_close(&e);
}

static void test_pool_map_remove_closes_and_a_later_get_makes_a_new_pool(void **state)
{
    (void)state;
    env_t e;
    factory_t fa;
    eddy_channel_pool_map_t *m;
    map_open(&e, &fa, &m);
    eddy_channel_pool_key_t k = {.host = "127.0.0.1", .port = e.port};
    eddy_channel_pool_key_t other = {.host = "127.0.0.1", .port = (uint16_t)(e.port + 1)};
    assert_null(eddy_channel_pool_map_remove(m, &k));
    eddy_channel_pool_t *p = eddy_channel_pool_map_get(m, &k);
    assert_non_null(eddy_channel_pool_map_get(m, &other));
    e.pool = p;
    pool_put(&e, pool_get(&e)); /* an idle channel for remove to close */
    e.pool = NULL;
    WAIT_FOR(server_active(&e) == 1);

    assert_int_equal(await_error(eddy_channel_pool_map_remove(m, &k)), 0);
    assert_false(eddy_channel_pool_map_contains(m, &k));
    assert_true(eddy_channel_pool_map_contains(m, &other));
    assert_int_equal(eddy_channel_pool_map_size(m), 1);
    WAIT_FOR(server_active(&e) == 0);
    assert_null(eddy_channel_pool_map_remove(m, &k));

    eddy_channel_pool_t *q = eddy_channel_pool_map_get(m, &k);
    assert_non_null(q);
    assert_int_equal(atomic_load(&fa.per_port[0]), 2);
    e.pool = q;
    eddy_channel_t *ch = pool_get(&e);
    echo(ch, "a new pool");
    assert_int_equal(counters(&e).created, 1);
    pool_put(&e, ch);
    e.pool = NULL;
    assert_int_equal(await_error(eddy_channel_pool_map_close(m)), 0);
    WAIT_FOR(server_active(&e) == 0);
    env_close(&e);
}

static void test_pool_map_close_waits_for_channels_out_and_refuses_gets(void **state)
{
    (void)state;
    env_t e;
    factory_t fa;
    eddy_channel_pool_map_t *m;
    map_open(&e, &fa, &m);
    eddy_channel_pool_key_t k1 = {.host = "127.0.0.1", .port = e.port};
    eddy_channel_pool_key_t k2 = {.host = "localhost", .port = e.port};
    eddy_channel_pool_t *p1 = eddy_channel_pool_map_get(m, &k1);
    eddy_channel_pool_t *p2 = eddy_channel_pool_map_get(m, &k2);
    e.pool = p1;
    eddy_channel_t *out = pool_get(&e);
    e.pool = p2;
    pool_put(&e, pool_get(&e)); /* idle in p2 */
    WAIT_FOR(server_active(&e) == 2);

    eddy_future_t *closed = eddy_channel_pool_map_close(m);
    assert_non_null(closed);
    assert_null(eddy_channel_pool_map_get(m, &k1));
    assert_null(eddy_channel_pool_map_get(m, &k2));
    assert_int_equal(atomic_load(&fa.calls), 2);
    WAIT_FOR(server_active(&e) == 1); /* p2's idle channel closed; ours is still out */
    assert_false(eddy_future_is_done(closed));

    e.pool = p1;
    pool_put(&e, out); /* closed, as its pool is closing: the map goes */
    assert_int_equal(await_error(closed), 0);
    e.pool = NULL;
    WAIT_FOR(server_active(&e) == 0);
    env_close(&e);
}

static void test_pool_map_factory_failure_fails_the_get_and_keeps_nothing(void **state)
{
    (void)state;
    env_t e;
    factory_t fa;
    eddy_channel_pool_map_t *m;
    map_open(&e, &fa, &m);
    eddy_channel_pool_key_t tls = {.host = "127.0.0.1", .port = e.port, .tls = true};
    eddy_channel_pool_key_t plain = {.host = "127.0.0.1", .port = e.port};
    assert_null(eddy_channel_pool_map_get(m, &tls));
    assert_false(eddy_channel_pool_map_contains(m, &tls));
    assert_int_equal(eddy_channel_pool_map_size(m), 0);
    /* Nothing is remembered of a failure: the next get asks the factory again. */
    assert_null(eddy_channel_pool_map_get(m, &tls));
    assert_int_equal(atomic_load(&fa.calls), 2);
    /* The same host and port without TLS is another key. */
    assert_non_null(eddy_channel_pool_map_get(m, &plain));
    assert_int_equal(eddy_channel_pool_map_size(m), 1);
    assert_int_equal(await_error(eddy_channel_pool_map_close(m)), 0);
    env_close(&e);
}

static void test_pool_map_close_of_an_empty_map_completes_at_once(void **state)
{
    (void)state;
    factory_t fa = {0};
    eddy_channel_pool_map_t *m = eddy_channel_pool_map_new(make_pool, &fa);
    assert_non_null(m);
    eddy_future_t *f = eddy_channel_pool_map_close(m);
    assert_true(eddy_future_is_done(f));
    assert_int_equal(await_error(f), 0);
    assert_int_equal(atomic_load(&fa.calls), 0);
}

/* Threads get the same few keys at once: one factory call per key, one pool per key. */
enum { MAP_THREADS = 4, MAP_KEYS = 6, MAP_GETS = 3000 };

typedef struct map_run_s {
    eddy_channel_pool_map_t *m;
    uint16_t port;
    eddy_channel_pool_t *seen[MAP_KEYS];
    int t;
    _Atomic int *go;
} map_run_t;

static void *map_thread(void *arg)
{
    map_run_t *r = arg;
    while (atomic_load(r->go) == 0) {
        sched_yield();
    }
    for (int i = 0; i < MAP_GETS; i++) {
        int key = (i + r->t) % MAP_KEYS;
        eddy_channel_pool_key_t k = {.host = "127.0.0.1", .port = (uint16_t)(r->port + key)};
        eddy_channel_pool_t *p = eddy_channel_pool_map_get(r->m, &k);
        if (r->seen[key] == NULL) {
            r->seen[key] = p;
        } else if (r->seen[key] != p) {
            r->seen[key] = NULL; /* fails the test: a key changed pools */
            return NULL;
        }
    }
    return NULL;
}

static void test_pool_map_concurrent_gets_make_each_pool_once(void **state)
{
    (void)state;
    env_t e;
    factory_t fa;
    eddy_channel_pool_map_t *m;
    map_open(&e, &fa, &m);
    _Atomic int go = 0;
    map_run_t runs[MAP_THREADS];
    pthread_t t[MAP_THREADS];
    for (int i = 0; i < MAP_THREADS; i++) {
        runs[i] = (map_run_t){.m = m, .port = e.port, .t = i, .go = &go};
        assert_int_equal(pthread_create(&t[i], NULL, map_thread, &runs[i]), 0);
    }
    atomic_store(&go, 1);
    for (int i = 0; i < MAP_THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    assert_int_equal(atomic_load(&fa.calls), MAP_KEYS);
    for (int key = 0; key < MAP_KEYS; key++) {
        assert_int_equal(atomic_load(&fa.per_port[key]), 1);
        for (int i = 0; i < MAP_THREADS; i++) {
            assert_non_null(runs[i].seen[key]);
            assert_ptr_equal(runs[i].seen[key], runs[0].seen[key]);
        }
    }
    assert_int_equal(eddy_channel_pool_map_size(m), MAP_KEYS);
    assert_int_equal(await_error(eddy_channel_pool_map_close(m)), 0);
    env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_then_acquire_reuses_the_last_released_first),
        cmocka_unit_test(test_an_acquire_that_finds_an_idle_channel_completes_on_return),
        cmocka_unit_test(test_max_connections_serves_waiters_in_order_on_release),
        cmocka_unit_test(test_a_channel_closed_while_acquired_frees_its_slot_at_once),
        cmocka_unit_test(test_a_waiting_acquire_times_out),
        cmocka_unit_test(test_acquires_beyond_max_pending_fail_busy),
        cmocka_unit_test(test_an_idle_channel_the_server_closed_leaves_the_pool),
        cmocka_unit_test(test_foreign_and_double_releases_fail_einval),
        cmocka_unit_test(test_health_checks_close_what_fails_them),
        cmocka_unit_test(test_idle_channels_beyond_max_idle_or_too_old_close),
        cmocka_unit_test(test_close_fails_waiters_and_closes_channels_as_they_return),
        cmocka_unit_test(test_close_with_nothing_out_completes_at_once_after_idle_closed),
        cmocka_unit_test(test_four_threads_share_three_connections),
        cmocka_unit_test(test_pool_map_makes_one_pool_per_key),
        cmocka_unit_test(test_pool_map_remove_closes_and_a_later_get_makes_a_new_pool),
        cmocka_unit_test(test_pool_map_close_waits_for_channels_out_and_refuses_gets),
        cmocka_unit_test(test_pool_map_factory_failure_fails_the_get_and_keeps_nothing),
        cmocka_unit_test(test_pool_map_close_of_an_empty_map_completes_at_once),
        cmocka_unit_test(test_pool_map_concurrent_gets_make_each_pool_once),
    };
    return cmocka_run_group_tests_name("bootstrap.channel_pool", tests, NULL, NULL);
}
