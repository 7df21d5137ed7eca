/*
 * The gRPC client's calls: eddy_grpc_call_start() and what follows it, on the streams of
 * the channel's connections (channel.c). A call waits for a connection with no stream
 * (call->stream NULL): what it sends is held (its side's hold) and goes after the request
 * head once its stream opens; its deadline runs on a loop timer until then. The response's
 * head is checked (:status 200, content-type application/grpc, or a status is synthesized as
 * grpc doc/http-grpc-status-mapping.md says), its messages read through the deframer, and its
 * trailers (or a trailers-only head) end the call with their grpc-status, grpc-message and
 * metadata. eddy_grpc_unary() is a call whose callbacks complete a future.
 */
#include "client.h"

#include "buffer/layer.h"
#include "codec/http2/layer.h"
#include "pipeline/layer.h"
#include "reactor/layer.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS INT64_C(1000000)

#define FIELD(n, v) ((eddy_http_header_t){{(n), sizeof(n) - 1}, {(v), strlen(v)}})

static const eddy__grpc_call_ops_t client_side;
static const eddy_grpc_client_ops_t no_ops;

static eddy__grpc_ccall_t *ccall(eddy_grpc_call_t *call)
{
    assert(call->side == &client_side);
    return (eddy__grpc_ccall_t *)call;
}

static eddy__grpc_ccall_t *ccall_of_stream(eddy_h2_stream_t *s)
{
    eddy_grpc_call_t *call = eddy__grpc_call_of(s);
    return call != NULL ? ccall(call) : NULL;
}

static bool str_is(const eddy_http_header_t *f, const char *v)
{
    size_t n = strlen(v);
    return f != NULL && f->value.len == n && memcmp(f->value.p, v, n) == 0;
}

/* "/pkg.Service/Method": a slash, a service, a slash, a method, nothing else. */
static bool path_ok(const char *path)
{
    const char *second = path[0] == '/' ? strchr(path + 1, '/') : NULL;
    return second != NULL && second > path + 1 && second[1] != '\0' &&
           strchr(second + 1, '/') == NULL;
}

/* ---------------------------------------------------------------------------------------
 * Metadata copies
 */

/* md (n fields) copied into one buffer, *out pointing into *store. 0 or EDDY_ENOMEM. */
static int md_copy(const eddy_http_header_t *md, size_t n, eddy_http_header_t **out,
                   eddy_buf_t **store)
{
    *out = NULL;
    *store = NULL;
    size_t bytes = n * sizeof(eddy_http_header_t);
    for (size_t i = 0; i < n; i++) {
        bytes += md[i].name.len + md[i].value.len;
    }
    eddy_buf_t *b = n > 0 ? eddy_buf_new(bytes) : NULL;
    if (n > 0 && b == NULL) {
        return EDDY_ENOMEM;
    }
    eddy_http_header_t *f = b != NULL ? (eddy_http_header_t *)eddy_buf_write_ptr(b) : NULL;
    char *to = (char *)(f + n);
    for (size_t i = 0; i < n; i++) {
        memcpy(to, md[i].name.p, md[i].name.len);
        f[i].name = (eddy_http_str_t){to, md[i].name.len};
        to += md[i].name.len;
        if (md[i].value.len > 0) {
            memcpy(to, md[i].value.p, md[i].value.len);
        }
        f[i].value = (eddy_http_str_t){to, md[i].value.len};
        to += md[i].value.len;
    }
    if (b != NULL) {
        eddy_buf_produce(b, bytes);
    }
    *out = f;
    *store = b;
    return 0;
}

/* Whether md (n fields) may be sent: 0, EDDY_EINVAL, EDDY_ENOMEM. */
static int md_check(const eddy_http_header_t *md, size_t n)
{
    eddy_http_header_t *fields;
    eddy_buf_t *store;
    int err = eddy__grpc_md_fields(NULL, 0, md, n, &fields, &store);
    if (err == 0) {
        free(fields);
        eddy_buf_release(store);
    }
    return err;
}

/* ---------------------------------------------------------------------------------------
 * Requests held until the stream opens
 */

static int client_hold(eddy_grpc_call_t *call, eddy_buf_t *msg, bool end_stream,
                       eddy_promise_t *p)
{
    eddy__grpc_ccall_t *cc = ccall(call);
    assert(!end_stream); /* the half-close goes by local_done */
    (void)end_stream;
    size_t n = eddy_buf_readable(msg);
    /* Half of the stream's queue, so that all of it fits there when the stream opens. */
    int err = cc->held_bytes + n > cc->chan->o.h2.max_stream_pending / 2 ? EDDY_ENOBUFS : 0;
    eddy__grpc_held_t *h = err == 0 ? eddy__small_alloc(sizeof(*h)) : NULL;
    if (h == NULL) {
        err = err != 0 ? err : EDDY_ENOMEM;
        eddy_buf_release(msg);
        eddy__promise_done(p, err);
        return err;
    }
    *h = (eddy__grpc_held_t){.msg = msg, .p = p != NULL ? eddy_future_retain(p) : NULL};
    if (cc->held_tail != NULL) {
        cc->held_tail->next = h;
    } else {
        cc->held = h;
    }
    cc->held_tail = h;
    cc->held_bytes += n;
    return 0;
}

/* The first held request, taken off the list. */
static eddy__grpc_held_t *held_pop(eddy__grpc_ccall_t *cc)
{
    eddy__grpc_held_t *h = cc->held;
    if (h != NULL) {
        cc->held = h->next;
        cc->held_tail = cc->held != NULL ? cc->held_tail : NULL;
        cc->held_bytes -= eddy_buf_readable(h->msg);
    }
    return h;
}

static void held_free(eddy__grpc_held_t *h)
{
    if (h->p != NULL) {
        eddy_future_release(h->p);
    }
    eddy__small_free(h, sizeof(*h));
}

/* Fail what is held with err. */
static void held_drop(eddy__grpc_ccall_t *cc, int err)
{
    eddy__grpc_held_t *h;
    while ((h = held_pop(cc)) != NULL) {
        eddy_buf_release(h->msg);
        eddy__promise_done(h->p, err);
        held_free(h);
    }
}

/* Send what is held on the stream just opened. */
static void held_flush(eddy__grpc_ccall_t *cc)
{
    eddy__grpc_held_t *h;
    while (!cc->c.ended && (h = held_pop(cc)) != NULL) {
        int err = eddy__grpc_call_queue(&cc->c, h->msg, false, h->p);
        held_free(h);
        if (err != 0) {
            char why[96];
            snprintf(why, sizeof(why), "a request sent early could not go: %s",
                     eddy_strerror(err));
            eddy__grpc_call_end(&cc->c, EDDY_GRPC_INTERNAL, why, EDDY_H2_CANCEL);
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * The side ops
 */

static int client_head(eddy_grpc_call_t *call)
{
    (void)call; /* the request head went when the stream opened */
    return 0;
}

static void wait_timer_stop(eddy__grpc_ccall_t *cc)
{
    if (cc->wait_timer != NULL) {
        eddy_timer_cancel(cc->wait_timer);
        eddy_timer_release(cc->wait_timer);
        cc->wait_timer = NULL;
    }
}

static void client_ended(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message)
{
    eddy__grpc_ccall_t *cc = ccall(call);
    eddy__grpc_conn_forget(cc);
    wait_timer_stop(cc);
    held_drop(cc, EDDY_ECLOSED);
    if (message != cc->message) {
        free(cc->message);
        cc->message = strdup(message);
    }
    if (cc->ops->on_close != NULL) {
        cc->ops->on_close(call, status, cc->message != NULL ? cc->message : "");
    }
}

static void client_free(eddy_grpc_call_t *call)
{
    eddy__grpc_ccall_t *cc = ccall(call);
    assert(cc->held == NULL && cc->wait_timer == NULL && cc->conn == NULL);
    eddy__grpc_buf_drop(cc->req_store);
    eddy__grpc_buf_drop(cc->tr_store);
    free(cc->message);
}

static void client_writable(eddy_grpc_call_t *call)
{
    eddy__grpc_ccall_t *cc = ccall(call);
    if (cc->ops->on_writable != NULL) {
        cc->ops->on_writable(call);
    }
}

static const eddy__grpc_call_ops_t client_side = {
    .head = client_head,
    .ended = client_ended,
    .free = client_free,
    .writable = client_writable,
    .hold = client_hold,
};

/* ---------------------------------------------------------------------------------------
 * The start
 */

static void wait_expired(eddy_timer_t *t, void *arg)
{
    (void)t;
    eddy__grpc_ccall_t *cc = arg; /* live: an ended call's timer was cancelled */
    eddy__grpc_call_end(&cc->c, EDDY_GRPC_DEADLINE_EXCEEDED, "Deadline Exceeded", UINT32_MAX);
}

static int start_check(const eddy_grpc_channel_t *c, const char *path,
                       const eddy_grpc_call_options_t *o)
{
    if (c->closing) {
        return EDDY_ECLOSED;
    }
    if (path == NULL || !path_ok(path) || (o != NULL && o->deadline_ms < 0)) {
        return EDDY_EINVAL;
    }
    return o != NULL ? md_check(o->metadata, o->metadata_count) : 0;
}

/* The deadline, its timer, the metadata: 0 or EDDY_ENOMEM. */
static int ccall_options(eddy__grpc_ccall_t *cc, const eddy_grpc_call_options_t *o)
{
    if (o == NULL) {
        return 0;
    }
    if (o->deadline_ms > 0) {
        eddy_loop_t *loop = cc->chan->loop;
        int64_t now = eddy_loop_now_ns(loop);
        cc->c.deadline = o->deadline_ms < (INT64_MAX - now) / NS_PER_MS
                             ? now + o->deadline_ms * NS_PER_MS
                             : INT64_MAX;
        cc->wait_timer = eddy_loop_schedule(loop, o->deadline_ms, wait_expired, cc);
        if (cc->wait_timer == NULL) {
            return EDDY_ENOMEM;
        }
    }
    return md_copy(o->metadata, o->metadata_count, &cc->req_md, &cc->req_store);
}

static eddy__grpc_ccall_t *ccall_new(eddy_grpc_channel_t *c, const char *path,
                                     const eddy_grpc_client_ops_t *ops, void *arg)
{
    eddy__grpc_ccall_t *cc = calloc(1, sizeof(*cc));
    char *copy = cc != NULL ? strdup(path) : NULL;
    if (copy == NULL) {
        free(cc);
        return NULL;
    }
    eddy_grpc_call_t *call = &cc->c;
    atomic_init(&call->refs, 1); /* the library's, dropped at the end */
    atomic_init(&call->writable_hint, false);
    call->loop = c->loop;
    call->side = &client_side;
    call->path = copy;
    call->arg = arg;
    call->kind = EDDY_GRPC_BIDI_STREAMING; /* any number of requests */
    call->max_recv = c->o.max_recv_message;
    call->max_send = c->o.max_send_message;
    call->compress_out = c->o.compress && eddy__grpc_has_gzip();
    cc->chan = c;
    cc->ops = ops != NULL ? ops : &no_ops;
    cc->nreq_md = 0;
    return cc;
}

/* A call that never started: freed as one that ended. */
static void ccall_discard(eddy__grpc_ccall_t *cc)
{
    wait_timer_stop(cc);
    cc->c.ended = true;
    eddy_grpc_call_release(&cc->c);
}

static eddy_grpc_call_t *call_start(eddy_grpc_channel_t *c, const char *path,
                                    const eddy_grpc_call_options_t *o,
                                    const eddy_grpc_client_ops_t *ops, void *arg, bool unary,
                                    int *err)
{
    assert(eddy_loop_in_event_loop(c->loop));
    *err = start_check(c, path, o);
    eddy__grpc_ccall_t *cc = *err == 0 ? ccall_new(c, path, ops, arg) : NULL;
    if (*err == 0 && cc == NULL) {
        *err = EDDY_ENOMEM;
    }
    if (cc != NULL && (*err = ccall_options(cc, o)) != 0) {
        ccall_discard(cc);
        cc = NULL;
    }
    if (cc == NULL) {
        return NULL;
    }
    cc->nreq_md = o != NULL ? o->metadata_count : 0;
    cc->unary = unary;
    eddy_grpc_call_retain(&cc->c); /* the caller's */
    eddy__grpc_channel_dispatch(cc);
    return &cc->c;
}

eddy_grpc_call_t *eddy_grpc_call_start(eddy_grpc_channel_t *c, const char *path,
                                       const eddy_grpc_call_options_t *o,
                                       const eddy_grpc_client_ops_t *ops, void *arg, int *err)
{
    int ignored;
    return call_start(c, path, o, ops, arg, false, err != NULL ? err : &ignored);
}

/* ---------------------------------------------------------------------------------------
 * The stream
 */

/* The request head's own fields into f (room for 10): the pseudo-headers, then gRPC's. */
static size_t head_fields(const eddy__grpc_ccall_t *cc, int64_t left_ns, char timeout[16],
                          eddy_http_header_t *f)
{
    const eddy_grpc_channel_t *c = cc->chan;
    size_t n = 0;
    f[n++] = FIELD(":method", "POST");
    f[n++] = FIELD(":scheme", c->o.tls != NULL ? "https" : "http");
    f[n++] = FIELD(":path", cc->c.path);
    f[n++] = FIELD(":authority", c->o.authority);
    f[n++] = FIELD("te", "trailers");
    f[n++] = FIELD("content-type", "application/grpc");
    f[n++] = FIELD("user-agent", c->user_agent);
    if (cc->c.deadline != 0) {
        eddy__grpc_timeout_format(left_ns, timeout);
        f[n++] = FIELD("grpc-timeout", timeout);
    }
    if (cc->c.compress_out) {
        f[n++] = FIELD("grpc-encoding", "gzip");
    }
    if (eddy__grpc_has_gzip()) {
        f[n++] = FIELD("grpc-accept-encoding", "gzip");
    }
    return n;
}

static eddy_h2_stream_t *stream_open(eddy__grpc_ccall_t *cc, eddy__grpc_conn_t *conn,
                                     int64_t left_ns, int *err)
{
    eddy_http_header_t fixed[10], *fields;
    eddy_buf_t *store;
    char timeout[16];
    size_t k = head_fields(cc, left_ns, timeout, fixed);
    *err = eddy__grpc_md_fields(fixed, k, cc->req_md, cc->nreq_md, &fields, &store);
    if (*err != 0) {
        return NULL;
    }
    eddy_h2_stream_t *s =
        eddy_h2_stream_open(eddy_ctx_channel(conn->ctx), fields, k + cc->nreq_md, false, err);
    free(fields);
    eddy_buf_release(store);
    return s;
}

static void open_failed(eddy__grpc_ccall_t *cc, eddy__grpc_conn_t *conn, int err)
{
    if (err == EDDY_ECONNABORTED || err == EDDY_ECLOSED || err == EDDY_ENOTCONN) {
        eddy__grpc_conn_going_away(conn); /* it takes no stream: another one may */
        eddy__grpc_channel_dispatch(cc);
        return;
    }
    char why[96];
    snprintf(why, sizeof(why), "the request could not start: %s", eddy_strerror(err));
    eddy__grpc_call_end(&cc->c, err == EDDY_EBUSY ? EDDY_GRPC_RESOURCE_EXHAUSTED
                                                  : EDDY_GRPC_INTERNAL,
                        why, UINT32_MAX);
}

/* The stream s opened for cc on conn: the call travels on it from now. */
static void stream_attach(eddy__grpc_ccall_t *cc, eddy__grpc_conn_t *conn, eddy_h2_stream_t *s)
{
    eddy_grpc_call_t *call = &cc->c;
    call->stream = s; /* the open's reference */
    call->ctx = conn->ctx;
    call->headers_sent = true;
    eddy_h2_stream_set_user_data(s, call);
    eddy__grpc_conn_add_live(conn, cc);
    eddy__grpc_buf_drop(cc->req_store); /* the head copied them */
    cc->req_store = NULL;
    cc->req_md = NULL;
    cc->nreq_md = 0;
    wait_timer_stop(cc);
    if (call->deadline != 0) {
        eddy__grpc_call_arm_deadline(call);
    }
    held_flush(cc);
    if (!call->ended && call->local_done) {
        eddy_h2_stream_send_data(s, NULL, true, NULL);
    }
    if (!call->ended && call->asked_writable && eddy_h2_stream_is_writable(s)) {
        call->asked_writable = false;
        client_writable(call);
    }
}

void eddy__grpc_call_attach(eddy__grpc_ccall_t *cc, eddy__grpc_conn_t *conn)
{
    eddy_grpc_call_t *call = &cc->c;
    assert(!call->ended && call->stream == NULL && cc->conn == NULL);
    assert(conn->state == EDDY__GRPC_CONN_READY && conn->ctx != NULL);
    int64_t left = call->deadline - eddy_loop_now_ns(cc->chan->loop);
    if (call->deadline != 0 && left <= 0) {
        eddy__grpc_call_end(call, EDDY_GRPC_DEADLINE_EXCEEDED, "Deadline Exceeded", UINT32_MAX);
        return;
    }
    eddy_grpc_call_retain(call);
    int err;
    eddy_h2_stream_t *s = stream_open(cc, conn, left, &err);
    if (s == NULL) {
        open_failed(cc, conn, err);
    } else {
        stream_attach(cc, conn, s);
    }
    eddy_grpc_call_release(call);
}

int eddy_grpc_call_half_close(eddy_grpc_call_t *call)
{
    if (call->side != &client_side) {
        return EDDY_EINVAL;
    }
    if (call->ended || call->local_done) {
        return EDDY_ECLOSED;
    }
    call->local_done = true;
    if (call->stream == NULL) {
        return 0; /* the END_STREAM follows the held requests once the stream opens */
    }
    return eddy_h2_stream_send_data(call->stream, NULL, true, NULL);
}

const eddy_http_header_t *eddy_grpc_call_trailers(const eddy_grpc_call_t *call, size_t *n)
{
    if (call->side != &client_side) {
        *n = 0;
        return NULL;
    }
    const eddy__grpc_ccall_t *cc = (const eddy__grpc_ccall_t *)call;
    *n = cc->ntr;
    return cc->tr;
}

/* ---------------------------------------------------------------------------------------
 * The response
 */

/* The reset that ends the call when what came ends it: CANCEL while the server still sends,
 * NO_ERROR when it finished but we did not (RFC 9113 8.1), none when both are done. */
static uint32_t end_code(const eddy__grpc_ccall_t *cc, bool remote_ended)
{
    if (!remote_ended) {
        return EDDY_H2_CANCEL;
    }
    return cc->c.local_done ? UINT32_MAX : EDDY_H2_NO_ERROR;
}

static void fail(eddy__grpc_ccall_t *cc, eddy_grpc_status_t status, const char *why,
                 bool remote_ended)
{
    eddy__grpc_call_log(&cc->c, EDDY_LOG_DEBUG, why);
    eddy__grpc_call_end(&cc->c, status, why, end_code(cc, remote_ended));
}

/* :status as a number, or 0. */
static int http_status(const eddy_h2_headers_t *h)
{
    const eddy_http_header_t *f = eddy_h2_headers_get(h, ":status");
    if (f == NULL || f->value.len != 3) {
        return 0;
    }
    int v = 0;
    for (size_t i = 0; i < 3; i++) {
        if (f->value.p[i] < '0' || f->value.p[i] > '9') {
            return 0;
        }
        v = v * 10 + (f->value.p[i] - '0');
    }
    return v;
}

/* application/grpc, or application/grpc+proto, ;charset... */
static bool grpc_content_type(const eddy_http_header_t *f)
{
    if (f == NULL || f->value.len < 16 || memcmp(f->value.p, "application/grpc", 16) != 0) {
        return false;
    }
    return f->value.len == 16 || f->value.p[16] == '+' || f->value.p[16] == ';';
}

/* The status and message of a block that ends the call: its grpc-status (missing: UNKNOWN,
 * or what its HTTP status means when that is not 200), grpc-message decoded into
 * cc->message. */
static eddy_grpc_status_t status_of(eddy__grpc_ccall_t *cc, const eddy_h2_headers_t *h)
{
    const eddy_http_header_t *st = eddy_h2_headers_get(h, "grpc-status");
    const eddy_http_header_t *msg = eddy_h2_headers_get(h, "grpc-message");
    int http = http_status(h);
    free(cc->message);
    cc->message = malloc(msg != NULL ? msg->value.len + 1 : 64);
    if (cc->message != NULL && msg != NULL) {
        eddy__grpc_percent_decode(msg->value.p, msg->value.len, cc->message);
    } else if (cc->message != NULL && st != NULL) {
        cc->message[0] = '\0';
    } else if (cc->message != NULL) {
        snprintf(cc->message, 64, "missing grpc-status (HTTP status %d)", http);
    }
    if (st != NULL) {
        return eddy__grpc_status_parse(st->value.p, st->value.len);
    }
    return http != 200 && http != 0 ? eddy__grpc_status_of_http(http) : EDDY_GRPC_UNKNOWN;
}

/* Trailers, or a trailers-only head: the call ends with what they say. */
static void status_in(eddy__grpc_ccall_t *cc, const eddy_h2_headers_t *h)
{
    eddy_grpc_call_t *call = &cc->c;
    call->remote_done = true;
    if (eddy__grpc_deframer_partial(&call->in)) {
        fail(cc, EDDY_GRPC_INTERNAL, "the stream ended inside a message", true);
        return;
    }
    if (eddy__grpc_md_take(h, &cc->tr, &cc->ntr, &cc->tr_store) != 0) {
        fail(cc, EDDY_GRPC_INTERNAL, "malformed -bin trailing metadata", true);
        return;
    }
    eddy_grpc_status_t status = status_of(cc, h);
    if (cc->unary && status == EDDY_GRPC_OK && call->received == 0) {
        fail(cc, EDDY_GRPC_INTERNAL, "no response message", true);
        return;
    }
    eddy__grpc_call_end(call, status, cc->message != NULL ? cc->message : "",
                        end_code(cc, true));
}

/* A head that is not gRPC's (no grpc-status in it): the status its HTTP status means. */
static void head_foreign(eddy__grpc_ccall_t *cc, const eddy_h2_headers_t *h, int http)
{
    char why[128];
    const eddy_http_header_t *ct = eddy_h2_headers_get(h, "content-type");
    if (http != 200) {
        snprintf(why, sizeof(why), "Received http2 header with status: %d", http);
    } else {
        snprintf(why, sizeof(why), "invalid content-type: %.*s", ct != NULL ? (int)ct->value.len : 6,
                 ct != NULL ? ct->value.p : "(none)");
    }
    eddy_grpc_status_t status = http != 200 ? eddy__grpc_status_of_http(http) : EDDY_GRPC_UNKNOWN;
    fail(cc, status, why, h->end_stream);
}

/* The response headers: their metadata, the messages' encoding, on_headers. */
static void head_accept(eddy__grpc_ccall_t *cc, const eddy_h2_headers_t *h)
{
    eddy_grpc_call_t *call = &cc->c;
    if (eddy__grpc_md_take(h, &call->md, &call->nmd, &call->md_store) != 0) {
        fail(cc, EDDY_GRPC_INTERNAL, "malformed -bin metadata", false);
        return;
    }
    const eddy_http_header_t *enc = eddy_h2_headers_get(h, "grpc-encoding");
    if (enc != NULL && !str_is(enc, "identity")) {
        if (!str_is(enc, "gzip") || !eddy__grpc_has_gzip()) {
            fail(cc, EDDY_GRPC_INTERNAL, "the response's grpc-encoding is not one we accept",
                 false);
            return;
        }
        call->gzip_in = true;
    }
    cc->got_head = true;
    if (cc->ops->on_headers != NULL) {
        cc->ops->on_headers(call);
    }
}

static void head_in(eddy__grpc_ccall_t *cc, const eddy_h2_headers_t *h)
{
    int http = http_status(h);
    if (http >= 100 && http < 200) {
        return; /* interim */
    }
    bool grpc = http == 200 && grpc_content_type(eddy_h2_headers_get(h, "content-type"));
    if (eddy_h2_headers_get(h, "grpc-status") != NULL || (grpc && h->end_stream)) {
        status_in(cc, h); /* trailers-only (its grpc-status wins over :status) */
    } else if (!grpc) {
        head_foreign(cc, h, http);
    } else {
        head_accept(cc, h);
    }
}

static void on_headers(eddy_h2_headers_t *h)
{
    eddy__grpc_ccall_t *cc = ccall_of_stream(h->stream);
    if (cc == NULL || cc->c.ended) {
        return;
    }
    eddy_grpc_call_retain(&cc->c);
    if (h->trailers || cc->got_head) {
        status_in(cc, h);
    } else {
        head_in(cc, h);
    }
    eddy_grpc_call_release(&cc->c);
}

/* A response message off the deframer (inflated): the application's, or the unary's one. */
static int on_message(void *arg, eddy_buf_t *msg, bool compressed)
{
    (void)compressed;
    eddy__grpc_ccall_t *cc = arg;
    if (cc->c.ended) {
        eddy_buf_release(msg);
        return EDDY_GRPC_CANCELLED; /* a callback ended it: stop reading */
    }
    if (cc->unary && cc->c.received > 1) {
        eddy_buf_release(msg);
        cc->why = "more than one response message";
        return EDDY_GRPC_INTERNAL;
    }
    if (cc->ops->on_message != NULL) {
        cc->ops->on_message(&cc->c, msg);
    } else {
        eddy_buf_release(msg);
    }
    return cc->c.ended ? EDDY_GRPC_CANCELLED : 0;
}

static void data_in(eddy__grpc_ccall_t *cc, eddy_h2_data_t *d)
{
    if (!cc->got_head) {
        eddy_h2_stream_consume(d->stream, eddy_buf_readable(d->data));
        fail(cc, EDDY_GRPC_INTERNAL, "a message before the response headers", d->end_stream);
        return;
    }
    const char *why = NULL;
    cc->why = NULL;
    int status = eddy__grpc_call_data(&cc->c, d, on_message, &why);
    if (status != 0 && !cc->c.ended) {
        why = cc->why != NULL ? cc->why : why != NULL ? why : "a response message was refused";
        fail(cc, (eddy_grpc_status_t)status, why, d->end_stream);
    } else if (d->end_stream && !cc->c.ended) {
        cc->c.remote_done = true;
        fail(cc, EDDY_GRPC_INTERNAL, "the server ended the stream without trailers", true);
    }
}

static void on_data(eddy_h2_data_t *d)
{
    eddy__grpc_ccall_t *cc = ccall_of_stream(d->stream);
    if (cc == NULL || cc->c.ended) {
        eddy_h2_stream_consume(d->stream, eddy_buf_readable(d->data)); /* dropped */
        return;
    }
    eddy_grpc_call_retain(&cc->c);
    data_in(cc, d);
    eddy_grpc_call_release(&cc->c);
}

static const char *h2_code_name(uint32_t code)
{
    static const char *const names[] = {
        "NO_ERROR",      "PROTOCOL_ERROR",    "INTERNAL_ERROR",      "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT", "STREAM_CLOSED",  "FRAME_SIZE_ERROR",    "REFUSED_STREAM",
        "CANCEL",        "COMPRESSION_ERROR", "CONNECT_ERROR",       "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"};
    return code < sizeof(names) / sizeof(names[0]) ? names[code] : "unknown code";
}

/* What a reset means for the call (grpc doc/PROTOCOL-HTTP2.md), said into why. */
static eddy_grpc_status_t reset_status(const eddy_h2_reset_t *r, const eddy__grpc_conn_t *conn,
                                       char *why, size_t n)
{
    uint32_t code = r->error_code;
    if (r->by_peer) {
        snprintf(why, n, "the server reset the stream (%s)", h2_code_name(code));
        return eddy__grpc_status_of_reset(code);
    }
    if (code == EDDY_H2_REFUSED_STREAM) {
        snprintf(why, n, "the server did not take the call (GOAWAY): it may be made again");
        return EDDY_GRPC_UNAVAILABLE;
    }
    if (code == EDDY_H2_CANCEL) {
        snprintf(why, n, "the connection to %s closed%s%s", conn->chan->target,
                 conn->err != 0 ? ": " : "", conn->err != 0 ? eddy_strerror(conn->err) : "");
        return EDDY_GRPC_UNAVAILABLE;
    }
    snprintf(why, n, "the stream was reset (%s)", h2_code_name(code));
    return eddy__grpc_status_of_reset(code);
}

/* The server's CANCEL once our deadline passed: its own deadline timer (from grpc-timeout)
 * beat ours, and the call's status is ours (grpc doc/PROTOCOL-HTTP2.md). */
static bool deadline_reset(const eddy__grpc_ccall_t *cc, const eddy_h2_reset_t *r)
{
    return r->by_peer && r->error_code == EDDY_H2_CANCEL && cc->c.deadline != 0 &&
           eddy_loop_now_ns(cc->chan->loop) >= cc->c.deadline;
}

static void on_reset(eddy_h2_reset_t *r, const eddy__grpc_conn_t *conn)
{
    eddy__grpc_ccall_t *cc = ccall_of_stream(r->stream);
    if (cc == NULL || cc->c.ended) {
        return;
    }
    if (deadline_reset(cc, r)) {
        eddy__grpc_call_end(&cc->c, EDDY_GRPC_DEADLINE_EXCEEDED, "Deadline Exceeded", UINT32_MAX);
        return;
    }
    char why[sizeof(conn->why)];
    eddy_grpc_status_t status = reset_status(r, conn, why, sizeof(why));
    eddy__grpc_call_log(&cc->c, EDDY_LOG_DEBUG, why);
    eddy__grpc_call_end(&cc->c, status, why, UINT32_MAX);
}

void eddy__grpc_client_read(eddy_msg_t *msg, const eddy__grpc_conn_t *conn)
{
    switch (msg->type) {
    case EDDY_MSG_H2_HEADERS:
        on_headers(eddy_h2_headers_of(msg));
        break;
    case EDDY_MSG_H2_DATA:
        on_data(eddy_h2_data_of(msg));
        break;
    case EDDY_MSG_H2_RESET:
        on_reset(eddy_h2_reset_of(msg), conn);
        break;
    default:
        assert(false);
    }
}

/* ---------------------------------------------------------------------------------------
 * Unary calls
 */

typedef struct unary_s {
    eddy_grpc_channel_t *chan;
    eddy_promise_t *p;        /* the caller's future: one reference ours */
    char *path;
    eddy_buf_t *request;
    int64_t deadline_ms;
    eddy_http_header_t *md;   /* the metadata, copied */
    size_t nmd;
    eddy_buf_t *md_store;
    eddy_buf_t *response;
} unary_t;

/* The reply a unary future owns: the call holds its metadata and message. */
typedef struct reply_s {
    eddy_grpc_reply_t r;
    eddy_grpc_call_t *call; /* one reference; NULL when the call never started */
} reply_t;

static void unary_free(unary_t *u)
{
    eddy_future_release(u->p);
    free(u->path);
    eddy__grpc_buf_drop(u->request);
    eddy__grpc_buf_drop(u->md_store);
    eddy__grpc_buf_drop(u->response);
    free(u);
}

static void reply_free(void *arg)
{
    reply_t *r = arg;
    eddy__grpc_buf_drop(r->r.response);
    eddy_grpc_call_release(r->call);
    free(r);
}

/* Complete u's future with a reply (call: the call it was, or NULL), and free u. */
static void unary_answer(unary_t *u, eddy_grpc_call_t *call, eddy_grpc_status_t status,
                         const char *message)
{
    reply_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        eddy_promise_fail(u->p, EDDY_ENOMEM);
        unary_free(u);
        return;
    }
    r->r.status = status;
    r->r.message = message;
    if (status == EDDY_GRPC_OK) {
        r->r.response = u->response;
        u->response = NULL;
    }
    if (call != NULL) {
        r->call = eddy_grpc_call_retain(call);
        r->r.headers = eddy_grpc_call_metadata(call, &r->r.headers_count);
        r->r.trailers = eddy_grpc_call_trailers(call, &r->r.trailers_count);
    }
    eddy__promise_succeed_owned(u->p, r, reply_free); /* cancelled: r is freed at once */
    unary_free(u);
}

static void unary_message(eddy_grpc_call_t *call, eddy_buf_t *msg)
{
    unary_t *u = eddy_grpc_call_arg(call);
    assert(u->response == NULL); /* a second one is refused before it comes here */
    u->response = msg;
}

static void unary_close(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message)
{
    unary_answer(eddy_grpc_call_arg(call), call, status, message);
}

static const eddy_grpc_client_ops_t unary_ops = {
    .on_message = unary_message,
    .on_close = unary_close,
};

/* The future completed: cancelled, the call is too. */
static void unary_done(eddy_future_t *f, void *arg)
{
    eddy_grpc_call_t *call = arg;
    if (eddy_future_error(f) == EDDY_ECANCELED && !call->ended) {
        eddy_grpc_call_cancel(call);
    }
    eddy_grpc_call_release(call);
}

/* Send the request of the call just started, and half-close. */
static void unary_send(eddy_grpc_call_t *call, eddy_buf_t *request)
{
    int err = eddy_grpc_call_send(call, request, NULL);
    if (err != 0 && !call->ended) {
        char why[96];
        snprintf(why, sizeof(why), "the request could not be sent: %s", eddy_strerror(err));
        eddy__grpc_call_end(call, err == EDDY_EMSGSIZE ? EDDY_GRPC_RESOURCE_EXHAUSTED
                                                       : EDDY_GRPC_INTERNAL,
                            why, EDDY_H2_CANCEL);
    }
    eddy_grpc_call_half_close(call);
}

static void unary_start(unary_t *u)
{
    eddy_grpc_call_options_t o = {.deadline_ms = u->deadline_ms, .metadata = u->md,
                                  .metadata_count = u->nmd};
    eddy_buf_t *request = u->request;
    eddy_promise_t *p = eddy_future_retain(u->p);
    u->request = NULL;
    int err;
    eddy_grpc_call_t *call = call_start(u->chan, u->path, &o, &unary_ops, u, true, &err);
    if (call == NULL) { /* the checks passed before: closing, or no memory */
        eddy_buf_release(request);
        if (err == EDDY_ECLOSED) {
            unary_answer(u, NULL, EDDY_GRPC_UNAVAILABLE, "channel closed");
        } else {
            eddy_promise_fail(u->p, err);
            unary_free(u);
        }
        eddy_future_release(p);
        return;
    }
    /* u may be gone now (the call ended at once): what follows uses p and call. */
    if (eddy_future_add_listener(p, unary_done, eddy_grpc_call_retain(call)) != 0) {
        eddy_grpc_call_release(call); /* no memory: a cancel of the future reaches no call */
    }
    unary_send(call, request);
    eddy_grpc_call_release(call);
    eddy_future_release(p);
}

static void unary_task(void *arg)
{
    unary_t *u = arg;
    eddy_grpc_channel_t *c = u->chan;
    if (eddy_future_is_done(u->p)) {
        unary_free(u); /* cancelled before it started */
    } else {
        unary_start(u);
    }
    eddy__grpc_channel_task_done(c);
}

/* u for path, request and o, checked: 0, EDDY_EINVAL, EDDY_ENOMEM. */
static int unary_fill(unary_t *u, const char *path, const eddy_grpc_call_options_t *o)
{
    if (path == NULL || !path_ok(path) || (o != NULL && o->deadline_ms < 0)) {
        return EDDY_EINVAL;
    }
    int err = o != NULL ? md_check(o->metadata, o->metadata_count) : 0;
    if (err == 0 && o != NULL) {
        u->deadline_ms = o->deadline_ms;
        u->nmd = o->metadata_count;
        err = md_copy(o->metadata, o->metadata_count, &u->md, &u->md_store);
    }
    if (err == 0 && (u->path = strdup(path)) == NULL) {
        err = EDDY_ENOMEM;
    }
    return err;
}

eddy_future_t *eddy_grpc_unary(eddy_grpc_channel_t *c, const char *path, eddy_buf_t *request,
                               const eddy_grpc_call_options_t *o)
{
    eddy_promise_t *p = eddy_promise_new(c->loop);
    unary_t *u = p != NULL ? calloc(1, sizeof(*u)) : NULL;
    int err = u == NULL ? EDDY_ENOMEM : request == NULL ? EDDY_ENOMEM : unary_fill(u, path, o);
    if (u != NULL) {
        u->chan = c;
        u->p = eddy_future_retain(p);
        u->request = request;
        request = NULL;
    }
    if (err != 0) {
        eddy__grpc_buf_drop(request);
        if (p != NULL) {
            eddy_promise_fail(p, err);
        }
        if (u != NULL) {
            unary_free(u);
        }
        return p;
    }
    atomic_fetch_add(&c->tasks, 1);
    if (eddy_loop_execute(c->loop, unary_task, u) != 0) {
        atomic_fetch_sub(&c->tasks, 1);
        unary_answer(u, NULL, EDDY_GRPC_UNAVAILABLE, "the channel's loop is shutting down");
    }
    return p;
}

const eddy_grpc_reply_t *eddy_future_grpc_reply(const eddy_future_t *f)
{
    return eddy_future_error(f) == 0 ? eddy_future_result(f) : NULL;
}
