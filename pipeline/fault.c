/*
 * Failures nobody was told of (Netty's void promise, and its tail): a write that cannot go on
 * and has no promise to report to, and an error that reaches the end of the pipeline.
 *
 * A byte stream cannot go on after a hole: the bytes after it would be read as if they
 * followed what came before. So a write that fails with nobody to tell closes the stream after
 * what was queued before it (a close after flush from the tail, so TLS still says
 * close_notify; what is written after fails with EDDY_EPIPE), then raises its error from the
 * head, where every handler may see it. A datagram channel drops the packet and goes on: a
 * datagram is whole or absent. Failures because the channel or its output had closed
 * (EDDY_ECLOSED, EDDY_EPIPE) end nothing more: no byte can follow them.
 *
 * The tail logs an error once per channel, and while the channel is open: once a handler
 * closed it (it saw an error and acted), or the transport did, what still arrives is logged
 * at debug, but for the write failure that closed it. One hostile connection, at most one
 * line.
 */
#include "pipeline/internal.h"

/* The write failure travelling now on this thread, for the tail's line: it reaches the tail
 * within the raise, unless an offloaded handler takes it to its carrier (whose tail then
 * logs the plain line). The names are the contexts', valid while it travels: the pipeline
 * is entered, so a context removed meanwhile is not freed yet. */
typedef struct fault_s {
    uint64_t channel; /* 0: none */
    int err;
    uint32_t type;
    const char *writer; /* the handler that wrote, or NULL: not known (a queued write) */
    const char *at;     /* where it failed */
} fault_t;

static __attribute__((tls_model("initial-exec"))) _Thread_local fault_t travelling;

/* The message types eddy's codecs define (http.h, http_client.h, websocket.h, resp.h: the
 * numbers, since those layers sit above this one), for log lines; others print as numbers. */
static const char *type_name(uint32_t type)
{
    switch (type) {
    case EDDY_MSG_BUF:
        return "a buffer";
    case EDDY_MSG_COMPOSITE:
        return "a composite buffer";
    case EDDY_MSG_DATAGRAM:
        return "a datagram";
    case EDDY_MSG_FILE_REGION:
        return "a file region";
    case 16: /* EDDY_MSG_HTTP_REQUEST */
    case 17: /* EDDY_MSG_HTTP_FULL_REQUEST */
        return "an HTTP request";
    case 18: /* EDDY_MSG_HTTP_CONTENT */
        return "HTTP content";
    case 19: /* EDDY_MSG_HTTP_RESPONSE */
        return "an HTTP response";
    case 20: /* EDDY_MSG_HTTP_CLIENT_REQUEST */
        return "an HTTP client request";
    case 24: /* EDDY_MSG_WS_FRAME */
        return "a WebSocket frame";
    case 82: /* EDDY_MSG_RESP_CMD */
        return "a RESP command";
    default:
        return "a message";
    }
}

/* Why a write fails, where the error alone does not say it. */
static const char *hint(int err)
{
    switch (err) {
    case EDDY_ENOTSUP:
        return ": no encoder before the socket turned it into bytes";
    case EDDY_ENOBUFS:
        return ": past EDDY_MAX_PENDING_OUTBOUND";
    default:
        return "";
    }
}

/* A context's name for a log line: the pipeline's end is the channel itself. */
static const char *who(const eddy_ctx_t *ctx)
{
    return ctx == &ctx->pipeline->end ? "the channel" : eddy_ctx_name(ctx);
}

/* A byte stream's write failed with nobody told: close after what was queued, raise. */
static void raise_on_stream(eddy_channel_t *ch, eddy_ctx_t *at, uint32_t type, int err)
{
    eddy_ctx_t *writer = eddy__pipeline_writer();
    bool known = writer != NULL && writer->pipeline == &ch->pipeline;
    travelling = (fault_t){ch->id, err, type, known ? who(writer) : NULL, who(at)};
    /* The close first, so that nothing written from here on (an exception handler's reply)
     * lands after the hole: later writes fail with EDDY_EPIPE. The error travels even when
     * the close was at once (the embedded channel): the tail then still logs it. */
    eddy__pipeline_close(&ch->pipeline, NULL, true);
    eddy_pipeline_fire_exception(&ch->pipeline, err);
    travelling.channel = 0;
}

void eddy_ctx_fail_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p, int err)
{
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    eddy__assert_on_loop(eddy__loop_of(ch));
    assert(err < 0);
    uint32_t type = msg != NULL ? msg->type : 0;
    if (msg != NULL) {
        eddy_msg_release(msg);
    }
    if (p != NULL) {
        eddy_promise_fail(p, err);
        return;
    }
    if (err == EDDY_ECLOSED || err == EDDY_EPIPE || (ch->flags & EDDY__CH_CLOSED)) {
        return; /* the channel or its output closed before: nothing follows to make a hole */
    }
    if (ch->ops->write_dropped != NULL) {
        ch->ops->write_dropped(ch, type, err);
        return;
    }
    raise_on_stream(ch, ctx, type, err);
}

void eddy__write_dropped(eddy_channel_t *ch, uint32_t type, int err)
{
    atomic_fetch_add_explicit(&ch->pipeline.dropped, 1, memory_order_relaxed);
    bool first = !(ch->flags & EDDY__CH_ERROR_LOGGED);
    ch->flags |= EDDY__CH_ERROR_LOGGED;
    eddy__log(first ? EDDY_LOG_WARN : EDDY_LOG_DEBUG,
              "channel %llu: %s (message type %u) written with no promise was dropped: %s (%s)%s;"
              " counted in msgs_dropped%s",
              (unsigned long long)ch->id, type_name(type), (unsigned)type, eddy_strerror(err),
              eddy_err_name(err), hint(err), first ? "; later drops are logged at debug" : "");
}

void eddy__pipeline_tail_exception(eddy_channel_t *ch, int err)
{
    const fault_t *f = &travelling;
    bool fault = f->channel == ch->id && f->err == err;
    /* Once per channel; after a close only the write failure that closed it. */
    bool quiet = (ch->flags & EDDY__CH_ERROR_LOGGED) || (!fault && (ch->flags & EDDY__CH_CLOSED));
    eddy_log_level_t level = quiet ? EDDY_LOG_DEBUG : EDDY_LOG_WARN;
    ch->flags |= EDDY__CH_ERROR_LOGGED;
    if (fault) {
        eddy__log(level,
                  "channel %llu: a write of %s (message type %u)%s%s%s failed at %s: %s (%s)%s;"
                  " it had no promise, so the error is raised and the channel closes after what"
                  " was queued before it",
                  (unsigned long long)ch->id, type_name(f->type), (unsigned)f->type,
                  f->writer != NULL ? " by '" : "", f->writer != NULL ? f->writer : "",
                  f->writer != NULL ? "'" : "", f->at, eddy_strerror(err), eddy_err_name(err),
                  hint(err));
        return;
    }
    eddy__log(level, "channel %llu: an error reached the end of the pipeline unhandled: %s (%s)",
              (unsigned long long)ch->id, eddy_strerror(err), eddy_err_name(err));
}
