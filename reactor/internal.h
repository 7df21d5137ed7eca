/*
 * reactor/internal.h: the reactor's insides, for the reactor's own files only (and tests that
 * take them apart); the layers above see reactor/layer.h, which this includes. The build
 * does not put this header in their include trees (docs/architecture.md).
 *
 * - The sequence ring (sequence.c, ring.c, ring_builder.c, wait.c, processor.c, and the
 *   loop's task queue on it): the sequencer and barrier layouts that the wait strategies and
 *   processors read on their hot paths, fences and small helpers.
 * - The loop (loop.c and the files it is split into): the poller interface and its backends,
 *   the wake-up eventfd, descriptor dispatch, loop states, the task queue's slots and its
 *   run side, the marks the stall watchdog reads, the loop's clock, the timer heap, futures
 *   without an owner loop, the stall watchdog's list, and the reference counts that tests
 *   take to their limits.
 */
#ifndef EDDY_REACTOR_INTERNAL_H
#define EDDY_REACTOR_INTERNAL_H

#include "reactor/layer.h"

#include <eddy/ring.h>

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>

/* Shared atomics and the fields around them are kept 128 bytes apart (docs/style.md, "Hot
 * paths"). */
#define EDDY__LINE 128

/* A hint to the CPU that this is a spin-wait loop (x86 PAUSE, Arm YIELD). */
static inline void eddy__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

/*
 * Ask for the cache line at p in the exclusive state, ahead of a write. A producer on a ring
 * writes lines the consumer read a lap ago; fetching them early keeps that transfer off the
 * producer's next locked instruction, which would otherwise wait for it to drain (measured:
 * 64 to 36 ns per cross-thread task on the loop). x86 PREFETCHW (a no-op on CPUs without
 * it); elsewhere the compiler's write prefetch.
 */
static inline void eddy__prefetch_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetchw %0" ::"m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1, 3);
#endif
}

#if defined(__SANITIZE_THREAD__)
#define EDDY__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EDDY__TSAN 1
#endif
#endif

/*
 * A StoreLoad fence. TSan does not model fences (gcc rejects them under -fsanitize=thread),
 * so there it is a seq_cst read-modify-write of a private word: a full barrier on the
 * hardware just the same; TSan checks no plain accesses across it, as every access it
 * orders is atomic.
 */
static inline void eddy__fence_seq_cst(void)
{
#ifdef EDDY__TSAN
    static _Atomic int word;
    atomic_fetch_add_explicit(&word, 0, memory_order_seq_cst);
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* Zeroed memory of at least size bytes, aligned to EDDY__LINE; free() it. NULL when out. */
void *eddy__aligned_zalloc(size_t size);

/* Nanoseconds on the monotonic clock. */
int64_t eddy__now_ns(void);

/*
 * The gating sequences: an immutable snapshot that producers read through an atomic pointer.
 * A change installs a new snapshot; the old one cannot be freed at once because a producer may
 * still be reading it (there is no garbage collector to wait for, as Java's
 * AtomicReferenceFieldUpdater has), so it is kept on a list freed with the sequencer. Changes
 * are rare (consumers added or removed), so that costs a few bytes per change.
 */
typedef struct eddy__gating_s eddy__gating_t;
struct eddy__gating_s {
    eddy__gating_t *retired_next;
    size_t n;
    eddy_sequence_t *seqs[];
};

enum { EDDY__PRODUCER_SINGLE = 1, EDDY__PRODUCER_MULTI = 2 };

struct eddy_sequencer_s {
    /* Written by producers, read by consumers. */
    eddy_sequence_t cursor;
    /* Multi-producer: the gating minimum last computed, shared by the producers. */
    eddy_sequence_t gating_cache;
    /*
     * Single producer only: the last claimed sequence and the gating minimum last computed.
     * Plain fields of the one producer thread, on lines nobody else touches.
     */
    alignas(EDDY__LINE) int64_t next_value;
    int64_t cached_value;
    /* Read mostly, from here on. */
    alignas(EDDY__LINE) int kind;
    /* The wait strategy wants signal_all after each publish (it has one that can wake
     * someone); false for busy spin, yielding and sleeping, whose publishes then cost one
     * store and no call. */
    bool signal;
    int shift; /* log2(size): a slot's lap number is seq >> shift */
    int64_t size;
    int64_t claim_slack; /* EDDY__CLAIM_SLACK, at most an eighth of size */
    int64_t mask;
    eddy_wait_strategy_t *ws;
    /* Multi-producer: the ring to prefetch slots of (eddy_sequencer_set_ring), or NULL. */
    const eddy_ring_t *prefetch_ring;
    /* Multi-producer: per slot, the lap number of the sequence last published there. */
    _Atomic int32_t *available;
    _Atomic(eddy__gating_t *) gating;
    /* Serialises gating changes (producers never take it). */
    pthread_mutex_t gating_lock;
    eddy__gating_t *retired;
    /*
     * Readers of a gating snapshot, counted under the parity of gating_epoch they entered in:
     * remove_gating flips the epoch and waits for the old parity's readers, so none still
     * reads a sequence it removed (which its caller may then free).
     */
    alignas(EDDY__LINE) _Atomic unsigned gating_epoch;
    _Atomic int64_t gating_readers[2];
};

struct eddy_barrier_s {
    eddy_sequencer_t *seqr;
    eddy_wait_strategy_t *ws;
    const eddy_sequence_t *cursor;
    size_t ndeps;
    eddy_sequence_t **deps;
    /* The highest available sequence the last wait found; the consumer's thread only. */
    int64_t cached;
    /* Set by eddy_barrier_alert() on any thread. */
    _Atomic bool alerted;
};

static inline bool eddy__barrier_alerted(const eddy_barrier_t *b)
{
    /* Pairs with the release store in eddy_barrier_alert(): whatever the alerting thread saw
     * published before it alerted is visible after this load. */
    return atomic_load_explicit(&b->alerted, memory_order_acquire);
}

static inline int64_t eddy__barrier_dependent(const eddy_barrier_t *b)
{
    if (b->ndeps == 0)
        return eddy_sequence_get(b->cursor);
    int64_t min = eddy_sequence_get(b->deps[0]);
    for (size_t i = 1; i < b->ndeps; i++) {
        int64_t v = eddy_sequence_get(b->deps[i]);
        if (v < min)
            min = v;
    }
    return min;
}

/*
 * Multi-producer: the highest sequence in [lo, avail] up to which every slot is published
 * (avail: claimed), scanning the availability words in a tight loop. The lap number is the
 * same for every slot up to the end of the ring, so it is computed once per lap, not per slot.
 */
static inline int64_t eddy__sequencer_mp_published(const eddy_sequencer_t *s, int64_t lo,
                                                   int64_t avail)
{
    const _Atomic int32_t *av = s->available;
    int64_t seq = lo;
    while (seq <= avail) {
        int64_t idx = seq & s->mask;
        int32_t lap = (int32_t)(seq >> s->shift);
        int64_t end = seq + (s->size - 1 - idx); /* the last sequence of this lap */
        if (end > avail)
            end = avail;
        for (; seq <= end; seq++, idx++) {
            /* Pairs with the release store of the lap in mp_set_available() (ring.c): the slot's
             * contents, written before it, are visible once we see the lap. */
            if (atomic_load_explicit(&av[idx], memory_order_acquire) != lap)
                return seq - 1;
        }
    }
    return avail;
}

/* Multi-producer: seq's slot holds seq, published. Seeing it implies seq was claimed: a slot
 * holds the lap of the last sequence published there, and laps only grow. */
static inline bool eddy__sequencer_mp_is_published(const eddy_sequencer_t *s, int64_t seq)
{
    /* Pairs with the release store in mp_set_available() (ring.c). */
    return atomic_load_explicit(&s->available[seq & s->mask], memory_order_acquire) ==
           (int32_t)(seq >> s->shift);
}

/* How far ahead of a claim its producer fetches slots and lap entries (see
 * eddy__prefetch_write): far enough that the line arrives before it is written, near enough
 * that it is not the line another producer is writing now. Tuned on the loop's task queue. */
#define EDDY__PREFETCH_AHEAD 16

/*
 * Fetch the lines of the slot EDDY__PREFETCH_AHEAD past next, unless gating (the producers'
 * cached view of the slowest consumer) says that slot's last lap may not be consumed yet: on
 * a full ring the producers run a lap ahead of the consumer, and the line fetched there, in
 * the exclusive state, is the one the consumer is about to read. Taking it away made every
 * read of the loop's task queue miss (4 M tasks/s instead of 33 M in tasks_2p_split).
 */
static inline void eddy__sequencer_mp_prefetch(const eddy_sequencer_t *s, int64_t next,
                                               int64_t gating)
{
    int64_t ahead = next + EDDY__PREFETCH_AHEAD;
    if (ahead - s->size > gating)
        return;
    if (s->prefetch_ring != NULL)
        eddy__prefetch_write(eddy_ring_get(s->prefetch_ring, ahead));
    if (s->available != NULL)
        eddy__prefetch_write(&s->available[ahead & s->mask]);
}

/*
 * Claims a fetch-add may make with room unchecked: when the producers' cached view of the
 * consumers shows room for this many more than the cursor, another producer's claims between
 * our look and our fetch-add will not use it up unless that many of them race with us. An
 * eighth of the ring on small rings (the tests' 16-slot queues: 2, so racing producers do
 * overrun it and take the slow way).
 */
#define EDDY__CLAIM_SLACK 64

/*
 * Multi-producer, for a caller that must not wait without end (the loop's task queue): claim
 * one sequence with one fetch-add when the cached view of the consumers shows room for it
 * with EDDY__CLAIM_SLACK to spare, never retrying however many producers contend (a
 * compare-and-swap claim goes round again whenever another producer came first). Otherwise
 * EDDY_EAGAIN, nothing claimed: near a full ring the caller claims with
 * eddy_sequencer_try_next(), which never holds a claim it has no room for (a claim held
 * while waiting for room stops the consumer at its slot). After a claim the caller still
 * checks eddy__sequencer_mp_room(), which fails only when that many producers raced, and
 * waits there; a claimed sequence must be published, unless no consumer will ever read it.
 */
static inline int64_t eddy__sequencer_mp_claim(eddy_sequencer_t *s)
{
    /* Pairs with the release stores of the cache in ring.c: another producer's view. */
    int64_t cached = eddy_sequence_get(&s->gating_cache);
    int64_t cursor = eddy_sequence_get(&s->cursor);
    if (cursor + 1 + s->claim_slack - s->size > cached || cached > cursor)
        return EDDY_EAGAIN;
    int64_t seq = eddy_sequence_add_and_get(&s->cursor, 1);
    eddy__sequencer_mp_prefetch(s, seq, cached);
    return seq;
}

bool eddy__sequencer_mp_room_slow(eddy_sequencer_t *s, int64_t seq);

/* Whether the slot of seq, claimed, is free of the last lap: the slowest gating consumer has
 * passed seq - size. The cached minimum first, the gating sequences only when it says no. */
static inline bool eddy__sequencer_mp_room(eddy_sequencer_t *s, int64_t seq)
{
    /* Pairs with the release stores of the cache in ring.c: another producer's view. */
    int64_t cached = eddy_sequence_get(&s->gating_cache);
    if (seq - s->size <= cached && cached < seq)
        return true;
    return eddy__sequencer_mp_room_slow(s, seq);
}

/* The highest sequence in [lo, avail] up to which every slot is published (avail: claimed). */
static inline int64_t eddy__sequencer_highest_published(const eddy_sequencer_t *s, int64_t lo,
                                                        int64_t avail)
{
    if (s->kind == EDDY__PRODUCER_SINGLE)
        return avail;
    return eddy__sequencer_mp_published(s, lo, avail);
}

/*
 * Multi-producer, for a user whose slots publish themselves (the loop's task queue, taskq.c):
 * free the availability words, which it never writes, so that claims stop prefetching them
 * (two producers' prefetches pulled those lines back and forth for nothing). Afterwards only
 * the claim functions and the cursor may be used: nothing that publishes through s or reads
 * availability (eddy_sequencer_publish, barriers, eddy_sequencer_is_available). Before any
 * claim.
 */
void eddy__sequencer_drop_availability(eddy_sequencer_t *s);

/* Wake every waiter of s's wait strategy (after an alert). */
void eddy__sequencer_signal(eddy_sequencer_t *s);

/*
 * True once seq's slot may be read as far as the cursor tells: claimed and, with several
 * producers, published too. The cursor of a multi-producer sequencer counts claims, so a
 * waiter that looked at it alone would take a slot claimed by a producer that was then
 * preempted before it published, and spin on it until that producer ran again.
 */
static inline bool eddy__barrier_cursor_ready(const eddy_barrier_t *b, int64_t seq)
{
    if (b->seqr->kind == EDDY__PRODUCER_MULTI)
        return eddy__sequencer_mp_is_published(b->seqr, seq);
    return eddy_sequence_get(b->cursor) >= seq;
}

/*
 * What wait strategies wait on: a value >= seq once seq may be read through b, below seq
 * until then. With dependencies, their minimum (they pass only published slots); on the
 * cursor alone, the cursor once seq is published (eddy__barrier_cursor_ready).
 */
static inline int64_t eddy__barrier_probe(const eddy_barrier_t *b, int64_t seq)
{
    int64_t avail = eddy__barrier_dependent(b);
    if (b->ndeps == 0 && avail >= seq && b->seqr->kind == EDDY__PRODUCER_MULTI &&
        !eddy__sequencer_mp_is_published(b->seqr, seq))
        return seq - 1;
    return avail;
}

/*
 * eddy_barrier_wait_for(), inline for the processors: a consumer asking for what its last wait
 * found reads nothing shared but the alert flag, and one that finds seq already passed by the
 * cursor (or its dependencies) never calls into the wait strategy (Java's BatchEventProcessor
 * reaches the same by waiting once per batch).
 */
static inline int64_t eddy__barrier_wait_for(eddy_barrier_t *b, int64_t seq)
{
    if (eddy__barrier_alerted(b))
        return EDDY_ECANCELED;
    if (seq <= b->cached)
        return b->cached;
    int64_t avail = eddy__barrier_probe(b, seq);
    if (avail < seq) {
        avail = b->ws->ops->wait_for(b->ws, seq, b);
        if (avail < seq)
            return avail;
    }
    /* With several producers the cursor runs ahead of what is published: keep only the
     * contiguously published prefix. (Dependencies only pass published slots, but Java scans
     * regardless, and so do we: a dependency may be any sequence.) */
    avail = eddy__sequencer_highest_published(b->seqr, seq, avail);
    if (avail >= seq)
        b->cached = avail;
    return avail;
}

/* ---------------------------------------------------------------------------------------
 * The loop's insides (loop.c, the pollers, eventfd.c, taskq.c, timer.c, future.c,
 * watchdog.c, shutdown.c, group.c)
 */

/* How a backend does I/O: it reports readiness (epoll, kqueue, poll), or it also runs
 * operations that complete later (io_uring). Channels pick their transport by it. */
enum { EDDY__IO_READINESS = 0, EDDY__IO_COMPLETION = 1 };

/* The poller interface (docs/style.md, "Interfaces with several backends"): one const table
 * per backend. */
typedef struct eddy__poller_ops_s {
    const char *name;
    int model; /* EDDY__IO_READINESS or EDDY__IO_COMPLETION */
    int (*init)(eddy_loop_t *loop);
    void (*destroy)(eddy_loop_t *loop);
    /* Set io's interest to events; 0 removes it. The loop's thread. */
    int (*update)(eddy_loop_t *loop, eddy_io_t *io, unsigned events);
    /* Wait up to timeout_ns (negative: forever), then hand every ready descriptor to
     * eddy__io_dispatch(). Returns how many were ready, or a negative EDDY_E*. */
    int (*wait)(eddy_loop_t *loop, int64_t timeout_ns);
    /* Make a blocked wait return. The one operation allowed off the loop's thread. */
    int (*wakeup)(eddy_loop_t *loop);
    /* Operations the backend ran for the loop have not all completed, or some it prepared
     * are not yet with the kernel: the loop must not terminate yet. NULL: never (readiness
     * backends run none). */
    bool (*busy)(eddy_loop_t *loop);
    /* Closing a descriptor takes it out of the set by itself (epoll, kqueue: when no other
     * descriptor refers to the same open file), so eddy__io_close() skips update(). */
    bool close_unregisters;
} eddy__poller_ops_t;

extern const eddy__poller_ops_t eddy__poller_uring;
extern const eddy__poller_ops_t eddy__poller_epoll;
extern const eddy__poller_ops_t eddy__poller_poll;
extern const eddy__poller_ops_t eddy__poller_kqueue;

/* The wake-up eventfd of the epoll and io_uring backends (eventfd.c): the watcher callback
 * that drains it, and the bump that wakes the loop (0 or -errno). */
void eddy__eventfd_drain(eddy_io_t *io, unsigned events, void *arg);
int eddy__eventfd_wake(int fd);

/* The backends built here, best first; NULL-terminated. */
extern const eddy__poller_ops_t *const eddy__pollers[];

/* Hand a ready descriptor to its io, unless the io left (or fd was reused) meanwhile. */
void eddy__io_dispatch(eddy_loop_t *loop, int fd, uint32_t gen, unsigned events);
/* The same, for a poller whose event carries the socket's error (err, a negative EDDY_E*; 0:
 * none): the callback gets it from eddy__io_socket_error(). */
void eddy__io_dispatch_error(eddy_loop_t *loop, int fd, uint32_t gen, unsigned events, int err);

/* The io watching fd now, or NULL. */
static inline eddy_io_t *eddy__io_of(eddy_loop_t *loop, int fd)
{
    return (fd >= 0 && (size_t)fd < loop->nwatchers) ? loop->watchers[fd] : NULL;
}

/* Loop states, in order. */
enum {
    EDDY__LOOP_NEW = 0,
    EDDY__LOOP_RUNNING,
    EDDY__LOOP_SHUTTING_DOWN, /* refuses outside tasks, drains, waits for quiet */
    EDDY__LOOP_SHUTDOWN,      /* quiet or timed out: refuses every task, runs what it took */
    EDDY__LOOP_TERMINATED
};

#define EDDY__NO_LIMIT INT64_MIN

/*
 * A task slot, alone on its 64-byte line: two producers that claim neighbouring sequences
 * write different lines, and a slot carries its own publication (seq), so that nothing else
 * a producer writes per task is shared with another producer either (taskq.c).
 */
typedef struct eddy__task_slot_s {
    alignas(64) eddy_task_cb fn;
    void *arg;
    int64_t stamp_ns; /* when queued, on sampled slots (lag); 0 elsewhere */
    /* One more than the sequence last published in this slot, stored (release) after the
     * fields above; 0 (the ring comes zeroed) before the first. */
    _Atomic int64_t seq;
} eddy__task_slot_t;

typedef struct eddy__overflow_s {
    struct eddy__overflow_s *next;
    eddy_task_cb fn;
    void *arg;
} eddy__overflow_t;

/* The task queue (taskq.c). The loop's thread, or one that entered the loop, for all but
 * the producers' side (eddy_loop_execute and its variants). */
/* Tasks are waiting, in the ring (claimed, published or not) or in the overflow list. */
bool eddy__taskq_pending(eddy_loop_t *loop);
/* The next ring slot is claimed but not yet published: spin briefly, then yield once. */
void eddy__taskq_await_claimed(eddy_loop_t *loop);
/* Run queued tasks until the deadline (INT64_MAX: none), ring slots up to limit: only those
 * queued before the call. Returns how many ran. */
size_t eddy__taskq_run(eddy_loop_t *loop, int64_t deadline, int64_t limit);
/* Free the overflow list's entries without running them (a loop being freed). */
void eddy__taskq_drop_overflow(eddy_loop_t *loop);

/* Relaxed read-modify-write by the single writer: a plain add, visible to readers. */
static inline void eddy__stat_add(_Atomic uint64_t *v, uint64_t d)
{
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

static inline void eddy__stat_max(_Atomic uint64_t *v, uint64_t x)
{
    if (x > atomic_load_explicit(v, memory_order_relaxed)) {
        atomic_store_explicit(v, x, memory_order_relaxed);
    }
}

/* Mark user code running on the loop (the stall watchdog looks). */
static inline void eddy__callback_begin(eddy_loop_t *loop, eddy__fnptr_t fn)
{
    atomic_store_explicit(&loop->running_fn, fn, memory_order_relaxed);
    atomic_store_explicit(&loop->activity,
                          atomic_load_explicit(&loop->activity, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&loop->in_callback, true, memory_order_relaxed);
}

static inline void eddy__callback_end(eddy_loop_t *loop)
{
    atomic_store_explicit(&loop->in_callback, false, memory_order_relaxed);
}

/* The loop's clock (eddy_loop_now_ns). */
static inline int64_t eddy__loop_now(const eddy_loop_t *loop)
{
    int64_t v = atomic_load_explicit(&loop->clock_offset_ns, memory_order_relaxed);
    /* A manual loop's clock is purely virtual: it moves only when its driver moves it. */
    return loop->manual ? v : eddy_now_ns() + v;
}

typedef struct eddy__timer_entry_s {
    int64_t deadline;
    uint64_t id; /* the start counter: ties fire in scheduling order */
    eddy_timer_t *timer;
} eddy__timer_entry_t;

/* Timers (timer.c). */
int eddy__timers_init(eddy__timer_heap_t *h);
/* Cancel and release every pending timer (shutdown, free). */
void eddy__timers_cancel_all(eddy_loop_t *loop);
void eddy__timers_destroy(eddy__timer_heap_t *h);
/* The earliest deadline, or INT64_MAX. */
int64_t eddy__timers_next_deadline(const eddy__timer_heap_t *h);
/* Run timers due at loop->now_ns until deadline_ns passes; returns how many ran. */
size_t eddy__timers_run_due(eddy_loop_t *loop, int64_t deadline_ns);

/* A block of eddy__loop_local()'s (loop.c). */
typedef struct eddy__local_s eddy__local_t;

/* Futures (future.c). */
eddy_future_t *eddy__future_new_unowned(void);

/* The reference counts of timers and futures, for tests that take them to their limits
 * (UINT32_MAX would take four billion retains). */
_Atomic uint32_t *eddy__timer_refcnt(eddy_timer_t *t);
_Atomic uint32_t *eddy__future_refcnt(eddy_future_t *f);

/* The stall watchdog (watchdog.c). */
void eddy__watchdog_add(eddy_loop_t *loop);
void eddy__watchdog_remove(eddy_loop_t *loop);
/* End the watchdog thread and wait for it (eddy_library_shutdown()): 0, or EDDY_EBUSY, and
 * nothing done, while a loop is watched. One thread at a time. */
int eddy__watchdog_shutdown(void);

#endif /* EDDY_REACTOR_INTERNAL_H */
