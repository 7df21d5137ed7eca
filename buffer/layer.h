/*
 * buffer/layer.h: what the buffer layer offers the layers above it (docs/architecture.md),
 * and nothing else: the library's log (log.c; the API is in common.h), references that are
 * refused rather than wrapped (common.c), the buffer layer's part of
 * eddy_library_shutdown(), and descriptors' order told to ThreadSanitizer. The layer's own internals are in buffer/internal.h. Not installed.
 */
#ifndef EDDY_BUFFER_LAYER_H
#define EDDY_BUFFER_LAYER_H

#include <eddy/buffer.h>
#include <eddy/common.h>

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------
 * The log, for every layer.
 */
/* The longest message eddy__log() formats, its NUL included; longer ones are cut to end in
 * "...". The library's one-line messages stay well below. */
#define EDDY__LOG_MAX 1024

/* Whether a message at level passes the threshold: test before costly formatting. */
bool eddy__log_enabled(eddy_log_level_t level);

/* Log one message at level: formatted (no "eddy: " prefix, no final newline) into a bounded
 * buffer on the stack and handed to the hook once, when the level passes the threshold. No
 * allocation. Any thread. */
void eddy__log(eddy_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Log text, already formatted, of any length and possibly several lines, as one message. */
void eddy__log_text(eddy_log_level_t level, const char *text);

/* ---------------------------------------------------------------------------------------
 * Randomness, for every layer (WebSocket masking and handshake keys, jitter): n bytes from
 * the kernel's CSPRNG (getrandom(2), or /dev/urandom where it is missing) into buf. 0, or a
 * negative errno. Any thread. Not OpenSSL's: eddy builds without it (EDDY_WITH_TLS=OFF).
 */
int eddy__random_bytes(void *buf, size_t n);

/* ---------------------------------------------------------------------------------------
 * Reference counts: taking a reference that is refused rather than wrapped, for every
 * refcounted type (messages and buffers here, timers and futures in reactor/).
 *
 * A retain on a count of 0 comes after the last release (the object is freed, or being freed
 * on another thread), one on UINT32_MAX would wrap the count to 0 and let the next release
 * free an object still in use. Netty's retain() throws IllegalReferenceCountException; here
 * the count is left as it is, the refusal reported through the log hook (common.h), and debug
 * builds abort there, where the bug is, rather than at a use after free later on.
 */
/*
 * Add one to *cnt unless it is 0 or UINT32_MAX. false: refused, *cnt unchanged, *found the
 * count met. Relaxed, as the fetch-add it replaces: a new reference orders nothing, the final
 * release's acquire does. A compare-and-swap rather than a fetch-add, so that a refused
 * retain never makes a freed object look alive, even for a moment.
 */
static inline bool eddy__refcnt_inc(_Atomic uint32_t *cnt, uint32_t *found)
{
    uint32_t c = atomic_load_explicit(cnt, memory_order_relaxed);
    do {
        if (c == 0 || c == UINT32_MAX) {
            *found = c;
            return false;
        }
    } while (!atomic_compare_exchange_weak_explicit(cnt, &c, c + 1, memory_order_relaxed,
                                                    memory_order_relaxed));
    return true;
}

/*
 * A reference more on an object whose count only eddy touches (channels, contexts, pools,
 * jobs): no refusal to report, since a count of 0 or at its maximum here is a bug in eddy.
 * Relaxed, as eddy__refcnt_inc().
 */
static inline void eddy__refcnt_add(_Atomic uint32_t *cnt)
{
    uint32_t old = atomic_fetch_add_explicit(cnt, 1, memory_order_relaxed);
    assert(old > 0 && old < UINT32_MAX); /* no retain after the last release, no wrap */
    (void)old;
}

/*
 * Drop n references: true when they were the last ones, and the caller frees. acq_rel,
 * pairing with itself: the release publishes this holder's writes, the acquire lets the last
 * holder see every other holder's before it frees.
 */
static inline bool eddy__refcnt_sub(_Atomic uint32_t *cnt, uint32_t n)
{
    uint32_t old = atomic_fetch_sub_explicit(cnt, n, memory_order_acq_rel);
    assert(old >= n); /* no release after the last */
    return old == n;
}

/*
 * Report a refused retain of obj, a kind ("buffer", "message", "timer", "future") whose count
 * was count, through the log hook (EDDY_LOG_ERROR); then abort when refusals are fatal
 * (buffer/common.c). Release builds report the first refusal only.
 */
void eddy__refcnt_refused(const char *kind, const void *obj, uint32_t count);

/*
 * Whether a refused retain aborts the process: by default yes in debug builds (NDEBUG not
 * defined), no in release builds. For tests of the release behaviour; returns the setting
 * before. Any thread.
 */
bool eddy__refcnt_set_fatal(bool on);

/* eddy__refcnt_inc() with a refusal reported (eddy__refcnt_refused()): whether it took one. */
static inline bool eddy__refcnt_retain(_Atomic uint32_t *cnt, const char *kind, const void *obj)
{
    uint32_t found;
    if (EDDY_LIKELY(eddy__refcnt_inc(cnt, &found))) {
        return true;
    }
    eddy__refcnt_refused(kind, obj, found);
    return false;
}

/* ---------------------------------------------------------------------------------------
 * Growing arrays, for every layer.
 */
/*
 * items, an array of *cap elements of size bytes each, reallocated for an append: to twice
 * as many, or to first when *cap is 0. The new array, its count in *cap; NULL when out of
 * memory or the size would overflow, items and *cap as they were. Not for hot paths: an
 * array grows a logarithmic number of times.
 */
void *eddy__array_grow(void *items, size_t *cap, size_t size, size_t first);

/* ---------------------------------------------------------------------------------------
 * Searches of composite buffers, for the decoder's cumulation (codec/decoder.c).
 */
/*
 * The offset in c's readable bytes of the first match of needle (n >= 1 bytes) that starts
 * at or after from (from <= readable), or EDDY_ENOENT. eddy_composite_find_bytes() is the
 * search from 0. Borrows c.
 */
int64_t eddy__composite_find(const eddy_composite_t *c, size_t from, const void *needle,
                             size_t n);

/* ---------------------------------------------------------------------------------------
 * Shutdown (reactor/shutdown.c runs every layer's part of eddy_library_shutdown()).
 */
/*
 * Free what the buffer module keeps for the process: the default pooled allocator (chunks,
 * arenas, stashes; threads' caches of it become orphans that their threads free), the
 * calling thread's state (caches, recycled headers), the depot of recycled headers and the
 * leak quarantine. After it the default allocator is the unpooled one. 0, or EDDY_EBUSY,
 * and nothing freed, while a buffer is alive or a block of the default pool is out. One
 * thread, with no other using buffers.
 */
int eddy__buffer_shutdown(void);

/* ---------------------------------------------------------------------------------------
 * Descriptors under ThreadSanitizer (no-ops elsewhere).
 */
/*
 * TSan learns of a descriptor from the calls it intercepts (open, socket, accept4...); one
 * made by a call it does not (openat, an io_uring accept) looks to it like the one last
 * closed under that number, maybe on another thread, and a close or read on it like a race
 * with that thread's last use. The kernel orders the close before the call that hands the
 * number out again; these say so to TSan: eddy__fd_close() releases before it closes, and
 * eddy__fd_made() acquires after such a call made one. (__tsan_release and __tsan_acquire
 * are TSan's own annotations.)
 */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
extern char eddy__fd_order;
static inline void eddy__fd_made(void)
{
    __tsan_acquire(&eddy__fd_order);
}
static inline void eddy__fd_closing(void)
{
    __tsan_release(&eddy__fd_order);
}
#else
static inline void eddy__fd_made(void)
{
}
static inline void eddy__fd_closing(void)
{
}
#endif

/* close(fd), said to TSan first (above). */
static inline int eddy__fd_close(int fd)
{
    eddy__fd_closing();
    return close(fd);
}

#endif /* EDDY_BUFFER_LAYER_H */
