/*
 * Tests for reactor/carrier.c: per-key order and exactly-once delivery for every partitioner,
 * assignment and mode; full partitions and the bytes threshold reported to the producer; the
 * error path; shutdown with drain and with discard; the executor; rebalancing under load; an
 * idle carrier using no CPU.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/carrier.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000}, NULL);
}

/* ---------------------------------------------------------------------------------------
 * A checking consumer: item i (data = i + 1) has key i % nkeys and is the (i / nkeys)-th of
 * its key.
 */

typedef struct check_s {
    uint64_t n;
    uint64_t nkeys;
    bool order;             /* check per-key order */
    uint64_t *next;         /* per key: the next expected index within the key */
    _Atomic uint32_t *seen; /* per item: times consumed */
    _Atomic uint64_t total;
    _Atomic uint64_t order_errors;
    _Atomic uint64_t key_errors;
    _Atomic unsigned inits;
    _Atomic unsigned exits;
    _Atomic uint64_t threads_used; /* bit per consumer thread index */
} check_t;

static check_t *check_new(uint64_t n, uint64_t nkeys, bool order)
{
    check_t *k = calloc(1, sizeof *k);
    k->n = n;
    k->nkeys = nkeys;
    k->order = order;
    k->next = calloc(nkeys, sizeof(uint64_t));
    k->seen = calloc(n, sizeof(k->seen[0]));
    return k;
}

static void check_free(check_t *k)
{
    free(k->next);
    free((void *)(uintptr_t)k->seen);
    free(k);
}

static void check_init(eddy_carrier_t *c, unsigned thread, void *arg)
{
    (void)c;
    (void)thread;
    check_t *k = arg;
    atomic_fetch_add(&k->inits, 1);
}

static void check_exit(eddy_carrier_t *c, unsigned thread, void *arg)
{
    (void)c;
    (void)thread;
    check_t *k = arg;
    atomic_fetch_add(&k->exits, 1);
}

static int check_consume(eddy_carrier_t *c, unsigned thread, const eddy_carrier_item_t *items,
                         size_t n, void *arg)
{
    (void)c;
    check_t *k = arg;
    atomic_fetch_or(&k->threads_used, 1ull << thread);
    for (size_t j = 0; j < n; j++) {
        uint64_t i = (uint64_t)(uintptr_t)items[j].data - 1;
        atomic_fetch_add_explicit(&k->seen[i], 1, memory_order_relaxed);
        uint64_t key = i % k->nkeys;
        if (items[j].key != key)
            atomic_fetch_add(&k->key_errors, 1);
        if (k->order) {
            if (k->next[key] != i / k->nkeys)
                atomic_fetch_add(&k->order_errors, 1);
            k->next[key] = i / k->nkeys + 1;
        }
    }
    atomic_fetch_add(&k->total, n);
    return 0;
}

static const eddy_carrier_ops_t check_ops = {
    .init = check_init,
    .consume = check_consume,
    .on_exit = check_exit,
};

static void check_exactly_once(check_t *k)
{
    assert_int_equal(atomic_load(&k->total), k->n);
    for (uint64_t i = 0; i < k->n; i++)
        if (atomic_load(&k->seen[i]) != 1)
            fail_msg("item %llu seen %u times", (unsigned long long)i,
                     (unsigned)atomic_load(&k->seen[i]));
    assert_int_equal(atomic_load(&k->order_errors), 0);
    assert_int_equal(atomic_load(&k->key_errors), 0);
}

/* Offer items [0, n) whose key % nprod == which, in index order. */
typedef struct producer_s {
    eddy_carrier_t *c;
    check_t *k;
    unsigned which;
    unsigned nprod;
    _Atomic uint64_t refused;
} producer_t;

static void *produce(void *arg)
{
    producer_t *p = arg;
    for (uint64_t i = 0; i < p->k->n; i++) {
        uint64_t key = i % p->k->nkeys;
        if (key % p->nprod != p->which)
            continue;
        int err;
        while ((err = eddy_carrier_offer(p->c, key, (void *)(uintptr_t)(i + 1), 8)) == EDDY_EAGAIN)
            sched_yield();
        if (err != 0)
            atomic_fetch_add(&p->refused, 1);
    }
    return NULL;
}

static void run_case(const eddy_carrier_options_t *o, uint64_t n, uint64_t nkeys, bool order,
                     unsigned nprod)
{
    check_t *k = check_new(n, nkeys, order);
    eddy_carrier_t *c;
    assert_int_equal(eddy_carrier_new(&c, o, &check_ops, k), 0);
    producer_t ps[4];
    pthread_t th[4];
    for (unsigned p = 0; p < nprod; p++) {
        ps[p] = (producer_t){.c = c, .k = k, .which = p, .nprod = nprod};
        pthread_create(&th[p], NULL, produce, &ps[p]);
    }
    for (unsigned p = 0; p < nprod; p++) {
        pthread_join(th[p], NULL);
        assert_int_equal(atomic_load(&ps[p].refused), 0);
    }
    assert_int_equal(eddy_carrier_shutdown(c, EDDY_CARRIER_DRAIN), 0);
    assert_int_equal(eddy_carrier_shutdown(c, EDDY_CARRIER_DRAIN), EDDY_EALREADY);
    check_exactly_once(k);
    assert_int_equal(atomic_load(&k->inits), o->consumers);
    assert_int_equal(atomic_load(&k->exits), o->consumers);
    eddy_carrier_free(c);
    check_free(k);
}

/* ---------------------------------------------------------------------------------------
 * Tests
 */

static void test_carrier_options(void **state)
{
    (void)state;
    check_t *k = check_new(1, 1, false);
    eddy_carrier_options_t o;
    eddy_carrier_options_init(&o);
    eddy_carrier_t *c;
    o.partitions = 0;
    assert_int_equal(eddy_carrier_new(&c, &o, &check_ops, k), EDDY_EINVAL);
    eddy_carrier_options_init(&o);
    o.partition_size = 100;
    assert_int_equal(eddy_carrier_new(&c, &o, &check_ops, k), EDDY_EINVAL);
    eddy_carrier_options_init(&o);
    o.consumers = EDDY_CARRIER_MAX_THREADS + 1;
    assert_int_equal(eddy_carrier_new(&c, &o, &check_ops, k), EDDY_EINVAL);
    eddy_carrier_options_init(&o);
    o.partitions = 3;
    o.consumers = 2;
    assert_int_equal(eddy_carrier_new(&c, &o, &check_ops, k), 0);
    assert_int_equal(eddy_carrier_partitions(c), 3);
    assert_int_equal(eddy_carrier_consumers(c), 2);
    assert_int_equal(eddy_carrier_set_consumers(c, 0), EDDY_EINVAL);
    eddy_carrier_free(c);
    /* An executor-only carrier refuses plain items. */
    eddy_carrier_options_init(&o);
    assert_int_equal(eddy_carrier_new(&c, &o, NULL, NULL), 0);
    assert_int_equal(eddy_carrier_offer(c, 1, NULL, 0), EDDY_EINVAL);
    eddy_carrier_free(c);
    check_free(k);
}

/* Per-key order and exactly once, 8 partitions, 1 to 4 threads, both assignments. */
static void test_carrier_order_by_key(void **state)
{
    (void)state;
    for (unsigned m = 1; m <= 4; m++) {
        for (int a = 0; a < 2; a++) {
            eddy_carrier_options_t o;
            eddy_carrier_options_init(&o);
            o.partitions = 8;
            o.consumers = m;
            o.partitioner = EDDY_CARRIER_BY_KEY;
            o.assign = a ? EDDY_CARRIER_CIRCLE : EDDY_CARRIER_AVERAGELY;
            o.partition_size = 256;
            run_case(&o, 100000, 61, true, 2);
        }
    }
}

/* Every partitioner x full strategy x assignment x mode delivers each item exactly once. */
static void test_carrier_every_strategy(void **state)
{
    (void)state;
    for (int part = 0; part < 3; part++)
        for (int full = 0; full < 2; full++)
            for (int a = 0; a < 2; a++)
                for (int mode = 0; mode < 2; mode++) {
                    eddy_carrier_options_t o;
                    eddy_carrier_options_init(&o);
                    o.partitions = 3;
                    o.consumers = 5; /* P < M: split in unordered mode, idle threads otherwise */
                    o.partitioner = (eddy_carrier_partitioner_t)part;
                    o.full = (eddy_carrier_full_t)full;
                    o.assign = (eddy_carrier_assign_t)a;
                    o.mode = (eddy_carrier_mode_t)mode;
                    o.partition_size = 64;
                    o.max_batch = 16;
                    /* Order holds for keys in ordered mode; by thread, one producer's order. */
                    bool order = mode == EDDY_CARRIER_ORDERED && part != EDDY_CARRIER_ROLLING;
                    run_case(&o, 20000, 7, order, part == EDDY_CARRIER_BY_THREAD ? 1 : 2);
                }
}

/* Ordered mode with P < M: only P threads ever consume. */
static void test_carrier_ordered_idle_threads(void **state)
{
    (void)state;
    eddy_carrier_options_t o;
    eddy_carrier_options_init(&o);
    o.partitions = 2;
    o.consumers = 4;
    o.partitioner = EDDY_CARRIER_BY_KEY;
    check_t *k = check_new(10000, 16, true);
    eddy_carrier_t *c;
    assert_int_equal(eddy_carrier_new(&c, &o, &check_ops, k), 0);
    producer_t p = {.c = c, .k = k, .which = 0, .nprod = 1};
    produce(&p);
    assert_int_equal(eddy_carrier_shutdown(c, EDDY_CARRIER_DRAIN), 0);
    check_exactly_once(k);
    assert_int_equal(atomic_load(&k->threads_used) & ~3ull, 0);
    eddy_carrier_free(c);
    check_free(k);
}

/* A consumer that waits on a gate, to fill partitions. */
typedef struct gate_s {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    _Atomic uint64_t consumed;
    _Atomic uint64_t errors;
    _Atomic uint64_t error_code;
    _Atomic unsigned exits;
    _Atomic int entered;
} gate_t;

static void gate_init(gate_t *g)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
}

static void gate_open(gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_destroy(gate_t *g)
{
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

static int gate_consume(eddy_carrier_t *c, unsigned thread, const eddy_carrier_item_t *items,
                        size_t n, void *arg)
{
    (void)c;
    (void)thread;
    (void)items;
    gate_t *g = arg;
    atomic_store(&g->entered, 1);
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    atomic_fetch_add(&g->consumed, n);
    return 0;
}

static void gate_error(eddy_carrier_t *c, unsigned thread, const eddy_carrier_item_t *items,
                       size_t n, int err, void *arg)
{
    (void)c;
    (void)thread;
    (void)items;
    gate_t *g = arg;
    atomic_fetch_add(&g->errors, n);
    atomic_store(&g->error_code, (uint64_t)(int64_t)err);
}

static void gate_exit(eddy_carrier_t *c, unsigned thread, void *arg)
{
    (void)c;
    (void)thread;
    gate_t *g = arg;
    atomic_fetch_add(&g->exits, 1);
}

static const eddy_carrier_ops_t gate_ops = {
    .consume = gate_consume,
    .on_error = gate_error,
    .on_exit = gate_exit,
};

static void wait_entered(gate_t *g)
{
    while (!atomic_load(&g->entered))
        sleep_ms(1);
}

/* IF_POSSIBLE: a full key partition fails at once; rolling tries the others first. */
static void test_carrier_full_if_possible(void **state)
{
    (void)state;
    for (int part = 0; part < 2; part++) {
        gate_t g;
        gate_init(&g);
        eddy_carrier_options_t o;
        eddy_carrier_options_init(&o);
        o.partitions = 4;
        o.partition_size = 4;
        o.full = EDDY_CARRIER_IF_POSSIBLE;
        o.partitioner = part ? EDDY_CARRIER_ROLLING : EDDY_CARRIER_BY_KEY;
        eddy_carrier_t *c;
        assert_int_equal(eddy_carrier_new(&c, &o, &gate_ops, &g), 0);
        /* The consumer holds the first item; then 4 more fill its partition. */
        assert_int_equal(eddy_carrier_offer(c, 0, NULL, 0), 0);
        wait_entered(&g);
        uint64_t accepted = 1;
        int err;
        while ((err = eddy_carrier_offer(c, 0, NULL, 0)) == 0)
            accepted++;
        assert_int_equal(err, EDDY_EAGAIN);
        /* The held item keeps its slot: by key one partition fills, rolling all of them. */
        assert_int_equal(accepted, part ? 4 * 4 : 4);
        if (!part) {
            assert_int_equal(eddy_carrier_offer(c, 1, NULL, 0), 0); /* another key's partition */
            accepted++;
        }
        gate_open(&g);
        assert_int_equal(eddy_carrier_shutdown(c, EDDY_CARRIER_DRAIN), 0);
        assert_int_equal(atomic_load(&g.consumed), accepted);
        assert_int_equal(eddy_carrier_offer(c, 0, NULL, 0), EDDY_ECLOSED);
        eddy_carrier_free(c);
        gate_destroy(&g);
    }
}

/* The bytes threshold: EDDY_ENOBUFS under IF_POSSIBLE, and for an item too big to ever fit. */
static void test_carrier_bytes_threshold(void **state)
{
    (void)state;
    gate_t g;
    gate_init(&g);
    eddy_carrier_options_t o;
    eddy_carrier_options_init(&o);
    o.partitions = 1;
    o.partition_bytes = 100;
    o.full = EDDY_CARRIER_IF_POSSIBLE;
    eddy_carrier_t *c;
    assert_int_equal(eddy_carrier_new(&c, &o, &gate_ops, &g), 0);
    assert_int_equal(eddy_carrier_offer(c, 0, NULL, 101), EDDY_ENOBUFS);
    assert_int_equal(eddy_carrier_offer(c, 0, NULL, 60), 0);
    wait_entered(&g);
    assert_int_equal(eddy_carrier_offer(c, 0, NULL, 40), 0);
    assert_int_equal(eddy_carrier_offer(c, 0, NULL, 1), EDDY_ENOBUFS);
    assert_int_equal(eddy_carrier_offer(c, 0, NULL, 0), 0); /* no bytes: counted only */
    gate_open(&g);
    /* Once consumed, the bytes are free again. */
    while (atomic_load(&g.consumed) < 3)
        sleep_ms(1);
    int err;
    while ((err = eddy_carrier_offer(c, 0, NULL, 100)) == EDDY_ENOBUFS)
        sleep_ms(1); /* the last batch's bytes are returned just after consume */
    assert_int_equal(err, 0);
    eddy_carrier_free(c);
    assert_int_equal(atomic_load(&g.consumed), 4);
    gate_destroy(&g);
}

/* A failing consume hands exactly that batch to on_error. */
typedef struct fail_s {
    _Atomic uint64_t ok;
    const eddy_carrier_item_t *failed_items[64];
    size_t failed_n[64];
    int nfailed;
    const eddy_carrier_item_t *err_items[64];
    size_t err_n[64];
    int err_code[64];
    int nerr;
} fail_t;

static int fail_consume(eddy_carrier_t *c, unsigned thread, const eddy_carrier_item_t *items,
                        size_t n, void *arg)
{
    (void)c;
    (void)thread;
    fail_t *f = arg;
    for (size_t i = 0; i < n; i++) {
        if ((uintptr_t)items[i].data % 10 == 3) {
            f->failed_items[f->nfailed] = items;
            f->failed_n[f->nfailed++] = n;
            return EDDY_EIO;
        }
    }
    atomic_fetch_add(&f->ok, n);
    return 0;
}

static void fail_error(eddy_carrier_t *c, unsigned thread, const eddy_carrier_item_t *items,
                       size_t n, int err, void *arg)
{
    (void)c;
    (void)thread;
    fail_t *f = arg;
    f->err_items[f->nerr] = items;
    f->err_n[f->nerr] = n;
    f->err_code[f->nerr++] = err;
}

static const eddy_carrier_ops_t fail_ops = {.consume = fail_consume, .on_error = fail_error};

static void test_carrier_error_path(void **state)
{
    (void)state;
    fail_t f;
    memset(&f, 0, sizeof f);
    eddy_carrier_options_t o;
    eddy_carrier_options_init(&o);
    o.partitions = 1;
    o.max_batch = 4;
    eddy_carrier_t *c;
    assert_int_equal(eddy_carrier_new(&c, &o, &fail_ops, &f), 0);
    for (uintptr_t i = 1; i <= 100; i++)
        assert_int_equal(eddy_carrier_offer(c, 0, (void *)i, 0), 0);
    assert_int_equal(eddy_carrier_shutdown(c, EDDY_CARRIER_DRAIN), 0);
    assert_true(f.nfailed >= 1);
    assert_int_equal(f.nfailed, f.nerr);
    size_t failed = 0;
    for (int i = 0; i < f.nerr; i++) {
        assert_ptr_equal(f.err_items[i], f.failed_items[i]);
        assert_int_equal(f.err_n[i], f.failed_n[i]);
        assert_int_equal(f.err_code[i], EDDY_EIO);
        failed += f.err_n[i];
    }
    assert_int_equal(atomic_load(&f.ok) + failed, 100);
    eddy_carrier_free(c);
}

typedef struct shut_s {
    eddy_carrier_t *c;
    eddy_carrier_stop_t how;
    int rc;
} shut_t;

static void *shut_thread(void *arg)
{
    shut_t *s = arg;
    s->rc = eddy_carrier_shutdown(s->c, s->how);
    return NULL;
}

static int task_double(void *arg, void **result)
{
    *result = (void *)((uintptr_t)arg * 2);
    return 0;
}

/* Drain consumes everything queued; discard hands the rest to on_error and fails futures. */
static void test_carrier_shutdown(void **state)
{
    (void)state;
    for (int how = 0; how < 2; how++) {
        gate_t g;
        gate_init(&g);
        eddy_carrier_options_t o;
        eddy_carrier_options_init(&o);
        o.partitions = 2;
        o.consumers = 2;
        o.partitioner = EDDY_CARRIER_BY_KEY;
        eddy_carrier_t *c;
        assert_int_equal(eddy_carrier_new(&c, &o, &gate_ops, &g), 0);
        assert_int_equal(eddy_carrier_offer(c, 0, NULL, 0), 0);
        wait_entered(&g); /* the consumer of partition 0 holds one item */
        for (int i = 0; i < 500; i++)
            assert_int_equal(eddy_carrier_offer(c, 0, NULL, 0), 0);
        eddy_future_t *fut = eddy_carrier_execute(c, 0, task_double, (void *)21);
        assert_non_null(fut);
        shut_t s = {.c = c, .how = (eddy_carrier_stop_t)how};
        pthread_t th;
        pthread_create(&th, NULL, shut_thread, &s);
        while (eddy_carrier_offer(c, 0, NULL, 0) != EDDY_ECLOSED)
            sched_yield(); /* shutdown has closed the door; any accepted offer counts below */
        sleep_ms(20);
        gate_open(&g);
        pthread_join(th, NULL);
        assert_int_equal(s.rc, 0);
        assert_int_equal(atomic_load(&g.exits), 2);
        uint64_t total = atomic_load(&g.consumed) + atomic_load(&g.errors);
        assert_true(total >= 501);
        assert_true(eddy_future_is_done(fut));
        if (how == EDDY_CARRIER_DRAIN) {
            assert_int_equal(atomic_load(&g.errors), 0);
            assert_int_equal(eddy_future_error(fut), 0);
            assert_ptr_equal(eddy_future_result(fut), (void *)42);
        } else {
            assert_true(atomic_load(&g.errors) >= 500);
            assert_int_equal((int)(int64_t)atomic_load(&g.error_code), EDDY_ECANCELED);
            assert_int_equal(eddy_future_error(fut), EDDY_ECANCELED);
        }
        eddy_future_release(fut);
        eddy_future_t *late = eddy_carrier_execute(c, 0, task_double, NULL);
        assert_int_equal(eddy_future_error(late), EDDY_ECLOSED);
        eddy_future_release(late);
        eddy_carrier_free(c);
        gate_destroy(&g);
    }
}

/* The executor: results, errors, and per-key order of tasks. */
typedef struct order_task_s {
    uint64_t *last; /* per key */
    uint64_t key;
    uint64_t n;
    _Atomic int *bad;
} order_task_t;

static int task_order(void *arg, void **result)
{
    order_task_t *t = arg;
    if (t->last[t->key] + 1 != t->n)
        atomic_fetch_add(t->bad, 1);
    t->last[t->key] = t->n;
    *result = arg;
    return 0;
}

static int task_fail(void *arg, void **result)
{
    (void)arg;
    (void)result;
    return EDDY_EIO;
}

static void test_carrier_execute(void **state)
{
    (void)state;
    eddy_carrier_options_t o;
    eddy_carrier_options_init(&o);
    o.partitions = 4;
    o.consumers = 3;
    o.partitioner = EDDY_CARRIER_BY_KEY;
    eddy_carrier_t *c;
    assert_int_equal(eddy_carrier_new(&c, &o, NULL, NULL), 0);
    enum { KEYS = 10, PER = 200 };
    uint64_t last[KEYS] = {0};
    _Atomic int bad = 0;
    static order_task_t tasks[KEYS * PER];
    eddy_future_t *futs[KEYS * PER];
    for (int i = 0; i < KEYS * PER; i++) {
        tasks[i] = (order_task_t){
            .last = last, .key = (uint64_t)(i % KEYS), .n = (uint64_t)(i / KEYS) + 1, .bad = &bad};
        futs[i] = eddy_carrier_execute(c, tasks[i].key, task_order, &tasks[i]);
        assert_non_null(futs[i]);
    }
    eddy_future_t *f = eddy_carrier_execute(c, 5, task_fail, NULL);
    assert_int_equal(eddy_future_await(f, 5000), 0);
    assert_int_equal(eddy_future_error(f), EDDY_EIO);
    eddy_future_release(f);
    for (int i = 0; i < KEYS * PER; i++) {
        assert_int_equal(eddy_future_await(futs[i], 5000), 0);
        assert_int_equal(eddy_future_error(futs[i]), 0);
        assert_ptr_equal(eddy_future_result(futs[i]), &tasks[i]);
        eddy_future_release(futs[i]);
    }
    assert_int_equal(atomic_load(&bad), 0);
    eddy_carrier_free(c);
}

/* Rebalance under load: 1..4 threads and back while two producers run; order and once. */
static void test_carrier_rebalance(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        eddy_carrier_options_t o;
        eddy_carrier_options_init(&o);
        o.partitions = 8;
        o.consumers = 1;
        o.partitioner = EDDY_CARRIER_BY_KEY;
        o.partition_size = 128;
        o.max_batch = 32;
        o.assign = mode ? EDDY_CARRIER_CIRCLE : EDDY_CARRIER_AVERAGELY;
        check_t *k = check_new(200000, 53, true);
        eddy_carrier_t *c;
        assert_int_equal(eddy_carrier_new(&c, &o, &check_ops, k), 0);
        producer_t ps[2];
        pthread_t th[2];
        for (unsigned p = 0; p < 2; p++) {
            ps[p] = (producer_t){.c = c, .k = k, .which = p, .nprod = 2};
            pthread_create(&th[p], NULL, produce, &ps[p]);
        }
        static const unsigned ms[] = {2, 4, 3, 1, 4, 2, 1, 3};
        unsigned changes = 0;
        while (atomic_load(&k->total) < k->n / 2 || changes < 8) {
            assert_int_equal(eddy_carrier_set_consumers(c, ms[changes % 8]), 0);
            assert_int_equal(eddy_carrier_consumers(c), ms[changes % 8]);
            changes++;
            sleep_ms(2);
        }
        for (unsigned p = 0; p < 2; p++)
            pthread_join(th[p], NULL);
        unsigned m = eddy_carrier_consumers(c);
        assert_int_equal(eddy_carrier_shutdown(c, EDDY_CARRIER_DRAIN), 0);
        assert_int_equal(eddy_carrier_set_consumers(c, 2), EDDY_ECLOSED);
        check_exactly_once(k);
        assert_int_equal(atomic_load(&k->inits), atomic_load(&k->exits));
        assert_true(atomic_load(&k->inits) >= m);
        eddy_carrier_free(c);
        check_free(k);
    }
}

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* An idle carrier's threads sleep: next to no CPU, and a later offer still wakes them. */
static void test_carrier_idle(void **state)
{
    (void)state;
    eddy_carrier_options_t o;
    eddy_carrier_options_init(&o);
    o.consumers = 4;
    check_t *k = check_new(2, 1, false);
    eddy_carrier_t *c;
    assert_int_equal(eddy_carrier_new(&c, &o, &check_ops, k), 0);
    assert_int_equal(eddy_carrier_offer(c, 0, (void *)1, 0), 0);
    sleep_ms(20);
    int64_t before = cpu_ns();
    sleep_ms(300);
    int64_t used = cpu_ns() - before;
    assert_true(used < 30 * 1000000); /* under 10% of one CPU, whatever the sanitizer */
    assert_int_equal(eddy_carrier_offer(c, 0, (void *)2, 0), 0);
    for (int i = 0; i < 1000 && atomic_load(&k->total) < 2; i++)
        sleep_ms(1);
    assert_int_equal(atomic_load(&k->total), 2);
    eddy_carrier_free(c);
    check_free(k);
}

static void test_carrier_histogram(void **state)
{
    (void)state;
    eddy_carrier_options_t o;
    eddy_carrier_options_init(&o);
    o.partitions = 1;
    check_t *k = check_new(1000, 1, true);
    eddy_carrier_t *c;
    assert_int_equal(eddy_carrier_new(&c, &o, &check_ops, k), 0);
    producer_t p = {.c = c, .k = k, .which = 0, .nprod = 1};
    produce(&p);
    assert_int_equal(eddy_carrier_shutdown(c, EDDY_CARRIER_DRAIN), 0);
    uint64_t hist[4];
    eddy_carrier_batch_histogram(c, hist, 4);
    uint64_t batches = 0, lo = 0;
    for (int b = 0; b < 4; b++) {
        batches += hist[b];
        lo += hist[b] << b; /* each batch in bucket b has at least 2^b items */
    }
    assert_true(batches >= 4); /* 1000 items, at most 256 per batch */
    assert_true(lo <= 1000);
    eddy_carrier_free(c);
    check_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_carrier_options),
        cmocka_unit_test(test_carrier_order_by_key),
        cmocka_unit_test(test_carrier_every_strategy),
        cmocka_unit_test(test_carrier_ordered_idle_threads),
        cmocka_unit_test(test_carrier_full_if_possible),
        cmocka_unit_test(test_carrier_bytes_threshold),
        cmocka_unit_test(test_carrier_error_path),
        cmocka_unit_test(test_carrier_shutdown),
        cmocka_unit_test(test_carrier_execute),
        cmocka_unit_test(test_carrier_rebalance),
        cmocka_unit_test(test_carrier_idle),
        cmocka_unit_test(test_carrier_histogram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
