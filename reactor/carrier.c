/*
 * The carrier: partitioned multi-producer rings consumed in batches by a pool of threads
 * (include/eddy/carrier.h).
 *
 * Partitions. Each is a ring of eddy_carrier_item_t slots with a multi-producer sequencer.
 * Its consumers share two sequences: `consumed`, which gates the producers, and, in unordered
 * mode, `claim`, the highest sequence a consumer has taken. Ordered mode takes a batch under
 * a per-partition lock word (0, or the holder's thread index + 1) for exactly one batch, so
 * batches of a partition never overlap and follow each other in sequence order whatever
 * thread runs them: that lock is RocketMQ's ordered-queue lock, and it is what makes a
 * rebalance safe, since a partition's new thread cannot take a batch before the old thread has
 * released the lock at the end of the one it holds. Unordered mode claims ranges with a CAS on
 * `claim` (a WorkProcessor's work sequence), and a consumer that finishes a range stores each
 * sequence in the partition's `done` array and moves `consumed` over every contiguous finished
 * slot.
 *
 * Assignment. Each partition holds a mask of the threads that consume it; a thread keeps the
 * list of its partitions and rebuilds it when the carrier's epoch moves (a rebalance stores
 * the masks, then bumps the epoch with release order).
 *
 * Waiting. A thread owning several partitions has to sleep until any of them has data, and a
 * ring's wait strategy waits on one barrier. So each partition's sequencer gets a strategy of
 * our own (embedded in the partition, the ring's custom-strategy hook): its signal_all, which
 * the sequencer calls after every publish, wakes the threads in the partition's mask that
 * announced they sleep. A thread sleeps on its own mutex and condition variable: it sets its
 * `sleeping` flag, issues a seq_cst fence, looks at its partitions' cursors once more (a slot
 * claimed and not yet published counts as work), and only then waits; the publisher claimed
 * its slot with the sequencer's seq_cst compare-and-swap and reads the flag with a seq_cst
 * load. One of the two sees the other (Dekker), so no wake-up is lost, and a busy carrier
 * pays two loads per publish, no fence and no system call. An idle carrier's threads sit in
 * pthread_cond_wait: no CPU.
 */
#include <eddy/carrier.h>
#include <eddy/loop.h>
#include <eddy/ring.h>

#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define HIST_N 16

enum { STATE_RUNNING, STATE_CLOSING, STATE_STOPPING, STATE_STOPPED };

#define NO_LIMIT INT64_MIN

typedef struct part_s {
    eddy_wait_strategy_t ws; /* first: the sequencer's strategy is the partition */
    eddy_carrier_t *c;
    eddy_ring_t *ring;
    eddy_sequencer_t *seqr;
    eddy_sequence_t *consumed;            /* gates the producers */
    eddy_sequence_t *claim;               /* unordered mode: the highest sequence taken */
    _Atomic int64_t *done;                /* unordered mode: per slot, its sequence once consumed */
    /* Each on lines of its own (128 bytes: the adjacent-line prefetcher pairs lines):
     * producers read `threads` on every publish, and consumers write `lock` on every batch. */
    alignas(128) _Atomic uint64_t threads; /* the consuming threads, one bit each */
    alignas(128) _Atomic unsigned lock;    /* ordered mode: 0, or the holder's index + 1 */
    alignas(128) _Atomic size_t bytes;     /* offered and not consumed */
    /* The last sequence the shutdown waits for (NO_LIMIT before it looked); see put(). */
    alignas(128) _Atomic int64_t limit;
} part_t;

typedef struct worker_s {
    eddy_carrier_t *c;
    unsigned index;
    bool running; /* a thread exists and has not been joined (admin mutex) */
    pthread_t tid;
    _Atomic bool stop; /* removed by a rebalance */
    _Atomic int sleeping;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned *mine; /* the partitions this thread consumes */
    unsigned nmine;
    uint64_t epoch;
    _Atomic uint64_t hist[HIST_N]; /* batch sizes; only this thread writes */
} worker_t;

struct eddy_carrier_s {
    eddy_carrier_options_t o;
    const eddy_carrier_ops_t *ops;
    void *arg;
    part_t *parts;
    unsigned nparts;
    alignas(64) _Atomic uint64_t rolling;
    alignas(64) _Atomic int state;
    _Atomic int how;
    _Atomic unsigned m;
    _Atomic uint64_t epoch;
    pthread_mutex_t admin; /* serializes set_consumers and shutdown */
    uint64_t *masks;       /* scratch for apply_assignment(), under admin */
    worker_t workers[EDDY_CARRIER_MAX_THREADS];
};

/* ---------------------------------------------------------------------------------------
 * The partitions' wait strategy
 */

static void wake(worker_t *w)
{
    pthread_mutex_lock(&w->mu);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void part_signal_all(eddy_wait_strategy_t *ws)
{
    part_t *part = (part_t *)ws;
    /*
     * Pairs with the fence in worker_idle(): our claim (a seq_cst compare-and-swap of the
     * cursor, before this publish) and its sleeping store cannot both go unseen, given these
     * seq_cst loads. No fence of our own: one cost a third of an offer.
     */
    uint64_t mask = atomic_load_explicit(&part->threads, memory_order_seq_cst);
    while (mask != 0) {
        unsigned t = (unsigned)__builtin_ctzll(mask);
        mask &= mask - 1;
        worker_t *w = &part->c->workers[t];
        /*
         * Only the first publisher after the thread fell asleep pays for the wake-up: the
         * others find the flag cleared while the woken thread is still on its way.
         */
        if (atomic_load_explicit(&w->sleeping, memory_order_seq_cst) &&
            atomic_exchange_explicit(&w->sleeping, 0, memory_order_relaxed))
            wake(w);
    }
}

/* Nobody waits through a barrier of ours; this keeps the table complete for one who does. */
static int64_t part_wait_for(eddy_wait_strategy_t *ws, int64_t seq, eddy_barrier_t *b)
{
    (void)ws;
    for (;;) {
        if (eddy_barrier_is_alerted(b))
            return EDDY_ECANCELED;
        int64_t avail = eddy_barrier_probe(b, seq);
        if (avail >= seq)
            return avail;
        sched_yield();
    }
}

static void part_ws_free(eddy_wait_strategy_t *ws)
{
    (void)ws; /* the partition's memory is the carrier's */
}

static const eddy_wait_strategy_ops_t part_ws_ops = {
    .name = "carrier",
    .wait_for = part_wait_for,
    .signal_all = part_signal_all,
    .free = part_ws_free,
};

/* ---------------------------------------------------------------------------------------
 * Assignment
 */

/* RocketMQ's AllocateMessageQueueAveragely for thread t of m over P partitions. */
static void averagely(unsigned P, unsigned m, unsigned t, unsigned *start, unsigned *count)
{
    unsigned mod = P % m;
    unsigned avg = P <= m ? 1 : (mod > 0 && t < mod ? P / m + 1 : P / m);
    unsigned s = (mod > 0 && t < mod) ? t * avg : t * avg + mod;
    *start = s;
    *count = s >= P ? 0 : (avg < P - s ? avg : P - s);
}

static void compute_masks(const eddy_carrier_t *c, unsigned m, uint64_t *masks)
{
    unsigned P = c->nparts;
    memset(masks, 0, sizeof(uint64_t) * P);
    if (c->o.mode == EDDY_CARRIER_UNORDERED && P < m) {
        /* DataCarrier's split: several threads per partition. */
        for (unsigned t = 0; t < m; t++) {
            unsigned p =
                c->o.assign == EDDY_CARRIER_CIRCLE ? t % P : (unsigned)((uint64_t)t * P / m);
            masks[p] |= 1ull << t;
        }
        return;
    }
    for (unsigned t = 0; t < m; t++) {
        if (c->o.assign == EDDY_CARRIER_CIRCLE) {
            for (unsigned p = t; p < P; p += m)
                masks[p] |= 1ull << t;
        } else {
            unsigned s, n;
            averagely(P, m, t, &s, &n);
            for (unsigned p = s; p < s + n; p++)
                masks[p] |= 1ull << t;
        }
    }
}

static void refresh(worker_t *w)
{
    eddy_carrier_t *c = w->c;
    /* Pairs with the release increment in apply_assignment(): the masks are the new ones. */
    uint64_t e = atomic_load_explicit(&c->epoch, memory_order_acquire);
    if (e == w->epoch)
        return;
    w->epoch = e;
    w->nmine = 0;
    for (unsigned p = 0; p < c->nparts; p++)
        if (atomic_load_explicit(&c->parts[p].threads, memory_order_seq_cst) & (1ull << w->index))
            w->mine[w->nmine++] = p;
}

/* ---------------------------------------------------------------------------------------
 * Consuming
 */

static void record_batch(worker_t *w, size_t n)
{
    unsigned k = 0;
    while (k + 1 < HIST_N && ((size_t)2 << k) <= n)
        k++;
    /* One writer: a relaxed load and store, no read-modify-write on a shared line. */
    uint64_t v = atomic_load_explicit(&w->hist[k], memory_order_relaxed);
    atomic_store_explicit(&w->hist[k], v + 1, memory_order_relaxed);
}

/* An eddy_carrier_execute() task; the item's data is its argument. */
typedef struct task_s {
    eddy_carrier_fn fn;
    eddy_promise_t *promise;
} task_t;

static void run_task(eddy_carrier_item_t *it, bool discard)
{
    task_t *t = it->_task;
    assert(t->fn != NULL && t->promise != NULL);
    if (discard) {
        eddy_promise_fail(t->promise, EDDY_ECANCELED);
    } else {
        void *result = NULL;
        int err = t->fn(it->data, &result);
        if (err < 0)
            eddy_promise_fail(t->promise, err);
        else
            eddy_promise_succeed(t->promise, result);
    }
    eddy_future_release(t->promise); /* the carrier's reference (eddy_carrier_execute()) */
    free(t);
}

/* Hand items[0..n) to the consumer (or drop them), tasks run in place, in order. */
static void process(eddy_carrier_t *c, worker_t *w, part_t *part, eddy_carrier_item_t *items,
                    size_t n)
{
    assert(n > 0 && w->index < EDDY_CARRIER_MAX_THREADS);
    bool discard = atomic_load_explicit(&c->state, memory_order_acquire) == STATE_STOPPING &&
                   atomic_load_explicit(&c->how, memory_order_relaxed) == EDDY_CARRIER_DISCARD;
    size_t bytes = 0;
    for (size_t i = 0; i < n;) {
        if (items[i]._task != NULL) {
            bytes += items[i].bytes;
            run_task(&items[i], discard);
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && items[j]._task == NULL)
            bytes += items[j++].bytes;
        int err = discard ? EDDY_ECANCELED
                          : (c->ops != NULL && c->ops->consume != NULL
                                 ? c->ops->consume(c, w->index, items + i, j - i, c->arg)
                                 : 0);
        if (err < 0 && c->ops != NULL && c->ops->on_error != NULL)
            c->ops->on_error(c, w->index, items + i, j - i, err, c->arg);
        i = j;
    }
    record_batch(w, n);
    if (bytes > 0 && c->o.partition_bytes != 0)
        atomic_fetch_sub_explicit(&part->bytes, bytes, memory_order_relaxed);
}

/* The last published sequence of the run starting at lo, within one batch and one lap. */
static int64_t scan(const eddy_carrier_t *c, const part_t *part, int64_t lo)
{
    size_t size = eddy_ring_size(part->ring);
    size_t room = size - (size_t)(lo & (int64_t)(size - 1)); /* up to the end of the slots */
    size_t max = c->o.max_batch < room ? c->o.max_batch : room;
    int64_t hi = lo - 1;
    while ((size_t)(hi - lo + 1) < max && eddy_sequencer_is_available(part->seqr, hi + 1))
        hi++;
    return hi;
}

static bool has_data(const part_t *part, bool unordered)
{
    int64_t next = eddy_sequence_get(unordered ? part->claim : part->consumed) + 1;
    return eddy_sequencer_is_available(part->seqr, next);
}

/* One ordered batch: items consumed, or 0; *pending when data waits behind another's lock. */
static size_t run_ordered(eddy_carrier_t *c, worker_t *w, part_t *part, bool *pending)
{
    if (!has_data(part, false))
        return 0;
    unsigned expected = 0;
    /* Acquire pairs with the release store that ended the previous holder's batch. */
    if (!atomic_compare_exchange_strong_explicit(&part->lock, &expected, w->index + 1,
                                                 memory_order_acquire, memory_order_relaxed)) {
        *pending = true;
        return 0;
    }
    int64_t lo = eddy_sequence_get(part->consumed) + 1;
    int64_t hi = scan(c, part, lo);
    size_t n = (size_t)(hi - lo + 1);
    if (n > 0) {
        process(c, w, part, eddy_ring_get(part->ring, lo), n);
        eddy_sequence_set(part->consumed, hi); /* release: producers may now reuse the slots */
    }
    /* The lock is ours until this store: no other worker consumed the partition meanwhile. */
    assert(atomic_load_explicit(&part->lock, memory_order_relaxed) == w->index + 1);
    /* Release pairs with the next holder's acquire CAS above. */
    atomic_store_explicit(&part->lock, 0, memory_order_release);
    return n;
}

/* Move `consumed` over every finished slot after it. */
static void advance(part_t *part)
{
    for (;;) {
        int64_t from = eddy_sequence_get(part->consumed);
        int64_t top = eddy_sequence_get(part->claim);
        int64_t to = from;
        /* seq_cst pairs with the seq_cst `done` stores of run_unordered(). */
        int64_t mask = (int64_t)eddy_ring_size(part->ring) - 1;
        while (to < top &&
               atomic_load_explicit(&part->done[(to + 1) & mask], memory_order_seq_cst) == to + 1)
            to++;
        if (to == from)
            return;
        /* Lost or won, look again: more slots may have finished meanwhile. */
        eddy_sequence_cas(part->consumed, from, to);
    }
}

static size_t run_unordered(eddy_carrier_t *c, worker_t *w, part_t *part)
{
    for (;;) {
        int64_t taken = eddy_sequence_get(part->claim);
        int64_t hi = scan(c, part, taken + 1);
        if (hi <= taken)
            return 0;
        if (!eddy_sequence_cas(part->claim, taken, hi))
            continue;
        int64_t lo = taken + 1;
        eddy_carrier_item_t *items = eddy_ring_get(part->ring, lo);
        size_t n = (size_t)(hi - lo + 1);
        process(c, w, part, items, n);
        int64_t mask = (int64_t)eddy_ring_size(part->ring) - 1;
        for (int64_t seq = lo; seq <= hi; seq++)
            atomic_store_explicit(&part->done[seq & mask], seq, memory_order_seq_cst);
        advance(part);
        return n;
    }
}

static bool has_work(const worker_t *w, bool unordered)
{
    for (unsigned i = 0; i < w->nmine; i++)
        if (has_data(&w->c->parts[w->mine[i]], unordered))
            return true;
    return false;
}

/* A slot of w's partitions claimed and not yet taken, published or not: the check before
 * sleeping reads the cursor, which the producers' claims write (see part_signal_all). */
static bool has_claims(const worker_t *w, bool unordered)
{
    for (unsigned i = 0; i < w->nmine; i++) {
        const part_t *part = &w->c->parts[w->mine[i]];
        int64_t taken = eddy_sequence_get(unordered ? part->claim : part->consumed);
        if (eddy_sequence_get(eddy_sequencer_cursor(part->seqr)) > taken)
            return true;
    }
    return false;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/*
 * Before sleeping, look again for a while (the phased backoff of eddy/ring.h): spinning, then
 * yielding the CPU. A consumer that sleeps as soon as it catches up makes the producer pay a
 * wake-up (a mutex and a futex call) for nearly every item; bench/carrier measured batches of
 * one to three items and a third of the throughput that way. The phases are bounded (about
 * SPIN_N pauses and YIELD_N yields, some microseconds), so an idle carrier still sleeps.
 */
#define SPIN_N 256
#define SPIN_EVERY 16
#define SMALL_BATCH 8
#define YIELD_N 16
static bool idle_spin(worker_t *w, bool unordered)
{
    for (int i = 0; i < SPIN_N + YIELD_N; i++) {
        if (i < SPIN_N) {
            cpu_relax();
            /* Look every SPIN_EVERY pauses: each look pulls the line the producer is
             * writing, and a consumer that looks too often slows the producer it waits for
             * (and takes its items one at a time). */
            if (i % SPIN_EVERY != SPIN_EVERY - 1)
                continue;
        } else {
            sched_yield();
        }
        if (has_work(w, unordered) ||
            atomic_load_explicit(&w->c->epoch, memory_order_relaxed) != w->epoch)
            return true;
    }
    return false;
}

/* Wait gather_ns (spinning: the consumer is busy anyway) without touching the rings. */
static void gather(const eddy_carrier_t *c)
{
    if (c->o.gather_ns <= 0)
        return;
    int64_t until = eddy_now_ns() + c->o.gather_ns;
    do {
        for (int i = 0; i < 16; i++)
            cpu_relax();
    } while (eddy_now_ns() < until);
}

/* Sleep until a publish in one of w's partitions, a rebalance, or a stop. */
static void worker_idle(worker_t *w, bool unordered)
{
    eddy_carrier_t *c = w->c;
    pthread_mutex_lock(&w->mu);
    atomic_store_explicit(&w->sleeping, 1, memory_order_seq_cst);
    /* Pairs with the producers' claims and loads (part_signal_all()). */
    atomic_thread_fence(memory_order_seq_cst);
    if (!has_claims(w, unordered) && !atomic_load(&w->stop) && atomic_load(&c->epoch) == w->epoch &&
        atomic_load(&c->state) < STATE_STOPPING)
        pthread_cond_wait(&w->cv, &w->mu);
    atomic_store_explicit(&w->sleeping, 0, memory_order_relaxed);
    pthread_mutex_unlock(&w->mu);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    eddy_carrier_t *c = w->c;
    bool unordered = c->o.mode == EDDY_CARRIER_UNORDERED;
    if (c->ops != NULL && c->ops->init != NULL)
        c->ops->init(c, w->index, c->arg);
    for (;;) {
        refresh(w);
        if (atomic_load(&w->stop))
            break; /* removed: its partitions have other threads now */
        bool stopping = atomic_load(&c->state) >= STATE_STOPPING;
        size_t did = 0;
        bool pending = false;
        for (unsigned i = 0; i < w->nmine; i++) {
            part_t *part = &c->parts[w->mine[i]];
            did += unordered ? run_unordered(c, w, part) : run_ordered(c, w, part, &pending);
        }
        if (did > 0) {
            /* A short batch means we are right behind the producer: let a few more items
             * gather before looking again (see idle_spin), so we read whole lines it is
             * done with instead of the one it is writing. Under a microsecond. */
            if (did < SMALL_BATCH)
                gather(c);
            continue;
        }
        if (pending) {
            sched_yield(); /* the partition's old thread is finishing its batch */
            continue;
        }
        if (stopping)
            break; /* drained: producers stopped before the state became STOPPING */
        if (idle_spin(w, unordered))
            continue;
        worker_idle(w, unordered);
    }
    if (c->ops != NULL && c->ops->on_exit != NULL)
        c->ops->on_exit(c, w->index, c->arg);
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * Threads and rebalancing (under the admin mutex)
 */

static void apply_assignment(eddy_carrier_t *c, unsigned m)
{
    compute_masks(c, m, c->masks);
    for (unsigned p = 0; p < c->nparts; p++)
        atomic_store_explicit(&c->parts[p].threads, c->masks[p], memory_order_seq_cst);
    atomic_store(&c->m, m);
    /* Release pairs with the acquire load in refresh(). */
    atomic_fetch_add_explicit(&c->epoch, 1, memory_order_seq_cst);
}

static int start_worker(eddy_carrier_t *c, unsigned t)
{
    worker_t *w = &c->workers[t];
    atomic_store(&w->stop, false);
    atomic_store(&w->sleeping, 0);
    w->nmine = 0;
    w->epoch = 0; /* the carrier's epoch starts at 1: the first refresh() reads the masks */
    int err = pthread_create(&w->tid, NULL, worker_main, w);
    if (err != 0)
        return -err;
    w->running = true;
    return 0;
}

static void join_worker(worker_t *w)
{
    if (w->running) {
        pthread_join(w->tid, NULL);
        w->running = false;
    }
}

/* ---------------------------------------------------------------------------------------
 * Public API
 */

void eddy_carrier_options_init(eddy_carrier_options_t *o)
{
    memset(o, 0, sizeof *o);
    o->partitions = 8;
    o->consumers = 1;
    o->partition_size = 1024;
    o->max_batch = 256;
    o->gather_ns = 5000;
    o->retries = UINT32_MAX; /* P - 1, resolved by eddy_carrier_new() */
}

static void free_parts(eddy_carrier_t *c)
{
    for (unsigned p = 0; p < c->nparts; p++) {
        part_t *part = &c->parts[p];
        if (part->seqr != NULL && part->consumed != NULL)
            eddy_sequencer_remove_gating(part->seqr, part->consumed);
        eddy_sequencer_free(part->seqr);
        eddy_ring_free(part->ring);
        eddy_sequence_free(part->consumed);
        eddy_sequence_free(part->claim);
        free((void *)(uintptr_t)part->done);
    }
    free(c->parts);
    free(c->masks);
}

static void free_carrier(eddy_carrier_t *c)
{
    free_parts(c);
    for (unsigned t = 0; t < EDDY_CARRIER_MAX_THREADS; t++) {
        pthread_mutex_destroy(&c->workers[t].mu);
        pthread_cond_destroy(&c->workers[t].cv);
        free(c->workers[t].mine);
    }
    pthread_mutex_destroy(&c->admin);
    free(c);
}

int eddy_carrier_new(eddy_carrier_t **out, const eddy_carrier_options_t *o,
                     const eddy_carrier_ops_t *ops, void *arg)
{
    *out = NULL;
    if (o->partitions == 0 || o->consumers == 0 || o->consumers > EDDY_CARRIER_MAX_THREADS ||
        o->partition_size == 0 || (o->partition_size & (o->partition_size - 1)) != 0 ||
        o->max_batch == 0 || (ops != NULL && ops->consume == NULL))
        return EDDY_EINVAL;
    eddy_carrier_t *c = aligned_alloc(64, (sizeof *c + 63) & ~(size_t)63);
    if (c == NULL)
        return EDDY_ENOMEM;
    memset(c, 0, sizeof *c);
    c->o = *o;
    if (c->o.retries >= o->partitions)
        c->o.retries = o->partitions - 1;
    c->ops = ops;
    c->arg = arg;
    pthread_mutex_init(&c->admin, NULL);
    for (unsigned t = 0; t < EDDY_CARRIER_MAX_THREADS; t++) {
        worker_t *w = &c->workers[t];
        w->c = c;
        w->index = t;
        pthread_mutex_init(&w->mu, NULL);
        pthread_cond_init(&w->cv, NULL);
    }
    atomic_init(&c->epoch, 0);
    c->parts = aligned_alloc(64, sizeof(part_t) * o->partitions);
    if (c->parts == NULL) {
        c->nparts = 0;
        free_carrier(c);
        return EDDY_ENOMEM;
    }
    memset(c->parts, 0, sizeof(part_t) * o->partitions);
    c->nparts = o->partitions;
    c->masks = calloc(o->partitions, sizeof(uint64_t));
    bool ok = c->masks != NULL;
    for (unsigned t = 0; t < EDDY_CARRIER_MAX_THREADS && ok; t++)
        ok = (c->workers[t].mine = calloc(o->partitions, sizeof(unsigned))) != NULL;
    for (unsigned p = 0; p < c->nparts && ok; p++) {
        part_t *part = &c->parts[p];
        part->ws.ops = &part_ws_ops;
        part->c = c;
        atomic_init(&part->limit, NO_LIMIT);
        part->ring = eddy_ring_new(o->partition_size, sizeof(eddy_carrier_item_t), NULL, NULL);
        part->seqr = eddy_sequencer_new_multi(o->partition_size, &part->ws);
        part->consumed = eddy_sequence_new(EDDY_SEQUENCE_INITIAL);
        part->claim = eddy_sequence_new(EDDY_SEQUENCE_INITIAL);
        part->done = malloc(sizeof(part->done[0]) * o->partition_size);
        ok = part->ring != NULL && part->seqr != NULL && part->consumed != NULL &&
             part->claim != NULL && part->done != NULL &&
             eddy_sequencer_add_gating(part->seqr, &part->consumed, 1) == 0;
        if (ok)
            eddy_sequencer_set_ring(part->seqr, part->ring);
        /* Consumers hand out slices of the ring as item arrays: no padding between slots. */
        if (ok && eddy_ring_size(part->ring) > 1 &&
            (char *)eddy_ring_get(part->ring, 1) - (char *)eddy_ring_get(part->ring, 0) !=
                (ptrdiff_t)sizeof(eddy_carrier_item_t))
            ok = false;
        if (ok)
            for (size_t i = 0; i < o->partition_size; i++)
                atomic_init(&part->done[i], EDDY_SEQUENCE_INITIAL);
    }
    if (!ok) {
        free_carrier(c);
        return EDDY_ENOMEM;
    }
    apply_assignment(c, o->consumers);
    for (unsigned t = 0; t < o->consumers; t++) {
        int err = start_worker(c, t);
        if (err < 0) {
            atomic_store(&c->state, STATE_STOPPING);
            for (unsigned k = 0; k < t; k++)
                wake(&c->workers[k]);
            for (unsigned k = 0; k < t; k++)
                join_worker(&c->workers[k]);
            free_carrier(c);
            return err;
        }
    }
    *out = c;
    return 0;
}

static unsigned thread_slot(void)
{
    static _Atomic unsigned next;
    static _Thread_local unsigned id;
    if (id == 0)
        id = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) + 1;
    return id - 1;
}

/* Queue one item in part: 0, EDDY_EAGAIN (no slot) or EDDY_ENOBUFS (bytes threshold). */
static int put(eddy_carrier_t *c, part_t *part, uint64_t key, void *data, size_t bytes,
               task_t *task)
{
    size_t limit = c->o.partition_bytes;
    if (limit != 0 && bytes > 0) {
        size_t before = atomic_fetch_add_explicit(&part->bytes, bytes, memory_order_relaxed);
        if (before + bytes > limit) {
            atomic_fetch_sub_explicit(&part->bytes, bytes, memory_order_relaxed);
            return EDDY_ENOBUFS;
        }
    }
    int64_t seq = eddy_sequencer_try_next(part->seqr, 1);
    assert(seq >= 0 || seq == EDDY_EAGAIN); /* one slot always fits the partition's ring */
    int err = seq < 0 ? EDDY_EAGAIN : 0;
    /*
     * The shutdown handshake, Dekker-style: we claimed with the sequencer's seq_cst
     * compare-and-swap and read the state with a seq_cst load; the shutdown stores the state
     * and then reads the cursor. While we see RUNNING, the shutdown's look at the cursor is
     * bound to include our claim, and it waits for our publish. Seeing it closing, we learn
     * from the limit it stored whether it did: within it we publish (accepted), past it we
     * leave the slot unpublished (nobody will wait for it) and report the carrier closed.
     */
    if (err == 0 && atomic_load_explicit(&c->state, memory_order_seq_cst) != STATE_RUNNING) {
        int64_t last;
        while ((last = atomic_load_explicit(&part->limit, memory_order_acquire)) == NO_LIMIT)
            sched_yield(); /* the shutdown is between its state store and its look */
        if (seq > last)
            err = EDDY_ECLOSED;
    }
    if (err != 0) {
        if (limit != 0 && bytes > 0)
            atomic_fetch_sub_explicit(&part->bytes, bytes, memory_order_relaxed);
        return err;
    }
    eddy_carrier_item_t *it = eddy_ring_get(part->ring, seq);
    it->key = key;
    it->data = data;
    it->bytes = bytes;
    it->_task = task;
    eddy_sequencer_publish(part->seqr, seq); /* release; signals the partition's threads */
    return 0;
}

static int offer(eddy_carrier_t *c, uint64_t key, void *data, size_t bytes, task_t *task)
{
    if (c->o.partition_bytes != 0 && bytes > c->o.partition_bytes)
        return EDDY_ENOBUFS; /* it would never fit */
    unsigned P = c->nparts;
    unsigned p;
    unsigned tries = 0;
    switch (c->o.partitioner) {
    case EDDY_CARRIER_BY_KEY:
        p = (unsigned)(key % P);
        break;
    case EDDY_CARRIER_BY_THREAD:
        p = thread_slot() % P;
        break;
    default:
        p = (unsigned)(atomic_fetch_add_explicit(&c->rolling, 1, memory_order_relaxed) % P);
        tries = c->o.retries; /* rolling promises no order: any partition will do */
        break;
    }
    for (unsigned t = 0;;) {
        assert(p < P);
        part_t *part = &c->parts[p];
        /* A quick look; the handshake that counts is in put(), after the claim. */
        if (atomic_load_explicit(&c->state, memory_order_relaxed) != STATE_RUNNING)
            return EDDY_ECLOSED;
        int err = put(c, part, key, data, bytes, task);
        if (err == 0 || err == EDDY_ECLOSED)
            return err;
        if (c->o.full == EDDY_CARRIER_BLOCK) {
            sched_yield(); /* as eddy_sequencer_next() waits for room */
            continue;
        }
        if (t++ >= tries)
            return err;
        p = (p + 1) % P;
    }
}

int eddy_carrier_offer(eddy_carrier_t *c, uint64_t key, void *data, size_t bytes)
{
    if (c->ops == NULL)
        return EDDY_EINVAL; /* nobody would consume it */
    return offer(c, key, data, bytes, NULL);
}

eddy_future_t *eddy_carrier_execute(eddy_carrier_t *c, uint64_t key, eddy_carrier_fn fn, void *arg)
{
    task_t *t = malloc(sizeof *t);
    eddy_promise_t *p = t != NULL ? eddy_promise_new(NULL) : NULL;
    if (p == NULL) {
        free(t);
        return NULL;
    }
    t->fn = fn;
    t->promise = eddy_future_retain(p); /* the carrier's reference, released by run_task() */
    int err = fn == NULL ? EDDY_EINVAL : offer(c, key, arg, 0, t);
    if (err < 0) {
        eddy_promise_fail(p, err);
        eddy_future_release(p);
        free(t);
    }
    return p;
}

int eddy_carrier_set_consumers(eddy_carrier_t *c, unsigned m)
{
    if (m == 0 || m > EDDY_CARRIER_MAX_THREADS)
        return EDDY_EINVAL;
    pthread_mutex_lock(&c->admin);
    if (atomic_load(&c->state) != STATE_RUNNING) {
        pthread_mutex_unlock(&c->admin);
        return EDDY_ECLOSED;
    }
    unsigned old = atomic_load(&c->m);
    int err = 0;
    for (unsigned t = old; t < m; t++) {
        err = start_worker(c, t);
        if (err < 0) {
            m = t;
            break;
        }
    }
    if (m != old) {
        /*
         * Every removed thread and every moved partition's old thread finishes the batch it
         * holds under the partition's lock; the new thread waits for that lock.
         */
        apply_assignment(c, m);
        for (unsigned t = m; t < old; t++)
            atomic_store(&c->workers[t].stop, true);
        unsigned top = m > old ? m : old;
        for (unsigned t = 0; t < top; t++)
            wake(&c->workers[t]);
        for (unsigned t = m; t < old; t++)
            join_worker(&c->workers[t]);
    }
    pthread_mutex_unlock(&c->admin);
    return err;
}

int eddy_carrier_shutdown(eddy_carrier_t *c, eddy_carrier_stop_t how)
{
    pthread_mutex_lock(&c->admin);
    if (atomic_load(&c->state) != STATE_RUNNING) {
        pthread_mutex_unlock(&c->admin);
        return EDDY_EALREADY;
    }
    assert(atomic_load(&c->m) > 0); /* someone to drain the partitions */
    atomic_store(&c->how, (int)how);
    atomic_store_explicit(&c->state, STATE_CLOSING, memory_order_seq_cst);
    /* Pairs with the producers' seq_cst claim and state load (see put()). */
    atomic_thread_fence(memory_order_seq_cst);
    /*
     * Every claim up to each partition's cursor now is accepted: its producer publishes it
     * (see put()). Later claims see CLOSING and the limit, and back out. Store every limit
     * first (producers wait for theirs), then wait for the publishes, after which nothing
     * more is published.
     */
    for (unsigned p = 0; p < c->nparts; p++) {
        part_t *part = &c->parts[p];
        int64_t last = eddy_sequence_get(eddy_sequencer_cursor(part->seqr));
        atomic_store_explicit(&part->limit, last, memory_order_release);
    }
    for (unsigned p = 0; p < c->nparts; p++) {
        part_t *part = &c->parts[p];
        int64_t last = atomic_load_explicit(&part->limit, memory_order_relaxed);
        int64_t from = eddy_sequence_get(part->consumed) + 1;
        for (int64_t seq = from; seq <= last; seq++)
            while (!eddy_sequencer_is_available(part->seqr, seq))
                sched_yield(); /* a producer between its claim and its publish */
    }
    atomic_store_explicit(&c->state, STATE_STOPPING, memory_order_seq_cst);
    unsigned m = atomic_load(&c->m);
    for (unsigned t = 0; t < m; t++)
        wake(&c->workers[t]);
    for (unsigned t = 0; t < m; t++)
        join_worker(&c->workers[t]);
    atomic_store(&c->state, STATE_STOPPED);
    pthread_mutex_unlock(&c->admin);
    return 0;
}

void eddy_carrier_free(eddy_carrier_t *c)
{
    if (c == NULL)
        return;
    if (atomic_load(&c->state) == STATE_RUNNING)
        eddy_carrier_shutdown(c, EDDY_CARRIER_DRAIN);
    free_carrier(c);
}

unsigned eddy_carrier_partitions(const eddy_carrier_t *c)
{
    return c->nparts;
}

unsigned eddy_carrier_consumers(const eddy_carrier_t *c)
{
    return atomic_load(&c->m);
}

size_t eddy_carrier_pending(eddy_carrier_t *c, unsigned p)
{
    if (p >= c->nparts)
        return 0;
    part_t *part = &c->parts[p];
    int64_t top = eddy_sequence_get(eddy_sequencer_cursor(part->seqr));
    int64_t done = eddy_sequence_get(part->consumed);
    return top > done ? (size_t)(top - done) : 0;
}

void eddy_carrier_batch_histogram(const eddy_carrier_t *c, uint64_t *hist, size_t n)
{
    for (size_t k = 0; k < n; k++)
        hist[k] = 0;
    for (unsigned t = 0; t < EDDY_CARRIER_MAX_THREADS; t++)
        for (size_t k = 0; k < HIST_N && n > 0; k++)
            hist[k < n ? k : n - 1] +=
                atomic_load_explicit(&c->workers[t].hist[k], memory_order_relaxed);
}
