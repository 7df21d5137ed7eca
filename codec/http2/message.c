/*
 * The messages the connection handler passes on: header blocks, DATA pieces and resets, each
 * holding a reference to its stream.
 */
#include "internal.h"

#include "pipeline/layer.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* A header block with the bytes its fields point into. */
typedef struct headers_msg_s {
    eddy_h2_headers_t h;
    eddy_buf_t *storage;
    size_t size; /* the block's, for eddy__small_free */
    eddy_http_header_t fields[];
} headers_msg_t;

static void headers_free(eddy_msg_t *msg)
{
    headers_msg_t *m = (headers_msg_t *)msg;
    eddy_buf_release(m->storage);
    eddy_h2_stream_release(m->h.stream);
    eddy__small_free(m, m->size);
}

/* A field of s's block as a string pair into the bytes at base. */
static eddy_http_header_t field_at(const uint32_t *idx, const char *base)
{
    return (eddy_http_header_t){.name = {base + idx[0], idx[1]}, .value = {base + idx[2], idx[3]}};
}

eddy_msg_t *eddy__h2_headers_new(eddy_h2_stream_t *s, bool end_stream, bool trailers)
{
    assert(s->hbuf != NULL);
    size_t size = sizeof(headers_msg_t) + s->hcount * sizeof(eddy_http_header_t);
    headers_msg_t *m = eddy__small_alloc(size);
    if (m == NULL) {
        return NULL;
    }
    m->size = size;
    const char *base = (const char *)eddy_buf_read_ptr(s->hbuf);
    for (size_t i = 0; i < s->hcount; i++) {
        m->fields[i] = field_at(&s->hidx[4 * i], base);
    }
    m->storage = s->hbuf;
    m->h = (eddy_h2_headers_t){.stream = eddy_h2_stream_retain(s), .end_stream = end_stream,
                               .trailers = trailers, .count = s->hcount, .fields = m->fields};
    eddy_msg_init(&m->h._msg, EDDY_MSG_H2_HEADERS, headers_free);
    s->hbuf = NULL;
    s->hcount = 0;
    s->hsize = 0;
    eddy__small_free(s->hidx, s->hcap * 4 * sizeof(uint32_t)); /* trailers make their own */
    s->hidx = NULL;
    s->hcap = 0;
    return &m->h._msg;
}

static void data_free(eddy_msg_t *msg)
{
    eddy_h2_data_t *d = (eddy_h2_data_t *)msg;
    eddy_buf_release(d->data);
    eddy_h2_stream_release(d->stream);
    eddy__small_free(d, sizeof(*d));
}

eddy_msg_t *eddy__h2_data_new(eddy_h2_stream_t *s, eddy_buf_t *data, bool end_stream)
{
    eddy_h2_data_t *d = eddy__small_alloc(sizeof(*d));
    if (d == NULL) {
        eddy_buf_release(data);
        return NULL;
    }
    *d = (eddy_h2_data_t){.stream = eddy_h2_stream_retain(s), .data = data,
                          .end_stream = end_stream};
    eddy_msg_init(&d->_msg, EDDY_MSG_H2_DATA, data_free);
    return &d->_msg;
}

static void reset_free(eddy_msg_t *msg)
{
    eddy_h2_reset_t *r = (eddy_h2_reset_t *)msg;
    eddy_h2_stream_release(r->stream);
    free(r);
}

eddy_msg_t *eddy__h2_reset_new(eddy_h2_stream_t *s, uint32_t code, bool by_peer)
{
    eddy_h2_reset_t *r = malloc(sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    *r = (eddy_h2_reset_t){.stream = eddy_h2_stream_retain(s), .error_code = code,
                           .by_peer = by_peer};
    eddy_msg_init(&r->_msg, EDDY_MSG_H2_RESET, reset_free);
    return &r->_msg;
}

eddy_h2_headers_t *eddy_h2_headers_of(eddy_msg_t *msg)
{
    return msg != NULL && msg->type == EDDY_MSG_H2_HEADERS ? (eddy_h2_headers_t *)msg : NULL;
}

eddy_h2_data_t *eddy_h2_data_of(eddy_msg_t *msg)
{
    return msg != NULL && msg->type == EDDY_MSG_H2_DATA ? (eddy_h2_data_t *)msg : NULL;
}

eddy_h2_reset_t *eddy_h2_reset_of(eddy_msg_t *msg)
{
    return msg != NULL && msg->type == EDDY_MSG_H2_RESET ? (eddy_h2_reset_t *)msg : NULL;
}

const eddy_http_header_t *eddy_h2_headers_get(const eddy_h2_headers_t *h, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < h->count; i++) {
        if (h->fields[i].name.len == n && memcmp(h->fields[i].name.p, name, n) == 0) {
            return &h->fields[i];
        }
    }
    return NULL;
}

eddy_buf_t *eddy__h2_headers_storage(eddy_h2_headers_t *h)
{
    return eddy_buf_retain(((headers_msg_t *)h)->storage);
}

eddy_http_str_t eddy__h2_decimal(size_t v, char *buf, size_t cap)
{
    assert(cap > 0);
    char *p = buf + cap;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0 && p > buf);
    return (eddy_http_str_t){p, (size_t)(buf + cap - p)};
}
