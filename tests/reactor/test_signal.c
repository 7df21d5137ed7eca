/*
 * reactor/signal.c: SIGINT and SIGTERM blocked before a loop group starts reach the waiting
 * main thread, whichever thread the kernel picks to deliver them to, and a wait times out.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/loop.h>

#include <signal.h>
#include <unistd.h>

static void test_stop_signals_reach_the_waiting_thread(void **state)
{
    (void)state;
    assert_int_equal(eddy_stop_signals_block(), 0);
    /* Loops made now inherit the block: a signal sent to the process lands on the waiter. */
    eddy_loop_group_t *g = eddy_loop_group_new(2, NULL);
    assert_non_null(g);
    assert_int_equal(eddy_stop_signals_wait(10), 0); /* nothing came: the time passed */
    assert_int_equal(kill(getpid(), SIGTERM), 0);
    assert_int_equal(eddy_stop_signals_wait(5000), SIGTERM);
    assert_int_equal(kill(getpid(), SIGINT), 0);
    assert_int_equal(eddy_stop_signals_wait(-1), SIGINT);
    assert_int_equal(eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000), 5000), 0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_signals_reach_the_waiting_thread),
    };
    return cmocka_run_group_tests_name("reactor.signal", tests, NULL, NULL);
}
