/*
 * The ring (preallocated slots), the single- and multi-producer sequencers, and sequence
 * barriers: the Disruptor's RingBuffer, SingleProducerSequencer, MultiProducerSequencer and
 * ProcessingSequenceBarrier, in C11 atomics.
 */
#include "reactor/internal.h"

#include <assert.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------------------
 * The ring
 */

/* Slots are this aligned, so a slot holding a long double or a pointer pair is aligned too. */
#define SLOT_ALIGN 16

static bool is_pow2(size_t n)
{
    return n != 0 && (n & (n - 1)) == 0;
}

eddy_ring_t *eddy_ring_new(size_t size, size_t slot_size, eddy_ring_init_cb init_cb, void *arg)
{
    if (!is_pow2(size) || size > ((size_t)1 << 40) || slot_size == 0 || slot_size > SIZE_MAX / 4)
        return NULL;
    size_t stride = (slot_size + SLOT_ALIGN - 1) & ~(size_t)(SLOT_ALIGN - 1);
    if (stride > (SIZE_MAX - 3 * EDDY__LINE) / size)
        return NULL;
    eddy_ring_t *ring = malloc(sizeof *ring);
    if (ring == NULL)
        return NULL;
    /* Padding at both ends keeps the first and last slots off lines that other allocations
     * write (the Disruptor pads its entries array the same way, BUFFER_PAD). calloc, not
     * aligned memory cleared by hand: a large ring comes zeroed from the kernel, and its
     * pages cost memory only once a slot on them is used (a loop's 512 KiB task ring). */
    ring->_mem = calloc(1, 3 * EDDY__LINE + size * stride);
    if (ring->_mem == NULL) {
        free(ring);
        return NULL;
    }
    uintptr_t first = (uintptr_t)ring->_mem + EDDY__LINE;
    ring->_slots = (char *)((first + EDDY__LINE - 1) & ~(uintptr_t)(EDDY__LINE - 1));
    assert(((uintptr_t)ring->_slots & (EDDY__LINE - 1)) == 0);
    ring->_stride = stride;
    ring->_mask = (int64_t)size - 1;
    ring->_size = size;
    ring->_slot_size = slot_size;
    if (init_cb != NULL) {
        for (size_t i = 0; i < size; i++)
            init_cb(ring->_slots + i * stride, i, arg);
    }
    return ring;
}

void eddy_ring_free(eddy_ring_t *ring)
{
    if (ring == NULL)
        return;
    free(ring->_mem);
    free(ring);
}

/* ---------------------------------------------------------------------------------------
 * Sequencers
 */

/*
 * A producer that finds the ring full spins briefly with a pause hint, then sleeps 1 ns each
 * time round, as Java's MultiProducerSequencer parks for 1 ns: Linux stretches it to its
 * timer slack (about 50 us), long enough for the consumers to drain a large batch while the
 * producer is off the CPU. A sched_yield() here let producers take the cores back at once
 * when threads outnumber cores: 2p1c went from 9.3-12.6 to 13.1-15.5 Mops/s (busy-spin,
 * alternating builds, bench/RESULTS.md machine).
 */
#define FULL_SPINS 100

static void full_backoff(unsigned *spins)
{
    if (*spins < FULL_SPINS) {
        (*spins)++;
        eddy__cpu_relax();
    } else {
        nanosleep(&(struct timespec){0, 1}, NULL);
    }
}

static int64_t gating_min(eddy_sequencer_t *s, int64_t dflt)
{
    /* Count ourselves in the epoch we read (see wait_gating_readers): seq_cst, so a remover
     * that flips the epoch after we checked it sees our count. */
    unsigned e;
    for (;;) {
        e = atomic_load(&s->gating_epoch) & 1;
        atomic_fetch_add(&s->gating_readers[e], 1);
        if ((atomic_load(&s->gating_epoch) & 1) == e)
            break;
        atomic_fetch_sub(&s->gating_readers[e], 1);
    }
    /* Pairs with the store that installs a snapshot in set_gating(): the snapshot's contents
     * are visible. seq_cst, so a reader counted after the remover looked sees the new one. */
    eddy__gating_t *g = atomic_load(&s->gating);
    int64_t min = eddy_sequence_min(g->seqs, g->n, dflt);
    /* Pairs with the load in wait_gating_readers(): our reads are done. */
    atomic_fetch_sub_explicit(&s->gating_readers[e], 1, memory_order_release);
    return min;
}

/* Wait until no producer reads a snapshot installed before this call. Under gating_lock. */
static void wait_gating_readers(eddy_sequencer_t *s)
{
    /* seq_cst, against the readers' increment and check of the epoch; the load acquires
     * their release decrement. */
    unsigned e = atomic_fetch_add(&s->gating_epoch, 1) & 1;
    while (atomic_load(&s->gating_readers[e]) != 0)
        sched_yield();
}

static eddy_sequencer_t *sequencer_new(int kind, size_t size, eddy_wait_strategy_t *ws)
{
    if (!is_pow2(size) || size > ((size_t)1 << 40) || ws == NULL || ws->ops == NULL ||
        ws->ops->wait_for == NULL)
        return NULL;
    eddy_sequencer_t *s = eddy__aligned_zalloc(sizeof *s);
    if (s == NULL)
        return NULL;
    eddy_sequence_init(&s->cursor, EDDY_SEQUENCE_INITIAL);
    eddy_sequence_init(&s->gating_cache, EDDY_SEQUENCE_INITIAL);
    s->next_value = EDDY_SEQUENCE_INITIAL;
    s->cached_value = EDDY_SEQUENCE_INITIAL;
    s->kind = kind;
    s->signal = ws->ops->signal_all != NULL;
    s->shift = __builtin_ctzll((unsigned long long)size);
    s->size = (int64_t)size;
    s->claim_slack = s->size / 8 < EDDY__CLAIM_SLACK ? s->size / 8 : EDDY__CLAIM_SLACK;
    s->mask = (int64_t)size - 1;
    s->ws = ws;
    eddy__gating_t *g = calloc(1, sizeof *g);
    if (g == NULL || pthread_mutex_init(&s->gating_lock, NULL) != 0) {
        free(g);
        free(s);
        return NULL;
    }
    atomic_init(&s->gating, g);
    if (kind == EDDY__PRODUCER_MULTI) {
        s->available = eddy__aligned_zalloc(size * sizeof *s->available);
        if (s->available == NULL) {
            pthread_mutex_destroy(&s->gating_lock);
            free(g);
            free(s);
            return NULL;
        }
        /* Lap -1: no slot holds a published sequence yet (sequence 0 is lap 0). */
        for (size_t i = 0; i < size; i++)
            atomic_init(&s->available[i], -1);
    }
    return s;
}

eddy_sequencer_t *eddy_sequencer_new_single(size_t size, eddy_wait_strategy_t *ws)
{
    return sequencer_new(EDDY__PRODUCER_SINGLE, size, ws);
}

eddy_sequencer_t *eddy_sequencer_new_multi(size_t size, eddy_wait_strategy_t *ws)
{
    return sequencer_new(EDDY__PRODUCER_MULTI, size, ws);
}

void eddy_sequencer_free(eddy_sequencer_t *s)
{
    if (s == NULL)
        return;
    free(atomic_load_explicit(&s->gating, memory_order_relaxed));
    for (eddy__gating_t *g = s->retired; g != NULL;) {
        eddy__gating_t *next = g->retired_next;
        free(g);
        g = next;
    }
    pthread_mutex_destroy(&s->gating_lock);
    free(s->available);
    free(s);
}

void eddy__sequencer_signal(eddy_sequencer_t *s)
{
    if (s->ws->ops->signal_all != NULL)
        s->ws->ops->signal_all(s->ws);
}

/*
 * Single producer (SingleProducerSequencer). next_value and cached_value belong to the one
 * producer thread, so a claim is plain loads and stores; the gating sequences are read only
 * when the claim might wrap onto the slowest consumer according to the cached minimum.
 */
static bool sp_has_capacity(eddy_sequencer_t *s, int64_t n)
{
    int64_t next_value = s->next_value;
    int64_t wrap = next_value + n - s->size;
    int64_t cached = s->cached_value;
    if (wrap > cached || cached > next_value) {
        /* StoreLoad: our last cursor store is globally visible before we read the consumers'
         * sequences (Java's cursor.setVolatile here), so a consumer blocked on the cursor and
         * this producer reading its sequence cannot both miss each other's progress. */
        eddy__fence_seq_cst();
        int64_t min = gating_min(s, next_value);
        s->cached_value = min;
        if (wrap > min)
            return false;
    }
    return true;
}

/*
 * The claim may wrap onto the slowest consumer as far as the cached minimum tells: read the
 * gating sequences, waiting while they are a full ring behind. Out of line, so that the common
 * claim (inlined into eddy_sequencer_next) needs no stack frame or saved registers.
 */
static __attribute__((noinline, cold)) void sp_wait_gating(eddy_sequencer_t *s, int64_t next_value,
                                                           int64_t wrap)
{
    /* StoreLoad, as in sp_has_capacity(). */
    eddy__fence_seq_cst();
    unsigned spins = 0;
    int64_t min;
    while (wrap > (min = gating_min(s, next_value)))
        full_backoff(&spins);
    s->cached_value = min;
}

static inline int64_t sp_next(eddy_sequencer_t *s, int64_t n)
{
    assert(s->kind == EDDY__PRODUCER_SINGLE && n >= 1 && n <= s->size);
    int64_t next_value = s->next_value;
    int64_t next_seq = next_value + n;
    int64_t wrap = next_seq - s->size;
    int64_t cached = s->cached_value;
    if (EDDY_UNLIKELY(wrap > cached || cached > next_value))
        sp_wait_gating(s, next_value, wrap);
    s->next_value = next_seq;
    return next_seq;
}

/*
 * Multi producer (MultiProducerSequencer). The cursor is the highest claimed sequence;
 * eddy_sequencer_next() claims with one fetch-add and then, only if the claim may wrap, waits
 * for the consumers (as Disruptor 4 does), so contending producers never retry. try_next must
 * not claim what it cannot have, so it checks and claims with compare-and-swap (Disruptor
 * 3.4's next). Publishing stores the sequence's lap number in its slot of the availability
 * buffer, and consumers accept a slot only when its lap matches.
 */
static bool mp_has_capacity(eddy_sequencer_t *s, int64_t n, int64_t cursor)
{
    int64_t wrap = cursor + n - s->size;
    int64_t cached = eddy_sequence_get(&s->gating_cache);
    if (wrap > cached || cached > cursor) {
        int64_t min = gating_min(s, cursor);
        eddy_sequence_set(&s->gating_cache, min);
        if (wrap > min)
            return false;
    }
    return true;
}

/* As sp_wait_gating(), for a multi-producer claim of (current, current + n]. */
static __attribute__((noinline, cold)) void mp_wait_gating(eddy_sequencer_t *s, int64_t current,
                                                           int64_t wrap)
{
    unsigned spins = 0;
    int64_t min;
    while (wrap > (min = gating_min(s, current)))
        full_backoff(&spins);
    eddy_sequence_set(&s->gating_cache, min);
}

static inline int64_t mp_next(eddy_sequencer_t *s, int64_t n)
{
    assert(s->kind == EDDY__PRODUCER_MULTI && n >= 1 && n <= s->size);
    int64_t next = eddy_sequence_add_and_get(&s->cursor, n);
    int64_t current = next - n;
    int64_t wrap = next - s->size;
    /* Pairs with the release store in mp_wait_gating() and mp_has_capacity(): another
     * producer's view of the consumers. Only a hint; gating_min() decides. */
    int64_t cached = eddy_sequence_get(&s->gating_cache);
    if (EDDY_UNLIKELY(wrap > cached || cached > current))
        mp_wait_gating(s, current, wrap);
    else
        eddy__sequencer_mp_prefetch(s, next, cached);
    return next;
}

bool eddy__sequencer_mp_room_slow(eddy_sequencer_t *s, int64_t seq)
{
    assert(s->kind == EDDY__PRODUCER_MULTI && seq >= 0);
    int64_t min = gating_min(s, seq - 1);
    eddy_sequence_set(&s->gating_cache, min);
    return seq - s->size <= min;
}

static int64_t mp_try_next(eddy_sequencer_t *s, int64_t n)
{
    assert(s->kind == EDDY__PRODUCER_MULTI);
    int64_t current;
    int64_t next;
    do {
        current = eddy_sequence_get(&s->cursor);
        next = current + n;
        if (!mp_has_capacity(s, n, current))
            return EDDY_EAGAIN;
    } while (!eddy_sequence_cas(&s->cursor, current, next));
    eddy__sequencer_mp_prefetch(s, next, eddy_sequence_get(&s->gating_cache));
    return next;
}

static inline void mp_set_available(eddy_sequencer_t *s, int64_t seq)
{
    /* Not a loop's sequencer, whose slots publish themselves (drop_availability). */
    assert(s->available != NULL && seq >= 0);
    /* Pairs with the acquire loads in eddy__sequencer_mp_is_published() and
     * eddy__sequencer_mp_published(): the slot's contents, written before this store, are
     * visible to the consumer that sees the lap number. */
    atomic_store_explicit(&s->available[seq & s->mask], (int32_t)(seq >> s->shift),
                          memory_order_release);
}

void eddy__sequencer_drop_availability(eddy_sequencer_t *s)
{
    assert(s->kind == EDDY__PRODUCER_MULTI);
    free(s->available);
    s->available = NULL;
}

void eddy_sequencer_set_ring(eddy_sequencer_t *s, const eddy_ring_t *ring)
{
    if (s->kind == EDDY__PRODUCER_MULTI && (ring == NULL || (int64_t)ring->_size == s->size))
        s->prefetch_ring = ring;
}

int64_t eddy_sequencer_next(eddy_sequencer_t *s, int64_t n)
{
    if (EDDY_UNLIKELY(n < 1 || n > s->size))
        return EDDY_EINVAL;
    return s->kind == EDDY__PRODUCER_SINGLE ? sp_next(s, n) : mp_next(s, n);
}

int64_t eddy_sequencer_try_next(eddy_sequencer_t *s, int64_t n)
{
    if (n < 1 || n > s->size)
        return EDDY_EINVAL;
    if (s->kind == EDDY__PRODUCER_MULTI)
        return mp_try_next(s, n);
    if (!sp_has_capacity(s, n))
        return EDDY_EAGAIN;
    s->next_value += n;
    return s->next_value;
}

void eddy_sequencer_publish(eddy_sequencer_t *s, int64_t seq)
{
    if (s->kind == EDDY__PRODUCER_SINGLE)
        eddy_sequence_set(&s->cursor, seq); /* pairs with the consumers' eddy_sequence_get() */
    else
        mp_set_available(s, seq);
    /* Strategies where nobody sleeps have no signal_all: no call, not even an indirect load. */
    if (s->signal)
        s->ws->ops->signal_all(s->ws);
}

void eddy_sequencer_publish_range(eddy_sequencer_t *s, int64_t lo, int64_t hi)
{
    assert(lo <= hi && hi - lo < s->size); /* one claim, which fits the ring */
    if (s->kind == EDDY__PRODUCER_SINGLE) {
        eddy_sequence_set(&s->cursor, hi); /* pairs with the consumers' eddy_sequence_get() */
    } else {
        for (int64_t seq = lo; seq <= hi; seq++)
            mp_set_available(s, seq);
    }
    if (s->signal)
        s->ws->ops->signal_all(s->ws);
}

bool eddy_sequencer_has_capacity(eddy_sequencer_t *s, int64_t n)
{
    if (n < 1 || n > s->size)
        return false;
    if (s->kind == EDDY__PRODUCER_SINGLE)
        return sp_has_capacity(s, n);
    return mp_has_capacity(s, n, eddy_sequence_get(&s->cursor));
}

int64_t eddy_sequencer_remaining_capacity(eddy_sequencer_t *s)
{
    int64_t produced = s->kind == EDDY__PRODUCER_SINGLE ? s->next_value
                                                         : eddy_sequence_get(&s->cursor);
    int64_t consumed = gating_min(s, produced);
    int64_t left = s->size - (produced - consumed);
    return left < 0 ? 0 : left;
}

const eddy_sequence_t *eddy_sequencer_cursor(const eddy_sequencer_t *s)
{
    return &s->cursor;
}

size_t eddy_sequencer_size(const eddy_sequencer_t *s)
{
    return (size_t)s->size;
}

bool eddy_sequencer_is_available(const eddy_sequencer_t *s, int64_t seq)
{
    if (seq < 0)
        return false;
    if (s->kind == EDDY__PRODUCER_MULTI)
        return eddy__sequencer_mp_is_published(s, seq);
    int64_t cursor = eddy_sequence_get(&s->cursor);
    return seq <= cursor && seq > cursor - s->size;
}

/* Install g as the gating snapshot and retire the old one. Under gating_lock. */
static void set_gating(eddy_sequencer_t *s, eddy__gating_t *g)
{
    eddy__gating_t *old = atomic_load_explicit(&s->gating, memory_order_relaxed);
    /* Pairs with the load in gating_min(). */
    atomic_store(&s->gating, g);
    old->retired_next = s->retired;
    s->retired = old;
}

static int64_t cursor_for_gating(eddy_sequencer_t *s)
{
    /* The producer's next_value is its own; the published cursor is what others may read. */
    return eddy_sequence_get(&s->cursor);
}

int eddy_sequencer_add_gating(eddy_sequencer_t *s, eddy_sequence_t *const *seqs, size_t n)
{
    if (n == 0)
        return 0;
    pthread_mutex_lock(&s->gating_lock);
    eddy__gating_t *old = atomic_load_explicit(&s->gating, memory_order_relaxed);
    eddy__gating_t *g = malloc(sizeof *g + (old->n + n) * sizeof g->seqs[0]);
    if (g == NULL) {
        pthread_mutex_unlock(&s->gating_lock);
        return EDDY_ENOMEM;
    }
    g->retired_next = NULL;
    g->n = old->n + n;
    memcpy(g->seqs, old->seqs, old->n * sizeof g->seqs[0]);
    int64_t cursor = cursor_for_gating(s);
    for (size_t i = 0; i < n; i++) {
        eddy_sequence_set(seqs[i], cursor);
        g->seqs[old->n + i] = seqs[i];
    }
    set_gating(s, g);
    /* The cursor may have moved while we installed the snapshot, and a producer reading the
     * old snapshot could not see the new sequences: set them again (as Java's
     * SequenceGroups.addSequences does), so they never claim a slot already overwritten. */
    cursor = cursor_for_gating(s);
    for (size_t i = 0; i < n; i++)
        eddy_sequence_set(seqs[i], cursor);
    pthread_mutex_unlock(&s->gating_lock);
    return 0;
}

int eddy_sequencer_remove_gating(eddy_sequencer_t *s, const eddy_sequence_t *seq)
{
    pthread_mutex_lock(&s->gating_lock);
    eddy__gating_t *old = atomic_load_explicit(&s->gating, memory_order_relaxed);
    size_t found = 0;
    for (size_t i = 0; i < old->n; i++)
        found += old->seqs[i] == seq;
    if (found == 0) {
        pthread_mutex_unlock(&s->gating_lock);
        return EDDY_ENOENT;
    }
    eddy__gating_t *g = malloc(sizeof *g + (old->n - found) * sizeof g->seqs[0]);
    if (g == NULL) {
        pthread_mutex_unlock(&s->gating_lock);
        return EDDY_ENOMEM;
    }
    g->retired_next = NULL;
    g->n = 0;
    for (size_t i = 0; i < old->n; i++) {
        if (old->seqs[i] != seq)
            g->seqs[g->n++] = old->seqs[i];
    }
    set_gating(s, g);
    /* The caller may free seq once we return: no producer may still be reading it. */
    wait_gating_readers(s);
    pthread_mutex_unlock(&s->gating_lock);
    return 0;
}

int64_t eddy_sequencer_min_gating(eddy_sequencer_t *s)
{
    return gating_min(s, eddy_sequence_get(&s->cursor));
}

/* ---------------------------------------------------------------------------------------
 * Barriers
 */

eddy_barrier_t *eddy_sequencer_new_barrier(eddy_sequencer_t *s, eddy_sequence_t *const *deps,
                                           size_t n)
{
    eddy_barrier_t *b = eddy__aligned_zalloc(sizeof *b);
    if (b == NULL)
        return NULL;
    if (n > 0) {
        b->deps = malloc(n * sizeof *b->deps);
        if (b->deps == NULL) {
            free(b);
            return NULL;
        }
        memcpy(b->deps, deps, n * sizeof *b->deps);
    }
    b->seqr = s;
    b->ws = s->ws;
    b->cursor = &s->cursor;
    b->ndeps = n;
    b->cached = EDDY_SEQUENCE_INITIAL;
    atomic_init(&b->alerted, false);
    return b;
}

void eddy_barrier_free(eddy_barrier_t *b)
{
    if (b == NULL)
        return;
    free(b->deps);
    free(b);
}

int64_t eddy_barrier_wait_for(eddy_barrier_t *b, int64_t seq)
{
    return eddy__barrier_wait_for(b, seq);
}

int64_t eddy_barrier_peek(eddy_barrier_t *b, int64_t seq)
{
    int64_t avail = eddy__barrier_dependent(b);
    if (avail < seq)
        return seq - 1;
    return eddy__sequencer_highest_published(b->seqr, seq, avail);
}

void eddy_barrier_alert(eddy_barrier_t *b)
{
    /* Pairs with the acquire load in eddy__barrier_alerted(). */
    atomic_store_explicit(&b->alerted, true, memory_order_release);
    eddy__sequencer_signal(b->seqr);
}

void eddy_barrier_clear_alert(eddy_barrier_t *b)
{
    atomic_store_explicit(&b->alerted, false, memory_order_release);
}

bool eddy_barrier_is_alerted(const eddy_barrier_t *b)
{
    return eddy__barrier_alerted(b);
}

int64_t eddy_barrier_cursor(const eddy_barrier_t *b)
{
    return eddy_sequence_get(b->cursor);
}

int64_t eddy_barrier_dependent(const eddy_barrier_t *b)
{
    return eddy__barrier_dependent(b);
}

int64_t eddy_barrier_probe(const eddy_barrier_t *b, int64_t seq)
{
    return eddy__barrier_probe(b, seq);
}
