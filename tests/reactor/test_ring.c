/*
 * Tests for reactor/ring.c: the ring's slots, the single- and multi-producer sequencers
 * (claims, try_next on a full ring, laps of the availability buffer, gating at run time) and
 * the sequence barrier (batching, dependencies, alerts).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/ring.h>

#include "reactor/internal.h" /* the fetch-add claim of the loop's task queue */

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

typedef struct {
    size_t calls;
    size_t next_index;
    bool zeroed;
} init_state_t;

static void init_slot(void *slot, size_t index, void *arg)
{
    init_state_t *st = arg;
    const unsigned char *p = slot;
    for (size_t i = 0; i < 24; i++)
        st->zeroed = st->zeroed && p[i] == 0;
    assert_int_equal(index, st->next_index);
    st->next_index++;
    st->calls++;
    memcpy(slot, &index, sizeof index);
}

static void test_ring_new_rejects_bad_sizes(void **state)
{
    assert_null(eddy_ring_new(0, 8, NULL, NULL));
    assert_null(eddy_ring_new(3, 8, NULL, NULL));
    assert_null(eddy_ring_new(6, 8, NULL, NULL));
    assert_null(eddy_ring_new(8, 0, NULL, NULL));
    eddy_ring_t *r = eddy_ring_new(1, 1, NULL, NULL);
    assert_non_null(r);
    eddy_ring_free(r);
    eddy_ring_free(NULL);
}

static void test_ring_init_fills_each_slot_once(void **state)
{
    init_state_t st = {.zeroed = true};
    eddy_ring_t *r = eddy_ring_new(16, 24, init_slot, &st);
    assert_non_null(r);
    assert_int_equal(st.calls, 16);
    assert_true(st.zeroed);
    assert_int_equal(eddy_ring_size(r), 16);
    for (size_t i = 0; i < 16; i++) {
        size_t v;
        memcpy(&v, eddy_ring_get(r, (int64_t)i), sizeof v);
        assert_int_equal(v, i);
    }
    eddy_ring_free(r);
}

static void test_ring_get_wraps_and_aligns(void **state)
{
    eddy_ring_t *r = eddy_ring_new(8, 5, NULL, NULL);
    assert_non_null(r);
    for (int64_t s = 0; s < 8; s++) {
        assert_ptr_equal(eddy_ring_get(r, s), eddy_ring_get(r, s + 8));
        assert_ptr_equal(eddy_ring_get(r, s), eddy_ring_get(r, s + 8 * 1000));
        assert_int_equal((uintptr_t)eddy_ring_get(r, s) % 16, 0);
        if (s > 0)
            assert_ptr_not_equal(eddy_ring_get(r, s), eddy_ring_get(r, s - 1));
    }
    eddy_ring_free(r);
}

static void test_sequencer_new_rejects_bad_arguments(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_busy_spin();
    assert_null(eddy_sequencer_new_single(12, ws));
    assert_null(eddy_sequencer_new_multi(0, ws));
    assert_null(eddy_sequencer_new_single(8, NULL));
    eddy_wait_strategy_free(ws);
}

static void test_single_producer_claims_in_order(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_busy_spin();
    eddy_sequencer_t *s = eddy_sequencer_new_single(8, ws);
    assert_non_null(s);
    assert_int_equal(eddy_sequence_get(eddy_sequencer_cursor(s)), -1);
    assert_int_equal(eddy_sequencer_next(s, 1), 0);
    assert_false(eddy_sequencer_is_available(s, 0));
    eddy_sequencer_publish(s, 0);
    assert_true(eddy_sequencer_is_available(s, 0));
    assert_int_equal(eddy_sequence_get(eddy_sequencer_cursor(s)), 0);
    assert_int_equal(eddy_sequencer_next(s, 3), 3);
    eddy_sequencer_publish_range(s, 1, 3);
    assert_int_equal(eddy_sequence_get(eddy_sequencer_cursor(s)), 3);
    assert_int_equal(eddy_sequencer_next(s, 0), EDDY_EINVAL);
    assert_int_equal(eddy_sequencer_next(s, 9), EDDY_EINVAL);
    assert_int_equal(eddy_sequencer_try_next(s, -1), EDDY_EINVAL);
    assert_int_equal(eddy_sequencer_size(s), 8);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

/* try_next on a full ring fails without claiming, for both kinds of sequencer. */
static void try_next_on_full_ring(bool multi)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_busy_spin();
    eddy_sequencer_t *s =
        multi ? eddy_sequencer_new_multi(4, ws) : eddy_sequencer_new_single(4, ws);
    eddy_sequence_t consumer;
    eddy_sequence_init(&consumer, 0);
    eddy_sequence_t *g[] = {&consumer};
    assert_int_equal(eddy_sequencer_add_gating(s, g, 1), 0);
    assert_int_equal(eddy_sequence_get(&consumer), -1); /* set to the cursor */
    assert_int_equal(eddy_sequencer_remaining_capacity(s), 4);
    assert_int_equal(eddy_sequencer_try_next(s, 3), 2);
    assert_int_equal(eddy_sequencer_remaining_capacity(s), 1);
    assert_int_equal(eddy_sequencer_try_next(s, 2), EDDY_EAGAIN);
    assert_true(eddy_sequencer_has_capacity(s, 1));
    assert_int_equal(eddy_sequencer_try_next(s, 1), 3);
    eddy_sequencer_publish_range(s, 0, 3);
    assert_int_equal(eddy_sequencer_remaining_capacity(s), 0);
    assert_false(eddy_sequencer_has_capacity(s, 1));
    assert_int_equal(eddy_sequencer_try_next(s, 1), EDDY_EAGAIN);
    assert_int_equal(eddy_sequence_get(eddy_sequencer_cursor(s)), 3); /* nothing claimed */
    eddy_sequence_set(&consumer, 1); /* the consumer read 0 and 1 */
    assert_int_equal(eddy_sequencer_remaining_capacity(s), 2);
    assert_int_equal(eddy_sequencer_try_next(s, 2), 5);
    assert_int_equal(eddy_sequencer_try_next(s, 1), EDDY_EAGAIN);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

static void test_single_producer_try_next_fails_on_full_ring(void **state)
{
    try_next_on_full_ring(false);
}

static void test_multi_producer_try_next_fails_on_full_ring(void **state)
{
    try_next_on_full_ring(true);
}

static void test_multi_producer_consumers_see_only_contiguous_slots(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_busy_spin();
    eddy_sequencer_t *s = eddy_sequencer_new_multi(8, ws);
    eddy_barrier_t *b = eddy_sequencer_new_barrier(s, NULL, 0);
    assert_int_equal(eddy_sequencer_next(s, 1), 0);
    assert_int_equal(eddy_sequencer_next(s, 1), 1);
    assert_int_equal(eddy_sequencer_next(s, 1), 2);
    eddy_sequencer_publish(s, 2);
    eddy_sequencer_publish(s, 0);
    /* 1 is claimed but not published: the consumer gets 0 only, and a strategy waiting for 1
     * is told it is not ready although the cursor has passed it. */
    assert_int_equal(eddy_barrier_wait_for(b, 0), 0);
    assert_int_equal(eddy_barrier_peek(b, 1), 0);
    assert_int_equal(eddy_barrier_dependent(b), 2);
    assert_int_equal(eddy_barrier_probe(b, 1), 0);
    assert_int_equal(eddy_barrier_probe(b, 0), 2);
    eddy_sequencer_publish(s, 1);
    assert_int_equal(eddy_barrier_wait_for(b, 1), 2);
    /* A sequence the barrier already found comes from its cache. */
    assert_int_equal(eddy_barrier_wait_for(b, 2), 2);
    eddy_barrier_free(b);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

/*
 * The loop's task queue claims with one fetch-add while the cached view of the consumer
 * shows room to spare, and compare-and-swap (try_next) near a full ring: the fast claim is
 * refused there, and a claim that raced past the room finds out with mp_room().
 */
static void test_fetch_add_claims_keep_slack_from_a_full_ring(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_yielding();
    eddy_sequencer_t *s = eddy_sequencer_new_multi(16, ws); /* slack 2 */
    eddy_sequence_t consumer;
    eddy_sequence_init(&consumer, -1);
    eddy_sequence_t *g[] = {&consumer};
    eddy_sequencer_add_gating(s, g, 1);
    /* Room for 16; the fast claim stops 2 short of it. */
    for (int64_t i = 0; i < 14; i++) {
        int64_t seq = eddy__sequencer_mp_claim(s);
        assert_int_equal(seq, i);
        assert_true(eddy__sequencer_mp_room(s, seq));
        eddy_sequencer_publish(s, seq);
    }
    assert_int_equal(eddy__sequencer_mp_claim(s), EDDY_EAGAIN);
    /* Compare-and-swap claims take the last two, then find the ring full. */
    assert_int_equal(eddy_sequencer_try_next(s, 1), 14);
    assert_int_equal(eddy_sequencer_try_next(s, 1), 15);
    assert_int_equal(eddy_sequencer_try_next(s, 1), EDDY_EAGAIN);
    assert_int_equal(eddy__sequencer_mp_claim(s), EDDY_EAGAIN);
    /* A claim that raced past the room (as if other producers took the slack between its
     * look and its fetch-add) is told there is none until the consumer moves. */
    int64_t raced = eddy_sequence_add_and_get(&s->cursor, 1);
    assert_int_equal(raced, 16);
    assert_false(eddy__sequencer_mp_room(s, raced));
    eddy_sequence_set(&consumer, 0);
    assert_true(eddy__sequencer_mp_room(s, raced));
    eddy_sequencer_publish(s, raced);
    /* The consumer catches up: fast claims again, a lap later. */
    eddy_sequence_set(&consumer, 16);
    assert_true(eddy_sequencer_has_capacity(s, 14));
    int64_t seq = eddy__sequencer_mp_claim(s);
    assert_int_equal(seq, 17);
    assert_true(eddy__sequencer_mp_room(s, seq));
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

static void test_multi_producer_laps_are_told_apart(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_busy_spin();
    eddy_sequencer_t *s = eddy_sequencer_new_multi(4, ws);
    eddy_sequence_t consumer;
    eddy_sequence_init(&consumer, -1);
    eddy_sequence_t *g[] = {&consumer};
    eddy_sequencer_add_gating(s, g, 1);
    eddy_barrier_t *b = eddy_sequencer_new_barrier(s, NULL, 0);
    for (int64_t i = 0; i < 1000; i++) {
        int64_t seq = eddy_sequencer_next(s, 1);
        assert_int_equal(seq, i);
        assert_false(eddy_sequencer_is_available(s, seq));
        if (seq >= 4)
            assert_true(eddy_sequencer_is_available(s, seq - 4)); /* the last lap's, until now */
        eddy_sequencer_publish(s, seq);
        assert_true(eddy_sequencer_is_available(s, seq));
        if (seq >= 4)
            assert_false(eddy_sequencer_is_available(s, seq - 4));
        assert_false(eddy_sequencer_is_available(s, seq + 4));
        assert_int_equal(eddy_barrier_wait_for(b, seq), seq);
        eddy_sequence_set(&consumer, seq);
    }
    eddy_barrier_free(b);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

static void test_gating_sequences_added_and_removed(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_busy_spin();
    eddy_sequencer_t *s = eddy_sequencer_new_single(8, ws);
    assert_int_equal(eddy_sequencer_next(s, 5), 4);
    eddy_sequencer_publish_range(s, 0, 4);
    /* Without gating sequences the producer is never held back. */
    assert_int_equal(eddy_sequencer_min_gating(s), 4);
    eddy_sequence_t a, b;
    eddy_sequence_init(&a, 0);
    eddy_sequence_init(&b, 0);
    eddy_sequence_t *ab[] = {&a, &b};
    assert_int_equal(eddy_sequencer_add_gating(s, ab, 2), 0);
    assert_int_equal(eddy_sequence_get(&a), 4); /* starts at the cursor */
    eddy_sequence_set(&a, 4);
    eddy_sequence_set(&b, 4);
    assert_int_equal(eddy_sequencer_next(s, 8), 12);
    eddy_sequencer_publish_range(s, 5, 12);
    assert_int_equal(eddy_sequencer_try_next(s, 1), EDDY_EAGAIN);
    eddy_sequence_set(&a, 12);
    assert_int_equal(eddy_sequencer_try_next(s, 1), EDDY_EAGAIN); /* b holds it */
    assert_int_equal(eddy_sequencer_remove_gating(s, &b), 0);
    assert_int_equal(eddy_sequencer_remove_gating(s, &b), EDDY_ENOENT);
    assert_int_equal(eddy_sequencer_try_next(s, 1), 13);
    assert_int_equal(eddy_sequencer_min_gating(s), 12);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

/*
 * A gating sequence may be freed as soon as eddy_sequencer_remove_gating() returns, while a
 * producer reads the gating sequences (here through eddy_sequencer_min_gating()). Many other
 * sequences before it widen the window in which a producer holds the old snapshot; ASan and
 * TSan report a read of the freed sequence.
 */
typedef struct {
    eddy_sequencer_t *s;
    _Atomic bool stop;
} gating_reader_t;

static void *read_gating(void *arg)
{
    gating_reader_t *r = arg;
    while (!atomic_load(&r->stop))
        eddy_sequencer_min_gating(r->s);
    return NULL;
}

static void test_removed_gating_sequence_can_be_freed_at_once(void **state)
{
    enum { OTHERS = 256 };
    eddy_wait_strategy_t *ws = eddy_wait_strategy_busy_spin();
    eddy_sequencer_t *s = eddy_sequencer_new_multi(8, ws);
    eddy_sequence_t *others[OTHERS];
    for (int i = 0; i < OTHERS; i++)
        others[i] = eddy_sequence_new(-1);
    assert_int_equal(eddy_sequencer_add_gating(s, others, OTHERS), 0);
    gating_reader_t r = {.s = s};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, read_gating, &r), 0);
    for (int i = 0; i < 2000; i++) {
        eddy_sequence_t *seq = eddy_sequence_new(-1);
        assert_int_equal(eddy_sequencer_add_gating(s, &seq, 1), 0);
        assert_int_equal(eddy_sequencer_remove_gating(s, seq), 0);
        eddy_sequence_free(seq);
    }
    atomic_store(&r.stop, true);
    pthread_join(t, NULL);
    for (int i = 0; i < OTHERS; i++) {
        assert_int_equal(eddy_sequencer_remove_gating(s, others[i]), 0);
        eddy_sequence_free(others[i]);
    }
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

static void test_barrier_returns_highest_available(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_busy_spin();
    eddy_sequencer_t *s = eddy_sequencer_new_single(16, ws);
    eddy_barrier_t *b = eddy_sequencer_new_barrier(s, NULL, 0);
    eddy_sequencer_publish_range(s, 0, eddy_sequencer_next(s, 10));
    assert_int_equal(eddy_barrier_wait_for(b, 0), 9); /* a batch of ten */
    assert_int_equal(eddy_barrier_peek(b, 10), 9);
    eddy_barrier_free(b);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

static void test_barrier_follows_dependencies(void **state)
{
    eddy_wait_strategy_t *ws = eddy_wait_strategy_busy_spin();
    eddy_sequencer_t *s = eddy_sequencer_new_single(16, ws);
    eddy_sequence_t up1, up2;
    eddy_sequence_init(&up1, 3);
    eddy_sequence_init(&up2, 6);
    eddy_sequence_t *deps[] = {&up1, &up2};
    eddy_barrier_t *b = eddy_sequencer_new_barrier(s, deps, 2);
    eddy_sequencer_publish_range(s, 0, eddy_sequencer_next(s, 10));
    assert_int_equal(eddy_barrier_cursor(b), 9);
    assert_int_equal(eddy_barrier_dependent(b), 3);
    assert_int_equal(eddy_barrier_wait_for(b, 2), 3);
    assert_int_equal(eddy_barrier_peek(b, 4), 3);
    eddy_sequence_set(&up1, 8);
    assert_int_equal(eddy_barrier_wait_for(b, 4), 6);
    eddy_barrier_free(b);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

typedef struct {
    eddy_barrier_t *b;
    int64_t result;
} waiter_t;

static void *wait_thread(void *arg)
{
    waiter_t *w = arg;
    w->result = eddy_barrier_wait_for(w->b, 0);
    return NULL;
}

static void alert_during_wait(eddy_wait_strategy_t *ws)
{
    eddy_sequencer_t *s = eddy_sequencer_new_single(8, ws);
    waiter_t w = {.b = eddy_sequencer_new_barrier(s, NULL, 0)};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL); /* let it wait */
    assert_false(eddy_barrier_is_alerted(w.b));
    eddy_barrier_alert(w.b);
    pthread_join(t, NULL);
    assert_int_equal(w.result, EDDY_ECANCELED);
    assert_true(eddy_barrier_is_alerted(w.b));
    assert_int_equal(eddy_barrier_wait_for(w.b, 0), EDDY_ECANCELED);
    eddy_barrier_clear_alert(w.b);
    eddy_sequencer_publish(s, eddy_sequencer_next(s, 1));
    assert_int_equal(eddy_barrier_wait_for(w.b, 0), 0);
    eddy_barrier_free(w.b);
    eddy_sequencer_free(s);
    eddy_wait_strategy_free(ws);
}

static void test_barrier_alert_wakes_a_spinning_wait(void **state)
{
    alert_during_wait(eddy_wait_strategy_busy_spin());
}

static void test_barrier_alert_wakes_a_blocked_wait(void **state)
{
    alert_during_wait(eddy_wait_strategy_blocking());
}

static void test_barrier_alert_wakes_a_lite_blocked_wait(void **state)
{
    alert_during_wait(eddy_wait_strategy_lite_blocking());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_new_rejects_bad_sizes),
        cmocka_unit_test(test_ring_init_fills_each_slot_once),
        cmocka_unit_test(test_ring_get_wraps_and_aligns),
        cmocka_unit_test(test_sequencer_new_rejects_bad_arguments),
        cmocka_unit_test(test_single_producer_claims_in_order),
        cmocka_unit_test(test_single_producer_try_next_fails_on_full_ring),
        cmocka_unit_test(test_multi_producer_try_next_fails_on_full_ring),
        cmocka_unit_test(test_multi_producer_consumers_see_only_contiguous_slots),
        cmocka_unit_test(test_multi_producer_laps_are_told_apart),
        cmocka_unit_test(test_fetch_add_claims_keep_slack_from_a_full_ring),
        cmocka_unit_test(test_gating_sequences_added_and_removed),
        cmocka_unit_test(test_removed_gating_sequence_can_be_freed_at_once),
        cmocka_unit_test(test_barrier_returns_highest_available),
        cmocka_unit_test(test_barrier_follows_dependencies),
        cmocka_unit_test(test_barrier_alert_wakes_a_spinning_wait),
        cmocka_unit_test(test_barrier_alert_wakes_a_blocked_wait),
        cmocka_unit_test(test_barrier_alert_wakes_a_lite_blocked_wait),
    };
    return cmocka_run_group_tests_name("reactor.ring", tests, NULL, NULL);
}
