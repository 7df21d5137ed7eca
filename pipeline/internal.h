/*
 * pipeline/internal.h: channels, pipelines and contexts inside, shared by channel.c,
 * pipeline.c, socket.c, embedded.c and the codecs and handlers. Not installed.
 */
#ifndef EDDY_PIPELINE_INTERNAL_H
#define EDDY_PIPELINE_INTERNAL_H

#include <eddy/channel.h>
#include <eddy/pipeline.h>

#include "reactor/loop_internal.h"

#include <stdatomic.h>
#include <stdio.h>

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

struct eddy_ctx_s {
    eddy_ctx_t *prev, *next; /* a removed context keeps both, so a walk through it goes on */
    eddy_pipeline_t *pipeline;
    const eddy_handler_ops_t *ops;
    void *state;
    eddy_state_free_cb free_state;
    char *name;
    unsigned mask;
    bool removed;
    eddy_carrier_t *carrier; /* offloaded handler: its events run there */
    eddy_ctx_t *grave_next;  /* removed, waiting until no event can be inside it */
};

struct eddy_pipeline_s {
    eddy_ctx_t head, tail;
    eddy_channel_t *ch;
    unsigned depth;         /* nested entries into the pipeline (the loop's thread) */
    eddy_ctx_t *graveyard;  /* removed contexts, freed when depth is back to 0 */
    _Atomic unsigned offloaded; /* events in flight on carriers */
    unsigned names;         /* counter for generated names */
};

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
    /* Release the kind's resources at close (the fd); the generic close does the rest. */
    void (*do_close)(eddy_channel_t *ch);
    void (*shutdown_output)(eddy_channel_t *ch, eddy_promise_t *p);
    /* Apply a socket option; NULL: the kind has none. */
    int (*set_socket_option)(eddy_channel_t *ch, eddy_option_t opt, int64_t value);
    /* Free what the kind allocated, with the channel. */
    void (*destroy)(eddy_channel_t *ch);
} eddy__channel_ops_t;

/* One queued write. */
typedef struct eddy__entry_s {
    struct eddy__entry_s *next;
    eddy_msg_t *msg;
    eddy_promise_t *p;
    size_t bytes;  /* counted against the water marks */
    size_t done;   /* bytes of it already written (a partial writev) */
} eddy__entry_t;

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
};

typedef struct eddy__attr_s {
    const void *key;
    void *value;
} eddy__attr_t;

typedef struct eddy__msgq_s {
    eddy_msg_t **items;
    size_t head, n, cap;
} eddy__msgq_t;

struct eddy_channel_s {
    _Atomic uint32_t refs;
    uint64_t id;
    const eddy__channel_ops_t *ops;
    eddy_loop_t *loop;
    int fd;
    unsigned flags;
    eddy_io_t io;
    eddy__closer_t closer; /* closed with the loop's shutdown (registered socket kinds) */
    eddy_pipeline_t pipeline;
    eddy_addr_t local, remote;
    int64_t opt[EDDY_OPTION_COUNT_];
    eddy_allocator_t *alloc;
    eddy_promise_t *close_future;

    /* The outbound buffer: entries from out_head up to `unflushed` (exclusive; NULL: all) are
     * flushed, the rest written but not yet flushed. */
    eddy__entry_t *out_head, *out_tail, *unflushed; /* unflushed: first entry not flushed */
    size_t pending; /* bytes queued (flushed or not) */
    _Atomic bool writable;

    /* The adaptive receive buffer (AdaptiveRecvByteBufAllocator). */
    size_t recv_index;
    bool recv_shrink_next;

    _Atomic uint64_t bytes_read, bytes_written, msgs_read, msgs_written;
    _Atomic uint64_t pending_snapshot;

    eddy__attr_t *attrs;
    size_t nattrs;

    /* Listening channels. */
    eddy_loop_group_t *children;
    eddy_channel_init_cb child_init;
    void *child_arg;
    eddy_channel_config_t child_config;
    unsigned accepts_per_wakeup;
    int reserve_fd;               /* closed to accept-and-close when out of descriptors */
    eddy_timer_t *accept_backoff; /* EMFILE: accepting resumes when it fires */

    /* Connecting channels. */
    eddy_promise_t *connect_promise;
    eddy_timer_t *connect_timer;

    /* Embedded channels. */
    eddy__msgq_t in_q, out_q;
    int last_error;
    int events[64];
    size_t nevents;
};

/* Channels (channel.c). */
eddy_channel_t *eddy__channel_new(eddy_loop_t *loop, const eddy__channel_ops_t *ops, int fd);
void eddy__channel_apply_config(eddy_channel_t *ch, const eddy_channel_config_t *cfg);
/* Registered and (for connected kinds) active: fire the events in Netty's order. */
void eddy__channel_registered(eddy_channel_t *ch);
void eddy__channel_activate(eddy_channel_t *ch);
/* The generic close on the loop: fail the outbound buffer, fire inactive and unregistered,
 * remove the handlers, complete the close future, drop the loop's reference. */
void eddy__channel_do_close(eddy_channel_t *ch, int why, eddy_promise_t *p);
/* Run fn(ch, arg) on the channel's loop: at once when already there, else as a task (the
 * channel is retained meanwhile). */
void eddy__channel_on_loop(eddy_channel_t *ch, void (*fn)(eddy_channel_t *, void *), void *arg);
/* Read bytes from the socket kinds' readiness (socket.c). */
void eddy__socket_read(eddy_channel_t *ch);

/* Socket channels (socket.c). */
void eddy__socket_register(eddy_channel_t *ch);
void eddy__listener_accept(eddy_channel_t *ch);
/* The embedded channel keeps what reaches the tail (embedded.c). */
void eddy__embedded_inbound(eddy_channel_t *ch, eddy_msg_t *msg);

/* The outbound buffer (outbound.c). */
void eddy__outbound_add(eddy_channel_t *ch, eddy_msg_t *msg, eddy_promise_t *p);
void eddy__outbound_mark_flushed(eddy_channel_t *ch);
/* Take the first flushed entry off (written): completes its promise with 0. */
void eddy__outbound_remove_written(eddy_channel_t *ch, size_t bytes);
/* Fail every entry with err, messages released. */
void eddy__outbound_fail_all(eddy_channel_t *ch, int err);
/* Re-evaluate writability after pending changed; fires the event when it flips. */
void eddy__outbound_update_writability(eddy_channel_t *ch);
/* The readable bytes of a message the outbound buffer can write (buf, composite), else 0. */
size_t eddy__msg_bytes(eddy_msg_t *msg);

/* Pipelines (pipeline.c). */
void eddy__pipeline_init(eddy_pipeline_t *p, eddy_channel_t *ch);
/* Free removed contexts still waiting (the channel is being freed: nothing is inside). */
void eddy__pipeline_free(eddy_pipeline_t *p);
/* Remove every handler (handler_removed, state freed), at close. */
void eddy__pipeline_destroy(eddy_pipeline_t *p);
void eddy__pipeline_fire_registered(eddy_pipeline_t *p);
void eddy__pipeline_fire_unregistered(eddy_pipeline_t *p);
void eddy__pipeline_fire_active(eddy_pipeline_t *p);
void eddy__pipeline_fire_inactive(eddy_pipeline_t *p);
void eddy__pipeline_fire_writability(eddy_pipeline_t *p);
/* Outbound from the tail. */
void eddy__pipeline_write(eddy_pipeline_t *p, eddy_msg_t *msg, eddy_promise_t *pr, bool flush);
void eddy__pipeline_flush(eddy_pipeline_t *p);
void eddy__pipeline_close(eddy_pipeline_t *p, eddy_promise_t *pr);
void eddy__pipeline_read(eddy_pipeline_t *p);
/* Entering and leaving: removed contexts are freed when the outermost entry leaves. */
void eddy__pipeline_enter(eddy_pipeline_t *p);
void eddy__pipeline_leave(eddy_pipeline_t *p);

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

/* Debug logging of the pipeline: EDDY_LOG=debug in the environment. */
bool eddy__log_debug(void);

#endif /* EDDY_PIPELINE_INTERNAL_H */
