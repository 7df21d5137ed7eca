/*
 * reactor.loop: loops start and stop, run tasks from any thread in per-producer order, wake
 * from a blocked poll, honour the io_ratio budget, watch descriptors, keep metrics and shut
 * down gracefully. Runs once per poller (EDDY_POLLER in the ctest environment).
 *
 * Nothing here asserts from the loop's thread (cmocka longjmps): callbacks record into
 * atomics, and the test thread asserts after waiting with a deadline.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/loop.h>
#include "reactor/layer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "support/loop_util.h"

/* ---------------------------------------------------------------------------------------
 * Helpers
 */

static void spin_ns(int64_t ns)
{
    int64_t end = eddy_now_ns() + ns;
    while (eddy_now_ns() < end) {
    }
}

static void noop(void *arg)
{
    (void)arg;
}

/* The order in which record() tasks ran; written by the loop's thread only. */
#define ORDER_MAX 4096
static long order[ORDER_MAX];
static atomic_long order_n;

static void order_reset(void)
{
    memset(order, 0, sizeof(order));
    atomic_store(&order_n, 0);
}

static void record(void *arg)
{
    long n = atomic_load(&order_n);
    if (n < ORDER_MAX) {
        order[n] = (long)(intptr_t)arg;
    }
    atomic_store(&order_n, n + 1);
}

static void assert_order_is_0_to(long n)
{
    assert_int_equal(atomic_load(&order_n), n);
    for (long i = 0; i < n; i++) {
        if (order[i] != i) {
            fail_msg("task %ld ran at position %ld (expected %ld)", order[i], i, i);
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * Start and stop
 */

typedef struct where_s {
    atomic_bool in_loop;
    eddy_loop_t *current;
    pthread_t thread;
} where_t;

static void note_where(void *arg)
{
    where_t *w = arg;
    w->current = eddy_loop_current();
    w->thread = pthread_self();
    atomic_store(&w->in_loop, eddy_loop_in_event_loop(w->current));
}

static void test_loop_starts_runs_a_task_and_stops(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    const char *want = getenv("EDDY_POLLER");
    if (want != NULL && want[0] != '\0') {
        assert_string_equal(eddy_loop_poller(loop), want);
    }
    assert_false(eddy_loop_in_event_loop(loop));
    assert_null(eddy_loop_current());
    assert_false(eddy_loop_is_shutting_down(loop));
    assert_false(eddy_loop_is_terminated(loop));

    where_t w = {0};
    run_sync(loop, note_where, &w);
    assert_ptr_equal(w.current, loop);
    assert_true(atomic_load(&w.in_loop));
    assert_false(pthread_equal(w.thread, pthread_self()));

    assert_int_equal(eddy_loop_start(loop), EDDY_EBUSY);
    assert_int_equal(eddy_loop_run(loop), EDDY_EBUSY);

    eddy_future_t *term = eddy_loop_shutdown_gracefully(loop, 0, 5000);
    assert_ptr_equal(eddy_loop_shutdown_gracefully(loop, 0, 5000), term);
    assert_ptr_equal(eddy_loop_termination_future(loop), term);
    assert_true(eddy_loop_is_shutting_down(loop));
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(term), 0);
    assert_true(eddy_loop_is_terminated(loop));
    assert_int_equal(eddy_loop_start(loop), EDDY_EBUSY);
    assert_int_equal(eddy_loop_free(loop), 0);
}

static void *run_loop_here(void *arg)
{
    return (void *)(intptr_t)eddy_loop_run(arg);
}

static void test_loop_runs_on_the_calling_thread(void **state)
{
    (void)state;
    eddy_loop_t *loop = eddy_loop_new(NULL);
    assert_non_null(loop);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_loop_here, loop), 0);
    where_t w = {0};
    run_sync(loop, note_where, &w);
    assert_true(pthread_equal(w.thread, th));
    assert_true(atomic_load(&w.in_loop));
    eddy_future_t *term = eddy_loop_shutdown_gracefully(loop, 0, 5000);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    void *rc;
    assert_int_equal(pthread_join(th, &rc), 0);
    assert_int_equal((int)(intptr_t)rc, 0);
    assert_int_equal(eddy_loop_run(loop), EDDY_EBUSY);
    assert_int_equal(eddy_loop_free(loop), 0);
}

/* What loop.h promises of a loop outside any group, read on its own thread. */
typedef struct own_s {
    size_t index;
    void *data;
} own_t;

static void note_own(void *arg)
{
    own_t *o = arg;
    o->index = eddy_loop_index(eddy_loop_current());
    o->data = eddy_loop_data(eddy_loop_current());
}

static void test_loop_outside_a_group_is_index_0_and_keeps_its_data(void **state)
{
    (void)state;
    eddy_loop_t *loop = eddy_loop_new(NULL);
    assert_non_null(loop);
    assert_int_equal(eddy_loop_index(loop), 0);
    assert_null(eddy_loop_data(loop));
    int before = 1, after = 2;
    eddy_loop_set_data(loop, &before); /* before it runs */
    assert_ptr_equal(eddy_loop_data(loop), &before);
    assert_int_equal(eddy_loop_start(loop), 0);
    own_t o = {SIZE_MAX, NULL};
    run_sync(loop, note_own, &o);
    assert_int_equal(o.index, 0);
    assert_ptr_equal(o.data, &before);
    eddy_loop_set_data(loop, &after); /* while it runs, from another thread */
    run_sync(loop, note_own, &o);
    assert_ptr_equal(o.data, &after);
    finish_loop(loop);
}

/* eddy__loop_local() (reactor/layer.h), on the loop's thread: one block per key and loop, zeroed, kept. */
typedef struct locals_s {
    eddy_loop_t *other;
    void *a, *a_again, *b, *a_elsewhere;
    bool zeroed;
} locals_t;

static const char key_a, key_b;

static void take_locals(void *arg)
{
    locals_t *l = arg;
    eddy_loop_t *loop = eddy_loop_current();
    l->a = eddy__loop_local(loop, &key_a, 64);
    l->zeroed = l->a != NULL && memcmp(l->a, (char[64]){0}, 64) == 0;
    if (l->a != NULL) {
        memset(l->a, 0x5a, 64);
    }
    l->a_again = eddy__loop_local(loop, &key_a, 64);
    l->b = eddy__loop_local(loop, &key_b, 8);
}

static void test_loop_locals_are_one_block_per_key_and_loop(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    eddy_loop_t *other = start_loop(NULL);
    locals_t l = {0}, m = {0};
    run_sync(loop, take_locals, &l);
    run_sync(other, take_locals, &m);
    assert_non_null(l.a);
    assert_true(l.zeroed);
    assert_ptr_equal(l.a_again, l.a);
    assert_non_null(l.b);
    assert_ptr_not_equal(l.b, l.a);
    assert_non_null(m.a);
    assert_true(m.zeroed); /* the other loop's block, not the one just written */
    assert_ptr_not_equal(m.a, l.a);
    finish_loop(loop); /* the blocks go with the loops (ASan: no leak) */
    finish_loop(other);
}

static void test_loop_free_is_busy_while_running(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    assert_int_equal(eddy_loop_free(loop), EDDY_EBUSY);
    run_sync(loop, noop, NULL);
    assert_int_equal(eddy_loop_free(loop), EDDY_EBUSY);
    finish_loop(loop);
}

static void test_loop_new_refuses_bad_options(void **state)
{
    (void)state;
    eddy_loop_options_t o = {.task_queue_size = 3};
    assert_null(eddy_loop_new(&o));
    o = (eddy_loop_options_t){.task_queue_size = 1000};
    assert_null(eddy_loop_new(&o));
    o = (eddy_loop_options_t){.io_ratio = 101};
    assert_null(eddy_loop_new(&o));
    o = (eddy_loop_options_t){.poller = "nope"};
    assert_null(eddy_loop_new(&o));

    /* The limits themselves are fine. */
    o = (eddy_loop_options_t){.task_queue_size = 8, .io_ratio = 100, .poller = "poll"};
    eddy_loop_t *loop = eddy_loop_new(&o);
    assert_non_null(loop);
    assert_string_equal(eddy_loop_poller(loop), "poll");
    assert_int_equal(eddy_loop_free(loop), 0);
}

static void test_loop_never_started_shuts_down_at_once(void **state)
{
    (void)state;
    eddy_loop_t *loop = eddy_loop_new(NULL);
    assert_non_null(loop);
    eddy_future_t *term = eddy_loop_shutdown_gracefully(loop, 1000, 5000);
    assert_true(eddy_future_is_done(term));
    assert_true(eddy_loop_is_terminated(loop));
    assert_int_equal(eddy_loop_start(loop), EDDY_EBUSY);
    assert_int_equal(eddy_loop_execute(loop, noop, NULL), EDDY_ESHUTDOWN);
    assert_int_equal(eddy_loop_free(loop), 0);
}

/* Freeing a loop that never ran runs what it accepted (on the caller), as shutting it down
 * does: a task, a submitted task's future, a timer's insertion (which then is cancelled and
 * released, not left scheduled on a freed loop). */
static void count_task(void *arg)
{
    atomic_fetch_add((_Atomic int *)arg, 1);
}

static void never_fires(eddy_timer_t *t, void *arg)
{
    (void)t;
    atomic_fetch_add((_Atomic int *)arg, 100);
}

static void test_loop_never_started_runs_what_it_accepted_when_freed(void **state)
{
    (void)state;
    eddy_loop_t *loop = eddy_loop_new(NULL);
    assert_non_null(loop);
    _Atomic int ran = 0;
    assert_int_equal(eddy_loop_execute(loop, count_task, &ran), 0);
    eddy_timer_t *t = eddy_loop_schedule(loop, 60000, never_fires, &ran);
    assert_non_null(t);
    assert_int_equal(eddy_loop_free(loop), 0);
    assert_int_equal(atomic_load(&ran), 1);
    assert_true(eddy_timer_is_done(t)); /* cancelled with the loop, never fired */
    assert_int_equal(eddy_timer_cancel(t), EDDY_EALREADY);
    eddy_timer_release(t);
}

/* ---------------------------------------------------------------------------------------
 * Tasks
 */

#define PRODUCERS 4
#define PER_PRODUCER 100000

typedef struct mp_s {
    eddy_loop_t *loop;
    long next[PRODUCERS]; /* the loop's thread only */
    atomic_long misordered;
    atomic_long ran;
    atomic_long refused;
} mp_t;

static mp_t mp;

static void mp_task(void *arg)
{
    uintptr_t v = (uintptr_t)arg;
    unsigned p = (unsigned)(v >> 32);
    long i = (long)(v & 0xffffffffu);
    if (mp.next[p] != i) {
        atomic_fetch_add(&mp.misordered, 1);
    }
    mp.next[p] = i + 1;
    atomic_fetch_add(&mp.ran, 1);
}

static void *mp_producer(void *arg)
{
    uintptr_t p = (uintptr_t)arg;
    for (uintptr_t i = 0; i < PER_PRODUCER; i++) {
        if (eddy_loop_execute(mp.loop, mp_task, (void *)((p << 32) | i)) != 0) {
            atomic_fetch_add(&mp.refused, 1);
        }
    }
    return NULL;
}

static void test_tasks_from_four_threads_run_once_in_per_producer_order(void **state)
{
    (void)state;
    memset(&mp, 0, sizeof(mp));
    mp.loop = start_loop(NULL);
    pthread_t th[PRODUCERS];
    for (uintptr_t p = 0; p < PRODUCERS; p++) {
        assert_int_equal(pthread_create(&th[p], NULL, mp_producer, (void *)p), 0);
    }
    for (int p = 0; p < PRODUCERS; p++) {
        pthread_join(th[p], NULL);
    }
    assert_int_equal(atomic_load(&mp.refused), 0);
    assert_true(wait_for(&mp.ran, PRODUCERS * PER_PRODUCER, 30000));
    finish_loop(mp.loop);
    assert_int_equal(atomic_load(&mp.ran), PRODUCERS * PER_PRODUCER);
    assert_int_equal(atomic_load(&mp.misordered), 0);
    for (int p = 0; p < PRODUCERS; p++) {
        assert_int_equal(mp.next[p], PER_PRODUCER);
    }
}

static void test_task_wakes_a_blocked_poll(void **state)
{
    (void)state;
    order_reset();
    eddy_loop_t *loop = start_loop(NULL);
    run_sync(loop, noop, NULL);
    sleep_ms(100); /* nothing to do, no timer: the loop blocks in its poller */
    eddy_loop_metrics_t m0, m1;
    eddy_loop_metrics(loop, &m0);
    int64_t t0 = eddy_now_ns();
    assert_int_equal(eddy_loop_execute(loop, record, (void *)0), 0);
    assert_true(wait_for(&order_n, 1, DEADLINE_MS));
    int64_t took = eddy_now_ns() - t0;
    eddy_loop_metrics(loop, &m1);
    assert_true(m1.wakeups > m0.wakeups);
    assert_true(took < 1000 * MS);
    finish_loop(loop);
}

typedef struct chain_s {
    eddy_loop_t *loop;
    atomic_long n;
    long len;
    atomic_long rc_bad;
} chain_t;

static void chain_link(void *arg)
{
    chain_t *c = arg;
    if (atomic_fetch_add(&c->n, 1) + 1 < c->len) {
        if (eddy_loop_execute(c->loop, chain_link, c) != 0) {
            atomic_fetch_add(&c->rc_bad, 1);
        }
    }
}

static void test_task_may_execute_another_task(void **state)
{
    (void)state;
    chain_t c = {.len = 1000};
    c.loop = start_loop(NULL);
    assert_int_equal(eddy_loop_execute(c.loop, chain_link, &c), 0);
    assert_true(wait_for(&c.n, c.len, DEADLINE_MS));
    finish_loop(c.loop);
    assert_int_equal(atomic_load(&c.n), c.len);
    assert_int_equal(atomic_load(&c.rc_bad), 0);
}

typedef struct overflow_s {
    eddy_loop_t *loop;
    long n;
    atomic_long rc_bad;
    int64_t depth_seen;
} overflow_t;

static void overflow_producer(void *arg)
{
    overflow_t *o = arg;
    for (long i = 0; i < o->n; i++) {
        if (eddy_loop_execute(o->loop, record, (void *)(intptr_t)i) != 0) {
            atomic_fetch_add(&o->rc_bad, 1);
        }
    }
    eddy_loop_metrics_t m;
    eddy_loop_metrics(o->loop, &m);
    o->depth_seen = m.task_queue_depth;
}

static void test_execute_from_the_loop_on_a_full_ring_overflows_in_order(void **state)
{
    (void)state;
    order_reset();
    eddy_loop_options_t opts = {.task_queue_size = 8};
    overflow_t o = {.n = 100};
    o.loop = start_loop(&opts);
    run_sync(o.loop, overflow_producer, &o);
    assert_int_equal(atomic_load(&o.rc_bad), 0);
    /* The 100 queued, and perhaps the running task whose slot is not released yet. */
    assert_in_range(o.depth_seen, 100, 101);
    assert_true(wait_for(&order_n, 100, DEADLINE_MS));
    finish_loop(o.loop);
    assert_order_is_0_to(100);
}

static void test_try_execute_returns_eagain_on_a_full_ring(void **state)
{
    (void)state;
    order_reset();
    eddy_loop_options_t opts = {.task_queue_size = 8};
    eddy_loop_t *loop = start_loop(&opts);
    static gate_t g;
    gate_close(loop, &g);
    long accepted = 0;
    int rc = 0;
    while (accepted < 100) {
        rc = eddy_loop_try_execute(loop, record, (void *)(intptr_t)accepted);
        if (rc != 0) {
            break;
        }
        accepted++;
    }
    assert_int_equal(rc, EDDY_EAGAIN);
    /* 8 slots, one perhaps still held by the running gate. */
    assert_in_range(accepted, 7, 8);
    eddy_loop_metrics_t m;
    eddy_loop_metrics(loop, &m);
    assert_in_range(m.task_queue_depth, accepted, accepted + 1);
    atomic_store(&g.open, true);
    assert_true(wait_for(&order_n, accepted, DEADLINE_MS));
    /* Room again. */
    assert_int_equal(eddy_loop_try_execute(loop, record, (void *)(intptr_t)accepted), 0);
    assert_true(wait_for(&order_n, accepted + 1, DEADLINE_MS));
    finish_loop(loop);
    assert_order_is_0_to(accepted + 1);
}

typedef struct blocked_producer_s {
    eddy_loop_t *loop;
    long n;
    atomic_long accepted;
    atomic_long rc_bad;
    atomic_bool done;
} blocked_producer_t;

static void *blocked_producer(void *arg)
{
    blocked_producer_t *b = arg;
    for (long i = 0; i < b->n; i++) {
        if (eddy_loop_execute(b->loop, record, (void *)(intptr_t)i) != 0) {
            atomic_fetch_add(&b->rc_bad, 1);
        }
        atomic_fetch_add(&b->accepted, 1);
    }
    atomic_store(&b->done, true);
    return NULL;
}

static void test_execute_waits_on_a_full_ring_until_the_loop_drains(void **state)
{
    (void)state;
    order_reset();
    eddy_loop_options_t opts = {.task_queue_size = 8};
    eddy_loop_t *loop = start_loop(&opts);
    static gate_t g;
    gate_close(loop, &g);
    blocked_producer_t b = {.loop = loop, .n = 50};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, blocked_producer, &b), 0);
    sleep_ms(100);
    assert_false(atomic_load(&b.done));
    assert_true(atomic_load(&b.accepted) <= 8);
    atomic_store(&g.open, true);
    assert_true(wait_flag(&b.done, DEADLINE_MS));
    pthread_join(th, NULL);
    assert_true(wait_for(&order_n, 50, DEADLINE_MS));
    finish_loop(loop);
    assert_int_equal(atomic_load(&b.rc_bad), 0);
    assert_order_is_0_to(50);
}

static void test_lazy_execute_waits_for_something_else_to_wake_the_loop(void **state)
{
    (void)state;
    order_reset();
    eddy_loop_t *loop = start_loop(NULL);
    run_sync(loop, noop, NULL);
    sleep_ms(100); /* blocked in its poller, no timer */
    assert_int_equal(eddy_loop_lazy_execute(loop, record, (void *)0), 0);
    sleep_ms(200);
    assert_int_equal(atomic_load(&order_n), 0);
    assert_int_equal(eddy_loop_execute(loop, record, (void *)1), 0);
    assert_true(wait_for(&order_n, 2, DEADLINE_MS));
    finish_loop(loop);
    assert_order_is_0_to(2);
}

/* Lazy tasks never wake the loop, but one that finds the ring full does: a ring filled with
 * lazy tasks while the loop slept used to leave its producer waiting for ever. */
static void test_lazy_execute_on_a_full_ring_wakes_the_loop(void **state)
{
    (void)state;
    order_reset();
    eddy_loop_options_t opts = {.task_queue_size = 8};
    eddy_loop_t *loop = start_loop(&opts);
    run_sync(loop, noop, NULL);
    sleep_ms(100); /* blocked in its poller, no timer */
    for (long i = 0; i < 50; i++) {
        assert_int_equal(eddy_loop_lazy_execute(loop, record, (void *)i), 0);
    }
    assert_true(wait_for(&order_n, 42, DEADLINE_MS)); /* all but what fits in the ring */
    finish_loop(loop); /* runs the rest */
    assert_order_is_0_to(50);
}

static int callable_ok(void *arg, void **result)
{
    *result = arg;
    return 0;
}

static int callable_fails(void *arg, void **result)
{
    (void)arg;
    *result = (void *)1;
    return EDDY_ENOENT;
}

static void test_submit_completes_with_the_result_or_the_error(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    int x;
    eddy_future_t *f = eddy_loop_submit(loop, callable_ok, &x);
    assert_non_null(f);
    assert_ptr_equal(eddy_future_loop(f), loop);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_true(eddy_future_is_done(f));
    assert_int_equal(eddy_future_error(f), 0);
    assert_ptr_equal(eddy_future_result(f), &x);
    eddy_future_release(f);

    f = eddy_loop_submit(loop, callable_fails, &x);
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), EDDY_ENOENT);
    assert_null(eddy_future_result(f));
    eddy_future_release(f);

    finish_loop(loop);
}

static void test_submit_after_shutdown_fails_with_eshutdown(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    eddy_future_t *term = eddy_loop_shutdown_gracefully(loop, 0, 5000);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    int x;
    eddy_future_t *f = eddy_loop_submit(loop, callable_ok, &x);
    assert_non_null(f);
    assert_true(eddy_future_is_done(f));
    assert_int_equal(eddy_future_error(f), EDDY_ESHUTDOWN);
    eddy_future_release(f);
    assert_int_equal(eddy_loop_free(loop), 0);
}

/* ---------------------------------------------------------------------------------------
 * The io_ratio budget: a descriptor that stays readable is reported every turn; a long queue
 * of 20 us tasks must let it in between batches, unless io_ratio is 100.
 */

#define BUDGET_TASKS 10000

typedef struct budget_s {
    eddy_io_t io;
    int fds[2];
    int64_t io_spin_ns;
    atomic_long io_calls;
    atomic_long tasks;
    atomic_long io_calls_at_first_task;
    atomic_long io_calls_at_last_task;
    int start_rc;
} budget_t;

static budget_t bud;

static void budget_io_cb(eddy_io_t *io, unsigned events, void *arg)
{
    (void)io;
    (void)events;
    budget_t *b = arg;
    atomic_fetch_add(&b->io_calls, 1);
    spin_ns(b->io_spin_ns); /* do not read: stays readable */
}

static void budget_task(void *arg)
{
    budget_t *b = arg;
    spin_ns(20000);
    long n = atomic_fetch_add(&b->tasks, 1) + 1;
    if (n == 1) {
        atomic_store(&b->io_calls_at_first_task, atomic_load(&b->io_calls));
    }
    if (n == BUDGET_TASKS) {
        atomic_store(&b->io_calls_at_last_task, atomic_load(&b->io_calls));
    }
}

static void budget_io_start(void *arg)
{
    budget_t *b = arg;
    b->start_rc = eddy_io_start(&b->io, EDDY_IO_READ);
}

static void budget_io_stop(void *arg)
{
    budget_t *b = arg;
    eddy_io_stop(&b->io);
}

/* How many I/O turns happened while BUDGET_TASKS tasks, queued behind a gate, ran. */
static long io_turns_during_tasks(unsigned io_ratio, int64_t quantum_ns)
{
    memset(&bud, 0, sizeof(bud));
    bud.io_spin_ns = 100000;
    eddy_loop_options_t opts = {
        .io_ratio = io_ratio, .max_task_quantum_ns = quantum_ns, .stall_threshold_ns = -1,
        .task_queue_size = 16384}; /* room for every task: the gate need not time out */
    eddy_loop_t *loop = start_loop(&opts);
    assert_int_equal(pipe(bud.fds), 0);
    assert_int_equal(write(bud.fds[1], "x", 1), 1);
    eddy_io_init(&bud.io, loop, bud.fds[0], budget_io_cb, &bud);
    run_sync(loop, budget_io_start, &bud);
    assert_int_equal(bud.start_rc, 0);
    static gate_t g;
    gate_close(loop, &g);
    for (long i = 0; i < BUDGET_TASKS; i++) {
        assert_int_equal(eddy_loop_execute(loop, budget_task, &bud), 0);
    }
    atomic_store(&g.open, true);
    assert_true(wait_for(&bud.tasks, BUDGET_TASKS, 30000));
    run_sync(loop, budget_io_stop, &bud);
    finish_loop(loop);
    close(bud.fds[0]);
    close(bud.fds[1]);
    return atomic_load(&bud.io_calls_at_last_task) - atomic_load(&bud.io_calls_at_first_task);
}

static void test_io_ratio_100_runs_every_queued_task_in_one_turn(void **state)
{
    (void)state;
    long turns = io_turns_during_tasks(100, 0);
    assert_true(turns <= 1);
}

static void test_io_ratio_50_lets_io_in_between_task_batches(void **state)
{
    (void)state;
    /* 10000 tasks of 20 us against 100 us of I/O per turn: about 150 turns if tasks stop at
     * the first deadline check (every 64 tasks) past their budget. */
    long turns = io_turns_during_tasks(50, 0);
    assert_true(turns >= 10);
}

static void test_max_task_quantum_lets_io_in_even_at_io_ratio_100(void **state)
{
    (void)state;
    long turns = io_turns_during_tasks(100, 1 * MS);
    assert_true(turns >= 10);
}

/* The budget is a share of the time spent handling I/O: time blocked in the poller waiting
 * for it is not I/O work and must not buy tasks a longer run. */
static void test_io_ratio_budget_does_not_count_time_blocked_in_the_poller(void **state)
{
    (void)state;
    memset(&bud, 0, sizeof(bud));
    bud.io_spin_ns = 100000;
    /* Room for every task at once: a producer that finds the ring full wakes the loop. */
    eddy_loop_options_t opts = {.io_ratio = 50, .stall_threshold_ns = -1,
                                .task_queue_size = 16384};
    eddy_loop_t *loop = start_loop(&opts);
    assert_int_equal(pipe(bud.fds), 0);
    eddy_io_init(&bud.io, loop, bud.fds[0], budget_io_cb, &bud);
    run_sync(loop, budget_io_start, &bud);
    assert_int_equal(bud.start_rc, 0);
    sleep_ms(50); /* the pipe is empty: the loop blocks */
    for (long i = 0; i < BUDGET_TASKS; i++) {
        assert_int_equal(eddy_loop_lazy_execute(loop, budget_task, &bud), 0);
    }
    sleep_ms(600);
    assert_int_equal(atomic_load(&bud.tasks), 0);
    /* One byte wakes it after ~650 ms blocked (the 10000 tasks need ~200 ms); it stays
     * readable from now on. */
    assert_int_equal(write(bud.fds[1], "x", 1), 1);
    assert_true(wait_for(&bud.tasks, BUDGET_TASKS, 30000));
    run_sync(loop, budget_io_stop, &bud);
    finish_loop(loop);
    close(bud.fds[0]);
    close(bud.fds[1]);
    long turns = atomic_load(&bud.io_calls_at_last_task) - atomic_load(&bud.io_calls_at_first_task);
    if (turns < 10) {
        fail_msg("%ld I/O turns while 10000 tasks of 20 us ran after a 650 ms wait; expected "
                 ">= 10 (the blocked time was counted as I/O time)",
                 turns);
    }
}

/* ---------------------------------------------------------------------------------------
 * I/O readiness
 */

typedef struct probe_s {
    eddy_io_t io;
    eddy_loop_t *loop;
    int fds[2]; /* socketpair: the loop watches fds[0], the test writes fds[1] */
    unsigned want;
    int read_per_call; /* bytes read per callback: 0 none, -1 all */
    long stop_after;   /* stop watching after this many calls; 0: never */
    atomic_long calls;
    atomic_long bytes;
    atomic_uint seen; /* every event bit delivered */
    atomic_long off_loop;
    int rc;
} probe_t;

static void probe_cb(eddy_io_t *io, unsigned events, void *arg)
{
    probe_t *p = arg;
    if (!eddy_loop_in_event_loop(p->loop) || io != &p->io) {
        atomic_fetch_add(&p->off_loop, 1);
    }
    atomic_fetch_or(&p->seen, events);
    long n = atomic_fetch_add(&p->calls, 1) + 1;
    if ((events & EDDY_IO_READ) && p->read_per_call != 0) {
        char buf[256];
        size_t want = p->read_per_call < 0 ? sizeof(buf) : (size_t)p->read_per_call;
        ssize_t r = read(io->fd, buf, want);
        if (r > 0) {
            atomic_fetch_add(&p->bytes, r);
        }
    }
    if (p->stop_after > 0 && n >= p->stop_after) {
        eddy_io_stop(io);
    }
}

static void probe_start_task(void *arg)
{
    probe_t *p = arg;
    p->rc = eddy_io_start(&p->io, p->want);
}

static void probe_stop_task(void *arg)
{
    probe_t *p = arg;
    eddy_io_stop(&p->io);
}

static void probe_open(probe_t *p, eddy_loop_t *loop, unsigned want)
{
    memset(p, 0, sizeof(*p));
    p->loop = loop;
    p->want = want;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p->fds), 0);
    for (int i = 0; i < 2; i++) {
        fcntl(p->fds[i], F_SETFL, fcntl(p->fds[i], F_GETFL) | O_NONBLOCK);
    }
    eddy_io_init(&p->io, loop, p->fds[0], probe_cb, p);
}

static void probe_start(probe_t *p)
{
    run_sync(p->loop, probe_start_task, p);
    assert_int_equal(p->rc, 0);
}

static void probe_close(probe_t *p)
{
    run_sync(p->loop, probe_stop_task, p);
    close(p->fds[0]);
    if (p->fds[1] >= 0) {
        close(p->fds[1]);
    }
    assert_int_equal(atomic_load(&p->off_loop), 0);
}

static void test_io_readable_callback_fires_with_io_read(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    probe_t p;
    probe_open(&p, loop, EDDY_IO_READ);
    p.read_per_call = -1;
    probe_start(&p);
    sleep_ms(50);
    assert_int_equal(atomic_load(&p.calls), 0); /* nothing to read yet */
    assert_int_equal(write(p.fds[1], "hello", 5), 5);
    assert_true(wait_for(&p.bytes, 5, DEADLINE_MS));
    assert_true(atomic_load(&p.seen) & EDDY_IO_READ);
    assert_false(atomic_load(&p.seen) & EDDY_IO_WRITE);
    eddy_loop_metrics_t m;
    eddy_loop_metrics(loop, &m);
    assert_true(m.io_events >= 1);
    probe_close(&p);
    finish_loop(loop);
}

static void test_io_writable_callback_fires_with_io_write(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    probe_t p;
    probe_open(&p, loop, EDDY_IO_WRITE);
    p.stop_after = 1;
    probe_start(&p);
    assert_true(wait_for(&p.calls, 1, DEADLINE_MS));
    sleep_ms(50);
    assert_int_equal(atomic_load(&p.calls), 1); /* stopped inside its callback */
    assert_true(atomic_load(&p.seen) & EDDY_IO_WRITE);
    assert_false(atomic_load(&p.seen) & EDDY_IO_READ);
    probe_close(&p);
    finish_loop(loop);
}

static void test_io_is_level_triggered_while_data_remains(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    probe_t p;
    probe_open(&p, loop, EDDY_IO_READ);
    p.read_per_call = 1;
    probe_start(&p);
    assert_int_equal(write(p.fds[1], "abc", 3), 3);
    assert_true(wait_for(&p.bytes, 3, DEADLINE_MS));
    sleep_ms(100);
    /* One byte per call: three calls, and none once it was drained. */
    assert_int_equal(atomic_load(&p.calls), 3);
    assert_int_equal(atomic_load(&p.bytes), 3);
    probe_close(&p);
    finish_loop(loop);
}

static void test_io_stop_stops_callbacks(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    probe_t p;
    probe_open(&p, loop, EDDY_IO_READ);
    probe_start(&p);
    assert_int_equal(write(p.fds[1], "x", 1), 1);
    /* Unread data: reported turn after turn. */
    assert_true(wait_for(&p.calls, 5, DEADLINE_MS));
    run_sync(loop, probe_stop_task, &p);
    long calls = atomic_load(&p.calls);
    sleep_ms(100);
    assert_int_equal(atomic_load(&p.calls), calls);
    /* And starting again reports it again. */
    probe_start(&p);
    assert_true(wait_for(&p.calls, calls + 1, DEADLINE_MS));
    probe_close(&p);
    finish_loop(loop);
}

static void test_io_start_replaces_the_interest(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    probe_t p;
    probe_open(&p, loop, EDDY_IO_READ);
    probe_start(&p);
    sleep_ms(50);
    assert_int_equal(atomic_load(&p.calls), 0);
    p.want = EDDY_IO_WRITE;
    p.stop_after = 1;
    probe_start(&p);
    assert_true(wait_for(&p.calls, 1, DEADLINE_MS));
    assert_int_equal(atomic_load(&p.seen), EDDY_IO_WRITE);
    probe_close(&p);
    finish_loop(loop);
}

static void test_io_peer_close_is_reported_as_readable(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    probe_t p;
    probe_open(&p, loop, EDDY_IO_READ);
    p.stop_after = 1;
    probe_start(&p);
    close(p.fds[1]);
    p.fds[1] = -1;
    assert_true(wait_for(&p.calls, 1, DEADLINE_MS));
    assert_true(atomic_load(&p.seen) & EDDY_IO_READ);
    probe_close(&p);
    finish_loop(loop);
}

/* ---------------------------------------------------------------------------------------
 * Metrics
 */

static void test_metrics_count_tasks_and_empty_the_queue(void **state)
{
    (void)state;
    order_reset();
    eddy_loop_t *loop = start_loop(NULL);
    static gate_t g;
    gate_close(loop, &g);
    for (long i = 0; i < 1000; i++) {
        assert_int_equal(eddy_loop_execute(loop, record, (void *)(intptr_t)i), 0);
    }
    eddy_loop_metrics_t m;
    eddy_loop_metrics(loop, &m);
    assert_in_range(m.task_queue_depth, 1000, 1001); /* perhaps with the running gate */
    atomic_store(&g.open, true);
    assert_true(wait_for(&order_n, 1000, DEADLINE_MS));
    int64_t end = eddy_now_ns() + DEADLINE_MS * MS;
    do {
        eddy_loop_metrics(loop, &m);
    } while (m.task_queue_depth != 0 && eddy_now_ns() < end);
    assert_int_equal(m.task_queue_depth, 0);
    eddy_future_t *term = eddy_loop_shutdown_gracefully(loop, 0, 5000);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    eddy_loop_metrics(loop, &m);
    assert_int_equal(m.tasks_run, 1001); /* the gate and the 1000 */
    assert_int_equal(m.timers_fired, 0);
    assert_int_equal(m.task_queue_depth, 0);
    assert_true(m.turns >= 1);
    assert_true(m.task_ns > 0);
    assert_int_equal(m.stalls, 0);
    assert_int_equal(eddy_loop_free(loop), 0);
    assert_order_is_0_to(1000);
}

static atomic_bool slept;

static void sleep_300_ms(void *arg)
{
    (void)arg;
    sleep_ms(300);
    atomic_store(&slept, true);
}

static void test_metrics_report_a_stalled_task(void **state)
{
    (void)state;
    atomic_store(&slept, false);
    eddy_loop_options_t opts = {.stall_threshold_ns = 50 * MS};
    eddy_loop_t *loop = start_loop(&opts);
    run_sync(loop, noop, NULL);
    eddy_loop_metrics_t m;
    eddy_loop_metrics(loop, &m);
    assert_int_equal(m.stalls, 0);
    assert_int_equal(eddy_loop_execute(loop, sleep_300_ms, NULL), 0);
    assert_true(wait_flag(&slept, DEADLINE_MS));
    run_sync(loop, noop, NULL);
    eddy_loop_metrics(loop, &m);
    assert_int_equal(m.stalls, 1);
    assert_true(m.last_stall_fn == (void (*)(void))sleep_300_ms);
    assert_true(m.last_stall_ns >= 50 * MS);
    finish_loop(loop);
}

/* The stall report reaches the log hook, from the watchdog's thread, as a warning. */
static pthread_mutex_t stall_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char stall_log[256];
static atomic_long stall_log_level;

static void record_stall_log(eddy_log_level_t level, const char *message, void *arg)
{
    (void)arg;
    if (strstr(message, "stalled") == NULL) {
        return;
    }
    pthread_mutex_lock(&stall_log_lock);
    snprintf(stall_log, sizeof(stall_log), "%s", message);
    pthread_mutex_unlock(&stall_log_lock);
    atomic_store(&stall_log_level, level);
}

static void test_a_stall_is_reported_through_the_log_hook(void **state)
{
    (void)state;
    atomic_store(&slept, false);
    atomic_store(&stall_log_level, 0);
    eddy_log_set_hook(record_stall_log, NULL);
    eddy_loop_options_t opts = {.name = "stall-test", .stall_threshold_ns = 50 * MS};
    eddy_loop_t *loop = start_loop(&opts);
    assert_int_equal(eddy_loop_execute(loop, sleep_300_ms, NULL), 0);
    assert_true(wait_flag(&slept, DEADLINE_MS));
    bool logged = wait_for(&stall_log_level, EDDY_LOG_WARN, DEADLINE_MS);
    finish_loop(loop);
    eddy_log_set_hook(NULL, NULL);
    assert_true(logged);
    char want[128];
    snprintf(want, sizeof(want),
             "loop stall-test stalled: callback 0x%" PRIxPTR " has held it for ",
             (uintptr_t)sleep_300_ms);
    pthread_mutex_lock(&stall_log_lock);
    bool same = strncmp(stall_log, want, strlen(want)) == 0;
    pthread_mutex_unlock(&stall_log_lock);
    if (!same) {
        fail_msg("logged \"%s\", not \"%s...\"", stall_log, want);
    }
}

static void test_metrics_report_no_stall_when_the_watchdog_is_off(void **state)
{
    (void)state;
    atomic_store(&slept, false);
    eddy_loop_options_t opts = {.stall_threshold_ns = -1};
    eddy_loop_t *loop = start_loop(&opts);
    assert_int_equal(eddy_loop_execute(loop, sleep_300_ms, NULL), 0);
    assert_true(wait_flag(&slept, DEADLINE_MS));
    eddy_loop_metrics_t m;
    eddy_loop_metrics(loop, &m);
    assert_int_equal(m.stalls, 0);
    assert_null(m.last_stall_fn);
    finish_loop(loop);
}

/* ---------------------------------------------------------------------------------------
 * Shutdown
 */

static void test_graceful_shutdown_runs_every_pending_task(void **state)
{
    (void)state;
    order_reset();
    eddy_loop_t *loop = start_loop(NULL);
    static gate_t g;
    gate_close(loop, &g);
    for (long i = 0; i < 1000; i++) {
        assert_int_equal(eddy_loop_execute(loop, record, (void *)(intptr_t)i), 0);
    }
    /* No quiet period and no time at all: accepted tasks still run. */
    eddy_future_t *term = eddy_loop_shutdown_gracefully(loop, 0, 0);
    assert_true(eddy_loop_is_shutting_down(loop));
    assert_int_equal(eddy_loop_execute(loop, record, (void *)-1), EDDY_ESHUTDOWN);
    assert_int_equal(eddy_loop_try_execute(loop, record, (void *)-1), EDDY_ESHUTDOWN);
    assert_int_equal(eddy_loop_lazy_execute(loop, record, (void *)-1), EDDY_ESHUTDOWN);
    atomic_store(&g.open, true);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_free(loop), 0);
    assert_order_is_0_to(1000);
}

static void test_tasks_after_termination_are_refused_and_never_run(void **state)
{
    (void)state;
    order_reset();
    eddy_loop_t *loop = start_loop(NULL);
    eddy_future_t *term = eddy_loop_shutdown_gracefully(loop, 0, 5000);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_execute(loop, record, (void *)0), EDDY_ESHUTDOWN);
    assert_int_equal(eddy_loop_try_execute(loop, record, (void *)0), EDDY_ESHUTDOWN);
    assert_int_equal(eddy_loop_lazy_execute(loop, record, (void *)0), EDDY_ESHUTDOWN);
    assert_int_equal(atomic_load(&order_n), 0);
    assert_int_equal(eddy_loop_free(loop), 0);
}

static void test_quiet_period_delays_termination(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    run_sync(loop, noop, NULL);
    int64_t t0 = eddy_now_ns();
    eddy_future_t *term = eddy_loop_shutdown_gracefully(loop, 200, 5000);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    int64_t took = eddy_now_ns() - t0;
    assert_true(took >= 199 * MS);
    assert_true(took < 5000 * MS);
    assert_int_equal(eddy_loop_free(loop), 0);
}

/* Keeps the loop busy past the shutdown timeout: re-queues itself for 2 s. */
typedef struct busy_s {
    eddy_loop_t *loop;
    int64_t until;
    atomic_long runs;
} busy_t;

static void busy_task(void *arg)
{
    busy_t *b = arg;
    atomic_fetch_add(&b->runs, 1);
    sleep_ms(1);
    if (eddy_now_ns() < b->until) {
        eddy_loop_execute(b->loop, busy_task, b);
    }
}

static void test_shutdown_timeout_ends_a_busy_quiet_period(void **state)
{
    (void)state;
    busy_t b = {0};
    b.loop = start_loop(NULL);
    b.until = eddy_now_ns() + 3000 * MS;
    assert_int_equal(eddy_loop_execute(b.loop, busy_task, &b), 0);
    assert_true(wait_for(&b.runs, 1, DEADLINE_MS));
    int64_t t0 = eddy_now_ns();
    eddy_future_t *term = eddy_loop_shutdown_gracefully(b.loop, 100, 300);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    int64_t took = eddy_now_ns() - t0;
    assert_true(took >= 299 * MS);
    assert_true(took < 2500 * MS);
    assert_int_equal(eddy_loop_free(b.loop), 0);
}

/* A chain of tasks the loop gives itself after shutdown began: each is accepted (execute
 * returns 0 on the loop), so each must run. */
static void chain_start_after_shutdown(void *arg)
{
    chain_link(arg);
}

static void test_tasks_the_loop_gives_itself_while_shutting_down_all_run(void **state)
{
    (void)state;
    chain_t c = {.len = 5};
    c.loop = start_loop(NULL);
    static gate_t g;
    gate_close(c.loop, &g);
    assert_int_equal(eddy_loop_execute(c.loop, chain_start_after_shutdown, &c), 0);
    /* Within the timeout the loop takes its own tasks; past it, it refuses them (so a task
     * that keeps queueing itself cannot hold shutdown open: see the timeout test). */
    eddy_future_t *term = eddy_loop_shutdown_gracefully(c.loop, 0, 5000);
    atomic_store(&g.open, true);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    assert_int_equal(atomic_load(&c.rc_bad), 0);
    assert_int_equal(atomic_load(&c.n), c.len);
    assert_int_equal(eddy_loop_free(c.loop), 0);
}

typedef struct racer_s {
    eddy_loop_t *loop;
    atomic_long accepted;
    atomic_long ran;
    atomic_bool go;
} racer_t;

static void racer_task(void *arg)
{
    racer_t *r = arg;
    atomic_fetch_add(&r->ran, 1);
}

static void *racer_producer(void *arg)
{
    racer_t *r = arg;
    while (!atomic_load(&r->go)) {
    }
    for (;;) {
        int rc = eddy_loop_execute(r->loop, racer_task, r);
        if (rc == EDDY_ESHUTDOWN) {
            break;
        }
        if (rc == 0) {
            atomic_fetch_add(&r->accepted, 1);
        }
    }
    return NULL;
}

static void test_every_accepted_task_runs_when_another_thread_shuts_down(void **state)
{
    (void)state;
    racer_t r = {0};
    r.loop = start_loop(NULL);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, racer_producer, &r), 0);
    }
    atomic_store(&r.go, true);
    sleep_ms(50);
    eddy_future_t *term = eddy_loop_shutdown_gracefully(r.loop, 0, 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
    }
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    assert_true(atomic_load(&r.accepted) > 0);
    assert_int_equal(atomic_load(&r.ran), atomic_load(&r.accepted));
    assert_int_equal(eddy_loop_free(r.loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop_starts_runs_a_task_and_stops),
        cmocka_unit_test(test_loop_runs_on_the_calling_thread),
        cmocka_unit_test(test_loop_outside_a_group_is_index_0_and_keeps_its_data),
        cmocka_unit_test(test_loop_locals_are_one_block_per_key_and_loop),
        cmocka_unit_test(test_loop_free_is_busy_while_running),
        cmocka_unit_test(test_loop_new_refuses_bad_options),
        cmocka_unit_test(test_loop_never_started_shuts_down_at_once),
        cmocka_unit_test(test_loop_never_started_runs_what_it_accepted_when_freed),
        cmocka_unit_test(test_tasks_from_four_threads_run_once_in_per_producer_order),
        cmocka_unit_test(test_task_wakes_a_blocked_poll),
        cmocka_unit_test(test_task_may_execute_another_task),
        cmocka_unit_test(test_execute_from_the_loop_on_a_full_ring_overflows_in_order),
        cmocka_unit_test(test_try_execute_returns_eagain_on_a_full_ring),
        cmocka_unit_test(test_execute_waits_on_a_full_ring_until_the_loop_drains),
        cmocka_unit_test(test_lazy_execute_waits_for_something_else_to_wake_the_loop),
        cmocka_unit_test(test_lazy_execute_on_a_full_ring_wakes_the_loop),
        cmocka_unit_test(test_submit_completes_with_the_result_or_the_error),
        cmocka_unit_test(test_submit_after_shutdown_fails_with_eshutdown),
        cmocka_unit_test(test_io_ratio_100_runs_every_queued_task_in_one_turn),
        cmocka_unit_test(test_io_ratio_50_lets_io_in_between_task_batches),
        cmocka_unit_test(test_max_task_quantum_lets_io_in_even_at_io_ratio_100),
        cmocka_unit_test(test_io_ratio_budget_does_not_count_time_blocked_in_the_poller),
        cmocka_unit_test(test_io_readable_callback_fires_with_io_read),
        cmocka_unit_test(test_io_writable_callback_fires_with_io_write),
        cmocka_unit_test(test_io_is_level_triggered_while_data_remains),
        cmocka_unit_test(test_io_stop_stops_callbacks),
        cmocka_unit_test(test_io_start_replaces_the_interest),
        cmocka_unit_test(test_io_peer_close_is_reported_as_readable),
        cmocka_unit_test(test_metrics_count_tasks_and_empty_the_queue),
        cmocka_unit_test(test_metrics_report_a_stalled_task),
        cmocka_unit_test(test_a_stall_is_reported_through_the_log_hook),
        cmocka_unit_test(test_metrics_report_no_stall_when_the_watchdog_is_off),
        cmocka_unit_test(test_graceful_shutdown_runs_every_pending_task),
        cmocka_unit_test(test_tasks_after_termination_are_refused_and_never_run),
        cmocka_unit_test(test_quiet_period_delays_termination),
        cmocka_unit_test(test_shutdown_timeout_ends_a_busy_quiet_period),
        cmocka_unit_test(test_tasks_the_loop_gives_itself_while_shutting_down_all_run),
        cmocka_unit_test(test_every_accepted_task_runs_when_another_thread_shuts_down),
    };
    return cmocka_run_group_tests_name("reactor.loop", tests, NULL, NULL);
}
