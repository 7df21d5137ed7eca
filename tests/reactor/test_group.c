/*
 * reactor.group: loop groups choose their loops round robin (from any number of threads at
 * once), run tasks on the next loop, tell each loop its index, run them on threads of their
 * own, shut down together and are freed only after they terminated. Runs once per poller.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/loop.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/loop_util.h"

static void finish_group(eddy_loop_group_t *g)
{
    eddy_future_t *term = eddy_loop_group_shutdown_gracefully(g, 0, 5000);
    assert_non_null(term);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

typedef struct where_s {
    eddy_loop_t *expected;
    pthread_t thread;
    eddy_loop_t *current;
    size_t index; /* the current loop's, and its data */
    void *data;
    char name[16];
    atomic_long done;
} where_t;

static void note_where(void *arg)
{
    where_t *w = arg;
    w->thread = pthread_self();
    w->current = eddy_loop_current();
    w->index = eddy_loop_index(w->current);
    w->data = eddy_loop_data(w->current);
    pthread_getname_np(pthread_self(), w->name, sizeof(w->name));
    atomic_store(&w->done, 1);
}

static void test_group_next_alternates_between_its_two_loops(void **state)
{
    (void)state;
    eddy_loop_group_t *g = eddy_loop_group_new(2, NULL);
    assert_non_null(g);
    assert_int_equal(eddy_loop_group_size(g), 2);
    eddy_loop_t *a = eddy_loop_group_loop(g, 0);
    eddy_loop_t *b = eddy_loop_group_loop(g, 1);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_null(eddy_loop_group_loop(g, 2));
    eddy_loop_t *first = eddy_loop_group_next(g);
    eddy_loop_t *second = eddy_loop_group_next(g);
    assert_true((first == a && second == b) || (first == b && second == a));
    for (int i = 0; i < 10; i++) {
        assert_ptr_equal(eddy_loop_group_next(g), i % 2 == 0 ? first : second);
    }
    finish_group(g);
}

static void test_group_of_three_goes_round_robin(void **state)
{
    (void)state;
    eddy_loop_group_t *g = eddy_loop_group_new(3, NULL);
    assert_non_null(g);
    eddy_loop_t *seq[6];
    for (int i = 0; i < 6; i++) {
        seq[i] = eddy_loop_group_next(g);
    }
    assert_ptr_not_equal(seq[0], seq[1]);
    assert_ptr_not_equal(seq[1], seq[2]);
    assert_ptr_not_equal(seq[0], seq[2]);
    for (int i = 0; i < 3; i++) {
        assert_ptr_equal(seq[i], seq[i + 3]);
    }
    finish_group(g);
}

static void test_group_runs_tasks_on_different_threads(void **state)
{
    (void)state;
    eddy_loop_options_t opts = {.name = "grp"};
    eddy_loop_group_t *g = eddy_loop_group_new(2, &opts);
    assert_non_null(g);
    where_t w[2];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < 2; i++) {
        w[i].expected = eddy_loop_group_loop(g, (size_t)i);
        assert_int_equal(eddy_loop_execute(w[i].expected, note_where, &w[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        assert_true(wait_for(&w[i].done, 1, DEADLINE_MS));
        assert_ptr_equal(w[i].current, w[i].expected);
        assert_false(pthread_equal(w[i].thread, pthread_self()));
    }
    assert_false(pthread_equal(w[0].thread, w[1].thread));
    assert_string_equal(w[0].name, "grp-0");
    assert_string_equal(w[1].name, "grp-1");
    finish_group(g);
}

static void test_group_free_is_busy_until_shutdown_completes(void **state)
{
    (void)state;
    eddy_loop_group_t *g = eddy_loop_group_new(2, NULL);
    assert_non_null(g);
    eddy_future_t *term = eddy_loop_group_termination_future(g);
    assert_non_null(term);
    assert_false(eddy_future_is_done(term));
    assert_int_equal(eddy_loop_group_free(g), EDDY_EBUSY);
    assert_ptr_equal(eddy_loop_group_shutdown_gracefully(g, 0, 5000), term);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(term), 0);
    for (size_t i = 0; i < 2; i++) {
        eddy_loop_t *loop = eddy_loop_group_loop(g, i);
        assert_true(eddy_loop_is_terminated(loop));
        assert_true(eddy_future_is_done(eddy_loop_termination_future(loop)));
        assert_int_equal(eddy_loop_execute(loop, note_where, NULL), EDDY_ESHUTDOWN);
    }
    assert_int_equal(eddy_loop_group_free(g), 0);
}

static void test_group_terminates_only_when_every_loop_has(void **state)
{
    (void)state;
    eddy_loop_group_t *g = eddy_loop_group_new(2, NULL);
    assert_non_null(g);
    eddy_loop_t *a = eddy_loop_group_loop(g, 0);
    eddy_future_t *ta = eddy_loop_shutdown_gracefully(a, 0, 5000);
    assert_int_equal(eddy_future_await(ta, DEADLINE_MS), 0);
    sleep_ms(20);
    assert_false(eddy_future_is_done(eddy_loop_group_termination_future(g)));
    assert_int_equal(eddy_loop_group_free(g), EDDY_EBUSY);
    finish_group(g);
}

static atomic_long counted;

static void count_task(void *arg)
{
    (void)arg;
    atomic_fetch_add(&counted, 1);
}

static void test_group_metrics_sum_their_loops(void **state)
{
    (void)state;
    atomic_store(&counted, 0);
    eddy_loop_group_t *g = eddy_loop_group_new(2, NULL);
    assert_non_null(g);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(eddy_loop_execute(eddy_loop_group_next(g), count_task, NULL), 0);
    }
    assert_true(wait_for(&counted, 100, DEADLINE_MS));
    eddy_future_t *term = eddy_loop_group_shutdown_gracefully(g, 0, 5000);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    eddy_loop_metrics_t m, a, b;
    eddy_loop_group_metrics(g, &m);
    eddy_loop_metrics(eddy_loop_group_loop(g, 0), &a);
    eddy_loop_metrics(eddy_loop_group_loop(g, 1), &b);
    assert_int_equal(a.tasks_run, 50);
    assert_int_equal(b.tasks_run, 50);
    assert_int_equal(m.tasks_run, 100);
    assert_int_equal(m.turns, a.turns + b.turns);
    assert_int_equal(m.task_queue_depth, 0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

static void test_group_new_with_bad_options_returns_null(void **state)
{
    (void)state;
    eddy_loop_options_t opts = {.io_ratio = 101};
    assert_null(eddy_loop_group_new(2, &opts));
    opts = (eddy_loop_options_t){.poller = "nope"};
    assert_null(eddy_loop_group_new(2, &opts));
}

static void test_group_of_zero_has_a_loop_per_cpu(void **state)
{
    (void)state;
    eddy_loop_group_t *g = eddy_loop_group_new(0, NULL);
    assert_non_null(g);
    assert_true(eddy_loop_group_size(g) >= 1);
    finish_group(g);
}

/* A loop whose thread cannot start: the group gives up, shuts down the loops it made and
 * returns NULL, rather than wait for a termination that can never be counted. The default
 * thread stack is made too large to map, so the first loop's pthread_create fails. */
typedef struct failing_new_s {
    eddy_loop_group_t *g;
    atomic_bool done;
} failing_new_t;

static void *no_op_thread(void *arg)
{
    return arg;
}

static void *group_new_thread(void *arg)
{
    failing_new_t *f = arg;
    f->g = eddy_loop_group_new(2, NULL);
    atomic_store(&f->done, true);
    return NULL;
}

static void test_group_new_fails_cleanly_when_a_loop_cannot_start(void **state)
{
    (void)state;
    failing_new_t f = {0};
    atomic_init(&f.done, false);
    pthread_attr_t mine, old, huge;
    assert_int_equal(pthread_getattr_default_np(&old), 0);
    size_t stack;
    assert_int_equal(pthread_attr_getstacksize(&old, &stack), 0);
    pthread_attr_init(&mine);
    pthread_attr_setstacksize(&mine, stack > 0 ? stack : (size_t)8 << 20);
    pthread_attr_init(&huge);
    assert_int_equal(pthread_attr_setstacksize(&huge, (size_t)1 << 46), 0);
    assert_int_equal(pthread_setattr_default_np(&huge), 0);
    pthread_t th;
    if (pthread_create(&th, NULL, no_op_thread, NULL) == 0) {
        /* This system maps such a stack after all: nothing fails to start here. */
        pthread_join(th, NULL);
        assert_int_equal(pthread_setattr_default_np(&old), 0);
        pthread_attr_destroy(&huge);
        pthread_attr_destroy(&mine);
        pthread_attr_destroy(&old);
        skip();
    }
    assert_int_equal(pthread_create(&th, &mine, group_new_thread, &f), 0);
    bool returned = wait_flag(&f.done, 3000);
    assert_int_equal(pthread_setattr_default_np(&old), 0);
    pthread_attr_destroy(&huge);
    pthread_attr_destroy(&mine);
    pthread_attr_destroy(&old);
    if (!returned) {
        fail_msg("eddy_loop_group_new() hangs when a loop's thread cannot start");
    }
    pthread_join(th, NULL);
    assert_null(f.g);
}

static void test_group_loops_know_their_index_and_data(void **state)
{
    (void)state;
    eddy_loop_group_t *g = eddy_loop_group_new(3, NULL);
    assert_non_null(g);
    int slots[3];
    for (size_t i = 0; i < 3; i++) {
        eddy_loop_t *loop = eddy_loop_group_loop(g, i);
        assert_int_equal(eddy_loop_index(loop), i);
        assert_null(eddy_loop_data(loop));
        eddy_loop_set_data(loop, &slots[i]); /* from the test's thread, the loop running */
    }
    /* On its thread a loop finds its own slot without searching the group. */
    where_t seen[3];
    memset(seen, 0, sizeof(seen));
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(eddy_loop_execute(eddy_loop_group_loop(g, i), note_where, &seen[i]), 0);
    }
    for (size_t i = 0; i < 3; i++) {
        assert_true(wait_for(&seen[i].done, 1, DEADLINE_MS));
        assert_ptr_equal(seen[i].current, eddy_loop_group_loop(g, i));
        assert_int_equal(seen[i].index, i);
        assert_ptr_equal(seen[i].data, &slots[i]);
    }
    finish_group(g);
}

static void test_group_execute_runs_on_each_loop_in_turn(void **state)
{
    (void)state;
    eddy_loop_group_t *g = eddy_loop_group_new(3, NULL);
    assert_non_null(g);
    /* Six tasks, round robin from where next() stands: each loop runs two, every third. */
    where_t seen[6];
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < 6; i++) {
        assert_int_equal(eddy_loop_group_execute(g, note_where, &seen[i]), 0);
    }
    bool ran_on[3] = {false, false, false};
    for (int i = 0; i < 6; i++) {
        assert_true(wait_for(&seen[i].done, 1, DEADLINE_MS));
        assert_ptr_equal(seen[i].current, eddy_loop_group_loop(g, seen[i].index));
        ran_on[seen[i].index] = true;
        if (i >= 3) {
            assert_ptr_equal(seen[i].current, seen[i - 3].current);
        }
    }
    assert_true(ran_on[0] && ran_on[1] && ran_on[2]);
    /* Shut down: refused, as by the loop itself. */
    eddy_future_t *term = eddy_loop_group_shutdown_gracefully(g, 0, 5000);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    where_t late;
    memset(&late, 0, sizeof(late));
    assert_int_equal(eddy_loop_group_execute(g, note_where, &late), EDDY_ESHUTDOWN);
    assert_int_equal(eddy_loop_group_free(g), 0);
    assert_int_equal(atomic_load(&late.done), 0);
}

/* Threads calling next() at once share its turns exactly (loop.h: any thread). */
#define NEXT_THREADS 4
#define NEXT_CALLS 30000

typedef struct next_caller_s {
    eddy_loop_group_t *g;
    size_t picks[3];
} next_caller_t;

static void *call_next(void *arg)
{
    next_caller_t *c = arg;
    for (int i = 0; i < NEXT_CALLS; i++) {
        c->picks[eddy_loop_index(eddy_loop_group_next(c->g))]++;
    }
    return NULL;
}

static void test_group_next_is_shared_fairly_by_threads_at_once(void **state)
{
    (void)state;
    eddy_loop_group_t *g = eddy_loop_group_new(3, NULL);
    assert_non_null(g);
    next_caller_t callers[NEXT_THREADS];
    pthread_t th[NEXT_THREADS];
    memset(callers, 0, sizeof(callers));
    for (int t = 0; t < NEXT_THREADS; t++) {
        callers[t].g = g;
        assert_int_equal(pthread_create(&th[t], NULL, call_next, &callers[t]), 0);
    }
    size_t total[3] = {0, 0, 0};
    for (int t = 0; t < NEXT_THREADS; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        for (int i = 0; i < 3; i++) {
            total[i] += callers[t].picks[i];
        }
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(total[i], NEXT_THREADS * NEXT_CALLS / 3);
    }
    finish_group(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_next_alternates_between_its_two_loops),
        cmocka_unit_test(test_group_of_three_goes_round_robin),
        cmocka_unit_test(test_group_loops_know_their_index_and_data),
        cmocka_unit_test(test_group_execute_runs_on_each_loop_in_turn),
        cmocka_unit_test(test_group_next_is_shared_fairly_by_threads_at_once),
        cmocka_unit_test(test_group_runs_tasks_on_different_threads),
        cmocka_unit_test(test_group_free_is_busy_until_shutdown_completes),
        cmocka_unit_test(test_group_terminates_only_when_every_loop_has),
        cmocka_unit_test(test_group_metrics_sum_their_loops),
        cmocka_unit_test(test_group_new_with_bad_options_returns_null),
        cmocka_unit_test(test_group_of_zero_has_a_loop_per_cpu),
        cmocka_unit_test(test_group_new_fails_cleanly_when_a_loop_cannot_start),
    };
    return cmocka_run_group_tests_name("reactor.group", tests, NULL, NULL);
}
