/*
 * buffer/internal.h: what the files of buffer/ share and nothing outside it needs, except the
 * tests, which may look inside.
 */
#ifndef EDDY_BUFFER_INTERNAL_H
#define EDDY_BUFFER_INTERNAL_H

#include <eddy/buffer.h>

#include "buffer/layer.h"

#include <pthread.h>
#include <stdatomic.h>

/* Flags of eddy_buf_t._flags. */
enum {
    EDDY__BUF_VIEW = 1u << 0,      /* a plain view: shares its _parent's count */
    EDDY__BUF_RETAINED = 1u << 1,  /* a retained view: own count, holds a ref on _parent */
    EDDY__BUF_RETIRED = 1u << 2,   /* not a buffer: a block a grown root keeps for its views */
    EDDY__BUF_FREED = 1u << 3      /* paranoid quarantine: released, kept to catch misuse */
};

/* Keeps a slow path out of its caller, so the fast path saves and restores fewer registers. */
#if defined(__GNUC__) || defined(__clang__)
#define EDDY__NOINLINE __attribute__((noinline))
#else
#define EDDY__NOINLINE
#endif

/* The size class of a block that is not from a pool (unpooled, or too large to pool). */
#define EDDY__CLASS_NONE UINT32_MAX

typedef struct eddy__tls_s eddy__tls_t;
typedef struct eddy__tcache_s eddy__tcache_t;

/*
 * An allocator kind. Blocks are raw memory; the buffer headers are recycled by buf.c. alloc
 * and free receive the calling thread's state so the hot path reads thread-local storage once.
 */
typedef struct eddy__alloc_ops_s {
    const char *name;
    /* A block of at least size bytes (size > 0): *mem, its usable size and class. */
    int (*alloc)(eddy_allocator_t *a, eddy__tls_t *t, size_t size, void **mem, size_t *usable,
                 uint32_t *cls);
    void (*free)(eddy_allocator_t *a, eddy__tls_t *t, void *mem, size_t usable, uint32_t cls);
    size_t (*trim)(eddy_allocator_t *a, eddy__tls_t *t);
    void (*metrics)(eddy_allocator_t *a, eddy_allocator_metrics_t *m);
    void (*foreach_cache)(eddy_allocator_t *a, void (*cb)(const eddy_cache_metrics_t *, void *),
                          void *arg);
    int (*destroy)(eddy_allocator_t *a);
} eddy__alloc_ops_t;

struct eddy_allocator_s {
    const eddy__alloc_ops_t *ops;
    bool global; /* process-wide: never freed */
    /* Not global: live roots of capacity 0 that hold no block of it yet (they grow from it,
     * so eddy_allocator_free() is busy while any lives). */
    _Atomic size_t memless;
};

/*
 * Per-thread state of the buffer module: recycled buffer headers, this thread's share of the
 * live-buffer count, and its pool caches. Created at a thread's first buffer operation and
 * torn down when the thread exits (caches flushed back to their arenas).
 */
struct eddy__tls_s {
    eddy_buf_t *hdr_free;   /* recycled headers, linked through _next_view */
    uint32_t hdr_count;     /* on hdr_free */
    eddy_buf_t *hdr_spare;  /* NULL or a full batch of recycled headers (buf.c) */
    _Atomic int64_t live;   /* buffers allocated minus freed by this thread; owner writes */
    eddy__tcache_t *caches; /* this thread's caches, one per pool it used */
    eddy__tcache_t *last;   /* the cache used last: the fast path */
    eddy__tls_t *prev, *next; /* the registry of live threads */
};

/* The calling thread's state, created on first use; NULL only when out of memory. */
eddy__tls_t *eddy__tls_slow(void);
extern _Thread_local eddy__tls_t *eddy__tls_current;

static inline eddy__tls_t *eddy__tls(void)
{
    eddy__tls_t *t = eddy__tls_current;
    return t ? t : eddy__tls_slow();
}

/*
 * The registry lock guards the list of live threads, the caches registered with each pool,
 * and allocator teardown. Order: registry lock, then an arena lock; never the reverse.
 */
void eddy__registry_lock(void);
void eddy__registry_unlock(void);

/* Called from the thread-exit destructor: flush and free the thread's caches (pool.c), free
 * its recycled headers (buf.c). */
void eddy__pool_thread_exit(eddy__tls_t *t);
void eddy__hdr_thread_exit(eddy__tls_t *t);

/* eddy__buffer_shutdown()'s parts: free the depot of recycled headers (buf.c) and the
 * quarantine of released buffers (leak.c). */
void eddy__hdr_shutdown(void);
void eddy__leak_shutdown(void);

/*
 * eddy_allocator_default() without its pthread_once once it has run. The acquire load pairs
 * with the release store that publishes the allocator in alloc.c's default_init().
 */
extern _Atomic(eddy_allocator_t *) eddy__default_allocator;

static inline eddy_allocator_t *eddy__allocator_default(void)
{
    eddy_allocator_t *a = atomic_load_explicit(&eddy__default_allocator, memory_order_acquire);
    return a != NULL ? a : eddy_allocator_default();
}

/* Allocators (unpooled.c, pool.c). */
extern const eddy__alloc_ops_t eddy__unpooled_ops;
extern const eddy__alloc_ops_t eddy__pool_ops;

/* Leak detection (leak.c). */
extern _Atomic bool eddy__leak_paranoid;
void eddy__leak_track(eddy_buf_t *b);
void eddy__leak_record(eddy_buf_t *b, const char *what);
/* b was released to zero: true when leak.c keeps the header (quarantine), false to recycle. */
bool eddy__leak_untrack(eddy_buf_t *b);
void eddy__leak_misuse(eddy_buf_t *b, const char *what);

#endif /* EDDY_BUFFER_INTERNAL_H */
