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

#include <stdlib.h>
#include <string.h>

/* Index 0 of an empty buffer: never written (capacity 0), never NULL (NULL + 0 is UB). */
static uint8_t empty_mem[8];

/* Recycled headers a thread keeps; past this they go back to malloc. Headers are fungible, so
 * a header freed on another thread simply joins that thread's list. */
#define HDR_CACHE_MAX 512

/* Growth steps: double from 64 bytes up to 4 MiB, then grow by 4 MiB (Netty's
 * AbstractByteBufAllocator.calculateNewCapacity uses the same threshold). */
#define GROW_MIN 64
#define GROW_THRESHOLD ((size_t)4 << 20)

static eddy_buf_t *hdr_get(eddy__tls_t *t)
{
    eddy_buf_t *b = t->hdr_free;
    if (b != NULL) {
        t->hdr_free = b->_next_view;
        t->hdr_count--;
        return b;
    }
    return malloc(sizeof(*b));
}

static void hdr_put(eddy__tls_t *t, eddy_buf_t *b)
{
    if (t != NULL && t->hdr_count < HDR_CACHE_MAX) {
        b->_next_view = t->hdr_free;
        t->hdr_free = b;
        t->hdr_count++;
        return;
    }
    free(b);
}

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

eddy_buf_t *eddy_buf_alloc(eddy_allocator_t *a, size_t initial, size_t max_capacity)
{
    if (initial > max_capacity) {
        return NULL;
    }
    if (a == NULL) {
        a = eddy_allocator_default();
    }
    eddy__tls_t *t = eddy__tls();
    if (t == NULL) {
        return NULL;
    }
    eddy_buf_t *b = hdr_get(t);
    if (b == NULL) {
        return NULL;
    }
    if (initial == 0) {
        b->_mem = NULL;
        b->_base = empty_mem;
        b->_mem_size = 0;
        b->_class = EDDY__CLASS_NONE;
    } else {
        void *mem;
        if (a->ops->alloc(a, t, initial, &mem, &b->_mem_size, &b->_class) != 0) {
            hdr_put(t, b);
            return NULL;
        }
        b->_mem = mem;
        b->_base = mem;
    }
    eddy_msg_init(&b->_msg, EDDY_MSG_BUF, NULL);
    b->_rd = 0;
    b->_wr = 0;
    b->_cap = initial;
    b->_max_cap = max_capacity;
    b->_parent = NULL;
    b->_alloc = a;
    b->_views = NULL;
    b->_next_view = NULL;
    b->_leak = NULL;
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
    return eddy_buf_from(s, strlen(s));
}

eddy_buf_t *eddy_buf_retain(eddy_buf_t *b)
{
    eddy_buf_t *o = count_owner(b);
    /* Relaxed: a new reference orders nothing; the final release's acquire does. */
    atomic_fetch_add_explicit(&o->_msg._refcnt, 1, memory_order_relaxed);
    if (o->_leak != NULL) {
        eddy__leak_record(o, "retain");
    }
    return b;
}

/* Free the plain views and retired blocks that o keeps for the lifetime of its count. */
static void free_attached(eddy__tls_t *t, eddy_buf_t *o)
{
    eddy_buf_t *v = o->_views;
    while (v != NULL) {
        eddy_buf_t *next = v->_next_view;
        if (v->_flags & EDDY__BUF_RETIRED) {
            v->_alloc->ops->free(v->_alloc, t, v->_mem, v->_mem_size, v->_class);
        }
        hdr_put(t, v);
        v = next;
    }
    o->_views = NULL;
}

/* o's count reached zero: give everything back. */
static void buf_free(eddy_buf_t *o)
{
    eddy__tls_t *t = eddy__tls();
    free_attached(t, o);
    eddy_buf_t *root = NULL;
    if (o->_flags & EDDY__BUF_RETAINED) {
        root = o->_parent;
    } else {
        if (o->_mem != NULL) {
            o->_alloc->ops->free(o->_alloc, t, o->_mem, o->_mem_size, o->_class);
        }
        if (t != NULL) {
            live_add(t, -1);
        }
    }
    o->_mem = NULL;
    if (o->_leak == NULL || !eddy__leak_untrack(o)) {
        hdr_put(t, o);
    }
    if (root != NULL) {
        eddy_buf_release(root);
    }
}

int eddy_buf_release(eddy_buf_t *b)
{
    eddy_buf_t *o = count_owner(b);
    uint32_t c = atomic_load_explicit(&o->_msg._refcnt, memory_order_acquire);
    if (EDDY_LIKELY(c == 1)) {
        /* The last reference is ours: nobody else may retain, so no read-modify-write is
         * needed. The acquire load pairs with the release decrements of earlier holders. */
        atomic_store_explicit(&o->_msg._refcnt, 0, memory_order_relaxed);
        buf_free(o);
        return 1;
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
    if (c == 1) {
        buf_free(o);
        return 1;
    }
    return 0;
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
    r->_next_view = root->_views;
    root->_views = r;
    return 0;
}

int eddy_buf_ensure_writable(eddy_buf_t *b, size_t n)
{
    if (EDDY_LIKELY(n <= b->_cap - b->_wr)) {
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
    /* Bytes already read move too: the reader index may be set back to them (Netty copies
     * the whole buffer as well). */
    if (b->_wr > 0) {
        memcpy(mem, b->_base, b->_wr);
    }
    if (b->_mem != NULL) {
        if (b->_flags & EDDY__BUF_HAD_VIEWS) {
            if (retire_block(t, b) != 0) {
                b->_alloc->ops->free(b->_alloc, t, mem, usable, cls);
                return EDDY_ENOMEM;
            }
        } else {
            b->_alloc->ops->free(b->_alloc, t, b->_mem, b->_mem_size, b->_class);
        }
    }
    b->_mem = mem;
    b->_base = mem;
    b->_mem_size = usable;
    b->_class = cls;
    b->_cap = cap;
    return 0;
}

int eddy_buf_produce(eddy_buf_t *b, size_t n)
{
    if (n > b->_cap - b->_wr) {
        return EDDY_EBOUNDS;
    }
    b->_wr += n;
    return 0;
}

int eddy_buf_skip(eddy_buf_t *b, size_t n)
{
    if (n > b->_wr - b->_rd) {
        return EDDY_EBOUNDS;
    }
    b->_rd += n;
    return 0;
}

void eddy_buf_discard_read_bytes(eddy_buf_t *b)
{
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
 * Integers. Stored byte by byte: compilers turn these into one load or store and a bswap,
 * and they need no alignment.
 */

static inline void put_be(uint8_t *p, uint64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline void put_le(uint8_t *p, uint64_t v, int width)
{
    for (int i = 0; i < width; i++) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline uint64_t get_be(const uint8_t *p, int width)
{
    uint64_t v = 0;
    for (int i = 0; i < width; i++) {
        v = (v << 8) | p[i];
    }
    return v;
}

static inline uint64_t get_le(const uint8_t *p, int width)
{
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

/* One family per width and byte order: write, read, get, set. */
#define EDDY_BUF_INT_OPS(suffix, type, width, put, get)                                        \
    int eddy_buf_write_##suffix(eddy_buf_t *b, type v)                                         \
    {                                                                                          \
        int err = eddy_buf_ensure_writable(b, width);                                          \
        if (err != 0) {                                                                        \
            return err;                                                                        \
        }                                                                                      \
        put(b->_base + b->_wr, v, width);                                                      \
        b->_wr += width;                                                                       \
        return 0;                                                                              \
    }                                                                                          \
    int eddy_buf_read_##suffix(eddy_buf_t *b, type *out)                                       \
    {                                                                                          \
        if (b->_wr - b->_rd < width) {                                                         \
            return EDDY_EBOUNDS;                                                               \
        }                                                                                      \
        *out = (type)get(b->_base + b->_rd, width);                                            \
        b->_rd += width;                                                                       \
        return 0;                                                                              \
    }                                                                                          \
    int eddy_buf_get_##suffix(const eddy_buf_t *b, size_t i, type *out)                       \
    {                                                                                          \
        if (!range_ok(i, width, b->_cap)) {                                                    \
            return EDDY_EBOUNDS;                                                               \
        }                                                                                      \
        *out = (type)get(b->_base + i, width);                                                 \
        return 0;                                                                              \
    }                                                                                          \
    int eddy_buf_set_##suffix(eddy_buf_t *b, size_t i, type v)                                 \
    {                                                                                          \
        if (!range_ok(i, width, b->_cap)) {                                                    \
            return EDDY_EBOUNDS;                                                               \
        }                                                                                      \
        put(b->_base + i, v, width);                                                           \
        return 0;                                                                              \
    }

EDDY_BUF_INT_OPS(u8, uint8_t, 1, put_be, get_be)
EDDY_BUF_INT_OPS(u16, uint16_t, 2, put_be, get_be)
EDDY_BUF_INT_OPS(u32, uint32_t, 4, put_be, get_be)
EDDY_BUF_INT_OPS(u64, uint64_t, 8, put_be, get_be)
EDDY_BUF_INT_OPS(u16_le, uint16_t, 2, put_le, get_le)
EDDY_BUF_INT_OPS(u32_le, uint32_t, 4, put_le, get_le)
EDDY_BUF_INT_OPS(u64_le, uint64_t, 8, put_le, get_le)

/* ---------------------------------------------------------------------------------------
 * Byte ranges and buffer-to-buffer copies
 */

int eddy_buf_write_bytes(eddy_buf_t *b, const void *src, size_t n)
{
    int err = eddy_buf_ensure_writable(b, n);
    if (err != 0) {
        return err;
    }
    if (n > 0) {
        memcpy(b->_base + b->_wr, src, n);
        b->_wr += n;
    }
    return 0;
}

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
    eddy__tls_t *t = eddy__tls();
    if (t == NULL) {
        return NULL;
    }
    eddy_buf_t *v = hdr_get(t);
    if (v == NULL) {
        return NULL;
    }
    eddy_buf_t *owner = count_owner(b);
    eddy_buf_t *root = mem_root(b);
    /* From now on the root's block may have views: growth must keep old blocks alive. */
    root->_flags |= EDDY__BUF_HAD_VIEWS;
    v->_base = b->_base + i;
    v->_rd = rd;
    v->_wr = wr;
    v->_cap = len;
    v->_max_cap = len;
    v->_alloc = NULL;
    v->_mem = NULL;
    v->_mem_size = 0;
    v->_class = EDDY__CLASS_NONE;
    v->_views = NULL;
    v->_leak = NULL;
    if (retained) {
        eddy_msg_init(&v->_msg, EDDY_MSG_BUF, NULL);
        v->_flags = EDDY__BUF_RETAINED;
        v->_parent = root;
        v->_next_view = NULL;
        eddy_buf_retain(root);
        if (atomic_load_explicit(&eddy__leak_paranoid, memory_order_relaxed)) {
            eddy__leak_track(v);
        }
    } else {
        eddy_msg_init(&v->_msg, EDDY_MSG_BUF, NULL);
        atomic_store_explicit(&v->_msg._refcnt, 0, memory_order_relaxed); /* unused */
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

eddy_buf_t *eddy_buf_read_slice(eddy_buf_t *b, size_t n)
{
    if (n > b->_wr - b->_rd) {
        return NULL;
    }
    eddy_buf_t *v = make_view(b, b->_rd, n, 0, n, false);
    if (v != NULL) {
        b->_rd += n;
    }
    return v;
}

eddy_buf_t *eddy_buf_read_retained_slice(eddy_buf_t *b, size_t n)
{
    if (n > b->_wr - b->_rd) {
        return NULL;
    }
    eddy_buf_t *v = make_view(b, b->_rd, n, 0, n, true);
    if (v != NULL) {
        b->_rd += n;
    }
    return v;
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
