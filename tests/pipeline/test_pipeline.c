/*
 * pipeline/pipeline.c through the embedded channel: events in order through the handlers,
 * the mask skipping handlers that do not implement an event, changes to the pipeline from
 * inside events, outbound operations from a context toward the head, unhandled messages and
 * errors at the tail, the virtual clock, and nothing leaked.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/channel.h>
#include <eddy/codec.h>
#include <eddy/handler.h>
#include <eddy/pipeline.h>

#include <stdlib.h>
#include <string.h>

/* A handler that records what it saw in a shared log and passes everything on. */
typedef struct rec_s {
    char log[512];
    size_t reads;
} rec_t;

static rec_t *rec_of(eddy_ctx_t *ctx)
{
    return *(rec_t **)eddy_ctx_state(ctx);
}

static void note(eddy_ctx_t *ctx, const char *what)
{
    rec_t *r = rec_of(ctx);
    size_t n = strlen(r->log);
    snprintf(r->log + n, sizeof(r->log) - n, "%s:%s ", eddy_ctx_name(ctx), what);
}

static void rec_active(eddy_ctx_t *ctx)
{
    note(ctx, "active");
    eddy_ctx_fire_channel_active(ctx);
}

static void rec_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    note(ctx, "read");
    rec_of(ctx)->reads++;
    eddy_ctx_fire_channel_read(ctx, msg);
}

static void rec_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    note(ctx, "write");
    eddy_ctx_write(ctx, msg, p);
}

static void rec_inactive(eddy_ctx_t *ctx)
{
    note(ctx, "inactive");
    eddy_ctx_fire_channel_inactive(ctx);
}

static void rec_removed(eddy_ctx_t *ctx)
{
    note(ctx, "removed");
}

static const eddy_handler_ops_t rec_ops = {
    .name = "rec",
    .sharable = true,
    .handler_removed = rec_removed,
    .channel_active = rec_active,
    .channel_inactive = rec_inactive,
    .channel_read = rec_read,
    .write = rec_write,
};

/* Only writes: inbound events must skip it without a call. */
static int write_only_calls;
static void wo_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    write_only_calls++;
    eddy_ctx_write(ctx, msg, p);
}

static const eddy_handler_ops_t write_only_ops = {.name = "wo", .write = wo_write};

static rec_t **rec_state(rec_t *r)
{
    rec_t **s = malloc(sizeof(*s));
    *s = r;
    return s;
}

static eddy_msg_t *text(const char *s)
{
    return eddy_buf_msg(eddy_buf_from_str(s));
}

static void test_pipeline_events_run_in_order_and_skip_by_mask(void **state)
{
    (void)state;
    rec_t r = {0};
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    assert_int_equal(eddy_pipeline_add_last(p, "a", &rec_ops, rec_state(&r), eddy_free_state), 0);
    assert_int_equal(eddy_pipeline_add_last(p, "w", &write_only_ops, NULL, NULL), 0);
    assert_int_equal(eddy_pipeline_add_last(p, "b", &rec_ops, rec_state(&r), eddy_free_state), 0);
    assert_int_equal(eddy_pipeline_add_first(p, "z", &rec_ops, rec_state(&r), eddy_free_state),
                     0);
    const char *names[8];
    assert_int_equal(eddy_pipeline_names(p, names, 8), 4);
    assert_string_equal(names[0], "z");
    assert_string_equal(names[3], "b");
    assert_int_equal(eddy_pipeline_add_last(p, "a", &rec_ops, NULL, NULL), EDDY_EEXIST);
    static int wo_state;
    assert_int_equal(eddy_pipeline_add_last(p, "w2", &write_only_ops, &wo_state, NULL), 0);
    assert_int_equal(eddy_pipeline_add_last(p, "w3", &write_only_ops, &wo_state, NULL),
                     EDDY_EINVAL); /* the same instance twice */
    assert_int_equal(eddy_pipeline_remove(p, "w2"), 0);

    assert_true(eddy_embedded_write_inbound(ch, text("hi")));
    assert_string_equal(r.log, "z:read a:read b:read ");
    assert_int_equal(write_only_calls, 0);
    eddy_msg_t *in = eddy_embedded_read_inbound(ch);
    assert_non_null(in);
    assert_int_equal(eddy_buf_readable(eddy_buf_of(in)), 2);
    eddy_msg_release(in);

    r.log[0] = '\0';
    assert_true(eddy_embedded_write_outbound(ch, text("out")));
    assert_string_equal(r.log, "b:write a:write z:write ");
    assert_int_equal(write_only_calls, 1);
    eddy_msg_t *out = eddy_embedded_read_outbound(ch);
    assert_non_null(out);
    eddy_msg_release(out);

    r.log[0] = '\0';
    assert_true(eddy_embedded_finish(ch));
    assert_string_equal(r.log, "z:inactive a:inactive b:inactive z:removed a:removed b:removed ");
}

/* A handler that removes itself on its first read, then passes the message on. */
static void once_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    int *count = eddy_ctx_state(ctx);
    (*count)++;
    assert_int_equal(eddy_pipeline_remove(eddy_ctx_pipeline(ctx), eddy_ctx_name(ctx)), 0);
    assert_true(eddy_ctx_is_removed(ctx));
    eddy_ctx_fire_channel_read(ctx, msg); /* a removed context still passes on */
}

static int once_count;
static void once_removed(eddy_ctx_t *ctx)
{
    (void)ctx;
    once_count += 100;
}

static const eddy_handler_ops_t once_ops = {
    .name = "once", .channel_read = once_read, .handler_removed = once_removed};

/* A handler that, on read, adds another handler right after itself. */
static void adder_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    rec_t *r = eddy_ctx_state(ctx);
    if (eddy_pipeline_context(eddy_ctx_pipeline(ctx), "late") == NULL) {
        assert_int_equal(eddy_pipeline_add_after(eddy_ctx_pipeline(ctx), eddy_ctx_name(ctx),
                                                 "late", &rec_ops, rec_state(r),
                                                 eddy_free_state),
                         0);
    }
    eddy_ctx_fire_channel_read(ctx, msg);
}

static const eddy_handler_ops_t adder_ops = {.name = "adder", .channel_read = adder_read};

static void test_pipeline_changes_inside_events(void **state)
{
    (void)state;
    rec_t r = {0};
    int seen = 0;
    once_count = 0;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    assert_int_equal(eddy_pipeline_add_last(p, "once", &once_ops, &seen, NULL), 0);
    assert_int_equal(eddy_pipeline_add_last(p, "adder", &adder_ops, &r, NULL), 0);
    eddy_embedded_write_inbound(ch, text("1"));
    eddy_embedded_write_inbound(ch, text("2"));
    assert_int_equal(seen, 1);
    assert_int_equal(once_count, 100);
    /* "late" was added during the first read, right after adder: it saw that read too. */
    assert_int_equal(r.reads, 2);
    assert_null(eddy_pipeline_context(p, "once"));
    assert_int_equal(eddy_pipeline_replace(p, "late", "later", &rec_ops, rec_state(&r),
                                           eddy_free_state),
                     0);
    assert_null(eddy_pipeline_context(p, "late"));
    assert_non_null(eddy_pipeline_context(p, "later"));
    assert_int_equal(eddy_pipeline_remove(p, "nope"), EDDY_ENOENT);
    assert_int_equal(eddy_pipeline_remove_ops(p, &adder_ops), 0);
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
        eddy_msg_release(m);
    }
    assert_true(eddy_embedded_finish(ch));
}

/* A decoder that makes two messages of every one it reads, and a handshake handler that, on
 * the first, takes the decoder and itself out of the pipeline: the decoder's second message
 * must not reach the handshake handler, which was removed (handler_removed is its last call). */
static void two_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_ctx_fire_channel_read(ctx, msg);
    eddy_ctx_fire_channel_read(ctx, text("second"));
}

static const eddy_handler_ops_t two_ops = {.name = "two", .channel_read = two_read};

typedef struct switcher_s {
    int reads;
    int after_removal;
} switcher_t;

static void switch_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    switcher_t *sw = eddy_ctx_state(ctx);
    if (eddy_ctx_is_removed(ctx)) {
        sw->after_removal++;
    }
    if (sw->reads++ == 0) {
        assert_int_equal(eddy_pipeline_remove(eddy_ctx_pipeline(ctx), "two"), 0);
        assert_int_equal(eddy_pipeline_remove(eddy_ctx_pipeline(ctx), eddy_ctx_name(ctx)), 0);
    }
    eddy_ctx_fire_channel_read(ctx, msg);
}

static const eddy_handler_ops_t switch_ops = {.name = "switch", .channel_read = switch_read};

static void test_pipeline_no_event_reaches_a_removed_handler(void **state)
{
    (void)state;
    switcher_t sw = {0};
    eddy_channel_t *ch = eddy_embedded_channel_new();
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    assert_int_equal(eddy_pipeline_add_last(p, "two", &two_ops, NULL, NULL), 0);
    assert_int_equal(eddy_pipeline_add_last(p, "switch", &switch_ops, &sw, NULL), 0);
    eddy_embedded_write_inbound(ch, text("first"));
    assert_int_equal(sw.reads, 1);
    assert_int_equal(sw.after_removal, 0);
    /* Both messages went on to the tail. */
    for (int i = 0; i < 2; i++) {
        eddy_msg_t *m = eddy_embedded_read_inbound(ch);
        assert_non_null(m);
        eddy_msg_release(m);
    }
    assert_true(eddy_embedded_finish(ch));
}

static void boom_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_msg_release(msg);
    eddy_ctx_fire_exception(ctx, EDDY_EDECODE);
}

static const eddy_handler_ops_t boom_ops = {.name = "boom", .channel_read = boom_read};

static void test_pipeline_errors_reach_the_tail(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_int_equal(eddy_pipeline_add_last(eddy_channel_pipeline(ch), NULL, &boom_ops, NULL,
                                            NULL),
                     0);
    assert_false(eddy_embedded_write_inbound(ch, text("x")));
    assert_int_equal(eddy_embedded_error(ch), EDDY_EDECODE);
    assert_int_equal(eddy_embedded_error(ch), 0);
    assert_true(eddy_embedded_finish(ch));
}

static void test_pipeline_finish_reports_leftovers(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    eddy_embedded_write_inbound(ch, text("left"));
    assert_false(eddy_embedded_finish(ch)); /* released, but reported */
}

static void test_pipeline_writes_after_close_fail(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    eddy_channel_retain(ch);
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_embedded_shutdown_input(ch); /* no half-closure: closes */
    assert_false(eddy_channel_is_open(ch));
    assert_true(eddy_future_is_done(eddy_channel_close_future(ch)));
    eddy_channel_write(ch, text("late"), p);
    assert_int_equal(eddy_future_error(p), EDDY_ECLOSED);
    eddy_future_release(p);
    eddy_channel_release(ch);
    assert_true(eddy_embedded_finish(ch));
}

static int ticks;
static void tick(eddy_timer_t *t, void *arg)
{
    (void)t;
    (void)arg;
    ticks++;
}

static void test_pipeline_embedded_clock_is_virtual(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    eddy_loop_t *loop = eddy_channel_loop(ch);
    int64_t t0 = eddy_loop_now_ns(loop);
    ticks = 0;
    eddy_timer_t *t = eddy_loop_schedule(loop, 30000, tick, NULL);
    assert_non_null(t);
    eddy_embedded_advance_time(ch, 29999);
    assert_int_equal(ticks, 0);
    eddy_embedded_advance_time(ch, 1);
    assert_int_equal(ticks, 1);
    assert_true(eddy_loop_now_ns(loop) - t0 >= 30000LL * 1000000);
    eddy_timer_release(t);
    assert_true(eddy_embedded_finish(ch));
}

/* Water marks: pending bytes past the high mark make the channel unwritable (one event),
 * back under the low mark writable again; the hard cap refuses writes with EDDY_ENOBUFS. */
static int writability_events;
static void count_writability(eddy_ctx_t *ctx)
{
    writability_events++;
    eddy_ctx_fire_channel_writability_changed(ctx);
}

static const eddy_handler_ops_t writability_ops = {
    .name = "wc", .channel_writability_changed = count_writability};

static void test_pipeline_water_marks_and_the_outbound_cap(void **state)
{
    (void)state;
    writability_events = 0;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_int_equal(eddy_channel_set_option(ch, EDDY_WRITE_BUFFER_LOW_WATER_MARK, 100), 0);
    assert_int_equal(eddy_channel_set_option(ch, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, 200), 0);
    assert_int_equal(eddy_channel_set_option(ch, EDDY_WRITE_BUFFER_LOW_WATER_MARK, 300),
                     EDDY_EINVAL); /* above the high mark */
    assert_int_equal(eddy_channel_set_option(ch, EDDY_MAX_PENDING_OUTBOUND, 400), 0);
    assert_int_equal(eddy_pipeline_add_last(eddy_channel_pipeline(ch), NULL, &writability_ops,
                                            NULL, NULL),
                     0);
    char block[150];
    memset(block, 'w', sizeof(block));
    eddy_channel_write(ch, eddy_buf_msg(eddy_buf_from(block, 150)), NULL);
    assert_true(eddy_channel_is_writable(ch));
    eddy_channel_write(ch, eddy_buf_msg(eddy_buf_from(block, 150)), NULL);
    assert_false(eddy_channel_is_writable(ch)); /* 300 > 200 */
    assert_int_equal(writability_events, 1);
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_channel_write(ch, eddy_buf_msg(eddy_buf_from(block, 150)), p); /* 450 > 400 */
    assert_int_equal(eddy_future_error(p), EDDY_ENOBUFS);
    eddy_future_release(p);
    eddy_channel_counters_t c;
    eddy_channel_counters(ch, &c);
    assert_int_equal(c.pending_outbound_bytes, 300);
    eddy_channel_flush(ch);
    assert_true(eddy_channel_is_writable(ch));
    assert_int_equal(writability_events, 2);
    for (int i = 0; i < 2; i++) {
        eddy_msg_t *m = eddy_embedded_read_outbound(ch);
        assert_non_null(m);
        eddy_msg_release(m);
    }
    eddy_channel_counters(ch, &c);
    assert_int_equal(c.msgs_written, 2);
    assert_int_equal(c.bytes_written, 300);
    assert_true(eddy_embedded_finish(ch));
}

/* Half-closure on the embedded channel: an event when allowed. */
static void test_pipeline_input_shutdown_is_an_event_when_allowed(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_int_equal(eddy_channel_set_option(ch, EDDY_ALLOW_HALF_CLOSURE, 1), 0);
    eddy_embedded_shutdown_input(ch);
    int ev[4];
    assert_int_equal(eddy_embedded_events(ch, ev, 4), 1);
    assert_int_equal(ev[0], EDDY_EVENT_INPUT_SHUTDOWN);
    assert_true(eddy_channel_is_open(ch));
    static const int key = 0;
    static int value = 42;
    assert_int_equal(eddy_channel_attr_set(ch, &key, &value), 0);
    assert_ptr_equal(eddy_channel_attr(ch, &key), &value);
    assert_null(eddy_channel_attr(ch, &value));
    assert_true(eddy_embedded_finish(ch));
}

/* On the embedded channel a close after flush flushes what was written, then closes. */
static void test_pipeline_close_after_flush_flushes_first(void **state)
{
    (void)state;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    eddy_channel_write(ch, eddy_buf_msg(eddy_buf_from("bye", 3)), NULL);
    eddy_promise_t *p = eddy_promise_new(NULL);
    eddy_channel_close_after_flush(ch, p);
    assert_true(eddy_future_is_done(p));
    assert_int_equal(eddy_future_error(p), 0);
    eddy_future_release(p);
    assert_false(eddy_channel_is_open(ch));
    eddy_msg_t *out = eddy_embedded_read_outbound(ch);
    assert_non_null(out);
    assert_int_equal(eddy_buf_readable(eddy_buf_of(out)), 3);
    eddy_msg_release(out);
    assert_true(eddy_embedded_finish(ch));
}

/* Handlers as values, added in one call, all or none. */
static int counted_frees, counted_removed;

static void counted_free(void *state)
{
    counted_frees++;
    free(state);
}

static void counted_removed_cb(eddy_ctx_t *ctx)
{
    (void)ctx;
    counted_removed++;
}

static const eddy_handler_ops_t counted_ops = {
    .name = "counted",
    .handler_removed = counted_removed_cb,
};

static eddy_handler_t counted(const char *name)
{
    return eddy_handler(name, &counted_ops, malloc(8), counted_free);
}

static void test_pipeline_adds_handlers_as_values_all_or_none(void **state)
{
    (void)state;
    counted_frees = counted_removed = 0;
    eddy_channel_t *ch = eddy_embedded_channel_new();
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(p, eddy_read_timeout_handler(1000),
                                            eddy_handler_named(eddy_length_field_decoder(
                                                                   1024, 0, 2, 0, 2),
                                                               "frames"),
                                            counted("app")),
                     0);
    const char *names[4];
    assert_int_equal(eddy_pipeline_names(p, names, 4), 3);
    assert_string_equal(names[1], "frames");
    assert_string_equal(names[2], "app");

    /* A constructor that failed (a zero maximum): nothing is added, every state freed. */
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(p, counted("b"),
                                            eddy_length_field_decoder(0, 0, 2, 0, 2),
                                            counted("c")),
                     EDDY_ENOMEM);
    assert_int_equal(counted_frees, 2);
    assert_int_equal(counted_removed, 0);
    assert_int_equal(eddy_pipeline_names(p, names, 4), 3);

    /* A name taken halfway: the ones added go again, the rest are freed. */
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(p, counted("d"), counted("e"), counted("app"),
                                            counted("f")),
                     EDDY_EEXIST);
    assert_int_equal(counted_removed, 2); /* d and e came and went */
    assert_int_equal(counted_frees, 2 + 4);
    assert_int_equal(eddy_pipeline_names(p, names, 4), 3);
    assert_true(eddy_embedded_finish(ch));
    assert_int_equal(counted_frees, 2 + 4 + 1); /* app, at close */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipeline_events_run_in_order_and_skip_by_mask),
        cmocka_unit_test(test_pipeline_changes_inside_events),
        cmocka_unit_test(test_pipeline_no_event_reaches_a_removed_handler),
        cmocka_unit_test(test_pipeline_errors_reach_the_tail),
        cmocka_unit_test(test_pipeline_finish_reports_leftovers),
        cmocka_unit_test(test_pipeline_writes_after_close_fail),
        cmocka_unit_test(test_pipeline_embedded_clock_is_virtual),
        cmocka_unit_test(test_pipeline_water_marks_and_the_outbound_cap),
        cmocka_unit_test(test_pipeline_input_shutdown_is_an_event_when_allowed),
        cmocka_unit_test(test_pipeline_close_after_flush_flushes_first),
        cmocka_unit_test(test_pipeline_adds_handlers_as_values_all_or_none),
    };
    return cmocka_run_group_tests_name("pipeline.pipeline", tests, NULL, NULL);
}
