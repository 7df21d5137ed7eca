/*
 * eddy handlers: ready-made handlers (Netty's io.netty.handler.timeout, .logging and .flush).
 *
 * Each handler is an ops table plus a state made by its constructor, added as
 *
 *     eddy_pipeline_add_last(p, "idle", eddy_idle_state_handler_ops(),
 *                            eddy_idle_state_handler_new(60000, 0, 0), eddy_free_state);
 *
 * A constructor returns NULL only when out of memory: check before adding. The state belongs
 * to one channel (the ops tables are not sharable, except the logging handler's) and is freed
 * with eddy_free_state once the handler is removed: handler_removed cancels its timers and
 * releases what it holds.
 *
 * Threads: the handlers run on the channel's loop; add them without a carrier (their timers
 * fire on the loop). Times are read from eddy_loop_now_ns(), so on an embedded channel they
 * follow eddy_embedded_advance_time().
 *
 * Write promises: the idle and write-timeout handlers listen on each write's promise (one of
 * their own when the caller passed NULL). Pass promises owned by the channel's loop, or by no
 * loop, and complete every promise a handler keeps: a listener never runs on a promise
 * released incomplete, and what it would free then leaks.
 *
 * What a handler may keep across events: its state is freed once the handler is removed (at
 * close, every handler is), so anything that calls back later must not point into it unless
 * the library ends it with the handler. Two things qualify:
 *   - a channel reference it took (eddy_channel_retain), released when done, to use the
 *     channel (write, close) from elsewhere: another thread, a future's listener;
 *   - a handler-scoped timer or task (pipeline.h: eddy_ctx_schedule, eddy_ctx_execute): its
 *     callback never runs after handler_removed, and runs with the channel held, so it may
 *     close the channel or remove the handler. Keep its id, never a pointer.
 * A loop timer (eddy_loop_schedule) or a loop task with the state as its argument does not:
 * it can fire after the state is gone. The handlers here use scoped timers; so should yours:
 *
 *     static void ping_due(eddy_ctx_t *ctx, void *arg)
 *     {
 *         (void)arg;
 *         eddy_ctx_write_and_flush(ctx, eddy_buf_msg(eddy_buf_from_str("PING\r\n")), NULL);
 *     }
 *
 *     static void ping_active(eddy_ctx_t *ctx)
 *     {
 *         pinger_t *s = eddy_ctx_state(ctx);
 *         s->timer = eddy_ctx_schedule_at_fixed_rate(ctx, 1000, 1000, ping_due, s);
 *         eddy_ctx_fire_channel_active(ctx);
 *     }
 *
 * and nothing to cancel in handler_removed (eddy_ctx_cancel(ctx, s->timer) stops it earlier).
 * For ending a connection after a reply, eddy_ctx_close_after_flush() (pipeline.h) flushes,
 * sends FIN after the reply and lingers: no timer of the handler's own.
 */
#ifndef EDDY_HANDLER_H
#define EDDY_HANDLER_H

#include <eddy/common.h>
#include <eddy/file.h>
#include <eddy/pipeline.h>

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Idle state (Netty's IdleStateHandler): the user events EDDY_EVENT_READER_IDLE,
 * EDDY_EVENT_WRITER_IDLE and EDDY_EVENT_ALL_IDLE (pipeline.h) when nothing was read, nothing
 * was written (a write counts once its promise completed), or neither, for a time.
 */

/* The data of an idle user event (Netty's IdleStateEvent): borrowed, read-only, shared by
 * every channel. */
typedef struct eddy_idle_event_s {
    int state;  /* EDDY_EVENT_READER_IDLE, EDDY_EVENT_WRITER_IDLE or EDDY_EVENT_ALL_IDLE */
    bool first; /* the first event of its kind since the last read (reader, all) or completed
                   write (writer, all); later ones repeat every period while idle */
} eddy_idle_event_t;

/** The idle state handler's ops table (static). Any thread. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_idle_state_handler_ops(void);

/**
 * State for eddy_idle_state_handler_ops(): an event of each kind once its time (ms; 0 or
 * negative: that kind is off; at least 1 ms) passed without activity, then every period
 * while idle. Timers start when the channel is active (at once when added to an active
 * channel) and stop when it goes inactive or the handler is removed. NULL without memory.
 * Any thread.
 */
EDDY_EXTERN void *eddy_idle_state_handler_new(int64_t reader_idle_ms, int64_t writer_idle_ms,
                                              int64_t all_idle_ms);
/** The idle state handler as one value (pipeline.h, eddy_handler_t): ops and state. */
EDDY_EXTERN eddy_handler_t eddy_idle_state_handler(int64_t reader_idle_ms,
                                                   int64_t writer_idle_ms, int64_t all_idle_ms);

/* ---------------------------------------------------------------------------------------
 * Timeouts (Netty's ReadTimeoutHandler and WriteTimeoutHandler): exception_caught with
 * EDDY_ETIMEDOUT passed on from the handler, then the channel closed; once per channel.
 */

/** The read timeout handler's ops table (static). Any thread. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_read_timeout_handler_ops(void);

/**
 * State for eddy_read_timeout_handler_ops(): times out when nothing was read for timeout_ms
 * (0 or negative: never; at least 1 ms), timed as the idle handler's reader idle. NULL
 * without memory. Any thread.
 */
EDDY_EXTERN void *eddy_read_timeout_handler_new(int64_t timeout_ms);
/** The read timeout handler as one value (eddy_handler_t). */
EDDY_EXTERN eddy_handler_t eddy_read_timeout_handler(int64_t timeout_ms);

/** The write timeout handler's ops table (static). Any thread. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_write_timeout_handler_ops(void);

/**
 * State for eddy_write_timeout_handler_ops(): times out when a write's promise has not
 * completed timeout_ms after the write passed the handler (0 or negative: never; at least
 * 1 ms). A completed write cancels its timer. NULL without memory. Any thread.
 */
EDDY_EXTERN void *eddy_write_timeout_handler_new(int64_t timeout_ms);
/** The write timeout handler as one value (eddy_handler_t). */
EDDY_EXTERN eddy_handler_t eddy_write_timeout_handler(int64_t timeout_ms);

/* ---------------------------------------------------------------------------------------
 * Logging (Netty's LoggingHandler): one entry per event, inbound and outbound, each event
 * then passed on unchanged. An entry is "[id: 0x0000002a, L:127.0.0.1:80 - R:...] EVENT",
 * then ": detail" for events that have one; a buffer or composite message is its size
 * ("READ: 19B") and, in EDDY_LOG_HEX_DUMP, a dump of its readable bytes on the lines after:
 *
 *              +-------------------------------------------------+
 *              |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |
 *     +--------+-------------------------------------------------+----------------+
 *     |00000000| 48 65 6c 6c 6f 2c 20 77 6f 72 6c 64 21 0d 0a 00 |Hello, world!...|
 *     |00000010| 7f ff 5a                                        |..Z             |
 *     +--------+-------------------------------------------------+----------------+
 *
 * with "(N more bytes not shown)" on a last line past max_dump. Entries have no final
 * newline. The handler is sharable: it keeps no per-channel state.
 *
 * Without a sink of its own, entries go to the library's log (common.h): to the hook
 * eddy_log_set_hook() set (by default "eddy: <entry>" on stderr), at the handler's level, and
 * those below the log's threshold (EDDY_LOG_INFO, unless EDDY_LOG or eddy_log_set_level() say
 * otherwise) are dropped before they are built. So the default DEBUG entries show with
 * EDDY_LOG=debug, as Netty's LoggingHandler at DEBUG shows once its logger is at DEBUG. A sink
 * given in the options gets every entry, whatever the threshold.
 */

/* Each entry carries an eddy_log_level_t (common.h). */

typedef enum {
    EDDY_LOG_HEX_DUMP = 0, /* the size and a hex dump of buffers (Netty's ByteBufFormat) */
    EDDY_LOG_SIMPLE        /* the size only */
} eddy_log_format_t;

/* Where entries go: called on the channel's loop with the entry (valid during the call). A
 * sink shared by channels on several loops must be thread-safe. */
typedef void (*eddy_log_cb)(eddy_log_level_t level, const char *text, void *arg);

typedef struct eddy_logging_options_s {
    eddy_log_level_t level;   /* the level of every entry; 0: EDDY_LOG_DEBUG */
    eddy_log_format_t format; /* 0: EDDY_LOG_HEX_DUMP */
    eddy_log_cb sink;         /* NULL: the library's log (above) */
    void *sink_arg;
    size_t max_dump; /* bytes of a message dumped at most; 0: 64 KiB */
} eddy_logging_options_t;

/** The logging handler's ops table (static, sharable). Any thread. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_logging_handler_ops(void);

/** State for eddy_logging_handler_ops(), from opts (copied; NULL: defaults). NULL without
 * memory. Any thread. */
EDDY_EXTERN void *eddy_logging_handler_new(const eddy_logging_options_t *opts);
/** The logging handler as one value (eddy_handler_t). */
EDDY_EXTERN eddy_handler_t eddy_logging_handler(const eddy_logging_options_t *opts);

/** A ready sink: writes "eddy: LEVEL text\n" to the FILE * in file (NULL: stderr) in one
 * stdio call. Any thread. */
EDDY_EXTERN void eddy_log_to_file(eddy_log_level_t level, const char *text, void *file);

/* ---------------------------------------------------------------------------------------
 * Flush consolidation (Netty's FlushConsolidationHandler): fewer flushes, so fewer writev
 * calls, at some cost in latency. Put it first in the pipeline (nearest the head). During a
 * read batch (channel_read until channel_read_complete) flushes are held and done once at
 * channel_read_complete, or when explicit_flush_after_flushes were held. Outside a read batch
 * a flush goes through at once, unless consolidate_when_no_read_in_progress: then it is held
 * and done by a handler-scoped task (eddy_ctx_schedule), so flushes issued before it runs become
 * one, or at once when explicit_flush_after_flushes were held. A held flush is also done on
 * exception_caught, disconnect, close, handler removal, and when the channel becomes
 * unwritable.
 */

#define EDDY_FLUSH_CONSOLIDATION_DEFAULT_FLUSHES 256

/** The flush consolidation handler's ops table (static). Any thread. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_flush_consolidation_handler_ops(void);

/**
 * State for eddy_flush_consolidation_handler_ops(). explicit_flush_after_flushes: held
 * flushes after which one goes through (0: EDDY_FLUSH_CONSOLIDATION_DEFAULT_FLUSHES). NULL
 * without memory. Any thread.
 */
EDDY_EXTERN void *eddy_flush_consolidation_handler_new(unsigned explicit_flush_after_flushes,
                                                       bool consolidate_when_no_read_in_progress);
/** The flush consolidation handler as one value (eddy_handler_t). */
EDDY_EXTERN eddy_handler_t eddy_flush_consolidation_handler(
    unsigned explicit_flush_after_flushes, bool consolidate_when_no_read_in_progress);

/* ---------------------------------------------------------------------------------------
 * Chunked writes (Netty's ChunkedWriteHandler and ChunkedInput): a body written as a source
 * that the handler pulls from a chunk at a time, only while the channel is writable, so a slow
 * reader of a 1 GiB source costs the water marks' worth of memory, not the source.
 *
 *     EDDY_PIPELINE_ADD_LAST(p, ..., eddy_chunked_writer(), app);
 *     eddy_ctx_write_and_flush(ctx, eddy_chunked_msg(eddy_chunked_file(region, 0)), promise);
 *
 * The writer queues each chunked input with its promise, and what is written after it (any
 * message) behind it, so order holds. On a flush and on each writability change it reads
 * chunks (byte buffers from the channel's allocator) and writes them on while the channel
 * stays writable, flushing after each batch. The input's promise completes once its last
 * chunk is written, or fails with the read's error (which is raised, and the channel closed:
 * the stream has a hole) or with EDDY_ECLOSED at close. Messages that are not chunked inputs
 * pass through as they are when nothing is queued before them.
 */
typedef struct eddy_chunked_s eddy_chunked_t;

/* Read up to cap bytes of the source into dst: the count, 0 at its end, or a negative code.
 * Called on the channel's loop (it may block on a disk, as a read of a file does). */
typedef ssize_t (*eddy_chunked_read_cb)(void *arg, uint8_t *dst, size_t cap);
/* Let go of the source (after its end, a failure or a close): once. */
typedef void (*eddy_chunked_close_cb)(void *arg);

/**
 * A chunked input (message type EDDY_MSG_CHUNKED) reading chunks of up to chunk_size bytes (0:
 * 16 KiB) from read(arg, ...); close(arg) (may be NULL) is called once it is done or
 * released unread. The caller owns the one reference; write it with eddy_chunked_msg(). NULL
 * when out of memory (close is not called then). Any thread.
 */
EDDY_EXTERN eddy_chunked_t *eddy_chunked_new(eddy_chunked_read_cb read, eddy_chunked_close_cb close,
                                             void *arg, size_t chunk_size);
/** A chunked input reading region r (taken over, file.h) with pread (Netty's ChunkedFile):
 * what a region becomes where a transport cannot send it whole. NULL when out of memory (r
 * released). */
EDDY_EXTERN eddy_chunked_t *eddy_chunked_file(eddy_file_region_t *r, size_t chunk_size);
/** The message header of c, to write it. Borrows. */
EDDY_EXTERN eddy_msg_t *eddy_chunked_msg(eddy_chunked_t *c);
/** The chunked input behind msg, or NULL. Borrows. */
EDDY_EXTERN eddy_chunked_t *eddy_chunked_of(eddy_msg_t *msg);

/** The chunked writer's handler table. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_chunked_writer_ops(void);
/** State for it, freed with eddy_free_state; NULL when out of memory. */
EDDY_EXTERN void *eddy_chunked_writer_new(void);
/** The chunked writer as one value (eddy_handler_t). */
EDDY_EXTERN eddy_handler_t eddy_chunked_writer(void);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_HANDLER_H */
