/*
 * eddy ring: the sequence ring buffer, after the LMAX Disruptor
 * (https://lmax-exchange.github.io/disruptor/, its technical paper and user guide; docs/ring.md).
 *
 *   eddy_sequence_t        a 64-bit counter alone on its cache lines (Disruptor Sequence)
 *   eddy_ring_t            preallocated fixed-size slots, a power-of-two count (RingBuffer data)
 *   eddy_sequencer_t       claims and publishes sequences for one or many producers, and keeps
 *                          them from overwriting slots that gating consumers have not read
 *                          (SingleProducerSequencer, MultiProducerSequencer)
 *   eddy_barrier_t         what a consumer waits on: the cursor and the sequences of the
 *                          consumers it depends on (ProcessingSequenceBarrier)
 *   eddy_wait_strategy_t   how a consumer waits (the seven WaitStrategy classes)
 *   eddy_batch_processor_t one handler on a thread of its own, seeing every event
 *                          (BatchEventProcessor)
 *   eddy_worker_pool_t     N workers sharing a work sequence, each event to one of them
 *                          (WorkerPool, WorkProcessor)
 *   eddy_disruptor_t       a builder that wires processors into a dependency graph and gates
 *                          the ring on the last of them (Disruptor, EventHandlerGroup)
 *
 * A producer claims with eddy_sequencer_next(), fills eddy_ring_get(ring, seq), and publishes
 * with eddy_sequencer_publish(); a consumer asks its barrier for the highest available sequence,
 * reads every slot up to it, and stores that sequence in its own eddy_sequence_t, which gates
 * the producers. Sequences start at -1 (nothing published, nothing consumed) and only grow.
 *
 * Nothing here allocates after creation, takes a lock on the hot path, or depends on anything
 * but libc, pthreads and C11 atomics.
 */
#ifndef EDDY_RING_H
#define EDDY_RING_H

#include <eddy/common.h>

#include <stdalign.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eddy_sequence_s eddy_sequence_t;
typedef struct eddy_ring_s eddy_ring_t;
typedef struct eddy_sequencer_s eddy_sequencer_t;
typedef struct eddy_barrier_s eddy_barrier_t;
typedef struct eddy_wait_strategy_s eddy_wait_strategy_t;
typedef struct eddy_wait_strategy_ops_s eddy_wait_strategy_ops_t;
typedef struct eddy_batch_processor_s eddy_batch_processor_t;
typedef struct eddy_worker_pool_s eddy_worker_pool_t;
typedef struct eddy_disruptor_s eddy_disruptor_t;
typedef struct eddy_group_s eddy_group_t;

/* The value of a new sequence: nothing claimed, published or consumed yet. */
#define EDDY_SEQUENCE_INITIAL ((int64_t)-1)

/* ---------------------------------------------------------------------------------------
 * Sequences (inline; defined at the bottom)
 *
 * The value sits 120 bytes from either end of a 128-byte aligned struct, so it shares no
 * 128-byte block (a cache line and its adjacent-line prefetch partner) with anything else,
 * even in memory that is not 128-byte aligned. Declare them statically, embed them, or take
 * them from eddy_sequence_new().
 */

struct eddy_sequence_s {
    alignas(128) char _pad_lo[120];
#ifdef __cplusplus
    int64_t _value;
#else
    _Atomic int64_t _value;
#endif
    char _pad_hi[120];
};

#ifndef __cplusplus
/** Set s to v before any other thread sees it (a relaxed store). */
static inline void eddy_sequence_init(eddy_sequence_t *s, int64_t v);
/** The value, with acquire order: what the writer did before its release store is visible. */
static inline int64_t eddy_sequence_get(const eddy_sequence_t *s);
/** Store v with release order (Disruptor's ordered set). Any thread. */
static inline void eddy_sequence_set(eddy_sequence_t *s, int64_t v);
/** Store v with sequentially consistent order: a StoreLoad fence (Disruptor's setVolatile). */
static inline void eddy_sequence_set_volatile(eddy_sequence_t *s, int64_t v);
/** Replace expected by desired atomically; true when it did. Acquire-release. Any thread. */
static inline bool eddy_sequence_cas(eddy_sequence_t *s, int64_t expected, int64_t desired);
/** Add inc atomically and return the new value. Acquire-release. Any thread. */
static inline int64_t eddy_sequence_add_and_get(eddy_sequence_t *s, int64_t inc);
#endif

/**
 * A sequence on the heap, 128-byte aligned, holding initial. NULL when out of memory.
 * Free with eddy_sequence_free().
 */
EDDY_EXTERN eddy_sequence_t *eddy_sequence_new(int64_t initial);

/** Free a sequence from eddy_sequence_new(). NULL is ignored. */
EDDY_EXTERN void eddy_sequence_free(eddy_sequence_t *s);

/**
 * The smallest of min and the values of seqs[0..n) (Disruptor's Util.getMinimumSequence;
 * pass INT64_MAX for the plain minimum). Acquire loads. Any thread.
 */
EDDY_EXTERN int64_t eddy_sequence_min(eddy_sequence_t *const *seqs, size_t n, int64_t min);

/* ---------------------------------------------------------------------------------------
 * The ring: the slots
 */

/**
 * Fills the slot at index (0..size-1) once, when the ring is created (Disruptor's
 * EventFactory). The slot arrives zeroed; arg is the one given to eddy_ring_new().
 */
typedef void (*eddy_ring_init_cb)(void *slot, size_t index, void *arg);

/* Fields are private; they are here so that eddy_ring_get() inlines. */
struct eddy_ring_s {
    char *_slots;      /* slot 0 */
    size_t _stride;    /* bytes from one slot to the next: slot_size rounded up to 16 */
    int64_t _mask;     /* size - 1 */
    size_t _size;      /* slots */
    size_t _slot_size; /* as given */
    void *_mem;        /* the allocation, with padding before and after the slots */
};

/**
 * A ring of size slots of slot_size bytes each, zeroed, then given to init_cb (may be NULL)
 * one by one in index order. size must be a power of two (1 included) and slot_size at least
 * 1; otherwise, or when out of memory, NULL. The caller owns the ring. Slots are aligned to
 * 16 bytes and the slot array is padded by 128 bytes at both ends.
 */
EDDY_EXTERN eddy_ring_t *eddy_ring_new(size_t size, size_t slot_size, eddy_ring_init_cb init_cb,
                                       void *arg);

/**
 * Free the ring and its slots. Whatever the slots point to is the caller's: walk them with
 * eddy_ring_get(ring, i) for i in [0, size) first if they own memory. NULL is ignored.
 */
EDDY_EXTERN void eddy_ring_free(eddy_ring_t *ring);

/** The slot for seq (seq modulo the size). Borrowed; valid until eddy_ring_free(). */
static inline void *eddy_ring_get(const eddy_ring_t *ring, int64_t seq);

/** The number of slots. */
static inline size_t eddy_ring_size(const eddy_ring_t *ring);

/* ---------------------------------------------------------------------------------------
 * Sequencers: claiming and publishing
 */

/**
 * A sequencer for one producer thread: claims need no atomic read-modify-write. size is the
 * ring's slot count, a power of two; ws tells consumers how to wait and is borrowed (it must
 * outlive the sequencer and every barrier made from it). NULL when size is not a power of
 * two, ws is NULL, or out of memory.
 */
EDDY_EXTERN eddy_sequencer_t *eddy_sequencer_new_single(size_t size, eddy_wait_strategy_t *ws);

/**
 * A sequencer for any number of producer threads: they claim on the cursor with fetch-add
 * (eddy_sequencer_next) or compare-and-swap (eddy_sequencer_try_next) and publish in an
 * availability buffer, so consumers see only contiguously published slots. Arguments and
 * errors as eddy_sequencer_new_single().
 */
EDDY_EXTERN eddy_sequencer_t *eddy_sequencer_new_multi(size_t size, eddy_wait_strategy_t *ws);

/**
 * Tell a multi-producer sequencer which ring its producers fill (optional; a hint for
 * speed). A claim then fetches the slot a few sequences ahead in the exclusive state, so the
 * producer's next claim does not wait for a cache line the consumer read a lap earlier
 * (about 2x on cross-thread hand-off). ring must have the sequencer's size and outlive it;
 * NULL turns the hint off. Call before producers start. Single producer: ignored.
 * eddy_disruptor_new() sets it.
 */
EDDY_EXTERN void eddy_sequencer_set_ring(eddy_sequencer_t *s, const eddy_ring_t *ring);

/**
 * Free the sequencer. Barriers made from it must be freed first; gating sequences are the
 * caller's and are not freed. NULL is ignored.
 */
EDDY_EXTERN void eddy_sequencer_free(eddy_sequencer_t *s);

/**
 * Claim the next n sequences and return the highest; the caller fills the slots
 * (highest - n, highest] and then publishes them. Waits (spinning, then sleeping 1 ns at a
 * time, as Java's sequencers park) while the ring has no room, that is while a gating
 * sequence is a full ring behind; never returns early. EDDY_EINVAL when n < 1 or n > size. A
 * single-producer sequencer must be called from one thread at a time; a multi-producer one
 * from any thread.
 */
EDDY_EXTERN int64_t eddy_sequencer_next(eddy_sequencer_t *s, int64_t n);

/**
 * eddy_sequencer_next() without waiting: EDDY_EAGAIN, nothing claimed, when the ring has
 * fewer than n free slots. EDDY_EINVAL when n < 1 or n > size. Threads as
 * eddy_sequencer_next().
 */
EDDY_EXTERN int64_t eddy_sequencer_try_next(eddy_sequencer_t *s, int64_t n);

/**
 * Make the slot of seq, claimed earlier, visible to consumers, and wake the waiting ones as
 * the wait strategy requires. The producer that claimed seq calls this once for it.
 */
EDDY_EXTERN void eddy_sequencer_publish(eddy_sequencer_t *s, int64_t seq);

/** eddy_sequencer_publish() for every sequence in [lo, hi], with one wake-up. */
EDDY_EXTERN void eddy_sequencer_publish_range(eddy_sequencer_t *s, int64_t lo, int64_t hi);

/** True when n slots could be claimed now without waiting (a snapshot). Producer threads. */
EDDY_EXTERN bool eddy_sequencer_has_capacity(eddy_sequencer_t *s, int64_t n);

/**
 * Slots free to claim now: size minus what is claimed and not yet consumed (a snapshot).
 * Single producer: the producer's thread only (it reads the producer's own claim counter).
 */
EDDY_EXTERN int64_t eddy_sequencer_remaining_capacity(eddy_sequencer_t *s);

/**
 * The cursor: the highest claimed sequence (multi-producer) or the highest published one
 * (single producer). Borrowed. Read it with eddy_sequence_get().
 */
EDDY_EXTERN const eddy_sequence_t *eddy_sequencer_cursor(const eddy_sequencer_t *s);

/** The ring size the sequencer was made for. */
EDDY_EXTERN size_t eddy_sequencer_size(const eddy_sequencer_t *s);

/** True when seq has been published (and not yet overwritten by a later lap). Any thread. */
EDDY_EXTERN bool eddy_sequencer_is_available(const eddy_sequencer_t *s, int64_t seq);

/**
 * Add n consumer sequences that producers must not overtake by a full ring. Each is first set
 * to the cursor, so a consumer added while producers run starts with what comes next. Borrows
 * the sequences: they must stay alive until removed or the sequencer is freed. 0 or
 * EDDY_ENOMEM. Any thread, also while producers run.
 */
EDDY_EXTERN int eddy_sequencer_add_gating(eddy_sequencer_t *s, eddy_sequence_t *const *seqs,
                                          size_t n);

/**
 * Remove every occurrence of seq from the gating sequences: 0, EDDY_ENOENT when it was not
 * one, or EDDY_ENOMEM. Any thread, also while producers run; the sequence may be freed once
 * this returns (it waits for producers still reading the old set).
 */
EDDY_EXTERN int eddy_sequencer_remove_gating(eddy_sequencer_t *s, const eddy_sequence_t *seq);

/** The smallest gating sequence, or the cursor when there are none (a snapshot). */
EDDY_EXTERN int64_t eddy_sequencer_min_gating(eddy_sequencer_t *s);

/* ---------------------------------------------------------------------------------------
 * Barriers: what consumers wait on
 */

/**
 * A barrier for one consumer: it waits, with s's wait strategy, for published sequences that
 * the n consumers deps (those this one comes after; may be NULL when n is 0) have also
 * passed. Borrows s and deps. NULL when out of memory. wait_for is for one thread at a time
 * (the barrier caches what it found); alert and clear_alert are for any thread.
 */
EDDY_EXTERN eddy_barrier_t *eddy_sequencer_new_barrier(eddy_sequencer_t *s,
                                                       eddy_sequence_t *const *deps, size_t n);

/** Free a barrier. No thread may be waiting on it. NULL is ignored. */
EDDY_EXTERN void eddy_barrier_free(eddy_barrier_t *b);

/**
 * Wait until seq is available (with several producers: published, not only claimed) and
 * return the highest available sequence, which is at least seq, so that the consumer handles
 * the whole batch at once. With a custom strategy that waits on eddy_barrier_dependent()
 * rather than eddy_barrier_probe() it may return less than seq (a multi-producer slot claimed
 * but not yet published); callers ask again. Returns
 * EDDY_ECANCELED when the barrier is alerted (before or during the wait) and EDDY_ETIMEDOUT
 * when a timeout-blocking strategy's time runs out. The consumer's thread.
 */
EDDY_EXTERN int64_t eddy_barrier_wait_for(eddy_barrier_t *b, int64_t seq);

/**
 * The highest available sequence now, at least seq - 1, without waiting and ignoring alerts
 * (for draining at shutdown). The consumer's thread.
 */
EDDY_EXTERN int64_t eddy_barrier_peek(eddy_barrier_t *b, int64_t seq);

/** Alert the barrier: current and later waits return EDDY_ECANCELED. Any thread. */
EDDY_EXTERN void eddy_barrier_alert(eddy_barrier_t *b);

/** Clear the alert. Any thread. */
EDDY_EXTERN void eddy_barrier_clear_alert(eddy_barrier_t *b);

/** True while the barrier is alerted. Any thread. */
EDDY_EXTERN bool eddy_barrier_is_alerted(const eddy_barrier_t *b);

/** The producers' cursor value (acquire). For wait strategies. Any thread. */
EDDY_EXTERN int64_t eddy_barrier_cursor(const eddy_barrier_t *b);

/**
 * The sequence the consumer may read up to: the smallest of its dependencies, or the cursor
 * when it has none (acquire loads). For wait strategies. Any thread.
 */
EDDY_EXTERN int64_t eddy_barrier_dependent(const eddy_barrier_t *b);

/**
 * What a wait strategy waits on for seq: eddy_barrier_dependent(), but below seq while seq is
 * claimed by one of several producers and not yet published (acquire loads). A strategy that
 * waited on the cursor alone would find such a slot ready, hand it back, and be asked again
 * at once: a spin on a producer that may have been preempted mid-publish. Any thread.
 */
EDDY_EXTERN int64_t eddy_barrier_probe(const eddy_barrier_t *b, int64_t seq);

/* ---------------------------------------------------------------------------------------
 * Wait strategies
 *
 * A strategy is a const ops table plus state. Built-in ones come from the constructors below;
 * a custom one embeds eddy_wait_strategy_t first and sets ops. One strategy serves one
 * sequencer (its producers signal it, its consumers wait in it).
 */

struct eddy_wait_strategy_ops_s {
    const char *name;
    /**
     * Wait until eddy_barrier_probe(b, seq) >= seq and return it; return EDDY_ECANCELED as
     * soon as eddy_barrier_is_alerted(b), EDDY_ETIMEDOUT if the strategy gives up. Never spin
     * without end: the producer awaited may share the waiter's core. Consumer thread.
     */
    int64_t (*wait_for)(eddy_wait_strategy_t *ws, int64_t seq, eddy_barrier_t *b);
    /** Wake every waiter after a publish or an alert. NULL: nothing ever sleeps. Any thread. */
    void (*signal_all)(eddy_wait_strategy_t *ws);
    /** Free the strategy (eddy_wait_strategy_free()). */
    void (*free)(eddy_wait_strategy_t *ws);
};

struct eddy_wait_strategy_s {
    const eddy_wait_strategy_ops_t *ops;
};

/**
 * Busy spin: re-read the sequence in a loop with a CPU pause hint, yielding once every 4096
 * rounds (about 0.1 ms) so that a producer preempted on the same core runs again. Lowest
 * latency and highest throughput while every consumer has a core of its own; burns that core
 * while waiting, and costs the producers their share of it when threads outnumber cores.
 * Publishing costs nothing extra.
 */
EDDY_EXTERN eddy_wait_strategy_t *eddy_wait_strategy_busy_spin(void);

/**
 * Yielding: spin 100 times, then sched_yield() between checks. Near busy-spin latency, still
 * 100% CPU, but gives the core away when another thread wants it: the choice when threads
 * outnumber cores and latency still matters. Publishing costs nothing extra.
 */
EDDY_EXTERN eddy_wait_strategy_t *eddy_wait_strategy_yielding(void);

/**
 * Sleeping: spin while retries (default 200 when 0) count down past 100, yield for the rest,
 * then nanosleep(sleep_ns) (default 100 ns when 0; the kernel's timer slack makes it about
 * 50 us) between checks. Low CPU when idle, latency up to a sleep; publishing costs nothing
 * extra (nobody is woken). Good for background consumers such as loggers.
 */
EDDY_EXTERN eddy_wait_strategy_t *eddy_wait_strategy_sleeping(int retries, int64_t sleep_ns);

/**
 * Blocking: a waiting consumer spins about 256 rounds (a few microseconds), then sleeps on a
 * futex (Linux; mutex and condition variable elsewhere) until a publish wakes it. No CPU
 * while idle; a sleep and its wake-up cost two system calls and the scheduler's latency, so
 * a producer that keeps publishing is caught by the spin instead. A publish costs a fence and
 * a load of a flag the sleepers raise; it writes shared state and makes the wake system call
 * only after a consumer went to sleep. Waiting on upstream consumers (not the cursor) spins,
 * then yields. The choice when CPU matters more than latency.
 */
EDDY_EXTERN eddy_wait_strategy_t *eddy_wait_strategy_blocking(void);

/**
 * Lite blocking: blocking without the spin: a consumer whose sequence is not ready goes to
 * sleep at once. The least CPU for a consumer that is mostly idle; each lull costs a sleep
 * and a wake-up. Publishing costs what it costs with blocking.
 */
EDDY_EXTERN eddy_wait_strategy_t *eddy_wait_strategy_lite_blocking(void);

/**
 * Timeout blocking: blocking, but a wait that sees nothing for timeout_ns (> 0) returns
 * EDDY_ETIMEDOUT (processors call their handler's on_timeout and wait again). Only the wait
 * for producers times out: a consumer waiting on slower consumers upstream spins as in Java.
 * NULL when timeout_ns <= 0 or out of memory.
 */
EDDY_EXTERN eddy_wait_strategy_t *eddy_wait_strategy_timeout_blocking(int64_t timeout_ns);

/**
 * Phased backoff: spin for spin_ns, then yield until yield_ns have passed since the wait
 * began, then wait with fallback (taking ownership of it; freed with this strategy). Low
 * latency for bursts, little CPU when idle. NULL when fallback is NULL; NULL, with fallback
 * freed, when spin_ns < 0, spin_ns > yield_ns, or out of memory.
 */
EDDY_EXTERN eddy_wait_strategy_t *eddy_wait_strategy_phased_backoff(int64_t spin_ns,
                                                                    int64_t yield_ns,
                                                                    eddy_wait_strategy_t *fallback);

/** The strategy's name ("busy_spin", "yielding", ...). */
EDDY_EXTERN const char *eddy_wait_strategy_name(const eddy_wait_strategy_t *ws);

/** Free a strategy. Nothing may use it any more. NULL is ignored. */
EDDY_EXTERN void eddy_wait_strategy_free(eddy_wait_strategy_t *ws);

/* ---------------------------------------------------------------------------------------
 * Event processors
 */

/**
 * A consumer's callbacks, called on the processor's thread; NULL slots are skipped (on_event
 * is required). arg is the pointer given beside the table.
 */
typedef struct eddy_event_handler_ops_s {
    const char *name;
    /**
     * One event: the slot (borrowed; read it, or write it for consumers downstream), its
     * sequence, and whether it is the last of the batch (flush there). A worker pool passes
     * end_of_batch = true. Return 0, or a negative EDDY_E* to report to on_error.
     */
    int (*on_event)(void *slot, int64_t seq, bool end_of_batch, void *arg);
    /** Before a batch of size events (batch processors only). */
    void (*on_batch_start)(int64_t size, void *arg);
    /** Once on the processor's thread before the first event. */
    void (*on_start)(void *arg);
    /** Once on the processor's thread after the last event, when halted. */
    void (*on_shutdown)(void *arg);
    /** A timeout-blocking wait timed out; seq is the last sequence handled. */
    void (*on_timeout)(int64_t seq, void *arg);
    /**
     * on_event returned err for slot/seq (the exception handler). The event counts as handled
     * and processing goes on with the next one. NULL: errors are ignored.
     */
    void (*on_error)(void *slot, int64_t seq, int err, void *arg);
} eddy_event_handler_ops_t;

/** A handler: its table and its argument. */
typedef struct eddy_event_handler_s {
    const eddy_event_handler_ops_t *ops;
    void *arg;
} eddy_event_handler_t;

/**
 * A batch processor: h sees every event of ring that s publishes, in order, after the n
 * consumers deps have (NULL when n is 0). It owns a sequence (initially -1) that the caller
 * adds to s's gating sequences (the disruptor builder does) and a barrier of its own. Borrows
 * ring, s, deps and h's ops and arg. NULL when h has no on_event or out of memory.
 */
EDDY_EXTERN eddy_batch_processor_t *
eddy_batch_processor_new(eddy_ring_t *ring, eddy_sequencer_t *s, eddy_sequence_t *const *deps,
                         size_t n, const eddy_event_handler_t *h);

/**
 * Free a processor that is not running: 0, or EDDY_EBUSY (nothing freed) while it runs or its
 * thread has not been joined. NULL is ignored (0).
 */
EDDY_EXTERN int eddy_batch_processor_free(eddy_batch_processor_t *p);

/**
 * Run the processor on the calling thread until it is halted, then return 0 after on_shutdown.
 * EDDY_EBUSY when it already runs.
 */
EDDY_EXTERN int eddy_batch_processor_run(eddy_batch_processor_t *p);

/** Run the processor on a new thread: 0, EDDY_EBUSY, or the pthread_create error. */
EDDY_EXTERN int eddy_batch_processor_start(eddy_batch_processor_t *p);

/**
 * Ask the processor to stop: it handles every event published before this call that its
 * dependencies have also passed, calls on_shutdown, and returns from run (its thread ends).
 * Returns at once. Upstream processors must be halted and joined first for their last events
 * to reach this one (the disruptor's shutdown does so). Any thread.
 */
EDDY_EXTERN void eddy_batch_processor_halt(eddy_batch_processor_t *p);

/** Wait for the thread of eddy_batch_processor_start() to end: 0, or EDDY_EINVAL if none. */
EDDY_EXTERN int eddy_batch_processor_join(eddy_batch_processor_t *p);

/** The processor's sequence: the last event handled. Borrowed; gate and depend on it. */
EDDY_EXTERN eddy_sequence_t *eddy_batch_processor_sequence(eddy_batch_processor_t *p);

/** True from run() until it returns. Any thread. */
EDDY_EXTERN bool eddy_batch_processor_is_running(const eddy_batch_processor_t *p);

/**
 * A worker pool: n workers (handlers hs[0..n)), each on a thread of its own once started,
 * compete for the events of ring through a shared work sequence, so each event goes to
 * exactly one worker, after the ndeps consumers deps. Borrows ring, s, deps and the handlers.
 * NULL when n is 0, a handler has no on_event, or out of memory.
 */
EDDY_EXTERN eddy_worker_pool_t *eddy_worker_pool_new(eddy_ring_t *ring, eddy_sequencer_t *s,
                                                     eddy_sequence_t *const *deps, size_t ndeps,
                                                     const eddy_event_handler_t *hs, size_t n);

/** Free a pool that is not running: 0 or EDDY_EBUSY. NULL is ignored (0). */
EDDY_EXTERN int eddy_worker_pool_free(eddy_worker_pool_t *pool);

/**
 * Start one thread per worker, each beginning after the cursor's value at the call (workers
 * skip what was published before). 0, EDDY_EBUSY when started, or the pthread_create error
 * (threads already started are halted and joined).
 */
EDDY_EXTERN int eddy_worker_pool_start(eddy_worker_pool_t *pool);

/**
 * Ask every worker to stop after the events published before this call (and passed by the
 * dependencies) are handled, each by exactly one worker. Returns at once. Any thread.
 */
EDDY_EXTERN void eddy_worker_pool_halt(eddy_worker_pool_t *pool);

/** Wait for the workers' threads to end: 0, or EDDY_EINVAL when not started. */
EDDY_EXTERN int eddy_worker_pool_join(eddy_worker_pool_t *pool);

/**
 * The pool's sequences, to gate on or depend on: each worker's and the work sequence. Writes
 * up to cap of them to out and returns how many there are (workers + 1).
 */
EDDY_EXTERN size_t eddy_worker_pool_sequences(eddy_worker_pool_t *pool, eddy_sequence_t **out,
                                              size_t cap);

/* ---------------------------------------------------------------------------------------
 * The disruptor: a builder for dependency graphs
 *
 *     eddy_disruptor_t *d = eddy_disruptor_new(1024, sizeof(long), NULL, NULL, true, ws);
 *     eddy_group_t *ab = eddy_disruptor_handle_events_with(d, (eddy_event_handler_t[]){a, b}, 2);
 *     eddy_group_then(ab, &c, 1);          // diamond: c sees an event after a and b did
 *     eddy_disruptor_start(d);
 *     ... producers: eddy_sequencer_next(eddy_disruptor_sequencer(d), 1) and publish ...
 *     eddy_disruptor_shutdown(d);          // drains, then stops every thread
 *     eddy_disruptor_free(d);
 */

/**
 * A ring of size slots (see eddy_ring_new()) with a single- or multi-producer sequencer
 * waiting with ws (borrowed; it must outlive the disruptor). NULL on bad arguments or out of
 * memory. The caller owns the disruptor.
 */
EDDY_EXTERN eddy_disruptor_t *eddy_disruptor_new(size_t size, size_t slot_size,
                                                 eddy_ring_init_cb init_cb, void *arg,
                                                 bool multi_producer, eddy_wait_strategy_t *ws);

/**
 * Free the disruptor, its ring, sequencer, processors and groups. EDDY_EBUSY (nothing freed)
 * while started and not shut down. NULL is ignored (0).
 */
EDDY_EXTERN int eddy_disruptor_free(eddy_disruptor_t *d);

/**
 * n batch processors, one per handler, each seeing every event, depending on nothing. Returns
 * their group (owned by d) to chain with eddy_group_then(). NULL when started, n is 0, a
 * handler has no on_event, or out of memory.
 */
EDDY_EXTERN eddy_group_t *eddy_disruptor_handle_events_with(eddy_disruptor_t *d,
                                                            const eddy_event_handler_t *hs,
                                                            size_t n);

/** One worker pool of n workers (hs) depending on nothing. As handle_events_with. */
EDDY_EXTERN eddy_group_t *eddy_disruptor_handle_events_with_pool(eddy_disruptor_t *d,
                                                                 const eddy_event_handler_t *hs,
                                                                 size_t n);

/**
 * n batch processors that see each event only after every processor of g has: a pipeline
 * when chained, a diamond when g has several. The ring stops gating on g and gates on the new
 * group instead. NULL as handle_events_with.
 */
EDDY_EXTERN eddy_group_t *eddy_group_then(eddy_group_t *g, const eddy_event_handler_t *hs,
                                          size_t n);

/** One worker pool after every processor of g. As eddy_group_then(). */
EDDY_EXTERN eddy_group_t *eddy_group_then_pool(eddy_group_t *g, const eddy_event_handler_t *hs,
                                               size_t n);

/** Start every processor's thread: 0, EDDY_EBUSY when started, or a pthread_create error. */
EDDY_EXTERN int eddy_disruptor_start(eddy_disruptor_t *d);

/**
 * Stop after draining: every event published before the call is handled by every consumer
 * that should see it, each exactly once, then every thread ends. Halts and joins group by
 * group in the order they were added, so downstream consumers see all of upstream's work.
 * Producers must have stopped. 0, or EDDY_EINVAL when not started.
 */
EDDY_EXTERN int eddy_disruptor_shutdown(eddy_disruptor_t *d);

/** The ring. Borrowed. */
EDDY_EXTERN eddy_ring_t *eddy_disruptor_ring(eddy_disruptor_t *d);

/** The sequencer producers claim and publish with. Borrowed. */
EDDY_EXTERN eddy_sequencer_t *eddy_disruptor_sequencer(eddy_disruptor_t *d);

/* ---------------------------------------------------------------------------------------
 * inline definitions
 */

#ifndef __cplusplus
static inline void eddy_sequence_init(eddy_sequence_t *s, int64_t v)
{
    atomic_store_explicit(&s->_value, v, memory_order_relaxed);
}

static inline int64_t eddy_sequence_get(const eddy_sequence_t *s)
{
    /* Pairs with the release store of eddy_sequence_set() and the RMWs below. */
    return atomic_load_explicit(&s->_value, memory_order_acquire);
}

static inline void eddy_sequence_set(eddy_sequence_t *s, int64_t v)
{
    /* Pairs with the acquire load of eddy_sequence_get(). */
    atomic_store_explicit(&s->_value, v, memory_order_release);
}

static inline void eddy_sequence_set_volatile(eddy_sequence_t *s, int64_t v)
{
    atomic_store_explicit(&s->_value, v, memory_order_seq_cst);
}

static inline bool eddy_sequence_cas(eddy_sequence_t *s, int64_t expected, int64_t desired)
{
    /* Acquires what the last writer released; releases to the next eddy_sequence_get().
     * Sequentially consistent, so a claim can stand in for a fence: a producer that claims
     * with it and then reads a flag with a seq_cst load needs no fence of its own against a
     * consumer that writes the flag, fences, and reads the cursor (the loop's wake-up). On
     * x86 and ARMv8.1 this is the same instruction as acq_rel. */
    return atomic_compare_exchange_strong_explicit(&s->_value, &expected, desired,
                                                   memory_order_seq_cst, memory_order_acquire);
}

static inline int64_t eddy_sequence_add_and_get(eddy_sequence_t *s, int64_t inc)
{
    /* As eddy_sequence_cas(), sequentially consistent too. */
    return atomic_fetch_add_explicit(&s->_value, inc, memory_order_seq_cst) + inc;
}
#endif

static inline void *eddy_ring_get(const eddy_ring_t *ring, int64_t seq)
{
    return ring->_slots + (size_t)(seq & ring->_mask) * ring->_stride;
}

static inline size_t eddy_ring_size(const eddy_ring_t *ring)
{
    return ring->_size;
}

#ifdef __cplusplus
}
#endif
#endif /* EDDY_RING_H */
