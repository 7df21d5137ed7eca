/*
 * The embedded channel (Netty's EmbeddedChannel): a channel without a socket on a manual
 * loop that the test drives from its own thread, with a virtual clock. Messages that reach
 * the tail queue for read_inbound; messages flushed at the head queue for read_outbound.
 */
#include "pipeline/internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static bool q_push(eddy__msgq_t *q, eddy_msg_t *msg)
{
    assert(msg != NULL && q->n <= q->cap);
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 16;
        eddy_msg_t **items = malloc(cap * sizeof(*items));
        if (items == NULL) {
            return false;
        }
        for (size_t i = 0; i < q->n; i++) {
            items[i] = q->items[(q->head + i) % q->cap];
        }
        free(q->items);
        q->items = items;
        q->cap = cap;
        q->head = 0;
    }
    q->items[(q->head + q->n) % q->cap] = msg;
    q->n++;
    return true;
}

static eddy_msg_t *q_pop(eddy__msgq_t *q)
{
    if (q->n == 0) {
        return NULL;
    }
    assert(q->head < q->cap);
    eddy_msg_t *msg = q->items[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    return msg;
}

static size_t q_drain(eddy__msgq_t *q)
{
    size_t n = 0;
    eddy_msg_t *msg;
    while ((msg = q_pop(q)) != NULL) {
        eddy_msg_release(msg);
        n++;
    }
    free(q->items);
    memset(q, 0, sizeof(*q));
    return n;
}

void eddy__embedded_inbound(eddy_channel_t *ch, eddy_msg_t *msg)
{
    if (!q_push(&ch->embedded->in_q, msg)) {
        eddy_msg_release(msg);
    }
}

/* Where the head's flush takes each flushed message: the queue the test reads. */
static void embedded_sink(eddy_channel_t *ch, eddy_msg_t *msg)
{
    if (!q_push(&ch->embedded->out_q, msg)) {
        eddy_msg_release(msg);
    }
}

/* The head's flush: every flushed message moves to the outbound queue, written. */
static void embedded_flush(eddy_channel_t *ch)
{
    eddy__outbound_hand_over(ch, embedded_sink);
}

static void embedded_begin_read(eddy_channel_t *ch)
{
    (void)ch; /* the test feeds input by hand */
}

static void embedded_shutdown_output(eddy_channel_t *ch, eddy_promise_t *p)
{
    assert(ch->flags & EDDY__CH_EMBEDDED);
    ch->flags |= EDDY__CH_OUTPUT_SHUTDOWN;
    eddy_pipeline_fire_user_event(&ch->pipeline, EDDY_EVENT_OUTPUT_SHUTDOWN, NULL);
    eddy__promise_done(p, 0);
}

static void embedded_destroy(eddy_channel_t *ch)
{
    if (ch->embedded == NULL) {
        return; /* made without memory for it */
    }
    q_drain(&ch->embedded->in_q);
    q_drain(&ch->embedded->out_q);
    free(ch->embedded);
    ch->embedded = NULL;
}

/* What a socket of either kind would take: bytes, file regions, and packets (datagram
 * codecs' tests). */
static int embedded_accepts(const eddy_channel_t *ch, const eddy_msg_t *msg)
{
    (void)ch;
    return msg->type == EDDY_MSG_BUF || msg->type == EDDY_MSG_COMPOSITE ||
                   msg->type == EDDY_MSG_DATAGRAM || msg->type == EDDY_MSG_FILE_REGION
               ? 0
               : EDDY_ENOTSUP;
}

static const eddy__channel_ops_t embedded_ops = {
    .kind = "embedded",
    .begin_read = embedded_begin_read,
    .flush = embedded_flush,
    .shutdown_output = embedded_shutdown_output,
    .destroy = embedded_destroy,
    .accepts = embedded_accepts,
};

/* The embedded loop's thread is whoever calls: enter around every call. */
typedef struct scope_s {
    eddy_loop_t *prev;
} scope_t;

static scope_t enter(eddy_channel_t *ch)
{
    scope_t s = {eddy__loop_enter(eddy__loop_of(ch))};
    eddy__pipeline_enter(&ch->pipeline);
    return s;
}

static void leave(eddy_channel_t *ch, scope_t s)
{
    eddy__loop_run_pending(eddy__loop_of(ch));
    eddy__pipeline_leave(&ch->pipeline);
    eddy__loop_leave(s.prev);
}

eddy_channel_t *eddy_embedded_channel_new(void)
{
    eddy_loop_t *loop = eddy__loop_new_manual();
    if (loop == NULL) {
        return NULL;
    }
    eddy_channel_t *ch = eddy__channel_new(loop, &embedded_ops, -1);
    if (ch == NULL) {
        eddy__loop_free_manual(loop);
        return NULL;
    }
    ch->embedded = calloc(1, sizeof(*ch->embedded));
    if (ch->embedded == NULL) {
        eddy_channel_release(ch);
        eddy__loop_free_manual(loop);
        return NULL;
    }
    ch->flags |= EDDY__CH_EMBEDDED;
    /* Two references: the open channel's (dropped at close) and the test's (finish). */
    eddy_channel_retain(ch);
    scope_t s = enter(ch);
    eddy__channel_registered(ch);
    ch->flags |= EDDY__CH_ACTIVE;
    eddy__channel_show_state(ch);
    eddy__pipeline_fire_active(&ch->pipeline);
    leave(ch, s);
    return ch;
}

bool eddy_embedded_write_inbound(eddy_channel_t *ch, eddy_msg_t *msg)
{
    assert(ch->embedded != NULL && msg != NULL);
    scope_t s = enter(ch);
    if (ch->flags & EDDY__CH_CLOSED) {
        eddy_msg_release(msg);
    } else {
        atomic_fetch_add_explicit(&ch->msgs_read, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&ch->bytes_read, eddy__msg_bytes(msg), memory_order_relaxed);
        eddy_pipeline_fire_channel_read(&ch->pipeline, msg);
        if (!(ch->flags & EDDY__CH_CLOSED)) {
            eddy_pipeline_fire_channel_read_complete(&ch->pipeline);
        }
    }
    leave(ch, s);
    return ch->embedded->in_q.n > 0;
}

bool eddy_embedded_write_outbound(eddy_channel_t *ch, eddy_msg_t *msg)
{
    scope_t s = enter(ch);
    eddy__pipeline_write(&ch->pipeline, msg, NULL, true);
    leave(ch, s);
    return ch->embedded->out_q.n > 0;
}

eddy_msg_t *eddy_embedded_read_inbound(eddy_channel_t *ch)
{
    return q_pop(&ch->embedded->in_q);
}

eddy_msg_t *eddy_embedded_read_outbound(eddy_channel_t *ch)
{
    return q_pop(&ch->embedded->out_q);
}

int eddy_embedded_error(eddy_channel_t *ch)
{
    int err = ch->embedded->last_error;
    ch->embedded->last_error = 0;
    return err;
}

size_t eddy_embedded_events(eddy_channel_t *ch, int *events, size_t n)
{
    eddy__embedded_t *e = ch->embedded;
    size_t count = e->nevents;
    for (size_t i = 0; i < count && i < n; i++) {
        events[i] = e->events[i];
    }
    e->nevents = 0;
    return count;
}

size_t eddy_embedded_run_pending(eddy_channel_t *ch)
{
    eddy_loop_t *prev = eddy__loop_enter(eddy__loop_of(ch));
    eddy__pipeline_enter(&ch->pipeline);
    size_t ran = eddy__loop_run_pending(eddy__loop_of(ch));
    eddy__pipeline_leave(&ch->pipeline);
    eddy__loop_leave(prev);
    return ran;
}

void eddy_embedded_advance_time(eddy_channel_t *ch, int64_t ms)
{
    if (ms > 0) {
        eddy__loop_advance(eddy__loop_of(ch), ms * 1000000);
    }
    eddy_embedded_run_pending(ch);
}

void eddy_embedded_shutdown_input(eddy_channel_t *ch)
{
    scope_t s = enter(ch);
    if (!(ch->flags & EDDY__CH_CLOSED)) {
        if (ch->opt[EDDY_ALLOW_HALF_CLOSURE]) {
            if (!(ch->flags & EDDY__CH_INPUT_SHUTDOWN)) {
                ch->flags |= EDDY__CH_INPUT_SHUTDOWN;
                eddy_pipeline_fire_user_event(&ch->pipeline, EDDY_EVENT_INPUT_SHUTDOWN, NULL);
            }
        } else {
            eddy__channel_do_close(ch, EDDY_EOF, NULL);
        }
    }
    leave(ch, s);
}

bool eddy_embedded_finish(eddy_channel_t *ch)
{
    scope_t s = enter(ch);
    if (!(ch->flags & EDDY__CH_CLOSED)) {
        eddy__channel_do_close(ch, 0, NULL);
    }
    leave(ch, s);
    eddy__embedded_t *e = ch->embedded;
    bool clean = e->in_q.n == 0 && e->out_q.n == 0 && e->last_error == 0;
    q_drain(&e->in_q);
    q_drain(&e->out_q);
    eddy_loop_t *loop = eddy__loop_of(ch);
    eddy_channel_release(ch); /* the test's reference: frees the channel */
    eddy__loop_free_manual(loop);
    return clean;
}
