/*
 * Fuzz target: the server that speaks both HTTP versions on an embedded channel, as
 * docs/http2.md builds it: eddy_h2_server_upgrade() before the HTTP/1.1 decoder, aggregator
 * and encoder, and an application that answers every full request (in order, by stream id,
 * chunked, after a 103, or late from a timer). The input is what the client sends: an HTTP/2
 * preface and frames, an HTTP/1.1 request asking Upgrade: h2c, or HTTP/1.1. After it the
 * clock moves (late answers, the connection's timeouts); some runs close gracefully. The
 * options byte picks the limits (bit 0 small, bit 1 tiny bodies), the HTTP/1.1 decoder's
 * cumulator (bit 2), the graceful close (bit 3) and a long wait (bit 4).
 *
 * Checks: no sanitizer report, every buffer released, no exception at the tail and no message
 * there while the channel is open (the application takes every one); requests are
 * HTTP/1.x or version 20 on a new odd stream, bodies within the limit and as long as their
 * Content-Length, nothing after a rejected HTTP/1.1 request; and when the client spoke
 * HTTP/2 from its first byte, what the server writes is whole frames, its SETTINGS first, on
 * odd streams, and no stream is answered above the last one a GOAWAY of ours named.
 *
 * Unlike the decoders' targets, feeding whole and in pieces may rightly give different
 * answers (a stream that ended before the next one arrived does not count against the
 * concurrency limit), so each of the two runs is checked on its own, not against the other.
 */
#include <eddy/http.h>
#include <eddy/http2.h>

#include "common.h"

static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

typedef struct app_s {
    size_t max_body;
    bool http1_rejected; /* an HTTP/1.1 request came with an error: nothing may follow */
    uint32_t ids[64];    /* HTTP/2 stream ids seen (the first 64) */
    size_t nids;
    uint32_t max_id;
} app_t;

/* The answer's shape, from the request: the same request is answered the same way. */
static unsigned answer_kind(const eddy_http_request_t *req)
{
    size_t body = req->body != NULL ? eddy_buf_readable(req->body) : 0;
    return (unsigned)((req->target.len + body + req->stream_id) % 6);
}

static void send_response(eddy_ctx_t *ctx, int status, uint32_t stream_id, const char *text)
{
    eddy_http_response_t *r = eddy_http_response_new(status);
    CHECK(r != NULL);
    r->stream_id = stream_id;
    if (text != NULL) {
        eddy_http_response_set_body(r, eddy_buf_from_str(text));
    }
    eddy_ctx_write_and_flush(ctx, eddy_http_response_msg(r), NULL);
}

/* A late answer: the stream id travels in the timer's argument (nothing to free when the
 * timer is cancelled by the channel's close). */
static void answer_late(eddy_ctx_t *ctx, void *arg)
{
    send_response(ctx, 200, (uint32_t)(uintptr_t)arg, "late");
}

static void check_request(app_t *a, const eddy_http_request_t *req)
{
    CHECK(!a->http1_rejected);
    size_t len = req->body != NULL ? eddy_buf_readable(req->body) : 0;
    CHECK(len <= a->max_body);
    if (req->version == 20) {
        CHECK(req->stream_id % 2 == 1);
        for (size_t i = 0; i < a->nids; i++) {
            CHECK(a->ids[i] != req->stream_id); /* one request per stream */
        }
        if (a->nids < sizeof(a->ids) / sizeof(a->ids[0])) {
            a->ids[a->nids++] = req->stream_id;
        }
        if (req->error == 0) {
            CHECK(req->method_name.len > 0);
            CHECK(req->target.len > 0 || req->method == EDDY_HTTP_CONNECT);
            CHECK(req->keep_alive);
        }
    } else {
        CHECK(req->version == 10 || req->version == 11);
        CHECK(req->stream_id == 0);
        a->http1_rejected = req->error != 0;
    }
    if (req->error == 0 && !req->chunked && req->content_length >= 0) {
        CHECK((int64_t)len == req->content_length);
    }
}

static void app_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    app_t *a = eddy_ctx_state(ctx);
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req == NULL || msg->type != EDDY_MSG_HTTP_FULL_REQUEST) {
        eddy_msg_release(msg); /* nothing to answer */
        return;
    }
    check_request(a, req);
    uint32_t id = req->stream_id;
    if (req->error != 0) {
        eddy_http_response_t *r = eddy_http_response_new(req->error);
        CHECK(r != NULL);
        r->keep_alive = req->version == 20;
        r->stream_id = id;
        eddy_msg_release(msg);
        eddy_ctx_write_and_flush(ctx, eddy_http_response_msg(r), NULL);
        return;
    }
    unsigned kind = answer_kind(req);
    eddy_buf_t *echo = req->body != NULL ? eddy_buf_retain(req->body) : NULL;
    bool head = req->method == EDDY_HTTP_HEAD;
    bool http11 = req->version != 10;
    eddy_msg_release(msg);
    eddy_http_response_t *r;
    switch (kind) {
    case 0: /* in order, the body echoed */
    case 1: /* by stream id */
        r = eddy_http_response_new(200);
        CHECK(r != NULL);
        r->stream_id = kind == 1 ? id : 0;
        r->head_only = head;
        CHECK(eddy_http_response_add_header(r, "Content-Type", "application/octet-stream") == 0);
        eddy_http_response_set_body(r, echo);
        eddy_ctx_write_and_flush(ctx, eddy_http_response_msg(r), NULL);
        return;
    case 2: /* chunked, in three pieces */
        if (!http11) {
            break;
        }
        r = eddy_http_response_new(200);
        CHECK(r != NULL);
        r->chunked = true;
        r->stream_id = id;
        eddy_ctx_write(ctx, eddy_http_response_msg(r), NULL);
        eddy_ctx_write(ctx, &eddy_http_content_new(echo, false)->_msg, NULL);
        echo = NULL;
        eddy_ctx_write(ctx, &eddy_http_content_new(eddy_buf_from_str("-"), false)->_msg, NULL);
        eddy_ctx_write_and_flush(ctx, &eddy_http_content_new(NULL, true)->_msg, NULL);
        return;
    case 3: /* late, from a timer (HTTP/2 only: HTTP/1.1 answers in order) */
        if (id == 0) {
            break;
        }
        if (echo != NULL) {
            eddy_buf_release(echo);
        }
        CHECK(eddy_ctx_schedule(ctx, 5 + id % 20, answer_late, (void *)(uintptr_t)id) != 0);
        return;
    case 4: /* a 103 first */
        if (!http11) {
            break;
        }
        r = eddy_http_response_new(103);
        CHECK(r != NULL);
        r->stream_id = id;
        CHECK(eddy_http_response_add_header(r, "Link", "</a.css>; rel=preload") == 0);
        eddy_ctx_write(ctx, eddy_http_response_msg(r), NULL);
        break;
    default:
        break;
    }
    if (echo != NULL) {
        eddy_buf_release(echo);
    }
    send_response(ctx, 204, id, NULL);
}

static void app_event(eddy_ctx_t *ctx, int event, void *data)
{
    (void)ctx;
    (void)event;
    (void)data; /* EDDY_EVENT_H2_ACTIVE, the peer's GOAWAY: nothing to do */
}

static const eddy_handler_ops_t app_ops = {
    .name = "fuzz-app",
    .channel_read = app_read,
    .user_event_triggered = app_event,
};

/* What the server wrote, read as frames once the client spoke HTTP/2 from its first byte. */
typedef struct frames_s {
    bool on;      /* the input began with the preface */
    uint8_t *buf; /* bytes not yet read as a frame */
    size_t n, cap;
    size_t count; /* frames read */
    bool goaway;
    uint32_t last_id; /* of our GOAWAY */
} frames_t;

static void frames_take(frames_t *f, const uint8_t *p, size_t n)
{
    if (f->n + n > f->cap) {
        f->cap = (f->n + n) * 2;
        f->buf = realloc(f->buf, f->cap);
        CHECK(f->buf != NULL);
    }
    memcpy(f->buf + f->n, p, n);
    f->n += n;
    size_t off = 0;
    while (f->n - off >= 9) {
        const uint8_t *h = f->buf + off;
        size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
        if (f->n - off < 9 + len) {
            break;
        }
        uint8_t type = h[3], flags = h[4];
        uint32_t id =
            ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) & 0x7fffffff;
        CHECK(type <= 9 && type != 5);                    /* known frames, no PUSH_PROMISE */
        CHECK(f->count > 0 || (type == 4 && flags == 0)); /* our SETTINGS first */
        if (type == 0 || type == 1 || type == 3) {        /* DATA, HEADERS, RST_STREAM */
            CHECK(id % 2 == 1);
        }
        if (type == 1 && f->goaway) {
            CHECK(id <= f->last_id);
        }
        if (type == 7) {
            CHECK(id == 0 && len >= 8);
            uint32_t last =
                ((uint32_t)h[9] << 24 | (uint32_t)h[10] << 16 | (uint32_t)h[11] << 8 | h[12]) &
                0x7fffffff;
            CHECK(!f->goaway || last <= f->last_id); /* a later GOAWAY never raises it */
            f->goaway = true;
            f->last_id = last;
        }
        f->count++;
        off += 9 + len;
    }
    memmove(f->buf, f->buf + off, f->n - off);
    f->n -= off;
}

static void take_outbound(eddy_channel_t *ch, frames_t *f)
{
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        eddy_buf_t *b = eddy_buf_of(m);
        CHECK(b != NULL);
        if (f->on) {
            frames_take(f, eddy_buf_read_ptr(b), eddy_buf_readable(b));
        }
        eddy_msg_release(m);
    }
}

static void advance(eddy_channel_t *ch, frames_t *f, int64_t total_ms, int64_t step_ms)
{
    for (int64_t t = 0; t < total_ms; t += step_ms) {
        eddy_embedded_advance_time(ch, step_ms);
        CHECK(eddy_embedded_error(ch) == 0);
        take_outbound(ch, f);
    }
}

static uint64_t run(const uint8_t *p, size_t n, uint8_t mode, uint8_t opt)
{
    eddy_h2_options_t o = {0};
    eddy_http_decoder_options_t d = {0};
    app_t app = {.max_body = EDDY_HTTP_MAX_CONTENT_LENGTH};
    if (opt & 1) {
        o = (eddy_h2_options_t){.max_concurrent_streams = 3,
                                .initial_window_size = 1024,
                                .connection_window = 65535,
                                .max_header_list_size = 256,
                                .max_header_count = 8,
                                .max_memory = 256 << 10,
                                .max_stream_pending = 4096,
                                .reset_burst = 4,
                                .reset_rate = 1,
                                .max_resets_sent = 4,
                                .max_empty_frames = 1,
                                .max_continuations = 2,
                                .settings_timeout_ms = 50,
                                .idle_timeout_ms = 80,
                                .header_timeout_ms = 30,
                                .send_stall_timeout_ms = 60,
                                .shutdown_timeout_ms = 70};
        d = (eddy_http_decoder_options_t){64, 128, 8, 16};
        app.max_body = 256;
    }
    if (opt & 2) {
        app.max_body = 16;
    }
    eddy_channel_t *ch = eddy_embedded_channel_new();
    CHECK(ch != NULL);
    eddy_pipeline_t *pl = eddy_channel_pipeline(ch);
    CHECK(EDDY_PIPELINE_ADD_LAST(pl, eddy_h2_server_upgrade(&o, app.max_body)) == 0);
    add_decoder(ch, "http-decoder", eddy_http_request_decoder_ops(),
                eddy_http_request_decoder_new(&d), opt);
    CHECK(EDDY_PIPELINE_ADD_LAST(pl, eddy_http_aggregator(app.max_body),
                                 eddy_http_response_encoder(),
                                 eddy_handler("fuzz-app", &app_ops, &app, NULL)) == 0);
    frames_t f = {.on = n >= sizeof(h2_preface) - 1 &&
                        memcmp(p, h2_preface, sizeof(h2_preface) - 1) == 0};
    /* Fed as feed() does, what the server writes read after each piece. */
    uint32_t rng = mode;
    size_t off = 0;
    do {
        size_t k = next_chunk(mode, &rng, n - off);
        eddy_buf_t *b = eddy_buf_from(p + off, k);
        CHECK(b != NULL);
        eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
        off += k;
        CHECK(eddy_embedded_error(ch) == 0);
        /* The application takes everything while the channel is open. What the HTTP/1.1
         * decoder had decoded in the read that closed it still travels to the tail (the
         * decoder base delivers its queue after the close): released there, as a socket
         * channel's tail does. */
        eddy_msg_t *m;
        while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
            CHECK(!eddy_channel_is_open(ch));
            eddy_msg_release(m);
        }
        take_outbound(ch, &f);
    } while (off < n && eddy_channel_is_open(ch));
    advance(ch, &f, 100, 10); /* late answers */
    if (opt & 8) {
        eddy_channel_close(ch, NULL);
        eddy_embedded_run_pending(ch);
        take_outbound(ch, &f);
        advance(ch, &f, 200, 20);
    }
    if (opt & 16) {
        advance(ch, &f, 70000, 2000); /* past every default timeout */
    }
    eddy_embedded_finish(ch);
    free(f.buf);
    return 0; /* see the top: the two feedings are not compared */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_one(run, data, size);
    return 0;
}
