/*
 * The flush consolidation handler (Netty's FlushConsolidationHandler): flushes issued during
 * a read batch become one at channel_read_complete; outside a read batch, optionally, flushes
 * issued before a loop task runs become one.
 *
 * The scheduled flush is a handler-scoped timer with no delay (eddy_ctx_schedule): it runs in
 * the loop's timers of this turn, after the I/O, can be cancelled as Netty cancels its task,
 * and never runs after the handler was removed.
 */
#include "pipeline/internal.h"

#include <eddy/handler.h>

#include <stdlib.h>

typedef struct flush_consolidation_s flush_consolidation_t;

struct flush_consolidation_s {
    eddy_ctx_t *ctx;
    unsigned after;     /* explicit_flush_after_flushes */
    unsigned pending;   /* flushes held */
    bool consolidate;   /* consolidate_when_no_read_in_progress */
    bool reading;       /* between channel_read and channel_read_complete */
    uint64_t task;      /* the scheduled flush's timer id, or 0 */
};

void *eddy_flush_consolidation_handler_new(unsigned explicit_flush_after_flushes,
                                           bool consolidate_when_no_read_in_progress)
{
    flush_consolidation_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->after = explicit_flush_after_flushes != 0 ? explicit_flush_after_flushes
                                                 : EDDY_FLUSH_CONSOLIDATION_DEFAULT_FLUSHES;
    s->consolidate = consolidate_when_no_read_in_progress;
    return s;
}

static void cancel_scheduled(flush_consolidation_t *s)
{
    if (s->task != 0) {
        eddy_ctx_cancel(s->ctx, s->task);
        s->task = 0;
    }
}

/* The state may be gone once the flush returns (a handler nearer the head may close). */
static void flush_now(flush_consolidation_t *s)
{
    cancel_scheduled(s);
    s->pending = 0;
    eddy_ctx_flush(s->ctx);
}

static void flush_if_needed(flush_consolidation_t *s)
{
    if (s->pending > 0) {
        flush_now(s);
    }
}

static void reset_read_and_flush_if_needed(flush_consolidation_t *s)
{
    s->reading = false;
    flush_if_needed(s);
}

static void scheduled_flush(eddy_ctx_t *ctx, void *arg)
{
    flush_consolidation_t *s = arg;
    s->task = 0;
    /* A read batch that began meanwhile flushes at its channel_read_complete. */
    if (s->pending > 0 && !s->reading) {
        s->pending = 0;
        eddy_ctx_flush(ctx); /* s may be gone when it returns (a close inside) */
    }
}

static void schedule_flush(flush_consolidation_t *s)
{
    if (s->task != 0) {
        return;
    }
    s->task = eddy_ctx_schedule(s->ctx, 0, scheduled_flush, s);
    if (s->task == 0) {
        /* No memory, or the loop shuts down: flush now rather than hold the data. */
        flush_now(s);
    }
}

static void fc_added(eddy_ctx_t *ctx)
{
    flush_consolidation_t *s = eddy_ctx_state(ctx);
    s->ctx = ctx;
}

static void fc_removed(eddy_ctx_t *ctx)
{
    flush_consolidation_t *s = eddy_ctx_state(ctx);
    flush_if_needed(s);
    cancel_scheduled(s);
}

static void fc_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    flush_consolidation_t *s = eddy_ctx_state(ctx);
    s->reading = true;
    eddy_ctx_fire_channel_read(ctx, msg);
}

static void fc_read_complete(eddy_ctx_t *ctx)
{
    /* This may be the last event of the read batch: flush now. */
    reset_read_and_flush_if_needed(eddy_ctx_state(ctx));
    eddy_ctx_fire_channel_read_complete(ctx);
}

static void fc_writability(eddy_ctx_t *ctx)
{
    /* Unwritable: what is held is memory the peer should be draining; let it go. */
    if (!eddy_channel_is_writable(eddy_ctx_channel(ctx))) {
        flush_if_needed(eddy_ctx_state(ctx));
    }
    eddy_ctx_fire_channel_writability_changed(ctx);
}

static void fc_exception(eddy_ctx_t *ctx, int err)
{
    reset_read_and_flush_if_needed(eddy_ctx_state(ctx));
    eddy_ctx_fire_exception(ctx, err);
}

static void fc_disconnect(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    reset_read_and_flush_if_needed(eddy_ctx_state(ctx));
    eddy_ctx_disconnect(ctx, p);
}

static void fc_close(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    reset_read_and_flush_if_needed(eddy_ctx_state(ctx));
    eddy_ctx_close(ctx, p);
}

static void fc_flush(eddy_ctx_t *ctx)
{
    flush_consolidation_t *s = eddy_ctx_state(ctx);
    if (s->reading) {
        /* channel_read_complete is sure to come and flush; only the limit flushes earlier. */
        if (++s->pending == s->after) {
            flush_now(s);
        }
    } else if (s->consolidate) {
        if (++s->pending == s->after) {
            flush_now(s);
        } else {
            schedule_flush(s);
        }
    } else {
        flush_now(s);
    }
}

static const eddy_handler_ops_t flush_consolidation_ops = {
    .name = "flush_consolidation",
    .handler_added = fc_added,
    .handler_removed = fc_removed,
    .channel_read = fc_read,
    .channel_read_complete = fc_read_complete,
    .channel_writability_changed = fc_writability,
    .exception_caught = fc_exception,
    .disconnect = fc_disconnect,
    .close = fc_close,
    .flush = fc_flush,
};

const eddy_handler_ops_t *eddy_flush_consolidation_handler_ops(void)
{
    return &flush_consolidation_ops;
}

eddy_handler_t eddy_flush_consolidation_handler(unsigned explicit_flush_after_flushes,
                                                bool consolidate_when_no_read_in_progress)
{
    return eddy_handler(NULL, eddy_flush_consolidation_handler_ops(),
                        eddy_flush_consolidation_handler_new(explicit_flush_after_flushes,
                                                             consolidate_when_no_read_in_progress),
                        eddy_free_state);
}
