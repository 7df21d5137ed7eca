/*
 * The FIFO of requests a client has written and not seen answered: the client codec's
 * methods, the exchange's promises; and on a server the compressor's notes of the requests
 * it has not seen answered.
 */
#include "codec/http/internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int eddy__http_fifo_push(eddy__http_fifo_t *f, const void *e)
{
    if (f->count == f->cap) {
        size_t cap = f->cap != 0 ? f->cap * 2 : 8;
        uint8_t *v = malloc(cap * f->size);
        if (v == NULL) {
            return EDDY_ENOMEM;
        }
        for (size_t i = 0; i < f->count; i++) {
            memcpy(v + i * f->size, eddy__http_fifo_at(f, i), f->size);
        }
        free(f->v);
        f->v = v;
        f->cap = cap;
        f->first = 0;
    }
    memcpy(f->v + (f->first + f->count++) % f->cap * f->size, e, f->size);
    return 0;
}

void *eddy__http_fifo_at(const eddy__http_fifo_t *f, size_t i)
{
    assert(i < f->count);
    return f->v + (f->first + i) % f->cap * f->size;
}

void eddy__http_fifo_pop(eddy__http_fifo_t *f)
{
    assert(f->count > 0);
    f->first = (f->first + 1) % f->cap;
    f->count--;
}

void eddy__http_fifo_remove(eddy__http_fifo_t *f, size_t i)
{
    assert(i < f->count);
    for (size_t j = i; j + 1 < f->count; j++) {
        memcpy(eddy__http_fifo_at(f, j), eddy__http_fifo_at(f, j + 1), f->size);
    }
    f->count--;
}

void eddy__http_fifo_pop_newest(eddy__http_fifo_t *f)
{
    assert(f->count > 0);
    f->count--;
}

void eddy__http_fifo_destroy(eddy__http_fifo_t *f)
{
    free(f->v);
    *f = (eddy__http_fifo_t){.size = f->size};
}
