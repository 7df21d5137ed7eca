/*
 * Tests for reactor/wait.c: each of the seven wait strategies returns at once when the
 * sequence is there, wakes when another thread publishes it or an upstream consumer passes
 * it, and (timeout blocking) gives up in time.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/ring.h>

#include <pthread.h>
#include <string.h>
#include <time.h>

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
        return eddy_wait_strategy_timeout_blocking(10LL * 1000 * 1000 * 1000);
    default:
        return eddy_wait_strategy_phased_backoff(10000, 100000, eddy_wait_strategy_lite_blocking());
    }
}

static const char *const names[WS_N] = {"busy_spin", "yielding", "sleeping", "blocking",
                                        "lite_blocking", "timeout_blocking", "phased_backoff"};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000}, NULL);
}

static void test_wait_strategies_have_names(void **state)
{
    for (int k = 0; k < WS_N; k++) {
        eddy_wait_strategy_t *ws = make_ws(k);
        assert_non_null(ws);
        assert_string_equal(eddy_wait_strategy_name(ws), names[k]);
        eddy_wait_strategy_free(ws);
    }
    eddy_wait_strategy_free(NULL);
}

static void test_wait_strategy_constructors_reject_bad_arguments(void **state)
{
    assert_null(eddy_wait_strategy_sleeping(-1, 0));
    assert_null(eddy_wait_strategy_timeout_blocking(0));
    assert_null(eddy_wait_strategy_phased_backoff(10, 1, NULL));
    /* The fallback is freed when the phased strategy cannot be made (ASan sees a leak if not). */
    assert_null(eddy_wait_strategy_phased_backoff(10, 1, eddy_wait_strategy_blocking()));
}

static void test_wait_returns_at_once_when_available(void **state)
{
    for (int k = 0; k < WS_N; k++) {
        eddy_wait_strategy_t *ws = make_ws(k);
        eddy_sequencer_t *s = eddy_sequencer_new_single(8, ws);
        eddy_barrier_t *b = eddy_sequencer_new_barrier(s, NULL, 0);
        eddy_sequencer_publish_range(s, 0, eddy_sequencer_next(s, 3));
        assert_int_equal(ws->ops->wait_for(ws, 1, b), 2);
        assert_int_equal(eddy_barrier_wait_for(b, 0), 2);
        eddy_barrier_free(b);
        eddy_sequencer_free(s);
        eddy_wait_strategy_free(ws);
    }
}

typedef struct {
    eddy_barrier_t *b;
    int64_t seq;
    int64_t result;
} waiter_t;

static void *wait_thread(void *arg)
{
    waiter_t *w = arg;
    do {
        w->result = eddy_barrier_wait_for(w->b, w->seq);
    } while (w->result >= -1 && w->result < w->seq);
    return NULL;
}

/* A waiter on ws wakes when a producer publishes; ws is freed. */
static void wakes_on_publish_with(eddy_wait_strategy_t *ws, bool multi)
{
    eddy_sequencer_t *s =
        multi ? eddy_sequencer_new_multi(8, ws) : eddy_sequencer_new_single(8, ws);
    waiter_t w = {.b = eddy_sequencer_new_barrier(s, NULL, 0), .seq = 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    sleep_ms(5);
    eddy_sequencer_publish(s, eddy_sequencer_next(s, 1));
    pthread_join(t, NULL);
    assert_int_equal(w.result, 0);
    eddy_barrier_free(w.b);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

static void wakes_on_publish(int k, bool multi)
{
    wakes_on_publish_with(make_ws(k), multi);
}

static void test_wait_wakes_when_a_producer_publishes(void **state)
{
    for (int k = 0; k < WS_N; k++) {
        wakes_on_publish(k, false);
        wakes_on_publish(k, true);
    }
}

static void test_wait_follows_an_upstream_consumer(void **state)
{
    for (int k = 0; k < WS_N; k++) {
        eddy_wait_strategy_t *ws = make_ws(k);
        eddy_sequencer_t *s = eddy_sequencer_new_single(8, ws);
        eddy_sequence_t up;
        eddy_sequence_init(&up, -1);
        eddy_sequence_t *deps[] = {&up};
        waiter_t w = {.b = eddy_sequencer_new_barrier(s, deps, 1), .seq = 1};
        eddy_sequencer_publish_range(s, 0, eddy_sequencer_next(s, 4));
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
        sleep_ms(5);
        eddy_sequence_set(&up, 2); /* upstream has handled 0..2 */
        pthread_join(t, NULL);
        assert_int_equal(w.result, 2);
        eddy_barrier_free(w.b);
        eddy_sequencer_free(s);
        eddy_wait_strategy_free(ws);
    }
}

static void test_wait_is_cancelled_by_an_alert(void **state)
{
    for (int k = 0; k < WS_N; k++) {
        eddy_wait_strategy_t *ws = make_ws(k);
        eddy_sequencer_t *s = eddy_sequencer_new_single(8, ws);
        waiter_t w = {.b = eddy_sequencer_new_barrier(s, NULL, 0), .seq = 0};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
        sleep_ms(5);
        eddy_barrier_alert(w.b);
        pthread_join(t, NULL);
        assert_int_equal(w.result, EDDY_ECANCELED);
        eddy_barrier_free(w.b);
        eddy_sequencer_free(s);
        eddy_wait_strategy_free(ws);
    }
}

static void test_timeout_blocking_times_out(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_timeout_blocking(20 * 1000 * 1000);
    eddy_sequencer_t *s = eddy_sequencer_new_single(8, ws);
    eddy_barrier_t *b = eddy_sequencer_new_barrier(s, NULL, 0);
    int64_t t0 = now_ns();
    assert_int_equal(eddy_barrier_wait_for(b, 0), EDDY_ETIMEDOUT);
    assert_true(now_ns() - t0 >= 20 * 1000 * 1000);
    eddy_sequencer_publish(s, eddy_sequencer_next(s, 1));
    assert_int_equal(eddy_barrier_wait_for(b, 0), 0);
    eddy_barrier_free(b);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

/* A timeout too long to add to the clock (INT64_MAX: "practically never") does not expire
 * at once: the wait still ends with the publish. */
static void test_timeout_blocking_with_a_huge_timeout_waits(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_timeout_blocking(INT64_MAX);
    assert_non_null(ws);
    wakes_on_publish_with(ws, false);
}

static void test_phased_backoff_falls_back_to_timeout(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_phased_backoff(
        1000, 1000 * 1000, eddy_wait_strategy_timeout_blocking(10 * 1000 * 1000));
    assert_non_null(ws);
    eddy_sequencer_t *s = eddy_sequencer_new_single(8, ws);
    eddy_barrier_t *b = eddy_sequencer_new_barrier(s, NULL, 0);
    assert_int_equal(eddy_barrier_wait_for(b, 0), EDDY_ETIMEDOUT);
    eddy_barrier_free(b);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_strategies_have_names),
        cmocka_unit_test(test_wait_strategy_constructors_reject_bad_arguments),
        cmocka_unit_test(test_wait_returns_at_once_when_available),
        cmocka_unit_test(test_wait_wakes_when_a_producer_publishes),
        cmocka_unit_test(test_wait_follows_an_upstream_consumer),
        cmocka_unit_test(test_wait_is_cancelled_by_an_alert),
        cmocka_unit_test(test_timeout_blocking_times_out),
        cmocka_unit_test(test_timeout_blocking_with_a_huge_timeout_waits),
        cmocka_unit_test(test_phased_backoff_falls_back_to_timeout),
    };
    return cmocka_run_group_tests_name("reactor.wait", tests, NULL, NULL);
}
