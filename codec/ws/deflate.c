/*
 * permessage-deflate (RFC 7692): the negotiation of its parameters, and the handler that
 * inflates what arrives and deflates what leaves, between the frame decoder and the
 * protocol handler.
 *
 * A compressed message has RSV1 on its first frame; its frames' payloads together are a raw
 * deflate stream flushed with Z_SYNC_FLUSH, its final 00 00 ff ff removed (section 7.2.1).
 * Inflating appends that tail back at the end of the message. What one message inflates to
 * is capped at the message limit, so a small compressed message cannot make us hold a large
 * one (a decompression bomb is refused with 1009 while it inflates). Each side keeps its
 * window between messages unless no_context_takeover was agreed for it.
 *
 * zlib refuses a raw deflate window of 8 bits (since 1.2.9); when 8 is agreed for our
 * compression we compress with 9 bits, as Netty and other zlib-based peers do. Inflating
 * always uses a 15-bit window, which reads any smaller window's stream.
 */
#include "codec/ws/internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

/* ---------------------------------------------------------------------------------------
 * Negotiation
 */

typedef struct params_s {
    bool snct, cnct; /* server_ / client_no_context_takeover */
    int smwb, cmwb;  /* server_ / client_max_window_bits: 0 absent, -1 present without value */
} params_t;

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The value's digits as 8 to 15, or -1. Quotes allowed (section 7.1: a quoted-string may
 * carry it). */
static int bits_value(const char *v, size_t n)
{
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v++;
        n -= 2;
    }
    if (n == 1 && v[0] >= '8' && v[0] <= '9') {
        return v[0] - '0';
    }
    if (n == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5') {
        return 10 + v[1] - '0';
    }
    return -1;
}

static bool name_is(const char *p, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

/* Parse "; a; b=1" (the text after the extension's name) into out. */
static int parse_params(const char *s, size_t n, params_t *out)
{
    memset(out, 0, sizeof(*out));
    size_t i = 0;
    while (i < n) {
        while (i < n && (is_blank(s[i]) || s[i] == ';')) {
            i++;
        }
        if (i == n) {
            break;
        }
        size_t start = i;
        while (i < n && s[i] != ';') {
            i++;
        }
        size_t end = i;
        while (end > start && is_blank(s[end - 1])) {
            end--;
        }
        const char *eq = memchr(s + start, '=', end - start);
        size_t nlen = eq != NULL ? (size_t)(eq - (s + start)) : end - start;
        while (nlen > 0 && is_blank(s[start + nlen - 1])) {
            nlen--;
        }
        const char *v = NULL;
        size_t vlen = 0;
        if (eq != NULL) {
            v = eq + 1;
            vlen = (size_t)(s + end - v);
            while (vlen > 0 && is_blank(*v)) {
                v++;
                vlen--;
            }
        }
        const char *name = s + start;
        if (name_is(name, nlen, "server_no_context_takeover") && v == NULL && !out->snct) {
            out->snct = true;
        } else if (name_is(name, nlen, "client_no_context_takeover") && v == NULL && !out->cnct) {
            out->cnct = true;
        } else if (name_is(name, nlen, "server_max_window_bits") && v != NULL && out->smwb == 0) {
            out->smwb = bits_value(v, vlen);
            if (out->smwb < 0) {
                return EDDY_EINVAL;
            }
        } else if (name_is(name, nlen, "client_max_window_bits") && out->cmwb == 0) {
            out->cmwb = v != NULL ? bits_value(v, vlen) : -1;
            if (v != NULL && out->cmwb < 0) {
                return EDDY_EINVAL;
            }
        } else {
            return EDDY_EINVAL; /* section 7.1: unknown or repeated: decline the offer */
        }
    }
    return 0;
}

static int zlib_bits(int bits)
{
    return bits < 9 ? 9 : bits;
}

int eddy__ws_deflate_negotiate_server(const char *params, size_t n, const eddy_ws_config_t *c,
                                      eddy__ws_deflate_params_t *out, char *answer, size_t cap)
{
    params_t o;
    int err = parse_params(params, n, &o);
    if (err != 0) {
        return err;
    }
    bool snct = o.snct || c->server_no_context_takeover;
    bool cnct = o.cnct || c->client_no_context_takeover;
    int ours = o.smwb > 0 ? o.smwb : 15;
    if (c->server_max_window_bits < ours) {
        ours = c->server_max_window_bits;
    }
    /* The client's window may be limited only when it said it can be (section 7.1.2.2). */
    int theirs = o.cmwb > 0 ? o.cmwb : 15;
    if (o.cmwb != 0 && c->client_max_window_bits < theirs) {
        theirs = c->client_max_window_bits;
    }
    int len =
        snprintf(answer, cap, "permessage-deflate%s%s", snct ? "; server_no_context_takeover" : "",
                 cnct ? "; client_no_context_takeover" : "");
    if (len >= 0 && (size_t)len < cap && (o.smwb > 0 || ours < 15)) {
        len += snprintf(answer + len, cap - (size_t)len, "; server_max_window_bits=%d", ours);
    }
    if (len >= 0 && (size_t)len < cap && o.cmwb != 0 && theirs < 15) {
        len += snprintf(answer + len, cap - (size_t)len, "; client_max_window_bits=%d", theirs);
    }
    if (len < 0 || (size_t)len >= cap) {
        return EDDY_ENOMEM;
    }
    *out = (eddy__ws_deflate_params_t){snct, cnct, zlib_bits(ours), theirs};
    return 0;
}

int eddy__ws_deflate_accept_client(const char *params, size_t n, const eddy_ws_config_t *c,
                                   eddy__ws_deflate_params_t *out)
{
    params_t o;
    int err = parse_params(params, n, &o);
    if (err != 0) {
        return err;
    }
    if (o.cmwb < 0 || (o.smwb > 0 && o.smwb > c->server_max_window_bits)) {
        return EDDY_EINVAL; /* a window we did not allow, or one without its value */
    }
    int ours = o.cmwb > 0 ? o.cmwb : 15;
    if (c->client_max_window_bits < ours) {
        ours = c->client_max_window_bits;
    }
    *out = (eddy__ws_deflate_params_t){o.cnct || c->client_no_context_takeover, o.snct,
                                       zlib_bits(ours), o.smwb > 0 ? o.smwb : 15};
    return 0;
}

void eddy__ws_deflate_offer(const eddy_ws_config_t *c, char *out, size_t cap)
{
    int len = snprintf(out, cap, "permessage-deflate%s%s; client_max_window_bits",
                       c->server_no_context_takeover ? "; server_no_context_takeover" : "",
                       c->client_no_context_takeover ? "; client_no_context_takeover" : "");
    if (len >= 0 && (size_t)len < cap && c->client_max_window_bits < 15) {
        len += snprintf(out + len, cap - (size_t)len, "=%d", c->client_max_window_bits);
    }
    if (len >= 0 && (size_t)len < cap && c->server_max_window_bits < 15) {
        snprintf(out + len, cap - (size_t)len, "; server_max_window_bits=%d",
                 c->server_max_window_bits);
    }
}

/* ---------------------------------------------------------------------------------------
 * The handler
 */

/* Bytes zlib works on per call, on the stack. */
#define CHUNK 16384

static const uint8_t tail[4] = {0x00, 0x00, 0xff, 0xff};

typedef struct ws_deflate_s {
    eddy__ws_deflate_params_t p;
    size_t max_message;
    int level;
    bool failed;
    bool in_open;       /* an inbound data message is open */
    bool in_compressed; /* ... and it is compressed */
    size_t in_total;    /* what it inflated to so far */
    bool out_open;      /* an outbound data message is open (we compress all of them) */
    bool inf_ready, def_ready;
    z_stream inf, def;
} ws_deflate_t;

static void fail(eddy_ctx_t *ctx, ws_deflate_t *s, eddy_ws_frame_t *f, int code)
{
    assert(!s->failed); /* deflate_read() drops every frame after the first failure */
    eddy_msg_release(&f->_msg);
    s->failed = true;
    eddy__ws_fail_connection(ctx, code, true);
}

/* Inflate n bytes at in, appending to out, up to limit bytes in all (out's readable count
 * included): 0, EDDY_ETOOLONGFRAME past the limit, EDDY_EDECODE for bad data, EDDY_ENOMEM. */
static int inflate_into(ws_deflate_t *s, const uint8_t *in, size_t n, eddy_buf_t *out, size_t limit)
{
    assert(s->inf_ready && eddy_buf_readable(out) <= limit);
    uint8_t chunk[CHUNK];
    s->inf.next_in = (Bytef *)(uintptr_t)in; /* zlib's API is not const; it only reads */
    s->inf.avail_in = (uInt)n;
    for (;;) {
        s->inf.next_out = chunk;
        s->inf.avail_out = CHUNK;
        int rc = inflate(&s->inf, Z_SYNC_FLUSH);
        if (rc != Z_OK && rc != Z_BUF_ERROR && rc != Z_STREAM_END) {
            return rc == Z_MEM_ERROR ? EDDY_ENOMEM : EDDY_EDECODE;
        }
        size_t got = CHUNK - s->inf.avail_out;
        if (got > limit - eddy_buf_readable(out)) {
            return EDDY_ETOOLONGFRAME;
        }
        if (got > 0 && eddy_buf_write_bytes(out, chunk, got) != 0) {
            return EDDY_ENOMEM;
        }
        if (rc == Z_STREAM_END) {
            /* The peer ended the stream with a final block (section 7.2.3.3 allows it): what
             * follows starts afresh. */
            inflateReset(&s->inf);
            if (s->inf.avail_in == 0) {
                return 0;
            }
            continue;
        }
        if (s->inf.avail_in == 0 && s->inf.avail_out != 0) {
            return 0;
        }
        if (rc == Z_BUF_ERROR && got == 0) {
            return 0; /* no progress possible: the input ended inside a block */
        }
    }
}

static void deflate_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    ws_deflate_t *s = eddy_ctx_state(ctx);
    eddy_ws_frame_t *f = eddy_ws_frame_of(msg);
    if (f != NULL && s->failed) {
        eddy_msg_release(msg); /* we failed the connection: nothing more goes on */
        return;
    }
    if (f == NULL || (f->opcode & 0x8) != 0) {
        eddy_ctx_fire_channel_read(ctx, msg);
        return;
    }
    if (f->opcode != EDDY_WS_CONTINUATION) {
        if (s->in_open) {
            /* A new message inside one: the protocol handler refuses it; not ours to
             * inflate. */
            eddy_ctx_fire_channel_read(ctx, msg);
            return;
        }
        s->in_compressed = (f->rsv & EDDY_WS_RSV1) != 0;
        s->in_total = 0;
        s->in_open = !f->fin;
    } else if (!s->in_open) {
        eddy_ctx_fire_channel_read(ctx, msg); /* no message to continue: refused after us */
        return;
    } else if (f->fin) {
        s->in_open = false;
    }
    if (!s->in_compressed) {
        eddy_ctx_fire_channel_read(ctx, msg);
        return;
    }
    if (!s->inf_ready) {
        memset(&s->inf, 0, sizeof(s->inf));
        if (inflateInit2(&s->inf, -15) != Z_OK) {
            fail(ctx, s, f, EDDY_WS_CLOSE_INTERNAL_ERROR);
            return;
        }
        s->inf_ready = true;
    }
    size_t n = eddy_buf_readable(f->payload);
    assert(s->in_total <= s->max_message); /* inflate_into() stops at the limit */
    size_t limit = s->max_message - s->in_total;
    eddy_buf_t *out = eddy_buf_alloc(eddy_ctx_alloc(ctx), n * 2 + 64 < limit ? n * 2 + 64 : limit,
                                     EDDY_BUF_DEFAULT_MAX_CAPACITY);
    int err = out != NULL ? 0 : EDDY_ENOMEM;
    if (err == 0) {
        err = inflate_into(s, eddy_buf_read_ptr(f->payload), n, out, limit);
    }
    if (err == 0 && f->fin) {
        err = inflate_into(s, tail, sizeof(tail), out, limit);
        if (err == 0 && s->p.peer_no_context) {
            inflateReset(&s->inf);
        }
    }
    if (err != 0) {
        if (out != NULL) {
            eddy_buf_release(out);
        }
        fail(ctx, s, f,
             err == EDDY_ETOOLONGFRAME ? EDDY_WS_CLOSE_TOO_BIG
             : err == EDDY_EDECODE     ? EDDY_WS_CLOSE_INVALID_PAYLOAD
                                       : EDDY_WS_CLOSE_INTERNAL_ERROR);
        return;
    }
    s->in_total += eddy_buf_readable(out);
    eddy_buf_release(f->payload);
    f->payload = out;
    f->rsv &= (uint8_t)~EDDY_WS_RSV1;
    eddy_ctx_fire_channel_read(ctx, msg);
}

/* Deflate f's payload (sync-flushed, the tail removed at the end of the message) into a new
 * buffer, *outp: 0 or an error. f is only read. */
static int deflate_frame(ws_deflate_t *s, eddy_ctx_t *ctx, const eddy_ws_frame_t *f,
                         eddy_buf_t **outp)
{
    if (!s->def_ready) {
        memset(&s->def, 0, sizeof(s->def));
        int rc = deflateInit2(&s->def, s->level, Z_DEFLATED, -s->p.our_window_bits, 8,
                              Z_DEFAULT_STRATEGY);
        if (rc != Z_OK) {
            return rc == Z_MEM_ERROR ? EDDY_ENOMEM : EDDY_EINVAL;
        }
        s->def_ready = true;
    }
    assert(s->def_ready && (f->opcode & 0x8) == 0); /* control frames go uncompressed */
    size_t n = eddy_buf_readable(f->payload);
    eddy_buf_t *out = eddy_buf_alloc(eddy_ctx_alloc(ctx), deflateBound(&s->def, (uLong)n) + 16,
                                     EDDY_BUF_DEFAULT_MAX_CAPACITY);
    if (out == NULL) {
        return EDDY_ENOMEM;
    }
    uint8_t chunk[CHUNK];
    s->def.next_in = (Bytef *)(uintptr_t)eddy_buf_read_ptr(f->payload);
    s->def.avail_in = (uInt)n;
    do {
        s->def.next_out = chunk;
        s->def.avail_out = CHUNK;
        int rc = deflate(&s->def, Z_SYNC_FLUSH);
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            eddy_buf_release(out);
            return EDDY_EIO;
        }
        size_t got = CHUNK - s->def.avail_out;
        assert(got <= CHUNK);
        if (eddy_buf_write_bytes(out, chunk, got) != 0) {
            eddy_buf_release(out);
            return EDDY_ENOMEM;
        }
    } while (s->def.avail_out == 0);
    if (f->fin) {
        size_t len = eddy_buf_readable(out);
        /* A sync flush ends with an empty stored block: 00 00 ff ff. */
        if (len >= 4 && memcmp(eddy_buf_read_ptr(out) + len - 4, tail, sizeof(tail)) == 0) {
            eddy_buf_set_writer_index(out, eddy_buf_writer_index(out) - 4);
        } else if (len == 0 && eddy_buf_write_u8(out, 0x00) != 0) {
            /* zlib writes nothing for no input after a flush (the stream is byte-aligned),
             * but the peer appends 00 00 ff ff to every message: without a block header
             * before it, that tail would start a stored block of 0xff00 bytes and the next
             * message would inflate as garbage (node's ws did). RFC 7692 section 7.2.1: end
             * with an empty stored block, 00 00 00 ff ff, less the tail: 00. */
            eddy_buf_release(out);
            return EDDY_ENOMEM;
        }
        if (s->p.our_no_context) {
            deflateReset(&s->def);
        }
    }
    *outp = out;
    return 0;
}

static void deflate_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    ws_deflate_t *s = eddy_ctx_state(ctx);
    eddy_ws_frame_t *f = eddy_ws_frame_of(msg);
    if (f == NULL || (f->opcode & 0x8) != 0 ||
        (f->opcode == EDDY_WS_CONTINUATION && !s->out_open)) {
        eddy_ctx_write(ctx, msg, p);
        return;
    }
    /* The compressed bytes go in a frame of their own: f may be shared (a channel group
     * writes one frame to every member, each with its own deflater), so it is only read. */
    bool first = f->opcode != EDDY_WS_CONTINUATION;
    eddy_buf_t *payload = NULL;
    int err = deflate_frame(s, ctx, f, &payload);
    eddy_ws_frame_t *z =
        err == 0 ? eddy_ws_frame_new((eddy_ws_opcode_t)f->opcode, f->fin, payload) : NULL;
    if (err == 0 && z == NULL) {
        err = EDDY_ENOMEM;
    }
    if (err == 0) {
        s->out_open = !f->fin;
        z->rsv = first ? EDDY_WS_RSV1 : 0; /* section 6.1: on the first frame only */
    }
    if (err != 0) {
        eddy_ctx_fail_write(ctx, msg, p, err);
        return;
    }
    eddy_msg_release(msg);
    eddy_ctx_write(ctx, &z->_msg, p);
}

static void deflate_removed(eddy_ctx_t *ctx)
{
    ws_deflate_t *s = eddy_ctx_state(ctx);
    if (s->inf_ready) {
        inflateEnd(&s->inf);
        s->inf_ready = false;
    }
    if (s->def_ready) {
        deflateEnd(&s->def);
        s->def_ready = false;
    }
}

static const eddy_handler_ops_t ws_deflate_handler = {
    .name = "ws_deflate",
    .handler_removed = deflate_removed,
    .channel_read = deflate_read,
    .write = deflate_write,
};

eddy_handler_t eddy__ws_deflate_handler(const eddy__ws_deflate_params_t *p,
                                        const eddy_ws_config_t *c)
{
    ws_deflate_t *s = calloc(1, sizeof(*s));
    if (s != NULL) {
        s->p = *p;
        s->max_message = c->max_message_size != 0 ? c->max_message_size : EDDY_WS_MAX_MESSAGE_SIZE;
        s->level = c->compression_level != 0 ? c->compression_level : 6;
    }
    return eddy_handler("ws_deflate", &ws_deflate_handler, s, eddy_free_state);
}

eddy_handler_t eddy_ws_deflate_handler(bool client, const char *params,
                                       const eddy_ws_config_t *config)
{
    static const eddy_ws_config_t defaults = {0};
    const eddy_ws_config_t *c = config != NULL ? config : &defaults;
    eddy__ws_conf_t conf;
    eddy__ws_deflate_params_t d;
    const char *name = "permessage-deflate";
    size_t skip = params != NULL && strncasecmp(params, name, strlen(name)) == 0 ? strlen(name) : 0;
    int err = params == NULL ? EDDY_EINVAL : eddy__ws_conf_copy(&conf, c);
    if (err == 0) {
        const char *rest = params + skip;
        err =
            client ? eddy__ws_deflate_accept_client(rest, strlen(rest), &conf.c, &d) : EDDY_EINVAL;
        if (!client) {
            char answer[256];
            err = eddy__ws_deflate_negotiate_server(rest, strlen(rest), &conf.c, &d, answer,
                                                    sizeof(answer));
        }
        if (err == 0) {
            eddy_handler_t h = eddy__ws_deflate_handler(&d, &conf.c);
            eddy__ws_conf_free(&conf);
            return h;
        }
        eddy__ws_conf_free(&conf);
    }
    return (eddy_handler_t){.name = "ws_deflate", .error = EDDY_ENOMEM};
}
