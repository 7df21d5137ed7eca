/*
 * Channel pool maps (include/eddy/channel_pool.h; Netty's AbstractChannelPoolMap).
 *
 * A chained hash table under one mutex. Clients look their pool up once per acquire, so a hit
 * costs a hash of the key, the lock and a compare, and allocates nothing; only a miss copies
 * the host into a new entry. The factory runs under the lock, which is what makes it run
 * once per key even when several threads miss at the same time: a pool is cheap to make (it
 * connects nothing until its first acquire), so holding the lock across it costs little.
 *
 * close takes every entry out at once and closes their pools; the map lives on, answering
 * gets with NULL, until the last pool's close future completed, then frees itself and
 * completes its own future.
 */
#include <eddy/channel_pool.h>

#include "pipeline/layer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry_s {
    struct entry_s *next; /* in its bucket */
    uint64_t hash;
    char *host; /* the key's, copied */
    uint16_t port;
    bool tls;
    eddy_channel_pool_t *pool;
} entry_t;

struct eddy_channel_pool_map_s {
    pthread_mutex_t lock; /* guards all below but the constants */
    eddy_channel_pool_factory_cb factory;
    void *arg;
    entry_t **buckets;
    size_t mask; /* buckets - 1: a power of two */
    size_t n;
    bool closing;
    size_t closing_left;  /* pools whose close has not completed, plus close()'s own hold */
    eddy_promise_t *done; /* close's future */
};

/* Eight buckets to start: most clients talk to a handful of hosts. */
enum { FIRST_BUCKETS = 8 };

static const char *host_of(const eddy_channel_pool_key_t *key)
{
    return key->host != NULL ? key->host : "";
}

/* FNV-1a over the host, the port and the TLS flag. */
static uint64_t key_hash(const eddy_channel_pool_key_t *key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *s = (const unsigned char *)host_of(key); *s != '\0'; s++) {
        h = (h ^ *s) * 0x100000001b3ull;
    }
    h = (h ^ (key->port & 0xff)) * 0x100000001b3ull;
    h = (h ^ (key->port >> 8)) * 0x100000001b3ull;
    return (h ^ (key->tls ? 1u : 2u)) * 0x100000001b3ull;
}

eddy_channel_pool_map_t *eddy_channel_pool_map_new(eddy_channel_pool_factory_cb factory, void *arg)
{
    assert(factory != NULL);
    eddy_channel_pool_map_t *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return NULL;
    }
    m->buckets = calloc(FIRST_BUCKETS, sizeof(*m->buckets));
    if (m->buckets == NULL || pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m->buckets);
        free(m);
        return NULL;
    }
    m->mask = FIRST_BUCKETS - 1;
    m->factory = factory;
    m->arg = arg;
    return m;
}

/* The link that points at key's entry (or at the NULL ending its bucket). Under the lock. */
static entry_t **find(eddy_channel_pool_map_t *m, const eddy_channel_pool_key_t *key, uint64_t h)
{
    assert(((m->mask + 1) & m->mask) == 0); /* a power of two buckets */
    entry_t **link = &m->buckets[h & m->mask];
    for (; *link != NULL; link = &(*link)->next) {
        entry_t *e = *link;
        assert((e->hash & m->mask) == (h & m->mask)); /* every entry in its own bucket */
        if (e->hash == h && e->port == key->port && e->tls == key->tls &&
            strcmp(e->host, host_of(key)) == 0) {
            break;
        }
    }
    return link;
}

/* Twice the buckets once there are more entries than buckets. Under the lock; without memory
 * the chains just grow longer. */
static void grow(eddy_channel_pool_map_t *m)
{
    if (m->n <= m->mask + 1) {
        return;
    }
    size_t mask = m->mask * 2 + 1;
    entry_t **buckets = calloc(mask + 1, sizeof(*buckets));
    if (buckets == NULL) {
        return;
    }
    for (size_t i = 0; i <= m->mask; i++) {
        for (entry_t *e = m->buckets[i], *next; e != NULL; e = next) {
            next = e->next;
            e->next = buckets[e->hash & mask];
            buckets[e->hash & mask] = e;
        }
    }
    free(m->buckets);
    m->buckets = buckets;
    m->mask = mask;
}

eddy_channel_pool_t *eddy_channel_pool_map_get(eddy_channel_pool_map_t *m,
                                               const eddy_channel_pool_key_t *key)
{
    assert(key != NULL);
    uint64_t h = key_hash(key);
    pthread_mutex_lock(&m->lock);
    if (m->closing) {
        pthread_mutex_unlock(&m->lock);
        return NULL;
    }
    entry_t **link = find(m, key, h);
    if (*link != NULL) {
        eddy_channel_pool_t *pool = (*link)->pool;
        pthread_mutex_unlock(&m->lock);
        return pool;
    }
    entry_t *e = malloc(sizeof(*e));
    char *host = strdup(host_of(key));
    eddy_channel_pool_t *pool = e != NULL && host != NULL ? m->factory(key, m->arg) : NULL;
    if (pool == NULL) {
        pthread_mutex_unlock(&m->lock);
        free(host);
        free(e);
        return NULL;
    }
    *e = (entry_t){.hash = h, .host = host, .port = key->port, .tls = key->tls, .pool = pool};
    *link = e;
    m->n++;
    grow(m);
    pthread_mutex_unlock(&m->lock);
    return pool;
}

bool eddy_channel_pool_map_contains(eddy_channel_pool_map_t *m, const eddy_channel_pool_key_t *key)
{
    uint64_t h = key_hash(key);
    pthread_mutex_lock(&m->lock);
    bool found = *find(m, key, h) != NULL;
    pthread_mutex_unlock(&m->lock);
    return found;
}

size_t eddy_channel_pool_map_size(eddy_channel_pool_map_t *m)
{
    pthread_mutex_lock(&m->lock);
    size_t n = m->n;
    pthread_mutex_unlock(&m->lock);
    return n;
}

static void entry_free(entry_t *e)
{
    free(e->host);
    free(e);
}

eddy_future_t *eddy_channel_pool_map_remove(eddy_channel_pool_map_t *m,
                                            const eddy_channel_pool_key_t *key)
{
    uint64_t h = key_hash(key);
    pthread_mutex_lock(&m->lock);
    entry_t **link = find(m, key, h);
    entry_t *e = *link;
    if (e != NULL) {
        assert(m->n > 0 && e->pool != NULL);
        *link = e->next;
        m->n--;
    }
    pthread_mutex_unlock(&m->lock);
    if (e == NULL) {
        return NULL;
    }
    /* Closed outside the lock: closing idle channels may run their listeners here. */
    eddy_channel_pool_t *pool = e->pool;
    entry_free(e);
    return eddy_channel_pool_close(pool);
}

/* One more pool closed (or close()'s own hold dropped): the last frees the map. */
static void close_one_done(eddy_channel_pool_map_t *m)
{
    pthread_mutex_lock(&m->lock);
    assert(m->closing && m->closing_left > 0);
    bool last = --m->closing_left == 0;
    pthread_mutex_unlock(&m->lock);
    if (!last) {
        return;
    }
    eddy_promise_t *done = m->done;
    pthread_mutex_destroy(&m->lock);
    free(m->buckets);
    free(m);
    if (done != NULL) {
        eddy_promise_succeed(done, NULL);
        eddy_future_release(done);
    }
}

static void pool_closed(eddy_future_t *f, void *arg)
{
    (void)f;
    close_one_done(arg);
}

eddy_future_t *eddy_channel_pool_map_close(eddy_channel_pool_map_t *m)
{
    eddy_promise_t *done = eddy_promise_new(NULL);
    pthread_mutex_lock(&m->lock);
    assert(!m->closing);
    m->closing = true;
    m->done = eddy_future_retain(done); /* NULL without memory */
    /* Every entry, and a hold of our own so that the map outlives this loop. */
    m->closing_left = m->n + 1;
    entry_t *all = NULL;
    for (size_t i = 0; i <= m->mask; i++) {
        for (entry_t *e = m->buckets[i], *next; e != NULL; e = next) {
            next = e->next;
            e->next = all;
            all = e;
        }
        m->buckets[i] = NULL;
    }
    m->n = 0;
    pthread_mutex_unlock(&m->lock);
    for (entry_t *e = all, *next; e != NULL; e = next) {
        next = e->next;
        eddy_future_t *f = eddy_channel_pool_close(e->pool);
        entry_free(e);
        /* Without memory for the future or its listener the pool still closes, but we cannot
         * hear when: count it as closed now rather than never free the map. */
        if (f == NULL || eddy_future_add_listener(f, pool_closed, m) != 0) {
            close_one_done(m);
        }
        eddy_future_release(f);
    }
    close_one_done(m);
    return done;
}
