/*
 * The allocator interface, the unpooled allocator, and the per-thread state of the buffer
 * module (recycled headers, live counts, pool caches) with its registry; and the buffer
 * module's part of eddy_library_shutdown().
 */
#include "buffer/internal.h"

#include <stdlib.h>
#include <string.h>

/* initial-exec: one instruction to reach the state; eddy is linked, not dlopen()ed late. */
__attribute__((tls_model("initial-exec"))) _Thread_local eddy__tls_t *eddy__tls_current;

static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;
static eddy__tls_t *threads;       /* live threads' state, under the registry lock */
static _Atomic int64_t exited_live; /* live counts of threads that have exited */
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

void eddy__registry_lock(void)
{
    pthread_mutex_lock(&registry);
}

void eddy__registry_unlock(void)
{
    pthread_mutex_unlock(&registry);
}

static void tls_destroy(void *arg)
{
    eddy__tls_t *t = arg;
    eddy__pool_thread_exit(t);
    eddy__registry_lock();
    atomic_fetch_add_explicit(&exited_live, atomic_load_explicit(&t->live, memory_order_relaxed),
                              memory_order_relaxed);
    if (t->prev != NULL) {
        t->prev->next = t->next;
    } else {
        threads = t->next;
    }
    if (t->next != NULL) {
        t->next->prev = t->prev;
    }
    eddy__registry_unlock();
    eddy__hdr_thread_exit(t);
    eddy__tls_current = NULL;
    free(t);
}

static void tls_key_create(void)
{
    pthread_key_create(&tls_key, tls_destroy);
}

eddy__tls_t *eddy__tls_slow(void)
{
    pthread_once(&tls_once, tls_key_create);
    eddy__tls_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return NULL;
    }
    atomic_init(&t->live, 0);
    eddy__registry_lock();
    t->next = threads;
    if (threads != NULL) {
        threads->prev = t;
    }
    threads = t;
    eddy__registry_unlock();
    pthread_setspecific(tls_key, t);
    eddy__tls_current = t;
    return t;
}

int64_t eddy_buf_live_count(void)
{
    eddy__registry_lock();
    int64_t n = atomic_load_explicit(&exited_live, memory_order_relaxed);
    for (eddy__tls_t *t = threads; t != NULL; t = t->next) {
        n += atomic_load_explicit(&t->live, memory_order_relaxed);
    }
    eddy__registry_unlock();
    return n;
}

/* ---------------------------------------------------------------------------------------
 * The unpooled allocator: malloc per block. Its byte count is one shared atomic, fine for
 * an allocator that is not the fast path.
 */

typedef struct unpooled_s {
    eddy_allocator_t super;
    _Atomic size_t used;
} unpooled_t;

static int unpooled_alloc(eddy_allocator_t *a, eddy__tls_t *t, size_t size, void **mem,
                          size_t *usable, uint32_t *cls)
{
    void *p = malloc(size);
    if (p == NULL) {
        return EDDY_ENOMEM;
    }
    atomic_fetch_add_explicit(&((unpooled_t *)a)->used, size, memory_order_relaxed);
    *mem = p;
    *usable = size;
    *cls = EDDY__CLASS_NONE;
    return 0;
}

static void unpooled_free(eddy_allocator_t *a, eddy__tls_t *t, void *mem, size_t usable,
                          uint32_t cls)
{
    atomic_fetch_sub_explicit(&((unpooled_t *)a)->used, usable, memory_order_relaxed);
    free(mem);
}

static size_t unpooled_trim(eddy_allocator_t *a, eddy__tls_t *t)
{
    return 0;
}

static void unpooled_metrics(eddy_allocator_t *a, eddy_allocator_metrics_t *m)
{
    size_t used = atomic_load_explicit(&((unpooled_t *)a)->used, memory_order_relaxed);
    m->used = used;
    m->held = used;
    m->unpooled = used;
}

static void unpooled_foreach_cache(eddy_allocator_t *a,
                                   void (*cb)(const eddy_cache_metrics_t *, void *), void *arg)
{
}

static int unpooled_destroy(eddy_allocator_t *a)
{
    return EDDY_EINVAL;
}

const eddy__alloc_ops_t eddy__unpooled_ops = {
    .name = "unpooled",
    .alloc = unpooled_alloc,
    .free = unpooled_free,
    .trim = unpooled_trim,
    .metrics = unpooled_metrics,
    .foreach_cache = unpooled_foreach_cache,
    .destroy = unpooled_destroy,
};

static unpooled_t unpooled = {.super = {.ops = &eddy__unpooled_ops, .global = true}};

/* ---------------------------------------------------------------------------------------
 * The front functions
 */

_Atomic(eddy_allocator_t *) eddy__default_allocator;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void)
{
    eddy_allocator_t *a = &unpooled.super;
    const char *kind = getenv("EDDY_ALLOCATOR");
    if (kind == NULL || strcmp(kind, "unpooled") != 0) {
        eddy_allocator_t *pooled = eddy_pooled_allocator_new(NULL);
        if (pooled != NULL) { /* out of memory at start: unpooled, still usable */
            pooled->global = true;
            a = pooled;
        }
    }
    /* Pairs with the acquire load in eddy__allocator_default(): a is initialised. */
    atomic_store_explicit(&eddy__default_allocator, a, memory_order_release);
}

eddy_allocator_t *eddy_allocator_default(void)
{
    /* Pairs with the release store in default_init(). */
    eddy_allocator_t *a = atomic_load_explicit(&eddy__default_allocator, memory_order_acquire);
    if (a == NULL) {
        pthread_once(&default_once, default_init);
        a = atomic_load_explicit(&eddy__default_allocator, memory_order_acquire);
    }
    return a;
}

eddy_allocator_t *eddy_allocator_unpooled(void)
{
    return &unpooled.super;
}

int eddy_allocator_free(eddy_allocator_t *a)
{
    if (a == NULL) {
        return 0;
    }
    if (a->global) {
        return EDDY_EINVAL;
    }
    if (atomic_load_explicit(&a->memless, memory_order_relaxed) != 0) {
        return EDDY_EBUSY;
    }
    return a->ops->destroy(a);
}

const char *eddy_allocator_name(const eddy_allocator_t *a)
{
    return a->ops->name;
}

size_t eddy_allocator_trim(eddy_allocator_t *a)
{
    return a->ops->trim(a, eddy__tls());
}

void eddy_allocator_metrics(eddy_allocator_t *a, eddy_allocator_metrics_t *m)
{
    memset(m, 0, sizeof(*m));
    a->ops->metrics(a, m);
}

void eddy_allocator_foreach_cache(eddy_allocator_t *a,
                                  void (*cb)(const eddy_cache_metrics_t *m, void *arg), void *arg)
{
    a->ops->foreach_cache(a, cb, arg);
}

/* ---------------------------------------------------------------------------------------
 * Shutdown
 */

int eddy__buffer_shutdown(void)
{
    if (eddy_buf_live_count() != 0) {
        return EDDY_EBUSY;
    }
    /* Pairs with the release store in default_init(). */
    eddy_allocator_t *a = atomic_load_explicit(&eddy__default_allocator, memory_order_acquire);
    if (a != NULL && a != &unpooled.super) {
        int err = a->ops->destroy(a); /* EDDY_EBUSY, nothing freed, while a block is out */
        if (err != 0) {
            return err;
        }
        /* Nothing may allocate after this; what does anyway gets malloc's memory, not freed
         * memory, and a second shutdown finds no pool. Pairs with the acquire loads. */
        atomic_store_explicit(&eddy__default_allocator, &unpooled.super, memory_order_release);
    }
    /* The calling thread's state, as if it exited (its pool caches are orphans by now);
     * other threads' states go when they exit. */
    eddy__tls_t *t = eddy__tls_current;
    if (t != NULL) {
        pthread_setspecific(tls_key, NULL); /* so its destructor does not run again */
        tls_destroy(t);
    }
    eddy__hdr_shutdown();
    eddy__leak_shutdown();
    return 0;
}
