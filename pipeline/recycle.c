/*
 * Small objects the pipeline makes and frees once per message (outbound entries, datagram
 * packets), kept for reuse on the thread that freed them (Netty's Recycler, without the
 * cross-thread return): a loop that receives and answers a datagram allocates nothing after
 * the first ones. Each thread keeps at most RECYCLE_MAX objects of a kind; they are freed when
 * the thread exits. Under AddressSanitizer nothing is kept, so a use after free is caught.
 */
#include "pipeline/internal.h"

#include <pthread.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define RECYCLE_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RECYCLE_OFF 1
#endif
#endif

/* Per kind and thread: enough for a read batch's worth of replies in flight. */
#define RECYCLE_MAX 256

typedef struct freed_s {
    struct freed_s *next;
} freed_t;

typedef struct shelf_s {
    freed_t *head;
    unsigned n;
} shelf_t;

/* initial-exec: a plain load from the thread pointer, no __tls_get_addr call per message in
 * the shared library (buffer/alloc.c does the same). */
static __attribute__((tls_model("initial-exec"))) _Thread_local shelf_t
    shelves[EDDY__RECYCLE_KINDS];
#ifndef RECYCLE_OFF
static __attribute__((tls_model("initial-exec"))) _Thread_local bool registered;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* The thread exits: free what its shelves hold. */
static void shelves_free(void *arg)
{
    (void)arg;
    for (unsigned k = 0; k < EDDY__RECYCLE_KINDS; k++) {
        while (shelves[k].head != NULL) {
            freed_t *f = shelves[k].head;
            shelves[k].head = f->next;
            free(f);
        }
        shelves[k].n = 0;
    }
}

static void exit_key_make(void)
{
    (void)pthread_key_create(&exit_key, shelves_free);
}
#endif

void *eddy__recycle_get(unsigned kind, size_t size)
{
    assert(kind < EDDY__RECYCLE_KINDS && size >= sizeof(freed_t));
    shelf_t *s = &shelves[kind];
    if (s->head != NULL) {
        freed_t *f = s->head;
        s->head = f->next;
        s->n--;
        return f;
    }
    return malloc(size);
}

void eddy__recycle_put(unsigned kind, void *p)
{
    assert(kind < EDDY__RECYCLE_KINDS);
#ifndef RECYCLE_OFF
    shelf_t *s = &shelves[kind];
    if (s->n < RECYCLE_MAX) {
        if (!registered) {
            /* The key's value only makes its destructor run at this thread's exit. */
            pthread_once(&exit_once, exit_key_make);
            registered = pthread_setspecific(exit_key, shelves) == 0;
        }
        if (registered) {
            freed_t *f = p;
            f->next = s->head;
            s->head = f;
            s->n++;
            return;
        }
    }
#endif
    free(p);
}

/* The class of a small block of size bytes (64 << class), or -1 past the largest. */
static int small_class(size_t size)
{
    int k = 0;
    for (size_t cap = 64; cap < size; cap <<= 1) {
        if (++k == EDDY__RECYCLE_KINDS - EDDY__RECYCLE_SMALL) {
            return -1;
        }
    }
    return k;
}

void *eddy__small_alloc(size_t size)
{
    int k = small_class(size);
    return k < 0 ? malloc(size) : eddy__recycle_get(EDDY__RECYCLE_SMALL + (unsigned)k, (size_t)64 << k);
}

void eddy__small_free(void *p, size_t size)
{
    if (p == NULL) {
        return;
    }
    int k = small_class(size);
    if (k < 0) {
        free(p);
    } else {
        eddy__recycle_put(EDDY__RECYCLE_SMALL + (unsigned)k, p);
    }
}

bool eddy__small_same(size_t a, size_t b)
{
    int k = small_class(a);
    return k >= 0 && k == small_class(b);
}
