/*
 * reactor.stress_loop: the loop under concurrent use, for ThreadSanitizer (label
 * concurrency): producers on several threads, shutdown racing with them, timers cancelled
 * while they fire, promises completed by racing threads, metrics read while they change,
 * loops started while others stop. Sized to finish in seconds under TSan on two cores.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/loop.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Stress runs wait longer than loop_util.h's default of 10 s (they run under TSan). */
#define DEADLINE_MS 20000
#include "support/loop_util.h"

/* ---------------------------------------------------------------------------------------
 * Producers
 */

#define PRODUCERS 4
#define PER_PRODUCER 100000

typedef struct mp_s {
    eddy_loop_t *loop;
    long next[PRODUCERS]; /* the loop's thread only */
    atomic_long misordered;
    atomic_long ran;
    atomic_long refused;
    atomic_bool go;
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
    atomic_fetch_add_explicit(&mp.ran, 1, memory_order_relaxed);
}

static void *mp_producer(void *arg)
{
    uintptr_t p = (uintptr_t)arg;
    while (!atomic_load(&mp.go)) {
    }
    for (uintptr_t i = 0; i < PER_PRODUCER; i++) {
        /* Mix the three ways in: all of them keep per-producer order. */
        int rc;
        if (i % 7 == 3) {
            rc = eddy_loop_lazy_execute(mp.loop, mp_task, (void *)((p << 32) | i));
        } else {
            rc = eddy_loop_execute(mp.loop, mp_task, (void *)((p << 32) | i));
        }
        if (rc != 0) {
            atomic_fetch_add(&mp.refused, 1);
        }
    }
    return NULL;
}

static void tasks_from_four_threads(size_t queue_size)
{
    memset(&mp, 0, sizeof(mp));
    eddy_loop_options_t opts = {.task_queue_size = queue_size};
    mp.loop = start_loop(&opts);
    pthread_t th[PRODUCERS];
    for (uintptr_t p = 0; p < PRODUCERS; p++) {
        assert_int_equal(pthread_create(&th[p], NULL, mp_producer, (void *)p), 0);
    }
    atomic_store(&mp.go, true);
    for (int p = 0; p < PRODUCERS; p++) {
        pthread_join(th[p], NULL);
    }
    assert_int_equal(atomic_load(&mp.refused), 0);
    /* Lazy tasks at the tail wait for a wake-up: give one. */
    assert_int_equal(
        eddy_loop_execute(mp.loop, mp_task, (void *)((uintptr_t)0 << 32 | PER_PRODUCER)), 0);
    assert_true(wait_for(&mp.ran, PRODUCERS * PER_PRODUCER + 1, 50000));
    finish_loop(mp.loop);
    assert_int_equal(atomic_load(&mp.misordered), 0);
    assert_int_equal(mp.next[0], PER_PRODUCER + 1);
    for (int p = 1; p < PRODUCERS; p++) {
        assert_int_equal(mp.next[p], PER_PRODUCER);
    }
}

static void test_tasks_from_four_threads_run_once_in_per_producer_order(void **state)
{
    (void)state;
    tasks_from_four_threads(1024);
    tasks_from_four_threads(16);
}

/* ---------------------------------------------------------------------------------------
 * Shutdown racing with producers
 */

#define RACE_MAX 2000000

typedef struct race_s {
    eddy_loop_t *loop;
    unsigned char *ran[PRODUCERS];      /* by the loop */
    unsigned char *accepted[PRODUCERS]; /* by each producer */
    long sent[PRODUCERS];
    atomic_long twice;
    atomic_long accepted_n; /* tasks accepted so far, all producers */
    atomic_bool go;
} race_t;

static race_t race;

static void race_task(void *arg)
{
    uintptr_t v = (uintptr_t)arg;
    unsigned p = (unsigned)(v >> 32);
    long i = (long)(v & 0xffffffffu);
    if (race.ran[p][i]++ != 0) {
        atomic_fetch_add(&race.twice, 1);
    }
}

static void *race_producer(void *arg)
{
    uintptr_t p = (uintptr_t)arg;
    while (!atomic_load(&race.go)) {
    }
    long refused_in_a_row = 0;
    for (uintptr_t i = 0; i < RACE_MAX && refused_in_a_row < 100; i++) {
        int rc = (i & 1) ? eddy_loop_execute(race.loop, race_task, (void *)((p << 32) | i))
                         : eddy_loop_try_execute(race.loop, race_task, (void *)((p << 32) | i));
        if (rc == 0) {
            race.accepted[p][i] = 1;
            atomic_fetch_add_explicit(&race.accepted_n, 1, memory_order_relaxed);
            refused_in_a_row = 0;
        } else if (rc == EDDY_ESHUTDOWN) {
            refused_in_a_row++;
        } else if (rc != EDDY_EAGAIN) {
            race.accepted[p][i] = 2; /* an unexpected error: flagged below */
        }
        race.sent[p] = (long)i + 1;
    }
    return NULL;
}

static void test_every_accepted_task_runs_once_when_shutdown_races_producers(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        memset(&race, 0, sizeof(race));
        for (int p = 0; p < PRODUCERS; p++) {
            race.ran[p] = calloc(RACE_MAX, 1);
            race.accepted[p] = calloc(RACE_MAX, 1);
            assert_non_null(race.ran[p]);
            assert_non_null(race.accepted[p]);
        }
        /* 16 slots: producers overrun the room they saw before their fetch-add claim and
         * wait for it holding the claim, or give it up when the loop stops short of it. */
        eddy_loop_options_t opts = {.task_queue_size = round & 2 ? 16 : 256};
        race.loop = start_loop(&opts);
        pthread_t th[PRODUCERS];
        for (uintptr_t p = 0; p < PRODUCERS; p++) {
            assert_int_equal(pthread_create(&th[p], NULL, race_producer, (void *)p), 0);
        }
        atomic_store(&race.go, true);
        sleep_ms(20 + 10 * round);
        /* On a loaded machine the producers may not have run yet: the race needs tasks in
         * flight, so shutdown waits for the first ones to be accepted. */
        assert_true(wait_for(&race.accepted_n, 100, DEADLINE_MS));
        eddy_future_t *term = eddy_loop_shutdown_gracefully(race.loop, 0, round & 1 ? 0 : 50);
        for (int p = 0; p < PRODUCERS; p++) {
            pthread_join(th[p], NULL);
        }
        assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
        long accepted = 0, lost = 0, ghosts = 0, errors = 0;
        for (int p = 0; p < PRODUCERS; p++) {
            for (long i = 0; i < race.sent[p]; i++) {
                accepted += race.accepted[p][i] == 1;
                errors += race.accepted[p][i] == 2;
                lost += race.accepted[p][i] == 1 && race.ran[p][i] == 0;
                ghosts += race.accepted[p][i] != 1 && race.ran[p][i] != 0;
            }
        }
        assert_true(accepted > 0);
        assert_int_equal(errors, 0);
        if (lost != 0 || ghosts != 0) {
            fail_msg("round %d: %ld accepted tasks never ran, %ld refused tasks ran", round, lost,
                     ghosts);
        }
        assert_int_equal(atomic_load(&race.twice), 0);
        assert_int_equal(eddy_loop_free(race.loop), 0);
        for (int p = 0; p < PRODUCERS; p++) {
            free(race.ran[p]);
            free(race.accepted[p]);
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * Timers cancelled from other threads while they fire
 */

#define TIMER_THREADS 2
#define TIMERS_PER_THREAD 5000

typedef struct tslot_s {
    eddy_timer_t *t;
    atomic_int fired;
    int cancel_rc; /* 1: not cancelled */
} tslot_t;

typedef struct tcancel_s {
    eddy_loop_t *loop;
    tslot_t slots[TIMER_THREADS][TIMERS_PER_THREAD];
} tcancel_t;

static tcancel_t *tc;

static void tc_cb(eddy_timer_t *t, void *arg)
{
    (void)t;
    tslot_t *s = arg;
    atomic_fetch_add(&s->fired, 1);
}

static void *tc_thread(void *arg)
{
    uintptr_t k = (uintptr_t)arg;
    tslot_t *slots = tc->slots[k];
    for (long i = 0; i < TIMERS_PER_THREAD; i++) {
        slots[i].cancel_rc = 1;
        slots[i].t = eddy_loop_schedule_ns(tc->loop, (i % 20) * 500000, tc_cb, &slots[i]);
    }
    /* Cancel every other one, racing with their deadlines. */
    for (long i = 0; i < TIMERS_PER_THREAD; i += 2) {
        if (slots[i].t != NULL) {
            slots[i].cancel_rc = eddy_timer_cancel(slots[i].t);
        }
    }
    return NULL;
}

static void test_timers_cancelled_from_other_threads_fire_exactly_when_not_cancelled(void **state)
{
    (void)state;
    tc = calloc(1, sizeof(*tc));
    assert_non_null(tc);
    tc->loop = start_loop(NULL);
    pthread_t th[TIMER_THREADS];
    for (uintptr_t k = 0; k < TIMER_THREADS; k++) {
        assert_int_equal(pthread_create(&th[k], NULL, tc_thread, (void *)k), 0);
    }
    for (int k = 0; k < TIMER_THREADS; k++) {
        pthread_join(th[k], NULL);
    }
    /* Every timer is either cancelled (0: will never fire) or due within 10 ms. */
    int64_t end = eddy_now_ns() + DEADLINE_MS * MS;
    long pending;
    do {
        pending = 0;
        for (int k = 0; k < TIMER_THREADS; k++) {
            for (long i = 0; i < TIMERS_PER_THREAD; i++) {
                tslot_t *s = &tc->slots[k][i];
                pending += s->cancel_rc != 0 && atomic_load(&s->fired) == 0;
            }
        }
        if (pending > 0) {
            sleep_ms(5);
        }
    } while (pending > 0 && eddy_now_ns() < end);
    assert_int_equal(pending, 0);
    sleep_ms(50);
    finish_loop(tc->loop);
    long cancelled = 0;
    for (int k = 0; k < TIMER_THREADS; k++) {
        for (long i = 0; i < TIMERS_PER_THREAD; i++) {
            tslot_t *s = &tc->slots[k][i];
            assert_non_null(s->t);
            int fired = atomic_load(&s->fired);
            if (s->cancel_rc == 0) {
                cancelled++;
                if (fired != 0) {
                    fail_msg("timer %d/%ld cancelled with 0 but fired %d times", k, i, fired);
                }
            } else {
                assert_true(s->cancel_rc == 1 || s->cancel_rc == EDDY_EALREADY);
                if (fired != 1) {
                    fail_msg("timer %d/%ld fired %d times", k, i, fired);
                }
            }
            eddy_timer_release(s->t);
        }
    }
    (void)cancelled;
    free(tc);
}

/* ---------------------------------------------------------------------------------------
 * Promises completed by racing threads
 */

#define PROMISES 2000

typedef struct prace_s {
    eddy_loop_t *loop;
    eddy_promise_t *p[PROMISES];
    atomic_int wins[PROMISES];
    atomic_int notified[PROMISES];
    atomic_long listeners_run;
    atomic_long off_loop;
    atomic_long wrong_result;
    atomic_bool go;
} prace_t;

static prace_t *pr;

static void pr_listener(eddy_future_t *f, void *arg)
{
    long i = (long)(intptr_t)arg;
    if (!eddy_loop_in_event_loop(pr->loop)) {
        atomic_fetch_add(&pr->off_loop, 1);
    }
    intptr_t who = (intptr_t)eddy_future_result(f);
    if (eddy_future_error(f) == 0 && (who < 1 || who > 2)) {
        atomic_fetch_add(&pr->wrong_result, 1);
    }
    atomic_fetch_add(&pr->notified[i], 1);
    atomic_fetch_add(&pr->listeners_run, 1);
}

static void *pr_completer(void *arg)
{
    intptr_t who = (intptr_t)arg;
    while (!atomic_load(&pr->go)) {
    }
    for (long i = 0; i < PROMISES; i++) {
        int rc =
            who == 3 ? eddy_future_cancel(pr->p[i]) : eddy_promise_succeed(pr->p[i], (void *)who);
        if (rc == 0) {
            atomic_fetch_add(&pr->wins[i], 1);
        }
    }
    return NULL;
}

static void *pr_adder(void *arg)
{
    (void)arg;
    while (!atomic_load(&pr->go)) {
    }
    /* Listeners added while the completers race: before or after, each runs once. */
    for (long i = 0; i < PROMISES; i++) {
        eddy_future_add_listener(pr->p[i], pr_listener, (void *)(intptr_t)i);
    }
    return NULL;
}

static void test_promises_completed_by_racing_threads_complete_and_notify_once(void **state)
{
    (void)state;
    pr = calloc(1, sizeof(*pr));
    assert_non_null(pr);
    pr->loop = start_loop(NULL);
    for (long i = 0; i < PROMISES; i++) {
        pr->p[i] = eddy_promise_new(pr->loop);
        assert_non_null(pr->p[i]);
        assert_int_equal(eddy_future_add_listener(pr->p[i], pr_listener, (void *)(intptr_t)i), 0);
    }
    pthread_t th[4];
    for (intptr_t k = 0; k < 3; k++) {
        assert_int_equal(pthread_create(&th[k], NULL, pr_completer, (void *)(k + 1)), 0);
    }
    assert_int_equal(pthread_create(&th[3], NULL, pr_adder, NULL), 0);
    atomic_store(&pr->go, true);
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
    }
    assert_true(wait_for(&pr->listeners_run, 2 * PROMISES, DEADLINE_MS));
    finish_loop(pr->loop);
    assert_int_equal(atomic_load(&pr->listeners_run), 2 * PROMISES);
    assert_int_equal(atomic_load(&pr->off_loop), 0);
    assert_int_equal(atomic_load(&pr->wrong_result), 0);
    for (long i = 0; i < PROMISES; i++) {
        assert_int_equal(atomic_load(&pr->wins[i]), 1);
        assert_int_equal(atomic_load(&pr->notified[i]), 2);
        assert_true(eddy_future_is_done(pr->p[i]));
        eddy_future_release(pr->p[i]);
    }
    free(pr);
}

/*
 * A listener added on the owner loop the moment the future completes elsewhere: the listeners
 * added before completion are on their way to the loop (or about to be), and the late one
 * must not overtake them (docs/loop.md: listeners run in the order added).
 */
#define OVERTAKE_ROUNDS 1000

typedef struct overtake_s {
    eddy_promise_t *p;
    atomic_bool entered;
    atomic_int ran;
    atomic_int early_at, late_at; /* positions, 1 and 2 when in order */
    atomic_int finished;
} overtake_t;

static void ot_early(eddy_future_t *f, void *arg)
{
    (void)f;
    overtake_t *o = arg;
    atomic_store(&o->early_at, atomic_fetch_add(&o->ran, 1) + 1);
    atomic_fetch_add(&o->finished, 1);
}

static void ot_late(eddy_future_t *f, void *arg)
{
    (void)f;
    overtake_t *o = arg;
    atomic_store(&o->late_at, atomic_fetch_add(&o->ran, 1) + 1);
    atomic_fetch_add(&o->finished, 1);
}

static void ot_wait_then_listen(void *arg)
{
    overtake_t *o = arg;
    atomic_store(&o->entered, true);
    int64_t end = eddy_now_ns() + DEADLINE_MS * MS;
    while (!eddy_future_is_done(o->p) && eddy_now_ns() < end) {
    }
    eddy_future_add_listener(o->p, ot_late, o);
}

static void test_listener_added_on_the_loop_as_the_future_completes_keeps_the_order(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    long overtaken = 0;
    for (int i = 0; i < OVERTAKE_ROUNDS; i++) {
        overtake_t o = {.p = eddy_promise_new(loop)};
        atomic_init(&o.entered, false);
        atomic_init(&o.ran, 0);
        atomic_init(&o.early_at, 0);
        atomic_init(&o.late_at, 0);
        atomic_init(&o.finished, 0);
        assert_int_equal(eddy_future_add_listener(o.p, ot_early, &o), 0);
        assert_int_equal(eddy_loop_execute(loop, ot_wait_then_listen, &o), 0);
        assert_true(wait_flag(&o.entered, DEADLINE_MS));
        assert_int_equal(eddy_promise_succeed(o.p, NULL), 0);
        int64_t end = eddy_now_ns() + DEADLINE_MS * MS;
        while (atomic_load(&o.finished) < 2 && eddy_now_ns() < end) {
            sched_yield();
        }
        assert_int_equal(atomic_load(&o.finished), 2);
        if (atomic_load(&o.early_at) != 1 || atomic_load(&o.late_at) != 2) {
            overtaken++;
        }
        eddy_future_release(o.p);
    }
    finish_loop(loop);
    if (overtaken != 0) {
        fail_msg("%ld of %d late listeners ran before the listener added before completion",
                 overtaken, OVERTAKE_ROUNDS);
    }
}

/* ---------------------------------------------------------------------------------------
 * Metrics read while they change
 */

typedef struct mread_s {
    eddy_loop_t *loop;
    atomic_bool stop;
    atomic_long reads;
    atomic_long went_back;
    atomic_long too_big;
    uint64_t limit;
} mread_t;

static void *metrics_reader(void *arg)
{
    mread_t *r = arg;
    uint64_t last_tasks = 0, last_turns = 0;
    while (!atomic_load(&r->stop)) {
        eddy_loop_metrics_t m;
        eddy_loop_metrics(r->loop, &m);
        if (m.tasks_run < last_tasks || m.turns < last_turns) {
            atomic_fetch_add(&r->went_back, 1);
        }
        if (m.tasks_run > r->limit || m.task_queue_depth < 0) {
            atomic_fetch_add(&r->too_big, 1);
        }
        last_tasks = m.tasks_run;
        last_turns = m.turns;
        atomic_fetch_add(&r->reads, 1);
    }
    return NULL;
}

static atomic_long mtasks;

static void mtask(void *arg)
{
    (void)arg;
    atomic_fetch_add(&mtasks, 1);
}

static void test_metrics_read_by_another_thread_stay_consistent(void **state)
{
    (void)state;
    atomic_store(&mtasks, 0);
    mread_t r = {.limit = 20000};
    r.loop = start_loop(NULL);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, metrics_reader, &r), 0);
    /* Tasks one by one with pauses: each wakes the loop (an I/O event on the wake-up
     * descriptor), so tasks and I/O interleave while the reader looks. */
    for (long i = 0; i < 20000; i++) {
        assert_int_equal(eddy_loop_execute(r.loop, mtask, NULL), 0);
        if (i % 16 == 0) {
            usleep(50);
        }
    }
    assert_true(wait_for(&mtasks, 20000, DEADLINE_MS));
    atomic_store(&r.stop, true);
    pthread_join(th, NULL);
    finish_loop(r.loop);
    assert_true(atomic_load(&r.reads) > 0);
    if (atomic_load(&r.went_back) != 0 || atomic_load(&r.too_big) != 0) {
        fail_msg("%ld of %ld reads saw a counter go back, %ld saw tasks_run past the tasks "
                 "given",
                 atomic_load(&r.went_back), atomic_load(&r.reads), atomic_load(&r.too_big));
    }
}

/* ---------------------------------------------------------------------------------------
 * Loops started while others stop (the stall watchdog is shared by all loops)
 */

static void test_loops_started_while_another_stops_terminate_promptly(void **state)
{
    (void)state;
    for (int i = 0; i < 60; i++) {
        eddy_loop_t *a = start_loop(NULL);
        /* Let it reach its poller. */
        long before = atomic_load(&mtasks);
        assert_int_equal(eddy_loop_execute(a, mtask, NULL), 0);
        assert_true(wait_for(&mtasks, before + 1, DEADLINE_MS));
        eddy_future_t *ta = eddy_loop_shutdown_gracefully(a, 0, 1000);
        eddy_loop_t *b = start_loop(NULL);
        int rc = eddy_future_await(ta, 3000);
        eddy_future_t *tb = eddy_loop_shutdown_gracefully(b, 0, 1000);
        assert_int_equal(eddy_future_await(tb, DEADLINE_MS), 0);
        assert_int_equal(eddy_future_await(ta, DEADLINE_MS), 0);
        assert_int_equal(eddy_loop_free(a), 0);
        assert_int_equal(eddy_loop_free(b), 0);
        if (rc != 0) {
            fail_msg("iteration %d: a loop shut down while another started took over 3 s to "
                     "terminate (it terminated only once the other one stopped)",
                     i);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tasks_from_four_threads_run_once_in_per_producer_order),
        cmocka_unit_test(test_every_accepted_task_runs_once_when_shutdown_races_producers),
        cmocka_unit_test(test_timers_cancelled_from_other_threads_fire_exactly_when_not_cancelled),
        cmocka_unit_test(test_promises_completed_by_racing_threads_complete_and_notify_once),
        cmocka_unit_test(
            test_listener_added_on_the_loop_as_the_future_completes_keeps_the_order),
        cmocka_unit_test(test_metrics_read_by_another_thread_stay_consistent),
        cmocka_unit_test(test_loops_started_while_another_stops_terminate_promptly),
    };
    return cmocka_run_group_tests_name("reactor.stress_loop", tests, NULL, NULL);
}
