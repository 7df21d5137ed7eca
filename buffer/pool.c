/*
 * The pooled allocator, after Netty's PoolArena and jemalloc.
 *
 * Sizes round up to size classes: 16-byte steps to 128 bytes, then four classes per doubling
 * (25% spacing at most). Memory comes in chunks (4 MiB by default, aligned to their size so a
 * block finds its chunk by masking its address). A chunk is cut into 8 KiB pages: classes of
 * 32 KiB and more take runs of whole pages; smaller classes take elements of a subpage, a run
 * of pages cut into equal elements with a bitmap. Requests above half a chunk are unpooled.
 *
 * Several arenas, each behind its own mutex, hold the chunks; a thread binds to the arena with
 * the fewest threads. Each thread keeps a cache per size class, a stack of free blocks filled
 * and emptied in batches under one lock, so most allocations and releases touch no lock and
 * no shared cache line. A block released on another thread joins that thread's cache (blocks
 * are interchangeable), and goes back to its own arena when that cache flushes. Caches sweep
 * blocks they have not needed for a while back to the arenas, and arenas free chunks that
 * become empty beyond one spare, so the memory held follows the memory used.
 */
#include "buffer/internal.h"

#include <assert.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define EDDY_POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EDDY_POOL_ASAN 1
#endif
#endif
#ifdef EDDY_POOL_ASAN
#include <sanitizer/asan_interface.h>
/* Blocks resting in a cache or an arena are poisoned, so a use after release is caught even
 * though the memory stays with the pool. */
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define PAGE_SHIFT 13
#define PAGE_SIZE ((size_t)1 << PAGE_SHIFT)
#define DEFAULT_CHUNK ((size_t)4 << 20)
#define MIN_CHUNK ((size_t)64 << 10)
#define MAX_CHUNK ((size_t)1 << 30)
#define DEFAULT_CACHE_BYTES ((size_t)256 << 10)
#define MAX_CLASSES 128
/* Classes of at least this size are runs of whole pages (they are page multiples). */
#define RUN_MIN ((size_t)32 << 10)
#define SUBPAGE_MAX_ELEMS 512
/* A thread cache holds at most this many blocks per class, and at least MIN_CACHED for the
 * classes under RUN_MIN (small buffers are the common case). */
#define MAX_CACHED 512
#define MIN_CACHED 8
/* Sweep a cache after this many allocations from it: Netty's freeSweepAllocationThreshold
 * is 8192; ours frees half the blocks a class did not need since the last sweep. */
#define SWEEP_INTERVAL 4096

typedef struct chunk_s chunk_t;
typedef struct subpage_s subpage_t;
typedef struct arena_s arena_t;
typedef struct pool_s pool_t;

struct subpage_s {
    chunk_t *chunk;
    uint8_t *base;
    uint32_t elem_size;
    uint32_t nelems;
    uint32_t nfree;
    uint32_t cls;
    uint32_t run_page;
    uint32_t run_pages;
    subpage_t *prev, *next; /* the arena's list of subpages with free elements */
    uint64_t used[SUBPAGE_MAX_ELEMS / 64];
};

/* Lives at the start of its own memory; the pages it covers are never handed out. */
struct chunk_s {
    arena_t *arena;
    chunk_t *prev, *next;
    uint32_t npages;
    uint32_t free_pages;
    uint32_t meta_pages;
    uint64_t *page_used; /* bitmap, 1 = in use */
    uint32_t *run_len;   /* at a run's first page: its length in pages */
    subpage_t **sub;     /* per page: the subpage the page belongs to, or NULL */
};

/*
 * Blocks that full thread caches gave back, kept as they are for the next refill (a transfer
 * cache, as in tcmalloc): where one thread allocates and another releases, blocks go from the
 * releasing cache to the allocating one by the batch, without a bitmap, subpage or page run
 * being touched (mixed_xthread: 328 M instructions down to 200 M, callgrind, 200k operations).
 * Stashed blocks count as free in the arena's figures. At most STASH_BATCHES flushes' worth
 * per class; sweeps give back half of what a stash did not need, like the caches' own.
 */
#define STASH_BATCHES 2

typedef struct stash_s {
    void **slots;
    uint32_t n;
    uint32_t cap;
    uint32_t low; /* the fewest blocks held since the last sweep */
} stash_t;

struct arena_s {
    alignas(128) pthread_mutex_t lock;
    pool_t *pool;
    chunk_t *chunks;
    size_t nempty; /* chunks with every page free, kept as spares */
    subpage_t *partial[MAX_CLASSES];
    stash_t *stash; /* per cached class */
    /* Written under the lock, read by metrics without it. */
    _Atomic size_t held;
    _Atomic size_t allocated;
    _Atomic size_t nchunks;
    _Atomic uint64_t allocs;
    _Atomic uint64_t frees;
    _Atomic size_t ncaches;
};

typedef struct bin_s {
    void **slots;
    uint32_t n;
    uint32_t cap;
    uint32_t low; /* the fewest blocks held since the last sweep */
} bin_t;

struct eddy__tcache_s {
    _Atomic(pool_t *) pool; /* NULL once the pool is gone */
    arena_t *arena;
    eddy__tcache_t *tl_next;         /* the owning thread's list */
    eddy__tcache_t *prev, *next;     /* the pool's list, under the registry lock */
    _Atomic size_t cached;
    _Atomic uint64_t allocs; /* from the cache, misses included; sweeps go by it */
    _Atomic uint64_t misses;
    bin_t bins[];
};

struct pool_s {
    eddy_allocator_t super;
    size_t chunk_size;
    size_t max_pooled; /* the largest class */
    uint32_t nclasses;
    uint32_t ncached;  /* classes 0 .. ncached-1 have thread caches */
    bool no_cache;
    uint32_t class_size[MAX_CLASSES];
    uint32_t run_pages[MAX_CLASSES]; /* subpage classes: pages per run */
    uint32_t cache_cap[MAX_CLASSES];
    eddy__tcache_t *caches; /* under the registry lock */
    _Atomic size_t huge;    /* bytes of unpooled blocks alive */
    size_t narenas;
    arena_t *arenas;
};

static inline void relaxed_add(_Atomic size_t *v, size_t d)
{
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

static inline void relaxed_sub(_Atomic size_t *v, size_t d)
{
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) - d,
                          memory_order_relaxed);
}

static inline void relaxed_inc64(_Atomic uint64_t *v)
{
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* ---------------------------------------------------------------------------------------
 * Size classes
 */

static inline uint32_t size_class(size_t size)
{
    if (size <= 128) {
        return size == 0 ? 0 : (uint32_t)((size + 15) >> 4) - 1;
    }
    /* 2^k < size <= 2^(k+1), four classes 2^(k-2) apart in that group. */
    unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)(size - 1));
    uint32_t i = (uint32_t)((size - ((size_t)1 << k) - 1) >> (k - 2));
    return 8 + (k - 7) * 4 + i;
}

static size_t class_bytes(uint32_t cls)
{
    if (cls < 8) {
        return (size_t)(cls + 1) * 16;
    }
    unsigned k = 7 + (cls - 8) / 4;
    size_t i = (cls - 8) % 4 + 1;
    return ((size_t)1 << k) + i * ((size_t)1 << (k - 2));
}

/* Pages per subpage run for an element size: the fewest pages (up to 16) wasting at most
 * 1/16 of the run, else the least wasteful. */
static uint32_t subpage_run_pages(size_t elem)
{
    uint32_t best = 1;
    size_t best_permille = SIZE_MAX;
    for (uint32_t p = 1; p <= 16; p++) {
        size_t run = p * PAGE_SIZE;
        size_t n = run / elem;
        if (n == 0) {
            continue;
        }
        if (n > SUBPAGE_MAX_ELEMS) {
            n = SUBPAGE_MAX_ELEMS;
        }
        size_t waste = run - n * elem;
        if (waste * 16 <= run) {
            return p;
        }
        if (waste * 1000 / run < best_permille) {
            best = p;
            best_permille = waste * 1000 / run;
        }
    }
    return best;
}

/* ---------------------------------------------------------------------------------------
 * Chunks (arena lock held)
 */

static chunk_t *chunk_new(arena_t *ar)
{
    pool_t *p = ar->pool;
    void *mem = NULL;
    if (posix_memalign(&mem, p->chunk_size, p->chunk_size) != 0) {
        return NULL;
    }
    chunk_t *c = mem;
    uint32_t npages = (uint32_t)(p->chunk_size >> PAGE_SHIFT);
    size_t words = (npages + 63) / 64;
    size_t meta = sizeof(*c) + words * sizeof(uint64_t) + npages * sizeof(uint32_t) +
                  npages * sizeof(subpage_t *) + 16;
    c->arena = ar;
    c->npages = npages;
    c->meta_pages = (uint32_t)((meta + PAGE_SIZE - 1) >> PAGE_SHIFT);
    assert(c->meta_pages < npages); /* the bookkeeping leaves pages to hand out */
    c->free_pages = npages - c->meta_pages;
    uint8_t *q = (uint8_t *)(c + 1);
    q = (uint8_t *)(((uintptr_t)q + 7) & ~(uintptr_t)7);
    c->page_used = (uint64_t *)(void *)q;
    q += words * sizeof(uint64_t);
    c->sub = (subpage_t **)(void *)q;
    q += npages * sizeof(subpage_t *);
    c->run_len = (uint32_t *)(void *)q;
    memset(c->page_used, 0, words * sizeof(uint64_t));
    memset(c->sub, 0, npages * sizeof(subpage_t *));
    memset(c->run_len, 0, npages * sizeof(uint32_t));
    for (uint32_t i = 0; i < c->meta_pages; i++) {
        c->page_used[i / 64] |= (uint64_t)1 << (i % 64);
    }
    POISON((uint8_t *)mem + ((size_t)c->meta_pages << PAGE_SHIFT),
           p->chunk_size - ((size_t)c->meta_pages << PAGE_SHIFT));
    c->prev = NULL;
    c->next = ar->chunks;
    if (ar->chunks != NULL) {
        ar->chunks->prev = c;
    }
    ar->chunks = c;
    ar->nempty++;
    relaxed_add(&ar->held, p->chunk_size);
    relaxed_add(&ar->nchunks, 1);
    return c;
}

static void chunk_free(arena_t *ar, chunk_t *c)
{
    assert(c->arena == ar && (c->prev != NULL || ar->chunks == c));
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        ar->chunks = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    relaxed_sub(&ar->held, ar->pool->chunk_size);
    relaxed_sub(&ar->nchunks, 1);
    UNPOISON(c, ar->pool->chunk_size);
    free(c);
}

static inline bool page_is_used(const chunk_t *c, uint32_t i)
{
    return (c->page_used[i / 64] >> (i % 64)) & 1;
}

/* First fit: the lowest run of n free pages, or UINT32_MAX. */
static uint32_t find_run(const chunk_t *c, uint32_t n)
{
    assert(n > 0);
    uint32_t i = c->meta_pages;
    while (i + n <= c->npages) {
        uint64_t w = ~c->page_used[i / 64] >> (i % 64); /* free pages from i on */
        if (w == 0) {
            i = (i / 64 + 1) * 64;
            continue;
        }
        i += (uint32_t)__builtin_ctzll(w);
        uint32_t len = 0;
        while (len < n && i + len < c->npages && !page_is_used(c, i + len)) {
            len++;
        }
        if (len == n) {
            return i;
        }
        i += len;
    }
    return UINT32_MAX;
}

static void mark_pages(chunk_t *c, uint32_t first, uint32_t n, bool used)
{
    assert(first >= c->meta_pages && n <= c->npages - first);
    for (uint32_t i = first; i < first + n; i++) {
        assert(page_is_used(c, i) != used); /* a page is handed out, or back, once */
        if (used) {
            c->page_used[i / 64] |= (uint64_t)1 << (i % 64);
        } else {
            c->page_used[i / 64] &= ~((uint64_t)1 << (i % 64));
        }
    }
}

static inline bool chunk_is_empty(const chunk_t *c)
{
    return c->free_pages == c->npages - c->meta_pages;
}

/* A run of n pages from any chunk of the arena, or a new chunk. Returns its first byte. */
static uint8_t *run_alloc(arena_t *ar, uint32_t n, chunk_t **chunk_out, uint32_t *page_out)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        for (chunk_t *c = ar->chunks; c != NULL; c = c->next) {
            if (c->free_pages < n) {
                continue;
            }
            uint32_t page = find_run(c, n);
            if (page == UINT32_MAX) {
                continue;
            }
            if (chunk_is_empty(c)) {
                ar->nempty--;
            }
            mark_pages(c, page, n, true);
            c->free_pages -= n;
            c->run_len[page] = n;
            *chunk_out = c;
            *page_out = page;
            return (uint8_t *)c + ((size_t)page << PAGE_SHIFT);
        }
        if (attempt == 0 && chunk_new(ar) == NULL) {
            return NULL;
        }
    }
    return NULL;
}

static void run_free(arena_t *ar, chunk_t *c, uint32_t page)
{
    uint32_t n = c->run_len[page];
    assert(n > 0 && c->free_pages + n <= c->npages - c->meta_pages); /* page starts a run */
    c->run_len[page] = 0;
    mark_pages(c, page, n, false);
    c->free_pages += n;
    if (chunk_is_empty(c)) {
        /* One empty chunk stays as a spare, so a buffer that comes and goes does not cost
         * an mmap and munmap each time; more than one goes back to the system. */
        if (ar->nempty >= 1) {
            chunk_free(ar, c);
        } else {
            ar->nempty++;
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * Arena allocation and release of single blocks (arena lock held)
 */

static void partial_push(arena_t *ar, subpage_t *s)
{
    assert(s->nfree > 0 && ar->partial[s->cls] != s);
    s->prev = NULL;
    s->next = ar->partial[s->cls];
    if (s->next != NULL) {
        s->next->prev = s;
    }
    ar->partial[s->cls] = s;
}

static void partial_remove(arena_t *ar, subpage_t *s)
{
    assert(s->prev != NULL ? s->prev->next == s : ar->partial[s->cls] == s);
    if (s->prev != NULL) {
        s->prev->next = s->next;
    } else {
        ar->partial[s->cls] = s->next;
    }
    if (s->next != NULL) {
        s->next->prev = s->prev;
    }
    s->prev = s->next = NULL;
}

static subpage_t *subpage_new(arena_t *ar, uint32_t cls)
{
    pool_t *p = ar->pool;
    subpage_t *s = malloc(sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    chunk_t *c;
    uint32_t page;
    uint8_t *base = run_alloc(ar, p->run_pages[cls], &c, &page);
    if (base == NULL) {
        free(s);
        return NULL;
    }
    s->chunk = c;
    s->base = base;
    s->elem_size = p->class_size[cls];
    s->cls = cls;
    s->run_page = page;
    s->run_pages = p->run_pages[cls];
    size_t n = ((size_t)s->run_pages << PAGE_SHIFT) / s->elem_size;
    s->nelems = (uint32_t)(n > SUBPAGE_MAX_ELEMS ? SUBPAGE_MAX_ELEMS : n);
    assert(s->nelems > 0);
    s->nfree = s->nelems;
    memset(s->used, 0, sizeof(s->used));
    for (uint32_t i = 0; i < s->run_pages; i++) {
        c->sub[page + i] = s;
    }
    partial_push(ar, s);
    return s;
}

static void subpage_free(arena_t *ar, subpage_t *s)
{
    assert(s->nfree == s->nelems); /* only an empty subpage goes back to pages */
    partial_remove(ar, s);
    for (uint32_t i = 0; i < s->run_pages; i++) {
        s->chunk->sub[s->run_page + i] = NULL;
    }
    run_free(ar, s->chunk, s->run_page);
    free(s);
}

static void *arena_alloc_one(arena_t *ar, uint32_t cls)
{
    pool_t *p = ar->pool;
    assert(cls < p->nclasses);
    size_t size = p->class_size[cls];
    void *mem;
    if (size >= RUN_MIN) {
        chunk_t *c;
        uint32_t page;
        mem = run_alloc(ar, (uint32_t)(size >> PAGE_SHIFT), &c, &page);
        if (mem == NULL) {
            return NULL;
        }
    } else {
        subpage_t *s = ar->partial[cls];
        if (s == NULL && (s = subpage_new(ar, cls)) == NULL) {
            return NULL;
        }
        assert(s->cls == cls && s->nfree > 0);
        uint32_t w = 0;
        while (s->used[w] == UINT64_MAX) {
            w++;
        }
        uint32_t bit = (uint32_t)__builtin_ctzll(~s->used[w]);
        assert(w * 64 + bit < s->nelems);
        s->used[w] |= (uint64_t)1 << bit;
        if (--s->nfree == 0) {
            partial_remove(ar, s);
        }
        mem = s->base + (size_t)(w * 64 + bit) * s->elem_size;
    }
    relaxed_add(&ar->allocated, size);
    relaxed_inc64(&ar->allocs);
    return mem;
}

/* Mark a block free in its subpage or page run; arena_free_one() without the counts. */
static void block_put(arena_t *ar, void *mem, uint32_t cls)
{
    pool_t *p = ar->pool;
    chunk_t *c = (chunk_t *)((uintptr_t)mem & ~(uintptr_t)(p->chunk_size - 1));
    uint32_t page = (uint32_t)(((uint8_t *)mem - (uint8_t *)c) >> PAGE_SHIFT);
    size_t size = p->class_size[cls];
    assert(c->arena == ar);
    POISON(mem, size);
    subpage_t *s = c->sub[page];
    if (s == NULL) {
        assert(c->run_len[page] == size >> PAGE_SHIFT); /* mem starts a run of its class */
        run_free(ar, c, page);
    } else {
        uint32_t i = (uint32_t)(((uint8_t *)mem - s->base) / s->elem_size);
        assert(s->cls == cls && i < s->nelems && (s->used[i / 64] >> (i % 64) & 1));
        s->used[i / 64] &= ~((uint64_t)1 << (i % 64));
        if (++s->nfree == 1) {
            partial_push(ar, s);
        }
        /* An empty subpage goes back to pages unless it is its class's last one. */
        if (s->nfree == s->nelems && (s->prev != NULL || s->next != NULL)) {
            subpage_free(ar, s);
        }
    }
}

static void arena_free_one(arena_t *ar, void *mem, uint32_t cls)
{
    block_put(ar, mem, cls);
    relaxed_sub(&ar->allocated, ar->pool->class_size[cls]);
    relaxed_inc64(&ar->frees);
}

static inline arena_t *arena_of(pool_t *p, void *mem)
{
    return ((chunk_t *)((uintptr_t)mem & ~(uintptr_t)(p->chunk_size - 1)))->arena;
}

/* Give the oldest n stashed blocks of a class back to their pages (arena lock held). */
static void stash_drain(arena_t *ar, uint32_t cls, uint32_t n)
{
    stash_t *st = &ar->stash[cls];
    assert(n <= st->n);
    for (uint32_t i = 0; i < n; i++) {
        block_put(ar, st->slots[i], cls); /* counted free when it was stashed */
    }
    memmove(st->slots, st->slots + n, (st->n - n) * sizeof(void *));
    st->n -= n;
    if (st->low > st->n) {
        st->low = st->n;
    }
}

/* ---------------------------------------------------------------------------------------
 * Thread caches
 */

/* Give the oldest n blocks of a bin back to their arenas, one lock per run of blocks from
 * the same arena: to the arenas' stashes while they have room if stash is true (a full bin:
 * the blocks are likely wanted again soon), else to their pages. */
static void bin_flush(pool_t *p, eddy__tcache_t *tc, uint32_t cls, uint32_t n, bool stash)
{
    bin_t *bin = &tc->bins[cls];
    assert(cls < p->ncached && bin->n <= bin->cap);
    if (n > bin->n) {
        n = bin->n;
    }
    arena_t *locked = NULL;
    for (uint32_t i = 0; i < n; i++) {
        arena_t *ar = arena_of(p, bin->slots[i]);
        if (ar != locked) {
            if (locked != NULL) {
                pthread_mutex_unlock(&locked->lock);
            }
            pthread_mutex_lock(&ar->lock);
            locked = ar;
        }
        stash_t *st = &ar->stash[cls];
        if (stash && st->n < st->cap) {
            st->slots[st->n++] = bin->slots[i];
            relaxed_sub(&ar->allocated, p->class_size[cls]);
            relaxed_inc64(&ar->frees);
        } else {
            arena_free_one(ar, bin->slots[i], cls);
        }
    }
    if (locked != NULL) {
        pthread_mutex_unlock(&locked->lock);
    }
    memmove(bin->slots, bin->slots + n, (bin->n - n) * sizeof(void *));
    bin->n -= n;
    if (bin->low > bin->n) {
        bin->low = bin->n;
    }
    relaxed_sub(&tc->cached, (size_t)n * p->class_size[cls]);
}

static void cache_flush_all(pool_t *p, eddy__tcache_t *tc)
{
    for (uint32_t cls = 0; cls < p->ncached; cls++) {
        if (tc->bins[cls].n > 0) {
            bin_flush(p, tc, cls, tc->bins[cls].n, false);
        }
    }
}

/* Free half of what each class has not needed since the last sweep, in the cache and in
 * its arena's stash. */
static void cache_sweep(pool_t *p, eddy__tcache_t *tc)
{
    for (uint32_t cls = 0; cls < p->ncached; cls++) {
        bin_t *bin = &tc->bins[cls];
        if (bin->low > 0) {
            bin_flush(p, tc, cls, (bin->low + 1) / 2, false);
        }
        bin->low = bin->n;
    }
    arena_t *ar = tc->arena;
    pthread_mutex_lock(&ar->lock);
    for (uint32_t cls = 0; cls < p->ncached; cls++) {
        stash_t *st = &ar->stash[cls];
        if (st->low > 0) {
            stash_drain(ar, cls, (st->low + 1) / 2);
        }
        st->low = st->n;
    }
    pthread_mutex_unlock(&ar->lock);
}

/* Fill an empty bin with half its capacity under one lock. */
static void bin_refill(pool_t *p, eddy__tcache_t *tc, uint32_t cls)
{
    bin_t *bin = &tc->bins[cls];
    arena_t *ar = tc->arena;
    uint32_t want = bin->cap / 2 > 0 ? bin->cap / 2 : 1;
    assert(bin->n == 0 && want <= bin->cap);
    pthread_mutex_lock(&ar->lock);
    stash_t *st = &ar->stash[cls];
    uint32_t take = st->n < want - bin->n ? st->n : want - bin->n;
    if (take > 0) {
        st->n -= take;
        memcpy(bin->slots + bin->n, st->slots + st->n, take * sizeof(void *));
        bin->n += take;
        if (st->n < st->low) {
            st->low = st->n;
        }
        relaxed_add(&ar->allocated, (size_t)take * p->class_size[cls]);
        atomic_store_explicit(&ar->allocs,
                              atomic_load_explicit(&ar->allocs, memory_order_relaxed) + take,
                              memory_order_relaxed);
    }
    while (bin->n < want) {
        void *mem = arena_alloc_one(ar, cls);
        if (mem == NULL) {
            break;
        }
        bin->slots[bin->n++] = mem;
    }
    pthread_mutex_unlock(&ar->lock);
    relaxed_add(&tc->cached, (size_t)bin->n * p->class_size[cls]);
    bin->low = 0;
}

static eddy__tcache_t *cache_new(pool_t *p, eddy__tls_t *t)
{
    size_t slots = 0;
    for (uint32_t cls = 0; cls < p->ncached; cls++) {
        slots += p->cache_cap[cls];
    }
    size_t head = sizeof(eddy__tcache_t) + p->ncached * sizeof(bin_t);
    eddy__tcache_t *tc = calloc(1, head + slots * sizeof(void *));
    if (tc == NULL) {
        return NULL;
    }
    void **s = (void **)(void *)((uint8_t *)tc + head);
    for (uint32_t cls = 0; cls < p->ncached; cls++) {
        tc->bins[cls].slots = s;
        tc->bins[cls].cap = p->cache_cap[cls];
        s += p->cache_cap[cls];
    }
    atomic_init(&tc->pool, p);
    eddy__registry_lock();
    arena_t *best = &p->arenas[0];
    for (size_t i = 1; i < p->narenas; i++) {
        if (atomic_load_explicit(&p->arenas[i].ncaches, memory_order_relaxed) <
            atomic_load_explicit(&best->ncaches, memory_order_relaxed)) {
            best = &p->arenas[i];
        }
    }
    tc->arena = best;
    atomic_fetch_add_explicit(&best->ncaches, 1, memory_order_relaxed);
    tc->next = p->caches;
    if (p->caches != NULL) {
        p->caches->prev = tc;
    }
    p->caches = tc;
    eddy__registry_unlock();
    tc->tl_next = t->caches;
    t->caches = tc;
    return tc;
}

/* cache_get() when p's cache is not the last one used: find or make it. Caches of pools that
 * were freed are dropped from the thread's list on the way. */
static EDDY__NOINLINE eddy__tcache_t *cache_find(pool_t *p, eddy__tls_t *t)
{
    eddy__tcache_t *tc;
    eddy__tcache_t **link = &t->caches;
    while ((tc = *link) != NULL) {
        pool_t *owner = atomic_load_explicit(&tc->pool, memory_order_acquire);
        if (owner == p) {
            t->last = tc;
            return tc;
        }
        if (owner == NULL) {
            /* Orphaned by eddy_allocator_free(), which no longer touches it. */
            *link = tc->tl_next;
            if (t->last == tc) {
                t->last = NULL;
            }
            free(tc);
            continue;
        }
        link = &tc->tl_next;
    }
    tc = cache_new(p, t);
    t->last = tc;
    return tc;
}

/* The calling thread's cache for p (NULL when out of memory): usually the last one used. */
static inline eddy__tcache_t *cache_get(pool_t *p, eddy__tls_t *t)
{
    eddy__tcache_t *tc = t->last;
    if (EDDY_LIKELY(tc != NULL && atomic_load_explicit(&tc->pool, memory_order_relaxed) == p)) {
        return tc;
    }
    return cache_find(p, t);
}

/* Unlink a cache from its pool (registry lock held). */
static void cache_unregister(pool_t *p, eddy__tcache_t *tc)
{
    assert(tc->prev != NULL ? tc->prev->next == tc : p->caches == tc);
    if (tc->prev != NULL) {
        tc->prev->next = tc->next;
    } else {
        p->caches = tc->next;
    }
    if (tc->next != NULL) {
        tc->next->prev = tc->prev;
    }
    atomic_fetch_sub_explicit(&tc->arena->ncaches, 1, memory_order_relaxed);
}

void eddy__pool_thread_exit(eddy__tls_t *t)
{
    eddy__registry_lock();
    eddy__tcache_t *tc = t->caches;
    while (tc != NULL) {
        eddy__tcache_t *next = tc->tl_next;
        pool_t *p = atomic_load_explicit(&tc->pool, memory_order_acquire);
        if (p != NULL) {
            cache_flush_all(p, tc);
            cache_unregister(p, tc);
        }
        free(tc);
        tc = next;
    }
    t->caches = NULL;
    t->last = NULL;
    eddy__registry_unlock();
}

/* ---------------------------------------------------------------------------------------
 * The allocator operations
 */

/* Count an allocation from tc's cache: true when it is time to sweep. */
static inline bool count_alloc(eddy__tcache_t *tc)
{
    uint64_t n = atomic_load_explicit(&tc->allocs, memory_order_relaxed) + 1;
    atomic_store_explicit(&tc->allocs, n, memory_order_relaxed);
    return n % SWEEP_INTERVAL == 0;
}

/*
 * pool_alloc() in full, for whatever the fast path in pool_alloc() leaves: a block too large
 * to pool, an uncached class, a cache other than the last one used, an empty bin, a sweep.
 */
static EDDY__NOINLINE int alloc_slow(pool_t *p, eddy__tls_t *t, size_t size, void **mem,
                                     size_t *usable, uint32_t *cls_out)
{
    assert(size > 0 && t != NULL);
    if (size > p->max_pooled) {
        void *m = malloc(size);
        if (m == NULL) {
            return EDDY_ENOMEM;
        }
        atomic_fetch_add_explicit(&p->huge, size, memory_order_relaxed);
        *mem = m;
        *usable = size;
        *cls_out = EDDY__CLASS_NONE;
        return 0;
    }
    uint32_t cls = size_class(size);
    size_t csize = p->class_size[cls];
    assert(cls < p->nclasses && csize >= size);
    void *m = NULL;
    eddy__tcache_t *tc = cls < p->ncached ? cache_get(p, t) : NULL;
    if (tc != NULL) {
        bin_t *bin = &tc->bins[cls];
        if (bin->n == 0) {
            bin_refill(p, tc, cls);
            relaxed_inc64(&tc->misses);
            if (bin->n == 0) {
                return EDDY_ENOMEM;
            }
        }
        m = bin->slots[--bin->n];
        if (bin->n < bin->low) {
            bin->low = bin->n;
        }
        relaxed_sub(&tc->cached, csize);
        if (count_alloc(tc)) {
            cache_sweep(p, tc);
        }
    } else {
        /* Uncached classes (large, or no caches at all) go to an arena under its lock. */
        arena_t *ar = &p->arenas[(uintptr_t)t % p->narenas];
        if (!p->no_cache) {
            eddy__tcache_t *own = cache_get(p, t);
            if (own != NULL) {
                ar = own->arena;
            }
        }
        pthread_mutex_lock(&ar->lock);
        m = arena_alloc_one(ar, cls);
        pthread_mutex_unlock(&ar->lock);
        if (m == NULL) {
            return EDDY_ENOMEM;
        }
    }
    UNPOISON(m, csize);
    *mem = m;
    *usable = csize;
    *cls_out = cls;
    return 0;
}

/*
 * The fast path: a hit in the cache used last, with no sweep due. Everything else goes to
 * alloc_slow() as a tail call, so this path saves few registers. The branch hints here, in
 * pool_free() and in buf.c's fast paths take 3% off mixed_1t's instructions (callgrind).
 */
static int pool_alloc(eddy_allocator_t *a, eddy__tls_t *t, size_t size, void **mem,
                      size_t *usable, uint32_t *cls_out)
{
    pool_t *p = (pool_t *)a;
    eddy__tcache_t *tc = t->last;
    uint32_t cls;
    if (EDDY_LIKELY(size <= p->max_pooled && tc != NULL &&
                    atomic_load_explicit(&tc->pool, memory_order_relaxed) == p &&
                    (cls = size_class(size)) < p->ncached)) {
        uint64_t allocs = atomic_load_explicit(&tc->allocs, memory_order_relaxed) + 1;
        bin_t *bin = &tc->bins[cls];
        if (EDDY_LIKELY(bin->n > 0 && allocs % SWEEP_INTERVAL != 0)) {
            uint32_t n = bin->n - 1;
            void *m = bin->slots[n];
            bin->n = n;
            if (n < bin->low) {
                bin->low = n;
            }
            atomic_store_explicit(&tc->allocs, allocs, memory_order_relaxed);
            size_t csize = p->class_size[cls];
            relaxed_sub(&tc->cached, csize);
            UNPOISON(m, csize);
            *mem = m;
            *usable = csize;
            *cls_out = cls;
            return 0;
        }
    }
    return alloc_slow(p, t, size, mem, usable, cls_out);
}

/* pool_free() in full: an unpooled block, an uncached class, another cache, a full bin. */
static EDDY__NOINLINE void free_slow(pool_t *p, eddy__tls_t *t, void *mem, size_t usable,
                                     uint32_t cls)
{
    if (cls == EDDY__CLASS_NONE) {
        atomic_fetch_sub_explicit(&p->huge, usable, memory_order_relaxed);
        free(mem);
        return;
    }
    eddy__tcache_t *tc = (cls < p->ncached && t != NULL) ? cache_get(p, t) : NULL;
    if (tc != NULL) {
        bin_t *bin = &tc->bins[cls];
        if (bin->n == bin->cap) {
            bin_flush(p, tc, cls, bin->cap / 2 > 0 ? bin->cap / 2 : 1, true);
        }
        assert(bin->n < bin->cap);
        POISON(mem, p->class_size[cls]);
        bin->slots[bin->n++] = mem;
        relaxed_add(&tc->cached, p->class_size[cls]);
        return;
    }
    assert(cls < p->nclasses);
    arena_t *ar = arena_of(p, mem);
    pthread_mutex_lock(&ar->lock);
    arena_free_one(ar, mem, cls);
    pthread_mutex_unlock(&ar->lock);
}

/* The fast path: room in the bin of the cache used last; the rest is free_slow()'s. */
static void pool_free(eddy_allocator_t *a, eddy__tls_t *t, void *mem, size_t usable,
                      uint32_t cls)
{
    pool_t *p = (pool_t *)a;
    eddy__tcache_t *tc;
    /* EDDY__CLASS_NONE is never below ncached. */
    if (EDDY_LIKELY(cls < p->ncached && t != NULL && (tc = t->last) != NULL &&
                    atomic_load_explicit(&tc->pool, memory_order_relaxed) == p)) {
        bin_t *bin = &tc->bins[cls];
        uint32_t n = bin->n;
        if (EDDY_LIKELY(n < bin->cap)) {
            size_t csize = p->class_size[cls];
            POISON(mem, csize);
            bin->slots[n] = mem;
            bin->n = n + 1;
            relaxed_add(&tc->cached, csize);
            return;
        }
    }
    free_slow(p, t, mem, usable, cls);
}

/* Empty the stashes, free every empty subpage and every empty chunk of an arena. */
static size_t arena_trim(arena_t *ar)
{
    pthread_mutex_lock(&ar->lock);
    size_t before = atomic_load_explicit(&ar->held, memory_order_relaxed);
    for (uint32_t cls = 0; cls < ar->pool->ncached; cls++) {
        stash_drain(ar, cls, ar->stash[cls].n);
    }
    for (uint32_t cls = 0; cls < ar->pool->nclasses; cls++) {
        subpage_t *s = ar->partial[cls];
        while (s != NULL) {
            subpage_t *next = s->next;
            if (s->nfree == s->nelems) {
                subpage_free(ar, s);
            }
            s = next;
        }
    }
    chunk_t *c = ar->chunks;
    while (c != NULL) {
        chunk_t *next = c->next;
        if (chunk_is_empty(c)) {
            chunk_free(ar, c);
        }
        c = next;
    }
    ar->nempty = 0;
    size_t freed = before - atomic_load_explicit(&ar->held, memory_order_relaxed);
    pthread_mutex_unlock(&ar->lock);
    return freed;
}

static size_t pool_trim(eddy_allocator_t *a, eddy__tls_t *t)
{
    pool_t *p = (pool_t *)a;
    if (t != NULL && !p->no_cache) {
        for (eddy__tcache_t *tc = t->caches; tc != NULL; tc = tc->tl_next) {
            if (atomic_load_explicit(&tc->pool, memory_order_relaxed) == p) {
                cache_flush_all(p, tc);
            }
        }
    }
    size_t freed = 0;
    for (size_t i = 0; i < p->narenas; i++) {
        freed += arena_trim(&p->arenas[i]);
    }
    return freed;
}

static void pool_metrics(eddy_allocator_t *a, eddy_allocator_metrics_t *m)
{
    pool_t *p = (pool_t *)a;
    size_t allocated = 0;
    m->arenas = p->narenas;
    for (size_t i = 0; i < p->narenas; i++) {
        arena_t *ar = &p->arenas[i];
        size_t held = atomic_load_explicit(&ar->held, memory_order_relaxed);
        size_t alloc = atomic_load_explicit(&ar->allocated, memory_order_relaxed);
        if (i < EDDY_POOL_MAX_ARENAS) {
            eddy_arena_metrics_t *am = &m->arena[i];
            am->held = held;
            am->allocated = alloc;
            am->chunks = atomic_load_explicit(&ar->nchunks, memory_order_relaxed);
            am->caches = atomic_load_explicit(&ar->ncaches, memory_order_relaxed);
            am->allocations = atomic_load_explicit(&ar->allocs, memory_order_relaxed);
            am->deallocations = atomic_load_explicit(&ar->frees, memory_order_relaxed);
        }
        m->held += held;
        allocated += alloc;
    }
    eddy__registry_lock();
    for (eddy__tcache_t *tc = p->caches; tc != NULL; tc = tc->next) {
        m->cached += atomic_load_explicit(&tc->cached, memory_order_relaxed);
        m->caches++;
    }
    eddy__registry_unlock();
    m->unpooled = atomic_load_explicit(&p->huge, memory_order_relaxed);
    /* Counters move while we read them: never report a negative. */
    m->used = (allocated > m->cached ? allocated - m->cached : 0) + m->unpooled;
    m->held += m->unpooled;
}

static void pool_foreach_cache(eddy_allocator_t *a,
                               void (*cb)(const eddy_cache_metrics_t *, void *), void *arg)
{
    pool_t *p = (pool_t *)a;
    eddy__registry_lock();
    for (eddy__tcache_t *tc = p->caches; tc != NULL; tc = tc->next) {
        uint64_t allocs = atomic_load_explicit(&tc->allocs, memory_order_relaxed);
        uint64_t misses = atomic_load_explicit(&tc->misses, memory_order_relaxed);
        eddy_cache_metrics_t m = {
            .arena = (size_t)(tc->arena - p->arenas),
            .cached = atomic_load_explicit(&tc->cached, memory_order_relaxed),
            /* The owner counts a miss before the allocation: never report a negative. */
            .hits = allocs > misses ? allocs - misses : 0,
            .misses = misses,
        };
        cb(&m, arg);
    }
    eddy__registry_unlock();
}

static void pool_release_all(pool_t *p)
{
    for (size_t i = 0; i < p->narenas; i++) {
        arena_t *ar = &p->arenas[i];
        /* Full subpages are on no list: find every subpage through its chunk's page map. */
        for (chunk_t *c = ar->chunks; c != NULL; c = c->next) {
            uint32_t page = c->meta_pages;
            while (page < c->npages) {
                subpage_t *s = c->sub[page];
                if (s == NULL) {
                    page++;
                    continue;
                }
                page += s->run_pages; /* every page of the run points at s */
                free(s);
            }
        }
        while (ar->chunks != NULL) {
            chunk_free(ar, ar->chunks);
        }
        free(ar->stash);
        pthread_mutex_destroy(&ar->lock);
    }
    free(p->arenas);
    free(p);
}

static int pool_destroy(eddy_allocator_t *a)
{
    pool_t *p = (pool_t *)a;
    eddy__registry_lock();
    size_t allocated = 0, cached = 0;
    for (size_t i = 0; i < p->narenas; i++) {
        allocated += atomic_load_explicit(&p->arenas[i].allocated, memory_order_relaxed);
    }
    for (eddy__tcache_t *tc = p->caches; tc != NULL; tc = tc->next) {
        cached += atomic_load_explicit(&tc->cached, memory_order_relaxed);
    }
    if (allocated != cached || atomic_load_explicit(&p->huge, memory_order_relaxed) != 0) {
        eddy__registry_unlock();
        return EDDY_EBUSY;
    }
    /* Every block is in a cache or an arena: the chunks go whole. Caches are orphaned, and
     * their threads free them when they next look (or exit). */
    for (eddy__tcache_t *tc = p->caches; tc != NULL; tc = tc->next) {
        atomic_store_explicit(&tc->pool, NULL, memory_order_release);
    }
    p->caches = NULL;
    eddy__registry_unlock();
    pool_release_all(p);
    return 0;
}

const eddy__alloc_ops_t eddy__pool_ops = {
    .name = "pooled",
    .alloc = pool_alloc,
    .free = pool_free,
    .trim = pool_trim,
    .metrics = pool_metrics,
    .foreach_cache = pool_foreach_cache,
    .destroy = pool_destroy,
};

eddy_allocator_t *eddy_pooled_allocator_new(const eddy_pool_options_t *opts)
{
    eddy_pool_options_t o = {0};
    if (opts != NULL) {
        o = *opts;
    }
    if (o.chunk_size == 0) {
        o.chunk_size = DEFAULT_CHUNK;
    }
    if (o.chunk_size < MIN_CHUNK || o.chunk_size > MAX_CHUNK ||
        (o.chunk_size & (o.chunk_size - 1)) != 0) {
        return NULL;
    }
    if (o.arenas == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o.arenas = n > 0 ? (size_t)n : 1;
    }
    if (o.arenas > EDDY_POOL_MAX_ARENAS) {
        o.arenas = EDDY_POOL_MAX_ARENAS;
    }
    if (o.cache_bytes == 0) {
        o.cache_bytes = DEFAULT_CACHE_BYTES;
    }
    pool_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return NULL;
    }
    p->super.ops = &eddy__pool_ops;
    p->chunk_size = o.chunk_size;
    p->no_cache = o.no_cache;
    p->max_pooled = o.chunk_size / 2;
    uint32_t n = 0;
    while (n < MAX_CLASSES && class_bytes(n) <= p->max_pooled) {
        size_t size = class_bytes(n);
        p->class_size[n] = (uint32_t)size;
        p->run_pages[n] = size < RUN_MIN ? subpage_run_pages(size) : 0;
        size_t cap = o.no_cache ? 0 : o.cache_bytes / size;
        if (!o.no_cache && size < RUN_MIN && cap < MIN_CACHED) {
            cap = MIN_CACHED;
        }
        p->cache_cap[n] = (uint32_t)(cap > MAX_CACHED ? MAX_CACHED : cap);
        if (p->cache_cap[n] > 0) {
            p->ncached = n + 1;
        }
        n++;
    }
    p->nclasses = n;
    p->max_pooled = class_bytes(n - 1);
    atomic_init(&p->huge, 0);
    p->narenas = o.arenas;
    p->arenas = aligned_alloc(128, ((sizeof(arena_t) * o.arenas + 127) / 128) * 128);
    if (p->arenas == NULL) {
        free(p);
        return NULL;
    }
    memset(p->arenas, 0, sizeof(arena_t) * o.arenas);
    size_t slots = 0;
    for (uint32_t cls = 0; cls < p->ncached; cls++) {
        slots += (size_t)p->cache_cap[cls] / 2 * STASH_BATCHES;
    }
    size_t head = p->ncached * sizeof(stash_t);
    for (size_t i = 0; i < o.arenas; i++) {
        pthread_mutex_init(&p->arenas[i].lock, NULL);
        p->arenas[i].pool = p;
    }
    for (size_t i = 0; i < o.arenas && p->ncached > 0; i++) {
        arena_t *ar = &p->arenas[i];
        /* One block per arena: the stashes, then their slots. */
        ar->stash = calloc(1, head + slots * sizeof(void *));
        if (ar->stash == NULL) {
            pool_release_all(p);
            return NULL;
        }
        void **slot = (void **)(void *)((uint8_t *)ar->stash + head);
        for (uint32_t cls = 0; cls < p->ncached; cls++) {
            ar->stash[cls].slots = slot;
            ar->stash[cls].cap = p->cache_cap[cls] / 2 * STASH_BATCHES;
            slot += ar->stash[cls].cap;
        }
    }
    return &p->super;
}
