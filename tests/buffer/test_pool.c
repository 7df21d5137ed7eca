/*
 * buffer.pool: the allocators seen through the public API: names, sizes, metrics, trimming,
 * options, thread caches, and freeing a private pool.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <eddy/buffer.h>

#define KIB ((size_t)1024)
#define MIB (1024 * KIB)

static const size_t sizes[] = {
    1,       2,     3,           7,       8,           9,       15,        16,        17,
    31,      32,    33,          63,      64,          65,      100,       127,       128,
    129,     255,   256,         257,     500,         511,     512,       513,       1000,
    1023,    1024,  1025,        2047,    2048,        2049,    4095,      4096,      4097,
    6000,    8191,  8192,        8193,    16383,       16384,   16385,     28672,     32767,
    32768,   32769, 65535,       65536,   65537,       100000,  128 * KIB, 256 * KIB, 512 * KIB,
    MIB - 1, MIB,   2 * MIB - 1, 2 * MIB, 2 * MIB + 1, 3 * MIB,
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Bytes to write: a pattern long enough for the largest size at any offset below 256. */
static uint8_t *pattern;
#define PATTERN_LEN (3 * MIB + 256)

static int make_pattern(void **state)
{
    pattern = malloc(PATTERN_LEN);
    if (pattern == NULL) {
        return -1;
    }
    for (size_t i = 0; i < PATTERN_LEN; i++) {
        pattern[i] = (uint8_t)(i * 131u + (i >> 11) + 3u);
    }
    return 0;
}

static int free_pattern(void **state)
{
    free(pattern);
    pattern = NULL;
    return 0;
}

static eddy_allocator_t *new_pool(size_t chunk_size, bool no_cache)
{
    eddy_pool_options_t opts = {.chunk_size = chunk_size, .no_cache = no_cache};
    eddy_allocator_t *a = eddy_pooled_allocator_new(&opts);
    assert_non_null(a);
    return a;
}

static eddy_allocator_metrics_t metrics_of(eddy_allocator_t *a)
{
    eddy_allocator_metrics_t m;
    memset(&m, 0xa5, sizeof(m));
    eddy_allocator_metrics(a, &m);
    return m;
}

static size_t chunks_of(const eddy_allocator_metrics_t *m)
{
    size_t n = 0;
    assert_true(m->arenas <= EDDY_POOL_MAX_ARENAS);
    for (size_t i = 0; i < m->arenas; i++) {
        n += m->arena[i].chunks;
    }
    return n;
}

typedef struct cache_tally_s {
    size_t caches;
    size_t cached;
    uint64_t hits;
    uint64_t misses;
    size_t max_arena;
} cache_tally_t;

static void tally_cache(const eddy_cache_metrics_t *m, void *arg)
{
    cache_tally_t *t = arg;
    t->caches++;
    t->cached += m->cached;
    t->hits += m->hits;
    t->misses += m->misses;
    if (m->arena > t->max_arena) {
        t->max_arena = m->arena;
    }
}

static cache_tally_t caches_of(eddy_allocator_t *a)
{
    cache_tally_t t = {0};
    eddy_allocator_foreach_cache(a, tally_cache, &t);
    return t;
}

/* ---------------------------------------------------------------------------------------
 * The allocator a test runs with, chosen by its setup.
 */

static int use_default(void **state)
{
    *state = eddy_allocator_default();
    return 0;
}

static int use_unpooled(void **state)
{
    *state = eddy_allocator_unpooled();
    return 0;
}

static int use_pool(void **state)
{
    *state = eddy_pooled_allocator_new(NULL);
    return *state == NULL ? -1 : 0;
}

static int use_small_chunk_pool(void **state)
{
    eddy_pool_options_t opts = {.chunk_size = 64 * KIB};
    *state = eddy_pooled_allocator_new(&opts);
    return *state == NULL ? -1 : 0;
}

static int use_uncached_pool(void **state)
{
    eddy_pool_options_t opts = {.chunk_size = 256 * KIB, .no_cache = true};
    *state = eddy_pooled_allocator_new(&opts);
    return *state == NULL ? -1 : 0;
}

static int free_pool(void **state)
{
    int rc = eddy_allocator_free(*state);
    if (rc != 0) {
        print_error("eddy_allocator_free() returned %s\n", eddy_err_name(rc));
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Tests
 */

static void test_allocator_names_tell_the_kinds_apart(void **state)
{
    eddy_allocator_t *def = eddy_allocator_default();
    assert_non_null(def);
    assert_ptr_equal(eddy_allocator_default(), def);
    const char *env = getenv("EDDY_ALLOCATOR");
    const char *expect = env != NULL && strcmp(env, "unpooled") == 0 ? "unpooled" : "pooled";
    assert_string_equal(eddy_allocator_name(def), expect);

    eddy_allocator_t *unpooled = eddy_allocator_unpooled();
    assert_non_null(unpooled);
    assert_ptr_equal(eddy_allocator_unpooled(), unpooled);
    assert_string_equal(eddy_allocator_name(unpooled), "unpooled");

    eddy_allocator_t *a = eddy_pooled_allocator_new(NULL);
    assert_non_null(a);
    assert_ptr_not_equal(a, def);
    assert_string_equal(eddy_allocator_name(a), "pooled");
    assert_int_equal(eddy_allocator_free(a), 0);
}

static void test_process_wide_allocators_cannot_be_freed(void **state)
{
    int64_t live = eddy_buf_live_count();

    assert_int_equal(eddy_allocator_free(eddy_allocator_default()), EDDY_EINVAL);
    assert_int_equal(eddy_allocator_free(eddy_allocator_unpooled()), EDDY_EINVAL);

    /* Both still work. */
    eddy_buf_t *b = eddy_buf_alloc(eddy_allocator_default(), 100, 100);
    eddy_buf_t *u = eddy_buf_alloc(eddy_allocator_unpooled(), 100, 100);
    assert_non_null(b);
    assert_non_null(u);
    assert_int_equal(eddy_buf_write_zero(b, 100), 0);
    assert_int_equal(eddy_buf_write_zero(u, 100), 0);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_release(u), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_sizes_from_one_byte_to_three_mib_are_writable_to_capacity(void **state)
{
    eddy_allocator_t *a = *state;
    int64_t live = eddy_buf_live_count();
    eddy_buf_t *bufs[NSIZES];
    eddy_allocator_metrics_t before = metrics_of(a);

    size_t total = 0;
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k];
        eddy_buf_t *b = eddy_buf_alloc(a, n, n);
        assert_non_null(b);
        assert_int_equal(eddy_buf_capacity(b), n);
        assert_int_equal(eddy_buf_writable(b), n);
        assert_ptr_equal(eddy_buf_allocator(b), a);
        assert_int_equal(eddy_buf_write_bytes(b, pattern + k, n), 0);
        assert_int_equal(eddy_buf_writable(b), 0);
        assert_memory_equal(eddy_buf_read_ptr(b), pattern + k, n);
        bufs[k] = b;
        total += n;
    }
    assert_int_equal(eddy_buf_live_count(), live + (int64_t)NSIZES);
    eddy_allocator_metrics_t during = metrics_of(a);
    assert_true(during.used >= before.used + total);
    assert_true(during.held >= during.used);

    /* All alive at once and none overlapping: every pattern is intact. */
    for (size_t k = 0; k < NSIZES; k++) {
        assert_int_equal(eddy_buf_readable(bufs[k]), sizes[k]);
        assert_memory_equal(eddy_buf_read_ptr(bufs[k]), pattern + k, sizes[k]);
    }
    for (size_t k = 0; k < NSIZES; k++) {
        assert_int_equal(eddy_buf_release(bufs[k]), 1);
    }
    assert_int_equal(eddy_buf_live_count(), live);
    eddy_allocator_metrics_t after = metrics_of(a);
    assert_int_equal(after.used, before.used);
    assert_int_equal(after.unpooled, before.unpooled);
}

static void test_metrics_follow_buffers_and_trim_gives_memory_back(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_allocator_t *a = new_pool(64 * KIB, false);

    eddy_allocator_metrics_t m = metrics_of(a);
    assert_int_equal(m.used, 0);
    assert_int_equal(m.cached, 0);
    assert_int_equal(m.unpooled, 0);
    assert_true(m.arenas >= 1);
    assert_true(m.arenas <= EDDY_POOL_MAX_ARENAS);

    /* 200 KB of small buffers need several 64 KiB chunks; 40 KiB is above half a chunk. */
    enum { NSMALL = 200, NLARGE = 3 };
    eddy_buf_t *small[NSMALL];
    eddy_buf_t *large[NLARGE];
    for (size_t i = 0; i < NSMALL; i++) {
        small[i] = eddy_buf_alloc(a, 1000, 1000);
        assert_non_null(small[i]);
        assert_int_equal(eddy_buf_write_bytes(small[i], pattern + i, 1000), 0);
    }
    for (size_t i = 0; i < NLARGE; i++) {
        large[i] = eddy_buf_alloc(a, 40 * KIB, 40 * KIB);
        assert_non_null(large[i]);
        assert_int_equal(eddy_buf_write_bytes(large[i], pattern + i, 40 * KIB), 0);
    }
    m = metrics_of(a);
    assert_true(m.used >= NSMALL * 1000 + NLARGE * 40 * KIB);
    assert_true(m.unpooled >= NLARGE * 40 * KIB);
    assert_true(m.held >= m.used);
    assert_true(m.held >= 4 * 64 * KIB + NLARGE * 40 * KIB);
    assert_true(chunks_of(&m) >= 4);

    for (size_t i = 0; i < NSMALL; i++) {
        assert_memory_equal(eddy_buf_read_ptr(small[i]), pattern + i, 1000);
        assert_int_equal(eddy_buf_release(small[i]), 1);
    }
    for (size_t i = 0; i < NLARGE; i++) {
        assert_int_equal(eddy_buf_release(large[i]), 1);
    }
    m = metrics_of(a);
    assert_int_equal(m.used, 0);
    assert_int_equal(m.unpooled, 0);
    size_t held_before_trim = m.held;
    assert_true(held_before_trim > 0);

    size_t given_back = eddy_allocator_trim(a);
    assert_true(given_back > 0);
    m = metrics_of(a);
    assert_int_equal(m.used, 0);
    assert_int_equal(m.cached, 0);
    assert_true(m.held < held_before_trim);
    /* Every chunk is free after the cache is emptied, so every chunk goes. */
    assert_int_equal(m.held, 0);
    assert_int_equal(chunks_of(&m), 0);

    /* The pool works after a trim: chunks come back on demand. */
    eddy_buf_t *b = eddy_buf_alloc(a, 1000, 1000);
    assert_non_null(b);
    assert_true(metrics_of(a).held > 0);
    assert_int_equal(eddy_buf_release(b), 1);
    eddy_allocator_trim(a);

    assert_int_equal(eddy_allocator_free(a), 0);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_requests_above_half_a_chunk_are_unpooled(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_allocator_t *a = new_pool(64 * KIB, false);

    eddy_buf_t *half = eddy_buf_alloc(a, 32 * KIB, 32 * KIB);
    assert_non_null(half);
    assert_int_equal(metrics_of(a).unpooled, 0);
    eddy_buf_t *above = eddy_buf_alloc(a, 32 * KIB + 1, 32 * KIB + 1);
    assert_non_null(above);
    assert_true(metrics_of(a).unpooled >= 32 * KIB + 1);
    assert_int_equal(eddy_buf_release(above), 1);
    assert_int_equal(metrics_of(a).unpooled, 0);
    assert_int_equal(eddy_buf_release(half), 1);
    eddy_allocator_trim(a);
    assert_int_equal(eddy_allocator_free(a), 0);

    /* The default chunk is 4 MiB: 2 MiB is pooled, 3 MiB is not. */
    a = eddy_pooled_allocator_new(NULL);
    assert_non_null(a);
    eddy_buf_t *two = eddy_buf_alloc(a, 2 * MIB, 2 * MIB);
    assert_non_null(two);
    assert_int_equal(metrics_of(a).unpooled, 0);
    eddy_buf_t *three = eddy_buf_alloc(a, 3 * MIB, 3 * MIB);
    assert_non_null(three);
    assert_true(metrics_of(a).unpooled >= 3 * MIB);
    assert_int_equal(eddy_buf_release(three), 1);
    assert_int_equal(eddy_buf_release(two), 1);
    assert_int_equal(metrics_of(a).unpooled, 0);
    assert_int_equal(eddy_allocator_free(a), 0);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_allocator_free_is_busy_while_a_buffer_lives(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_allocator_t *a = new_pool(64 * KIB, false);

    eddy_buf_t *b = eddy_buf_alloc(a, 100, 100);
    assert_non_null(b);
    assert_int_equal(eddy_buf_write_bytes(b, "still here", 10), 0);
    assert_int_equal(eddy_allocator_free(a), EDDY_EBUSY);
    /* Nothing was freed: the buffer and the allocator still work. */
    assert_memory_equal(eddy_buf_read_ptr(b), "still here", 10);
    eddy_buf_t *c = eddy_buf_alloc(a, 100, 100);
    assert_non_null(c);
    assert_int_equal(eddy_buf_release(c), 1);

    /* A retained view keeps its parent, and so the allocator, busy. */
    eddy_buf_t *r = eddy_buf_retained_slice(b, 0, 5);
    assert_non_null(r);
    assert_int_equal(eddy_buf_release(b), 0);
    assert_int_equal(eddy_allocator_free(a), EDDY_EBUSY);
    assert_memory_equal(eddy_buf_read_ptr(r), "still", 5);
    assert_int_equal(eddy_buf_release(r), 1);

    assert_int_equal(eddy_allocator_free(a), 0);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* A buffer of capacity 0 holds no block yet, but it lives, and it grows from the pool. */
static void test_allocator_free_is_busy_while_an_empty_buffer_lives(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_allocator_t *a = new_pool(64 * KIB, false);

    eddy_buf_t *b = eddy_buf_alloc(a, 0, 1000);
    assert_non_null(b);
    assert_int_equal(eddy_buf_capacity(b), 0);
    assert_int_equal(eddy_allocator_free(a), EDDY_EBUSY);
    /* Nothing was freed: the buffer grows from the pool (ASan: no use after free). */
    assert_int_equal(eddy_buf_write_bytes(b, "grown", 5), 0);
    assert_ptr_equal(eddy_buf_allocator(b), a);
    assert_int_equal(eddy_allocator_free(a), EDDY_EBUSY);
    assert_memory_equal(eddy_buf_read_ptr(b), "grown", 5);
    assert_int_equal(eddy_buf_release(b), 1);

    /* An empty buffer released without growing leaves the pool free to go. */
    eddy_buf_t *e = eddy_buf_alloc(a, 0, 0);
    assert_non_null(e);
    assert_int_equal(eddy_allocator_free(a), EDDY_EBUSY);
    assert_int_equal(eddy_buf_release(e), 1);

    assert_int_equal(eddy_allocator_free(a), 0);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_pool_options_are_validated(void **state)
{
    eddy_pool_options_t opts = {.chunk_size = 100000};
    assert_null(eddy_pooled_allocator_new(&opts));
    opts.chunk_size = 3 * 64 * KIB;
    assert_null(eddy_pooled_allocator_new(&opts));
    opts.chunk_size = 32 * KIB;
    assert_null(eddy_pooled_allocator_new(&opts));
    opts.chunk_size = 64 * KIB + 1;
    assert_null(eddy_pooled_allocator_new(&opts));

    eddy_pool_options_t good[] = {
        {0},
        {.chunk_size = 64 * KIB},
        {.chunk_size = MIB, .arenas = 1},
        {.chunk_size = 4 * MIB, .arenas = 3, .cache_bytes = 1024},
        {.chunk_size = 16 * MIB, .no_cache = true},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        eddy_allocator_t *a = eddy_pooled_allocator_new(&good[i]);
        assert_non_null(a);
        eddy_buf_t *b = eddy_buf_alloc(a, 5000, 5000);
        assert_non_null(b);
        assert_int_equal(eddy_buf_write_bytes(b, pattern, 5000), 0);
        assert_memory_equal(eddy_buf_read_ptr(b), pattern, 5000);
        if (good[i].arenas != 0) {
            assert_int_equal(metrics_of(a).arenas, good[i].arenas);
        }
        assert_int_equal(eddy_buf_release(b), 1);
        assert_int_equal(eddy_allocator_free(a), 0);
    }
}

static void test_no_cache_returns_memory_to_the_arena_at_once(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_allocator_t *a = new_pool(64 * KIB, true);

    for (size_t i = 0; i < 100; i++) {
        eddy_buf_t *b = eddy_buf_alloc(a, 512, 512);
        assert_non_null(b);
        assert_int_equal(eddy_buf_write_bytes(b, pattern + i, 512), 0);
        assert_true(metrics_of(a).used >= 512);
        assert_int_equal(eddy_buf_release(b), 1);
        eddy_allocator_metrics_t m = metrics_of(a);
        assert_int_equal(m.used, 0);
        assert_int_equal(m.cached, 0);
    }
    eddy_allocator_metrics_t m = metrics_of(a);
    assert_int_equal(m.caches, 0);
    assert_int_equal(caches_of(a).caches, 0);
    uint64_t allocations = 0;
    uint64_t deallocations = 0;
    for (size_t i = 0; i < m.arenas; i++) {
        allocations += m.arena[i].allocations;
        deallocations += m.arena[i].deallocations;
    }
    /* Every allocation went to an arena, and came back to it. */
    assert_true(allocations >= 100);
    assert_int_equal(deallocations, allocations);

    eddy_allocator_trim(a);
    assert_int_equal(metrics_of(a).held, 0);
    assert_int_equal(eddy_allocator_free(a), 0);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_foreach_cache_reports_the_calling_thread_cache(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_allocator_t *a = eddy_pooled_allocator_new(NULL);
    assert_non_null(a);
    assert_int_equal(caches_of(a).caches, 0);

    for (size_t i = 0; i < 100; i++) {
        eddy_buf_t *b = eddy_buf_alloc(a, 1000, 1000);
        assert_non_null(b);
        assert_int_equal(eddy_buf_release(b), 1);
    }
    cache_tally_t t = caches_of(a);
    eddy_allocator_metrics_t m = metrics_of(a);
    /* Only this thread used a: one cache, which saw every allocation. */
    assert_int_equal(t.caches, 1);
    assert_int_equal(m.caches, 1);
    assert_true(t.max_arena < m.arenas);
    assert_int_equal(t.hits + t.misses, 100);
    assert_true(t.hits >= 1);
    assert_true(t.cached > 0);
    assert_int_equal(m.cached, t.cached);

    /* Trim empties the calling thread's cache. */
    eddy_allocator_trim(a);
    t = caches_of(a);
    assert_int_equal(t.cached, 0);
    assert_int_equal(metrics_of(a).cached, 0);

    assert_int_equal(eddy_allocator_free(a), 0);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_memory_is_reused_across_alloc_and_release(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_allocator_t *a = new_pool(64 * KIB, false);
    const size_t each[] = {700, 20 * KIB, 40 * KIB};

    for (size_t s = 0; s < sizeof(each) / sizeof(each[0]); s++) {
        eddy_buf_t *b = eddy_buf_alloc(a, each[s], each[s]);
        assert_non_null(b);
        assert_int_equal(eddy_buf_release(b), 1);
        size_t held = metrics_of(a).held;
        for (size_t i = 0; i < 1000; i++) {
            b = eddy_buf_alloc(a, each[s], each[s]);
            assert_non_null(b);
            assert_int_equal(eddy_buf_write_u64(b, i), 0);
            assert_int_equal(eddy_buf_release(b), 1);
            assert_true(metrics_of(a).held <= held);
        }
    }
    assert_int_equal(metrics_of(a).used, 0);
    eddy_allocator_trim(a);
    assert_int_equal(eddy_allocator_free(a), 0);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_unpooled_allocator_metrics_follow_live_buffers(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_allocator_t *a = eddy_allocator_unpooled();
    eddy_allocator_metrics_t before = metrics_of(a);

    eddy_buf_t *b = eddy_buf_alloc(a, 10000, 10000);
    assert_non_null(b);
    eddy_allocator_metrics_t during = metrics_of(a);
    assert_true(during.used >= before.used + 10000);
    assert_true(during.unpooled >= before.unpooled + 10000);
    assert_true(during.held >= before.held + 10000);
    assert_int_equal(during.cached, 0);

    assert_int_equal(eddy_buf_release(b), 1);
    eddy_allocator_metrics_t after = metrics_of(a);
    assert_int_equal(after.used, before.used);
    assert_int_equal(after.unpooled, before.unpooled);
    assert_int_equal(after.held, before.held);
    /* Nothing is kept: nothing to trim, no caches. */
    assert_int_equal(eddy_allocator_trim(a), 0);
    assert_int_equal(caches_of(a).caches, 0);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* A thread that fills its cache for a pool, then idles while the pool is freed. */
typedef struct idle_thread_s {
    eddy_allocator_t *a;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stage; /* 1: the thread cached memory; 2: the pool is gone, exit */
    int failures;
} idle_thread_t;

static void *cache_then_idle(void *arg)
{
    idle_thread_t *t = arg;
    for (size_t i = 0; i < 50; i++) {
        eddy_buf_t *b = eddy_buf_alloc(t->a, 256 + i, 256 + i);
        if (b == NULL || eddy_buf_write_u32(b, 1) != 0 || eddy_buf_release(b) != 1) {
            t->failures++;
        }
    }
    pthread_mutex_lock(&t->lock);
    t->stage = 1;
    pthread_cond_broadcast(&t->cond);
    while (t->stage != 2) {
        pthread_cond_wait(&t->cond, &t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static void test_free_empties_the_caches_of_other_threads(void **state)
{
    int64_t live = eddy_buf_live_count();
    idle_thread_t t = {.a = eddy_pooled_allocator_new(NULL)};
    assert_non_null(t.a);
    pthread_mutex_init(&t.lock, NULL);
    pthread_cond_init(&t.cond, NULL);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, cache_then_idle, &t), 0);

    pthread_mutex_lock(&t.lock);
    while (t.stage != 1) {
        pthread_cond_wait(&t.cond, &t.lock);
    }
    pthread_mutex_unlock(&t.lock);
    eddy_allocator_metrics_t m = metrics_of(t.a);
    assert_int_equal(m.used, 0);
    assert_true(m.caches >= 1);
    assert_true(caches_of(t.a).caches >= 1);

    /* The other thread still holds a cache for the pool; freeing empties it. */
    assert_int_equal(eddy_allocator_free(t.a), 0);

    pthread_mutex_lock(&t.lock);
    t.stage = 2;
    pthread_cond_broadcast(&t.cond);
    pthread_mutex_unlock(&t.lock);
    /* Its exit must not touch the freed pool (ASan would say so). */
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(t.failures, 0);
    pthread_cond_destroy(&t.cond);
    pthread_mutex_destroy(&t.lock);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* The test under each kind of allocator. */
#define ON_ALLOCATOR(f, tag, setup, teardown)                                                      \
    {                                                                                              \
        .name = #f "[" tag "]", .test_func = f, .setup_func = setup, .teardown_func = teardown     \
    }
#define WITH_EACH_ALLOCATOR(f)                                                                     \
    ON_ALLOCATOR(f, "default", use_default, NULL),                                                 \
        ON_ALLOCATOR(f, "unpooled", use_unpooled, NULL),                                           \
        ON_ALLOCATOR(f, "pooled", use_pool, free_pool),                                            \
        ON_ALLOCATOR(f, "pooled,64k", use_small_chunk_pool, free_pool),                            \
        ON_ALLOCATOR(f, "pooled,no_cache", use_uncached_pool, free_pool)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocator_names_tell_the_kinds_apart),
        cmocka_unit_test(test_process_wide_allocators_cannot_be_freed),
        WITH_EACH_ALLOCATOR(test_sizes_from_one_byte_to_three_mib_are_writable_to_capacity),
        cmocka_unit_test(test_metrics_follow_buffers_and_trim_gives_memory_back),
        cmocka_unit_test(test_requests_above_half_a_chunk_are_unpooled),
        cmocka_unit_test(test_allocator_free_is_busy_while_a_buffer_lives),
        cmocka_unit_test(test_allocator_free_is_busy_while_an_empty_buffer_lives),
        cmocka_unit_test(test_pool_options_are_validated),
        cmocka_unit_test(test_no_cache_returns_memory_to_the_arena_at_once),
        cmocka_unit_test(test_foreach_cache_reports_the_calling_thread_cache),
        cmocka_unit_test(test_memory_is_reused_across_alloc_and_release),
        cmocka_unit_test(test_unpooled_allocator_metrics_follow_live_buffers),
        cmocka_unit_test(test_free_empties_the_caches_of_other_threads),
    };
    return cmocka_run_group_tests_name("buffer.pool", tests, make_pattern, free_pattern);
}
