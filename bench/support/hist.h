/*
 * A latency histogram for the load generators (bench/echo, bench/udp): 64 exact buckets for
 * 0-63 ns, then 32 per power of two (about 3% wide) up to 2^64 ns. Header-only; benchmarks
 * only.
 */
#ifndef EDDY_BENCH_SUPPORT_HIST_H
#define EDDY_BENCH_SUPPORT_HIST_H

#include <stdint.h>

#define BENCH_HIST_SUB_BITS 5
#define BENCH_HIST_BUCKETS (64 + 58 * 32)

typedef struct bench_hist_s {
    uint64_t n[BENCH_HIST_BUCKETS];
} bench_hist_t;

static inline int bench_hist_index(uint64_t v)
{
    if (v < 64) {
        return (int)v;
    }
    int e = 63 - __builtin_clzll(v);
    return 64 + (e - 6) * 32 + (int)((v >> (e - BENCH_HIST_SUB_BITS)) & 31);
}

static inline void bench_hist_add(bench_hist_t *h, uint64_t ns)
{
    h->n[bench_hist_index(ns)]++;
}

/* The middle of bucket i, in ns. */
static inline double bench_hist_value(int i)
{
    if (i < 64) {
        return i;
    }
    int e = (i - 64) / 32 + 6, sub = (i - 64) % 32;
    double lo = (double)((uint64_t)(32 + sub) << (e - BENCH_HIST_SUB_BITS));
    return lo + (double)(1ull << (e - BENCH_HIST_SUB_BITS)) / 2;
}

/* The q-quantile (0..1) of what was added, in ns; 0 when nothing was. */
static inline double bench_hist_quantile(const bench_hist_t *h, double q)
{
    uint64_t total = 0;
    for (int i = 0; i < BENCH_HIST_BUCKETS; i++) {
        total += h->n[i];
    }
    if (total == 0) {
        return 0;
    }
    uint64_t rank = (uint64_t)(q * (double)total), seen = 0;
    for (int i = 0; i < BENCH_HIST_BUCKETS; i++) {
        seen += h->n[i];
        if (seen > rank) {
            return bench_hist_value(i);
        }
    }
    return bench_hist_value(BENCH_HIST_BUCKETS - 1);
}

#endif /* EDDY_BENCH_SUPPORT_HIST_H */
