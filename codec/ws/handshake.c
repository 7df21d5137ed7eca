/*
 * The opening handshake (RFC 6455 section 4): the server's handshaker after the HTTP request
 * decoder, the client's on a connected channel, and the swap to the WebSocket handlers.
 *
 * The server answers a valid upgrade request on its path with 101 and swaps its pipeline in
 * the middle of the HTTP decoder's delivery: the WebSocket handlers are added after the
 * handshaker, the event fired, and the HTTP handlers removed, the request decoder last, so
 * the bytes it still holds (frames the client sent right behind its request) go to the frame
 * decoder, behind the event. The client writes its request and reads the answer through the
 * HTTP client codec it puts before itself, so the answer is parsed as any response is, with
 * the codec's limits and errors; it then removes the codec the same way, whose leftover bytes
 * go on to the frame decoder.
 */
#include "codec/ws/internal.h"

#include "codec/http/internal.h"

#include <eddy/channel.h>
#include <eddy/http_client.h>

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


/* The longest subprotocol name kept, and the longest extensions offer or answer. */
#define MAX_TOKEN 128
#define MAX_EXTENSIONS 256

int eddy__ws_install(eddy_pipeline_t *p, const char *base, bool client, const eddy_ws_config_t *c,
                     const eddy__ws_deflate_params_t *d)
{
    eddy_handler_t hs[4];
    size_t n = 0;
    hs[n++] = eddy_ws_frame_encoder(client);
    hs[n++] = eddy__ws_frame_decoder(client, c->max_frame_size, d != NULL);
    if (d != NULL) {
        hs[n++] = eddy__ws_deflate_handler(d, c);
    }
    hs[n++] = eddy_ws_protocol_handler(client, c);
    const char *after = base;
    int err = 0;
    for (size_t i = 0; i < n; i++) {
        if (err == 0) {
            err = hs[i].ops == NULL ? hs[i].error
                                    : eddy_pipeline_add_after(p, after, hs[i].name, hs[i].ops,
                                                              hs[i].state, hs[i].free_state);
            after = hs[i].name;
        } else if (hs[i].ops != NULL && hs[i].free_state != NULL) {
            hs[i].free_state(hs[i].state); /* never added */
        }
    }
    return err;
}

/* Whether some one of the count headers at h called name holds token in its comma-separated
 * list. */
static bool header_has(const eddy_http_header_t *h, size_t count, const char *name,
                       const char *token)
{
    for (size_t i = 0; i < count; i++) {
        if (eddy_http_str_eq_nocase(h[i].name, name) &&
            eddy__ws_list_has(h[i].value.p, h[i].value.len, token)) {
            return true;
        }
    }
    return false;
}

/* Call fn for each comma-separated item of every header called name, until it returns
 * true. */
static void header_items(const eddy_http_header_t *h, size_t count, const char *name,
                         eddy__ws_item_fn fn, void *arg)
{
    for (size_t i = 0; i < count; i++) {
        if (eddy_http_str_eq_nocase(h[i].name, name) &&
            eddy__ws_list_each(h[i].value.p, h[i].value.len, fn, arg)) {
            return;
        }
    }
}

/* The name of an extension offer or answer (n bytes at p, its parameters after a ';'):
 * whether it is permessage-deflate, *params then where they begin. */
static bool is_deflate(const char *p, size_t n, size_t *params)
{
    const char *semi = memchr(p, ';', n); /* p is a header's bytes, not a C string */
    size_t name = semi != NULL ? (size_t)(semi - p) : n;
    size_t k = name;
    while (k > 0 && (p[k - 1] == ' ' || p[k - 1] == '\t')) {
        k--;
    }
    *params = name;
    return k == 18 && strncasecmp(p, "permessage-deflate", 18) == 0;
}

/* Find protocol (n bytes) in the configured list: true and a NUL-terminated copy in out. */
static bool pick_protocol(const char *list, const char *p, size_t n, char out[MAX_TOKEN])
{
    if (list == NULL || n >= MAX_TOKEN) {
        return false;
    }
    for (const char *s = list; *s != '\0';) {
        while (*s == ' ' || *s == ',') {
            s++;
        }
        size_t len = strcspn(s, ", ");
        if (len == n && memcmp(s, p, n) == 0) {
            memcpy(out, p, n);
            out[n] = '\0';
            return true;
        }
        s += len;
    }
    return false;
}

/* ---------------------------------------------------------------------------------------
 * Server
 */

typedef struct ws_server_s {
    eddy__ws_conf_t conf;
    uint64_t timer; /* the handshake deadline, until the first request */
} ws_server_t;

typedef struct proto_pick_s {
    const char *list;
    char chosen[MAX_TOKEN];
    bool found;
} proto_pick_t;

static bool on_offered_protocol(const char *p, size_t n, void *arg)
{
    proto_pick_t *pp = arg;
    pp->found = pick_protocol(pp->list, p, n, pp->chosen);
    return pp->found;
}

typedef struct ext_pick_s {
    const eddy_ws_config_t *c;
    eddy__ws_deflate_params_t d;
    char answer[MAX_EXTENSIONS];
    bool found;
} ext_pick_t;

static bool on_offered_extension(const char *p, size_t n, void *arg)
{
    ext_pick_t *e = arg;
    size_t params;
    if (!is_deflate(p, n, &params)) {
        return false;
    }
    e->found = eddy__ws_deflate_negotiate_server(p + params, n - params, e->c, &e->d, e->answer,
                                                 sizeof(e->answer)) == 0;
    return e->found; /* a declined offer: the next one may do (section 5 of RFC 7692) */
}

/* Add the n headers names[i]: values[i] to the built message m, those with a NULL value left
 * out. "Connection: Upgrade" is ours to send: no encoder writes a Connection of its own for a
 * 1.1 message that keeps the connection. 0, or the first error. */
static int add_fields(eddy_msg_t *m, const char *const *names, const char *const *values, size_t n)
{
    int err = 0;
    for (size_t i = 0; i < n && err == 0; i++) {
        err = values[i] != NULL ? eddy__http_add_field(m, names[i], values[i]) : 0;
    }
    return err;
}

/* Write r (released) encoded into bytes of its own, flushed: the response encoder, if the
 * pipeline has one, leaves with the HTTP handlers. 0 or EDDY_ENOMEM. */
static int write_response(eddy_ctx_t *ctx, eddy_http_response_t *r)
{
    eddy_buf_t *b = r != NULL ? eddy_buf_new(256) : NULL;
    int err = b != NULL ? eddy_http_response_encode(r, b) : EDDY_ENOMEM;
    if (r != NULL) {
        eddy_msg_release(eddy_http_response_msg(r));
    }
    if (err != 0) {
        if (b != NULL) {
            eddy_buf_release(b);
        }
        return err;
    }
    eddy_ctx_write_and_flush(ctx, eddy_buf_msg(b), NULL);
    return 0;
}

/* Refuse the request with status, why in the body, and close once that is out. */
static void refuse(eddy_ctx_t *ctx, int status, const char *why)
{
    eddy_http_response_t *r = eddy_http_response_new(status);
    if (r != NULL) {
        r->keep_alive = false;
        eddy_http_response_add_header(r, "Content-Type", "text/plain; charset=utf-8");
        if (status == 426) {
            eddy_http_response_add_header(r, "Sec-WebSocket-Version", "13");
        }
        if (status == 405) {
            eddy_http_response_add_header(r, "Allow", "GET");
        }
        eddy_http_response_set_body(r, eddy_buf_from_str(why));
    }
    write_response(ctx, r); /* without memory, the close alone says it */
    eddy_ctx_close_after_flush(ctx, NULL);
}

static bool target_is(const eddy_http_request_t *req, const char *path)
{
    size_t n = req->target.len;
    for (size_t i = 0; i < req->target.len; i++) {
        if (req->target.p[i] == '?') {
            n = i;
            break;
        }
    }
    return strlen(path) == n && memcmp(req->target.p, path, n) == 0;
}

/* Check req; answer and refuse it (false), or fill the 101's parts. */
static bool check_request(eddy_ctx_t *ctx, ws_server_t *s, eddy_http_request_t *req,
                          char accept[29], proto_pick_t *proto, ext_pick_t *ext)
{
    const eddy_ws_config_t *c = &s->conf.c;
    if (req->method != EDDY_HTTP_GET) {
        refuse(ctx, 405, "a WebSocket handshake is a GET request\n");
        return false;
    }
    if (req->version < 11) {
        refuse(ctx, 400, "a WebSocket handshake needs HTTP/1.1\n");
        return false;
    }
    if (!header_has(req->headers, req->header_count, "Upgrade", "websocket")) {
        refuse(ctx, 400, "missing \"Upgrade: websocket\"\n");
        return false;
    }
    if (!header_has(req->headers, req->header_count, "Connection", "upgrade")) {
        refuse(ctx, 400, "missing \"Connection: Upgrade\"\n");
        return false;
    }
    const eddy_http_header_t *v = eddy_http_request_header(req, "Sec-WebSocket-Version");
    if (v == NULL || !eddy_http_str_eq(v->value, "13")) {
        refuse(ctx, 426, "unsupported Sec-WebSocket-Version: 13 is spoken here\n");
        return false;
    }
    const eddy_http_header_t *k = eddy_http_request_header(req, "Sec-WebSocket-Key");
    uint8_t raw[18];
    if (k == NULL || eddy__ws_unbase64(k->value.p, k->value.len, raw, sizeof(raw)) != 16) {
        refuse(ctx, 400, "Sec-WebSocket-Key must be 16 bytes in base64\n");
        return false;
    }
    if (c->origin_cb != NULL) {
        const eddy_http_header_t *o = eddy_http_request_header(req, "Origin");
        if (!c->origin_cb(o != NULL ? o->value.p : NULL, o != NULL ? o->value.len : 0,
                          c->origin_arg)) {
            refuse(ctx, 403, "origin not allowed\n");
            return false;
        }
    }
    eddy_ws_accept_key(k->value.p, k->value.len, accept);
    proto->list = c->subprotocols;
    header_items(req->headers, req->header_count, "Sec-WebSocket-Protocol", on_offered_protocol,
                 proto);
    ext->c = c;
    if (c->deflate) {
        header_items(req->headers, req->header_count, "Sec-WebSocket-Extensions",
                     on_offered_extension, ext);
    }
    return true;
}

static void server_due(eddy_ctx_t *ctx, void *arg)
{
    (void)arg;
    /* No request in time: a connection holding a slot and sending nothing. */
    eddy_ctx_fire_exception(ctx, EDDY_ETIMEDOUT);
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_close(ctx, NULL);
    }
}

static void server_start_timer(eddy_ctx_t *ctx)
{
    ws_server_t *s = eddy_ctx_state(ctx);
    if (s->timer == 0 && s->conf.c.handshake_timeout_ms > 0) {
        s->timer = eddy_ctx_schedule(ctx, s->conf.c.handshake_timeout_ms, server_due, NULL);
    }
}

static void server_added(eddy_ctx_t *ctx)
{
    if (eddy_channel_is_active(eddy_ctx_channel(ctx))) {
        server_start_timer(ctx);
    }
}

static void server_active(eddy_ctx_t *ctx)
{
    server_start_timer(ctx);
    eddy_ctx_fire_channel_active(ctx);
}

static void upgrade(eddy_ctx_t *ctx, ws_server_t *s, eddy_http_request_t *req)
{
    char accept[29];
    proto_pick_t proto = {0};
    ext_pick_t ext = {0};
    if (!check_request(ctx, s, req, accept, &proto, &ext)) {
        eddy_msg_release(&req->_msg);
        return;
    }
    char path[256];
    size_t plen = req->target.len < sizeof(path) - 1 ? req->target.len : sizeof(path) - 1;
    memcpy(path, req->target.p, plen);
    path[plen] = '\0';
    eddy_msg_release(&req->_msg);

    static const char *const names[] = {"Upgrade", "Connection", "Sec-WebSocket-Accept",
                                        "Sec-WebSocket-Protocol", "Sec-WebSocket-Extensions"};
    const char *values[] = {"websocket", "Upgrade", accept, proto.found ? proto.chosen : NULL,
                            ext.found ? ext.answer : NULL};
    eddy_http_response_t *r = eddy_http_response_new(101);
    int err = r != NULL ? add_fields(eddy_http_response_msg(r), names, values, 5) : EDDY_ENOMEM;
    if (err == 0) {
        err = write_response(ctx, r);
    } else if (r != NULL) {
        eddy_msg_release(eddy_http_response_msg(r));
    }
    eddy_pipeline_t *p = eddy_ctx_pipeline(ctx);
    if (err == 0) {
        err = eddy__ws_install(p, eddy_ctx_name(ctx), false, &s->conf.c, ext.found ? &ext.d : NULL);
    }
    if (err != 0) {
        eddy_ctx_fire_exception(ctx, err);
        eddy_ctx_close(ctx, NULL);
        return;
    }
    eddy_pipeline_remove_ops(p, eddy_http_aggregator_ops());
    eddy_pipeline_remove_ops(p, eddy_http_response_encoder_ops());
    eddy_ctx_t *proto_ctx = eddy_pipeline_context(p, "ws_protocol");
    if (proto_ctx != NULL) {
        eddy_ws_handshake_event_t ev = {
            .path = path,
            .subprotocol = proto.found ? proto.chosen : NULL,
            .extensions = ext.found ? ext.answer : NULL,
        };
        eddy_ctx_fire_user_event(proto_ctx, EDDY_EVENT_WS_HANDSHAKE, &ev);
    }
    /* Ourselves, then the decoder: its leftover bytes go to the frame decoder. */
    eddy_pipeline_remove(p, eddy_ctx_name(ctx));
    eddy_pipeline_remove_ops(p, eddy_http_request_decoder_ops());
}

static void server_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    ws_server_t *s = eddy_ctx_state(ctx);
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req == NULL) {
        eddy_ctx_fire_channel_read(ctx, msg);
        return;
    }
    if (s->timer != 0) {
        eddy_ctx_cancel(ctx, s->timer); /* a request came: HTTP's own timeouts take over */
        s->timer = 0;
    }
    if (msg->type != EDDY_MSG_HTTP_FULL_REQUEST || req->error != 0 ||
        !target_is(req, s->conf.c.path)) {
        eddy_ctx_fire_channel_read(ctx, msg); /* another page of the same server */
        return;
    }
    upgrade(ctx, s, req);
}

static const eddy_handler_ops_t ws_server_handler = {
    .name = "ws_server_handshaker",
    .handler_added = server_added,
    .channel_active = server_active,
    .channel_read = server_read,
};

eddy_handler_t eddy_ws_server_handshaker(const eddy_ws_config_t *config)
{
    _Static_assert(offsetof(ws_server_t, conf) == 0, "eddy__ws_state_new() copies conf first");
    return eddy_handler("ws_server_handshaker", &ws_server_handler,
                        eddy__ws_state_new(sizeof(ws_server_t), config), eddy__ws_state_free);
}

/* ---------------------------------------------------------------------------------------
 * Client
 */

/* The HTTP client codec the client handshaker puts before itself: it writes the request and
 * parses the answer, and leaves with the handshaker. */
#define CLIENT_CODEC "ws_http_codec"

typedef struct ws_client_s {
    eddy__ws_conf_t conf;
    char key[25]; /* what we sent as Sec-WebSocket-Key */
    bool sent;    /* the request went out */
    bool done;    /* the handshake ended, either way */
    bool ok;      /* ... and it succeeded: what still reaches us is the peer's frames */
    uint64_t timer;
} ws_client_t;

static void client_fail(eddy_ctx_t *ctx, int err, const char *why)
{
    ws_client_t *s = eddy_ctx_state(ctx);
    assert(!s->done); /* one end to a handshake */
    s->done = true;
    eddy_ws_handshake_event_t ev = {.path = s->conf.c.uri, .error = err, .reason = why};
    eddy_ctx_fire_user_event(ctx, EDDY_EVENT_WS_HANDSHAKE_FAILED, &ev);
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_close(ctx, NULL);
    }
}

static void client_due(eddy_ctx_t *ctx, void *arg)
{
    (void)arg;
    client_fail(ctx, EDDY_ETIMEDOUT, "no answer to the handshake in time");
}

/* The upgrade request of c with key, for the codec to write: NULL without memory, or when
 * the configuration does not make one (a uri that is no request target, a bad host). */
static eddy_http_request_t *client_request(const eddy_ws_config_t *c, const char *key)
{
    eddy_http_request_t *r = eddy_http_request_new("GET", c->uri != NULL ? c->uri : "/");
    if (r == NULL) {
        return NULL;
    }
    char ext[MAX_EXTENSIONS] = "";
    if (c->deflate) {
        eddy__ws_deflate_offer(c, ext, sizeof(ext));
    }
    static const char *const names[] = {"Host",
                                        "Upgrade",
                                        "Connection",
                                        "Sec-WebSocket-Key",
                                        "Sec-WebSocket-Version",
                                        "Origin",
                                        "Sec-WebSocket-Protocol",
                                        "Sec-WebSocket-Extensions"};
    const char *values[] = {c->host, "websocket", "Upgrade",       key,
                            "13",    c->origin,   c->subprotocols, c->deflate ? ext : NULL};
    int err = add_fields(eddy_http_request_msg(r), names, values, 8);
    if (err != 0) {
        eddy_msg_release(eddy_http_request_msg(r));
        return NULL;
    }
    return r;
}

static void client_send(eddy_ctx_t *ctx)
{
    ws_client_t *s = eddy_ctx_state(ctx);
    if (s->sent || s->done) {
        return;
    }
    s->sent = true;
    const eddy_ws_config_t *c = &s->conf.c;
    uint8_t raw[16];
    if (eddy__random_bytes(raw, sizeof(raw)) != 0) {
        client_fail(ctx, EDDY_EIO, "no random bytes for the key");
        return;
    }
    eddy__ws_base64(raw, sizeof(raw), s->key);
    s->key[24] = '\0';
    eddy_http_request_t *r = client_request(c, s->key);
    if (r == NULL) {
        client_fail(ctx, EDDY_ENOMEM, "the request could not be made");
        return;
    }
    eddy_ctx_write_and_flush(ctx, eddy_http_request_msg(r), NULL);
    if (c->handshake_timeout_ms > 0 && !eddy_ctx_is_removed(ctx)) {
        s->timer = eddy_ctx_schedule(ctx, c->handshake_timeout_ms, client_due, NULL);
    }
}

static void client_added(eddy_ctx_t *ctx)
{
    ws_client_t *s = eddy_ctx_state(ctx);
    /* The answer is parsed by the HTTP client codec, as any response is, with its limits. */
    eddy_handler_t codec = eddy_http_client_codec(NULL);
    int err =
        codec.ops == NULL
            ? codec.error
            : eddy_pipeline_add_before(eddy_ctx_pipeline(ctx), eddy_ctx_name(ctx), CLIENT_CODEC,
                                       codec.ops, codec.state, codec.free_state);
    if (err != 0) {
        s->sent = true; /* nothing to send it with */
        client_fail(ctx, err, "no HTTP codec for the handshake");
        return;
    }
    if (eddy_channel_is_active(eddy_ctx_channel(ctx))) {
        client_send(ctx);
    }
}

static void client_active(eddy_ctx_t *ctx)
{
    client_send(ctx);
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_ctx_fire_channel_active(ctx);
    }
}

typedef struct ext_check_s {
    const eddy_ws_config_t *c;
    eddy__ws_deflate_params_t d;
    int seen;
    bool bad;
} ext_check_t;

static bool on_answered_extension(const char *p, size_t n, void *arg)
{
    ext_check_t *e = arg;
    size_t params;
    e->seen++;
    if (!e->c->deflate || e->seen > 1 || !is_deflate(p, n, &params) ||
        eddy__ws_deflate_accept_client(p + params, n - params, e->c, &e->d) != 0) {
        e->bad = true; /* an extension we did not offer, or parameters we cannot honour */
        return true;
    }
    return false;
}

/* The value of the one header of r called name, NULL when there is none; *count how many
 * there are. */
static const eddy_http_str_t *answer_header(const eddy_http_response_t *r, const char *name,
                                            size_t *count)
{
    const eddy_http_header_t *first = eddy_http_response_header(r, name);
    *count = 0;
    for (size_t i = 0; first != NULL && i < r->header_count; i++) {
        *count += eddy_http_str_eq_nocase(r->headers[i].name, name);
    }
    return first != NULL ? &first->value : NULL;
}

/* Check the answer: NULL, or why it fails. */
static const char *check_answer(ws_client_t *s, const eddy_http_response_t *r,
                                char proto[MAX_TOKEN], ext_check_t *ext)
{
    const eddy_ws_config_t *c = &s->conf.c;
    if (r->status != 101) {
        return "the server did not switch protocols";
    }
    if (!header_has(r->headers, r->header_count, "Upgrade", "websocket") ||
        !header_has(r->headers, r->header_count, "Connection", "upgrade")) {
        return "the answer lacks Upgrade: websocket or Connection: Upgrade";
    }
    size_t count;
    const eddy_http_str_t *acc = answer_header(r, "Sec-WebSocket-Accept", &count);
    char want[29];
    eddy_ws_accept_key(s->key, 24, want);
    if (acc == NULL || count != 1 || !eddy_http_str_eq(*acc, want)) {
        return "Sec-WebSocket-Accept does not match the key";
    }
    proto[0] = '\0';
    const eddy_http_str_t *pr = answer_header(r, "Sec-WebSocket-Protocol", &count);
    if (pr != NULL && (count != 1 || !pick_protocol(c->subprotocols, pr->p, pr->len, proto))) {
        return "the server chose a subprotocol we did not offer";
    }
    ext->c = c;
    header_items(r->headers, r->header_count, "Sec-WebSocket-Extensions", on_answered_extension,
                 ext);
    if (ext->bad) {
        return "the server chose an extension we did not offer";
    }
    return NULL;
}

/* The server switched protocols: the WebSocket handlers take the place of the codec and the
 * handshaker, and the bytes the codec holds (frames sent right behind the answer) go to the
 * frame decoder. */
static void client_upgrade(eddy_ctx_t *ctx, ws_client_t *s, const char *proto,
                           const char *extensions, const ext_check_t *ext)
{
    assert(s->done && s->ok);
    if (s->timer != 0) {
        eddy_ctx_cancel(ctx, s->timer);
        s->timer = 0;
    }
    eddy_pipeline_t *pl = eddy_ctx_pipeline(ctx);
    int err =
        eddy__ws_install(pl, eddy_ctx_name(ctx), true, &s->conf.c, ext->seen > 0 ? &ext->d : NULL);
    if (err != 0) {
        s->done = s->ok = false;
        client_fail(ctx, err, "out of memory");
        return;
    }
    eddy_ctx_t *proto_ctx = eddy_pipeline_context(pl, "ws_protocol");
    eddy_ws_handshake_event_t ev = {
        .path = s->conf.c.uri,
        .subprotocol = proto[0] != '\0' ? proto : NULL,
        .extensions = extensions,
    };
    eddy_ctx_fire_user_event(proto_ctx, EDDY_EVENT_WS_HANDSHAKE, &ev);
    /* The codec first: what it holds passes through us (s->ok) to the frame decoder. */
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_pipeline_remove(pl, CLIENT_CODEC);
    }
    if (!eddy_ctx_is_removed(ctx)) {
        eddy_pipeline_remove(pl, eddy_ctx_name(ctx));
    }
}

static void client_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    ws_client_t *s = eddy_ctx_state(ctx);
    if (s->ok) {
        eddy_ctx_fire_channel_read(ctx, msg); /* the peer's first frames, as bytes */
        return;
    }
    eddy_http_response_t *r = eddy_http_response_of(msg);
    if (s->done || r == NULL) {
        eddy_msg_release(msg); /* the rest of an answer refused already */
        return;
    }
    char proto[MAX_TOKEN];
    ext_check_t ext = {0};
    const char *why = check_answer(s, r, proto, &ext);
    if (why != NULL) {
        eddy_msg_release(msg);
        client_fail(ctx, EDDY_EDECODE, why);
        return;
    }
    char extensions[MAX_EXTENSIONS] = "";
    size_t count;
    const eddy_http_str_t *ev_ext = answer_header(r, "Sec-WebSocket-Extensions", &count);
    if (ev_ext != NULL) {
        snprintf(extensions, sizeof(extensions), "%.*s", (int)ev_ext->len, ev_ext->p);
    }
    eddy_msg_release(msg);
    s->done = s->ok = true;
    client_upgrade(ctx, s, proto, ev_ext != NULL ? extensions : NULL, &ext);
}

/* The codec's errors are the handshake's: a malformed answer (EDDY_EDECODE), one past the
 * codec's limits (EDDY_ETOOLONGFRAME), a close before it ended (EDDY_EOF). */
static void client_exception(eddy_ctx_t *ctx, int err)
{
    ws_client_t *s = eddy_ctx_state(ctx);
    if (s->done || (err != EDDY_EDECODE && err != EDDY_ETOOLONGFRAME && err != EDDY_EOF)) {
        eddy_ctx_fire_exception(ctx, err);
    } else if (err == EDDY_EOF) {
        client_fail(ctx, EDDY_ECLOSED, "closed during the handshake");
    } else {
        client_fail(ctx, EDDY_EDECODE,
                    err == EDDY_EDECODE ? "a malformed answer" : "the answer is too long");
    }
}

static void client_inactive(eddy_ctx_t *ctx)
{
    ws_client_t *s = eddy_ctx_state(ctx);
    if (!s->done) {
        client_fail(ctx, EDDY_ECLOSED, "closed during the handshake");
    }
    eddy_ctx_fire_channel_inactive(ctx);
}

static const eddy_handler_ops_t ws_client_handler = {
    .name = "ws_client_handshaker",
    .handler_added = client_added,
    .channel_active = client_active,
    .channel_read = client_read,
    .exception_caught = client_exception,
    .channel_inactive = client_inactive,
};

eddy_handler_t eddy_ws_client_handshaker(const eddy_ws_config_t *config)
{
    _Static_assert(offsetof(ws_client_t, conf) == 0, "eddy__ws_state_new() copies conf first");
    ws_client_t *s = config != NULL && config->host != NULL
                         ? eddy__ws_state_new(sizeof(ws_client_t), config)
                         : NULL;
    return eddy_handler("ws_client_handshaker", &ws_client_handler, s, eddy__ws_state_free);
}
