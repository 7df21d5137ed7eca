/*
 * reactor.future: promises complete once; listeners run on the owner loop in the order added
 * (at once when added to a completed future on that loop); await blocks with a timeout and
 * refuses to wait on its own loop. Runs once per poller.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/loop.h>
#include "reactor/internal.h" /* the reference count */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buffer/layer.h"
#include "support/abort_util.h"
#include "support/loop_util.h"

/* ---------------------------------------------------------------------------------------
 * Helpers
 */

/* Listener observations: the order they ran in, and where. */
typedef struct seen_s {
    eddy_loop_t *loop; /* where they should run; NULL: anywhere */
    pthread_t thread;  /* the thread that should run them, when loop is NULL */
    bool check_thread;
    int order[16];
    atomic_long n;
    atomic_long misplaced;
    int err[16];
    void *result[16];
} seen_t;

typedef struct tag_s {
    seen_t *seen;
    int id;
} tag_t;

static void listener(eddy_future_t *f, void *arg)
{
    tag_t *t = arg;
    seen_t *s = t->seen;
    if (s->loop != NULL && !eddy_loop_in_event_loop(s->loop)) {
        atomic_fetch_add(&s->misplaced, 1);
    }
    if (s->check_thread && !pthread_equal(pthread_self(), s->thread)) {
        atomic_fetch_add(&s->misplaced, 1);
    }
    long n = atomic_load(&s->n);
    if (n < 16) {
        s->order[n] = t->id;
        s->err[n] = eddy_future_error(f);
        s->result[n] = eddy_future_result(f);
    }
    atomic_store(&s->n, n + 1);
}

/* ---------------------------------------------------------------------------------------
 * Completion
 */

static void test_promise_completes_once_then_reports_ealready(void **state)
{
    (void)state;
    eddy_promise_t *p = eddy_promise_new(NULL);
    assert_non_null(p);
    assert_null(eddy_future_loop(p));
    assert_false(eddy_future_is_done(p));
    assert_int_equal(eddy_future_error(p), EDDY_EAGAIN);
    assert_null(eddy_future_result(p));
    int x;
    assert_int_equal(eddy_promise_succeed(p, &x), 0);
    assert_true(eddy_future_is_done(p));
    assert_int_equal(eddy_promise_succeed(p, NULL), EDDY_EALREADY);
    assert_int_equal(eddy_promise_fail(p, EDDY_EIO), EDDY_EALREADY);
    assert_int_equal(eddy_future_cancel(p), EDDY_EALREADY);
    assert_int_equal(eddy_future_error(p), 0);
    assert_ptr_equal(eddy_future_result(p), &x);
    assert_int_equal(eddy_future_await(p, 0), 0);
    eddy_future_release(p);
    eddy_future_release(NULL);
}

static void test_promise_fail_keeps_the_error_and_rejects_non_negative_codes(void **state)
{
    (void)state;
    eddy_promise_t *p = eddy_promise_new(NULL);
    assert_int_equal(eddy_promise_fail(p, 0), EDDY_EINVAL);
    assert_int_equal(eddy_promise_fail(p, 5), EDDY_EINVAL);
    assert_false(eddy_future_is_done(p));
    assert_int_equal(eddy_promise_fail(p, EDDY_ECONNRESET), 0);
    assert_int_equal(eddy_future_error(p), EDDY_ECONNRESET);
    assert_null(eddy_future_result(p));
    assert_int_equal(eddy_promise_succeed(p, p), EDDY_EALREADY);
    assert_int_equal(eddy_future_error(p), EDDY_ECONNRESET);
    eddy_future_release(p);
}

static void test_future_cancel_fails_it_with_ecanceled(void **state)
{
    (void)state;
    eddy_promise_t *p = eddy_promise_new(NULL);
    assert_int_equal(eddy_future_cancel(p), 0);
    assert_true(eddy_future_is_done(p));
    assert_int_equal(eddy_future_error(p), EDDY_ECANCELED);
    assert_int_equal(eddy_future_cancel(p), EDDY_EALREADY);
    assert_int_equal(eddy_promise_succeed(p, NULL), EDDY_EALREADY);
    eddy_future_release(p);
}

static void test_retained_future_outlives_one_release(void **state)
{
    (void)state;
    eddy_promise_t *p = eddy_promise_new(NULL);
    assert_ptr_equal(eddy_future_retain(p), p);
    eddy_future_release(p);
    assert_int_equal(eddy_promise_succeed(p, NULL), 0);
    assert_true(eddy_future_is_done(p));
    eddy_future_release(p);
}

static void retain_future_once(void *arg)
{
    eddy_future_retain(arg);
}

static void test_future_retain_at_the_maximum_count_is_refused(void **state)
{
    (void)state;
    eddy_promise_t *p = eddy_promise_new(NULL);
    assert_non_null(p);
    atomic_store(eddy__future_refcnt(p), UINT32_MAX - 1);
    assert_ptr_equal(eddy_future_retain(p), p);
    expect_abort_in_debug(retain_future_once, p, "retain of future");
    /* Refused, the retain returns NULL: the future a call could not make, failed. */
    bool fatal = eddy__refcnt_set_fatal(false);
    eddy_future_t *f = eddy_future_retain(p);
    assert_null(f);
    assert_true(eddy_future_is_done(f));
    assert_int_equal(eddy_future_error(f), EDDY_ENOMEM);
    assert_int_equal(atomic_load(eddy__future_refcnt(p)), UINT32_MAX);
    eddy__refcnt_set_fatal(fatal);
    atomic_store(eddy__future_refcnt(p), 1);
    assert_int_equal(eddy_promise_succeed(p, NULL), 0);
    eddy_future_release(p);
}

/* ---------------------------------------------------------------------------------------
 * Await
 */

static void test_await_times_out_on_an_incomplete_future(void **state)
{
    (void)state;
    eddy_promise_t *p = eddy_promise_new(NULL);
    int64_t t0 = eddy_now_ns();
    assert_int_equal(eddy_future_await(p, 100), EDDY_ETIMEDOUT);
    int64_t took = eddy_now_ns() - t0;
    assert_true(took >= 99 * MS);
    assert_true(took < 2000 * MS);
    assert_int_equal(eddy_future_await(p, 0), EDDY_ETIMEDOUT);
    assert_false(eddy_future_is_done(p));
    eddy_future_release(p);
}

typedef struct later_s {
    eddy_promise_t *p;
    int64_t delay_ms;
    int rc;
} later_t;

static void *complete_later(void *arg)
{
    later_t *l = arg;
    sleep_ms(l->delay_ms);
    l->rc = eddy_promise_succeed(l->p, l);
    return NULL;
}

static void test_await_returns_when_another_thread_completes(void **state)
{
    (void)state;
    later_t l = {.p = eddy_promise_new(NULL), .delay_ms = 50};
    pthread_t th;
    int64_t t0 = eddy_now_ns();
    assert_int_equal(pthread_create(&th, NULL, complete_later, &l), 0);
    assert_int_equal(eddy_future_await(l.p, -1), 0);
    assert_true(eddy_now_ns() - t0 >= 49 * MS);
    pthread_join(th, NULL);
    assert_int_equal(l.rc, 0);
    assert_ptr_equal(eddy_future_result(l.p), &l);
    eddy_future_release(l.p);

    l.p = eddy_promise_new(NULL);
    assert_int_equal(pthread_create(&th, NULL, complete_later, &l), 0);
    assert_int_equal(eddy_future_await(l.p, DEADLINE_MS), 0);
    pthread_join(th, NULL);
    assert_true(eddy_future_is_done(l.p));
    eddy_future_release(l.p);
}

typedef struct deadlk_s {
    eddy_promise_t *p;
    int rc_pending, rc_done;
    int64_t took;
} deadlk_t;

static void await_on_own_loop(void *arg)
{
    deadlk_t *d = arg;
    int64_t t0 = eddy_now_ns();
    d->rc_pending = eddy_future_await(d->p, 1000);
    d->took = eddy_now_ns() - t0;
    eddy_promise_succeed(d->p, NULL);
    d->rc_done = eddy_future_await(d->p, 1000);
}

static void test_await_on_the_owner_loop_returns_edeadlk(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    deadlk_t d = {.p = eddy_promise_new(loop)};
    assert_ptr_equal(eddy_future_loop(d.p), loop);
    run_sync(loop, await_on_own_loop, &d);
    assert_int_equal(d.rc_pending, EDDY_EDEADLK);
    assert_true(d.took < 500 * MS); /* nothing was waited */
    assert_int_equal(d.rc_done, 0); /* a completed future is no deadlock */
    eddy_future_release(d.p);
    finish_loop(loop);
}

/* ---------------------------------------------------------------------------------------
 * Listeners
 */

static void test_listeners_run_on_the_owner_loop_in_the_order_added(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    seen_t s = {.loop = loop};
    tag_t tags[5];
    eddy_promise_t *p = eddy_promise_new(loop);
    for (int i = 0; i < 5; i++) {
        tags[i] = (tag_t){&s, i};
        assert_int_equal(eddy_future_add_listener(p, listener, &tags[i]), 0);
    }
    sleep_ms(20);
    assert_int_equal(atomic_load(&s.n), 0);
    int x;
    assert_int_equal(eddy_promise_succeed(p, &x), 0); /* from this thread, not the loop */
    assert_true(wait_for(&s.n, 5, DEADLINE_MS));
    sleep_ms(20);
    assert_int_equal(atomic_load(&s.n), 5);
    assert_int_equal(atomic_load(&s.misplaced), 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(s.order[i], i);
        assert_int_equal(s.err[i], 0);
        assert_ptr_equal(s.result[i], &x);
    }
    eddy_future_release(p);
    finish_loop(loop);
}

typedef struct on_loop_s {
    eddy_promise_t *p;
    seen_t *s;
    tag_t tags[3];
    long n_after_add;
    long n_after_complete;
} on_loop_t;

static void complete_then_listen_on_loop(void *arg)
{
    on_loop_t *o = arg;
    eddy_future_add_listener(o->p, listener, &o->tags[0]);
    eddy_promise_fail(o->p, EDDY_EPIPE);
    o->n_after_complete = atomic_load(&o->s->n);
    eddy_future_add_listener(o->p, listener, &o->tags[1]);
    o->n_after_add = atomic_load(&o->s->n);
}

static void test_listener_added_after_completion_on_the_loop_runs_at_once(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    seen_t s = {.loop = loop};
    on_loop_t o = {.p = eddy_promise_new(loop), .s = &s};
    for (int i = 0; i < 3; i++) {
        o.tags[i] = (tag_t){&s, i};
    }
    run_sync(loop, complete_then_listen_on_loop, &o);
    assert_int_equal(o.n_after_complete, 1); /* completed on its loop: notified at once */
    assert_int_equal(o.n_after_add, 2);      /* added when done, on its loop: at once */
    assert_int_equal(s.err[0], EDDY_EPIPE);
    assert_int_equal(s.err[1], EDDY_EPIPE);

    /* Added from another thread: still runs on the loop, as a task. */
    assert_int_equal(eddy_future_add_listener(o.p, listener, &o.tags[2]), 0);
    assert_true(wait_for(&s.n, 3, DEADLINE_MS));
    assert_int_equal(s.order[2], 2);
    assert_int_equal(atomic_load(&s.misplaced), 0);
    eddy_future_release(o.p);
    finish_loop(loop);
}

/* A listener added on the loop after the future completed elsewhere, while the earlier
 * listeners are still on their way to the loop: it must not overtake them. */
typedef struct overtake_s {
    eddy_promise_t *p;
    gate_t gate;
    tag_t late;
} overtake_t;

static void gate_then_listen(void *arg)
{
    overtake_t *o = arg;
    gate_task(&o->gate);
    eddy_future_add_listener(o->p, listener, &o->late);
}

/* The three listeners of s ran on the right thread, in the order added. */
static void assert_three_in_order(seen_t *s)
{
    assert_int_equal(atomic_load(&s->misplaced), 0);
    for (int i = 0; i < 3; i++) {
        if (s->order[i] != i) {
            fail_msg("listener %d ran at position %d: listeners ran out of the order added",
                     s->order[i], i);
        }
    }
}

static void test_listener_added_on_the_loop_after_completion_keeps_the_order(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    seen_t s = {.loop = loop};
    overtake_t o = {.p = eddy_promise_new(loop)};
    atomic_init(&o.gate.entered, false);
    atomic_init(&o.gate.open, false);
    tag_t early[2] = {{&s, 0}, {&s, 1}};
    o.late = (tag_t){&s, 2};
    assert_int_equal(eddy_loop_execute(loop, gate_then_listen, &o), 0);
    assert_true(wait_flag(&o.gate.entered, DEADLINE_MS));
    assert_int_equal(eddy_future_add_listener(o.p, listener, &early[0]), 0);
    assert_int_equal(eddy_future_add_listener(o.p, listener, &early[1]), 0);
    assert_int_equal(eddy_promise_succeed(o.p, NULL), 0); /* off the loop */
    atomic_store(&o.gate.open, true);
    assert_true(wait_for(&s.n, 3, DEADLINE_MS));
    assert_three_in_order(&s);
    eddy_future_release(o.p);
    finish_loop(loop);
}

/* A listener that adds another while the completing thread still runs the earlier ones: the
 * new one runs after those added before it, not inside the one adding it. */
typedef struct nested_s {
    eddy_promise_t *p;
    tag_t tags[3];
} nested_t;

static void add_third(eddy_future_t *f, void *arg)
{
    nested_t *n = arg;
    listener(f, &n->tags[0]);
    eddy_future_add_listener(f, listener, &n->tags[2]);
}

static void complete_on_loop(void *arg)
{
    nested_t *n = arg;
    eddy_promise_succeed(n->p, NULL);
}

static void test_listener_added_by_a_listener_runs_after_the_earlier_ones(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    for (int owned = 0; owned < 2; owned++) {
        seen_t s = {.loop = owned ? loop : NULL};
        nested_t n = {.p = eddy_promise_new(owned ? loop : NULL)};
        for (int i = 0; i < 3; i++) {
            n.tags[i] = (tag_t){&s, i};
        }
        assert_int_equal(eddy_future_add_listener(n.p, add_third, &n), 0);
        assert_int_equal(eddy_future_add_listener(n.p, listener, &n.tags[1]), 0);
        if (owned) {
            run_sync(loop, complete_on_loop, &n);
        } else {
            complete_on_loop(&n);
        }
        assert_true(wait_for(&s.n, 3, DEADLINE_MS));
        assert_three_in_order(&s);
        eddy_future_release(n.p);
    }
    finish_loop(loop);
}

static void test_unowned_future_runs_listeners_on_the_completing_thread(void **state)
{
    (void)state;
    seen_t s = {.check_thread = true};
    tag_t tags[3];
    eddy_promise_t *p = eddy_promise_new(NULL);
    for (int i = 0; i < 2; i++) {
        tags[i] = (tag_t){&s, i};
        assert_int_equal(eddy_future_add_listener(p, listener, &tags[i]), 0);
    }
    later_t l = {.p = p, .delay_ms = 10};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, complete_later, &l), 0);
    s.thread = th;
    assert_int_equal(eddy_future_await(p, DEADLINE_MS), 0);
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&s.n), 2);
    assert_int_equal(atomic_load(&s.misplaced), 0);
    assert_int_equal(s.order[0], 0);
    assert_int_equal(s.order[1], 1);
    /* Added after completion: at once, on the adding thread. */
    s.thread = pthread_self();
    tags[2] = (tag_t){&s, 2};
    assert_int_equal(eddy_future_add_listener(p, listener, &tags[2]), 0);
    assert_int_equal(atomic_load(&s.n), 3);
    assert_int_equal(atomic_load(&s.misplaced), 0);
    eddy_future_release(p);
}

static void release_in_listener(eddy_future_t *f, void *arg)
{
    atomic_long *n = arg;
    eddy_future_release(f); /* the last reference: the future must survive this call */
    atomic_fetch_add(n, 1);
}

static void test_listener_may_drop_the_last_reference(void **state)
{
    (void)state;
    atomic_long n = 0;
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_future_retain(p);
    assert_int_equal(eddy_future_add_listener(p, release_in_listener, &n), 0);
    assert_int_equal(eddy_future_add_listener(p, release_in_listener, &n), 0);
    assert_int_equal(eddy_promise_succeed(p, NULL), 0);
    assert_int_equal(atomic_load(&n), 2);

    eddy_loop_t *loop = start_loop(NULL);
    p = eddy_promise_new(loop);
    assert_int_equal(eddy_future_add_listener(p, release_in_listener, &n), 0);
    assert_int_equal(eddy_promise_succeed(p, NULL), 0);
    assert_true(wait_for(&n, 3, DEADLINE_MS));
    finish_loop(loop);
}

static void test_listener_of_a_terminated_loop_still_runs_once(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    eddy_promise_t *p = eddy_promise_new(loop);
    seen_t s = {0};
    tag_t tag = {&s, 0};
    assert_int_equal(eddy_future_add_listener(p, listener, &tag), 0);
    eddy_future_t *term = eddy_loop_shutdown_gracefully(loop, 0, 5000);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    /* The owner loop is gone: the listener runs somewhere rather than never. */
    assert_int_equal(eddy_promise_succeed(p, NULL), 0);
    assert_true(wait_for(&s.n, 1, DEADLINE_MS));
    sleep_ms(20);
    assert_int_equal(atomic_load(&s.n), 1);
    eddy_future_release(p);
    assert_int_equal(eddy_loop_free(loop), 0);
}

/* loop.h: "The loop's futures and timers handed out stay valid until released", also past
 * eddy_loop_free. Awaiting, listening and completing then must not touch freed memory (ASan),
 * and the listeners still run, once each. */
static void test_future_of_a_freed_loop_stays_usable(void **state)
{
    (void)state;
    for (int started = 0; started < 2; started++) {
        eddy_loop_t *loop = started ? start_loop(NULL) : eddy_loop_new(NULL);
        assert_non_null(loop);
        eddy_promise_t *p = eddy_promise_new(loop);
        seen_t s = {0};
        tag_t tags[2] = {{&s, 0}, {&s, 1}};
        if (started) {
            eddy_future_t *term = eddy_loop_shutdown_gracefully(loop, 0, 5000);
            assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
        }
        assert_int_equal(eddy_loop_free(loop), 0);
        assert_int_equal(eddy_future_await(p, 10), EDDY_ETIMEDOUT);
        assert_int_equal(eddy_future_add_listener(p, listener, &tags[0]), 0);
        assert_int_equal(eddy_promise_succeed(p, NULL), 0);
        assert_int_equal(eddy_future_add_listener(p, listener, &tags[1]), 0);
        assert_true(wait_for(&s.n, 2, DEADLINE_MS));
        sleep_ms(20);
        assert_int_equal(atomic_load(&s.n), 2);
        assert_int_equal(s.order[0], 0);
        assert_int_equal(s.order[1], 1);
        eddy_future_release(p);
    }
}

static void test_termination_future_has_no_owner_and_fires_its_listeners(void **state)
{
    (void)state;
    eddy_loop_t *loop = start_loop(NULL);
    eddy_future_t *term = eddy_loop_termination_future(loop);
    assert_null(eddy_future_loop(term));
    seen_t s = {0};
    tag_t tag = {&s, 0};
    assert_int_equal(eddy_future_add_listener(term, listener, &tag), 0);
    assert_int_equal(eddy_future_await(term, 50), EDDY_ETIMEDOUT);
    assert_ptr_equal(eddy_loop_shutdown_gracefully(loop, 0, 5000), term);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    assert_true(wait_for(&s.n, 1, DEADLINE_MS));
    assert_int_equal(s.err[0], 0);
    assert_int_equal(eddy_loop_free(loop), 0);
}

/* NULL, the future a call could not make without memory, reads as failed with ENOMEM: a
 * caller that awaits or checks it learns so instead of crashing. */
static void never_called(eddy_future_t *f, void *arg)
{
    (void)f;
    (void)arg;
    fail_msg("a listener of the NULL future ran");
}

static void test_null_future_reads_as_failed_with_enomem(void **state)
{
    (void)state;
    assert_true(eddy_future_is_done(NULL));
    assert_int_equal(eddy_future_error(NULL), EDDY_ENOMEM);
    assert_int_equal(eddy_future_await(NULL, 1000), EDDY_ENOMEM);
    assert_int_equal(eddy_future_add_listener(NULL, never_called, NULL), EDDY_ENOMEM);
    assert_null(eddy_future_result(NULL));
    assert_null(eddy_future_loop(NULL));
    assert_null(eddy_future_retain(NULL));
    assert_int_equal(eddy_future_cancel(NULL), EDDY_EALREADY);
    eddy_future_release(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_promise_completes_once_then_reports_ealready),
        cmocka_unit_test(test_promise_fail_keeps_the_error_and_rejects_non_negative_codes),
        cmocka_unit_test(test_future_cancel_fails_it_with_ecanceled),
        cmocka_unit_test(test_retained_future_outlives_one_release),
        cmocka_unit_test(test_future_retain_at_the_maximum_count_is_refused),
        cmocka_unit_test(test_await_times_out_on_an_incomplete_future),
        cmocka_unit_test(test_await_returns_when_another_thread_completes),
        cmocka_unit_test(test_await_on_the_owner_loop_returns_edeadlk),
        cmocka_unit_test(test_listeners_run_on_the_owner_loop_in_the_order_added),
        cmocka_unit_test(test_listener_added_after_completion_on_the_loop_runs_at_once),
        cmocka_unit_test(test_listener_added_on_the_loop_after_completion_keeps_the_order),
        cmocka_unit_test(test_listener_added_by_a_listener_runs_after_the_earlier_ones),
        cmocka_unit_test(test_unowned_future_runs_listeners_on_the_completing_thread),
        cmocka_unit_test(test_listener_may_drop_the_last_reference),
        cmocka_unit_test(test_listener_of_a_terminated_loop_still_runs_once),
        cmocka_unit_test(test_future_of_a_freed_loop_stays_usable),
        cmocka_unit_test(test_termination_future_has_no_owner_and_fires_its_listeners),
        cmocka_unit_test(test_null_future_reads_as_failed_with_enomem),
    };
    return cmocka_run_group_tests_name("reactor.future", tests, NULL, NULL);
}
