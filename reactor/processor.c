/*
 * Event processors: the batch processor (Disruptor's BatchEventProcessor: one handler, every
 * event, in batches) and the worker pool (WorkerPool and WorkProcessor: N workers, each event
 * to one of them through a shared work sequence).
 *
 * Halting drains: a halted processor still handles every event its barrier can see at the
 * moment it notices the halt, then stops. The halting thread's alert (a release store) is
 * acquired by the processor when it sees it, so everything published before eddy_*_halt()
 * was called is visible to that last look.
 */
#include "reactor/internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Batch processor
 */

struct eddy_batch_processor_s {
    /* The last sequence handled; producers and downstream consumers read it. */
    eddy_sequence_t sequence;
    alignas(EDDY__LINE) eddy_ring_t *ring;
    eddy_barrier_t *barrier;
    eddy_event_handler_t h;
    _Atomic bool running;
    bool has_thread; /* started and not joined; the controlling thread's */
    pthread_t thread;
};

eddy_batch_processor_t *eddy_batch_processor_new(eddy_ring_t *ring, eddy_sequencer_t *s,
                                                 eddy_sequence_t *const *deps, size_t n,
                                                 const eddy_event_handler_t *h)
{
    if (ring == NULL || s == NULL || h == NULL || h->ops == NULL || h->ops->on_event == NULL)
        return NULL;
    eddy_batch_processor_t *p = eddy__aligned_zalloc(sizeof *p);
    if (p == NULL)
        return NULL;
    p->barrier = eddy_sequencer_new_barrier(s, deps, n);
    if (p->barrier == NULL) {
        free(p);
        return NULL;
    }
    eddy_sequence_init(&p->sequence, EDDY_SEQUENCE_INITIAL);
    p->ring = ring;
    p->h = *h;
    atomic_init(&p->running, false);
    return p;
}

int eddy_batch_processor_free(eddy_batch_processor_t *p)
{
    if (p == NULL)
        return 0;
    if (atomic_load_explicit(&p->running, memory_order_acquire) || p->has_thread)
        return EDDY_EBUSY;
    eddy_barrier_free(p->barrier);
    free(p);
    return 0;
}

/* Handle [next, avail] and publish our progress; returns avail + 1. */
static int64_t handle_batch(eddy_batch_processor_t *p, int64_t next, int64_t avail)
{
    const eddy_event_handler_ops_t *ops = p->h.ops;
    int (*on_event)(void *, int64_t, bool, void *) = ops->on_event;
    void *arg = p->h.arg;
    assert(next <= avail && on_event != NULL);
    if (ops->on_batch_start != NULL)
        ops->on_batch_start(avail - next + 1, arg);
    /* The ring's geometry in locals: on_event is an opaque call, after which the compiler
     * would otherwise reload it through p->ring on every event. */
    char *slots = p->ring->_slots;
    size_t stride = p->ring->_stride;
    int64_t mask = p->ring->_mask;
    for (; next <= avail; next++) {
        void *slot = slots + (size_t)(next & mask) * stride;
        int rc = on_event(slot, next, next == avail, arg);
        if (EDDY_UNLIKELY(rc < 0) && ops->on_error != NULL)
            ops->on_error(slot, next, rc, arg);
    }
    /* Pairs with the acquire loads of producers (gating) and downstream barriers: our reads
     * and writes of the slots happen before they reuse or read them. */
    eddy_sequence_set(&p->sequence, avail);
    return next;
}

static void batch_loop(eddy_batch_processor_t *p)
{
    const eddy_event_handler_ops_t *ops = p->h.ops;
    if (ops->on_start != NULL)
        ops->on_start(p->h.arg);
    int64_t next = eddy_sequence_get(&p->sequence) + 1;
    for (;;) {
        int64_t avail = eddy__barrier_wait_for(p->barrier, next);
        if (EDDY_LIKELY(avail >= next)) {
            next = handle_batch(p, next, avail);
        } else if (avail == EDDY_ECANCELED) {
            /* Only halt alerts our private barrier: drain what is visible now, then stop. */
            avail = eddy_barrier_peek(p->barrier, next);
            if (avail >= next)
                next = handle_batch(p, next, avail);
            break;
        } else if (avail == EDDY_ETIMEDOUT) {
            if (ops->on_timeout != NULL)
                ops->on_timeout(eddy_sequence_get(&p->sequence), p->h.arg);
        }
        /* Otherwise a multi-producer slot is claimed but not yet published: ask again. */
    }
    if (ops->on_shutdown != NULL)
        ops->on_shutdown(p->h.arg);
}

int eddy_batch_processor_run(eddy_batch_processor_t *p)
{
    bool idle = false;
    if (!atomic_compare_exchange_strong_explicit(&p->running, &idle, true, memory_order_acq_rel,
                                                 memory_order_acquire))
        return EDDY_EBUSY;
    batch_loop(p);
    eddy_barrier_clear_alert(p->barrier);
    /* Pairs with the acquire loads in free and is_running. */
    atomic_store_explicit(&p->running, false, memory_order_release);
    return 0;
}

static void *batch_thread(void *arg)
{
    eddy_batch_processor_run(arg);
    return NULL;
}

int eddy_batch_processor_start(eddy_batch_processor_t *p)
{
    if (p->has_thread || atomic_load_explicit(&p->running, memory_order_acquire))
        return EDDY_EBUSY;
    int err = pthread_create(&p->thread, NULL, batch_thread, p);
    if (err != 0)
        return -err;
    p->has_thread = true;
    return 0;
}

void eddy_batch_processor_halt(eddy_batch_processor_t *p)
{
    eddy_barrier_alert(p->barrier);
}

int eddy_batch_processor_join(eddy_batch_processor_t *p)
{
    if (!p->has_thread)
        return EDDY_EINVAL;
    pthread_join(p->thread, NULL);
    p->has_thread = false;
    return 0;
}

eddy_sequence_t *eddy_batch_processor_sequence(eddy_batch_processor_t *p)
{
    return &p->sequence;
}

bool eddy_batch_processor_is_running(const eddy_batch_processor_t *p)
{
    return atomic_load_explicit(&p->running, memory_order_acquire);
}

/* ---------------------------------------------------------------------------------------
 * Worker pool
 */

typedef struct {
    /* The sequence before the one this worker claimed last: it has handled everything up to
     * here that it claimed. Producers and downstream consumers read it. */
    eddy_sequence_t sequence;
    alignas(EDDY__LINE) eddy_worker_pool_t *pool;
    eddy_barrier_t *barrier;
    eddy_event_handler_t h;
    pthread_t thread;
} worker_t;

struct eddy_worker_pool_s {
    /* The last sequence claimed by any worker, advanced by compare-and-swap. */
    eddy_sequence_t work_sequence;
    alignas(EDDY__LINE) eddy_ring_t *ring;
    eddy_sequencer_t *seqr;
    size_t n;
    size_t nthreads; /* started and not joined; the controlling thread's */
    worker_t *workers;
};

eddy_worker_pool_t *eddy_worker_pool_new(eddy_ring_t *ring, eddy_sequencer_t *s,
                                         eddy_sequence_t *const *deps, size_t ndeps,
                                         const eddy_event_handler_t *hs, size_t n)
{
    if (ring == NULL || s == NULL || hs == NULL || n == 0)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (hs[i].ops == NULL || hs[i].ops->on_event == NULL)
            return NULL;
    }
    eddy_worker_pool_t *pool = eddy__aligned_zalloc(sizeof *pool);
    if (pool == NULL)
        return NULL;
    pool->workers = eddy__aligned_zalloc(n * sizeof *pool->workers);
    if (pool->workers == NULL) {
        free(pool);
        return NULL;
    }
    eddy_sequence_init(&pool->work_sequence, EDDY_SEQUENCE_INITIAL);
    pool->ring = ring;
    pool->seqr = s;
    pool->n = n;
    for (size_t i = 0; i < n; i++) {
        worker_t *w = &pool->workers[i];
        /* One barrier per worker: a barrier caches what it found for its one thread. */
        w->barrier = eddy_sequencer_new_barrier(s, deps, ndeps);
        if (w->barrier == NULL) {
            for (size_t j = 0; j < i; j++)
                eddy_barrier_free(pool->workers[j].barrier);
            free(pool->workers);
            free(pool);
            return NULL;
        }
        eddy_sequence_init(&w->sequence, EDDY_SEQUENCE_INITIAL);
        w->pool = pool;
        w->h = hs[i];
    }
    return pool;
}

int eddy_worker_pool_free(eddy_worker_pool_t *pool)
{
    if (pool == NULL)
        return 0;
    if (pool->nthreads > 0)
        return EDDY_EBUSY;
    for (size_t i = 0; i < pool->n; i++)
        eddy_barrier_free(pool->workers[i].barrier);
    free(pool->workers);
    free(pool);
    return 0;
}

/* Claim the next sequence of the pool for w (WorkProcessor's loop on workSequence). */
static int64_t worker_claim(worker_t *w)
{
    eddy_sequence_t *work = &w->pool->work_sequence;
    int64_t next;
    do {
        next = eddy_sequence_get(work) + 1;
        /* Before the claim is visible, hold the producers back from what we are claiming. */
        eddy_sequence_set(&w->sequence, next - 1);
    } while (!eddy_sequence_cas(work, next - 1, next));
    return next;
}

static void worker_handle(worker_t *w, int64_t seq)
{
    void *slot = eddy_ring_get(w->pool->ring, seq);
    int rc = w->h.ops->on_event(slot, seq, true, w->h.arg);
    if (EDDY_UNLIKELY(rc < 0) && w->h.ops->on_error != NULL)
        w->h.ops->on_error(slot, seq, rc, w->h.arg);
}

static void *worker_thread(void *arg)
{
    worker_t *w = arg;
    const eddy_event_handler_ops_t *ops = w->h.ops;
    if (ops->on_start != NULL)
        ops->on_start(w->h.arg);
    int64_t cached = INT64_MIN;
    int64_t next = worker_claim(w);
    for (;;) {
        if (cached >= next) {
            worker_handle(w, next);
            next = worker_claim(w);
            continue;
        }
        int64_t avail = eddy__barrier_wait_for(w->barrier, next);
        if (avail == EDDY_ECANCELED) {
            /* Halted: keep handling and claiming while what we hold is visible now. Claims are
             * exclusive, so every drained event still goes to exactly one worker. */
            while (eddy_barrier_peek(w->barrier, next) >= next) {
                worker_handle(w, next);
                next = worker_claim(w);
            }
            break;
        }
        if (avail == EDDY_ETIMEDOUT) {
            if (ops->on_timeout != NULL)
                ops->on_timeout(eddy_sequence_get(&w->sequence), w->h.arg);
            continue;
        }
        cached = avail;
    }
    if (ops->on_shutdown != NULL)
        ops->on_shutdown(w->h.arg);
    return NULL;
}

int eddy_worker_pool_start(eddy_worker_pool_t *pool)
{
    if (pool->nthreads > 0)
        return EDDY_EBUSY;
    int64_t cursor = eddy_sequence_get(eddy_sequencer_cursor(pool->seqr));
    eddy_sequence_set(&pool->work_sequence, cursor);
    for (size_t i = 0; i < pool->n; i++) {
        eddy_sequence_set(&pool->workers[i].sequence, cursor);
        eddy_barrier_clear_alert(pool->workers[i].barrier);
    }
    for (size_t i = 0; i < pool->n; i++) {
        int err = pthread_create(&pool->workers[i].thread, NULL, worker_thread, &pool->workers[i]);
        if (err != 0) {
            eddy_worker_pool_halt(pool);
            eddy_worker_pool_join(pool);
            return -err;
        }
        pool->nthreads++;
    }
    return 0;
}

void eddy_worker_pool_halt(eddy_worker_pool_t *pool)
{
    for (size_t i = 0; i < pool->n; i++)
        eddy_barrier_alert(pool->workers[i].barrier);
}

int eddy_worker_pool_join(eddy_worker_pool_t *pool)
{
    if (pool->nthreads == 0)
        return EDDY_EINVAL;
    for (size_t i = 0; i < pool->nthreads; i++)
        pthread_join(pool->workers[i].thread, NULL);
    pool->nthreads = 0;
    return 0;
}

size_t eddy_worker_pool_sequences(eddy_worker_pool_t *pool, eddy_sequence_t **out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < pool->n && k < cap; i++)
        out[k++] = &pool->workers[i].sequence;
    if (k < cap)
        out[k] = &pool->work_sequence;
    return pool->n + 1;
}
