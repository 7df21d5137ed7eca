/*
 * eddy pipelines: a channel's chain of handlers (Netty's ChannelPipeline).
 *
 * Inbound events (bytes read, the channel becoming active, errors) travel from the head to
 * the tail, outbound operations (write, flush, close) from the tail, or from the handler
 * that issues them, to the head, which performs them on the socket. A handler is a const
 * table of optional callbacks plus per-instance state; a callback it leaves NULL is skipped
 * without a call (a mask computed when the handler is added), so a long pipeline costs only
 * what its handlers do.
 *
 * Threads: every callback runs on the channel's loop (or, for a handler added with an
 * offload carrier, on the carrier's thread for the channel's partition). The pipeline is
 * changed on the loop; from other threads the change travels as a task.
 *
 * Ownership: a handler that receives a message (channel_read, write) owns one reference and
 * passes it on (fire_channel_read, write) or releases it. A message that reaches the tail
 * unhandled is released; an error that reaches it is logged once.
 */
#ifndef EDDY_PIPELINE_H
#define EDDY_PIPELINE_H

#include <eddy/buffer.h>
#include <eddy/common.h>
#include <eddy/loop.h>

#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eddy_channel_s eddy_channel_t;
typedef struct eddy_pipeline_s eddy_pipeline_t;
typedef struct eddy_ctx_s eddy_ctx_t;
typedef struct eddy_carrier_s eddy_carrier_t;
typedef struct eddy_addr_s eddy_addr_t;

/* User events (user_event_triggered): eddy's own, then EDDY_EVENT_USER and up for users. */
enum {
    EDDY_EVENT_INPUT_SHUTDOWN = 1, /* the peer closed its side; half-closure allowed */
    EDDY_EVENT_OUTPUT_SHUTDOWN,    /* our side was shut down (eddy_channel_shutdown_output) */
    EDDY_EVENT_READER_IDLE,        /* IdleStateHandler (handler.h) */
    EDDY_EVENT_WRITER_IDLE,
    EDDY_EVENT_ALL_IDLE,
    EDDY_EVENT_USER = 1024
};

/*
 * A handler's callbacks, in Netty's order; every slot may be NULL. ctx is this handler's
 * place in this pipeline; eddy_ctx_state(ctx) its state.
 */
typedef struct eddy_handler_ops_s {
    const char *name;  /* for logs */
    bool sharable;     /* one state may serve several pipelines at once (no per-channel
                          state); a non-sharable handler needs a state per pipeline */

    void (*handler_added)(eddy_ctx_t *ctx);
    void (*handler_removed)(eddy_ctx_t *ctx); /* last call; the state is freed once no
                                                  callback of the handler is running */

    /* Inbound: pass on with the matching eddy_ctx_fire_*(). */
    void (*channel_registered)(eddy_ctx_t *ctx);
    void (*channel_unregistered)(eddy_ctx_t *ctx);
    void (*channel_active)(eddy_ctx_t *ctx);
    void (*channel_inactive)(eddy_ctx_t *ctx);
    void (*channel_read)(eddy_ctx_t *ctx, eddy_msg_t *msg); /* owns msg */
    void (*channel_read_complete)(eddy_ctx_t *ctx);
    void (*user_event_triggered)(eddy_ctx_t *ctx, int event, void *data); /* data borrowed */
    void (*channel_writability_changed)(eddy_ctx_t *ctx);
    void (*exception_caught)(eddy_ctx_t *ctx, int err);

    /* Outbound: pass on with the matching eddy_ctx_*(); p may be NULL (nobody listens). */
    void (*bind)(eddy_ctx_t *ctx, const eddy_addr_t *local, eddy_promise_t *p);
    void (*connect)(eddy_ctx_t *ctx, const eddy_addr_t *remote, const eddy_addr_t *local,
                    eddy_promise_t *p);
    void (*disconnect)(eddy_ctx_t *ctx, eddy_promise_t *p);
    void (*close)(eddy_ctx_t *ctx, eddy_promise_t *p);
    void (*deregister)(eddy_ctx_t *ctx, eddy_promise_t *p);
    void (*read)(eddy_ctx_t *ctx);
    void (*write)(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p); /* owns msg */
    void (*flush)(eddy_ctx_t *ctx);
} eddy_handler_ops_t;

/* Frees a handler's state after handler_removed (may be NULL: the state is not freed). */
typedef void (*eddy_state_free_cb)(void *state);

/** free(state): a ready eddy_state_free_cb for state from malloc. */
EDDY_EXTERN void eddy_free_state(void *state);

/* ---------------------------------------------------------------------------------------
 * Changing the pipeline. name: unique in the pipeline (copied; NULL: a generated one). ops:
 * static, outlives the pipeline. state: the handler's, freed with free_state once the handler
 * is removed, including when the add fails. Any time, from inside an event too; the
 * channel's loop, or from another thread as a task (the result then only says it was
 * queued). Errors: EDDY_EEXIST (name taken), EDDY_ENOENT (base not found), EDDY_EINVAL (the
 * same non-sharable ops and state already in this pipeline), EDDY_ENOMEM, EDDY_ECLOSED.
 */

EDDY_EXTERN int eddy_pipeline_add_first(eddy_pipeline_t *p, const char *name,
                                        const eddy_handler_ops_t *ops, void *state,
                                        eddy_state_free_cb free_state);
EDDY_EXTERN int eddy_pipeline_add_last(eddy_pipeline_t *p, const char *name,
                                       const eddy_handler_ops_t *ops, void *state,
                                       eddy_state_free_cb free_state);
EDDY_EXTERN int eddy_pipeline_add_before(eddy_pipeline_t *p, const char *base, const char *name,
                                         const eddy_handler_ops_t *ops, void *state,
                                         eddy_state_free_cb free_state);
EDDY_EXTERN int eddy_pipeline_add_after(eddy_pipeline_t *p, const char *base, const char *name,
                                        const eddy_handler_ops_t *ops, void *state,
                                        eddy_state_free_cb free_state);
/**
 * add_last, with the handler's events run on carrier c (carrier.h), on the partition of the
 * channel's id: one channel's events stay in order, and the loop never waits for them. Its
 * fire_* and write calls hop back to the loop.
 *
 * Every inbound event goes through the partition, in order, also those the handler leaves
 * NULL (they are passed on from there): what it passes on keeps its place among them, so a
 * handler after it sees channel_read_complete behind the reads it forwarded. Removal runs on
 * the carrier behind the events queued there (handler_removed last). At close, the handlers
 * before it are removed at once; those after it only once it has passed on the events queued
 * when the channel closed, channel_inactive and channel_unregistered last, so they see them
 * (what it writes then fails with EDDY_ECLOSED). User event data reaches it later, on its
 * thread: fire events with data that stays valid until then (static data, or data in the
 * firing handler's state, which the pipeline keeps until no event is in flight).
 */
EDDY_EXTERN int eddy_pipeline_add_last_on(eddy_pipeline_t *p, eddy_carrier_t *c,
                                          const char *name, const eddy_handler_ops_t *ops,
                                          void *state, eddy_state_free_cb free_state);

/* ---------------------------------------------------------------------------------------
 * Handlers as values, and adding several at once (Netty's addLast(a, b, c)). A handler is its
 * ops and its state together, made by one constructor so the two cannot mismatch: every
 * built-in handler has one (eddy_idle_state_handler, eddy_length_field_decoder,
 * eddy_http_aggregator, ...), and eddy_handler() makes one of yours. A constructor that fails
 * (no memory, invalid arguments) returns a handler with ops NULL and error set; adding it
 * fails, so its caller checks once, at the add:
 *
 *     static int init_child(eddy_channel_t *ch, void *arg)
 *     {
 *         return EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch),
 *                                       eddy_read_timeout_handler(30000),
 *                                       eddy_length_field_decoder(65536, 0, 4, 0, 4),
 *                                       eddy_length_field_prepender(4),
 *                                       eddy_handler("app", &app_ops, app_new(), app_free));
 *     }
 */

/* One way to make a handler: a constructor returning an eddy_handler_t, declared next to the
 * handler in its module's header (eddy_line_decoder(), eddy_idle_state_handler(),
 * eddy_http_request_decoder(), ...), and eddy_handler() for your own. The older pairs
 * eddy_*_ops() + eddy_*_new() (an ops table and a state for eddy_pipeline_add_last) make the
 * same handler in two parts; they are kept as documented aliases for one release, then go. */
typedef struct eddy_handler_s {
    const char *name;              /* unique in the pipeline (copied); NULL: a generated one */
    const eddy_handler_ops_t *ops; /* NULL: the constructor failed (see error) */
    void *state;
    eddy_state_free_cb free_state;
    int error; /* why a constructor failed: EDDY_ENOMEM (also for invalid arguments) */
} eddy_handler_t;

/** A handler of your own: ops (static) with state, freed with free_state after removal (may
 * be NULL). A failed handler when ops is NULL (EDDY_EINVAL), or when state is NULL but
 * free_state is not (EDDY_ENOMEM: the state's allocation failed), so
 * eddy_handler("app", &app_ops, app_new(), app_free) needs no check of its own. */
EDDY_EXTERN eddy_handler_t eddy_handler(const char *name, const eddy_handler_ops_t *ops,
                                        void *state, eddy_state_free_cb free_state);
/** h with the name it is added under (Netty's addLast(name, handler)). */
EDDY_EXTERN eddy_handler_t eddy_handler_named(eddy_handler_t h, const char *name);

/**
 * Add the n handlers last, in order, all or none: 0, or the first failure (a failed
 * constructor's error, then those of eddy_pipeline_add_last) with none of them left in the
 * pipeline (those added already are removed again) and every state freed. The channel's
 * loop; from another thread each is added as a task, in order, and only failed constructors
 * are reported (none is added then, and every state is freed, as on the loop).
 */
EDDY_EXTERN int eddy_pipeline_add_handlers(eddy_pipeline_t *p, const eddy_handler_t *handlers,
                                           size_t n);
/** eddy_pipeline_add_handlers() of the handlers listed: EDDY_PIPELINE_ADD_LAST(p, a, b, c). */
#define EDDY_PIPELINE_ADD_LAST(p, ...)                                                         \
    eddy_pipeline_add_handlers((p), (const eddy_handler_t[]){__VA_ARGS__},                     \
                               sizeof((const eddy_handler_t[]){__VA_ARGS__}) /                 \
                                   sizeof(eddy_handler_t))

/** Remove the handler called name: 0 or EDDY_ENOENT. handler_removed runs at once; the state
 * is freed once no callback of the handler is running (a handler may remove itself). */
EDDY_EXTERN int eddy_pipeline_remove(eddy_pipeline_t *p, const char *name);
/** Remove the (first) handler with ops table ops: 0 or EDDY_ENOENT. */
EDDY_EXTERN int eddy_pipeline_remove_ops(eddy_pipeline_t *p, const eddy_handler_ops_t *ops);
/** Replace the handler called old_name with a new one in its place: as remove then add. */
EDDY_EXTERN int eddy_pipeline_replace(eddy_pipeline_t *p, const char *old_name,
                                      const char *name, const eddy_handler_ops_t *ops,
                                      void *state, eddy_state_free_cb free_state);

/** The context of the handler called name, or NULL. The loop's thread. */
EDDY_EXTERN eddy_ctx_t *eddy_pipeline_context(eddy_pipeline_t *p, const char *name);
/** The context of the first handler with ops, or NULL. The loop's thread. */
EDDY_EXTERN eddy_ctx_t *eddy_pipeline_context_ops(eddy_pipeline_t *p,
                                                  const eddy_handler_ops_t *ops);
/** Handler names from head to tail into names (up to n); returns how many there are. */
EDDY_EXTERN size_t eddy_pipeline_names(eddy_pipeline_t *p, const char **names, size_t n);
EDDY_EXTERN eddy_channel_t *eddy_pipeline_channel(eddy_pipeline_t *p);

/* Start an inbound event at the head (as the channel does), from the loop's thread. */
EDDY_EXTERN void eddy_pipeline_fire_channel_read(eddy_pipeline_t *p, eddy_msg_t *msg);
EDDY_EXTERN void eddy_pipeline_fire_channel_read_complete(eddy_pipeline_t *p);
EDDY_EXTERN void eddy_pipeline_fire_user_event(eddy_pipeline_t *p, int event, void *data);
EDDY_EXTERN void eddy_pipeline_fire_exception(eddy_pipeline_t *p, int err);

/* ---------------------------------------------------------------------------------------
 * The context: what a handler calls from inside its callbacks (the loop's thread, or its
 * carrier's thread for an offloaded handler).
 */

EDDY_EXTERN void *eddy_ctx_state(const eddy_ctx_t *ctx);
EDDY_EXTERN const char *eddy_ctx_name(const eddy_ctx_t *ctx);
EDDY_EXTERN eddy_channel_t *eddy_ctx_channel(const eddy_ctx_t *ctx);
EDDY_EXTERN eddy_pipeline_t *eddy_ctx_pipeline(const eddy_ctx_t *ctx);
EDDY_EXTERN eddy_loop_t *eddy_ctx_loop(const eddy_ctx_t *ctx);
/** The allocator for buffers of this channel (the default pooled one). */
EDDY_EXTERN eddy_allocator_t *eddy_ctx_alloc(const eddy_ctx_t *ctx);
/** True once the handler was removed (its callbacks are no longer called). */
EDDY_EXTERN bool eddy_ctx_is_removed(const eddy_ctx_t *ctx);

/* ---------------------------------------------------------------------------------------
 * Handler-scoped timers and tasks (Netty's ctx.executor().schedule() and execute()): the
 * library owns their lifetime. The callback runs on the handler's thread (the loop, or the
 * carrier's partition of the channel for an offloaded handler, in order with its events),
 * with the channel held, so it may close the channel or remove its own handler. It never
 * runs after the handler's handler_removed: removing the handler, and closing the channel
 * (which removes every handler), cancels what is still pending. A timer is named by an id,
 * never by a pointer, so an id kept after its timer fired or was cancelled is harmless.
 *
 * Call these from the handler's own callbacks (the loop's thread, or its carrier's thread
 * for an offloaded handler), or from its scoped callbacks. They refuse (0, or an error for
 * execute) once the handler was removed or the channel closed, when the loop shuts down, and
 * without memory.
 */

/* A handler-scoped callback: ctx is the handler's context, arg what was given with it. */
typedef void (*eddy_ctx_cb)(eddy_ctx_t *ctx, void *arg);

/** Run cb(ctx, arg) once, delay_ms from now (0 or less: at the loop's next timers, in this
 * turn when called on the loop). Returns the timer's id (never 0) for eddy_ctx_cancel(), or
 * 0 when refused. */
EDDY_EXTERN uint64_t eddy_ctx_schedule(eddy_ctx_t *ctx, int64_t delay_ms, eddy_ctx_cb cb,
                                       void *arg);
/** eddy_ctx_schedule() in nanoseconds, for sub-millisecond delays. */
EDDY_EXTERN uint64_t eddy_ctx_schedule_ns(eddy_ctx_t *ctx, int64_t delay_ns, eddy_ctx_cb cb,
                                          void *arg);
/** Run cb(ctx, arg) first after initial_ms, then every period_ms (at least 1) from the first
 * deadline, as eddy_loop_schedule_at_fixed_rate(), until cancelled or the handler is
 * removed. Returns the id, or 0 when refused (also for period_ms < 1). */
EDDY_EXTERN uint64_t eddy_ctx_schedule_at_fixed_rate(eddy_ctx_t *ctx, int64_t initial_ms,
                                                     int64_t period_ms, eddy_ctx_cb cb,
                                                     void *arg);
/** Cancel the timer id of this handler: 0 when this call stopped it (it will not run again),
 * EDDY_EALREADY when it already ran (one-shot), was cancelled, or id is not one of this
 * handler's pending timers (0 included). Inside its own callback, a periodic timer's cancel
 * stops the runs after this one. */
EDDY_EXTERN int eddy_ctx_cancel(eddy_ctx_t *ctx, uint64_t id);
/** Run cb(ctx, arg) soon on the handler's thread, after the current event (the loop's next
 * timers, in this turn when called on the loop; an offloaded handler's partition, behind the
 * events already queued there). 0, or EDDY_ECLOSED (handler removed or channel closed),
 * EDDY_ESHUTDOWN, EDDY_ENOMEM. */
EDDY_EXTERN int eddy_ctx_execute(eddy_ctx_t *ctx, eddy_ctx_cb cb, void *arg);

/* Inbound: hand the event to the next handler that implements it. */
EDDY_EXTERN void eddy_ctx_fire_channel_registered(eddy_ctx_t *ctx);
EDDY_EXTERN void eddy_ctx_fire_channel_unregistered(eddy_ctx_t *ctx);
EDDY_EXTERN void eddy_ctx_fire_channel_active(eddy_ctx_t *ctx);
EDDY_EXTERN void eddy_ctx_fire_channel_inactive(eddy_ctx_t *ctx);
/** Takes ownership of msg. */
EDDY_EXTERN void eddy_ctx_fire_channel_read(eddy_ctx_t *ctx, eddy_msg_t *msg);
EDDY_EXTERN void eddy_ctx_fire_channel_read_complete(eddy_ctx_t *ctx);
EDDY_EXTERN void eddy_ctx_fire_user_event(eddy_ctx_t *ctx, int event, void *data);
EDDY_EXTERN void eddy_ctx_fire_channel_writability_changed(eddy_ctx_t *ctx);
EDDY_EXTERN void eddy_ctx_fire_exception(eddy_ctx_t *ctx, int err);

/*
 * Outbound, from this handler toward the head. p may be NULL; it completes (0 or an error)
 * when the operation did. A failure is reported through p only, never as a return.
 *
 * A write with p NULL is fire-and-forget, never fail-silently (Netty's void promise): when
 * it cannot be queued (EDDY_ENOBUFS past EDDY_MAX_PENDING_OUTBOUND, EDDY_ENOTSUP for a
 * message no encoder turned into bytes, EDDY_ENOMEM, an encoder's own error), a byte stream
 * closes after what was queued before it, since it cannot go on after a hole (later writes
 * fail with EDDY_EPIPE), and the error travels from the head as exception_caught; the tail
 * logs it once, naming the channel, the handler that wrote and the message type. A datagram
 * channel drops the packet instead, counts it (eddy_channel_counters' msgs_dropped), logs
 * the first, and goes on. Writes refused because the channel or its output had closed
 * (EDDY_ECLOSED, EDDY_EPIPE) raise nothing: no byte follows them.
 */
EDDY_EXTERN void eddy_ctx_bind(eddy_ctx_t *ctx, const eddy_addr_t *local, eddy_promise_t *p);
EDDY_EXTERN void eddy_ctx_connect(eddy_ctx_t *ctx, const eddy_addr_t *remote,
                                  const eddy_addr_t *local, eddy_promise_t *p);
EDDY_EXTERN void eddy_ctx_disconnect(eddy_ctx_t *ctx, eddy_promise_t *p);
EDDY_EXTERN void eddy_ctx_close(eddy_ctx_t *ctx, eddy_promise_t *p);
/** Flush from this handler, then close gracefully once what was written is out: as
 * eddy_channel_close_after_flush() (channel.h), from this handler toward the head. */
EDDY_EXTERN void eddy_ctx_close_after_flush(eddy_ctx_t *ctx, eddy_promise_t *p);
EDDY_EXTERN void eddy_ctx_deregister(eddy_ctx_t *ctx, eddy_promise_t *p);
EDDY_EXTERN void eddy_ctx_read(eddy_ctx_t *ctx);
/** Queue msg (takes ownership) for the socket; nothing is sent before a flush. p completes
 * when it was written, or fails (EDDY_ECLOSED, EDDY_ENOBUFS...) with msg released. */
EDDY_EXTERN void eddy_ctx_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p);
EDDY_EXTERN void eddy_ctx_flush(eddy_ctx_t *ctx);
EDDY_EXTERN void eddy_ctx_write_and_flush(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p);
/**
 * For a handler's write op that cannot pass a write on (an encoder that cannot encode msg, a
 * limit of its own): release msg (NULL: already released; give it when you can, its type
 * names it in the log) and fail p with err (negative), or, p NULL, do what the head does with
 * such a write (above): a byte stream raises err and closes after what was queued before it;
 * a datagram channel counts the drop. Use it rather than failing p yourself: with p NULL, a
 * write that ends unreported in a handler leaves a hole in the stream. The channel's loop.
 */
EDDY_EXTERN void eddy_ctx_fail_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p, int err);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_PIPELINE_H */
