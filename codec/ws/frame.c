/*
 * WebSocket frames as messages, close codes, the UTF-8 check, masking, base64, and the
 * configuration copy the handlers share.
 */
#include "codec/ws/internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>


/* ---------------------------------------------------------------------------------------
 * Frames
 */

static void frame_free(eddy_msg_t *msg)
{
    eddy_ws_frame_t *f = EDDY_CONTAINER_OF(msg, eddy_ws_frame_t, _msg);
    eddy_buf_release(f->payload);
    free(f);
}

static bool opcode_known(unsigned op)
{
    return op <= EDDY_WS_BINARY || (op >= EDDY_WS_CLOSE && op <= EDDY_WS_PONG);
}

eddy_ws_frame_t *eddy_ws_frame_new(eddy_ws_opcode_t opcode, bool fin, eddy_buf_t *payload)
{
    if (payload == NULL) {
        payload = eddy_buf_new(0);
        if (payload == NULL) {
            return NULL;
        }
    }
    eddy_ws_frame_t *f = opcode_known(opcode) ? malloc(sizeof(*f)) : NULL;
    if (f == NULL) {
        eddy_buf_release(payload);
        return NULL;
    }
    eddy_msg_init(&f->_msg, EDDY_MSG_WS_FRAME, frame_free);
    f->opcode = (uint8_t)opcode;
    f->fin = fin;
    f->rsv = 0;
    f->payload = payload;
    return f;
}

static eddy_ws_frame_t *frame_copy(eddy_ws_opcode_t op, const void *p, size_t n)
{
    eddy_buf_t *b = eddy_buf_from(p, n);
    return b != NULL ? eddy_ws_frame_new(op, true, b) : NULL;
}

eddy_ws_frame_t *eddy_ws_text_frame(const void *s, size_t n)
{
    return frame_copy(EDDY_WS_TEXT, s, n);
}

eddy_ws_frame_t *eddy_ws_binary_frame(const void *p, size_t n)
{
    return frame_copy(EDDY_WS_BINARY, p, n);
}

eddy_ws_frame_t *eddy_ws_close_frame(int code, const char *reason)
{
    if (code == 0) {
        return eddy_ws_frame_new(EDDY_WS_CLOSE, true, NULL);
    }
    if (!eddy_ws_close_code_valid(code)) {
        return NULL;
    }
    size_t n = reason != NULL ? strlen(reason) : 0;
    if (n > 123) {
        n = 123; /* a control frame carries at most 125 bytes, two of them the code */
    }
    eddy_buf_t *b = eddy_buf_new(2 + n);
    if (b == NULL) {
        return NULL;
    }
    eddy_buf_write_u16(b, (uint16_t)code);
    eddy_buf_write_bytes(b, reason, n);
    return eddy_ws_frame_new(EDDY_WS_CLOSE, true, b);
}

eddy_ws_frame_t *eddy_ws_frame_of(eddy_msg_t *msg)
{
    if (msg == NULL || msg->type != EDDY_MSG_WS_FRAME) {
        return NULL;
    }
    return EDDY_CONTAINER_OF(msg, eddy_ws_frame_t, _msg);
}

eddy_msg_t *eddy_ws_frame_msg(eddy_ws_frame_t *f)
{
    return &f->_msg;
}

size_t eddy_ws_frame_len(const eddy_ws_frame_t *f)
{
    return eddy_buf_readable(f->payload);
}

int eddy_ws_frame_close_code(const eddy_ws_frame_t *f)
{
    if (f->opcode != EDDY_WS_CLOSE) {
        return -1;
    }
    size_t n = eddy_buf_readable(f->payload);
    if (n == 0) {
        return EDDY_WS_CLOSE_NO_STATUS;
    }
    if (n == 1) {
        return -1;
    }
    const uint8_t *p = eddy_buf_read_ptr(f->payload);
    return p[0] << 8 | p[1];
}

const char *eddy_ws_frame_close_reason(const eddy_ws_frame_t *f, size_t *len)
{
    size_t n = f->opcode == EDDY_WS_CLOSE ? eddy_buf_readable(f->payload) : 0;
    if (n <= 2) {
        *len = 0;
        return NULL;
    }
    *len = n - 2;
    return (const char *)eddy_buf_read_ptr(f->payload) + 2;
}

bool eddy_ws_close_code_valid(int code)
{
    /* RFC 6455 section 7.4: 1004-1006 and 1015 are reserved or never sent; 1012-1014 are
     * registered with IANA since; 3000-4999 belong to libraries and applications. */
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

/* ---------------------------------------------------------------------------------------
 * UTF-8: Bjoern Hoehrmann's DFA (http://bjoern.hoehrmann.de/utf-8/decoder/dfa/, MIT). The
 * first 256 entries map bytes to classes, the rest map state + class to the next state; a
 * state rejects at the first byte no valid sequence continues with, so errors are found
 * where they are, also across fragments.
 */

/* clang-format off */
static const uint8_t utf8d[] = {
    /* byte classes: 00-7f, 80-8f, 90-9f, a0-bf, c0-c1, c2-df, e0, e1-ec, ed, ee-ef, f0, f1-f3,
     * f4, f5-ff */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    8, 8, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    10, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 3, 3, 11, 6, 6, 6, 5, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8,
    /* transitions: state (a multiple of 12) + class */
    0, 12, 24, 36, 60, 96, 84, 12, 12, 12, 48, 72,
    12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    12, 0, 12, 12, 12, 12, 12, 0, 12, 0, 12, 12,
    12, 24, 12, 12, 12, 12, 12, 24, 12, 24, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 24, 12, 12, 12, 12,
    12, 24, 12, 12, 12, 12, 12, 12, 12, 24, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 36, 12, 36, 12, 12,
    12, 36, 12, 12, 12, 12, 12, 36, 12, 36, 12, 12,
    12, 36, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
};
/* clang-format on */

size_t eddy__ws_utf8_step(uint32_t *state, const uint8_t *p, size_t n)
{
    uint32_t s = *state;
    size_t i = 0;
    if (s == EDDY__UTF8_ACCEPT) {
        /* ASCII runs, the common case, eight bytes at a time. */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ull) {
                break;
            }
            i += 8;
        }
    }
    for (; i < n; i++) {
        s = utf8d[256 + s + utf8d[p[i]]];
        if (s == EDDY__UTF8_REJECT) {
            *state = s;
            return i;
        }
    }
    *state = s;
    return n;
}

bool eddy_ws_utf8_valid(const void *p, size_t n)
{
    uint32_t s = EDDY__UTF8_ACCEPT;
    return eddy__ws_utf8_step(&s, p, n) == n && s == EDDY__UTF8_ACCEPT;
}

/* ---------------------------------------------------------------------------------------
 * Masking
 */

unsigned eddy__ws_mask(uint8_t *p, size_t n, const uint8_t key[4], unsigned phase)
{
    assert(phase < 4);
    size_t i = 0;
    /* Bytes until the key is back at phase 0, then whole words of the key repeated. */
    while (i < n && phase != 0) {
        p[i++] ^= key[phase];
        phase = (phase + 1) & 3;
    }
    if (n - i >= 8) {
        uint8_t k8[8] = {key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3]};
        uint64_t k;
        memcpy(&k, k8, 8);
        for (; n - i >= 8; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            w ^= k;
            memcpy(p + i, &w, 8);
        }
    }
    for (; i < n; i++) {
        p[i] ^= key[phase];
        phase = (phase + 1) & 3;
    }
    assert(i == n && phase < 4);
    return phase;
}

/* ---------------------------------------------------------------------------------------
 * Base64 and the accept key
 */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void eddy__ws_base64(const uint8_t *p, size_t n, char *out)
{
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *out++ = b64[v >> 18];
        *out++ = b64[(v >> 12) & 63];
        *out++ = b64[(v >> 6) & 63];
        *out++ = b64[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *out++ = b64[v >> 18];
        *out++ = b64[(v >> 12) & 63];
        *out++ = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        *out++ = '=';
    }
}

static int b64_value(char c)
{
    const char *at = c != '\0' ? strchr(b64, c) : NULL;
    return at != NULL ? (int)(at - b64) : -1;
}

int eddy__ws_unbase64(const char *s, size_t n, uint8_t *out, size_t max)
{
    if (n % 4 != 0) {
        return -1;
    }
    size_t len = 0;
    for (size_t i = 0; i < n; i += 4) {
        bool last = i + 4 == n;
        int pad = last ? (s[i + 3] == '=') + (s[i + 2] == '=' && s[i + 3] == '=') : 0;
        uint32_t v = 0;
        for (int j = 0; j < 4; j++) {
            int d = j >= 4 - pad ? 0 : b64_value(s[i + (size_t)j]);
            if (d < 0) {
                return -1;
            }
            v = v << 6 | (uint32_t)d;
        }
        assert(pad >= 0 && pad <= 2);
        size_t k = 3 - (size_t)pad;
        if (len + k > max) {
            return -1;
        }
        uint8_t bytes[3] = {(uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
        /* Bits under the padding must be zero (RFC 4648 section 3.5: canonical input). */
        if ((pad == 1 && bytes[2] != 0) || (pad == 2 && bytes[1] != 0)) {
            return -1;
        }
        memcpy(out + len, bytes, k);
        len += k;
    }
    return (int)len;
}

void eddy__ws_fail_connection(eddy_ctx_t *ctx, int code, bool send_close)
{
    assert(eddy_ws_close_code_valid(code)); /* a status that may travel in a close frame */
    if (send_close) {
        eddy_ws_frame_t *c = eddy_ws_close_frame(code, NULL);
        if (c != NULL) {
            eddy_ctx_write_and_flush(ctx, &c->_msg, NULL);
        }
    }
    eddy_ctx_fire_exception(ctx, code == EDDY_WS_CLOSE_TOO_BIG ? EDDY_ETOOLONGFRAME : EDDY_EDECODE);
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_close_after_flush(ctx, NULL);
    }
}

void eddy_ws_accept_key(const char *key, size_t n, char out[29])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    uint8_t md[20];
    eddy__ws_sha1(key, n, guid, sizeof(guid) - 1, md);
    eddy__ws_base64(md, 20, out);
    out[28] = '\0';
}

/* ---------------------------------------------------------------------------------------
 * Header lists
 */

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c | 0x20) : c;
}

bool eddy__ws_list_each(const char *s, size_t n, eddy__ws_item_fn fn, void *arg)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == ',')) {
            i++;
        }
        size_t start = i;
        while (i < n && s[i] != ',') {
            i++;
        }
        size_t end = i;
        while (end > start && (s[end - 1] == ' ' || s[end - 1] == '\t')) {
            end--;
        }
        assert(start <= end && end <= n);
        if (end > start && fn(s + start, end - start, arg)) {
            return true;
        }
    }
    return false;
}

static bool is_token(const char *p, size_t n, void *arg)
{
    const char *token = *(const char **)arg;
    size_t k = 0;
    while (k < n && token[k] != '\0' && lower(p[k]) == lower(token[k])) {
        k++;
    }
    return k == n && token[k] == '\0';
}

bool eddy__ws_list_has(const char *s, size_t n, const char *token)
{
    return eddy__ws_list_each(s, n, is_token, &token);
}

/* ---------------------------------------------------------------------------------------
 * Configuration
 */

static size_t str_size(const char *s)
{
    return s != NULL ? strlen(s) + 1 : 0;
}

static const char *str_put(char **at, const char *s)
{
    if (s == NULL) {
        return NULL;
    }
    size_t n = strlen(s) + 1;
    memcpy(*at, s, n);
    const char *r = *at;
    *at += n;
    return r;
}

static bool bits_ok(int b)
{
    return b == 0 || (b >= 8 && b <= 15);
}

int eddy__ws_conf_copy(eddy__ws_conf_t *dst, const eddy_ws_config_t *src)
{
    static const eddy_ws_config_t defaults = {0};
    const eddy_ws_config_t *c = src != NULL ? src : &defaults;
    if (!bits_ok(c->server_max_window_bits) || !bits_ok(c->client_max_window_bits) ||
        c->compression_level < 0 || c->compression_level > 9) {
        return EDDY_EINVAL;
    }
    dst->c = *c;
    size_t n = str_size(c->subprotocols) + str_size(c->path) + str_size(c->uri) +
               str_size(c->host) + str_size(c->origin);
    dst->strings = n > 0 ? malloc(n) : NULL;
    if (n > 0 && dst->strings == NULL) {
        return EDDY_ENOMEM;
    }
    char *at = dst->strings;
    dst->c.subprotocols = str_put(&at, c->subprotocols);
    dst->c.path = str_put(&at, c->path);
    dst->c.uri = str_put(&at, c->uri);
    dst->c.host = str_put(&at, c->host);
    dst->c.origin = str_put(&at, c->origin);
    eddy_ws_config_t *d = &dst->c;
    if (d->max_frame_size == 0) {
        d->max_frame_size = EDDY_WS_MAX_FRAME_SIZE;
    }
    if (d->max_message_size == 0) {
        d->max_message_size = EDDY_WS_MAX_MESSAGE_SIZE;
    }
    if (d->close_timeout_ms == 0) {
        d->close_timeout_ms = EDDY_WS_CLOSE_TIMEOUT_MS;
    }
    if (d->handshake_timeout_ms == 0) {
        d->handshake_timeout_ms = EDDY_WS_HANDSHAKE_TIMEOUT_MS;
    }
    if (d->server_max_window_bits == 0) {
        d->server_max_window_bits = 15;
    }
    if (d->client_max_window_bits == 0) {
        d->client_max_window_bits = 15;
    }
    if (d->compression_level == 0) {
        d->compression_level = 6;
    }
    if (d->path == NULL) {
        d->path = "/";
    }
    if (d->uri == NULL) {
        d->uri = "/";
    }
    return 0;
}

void eddy__ws_conf_free(eddy__ws_conf_t *c)
{
    free(c->strings);
    c->strings = NULL;
}

void *eddy__ws_state_new(size_t size, const eddy_ws_config_t *c)
{
    assert(size >= sizeof(eddy__ws_conf_t));
    eddy__ws_conf_t *s = calloc(1, size);
    if (s != NULL && eddy__ws_conf_copy(s, c) != 0) {
        free(s);
        s = NULL;
    }
    return s;
}

void eddy__ws_state_free(void *state)
{
    eddy__ws_conf_free(state);
    free(state);
}
