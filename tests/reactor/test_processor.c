/*
 * Tests for reactor/processor.c and reactor/ring_builder.c: the batch processor's callbacks
 * and batching, halting that drains, the worker pool's exactly-once delivery, and the
 * disruptor's pipelines and diamonds.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/ring.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    int64_t value;
    int64_t stage[3]; /* what each pipeline stage saw, written by that stage */
} event_t;

typedef struct {
    int64_t events;
    int64_t last_seq;
    int64_t out_of_order;
    int64_t batch_total;
    int64_t batches;
    int64_t end_of_batch;
    int64_t starts;
    int64_t shutdowns;
    int64_t errors;
    _Atomic int64_t timeouts;
    int fail_every; /* on_event fails when seq % fail_every == 3; 0: never */
} recorder_t;

static int rec_event(void *slot, int64_t seq, bool end_of_batch, void *arg)
{
    recorder_t *r = arg;
    event_t *ev = slot;
    if (seq != r->last_seq + 1 || ev->value != seq * 10)
        r->out_of_order++;
    r->last_seq = seq;
    r->events++;
    r->end_of_batch += end_of_batch;
    if (r->fail_every && seq % r->fail_every == 3)
        return EDDY_EIO;
    return 0;
}

static void rec_batch_start(int64_t size, void *arg)
{
    recorder_t *r = arg;
    r->batch_total += size;
    r->batches++;
}

static void rec_start(void *arg)
{
    ((recorder_t *)arg)->starts++;
}

static void rec_shutdown(void *arg)
{
    ((recorder_t *)arg)->shutdowns++;
}

static void rec_timeout(int64_t seq, void *arg)
{
    atomic_fetch_add(&((recorder_t *)arg)->timeouts, 1);
}

static void rec_error(void *slot, int64_t seq, int err, void *arg)
{
    recorder_t *r = arg;
    assert_int_equal(err, EDDY_EIO);
    assert_int_equal(seq % r->fail_every, 3);
    r->errors++;
}

static const eddy_event_handler_ops_t recorder_ops = {
    .name = "recorder",
    .on_event = rec_event,
    .on_batch_start = rec_batch_start,
    .on_start = rec_start,
    .on_shutdown = rec_shutdown,
    .on_timeout = rec_timeout,
    .on_error = rec_error,
};

static void recorder_init(recorder_t *r)
{
    memset(r, 0, sizeof *r);
    r->last_seq = -1;
}

static void publish_n(eddy_sequencer_t *s, eddy_ring_t *ring, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t seq = eddy_sequencer_next(s, 1);
        event_t *ev = eddy_ring_get(ring, seq);
        ev->value = seq * 10;
        eddy_sequencer_publish(s, seq);
    }
}

static void *run_thread(void *arg)
{
    assert_int_equal(eddy_batch_processor_run(arg), 0);
    return NULL;
}

static void test_batch_processor_runs_on_a_given_thread(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_yielding();
    eddy_sequencer_t *s = eddy_sequencer_new_single(16, ws);
    eddy_ring_t *ring = eddy_ring_new(16, sizeof(event_t), NULL, NULL);
    recorder_t r;
    recorder_init(&r);
    r.fail_every = 10;
    eddy_event_handler_t h = {&recorder_ops, &r};
    eddy_batch_processor_t *p = eddy_batch_processor_new(ring, s, NULL, 0, &h);
    assert_non_null(p);
    eddy_sequence_t *seq = eddy_batch_processor_sequence(p);
    assert_int_equal(eddy_sequencer_add_gating(s, &seq, 1), 0);

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_thread, p), 0);
    publish_n(s, ring, 1000); /* 62 laps of a 16-slot ring */
    eddy_batch_processor_halt(p);
    pthread_join(t, NULL);
    assert_false(eddy_batch_processor_is_running(p));

    assert_int_equal(r.events, 1000);
    assert_int_equal(r.out_of_order, 0);
    assert_int_equal(r.batch_total, 1000);
    assert_int_equal(r.end_of_batch, r.batches);
    assert_int_equal(r.starts, 1);
    assert_int_equal(r.shutdowns, 1);
    assert_int_equal(r.errors, 100);
    assert_int_equal(eddy_sequence_get(seq), 999);
    assert_int_equal(eddy_batch_processor_free(p), 0);
    eddy_ring_free(ring);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

static void test_batch_processor_halt_drains_what_was_published(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_blocking();
    eddy_sequencer_t *s = eddy_sequencer_new_multi(64, ws);
    eddy_ring_t *ring = eddy_ring_new(64, sizeof(event_t), NULL, NULL);
    recorder_t r;
    recorder_init(&r);
    eddy_event_handler_t h = {&recorder_ops, &r};
    eddy_batch_processor_t *p = eddy_batch_processor_new(ring, s, NULL, 0, &h);
    eddy_sequence_t *seq = eddy_batch_processor_sequence(p);
    eddy_sequencer_add_gating(s, &seq, 1);
    publish_n(s, ring, 50);
    /* Halted before it even starts: it still handles all 50, then stops. */
    eddy_batch_processor_halt(p);
    assert_int_equal(eddy_batch_processor_start(p), 0);
    assert_int_equal(eddy_batch_processor_start(p), EDDY_EBUSY);
    assert_int_equal(eddy_batch_processor_free(p), EDDY_EBUSY);
    assert_int_equal(eddy_batch_processor_join(p), 0);
    assert_int_equal(eddy_batch_processor_join(p), EDDY_EINVAL);
    assert_int_equal(r.events, 50);
    assert_int_equal(r.out_of_order, 0);
    assert_int_equal(r.shutdowns, 1);

    /* It can run again, and picks up where it stopped. */
    assert_int_equal(eddy_batch_processor_start(p), 0);
    publish_n(s, ring, 100);
    eddy_batch_processor_halt(p);
    eddy_batch_processor_join(p);
    assert_int_equal(r.events, 150);
    assert_int_equal(r.out_of_order, 0);
    assert_int_equal(r.starts, 2);
    assert_int_equal(eddy_batch_processor_free(p), 0);
    eddy_ring_free(ring);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

static void test_batch_processor_reports_timeouts(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_timeout_blocking(2 * 1000 * 1000);
    eddy_sequencer_t *s = eddy_sequencer_new_single(8, ws);
    eddy_ring_t *ring = eddy_ring_new(8, sizeof(event_t), NULL, NULL);
    recorder_t r;
    recorder_init(&r);
    eddy_event_handler_t h = {&recorder_ops, &r};
    eddy_batch_processor_t *p = eddy_batch_processor_new(ring, s, NULL, 0, &h);
    assert_int_equal(eddy_batch_processor_start(p), 0);
    while (atomic_load(&r.timeouts) < 3)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    eddy_batch_processor_halt(p);
    eddy_batch_processor_join(p);
    assert_int_equal(r.events, 0);
    eddy_batch_processor_free(p);
    eddy_ring_free(ring);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

static void test_batch_processor_needs_on_event(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_busy_spin();
    eddy_sequencer_t *s = eddy_sequencer_new_single(8, ws);
    eddy_ring_t *ring = eddy_ring_new(8, 8, NULL, NULL);
    static const eddy_event_handler_ops_t empty = {.name = "empty"};
    eddy_event_handler_t h = {&empty, NULL};
    assert_null(eddy_batch_processor_new(ring, s, NULL, 0, &h));
    assert_null(eddy_worker_pool_new(ring, s, NULL, 0, &h, 1));
    assert_int_equal(eddy_batch_processor_free(NULL), 0);
    assert_int_equal(eddy_worker_pool_free(NULL), 0);
    eddy_ring_free(ring);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

/* Worker pool: each worker counts per sequence in a shared array of atomics. */
typedef struct {
    _Atomic int *seen;
    int64_t handled;
    int64_t starts;
} worker_state_t;

static int work_event(void *slot, int64_t seq, bool end_of_batch, void *arg)
{
    worker_state_t *w = arg;
    atomic_fetch_add(&w->seen[seq], 1);
    w->handled++;
    return 0;
}

static void work_start(void *arg)
{
    ((worker_state_t *)arg)->starts++;
}

static const eddy_event_handler_ops_t worker_ops = {
    .name = "worker",
    .on_event = work_event,
    .on_start = work_start,
};

static void test_worker_pool_hands_each_event_to_one_worker(void **state)
{
    enum { N = 2000, W = 3 };
    eddy_wait_strategy_t *ws = eddy_wait_strategy_yielding();
    eddy_sequencer_t *s = eddy_sequencer_new_single(8, ws);
    eddy_ring_t *ring = eddy_ring_new(8, sizeof(event_t), NULL, NULL);
    _Atomic int *seen = calloc(N, sizeof *seen);
    worker_state_t st[W];
    eddy_event_handler_t hs[W];
    for (int i = 0; i < W; i++) {
        st[i] = (worker_state_t){.seen = seen};
        hs[i] = (eddy_event_handler_t){&worker_ops, &st[i]};
    }
    eddy_worker_pool_t *pool = eddy_worker_pool_new(ring, s, NULL, 0, hs, W);
    assert_non_null(pool);
    eddy_sequence_t *seqs[W + 1];
    assert_int_equal(eddy_worker_pool_sequences(pool, seqs, W + 1), W + 1);
    assert_int_equal(eddy_sequencer_add_gating(s, seqs, W + 1), 0);
    assert_int_equal(eddy_worker_pool_join(pool), EDDY_EINVAL);
    assert_int_equal(eddy_worker_pool_start(pool), 0);
    assert_int_equal(eddy_worker_pool_start(pool), EDDY_EBUSY);
    publish_n(s, ring, N);
    eddy_worker_pool_halt(pool);
    assert_int_equal(eddy_worker_pool_free(pool), EDDY_EBUSY);
    assert_int_equal(eddy_worker_pool_join(pool), 0);
    int64_t total = 0;
    for (int i = 0; i < W; i++) {
        total += st[i].handled;
        assert_int_equal(st[i].starts, 1);
    }
    assert_int_equal(total, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(atomic_load(&seen[i]), 1);
    assert_int_equal(eddy_worker_pool_free(pool), 0);
    free(seen);
    eddy_ring_free(ring);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

/* A stage checks that the stages in checks (a bit mask) wrote the slot, then writes its mark. */
typedef struct {
    int mark;
    unsigned checks;
    int64_t events;
    int64_t bad;
} stage_t;

static int stage_event(void *slot, int64_t seq, bool end_of_batch, void *arg)
{
    stage_t *st = arg;
    event_t *ev = slot;
    if (ev->value != seq * 10)
        st->bad++;
    for (int j = 0; j < 3; j++) {
        if ((st->checks & (1u << j)) && ev->stage[j] != seq)
            st->bad++;
    }
    ev->stage[st->mark] = seq;
    st->events++;
    return 0;
}

static const eddy_event_handler_ops_t stage_ops = {.name = "stage", .on_event = stage_event};

static void test_disruptor_pipeline_runs_stages_in_order(void **state)
{
    enum { N = 3000 };
    eddy_wait_strategy_t *ws = eddy_wait_strategy_yielding();
    eddy_disruptor_t *d = eddy_disruptor_new(8, sizeof(event_t), NULL, NULL, false, ws);
    assert_non_null(d);
    stage_t st[3] = {{.mark = 0}, {.mark = 1, .checks = 1}, {.mark = 2, .checks = 3}};
    eddy_event_handler_t h[3] = {{&stage_ops, &st[0]}, {&stage_ops, &st[1]}, {&stage_ops, &st[2]}};
    eddy_group_t *g = eddy_disruptor_handle_events_with(d, &h[0], 1);
    g = eddy_group_then(g, &h[1], 1);
    g = eddy_group_then(g, &h[2], 1);
    assert_non_null(g);
    assert_int_equal(eddy_disruptor_shutdown(d), EDDY_EINVAL);
    assert_int_equal(eddy_disruptor_start(d), 0);
    assert_int_equal(eddy_disruptor_start(d), EDDY_EBUSY);
    assert_null(eddy_disruptor_handle_events_with(d, &h[0], 1)); /* not after start */
    publish_n(eddy_disruptor_sequencer(d), eddy_disruptor_ring(d), N);
    assert_int_equal(eddy_disruptor_free(d), EDDY_EBUSY);
    assert_int_equal(eddy_disruptor_shutdown(d), 0);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(st[k].events, N);
        assert_int_equal(st[k].bad, 0);
    }
    assert_int_equal(eddy_disruptor_free(d), 0);
    eddy_wait_strategy_free(ws);
}

static void test_disruptor_diamond_runs_c_after_a_and_b(void **state)
{
    enum { N = 3000 };
    eddy_wait_strategy_t *ws = eddy_wait_strategy_lite_blocking();
    eddy_disruptor_t *d = eddy_disruptor_new(8, sizeof(event_t), NULL, NULL, true, ws);
    /* a and b run side by side, each marking its own field; c checks both marks. */
    stage_t a = {.mark = 0}, b = {.mark = 1}, c = {.mark = 2, .checks = 3};
    eddy_event_handler_t ab[2] = {{&stage_ops, &a}, {&stage_ops, &b}};
    eddy_event_handler_t hc = {&stage_ops, &c};
    eddy_group_t *g = eddy_disruptor_handle_events_with(d, ab, 2);
    assert_non_null(eddy_group_then(g, &hc, 1));
    eddy_disruptor_start(d);
    publish_n(eddy_disruptor_sequencer(d), eddy_disruptor_ring(d), N);
    eddy_disruptor_shutdown(d);
    assert_int_equal(a.events, N);
    assert_int_equal(b.events, N);
    assert_int_equal(c.events, N);
    assert_int_equal(c.bad, 0); /* c saw both marks of each event */
    eddy_disruptor_free(d);
    eddy_wait_strategy_free(ws);
}

static void test_disruptor_worker_pool_after_a_processor(void **state)
{
    enum { N = 2000, W = 2 };
    eddy_wait_strategy_t *ws = eddy_wait_strategy_sleeping(0, 0);
    eddy_disruptor_t *d = eddy_disruptor_new(8, sizeof(event_t), NULL, NULL, false, ws);
    stage_t first = {.mark = 0};
    eddy_event_handler_t h = {&stage_ops, &first};
    _Atomic int *seen = calloc(N, sizeof *seen);
    worker_state_t st[W] = {{.seen = seen}, {.seen = seen}};
    eddy_event_handler_t hs[W] = {{&worker_ops, &st[0]}, {&worker_ops, &st[1]}};
    eddy_group_t *g = eddy_disruptor_handle_events_with(d, &h, 1);
    assert_non_null(eddy_group_then_pool(g, hs, W));
    assert_int_equal(eddy_disruptor_start(d), 0);
    publish_n(eddy_disruptor_sequencer(d), eddy_disruptor_ring(d), N);
    eddy_disruptor_shutdown(d);
    assert_int_equal(first.events, N);
    assert_int_equal(st[0].handled + st[1].handled, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(atomic_load(&seen[i]), 1);
    free(seen);
    eddy_disruptor_free(d);
    eddy_wait_strategy_free(ws);
}

/*
 * A start that fails (here: no thread can be made) stops what it started; the processors it
 * never started are not left halted, so the next start runs them.
 */
static void test_disruptor_starts_after_a_failed_start(void **state)
{
    enum { N = 6 };
    eddy_wait_strategy_t *ws = eddy_wait_strategy_yielding();
    eddy_disruptor_t *d = eddy_disruptor_new(8, sizeof(event_t), NULL, NULL, false, ws);
    recorder_t r;
    recorder_init(&r);
    eddy_event_handler_t h = {&recorder_ops, &r};
    assert_non_null(eddy_disruptor_handle_events_with(d, &h, 1));
    /* A default stack larger than the address space: pthread_create fails with EAGAIN. */
    pthread_attr_t saved, huge;
    assert_int_equal(pthread_getattr_default_np(&saved), 0);
    pthread_attr_init(&huge);
    assert_int_equal(pthread_attr_setstacksize(&huge, (size_t)1 << 50), 0);
    assert_int_equal(pthread_setattr_default_np(&huge), 0);
    int err = eddy_disruptor_start(d);
    assert_int_equal(pthread_setattr_default_np(&saved), 0);
    pthread_attr_destroy(&huge);
    pthread_attr_destroy(&saved);
    assert_int_equal(err, EDDY_EAGAIN);
    assert_int_equal(eddy_disruptor_start(d), 0);
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL); /* let it wait */
    publish_n(eddy_disruptor_sequencer(d), eddy_disruptor_ring(d), N);
    assert_int_equal(eddy_disruptor_shutdown(d), 0);
    assert_int_equal(r.events, N);
    assert_int_equal(r.out_of_order, 0);
    assert_int_equal(r.shutdowns, 1);
    assert_int_equal(eddy_disruptor_free(d), 0);
    eddy_wait_strategy_free(ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_processor_runs_on_a_given_thread),
        cmocka_unit_test(test_batch_processor_halt_drains_what_was_published),
        cmocka_unit_test(test_batch_processor_reports_timeouts),
        cmocka_unit_test(test_batch_processor_needs_on_event),
        cmocka_unit_test(test_worker_pool_hands_each_event_to_one_worker),
        cmocka_unit_test(test_disruptor_pipeline_runs_stages_in_order),
        cmocka_unit_test(test_disruptor_diamond_runs_c_after_a_and_b),
        cmocka_unit_test(test_disruptor_worker_pool_after_a_processor),
        cmocka_unit_test(test_disruptor_starts_after_a_failed_start),
    };
    return cmocka_run_group_tests_name("reactor.processor", tests, NULL, NULL);
}
