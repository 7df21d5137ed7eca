/*
 * The server's negotiation: HTTP/2 by its preface (prior knowledge on a plaintext port, or a
 * client that chose "h2" by ALPN) or by HTTP/1.1's "Upgrade: h2c", on one port beside
 * HTTP/1.1 (Netty's CleartextHttp2ServerUpgradeHandler). Either way the library's HTTP/1.1
 * handlers leave and the connection handler and the adapter take their place.
 */
#include "internal.h"

#include "buffer/layer.h"
#include "pipeline/layer.h"

#include <eddy/tls.h>

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN (sizeof(preface) - 1)

typedef struct negotiate_s {
    eddy_h2_options_t o;
    size_t max;         /* the adapter's max_content_length */
    eddy_buf_t *held;   /* the first bytes, while fewer than the preface's */
} negotiate_t;

/* Remove the library's HTTP/1.1 aggregator and encoder from p. */
static void http1_remove_but_decoder(eddy_pipeline_t *p)
{
    eddy_pipeline_remove_ops(p, eddy_http_aggregator_ops());
    eddy_pipeline_remove_ops(p, eddy_http_response_encoder_ops());
}

/* Remove the library's HTTP/1.1 handlers from p. */
static void http1_remove(eddy_pipeline_t *p)
{
    http1_remove_but_decoder(p);
    eddy_pipeline_remove_ops(p, eddy_http_request_decoder_ops());
}

/* Add h to p after (or, before, ahead of) the handler called base. */
static int add_at(eddy_pipeline_t *p, const char *base, bool before, eddy_handler_t h)
{
    if (h.ops == NULL) {
        return h.error;
    }
    return before ? eddy_pipeline_add_before(p, base, h.name, h.ops, h.state, h.free_state)
                  : eddy_pipeline_add_after(p, base, h.name, h.ops, h.state, h.free_state);
}

/* Add HTTP/2's handlers next to the handler called base. */
static int http2_add(eddy_pipeline_t *p, const char *base, bool before,
                     const eddy_h2_options_t *o, size_t max)
{
    int err = add_at(p, base, before, eddy_h2_connection(o));
    if (err == 0) {
        err = add_at(p, "h2-connection", false, eddy_h2_http_adapter(max));
    }
    return err;
}

/* Put HTTP/2's handlers in place of HTTP/1.1's, next to the handler called base. */
static int http2_install(eddy_pipeline_t *p, const char *base, bool before,
                         const eddy_h2_options_t *o, size_t max)
{
    http1_remove(p);
    return http2_add(p, base, before, o, max);
}

/* ---------------------------------------------------------------------------------------
 * Upgrade: h2c, watched on the first request
 */

/* Whether the comma-separated list v holds token (any case). */
static bool list_has(eddy_http_str_t v, const char *token)
{
    size_t n = strlen(token), i = 0;
    while (i < v.len) {
        while (i < v.len && (v.p[i] == ' ' || v.p[i] == '\t' || v.p[i] == ',')) {
            i++;
        }
        size_t start = i;
        while (i < v.len && v.p[i] != ',' && v.p[i] != ' ' && v.p[i] != '\t') {
            i++;
        }
        if (i - start == n && strncasecmp(v.p + start, token, n) == 0) {
            return true;
        }
    }
    return false;
}

/* base64url (RFC 4648 section 5, padding optional) of v into out (room for v.len bytes).
 * The decoded length, or -1. */
static ssize_t base64url_decode(eddy_http_str_t v, uint8_t *out)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    for (size_t i = 0; i < v.len; i++) {
        char ch = v.p[i];
        int d = ch >= 'A' && ch <= 'Z'   ? ch - 'A'
                : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
                : ch >= '0' && ch <= '9' ? ch - '0' + 52
                : ch == '-'              ? 62
                : ch == '_'              ? 63
                : ch == '='              ? -2
                                         : -1;
        if (d == -1) {
            return -1;
        }
        if (d == -2) {
            break;
        }
        acc = acc << 6 | (uint32_t)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return (ssize_t)n;
}

/* The HTTP2-Settings payload of an upgrade request, decoded into out; -1 when req is not one
 * we take (RFC 9113 section 3.2 of RFC 7540: exactly one HTTP2-Settings, no body). */
static ssize_t upgrade_settings(const eddy_http_request_t *req, uint8_t *out, size_t cap)
{
    const eddy_http_header_t *up = eddy_http_request_header(req, "upgrade");
    if (req->error != 0 || req->version != 11 || up == NULL || !list_has(up->value, "h2c") ||
        (req->body != NULL && eddy_buf_readable(req->body) > 0)) {
        return -1;
    }
    const eddy_http_header_t *hs = NULL;
    for (size_t i = 0; i < req->header_count; i++) {
        if (eddy_http_str_eq_nocase(req->headers[i].name, "http2-settings")) {
            if (hs != NULL) {
                return -1;
            }
            hs = &req->headers[i];
        }
    }
    if (hs == NULL || hs->value.len > cap) {
        return -1;
    }
    ssize_t n = base64url_decode(hs->value, out);
    return n >= 0 && n % 6 == 0 ? n : -1;
}

typedef struct watcher_s {
    eddy_h2_options_t o;
    size_t max;
} watcher_t;

static const char switching[] = "HTTP/1.1 101 Switching Protocols\r\n"
                                "Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n";

/* HTTP/2's handlers in place of HTTP/1.1's but the request decoder, right after it; stream 1
 * made of req (taken), and req passed on as its request. 0 or an EDDY_E code. */
static int upgrade_switch(eddy_ctx_t *ctx, watcher_t *w, eddy_http_request_t *req,
                          const uint8_t *set, size_t n)
{
    eddy_pipeline_t *p = eddy_ctx_pipeline(ctx);
    http1_remove_but_decoder(p); /* an answer to req must not meet HTTP/1.1's encoder */
    eddy_ctx_t *dec = eddy_pipeline_context_ops(p, eddy_http_request_decoder_ops());
    int err = dec != NULL ? http2_add(p, eddy_ctx_name(dec), false, &w->o, w->max)
                          : http2_add(p, eddy_ctx_name(ctx), true, &w->o, w->max);
    eddy__h2_conn_t *c = err == 0 ? eddy__h2_conn_of(p) : NULL;
    err = c != NULL ? eddy__h2_conn_upgrade(c, set, n, req->method == EDDY_HTTP_HEAD) : EDDY_ENOMEM;
    if (err != 0) {
        eddy_msg_release(&req->_msg);
        return err;
    }
    eddy_ctx_fire_user_event(eddy_pipeline_context(p, "h2-connection"), EDDY_EVENT_H2_ACTIVE,
                             NULL);
    return eddy__h2_adapter_upgraded(p, req, eddy__h2_stream_get(c, 1));
}

/* Answer 101, switch the pipeline, and serve req as stream 1. The request decoder leaves only
 * once stream 1 is made and its request passed on: the bytes it still holds (an eager
 * client's preface and frames, read with the request) are passed on from its removed
 * context, along its own links, to the connection handler put right after it, rather than
 * past it to the application, and they come after stream 1. */
static void upgrade(eddy_ctx_t *ctx, watcher_t *w, eddy_http_request_t *req, const uint8_t *set,
                    size_t n)
{
    eddy_buf_t *b = eddy_buf_from(switching, sizeof(switching) - 1);
    if (b == NULL) {
        eddy_msg_release(&req->_msg);
        eddy_ctx_close(ctx, NULL);
        return;
    }
    eddy_ctx_write_and_flush(ctx, eddy_buf_msg(b), NULL);
    int err = upgrade_switch(ctx, w, req, set, n);
    if (err != 0) {
        eddy__log(EDDY_LOG_INFO, "http2: channel %llu: the h2c upgrade failed: %s",
                  (unsigned long long)eddy_channel_id(eddy_ctx_channel(ctx)), eddy_strerror(err));
        eddy_ctx_close(ctx, NULL);
    }
    eddy_pipeline_remove_ops(eddy_ctx_pipeline(ctx), eddy_http_request_decoder_ops());
}

static void watcher_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    watcher_t *w = eddy_ctx_state(ctx);
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req == NULL || msg->type != EDDY_MSG_HTTP_FULL_REQUEST) {
        eddy_ctx_fire_channel_read(ctx, msg);
        return;
    }
    uint8_t settings[256];
    ssize_t n = upgrade_settings(req, settings, sizeof(settings));
    if (n < 0) {
        eddy_ctx_fire_channel_read(ctx, msg);
    } else {
        upgrade(ctx, w, req, settings, (size_t)n);
    }
    eddy_pipeline_remove(eddy_ctx_pipeline(ctx), eddy_ctx_name(ctx)); /* one request only */
}

static const eddy_handler_ops_t watcher_ops = {
    .name = "h2c-upgrade",
    .channel_read = watcher_read,
};

/* ---------------------------------------------------------------------------------------
 * The preface sniffer
 */

/* HTTP/1.1 goes on: watch its first request for an Upgrade (never over TLS, RFC 9113
 * section 3.2), and step aside. */
static void step_aside(eddy_ctx_t *ctx, negotiate_t *n)
{
    eddy_pipeline_t *p = eddy_ctx_pipeline(ctx);
    eddy_ctx_t *agg = eddy_pipeline_context_ops(p, eddy_http_aggregator_ops());
    if (agg != NULL && eddy_pipeline_context_ops(p, eddy_tls_handler_ops()) == NULL) {
        watcher_t *w = malloc(sizeof(*w));
        if (w != NULL) {
            *w = (watcher_t){.o = n->o, .max = n->max};
            eddy_pipeline_add_after(p, eddy_ctx_name(agg), "h2c-upgrade", &watcher_ops, w,
                                    eddy_free_state);
        }
    }
}

static void negotiate_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    negotiate_t *n = eddy_ctx_state(ctx);
    eddy_buf_t *b = eddy_buf_of(msg);
    if (b == NULL) {
        eddy_ctx_fire_channel_read(ctx, msg);
        return;
    }
    if (n->held != NULL) { /* the preface came in pieces */
        int err = eddy_buf_write_buf(n->held, b, eddy_buf_readable(b));
        eddy_buf_release(b);
        if (err != 0) {
            eddy_ctx_close(ctx, NULL);
            return;
        }
        b = n->held;
        n->held = NULL;
    }
    size_t have = eddy_buf_readable(b);
    size_t k = have < PREFACE_LEN ? have : PREFACE_LEN;
    bool h2 = memcmp(eddy_buf_read_ptr(b), preface, k) == 0;
    if (h2 && have < PREFACE_LEN) {
        n->held = eddy_buf_alloc(eddy_ctx_alloc(ctx), PREFACE_LEN, EDDY_BUF_DEFAULT_MAX_CAPACITY);
        if (n->held == NULL || eddy_buf_write_buf(n->held, b, have) != 0) {
            eddy_ctx_close(ctx, NULL);
        }
        eddy_buf_release(b);
        return;
    }
    eddy_pipeline_t *p = eddy_ctx_pipeline(ctx);
    if (h2) {
        if (http2_install(p, eddy_ctx_name(ctx), false, &n->o, n->max) != 0) {
            eddy_buf_release(b);
            eddy_ctx_close(ctx, NULL);
            return;
        }
        eddy_ctx_fire_user_event(ctx, EDDY_EVENT_H2_ACTIVE, NULL);
    } else {
        step_aside(ctx, n);
    }
    eddy_ctx_fire_channel_read(ctx, eddy_buf_msg(b));
    eddy_pipeline_remove(p, eddy_ctx_name(ctx));
}

static void negotiate_removed(eddy_ctx_t *ctx)
{
    negotiate_t *n = eddy_ctx_state(ctx);
    if (n->held != NULL) {
        eddy_buf_release(n->held);
        n->held = NULL;
    }
}

static const eddy_handler_ops_t negotiate_ops = {
    .name = "h2-negotiate",
    .handler_removed = negotiate_removed,
    .channel_read = negotiate_read,
};

eddy_handler_t eddy_h2_server_upgrade(const eddy_h2_options_t *o, size_t max_content_length)
{
    negotiate_t *n = calloc(1, sizeof(*n));
    if (n != NULL) {
        n->o = o != NULL ? *o : (eddy_h2_options_t){0};
        n->max = max_content_length;
    }
    return eddy_handler("h2-negotiate", &negotiate_ops, n, eddy_free_state);
}
