/*
 * The connection handler (Netty's Http2FrameCodec): bytes in through nghttp2_session_mem_recv,
 * frames out through nghttp2_session_mem_send into one gathering buffer written down the
 * pipeline, DATA beside it without a copy (stream.c). One flush per read batch; nothing is
 * produced while the channel is unwritable, and nothing is read then either (the 2019
 * floods: a peer that does not read gets no more of our answers queued).
 */
#include "internal.h"

#include "buffer/layer.h"
#include "pipeline/layer.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int64_t eddy__h2_now(const eddy__h2_conn_t *c)
{
    return eddy_loop_now_ns(eddy_ctx_loop(c->ctx));
}

#define MS (INT64_C(1000000))

static void options_default(eddy_h2_options_t *o)
{
#define DEF(f, v)                                                                              \
    if (o->f == 0) {                                                                           \
        o->f = (v);                                                                            \
    }
    DEF(max_concurrent_streams, 100);
    DEF(initial_window_size, 65535);
    DEF(connection_window, 4u << 20);
    DEF(max_frame_size, 16384);
    DEF(max_header_list_size, 16384);
    DEF(max_header_count, 100);
    DEF(max_memory, (size_t)8 << 20);
    DEF(max_stream_pending, (size_t)1 << 20);
    DEF(reset_burst, 1000);
    DEF(reset_rate, 33);
    DEF(max_resets_sent, 200);
    DEF(max_empty_frames, 2);
    DEF(max_continuations, 8);
    DEF(settings_timeout_ms, 10000);
    DEF(idle_timeout_ms, 60000);
    DEF(header_timeout_ms, 10000);
    DEF(send_stall_timeout_ms, 30000);
    DEF(shutdown_timeout_ms, 30000);
#undef DEF
}

eddy__h2_conn_t *eddy__h2_conn_of(eddy_pipeline_t *p)
{
    eddy_ctx_t *ctx = eddy_pipeline_context_ops(p, &eddy__h2_connection_ops);
    return ctx != NULL ? eddy_ctx_state(ctx) : NULL;
}

void eddy__h2_on_ping(eddy_pipeline_t *p, void (*cb)(void *arg), void *arg)
{
    eddy__h2_conn_t *c = eddy__h2_conn_of(p);
    if (c != NULL) {
        c->ping_cb = cb;
        c->ping_arg = arg;
    }
}

void eddy__h2_fail(eddy_pipeline_t *p, uint32_t code, const char *why)
{
    assert(code != NGHTTP2_NO_ERROR && why != NULL);
    eddy__h2_conn_t *c = eddy__h2_conn_of(p);
    if (c != NULL) {
        eddy__h2_conn_fail(c, code, why);
    }
}

int eddy__h2_ping(eddy_pipeline_t *p)
{
    eddy__h2_conn_t *c = eddy__h2_conn_of(p);
    if (c == NULL || c->session == NULL || c->fatal || c->closing || c->closed) {
        return EDDY_ECLOSED;
    }
    if (nghttp2_submit_ping(c->session, NGHTTP2_FLAG_NONE, NULL) != 0) {
        return EDDY_ENOMEM;
    }
    eddy__h2_conn_send(c);
    return 0;
}

int64_t eddy__h2_last_read(eddy_pipeline_t *p)
{
    eddy__h2_conn_t *c = eddy__h2_conn_of(p);
    return c != NULL ? c->last_read : 0;
}

/* ---------------------------------------------------------------------------------------
 * Sending
 */

static void conn_close(eddy__h2_conn_t *c)
{
    if (c->closing || c->closed) {
        return;
    }
    c->closing = true;
    eddy_promise_t *p = c->close_promise;
    c->close_promise = NULL;
    eddy_ctx_close_after_flush(c->ctx, p);
    if (p != NULL) {
        eddy_future_release(p);
    }
}

/* Whether the connection is done: nghttp2 wants nothing more, or a graceful shutdown saw its
 * last stream end. */
static bool conn_done(const eddy__h2_conn_t *c)
{
    if (c->fatal) {
        return true;
    }
    if (nghttp2_session_want_read(c->session) == 0 && nghttp2_session_want_write(c->session) == 0) {
        return true;
    }
    return c->close_promise != NULL && c->streams_open == 0;
}

static void close_due(eddy_ctx_t *ctx, void *arg)
{
    (void)ctx;
    eddy__h2_conn_t *c = arg;
    c->close_task = false;
    conn_close(c);
}

static void flush_due(eddy_ctx_t *ctx, void *arg)
{
    eddy__h2_conn_t *c = arg;
    c->flush_task = false;
    if (c->wrote && !c->closed) {
        c->wrote = false;
        eddy_ctx_flush(ctx);
    }
}

/*
 * Flush what a send outside a read of this connection wrote: at the end of the loop's turn
 * (a task), so the sends of one turn leave in one write, as a read's answers do (Netty's
 * FlushConsolidationHandler). A client whose responses on one connection start calls on
 * another wrote each call alone: a system call per call, and a wake-up of the server's loop
 * per call. The client side only, for now: a server's sends outside a read are its timers'
 * and tasks' (the tests of codec/http2 read what a reset wrote at once). A connection that
 * failed flushes at once, before its close.
 */
static void flush_soon(eddy__h2_conn_t *c)
{
    if (c->flush_task) {
        return;
    }
    if (!c->server && !c->fatal && eddy_ctx_execute(c->ctx, flush_due, c) == 0) {
        c->flush_task = true;
        return;
    }
    c->wrote = false;
    eddy_ctx_flush(c->ctx);
}

/* What a connection error's GOAWAY may take past the water mark: a few control frames. */
#define FATAL_FORCED_MAX 16384

void eddy__h2_conn_send(eddy__h2_conn_t *c)
{
    /* Inside mem_recv, or while the events of a read reach the handlers: their answers are
     * gathered and go out once the events are through (h2_read, events_due call again), so
     * a read of 100 requests makes one buffer of frames, not 100. */
    if (c->in_recv || c->firing || c->sending || c->corked > 0 || c->session == NULL ||
        c->closed || c->closing) {
        return;
    }
    c->sending = true;
    c->drained = false;
    eddy_channel_t *ch = eddy_ctx_channel(c->ctx);
    uint64_t forced = 0; /* bytes taken from nghttp2 past the water mark */
    for (;;) {
        /* A connection error's GOAWAY goes out past the water mark: the close that follows
         * would otherwise leave it inside nghttp2, and the peer would see the connection end
         * with no reason (its streams unanswered). nghttp2 puts control frames before DATA,
         * so it comes within the first few; FATAL_FORCED_MAX bounds the overshoot anyway. */
        bool unwritable = !eddy_channel_is_writable(ch);
        if (unwritable &&
            !(c->fatal_goaway && !c->fatal_out && forced < FATAL_FORCED_MAX)) {
            if (!c->paused) { /* the streams that asked were told, and hear when it drains */
                c->paused = true; /* read no more until the peer takes what we have */
                eddy_channel_set_option(ch, EDDY_AUTO_READ, 0);
            }
            break;
        }
        const uint8_t *data;
        uint64_t data_was = c->data_out;
        ssize_t n = nghttp2_session_mem_send(c->session, &data);
        if (n < 0) {
            eddy__log(EDDY_LOG_WARN, "http2: channel %llu: %s",
                      (unsigned long long)eddy_channel_id(ch), nghttp2_strerror((int)n));
            c->fatal = true;
            break;
        }
        if (n == 0) {
            c->drained = true;
            break;
        }
        eddy__h2_session_sent(c, data);
        forced += unwritable ? (uint64_t)n + (c->data_out - data_was) : 0;
        if (eddy__h2_out_append(c, data, (size_t)n) != 0) {
            c->fatal = true;
            break;
        }
    }
    eddy__h2_out_write(c);
    c->sending = false;
    if (c->wrote && !c->in_read_batch && !c->closed) {
        flush_soon(c);
    }
    /* A write or the flush may have closed the channel (the session is gone then). The
     * close itself waits for a task: conn_send runs under the application's calls (a stream
     * send from inside a handler), which must not find their state freed when it returns. */
    if (!c->closed && c->session != NULL && conn_done(c) && !c->close_task) {
        c->close_task = eddy_ctx_execute(c->ctx, close_due, c) == 0;
        if (!c->close_task) {
            conn_close(c); /* no task (shutting down): the channel goes now */
        }
    }
}

static void events_due(eddy_ctx_t *ctx, void *arg);

void eddy__h2_conn_emit(eddy__h2_conn_t *c, eddy_msg_t *msg)
{
    if (c->nevents == c->cap_events) {
        size_t cap = c->cap_events == 0 ? 16 : 2 * c->cap_events;
        eddy_msg_t **e = realloc(c->events, cap * sizeof(*e));
        if (e == NULL) {
            eddy_msg_release(msg);
            c->fatal = true;
            return;
        }
        c->events = e;
        c->cap_events = cap;
    }
    c->events[c->nevents++] = msg;
    /* Made outside a read (a reset we sent closed a stream in mem_send): no read's
     * events_fire will pass it on soon, a task does. */
    if (!c->in_recv && !c->firing && !c->events_task && !c->closed) {
        c->events_task = eddy_ctx_execute(c->ctx, events_due, c) == 0;
    }
}

void eddy__h2_conn_fail(eddy__h2_conn_t *c, uint32_t code, const char *why)
{
    if (c->fatal || c->session == NULL) {
        return;
    }
    eddy__log(EDDY_LOG_INFO, "http2: channel %llu: GOAWAY %s: %s",
              (unsigned long long)eddy_channel_id(eddy_ctx_channel(c->ctx)),
              nghttp2_http2_strerror(code), why);
    c->fatal_goaway = nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                                            nghttp2_session_get_last_proc_stream_id(c->session),
                                            code, (const uint8_t *)why, strlen(why)) == 0;
    c->goaway_sent = true;
    c->fatal = true; /* conn_send sends the GOAWAY, then closes */
    /* Inside nghttp2 (a callback of mem_recv or mem_send) the session must not be entered
     * again: the caller's own conn_send does it when nghttp2 returns. */
    if (!c->in_recv && !c->sending) {
        eddy__h2_conn_send(c);
    }
}

void eddy__h2_conn_count_reset(eddy__h2_conn_t *c)
{
    int64_t now = eddy__h2_now(c);
    if (now - c->resets_since > 30000 * MS) {
        c->resets_since = now;
        c->resets_sent = 0;
    }
    if (++c->resets_sent > c->o.max_resets_sent) {
        eddy__h2_conn_fail(c, NGHTTP2_ENHANCE_YOUR_CALM, "too many streams reset");
    }
}

/* A token bucket (rapid reset, CVE-2023-44487): reset_burst tokens, reset_rate more each
 * whole second, capped at reset_burst. Ours rather than nghttp2's backported option, which
 * Debian's 1.52 answers with GOAWAY INTERNAL_ERROR. */
bool eddy__h2_conn_reset_received(eddy__h2_conn_t *c)
{
    int64_t now = eddy__h2_now(c);
    int64_t secs = (now - c->reset_tokens_at) / (1000 * MS);
    if (secs > 0) {
        uint64_t gain = (uint64_t)secs * c->o.reset_rate;
        c->reset_tokens = c->o.reset_burst - c->reset_tokens <= gain
                              ? c->o.reset_burst
                              : c->reset_tokens + gain;
        c->reset_tokens_at += secs * 1000 * MS;
    }
    assert(c->reset_tokens <= c->o.reset_burst);
    if (c->reset_tokens == 0) {
        eddy__h2_conn_fail(c, NGHTTP2_ENHANCE_YOUR_CALM, "too many streams reset by the peer");
        return false;
    }
    c->reset_tokens--;
    return true;
}

/* ---------------------------------------------------------------------------------------
 * Housekeeping: the timeouts, checked on one timer per connection.
 */

static void stalls_check(eddy__h2_conn_t *c, int64_t now)
{
    for (eddy_h2_stream_t *s = c->streams; s != NULL; s = s->next) {
        bool stuck = s->pending > 0 &&
                     (nghttp2_session_get_stream_remote_window_size(c->session, s->id) <= 0 ||
                      nghttp2_session_get_remote_window_size(c->session) <= 0);
        if (!stuck) {
            s->stalled_since = 0;
        } else if (s->stalled_since == 0) {
            s->stalled_since = now;
        } else if (now - s->stalled_since > c->o.send_stall_timeout_ms * MS) {
            eddy__log(EDDY_LOG_DEBUG, "http2: stream %d reset: the peer's window stayed shut",
                      s->id);
            nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
        }
    }
}

static int64_t housekeeping_period_ms(const eddy_h2_options_t *o);

/* A connection that read nothing for a whole period, with no stream open, is idle: what it
 * holds only for the next frames goes (the events array, the frame buffer's pages). */
static void idle_trim(eddy__h2_conn_t *c, int64_t now)
{
    if (c->streams_open > 0 || now - c->last_activity < housekeeping_period_ms(&c->o) * MS) {
        return;
    }
    if (c->nevents == 0 && !c->firing && c->events != NULL) {
        free(c->events);
        c->events = NULL;
        c->cap_events = 0;
    }
    eddy__h2_session_trim(c);
}

static void housekeep(eddy_ctx_t *ctx, void *arg)
{
    (void)ctx;
    eddy__h2_conn_t *c = arg;
    if (c->session == NULL || c->fatal || c->closing) {
        return;
    }
    int64_t now = eddy__h2_now(c);
    /* Not while we read nothing (paused, the peer not taking our bytes): the ACK or the rest
     * of the block may be waiting in the socket; the clocks start again when we read. */
    if (c->settings_sent_at != 0 && !c->paused &&
        now - c->settings_sent_at > c->o.settings_timeout_ms * MS) {
        eddy__h2_conn_fail(c, NGHTTP2_SETTINGS_TIMEOUT, "SETTINGS not acknowledged");
    } else if (c->header_block_since != 0 && !c->paused &&
               now - c->header_block_since > c->o.header_timeout_ms * MS) {
        eddy__h2_conn_fail(c, NGHTTP2_ENHANCE_YOUR_CALM, "header block not finished in time");
    } else if (c->close_promise != NULL && now - c->shutdown_at > c->o.shutdown_timeout_ms * MS) {
        eddy__log(EDDY_LOG_INFO, "http2: channel %llu: %zu streams still open at the shutdown "
                  "deadline; closing", (unsigned long long)eddy_channel_id(eddy_ctx_channel(ctx)),
                  c->streams_open);
        conn_close(c);
    } else if (c->streams_open == 0 && c->o.idle_timeout_ms > 0 &&
               now - c->last_activity > c->o.idle_timeout_ms * MS) {
        nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->session),
                              NGHTTP2_NO_ERROR, (const uint8_t *)"idle", 4);
        c->fatal = true;
        eddy__h2_conn_send(c);
    } else {
        stalls_check(c, now);
        eddy__h2_conn_send(c);
        idle_trim(c, now);
    }
}

static int64_t housekeeping_period_ms(const eddy_h2_options_t *o)
{
    int64_t t = o->settings_timeout_ms < o->header_timeout_ms ? o->settings_timeout_ms
                                                              : o->header_timeout_ms;
    if (o->idle_timeout_ms > 0 && o->idle_timeout_ms < t) {
        t = o->idle_timeout_ms;
    }
    t /= 4;
    return t < 100 ? 100 : t > 2000 ? 2000 : t;
}

/* ---------------------------------------------------------------------------------------
 * The handler
 */

static void conn_start(eddy__h2_conn_t *c)
{
    if (c->session != NULL || c->closed) {
        return;
    }
    c->last_activity = eddy__h2_now(c);
    c->last_read = c->last_activity;
    c->reset_tokens = c->o.reset_burst;
    c->reset_tokens_at = c->last_activity;
    if (eddy__h2_session_new(c) != 0) {
        eddy__log(EDDY_LOG_WARN, "http2: channel %llu: no memory for a session",
                  (unsigned long long)eddy_channel_id(eddy_ctx_channel(c->ctx)));
        eddy_ctx_close(c->ctx, NULL);
        return;
    }
    int64_t period = housekeeping_period_ms(&c->o);
    c->timer = eddy_ctx_schedule_at_fixed_rate(c->ctx, period, period, housekeep, c);
    eddy__h2_conn_send(c);
}

static void h2_added(eddy_ctx_t *ctx)
{
    eddy__h2_conn_t *c = eddy_ctx_state(ctx);
    c->ctx = ctx;
    if (eddy_channel_is_active(eddy_ctx_channel(ctx))) {
        conn_start(c);
    }
}

static void h2_active(eddy_ctx_t *ctx)
{
    conn_start(eddy_ctx_state(ctx));
    eddy_ctx_fire_channel_active(ctx);
}

/* End every open stream: the connection is gone under them. fire: tell the handlers after. */
static void streams_end(eddy__h2_conn_t *c, bool fire)
{
    while (c->streams != NULL) {
        eddy_h2_stream_t *s = c->streams;
        if (c->session != NULL) {
            nghttp2_session_set_stream_user_data(c->session, s->id, NULL);
        }
        eddy_msg_t *m = fire ? eddy__h2_reset_new(s, NGHTTP2_CANCEL, false) : NULL;
        eddy__h2_stream_closed(s, NGHTTP2_CANCEL);
        if (m != NULL) {
            eddy_ctx_fire_channel_read(c->ctx, m);
        }
    }
}

static void events_drop(eddy__h2_conn_t *c, size_t from)
{
    for (size_t i = from; i < c->nevents; i++) {
        if (c->events[i] != NULL) { /* NULL: passed on already */
            eddy_msg_release(c->events[i]);
        }
    }
    c->nevents = 0;
}

static void h2_removed(eddy_ctx_t *ctx)
{
    eddy__h2_conn_t *c = eddy_ctx_state(ctx);
    c->closed = true;
    events_drop(c, 0);
    streams_end(c, false);
    if (c->session != NULL) {
        nghttp2_session_del(c->session);
        c->session = NULL;
    }
    assert(c->mem_used == 0);
    if (c->out != NULL) {
        eddy_buf_release(c->out);
        c->out = NULL;
    }
    if (c->close_promise != NULL) {
        eddy_promise_fail(c->close_promise, EDDY_ECLOSED);
        eddy_future_release(c->close_promise);
        c->close_promise = NULL;
    }
}

static void h2_free(void *state)
{
    eddy__h2_conn_t *c = state;
    free(c->events);
    free(c);
}

static void h2_inactive(eddy_ctx_t *ctx)
{
    eddy__h2_conn_t *c = eddy_ctx_state(ctx);
    c->closed = true;
    streams_end(c, true);
    eddy_ctx_fire_channel_inactive(ctx);
}

/* Fire what mem_recv made, in order, and what the handlers' sends make meanwhile, stopping
 * if the channel closed. */
static void events_fire(eddy__h2_conn_t *c)
{
    c->firing = true;
    for (size_t i = 0; i < c->nevents; i++) {
        if (c->closed) {
            events_drop(c, i);
            break;
        }
        eddy_msg_t *m = c->events[i];
        c->events[i] = NULL; /* the handlers own it now, whatever happens during the call */
        eddy_ctx_fire_channel_read(c->ctx, m);
    }
    c->nevents = 0;
    c->firing = false;
}

static void goaway_fire(eddy__h2_conn_t *c)
{
    if (!c->goaway_received || c->closed) {
        return;
    }
    c->goaway_received = false;
    eddy_h2_goaway_t g = {.last_stream_id = c->goaway_last_id, .error_code = c->goaway_code};
    eddy_ctx_fire_user_event(c->ctx, EDDY_EVENT_H2_GOAWAY, &g);
}

/* The task of eddy__h2_conn_emit: what was made outside a read goes on now. */
static void events_due(eddy_ctx_t *ctx, void *arg)
{
    (void)ctx;
    eddy__h2_conn_t *c = arg;
    c->events_task = false;
    if (!c->closed) {
        events_fire(c);
        eddy__h2_conn_send(c);
    }
}

/* Feed n bytes at p to the session. */
static void conn_recv(eddy__h2_conn_t *c, eddy_buf_t *b)
{
    c->in = b;
    c->in_recv = true;
    ssize_t rv = nghttp2_session_mem_recv(c->session, eddy_buf_read_ptr(b), eddy_buf_readable(b));
    c->in_recv = false;
    c->in = NULL;
    if (rv < 0 && !c->fatal) { /* fatal: a limit of ours stopped it, and said so */
        eddy__log(rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC ? EDDY_LOG_DEBUG : EDDY_LOG_INFO,
                  "http2: channel %llu: %s", (unsigned long long)eddy_channel_id(eddy_ctx_channel(c->ctx)),
                  nghttp2_strerror((int)rv));
        if (rv != NGHTTP2_ERR_BAD_CLIENT_MAGIC) {
            nghttp2_session_terminate_session(c->session, rv == NGHTTP2_ERR_FLOODED
                                                              ? NGHTTP2_ENHANCE_YOUR_CALM
                                                              : NGHTTP2_PROTOCOL_ERROR);
        }
        c->fatal = true;
    }
}

/* The bytes of msg as one buffer (a composite is copied); other messages pass on (NULL). */
static eddy_buf_t *bytes_of(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy_buf_t *b = eddy_buf_of(msg);
    eddy_composite_t *comp = b == NULL ? eddy_composite_of(msg) : NULL;
    if (comp != NULL) {
        size_t n = eddy_composite_readable(comp);
        b = eddy_buf_alloc(eddy_ctx_alloc(ctx), n > 0 ? n : 1, n > 0 ? n : 1);
        if (b != NULL && eddy_composite_read_bytes(comp, eddy_buf_write_ptr(b), n) == 0) {
            eddy_buf_produce(b, n);
        } else if (b != NULL) {
            eddy_buf_release(b);
            b = NULL;
        }
        eddy_msg_release(msg);
        if (b == NULL) {
            eddy_ctx_close(ctx, NULL); /* bytes lost: the framing cannot go on */
        }
        return b;
    }
    if (b == NULL) {
        eddy_ctx_fire_channel_read(ctx, msg); /* not bytes: not ours */
    }
    return b;
}

static void h2_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    eddy__h2_conn_t *c = eddy_ctx_state(ctx);
    eddy_buf_t *b = bytes_of(ctx, msg);
    if (b == NULL) {
        return;
    }
    if (c->session == NULL || c->fatal || c->closing) {
        eddy_buf_release(b);
        return;
    }
    c->in_read_batch = true;
    c->trimmed = false;
    c->last_activity = eddy__h2_now(c);
    c->last_read = c->last_activity;
    conn_recv(c, b);
    eddy_buf_release(b);
    events_fire(c);
    goaway_fire(c);
    if (!c->closed) {
        eddy__h2_streams_fire_writable(c);
        eddy__h2_conn_send(c);
        if (c->fatal) {
            conn_close(c);
        }
    }
}

static void h2_read_complete(eddy_ctx_t *ctx)
{
    eddy__h2_conn_t *c = eddy_ctx_state(ctx);
    eddy_ctx_fire_channel_read_complete(ctx);
    c->in_read_batch = false;
    if (!c->closed) {
        eddy__h2_conn_send(c);
    }
}

static void h2_writability(eddy_ctx_t *ctx)
{
    eddy__h2_conn_t *c = eddy_ctx_state(ctx);
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    if (eddy_channel_is_writable(ch) && !c->closed) {
        if (c->paused) {
            c->paused = false;
            eddy_channel_set_option(ch, EDDY_AUTO_READ, 1);
            /* What we did not read while paused was not the peer's delay. */
            int64_t now = eddy__h2_now(c);
            c->settings_sent_at = c->settings_sent_at != 0 ? now : 0;
            c->header_block_since = c->header_block_since != 0 ? now : 0;
        }
        eddy__h2_conn_send(c);
        c->writability_dirty = true;
        eddy__h2_streams_fire_writable(c);
    }
    eddy_ctx_fire_channel_writability_changed(ctx);
}

/* Raw bytes written past the streams would cut into the framing: refused, loudly. */
static void h2_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_ctx_fail_write(ctx, msg, p, EDDY_ENOTSUP);
}

static void h2_flush(eddy_ctx_t *ctx)
{
    eddy__h2_conn_t *c = eddy_ctx_state(ctx);
    eddy__h2_conn_send(c);
    c->wrote = false;
    eddy_ctx_flush(ctx);
}

/* A close from the tail is graceful: GOAWAY with the last stream we took, the streams in
 * flight finish (within shutdown_timeout_ms), then the channel closes. */
static void h2_close(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    eddy__h2_conn_t *c = eddy_ctx_state(ctx);
    if (c->session == NULL || c->closing || c->close_promise != NULL || c->closed) {
        eddy_ctx_close(ctx, p);
        return;
    }
    if (!c->goaway_sent) {
        nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->session),
                              NGHTTP2_NO_ERROR, NULL, 0);
        c->goaway_sent = true;
    }
    c->shutdown_at = eddy__h2_now(c);
    c->close_promise = p != NULL ? eddy_future_retain(p) : NULL;
    if (c->close_promise == NULL) {
        /* Nobody waits: still let the streams finish; the close comes from conn_send. */
        c->close_promise = eddy_promise_new(eddy_ctx_loop(ctx));
        if (c->close_promise == NULL) {
            eddy_ctx_close(ctx, NULL);
            return;
        }
    }
    eddy__h2_conn_send(c);
}

const eddy_handler_ops_t eddy__h2_connection_ops = {
    .name = "h2-connection",
    .handler_added = h2_added,
    .handler_removed = h2_removed,
    .channel_active = h2_active,
    .channel_inactive = h2_inactive,
    .channel_read = h2_read,
    .channel_read_complete = h2_read_complete,
    .channel_writability_changed = h2_writability,
    .close = h2_close,
    .write = h2_write,
    .flush = h2_flush,
};

eddy_handler_t eddy_h2_connection(const eddy_h2_options_t *o)
{
    eddy__h2_conn_t *c = calloc(1, sizeof(*c));
    if (c != NULL) {
        c->o = o != NULL ? *o : (eddy_h2_options_t){0};
        options_default(&c->o);
        c->server = true;
    }
    return eddy_handler("h2-connection", &eddy__h2_connection_ops, c, h2_free);
}

/* The client side: the same handler with a client session (client.c opens its streams). */
eddy_handler_t eddy_h2_client_connection(const eddy_h2_options_t *o)
{
    eddy__h2_conn_t *c = calloc(1, sizeof(*c));
    if (c != NULL) {
        c->o = o != NULL ? *o : (eddy_h2_options_t){0};
        options_default(&c->o);
        if (c->o.max_queued_streams == 0) {
            c->o.max_queued_streams = 1000;
        }
    }
    return eddy_handler("h2-connection", &eddy__h2_connection_ops, c, h2_free);
}

int eddy__h2_conn_upgrade(eddy__h2_conn_t *c, const uint8_t *settings, size_t len,
                          bool head_request)
{
    if (c->session == NULL) {
        return EDDY_ECLOSED;
    }
    eddy_h2_stream_t *s = eddy__h2_stream_new(c, 1);
    if (s == NULL) {
        return EDDY_ENOMEM;
    }
    int rv = nghttp2_session_upgrade2(c->session, settings, len, head_request, s);
    if (rv != 0) {
        eddy__h2_stream_closed(s, NGHTTP2_PROTOCOL_ERROR);
        return EDDY_EDECODE;
    }
    nghttp2_session_set_stream_user_data(c->session, 1, s); /* upgrade2 ignores ours */
    s->head_received = true;
    eddy__h2_conn_send(c);
    return 0;
}

const char *const *eddy_h2_alpn_protocols(size_t *n)
{
    static const char *const protocols[] = {"h2", "http/1.1"};
    *n = 2;
    return protocols;
}
