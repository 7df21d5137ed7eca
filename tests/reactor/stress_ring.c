/*
 * Stress tests for the ring (label concurrency; they run under TSan in `make test`): several
 * producers on tiny rings (4 to 8 slots, so every run goes thousands of laps), consumers in
 * diamonds, pipelines, broadcast and worker pools, every wait strategy. Each consumer checks
 * per-producer order and counts, so a lost, repeated or reordered event fails the test, and
 * diamond and pipeline stages check the marks of the stages before them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/ring.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif

/*
 * Events per producer. With 8 slots every 8 events need the consumers to run, and with more
 * threads than the 2 cores a hand-over waits for the scheduler (a busy-spinning consumer
 * holds its core until preempted), so these are small: on a 2-core VM under TSan, with a load
 * average of 8 from other builds, the program took about 40 s, and it still goes hundreds of
 * laps round each ring.
 */
#ifdef SANITIZED
#define EVENTS 1500
#define SPIN_EVENTS 500
#else
/* Without sanitizers the hand-overs are no cheaper: the scheduler sets their cost, so the
 * sizes stay close (15000 took 167 s of a 180 s limit on a loaded machine). */
#define EVENTS 3000
#define SPIN_EVENTS 1000
#endif

#define MAX_PRODUCERS 4

enum { WS_BUSY, WS_YIELD, WS_SLEEP, WS_BLOCK, WS_LITE, WS_TIMEOUT, WS_PHASED, WS_N };

static eddy_wait_strategy_t *make_ws(int k)
{
    switch (k) {
    case WS_BUSY:
        return eddy_wait_strategy_busy_spin();
    case WS_YIELD:
        return eddy_wait_strategy_yielding();
    case WS_SLEEP:
        return eddy_wait_strategy_sleeping(0, 0);
    case WS_BLOCK:
        return eddy_wait_strategy_blocking();
    case WS_LITE:
        return eddy_wait_strategy_lite_blocking();
    case WS_TIMEOUT:
        return eddy_wait_strategy_timeout_blocking(1000 * 1000); /* 1 ms: times out often */
    default:
        return eddy_wait_strategy_phased_backoff(1000, 20000, eddy_wait_strategy_lite_blocking());
    }
}

static int64_t events_for(int k)
{
    return k == WS_BUSY ? SPIN_EVENTS : EVENTS;
}

typedef struct {
    int32_t producer;
    int64_t count;   /* per producer, from 0 */
    int64_t mark[3]; /* stage i writes the event's sequence into mark[i] */
} event_t;

/* A consumer: checks per-producer order, the marks in checks, then writes its own mark. */
typedef struct {
    int mark;        /* -1: writes none */
    unsigned checks; /* bit i: mark[i] must equal the sequence */
    int64_t last[MAX_PRODUCERS];
    int64_t events;
    int64_t bad_order;
    int64_t bad_mark;
} checker_t;

static int check_event(void *slot, int64_t seq, bool end_of_batch, void *arg)
{
    checker_t *c = arg;
    event_t *ev = slot;
    if (ev->producer < 0 || ev->producer >= MAX_PRODUCERS ||
        ev->count != c->last[ev->producer] + 1)
        c->bad_order++;
    else
        c->last[ev->producer] = ev->count;
    for (int j = 0; j < 3; j++) {
        if ((c->checks & (1u << j)) && ev->mark[j] != seq)
            c->bad_mark++;
    }
    if (c->mark >= 0)
        ev->mark[c->mark] = seq;
    c->events++;
    return 0;
}

static const eddy_event_handler_ops_t checker_ops = {.name = "checker", .on_event = check_event};

static void checker_init(checker_t *c, int mark, unsigned checks)
{
    memset(c, 0, sizeof *c);
    c->mark = mark;
    c->checks = checks;
    for (int i = 0; i < MAX_PRODUCERS; i++)
        c->last[i] = -1;
}

static void checker_assert(const checker_t *c, int producers, int64_t n)
{
    if (c->events != producers * n || c->bad_order || c->bad_mark)
        fprintf(stderr, "checker (mark %d): events %lld of %lld, bad order %lld, bad marks %lld\n",
                c->mark, (long long)c->events, (long long)(producers * n),
                (long long)c->bad_order, (long long)c->bad_mark);
    assert_int_equal(c->events, producers * n);
    assert_int_equal(c->bad_order, 0);
    assert_int_equal(c->bad_mark, 0);
    for (int p = 0; p < producers; p++)
        assert_int_equal(c->last[p], n - 1);
}

typedef struct {
    eddy_sequencer_t *seqr;
    eddy_ring_t *ring;
    int32_t id;
    int64_t n;
    int batch;       /* claim this many at a time (1: next(1)) */
    bool use_try;    /* claim with try_next, retrying on EAGAIN */
    int64_t again;   /* EAGAINs seen */
    int stall_every; /* > 0: every so many claims, sleep between the claim and its publish */
    int burst;       /* > 0: sleep after so many events, so consumers wait and sleep */
} producer_t;

/* A short sleep: long enough that waiting consumers go to sleep, or that a consumer meets a
 * claimed slot nobody publishes yet (the producer looks preempted). */
static void nap(int64_t us)
{
    struct timespec ts = {0, (long)(us * 1000)};
    nanosleep(&ts, NULL);
}

static void *produce(void *arg)
{
    producer_t *p = arg;
    int64_t count = 0;
    while (count < p->n) {
        int64_t k = p->batch;
        if (k > p->n - count)
            k = p->n - count;
        int64_t hi;
        if (p->use_try) {
            while ((hi = eddy_sequencer_try_next(p->seqr, k)) == EDDY_EAGAIN) {
                p->again++;
                sched_yield();
            }
        } else {
            hi = eddy_sequencer_next(p->seqr, k);
        }
        assert_true(hi >= 0);
        for (int64_t seq = hi - k + 1; seq <= hi; seq++) {
            event_t *ev = eddy_ring_get(p->ring, seq);
            ev->producer = p->id;
            ev->count = count++;
        }
        if (p->stall_every > 0 && count % p->stall_every == 0)
            nap(300);
        if (p->burst > 0 && count % p->burst == 0)
            nap(count % (3 * p->burst) == 0 ? 200 : 20);
        if (k == 1)
            eddy_sequencer_publish(p->seqr, hi);
        else
            eddy_sequencer_publish_range(p->seqr, hi - k + 1, hi);
    }
    return NULL;
}

/* Run producers like proto (seqr, ring and id are filled in) against a started disruptor,
 * then shut it down (which drains). */
static void run_producers_like(eddy_disruptor_t *d, int producers, producer_t proto)
{
    pthread_t t[MAX_PRODUCERS];
    producer_t p[MAX_PRODUCERS];
    for (int i = 0; i < producers; i++) {
        p[i] = proto;
        p[i].seqr = eddy_disruptor_sequencer(d);
        p[i].ring = eddy_disruptor_ring(d);
        p[i].id = i;
        assert_int_equal(pthread_create(&t[i], NULL, produce, &p[i]), 0);
    }
    for (int i = 0; i < producers; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(eddy_disruptor_shutdown(d), 0);
}

static void run_producers(eddy_disruptor_t *d, int producers, int64_t n, int batch, bool use_try)
{
    run_producers_like(d, producers, (producer_t){.n = n, .batch = batch, .use_try = use_try});
}

/* A diamond (a and b, then c) fed by producers: every strategy, several producers. */
static void diamond(int k, int producers, size_t ring_size, int batch)
{
    eddy_wait_strategy_t *ws = make_ws(k);
    int64_t n = events_for(k);
    eddy_disruptor_t *d =
        eddy_disruptor_new(ring_size, sizeof(event_t), NULL, NULL, producers > 1, ws);
    assert_non_null(d);
    checker_t a, b, c;
    checker_init(&a, 0, 0);
    checker_init(&b, 1, 0);
    checker_init(&c, 2, 3);
    eddy_event_handler_t ab[2] = {{&checker_ops, &a}, {&checker_ops, &b}};
    eddy_event_handler_t hc = {&checker_ops, &c};
    assert_non_null(eddy_group_then(eddy_disruptor_handle_events_with(d, ab, 2), &hc, 1));
    assert_int_equal(eddy_disruptor_start(d), 0);
    run_producers(d, producers, n, batch, false);
    checker_assert(&a, producers, n);
    checker_assert(&b, producers, n);
    checker_assert(&c, producers, n);
    assert_int_equal(eddy_disruptor_free(d), 0);
    eddy_wait_strategy_free(ws);
}

static void test_diamond_with_two_producers_under_every_strategy(void **state)
{
    for (int k = 0; k < WS_N; k++)
        diamond(k, 2, 8, 1);
}

static void test_diamond_with_one_producer_on_a_four_slot_ring(void **state)
{
    diamond(WS_YIELD, 1, 4, 1);
    diamond(WS_LITE, 1, 4, 3);
}

static void test_pipeline_of_three_with_batched_claims(void **state)
{
    int64_t n = EVENTS;
    for (int k = WS_YIELD; k <= WS_PHASED; k += WS_PHASED - WS_YIELD) {
        eddy_wait_strategy_t *ws = make_ws(k);
        eddy_disruptor_t *d = eddy_disruptor_new(8, sizeof(event_t), NULL, NULL, true, ws);
        checker_t st[3];
        checker_init(&st[0], 0, 0);
        checker_init(&st[1], 1, 1);
        checker_init(&st[2], 2, 3);
        eddy_event_handler_t h[3] = {
            {&checker_ops, &st[0]}, {&checker_ops, &st[1]}, {&checker_ops, &st[2]}};
        eddy_group_t *g = eddy_disruptor_handle_events_with(d, &h[0], 1);
        g = eddy_group_then(eddy_group_then(g, &h[1], 1), &h[2], 1);
        assert_non_null(g);
        assert_int_equal(eddy_disruptor_start(d), 0);
        run_producers(d, 3, n / 2, 3, false);
        for (int i = 0; i < 3; i++)
            checker_assert(&st[i], 3, n / 2);
        eddy_disruptor_free(d);
        eddy_wait_strategy_free(ws);
    }
}

static void test_broadcast_with_try_next_producers(void **state)
{
    int64_t n = EVENTS / 2;
    eddy_wait_strategy_t *ws = make_ws(WS_BLOCK);
    eddy_disruptor_t *d = eddy_disruptor_new(4, sizeof(event_t), NULL, NULL, true, ws);
    checker_t c[3];
    eddy_event_handler_t h[3];
    for (int i = 0; i < 3; i++) {
        checker_init(&c[i], -1, 0);
        h[i] = (eddy_event_handler_t){&checker_ops, &c[i]};
    }
    assert_non_null(eddy_disruptor_handle_events_with(d, h, 3));
    assert_int_equal(eddy_disruptor_start(d), 0);
    run_producers(d, 2, n, 2, true);
    for (int i = 0; i < 3; i++)
        checker_assert(&c[i], 2, n);
    eddy_disruptor_free(d);
    eddy_wait_strategy_free(ws);
}

/* Worker pool: every event to exactly one worker, counted per (producer, count). */
typedef struct {
    _Atomic uint8_t *seen; /* [producer * n + count] */
    int64_t n;
    int64_t handled;
    int64_t bad;
} worker_t;

static int work_event(void *slot, int64_t seq, bool end_of_batch, void *arg)
{
    worker_t *w = arg;
    event_t *ev = slot;
    if (ev->producer < 0 || ev->producer >= MAX_PRODUCERS || ev->count < 0 || ev->count >= w->n)
        w->bad++;
    else
        atomic_fetch_add_explicit(&w->seen[ev->producer * w->n + ev->count], 1,
                                  memory_order_relaxed);
    w->handled++;
    return 0;
}

static const eddy_event_handler_ops_t worker_ops = {.name = "worker", .on_event = work_event};

static void worker_pool(int k, int producers, int workers, bool then_checker)
{
    int64_t n = events_for(k) / 2;
    eddy_wait_strategy_t *ws = make_ws(k);
    eddy_disruptor_t *d = eddy_disruptor_new(8, sizeof(event_t), NULL, NULL, producers > 1, ws);
    _Atomic uint8_t *seen = calloc((size_t)(producers * n), 1);
    worker_t w[4];
    eddy_event_handler_t hs[4];
    for (int i = 0; i < workers; i++) {
        w[i] = (worker_t){.seen = seen, .n = n};
        hs[i] = (eddy_event_handler_t){&worker_ops, &w[i]};
    }
    checker_t after;
    checker_init(&after, -1, 0);
    eddy_event_handler_t ha = {&checker_ops, &after};
    eddy_group_t *g = eddy_disruptor_handle_events_with_pool(d, hs, (size_t)workers);
    assert_non_null(g);
    if (then_checker)
        assert_non_null(eddy_group_then(g, &ha, 1));
    assert_int_equal(eddy_disruptor_start(d), 0);
    run_producers(d, producers, n, 1, false);
    int64_t total = 0;
    for (int i = 0; i < workers; i++) {
        total += w[i].handled;
        assert_int_equal(w[i].bad, 0);
    }
    assert_int_equal(total, producers * n);
    for (int64_t i = 0; i < producers * n; i++) {
        if (atomic_load(&seen[i]) != 1)
            fail_msg("event %lld seen %d times", (long long)i, (int)atomic_load(&seen[i]));
    }
    if (then_checker)
        checker_assert(&after, producers, n);
    free(seen);
    eddy_disruptor_free(d);
    eddy_wait_strategy_free(ws);
}

/*
 * One consumer behind two producers whose events come in bursts, or who stall between a
 * claim and its publish (as a producer preempted there does), under every strategy: the
 * blocking ones spin, go to sleep in the pauses and must be woken by the next publish (a lost
 * wake-up hangs the test until its ctest timeout), and no strategy may take a claimed slot
 * before it is published or lose the events published past it meanwhile.
 */
static void one_consumer_behind(int k, size_t ring_size, producer_t proto)
{
    eddy_wait_strategy_t *ws = make_ws(k);
    eddy_disruptor_t *d = eddy_disruptor_new(ring_size, sizeof(event_t), NULL, NULL, true, ws);
    assert_non_null(d);
    checker_t c;
    checker_init(&c, -1, 0);
    eddy_event_handler_t h = {&checker_ops, &c};
    assert_non_null(eddy_disruptor_handle_events_with(d, &h, 1));
    assert_int_equal(eddy_disruptor_start(d), 0);
    run_producers_like(d, 2, proto);
    checker_assert(&c, 2, proto.n);
    assert_int_equal(eddy_disruptor_free(d), 0);
    eddy_wait_strategy_free(ws);
}

static void test_sleeping_consumers_wake_for_every_burst(void **state)
{
    for (int k = 0; k < WS_N; k++) {
        one_consumer_behind(k, 1024, (producer_t){.n = events_for(k), .batch = 1, .burst = 7});
        one_consumer_behind(k, 8, (producer_t){.n = events_for(k), .batch = 2, .burst = 5});
    }
}

static void test_a_slot_claimed_and_not_yet_published_is_waited_for(void **state)
{
    for (int k = 0; k < WS_N; k++)
        one_consumer_behind(k, 64, (producer_t){.n = events_for(k), .batch = 1, .stall_every = 97});
}

static void test_worker_pool_hands_each_event_to_one_worker(void **state)
{
    worker_pool(WS_BLOCK, 2, 3, true);
    worker_pool(WS_SLEEP, 1, 2, false);
    worker_pool(WS_TIMEOUT, 2, 2, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diamond_with_two_producers_under_every_strategy),
        cmocka_unit_test(test_diamond_with_one_producer_on_a_four_slot_ring),
        cmocka_unit_test(test_pipeline_of_three_with_batched_claims),
        cmocka_unit_test(test_broadcast_with_try_next_producers),
        cmocka_unit_test(test_worker_pool_hands_each_event_to_one_worker),
        cmocka_unit_test(test_sleeping_consumers_wake_for_every_burst),
        cmocka_unit_test(test_a_slot_claimed_and_not_yet_published_is_waited_for),
    };
    return cmocka_run_group_tests_name("reactor.stress_ring", tests, NULL, NULL);
}
