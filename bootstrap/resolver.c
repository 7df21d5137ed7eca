/*
 * The resolver's front: one per loop, in the loop's local storage, made at the loop's first
 * lookup and closed by the loop's shutdown (a closer). A lookup hops to its loop, is answered
 * from the cache when it can be, else joins the query in flight for the same name and family
 * or starts one on the backend (c-ares on the loop's own sockets and timers, or getaddrinfo
 * on a helper thread). Everything below runs on the loop's thread but eddy_resolve itself,
 * the process-wide settings, and a lookup's future listener when its loop refuses it.
 */
#include "bootstrap/internal.h"

#include "buffer/layer.h"
#include "reactor/layer.h"

#include <assert.h>
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A lookup without a timeout of its own gives up after this long: about what c-ares takes
 * for two rounds over one server that never answers (5 s, then 10 s, cut short). */
#define DEFAULT_TIMEOUT_MS 10000
#define DEFAULT_MAX_TTL_S 300
/* "No such name" is kept briefly: long enough to absorb a burst of retries of a mistyped
 * name, short enough that a name just added is seen soon (ares_getaddrinfo does not hand us
 * the SOA minimum RFC 2308 would have us use). */
#define DEFAULT_NEGATIVE_TTL_S 5
#define DEFAULT_CACHE_ENTRIES 4096

/* ---------------------------------------------------------------------------------------
 * Process-wide settings
 */

static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static eddy__resolver_settings_t config; /* guarded by config_lock */
/* Bumped by each configure; a resolver compares it with its own at each lookup. */
static _Atomic uint64_t config_gen;

static void settings_destroy(eddy__resolver_settings_t *s)
{
    free(s->servers);
    s->servers = NULL;
}

/* Fill out from cfg (NULL: defaults), the defaults in place of zeros. */
static int settings_from(eddy__resolver_settings_t *out, const eddy_resolver_config_t *cfg)
{
    eddy_resolver_config_t zero = {0};
    if (cfg == NULL) {
        cfg = &zero;
    }
    memset(out, 0, sizeof(*out));
    if (cfg->servers != NULL && (out->servers = strdup(cfg->servers)) == NULL) {
        return EDDY_ENOMEM;
    }
    out->cache_off = cfg->cache_off;
    out->cache_max_ttl_s = cfg->cache_max_ttl_s > 0 ? cfg->cache_max_ttl_s : DEFAULT_MAX_TTL_S;
    out->cache_negative_ttl_s =
        cfg->cache_negative_ttl_s != 0 ? cfg->cache_negative_ttl_s : DEFAULT_NEGATIVE_TTL_S;
    out->cache_entries = cfg->cache_entries > 0 ? cfg->cache_entries : DEFAULT_CACHE_ENTRIES;
    out->attempt_timeout_ms = cfg->attempt_timeout_ms > 0 ? cfg->attempt_timeout_ms : 0;
    out->tries = cfg->tries > 0 ? cfg->tries : 0;
    return 0;
}

int eddy_resolver_configure(const eddy_resolver_config_t *cfg)
{
    eddy__resolver_settings_t s;
    int rc = settings_from(&s, cfg);
    if (rc == 0) {
        rc = eddy__resolver_backend.check(&s);
    }
    if (rc != 0) {
        settings_destroy(&s);
        return rc;
    }
    pthread_mutex_lock(&config_lock);
    settings_destroy(&config);
    config = s;
    atomic_fetch_add_explicit(&config_gen, 1, memory_order_relaxed);
    pthread_mutex_unlock(&config_lock);
    return 0;
}

const char *eddy_resolver_backend(void)
{
    return eddy__resolver_backend.name;
}

/* A copy of the current settings and their generation. */
static int settings_snapshot(eddy__resolver_settings_t *out, uint64_t *gen)
{
    pthread_mutex_lock(&config_lock);
    *gen = atomic_load_explicit(&config_gen, memory_order_relaxed);
    int rc;
    if (*gen == 0) {
        rc = settings_from(out, NULL); /* never configured */
    } else {
        *out = config;
        out->servers = NULL;
        rc = config.servers != NULL && (out->servers = strdup(config.servers)) == NULL
                 ? EDDY_ENOMEM
                 : 0;
    }
    pthread_mutex_unlock(&config_lock);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Lookups and the resolver
 */

enum { LOOKUP_PENDING, LOOKUP_WAITING, LOOKUP_DONE };

/* Two references: the resolver's (its start task, then the query it waits on) and the
 * future listener's. Either may go first; the fields are the loop's but refcnt. */
typedef struct lookup_s {
    _Atomic uint32_t refcnt;
    int state;
    eddy_loop_t *loop;
    eddy_promise_t *p; /* one reference */
    eddy__query_t *query;
    struct lookup_s *next, **prev; /* in query->waiters */
    eddy_timer_t *timer;
    uint16_t port;
    eddy_resolve_family_t family;
    int64_t timeout_ms;
    bool no_cache;
    char host[];
} lookup_t;

/* The list of entries in order of use, most recent first. */
typedef struct lru_s {
    struct lru_s *prev, *next;
} lru_t;

typedef struct entry_s entry_t;
struct entry_s {
    lru_t lru;
    entry_t *hnext; /* in its bucket */
    eddy_resolve_family_t family;
    int64_t expires_ns;
    int err; /* a negative answer's error, else 0 */
    size_t n;
    eddy_addr_t *addrs;
    char name[];
};

struct eddy__resolver_s {
    bool opened, closed;
    eddy__closer_t closer;
    eddy_loop_t *loop;
    uint64_t gen;
    eddy__resolver_settings_t set;
    void *backend;
    eddy__query_t *queries;
    size_t nqueries;
    entry_t **buckets; /* nbuckets a power of two, or none when the cache is off */
    size_t nbuckets, nentries;
    lru_t lru; /* sentinel */
};

static void lookup_release(lookup_t *lk)
{
    /* acq_rel: pairs with itself, so the last one sees the other side's writes. */
    if (!eddy__refcnt_sub(&lk->refcnt, 1)) {
        return;
    }
    eddy_timer_release(lk->timer);
    eddy_future_release(lk->p);
    eddy__loop_release(lk->loop);
    free(lk);
}

/* The resolver lets go of lk: no timer of it may fire any more. The loop's thread. */
static void lookup_drop(lookup_t *lk)
{
    lk->state = LOOKUP_DONE;
    if (lk->timer != NULL) {
        eddy_timer_cancel(lk->timer);
    }
    lookup_release(lk);
}

static void query_abandon_if_idle(eddy__query_t *q);

/* Take lk off its query's waiters. */
static void lookup_unlink(lookup_t *lk)
{
    eddy__query_t *q = lk->query;
    *lk->prev = lk->next;
    if (lk->next != NULL) {
        lk->next->prev = lk->prev;
    }
    lk->query = NULL;
    lk->next = NULL;
    lk->prev = NULL;
    query_abandon_if_idle(q);
}

/* The lookup's future completed, by us, its timer, or the user's cancel. */
static void lookup_completed(eddy_future_t *f, void *arg)
{
    (void)f;
    lookup_t *lk = arg;
    /* Off the loop only when the loop refused to run this listener (it is shutting down):
     * its closer then ends the query and lets go of lk. */
    if (eddy_loop_in_event_loop(lk->loop) && lk->state == LOOKUP_WAITING) {
        lookup_unlink(lk);
        lookup_drop(lk);
    }
    lookup_release(lk);
}

static eddy_addr_list_t *addr_list_new(const eddy_addr_t *addrs, size_t n, uint16_t port)
{
    eddy_addr_list_t *l = malloc(sizeof(*l) + n * sizeof(l->addrs[0]));
    if (l == NULL) {
        return NULL;
    }
    l->count = n;
    for (size_t i = 0; i < n; i++) {
        l->addrs[i] = addrs[i];
        if (addrs[i].u.sa.sa_family == AF_INET6) {
            l->addrs[i].u.in6.sin6_port = htons(port);
        } else {
            l->addrs[i].u.in4.sin_port = htons(port);
        }
    }
    return l;
}

/* Complete p with addrs (a copy, with port) or err. */
static void promise_answer(eddy_promise_t *p, const eddy_addr_t *addrs, size_t n, uint16_t port,
                           int err)
{
    if (err == 0) {
        eddy_addr_list_t *l = addr_list_new(addrs, n, port);
        if (l != NULL) {
            eddy__promise_succeed_owned(p, l, free);
            return;
        }
        err = EDDY_ENOMEM;
    }
    eddy_promise_fail(p, err);
}

/* ---------------------------------------------------------------------------------------
 * The cache: a chained hash table of (name, family), with a list in order of use to find
 * the entry to evict when full.
 */

static size_t name_hash(const char *name, eddy_resolve_family_t family)
{
    /* FNV-1a: names are short, and nothing here is keyed by a peer's choice of name. */
    uint64_t h = 1469598103934665603ull ^ (uint64_t)family;
    for (const unsigned char *s = (const unsigned char *)name; *s != '\0'; s++) {
        h = (h ^ *s) * 1099511628211ull;
    }
    return (size_t)(h ^ (h >> 32));
}

static void lru_unlink(entry_t *e)
{
    e->lru.prev->next = e->lru.next;
    e->lru.next->prev = e->lru.prev;
}

static void lru_push_front(eddy__resolver_t *r, entry_t *e)
{
    e->lru.next = r->lru.next;
    e->lru.prev = &r->lru;
    e->lru.next->prev = &e->lru;
    r->lru.next = &e->lru;
}

static entry_t **cache_slot(eddy__resolver_t *r, const char *name, eddy_resolve_family_t family)
{
    entry_t **pp = &r->buckets[name_hash(name, family) & (r->nbuckets - 1)];
    while (*pp != NULL && ((*pp)->family != family || strcmp((*pp)->name, name) != 0)) {
        pp = &(*pp)->hnext;
    }
    return pp;
}

static void cache_remove(eddy__resolver_t *r, entry_t **slot)
{
    entry_t *e = *slot;
    *slot = e->hnext;
    lru_unlink(e);
    r->nentries--;
    free(e->addrs);
    free(e);
}

/* The fresh entry for name, moved to the front of the list; an expired one is dropped. */
static entry_t *cache_get(eddy__resolver_t *r, const char *name, eddy_resolve_family_t family)
{
    if (r->buckets == NULL) {
        return NULL;
    }
    entry_t **slot = cache_slot(r, name, family);
    entry_t *e = *slot;
    if (e == NULL) {
        return NULL;
    }
    if (e->expires_ns <= eddy_loop_now_ns(r->loop)) {
        cache_remove(r, slot);
        return NULL;
    }
    lru_unlink(e);
    lru_push_front(r, e);
    return e;
}

static void cache_put(eddy__resolver_t *r, const char *name, eddy_resolve_family_t family,
                      const eddy_addr_t *addrs, size_t n, uint32_t ttl_s, int err)
{
    if (r->buckets == NULL) {
        return;
    }
    int64_t ttl = err == 0 ? (int64_t)ttl_s : (int64_t)r->set.cache_negative_ttl_s;
    if (ttl > (int64_t)r->set.cache_max_ttl_s) {
        ttl = r->set.cache_max_ttl_s;
    }
    if (ttl <= 0) {
        return;
    }
    entry_t **slot = cache_slot(r, name, family);
    if (*slot != NULL) {
        cache_remove(r, slot);
        slot = cache_slot(r, name, family);
    }
    if (r->nentries >= r->set.cache_entries) {
        entry_t *old = EDDY_CONTAINER_OF(r->lru.prev, entry_t, lru); /* least recently used */
        cache_remove(r, cache_slot(r, old->name, old->family));
        slot = cache_slot(r, name, family);
    }
    size_t len = strlen(name);
    entry_t *e = malloc(sizeof(*e) + len + 1);
    eddy_addr_t *copy = n > 0 ? malloc(n * sizeof(*copy)) : NULL;
    if (e == NULL || (n > 0 && copy == NULL)) {
        free(e);
        free(copy);
        return; /* not kept: the next lookup asks again */
    }
    if (n > 0) {
        memcpy(copy, addrs, n * sizeof(*copy));
    }
    memcpy(e->name, name, len + 1);
    e->family = family;
    e->expires_ns = eddy_loop_now_ns(r->loop) + ttl * 1000000000;
    e->err = err;
    e->n = n;
    e->addrs = copy;
    e->hnext = NULL;
    *slot = e;
    lru_push_front(r, e);
    r->nentries++;
}

static void cache_destroy(eddy__resolver_t *r)
{
    while (r->nentries > 0) {
        entry_t *e = EDDY_CONTAINER_OF(r->lru.next, entry_t, lru);
        cache_remove(r, cache_slot(r, e->name, e->family));
    }
    free(r->buckets);
    r->buckets = NULL;
    r->nbuckets = 0;
}

static int cache_init(eddy__resolver_t *r)
{
    r->lru.next = r->lru.prev = &r->lru;
    if (r->set.cache_off || !eddy__resolver_backend.has_ttl) {
        return 0;
    }
    size_t n = 16;
    while (n < r->set.cache_entries && n < ((size_t)1 << 20)) {
        n *= 2;
    }
    r->buckets = calloc(n, sizeof(*r->buckets));
    if (r->buckets == NULL) {
        return EDDY_ENOMEM;
    }
    r->nbuckets = n;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Queries
 */

static void query_abandon_if_idle(eddy__query_t *q)
{
    if (q->waiters == NULL) {
        eddy__resolver_backend.abandon(q->r->backend, q);
    }
}

void eddy__query_done(eddy__query_t *q, const eddy_addr_t *addrs, size_t n, uint32_t ttl_s,
                      int err)
{
    eddy__resolver_t *r = q->r;
    *q->prev = q->next;
    if (q->next != NULL) {
        q->next->prev = q->prev;
    }
    r->nqueries--;
    if (err == 0 && n == 0) {
        err = EDDY_ENOENT;
    }
    /* Cached before anyone hears of it: a waiter's listener that looks the name up again
     * finds the answer instead of asking anew. */
    if (!r->closed && (err == 0 || err == EDDY_ENOENT)) {
        cache_put(r, q->name, q->family, addrs, n, ttl_s, err);
    }
    lookup_t *w = q->waiters;
    q->waiters = NULL;
    while (w != NULL) {
        lookup_t *next = w->next;
        w->query = NULL;
        w->next = NULL;
        w->prev = NULL;
        w->state = LOOKUP_DONE;
        promise_answer(w->p, addrs, n, w->port, err);
        lookup_drop(w);
        w = next;
    }
    free(q);
}

/* lk waits for q from now on. */
static void query_join(eddy__query_t *q, lookup_t *lk)
{
    lk->query = q;
    lk->next = q->waiters;
    if (q->waiters != NULL) {
        q->waiters->prev = &lk->next;
    }
    lk->prev = &q->waiters;
    q->waiters = lk;
    lk->state = LOOKUP_WAITING;
}

static int query_start(eddy__resolver_t *r, lookup_t *lk)
{
    for (eddy__query_t *q = r->queries; q != NULL; q = q->next) {
        /* An abandoned query (no waiters) stays abandoned: the backend counts on it. */
        if (q->waiters != NULL && q->family == lk->family && strcmp(q->name, lk->host) == 0) {
            query_join(q, lk);
            return 0;
        }
    }
    size_t len = strlen(lk->host);
    eddy__query_t *q = calloc(1, sizeof(*q) + len + 1);
    if (q == NULL) {
        return EDDY_ENOMEM;
    }
    memcpy(q->name, lk->host, len + 1);
    q->r = r;
    q->family = lk->family;
    q->next = r->queries;
    if (r->queries != NULL) {
        r->queries->prev = &q->next;
    }
    q->prev = &r->queries;
    r->queries = q;
    r->nqueries++;
    query_join(q, lk);
    /* May end q (and answer lk) before it returns. */
    eddy__resolver_backend.start(r->backend, q);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The resolver of a loop
 */

static const char resolver_key; /* the loop-local block's key */

static void resolver_shutdown(eddy__resolver_t *r)
{
    if (r->backend != NULL) {
        eddy__resolver_backend.close(r->backend);
        r->backend = NULL;
    }
    assert(r->queries == NULL);
    cache_destroy(r);
    settings_destroy(&r->set);
    r->opened = false;
}

static void resolver_close(eddy__closer_t *c)
{
    eddy__resolver_t *r = EDDY_CONTAINER_OF(c, eddy__resolver_t, closer);
    /* Before the backend fails what is in flight: a listener that looks up again is refused. */
    r->closed = true;
    resolver_shutdown(r);
}

static int resolver_open(eddy__resolver_t *r, eddy_loop_t *loop)
{
    r->loop = loop;
    int rc = settings_snapshot(&r->set, &r->gen);
    if (rc == 0) {
        rc = cache_init(r);
    }
    if (rc == 0) {
        rc = eddy__resolver_backend.open(r, loop, &r->set, &r->backend);
    }
    if (rc != 0) {
        cache_destroy(r);
        settings_destroy(&r->set);
        r->backend = NULL;
        return rc;
    }
    if (r->closer.next == NULL) {
        r->closer.close = resolver_close;
        eddy__loop_closer_add(loop, &r->closer);
    }
    r->opened = true;
    return 0;
}

/* loop's resolver, opened (again, when the settings changed and nothing is in flight), or
 * NULL with *err. The loop's thread. */
static eddy__resolver_t *resolver_get(eddy_loop_t *loop, int *err)
{
    eddy__resolver_t *r = eddy__loop_local(loop, &resolver_key, sizeof(*r));
    if (r == NULL) {
        *err = EDDY_ENOMEM;
        return NULL;
    }
    if (r->closed || eddy_loop_is_shutting_down(loop)) {
        *err = EDDY_ESHUTDOWN;
        return NULL;
    }
    if (r->opened && r->nqueries == 0 &&
        atomic_load_explicit(&config_gen, memory_order_relaxed) != r->gen) {
        resolver_shutdown(r);
    }
    if (!r->opened && (*err = resolver_open(r, loop)) != 0) {
        return NULL;
    }
    return r;
}

static void lookup_timeout(eddy_timer_t *t, void *arg)
{
    (void)t;
    lookup_t *lk = arg;
    /* Its listener takes it off the query. */
    eddy_promise_fail(lk->p, EDDY_ETIMEDOUT);
}

/* On the loop: answer lk from the cache, or wait for a query. */
static void lookup_start(void *arg)
{
    lookup_t *lk = arg;
    if (eddy_future_is_done(lk->p)) {
        lookup_drop(lk); /* cancelled on the way */
        return;
    }
    int err = 0;
    eddy__resolver_t *r = resolver_get(lk->loop, &err);
    if (r == NULL) {
        eddy_promise_fail(lk->p, err);
        lookup_drop(lk);
        return;
    }
    entry_t *e = lk->no_cache ? NULL : cache_get(r, lk->host, lk->family);
    if (e != NULL) {
        promise_answer(lk->p, e->addrs, e->n, lk->port, e->err);
        lookup_drop(lk);
        return;
    }
    if (lk->timeout_ms >= 0) {
        lk->timer = eddy_loop_schedule(lk->loop, lk->timeout_ms, lookup_timeout, lk);
        if (lk->timer == NULL) {
            eddy_promise_fail(lk->p, EDDY_ENOMEM);
            lookup_drop(lk);
            return;
        }
    }
    err = query_start(r, lk);
    if (err != 0) {
        eddy_promise_fail(lk->p, err);
        lookup_drop(lk);
    }
}

static eddy_future_t *answered(eddy_loop_t *loop, const eddy_addr_t *a, int err)
{
    eddy_promise_t *p = eddy_promise_new(loop);
    if (p != NULL) {
        promise_answer(p, a, 1, a != NULL ? eddy_addr_port(a) : 0, err);
    }
    return p;
}

eddy_future_t *eddy_resolve(eddy_loop_t *loop, const char *host, uint16_t port,
                            const eddy_resolve_options_t *opts)
{
    eddy_resolve_options_t none = {0};
    if (opts == NULL) {
        opts = &none;
    }
    eddy_addr_t a;
    if (host == NULL || host[0] == '\0' || loop == NULL || opts->family > EDDY_RESOLVE_V6) {
        return answered(loop, NULL, EDDY_EINVAL);
    }
    if (eddy_addr_ip(&a, host, port) == 0) {
        bool v6 = a.u.sa.sa_family == AF_INET6;
        bool fits = opts->family == EDDY_RESOLVE_ANY || (opts->family == EDDY_RESOLVE_V6) == v6;
        return answered(loop, &a, fits ? 0 : EDDY_ENOENT);
    }
    size_t len = strlen(host);
    lookup_t *lk = calloc(1, sizeof(*lk) + len + 1);
    eddy_promise_t *p = eddy_promise_new(loop);
    if (lk == NULL || p == NULL) {
        free(lk);
        eddy_future_release(p);
        return NULL;
    }
    /* Names are case-insensitive (RFC 4343): one cache entry and one query for all spellings.
     * A final dot stays: such a name is not searched in resolv.conf's domains. */
    for (size_t i = 0; i < len; i++) {
        lk->host[i] = (char)tolower((unsigned char)host[i]);
    }
    atomic_init(&lk->refcnt, 2);
    lk->state = LOOKUP_PENDING;
    lk->loop = loop;
    eddy__loop_retain(loop); /* the lookup may outlive the loop's free */
    lk->p = eddy_future_retain(p);
    lk->port = port;
    lk->family = opts->family;
    lk->timeout_ms = opts->timeout_ms == 0 ? DEFAULT_TIMEOUT_MS : opts->timeout_ms;
    lk->no_cache = opts->no_cache;
    if (eddy_future_add_listener(p, lookup_completed, lk) != 0) {
        lookup_release(lk); /* the listener's */
        eddy_promise_fail(p, EDDY_ENOMEM);
        lookup_release(lk);
        return p;
    }
    if (eddy_loop_in_event_loop(loop)) {
        lookup_start(lk);
    } else if (eddy_loop_execute(loop, lookup_start, lk) != 0) {
        eddy_promise_fail(p, EDDY_ESHUTDOWN);
        lookup_release(lk); /* the start task's, never to run */
    }
    return p;
}

const eddy_addr_list_t *eddy_resolve_result(const eddy_future_t *f)
{
    return eddy_future_result(f);
}

/* ---------------------------------------------------------------------------------------
 * For the bootstraps
 */

typedef struct bresolve_s {
    eddy__resolved_cb cb;
    void *arg;
} bresolve_t;

static void bootstrap_resolved(eddy_future_t *f, void *arg)
{
    bresolve_t *b = arg;
    const eddy_addr_list_t *l = eddy_resolve_result(f);
    int err = eddy_future_error(f);
    eddy_addr_t *addrs = NULL;
    if (err == 0 && (addrs = malloc(l->count * sizeof(*addrs))) == NULL) {
        err = EDDY_ENOMEM;
    }
    if (err == 0) {
        memcpy(addrs, l->addrs, l->count * sizeof(*addrs));
    }
    b->cb(b->arg, addrs, err == 0 ? l->count : 0, err);
    free(b);
}

int eddy__bootstrap_resolve(eddy_loop_t *loop, const char *host, uint16_t port, bool passive,
                            eddy__resolved_cb cb, void *arg, eddy_future_t **lookup)
{
    if (lookup != NULL) {
        *lookup = NULL;
    }
    eddy_addr_t a;
    if (host == NULL || host[0] == '\0') {
        if (!passive) {
            return EDDY_EINVAL;
        }
        host = "0.0.0.0";
    }
    if (eddy_addr_ip(&a, host, port) == 0) {
        eddy_addr_t *addrs = malloc(sizeof(*addrs));
        if (addrs == NULL) {
            return EDDY_ENOMEM;
        }
        *addrs = a;
        cb(arg, addrs, 1, 0);
        return 0;
    }
    bresolve_t *b = malloc(sizeof(*b));
    eddy_future_t *f = b != NULL ? eddy_resolve(loop, host, port, NULL) : NULL;
    if (f == NULL) {
        free(b);
        return EDDY_ENOMEM;
    }
    b->cb = cb;
    b->arg = arg;
    if (lookup != NULL) {
        *lookup = eddy_future_retain(f);
    }
    if (eddy_future_add_listener(f, bootstrap_resolved, b) != 0) {
        if (lookup != NULL) {
            eddy_future_release(*lookup);
            *lookup = NULL;
        }
        eddy_future_cancel(f);
        eddy_future_release(f);
        free(b);
        return EDDY_ENOMEM;
    }
    eddy_future_release(f);
    return 0;
}
