/*
 * Composite buffers: a queue of component buffers read as one byte range.
 *
 * Each component keeps its own window [off, end) of absolute indexes into its buffer instead
 * of moving the buffer's reader index, so a buffer shared with other holders (or added twice)
 * is never disturbed by reads through the composite. Components are consumed from the front;
 * a fully read one is released at once, and its slot joins a dead prefix of the array that is
 * reclaimed only when an add needs room, so reads never move the array.
 */
#include <eddy/buffer.h>

#include "buffer/layer.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* The array's first size: most composites hold a header and a body or a few reads. */
#define COMPOSITE_INITIAL_SLOTS 8
#define COMPOSITE_DEFAULT_MAX 1024

typedef struct component_s {
    eddy_buf_t *buf; /* one reference, owned by the composite */
    size_t off;      /* absolute index in buf of the next unread byte */
    size_t end;      /* absolute index in buf past the last byte of the window */
} component_t;

struct eddy_composite_s {
    eddy_msg_t _msg; /* first, so the message header and the composite share an address */
    component_t *comps;
    size_t head;     /* first live slot; slots before it are released and dead */
    size_t tail;     /* one past the last live slot */
    size_t cap;      /* slots allocated */
    size_t max;      /* most live components allowed */
    size_t readable; /* sum of the live windows, kept so readable() is O(1) */
};

/* Index 0 of the component's buffer, found afresh each time since the buffer may have moved
 * to new memory if another holder grew it. Non-const so iovec entries need no cast. */
static uint8_t *component_base(const component_t *cp)
{
    return eddy_buf_write_ptr(cp->buf) - eddy_buf_writer_index(cp->buf);
}

static const uint8_t *component_ptr(const component_t *cp)
{
    return component_base(cp) + cp->off;
}

static size_t component_len(const component_t *cp)
{
    assert(cp->off < cp->end); /* a live component: empty and fully read ones are gone */
    return cp->end - cp->off;
}

static void composite_free(eddy_msg_t *msg)
{
    eddy_composite_t *c = EDDY_CONTAINER_OF(msg, eddy_composite_t, _msg);

    for (size_t i = c->head; i < c->tail; i++)
        eddy_buf_release(c->comps[i].buf);
    free(c->comps);
    free(c);
}

eddy_composite_t *eddy_composite_new(size_t max_components)
{
    eddy_composite_t *c = malloc(sizeof(*c));
    if (c == NULL)
        return NULL;
    eddy_msg_init(&c->_msg, EDDY_MSG_COMPOSITE, composite_free);
    /* The array is allocated by the first add, so an unused composite costs one malloc. */
    c->comps = NULL;
    c->head = 0;
    c->tail = 0;
    c->cap = 0;
    c->max = max_components != 0 ? max_components : COMPOSITE_DEFAULT_MAX;
    c->readable = 0;
    return c;
}

eddy_composite_t *eddy_composite_retain(eddy_composite_t *c)
{
    return eddy_msg_retain(&c->_msg) != NULL ? c : NULL;
}

int eddy_composite_release(eddy_composite_t *c)
{
    return eddy_msg_release(&c->_msg);
}

eddy_composite_t *eddy_composite_of(eddy_msg_t *msg)
{
    if (msg == NULL || msg->type != EDDY_MSG_COMPOSITE)
        return NULL;
    return EDDY_CONTAINER_OF(msg, eddy_composite_t, _msg);
}

eddy_msg_t *eddy_composite_msg(eddy_composite_t *c)
{
    return &c->_msg;
}

/*
 * Make room for one more slot at the tail. The dead prefix is reclaimed only once it is at
 * least as long as the live part, so each live slot is moved at most once per slot consumed:
 * a steady add-one, read-one stream costs O(1) amortised instead of a memmove per add.
 */
static int reserve_slot(eddy_composite_t *c)
{
    assert(c->head <= c->tail && c->tail <= c->cap);
    if (c->tail < c->cap)
        return 0;
    size_t live = c->tail - c->head;
    if (c->head > 0 && c->head >= live) {
        memmove(c->comps, c->comps + c->head, live * sizeof(*c->comps));
        c->head = 0;
        c->tail = live;
        return 0;
    }
    component_t *comps =
        eddy__array_grow(c->comps, &c->cap, sizeof(*comps), COMPOSITE_INITIAL_SLOTS);
    if (comps == NULL)
        return EDDY_ENOMEM;
    c->comps = comps;
    return 0;
}

int eddy_composite_add(eddy_composite_t *c, eddy_buf_t *b)
{
    /* Callers may pass an allocation straight in; a failed one must not crash here. */
    if (b == NULL)
        return EDDY_EINVAL;
    size_t n = eddy_buf_readable(b);
    if (n == 0) {
        /* An empty component would only cost a slot and a walk; ownership still moves. */
        eddy_buf_release(b);
        return 0;
    }
    if (c->tail - c->head >= c->max) {
        eddy_buf_release(b);
        return EDDY_ENOBUFS;
    }
    int err = reserve_slot(c);
    if (err != 0) {
        eddy_buf_release(b);
        return err;
    }
    component_t *cp = &c->comps[c->tail++];
    cp->buf = b;
    cp->off = eddy_buf_reader_index(b);
    cp->end = eddy_buf_writer_index(b);
    c->readable += n;
    return 0;
}

size_t eddy_composite_readable(const eddy_composite_t *c)
{
    return c->readable;
}

size_t eddy_composite_components(const eddy_composite_t *c)
{
    /* Fully read components are dropped at once and empty ones never added, so every live
     * slot holds unread bytes. */
    return c->tail - c->head;
}

/* Copy n bytes starting off bytes past the reader index; the caller has checked the range. */
static void copy_out(const eddy_composite_t *c, size_t off, uint8_t *dst, size_t n)
{
    for (size_t i = c->head; n > 0; i++) {
        assert(i < c->tail); /* the caller checked the range against readable */
        const component_t *cp = &c->comps[i];
        size_t len = component_len(cp);
        if (off >= len) {
            off -= len;
            continue;
        }
        size_t take = len - off < n ? len - off : n;
        memcpy(dst, component_ptr(cp) + off, take);
        dst += take;
        n -= take;
        off = 0;
    }
}

/* Consume n bytes (n <= readable), releasing every component read to its end. */
static void advance(eddy_composite_t *c, size_t n)
{
    assert(n <= c->readable);
    c->readable -= n;
    while (n > 0) {
        assert(c->head < c->tail);
        component_t *cp = &c->comps[c->head];
        size_t len = component_len(cp);
        if (n < len) {
            cp->off += n;
            break;
        }
        n -= len;
        eddy_buf_release(cp->buf);
        c->head++;
    }
    /* An empty array restarts at slot 0 for free, so the usual drain-then-refill pattern never
     * needs a compaction. */
    if (c->head == c->tail) {
        c->head = 0;
        c->tail = 0;
    }
}

int eddy_composite_get_bytes(const eddy_composite_t *c, size_t off, void *dst, size_t n)
{
    if (off > c->readable || n > c->readable - off)
        return EDDY_EBOUNDS;
    copy_out(c, off, dst, n);
    return 0;
}

int eddy_composite_get_u8(const eddy_composite_t *c, size_t off, uint8_t *out)
{
    return eddy_composite_get_bytes(c, off, out, 1);
}

/* Read an n-byte big-endian integer: straight from the first component when it holds all n
 * bytes, else gathered into a temporary. */
static int read_be(eddy_composite_t *c, size_t n, uint64_t *out)
{
    assert(n >= 1 && n <= sizeof(uint64_t));
    if (n > c->readable)
        return EDDY_EBOUNDS;
    uint8_t tmp[8];
    const uint8_t *p;
    const component_t *first = &c->comps[c->head];
    if (component_len(first) >= n) {
        p = component_ptr(first);
    } else {
        copy_out(c, 0, tmp, n);
        p = tmp;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | p[i];
    advance(c, n);
    *out = v;
    return 0;
}

int eddy_composite_read_u8(eddy_composite_t *c, uint8_t *out)
{
    uint64_t v;
    int err = read_be(c, 1, &v);
    if (err == 0)
        *out = (uint8_t)v;
    return err;
}

int eddy_composite_read_u16(eddy_composite_t *c, uint16_t *out)
{
    uint64_t v;
    int err = read_be(c, 2, &v);
    if (err == 0)
        *out = (uint16_t)v;
    return err;
}

int eddy_composite_read_u32(eddy_composite_t *c, uint32_t *out)
{
    uint64_t v;
    int err = read_be(c, 4, &v);
    if (err == 0)
        *out = (uint32_t)v;
    return err;
}

int eddy_composite_read_u64(eddy_composite_t *c, uint64_t *out)
{
    return read_be(c, 8, out);
}

int eddy_composite_read_bytes(eddy_composite_t *c, void *dst, size_t n)
{
    if (n > c->readable)
        return EDDY_EBOUNDS;
    copy_out(c, 0, dst, n);
    advance(c, n);
    return 0;
}

int eddy_composite_skip(eddy_composite_t *c, size_t n)
{
    if (n > c->readable)
        return EDDY_EBOUNDS;
    advance(c, n);
    return 0;
}

eddy_buf_t *eddy_composite_read_buf(eddy_composite_t *c, size_t n)
{
    if (n > c->readable)
        return NULL;
    if (c->head == c->tail)
        return eddy_buf_alloc(NULL, 0, 0);
    component_t *first = &c->comps[c->head];
    eddy_buf_t *out;
    if (component_len(first) >= n) {
        /* A slice by absolute index, not eddy_buf_read_retained_slice(): the component's
         * reader index belongs to whoever else holds the buffer. */
        out = eddy_buf_retained_slice(first->buf, first->off, n);
        if (out == NULL)
            return NULL;
    } else {
        out = eddy_buf_alloc(eddy_buf_allocator(first->buf), n, n);
        if (out == NULL)
            return NULL;
        copy_out(c, 0, eddy_buf_write_ptr(out), n);
        eddy_buf_produce(out, n);
    }
    advance(c, n);
    return out;
}

int64_t eddy_composite_find(const eddy_composite_t *c, uint8_t byte)
{
    size_t base = 0;
    for (size_t i = c->head; i < c->tail; i++) {
        const component_t *cp = &c->comps[i];
        const uint8_t *p = component_ptr(cp);
        const uint8_t *hit = memchr(p, byte, component_len(cp));
        if (hit != NULL)
            return (int64_t)(base + (size_t)(hit - p));
        base += component_len(cp);
    }
    return EDDY_ENOENT;
}

/* Whether the n bytes of needle follow position pos of component i, possibly spanning the
 * components after it; the caller has checked that n bytes remain. */
static bool matches_at(const eddy_composite_t *c, size_t i, size_t pos, const uint8_t *needle,
                       size_t n)
{
    while (n > 0) {
        assert(i < c->tail); /* the caller checked that n bytes remain */
        const component_t *cp = &c->comps[i];
        size_t take = component_len(cp) - pos;
        if (take > n)
            take = n;
        if (memcmp(component_ptr(cp) + pos, needle, take) != 0)
            return false;
        needle += take;
        n -= take;
        i++;
        pos = 0;
    }
    return true;
}

int64_t eddy__composite_find(const eddy_composite_t *c, size_t from, const void *needle, size_t n)
{
    assert(n > 0 && from <= c->readable);
    if (n > c->readable - from)
        return EDDY_ENOENT;
    const uint8_t *nd = needle;
    size_t last = c->readable - n; /* the last offset where a match still fits */
    size_t base = 0;
    for (size_t i = c->head; i < c->tail && base <= last; i++) {
        const component_t *cp = &c->comps[i];
        const uint8_t *p = component_ptr(cp);
        size_t len = component_len(cp);
        size_t pos = from > base ? from - base : 0;
        /* memchr skips to each candidate first byte; only those get a full comparison. */
        while (pos < len && base + pos <= last) {
            const uint8_t *hit = memchr(p + pos, nd[0], len - pos);
            if (hit == NULL)
                break;
            pos = (size_t)(hit - p);
            if (base + pos > last)
                break;
            if (matches_at(c, i, pos, nd, n))
                return (int64_t)(base + pos);
            pos++;
        }
        base += len;
    }
    return EDDY_ENOENT;
}

int64_t eddy_composite_find_bytes(const eddy_composite_t *c, const void *needle, size_t n)
{
    /* Like memmem(): the empty needle matches at once. */
    if (n == 0)
        return 0;
    return eddy__composite_find(c, 0, needle, n);
}

int eddy_composite_iovec(const eddy_composite_t *c, struct iovec *iov, int max)
{
    int k = 0;
    for (size_t i = c->head; i < c->tail && k < max; i++, k++) {
        const component_t *cp = &c->comps[i];
        iov[k].iov_base = component_base(cp) + cp->off;
        iov[k].iov_len = component_len(cp);
    }
    return k;
}

eddy_buf_t *eddy_composite_consolidate(eddy_composite_t *c)
{
    size_t n = c->readable;
    eddy_allocator_t *a = c->head < c->tail ? eddy_buf_allocator(c->comps[c->head].buf) : NULL;
    /* Growable like any new buffer: a consolidated frame is often appended to or rewritten. */
    size_t max_cap = n > EDDY_BUF_DEFAULT_MAX_CAPACITY ? n : EDDY_BUF_DEFAULT_MAX_CAPACITY;
    eddy_buf_t *out = eddy_buf_alloc(a, n, max_cap);
    if (out == NULL)
        return NULL;
    /* An empty buffer may have no memory at all; do not form a pointer into it. */
    if (n > 0) {
        copy_out(c, 0, eddy_buf_write_ptr(out), n);
        eddy_buf_produce(out, n);
        advance(c, n);
    }
    return out;
}
