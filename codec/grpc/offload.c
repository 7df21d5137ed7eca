/*
 * Methods on a carrier (eddy_grpc_server_add_method_on): their callbacks run on the carrier's
 * threads, keyed by call so one call's callbacks keep their order; what such a callback does
 * to its call (send, finish, headers, cancel) goes back to the call's loop as a task, in the
 * order it was done.
 */
#include "internal.h"

#include "buffer/layer.h"
#include "pipeline/layer.h"

#include <eddy/carrier.h>
#include <eddy/loop.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Callbacks out to the carrier
 */

typedef struct job_s {
    eddy_grpc_call_t *call; /* a reference */
    const eddy_grpc_method_ops_t *ops;
    eddy__grpc_ev_t ev;
    eddy_buf_t *msg;        /* taken by the callback when it runs */
    int status;
} job_t;

static void job_call(eddy_grpc_call_t *call, const eddy_grpc_method_ops_t *ops,
                     eddy__grpc_ev_t ev, eddy_buf_t *msg, int status)
{
    switch (ev) {
    case EDDY__GRPC_EV_REQUEST:
        ops->on_request(call, msg);
        break;
    case EDDY__GRPC_EV_START:
        ops->on_start(call);
        break;
    case EDDY__GRPC_EV_MESSAGE:
        ops->on_message(call, msg);
        break;
    case EDDY__GRPC_EV_HALF_CLOSE:
        ops->on_half_close(call);
        break;
    case EDDY__GRPC_EV_CANCEL:
        ops->on_cancel(call, (eddy_grpc_status_t)status);
        break;
    case EDDY__GRPC_EV_WRITABLE:
        ops->on_writable(call);
        break;
    }
}

static int job_run(void *arg, void **result)
{
    job_t *j = arg;
    *result = NULL;
    eddy_buf_t *msg = j->msg;
    j->msg = NULL;
    job_call(j->call, j->ops, j->ev, msg, j->status);
    return 0;
}

/* The job ran, or was dropped (a carrier shutting down): free what it still holds. */
static void job_done(eddy_future_t *f, void *arg)
{
    (void)f;
    job_t *j = arg;
    eddy__grpc_buf_drop(j->msg);
    eddy_grpc_call_release(j->call);
    free(j);
}

void eddy__grpc_dispatch(eddy_grpc_call_t *call, const eddy_grpc_method_ops_t *ops,
                         eddy__grpc_ev_t ev, eddy_buf_t *msg, int status)
{
    if (call->carrier == NULL) {
        job_call(call, ops, ev, msg, status);
        return;
    }
    job_t *j = malloc(sizeof(*j));
    if (j == NULL) {
        eddy__grpc_buf_drop(msg);
        eddy__grpc_call_log(call, EDDY_LOG_ERROR, "no memory to hand a callback to the carrier");
        eddy__grpc_call_end(call, EDDY_GRPC_RESOURCE_EXHAUSTED, "out of memory", EDDY_H2_CANCEL);
        return;
    }
    *j = (job_t){eddy_grpc_call_retain(call), ops, ev, msg, status};
    eddy_future_t *f = eddy_carrier_execute(call->carrier, (uint64_t)(uintptr_t)call, job_run, j);
    if (f == NULL || eddy_future_add_listener(f, job_done, j) != 0) {
        eddy__grpc_call_log(call, EDDY_LOG_ERROR, "the carrier took no callback");
        job_done(f, j); /* never queued (no memory): the callback is lost, the call ended */
        eddy__grpc_call_end(call, EDDY_GRPC_RESOURCE_EXHAUSTED, "out of memory", EDDY_H2_CANCEL);
    }
    eddy_future_release(f);
}

/* ---------------------------------------------------------------------------------------
 * Call functions back to the loop
 */

bool eddy__grpc_off_loop(const eddy_grpc_call_t *call)
{
    return call->carrier != NULL && !eddy_loop_in_event_loop(call->loop);
}

typedef struct op_s {
    eddy_grpc_call_t *call; /* a reference */
    eddy__grpc_op_t kind;
    eddy_buf_t *msg;
    eddy_promise_t *p;      /* a reference */
    int status;
    char *message;          /* copied */
    eddy_http_header_t *md; /* copied, with their bytes after them */
    size_t n;
} op_t;

/* md (n fields) and their bytes copied into one block, or NULL (none, or no memory: *err). */
static eddy_http_header_t *md_copy(const eddy_http_header_t *md, size_t n, int *err)
{
    size_t bytes = n * sizeof(*md);
    for (size_t i = 0; i < n; i++) {
        bytes += md[i].name.len + md[i].value.len;
    }
    eddy_http_header_t *out = n > 0 ? malloc(bytes) : NULL;
    if (n > 0 && out == NULL) {
        *err = EDDY_ENOMEM;
        return NULL;
    }
    char *to = (char *)(out + n);
    for (size_t i = 0; i < n; i++) {
        memcpy(to, md[i].name.p, md[i].name.len);
        out[i].name = (eddy_http_str_t){to, md[i].name.len};
        to += md[i].name.len;
        memcpy(to, md[i].value.p, md[i].value.len);
        out[i].value = (eddy_http_str_t){to, md[i].value.len};
        to += md[i].value.len;
    }
    return out;
}

static void op_free(op_t *o)
{
    eddy__grpc_buf_drop(o->msg);
    eddy_future_release(o->p);
    eddy_grpc_call_release(o->call);
    free(o->message);
    free(o->md);
    free(o);
}

static void op_run(void *arg)
{
    op_t *o = arg;
    eddy_grpc_call_t *call = o->call;
    eddy_buf_t *msg = o->msg;
    o->msg = NULL;
    /* A task, outside the pipeline's events: a write that meets the peer gone closes the
     * channel inside it, and would free the HTTP/2 and gRPC handlers' state under their own
     * code (held, it stays until the op is over). NULL once the call ended. */
    eddy_channel_t *ch = eddy_grpc_call_channel(call);
    if (ch != NULL) {
        eddy__channel_enter(ch);
    }
    switch (o->kind) {
    case EDDY__GRPC_OP_SEND:
        eddy_grpc_call_send(call, msg, o->p);
        break;
    case EDDY__GRPC_OP_REPLY:
        eddy_grpc_call_reply(call, msg);
        break;
    case EDDY__GRPC_OP_FINISH:
        eddy_grpc_call_finish(call, (eddy_grpc_status_t)o->status, o->message, o->md, o->n);
        break;
    case EDDY__GRPC_OP_HEADERS:
        eddy_grpc_call_send_headers(call, o->md, o->n);
        break;
    case EDDY__GRPC_OP_COMPRESS:
        eddy_grpc_call_set_compression(call, o->message);
        break;
    case EDDY__GRPC_OP_CANCEL:
        eddy_grpc_call_cancel(call);
        break;
    }
    if (ch != NULL) {
        eddy__channel_leave(ch);
    }
    op_free(o);
}

int eddy__grpc_post(eddy_grpc_call_t *call, eddy__grpc_op_t kind, eddy_buf_t *msg,
                    eddy_promise_t *p, int status, const char *text,
                    const eddy_http_header_t *md, size_t n)
{
    int err = 0;
    op_t *o = calloc(1, sizeof(*o));
    if (o != NULL) {
        *o = (op_t){.call = eddy_grpc_call_retain(call), .kind = kind, .msg = msg,
                    .p = eddy_future_retain(p), .status = status};
        msg = NULL;
        o->message = text != NULL ? strdup(text) : NULL;
        o->md = md_copy(md, n, &err);
        o->n = n;
        err = (text != NULL && o->message == NULL) ? EDDY_ENOMEM : err;
        err = err != 0 ? err : eddy_loop_execute(call->loop, op_run, o);
    }
    if (o == NULL || err != 0) {
        eddy__grpc_buf_drop(msg);
        eddy__promise_done(p, o == NULL ? EDDY_ENOMEM : err);
        if (o != NULL) {
            op_free(o);
        }
        return o == NULL ? EDDY_ENOMEM : err;
    }
    return 0;
}
