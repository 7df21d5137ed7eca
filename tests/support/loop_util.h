/*
 * Helpers shared by the loop tests (tests/reactor/test_loop.c, test_timer.c, test_future.c,
 * test_group.c, stress_loop.c): sleeping, waiting on an atomic with a deadline, starting and
 * finishing a loop, running a call on the loop, and a gate task that holds the loop.
 *
 * Those that assert (start_loop, finish_loop, run_sync, gate_close) run on the test's thread
 * only, never on a loop's (cmocka longjmps); sync_trampoline and gate_task are the loop's side.
 * A file that wants a longer deadline defines DEADLINE_MS before including this header
 * (stress_loop.c: 20 s).
 */
#ifndef EDDY_TESTS_SUPPORT_LOOP_UTIL_H
#define EDDY_TESTS_SUPPORT_LOOP_UTIL_H

/* Debian's cmocka 1.1 wants these four before <cmocka.h>. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/loop.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

/* How long a test waits for something that should happen at once, in milliseconds. */
#ifndef DEADLINE_MS
#define DEADLINE_MS 10000
#endif

/* One millisecond in eddy_now_ns() units. */
#define MS ((int64_t)1000000)

/* Sleep ms milliseconds, resuming after signals. */
static inline void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Poll until *v >= want, or ms pass. True when reached. */
static inline bool wait_for(atomic_long *v, long want, int64_t ms)
{
    int64_t end = eddy_now_ns() + ms * MS;
    while (atomic_load(v) < want) {
        if (eddy_now_ns() > end) {
            return false;
        }
        sleep_ms(1);
    }
    return true;
}

/* Poll until *b is set, or ms pass. True when set. */
static inline bool wait_flag(atomic_bool *b, int64_t ms)
{
    int64_t end = eddy_now_ns() + ms * MS;
    while (!atomic_load(b)) {
        if (eddy_now_ns() > end) {
            return false;
        }
        sleep_ms(1);
    }
    return true;
}

/* A new loop with opts (NULL for the defaults), started on a thread of its own. */
static inline eddy_loop_t *start_loop(const eddy_loop_options_t *opts)
{
    eddy_loop_t *loop = eddy_loop_new(opts);
    assert_non_null(loop);
    assert_int_equal(eddy_loop_start(loop), 0);
    return loop;
}

/* Shut loop down gracefully, wait for it to terminate and free it. */
static inline void finish_loop(eddy_loop_t *loop)
{
    eddy_future_t *term = eddy_loop_shutdown_gracefully(loop, 0, 5000);
    assert_non_null(term);
    assert_int_equal(eddy_future_await(term, DEADLINE_MS), 0);
    assert_true(eddy_loop_is_terminated(loop));
    assert_int_equal(eddy_loop_free(loop), 0);
}

/* A call run_sync() hands to the loop: fn(arg), then done. */
typedef struct sync_call_s {
    eddy_task_cb fn;
    void *arg;
    atomic_bool done;
} sync_call_t;

/* The task run_sync() queues: makes the call, then says so. */
static inline void sync_trampoline(void *arg)
{
    sync_call_t *c = arg;
    c->fn(c->arg);
    atomic_store(&c->done, true);
}

/* Run fn(arg) on the loop and wait for it, up to ms milliseconds: for a call that computes
 * for a while (a million timers), which a shared machine under a sanitizer may slow tenfold. */
static inline void run_sync_within(eddy_loop_t *loop, eddy_task_cb fn, void *arg, int64_t ms)
{
    sync_call_t c = {.fn = fn, .arg = arg};
    atomic_init(&c.done, false);
    assert_int_equal(eddy_loop_execute(loop, sync_trampoline, &c), 0);
    assert_true(wait_flag(&c.done, ms));
}

/* Run fn(arg) on the loop and wait for it. */
static inline void run_sync(eddy_loop_t *loop, eddy_task_cb fn, void *arg)
{
    run_sync_within(loop, fn, arg, DEADLINE_MS);
}

/* A task that holds the loop until the test opens it (or DEADLINE_MS pass), so the queue
 * fills behind it. */
typedef struct gate_s {
    atomic_bool entered;
    atomic_bool open;
} gate_t;

/* The gate's task: says it entered, then waits for open (or the deadline). */
static inline void gate_task(void *arg)
{
    gate_t *g = arg;
    atomic_store(&g->entered, true);
    int64_t end = eddy_now_ns() + DEADLINE_MS * MS;
    while (!atomic_load(&g->open) && eddy_now_ns() < end) {
        sleep_ms(1);
    }
}

/* Queue g's task on loop and wait until the loop is inside it; open with g->open = true. */
static inline void gate_close(eddy_loop_t *loop, gate_t *g)
{
    atomic_init(&g->entered, false);
    atomic_init(&g->open, false);
    assert_int_equal(eddy_loop_execute(loop, gate_task, g), 0);
    assert_true(wait_flag(&g->entered, DEADLINE_MS));
}

#endif /* EDDY_TESTS_SUPPORT_LOOP_UTIL_H */
