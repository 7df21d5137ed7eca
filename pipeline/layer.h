/*
 * pipeline/layer.h: what the pipeline layer offers the layers above it, bootstrap/ and codec/
 * (docs/architecture.md), and nothing else: their handlers work through the public pipeline
 * and channel API (include/eddy/pipeline.h, channel.h), and need besides only promises done
 * or failed, the bytes of a message, a close hook, the decoders of a pipeline, and timeouts.
 * The channel's and the pipeline's insides are pipeline/internal.h's, this layer's own. Not
 * installed.
 */
#ifndef EDDY_PIPELINE_LAYER_H
#define EDDY_PIPELINE_LAYER_H

#include <eddy/channel.h>
#include <eddy/handler.h>
#include <eddy/pipeline.h>

#include "buffer/layer.h"
#include "reactor/layer.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Complete p (NULL is fine) with 0 or err. */
static inline void eddy__promise_done(eddy_promise_t *p, int err)
{
    if (p == NULL) {
        return;
    }
    if (err < 0) {
        eddy_promise_fail(p, err);
    } else {
        eddy_promise_succeed(p, NULL);
    }
}

/* A future listener that completes the promise arg (a reference, released) as f completed. */
void eddy__promise_done_listener(eddy_future_t *f, void *arg);

/* Complete a listen or connect future with ch: the future holds a reference to ch until it is
 * freed, so eddy_future_channel() is safe while the caller holds the future. */
int eddy__promise_succeed_channel(eddy_promise_t *p, eddy_channel_t *ch);

/* Small blocks made and freed per stream or request (a protocol's state, a library's own
 * allocations), reused on the thread that frees them (recycle.c): sizes up to 512 bytes come
 * in four classes (64, 128, 256, 512), each thread keeping at most 256 of a class; larger
 * ones are malloc's. eddy__small_free takes the size given to eddy__small_alloc (NULL is
 * fine). Any thread; under AddressSanitizer nothing is kept. */
void *eddy__small_alloc(size_t size);
void eddy__small_free(void *p, size_t size);
/* Whether blocks of sizes a and b come from one class (a realloc between them can stay). */
bool eddy__small_same(size_t a, size_t b);

/* The readable bytes of a message the outbound buffer can write (buf, composite), else 0. */
size_t eddy__msg_bytes(eddy_msg_t *msg);

/* Called once at close on the loop, after the handlers are removed and before the close
 * future completes. One hook serves many channels (the server bootstrap's count of live
 * children): a close-future listener would cost every connection a future. Its owner keeps
 * it alive until those channels closed. */
typedef struct eddy__close_hook_s {
    void (*closed)(eddy_channel_t *ch, void *arg);
    void *arg;
} eddy__close_hook_t;
/* Set ch's close hook (the loop, before it closes; one per channel). */
void eddy__channel_set_close_hook(eddy_channel_t *ch, const eddy__close_hook_t *hook);

/* Hold ch across work a task of its loop does outside any of its pipeline's events (as the
 * loop holds it for a timer's or an I/O callback's), work that may close it: a send that
 * meets the peer gone closes the channel inside the write, and its removed handlers' state
 * would be freed there, under the handler still running. Held, ch and that state stay until
 * the matching leave. The loop's thread. */
void eddy__channel_enter(eddy_channel_t *ch);
void eddy__channel_leave(eddy_channel_t *ch);

/* Call fn(ch, arg) for each socket channel of loop whose close hook is hook (a server
 * bootstrap's children), as a snapshot: fn may close them. The loop's thread. */
void eddy__loop_each_hooked(eddy_loop_t *loop, const eddy__close_hook_t *hook,
                            void (*fn)(eddy_channel_t *ch, void *arg), void *arg);

/* Call fn(state, arg) with the state of every handler of p whose channel_read is read (the
 * decoders on the decoder base: eddy_decoder_channel_read), head to tail. The loop's thread. */
void eddy__pipeline_each_state(eddy_pipeline_t *p, void (*read)(eddy_ctx_t *, eddy_msg_t *),
                               void (*fn)(void *state, void *arg), void *arg);

/* A timeout in milliseconds as loop-clock nanoseconds: 0 (none) for ms <= 0, capped far from
 * overflowing the loop's clock arithmetic (handler/timeout.c). */
int64_t eddy__timeout_ns(int64_t ms);

/* Netty's readTimedOut / writeTimedOut: exception_caught(EDDY_ETIMEDOUT), then close; once,
 * *closed remembering it. The handler's state may be freed when this returns (the close
 * removes the handler). The loop's thread (handler/timeout.c). */
void eddy__ctx_timed_out(eddy_ctx_t *ctx, bool *closed);

/*
 * The chunked writer's queue (handler/chunked.c, handler.h) for a handler that pulls chunked
 * inputs itself, as the HTTP/1.1 response encoder does to frame their chunks: inputs, and
 * what is written after them, queue in order with their promises; eddy__pump_run() passes
 * the queue on, an input a chunk at a time, while the channel's queue has room. What is queued
 * is held against the channel's writability (pipeline/internal.h, eddy__outbound_hold): an
 * input a chunk, anything else its bytes, so a decoder upstream stops passing messages
 * while answers pile up behind an input. The owner runs it on flush and on the writability
 * event, and drops it when removed. The loop's thread.
 */
typedef struct eddy__pump_ops_s {
    /* Chunk b (taken over) of the input at the head, on from ctx; last: the input ended (b
     * is then empty) and p (borrowed, may be NULL) goes with this write. */
    void (*emit)(eddy_ctx_t *ctx, eddy_buf_t *b, bool last, eddy_promise_t *p);
    /* msg (taken over), queued behind an input, on with p (borrowed, may be NULL). */
    void (*pass)(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p);
    /* The bytes msg (not an input) will write, where eddy__msg_bytes() cannot tell (the
     * owner's own messages, an HTTP response); NULL or 0: eddy__msg_bytes(). */
    size_t (*bytes)(eddy_msg_t *msg);
} eddy__pump_ops_t;

typedef struct eddy__pump_item_s eddy__pump_item_t;

typedef struct eddy__pump_s {
    const eddy__pump_ops_t *ops;
    eddy_channel_t *ch; /* the channel its items are held against (set by the first add) */
    eddy__pump_item_t *head, *tail;
    bool running; /* inside eddy__pump_run(): a flush from a promise listener only asks again */
} eddy__pump_t;

/* Whether the bytes queued in the channel itself (not those a pump holds) leave room: what a
 * pump's owner goes by to run it (pipeline/internal.h, eddy__outbound_hold). */
bool eddy__outbound_has_room(const eddy_channel_t *ch);

/* Hold ch's input (hold true) or let go of one hold (false): while any is held the channel
 * reads nothing, though it wants input, as under the backpressure pause. For a handler that
 * keeps bytes it cannot pass on yet (a decoder that backpressure stopped): the channel must
 * not read more until those are through, or each writability event would bring in a read's
 * worth (on io_uring a batch of receives) more than it sends out. Holds and lets go pair;
 * a lingering close reads regardless. On the loop.*/
void eddy__channel_hold_input(eddy_channel_t *ch, bool hold);

/* Whether anything is queued (what is written next must queue behind it). */
static inline bool eddy__pump_busy(const eddy__pump_t *q)
{
    return q->head != NULL;
}
/* Queue msg (taken over) with p (a reference taken), written from ctx: 0, or EDDY_ECLOSED
 * (the channel closed: nothing could go on) or EDDY_ENOMEM (neither taken). */
int eddy__pump_add(eddy__pump_t *q, eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p);
/* Pass the queue on while the channel's queue has room (not when already inside). An input
 * whose read fails fails its promise, raises the error and closes the channel. */
void eddy__pump_run(eddy__pump_t *q, eddy_ctx_t *ctx);
/* Let everything queued go, its promises failed with err. */
void eddy__pump_drop(eddy__pump_t *q, int err);

/* Read up to cap bytes of c into dst (handler.h's eddy_chunked_read_cb): the count, 0 at its
 * end, or a negative code. For a handler that takes a chunked input as a body (HTTP/2). */
ssize_t eddy__chunked_read(eddy_chunked_t *c, uint8_t *dst, size_t cap);

#endif /* EDDY_PIPELINE_LAYER_H */
