/*
 * pipeline/handler/ through the embedded channel and its virtual clock: idle events at the
 * right times (reader, writer, all; the first flag; activity postpones them), the read and
 * write timeouts (an error and one close), the logging handler's entries and hex dumps, and
 * the flushes the flush consolidation handler lets reach the head. Nothing leaked: every
 * channel finishes clean, and the ASan build checks the memory.
 *
 * Timeouts are 10 s and steps at least 1 s: the virtual clock runs on top of the real one, so
 * the real time a test takes (more under sanitizers) must stay far below any step.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/channel.h>
#include <eddy/codec.h>
#include <eddy/handler.h>
#include <eddy/http.h>
#include <eddy/resp.h>
#include <eddy/pipeline.h>

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/wait_util.h"

static eddy_msg_t *text(const char *s)
{
    return eddy_buf_msg(eddy_buf_from_str(s));
}

/* Release every message at one end; returns how many there were. */
static size_t drain(eddy_channel_t *ch, bool inbound)
{
    size_t n = 0;
    eddy_msg_t *msg;
    while ((msg = inbound ? eddy_embedded_read_inbound(ch) : eddy_embedded_read_outbound(ch)) !=
           NULL) {
        eddy_msg_release(msg);
        n++;
    }
    return n;
}

/* Add a handler last; a handler's constructor must have made its state. */
static void add(eddy_channel_t *ch, const char *name, const eddy_handler_ops_t *ops, void *state,
                eddy_state_free_cb free_state)
{
    assert_true(state != NULL || free_state == NULL);
    assert_int_equal(
        eddy_pipeline_add_last(eddy_channel_pipeline(ch), name, ops, state, free_state), 0);
}

/* ---------------------------------------------------------------------------------------
 * Test handlers: state on the test's stack, added with no free_state
 */

/* Counts the flushes and closes that pass it toward the head. */
typedef struct counts_s {
    int flushes, closes;
} counts_t;

static void count_close(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    counts_t *c = eddy_ctx_state(ctx);
    c->closes++;
    eddy_ctx_close(ctx, p);
}

static void count_flush(eddy_ctx_t *ctx)
{
    counts_t *c = eddy_ctx_state(ctx);
    c->flushes++;
    eddy_ctx_flush(ctx);
}

static const eddy_handler_ops_t count_ops = {
    .name = "count", .sharable = true, .close = count_close, .flush = count_flush};

/* Keeps writes while hold is set, promises incomplete, until swallow_complete() or removal. */
typedef struct swallow_s {
    bool hold;
    size_t n;
    eddy_msg_t *msg[8];
    eddy_promise_t *p[8];
} swallow_t;

static void swallow_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    swallow_t *s = eddy_ctx_state(ctx);
    if (!s->hold || s->n == 8) {
        eddy_ctx_write(ctx, msg, p);
        return;
    }
    s->msg[s->n] = msg;
    s->p[s->n] = p != NULL ? eddy_future_retain(p) : NULL;
    s->n++;
}

/* Complete the held writes with err (0: written), their messages released. */
static void swallow_complete(swallow_t *s, int err)
{
    for (size_t i = 0; i < s->n; i++) {
        eddy_msg_release(s->msg[i]);
        if (s->p[i] != NULL) {
            if (err < 0) {
                eddy_promise_fail(s->p[i], err);
            } else {
                eddy_promise_succeed(s->p[i], NULL);
            }
            eddy_future_release(s->p[i]);
        }
    }
    s->n = 0;
}

static void swallow_removed(eddy_ctx_t *ctx)
{
    swallow_complete(eddy_ctx_state(ctx), EDDY_ECLOSED);
}

static const eddy_handler_ops_t swallow_ops = {
    .name = "swallow", .handler_removed = swallow_removed, .write = swallow_write};

/* Records the idle events that pass it, with their data. */
typedef struct idle_rec_s {
    size_t n;
    eddy_idle_event_t ev[16];
} idle_rec_t;

static void rec_user_event(eddy_ctx_t *ctx, int event, void *data)
{
    idle_rec_t *r = eddy_ctx_state(ctx);
    if (event >= EDDY_EVENT_READER_IDLE && event <= EDDY_EVENT_ALL_IDLE && r->n < 16) {
        const eddy_idle_event_t *e = data;
        assert_non_null(e);
        assert_int_equal(e->state, event);
        r->ev[r->n++] = *e;
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

static const eddy_handler_ops_t idle_rec_ops = {.name = "idle_rec",
                                                .user_event_triggered = rec_user_event};

static void assert_idle(const idle_rec_t *r, size_t n, int state, bool first)
{
    assert_int_equal(r->n, n);
    assert_int_equal(r->ev[n - 1].state, state);
    assert_int_equal(r->ev[n - 1].first, first);
}

/* A channel with the idle handler (and a recorder after it), swallow first when given. */
static eddy_channel_t *idle_channel(int64_t reader_ms, int64_t writer_ms, int64_t all_ms,
                                    idle_rec_t *r, swallow_t *sw)
{
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    if (sw != NULL) {
        add(ch, "swallow", &swallow_ops, sw, NULL);
    }
    add(ch, "idle", eddy_idle_state_handler_ops(),
        eddy_idle_state_handler_new(reader_ms, writer_ms, all_ms), eddy_free_state);
    add(ch, "rec", &idle_rec_ops, r, NULL);
    return ch;
}

/* ---------------------------------------------------------------------------------------
 * The idle state handler
 */

static void
test_idle_state_handler_fires_reader_idle_after_the_timeout_then_every_period(void **state)
{
    (void)state;
    idle_rec_t r = {0};
    eddy_channel_t *ch = idle_channel(10000, 0, 0, &r, NULL);
    eddy_embedded_advance_time(ch, 9000);
    assert_int_equal(r.n, 0);
    eddy_embedded_advance_time(ch, 1000);
    assert_idle(&r, 1, EDDY_EVENT_READER_IDLE, true);
    eddy_embedded_advance_time(ch, 9000);
    assert_int_equal(r.n, 1);
    eddy_embedded_advance_time(ch, 1000);
    assert_idle(&r, 2, EDDY_EVENT_READER_IDLE, false);
    eddy_embedded_advance_time(ch, 10000);
    assert_idle(&r, 3, EDDY_EVENT_READER_IDLE, false);
    int events[8];
    assert_int_equal(eddy_embedded_events(ch, events, 8), 3); /* passed on to the tail */
    assert_int_equal(events[2], EDDY_EVENT_READER_IDLE);
    assert_true(eddy_embedded_finish(ch));
}

static void test_idle_state_handler_postpones_reader_idle_after_a_read(void **state)
{
    (void)state;
    idle_rec_t r = {0};
    eddy_channel_t *ch = idle_channel(10000, 0, 0, &r, NULL);
    eddy_embedded_advance_time(ch, 10000);
    assert_idle(&r, 1, EDDY_EVENT_READER_IDLE, true);
    eddy_embedded_advance_time(ch, 5000);
    assert_true(eddy_embedded_write_inbound(ch, text("ping"))); /* read at 15 s */
    assert_int_equal(drain(ch, true), 1);
    eddy_embedded_advance_time(ch, 5000); /* the timer due at 20 s waits for 25 s */
    eddy_embedded_advance_time(ch, 4000);
    assert_int_equal(r.n, 1);
    eddy_embedded_advance_time(ch, 1000);
    assert_idle(&r, 2, EDDY_EVENT_READER_IDLE, true); /* the first since the read */
    assert_true(eddy_embedded_finish(ch));
}

static void test_idle_state_handler_counts_a_read_batch_in_progress_as_activity(void **state)
{
    (void)state;
    idle_rec_t r = {0};
    eddy_channel_t *ch = idle_channel(10000, 0, 0, &r, NULL);
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    eddy_pipeline_fire_channel_read(p, text("part")); /* no read_complete yet */
    eddy_embedded_advance_time(ch, 10000);
    assert_int_equal(r.n, 0);
    eddy_pipeline_fire_channel_read_complete(p); /* read at 10 s */
    eddy_embedded_advance_time(ch, 9000);
    assert_int_equal(r.n, 0);
    eddy_embedded_advance_time(ch, 1000);
    assert_idle(&r, 1, EDDY_EVENT_READER_IDLE, true);
    assert_int_equal(drain(ch, true), 1);
    assert_true(eddy_embedded_finish(ch));
}

static void test_idle_state_handler_fires_writer_idle_unless_a_write_completed(void **state)
{
    (void)state;
    idle_rec_t r = {0};
    swallow_t sw = {0};
    eddy_channel_t *ch = idle_channel(0, 10000, 0, &r, &sw);
    eddy_embedded_advance_time(ch, 10000);
    assert_idle(&r, 1, EDDY_EVENT_WRITER_IDLE, true);
    eddy_embedded_advance_time(ch, 5000);
    assert_true(eddy_embedded_write_outbound(ch, text("a"))); /* written at 15 s */
    assert_int_equal(drain(ch, false), 1);
    eddy_embedded_advance_time(ch, 5000);
    eddy_embedded_advance_time(ch, 4000);
    assert_int_equal(r.n, 1);
    eddy_embedded_advance_time(ch, 1000);
    assert_idle(&r, 2, EDDY_EVENT_WRITER_IDLE, true);

    /* A write that has not completed is no activity. */
    sw.hold = true;
    eddy_embedded_advance_time(ch, 5000);
    assert_false(eddy_embedded_write_outbound(ch, text("stuck"))); /* at 30 s */
    eddy_embedded_advance_time(ch, 5000);
    assert_idle(&r, 3, EDDY_EVENT_WRITER_IDLE, false);
    swallow_complete(&sw, 0); /* it completes at 35 s */
    eddy_embedded_advance_time(ch, 9000);
    assert_int_equal(r.n, 3);
    eddy_embedded_advance_time(ch, 1000);
    assert_idle(&r, 4, EDDY_EVENT_WRITER_IDLE, true);
    assert_true(eddy_embedded_finish(ch));
}

static void test_idle_state_handler_fires_all_idle_when_neither_reads_nor_writes(void **state)
{
    (void)state;
    idle_rec_t r = {0};
    eddy_channel_t *ch = idle_channel(0, 0, 10000, &r, NULL);
    eddy_embedded_advance_time(ch, 10000);
    assert_idle(&r, 1, EDDY_EVENT_ALL_IDLE, true);
    eddy_embedded_advance_time(ch, 5000);
    assert_true(eddy_embedded_write_inbound(ch, text("in"))); /* read at 15 s */
    assert_int_equal(drain(ch, true), 1);
    eddy_embedded_advance_time(ch, 5000);
    eddy_embedded_advance_time(ch, 2000);
    assert_true(eddy_embedded_write_outbound(ch, text("out"))); /* written at 22 s */
    assert_int_equal(drain(ch, false), 1);
    eddy_embedded_advance_time(ch, 3000);
    eddy_embedded_advance_time(ch, 6000);
    assert_int_equal(r.n, 1);
    eddy_embedded_advance_time(ch, 1000);
    assert_idle(&r, 2, EDDY_EVENT_ALL_IDLE, true);
    eddy_embedded_advance_time(ch, 10000);
    assert_idle(&r, 3, EDDY_EVENT_ALL_IDLE, false);
    assert_true(eddy_embedded_finish(ch));
}

static void test_idle_state_handler_listens_on_the_callers_promise(void **state)
{
    (void)state;
    idle_rec_t r = {0};
    eddy_channel_t *ch = idle_channel(0, 10000, 0, &r, NULL);
    eddy_embedded_advance_time(ch, 5000);
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    eddy_promise_t *unowned = eddy_promise_new(NULL);
    eddy_channel_write(ch, text("mine"), p);
    eddy_channel_write_and_flush(ch, text("also"), unowned); /* both written at 5 s */
    assert_int_equal(eddy_future_error(p), 0);
    assert_int_equal(eddy_future_error(unowned), 0);
    eddy_future_release(p);
    eddy_future_release(unowned);
    assert_int_equal(drain(ch, false), 2);
    eddy_embedded_advance_time(ch, 9000);
    assert_int_equal(r.n, 0);
    eddy_embedded_advance_time(ch, 1000);
    assert_idle(&r, 1, EDDY_EVENT_WRITER_IDLE, true);
    assert_true(eddy_embedded_finish(ch));
}

static void test_idle_state_handler_stops_when_removed(void **state)
{
    (void)state;
    idle_rec_t r = {0};
    swallow_t sw = {.hold = true};
    eddy_channel_t *ch = idle_channel(10000, 10000, 10000, &r, &sw);
    assert_false(eddy_embedded_write_outbound(ch, text("held"))); /* its listener waits */
    eddy_embedded_advance_time(ch, 5000);
    assert_int_equal(eddy_pipeline_remove(eddy_channel_pipeline(ch), "idle"), 0);
    eddy_embedded_advance_time(ch, 30000);
    assert_int_equal(r.n, 0);
    swallow_complete(&sw, 0); /* the listener runs after the handler is gone */
    assert_true(eddy_embedded_finish(ch));
}

/* ---------------------------------------------------------------------------------------
 * Read and write timeouts
 */

static void test_read_timeout_handler_fails_and_closes_the_channel_once(void **state)
{
    (void)state;
    counts_t c = {0};
    eddy_channel_t *ch = eddy_embedded_channel_new();
    add(ch, "count", &count_ops, &c, NULL);
    add(ch, "timeout", eddy_read_timeout_handler_ops(), eddy_read_timeout_handler_new(10000),
        eddy_free_state);
    eddy_embedded_advance_time(ch, 5000);
    assert_true(eddy_embedded_write_inbound(ch, text("in"))); /* read at 5 s */
    assert_int_equal(drain(ch, true), 1);
    eddy_embedded_advance_time(ch, 9000);
    assert_true(eddy_channel_is_open(ch));
    assert_int_equal(eddy_embedded_error(ch), 0);
    eddy_embedded_advance_time(ch, 1000);
    assert_int_equal(eddy_embedded_error(ch), EDDY_ETIMEDOUT);
    assert_false(eddy_channel_is_open(ch));
    assert_int_equal(c.closes, 1);
    eddy_embedded_advance_time(ch, 30000);
    assert_int_equal(eddy_embedded_error(ch), 0);
    assert_int_equal(c.closes, 1);
    assert_true(eddy_embedded_finish(ch));
}

static eddy_channel_t *write_timeout_channel(counts_t *c, swallow_t *sw)
{
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    add(ch, "count", &count_ops, c, NULL);
    add(ch, "swallow", &swallow_ops, sw, NULL);
    add(ch, "timeout", eddy_write_timeout_handler_ops(), eddy_write_timeout_handler_new(10000),
        eddy_free_state);
    return ch;
}

static void test_write_timeout_handler_fails_and_closes_when_a_write_does_not_complete(void **state)
{
    (void)state;
    counts_t c = {0};
    swallow_t sw = {.hold = true};
    eddy_channel_t *ch = write_timeout_channel(&c, &sw);
    assert_false(eddy_embedded_write_outbound(ch, text("never")));
    eddy_embedded_advance_time(ch, 9000);
    assert_true(eddy_channel_is_open(ch));
    assert_int_equal(eddy_embedded_error(ch), 0);
    eddy_embedded_advance_time(ch, 1000);
    assert_int_equal(eddy_embedded_error(ch), EDDY_ETIMEDOUT);
    assert_false(eddy_channel_is_open(ch));
    assert_int_equal(c.closes, 1);
    assert_int_equal(sw.n, 0); /* the close removed swallow, which failed the write */
    eddy_embedded_advance_time(ch, 30000);
    assert_int_equal(eddy_embedded_error(ch), 0);
    assert_int_equal(c.closes, 1);
    assert_true(eddy_embedded_finish(ch));
}

static void test_write_timeout_handler_cancels_the_timer_of_a_completed_write(void **state)
{
    (void)state;
    counts_t c = {0};
    swallow_t sw = {0};
    eddy_channel_t *ch = write_timeout_channel(&c, &sw);
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    eddy_channel_write_and_flush(ch, text("now"), p); /* completes at once */
    assert_int_equal(eddy_future_error(p), 0);
    eddy_future_release(p);
    assert_true(eddy_embedded_write_outbound(ch, text("now too")));
    assert_int_equal(drain(ch, false), 2);

    sw.hold = true;
    assert_false(eddy_embedded_write_outbound(ch, text("soon")));
    eddy_embedded_advance_time(ch, 5000);
    swallow_complete(&sw, 0); /* completes within its time */
    eddy_embedded_advance_time(ch, 20000);
    assert_true(eddy_channel_is_open(ch));
    assert_int_equal(eddy_embedded_error(ch), 0);
    assert_int_equal(c.closes, 0);
    assert_true(eddy_embedded_finish(ch));
}

static void test_write_timeout_handler_forgets_pending_writes_when_removed(void **state)
{
    (void)state;
    counts_t c = {0};
    swallow_t sw = {.hold = true};
    eddy_channel_t *ch = write_timeout_channel(&c, &sw);
    assert_false(eddy_embedded_write_outbound(ch, text("held")));
    assert_false(eddy_embedded_write_outbound(ch, text("held too")));
    eddy_embedded_advance_time(ch, 5000);
    assert_int_equal(eddy_pipeline_remove(eddy_channel_pipeline(ch), "timeout"), 0);
    eddy_embedded_advance_time(ch, 20000);
    assert_int_equal(eddy_embedded_error(ch), 0);
    assert_true(eddy_channel_is_open(ch));
    /* finish fails the held writes: their listeners run after the handler is gone. */
    assert_true(eddy_embedded_finish(ch));
}

/* ---------------------------------------------------------------------------------------
 * The logging handler
 */

typedef struct capture_s {
    size_t n;
    char *entry[32];
    eddy_log_level_t level[32];
} capture_t;

static void capture(eddy_log_level_t level, const char *text_, void *arg)
{
    capture_t *c = arg;
    assert_true(c->n < 32);
    c->level[c->n] = level;
    c->entry[c->n] = strdup(text_);
    c->n++;
}

static void capture_free(capture_t *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->entry[i]);
    }
    c->n = 0;
}

/* Entry i is "[id: 0x...] " then rest. */
static void assert_entry(const capture_t *c, size_t i, eddy_channel_t *ch, const char *rest)
{
    char want[2048];
    snprintf(want, sizeof(want), "[id: 0x%08llx] %s", (unsigned long long)eddy_channel_id(ch),
             rest);
    assert_true(i < c->n);
    assert_string_equal(c->entry[i], want);
}

#define DUMP_HEAD                                                                                  \
    "         +-------------------------------------------------+\n"                               \
    "         |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |\n"                               \
    "+--------+-------------------------------------------------+----------------+\n"
#define DUMP_RULE "+--------+-------------------------------------------------+----------------+"
#define ROW_HELLO "|00000000| 48 65 6c 6c 6f 2c 20 77 6f 72 6c 64 21 0d 0a 00 |Hello, world!...|\n"
#define ROW_TAIL "|00000010| 7f ff 5a                                        |..Z             |\n"
#define ROW_HEX "|00000000| 30 31 32 33 34 35 36 37 38 39 61 62 63 64 65 66 |0123456789abcdef|\n"

static eddy_channel_t *logging_channel(capture_t *c, eddy_log_level_t level,
                                       eddy_log_format_t format, size_t max_dump)
{
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    eddy_logging_options_t o = {
        .level = level, .format = format, .sink = capture, .sink_arg = c, .max_dump = max_dump};
    add(ch, "log", eddy_logging_handler_ops(), eddy_logging_handler_new(&o), eddy_free_state);
    return ch;
}

static void test_logging_handler_logs_events_and_hex_dumps_in_nettys_format(void **state)
{
    (void)state;
    capture_t c = {0};
    eddy_channel_t *ch = logging_channel(&c, 0, EDDY_LOG_HEX_DUMP, 0);
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);

    static const char bytes[] = "Hello, world!\r\n\0\x7f\xffZ";
    eddy_msg_t *in = eddy_buf_msg(eddy_buf_from(bytes, sizeof(bytes) - 1));
    assert_true(eddy_embedded_write_inbound(ch, in));
    assert_ptr_equal(eddy_embedded_read_inbound(ch), in); /* passed on unchanged */
    eddy_msg_release(in);
    assert_int_equal(c.n, 2);
    assert_entry(&c, 0, ch, "READ: 19B\n" DUMP_HEAD ROW_HELLO ROW_TAIL DUMP_RULE);
    assert_entry(&c, 1, ch, "READ COMPLETE");
    assert_int_equal(c.level[0], EDDY_LOG_DEBUG);

    eddy_msg_t *out = eddy_buf_msg(eddy_buf_from("0123456789abcdef", 16));
    assert_true(eddy_embedded_write_outbound(ch, out));
    assert_ptr_equal(eddy_embedded_read_outbound(ch), out);
    eddy_msg_release(out);
    assert_entry(&c, 2, ch, "WRITE: 16B\n" DUMP_HEAD ROW_HEX DUMP_RULE);
    assert_entry(&c, 3, ch, "FLUSH");

    assert_true(eddy_embedded_write_inbound(ch, eddy_buf_msg(eddy_buf_new(0))));
    assert_int_equal(drain(ch, true), 1);
    assert_entry(&c, 4, ch, "READ: 0B");
    assert_entry(&c, 5, ch, "READ COMPLETE");

    eddy_pipeline_fire_user_event(p, EDDY_EVENT_USER + 1, NULL);
    eddy_pipeline_fire_user_event(p, EDDY_EVENT_INPUT_SHUTDOWN, NULL);
    int events[4];
    assert_int_equal(eddy_embedded_events(ch, events, 4), 2);
    assert_int_equal(events[0], EDDY_EVENT_USER + 1);
    assert_entry(&c, 6, ch, "USER_EVENT: 1025");
    assert_entry(&c, 7, ch, "USER_EVENT: INPUT_SHUTDOWN");
    eddy_pipeline_fire_exception(p, EDDY_EIO);
    assert_int_equal(eddy_embedded_error(ch), EDDY_EIO);
    assert_entry(&c, 8, ch, "EXCEPTION: EIO (i/o error)");

    eddy_channel_close(ch, NULL);
    assert_int_equal(c.n, 12);
    assert_entry(&c, 9, ch, "CLOSE");
    assert_entry(&c, 10, ch, "INACTIVE");
    assert_entry(&c, 11, ch, "UNREGISTERED");
    assert_true(eddy_embedded_finish(ch));
    capture_free(&c);
}

static void test_logging_handler_bounds_dumps_and_dumps_composites(void **state)
{
    (void)state;
    capture_t c = {0};
    eddy_channel_t *ch = logging_channel(&c, EDDY_LOG_TRACE, EDDY_LOG_HEX_DUMP, 16);
    eddy_composite_t *comp = eddy_composite_new(0);
    assert_int_equal(eddy_composite_add(comp, eddy_buf_from_str("0123456789")), 0);
    assert_int_equal(eddy_composite_add(comp, eddy_buf_from_str("abcdefghij")), 0);
    assert_true(eddy_embedded_write_inbound(ch, eddy_composite_msg(comp)));
    assert_int_equal(drain(ch, true), 1);
    assert_entry(&c, 0, ch, "READ: 20B\n" DUMP_HEAD ROW_HEX DUMP_RULE "\n(4 more bytes not shown)");
    assert_int_equal(c.level[0], EDDY_LOG_TRACE);
    assert_true(eddy_embedded_finish(ch));
    capture_free(&c);
}

static void free_plain(eddy_msg_t *msg)
{
    free(msg);
}

static void test_logging_handler_simple_format_logs_sizes_and_passes_other_messages(void **state)
{
    (void)state;
    capture_t c = {0};
    eddy_channel_t *ch = logging_channel(&c, EDDY_LOG_INFO, EDDY_LOG_SIMPLE, 0);
    /* Sharable: a second one in the same pipeline logs each event again. */
    eddy_logging_options_t o = {.format = EDDY_LOG_SIMPLE, .sink = capture, .sink_arg = &c};
    add(ch, "log2", eddy_logging_handler_ops(), eddy_logging_handler_new(&o), eddy_free_state);

    assert_true(eddy_embedded_write_inbound(ch, text("Hello")));
    assert_int_equal(drain(ch, true), 1);
    assert_int_equal(c.n, 4);
    assert_entry(&c, 0, ch, "READ: 5B");
    assert_entry(&c, 1, ch, "READ: 5B");
    assert_int_equal(c.level[0], EDDY_LOG_INFO);
    assert_int_equal(c.level[1], EDDY_LOG_DEBUG);

    eddy_msg_t *msg = malloc(sizeof(*msg));
    eddy_msg_init(msg, EDDY_MSG_USER + 44, free_plain);
    assert_true(eddy_embedded_write_inbound(ch, msg));
    assert_ptr_equal(eddy_embedded_read_inbound(ch), msg);
    eddy_msg_release(msg);
    assert_entry(&c, 4, ch, "READ: message of type 300");
    assert_true(eddy_embedded_finish(ch));
    capture_free(&c);
}

static void test_logging_handler_writes_to_a_file_through_the_ready_sink(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    eddy_channel_t *ch = eddy_embedded_channel_new();
    eddy_logging_options_t o = {.level = EDDY_LOG_WARN, .sink = eddy_log_to_file, .sink_arg = f};
    add(ch, "log", eddy_logging_handler_ops(), eddy_logging_handler_new(&o), eddy_free_state);
    assert_true(eddy_embedded_write_inbound(ch, text("")));
    assert_int_equal(drain(ch, true), 1);
    char want[256], got[256] = {0};
    unsigned long long id = (unsigned long long)eddy_channel_id(ch);
    snprintf(want, sizeof(want),
             "eddy: WARN [id: 0x%08llx] READ: 0B\neddy: WARN [id: 0x%08llx] READ COMPLETE\n", id,
             id);
    rewind(f);
    size_t n = fread(got, 1, sizeof(got) - 1, f);
    assert_int_equal(n, strlen(want));
    assert_string_equal(got, want);
    assert_true(eddy_embedded_finish(ch)); /* logs INACTIVE and UNREGISTERED there too */
    fclose(f);
}

/* Without a sink of its own the handler logs through the library's log: the hook a user set
 * gets its entries, at the handler's level; below the log's threshold there are none. */
static void test_logging_handler_without_a_sink_logs_through_the_log_hook(void **state)
{
    (void)state;
    capture_t c = {0};
    eddy_log_level_t was = eddy_log_level();
    eddy_log_set_hook(capture, &c);
    eddy_log_set_level(EDDY_LOG_DEBUG);
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    eddy_logging_options_t o = {.format = EDDY_LOG_SIMPLE};
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_logging_handler(&o)),
                     0);
    assert_true(eddy_embedded_write_inbound(ch, text("Hello")));
    assert_int_equal(drain(ch, true), 1);
    assert_int_equal(c.n, 2);
    assert_entry(&c, 0, ch, "READ: 5B");
    assert_entry(&c, 1, ch, "READ COMPLETE");
    assert_int_equal(c.level[0], EDDY_LOG_DEBUG);

    eddy_log_set_level(EDDY_LOG_INFO); /* DEBUG entries are dropped now */
    assert_true(eddy_embedded_write_inbound(ch, text("Hello")));
    assert_int_equal(drain(ch, true), 1);
    assert_int_equal(c.n, 2);
    eddy_log_set_hook(NULL, NULL);
    eddy_log_set_level(was);
    assert_true(eddy_embedded_finish(ch));
    capture_free(&c);
}

/* ---------------------------------------------------------------------------------------
 * The flush consolidation handler
 */

/* Answers every read with a write and a flush. */
static void echo_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_msg_release(msg);
    eddy_ctx_write_and_flush(ctx, text("re"), NULL);
}

static const eddy_handler_ops_t echo_ops = {.name = "echo", .channel_read = echo_read};

/* count (flushes reaching the head), the handler, echo. */
static eddy_channel_t *flush_channel(counts_t *c, unsigned after, bool consolidate)
{
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    add(ch, "count", &count_ops, c, NULL);
    add(ch, "fc", eddy_flush_consolidation_handler_ops(),
        eddy_flush_consolidation_handler_new(after, consolidate), eddy_free_state);
    add(ch, "echo", &echo_ops, NULL, NULL);
    return ch;
}

static void reads(eddy_channel_t *ch, int n)
{
    for (int i = 0; i < n; i++) {
        eddy_pipeline_fire_channel_read(eddy_channel_pipeline(ch), text("q"));
    }
}

static void test_flush_consolidation_holds_flushes_until_read_complete(void **state)
{
    (void)state;
    counts_t c = {0};
    eddy_channel_t *ch = flush_channel(&c, 0, false);
    reads(ch, 3);
    assert_int_equal(c.flushes, 0);
    eddy_pipeline_fire_channel_read_complete(eddy_channel_pipeline(ch));
    assert_int_equal(c.flushes, 1);
    assert_int_equal(drain(ch, false), 3);
    eddy_pipeline_fire_channel_read_complete(eddy_channel_pipeline(ch)); /* nothing held */
    assert_int_equal(c.flushes, 1);
    assert_true(eddy_embedded_finish(ch));
}

static void test_flush_consolidation_flushes_every_explicit_flush_after_flushes(void **state)
{
    (void)state;
    counts_t c = {0};
    eddy_channel_t *ch = flush_channel(&c, 2, false);
    reads(ch, 1);
    assert_int_equal(c.flushes, 0);
    reads(ch, 1);
    assert_int_equal(c.flushes, 1);
    reads(ch, 1);
    assert_int_equal(c.flushes, 1);
    eddy_pipeline_fire_channel_read_complete(eddy_channel_pipeline(ch));
    assert_int_equal(c.flushes, 2);
    assert_int_equal(drain(ch, false), 3);
    assert_true(eddy_embedded_finish(ch));
}

static void test_flush_consolidation_passes_flushes_outside_a_read(void **state)
{
    (void)state;
    counts_t c = {0};
    eddy_channel_t *ch = flush_channel(&c, 0, false);
    eddy_channel_write_and_flush(ch, text("a"), NULL);
    eddy_channel_write_and_flush(ch, text("b"), NULL);
    assert_int_equal(c.flushes, 2);
    assert_int_equal(drain(ch, false), 2);
    assert_true(eddy_embedded_finish(ch));
}

static void test_flush_consolidation_consolidates_outside_a_read_on_a_loop_task(void **state)
{
    (void)state;
    counts_t c = {0};
    eddy_channel_t *ch = flush_channel(&c, 3, true);
    eddy_channel_write_and_flush(ch, text("a"), NULL);
    eddy_channel_write_and_flush(ch, text("b"), NULL);
    assert_int_equal(c.flushes, 0);
    assert_true(eddy_embedded_run_pending(ch) >= 1);
    assert_int_equal(c.flushes, 1);
    assert_int_equal(drain(ch, false), 2);

    /* The limit flushes at once; the task scheduled before it then has nothing to do. */
    for (int i = 0; i < 3; i++) {
        eddy_channel_write_and_flush(ch, text("x"), NULL);
    }
    assert_int_equal(c.flushes, 2);
    eddy_embedded_run_pending(ch);
    assert_int_equal(c.flushes, 2);

    /* A read that starts before the task runs takes the flush over. */
    eddy_channel_write_and_flush(ch, text("y"), NULL);
    reads(ch, 1);
    eddy_embedded_run_pending(ch);
    assert_int_equal(c.flushes, 2);
    eddy_pipeline_fire_channel_read_complete(eddy_channel_pipeline(ch));
    assert_int_equal(c.flushes, 3);
    assert_int_equal(drain(ch, false), 5);
    assert_true(eddy_embedded_finish(ch));
}

static void
test_flush_consolidation_flushes_what_it_holds_on_close_removal_and_unwritability(void **state)
{
    (void)state;
    counts_t c = {0};
    eddy_channel_t *ch = flush_channel(&c, 0, false);
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);

    reads(ch, 1);
    eddy_pipeline_fire_exception(p, EDDY_EIO);
    assert_int_equal(eddy_embedded_error(ch), EDDY_EIO);
    assert_int_equal(c.flushes, 1);

    /* Unwritable: a large write past the high water mark lets the held flush go. */
    assert_int_equal(eddy_channel_set_option(ch, EDDY_WRITE_BUFFER_LOW_WATER_MARK, 4), 0);
    assert_int_equal(eddy_channel_set_option(ch, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, 8), 0);
    reads(ch, 1);
    assert_int_equal(c.flushes, 1);
    eddy_channel_write(ch, text("well past eight bytes"), NULL);
    assert_int_equal(c.flushes, 2);
    eddy_pipeline_fire_channel_read_complete(p); /* nothing held now */
    assert_int_equal(c.flushes, 2);
    eddy_channel_flush(ch);
    assert_int_equal(drain(ch, false), 3);

    reads(ch, 1);
    assert_int_equal(eddy_pipeline_remove(p, "fc"), 0);
    assert_int_equal(c.flushes, 4);
    assert_int_equal(drain(ch, false), 1);
    assert_true(eddy_embedded_finish(ch));

    /* Close: flushed first, so the answer is written, not failed. */
    c = (counts_t){0};
    ch = flush_channel(&c, 0, false);
    reads(ch, 1);
    eddy_channel_close(ch, NULL);
    assert_int_equal(c.closes, 1);
    assert_int_equal(c.flushes, 1);
    assert_int_equal(drain(ch, false), 1);
    assert_true(eddy_embedded_finish(ch));
}

/* On a socket channel nobody else holds: the loop task that does a consolidated flush must
 * keep the channel while a handler nearer the head closes it from inside the flush (as a
 * write error does), else the flush returns through a freed channel (ASan). */
static _Atomic int flush_closes;

static void close_on_flush(eddy_ctx_t *ctx)
{
    eddy_ctx_flush(ctx);
    atomic_fetch_add(&flush_closes, 1);
    eddy_ctx_close(ctx, NULL);
}

static const eddy_handler_ops_t close_on_flush_ops = {
    .name = "close_on_flush", .sharable = true, .flush = close_on_flush};

static int init_flush_client(eddy_channel_t *ch, void *arg)
{
    (void)arg;
    eddy_pipeline_t *p = eddy_channel_pipeline(ch);
    void *fc = eddy_flush_consolidation_handler_new(0, true);
    if (fc == NULL ||
        eddy_pipeline_add_last(p, "closer", &close_on_flush_ops, NULL, NULL) != 0 ||
        eddy_pipeline_add_last(p, "fc", eddy_flush_consolidation_handler_ops(), fc,
                               eddy_free_state) != 0) {
        return -1;
    }
    return 0;
}

static void write_and_flush_task(void *arg)
{
    eddy_channel_write_and_flush(arg, text("bye"), NULL);
}

static void
test_flush_consolidation_loop_task_survives_a_close_inside_its_flush(void **state)
{
    (void)state;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(lfd >= 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(lfd, 1), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
    eddy_addr_t addr;
    assert_int_equal(eddy_addr_ip(&addr, "127.0.0.1", ntohs(sin.sin_port)), 0);

    eddy_loop_t *loop = eddy_loop_new(NULL);
    assert_non_null(loop);
    assert_int_equal(eddy_loop_start(loop), 0);
    atomic_store(&flush_closes, 0);
    eddy_future_t *f = eddy_channel_connect(loop, &addr, NULL, init_flush_client, NULL);
    assert_int_equal(eddy_future_await(f, DEADLINE_MS), 0);
    assert_int_equal(eddy_future_error(f), 0);
    eddy_channel_t *ch = eddy_future_channel(f);
    int fd = accept(lfd, NULL, NULL);
    assert_true(fd >= 0);
    /* From here only the open channel's reference: ch stays valid until it closes, on the
     * loop, after this task. */
    eddy_future_release(f);
    assert_int_equal(eddy_loop_execute(loop, write_and_flush_task, ch), 0);
    WAIT_FOR(atomic_load(&flush_closes) == 1);
    char buf[8];
    assert_int_equal(recv(fd, buf, sizeof(buf), MSG_WAITALL), 3);
    assert_memory_equal(buf, "bye", 3);
    close(fd);
    close(lfd);
    assert_int_equal(eddy_future_await(eddy_loop_shutdown_gracefully(loop, 0, 5000), DEADLINE_MS),
                     0);
    assert_int_equal(eddy_loop_free(loop), 0);
}

/* ---------------------------------------------------------------------------------------
 * The message deadline handler
 */

/* The deadline first, then decoder (its state), on an embedded channel. */
static eddy_channel_t *deadline_channel(int64_t ms, const eddy_handler_ops_t *dec_ops,
                                        eddy_decoder_t *dec)
{
    eddy_channel_t *ch = eddy_embedded_channel_new();
    add(ch, "deadline", eddy_message_deadline_handler_ops(), eddy_message_deadline_handler_new(ms),
        eddy_free_state);
    add(ch, "decoder", dec_ops, dec, eddy_free_state);
    return ch;
}

static eddy_channel_t *frame_deadline_channel(int64_t ms)
{
    return deadline_channel(ms, eddy_length_field_decoder_ops(),
                            eddy_length_field_decoder_new(1024, 0, 2, 0, 2));
}

static void feed(eddy_channel_t *ch, const void *bytes, size_t n)
{
    eddy_embedded_write_inbound(ch, eddy_buf_msg(eddy_buf_from(bytes, n)));
}

static void test_message_deadline_closes_a_frame_that_trickles(void **state)
{
    (void)state;
    eddy_channel_t *ch = frame_deadline_channel(1000);
    const uint8_t frame[] = {0, 4, 'a', 'b', 'c', 'd'};
    /* A byte every 300 ms: each read restarts a read timeout, not this one. */
    for (size_t i = 0; i < 3; i++) {
        feed(ch, frame + i, 1);
        eddy_embedded_advance_time(ch, 300);
        assert_true(eddy_channel_is_open(ch));
    }
    feed(ch, frame + 3, 1);
    eddy_embedded_advance_time(ch, 99);
    assert_true(eddy_channel_is_open(ch));
    eddy_embedded_advance_time(ch, 1);
    assert_false(eddy_channel_is_open(ch));
    assert_int_equal(eddy_embedded_error(ch), EDDY_ETIMEDOUT);
    assert_int_equal(drain(ch, true), 0);
    eddy_embedded_finish(ch);
}

static void test_message_deadline_times_each_message_from_its_own_start(void **state)
{
    (void)state;
    eddy_channel_t *ch = frame_deadline_channel(1000);
    const uint8_t f[] = {0, 2, 'x', 'y'};
    /* Every read completes the message under way and begins the next: each takes 700 ms,
     * the stream much longer than the deadline. */
    feed(ch, f, 3);
    for (int i = 0; i < 6; i++) {
        eddy_embedded_advance_time(ch, 700);
        uint8_t rest_and_next[] = {f[3], f[0], f[1], f[2]};
        feed(ch, rest_and_next, sizeof(rest_and_next));
        assert_true(eddy_channel_is_open(ch));
    }
    assert_int_equal(drain(ch, true), 6);
    /* Between messages nothing is timed. */
    feed(ch, f + 3, 1);
    assert_int_equal(drain(ch, true), 1);
    eddy_embedded_advance_time(ch, 60000);
    assert_true(eddy_channel_is_open(ch));
    assert_true(eddy_embedded_finish(ch));
}

static void test_message_deadline_covers_an_http_request_head_and_body(void **state)
{
    (void)state;
    /* Pipelined whole requests pass; a keep-alive connection waits untimed between them. */
    eddy_channel_t *ch = deadline_channel(1000, eddy_http_request_decoder_ops(),
                                          eddy_http_request_decoder_new(NULL));
    const char *two = "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n";
    feed(ch, two, strlen(two));
    eddy_embedded_advance_time(ch, 5000);
    assert_true(eddy_channel_is_open(ch));
    drain(ch, true);
    /* A head that never ends, a few bytes at a time. */
    const char *head = "GET /slow HTTP/1.1\r\nHost: a\r\nX-Slow: ";
    feed(ch, head, strlen(head));
    for (int i = 0; i < 3; i++) {
        eddy_embedded_advance_time(ch, 300);
        feed(ch, "a", 1);
    }
    eddy_embedded_advance_time(ch, 100);
    assert_false(eddy_channel_is_open(ch));
    assert_int_equal(eddy_embedded_error(ch), EDDY_ETIMEDOUT);
    eddy_embedded_finish(ch);

    /* A body trickling after a whole head is still the same request. */
    ch = deadline_channel(1000, eddy_http_request_decoder_ops(), eddy_http_request_decoder_new(NULL));
    const char *post = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n";
    feed(ch, post, strlen(post));
    for (int i = 0; i < 4; i++) {
        eddy_embedded_advance_time(ch, 300);
        feed(ch, "b", 1);
    }
    assert_false(eddy_channel_is_open(ch));
    assert_int_equal(eddy_embedded_error(ch), EDDY_ETIMEDOUT);
    drain(ch, true);
    eddy_embedded_finish(ch);
}

static void test_message_deadline_covers_a_resp_command(void **state)
{
    (void)state;
    eddy_channel_t *ch =
        deadline_channel(500, eddy_resp_decoder_ops(), eddy_resp_decoder_new(NULL));
    const char *partial = "*2\r\n$3\r\nGET\r\n";
    feed(ch, partial, strlen(partial));
    eddy_embedded_advance_time(ch, 499);
    assert_true(eddy_channel_is_open(ch));
    eddy_embedded_advance_time(ch, 1);
    assert_false(eddy_channel_is_open(ch));
    assert_int_equal(eddy_embedded_error(ch), EDDY_ETIMEDOUT);
    eddy_embedded_finish(ch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_idle_state_handler_fires_reader_idle_after_the_timeout_then_every_period),
        cmocka_unit_test(test_idle_state_handler_postpones_reader_idle_after_a_read),
        cmocka_unit_test(test_idle_state_handler_counts_a_read_batch_in_progress_as_activity),
        cmocka_unit_test(test_idle_state_handler_fires_writer_idle_unless_a_write_completed),
        cmocka_unit_test(test_idle_state_handler_fires_all_idle_when_neither_reads_nor_writes),
        cmocka_unit_test(test_idle_state_handler_listens_on_the_callers_promise),
        cmocka_unit_test(test_idle_state_handler_stops_when_removed),
        cmocka_unit_test(test_read_timeout_handler_fails_and_closes_the_channel_once),
        cmocka_unit_test(test_message_deadline_closes_a_frame_that_trickles),
        cmocka_unit_test(test_message_deadline_times_each_message_from_its_own_start),
        cmocka_unit_test(test_message_deadline_covers_an_http_request_head_and_body),
        cmocka_unit_test(test_message_deadline_covers_a_resp_command),
        cmocka_unit_test(
            test_write_timeout_handler_fails_and_closes_when_a_write_does_not_complete),
        cmocka_unit_test(test_write_timeout_handler_cancels_the_timer_of_a_completed_write),
        cmocka_unit_test(test_write_timeout_handler_forgets_pending_writes_when_removed),
        cmocka_unit_test(test_logging_handler_logs_events_and_hex_dumps_in_nettys_format),
        cmocka_unit_test(test_logging_handler_bounds_dumps_and_dumps_composites),
        cmocka_unit_test(test_logging_handler_simple_format_logs_sizes_and_passes_other_messages),
        cmocka_unit_test(test_logging_handler_writes_to_a_file_through_the_ready_sink),
        cmocka_unit_test(test_logging_handler_without_a_sink_logs_through_the_log_hook),
        cmocka_unit_test(test_flush_consolidation_holds_flushes_until_read_complete),
        cmocka_unit_test(test_flush_consolidation_flushes_every_explicit_flush_after_flushes),
        cmocka_unit_test(test_flush_consolidation_passes_flushes_outside_a_read),
        cmocka_unit_test(test_flush_consolidation_consolidates_outside_a_read_on_a_loop_task),
        cmocka_unit_test(
            test_flush_consolidation_flushes_what_it_holds_on_close_removal_and_unwritability),
        cmocka_unit_test(test_flush_consolidation_loop_task_survives_a_close_inside_its_flush),
    };
    return cmocka_run_group_tests_name("pipeline.handler", tests, NULL, NULL);
}
