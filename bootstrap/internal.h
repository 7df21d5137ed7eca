/*
 * bootstrap internals: the resolver's front (bootstrap/resolver.c: lookups, coalescing, the
 * cache) and the backend it drives (resolver_cares.c or resolver_gai.c, chosen by CMake's
 * EDDY_RESOLVER). Private.
 */
#ifndef EDDY_BOOTSTRAP_INTERNAL_H
#define EDDY_BOOTSTRAP_INTERNAL_H

#include <eddy/channel.h>
#include <eddy/resolver.h>

#include "reactor/layer.h"

#include <pthread.h>

/* The settings a resolver runs with: a copy of the process-wide configuration. */
typedef struct eddy__resolver_settings_s {
    char *servers; /* NULL: resolv.conf's */
    bool cache_off;
    uint32_t cache_max_ttl_s;
    int32_t cache_negative_ttl_s;
    size_t cache_entries;
    int64_t attempt_timeout_ms;
    int tries;
} eddy__resolver_settings_t;

/* One question in flight: a name and a family, whoever waits for it (lookups join a query
 * for the same name rather than ask again). The front owns it; backend is the backend's. */
typedef struct eddy__query_s eddy__query_t;
struct eddy__query_s {
    eddy__query_t *next, **prev; /* in the resolver's queries */
    struct eddy__resolver_s *r;
    struct lookup_s *waiters;
    eddy_resolve_family_t family;
    void *backend;
    char name[];
};

typedef struct eddy__resolver_s eddy__resolver_t;

/*
 * A backend, on one loop's thread. start begins q and reports its end with
 * eddy__query_done() exactly once, possibly before start returns; abandon says nobody waits
 * for q any more (the backend may end it at once, with any error, or let it run); close ends
 * every query in flight with EDDY_ESHUTDOWN and lets go of everything (the loop shuts down).
 */
typedef struct eddy__resolver_ops_s {
    const char *name;
    bool has_ttl; /* answers carry TTLs, so the front may cache them */
    /* Settings a backend cannot follow: 0 or the EDDY_E* configure returns. Any thread. */
    int (*check)(const eddy__resolver_settings_t *s);
    int (*open)(eddy__resolver_t *r, eddy_loop_t *loop, const eddy__resolver_settings_t *s,
                void **state);
    void (*close)(void *state);
    void (*start)(void *state, eddy__query_t *q);
    void (*abandon)(void *state, eddy__query_t *q);
} eddy__resolver_ops_t;

extern const eddy__resolver_ops_t eddy__resolver_backend;

/* q ended: addrs (n > 0, ports 0, borrowed) with the smallest TTL among them (ttl_s, 0: do not
 * keep), or err. Frees q. The loop's thread. */
void eddy__query_done(eddy__query_t *q, const eddy_addr_t *addrs, size_t n, uint32_t ttl_s,
                      int err);

/*
 * For the bootstraps: resolve host:port on loop into cb(arg, addrs, n, err) (addrs, n > 0,
 * belong to cb). A numeric host, or none when passive (every interface), calls cb at once on
 * this thread; a name calls it on loop through eddy_resolve. Returns 0 when cb was or will be
 * called, else the error (cb is never called). *lookup (may be NULL) receives the lookup's
 * future, retained, to cancel it; NULL when cb was called at once.
 */
typedef void (*eddy__resolved_cb)(void *arg, eddy_addr_t *addrs, size_t n, int err);
int eddy__bootstrap_resolve(eddy_loop_t *loop, const char *host, uint16_t port, bool passive,
                            eddy__resolved_cb cb, void *arg, eddy_future_t **lookup);

/* ---------------------------------------------------------------------------------------
 * Fan-out binds (fanout.c): one channel, or with SO_REUSEPORT one per loop of a group, all on
 * the port the first one got. The server bootstrap's listeners and the client bootstrap's
 * datagram binds are both one.
 */
typedef struct eddy__fanout_s eddy__fanout_t;

typedef struct eddy__fanout_slot_s {
    eddy__fanout_t *fo;
    size_t i;
    eddy_channel_t *ch; /* retained once open */
} eddy__fanout_slot_t;

struct eddy__fanout_s {
    void *owner;                                /* one reference, dropped with release */
    void (*open)(eddy__fanout_t *fo, size_t i); /* start slot i: it reports to _opened() */
    void (*release)(void *owner);
    eddy_promise_t *p;
    eddy_addr_t addr; /* where the slots bind: once the first is bound, its address */
    bool reuseport;
    pthread_mutex_t lock; /* guards done and err: slots report on different loops */
    size_t want, done;
    int err;
    eddy__fanout_slot_t slot[];
};

/* A fan-out of want slots (1 unless reuseport), its future owned by owner_loop (NULL: none),
 * holding the owner reference the caller took for it. NULL without memory, that reference
 * dropped then. */
eddy__fanout_t *eddy__fanout_new(size_t want, bool reuseport, eddy_loop_t *owner_loop,
                                 void *owner, void (*open)(eddy__fanout_t *fo, size_t i),
                                 void (*release)(void *owner));
/* Start slot 0 at unix_addr, or at host and port looked up (passive) on loop. Returns the
 * bind's future: it completes with the first channel, whose close closes the others, or
 * fails with the first error, every channel that opened closed. */
eddy_future_t *eddy__fanout_start(eddy__fanout_t *fo, eddy_loop_t *loop, const char *host,
                                  uint16_t port, const eddy_addr_t *unix_addr);
/* Slot i reported: its channel (retained, taken over; NULL when there is none) or err. The
 * first slot bound starts the others on its address; the first failing means they never
 * start. The last report completes the bind and frees fo. Any thread. */
void eddy__fanout_opened(eddy__fanout_t *fo, size_t i, eddy_channel_t *ch, int err);

#endif /* EDDY_BOOTSTRAP_INTERNAL_H */
