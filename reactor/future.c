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
#include "buffer/layer.h"
#include "reactor/internal.h"

#include <assert.h>
#include <stdalign.h>
#include <stdlib.h>
#include <time.h>

typedef struct listener_s {
    struct listener_s *next;
    eddy_future_cb cb;
    void *arg;
} listener_t;

struct eddy_future_s {
    _Atomic uint32_t refcnt;
    _Atomic bool done; /* release-stored after err and result: pairs with acquire readers */
    int err;
    void *result;
    eddy_loop_t *loop;
    void (*result_release)(void *result); /* the result's owner reference, dropped at free */
    listener_t *listeners; /* not yet run, newest first; under the stripe's lock, as waiters */
    int waiters;
    bool draining; /* done, and someone runs (or a task will run) the listeners: under the
                      stripe's lock; listeners added meanwhile join the list behind the others */
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
    if (loop != NULL) {
        eddy__loop_retain(loop); /* the future may outlive eddy_loop_free (loop.h) */
    }
    f->result_release = NULL;
    f->listeners = NULL;
    f->waiters = 0;
    f->draining = false;
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

eddy_future_t *eddy__future_new_done(int err, void *result, void (*release)(void *))
{
    eddy_future_t *f = future_new(NULL);
    if (f == NULL) {
        return NULL;
    }
    /* Nobody else has seen f: no listener or waiter to tell, so no stripe lock. The release
     * store still pairs with the acquire loads of readers on other threads. */
    f->err = err;
    f->result = result;
    f->result_release = release;
    atomic_store_explicit(&f->done, true, memory_order_release);
    return f;
}

/* NULL stands for a future a call could not make without memory: it reads as failed with
 * EDDY_ENOMEM (loop.h). */

eddy_future_t *eddy_future_retain(eddy_future_t *f)
{
    /* NULL stays NULL: it is the future a call could not make (above). */
    return f == NULL || eddy__refcnt_retain(&f->refcnt, "future", f) ? f : NULL;
}

_Atomic uint32_t *eddy__future_refcnt(eddy_future_t *f)
{
    return &f->refcnt;
}

void eddy_future_release(eddy_future_t *f)
{
    if (f == NULL || !eddy__refcnt_sub(&f->refcnt, 1)) {
        return;
    }
    assert(f->waiters == 0 && !f->draining); /* both hold a reference while they last */
    if (f->result_release != NULL) {
        f->result_release(f->result);
    }
    listener_t *l = f->listeners; /* never completed: listeners that will not run */
    while (l != NULL) {
        listener_t *next = l->next;
        free(l);
        l = next;
    }
    if (f->loop != NULL) {
        eddy__loop_release(f->loop);
    }
    free(f);
}

/*
 * Run the listeners of a completed future in the order added until none is left, listeners
 * added meanwhile included (they join the list while `draining` is set, so none overtakes an
 * earlier one). l: the list already taken under the lock (newest first), or NULL to take it
 * here. On the owner loop, or on the completing thread when there is none or the loop is gone.
 * The caller holds a reference: a listener may drop the last other one.
 */
static void drain(eddy_future_t *f, listener_t *l)
{
    assert(atomic_load_explicit(&f->done, memory_order_relaxed));
    stripe_t *st = stripe_of(f);
    for (;;) {
        if (l == NULL) {
            pthread_mutex_lock(&st->lock);
            l = f->listeners;
            f->listeners = NULL;
            if (l == NULL) {
                f->draining = false;
                pthread_mutex_unlock(&st->lock);
                return;
            }
            pthread_mutex_unlock(&st->lock);
        }
        listener_t *ordered = NULL; /* reverse the newest-first list */
        while (l != NULL) {
            listener_t *next = l->next;
            l->next = ordered;
            ordered = l;
            l = next;
        }
        while (ordered != NULL) {
            listener_t *next = ordered->next;
            ordered->cb(f, ordered->arg);
            free(ordered);
            ordered = next;
        }
    }
}

static void drain_task(void *arg)
{
    eddy_future_t *f = arg;
    drain(f, NULL);
    eddy_future_release(f);
}

/* Run the listeners on the owner loop, as a task: the caller set `draining`. */
static void drain_on_loop(eddy_future_t *f)
{
    assert(f->loop != NULL && f->draining);
    eddy_future_retain(f);
    if (eddy_loop_execute(f->loop, drain_task, f) != 0) {
        /* The owner loop is gone or going: run here rather than never. */
        drain(f, NULL);
        eddy_future_release(f);
    }
}

static int complete(eddy_future_t *f, int err, void *result, void (*result_release)(void *))
{
    assert(err <= 0); /* 0, or the failure's error */
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
    /* Set before the lock goes, so that a listener added once `done` shows queues behind
     * these instead of running first. Run here, the list is taken now (one lock fewer). */
    bool has_listeners = f->listeners != NULL;
    f->draining = has_listeners;
    bool here = f->loop == NULL || eddy_loop_in_event_loop(f->loop);
    listener_t *l = NULL;
    if (here) {
        l = f->listeners;
        f->listeners = NULL;
    }
    if (f->waiters > 0) {
        pthread_cond_broadcast(&st->cond); /* other futures' waiters re-check and sleep on */
    }
    pthread_mutex_unlock(&st->lock);
    /* The future stays alive while the listeners run (our reference) even if one of them, or
     * a waiter, drops the last other one. */
    if (has_listeners) {
        if (here) {
            drain(f, l);
        } else {
            drain_on_loop(f);
        }
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
    assert(release != NULL);
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
    assert(cb != NULL);
    listener_t *l = malloc(sizeof(*l));
    if (l == NULL) {
        return EDDY_ENOMEM;
    }
    l->cb = cb;
    l->arg = arg;
    stripe_t *st = stripe_of(f);
    pthread_mutex_lock(&st->lock);
    /* Pending, or behind listeners still to run, or on its way to the owner loop. */
    bool late = atomic_load_explicit(&f->done, memory_order_relaxed);
    if (!late || f->draining || (f->loop != NULL && !eddy_loop_in_event_loop(f->loop))) {
        l->next = f->listeners;
        f->listeners = l;
        bool start = late && !f->draining;
        if (start) {
            f->draining = true;
        }
        pthread_mutex_unlock(&st->lock);
        if (start) {
            drain_on_loop(f);
        }
        return 0;
    }
    pthread_mutex_unlock(&st->lock);
    l->cb(f, l->arg); /* done, on the owner loop (or none) with nothing before it: at once */
    free(l);
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
    assert(f->waiters > 0);
    f->waiters--;
    pthread_mutex_unlock(&st->lock);
    return rc;
}
