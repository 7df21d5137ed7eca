/*
 * pipeline/internal.h: channels, pipelines and contexts inside, the pipeline layer's own
 * (channel.c, pipeline.c, outbound.c, transport/, handler/, tls/). The layers above see
 * pipeline/layer.h only. Not installed.
 */
#ifndef EDDY_PIPELINE_INTERNAL_H
#define EDDY_PIPELINE_INTERNAL_H

#include <eddy/channel.h>
#include <eddy/file.h>
#include <eddy/pipeline.h>

#include "pipeline/layer.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/uio.h>

/* One bit per event a handler may implement: its mask says which it does. */
enum {
    EDDY__EV_REGISTERED = 1u << 0,
    EDDY__EV_UNREGISTERED = 1u << 1,
    EDDY__EV_ACTIVE = 1u << 2,
    EDDY__EV_INACTIVE = 1u << 3,
    EDDY__EV_READ = 1u << 4,
    EDDY__EV_READ_COMPLETE = 1u << 5,
    EDDY__EV_USER_EVENT = 1u << 6,
    EDDY__EV_WRITABILITY = 1u << 7,
    EDDY__EV_EXCEPTION = 1u << 8,
    EDDY__EV_BIND = 1u << 9,
    EDDY__EV_CONNECT = 1u << 10,
    EDDY__EV_DISCONNECT = 1u << 11,
    EDDY__EV_CLOSE = 1u << 12,
    EDDY__EV_DEREGISTER = 1u << 13,
    EDDY__EV_OP_READ = 1u << 14,
    EDDY__EV_WRITE = 1u << 15,
    EDDY__EV_FLUSH = 1u << 16,
};

/* A handler's context is one allocation: the context, what an offloaded one has
 * (eddy__ctx_offload_t), and its name (NUL-terminated); the pipeline's end (its head and tail)
 * is named by its ops (pipeline.c, ctx_name()). 64 B: with a name of up to 8 bytes (NUL
 * included) it is one 80 B malloc chunk. */
struct eddy_ctx_s {
    eddy_ctx_t *prev, *next; /* a removed context keeps both, so a walk through it goes on */
    eddy_pipeline_t *pipeline;
    const eddy_handler_ops_t *ops;
    void *state;
    eddy_state_free_cb free_state;
    union {
        /* Linked: its handler-scoped timers still pending (scoped.c), the loop's. */
        struct eddy__job_s *jobs;
        /* Removed (jobs cancelled first): waiting until no event can be inside it. */
        eddy_ctx_t *grave_next;
    };
    unsigned mask;
    bool removed;
    bool on_carrier; /* offloaded handler: every inbound event runs on the carrier */
};

/* After an offloaded context: its carrier, and its handler-scoped timers and their ids, which
 * belong to the carrier's thread (the context's jobs word is the loop's). */
typedef struct eddy__ctx_offload_s {
    struct eddy_carrier_s *carrier;
    struct eddy__job_s *jobs;
    uint64_t job_ids;
} eddy__ctx_offload_t;

struct eddy_pipeline_s {
    /* The head and the tail in one: the list is a ring through it. Never removed, so its
     * grave_next heads the graveyard: removed contexts, freed when depth is back to 0. */
    eddy_ctx_t end;
    unsigned depth;             /* nested entries into the pipeline (the loop's thread) */
    _Atomic unsigned offloaded; /* events in flight on carriers */
    unsigned names;             /* counter for generated names */
    /* Messages written with no promise that the channel dropped and went on (datagram
     * channels: fault.c); in what would be padding. Read anywhere (eddy_channel_counters). */
    _Atomic uint32_t dropped;
    uint64_t job_ids; /* the last scoped timer id of its loop contexts */
};

static inline eddy__ctx_offload_t *eddy__ctx_offload(eddy_ctx_t *ctx)
{
    return (eddy__ctx_offload_t *)(ctx + 1);
}

/* The handler's list of pending scoped timers, and its id counter (its thread's). */
static inline struct eddy__job_s **eddy__ctx_jobs(eddy_ctx_t *ctx)
{
    return ctx->on_carrier ? &eddy__ctx_offload(ctx)->jobs : &ctx->jobs;
}

static inline uint64_t eddy__ctx_next_job_id(eddy_ctx_t *ctx)
{
    return ++*(ctx->on_carrier ? &eddy__ctx_offload(ctx)->job_ids : &ctx->pipeline->job_ids);
}

/* What the head does with outbound operations: one table per channel kind (Netty's Unsafe). */
typedef struct eddy__channel_ops_s {
    const char *kind;
    void (*bind)(eddy_channel_t *ch, const eddy_addr_t *local, eddy_promise_t *p);
    void (*connect)(eddy_channel_t *ch, const eddy_addr_t *remote, const eddy_addr_t *local,
                    eddy_promise_t *p);
    void (*begin_read)(eddy_channel_t *ch);
    /* Recompute the poller interest after a flag changed (the backpressure pause); NULL: the
     * kind has none. */
    void (*update_interest)(eddy_channel_t *ch);
    /* Write what is flushed in the outbound buffer (the head's flush). */
    void (*flush)(eddy_channel_t *ch);
    /* Before a requested close: throw away input the application never read, so that the
     * close sends FIN after what was written, not a reset; NULL: the kind has none. */
    void (*discard_input)(eddy_channel_t *ch);
    /* Close after what was flushed is written, gracefully (a lingering close); p completes
     * once closed. NULL: the kind closes at once. */
    void (*close_after_flush)(eddy_channel_t *ch, eddy_promise_t *p);
    /* Release the kind's resources at close (the fd); the generic close does the rest. */
    void (*do_close)(eddy_channel_t *ch);
    void (*shutdown_output)(eddy_channel_t *ch, eddy_promise_t *p);
    /* Apply a socket option; NULL: the kind has none. */
    int (*set_socket_option)(eddy_channel_t *ch, eddy_option_t opt, int64_t value);
    /* Free what the kind allocated, with the channel. */
    void (*destroy)(eddy_channel_t *ch);
    /* Whether msg may be queued for the socket: 0, or the error its write fails with. NULL:
     * bytes only (buffers and composites; else EDDY_ENOTSUP: an encoder is missing). */
    int (*accepts)(const eddy_channel_t *ch, const eddy_msg_t *msg);
    /* A write with no promise that could not be queued: count it and go on (datagram
     * channels: eddy__write_dropped). NULL: a byte stream, which cannot go on after a hole,
     * so the pipeline raises the error and closes after what was queued (fault.c). */
    void (*write_dropped)(eddy_channel_t *ch, uint32_t msg_type, int err);
    /* Bytes of the transport's own state (at most sizeof(eddy_io_t)), which the kind's
     * channels hold in place of the descriptor's watcher (eddy__channel_state()); 0: the kind
     * watches its descriptor through ch->io. */
    size_t state_size;
} eddy__channel_ops_t;

/* One queued write (outbound.c). */
typedef struct eddy__entry_s {
    struct eddy__entry_s *next;
    eddy_msg_t *msg;
    eddy_promise_t *p;
    size_t bytes;  /* counted against the water marks */
    size_t done;   /* bytes of it already written (a partial writev) */
} eddy__entry_t;

/*
 * The outbound buffer (outbound.c, Netty's ChannelOutboundBuffer), a channel's member. Its
 * fields are outbound.c's alone: the pipeline adds entries and flushes them; a transport asks
 * for an iovec of the flushed bytes and says how many it wrote; the buffer completes (or
 * fails) entries, in one place. Data flows one way: pipeline -> outbound -> transport.
 */
typedef struct eddy__outbound_s {
    /* Entries from head up to unflushed (exclusive; NULL: all) are flushed, the rest written
     * but not yet flushed. */
    eddy__entry_t *head, *tail, *unflushed;
    /* Bytes queued (flushed or not, and what a handler that queues writes itself reserved):
     * written on the loop, read by eddy_channel_counters() anywhere, so relaxed atomic loads
     * and stores (plain moves on x86). */
    _Atomic size_t pending;
    /* Bytes handlers hold queued in front of the channel (eddy__outbound_hold): they count
     * toward writability, not the hard cap. The loop's thread. */
    size_t held;
    /* pending alone passed the high water mark and has not fallen below the low one: what
     * the holders themselves go by (eddy__outbound_has_room). */
    bool full;
} eddy__outbound_t;

/* Flags of eddy_channel_s.flags (the loop's thread). */
enum {
    EDDY__CH_REGISTERED = 1u << 0,
    EDDY__CH_ACTIVE = 1u << 1,
    EDDY__CH_CLOSED = 1u << 2,
    EDDY__CH_INPUT_SHUTDOWN = 1u << 3,
    EDDY__CH_OUTPUT_SHUTDOWN = 1u << 4,
    EDDY__CH_CONNECTING = 1u << 5,
    EDDY__CH_READING = 1u << 6,       /* read interest wanted */
    EDDY__CH_WRITE_WAIT = 1u << 7,    /* write interest: the socket was full */
    EDDY__CH_PAUSED = 1u << 8,        /* reading paused by PAUSE_READ_WHEN_UNWRITABLE */
    EDDY__CH_FLUSHING = 1u << 9,      /* inside the flush: no nested flush */
    EDDY__CH_LISTENER = 1u << 10,
    EDDY__CH_EMBEDDED = 1u << 11,
    EDDY__CH_SHUTDOWN_PENDING = 1u << 12, /* shutdown_output once the flushed data is out */
    /* A close after flush is walking the handlers: the head closes gracefully. Set only
     * during that walk; a handler that delays the close (TLS) keeps it for later. */
    EDDY__CH_CLOSE_GRACEFUL = 1u << 13,
    /* Closing gracefully (socket.c): FIN after the flushed data, input read and dropped. */
    EDDY__CH_LINGERING = 1u << 14,
    /* Datagram channels (datagram.c): connected to one peer; the kernel refused UDP GSO. */
    EDDY__CH_DGRAM_CONNECTED = 1u << 15,
    EDDY__CH_DGRAM_NO_GSO = 1u << 16,
    /* An error was logged for this channel: the tail logs no second one (fault.c). */
    EDDY__CH_ERROR_LOGGED = 1u << 17,
    /* The write on its way to the head is TLS records (tls_handler.c), of plaintext the hard
     * cap admitted already, or TLS's own: the cap does not refuse it. Set by the TLS handler
     * around its write; the head's add consumes it. */
    EDDY__CH_SEALED = 1u << 18,
    /* A handler holds the channel's input (eddy__channel_hold_input): a decoder that backpressure
     * stopped with messages left. Set while input_holds > 0. */
    EDDY__CH_INPUT_HELD = 1u << 19,
};

/* What stops a channel's reading though it wants input: the backpressure pause, a hold. */
#define EDDY__CH_NO_INPUT (EDDY__CH_PAUSED | EDDY__CH_INPUT_HELD)

typedef struct eddy__attr_s {
    const void *key;
    void *value;
} eddy__attr_t;

typedef struct eddy__attrs_s {
    size_t n;
    eddy__attr_t a[];
} eddy__attrs_t;

/* A stream socket's lingering close (socket.c): its promise, and the timer that ends the
 * lingering (EDDY_LINGER_MS after the FIN). */
typedef struct eddy__lingering_s {
    eddy_promise_t *p;
    eddy_timer_t *timer;
} eddy__lingering_t;

/* A stream socket's connect in progress (socket.c). */
typedef struct eddy__connecting_s {
    eddy_promise_t *promise;
    eddy_timer_t *timer; /* CONNECT_TIMEOUT_MS */
} eddy__connecting_t;

typedef struct eddy__msgq_s {
    eddy_msg_t **items;
    size_t head, n, cap;
} eddy__msgq_t;

/* An IP socket address as the kernel gives it; the family says the length. AF_UNSPEC: none
 * (not known, or not IP). */
typedef union eddy__ip_addr_u {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
} eddy__ip_addr_t;

/* A channel's addresses as the API returns them: made on the first eddy_channel_local_addr()
 * or eddy_channel_remote_addr() call (at once for a Unix socket's), freed with the channel. */
typedef struct eddy__addrs_s {
    eddy_addr_t local, remote;
} eddy__addrs_t;


/* A block of option values (channel.c). A shared block (the static defaults, a listener's
 * child options) is immutable and refcounted; a channel's own copy, made at its first write,
 * keeps a reference to the shared block it came from until the channel is freed, since a
 * reader on another thread may still hold the old values. */
typedef struct eddy__options_s {
    _Atomic uint32_t refs;          /* shared blocks; 0 for the static defaults, never freed */
    struct eddy__options_s *shared; /* a channel's own copy: where it came from; else NULL */
    int64_t value[EDDY_OPTION_COUNT_];
} eddy__options_t;

/* What only listening channels have (socket.c). */
typedef struct eddy__listener_s {
    eddy_loop_group_t *children;
    eddy_channel_init_cb child_init;
    void *child_arg;
    eddy_channel_config_t child_config;
    eddy__options_t *child_opts; /* child_config's values, shared by every child */
    unsigned accepts_per_wakeup;
    int reserve_fd;               /* closed to accept-and-close when out of descriptors */
    eddy_timer_t *accept_backoff; /* EMFILE: accepting resumes when it fires */
} eddy__listener_t;

/* What only embedded channels have (embedded.c): what the test reads back. */
typedef struct eddy__embedded_s {
    eddy__msgq_t in_q, out_q;
    int last_error;
    int events[64];
    size_t nevents;
} eddy__embedded_t;

struct eddy_channel_s {
    _Atomic uint32_t refs;
    unsigned flags;
    uint64_t id;
    const eddy__channel_ops_t *ops;
    eddy_loop_t *loop; /* eddy__loop_of() */
    int fd;
    _Atomic bool writable;
    /* The adaptive receive buffer (AdaptiveRecvByteBufAllocator): 1 + an index into
     * socket.c's sizes, 0 before the first read. Datagram channels: how many datagrams the
     * next recvmmsg asks for (datagram.c), 0 before the first. */
    uint8_t recv_index;
    bool recv_shrink_next;
    /* Set from any thread by eddy__channel_cut_output(): the transport takes no more writes. */
    _Atomic bool output_cut;
    uint16_t input_holds; /* eddy__channel_hold_input()'s, not yet let go */
    /* REGISTERED, ACTIVE and CLOSED of `flags`, for eddy_channel_is_open() and the like on
     * any thread: stored (eddy__channel_show_state) after each change on the loop. */
    _Atomic uint8_t shown_state;
    eddy__closer_t closer; /* closed with the loop's shutdown (registered socket kinds) */
    eddy_pipeline_t pipeline;
    /* IP addresses inline, 28 B each where eddy_addr_t takes 136; eddy_addr_t copies, and
     * Unix socket addresses, live in `addrs`, made when first needed. Set them through
     * eddy__channel_set_addr(). */
    eddy__ip_addr_t local_ip, remote_ip;
    _Atomic(eddy__addrs_t *) addrs;
    /* The option values, read as ch->opt[EDDY_...]: a shared block's values (the defaults,
     * or the listener's child options) until the first write gives the channel a copy of
     * its own (eddy__options_t says how). Write only through eddy__channel_option_store(). */
    int64_t *opt;
    /* Made on the first eddy_channel_close_future() call: NULL until then, or a marker
     * once closed without one (channel.c, CLOSED_NO_FUTURE). */
    _Atomic(eddy_promise_t *) close_future;
    const eddy__close_hook_t *close_hook; /* NULL: none */

    eddy__outbound_t out;

    _Atomic uint64_t bytes_read, bytes_written, msgs_read, msgs_written;

    eddy__attrs_t *attrs; /* NULL: none */

    /* What only one kind has, allocated by that kind, so an accepted connection carries
     * none of it. The flags say which: LISTENER, EMBEDDED, LINGERING (a stream socket's
     * close after flush), else a stream socket's connect in progress (NULL when there is
     * none; a connecting channel never lingers, it closes at once). */
    union {
        eddy__listener_t *listener;
        eddy__embedded_t *embedded;
        eddy__connecting_t *connecting;
        eddy__lingering_t *lingering;
    };

    /* Last, so that a kind whose ops give a state_size is allocated only that far: the
     * descriptor's watcher (readiness transports, datagram and embedded channels), or in its
     * place the transport's own state (io_uring's operations, which need no watcher). */
    union {
        eddy_io_t io;
        unsigned char transport_state[sizeof(eddy_io_t)];
    };
};

/* The channel's loop. */
static inline eddy_loop_t *eddy__loop_of(const eddy_channel_t *ch)
{
    return ch->loop;
}

/* The transport's state of a kind that has one (eddy__channel_ops_t.state_size), zeroed at
 * the channel's creation. */
static inline void *eddy__channel_state(eddy_channel_t *ch)
{
    assert(ch->ops->state_size > 0);
    return ch->transport_state;
}

/* The channel whose state it is. */
static inline eddy_channel_t *eddy__channel_of_state(void *state)
{
    return EDDY_CONTAINER_OF((unsigned char *)state, eddy_channel_t, transport_state);
}

/* The channel a pipeline is embedded in. */
static inline eddy_channel_t *eddy__pipeline_channel(eddy_pipeline_t *p)
{
    return EDDY_CONTAINER_OF(p, eddy_channel_t, pipeline);
}

/* Publish the REGISTERED, ACTIVE and CLOSED flags to other threads (the loop, after changing
 * any of them). */
static inline void eddy__channel_show_state(eddy_channel_t *ch)
{
    atomic_store_explicit(&ch->shown_state,
                          (uint8_t)(ch->flags & (EDDY__CH_REGISTERED | EDDY__CH_ACTIVE |
                                                 EDDY__CH_CLOSED)),
                          memory_order_release);
}

/* Channels (channel.c). */
/* From any thread, for a channel about to be closed for a hole in its stream (a group drops a
 * member that does not keep up, or could not make its share of a write): every write that
 * reaches its transport from now on fails with EDDY_ECLOSED, those issued earlier on other
 * threads and still travelling too, and a TLS close_notify; what the transport already holds
 * is left to the close. So nothing its own loop writes before the close has run (a pong)
 * follows the hole. The channel reads unwritable from then on. The caller closes it. */
void eddy__channel_cut_output(eddy_channel_t *ch);
eddy_channel_t *eddy__channel_new(eddy_loop_t *loop, const eddy__channel_ops_t *ops, int fd);
void eddy__channel_apply_config(eddy_channel_t *ch, const eddy_channel_config_t *cfg);
/* Set one option's value (no socket call, no side effect): 0 or EDDY_ENOMEM (the copy). */
int eddy__channel_option_store(eddy_channel_t *ch, eddy_option_t opt, int64_t value);
/* The values cfg gives a channel, as a block to share (one reference), or NULL without
 * memory. */
eddy__options_t *eddy__options_new(const eddy_channel_config_t *cfg);
void eddy__options_release(eddy__options_t *o);
/* A new channel takes o's values (a reference) and cfg's socket options, as
 * eddy__channel_apply_config() would, without a copy of its own. */
void eddy__channel_share_config(eddy_channel_t *ch, eddy__options_t *o,
                                const eddy_channel_config_t *cfg);
/* A new datagram channel takes the datagram defaults (64 datagrams per wake-up), a block
 * shared by all of them: before any option of its own is set. */
void eddy__channel_use_datagram_defaults(eddy_channel_t *ch);
/* Set ch's local or remote address (the loop, before the channel is handed to another
 * thread). A Unix socket's address that finds no memory is left unknown. */
void eddy__channel_set_addr(eddy_channel_t *ch, bool remote, const eddy_addr_t *a);
/* Registered and (for connected kinds) active: fire the events in Netty's order. */
void eddy__channel_registered(eddy_channel_t *ch);
void eddy__channel_activate(eddy_channel_t *ch);
/* The generic close on the loop: fail the outbound buffer, fire inactive and unregistered,
 * remove the handlers, call the close hook, complete the close future, drop the loop's
 * reference. */
void eddy__channel_do_close(eddy_channel_t *ch, int why, eddy_promise_t *p);
/* Run fn(ch, arg) on the channel's loop: at once when already there, else as a task (the
 * channel is retained meanwhile). */
void eddy__channel_on_loop(eddy_channel_t *ch, void (*fn)(eddy_channel_t *, void *), void *arg);
/* The embedded channel keeps what reaches the tail (embedded.c). */
void eddy__embedded_inbound(eddy_channel_t *ch, eddy_msg_t *msg);

/* The outbound buffer (outbound.c). Every function runs on the channel's loop, but
 * eddy__outbound_pending(), which any thread may call. */
/* Queue msg (owned) with p (may be NULL), unflushed; refused (msg released, p failed) when
 * the channel is closed or its output shut (EDDY_ECLOSED, EDDY_EPIPE), msg is not bytes
 * (EDDY_ENOTSUP), the hard cap would be passed (EDDY_ENOBUFS), or without memory. */
void eddy__outbound_add(eddy_channel_t *ch, eddy_msg_t *msg, eddy_promise_t *p);
/* Everything queued so far is flushed: a transport may write it. */
void eddy__outbound_mark_flushed(eddy_channel_t *ch);
/* Flushed entries wait to be written. */
bool eddy__outbound_has_flushed(const eddy_channel_t *ch);
/* Fill iov[0..max) with the flushed bytes, in order, up to the first file region; *n gets the
 * count used. Returns the
 * bytes they hold (0 with *n 0: flushed entries are all empty; eddy__outbound_written(ch, 0)
 * completes them). The memory stays valid until those bytes are written or the entries
 * failed; held (NULL, or room for max) gets a reference to each message those bytes are of,
 * *nheld their count, for a write that may outlive the entries (io_uring's, at a close). */
size_t eddy__outbound_iovec(const eddy_channel_t *ch, struct iovec *iov, int max, int *n,
                            eddy_msg_t **held, int *nheld);
/* The first flushed entry when it is a file region with bytes left to send, else NULL: the
 * transport sends it by itself (sendfile, or a read and a send) and reports what went out
 * with eddy__outbound_written(). */
eddy_file_region_t *eddy__outbound_head_region(const eddy_channel_t *ch);
/* Whether the second flushed entry is a file region (O(1): the common shape of a response's
 * head and its file): the transport sends the head with MSG_MORE, so that both leave in one
 * segment where the file is small. */
bool eddy__outbound_region_second(const eddy_channel_t *ch);
/* bytes of the flushed entries went out: complete the entries written whole (promise 0,
 * message released), skip the rest in the first one left. */
void eddy__outbound_written(eddy_channel_t *ch, size_t bytes);
/* Hand every flushed message to sink (which owns it), completing its promise with 0: a
 * transport that moves messages, not bytes (the embedded channel). */
void eddy__outbound_hand_over(eddy_channel_t *ch, void (*sink)(eddy_channel_t *ch, eddy_msg_t *m));
/* A handler that queues writes itself (TLS) counts its bytes against the water marks and the
 * hard cap: 0, or EDDY_ENOBUFS (nothing counted); it calls eddy__outbound_update_writability()
 * once the write is queued. unreserve takes them out again. */
int eddy__outbound_reserve(eddy_channel_t *ch, size_t bytes);
void eddy__outbound_unreserve(eddy_channel_t *ch, size_t bytes);
/* Bytes queued, flushed or not. Any thread. */
size_t eddy__outbound_pending(const eddy_channel_t *ch);
/* A handler that keeps writes queued itself, in order behind a body it pulls (the chunked
 * writer, the HTTP/1.1 encoder: pipeline/layer.h's pump), holds their bytes: the channel is
 * unwritable while pending and held bytes together pass the water marks, so a decoder
 * passes no more messages (a client pipelining requests behind a streamed answer queues
 * a high water mark of answers, not one per request it sent). Held bytes are not under the
 * hard cap: they were taken already. The holder itself goes on while the bytes queued in the
 * channel leave room (has_room: pending alone under the marks), and the writability event
 * also fires when that changes while bytes are held. unhold leaves writability to the next
 * update (a write, eddy__outbound_update_writability()). */
void eddy__outbound_hold(eddy_channel_t *ch, size_t bytes);
void eddy__outbound_unhold(eddy_channel_t *ch, size_t bytes);
/* Messages, not bytes (datagram channels): the first flushed messages, in order, into
 * msgs[0..max) (borrowed: valid until they complete); returns how many. */
size_t eddy__outbound_flushed_msgs(const eddy_channel_t *ch, eddy_msg_t **msgs, size_t max);
/* The first n flushed entries leave: written (err 0: their bytes counted as written), or
 * failed with err (those without a promise go to the kind's write_dropped). Their promises
 * complete, which may write, flush or close. */
void eddy__outbound_complete(eddy_channel_t *ch, size_t n, int err);
/* Fail every entry with err, messages released. */
void eddy__outbound_fail_all(eddy_channel_t *ch, int err);
/* Fail what was written but not flushed with err (shutdown_output: it would never go out). */
void eddy__outbound_fail_unflushed(eddy_channel_t *ch, int err);
/* The channel is closing and pending dropped: writable again, silently, when below the low
 * water mark (a handler that queues writes itself, TLS, failing them at close). */
void eddy__outbound_closing(eddy_channel_t *ch);
/* The channel is freed: fail whatever it still queued (made and dropped before it closed). */
void eddy__outbound_destroy(eddy_channel_t *ch);
/* Re-evaluate writability after pending changed; fires the event when it flips. */
void eddy__outbound_update_writability(eddy_channel_t *ch);

/* Pipelines (pipeline.c). */
void eddy__pipeline_init(eddy_pipeline_t *p);
/* Free removed contexts still waiting (the channel is being freed: nothing is inside). */
void eddy__pipeline_free(eddy_pipeline_t *p);
/* Remove every handler (handler_removed, state freed), at close. */
void eddy__pipeline_destroy(eddy_pipeline_t *p);
void eddy__pipeline_fire_registered(eddy_pipeline_t *p);
void eddy__pipeline_fire_unregistered(eddy_pipeline_t *p);
void eddy__pipeline_fire_active(eddy_pipeline_t *p);
void eddy__pipeline_fire_inactive(eddy_pipeline_t *p);
void eddy__pipeline_fire_writability(eddy_pipeline_t *p);
/* Outbound from the tail; a NULL msg fails pr with EDDY_EINVAL. */
void eddy__pipeline_write(eddy_pipeline_t *p, eddy_msg_t *msg, eddy_promise_t *pr, bool flush);
void eddy__pipeline_flush(eddy_pipeline_t *p);
/* A close from the tail; graceful: a close after flush (eddy_channel_close_after_flush). */
void eddy__pipeline_close(eddy_pipeline_t *p, eddy_promise_t *pr, bool graceful);
void eddy__pipeline_read(eddy_pipeline_t *p);
/* Entering and leaving: removed contexts are freed when the outermost entry leaves. */
void eddy__pipeline_enter(eddy_pipeline_t *p);
void eddy__pipeline_leave(eddy_pipeline_t *p);

/* Hold ch across a call that may close it (a timer's, a task's, an I/O callback's): its
 * memory and the pipeline's removed contexts stay until the matching unhold. The loop's
 * thread. */
static inline eddy_channel_t *eddy__channel_hold(eddy_channel_t *ch)
{
    eddy_channel_retain(ch);
    eddy__pipeline_enter(&ch->pipeline);
    return ch;
}

static inline void eddy__channel_unhold(eddy_channel_t *ch)
{
    eddy__pipeline_leave(&ch->pipeline);
    eddy_channel_release(ch);
}

/* Failures nobody was told of (fault.c). */
/* The context whose write is being carried toward the head on this thread (pipeline.c), or
 * NULL. */
eddy_ctx_t *eddy__pipeline_writer(void);
/* An error reached the tail of ch's pipeline: log it, once per channel. */
void eddy__pipeline_tail_exception(eddy_channel_t *ch, int err);
/* A message of msg_type written with no promise could not go, and the channel goes on: count
 * it, log the first (the channel ops' write_dropped of datagram channels). */
void eddy__write_dropped(eddy_channel_t *ch, uint32_t msg_type, int err);

/* Handler-scoped timers (scoped.c). Cancel every timer of ctx still pending: at its
 * removal, on the handler's thread, before handler_removed. */
void eddy__ctx_jobs_cancel(eddy_ctx_t *ctx);
/* Run fn(ctx, arg, true) on an offloaded ctx's carrier, behind the events queued there, or
 * fn(ctx, arg, false) to let go of arg when it cannot run (the carrier refused it, or the
 * handler was removed first). The loop's thread. */
typedef void (*eddy__ctx_call_fn)(eddy_ctx_t *ctx, void *arg, bool run);
void eddy__ctx_offload_call(eddy_ctx_t *ctx, eddy__ctx_call_fn fn, void *arg);

/* Objects made and freed once per message, reused on the thread that freed them
 * (recycle.c): get returns one of size bytes (the same size for every call of a kind), or
 * NULL without memory; put gives one back. Any thread. */
enum {
    EDDY__RECYCLE_ENTRY,
    EDDY__RECYCLE_PACKET,
    EDDY__RECYCLE_SMALL, /* eddy__small_alloc's size classes, SMALL_CLASSES of them */
    EDDY__RECYCLE_KINDS = EDDY__RECYCLE_SMALL + 4
};
void *eddy__recycle_get(unsigned kind, size_t size);
void eddy__recycle_put(unsigned kind, void *p);


#endif /* EDDY_PIPELINE_INTERNAL_H */
