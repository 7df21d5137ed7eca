/*
 * The call both sides share: references, its end (once), messages out with their prefix and
 * in through the deframer, the deadline and the call-scoped timers, and its accessors.
 */
#include "internal.h"

#include "buffer/layer.h"
#include "codec/http2/layer.h"
#include "pipeline/layer.h"
#include "reactor/layer.h"

#include <eddy/channel.h>
#include <eddy/loop.h>

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Below this a message is copied behind its prefix (one buffer); above, the prefix goes as a
 * buffer of its own in the same DATA frame. */
#define COPY_BELOW 4096

void eddy__grpc_call_init(eddy_grpc_call_t *call, const eddy__grpc_call_ops_t *side,
                          eddy_ctx_t *ctx, eddy_h2_stream_t *s)
{
    atomic_init(&call->refs, 1); /* the library's, dropped at the end */
    call->side = side;
    call->ctx = ctx;
    call->loop = eddy_ctx_loop(ctx);
    atomic_init(&call->writable_hint, true);
    call->stream = eddy_h2_stream_retain(s);
    call->max_recv = EDDY_GRPC_MAX_MESSAGE;
    call->max_send = EDDY_GRPC_MAX_MESSAGE;
    eddy_h2_stream_set_user_data(s, call);
}

static void user_data_drop(eddy_grpc_call_t *call);

eddy_grpc_call_t *eddy_grpc_call_retain(eddy_grpc_call_t *call)
{
    uint32_t old = atomic_fetch_add_explicit(&call->refs, 1, memory_order_relaxed);
    assert(old > 0);
    (void)old;
    return call;
}

void eddy_grpc_call_release(eddy_grpc_call_t *call)
{
    if (call == NULL) {
        return;
    }
    uint32_t old = atomic_fetch_sub_explicit(&call->refs, 1, memory_order_acq_rel);
    assert(old > 0);
    if (old != 1) {
        return;
    }
    assert(call->ended && call->stream == NULL && call->timers == NULL);
    eddy_loop_t *held = call->carrier != NULL ? call->loop : NULL;
    call->side->free(call);
    user_data_drop(call);
    eddy__grpc_deframer_free(&call->in);
    eddy__grpc_buf_drop(call->md_store);
    free(call->path);
    free(call);
    if (held != NULL) {
        eddy__loop_release(held); /* last: what went before may still reach the loop */
    }
}

void eddy__grpc_call_on_carrier(eddy_grpc_call_t *call, eddy_carrier_t *carrier)
{
    assert(call->carrier == NULL && carrier != NULL);
    call->carrier = carrier;
    eddy__loop_retain(call->loop);
}

eddy_grpc_call_t *eddy__grpc_call_of(eddy_h2_stream_t *s)
{
    return s != NULL ? eddy_h2_stream_user_data(s) : NULL;
}

/* ---------------------------------------------------------------------------------------
 * Timers
 */

static void timers_cancel(eddy_grpc_call_t *call)
{
    while (call->timers != NULL) {
        eddy__grpc_timer_t *t = call->timers;
        call->timers = t->next;
        eddy_ctx_cancel(call->ctx, t->id);
        eddy__small_free(t, sizeof(*t));
    }
    if (call->deadline_timer != 0) {
        eddy_ctx_cancel(call->ctx, call->deadline_timer);
        call->deadline_timer = 0;
    }
}

static void timer_fire(eddy_ctx_t *ctx, void *arg)
{
    (void)ctx;
    eddy__grpc_timer_t *t = arg;
    eddy_grpc_call_t *call = t->call;
    for (eddy__grpc_timer_t **at = &call->timers; *at != NULL; at = &(*at)->next) {
        if (*at == t) {
            *at = t->next;
            break;
        }
    }
    eddy_grpc_call_retain(call);
    t->cb(call, t->arg); /* the call is live: an ended call's timers were cancelled */
    eddy_grpc_call_release(call);
    eddy__small_free(t, sizeof(*t));
}

uint64_t eddy_grpc_call_schedule(eddy_grpc_call_t *call, int64_t delay_ms,
                                 void (*cb)(eddy_grpc_call_t *call, void *arg), void *arg)
{
    if (call->ended || cb == NULL || call->ctx == NULL) { /* no ctx: a client call waiting */
        return 0;
    }
    eddy__grpc_timer_t *t = eddy__small_alloc(sizeof(*t));
    if (t == NULL) {
        return 0;
    }
    *t = (eddy__grpc_timer_t){.next = call->timers, .call = call, .cb = cb, .arg = arg};
    t->id = eddy_ctx_schedule(call->ctx, delay_ms, timer_fire, t);
    if (t->id == 0) {
        eddy__small_free(t, sizeof(*t));
        return 0;
    }
    call->timers = t;
    return t->id;
}

int eddy_grpc_call_cancel_timer(eddy_grpc_call_t *call, uint64_t id)
{
    for (eddy__grpc_timer_t **at = &call->timers; *at != NULL; at = &(*at)->next) {
        eddy__grpc_timer_t *t = *at;
        if (t->id == id) {
            *at = t->next;
            eddy_ctx_cancel(call->ctx, id);
            eddy__small_free(t, sizeof(*t));
            return 0;
        }
    }
    return EDDY_EALREADY;
}

static void deadline_fire(eddy_ctx_t *ctx, void *arg)
{
    (void)ctx;
    eddy_grpc_call_t *call = arg;
    call->deadline_timer = 0;
    eddy__grpc_call_log(call, EDDY_LOG_DEBUG, "deadline exceeded");
    if (call->side->expired != NULL) {
        eddy_grpc_call_retain(call); /* the status's write may close the connection */
        call->side->expired(call);
        eddy_grpc_call_release(call);
    } else {
        eddy__grpc_call_end(call, EDDY_GRPC_DEADLINE_EXCEEDED, "Deadline Exceeded",
                            EDDY_H2_CANCEL);
    }
}

void eddy__grpc_call_arm_deadline(eddy_grpc_call_t *call)
{
    assert(call->deadline != 0 && call->deadline_timer == 0);
    int64_t left = call->deadline - eddy_loop_now_ns(eddy_ctx_loop(call->ctx));
    left = left > 0 ? left : 0;
    call->deadline_timer = eddy_ctx_schedule_ns(call->ctx, left, deadline_fire, call);
}

/* ---------------------------------------------------------------------------------------
 * The end
 */

void eddy__grpc_call_end(eddy_grpc_call_t *call, eddy_grpc_status_t status, const char *message,
                         uint32_t h2_code)
{
    if (call->ended) {
        return;
    }
    call->ended = true;
    timers_cancel(call);
    eddy_h2_stream_t *s = call->stream; /* NULL: a client call that waited for a connection */
    if (s != NULL && h2_code != UINT32_MAX && !eddy_h2_stream_is_closed(s)) {
        eddy_h2_stream_reset(s, h2_code);
    }
    if (s != NULL && eddy_h2_stream_user_data(s) == call) {
        eddy_h2_stream_set_user_data(s, NULL); /* what the stream still brings is dropped */
    }
    call->side->ended(call, status, message != NULL ? message : "");
    call->stream = NULL;
    call->ctx = NULL;
    eddy_h2_stream_release(s);
    eddy_grpc_call_release(call);
}

void eddy__grpc_call_log(const eddy_grpc_call_t *call, int level, const char *what)
{
    eddy_channel_t *ch = call->stream != NULL ? eddy_h2_stream_channel(call->stream) : NULL;
    eddy__log((eddy_log_level_t)level, "grpc: channel %llu stream %u %s: %s",
              ch != NULL ? (unsigned long long)eddy_channel_id(ch) : 0ULL,
              call->stream != NULL ? eddy_h2_stream_id(call->stream) : 0u,
              call->path != NULL ? call->path : "?", what);
}

/* ---------------------------------------------------------------------------------------
 * Messages out
 */

/* msg with its prefix as one buffer (small), or NULL when msg goes as it is. */
static eddy_buf_t *framed_copy(eddy_buf_t *msg, bool compressed)
{
    size_t n = eddy_buf_readable(msg);
    eddy_buf_t *b = n < COPY_BELOW ? eddy_buf_new(n + 5) : NULL;
    if (b != NULL) {
        uint8_t prefix[5];
        eddy__grpc_prefix(prefix, compressed, (uint32_t)n);
        eddy_buf_write_bytes(b, prefix, 5);
        eddy_buf_write_bytes(b, eddy_buf_read_ptr(msg), n);
    }
    return b;
}

int eddy__grpc_call_queue(eddy_grpc_call_t *call, eddy_buf_t *msg, bool end_stream,
                          eddy_promise_t *p)
{
    if (call->stream == NULL) { /* a client call before its stream opened */
        assert(call->side->hold != NULL);
        return call->side->hold(call, msg, end_stream, p);
    }
    bool compressed = false;
    if (call->compress_out && eddy_buf_readable(msg) > 0) {
        eddy_buf_t *z = eddy__grpc_gzip(msg);
        if (z == NULL) {
            eddy_buf_release(msg);
            eddy__promise_done(p, EDDY_ENOMEM);
            return EDDY_ENOMEM;
        }
        eddy_buf_release(msg);
        msg = z;
        compressed = true;
    }
    eddy_buf_t *one = framed_copy(msg, compressed);
    if (one != NULL) {
        eddy_buf_release(msg);
        return eddy_h2_stream_send_data(call->stream, one, end_stream, p);
    }
    uint8_t prefix[5];
    eddy__grpc_prefix(prefix, compressed, (uint32_t)eddy_buf_readable(msg));
    eddy_buf_t *head = eddy_buf_from(prefix, 5);
    if (head == NULL) {
        eddy_buf_release(msg);
        eddy__promise_done(p, EDDY_ENOMEM);
        return EDDY_ENOMEM;
    }
    eddy__h2_stream_cork(call->stream); /* prefix and message in one DATA frame */
    int err = eddy_h2_stream_send_data(call->stream, head, false, NULL); /* ENOBUFS: full */
    if (err == 0) {
        /* The message follows its prefix whatever the queue's bound (it is in memory
         * already, and at most max_send): capped, one larger than max_stream_pending could
         * never go, and its refusal left the prefix queued alone, breaking the framing. */
        err = eddy__h2_stream_send(call->stream, msg, end_stream, p, false);
    } else {
        eddy_buf_release(msg);
        eddy__promise_done(p, err);
    }
    eddy__h2_stream_uncork(call->stream);
    return err;
}

/* A message past the largest was refused: the call ends RESOURCE_EXHAUSTED (grpc.h). */
static void too_big(eddy_grpc_call_t *call)
{
    static const char why[] = "Sent message larger than max";
    eddy__grpc_call_log(call, EDDY_LOG_WARN, why);
    if (call->side->too_big != NULL) {
        call->side->too_big(call, why);
    } else {
        eddy__grpc_call_end(call, EDDY_GRPC_RESOURCE_EXHAUSTED, why, EDDY_H2_CANCEL);
    }
}

int eddy_grpc_call_send(eddy_grpc_call_t *call, eddy_buf_t *msg, eddy_promise_t *p)
{
    if (eddy__grpc_off_loop(call)) {
        return eddy__grpc_post(call, EDDY__GRPC_OP_SEND, msg, p, 0, NULL, NULL, 0);
    }
    int err = 0;
    if (call->ended || call->local_done) {
        err = EDDY_ECLOSED;
    } else if (msg == NULL) {
        err = EDDY_ENOMEM; /* what a failed allocation of the message hands in */
    } else if (eddy_buf_readable(msg) > call->max_send) {
        err = EDDY_EMSGSIZE;
    } else if (call->sent > 0 && (call->kind == EDDY_GRPC_UNARY ||
                                  call->kind == EDDY_GRPC_CLIENT_STREAMING)) {
        err = EDDY_EINVAL;
    } else if (!call->headers_sent) {
        err = call->side->head(call);
        if (err == 0 && call->ended) {
            err = EDDY_ECLOSED; /* the head's write met the connection gone: it ended the call */
        }
    }
    if (err != 0) {
        if (msg != NULL) {
            eddy_buf_release(msg);
        }
        eddy__promise_done(p, err);
        if (err == EDDY_EMSGSIZE) {
            too_big(call);
        }
        return err;
    }
    call->sent++;
    if (call->sent_flag != NULL) {
        *call->sent_flag = true; /* data went: the peer's next PING is no strike */
    }
    return eddy__grpc_call_queue(call, msg, false, p);
}

bool eddy_grpc_call_is_writable(eddy_grpc_call_t *call)
{
    if (eddy__grpc_off_loop(call)) {
        return atomic_load_explicit(&call->writable_hint, memory_order_acquire);
    }
    bool w = !call->ended && !call->local_done && call->stream != NULL &&
             eddy_h2_stream_is_writable(call->stream);
    call->asked_writable = call->asked_writable || (!w && !call->ended);
    atomic_store_explicit(&call->writable_hint, w, memory_order_release);
    return w;
}

void eddy__grpc_call_writable(eddy_h2_stream_t *s)
{
    eddy_grpc_call_t *call = eddy__grpc_call_of(s);
    if (call == NULL || call->ended || !call->asked_writable) {
        return;
    }
    call->asked_writable = false;
    atomic_store_explicit(&call->writable_hint, true, memory_order_release);
    eddy_grpc_call_retain(call);
    call->side->writable(call);
    eddy_grpc_call_release(call);
}

int eddy_grpc_call_cancel(eddy_grpc_call_t *call)
{
    if (eddy__grpc_off_loop(call)) {
        return eddy__grpc_post(call, EDDY__GRPC_OP_CANCEL, NULL, NULL, 0, NULL, NULL, 0);
    }
    if (call->ended) {
        return EDDY_ECLOSED;
    }
    eddy__grpc_call_end(call, EDDY_GRPC_CANCELLED, "Cancelled", EDDY_H2_CANCEL);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Messages in
 */

typedef struct inbound_s {
    eddy_grpc_call_t *call;
    eddy__grpc_msg_cb cb;
    const char **why;
} inbound_t;

/* A message off the deframer: inflated when compressed, then the side's. */
static int inbound_msg(void *arg, eddy_buf_t *msg, bool compressed)
{
    inbound_t *in = arg;
    if (compressed && !in->call->gzip_in) {
        eddy_buf_release(msg);
        *in->why = "compressed message without a grpc-encoding";
        return EDDY_GRPC_INTERNAL;
    }
    if (compressed) {
        int status = 0;
        msg = eddy__grpc_gunzip(msg, in->call->max_recv, &status, in->why);
        if (msg == NULL) {
            return status;
        }
    }
    in->call->received++;
    return in->cb(in->call, msg, false);
}

int eddy__grpc_call_data(eddy_grpc_call_t *call, eddy_h2_data_t *d, eddy__grpc_msg_cb cb,
                         const char **why)
{
    size_t n = eddy_buf_readable(d->data);
    eddy_h2_stream_consume(call->stream, n); /* messages are the application's once read */
    inbound_t in = {call, cb, why};
    *why = NULL;
    /* A compressed message's prefix says its compressed length; the limit counts that too. */
    size_t max = call->max_recv;
    int status = eddy__grpc_deframe(&call->in, d->data, max, inbound_msg, &in, why);
    if (status == 0 && d->end_stream && eddy__grpc_deframer_partial(&call->in)) {
        *why = "the stream ended inside a message";
        status = EDDY_GRPC_INTERNAL;
    }
    return status;
}

/* ---------------------------------------------------------------------------------------
 * Accessors
 */

const char *eddy_grpc_call_path(const eddy_grpc_call_t *call)
{
    return call->path;
}

const eddy_http_header_t *eddy_grpc_call_metadata(const eddy_grpc_call_t *call, size_t *n)
{
    *n = call->nmd;
    return call->md;
}

const eddy_http_header_t *eddy_grpc_call_metadata_get(const eddy_grpc_call_t *call,
                                                      const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < call->nmd; i++) {
        if (call->md[i].name.len == len && memcmp(call->md[i].name.p, name, len) == 0) {
            return &call->md[i];
        }
    }
    return NULL;
}

int64_t eddy_grpc_call_time_left_ms(const eddy_grpc_call_t *call)
{
    if (call->deadline == 0) {
        return -1;
    }
    if (call->ended) {
        return 0;
    }
    int64_t left = call->deadline - eddy_loop_now_ns(call->loop); /* ctx: NULL while waiting */
    return left > 0 ? left / 1000000 : 0;
}

bool eddy_grpc_call_is_done(const eddy_grpc_call_t *call)
{
    return call->ended;
}

void *eddy_grpc_call_arg(const eddy_grpc_call_t *call)
{
    return call->arg;
}

void *eddy_grpc_call_user_data(const eddy_grpc_call_t *call)
{
    return call->user_data;
}

static void user_data_drop(eddy_grpc_call_t *call)
{
    if (call->free_user_data != NULL && call->user_data != NULL) {
        call->free_user_data(call->user_data);
    }
    call->user_data = NULL;
    call->free_user_data = NULL;
}

void eddy_grpc_call_set_user_data(eddy_grpc_call_t *call, void *data,
                                  void (*free_data)(void *data))
{
    if (data != call->user_data) {
        user_data_drop(call);
    }
    call->user_data = data;
    call->free_user_data = free_data;
}

eddy_channel_t *eddy_grpc_call_channel(const eddy_grpc_call_t *call)
{
    return call->stream != NULL ? eddy_h2_stream_channel(call->stream) : NULL;
}
