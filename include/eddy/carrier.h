/*
 * eddy carrier: offload groups for slow or blocking work, after SkyWalking's DataCarrier
 * (Channels, Buffer, IDataPartitioner, ConsumeDriver) and RocketMQ's ordered consumption
 * (Apache SkyWalking, https://github.com/apache/skywalking; Apache RocketMQ,
 * https://rocketmq.apache.org; docs/carrier.md).
 *
 *   partitions   P multi-producer rings of items (eddy/ring.h); a partitioner picks one per
 *                item: rolling (round-robin), by producing thread, or by a caller's u64 key
 *                (the same key always lands in the same partition: MessageQueueSelector).
 *   consumers    M threads (at most EDDY_CARRIER_MAX_THREADS); partitions are assigned to
 *                them averagely (contiguous blocks) or by circle (round-robin), as RocketMQ's
 *                AllocateMessageQueueAveragely / ...ByCircle. Each thread hands its partitions'
 *                items to ops->consume in batches.
 *   modes        EDDY_CARRIER_ORDERED: a partition is consumed by one thread at a time, batch
 *                after batch in sequence order, so items of one key are consumed in the order
 *                they were offered (threads beyond P stay idle). EDDY_CARRIER_UNORDERED: when
 *                P < M a partition is split over several threads, as DataCarrier does, and
 *                per-key order is lost.
 *   rebalance    eddy_carrier_set_consumers() changes M at run time; a partition moves to its
 *                new thread only after the old one has finished the batch it holds (a
 *                per-partition lock taken for each batch, RocketMQ's rebalance lock).
 *   executor     eddy_carrier_execute(c, key, fn, arg) runs fn on a consumer thread in key
 *                order and returns a future.
 *
 *     eddy_carrier_options_t o;
 *     eddy_carrier_options_init(&o);
 *     o.partitions = 8; o.consumers = 2; o.partitioner = EDDY_CARRIER_BY_KEY;
 *     eddy_carrier_t *c = eddy_carrier_new(&o, &my_ops, my_arg);
 *     eddy_carrier_offer(c, key, data, bytes);        // from any thread
 *     eddy_carrier_shutdown(c, EDDY_CARRIER_DRAIN);
 *     eddy_carrier_free(c);
 */
#ifndef EDDY_CARRIER_H
#define EDDY_CARRIER_H

#include <eddy/common.h>
#include <eddy/loop.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eddy_carrier_s eddy_carrier_t;

/* The most consumer threads a carrier runs at once. */
#define EDDY_CARRIER_MAX_THREADS 64

/* Which partition an item goes to (DataCarrier's IDataPartitioner). */
typedef enum {
    EDDY_CARRIER_ROLLING = 0, /* round-robin over the partitions; retries other partitions */
    EDDY_CARRIER_BY_THREAD,   /* one partition per producing thread; keeps each producer's order */
    EDDY_CARRIER_BY_KEY       /* key modulo P: one key, one partition, its order kept */
} eddy_carrier_partitioner_t;

/* What a producer does when its partition is full (DataCarrier's BufferStrategy). */
typedef enum {
    EDDY_CARRIER_BLOCK = 0,  /* wait (spinning, then yielding) until there is room; never
                                from a consumer thread of the same carrier: a consumer
                                waiting on its own full partition waits forever */
    EDDY_CARRIER_IF_POSSIBLE /* try other partitions where order allows, then EDDY_EAGAIN */
} eddy_carrier_full_t;

/* How partitions are spread over consumer threads (RocketMQ's allocation strategies). */
typedef enum {
    EDDY_CARRIER_AVERAGELY = 0, /* contiguous blocks: thread t gets [t*P/M, (t+1)*P/M) */
    EDDY_CARRIER_CIRCLE         /* round-robin: partition p goes to thread p % M */
} eddy_carrier_assign_t;

typedef enum {
    EDDY_CARRIER_ORDERED = 0, /* one thread per partition at a time: per-key order kept */
    EDDY_CARRIER_UNORDERED    /* a partition may be split over threads when P < M */
} eddy_carrier_mode_t;

/* What eddy_carrier_shutdown() does with items not consumed yet. */
typedef enum {
    EDDY_CARRIER_DRAIN = 0, /* consume them all, then stop */
    EDDY_CARRIER_DISCARD    /* hand them to on_error with EDDY_ECANCELED (futures fail) */
} eddy_carrier_stop_t;

/* Options; eddy_carrier_options_init() fills the defaults given below. */
typedef struct eddy_carrier_options_s {
    unsigned partitions;                    /* P, >= 1 (default 8) */
    unsigned consumers;                     /* M, 1..EDDY_CARRIER_MAX_THREADS (default 1) */
    size_t partition_size;                  /* slots per partition, a power of two (1024): the
                                               count threshold of a partition */
    size_t partition_bytes;                 /* bytes in flight per partition, 0 = no limit */
    size_t max_batch;                       /* most items per consume call (default 256) */
    unsigned retries;                       /* ROLLING: other partitions tried (default P-1) */
    eddy_carrier_partitioner_t partitioner; /* default ROLLING */
    eddy_carrier_full_t full;               /* default BLOCK */
    eddy_carrier_assign_t assign;           /* default AVERAGELY */
    eddy_carrier_mode_t mode;               /* default ORDERED */
    int64_t gather_ns;                      /* after a batch of fewer than 8 items, a consumer
                                               waits this long before it looks again, so
                                               items gather into larger batches and it does
                                               not pull the line a producer is writing
                                               (default 5000; 0 = look at once). Costs that
                                               much latency to an item that arrives right
                                               behind another, none to the first. */
} eddy_carrier_options_t;

/* The result of eddy_carrier_execute()'s fn: 0 and *result, or a negative EDDY_E*. */
typedef int (*eddy_carrier_fn)(void *arg, void **result);

/*
 * One item as consumers see it: borrowed for the duration of the callback. key and data are
 * the ones given to the producer; bytes is what it declared. 32 bytes, so that a 64-byte line
 * carries two items from producer to consumer. _task is the carrier's.
 */
typedef struct eddy_carrier_item_s {
    uint64_t key;
    void *data;
    size_t bytes;
    void *_task; /* non-NULL: an eddy_carrier_execute() task, never shown to consume */
} eddy_carrier_item_t;

/*
 * Consumer callbacks (DataCarrier's IConsumer). Every slot but consume may be NULL. All run
 * on consumer threads; thread is the consumer's index (0..M-1 when it started).
 */
typedef struct eddy_carrier_ops_s {
    /** Once on each consumer thread before it consumes anything. */
    void (*init)(eddy_carrier_t *c, unsigned thread, void *arg);
    /**
     * A batch of n >= 1 items from one partition, in offer order for that partition. Return 0,
     * or a negative EDDY_E* to hand this very batch to on_error.
     */
    int (*consume)(eddy_carrier_t *c, unsigned thread, const eddy_carrier_item_t *items, size_t n,
                   void *arg);
    /**
     * consume failed with err for these items, or (err EDDY_ECANCELED) a discarding shutdown
     * dropped them. The items' owners learn of the failure here; data is still the caller's.
     */
    void (*on_error)(eddy_carrier_t *c, unsigned thread, const eddy_carrier_item_t *items, size_t n,
                     int err, void *arg);
    /** Once on each consumer thread as it ends (shutdown, or removed by a rebalance). */
    void (*on_exit)(eddy_carrier_t *c, unsigned thread, void *arg);
} eddy_carrier_ops_t;

/** Fill o with the defaults above. */
EDDY_EXTERN void eddy_carrier_options_init(eddy_carrier_options_t *o);

/**
 * A carrier with o's partitions and consumer threads (started at once), calling ops (borrowed;
 * must outlive the carrier) with arg. ops may be NULL for a carrier that only runs
 * eddy_carrier_execute() tasks. Returns 0 and *out, or EDDY_EINVAL (bad options: P = 0, M out
 * of range, size not a power of two), EDDY_ENOMEM, or a pthread_create error. Any thread.
 */
EDDY_EXTERN int eddy_carrier_new(eddy_carrier_t **out, const eddy_carrier_options_t *o,
                                 const eddy_carrier_ops_t *ops, void *arg);

/**
 * Offer an item (data borrowed by the carrier until consume or on_error has seen it) to the
 * partition the partitioner picks for key. 0 when queued; EDDY_EAGAIN when the partition (and
 * the others tried) is full under IF_POSSIBLE; EDDY_ENOBUFS when the partition's bytes
 * threshold would be passed under IF_POSSIBLE, or bytes alone exceeds it; EDDY_ECLOSED after
 * shutdown began. A failed offer queued nothing. Any thread.
 */
EDDY_EXTERN int eddy_carrier_offer(eddy_carrier_t *c, uint64_t key, void *data, size_t bytes);

/**
 * Run fn(arg, &result) on a consumer thread, after everything offered earlier with the same
 * key (BY_KEY carriers; otherwise the partitioner's order). Returns a future (the caller owns
 * one reference: eddy_future_release) completing with fn's result or failing with its error,
 * or with EDDY_ECANCELED when a discarding shutdown drops it. When the task cannot be queued
 * the future is already failed (EDDY_EAGAIN, EDDY_ECLOSED as eddy_carrier_offer). NULL only
 * when out of memory. Any thread.
 */
EDDY_EXTERN eddy_future_t *eddy_carrier_execute(eddy_carrier_t *c, uint64_t key, eddy_carrier_fn fn,
                                                void *arg);

/**
 * Change the number of consumer threads to m (1..EDDY_CARRIER_MAX_THREADS) and reassign the
 * partitions. New threads get init; removed threads finish their batch, get on_exit and are
 * joined before this returns. No item is lost or, in ORDERED mode, reordered: a partition is
 * taken by its new thread only after the old one released it at a batch boundary. 0,
 * EDDY_EINVAL, EDDY_ECLOSED after shutdown, or a pthread_create error (then M is unchanged
 * beyond the threads that started). Any thread but a consumer thread.
 */
EDDY_EXTERN int eddy_carrier_set_consumers(eddy_carrier_t *c, unsigned m);

/**
 * Stop: refuse new offers (EDDY_ECLOSED), wait for offers in progress, then drain or discard
 * what is queued, call on_exit on every consumer thread and join them. 0, or EDDY_EALREADY on
 * a second call. Producers blocked on a full partition return EDDY_ECLOSED. Any thread but a
 * consumer thread.
 */
EDDY_EXTERN int eddy_carrier_shutdown(eddy_carrier_t *c, eddy_carrier_stop_t how);

/** Free the carrier; shuts it down with DRAIN first if needed. NULL is ignored. */
EDDY_EXTERN void eddy_carrier_free(eddy_carrier_t *c);

/** The number of partitions. Any thread. */
EDDY_EXTERN unsigned eddy_carrier_partitions(const eddy_carrier_t *c);

/** The current number of consumer threads. Any thread. */
EDDY_EXTERN unsigned eddy_carrier_consumers(const eddy_carrier_t *c);

/** Items queued in partition p (offered, not yet consumed): a snapshot. Any thread. */
EDDY_EXTERN size_t eddy_carrier_pending(eddy_carrier_t *c, unsigned p);

/**
 * Batch-size histogram: hist[k] counts consume batches of size in [2^k, 2^(k+1)) for k < n
 * (the last bucket takes everything larger). Totals since creation, over all threads.
 */
EDDY_EXTERN void eddy_carrier_batch_histogram(const eddy_carrier_t *c, uint64_t *hist, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_CARRIER_H */
