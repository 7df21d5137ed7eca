/*
 * The chunked writer (Netty's ChunkedWriteHandler, handler.h): chunked inputs queue with their
 * promises, and whatever is written after them queues behind; the queue is pumped on a flush
 * and whenever the channel turns writable, a chunk at a time while it stays writable. The
 * channel's water marks are the bound: a slow reader stops the pulling once the chunks written
 * pass the high mark, and it resumes below the low one.
 */
#include "pipeline/internal.h"

#include <eddy/handler.h>

#include <assert.h>
#include <stdlib.h>

#define DEFAULT_CHUNK 16384

struct eddy_chunked_s {
    eddy_msg_t _msg; /* EDDY_MSG_CHUNKED */
    eddy_chunked_read_cb read;
    eddy_chunked_close_cb close;
    void *arg;
    size_t chunk;
    bool closed;
};

static void input_close(eddy_chunked_t *c)
{
    if (!c->closed) {
        c->closed = true;
        if (c->close != NULL) {
            c->close(c->arg);
        }
    }
}

static void chunked_free(eddy_msg_t *msg)
{
    eddy_chunked_t *c = eddy_chunked_of(msg);
    input_close(c);
    free(c);
}

eddy_chunked_t *eddy_chunked_new(eddy_chunked_read_cb read, eddy_chunked_close_cb close,
                                 void *arg, size_t chunk_size)
{
    eddy_chunked_t *c = malloc(sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    *c = (eddy_chunked_t){.read = read, .close = close, .arg = arg,
                          .chunk = chunk_size > 0 ? chunk_size : DEFAULT_CHUNK};
    eddy_msg_init(&c->_msg, EDDY_MSG_CHUNKED, chunked_free);
    return c;
}

eddy_msg_t *eddy_chunked_msg(eddy_chunked_t *c)
{
    return &c->_msg;
}

eddy_chunked_t *eddy_chunked_of(eddy_msg_t *msg)
{
    return msg != NULL && msg->type == EDDY_MSG_CHUNKED ? EDDY_CONTAINER_OF(msg, eddy_chunked_t, _msg)
                                                        : NULL;
}

/* A file region as a chunked input: pread, then skip what was read. */
static ssize_t file_read(void *arg, uint8_t *dst, size_t cap)
{
    eddy_file_region_t *r = arg;
    ssize_t n = eddy_file_region_read(r, dst, cap);
    if (n > 0) {
        eddy_file_region_skip(r, (uint64_t)n);
    }
    return n;
}

static void file_close(void *arg)
{
    eddy_msg_release(eddy_file_region_msg(arg));
}

eddy_chunked_t *eddy_chunked_file(eddy_file_region_t *r, size_t chunk_size)
{
    eddy_chunked_t *c = eddy_chunked_new(file_read, file_close, r, chunk_size);
    if (c == NULL) {
        file_close(r);
    }
    return c;
}

ssize_t eddy__chunked_read(eddy_chunked_t *c, uint8_t *dst, size_t cap)
{
    assert(!c->closed);
    return c->read(c->arg, dst, cap);
}

/* ---------------------------------------------------------------------------------------
 * The queue (pipeline/layer.h)
 */

/* A write held back behind a chunked input (or one itself). */
struct eddy__pump_item_s {
    eddy__pump_item_t *next;
    eddy_msg_t *msg;
    eddy_promise_t *p; /* a reference, or NULL */
    size_t held;       /* its bytes held against the channel's writability */
};

/* What an item costs besides its bytes (its entry, its message's header). */
#define ITEM_BYTES 64

/* What msg holds while queued: an input, a chunk (what it writes next); anything else, the
 * bytes it will write. */
static size_t item_bytes(const eddy__pump_t *q, eddy_msg_t *msg)
{
    eddy_chunked_t *c = eddy_chunked_of(msg);
    size_t n = c != NULL ? c->chunk : q->ops->bytes != NULL ? q->ops->bytes(msg) : 0;
    return ITEM_BYTES + (n != 0 ? n : eddy__msg_bytes(msg));
}

/* The item's bytes are no longer held against ch (it goes on, or is dropped). */
static void unhold(eddy_channel_t *ch, eddy__pump_item_t *it)
{
    eddy__outbound_unhold(ch, it->held);
    it->held = 0;
}

static eddy__pump_item_t *pop(eddy__pump_t *q)
{
    eddy__pump_item_t *it = q->head;
    q->head = it->next;
    if (q->head == NULL) {
        q->tail = NULL;
    }
    return it;
}

static void push_front(eddy__pump_t *q, eddy__pump_item_t *it)
{
    it->next = q->head;
    q->head = it;
    if (q->tail == NULL) {
        q->tail = it;
    }
}

/* The item leaves: its message released (an input's close runs with its last reference), its
 * reference to the promise dropped (completed by the caller, or handed on with a write). */
static void item_free(eddy__pump_item_t *it)
{
    eddy_msg_release(it->msg);
    eddy_future_release(it->p);
    free(it);
}

int eddy__pump_add(eddy__pump_t *q, eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    if (!eddy_channel_is_open(eddy_ctx_channel(ctx))) {
        return EDDY_ECLOSED; /* it would wait for a turn that never comes (held a file) */
    }
    eddy__pump_item_t *it = malloc(sizeof(*it));
    if (it == NULL) {
        return EDDY_ENOMEM;
    }
    assert(q->ch == NULL || q->ch == eddy_ctx_channel(ctx)); /* one channel's */
    q->ch = eddy_ctx_channel(ctx);
    *it = (eddy__pump_item_t){
        .msg = msg, .p = p != NULL ? eddy_future_retain(p) : NULL, .held = item_bytes(q, msg)};
    if (q->tail != NULL) {
        q->tail->next = it;
    } else {
        q->head = it;
    }
    q->tail = it;
    /* Last: the writability event this may fire finds the item queued. */
    eddy__outbound_hold(q->ch, it->held);
    return 0;
}

/*
 * One chunk of c on: 1 when more may follow, 0 at the end (an empty buffer carrying the
 * input's promise went on, completing after the chunks before it), or a negative code.
 */
static int pull(eddy__pump_t *q, eddy_ctx_t *ctx, eddy_chunked_t *c, eddy_promise_t *p)
{
    eddy_buf_t *b = eddy_buf_alloc(eddy_ctx_alloc(ctx), c->chunk, c->chunk);
    ssize_t n = b != NULL ? c->read(c->arg, eddy_buf_write_ptr(b), c->chunk) : EDDY_ENOMEM;
    if (n < 0) {
        if (b != NULL) {
            eddy_buf_release(b);
        }
        return (int)n;
    }
    eddy_buf_produce(b, (size_t)n);
    q->ops->emit(ctx, b, n == 0, n == 0 ? p : NULL);
    return n > 0;
}

/* The input at the head failed with err: its promise fails, the error is raised, and the
 * channel closes (the bytes written so far leave a hole in the stream). */
static void input_failed(eddy_ctx_t *ctx, eddy__pump_item_t *it, int err)
{
    input_close(eddy_chunked_of(it->msg));
    eddy__promise_done(it->p, err);
    item_free(it);
    eddy_ctx_fire_exception(ctx, err);
    eddy_ctx_close(ctx, NULL);
}

void eddy__pump_run(eddy__pump_t *q, eddy_ctx_t *ctx)
{
    if (q->running) {
        return;
    }
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    q->running = true;
    while (q->head != NULL && eddy__outbound_has_room(ch) && !eddy_ctx_is_removed(ctx)) {
        eddy_chunked_t *c = eddy_chunked_of(q->head->msg);
        if (c == NULL) {
            eddy__pump_item_t *it = pop(q);
            unhold(ch, it); /* its write counts its bytes now */
            q->ops->pass(ctx, it->msg, it->p);
            eddy_future_release(it->p);
            free(it);
            continue;
        }
        /* Out of the queue while its chunk is written: a write that closes the channel drops
         * what is queued (the owner is removed) under us. */
        eddy__pump_item_t *it = pop(q);
        int rc = pull(q, ctx, c, it->p);
        if (rc > 0 && !eddy_ctx_is_removed(ctx)) {
            push_front(q, it); /* still held: its next chunk */
            continue;
        }
        unhold(ch, it);
        if (rc == 0) {
            input_close(c);
            item_free(it); /* its promise went with the last buffer */
        } else if (rc < 0) {
            input_failed(ctx, it, rc);
        } else {
            eddy__promise_done(it->p, EDDY_ECLOSED);
            item_free(it);
        }
    }
    q->running = false;
    if (!eddy_ctx_is_removed(ctx)) {
        eddy__outbound_update_writability(ch); /* what left the queue no longer counts */
    }
}

void eddy__pump_drop(eddy__pump_t *q, int err)
{
    while (q->head != NULL) {
        eddy__pump_item_t *it = pop(q);
        unhold(q->ch, it);
        eddy__promise_done(it->p, err);
        item_free(it);
    }
}

/* ---------------------------------------------------------------------------------------
 * The handler
 */

static void writer_emit(eddy_ctx_t *ctx, eddy_buf_t *b, bool last, eddy_promise_t *p)
{
    (void)last;
    eddy_ctx_write(ctx, eddy_buf_msg(b), p);
}

static const eddy__pump_ops_t writer_pump = {
    .emit = writer_emit,
    .pass = eddy_ctx_write,
};

static void writer_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy__pump_t *q = eddy_ctx_state(ctx);
    if (!eddy__pump_busy(q) && eddy_chunked_of(msg) == NULL) {
        eddy_ctx_write(ctx, msg, p); /* nothing to keep order with */
        return;
    }
    int err = eddy__pump_add(q, ctx, msg, p);
    if (err != 0) {
        eddy_ctx_fail_write(ctx, msg, p, err);
    }
}

static void writer_flush(eddy_ctx_t *ctx)
{
    eddy__pump_run(eddy_ctx_state(ctx), ctx);
    eddy_ctx_flush(ctx);
}

static void writer_writability(eddy_ctx_t *ctx)
{
    eddy__pump_t *q = eddy_ctx_state(ctx);
    if (eddy__pump_busy(q) && !q->running && eddy__outbound_has_room(eddy_ctx_channel(ctx))) {
        eddy__pump_run(q, ctx);
        eddy_ctx_flush(ctx);
    }
    eddy_ctx_fire_channel_writability_changed(ctx);
}

/* Removed (at close, every handler is): what is queued fails. */
static void writer_removed(eddy_ctx_t *ctx)
{
    eddy__pump_drop(eddy_ctx_state(ctx), EDDY_ECLOSED);
}

static const eddy_handler_ops_t writer_ops = {
    .name = "chunked_writer",
    .handler_removed = writer_removed,
    .channel_writability_changed = writer_writability,
    .write = writer_write,
    .flush = writer_flush,
};

const eddy_handler_ops_t *eddy_chunked_writer_ops(void)
{
    return &writer_ops;
}

void *eddy_chunked_writer_new(void)
{
    eddy__pump_t *q = calloc(1, sizeof(*q));
    if (q != NULL) {
        q->ops = &writer_pump;
    }
    return q;
}

eddy_handler_t eddy_chunked_writer(void)
{
    return eddy_handler(NULL, &writer_ops, eddy_chunked_writer_new(), eddy_free_state);
}
