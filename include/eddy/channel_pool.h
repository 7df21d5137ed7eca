/*
 * eddy channel pools (Netty's SimpleChannelPool and FixedChannelPool): connections to one
 * host:port, made by a client bootstrap and handed out and taken back, so that a client reuses
 * warm connections instead of connecting per request.
 *
 * acquire gives out an idle channel (the one released most recently first, as Netty's LIFO
 * default: the warmest connection, and the others age out), else a new connection, else, at
 * max_connections, waits in line (first come, first served) for a release. release takes a
 * channel back; a health check on either side closes channels that are not fit to reuse.
 *
 * A channel the pool made is counted against max_connections from its connect until it closes,
 * whoever holds it: a channel that closes while acquired frees its slot at once (a waiter may
 * get a new connection), and its release later only drops the pool's record of it. So the
 * limit is a bound on open connections plus connects under way.
 *
 * Every function may be called from any thread. A pool ends with eddy_channel_pool_close(),
 * which frees it once every channel it gave out came back and every channel closed.
 */
#ifndef EDDY_CHANNEL_POOL_H
#define EDDY_CHANNEL_POOL_H

#include <eddy/bootstrap.h>
#include <eddy/channel.h>
#include <eddy/common.h>
#include <eddy/loop.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eddy_channel_pool_s eddy_channel_pool_t;

/* A health check: true when ch may be handed out (acquire) or kept (release). Called with the
 * pool's lock held, on the thread of the acquire or release that asks (or a loop's, when a
 * release serves a waiter): it must be quick and must not call eddy_channel_pool_* functions.
 * Read only what any thread may read (eddy_channel_is_active, eddy_channel_is_writable...). */
typedef bool (*eddy_channel_health_cb)(eddy_channel_t *ch, void *arg);

typedef struct eddy_channel_pool_options_s {
    size_t max_connections;      /* open connections, connects under way included; 0: no limit */
    size_t max_pending_acquires; /* waiters allowed (beyond: EDDY_EBUSY); 0: no limit */
    int64_t acquire_timeout_ms;  /* a waiting acquire fails with EDDY_ETIMEDOUT; <= 0: never */
    eddy_channel_health_cb acquire_check; /* NULL: eddy_channel_is_active */
    eddy_channel_health_cb release_check; /* NULL: eddy_channel_is_active */
    void *check_arg;                      /* for both checks */
    size_t max_idle;         /* idle channels kept; a release beyond closes; 0: no limit */
    int64_t idle_timeout_ms; /* an idle channel closes after this long; <= 0: never */
} eddy_channel_pool_options_t;

typedef struct eddy_channel_pool_counters_s {
    uint64_t idle;     /* in the pool now */
    uint64_t acquired; /* given out and not released yet (closed ones included) */
    uint64_t pending;  /* acquires waiting for a channel now */
    uint64_t created;  /* connections made, ever */
    uint64_t closed;   /* of those, closed, ever (by the pool, the peer or the user) */
} eddy_channel_pool_counters_t;

/**
 * A new pool of connections to host:port (as eddy_bootstrap_connect takes them), made by b,
 * whose init adds the handlers of each. b is borrowed: it (and its group) must outlive the
 * pool, that is until the future of eddy_channel_pool_close() completed; configure it before
 * and do not turn on its reconnecting on close (a pool replaces what it lost itself, on
 * demand). host is copied. o NULL: no limits, default checks. NULL without memory, or when
 * b has no group yet (one EDDY_LOG_ERROR message). Any thread.
 */
EDDY_EXTERN eddy_channel_pool_t *eddy_channel_pool_new(eddy_bootstrap_t *b, const char *host,
                                                       uint16_t port,
                                                       const eddy_channel_pool_options_t *o);

/**
 * A channel: returns a future (the caller releases it) that completes with the channel
 * (eddy_future_channel(); the future holds a reference while it lives) once one is there: an
 * idle one that passes the acquire check, a new connection, or, at max_connections, the next
 * one released or a new connection when a slot frees, waiters served in the order they came.
 * The channel is the caller's until eddy_channel_pool_release(). Fails with the connect's
 * error (EDDY_ECONNREFUSED...), EDDY_EBUSY (max_pending_acquires waiting already),
 * EDDY_ETIMEDOUT (waited acquire_timeout_ms), EDDY_ECLOSED (the pool was closed). NULL only
 * without memory. Any thread.
 */
EDDY_EXTERN eddy_future_t *eddy_channel_pool_acquire(eddy_channel_pool_t *pool);

/**
 * Give ch, acquired from pool, back: to the first waiter, else to the idle channels, unless it
 * fails the release check, the idle channels are at max_idle, or the pool is closing: then it
 * is closed. Borrows ch (the reference the acquire future held is not the caller's to drop).
 * Returns a completed future (the caller releases it): 0, or EDDY_EINVAL when ch is not out
 * from this pool (never acquired from it, or released already): nothing changes then. NULL
 * only without memory (ch was taken back). Any thread.
 */
EDDY_EXTERN eddy_future_t *eddy_channel_pool_release(eddy_channel_pool_t *pool, eddy_channel_t *ch);

/** A snapshot of the counters. Any thread; not after the pool was closed. */
EDDY_EXTERN void eddy_channel_pool_counters(eddy_channel_pool_t *pool,
                                            eddy_channel_pool_counters_t *c);

/**
 * Close the pool: waiting acquires fail with EDDY_ECLOSED, idle channels close, connects under
 * way close their channel when they complete (their acquire fails with EDDY_ECLOSED), and
 * channels out close when released (release them as usual: until then the pool lives on).
 * After this call, use pool for nothing but those releases. Returns a future (the caller
 * releases it) that completes with 0 once every channel of the pool has closed and the pool
 * is freed; the bootstrap may go then. NULL without memory (the pool is closed all the same).
 * Once. Any thread.
 */
EDDY_EXTERN eddy_future_t *eddy_channel_pool_close(eddy_channel_pool_t *pool);

/* ---------------------------------------------------------------------------------------
 * Pool maps (Netty's AbstractChannelPoolMap): one pool per key, made on first use
 */

typedef struct eddy_channel_pool_map_s eddy_channel_pool_map_t;

/* What a pool is for: a host, a port, and whether its channels speak TLS. */
typedef struct eddy_channel_pool_key_s {
    const char *host; /* as eddy_bootstrap_connect takes it; compared exactly (case matters) */
    uint16_t port;
    bool tls;
} eddy_channel_pool_key_t;

/* Makes the pool for key (eddy_channel_pool_new() with a bootstrap fit for it: TLS, SNI).
 * Called once per key, with the map's lock held, on the thread of the get that needs it:
 * it must not call eddy_channel_pool_map_* functions. NULL fails that get. key is borrowed. */
typedef eddy_channel_pool_t *(*eddy_channel_pool_factory_cb)(const eddy_channel_pool_key_t *key,
                                                             void *arg);

/** A new empty map whose pools factory makes. NULL without memory. Any thread. */
EDDY_EXTERN eddy_channel_pool_map_t *eddy_channel_pool_map_new(eddy_channel_pool_factory_cb factory,
                                                               void *arg);

/** The pool for key, made by the factory on the first get of that key (a failed make is
 * tried again by the next get). Borrows: the pool is the map's, for acquires until it is
 * removed or the map closed, and for the releases of its channels after. A hit allocates
 * nothing. NULL when the factory failed, without memory, or once eddy_channel_pool_map_close()
 * was called (until its future completed: the map is freed then). Any thread. */
EDDY_EXTERN eddy_channel_pool_t *eddy_channel_pool_map_get(eddy_channel_pool_map_t *m,
                                                           const eddy_channel_pool_key_t *key);

/** Whether the map holds a pool for key now. Any thread. */
EDDY_EXTERN bool eddy_channel_pool_map_contains(eddy_channel_pool_map_t *m,
                                                const eddy_channel_pool_key_t *key);

/** Take the pool for key out of the map and close it (eddy_channel_pool_close(): channels
 * still out close as they are released); a later get makes a new one. Returns the close's
 * future (the caller releases it), or NULL when there was no such pool, or without memory
 * (the pool was removed and closed all the same). Any thread. */
EDDY_EXTERN eddy_future_t *eddy_channel_pool_map_remove(eddy_channel_pool_map_t *m,
                                                        const eddy_channel_pool_key_t *key);

/** How many pools the map holds. Any thread. */
EDDY_EXTERN size_t eddy_channel_pool_map_size(eddy_channel_pool_map_t *m);

/** Close every pool (eddy_channel_pool_close()) and free the map once they are all closed:
 * the future (the caller releases it) completes then, so it waits for the release of every
 * channel still out. Until then gets return NULL; after this call, use the map for nothing
 * else, and its pools for nothing but those releases. NULL without memory (the map closes and
 * frees itself all the same). Once. Any thread. */
EDDY_EXTERN eddy_future_t *eddy_channel_pool_map_close(eddy_channel_pool_map_t *m);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_CHANNEL_POOL_H */
