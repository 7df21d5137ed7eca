/*
 * Handler-scoped timers and tasks (pipeline.h, eddy_ctx_schedule): timers whose callback
 * never runs after its handler was removed, so a handler never has to cancel its own timers
 * at the right moment, nor keep a pointer that outlives them.
 *
 * A job is the storage inside a loop timer (eddy__timer_new), so one allocation serves both
 * and the timer's reference count keeps the job: the context's list of pending jobs holds
 * the caller's reference, the loop's heap its own while scheduled, and a run under way its
 * own. The job holds the channel, so the context (freed only with the channel, or once
 * buried on the loop) is there whenever the loop looks at it.
 *
 * Threads: the list, and every decision to run or not, belong to the handler's thread: the
 * loop for most handlers, the carrier's partition for an offloaded one. The loop fires the
 * timer; for an offloaded handler it hands the run to the carrier, behind the events already
 * queued there, and the carrier runs it only if the job is still pending, so a cancel, or a
 * removal (which runs on the carrier too), made before the run was reached wins.
 */
#include "pipeline/internal.h"

#include <assert.h>

typedef struct eddy__job_s {
    /* In ctx->jobs while pending, oldest first: the head's prev is the tail (the oldest is
     * what a handler that times each write cancels first, at O(1)). */
    struct eddy__job_s *prev, *next;
    eddy_timer_t *timer;             /* the timer this job lives in */
    eddy_ctx_t *ctx;
    eddy_channel_t *ch; /* a reference, dropped with the timer's memory */
    eddy_ctx_cb cb;
    void *arg;
    uint64_t id;
    bool periodic;
    bool pending; /* in ctx->jobs: not yet run (one-shot) and not cancelled */
} job_t;

static void job_unlink(job_t *j)
{
    job_t **jobs = eddy__ctx_jobs(j->ctx);
    assert(j->pending);
    j->pending = false;
    job_t *head = *jobs;
    if (j == head) {
        *jobs = j->next;
        if (j->next != NULL) {
            j->next->prev = j->prev;
        }
    } else {
        j->prev->next = j->next;
        (j->next != NULL ? j->next : head)->prev = j->prev;
    }
    j->prev = j->next = NULL;
}

static void job_link(job_t *j)
{
    job_t **jobs = eddy__ctx_jobs(j->ctx);
    job_t *head = *jobs;
    j->next = NULL;
    if (head == NULL) {
        j->prev = j;
        *jobs = j;
        return;
    }
    j->prev = head->prev;
    head->prev->next = j;
    head->prev = j;
}

/* The handler's thread: stop j for good and drop the list's reference. */
static void job_cancel(job_t *j)
{
    eddy_timer_t *t = j->timer;
    job_unlink(j);
    eddy_timer_cancel(t);
    eddy_timer_release(t);
}

/* The handler's thread, the channel held: run j if it is still pending. */
static void job_run(job_t *j)
{
    if (!j->pending) {
        return; /* cancelled after the loop fired it (an offloaded handler's) */
    }
    eddy_timer_t *list_ref = NULL;
    if (!j->periodic) {
        /* Out of the list before the call: a cancel inside it is EDDY_EALREADY, as for a
         * timer that fired. The run's own reference keeps j until it returns. */
        job_unlink(j);
        list_ref = j->timer;
    }
    j->cb(j->ctx, j->arg);
    eddy_timer_release(list_ref); /* NULL is ignored */
}

/* On the carrier: the run the loop handed over (the timer's reference comes with it). */
static void job_run_offloaded(eddy_ctx_t *ctx, void *arg, bool run)
{
    (void)ctx;
    eddy_timer_t *t = arg;
    if (run) {
        job_run(eddy__timer_data(t));
    }
    eddy_timer_release(t);
}

/* The loop's timer callback. */
static void job_fired(eddy_timer_t *t, void *data)
{
    job_t *j = data;
    if (j->ctx->on_carrier) {
        eddy__ctx_offload_call(j->ctx, job_run_offloaded, eddy_timer_retain(t));
        return;
    }
    eddy_channel_t *ch = eddy__channel_hold(j->ch);
    job_run(j);
    eddy__channel_unhold(ch);
}

static void job_dtor(void *data)
{
    job_t *j = data;
    eddy_channel_release(j->ch);
}

static uint64_t schedule(eddy_ctx_t *ctx, int64_t delay_ns, int64_t period_ns, eddy_ctx_cb cb,
                         void *arg, int *err)
{
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    eddy_loop_t *loop = eddy__loop_of(ch);
    assert(ctx->on_carrier || eddy_loop_in_event_loop(loop));
    *err = EDDY_ECLOSED;
    if (cb == NULL) {
        *err = EDDY_EINVAL;
        return 0;
    }
    if (ctx->removed || !eddy_channel_is_open(ch)) {
        return 0;
    }
    eddy_timer_t *t = eddy__timer_new(loop, job_fired, sizeof(job_t), job_dtor);
    if (t == NULL) {
        *err = EDDY_ENOMEM;
        return 0;
    }
    job_t *j = eddy__timer_data(t);
    *j = (job_t){.timer = t,
                 .ctx = ctx,
                 .ch = eddy_channel_retain(ch),
                 .cb = cb,
                 .arg = arg,
                 .id = eddy__ctx_next_job_id(ctx),
                 .periodic = period_ns > 0,
                 .pending = true};
    job_link(j);
    *err = eddy__timer_start(t, delay_ns, period_ns);
    if (*err != 0) {
        job_unlink(j);
        eddy_timer_release(t);
        return 0;
    }
    return j->id;
}

static int64_t ms_to_ns(int64_t ms)
{
    /* Far enough for any use, and far from the loop's clock arithmetic overflowing. */
    const int64_t max_ms = INT64_MAX / 4 / 1000000;
    return ms <= 0 ? 0 : (ms < max_ms ? ms : max_ms) * 1000000;
}

uint64_t eddy_ctx_schedule(eddy_ctx_t *ctx, int64_t delay_ms, eddy_ctx_cb cb, void *arg)
{
    int err;
    return schedule(ctx, ms_to_ns(delay_ms), 0, cb, arg, &err);
}

uint64_t eddy_ctx_schedule_ns(eddy_ctx_t *ctx, int64_t delay_ns, eddy_ctx_cb cb, void *arg)
{
    int err;
    return schedule(ctx, delay_ns, 0, cb, arg, &err);
}

uint64_t eddy_ctx_schedule_at_fixed_rate(eddy_ctx_t *ctx, int64_t initial_ms, int64_t period_ms,
                                         eddy_ctx_cb cb, void *arg)
{
    int err;
    if (period_ms < 1) {
        return 0;
    }
    return schedule(ctx, ms_to_ns(initial_ms), ms_to_ns(period_ms), cb, arg, &err);
}

int eddy_ctx_execute(eddy_ctx_t *ctx, eddy_ctx_cb cb, void *arg)
{
    int err;
    return schedule(ctx, 0, 0, cb, arg, &err) != 0 ? 0 : err;
}

int eddy_ctx_cancel(eddy_ctx_t *ctx, uint64_t id)
{
    if (ctx->removed) {
        /* Its jobs were cancelled at the removal, and a loop context's jobs word is the
         * graveyard's link now: a cancel from handler_removed (a handler letting go of its
         * timers) walked the removed contexts as jobs, round the pipeline's ring for ever. */
        return EDDY_EALREADY;
    }
    for (job_t *j = *eddy__ctx_jobs(ctx); j != NULL && id != 0; j = j->next) {
        if (j->id == id) {
            job_cancel(j);
            return 0;
        }
    }
    return EDDY_EALREADY;
}

void eddy__ctx_jobs_cancel(eddy_ctx_t *ctx)
{
    job_t **jobs = eddy__ctx_jobs(ctx);
    while (*jobs != NULL) {
        job_cancel(*jobs);
    }
}
