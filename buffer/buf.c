/*
 * eddy_buf_t: indexes, growth, integer and byte access, views, and the reference count.
 *
 * Every buffer is one of three things. A root owns a block of memory from an allocator and
 * the reference count. A retained view points into its root's memory, has a count of its own
 * and holds one reference on the root. A plain view points into the memory of its root and
 * shares the count of its count owner (a root or a retained view); it is freed together with
 * that owner, which keeps it on its _views list.
 */
#include "buffer/internal.h"
#include "buffer/layer.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Index 0 of an empty buffer: never written (capacity 0), never NULL (NULL + 0 is UB). */
static uint8_t empty_mem[8];

/*
 * Recycled headers move in batches (Bonwick's magazines and depot, Solaris kmem): a thread
 * keeps a list of up to HDR_BATCH and one full spare batch; when the list is full and a spare
 * is held, the spare goes to a shared depot, and an empty list takes the spare or a depot
 * batch before calling malloc. So when one thread allocates buffers and another releases
 * them, the headers flow back one lock per HDR_BATCH buffers instead of each costing a glibc
 * malloc and a cross-thread free. A thread holds at most 2 * HDR_BATCH headers, the depot
 * HDR_DEPOT_MAX batches (480 KiB); past that, free().
 */
#define HDR_BATCH 256
#define HDR_DEPOT_MAX 16

static pthread_mutex_t hdr_depot_lock = PTHREAD_MUTEX_INITIALIZER;
static eddy_buf_t *hdr_depot; /* full batches, linked through their first header's _parent */
static size_t hdr_depot_n;

/* Free a list of headers linked through _next_view. */
static void hdr_list_free(eddy_buf_t *b)
{
    while (b != NULL) {
        eddy_buf_t *next = b->_next_view;
        free(b);
        b = next;
    }
}

static EDDY__NOINLINE eddy_buf_t *hdr_get_slow(eddy__tls_t *t)
{
    assert(t->hdr_free == NULL && t->hdr_count == 0);
    eddy_buf_t *batch = t->hdr_spare;
    t->hdr_spare = NULL;
    if (batch == NULL) {
        pthread_mutex_lock(&hdr_depot_lock);
        batch = hdr_depot;
        if (batch != NULL) {
            assert(hdr_depot_n > 0);
            hdr_depot = batch->_parent;
            hdr_depot_n--;
        }
        pthread_mutex_unlock(&hdr_depot_lock);
        if (batch == NULL) {
            return malloc(sizeof(eddy_buf_t));
        }
    }
    t->hdr_free = batch->_next_view;
    t->hdr_count = HDR_BATCH - 1;
    return batch;
}

static inline eddy_buf_t *hdr_get(eddy__tls_t *t);

/* A recycled header, the calling thread's state in *tp; NULL without memory. */
static inline eddy_buf_t *hdr_take(eddy__tls_t **tp)
{
    eddy__tls_t *t = eddy__tls();
    *tp = t;
    return t != NULL ? hdr_get(t) : NULL;
}

static inline eddy_buf_t *hdr_get(eddy__tls_t *t)
{
    eddy_buf_t *b = t->hdr_free;
    assert((b == NULL) == (t->hdr_count == 0));
    if (EDDY_LIKELY(b != NULL)) {
        t->hdr_free = b->_next_view;
        t->hdr_count--;
        return b;
    }
    return hdr_get_slow(t);
}

/* The list is full: it becomes the spare, and the old spare goes to the depot. */
static EDDY__NOINLINE void hdr_put_slow(eddy__tls_t *t)
{
    assert(t->hdr_count == HDR_BATCH && t->hdr_free != NULL);
    eddy_buf_t *batch = t->hdr_spare;
    t->hdr_spare = t->hdr_free;
    t->hdr_free = NULL;
    t->hdr_count = 0;
    if (batch == NULL) {
        return;
    }
    pthread_mutex_lock(&hdr_depot_lock);
    if (hdr_depot_n < HDR_DEPOT_MAX) {
        batch->_parent = hdr_depot;
        hdr_depot = batch;
        hdr_depot_n++;
        batch = NULL;
    }
    pthread_mutex_unlock(&hdr_depot_lock);
    hdr_list_free(batch);
}

static inline void hdr_put(eddy__tls_t *t, eddy_buf_t *b)
{
    if (EDDY_UNLIKELY(t == NULL)) {
        free(b);
        return;
    }
    assert(b != NULL && t->hdr_count <= HDR_BATCH);
    if (EDDY_UNLIKELY(t->hdr_count == HDR_BATCH)) {
        hdr_put_slow(t);
    }
    b->_next_view = t->hdr_free;
    t->hdr_free = b;
    t->hdr_count++;
}

void eddy__hdr_thread_exit(eddy__tls_t *t)
{
    hdr_list_free(t->hdr_free);
    hdr_list_free(t->hdr_spare);
    t->hdr_free = NULL;
    t->hdr_spare = NULL;
    t->hdr_count = 0;
}

void eddy__hdr_shutdown(void)
{
    pthread_mutex_lock(&hdr_depot_lock);
    eddy_buf_t *batch = hdr_depot;
    hdr_depot = NULL;
    hdr_depot_n = 0;
    pthread_mutex_unlock(&hdr_depot_lock);
    while (batch != NULL) {
        eddy_buf_t *next = batch->_parent;
        hdr_list_free(batch);
        batch = next;
    }
}

/* Growth steps: double from 64 bytes up to 4 MiB, then grow by 4 MiB (Netty's
 * AbstractByteBufAllocator.calculateNewCapacity uses the same threshold). */
#define GROW_MIN 64
#define GROW_THRESHOLD ((size_t)4 << 20)

/* This thread's share of the live count: only the owner writes, others sum (relaxed). */
static inline void live_add(eddy__tls_t *t, int64_t d)
{
    int64_t v = atomic_load_explicit(&t->live, memory_order_relaxed);
    atomic_store_explicit(&t->live, v + d, memory_order_relaxed);
}

static inline bool range_ok(size_t i, size_t n, size_t limit)
{
    return i <= limit && n <= limit - i;
}

static inline eddy_buf_t *count_owner(eddy_buf_t *b)
{
    /* Views of views hang from the count owner, never from another plain view. */
    assert(!(b->_flags & EDDY__BUF_VIEW) || !(b->_parent->_flags & EDDY__BUF_VIEW));
    return (b->_flags & EDDY__BUF_VIEW) ? b->_parent : b;
}

/* The root whose block holds b's bytes. */
static inline eddy_buf_t *mem_root(const eddy_buf_t *b)
{
    if (b->_flags & EDDY__BUF_VIEW) {
        b = b->_parent;
    }
    if (b->_flags & EDDY__BUF_RETAINED) {
        b = b->_parent;
    }
    return (eddy_buf_t *)(uintptr_t)b;
}

/* ---------------------------------------------------------------------------------------
 * Allocation and the reference count
 */

/* eddy_msg_init() for a buffer header, inlined: the one in common.c is an exported call. */
static inline void msg_init(eddy_buf_t *b, uint32_t refcnt)
{
    atomic_init(&b->_msg._refcnt, refcnt);
    b->_msg.type = EDDY_MSG_BUF;
    b->_msg._free = NULL;
}

/* What every new header starts with, root or view: its indexes and capacities, a message
 * header with refcnt, no views of its own, no leak record. */
static inline void hdr_init(eddy_buf_t *b, uint32_t refcnt, size_t rd, size_t wr, size_t cap,
                            size_t max_cap)
{
    assert(rd <= wr && wr <= cap && cap <= max_cap);
    msg_init(b, refcnt);
    b->_rd = rd;
    b->_wr = wr;
    b->_cap = cap;
    b->_max_cap = max_cap;
    b->_views = NULL;
    b->_leak = NULL;
    b->_had_views = 0;
}

eddy_buf_t *eddy_buf_alloc(eddy_allocator_t *a, size_t initial, size_t max_capacity)
{
    if (initial > max_capacity) {
        return NULL;
    }
    if (a == NULL) {
        a = eddy__allocator_default();
    }
    eddy__tls_t *t;
    eddy_buf_t *b = hdr_take(&t);
    if (b == NULL) {
        return NULL;
    }
    if (initial == 0) {
        b->_mem = NULL;
        b->_base = empty_mem;
        b->_mem_size = 0;
        b->_class = EDDY__CLASS_NONE;
        if (!a->global) {
            atomic_fetch_add_explicit(&a->memless, 1, memory_order_relaxed);
        }
    } else {
        void *mem;
        if (a->ops->alloc(a, t, initial, &mem, &b->_mem_size, &b->_class) != 0) {
            hdr_put(t, b);
            return NULL;
        }
        assert(b->_mem_size >= initial); /* the allocator's contract: at least what was asked */
        b->_mem = mem;
        b->_base = mem;
    }
    hdr_init(b, 1, 0, 0, initial, max_capacity);
    b->_parent = NULL;
    b->_alloc = a;
    b->_next_view = NULL;
    b->_flags = 0;
    live_add(t, 1);
    if (atomic_load_explicit(&eddy__leak_paranoid, memory_order_relaxed)) {
        eddy__leak_track(b);
    }
    return b;
}

eddy_buf_t *eddy_buf_new(size_t initial)
{
    return eddy_buf_alloc(NULL, initial, EDDY_BUF_DEFAULT_MAX_CAPACITY);
}

eddy_buf_t *eddy_buf_from(const void *src, size_t len)
{
    assert(src != NULL || len == 0);
    eddy_buf_t *b = eddy_buf_alloc(NULL, len, len > EDDY_BUF_DEFAULT_MAX_CAPACITY
                                                  ? len
                                                  : EDDY_BUF_DEFAULT_MAX_CAPACITY);
    if (b != NULL && len > 0) {
        memcpy(b->_base, src, len);
        b->_wr = len;
    }
    return b;
}

eddy_buf_t *eddy_buf_from_str(const char *s)
{
    assert(s != NULL);
    return eddy_buf_from(s, strlen(s));
}

/* A retain refused: the count was 0 (a release at zero's twin, counted and traced as one)
 * or at its maximum. */
static EDDY__NOINLINE void retain_refused(eddy_buf_t *o, uint32_t found)
{
    if (found == 0) {
        eddy__leak_misuse(o, "retain");
    }
    eddy__refcnt_refused("buffer", o, found);
}

eddy_buf_t *eddy_buf_retain(eddy_buf_t *b)
{
    eddy_buf_t *o = count_owner(b);
    uint32_t found;
    if (!eddy__refcnt_inc(&o->_msg._refcnt, &found)) {
        retain_refused(o, found);
        return NULL;
    }
    if (o->_leak != NULL) {
        eddy__leak_record(o, "retain");
    }
    return b;
}

/* Free the plain views and retired blocks that o keeps for the lifetime of its count. */
static EDDY__NOINLINE void free_attached(eddy__tls_t *t, eddy_buf_t *o)
{
    eddy_buf_t *v = o->_views;
    while (v != NULL) {
        assert(v->_flags & (EDDY__BUF_VIEW | EDDY__BUF_RETIRED));
        assert(!(v->_flags & EDDY__BUF_VIEW) || v->_parent == o);
        eddy_buf_t *next = v->_next_view;
        if (v->_flags & EDDY__BUF_RETIRED) {
            v->_alloc->ops->free(v->_alloc, t, v->_mem, v->_mem_size, v->_class);
        }
        hdr_put(t, v);
        v = next;
    }
    o->_views = NULL;
}

/* buf_free() in full: views or retired blocks to free, a retained view, leak tracking. */
static EDDY__NOINLINE void buf_free_slow(eddy__tls_t *t, eddy_buf_t *o)
{
    if (o->_views != NULL) {
        free_attached(t, o);
    }
    eddy_buf_t *root = NULL;
    if (o->_flags & EDDY__BUF_RETAINED) {
        root = o->_parent;
        assert(root != NULL && !(root->_flags & (EDDY__BUF_VIEW | EDDY__BUF_RETAINED)));
    } else {
        if (o->_mem != NULL) {
            o->_alloc->ops->free(o->_alloc, t, o->_mem, o->_mem_size, o->_class);
        } else if (!o->_alloc->global) {
            atomic_fetch_sub_explicit(&o->_alloc->memless, 1, memory_order_relaxed);
        }
        if (t != NULL) {
            live_add(t, -1);
        }
    }
    if (o->_leak == NULL) {
        hdr_put(t, o);
    } else {
        o->_mem = NULL; /* the quarantine must not point at memory the pool reuses */
        if (!eddy__leak_untrack(o)) {
            hdr_put(t, o);
        }
    }
    if (root != NULL) {
        eddy_buf_release(root);
    }
}

/* o's count reached zero: give everything back. Returns 1, for eddy_buf_release(). */
static int buf_free(eddy_buf_t *o)
{
    assert(atomic_load_explicit(&o->_msg._refcnt, memory_order_relaxed) == 0);
    assert(!(o->_flags & (EDDY__BUF_VIEW | EDDY__BUF_RETIRED))); /* a count owner */
    eddy__tls_t *t = eddy__tls();
    if (EDDY_UNLIKELY(t == NULL || o->_views != NULL || o->_leak != NULL ||
                      (o->_flags & EDDY__BUF_RETAINED))) {
        buf_free_slow(t, o);
        return 1;
    }
    /* A plain root: the header goes back first, so that nothing is live across the call. */
    eddy_allocator_t *a = o->_alloc;
    void *mem = o->_mem;
    size_t size = o->_mem_size;
    uint32_t cls = o->_class;
    live_add(t, -1);
    hdr_put(t, o);
    if (mem != NULL) {
        a->ops->free(a, t, mem, size, cls);
    } else if (!a->global) {
        atomic_fetch_sub_explicit(&a->memless, 1, memory_order_relaxed);
    }
    return 1;
}

int eddy_buf_release(eddy_buf_t *b)
{
    eddy_buf_t *o = count_owner(b);
    uint32_t c = atomic_load_explicit(&o->_msg._refcnt, memory_order_acquire);
    if (EDDY_LIKELY(c == 1)) {
        /* The last reference is ours: nobody else may retain, so no read-modify-write is
         * needed. The acquire load pairs with the release decrements of earlier holders. */
        atomic_store_explicit(&o->_msg._refcnt, 0, memory_order_relaxed);
        return buf_free(o);
    }
    if (c == 0) {
        eddy__leak_misuse(o, "release");
        return EDDY_EREFCNT;
    }
    /* Record the touch while our reference still keeps o alive: once the count drops,
     * another thread may free o at any moment. */
    if (o->_leak != NULL) {
        eddy__leak_record(o, "release");
    }
    for (;;) {
        if (c == 0) {
            eddy__leak_misuse(o, "release");
            return EDDY_EREFCNT;
        }
        /* acq_rel: release publishes our writes to whoever frees; acquire when we free. */
        if (atomic_compare_exchange_weak_explicit(&o->_msg._refcnt, &c, c - 1,
                                                  memory_order_acq_rel, memory_order_acquire)) {
            break;
        }
    }
    return c == 1 ? buf_free(o) : 0;
}

uint32_t eddy_buf_refcnt(const eddy_buf_t *b)
{
    const eddy_buf_t *o = (b->_flags & EDDY__BUF_VIEW) ? b->_parent : b;
    return atomic_load_explicit(&o->_msg._refcnt, memory_order_acquire);
}

void eddy_buf_touch(eddy_buf_t *b, const char *hint)
{
    eddy_buf_t *o = count_owner(b);
    if (o->_leak != NULL) {
        eddy__leak_record(o, hint);
    }
}

eddy_buf_t *eddy_buf_of(eddy_msg_t *msg)
{
    if (msg == NULL || msg->type != EDDY_MSG_BUF) {
        return NULL;
    }
    return EDDY_CONTAINER_OF(msg, eddy_buf_t, _msg);
}

eddy_msg_t *eddy_buf_msg(eddy_buf_t *b)
{
    return &b->_msg;
}

eddy_allocator_t *eddy_buf_allocator(const eddy_buf_t *b)
{
    return mem_root(b)->_alloc;
}

/* ---------------------------------------------------------------------------------------
 * Indexes and capacity
 */

int eddy_buf_set_reader_index(eddy_buf_t *b, size_t i)
{
    if (i > b->_wr) {
        return EDDY_EBOUNDS;
    }
    b->_rd = i;
    return 0;
}

int eddy_buf_set_writer_index(eddy_buf_t *b, size_t i)
{
    if (i < b->_rd || i > b->_cap) {
        return EDDY_EBOUNDS;
    }
    b->_wr = i;
    return 0;
}

void eddy_buf_clear(eddy_buf_t *b)
{
    b->_rd = 0;
    b->_wr = 0;
}

static size_t grown_capacity(size_t need, size_t max)
{
    assert(need > 0 && need <= max);
    size_t cap;
    if (need > GROW_THRESHOLD) {
        size_t steps = need / GROW_THRESHOLD + (need % GROW_THRESHOLD != 0);
        cap = steps <= max / GROW_THRESHOLD ? steps * GROW_THRESHOLD : max;
    } else {
        cap = GROW_MIN;
        while (cap < need) {
            cap <<= 1;
        }
    }
    return cap < max ? cap : max;
}

/* Keep a root's old block alive for the views pointing into it: a RETIRED record on the
 * root's _views list, freed with the root. */
static int retire_block(eddy__tls_t *t, eddy_buf_t *root)
{
    assert(root->_mem != NULL && !(root->_flags & (EDDY__BUF_VIEW | EDDY__BUF_RETAINED)));
    eddy_buf_t *r = hdr_get(t);
    if (r == NULL) {
        return EDDY_ENOMEM;
    }
    memset(r, 0, sizeof(*r));
    r->_flags = EDDY__BUF_RETIRED;
    r->_alloc = root->_alloc;
    r->_mem = root->_mem;
    r->_mem_size = root->_mem_size;
    r->_class = root->_class;
    /* A CAS, as in make_view(): views of this root's views may be made on other threads. */
    eddy_buf_t *head = __atomic_load_n(&root->_views, __ATOMIC_RELAXED);
    do {
        r->_next_view = head;
    } while (!__atomic_compare_exchange_n(&root->_views, &head, r, true, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
    return 0;
}

int eddy__buf_grow(eddy_buf_t *b, size_t n)
{
    if (n <= b->_cap - b->_wr) {
        return 0;
    }
    if (n > b->_max_cap - b->_wr || (b->_flags & (EDDY__BUF_VIEW | EDDY__BUF_RETAINED))) {
        return EDDY_ECAPACITY;
    }
    size_t need = b->_wr + n;
    if (need <= b->_mem_size) {
        /* The size class already has room: take it without moving. */
        b->_cap = b->_mem_size < b->_max_cap ? b->_mem_size : b->_max_cap;
        return 0;
    }
    size_t cap = grown_capacity(need, b->_max_cap);
    assert(cap >= need && cap > b->_cap);
    eddy__tls_t *t = eddy__tls();
    if (t == NULL) {
        return EDDY_ENOMEM;
    }
    void *mem;
    size_t usable;
    uint32_t cls;
    if (b->_alloc->ops->alloc(b->_alloc, t, cap, &mem, &usable, &cls) != 0) {
        return EDDY_ENOMEM;
    }
    assert(usable >= cap);
    /* Bytes already read move too: the reader index may be set back to them (Netty copies
     * the whole buffer as well). */
    if (b->_wr > 0) {
        memcpy(mem, b->_base, b->_wr);
    }
    if (b->_mem != NULL) {
        if (__atomic_load_n(&b->_had_views, __ATOMIC_RELAXED)) {
            if (retire_block(t, b) != 0) {
                b->_alloc->ops->free(b->_alloc, t, mem, usable, cls);
                return EDDY_ENOMEM;
            }
        } else {
            b->_alloc->ops->free(b->_alloc, t, b->_mem, b->_mem_size, b->_class);
        }
    } else if (!b->_alloc->global) {
        atomic_fetch_sub_explicit(&b->_alloc->memless, 1, memory_order_relaxed);
    }
    b->_mem = mem;
    b->_base = mem;
    b->_mem_size = usable;
    b->_class = cls;
    b->_cap = cap;
    return 0;
}

void eddy_buf_discard_read_bytes(eddy_buf_t *b)
{
    assert(b->_rd <= b->_wr && b->_wr <= b->_cap);
    if (b->_rd == 0) {
        return;
    }
    size_t n = b->_wr - b->_rd;
    if (n > 0) {
        memmove(b->_base, b->_base + b->_rd, n);
    }
    b->_rd = 0;
    b->_wr = n;
}

/* ---------------------------------------------------------------------------------------
 * The exported definitions of the accessors buffer.h defines inline (C11 6.7.4: an extern
 * declaration makes this translation unit's definition the external one).
 */

extern inline int eddy_buf_ensure_writable(eddy_buf_t *b, size_t n);
extern inline int eddy_buf_produce(eddy_buf_t *b, size_t n);
extern inline int eddy_buf_skip(eddy_buf_t *b, size_t n);
extern inline int eddy_buf_write_bytes(eddy_buf_t *b, const void *src, size_t n);

#define EDDY_BUF_INT_EXTERN(suffix, type)                                                      \
    extern inline int eddy_buf_write_##suffix(eddy_buf_t *b, type v);                         \
    extern inline int eddy_buf_set_##suffix(eddy_buf_t *b, size_t i, type v);

EDDY_BUF_INT_EXTERN(u8, uint8_t)
EDDY_BUF_INT_EXTERN(u16, uint16_t)
EDDY_BUF_INT_EXTERN(u32, uint32_t)
EDDY_BUF_INT_EXTERN(u64, uint64_t)
EDDY_BUF_INT_EXTERN(u16_le, uint16_t)
EDDY_BUF_INT_EXTERN(u32_le, uint32_t)
EDDY_BUF_INT_EXTERN(u64_le, uint64_t)

/* ---------------------------------------------------------------------------------------
 * Integer reads and gets. Loaded byte by byte, written out: GCC and Clang turn each into one
 * load and a bswap, and they need no alignment (a loop over the bytes they leave a loop).
 */

static inline uint8_t ld_8(const uint8_t *p)
{
    return p[0];
}

static inline uint16_t ld_be16(const uint8_t *p)
{
    return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t ld_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t ld_be64(const uint8_t *p)
{
    return (uint64_t)ld_be32(p) << 32 | ld_be32(p + 4);
}

static inline uint16_t ld_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static inline uint32_t ld_le32(const uint8_t *p)
{
    return (uint32_t)ld_le16(p) | (uint32_t)ld_le16(p + 2) << 16;
}

static inline uint64_t ld_le64(const uint8_t *p)
{
    return (uint64_t)ld_le32(p) | (uint64_t)ld_le32(p + 4) << 32;
}

#define EDDY_BUF_INT_READS(suffix, type, width, ld)                                            \
    int eddy_buf_read_##suffix(eddy_buf_t *b, type *out)                                       \
    {                                                                                          \
        assert(b->_rd <= b->_wr);                                                              \
        if (b->_wr - b->_rd < width) {                                                         \
            return EDDY_EBOUNDS;                                                               \
        }                                                                                      \
        *out = ld(b->_base + b->_rd);                                                          \
        b->_rd += width;                                                                       \
        return 0;                                                                              \
    }                                                                                          \
    int eddy_buf_get_##suffix(const eddy_buf_t *b, size_t i, type *out)                       \
    {                                                                                          \
        if (!range_ok(i, width, b->_cap)) {                                                    \
            return EDDY_EBOUNDS;                                                               \
        }                                                                                      \
        *out = ld(b->_base + i);                                                               \
        return 0;                                                                              \
    }

EDDY_BUF_INT_READS(u8, uint8_t, 1, ld_8)
EDDY_BUF_INT_READS(u16, uint16_t, 2, ld_be16)
EDDY_BUF_INT_READS(u32, uint32_t, 4, ld_be32)
EDDY_BUF_INT_READS(u64, uint64_t, 8, ld_be64)
EDDY_BUF_INT_READS(u16_le, uint16_t, 2, ld_le16)
EDDY_BUF_INT_READS(u32_le, uint32_t, 4, ld_le32)
EDDY_BUF_INT_READS(u64_le, uint64_t, 8, ld_le64)

/* ---------------------------------------------------------------------------------------
 * Byte ranges and buffer-to-buffer copies
 */

int eddy_buf_write_zero(eddy_buf_t *b, size_t n)
{
    int err = eddy_buf_ensure_writable(b, n);
    if (err != 0) {
        return err;
    }
    if (n > 0) {
        memset(b->_base + b->_wr, 0, n);
        b->_wr += n;
    }
    return 0;
}

int eddy_buf_write_buf(eddy_buf_t *b, eddy_buf_t *src, size_t n)
{
    assert(src->_rd <= src->_wr);
    if (n > src->_wr - src->_rd) {
        return EDDY_EBOUNDS;
    }
    /* src may be a view of b: after b grows, src still points at the old bytes, which stay
     * alive (retired), so copying from src after the growth is safe. */
    int err = eddy_buf_ensure_writable(b, n);
    if (err != 0) {
        return err;
    }
    if (n > 0) {
        memmove(b->_base + b->_wr, src->_base + src->_rd, n);
        b->_wr += n;
        src->_rd += n;
    }
    return 0;
}

int eddy_buf_read_bytes(eddy_buf_t *b, void *dst, size_t n)
{
    assert(b->_rd <= b->_wr && (dst != NULL || n == 0));
    if (n > b->_wr - b->_rd) {
        return EDDY_EBOUNDS;
    }
    if (n > 0) {
        memcpy(dst, b->_base + b->_rd, n);
        b->_rd += n;
    }
    return 0;
}

int eddy_buf_read_buf(eddy_buf_t *b, eddy_buf_t *dst, size_t n)
{
    return eddy_buf_write_buf(dst, b, n);
}

int eddy_buf_get_bytes(const eddy_buf_t *b, size_t i, void *dst, size_t n)
{
    if (!range_ok(i, n, b->_cap)) {
        return EDDY_EBOUNDS;
    }
    if (n > 0) {
        memcpy(dst, b->_base + i, n);
    }
    return 0;
}

int eddy_buf_get_buf(const eddy_buf_t *b, size_t i, eddy_buf_t *dst, size_t n)
{
    if (!range_ok(i, n, b->_cap)) {
        return EDDY_EBOUNDS;
    }
    int err = eddy_buf_ensure_writable(dst, n);
    if (err != 0) {
        return err;
    }
    if (n > 0) {
        memmove(dst->_base + dst->_wr, b->_base + i, n);
        dst->_wr += n;
    }
    return 0;
}

int eddy_buf_set_bytes(eddy_buf_t *b, size_t i, const void *src, size_t n)
{
    if (!range_ok(i, n, b->_cap)) {
        return EDDY_EBOUNDS;
    }
    if (n > 0) {
        memmove(b->_base + i, src, n);
    }
    return 0;
}

int eddy_buf_set_buf(eddy_buf_t *b, size_t i, const eddy_buf_t *src, size_t n)
{
    if (n > src->_wr - src->_rd) {
        return EDDY_EBOUNDS;
    }
    return eddy_buf_set_bytes(b, i, src->_base + src->_rd, n);
}

/* ---------------------------------------------------------------------------------------
 * Search
 */

int64_t eddy_buf_find(const eddy_buf_t *b, size_t from, size_t to, uint8_t byte)
{
    if (from > to || to > b->_wr) {
        return EDDY_EBOUNDS;
    }
    const uint8_t *p = from < to ? memchr(b->_base + from, byte, to - from) : NULL;
    return p != NULL ? (int64_t)(p - b->_base) : EDDY_ENOENT;
}

int64_t eddy_buf_find_bytes(const eddy_buf_t *b, size_t from, size_t to, const void *needle,
                            size_t n)
{
    if (from > to || to > b->_wr) {
        return EDDY_EBOUNDS;
    }
    if (n == 0) {
        return (int64_t)from; /* the empty sequence is found where the search starts */
    }
    if (to - from < n) {
        return EDDY_ENOENT;
    }
    const uint8_t *p = memmem(b->_base + from, to - from, needle, n);
    return p != NULL ? (int64_t)(p - b->_base) : EDDY_ENOENT;
}

/* ---------------------------------------------------------------------------------------
 * Views
 */

static eddy_buf_t *make_view(eddy_buf_t *b, size_t i, size_t len, size_t rd, size_t wr,
                             bool retained)
{
    if (!range_ok(i, len, b->_cap)) {
        return NULL;
    }
    eddy__tls_t *t;
    eddy_buf_t *v = hdr_take(&t);
    if (v == NULL) {
        return NULL;
    }
    eddy_buf_t *owner = count_owner(b);
    eddy_buf_t *root = mem_root(b);
    assert(!(root->_flags & (EDDY__BUF_VIEW | EDDY__BUF_RETAINED | EDDY__BUF_RETIRED)));
    if (retained && eddy_buf_retain(root) == NULL) {
        hdr_put(t, v);
        return NULL;
    }
    /* From now on the root's block may have views: growth must keep old blocks alive. Views
     * of a shared root are made on several threads at once (a group write encodes one frame
     * on every member's loop), so the mark is its own atomic byte, apart from _flags, which
     * other threads read without a lock. */
    if (!__atomic_load_n(&root->_had_views, __ATOMIC_RELAXED)) {
        __atomic_store_n(&root->_had_views, 1, __ATOMIC_RELAXED);
    }
    /* A plain view's count is unused: its owner's counts. */
    hdr_init(v, retained ? 1 : 0, rd, wr, len, len);
    v->_base = b->_base + i;
    v->_alloc = NULL;
    v->_mem = NULL;
    v->_mem_size = 0;
    v->_class = EDDY__CLASS_NONE;
    if (retained) {
        v->_flags = EDDY__BUF_RETAINED;
        v->_parent = root;
        v->_next_view = NULL;
        if (atomic_load_explicit(&eddy__leak_paranoid, memory_order_relaxed)) {
            eddy__leak_track(v);
        }
    } else {
        v->_flags = EDDY__BUF_VIEW;
        v->_parent = owner;
        /* Views of one owner may be made on different threads (each holding its own view),
         * so the list push is a CAS; the owner pops the list only when its count is zero. */
        eddy_buf_t *head = __atomic_load_n(&owner->_views, __ATOMIC_RELAXED);
        do {
            v->_next_view = head;
        } while (!__atomic_compare_exchange_n(&owner->_views, &head, v, true, __ATOMIC_RELEASE,
                                              __ATOMIC_RELAXED));
    }
    if (owner->_leak != NULL) {
        eddy__leak_record(owner, retained ? "retained view" : "view");
    }
    return v;
}

eddy_buf_t *eddy_buf_slice(eddy_buf_t *b, size_t i, size_t len)
{
    return make_view(b, i, len, 0, len, false);
}

eddy_buf_t *eddy_buf_retained_slice(eddy_buf_t *b, size_t i, size_t len)
{
    return make_view(b, i, len, 0, len, true);
}

eddy_buf_t *eddy_buf_duplicate(eddy_buf_t *b)
{
    return make_view(b, 0, b->_cap, b->_rd, b->_wr, false);
}

eddy_buf_t *eddy_buf_retained_duplicate(eddy_buf_t *b)
{
    return make_view(b, 0, b->_cap, b->_rd, b->_wr, true);
}

/* A view of the next n readable bytes, which it consumes. */
static eddy_buf_t *read_view(eddy_buf_t *b, size_t n, bool retained)
{
    assert(b->_rd <= b->_wr);
    if (n > b->_wr - b->_rd) {
        return NULL;
    }
    eddy_buf_t *v = make_view(b, b->_rd, n, 0, n, retained);
    if (v != NULL) {
        b->_rd += n;
    }
    return v;
}

eddy_buf_t *eddy_buf_read_slice(eddy_buf_t *b, size_t n)
{
    return read_view(b, n, false);
}

eddy_buf_t *eddy_buf_read_retained_slice(eddy_buf_t *b, size_t n)
{
    return read_view(b, n, true);
}

eddy_buf_t *eddy_buf_copy(const eddy_buf_t *b, size_t i, size_t len)
{
    if (!range_ok(i, len, b->_cap)) {
        return NULL;
    }
    eddy_buf_t *c = eddy_buf_alloc(mem_root(b)->_alloc, len,
                                   len > EDDY_BUF_DEFAULT_MAX_CAPACITY
                                       ? len
                                       : EDDY_BUF_DEFAULT_MAX_CAPACITY);
    if (c != NULL && len > 0) {
        memcpy(c->_base, b->_base + i, len);
        c->_wr = len;
    }
    return c;
}
