/*
 * pipeline/scoped.c through the embedded channel and its virtual clock: handler-scoped timers
 * and tasks fire with their context, cancel by id, and never run after their handler was
 * removed or the channel closed, also when the callback itself closes the channel or removes
 * the handler, and when a removal and a due timer meet in one turn. Under ASan a callback
 * that ran on freed state would be a report, not a silent pass.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/channel.h>
#include <eddy/pipeline.h>

#include <stdlib.h>
#include <string.h>

/* A handler's state: counts what its timers did, and what each callback should do. */
typedef struct timed_s {
    int fired;
    int removed;   /* handler_removed calls */
    char tag;      /* which handler, for the order log */
    char *log;     /* shared order log, or NULL */
    bool close;    /* the callback closes the channel */
    bool remove;   /* the callback removes its own handler */
    const char *remove_other; /* the callback removes this handler */
    uint64_t id;   /* the last id scheduled */
    uint64_t scheduled_in_removed; /* what eddy_ctx_schedule returned inside handler_removed */
    bool cancel_in_removed; /* handler_removed cancels timer id */
} timed_t;

/* What eddy_ctx_cancel returned inside handler_removed (cancel_in_removed). */
static int cancelled_in_removed;

static void timed_cb(eddy_ctx_t *ctx, void *arg)
{
    timed_t *t = arg;
    assert_ptr_equal(eddy_ctx_state(ctx), t);
    assert_int_equal(t->removed, 0); /* never after handler_removed */
    t->fired++;
    if (t->log != NULL) {
        size_t n = strlen(t->log);
        t->log[n] = t->tag;
        t->log[n + 1] = '\0';
    }
    if (t->remove_other != NULL) {
        assert_int_equal(eddy_pipeline_remove(eddy_ctx_pipeline(ctx), t->remove_other), 0);
    }
    if (t->remove) {
        assert_int_equal(eddy_pipeline_remove(eddy_ctx_pipeline(ctx), eddy_ctx_name(ctx)), 0);
    }
    if (t->close) {
        eddy_ctx_close(ctx, NULL);
    }
    /* The state is still ours until the callback returns, whatever it did above. */
    assert_true(t->tag >= 'a');
}

static void timed_removed(eddy_ctx_t *ctx)
{
    timed_t *t = eddy_ctx_state(ctx);
    t->removed++;
    t->scheduled_in_removed = eddy_ctx_schedule(ctx, 1, timed_cb, t);
    if (t->cancel_in_removed) {
        cancelled_in_removed = eddy_ctx_cancel(ctx, t->id);
    }
}

static const eddy_handler_ops_t timed_ops = {
    .name = "timed",
    .handler_removed = timed_removed,
};

/* What outlives the handler states it describes (copied out when the state is freed): how
 * often its timers fired, and what scheduling inside handler_removed returned. */
static int removed_fired[4];
static uint64_t removed_scheduled[4];

static void counting_free(void *state)
{
    timed_t *t = state;
    removed_fired[t->tag - 'a'] = t->fired;
    removed_scheduled[t->tag - 'a'] = t->scheduled_in_removed;
    free(t);
}

static timed_t *add_timed(eddy_channel_t *ch, const char *name, char tag)
{
    timed_t *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    t->tag = tag;
    assert_int_equal(
        eddy_pipeline_add_last(eddy_channel_pipeline(ch), name, &timed_ops, t, counting_free), 0);
    return t;
}

static eddy_ctx_t *ctx_of(eddy_channel_t *ch, const char *name)
{
    eddy_ctx_t *ctx = eddy_pipeline_context(eddy_channel_pipeline(ch), name);
    assert_non_null(ctx);
    return ctx;
}

static void test_scoped_timer_fires_once_with_its_context(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    timed_t *t = add_timed(ch, "a", 'a');
    eddy_ctx_t *ctx = ctx_of(ch, "a");
    uint64_t id = eddy_ctx_schedule(ctx, 100, timed_cb, t);
    assert_true(id != 0);
    eddy_embedded_advance_time(ch, 99);
    assert_int_equal(t->fired, 0);
    eddy_embedded_advance_time(ch, 1);
    assert_int_equal(t->fired, 1);
    eddy_embedded_advance_time(ch, 1000);
    assert_int_equal(t->fired, 1);
    /* Fired: its id is stale, and cancelling it is harmless. */
    assert_int_equal(eddy_ctx_cancel(ctx, id), EDDY_EALREADY);
    assert_int_equal(eddy_ctx_cancel(ctx, 0), EDDY_EALREADY);
    assert_int_equal(eddy_ctx_cancel(ctx, id + 1000), EDDY_EALREADY);
    assert_true(eddy_embedded_finish(ch));
}

static void test_scoped_periodic_timer_runs_until_cancelled(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    timed_t *t = add_timed(ch, "a", 'a');
    eddy_ctx_t *ctx = ctx_of(ch, "a");
    assert_int_equal(eddy_ctx_schedule_at_fixed_rate(ctx, 10, 0, timed_cb, t), 0);
    uint64_t id = eddy_ctx_schedule_at_fixed_rate(ctx, 10, 20, timed_cb, t);
    assert_true(id != 0);
    eddy_embedded_advance_time(ch, 10);
    assert_int_equal(t->fired, 1);
    eddy_embedded_advance_time(ch, 20);
    eddy_embedded_advance_time(ch, 20);
    assert_int_equal(t->fired, 3);
    assert_int_equal(eddy_ctx_cancel(ctx, id), 0);
    assert_int_equal(eddy_ctx_cancel(ctx, id), EDDY_EALREADY);
    eddy_embedded_advance_time(ch, 100);
    assert_int_equal(t->fired, 3);
    assert_true(eddy_embedded_finish(ch));
}

static void test_scoped_timers_end_with_their_handler(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    timed_t *a = add_timed(ch, "a", 'a');
    timed_t *b = add_timed(ch, "b", 'b');
    assert_true(eddy_ctx_schedule(ctx_of(ch, "a"), 10, timed_cb, a) != 0);
    assert_true(eddy_ctx_schedule_at_fixed_rate(ctx_of(ch, "a"), 5, 5, timed_cb, a) != 0);
    assert_true(eddy_ctx_schedule(ctx_of(ch, "b"), 10, timed_cb, b) != 0);
    assert_int_equal(eddy_pipeline_remove(eddy_channel_pipeline(ch), "a"), 0);
    /* Removed: a's state is freed, its timers cancelled; one it tried to schedule inside
     * handler_removed was refused. b's goes on. */
    eddy_embedded_advance_time(ch, 50);
    assert_int_equal(removed_fired[0], 0);
    assert_int_equal(removed_scheduled[0], 0);
    assert_int_equal(b->fired, 1);
    assert_int_equal(b->removed, 0);
    assert_true(eddy_embedded_finish(ch));
    assert_int_equal(removed_fired[1], 1);
}

static void test_scoped_schedule_is_refused_after_close(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    timed_t *t = add_timed(ch, "a", 'a');
    eddy_ctx_t *ctx = ctx_of(ch, "a");
    assert_true(eddy_ctx_schedule(ctx, 10, timed_cb, t) != 0);
    eddy_channel_close(ch, NULL);
    /* The close removed every handler: handler_removed's schedule was refused, and the
     * pending timer never runs. */
    eddy_embedded_advance_time(ch, 100);
    assert_int_equal(removed_fired[0], 0);
    assert_true(eddy_embedded_finish(ch));
}

static void test_scoped_callback_may_close_the_channel(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    timed_t *a = add_timed(ch, "a", 'a');
    timed_t *b = add_timed(ch, "b", 'b');
    a->close = true;
    /* Both due in the same turn: a's runs first and closes the channel, so b's (cancelled
     * by the close) never runs on b's freed state. */
    assert_true(eddy_ctx_schedule(ctx_of(ch, "a"), 10, timed_cb, a) != 0);
    assert_true(eddy_ctx_schedule(ctx_of(ch, "b"), 10, timed_cb, b) != 0);
    eddy_embedded_advance_time(ch, 10);
    assert_false(eddy_channel_is_open(ch));
    assert_int_equal(removed_fired[0], 1);
    assert_int_equal(removed_fired[1], 0);
    assert_true(eddy_embedded_finish(ch));
}

static void test_scoped_callback_may_remove_its_handler(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    timed_t *a = add_timed(ch, "a", 'a');
    a->remove = true;
    uint64_t periodic = eddy_ctx_schedule_at_fixed_rate(ctx_of(ch, "a"), 10, 10, timed_cb, a);
    assert_true(periodic != 0);
    eddy_embedded_advance_time(ch, 10);
    /* The first run removed the handler: the periodic timer stopped with it. */
    eddy_embedded_advance_time(ch, 100);
    assert_int_equal(removed_fired[0], 1);
    const char *names[4];
    assert_int_equal(eddy_pipeline_names(eddy_channel_pipeline(ch), names, 4), 0);
    assert_true(eddy_embedded_finish(ch));
}

static void test_scoped_removal_while_a_timer_is_due_in_the_same_turn(void **state)
{
    (void)state;
    char log[16] = "";
    eddy_channel_t *ch = eddy_embedded_channel_new();
    timed_t *a = add_timed(ch, "a", 'a');
    timed_t *b = add_timed(ch, "b", 'b');
    timed_t *c = add_timed(ch, "c", 'c');
    a->log = b->log = c->log = log;
    a->remove_other = "b";
    /* a's timer runs first (scheduled first, same deadline) and removes b, whose timer is
     * due in this very turn: it must not run. c's, due too, still does. */
    assert_true(eddy_ctx_schedule(ctx_of(ch, "a"), 10, timed_cb, a) != 0);
    assert_true(eddy_ctx_schedule(ctx_of(ch, "b"), 10, timed_cb, b) != 0);
    assert_true(eddy_ctx_schedule(ctx_of(ch, "c"), 10, timed_cb, c) != 0);
    eddy_embedded_advance_time(ch, 10);
    assert_string_equal(log, "ac");
    assert_int_equal(removed_fired[1], 0);
    assert_true(eddy_embedded_finish(ch));
}

static void test_scoped_execute_runs_soon_unless_removed(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    timed_t *a = add_timed(ch, "a", 'a');
    timed_t *b = add_timed(ch, "b", 'b');
    assert_int_equal(eddy_ctx_execute(ctx_of(ch, "a"), timed_cb, a), 0);
    assert_int_equal(eddy_ctx_execute(ctx_of(ch, "b"), timed_cb, b), 0);
    assert_int_equal(eddy_ctx_execute(ctx_of(ch, "b"), NULL, b), EDDY_EINVAL);
    assert_int_equal(eddy_pipeline_remove(eddy_channel_pipeline(ch), "b"), 0);
    eddy_embedded_run_pending(ch);
    assert_int_equal(a->fired, 1);
    assert_int_equal(removed_fired[1], 0);
    eddy_channel_close(ch, NULL);
    assert_true(eddy_embedded_finish(ch));
    assert_int_equal(removed_fired[0], 1);
}

/* A handler that, like eddy-http-server before #15, reacts to a request by arming a timer
 * after it flushed: when that flush (here: a close in the same event) ended the channel, the
 * timer must be refused, not armed on freed state. */
static void arm_after_close_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_msg_release(msg);
    eddy_ctx_close(ctx, NULL);
    timed_t *t = eddy_ctx_state(ctx); /* still ours: we are inside the event */
    t->id = eddy_ctx_schedule(ctx, 10, timed_cb, t);
}

static const eddy_handler_ops_t arm_after_close_ops = {
    .name = "arm-after-close",
    .channel_read = arm_after_close_read,
};

static void test_scoped_timer_armed_after_the_channel_closed_is_refused(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    timed_t *t = calloc(1, sizeof(*t));
    t->tag = 'a';
    assert_int_equal(eddy_pipeline_add_last(eddy_channel_pipeline(ch), "a", &arm_after_close_ops,
                                            t, counting_free),
                     0);
    eddy_embedded_write_inbound(ch, eddy_buf_msg(eddy_buf_from_str("GET / HTTP/1.1\r\n\r\n")));
    eddy_embedded_advance_time(ch, 100);
    assert_int_equal(removed_fired[0], 0);
    assert_true(eddy_embedded_finish(ch));
}

/* A handler that lets go of its timers in handler_removed, after another handler was
 * removed by the same close: the timers were cancelled at the removal, so the cancel says
 * EDDY_EALREADY (it read the removed context's jobs word, the graveyard's link by then, and
 * walked the removed contexts as jobs round the pipeline's ring for ever: found by serverfuzz
 * grpc, the gRPC handler ending its calls' deadline timers at a close). */
static void test_scoped_cancel_in_handler_removed(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    add_timed(ch, "a", 'a');
    timed_t *b = add_timed(ch, "b", 'b');
    b->id = eddy_ctx_schedule(ctx_of(ch, "b"), 10, timed_cb, b);
    assert_true(b->id != 0);
    b->cancel_in_removed = true;
    cancelled_in_removed = -1;
    eddy_channel_close(ch, NULL);
    assert_int_equal(cancelled_in_removed, EDDY_EALREADY);
    eddy_embedded_advance_time(ch, 100);
    assert_int_equal(removed_fired[1], 0);
    assert_true(eddy_embedded_finish(ch));
}

static int reset_counters(void **state)
{
    (void)state;
    for (size_t i = 0; i < 4; i++) {
        removed_fired[i] = -1;
        removed_scheduled[i] = UINT64_MAX;
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_scoped_timer_fires_once_with_its_context, reset_counters),
        cmocka_unit_test_setup(test_scoped_periodic_timer_runs_until_cancelled, reset_counters),
        cmocka_unit_test_setup(test_scoped_timers_end_with_their_handler, reset_counters),
        cmocka_unit_test_setup(test_scoped_schedule_is_refused_after_close, reset_counters),
        cmocka_unit_test_setup(test_scoped_callback_may_close_the_channel, reset_counters),
        cmocka_unit_test_setup(test_scoped_callback_may_remove_its_handler, reset_counters),
        cmocka_unit_test_setup(test_scoped_removal_while_a_timer_is_due_in_the_same_turn,
                               reset_counters),
        cmocka_unit_test_setup(test_scoped_execute_runs_soon_unless_removed, reset_counters),
        cmocka_unit_test_setup(test_scoped_timer_armed_after_the_channel_closed_is_refused,
                               reset_counters),
        cmocka_unit_test_setup(test_scoped_cancel_in_handler_removed, reset_counters),
    };
    return cmocka_run_group_tests_name("pipeline.scoped", tests, NULL, NULL);
}
