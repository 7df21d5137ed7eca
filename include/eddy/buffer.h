/*
 * eddy buffers: refcounted byte buffers (Netty's ByteBuf), composite buffers, the pooled and
 * unpooled allocators, and leak detection.
 *
 * A buffer has a reader index, a writer index, a capacity and a max capacity:
 *
 *     0 <= reader_index <= writer_index <= capacity <= max_capacity
 *     | discardable |  readable bytes  |  writable bytes  | (room to grow) |
 *
 * Writes grow the capacity up to the max capacity and fail with EDDY_ECAPACITY beyond it.
 * Reads past the writer index and absolute get/set outside [0, capacity) fail with
 * EDDY_EBOUNDS; nothing is read or written when a call fails.
 *
 * A buffer is not thread-safe: one thread uses it at a time. Its reference count is atomic,
 * so retain and release work from any thread, and a buffer allocated on one thread may be
 * released on another.
 */
#ifndef EDDY_BUFFER_H
#define EDDY_BUFFER_H

#include <eddy/common.h>

#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eddy_buf_s eddy_buf_t;
typedef struct eddy_allocator_s eddy_allocator_t;
typedef struct eddy_composite_s eddy_composite_t;

/* The max capacity eddy_buf_new() and friends give: the largest a buffer may grow to. */
#define EDDY_BUF_DEFAULT_MAX_CAPACITY ((size_t)INT32_MAX)

/* ---------------------------------------------------------------------------------------
 * Allocation and reference counting
 */

/**
 * A buffer of capacity initial (grows up to max_capacity) from allocator a (NULL: the default
 * allocator). The caller owns the one reference. NULL when initial > max_capacity or out of
 * memory. Any thread.
 */
EDDY_EXTERN eddy_buf_t *eddy_buf_alloc(eddy_allocator_t *a, size_t initial, size_t max_capacity);

/** eddy_buf_alloc(NULL, initial, EDDY_BUF_DEFAULT_MAX_CAPACITY). */
EDDY_EXTERN eddy_buf_t *eddy_buf_new(size_t initial);

/** A new buffer holding a copy of len bytes at src. NULL when out of memory. */
EDDY_EXTERN eddy_buf_t *eddy_buf_from(const void *src, size_t len);

/** A new buffer holding a copy of the string s, without its terminating NUL. */
EDDY_EXTERN eddy_buf_t *eddy_buf_from_str(const char *s);

/**
 * Take one more reference; returns b. Any thread. A retain the count cannot take is refused,
 * where Netty's retain() throws IllegalReferenceCountException: at 0 (b was released already:
 * a use after its last release) or at UINT32_MAX (one more would wrap to 0). Debug builds
 * (NDEBUG not defined) then say so through the log hook (common.h) and abort; release builds
 * leave the count as it is and return NULL, the first refusal logged. A retain at 0 counts
 * as a misuse (eddy_leak_misuse_count(); in paranoid mode reported with b's trail).
 */
EDDY_EXTERN eddy_buf_t *eddy_buf_retain(eddy_buf_t *b);

/**
 * Drop one reference: 1 when this call freed the buffer (its memory back to its allocator),
 * 0 when references remain, EDDY_EREFCNT (nothing changed; reported with its trail in paranoid
 * leak detection) when the count was already zero. Any thread.
 */
EDDY_EXTERN int eddy_buf_release(eddy_buf_t *b);

/** The reference count that retain and release act on (the parent's, for plain views). */
EDDY_EXTERN uint32_t eddy_buf_refcnt(const eddy_buf_t *b);

/** Record a touch (hint: a static string) in b's trail when leak detection is paranoid. */
EDDY_EXTERN void eddy_buf_touch(eddy_buf_t *b, const char *hint);

/** The buffer behind a message of type EDDY_MSG_BUF; NULL for any other message. Borrows. */
EDDY_EXTERN eddy_buf_t *eddy_buf_of(eddy_msg_t *msg);

/** The message header of b, to pass it down a pipeline. Borrows. */
EDDY_EXTERN eddy_msg_t *eddy_buf_msg(eddy_buf_t *b);

/** The allocator b's memory came from (its parent's, for views). */
EDDY_EXTERN eddy_allocator_t *eddy_buf_allocator(const eddy_buf_t *b);

/* ---------------------------------------------------------------------------------------
 * Indexes and capacity (inline; defined at the bottom)
 */

static inline size_t eddy_buf_reader_index(const eddy_buf_t *b);
static inline size_t eddy_buf_writer_index(const eddy_buf_t *b);
static inline size_t eddy_buf_readable(const eddy_buf_t *b);
/** Bytes writable without growing. */
static inline size_t eddy_buf_writable(const eddy_buf_t *b);
/** Bytes writable if the buffer grows to its max capacity. */
static inline size_t eddy_buf_max_writable(const eddy_buf_t *b);
static inline size_t eddy_buf_capacity(const eddy_buf_t *b);
static inline size_t eddy_buf_max_capacity(const eddy_buf_t *b);
static inline bool eddy_buf_is_readable(const eddy_buf_t *b);
/** The first readable byte. Valid until the buffer grows or is released. */
static inline const uint8_t *eddy_buf_read_ptr(const eddy_buf_t *b);
/** The first writable byte; pair with eddy_buf_produce() after writing into it. */
static inline uint8_t *eddy_buf_write_ptr(eddy_buf_t *b);

/** Set the reader index: EDDY_EBOUNDS unless 0 <= i <= writer index. */
EDDY_EXTERN int eddy_buf_set_reader_index(eddy_buf_t *b, size_t i);

/** Set the writer index: EDDY_EBOUNDS unless reader index <= i <= capacity. */
EDDY_EXTERN int eddy_buf_set_writer_index(eddy_buf_t *b, size_t i);

/** Both indexes to 0; the memory stays. */
EDDY_EXTERN void eddy_buf_clear(eddy_buf_t *b);

/**
 * Make room for n more bytes after the writer index, growing the capacity (doubling from 64
 * bytes up to 4 MiB, then by 4 MiB steps, never past the max capacity). 0, EDDY_ECAPACITY when
 * it would pass the max capacity, EDDY_ENOMEM. Growth keeps the bytes before the writer index
 * only: bytes set past it (eddy_buf_set_*) are not carried over. Views (slices, duplicates)
 * never grow.
 * Inline, like produce, skip, the writes and the integer sets below: a caller that does not
 * inline one calls the exported function of the same name.
 */
EDDY_EXTERN inline int eddy_buf_ensure_writable(eddy_buf_t *b, size_t n);

/** Advance the writer index by n after writing into eddy_buf_write_ptr(). EDDY_EBOUNDS. */
EDDY_EXTERN inline int eddy_buf_produce(eddy_buf_t *b, size_t n);

/** Skip n readable bytes. EDDY_EBOUNDS when fewer than n are readable. */
EDDY_EXTERN inline int eddy_buf_skip(eddy_buf_t *b, size_t n);

/** Move the readable bytes to index 0, freeing the space of the bytes already read. */
EDDY_EXTERN void eddy_buf_discard_read_bytes(eddy_buf_t *b);

/* ---------------------------------------------------------------------------------------
 * Relative writes (at the writer index, which advances) and reads (at the reader index, which
 * advances). Integers are big endian (network order) unless the name ends _le.
 * Writes return 0, EDDY_ECAPACITY or EDDY_ENOMEM; reads return 0 or EDDY_EBOUNDS.
 * The integer writes and eddy_buf_write_bytes() are inline; growing is a call.
 */

EDDY_EXTERN inline int eddy_buf_write_u8(eddy_buf_t *b, uint8_t v);
EDDY_EXTERN inline int eddy_buf_write_u16(eddy_buf_t *b, uint16_t v);
EDDY_EXTERN inline int eddy_buf_write_u32(eddy_buf_t *b, uint32_t v);
EDDY_EXTERN inline int eddy_buf_write_u64(eddy_buf_t *b, uint64_t v);
EDDY_EXTERN inline int eddy_buf_write_u16_le(eddy_buf_t *b, uint16_t v);
EDDY_EXTERN inline int eddy_buf_write_u32_le(eddy_buf_t *b, uint32_t v);
EDDY_EXTERN inline int eddy_buf_write_u64_le(eddy_buf_t *b, uint64_t v);
/** Append n bytes from src. */
EDDY_EXTERN inline int eddy_buf_write_bytes(eddy_buf_t *b, const void *src, size_t n);
/** Append n zero bytes. */
EDDY_EXTERN int eddy_buf_write_zero(eddy_buf_t *b, size_t n);
/** Append n readable bytes of src, advancing src's reader index; EDDY_EBOUNDS if src has fewer. */
EDDY_EXTERN int eddy_buf_write_buf(eddy_buf_t *b, eddy_buf_t *src, size_t n);

EDDY_EXTERN int eddy_buf_read_u8(eddy_buf_t *b, uint8_t *out);
EDDY_EXTERN int eddy_buf_read_u16(eddy_buf_t *b, uint16_t *out);
EDDY_EXTERN int eddy_buf_read_u32(eddy_buf_t *b, uint32_t *out);
EDDY_EXTERN int eddy_buf_read_u64(eddy_buf_t *b, uint64_t *out);
EDDY_EXTERN int eddy_buf_read_u16_le(eddy_buf_t *b, uint16_t *out);
EDDY_EXTERN int eddy_buf_read_u32_le(eddy_buf_t *b, uint32_t *out);
EDDY_EXTERN int eddy_buf_read_u64_le(eddy_buf_t *b, uint64_t *out);
/** Copy n readable bytes to dst. */
EDDY_EXTERN int eddy_buf_read_bytes(eddy_buf_t *b, void *dst, size_t n);
/** Move n readable bytes into dst (appended at dst's writer index; dst grows as needed, and
 * EDDY_ECAPACITY or EDDY_ENOMEM when it cannot, nothing moved). */
EDDY_EXTERN int eddy_buf_read_buf(eddy_buf_t *b, eddy_buf_t *dst, size_t n);

/* ---------------------------------------------------------------------------------------
 * Absolute gets and sets: at index i, indexes untouched, within [0, capacity). What is set at
 * or past the writer index does not survive a growth (eddy_buf_ensure_writable).
 * Return 0 or EDDY_EBOUNDS. The integer sets are inline.
 */

EDDY_EXTERN int eddy_buf_get_u8(const eddy_buf_t *b, size_t i, uint8_t *out);
EDDY_EXTERN int eddy_buf_get_u16(const eddy_buf_t *b, size_t i, uint16_t *out);
EDDY_EXTERN int eddy_buf_get_u32(const eddy_buf_t *b, size_t i, uint32_t *out);
EDDY_EXTERN int eddy_buf_get_u64(const eddy_buf_t *b, size_t i, uint64_t *out);
EDDY_EXTERN int eddy_buf_get_u16_le(const eddy_buf_t *b, size_t i, uint16_t *out);
EDDY_EXTERN int eddy_buf_get_u32_le(const eddy_buf_t *b, size_t i, uint32_t *out);
EDDY_EXTERN int eddy_buf_get_u64_le(const eddy_buf_t *b, size_t i, uint64_t *out);
EDDY_EXTERN int eddy_buf_get_bytes(const eddy_buf_t *b, size_t i, void *dst, size_t n);
/** Copy n bytes at i into dst at dst's writer index (dst grows; EDDY_ECAPACITY). */
EDDY_EXTERN int eddy_buf_get_buf(const eddy_buf_t *b, size_t i, eddy_buf_t *dst, size_t n);

EDDY_EXTERN inline int eddy_buf_set_u8(eddy_buf_t *b, size_t i, uint8_t v);
EDDY_EXTERN inline int eddy_buf_set_u16(eddy_buf_t *b, size_t i, uint16_t v);
EDDY_EXTERN inline int eddy_buf_set_u32(eddy_buf_t *b, size_t i, uint32_t v);
EDDY_EXTERN inline int eddy_buf_set_u64(eddy_buf_t *b, size_t i, uint64_t v);
EDDY_EXTERN inline int eddy_buf_set_u16_le(eddy_buf_t *b, size_t i, uint16_t v);
EDDY_EXTERN inline int eddy_buf_set_u32_le(eddy_buf_t *b, size_t i, uint32_t v);
EDDY_EXTERN inline int eddy_buf_set_u64_le(eddy_buf_t *b, size_t i, uint64_t v);
EDDY_EXTERN int eddy_buf_set_bytes(eddy_buf_t *b, size_t i, const void *src, size_t n);
/** Copy n readable bytes of src (src's indexes untouched) to b at i. */
EDDY_EXTERN int eddy_buf_set_buf(eddy_buf_t *b, size_t i, const eddy_buf_t *src, size_t n);

/* ---------------------------------------------------------------------------------------
 * Search (decoders use these). Indexes are absolute; the range is [from, to) and must lie
 * within [0, writer index]. Return the index of the first match, EDDY_ENOENT when there is
 * none, EDDY_EBOUNDS for a bad range.
 */

EDDY_EXTERN int64_t eddy_buf_find(const eddy_buf_t *b, size_t from, size_t to, uint8_t byte);
/** An empty needle (n == 0) is found at from. */
EDDY_EXTERN int64_t eddy_buf_find_bytes(const eddy_buf_t *b, size_t from, size_t to,
                                        const void *needle, size_t n);

/* ---------------------------------------------------------------------------------------
 * Views: slices and duplicates share the parent's memory. A plain view shares the parent's
 * reference count (retain and release on it act on the parent) and is valid while the parent
 * is; a retained view holds one reference to the parent and has a count of its own, so it
 * lives on after the parent is released (Netty 4.1's retainedSlice). Views have their own
 * indexes, cannot grow, and see writes through the shared memory. If the parent grows after
 * a view was made, the parent moves to new memory and the view keeps the old (kept alive
 * until the parent is freed). All return NULL on a bad range or out of memory.
 */

/** A view of len bytes at index i (i + len <= capacity); its indexes are 0 and len. */
EDDY_EXTERN eddy_buf_t *eddy_buf_slice(eddy_buf_t *b, size_t i, size_t len);
EDDY_EXTERN eddy_buf_t *eddy_buf_retained_slice(eddy_buf_t *b, size_t i, size_t len);
/** A view of the whole buffer with the same indexes. */
EDDY_EXTERN eddy_buf_t *eddy_buf_duplicate(eddy_buf_t *b);
EDDY_EXTERN eddy_buf_t *eddy_buf_retained_duplicate(eddy_buf_t *b);
/** A slice of the next n readable bytes, advancing the reader index: zero-copy framing. */
EDDY_EXTERN eddy_buf_t *eddy_buf_read_slice(eddy_buf_t *b, size_t n);
EDDY_EXTERN eddy_buf_t *eddy_buf_read_retained_slice(eddy_buf_t *b, size_t n);
/** A new buffer (same allocator, default max capacity) holding a copy of len bytes at i. */
EDDY_EXTERN eddy_buf_t *eddy_buf_copy(const eddy_buf_t *b, size_t i, size_t len);

/* ---------------------------------------------------------------------------------------
 * Composite buffers: component buffers seen as one readable range without copying.
 * A composite is a message (EDDY_MSG_COMPOSITE) with a reference count; freeing it releases
 * its components. Not thread-safe, like a buffer.
 */

/** An empty composite holding at most max_components (0: 1024). NULL when out of memory. */
EDDY_EXTERN eddy_composite_t *eddy_composite_new(size_t max_components);

/** Like eddy_buf_retain(): c, or NULL when refused (count 0 or UINT32_MAX; debug builds
 * abort). */
EDDY_EXTERN eddy_composite_t *eddy_composite_retain(eddy_composite_t *c);
/** Like eddy_buf_release(): 1 freed (components released), 0 still referenced, EDDY_EREFCNT. */
EDDY_EXTERN int eddy_composite_release(eddy_composite_t *c);
/** The composite behind a message of type EDDY_MSG_COMPOSITE; NULL otherwise. Borrows. */
EDDY_EXTERN eddy_composite_t *eddy_composite_of(eddy_msg_t *msg);
EDDY_EXTERN eddy_msg_t *eddy_composite_msg(eddy_composite_t *c);

/**
 * Append b's readable bytes as the last component. Takes ownership of b, also on failure
 * (then b is released): EDDY_ENOBUFS when max_components are held, EDDY_ENOMEM.
 * An empty b is released and not added; b NULL is EDDY_EINVAL.
 */
EDDY_EXTERN int eddy_composite_add(eddy_composite_t *c, eddy_buf_t *b);

/** Readable bytes over all components. */
EDDY_EXTERN size_t eddy_composite_readable(const eddy_composite_t *c);
/** Number of components holding unread bytes. */
EDDY_EXTERN size_t eddy_composite_components(const eddy_composite_t *c);

/** Byte at offset off from the reader index: 0 or EDDY_EBOUNDS. */
EDDY_EXTERN int eddy_composite_get_u8(const eddy_composite_t *c, size_t off, uint8_t *out);
/** Copy n bytes at offset off from the reader index, across components. 0 or EDDY_EBOUNDS. */
EDDY_EXTERN int eddy_composite_get_bytes(const eddy_composite_t *c, size_t off, void *dst,
                                         size_t n);
/** Read (advance) integers across component boundaries: 0 or EDDY_EBOUNDS. */
EDDY_EXTERN int eddy_composite_read_u8(eddy_composite_t *c, uint8_t *out);
EDDY_EXTERN int eddy_composite_read_u16(eddy_composite_t *c, uint16_t *out);
EDDY_EXTERN int eddy_composite_read_u32(eddy_composite_t *c, uint32_t *out);
EDDY_EXTERN int eddy_composite_read_u64(eddy_composite_t *c, uint64_t *out);
/** Copy n bytes out and advance. 0 or EDDY_EBOUNDS. */
EDDY_EXTERN int eddy_composite_read_bytes(eddy_composite_t *c, void *dst, size_t n);
/** Advance past n bytes; components read to the end are released. 0 or EDDY_EBOUNDS. */
EDDY_EXTERN int eddy_composite_skip(eddy_composite_t *c, size_t n);

/**
 * Take the next n bytes as one buffer and advance: a retained slice (no copy) when they lie
 * in one component, else a copy. The caller owns it. NULL on EDDY_EBOUNDS or out of memory.
 */
EDDY_EXTERN eddy_buf_t *eddy_composite_read_buf(eddy_composite_t *c, size_t n);

/** Offset from the reader index of the first byte equal to byte; EDDY_ENOENT if none. */
EDDY_EXTERN int64_t eddy_composite_find(const eddy_composite_t *c, uint8_t byte);
/** Offset of the first occurrence of needle (it may span components); EDDY_ENOENT if none. */
EDDY_EXTERN int64_t eddy_composite_find_bytes(const eddy_composite_t *c, const void *needle,
                                              size_t n);

/**
 * Fill iov with the readable ranges, at most max entries (pass IOV_MAX for writev). Returns
 * the number of entries filled. The pointers stay valid until the composite is read or freed.
 */
EDDY_EXTERN int eddy_composite_iovec(const eddy_composite_t *c, struct iovec *iov, int max);

/**
 * Copy all readable bytes into one new buffer and advance past them. The caller owns it.
 * NULL when out of memory (the composite is unchanged).
 */
EDDY_EXTERN eddy_buf_t *eddy_composite_consolidate(eddy_composite_t *c);

/* ---------------------------------------------------------------------------------------
 * Allocators. One interface, two kinds: unpooled (malloc per buffer) and pooled (size classes,
 * chunks of pages and subpages, several arenas, per-thread caches), pooled by default.
 * Allocator functions are thread-safe.
 */

typedef struct eddy_pool_options_s {
    size_t arenas;       /* 0: one per online CPU (one per loop thread by default) */
    size_t chunk_size;   /* 0: 4 MiB; a power of two, at least 64 KiB. Larger requests
                            than half a chunk are unpooled. */
    size_t cache_bytes;  /* per thread and size class, the most bytes a thread keeps cached;
                            0: 256 KiB. */
    bool no_cache;       /* true: no per-thread caches, every operation takes an arena lock */
} eddy_pool_options_t;

/** The process-wide default allocator: pooled, or unpooled if EDDY_ALLOCATOR=unpooled. */
EDDY_EXTERN eddy_allocator_t *eddy_allocator_default(void);

/** The process-wide unpooled allocator (malloc per buffer). */
EDDY_EXTERN eddy_allocator_t *eddy_allocator_unpooled(void);

/** A new pooled allocator (opts NULL: defaults). NULL on bad options or out of memory. */
EDDY_EXTERN eddy_allocator_t *eddy_pooled_allocator_new(const eddy_pool_options_t *opts);

/**
 * Free an allocator made by eddy_pooled_allocator_new(): EDDY_EBUSY (nothing freed) while
 * buffers from it are alive; EDDY_EINVAL for the process-wide ones. No other thread may be
 * allocating from it. Caches other threads keep for it are emptied.
 */
EDDY_EXTERN int eddy_allocator_free(eddy_allocator_t *a);

/** "pooled" or "unpooled". */
EDDY_EXTERN const char *eddy_allocator_name(const eddy_allocator_t *a);

/**
 * Return memory held but unused: empties the calling thread's cache for a and frees every
 * completely free chunk. Returns the bytes given back. Any thread.
 */
EDDY_EXTERN size_t eddy_allocator_trim(eddy_allocator_t *a);

#define EDDY_POOL_MAX_ARENAS 64

typedef struct eddy_arena_metrics_s {
    size_t held;        /* bytes of chunks the arena holds */
    size_t allocated;   /* bytes of blocks handed out, to buffers or to thread caches */
    size_t chunks;
    size_t caches;      /* thread caches bound to the arena */
    uint64_t allocations; /* blocks handed out by the arena (cache misses) */
    uint64_t deallocations;
} eddy_arena_metrics_t;

typedef struct eddy_allocator_metrics_s {
    size_t used;        /* bytes inside live buffers (size-class rounded), all arenas */
    size_t held;        /* bytes taken from the system: chunks, plus unpooled buffers */
    size_t cached;      /* bytes parked in thread caches */
    size_t unpooled;    /* bytes of live buffers too large to pool (or of the unpooled kind) */
    size_t caches;      /* live thread caches */
    size_t arenas;
    eddy_arena_metrics_t arena[EDDY_POOL_MAX_ARENAS];
} eddy_allocator_metrics_t;

/** Fill m with a snapshot of a's memory use. Any thread; figures move while it runs. */
EDDY_EXTERN void eddy_allocator_metrics(eddy_allocator_t *a, eddy_allocator_metrics_t *m);

typedef struct eddy_cache_metrics_s {
    size_t arena;        /* index of the arena the thread is bound to */
    size_t cached;       /* bytes parked in this cache */
    uint64_t hits;       /* allocations served from the cache */
    uint64_t misses;     /* allocations that went to an arena */
} eddy_cache_metrics_t;

/** Call cb once per live thread cache of a, with a snapshot of its metrics. */
EDDY_EXTERN void eddy_allocator_foreach_cache(eddy_allocator_t *a,
                                              void (*cb)(const eddy_cache_metrics_t *m,
                                                         void *arg),
                                              void *arg);

/* ---------------------------------------------------------------------------------------
 * Leak detection. The count of live buffers is always kept. In paranoid mode (environment
 * EDDY_LEAK_DETECTION=paranoid, the CMake option EDDY_LEAK_PARANOID, or
 * eddy_leak_set_paranoid()) every buffer records the stack that allocated it and its last
 * touches (retain, release, views, eddy_buf_touch); buffers never released are reported at
 * exit and by eddy_leak_report(), and a release below zero is reported with its trail. Reports
 * are EDDY_LOG_ERROR messages to the log hook (common.h), one per buffer, unless
 * eddy_leak_report() is given a file; the one at exit runs on the thread that calls exit().
 */

/** Buffers allocated and not yet freed, in the whole process (views not counted). */
EDDY_EXTERN int64_t eddy_buf_live_count(void);

/** Turn paranoid tracking on or off for buffers allocated from now on. */
EDDY_EXTERN void eddy_leak_set_paranoid(bool on);
EDDY_EXTERN bool eddy_leak_is_paranoid(void);

/**
 * Write every live tracked buffer, with its allocation stack and touches, to out, each
 * report starting "eddy: LEAK:"; out NULL: to the log hook instead, one EDDY_LOG_ERROR
 * message per buffer (by default "eddy: LEAK: ..." lines on stderr). Returns how many live
 * tracked buffers there are. Any thread.
 */
EDDY_EXTERN size_t eddy_leak_report(FILE *out);

/** Double releases (releases at count zero) and retains at count zero seen since start. */
EDDY_EXTERN uint64_t eddy_leak_misuse_count(void);

/* ---------------------------------------------------------------------------------------
 * inline definitions
 */

struct eddy__leak_rec_s;

struct eddy_buf_s {
    eddy_msg_t _msg;          /* type EDDY_MSG_BUF; the count of roots and retained views */
    uint8_t *_base;           /* index 0 of this buffer */
    size_t _rd;               /* reader index */
    size_t _wr;               /* writer index */
    size_t _cap;              /* capacity */
    size_t _max_cap;          /* max capacity */
    eddy_buf_t *_parent;      /* views: the buffer holding the memory and the count */
    eddy_allocator_t *_alloc; /* roots: where the memory came from */
    void *_mem;               /* roots: the block, as the allocator handed it out */
    size_t _mem_size;         /* roots: the block's usable size (>= _cap) */
    eddy_buf_t *_views;       /* roots: plain views and retired blocks freed with the root */
    eddy_buf_t *_next_view;   /* plain views: link in the parent's _views list */
    struct eddy__leak_rec_s *_leak; /* paranoid mode: the trail */
    uint16_t _flags;          /* what this header is: set when it is made, then only read */
    uint8_t _had_views;       /* roots: views may point into the block (atomic: any thread sets it) */
    uint8_t _pad;
    uint32_t _class;          /* roots: the allocator's size class of _mem */
};

static inline size_t eddy_buf_reader_index(const eddy_buf_t *b)
{
    return b->_rd;
}

static inline size_t eddy_buf_writer_index(const eddy_buf_t *b)
{
    return b->_wr;
}

static inline size_t eddy_buf_readable(const eddy_buf_t *b)
{
    return b->_wr - b->_rd;
}

static inline size_t eddy_buf_writable(const eddy_buf_t *b)
{
    return b->_cap - b->_wr;
}

static inline size_t eddy_buf_max_writable(const eddy_buf_t *b)
{
    return b->_max_cap - b->_wr;
}

static inline size_t eddy_buf_capacity(const eddy_buf_t *b)
{
    return b->_cap;
}

static inline size_t eddy_buf_max_capacity(const eddy_buf_t *b)
{
    return b->_max_cap;
}

static inline bool eddy_buf_is_readable(const eddy_buf_t *b)
{
    return b->_wr > b->_rd;
}

static inline const uint8_t *eddy_buf_read_ptr(const eddy_buf_t *b)
{
    return b->_base + b->_rd;
}

static inline uint8_t *eddy_buf_write_ptr(eddy_buf_t *b)
{
    return b->_base + b->_wr;
}

/*
 * The accessors below are C99 inline definitions: a caller that does not inline one calls the
 * exported function of the same name, which buffer/buf.c emits. Being external, they may not
 * use the static inline functions above, so they read the fields themselves.
 */

/* Not API: the out-of-line half of eddy_buf_ensure_writable(), for when the buffer must grow. */
EDDY_EXTERN int eddy__buf_grow(eddy_buf_t *b, size_t n);

inline int eddy_buf_ensure_writable(eddy_buf_t *b, size_t n)
{
    return EDDY_LIKELY(n <= b->_cap - b->_wr) ? 0 : eddy__buf_grow(b, n);
}

inline int eddy_buf_produce(eddy_buf_t *b, size_t n)
{
    if (n > b->_cap - b->_wr) {
        return EDDY_EBOUNDS;
    }
    b->_wr += n;
    return 0;
}

inline int eddy_buf_skip(eddy_buf_t *b, size_t n)
{
    if (n > b->_wr - b->_rd) {
        return EDDY_EBOUNDS;
    }
    b->_rd += n;
    return 0;
}

inline int eddy_buf_write_bytes(eddy_buf_t *b, const void *src, size_t n)
{
    int err = eddy_buf_ensure_writable(b, n);
    if (err != 0) {
        return err;
    }
    /* src may be NULL when n is 0, and memmove's arguments may not. memmove, not memcpy: when
     * the caller's n has a known bound, GCC 12 expands memcpy inline as rep movsq, which cost
     * 2-3 ns more per copy of up to 244 bytes than libc's memmove (the same code as its memcpy)
     * on the EPYC of bench_buffer mixed_1t (27.7 against 25.3 ns per operation). */
    if (n > 0) {
        memmove(b->_base + b->_wr, src, n);
        b->_wr += n;
    }
    return 0;
}

/*
 * Integers, stored byte by byte so that no alignment is needed: GCC and Clang merge each
 * sequence into one store and a byte swap (checked with GCC 12 and Clang 14 at -O2); a loop
 * over the bytes they do not unroll at -O2. Reads and gets stay out of line: inlined, they
 * let GCC's -Wmaybe-uninitialized see callers that use the value after a failed read.
 */
#define EDDY__ST_8(p, v) ((p)[0] = (uint8_t)(v))
#define EDDY__ST_BE16(p, v) ((p)[0] = (uint8_t)((v) >> 8), (p)[1] = (uint8_t)(v))
#define EDDY__ST_BE32(p, v)                                                                    \
    ((p)[0] = (uint8_t)((v) >> 24), (p)[1] = (uint8_t)((v) >> 16),                             \
     (p)[2] = (uint8_t)((v) >> 8), (p)[3] = (uint8_t)(v))
#define EDDY__ST_BE64(p, v) (EDDY__ST_BE32(p, (v) >> 32), EDDY__ST_BE32((p) + 4, (v)))
#define EDDY__ST_LE16(p, v) ((p)[0] = (uint8_t)(v), (p)[1] = (uint8_t)((v) >> 8))
#define EDDY__ST_LE32(p, v) (EDDY__ST_LE16(p, v), EDDY__ST_LE16((p) + 2, (v) >> 16))
#define EDDY__ST_LE64(p, v) (EDDY__ST_LE32(p, v), EDDY__ST_LE32((p) + 4, (v) >> 32))

/* One family per width and byte order: write, set. */
#define EDDY__BUF_INT_OPS(suffix, type, width, st)                                             \
    inline int eddy_buf_write_##suffix(eddy_buf_t *b, type v)                                  \
    {                                                                                          \
        int err = eddy_buf_ensure_writable(b, width);                                          \
        if (err != 0) {                                                                        \
            return err;                                                                        \
        }                                                                                      \
        uint8_t *p = b->_base + b->_wr; /* once: the byte stores might alias b's fields */      \
        st(p, v);                                                                              \
        b->_wr += width;                                                                       \
        return 0;                                                                              \
    }                                                                                          \
    inline int eddy_buf_set_##suffix(eddy_buf_t *b, size_t i, type v)                          \
    {                                                                                          \
        if (i > b->_cap || width > b->_cap - i) {                                              \
            return EDDY_EBOUNDS;                                                               \
        }                                                                                      \
        uint8_t *p = b->_base + i;                                                             \
        st(p, v);                                                                              \
        return 0;                                                                              \
    }

EDDY__BUF_INT_OPS(u8, uint8_t, 1, EDDY__ST_8)
EDDY__BUF_INT_OPS(u16, uint16_t, 2, EDDY__ST_BE16)
EDDY__BUF_INT_OPS(u32, uint32_t, 4, EDDY__ST_BE32)
EDDY__BUF_INT_OPS(u64, uint64_t, 8, EDDY__ST_BE64)
EDDY__BUF_INT_OPS(u16_le, uint16_t, 2, EDDY__ST_LE16)
EDDY__BUF_INT_OPS(u32_le, uint32_t, 4, EDDY__ST_LE32)
EDDY__BUF_INT_OPS(u64_le, uint64_t, 8, EDDY__ST_LE64)

#undef EDDY__BUF_INT_OPS
#undef EDDY__ST_8
#undef EDDY__ST_BE16
#undef EDDY__ST_BE32
#undef EDDY__ST_BE64
#undef EDDY__ST_LE16
#undef EDDY__ST_LE32
#undef EDDY__ST_LE64

#ifdef __cplusplus
}
#endif
#endif /* EDDY_BUFFER_H */
