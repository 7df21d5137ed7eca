/*
 * bench/support/machine_costs.h: what the kernel and the cache charge on this machine, printed
 * beside a benchmark's table so a ratio can be read against its machine (the same code ran
 * 3-6x apart in lock and system-call costs on two VMs of one kind).
 *
 *   bench_machine_costs_print(name, cpu_a, cpu_b)
 *
 * prints one human line per cost and one JSON line ({"bench":"machine",...}). Costs, each the
 * median of several timed batches:
 *   syscall_ns          getppid(): the bare system-call round trip
 *   futex_wake_ns       FUTEX_WAKE with nobody waiting (what a publisher pays to wake no one)
 *   futex_handoff_ns    one side of a futex ping-pong between two threads on cpu_a and cpu_b:
 *                       wake, then sleep until woken (a blocked consumer's wake-up, both ways)
 *   eventfd_write_ns    write(2) of 8 bytes to an eventfd nobody reads
 *   epoll_wait0_ns      epoll_wait() with timeout 0 on an empty epoll set
 *   sched_yield_ns      sched_yield() with nothing else to run
 *   mutex_ns            an uncontended pthread mutex lock and unlock
 *   clock_ns            clock_gettime(CLOCK_MONOTONIC)
 *   fence_ns            a seq_cst fence (mfence / lock or)
 *   line_pingpong_ns    one hand-over of a cache line between cpu_a and cpu_b (half a round
 *                       trip of two threads incrementing a shared counter in turn)
 */
#ifndef EDDY_BENCH_MACHINE_COSTS_H
#define EDDY_BENCH_MACHINE_COSTS_H

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "support/bench_util.h"

#define MC_BATCHES 7

typedef struct mc_costs_s {
    double syscall_ns, futex_wake_ns, futex_handoff_ns, eventfd_write_ns, epoll_wait0_ns;
    double sched_yield_ns, mutex_ns, clock_ns, fence_ns, line_pingpong_ns;
} mc_costs_t;

static inline long mc_futex(_Atomic uint32_t *w, int op, uint32_t v)
{
    return syscall(SYS_futex, (uint32_t *)(uintptr_t)w, op, v, NULL, NULL, 0);
}

/* The median over MC_BATCHES of the cost per iteration of body, run n times a batch. */
#define MC_TIME(out, n, body)                                                                      \
    do {                                                                                           \
        double mc_v_[MC_BATCHES];                                                                  \
        for (int mc_b_ = 0; mc_b_ < MC_BATCHES; mc_b_++) {                                         \
            double mc_t0_ = bench_now_s();                                                         \
            for (long mc_i_ = 0; mc_i_ < (n); mc_i_++) {                                           \
                body;                                                                              \
            }                                                                                      \
            mc_v_[mc_b_] = (bench_now_s() - mc_t0_) * 1e9 / (double)(n);                           \
        }                                                                                          \
        (out) = bench_stats(mc_v_, MC_BATCHES).median;                                             \
    } while (0)

typedef struct mc_pair_s {
    alignas(128) _Atomic uint32_t word;
    alignas(128) _Atomic uint64_t counter;
    long n;
    int cpu;
    bool futex;
} mc_pair_t;

/* The partner: waits for its turn (odd values), then passes it back, n times. */
static void *mc_partner(void *arg)
{
    mc_pair_t *p = arg;
    bench_thread_pin(p->cpu);
    for (long i = 0; i < p->n; i++) {
        if (p->futex) {
            while (atomic_load(&p->word) != 1)
                mc_futex(&p->word, FUTEX_WAIT_PRIVATE, 0);
            atomic_store(&p->word, 0);
            mc_futex(&p->word, FUTEX_WAKE_PRIVATE, 1);
        } else {
            uint64_t want = 2 * (uint64_t)i + 1;
            while (atomic_load_explicit(&p->counter, memory_order_acquire) != want)
                bench_cpu_relax();
            atomic_store_explicit(&p->counter, want + 1, memory_order_release);
        }
    }
    return NULL;
}

/* Time n round trips with a partner on cpu_b (the caller is pinned to cpu_a); returns the
 * cost of one hand-over (half a round trip). */
static double mc_pingpong(bool futex, long n, int cpu_b)
{
    static mc_pair_t p;
    atomic_store(&p.word, 0);
    atomic_store(&p.counter, 0);
    p.n = n;
    p.cpu = cpu_b;
    p.futex = futex;
    pthread_t t;
    if (pthread_create(&t, NULL, mc_partner, &p) != 0)
        return 0;
    double t0 = bench_now_s();
    for (long i = 0; i < n; i++) {
        if (futex) {
            atomic_store(&p.word, 1);
            mc_futex(&p.word, FUTEX_WAKE_PRIVATE, 1);
            while (atomic_load(&p.word) != 0)
                mc_futex(&p.word, FUTEX_WAIT_PRIVATE, 1);
        } else {
            uint64_t mine = 2 * (uint64_t)i;
            while (atomic_load_explicit(&p.counter, memory_order_acquire) != mine)
                bench_cpu_relax();
            atomic_store_explicit(&p.counter, mine + 1, memory_order_release);
        }
    }
    if (!futex) {
        while (atomic_load_explicit(&p.counter, memory_order_acquire) != 2 * (uint64_t)n)
            bench_cpu_relax();
    }
    double ns = (bench_now_s() - t0) * 1e9 / (double)n / 2;
    pthread_join(t, NULL);
    return ns;
}

static inline mc_costs_t bench_machine_costs(int cpu_a, int cpu_b)
{
    mc_costs_t c = {0};
    cpu_set_t was;
    bool have_was = pthread_getaffinity_np(pthread_self(), sizeof was, &was) == 0;
    bench_thread_pin(cpu_a);
    static _Atomic uint32_t word;
    MC_TIME(c.syscall_ns, 20000, (void)syscall(SYS_getppid));
    MC_TIME(c.futex_wake_ns, 20000, mc_futex(&word, FUTEX_WAKE_PRIVATE, INT_MAX));
    int efd = eventfd(0, EFD_NONBLOCK);
    uint64_t one = 1;
    MC_TIME(c.eventfd_write_ns, 20000, {
        if (write(efd, &one, sizeof one) < 0)
            break;
    });
    int epfd = epoll_create1(0);
    struct epoll_event ev;
    MC_TIME(c.epoll_wait0_ns, 20000, (void)epoll_wait(epfd, &ev, 1, 0));
    close(epfd);
    close(efd);
    MC_TIME(c.sched_yield_ns, 20000, sched_yield());
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    MC_TIME(c.mutex_ns, 1000000, {
        pthread_mutex_lock(&m);
        pthread_mutex_unlock(&m);
    });
    struct timespec ts;
    MC_TIME(c.clock_ns, 1000000, clock_gettime(CLOCK_MONOTONIC, &ts));
    MC_TIME(c.fence_ns, 1000000, atomic_thread_fence(memory_order_seq_cst));
    double v[MC_BATCHES];
    for (int b = 0; b < MC_BATCHES; b++)
        v[b] = mc_pingpong(true, 5000, cpu_b);
    c.futex_handoff_ns = bench_stats(v, MC_BATCHES).median;
    for (int b = 0; b < MC_BATCHES; b++)
        v[b] = mc_pingpong(false, 200000, cpu_b);
    c.line_pingpong_ns = bench_stats(v, MC_BATCHES).median;
    if (have_was)
        pthread_setaffinity_np(pthread_self(), sizeof was, &was);
    return c;
}

/* Measure and print the costs; name is the benchmark's (the JSON line's "case"). */
static inline mc_costs_t bench_machine_costs_print(const char *name, int cpu_a, int cpu_b)
{
    mc_costs_t c = bench_machine_costs(cpu_a, cpu_b);
    char model[128];
    bench_cpu_model(model, sizeof model);
    printf("machine costs (%s; medians of %d batches, CPUs %d and %d):\n"
           "  system call %.0f ns, futex wake (nobody waiting) %.0f ns, futex hand-off between "
           "CPUs %.0f ns,\n"
           "  eventfd write %.0f ns, epoll_wait(0) %.0f ns, sched_yield %.0f ns, mutex "
           "lock+unlock %.1f ns,\n"
           "  clock_gettime %.1f ns, seq_cst fence %.1f ns, cache line hand-over between CPUs "
           "%.1f ns\n",
           model, MC_BATCHES, cpu_a, cpu_b, c.syscall_ns, c.futex_wake_ns, c.futex_handoff_ns,
           c.eventfd_write_ns, c.epoll_wait0_ns, c.sched_yield_ns, c.mutex_ns, c.clock_ns,
           c.fence_ns, c.line_pingpong_ns);
    printf("{\"bench\":\"machine\",\"case\":\"%s\",\"cpu\":\"%s\",\"syscall_ns\":%.0f,"
           "\"futex_wake_ns\":%.0f,\"futex_handoff_ns\":%.0f,\"eventfd_write_ns\":%.0f,"
           "\"epoll_wait0_ns\":%.0f,\"sched_yield_ns\":%.0f,\"mutex_ns\":%.1f,\"clock_ns\":%.1f,"
           "\"fence_ns\":%.1f,\"line_pingpong_ns\":%.1f}\n",
           name, model, c.syscall_ns, c.futex_wake_ns, c.futex_handoff_ns, c.eventfd_write_ns,
           c.epoll_wait0_ns, c.sched_yield_ns, c.mutex_ns, c.clock_ns, c.fence_ns,
           c.line_pingpong_ns);
    fflush(stdout);
    return c;
}

#endif /* EDDY_BENCH_MACHINE_COSTS_H */
