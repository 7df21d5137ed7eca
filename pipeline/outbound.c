/*
 * The outbound buffer (Netty's ChannelOutboundBuffer): writes queue as {message, promise};
 * a flush marks what is queued as flushed; a transport takes an iovec of the flushed bytes
 * and reports how many it wrote, and the buffer completes those entries. Pending bytes
 * (flushed or not) count against the water marks, and an optional hard cap refuses writes
 * with EDDY_ENOBUFS instead of growing without bound.
 *
 * Only this file reads the buffer's fields (eddy__outbound_t): an entry's message is
 * released and its promise completed in complete_entry() and nowhere else.
 */
#include "pipeline/internal.h"

#include <eddy/datagram.h>
#include <eddy/file.h>

#include <stdlib.h>

size_t eddy__msg_bytes(eddy_msg_t *msg)
{
    switch (msg->type) {
    case EDDY_MSG_BUF:
        return eddy_buf_readable(eddy_buf_of(msg));
    case EDDY_MSG_COMPOSITE:
        return eddy_composite_readable(eddy_composite_of(msg));
    case EDDY_MSG_FILE_REGION:
        return (size_t)eddy_file_region_remaining(eddy_file_region_of(msg));
    case EDDY_MSG_DATAGRAM: {
        eddy_buf_t *b = eddy_datagram_content(eddy_datagram_of(msg));
        return b != NULL ? eddy_buf_readable(b) : 0;
    }
    default:
        return 0;
    }
}

static size_t pending(const eddy__outbound_t *ob)
{
    return atomic_load_explicit(&ob->pending, memory_order_relaxed);
}

static void pending_set(eddy__outbound_t *ob, size_t n)
{
    atomic_store_explicit(&ob->pending, n, memory_order_relaxed);
}

size_t eddy__outbound_pending(const eddy_channel_t *ch)
{
    return pending(&ch->out);
}

#ifndef NDEBUG
/*
 * The buffer's shape, checked in debug builds at each entry (after the check that the caller
 * runs on the channel's loop): head and tail are empty together and the tail is last; the
 * first unflushed entry is a queued one; the head's unwritten bytes are counted in pending
 * (pending may count more: a handler that queues writes itself, TLS, reserves its own). O(1):
 * a walk of the entries would make a long queue quadratic. Only assert() calls it, so it is
 * not there when assert() is not (clang warns of an unused function in release builds).
 */
static inline bool well_formed(const eddy__outbound_t *ob)
{
    const eddy__entry_t *h = ob->head;
    if ((h == NULL) != (ob->tail == NULL) || (h != NULL && ob->tail->next != NULL)) {
        return false;
    }
    if (ob->unflushed != NULL && h == NULL) {
        return false;
    }
    return h == NULL || (h->done <= h->bytes && h->bytes - h->done <= pending(ob));
}
#endif

/* What every function here asserts first: the channel's loop runs it, on a sound buffer. */
#define ASSERT_SOUND(ch)                                                                           \
    do {                                                                                           \
        eddy__assert_on_loop(eddy__loop_of(ch));                                                   \
        assert(well_formed(&(ch)->out));                                                           \
    } while (0)

/* A write the channel refuses: p fails, or with no promise the pipeline raises it. */
static void fail_msg(eddy_channel_t *ch, eddy_msg_t *msg, eddy_promise_t *p, int err)
{
    eddy_ctx_fail_write(&ch->pipeline.end, msg, p, err);
}

/*
 * An entry leaves the buffer, detached already: its unwritten bytes out of pending, its
 * message released (or handed to sink, which owns it then), its promise completed with err,
 * its memory freed.
 */
static void complete_entry(eddy_channel_t *ch, eddy__entry_t *e, int err,
                           void (*sink)(eddy_channel_t *ch, eddy_msg_t *m))
{
    eddy__outbound_t *ob = &ch->out;
    assert(e->done <= e->bytes && e->bytes - e->done <= pending(ob) && e->msg != NULL);
    pending_set(ob, pending(ob) - (e->bytes - e->done));
    if (err == 0) {
        atomic_fetch_add_explicit(&ch->msgs_written, 1, memory_order_relaxed);
    }
    if (sink != NULL) {
        sink(ch, e->msg);
    } else {
        eddy_msg_release(e->msg);
    }
    if (e->p != NULL) {
        eddy__promise_done(e->p, err);
        eddy_future_release(e->p);
    }
    eddy__recycle_put(EDDY__RECYCLE_ENTRY, e);
}

/* Detach the first entry. */
static eddy__entry_t *take_head(eddy__outbound_t *ob)
{
    eddy__entry_t *e = ob->head;
    assert(e != NULL && (e->next != NULL || ob->tail == e));
    ob->head = e->next;
    if (ob->head == NULL) {
        ob->tail = NULL;
    }
    if (ob->unflushed == e) {
        ob->unflushed = e->next;
    }
    return e;
}

/* Whether n bytes make a channel full that was (was) or was not: past the high water mark
 * it becomes full, under the low one it stops being full. */
static bool over_marks(const eddy_channel_t *ch, size_t n, bool was)
{
    if (!was && n > (size_t)ch->opt[EDDY_WRITE_BUFFER_HIGH_WATER_MARK]) {
        return true;
    }
    if (was && n < (size_t)ch->opt[EDDY_WRITE_BUFFER_LOW_WATER_MARK]) {
        return false;
    }
    return was;
}

void eddy__outbound_update_writability(eddy_channel_t *ch)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    eddy__outbound_t *ob = &ch->out;
    bool was_full = ob->full;
    ob->full = over_marks(ch, pending(ob), was_full);
    bool writable = atomic_load_explicit(&ch->writable, memory_order_relaxed);
    bool now = !over_marks(ch, pending(ob) + ob->held, !writable);
    if (now == writable) {
        if (ob->full != was_full && ob->held > 0 && !(ch->flags & EDDY__CH_CLOSED)) {
            eddy__pipeline_fire_writability(&ch->pipeline); /* the holders may go on */
        }
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

/* Bytes in memory, which an iovec can point at. */
static bool is_bytes(const eddy_msg_t *msg)
{
    return msg->type == EDDY_MSG_BUF || msg->type == EDDY_MSG_COMPOSITE;
}

/* n bytes of a queued message went out: it starts later. */
static void msg_skip(eddy_msg_t *msg, size_t n)
{
    if (msg->type == EDDY_MSG_BUF) {
        eddy_buf_skip(eddy_buf_of(msg), n);
    } else if (msg->type == EDDY_MSG_FILE_REGION) {
        eddy_file_region_skip(eddy_file_region_of(msg), n);
    } else {
        eddy_composite_skip(eddy_composite_of(msg), n);
    }
}

/* The hard cap (EDDY_MAX_PENDING_OUTBOUND) would be passed by bytes more. */
static bool over_cap(const eddy_channel_t *ch, size_t bytes)
{
    int64_t cap = ch->opt[EDDY_MAX_PENDING_OUTBOUND];
    return cap > 0 && pending(&ch->out) + bytes > (size_t)cap;
}

void eddy__outbound_add(eddy_channel_t *ch, eddy_msg_t *msg, eddy_promise_t *p)
{
    ASSERT_SOUND(ch);
    eddy__outbound_t *ob = &ch->out;
    if ((ch->flags & EDDY__CH_CLOSED) ||
        atomic_load_explicit(&ch->output_cut, memory_order_relaxed)) {
        fail_msg(ch, msg, p, EDDY_ECLOSED);
        return;
    }
    if (ch->flags & (EDDY__CH_OUTPUT_SHUTDOWN | EDDY__CH_SHUTDOWN_PENDING)) {
        fail_msg(ch, msg, p, EDDY_EPIPE);
        return;
    }
    int refused = ch->ops->accepts != NULL ? ch->ops->accepts(ch, msg)
                  : !is_bytes(msg) && msg->type != EDDY_MSG_FILE_REGION
                      ? EDDY_ENOTSUP /* only bytes reach the socket: an encoder is missing */
                      : 0;
    if (refused != 0) {
        fail_msg(ch, msg, p, refused);
        return;
    }
    size_t bytes = eddy__msg_bytes(msg);
    bool sealed = (ch->flags & EDDY__CH_SEALED) != 0; /* records of admitted plaintext */
    ch->flags &= ~EDDY__CH_SEALED;
    if (!sealed && over_cap(ch, bytes)) {
        fail_msg(ch, msg, p, EDDY_ENOBUFS);
        return;
    }
    eddy__entry_t *e = eddy__recycle_get(EDDY__RECYCLE_ENTRY, sizeof(*e));
    if (e == NULL) {
        fail_msg(ch, msg, p, EDDY_ENOMEM);
        return;
    }
    e->next = NULL;
    e->msg = msg;
    e->p = p != NULL ? eddy_future_retain(p) : NULL;
    e->bytes = bytes;
    e->done = 0;
    if (ob->tail != NULL) {
        ob->tail->next = e;
    } else {
        ob->head = e;
    }
    ob->tail = e;
    if (ob->unflushed == NULL) {
        ob->unflushed = e;
    }
    pending_set(ob, pending(ob) + bytes);
    eddy__outbound_update_writability(ch);
}

void eddy__outbound_mark_flushed(eddy_channel_t *ch)
{
    ASSERT_SOUND(ch);
    ch->out.unflushed = NULL;
}

bool eddy__outbound_has_flushed(const eddy_channel_t *ch)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    return ch->out.head != NULL && ch->out.head != ch->out.unflushed;
}

size_t eddy__outbound_iovec(const eddy_channel_t *ch, struct iovec *iov, int max, int *n,
                            eddy_msg_t **held, int *nheld)
{
    ASSERT_SOUND(ch);
    int k = 0;
    size_t total = 0;
    if (nheld != NULL) {
        *nheld = 0;
    }
    for (eddy__entry_t *e = ch->out.head;
         e != NULL && e != ch->out.unflushed && k < max && (held == NULL || *nheld < max);
         e = e->next) {
        if (!is_bytes(e->msg)) {
            break; /* a file region: the transport sends it on its own (head_region) */
        }
        if (held != NULL) {
            held[(*nheld)++] = eddy_msg_retain(e->msg);
        }
        if (e->msg->type == EDDY_MSG_BUF) {
            eddy_buf_t *b = eddy_buf_of(e->msg);
            size_t len = eddy_buf_readable(b);
            if (len > 0) {
                iov[k].iov_base = (void *)(uintptr_t)eddy_buf_read_ptr(b);
                iov[k].iov_len = len;
                total += len;
                k++;
            }
        } else {
            int got = eddy_composite_iovec(eddy_composite_of(e->msg), iov + k, max - k);
            for (int i = 0; i < got; i++) {
                total += iov[k + i].iov_len;
            }
            k += got;
        }
    }
    assert(k <= max);
    *n = k;
    return total;
}

void eddy__outbound_written(eddy_channel_t *ch, size_t bytes)
{
    ASSERT_SOUND(ch);
    eddy__outbound_t *ob = &ch->out;
    atomic_fetch_add_explicit(&ch->bytes_written, bytes, memory_order_relaxed);
    while (ob->head != NULL && ob->head != ob->unflushed) {
        eddy__entry_t *e = ob->head;
        size_t left = e->bytes - e->done;
        if (bytes < left) {
            if (bytes > 0) {
                e->done += bytes;
                pending_set(ob, pending(ob) - bytes);
                msg_skip(e->msg, bytes);
            }
            break;
        }
        bytes -= left;
        complete_entry(ch, take_head(ob), 0, NULL); /* pending drops by what was left of it */
    }
    /* No more was written than was flushed; unless a promise listener closed the channel,
     * failing the entries the bytes were for. */
    assert(bytes == 0 || (ch->flags & EDDY__CH_CLOSED) ||
           (ob->head != NULL && ob->head != ob->unflushed));
    eddy__outbound_update_writability(ch);
}

eddy_file_region_t *eddy__outbound_head_region(const eddy_channel_t *ch)
{
    ASSERT_SOUND(ch);
    const eddy__entry_t *e = ch->out.head;
    if (e == NULL || e == ch->out.unflushed || e->done == e->bytes) {
        return NULL;
    }
    return eddy_file_region_of(e->msg);
}

bool eddy__outbound_region_second(const eddy_channel_t *ch)
{
    ASSERT_SOUND(ch);
    const eddy__entry_t *e = ch->out.head;
    if (e == NULL || e == ch->out.unflushed || e->next == NULL || e->next == ch->out.unflushed) {
        return false;
    }
    /* With bytes left: an empty region sends nothing that would push the head out. */
    return e->next->msg->type == EDDY_MSG_FILE_REGION && e->next->done < e->next->bytes;
}

size_t eddy__outbound_flushed_msgs(const eddy_channel_t *ch, eddy_msg_t **msgs, size_t max)
{
    ASSERT_SOUND(ch);
    size_t n = 0;
    for (eddy__entry_t *e = ch->out.head; e != NULL && e != ch->out.unflushed && n < max;
         e = e->next) {
        msgs[n++] = e->msg;
    }
    return n;
}

void eddy__outbound_complete(eddy_channel_t *ch, size_t n, int err)
{
    ASSERT_SOUND(ch);
    eddy__outbound_t *ob = &ch->out;
    /* Detached one at a time: a promise listener may write (queued behind) or close (which
     * fails what is left, so the walk ends with an empty buffer). */
    while (n-- > 0 && ob->head != NULL && ob->head != ob->unflushed) {
        eddy__entry_t *e = take_head(ob);
        if (err == 0) {
            atomic_fetch_add_explicit(&ch->bytes_written, e->bytes - e->done,
                                      memory_order_relaxed);
        } else if (e->p == NULL && ch->ops->write_dropped != NULL) {
            ch->ops->write_dropped(ch, e->msg->type, err); /* nobody to tell: counted */
        }
        complete_entry(ch, e, err, NULL);
    }
    eddy__outbound_update_writability(ch);
}

void eddy__outbound_hand_over(eddy_channel_t *ch, void (*sink)(eddy_channel_t *ch, eddy_msg_t *m))
{
    ASSERT_SOUND(ch);
    eddy__outbound_t *ob = &ch->out;
    while (ob->head != NULL && ob->head != ob->unflushed) {
        eddy__entry_t *e = take_head(ob);
        atomic_fetch_add_explicit(&ch->bytes_written, e->bytes - e->done, memory_order_relaxed);
        complete_entry(ch, e, 0, sink);
    }
    eddy__outbound_update_writability(ch);
}

int eddy__outbound_reserve(eddy_channel_t *ch, size_t bytes)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    if (over_cap(ch, bytes)) {
        return EDDY_ENOBUFS;
    }
    pending_set(&ch->out, pending(&ch->out) + bytes);
    return 0;
}

void eddy__outbound_unreserve(eddy_channel_t *ch, size_t bytes)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    assert(bytes <= pending(&ch->out));
    pending_set(&ch->out, pending(&ch->out) - bytes);
}

void eddy__outbound_hold(eddy_channel_t *ch, size_t bytes)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    ch->out.held += bytes;
    eddy__outbound_update_writability(ch);
}

void eddy__outbound_unhold(eddy_channel_t *ch, size_t bytes)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    assert(bytes <= ch->out.held);
    ch->out.held -= bytes;
}

void eddy__channel_hold_input(eddy_channel_t *ch, bool hold)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    assert(hold ? ch->input_holds < UINT16_MAX : ch->input_holds > 0);
    ch->input_holds = (uint16_t)(ch->input_holds + (hold ? 1 : -1));
    bool held = ch->input_holds > 0;
    if (held == ((ch->flags & EDDY__CH_INPUT_HELD) != 0) ||
        (ch->flags & (EDDY__CH_CLOSED | EDDY__CH_LINGERING))) {
        return;
    }
    ch->flags = held ? ch->flags | EDDY__CH_INPUT_HELD : ch->flags & ~EDDY__CH_INPUT_HELD;
    if (ch->ops->update_interest != NULL) {
        ch->ops->update_interest(ch); /* reading resumes only if it was wanted */
    }
}

bool eddy__outbound_has_room(const eddy_channel_t *ch)
{
    return !ch->out.full && !atomic_load_explicit(&ch->output_cut, memory_order_relaxed);
}

void eddy__outbound_closing(eddy_channel_t *ch)
{
    eddy__assert_on_loop(eddy__loop_of(ch));
    /* No writability event on a closing channel: it would invite writes that can only fail. */
    if (pending(&ch->out) < (size_t)ch->opt[EDDY_WRITE_BUFFER_LOW_WATER_MARK]) {
        atomic_store_explicit(&ch->writable, true, memory_order_relaxed);
        ch->out.full = false;
    }
}

void eddy__outbound_fail_all(eddy_channel_t *ch, int err)
{
    ASSERT_SOUND(ch);
    eddy__outbound_t *ob = &ch->out;
    while (ob->head != NULL) {
        complete_entry(ch, take_head(ob), err, NULL);
    }
    ob->unflushed = NULL;
    /* Every entry left the count; what is left belongs to handlers that queue writes
     * themselves (TLS), which take it out as they fail them. No writability event on a
     * closing channel: inactive follows. */
    atomic_store_explicit(&ch->writable, true, memory_order_relaxed);
    ob->full = false;
}

void eddy__outbound_fail_unflushed(eddy_channel_t *ch, int err)
{
    ASSERT_SOUND(ch);
    eddy__outbound_t *ob = &ch->out;
    eddy__entry_t *e = ob->unflushed;
    if (e == NULL) {
        return;
    }
    /* Detached first: a promise listener may write again (and is refused). */
    if (ob->head == e) {
        ob->head = ob->tail = NULL;
    } else {
        eddy__entry_t *prev = ob->head;
        while (prev->next != e) {
            prev = prev->next;
            assert(prev != NULL); /* unflushed is on the list */
        }
        prev->next = NULL;
        ob->tail = prev;
    }
    ob->unflushed = NULL;
    while (e != NULL) {
        eddy__entry_t *next = e->next;
        complete_entry(ch, e, err, NULL);
        e = next;
    }
    eddy__outbound_update_writability(ch);
}

void eddy__outbound_destroy(eddy_channel_t *ch)
{
    eddy__outbound_t *ob = &ch->out;
    assert(ob->head == NULL || !(ch->flags & EDDY__CH_CLOSED)); /* the close failed them all */
    while (ob->head != NULL) {
        complete_entry(ch, take_head(ob), EDDY_ECLOSED, NULL);
    }
}
