/*
 * buffer.stress_pool (label: concurrency; run under ThreadSanitizer): the pooled allocator and
 * buffer reference counts from several threads at once.
 *
 * - A producer allocates buffers of 64 B to 64 KiB, fills them with a checked pattern and
 *   hands them through a locked queue to a consumer, which checks and releases them: memory
 *   goes back on another thread than the one that took it.
 * - Meanwhile four threads allocate, fill, check and release locally, some through retained
 *   slices, with a few buffers alive at a time.
 * - Two threads retain and release the same buffers (roots, retained slices, plain slices);
 *   exactly one final release per buffer returns 1.
 * - A thread makes slices of a view it was handed while the root's thread grows the root.
 *
 * Threads never call cmocka asserts: they count failures, and the main thread asserts after
 * joining. Each thread trims the pool before it exits, so the pool's `used` ends at 0.
 * About 200k buffer operations in all.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <eddy/buffer.h>

#define KIB ((size_t)1024)

#define PRODUCED 20000 /* buffers through the queue */
#define LOCAL_THREADS 4
#define LOCAL_OPS 20000 /* alloc/check/release per local thread */
#define LOCAL_WINDOW 8  /* buffers a local thread keeps alive at a time */
#define QUEUE_SLOTS 64
#define RACE_ROUNDS 10
#define RACE_BATCH 1000
#define VIEW_ROUNDS 50
#define VIEW_SLICES 64
#define VIEW_GROWTHS 10

/* Pattern bytes: buffer number n carries pattern + n % 251 after its 8-byte number. */
static uint8_t pattern[64 * KIB + 256];

static uint64_t next_random(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

/* 64 B .. 64 KiB, spread over the powers of two between. */
static size_t mixed_size(uint64_t *s)
{
    size_t base = (size_t)64 << (next_random(s) % 11);
    size_t size = base + (size_t)(next_random(s) % base);
    return size > 64 * KIB ? 64 * KIB : size;
}

static eddy_allocator_t *new_stress_pool(void)
{
    /* Small chunks and two arenas: chunks come and go, and threads share arenas. */
    eddy_pool_options_t opts = {.chunk_size = 256 * KIB, .arenas = 2};
    eddy_allocator_t *a = eddy_pooled_allocator_new(&opts);
    assert_non_null(a);
    return a;
}

static void assert_pool_empty_and_free(eddy_allocator_t *a)
{
    eddy_allocator_trim(a);
    eddy_allocator_metrics_t m;
    eddy_allocator_metrics(a, &m);
    assert_int_equal(m.used, 0);
    assert_int_equal(m.unpooled, 0);
    assert_int_equal(eddy_allocator_free(a), 0);
}

/* ---------------------------------------------------------------------------------------
 * Producer and consumer
 */

typedef struct queue_s {
    pthread_mutex_t lock;
    pthread_cond_t not_empty;
    pthread_cond_t not_full;
    eddy_buf_t *slot[QUEUE_SLOTS];
    size_t head; /* next to take */
    size_t tail; /* next to fill */
} queue_t;

typedef struct handoff_s {
    eddy_allocator_t *a;
    queue_t q;
    atomic_int failures;
    atomic_uint_least64_t checked;
} handoff_t;

static void queue_push(queue_t *q, eddy_buf_t *b)
{
    pthread_mutex_lock(&q->lock);
    while (q->tail - q->head == QUEUE_SLOTS) {
        pthread_cond_wait(&q->not_full, &q->lock);
    }
    q->slot[q->tail % QUEUE_SLOTS] = b;
    q->tail++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
}

static eddy_buf_t *queue_pop(queue_t *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->tail == q->head) {
        pthread_cond_wait(&q->not_empty, &q->lock);
    }
    eddy_buf_t *b = q->slot[q->head % QUEUE_SLOTS];
    q->head++;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->lock);
    return b;
}

static void *produce(void *arg)
{
    handoff_t *h = arg;
    uint64_t seed = 12345;
    for (uint64_t n = 0; n < PRODUCED; n++) {
        size_t size = mixed_size(&seed);
        eddy_buf_t *b = eddy_buf_alloc(h->a, size, size);
        if (b == NULL) {
            atomic_fetch_add(&h->failures, 1);
            continue;
        }
        if (eddy_buf_write_u64(b, n) != 0 ||
            eddy_buf_write_bytes(b, pattern + n % 251, size - 8) != 0 ||
            eddy_buf_writable(b) != 0) {
            atomic_fetch_add(&h->failures, 1);
        }
        queue_push(&h->q, b);
    }
    queue_push(&h->q, NULL);
    eddy_allocator_trim(h->a);
    return NULL;
}

static void *consume(void *arg)
{
    handoff_t *h = arg;
    uint64_t expect = 0;
    eddy_buf_t *b;
    while ((b = queue_pop(&h->q)) != NULL) {
        uint64_t n;
        /* Buffers arrive in order; a NULL from the producer's failed alloc skips one. */
        if (eddy_buf_read_u64(b, &n) != 0 || n < expect ||
            memcmp(eddy_buf_read_ptr(b), pattern + n % 251, eddy_buf_readable(b)) != 0) {
            atomic_fetch_add(&h->failures, 1);
        } else {
            atomic_fetch_add(&h->checked, 1);
        }
        expect = n + 1;
        if (eddy_buf_release(b) != 1) {
            atomic_fetch_add(&h->failures, 1);
        }
    }
    eddy_allocator_trim(h->a);
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * Local loops
 */

typedef struct local_s {
    eddy_allocator_t *a;
    uint64_t seed;
    int failures;
} local_t;

static bool check_and_release(eddy_buf_t *b)
{
    uint64_t head;
    uint64_t tail;
    size_t n = eddy_buf_readable(b);
    size_t rd = eddy_buf_reader_index(b);
    bool ok = n >= 16 && eddy_buf_get_u64(b, rd, &head) == 0 &&
              eddy_buf_get_u64(b, rd + n - 8, &tail) == 0 && head == ~tail;
    return eddy_buf_release(b) == 1 && ok;
}

static void *loop_locally(void *arg)
{
    local_t *l = arg;
    eddy_buf_t *window[LOCAL_WINDOW] = {0};
    for (size_t i = 0; i < LOCAL_OPS; i++) {
        size_t slot = i % LOCAL_WINDOW;
        if (window[slot] != NULL && !check_and_release(window[slot])) {
            l->failures++;
        }
        window[slot] = NULL;

        uint64_t r = next_random(&l->seed);
        size_t size = i % 64 == 0 ? 64 * KIB : 16 + (size_t)(r % 4080);
        eddy_buf_t *b = eddy_buf_alloc(l->a, size, size);
        if (b == NULL) {
            l->failures++;
            continue;
        }
        if (eddy_buf_write_u64(b, r) != 0 || eddy_buf_write_zero(b, size - 16) != 0 ||
            eddy_buf_write_u64(b, ~r) != 0) {
            l->failures++;
        }
        if (i % 16 == 1) {
            /* Keep a retained slice instead: the root goes with the slice's last release. */
            eddy_buf_t *s = eddy_buf_retained_slice(b, 0, size);
            if (s == NULL || eddy_buf_release(b) != 0) {
                l->failures++;
            }
            b = s;
        }
        window[slot] = b;
    }
    for (size_t slot = 0; slot < LOCAL_WINDOW; slot++) {
        if (window[slot] != NULL && !check_and_release(window[slot])) {
            l->failures++;
        }
    }
    eddy_allocator_trim(l->a);
    return NULL;
}

static void test_buffers_cross_threads_while_others_allocate_locally(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_allocator_t *a = new_stress_pool();
    eddy_allocator_t *def = eddy_allocator_default();

    handoff_t h = {.a = a};
    pthread_mutex_init(&h.q.lock, NULL);
    pthread_cond_init(&h.q.not_empty, NULL);
    pthread_cond_init(&h.q.not_full, NULL);
    atomic_init(&h.failures, 0);
    atomic_init(&h.checked, 0);

    /* Two local threads share the private pool, two use the default allocator. */
    local_t local[LOCAL_THREADS];
    for (size_t i = 0; i < LOCAL_THREADS; i++) {
        local[i] = (local_t){.a = i < 2 ? a : def, .seed = 1000 + i};
    }

    pthread_t producer;
    pthread_t consumer;
    pthread_t locals[LOCAL_THREADS];
    assert_int_equal(pthread_create(&consumer, NULL, consume, &h), 0);
    assert_int_equal(pthread_create(&producer, NULL, produce, &h), 0);
    for (size_t i = 0; i < LOCAL_THREADS; i++) {
        assert_int_equal(pthread_create(&locals[i], NULL, loop_locally, &local[i]), 0);
    }
    assert_int_equal(pthread_join(producer, NULL), 0);
    assert_int_equal(pthread_join(consumer, NULL), 0);
    for (size_t i = 0; i < LOCAL_THREADS; i++) {
        assert_int_equal(pthread_join(locals[i], NULL), 0);
        assert_int_equal(local[i].failures, 0);
    }
    assert_int_equal(atomic_load(&h.failures), 0);
    assert_int_equal(atomic_load(&h.checked), PRODUCED);

    pthread_cond_destroy(&h.q.not_full);
    pthread_cond_destroy(&h.q.not_empty);
    pthread_mutex_destroy(&h.q.lock);
    assert_int_equal(eddy_buf_live_count(), live);
    assert_pool_empty_and_free(a);
}

/* ---------------------------------------------------------------------------------------
 * Reference count race
 */

typedef struct race_s {
    eddy_buf_t **items;
    pthread_barrier_t *start;
    eddy_allocator_t *a;
    size_t freed;  /* releases that returned 1 */
    size_t kept;   /* releases that returned 0 */
    size_t errors; /* anything else */
} race_t;

/*
 * Each item arrives holding one reference for each of the two racers. A racer takes and drops
 * a temporary reference (safe: it still holds its own), then drops its own.
 */
static void *race_releases(void *arg)
{
    race_t *r = arg;
    for (size_t round = 0; round < RACE_ROUNDS; round++) {
        pthread_barrier_wait(r->start);
        for (size_t i = 0; i < RACE_BATCH; i++) {
            eddy_buf_t *b = r->items[i];
            int rcs[2];
            if (eddy_buf_retain(b) != b) {
                r->errors++;
            }
            rcs[0] = eddy_buf_release(b);
            rcs[1] = eddy_buf_release(b);
            for (size_t k = 0; k < 2; k++) {
                if (rcs[k] == 1) {
                    r->freed++;
                } else if (rcs[k] == 0) {
                    r->kept++;
                } else {
                    r->errors++;
                }
            }
        }
        /* The main thread refills the batch between the rounds. */
        pthread_barrier_wait(r->start);
    }
    eddy_allocator_trim(r->a);
    return NULL;
}

static void test_concurrent_releases_free_each_buffer_exactly_once(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_allocator_t *a = new_stress_pool();
    static eddy_buf_t *items[RACE_BATCH];
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, 3), 0);

    race_t racers[2];
    pthread_t th[2];
    for (size_t t = 0; t < 2; t++) {
        racers[t] = (race_t){.items = items, .start = &start, .a = a};
        assert_int_equal(pthread_create(&th[t], NULL, race_releases, &racers[t]), 0);
    }

    for (size_t round = 0; round < RACE_ROUNDS; round++) {
        for (size_t i = 0; i < RACE_BATCH; i++) {
            size_t size = 64 + (i * 37) % 2000;
            eddy_buf_t *root = eddy_buf_alloc(a, size, size);
            assert_non_null(root);
            assert_int_equal(eddy_buf_write_zero(root, size), 0);
            eddy_buf_t *item = root;
            switch (i % 3) {
            case 1: /* a retained slice: its own count of 2; the root held by it alone */
                item = eddy_buf_retained_slice(root, 8, 8);
                assert_non_null(item);
                assert_int_equal(eddy_buf_release(root), 0);
                break;
            case 2: /* a plain slice: the count is the root's */
                item = eddy_buf_slice(root, 0, 16);
                assert_non_null(item);
                break;
            default:
                break;
            }
            eddy_buf_retain(item);
            assert_int_equal(eddy_buf_refcnt(item), 2);
            items[i] = item;
        }
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&start);
        assert_int_equal(eddy_buf_live_count(), live);
    }
    for (size_t t = 0; t < 2; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
    }
    pthread_barrier_destroy(&start);

    size_t freed = racers[0].freed + racers[1].freed;
    size_t kept = racers[0].kept + racers[1].kept;
    assert_int_equal(racers[0].errors + racers[1].errors, 0);
    assert_int_equal(freed, RACE_ROUNDS * RACE_BATCH);
    assert_int_equal(kept, 3 * RACE_ROUNDS * RACE_BATCH);
    assert_int_equal(eddy_buf_live_count(), live);
    assert_pool_empty_and_free(a);
}

/* ---------------------------------------------------------------------------------------
 * Views made on another thread while the root grows
 */

typedef struct view_race_s {
    eddy_buf_t *view; /* a plain view of the root, with one reference for this thread */
    pthread_barrier_t *start;
    int failures;
} view_race_t;

/* Slices (plain and retained) of the view, each checked against the pattern, then the
 * view's reference dropped. The plain slices stay on the root's list until it is freed. */
static void *slice_a_view(void *arg)
{
    view_race_t *v = arg;
    pthread_barrier_wait(v->start);
    for (size_t i = 0; i < VIEW_SLICES; i++) {
        size_t at = i % 8;
        bool retained = i % 2 == 1;
        eddy_buf_t *s = retained ? eddy_buf_retained_slice(v->view, at, 8)
                                 : eddy_buf_slice(v->view, at, 8);
        uint8_t byte;
        if (s == NULL || eddy_buf_get_u8(s, 0, &byte) != 0 || byte != pattern[at]) {
            v->failures++;
            continue;
        }
        if (retained && eddy_buf_release(s) != 1) {
            v->failures++;
        }
    }
    if (eddy_buf_release(v->view) != 0) {
        v->failures++;
    }
    return NULL;
}

static void test_views_made_on_another_thread_while_the_root_grows(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_allocator_t *a = new_stress_pool();
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, 2), 0);

    for (size_t round = 0; round < VIEW_ROUNDS; round++) {
        eddy_buf_t *root = eddy_buf_alloc(a, 64, SIZE_MAX);
        assert_non_null(root);
        assert_int_equal(eddy_buf_write_bytes(root, pattern, 64), 0);
        view_race_t v = {.view = eddy_buf_slice(root, 0, 16), .start = &start};
        assert_non_null(v.view);
        eddy_buf_retain(v.view);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, slice_a_view, &v), 0);
        pthread_barrier_wait(&start);
        /* Each growth moves the root and keeps its old block for the views. */
        for (size_t k = 0; k < VIEW_GROWTHS; k++) {
            assert_int_equal(eddy_buf_write_zero(root, (size_t)64 << k), 0);
        }
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(v.failures, 0);
        assert_memory_equal(eddy_buf_read_ptr(root), pattern, 64);
        assert_int_equal(eddy_buf_release(root), 1);
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(eddy_buf_live_count(), live);
    assert_pool_empty_and_free(a);
}

/* ---------------------------------------------------------------------------------------
 * A shared root: the first views made on several threads at once
 */

typedef struct share_race_s {
    eddy_buf_t *root; /* one reference for this thread */
    pthread_barrier_t *start;
    int failures;
} share_race_t;

/* What a group write does on each member's loop: retained duplicates of one frame. */
static void *duplicate_a_shared_root(void *arg)
{
    share_race_t *r = arg;
    pthread_barrier_wait(r->start);
    for (size_t i = 0; i < 64; i++) {
        eddy_buf_t *d = eddy_buf_retained_duplicate(r->root);
        if (d == NULL || eddy_buf_readable(d) != 64 ||
            memcmp(eddy_buf_read_ptr(d), pattern, 64) != 0) {
            r->failures++;
        }
        if (d != NULL && eddy_buf_release(d) != 1) {
            r->failures++;
        }
    }
    eddy_buf_release(r->root);
    return NULL;
}

static void test_first_views_of_a_shared_root_on_two_threads_at_once(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_allocator_t *a = new_stress_pool();
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, 2), 0);

    for (size_t round = 0; round < VIEW_ROUNDS; round++) {
        eddy_buf_t *root = eddy_buf_alloc(a, 64, 64);
        assert_non_null(root);
        assert_int_equal(eddy_buf_write_bytes(root, pattern, 64), 0);
        eddy_buf_retain(root);
        share_race_t r[2] = {{.root = root, .start = &start}, {.root = root, .start = &start}};
        pthread_t th[2];
        for (int k = 0; k < 2; k++) {
            assert_int_equal(pthread_create(&th[k], NULL, duplicate_a_shared_root, &r[k]), 0);
        }
        for (int k = 0; k < 2; k++) {
            assert_int_equal(pthread_join(th[k], NULL), 0);
            assert_int_equal(r[k].failures, 0);
        }
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(eddy_buf_live_count(), live);
    assert_pool_empty_and_free(a);
}

static int make_pattern(void **state)
{
    for (size_t i = 0; i < sizeof(pattern); i++) {
        pattern[i] = (uint8_t)(i * 151u + (i >> 8) + 11u);
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buffers_cross_threads_while_others_allocate_locally),
        cmocka_unit_test(test_concurrent_releases_free_each_buffer_exactly_once),
        cmocka_unit_test(test_views_made_on_another_thread_while_the_root_grows),
        cmocka_unit_test(test_first_views_of_a_shared_root_on_two_threads_at_once),
    };
    return cmocka_run_group_tests_name("buffer.stress_pool", tests, make_pattern, NULL);
}
