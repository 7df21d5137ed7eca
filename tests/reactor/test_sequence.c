/*
 * Tests for reactor/sequence.c and the inline sequence accessors of eddy/ring.h.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/ring.h>

#include <stdalign.h>

static void test_sequence_new_holds_initial_value(void **state)
{
    eddy_sequence_t *s = eddy_sequence_new(EDDY_SEQUENCE_INITIAL);
    assert_non_null(s);
    assert_int_equal(eddy_sequence_get(s), -1);
    eddy_sequence_free(s);
    eddy_sequence_free(NULL);
}

static void test_sequence_is_alone_on_its_cache_lines(void **state)
{
    assert_int_equal(alignof(eddy_sequence_t), 128);
    assert_true(sizeof(eddy_sequence_t) % 128 == 0);
    /* 120 bytes of padding on either side of the value. */
    assert_int_equal(offsetof(eddy_sequence_t, _value), 120);
    assert_true(sizeof(eddy_sequence_t) - offsetof(eddy_sequence_t, _value) - 8 >= 120);
    eddy_sequence_t *s = eddy_sequence_new(0);
    assert_non_null(s);
    assert_int_equal((uintptr_t)s % 128, 0);
    eddy_sequence_free(s);

    static eddy_sequence_t two[2];
    assert_true((uintptr_t)&two[1]._value - (uintptr_t)&two[0]._value >= 128);
}

static void test_sequence_set_then_get(void **state)
{
    eddy_sequence_t s;
    eddy_sequence_init(&s, 5);
    assert_int_equal(eddy_sequence_get(&s), 5);
    eddy_sequence_set(&s, 42);
    assert_int_equal(eddy_sequence_get(&s), 42);
    eddy_sequence_set_volatile(&s, INT64_MAX);
    assert_int_equal(eddy_sequence_get(&s), INT64_MAX);
}

static void test_sequence_cas_succeeds_only_on_expected(void **state)
{
    eddy_sequence_t s;
    eddy_sequence_init(&s, 10);
    assert_false(eddy_sequence_cas(&s, 9, 11));
    assert_int_equal(eddy_sequence_get(&s), 10);
    assert_true(eddy_sequence_cas(&s, 10, 11));
    assert_int_equal(eddy_sequence_get(&s), 11);
}

static void test_sequence_add_and_get_returns_new_value(void **state)
{
    eddy_sequence_t s;
    eddy_sequence_init(&s, EDDY_SEQUENCE_INITIAL);
    assert_int_equal(eddy_sequence_add_and_get(&s, 1), 0);
    assert_int_equal(eddy_sequence_add_and_get(&s, 10), 10);
    assert_int_equal(eddy_sequence_add_and_get(&s, -3), 7);
}

static void test_sequence_min_includes_the_floor(void **state)
{
    eddy_sequence_t a, b, c;
    eddy_sequence_init(&a, 7);
    eddy_sequence_init(&b, 3);
    eddy_sequence_init(&c, 9);
    eddy_sequence_t *seqs[] = {&a, &b, &c};
    assert_int_equal(eddy_sequence_min(seqs, 3, INT64_MAX), 3);
    assert_int_equal(eddy_sequence_min(seqs, 3, 1), 1);
    assert_int_equal(eddy_sequence_min(seqs, 0, 42), 42);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequence_new_holds_initial_value),
        cmocka_unit_test(test_sequence_is_alone_on_its_cache_lines),
        cmocka_unit_test(test_sequence_set_then_get),
        cmocka_unit_test(test_sequence_cas_succeeds_only_on_expected),
        cmocka_unit_test(test_sequence_add_and_get_returns_new_value),
        cmocka_unit_test(test_sequence_min_includes_the_floor),
    };
    return cmocka_run_group_tests_name("reactor.sequence", tests, NULL, NULL);
}
