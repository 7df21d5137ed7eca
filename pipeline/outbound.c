/*
 * The outbound buffer (Netty's ChannelOutboundBuffer): writes queue as {message, promise};
 * a flush marks what is queued as flushed; the channel kind writes flushed entries and takes
 * them off here. Pending bytes (flushed or not) count against the water marks, and an
 * optional hard cap refuses writes with EDDY_ENOBUFS instead of growing without bound.
 */
#include "pipeline/internal.h"

#include <stdlib.h>

size_t eddy__msg_bytes(eddy_msg_t *msg)
{
    switch (msg->type) {
    case EDDY_MSG_BUF:
        return eddy_buf_readable(eddy_buf_of(msg));
    case EDDY_MSG_COMPOSITE:
        return eddy_composite_readable(eddy_composite_of(msg));
    default:
        return 0;
    }
}

#ifndef NDEBUG
/*
 * The buffer's shape, checked in debug builds at each entry (after the check that the caller
 * runs on the channel's loop): head and tail are empty together and the tail is last; the
 * first unflushed entry is a queued one; the head's unwritten bytes are counted in pending
 * (pending may count more: a handler that queues writes itself, TLS, counts its own). O(1):
 * a walk of the entries would make a long queue quadratic. Only assert() calls it, so it is
 * not there when assert() is not (clang warns of an unused function in release builds).
 */
static inline bool well_formed(const eddy_channel_t *ch)
{
    const eddy__entry_t *h = ch->out_head;
    if ((h == NULL) != (ch->out_tail == NULL) || (h != NULL && ch->out_tail->next != NULL)) {
        return false;
    }
    if (ch->unflushed != NULL && h == NULL) {
        return false;
    }
    return h == NULL || (h->done <= h->bytes && h->bytes - h->done <= eddy__pending(ch));
}
#endif

static void fail_msg(eddy_msg_t *msg, eddy_promise_t *p, int err)
{
    eddy_msg_release(msg);
    eddy__promise_done(p, err);
}

void eddy__outbound_update_writability(eddy_channel_t *ch)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    bool writable = atomic_load_explicit(&ch->writable, memory_order_relaxed);
    bool now = writable;
    size_t pending = eddy__pending(ch);
    if (writable && pending > (size_t)ch->opt[EDDY_WRITE_BUFFER_HIGH_WATER_MARK]) {
        now = false;
    } else if (!writable && pending < (size_t)ch->opt[EDDY_WRITE_BUFFER_LOW_WATER_MARK]) {
        now = true;
    }
    if (now == writable) {
        return;
    }
    atomic_store_explicit(&ch->writable, now, memory_order_relaxed);
    if (ch->opt[EDDY_PAUSE_READ_WHEN_UNWRITABLE] || (ch->flags & EDDY__CH_PAUSED)) {
        /* (Paused, then the option turned off: the pause still ends when the channel drains.) */
        /* The backpressure policy: reading pauses while the peer does not keep up, so an
         * echo or a proxy holds bounded memory against a slow reader. */
        if (!now) {
            ch->flags |= EDDY__CH_PAUSED;
        } else {
            ch->flags &= ~EDDY__CH_PAUSED;
        }
        if (ch->ops->update_interest != NULL && !(ch->flags & EDDY__CH_CLOSED)) {
            ch->ops->update_interest(ch); /* reading resumes only if it was wanted */
        }
    }
    if (!(ch->flags & EDDY__CH_CLOSED)) {
        eddy__pipeline_fire_writability(&ch->pipeline);
    }
}

void eddy__outbound_add(eddy_channel_t *ch, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    assert(well_formed(ch));
    if (ch->flags & EDDY__CH_CLOSED) {
        fail_msg(msg, p, EDDY_ECLOSED);
        return;
    }
    if (ch->flags & (EDDY__CH_OUTPUT_SHUTDOWN | EDDY__CH_SHUTDOWN_PENDING)) {
        fail_msg(msg, p, EDDY_EPIPE);
        return;
    }
    if (msg->type != EDDY_MSG_BUF && msg->type != EDDY_MSG_COMPOSITE) {
        /* Only bytes reach the socket: an encoder is missing from the pipeline. */
        fail_msg(msg, p, EDDY_ENOTSUP);
        return;
    }
    size_t bytes = eddy__msg_bytes(msg);
    int64_t cap = ch->opt[EDDY_MAX_PENDING_OUTBOUND];
    if (cap > 0 && eddy__pending(ch) + bytes > (size_t)cap) {
        fail_msg(msg, p, EDDY_ENOBUFS);
        return;
    }
    eddy__entry_t *e = malloc(sizeof(*e));
    if (e == NULL) {
        fail_msg(msg, p, EDDY_ENOMEM);
        return;
    }
    e->next = NULL;
    e->msg = msg;
    e->p = p != NULL ? eddy_future_retain(p) : NULL;
    e->bytes = bytes;
    e->done = 0;
    if (ch->out_tail != NULL) {
        ch->out_tail->next = e;
    } else {
        ch->out_head = e;
    }
    ch->out_tail = e;
    if (ch->unflushed == NULL) {
        ch->unflushed = e;
    }
    eddy__pending_set(ch, eddy__pending(ch) + bytes);
    eddy__outbound_update_writability(ch);
}

void eddy__outbound_mark_flushed(eddy_channel_t *ch)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    assert(well_formed(ch));
    ch->unflushed = NULL;
}

static void pop_head(eddy_channel_t *ch, int err)
{
    eddy__entry_t *e = ch->out_head;
    assert(e != NULL && well_formed(ch));
    ch->out_head = e->next;
    if (ch->out_head == NULL) {
        ch->out_tail = NULL;
    }
    if (ch->unflushed == e) {
        ch->unflushed = e->next;
    }
    eddy__pending_set(ch, eddy__pending(ch) - (e->bytes - e->done));
    if (err == 0) {
        atomic_fetch_add_explicit(&ch->msgs_written, 1, memory_order_relaxed);
    }
    eddy_msg_release(e->msg);
    if (e->p != NULL) {
        eddy__promise_done(e->p, err);
        eddy_future_release(e->p);
    }
    free(e);
}

void eddy__outbound_remove_written(eddy_channel_t *ch, size_t bytes)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    assert(well_formed(ch));
    atomic_fetch_add_explicit(&ch->bytes_written, bytes, memory_order_relaxed);
    while (ch->out_head != NULL && ch->out_head != ch->unflushed) {
        eddy__entry_t *e = ch->out_head;
        size_t left = e->bytes - e->done;
        if (bytes < left) {
            if (bytes > 0) {
                e->done += bytes;
                eddy__pending_set(ch, eddy__pending(ch) - bytes);
                if (e->msg->type == EDDY_MSG_BUF) {
                    eddy_buf_skip(eddy_buf_of(e->msg), bytes);
                } else {
                    eddy_composite_skip(eddy_composite_of(e->msg), bytes);
                }
            }
            break;
        }
        bytes -= left;
        pop_head(ch, 0); /* pending drops by what was left of it */
    }
    /* No more was written than was flushed; unless a promise listener closed the channel,
     * failing the entries the bytes were for. */
    assert(bytes == 0 || (ch->flags & EDDY__CH_CLOSED) ||
           (ch->out_head != NULL && ch->out_head != ch->unflushed));
    eddy__outbound_update_writability(ch);
}

void eddy__outbound_closing(eddy_channel_t *ch)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    /* No writability event on a closing channel: it would invite writes that can only fail. */
    if (eddy__pending(ch) < (size_t)ch->opt[EDDY_WRITE_BUFFER_LOW_WATER_MARK]) {
        atomic_store_explicit(&ch->writable, true, memory_order_relaxed);
    }
}

void eddy__outbound_fail_all(eddy_channel_t *ch, int err)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    assert(well_formed(ch));
    while (ch->out_head != NULL) {
        pop_head(ch, err);
    }
    ch->unflushed = NULL;
    /* pop_head took every entry out of the count; what is left belongs to handlers that queue
     * writes themselves (TLS), which take it out as they fail them. No writability event on a
     * closing channel: inactive follows. */
    atomic_store_explicit(&ch->writable, true, memory_order_relaxed);
}

void eddy__outbound_fail_unflushed(eddy_channel_t *ch, int err)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    assert(well_formed(ch));
    eddy__entry_t *e = ch->unflushed;
    if (e == NULL) {
        return;
    }
    /* Detached first: a promise listener may write again (and is refused). */
    if (ch->out_head == e) {
        ch->out_head = ch->out_tail = NULL;
    } else {
        eddy__entry_t *prev = ch->out_head;
        while (prev->next != e) {
            prev = prev->next;
        }
        prev->next = NULL;
        ch->out_tail = prev;
    }
    ch->unflushed = NULL;
    while (e != NULL) {
        eddy__entry_t *next = e->next;
        eddy__pending_set(ch, eddy__pending(ch) - (e->bytes - e->done));
        eddy_msg_release(e->msg);
        if (e->p != NULL) {
            eddy__promise_done(e->p, err);
            eddy_future_release(e->p);
        }
        free(e);
        e = next;
    }
    eddy__outbound_update_writability(ch);
}
