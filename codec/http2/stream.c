/*
 * Stream handles: counted references, the body queued for DATA frames (sent without a copy),
 * trailers held until the body is out, windows returned as the application consumes, and
 * timers that end with the stream.
 */
#include "internal.h"

#include "pipeline/layer.h"

#include <assert.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Below this a DATA frame's bytes are copied next to its header rather than written as a
 * buffer of their own: one iovec per small response instead of two. */
#define COPY_BELOW 1024

eddy_h2_stream_t *eddy__h2_stream_new(eddy__h2_conn_t *c, int32_t id)
{
    eddy_h2_stream_t *s = eddy__small_alloc(sizeof(*s)); /* one per request: recycled */
    if (s == NULL) {
        return NULL;
    }
    memset(s, 0, sizeof(*s));
    atomic_init(&s->refs, 1); /* the session's, dropped when the stream closes */
    s->id = id;
    s->conn = c;
    s->writable = true;
    s->next = c->streams;
    if (c->streams != NULL) {
        c->streams->prev = s;
    }
    c->streams = s;
    c->streams_open++;
    return s;
}

eddy_h2_stream_t *eddy_h2_stream_retain(eddy_h2_stream_t *s)
{
    uint32_t old = atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    assert(old > 0);
    (void)old;
    return s;
}

void eddy_h2_stream_release(eddy_h2_stream_t *s)
{
    if (s == NULL) {
        return;
    }
    uint32_t old = atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel);
    assert(old > 0);
    if (old == 1) {
        assert(s->closed && s->conn == NULL && s->head == NULL && s->timers == NULL);
        eddy__small_free(s->hidx, s->hcap * 4 * sizeof(uint32_t));
        eddy__small_free(s, sizeof(*s));
    }
}

uint32_t eddy_h2_stream_id(const eddy_h2_stream_t *s)
{
    return (uint32_t)s->id;
}

bool eddy_h2_stream_is_closed(const eddy_h2_stream_t *s)
{
    return s->closed;
}

eddy_channel_t *eddy_h2_stream_channel(const eddy_h2_stream_t *s)
{
    return s->conn != NULL ? eddy_ctx_channel(s->conn->ctx) : NULL;
}

void *eddy_h2_stream_user_data(const eddy_h2_stream_t *s)
{
    return s->user_data;
}

void eddy_h2_stream_set_user_data(eddy_h2_stream_t *s, void *data)
{
    s->user_data = data;
}

eddy_h2_stream_t *eddy__h2_stream_get(eddy__h2_conn_t *c, int32_t id)
{
    return c->session != NULL ? nghttp2_session_get_stream_user_data(c->session, id) : NULL;
}

/* ---------------------------------------------------------------------------------------
 * Header blocks out
 */

bool eddy__h2_connection_specific(const char *name, size_t n)
{
    switch (n) {
    case 7:
        return strncasecmp(name, "upgrade", 7) == 0;
    case 10:
        return strncasecmp(name, "connection", 10) == 0 ||
               strncasecmp(name, "keep-alive", 10) == 0;
    case 16:
        return strncasecmp(name, "proxy-connection", 16) == 0;
    case 17:
        return strncasecmp(name, "transfer-encoding", 17) == 0;
    default:
        return false;
    }
}

/* Whether a field may go out: a name, no connection-specific one, no CR or LF in the value
 * (nghttp2 checks names and values byte by byte once more as it encodes). */
static bool field_ok(const eddy_http_header_t *f)
{
    return f->name.len > 0 && !eddy__h2_connection_specific(f->name.p, f->name.len) &&
           memchr(f->value.p, '\n', f->value.len) == NULL &&
           memchr(f->value.p, '\r', f->value.len) == NULL;
}

static bool has_upper(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] >= 'A' && p[i] <= 'Z') {
            return true;
        }
    }
    return false;
}

/* The n fields as nghttp2's pairs in nv (room for n), pointing at the caller's bytes, which
 * nghttp2 copies as it submits; names with capitals are lowered into *scratch (the caller
 * frees it; NULL when none needed). 0, EDDY_EINVAL (a bad field), EDDY_ENOMEM. */
static int nv_fill(nghttp2_nv *nv, const eddy_http_header_t *f, size_t n, char **scratch,
                   char *room, size_t room_len)
{
    size_t lower = 0;
    *scratch = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!field_ok(&f[i])) {
            return EDDY_EINVAL;
        }
        lower += has_upper(f[i].name.p, f[i].name.len) ? f[i].name.len : 0;
    }
    char *q = lower == 0 ? NULL : lower <= room_len ? room : (*scratch = malloc(lower));
    if (lower > 0 && q == NULL) {
        return EDDY_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name = f[i].name.p;
        if (q != NULL && has_upper(name, f[i].name.len)) {
            for (size_t k = 0; k < f[i].name.len; k++) {
                q[k] = (char)tolower((unsigned char)name[k]);
            }
            name = q;
            q += f[i].name.len;
        }
        nv[i] = (nghttp2_nv){(uint8_t *)(uintptr_t)name, (uint8_t *)(uintptr_t)f[i].value.p,
                             f[i].name.len, f[i].value.len, NGHTTP2_NV_FLAG_NONE};
    }
    return 0;
}

/* The n fields copied into one block of their own, for trailers, which wait until the body is
 * out: the pairs are returned (free them), their bytes in *store. NULL: *err says why. */
static nghttp2_nv *nv_copy(const eddy_http_header_t *f, size_t n, eddy_buf_t **store, int *err)
{
    nghttp2_nv *nv = malloc((n > 0 ? n : 1) * sizeof(*nv));
    char *scratch = NULL;
    *err = nv == NULL ? EDDY_ENOMEM : nv_fill(nv, f, n, &scratch, NULL, 0);
    size_t bytes = 0;
    for (size_t i = 0; *err == 0 && i < n; i++) {
        bytes += nv[i].namelen + nv[i].valuelen;
    }
    eddy_buf_t *b = *err == 0 ? eddy_buf_new(bytes > 0 ? bytes : 1) : NULL;
    if (*err == 0 && b == NULL) {
        *err = EDDY_ENOMEM;
    }
    if (*err != 0) {
        free(nv);
        free(scratch);
        return NULL;
    }
    uint8_t *p = eddy_buf_write_ptr(b);
    for (size_t i = 0; i < n; i++) {
        memcpy(p, nv[i].name, nv[i].namelen);
        memcpy(p + nv[i].namelen, nv[i].value, nv[i].valuelen);
        nv[i].name = p;
        nv[i].value = p + nv[i].namelen;
        p += nv[i].namelen + nv[i].valuelen;
    }
    eddy_buf_produce(b, bytes);
    free(scratch);
    *store = b;
    return nv;
}

static ssize_t data_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *ud);

/* For the client (client.c): its requests' fields and bodies go the responses' way. */
int eddy__h2_nvs_fill(eddy__h2_nvs_t *v, const eddy_http_header_t *f, size_t n)
{
    v->scratch = NULL;
    v->nv = n <= sizeof(v->stack) / sizeof(v->stack[0]) ? v->stack : malloc(n * sizeof(*v->nv));
    if (v->nv == NULL) {
        return EDDY_ENOMEM;
    }
    return nv_fill(v->nv, f, n, &v->scratch, v->lowered, sizeof(v->lowered));
}

void eddy__h2_nvs_release(eddy__h2_nvs_t *v)
{
    if (v->nv != v->stack) {
        free(v->nv);
    }
    free(v->scratch);
    v->nv = NULL;
    v->scratch = NULL;
}

nghttp2_data_provider eddy__h2_stream_provider(eddy_h2_stream_t *s)
{
    return (nghttp2_data_provider){.source = {.ptr = s}, .read_callback = data_read};
}

/* The response's (server) head, with the data provider unless it ends the stream. */
static int head_submit(eddy_h2_stream_t *s, nghttp2_nv *nv, size_t n, bool end_stream)
{
    eddy__h2_conn_t *c = s->conn;
    nghttp2_data_provider dp = {.source = {.ptr = s}, .read_callback = data_read};
    int rv = nghttp2_submit_response(c->session, s->id, nv, n, end_stream ? NULL : &dp);
    if (rv != 0) {
        return rv == NGHTTP2_ERR_NOMEM ? EDDY_ENOMEM : EDDY_EINVAL;
    }
    s->head_sent = true;
    s->provider_on = !end_stream;
    s->body_ended = end_stream;
    return 0;
}

/* Resume our data provider if it was waiting for bytes. */
static void provider_resume(eddy_h2_stream_t *s)
{
    if (s->deferred) {
        s->deferred = false;
        nghttp2_session_resume_data(s->conn->session, s->id);
    }
}

/* Trailers: held until the body is out (nghttp2#269). */
static int trailers_hold(eddy_h2_stream_t *s, const eddy_http_header_t *fields, size_t n)
{
    eddy_buf_t *store = NULL;
    int err;
    nghttp2_nv *nv = nv_copy(fields, n, &store, &err);
    if (nv == NULL) {
        return err;
    }
    s->trailers = nv;
    s->trailer_count = n;
    s->trailer_buf = store;
    s->body_ended = true;
    provider_resume(s);
    eddy__h2_conn_send(s->conn);
    return 0;
}

int eddy_h2_stream_send_headers(eddy_h2_stream_t *s, const eddy_http_header_t *fields, size_t n,
                                bool end_stream)
{
    if (s->closed || s->conn == NULL || s->body_ended) {
        return EDDY_ECLOSED;
    }
    if (s->head_sent) {
        return trailers_hold(s, fields, n);
    }
    eddy__h2_nvs_t v;
    int rv = eddy__h2_nvs_fill(&v, fields, n);
    bool interim = n > 0 && fields[0].value.len == 3 && fields[0].value.p[0] == '1';
    if (rv == 0 && interim) { /* 1xx: a head that does not end the head */
        rv = nghttp2_submit_headers(s->conn->session, NGHTTP2_FLAG_NONE, s->id, NULL, v.nv, n,
                                    NULL) < 0 ? EDDY_EINVAL : 0;
    } else if (rv == 0) {
        rv = head_submit(s, v.nv, n, end_stream);
    }
    eddy__h2_nvs_release(&v);
    if (rv == 0) {
        eddy__h2_conn_send(s->conn);
    }
    return rv;
}

/* ---------------------------------------------------------------------------------------
 * The body out
 */

/* Send the trailers from inside the data provider, once the body's last byte is out. */
static void trailers_submit(eddy_h2_stream_t *s, uint32_t *flags)
{
    if (s->trailers == NULL) {
        return;
    }
    *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    nghttp2_submit_trailer(s->conn->session, s->id, s->trailers, s->trailer_count);
    free(s->trailers);
    s->trailers = NULL;
    eddy_buf_release(s->trailer_buf);
    s->trailer_buf = NULL;
}

static ssize_t data_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *ud)
{
    (void)session;
    (void)id;
    (void)buf;
    (void)ud;
    eddy_h2_stream_t *s = source->ptr;
    if (s->pending == 0 && !s->body_ended) {
        s->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    size_t n = s->pending < length ? s->pending : length;
    if (n > 0) {
        *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    }
    if (n == s->pending && s->body_ended) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        trailers_submit(s, flags);
    }
    return (ssize_t)n;
}

/* Write the gathered frames (and attach p to them), starting a new gathering. */
static void out_write(eddy__h2_conn_t *c, eddy_promise_t *p)
{
    if (c->out != NULL && eddy_buf_readable(c->out) > 0) {
        eddy_ctx_write(c->ctx, eddy_buf_msg(c->out), p);
        c->out = NULL;
        c->wrote = true;
    } else if (p != NULL) {
        eddy__promise_done(p, 0);
    }
}

/* Append n bytes to the gathering buffer. 0 or EDDY_ENOMEM. */
static int out_append(eddy__h2_conn_t *c, const void *p, size_t n)
{
    if (c->out == NULL) {
        c->out = eddy_buf_alloc(eddy_ctx_alloc(c->ctx), 16384, EDDY_BUF_DEFAULT_MAX_CAPACITY);
        if (c->out == NULL) {
            return EDDY_ENOMEM;
        }
    }
    return eddy_buf_write_bytes(c->out, p, n);
}

int eddy__h2_out_append(eddy__h2_conn_t *c, const void *p, size_t n)
{
    return out_append(c, p, n);
}

void eddy__h2_out_write(eddy__h2_conn_t *c)
{
    out_write(c, NULL);
}

/* Take k bytes off the queue's first chunk: copied next to the frame header when small, else
 * written as a slice (or the buffer itself, when it is all of it). */
static int chunk_take(eddy__h2_conn_t *c, eddy_h2_stream_t *s, size_t k)
{
    eddy__h2_chunk_t *ch = s->head;
    bool last = k == eddy_buf_readable(ch->data);
    if (k < COPY_BELOW) {
        if (out_append(c, eddy_buf_read_ptr(ch->data), k) != 0) {
            return EDDY_ENOMEM;
        }
        eddy_buf_skip(ch->data, k);
        if (last && ch->p != NULL) {
            out_write(c, ch->p);
            eddy_future_release(ch->p);
            ch->p = NULL;
        }
    } else {
        out_write(c, NULL);
        eddy_buf_t *piece = last ? ch->data : eddy_buf_read_retained_slice(ch->data, k);
        if (piece == NULL) {
            return EDDY_ENOMEM;
        }
        if (last) {
            ch->data = NULL;
        }
        eddy_ctx_write(c->ctx, eddy_buf_msg(piece), last ? ch->p : NULL);
        c->wrote = true;
        if (last && ch->p != NULL) {
            eddy_future_release(ch->p);
            ch->p = NULL;
        }
    }
    if (last) {
        s->head = ch->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        if (ch->data != NULL) {
            eddy_buf_release(ch->data);
        }
        eddy__small_free(ch, sizeof(*ch));
    }
    return 0;
}

int eddy__h2_stream_write_data(eddy_h2_stream_t *s, const uint8_t *framehd, size_t n)
{
    eddy__h2_conn_t *c = s->conn;
    assert(c != NULL && n <= s->pending);
    if (out_append(c, framehd, 9) != 0) {
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    c->data_out += 9 + n;
    s->pending -= n;
    if (s->pending > 0 &&
        (int64_t)nghttp2_session_get_stream_remote_window_size(c->session, s->id) <= (int64_t)n) {
        eddy__h2_stream_block(s); /* this frame takes the last of its window */
    }
    while (n > 0) {
        size_t avail = eddy_buf_readable(s->head->data);
        size_t k = avail < n ? avail : n;
        if (chunk_take(c, s, k) != 0) {
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        n -= k;
    }
    return 0;
}

int eddy_h2_stream_send_data(eddy_h2_stream_t *s, eddy_buf_t *data, bool end_stream,
                             eddy_promise_t *p)
{
    return eddy__h2_stream_send(s, data, end_stream, p, true);
}

int eddy__h2_stream_send(eddy_h2_stream_t *s, eddy_buf_t *data, bool end_stream,
                         eddy_promise_t *p, bool capped)
{
    int err = 0;
    size_t n = data != NULL ? eddy_buf_readable(data) : 0;
    if (s->closed || s->conn == NULL || s->body_ended) {
        err = EDDY_ECLOSED;
    } else if (!s->head_sent || !s->provider_on) {
        err = EDDY_EINVAL;
    } else if (capped && s->pending + n > s->conn->o.max_stream_pending) {
        err = EDDY_ENOBUFS;
    }
    eddy__h2_chunk_t *ch = err == 0 && n > 0 ? eddy__small_alloc(sizeof(*ch)) : NULL;
    if (err == 0 && n > 0 && ch == NULL) {
        err = EDDY_ENOMEM;
    }
    if (err != 0 || n == 0) {
        if (data != NULL) {
            eddy_buf_release(data);
        }
        if (err == 0 && end_stream) {
            s->body_ended = true;
            provider_resume(s);
            eddy__h2_conn_send(s->conn);
        }
        eddy__promise_done(p, err);
        return err;
    }
    *ch = (eddy__h2_chunk_t){.data = data, .p = p};
    if (p != NULL) {
        eddy_future_retain(p);
    }
    if (s->tail != NULL) {
        s->tail->next = ch;
    } else {
        s->head = ch;
    }
    s->tail = ch;
    s->pending += n;
    s->body_ended = end_stream;
    (void)eddy_h2_stream_is_writable(s); /* a stream full now hears when it is not */
    provider_resume(s);
    eddy__h2_conn_send(s->conn);
    return 0;
}

void eddy__h2_stream_cork(eddy_h2_stream_t *s)
{
    if (s->conn != NULL) {
        s->conn->corked++;
    }
}

void eddy__h2_stream_uncork(eddy_h2_stream_t *s)
{
    eddy__h2_conn_t *c = s->conn;
    if (c != NULL) {
        assert(c->corked > 0);
        if (--c->corked == 0) {
            eddy__h2_conn_send(c);
        }
    }
}

void eddy__h2_stream_end_early(eddy_h2_stream_t *s)
{
    s->end_early = true;
}

size_t eddy__h2_stream_pending(const eddy_h2_stream_t *s)
{
    return s->pending;
}

bool eddy__h2_stream_remote_ended(const eddy_h2_stream_t *s)
{
    if (s->closed || s->conn == NULL) {
        return true;
    }
    nghttp2_stream *ns = nghttp2_session_find_stream(s->conn->session, s->id);
    nghttp2_stream_proto_state st =
        ns != NULL ? nghttp2_stream_get_state(ns) : NGHTTP2_STREAM_STATE_CLOSED;
    return st == NGHTTP2_STREAM_STATE_HALF_CLOSED_REMOTE || st == NGHTTP2_STREAM_STATE_CLOSED;
}

int eddy_h2_stream_reset(eddy_h2_stream_t *s, uint32_t error_code)
{
    if (s->closed || s->conn == NULL) {
        return EDDY_ECLOSED;
    }
    if (!s->conn->server && eddy__h2_client_reset_queued(s, error_code)) {
        return 0;
    }
    nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id, error_code);
    eddy__h2_conn_send(s->conn);
    return 0;
}

bool eddy_h2_stream_is_writable(const eddy_h2_stream_t *cs)
{
    eddy__h2_conn_t *c = cs->conn;
    if (cs->closed || c == NULL || cs->body_ended) {
        return false;
    }
    size_t cap = cs->pending_cap != 0 ? cs->pending_cap : c->o.max_stream_pending / 2;
    bool writable = cs->pending < cap &&
                    nghttp2_session_get_stream_remote_window_size(c->session, cs->id) > 0 &&
                    eddy_channel_is_writable(eddy_ctx_channel(c->ctx));
    if (!writable) {
        /* Whoever heard "no" hears the event: the handle is the application's, const only
         * to say the call changes nothing it can see. */
        eddy__h2_stream_block((eddy_h2_stream_t *)(uintptr_t)cs);
    }
    return writable;
}

void eddy__h2_streams_writability(eddy__h2_conn_t *c)
{
    c->writability_dirty = true;
}

void eddy__h2_stream_cap_pending(eddy_h2_stream_t *s, size_t bytes)
{
    s->pending_cap = bytes;
}

void eddy__h2_stream_block(eddy_h2_stream_t *s)
{
    if (s->writable && !s->body_ended) {
        s->writable = false;
        s->conn->streams_blocked++;
    }
}

void eddy__h2_streams_fire_writable(eddy__h2_conn_t *c)
{
    if (!c->writability_dirty || c->streams_blocked == 0) {
        return; /* a window update with no stream waiting walks no list */
    }
    c->writability_dirty = false;
    bool was_firing = c->firing;
    c->firing = true; /* what the handlers send goes out after the walk, in one buffer */
    for (eddy_h2_stream_t *s = c->streams; s != NULL && !c->closed && c->streams_blocked > 0;) {
        eddy_h2_stream_t *next = s->next;
        if (!s->writable && eddy_h2_stream_is_writable(s)) {
            s->writable = true;
            c->streams_blocked--;
            eddy_ctx_fire_user_event(c->ctx, EDDY_EVENT_H2_STREAM_WRITABLE, s);
        }
        s = next;
    }
    c->firing = was_firing;
    if (!was_firing && !c->closed) {
        eddy__h2_conn_send(c);
    }
}

void eddy_h2_stream_consume(eddy_h2_stream_t *s, size_t n)
{
    eddy__h2_conn_t *c = s->conn;
    if (s->closed || c == NULL || n == 0) {
        return;
    }
    nghttp2_session_consume_stream(c->session, s->id, n);
    c->buffered -= n < c->buffered ? n : c->buffered;
    eddy__h2_conn_send(c);
}

/* ---------------------------------------------------------------------------------------
 * Timers
 */

static void timer_unlink(eddy_h2_stream_t *s, eddy__h2_timer_t *t)
{
    for (eddy__h2_timer_t **pp = &s->timers; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            return;
        }
    }
}

static void timer_fire(eddy_ctx_t *ctx, void *arg)
{
    (void)ctx;
    eddy__h2_timer_t *t = arg;
    eddy_h2_stream_t *s = t->stream;
    timer_unlink(s, t);
    eddy_h2_stream_retain(s);
    if (!s->closed) {
        t->cb(s, t->arg);
    }
    free(t);
    eddy_h2_stream_release(s);
}

uint64_t eddy_h2_stream_schedule(eddy_h2_stream_t *s, int64_t delay_ms,
                                 void (*cb)(eddy_h2_stream_t *s, void *arg), void *arg)
{
    if (s->closed || s->conn == NULL) {
        return 0;
    }
    eddy__h2_timer_t *t = malloc(sizeof(*t));
    if (t == NULL) {
        return 0;
    }
    *t = (eddy__h2_timer_t){.stream = s, .cb = cb, .arg = arg};
    t->id = eddy_ctx_schedule(s->conn->ctx, delay_ms, timer_fire, t);
    if (t->id == 0) {
        free(t);
        return 0;
    }
    t->next = s->timers;
    s->timers = t;
    return t->id;
}

int eddy_h2_stream_cancel(eddy_h2_stream_t *s, uint64_t id)
{
    for (eddy__h2_timer_t *t = s->timers; t != NULL; t = t->next) {
        if (t->id == id && s->conn != NULL) {
            eddy_ctx_cancel(s->conn->ctx, id);
            timer_unlink(s, t);
            free(t);
            return 0;
        }
    }
    return EDDY_EALREADY;
}

/* ---------------------------------------------------------------------------------------
 * The end
 */

static void stream_drop_queued(eddy_h2_stream_t *s)
{
    while (s->head != NULL) {
        eddy__h2_chunk_t *ch = s->head;
        s->head = ch->next;
        if (ch->data != NULL) {
            eddy_buf_release(ch->data);
        }
        if (ch->p != NULL) {
            eddy_promise_fail(ch->p, EDDY_ECLOSED);
            eddy_future_release(ch->p);
        }
        eddy__small_free(ch, sizeof(*ch));
    }
    s->tail = NULL;
    s->pending = 0;
    free(s->trailers);
    s->trailers = NULL;
    if (s->trailer_buf != NULL) {
        eddy_buf_release(s->trailer_buf);
        s->trailer_buf = NULL;
    }
    if (s->hbuf != NULL) {
        eddy_buf_release(s->hbuf);
        s->hbuf = NULL;
    }
}

void eddy__h2_stream_closed(eddy_h2_stream_t *s, uint32_t error_code)
{
    (void)error_code;
    eddy__h2_conn_t *c = s->conn;
    assert(c != NULL && !s->closed);
    s->closed = true;
    stream_drop_queued(s);
    while (s->timers != NULL) {
        eddy__h2_timer_t *t = s->timers;
        s->timers = t->next;
        eddy_ctx_cancel(c->ctx, t->id);
        free(t);
    }
    if (s->prev != NULL) {
        s->prev->next = s->next;
    } else {
        c->streams = s->next;
    }
    if (s->next != NULL) {
        s->next->prev = s->prev;
    }
    s->prev = s->next = NULL;
    if (!s->writable) {
        assert(c->streams_blocked > 0);
        c->streams_blocked--;
    }
    assert(c->streams_open > 0);
    if (--c->streams_open == 0) {
        c->last_activity = eddy__h2_now(c); /* idle from now: one clock read, not per stream */
    }
    s->conn = NULL;
    eddy_h2_stream_release(s); /* the session's */
}
