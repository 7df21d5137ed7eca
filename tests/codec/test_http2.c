/*
 * codec/http2/ through the embedded channel, the server side. The peer is an nghttp2 client
 * session in the test: what it sends is written inbound, what the channel writes is fed back
 * to it. Frames a correct client never sends (floods, unfinished header blocks, resets in
 * bursts, a preface that goes wrong) are written by hand. Covered: negotiation (prior
 * knowledge whole and byte by byte, Upgrade: h2c, HTTP/1.1 left alone), the adapter (requests
 * as HTTP/1.1's objects, answers in order and by stream id, bodies in many frames, 413 and
 * 400), the stream API (heads, data, trailers, resets, timers, flow control both ways, a
 * 64 MiB download), the limits and timeouts, the graceful close, failed writes; nothing
 * leaked.
 *
 * A test that shows a bug of codec/http2/ still runs up to what works, then skips the rest
 * with known_bug() saying what goes wrong; EDDY_H2_KNOWN_BUGS=1 runs it to the end (some are
 * memory errors: run them one at a time, EDDY_TEST_FILTER=test_name, under ASan).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/channel.h>
#include <eddy/http.h>
#include <eddy/http2.h>
#include <eddy/loop.h>
#include <eddy/pipeline.h>

#include <nghttp2/nghttp2.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Byte vectors
 */

typedef struct bytes_s {
    uint8_t *p;
    size_t n, cap;
} bytes_t;

static void bytes_add(bytes_t *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap == 0 ? 256 : b->cap;
        while (cap < b->n + n) {
            cap *= 2;
        }
        b->p = realloc(b->p, cap);
        assert_non_null(b->p);
        b->cap = cap;
    }
    if (n > 0) {
        memcpy(b->p + b->n, p, n);
    }
    b->n += n;
}

static void bytes_str(bytes_t *b, const char *s)
{
    bytes_add(b, s, strlen(s));
}

static void bytes_free(bytes_t *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/* Whether the n bytes at p hold the NUL-terminated s. */
static bool has_text(const void *p, size_t n, const char *s)
{
    size_t k = strlen(s);
    for (size_t i = 0; k <= n && i <= n - k; i++) {
        if (memcmp((const uint8_t *)p + i, s, k) == 0) {
            return true;
        }
    }
    return false;
}

/* The body byte at offset i of a generated body: a pattern that a shifted or repeated piece
 * breaks. */
static uint8_t pattern_at(uint64_t i)
{
    return (uint8_t)(i * 131 + (i >> 12) * 7 + (i >> 20));
}

static eddy_buf_t *pattern_buf(uint64_t from, size_t n)
{
    eddy_buf_t *b = eddy_buf_new(n > 0 ? n : 1);
    assert_non_null(b);
    uint8_t *w = eddy_buf_write_ptr(b);
    for (size_t i = 0; i < n; i++) {
        w[i] = pattern_at(from + i);
    }
    assert_int_equal(eddy_buf_produce(b, n), 0);
    return b;
}

/* Whether a test stops at a known bug of codec/http2/ (why is printed): true unless
 * EDDY_H2_KNOWN_BUGS=1 asks to run on. A test that stops midway cleans up, then skip()s;
 * known_bug() is for the end of a test, where nothing is left to clean. */
static bool stop_at_known_bug(const char *why)
{
    const char *v = getenv("EDDY_H2_KNOWN_BUGS");
    print_message("[ KNOWN BUG ] %s\n", why);
    return v == NULL || v[0] != '1';
}

#define known_bug(why)                                                                             \
    do {                                                                                           \
        if (stop_at_known_bug(why)) {                                                              \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* ---------------------------------------------------------------------------------------
 * The peer: an nghttp2 client session
 */

typedef struct pstream_s {
    int32_t id;
    int status;       /* :status of the final head; 0 before it */
    int interim;      /* 1xx heads seen */
    bool got_head;    /* the final head was received whole */
    bytes_t head;     /* its fields, "name: value\n" each */
    bytes_t trailers; /* the trailers' fields, the same way */
    bool got_trailers;
    size_t body_at_trailers; /* body bytes received when the trailers came */
    bytes_t body;            /* kept unless the peer checks a pattern instead */
    uint64_t received;       /* DATA bytes */
    bool pattern_ok;         /* every byte matched pattern_at (pattern mode) */
    bool reset;              /* an RST_STREAM came */
    uint32_t reset_code;
    bool closed;
    uint32_t close_code;
    unsigned head_seq; /* the frame count when the final head came */
} pstream_t;

typedef struct peer_s {
    nghttp2_session *s;
    eddy_channel_t *ch;
    pstream_t streams[256];
    size_t nstreams;
    size_t chunk;       /* write the client's bytes in pieces of this size (0: whole) */
    bool manual_window; /* no automatic WINDOW_UPDATE: consume_auto or the test consumes */
    bool consume_auto;  /* consume DATA as it arrives */
    bool pattern;       /* check bodies against pattern_at rather than keep them */
    unsigned seq;       /* frames received */
    int settings;       /* SETTINGS received (not ACKs) */
    int settings_acks;  /* ACKs of ours received */
    bool goaway;
    uint32_t goaway_code;
    int32_t goaway_last;
    unsigned goaway_seq;
} peer_t;

static pstream_t *pstream(peer_t *pr, int32_t id)
{
    for (size_t i = 0; i < pr->nstreams; i++) {
        if (pr->streams[i].id == id) {
            return &pr->streams[i];
        }
    }
    assert_true(pr->nstreams < sizeof(pr->streams) / sizeof(pr->streams[0]));
    pstream_t *ps = &pr->streams[pr->nstreams++];
    memset(ps, 0, sizeof(*ps));
    ps->id = id;
    ps->pattern_ok = true;
    return ps;
}

static int peer_on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                          size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    (void)session;
    (void)flags;
    peer_t *pr = ud;
    if (frame->hd.type != NGHTTP2_HEADERS) {
        return 0;
    }
    pstream_t *ps = pstream(pr, frame->hd.stream_id);
    if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
        char v[8] = {0};
        memcpy(v, value, vlen < 7 ? vlen : 7);
        int status = atoi(v);
        if (status < 200) {
            ps->interim++;
        } else {
            ps->status = status;
        }
        return 0;
    }
    bytes_t *to = ps->got_head ? &ps->trailers : &ps->head;
    bytes_add(to, name, nlen);
    bytes_str(to, ": ");
    bytes_add(to, value, vlen);
    bytes_str(to, "\n");
    return 0;
}

static int peer_on_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                        size_t len, void *ud)
{
    (void)flags;
    peer_t *pr = ud;
    pstream_t *ps = pstream(pr, id);
    if (pr->pattern) {
        for (size_t i = 0; i < len && ps->pattern_ok; i++) {
            ps->pattern_ok = data[i] == pattern_at(ps->received + i);
        }
    } else {
        bytes_add(&ps->body, data, len);
    }
    ps->received += len;
    if (pr->manual_window && pr->consume_auto) {
        assert_int_equal(nghttp2_session_consume(session, id, len), 0);
    }
    return 0;
}

static int peer_on_frame(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    (void)session;
    peer_t *pr = ud;
    pr->seq++;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS: {
        pstream_t *ps = pstream(pr, frame->hd.stream_id);
        if (ps->got_head) {
            ps->got_trailers = true;
            ps->body_at_trailers = (size_t)ps->received;
        } else if (ps->status >= 200) {
            ps->got_head = true;
            ps->head_seq = pr->seq;
        }
        break;
    }
    case NGHTTP2_RST_STREAM: {
        pstream_t *ps = pstream(pr, frame->hd.stream_id);
        ps->reset = true;
        ps->reset_code = frame->rst_stream.error_code;
        break;
    }
    case NGHTTP2_SETTINGS:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK) {
            pr->settings_acks++;
        } else {
            pr->settings++;
        }
        break;
    case NGHTTP2_GOAWAY:
        pr->goaway = true;
        pr->goaway_code = frame->goaway.error_code;
        pr->goaway_last = frame->goaway.last_stream_id;
        pr->goaway_seq = pr->seq;
        break;
    default:
        break;
    }
    return 0;
}

static int peer_on_close(nghttp2_session *session, int32_t id, uint32_t code, void *ud)
{
    (void)session;
    peer_t *pr = ud;
    pstream_t *ps = pstream(pr, id);
    ps->closed = true;
    ps->close_code = code;
    return 0;
}

/* A client on ch: its preface and SETTINGS (iv, n entries, push off) are queued, not sent. */
static void peer_init(peer_t *pr, eddy_channel_t *ch, const nghttp2_settings_entry *iv, size_t n,
                      bool manual_window)
{
    memset(pr, 0, sizeof(*pr));
    pr->ch = ch;
    pr->manual_window = manual_window;
    pr->consume_auto = true;
    nghttp2_session_callbacks *cb;
    assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
    nghttp2_session_callbacks_set_on_header_callback(cb, peer_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, peer_on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, peer_on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, peer_on_close);
    nghttp2_option *opt;
    assert_int_equal(nghttp2_option_new(&opt), 0);
    nghttp2_option_set_no_auto_window_update(opt, manual_window);
    assert_int_equal(nghttp2_session_client_new2(&pr->s, cb, pr, opt), 0);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry all[8] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    assert_true(n < 8);
    if (n > 0) {
        memcpy(all + 1, iv, n * sizeof(*iv));
    }
    assert_int_equal(nghttp2_submit_settings(pr->s, NGHTTP2_FLAG_NONE, all, n + 1), 0);
}

static void peer_free(peer_t *pr)
{
    nghttp2_session_del(pr->s);
    for (size_t i = 0; i < pr->nstreams; i++) {
        bytes_free(&pr->streams[i].head);
        bytes_free(&pr->streams[i].trailers);
        bytes_free(&pr->streams[i].body);
    }
}

/* Write n bytes inbound in pieces of chunk bytes (0: at once). */
static void feed(eddy_channel_t *ch, const void *bytes, size_t n, size_t chunk)
{
    const uint8_t *p = bytes;
    size_t off = 0;
    while (off < n) {
        size_t k = chunk == 0 || chunk > n - off ? n - off : chunk;
        eddy_buf_t *b = eddy_buf_from(p + off, k);
        assert_non_null(b);
        eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
        off += k;
    }
}

static void feed_str(eddy_channel_t *ch, const char *s, size_t chunk)
{
    feed(ch, s, strlen(s), chunk);
}

/* What the client has to send goes to the channel; the bytes it sent. */
static size_t peer_send(peer_t *pr)
{
    bytes_t out = {0};
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(pr->s, &data);
        assert_true(n >= 0);
        if (n == 0) {
            break;
        }
        bytes_add(&out, data, (size_t)n);
    }
    size_t n = out.n;
    feed(pr->ch, out.p, out.n, pr->chunk);
    bytes_free(&out);
    return n;
}

/* Feed n bytes the server wrote to the client session. */
static void peer_take(peer_t *pr, const uint8_t *p, size_t n)
{
    ssize_t rv = nghttp2_session_mem_recv(pr->s, p, n);
    if (rv < 0) {
        fail_msg("the client cannot read the server: %s", nghttp2_strerror((int)rv));
    }
    assert_int_equal((size_t)rv, n);
}

/* What the server wrote goes to the client; the bytes it wrote. */
static size_t peer_recv(peer_t *pr)
{
    size_t total = 0;
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(pr->ch)) != NULL) {
        eddy_buf_t *b = eddy_buf_of(m);
        assert_non_null(b);
        size_t n = eddy_buf_readable(b);
        peer_take(pr, eddy_buf_read_ptr(b), n);
        total += n;
        eddy_msg_release(m);
    }
    return total;
}

/* Both ways until neither side has anything more to say. */
static void pump(peer_t *pr)
{
    for (int rounds = 0;; rounds++) {
        assert_true(rounds < 1000000);
        size_t sent = peer_send(pr);
        size_t got = peer_recv(pr);
        if (sent == 0 && got == 0) {
            break;
        }
    }
}

/* A request body read from memory, in pieces of at most piece bytes (0: as nghttp2 likes). */
typedef struct body_src_s {
    const uint8_t *p;
    size_t n, off, piece;
    bool generated; /* the bytes are pattern_at(off...), p unused */
} body_src_t;

static ssize_t body_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *ud)
{
    (void)session;
    (void)id;
    (void)ud;
    body_src_t *b = source->ptr;
    size_t k = b->n - b->off;
    k = k < length ? k : length;
    k = b->piece != 0 && k > b->piece ? b->piece : k;
    for (size_t i = 0; i < k; i++) {
        buf[i] = b->generated ? pattern_at(b->off + i) : b->p[b->off + i];
    }
    b->off += k;
    if (b->off == b->n) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return (ssize_t)k;
}

/* Submit a request: method and path, then extra fields (name, value pairs, NULL-ended),
 * then the body src (NULL: none, END_STREAM on the head). Its stream id. */
static int32_t request(peer_t *pr, const char *method, const char *path, body_src_t *src, ...)
{
    nghttp2_nv nv[160];
    size_t n = 0;
#define NV(name, value, nlen, vlen)                                                                \
    nv[n++] = (nghttp2_nv){(uint8_t *)(uintptr_t)(name), (uint8_t *)(uintptr_t)(value), (nlen),    \
                           (vlen), NGHTTP2_NV_FLAG_NONE}
    NV(":method", method, 7, strlen(method));
    NV(":scheme", "http", 7, 4);
    NV(":authority", "example.com", 10, 11);
    NV(":path", path, 5, strlen(path));
    va_list ap;
    va_start(ap, src);
    const char *name;
    while ((name = va_arg(ap, const char *)) != NULL) {
        const char *value = va_arg(ap, const char *);
        assert_true(n < sizeof(nv) / sizeof(nv[0]));
        NV(name, value, strlen(name), strlen(value));
    }
    va_end(ap);
#undef NV
    nghttp2_data_provider dp = {.source = {.ptr = src}, .read_callback = body_read};
    int32_t id = nghttp2_submit_request(pr->s, NULL, nv, n, src != NULL ? &dp : NULL, NULL);
    assert_true(id > 0);
    pstream(pr, id);
    return id;
}

static nghttp2_nv nv_of(const char *name, const char *value)
{
    return (nghttp2_nv){(uint8_t *)(uintptr_t)name, (uint8_t *)(uintptr_t)value, strlen(name),
                        strlen(value), NGHTTP2_NV_FLAG_NONE};
}

static bool head_has(const pstream_t *ps, const char *line)
{
    return has_text(ps->head.p, ps->head.n, line);
}

static void assert_body(const pstream_t *ps, const char *want)
{
    size_t n = strlen(want);
    if (ps->body.n != n || (n > 0 && memcmp(ps->body.p, want, n) != 0)) {
        fail_msg("stream %d: body \"%.*s\", not \"%s\"", ps->id, (int)ps->body.n,
                 ps->body.n > 0 ? (const char *)ps->body.p : "", want);
    }
}

/* ---------------------------------------------------------------------------------------
 * Frames by hand, and reading the server's frames without a session
 */

enum {
    F_DATA,
    F_HEADERS,
    F_PRIORITY,
    F_RST,
    F_SETTINGS,
    F_PUSH,
    F_PING,
    F_GOAWAY,
    F_WINDOW,
    F_CONTINUATION
};

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static void raw_frame(bytes_t *b, uint8_t type, uint8_t flags, uint32_t id, const void *payload,
                      size_t len)
{
    uint8_t h[9] = {
        (uint8_t)(len >> 16),       (uint8_t)(len >> 8), (uint8_t)len,       type,       flags,
        (uint8_t)(id >> 24 & 0x7f), (uint8_t)(id >> 16), (uint8_t)(id >> 8), (uint8_t)id};
    bytes_add(b, h, 9);
    bytes_add(b, payload, len);
}

static void raw_u32_frame(bytes_t *b, uint8_t type, uint32_t id, uint32_t v)
{
    uint8_t p[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    raw_frame(b, type, 0, id, p, 4);
}

/* HPACK: an integer with an n-bit prefix after the bits of first (RFC 7541 section 5.1). */
static void hpack_int(bytes_t *b, uint8_t first, int bits, size_t v)
{
    size_t max = ((size_t)1 << bits) - 1;
    if (v < max) {
        uint8_t c = (uint8_t)(first | v);
        bytes_add(b, &c, 1);
        return;
    }
    uint8_t c = (uint8_t)(first | max);
    bytes_add(b, &c, 1);
    v -= max;
    while (v >= 128) {
        c = (uint8_t)(v % 128 + 128);
        bytes_add(b, &c, 1);
        v /= 128;
    }
    c = (uint8_t)v;
    bytes_add(b, &c, 1);
}

/* A literal field without indexing, with a new name: no state shared with the decoder. */
static void hpack_field(bytes_t *b, const char *name, const char *value)
{
    hpack_int(b, 0x00, 4, 0);
    hpack_int(b, 0x00, 7, strlen(name));
    bytes_str(b, name);
    hpack_int(b, 0x00, 7, strlen(value));
    bytes_str(b, value);
}

static void hpack_request(bytes_t *b, const char *method, const char *path)
{
    hpack_field(b, ":method", method);
    hpack_field(b, ":scheme", "http");
    hpack_field(b, ":authority", "example.com");
    hpack_field(b, ":path", path);
}

/* The preface, an empty SETTINGS, and the ACK of the server's when ack. */
static void raw_start(bytes_t *b, bool ack)
{
    bytes_str(b, preface);
    raw_frame(b, F_SETTINGS, 0, 0, NULL, 0);
    if (ack) {
        raw_frame(b, F_SETTINGS, 1, 0, NULL, 0);
    }
}

/* A request's head in one HEADERS frame. */
static void raw_get(bytes_t *b, uint32_t id, bool end_stream)
{
    bytes_t blk = {0};
    hpack_request(&blk, end_stream ? "GET" : "POST", "/");
    raw_frame(b, F_HEADERS, (uint8_t)(0x4 | (end_stream ? 0x1 : 0)), id, blk.p, blk.n);
    bytes_free(&blk);
}

/* The server's frames, read from what it wrote (which starts with its SETTINGS). */
typedef struct scan_s {
    bytes_t in;
    size_t off;
    nghttp2_hd_inflater *inflater;
    int count[10]; /* frames per type */
    bool goaway;
    uint32_t goaway_code;
    uint32_t goaway_last;
    char goaway_debug[128];
    int rst;               /* RST_STREAMs */
    uint32_t rst_code[64]; /* per stream id / 2 (odd ids), the last code */
    int status[64];        /* per stream id / 2, the last :status */
    bool end_stream[64];
} scan_t;

static void scan_headers(scan_t *sc, uint32_t id, const uint8_t *p, size_t n)
{
    if (sc->inflater == NULL) {
        assert_int_equal(nghttp2_hd_inflate_new(&sc->inflater), 0);
    }
    while (n > 0) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t k = nghttp2_hd_inflate_hd2(sc->inflater, &nv, &flags, p, n, 1);
        assert_true(k >= 0);
        p += k;
        n -= (size_t)k;
        if ((flags & NGHTTP2_HD_INFLATE_EMIT) && nv.namelen == 7 &&
            memcmp(nv.name, ":status", 7) == 0 && id / 2 < 64) {
            char v[8] = {0};
            memcpy(v, nv.value, nv.valuelen < 7 ? nv.valuelen : 7);
            sc->status[id / 2] = atoi(v);
        }
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(sc->inflater);
            break;
        }
    }
}

/* Read what ch wrote, frame by frame. */
static void scan(scan_t *sc, eddy_channel_t *ch)
{
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        eddy_buf_t *b = eddy_buf_of(m);
        assert_non_null(b);
        bytes_add(&sc->in, eddy_buf_read_ptr(b), eddy_buf_readable(b));
        eddy_msg_release(m);
    }
    while (sc->in.n - sc->off >= 9) {
        const uint8_t *h = sc->in.p + sc->off;
        size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
        if (sc->in.n - sc->off < 9 + len) {
            break;
        }
        uint8_t type = h[3], flags = h[4];
        uint32_t id =
            ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) & 0x7fffffff;
        const uint8_t *p = h + 9;
        if (type < 10) {
            sc->count[type]++;
        }
        if (type == F_GOAWAY && len >= 8) {
            sc->goaway = true;
            sc->goaway_last =
                ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]) &
                0x7fffffff;
            sc->goaway_code =
                (uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
            size_t k =
                len - 8 < sizeof(sc->goaway_debug) - 1 ? len - 8 : sizeof(sc->goaway_debug) - 1;
            memcpy(sc->goaway_debug, p + 8, k);
            sc->goaway_debug[k] = '\0';
        } else if (type == F_RST && len == 4) {
            sc->rst++;
            if (id / 2 < 64) {
                sc->rst_code[id / 2] =
                    (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
            }
        } else if (type == F_HEADERS) {
            size_t skip = 0, pad = 0;
            if (flags & 0x8) {
                pad = p[0];
                skip = 1;
            }
            if (flags & 0x20) {
                skip += 5;
            }
            scan_headers(sc, id, p + skip, len - skip - pad);
        }
        if ((type == F_HEADERS || type == F_DATA) && (flags & 1) && id / 2 < 64) {
            sc->end_stream[id / 2] = true;
        }
        sc->off += 9 + len;
    }
}

static void scan_free(scan_t *sc)
{
    if (sc->inflater != NULL) {
        nghttp2_hd_inflate_del(sc->inflater);
    }
    bytes_free(&sc->in);
}

/* ---------------------------------------------------------------------------------------
 * The server's side: pipelines, the application's handler, calls on the loop
 */

/* The application's handler, last: it records the user events and lets everything reach the
 * tail, where the test reads it. on_writable, when set, runs for EDDY_EVENT_H2_STREAM_WRITABLE. */
typedef struct app_s {
    int writable_events;
    eddy_h2_stream_t *last_writable;
    int goaway_events;
    uint32_t goaway_code;
    int active_events;
    void (*on_writable)(struct app_s *a, eddy_h2_stream_t *s);
    /* Runs for each message first; true: it took the message. */
    bool (*on_read)(struct app_s *a, eddy_msg_t *msg);
    void *arg;
} app_t;

static void app_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    app_t *a = eddy_ctx_state(ctx);
    if (a->on_read == NULL || !a->on_read(a, msg)) {
        eddy_ctx_fire_channel_read(ctx, msg);
    }
}

static void app_event(eddy_ctx_t *ctx, int event, void *data)
{
    app_t *a = eddy_ctx_state(ctx);
    if (event == EDDY_EVENT_H2_STREAM_WRITABLE) {
        a->writable_events++;
        a->last_writable = data;
        if (a->on_writable != NULL) {
            a->on_writable(a, data);
        }
    } else if (event == EDDY_EVENT_H2_GOAWAY) {
        a->goaway_events++;
        a->goaway_code = ((const eddy_h2_goaway_t *)data)->error_code;
    } else if (event == EDDY_EVENT_H2_ACTIVE) {
        a->active_events++;
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

static const eddy_handler_ops_t app_ops = {
    .name = "app",
    .channel_read = app_read,
    .user_event_triggered = app_event,
};

/* A server that speaks both versions, as docs/http2.md builds it: the negotiation, HTTP/1.1's
 * decoder, aggregator and encoder, the application. */
static eddy_channel_t *server_channel(const eddy_h2_options_t *o, size_t max_body, app_t *app)
{
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    int err = EDDY_PIPELINE_ADD_LAST(
        eddy_channel_pipeline(ch), eddy_h2_server_upgrade(o, max_body),
        eddy_handler_named(eddy_http_request_decoder(NULL), "http-decoder"),
        eddy_handler_named(eddy_http_aggregator(max_body), "http-aggregator"),
        eddy_handler_named(eddy_http_response_encoder(), "http-encoder"),
        eddy_handler("app", &app_ops, app, NULL));
    assert_int_equal(err, 0);
    return ch;
}

/* The connection handler alone, and the application after it (the stream API). */
static eddy_channel_t *stream_channel(const eddy_h2_options_t *o, app_t *app)
{
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_non_null(ch);
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_h2_connection(o),
                                            eddy_handler("app", &app_ops, app, NULL)),
                     0);
    return ch;
}

/* Whether the pipeline's names are, from the head, the NULL-ended list given. */
static void assert_names(eddy_channel_t *ch, ...)
{
    const char *names[16];
    size_t n = eddy_pipeline_names(eddy_channel_pipeline(ch), names, 16);
    va_list ap;
    va_start(ap, ch);
    size_t i = 0;
    const char *want;
    while ((want = va_arg(ap, const char *)) != NULL) {
        if (i >= n || strcmp(names[i], want) != 0) {
            va_end(ap);
            fail_msg("handler %zu is \"%s\", not \"%s\"", i, i < n ? names[i] : "(none)", want);
        }
        i++;
    }
    va_end(ap);
    assert_int_equal(n, i);
}

static void drain_outbound(eddy_channel_t *ch)
{
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        eddy_msg_release(m);
    }
}

static void expect_nothing_inbound(eddy_channel_t *ch)
{
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    if (m != NULL) {
        int type = (int)m->type;
        eddy_msg_release(m);
        fail_msg("an unexpected message of type %d reached the tail", type);
    }
}

/* Close and free ch; every buffer must be back. Unread outbound bytes are fine (a GOAWAY the
 * test did not look at); nothing may be left at the tail, and no error. */
static void finish(eddy_channel_t *ch, int64_t live)
{
    drain_outbound(ch);
    expect_nothing_inbound(ch);
    assert_int_equal(eddy_embedded_error(ch), 0);
    assert_true(eddy_embedded_finish(ch));
    assert_int_equal(eddy_buf_live_count(), live);
}

/* The peer goes away (FIN) with streams open: the application sees their resets, which the
 * test drops; then finish. */
static void finish_open(eddy_channel_t *ch, int64_t live)
{
    eddy_embedded_shutdown_input(ch);
    assert_false(eddy_channel_is_open(ch));
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
        assert_non_null(eddy_h2_reset_of(m));
        eddy_msg_release(m);
    }
    finish(ch, live);
}

static eddy_http_request_t *next_request(eddy_channel_t *ch)
{
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    assert_non_null(m);
    assert_int_equal(m->type, EDDY_MSG_HTTP_FULL_REQUEST);
    eddy_http_request_t *req = eddy_http_request_of(m);
    assert_non_null(req);
    return req;
}

static void assert_str(eddy_http_str_t s, const char *lit)
{
    if (!eddy_http_str_eq(s, lit)) {
        fail_msg("\"%.*s\" is not \"%s\"", (int)s.len, s.p, lit);
    }
}

/* A response with status, stream_id and body (NULL: none). */
static eddy_http_response_t *response(int status, uint32_t stream_id, const char *body)
{
    eddy_http_response_t *r = eddy_http_response_new(status);
    assert_non_null(r);
    r->stream_id = stream_id;
    if (body != NULL) {
        eddy_http_response_set_body(r, eddy_buf_from_str(body));
    }
    return r;
}

static void respond(eddy_channel_t *ch, int status, uint32_t stream_id, const char *body)
{
    eddy_embedded_write_outbound(ch, eddy_http_response_msg(response(status, stream_id, body)));
}

/* Write msg from the tail with a promise; its outcome (EDDY_EAGAIN while incomplete). */
static int write_with_promise(eddy_channel_t *ch, eddy_msg_t *msg)
{
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    assert_non_null(p);
    eddy_channel_write_and_flush(ch, msg, p);
    eddy_embedded_run_pending(ch);
    int err = eddy_future_error(p);
    eddy_future_release(p);
    return err;
}

/* The next message at the tail, of type type. */
static eddy_msg_t *next_msg(eddy_channel_t *ch, uint32_t type)
{
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    if (m == NULL) {
        fail_msg("no message of type %u reached the tail", type);
    }
    if (m->type != type) {
        uint32_t got = m->type;
        eddy_msg_release(m);
        fail_msg("a message of type %u reached the tail, not %u", got, type);
    }
    return m;
}

/* The stream of the next message, a request's head: retained. */
static eddy_h2_stream_t *next_stream(eddy_channel_t *ch)
{
    eddy_msg_t *m = next_msg(ch, EDDY_MSG_H2_HEADERS);
    eddy_h2_stream_t *s = eddy_h2_stream_retain(eddy_h2_headers_of(m)->stream);
    eddy_msg_release(m);
    return s;
}

/* Calls on the stream API, made on the channel's loop as a task (as a handler would). */
typedef struct call_s {
    int (*fn)(struct call_s *c);
    eddy_h2_stream_t *s;
    const eddy_http_header_t *fields;
    size_t n;
    eddy_buf_t *data;
    bool end;
    eddy_promise_t *p;
    int64_t ms;
    void (*timer_cb)(eddy_h2_stream_t *s, void *arg);
    void *arg;
    uint64_t id;
    int rv;
} call_t;

static void call_run(void *arg)
{
    call_t *c = arg;
    c->rv = c->fn(c);
}

static int on_loop(eddy_channel_t *ch, call_t *c)
{
    c->rv = EDDY_EAGAIN;
    assert_int_equal(eddy_loop_execute(eddy_channel_loop(ch), call_run, c), 0);
    eddy_embedded_run_pending(ch);
    assert_int_not_equal(c->rv, EDDY_EAGAIN);
    return c->rv;
}

static int do_send_headers(call_t *c)
{
    return eddy_h2_stream_send_headers(c->s, c->fields, c->n, c->end);
}

static int do_send_data(call_t *c)
{
    return eddy_h2_stream_send_data(c->s, c->data, c->end, c->p);
}

static int do_consume(call_t *c)
{
    eddy_h2_stream_consume(c->s, c->n);
    return 0;
}

static int do_is_writable(call_t *c)
{
    return eddy_h2_stream_is_writable(c->s) ? 1 : 0;
}

static int do_schedule(call_t *c)
{
    c->id = eddy_h2_stream_schedule(c->s, c->ms, c->timer_cb, c->arg);
    return 0;
}

static int do_cancel(call_t *c)
{
    return eddy_h2_stream_cancel(c->s, c->id);
}

static int do_reset(call_t *c)
{
    return eddy_h2_stream_reset(c->s, (uint32_t)c->n);
}

static int send_headers(eddy_channel_t *ch, eddy_h2_stream_t *s, const eddy_http_header_t *f,
                        size_t n, bool end)
{
    call_t c = {.fn = do_send_headers, .s = s, .fields = f, .n = n, .end = end};
    return on_loop(ch, &c);
}

static int send_data(eddy_channel_t *ch, eddy_h2_stream_t *s, eddy_buf_t *data, bool end,
                     eddy_promise_t *p)
{
    call_t c = {.fn = do_send_data, .s = s, .data = data, .end = end, .p = p};
    return on_loop(ch, &c);
}

static int send_text(eddy_channel_t *ch, eddy_h2_stream_t *s, const char *text, bool end)
{
    return send_data(ch, s, text != NULL ? eddy_buf_from_str(text) : NULL, end, NULL);
}

static void consume(eddy_channel_t *ch, eddy_h2_stream_t *s, size_t n)
{
    call_t c = {.fn = do_consume, .s = s, .n = n};
    on_loop(ch, &c);
}

static bool is_writable(eddy_channel_t *ch, eddy_h2_stream_t *s)
{
    call_t c = {.fn = do_is_writable, .s = s};
    return on_loop(ch, &c) == 1;
}

static const eddy_http_header_t ok_head[] = {
    {{":status", 7}, {"200", 3}},
    {{"content-type", 12}, {"text/plain", 10}},
};

/* ---------------------------------------------------------------------------------------
 * Negotiation
 */

static void test_prior_knowledge_switches_the_pipeline_and_serves_a_get(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static const size_t chunks[] = {0, 1, 3, 7, 25};
    for (size_t k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {
        app_t app = {0};
        eddy_channel_t *ch = server_channel(NULL, 0, &app);
        assert_names(ch, "h2-negotiate", "http-decoder", "http-aggregator", "http-encoder", "app",
                     NULL);
        peer_t pr;
        peer_init(&pr, ch, NULL, 0, false);
        pr.chunk = chunks[k];
        int32_t id = request(&pr, "GET", "/hello?x=1", NULL, "user-agent", "test/1", NULL);
        assert_int_equal(id, 1);
        peer_send(&pr);
        assert_names(ch, "h2-connection", "h2-http", "app", NULL);
        assert_int_equal(app.active_events, 1);
        eddy_http_request_t *req = next_request(ch);
        assert_int_equal(req->error, 0);
        assert_int_equal(req->version, 20);
        assert_int_equal(req->stream_id, 1);
        assert_int_equal(req->method, EDDY_HTTP_GET);
        assert_str(req->method_name, "GET");
        assert_str(req->target, "/hello?x=1");
        assert_true(req->keep_alive);
        assert_null(req->body);
        const eddy_http_header_t *host = eddy_http_request_header(req, "host");
        assert_non_null(host);
        assert_str(host->value, "example.com");
        assert_str(eddy_http_request_header(req, "user-agent")->value, "test/1");
        for (size_t i = 0; i < req->header_count; i++) {
            assert_true(req->headers[i].name.len > 0 && req->headers[i].name.p[0] != ':');
        }
        eddy_msg_release(&req->_msg);
        expect_nothing_inbound(ch);

        eddy_http_response_t *r = response(200, 0, "hello");
        assert_int_equal(eddy_http_response_add_header(r, "Content-Type", "text/plain"), 0);
        assert_int_equal(eddy_http_response_add_header(r, "X-Mixed-Case", "Yes"), 0);
        assert_int_equal(eddy_http_response_add_header(r, "Keep-Alive", "timeout=5"), 0);
        assert_int_equal(eddy_http_response_add_header(r, "Upgrade", "h3"), 0);
        eddy_embedded_write_outbound(ch, eddy_http_response_msg(r));
        pump(&pr);
        pstream_t *ps = pstream(&pr, 1);
        assert_true(ps->closed);
        assert_int_equal(ps->close_code, NGHTTP2_NO_ERROR);
        assert_int_equal(ps->status, 200);
        assert_true(head_has(ps, "content-type: text/plain\n"));
        assert_true(head_has(ps, "x-mixed-case: Yes\n"));
        assert_true(head_has(ps, "content-length: 5\n"));
        assert_false(head_has(ps, "keep-alive"));
        assert_false(head_has(ps, "upgrade"));
        assert_body(ps, "hello");
        assert_int_equal(pr.settings, 1);
        assert_int_equal(pr.settings_acks, 1);
        assert_false(pr.goaway);
        assert_true(eddy_channel_is_open(ch));
        peer_free(&pr);
        finish(ch, live);
    }
}

static void test_http11_on_the_same_handlers_stays_http11(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static const char *const requests[] = {
        "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
        "PRI /x HTTP/1.1\r\nHost: a\r\n\r\n", /* starts as the preface does */
    };
    for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
        for (size_t chunk = 0; chunk <= 1; chunk++) {
            app_t app = {0};
            eddy_channel_t *ch = server_channel(NULL, 0, &app);
            /* The head but its last byte: the watcher waits for the first request. */
            size_t n = strlen(requests[i]);
            feed(ch, requests[i], n - 1, chunk);
            assert_names(ch, "http-decoder", "http-aggregator", "h2c-upgrade", "http-encoder",
                         "app", NULL);
            feed(ch, requests[i] + n - 1, 1, chunk);
            eddy_http_request_t *req = next_request(ch);
            assert_int_equal(req->error, 0);
            assert_int_equal(req->version, 11);
            assert_int_equal(req->stream_id, 0);
            eddy_msg_release(&req->_msg);
            assert_names(ch, "http-decoder", "http-aggregator", "http-encoder", "app", NULL);
            respond(ch, 200, 0, "ok");
            bytes_t out = {0};
            eddy_msg_t *m;
            while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
                bytes_add(&out, eddy_buf_read_ptr(eddy_buf_of(m)),
                          eddy_buf_readable(eddy_buf_of(m)));
                eddy_msg_release(m);
            }
            assert_true(out.n > 17 && memcmp(out.p, "HTTP/1.1 200 OK\r\n", 17) == 0);
            assert_true(has_text(out.p, out.n, "\r\n\r\nok"));
            bytes_free(&out);
            /* A second request: HTTP/1.1 still, the watcher gone. */
            feed_str(ch, "GET /2 HTTP/1.1\r\nHost: a\r\n\r\n", chunk);
            req = next_request(ch);
            assert_int_equal(req->version, 11);
            eddy_msg_release(&req->_msg);
            assert_int_equal(app.active_events, 0);
            finish(ch, live);
        }
    }
}

static void test_a_preface_that_stops_matching_goes_the_http11_way(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    /* 18 bytes of the preface, then something else: HTTP/1.1 takes it and refuses it. */
    for (size_t chunk = 0; chunk <= 1; chunk++) {
        app_t app = {0};
        eddy_channel_t *ch = server_channel(NULL, 0, &app);
        feed_str(ch, "PRI * HTTP/2.0\r\n\r\nXY\r\n\r\n", chunk);
        assert_int_equal(app.active_events, 0);
        eddy_http_request_t *req = next_request(ch);
        int status = req->error;
        assert_int_not_equal(status, 0);
        assert_false(req->keep_alive);
        eddy_msg_release(&req->_msg);
        eddy_http_response_t *r = response(status, 0, NULL);
        r->keep_alive = false;
        eddy_embedded_write_outbound(ch, eddy_http_response_msg(r));
        assert_false(eddy_channel_is_open(ch));
        finish(ch, live);
    }
}

static void test_a_bad_preface_after_a_partial_match_closes_the_connection(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    /* The whole preface, then no SETTINGS but garbage: a connection error. */
    for (size_t chunk = 0; chunk <= 1; chunk++) {
        app_t app = {0};
        eddy_channel_t *ch = server_channel(NULL, 0, &app);
        bytes_t b = {0};
        bytes_str(&b, preface);
        bytes_str(&b, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        feed(ch, b.p, b.n, chunk);
        bytes_free(&b);
        assert_int_equal(app.active_events, 1);
        assert_false(eddy_channel_is_open(ch));
        scan_t sc = {0};
        scan(&sc, ch);
        assert_true(sc.goaway);
        assert_int_equal(sc.goaway_code, NGHTTP2_PROTOCOL_ERROR);
        scan_free(&sc);
        finish(ch, live);
    }
    /* The connection handler alone (no negotiation before it) on a preface that goes wrong
     * past its first bytes: closed, nothing reaches the application. */
    for (size_t chunk = 0; chunk <= 1; chunk++) {
        app_t app = {0};
        eddy_channel_t *ch = stream_channel(NULL, &app);
        feed_str(ch, "PRI * HTTP/2.0\r\n\r\nXY\r\n\r\n", chunk);
        assert_false(eddy_channel_is_open(ch));
        finish(ch, live);
    }
}

/* The client's SETTINGS payload as HTTP2-Settings carries it (base64url, no padding). */
static void base64url(const uint8_t *p, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        if (i + 1 < n) {
            out[o++] = a[v >> 6 & 63];
        }
        if (i + 2 < n) {
            out[o++] = a[v & 63];
        }
    }
    out[o] = '\0';
}

static void test_upgrade_h2c_answers_101_and_serves_the_request_as_stream_1(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (size_t chunk = 0; chunk <= 1; chunk++) {
        app_t app = {0};
        eddy_channel_t *ch = server_channel(NULL, 0, &app);
        peer_t pr;
        nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 50}};
        peer_init(&pr, ch, iv, 1, false);
        nghttp2_settings_entry all[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 50}};
        uint8_t payload[64];
        ssize_t plen = nghttp2_pack_settings_payload(payload, sizeof(payload), all, 2);
        assert_true(plen > 0);
        char b64[128], head[512];
        base64url(payload, (size_t)plen, b64);
        snprintf(head, sizeof(head),
                 "GET /up HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                 "Upgrade: h2c\r\nHTTP2-Settings: %s\r\n\r\n",
                 b64);
        feed_str(ch, head, chunk);
        assert_names(ch, "h2-connection", "h2-http", "app", NULL);
        assert_int_equal(app.active_events, 1);

        /* The 101, then HTTP/2 frames. */
        bytes_t out = {0};
        eddy_msg_t *m;
        while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
            bytes_add(&out, eddy_buf_read_ptr(eddy_buf_of(m)), eddy_buf_readable(eddy_buf_of(m)));
            eddy_msg_release(m);
        }
        static const char sw[] = "HTTP/1.1 101 Switching Protocols\r\n";
        assert_true(out.n > sizeof(sw) && memcmp(out.p, sw, sizeof(sw) - 1) == 0);
        size_t end = 0;
        for (size_t i = 0; i + 4 <= out.n; i++) {
            if (memcmp(out.p + i, "\r\n\r\n", 4) == 0) {
                end = i + 4;
                break;
            }
        }
        assert_true(end > 0);
        assert_true(has_text(out.p, end, "Upgrade: h2c\r\n"));

        /* The request reached the application as stream 1, version 20. */
        eddy_http_request_t *req = next_request(ch);
        assert_int_equal(req->error, 0);
        assert_int_equal(req->version, 20);
        assert_int_equal(req->stream_id, 1);
        assert_str(req->target, "/up");
        eddy_msg_release(&req->_msg);

        assert_int_equal(nghttp2_session_upgrade2(pr.s, payload, (size_t)plen, 0, NULL), 0);
        pstream(&pr, 1);
        peer_take(&pr, out.p + end, out.n - end);
        bytes_free(&out);
        respond(ch, 200, 0, "upgraded");
        pump(&pr);
        pstream_t *ps = pstream(&pr, 1);
        assert_true(ps->closed);
        assert_int_equal(ps->status, 200);
        assert_body(ps, "upgraded");
        assert_true(pr.settings_acks >= 1);

        /* More streams after it. */
        int32_t id = request(&pr, "GET", "/next", NULL, NULL);
        assert_int_equal(id, 3);
        pump(&pr);
        req = next_request(ch);
        assert_int_equal(req->stream_id, 3);
        eddy_msg_release(&req->_msg);
        respond(ch, 204, 3, NULL);
        pump(&pr);
        assert_int_equal(pstream(&pr, 3)->status, 204);
        assert_true(pstream(&pr, 3)->closed);
        peer_free(&pr);
        finish(ch, live);
    }
}

/* ---------------------------------------------------------------------------------------
 * The adapter
 */

/* The application answers each request as it arrives (on_read). */
static bool answer_at_once(app_t *a, eddy_msg_t *msg)
{
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req == NULL) {
        return false;
    }
    eddy_channel_write(a->arg, eddy_http_response_msg(response(200, req->stream_id, "hi")), NULL);
    eddy_msg_release(msg);
    return true;
}

/* The answers to one read's requests leave as one buffer of frames (then one TLS record, one
 * send), not a buffer per answer. */
static void test_the_answers_to_one_read_go_out_in_one_buffer(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {.on_read = answer_at_once};
    eddy_channel_t *ch = server_channel(NULL, 0, &app);
    app.arg = ch;
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    pump(&pr); /* the settings both ways */
    enum { N = 20 };
    for (int i = 0; i < N; i++) {
        assert_int_equal(request(&pr, "GET", "/", NULL, NULL), 2 * i + 1);
    }
    peer_send(&pr); /* the 20 requests in one read */
    size_t buffers = 0;
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        eddy_buf_t *b = eddy_buf_of(m);
        assert_non_null(b);
        peer_take(&pr, eddy_buf_read_ptr(b), eddy_buf_readable(b));
        eddy_msg_release(m);
        buffers++;
    }
    assert_int_equal(buffers, 1);
    for (int i = 0; i < N; i++) {
        pstream_t *ps = pstream(&pr, 2 * i + 1);
        assert_true(ps->closed);
        assert_int_equal(ps->status, 200);
        assert_body(ps, "hi");
    }
    peer_free(&pr);
    finish(ch, live);
}

static void test_many_streams_answered_in_order_and_by_stream_id(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (int by_id = 0; by_id <= 1; by_id++) {
        app_t app = {0};
        eddy_channel_t *ch = server_channel(NULL, 0, &app);
        peer_t pr;
        peer_init(&pr, ch, NULL, 0, false);
        enum { N = 20 };
        for (int i = 0; i < N; i++) {
            char path[16];
            snprintf(path, sizeof(path), "/%d", i);
            assert_int_equal(request(&pr, "GET", path, NULL, NULL), 2 * i + 1);
        }
        pump(&pr);
        uint32_t ids[N];
        for (int i = 0; i < N; i++) {
            eddy_http_request_t *req = next_request(ch);
            ids[i] = req->stream_id;
            assert_int_equal(req->stream_id, 2 * i + 1);
            char path[16];
            snprintf(path, sizeof(path), "/%d", i);
            assert_str(req->target, path);
            eddy_msg_release(&req->_msg);
        }
        expect_nothing_inbound(ch);
        for (int i = 0; i < N; i++) {
            /* In order with stream_id 0; by id from the last to the first. */
            uint32_t id = by_id ? ids[N - 1 - i] : 0;
            char body[32];
            snprintf(body, sizeof(body), "for %u", by_id ? id : ids[i]);
            respond(ch, 200, id, body);
            if (i % 3 == 0) {
                pump(&pr);
            }
        }
        pump(&pr);
        for (int i = 0; i < N; i++) {
            pstream_t *ps = pstream(&pr, 2 * i + 1);
            char body[32];
            snprintf(body, sizeof(body), "for %d", 2 * i + 1);
            assert_true(ps->closed);
            assert_int_equal(ps->status, 200);
            assert_body(ps, body);
        }
        peer_free(&pr);
        finish(ch, live);
    }
}

static void test_post_bodies_in_many_frames_interleaved_aggregate(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = server_channel(NULL, 0, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    pump(&pr);
    enum { N = 5, LEN = 30000 };
    body_src_t src[N];
    char len[16];
    snprintf(len, sizeof(len), "%d", LEN);
    for (int i = 0; i < N; i++) {
        /* 100-byte DATA frames: nghttp2 sends them round robin, so streams interleave. */
        src[i] = (body_src_t){.n = LEN, .piece = 100, .generated = true};
        request(&pr, "POST", "/upload", &src[i], "content-length", len, NULL);
    }
    pump(&pr);
    for (int i = 0; i < N; i++) {
        eddy_http_request_t *req = next_request(ch);
        assert_int_equal(req->error, 0);
        assert_int_equal(req->method, EDDY_HTTP_POST);
        assert_int_equal(req->content_length, LEN);
        assert_non_null(req->body);
        assert_int_equal(eddy_buf_readable(req->body), LEN);
        const uint8_t *p = eddy_buf_read_ptr(req->body);
        for (size_t k = 0; k < LEN; k++) {
            if (p[k] != pattern_at(k)) {
                fail_msg("stream %u: byte %zu differs", req->stream_id, k);
            }
        }
        respond(ch, 201, req->stream_id, NULL);
        eddy_msg_release(&req->_msg);
    }
    pump(&pr);
    for (int i = 0; i < N; i++) {
        assert_int_equal(pstream(&pr, 2 * i + 1)->status, 201);
        assert_true(pstream(&pr, 2 * i + 1)->closed);
    }
    peer_free(&pr);
    finish(ch, live);
}

static void test_a_body_over_the_limit_arrives_as_a_413(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = server_channel(NULL, 1000, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    pump(&pr);
    body_src_t big = {.n = 5000, .piece = 300, .generated = true};
    body_src_t fits = {.n = 1000, .piece = 300, .generated = true};
    request(&pr, "POST", "/big", &big, NULL);
    request(&pr, "POST", "/fits", &fits, NULL);
    pump(&pr);
    /* Each arrives when its body has ended: the shorter one first. */
    for (int i = 0; i < 2; i++) {
        eddy_http_request_t *req = next_request(ch);
        if (req->stream_id == 1) {
            assert_int_equal(req->error, 413);
            assert_null(req->body);
        } else {
            assert_int_equal(req->stream_id, 3);
            assert_int_equal(req->error, 0);
            assert_int_equal(eddy_buf_readable(req->body), 1000);
        }
        eddy_msg_release(&req->_msg);
    }
    respond(ch, 413, 1, "too large");
    respond(ch, 200, 3, NULL);
    pump(&pr);
    assert_int_equal(pstream(&pr, 1)->status, 413);
    assert_body(pstream(&pr, 1), "too large");
    assert_int_equal(pstream(&pr, 3)->status, 200);
    assert_true(eddy_channel_is_open(ch));
    peer_free(&pr);
    finish(ch, live);
}

static void test_a_content_length_that_disagrees_with_the_body_arrives_as_a_400(void **state)
{
    (void)state;
    /* Stops before it starts: what it shows leaks (LeakSanitizer fails the ASan build). */
    known_bug("(decided: docs/http2.md) a content-length that disagrees with the DATA: nghttp2 resets the stream "
              "(RST_STREAM PROTOCOL_ERROR) and no 400 arrives; and the reset message, made "
              "while the adapter's consume sends inside events_fire, is dropped and leaked "
              "with its stream (events_fire sets nevents to 0 past what it fired)");
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = server_channel(NULL, 0, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    pump(&pr);
    body_src_t shorter = {.p = (const uint8_t *)"abcde", .n = 5};
    body_src_t longer = {.p = (const uint8_t *)"abcdefghijklmnop", .n = 16};
    request(&pr, "POST", "/short", &shorter, "content-length", "10", NULL);
    request(&pr, "POST", "/long", &longer, "content-length", "10", NULL);
    pump(&pr);
    /* http2.h and docs/http2.md: each arrives with error 400, for the application to answer. */
    for (int i = 0; i < 2; i++) {
        eddy_http_request_t *req = next_request(ch);
        assert_int_equal(req->error, 400);
        respond(ch, 400, req->stream_id, NULL);
        eddy_msg_release(&req->_msg);
    }
    pump(&pr);
    assert_int_equal(pstream(&pr, 1)->status, 400);
    assert_int_equal(pstream(&pr, 3)->status, 400);
    assert_true(eddy_channel_is_open(ch));
    peer_free(&pr);
    finish(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * Failed writes through the adapter
 */

static void test_adapter_refuses_raw_bytes_and_answers_for_reset_streams(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = server_channel(NULL, 0, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    request(&pr, "GET", "/a", NULL, NULL);
    request(&pr, "GET", "/b", NULL, NULL);
    pump(&pr);
    eddy_http_request_t *req = next_request(ch);
    eddy_msg_release(&req->_msg);
    req = next_request(ch);
    eddy_msg_release(&req->_msg);

    /* Pre-encoded HTTP/1.1 bytes: no place in HTTP/2. */
    eddy_buf_t *raw = eddy_buf_from_str("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    assert_int_equal(write_with_promise(ch, eddy_buf_msg(raw)), EDDY_ENOTSUP);
    assert_true(eddy_channel_is_open(ch));

    /* The client gives up on stream 1: its answer fails, and stream 3 is answered next. */
    assert_int_equal(nghttp2_submit_rst_stream(pr.s, NGHTTP2_FLAG_NONE, 1, NGHTTP2_CANCEL), 0);
    pump(&pr);
    assert_int_equal(write_with_promise(ch, eddy_http_response_msg(response(200, 0, "for 1"))),
                     EDDY_ECLOSED);
    assert_int_equal(write_with_promise(ch, eddy_http_response_msg(response(200, 0, "for 3"))), 0);
    pump(&pr);
    assert_int_equal(pstream(&pr, 3)->status, 200);
    assert_body(pstream(&pr, 3), "for 3");
    assert_int_equal(pstream(&pr, 1)->status, 0);
    /* Naming a stream that ended, or one that never was. */
    assert_int_equal(write_with_promise(ch, eddy_http_response_msg(response(200, 1, "x"))),
                     EDDY_ECLOSED);
    assert_int_equal(write_with_promise(ch, eddy_http_response_msg(response(200, 99, "x"))),
                     EDDY_ECLOSED);
    assert_true(eddy_channel_is_open(ch));
    peer_free(&pr);
    finish(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * The stream API
 */

static void drain_inbound(eddy_channel_t *ch)
{
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
        eddy_msg_release(m);
    }
}

static void test_stream_sends_a_head_data_and_trailers_after_all_data(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = stream_channel(NULL, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    request(&pr, "GET", "/s", NULL, "x-req", "1", NULL);
    pump(&pr);
    eddy_msg_t *m = next_msg(ch, EDDY_MSG_H2_HEADERS);
    eddy_h2_headers_t *h = eddy_h2_headers_of(m);
    assert_true(h->end_stream);
    assert_false(h->trailers);
    assert_int_equal(eddy_h2_stream_id(h->stream), 1);
    assert_true(h->count >= 5);
    bool regular = false;
    for (size_t i = 0; i < h->count; i++) {
        bool pseudo = h->fields[i].name.p[0] == ':';
        assert_false(pseudo && regular); /* pseudo-header fields first */
        regular = regular || !pseudo;
    }
    assert_str(eddy_h2_headers_get(h, ":method")->value, "GET");
    assert_str(eddy_h2_headers_get(h, ":path")->value, "/s");
    assert_str(eddy_h2_headers_get(h, "x-req")->value, "1");
    assert_null(eddy_h2_headers_get(h, "x-none"));
    eddy_h2_stream_t *s = eddy_h2_stream_retain(h->stream);
    eddy_msg_release(m);
    expect_nothing_inbound(ch);
    assert_ptr_equal(eddy_h2_stream_channel(s), ch);
    assert_false(eddy_h2_stream_is_closed(s));

    /* Data before the head, and connection-specific fields, are refused. */
    assert_int_equal(send_text(ch, s, "early", false), EDDY_EINVAL);
    static const eddy_http_header_t bad[] = {{{":status", 7}, {"200", 3}},
                                             {{"connection", 10}, {"close", 5}}};
    assert_int_equal(send_headers(ch, s, bad, 2, false), EDDY_EINVAL);

    assert_int_equal(send_headers(ch, s, ok_head, 2, false), 0);
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    assert_int_equal(send_data(ch, s, eddy_buf_from_str("part one, "), false, p), 0);
    assert_int_equal(send_data(ch, s, pattern_buf(0, 5000), false, NULL), 0); /* a slice */
    assert_int_equal(send_text(ch, s, "part two", false), 0);
    static const eddy_http_header_t trailers[] = {{{"x-checksum", 10}, {"abc", 3}},
                                                  {{"x-count", 7}, {"3", 1}}};
    assert_int_equal(send_headers(ch, s, trailers, 2, false), 0);
    assert_int_equal(send_text(ch, s, "late", false), EDDY_ECLOSED);
    assert_int_equal(send_headers(ch, s, trailers, 2, false), EDDY_ECLOSED);
    pump(&pr);
    assert_true(eddy_future_is_done(p));
    assert_int_equal(eddy_future_error(p), 0);
    eddy_future_release(p);

    pstream_t *ps = pstream(&pr, 1);
    assert_int_equal(ps->status, 200);
    assert_true(head_has(ps, "content-type: text/plain\n"));
    assert_int_equal(ps->body.n, 10 + 5000 + 8);
    assert_memory_equal(ps->body.p, "part one, ", 10);
    for (size_t i = 0; i < 5000; i++) {
        assert_int_equal(ps->body.p[10 + i], pattern_at(i));
    }
    assert_memory_equal(ps->body.p + 5010, "part two", 8);
    assert_true(ps->got_trailers);
    assert_int_equal(ps->body_at_trailers, 5018);
    assert_true(has_text(ps->trailers.p, ps->trailers.n, "x-checksum: abc\n"));
    assert_true(has_text(ps->trailers.p, ps->trailers.n, "x-count: 3\n"));
    assert_true(ps->closed);
    assert_int_equal(ps->close_code, NGHTTP2_NO_ERROR);
    assert_true(eddy_h2_stream_is_closed(s));
    assert_int_equal(send_text(ch, s, "after", true), EDDY_ECLOSED);

    /* A head that ends the stream: data after it is refused. */
    request(&pr, "GET", "/t", NULL, NULL);
    pump(&pr);
    eddy_h2_stream_t *t = next_stream(ch);
    static const eddy_http_header_t no_content[] = {{{":status", 7}, {"204", 3}}};
    assert_int_equal(send_headers(ch, t, no_content, 1, true), 0);
    assert_int_equal(send_text(ch, t, "x", false), EDDY_ECLOSED);
    pump(&pr);
    assert_int_equal(pstream(&pr, 3)->status, 204);
    assert_true(pstream(&pr, 3)->closed);
    assert_int_equal(pstream(&pr, 3)->received, 0);

    /* send_data with end_stream, then nothing more. */
    request(&pr, "GET", "/u", NULL, NULL);
    pump(&pr);
    eddy_h2_stream_t *u = next_stream(ch);
    assert_int_equal(send_headers(ch, u, ok_head, 2, false), 0);
    assert_int_equal(send_text(ch, u, "the end", true), 0);
    assert_int_equal(send_text(ch, u, "more", false), EDDY_ECLOSED);
    pump(&pr);
    assert_body(pstream(&pr, 5), "the end");
    assert_true(pstream(&pr, 5)->closed);
    assert_false(pstream(&pr, 5)->got_trailers);

    eddy_h2_stream_release(s);
    eddy_h2_stream_release(t);
    eddy_h2_stream_release(u);
    expect_nothing_inbound(ch);
    peer_free(&pr);
    finish(ch, live);
}

static void test_a_stream_reset_by_the_client_fails_later_sends(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = stream_channel(NULL, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, true);
    pr.consume_auto = false;
    request(&pr, "GET", "/r", NULL, NULL);
    pump(&pr);
    eddy_h2_stream_t *s = next_stream(ch);
    int mine = 42;
    eddy_h2_stream_set_user_data(s, &mine);
    /* More than the client's window: some of it stays queued. */
    assert_int_equal(send_headers(ch, s, ok_head, 2, false), 0);
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    assert_int_equal(send_data(ch, s, pattern_buf(0, 200000), false, p), 0);
    pump(&pr);
    assert_int_equal(pstream(&pr, 1)->received, 65535);
    assert_false(eddy_future_is_done(p));

    assert_int_equal(nghttp2_submit_rst_stream(pr.s, NGHTTP2_FLAG_NONE, 1, NGHTTP2_CANCEL), 0);
    pump(&pr);
    eddy_msg_t *m = next_msg(ch, EDDY_MSG_H2_RESET);
    eddy_h2_reset_t *r = eddy_h2_reset_of(m);
    assert_ptr_equal(r->stream, s);
    assert_true(r->by_peer);
    assert_int_equal(r->error_code, EDDY_H2_CANCEL);
    eddy_msg_release(m);
    expect_nothing_inbound(ch);
    assert_true(eddy_future_is_done(p));
    assert_int_equal(eddy_future_error(p), EDDY_ECLOSED);
    eddy_future_release(p);

    /* The handle stays valid: it says what it was, and refuses everything. */
    assert_true(eddy_h2_stream_is_closed(s));
    assert_int_equal(eddy_h2_stream_id(s), 1);
    assert_ptr_equal(eddy_h2_stream_user_data(s), &mine);
    assert_int_equal(send_text(ch, s, "x", false), EDDY_ECLOSED);
    assert_int_equal(send_headers(ch, s, ok_head, 2, false), EDDY_ECLOSED);
    call_t c = {.fn = do_reset, .s = s, .n = EDDY_H2_CANCEL};
    assert_int_equal(on_loop(ch, &c), EDDY_ECLOSED);
    consume(ch, s, 100);
    assert_false(is_writable(ch, s));

    assert_true(eddy_channel_is_open(ch));
    peer_free(&pr);
    finish(ch, live);
    /* Released after the channel is gone: still fine. */
    eddy_h2_stream_release(s);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* A PING written inbound by hand, between the client's frames: something to read. */
static void ping_in(eddy_channel_t *ch)
{
    bytes_t b = {0};
    raw_frame(&b, F_PING, 0, 0, "12345678", 8);
    feed(ch, b.p, b.n, 0);
    bytes_free(&b);
}

/* The EDDY_MSG_H2_RESET of s, by eddy (not the peer) with code, at the tail now: true. When it
 * is not there, it must come with the next read (a PING): false. */
static bool reset_arrives_at_once(eddy_channel_t *ch, eddy_h2_stream_t *s, uint32_t code)
{
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    bool at_once = m != NULL;
    if (m == NULL) {
        ping_in(ch);
        m = eddy_embedded_read_inbound(ch);
        assert_non_null(m);
    }
    eddy_h2_reset_t *r = eddy_h2_reset_of(m);
    assert_non_null(r);
    assert_ptr_equal(r->stream, s);
    assert_false(r->by_peer);
    assert_int_equal(r->error_code, code);
    eddy_msg_release(m);
    return at_once;
}

static void test_a_stream_reset_by_the_server_is_reported_to_the_application(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = stream_channel(NULL, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    request(&pr, "GET", "/r", NULL, NULL);
    pump(&pr);
    eddy_h2_stream_t *s = next_stream(ch);
    call_t c = {.fn = do_reset, .s = s, .n = EDDY_H2_INTERNAL_ERROR};
    assert_int_equal(on_loop(ch, &c), 0);
    pump(&pr);
    assert_true(pstream(&pr, 1)->reset);
    assert_int_equal(pstream(&pr, 1)->reset_code, NGHTTP2_INTERNAL_ERROR);
    assert_true(eddy_h2_stream_is_closed(s));
    bool at_once = reset_arrives_at_once(ch, s, EDDY_H2_INTERNAL_ERROR);
    assert_true(eddy_channel_is_open(ch));
    pump(&pr);
    peer_free(&pr);
    finish(ch, live);
    eddy_h2_stream_release(s);
    assert_true(at_once);
}

typedef struct timed_s {
    int fired;
    bool answer; /* the timer sends the response */
    eddy_channel_t *ch;
} timed_t;

static void on_timer(eddy_h2_stream_t *s, void *arg)
{
    timed_t *t = arg;
    assert_false(eddy_h2_stream_is_closed(s));
    t->fired++;
    if (t->answer) {
        assert_int_equal(eddy_h2_stream_send_headers(s, ok_head, 2, false), 0);
        assert_int_equal(eddy_h2_stream_send_data(s, eddy_buf_from_str("late"), true, NULL), 0);
    }
}

static uint64_t schedule(eddy_channel_t *ch, eddy_h2_stream_t *s, int64_t ms, timed_t *t)
{
    call_t c = {.fn = do_schedule, .s = s, .ms = ms, .timer_cb = on_timer, .arg = t};
    on_loop(ch, &c);
    return c.id;
}

static int cancel(eddy_channel_t *ch, eddy_h2_stream_t *s, uint64_t id)
{
    call_t c = {.fn = do_cancel, .s = s, .id = id};
    return on_loop(ch, &c);
}

static void test_stream_timers_run_on_the_clock_and_never_after_the_end(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = stream_channel(NULL, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    request(&pr, "GET", "/a", NULL, NULL);
    pump(&pr);
    eddy_h2_stream_t *s = next_stream(ch);

    timed_t t = {.answer = true, .ch = ch};
    uint64_t id = schedule(ch, s, 100, &t);
    assert_int_not_equal(id, 0);
    eddy_embedded_advance_time(ch, 99);
    assert_int_equal(t.fired, 0);
    eddy_embedded_advance_time(ch, 1);
    assert_int_equal(t.fired, 1);
    eddy_embedded_advance_time(ch, 1000);
    assert_int_equal(t.fired, 1);
    assert_int_equal(cancel(ch, s, id), EDDY_EALREADY);
    pump(&pr);
    assert_body(pstream(&pr, 1), "late");
    assert_true(pstream(&pr, 1)->closed);
    assert_true(eddy_h2_stream_is_closed(s));
    /* Closed: refused. */
    assert_int_equal(schedule(ch, s, 10, &t), 0);
    eddy_h2_stream_release(s);

    /* Cancelled, and ended before its time (answered; reset by the client). */
    request(&pr, "GET", "/b", NULL, NULL);
    request(&pr, "GET", "/c", NULL, NULL);
    pump(&pr);
    eddy_h2_stream_t *b = next_stream(ch);
    eddy_h2_stream_t *c = next_stream(ch);
    timed_t tb = {.ch = ch}, tc = {.ch = ch};
    uint64_t cancelled = schedule(ch, b, 100, &tb);
    assert_int_equal(cancel(ch, b, cancelled), 0);
    assert_int_equal(cancel(ch, b, cancelled), EDDY_EALREADY);
    assert_int_not_equal(schedule(ch, b, 200, &tb), 0);
    assert_int_not_equal(schedule(ch, c, 200, &tc), 0);
    static const eddy_http_header_t no_content[] = {{{":status", 7}, {"204", 3}}};
    assert_int_equal(send_headers(ch, b, no_content, 1, true), 0);
    assert_int_equal(nghttp2_submit_rst_stream(pr.s, NGHTTP2_FLAG_NONE, 5, NGHTTP2_CANCEL), 0);
    pump(&pr);
    assert_true(eddy_h2_stream_is_closed(b));
    assert_true(eddy_h2_stream_is_closed(c));
    eddy_embedded_advance_time(ch, 1000);
    assert_int_equal(tb.fired, 0);
    assert_int_equal(tc.fired, 0);
    drain_inbound(ch); /* c's reset */
    eddy_h2_stream_release(b);
    eddy_h2_stream_release(c);

    /* A timer pending when the connection ends does not run either. */
    request(&pr, "GET", "/d", NULL, NULL);
    pump(&pr);
    eddy_h2_stream_t *d = next_stream(ch);
    timed_t td = {.ch = ch};
    assert_int_not_equal(schedule(ch, d, 100, &td), 0);
    peer_free(&pr);
    finish_open(ch, live);
    assert_int_equal(td.fired, 0);
    eddy_h2_stream_release(d);
}

static void test_send_data_waits_for_the_clients_window_and_says_when_writable(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = stream_channel(NULL, &app);
    peer_t pr;
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16384}};
    peer_init(&pr, ch, iv, 1, true);
    pr.consume_auto = false;
    pr.pattern = true;
    pump(&pr);
    request(&pr, "GET", "/big", NULL, NULL);
    pump(&pr);
    eddy_h2_stream_t *s = next_stream(ch);
    assert_true(is_writable(ch, s));
    assert_int_equal(send_headers(ch, s, ok_head, 2, false), 0);
    enum { TOTAL = 100000 };
    assert_int_equal(send_data(ch, s, pattern_buf(0, TOTAL), false, NULL), 0);
    pump(&pr);
    pstream_t *ps = pstream(&pr, 1);
    assert_int_equal(ps->received, 16384); /* the stream's window, no more */
    assert_false(is_writable(ch, s));
    assert_int_equal(app.writable_events, 0);

    /* The client reads 16 KiB: a WINDOW_UPDATE, the next 16 KiB. */
    uint64_t consumed = 0;
    int events_seen = 0;
    while (ps->received < TOTAL) {
        uint64_t before = ps->received;
        assert_int_equal(nghttp2_session_consume(pr.s, 1, (size_t)(ps->received - consumed)), 0);
        consumed = ps->received;
        pump(&pr);
        assert_true(ps->received > before);
        assert_true(ps->received - consumed <= 16384);
        if (app.writable_events > events_seen) {
            events_seen = app.writable_events;
            assert_ptr_equal(app.last_writable, s);
        }
    }
    assert_true(ps->pattern_ok);
    assert_false(ps->closed);
    bool fired = app.writable_events > 0;
    /* The body ends with an empty piece. */
    assert_int_equal(send_data(ch, s, NULL, true, NULL), 0);
    assert_int_equal(nghttp2_session_consume(pr.s, 1, (size_t)(ps->received - consumed)), 0);
    pump(&pr);
    assert_true(ps->closed);
    assert_int_equal(ps->close_code, NGHTTP2_NO_ERROR);
    assert_int_equal(ps->received, TOTAL);
    eddy_h2_stream_release(s);
    peer_free(&pr);
    finish(ch, live);
    assert_true(fired);
}

/* A download driven by writability, as an application would write it. */
typedef struct download_s {
    eddy_h2_stream_t *s;
    uint64_t sent, total;
    size_t piece;
} download_t;

static void download_fill(download_t *d)
{
    while (d->sent < d->total && eddy_h2_stream_is_writable(d->s)) {
        size_t k = d->total - d->sent < d->piece ? (size_t)(d->total - d->sent) : d->piece;
        bool end = d->sent + k == d->total;
        assert_int_equal(eddy_h2_stream_send_data(d->s, pattern_buf(d->sent, k), end, NULL), 0);
        d->sent += k;
    }
}

static void download_writable(app_t *a, eddy_h2_stream_t *s)
{
    download_t *d = a->arg;
    if (s == d->s) {
        download_fill(d);
    }
}

static int do_download_start(call_t *c)
{
    download_t *d = c->arg;
    int rv = eddy_h2_stream_send_headers(d->s, ok_head, 2, false);
    download_fill(d);
    return rv;
}

static void test_a_64_mib_download_through_16_kib_windows_arrives_whole(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    download_t d = {.total = (uint64_t)64 << 20, .piece = 256 << 10};
    app_t app = {.on_writable = download_writable, .arg = &d};
    eddy_channel_t *ch = stream_channel(NULL, &app);
    peer_t pr;
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16384}};
    peer_init(&pr, ch, iv, 1, true);
    pr.pattern = true;
    pump(&pr);
    request(&pr, "GET", "/64m", NULL, NULL);
    pump(&pr);
    d.s = next_stream(ch);
    call_t c = {.fn = do_download_start, .arg = &d};
    assert_int_equal(on_loop(ch, &c), 0);
    pump(&pr);
    pstream_t *ps = pstream(&pr, 1);
    bool whole = ps->received == d.total;
    if (!whole) {
        print_message("the download stopped after %llu of %llu bytes (%llu queued)\n",
                      (unsigned long long)ps->received, (unsigned long long)d.total,
                      (unsigned long long)d.sent);
    }
    if (whole) {
        assert_true(ps->pattern_ok);
        assert_true(ps->closed);
        assert_int_equal(ps->close_code, NGHTTP2_NO_ERROR);
        assert_true(app.writable_events > 0);
    }
    eddy_h2_stream_release(d.s);
    peer_free(&pr);
    finish_open(ch, live);
    assert_true(whole);
}

static void test_consume_returns_the_window_the_client_waits_for(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.initial_window_size = 16384};
    eddy_channel_t *ch = stream_channel(&o, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    pump(&pr); /* the client knows our window */
    body_src_t src = {.n = 65536, .generated = true};
    request(&pr, "POST", "/in", &src, NULL);
    pump(&pr);
    eddy_h2_stream_t *s = next_stream(ch);
    uint64_t got = 0;
    bool ended = false;
    /* Read what arrived: the DATA pieces, in order. */
#define TAKE_DATA()                                                                                \
    do {                                                                                           \
        eddy_msg_t *m_;                                                                            \
        while ((m_ = eddy_embedded_read_inbound(ch)) != NULL) {                                    \
            eddy_h2_data_t *d_ = eddy_h2_data_of(m_);                                              \
            assert_non_null(d_);                                                                   \
            assert_ptr_equal(d_->stream, s);                                                       \
            assert_false(ended);                                                                   \
            const uint8_t *p_ = eddy_buf_read_ptr(d_->data);                                       \
            for (size_t i_ = 0; i_ < eddy_buf_readable(d_->data); i_++) {                          \
                assert_int_equal(p_[i_], pattern_at(got + i_));                                    \
            }                                                                                      \
            got += eddy_buf_readable(d_->data);                                                    \
            ended = d_->end_stream;                                                                \
            eddy_msg_release(m_);                                                                  \
        }                                                                                          \
    } while (0)
    TAKE_DATA();
    assert_int_equal(got, 16384);
    assert_false(ended);
    /* Less than half the window: nothing more may come yet. */
    consume(ch, s, 4096);
    pump(&pr);
    TAKE_DATA();
    assert_int_equal(got, 16384);
    consume(ch, s, 4096);
    pump(&pr);
    TAKE_DATA();
    assert_int_equal(got, 16384 + 8192);
    uint64_t consumed = 8192;
    while (!ended) {
        uint64_t before = got;
        consume(ch, s, (size_t)(got - consumed));
        consumed = got;
        pump(&pr);
        TAKE_DATA();
        assert_true(got > before);
        assert_true(got - consumed <= 16384);
    }
#undef TAKE_DATA
    assert_int_equal(got, 65536);
    static const eddy_http_header_t no_content[] = {{{":status", 7}, {"204", 3}}};
    assert_int_equal(send_headers(ch, s, no_content, 1, true), 0);
    pump(&pr);
    assert_true(pstream(&pr, 1)->closed);
    assert_int_equal(pstream(&pr, 1)->status, 204);
    eddy_h2_stream_release(s);
    peer_free(&pr);
    finish(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * Limits
 */

static void test_streams_past_max_concurrent_streams_are_refused(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.max_concurrent_streams = 2};
    eddy_channel_t *ch = server_channel(&o, 0, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    /* Sent before the client has read our SETTINGS. */
    request(&pr, "GET", "/1", NULL, NULL);
    request(&pr, "GET", "/2", NULL, NULL);
    request(&pr, "GET", "/3", NULL, NULL);
    pump(&pr);
    eddy_http_request_t *req = next_request(ch);
    assert_int_equal(req->stream_id, 1);
    eddy_msg_release(&req->_msg);
    req = next_request(ch);
    assert_int_equal(req->stream_id, 3);
    eddy_msg_release(&req->_msg);
    expect_nothing_inbound(ch);
    assert_true(pstream(&pr, 5)->closed);
    assert_true(pstream(&pr, 5)->reset);
    assert_int_equal(pstream(&pr, 5)->reset_code, NGHTTP2_REFUSED_STREAM);
    respond(ch, 200, 0, "1");
    respond(ch, 200, 0, "3");
    request(&pr, "GET", "/4", NULL, NULL);
    pump(&pr);
    req = next_request(ch);
    assert_int_equal(req->stream_id, 7);
    eddy_msg_release(&req->_msg);
    respond(ch, 200, 0, "7");
    pump(&pr);
    assert_body(pstream(&pr, 1), "1");
    assert_body(pstream(&pr, 3), "3");
    assert_body(pstream(&pr, 7), "7");
    peer_free(&pr);
    finish(ch, live);
}

static void test_header_lists_past_the_limits_are_answered_431(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.max_header_list_size = 1024, .max_header_count = 20};
    eddy_channel_t *ch = server_channel(&o, 0, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    char big[2001];
    memset(big, 'a', 2000);
    big[2000] = '\0';
    request(&pr, "GET", "/big", NULL, "x-big", big, NULL); /* in the first flight */
    pump(&pr);
    request(&pr, "GET", "/big-again", NULL, "x-big", big, NULL); /* the client knows ours */
    request(&pr, "GET", "/fine", NULL, "x-small", "b", NULL);
    /* 20 fields: the four pseudo-header fields and 17 more. */
    nghttp2_nv nv[24];
    size_t n = 0;
    char names[20][8];
    nv[n++] = nv_of(":method", "GET");
    nv[n++] = nv_of(":scheme", "http");
    nv[n++] = nv_of(":authority", "a");
    nv[n++] = nv_of(":path", "/many");
    for (int i = 0; i < 17; i++) {
        snprintf(names[i], sizeof(names[i]), "x-%02d", i);
        nv[n++] = nv_of(names[i], "v");
    }
    int32_t many = nghttp2_submit_request(pr.s, NULL, nv, n, NULL, NULL);
    assert_int_equal(many, 7);
    pstream(&pr, many);
    pump(&pr);
    eddy_http_request_t *req = next_request(ch);
    assert_int_equal(req->stream_id, 5);
    assert_int_equal(req->error, 0);
    eddy_msg_release(&req->_msg);
    expect_nothing_inbound(ch);
    respond(ch, 200, 0, "fine");
    pump(&pr);
    assert_int_equal(pstream(&pr, 1)->status, 431);
    assert_true(pstream(&pr, 1)->closed);
    assert_int_equal(pstream(&pr, 3)->status, 431);
    assert_int_equal(pstream(&pr, 5)->status, 200);
    assert_int_equal(pstream(&pr, 7)->status, 431);
    assert_true(pstream(&pr, 7)->closed);
    /* One field fewer passes. */
    nv[n - 1] = nv[n - 2];
    int32_t fewer = nghttp2_submit_request(pr.s, NULL, nv, n - 1, NULL, NULL);
    pstream(&pr, fewer);
    pump(&pr);
    req = next_request(ch);
    assert_int_equal(req->stream_id, (uint32_t)fewer);
    eddy_msg_release(&req->_msg);
    respond(ch, 200, 0, NULL);
    pump(&pr);
    assert_int_equal(pstream(&pr, fewer)->status, 200);
    assert_true(eddy_channel_is_open(ch));
    peer_free(&pr);
    finish(ch, live);
}

static void test_trailers_past_the_limit_reset_the_stream(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.max_header_list_size = 1024};
    eddy_channel_t *ch = stream_channel(&o, &app);
    bytes_t b = {0}, blk = {0};
    raw_start(&b, true);
    raw_get(&b, 1, false);
    raw_frame(&b, F_DATA, 0, 1, "body", 4);
    char big[2001];
    memset(big, 'a', 2000);
    big[2000] = '\0';
    hpack_field(&blk, "x-trailer", big);
    raw_frame(&b, F_HEADERS, 0x5, 1, blk.p, blk.n);
    feed(ch, b.p, b.n, 0);
    scan_t sc = {0};
    scan(&sc, ch);
    assert_int_equal(sc.rst_code[0], NGHTTP2_ENHANCE_YOUR_CALM);
    assert_false(sc.goaway);
    assert_true(eddy_channel_is_open(ch));
    eddy_msg_t *m = next_msg(ch, EDDY_MSG_H2_HEADERS);
    eddy_h2_stream_t *s = eddy_h2_stream_retain(eddy_h2_headers_of(m)->stream);
    eddy_msg_release(m);
    m = next_msg(ch, EDDY_MSG_H2_DATA);
    eddy_msg_release(m);
    /* The trailers never reach the application; the stream's end does. */
    bool at_once = reset_arrives_at_once(ch, s, EDDY_H2_ENHANCE_YOUR_CALM);
    eddy_h2_stream_release(s);
    scan_free(&sc);
    bytes_free(&b);
    bytes_free(&blk);
    finish(ch, live);
    assert_true(at_once);
}

/* A head past the limit, then its body and small trailers, all in one read: the head's 431
 * is the answer (the trailers of a refused request change nothing), not a reset. */
static void test_a_refused_head_with_trailers_is_answered_431(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.max_header_list_size = 1024};
    eddy_channel_t *ch = stream_channel(&o, &app);
    bytes_t b = {0}, blk = {0}, tr = {0};
    raw_start(&b, true);
    char big[2001];
    memset(big, 'b', 2000);
    big[2000] = '\0';
    hpack_request(&blk, "POST", "/big");
    hpack_field(&blk, "x-big", big);
    raw_frame(&b, F_HEADERS, 0x4, 1, blk.p, blk.n);
    raw_frame(&b, F_DATA, 0, 1, "body", 4);
    hpack_field(&tr, "x-trailer", "1");
    raw_frame(&b, F_HEADERS, 0x5, 1, tr.p, tr.n);
    raw_get(&b, 3, true); /* the connection goes on */
    feed(ch, b.p, b.n, 0);
    scan_t sc = {0};
    scan(&sc, ch);
    assert_int_equal(sc.status[0], 431);
    assert_true(sc.end_stream[0]);
    assert_int_equal(sc.rst, 0);
    assert_false(sc.goaway);
    /* The application never hears of stream 1; stream 3 is its first. */
    eddy_msg_t *m = next_msg(ch, EDDY_MSG_H2_HEADERS);
    assert_int_equal(eddy_h2_stream_id(eddy_h2_headers_of(m)->stream), 3);
    eddy_msg_release(m);
    assert_true(eddy_channel_is_open(ch));
    scan_free(&sc);
    bytes_free(&b);
    bytes_free(&blk);
    bytes_free(&tr);
    finish_open(ch, live); /* stream 3 is still open */
}

/* HEADERS on a stream id at or below the last one opened, which nghttp2 no longer knows
 * (RFC 9113 5.1.1): the connection ends with GOAWAY STREAM_CLOSED. */
static void test_headers_on_a_lower_stream_id_end_the_connection(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = stream_channel(NULL, &app);
    bytes_t b = {0};
    raw_start(&b, true);
    raw_get(&b, 5, true);
    raw_get(&b, 3, true);
    feed(ch, b.p, b.n, 0);
    scan_t sc = {0};
    scan(&sc, ch);
    assert_true(sc.goaway);
    assert_int_equal(sc.goaway_code, NGHTTP2_STREAM_CLOSED);
    assert_int_equal(sc.goaway_last, 5);
    eddy_msg_t *m = next_msg(ch, EDDY_MSG_H2_HEADERS); /* stream 5's, before the error */
    assert_int_equal(eddy_h2_stream_id(eddy_h2_headers_of(m)->stream), 5);
    eddy_msg_release(m);
    scan_free(&sc);
    bytes_free(&b);
    finish_open(ch, live);
}

/* After our RST_STREAM a client may still send what it had queued for the stream (its body
 * and trailers): ignored, not a connection error, and the next stream is served. */
static void test_trailers_after_our_reset_are_ignored(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = stream_channel(NULL, &app);
    bytes_t b = {0}, tr = {0};
    raw_start(&b, true);
    raw_get(&b, 1, false);
    feed(ch, b.p, b.n, 0);
    eddy_msg_t *m = next_msg(ch, EDDY_MSG_H2_HEADERS);
    assert_int_equal(eddy_h2_stream_reset(eddy_h2_headers_of(m)->stream, NGHTTP2_CANCEL), 0);
    eddy_msg_release(m);
    scan_t sc = {0};
    scan(&sc, ch);
    assert_int_equal(sc.rst_code[0], NGHTTP2_CANCEL);
    b.n = 0;
    raw_frame(&b, F_DATA, 0, 1, "body", 4);
    hpack_field(&tr, "x-trailer", "1");
    raw_frame(&b, F_HEADERS, 0x5, 1, tr.p, tr.n);
    raw_get(&b, 3, true);
    feed(ch, b.p, b.n, 0);
    scan(&sc, ch);
    assert_false(sc.goaway);
    assert_true(eddy_channel_is_open(ch));
    while ((m = eddy_embedded_read_inbound(ch)) != NULL && eddy_h2_headers_of(m) == NULL) {
        eddy_msg_release(m); /* stream 1's reset */
    }
    assert_non_null(m);
    assert_int_equal(eddy_h2_stream_id(eddy_h2_headers_of(m)->stream), 3);
    eddy_msg_release(m);
    scan_free(&sc);
    bytes_free(&b);
    bytes_free(&tr);
    finish_open(ch, live);
}

static void test_a_flood_of_empty_data_frames_is_answered_with_goaway(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (int frames = 2; frames <= 3; frames++) {
        app_t app = {0};
        eddy_channel_t *ch = stream_channel(NULL, &app);
        bytes_t b = {0};
        raw_start(&b, true);
        raw_get(&b, 1, false);
        for (int i = 0; i < frames; i++) {
            raw_frame(&b, F_DATA, 0, 1, NULL, 0);
        }
        feed(ch, b.p, b.n, 0);
        bytes_free(&b);
        scan_t sc = {0};
        scan(&sc, ch);
        if (frames <= 2) { /* max_empty_frames */
            assert_false(sc.goaway);
            assert_true(eddy_channel_is_open(ch));
        } else {
            assert_true(sc.goaway);
            assert_int_equal(sc.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
            assert_false(eddy_channel_is_open(ch));
        }
        scan_free(&sc);
        drain_inbound(ch);
        finish_open(ch, live);
    }
}

static void test_a_continuation_flood_is_a_connection_error(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (int cont = 8; cont <= 9; cont++) {
        app_t app = {0};
        eddy_channel_t *ch = stream_channel(NULL, &app);
        bytes_t b = {0}, blk = {0};
        raw_start(&b, true);
        hpack_request(&blk, "GET", "/");
        raw_frame(&b, F_HEADERS, 0x1, 1, blk.p, blk.n);
        for (int i = 0; i < cont; i++) {
            bytes_t f = {0};
            char name[16];
            snprintf(name, sizeof(name), "x-c%d", i);
            hpack_field(&f, name, "v");
            raw_frame(&b, F_CONTINUATION, i == cont - 1 ? 0x4 : 0, 1, f.p, f.n);
            bytes_free(&f);
        }
        feed(ch, b.p, b.n, 0);
        scan_t sc = {0};
        scan(&sc, ch);
        if (cont <= 8) { /* max_continuations */
            assert_false(sc.goaway);
            assert_true(eddy_channel_is_open(ch));
            eddy_msg_t *m = next_msg(ch, EDDY_MSG_H2_HEADERS);
            assert_non_null(eddy_h2_headers_get(eddy_h2_headers_of(m), "x-c7"));
            eddy_msg_release(m);
        } else {
            assert_true(sc.goaway);
            assert_int_not_equal(sc.goaway_code, NGHTTP2_NO_ERROR);
            assert_false(eddy_channel_is_open(ch));
        }
        scan_free(&sc);
        bytes_free(&b);
        bytes_free(&blk);
        finish_open(ch, live);
    }
}

static void test_settings_never_acknowledged_time_out(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = stream_channel(NULL, &app);
    bytes_t b = {0};
    raw_start(&b, false);
    feed(ch, b.p, b.n, 0);
    bytes_free(&b);
    scan_t sc = {0};
    eddy_embedded_advance_time(ch, 9000);
    scan(&sc, ch);
    assert_false(sc.goaway);
    assert_true(eddy_channel_is_open(ch));
    eddy_embedded_advance_time(ch, 4000); /* past 10 s, and a check of the timer */
    scan(&sc, ch);
    assert_true(sc.goaway);
    assert_int_equal(sc.goaway_code, NGHTTP2_SETTINGS_TIMEOUT);
    assert_false(eddy_channel_is_open(ch));
    scan_free(&sc);
    finish(ch, live);
}

static void test_an_idle_connection_is_closed_with_goaway(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.idle_timeout_ms = 5000};
    eddy_channel_t *ch = server_channel(&o, 0, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    request(&pr, "GET", "/", NULL, NULL);
    pump(&pr);
    /* A stream open is not idle, however long. */
    eddy_embedded_advance_time(ch, 20000);
    pump(&pr);
    assert_false(pr.goaway);
    eddy_http_request_t *req = next_request(ch);
    eddy_msg_release(&req->_msg);
    respond(ch, 200, 0, NULL);
    pump(&pr);
    eddy_embedded_advance_time(ch, 4000);
    pump(&pr);
    assert_false(pr.goaway);
    assert_true(eddy_channel_is_open(ch));
    eddy_embedded_advance_time(ch, 3000);
    pump(&pr);
    assert_true(pr.goaway);
    assert_int_equal(pr.goaway_code, NGHTTP2_NO_ERROR);
    assert_int_equal(pr.goaway_last, 1);
    assert_false(eddy_channel_is_open(ch));
    peer_free(&pr);
    finish(ch, live);

    /* A negative timeout: never. */
    o.idle_timeout_ms = -1;
    ch = server_channel(&o, 0, &app);
    peer_init(&pr, ch, NULL, 0, false);
    pump(&pr);
    eddy_embedded_advance_time(ch, 600000);
    pump(&pr);
    assert_false(pr.goaway);
    assert_true(eddy_channel_is_open(ch));
    peer_free(&pr);
    finish(ch, live);
}

/* An idle connection gives back its frame buffer's pages and its empty stream map's (they
 * come back zeroed) and frees its events array: the streams after are served whole, HPACK
 * state and all. */
static void test_an_idle_connection_trims_and_answers_after(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = server_channel(NULL, 0, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    for (int32_t i = 0; i < 3; i++) {
        int32_t id = request(&pr, "GET", "/again", NULL, "user-agent", "test/1", NULL);
        pump(&pr);
        eddy_http_request_t *req = next_request(ch);
        assert_str(req->target, "/again");
        assert_str(eddy_http_request_header(req, "user-agent")->value, "test/1");
        eddy_msg_release(&req->_msg);
        eddy_http_response_t *r = response(200, 0, "again");
        assert_int_equal(eddy_http_response_add_header(r, "Content-Type", "text/plain"), 0);
        eddy_embedded_write_outbound(ch, eddy_http_response_msg(r));
        pump(&pr);
        pstream_t *ps = pstream(&pr, id);
        assert_true(ps->closed);
        assert_int_equal(ps->status, 200);
        assert_true(head_has(ps, "content-type: text/plain\n"));
        assert_body(ps, "again");
        eddy_embedded_advance_time(ch, 5000); /* idle past two housekeeping periods */
        pump(&pr);
        assert_false(pr.goaway);
        assert_true(eddy_channel_is_open(ch));
    }
    peer_free(&pr);
    finish(ch, live);
}

static void test_a_header_block_left_unfinished_times_out(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.header_timeout_ms = 3000};
    eddy_channel_t *ch = stream_channel(&o, &app);
    bytes_t b = {0}, blk = {0};
    raw_start(&b, true);
    hpack_request(&blk, "GET", "/");
    raw_frame(&b, F_HEADERS, 0x1, 1, blk.p, blk.n); /* no END_HEADERS, no CONTINUATION */
    feed(ch, b.p, b.n, 0);
    scan_t sc = {0};
    eddy_embedded_advance_time(ch, 2000);
    scan(&sc, ch);
    assert_false(sc.goaway);
    assert_true(eddy_channel_is_open(ch));
    eddy_embedded_advance_time(ch, 2000);
    scan(&sc, ch);
    assert_true(sc.goaway);
    assert_int_equal(sc.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
    assert_false(eddy_channel_is_open(ch));
    scan_free(&sc);
    bytes_free(&b);
    bytes_free(&blk);
    finish_open(ch, live);
}

static void test_rapid_reset_is_answered_with_goaway(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (int pairs = 5; pairs <= 40; pairs += 35) {
        app_t app = {0};
        eddy_h2_options_t o = {.reset_burst = 10, .reset_rate = 1};
        eddy_channel_t *ch = stream_channel(&o, &app);
        bytes_t b = {0};
        raw_start(&b, true);
        for (int i = 0; i < pairs; i++) {
            uint32_t id = (uint32_t)(2 * i + 1);
            raw_get(&b, id, true);
            raw_u32_frame(&b, F_RST, id, NGHTTP2_CANCEL);
        }
        feed(ch, b.p, b.n, 0);
        bytes_free(&b);
        scan_t sc = {0};
        scan(&sc, ch);
        drain_inbound(ch);
        if (pairs <= 10) {
            assert_false(sc.goaway);
            assert_true(eddy_channel_is_open(ch));
            scan_free(&sc);
            finish(ch, live);
            continue;
        }
        /* ENHANCE_YOUR_CALM, what eddy_h2_options_t promises (nghttp2's own limit, in
         * Debian's backport, would say INTERNAL_ERROR), and only one GOAWAY. */
        assert_true(sc.goaway);
        assert_int_equal(sc.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
        assert_int_equal(sc.count[F_GOAWAY], 1);
        assert_false(eddy_channel_is_open(ch));
        scan_free(&sc);
        finish(ch, live);
    }
}

/* At the head: every byte written is kept, and flushes stop here, as with a peer that does
 * not read: what the connection writes stays pending and the channel turns unwritable. */
static void stalled_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    eddy_buf_t *b = eddy_buf_of(msg);
    assert_non_null(b);
    bytes_add(eddy_ctx_state(ctx), eddy_buf_read_ptr(b), eddy_buf_readable(b));
    eddy_ctx_write(ctx, msg, p);
}

static void stalled_flush(eddy_ctx_t *ctx)
{
    (void)ctx;
}

static const eddy_handler_ops_t stalled_ops = {
    .name = "stalled",
    .write = stalled_write,
    .flush = stalled_flush,
};

/* A connection error while the channel is unwritable still writes its GOAWAY (it went
 * nowhere: the close left it inside nghttp2, and a gRPC client of serverfuzz saw its
 * connection end with no reason and its calls unanswered). */
static void test_a_connection_error_writes_its_goaway_while_unwritable(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.reset_burst = 10, .reset_rate = 1};
    eddy_channel_t *ch = stream_channel(&o, &app);
    bytes_t wrote = {0};
    assert_int_equal(eddy_pipeline_add_first(eddy_channel_pipeline(ch), "stalled", &stalled_ops,
                                              &wrote, NULL),
                     0);
    assert_int_equal(eddy_channel_set_option(ch, EDDY_WRITE_BUFFER_LOW_WATER_MARK, 1), 0);
    assert_int_equal(eddy_channel_set_option(ch, EDDY_WRITE_BUFFER_HIGH_WATER_MARK, 2), 0);
    bytes_t b = {0};
    raw_start(&b, true);
    feed(ch, b.p, b.n, 0); /* the server's SETTINGS and its ACK stay pending */
    assert_false(eddy_channel_is_writable(ch));
    b.n = 0;
    for (uint32_t id = 1; id < 80; id += 2) { /* past the reset budget */
        raw_get(&b, id, true);
        raw_u32_frame(&b, F_RST, id, NGHTTP2_CANCEL);
    }
    feed(ch, b.p, b.n, 0);
    bytes_free(&b);
    eddy_embedded_run_pending(ch);
    assert_false(eddy_channel_is_open(ch));
    scan_t sc = {0};
    bytes_add(&sc.in, wrote.p, wrote.n);
    scan(&sc, ch);
    assert_true(sc.goaway);
    assert_int_equal(sc.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
    assert_int_equal(sc.count[F_GOAWAY], 1);
    scan_free(&sc);
    bytes_free(&wrote);
    drain_inbound(ch);
    finish(ch, live);
}

/* The bucket refills at reset_rate a second: 10 resets, 3 s, 3 more pass; one more fails. */
static void test_the_reset_bucket_refills_at_reset_rate(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.reset_burst = 10, .reset_rate = 1, .idle_timeout_ms = 100000};
    eddy_channel_t *ch = stream_channel(&o, &app);
    bytes_t b = {0};
    raw_start(&b, true);
    uint32_t id = 1;
    for (int i = 0; i < 10; i++, id += 2) {
        raw_get(&b, id, true);
        raw_u32_frame(&b, F_RST, id, NGHTTP2_CANCEL);
    }
    feed(ch, b.p, b.n, 0);
    eddy_embedded_advance_time(ch, 3000);
    for (int i = 0; i < 4; i++, id += 2) {
        b.n = 0;
        raw_get(&b, id, true);
        raw_u32_frame(&b, F_RST, id, NGHTTP2_CANCEL);
        feed(ch, b.p, b.n, 0);
        assert_true(eddy_channel_is_open(ch) == (i < 3));
    }
    scan_t sc = {0};
    scan(&sc, ch);
    assert_true(sc.goaway);
    assert_int_equal(sc.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
    scan_free(&sc);
    bytes_free(&b);
    drain_inbound(ch);
    finish(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * Closing
 */

static void test_a_graceful_close_lets_the_stream_in_flight_finish(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = server_channel(NULL, 0, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    request(&pr, "GET", "/slow", NULL, NULL);
    pump(&pr);
    eddy_http_request_t *req = next_request(ch);
    eddy_msg_release(&req->_msg);
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    eddy_channel_close(ch, p);
    eddy_embedded_run_pending(ch);
    pump(&pr);
    assert_true(pr.goaway);
    assert_int_equal(pr.goaway_code, NGHTTP2_NO_ERROR);
    assert_int_equal(pr.goaway_last, 1);
    assert_true(eddy_channel_is_open(ch));
    assert_false(eddy_future_is_done(p));
    respond(ch, 200, 0, "done");
    assert_false(eddy_channel_is_open(ch));
    assert_true(eddy_future_is_done(p));
    assert_int_equal(eddy_future_error(p), 0);
    eddy_future_release(p);
    pump(&pr);
    pstream_t *ps = pstream(&pr, 1);
    assert_int_equal(ps->status, 200);
    assert_body(ps, "done");
    assert_true(ps->closed);
    assert_true(pr.goaway_seq < ps->head_seq);
    peer_free(&pr);
    finish(ch, live);
}

static void test_the_shutdown_deadline_closes_a_stream_that_never_ends(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.shutdown_timeout_ms = 3000};
    eddy_channel_t *ch = server_channel(&o, 0, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    request(&pr, "GET", "/never", NULL, NULL);
    pump(&pr);
    eddy_http_request_t *req = next_request(ch);
    eddy_msg_release(&req->_msg);
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    eddy_channel_close(ch, p);
    eddy_embedded_run_pending(ch);
    pump(&pr);
    assert_true(pr.goaway);
    eddy_embedded_advance_time(ch, 2500);
    assert_true(eddy_channel_is_open(ch));
    eddy_embedded_advance_time(ch, 3000);
    assert_false(eddy_channel_is_open(ch));
    assert_true(eddy_future_is_done(p));
    assert_int_equal(eddy_future_error(p), 0);
    eddy_future_release(p);
    /* The answer that comes too late fails. */
    assert_int_equal(write_with_promise(ch, eddy_http_response_msg(response(200, 0, "x"))),
                     EDDY_ECLOSED);
    pump(&pr);
    assert_int_equal(pstream(&pr, 1)->status, 0);
    peer_free(&pr);
    finish(ch, live);
}

static void test_the_clients_goaway_reaches_the_application(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = server_channel(NULL, 0, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    request(&pr, "GET", "/", NULL, NULL);
    pump(&pr);
    eddy_http_request_t *req = next_request(ch);
    eddy_msg_release(&req->_msg);
    assert_int_equal(nghttp2_submit_goaway(pr.s, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, NULL, 0),
                     0);
    pump(&pr);
    assert_int_equal(app.goaway_events, 1);
    assert_int_equal(app.goaway_code, NGHTTP2_NO_ERROR);
    assert_true(eddy_channel_is_open(ch)); /* stream 1 is still to be answered */
    respond(ch, 200, 0, "bye");
    pump(&pr);
    assert_body(pstream(&pr, 1), "bye");
    assert_false(eddy_channel_is_open(ch));
    peer_free(&pr);
    finish(ch, live);
}

/* ---------------------------------------------------------------------------------------
 * More negotiation, responses, and limits
 */

static void test_an_upgrade_with_a_body_or_bad_settings_stays_http11(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    static const char *const heads[] = {
        "POST / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
        "HTTP2-Settings: AAMAAABkAAQAAP__\r\nContent-Length: 3\r\n\r\nabc",
        "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
        "HTTP2-Settings: AAMAAA\r\n\r\n", /* 4 bytes: not a whole setting */
        "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
        "HTTP2-Settings: AAMAAABk\r\nHTTP2-Settings: AAMAAABk\r\n\r\n", /* two of them */
        "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
        app_t app = {0};
        eddy_channel_t *ch = server_channel(NULL, 0, &app);
        feed_str(ch, heads[i], 0);
        assert_names(ch, "http-decoder", "http-aggregator", "http-encoder", "app", NULL);
        eddy_http_request_t *req = next_request(ch);
        assert_int_equal(req->version, 11);
        eddy_msg_release(&req->_msg);
        respond(ch, 200, 0, "one");
        eddy_msg_t *m = eddy_embedded_read_outbound(ch);
        assert_non_null(m);
        assert_memory_equal(eddy_buf_read_ptr(eddy_buf_of(m)), "HTTP/1.1 200 OK\r\n", 17);
        eddy_msg_release(m);
        assert_int_equal(app.active_events, 0);
        finish(ch, live);
    }
}

static void test_an_upgrade_with_the_preface_in_the_same_read_is_served(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = server_channel(NULL, 0, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    nghttp2_settings_entry all[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    uint8_t payload[16];
    ssize_t plen = nghttp2_pack_settings_payload(payload, sizeof(payload), all, 1);
    char b64[32], head[512];
    base64url(payload, (size_t)plen, b64);
    snprintf(head, sizeof(head),
             "GET /up HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade, HTTP2-Settings\r\n"
             "Upgrade: h2c\r\nHTTP2-Settings: %s\r\n\r\n",
             b64);
    /* A client that does not wait for the 101: its preface and SETTINGS come with the
     * request. */
    assert_int_equal(nghttp2_session_upgrade2(pr.s, payload, (size_t)plen, 0, NULL), 0);
    pstream(&pr, 1);
    int32_t three = request(&pr, "GET", "/three", NULL, NULL);
    assert_int_equal(three, 3);
    bytes_t b = {0};
    bytes_str(&b, head);
    const uint8_t *data;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(pr.s, &data)) > 0) {
        bytes_add(&b, data, (size_t)n);
    }
    feed(ch, b.p, b.n, 0);
    bytes_free(&b);
    assert_names(ch, "h2-connection", "h2-http", "app", NULL);
    /* The request first, then stream 3's, which came in the same bytes: the preface and
     * frames behind the request reached the connection handler (not the application). */
    eddy_msg_t *m = eddy_embedded_read_inbound(ch);
    assert_non_null(m);
    assert_int_equal(m->type, EDDY_MSG_HTTP_FULL_REQUEST);
    eddy_http_request_t *req = eddy_http_request_of(m);
    assert_int_equal(req->stream_id, 1);
    eddy_msg_release(m);
    req = next_request(ch);
    assert_int_equal(req->stream_id, 3);
    eddy_msg_release(&req->_msg);
    respond(ch, 200, 3, "three");
    respond(ch, 200, 0, "fast");
    /* The 101 first, then frames. */
    bytes_t out = {0};
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        bytes_add(&out, eddy_buf_read_ptr(eddy_buf_of(m)), eddy_buf_readable(eddy_buf_of(m)));
        eddy_msg_release(m);
    }
    size_t end = 0;
    for (size_t i = 0; i + 4 <= out.n && end == 0; i++) {
        end = memcmp(out.p + i, "\r\n\r\n", 4) == 0 ? i + 4 : 0;
    }
    assert_true(end > 0);
    peer_take(&pr, out.p + end, out.n - end);
    bytes_free(&out);
    pump(&pr);
    assert_int_equal(pstream(&pr, 1)->status, 200);
    assert_body(pstream(&pr, 1), "fast");
    assert_int_equal(pstream(&pr, 3)->status, 200);
    assert_body(pstream(&pr, 3), "three");
    assert_int_equal(pr.settings_acks, 2); /* SETTINGS came: the preface was read */
    assert_false(pr.goaway);
    peer_free(&pr);
    finish(ch, live);
}

static void test_adapter_sends_chunked_head_and_interim_responses(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_channel_t *ch = server_channel(NULL, 0, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    request(&pr, "GET", "/chunked", NULL, NULL);
    request(&pr, "HEAD", "/head", NULL, NULL);
    request(&pr, "GET", "/early", NULL, NULL);
    pump(&pr);
    for (int i = 0; i < 3; i++) {
        eddy_http_request_t *req = next_request(ch);
        eddy_msg_release(&req->_msg);
    }
    /* 1: chunked, its pieces written one by one, the others answered in between. */
    eddy_http_response_t *r = response(200, 0, NULL);
    r->chunked = true;
    eddy_embedded_write_outbound(ch, eddy_http_response_msg(r));
    eddy_embedded_write_outbound(ch, &eddy_http_content_new(eddy_buf_from_str("a"), false)->_msg);
    pump(&pr);
    /* 5: an interim 103, then the answer; 3: the HEAD's, with the length of a body not sent. */
    r = response(103, 5, NULL);
    assert_int_equal(eddy_http_response_add_header(r, "Link", "</s.css>; rel=preload"), 0);
    eddy_embedded_write_outbound(ch, eddy_http_response_msg(r));
    respond(ch, 200, 5, "x");
    r = response(200, 0, "12345");
    r->head_only = true;
    eddy_embedded_write_outbound(ch, eddy_http_response_msg(r));
    eddy_embedded_write_outbound(ch, &eddy_http_content_new(eddy_buf_from_str("bb"), false)->_msg);
    eddy_embedded_write_outbound(ch, &eddy_http_content_new(eddy_buf_from_str("ccc"), true)->_msg);
    pump(&pr);
    pstream_t *c = pstream(&pr, 1), *h = pstream(&pr, 3), *e = pstream(&pr, 5);
    assert_int_equal(c->status, 200);
    assert_body(c, "abbccc");
    assert_false(head_has(c, "content-length"));
    assert_true(c->closed);
    assert_int_equal(h->status, 200);
    assert_true(head_has(h, "content-length: 5\n"));
    assert_body(h, "");
    assert_true(h->closed);
    assert_int_equal(e->interim, 1);
    assert_int_equal(e->status, 200);
    assert_body(e, "x");
    assert_true(e->closed);
    /* Content with no chunked response under way: refused. */
    assert_int_equal(write_with_promise(ch, &eddy_http_content_new(NULL, true)->_msg),
                     EDDY_ECLOSED);
    peer_free(&pr);
    finish(ch, live);
}

static bool reset_on_head(app_t *a, eddy_msg_t *msg)
{
    (void)a;
    eddy_h2_headers_t *h = eddy_h2_headers_of(msg);
    if (h != NULL) {
        assert_int_equal(eddy_h2_stream_reset(h->stream, EDDY_H2_REFUSED_STREAM), 0);
    }
    return false;
}

static void test_a_reset_from_inside_channel_read_reaches_the_application(void **state)
{
    (void)state;
    /* Stops before it starts: what it shows leaks (LeakSanitizer fails the ASan build). */
        int64_t live = eddy_buf_live_count();
    app_t app = {.on_read = reset_on_head};
    eddy_channel_t *ch = stream_channel(NULL, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    request(&pr, "GET", "/no", NULL, NULL);
    pump(&pr);
    assert_true(pstream(&pr, 1)->reset);
    assert_int_equal(pstream(&pr, 1)->reset_code, NGHTTP2_REFUSED_STREAM);
    eddy_h2_stream_t *s = next_stream(ch);
    assert_true(eddy_h2_stream_is_closed(s));
    assert_true(reset_arrives_at_once(ch, s, EDDY_H2_REFUSED_STREAM));
    eddy_h2_stream_release(s);
    peer_free(&pr);
    finish(ch, live);
}

static bool answer_on_head(app_t *a, eddy_msg_t *msg)
{
    (void)a;
    eddy_h2_headers_t *h = eddy_h2_headers_of(msg);
    if (h != NULL) {
        static const eddy_http_header_t no_content[] = {{{":status", 7}, {"204", 3}}};
        assert_int_equal(eddy_h2_stream_send_headers(h->stream, no_content, 1, true), 0);
    }
    return false;
}

static void test_an_answer_from_inside_channel_read_that_ends_the_connection(void **state)
{
    (void)state;
    /* Stops before it starts: what it shows is a double free. */
        int64_t live = eddy_buf_live_count();
    app_t app = {.on_read = answer_on_head};
    eddy_channel_t *ch = stream_channel(NULL, &app);
    peer_t pr;
    peer_init(&pr, ch, NULL, 0, false);
    pump(&pr);
    request(&pr, "GET", "/last", NULL, NULL);
    assert_int_equal(nghttp2_submit_goaway(pr.s, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, NULL, 0),
                     0);
    pump(&pr);
    assert_int_equal(pstream(&pr, 1)->status, 204);
    assert_false(eddy_channel_is_open(ch));
    eddy_msg_t *m = next_msg(ch, EDDY_MSG_H2_HEADERS);
    eddy_msg_release(m);
    peer_free(&pr);
    finish(ch, live);
}

static void test_a_stream_the_client_never_reads_is_reset_after_the_stall_timeout(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.send_stall_timeout_ms = 5000};
    eddy_channel_t *ch = stream_channel(&o, &app);
    peer_t pr;
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16384}};
    peer_init(&pr, ch, iv, 1, true);
    pr.consume_auto = false;
    pump(&pr);
    request(&pr, "GET", "/stuck", NULL, NULL);
    pump(&pr);
    eddy_h2_stream_t *s = next_stream(ch);
    assert_int_equal(send_headers(ch, s, ok_head, 2, false), 0);
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    assert_int_equal(send_data(ch, s, pattern_buf(0, 100000), true, p), 0);
    pump(&pr);
    assert_int_equal(pstream(&pr, 1)->received, 16384);
    eddy_embedded_advance_time(ch, 3000);
    pump(&pr);
    assert_false(pstream(&pr, 1)->reset);
    eddy_embedded_advance_time(ch, 6000); /* the timeout from the first check that saw it */
    pump(&pr);
    assert_true(pstream(&pr, 1)->reset);
    assert_int_equal(pstream(&pr, 1)->reset_code, NGHTTP2_CANCEL);
    assert_true(eddy_h2_stream_is_closed(s));
    assert_int_equal(eddy_future_error(p), EDDY_ECLOSED);
    eddy_future_release(p);
    assert_false(pr.goaway);
    assert_true(eddy_channel_is_open(ch));
    bool at_once = reset_arrives_at_once(ch, s, EDDY_H2_CANCEL);
    eddy_h2_stream_release(s);
    peer_free(&pr);
    finish(ch, live);
    assert_true(at_once);
}

static void test_a_peer_that_makes_us_reset_streams_gets_goaway(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    for (int streams = 3; streams <= 4; streams++) {
        app_t app = {0};
        eddy_h2_options_t o = {.max_resets_sent = 3};
        eddy_channel_t *ch = stream_channel(&o, &app);
        bytes_t b = {0};
        raw_start(&b, true);
        for (int i = 0; i < streams; i++) {
            /* A malformed field: a stream error, answered with RST_STREAM. */
            bytes_t blk = {0};
            hpack_request(&blk, "GET", "/");
            hpack_field(&blk, "X-Upper", "1");
            raw_frame(&b, F_HEADERS, 0x5, (uint32_t)(2 * i + 1), blk.p, blk.n);
            bytes_free(&blk);
        }
        feed(ch, b.p, b.n, 0);
        bytes_free(&b);
        scan_t sc = {0};
        scan(&sc, ch);
        if (streams <= 3) {
            assert_int_equal(sc.rst, 3);
            assert_false(sc.goaway);
            assert_true(eddy_channel_is_open(ch));
        } else {
            assert_true(sc.goaway);
            assert_int_equal(sc.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
            assert_false(eddy_channel_is_open(ch));
        }
        scan_free(&sc);
        drain_inbound(ch);
        ping_in(ch);
        drain_inbound(ch);
        finish_open(ch, live);
    }
}

static void test_streams_past_max_concurrent_streams_after_the_ack_are_refused(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.max_concurrent_streams = 2};
    eddy_channel_t *ch = stream_channel(&o, &app);
    bytes_t b = {0};
    raw_start(&b, true);
    raw_get(&b, 1, true);
    raw_get(&b, 3, true);
    raw_get(&b, 5, true);
    feed(ch, b.p, b.n, 0);
    bytes_free(&b);
    scan_t sc = {0};
    scan(&sc, ch);
    bool goaway = sc.goaway;
    uint32_t code = goaway ? sc.goaway_code : sc.rst_code[2];
    if (!goaway) {
        assert_int_equal(sc.rst_code[2], NGHTTP2_REFUSED_STREAM);
        assert_true(eddy_channel_is_open(ch));
    }
    scan_free(&sc);
    drain_inbound(ch);
    finish_open(ch, live);
    /* Once our SETTINGS are acknowledged a stream past the limit is nghttp2's connection
     * error (PROTOCOL_ERROR), which RFC 9113 section 5.1.2 allows; before, REFUSED_STREAM. */
    assert_true(!goaway || code == NGHTTP2_PROTOCOL_ERROR);
}

static void test_a_refused_header_block_leaves_no_header_timeout_behind(void **state)
{
    (void)state;
    int64_t live = eddy_buf_live_count();
    app_t app = {0};
    eddy_h2_options_t o = {.header_timeout_ms = 3000};
    eddy_channel_t *ch = stream_channel(&o, &app);
    bytes_t b = {0}, blk = {0};
    raw_start(&b, true);
    raw_get(&b, 1, true); /* held open: the connection is not idle */
    hpack_request(&blk, "GET", "/bad");
    hpack_field(&blk, "X-Upper", "1"); /* malformed: nghttp2 resets the stream */
    raw_frame(&b, F_HEADERS, 0x5, 3, blk.p, blk.n);
    feed(ch, b.p, b.n, 0);
    bytes_free(&b);
    bytes_free(&blk);
    scan_t sc = {0};
    scan(&sc, ch);
    assert_int_equal(sc.rst_code[1], NGHTTP2_PROTOCOL_ERROR);
    eddy_embedded_advance_time(ch, 6000);
    scan(&sc, ch);
    bool goaway = sc.goaway;
    if (goaway) {
        print_message("GOAWAY %s: %s\n", nghttp2_http2_strerror(sc.goaway_code), sc.goaway_debug);
    }
    scan_free(&sc);
    drain_inbound(ch);
    finish_open(ch, live);
    assert_false(goaway);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prior_knowledge_switches_the_pipeline_and_serves_a_get),
        cmocka_unit_test(test_http11_on_the_same_handlers_stays_http11),
        cmocka_unit_test(test_a_preface_that_stops_matching_goes_the_http11_way),
        cmocka_unit_test(test_a_bad_preface_after_a_partial_match_closes_the_connection),
        cmocka_unit_test(test_upgrade_h2c_answers_101_and_serves_the_request_as_stream_1),
        cmocka_unit_test(test_many_streams_answered_in_order_and_by_stream_id),
        cmocka_unit_test(test_the_answers_to_one_read_go_out_in_one_buffer),
        cmocka_unit_test(test_post_bodies_in_many_frames_interleaved_aggregate),
        cmocka_unit_test(test_a_body_over_the_limit_arrives_as_a_413),
        cmocka_unit_test(test_a_content_length_that_disagrees_with_the_body_arrives_as_a_400),
        cmocka_unit_test(test_adapter_refuses_raw_bytes_and_answers_for_reset_streams),
        cmocka_unit_test(test_stream_sends_a_head_data_and_trailers_after_all_data),
        cmocka_unit_test(test_a_stream_reset_by_the_client_fails_later_sends),
        cmocka_unit_test(test_a_stream_reset_by_the_server_is_reported_to_the_application),
        cmocka_unit_test(test_stream_timers_run_on_the_clock_and_never_after_the_end),
        cmocka_unit_test(test_send_data_waits_for_the_clients_window_and_says_when_writable),
        cmocka_unit_test(test_a_64_mib_download_through_16_kib_windows_arrives_whole),
        cmocka_unit_test(test_consume_returns_the_window_the_client_waits_for),
        cmocka_unit_test(test_streams_past_max_concurrent_streams_are_refused),
        cmocka_unit_test(test_header_lists_past_the_limits_are_answered_431),
        cmocka_unit_test(test_trailers_past_the_limit_reset_the_stream),
        cmocka_unit_test(test_headers_on_a_lower_stream_id_end_the_connection),
        cmocka_unit_test(test_trailers_after_our_reset_are_ignored),
        cmocka_unit_test(test_a_refused_head_with_trailers_is_answered_431),
        cmocka_unit_test(test_a_flood_of_empty_data_frames_is_answered_with_goaway),
        cmocka_unit_test(test_a_continuation_flood_is_a_connection_error),
        cmocka_unit_test(test_settings_never_acknowledged_time_out),
        cmocka_unit_test(test_an_idle_connection_is_closed_with_goaway),
        cmocka_unit_test(test_an_idle_connection_trims_and_answers_after),
        cmocka_unit_test(test_a_header_block_left_unfinished_times_out),
        cmocka_unit_test(test_rapid_reset_is_answered_with_goaway),
        cmocka_unit_test(test_a_connection_error_writes_its_goaway_while_unwritable),
        cmocka_unit_test(test_the_reset_bucket_refills_at_reset_rate),
        cmocka_unit_test(test_a_graceful_close_lets_the_stream_in_flight_finish),
        cmocka_unit_test(test_the_shutdown_deadline_closes_a_stream_that_never_ends),
        cmocka_unit_test(test_the_clients_goaway_reaches_the_application),
        cmocka_unit_test(test_an_upgrade_with_a_body_or_bad_settings_stays_http11),
        cmocka_unit_test(test_an_upgrade_with_the_preface_in_the_same_read_is_served),
        cmocka_unit_test(test_adapter_sends_chunked_head_and_interim_responses),
        cmocka_unit_test(test_a_reset_from_inside_channel_read_reaches_the_application),
        cmocka_unit_test(test_an_answer_from_inside_channel_read_that_ends_the_connection),
        cmocka_unit_test(test_a_stream_the_client_never_reads_is_reset_after_the_stall_timeout),
        cmocka_unit_test(test_a_peer_that_makes_us_reset_streams_gets_goaway),
        cmocka_unit_test(test_streams_past_max_concurrent_streams_after_the_ack_are_refused),
        cmocka_unit_test(test_a_refused_header_block_leaves_no_header_timeout_behind),
    };
    const char *only = getenv("EDDY_TEST_FILTER"); /* one test by name ("*" globs) */
    if (only != NULL) {
        cmocka_set_test_filter(only);
    }
    return cmocka_run_group_tests_name("codec.http2", tests, NULL, NULL);
}
