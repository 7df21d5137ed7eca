/*
 * Timeouts (Netty's io.netty.handler.timeout): the idle state handler, the read and write
 * timeout handlers. The message deadline handler, which asks the decoders, is the codec
 * layer's (codec/deadline.c).
 *
 * Idle timers are not periodic ticks: each fires at the last activity plus its timeout, and
 * when there was activity meanwhile it is scheduled again for what is left (Netty's
 * IdleStateHandler), so a busy channel costs one timer per period, not a check per read.
 *
 * Not here: Netty's observeOutput (idle writers whose bytes still trickle out); the times
 * are in milliseconds, Netty's MIN_TIMEOUT_NANOS (1 ms) being the smallest anyway.
 *
 * Lifetimes: the timers are handler-scoped (eddy_ctx_schedule), so the pipeline cancels them
 * with the handler, and runs them with the channel held: one that closes the channel frees
 * nothing under itself. A write's promise may complete after the handler was removed, and a
 * listener cannot be taken back: listeners get small objects of their own, which outlive the
 * state and learn that the handler is gone.
 */
#include "pipeline/internal.h"

#include <eddy/handler.h>

#include <stdlib.h>

int64_t eddy__timeout_ns(int64_t ms)
{
    if (ms <= 0) {
        return 0;
    }
    /* Far enough for any use, and far from overflowing the loop's clock arithmetic. */
    const int64_t max_ms = INT64_MAX / 4 / 1000000;
    return (ms < max_ms ? ms : max_ms) * 1000000;
}

void eddy__ctx_timed_out(eddy_ctx_t *ctx, bool *closed)
{
    if (*closed) {
        return;
    }
    *closed = true;
    eddy_ctx_fire_exception(ctx, EDDY_ETIMEDOUT);
    eddy_ctx_close(ctx, NULL);
}

/* The promise a watched write goes on with: p, or when the caller gave none a new one in
 * *own (Netty's promise.unvoid()), which the caller releases after the write. NULL without
 * memory: the write then goes on unwatched. */
static eddy_promise_t *watched_promise(eddy_ctx_t *ctx, eddy_promise_t *p, eddy_promise_t **own)
{
    *own = NULL;
    if (p == NULL) {
        p = *own = eddy_promise_new(eddy_ctx_loop(ctx));
    }
    return p;
}

/* ---------------------------------------------------------------------------------------
 * The idle state handler, and the read timeout handler built on its reader timer
 */

enum { IDLE_READER, IDLE_WRITER, IDLE_ALL, IDLE_KINDS };
enum { LIFE_NEW, LIFE_STARTED, LIFE_STOPPED }; /* Netty's state 0, 1, 2: never started twice */

typedef struct idle_s idle_t;

typedef struct idle_timer_s {
    idle_t *owner;
    uint64_t timer;     /* the pending scoped timer's id, or 0 */
    int64_t timeout_ns; /* 0: this kind is off */
    bool first;         /* the next event of this kind is the first since activity */
} idle_timer_t;

/* What write listeners update: freed by the last of the handler and its listeners. */
typedef struct idle_writes_s {
    unsigned refs;
    idle_t *owner; /* NULL once the handler was removed */
} idle_writes_t;

struct idle_s {
    eddy_ctx_t *ctx;
    idle_timer_t kind[IDLE_KINDS];
    int64_t last_read_ns, last_write_ns;
    idle_writes_t *writes; /* made at the first watched write */
    int life;
    bool reading;      /* between channel_read and channel_read_complete */
    bool read_timeout; /* the read timeout handler: time out instead of the event */
    bool closed;       /* the read timeout fired */
};

/* Shared by every channel, as Netty's IdleStateEvent constants; not const only because user
 * event data is a plain void *. Never written. */
static eddy_idle_event_t idle_events[IDLE_KINDS][2] = {
    {{EDDY_EVENT_READER_IDLE, false}, {EDDY_EVENT_READER_IDLE, true}},
    {{EDDY_EVENT_WRITER_IDLE, false}, {EDDY_EVENT_WRITER_IDLE, true}},
    {{EDDY_EVENT_ALL_IDLE, false}, {EDDY_EVENT_ALL_IDLE, true}},
};

static void idle_fired(eddy_ctx_t *ctx, void *arg);

static idle_t *idle_new(int64_t reader_ms, int64_t writer_ms, int64_t all_ms)
{
    idle_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    int64_t ms[IDLE_KINDS] = {reader_ms, writer_ms, all_ms};
    for (int i = 0; i < IDLE_KINDS; i++) {
        s->kind[i].owner = s;
        s->kind[i].timeout_ns = eddy__timeout_ns(ms[i]);
        s->kind[i].first = true;
    }
    return s;
}

void *eddy_idle_state_handler_new(int64_t reader_idle_ms, int64_t writer_idle_ms,
                                  int64_t all_idle_ms)
{
    return idle_new(reader_idle_ms, writer_idle_ms, all_idle_ms);
}

void *eddy_read_timeout_handler_new(int64_t timeout_ms)
{
    idle_t *s = idle_new(timeout_ms, 0, 0);
    if (s != NULL) {
        s->read_timeout = true;
    }
    return s;
}

static void idle_schedule(idle_timer_t *it, int64_t delay_ns)
{
    /* 0 (no memory, or the loop shuts down) ends this kind's events: nothing to retry on. */
    it->timer = eddy_ctx_schedule_ns(it->owner->ctx, delay_ns, idle_fired, it);
}

static void idle_start(idle_t *s)
{
    if (s->life != LIFE_NEW) {
        return;
    }
    s->life = LIFE_STARTED;
    s->last_read_ns = s->last_write_ns = eddy_loop_now_ns(eddy_ctx_loop(s->ctx));
    for (int i = 0; i < IDLE_KINDS; i++) {
        if (s->kind[i].timeout_ns > 0) {
            idle_schedule(&s->kind[i], s->kind[i].timeout_ns);
        }
    }
}

static void idle_stop(idle_t *s)
{
    s->life = LIFE_STOPPED;
    for (int i = 0; i < IDLE_KINDS; i++) {
        idle_timer_t *it = &s->kind[i];
        eddy_ctx_cancel(s->ctx, it->timer); /* EDDY_EALREADY at removal: it did it already */
        it->timer = 0;
    }
}

static void idle_fired(eddy_ctx_t *ctx, void *arg)
{
    idle_timer_t *it = arg;
    idle_t *s = it->owner;
    int which = (int)(it - s->kind);
    it->timer = 0;
    int64_t last = s->last_write_ns;
    if (which == IDLE_READER || (which == IDLE_ALL && s->last_read_ns > last)) {
        last = s->last_read_ns;
    }
    int64_t delay = it->timeout_ns;
    /* A read batch in progress is activity now (Netty: reading counts as not idle). */
    if (which == IDLE_WRITER || !s->reading) {
        delay -= eddy_loop_now_ns(eddy_ctx_loop(ctx)) - last;
    }
    if (delay > 0) {
        idle_schedule(it, delay);
        return;
    }
    /* Idle: the next check first, since what follows may close the channel and free s. */
    idle_schedule(it, it->timeout_ns);
    bool first = it->first;
    it->first = false;
    if (s->read_timeout) {
        eddy__ctx_timed_out(ctx, &s->closed);
        return;
    }
    eddy_ctx_fire_user_event(ctx, idle_events[which][0].state, &idle_events[which][first]);
}

static void idle_added(eddy_ctx_t *ctx)
{
    idle_t *s = eddy_ctx_state(ctx);
    s->ctx = ctx;
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    if (eddy_channel_is_active(ch) && eddy_channel_is_registered(ch)) {
        idle_start(s); /* channel_active has been and gone */
    }
}

static void idle_removed(eddy_ctx_t *ctx)
{
    idle_t *s = eddy_ctx_state(ctx);
    idle_stop(s);
    if (s->writes != NULL) {
        s->writes->owner = NULL;
        if (--s->writes->refs == 0) {
            free(s->writes);
        }
        s->writes = NULL;
    }
}

static void idle_registered(eddy_ctx_t *ctx)
{
    if (eddy_channel_is_active(eddy_ctx_channel(ctx))) {
        idle_start(eddy_ctx_state(ctx));
    }
    eddy_ctx_fire_channel_registered(ctx);
}

static void idle_active(eddy_ctx_t *ctx)
{
    idle_start(eddy_ctx_state(ctx));
    eddy_ctx_fire_channel_active(ctx);
}

static void idle_inactive(eddy_ctx_t *ctx)
{
    idle_stop(eddy_ctx_state(ctx));
    eddy_ctx_fire_channel_inactive(ctx);
}

static void idle_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    idle_t *s = eddy_ctx_state(ctx);
    if (s->kind[IDLE_READER].timeout_ns > 0 || s->kind[IDLE_ALL].timeout_ns > 0) {
        s->reading = true;
        s->kind[IDLE_READER].first = s->kind[IDLE_ALL].first = true;
    }
    eddy_ctx_fire_channel_read(ctx, msg);
}

static void idle_read_complete(eddy_ctx_t *ctx)
{
    idle_t *s = eddy_ctx_state(ctx);
    if (s->reading) {
        s->last_read_ns = eddy_loop_now_ns(eddy_ctx_loop(ctx));
        s->reading = false;
    }
    eddy_ctx_fire_channel_read_complete(ctx);
}

/* A write completed (or failed: Netty counts both): writer and all activity. */
static void idle_write_done(eddy_future_t *f, void *arg)
{
    (void)f;
    idle_writes_t *w = arg;
    idle_t *s = w->owner;
    if (s != NULL) {
        s->last_write_ns = eddy_loop_now_ns(eddy_ctx_loop(s->ctx));
        s->kind[IDLE_WRITER].first = s->kind[IDLE_ALL].first = true;
    }
    if (--w->refs == 0) {
        free(w);
    }
}

static void idle_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    idle_t *s = eddy_ctx_state(ctx);
    eddy_promise_t *own = NULL;
    if (s->kind[IDLE_WRITER].timeout_ns > 0 || s->kind[IDLE_ALL].timeout_ns > 0) {
        if (s->writes == NULL && (s->writes = calloc(1, sizeof(*s->writes))) != NULL) {
            s->writes->refs = 1; /* the handler's */
            s->writes->owner = s;
        }
        eddy_promise_t *wp = s->writes != NULL ? watched_promise(ctx, p, &own) : NULL;
        if (wp != NULL) {
            /* Counted first: the listener runs at once if wp is already complete. */
            s->writes->refs++;
            if (eddy_future_add_listener(wp, idle_write_done, s->writes) != 0) {
                s->writes->refs--;
            }
            p = wp;
        }
    }
    eddy_ctx_write(ctx, msg, p); /* s may be gone after this */
    eddy_future_release(own);
}

/* The slots of the idle state handler but its write, which the read timeout handler (the
 * same handler with only its reader timer) leaves NULL: writes pass it without a call. */
#define IDLE_READ_SLOTS                                                                        \
    .handler_added = idle_added, .handler_removed = idle_removed,                              \
    .channel_registered = idle_registered, .channel_active = idle_active,                      \
    .channel_inactive = idle_inactive, .channel_read = idle_read,                              \
    .channel_read_complete = idle_read_complete

static const eddy_handler_ops_t idle_ops = {
    .name = "idle_state",
    IDLE_READ_SLOTS,
    .write = idle_write,
};

static const eddy_handler_ops_t read_timeout_ops = {
    .name = "read_timeout",
    IDLE_READ_SLOTS,
};

const eddy_handler_ops_t *eddy_idle_state_handler_ops(void)
{
    return &idle_ops;
}

const eddy_handler_ops_t *eddy_read_timeout_handler_ops(void)
{
    return &read_timeout_ops;
}

/* ---------------------------------------------------------------------------------------
 * The write timeout handler: a timer per write, cancelled by the write's completion
 */

typedef struct write_timeout_s write_timeout_t;

/* One watched write. Its listener frees it; until then it is in its handler's list while its
 * timer is pending. */
typedef struct write_task_s {
    struct write_task_s *prev, *next;
    write_timeout_t *owner; /* NULL once out of the list */
    uint64_t timer;         /* the scoped timer's id */
    eddy_promise_t *p; /* a reference, while in the list */
} write_task_t;

struct write_timeout_s {
    eddy_ctx_t *ctx;
    int64_t timeout_ns;
    write_task_t *tasks;
    bool closed;
};

void *eddy_write_timeout_handler_new(int64_t timeout_ms)
{
    write_timeout_t *s = calloc(1, sizeof(*s));
    if (s != NULL) {
        s->timeout_ns = eddy__timeout_ns(timeout_ms);
    }
    return s;
}

/* Take task out of its handler's list: the timer stops, the promise is let go. */
static void write_task_detach(write_task_t *task)
{
    write_timeout_t *s = task->owner;
    if (s == NULL) {
        return;
    }
    if (task->prev != NULL) {
        task->prev->next = task->next;
    } else {
        s->tasks = task->next;
    }
    if (task->next != NULL) {
        task->next->prev = task->prev;
    }
    task->prev = task->next = NULL;
    task->owner = NULL;
    eddy_ctx_cancel(s->ctx, task->timer); /* EDDY_EALREADY inside its own callback: fine */
    task->timer = 0;
    eddy_future_release(task->p);
    task->p = NULL;
}

static void write_timer_fired(eddy_ctx_t *ctx, void *arg)
{
    (void)ctx;
    write_task_t *task = arg;
    write_timeout_t *s = task->owner; /* set: a detached task's timer was cancelled */
    /* Done but its listener not yet run (listeners queued behind others): not late. */
    bool late = !eddy_future_is_done(task->p);
    write_task_detach(task);
    if (late) {
        eddy__ctx_timed_out(s->ctx, &s->closed);
    }
}

static void write_done(eddy_future_t *f, void *arg)
{
    (void)f;
    write_task_t *task = arg;
    write_task_detach(task);
    free(task);
}

/* Watch p: a timer, and a listener that stops it. Without memory the write goes unwatched. */
static void write_watch(write_timeout_t *s, eddy_promise_t *p)
{
    write_task_t *task = calloc(1, sizeof(*task));
    if (task == NULL) {
        return;
    }
    task->timer = eddy_ctx_schedule_ns(s->ctx, s->timeout_ns, write_timer_fired, task);
    if (task->timer == 0) {
        free(task);
        return;
    }
    task->owner = s;
    task->p = eddy_future_retain(p);
    task->next = s->tasks;
    if (s->tasks != NULL) {
        s->tasks->prev = task;
    }
    s->tasks = task;
    /* Before the write (as Netty): a write that completes at once stops its timer at once. */
    if (eddy_future_add_listener(p, write_done, task) != 0) {
        write_task_detach(task);
        free(task);
    }
}

static void write_timeout_added(eddy_ctx_t *ctx)
{
    write_timeout_t *s = eddy_ctx_state(ctx);
    s->ctx = ctx;
}

static void write_timeout_removed(eddy_ctx_t *ctx)
{
    write_timeout_t *s = eddy_ctx_state(ctx);
    while (s->tasks != NULL) {
        write_task_detach(s->tasks); /* its listener still frees it */
    }
}

static void write_timeout_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    write_timeout_t *s = eddy_ctx_state(ctx);
    eddy_promise_t *own = NULL;
    if (s->timeout_ns > 0) {
        eddy_promise_t *wp = watched_promise(ctx, p, &own);
        if (wp != NULL) {
            write_watch(s, wp);
            p = wp;
        }
    }
    eddy_ctx_write(ctx, msg, p);
    eddy_future_release(own);
}

static const eddy_handler_ops_t write_timeout_ops = {
    .name = "write_timeout",
    .handler_added = write_timeout_added,
    .handler_removed = write_timeout_removed,
    .write = write_timeout_write,
};

const eddy_handler_ops_t *eddy_write_timeout_handler_ops(void)
{
    return &write_timeout_ops;
}

eddy_handler_t eddy_idle_state_handler(int64_t reader_idle_ms, int64_t writer_idle_ms,
                                       int64_t all_idle_ms)
{
    return eddy_handler(NULL, eddy_idle_state_handler_ops(),
                        eddy_idle_state_handler_new(reader_idle_ms, writer_idle_ms, all_idle_ms),
                        eddy_free_state);
}

eddy_handler_t eddy_read_timeout_handler(int64_t timeout_ms)
{
    return eddy_handler(NULL, eddy_read_timeout_handler_ops(),
                        eddy_read_timeout_handler_new(timeout_ms), eddy_free_state);
}

eddy_handler_t eddy_write_timeout_handler(int64_t timeout_ms)
{
    return eddy_handler(NULL, eddy_write_timeout_handler_ops(),
                        eddy_write_timeout_handler_new(timeout_ms), eddy_free_state);
}
