/*
 * bench_buffer: allocate, write and release buffers with a network-like mix of sizes, eddy's
 * pooled allocator against glibc malloc and jemalloc, alternating in the same run
 * (docs/style.md, "Benchmarks").
 *
 * The size mix is a fixed table of 65536 sizes drawn once with a seeded xorshift64*, so every
 * subject and every run sees the same sequence:
 *
 *     50%  64 B    - 511 B     (requests, acks, small frames)
 *     30%  512 B   - 4095 B    (typical messages, one MTU-ish read)
 *     15%  4 KiB   - 16383 B   (socket reads, TLS records)
 *      5%  16 KiB  - 64 KiB    (bulk transfers, aggregated writes)
 *
 * uniform within each band. One operation allocates a buffer of size s, writes into it and
 * releases it. The write is the same for every subject, a codec writing a header and a payload
 * pointer: a u32 length and a u64 id (big endian), then payload bytes up to min(s, 256) and the
 * last byte. Case mixed_1t_fill instead writes all s bytes (memset after the header), so the
 * cost of touching the memory shows. Buffers go into a ring of 16 slots; each allocation first
 * releases the buffer that was in its slot, so 16 buffers are live at once, the same for all.
 *
 * Cases:
 *   mixed_1t       one thread allocates, writes and releases.
 *   mixed_1t_fill  the same with the whole buffer written.
 *   mixed_xthread  a producer thread allocates and writes, hands the pointers through a
 *                  single-producer single-consumer ring of 256 slots to a consumer thread
 *                  on another CPU, which releases them (a loop thread releasing what another
 *                  thread wrote).
 *
 * Subjects: eddy (eddy_buf_alloc from a pooled allocator, eddy_buf_write_*, eddy_buf_release),
 * glibc_malloc (__libc_malloc/__libc_free, glibc's own entry points, so glibc is what is
 * measured whatever else is loaded), jemalloc (libjemalloc.so.2 opened with dlopen and
 * RTLD_LOCAL, its malloc/free taken from the handle, so it does not replace the process's
 * malloc). The baselines write the same bytes into the raw block.
 *
 * Memory: eddy_allocator_metrics() is sampled, untimed, with 16 buffers live after each eddy
 * round of mixed_1t (held, used, cached; held/used is what the issue wants bounded), and once
 * after mixed_xthread.
 *
 * Options: --ops N (operations per round, k/m suffixes), --rounds N (measured rounds, after
 * one warm-up round), --case NAME (run one case), --allocator pooled|default|unpooled (what
 * eddy allocates from), --subject NAME (run one subject, to profile it), --glibc-cold (see
 * glibc_settle()), --no-pin (do not pin threads). The main thread (and producer) runs on the
 * first CPU the process may use, the consumer on the second.
 */
#include <eddy/buffer.h>

#include <dlfcn.h>
#include <endian.h>
#include <gnu/libc-version.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/bench_util.h"

/* glibc's own allocator entry points, exported by libc.so.6 beside malloc and free. */
extern void *__libc_malloc(size_t size);
extern void __libc_free(void *ptr);

#define SIZES_N 65536u /* a power of two: the table is indexed with i & (SIZES_N - 1) */
#define SIZES_SEED 0x9e3779b97f4a7c15ull
#define LIVE_N 16u      /* buffers live at once in the single-thread cases */
#define XRING_N 256u    /* slots of the producer-consumer ring; a power of two */
#define XBATCH 32u      /* ring indexes are published every XBATCH items (a divisor of XRING_N) */
#define HEAD_BYTES 256u /* bytes written at the front in the header-and-pointer write */
#define HDR_BYTES 12u   /* u32 length + u64 id */
#define MAX_ROUNDS 101
_Static_assert(MAX_ROUNDS <= BENCH_MAX_ROUNDS, "bench_stats sorts at most BENCH_MAX_ROUNDS");
#define DEFAULT_ROUNDS 5
#define FILL_BYTE 0xa5

#define ALWAYS_INLINE inline __attribute__((always_inline))

enum { SUBJ_EDDY, SUBJ_GLIBC, SUBJ_JEMALLOC, SUBJ_N };
enum { CASE_1T, CASE_1T_FILL, CASE_XTHREAD, CASE_N };

static const char *const case_names[CASE_N] = {"mixed_1t", "mixed_1t_fill", "mixed_xthread"};

/*
 * Default operations per round, per case: on a quiet 2-core EPYC VM these make each eddy round
 * take 0.1-1.2 s and the whole run (1 warm-up + 5 rounds) about 30 s; twice that when another
 * process competes for the CPUs.
 */
static const uint64_t default_ops[CASE_N] = {8000000, 2000000, 2000000};

typedef struct subject_s {
    const char *name;
    int kind;
    bool available;
    char skip_reason[256];
    void *(*malloc_fn)(size_t size);
    void (*free_fn)(void *ptr);
} subject_t;

/* eddy_allocator_metrics() figures over the samples taken in a case. */
typedef struct memory_stats_s {
    uint64_t n;
    size_t held, used, cached; /* the last sample */
    size_t held_max, used_max, cached_max;
    double used_sum, live_sum; /* live: requested bytes of the live buffers */
} memory_stats_t;

static subject_t subjects[SUBJ_N] = {
    {.name = "eddy", .kind = SUBJ_EDDY},
    {.name = "glibc_malloc", .kind = SUBJ_GLIBC},
    {.name = "jemalloc", .kind = SUBJ_JEMALLOC},
};

static uint32_t sizes[SIZES_N];
static uint8_t payload[HEAD_BYTES];
static eddy_allocator_t *eddy_alloc;
static const char *eddy_alloc_kind = "pooled";
static char jemalloc_version[96] = "?";
static bool jemalloc_reexec;
static bool glibc_cold;
static int cpu_main = -1;
static int cpu_consumer = -1;

/* ---------------------------------------------------------------------------------------
 * Setup: the size table, jemalloc, CPUs
 */

static void sizes_init(void)
{
    /* Bands: lower bound, upper bound (inclusive), cumulative percent. */
    static const struct {
        uint32_t lo, hi, cum;
    } bands[] = {
        {64, 511, 50},
        {512, 4095, 80},
        {4096, 16383, 95},
        {16384, 65536, 100},
    };
    uint64_t st = SIZES_SEED;
    for (size_t i = 0; i < SIZES_N; i++) {
        uint32_t pct = (uint32_t)(bench_xorshift64s(&st) % 100);
        size_t band = 0;
        while (pct >= bands[band].cum)
            band++;
        uint32_t span = bands[band].hi - bands[band].lo + 1;
        sizes[i] = bands[band].lo + (uint32_t)(bench_xorshift64s(&st) % span);
    }
    for (size_t i = 0; i < HEAD_BYTES; i++)
        payload[i] = (uint8_t)(i * 31u + 7u);
}

static void sizes_describe(void)
{
    size_t band[4] = {0};
    uint64_t total = 0;
    for (size_t i = 0; i < SIZES_N; i++) {
        uint32_t s = sizes[i];
        band[s < 512 ? 0 : s < 4096 ? 1 : s < 16384 ? 2 : 3]++;
        total += s;
    }
    printf("size mix: %u precomputed sizes (xorshift64*, seed 0x%llx), uniform within bands:\n",
           SIZES_N, (unsigned long long)SIZES_SEED);
    printf("  64-511 B %.1f%%, 512 B-4 KiB %.1f%%, 4-16 KiB %.1f%%, 16-64 KiB %.1f%%; "
           "mean %.0f B\n",
           100.0 * (double)band[0] / SIZES_N, 100.0 * (double)band[1] / SIZES_N,
           100.0 * (double)band[2] / SIZES_N, 100.0 * (double)band[3] / SIZES_N,
           (double)total / SIZES_N);
}

/* dlsym's void * into a function pointer without the object-to-function cast ISO C lacks. */
static void sym_load(void *handle, const char *name, void *fnptr, size_t fnsize)
{
    void *sym = dlsym(handle, name);
    memcpy(fnptr, &sym, fnsize);
}

/*
 * Debian's libjemalloc.so.2 uses initial-exec TLS, which dlopen() can only place in the
 * static TLS surplus; glibc's default surplus is too small ("cannot allocate memory in static
 * TLS block"). glibc 2.32+ takes a larger one from the tunable glibc.rtld.optional_static_tls,
 * read at startup only, so the benchmark re-executes itself once with it set. This changes
 * nothing for glibc malloc or eddy but the size of a reservation for TLS.
 */
static void jemalloc_load(char **argv)
{
    subject_t *je = &subjects[SUBJ_JEMALLOC];
    void *h = dlopen("libjemalloc.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *err = dlerror();
        if (err != NULL && strstr(err, "static TLS") != NULL &&
            getenv("EDDY_BENCH_TLS_REEXEC") == NULL) {
            const char *old = getenv("GLIBC_TUNABLES");
            char val[512];
            snprintf(val, sizeof val, "%s%sglibc.rtld.optional_static_tls=16384",
                     old != NULL ? old : "", old != NULL && old[0] != '\0' ? ":" : "");
            setenv("GLIBC_TUNABLES", val, 1);
            setenv("EDDY_BENCH_TLS_REEXEC", "1", 1);
            /* The resolved path, not /proc/self/exe, so ps and perf show the program's name. */
            char self[4096];
            ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
            if (n > 0) {
                self[n] = '\0';
                fflush(NULL);
                execv(self, argv);
            }
            /* On failure, fall through and skip jemalloc. */
        }
        snprintf(je->skip_reason, sizeof je->skip_reason, "dlopen(libjemalloc.so.2): %s",
                 err != NULL ? err : "unknown error");
        return;
    }
    jemalloc_reexec = getenv("EDDY_BENCH_TLS_REEXEC") != NULL;

    void *(*real_malloc)(size_t) = NULL;
    sym_load(RTLD_DEFAULT, "malloc", &real_malloc, sizeof real_malloc);
    sym_load(h, "malloc", &je->malloc_fn, sizeof je->malloc_fn);
    sym_load(h, "free", &je->free_fn, sizeof je->free_fn);
    int (*mallctl)(const char *, void *, size_t *, void *, size_t) = NULL;
    sym_load(h, "mallctl", &mallctl, sizeof mallctl);
    if (je->malloc_fn == NULL || je->free_fn == NULL || mallctl == NULL ||
        je->malloc_fn == real_malloc) {
        snprintf(je->skip_reason, sizeof je->skip_reason,
                 "libjemalloc.so.2 loaded but its malloc/free/mallctl were not found apart "
                 "from the process's");
        return;
    }
    const char *ver = NULL;
    size_t len = sizeof ver;
    if (mallctl("version", &ver, &len, NULL, 0) == 0 && ver != NULL)
        snprintf(jemalloc_version, sizeof jemalloc_version, "%s", ver);
    je->available = true;
}

/*
 * glibc adapts its mmap and trim thresholds the first time the process frees an mmapped block
 * (mmap threshold = that block's size, trim threshold = twice that). Until then it trims the
 * top of its heap with brk() whenever 128 KiB there are free, which with 16 live buffers of up
 * to 64 KiB happens every few dozen operations and makes glibc several times slower. Any
 * process that has freed a large block (eddy's pool frees its 4 MiB chunks with free()) is
 * past that, and when the bump happened mid-run the glibc figures depended on what ran before
 * them. So settle glibc first, the way such a free would: both thresholds then stay put.
 * --glibc-cold skips this to show the cold behaviour.
 */
static void glibc_settle(void)
{
    void *p = __libc_malloc((size_t)4 << 20);
    __libc_free(p);
}

/* ---------------------------------------------------------------------------------------
 * One operation, per subject. kind and fill are constants at every call site, so each loop
 * below is compiled once per subject with no dispatch inside.
 */

static _Noreturn void die_alloc(const subject_t *sub, uint32_t s)
{
    fprintf(stderr, "bench_buffer: %s: allocating %u bytes failed\n", sub->name, s);
    exit(1);
}

static ALWAYS_INLINE void *obj_make(int kind, const subject_t *sub, uint32_t s, uint64_t id,
                                    bool fill, int *rc)
{
    if (kind == SUBJ_EDDY) {
        eddy_buf_t *b = eddy_buf_alloc(eddy_alloc, s, s);
        if (b == NULL)
            die_alloc(sub, s);
        *rc |= eddy_buf_write_u32(b, s);
        *rc |= eddy_buf_write_u64(b, id);
        if (fill) {
            size_t n = s - HDR_BYTES;
            memset(eddy_buf_write_ptr(b), FILL_BYTE, n);
            *rc |= eddy_buf_produce(b, n);
        } else {
            size_t head = s < HEAD_BYTES ? s : HEAD_BYTES;
            *rc |= eddy_buf_write_bytes(b, payload, head - HDR_BYTES);
            if (s > head) {
                size_t rest = s - head;
                eddy_buf_write_ptr(b)[rest - 1] = (uint8_t)id;
                *rc |= eddy_buf_produce(b, rest);
            }
        }
        return b;
    }
    uint8_t *p = kind == SUBJ_GLIBC ? __libc_malloc(s) : sub->malloc_fn(s);
    if (p == NULL)
        die_alloc(sub, s);
    uint32_t len_be = htobe32(s);
    uint64_t id_be = htobe64(id);
    memcpy(p, &len_be, sizeof len_be);
    memcpy(p + 4, &id_be, sizeof id_be);
    if (fill) {
        memset(p + HDR_BYTES, FILL_BYTE, s - HDR_BYTES);
    } else {
        size_t head = s < HEAD_BYTES ? s : HEAD_BYTES;
        memcpy(p + HDR_BYTES, payload, head - HDR_BYTES);
        if (s > head)
            p[s - 1] = (uint8_t)id;
    }
    return p;
}

static ALWAYS_INLINE void obj_drop(int kind, const subject_t *sub, void *obj, int *rc)
{
    if (kind == SUBJ_EDDY) {
        /* 1: this release freed the buffer, as it must with one reference. */
        *rc |= eddy_buf_release(obj) == 1 ? 0 : 1;
    } else if (kind == SUBJ_GLIBC) {
        __libc_free(obj);
    } else {
        sub->free_fn(obj);
    }
}

/*
 * Check once, untimed, that eddy and a raw block end up with the same bytes for both writes,
 * and that the eddy buffer's readable length is s: the subjects do the same work.
 */
static void writes_check(void)
{
    static const uint32_t probe[] = {64, 255, 256, 257, 4000, 65536};
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        for (int fill = 0; fill < 2; fill++) {
            uint32_t s = probe[i];
            int rc = 0;
            eddy_buf_t *b = fill ? obj_make(SUBJ_EDDY, &subjects[SUBJ_EDDY], s, 77, true, &rc)
                                 : obj_make(SUBJ_EDDY, &subjects[SUBJ_EDDY], s, 77, false, &rc);
            uint8_t *p = fill ? obj_make(SUBJ_GLIBC, &subjects[SUBJ_GLIBC], s, 77, true, &rc)
                              : obj_make(SUBJ_GLIBC, &subjects[SUBJ_GLIBC], s, 77, false, &rc);
            const uint8_t *e = eddy_buf_read_ptr(b);
            size_t head = fill ? s : (s < HEAD_BYTES ? s : HEAD_BYTES);
            if (rc != 0 || eddy_buf_readable(b) != s || memcmp(e, p, head) != 0 ||
                e[s - 1] != p[s - 1]) {
                fprintf(stderr, "bench_buffer: eddy and raw writes differ (size %u, fill %d)\n", s,
                        fill);
                exit(1);
            }
            obj_drop(SUBJ_EDDY, &subjects[SUBJ_EDDY], b, &rc);
            obj_drop(SUBJ_GLIBC, &subjects[SUBJ_GLIBC], p, &rc);
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * Single-thread cases
 */

static void *live[LIVE_N];
static uint64_t live_size[LIVE_N];

static ALWAYS_INLINE double run_1t_impl(int kind, const subject_t *sub, uint64_t ops, bool fill)
{
    int rc = 0;
    memset(live, 0, sizeof live);
    double t0 = bench_now_s();
    for (uint64_t i = 0; i < ops; i++) {
        size_t slot = i & (LIVE_N - 1);
        uint32_t s = sizes[i & (SIZES_N - 1)];
        if (live[slot] != NULL)
            obj_drop(kind, sub, live[slot], &rc);
        live[slot] = obj_make(kind, sub, s, i, fill, &rc);
        live_size[slot] = s;
    }
    double t = bench_now_s() - t0;
    if (rc != 0) {
        fprintf(stderr, "bench_buffer: %s: a write or release failed\n", sub->name);
        exit(1);
    }
    return t;
}

/* Release what the last round left live (outside the timed loop). */
static void live_drain(const subject_t *sub)
{
    int rc = 0;
    for (size_t i = 0; i < LIVE_N; i++) {
        if (live[i] == NULL)
            continue;
        switch (sub->kind) {
        case SUBJ_EDDY:
            obj_drop(SUBJ_EDDY, sub, live[i], &rc);
            break;
        case SUBJ_GLIBC:
            obj_drop(SUBJ_GLIBC, sub, live[i], &rc);
            break;
        default:
            obj_drop(SUBJ_JEMALLOC, sub, live[i], &rc);
            break;
        }
        live[i] = NULL;
    }
}

static double run_1t(const subject_t *sub, uint64_t ops, bool fill)
{
    switch (sub->kind) {
    case SUBJ_EDDY:
        return fill ? run_1t_impl(SUBJ_EDDY, sub, ops, true)
                    : run_1t_impl(SUBJ_EDDY, sub, ops, false);
    case SUBJ_GLIBC:
        return fill ? run_1t_impl(SUBJ_GLIBC, sub, ops, true)
                    : run_1t_impl(SUBJ_GLIBC, sub, ops, false);
    default:
        return fill ? run_1t_impl(SUBJ_JEMALLOC, sub, ops, true)
                    : run_1t_impl(SUBJ_JEMALLOC, sub, ops, false);
    }
}

/* ---------------------------------------------------------------------------------------
 * Cross-thread case: a single-producer single-consumer ring (Lamport's, with each side
 * caching the other's index) and a consumer thread that lives for the whole case.
 */

typedef struct xring_s {
    alignas(128) _Atomic uint64_t tail; /* written by the producer */
    alignas(128) _Atomic uint64_t head; /* written by the consumer */
    alignas(128) void *slot[XRING_N];
} xring_t;

typedef struct xjob_s {
    xring_t ring;
    alignas(128) _Atomic uint64_t posted;   /* job number, bumped by the main thread */
    alignas(128) _Atomic uint64_t finished; /* last job number the consumer completed */
    const subject_t *sub;
    uint64_t count;
    bool quit;
    int rc;
} xjob_t;

/* Spin politely: pause first, then give the CPU away if the wait is long. */
static void spin_wait(unsigned *spins)
{
    if (++*spins < 1024) {
        bench_cpu_relax();
    } else {
        sched_yield();
    }
}

static ALWAYS_INLINE void consume_impl(int kind, xjob_t *job)
{
    xring_t *r = &job->ring;
    const subject_t *sub = job->sub;
    /* Only this thread writes head. */
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t end = head + job->count;
    uint64_t tail = head;
    int rc = 0;
    while (head < end) {
        unsigned spins = 0;
        while (head == tail) {
            /* Pairs with the producer's release store of tail after filling the slot. */
            tail = atomic_load_explicit(&r->tail, memory_order_acquire);
            if (head == tail)
                spin_wait(&spins);
        }
        void *obj = r->slot[head & (XRING_N - 1)];
        head++;
        /*
         * Pairs with the producer's acquire load of head before it reuses the slots. Published
         * every XBATCH items, and at the end, so the index's cache line moves between the
         * CPUs once per batch rather than once per item.
         */
        if ((head & (XBATCH - 1)) == 0 || head == end)
            atomic_store_explicit(&r->head, head, memory_order_release);
        obj_drop(kind, sub, obj, &rc);
    }
    job->rc = rc;
}

static void *consumer_main(void *arg)
{
    xjob_t *job = arg;
    bench_thread_pin(cpu_consumer);
    uint64_t seen = 0;
    for (;;) {
        unsigned spins = 0;
        uint64_t n;
        /* Pairs with the release store in xjob_post(): sub, count and quit are visible. */
        while ((n = atomic_load_explicit(&job->posted, memory_order_acquire)) == seen)
            spin_wait(&spins);
        seen = n;
        if (job->quit)
            break;
        switch (job->sub->kind) {
        case SUBJ_EDDY:
            consume_impl(SUBJ_EDDY, job);
            break;
        case SUBJ_GLIBC:
            consume_impl(SUBJ_GLIBC, job);
            break;
        default:
            consume_impl(SUBJ_JEMALLOC, job);
            break;
        }
        /* Pairs with the acquire load in xjob_wait(): job->rc is visible. */
        atomic_store_explicit(&job->finished, n, memory_order_release);
    }
    return NULL;
}

static uint64_t xjob_post(xjob_t *job, const subject_t *sub, uint64_t count, bool quit)
{
    job->sub = sub;
    job->count = count;
    job->quit = quit;
    job->rc = 0;
    uint64_t n = atomic_load_explicit(&job->posted, memory_order_relaxed) + 1;
    /* Pairs with the consumer's acquire load of posted. */
    atomic_store_explicit(&job->posted, n, memory_order_release);
    return n;
}

static void xjob_wait(xjob_t *job, uint64_t n)
{
    unsigned spins = 0;
    /* Pairs with the consumer's release store of finished. */
    while (atomic_load_explicit(&job->finished, memory_order_acquire) != n)
        spin_wait(&spins);
}

static ALWAYS_INLINE void produce_impl(int kind, xjob_t *job, const subject_t *sub, uint64_t ops)
{
    xring_t *r = &job->ring;
    int rc = 0;
    /* Only this thread writes tail. */
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    for (uint64_t i = 0; i < ops; i++) {
        uint32_t s = sizes[i & (SIZES_N - 1)];
        void *obj = obj_make(kind, sub, s, i, false, &rc);
        unsigned spins = 0;
        while (tail - head == XRING_N) {
            /* Pairs with the consumer's release store of head after taking a slot. */
            head = atomic_load_explicit(&r->head, memory_order_acquire);
            if (tail - head == XRING_N)
                spin_wait(&spins);
        }
        r->slot[tail & (XRING_N - 1)] = obj;
        tail++;
        /* Pairs with the consumer's acquire load of tail; batched like head (above). */
        if ((tail & (XBATCH - 1)) == 0 || i + 1 == ops)
            atomic_store_explicit(&r->tail, tail, memory_order_release);
    }
    if (rc != 0) {
        fprintf(stderr, "bench_buffer: %s: a write failed\n", sub->name);
        exit(1);
    }
}

static double run_xthread(xjob_t *job, const subject_t *sub, uint64_t ops)
{
    double t0 = bench_now_s();
    uint64_t n = xjob_post(job, sub, ops, false);
    switch (sub->kind) {
    case SUBJ_EDDY:
        produce_impl(SUBJ_EDDY, job, sub, ops);
        break;
    case SUBJ_GLIBC:
        produce_impl(SUBJ_GLIBC, job, sub, ops);
        break;
    default:
        produce_impl(SUBJ_JEMALLOC, job, sub, ops);
        break;
    }
    xjob_wait(job, n);
    double t = bench_now_s() - t0;
    if (job->rc != 0) {
        fprintf(stderr, "bench_buffer: %s: a release failed\n", sub->name);
        exit(1);
    }
    return t;
}

/* ---------------------------------------------------------------------------------------
 * Rounds, statistics, reporting
 */

static void memory_sample(memory_stats_t *m, bool live_now)
{
    static eddy_allocator_metrics_t am; /* large (per-arena figures): keep it off the stack */
    eddy_allocator_metrics(eddy_alloc, &am);
    m->n++;
    m->held = am.held;
    m->used = am.used;
    m->cached = am.cached;
    m->held_max = am.held > m->held_max ? am.held : m->held_max;
    m->used_max = am.used > m->used_max ? am.used : m->used_max;
    m->cached_max = am.cached > m->cached_max ? am.cached : m->cached_max;
    m->used_sum += (double)am.used;
    for (size_t i = 0; live_now && i < LIVE_N; i++)
        m->live_sum += live[i] != NULL ? (double)live_size[i] : 0;
}

/*
 * After a timed eddy round of mixed_1t, with its LIVE_N buffers still live, run one more pass
 * over the size table untimed and sample the allocator's figures 32 times on the way: what it
 * holds for what is live, in steady state, at points spread over the whole mix.
 */
static void memory_probe(memory_stats_t *m, uint64_t start)
{
    int rc = 0;
    for (uint64_t i = start; i < start + SIZES_N; i++) {
        size_t slot = i & (LIVE_N - 1);
        uint32_t s = sizes[i & (SIZES_N - 1)];
        if (live[slot] != NULL)
            obj_drop(SUBJ_EDDY, &subjects[SUBJ_EDDY], live[slot], &rc);
        live[slot] = obj_make(SUBJ_EDDY, &subjects[SUBJ_EDDY], s, i, false, &rc);
        live_size[slot] = s;
        if ((i - start) % (SIZES_N / 32) == SIZES_N / 32 - 1)
            memory_sample(m, true);
    }
    if (rc != 0) {
        fprintf(stderr, "bench_buffer: eddy: a write or release failed\n");
        exit(1);
    }
}

static void run_case(int c, uint64_t ops, int rounds)
{
    double samples[SUBJ_N][MAX_ROUNDS];
    memory_stats_t mem = {0};
    xjob_t *job = NULL;
    pthread_t consumer;
    bool xthread = c == CASE_XTHREAD;

    if (xthread) {
        job = aligned_alloc(128, (sizeof *job + 127) & ~(size_t)127);
        if (job == NULL) {
            fprintf(stderr, "bench_buffer: out of memory\n");
            exit(1);
        }
        memset(job, 0, sizeof *job);
        int err = pthread_create(&consumer, NULL, consumer_main, job);
        if (err != 0) {
            fprintf(stderr, "bench_buffer: pthread_create: %s\n", strerror(err));
            exit(1);
        }
    }

    printf("\n%s: %llu ops per round, 1 warm-up + %d rounds%s\n", case_names[c],
           (unsigned long long)ops, rounds,
           xthread ? (cpu_consumer >= 0 ? ", producer and consumer on separate CPUs"
                                        : ", threads not pinned")
                   : "");
    fflush(stdout);

    for (int r = -1; r < rounds; r++) {
        for (int k = 0; k < SUBJ_N; k++) {
            const subject_t *sub = &subjects[k];
            if (!sub->available)
                continue;
            double t;
            if (xthread) {
                t = run_xthread(job, sub, ops);
            } else {
                t = run_1t(sub, ops, c == CASE_1T_FILL);
                if (sub->kind == SUBJ_EDDY && c == CASE_1T && r >= 0)
                    memory_probe(&mem, ops);
                live_drain(sub);
            }
            if (r >= 0)
                samples[k][r] = (double)ops / t;
        }
    }

    if (xthread) {
        xjob_post(job, &subjects[SUBJ_EDDY], 0, true);
        pthread_join(consumer, NULL);
        free(job);
        if (subjects[SUBJ_EDDY].available)
            memory_sample(&mem, false);
    }

    bench_stats_t st[SUBJ_N];
    printf("  %-14s %12s %22s %10s %14s\n", "subject", "median ops/s", "min - max", "ns/op",
           "eddy ratio");
    for (int k = 0; k < SUBJ_N; k++) {
        const subject_t *sub = &subjects[k];
        if (!sub->available) {
            printf("  %-14s skipped: %s\n", sub->name, sub->skip_reason);
            continue;
        }
        st[k] = bench_stats(samples[k], rounds);
        char med[32], lo[32], hi[32], range[80], ratio[32] = "";
        bench_fmt_rate(med, sizeof med, st[k].median);
        bench_fmt_rate(lo, sizeof lo, st[k].min);
        bench_fmt_rate(hi, sizeof hi, st[k].max);
        snprintf(range, sizeof range, "%s - %s", lo, hi);
        if (k != SUBJ_EDDY && subjects[SUBJ_EDDY].available)
            snprintf(ratio, sizeof ratio, "%.2fx", st[SUBJ_EDDY].median / st[k].median);
        printf("  %-14s %12s %22s %10.1f %14s\n", sub->name, med, range, 1e9 / st[k].median, ratio);
    }
    if (c == CASE_1T && subjects[SUBJ_EDDY].available) {
        if (subjects[SUBJ_GLIBC].available)
            printf("  target eddy >= 2x glibc_malloc: %s (%.2fx)\n",
                   st[SUBJ_EDDY].median >= 2 * st[SUBJ_GLIBC].median ? "met" : "NOT met",
                   st[SUBJ_EDDY].median / st[SUBJ_GLIBC].median);
        if (subjects[SUBJ_JEMALLOC].available)
            printf("  target eddy >= 1x jemalloc:     %s (%.2fx)\n",
                   st[SUBJ_EDDY].median >= st[SUBJ_JEMALLOC].median ? "met" : "NOT met",
                   st[SUBJ_EDDY].median / st[SUBJ_JEMALLOC].median);
    }

    if (subjects[SUBJ_EDDY].available) {
        for (int k = 0; k < SUBJ_N; k++) {
            if (k == SUBJ_EDDY || !subjects[k].available)
                continue;
            printf("{\"bench\":\"buffer\",\"case\":\"%s\",\"subject\":\"eddy\",\"baseline\":\"%s\","
                   "\"ops_per_s\":%.0f,\"ops_per_s_min\":%.0f,\"ops_per_s_max\":%.0f,"
                   "\"baseline_ops_per_s\":%.0f,\"baseline_ops_per_s_min\":%.0f,"
                   "\"baseline_ops_per_s_max\":%.0f,\"ratio\":%.3f,\"rounds\":%d,"
                   "\"ops\":%llu,\"allocator\":\"%s\"}\n",
                   case_names[c], subjects[k].name, st[SUBJ_EDDY].median, st[SUBJ_EDDY].min,
                   st[SUBJ_EDDY].max, st[k].median, st[k].min, st[k].max,
                   st[SUBJ_EDDY].median / st[k].median, rounds, (unsigned long long)ops,
                   eddy_alloc_kind);
        }
    }

    if (mem.n > 0 && xthread) {
        printf("  eddy allocator after the case (all released): held %.2f MiB, used %zu B, "
               "cached %.2f MiB\n",
               (double)mem.held / 1048576.0, mem.used, (double)mem.cached / 1048576.0);
        printf("{\"bench\":\"buffer\",\"case\":\"mixed_xthread_memory\",\"subject\":\"eddy\","
               "\"held\":%zu,\"used\":%zu,\"cached\":%zu,\"allocator\":\"%s\"}\n",
               mem.held, mem.used, mem.cached, eddy_alloc_kind);
    } else if (mem.n > 0) {
        double used_mean = mem.used_sum / (double)mem.n;
        double ratio = used_mean > 0 ? (double)mem.held_max / used_mean : 0;
        printf("  eddy allocator, %llu samples with %u buffers live (mean %.0f B requested): "
               "held %.2f MiB (max %.2f MiB), used mean %.0f B (max %zu B), cached max %.2f MiB, "
               "held max / used mean %.1f\n",
               (unsigned long long)mem.n, LIVE_N, mem.live_sum / (double)mem.n,
               (double)mem.held / 1048576.0, (double)mem.held_max / 1048576.0, used_mean,
               mem.used_max, (double)mem.cached_max / 1048576.0, ratio);
        printf("{\"bench\":\"buffer\",\"case\":\"mixed_1t_memory\",\"subject\":\"eddy\","
               "\"held\":%zu,\"held_max\":%zu,\"used_peak_live\":%zu,\"used_mean\":%.0f,"
               "\"cached_max\":%zu,\"live_bytes_mean\":%.0f,\"held_over_used\":%.2f,"
               "\"samples\":%llu,\"allocator\":\"%s\"}\n",
               mem.held, mem.held_max, mem.used_max, used_mean, mem.cached_max,
               mem.live_sum / (double)mem.n, ratio, (unsigned long long)mem.n, eddy_alloc_kind);
    }
    fflush(stdout);
}

/* ---------------------------------------------------------------------------------------
 * main
 */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: bench_buffer [--ops N] [--rounds N] [--case NAME] "
            "[--allocator pooled|default|unpooled] [--subject NAME] [--glibc-cold] "
            "[--no-pin]\n"
            "  --ops N        operations per round, every case (default %llu for mixed_1t, "
            "%llu for mixed_1t_fill and %llu for mixed_xthread; k and m suffixes)\n"
            "  --rounds N     measured rounds after one warm-up round (default %d, max %d)\n"
            "  --case NAME    mixed_1t, mixed_1t_fill or mixed_xthread (default: all)\n"
            "  --allocator A  eddy's allocator: a new pooled one (default), the process "
            "default, or unpooled\n"
            "  --subject NAME run only eddy, glibc_malloc or jemalloc (for profiling; "
            "no ratios)\n"
            "  --glibc-cold   do not settle glibc's mmap/trim thresholds first (see the source)\n"
            "  --no-pin       leave threads where the scheduler puts them\n",
            (unsigned long long)default_ops[CASE_1T], (unsigned long long)default_ops[CASE_1T_FILL],
            (unsigned long long)default_ops[CASE_XTHREAD], DEFAULT_ROUNDS, MAX_ROUNDS);
}

int main(int argc, char **argv)
{
    uint64_t ops = 0; /* 0: default_ops[case] */
    uint64_t rounds = DEFAULT_ROUNDS;
    int only = -1;
    const char *only_subject = NULL;
    bool pin = true;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--ops") == 0 && v != NULL) {
            if (!bench_parse_count(v, &ops)) {
                fprintf(stderr, "bench_buffer: bad --ops %s\n", v);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--rounds") == 0 && v != NULL) {
            if (!bench_parse_count(v, &rounds) || rounds > MAX_ROUNDS) {
                fprintf(stderr, "bench_buffer: bad --rounds %s\n", v);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--case") == 0 && v != NULL) {
            for (int c = 0; c < CASE_N; c++)
                if (strcmp(v, case_names[c]) == 0)
                    only = c;
            if (only < 0) {
                fprintf(stderr, "bench_buffer: unknown case %s\n", v);
                usage(stderr);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--allocator") == 0 && v != NULL) {
            if (strcmp(v, "pooled") != 0 && strcmp(v, "default") != 0 &&
                strcmp(v, "unpooled") != 0) {
                fprintf(stderr, "bench_buffer: unknown allocator %s\n", v);
                return 2;
            }
            eddy_alloc_kind = v;
            i++;
        } else if (strcmp(a, "--subject") == 0 && v != NULL) {
            only_subject = v;
            i++;
        } else if (strcmp(a, "--glibc-cold") == 0) {
            glibc_cold = true;
        } else if (strcmp(a, "--no-pin") == 0) {
            pin = false;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }

    jemalloc_load(argv);
    if (!glibc_cold)
        glibc_settle();
    subjects[SUBJ_EDDY].available = true;
    subjects[SUBJ_GLIBC].available = true;
    if (only_subject != NULL) {
        bool known = false;
        for (int k = 0; k < SUBJ_N; k++) {
            if (strcmp(subjects[k].name, only_subject) == 0) {
                known = true;
            } else {
                subjects[k].available = false;
                snprintf(subjects[k].skip_reason, sizeof subjects[k].skip_reason,
                         "not selected (--subject %s)", only_subject);
            }
        }
        if (!known) {
            fprintf(stderr, "bench_buffer: unknown subject %s\n", only_subject);
            return 2;
        }
    }
    sizes_init();
    bench_cpus_init(pin, &cpu_main, &cpu_consumer);
    bench_thread_pin(cpu_main);

    bool own_alloc = false;
    if (strcmp(eddy_alloc_kind, "pooled") == 0) {
        eddy_alloc = eddy_pooled_allocator_new(NULL);
        own_alloc = true;
    } else if (strcmp(eddy_alloc_kind, "default") == 0) {
        eddy_alloc = eddy_allocator_default();
    } else {
        eddy_alloc = eddy_allocator_unpooled();
    }
    if (eddy_alloc == NULL) {
        fprintf(stderr, "bench_buffer: creating the eddy allocator failed\n");
        return 1;
    }

    writes_check();

    char model[128];
    bench_cpu_model(model, sizeof model);
    printf("bench buffer: allocate, write, release; eddy %s vs glibc malloc vs jemalloc\n",
           eddy_version());
    printf("cpu: %s, %ld online; main/producer on CPU %d, consumer on CPU %d%s\n", model,
           sysconf(_SC_NPROCESSORS_ONLN), cpu_main, cpu_consumer, pin ? "" : " (not pinned)");
    printf("eddy allocator: %s (%s); glibc %s (__libc_malloc); ", eddy_allocator_name(eddy_alloc),
           eddy_alloc_kind, gnu_get_libc_version());
    if (subjects[SUBJ_JEMALLOC].available)
        printf("jemalloc %s (dlopen, RTLD_LOCAL%s)\n", jemalloc_version,
               jemalloc_reexec ? "; re-executed with GLIBC_TUNABLES="
                                 "glibc.rtld.optional_static_tls=16384 for its static TLS"
                               : "");
    else
        printf("jemalloc SKIPPED: %s\n", subjects[SUBJ_JEMALLOC].skip_reason);
    const char *tunables = getenv("GLIBC_TUNABLES");
    printf("glibc: GLIBC_TUNABLES=%s; %s\n", tunables != NULL ? tunables : "",
           glibc_cold ? "thresholds cold (--glibc-cold): heap top trimmed past 128 KiB free"
                      : "mmap/trim thresholds settled first by a malloc+free of 4 MiB");
    sizes_describe();
    printf("write: u32 length + u64 id (big endian), payload to min(s, %u) B and the last byte "
           "(mixed_1t_fill: all s bytes); %u buffers live (ring of slots); cross-thread ring "
           "%u slots, indexes published every %u items\n",
           HEAD_BYTES, LIVE_N, XRING_N, XBATCH);
    printf("ratio = eddy median / baseline median (ops/s); higher favours eddy\n");

    for (int c = 0; c < CASE_N; c++) {
        if (only >= 0 && c != only)
            continue;
        run_case(c, ops != 0 ? ops : default_ops[c], (int)rounds);
    }

    if (own_alloc) {
        int err = eddy_allocator_free(eddy_alloc);
        if (err != 0)
            fprintf(stderr, "bench_buffer: eddy_allocator_free: %s\n", eddy_strerror(err));
    }
    return 0;
}
