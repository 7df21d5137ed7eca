/*
 * Futures and promises (Netty's DefaultPromise): complete once, listeners on the owner loop,
 * await with a timeout from other threads.
 *
 * A future has no lock of its own: futures are many and small (promises of writes, close,
 * listen and connect futures), and a mutex and a condition variable each would make one 136 B
 * instead of 56 B. A fixed table of striped pairs, chosen by a hash of the future's address,
 * guards listeners and waiters instead. Futures sharing a stripe share its condition
 * variable: completion broadcasts and every waiter re-checks its own future's `done`.
 */
#include "reactor/loop_internal.h"

#include <stdalign.h>
#include <stdlib.h>
#include <time.h>

typedef struct listener_s {
    struct listener_s *next;
    eddy_future_cb cb;
    void *arg;
    eddy_future_t *f; /* set when the listener travels as a task: holds a reference */
} listener_t;

struct eddy_future_s {
    _Atomic uint32_t refcnt;
    _Atomic bool done; /* release-stored after err and result: pairs with acquire readers */
    int err;
    void *result;
    eddy_loop_t *loop;
    void (*result_release)(void *result); /* the result's owner reference, dropped at free */
    listener_t *listeners; /* newest first; under the stripe's lock, as waiters */
    int waiters;
    _Atomic int in_flight; /* listeners travelling to the owner loop as tasks */
};

/* 64 stripes: far more than threads that block on futures at once in practice (awaits are
 * for tests, shutdown and bootstraps); a collision costs a spurious wake-up, not a wrong
 * result. Each pair on its own cache lines, so loops completing futures do not share one. */
#define STRIPES_LOG2 6
#define STRIPES (1u << STRIPES_LOG2)

typedef struct stripe_s {
    alignas(128) pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC, for timed awaits */
} stripe_t;

static stripe_t stripes[STRIPES];
static pthread_once_t stripes_once = PTHREAD_ONCE_INIT;

static void stripes_init(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    for (size_t i = 0; i < STRIPES; i++) {
        pthread_mutex_init(&stripes[i].lock, NULL);
        pthread_cond_init(&stripes[i].cond, &attr);
    }
    pthread_condattr_destroy(&attr);
}

static stripe_t *stripe_of(const eddy_future_t *f)
{
    pthread_once(&stripes_once, stripes_init);
    /* Fibonacci hashing of the address: malloc's 16-byte alignment leaves the low bits
     * zero, the multiply spreads the rest into the top bits. */
    uint64_t h = (uint64_t)(uintptr_t)f * UINT64_C(0x9E3779B97F4A7C15);
    return &stripes[h >> (64 - STRIPES_LOG2)];
}

static eddy_future_t *future_new(eddy_loop_t *loop)
{
    eddy_future_t *f = malloc(sizeof(*f));
    if (f == NULL) {
        return NULL;
    }
    atomic_init(&f->refcnt, 1);
    atomic_init(&f->done, false);
    f->err = EDDY_EAGAIN;
    f->result = NULL;
    f->loop = loop;
    f->result_release = NULL;
    f->listeners = NULL;
    f->waiters = 0;
    atomic_init(&f->in_flight, 0);
    return f;
}

eddy_promise_t *eddy_promise_new(eddy_loop_t *loop)
{
    return future_new(loop);
}

eddy_future_t *eddy__future_new_unowned(void)
{
    return future_new(NULL);
}

/* NULL stands for a future a call could not make without memory: it reads as failed with
 * EDDY_ENOMEM (loop.h). */

eddy_future_t *eddy_future_retain(eddy_future_t *f)
{
    if (f != NULL) {
        atomic_fetch_add_explicit(&f->refcnt, 1, memory_order_relaxed);
    }
    return f;
}

void eddy_future_release(eddy_future_t *f)
{
    if (f == NULL || atomic_fetch_sub_explicit(&f->refcnt, 1, memory_order_acq_rel) != 1) {
        return;
    }
    if (f->result_release != NULL) {
        f->result_release(f->result);
    }
    listener_t *l = f->listeners; /* never completed: listeners that will not run */
    while (l != NULL) {
        listener_t *next = l->next;
        free(l);
        l = next;
    }
    free(f);
}

static void run_listener_task(void *arg)
{
    listener_t *l = arg;
    eddy_future_t *f = l->f;
    l->cb(f, l->arg);
    atomic_fetch_sub_explicit(&f->in_flight, 1, memory_order_release);
    free(l);
    eddy_future_release(f);
}

/*
 * Run l now when on the owner loop (or there is none), else as a task on the owner loop.
 * While earlier listeners are still on their way to the loop as tasks, a later one queues
 * behind them even on the loop, so listeners run in the order they were added.
 */
static void notify(eddy_future_t *f, listener_t *l)
{
    eddy_loop_t *loop = f->loop;
    if (loop != NULL && (!eddy_loop_in_event_loop(loop) ||
                         atomic_load_explicit(&f->in_flight, memory_order_acquire) > 0)) {
        l->f = eddy_future_retain(f);
        atomic_fetch_add_explicit(&f->in_flight, 1, memory_order_relaxed);
        if (eddy_loop_execute(loop, run_listener_task, l) == 0) {
            return;
        }
        /* The owner loop is gone or going: run here rather than never. */
        atomic_fetch_sub_explicit(&f->in_flight, 1, memory_order_relaxed);
        eddy_future_release(f);
    }
    l->cb(f, l->arg);
    free(l);
}

static int complete(eddy_future_t *f, int err, void *result, void (*result_release)(void *))
{
    /* Our own reference from before `done` is visible: a waiter may drop the last other
     * one the moment it sees the future complete, while we still notify listeners. */
    eddy_future_retain(f);
    stripe_t *st = stripe_of(f);
    pthread_mutex_lock(&st->lock);
    if (atomic_load_explicit(&f->done, memory_order_relaxed)) {
        pthread_mutex_unlock(&st->lock);
        eddy_future_release(f);
        return EDDY_EALREADY;
    }
    f->err = err;
    f->result = result;
    f->result_release = result_release;
    atomic_store_explicit(&f->done, true, memory_order_release);
    listener_t *l = f->listeners;
    f->listeners = NULL;
    if (f->waiters > 0) {
        pthread_cond_broadcast(&st->cond); /* other futures' waiters re-check and sleep on */
    }
    pthread_mutex_unlock(&st->lock);
    /* Listeners run in the order they were added: reverse the newest-first list. The
     * future stays alive while they run (our reference) even if one of them, or a waiter,
     * drops the last other one. */
    listener_t *ordered = NULL;
    while (l != NULL) {
        listener_t *next = l->next;
        l->next = ordered;
        ordered = l;
        l = next;
    }
    while (ordered != NULL) {
        listener_t *next = ordered->next;
        notify(f, ordered);
        ordered = next;
    }
    eddy_future_release(f);
    return 0;
}

int eddy_promise_succeed(eddy_promise_t *p, void *result)
{
    return complete(p, 0, result, NULL);
}

int eddy__promise_succeed_owned(eddy_promise_t *p, void *result, void (*release)(void *))
{
    int rc = complete(p, 0, result, release);
    if (rc != 0) {
        release(result); /* completed before: the reference is not the future's to keep */
    }
    return rc;
}

int eddy_promise_fail(eddy_promise_t *p, int err)
{
    if (err >= 0) {
        return EDDY_EINVAL;
    }
    return complete(p, err, NULL, NULL);
}

int eddy_future_cancel(eddy_future_t *f)
{
    return f != NULL ? complete(f, EDDY_ECANCELED, NULL, NULL) : EDDY_EALREADY;
}

bool eddy_future_is_done(const eddy_future_t *f)
{
    return f == NULL || atomic_load_explicit(&f->done, memory_order_acquire);
}

int eddy_future_error(const eddy_future_t *f)
{
    if (f == NULL) {
        return EDDY_ENOMEM;
    }
    return atomic_load_explicit(&f->done, memory_order_acquire) ? f->err : EDDY_EAGAIN;
}

void *eddy_future_result(const eddy_future_t *f)
{
    return f != NULL && atomic_load_explicit(&f->done, memory_order_acquire) ? f->result : NULL;
}

eddy_loop_t *eddy_future_loop(const eddy_future_t *f)
{
    return f != NULL ? f->loop : NULL;
}

int eddy_future_add_listener(eddy_future_t *f, eddy_future_cb cb, void *arg)
{
    if (f == NULL) {
        return EDDY_ENOMEM; /* cb is not called */
    }
    listener_t *l = malloc(sizeof(*l));
    if (l == NULL) {
        return EDDY_ENOMEM;
    }
    l->cb = cb;
    l->arg = arg;
    l->f = NULL;
    stripe_t *st = stripe_of(f);
    pthread_mutex_lock(&st->lock);
    if (!atomic_load_explicit(&f->done, memory_order_relaxed)) {
        l->next = f->listeners;
        f->listeners = l;
        pthread_mutex_unlock(&st->lock);
        return 0;
    }
    pthread_mutex_unlock(&st->lock);
    notify(f, l);
    return 0;
}

int eddy_future_await(eddy_future_t *f, int64_t timeout_ms)
{
    if (f == NULL) {
        return EDDY_ENOMEM;
    }
    if (atomic_load_explicit(&f->done, memory_order_acquire)) {
        return 0;
    }
    if (f->loop != NULL && eddy_loop_in_event_loop(f->loop)) {
        return EDDY_EDEADLK;
    }
    struct timespec until;
    if (timeout_ms >= 0) {
        int64_t t = eddy_now_ns() + timeout_ms * 1000000;
        until.tv_sec = t / 1000000000;
        until.tv_nsec = t % 1000000000;
    }
    int rc = 0;
    stripe_t *st = stripe_of(f);
    pthread_mutex_lock(&st->lock);
    f->waiters++;
    while (!atomic_load_explicit(&f->done, memory_order_relaxed)) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&st->cond, &st->lock);
        } else if (pthread_cond_timedwait(&st->cond, &st->lock, &until) != 0 &&
                   !atomic_load_explicit(&f->done, memory_order_relaxed)) {
            rc = EDDY_ETIMEDOUT;
            break;
        }
    }
    f->waiters--;
    pthread_mutex_unlock(&st->lock);
    return rc;
}
