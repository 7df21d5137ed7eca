/*
 * Timers: a 4-ary min-heap of deadlines per loop, each timer knowing its slot, so cancel is a
 * removal in O(log n) and memory goes back at once. Idle timeouts on many connections are the
 * common case: scheduled, pushed back or cancelled many times, rarely fired. A 4-ary heap has
 * half the depth of a binary one and keeps a node's children on one cache line (libuv's heap
 * is binary and pointer-linked; Netty's is a binary array). Ties break by a start counter,
 * so timers with one deadline fire in the order they were scheduled.
 */
#include "buffer/layer.h"
#include "reactor/internal.h"

#include <assert.h>

#include <stddef.h>
#include <stdlib.h>

/* RUNNING: a periodic timer inside its callback. A cancel then stops the runs after it. */
enum { T_SCHEDULED = 0, T_RUNNING, T_DONE, T_CANCELLED };

#define NOT_IN_HEAP SIZE_MAX

struct eddy_timer_s {
    _Atomic uint32_t refcnt;
    _Atomic int state;
    eddy_loop_t *loop;
    int64_t deadline;
    int64_t period; /* 0: once; > 0: fixed rate; < 0: fixed delay of -period */
    uint64_t id;
    size_t index; /* slot in the heap, NOT_IN_HEAP when out */
    eddy_timer_cb cb;
    void *arg;
    /* Timers that carry their callback's state inside (eddy__timer_new): run on the last
     * release, before the memory goes; NULL for the public ones. */
    void (*dtor)(void *data);
    max_align_t data[]; /* eddy__timer_new's storage; none for the public ones */
};

/* ---------------------------------------------------------------------------------------
 * The heap (loop thread only)
 */

/* Entries keep the deadline and the tie-break beside the pointer, so sifting compares without
 * touching the timers themselves: popping the minimum of a 1M-timer heap spent about half its
 * time chasing those pointers (bench/RESULTS.md, timers_schedule_fire). */
static inline bool before(const eddy__timer_entry_t *a, const eddy__timer_entry_t *b)
{
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->id < b->id);
}

static inline void place(eddy__timer_heap_t *h, size_t i, eddy__timer_entry_t e)
{
    h->items[i] = e;
    e.timer->index = i;
}

static void sift_up(eddy__timer_heap_t *h, size_t i, eddy__timer_entry_t e)
{
    while (i > 0) {
        size_t parent = (i - 1) / 4;
        if (!before(&e, &h->items[parent])) {
            break;
        }
        place(h, i, h->items[parent]);
        i = parent;
    }
    place(h, i, e);
}

static void sift_down(eddy__timer_heap_t *h, size_t i, eddy__timer_entry_t e)
{
    assert(i < h->n);
    for (;;) {
        size_t first = 4 * i + 1;
        if (first >= h->n) {
            break;
        }
        size_t best = first;
        size_t last = first + 4 < h->n ? first + 4 : h->n;
        for (size_t c = first + 1; c < last; c++) {
            if (before(&h->items[c], &h->items[best])) {
                best = c;
            }
        }
        if (!before(&h->items[best], &e)) {
            break;
        }
        place(h, i, h->items[best]);
        i = best;
    }
    place(h, i, e);
}

static int heap_push(eddy__timer_heap_t *h, eddy_timer_t *t)
{
    eddy__assert_on_loop(EDDY_CONTAINER_OF(h, eddy_loop_t, timers));
    assert(t->index == NOT_IN_HEAP && h->n <= h->cap);
    if (h->n == h->cap) {
        eddy__timer_entry_t *items = eddy__array_grow(h->items, &h->cap, sizeof(*items), 64);
        if (items == NULL) {
            return EDDY_ENOMEM;
        }
        h->items = items;
    }
    t->id = h->next_id++;
    eddy__timer_entry_t e = {.deadline = t->deadline, .id = t->id, .timer = t};
    sift_up(h, h->n++, e);
    return 0;
}

static void heap_remove(eddy__timer_heap_t *h, eddy_timer_t *t)
{
    eddy__assert_on_loop(EDDY_CONTAINER_OF(h, eddy_loop_t, timers));
    assert(t->index < h->n && h->items[t->index].timer == t);
    size_t i = t->index;
    t->index = NOT_IN_HEAP;
    eddy__timer_entry_t last = h->items[--h->n];
    if (i == h->n) {
        return;
    }
    /* The last item fills the hole and moves whichever way it belongs. */
    if (i > 0 && before(&last, &h->items[(i - 1) / 4])) {
        sift_up(h, i, last);
    } else {
        sift_down(h, i, last);
    }
}

int eddy__timers_init(eddy__timer_heap_t *h)
{
    h->items = NULL;
    h->n = 0;
    h->cap = 0;
    h->next_id = 0;
    return 0;
}

void eddy__timers_destroy(eddy__timer_heap_t *h)
{
    assert(h->n == 0); /* every timer was cancelled, and its reference dropped, before */
    free(h->items);
    h->items = NULL;
    h->n = h->cap = 0;
}

int64_t eddy__timers_next_deadline(const eddy__timer_heap_t *h)
{
    return h->n > 0 ? h->items[0].deadline : INT64_MAX;
}

/* ---------------------------------------------------------------------------------------
 * Handles
 */

eddy_timer_t *eddy_timer_retain(eddy_timer_t *t)
{
    return eddy__refcnt_retain(&t->refcnt, "timer", t) ? t : NULL;
}

_Atomic uint32_t *eddy__timer_refcnt(eddy_timer_t *t)
{
    return &t->refcnt;
}

void eddy_timer_release(eddy_timer_t *t)
{
    /* acq_rel: the last release frees, after every other holder's writes. */
    if (t != NULL && eddy__refcnt_sub(&t->refcnt, 1)) {
        if (t->dtor != NULL) {
            t->dtor(t->data);
        }
        free(t);
    }
}

bool eddy_timer_is_done(const eddy_timer_t *t)
{
    int st = atomic_load_explicit(&t->state, memory_order_acquire);
    return st == T_DONE || st == T_CANCELLED;
}

bool eddy__timer_cancelled(const eddy_timer_t *t)
{
    return atomic_load_explicit(&t->state, memory_order_acquire) == T_CANCELLED;
}

/* On the loop: put t in the heap, which then holds the reference given with it. */
static void insert_on_loop(void *arg)
{
    eddy_timer_t *t = arg;
    eddy__assert_on_loop(t->loop);
    assert(t->index == NOT_IN_HEAP);
    if (atomic_load_explicit(&t->state, memory_order_acquire) != T_SCHEDULED ||
        eddy_loop_is_shutting_down(t->loop) || heap_push(&t->loop->timers, t) != 0) {
        /* Cancelled before it arrived, too late, or out of memory: it will never fire. */
        int expected = T_SCHEDULED;
        atomic_compare_exchange_strong(&t->state, &expected, T_CANCELLED);
        eddy_timer_release(t);
    }
}

static int64_t ms_to_ns(int64_t ms)
{
    if (ms <= 0) {
        return 0;
    }
    /* At most INT64_MAX / 2, as deadlines: a deadline plus a period then never overflows. */
    return ms > INT64_MAX / 2 / 1000000 ? INT64_MAX / 2 : ms * 1000000;
}

static int64_t after(const eddy_loop_t *loop, int64_t delay_ns)
{
    int64_t now = eddy__loop_now(loop);
    return delay_ns > INT64_MAX / 2 - now ? INT64_MAX / 2 : now + delay_ns;
}

/* A timer not yet scheduled, holding the caller's reference. */
static eddy_timer_t *timer_alloc(eddy_loop_t *loop, size_t extra, eddy_timer_cb cb, void *arg)
{
    assert(loop != NULL && cb != NULL);
    eddy_timer_t *t = malloc(sizeof(*t) + extra);
    if (t == NULL) {
        return NULL;
    }
    atomic_init(&t->refcnt, 1);
    atomic_init(&t->state, T_SCHEDULED);
    t->loop = loop;
    t->deadline = 0;
    t->period = 0;
    t->index = NOT_IN_HEAP;
    t->cb = cb;
    t->arg = arg;
    t->dtor = NULL;
    return t;
}

/* Give t to its loop's heap with a reference of its own: 0, or an error with t cancelled and
 * that reference dropped (the caller's stays). */
static int timer_start(eddy_timer_t *t, int64_t deadline, int64_t period)
{
    eddy_loop_t *loop = t->loop;
    t->deadline = deadline;
    t->period = period;
    if (eddy_loop_is_shutting_down(loop)) {
        atomic_store(&t->state, T_CANCELLED);
        return EDDY_ESHUTDOWN;
    }
    eddy_timer_retain(t); /* the heap's */
    int err = eddy_loop_in_event_loop(loop) ? heap_push(&loop->timers, t)
                                            : eddy_loop_execute(loop, insert_on_loop, t);
    if (err != 0) {
        atomic_store(&t->state, T_CANCELLED);
        eddy_timer_release(t);
    }
    return err;
}

static eddy_timer_t *schedule(eddy_loop_t *loop, int64_t deadline, int64_t period,
                              eddy_timer_cb cb, void *arg)
{
    if (eddy_loop_is_shutting_down(loop)) {
        return NULL;
    }
    eddy_timer_t *t = timer_alloc(loop, 0, cb, arg);
    if (t != NULL && timer_start(t, deadline, period) != 0) {
        eddy_timer_release(t);
        t = NULL;
    }
    return t;
}

eddy_timer_t *eddy__timer_new(eddy_loop_t *loop, eddy_timer_cb cb, size_t extra,
                              void (*dtor)(void *data))
{
    eddy_timer_t *t = timer_alloc(loop, extra, cb, NULL);
    if (t != NULL) {
        t->arg = t->data;
        t->dtor = dtor;
    }
    return t;
}

void *eddy__timer_data(eddy_timer_t *t)
{
    return t->data;
}

int eddy__timer_start(eddy_timer_t *t, int64_t delay_ns, int64_t period_ns)
{
    assert(atomic_load(&t->state) == T_SCHEDULED && t->index == NOT_IN_HEAP);
    /* No delay on the loop: due at the turn's cached time, so the timers of this turn run it
     * (after the I/O), as a task queued now would be; eddy__loop_now() would read a later
     * clock and cost the loop a turn. */
    int64_t deadline = delay_ns <= 0 && eddy_loop_in_event_loop(t->loop)
                           ? t->loop->now_ns
                           : after(t->loop, delay_ns > 0 ? delay_ns : 0);
    return timer_start(t, deadline, period_ns > 0 ? period_ns : 0);
}

eddy_timer_t *eddy_loop_schedule(eddy_loop_t *loop, int64_t delay_ms, eddy_timer_cb cb,
                                 void *arg)
{
    return schedule(loop, after(loop, ms_to_ns(delay_ms)), 0, cb, arg);
}

eddy_timer_t *eddy_loop_schedule_ns(eddy_loop_t *loop, int64_t delay_ns, eddy_timer_cb cb,
                                    void *arg)
{
    return schedule(loop, after(loop, delay_ns > 0 ? delay_ns : 0), 0, cb, arg);
}

eddy_timer_t *eddy_loop_schedule_at(eddy_loop_t *loop, int64_t deadline_ns, eddy_timer_cb cb,
                                    void *arg)
{
    return schedule(loop, deadline_ns, 0, cb, arg);
}

eddy_timer_t *eddy_loop_schedule_at_fixed_rate(eddy_loop_t *loop, int64_t initial_ms,
                                               int64_t period_ms, eddy_timer_cb cb, void *arg)
{
    if (period_ms <= 0) {
        return NULL;
    }
    return schedule(loop, after(loop, ms_to_ns(initial_ms)), ms_to_ns(period_ms), cb, arg);
}

eddy_timer_t *eddy_loop_schedule_with_fixed_delay(eddy_loop_t *loop, int64_t initial_ms,
                                                  int64_t delay_ms, eddy_timer_cb cb, void *arg)
{
    if (delay_ms <= 0) {
        return NULL;
    }
    return schedule(loop, after(loop, ms_to_ns(initial_ms)), -ms_to_ns(delay_ms), cb, arg);
}

static void remove_on_loop(void *arg)
{
    eddy_timer_t *t = arg;
    assert(atomic_load(&t->state) == T_CANCELLED); /* final: nothing moves a timer out */
    if (t->index != NOT_IN_HEAP) {
        heap_remove(&t->loop->timers, t);
        eddy_timer_release(t); /* the heap's reference */
    }
    eddy_timer_release(t); /* the task's */
}

int eddy_timer_cancel(eddy_timer_t *t)
{
    /* The state decides who wins against the loop's firing: one-shot timers move to DONE
     * before their callback, periodic ones to RUNNING for its length. */
    int expected = atomic_load(&t->state);
    do {
        if (expected != T_SCHEDULED && expected != T_RUNNING) {
            return EDDY_EALREADY;
        }
    } while (!atomic_compare_exchange_weak(&t->state, &expected, T_CANCELLED));
    eddy_loop_t *loop = t->loop;
    if (eddy_loop_in_event_loop(loop)) {
        if (t->index != NOT_IN_HEAP) {
            heap_remove(&loop->timers, t);
            eddy_timer_release(t);
        }
        return 0;
    }
    /* Off the loop: the heap is the loop's. The timer is already marked, so it cannot fire;
     * the removal task gives its memory back now rather than at its deadline. If the loop
     * refuses tasks it is shutting down and drops every timer itself. */
    eddy_timer_retain(t);
    if (eddy_loop_execute(loop, remove_on_loop, t) != 0) {
        eddy_timer_release(t);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Firing
 */

size_t eddy__timers_run_due(eddy_loop_t *loop, int64_t deadline_ns)
{
    eddy__assert_on_loop(loop);
    eddy__timer_heap_t *h = &loop->timers;
    size_t ran = 0;
    int64_t now = loop->now_ns;
    while (h->n > 0 && h->items[0].deadline <= now) {
        eddy_timer_t *t = h->items[0].timer;
        assert(t->loop == loop && t->deadline == h->items[0].deadline);
        heap_remove(h, t);
        if (atomic_load_explicit(&t->state, memory_order_acquire) != T_SCHEDULED) {
            eddy_timer_release(t);
            continue;
        }
        /* Unsigned: a deadline far in the past (schedule_at) must not overflow. */
        uint64_t lag = (uint64_t)now - (uint64_t)t->deadline;
        eddy__stat_add(&loop->m.lag_total_ns, lag);
        eddy__stat_max(&loop->m.lag_max_ns, lag);
        eddy__stat_add(&loop->m.timers_fired, 1);
        /* Claim the run: a cancel from another thread that got in first wins, and one that
         * comes later sees DONE (EALREADY) or stops only the runs after this one. */
        int expected = T_SCHEDULED;
        if (!atomic_compare_exchange_strong(&t->state, &expected,
                                            t->period == 0 ? T_DONE : T_RUNNING)) {
            eddy_timer_release(t);
            continue;
        }
        eddy__callback_begin(loop, (eddy__fnptr_t)t->cb);
        t->cb(t, t->arg);
        eddy__callback_end(loop);
        ran++;
        expected = T_RUNNING;
        if (t->period != 0 && !eddy_loop_is_shutting_down(loop) &&
            atomic_compare_exchange_strong(&t->state, &expected, T_SCHEDULED)) {
            if (t->period > 0) {
                /* Fixed rate: the next slot after now, skipping those missed entirely. */
                int64_t next = t->deadline + t->period;
                if (next <= now) {
                    next += ((now - next) / t->period + 1) * t->period;
                }
                t->deadline = next;
            } else {
                t->deadline = eddy__loop_now(loop) - t->period;
            }
            if (heap_push(h, t) == 0) {
                /* The budget counts periodic runs too. `now` stays: each periodic timer
                 * runs at most once a pass unless other timers move it. */
                if ((ran % 64) == 0 && eddy__loop_now(loop) >= deadline_ns) {
                    break;
                }
                continue;
            }
            atomic_store(&t->state, T_CANCELLED);
        } else if (t->period != 0) {
            /* Shutting down (or cancelled meanwhile): no more runs. */
            expected = T_RUNNING;
            atomic_compare_exchange_strong(&t->state, &expected, T_CANCELLED);
        }
        eddy_timer_release(t);
        if ((ran % 64) == 0) {
            now = loop->now_ns = eddy__loop_now(loop);
            if (now >= deadline_ns) {
                break;
            }
        }
    }
    return ran;
}

void eddy__timers_cancel_all(eddy_loop_t *loop)
{
    eddy__assert_on_loop(loop);
    eddy__timer_heap_t *h = &loop->timers;
    while (h->n > 0) {
        eddy_timer_t *t = h->items[--h->n].timer;
        assert(t->index == h->n);
        t->index = NOT_IN_HEAP;
        int expected = T_SCHEDULED;
        atomic_compare_exchange_strong(&t->state, &expected, T_CANCELLED);
        eddy_timer_release(t);
    }
}
