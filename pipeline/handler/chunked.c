/*
 * The chunked writer (Netty's ChunkedWriteHandler, handler.h): chunked inputs queue with their
 * promises, and whatever is written after them queues behind; the queue is pumped on a flush
 * and whenever the channel turns writable, a chunk at a time while it stays writable. The
 * channel's water marks are the bound: a slow reader stops the pulling once the chunks written
 * pass the high mark, and it resumes below the low one.
 */
#include "pipeline/internal.h"

#include <eddy/handler.h>

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

/* ---------------------------------------------------------------------------------------
 * The handler
 */

/* A write held back behind a chunked input (or one itself). */
typedef struct item_s {
    struct item_s *next;
    eddy_msg_t *msg;
    eddy_promise_t *p; /* a reference, or NULL */
} item_t;

typedef struct writer_s {
    item_t *head, *tail;
    bool pumping; /* inside pump(): a flush from a promise listener only asks again */
} writer_t;

static item_t *pop(writer_t *w)
{
    item_t *it = w->head;
    w->head = it->next;
    if (w->head == NULL) {
        w->tail = NULL;
    }
    return it;
}

/* The item leaves: its message released (an input's close runs with its last reference), its
 * reference to the promise dropped (completed by the caller, or handed on with a write). */
static void item_free(item_t *it)
{
    eddy_msg_release(it->msg);
    eddy_future_release(it->p);
    free(it);
}

/* Pass it on (its promise with it) and free the item. */
static void pass_on(eddy_ctx_t *ctx, item_t *it, eddy_msg_t *msg)
{
    eddy_ctx_write(ctx, msg, it->p);
    eddy_future_release(it->p);
    free(it);
}

/*
 * One chunk of c, written on: 1 when more may follow, 0 at the end (an empty buffer carrying
 * the input's promise went on, completing after the chunks before it), or a negative code.
 */
static int pull(eddy_ctx_t *ctx, eddy_chunked_t *c, eddy_promise_t *p)
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
    eddy_ctx_write(ctx, eddy_buf_msg(b), n == 0 ? p : NULL);
    return n > 0;
}

/* The input at the head failed with err: its promise fails, the error is raised, and the
 * channel closes (the bytes written so far leave a hole in the stream). */
static void input_failed(eddy_ctx_t *ctx, item_t *it, int err)
{
    input_close(eddy_chunked_of(it->msg));
    eddy__promise_done(it->p, err);
    item_free(it);
    eddy_ctx_fire_exception(ctx, err);
    eddy_ctx_close(ctx, NULL);
}

/* Write what is queued while the channel stays writable. */
static void pump(eddy_ctx_t *ctx, writer_t *w)
{
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    w->pumping = true;
    while (w->head != NULL && eddy_channel_is_writable(ch) && !eddy_ctx_is_removed(ctx)) {
        eddy_chunked_t *c = eddy_chunked_of(w->head->msg);
        if (c == NULL) {
            item_t *it = pop(w);
            pass_on(ctx, it, it->msg);
            continue;
        }
        int rc = pull(ctx, c, w->head->p);
        if (rc == 0) {
            input_close(c);
            item_free(pop(w)); /* its promise went with the last buffer */
        } else if (rc < 0) {
            input_failed(ctx, pop(w), rc);
        }
    }
    w->pumping = false;
}

static void writer_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    writer_t *w = eddy_ctx_state(ctx);
    if (w->head == NULL && eddy_chunked_of(msg) == NULL) {
        eddy_ctx_write(ctx, msg, p); /* nothing to keep order with */
        return;
    }
    item_t *it = malloc(sizeof(*it));
    if (it == NULL) {
        eddy_ctx_fail_write(ctx, msg, p, EDDY_ENOMEM);
        return;
    }
    *it = (item_t){.msg = msg, .p = p != NULL ? eddy_future_retain(p) : NULL};
    if (w->tail != NULL) {
        w->tail->next = it;
    } else {
        w->head = it;
    }
    w->tail = it;
}

static void writer_flush(eddy_ctx_t *ctx)
{
    writer_t *w = eddy_ctx_state(ctx);
    if (!w->pumping) {
        pump(ctx, w);
    }
    eddy_ctx_flush(ctx);
}

static void writer_writability(eddy_ctx_t *ctx)
{
    writer_t *w = eddy_ctx_state(ctx);
    if (w->head != NULL && !w->pumping && eddy_channel_is_writable(eddy_ctx_channel(ctx))) {
        pump(ctx, w);
        eddy_ctx_flush(ctx);
    }
    eddy_ctx_fire_channel_writability_changed(ctx);
}

/* Removed (at close, every handler is): what is queued fails. */
static void writer_removed(eddy_ctx_t *ctx)
{
    writer_t *w = eddy_ctx_state(ctx);
    while (w->head != NULL) {
        item_t *it = pop(w);
        eddy__promise_done(it->p, EDDY_ECLOSED);
        item_free(it);
    }
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
    return calloc(1, sizeof(writer_t));
}

eddy_handler_t eddy_chunked_writer(void)
{
    return eddy_handler(NULL, &writer_ops, eddy_chunked_writer_new(), eddy_free_state);
}
