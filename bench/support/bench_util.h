/*
 * Helpers shared by the benchmarks (bench/buffer, bench/reactor, bench/carrier, bench/ring):
 * wall-clock time, CPU pinning, spin hints, round statistics, count parsing and the CPU's name.
 * Everything is static inline so a benchmark that uses only some of them gets no warnings.
 * Needs _GNU_SOURCE (each benchmark defines it) for sched_getaffinity and
 * pthread_setaffinity_np.
 */
#ifndef EDDY_BENCH_UTIL_H
#define EDDY_BENCH_UTIL_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The most rounds bench_stats can take; each benchmark asserts its MAX_ROUNDS fits. */
#define BENCH_MAX_ROUNDS 101

/* Median, minimum and maximum of a set of per-round samples. */
typedef struct bench_stats_s {
    double median, min, max;
} bench_stats_t;

/* Monotonic wall-clock time in seconds. */
static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: advances *state and returns the next pseudo-random value. */
static inline uint64_t bench_xorshift64s(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* With pin, sets *first and *second (if still < 0) to the first two CPUs this process may use. */
static inline void bench_cpus_init(bool pin, int *first, int *second)
{
    if (!pin)
        return;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        if (*first < 0)
            *first = c;
        else if (*second < 0)
            *second = c;
    }
}

/* Pins the calling thread to cpu; does nothing when cpu < 0. */
static inline void bench_thread_pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* A spin-wait hint to the CPU (pause on x86, yield on arm64). */
static inline void bench_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* qsort comparison for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median, min and max of v[0..n) (1 <= n <= BENCH_MAX_ROUNDS); v itself is left unsorted. */
static inline bench_stats_t bench_stats(const double *v, int n)
{
    double s[BENCH_MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
    bench_stats_t st = {.min = s[0], .max = s[n - 1]};
    st.median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    return st;
}

/* Formats an ops/s rate in millions, e.g. "12.34 M". */
static inline void bench_fmt_rate(char *out, size_t n, double v)
{
    snprintf(out, n, "%.2f M", v / 1e6);
}

/* Parses a positive count with an optional k/K (1e3) or m/M (1e6) suffix; false if malformed. */
static inline bool bench_parse_count(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return false;
    if (*end == 'k' || *end == 'K') {
        v *= 1000;
        end++;
    } else if (*end == 'm' || *end == 'M') {
        v *= 1000000;
        end++;
    }
    if (*end != '\0' || v == 0)
        return false;
    *out = v;
    return true;
}

/* The CPU's model name from /proc/cpuinfo into out, or "unknown". */
static inline void bench_cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[256];
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *v = strchr(line, ':');
            if (v != NULL) {
                v++;
                while (*v == ' ')
                    v++;
                snprintf(out, n, "%s", v);
                out[strcspn(out, "\n")] = '\0';
            }
            break;
        }
    }
    fclose(f);
}

#endif
