/*
 * The disruptor: a ring, its sequencer, and processors wired into a dependency graph
 * (Disruptor, EventHandlerGroup). Groups are kept in the order they were added, which is a
 * topological order of the graph (a group can only follow groups that exist), so start and
 * shutdown walk that list.
 */
#include "reactor/internal.h"

#include <stdlib.h>

typedef struct {
    eddy_batch_processor_t *bp; /* one of the two */
    eddy_worker_pool_t *pool;
} consumer_t;

struct eddy_group_s {
    eddy_disruptor_t *d;
    eddy_group_t *next;    /* the disruptor's list, in the order added */
    size_t nconsumers;
    consumer_t *consumers;
    size_t nseqs;          /* what a group after this one depends on */
    eddy_sequence_t **seqs;
};

struct eddy_disruptor_s {
    eddy_ring_t *ring;
    eddy_sequencer_t *seqr;
    eddy_group_t *first;
    eddy_group_t *last;
    bool started;
};

eddy_disruptor_t *eddy_disruptor_new(size_t size, size_t slot_size, eddy_ring_init_cb init_cb,
                                     void *arg, bool multi_producer, eddy_wait_strategy_t *ws)
{
    if (ws == NULL)
        return NULL;
    eddy_disruptor_t *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->seqr = multi_producer ? eddy_sequencer_new_multi(size, ws)
                             : eddy_sequencer_new_single(size, ws);
    d->ring = d->seqr ? eddy_ring_new(size, slot_size, init_cb, arg) : NULL;
    if (d->ring == NULL) {
        eddy_sequencer_free(d->seqr);
        free(d);
        return NULL;
    }
    eddy_sequencer_set_ring(d->seqr, d->ring);
    return d;
}

static void group_free(eddy_group_t *g)
{
    for (size_t i = 0; i < g->nconsumers; i++) {
        eddy_batch_processor_free(g->consumers[i].bp);
        eddy_worker_pool_free(g->consumers[i].pool);
    }
    free(g->consumers);
    free(g->seqs);
    free(g);
}

int eddy_disruptor_free(eddy_disruptor_t *d)
{
    if (d == NULL)
        return 0;
    if (d->started)
        return EDDY_EBUSY;
    for (eddy_group_t *g = d->first; g != NULL;) {
        eddy_group_t *next = g->next;
        group_free(g);
        g = next;
    }
    eddy_sequencer_free(d->seqr);
    eddy_ring_free(d->ring);
    free(d);
    return 0;
}

/*
 * A group of n batch processors (pool false) or one pool of n workers, after deps. The ring
 * gates on the new group's sequences and stops gating on deps (Java's
 * updateGatingSequencesForNextInChain), so it is always gated on the last consumers.
 */
static eddy_group_t *group_new(eddy_disruptor_t *d, eddy_sequence_t *const *deps, size_t ndeps,
                               const eddy_event_handler_t *hs, size_t n, bool pool)
{
    if (d->started || hs == NULL || n == 0)
        return NULL;
    eddy_group_t *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    g->d = d;
    g->nconsumers = pool ? 1 : n;
    g->consumers = calloc(g->nconsumers, sizeof *g->consumers);
    g->nseqs = pool ? n + 1 : n;
    g->seqs = calloc(g->nseqs, sizeof *g->seqs);
    if (g->consumers == NULL || g->seqs == NULL)
        goto fail;
    if (pool) {
        g->consumers[0].pool = eddy_worker_pool_new(d->ring, d->seqr, deps, ndeps, hs, n);
        if (g->consumers[0].pool == NULL)
            goto fail;
        eddy_worker_pool_sequences(g->consumers[0].pool, g->seqs, g->nseqs);
    } else {
        for (size_t i = 0; i < n; i++) {
            g->consumers[i].bp = eddy_batch_processor_new(d->ring, d->seqr, deps, ndeps, &hs[i]);
            if (g->consumers[i].bp == NULL)
                goto fail;
            g->seqs[i] = eddy_batch_processor_sequence(g->consumers[i].bp);
        }
    }
    if (eddy_sequencer_add_gating(d->seqr, g->seqs, g->nseqs) != 0)
        goto fail;
    for (size_t i = 0; i < ndeps; i++)
        eddy_sequencer_remove_gating(d->seqr, deps[i]); /* EDDY_ENOENT when already removed */
    if (d->last != NULL)
        d->last->next = g;
    else
        d->first = g;
    d->last = g;
    return g;
fail:
    group_free(g);
    return NULL;
}

eddy_group_t *eddy_disruptor_handle_events_with(eddy_disruptor_t *d,
                                                const eddy_event_handler_t *hs, size_t n)
{
    return group_new(d, NULL, 0, hs, n, false);
}

eddy_group_t *eddy_disruptor_handle_events_with_pool(eddy_disruptor_t *d,
                                                     const eddy_event_handler_t *hs, size_t n)
{
    return group_new(d, NULL, 0, hs, n, true);
}

eddy_group_t *eddy_group_then(eddy_group_t *g, const eddy_event_handler_t *hs, size_t n)
{
    return group_new(g->d, g->seqs, g->nseqs, hs, n, false);
}

eddy_group_t *eddy_group_then_pool(eddy_group_t *g, const eddy_event_handler_t *hs, size_t n)
{
    return group_new(g->d, g->seqs, g->nseqs, hs, n, true);
}

/* Halt and join the first n consumers of g. */
static void group_halt_join(eddy_group_t *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (g->consumers[i].bp != NULL)
            eddy_batch_processor_halt(g->consumers[i].bp);
        else
            eddy_worker_pool_halt(g->consumers[i].pool);
    }
    for (size_t i = 0; i < n; i++) {
        if (g->consumers[i].bp != NULL)
            eddy_batch_processor_join(g->consumers[i].bp);
        else
            eddy_worker_pool_join(g->consumers[i].pool);
    }
}

int eddy_disruptor_start(eddy_disruptor_t *d)
{
    if (d->started)
        return EDDY_EBUSY;
    for (eddy_group_t *g = d->first; g != NULL; g = g->next) {
        for (size_t i = 0; i < g->nconsumers; i++) {
            int err = g->consumers[i].bp != NULL
                          ? eddy_batch_processor_start(g->consumers[i].bp)
                          : eddy_worker_pool_start(g->consumers[i].pool);
            if (err != 0) {
                /* Stop what runs, upstream first, and only that: a batch processor halted
                 * before it ever ran would stop at once when a later start runs it. */
                for (eddy_group_t *h = d->first;; h = h->next) {
                    group_halt_join(h, h == g ? i : h->nconsumers);
                    if (h == g)
                        break;
                }
                return err;
            }
        }
    }
    d->started = true;
    return 0;
}

int eddy_disruptor_shutdown(eddy_disruptor_t *d)
{
    if (!d->started)
        return EDDY_EINVAL;
    /* Upstream first: a group halts after everything before it has stopped, so its last look
     * at its dependencies sees their final sequences. */
    for (eddy_group_t *g = d->first; g != NULL; g = g->next)
        group_halt_join(g, g->nconsumers);
    d->started = false;
    return 0;
}

eddy_ring_t *eddy_disruptor_ring(eddy_disruptor_t *d)
{
    return d->ring;
}

eddy_sequencer_t *eddy_disruptor_sequencer(eddy_disruptor_t *d)
{
    return d->seqr;
}
