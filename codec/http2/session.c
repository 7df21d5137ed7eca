/*
 * The nghttp2 session of a connection: its allocator (counted against max_memory), its
 * options and settings, and the callbacks that turn frames into stream messages.
 *
 * Callbacks never call into the application: what they make is queued
 * (eddy__h2_conn_emit) and fired once nghttp2_session_mem_recv() returned, so a handler that
 * closes the channel or sends on a stream never re-enters the session mid-frame.
 */
#include "internal.h"

#include "buffer/layer.h"
#include "pipeline/layer.h"

#include <eddy/channel.h>
#include "eddy_config.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MEM_HEAD 16

static size_t page; /* the system's page size (callbacks_init) */

/* ---------------------------------------------------------------------------------------
 * Blocks on pages of their own: nghttp2 makes two blocks of a page or more with the session
 * and keeps them for its life, its stream map's table (4 KiB, all zeros while no stream is
 * open) and the frame buffer it packs every frame it sends into (16 KiB, of which the first
 * bytes are written; DATA goes out beside it, send_data). Each gets pages of its own (no size
 * in front: c keeps it), which an idle connection gives back (trim): the frame buffer's once
 * nothing in it is still to go out, the other's where they hold nothing but zeros (what a
 * page given back reads as).
 */

static int paged_of(const eddy__h2_conn_t *c, const void *ptr)
{
    for (int i = 0; i < 2; i++) {
        if (c->paged[i].p != NULL && (const char *)ptr >= (const char *)c->paged[i].p &&
            (const char *)ptr < (const char *)c->paged[i].p + c->paged[i].n) {
            return i;
        }
    }
    return -1;
}

static void *paged_alloc(eddy__h2_conn_t *c, size_t n)
{
    int i = c->paged[0].p == NULL ? 0 : c->paged[1].p == NULL ? 1 : -1;
    void *p = NULL;
    if (!c->in_session_new || i < 0 || n < page || n > UINT32_MAX ||
        posix_memalign(&p, page, n) != 0) {
        return NULL;
    }
    c->paged[i] = (eddy__h2_paged_t){.p = p, .n = (uint32_t)n};
    c->mem_used += n;
    return p;
}

void eddy__h2_session_sent(eddy__h2_conn_t *c, const uint8_t *data)
{
    int i = paged_of(c, data);
    if (i >= 0) {
        c->paged[i].frames = true;
    }
    c->trimmed = false;
}

static bool page_is_zero(const char *p)
{
    const uint64_t *w = (const uint64_t *)(const void *)p;
    for (size_t i = 0; i < page / sizeof(*w); i++) {
        if (w[i] != 0) {
            return false;
        }
    }
    return true;
}

static void page_drop(char *p)
{
#if defined(__linux__)
    madvise(p, page, MADV_DONTNEED); /* it reads as zeros next */
#elif defined(MADV_FREE)
    madvise(p, page, MADV_FREE); /* as zeros or as it was */
#else
    (void)p;
#endif
}

void eddy__h2_session_trim(eddy__h2_conn_t *c)
{
    if (c->trimmed) {
        return;
    }
    c->trimmed = true;
    for (int i = 0; i < 2; i++) {
        eddy__h2_paged_t *b = &c->paged[i];
        for (size_t k = 0; b->p != NULL && k + page <= b->n; k += page) {
            char *p = (char *)b->p + k;
            if (b->frames ? c->drained : page_is_zero(p)) {
                page_drop(p);
            }
        }
    }
}

/* The size of a block of ours. */
static size_t block_size(const eddy__h2_conn_t *c, void *ptr)
{
    int i = paged_of(c, ptr);
    return i >= 0 ? c->paged[i].n : ((size_t *)((char *)ptr - MEM_HEAD))[0];
}

/* ---------------------------------------------------------------------------------------
 * The allocator: each block carries its size in front, so the session's bytes are known.
 */

static void *mem_malloc(size_t n, void *ud)
{
    eddy__h2_conn_t *c = ud;
    if (n > c->o.max_memory || c->mem_used > c->o.max_memory - n) {
        return NULL; /* nghttp2 fails the operation with NGHTTP2_ERR_NOMEM */
    }
    void *pb = paged_alloc(c, n);
    if (pb != NULL) {
        return pb;
    }
    size_t *p = eddy__small_alloc(n + MEM_HEAD); /* nghttp2 allocates per stream and frame */
    if (p == NULL) {
        return NULL;
    }
    p[0] = n;
    c->mem_used += n;
    return (char *)p + MEM_HEAD;
}

static void mem_free(void *ptr, void *ud)
{
    if (ptr == NULL) {
        return;
    }
    eddy__h2_conn_t *c = ud;
    size_t n = block_size(c, ptr);
    assert(c->mem_used >= n);
    c->mem_used -= n;
    int i = paged_of(c, ptr);
    if (i >= 0) {
        c->paged[i] = (eddy__h2_paged_t){0};
        free(ptr);
        return;
    }
    eddy__small_free((char *)ptr - MEM_HEAD, n + MEM_HEAD);
}

static void *mem_calloc(size_t k, size_t n, void *ud)
{
    if (n != 0 && k > SIZE_MAX / n) {
        return NULL;
    }
    void *p = mem_malloc(k * n, ud);
    if (p != NULL) {
        memset(p, 0, k * n);
    }
    return p;
}

static void *mem_realloc(void *ptr, size_t n, void *ud)
{
    if (ptr == NULL) {
        return mem_malloc(n, ud);
    }
    eddy__h2_conn_t *c = ud;
    size_t old = block_size(c, ptr);
    bool fits = n <= old || n - old <= c->o.max_memory - c->mem_used;
    if (paged_of(c, ptr) < 0 && fits && eddy__small_same(old + MEM_HEAD, n + MEM_HEAD)) {
        c->mem_used = c->mem_used - old + n; /* the block has room: it stays */
        ((size_t *)((char *)ptr - MEM_HEAD))[0] = n;
        return ptr;
    }
    void *p = mem_malloc(n, ud);
    if (p != NULL) {
        memcpy(p, ptr, old < n ? old : n);
        mem_free(ptr, ud);
    }
    return p;
}

/* ---------------------------------------------------------------------------------------
 * Receiving header blocks
 */

static eddy_h2_stream_t *stream_of(nghttp2_session *session, int32_t id)
{
    return nghttp2_session_get_stream_user_data(session, id);
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    eddy__h2_conn_t *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS) {
        return 0;
    }
    c->header_block_since = c->last_activity; /* the read under way began then */
    eddy_h2_stream_t *s = stream_of(session, frame->hd.stream_id);
    if (s != NULL) {
        return 0; /* trailers */
    }
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST || c->goaway_sent) {
        return 0;
    }
    if (c->mem_used > c->o.max_memory / 4 * 3) {
        /* Past three quarters of the budget: no new work until streams end. */
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                  NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    s = eddy__h2_stream_new(c, frame->hd.stream_id);
    if (s == NULL) {
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                  NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, s);
    return 0;
}

/* Keep one field of s's block, or mark the request refused past the limits. */
static void header_keep(eddy__h2_conn_t *c, eddy_h2_stream_t *s, const uint8_t *name,
                        size_t nlen, const uint8_t *value, size_t vlen)
{
    s->hsize += nlen + vlen + 32;
    s->hcount++;
    if (s->hsize > c->o.max_header_list_size || s->hcount > c->o.max_header_count) {
        s->reject = 431;
    }
    if (s->hbuf == NULL && s->reject == 0) {
        s->hbuf = eddy_buf_alloc(eddy_ctx_alloc(c->ctx), 256, c->o.max_header_list_size + 64);
    }
    if (s->hcount > s->hcap && s->reject == 0) {
        size_t cap = s->hcap == 0 ? 16 : 2 * s->hcap;
        uint32_t *idx = eddy__small_alloc(cap * 4 * sizeof(uint32_t));
        if (idx != NULL) {
            if (s->hcap > 0) {
                memcpy(idx, s->hidx, s->hcap * 4 * sizeof(uint32_t));
            }
            eddy__small_free(s->hidx, s->hcap * 4 * sizeof(uint32_t));
            s->hidx = idx;
            s->hcap = (uint32_t)cap;
        }
    }
    if (s->reject != 0 || s->hbuf == NULL || s->hcount > s->hcap) {
        s->reject = s->reject != 0 ? s->reject : 431;
        return;
    }
    uint32_t *idx = &s->hidx[4 * (s->hcount - 1)];
    idx[0] = (uint32_t)eddy_buf_readable(s->hbuf);
    idx[1] = (uint32_t)nlen;
    idx[2] = idx[0] + (uint32_t)nlen;
    idx[3] = (uint32_t)vlen;
    if (eddy_buf_write_bytes(s->hbuf, name, nlen) != 0 ||
        eddy_buf_write_bytes(s->hbuf, value, vlen) != 0) {
        s->reject = 431;
    }
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    (void)flags;
    eddy_h2_stream_t *s = stream_of(session, frame->hd.stream_id);
    if (s != NULL && s->reject == 0) {
        header_keep(ud, s, name, nlen, value, vlen);
    }
    return 0;
}

/* Drop what a refused block gathered, and answer it: 431 (or 400), then the stream ends. */
static void headers_refuse(eddy__h2_conn_t *c, eddy_h2_stream_t *s)
{
    if (s->hbuf != NULL) {
        eddy_buf_release(s->hbuf);
        s->hbuf = NULL;
    }
    uint8_t name[] = ":status";
    char digits[4];
    eddy_http_str_t status = eddy__h2_decimal((size_t)s->reject, digits, sizeof(digits));
    nghttp2_nv nv[] = {{name, (uint8_t *)digits + (status.p - digits), 7, status.len,
                        NGHTTP2_NV_FLAG_NONE}};
    eddy__log(EDDY_LOG_DEBUG, "http2: stream %d refused with %d (header limits)", s->id,
              s->reject);
    s->head_sent = true;
    s->body_ended = true;
    s->refused = true;
    nghttp2_submit_response(c->session, s->id, nv, 1, NULL);
}

static void headers_received(eddy__h2_conn_t *c, eddy_h2_stream_t *s, const nghttp2_frame *f)
{
    bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (s->reject != 0 && !c->server) { /* a response past our limits: the stream ends */
        if (s->hbuf != NULL) {
            eddy_buf_release(s->hbuf);
            s->hbuf = NULL;
        }
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, s->id,
                                  NGHTTP2_ENHANCE_YOUR_CALM);
        return;
    }
    if (s->reject != 0) {
        if (!s->head_received) {
            s->head_received = true;
            headers_refuse(c, s);
        } else if (!s->refused) { /* trailers past the limits: the request is broken now */
            nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, s->id,
                                      NGHTTP2_ENHANCE_YOUR_CALM);
        }
        /* else: the trailers of a request refused already, whose answer stands */
        return;
    }
    if (s->hbuf == NULL) { /* an empty block: nghttp2 rejects it before us, but be sure */
        s->hbuf = eddy_buf_alloc(eddy_ctx_alloc(c->ctx), 16, 64);
        if (s->hbuf == NULL) {
            nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, s->id,
                                      NGHTTP2_INTERNAL_ERROR);
            return;
        }
    }
    bool trailers = s->head_received;
    s->head_received = true;
    if (!c->server && !trailers && eddy__h2_client_interim(s)) {
        s->head_received = false; /* 1xx: the final head is still to come */
    }
    eddy_msg_t *m = eddy__h2_headers_new(s, end, trailers);
    if (m == NULL) {
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    eddy__h2_conn_emit(c, m);
}

/* ---------------------------------------------------------------------------------------
 * Receiving DATA
 */

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    eddy__h2_conn_t *c = ud;
    eddy_h2_stream_t *s = stream_of(session, id);
    if (s == NULL || s->reject != 0) {
        nghttp2_session_consume(session, id, len); /* nobody reads it */
        return 0;
    }
    eddy_buf_t *b = NULL;
    const uint8_t *base = c->in != NULL ? eddy_buf_read_ptr(c->in) : NULL;
    if (base != NULL && data >= base && data + len <= base + eddy_buf_readable(c->in)) {
        b = eddy_buf_retained_slice(c->in, eddy_buf_reader_index(c->in) + (size_t)(data - base),
                                    len);
    } else {
        b = eddy_buf_from(data, len);
    }
    eddy_msg_t *m = b != NULL ? eddy__h2_data_new(s, b, false) : NULL;
    if (m == NULL) {
        nghttp2_session_consume(session, id, len);
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
        return 0;
    }
    /* The connection's window comes back at once, so a paused stream never starves the
     * others (curl#10988); the stream's only as the application consumes. Streams are
     * bounded by their windows, so the buffered bytes are at most streams x window. */
    nghttp2_session_consume_connection(session, len);
    c->buffered += len;
    eddy__h2_conn_emit(c, m);
    return 0;
}

static void data_received(eddy__h2_conn_t *c, eddy_h2_stream_t *s, const nghttp2_frame *f)
{
    bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (f->hd.length == 0 && !end) {
        if (++c->empty_frames > c->o.max_empty_frames) {
            eddy__h2_conn_fail(c, NGHTTP2_ENHANCE_YOUR_CALM, "too many empty DATA frames");
        }
        return;
    }
    c->empty_frames = 0;
    if (!end || s == NULL || s->reject != 0) {
        return;
    }
    /* END_STREAM: mark the piece this frame brought, or send an empty one. */
    eddy_h2_data_t *last = c->nevents > 0 ? eddy_h2_data_of(c->events[c->nevents - 1]) : NULL;
    if (last != NULL && last->stream == s && f->hd.length > 0) {
        last->end_stream = true;
        return;
    }
    eddy_buf_t *b = eddy_buf_new(0);
    eddy_msg_t *m = b != NULL ? eddy__h2_data_new(s, b, true) : NULL;
    if (m == NULL) {
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    eddy__h2_conn_emit(c, m);
}

/* ---------------------------------------------------------------------------------------
 * Frames received and sent, streams closed
 */

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    eddy__h2_conn_t *c = ud;
    eddy_h2_stream_t *s = stream_of(session, frame->hd.stream_id);
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        c->header_block_since = 0;
        c->empty_frames = 0;
        if (s != NULL) {
            headers_received(c, s, frame);
        }
        break;
    case NGHTTP2_DATA:
        data_received(c, s, frame);
        break;
    case NGHTTP2_SETTINGS:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK) {
            c->settings_sent_at = 0;
        }
        eddy__h2_streams_writability(c); /* INITIAL_WINDOW_SIZE may have opened windows */
        break;
    case NGHTTP2_WINDOW_UPDATE:
        eddy__h2_streams_writability(c);
        break;
    case NGHTTP2_RST_STREAM:
        if (s != NULL) {
            s->reset_by_peer = true;
        }
        if (c->server && !eddy__h2_conn_reset_received(c)) {
            return NGHTTP2_ERR_CALLBACK_FAILURE; /* read no further: the GOAWAY is queued */
        }
        break;
    case NGHTTP2_PING:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK) && c->ping_cb != NULL) {
            c->ping_cb(c->ping_arg);
        }
        break;
    case NGHTTP2_GOAWAY:
        c->goaway_received = true;
        c->goaway_last_id = (uint32_t)frame->goaway.last_stream_id;
        c->goaway_code = frame->goaway.error_code;
        if (!c->server) {
            eddy__h2_client_goaway(c);
        }
        break;
    default:
        break;
    }
    return 0;
}

/*
 * HEADERS on a client stream at or below the last one opened that nghttp2 no longer knows:
 * a stream closed (no_closed_streams forgets it) or skipped (closed by a higher one), where
 * RFC 9113 5.1 and 5.1.1 want a connection error and nghttp2 would ignore it. After our
 * RST_STREAM a client may still send trailers it had queued, which must be ignored, not
 * punished: every id at or below the highest we reset is let through to nghttp2.
 */
static bool headers_on_closed(eddy__h2_conn_t *c, nghttp2_session *session, int32_t id)
{
    return c->server && (id & 1) != 0 && (uint32_t)id > c->reset_floor &&
           id <= nghttp2_session_get_last_proc_stream_id(session) &&
           nghttp2_session_find_stream(session, id) == NULL;
}

static int on_begin_frame(nghttp2_session *session, const nghttp2_frame_hd *hd, void *ud)
{
    eddy__h2_conn_t *c = ud;
    if (hd->type == NGHTTP2_HEADERS && headers_on_closed(c, session, hd->stream_id)) {
        eddy__h2_conn_fail(c, NGHTTP2_STREAM_CLOSED, "HEADERS on a closed stream");
        return NGHTTP2_ERR_CALLBACK_FAILURE; /* read no further: the GOAWAY is queued */
    }
    return 0;
}

/* Our END_STREAM went on a stream that asked to end early: reset it if the peer's side is
 * still open (layer.h). */
static void end_early(eddy__h2_conn_t *c, nghttp2_session *session, const nghttp2_frame *frame)
{
    eddy_h2_stream_t *s = stream_of(session, frame->hd.stream_id);
    if (s != NULL && s->end_early && !eddy__h2_stream_remote_ended(s)) {
        s->end_early = false;
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
    }
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    eddy__h2_conn_t *c = ud;
    bool ends = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
    if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != 0 && c->fatal) {
        c->fatal_out = true; /* the error's GOAWAY, not an earlier graceful one */
    }
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) && ends) {
        end_early(c, session, frame);
    } else if (frame->hd.type == NGHTTP2_RST_STREAM) {
        if ((uint32_t)frame->hd.stream_id > c->reset_floor) {
            c->reset_floor = (uint32_t)frame->hd.stream_id;
        }
        if (frame->rst_stream.error_code != NGHTTP2_NO_ERROR) {
            eddy__h2_conn_count_reset(c); /* an answer complete early is no error */
        }
    } else if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != 0 && !c->fatal) {
        /* nghttp2's own limits (CONTINUATION, floods) and protocol errors. */
        eddy__log(EDDY_LOG_INFO, "http2: channel %llu: GOAWAY %s sent by nghttp2",
                  (unsigned long long)eddy_channel_id(eddy_ctx_channel(c->ctx)),
                  nghttp2_http2_strerror(frame->goaway.error_code));
    } else if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
        c->settings_sent_at = eddy__h2_now(c);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t code, void *ud)
{
    eddy__h2_conn_t *c = ud;
    eddy_h2_stream_t *s = stream_of(session, id);
    c->header_block_since = 0; /* a block nghttp2 refused ends here, without on_frame_recv */
    if (s == NULL) {
        return 0;
    }
    nghttp2_session_set_stream_user_data(session, id, NULL);
    if (code != NGHTTP2_NO_ERROR || !s->body_ended) {
        eddy_msg_t *m = eddy__h2_reset_new(s, code != 0 ? code : NGHTTP2_CANCEL,
                                           s->reset_by_peer);
        if (m != NULL) {
            eddy__h2_conn_emit(c, m);
        }
    }
    eddy__h2_stream_closed(s, code);
    return 0;
}

static int send_data(nghttp2_session *session, nghttp2_frame *frame, const uint8_t *framehd,
                     size_t length, nghttp2_data_source *source, void *ud)
{
    (void)session;
    (void)ud;
    assert(frame->data.padlen == 0); /* we never ask for padding */
    return eddy__h2_stream_write_data(source->ptr, framehd, length);
}

static int on_invalid_frame(nghttp2_session *session, const nghttp2_frame *frame, int err,
                            void *ud)
{
    (void)session;
    ((eddy__h2_conn_t *)ud)->header_block_since = 0;
    eddy__log(EDDY_LOG_DEBUG, "http2: invalid frame type %u on stream %d: %s",
              frame->hd.type, frame->hd.stream_id, nghttp2_strerror(err));
    return 0;
}

static nghttp2_session_callbacks *callbacks;
static pthread_once_t callbacks_once = PTHREAD_ONCE_INIT;

static void callbacks_init(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    page = ps > 0 ? (size_t)ps : 4096;
    if (nghttp2_session_callbacks_new(&callbacks) != 0) {
        callbacks = NULL;
        return;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, on_frame_send);
    nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, on_begin_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
    nghttp2_session_callbacks_set_send_data_callback(callbacks, send_data);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks, on_invalid_frame);
}

/* The session's options: what docs/http2.md's limits table says. */
static nghttp2_option *options_new(const eddy_h2_options_t *o)
{
    nghttp2_option *opt;
    if (nghttp2_option_new(&opt) != 0) {
        return NULL;
    }
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_no_closed_streams(opt, 1);
    nghttp2_option_set_max_outbound_ack(opt, 1000);
    nghttp2_option_set_max_settings(opt, 32);
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
#ifdef EDDY_HAVE_NGHTTP2_MAX_CONTINUATIONS
    nghttp2_option_set_max_continuations(opt, o->max_continuations);
#endif
    (void)o;
    return opt;
}

int eddy__h2_session_new(eddy__h2_conn_t *c)
{
    pthread_once(&callbacks_once, callbacks_init);
    nghttp2_option *opt = callbacks != NULL ? options_new(&c->o) : NULL;
    if (opt == NULL) {
        return EDDY_ENOMEM;
    }
    c->mem = (nghttp2_mem){c, mem_malloc, mem_free, mem_calloc, mem_realloc};
    c->in_session_new = true;
    int rv = c->server ? nghttp2_session_server_new3(&c->session, callbacks, c, opt, &c->mem)
                       : nghttp2_session_client_new3(&c->session, callbacks, c, opt, &c->mem);
    c->in_session_new = false;
    nghttp2_option_del(opt);
    if (rv != 0) {
        c->session = NULL;
        return EDDY_ENOMEM;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, c->o.max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, c->o.initial_window_size},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, c->o.max_header_list_size},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
        {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, c->o.max_frame_size},
    };
    rv = nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0]));
    if (rv == 0 && c->o.connection_window > NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE) {
        rv = nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0,
                                                   (int32_t)c->o.connection_window);
    }
    return rv == 0 ? 0 : EDDY_ENOMEM;
}
