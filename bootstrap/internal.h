/*
 * bootstrap internals: the resolver's front (bootstrap/resolver.c: lookups, coalescing, the
 * cache) and the backend it drives (resolver_cares.c or resolver_gai.c, chosen by CMake's
 * EDDY_RESOLVER). Private.
 */
#ifndef EDDY_BOOTSTRAP_INTERNAL_H
#define EDDY_BOOTSTRAP_INTERNAL_H

#include <eddy/resolver.h>

#include "reactor/layer.h"

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

#endif /* EDDY_BOOTSTRAP_INTERNAL_H */
