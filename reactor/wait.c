/*
 * The seven wait strategies of the Disruptor: how a consumer waits in its barrier for the
 * sequence it needs, and what a producer does after publishing so that sleeping consumers
 * wake. Each is a const ops table plus a little state; the trade-offs are in ring.h.
 *
 * Every strategy waits until seq can be read through the barrier (eddy__barrier_probe: the
 * slowest upstream consumer has passed it, or with none, it is published), and checks the
 * barrier's alert on each round, so a halt never waits for an event that does not come.
 *
 * No strategy spins without end on one sequence: its producer may have been preempted
 * between claiming and publishing it, and when threads outnumber cores the spinning waiter
 * may be what keeps that producer off the CPU. Busy spin yields once in a long while,
 * yielding after a short spin, and the blocking strategies spin a little, then sleep.
 */
#include "reactor/internal.h"

#include <assert.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#if defined(__linux__) && !defined(EDDY_RING_NO_FUTEX)
#define USE_FUTEX 1
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#if !defined(EDDY_RING_NO_MEMBARRIER) && defined(SYS_membarrier)
#define USE_MEMBARRIER 1
#include <linux/membarrier.h>
#endif
#endif

/* Spins before the yielding strategy starts yielding (Java YieldingWaitStrategy.SPIN_TRIES). */
#define YIELD_SPINS 100
/*
 * Spins between the busy-spin strategy's yields: about 100 us (a pause is 20-25 ns on the
 * EPYC of bench/RESULTS.md, 40-50 ns on Skylake-era Xeons), long past any producer that is
 * running, short beside a scheduler's time slice, so a producer preempted on a shared core
 * gets it back.
 */
#define BUSY_SPINS_PER_YIELD 4096
/*
 * Spins before a blocking strategy sleeps: about 6 us on that EPYC, the cost of two system
 * calls there (2.5 us each, bench/RESULTS.md machine costs), and far less than a futex
 * sleep and wake-up (the wait, the wake and the scheduler's latency in between). A producer
 * that keeps publishing is caught by the spin, and neither side enters the kernel; a lull
 * longer than the spin costs one sleep, as before.
 */
#define BLOCK_SPINS 256
/*
 * A sleeper's first sleep, while publishers skip the fence (see "Blocking" below): short,
 * so that a wake-up lost to a publish racing with it costs at most this much, and long
 * beside a futex wait and wake (about 1 + 1 us of system calls and 8-40 us of hand-off on
 * the EPYC of bench/RESULTS.md), so most lulls end inside it without the heavy barrier.
 */
#define NAP_NS 50000
/* Sleeping defaults (Java SleepingWaitStrategy: DEFAULT_RETRIES, DEFAULT_SLEEP). */
#define SLEEP_RETRIES 200
#define SLEEP_NS 100
/* Spins between clock reads in phased backoff (Java PhasedBackoffWaitStrategy.SPIN_TRIES). */
#define PHASED_SPINS 10000
/*
 * The blocking strategies wait on the cursor by sleeping, but on upstream consumers by
 * spinning (as Java's BlockingWaitStrategy does); after this many spins they yield instead,
 * so a pipeline stage on a shared core lets its upstream run.
 */
#define DEP_SPINS 100

static void ws_free_plain(eddy_wait_strategy_t *ws)
{
    free(ws);
}

static eddy_wait_strategy_t *ws_new(const eddy_wait_strategy_ops_t *ops, size_t size)
{
    eddy_wait_strategy_t *ws = eddy__aligned_zalloc(size);
    if (ws != NULL)
        ws->ops = ops;
    return ws;
}

const char *eddy_wait_strategy_name(const eddy_wait_strategy_t *ws)
{
    return ws->ops->name;
}

void eddy_wait_strategy_free(eddy_wait_strategy_t *ws)
{
    if (ws != NULL && ws->ops->free != NULL)
        ws->ops->free(ws);
}

/* ---------------------------------------------------------------------------------------
 * Busy spin
 */

static int64_t busy_spin_wait(eddy_wait_strategy_t *ws, int64_t seq, eddy_barrier_t *b)
{
    unsigned spins = 0;
    int64_t avail;
    while ((avail = eddy__barrier_probe(b, seq)) < seq) {
        if (eddy__barrier_alerted(b))
            return EDDY_ECANCELED;
        if (++spins % BUSY_SPINS_PER_YIELD == 0)
            sched_yield();
        else
            eddy__cpu_relax();
    }
    return avail;
}

static const eddy_wait_strategy_ops_t busy_spin_ops = {
    .name = "busy_spin",
    .wait_for = busy_spin_wait,
    .signal_all = NULL,
    .free = ws_free_plain,
};

eddy_wait_strategy_t *eddy_wait_strategy_busy_spin(void)
{
    return ws_new(&busy_spin_ops, sizeof(eddy_wait_strategy_t));
}

/* ---------------------------------------------------------------------------------------
 * Yielding
 */

static int64_t yielding_wait(eddy_wait_strategy_t *ws, int64_t seq, eddy_barrier_t *b)
{
    int counter = YIELD_SPINS;
    int64_t avail;
    while ((avail = eddy__barrier_probe(b, seq)) < seq) {
        if (eddy__barrier_alerted(b))
            return EDDY_ECANCELED;
        if (counter == 0) {
            sched_yield();
        } else {
            counter--;
            eddy__cpu_relax();
        }
    }
    return avail;
}

static const eddy_wait_strategy_ops_t yielding_ops = {
    .name = "yielding",
    .wait_for = yielding_wait,
    .signal_all = NULL,
    .free = ws_free_plain,
};

eddy_wait_strategy_t *eddy_wait_strategy_yielding(void)
{
    return ws_new(&yielding_ops, sizeof(eddy_wait_strategy_t));
}

/* ---------------------------------------------------------------------------------------
 * Sleeping
 */

typedef struct {
    eddy_wait_strategy_t super;
    int retries;
    int64_t sleep_ns;
} sleeping_t;

static int64_t sleeping_wait(eddy_wait_strategy_t *ws, int64_t seq, eddy_barrier_t *b)
{
    sleeping_t *sl = (sleeping_t *)ws;
    int counter = sl->retries;
    int64_t avail;
    while ((avail = eddy__barrier_probe(b, seq)) < seq) {
        if (eddy__barrier_alerted(b))
            return EDDY_ECANCELED;
        if (counter > 100) {
            counter--;
            eddy__cpu_relax();
        } else if (counter > 0) {
            counter--;
            sched_yield();
        } else {
            struct timespec ts = {.tv_sec = (time_t)(sl->sleep_ns / 1000000000),
                                  .tv_nsec = (long)(sl->sleep_ns % 1000000000)};
            nanosleep(&ts, NULL);
        }
    }
    return avail;
}

static const eddy_wait_strategy_ops_t sleeping_ops = {
    .name = "sleeping",
    .wait_for = sleeping_wait,
    .signal_all = NULL,
    .free = ws_free_plain,
};

eddy_wait_strategy_t *eddy_wait_strategy_sleeping(int retries, int64_t sleep_ns)
{
    if (retries < 0 || sleep_ns < 0)
        return NULL;
    sleeping_t *sl = (sleeping_t *)ws_new(&sleeping_ops, sizeof *sl);
    if (sl == NULL)
        return NULL;
    sl->retries = retries ? retries : SLEEP_RETRIES;
    sl->sleep_ns = sleep_ns ? sleep_ns : SLEEP_NS;
    return &sl->super;
}

/* ---------------------------------------------------------------------------------------
 * Blocking, lite blocking, timeout blocking
 *
 * A waiter whose sequence is not ready spins a little (BLOCK_SPINS; lite blocking does not),
 * then sleeps until seq is ready through the cursor (eddy__barrier_cursor_ready). On Linux it
 * sleeps on the futex word gen, which a wake bumps first: the waiter reads gen before it
 * checks the cursor, so a publish between the check and the sleep changes gen and the futex
 * wait returns at once. Elsewhere a mutex and condition variable do the same.
 *
 * A publish touches no shared line and makes no system call while nobody sleeps: before each
 * check a sleeper reads gen, then raises need_signal; a publisher that finds it raised
 * clears it (exchange), bumps gen and wakes everyone, so only the first publish after a
 * waiter went to sleep makes the wake system call. The lost wake-up is avoided as in
 * Dekker's algorithm: the waiter stores need_signal, a seq_cst fence, then reads the cursor
 * (or the slot's published lap); the publisher stores the cursor (or the lap), a seq_cst
 * fence, then reads need_signal. One fence comes first, so either the waiter sees the
 * publish or the publisher sees the flag. And whoever clears a flag the waiter raised bumps
 * gen after the waiter read it (the exchange acquires the waiter's release store of the
 * flag, which follows its read of gen), so the waiter's futex wait returns at once or is
 * woken.
 *
 * Java's BlockingWaitStrategy takes a lock and signals a condition on every publish; the
 * first version here bumped gen on every publish to match. Both put a read-modify-write of a
 * line the waiter reads on the publisher's path; the flag makes that cost appear only when
 * someone actually sleeps.
 *
 * The publisher's fence is cheap in itself (6 ns on the EPYC of bench/RESULTS.md), but it
 * waits for the publisher's store to leave its store buffer, which waits for the cache line
 * of the cursor (or the lap) to come back from the consumer polling it: a quarter of a
 * microsecond between that VM's CPUs. It made 1p1c blocking 3x and 2p1c 2x slower than the
 * same code without it. So on Linux the fence moves to the sleeper, which is about to make a
 * system call anyway: publishers order their store and their load of need_signal by the
 * compiler only, and a sleeper runs membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which puts
 * a full barrier into every thread of the process running at that moment (a thread not
 * running has passed one in its context switch): Dekker's fences, one of them made by the
 * kernel on the publisher's behalf (liburcu and folly's asymmetric barriers work the same
 * way). Either that barrier comes after the publisher's store, which the sleeper then sees,
 * or before its load of need_signal, which then sees the flag.
 *
 * membarrier interrupts the other CPUs that run the process's threads (50 us on that VM, 1.3
 * us with no other thread running), so a sleeper does not pay it for every lull: it first
 * naps NAP_NS without it, then checks again. A publish that raced with the nap's flag and
 * missed it is seen at that check, so a lost wake-up costs at most the nap; only a sleep
 * past the nap takes the barrier and then sleeps for as long as it must. Without membarrier
 * (another kernel, or a seccomp filter that refuses it) publishers fence, as before.
 */

typedef struct {
    eddy_wait_strategy_t super;
    /* The futex word and the flag: waiters and publishers both write them, so they sit apart
     * from the read-only fields. */
    alignas(EDDY__LINE) _Atomic uint32_t gen;
    _Atomic uint32_t need_signal;
    alignas(EDDY__LINE) int spins; /* before sleeping */
    bool asym;                     /* publishers skip the fence: sleepers use membarrier */
    int64_t timeout_ns;            /* 0: none */
#ifndef USE_FUTEX
    pthread_mutex_t lock;
    pthread_cond_t cond;
#endif
} blocking_t;

#ifdef USE_FUTEX
/* The kernel reads the word as a plain u32: a lock-free _Atomic uint32_t has that layout. */
static void *futex_addr(_Atomic uint32_t *word)
{
    return (void *)(uintptr_t)word;
}

static void futex_wait(_Atomic uint32_t *word, uint32_t val, int64_t timeout_ns)
{
    struct timespec ts;
    struct timespec *tp = NULL;
    if (timeout_ns > 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000);
        ts.tv_nsec = (long)(timeout_ns % 1000000000);
        tp = &ts;
    }
    /* Returns at once (EAGAIN) if *word is no longer val; EINTR and timeouts just return:
     * the caller re-checks everything. */
    syscall(SYS_futex, futex_addr(word), FUTEX_WAIT_PRIVATE, val, tp, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, futex_addr(word), FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
#endif

#ifdef USE_MEMBARRIER
static pthread_once_t membarrier_once = PTHREAD_ONCE_INIT;
static bool membarrier_ok;

/* Register the process for private expedited barriers, once; remember whether it worked. */
static void membarrier_register(void)
{
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    membarrier_ok = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* Publishers may skip their fence: sleepers can put one into them. */
static bool asymmetric_barriers(void)
{
    pthread_once(&membarrier_once, membarrier_register);
    return membarrier_ok;
}

/* A full barrier in every running thread of the process (see "Blocking" above). */
static bool heavy_barrier(void)
{
    return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}
#else
static bool asymmetric_barriers(void)
{
    return false;
}

static bool heavy_barrier(void)
{
    return false;
}
#endif

/* Sleep until seq is ready through the cursor: 0, EDDY_ECANCELED or EDDY_ETIMEDOUT. */
static int blocking_sleep(blocking_t *bl, int64_t seq, eddy_barrier_t *b)
{
    int64_t deadline = 0;
    if (bl->timeout_ns) {
        /* Saturated: a timeout past the clock's range must not wrap into the past. */
        int64_t now = eddy__now_ns();
        deadline = bl->timeout_ns < INT64_MAX - now ? now + bl->timeout_ns : INT64_MAX;
    }
    /* With asymmetric barriers the first sleep is a nap, without the heavy barrier. */
    bool napping = bl->asym;
    int rc = 0;
#ifndef USE_FUTEX
    pthread_mutex_lock(&bl->lock);
#endif
    for (;;) {
#ifdef USE_FUTEX
        /* Pairs with the release increment in the publishers' wake: seeing a new gen means
         * seeing the publish made before it. Read before the flag is raised (see above). */
        uint32_t gen = atomic_load_explicit(&bl->gen, memory_order_acquire);
#endif
        /* Pairs with the acquire exchange in the publishers' wake. */
        atomic_store_explicit(&bl->need_signal, 1, memory_order_release);
        /* Dekker with the publishers' fence, or with the one heavy_barrier() puts into them
         * (see above). Our own fence orders our flag before our check either way. */
        eddy__fence_seq_cst();
        if (bl->asym && !napping && !heavy_barrier())
            napping = true; /* it failed after all: keep to naps, each ends in a check */
        if (eddy__barrier_cursor_ready(b, seq))
            break;
        if (eddy__barrier_alerted(b)) {
            rc = EDDY_ECANCELED;
            break;
        }
        int64_t left = 0;
        if (deadline) {
            left = deadline - eddy__now_ns();
            if (left <= 0) {
                rc = EDDY_ETIMEDOUT;
                break;
            }
        }
        if (napping && (left == 0 || left > NAP_NS))
            left = NAP_NS;
#ifdef USE_FUTEX
        futex_wait(&bl->gen, gen, left);
        /* A nap that ended by a wake-up or by its time: either way the next round checks. */
        napping = false;
#else
        if (deadline) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t t = ts.tv_nsec + left;
            ts.tv_sec += (time_t)(t / 1000000000);
            ts.tv_nsec = (long)(t % 1000000000);
            pthread_cond_timedwait(&bl->cond, &bl->lock, &ts);
        } else {
            pthread_cond_wait(&bl->cond, &bl->lock);
        }
#endif
    }
#ifndef USE_FUTEX
    pthread_mutex_unlock(&bl->lock);
#endif
    return rc;
}

static int64_t blocking_wait(eddy_wait_strategy_t *ws, int64_t seq, eddy_barrier_t *b)
{
    blocking_t *bl = (blocking_t *)ws;
    if (!eddy__barrier_cursor_ready(b, seq)) {
        int spins = bl->spins;
        while (spins > 0 && !eddy__barrier_cursor_ready(b, seq)) {
            if (eddy__barrier_alerted(b))
                return EDDY_ECANCELED;
            spins--;
            eddy__cpu_relax();
        }
        if (spins == 0) {
            int rc = blocking_sleep(bl, seq, b);
            if (rc != 0)
                return rc;
        }
    }
    /* Upstream consumers are waited for by spinning, then yielding, as Java does: they never
     * signal. The cursor is ready, so without them this returns at once. */
    int dep_spins = 0;
    int64_t avail;
    while ((avail = eddy__barrier_dependent(b)) < seq) {
        if (eddy__barrier_alerted(b))
            return EDDY_ECANCELED;
        if (dep_spins < DEP_SPINS) {
            dep_spins++;
            eddy__cpu_relax();
        } else {
            sched_yield();
        }
    }
    return avail;
}

/* A publisher's wake-up, once its publish is ordered before its load of the flag. */
static inline void blocking_wake(blocking_t *bl)
{
    if (atomic_load_explicit(&bl->need_signal, memory_order_relaxed) == 0 ||
        atomic_exchange_explicit(&bl->need_signal, 0, memory_order_acquire) == 0)
        return;
#ifdef USE_FUTEX
    /* After the exchange, so the bump follows the waiter's read of gen (see above); pairs
     * with the acquire load of gen in blocking_sleep(). */
    atomic_fetch_add_explicit(&bl->gen, 1, memory_order_release);
    futex_wake_all(&bl->gen);
#else
    pthread_mutex_lock(&bl->lock);
    pthread_cond_broadcast(&bl->cond);
    pthread_mutex_unlock(&bl->lock);
#endif
}

static void blocking_signal(eddy_wait_strategy_t *ws)
{
    /* Dekker with the fence in blocking_sleep(): our cursor or lap store (or alert) before
     * the load of need_signal. */
    eddy__fence_seq_cst();
    blocking_wake((blocking_t *)ws);
}

static void blocking_signal_light(eddy_wait_strategy_t *ws)
{
    /* Program order only: a sleeper's heavy_barrier() orders our store before our load. */
    atomic_signal_fence(memory_order_seq_cst);
    blocking_wake((blocking_t *)ws);
}

static void blocking_free(eddy_wait_strategy_t *ws)
{
#ifndef USE_FUTEX
    blocking_t *bl = (blocking_t *)ws;
    pthread_mutex_destroy(&bl->lock);
    pthread_cond_destroy(&bl->cond);
#endif
    free(ws);
}

/* A blocking strategy's ops under its name: [0] when publishers fence; [1] when they do not,
 * and sleepers use the heavy barrier. */
#define BLOCKING_OPS(kind)                                                                     \
    {                                                                                          \
        {.name = kind,                                                                         \
         .wait_for = blocking_wait,                                                            \
         .signal_all = blocking_signal,                                                        \
         .free = blocking_free},                                                               \
        {.name = kind,                                                                         \
         .wait_for = blocking_wait,                                                            \
         .signal_all = blocking_signal_light,                                                  \
         .free = blocking_free},                                                               \
    }

static const eddy_wait_strategy_ops_t blocking_ops[2] = BLOCKING_OPS("blocking");
static const eddy_wait_strategy_ops_t lite_blocking_ops[2] = BLOCKING_OPS("lite_blocking");
static const eddy_wait_strategy_ops_t timeout_blocking_ops[2] = BLOCKING_OPS("timeout_blocking");

static eddy_wait_strategy_t *blocking_new(const eddy_wait_strategy_ops_t ops[2], int spins,
                                          int64_t timeout_ns)
{
    assert(spins >= 0 && timeout_ns >= 0);
    bool asym = asymmetric_barriers();
    blocking_t *bl = (blocking_t *)ws_new(&ops[asym], sizeof *bl);
    if (bl == NULL)
        return NULL;
    atomic_init(&bl->gen, 0);
    atomic_init(&bl->need_signal, 0);
    bl->spins = spins;
    bl->asym = asym;
    bl->timeout_ns = timeout_ns;
#ifndef USE_FUTEX
    if (pthread_mutex_init(&bl->lock, NULL) != 0) {
        free(bl);
        return NULL;
    }
    if (pthread_cond_init(&bl->cond, NULL) != 0) {
        pthread_mutex_destroy(&bl->lock);
        free(bl);
        return NULL;
    }
#endif
    return &bl->super;
}

eddy_wait_strategy_t *eddy_wait_strategy_blocking(void)
{
    return blocking_new(blocking_ops, BLOCK_SPINS, 0);
}

eddy_wait_strategy_t *eddy_wait_strategy_lite_blocking(void)
{
    return blocking_new(lite_blocking_ops, 0, 0);
}

eddy_wait_strategy_t *eddy_wait_strategy_timeout_blocking(int64_t timeout_ns)
{
    if (timeout_ns <= 0)
        return NULL;
    return blocking_new(timeout_blocking_ops, BLOCK_SPINS, timeout_ns);
}

/* ---------------------------------------------------------------------------------------
 * Phased backoff
 */

typedef struct {
    eddy_wait_strategy_t super;
    int64_t spin_ns;
    int64_t yield_ns;
    eddy_wait_strategy_t *fallback;
} phased_t;

static int64_t phased_wait(eddy_wait_strategy_t *ws, int64_t seq, eddy_barrier_t *b)
{
    phased_t *ph = (phased_t *)ws;
    int64_t start = 0;
    int counter = PHASED_SPINS;
    for (;;) {
        int64_t avail = eddy__barrier_probe(b, seq);
        if (avail >= seq)
            return avail;
        if (eddy__barrier_alerted(b))
            return EDDY_ECANCELED;
        if (--counter == 0) {
            if (start == 0) {
                start = eddy__now_ns();
            } else {
                int64_t delta = eddy__now_ns() - start;
                if (delta > ph->yield_ns)
                    return ph->fallback->ops->wait_for(ph->fallback, seq, b);
                if (delta > ph->spin_ns)
                    sched_yield();
            }
            counter = PHASED_SPINS;
        } else {
            eddy__cpu_relax();
        }
    }
}

static void phased_signal(eddy_wait_strategy_t *ws)
{
    phased_t *ph = (phased_t *)ws;
    if (ph->fallback->ops->signal_all != NULL)
        ph->fallback->ops->signal_all(ph->fallback);
}

static void phased_free(eddy_wait_strategy_t *ws)
{
    phased_t *ph = (phased_t *)ws;
    eddy_wait_strategy_free(ph->fallback);
    free(ph);
}

static const eddy_wait_strategy_ops_t phased_ops = {
    .name = "phased_backoff",
    .wait_for = phased_wait,
    .signal_all = phased_signal,
    .free = phased_free,
};

/* Over a fallback that never sleeps (busy spin, yielding, sleeping) there is nobody to wake,
 * and publishers skip the call altogether when signal_all is NULL. */
static const eddy_wait_strategy_ops_t phased_quiet_ops = {
    .name = "phased_backoff",
    .wait_for = phased_wait,
    .signal_all = NULL,
    .free = phased_free,
};

eddy_wait_strategy_t *eddy_wait_strategy_phased_backoff(int64_t spin_ns, int64_t yield_ns,
                                                        eddy_wait_strategy_t *fallback)
{
    if (fallback == NULL)
        return NULL;
    if (spin_ns < 0 || spin_ns > yield_ns) {
        eddy_wait_strategy_free(fallback);
        return NULL;
    }
    const eddy_wait_strategy_ops_t *ops =
        fallback->ops->signal_all != NULL ? &phased_ops : &phased_quiet_ops;
    phased_t *ph = (phased_t *)ws_new(ops, sizeof *ph);
    if (ph == NULL) {
        eddy_wait_strategy_free(fallback);
        return NULL;
    }
    ph->spin_ns = spin_ns;
    ph->yield_ns = yield_ns;
    ph->fallback = fallback;
    return &ph->super;
}
