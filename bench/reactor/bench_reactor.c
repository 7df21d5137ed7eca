/*
 * bench_reactor: eddy's event loop against a mutex-and-eventfd task queue and libuv,
 * alternating in the same run (docs/style.md, "Benchmarks").
 *
 * Cases:
 *   tasks_1p        one producer thread hands N tasks to one consumer (loop) thread.
 *   tasks_2p        two producers, N/2 tasks each, to one consumer. Three busy threads on two
 *                   CPUs: the producers share the first CPU, the loop keeps the second, as in
 *                   tasks_1p.
 *   tasks_2p_split  the same with producer 1 beside the loop on its CPU: the loop competes
 *                   with a producer for its CPU.
 *   wakeup_latency  the consumer is blocked; another thread stamps the clock and hands it a
 *                   task that records now - stamp. Repeated with a short sleep in between,
 *                   so the consumer blocks again each time. p50 and p99.
 *   timers_schedule_cancel  on the loop's own thread (one task does the whole measurement,
 *                   so no cross-thread cost is measured): schedule N timers at random delays
 *                   of 1-60 s, then cancel them all.
 *   timers_schedule_fire    the same thread schedules N timers at random delays within
 *                   100 ms; timed from the first schedule call until the last one fired.
 *   idle_cpu        an idle loop for a few seconds: CPU time of its thread over that time.
 *
 * Subjects:
 *   eddy            eddy_loop_new + eddy_loop_start; producers call eddy_loop_execute().
 *                   Timers: eddy_loop_schedule (_ns), eddy_timer_cancel, eddy_timer_release.
 *   mutex_eventfd   a consumer thread blocked in epoll_wait on an eventfd. Producers lock a
 *                   mutex, append {fn, arg} to a growable array, unlock, and write the eventfd
 *                   only when the array was empty before the append. The consumer, woken,
 *                   swaps the array for its own empty one under the lock and runs the batch,
 *                   again until it finds the array empty (no allocation in steady state).
 *   libuv_async     a uv_loop on its own thread with a uv_async_t; producers append under a
 *                   mutex as above and call uv_async_send() every time (libuv coalesces the
 *                   sends itself); the async callback drains like the consumer above.
 *   libuv_timer     uv_timer_init + uv_timer_start (+ uv_timer_stop) on uv_timer_t preallocated
 *                   in one array, libuv's natural usage; the timer job runs in the async
 *                   callback, on the loop's thread, like eddy's. libuv_timer_malloc (cancel
 *                   case only) allocates each uv_timer_t with malloc and frees it from its
 *                   uv_close callback, timed until the last one freed, to match eddy, whose
 *                   schedule allocates and whose release frees.
 *
 * Every task increments a counter on the consumer thread and checks that it is the next one
 * from its producer (the argument carries the producer and a sequence number), so every round
 * verifies that every task ran exactly once and in order per producer; the round ends when the
 * consumer has run N tasks (a condition variable tells the main thread). Timers: every round
 * checks each timer fired exactly once (schedule+fire) or that cancel succeeded and none fired
 * (schedule+cancel); before measuring, a short check schedules timers 1-30 ms out, cancels
 * every other one and waits past the last deadline.
 *
 * Besides ops/s, the task cases report the CPU time per task of the producers and of the
 * consumer (CLOCK_THREAD_CPUTIME_ID, read on each thread): unlike wall time it does not grow
 * when other processes take the CPUs, and it shows who pays. schedule+fire reports the loop
 * thread's CPU time per timer too, since its wall time cannot go below the 100 ms spread.
 *
 * Options: --case NAME, --rounds N (measured rounds, after one warm-up round), --ops N (tasks,
 * timers, or latency samples per round; k and m suffixes), --subject NAME (one subject, for
 * profiling), --idle-seconds S, --gap-us N (sleep between wake-up
 * samples), --awake (see spinner_main), --no-pin, --no-costs (skip the machine costs
 * printed first). Threads are pinned: the first CPU the
 * process may use runs the main thread and the producer, the second the consumer.
 */
#include <eddy/common.h>
#include <eddy/loop.h>

#include <uv.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "support/bench_util.h"
#include "support/machine_costs.h"

#define MAX_ROUNDS 101
_Static_assert(MAX_ROUNDS <= BENCH_MAX_ROUNDS, "bench_stats sorts at most BENCH_MAX_ROUNDS");
#define DEFAULT_ROUNDS 5
#define MAX_PRODUCERS 2
#define SEED 0x9e3779b97f4a7c15ull
#define VEC_INITIAL 16384 /* the mutex queues' initial capacity: eddy's default ring size */
#define DEFAULT_GAP_US 50
#define DEFAULT_IDLE_S 5.0
#define TIMER_CHECK_N 100000

#define ALWAYS_INLINE inline __attribute__((always_inline))

enum { SUBJ_EDDY, SUBJ_MUTEX, SUBJ_UV, SUBJ_UV_MALLOC, SUBJ_N };
enum {
    CASE_TASKS_1P,
    CASE_TASKS_2P,
    CASE_TASKS_2P_SPLIT,
    CASE_WAKEUP,
    CASE_TIMERS_CANCEL,
    CASE_TIMERS_FIRE,
    CASE_IDLE,
    CASE_N
};

static const char *const case_names[CASE_N] = {
    "tasks_1p", "tasks_2p", "tasks_2p_split", "wakeup_latency", "timers_schedule_cancel",
    "timers_schedule_fire", "idle_cpu",
};

/* Subject names per case: the task executors, then the timer subjects. */
static const char *const exec_names[SUBJ_N] = {"eddy", "mutex_eventfd", "libuv_async", ""};
static const char *const timer_names[SUBJ_N] = {"eddy", "", "libuv_timer", "libuv_timer_malloc"};

/*
 * Default operations per round, per case. On a quiet 2-core EPYC VM the whole run (one
 * warm-up and five rounds of everything but idle_cpu) takes about two minutes.
 */
static const uint64_t default_ops[CASE_N] = {2000000, 2000000, 2000000, 5000, 1000000, 1000000, 0};

static int cpu_a = -1;    /* main thread, producer */
static bool costs = true; /* measure and print the machine's costs first (--no-costs) */
static int cpu_b = -1;    /* consumer, loop */
static bool layout_shared;
static const char *only_subject;
static double idle_seconds = DEFAULT_IDLE_S;
static long gap_us = DEFAULT_GAP_US;
static bool keep_awake;

/* ---------------------------------------------------------------------------------------
 * Small helpers: thread CPU time, errors, sorting (the shared ones: support/bench_util.h)
 */

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static _Noreturn void die(const char *what, int err)
{
    fprintf(stderr, "bench_reactor: %s: %s\n", what,
            err != 0 ? strerror(err < 0 ? -err : err) : "failed");
    exit(1);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static bool subject_selected(const char *name)
{
    return only_subject == NULL || strcmp(only_subject, name) == 0;
}

/* ---------------------------------------------------------------------------------------
 * Completion: the consumer tells the main thread a round is over.
 */

typedef struct done_s {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    double t_end;
} done_t;

static done_t done = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};

static void done_signal(void)
{
    double t = bench_now_s();
    pthread_mutex_lock(&done.lock);
    done.t_end = t;
    done.done = true;
    pthread_cond_signal(&done.cond);
    pthread_mutex_unlock(&done.lock);
}

/* Wait for done_signal() and return its time stamp. */
static double done_wait(void)
{
    pthread_mutex_lock(&done.lock);
    while (!done.done)
        pthread_cond_wait(&done.cond, &done.lock);
    done.done = false;
    double t = done.t_end;
    pthread_mutex_unlock(&done.lock);
    return t;
}

/* ---------------------------------------------------------------------------------------
 * Executors: a consumer thread that runs tasks handed to it from other threads.
 */

typedef struct task_s {
    eddy_task_cb fn;
    void *arg;
} task_t;

typedef struct taskvec_s {
    task_t *v;
    size_t n, cap;
} taskvec_t;

typedef struct exec_s {
    /* Shared by producers and the consumer: the lock and what it guards, on lines of their
     * own. */
    alignas(128) pthread_mutex_t lock;
    taskvec_t queue;
    /* The consumer's. */
    alignas(128) taskvec_t batch;
    bool quit;
    int kind;
    int cpu;
    eddy_loop_t *loop;
    int efd, epfd;
    pthread_t thread;
    uv_loop_t uvloop;
    uv_async_t async;
} exec_t;

static void vec_init(taskvec_t *q)
{
    q->v = malloc(VEC_INITIAL * sizeof *q->v);
    if (q->v == NULL)
        die("malloc", ENOMEM);
    q->n = 0;
    q->cap = VEC_INITIAL;
}

static ALWAYS_INLINE void vec_push(taskvec_t *q, eddy_task_cb fn, void *arg)
{
    if (q->n == q->cap) {
        task_t *v = realloc(q->v, 2 * q->cap * sizeof *v);
        if (v == NULL)
            die("realloc", ENOMEM);
        q->v = v;
        q->cap *= 2;
    }
    q->v[q->n++] = (task_t){fn, arg};
}

/* Take everything queued, a batch at a time, until the queue is found empty. */
static void exec_drain(exec_t *ex)
{
    for (;;) {
        pthread_mutex_lock(&ex->lock);
        taskvec_t t = ex->queue;
        ex->queue = ex->batch;
        pthread_mutex_unlock(&ex->lock);
        ex->batch = t;
        if (t.n == 0)
            return;
        for (size_t i = 0; i < t.n; i++)
            t.v[i].fn(t.v[i].arg);
        ex->batch.n = 0;
    }
}

static void *mutex_consumer(void *arg)
{
    exec_t *ex = arg;
    bench_thread_pin(ex->cpu);
    pthread_setname_np(pthread_self(), "mx-consumer");
    while (!ex->quit) {
        struct epoll_event ev;
        int n = epoll_wait(ex->epfd, &ev, 1, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait", errno);
        }
        uint64_t v;
        if (read(ex->efd, &v, sizeof v) < 0 && errno != EAGAIN)
            die("read(eventfd)", errno);
        exec_drain(ex);
    }
    return NULL;
}

static void uv_drain_cb(uv_async_t *a)
{
    exec_t *ex = a->data;
    exec_drain(ex);
    if (ex->quit)
        uv_close((uv_handle_t *)a, NULL);
}

static void *uv_consumer(void *arg)
{
    exec_t *ex = arg;
    bench_thread_pin(ex->cpu);
    pthread_setname_np(pthread_self(), "uv-loop");
    uv_run(&ex->uvloop, UV_RUN_DEFAULT);
    return NULL;
}

static exec_t *exec_new(int kind, int cpu, int64_t stall_threshold_ns)
{
    exec_t *ex = aligned_alloc(128, (sizeof *ex + 127) & ~(size_t)127);
    if (ex == NULL)
        die("aligned_alloc", ENOMEM);
    memset(ex, 0, sizeof *ex);
    ex->kind = kind;
    ex->cpu = cpu;
    ex->efd = ex->epfd = -1;
    if (kind == SUBJ_EDDY) {
        eddy_loop_options_t o = {
            .name = "eddy-loop",
            .cpu = cpu,
            .cpu_set = cpu >= 0,
            .stall_threshold_ns = stall_threshold_ns,
        };
        ex->loop = eddy_loop_new(&o);
        if (ex->loop == NULL)
            die("eddy_loop_new", 0);
        int err = eddy_loop_start(ex->loop);
        if (err != 0)
            die("eddy_loop_start", err);
        return ex;
    }
    pthread_mutex_init(&ex->lock, NULL);
    vec_init(&ex->queue);
    vec_init(&ex->batch);
    int err;
    if (kind == SUBJ_MUTEX) {
        ex->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        ex->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (ex->efd < 0 || ex->epfd < 0)
            die("eventfd/epoll_create1", errno);
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = ex->efd};
        if (epoll_ctl(ex->epfd, EPOLL_CTL_ADD, ex->efd, &ev) != 0)
            die("epoll_ctl", errno);
        err = pthread_create(&ex->thread, NULL, mutex_consumer, ex);
    } else {
        if ((err = uv_loop_init(&ex->uvloop)) != 0 ||
            (err = uv_async_init(&ex->uvloop, &ex->async, uv_drain_cb)) != 0)
            die("uv_loop_init/uv_async_init", err);
        ex->async.data = ex;
        err = pthread_create(&ex->thread, NULL, uv_consumer, ex);
    }
    if (err != 0)
        die("pthread_create", err);
    return ex;
}

/* Hand fn(arg) to the consumer. kind is a constant at every call site. */
static ALWAYS_INLINE void exec_submit(int kind, exec_t *ex, eddy_task_cb fn, void *arg)
{
    if (kind == SUBJ_EDDY) {
        int err = eddy_loop_execute(ex->loop, fn, arg);
        if (err != 0)
            die("eddy_loop_execute", err);
        return;
    }
    pthread_mutex_lock(&ex->lock);
    bool was_empty = ex->queue.n == 0;
    vec_push(&ex->queue, fn, arg);
    pthread_mutex_unlock(&ex->lock);
    if (kind == SUBJ_MUTEX) {
        if (was_empty) {
            uint64_t one = 1;
            while (write(ex->efd, &one, sizeof one) < 0) {
                if (errno != EINTR && errno != EAGAIN)
                    die("write(eventfd)", errno);
                if (errno == EAGAIN)
                    break; /* the counter is saturated: the consumer is being woken anyway */
            }
        }
    } else {
        int err = uv_async_send(&ex->async);
        if (err != 0)
            die("uv_async_send", err);
    }
}

static void exec_submit_any(exec_t *ex, eddy_task_cb fn, void *arg)
{
    switch (ex->kind) {
    case SUBJ_EDDY:
        exec_submit(SUBJ_EDDY, ex, fn, arg);
        break;
    case SUBJ_MUTEX:
        exec_submit(SUBJ_MUTEX, ex, fn, arg);
        break;
    default:
        exec_submit(SUBJ_UV, ex, fn, arg);
        break;
    }
}

static void quit_task(void *arg)
{
    exec_t *ex = arg;
    ex->quit = true;
}

static void exec_free(exec_t *ex)
{
    if (ex->kind == SUBJ_EDDY) {
        eddy_future_t *f = eddy_loop_shutdown_gracefully(ex->loop, 0, 1000);
        int err = eddy_future_await(f, 10000);
        if (err != 0)
            die("eddy loop did not terminate within 10 s", err);
        err = eddy_loop_free(ex->loop);
        if (err != 0)
            die("eddy_loop_free", err);
    } else {
        exec_submit_any(ex, quit_task, ex);
        pthread_join(ex->thread, NULL);
        if (ex->kind == SUBJ_MUTEX) {
            close(ex->efd);
            close(ex->epfd);
        } else {
            int err = uv_loop_close(&ex->uvloop);
            if (err != 0)
                die("uv_loop_close", err);
        }
        free(ex->queue.v);
        free(ex->batch.v);
        pthread_mutex_destroy(&ex->lock);
    }
    free(ex);
}

/* The consumer thread's CPU time, read on it through a task (round boundaries only). */
typedef struct cpu_probe_s {
    double cpu;
    int tid;
} cpu_probe_t;

static void cpu_probe_task(void *arg)
{
    cpu_probe_t *p = arg;
    p->cpu = thread_cpu_s();
    p->tid = gettid();
    done_signal();
}

static double probe(exec_t *ex, int *tid)
{
    cpu_probe_t p;
    exec_submit_any(ex, cpu_probe_task, &p);
    done_wait();
    if (tid != NULL)
        *tid = p.tid;
    return p.cpu;
}

/* ---------------------------------------------------------------------------------------
 * Cross-thread task throughput
 */

/* The consumer's tally; only the consumer thread touches it while a round runs. */
static struct {
    alignas(128) uint64_t count;
    uint64_t target;
    uint64_t errors;
    uint64_t next[MAX_PRODUCERS];
} tally;

/* The task: arg is (sequence << 1) | producer. */
static void count_task(void *arg)
{
    uintptr_t v = (uintptr_t)arg;
    unsigned p = (unsigned)(v & 1);
    uint64_t seq = (uint64_t)(v >> 1);
    tally.errors += seq != tally.next[p];
    tally.next[p] = seq + 1;
    if (++tally.count == tally.target)
        done_signal();
}

typedef struct producer_s {
    pthread_t thread;
    exec_t *ex;
    pthread_barrier_t *go;
    int cpu;
    unsigned index;
    uint64_t count;
    double cpu_s; /* the thread's CPU time over its submissions */
} producer_t;

static ALWAYS_INLINE void produce_impl(int kind, producer_t *p)
{
    exec_t *ex = p->ex;
    uintptr_t index = p->index;
    for (uint64_t i = 0; i < p->count; i++)
        exec_submit(kind, ex, count_task, (void *)(((uintptr_t)i << 1) | index));
}

static void *producer_main(void *arg)
{
    producer_t *p = arg;
    bench_thread_pin(p->cpu);
    char name[16];
    snprintf(name, sizeof name, "producer-%u", p->index);
    pthread_setname_np(pthread_self(), name);
    pthread_barrier_wait(p->go);
    double c0 = thread_cpu_s();
    switch (p->ex->kind) {
    case SUBJ_EDDY:
        produce_impl(SUBJ_EDDY, p);
        break;
    case SUBJ_MUTEX:
        produce_impl(SUBJ_MUTEX, p);
        break;
    default:
        produce_impl(SUBJ_UV, p);
        break;
    }
    p->cpu_s = thread_cpu_s() - c0;
    return NULL;
}

/* One round: np producer threads, ops tasks in all. Returns the seconds from the start
 * barrier to the consumer running the last task; *prod_cpu and *cons_cpu get the CPU seconds
 * the producers (together) and the consumer spent on it. */
static double tasks_round(exec_t *ex, unsigned np, uint64_t ops, double *prod_cpu, double *cons_cpu)
{
    double cc0 = probe(ex, NULL);
    uint64_t per = ops / np;
    tally.count = 0;
    tally.target = per * np;
    tally.errors = 0;
    memset(tally.next, 0, sizeof tally.next);

    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, np + 1);
    producer_t prod[MAX_PRODUCERS];
    for (unsigned i = 0; i < np; i++) {
        prod[i] = (producer_t){.ex = ex, .go = &go, .index = i, .count = per};
        /* tasks_2p: split puts producer 1 beside the consumer; shared puts both on cpu_a. */
        prod[i].cpu = i == 0 || layout_shared ? cpu_a : cpu_b;
        int err = pthread_create(&prod[i].thread, NULL, producer_main, &prod[i]);
        if (err != 0)
            die("pthread_create", err);
    }
    pthread_barrier_wait(&go);
    double t0 = bench_now_s();
    double t1 = done_wait();
    *prod_cpu = 0;
    for (unsigned i = 0; i < np; i++) {
        pthread_join(prod[i].thread, NULL);
        *prod_cpu += prod[i].cpu_s;
    }
    pthread_barrier_destroy(&go);
    *cons_cpu = probe(ex, NULL) - cc0;

    /* done_wait() synchronised with the consumer's last task: the tally is final. */
    bool ok = tally.errors == 0 && tally.count == tally.target;
    for (unsigned i = 0; i < np; i++)
        ok = ok && tally.next[i] == per;
    if (!ok) {
        fprintf(stderr,
                "bench_reactor: %s: tasks lost, repeated or out of order: ran %llu of %llu, "
                "%llu out of sequence\n",
                exec_names[ex->kind], (unsigned long long)tally.count,
                (unsigned long long)tally.target, (unsigned long long)tally.errors);
        exit(1);
    }
    return t1 - t0;
}

/* ---------------------------------------------------------------------------------------
 * Reporting helpers
 */

/* The table for a throughput case, and its JSON lines. samples are ops/s. */
static void report_rates(int c, const char *const names[SUBJ_N], const bool avail[SUBJ_N],
                         double samples[SUBJ_N][MAX_ROUNDS], int rounds, uint64_t ops,
                         double target, const double cpu_ns[SUBJ_N], const char *extra_json,
                         const double prod_cpu[SUBJ_N], const double cons_cpu[SUBJ_N])
{
    bench_stats_t st[SUBJ_N];
    printf("  %-20s %12s %22s %10s %12s\n", "subject", "median ops/s", "min - max", "ns/op",
           "eddy ratio");
    for (int k = 0; k < SUBJ_N; k++) {
        if (!avail[k])
            continue;
        st[k] = bench_stats(samples[k], rounds);
        char med[32], lo[32], hi[32], range[80], ratio[32] = "";
        bench_fmt_rate(med, sizeof med, st[k].median);
        bench_fmt_rate(lo, sizeof lo, st[k].min);
        bench_fmt_rate(hi, sizeof hi, st[k].max);
        snprintf(range, sizeof range, "%s - %s", lo, hi);
        if (k != SUBJ_EDDY && avail[SUBJ_EDDY])
            snprintf(ratio, sizeof ratio, "%.2fx", st[SUBJ_EDDY].median / st[k].median);
        printf("  %-20s %12s %22s %10.1f %12s", names[k], med, range, 1e9 / st[k].median, ratio);
        if (cpu_ns != NULL)
            printf("   loop CPU %.1f ns/op", cpu_ns[k]);
        printf("\n");
    }
    if (!avail[SUBJ_EDDY])
        return;
    for (int k = 0; k < SUBJ_N; k++) {
        if (k == SUBJ_EDDY || !avail[k])
            continue;
        double r = st[SUBJ_EDDY].median / st[k].median;
        if (target > 0)
            printf("  target eddy >= %.1fx %s: %s (%.2fx)\n", target, names[k],
                   r >= target ? "met" : "NOT met", r);
    }
    for (int k = 0; k < SUBJ_N; k++) {
        if (k == SUBJ_EDDY || !avail[k])
            continue;
        double r = st[SUBJ_EDDY].median / st[k].median;
        printf("{\"bench\":\"reactor\",\"case\":\"%s\",\"subject\":\"eddy\",\"baseline\":\"%s\","
               "\"ops_per_s\":%.0f,\"ops_per_s_min\":%.0f,\"ops_per_s_max\":%.0f,"
               "\"baseline_ops_per_s\":%.0f,\"baseline_ops_per_s_min\":%.0f,"
               "\"baseline_ops_per_s_max\":%.0f,\"ratio\":%.3f,\"rounds\":%d,\"ops\":%llu",
               case_names[c], names[k], st[SUBJ_EDDY].median, st[SUBJ_EDDY].min, st[SUBJ_EDDY].max,
               st[k].median, st[k].min, st[k].max, r, rounds, (unsigned long long)ops);
        if (cpu_ns != NULL)
            printf(",\"cpu_ns_per_op\":%.1f,\"baseline_cpu_ns_per_op\":%.1f", cpu_ns[SUBJ_EDDY],
                   cpu_ns[k]);
        if (prod_cpu != NULL)
            printf(",\"baseline_producer_cpu_ns_per_op\":%.1f,"
                   "\"baseline_consumer_cpu_ns_per_op\":%.1f",
                   prod_cpu[k], cons_cpu[k]);
        if (target > 0)
            printf(",\"target_ratio\":%.1f,\"target_met\":%s", target,
                   r >= target ? "true" : "false");
        printf("%s}\n", extra_json != NULL ? extra_json : "");
    }
}

static void run_tasks_case(int c, uint64_t ops, int rounds)
{
    unsigned np = c == CASE_TASKS_2P || c == CASE_TASKS_2P_SPLIT ? 2 : 1;
    /* tasks_2p keeps the loop's CPU to itself, as in tasks_1p (both producers share the
     * other); tasks_2p_split puts producer 1 beside the loop. */
    layout_shared = c == CASE_TASKS_2P;
    ops = ops / np * np;
    bool avail[SUBJ_N] = {false};
    exec_t *ex[SUBJ_N] = {NULL};
    for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++) {
        avail[k] = subject_selected(exec_names[k]);
        if (avail[k])
            ex[k] = exec_new(k, cpu_b, 0);
    }

    if (np == 1)
        printf("\n%s: %llu tasks per round, 1 warm-up + %d rounds; producer on CPU %d, "
               "consumer on CPU %d\n",
               case_names[c], (unsigned long long)ops, rounds, cpu_a, cpu_b);
    else
        printf("\n%s: %llu tasks per round (%llu per producer), 1 warm-up + %d rounds; "
               "OVERSUBSCRIBED: 2 producers + consumer on 2 CPUs (producers on CPUs %d and %d, "
               "consumer on CPU %d)\n",
               case_names[c], (unsigned long long)ops, (unsigned long long)(ops / np), rounds,
               cpu_a, layout_shared ? cpu_a : cpu_b, cpu_b);
    fflush(stdout);

    double samples[SUBJ_N][MAX_ROUNDS], pcpu[SUBJ_N][MAX_ROUNDS], ccpu[SUBJ_N][MAX_ROUNDS];
    eddy_loop_metrics_t m0 = {0}, m1 = {0};
    for (int r = -1; r < rounds; r++) {
        for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++) {
            if (!avail[k])
                continue;
            if (k == SUBJ_EDDY && r == 0)
                eddy_loop_metrics(ex[k]->loop, &m0);
            double pc, cc;
            double t = tasks_round(ex[k], np, r < 0 ? ops / 4 : ops, &pc, &cc);
            if (r >= 0) {
                samples[k][r] = (double)ops / t;
                pcpu[k][r] = pc * 1e9 / (double)ops;
                ccpu[k][r] = cc * 1e9 / (double)ops;
            }
        }
    }
    if (avail[SUBJ_EDDY])
        eddy_loop_metrics(ex[SUBJ_EDDY]->loop, &m1);
    for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++)
        if (avail[k])
            exec_free(ex[k]);
    printf("  every task ran exactly once, in order per producer (checked every round)\n");
    if (avail[SUBJ_EDDY]) {
        double tasks = (double)ops * rounds;
        printf("  eddy loop over the measured rounds: %.1f tasks per turn, %.4f wake-ups per "
               "task, %.1f%% of its time blocked in the poller\n",
               tasks / (double)(m1.turns - m0.turns), (double)(m1.wakeups - m0.wakeups) / tasks,
               100.0 * (double)(m1.poll_ns - m0.poll_ns) /
                   (double)(m1.poll_ns - m0.poll_ns + m1.task_ns - m0.task_ns + 1));
    }
    /* CPU time per task does not depend on how long the scheduler kept a thread off its CPU,
     * so it is the steadier figure on a busy machine. */
    double pmed[SUBJ_N] = {0}, cmed[SUBJ_N] = {0};
    for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++) {
        if (!avail[k])
            continue;
        bench_stats_t ps = bench_stats(pcpu[k], rounds), cs = bench_stats(ccpu[k], rounds);
        pmed[k] = ps.median;
        cmed[k] = cs.median;
        printf("  %-20s CPU per task: producer%s %.1f ns (%.1f - %.1f), consumer %.1f ns "
               "(%.1f - %.1f)\n",
               exec_names[k], np > 1 ? "s" : "", ps.median, ps.min, ps.max, cs.median, cs.min,
               cs.max);
    }
    char extra[256] = "";
    if (avail[SUBJ_EDDY])
        snprintf(extra, sizeof extra,
                 ",\"producer_cpu_ns_per_op\":%.1f,\"consumer_cpu_ns_per_op\":%.1f",
                 pmed[SUBJ_EDDY], cmed[SUBJ_EDDY]);
    /* #21's targets: a thread handing tasks to a loop beats both baselines by 2x, and by 1.5x
     * with a producer beside the loop on its CPU, at most 20 ns of producer and 15 ns of
     * consumer CPU per task. */
    double target = c == CASE_TASKS_2P_SPLIT ? 1.5 : 2.0;
    if (avail[SUBJ_EDDY])
        printf("  target eddy CPU per task <= 20 ns producing, <= 15 ns consuming: %s\n",
               pmed[SUBJ_EDDY] <= 20.0 && cmed[SUBJ_EDDY] <= 15.0 ? "met" : "NOT met");
    report_rates(c, exec_names, avail, samples, rounds, ops, target, NULL, extra, pmed, cmed);
    fflush(stdout);
}

/* ---------------------------------------------------------------------------------------
 * Wake-up latency
 */

typedef struct lat_s {
    alignas(128) int64_t stamp;
    int64_t *samples;
    uint64_t i;
    alignas(128) _Atomic uint64_t seen;
} lat_t;

static lat_t lat;

static void latency_task(void *arg)
{
    int64_t now = eddy_now_ns();
    lat_t *l = arg;
    l->samples[l->i] = now - l->stamp;
    /* Pairs with the acquire load in latency_round(): the sample is written. */
    atomic_store_explicit(&l->seen, l->i + 1, memory_order_release);
}

static void latency_round(exec_t *ex, uint64_t n)
{
    struct timespec gap = {0, gap_us * 1000};
    atomic_store(&lat.seen, 0);
    for (uint64_t i = 0; i < n; i++) {
        nanosleep(&gap, NULL);
        lat.i = i;
        lat.stamp = eddy_now_ns();
        exec_submit_any(ex, latency_task, &lat);
        unsigned spins = 0;
        while (atomic_load_explicit(&lat.seen, memory_order_acquire) != i + 1) {
            if (++spins < 100000)
                bench_cpu_relax();
            else
                sched_yield();
        }
    }
}

/*
 * --awake: a SCHED_IDLE thread spins on the consumer's CPU during wakeup_latency, so that CPU
 * never halts. A halted virtual CPU takes tens of microseconds to wake on some hypervisors,
 * the same for every subject, which hides the difference between their wake-up paths; any
 * runnable thread preempts a SCHED_IDLE one at once.
 */
static atomic_bool spinner_stop;

static void *spinner_main(void *arg)
{
    bench_thread_pin(cpu_b);
    pthread_setname_np(pthread_self(), "idle-spinner");
    struct sched_param sp = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0)
        return NULL;
    while (!atomic_load_explicit(&spinner_stop, memory_order_relaxed))
        bench_cpu_relax();
    return NULL;
}

static void run_wakeup_case(uint64_t n, int rounds)
{
    bool avail[SUBJ_N] = {false};
    exec_t *ex[SUBJ_N] = {NULL};
    for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++) {
        avail[k] = subject_selected(exec_names[k]);
        if (avail[k])
            ex[k] = exec_new(k, cpu_b, 0);
    }
    lat.samples = malloc(n * sizeof *lat.samples);
    if (lat.samples == NULL)
        die("malloc", ENOMEM);

    printf("\n%s: %llu samples per round, 1 warm-up (1000) + %d rounds; %ld us sleep before "
           "each; stamp on CPU %d, consumer on CPU %d; p50/p99 are per round, then median and "
           "min - max over rounds%s\n",
           case_names[CASE_WAKEUP], (unsigned long long)n, rounds, gap_us, cpu_a, cpu_b,
           keep_awake ? "; --awake: a SCHED_IDLE spinner keeps the consumer's CPU from halting"
                      : "");
    fflush(stdout);
    pthread_t spinner;
    if (keep_awake) {
        atomic_store(&spinner_stop, false);
        int err = pthread_create(&spinner, NULL, spinner_main, NULL);
        if (err != 0)
            die("pthread_create", err);
    }

    double p50[SUBJ_N][MAX_ROUNDS], p99[SUBJ_N][MAX_ROUNDS], p999[SUBJ_N][MAX_ROUNDS];
    for (int r = -1; r < rounds; r++) {
        for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++) {
            if (!avail[k])
                continue;
            uint64_t m = r < 0 ? (n < 1000 ? n : 1000) : n;
            latency_round(ex[k], m);
            if (r < 0)
                continue;
            qsort(lat.samples, m, sizeof *lat.samples, cmp_i64);
            p50[k][r] = (double)lat.samples[m / 2];
            p99[k][r] = (double)lat.samples[m * 99 / 100];
            p999[k][r] = (double)lat.samples[m * 999 / 1000];
        }
    }
    if (keep_awake) {
        atomic_store(&spinner_stop, true);
        pthread_join(spinner, NULL);
    }
    for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++)
        if (avail[k])
            exec_free(ex[k]);
    free(lat.samples);

    bench_stats_t s50[SUBJ_N], s99[SUBJ_N], s999[SUBJ_N];
    printf("  %-16s %8s %17s %8s %17s %8s %14s\n", "subject", "p50 ns", "min - max", "p99 ns",
           "min - max", "p99.9", "ratio p50/p99");
    for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++) {
        if (!avail[k])
            continue;
        s50[k] = bench_stats(p50[k], rounds);
        s99[k] = bench_stats(p99[k], rounds);
        s999[k] = bench_stats(p999[k], rounds);
        char r50[40], r99[40], ratio[40] = "";
        snprintf(r50, sizeof r50, "%.0f - %.0f", s50[k].min, s50[k].max);
        snprintf(r99, sizeof r99, "%.0f - %.0f", s99[k].min, s99[k].max);
        if (k != SUBJ_EDDY && avail[SUBJ_EDDY])
            snprintf(ratio, sizeof ratio, "%.2fx / %.2fx", s50[k].median / s50[SUBJ_EDDY].median,
                     s99[k].median / s99[SUBJ_EDDY].median);
        printf("  %-16s %8.0f %17s %8.0f %17s %8.0f %14s\n", exec_names[k], s50[k].median, r50,
               s99[k].median, r99, s999[k].median, ratio);
    }
    printf("  ratio = baseline latency / eddy latency; higher favours eddy\n");
    if (!avail[SUBJ_EDDY])
        return;
    for (int k = SUBJ_MUTEX; k <= SUBJ_UV; k++) {
        if (!avail[k])
            continue;
        printf("{\"bench\":\"reactor\",\"case\":\"wakeup_latency\",\"subject\":\"eddy\","
               "\"baseline\":\"%s\",\"p50_ns\":%.0f,\"p50_ns_min\":%.0f,\"p50_ns_max\":%.0f,"
               "\"p99_ns\":%.0f,\"p99_ns_min\":%.0f,\"p99_ns_max\":%.0f,\"p999_ns\":%.0f,"
               "\"baseline_p50_ns\":%.0f,\"baseline_p50_ns_min\":%.0f,"
               "\"baseline_p50_ns_max\":%.0f,\"baseline_p99_ns\":%.0f,"
               "\"baseline_p99_ns_min\":%.0f,\"baseline_p99_ns_max\":%.0f,"
               "\"baseline_p999_ns\":%.0f,\"ratio\":%.3f,\"ratio_p99\":%.3f,"
               "\"ratio_meaning\":\"baseline/eddy\",\"rounds\":%d,\"samples\":%llu,"
               "\"gap_us\":%ld,\"awake\":%s}\n",
               exec_names[k], s50[0].median, s50[0].min, s50[0].max, s99[0].median, s99[0].min,
               s99[0].max, s999[0].median, s50[k].median, s50[k].min, s50[k].max, s99[k].median,
               s99[k].min, s99[k].max, s999[k].median, s50[k].median / s50[0].median,
               s99[k].median / s99[0].median, rounds, (unsigned long long)n, gap_us,
               keep_awake ? "true" : "false");
    }
    fflush(stdout);
}

/* ---------------------------------------------------------------------------------------
 * Timers. The job runs as one task on the loop's thread (eddy's loop, or the libuv loop's
 * async callback), so only the timer operations are timed.
 */

static struct {
    exec_t *ex;
    int subj;
    bool fire;
    bool cleanup;
    uint64_t n;
    uint64_t fired;
    uint64_t closed;
    uint64_t errors;
    double t0, t_sched, t1;
    double cpu0, cpu1;
} tj;

static int64_t *delay_ms;      /* per timer: 1000..60000 (cancel) or 0..99 (fire, libuv) */
static int64_t *delay_ns;      /* per timer: 0..100 ms (fire, eddy) */
static uint8_t *fired_flags;   /* per timer: how often its callback ran */
static eddy_timer_t **handles; /* eddy's handles */
static uv_timer_t *uvtimers;   /* libuv_timer: preallocated */
static uv_timer_t **uvptrs;    /* libuv_timer_malloc */

static void timer_job_end(void)
{
    tj.t1 = bench_now_s();
    tj.cpu1 = thread_cpu_s();
    done_signal();
}

static void eddy_fire_cb(eddy_timer_t *t, void *arg)
{
    fired_flags[(uintptr_t)arg]++;
    if (++tj.fired == tj.n && tj.fire)
        timer_job_end();
}

static void eddy_timer_job(void *arg)
{
    eddy_loop_t *loop = arg;
    uint64_t n = tj.n;
    tj.cpu0 = thread_cpu_s();
    tj.t0 = bench_now_s();
    if (tj.fire) {
        for (uint64_t i = 0; i < n; i++) {
            eddy_timer_t *t =
                eddy_loop_schedule_ns(loop, delay_ns[i], eddy_fire_cb, (void *)(uintptr_t)i);
            tj.errors += t == NULL;
            eddy_timer_release(t); /* the timer stays scheduled */
        }
        tj.t_sched = bench_now_s();
        return; /* eddy_fire_cb() ends the job */
    }
    for (uint64_t i = 0; i < n; i++) {
        handles[i] = eddy_loop_schedule(loop, delay_ms[i], eddy_fire_cb, (void *)(uintptr_t)i);
        tj.errors += handles[i] == NULL;
    }
    tj.t_sched = bench_now_s();
    for (uint64_t i = 0; i < n; i++) {
        tj.errors += eddy_timer_cancel(handles[i]) != 0;
        eddy_timer_release(handles[i]);
    }
    timer_job_end();
}

static void uv_fire_cb(uv_timer_t *h)
{
    fired_flags[(uintptr_t)h->data]++;
    if (++tj.fired == tj.n && tj.fire)
        timer_job_end();
}

static void uv_closed_cb(uv_handle_t *h)
{
    if (tj.subj == SUBJ_UV_MALLOC)
        free(h);
    if (++tj.closed == tj.n) {
        if (tj.cleanup)
            done_signal();
        else
            timer_job_end();
    }
}

static void uv_timer_job(void *arg)
{
    exec_t *ex = arg;
    uv_loop_t *l = &ex->uvloop;
    uint64_t n = tj.n;
    uv_update_time(l);
    tj.cpu0 = thread_cpu_s();
    tj.t0 = bench_now_s();
    if (tj.subj == SUBJ_UV_MALLOC) {
        for (uint64_t i = 0; i < n; i++) {
            uv_timer_t *h = malloc(sizeof *h);
            if (h == NULL)
                die("malloc", ENOMEM);
            tj.errors += uv_timer_init(l, h) != 0;
            h->data = (void *)(uintptr_t)i;
            tj.errors += uv_timer_start(h, uv_fire_cb, (uint64_t)delay_ms[i], 0) != 0;
            uvptrs[i] = h;
        }
        tj.t_sched = bench_now_s();
        for (uint64_t i = 0; i < n; i++) {
            tj.errors += uv_timer_stop(uvptrs[i]) != 0;
            uv_close((uv_handle_t *)uvptrs[i], uv_closed_cb);
        }
        return; /* the last close callback, at the end of this loop iteration, ends the job */
    }
    for (uint64_t i = 0; i < n; i++) {
        tj.errors += uv_timer_init(l, &uvtimers[i]) != 0;
        uvtimers[i].data = (void *)(uintptr_t)i;
        tj.errors += uv_timer_start(&uvtimers[i], uv_fire_cb, (uint64_t)delay_ms[i], 0) != 0;
    }
    tj.t_sched = bench_now_s();
    if (tj.fire)
        return; /* uv_fire_cb() ends the job */
    for (uint64_t i = 0; i < n; i++)
        tj.errors += uv_timer_stop(&uvtimers[i]) != 0;
    timer_job_end();
}

/* Untimed: close the preallocated libuv timers so the array can be initialised again. */
static void uv_cleanup_job(void *arg)
{
    for (uint64_t i = 0; i < tj.n; i++)
        uv_close((uv_handle_t *)&uvtimers[i], uv_closed_cb);
}

/* One round; returns the seconds from the first schedule call to the end of the job. */
static double timer_round(exec_t *ex, int subj, bool fire, uint64_t n, double *sched_s,
                          double *cpu_s)
{
    tj.ex = ex;
    tj.subj = subj;
    tj.fire = fire;
    tj.cleanup = false;
    tj.n = n;
    tj.fired = tj.closed = tj.errors = 0;
    memset(fired_flags, 0, n);
    uint64_t fired_before = 0;
    if (subj == SUBJ_EDDY) {
        eddy_loop_metrics_t m;
        eddy_loop_metrics(ex->loop, &m);
        fired_before = m.timers_fired;
        exec_submit(SUBJ_EDDY, ex, eddy_timer_job, ex->loop);
    } else {
        exec_submit(SUBJ_UV, ex, uv_timer_job, ex);
    }
    done_wait();
    bool ok = tj.errors == 0;
    if (fire) {
        ok = ok && tj.fired == n;
        for (uint64_t i = 0; ok && i < n; i++)
            ok = fired_flags[i] == 1;
    } else {
        ok = ok && tj.fired == 0;
    }
    if (subj == SUBJ_EDDY) {
        eddy_loop_metrics_t m;
        eddy_loop_metrics(ex->loop, &m);
        ok = ok && m.timers_fired - fired_before == (fire ? n : 0);
    }
    if (!ok) {
        fprintf(stderr,
                "bench_reactor: %s %s: %llu errors, %llu callbacks for %llu timers (want %llu, "
                "each once)\n",
                timer_names[subj], fire ? "schedule+fire" : "schedule+cancel",
                (unsigned long long)tj.errors, (unsigned long long)tj.fired, (unsigned long long)n,
                (unsigned long long)(fire ? n : 0));
        exit(1);
    }
    double t = tj.t1 - tj.t0;
    *sched_s = tj.t_sched - tj.t0;
    *cpu_s = tj.cpu1 - tj.cpu0;
    if (subj == SUBJ_UV) {
        tj.cleanup = true;
        tj.closed = 0;
        exec_submit(SUBJ_UV, ex, uv_cleanup_job, ex);
        done_wait();
    }
    return t;
}

/*
 * Before measuring: eddy timers 1-30 ms out, every other one cancelled at once (from the loop
 * thread, as in the measurement); wait past the last deadline; the others must have fired
 * once each, the cancelled ones never, and a late cancel must report EDDY_EALREADY.
 */
static void check_c_job(void *arg)
{
    eddy_loop_t *loop = arg;
    for (uint64_t i = 0; i < TIMER_CHECK_N; i++) {
        int64_t d = 1 + (int64_t)(i * 7919 % 30);
        handles[i] = eddy_loop_schedule(loop, d, eddy_fire_cb, (void *)(uintptr_t)i);
        tj.errors += handles[i] == NULL;
    }
    for (uint64_t i = 0; i < TIMER_CHECK_N; i += 2)
        tj.errors += eddy_timer_cancel(handles[i]) != 0;
    done_signal();
}

static void check_late_cancel_job(void *arg)
{
    for (uint64_t i = 0; i < TIMER_CHECK_N; i++) {
        int err = eddy_timer_cancel(handles[i]);
        tj.errors += err != EDDY_EALREADY;
        eddy_timer_release(handles[i]);
    }
    done_signal();
}

static void timers_check(exec_t *ex)
{
    tj.n = TIMER_CHECK_N;
    tj.fire = false;
    tj.fired = tj.errors = 0;
    memset(fired_flags, 0, TIMER_CHECK_N);
    exec_submit(SUBJ_EDDY, ex, check_c_job, ex->loop);
    done_wait();
    struct timespec wait = {0, 80 * 1000000};
    nanosleep(&wait, NULL);
    exec_submit(SUBJ_EDDY, ex, check_late_cancel_job, ex->loop);
    done_wait();
    bool ok = tj.errors == 0 && tj.fired == TIMER_CHECK_N / 2;
    for (uint64_t i = 0; ok && i < TIMER_CHECK_N; i++)
        ok = fired_flags[i] == (i % 2 ? 1 : 0);
    if (!ok) {
        fprintf(stderr,
                "bench_reactor: eddy timer check: %llu errors, %llu of %u fired (want the %u "
                "not cancelled, once each)\n",
                (unsigned long long)tj.errors, (unsigned long long)tj.fired, TIMER_CHECK_N,
                TIMER_CHECK_N / 2);
        exit(1);
    }
    printf("  check: %u eddy timers 1-30 ms out, every other cancelled: the other %u fired once "
           "each, none cancelled fired, late cancels returned EDDY_EALREADY\n",
           TIMER_CHECK_N, TIMER_CHECK_N / 2);
}

static void run_timers_case(int c, uint64_t n, int rounds)
{
    bool fire = c == CASE_TIMERS_FIRE;
    uint64_t alloc_n = n > TIMER_CHECK_N ? n : TIMER_CHECK_N;
    delay_ms = malloc(alloc_n * sizeof *delay_ms);
    delay_ns = malloc(alloc_n * sizeof *delay_ns);
    fired_flags = malloc(alloc_n);
    handles = malloc(alloc_n * sizeof *handles);
    uvtimers = malloc(alloc_n * sizeof *uvtimers);
    uvptrs = malloc(alloc_n * sizeof *uvptrs);
    if (delay_ms == NULL || delay_ns == NULL || fired_flags == NULL || handles == NULL ||
        uvtimers == NULL || uvptrs == NULL)
        die("malloc", ENOMEM);
    uint64_t st = SEED;
    for (uint64_t i = 0; i < n; i++) {
        if (fire) {
            delay_ns[i] = (int64_t)(bench_xorshift64s(&st) % 100000000u);
            delay_ms[i] = delay_ns[i] / 1000000;
        } else {
            delay_ms[i] = 1000 + (int64_t)(bench_xorshift64s(&st) % 59001u);
        }
    }
    /* Touch the arrays once so the first round does not pay their page faults. */
    memset(handles, 0, alloc_n * sizeof *handles);
    memset(uvtimers, 0, alloc_n * sizeof *uvtimers);
    memset(uvptrs, 0, alloc_n * sizeof *uvptrs);

    bool avail[SUBJ_N] = {false};
    avail[SUBJ_EDDY] = subject_selected(timer_names[SUBJ_EDDY]);
    avail[SUBJ_UV] = subject_selected(timer_names[SUBJ_UV]);
    avail[SUBJ_UV_MALLOC] = !fire && subject_selected(timer_names[SUBJ_UV_MALLOC]);
    /* The stall watchdog is off for the eddy loop here: the timer job holds the loop for a
     * long time on purpose. */
    exec_t *eddy = avail[SUBJ_EDDY] ? exec_new(SUBJ_EDDY, cpu_b, -1) : NULL;
    exec_t *uv = avail[SUBJ_UV] || avail[SUBJ_UV_MALLOC] ? exec_new(SUBJ_UV, cpu_b, 0) : NULL;

    if (fire)
        printf("\n%s: %llu timers per round at random delays of 0-100 ms (eddy: ns, libuv: the "
               "same in whole ms), timed from the first schedule to the last callback, on the "
               "loop thread (CPU %d); 1 warm-up + %d rounds\n",
               case_names[c], (unsigned long long)n, cpu_b, rounds);
    else
        printf("\n%s: %llu timers per round at random delays of 1-60 s, all scheduled then all "
               "cancelled (in the order scheduled), on the loop thread (CPU %d); 1 warm-up + %d "
               "rounds\n"
               "  eddy: eddy_loop_schedule + eddy_timer_cancel + eddy_timer_release (allocates "
               "and frees each timer)\n"
               "  libuv_timer: uv_timer_init + uv_timer_start + uv_timer_stop on a preallocated "
               "array (allocation outside the timed part: libuv's natural usage)\n"
               "  libuv_timer_malloc: malloc + init + start, stop + uv_close, free in the close "
               "callback (timed until the last one freed)\n",
               case_names[c], (unsigned long long)n, cpu_b, rounds);
    if (avail[SUBJ_EDDY] && !fire)
        timers_check(eddy);
    fflush(stdout);

    double samples[SUBJ_N][MAX_ROUNDS], sched[SUBJ_N][MAX_ROUNDS], cpu[SUBJ_N][MAX_ROUNDS];
    for (int r = -1; r < rounds; r++) {
        for (int k = 0; k < SUBJ_N; k++) {
            if (!avail[k])
                continue;
            double s, cs;
            double t = timer_round(k == SUBJ_EDDY ? eddy : uv, k, fire, n, &s, &cs);
            if (r >= 0) {
                samples[k][r] = (double)n / t;
                sched[k][r] = s * 1e9 / (double)n;
                cpu[k][r] = cs * 1e9 / (double)n;
            }
        }
    }
    if (eddy != NULL)
        exec_free(eddy);
    if (uv != NULL)
        exec_free(uv);

    printf("  every round: %s\n",
           fire ? "each timer fired exactly once" : "every cancel succeeded, no timer fired");
    double cpu_med[SUBJ_N] = {0};
    char extra[256];
    size_t len = 0;
    extra[0] = '\0';
    for (int k = 0; k < SUBJ_N; k++) {
        if (!avail[k])
            continue;
        bench_stats_t ss = bench_stats(sched[k], rounds);
        cpu_med[k] = bench_stats(cpu[k], rounds).median;
        printf("  %-20s schedule part %.1f ns/timer (median; min %.1f, max %.1f)\n", timer_names[k],
               ss.median, ss.min, ss.max);
        if (k == SUBJ_EDDY || k == SUBJ_UV)
            len +=
                (size_t)snprintf(extra + len, sizeof extra - len, ",\"%sschedule_ns_per_op\":%.1f",
                                 k == SUBJ_EDDY ? "" : "baseline_", ss.median);
    }
    if (!avail[SUBJ_EDDY] || !avail[SUBJ_UV])
        extra[0] = '\0';
    report_rates(c, timer_names, avail, samples, rounds, n, fire ? 0 : 2.0, fire ? cpu_med : NULL,
                 extra, NULL, NULL);
    if (fire)
        printf("  loop CPU = the loop thread's CPU time over the same span, per timer (the "
               "wall time cannot be below the 100 ms spread)\n");
    free(delay_ms);
    free(delay_ns);
    free(fired_flags);
    free(handles);
    free(uvtimers);
    free(uvptrs);
    fflush(stdout);
}

/* ---------------------------------------------------------------------------------------
 * Idle CPU
 */

/* CPU time (ns) of the threads of this process named name, summed; -1 when there is none. */
static int64_t threads_cpu_ns(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return -1;
    int64_t sum = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(comm, sizeof comm, f) == NULL)
            comm[0] = '\0';
        fclose(f);
        comm[strcspn(comm, "\n")] = '\0';
        if (strcmp(comm, name) != 0)
            continue;
        /* schedstat: time on the CPU in ns, time waiting to run, timeslices. */
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        f = fopen(path, "r");
        if (f == NULL)
            continue;
        long long ns;
        if (fscanf(f, "%lld", &ns) == 1)
            sum = (sum < 0 ? 0 : sum) + ns;
        fclose(f);
    }
    closedir(d);
    return sum;
}

static void run_idle_case(void)
{
    bool avail[SUBJ_N] = {false};
    exec_t *ex[SUBJ_N] = {NULL};
    avail[SUBJ_EDDY] = subject_selected("eddy");
    avail[SUBJ_UV] = subject_selected("libuv_async");
    for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++)
        if (avail[k])
            ex[k] = exec_new(k, cpu_b, 0);
    printf("\n%s: an eddy loop (default options, stall watchdog on) and a libuv loop with one "
           "uv_async_t, both idle at once for %.1f s, 1 round; CPU time of each loop thread, "
           "read on that thread with CLOCK_THREAD_CPUTIME_ID through a task at the start and "
           "the end\n",
           case_names[CASE_IDLE], idle_seconds);
    fflush(stdout);

    struct timespec settle = {0, 100 * 1000000};
    nanosleep(&settle, NULL);
    double c0[SUBJ_N] = {0}, c1[SUBJ_N] = {0};
    eddy_loop_metrics_t m0 = {0}, m1 = {0};
    for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++)
        if (avail[k])
            c0[k] = probe(ex[k], NULL);
    if (avail[SUBJ_EDDY])
        eddy_loop_metrics(ex[SUBJ_EDDY]->loop, &m0);
    int64_t wd0 = threads_cpu_ns("eddy-watchdog");
    double t0 = bench_now_s();
    struct timespec idle = {(time_t)idle_seconds,
                            (long)((idle_seconds - (double)(time_t)idle_seconds) * 1e9)};
    nanosleep(&idle, NULL);
    double t = bench_now_s() - t0;
    int64_t wd1 = threads_cpu_ns("eddy-watchdog");
    if (avail[SUBJ_EDDY])
        eddy_loop_metrics(ex[SUBJ_EDDY]->loop, &m1);
    for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++)
        if (avail[k])
            c1[k] = probe(ex[k], NULL);
    for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++)
        if (avail[k])
            exec_free(ex[k]);

    double pct[SUBJ_N] = {0}; /* zero for an absent subject (never shown): gcc 12 -O3 */
    for (int k = SUBJ_EDDY; k <= SUBJ_UV; k++) {
        if (!avail[k])
            continue;
        pct[k] = 100.0 * (c1[k] - c0[k]) / t;
        printf("  %-16s loop thread %.4f%% of a CPU (%.0f us over %.1f s)\n", exec_names[k], pct[k],
               (c1[k] - c0[k]) * 1e6, t);
    }
    double wd_pct = wd0 >= 0 && wd1 >= 0 ? 100.0 * (double)(wd1 - wd0) * 1e-9 / t : -1;
    if (avail[SUBJ_EDDY]) {
        printf("  eddy loop: %llu turns, %llu wake-ups in the idle span\n",
               (unsigned long long)(m1.turns - m0.turns),
               (unsigned long long)(m1.wakeups - m0.wakeups));
        if (wd_pct >= 0)
            printf("  eddy-watchdog thread (the stall watchdog, one per process): %.4f%% of a "
                   "CPU\n",
                   wd_pct);
        printf("  target eddy idle ~0%% (< 0.1%% of a CPU): %s (%.4f%%)\n",
               pct[SUBJ_EDDY] < 0.1 ? "met" : "NOT met", pct[SUBJ_EDDY]);
    }
    if (avail[SUBJ_EDDY] && avail[SUBJ_UV])
        printf("{\"bench\":\"reactor\",\"case\":\"idle_cpu\",\"subject\":\"eddy\","
               "\"baseline\":\"libuv_async\",\"cpu_percent\":%.5f,\"baseline_cpu_percent\":%.5f,"
               "\"watchdog_cpu_percent\":%.5f,\"turns\":%llu,\"seconds\":%.2f,\"rounds\":1,"
               "\"target_met\":%s}\n",
               pct[SUBJ_EDDY], pct[SUBJ_UV], wd_pct, (unsigned long long)(m1.turns - m0.turns), t,
               pct[SUBJ_EDDY] < 0.1 ? "true" : "false");
    fflush(stdout);
}

/* ---------------------------------------------------------------------------------------
 * main
 */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: bench_reactor [--case NAME] [--rounds N] [--ops N] [--subject NAME] "
            "[--idle-seconds S] [--gap-us N] [--awake] [--no-pin] [--no-costs]\n"
            "  --case NAME       tasks_1p, tasks_2p, wakeup_latency, timers_schedule_cancel, "
            "timers_schedule_fire or idle_cpu (default: all)\n"
            "  --rounds N        measured rounds after one warm-up round (default %d, max %d; "
            "idle_cpu: always 1)\n"
            "  --ops N           tasks, timers or latency samples per round, every case "
            "(defaults: tasks %llu, timers %llu, samples %llu; k and m suffixes)\n"
            "  --subject NAME    run only eddy or one baseline (for profiling; no ratios)\n"
            "  --idle-seconds S  idle span of idle_cpu (default %.0f)\n"
            "  --gap-us N        sleep before each wake-up latency sample (default %d)\n"
            "  --awake           wakeup_latency: keep the consumer's CPU from halting with a "
            "SCHED_IDLE spinner (see the source)\n"
            "  --no-pin          leave threads where the scheduler puts them\n"
            "  --no-costs        skip measuring the machine's system-call and cache costs\n",
            DEFAULT_ROUNDS, MAX_ROUNDS, (unsigned long long)default_ops[CASE_TASKS_1P],
            (unsigned long long)default_ops[CASE_TIMERS_CANCEL],
            (unsigned long long)default_ops[CASE_WAKEUP], DEFAULT_IDLE_S, DEFAULT_GAP_US);
}

int main(int argc, char **argv)
{
    uint64_t ops = 0; /* 0: default_ops[case] */
    uint64_t rounds = DEFAULT_ROUNDS;
    int only = -1;
    bool pin = true;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--ops") == 0 && v != NULL) {
            if (!bench_parse_count(v, &ops)) {
                fprintf(stderr, "bench_reactor: bad --ops %s\n", v);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--rounds") == 0 && v != NULL) {
            if (!bench_parse_count(v, &rounds) || rounds > MAX_ROUNDS) {
                fprintf(stderr, "bench_reactor: bad --rounds %s\n", v);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--case") == 0 && v != NULL) {
            for (int c = 0; c < CASE_N; c++)
                if (strcmp(v, case_names[c]) == 0)
                    only = c;
            if (only < 0) {
                fprintf(stderr, "bench_reactor: unknown case %s\n", v);
                usage(stderr);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--subject") == 0 && v != NULL) {
            bool known = false;
            for (int k = 0; k < SUBJ_N; k++)
                known = known || strcmp(v, exec_names[k]) == 0 || strcmp(v, timer_names[k]) == 0;
            if (!known || v[0] == '\0') {
                fprintf(stderr, "bench_reactor: unknown subject %s\n", v);
                return 2;
            }
            only_subject = v;
            i++;
        } else if (strcmp(a, "--idle-seconds") == 0 && v != NULL) {
            idle_seconds = strtod(v, NULL);
            if (!(idle_seconds > 0 && idle_seconds < 3600)) {
                fprintf(stderr, "bench_reactor: bad --idle-seconds %s\n", v);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--gap-us") == 0 && v != NULL) {
            gap_us = strtol(v, NULL, 10);
            if (gap_us <= 0 || gap_us >= 1000000) {
                fprintf(stderr, "bench_reactor: bad --gap-us %s\n", v);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--awake") == 0) {
            keep_awake = true;
        } else if (strcmp(a, "--no-pin") == 0) {
            pin = false;
        } else if (strcmp(a, "--no-costs") == 0) {
            costs = false;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }

    bench_cpus_init(pin, &cpu_a, &cpu_b);
    bench_thread_pin(cpu_a);

    char model[128];
    bench_cpu_model(model, sizeof model);
    double load[3] = {0};
    getloadavg(load, 3);
    printf("bench reactor: eddy %s loop vs a mutex + eventfd queue vs libuv %s\n", eddy_version(),
           uv_version_string());
    printf("cpu: %s, %ld online; main/producer on CPU %d, consumer/loop on CPU %d%s; load "
           "average %.2f %.2f %.2f at start\n",
           model, sysconf(_SC_NPROCESSORS_ONLN), cpu_a, cpu_b, pin ? "" : " (not pinned)", load[0],
           load[1], load[2]);
    printf("throughput ratio = eddy median / baseline median (ops/s); higher favours eddy\n");
    if (costs) {
        bench_machine_costs_print("reactor", cpu_a < 0 ? 0 : cpu_a, cpu_b < 0 ? 1 : cpu_b);
        bench_thread_pin(cpu_a);
    }

    for (int c = 0; c < CASE_N; c++) {
        if (only >= 0 && c != only)
            continue;
        uint64_t n = ops != 0 ? ops : default_ops[c];
        switch (c) {
        case CASE_TASKS_1P:
        case CASE_TASKS_2P:
        case CASE_TASKS_2P_SPLIT:
            run_tasks_case(c, n, (int)rounds);
            break;
        case CASE_WAKEUP:
            run_wakeup_case(n, (int)rounds);
            break;
        case CASE_TIMERS_CANCEL:
        case CASE_TIMERS_FIRE:
            run_timers_case(c, n, (int)rounds);
            break;
        default:
            run_idle_case();
            break;
        }
    }
    return 0;
}
