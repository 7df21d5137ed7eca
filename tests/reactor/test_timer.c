/*
 * reactor.timer: one-shot and periodic timers on a loop: order, deadlines (lower bounds
 * exact, upper bounds generous: the machine is shared), cancel from anywhere, a million
 * scheduled and cancelled, shutdown. Runs once per poller.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/loop.h>
#include "reactor/internal.h" /* the reference counts; the timer heap */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buffer/layer.h"
#include "support/abort_util.h"
#include "support/loop_util.h"

#define LATE_MS 500 /* how late a timer may fire before a test calls it broken */
/* How long scheduling (or cancelling) a million timers may take: about a second alone under
 * ASan, over ten seconds beside a TSan build and five other tests (CI, 2 cores). */
#define MILLION_DEADLINE_MS 50000

/* ---------------------------------------------------------------------------------------
 * Helpers
 */

/* One timer's observations. */
typedef struct shot_s {
    eddy_loop_t *loop;
    eddy_timer_t *t;
    int64_t deadline;
    atomic_long fired; /* runs started */
    atomic_long off_loop;
    int64_t at[16]; /* start of each run */
    int64_t end[16];
    int64_t hold_ns; /* how long each run takes */
    long cancel_at;  /* cancel itself in this run (1-based); 0: never */
    atomic_int cancel_rc;
} shot_t;

static void shot_cb(eddy_timer_t *t, void *arg)
{
    shot_t *s = arg;
    int64_t now = eddy_now_ns();
    (void)t;
    if (!eddy_loop_in_event_loop(s->loop)) {
        atomic_fetch_add(&s->off_loop, 1);
    }
    long n = atomic_load(&s->fired);
    if (n < 16) {
        s->at[n] = now;
    }
    atomic_store(&s->fired, n + 1); /* counted as it starts: a cancel may come meanwhile */
    if (s->hold_ns > 0) {
        sleep_ms(s->hold_ns / MS);
    }
    if (n < 16) {
        s->end[n] = eddy_now_ns();
    }
    if (s->cancel_at == n + 1) {
        atomic_store(&s->cancel_rc, eddy_timer_cancel(t));
    }
}

static void shot_init(shot_t *s, eddy_loop_t *loop)
{
    memset(s, 0, sizeof(*s));
    s->loop = loop;
    atomic_init(&s->cancel_rc, 1);
}

/* ---------------------------------------------------------------------------------------
 * Firing
 */

static void test_timer_fires_once_after_its_delay(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    shot_t s;
    shot_init(&s, loop);
    int64_t t0 = eddy_now_ns();
    /* Published before the callback may look at it: the gate holds the loop meanwhile. */
    static gate_t g;
    gate_close(loop, &g);
    s.t = eddy_loop_schedule(loop, 50, shot_cb, &s);
    assert_non_null(s.t);
    assert_false(eddy_timer_is_done(s.t));
    atomic_store(&g.open, true);
    assert_true(wait_for(&s.fired, 1, DEADLINE_MS));
    assert_true(s.at[0] - t0 >= 50 * MS);
    assert_true(s.at[0] - t0 < (50 + LATE_MS) * MS);
    sleep_ms(100);
    assert_int_equal(atomic_load(&s.fired), 1);
    assert_int_equal(atomic_load(&s.off_loop), 0);
    assert_true(eddy_timer_is_done(s.t));
    assert_int_equal(eddy_timer_cancel(s.t), EDDY_EALREADY);
    eddy_timer_release(s.t);

    eddy_loop_metrics_t m;
    eddy_loop_metrics(loop, &m);
    assert_int_equal(m.timers_fired, 1);
    finish_loop(loop);
}

static void test_timer_with_a_past_deadline_or_no_delay_fires_at_once(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    shot_t a, b, c;
    shot_init(&a, loop);
    shot_init(&b, loop);
    shot_init(&c, loop);
    static gate_t g;
    gate_close(loop, &g);
    int64_t t0 = eddy_now_ns();
    a.t = eddy_loop_schedule_at(loop, t0 - 1000 * MS, shot_cb, &a);
    b.t = eddy_loop_schedule(loop, 0, shot_cb, &b);
    c.t = eddy_loop_schedule_ns(loop, 500000, shot_cb, &c);
    assert_non_null(a.t);
    assert_non_null(b.t);
    assert_non_null(c.t);
    atomic_store(&g.open, true);
    assert_true(wait_for(&a.fired, 1, DEADLINE_MS));
    assert_true(wait_for(&b.fired, 1, DEADLINE_MS));
    assert_true(wait_for(&c.fired, 1, DEADLINE_MS));
    assert_true(a.at[0] - t0 < LATE_MS * MS);
    assert_true(b.at[0] - t0 < LATE_MS * MS);
    assert_true(c.at[0] - t0 >= 500000);
    assert_true(c.at[0] - t0 < LATE_MS * MS);
    eddy_timer_release(a.t);
    eddy_timer_release(b.t);
    eddy_timer_release(c.t);
    finish_loop(loop);
}

/* Deadlines at either end of the clock: the earliest fires at once (its lag is not an
 * overflow, UBSan), the latest is accepted and never fires. */
static void test_timer_at_the_ends_of_the_clock(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    shot_t a, b;
    shot_init(&a, loop);
    shot_init(&b, loop);
    a.t = eddy_loop_schedule_at(loop, INT64_MIN, shot_cb, &a);
    b.t = eddy_loop_schedule_at(loop, INT64_MAX, shot_cb, &b);
    assert_non_null(a.t);
    assert_non_null(b.t);
    assert_true(wait_for(&a.fired, 1, DEADLINE_MS));
    sleep_ms(50);
    assert_int_equal(atomic_load(&b.fired), 0);
    assert_int_equal(eddy_timer_cancel(b.t), 0);
    eddy_timer_release(a.t);
    eddy_timer_release(b.t);
    finish_loop(loop);
}

#define ORDERED 300

typedef struct ordered_s {
    eddy_loop_t *loop;
    int64_t deadline[ORDERED];
    int64_t fired_at[ORDERED];
    int fired[ORDERED]; /* indexes, in firing order */
    atomic_long n;
    eddy_timer_t *t[ORDERED];
} ordered_t;

static ordered_t ord;

static void ordered_cb(eddy_timer_t *t, void *arg)
{
    (void)t;
    int i = (int)(intptr_t)arg;
    long n = atomic_load(&ord.n);
    if (n >= ORDERED) {
        return;
    }
    ord.fired[n] = i;
    ord.fired_at[i] = eddy_now_ns();
    atomic_store(&ord.n, n + 1);
}

static void ordered_schedule_all(void *arg)
{
    (void)arg;
    for (int i = 0; i < ORDERED; i++) {
        ord.t[i] =
            eddy_loop_schedule_at(ord.loop, ord.deadline[i], ordered_cb, (void *)(intptr_t)i);
    }
}

static void check_ordered(void)
{
    assert_true(wait_for(&ord.n, ORDERED, DEADLINE_MS));
    sleep_ms(20);
    assert_int_equal(atomic_load(&ord.n), ORDERED);
    for (int k = 0; k < ORDERED; k++) {
        int i = ord.fired[k];
        if (ord.fired_at[i] < ord.deadline[i]) {
            fail_msg("timer %d fired %lld ns early", i,
                     (long long)(ord.deadline[i] - ord.fired_at[i]));
        }
        if (ord.fired_at[i] - ord.deadline[i] > LATE_MS * MS) {
            fail_msg("timer %d fired %lld ms late", i,
                     (long long)((ord.fired_at[i] - ord.deadline[i]) / MS));
        }
        if (k > 0) {
            int j = ord.fired[k - 1];
            bool in_order =
                ord.deadline[j] < ord.deadline[i] || (ord.deadline[j] == ord.deadline[i] && j < i);
            if (!in_order) {
                fail_msg("timer %d (deadline +%lld) fired before timer %d (+%lld)", j,
                         (long long)ord.deadline[j], i, (long long)ord.deadline[i]);
            }
        }
    }
    for (int i = 0; i < ORDERED; i++) {
        eddy_timer_release(ord.t[i]);
    }
}

static void ordered_init(eddy_loop_t *loop)
{
    memset(&ord, 0, sizeof(ord));
    ord.loop = loop;
    /* Deadlines 0..200 ms ahead in 10 ms steps: many ties, which keep scheduling order. */
    int64_t base = eddy_now_ns() + 20 * MS;
    uint32_t x = 12345;
    for (int i = 0; i < ORDERED; i++) {
        x = x * 1103515245u + 12345u;
        ord.deadline[i] = base + (int64_t)((x >> 16) % 21) * 10 * MS;
    }
}

static void test_timers_fire_in_deadline_order_scheduled_from_another_thread(void **state)
{
    (void)state;
    /* io_ratio 100: once the gate opens, the loop runs every queued schedule in one batch.
     * With the default budget it could stop part way, on a slow (sanitized, loaded) run, and
     * run the timers due before the schedules of earlier deadlines still queued. */
    eddy_loop_options_t opts = {.io_ratio = 100};
    eddy_loop_t *loop = start_loop(&opts);
    ordered_init(loop);
    /* The loop waits until every timer is scheduled: a timer can only keep deadline order
     * with timers the loop knows of. Without the gate, a test thread descheduled for longer
     * than the first deadline (20 ms) on a loaded machine let early timers fire before later
     * ones with smaller deadlines had arrived. */
    static gate_t g;
    gate_close(loop, &g);
    for (int i = 0; i < ORDERED; i++) {
        ord.t[i] = eddy_loop_schedule_at(loop, ord.deadline[i], ordered_cb, (void *)(intptr_t)i);
        assert_non_null(ord.t[i]);
    }
    atomic_store(&g.open, true);
    check_ordered();
    finish_loop(loop);
}

static void test_timers_fire_in_deadline_order_scheduled_on_the_loop(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    ordered_init(loop);
    run_sync(loop, ordered_schedule_all, NULL);
    for (int i = 0; i < ORDERED; i++) {
        assert_non_null(ord.t[i]);
    }
    check_ordered();
    finish_loop(loop);
}

/* ---------------------------------------------------------------------------------------
 * Periodic timers
 */

static void test_fixed_rate_keeps_its_slots_while_fixed_delay_waits_after_each_run(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    shot_t rate, delay;
    shot_init(&rate, loop);
    shot_init(&delay, loop);
    rate.hold_ns = delay.hold_ns = 60 * MS;
    static gate_t g;
    gate_close(loop, &g);
    int64_t t0 = eddy_now_ns();
    rate.t = eddy_loop_schedule_at_fixed_rate(loop, 20, 100, shot_cb, &rate);
    delay.t = eddy_loop_schedule_with_fixed_delay(loop, 20, 100, shot_cb, &delay);
    assert_non_null(rate.t);
    assert_non_null(delay.t);
    atomic_store(&g.open, true);
    assert_true(wait_for(&rate.fired, 5, DEADLINE_MS));
    assert_true(wait_for(&delay.fired, 5, DEADLINE_MS));
    assert_int_equal(eddy_timer_cancel(rate.t), 0);
    assert_int_equal(eddy_timer_cancel(delay.t), 0);
    assert_int_equal(eddy_timer_cancel(rate.t), EDDY_EALREADY);
    assert_true(eddy_timer_is_done(rate.t));

    /* Fixed delay: each run starts at least 100 ms after the previous one ended. */
    for (int i = 1; i < 5; i++) {
        assert_true(delay.at[i] - delay.end[i - 1] >= 100 * MS);
    }
    /* Fixed rate: run i starts no earlier than its slot, t0 + 20 + 100 i ms, and the gaps
     * after a 60 ms run are not a full period each (that would be fixed delay). */
    int short_gaps = 0;
    for (int i = 0; i < 5; i++) {
        assert_true(rate.at[i] - t0 >= (20 + 100 * i) * MS);
        if (i > 0 && rate.at[i] - rate.end[i - 1] < 100 * MS) {
            short_gaps++;
        }
    }
    assert_true(short_gaps >= 1);
    assert_true(rate.at[0] - t0 < (20 + LATE_MS) * MS);
    assert_true(delay.at[0] - t0 < (20 + LATE_MS) * MS);
    long rf = atomic_load(&rate.fired), df = atomic_load(&delay.fired);
    sleep_ms(250);
    assert_int_equal(atomic_load(&rate.fired), rf);
    assert_int_equal(atomic_load(&delay.fired), df);
    eddy_timer_release(rate.t);
    eddy_timer_release(delay.t);
    finish_loop(loop);
}

static void test_fixed_rate_skips_missed_slots_instead_of_piling_up(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    shot_t s;
    shot_init(&s, loop);
    static gate_t g;
    gate_close(loop, &g);
    s.t = eddy_loop_schedule_at_fixed_rate(loop, 0, 50, shot_cb, &s);
    assert_non_null(s.t);
    atomic_store(&g.open, true);
    assert_true(wait_for(&s.fired, 1, DEADLINE_MS));
    /* Hold the loop over four slots. */
    gate_close(loop, &g);
    sleep_ms(230);
    long before = atomic_load(&s.fired);
    atomic_store(&g.open, true);
    assert_true(wait_for(&s.fired, before + 3, DEADLINE_MS));
    assert_int_equal(eddy_timer_cancel(s.t), 0);
    /* Caught up once, then back on its slots (the next one is a full period after the
     * catch-up run), never three runs back to back. */
    if (s.at[before + 2] - s.at[before] < 5 * MS) {
        fail_msg("runs %ld..%ld within %lld us: missed slots piled up", before, before + 2,
                 (long long)((s.at[before + 2] - s.at[before]) / 1000));
    }
    eddy_timer_release(s.t);
    finish_loop(loop);
}

/* Periods near the largest a millisecond count can say: the next deadline is far away, not
 * past INT64_MAX (an overflow, UBSan) and back in the past, where the timer would fire every
 * turn. */
static void test_periodic_timers_with_huge_periods_run_once(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    shot_t rate, delay;
    shot_init(&rate, loop);
    shot_init(&delay, loop);
    int64_t huge = INT64_MAX / 1000000;
    rate.t = eddy_loop_schedule_at_fixed_rate(loop, 0, huge, shot_cb, &rate);
    delay.t = eddy_loop_schedule_with_fixed_delay(loop, 0, huge, shot_cb, &delay);
    assert_non_null(rate.t);
    assert_non_null(delay.t);
    assert_true(wait_for(&rate.fired, 1, DEADLINE_MS));
    assert_true(wait_for(&delay.fired, 1, DEADLINE_MS));
    sleep_ms(100);
    assert_int_equal(atomic_load(&rate.fired), 1);
    assert_int_equal(atomic_load(&delay.fired), 1);
    assert_int_equal(eddy_timer_cancel(rate.t), 0);
    assert_int_equal(eddy_timer_cancel(delay.t), 0);
    eddy_timer_release(rate.t);
    eddy_timer_release(delay.t);
    finish_loop(loop);
}

/* Periodic timers keep to the turn's budget as one-shot ones do: the loop checks its deadline
 * every 64 callbacks, so a task queued by the first of many due periodic timers runs before
 * the last of them. */
#define BUSY_TIMERS 256

typedef struct busy_s {
    eddy_loop_t *loop;
    eddy_timer_t *t[BUSY_TIMERS];
    atomic_long fired;
    atomic_long fired_at_task; /* callbacks run when the task ran, plus one */
} busy_t;

static busy_t busy;

static void busy_task(void *arg)
{
    (void)arg;
    atomic_store(&busy.fired_at_task, atomic_load(&busy.fired) + 1);
}

static void busy_cb(eddy_timer_t *t, void *arg)
{
    (void)t;
    (void)arg;
    if (atomic_fetch_add(&busy.fired, 1) == 0) {
        eddy_loop_execute(busy.loop, busy_task, NULL);
    }
    int64_t end = eddy_now_ns() + 200000; /* 200 us of work */
    while (eddy_now_ns() < end) {
    }
}

static void busy_schedule_all(void *arg)
{
    (void)arg;
    for (int i = 0; i < BUSY_TIMERS; i++) {
        busy.t[i] = eddy_loop_schedule_at_fixed_rate(busy.loop, 0, 60000, busy_cb, NULL);
    }
}

static void test_periodic_timers_due_together_keep_to_the_turns_budget(void **state)
{
    (void)state;
    eddy_loop_options_t opts = {.stall_threshold_ns = -1};
    eddy_loop_t *loop = start_loop(&opts);
    memset(&busy, 0, sizeof(busy));
    busy.loop = loop;
    run_sync(loop, busy_schedule_all, NULL);
    for (int i = 0; i < BUSY_TIMERS; i++) {
        assert_non_null(busy.t[i]);
    }
    assert_true(wait_for(&busy.fired, BUSY_TIMERS, DEADLINE_MS));
    assert_true(wait_for(&busy.fired_at_task, 1, DEADLINE_MS));
    /* 64 callbacks of 200 us are far past the turn's budget: the task runs after them. */
    long at = atomic_load(&busy.fired_at_task) - 1;
    if (at >= BUSY_TIMERS) {
        fail_msg("the task waited for all %ld periodic callbacks of the turn", at);
    }
    for (int i = 0; i < BUSY_TIMERS; i++) {
        assert_int_equal(eddy_timer_cancel(busy.t[i]), 0);
        eddy_timer_release(busy.t[i]);
    }
    finish_loop(loop);
}

/* ---------------------------------------------------------------------------------------
 * Cancel
 */

static void test_timer_cancel_returns_0_then_ealready(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    shot_t s;
    shot_init(&s, loop);
    s.t = eddy_loop_schedule(loop, 100, shot_cb, &s);
    assert_non_null(s.t);
    assert_int_equal(eddy_timer_cancel(s.t), 0);
    assert_true(eddy_timer_is_done(s.t));
    assert_int_equal(eddy_timer_cancel(s.t), EDDY_EALREADY);
    sleep_ms(200);
    assert_int_equal(atomic_load(&s.fired), 0);
    eddy_timer_release(s.t);
    finish_loop(loop);
}

static void test_timer_cancelled_before_it_reaches_the_loop_never_fires(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    shot_t s;
    shot_init(&s, loop);
    static gate_t g;
    gate_close(loop, &g);
    s.t = eddy_loop_schedule(loop, 0, shot_cb, &s);
    assert_non_null(s.t);
    assert_int_equal(eddy_timer_cancel(s.t), 0);
    eddy_timer_release(s.t); /* the loop's references keep it alive meanwhile */
    atomic_store(&g.open, true);
    sleep_ms(100);
    assert_int_equal(atomic_load(&s.fired), 0);
    finish_loop(loop);
}

typedef struct on_loop_cancel_s {
    eddy_loop_t *loop;
    shot_t s;
    int rc1, rc2;
} on_loop_cancel_t;

static void cancel_on_loop(void *arg)
{
    on_loop_cancel_t *c = arg;
    c->s.t = eddy_loop_schedule(c->loop, 20, shot_cb, &c->s);
    c->rc1 = eddy_timer_cancel(c->s.t);
    c->rc2 = eddy_timer_cancel(c->s.t);
}

static void test_timer_cancel_on_the_loop(void **state)
{
    (void)state;
    on_loop_cancel_t c;
    c.loop = start_loop(NULL);
    shot_init(&c.s, c.loop);
    run_sync(c.loop, cancel_on_loop, &c);
    assert_non_null(c.s.t);
    assert_int_equal(c.rc1, 0);
    assert_int_equal(c.rc2, EDDY_EALREADY);
    sleep_ms(100);
    assert_int_equal(atomic_load(&c.s.fired), 0);
    eddy_timer_release(c.s.t);
    finish_loop(c.loop);
}

static void test_timer_cancels_itself_inside_its_callback(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    shot_t periodic, once;
    shot_init(&periodic, loop);
    shot_init(&once, loop);
    periodic.cancel_at = 3;
    once.cancel_at = 1;
    static gate_t g;
    gate_close(loop, &g);
    periodic.t = eddy_loop_schedule_at_fixed_rate(loop, 0, 10, shot_cb, &periodic);
    once.t = eddy_loop_schedule(loop, 10, shot_cb, &once);
    atomic_store(&g.open, true);
    assert_true(wait_for(&periodic.fired, 3, DEADLINE_MS));
    assert_true(wait_for(&once.fired, 1, DEADLINE_MS));
    sleep_ms(100);
    assert_int_equal(atomic_load(&periodic.fired), 3);
    assert_int_equal(atomic_load(&periodic.cancel_rc), 0);
    /* A one-shot timer has fired by the time its callback runs. */
    assert_int_equal(atomic_load(&once.cancel_rc), EDDY_EALREADY);
    assert_int_equal(atomic_load(&once.fired), 1);
    assert_int_equal(eddy_timer_cancel(periodic.t), EDDY_EALREADY);
    eddy_timer_release(periodic.t);
    eddy_timer_release(once.t);
    finish_loop(loop);
}

typedef struct nested_s {
    eddy_loop_t *loop;
    shot_t inner;
    int64_t outer_at;
    atomic_long outer_fired;
} nested_t;

static void outer_cb(eddy_timer_t *t, void *arg)
{
    (void)t;
    nested_t *n = arg;
    n->outer_at = eddy_now_ns();
    n->inner.t = eddy_loop_schedule(n->loop, 30, shot_cb, &n->inner);
    atomic_fetch_add(&n->outer_fired, 1);
}

static void test_timer_callback_schedules_another_timer(void **state)
{
    (void)state;
    nested_t n = {0};
    n.loop = start_loop(NULL);
    shot_init(&n.inner, n.loop);
    eddy_timer_t *outer = eddy_loop_schedule(n.loop, 10, outer_cb, &n);
    assert_non_null(outer);
    assert_true(wait_for(&n.inner.fired, 1, DEADLINE_MS));
    assert_int_equal(atomic_load(&n.outer_fired), 1);
    assert_non_null(n.inner.t);
    assert_true(n.inner.at[0] - n.outer_at >= 30 * MS);
    assert_true(n.inner.at[0] - n.outer_at < (30 + LATE_MS) * MS);
    eddy_timer_release(n.inner.t);
    eddy_timer_release(outer);
    finish_loop(n.loop);
}

static void test_released_timer_still_fires(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    shot_t s;
    shot_init(&s, loop);
    eddy_timer_t *t = eddy_loop_schedule(loop, 20, shot_cb, &s);
    assert_non_null(t);
    eddy_timer_release(t);
    eddy_timer_release(NULL);
    assert_true(wait_for(&s.fired, 1, DEADLINE_MS));
    finish_loop(loop);
}

/* ---------------------------------------------------------------------------------------
 * Many timers
 */

#define MILLION 1000000

typedef struct many_s {
    eddy_loop_t *loop;
    eddy_timer_t **t;
    long n;
    long scheduled, cancelled, bad_rc;
    bool heap_empty;
    atomic_long fired;
} many_t;

static void many_cb(eddy_timer_t *t, void *arg)
{
    (void)t;
    many_t *m = arg;
    atomic_fetch_add(&m->fired, 1);
}

static void million_schedule(void *arg)
{
    many_t *m = arg;
    int64_t base = eddy_now_ns() + 60000 * MS;
    for (long i = 0; i < m->n; i++) {
        /* Scattered deadlines, about a minute out. */
        int64_t d = base + (int64_t)((i * 7919) % m->n) * 1000;
        m->t[i] = eddy_loop_schedule_at(m->loop, d, many_cb, m);
        if (m->t[i] != NULL) {
            m->scheduled++;
        }
    }
}

static void million_cancel(void *arg)
{
    many_t *m = arg;
    /* Cancel in an order unrelated to deadlines or scheduling: every heap position. */
    for (long k = 0; k < m->n; k++) {
        long i = (k * 104729) % m->n;
        if (m->t[i] == NULL) {
            continue;
        }
        if (eddy_timer_cancel(m->t[i]) == 0) {
            m->cancelled++;
        } else {
            m->bad_rc++;
        }
        eddy_timer_release(m->t[i]);
        m->t[i] = NULL;
    }
    m->heap_empty =
        eddy__timers_next_deadline(&m->loop->timers) == INT64_MAX && m->loop->timers.n == 0;
}

static void test_million_timers_scheduled_and_cancelled(void **state)
{
    (void)state;
    many_t m = {.n = MILLION};
    m.t = calloc(MILLION, sizeof(*m.t));
    assert_non_null(m.t);
    eddy_loop_options_t opts = {.stall_threshold_ns = -1};
    m.loop = start_loop(&opts);
    run_sync_within(m.loop, million_schedule, &m, MILLION_DEADLINE_MS);
    assert_int_equal(m.scheduled, MILLION);
    run_sync_within(m.loop, million_cancel, &m, MILLION_DEADLINE_MS);
    assert_int_equal(m.cancelled, MILLION);
    assert_int_equal(m.bad_rc, 0);
    assert_true(m.heap_empty);
    finish_loop(m.loop);
    assert_int_equal(atomic_load(&m.fired), 0);
    free(m.t);
}

#define HALF_TEST 100000

typedef struct half_s {
    eddy_loop_t *loop;
    eddy_timer_t *t[HALF_TEST];
    int64_t deadline[HALF_TEST];
    bool cancelled[HALF_TEST];
    long out_of_order, early, fired_cancelled;
    long last;
    atomic_long fired;
} half_t;

static half_t *half;

static void half_cb(eddy_timer_t *t, void *arg)
{
    (void)t;
    long i = (long)(intptr_t)arg;
    half_t *h = half;
    if (h->cancelled[i]) {
        h->fired_cancelled++;
    }
    if (eddy_now_ns() < h->deadline[i]) {
        h->early++;
    }
    if (h->last >= 0) {
        long j = h->last;
        if (h->deadline[j] > h->deadline[i] || (h->deadline[j] == h->deadline[i] && j > i)) {
            h->out_of_order++;
        }
    }
    h->last = i;
    atomic_fetch_add(&h->fired, 1);
}

static void half_schedule_and_cancel(void *arg)
{
    half_t *h = arg;
    int64_t base = eddy_now_ns() + 50 * MS;
    uint32_t x = 99;
    for (long i = 0; i < HALF_TEST; i++) {
        x = x * 1103515245u + 12345u;
        h->deadline[i] = base + (int64_t)((x >> 8) % 200000) * 1000; /* 0..200 ms, 1 us */
        h->t[i] = eddy_loop_schedule_at(h->loop, h->deadline[i], half_cb, (void *)(intptr_t)i);
    }
    for (long i = 0; i < HALF_TEST; i++) {
        x = x * 1103515245u + 12345u;
        if ((x >> 16) & 1) {
            h->cancelled[i] = eddy_timer_cancel(h->t[i]) == 0;
        }
    }
}

static void test_timers_left_after_random_cancels_fire_in_order(void **state)
{
    (void)state;
    half = calloc(1, sizeof(*half));
    assert_non_null(half);
    half->last = -1;
    eddy_loop_options_t opts = {.stall_threshold_ns = -1};
    half->loop = start_loop(&opts);
    run_sync(half->loop, half_schedule_and_cancel, half);
    long want = 0;
    for (long i = 0; i < HALF_TEST; i++) {
        assert_non_null(half->t[i]);
        want += !half->cancelled[i];
    }
    assert_true(want > HALF_TEST / 3 && want < HALF_TEST * 2 / 3);
    assert_true(wait_for(&half->fired, want, DEADLINE_MS));
    sleep_ms(50);
    eddy_loop_metrics_t m;
    eddy_loop_metrics(half->loop, &m);
    finish_loop(half->loop);
    assert_int_equal(atomic_load(&half->fired), want);
    assert_int_equal(m.timers_fired, (uint64_t)want);
    assert_int_equal(half->fired_cancelled, 0);
    assert_int_equal(half->early, 0);
    assert_int_equal(half->out_of_order, 0);
    for (long i = 0; i < HALF_TEST; i++) {
        assert_true(eddy_timer_is_done(half->t[i]));
        eddy_timer_release(half->t[i]);
    }
    free(half);
}

#define FROM_AFAR 20000

static void test_timers_scheduled_and_cancelled_from_another_thread(void **state)
{
    (void)state;
    many_t m = {.n = FROM_AFAR};
    m.t = calloc(FROM_AFAR, sizeof(*m.t));
    assert_non_null(m.t);
    eddy_loop_options_t opts = {.task_queue_size = 256};
    m.loop = start_loop(&opts);
    for (long i = 0; i < FROM_AFAR; i++) {
        m.t[i] = eddy_loop_schedule(m.loop, 60000 + i % 1000, many_cb, &m);
        assert_non_null(m.t[i]);
    }
    for (long i = 0; i < FROM_AFAR; i++) {
        assert_int_equal(eddy_timer_cancel(m.t[i]), 0);
        eddy_timer_release(m.t[i]);
    }
    /* The removals are tasks: once a later task ran, the heap is empty. */
    many_t probe = {.loop = m.loop, .t = m.t, .n = 0};
    run_sync(m.loop, million_cancel, &probe);
    assert_true(probe.heap_empty);
    finish_loop(m.loop);
    assert_int_equal(atomic_load(&m.fired), 0);
    free(m.t);
}

/* ---------------------------------------------------------------------------------------
 * Shutdown
 */

static void test_shutdown_cancels_pending_timers(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    shot_t s, p;
    shot_init(&s, loop);
    shot_init(&p, loop);
    s.t = eddy_loop_schedule(loop, 10000, shot_cb, &s);
    p.t = eddy_loop_schedule_at_fixed_rate(loop, 10000, 10000, shot_cb, &p);
    assert_non_null(s.t);
    assert_non_null(p.t);
    int64_t t0 = eddy_now_ns();
    eddy_future_t *term = eddy_loop_shutdown_gracefully(loop, 0, 8000);
    assert_null(eddy_loop_schedule(loop, 10, shot_cb, &s));
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    /* Cancelled timers do not hold the loop until its timeout. */
    assert_true(eddy_now_ns() - t0 < 5000 * MS);
    assert_true(eddy_timer_is_done(s.t));
    assert_true(eddy_timer_is_done(p.t));
    assert_int_equal(eddy_timer_cancel(s.t), EDDY_EALREADY);
    assert_int_equal(atomic_load(&s.fired), 0);
    assert_int_equal(atomic_load(&p.fired), 0);
    eddy_timer_release(s.t);
    eddy_timer_release(p.t);
    assert_int_equal(eddy_loop_free(loop), 0);
}

static void test_metrics_count_fired_timers_and_their_lag(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    shot_t s[5];
    for (int i = 0; i < 5; i++) {
        shot_init(&s[i], loop);
        s[i].t = eddy_loop_schedule(loop, 5 + i, shot_cb, &s[i]);
        assert_non_null(s[i].t);
    }
    for (int i = 0; i < 5; i++) {
        assert_true(wait_for(&s[i].fired, 1, DEADLINE_MS));
        eddy_timer_release(s[i].t);
    }
    eddy_loop_metrics_t m;
    eddy_loop_metrics(loop, &m);
    assert_int_equal(m.timers_fired, 5);
    assert_true(m.lag_max_ns < (uint64_t)LATE_MS * MS);
    assert_true(m.lag_total_ns <= 5 * m.lag_max_ns);
    finish_loop(loop);
}

static void retain_timer_once(void *arg)
{
    eddy_timer_retain(arg);
}

static void test_timer_retain_at_the_maximum_count_is_refused(void **state)
{
    (void)state;
    eddy_loop_t *loop = eddy_loop_new(NULL);
    assert_non_null(loop);
    eddy_timer_t *t = eddy__timer_new(loop, shot_cb, 0, NULL); /* never scheduled */
    assert_non_null(t);
    /* One more than UINT32_MAX would wrap to 0: the next release would free it in use. */
    atomic_store(eddy__timer_refcnt(t), UINT32_MAX - 1);
    assert_ptr_equal(eddy_timer_retain(t), t);
    expect_abort_in_debug(retain_timer_once, t, "retain of timer");
    bool fatal = eddy__refcnt_set_fatal(false);
    assert_null(eddy_timer_retain(t));
    assert_int_equal(atomic_load(eddy__timer_refcnt(t)), UINT32_MAX);
    eddy__refcnt_set_fatal(fatal);
    atomic_store(eddy__timer_refcnt(t), 1);
    eddy_timer_release(t);
    assert_int_equal(eddy_loop_free(loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timer_fires_once_after_its_delay),
        cmocka_unit_test(test_timer_with_a_past_deadline_or_no_delay_fires_at_once),
        cmocka_unit_test(test_timer_at_the_ends_of_the_clock),
        cmocka_unit_test(test_timers_fire_in_deadline_order_scheduled_from_another_thread),
        cmocka_unit_test(test_timers_fire_in_deadline_order_scheduled_on_the_loop),
        cmocka_unit_test(test_fixed_rate_keeps_its_slots_while_fixed_delay_waits_after_each_run),
        cmocka_unit_test(test_fixed_rate_skips_missed_slots_instead_of_piling_up),
        cmocka_unit_test(test_periodic_timers_with_huge_periods_run_once),
        cmocka_unit_test(test_periodic_timers_due_together_keep_to_the_turns_budget),
        cmocka_unit_test(test_timer_cancel_returns_0_then_ealready),
        cmocka_unit_test(test_timer_cancelled_before_it_reaches_the_loop_never_fires),
        cmocka_unit_test(test_timer_cancel_on_the_loop),
        cmocka_unit_test(test_timer_cancels_itself_inside_its_callback),
        cmocka_unit_test(test_timer_callback_schedules_another_timer),
        cmocka_unit_test(test_released_timer_still_fires),
        cmocka_unit_test(test_timer_retain_at_the_maximum_count_is_refused),
        cmocka_unit_test(test_million_timers_scheduled_and_cancelled),
        cmocka_unit_test(test_timers_left_after_random_cancels_fire_in_order),
        cmocka_unit_test(test_timers_scheduled_and_cancelled_from_another_thread),
        cmocka_unit_test(test_shutdown_cancels_pending_timers),
        cmocka_unit_test(test_metrics_count_fired_timers_and_their_lag),
    };
    return cmocka_run_group_tests_name("reactor.timer", tests, NULL, NULL);
}
