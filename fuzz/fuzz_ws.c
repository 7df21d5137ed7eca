/*
 * Fuzz target: the WebSocket server side on an embedded channel, after a real handshake. The
 * HTTP request decoder, aggregator and the WebSocket handshaker take a fixed upgrade request
 * (offering permessage-deflate when the options byte says so), then the input is the client's
 * frame stream: the frame decoder, permessage-deflate and the protocol handler run on it.
 * Small limits in some runs. Checks: no sanitizer report, every buffer released, text
 * messages are valid UTF-8, no message passes the limits, nothing reaches the application
 * after the peer's close, the only errors are the protocol's (EDDY_EDECODE,
 * EDDY_ETOOLONGFRAME), a closed channel's last frame out is a close frame with a valid
 * status, and the same messages whether fed whole or in pieces.
 */
#include <eddy/http.h>
#include <eddy/websocket.h>

#include "common.h"

typedef struct seen_s {
    hash_t h;
    size_t max_message;
    bool closed; /* the peer's close frame came through */
} seen_t;

static void on_frame(eddy_msg_t *m, void *arg)
{
    seen_t *s = arg;
    eddy_ws_frame_t *f = eddy_ws_frame_of(m);
    CHECK(f != NULL);
    CHECK(!s->closed);
    CHECK(f->rsv == 0);
    size_t n = eddy_ws_frame_len(f);
    hash_int(&s->h, f->opcode);
    hash_int(&s->h, (int64_t)n);
    CHECK(f->fin);
    CHECK(n <= s->max_message);
    if (n > 0) {
        hash_bytes(&s->h, eddy_buf_read_ptr(f->payload), n);
    }
    if (f->opcode == EDDY_WS_TEXT) {
        CHECK(eddy_ws_utf8_valid(eddy_buf_read_ptr(f->payload), n));
    } else if (f->opcode == EDDY_WS_CLOSE) {
        s->closed = true;
    } else {
        CHECK(f->opcode == EDDY_WS_BINARY);
    }
}

static uint64_t run(const uint8_t *p, size_t n, uint8_t mode, uint8_t opt)
{
    eddy_ws_config_t c = {.path = "/ws", .deflate = (opt & 1) != 0};
    if (opt & 2) {
        c.max_frame_size = 64;
        c.max_message_size = 200;
    }
    if (opt & 8) {
        c.server_no_context_takeover = true;
        c.client_no_context_takeover = true;
    }
    eddy_channel_t *ch = eddy_embedded_channel_new();
    CHECK(ch != NULL);
    CHECK(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch), eddy_http_request_decoder(NULL),
                                 eddy_http_aggregator(0), eddy_ws_server_handshaker(&c)) == 0);
    char req[512];
    int len = snprintf(req, sizeof(req),
                       "GET /ws HTTP/1.1\r\nHost: fuzz\r\nUpgrade: websocket\r\n"
                       "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                       "Sec-WebSocket-Version: 13\r\n%s\r\n",
                       c.deflate ? "Sec-WebSocket-Extensions: permessage-deflate; "
                                   "client_max_window_bits\r\n"
                                 : "");
    CHECK(len > 0 && (size_t)len < sizeof(req));
    eddy_buf_t *b = eddy_buf_from(req, (size_t)len);
    CHECK(b != NULL);
    eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
    CHECK(eddy_pipeline_context(eddy_channel_pipeline(ch), "ws_protocol") != NULL);
    eddy_msg_t *m;
    while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
        eddy_msg_release(m); /* the 101 */
    }

    seen_t seen = {HASH_INIT,
                   c.max_message_size != 0 ? c.max_message_size : EDDY_WS_MAX_MESSAGE_SIZE, false};
    hash_t out = HASH_INIT;
    uint8_t last_op = 0;
    int last_code = -1;
    uint32_t rng = mode;
    size_t off = 0;
    do {
        size_t k = next_chunk(mode, &rng, n - off);
        b = eddy_buf_from(p + off, k);
        CHECK(b != NULL);
        eddy_embedded_write_inbound(ch, eddy_buf_msg(b));
        off += k;
        int err = eddy_embedded_error(ch);
        CHECK(err == 0 || err == EDDY_EDECODE || err == EDDY_ETOOLONGFRAME);
        while ((m = eddy_embedded_read_inbound(ch)) != NULL) {
            on_frame(m, &seen);
            eddy_msg_release(m);
        }
        while ((m = eddy_embedded_read_outbound(ch)) != NULL) {
            eddy_buf_t *ob = eddy_buf_of(m);
            CHECK(ob != NULL);
            const uint8_t *q = eddy_buf_read_ptr(ob);
            size_t qn = eddy_buf_readable(ob);
            CHECK(qn >= 2 && (q[1] & 0x80) == 0); /* one whole unmasked frame per buffer */
            last_op = q[0] & 0x0f;
            last_code = last_op == EDDY_WS_CLOSE && qn >= 4 ? q[2] << 8 | q[3] : -1;
            hash_bytes(&out, q, qn);
            eddy_msg_release(m);
        }
    } while (off < n && eddy_channel_is_open(ch));
    if (!eddy_channel_is_open(ch)) {
        CHECK(last_op == EDDY_WS_CLOSE);
        CHECK(eddy_ws_close_code_valid(last_code));
    }
    eddy_embedded_finish(ch);
    return seen.h.h ^ (out.h * 31);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_one(run, data, size);
    return 0;
}
