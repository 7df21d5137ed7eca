/*
 * buffer.log: the library's log hook and threshold (buffer/log.c, common.h): a hook sees each
 * message once with its level, the threshold drops what is below it, the default writes
 * "eddy: ..." lines to stderr, and a NULL hook brings the default back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <eddy/buffer.h>

#include "buffer/layer.h"

/* What a recording hook saw: the last message, and how many. */
typedef struct record_s {
    pthread_mutex_t lock;
    unsigned count;
    eddy_log_level_t level;
    char last[4096];
} record_t;

static record_t rec = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void record(eddy_log_level_t level, const char *message, void *arg)
{
    record_t *r = arg;
    pthread_mutex_lock(&r->lock);
    r->count++;
    r->level = level;
    snprintf(r->last, sizeof(r->last), "%s", message);
    pthread_mutex_unlock(&r->lock);
}

static int hook_on(void **state)
{
    (void)state;
    rec.count = 0;
    rec.last[0] = '\0';
    eddy_log_set_hook(record, &rec);
    return 0;
}

static int hook_off(void **state)
{
    (void)state;
    eddy_log_set_hook(NULL, NULL);
    eddy_log_set_level(EDDY_LOG_INFO);
    return 0;
}

/* Run fn with stderr sent to a temporary file; what it wrote there, NUL-terminated. */
static char *stderr_of(void (*fn)(void))
{
    FILE *f = tmpfile();
    assert_non_null(f);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(f), STDERR_FILENO) >= 0);
    fn();
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    long len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    char *text = calloc(1, (size_t)len + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    return text;
}

static void test_eddy_log_in_the_environment_sets_the_threshold(void **state)
{
    (void)state;
    /* main() set EDDY_LOG=debug before the first message, when it is read. */
    assert_int_equal(eddy_log_level(), EDDY_LOG_DEBUG);
    assert_true(eddy__log_enabled(EDDY_LOG_DEBUG));
    assert_false(eddy__log_enabled(EDDY_LOG_TRACE));
    eddy_log_set_level(EDDY_LOG_INFO);
    assert_int_equal(eddy_log_level(), EDDY_LOG_INFO);
}

static void test_a_hook_sees_each_message_once_with_its_level(void **state)
{
    (void)state;
    eddy__log(EDDY_LOG_WARN, "channel %llu: %s", 42ull, "unhandled");
    assert_int_equal(rec.count, 1);
    assert_int_equal(rec.level, EDDY_LOG_WARN);
    assert_string_equal(rec.last, "channel 42: unhandled");
    eddy__log_text(EDDY_LOG_ERROR, "two\nlines");
    assert_int_equal(rec.count, 2);
    assert_int_equal(rec.level, EDDY_LOG_ERROR);
    assert_string_equal(rec.last, "two\nlines");
}

static void test_messages_below_the_threshold_are_dropped(void **state)
{
    (void)state;
    eddy__log(EDDY_LOG_DEBUG, "not at INFO");
    assert_int_equal(rec.count, 0);
    eddy_log_set_level(EDDY_LOG_ERROR);
    assert_int_equal(eddy_log_level(), EDDY_LOG_ERROR);
    eddy__log(EDDY_LOG_WARN, "below ERROR");
    eddy__log_text(EDDY_LOG_WARN, "below ERROR too");
    assert_int_equal(rec.count, 0);
    eddy__log(EDDY_LOG_ERROR, "at ERROR");
    assert_int_equal(rec.count, 1);
    assert_string_equal(rec.last, "at ERROR");
    eddy_log_set_level(EDDY_LOG_TRACE);
    eddy__log(EDDY_LOG_TRACE, "at TRACE");
    assert_int_equal(rec.count, 2);
    /* Out of range: clamped to the levels there are. */
    eddy_log_set_level((eddy_log_level_t)99);
    assert_int_equal(eddy_log_level(), EDDY_LOG_ERROR);
}

static void test_a_long_message_is_cut_to_end_in_dots(void **state)
{
    (void)state;
    char word[3000];
    memset(word, 'x', sizeof(word) - 1);
    word[sizeof(word) - 1] = '\0';
    eddy__log(EDDY_LOG_WARN, "long: %s", word);
    assert_int_equal(rec.count, 1);
    assert_int_equal(strlen(rec.last), EDDY__LOG_MAX - 1);
    assert_memory_equal(rec.last, "long: xxx", 9);
    assert_string_equal(rec.last + EDDY__LOG_MAX - 4, "...");
}

static void log_hello(void)
{
    eddy__log(EDDY_LOG_WARN, "hello %s", "stderr");
}

static void test_the_default_writes_eddy_lines_to_stderr(void **state)
{
    (void)state;
    char *text = stderr_of(log_hello);
    assert_string_equal(text, "eddy: hello stderr\n");
    free(text);
}

static void test_a_null_hook_restores_the_default(void **state)
{
    (void)state;
    char *text = stderr_of(log_hello);
    assert_string_equal(text, "");
    assert_int_equal(rec.count, 1);
    free(text);
    eddy_log_set_hook(NULL, NULL);
    text = stderr_of(log_hello);
    assert_string_equal(text, "eddy: hello stderr\n");
    assert_int_equal(rec.count, 1);
    free(text);
}

/* Hooks set while other threads log: each message reaches a hook with that hook's own arg. */
static _Atomic unsigned mismatched;
static int tag_a, tag_b;

static void hook_a(eddy_log_level_t level, const char *message, void *arg)
{
    (void)level;
    (void)message;
    if (arg != &tag_a) {
        atomic_fetch_add(&mismatched, 1);
    }
}

static void hook_b(eddy_log_level_t level, const char *message, void *arg)
{
    (void)level;
    (void)message;
    if (arg != &tag_b) {
        atomic_fetch_add(&mismatched, 1);
    }
}

static void *log_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        eddy__log(EDDY_LOG_WARN, "message %d", i);
    }
    return NULL;
}

static void test_a_hook_changed_while_threads_log_keeps_its_arg(void **state)
{
    (void)state;
    atomic_store(&mismatched, 0);
    eddy_log_set_hook(hook_a, &tag_a);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, log_many, NULL), 0);
    }
    for (int i = 0; i < 20000; i++) {
        if (i % 2 == 0) {
            eddy_log_set_hook(hook_b, &tag_b);
        } else {
            eddy_log_set_hook(hook_a, &tag_a);
        }
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
    }
    assert_int_equal(atomic_load(&mismatched), 0);
}

int main(void)
{
    /* Read at the first message: set before any. */
    setenv("EDDY_LOG", "debug", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_eddy_log_in_the_environment_sets_the_threshold, hook_off),
        cmocka_unit_test_setup_teardown(test_a_hook_sees_each_message_once_with_its_level, hook_on,
                                        hook_off),
        cmocka_unit_test_setup_teardown(test_messages_below_the_threshold_are_dropped, hook_on,
                                        hook_off),
        cmocka_unit_test_setup_teardown(test_a_long_message_is_cut_to_end_in_dots, hook_on,
                                        hook_off),
        cmocka_unit_test(test_the_default_writes_eddy_lines_to_stderr),
        cmocka_unit_test_setup_teardown(test_a_null_hook_restores_the_default, hook_on, hook_off),
        cmocka_unit_test_teardown(test_a_hook_changed_while_threads_log_keeps_its_arg, hook_off),
    };
    return cmocka_run_group_tests_name("buffer.log", tests, NULL, NULL);
}
