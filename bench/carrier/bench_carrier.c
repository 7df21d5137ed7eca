/*
 * bench_carrier: eddy's carrier against a mutex-queue thread pool that keeps per-key order,
 * alternating in the same run (docs/style.md, "Benchmarks").
 *
 * Case:
 *   ordered_keys    producers hand N items over K keys to C consumer threads; the items of
 *                   one key must run in the order they were handed over. Each item checks that
 *                   it is the next of its key and adds its value to the key's sum.
 *
 * Subjects:
 *   eddy            eddy_carrier_new: 8 partitions, BY_KEY, ORDERED, BLOCK, C threads assigned
 *                   averagely; producers call eddy_carrier_offer(); consume() gets batches.
 *   mutex_pool      C threads and one mutex: a map (array indexed by key) of per-key FIFO
 *                   queues and a FIFO of ready keys with a condition variable. A producer
 *                   appends to its key's queue and, when the key was idle, appends the key to
 *                   the ready FIFO and signals. A worker takes a ready key and runs its queue
 *                   one item per lock round trip until empty (Guava's SerializingExecutor per
 *                   key), then marks the key idle. No allocation in steady state.
 *
 * A round times from the pool's creation to the end of its drain-and-join shutdown, after the
 * producers hand over N items; every round verifies that every item ran exactly once and in
 * order per key. The carrier's batch-size histogram over the measured rounds shows the
 * batching.
 *
 * Options: --rounds N (measured rounds, after one warm-up round), --ops N (items per round; k
 * and m suffixes), --producers N (1-4), --consumers N (1-16), --keys N, --gather-ns N (the
 * carrier's gather_ns; default the carrier's), --subject NAME.
 */
#include <eddy/carrier.h>
#include <eddy/common.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/bench_util.h"

#define MAX_ROUNDS 101
_Static_assert(MAX_ROUNDS <= BENCH_MAX_ROUNDS, "bench_stats sorts at most BENCH_MAX_ROUNDS");
#define DEFAULT_ROUNDS 5
#define DEFAULT_OPS 2000000
#define DEFAULT_KEYS 1024
#define MAX_PRODUCERS 4
#define MAX_CONSUMERS 16
#define HIST_N 10
#define TARGET_RATIO 3.0

enum { SUBJ_EDDY, SUBJ_MUTEX, SUBJ_N };
static const char *const subj_names[SUBJ_N] = {"eddy", "mutex_pool"};

static uint64_t n_ops = DEFAULT_OPS;
static unsigned n_keys = DEFAULT_KEYS;
static unsigned n_prod = 1;
static unsigned n_cons = 2;
static int64_t gather_ns = -1; /* -1: the carrier's default */

/* ---------------------------------------------------------------------------------------
 * Helpers
 */

static _Noreturn void die(const char *what, int err)
{
    fprintf(stderr, "bench_carrier: %s: %s\n", what, err != 0 ? eddy_strerror(err) : "failed");
    exit(1);
}

/* Like bench_parse_count, but only the lowercase k and m suffixes. */
static bool parse_count(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return false;
    if (*end == 'k')
        v *= 1000, end++;
    else if (*end == 'm')
        v *= 1000000, end++;
    if (*end != '\0' || v == 0)
        return false;
    *out = v;
    return true;
}

/* ---------------------------------------------------------------------------------------
 * The work and its check: item i has key i % K and is the (i / K)-th of its key.
 */

typedef struct key_state_s {
    uint64_t next; /* the next expected index within the key */
    uint64_t sum;
    uint64_t errors;
    char pad[40];
} key_state_t;

static key_state_t *keys;

static inline void work(uint64_t i)
{
    key_state_t *k = &keys[i % n_keys];
    if (k->next != i / n_keys)
        k->errors++;
    k->next = i / n_keys + 1;
    k->sum += i;
}

static void check_round(const char *who)
{
    uint64_t errors = 0, count = 0;
    for (unsigned k = 0; k < n_keys; k++) {
        errors += keys[k].errors;
        count += keys[k].next > 0 ? keys[k].next : 0;
    }
    /* Every key's next index equals its item count only if each ran once and in order. */
    uint64_t expect = 0;
    for (unsigned k = 0; k < n_keys; k++)
        expect += n_ops / n_keys + (k < n_ops % n_keys ? 1 : 0);
    if (errors != 0 || count != expect) {
        fprintf(stderr,
                "bench_carrier: %s: items lost, repeated or out of order (%llu of %llu, "
                "%llu out of order)\n",
                who, (unsigned long long)count, (unsigned long long)expect,
                (unsigned long long)errors);
        exit(1);
    }
}

typedef struct producer_s {
    pthread_t thread;
    unsigned index;
    int subject;
    void *pool;
} producer_t;

/* ---------------------------------------------------------------------------------------
 * eddy
 */

static int eddy_consume(eddy_carrier_t *c, unsigned thread, const eddy_carrier_item_t *items,
                        size_t n, void *arg)
{
    (void)c;
    (void)thread;
    (void)arg;
    for (size_t j = 0; j < n; j++)
        work((uint64_t)(uintptr_t)items[j].data);
    return 0;
}

static const eddy_carrier_ops_t eddy_ops = {.consume = eddy_consume};
static uint64_t eddy_hist[HIST_N];

static void eddy_produce(producer_t *p)
{
    eddy_carrier_t *c = p->pool;
    for (uint64_t i = p->index; i < n_ops; i += n_prod) {
        int err = eddy_carrier_offer(c, i % n_keys, (void *)(uintptr_t)i, 0);
        if (err != 0)
            die("eddy_carrier_offer", err);
    }
}

/* ---------------------------------------------------------------------------------------
 * mutex_pool
 */

typedef struct kq_s {
    uint64_t *items; /* a ring, cap a power of two */
    size_t head, tail, cap;
    bool active; /* in the ready FIFO or running */
} kq_t;

typedef struct mpool_s {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    kq_t *kq;        /* the map: key -> queue */
    unsigned *ready; /* FIFO of keys, capacity n_keys (each key at most once) */
    size_t rhead, rtail;
    bool stop;
    pthread_t threads[MAX_CONSUMERS];
} mpool_t;

static void kq_push(kq_t *q, uint64_t v)
{
    if (q->tail - q->head == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        uint64_t *n = malloc(sizeof(uint64_t) * cap);
        if (n == NULL)
            die("malloc", 0);
        for (size_t i = q->head; i < q->tail; i++)
            n[i - q->head] = q->items[i & (q->cap - 1)];
        free(q->items);
        q->items = n;
        q->tail -= q->head;
        q->head = 0;
        q->cap = cap;
    }
    q->items[q->tail++ & (q->cap - 1)] = v;
}

static void *mpool_worker(void *arg)
{
    mpool_t *mp = arg;
    pthread_mutex_lock(&mp->mu);
    for (;;) {
        while (mp->rhead == mp->rtail && !mp->stop)
            pthread_cond_wait(&mp->cv, &mp->mu);
        if (mp->rhead == mp->rtail)
            break; /* stop, and nothing ready: drained */
        unsigned key = mp->ready[mp->rhead++ % n_keys];
        kq_t *q = &mp->kq[key];
        while (q->head != q->tail) {
            uint64_t v = q->items[q->head++ & (q->cap - 1)];
            pthread_mutex_unlock(&mp->mu);
            work(v);
            pthread_mutex_lock(&mp->mu);
        }
        q->active = false;
    }
    pthread_mutex_unlock(&mp->mu);
    return NULL;
}

static mpool_t *mpool_new(void)
{
    mpool_t *mp = calloc(1, sizeof *mp);
    mp->kq = calloc(n_keys, sizeof(kq_t));
    mp->ready = calloc(n_keys, sizeof(unsigned));
    if (mp->kq == NULL || mp->ready == NULL)
        die("calloc", 0);
    pthread_mutex_init(&mp->mu, NULL);
    pthread_cond_init(&mp->cv, NULL);
    for (unsigned t = 0; t < n_cons; t++)
        if (pthread_create(&mp->threads[t], NULL, mpool_worker, mp) != 0)
            die("pthread_create", 0);
    return mp;
}

static void mpool_submit(mpool_t *mp, unsigned key, uint64_t v)
{
    pthread_mutex_lock(&mp->mu);
    kq_t *q = &mp->kq[key];
    kq_push(q, v);
    bool wake = false;
    if (!q->active) {
        q->active = true;
        mp->ready[mp->rtail++ % n_keys] = key;
        wake = true;
    }
    pthread_mutex_unlock(&mp->mu);
    if (wake)
        pthread_cond_signal(&mp->cv);
}

static void mpool_shutdown(mpool_t *mp)
{
    pthread_mutex_lock(&mp->mu);
    mp->stop = true;
    pthread_cond_broadcast(&mp->cv);
    pthread_mutex_unlock(&mp->mu);
    for (unsigned t = 0; t < n_cons; t++)
        pthread_join(mp->threads[t], NULL);
    for (unsigned k = 0; k < n_keys; k++)
        free(mp->kq[k].items);
    free(mp->kq);
    free(mp->ready);
    pthread_mutex_destroy(&mp->mu);
    pthread_cond_destroy(&mp->cv);
    free(mp);
}

static void mpool_produce(producer_t *p)
{
    for (uint64_t i = p->index; i < n_ops; i += n_prod)
        mpool_submit(p->pool, (unsigned)(i % n_keys), i);
}

/* ---------------------------------------------------------------------------------------
 * Rounds
 */

static void *producer_main(void *arg)
{
    producer_t *p = arg;
    if (p->subject == SUBJ_EDDY)
        eddy_produce(p);
    else
        mpool_produce(p);
    return NULL;
}

/* One round of subject: items per second. Producers split the keys (one producer per key). */
static double run_round(int subject, bool measured)
{
    memset(keys, 0, sizeof(key_state_t) * n_keys);
    double t0 = bench_now_s();
    void *pool;
    eddy_carrier_t *c = NULL;
    if (subject == SUBJ_EDDY) {
        eddy_carrier_options_t o;
        eddy_carrier_options_init(&o);
        o.partitions = 8;
        o.consumers = n_cons;
        o.partitioner = EDDY_CARRIER_BY_KEY;
        o.partition_size = 4096;
        if (gather_ns >= 0)
            o.gather_ns = gather_ns;
        int err = eddy_carrier_new(&c, &o, &eddy_ops, NULL);
        if (err != 0)
            die("eddy_carrier_new", err);
        pool = c;
    } else {
        pool = mpool_new();
    }
    producer_t prod[MAX_PRODUCERS];
    for (unsigned i = 0; i < n_prod; i++) {
        prod[i] = (producer_t){.index = i, .subject = subject, .pool = pool};
        if (pthread_create(&prod[i].thread, NULL, producer_main, &prod[i]) != 0)
            die("pthread_create", 0);
    }
    for (unsigned i = 0; i < n_prod; i++)
        pthread_join(prod[i].thread, NULL);
    if (subject == SUBJ_EDDY) {
        eddy_carrier_shutdown(c, EDDY_CARRIER_DRAIN);
    } else {
        mpool_shutdown(pool);
    }
    double t1 = bench_now_s();
    if (subject == SUBJ_EDDY) {
        if (measured) {
            uint64_t h[HIST_N];
            eddy_carrier_batch_histogram(c, h, HIST_N);
            for (int k = 0; k < HIST_N; k++)
                eddy_hist[k] += h[k];
        }
        eddy_carrier_free(c);
    }
    check_round(subj_names[subject]);
    return (double)n_ops / (t1 - t0);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_carrier [--case ordered_keys] [--rounds N] [--ops N] "
               "[--producers N] [--consumers N] [--keys N] [--gather-ns N] "
               "[--subject eddy|mutex_pool]\n");
}

int main(int argc, char **argv)
{
    uint64_t rounds = DEFAULT_ROUNDS;
    int only = -1;
    for (int i = 1; i < argc; i += 2) { /* each option and its value */
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x = 0;
        if (v == NULL) {
            usage(stderr);
            return 2;
        }
        if (strcmp(a, "--case") == 0 && strcmp(v, "ordered_keys") == 0) {
        } else if (strcmp(a, "--rounds") == 0 && parse_count(v, &x) && x <= MAX_ROUNDS) {
            rounds = x;
        } else if (strcmp(a, "--ops") == 0 && parse_count(v, &x)) {
            n_ops = x;
        } else if (strcmp(a, "--producers") == 0 && parse_count(v, &x) && x <= MAX_PRODUCERS) {
            n_prod = (unsigned)x;
        } else if (strcmp(a, "--consumers") == 0 && parse_count(v, &x) && x <= MAX_CONSUMERS) {
            n_cons = (unsigned)x;
        } else if (strcmp(a, "--keys") == 0 && parse_count(v, &x) && x <= 1000000) {
            n_keys = (unsigned)x;
        } else if (strcmp(a, "--gather-ns") == 0 && (x = strtoull(v, NULL, 10)) <= 1000000000 &&
                   v[0] >= '0' && v[0] <= '9') {
            gather_ns = (int64_t)x;
        } else if (strcmp(a, "--subject") == 0) {
            for (int k = 0; k < SUBJ_N; k++)
                if (strcmp(v, subj_names[k]) == 0)
                    only = k;
            if (only < 0) {
                usage(stderr);
                return 2;
            }
        } else {
            usage(stderr);
            return 2;
        }
    }
    keys = aligned_alloc(64, sizeof(key_state_t) * n_keys);
    if (keys == NULL)
        die("aligned_alloc", 0);

    printf("\nordered_keys: %llu items per round over %u keys, %u producer(s), %u consumer "
           "thread(s), 1 warm-up + %d rounds\n",
           (unsigned long long)n_ops, n_keys, n_prod, n_cons, (int)rounds);
    double samples[SUBJ_N][MAX_ROUNDS];
    for (int k = 0; k < SUBJ_N; k++)
        if (only < 0 || only == k)
            run_round(k, false);
    for (int r = 0; r < (int)rounds; r++)
        for (int k = 0; k < SUBJ_N; k++)
            if (only < 0 || only == k)
                samples[k][r] = run_round(k, true);

    bench_stats_t st[SUBJ_N];
    printf("  %-12s %14s %24s %10s %10s\n", "subject", "median items/s", "min - max", "ns/item",
           "eddy ratio");
    for (int k = 0; k < SUBJ_N; k++) {
        if (only >= 0 && only != k)
            continue;
        st[k] = bench_stats(samples[k], (int)rounds);
        char ratio[32] = "";
        if (k != SUBJ_EDDY && only < 0)
            snprintf(ratio, sizeof ratio, "%.2fx", st[SUBJ_EDDY].median / st[k].median);
        printf("  %-12s %12.2f M %10.2f M - %8.2f M %10.1f %10s\n", subj_names[k],
               st[k].median / 1e6, st[k].min / 1e6, st[k].max / 1e6, 1e9 / st[k].median, ratio);
    }
    printf("  every item ran exactly once, in order per key (checked every round)\n");
    if (only < 0 || only == SUBJ_EDDY) {
        uint64_t total = 0, items_lo = 0;
        for (int k = 0; k < HIST_N; k++) {
            total += eddy_hist[k];
            items_lo += eddy_hist[k] << k;
        }
        printf("  eddy batch sizes over the measured rounds (%llu batches, mean >= %.1f):\n",
               (unsigned long long)total, total ? (double)items_lo / (double)total : 0.0);
        for (int k = 0; k < HIST_N; k++) {
            if (eddy_hist[k] == 0)
                continue;
            if (k + 1 < HIST_N)
                printf("    %5u - %-5u %10llu  %5.1f%%\n", 1u << k, (2u << k) - 1,
                       (unsigned long long)eddy_hist[k], 100.0 * (double)eddy_hist[k] / total);
            else
                printf("    %5u+        %10llu  %5.1f%%\n", 1u << k,
                       (unsigned long long)eddy_hist[k], 100.0 * (double)eddy_hist[k] / total);
        }
    }
    if (only < 0) {
        double r = st[SUBJ_EDDY].median / st[SUBJ_MUTEX].median;
        printf("  target eddy >= %.0fx mutex_pool: %s (%.2fx)\n", TARGET_RATIO,
               r >= TARGET_RATIO ? "met" : "NOT met", r);
        printf("{\"bench\":\"carrier\",\"case\":\"ordered_keys\",\"subject\":\"eddy\","
               "\"baseline\":\"mutex_pool\",\"ops_per_s\":%.0f,\"ops_per_s_min\":%.0f,"
               "\"ops_per_s_max\":%.0f,\"baseline_ops_per_s\":%.0f,\"baseline_ops_per_s_min\":%.0f,"
               "\"baseline_ops_per_s_max\":%.0f,\"ratio\":%.3f,\"rounds\":%d,\"ops\":%llu,"
               "\"producers\":%u,\"consumers\":%u,\"keys\":%u,\"target_ratio\":%.0f,"
               "\"target_met\":%s,\"batch_hist_log2\":[",
               st[SUBJ_EDDY].median, st[SUBJ_EDDY].min, st[SUBJ_EDDY].max, st[SUBJ_MUTEX].median,
               st[SUBJ_MUTEX].min, st[SUBJ_MUTEX].max, r, (int)rounds, (unsigned long long)n_ops,
               n_prod, n_cons, n_keys, TARGET_RATIO, r >= TARGET_RATIO ? "true" : "false");
        for (int k = 0; k < HIST_N; k++)
            printf("%s%llu", k ? "," : "", (unsigned long long)eddy_hist[k]);
        printf("]}\n");
    }
    free(keys);
    return 0;
}
