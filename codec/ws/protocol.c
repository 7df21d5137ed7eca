/*
 * The WebSocket protocol handler (Netty's WebSocketProtocolHandler and the frame aggregator):
 * answers pings, drops pongs, runs the closing handshake with its deadline, checks
 * fragmentation and UTF-8, aggregates fragmented messages, and pings an idle peer.
 *
 * It sits after the decoder (and the deflate handler), so what it sees is unmasked and
 * inflated. A protocol error is answered with a close frame carrying its status, the error is
 * passed on to the handlers after it, and the channel closes once the close frame is out;
 * input after that is dropped.
 */
#include "codec/ws/internal.h"

#include <eddy/channel.h>

#include <stddef.h>
#include <stdlib.h>

typedef struct ws_protocol_s {
    eddy__ws_conf_t conf;
    bool client;
    bool close_sent;     /* our close frame went out: we wait for the peer's */
    bool close_received; /* the peer's came: nothing more is read */
    bool failed;         /* a protocol error closed the connection */
    bool flush;          /* a pong is waiting for read_complete's flush */
    uint8_t msg_opcode;  /* the fragmented message open (TEXT or BINARY), or 0 */
    uint32_t utf8;       /* the UTF-8 check's state in the open text message */
    size_t msg_len;      /* bytes of the open message so far */
    eddy_buf_t *agg;     /* its payload so far, when aggregating */
    int64_t last_read;   /* loop clock of the last frame, for keep-alive pings */
    uint64_t ping_timer;
} ws_protocol_t;

static void drop_message(ws_protocol_t *s)
{
    if (s->agg != NULL) {
        eddy_buf_release(s->agg);
        s->agg = NULL;
    }
    s->msg_opcode = 0;
    s->msg_len = 0;
    s->utf8 = EDDY__UTF8_ACCEPT;
}

/* A protocol error: the close frame with code, the error passed on, the close. */
static void fail(eddy_ctx_t *ctx, ws_protocol_t *s, eddy_ws_frame_t *f, int code)
{
    if (f != NULL) {
        eddy_msg_release(&f->_msg);
    }
    drop_message(s);
    s->failed = true;
    bool send_close = !s->close_sent;
    s->close_sent = true;
    eddy__ws_fail_connection(ctx, code, send_close);
}

static void on_close(eddy_ctx_t *ctx, ws_protocol_t *s, eddy_ws_frame_t *f)
{
    int code = eddy_ws_frame_close_code(f);
    bool empty = eddy_ws_frame_len(f) == 0;
    if (code < 0 || (!empty && !eddy_ws_close_code_valid(code))) {
        fail(ctx, s, f, EDDY_WS_CLOSE_PROTOCOL_ERROR); /* section 7.4.1: these never travel */
        return;
    }
    size_t n;
    const char *reason = eddy_ws_frame_close_reason(f, &n);
    if (reason != NULL && !eddy_ws_utf8_valid(reason, n)) {
        fail(ctx, s, f, EDDY_WS_CLOSE_INVALID_PAYLOAD);
        return;
    }
    s->close_received = true;
    drop_message(s);
    if (!s->close_sent) {
        /* Section 5.5.1: echo the status; a close without one is answered with 1000. */
        s->close_sent = true;
        eddy_ws_frame_t *c = eddy_ws_close_frame(
            code == EDDY_WS_CLOSE_NO_STATUS ? EDDY_WS_CLOSE_NORMAL : code, NULL);
        if (c != NULL) {
            eddy_ctx_write_and_flush(ctx, &c->_msg, NULL);
        }
    }
    /* The application learns the status from the frame; then TCP closes once our close is
     * out (section 7.1.1: the server closes first; a client closing after its answer is
     * flushed does no harm either). */
    eddy_ctx_fire_channel_read(ctx, &f->_msg);
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_close_after_flush(ctx, NULL);
    }
}

/* Check n bytes of text at p: false (the connection failed) at the first bad byte. */
static bool text_ok(eddy_ctx_t *ctx, ws_protocol_t *s, eddy_ws_frame_t *f)
{
    size_t n = eddy_buf_readable(f->payload);
    if (eddy__ws_utf8_step(&s->utf8, eddy_buf_read_ptr(f->payload), n) != n ||
        (f->fin && s->utf8 != EDDY__UTF8_ACCEPT)) {
        fail(ctx, s, f, EDDY_WS_CLOSE_INVALID_PAYLOAD);
        return false;
    }
    return true;
}

static void on_data(eddy_ctx_t *ctx, ws_protocol_t *s, eddy_ws_frame_t *f)
{
    const eddy_ws_config_t *c = &s->conf.c;
    bool cont = f->opcode == EDDY_WS_CONTINUATION;
    if (cont != (s->msg_opcode != 0)) {
        /* Section 5.4: a continuation needs an open message, a new message a closed one. */
        fail(ctx, s, f, EDDY_WS_CLOSE_PROTOCOL_ERROR);
        return;
    }
    if (!cont) {
        s->msg_opcode = f->opcode;
        s->utf8 = EDDY__UTF8_ACCEPT;
        s->msg_len = 0;
    }
    size_t n = eddy_buf_readable(f->payload);
    if (!c->no_aggregate && n > c->max_message_size - s->msg_len) {
        fail(ctx, s, f, EDDY_WS_CLOSE_TOO_BIG);
        return;
    }
    s->msg_len += n;
    if (s->msg_opcode == EDDY_WS_TEXT && !text_ok(ctx, s, f)) {
        return;
    }
    bool fin = f->fin;
    if (c->no_aggregate || (fin && !cont)) {
        if (fin) {
            s->msg_opcode = 0;
        }
        eddy_ctx_fire_channel_read(ctx, &f->_msg);
        return;
    }
    if (s->agg == NULL) {
        size_t first = n > 256 ? n : 256;
        s->agg = eddy_buf_alloc(eddy_ctx_alloc(ctx),
                                first < c->max_message_size ? first : c->max_message_size,
                                c->max_message_size);
    }
    if (s->agg == NULL || eddy_buf_write_bytes(s->agg, eddy_buf_read_ptr(f->payload), n) != 0) {
        fail(ctx, s, f, EDDY_WS_CLOSE_INTERNAL_ERROR);
        return;
    }
    eddy_msg_release(&f->_msg);
    if (fin) {
        eddy_ws_frame_t *m = eddy_ws_frame_new((eddy_ws_opcode_t)s->msg_opcode, true, s->agg);
        s->agg = NULL;
        s->msg_opcode = 0;
        if (m == NULL) {
            fail(ctx, s, NULL, EDDY_WS_CLOSE_INTERNAL_ERROR);
            return;
        }
        eddy_ctx_fire_channel_read(ctx, &m->_msg);
    }
}

static void protocol_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    ws_protocol_t *s = eddy_ctx_state(ctx);
    eddy_ws_frame_t *f = eddy_ws_frame_of(msg);
    if (f == NULL) {
        eddy_ctx_fire_channel_read(ctx, msg);
        return;
    }
    if (s->failed || s->close_received) {
        eddy_msg_release(msg); /* the connection is ending: section 1.4 */
        return;
    }
    s->last_read = eddy_loop_now_ns(eddy_ctx_loop(ctx));
    switch (f->opcode) {
    case EDDY_WS_PING:
        if (!s->close_sent) {
            eddy_ws_frame_t *pong =
                eddy_ws_frame_new(EDDY_WS_PONG, true, eddy_buf_retain(f->payload));
            if (pong != NULL) {
                eddy_ctx_write(ctx, &pong->_msg, NULL);
                s->flush = true;
            }
        }
        eddy_msg_release(msg);
        break;
    case EDDY_WS_PONG:
        eddy_msg_release(msg);
        break;
    case EDDY_WS_CLOSE:
        on_close(ctx, s, f);
        break;
    default:
        on_data(ctx, s, f);
        break;
    }
}

static void protocol_read_complete(eddy_ctx_t *ctx)
{
    ws_protocol_t *s = eddy_ctx_state(ctx);
    if (s->flush) {
        s->flush = false;
        eddy_ctx_flush(ctx);
    }
    eddy_ctx_fire_channel_read_complete(ctx);
}

static void close_due(eddy_ctx_t *ctx, void *arg)
{
    (void)arg;
    eddy_ctx_close(ctx, NULL); /* the peer never answered our close */
}

static void protocol_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    ws_protocol_t *s = eddy_ctx_state(ctx);
    eddy_ws_frame_t *f = eddy_ws_frame_of(msg);
    if (f != NULL && s->close_sent) {
        /* Section 5.5.1: nothing follows a close frame. */
        eddy_ctx_fail_write(ctx, msg, p, EDDY_ECLOSED);
        return;
    }
    if (f != NULL && f->opcode == EDDY_WS_CLOSE) {
        s->close_sent = true;
        if (s->conf.c.close_timeout_ms > 0) {
            eddy_ctx_schedule(ctx, s->conf.c.close_timeout_ms, close_due, NULL);
        }
    }
    eddy_ctx_write(ctx, msg, p);
}

static void ping_due(eddy_ctx_t *ctx, void *arg)
{
    (void)arg;
    ws_protocol_t *s = eddy_ctx_state(ctx);
    int64_t idle = eddy_loop_now_ns(eddy_ctx_loop(ctx)) - s->last_read;
    if (s->close_sent || idle < s->conf.c.ping_interval_ms * 1000000) {
        return;
    }
    eddy_ws_frame_t *ping = eddy_ws_frame_new(EDDY_WS_PING, true, NULL);
    if (ping != NULL) {
        eddy_ctx_write_and_flush(ctx, &ping->_msg, NULL);
    }
}

static void protocol_added(eddy_ctx_t *ctx)
{
    ws_protocol_t *s = eddy_ctx_state(ctx);
    s->last_read = eddy_loop_now_ns(eddy_ctx_loop(ctx));
    int64_t every = s->conf.c.ping_interval_ms;
    if (every > 0) {
        /* Checked at every interval: a ping goes once the peer was silent for a whole one. */
        s->ping_timer = eddy_ctx_schedule_at_fixed_rate(ctx, every, every, ping_due, NULL);
    }
}

static void protocol_removed(eddy_ctx_t *ctx)
{
    ws_protocol_t *s = eddy_ctx_state(ctx);
    drop_message(s);
}

static const eddy_handler_ops_t ws_protocol_handler = {
    .name = "ws_protocol",
    .handler_added = protocol_added,
    .handler_removed = protocol_removed,
    .channel_read = protocol_read,
    .channel_read_complete = protocol_read_complete,
    .write = protocol_write,
};

eddy_handler_t eddy_ws_protocol_handler(bool client, const eddy_ws_config_t *config)
{
    _Static_assert(offsetof(ws_protocol_t, conf) == 0, "eddy__ws_state_new() copies conf first");
    ws_protocol_t *s = eddy__ws_state_new(sizeof(ws_protocol_t), config);
    if (s != NULL) {
        s->client = client;
    }
    return eddy_handler("ws_protocol", &ws_protocol_handler, s, eddy__ws_state_free);
}
