/*
 * eddy bootstraps (Netty's ServerBootstrap and Bootstrap): the few calls that wire loop
 * groups, options, attributes and pipeline initialisers into listening and connected
 * channels (channel.h's eddy_channel_listen and eddy_channel_connect underneath).
 *
 * Configure a bootstrap from one thread, then bind or connect from any thread; host names
 * are resolved without blocking a loop, by the loop's resolver (resolver.h: c-ares on the
 * loop, or getaddrinfo on a helper thread in builds without c-ares). Channels read the
 * bootstrap's settings as they are made, so configure it fully before the first bind or
 * connect and do not change it afterwards. A bootstrap may be freed while its channels live on: they keep what they
 * need.
 */
#ifndef EDDY_BOOTSTRAP_H
#define EDDY_BOOTSTRAP_H

#include <eddy/common.h>
#include <eddy/loop.h>
#include <eddy/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eddy_server_bootstrap_s eddy_server_bootstrap_t;
typedef struct eddy_bootstrap_s eddy_bootstrap_t;

/* ---------------------------------------------------------------------------------------
 * ServerBootstrap
 */

/** A new server bootstrap with no group and no child_init yet. NULL without memory. */
EDDY_EXTERN eddy_server_bootstrap_t *eddy_server_bootstrap_new(void);

/**
 * Drop the bootstrap. Bound listeners and accepted channels stay open and keep the state they
 * need (child_init, counters) until they close. Borrowed groups are not touched. NULL is
 * ignored. Any thread.
 */
EDDY_EXTERN void eddy_server_bootstrap_free(eddy_server_bootstrap_t *b);

/**
 * The loops: boss accepts, workers run accepted channels (chosen by eddy_loop_group_next).
 * workers NULL: boss serves both. Borrowed: the groups must outlive every channel bound and
 * every bind still resolving its host.
 * 0 or EDDY_EINVAL (boss NULL).
 */
EDDY_EXTERN int eddy_server_bootstrap_group(eddy_server_bootstrap_t *b, eddy_loop_group_t *boss,
                                            eddy_loop_group_t *workers);

/** An option of the listening socket(s) (EDDY_SO_BACKLOG...): 0 or EDDY_EINVAL. */
EDDY_EXTERN int eddy_server_bootstrap_option(eddy_server_bootstrap_t *b, eddy_option_t opt,
                                             int64_t value);
/** An option of every accepted channel (EDDY_TCP_NODELAY...): 0 or EDDY_EINVAL. */
EDDY_EXTERN int eddy_server_bootstrap_child_option(eddy_server_bootstrap_t *b, eddy_option_t opt,
                                                   int64_t value);

/** Set attribute key = value on each listening channel once bound (its loop): 0 or
 * EDDY_ENOMEM. value is borrowed. */
EDDY_EXTERN int eddy_server_bootstrap_attr(eddy_server_bootstrap_t *b, const void *key,
                                           void *value);
/** Set attribute key = value on every accepted channel, before child_init runs: 0 or
 * EDDY_ENOMEM. value is borrowed. */
EDDY_EXTERN int eddy_server_bootstrap_child_attr(eddy_server_bootstrap_t *b, const void *key,
                                                 void *value);

/**
 * Optional: init(listener, arg) runs on the listening channel's loop once it is bound and
 * listening (channel_active has passed by then), to add handlers to its pipeline (they see
 * accept errors as exception_caught). Non-zero closes the listener and fails the bind. The
 * three init functions are named for the channel they set up: eddy_server_bootstrap_init (the
 * listener, Netty's handler()), eddy_server_bootstrap_child_init (each accepted channel,
 * Netty's childHandler()), eddy_bootstrap_init (a client's channel, Netty's handler()).
 */
EDDY_EXTERN void eddy_server_bootstrap_init(eddy_server_bootstrap_t *b,
                                               eddy_channel_init_cb init, void *arg);

/** Required: init(child, arg) runs on the child's loop for every accepted channel, before it
 * becomes active, to add its handlers. Non-zero closes the child. */
EDDY_EXTERN void eddy_server_bootstrap_child_init(eddy_server_bootstrap_t *b,
                                                  eddy_channel_init_cb init, void *arg);

/**
 * SO_REUSEPORT mode (on: true): bind makes one listening socket per worker loop, each
 * accepting onto its own loop, and the kernel spreads connections over them; the boss group
 * is then unused. bind's future completes once all are bound, with the first listener as its
 * channel; closing that channel closes the others. 0, or EDDY_ENOTSUP without SO_REUSEPORT.
 */
EDDY_EXTERN int eddy_server_bootstrap_reuseport(eddy_server_bootstrap_t *b, bool on);

/**
 * Limit the server: at most max_connections children open at once (0: no limit), and at
 * most accepts_per_second new ones in each one-second window (0: no limit). Connections
 * beyond a limit are accepted and closed at once, counted (eddy_server_bootstrap_counters)
 * and logged (EDDY_LOG_WARN, through the log hook: common.h) at most once a second.
 */
EDDY_EXTERN void eddy_server_bootstrap_limits(eddy_server_bootstrap_t *b, uint64_t max_connections,
                                              uint64_t accepts_per_second);

typedef struct eddy_server_counters_s {
    uint64_t accepted;      /* children that were accepted (rejected ones included) */
    uint64_t active;        /* children open now */
    uint64_t rejected_max;  /* closed at once: max_connections reached */
    uint64_t rejected_rate; /* closed at once: accepts_per_second reached */
} eddy_server_counters_t;

/**
 * Close every child connection through its pipeline, from the tail, so that each handler's
 * close op takes part: a protocol handler may end its connection gracefully (HTTP/2 sends
 * GOAWAY and lets the streams in flight finish, http2.h), others close at once. Returns a
 * future (the caller releases it) that completes once no child is left; wait on it with the
 * deadline you allow (eddy_future_await(f, ms)), then shut the loop groups down, which closes
 * whatever is still open. Close the listeners first, or new children keep arriving. A call
 * while another one waits fails with EDDY_EALREADY; eddy_server_bootstrap_free() before
 * completion fails it with EDDY_ECANCELED. NULL only without memory. Any thread but a worker loop's own.
 */
EDDY_EXTERN eddy_future_t *eddy_server_bootstrap_shutdown(eddy_server_bootstrap_t *b);

/** A snapshot of the server's counters (all its binds). Any thread. */
EDDY_EXTERN void eddy_server_bootstrap_counters(const eddy_server_bootstrap_t *b,
                                                eddy_server_counters_t *c);

/**
 * Bind and listen on host:port. host: a numeric address, or a name resolved by the first
 * boss loop's resolver (resolver.h; the first address returned is used); NULL or "": every interface (0.0.0.0). port 0:
 * an ephemeral port (read it from eddy_channel_local_addr of the future's channel). Returns a
 * future the caller releases; it completes with the listening channel (eddy_future_channel;
 * valid while the future is held: retain it to keep it after releasing the future), or
 * fails with EDDY_EINVAL (no group or no child_init: one EDDY_LOG_ERROR message names it),
 * EDDY_ENOENT (unknown host), EDDY_EADDRINUSE... NULL only without memory. Any thread.
 */
EDDY_EXTERN eddy_future_t *eddy_server_bootstrap_bind(eddy_server_bootstrap_t *b, const char *host,
                                                      uint16_t port);

/** Bind to a Unix socket path (an existing socket file is not removed): as bind. */
EDDY_EXTERN eddy_future_t *eddy_server_bootstrap_bind_unix(eddy_server_bootstrap_t *b,
                                                           const char *path);

/* ---------------------------------------------------------------------------------------
 * Bootstrap (clients)
 */

/** A new client bootstrap with no group yet. NULL without memory. */
EDDY_EXTERN eddy_bootstrap_t *eddy_bootstrap_new(void);

/**
 * Drop the bootstrap and stop reconnecting: pending retries are cancelled and their futures
 * fail with EDDY_ECANCELED; a reconnect callback never starts after this returns. Connected
 * channels stay open. NULL is ignored. Any thread but the reconnect callback.
 */
EDDY_EXTERN void eddy_bootstrap_free(eddy_bootstrap_t *b);

/** The loops connected channels go to (eddy_loop_group_next). Borrowed: it must outlive the
 * channels; a connect still resolving or waiting to retry holds its loop, and fails once the
 * group is freed. 0 or EDDY_EINVAL (NULL). */
EDDY_EXTERN int eddy_bootstrap_group(eddy_bootstrap_t *b, eddy_loop_group_t *group);

/** An option of every channel made (EDDY_CONNECT_TIMEOUT_MS...): 0 or EDDY_EINVAL. */
EDDY_EXTERN int eddy_bootstrap_option(eddy_bootstrap_t *b, eddy_option_t opt, int64_t value);

/** Set attribute key = value on every channel made, before init: 0 or EDDY_ENOMEM. */
EDDY_EXTERN int eddy_bootstrap_attr(eddy_bootstrap_t *b, const void *key, void *value);

/**
 * init(ch, arg) runs on the channel's loop before it connects, to add its handlers (optional).
 * When a host has several addresses, each tried address has a channel of its own: init runs
 * for each, and the channels of failed tries are closed (their handlers removed). Non-zero
 * closes the channel and fails the connect with it (EDDY_ECANCELED when positive).
 */
EDDY_EXTERN void eddy_bootstrap_init(eddy_bootstrap_t *b, eddy_channel_init_cb init, void *arg);

typedef enum {
    EDDY_BACKOFF_NONE,       /* no reconnecting (the default) */
    EDDY_BACKOFF_FIXED,      /* every delay is base_ms */
    EDDY_BACKOFF_LINEAR,     /* base_ms * attempt */
    EDDY_BACKOFF_EXPONENTIAL /* base_ms * 2^(attempt - 1) */
} eddy_backoff_t;

/* Called on a loop before each retry: attempt counts from 1, delay_ms is the wait before it,
 * err why the previous try failed (EDDY_ECLOSED when a connection was lost). It must not call
 * eddy_bootstrap_* functions (a lock is held). */
typedef void (*eddy_reconnect_cb)(eddy_bootstrap_t *b, unsigned attempt, int64_t delay_ms, int err,
                                  void *arg);

typedef struct eddy_reconnect_options_s {
    eddy_backoff_t backoff;
    int64_t base_ms;       /* the first delay (<= 0: 100) */
    int64_t max_ms;        /* delays are capped here (<= 0: 30000) */
    unsigned max_attempts; /* retries per connect before its future fails; 0: no limit */
    bool on_close;         /* also reconnect when a connected channel closes */
    eddy_reconnect_cb cb;  /* may be NULL */
    void *arg;
} eddy_reconnect_options_t;

/**
 * Reconnect with backoff: a connect whose every address failed tries again after the delay,
 * and its future completes only with a connection, after max_attempts retries, or on
 * eddy_bootstrap_free (EDDY_ECANCELED). With on_close, a channel that connected and later
 * closes is replaced by a new connection to the same target (new channels are announced to
 * init only). opts NULL or EDDY_BACKOFF_NONE: off. 0 or EDDY_EINVAL.
 */
EDDY_EXTERN int eddy_bootstrap_reconnect(eddy_bootstrap_t *b, const eddy_reconnect_options_t *opts);

/**
 * Connect to host:port: a numeric address, or a name resolved by the resolver of the loop the
 * channel goes to (resolver.h), its addresses tried with Happy Eyeballs (RFC 8305): IPv6 and
 * IPv4 interleaved, IPv6 first; a try starts 250 ms after the previous one or at once when
 * it fails, the first to connect wins and the others are closed. EDDY_CONNECT_TIMEOUT_MS
 * holds for each try. Returns a future the caller releases; it completes with the connected
 * channel (valid while the future is held) or fails with the last try's error
 * (EDDY_ECONNREFUSED, EDDY_ETIMEDOUT...), EDDY_ENOENT (unknown host), EDDY_EINVAL (no group:
 * one EDDY_LOG_ERROR message), or EDDY_ECANCELED: eddy_future_cancel on it stops the lookup
 * and every try (a channel that connects anyway is closed). NULL only without memory. Any
 * thread.
 */
EDDY_EXTERN eddy_future_t *eddy_bootstrap_connect(eddy_bootstrap_t *b, const char *host,
                                                  uint16_t port);

/** Connect to a Unix socket path: as connect. */
EDDY_EXTERN eddy_future_t *eddy_bootstrap_connect_unix(eddy_bootstrap_t *b, const char *path);

/**
 * Datagram mode (Netty's Bootstrap with a DatagramChannel; datagram.h): on, the bootstrap
 * makes datagram channels. connect then makes a connected datagram channel to host:port (the
 * addresses tried in Happy Eyeballs order until a socket connects: UDP has no handshake, so
 * the first that can be connected wins at once),
 * and bind (below) makes unconnected ones. Off (the default): stream channels, and bind
 * fails with EDDY_EINVAL. 0.
 */
EDDY_EXTERN int eddy_bootstrap_datagram(eddy_bootstrap_t *b, bool on);

/**
 * SO_REUSEPORT for datagram binds (on: true): bind makes one channel per loop of the group,
 * all on the same port, and the kernel spreads senders over them, so that every loop serves
 * the port. The future completes once all are bound, with the first as its channel; closing
 * that channel closes the others. 0, or EDDY_ENOTSUP without SO_REUSEPORT.
 */
EDDY_EXTERN int eddy_bootstrap_reuseport(eddy_bootstrap_t *b, bool on);

/**
 * In datagram mode: a datagram channel bound to host:port (host: a numeric address, or a name
 * resolved by a loop's resolver, the first address used; NULL or "": 0.0.0.0; port 0: an
 * ephemeral port), its handlers added by init before it reads. Returns a future the caller
 * releases; it completes with the channel (eddy_future_channel; valid while the future is
 * held) or fails with EDDY_EINVAL (not in datagram mode, or no group: one EDDY_LOG_ERROR
 * message), EDDY_ENOENT (unknown host), EDDY_EADDRINUSE... NULL only without memory. Any
 * thread.
 */
EDDY_EXTERN eddy_future_t *eddy_bootstrap_bind(eddy_bootstrap_t *b, const char *host,
                                               uint16_t port);
/** Bind a Unix datagram socket to path (an existing file is not removed): as bind. */
EDDY_EXTERN eddy_future_t *eddy_bootstrap_bind_unix(eddy_bootstrap_t *b, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_BOOTSTRAP_H */
