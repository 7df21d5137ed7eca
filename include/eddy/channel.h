/*
 * eddy channels: TCP and Unix stream sockets, listening sockets, and the embedded channel
 * for tests (Netty's Channel, NioSocketChannel, NioServerSocketChannel, EmbeddedChannel).
 *
 * A channel lives on one loop for its whole life: its I/O and every pipeline event run on
 * that loop's thread. Any thread may write, flush or close it; off the loop the call travels
 * as a task and keeps its order. A channel is refcounted: the loop holds a reference while it
 * is open, a caller that keeps a channel across events takes its own.
 *
 * Reading: until EAGAIN, a short read, a full buffer of RCVBUF_ALLOC_MAX (when 64 KiB or more)
 * or MAX_MESSAGES_PER_READ, into pooled buffers sized by the adaptive receive allocator;
 * channel_read per buffer, channel_read_complete once per batch. Writing:
 * writes queue in the outbound buffer; a flush hands them to the loop, which writes them with
 * gathering writev and waits for writability on EAGAIN. Pending bytes count against the
 * write-buffer water marks (channel_writability_changed when crossed).
 */
#ifndef EDDY_CHANNEL_H
#define EDDY_CHANNEL_H

#include <eddy/common.h>
#include <eddy/loop.h>
#include <eddy/pipeline.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Addresses: IPv4, IPv6 or a Unix socket path, with its length.
 */

struct eddy_addr_s {
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
        struct sockaddr_un un;
        struct sockaddr_storage ss;
    } u;
    socklen_t len;
};

/** A numeric IPv4 or IPv6 address ("127.0.0.1", "::1") and port: 0 or EDDY_EINVAL. */
EDDY_EXTERN int eddy_addr_ip(eddy_addr_t *a, const char *ip, uint16_t port);
/** A Unix socket path: 0, or EDDY_EINVAL when it does not fit sun_path. */
EDDY_EXTERN int eddy_addr_unix(eddy_addr_t *a, const char *path);
/** The port (0 for Unix sockets). */
EDDY_EXTERN uint16_t eddy_addr_port(const eddy_addr_t *a);
/** "1.2.3.4:80", "[::1]:80" or "unix:/path" into out (NUL-terminated, truncated to n). */
EDDY_EXTERN const char *eddy_addr_format(const eddy_addr_t *a, char *out, size_t n);

/* ---------------------------------------------------------------------------------------
 * Options (Netty's ChannelOption), as integers. Socket options apply to the socket at once;
 * the others to the channel's behaviour.
 */

typedef enum {
    EDDY_SO_BACKLOG,            /* listen backlog (default 1024) */
    EDDY_SO_REUSEADDR,          /* 0/1 (listening sockets: 1 by default) */
    EDDY_SO_REUSEPORT,          /* 0/1 */
    EDDY_TCP_NODELAY,           /* 0/1 (default 1) */
    EDDY_SO_KEEPALIVE,          /* 0/1 */
    EDDY_SO_RCVBUF,             /* bytes */
    EDDY_SO_SNDBUF,             /* bytes */
    EDDY_SO_LINGER,             /* seconds; -1 off (default); 0 resets on close */
    EDDY_CONNECT_TIMEOUT_MS,    /* default 30000 */
    EDDY_WRITE_BUFFER_LOW_WATER_MARK,  /* bytes (default 32 KiB) */
    EDDY_WRITE_BUFFER_HIGH_WATER_MARK, /* bytes (default 64 KiB) */
    EDDY_AUTO_READ,             /* 0/1 (default 1) */
    EDDY_ALLOW_HALF_CLOSURE,    /* 0/1 (default 0): a peer FIN is an event, not a close */
    EDDY_MAX_MESSAGES_PER_READ, /* reads per readiness event (default 16; datagram
                                   channels: datagrams per event, default 64) */
    EDDY_WRITE_SPIN_COUNT,      /* writev calls per flush before yielding to others (16) */
    EDDY_RCVBUF_ALLOC_MIN,      /* adaptive receive buffer: smallest (64) */
    EDDY_RCVBUF_ALLOC_INITIAL,  /* first size (2048) */
    EDDY_RCVBUF_ALLOC_MAX,      /* largest (65536); MIN == MAX: a fixed size */
    EDDY_PAUSE_READ_WHEN_UNWRITABLE, /* 0/1 (default 0): stop reading while unwritable,
                                        resume when drained below the low water mark; the
                                        decoders (codec.h) pass no message on meanwhile, so
                                        replies queue up to the high mark plus one */
    EDDY_MAX_PENDING_OUTBOUND,  /* bytes; 0 = no cap (default). Beyond it writes fail with
                                   EDDY_ENOBUFS instead of queueing; one with no promise
                                   closes a stream after what was queued (pipeline.h). With
                                   the pause, set it above the high mark by a reply */
    EDDY_LINGER_MS,             /* a close after flush (eddy_channel_close_after_flush) reads
                                   and drops the peer's input for up to this long after our
                                   FIN, until the peer closes (nginx's lingering close);
                                   0: close right after the FIN (default 2000) */
    /* Datagram channels (datagram.h) */
    EDDY_SO_BROADCAST,          /* 0/1 */
    EDDY_IP_MULTICAST_LOOP,     /* 0/1 (default 1): our own multicast comes back to us */
    EDDY_IP_MULTICAST_TTL,      /* hops, 0-255 (default 1) */
    EDDY_IP_MULTICAST_IF,       /* interface index for multicast sends; 0: the route's */
    EDDY_UDP_GSO,               /* 0/1 (default 1): runs of same-size packets to one peer go
                                   out as one UDP_SEGMENT send where the kernel has it */
    EDDY_UDP_GRO,               /* 0/1 (default 0): the kernel may coalesce received packets
                                   (UDP_GRO); they are split again. Receives take 64 KiB */
    EDDY_DATAGRAM_RECV_SIZE,    /* bytes per received datagram, 1-65536 (default 2048, as
                                   Netty's); longer ones are reported truncated */
    /* TCP (IP stream sockets; on others setting them does nothing). 0 leaves the kernel's
     * default where the option is a number. See docs/pipeline.md, "TCP options". */
    EDDY_TCP_CORK,              /* 0/1 (default 0): hold partial segments until uncorked (a
                                   head and the file after it leave in full segments) */
    EDDY_TCP_NOTSENT_LOWAT,     /* bytes: writable again only when the kernel holds fewer
                                   unsent bytes than this (less buffered in the kernel, so a
                                   write reflects the peer's pace sooner); 0: the kernel's */
    EDDY_TCP_FASTOPEN,          /* listeners: queue length of TCP Fast Open requests (data
                                   in the SYN, RFC 7413); 0: off (default) */
    EDDY_TCP_USER_TIMEOUT,      /* ms that sent data may stay unacknowledged before the
                                   kernel ends the connection (ETIMEDOUT); 0: the kernel's */
    EDDY_TCP_KEEPIDLE,          /* seconds idle before the first keepalive probe (with
                                   EDDY_SO_KEEPALIVE 1); 0: the kernel's (7200) */
    EDDY_TCP_KEEPINTVL,         /* seconds between keepalive probes; 0: the kernel's (75) */
    EDDY_TCP_KEEPCNT,           /* unanswered probes before the connection ends; 0: the
                                   kernel's (9) */
    EDDY_OPTION_COUNT_
} eddy_option_t;

/** Set an option: 0, EDDY_EINVAL (unknown option or bad value) or a socket error. The
 * channel's loop, or any thread before the channel is registered. */
EDDY_EXTERN int eddy_channel_set_option(eddy_channel_t *ch, eddy_option_t opt, int64_t value);
/** The option's value: the last one set (or given by a config), else the default. */
EDDY_EXTERN int64_t eddy_channel_option(const eddy_channel_t *ch, eddy_option_t opt);

/* A set of option values to apply to channels as they are made (bootstraps, acceptors). */
typedef struct eddy_channel_config_s {
    int64_t value[EDDY_OPTION_COUNT_];
    uint64_t set; /* bit per option given */
} eddy_channel_config_t;

EDDY_EXTERN void eddy_channel_config_init(eddy_channel_config_t *cfg);
/** Record opt = value: 0 or EDDY_EINVAL. */
EDDY_EXTERN int eddy_channel_config_set(eddy_channel_config_t *cfg, eddy_option_t opt,
                                        int64_t value);

/* ---------------------------------------------------------------------------------------
 * Making channels. The bootstraps (bootstrap.h) wrap these.
 */

/* Called on the child's loop for every accepted channel before it becomes active: add its
 * handlers. Non-zero closes the channel. */
typedef int (*eddy_channel_init_cb)(eddy_channel_t *ch, void *arg);

typedef struct eddy_listen_options_s {
    eddy_loop_t *loop;               /* the listening channel's loop */
    eddy_loop_group_t *children;     /* where accepted channels go (next()); NULL: loop */
    eddy_channel_init_cb child_init; /* required */
    void *child_arg;
    const eddy_channel_config_t *config;       /* the listening socket's options, or NULL */
    const eddy_channel_config_t *child_config; /* each accepted channel's, or NULL */
    unsigned accepts_per_wakeup;     /* accept() calls per readiness event (default 64) */
} eddy_listen_options_t;

/**
 * Bind and listen on addr; the returned future completes on the loop with the listening
 * channel as its result (eddy_future_channel(): the future holds a reference to it while the
 * future lives; retain the channel to keep it after releasing the future), or fails with
 * EDDY_EADDRINUSE, EDDY_EACCES... The caller owns the future and releases it. Any thread.
 * NULL only without memory.
 */
EDDY_EXTERN eddy_future_t *eddy_channel_listen(const eddy_addr_t *addr,
                                               const eddy_listen_options_t *opts);

/**
 * Connect to remote on loop: a new channel, init called on the loop to add its handlers
 * before anything else happens, then a non-blocking connect honouring
 * EDDY_CONNECT_TIMEOUT_MS. The future completes with the channel (active; held by the future,
 * as for eddy_channel_listen) or fails with EDDY_ECONNREFUSED, EDDY_ETIMEDOUT...; the channel
 * is then closed. The caller owns the future. Any thread. NULL only without memory.
 */
EDDY_EXTERN eddy_future_t *eddy_channel_connect(eddy_loop_t *loop, const eddy_addr_t *remote,
                                                const eddy_channel_config_t *config,
                                                eddy_channel_init_cb init, void *arg);

/** The channel a listen or connect future completed with, or NULL. The future holds a
 * reference to it: valid while the caller holds the future; eddy_channel_retain() it to keep it
 * after eddy_future_release(). */
EDDY_EXTERN eddy_channel_t *eddy_future_channel(const eddy_future_t *f);

/* ---------------------------------------------------------------------------------------
 * Using channels
 */

EDDY_EXTERN eddy_channel_t *eddy_channel_retain(eddy_channel_t *ch);
/** Drop a reference; the last one (the channel closed) frees it. NULL is ignored. */
EDDY_EXTERN void eddy_channel_release(eddy_channel_t *ch);

EDDY_EXTERN uint64_t eddy_channel_id(const eddy_channel_t *ch);
EDDY_EXTERN eddy_loop_t *eddy_channel_loop(const eddy_channel_t *ch);
EDDY_EXTERN eddy_pipeline_t *eddy_channel_pipeline(eddy_channel_t *ch);
/** The local and remote addresses (zero length when unknown). */
EDDY_EXTERN const eddy_addr_t *eddy_channel_local_addr(const eddy_channel_t *ch);
EDDY_EXTERN const eddy_addr_t *eddy_channel_remote_addr(const eddy_channel_t *ch);
/** The socket, or -1 (embedded channels, after close). */
EDDY_EXTERN int eddy_channel_fd(const eddy_channel_t *ch);

/** Registered with its loop. This and the next two: any thread, a snapshot. */
EDDY_EXTERN bool eddy_channel_is_registered(const eddy_channel_t *ch);
/** Connected and not closed. */
EDDY_EXTERN bool eddy_channel_is_active(const eddy_channel_t *ch);
/** Not closed yet. */
EDDY_EXTERN bool eddy_channel_is_open(const eddy_channel_t *ch);
/** Pending outbound bytes below the high water mark (or back below the low one), and the
 * output not cut (a channel group dropped it, so it takes no more writes; it is closing). */
EDDY_EXTERN bool eddy_channel_is_writable(const eddy_channel_t *ch);
/** The future that completes (with 0) once the channel closed. Borrowed: retain to keep.
 * Made on the first call (any thread); NULL only without memory, which the future
 * functions read as failed with EDDY_ENOMEM. */
EDDY_EXTERN eddy_future_t *eddy_channel_close_future(eddy_channel_t *ch);

/* Outbound operations from the tail: any thread (off the loop they travel as a task, in
 * order). p may be NULL. Messages are taken over. */
EDDY_EXTERN void eddy_channel_write(eddy_channel_t *ch, eddy_msg_t *msg, eddy_promise_t *p);
EDDY_EXTERN void eddy_channel_flush(eddy_channel_t *ch);
EDDY_EXTERN void eddy_channel_write_and_flush(eddy_channel_t *ch, eddy_msg_t *msg,
                                              eddy_promise_t *p);
/** Ask for a read (with AUTO_READ off, the channel reads only when asked). */
EDDY_EXTERN void eddy_channel_read(eddy_channel_t *ch);
/** Close: what was flushed gets one non-blocking try, the rest fails with EDDY_ECLOSED
 * (messages released); input not yet read is discarded (up to 1 MiB) so the peer sees FIN
 * after our bytes, not a reset; channel_inactive and channel_unregistered fire, handlers are
 * removed, the close future completes. Any number of times; p completes once it is closed. */
EDDY_EXTERN void eddy_channel_close(eddy_channel_t *ch, eddy_promise_t *p);
/** Send FIN after what is flushed (shutdown(SHUT_WR)); reading goes on. */
EDDY_EXTERN void eddy_channel_shutdown_output(eddy_channel_t *ch, eddy_promise_t *p);
/**
 * Flush, then close once everything written before this call is out, without a reset
 * (Netty's writeAndFlush().addListener(CLOSE), with nginx's lingering close): the close
 * travels through the handlers as eddy_channel_close() does (TLS sends close_notify first);
 * at the socket, the flushed bytes go out, then FIN; input that still arrives is read and
 * dropped (the handlers see no more reads) until the peer closes or EDDY_LINGER_MS pass,
 * then the channel closes. Closing at once instead could answer the peer's late bytes with a
 * reset, which makes the peer's kernel drop the reply it has not read yet.
 *
 * Writes after the call fail with EDDY_EPIPE. Waiting for the flush has no deadline of its
 * own (a peer that never reads): pair it with a write timeout or an idle handler, whose
 * eddy_channel_close() ends it at once, as a plain close does at any time. p completes once
 * the channel has closed. Any thread; any number of times. Embedded channels close at once.
 */
EDDY_EXTERN void eddy_channel_close_after_flush(eddy_channel_t *ch, eddy_promise_t *p);

/* Attributes (Netty's AttributeKey): a value per key, for handlers to share per channel. The
 * channel's loop. A key is any address unique to its user (a static variable's). */
EDDY_EXTERN int eddy_channel_attr_set(eddy_channel_t *ch, const void *key, void *value);
EDDY_EXTERN void *eddy_channel_attr(const eddy_channel_t *ch, const void *key);

typedef struct eddy_channel_counters_s {
    uint64_t bytes_read, bytes_written, msgs_read, msgs_written;
    uint64_t pending_outbound_bytes;
    /* Messages written with no promise that could not go and that the channel dropped while
     * it went on: datagram channels only (a byte stream closes instead: pipeline.h). */
    uint64_t msgs_dropped;
} eddy_channel_counters_t;

/** Counters, readable from any thread (a snapshot). */
EDDY_EXTERN void eddy_channel_counters(const eddy_channel_t *ch, eddy_channel_counters_t *c);

/* ---------------------------------------------------------------------------------------
 * The embedded channel (Netty's EmbeddedChannel): no socket, a loop driven by hand on the
 * calling thread, a virtual clock. For unit tests of handlers and codecs; users test their
 * own handlers the same way. Every function here runs the channel's pending tasks and due
 * timers before it returns.
 */

/** A new active embedded channel; add handlers to its pipeline. NULL without memory. */
EDDY_EXTERN eddy_channel_t *eddy_embedded_channel_new(void);
/** Feed msg (taken over) in at the head, as if read from a socket, then read_complete.
 * Returns true when something came out at the tail (see read_inbound). */
EDDY_EXTERN bool eddy_embedded_write_inbound(eddy_channel_t *ch, eddy_msg_t *msg);
/** Write msg from the tail and flush. Returns true when something reached the head. */
EDDY_EXTERN bool eddy_embedded_write_outbound(eddy_channel_t *ch, eddy_msg_t *msg);
/** The next message that reached the tail (yours to release), or NULL. */
EDDY_EXTERN eddy_msg_t *eddy_embedded_read_inbound(eddy_channel_t *ch);
/** The next message flushed to the head (yours to release), or NULL. */
EDDY_EXTERN eddy_msg_t *eddy_embedded_read_outbound(eddy_channel_t *ch);
/** The last error that reached the tail since the previous call (0: none). */
EDDY_EXTERN int eddy_embedded_error(eddy_channel_t *ch);
/** User events that reached the tail since the previous call, oldest first, into events[]
 * (up to n); returns how many there were. */
EDDY_EXTERN size_t eddy_embedded_events(eddy_channel_t *ch, int *events, size_t n);
/** Run the loop's queued tasks and due timers. Returns how many ran. */
EDDY_EXTERN size_t eddy_embedded_run_pending(eddy_channel_t *ch);
/** Move the virtual clock forward by ms, then run what became due. */
EDDY_EXTERN void eddy_embedded_advance_time(eddy_channel_t *ch, int64_t ms);
/** Simulate the peer's FIN (input shutdown, or close without half-closure). */
EDDY_EXTERN void eddy_embedded_shutdown_input(eddy_channel_t *ch);
/**
 * Close the channel, release every message still queued in or out, and free it. Returns
 * true when nothing was left over (no message unread at either end, no pending error).
 */
EDDY_EXTERN bool eddy_embedded_finish(eddy_channel_t *ch);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_CHANNEL_H */
