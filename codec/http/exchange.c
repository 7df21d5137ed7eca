/*
 * The exchange handler: matches the requests of eddy_http_send() to their responses as
 * futures. HTTP/1.1 answers in order, so a FIFO of promises is all the matching there is:
 * each full response completes the oldest. The FIFO lives on the channel's loop; a send from
 * another thread reaches it as a private message carrying the request and its promise
 * together, unwrapped by the handler's write, so the two cannot be separated or reordered.
 *
 * When the connection ends, every promise still waiting fails with what ended it: the first
 * error seen (exception_caught, the response timeout), else EDDY_ECLOSED.
 */
#include "codec/http/internal.h"
#include "pipeline/layer.h"

#include <assert.h>
#include <stdlib.h>

/* eddy_http_send()'s message: a request and the promise of its response, on their way to the
 * exchange handler. Below EDDY_MSG_USER, beside the HTTP types of http.h and http_client.h. */
enum { MSG_HTTP_SEND = 23 };

typedef struct send_s {
    eddy_msg_t _msg;
    eddy_http_request_t *req; /* taken by the exchange, else released with the message */
    eddy_promise_t *p;        /* likewise; failed when the message never got there */
    eddy_channel_t *ch;       /* a reference: why it never got there */
} send_t;

typedef struct exchange_s {
    int64_t timeout_ms;
    uint64_t timer; /* the response timeout of the oldest request, or 0 */
    int error;      /* the first error the connection met (negative), or 0 */
    bool upgraded;  /* a 101 was answered: what follows is not HTTP */
    /* The promises of the requests written, oldest first: NULL for a request written without
     * eddy_http_send() (its response passes on). */
    eddy__http_fifo_t wait;
} exchange_t;

/* ---------------------------------------------------------------------------------------
 * Futures
 */

static void release_response(void *r)
{
    eddy_msg_release(&((eddy_http_response_t *)r)->_msg);
}

/* A cancelled future closes the connection: its response would still come, in its turn, and
 * cannot be skipped. Runs on the loop once f completed; arg is a channel reference. */
static void on_settled(eddy_future_t *f, void *arg)
{
    eddy_channel_t *ch = arg;
    if (eddy_future_error(f) == EDDY_ECANCELED) {
        eddy_channel_close(ch, NULL);
    }
    eddy_channel_release(ch);
}

/* A request that could not be written (no memory, the outbound buffer full) leaves the
 * connection out of step: fail it. Closing and our own drops after a final answer to an
 * Expect: 100-continue need nothing more. arg is a channel reference. */
static void on_written(eddy_future_t *f, void *arg)
{
    eddy_channel_t *ch = arg;
    int err = eddy_future_error(f);
    if (err < 0 && err != EDDY_ECANCELED && err != EDDY_ECLOSED && eddy_channel_is_open(ch)) {
        eddy_pipeline_fire_exception(eddy_channel_pipeline(ch), err);
    }
    eddy_channel_release(ch);
}

static int wait_push(exchange_t *s, eddy_promise_t *p)
{
    return eddy__http_fifo_push(&s->wait, &p);
}

static eddy_promise_t *wait_pop(exchange_t *s)
{
    assert(s->wait.count > 0 && s->wait.size == sizeof(eddy_promise_t *));
    eddy_promise_t *p = *(eddy_promise_t **)eddy__http_fifo_at(&s->wait, 0);
    eddy__http_fifo_pop(&s->wait);
    return p;
}

/* Fail every waiting promise with err; whether one of them was a send's. */
static bool fail_all(exchange_t *s, int err)
{
    bool any = false;
    while (s->wait.count > 0) {
        eddy_promise_t *p = wait_pop(s);
        if (p != NULL) {
            eddy_promise_fail(p, err);
            eddy_future_release(p);
            any = true;
        }
    }
    return any;
}

/* The connection ended with err (the first error wins): fail what waits, close. An error
 * from the pipeline is handled when a send waited for it, else told on (the tail logs it). */
static void end_with(eddy_ctx_t *ctx, exchange_t *s, int err, bool tell)
{
    if (s->error == 0) {
        s->error = err;
    }
    if (!fail_all(s, s->error) && tell) {
        eddy_ctx_fire_exception(ctx, err);
    }
    eddy_ctx_close(ctx, NULL);
}

/* ---------------------------------------------------------------------------------------
 * The response timeout
 */

static void timed_out(eddy_ctx_t *ctx, void *arg)
{
    exchange_t *s = arg;
    s->timer = 0;
    end_with(ctx, s, EDDY_ETIMEDOUT, false);
}

/* The oldest request waits from now: its timer runs, and only its (restarted per response,
 * so a request queued behind a slow one is not charged for the wait before its turn). */
static void restart_timer(eddy_ctx_t *ctx, exchange_t *s)
{
    if (s->timer != 0) {
        eddy_ctx_cancel(ctx, s->timer);
        s->timer = 0;
    }
    if (s->timeout_ms > 0 && s->wait.count > 0) {
        s->timer = eddy_ctx_schedule(ctx, s->timeout_ms, timed_out, s);
    }
}

/* ---------------------------------------------------------------------------------------
 * Events
 */

static void exchange_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    exchange_t *s = eddy_ctx_state(ctx);
    if (msg->type == EDDY_MSG_HTTP_CLIENT_REQUEST) {
        /* Written by hand: its response is not ours, but it takes its place in the order. */
        int err = wait_push(s, NULL);
        if (err != 0) {
            eddy_ctx_fail_write(ctx, msg, p, err);
            return;
        }
        if (s->wait.count == 1) {
            restart_timer(ctx, s);
        }
        eddy_ctx_write(ctx, msg, p);
        return;
    }
    if (msg->type != MSG_HTTP_SEND) {
        eddy_ctx_write(ctx, msg, p);
        return;
    }
    send_t *w = EDDY_CONTAINER_OF(msg, send_t, _msg);
    eddy_http_request_t *req = w->req;
    eddy_promise_t *f = w->p;
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    w->req = NULL;
    w->p = NULL;
    eddy_msg_release(msg);
    eddy__promise_done(p, 0);
    int err = s->error != 0 ? s->error : s->upgraded ? EDDY_EINVAL : 0;
    eddy_promise_t *written = NULL;
    if (err == 0) {
        written = eddy_promise_new(eddy_ctx_loop(ctx));
        err = written == NULL || wait_push(s, f) != 0 ? EDDY_ENOMEM : 0;
    }
    if (err != 0) {
        eddy_future_release(written);
        eddy_msg_release(&req->_msg);
        eddy_promise_fail(f, err);
        eddy_future_release(f);
        return;
    }
    if (s->wait.count == 1) {
        restart_timer(ctx, s);
    }
    if (eddy_future_add_listener(f, on_settled, eddy_channel_retain(ch)) != 0) {
        eddy_channel_release(ch); /* no memory: the future cannot close on cancel */
    }
    if (eddy_future_add_listener(written, on_written, eddy_channel_retain(ch)) != 0) {
        eddy_channel_release(ch);
    }
    eddy_ctx_write(ctx, &req->_msg, written);
    eddy_future_release(written);
}

static void exchange_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    exchange_t *s = eddy_ctx_state(ctx);
    eddy_http_response_t *r =
        msg->type == EDDY_MSG_HTTP_FULL_RESPONSE ? eddy_http_response_of(msg) : NULL;
    if (r == NULL || s->upgraded || s->wait.count == 0) {
        eddy_ctx_fire_channel_read(ctx, msg);
        return;
    }
    if (r->status < 200 && r->status != 101) {
        eddy_msg_release(msg); /* interim: the final response is still to come */
        return;
    }
    /* A 101 answers the upgrade request for good: nothing else of HTTP comes. */
    s->upgraded = r->status == 101;
    bool keep = r->keep_alive || s->upgraded;
    eddy_promise_t *p = wait_pop(s);
    restart_timer(ctx, s);
    if (p == NULL) {
        eddy_ctx_fire_channel_read(ctx, msg);
    } else {
        eddy__promise_succeed_owned(p, r, release_response);
        eddy_future_release(p);
    }
    if (!keep && !eddy_ctx_is_removed(ctx)) {
        eddy_ctx_close(ctx, NULL); /* the response said so, or the codec did */
    }
}

static void exchange_exception(eddy_ctx_t *ctx, int err)
{
    end_with(ctx, eddy_ctx_state(ctx), err, true);
}

static void exchange_inactive(eddy_ctx_t *ctx)
{
    exchange_t *s = eddy_ctx_state(ctx);
    fail_all(s, s->error != 0 ? s->error : EDDY_ECLOSED);
    eddy_ctx_fire_channel_inactive(ctx);
}

static void exchange_removed(eddy_ctx_t *ctx)
{
    exchange_t *s = eddy_ctx_state(ctx);
    fail_all(s, s->error != 0 ? s->error : EDDY_ECLOSED);
    eddy__http_fifo_destroy(&s->wait);
}

static const eddy_handler_ops_t exchange_handler = {
    .name = "http_exchange",
    .handler_removed = exchange_removed,
    .channel_read = exchange_read,
    .exception_caught = exchange_exception,
    .channel_inactive = exchange_inactive,
    .write = exchange_write,
};

eddy_handler_t eddy_http_exchange(int64_t response_timeout_ms)
{
    exchange_t *s = calloc(1, sizeof(*s));
    if (s != NULL) {
        s->timeout_ms = response_timeout_ms;
        s->wait.size = sizeof(eddy_promise_t *);
    }
    return eddy_handler(NULL, &exchange_handler, s, eddy_free_state);
}

/* ---------------------------------------------------------------------------------------
 * Sending
 */

static void send_free(eddy_msg_t *msg)
{
    send_t *w = EDDY_CONTAINER_OF(msg, send_t, _msg);
    if (w->req != NULL) {
        eddy_msg_release(&w->req->_msg);
    }
    if (w->p != NULL) {
        /* Released before the exchange took it: the channel was closed by then, or the write
         * went past every handler to the socket, which takes only bytes. */
        eddy_promise_fail(w->p, eddy_channel_is_open(w->ch) ? EDDY_EINVAL : EDDY_ECLOSED);
        eddy_future_release(w->p);
    }
    eddy_channel_release(w->ch);
    free(w);
}

eddy_future_t *eddy_http_send(eddy_channel_t *ch, eddy_http_request_t *req)
{
    eddy_promise_t *p = eddy_promise_new(eddy_channel_loop(ch));
    send_t *w = p != NULL ? malloc(sizeof(*w)) : NULL;
    if (w == NULL) {
        eddy_future_release(p);
        eddy_msg_release(&req->_msg);
        return NULL;
    }
    if (!eddy_channel_is_open(ch)) {
        free(w);
        eddy_msg_release(&req->_msg);
        eddy_promise_fail(p, EDDY_ECLOSED);
        return p;
    }
    eddy_msg_init(&w->_msg, MSG_HTTP_SEND, send_free);
    w->req = req;
    w->p = eddy_future_retain(p);
    w->ch = eddy_channel_retain(ch);
    eddy_channel_write_and_flush(ch, &w->_msg, NULL);
    return p;
}

bool eddy__http_send_take(eddy_msg_t *msg, eddy_http_request_t **req, eddy_promise_t **p)
{
    if (msg->type != MSG_HTTP_SEND) {
        return false;
    }
    send_t *w = EDDY_CONTAINER_OF(msg, send_t, _msg);
    *req = w->req;
    *p = w->p;
    w->req = NULL;
    w->p = NULL;
    eddy_msg_release(msg);
    return true;
}

eddy_http_response_t *eddy_future_http_response(const eddy_future_t *f)
{
    return eddy_future_is_done(f) && eddy_future_error(f) == 0 ? eddy_future_result(f) : NULL;
}
