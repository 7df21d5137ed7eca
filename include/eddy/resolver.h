/*
 * eddy name resolution: host names to addresses on the event loop (Netty's DnsNameResolver).
 *
 * Every loop has a resolver of its own, made at its first lookup and closed when the loop
 * shuts down; there is no object to create or free. Built with c-ares (the default when
 * libc-ares-dev is found: CMake's EDDY_RESOLVER=cares), a lookup is a DNS query on sockets the
 * loop watches and timers of that loop, with no helper thread, and its answer is cached for its
 * TTL. Built with EDDY_RESOLVER=getaddrinfo, each lookup runs getaddrinfo() on a helper thread
 * and nothing is cached. /etc/hosts and /etc/resolv.conf are read as the backend reads them.
 * docs/resolver.md has the rules.
 */
#ifndef EDDY_RESOLVER_H
#define EDDY_RESOLVER_H

#include <eddy/common.h>
#include <eddy/loop.h>
#include <eddy/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The address families a lookup asks for. */
typedef enum {
    EDDY_RESOLVE_ANY = 0, /* IPv6 and IPv4 (AAAA and A) */
    EDDY_RESOLVE_V4 = 1,  /* IPv4 only (A) */
    EDDY_RESOLVE_V6 = 2   /* IPv6 only (AAAA) */
} eddy_resolve_family_t;

typedef struct eddy_resolve_options_s {
    eddy_resolve_family_t family;
    int64_t timeout_ms; /* the lookup fails with EDDY_ETIMEDOUT after this; 0: 10000;
                           negative: only the backend's own timeouts and tries */
    bool no_cache;      /* ask the servers even when the cache has an answer (the answer
                           still refreshes the cache) */
} eddy_resolve_options_t;

/* A lookup's answer: count addresses (at least one), each with the port asked for. */
typedef struct eddy_addr_list_s {
    size_t count;
    eddy_addr_t addrs[];
} eddy_addr_list_t;

/**
 * Look host up on loop: a name (through the cache, /etc/hosts, then DNS) or a numeric address
 * (answered at once). opts may be NULL (both families, the default timeout). Returns a future
 * owned by loop, which the caller releases; it completes with an eddy_addr_list_t (read it
 * with eddy_resolve_result; it belongs to the future and lives as long as the future is held),
 * or fails with EDDY_ENOENT (no such name, or no address of the family asked for),
 * EDDY_ETIMEDOUT (opts->timeout_ms passed, or the servers did not answer), EDDY_ECANCELED
 * (eddy_future_cancel: the query is dropped too), EDDY_ESHUTDOWN (the loop shut down first),
 * EDDY_EINVAL (host NULL or empty) or EDDY_EIO (the servers failed). The addresses keep the
 * order the backend gave them, unsorted (Happy Eyeballs, in eddy_bootstrap_connect, orders
 * them for connecting). NULL only without memory. Any thread: the lookup itself runs on
 * loop's thread.
 */
EDDY_EXTERN eddy_future_t *eddy_resolve(eddy_loop_t *loop, const char *host, uint16_t port,
                                        const eddy_resolve_options_t *opts);

/** The addresses of a succeeded eddy_resolve future, else NULL. Borrowed from f. */
EDDY_EXTERN const eddy_addr_list_t *eddy_resolve_result(const eddy_future_t *f);

/* Process-wide resolver settings; zero fields take the defaults. */
typedef struct eddy_resolver_config_s {
    const char *servers;          /* DNS servers to ask, "127.0.0.1:5353,[::1]:53" (copied);
                                     NULL: those of /etc/resolv.conf */
    bool cache_off;               /* no cache: every lookup asks */
    uint32_t cache_max_ttl_s;     /* answers are kept at most this long; 0: 300 */
    int32_t cache_negative_ttl_s; /* how long "no such name" is kept; 0: 5; negative: never */
    size_t cache_entries;         /* entries per loop; the least recently used go first;
                                     0: 4096 */
    int64_t attempt_timeout_ms;   /* the first try's timeout per server (c-ares doubles it per
                                     round); 0: resolv.conf's or c-ares's (5000) */
    int tries;                    /* rounds over the servers; 0: resolv.conf's or 4 */
} eddy_resolver_config_t;

/**
 * Set the settings every loop's resolver uses from its next lookup on (a resolver that sees a
 * change rebuilds its channel, dropping its cache: meant for start-up and tests). cfg NULL
 * restores the defaults. 0, EDDY_ENOMEM, EDDY_EINVAL (servers malformed: nothing changed), or
 * EDDY_ENOTSUP (servers with EDDY_RESOLVER=getaddrinfo, which asks resolv.conf's; it caches
 * nothing either, getaddrinfo giving no TTLs).
 * Any thread.
 */
EDDY_EXTERN int eddy_resolver_configure(const eddy_resolver_config_t *cfg);

/** The backend this build resolves with: "c-ares" or "getaddrinfo". */
EDDY_EXTERN const char *eddy_resolver_backend(void);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_RESOLVER_H */
