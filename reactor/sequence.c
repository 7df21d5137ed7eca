/*
 * Sequences: heap allocation and the minimum of a set, plus the small helpers the ring files
 * share. The accessors themselves are inline in include/eddy/ring.h.
 */
#include "reactor/internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void *eddy__aligned_zalloc(size_t size)
{
    /* aligned_alloc wants a multiple of the alignment. */
    size_t rounded = (size + EDDY__LINE - 1) & ~(size_t)(EDDY__LINE - 1);
    void *p = aligned_alloc(EDDY__LINE, rounded ? rounded : EDDY__LINE);
    if (p != NULL)
        memset(p, 0, rounded ? rounded : EDDY__LINE);
    return p;
}

int64_t eddy__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

eddy_sequence_t *eddy_sequence_new(int64_t initial)
{
    eddy_sequence_t *s = eddy__aligned_zalloc(sizeof *s);
    if (s != NULL)
        eddy_sequence_init(s, initial);
    return s;
}

void eddy_sequence_free(eddy_sequence_t *s)
{
    free(s);
}

int64_t eddy_sequence_min(eddy_sequence_t *const *seqs, size_t n, int64_t min)
{
    for (size_t i = 0; i < n; i++) {
        int64_t v = eddy_sequence_get(seqs[i]);
        if (v < min)
            min = v;
    }
    return min;
}
