/*
 * buffer.leak: paranoid leak detection: reports of live buffers with their allocation stack
 * and touches, and double releases and retains at zero caught and counted instead of
 * corrupting memory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#include <eddy/buffer.h>

#include "buffer/layer.h"
#include "support/abort_util.h"

/*
 * Allocates the buffer the report must name. Not static and exported (the test binary is
 * linked with -rdynamic but compiled with hidden visibility), so backtrace_symbols() can name
 * it; not inlined, and the allocation is not its tail call, so its frame is on the stack.
 */
__attribute__((visibility("default"), noinline)) eddy_buf_t *leaky_helper_allocates(void);

eddy_buf_t *leaky_helper_allocates(void)
{
    eddy_buf_t *b = eddy_buf_new(64);
    if (b != NULL && eddy_buf_write_u32(b, 0x1eaf1eaf) != 0) {
        eddy_buf_release(b);
        return NULL;
    }
    return b;
}

/* Run eddy_leak_report() into a temporary file; the text written, NUL-terminated. */
static char *leak_report_text(size_t *count)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    *count = eddy_leak_report(f);
    assert_int_equal(fflush(f), 0);
    long len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    char *text = malloc((size_t)len + 1);
    assert_non_null(text);
    size_t got = fread(text, 1, (size_t)len, f);
    assert_int_equal(got, (size_t)len);
    text[got] = '\0';
    fclose(f);
    return text;
}

static size_t leak_report_count(void)
{
    size_t n;
    free(leak_report_text(&n));
    return n;
}

static int paranoid_on(void **state)
{
    eddy_leak_set_paranoid(true);
    return eddy_leak_is_paranoid() ? 0 : -1;
}

static int paranoid_off(void **state)
{
    eddy_leak_set_paranoid(false);
    return eddy_leak_is_paranoid() ? -1 : 0;
}

static void test_report_names_the_allocating_function_and_the_touches(void **state)
{
    int64_t live = eddy_buf_live_count();
    size_t before = leak_report_count();

    eddy_buf_t *b = leaky_helper_allocates();
    assert_non_null(b);
    eddy_buf_touch(b, "touched-by-test");
    assert_int_equal(eddy_buf_live_count(), live + 1);

    size_t n;
    char *text = leak_report_text(&n);
    assert_true(n >= 1);
    assert_int_equal(n, before + 1);
    if (strstr(text, "LEAK") == NULL || strstr(text, "leaky_helper_allocates") == NULL ||
        strstr(text, "touched-by-test") == NULL) {
        print_error("report:\n%s\n", text);
        free(text);
        fail_msg("the report lacks LEAK, the allocating function or the touch");
    }
    free(text);

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(leak_report_count(), before);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_report_lists_every_live_tracked_buffer(void **state)
{
    int64_t live = eddy_buf_live_count();
    size_t before = leak_report_count();

    eddy_buf_t *bufs[5];
    for (size_t i = 0; i < 5; i++) {
        bufs[i] = eddy_buf_new(16 << i);
        assert_non_null(bufs[i]);
    }
    assert_int_equal(leak_report_count(), before + 5);

    /* Views are not buffers of their own; retaining does not add a report. */
    eddy_buf_t *s = eddy_buf_slice(bufs[0], 0, 8);
    assert_non_null(s);
    eddy_buf_retain(bufs[1]);
    assert_int_equal(leak_report_count(), before + 5);

    assert_int_equal(eddy_buf_release(bufs[1]), 0);
    assert_int_equal(leak_report_count(), before + 5);
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(eddy_buf_release(bufs[i]), 1);
        assert_int_equal(leak_report_count(), before + 4 - i);
    }
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_tracking_follows_the_mode_at_allocation(void **state)
{
    int64_t live = eddy_buf_live_count();
    size_t before = leak_report_count();

    eddy_leak_set_paranoid(false);
    assert_false(eddy_leak_is_paranoid());
    eddy_buf_t *untracked = eddy_buf_new(32);
    assert_non_null(untracked);
    assert_int_equal(leak_report_count(), before);
    assert_int_equal(eddy_buf_live_count(), live + 1);

    eddy_leak_set_paranoid(true);
    assert_true(eddy_leak_is_paranoid());
    eddy_buf_t *tracked = eddy_buf_new(32);
    assert_non_null(tracked);
    assert_int_equal(leak_report_count(), before + 1);

    /* Turning paranoid off keeps tracking the buffers already tracked. */
    eddy_leak_set_paranoid(false);
    assert_int_equal(leak_report_count(), before + 1);
    assert_int_equal(eddy_buf_release(tracked), 1);
    assert_int_equal(leak_report_count(), before);
    assert_int_equal(eddy_buf_release(untracked), 1);
    assert_int_equal(leak_report_count(), before);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_double_release_is_refused_and_counted(void **state)
{
    int64_t live = eddy_buf_live_count();
    size_t before = leak_report_count();

    eddy_buf_t *b = eddy_buf_from_str("released twice");
    assert_non_null(b);
    eddy_buf_touch(b, "about-to-be-released-twice");
    assert_ptr_equal(eddy_buf_retain(b), b);
    assert_int_equal(eddy_buf_release(b), 0);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
    assert_int_equal(leak_report_count(), before);

    /* Paranoid mode quarantines freed buffers, so a release at zero is safe to make. */
    uint64_t misuse = eddy_leak_misuse_count();
    assert_int_equal(eddy_buf_release(b), EDDY_EREFCNT);
    assert_int_equal(eddy_leak_misuse_count(), misuse + 1);
    assert_int_equal(eddy_buf_release(b), EDDY_EREFCNT);
    assert_int_equal(eddy_leak_misuse_count(), misuse + 2);

    /* Nothing else moved: no buffer came back to life, none was freed twice. */
    assert_int_equal(eddy_buf_live_count(), live);
    assert_int_equal(leak_report_count(), before);
    eddy_buf_t *c = eddy_buf_new(16);
    assert_non_null(c);
    assert_int_equal(eddy_buf_release(c), 1);
    assert_int_equal(eddy_leak_misuse_count(), misuse + 2);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_double_release_through_the_message_header_is_refused(void **state)
{
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_new(16);
    assert_non_null(b);
    eddy_msg_t *m = eddy_buf_msg(b);
    assert_int_equal(eddy_msg_release(m), 1);
    assert_int_equal(eddy_buf_live_count(), live);

    uint64_t misuse = eddy_leak_misuse_count();
    assert_int_equal(eddy_msg_release(m), EDDY_EREFCNT);
    assert_int_equal(eddy_buf_release(b), EDDY_EREFCNT);
    assert_true(eddy_leak_misuse_count() >= misuse + 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* The log hook's messages: how many mention what is looked for, and the last such one. */
typedef struct logged_s {
    const char *want;
    unsigned count;
    eddy_log_level_t level;
    char last[8192];
} logged_t;

static void record(eddy_log_level_t level, const char *message, void *arg)
{
    logged_t *l = arg;
    if (strstr(message, l->want) == message) {
        l->count++;
        l->level = level;
        snprintf(l->last, sizeof(l->last), "%s", message);
    }
}

static void test_a_report_without_a_file_goes_to_the_log_hook(void **state)
{
    size_t before = leak_report_count();
    eddy_buf_t *a = leaky_helper_allocates();
    eddy_buf_t *b = leaky_helper_allocates();
    assert_non_null(a);
    assert_non_null(b);

    logged_t l = {.want = "LEAK: buffer "};
    eddy_log_set_hook(record, &l);
    size_t n = eddy_leak_report(NULL);
    eddy_log_set_hook(NULL, NULL);
    assert_int_equal(n, before + 2);
    assert_int_equal(l.count, before + 2); /* one message a buffer */
    assert_int_equal(l.level, EDDY_LOG_ERROR);
    size_t len = strlen(l.last);
    assert_true(len > 0 && l.last[len - 1] != '\n'); /* the hook adds line ends */
    if (strstr(l.last, "was not released (reference count 1)\n    allocated (capacity") == NULL ||
        strstr(l.last, "leaky_helper_allocates") == NULL) {
        fail_msg("the logged report lacks the allocation trail:\n%s", l.last);
    }

    assert_int_equal(eddy_buf_release(a), 1);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(leak_report_count(), before);
}

static void test_a_double_release_is_reported_through_the_log_hook(void **state)
{
    eddy_buf_t *b = eddy_buf_new(16);
    assert_non_null(b);
    assert_int_equal(eddy_buf_release(b), 1);

    char want[64];
    snprintf(want, sizeof(want), "buffer %p: release when", (void *)b);
    logged_t l = {.want = want};
    eddy_log_set_hook(record, &l);
    assert_int_equal(eddy_buf_release(b), EDDY_EREFCNT);
    eddy_log_set_hook(NULL, NULL);
    assert_int_equal(l.count, 1);
    assert_int_equal(l.level, EDDY_LOG_ERROR);
    if (strstr(l.last, "reference count is already zero\n    this release at:\n") == NULL ||
        strstr(l.last, "    allocated (capacity") == NULL) {
        fail_msg("the logged report lacks the trails:\n%s", l.last);
    }
}

static void retain_once(void *arg)
{
    eddy_buf_retain(arg);
}

static void test_retain_at_zero_is_refused_and_counted(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_buf_t *b = eddy_buf_from_str("released");
    assert_non_null(b);
    assert_int_equal(eddy_buf_release(b), 1);

    /* Paranoid mode quarantines freed buffers, so a retain at zero is safe to make: debug
     * builds abort there, release builds refuse. */
    expect_abort_in_debug(retain_once, b, "retain of buffer");
    bool fatal = eddy__refcnt_set_fatal(false);
    uint64_t misuse = eddy_leak_misuse_count();
    assert_null(eddy_buf_retain(b));
    assert_int_equal(eddy_buf_refcnt(b), 0);
    assert_int_equal(eddy_leak_misuse_count(), misuse + 1);
    assert_null(eddy_msg_retain(eddy_buf_msg(b)));
    assert_null(eddy_buf_retained_slice(b, 0, 0));
    assert_int_equal(eddy_buf_refcnt(b), 0);
    eddy__refcnt_set_fatal(fatal);

    /* Nothing came back to life. */
    assert_int_equal(eddy_buf_live_count(), live);
    assert_int_equal(eddy_buf_release(b), EDDY_EREFCNT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_report_names_the_allocating_function_and_the_touches,
                                        paranoid_on, paranoid_off),
        cmocka_unit_test_setup_teardown(test_report_lists_every_live_tracked_buffer, paranoid_on,
                                        paranoid_off),
        cmocka_unit_test_setup_teardown(test_tracking_follows_the_mode_at_allocation, paranoid_on,
                                        paranoid_off),
        cmocka_unit_test_setup_teardown(test_double_release_is_refused_and_counted, paranoid_on,
                                        paranoid_off),
        cmocka_unit_test_setup_teardown(test_double_release_through_the_message_header_is_refused,
                                        paranoid_on, paranoid_off),
        cmocka_unit_test_setup_teardown(test_a_report_without_a_file_goes_to_the_log_hook,
                                        paranoid_on, paranoid_off),
        cmocka_unit_test_setup_teardown(test_a_double_release_is_reported_through_the_log_hook,
                                        paranoid_on, paranoid_off),
        cmocka_unit_test_setup_teardown(test_retain_at_zero_is_refused_and_counted, paranoid_on,
                                        paranoid_off),
    };
    return cmocka_run_group_tests_name("buffer.leak", tests, NULL, NULL);
}
