/*
 * buffer.shutdown: eddy_library_shutdown() (common.h) refuses while a buffer lives or a loop
 * runs, and otherwise gives back what the buffer module kept: the heap is where it was before
 * the first buffer. The tests run in order, the last ones after the shutdown.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <eddy/eddy.h>

/* What the process has taken from the heap: the sanitizers' allocator, or glibc's malloc. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZER_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZER_HEAP 1
#endif
#endif
#ifdef SANITIZER_HEAP
/* The sanitizers' runtimes have it; gcc installs no header that declares it. */
size_t __sanitizer_get_current_allocated_bytes(void);
#define HAVE_HEAP_BYTES 1
static size_t heap_bytes(void)
{
    return __sanitizer_get_current_allocated_bytes();
}
#elif defined(__GLIBC__)
#include <malloc.h>
#define HAVE_HEAP_BYTES 1
static size_t heap_bytes(void)
{
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}
#endif

/* Before eddy's first allocation (main()). */
static size_t heap_at_start;
/* What the process may keep beyond it: glibc keeps a freed thread's descriptor with its
 * cached stack, cmocka a little of its own. The pool alone holds a 4 MiB chunk. */
#define HEAP_SLACK ((size_t)64 << 10)

static void test_shutdown_is_busy_while_a_buffer_lives(void **state)
{
    (void)state;
    eddy_buf_t *b = eddy_buf_new(100);
    assert_non_null(b);
    assert_int_equal(eddy_library_shutdown(), EDDY_EBUSY);
    /* Nothing was taken away: the buffer and the pool still work. */
    assert_int_equal(eddy_buf_write_u32(b, 7), 0);
    eddy_buf_t *c = eddy_buf_new(100);
    assert_non_null(c);
    eddy_buf_release(c);
    eddy_buf_release(b);
}

static int answer(void *arg, void **result)
{
    *result = arg;
    return 0;
}

static void test_shutdown_is_busy_while_a_loop_runs(void **state)
{
    (void)state;
    eddy_loop_group_t *g = eddy_loop_group_new(1, NULL);
    assert_non_null(g);
    /* The loop is running once it has run a task. */
    eddy_future_t *f = eddy_loop_submit(eddy_loop_group_next(g), answer, NULL);
    assert_non_null(f);
    assert_int_equal(eddy_future_await(f, 5000), 0);
    eddy_future_release(f);
    assert_int_equal(eddy_library_shutdown(), EDDY_EBUSY);
    assert_int_equal(eddy_future_await(eddy_loop_group_shutdown_gracefully(g, 0, 2000), 5000), 0);
    assert_int_equal(eddy_loop_group_free(g), 0);
}

#define NBUFS 2000 /* more than a thread keeps of recycled headers: some reach the depot */

typedef struct swap_s {
    eddy_buf_t *mine[NBUFS];  /* the thread allocates these, the test releases them */
    eddy_buf_t *yours[NBUFS]; /* and releases these, which the test allocated */
} swap_t;

static void *swapper(void *arg)
{
    swap_t *s = arg;
    for (int i = 0; i < NBUFS; i++) {
        s->mine[i] = eddy_buf_new((size_t)(i % 97) * 40 + 1);
        eddy_buf_release(s->yours[i]);
    }
    return NULL;
}

static void test_shutdown_gives_back_what_the_buffers_took(void **state)
{
    (void)state;
#ifndef HAVE_HEAP_BYTES
    skip();
#else
    static swap_t s;
    for (int i = 0; i < NBUFS; i++) {
        s.yours[i] = eddy_buf_new((size_t)(i % 89) * 300 + 1);
        assert_non_null(s.yours[i]);
    }
    eddy_buf_t *big = eddy_buf_new((size_t)1 << 20);  /* a run of pages */
    eddy_buf_t *huge = eddy_buf_new((size_t)3 << 20); /* above half a chunk: malloc */
    assert_non_null(big);
    assert_non_null(huge);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, swapper, &s), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    for (int i = 0; i < NBUFS; i++) {
        assert_non_null(s.mine[i]);
        eddy_buf_release(s.mine[i]);
    }
    eddy_buf_release(big);
    eddy_buf_release(huge);
    /* Released buffers wait in the leak detector's quarantine. */
    eddy_leak_set_paranoid(true);
    for (int i = 0; i < 100; i++) {
        eddy_buf_release(eddy_buf_new(64));
    }
    eddy_leak_set_paranoid(false);
    assert_int_equal(eddy_buf_live_count(), 0);
    size_t held = heap_bytes();
    assert_true(held > heap_at_start + ((size_t)4 << 20)); /* the pool holds a chunk at least */

    assert_int_equal(eddy_library_shutdown(), 0);
    size_t after = heap_bytes();
    if (after > heap_at_start + HEAP_SLACK) {
        fail_msg("the heap is %zu bytes above its start after the shutdown (%zu before it)",
                 after - heap_at_start, held - heap_at_start);
    }
#endif
}

static void test_shutdown_twice_does_nothing_more(void **state)
{
    (void)state;
    assert_int_equal(eddy_library_shutdown(), 0);
}

int main(void)
{
#ifdef HAVE_HEAP_BYTES
    heap_at_start = heap_bytes();
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shutdown_is_busy_while_a_buffer_lives),
        cmocka_unit_test(test_shutdown_is_busy_while_a_loop_runs),
        cmocka_unit_test(test_shutdown_gives_back_what_the_buffers_took),
        cmocka_unit_test(test_shutdown_twice_does_nothing_more),
    };
    return cmocka_run_group_tests_name("buffer.shutdown", tests, NULL, NULL);
}
